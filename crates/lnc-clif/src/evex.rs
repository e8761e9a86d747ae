//! 512-bit wide loops: the EVEX forms of the instructions module `widen` widens, and the
//! re-encoding of a whole function with them.
//!
//! Setting the `L` bit of a VEX prefix makes an `xmm` instruction a `ymm` one of the
//! same length, in place. There is no such bit for `zmm`: a 512-bit instruction needs
//! the four-byte EVEX prefix, and a displacement that fitted in a byte may not fit in
//! EVEX's compressed one (scaled by the operand's size). So the function is decoded,
//! the widened instructions replaced by their EVEX forms (iced's encoder), every other
//! instruction moved by the growth in front of it, and the branches and RIP-relative
//! operands encoded again, in the same form, for their new places. What is not code
//! (Cranelift's constants after it) moves as a block and keeps its offset modulo 64. The
//! offsets of relocations move with the instructions holding them.
//!
//! Why: on this project's machine (Zen 5), a layer-norm forward written with intrinsics
//! ran its fp16 passes over rows in the cache 1.4–1.6× faster in 512 bits than in 256
//! (one thread), and lnc's seed forward in fp16 1.5–1.9× (2 threads).

use iced_x86::{Code, Encoder, Instruction, MemoryOperand, Mnemonic, OpKind, Register};

use crate::widen::Unproven;

/// The EVEX form on `zmm` registers of the VEX form on `xmm` registers `c`, for the
/// instructions module `widen` widens. `None` for the others: the comparisons and blends,
/// whose EVEX forms write mask registers instead of vectors, among them.
pub(crate) fn zmm_code(c: Code) -> Option<Code> {
    use Code::*;
    Some(match c {
        VEX_Vaddps_xmm_xmm_xmmm128 => EVEX_Vaddps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vsubps_xmm_xmm_xmmm128 => EVEX_Vsubps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vmulps_xmm_xmm_xmmm128 => EVEX_Vmulps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vdivps_xmm_xmm_xmmm128 => EVEX_Vdivps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vsqrtps_xmm_xmmm128 => EVEX_Vsqrtps_zmm_k1z_zmmm512b32_er,
        VEX_Vminps_xmm_xmm_xmmm128 => EVEX_Vminps_zmm_k1z_zmm_zmmm512b32_sae,
        VEX_Vmaxps_xmm_xmm_xmmm128 => EVEX_Vmaxps_zmm_k1z_zmm_zmmm512b32_sae,
        VEX_Vandps_xmm_xmm_xmmm128 => EVEX_Vandps_zmm_k1z_zmm_zmmm512b32,
        VEX_Vandnps_xmm_xmm_xmmm128 => EVEX_Vandnps_zmm_k1z_zmm_zmmm512b32,
        VEX_Vorps_xmm_xmm_xmmm128 => EVEX_Vorps_zmm_k1z_zmm_zmmm512b32,
        VEX_Vxorps_xmm_xmm_xmmm128 => EVEX_Vxorps_zmm_k1z_zmm_zmmm512b32,
        VEX_Vfmadd132ps_xmm_xmm_xmmm128 => EVEX_Vfmadd132ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfmadd213ps_xmm_xmm_xmmm128 => EVEX_Vfmadd213ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfmadd231ps_xmm_xmm_xmmm128 => EVEX_Vfmadd231ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfmsub132ps_xmm_xmm_xmmm128 => EVEX_Vfmsub132ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfmsub213ps_xmm_xmm_xmmm128 => EVEX_Vfmsub213ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfmsub231ps_xmm_xmm_xmmm128 => EVEX_Vfmsub231ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmadd132ps_xmm_xmm_xmmm128 => EVEX_Vfnmadd132ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmadd213ps_xmm_xmm_xmmm128 => EVEX_Vfnmadd213ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmadd231ps_xmm_xmm_xmmm128 => EVEX_Vfnmadd231ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmsub132ps_xmm_xmm_xmmm128 => EVEX_Vfnmsub132ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmsub213ps_xmm_xmm_xmmm128 => EVEX_Vfnmsub213ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vfnmsub231ps_xmm_xmm_xmmm128 => EVEX_Vfnmsub231ps_zmm_k1z_zmm_zmmm512b32_er,
        VEX_Vmovaps_xmm_xmmm128 => EVEX_Vmovaps_zmm_k1z_zmmm512,
        VEX_Vmovaps_xmmm128_xmm => EVEX_Vmovaps_zmmm512_k1z_zmm,
        VEX_Vmovups_xmm_xmmm128 => EVEX_Vmovups_zmm_k1z_zmmm512,
        VEX_Vmovups_xmmm128_xmm => EVEX_Vmovups_zmmm512_k1z_zmm,
        VEX_Vmovdqa_xmm_xmmm128 => EVEX_Vmovdqa32_zmm_k1z_zmmm512,
        VEX_Vmovdqa_xmmm128_xmm => EVEX_Vmovdqa32_zmmm512_k1z_zmm,
        VEX_Vmovdqu_xmm_xmmm128 => EVEX_Vmovdqu32_zmm_k1z_zmmm512,
        VEX_Vmovdqu_xmmm128_xmm => EVEX_Vmovdqu32_zmmm512_k1z_zmm,
        // Cranelift's moves between vector registers, which it encodes without VEX
        // (module `widen` takes only their register forms).
        Movaps_xmm_xmmm128 | Movapd_xmm_xmmm128 => EVEX_Vmovaps_zmm_k1z_zmmm512,
        Movaps_xmmm128_xmm | Movapd_xmmm128_xmm => EVEX_Vmovaps_zmmm512_k1z_zmm,
        Movups_xmm_xmmm128 | Movupd_xmm_xmmm128 => EVEX_Vmovups_zmm_k1z_zmmm512,
        Movups_xmmm128_xmm | Movupd_xmmm128_xmm => EVEX_Vmovups_zmmm512_k1z_zmm,
        Movdqa_xmm_xmmm128 => EVEX_Vmovdqa32_zmm_k1z_zmmm512,
        Movdqa_xmmm128_xmm => EVEX_Vmovdqa32_zmmm512_k1z_zmm,
        Movdqu_xmm_xmmm128 => EVEX_Vmovdqu32_zmm_k1z_zmmm512,
        Movdqu_xmmm128_xmm => EVEX_Vmovdqu32_zmmm512_k1z_zmm,
        VEX_Vpand_xmm_xmm_xmmm128 => EVEX_Vpandd_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpandn_xmm_xmm_xmmm128 => EVEX_Vpandnd_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpor_xmm_xmm_xmmm128 => EVEX_Vpord_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpxor_xmm_xmm_xmmm128 => EVEX_Vpxord_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpaddd_xmm_xmm_xmmm128 => EVEX_Vpaddd_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpsubd_xmm_xmm_xmmm128 => EVEX_Vpsubd_zmm_k1z_zmm_zmmm512b32,
        VEX_Vpslld_xmm_xmm_imm8 => EVEX_Vpslld_zmm_k1z_zmmm512b32_imm8,
        VEX_Vpsrld_xmm_xmm_imm8 => EVEX_Vpsrld_zmm_k1z_zmmm512b32_imm8,
        VEX_Vpsrad_xmm_xmm_imm8 => EVEX_Vpsrad_zmm_k1z_zmmm512b32_imm8,
        VEX_Vcvtdq2ps_xmm_xmmm128 => EVEX_Vcvtdq2ps_zmm_k1z_zmmm512b32_er,
        VEX_Vcvttps2dq_xmm_xmmm128 => EVEX_Vcvttps2dq_zmm_k1z_zmmm512b32_sae,
        // The source stays a scalar: an `xmm` register or 32 bits of memory.
        VEX_Vbroadcastss_xmm_xmm | VEX_Vbroadcastss_xmm_m32 => EVEX_Vbroadcastss_zmm_k1z_xmmm32,
        // Sixteen halves: 32 bytes of memory, once 8.
        VEX_Vcvtph2ps_xmm_xmmm64 => EVEX_Vcvtph2ps_zmm_k1z_ymmm256_sae,
        VEX_Vcvtps2ph_xmmm64_xmm_imm8 => EVEX_Vcvtps2ph_ymmm256_k1z_zmm_imm8_sae,
        VEX_Vpmovzxwd_xmm_xmmm64 => EVEX_Vpmovzxwd_zmm_k1z_ymmm256,
        VEX_Vmovntps_m128_xmm => EVEX_Vmovntps_m512_zmm,
        _ => return None,
    })
}

/// `ins`, a VEX instruction on `xmm` registers, as its EVEX form on `zmm` registers with
/// the same operands ([`zmm_code`]); a broadcast's source stays as it is. `None` when
/// there is no such form, or `ins` uses a register EVEX cannot widen.
pub(crate) fn to_zmm(ins: &Instruction) -> Option<Instruction> {
    let code = zmm_code(ins.code())?;
    let mut w = *ins;
    w.set_code(code);
    compress(&mut w);
    for k in 0..ins.op_count() {
        if ins.op_kind(k) != OpKind::Register {
            continue;
        }
        let r = ins.op_register(k);
        if !r.is_xmm() || (k == 1 && ins.mnemonic() == Mnemonic::Vbroadcastss) {
            continue;
        }
        w.set_op_register(k, zmm(r.number())?);
    }
    Some(w)
}

/// The store of the `fp16` wide part that `ins` (`vcvtps2ph m64, xmm, imm`) stores:
/// `vcvtps2ph ymm16, zmm, imm` then `vmovdqu16 m256, ymm16`, or `vmovntdq` when `streams`
/// ([`through_ymm16`]). The conversion's own memory form, `vcvtps2ph m256, zmm, imm`,
/// costs the same in the cache but not on rows written back to memory: the seed forward
/// in fp16 at N = 1024 (M = 4096, 2 threads, caches flushed, one process alternating the
/// two) took 18–20 % longer with it, and 10 % at N = 2048.
pub(crate) fn store_f16(ins: &Instruction, streams: bool) -> Result<Vec<Instruction>, Unproven> {
    let fail = || Unproven(format!("the fp16 store at {:#x} is {:?}", ins.ip(), ins.code()));
    let src = placeholder_source(ins, Code::VEX_Vcvtps2ph_xmmm64_xmm_imm8).ok_or_else(fail)?;
    let imm = u32::from(ins.immediate8());
    let convert =
        Instruction::with3(Code::EVEX_Vcvtps2ph_ymmm256_k1z_zmm_imm8_sae, Register::YMM16, src, imm)
            .map_err(|_| fail())?;
    through_ymm16(ins, convert, streams).ok_or_else(fail)
}

/// The store of the `bf16` wide part that `ins` (`vpextrq m64, xmm, 0`, module `wide`'s
/// `store_bf16`) stores, its bits in the low halves of 32-bit lanes: `vpmovdw ymm16, zmm`
/// then `vmovdqu16 m256, ymm16`, or `vmovntdq` when `streams` ([`through_ymm16`]). As
/// for `fp16` ([`store_f16`]), the memory form `vpmovdw m256, zmm` was slower on rows
/// written back to memory: 2–6 % on the seed forward in bf16 at N = 768–2048.
pub(crate) fn store_bf16(ins: &Instruction, streams: bool) -> Result<Vec<Instruction>, Unproven> {
    let fail = || Unproven(format!("the bf16 store at {:#x} is {:?}", ins.ip(), ins.code()));
    let src = placeholder_source(ins, Code::VEX_Vpextrq_rm64_xmm_imm8).ok_or_else(fail)?;
    let narrow =
        Instruction::with2(Code::EVEX_Vpmovdw_ymmm256_k1z_zmm, Register::YMM16, src).map_err(|_| fail())?;
    through_ymm16(ins, narrow, streams).ok_or_else(fail)
}

/// The store of the 16 `f32` lanes that `ins` (`vpextrq m64, xmm, 0`, module `wide`'s
/// `store_bf16` with `bf16_cvt`) stores, rounded to `bf16`:
///
/// ```text
///     vfpclassps    k1, zmm, 0x20          ; the subnormal lanes
///     vcvtneps2bf16 ymm16, zmm
///     kortestw      k1, k1
///     jz            store
///     (zmm17 = (bits + 0x7FFF + lsb) >> 16, without constants)
///     vpmovdw       ymm16{k1}, zmm17
/// store:
///     vmovdqu16     m256, ymm16            ; `streams`: vmovntdq
/// ```
///
/// `vcvtneps2bf16` rounds to nearest even and quiets a NaN as `f32_to_bf16` does (the
/// high half with bit 6 set), whatever the MXCSR says, but it reads a subnormal input as
/// zero: those lanes, which need no NaN handling, take the integer rounding instead,
/// behind a branch that layer-norm data never takes. `k1` and `zmm16`–`zmm18` are free:
/// Cranelift allocates none of them, and the flags `kortestw` sets are dead across a
/// store (Cranelift emits a comparison next to the branch or select that reads it).
pub(crate) fn convert_bf16(ins: &Instruction, streams: bool) -> Result<Vec<Instruction>, Unproven> {
    let fail = || Unproven(format!("the bf16 conversion at {:#x} is {:?}", ins.ip(), ins.code()));
    let src = placeholder_source(ins, Code::VEX_Vpextrq_rm64_xmm_imm8).ok_or_else(fail)?;
    let (t, ones) = (Register::ZMM17, Register::ZMM18);
    let i3 = |c, a, b, imm: u32| Instruction::with3(c, a, b, imm).map_err(|_| fail());
    let r3 = |c, a, b, d| Instruction::with3(c, a, b, d).map_err(|_| fail());
    let mut narrow =
        Instruction::with2(Code::EVEX_Vpmovdw_ymmm256_k1z_zmm, Register::YMM16, t).map_err(|_| fail())?;
    narrow.set_op_mask(Register::K1);
    let subnormal = [
        i3(Code::EVEX_Vpsrld_zmm_k1z_zmmm512b32_imm8, t, src, 16)?,
        i3(Code::EVEX_Vpslld_zmm_k1z_zmmm512b32_imm8, t, t, 31)?,
        i3(Code::EVEX_Vpsrld_zmm_k1z_zmmm512b32_imm8, t, t, 31)?,
        r3(Code::EVEX_Vpaddd_zmm_k1z_zmm_zmmm512b32, t, t, src)?,
        Instruction::with4(Code::EVEX_Vpternlogd_zmm_k1z_zmm_zmmm512b32_imm8, ones, ones, ones, 0xffu32)
            .map_err(|_| fail())?,
        i3(Code::EVEX_Vpsrld_zmm_k1z_zmmm512b32_imm8, ones, ones, 17)?,
        r3(Code::EVEX_Vpaddd_zmm_k1z_zmm_zmmm512b32, t, t, ones)?,
        i3(Code::EVEX_Vpsrld_zmm_k1z_zmmm512b32_imm8, t, t, 16)?,
        narrow,
    ];
    // The branch skips the fix-up's bytes, which do not depend on where they land.
    let mut enc = Encoder::new(64);
    let mut skip = 0usize;
    for x in &subnormal {
        skip += enc.encode(x, 0).map_err(|_| fail())?;
    }
    let skip = u8::try_from(skip).ok().filter(|&n| n < 0x80).ok_or_else(fail)?;
    let mut out = vec![
        i3(Code::EVEX_Vfpclassps_kr_k1_zmmm512b32_imm8, Register::K1, src, 0x20)?,
        Instruction::with2(Code::EVEX_Vcvtneps2bf16_ymm_k1z_zmmm512b32, Register::YMM16, src)
            .map_err(|_| fail())?,
        Instruction::with2(Code::VEX_Kortestw_kr_kr, Register::K1, Register::K1).map_err(|_| fail())?,
        // `jz rel8`.
        Instruction::with_declare_byte_2(0x74, skip),
    ];
    out.extend(subnormal);
    out.push(ymm16_store(ins, streams).ok_or_else(fail)?);
    Ok(out)
}

/// The `zmm` register whose wide part the half store placeholder `ins` stores, when `ins`
/// is `code` writing memory (`vpextrq` of lane 0: the low 64 bits, all Cranelift knows of).
fn placeholder_source(ins: &Instruction, code: Code) -> Option<Register> {
    let low = code != Code::VEX_Vpextrq_rm64_xmm_imm8 || ins.immediate8() == 0;
    if ins.code() != code || ins.op0_kind() != OpKind::Memory || !low {
        return None;
    }
    zmm(ins.op1_register().number())
}

/// `first`, which leaves 32 bytes in `ymm16`, then their store to `ins`'s memory operand:
/// non-temporal when `streams` (`vmovntdq m256, ymm16`, which x86 has no converting form
/// of), else `vmovdqu16 m256, ymm16`. `ymm16` is free: Cranelift allocates the first
/// sixteen vector registers only, and EVEX reaches the others.
fn through_ymm16(ins: &Instruction, first: Instruction, streams: bool) -> Option<Vec<Instruction>> {
    Some(vec![first, ymm16_store(ins, streams)?])
}

/// The store of `ymm16` to `ins`'s memory operand ([`through_ymm16`]).
fn ymm16_store(ins: &Instruction, streams: bool) -> Option<Instruction> {
    let code = if streams { Code::EVEX_Vmovntdq_m256_ymm } else { Code::EVEX_Vmovdqu16_ymmm256_k1z_ymm };
    Instruction::with2(code, memory_of(ins), Register::YMM16).ok()
}

/// The memory operand of `ins`, its displacement in EVEX's compressed byte where it fits.
fn memory_of(ins: &Instruction) -> MemoryOperand {
    let disp = ins.memory_displacement64() as i64;
    let size = if disp != 0 && ins.memory_base() != Register::RIP { 1 } else { ins.memory_displ_size() };
    MemoryOperand::new(
        ins.memory_base(),
        ins.memory_index(),
        ins.memory_index_scale(),
        disp,
        size,
        false,
        ins.segment_prefix(),
    )
}

/// Asks the encoder for EVEX's compressed byte displacement (a multiple of the operand's
/// size) where it fits, a dword where not: `[rdi + 0x80]` of a 64-byte operand takes one
/// byte, as `[rdi + 0x10]` did for 16.
fn compress(ins: &mut Instruction) {
    let memory = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory);
    if memory && ins.memory_base() != Register::RIP && ins.memory_displacement64() != 0 {
        ins.set_memory_displ_size(1);
    }
}

/// `zmm` register number `n`.
fn zmm(n: usize) -> Option<Register> {
    Register::try_from(Register::ZMM0 as usize + n).ok().filter(|r| r.is_zmm())
}

/// The function `code`, whose reachable instructions are `insts` (in address order,
/// decoded with their offsets as addresses), encoded again with `widened[i]` replacing
/// `insts[i]` where it is not empty (one instruction; for a half store, the sequence
/// through `ymm16`, whose only branch, [`convert_bf16`]'s, is raw bytes jumping within
/// it). Every other instruction keeps its bytes, but the branches and RIP-relative
/// operands, encoded again in the same form for their new places; bytes between
/// instructions move with them. The offsets of `relocs` are moved to where their
/// instructions land.
pub(crate) fn reencode(
    code: &[u8],
    insts: &[Instruction],
    widened: &[Vec<Instruction>],
    relocs: &mut [u32],
) -> Result<Vec<u8>, Unproven> {
    let fail = |what: String| Unproven(format!("re-encoding: {what}"));
    let data_start = insts.last().map_or(0, |i| i.next_ip() as usize);
    let mut enc = Encoder::new(64);
    // The new length of each instruction: a displacement's size, which EVEX's compressed
    // form may shrink or grow, does not depend on where the instruction lands.
    let mut at = Vec::with_capacity(insts.len() + 1);
    let mut lens = Vec::with_capacity(insts.len());
    let mut growth = 0isize;
    for (i, w) in insts.iter().zip(widened) {
        at.push((i.ip() as isize + growth) as usize);
        let mut n = i.len();
        if !w.is_empty() {
            n = 0;
            for x in w {
                n += enc.encode(x, i.ip()).map_err(|e| fail(format!("{e} at {:#x}", i.ip())))?;
            }
            growth += n as isize - i.len() as isize;
        }
        lens.push(n);
    }
    let _ = enc.take_buffer();
    // The data keeps its offset modulo 64 (the alignment Cranelift gave it): it moves by
    // the growth rounded up to a multiple of 64.
    let new_data = (data_start as isize + (growth + 63).div_euclid(64) * 64) as usize;
    let code_end = (data_start as isize + growth) as usize;
    let new_ip = |old: u64| -> Result<u64, Unproven> {
        let old = old as usize;
        if old >= data_start {
            return Ok((old - data_start + new_data) as u64);
        }
        let k = insts.partition_point(|i| (i.ip() as usize) < old);
        match insts.get(k) {
            Some(i) if i.ip() as usize == old => Ok(at[k] as u64),
            _ => Err(fail(format!("a reference to {old:#x}, not an instruction"))),
        }
    };
    let mut out = Vec::with_capacity(new_data + code.len() - data_start);
    debug_assert!(new_data >= code_end && new_data % 64 == data_start % 64);
    let mut old_end = 0usize;
    for (k, (i, w)) in insts.iter().zip(widened).enumerate() {
        // Bytes no path runs (Cranelift leaves none between instructions in practice).
        out.extend_from_slice(&code[old_end..i.ip() as usize]);
        old_end = i.next_ip() as usize;
        let branch = matches!(i.op0_kind(), OpKind::NearBranch64);
        let rip = i.is_ip_rel_memory_operand();
        if w.is_empty() && !branch && !rip {
            out.extend_from_slice(&code[i.ip() as usize..old_end]);
            continue;
        }
        let mut ip = at[k] as u64;
        for ins in if w.is_empty() { std::slice::from_ref(i) } else { &w[..] } {
            let mut ins = *ins;
            if branch {
                ins.set_near_branch64(new_ip(i.near_branch64())?);
            }
            if ins.is_ip_rel_memory_operand() {
                ins.set_memory_displacement64(new_ip(i.ip_rel_memory_address())?);
            }
            ip += enc.encode(&ins, ip).map_err(|e| fail(format!("{e} at {:#x}", i.ip())))? as u64;
        }
        // Each instruction takes the length the layout gave it: a branch that lands
        // inside another cannot come from two differences cancelling out.
        if ip as usize - at[k] != lens[k] {
            return Err(fail(format!("the instruction at {:#x} changed length", i.ip())));
        }
        out.extend_from_slice(&enc.take_buffer());
    }
    if out.len() != code_end {
        return Err(fail(format!("{} bytes of code, {code_end} expected", out.len())));
    }
    for r in relocs.iter_mut() {
        let k = insts.partition_point(|i| i.next_ip() <= u64::from(*r));
        let i = insts
            .get(k)
            .filter(|i| i.ip() <= u64::from(*r))
            .ok_or_else(|| fail(format!("relocation at {r:#x}")))?;
        if !widened[k].is_empty() {
            return Err(fail(format!("a relocation at {r:#x} in a widened instruction")));
        }
        *r = (at[k] + (*r as usize - i.ip() as usize)) as u32;
    }
    out.resize(new_data, 0xcc);
    out.extend_from_slice(&code[data_start..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions, MemoryOperand};

    use super::*;

    fn assemble(insts: &[Instruction]) -> (Vec<u8>, Vec<Instruction>) {
        let mut enc = Encoder::new(64);
        let mut code = Vec::new();
        let mut decoded = Vec::new();
        for i in insts {
            let at = code.len() as u64;
            enc.encode(i, at).expect("encodes");
            let bytes = enc.take_buffer();
            let mut d = Decoder::with_ip(64, &bytes, at, DecoderOptions::NONE);
            decoded.push(d.decode());
            code.extend_from_slice(&bytes);
        }
        (code, decoded)
    }

    /// `vaddps xmm1, xmm2, xmm3`.
    fn vaddps() -> Instruction {
        Instruction::with3(Code::VEX_Vaddps_xmm_xmm_xmmm128, Register::XMM1, Register::XMM2, Register::XMM3)
            .expect("vaddps")
    }

    /// `vmovups xmm, [base + displ]`.
    fn vmovups(reg: Register, base: Register, displ: i64) -> Instruction {
        Instruction::with2(Code::VEX_Vmovups_xmm_xmmm128, reg, MemoryOperand::with_base_displ(base, displ))
            .expect("vmovups")
    }

    fn decode_all(code: &[u8], end: usize) -> Vec<Instruction> {
        let mut d = Decoder::with_ip(64, &code[..end], 0, DecoderOptions::NONE);
        let mut out = Vec::new();
        while d.can_decode() {
            out.push(d.decode());
        }
        out
    }

    #[test]
    fn widened_instructions_take_evex_forms_on_zmm_registers() {
        let add = vaddps();
        let w = to_zmm(&add).expect("has a 512-bit form");
        assert_eq!(w.code(), Code::EVEX_Vaddps_zmm_k1z_zmm_zmmm512b32_er);
        assert_eq!(
            (w.op0_register(), w.op1_register(), w.op2_register()),
            (Register::ZMM1, Register::ZMM2, Register::ZMM3)
        );
        // A broadcast keeps its scalar source.
        let b = Instruction::with2(Code::VEX_Vbroadcastss_xmm_xmm, Register::XMM4, Register::XMM5)
            .expect("bcast");
        let w = to_zmm(&b).expect("has a 512-bit form");
        assert_eq!((w.op0_register(), w.op1_register()), (Register::ZMM4, Register::XMM5));
        // A comparison's EVEX form writes a mask register: not widened.
        let cmp = Instruction::with4(
            Code::VEX_Vcmpps_xmm_xmm_xmmm128_imm8,
            Register::XMM0,
            Register::XMM1,
            Register::XMM2,
            1,
        )
        .expect("cmp");
        assert!(to_zmm(&cmp).is_none());
    }

    #[test]
    fn an_fp16_store_converts_into_ymm16_and_stores_it_streamed_or_cached() {
        let store = Instruction::with3(
            Code::VEX_Vcvtps2ph_xmmm64_xmm_imm8,
            MemoryOperand::with_base_index_scale_displ_size(Register::RAX, Register::RCX, 2, 32, 1),
            Register::XMM3,
            0u32,
        )
        .expect("store");
        let (_, decoded) = assemble(&[store]);
        let pair = store_f16(&decoded[0], true).expect("rewritten");
        assert_eq!(pair[0].code(), Code::EVEX_Vcvtps2ph_ymmm256_k1z_zmm_imm8_sae);
        assert_eq!((pair[0].op0_register(), pair[0].op1_register()), (Register::YMM16, Register::ZMM3));
        assert_eq!(pair[1].code(), Code::EVEX_Vmovntdq_m256_ymm);
        assert_eq!(pair[1].op1_register(), Register::YMM16);
        assert_eq!(
            (
                pair[1].memory_base(),
                pair[1].memory_index(),
                pair[1].memory_index_scale(),
                pair[1].memory_displacement64()
            ),
            (Register::RAX, Register::RCX, 2, 32)
        );
        // Cached: the same conversion, then a plain store of `ymm16`.
        let pair = store_f16(&decoded[0], false).expect("rewritten");
        assert_eq!(pair[0].code(), Code::EVEX_Vcvtps2ph_ymmm256_k1z_zmm_imm8_sae);
        assert_eq!(
            (pair[1].code(), pair[1].op1_register()),
            (Code::EVEX_Vmovdqu16_ymmm256_k1z_ymm, Register::YMM16)
        );
        // Anything else is refused.
        let add = vaddps();
        assert!(store_f16(&add, true).is_err());
    }

    #[test]
    fn a_bf16_conversion_branches_over_the_fix_up_of_subnormal_lanes_to_the_store() {
        for streams in [false, true] {
            let store = Instruction::with3(
                Code::VEX_Vpextrq_rm64_xmm_imm8,
                MemoryOperand::with_base_index_scale_displ_size(Register::RDX, Register::RSI, 2, 64, 1),
                Register::XMM5,
                0u32,
            )
            .expect("store");
            let (_, decoded) = assemble(&[store]);
            let seq = convert_bf16(&decoded[0], streams).expect("rewritten");
            let mut enc = Encoder::new(64);
            let mut code = Vec::new();
            for i in &seq {
                enc.encode(i, code.len() as u64).expect("encodes");
                code.extend_from_slice(&enc.take_buffer());
            }
            let got = decode_all(&code, code.len());
            let mnemonics: Vec<Mnemonic> = got.iter().map(|i| i.mnemonic()).collect();
            use Mnemonic::*;
            let last = if streams { Vmovntdq } else { Vmovdqu16 };
            assert_eq!(
                mnemonics,
                [
                    Vfpclassps,
                    Vcvtneps2bf16,
                    Kortestw,
                    Je,
                    Vpsrld,
                    Vpslld,
                    Vpsrld,
                    Vpaddd,
                    Vpternlogd,
                    Vpsrld,
                    Vpaddd,
                    Vpsrld,
                    Vpmovdw,
                    last
                ]
            );
            // The branch lands on the store, which writes what the conversion made.
            let store = got.last().expect("a store");
            assert_eq!(got[3].near_branch_target(), store.ip());
            assert_eq!(got[0].immediate8(), 0x20, "the subnormal class");
            assert_eq!((got[1].op0_register(), got[1].op1_register()), (Register::YMM16, Register::ZMM5));
            assert_eq!((got[12].op0_register(), got[12].op_mask()), (Register::YMM16, Register::K1));
            assert!(!got[12].zeroing_masking(), "the other lanes keep the conversion's bits");
            assert_eq!(store.op1_register(), Register::YMM16);
            assert_eq!(
                (
                    store.memory_base(),
                    store.memory_index(),
                    store.memory_index_scale(),
                    store.memory_displacement64()
                ),
                (Register::RDX, Register::RSI, 2, 64)
            );
        }
        assert!(convert_bf16(&vaddps(), false).is_err());
    }

    #[test]
    fn a_displacement_compressed_by_evex_shrinks_the_code() {
        // vmovups xmm0, [rdi+0x80]: a dword displacement in VEX, a byte (2 × 64) in EVEX.
        let load = vmovups(Register::XMM0, Register::RDI, 0x80);
        let rip = vmovups(Register::XMM1, Register::RIP, 64);
        let jmp = Instruction::with_branch(Code::Jmp_rel32_64, 0).expect("jmp");
        let (mut code, insts) = assemble(&[load, rip, jmp]);
        code.resize(64, 0xcc);
        code.extend_from_slice(&[0xcd; 16]);
        let widened: Vec<Vec<Instruction>> = insts
            .iter()
            .enumerate()
            .map(|(k, i)| if k == 0 { to_zmm(i).into_iter().collect() } else { Vec::new() })
            .collect();
        let out = reencode(&code, &insts, &widened, &mut []).expect("re-encodes");
        let new = decode_all(&out, insts.iter().map(|i| i.len()).sum::<usize>() - 1);
        assert_eq!(new[0].code(), Code::EVEX_Vmovups_zmm_k1z_zmmm512);
        assert_eq!(new[0].memory_displacement64(), 0x80);
        assert_eq!(new[0].len(), insts[0].len() - 1, "a byte displacement");
        assert_eq!(new[2].near_branch64(), 0);
        let moved = new[1].ip_rel_memory_address() as usize;
        assert_eq!((moved % 64, &out[moved..moved + 16]), (0, &[0xcd; 16][..]));
        assert_eq!(out.len(), code.len(), "the data keeps its place: the code shrank by less than 64 bytes");
    }

    #[test]
    fn reencoding_moves_branches_data_and_relocations_with_the_code() {
        // 0: vmovups xmm0, [rdi+16]  (widened: its byte displacement becomes a dword, 16
        //    not being a multiple of 64)
        // then a branch back to it, a RIP-relative load of the data after the code, a
        // `mov rax, imm64` holding a relocation, and a return.
        let load = vmovups(Register::XMM0, Register::RDI, 16);
        let jmp = Instruction::with_branch(Code::Jne_rel32_64, 0).expect("jne");
        let rip = vmovups(Register::XMM1, Register::RIP, 64);
        let mov =
            Instruction::with2(Code::Mov_r64_imm64, Register::RAX, 0x1122_3344_5566_7788u64).expect("mov");
        let ret = Instruction::with(Code::Retnq);
        let (mut code, insts) = assemble(&[load, jmp, rip, mov, ret]);
        let data_start = code.len();
        code.resize(64, 0xcc);
        code.extend_from_slice(&[0xab; 16]);
        // The decoded RIP-relative load names the data at 64.
        assert_eq!(insts[2].ip_rel_memory_address(), 64);
        let widened: Vec<Vec<Instruction>> = insts
            .iter()
            .enumerate()
            .map(|(k, i)| if k == 0 { to_zmm(i).into_iter().collect() } else { Vec::new() })
            .collect();
        let mov_imm = insts[3].ip() as u32 + 2;
        let mut relocs = [mov_imm];
        // The gap after the code is data to the re-encoder: keep it as it was.
        let out = reencode(&code, &insts[..], &widened, &mut relocs).expect("re-encodes");
        let new = decode_all(&out, out.len() - (code.len() - data_start));
        assert_eq!(new[0].code(), Code::EVEX_Vmovups_zmm_k1z_zmmm512);
        assert_eq!(new[0].memory_displacement64(), 16);
        let growth = new[0].len() - insts[0].len();
        assert!(growth > 0);
        assert_eq!(new[1].near_branch64(), 0, "the branch still goes to the load");
        // The data moved by the growth rounded to 64 bytes, and the load follows it.
        let moved = new[2].ip_rel_memory_address() as usize;
        assert_eq!(moved % 64, 0);
        assert_eq!(&out[moved..moved + 16], &[0xab; 16]);
        assert_eq!(relocs[0] as usize, mov_imm as usize + growth);
        assert_eq!(&out[relocs[0] as usize..relocs[0] as usize + 8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(new[4].code(), Code::Retnq);
    }
}
