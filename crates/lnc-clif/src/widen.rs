//! Widens the code of wide loops (module `wide`) to 256-bit vectors, after Cranelift (or
//! to 512-bit ones, module `evex`, where this module finds and proves the same
//! instructions and `evex` encodes them again).
//!
//! A VEX-encoded instruction on `xmm` registers whose prefix's `L` bit is set does the
//! same on `ymm` registers: `vaddps xmm1, xmm2, xmm3` becomes `vaddps ymm1, ymm2, ymm3`,
//! same length, same operands. For a lane-wise instruction the low 128 bits of the result
//! do not change, so widening one never changes what the code computes as Cranelift
//! compiled it; it only makes the high 128 bits the same operation on the high lanes.
//!
//! This module decodes the whole function (from its entry, following every branch, so
//! that the constants after the code are never taken for instructions) and widens:
//! - the loads and stores marked by module `wide` (`vmovdqu`/`vmovups`, `vmovntps` once
//!   module `stream` has rewritten a streaming one, and `vcvtph2ps`/`vcvtps2ph` once
//!   module `f16c` has rewritten an `fp16` one): twice the memory, 8 lanes instead of 4;
//! - inside the code of wide loops (their source location), lane-wise register-to-register
//!   instructions ([`LANE_WISE`]), broadcasts of a scalar (`vbroadcastss`), and the moves
//!   between vector registers that Cranelift's register allocator inserts, which it
//!   encodes without VEX ([`LEGACY_MOVES`]: where the proof needs them, encoded again as
//!   moves of the whole register, in place where a VEX move has the same length, else with
//!   the function encoded again as module `evex` does, everything after the longer move
//!   moved);
//! - the placeholders of module `wide`'s lane-group extractions (`wide::leave`), found by
//!   their form alone, since nothing else emits them: `vroundps xmm, xmm, 3` (`trunc`)
//!   becomes `vextractf128 xmm, ymm, 1` (in place, the same length) or `vextractf32x4
//!   xmm, zmm, 1`, and in 512 bits `vroundps xmm, xmm, 0` (`nearest`) becomes
//!   `vextractf64x4 ymm, zmm, 1`.
//!
//! Then it proves, by a forward data-flow analysis over the control-flow graph, that
//! every marked store writes, and every extraction reads, a register whose high half holds
//! the high lanes: a register is *wide* after a marked load or a broadcast, after a
//! widened lane-wise instruction or move whose register sources are all wide, and after a
//! zeroing `vxorps x, y, y` (inside a wide loop's code or not: a VEX instruction zeroes
//! the bits above its width); any
//! other write (a spill reload, a move without VEX outside a wide loop's code, an
//! instruction this module does not widen) and every call leave it narrow; where paths
//! meet, it is wide only if it is on all of them. A marked store of a register that is
//! not wide on every path is an [`Unproven`] error, and `lib.rs` compiles the kernel
//! again: where an extraction was refused, with the loops' results stored instead; with
//! the loops' broadcasts inside them; then narrower.
//!
//! The code leaves the high halves of `ymm` registers set, which makes every SSE
//! instruction run later wait to merge them: the runtime clears them (`vzeroupper`) when
//! a kernel returns, the helpers kernels call clear them on entry
//! (`lnc_runtime::clear_upper_vector_state`), and the SSE instructions Cranelift leaves
//! in the kernel (moves the proof does not need, spills, reloads, scalar min, max and
//! conversions) are encoded again with VEX here (module `vex`).

use cranelift_codegen::MachTrap;
use iced_x86::{Decoder, DecoderOptions, EncodingKind, FlowControl, Instruction, Mnemonic, OpKind, Register};

use crate::f16c::{
    WIDE_MARK as F16_LOAD_MARK, WIDE_NARROW_MARK as F16_STORE_MARK, WIDE_STREAM_MARK as F16_STREAM_MARK,
};
use crate::wide::{
    BF16_CVT_MARK, BF16_CVT_STREAM_MARK, BF16_LOAD_MARK, BF16_STORE_MARK, BF16_STREAM_MARK, LOAD_MARK,
    STORE_MARK, STREAM_MARK,
};

/// The marked stores of `bf16` parts that only 512-bit code has, rewritten by module
/// `evex` from a `vpextrq m64, xmm, 0` placeholder.
const BF16_STORES: [u8; 4] = [BF16_STORE_MARK, BF16_STREAM_MARK, BF16_CVT_MARK, BF16_CVT_STREAM_MARK];

/// Lane-wise instructions: with `L` set, each `ymm` lane is computed from the same lane
/// of the sources, as each `xmm` lane was.
const LANE_WISE: &[Mnemonic] = &[
    Mnemonic::Vaddps,
    Mnemonic::Vsubps,
    Mnemonic::Vmulps,
    Mnemonic::Vdivps,
    Mnemonic::Vsqrtps,
    Mnemonic::Vminps,
    Mnemonic::Vmaxps,
    Mnemonic::Vandps,
    Mnemonic::Vandnps,
    Mnemonic::Vorps,
    Mnemonic::Vxorps,
    Mnemonic::Vcmpps,
    Mnemonic::Vblendvps,
    // Byte by byte, and so lane-wise on 32-bit lanes (AVX2); Cranelift's blend of
    // a comparison's lanes (the NaN lanes of `wide::store_bf16` in 256 bits). No EVEX form:
    // 512-bit code does not emit it.
    Mnemonic::Vpblendvb,
    Mnemonic::Vfmadd132ps,
    Mnemonic::Vfmadd213ps,
    Mnemonic::Vfmadd231ps,
    Mnemonic::Vfmsub132ps,
    Mnemonic::Vfmsub213ps,
    Mnemonic::Vfmsub231ps,
    Mnemonic::Vfnmadd132ps,
    Mnemonic::Vfnmadd213ps,
    Mnemonic::Vfnmadd231ps,
    Mnemonic::Vfnmsub132ps,
    Mnemonic::Vfnmsub213ps,
    Mnemonic::Vfnmsub231ps,
    Mnemonic::Vmovaps,
    Mnemonic::Vmovups,
    Mnemonic::Vmovdqa,
    Mnemonic::Vmovdqu,
    Mnemonic::Vpand,
    Mnemonic::Vpandn,
    Mnemonic::Vpor,
    Mnemonic::Vpxor,
    Mnemonic::Vpaddd,
    Mnemonic::Vpsubd,
    Mnemonic::Vpcmpeqd,
    Mnemonic::Vpcmpgtd,
    // By an immediate only: the form counting by an `xmm` register keeps it an `xmm`
    // operand under VEX.256, which `widens` refuses (the kernel is then compiled in 128
    // bits).
    Mnemonic::Vpslld,
    Mnemonic::Vpsrld,
    Mnemonic::Vpsrad,
    Mnemonic::Vcvtdq2ps,
    Mnemonic::Vcvttps2dq,
];

/// Moves between vector registers that Cranelift encodes without VEX: such a move writes
/// the low 128 bits of its destination and keeps the rest, so the high lanes of a wide
/// value it moves would stay behind. Inside a wide loop's code its register form is
/// encoded again as the VEX (256-bit) or EVEX (512-bit) move of the whole register
/// ([`Kind::Move`]), whose low 128 bits are the same; Cranelift's code reads no more of a
/// register than those.
const LEGACY_MOVES: &[Mnemonic] = &[
    Mnemonic::Movaps,
    Mnemonic::Movups,
    Mnemonic::Movapd,
    Mnemonic::Movupd,
    Mnemonic::Movdqa,
    Mnemonic::Movdqu,
];

/// Why the wide loops of a function could not be widened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unproven(pub(crate) String);

/// How [`Unproven`]'s message starts when an extraction placeholder reads a register not
/// proven wide (the allocator spilled the loop's result first): `lib.rs` then compiles the
/// kernel again with the results stored instead (`CodegenOptions::stage_exits`).
pub(crate) const UNPROVEN_EXTRACTION: &str = "the extraction";

impl Unproven {
    /// Whether an extraction was refused ([`UNPROVEN_EXTRACTION`]).
    pub(crate) fn at_extraction(&self) -> bool {
        self.0.starts_with(UNPROVEN_EXTRACTION)
    }
}

/// What an instruction becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A marked load: writes a wide register.
    Load,
    /// A marked store: reads a register that must be wide.
    Store,
    /// A widened lane-wise instruction.
    LaneWise,
    /// A widened broadcast of a scalar: writes a wide register.
    Broadcast,
    /// A move without VEX between two vector registers ([`LEGACY_MOVES`]), encoded again
    /// as the move of the whole register: wide when its source is.
    Move,
    /// The placeholder `vroundps xmm, xmm, 3` of module `wide`'s `leave`, made the
    /// extraction of lanes 4-7 (`vextractf128 xmm, ymm, 1`, `vextractf32x4 xmm, zmm, 1`):
    /// reads a register wide in its low 256 bits, writes an `xmm` one.
    Extract,
    /// The placeholder `vroundps xmm, xmm, 0`, made the extraction of lanes 8-15 in 512
    /// bits (`vextractf64x4 ymm, zmm, 1`): reads a wide register, writes one wide in its
    /// low 256 bits.
    ExtractHigh,
    /// Left as it is.
    Other,
}

struct Decoded {
    at: usize,
    ins: Instruction,
    kind: Kind,
    /// Indices of the instructions that may run next.
    succ: Vec<usize>,
}

/// What [`patch`] reports besides the instructions it widened.
#[derive(Default)]
pub(crate) struct Outcome {
    /// 256-bit code had `fp16` stores marked streaming that could not all go through their
    /// registers, and so stores them cached.
    pub(crate) unstreamed: bool,
    /// SSE instructions encoded again with VEX (module `vex`).
    pub(crate) vex_encoded: u32,
}

/// Widens the wide loops of `code` (trap records `traps`; `spans`: the code ranges of
/// wide loops; `emitted`: the marked stores and the extraction placeholders code
/// generation emitted) to 256 bits, or to 512 when `zmm` (module `evex`: the code is
/// encoded again, and `relocs`, the offsets of its relocations, move with it). Returns the
/// number of instructions widened, and the rest in `out`. The SSE instructions left in the
/// function are encoded again with VEX (module `vex`).
pub(crate) fn patch(
    code: &mut Vec<u8>,
    traps: &[MachTrap],
    spans: &[(usize, usize)],
    (emitted, extracts_emitted): (u32, u32),
    zmm: bool,
    relocs: &mut [u32],
    out: &mut Outcome,
) -> Result<u32, Unproven> {
    let marks: Vec<(usize, u8)> = traps
        .iter()
        .filter_map(|t| {
            let m = [
                LOAD_MARK,
                STORE_MARK,
                STREAM_MARK,
                F16_LOAD_MARK,
                F16_STORE_MARK,
                BF16_LOAD_MARK,
                F16_STREAM_MARK,
                BF16_STORE_MARK,
                BF16_STREAM_MARK,
                BF16_CVT_MARK,
                BF16_CVT_STREAM_MARK,
            ]
            .into_iter()
            .find(|&m| cranelift_codegen::ir::TrapCode::user(m) == Some(t.code))?;
            Some((t.offset as usize, m))
        })
        .collect();
    // Cranelift drops a marked store where no path reaches it, and a marked load whose
    // users it gives the value of an equal load (the data flow below sees which), but
    // it never adds one: more marks than were emitted is a compiler bug. It could also
    // drop a store that a later one of the same address overwrites unread; the later one
    // is a wide store of the same loop (a wide store is the only store to its address:
    // each transfer has its own bytes, `wide::staging_offset`), which writes all 32.
    let stores =
        marks.iter().filter(|&&(_, m)| ![LOAD_MARK, F16_LOAD_MARK, BF16_LOAD_MARK].contains(&m)).count();
    if stores > emitted as usize {
        return Err(Unproven(format!("{emitted} wide stores emitted, {stores} found")));
    }
    if marks.is_empty() && extracts_emitted == 0 {
        return Ok(0);
    }
    let (mut insts, index) = decode(code)?;
    // Every rounding toward zero or to nearest of `f32x4` lanes is a placeholder: module
    // `wide` emits them for that alone. Cranelift may merge two (of one value) or copy one
    // into blocks that do not follow one another; each copy is proven and rewritten.
    let mut found = false;
    for d in insts.iter_mut() {
        if !extracting_rounding(&d.ins) {
            continue;
        }
        d.kind = placeholder_kind(&d.ins, zmm).ok_or_else(|| {
            Unproven(format!("the rounding at {:#x} is {:?}, no placeholder", d.at, d.ins.code()))
        })?;
        found = true;
    }
    if found && extracts_emitted == 0 {
        return Err(Unproven("a rounding toward zero or to nearest that no wide loop emitted".to_string()));
    }
    // Each is stored where it is made (`wide::leave`), so none is dropped: emitted and not
    // found, they were lowered otherwise (a call, without SSE4.1), and would round lanes.
    if !found && extracts_emitted > 0 {
        return Err(Unproven(format!(
            "{UNPROVEN_EXTRACTION} placeholders emitted ({extracts_emitted}) were not found"
        )));
    }
    // The half stores of 512-bit code, each rewritten into a sequence through `ymm16`;
    // all but `fp16`'s cached one exist only there.
    let mut halves = std::collections::HashMap::new();
    // The `fp16` stores of 256-bit code (indices into `insts`), candidates for the
    // register form ([`f16_store_through_register`]).
    let mut f16_stores = Vec::new();
    // The rounded `bf16` stores of 256-bit code, and whether each streams.
    let mut bf16_stores = Vec::new();
    for &(at, m) in &marks {
        let packed = !zmm && matches!(m, BF16_STORE_MARK | BF16_STREAM_MARK);
        if packed {
            // Rewritten below ([`bf16_store_through_register`]).
        } else if BF16_STORES.contains(&m) || (m == F16_STREAM_MARK && zmm) {
            if !zmm {
                return Err(Unproven(format!("a store at {at:#x} marked {m:#x} outside 512-bit code")));
            }
            halves.insert(at, m);
        } else if m == F16_STORE_MARK && zmm {
            halves.insert(at, m);
        }
        let i = index.get(at).copied().filter(|&i| i != NONE);
        let i = i.ok_or_else(|| Unproven(format!("no instruction decoded at mark {at:#x}")))? as usize;
        if matches!(m, F16_STORE_MARK | F16_STREAM_MARK) && !zmm {
            f16_stores.push((i, m == F16_STREAM_MARK));
        }
        if packed {
            bf16_stores.push((i, m == BF16_STREAM_MARK));
        }
        let d = &mut insts[i];
        d.kind = marked_kind(code, &d.ins, m, zmm)
            .ok_or_else(|| Unproven(format!("marked instruction at {at:#x} is {:?}", d.ins.code())))?;
    }
    let in_span = |at: usize| spans.iter().any(|&(s, e)| (s..e).contains(&at));
    for d in insts.iter_mut().filter(|d| d.kind == Kind::Other && in_span(d.at)) {
        d.kind = unmarked_kind(code, &d.ins, zmm);
    }
    // Moves are rewritten as moves of the whole register only when the proof needs them;
    // then all are. Those it does not need are SSE instructions like any other, encoded
    // again below in their 128-bit VEX forms.
    let moves: Vec<usize> = (0..insts.len()).filter(|&i| insts[i].kind == Kind::Move).collect();
    for &i in &moves {
        insts[i].kind = Kind::Other;
    }
    if !moves.is_empty() && proven(&insts, zmm).is_err() {
        for &i in &moves {
            insts[i].kind = Kind::Move;
        }
    }
    proven(&insts, zmm)?;
    // The SSE instructions left (module `vex`), each with its VEX form, and that form's
    // bytes where it has the instruction's length.
    let sse: std::collections::HashMap<usize, (Instruction, Option<Vec<u8>>)> = insts
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind == Kind::Other)
        .filter_map(|(i, d)| {
            let made = crate::vex::vex_form(&d.ins)?;
            Some((i, (made, encode_in_place(&made).filter(|b| b.len() == d.ins.len()))))
        })
        .collect();
    out.vex_encoded = sse.len() as u32;
    let other = |i: usize| sse.get(&i).map(|(made, _)| vec![*made]).unwrap_or_default();
    if zmm {
        let mut widened = Vec::with_capacity(insts.len());
        for (i, d) in insts.iter().enumerate() {
            widened.push(match d.kind {
                Kind::Other => other(i),
                _ => match halves.get(&d.at) {
                    Some(&m @ (F16_STORE_MARK | F16_STREAM_MARK)) => {
                        crate::evex::store_f16(&d.ins, m == F16_STREAM_MARK)?
                    }
                    Some(&m @ (BF16_CVT_MARK | BF16_CVT_STREAM_MARK)) => {
                        crate::evex::convert_bf16(&d.ins, m == BF16_CVT_STREAM_MARK)?
                    }
                    Some(&m) => crate::evex::store_bf16(&d.ins, m == BF16_STREAM_MARK)?,
                    None if matches!(d.kind, Kind::Extract | Kind::ExtractHigh) => {
                        vec![extraction(&d.ins, true)?]
                    }
                    None => crate::evex::to_zmm(&d.ins).into_iter().collect(),
                },
            });
        }
        return Ok(reencode(code, &insts, &widened, relocs)? - sse.len() as u32);
    }
    // An `fp16` store whose register nothing reads after it converts into that register
    // and stores it, two instructions for one: the function is encoded again.
    // Streaming is a hint, but all or nothing: a cached store into a line that the
    // non-temporal stores of the same loop write in part waits for the line to leave the
    // write-combining buffer and reads it back (the seed's dx kernel in fp16 took 16 times
    // as long with one store of two left cached). So where one streaming store cannot go
    // through its register, none streams.
    let dead: Vec<(usize, bool, Register)> = f16_stores
        .iter()
        .filter_map(|&(i, streams)| Some((i, streams, dying_register(&insts, i, true)?)))
        .collect();
    let marked_streaming = f16_stores.iter().filter(|d| d.1).count();
    let all_stream = dead.iter().filter(|d| d.1).count() == marked_streaming;
    out.unstreamed = marked_streaming > 0 && !all_stream;
    let mut through_register: std::collections::HashMap<usize, Vec<Instruction>> = dead
        .iter()
        .filter_map(|&(i, streams, into)| {
            Some((i, f16_store_through_register(&insts[i].ins, streams && all_stream, into)?))
        })
        .collect();
    // A rounded `bf16` store has no form that keeps its register: without one that dies
    // there, the kernel is compiled again narrower.
    for &(i, streams) in &bf16_stores {
        let at = insts[i].at;
        let packed = dying_register(&insts, i, false)
            .and_then(|into| bf16_store_through_register(&insts[i].ins, streams, into))
            .ok_or_else(|| Unproven(format!("the bf16 store at {at:#x} has no register dying there")))?;
        through_register.insert(i, packed);
    }
    // In place, each instruction its own length; unless a move or an SSE instruction has
    // no VEX form of its length (`movaps xmm1, xmm0`: 3 bytes), or an `fp16` or `bf16`
    // store goes through a register, and the function is encoded again as in 512 bits,
    // everything after the longer instructions moved.
    if insts.iter().any(|d| d.kind == Kind::Move && vex_move(&d.ins).is_none())
        || !through_register.is_empty()
        || sse.values().any(|(_, in_place)| in_place.is_none())
    {
        let mut widened = Vec::with_capacity(insts.len());
        for (i, d) in insts.iter().enumerate() {
            if let Some(pair) = through_register.get(&i) {
                widened.push(pair.clone());
                continue;
            }
            widened.push(match d.kind {
                Kind::Other => other(i),
                Kind::Move => vec![ymm_move(&d.ins)?],
                Kind::Extract => vec![extraction(&d.ins, false)?],
                _ => {
                    let mut bytes = code[d.at..d.at + d.ins.len()].to_vec();
                    flip(&mut bytes, 0);
                    vec![Decoder::with_ip(64, &bytes, d.at as u64, DecoderOptions::NONE).decode()]
                }
            });
        }
        return Ok(reencode(code, &insts, &widened, relocs)? - sse.len() as u32);
    }
    let mut count = 0;
    for (i, d) in insts.iter().enumerate() {
        match d.kind {
            Kind::Other => {
                // Each has its bytes: the function would have been encoded again otherwise.
                if let Some((_, Some(bytes))) = sse.get(&i) {
                    code[d.at..d.at + bytes.len()].copy_from_slice(bytes);
                }
                continue;
            }
            Kind::Move => {
                let bytes = vex_move(&d.ins).ok_or_else(|| {
                    Unproven(format!("the move at {:#x} has no VEX form of its length", d.at))
                })?;
                code[d.at..d.at + bytes.len()].copy_from_slice(&bytes);
            }
            Kind::Extract => {
                let bytes =
                    encode_in_place(&extraction(&d.ins, false)?)
                        .filter(|b| b.len() == d.ins.len())
                        .ok_or_else(|| Unproven(format!("the extraction at {:#x} changes length", d.at)))?;
                code[d.at..d.at + bytes.len()].copy_from_slice(&bytes);
            }
            _ => flip(code, d.at),
        }
        count += 1;
    }
    Ok(count)
}

/// The 256-bit `fp16` store `ins` (`vcvtps2ph m64, xmm, imm`, module `f16c`'s rewrite,
/// widened to `m128, ymm`) as a conversion into register `into` (its own, or another that
/// dies there) and a store of that register: `vcvtps2ph xmm, ymm, imm` then `vmovdqu
/// m128, xmm`, or `vmovntdq` when `streams` (a store marked streaming, whose row the
/// runtime found 16-byte aligned: x86 has no non-temporal form of the conversion). The
/// memory form ran slower on Zen 3: in a loop of nothing else (rows in the first-level
/// cache), 0.66 ns against 0.43 for eight lanes, and the seed forward in fp16 (N = 1024,
/// one thread, rows in cache) had 35 % of its samples on its two stores. 512-bit code
/// stores so through `ymm16` (module `evex`); in 256 bits there is no register Cranelift
/// leaves free, so only a store with a register dead after it ([`dying_register`]) takes
/// this form.
fn f16_store_through_register(ins: &Instruction, streams: bool, into: Register) -> Option<Vec<Instruction>> {
    use iced_x86::Code;
    let src = ins.op1_register();
    if ins.code() != Code::VEX_Vcvtps2ph_xmmm64_xmm_imm8
        || ins.op0_kind() != OpKind::Memory
        || !src.is_xmm()
        || !into.is_xmm()
    {
        return None;
    }
    let ymm = ymm_of(src)?;
    let convert =
        Instruction::with3(Code::VEX_Vcvtps2ph_xmmm128_ymm_imm8, into, ymm, u32::from(ins.immediate8()))
            .ok()?;
    let store = store_xmm(ins, streams, into)?;
    Some(vec![convert, store])
}

/// The 256-bit `bf16` store `ins` (`vpextrq m64, xmm, 0`, [`crate::wide::BF16_STORE_MARK`]:
/// eight lanes rounded by integer code, each in the low 16 bits of a 32-bit lane, the
/// high 16 bits zero) as a pack into register `into` (another than the stored one, dying
/// there: [`dying_register`]) and a store of it: `vextracti128 xmm_into, ymm, 1` (lanes
/// 4-7), `vpackusdw xmm_into, xmm, xmm_into` (the eight lanes as 16 bits, in order: exact,
/// none exceeds 0xFFFF), then `vmovdqu m128, xmm_into`, or `vmovntdq` when `streams`. AVX2
/// has no `vpmovdw`. Measured against `vpackusdw ymm` of the register with itself and
/// `vpermq ymm, ymm, 8` (seed forward in bf16, one thread, rows in cache, alternated
/// launches): 0.97 of the time at N = 1024, 0.96 at 4096.
fn bf16_store_through_register(ins: &Instruction, streams: bool, into: Register) -> Option<Vec<Instruction>> {
    use iced_x86::Code;
    let src = ins.op1_register();
    if ins.code() != Code::VEX_Vpextrq_rm64_xmm_imm8
        || ins.op0_kind() != OpKind::Memory
        || ins.immediate8() != 0
        || !src.is_xmm()
        || !into.is_xmm()
        || into == src
    {
        return None;
    }
    let ymm = ymm_of(src)?;
    let high = Instruction::with3(Code::VEX_Vextracti128_xmmm128_ymm_imm8, into, ymm, 1u32).ok()?;
    let pack = Instruction::with3(Code::VEX_Vpackusdw_xmm_xmm_xmmm128, into, src, into).ok()?;
    let store = store_xmm(ins, streams, into)?;
    Some(vec![high, pack, store])
}

/// A store of the 16 bytes of `into` to the memory operand of the store `ins` it replaces:
/// `vmovdqu m128, xmm`, or `vmovntdq` when `streams`.
fn store_xmm(ins: &Instruction, streams: bool, into: Register) -> Option<Instruction> {
    use iced_x86::{Code, MemoryOperand};
    let memory = MemoryOperand::new(
        ins.memory_base(),
        ins.memory_index(),
        ins.memory_index_scale(),
        ins.memory_displacement64() as i64,
        ins.memory_displ_size(),
        false,
        ins.segment_prefix(),
    );
    let code = if streams { Code::VEX_Vmovntdq_m128_xmm } else { Code::VEX_Vmovdqu_xmmm128_xmm };
    Instruction::with2(code, memory, into).ok()
}

/// A vector register (as `xmm`) that the store `insts[i]` may convert into: the one it
/// stores when that dies there ([`dead_after`]), else another that no path reads after it
/// before writing it, the highest-numbered first (the low ones carry call arguments);
/// `None` when none is free. The register a value happens to get decides the first, so
/// that a change of allocation elsewhere in the function (a helper call reached from the
/// store through the next program's code, reading `xmm0`-`xmm3`) does not leave a store
/// in the slow memory form.
/// `own`: the stored register itself may be it.
fn dying_register(insts: &[Decoded], i: usize, own: bool) -> Option<Register> {
    let src = insts[i].ins.op1_register();
    if own && dead_after(insts, i, src) {
        return Some(src);
    }
    (0..16)
        .rev()
        .filter(|&n| n != src.number())
        .filter_map(|n| Register::try_from(Register::XMM0 as usize + n).ok())
        .find(|&r| dead_after(insts, i, r))
}

/// The vector registers a call may read (`xmm0` up): kernels call helpers of at most
/// this many vector arguments (`FunctionCx::call_helper` refuses more), and Cranelift's
/// libcalls take at most three (`fmaf`).
pub(crate) const CALL_VECTOR_ARGUMENTS: usize = 4;

/// Whether no path from after `insts[i]` reads vector register `reg` (any width) before
/// an instruction writes it without reading it. A call reads the registers that carry
/// arguments ([`CALL_VECTOR_ARGUMENTS`]) and ends a path for the others (in System V
/// every vector register is the caller's to save; on Windows the path goes on past it); a
/// return ends it (kernels return an integer); `vzeroupper` keeps the low 128 bits, which
/// are all that Cranelift's values hold, so it neither reads nor writes them. Anything
/// iced reports as a read, a conditional read or a partial write (`movss xmm, xmm`
/// merges) counts as a read.
fn dead_after(insts: &[Decoded], i: usize, reg: Register) -> bool {
    use iced_x86::{InstructionInfoFactory, OpAccess};
    if !reg.is_vector_register() {
        return false;
    }
    let number = reg.number();
    let mut info = InstructionInfoFactory::new();
    let mut seen = vec![false; insts.len()];
    let mut work = insts[i].succ.clone();
    while let Some(j) = work.pop() {
        if std::mem::replace(&mut seen[j], true) {
            continue;
        }
        let d = &insts[j];
        // Windows x64: xmm6-15 are the caller's, and Cranelift restores only those it
        // allocated; a register written where it did not would reach the caller changed.
        if cfg!(windows) && d.ins.flow_control() == FlowControl::Return && number >= 6 {
            return false;
        }
        if matches!(d.ins.flow_control(), FlowControl::Call | FlowControl::IndirectCall) {
            if number < CALL_VECTOR_ARGUMENTS {
                return false;
            }
            // System V: every vector register is the caller's to save, so no value lives
            // across a call. Windows x64 keeps xmm6-15 across calls: there the path goes on.
            if cfg!(windows) {
                work.extend(d.succ.iter().copied());
            }
            continue;
        }
        if d.ins.mnemonic() == Mnemonic::Vzeroupper {
            work.extend(d.succ.iter().copied());
            continue;
        }
        let (mut reads, mut writes) = (false, false);
        for u in info.info(&d.ins).used_registers() {
            if !u.register().is_vector_register() || u.register().number() != number {
                continue;
            }
            match u.access() {
                OpAccess::Write => writes = true,
                _ => reads = true,
            }
        }
        if reads {
            return false;
        }
        if !writes {
            work.extend(d.succ.iter().copied());
        }
    }
    true
}

/// `code` encoded again with `widened[i]` in place of `insts[i]` where not empty (module
/// `evex`); the number of instructions replaced.
fn reencode(
    code: &mut Vec<u8>,
    insts: &[Decoded],
    widened: &[Vec<Instruction>],
    relocs: &mut [u32],
) -> Result<u32, Unproven> {
    let plain: Vec<Instruction> = insts.iter().map(|d| d.ins).collect();
    *code = crate::evex::reencode(code, &plain, widened, relocs)?;
    Ok(widened.iter().filter(|w| !w.is_empty()).count() as u32)
}

/// The `ymm` registers of the destination and the source of the move `ins` between `xmm`
/// registers.
fn ymm_operands(ins: &Instruction) -> Option<(Register, Register)> {
    Some((ymm_of(ins.op_register(0))?, ymm_of(ins.op_register(1))?))
}

/// The `ymm` register whose low half is vector register `r`.
fn ymm_of(r: Register) -> Option<Register> {
    Register::try_from(Register::YMM0 as usize + r.number()).ok().filter(|r| r.is_ymm())
}

/// The 256-bit VEX move of the whole register that the register-to-register move without
/// VEX `ins` moves the low half of, of any length (`vmovaps ymm, ymm`).
fn ymm_move(ins: &Instruction) -> Result<Instruction, Unproven> {
    let fail = || Unproven(format!("the move at {:#x} has no VEX form", ins.ip()));
    let (dst, src) = ymm_operands(ins).ok_or_else(fail)?;
    Instruction::with2(iced_x86::Code::VEX_Vmovaps_ymm_ymmm256, dst, src).map_err(|_| fail())
}

/// The instructions of `code` reachable from its start (not the constants after them), one
/// a line in AT&T syntax, at their offsets from the start: what `lnc compile --emit mc`
/// prints of the code as it runs, after every rewrite. `symbols`: the offsets of
/// relocations and the names they stand for, noted after the instruction holding them
/// (its operand is a placeholder until the code is placed).
pub(crate) fn listing(code: &[u8], symbols: &[(usize, String)]) -> String {
    use iced_x86::Formatter;
    let insts = match decode(code) {
        Ok((insts, _)) => insts,
        Err(e) => return format!("; the code could not be decoded: {}\n", e.0),
    };
    let mut fmt = iced_x86::GasFormatter::new();
    let options = fmt.options_mut();
    options.set_first_operand_char_index(10);
    options.set_uppercase_hex(false);
    options.set_branch_leading_zeros(false);
    let mut out = String::new();
    let mut text = String::new();
    let mut next = 0;
    for d in &insts {
        if d.at != next {
            out.push_str(&format!("; {} bytes not reached from the start\n", d.at - next));
        }
        text.clear();
        fmt.format(&d.ins, &mut text);
        let end = d.at + d.ins.len();
        let names: Vec<&str> =
            symbols.iter().filter(|(at, _)| (d.at..end).contains(at)).map(|(_, n)| n.as_str()).collect();
        if names.is_empty() {
            out.push_str(&format!("{:6x}:  {text}\n", d.at));
        } else {
            out.push_str(&format!("{:6x}:  {text:<40} ; {}\n", d.at, names.join(", ")));
        }
        next = d.at + d.ins.len();
    }
    out.push_str(&format!(
        "; {} instructions, {next} bytes of code, {} after it (constants)\n",
        insts.len(),
        code.len() - next
    ));
    out
}

/// The bit of vector register `r` in a state.
fn bit(r: Register) -> u32 {
    if r.is_vector_register() && r.number() < 32 { 1 << r.number() } else { 0 }
}

/// No instruction starts at this offset.
const NONE: u32 = u32::MAX;

/// Decodes every instruction reachable from the start of `code`, in address order, with
/// the index of the instruction starting at each offset ([`NONE`] elsewhere).
fn decode(code: &[u8]) -> Result<(Vec<Decoded>, Vec<u32>), Unproven> {
    let mut seen = vec![false; code.len()];
    let mut insts = Vec::new();
    let mut work = vec![0usize];
    let mut dec = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    while let Some(at) = work.pop() {
        if seen.get(at).copied().unwrap_or(false) {
            continue;
        }
        if at >= code.len() || dec.set_position(at).is_err() {
            return Err(Unproven(format!("a branch to {at:#x}, outside the code")));
        }
        seen[at] = true;
        dec.set_ip(at as u64);
        let ins = dec.decode();
        if ins.is_invalid() {
            return Err(Unproven(format!("cannot decode the instruction at {at:#x}")));
        }
        let next = at + ins.len();
        let target = ins.near_branch_target() as usize;
        // Offsets for now, indices below.
        let succ = match ins.flow_control() {
            FlowControl::Next | FlowControl::Call | FlowControl::IndirectCall => vec![next],
            FlowControl::ConditionalBranch => vec![next, target],
            FlowControl::UnconditionalBranch => vec![target],
            FlowControl::Return | FlowControl::Exception | FlowControl::Interrupt => vec![],
            other => return Err(Unproven(format!("{other:?} at {at:#x}"))),
        };
        work.extend(succ.iter().copied());
        insts.push(Decoded { at, ins, kind: Kind::Other, succ });
    }
    insts.sort_unstable_by_key(|d| d.at);
    let mut index = vec![NONE; code.len() + 1];
    for (i, w) in insts.iter().enumerate() {
        index[w.at] = i as u32;
    }
    if let Some(w) = insts.windows(2).find(|w| w[0].at + w[0].ins.len() > w[1].at) {
        return Err(Unproven(format!("instructions overlap at {:#x}", w[1].at)));
    }
    for d in &mut insts {
        for s in &mut d.succ {
            *s = index[*s] as usize;
        }
    }
    Ok((insts, index))
}

/// The kind of the instruction `ins` marked `mark`, if it is one this module widens (to
/// 512 bits when `zmm`).
fn marked_kind(code: &[u8], ins: &Instruction, mark: u8, zmm: bool) -> Option<Kind> {
    if BF16_STORES.contains(&mark) {
        // Rewritten by module `evex` into `vpmovdw` or `vcvtneps2bf16`, which have no VEX
        // form; in 256 bits, the first into a pack ([`bf16_store_through_register`]).
        let form =
            ins.code() == iced_x86::Code::VEX_Vpextrq_rm64_xmm_imm8 && ins.op0_kind() == OpKind::Memory;
        let packed = matches!(mark, BF16_STORE_MARK | BF16_STREAM_MARK);
        return (form && (zmm || packed)).then_some(Kind::Store);
    }
    let (kind, wanted): (Kind, &[Mnemonic]) = match mark {
        // Unaligned moves only: widened, an aligned one would want 32-byte alignment.
        LOAD_MARK => (Kind::Load, &[Mnemonic::Vmovups, Mnemonic::Vmovdqu]),
        F16_LOAD_MARK => (Kind::Load, &[Mnemonic::Vcvtph2ps]),
        BF16_LOAD_MARK => (Kind::Load, &[Mnemonic::Vpmovzxwd]),
        STREAM_MARK => (Kind::Store, &[Mnemonic::Vmovntps]),
        F16_STORE_MARK | F16_STREAM_MARK => (Kind::Store, &[Mnemonic::Vcvtps2ph]),
        _ => (Kind::Store, &[Mnemonic::Vmovups, Mnemonic::Vmovdqu]),
    };
    let memory_operand = (0..ins.op_count()).position(|k| ins.op_kind(k) == OpKind::Memory)?;
    let memory_ok = (kind == Kind::Load) == (memory_operand == 1);
    let widens = |keep| widens_to(code, ins, keep, zmm);
    (wanted.contains(&ins.mnemonic()) && memory_ok && widens(None)).then_some(kind)
}

/// The kind of an unmarked instruction inside a wide loop (of 512 bits when `zmm`).
fn unmarked_kind(code: &[u8], ins: &Instruction, zmm: bool) -> Kind {
    let widens = |keep| widens_to(code, ins, keep, zmm);
    let registers_only =
        (0..ins.op_count()).all(|k| matches!(ins.op_kind(k), OpKind::Register | OpKind::Immediate8));
    if LANE_WISE.contains(&ins.mnemonic()) && registers_only && widens(None) {
        return Kind::LaneWise;
    }
    if ins.mnemonic() == Mnemonic::Vbroadcastss && ins.op_register(0).is_xmm() && widens(Some(1)) {
        return Kind::Broadcast;
    }
    let xmm_operands = ins.op_count() == 2
        && (0..2).all(|k| ins.op_kind(k) == OpKind::Register && ins.op_register(k).is_xmm());
    if ins.encoding() == EncodingKind::Legacy && LEGACY_MOVES.contains(&ins.mnemonic()) && xmm_operands {
        let encodes = if zmm { crate::evex::to_zmm(ins).is_some() } else { ymm_move(ins).is_ok() };
        if encodes {
            return Kind::Move;
        }
    }
    Kind::Other
}

/// The extraction placeholders in `code` (Cranelift's, before [`patch`], which rewrites
/// all of them or refuses the function).
pub(crate) fn placeholders(code: &[u8]) -> u32 {
    match decode(code) {
        Ok((insts, _)) => insts.iter().filter(|d| extracting_rounding(&d.ins)).count() as u32,
        Err(_) => 0,
    }
}

/// The `fp16` stores of 256-bit loops in `code` (after [`patch`]) that convert into their
/// register and store it ([`f16_store_through_register`]), for the listing.
pub(crate) fn f16_register_stores(code: &[u8]) -> u32 {
    match decode(code) {
        Ok((insts, _)) => insts
            .iter()
            .filter(|d| {
                d.ins.code() == iced_x86::Code::VEX_Vcvtps2ph_xmmm128_ymm_imm8
                    && d.ins.op0_kind() == OpKind::Register
            })
            .count() as u32,
        Err(_) => 0,
    }
}

/// How many `bf16` stores of 256-bit code go through a pack into a register
/// ([`bf16_store_through_register`]), for the listing.
pub(crate) fn bf16_packed_stores(code: &[u8]) -> u32 {
    match decode(code) {
        Ok((insts, _)) => {
            insts.iter().filter(|d| d.ins.code() == iced_x86::Code::VEX_Vextracti128_xmmm128_ymm_imm8).count()
                as u32
        }
        Err(_) => 0,
    }
}

/// Whether `ins` rounds `f32` lanes toward zero or to nearest: a placeholder of
/// `wide::leave`, or a form of one [`patch`] refuses.
fn extracting_rounding(ins: &Instruction) -> bool {
    matches!(ins.mnemonic(), Mnemonic::Vroundps | Mnemonic::Roundps) && matches!(ins_mode(ins), 0 | 3)
}

/// The rounding mode of `ins`, a rounding instruction (the low two bits of its immediate;
/// 4 for one that takes MXCSR's mode, bit 2, or suppresses exceptions, bit 3).
fn ins_mode(ins: &Instruction) -> u8 {
    let imm = ins.immediate8();
    if imm & !3 != 0 { 4 } else { imm }
}

/// What the placeholder `ins` is: `vroundps xmm, xmm, 3`, the extraction of lanes 4-7;
/// in 512 bits `vroundps xmm, xmm, 0`, that of lanes 8-15. `None` for any other form.
fn placeholder_kind(ins: &Instruction, zmm: bool) -> Option<Kind> {
    let form = ins.code() == iced_x86::Code::VEX_Vroundps_xmm_xmmm128_imm8
        && ins.op0_kind() == OpKind::Register
        && ins.op1_kind() == OpKind::Register;
    match ins_mode(ins) {
        3 if form => Some(Kind::Extract),
        0 if form && zmm => Some(Kind::ExtractHigh),
        _ => None,
    }
}

/// The extraction the placeholder `ins` stands for: `vextractf32x4 xmm, zmm, 1` or
/// `vextractf64x4 ymm, zmm, 1` when `zmm`, else `vextractf128 xmm, ymm, 1`.
fn extraction(ins: &Instruction, zmm: bool) -> Result<Instruction, Unproven> {
    use iced_x86::Code::*;
    let fail = || Unproven(format!("the lane-group extraction at {:#x} is {:?}", ins.ip(), ins.code()));
    let (dst, src) = (ins.op_register(0).number(), ins.op_register(1).number());
    let reg = |base: Register, n: usize| Register::try_from(base as usize + n).map_err(|_| fail());
    let made = match (placeholder_kind(ins, zmm).ok_or_else(fail)?, zmm) {
        (Kind::Extract, true) => Instruction::with3(
            EVEX_Vextractf32x4_xmmm128_k1z_zmm_imm8,
            reg(Register::XMM0, dst)?,
            reg(Register::ZMM0, src)?,
            1,
        ),
        (Kind::Extract, false) => Instruction::with3(
            VEX_Vextractf128_xmmm128_ymm_imm8,
            reg(Register::XMM0, dst)?,
            reg(Register::YMM0, src)?,
            1,
        ),
        _ => Instruction::with3(
            EVEX_Vextractf64x4_ymmm256_k1z_zmm_imm8,
            reg(Register::YMM0, dst)?,
            reg(Register::ZMM0, src)?,
            1,
        ),
    };
    let mut made = made.map_err(|_| fail())?;
    made.set_ip(ins.ip());
    Ok(made)
}

/// The bytes of `ins` encoded at its own address.
fn encode_in_place(ins: &Instruction) -> Option<Vec<u8>> {
    let mut enc = iced_x86::Encoder::new(64);
    enc.encode(ins, ins.ip()).ok()?;
    Some(enc.take_buffer())
}

/// Whether every marked store and every extraction of `insts` reads a register computed
/// wide on every path (in 512 bits when `zmm`; lanes 4-7 are taken out of a register wide
/// in its low 256 bits, which in 512 bits the extraction of lanes 8-15 also leaves).
fn proven(insts: &[Decoded], zmm: bool) -> Result<(), Unproven> {
    let wide = analyze(insts, false);
    // Only lanes 4-7 read a register wide in its low 256 bits, and only 512-bit code has
    // such registers.
    let low_only;
    let low = if zmm && insts.iter().any(|d| d.kind == Kind::Extract) {
        low_only = analyze(insts, true);
        &low_only
    } else {
        &wide
    };
    let bits = if zmm { 512 } else { 256 };
    for (i, d) in insts.iter().enumerate() {
        let (reg, state, what) = match d.kind {
            Kind::Extract => (d.ins.op_register(1), low[i], "the extraction at"),
            Kind::ExtractHigh => (d.ins.op_register(1), wide[i], "the extraction at"),
            Kind::Store => {
                let reg = (0..d.ins.op_count())
                    .find(|&k| d.ins.op_kind(k) == OpKind::Register)
                    .map(|k| d.ins.op_register(k))
                    .ok_or_else(|| Unproven(format!("marked store at {:#x} stores no register", d.at)))?;
                (reg, wide[i], "the store at")
            }
            _ => continue,
        };
        if state & bit(reg) == 0 {
            let width = if d.kind == Kind::Extract && zmm { 256 } else { bits };
            return Err(Unproven(format!(
                "{what} {:#x} reads {reg:?}, not computed in {width} bits on every path",
                d.at
            )));
        }
    }
    Ok(())
}

/// The bytes of the 256-bit VEX move of the whole register that the register-to-register
/// move without VEX `ins` moves the low half of, of the same length as `ins` (rewritten
/// in place): `vmovaps` or `vmovdqa` in either direction of operands, whichever has the
/// length. None for a move of 3 bytes (`movaps xmm0, xmm1`), shorter than any VEX
/// instruction ([`ymm_move`] then, the function encoded again).
fn vex_move(ins: &Instruction) -> Option<Vec<u8>> {
    use iced_x86::Code;
    let (dst, src) = ymm_operands(ins)?;
    let forms = [
        Code::VEX_Vmovaps_ymm_ymmm256,
        Code::VEX_Vmovaps_ymmm256_ymm,
        Code::VEX_Vmovdqa_ymm_ymmm256,
        Code::VEX_Vmovdqa_ymmm256_ymm,
    ];
    forms.into_iter().find_map(|form| {
        let mv = Instruction::with2(form, dst, src).ok()?;
        let mut enc = iced_x86::Encoder::new(64);
        enc.encode(&mv, ins.ip()).ok()?;
        let bytes = enc.take_buffer();
        (bytes.len() == ins.len()).then_some(bytes)
    })
}

/// Whether `ins` widens: to 512 bits when `zmm` (it has an EVEX form, module `evex`),
/// else to 256 ([`widens`]).
fn widens_to(code: &[u8], ins: &Instruction, keep: Option<u32>, zmm: bool) -> bool {
    if zmm {
        ins.encoding() == EncodingKind::VEX && crate::evex::to_zmm(ins).is_some()
    } else {
        widens(code, ins, keep)
    }
}

/// Whether `ins` is VEX-encoded with `L` clear and, decoded with `L` set, is the same
/// instruction on `ymm` registers (but operand `keep`, which stays an `xmm` source) and
/// twice the memory.
fn widens(code: &[u8], ins: &Instruction, keep: Option<u32>) -> bool {
    if ins.encoding() != EncodingKind::VEX {
        return false;
    }
    let at = ins.ip() as usize;
    let Some(mut bytes) = code.get(at..at + ins.len()).map(<[u8]>::to_vec) else { return false };
    let Some(l) = l_byte(&bytes) else { return false };
    if bytes[l] & 4 != 0 {
        return false;
    }
    bytes[l] |= 4;
    let wide = Decoder::with_ip(64, &bytes, at as u64, DecoderOptions::NONE).decode();
    if wide.is_invalid()
        || wide.len() != ins.len()
        || wide.mnemonic() != ins.mnemonic()
        || wide.op_count() != ins.op_count()
    {
        return false;
    }
    (0..ins.op_count()).all(|k| match (ins.op_kind(k), wide.op_kind(k)) {
        (OpKind::Register, OpKind::Register) => {
            let (n, w) = (ins.op_register(k), wide.op_register(k));
            // General registers, and a broadcast's source, stay as they are.
            if !n.is_xmm() || Some(k) == keep { n == w } else { w.is_ymm() && w.number() == n.number() }
        }
        (OpKind::Memory, OpKind::Memory) => {
            let (n, w) = (ins.memory_size().size(), wide.memory_size().size());
            if Some(k) == keep { w == n } else { n > 0 && w == 2 * n }
        }
        (a, b) => a == b && (a != OpKind::Immediate8 || ins.immediate8() == wide.immediate8()),
    })
}

/// The index of the VEX prefix byte holding `L`.
fn l_byte(bytes: &[u8]) -> Option<usize> {
    match bytes.first()? {
        0xc5 => Some(1),
        0xc4 => Some(2),
        _ => None,
    }
}

fn flip(code: &mut [u8], at: usize) {
    if let Some(l) = l_byte(&code[at..]) {
        code[at + l] |= 4;
    }
}

/// The wide registers before each instruction; with `low`, those wide in their low 256
/// bits at least (in 512-bit code, where the extraction of lanes 8-15 writes such a one).
fn analyze(insts: &[Decoded], low: bool) -> Vec<u32> {
    let effects: Vec<(u32, u32)> = insts.iter().map(effect).collect();
    // Every state starts full and only shrinks: the greatest fixed point, where a
    // register is wide on every path from the entry (the first instruction, offset 0).
    let mut state = vec![u32::MAX; insts.len()];
    state[0] = 0;
    let mut work: Vec<usize> = (0..insts.len()).rev().collect();
    let mut queued = vec![true; insts.len()];
    while let Some(i) = work.pop() {
        queued[i] = false;
        let d = &insts[i];
        let (reads, writes) = effects[i];
        let s = state[i];
        let wide = match d.kind {
            Kind::Load | Kind::Broadcast => writes,
            Kind::ExtractHigh if low && s & reads == reads => writes,
            Kind::LaneWise | Kind::Move if s & reads == reads => writes,
            // A VEX instruction zeroes its destination's bits above 128: a zeroing idiom
            // anywhere (Cranelift hoists a loop's zero vector out of it) zeroes all lanes.
            Kind::Other if zeroes_all(&d.ins) => writes,
            _ => 0,
        };
        let calls = matches!(d.ins.flow_control(), FlowControl::Call | FlowControl::IndirectCall);
        let out = if calls { 0 } else { (s & !writes) | wide };
        for &j in &d.succ {
            let met = state[j] & out;
            if met != state[j] {
                state[j] = met;
                if !queued[j] {
                    queued[j] = true;
                    work.push(j);
                }
            }
        }
    }
    state
}

/// Whether `ins` is a VEX zeroing idiom, `vxorps x, y, y` (or `vxorpd`, `vpxor`): zero
/// in every lane of every width, whatever `y` held.
fn zeroes_all(ins: &Instruction) -> bool {
    ins.encoding() == EncodingKind::VEX
        && matches!(ins.mnemonic(), Mnemonic::Vxorps | Mnemonic::Vxorpd | Mnemonic::Vpxor)
        && ins.op_count() == 3
        && (0..3).all(|k| ins.op_kind(k) == OpKind::Register && ins.op_register(k).is_xmm())
        && ins.op_register(1) == ins.op_register(2)
}

/// The vector registers `d` reads in full and writes. Cranelift's instructions write
/// only their first operand; taking every vector register there as written is safe for
/// those that only read it (a comparison): it can only make a register narrow.
fn effect(d: &Decoded) -> (u32, u32) {
    let ins = &d.ins;
    if matches!(ins.mnemonic(), Mnemonic::Vzeroupper | Mnemonic::Vzeroall) {
        return (0, u32::MAX);
    }
    let reg = |k: u32| if ins.op_kind(k) == OpKind::Register { bit(ins.op_register(k)) } else { 0 };
    let writes = reg(0);
    let sources = (1..ins.op_count()).fold(0, |r, k| r | reg(k));
    let reads = match d.kind {
        // `vxorps x, x, x` is zero whatever `x` held; a broadcast reads one lane.
        Kind::Broadcast => 0,
        Kind::LaneWise
            if matches!(ins.mnemonic(), Mnemonic::Vxorps | Mnemonic::Vpxor)
                && ins.op_count() == 3
                && ins.op_register(1) == ins.op_register(2) =>
        {
            0
        }
        // Fused multiply-adds accumulate into their destination.
        Kind::LaneWise if is_fma(ins.mnemonic()) => sources | writes,
        _ => sources,
    };
    (reads, writes)
}

fn is_fma(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Vfmadd132ps
            | Vfmadd213ps
            | Vfmadd231ps
            | Vfmsub132ps
            | Vfmsub213ps
            | Vfmsub231ps
            | Vfnmadd132ps
            | Vfnmadd213ps
            | Vfnmadd231ps
            | Vfnmsub132ps
            | Vfnmsub213ps
            | Vfnmsub231ps
    )
}

#[cfg(test)]
mod tests {
    use cranelift_codegen::ir::TrapCode;

    use super::*;

    // Encodings checked against GNU as.
    /// `vmovdqu xmm0, [rdi]`
    const LOAD: &[u8] = &[0xc5, 0xfa, 0x6f, 0x07];
    /// `vmovdqu xmm1, [rdx]`
    const LOAD1: &[u8] = &[0xc5, 0xfa, 0x6f, 0x0a];
    /// `vaddps xmm0, xmm0, xmm0`
    const ADD: &[u8] = &[0xc5, 0xf8, 0x58, 0xc0];
    /// `vmovups [rsi], xmm0`
    const STORE: &[u8] = &[0xc5, 0xf8, 0x11, 0x06];
    const RET: &[u8] = &[0xc3];

    /// `patch` of the concatenation of `pieces`, each marked or not, all inside one wide
    /// loop's span when `span`; `emitted`: the marked stores code generation emitted.
    fn run(pieces: &[(&[u8], Option<u8>)], span: bool, emitted: u32) -> (Vec<u8>, Result<u32, Unproven>) {
        run_with(pieces, span, emitted, false)
    }

    /// [`run`] in 256 or 512 bits (`zmm`).
    fn run_with(
        pieces: &[(&[u8], Option<u8>)],
        span: bool,
        emitted: u32,
        zmm: bool,
    ) -> (Vec<u8>, Result<u32, Unproven>) {
        run_emitted(pieces, span, (emitted, 0), zmm)
    }

    /// [`run_with`] with `emitted` the marked stores and the extraction placeholders code
    /// generation emitted.
    fn run_emitted(
        pieces: &[(&[u8], Option<u8>)],
        span: bool,
        emitted: (u32, u32),
        zmm: bool,
    ) -> (Vec<u8>, Result<u32, Unproven>) {
        let mut code = Vec::new();
        let mut traps = Vec::new();
        for &(bytes, mark) in pieces {
            if let Some(m) = mark {
                let code_ = TrapCode::user(m).expect("nonzero");
                traps.push(MachTrap { offset: code.len() as u32, code: code_ });
            }
            code.extend_from_slice(bytes);
        }
        let spans = if span { vec![(0, code.len())] } else { Vec::new() };
        let r = patch(&mut code, &traps, &spans, emitted, zmm, &mut [], &mut Outcome::default());
        (code, r)
    }

    /// [`run_in`] with what [`patch`] reports besides its count.
    fn run_outcome(pieces: &[(&[u8], Option<u8>)], zmm: bool) -> (Vec<u8>, Result<u32, Unproven>, Outcome) {
        let mut code: Vec<u8> = pieces.iter().flat_map(|p| p.0.iter().copied()).collect();
        let mut traps = Vec::new();
        let mut at = 0;
        for &(bytes, mark) in pieces {
            if let Some(m) = mark {
                traps.push(MachTrap { offset: at, code: TrapCode::user(m).expect("nonzero") });
            }
            at += bytes.len() as u32;
        }
        let spans = vec![(0, code.len())];
        let mut out = Outcome::default();
        let r = patch(&mut code, &traps, &spans, (1, 0), zmm, &mut [], &mut out);
        (code, r, out)
    }

    fn refused(pieces: &[(&[u8], Option<u8>)]) {
        let original: Vec<u8> = pieces.iter().flat_map(|p| p.0.iter().copied()).collect();
        let (code, r) = run(pieces, true, 1);
        assert!(r.is_err(), "{pieces:02x?} was widened");
        assert_eq!(code, original, "a refused function was changed");
    }

    #[test]
    fn widens_arithmetic_on_marked_loads_into_a_marked_store() {
        let (code, r) =
            run(&[(LOAD, Some(LOAD_MARK)), (ADD, None), (STORE, Some(STORE_MARK)), (RET, None)], true, 1);
        assert_eq!(r, Ok(3));
        // L set: vmovdqu ymm0, [rdi]; vaddps ymm0, ymm0, ymm0; vmovups [rsi], ymm0.
        let want = [0xc5, 0xfe, 0x6f, 0x07, 0xc5, 0xfc, 0x58, 0xc0, 0xc5, 0xfc, 0x11, 0x06, 0xc3];
        assert_eq!(code, want);
    }

    /// The instructions of `code`, formatted (GNU syntax), up to the first `ret`.
    fn listed(code: &[u8]) -> Vec<String> {
        use iced_x86::Formatter;
        let mut d = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
        let mut f = iced_x86::GasFormatter::new();
        let mut out = Vec::new();
        while d.can_decode() {
            let i = d.decode();
            let mut s = String::new();
            f.format(&i, &mut s);
            out.push(s);
            if i.mnemonic() == Mnemonic::Ret {
                break;
            }
        }
        out
    }

    #[test]
    fn an_fp16_store_whose_register_dies_converts_into_it() {
        // Encodings checked against GNU as: vcvtph2ps xmm0, [rdi]; vcvtps2ph [rsi], xmm0, 0;
        // vaddps xmm1, xmm0, xmm0; vmovdqu xmm0, [rdx]; call (the next instruction).
        let load: &[u8] = &[0xc4, 0xe2, 0x79, 0x13, 0x07];
        let store: &[u8] = &[0xc4, 0xe3, 0x79, 0x1d, 0x06, 0x00];
        let read: &[u8] = &[0xc5, 0xf8, 0x58, 0xc8];
        let write: &[u8] = &[0xc5, 0xfa, 0x6f, 0x02];
        let call: &[u8] = &[0xe8, 0x00, 0x00, 0x00, 0x00];
        let (l, s) = ((load, Some(F16_LOAD_MARK)), (store, Some(F16_STORE_MARK)));
        let split = ["vcvtph2ps (%rdi),%ymm0", "vcvtps2ph $0,%ymm0,%xmm0", "vmovdqu %xmm0,(%rsi)"];
        let kept = ["vcvtph2ps (%rdi),%ymm0", "vcvtps2ph $0,%ymm0,(%rsi)"];
        // Dead after the store: at the return, or written before any read.
        for tail in [vec![(RET, None)], vec![(write, None), (read, None), (RET, None)]] {
            let (code, r) = run(&[&[l, s][..], &tail].concat(), true, 1);
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(listed(&code)[..3], split);
        }
        // Read after it, or at a call (xmm0 carries an argument): into the highest free
        // register instead.
        let into15 = ["vcvtph2ps (%rdi),%ymm0", "vcvtps2ph $0,%ymm0,%xmm15", "vmovdqu %xmm15,(%rsi)"];
        for tail in [vec![(read, None), (RET, None)], vec![(call, None), (RET, None)]] {
            let (code, r) = run(&[&[l, s][..], &tail].concat(), true, 1);
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(listed(&code)[..3], into15);
        }
        // Every register read after it: the memory form stays.
        let read_all = read_every_register();
        let all: Vec<(&[u8], Option<u8>)> = read_all.iter().map(|b| (&b[..], None)).collect();
        let (code, r) = run(&[&[l, s][..], &all, &[(RET, None)]].concat(), true, 1);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[..2], kept);
        // A streaming store: non-temporal through the dead register, or another.
        let streamed = (store, Some(F16_STREAM_MARK));
        let (code, r) = run(&[l, streamed, (RET, None)], true, 1);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[1..3], ["vcvtps2ph $0,%ymm0,%xmm0", "vmovntdq %xmm0,(%rsi)"]);
        let (code, r) = run(&[l, streamed, (read, None), (RET, None)], true, 1);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[2], "vmovntdq %xmm15,(%rsi)");
        // Two streaming stores, no register free after the second: neither streams (a line
        // written in part non-temporally and in part cached is read back).
        let load4: &[u8] = &[0xc4, 0xe2, 0x79, 0x13, 0x27];
        let store4: &[u8] = &[0xc4, 0xe3, 0x79, 0x1d, 0x26, 0x00];
        let (l4, streamed4) = ((load4, Some(F16_LOAD_MARK)), (store4, Some(F16_STREAM_MARK)));
        let (code, r) = run(&[&[l, streamed, l4, streamed4][..], &all, &[(RET, None)]].concat(), true, 2);
        assert!(r.is_ok(), "{r:?}");
        // (The first converts into xmm4, which the second load writes before any read.)
        assert_eq!(listed(&code)[1..3], ["vcvtps2ph $0,%ymm0,%xmm4", "vmovdqu %xmm4,(%rsi)"]);
        assert_eq!(listed(&code)[4], "vcvtps2ph $0,%ymm4,(%rsi)");
        let (code, r) = run(&[l, streamed, l4, streamed4, (RET, None)], true, 2);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[2], "vmovntdq %xmm0,(%rsi)");
        assert_eq!(listed(&code)[5], "vmovntdq %xmm4,(%rsi)");
        // A call reads no register past xmm3: xmm4 dies there.
        let (code, r) = run(
            &[(load4, Some(F16_LOAD_MARK)), (store4, Some(F16_STORE_MARK)), (call, None), (RET, None)],
            true,
            1,
        );
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[1..3], ["vcvtps2ph $0,%ymm4,%xmm4", "vmovdqu %xmm4,(%rsi)"]);
        // In 512 bits the store goes through ymm16 whatever follows.
        let (code, r) = run_with(&[l, s, (read, None), (RET, None)], true, 1, true);
        assert!(r.is_ok(), "{r:?}");
        assert!(listed(&code)[1].contains("%ymm16"), "{:?}", listed(&code));
    }

    /// `vaddps xmmN, xmmN, xmmN` for every `N`: code after which no register is dead.
    fn read_every_register() -> Vec<Vec<u8>> {
        (0..16)
            .map(|n| {
                let x = Register::try_from(Register::XMM0 as usize + n).expect("xmm0-15");
                let add =
                    Instruction::with3(iced_x86::Code::VEX_Vaddps_xmm_xmm_xmmm128, x, x, x).expect("vaddps");
                let mut e = iced_x86::Encoder::new(64);
                e.encode(&add, 0).expect("encodes");
                e.take_buffer()
            })
            .collect()
    }

    #[test]
    fn a_bf16_store_of_256_bit_code_packs_into_a_dying_register() {
        // vpextrq [rsi], xmm0, 0 (VEX.128.66.0F3A.W1 16 /r ib): the placeholder of
        // `wide::store_bf16`, after a marked load of xmm0.
        let place: &[u8] = &[0xc4, 0xe3, 0xf9, 0x16, 0x06, 0x00];
        let l = (LOAD, Some(LOAD_MARK));
        let pack = ["vextracti128 $1,%ymm0,%xmm15", "vpackusdw %xmm15,%xmm0,%xmm15"];
        for (mark, store) in
            [(BF16_STORE_MARK, "vmovdqu %xmm15,(%rsi)"), (BF16_STREAM_MARK, "vmovntdq %xmm15,(%rsi)")]
        {
            let (code, r) = run(&[l, (place, Some(mark)), (RET, None)], true, 1);
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(listed(&code)[1..4], [pack[0], pack[1], store]);
        }
        // xmm0 read after it: another register still.
        let (code, r) = run(&[l, (place, Some(BF16_STORE_MARK)), (ADD, None), (RET, None)], true, 1);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(listed(&code)[1..3], pack);
        // Every register read after it: refused (compiled again narrower), never left as
        // the placeholder, which would store half the lanes.
        let read_all = read_every_register();
        let all: Vec<(&[u8], Option<u8>)> = read_all.iter().map(|b| (&b[..], None)).collect();
        let (_, r) = run(&[&[l, (place, Some(BF16_STORE_MARK))][..], &all, &[(RET, None)]].concat(), true, 1);
        assert!(r.is_err(), "{r:?}");
        // The same placeholder's 512-bit rewrite is module `evex`'s.
        let (code, r) = run_with(&[l, (place, Some(BF16_STORE_MARK)), (RET, None)], true, 1, true);
        assert!(r.is_ok(), "{r:?}");
        assert!(listed(&code).iter().any(|l| l.contains("vpmovdw")), "{:?}", listed(&code));
    }

    #[test]
    fn widens_broadcasts_zeros_and_streaming_stores() {
        // vbroadcastss xmm2, xmm3; vmulps xmm0, xmm1, xmm2; vmovntps [rsi], xmm0
        let bcast: &[u8] = &[0xc4, 0xe2, 0x79, 0x18, 0xd3];
        let mul: &[u8] = &[0xc5, 0xf0, 0x59, 0xc2];
        let nt: &[u8] = &[0xc5, 0xf8, 0x2b, 0x06];
        let (code, r) = run(
            &[(LOAD1, Some(LOAD_MARK)), (bcast, None), (mul, None), (nt, Some(STREAM_MARK)), (RET, None)],
            true,
            1,
        );
        assert_eq!(r, Ok(4));
        let want = [
            0xc5, 0xfe, 0x6f, 0x0a, 0xc4, 0xe2, 0x7d, 0x18, 0xd3, 0xc5, 0xf4, 0x59, 0xc2, 0xc5, 0xfc, 0x2b,
            0x06, 0xc3,
        ];
        assert_eq!(code, want);
        // vxorps xmm0, xmm0, xmm0 is zero in every lane whatever xmm0 held.
        let zero: &[u8] = &[0xc5, 0xf8, 0x57, 0xc0];
        let (_, r) = run(&[(zero, None), (STORE, Some(STORE_MARK)), (RET, None)], true, 1);
        assert_eq!(r, Ok(2));
        // Outside a wide loop's code too: VEX zeroes the bits above 128 (Cranelift hoists
        // a loop's zero vector out of it). Not so `xorps xmm0, xmm0`, which keeps them.
        let (_, r) = run(&[(zero, None), (STORE, Some(STORE_MARK)), (RET, None)], false, 1);
        assert_eq!(r, Ok(1));
        let legacy: &[u8] = &[0x0f, 0x57, 0xc0];
        refused(&[(legacy, None), (STORE, Some(STORE_MARK)), (RET, None)]);
    }

    #[test]
    fn widens_to_512_bits_in_evex_forms() {
        let mut code = Vec::new();
        let mut traps = Vec::new();
        for (bytes, mark) in [(LOAD, Some(LOAD_MARK)), (ADD, None), (STORE, Some(STORE_MARK)), (RET, None)] {
            if let Some(m) = mark {
                traps.push(MachTrap { offset: code.len() as u32, code: TrapCode::user(m).expect("nonzero") });
            }
            code.extend_from_slice(bytes);
        }
        let spans = vec![(0, code.len())];
        assert_eq!(patch(&mut code, &traps, &spans, (1, 0), true, &mut [], &mut Outcome::default()), Ok(3));
        let mut d = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
        let got: Vec<String> = std::iter::from_fn(|| d.can_decode().then(|| d.decode()))
            .take(4)
            .map(|i| format!("{:?} {:?}", i.code(), i.op0_register()))
            .collect();
        assert_eq!(
            got,
            [
                "EVEX_Vmovdqu32_zmm_k1z_zmmm512 ZMM0",
                "EVEX_Vaddps_zmm_k1z_zmm_zmmm512b32_er ZMM0",
                "EVEX_Vmovups_zmmm512_k1z_zmm None",
                "Retnq None",
            ]
        );
        // Refused the same way as in 256 bits: a store of an unmarked load.
        let mut code = [LOAD, ADD, STORE, RET].concat();
        let traps = [MachTrap { offset: 8, code: TrapCode::user(STORE_MARK).expect("nonzero") }];
        assert!(
            patch(&mut code, &traps, &[(0, 13)], (1, 0), true, &mut [], &mut Outcome::default()).is_err()
        );
    }

    /// `vroundps dst, src, imm` (register form): with modes 3 and 0, the placeholders of
    /// extractions.
    fn round(dst: Register, src: Register, imm: u32) -> Vec<u8> {
        let ins = Instruction::with3(iced_x86::Code::VEX_Vroundps_xmm_xmmm128_imm8, dst, src, imm)
            .expect("a valid vroundps");
        encode_in_place(&ins).expect("encodable")
    }

    /// `patch` of the concatenation of `pieces` (bytes, mark), all inside one wide loop's
    /// span; `extracts`: the placeholders code generation emitted.
    fn run_extracts(
        pieces: &[(&[u8], Option<u8>)],
        extracts: u32,
        zmm: bool,
    ) -> (Vec<u8>, Result<u32, Unproven>) {
        run_emitted(pieces, true, (0, extracts), zmm)
    }

    /// The instructions of `code`: iced's code, first two registers and immediate.
    fn decoded(code: &[u8]) -> Vec<(String, u8)> {
        let mut d = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
        std::iter::from_fn(|| d.can_decode().then(|| d.decode()))
            .map(|i| {
                let imm = if i.op_count() == 3 { i.immediate8() } else { 0 };
                (format!("{:?} {:?} {:?}", i.code(), i.op0_register(), i.op1_register()), imm)
            })
            .collect()
    }

    #[test]
    fn extractions_of_every_register_pair() {
        use iced_x86::Code::*;
        let at = |base: Register, n: usize| Register::try_from(base as usize + n).expect("a register");
        for zmm in [false, true] {
            for src in 0..16 {
                for dst in 0..16 {
                    // vmovdqu xmm_src, [rdi], marked: the source is wide.
                    let load = Instruction::with2(
                        VEX_Vmovdqu_xmm_xmmm128,
                        at(Register::XMM0, src),
                        iced_x86::MemoryOperand::with_base(Register::RDI),
                    )
                    .expect("a load");
                    let load = encode_in_place(&load).expect("encodable");
                    let low = round(at(Register::XMM0, dst), at(Register::XMM0, src), 3);
                    let high = round(at(Register::XMM0, dst), at(Register::XMM0, src), 0);
                    let name =
                        |c: iced_x86::Code, d: Register, s: Register| (format!("{c:?} {d:?} {s:?}"), 1u8);
                    let (code, r) =
                        run_extracts(&[(&load, Some(LOAD_MARK)), (&low, None), (RET, None)], 1, zmm);
                    assert_eq!(r, Ok(2), "zmm {zmm} dst {dst} src {src}");
                    let got = decoded(&code);
                    if zmm {
                        let want = name(
                            EVEX_Vextractf32x4_xmmm128_k1z_zmm_imm8,
                            at(Register::XMM0, dst),
                            at(Register::ZMM0, src),
                        );
                        assert_eq!(got[1], want);
                        let (code, r) =
                            run_extracts(&[(&load, Some(LOAD_MARK)), (&high, None), (RET, None)], 1, zmm);
                        assert_eq!(r, Ok(2), "zmm dst {dst} src {src}");
                        let want = name(
                            EVEX_Vextractf64x4_ymmm256_k1z_zmm_imm8,
                            at(Register::YMM0, dst),
                            at(Register::ZMM0, src),
                        );
                        assert_eq!(decoded(&code)[1], want);
                    } else {
                        let want = name(
                            VEX_Vextractf128_xmmm128_ymm_imm8,
                            at(Register::XMM0, dst),
                            at(Register::YMM0, src),
                        );
                        assert_eq!(got[1], want);
                        // In place, the same length; the code after it unchanged.
                        assert_eq!(code.len(), load.len() + low.len() + 1);
                        assert_eq!(code.last(), Some(&0xc3));
                    }
                }
            }
        }
    }

    #[test]
    fn lanes_12_to_15_from_the_extraction_of_lanes_8_to_15() {
        use iced_x86::Code::*;
        // nearest xmm1 <- xmm0 (lanes 8-15 of zmm0 into ymm1), then trunc xmm2 <- xmm1 (lanes
        // 4-7 of ymm1): proven in 512 bits, where ymm1 is wide in its low 256 bits.
        let (high, low) =
            (round(Register::XMM1, Register::XMM0, 0), round(Register::XMM2, Register::XMM1, 3));
        let pieces: [(&[u8], Option<u8>); 4] =
            [(LOAD, Some(LOAD_MARK)), (&high, None), (&low, None), (RET, None)];
        let (code, r) = run_extracts(&pieces, 3, true);
        assert_eq!(r, Ok(3));
        let got = decoded(&code);
        assert_eq!(got[1].0, format!("{:?} YMM1 ZMM0", EVEX_Vextractf64x4_ymmm256_k1z_zmm_imm8));
        assert_eq!(got[2].0, format!("{:?} XMM2 ZMM1", EVEX_Vextractf32x4_xmmm128_k1z_zmm_imm8));
        // But not lanes 8-15 of that: ymm1 is not wide in 512 bits.
        let high2 = round(Register::XMM2, Register::XMM1, 0);
        let pieces: [(&[u8], Option<u8>); 4] =
            [(LOAD, Some(LOAD_MARK)), (&high, None), (&high2, None), (RET, None)];
        assert!(run_extracts(&pieces, 3, true).1.is_err());
        // A rounding down or up (the kernel's `floor`, `ceil`) stays one.
        let floor = round(Register::XMM1, Register::XMM0, 1);
        let pieces: [(&[u8], Option<u8>); 3] = [(LOAD, Some(LOAD_MARK)), (&floor, None), (RET, None)];
        let (code, r) = run_extracts(&pieces, 0, false);
        assert_eq!(r, Ok(1));
        assert_eq!(decoded(&code)[1], (format!("{:?} XMM1 XMM0", VEX_Vroundps_xmm_xmmm128_imm8), 1));
    }

    #[test]
    fn refuses_extractions_it_cannot_prove_or_encode() {
        let refused = |pieces: &[(&[u8], Option<u8>)], extracts: u32, zmm: bool| {
            let original: Vec<u8> = pieces.iter().flat_map(|p| p.0.iter().copied()).collect();
            let (code, r) = run_extracts(pieces, extracts, zmm);
            assert!(r.is_err(), "{pieces:02x?} was rewritten");
            assert_eq!(code, original, "a refused function was changed");
        };
        let low = round(Register::XMM1, Register::XMM0, 3);
        let high = round(Register::XMM1, Register::XMM0, 0);
        for zmm in [false, true] {
            // Of a register not computed wide: an unmarked load, or a reload of a spill.
            refused(&[(LOAD, None), (&low, None), (RET, None)], 1, zmm);
            let spill: &[u8] = &[0xc5, 0xfa, 0x7f, 0x44, 0x24, 0x10];
            let reload: &[u8] = &[0xc5, 0xfa, 0x6f, 0x44, 0x24, 0x10];
            refused(
                &[(LOAD, Some(LOAD_MARK)), (spill, None), (reload, None), (&low, None), (RET, None)],
                1,
                zmm,
            );
            // A placeholder when none was emitted: a rounding of the kernel's own.
            refused(&[(LOAD, Some(LOAD_MARK)), (&low, None), (RET, None)], 0, zmm);
            // None when some were emitted: lowered otherwise, they would round lanes.
            let (_, r) = run_extracts(&[(LOAD, Some(LOAD_MARK)), (RET, None)], 1, zmm);
            assert!(r.is_err_and(|e| e.at_extraction()), "zmm {zmm}");
        }
        // Lanes 8-15 of a `ymm`.
        refused(&[(LOAD, Some(LOAD_MARK)), (&high, None), (RET, None)], 1, false);
        refused(&[(LOAD, None), (&high, None), (RET, None)], 1, true);
        // The memory form: `vroundps xmm1, [rdi], 3`; and the form without VEX.
        let mem = Instruction::with3(
            iced_x86::Code::VEX_Vroundps_xmm_xmmm128_imm8,
            Register::XMM1,
            iced_x86::MemoryOperand::with_base(Register::RDI),
            3,
        )
        .expect("a valid vroundps");
        let mem = encode_in_place(&mem).expect("encodable");
        refused(&[(LOAD, Some(LOAD_MARK)), (&mem, None), (RET, None)], 1, false);
        let legacy =
            Instruction::with3(iced_x86::Code::Roundps_xmm_xmmm128_imm8, Register::XMM1, Register::XMM0, 3)
                .expect("a valid roundps");
        let legacy = encode_in_place(&legacy).expect("encodable");
        refused(&[(LOAD, Some(LOAD_MARK)), (&legacy, None), (RET, None)], 1, false);
    }

    #[test]
    fn refuses_a_store_of_what_was_not_computed_wide() {
        // An unmarked load.
        refused(&[(LOAD, None), (ADD, None), (STORE, Some(STORE_MARK)), (RET, None)]);
        // Through a stack slot: vmovdqu [rsp+16], xmm0; vmovdqu xmm0, [rsp+16].
        let spill: &[u8] = &[0xc5, 0xfa, 0x7f, 0x44, 0x24, 0x10];
        let reload: &[u8] = &[0xc5, 0xfa, 0x6f, 0x44, 0x24, 0x10];
        refused(&[
            (LOAD, Some(LOAD_MARK)),
            (spill, None),
            (reload, None),
            (STORE, Some(STORE_MARK)),
            (RET, None),
        ]);
        // Across a call, which may clobber every vector register: call rax.
        let call: &[u8] = &[0xff, 0xd0];
        refused(&[(LOAD, Some(LOAD_MARK)), (call, None), (STORE, Some(STORE_MARK)), (RET, None)]);
        // A move without VEX (movaps xmm0, xmm1) of a register not computed wide.
        let legacy: &[u8] = &[0x0f, 0x28, 0xc1];
        refused(&[(LOAD, None), (legacy, None), (STORE, Some(STORE_MARK)), (RET, None)]);
        // A shuffle is not lane-wise: vpshufd xmm0, xmm0, 0.
        let shuffle: &[u8] = &[0xc5, 0xf9, 0x70, 0xc0, 0x00];
        refused(&[(LOAD, Some(LOAD_MARK)), (shuffle, None), (STORE, Some(STORE_MARK)), (RET, None)]);
        // A marked load merged into arithmetic: vaddps xmm0, xmm0, [rdi].
        let merged: &[u8] = &[0xc5, 0xf8, 0x58, 0x07];
        refused(&[(merged, Some(LOAD_MARK)), (STORE, Some(STORE_MARK)), (RET, None)]);
    }

    #[test]
    fn moves_without_vex_become_moves_of_the_whole_register() {
        // vmovups [rsi], xmm1 and [rsi], xmm9: the stores of the moved registers.
        let store1: &[u8] = &[0xc5, 0xf8, 0x11, 0x0e];
        let store9: &[u8] = &[0xc5, 0x78, 0x11, 0x0e];
        let decoded = |code: &[u8], at: usize| {
            let i = Decoder::with_ip(64, &code[at..], 0, DecoderOptions::NONE).decode();
            (i.mnemonic(), i.op0_register(), i.op1_register(), i.len())
        };
        // movdqa xmm1, xmm0, then with a REX prefix movdqa xmm9, xmm0: in 256 bits the VEX
        // move of the same length, in place.
        for (mv, store, dst) in [
            (&[0x66, 0x0f, 0x6f, 0xc8][..], store1, Register::YMM1),
            (&[0x66, 0x44, 0x0f, 0x6f, 0xc8][..], store9, Register::YMM9),
        ] {
            let (code, r) =
                run(&[(LOAD, Some(LOAD_MARK)), (mv, None), (store, Some(STORE_MARK)), (RET, None)], true, 1);
            assert_eq!(r, Ok(3), "{mv:02x?}");
            let (m, d, s, len) = decoded(&code, LOAD.len());
            assert!(matches!(m, Mnemonic::Vmovaps | Mnemonic::Vmovdqa), "{m:?}");
            assert_eq!((d, s, len), (dst, Register::YMM0, mv.len()));
            // Outside every wide loop's code it keeps the old high half: refused.
            let (_, r) =
                run(&[(LOAD, Some(LOAD_MARK)), (mv, None), (store, Some(STORE_MARK)), (RET, None)], false, 1);
            assert!(r.is_err());
        }
        // movaps xmm1, xmm0 has 3 bytes, fewer than any VEX instruction: the function is
        // encoded again with a `vmovaps` of the whole register, in 256 bits as in 512.
        let movaps: &[u8] = &[0x0f, 0x28, 0xc8];
        for (zmm, want) in [
            (false, iced_x86::Code::VEX_Vmovaps_ymm_ymmm256),
            (true, iced_x86::Code::EVEX_Vmovaps_zmm_k1z_zmmm512),
        ] {
            let program = [(LOAD, Some(LOAD_MARK)), (movaps, None), (store1, Some(STORE_MARK)), (RET, None)];
            let (code, r) = run_in(&program, true, zmm);
            assert_eq!(r, Ok(3));
            let mut d = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
            let all: Vec<Instruction> = std::iter::from_fn(|| d.can_decode().then(|| d.decode())).collect();
            let wide = if zmm { Register::ZMM0 } else { Register::YMM0 };
            assert_eq!(
                (all[1].code(), all[1].op0_register(), all[1].op1_register()),
                (want, reg(wide, 1), reg(wide, 0))
            );
            // The load and the store around it are widened too, and the return follows.
            assert_eq!(all[0].op0_register(), reg(wide, 0));
            assert_eq!(all[2].op1_register(), reg(wide, 1));
            assert_eq!(all[3].mnemonic(), Mnemonic::Ret);
        }
    }

    /// The twelve register forms of the moves without VEX, both directions of operands.
    const LEGACY: [iced_x86::Code; 12] = {
        use iced_x86::Code::*;
        [
            Movaps_xmm_xmmm128,
            Movaps_xmmm128_xmm,
            Movapd_xmm_xmmm128,
            Movapd_xmmm128_xmm,
            Movups_xmm_xmmm128,
            Movups_xmmm128_xmm,
            Movupd_xmm_xmmm128,
            Movupd_xmmm128_xmm,
            Movdqa_xmm_xmmm128,
            Movdqa_xmmm128_xmm,
            Movdqu_xmm_xmmm128,
            Movdqu_xmmm128_xmm,
        ]
    };

    fn reg(base: Register, n: usize) -> Register {
        Register::try_from(base as usize + n).expect("a register")
    }

    fn decode_at(bytes: &[u8]) -> Instruction {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode()
    }

    /// Every legacy move of every pair of `xmm0`–`xmm15`, as iced encodes it and with a
    /// redundant REX or REX.W: the VEX move is the same length, from the same register to
    /// the same one, or there is none (then the move stays as it is, and narrow).
    #[test]
    fn every_legacy_move_has_a_vex_form_of_its_length_or_none() {
        let (mut rewritten, mut kept) = (0, 0);
        for code in LEGACY {
            for (d, s) in (0..16).flat_map(|d| (0..16).map(move |s| (d, s))) {
                let ins =
                    Instruction::with2(code, reg(Register::XMM0, d), reg(Register::XMM0, s)).expect("a move");
                let mut enc = iced_x86::Encoder::new(64);
                enc.encode(&ins, 0x1000).expect("encodes");
                let base = enc.take_buffer();
                let escape = base.iter().position(|&b| b == 0x0f).expect("0f");
                let has_rex = escape > 0 && base[escape - 1] & 0xf0 == 0x40;
                let mut forms = vec![base.clone()];
                for rex in [0x40u8, 0x48] {
                    let mut v = base.clone();
                    match has_rex {
                        true if rex == 0x40 => continue,
                        true => v[escape - 1] |= rex,
                        false => v.insert(escape, rex),
                    }
                    forms.push(v);
                }
                for bytes in forms {
                    let legacy = decode_at(&bytes);
                    assert_eq!((legacy.code(), legacy.len()), (code, bytes.len()), "{bytes:02x?}");
                    let Some(v) = vex_move(&legacy) else {
                        kept += 1;
                        continue;
                    };
                    rewritten += 1;
                    let w = decode_at(&v);
                    assert_eq!(w.len(), bytes.len(), "{bytes:02x?} -> {v:02x?}");
                    assert_eq!(w.encoding(), EncodingKind::VEX);
                    assert!(matches!(w.mnemonic(), Mnemonic::Vmovaps | Mnemonic::Vmovdqa), "{w}");
                    assert_eq!(
                        (w.op_register(0), w.op_register(1)),
                        (reg(Register::YMM0, d), reg(Register::YMM0, s)),
                        "{bytes:02x?} -> {w}"
                    );
                }
            }
        }
        // Not all: `movaps xmm0, xmm1` has 3 bytes, fewer than any VEX instruction.
        assert!(rewritten > 0 && kept > 0, "{rewritten} {kept}");
    }

    /// In 512 bits every legacy move becomes the unmasked EVEX move of the whole `zmm`.
    #[test]
    fn every_legacy_move_has_an_evex_form() {
        for code in LEGACY {
            for (d, s) in (0..16).flat_map(|d| (0..16).map(move |s| (d, s))) {
                let ins =
                    Instruction::with2(code, reg(Register::XMM0, d), reg(Register::XMM0, s)).expect("a move");
                let w = crate::evex::to_zmm(&ins).expect("a zmm form");
                let mut enc = iced_x86::Encoder::new(64);
                enc.encode(&w, 0x1000).expect("encodes");
                let x = decode_at(&enc.take_buffer());
                assert_eq!(x.encoding(), EncodingKind::EVEX);
                assert!(matches!(
                    x.mnemonic(),
                    Mnemonic::Vmovaps | Mnemonic::Vmovups | Mnemonic::Vmovdqa32 | Mnemonic::Vmovdqu32
                ));
                assert_eq!((x.op_mask(), x.zeroing_masking()), (Register::None, false));
                assert_eq!(
                    (x.op_register(0), x.op_register(1)),
                    (reg(Register::ZMM0, d), reg(Register::ZMM0, s))
                );
            }
        }
    }

    /// [`run_with`], one marked store emitted.
    fn run_in(pieces: &[(&[u8], Option<u8>)], span: bool, zmm: bool) -> (Vec<u8>, Result<u32, Unproven>) {
        run_with(pieces, span, 1, zmm)
    }

    /// `vmovups [rsi], xmmR`.
    fn store_of(r: u8) -> [u8; 4] {
        [0xc5, if r < 8 { 0xf8 } else { 0x78 }, 0x11, 0x06 | ((r & 7) << 3)]
    }

    #[test]
    fn moves_in_either_direction_and_of_narrow_sources() {
        // The store form, movdqa xmm1, xmm0 (66 0f 7f c1), and with REX.B xmm9, xmm0.
        for (mv, r) in [(&[0x66, 0x0f, 0x7f, 0xc1][..], 1), (&[0x66, 0x41, 0x0f, 0x7f, 0xc1][..], 9)] {
            for zmm in [false, true] {
                let st = store_of(r);
                let (code, res) = run_in(
                    &[(LOAD, Some(LOAD_MARK)), (mv, None), (&st, Some(STORE_MARK)), (RET, None)],
                    true,
                    zmm,
                );
                assert_eq!(res, Ok(3), "{mv:02x?} zmm {zmm}");
                let mut dec = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
                let w = std::iter::from_fn(|| dec.can_decode().then(|| dec.decode())).nth(1).expect("a move");
                let dst = reg(if zmm { Register::ZMM0 } else { Register::YMM0 }, r.into());
                assert_eq!(w.op_register(0), dst, "{w}");
            }
        }
        // Both registers past xmm7 (movaps xmm8, xmm9: 45 0f 28 c1): no VEX form of 4
        // bytes, so the function is encoded again, in 256 bits as in 512.
        let load9: &[u8] = &[0xc5, 0x7a, 0x6f, 0x0f];
        let mv: &[u8] = &[0x45, 0x0f, 0x28, 0xc1];
        let st8 = store_of(8);
        let program = [(load9, Some(LOAD_MARK)), (mv, None), (&st8[..], Some(STORE_MARK)), (RET, None)];
        for zmm in [false, true] {
            let (code, r) = run_in(&program, true, zmm);
            assert_eq!(r, Ok(3));
            let mut dec = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
            let w = std::iter::from_fn(|| dec.can_decode().then(|| dec.decode())).nth(1).expect("a move");
            let wide = if zmm { Register::ZMM0 } else { Register::YMM0 };
            assert_eq!((w.op_register(0), w.op_register(1)), (reg(wide, 8), reg(wide, 9)), "{w}");
        }
        // A move of a narrow register makes its destination narrow: vmovdqu xmm1, [rdx]
        // (marked) then movdqa xmm1, xmm2; or a wide move then movss xmm1, xmm2.
        let load1: &[u8] = &[0xc5, 0xfa, 0x6f, 0x0a];
        let narrow: &[u8] = &[0x66, 0x0f, 0x6f, 0xca];
        let wide: &[u8] = &[0x66, 0x0f, 0x6f, 0xc8];
        let movss: &[u8] = &[0xf3, 0x0f, 0x10, 0xca];
        let st1 = store_of(1);
        for zmm in [false, true] {
            let p = [(load1, Some(LOAD_MARK)), (narrow, None), (&st1[..], Some(STORE_MARK)), (RET, None)];
            assert!(run_in(&p, true, zmm).1.is_err(), "zmm {zmm}");
            let p = [
                (LOAD, Some(LOAD_MARK)),
                (wide, None),
                (movss, None),
                (&st1[..], Some(STORE_MARK)),
                (RET, None),
            ];
            assert!(run_in(&p, true, zmm).1.is_err(), "zmm {zmm}");
        }
    }

    /// A move the proof does not need is encoded again as the 128-bit VEX move (module
    /// `vex`), not as a move of the whole register; when the proof needs one move, every
    /// move becomes the move of the whole register. Neither counts as an SSE instruction
    /// encoded again.
    #[test]
    fn moves_the_proof_does_not_need_take_their_128_bit_vex_forms() {
        let short: &[u8] = &[0x0f, 0x28, 0xd3]; // movaps xmm2, xmm3
        let vex_short: &[u8] = &[0xc5, 0xf8, 0x28, 0xd3]; // vmovaps xmm2, xmm3
        let (code, r, out) = run_outcome(
            &[(LOAD, Some(LOAD_MARK)), (short, None), (STORE, Some(STORE_MARK)), (RET, None)],
            false,
        );
        assert_eq!((r, out.vex_encoded), (Ok(2), 1));
        // Encoded again (the move grew), the code is padded with `int3` to its alignment.
        let want = [&[0xc5, 0xfe, 0x6f, 0x07][..], vex_short, &[0xc5, 0xfc, 0x11, 0x06], RET].concat();
        assert_eq!(code[..want.len()], want);
        assert!(code[want.len()..].iter().all(|&b| b == 0xcc));
        // vmovdqu xmm1, [rdi] (marked); movaps xmm9, xmm1 (needed, 4 bytes); the short
        // move; vmovups [rsi], xmm9 (marked).
        let load1: &[u8] = &[0xc5, 0xfa, 0x6f, 0x0f];
        let needed: &[u8] = &[0x44, 0x0f, 0x28, 0xc9];
        let st9 = store_of(9);
        let program = [
            (load1, Some(LOAD_MARK)),
            (needed, None),
            (short, None),
            (&st9[..], Some(STORE_MARK)),
            (RET, None),
        ];
        let before: Vec<u8> = program.iter().flat_map(|p| p.0.iter().copied()).collect();
        let (code, r, out) = run_outcome(&program, false);
        assert_eq!((r, out.vex_encoded), (Ok(4), 0));
        assert_eq!(code[before.len()], RET[0], "encoded again, one byte longer");
        assert!(code[before.len() + 1..].iter().all(|&b| b == 0xcc));
        assert_eq!(&code[8..12], &[0xc5, 0xfc, 0x28, 0xd3], "vmovaps ymm2, ymm3");
        let w = decode_at(&code[4..8]);
        assert_eq!((w.op_register(0), w.op_register(1)), (Register::YMM9, Register::YMM1), "{w}");
    }

    /// SSE instructions the proof has no use for take their VEX forms in 256 and 512 bits:
    /// a reload of the same length in place (the function keeps its layout in 256 bits),
    /// a `movaps` one byte longer and a `maxss` with the function encoded again. The
    /// count of widened instructions leaves them out.
    #[test]
    fn sse_instructions_take_their_vex_forms_in_place_or_encoded_again() {
        // movdqu 0x90(%rsp),%xmm5
        let reload: &[u8] = &[0xf3, 0x0f, 0x6f, 0xac, 0x24, 0x90, 0, 0, 0];
        let movaps: &[u8] = &[0x0f, 0x28, 0xe5]; // movaps %xmm5,%xmm4
        let maxss: &[u8] = &[0xf3, 0x0f, 0x5f, 0xe5]; // maxss %xmm5,%xmm4
        for zmm in [false, true] {
            let program = [(LOAD, Some(LOAD_MARK)), (reload, None), (STORE, Some(STORE_MARK)), (RET, None)];
            let (code, r, out) = run_outcome(&program, zmm);
            assert_eq!((r, out.vex_encoded), (Ok(2), 1), "zmm {zmm}");
            assert_eq!(listed(&code)[1], "vmovdqu 0x90(%rsp),%xmm5", "zmm {zmm}");
            if !zmm {
                assert_eq!(code.len(), 18, "in place");
            }
            let program = [
                (LOAD, Some(LOAD_MARK)),
                (movaps, None),
                (maxss, None),
                (STORE, Some(STORE_MARK)),
                (RET, None),
            ];
            let (code, r, out) = run_outcome(&program, zmm);
            assert_eq!((r, out.vex_encoded), (Ok(2), 2), "zmm {zmm}");
            let t = listed(&code);
            assert_eq!(t[1..3], ["vmovaps %xmm5,%xmm4", "vmaxss %xmm5,%xmm4,%xmm4"], "zmm {zmm}");
            let wide = if zmm { "%zmm0" } else { "%ymm0" };
            assert!(t[0].ends_with(wide) && t[3].contains(wide), "zmm {zmm}: {t:?}");
        }
    }

    /// Encoded again around a grown move (256 bits) or everything (512): a conditional
    /// branch in either form still lands on its target, a RIP-relative load still finds
    /// the data after the code (kept at its offset modulo 64), a backward branch still
    /// reaches the start, and a relocation follows its immediate.
    #[test]
    fn branches_data_and_relocations_follow_a_function_encoded_again() {
        for (short_jcc, zmm) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut code: Vec<u8> = LOAD.to_vec();
            let mut traps = vec![MachTrap { offset: 0, code: TrapCode::user(LOAD_MARK).expect("nonzero") }];
            code.extend_from_slice(&[0x0f, 0x28, 0xc8]); // movaps xmm1, xmm0
            code.extend_from_slice(&[0x48, 0x85, 0xd2]); // test rdx, rdx
            // je over `mov rax, imm64` (relocated) and `mov ecx, 1`, to the store.
            let skip: i32 = 10 + 5;
            if short_jcc {
                code.extend_from_slice(&[0x74, skip as u8]);
            } else {
                code.extend_from_slice(&[0x0f, 0x84]);
                code.extend_from_slice(&skip.to_le_bytes());
            }
            let mov_at = code.len();
            code.extend_from_slice(&[0x48, 0xb8]);
            code.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
            code.extend_from_slice(&[0xb9, 1, 0, 0, 0]);
            traps.push(MachTrap {
                offset: code.len() as u32,
                code: TrapCode::user(STORE_MARK).expect("nonzero"),
            });
            code.extend_from_slice(&store_of(1));
            let rip_at = code.len();
            code.extend_from_slice(&[0xc5, 0xf8, 0x10, 0x1d, 0, 0, 0, 0]); // vmovups xmm3, [rip + data]
            code.extend_from_slice(&[0x48, 0xff, 0xca]); // dec rdx
            let jnz_at = code.len();
            code.extend_from_slice(&[0x0f, 0x85]); // jnz 0
            code.extend_from_slice(&(-(jnz_at as i32 + 6)).to_le_bytes());
            code.extend_from_slice(RET);
            let end = code.len();
            code.resize(64, 0xcc);
            code.extend_from_slice(&[0xab; 16]);
            let disp = 64 - (rip_at as i32 + 8);
            code[rip_at + 4..rip_at + 8].copy_from_slice(&disp.to_le_bytes());
            let mut relocs = [mov_at as u32 + 2];
            assert_eq!(
                patch(&mut code, &traps, &[(0, end)], (1, 0), zmm, &mut relocs, &mut Outcome::default()),
                Ok(3),
                "zmm {zmm}"
            );
            let mut d = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
            let all: Vec<Instruction> = std::iter::from_fn(|| d.can_decode().then(|| d.decode()))
                .take_while(|i| i.ip() < end as u64 * 2)
                .take(11)
                .collect();
            use Mnemonic::*;
            let m: Vec<Mnemonic> = all.iter().map(|i| i.mnemonic()).collect();
            assert_eq!(m[1..6], [Vmovaps, Test, Je, Mov, Mov], "zmm {zmm}");
            assert_eq!(all[3].near_branch_target(), all[6].ip(), "je lands on the store");
            assert_eq!(all[3].len(), if short_jcc { 2 } else { 6 });
            let a = all[7].ip_rel_memory_address() as usize;
            assert_eq!((a % 64, &code[a..a + 16]), (0, &[0xab; 16][..]));
            assert_eq!((all[9].mnemonic(), all[9].near_branch_target()), (Jne, 0));
            assert_eq!(all[10].mnemonic(), Ret);
            let at = relocs[0] as usize;
            assert_eq!(at, all[4].ip() as usize + 2);
            assert_eq!(&code[at..at + 8], &0x1122_3344_5566_7788u64.to_le_bytes());
        }
    }

    #[test]
    fn zeroing_idioms_of_every_kind() {
        let (st0, st1, st8) = (store_of(0), store_of(1), store_of(8));
        // vxorps, vpxor, vxorpd xmm1, xmm0, xmm0; vxorps xmm8, xmm8, xmm8 (3-byte VEX).
        let zeros: [(&[u8], &[u8]); 4] = [
            (&[0xc5, 0xf8, 0x57, 0xc8], &st1),
            (&[0xc5, 0xf9, 0xef, 0xc8], &st1),
            (&[0xc5, 0xf9, 0x57, 0xc8], &st1),
            (&[0xc4, 0x41, 0x38, 0x57, 0xc0], &st8),
        ];
        for (z, st) in zeros {
            for zmm in [false, true] {
                let (code, r) = run_in(&[(z, None), (st, Some(STORE_MARK)), (RET, None)], false, zmm);
                assert!(r.is_ok(), "{z:02x?} zmm {zmm}: {r:?}");
                // Left as it is (VEX zeroes every width) outside a wide loop.
                assert_eq!(&code[..z.len()], z);
            }
        }
        // vxorps xmm0, xmm0, xmm2 is no zero; nor is a zero a call may have clobbered.
        let not_zero: &[u8] = &[0xc5, 0xf8, 0x57, 0xc2];
        let zero: &[u8] = &[0xc5, 0xf8, 0x57, 0xc0];
        let call: &[u8] = &[0xff, 0xd0];
        for zmm in [false, true] {
            assert!(
                run_in(&[(not_zero, None), (&st0, Some(STORE_MARK)), (RET, None)], false, zmm).1.is_err()
            );
            let p = [(zero, None), (call, None), (&st0[..], Some(STORE_MARK)), (RET, None)];
            assert!(run_in(&p, false, zmm).1.is_err());
        }
    }

    #[test]
    fn a_register_is_wide_only_if_it_is_on_every_path() {
        // test eax, eax; je over the next load; then the store.
        let test: &[u8] = &[0x85, 0xc0];
        let je: &[u8] = &[0x74, 0x04];
        let other: &[u8] = &[0xc5, 0xfa, 0x6f, 0x02]; // vmovdqu xmm0, [rdx]
        let program = |mark| {
            [
                (LOAD, Some(LOAD_MARK)),
                (test, None),
                (je, None),
                (other, mark),
                (STORE, Some(STORE_MARK)),
                (RET, None),
            ]
        };
        refused(&program(None));
        let (_, r) = run(&program(Some(LOAD_MARK)), true, 1);
        assert_eq!(r, Ok(3));
    }

    #[test]
    fn widens_lane_wise_instructions_only_inside_wide_loops() {
        // Outside every span the add is left narrow, so its result is not wide.
        let (code, r) =
            run(&[(LOAD, Some(LOAD_MARK)), (ADD, None), (STORE, Some(STORE_MARK)), (RET, None)], false, 1);
        assert!(r.is_err());
        assert_eq!(&code[4..8], ADD);
    }

    #[test]
    fn refuses_more_marked_stores_than_were_emitted() {
        let (_, r) = run(&[(LOAD, Some(LOAD_MARK)), (STORE, Some(STORE_MARK)), (RET, None)], true, 0);
        assert!(r.is_err());
    }
}
