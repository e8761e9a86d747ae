//! `fp16` tiles converted by the CPU's F16C instructions, which Cranelift does not have.
//!
//! Without them a tile of four `fp16` lanes widens to `f32` in about a dozen integer and
//! float instructions, and rounds back in about two dozen (`half.rs`). With them, one
//! each way: `vcvtph2ps xmm, m64` loads the four halves and converts them exactly, and
//! `vcvtps2ph m64, xmm, 0` rounds four `f32` lanes and stores them, as the runtime's row
//! helpers do.
//!
//! Code generation emits the load as Cranelift's `uload16x4` (four `u16` lanes
//! zero-extended to `i32x4`), whose memory flags carry a trap code of our own, [`MARK`],
//! and takes its result as `f32x4`. With AVX, Cranelift encodes that load as `vpmovzxwd
//! xmm, m64`, which has the same prefix, operands and length as `vcvtph2ps`: after
//! compilation each marked one is rewritten in place:
//!
//! | Cranelift emits | becomes |
//! |---|---|
//! | `vpmovzxwd xmm, m64` (`VEX.128.66.0F38.WIG 33 /r`) | `vcvtph2ps xmm, m64` (`VEX.128.66.0F38.W0 13 /r`) |
//! | `vpextrq m64, xmm, ib` (`VEX.128.66.0F3A.W1 16 /r ib`) | `vcvtps2ph m64, xmm, 0` (`VEX.128.66.0F3A.W0 1D /r ib`) |
//!
//! The second narrows: a tile stored to `fp16` is emitted as a store of the low 64 bits of
//! its `f32x4` (a store of `extractlane.i64`, with the mark [`NARROW_MARK`]), which
//! becomes a conversion of its four lanes to `fp16` stored there, rounding to nearest even
//! (immediate 0) whatever the MXCSR says.
//!
//! Arithmetic on `fp16` tiles (computed in `f32`, rounded to `fp16` after every operation)
//! rounds the same way: the result is narrowed into 8 bytes of the program's scratch area
//! and widened back ([`round_4`]), a store the load is forwarded from. Measured on an
//! elementwise `x * 1.5 + x * x` in `fp16` (2²⁰ elements, one thread): 2.45 ms with
//! integer rounding, 0.70 ms; 0.31 ms once a result that only stores use is left unrounded
//! (each store rounds what it stores, and rounding twice to nearest even gives the bits of
//! rounding once; `half::only_stored`). Scalar code converts through the same 8 bytes:
//! a scalar `fp16` element is stored there and widened as lane 0 ([`widen_1`]), an `f32`
//! scalar rounded in lane 0 ([`bits_1`], [`round_1`]), outside the loops computed in wide
//! parts. Nothing else uses those 8 bytes: they lie past
//! every scratch buffer (the compiled kernel asks the runtime for 16 more bytes), and a
//! worker runs its programs one after another in its own area.
//!
//! Only the opcode byte, the VEX `W` bit and the immediate change; the register, the
//! addressing (ModRM, SIB, displacement) and the VEX `R`, `X`, `B` bits stay. The widening
//! writes all 128 bits of the register, and Cranelift only ever sees the value as a
//! 128-bit vector, so it moves and spills it whole. An instruction found at a mark that is
//! not the expected encoding is an error of the compilation, never left in the code.
//!
//! That check sees only what is at a mark. Two more facts keep the rewrite sound, both
//! true of the pinned Cranelift (0.135.8; re-check them on an upgrade):
//! - Cranelift's optimizer has no rules that rewrite, merge or drop `uload16x4`, `bitcast`
//!   or `extractlane`, and loads and stores with a trap code are never removed or folded
//!   into other instructions; alias analysis keys loads by opcode and type, so a marked
//!   `uload16x4` never takes the value of another load;
//! - lnc never loads `fp16` memory as a plain 64-bit integer: such a load after a marked
//!   store of the same address would be given the stored `extractlane` value (the `f32`
//!   bits) instead of the `fp16` halves the rewritten store wrote. The round trip through
//!   scratch relies on the same keys: its marked `i64` store and marked `uload16x4` load
//!   differ in type and opcode, so the load is never given the stored value, and the store,
//!   with no alias region, is never removed as dead nor moved past the load.
//!
//! The conversions are those of the `half` crate for every pattern: widening is exact
//! (subnormals become normal `f32`, infinities stay, NaNs keep their sign and payload and
//! are quieted); narrowing rounds to nearest even, overflows to infinity, keeps
//! subnormals, and quiets NaNs keeping their sign and high payload bits, as `half.rs`'s
//! integer code does (the runtime's row helpers use the same instructions; the tests
//! compare every `fp16` pattern and a million `f32` ones).

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::{InstBuilder, Value, types};

use crate::CodegenError;
use crate::base::FunctionCx;
use crate::marks;

/// The trap code marking a `uload16x4` to rewrite into `vcvtph2ps`.
pub(crate) const MARK: u8 = 0x51;

/// The trap code marking a store of `extractlane.i64` to rewrite into `vcvtps2ph`.
pub(crate) const NARROW_MARK: u8 = 0x52;

/// The trap code marking the `uload16x4` of a wide part (module `wide`): rewritten into
/// `vcvtph2ps` here, then widened to `ymm, m128` by module `widen`.
pub(crate) const WIDE_MARK: u8 = 0x5a;

/// The trap code marking the `fp16` store of a wide part: rewritten into `vcvtps2ph`
/// here, then widened to `m128, ymm` by module `widen`, or in 512-bit loops made a
/// conversion into `ymm16` and a store of it by module `evex` (`evex::store_f16`).
pub(crate) const WIDE_NARROW_MARK: u8 = 0x5b;

/// The trap code marking the streaming `fp16` store of a wide part of 16 lanes: rewritten
/// into `vcvtps2ph` here, then by module `evex` into a conversion into `ymm16` and a
/// non-temporal store of it (`vmovntdq m256, ymm16`), which needs 32-byte alignment.
pub(crate) const WIDE_STREAM_MARK: u8 = 0x5d;

/// Whether kernels compiled for `isa` on this host convert `fp16` tiles with F16C: the
/// host has F16C, and the ISA has AVX, so that Cranelift emits the VEX forms rewritten here.
pub(crate) fn available(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::marks::isa_has(isa, "has_avx") && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        false
    }
}

/// Loads the four `fp16` elements at `addr + offset` as an `f32x4`.
pub(crate) fn widen_4(fx: &mut FunctionCx, addr: Value, offset: i32) -> Value {
    widen_marked(fx, MARK, addr, offset)
}

/// [`widen_4`] of the four elements a wide part holds in its low half (the eight at
/// `addr + offset` once module `widen` is done).
pub(crate) fn widen_wide(fx: &mut FunctionCx, addr: Value, offset: i32) -> Value {
    widen_marked(fx, WIDE_MARK, addr, offset)
}

fn widen_marked(fx: &mut FunctionCx, mark: u8, addr: Value, offset: i32) -> Value {
    let v = fx.bcx.ins().uload16x4(marks::flags(mark), addr, offset);
    fx.bcx.ins().bitcast(types::F32X4, crate::value::bitcast_flags(), v)
}

/// Stores the four lanes of the `f32x4` `v` rounded to `fp16` at `addr + offset`.
pub(crate) fn narrow_4(fx: &mut FunctionCx, v: Value, addr: Value, offset: i32) {
    narrow_marked(fx, NARROW_MARK, v, addr, offset);
}

/// [`narrow_4`] of a wide part (its eight lanes once module `widen` is done).
pub(crate) fn narrow_wide(fx: &mut FunctionCx, v: Value, addr: Value, offset: i32) {
    narrow_marked(fx, WIDE_NARROW_MARK, v, addr, offset);
}

/// [`narrow_wide`] with a non-temporal store ([`WIDE_STREAM_MARK`]): in 512-bit loops
/// always; in 256-bit ones where a register dies at the store (module `widen`; else the
/// store stays cached).
pub(crate) fn stream_wide(fx: &mut FunctionCx, v: Value, addr: Value, offset: i32) {
    narrow_marked(fx, WIDE_STREAM_MARK, v, addr, offset);
}

fn narrow_marked(fx: &mut FunctionCx, mark: u8, v: Value, addr: Value, offset: i32) {
    let q = fx.bcx.ins().bitcast(types::I64X2, crate::value::bitcast_flags(), v);
    let low = fx.bcx.ins().extractlane(q, 0);
    fx.bcx.ins().store(marks::flags(mark), low, addr, offset);
}

/// The `fp16` bits of the four lanes of the `f32x4` `v` (nearest even), each in the low
/// 16 bits of an `i32`: stored rounded into the program's scratch area, as [`round_4`]
/// does, and read back lane by lane.
pub(crate) fn bits_4(fx: &mut FunctionCx, v: Value) -> [Value; 4] {
    let (at, disp) = rounded_into_scratch(fx, v);
    std::array::from_fn(|k| {
        fx.bcx.ins().uload16(types::I32, crate::base::data_flags(), at, disp + 2 * k as i32)
    })
}

/// The four lanes of the `f32x4` `v` rounded to `fp16`, as `f32`: stored rounded into the
/// program's scratch area and loaded back converted. F16C converts registers too, but
/// only a memory access can carry the mark; and not one to a stack slot, whose accesses
/// Cranelift emits without their trap codes. The store forwards to the load, a few
/// cycles, against about two dozen instructions of integer rounding.
pub(crate) fn round_4(fx: &mut FunctionCx, v: Value) -> Value {
    let (at, disp) = rounded_into_scratch(fx, v);
    widen_4(fx, at, disp)
}

/// The `f32` value of the `fp16` bits `h` (an `i32`, upper bits zero), for scalar code:
/// stored as 8 bytes into the program's scratch area and widened from there, lane 0. The
/// load reads the bytes the store wrote, so the store forwards to it; converted with
/// integer code, a scalar took about a dozen Cranelift instructions. Cranelift's alias
/// analysis never gives the marked `uload16x4` the stored `i64` (their types and opcodes
/// differ), and never drops the store as dead: a load with a trap code reads every store
/// before it.
pub(crate) fn widen_1(fx: &mut FunctionCx, h: Value) -> Value {
    let (at, disp) = round_slot(fx);
    let h = fx.bcx.ins().uextend(types::I64, h);
    fx.bcx.ins().store(crate::base::data_flags(), h, at, disp);
    let v = widen_4(fx, at, disp);
    fx.bcx.ins().extractlane(v, 0)
}

/// The `fp16` bits (nearest even) of the `f32` scalar `x`, in the low 16 bits of an `i32`:
/// rounded into the scratch area as [`bits_4`] rounds a tile, lane 0 read back. About
/// two dozen Cranelift instructions with integer code.
pub(crate) fn bits_1(fx: &mut FunctionCx, x: Value) -> Value {
    bits_in_slot(fx, x).0
}

/// The `f32` scalar `x` rounded to `fp16`, as `f32` ([`round_4`] of it, lane 0), and its
/// `fp16` bits, read back from the slot between the two conversions for a later store
/// (a load Cranelift drops when nothing uses it).
pub(crate) fn round_1(fx: &mut FunctionCx, x: Value) -> (Value, Value) {
    let (bits, at, disp) = bits_in_slot(fx, x);
    let r = widen_4(fx, at, disp);
    (fx.bcx.ins().extractlane(r, 0), bits)
}

/// [`bits_1`], and where the rounded lanes are.
fn bits_in_slot(fx: &mut FunctionCx, x: Value) -> (Value, Value, i32) {
    let v = lane0(fx, x);
    let (at, disp) = rounded_into_scratch(fx, v);
    (fx.bcx.ins().uload16(types::I32, crate::base::data_flags(), at, disp), at, disp)
}

/// `x` in lane 0 of an `f32x4`, the other lanes zero (only lane 0 is read back). Not a
/// `splat`: Cranelift's egraph merges it with a wide loop's broadcast of the same scalar
/// (`wide::parts`), which then sits outside the loop's code, where module `widen` cannot
/// prove it wide, and the kernel is refused into its second compile.
fn lane0(fx: &mut FunctionCx, x: Value) -> Value {
    fx.bcx.ins().scalar_to_vector(types::F32X4, x)
}

/// Stores the lanes of `v` rounded to `fp16` into the program's scratch area, after its
/// buffers ([`crate::base::f16c_round_offset`]); returns where.
fn rounded_into_scratch(fx: &mut FunctionCx, v: Value) -> (Value, i32) {
    let (at, disp) = round_slot(fx);
    narrow_4(fx, v, at, disp);
    (at, disp)
}

/// Where conversions go through memory: the 8 bytes after the program's scratch buffers
/// ([`crate::base::f16c_round_offset`]), as a base and a displacement.
fn round_slot(fx: &mut FunctionCx) -> (Value, i32) {
    fx.f16c_rounds = true;
    // The offset in the instructions' displacement: `area + offset` as a value of its own
    // would be rematerialized by Cranelift at every use.
    let offset = crate::base::f16c_round_offset(fx.f);
    match i32::try_from(offset) {
        Ok(disp) => (crate::memory::scratch_area(fx), disp),
        Err(_) => (crate::memory::scratch_at(fx, offset), 0),
    }
}

/// Rewrites the marked loads and stores of `code` (trap records `traps`) in place into
/// `vcvtph2ps` and `vcvtps2ph`; returns how many of each.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> Result<(u32, u32), CodegenError> {
    let mut widened = 0;
    for at in marks::offsets(traps, MARK).chain(marks::offsets(traps, WIDE_MARK)) {
        if !vpmovzxwd_at(code, at) {
            return Err(marks::unexpected(code, at, "an fp16 widening load", "vpmovzxwd"));
        }
        code[at + 2] &= 0x7f;
        code[at + 3] = 0x13;
        widened += 1;
    }
    let mut narrowed = 0;
    let narrow_marks = [NARROW_MARK, WIDE_NARROW_MARK, WIDE_STREAM_MARK];
    for at in narrow_marks.into_iter().flat_map(|m| marks::offsets(traps, m)) {
        let imm = vpextrq_imm_at(code, at)
            .ok_or_else(|| marks::unexpected(code, at, "an fp16 narrowing store", "vpextrq"))?;
        code[at + 2] &= 0x7f;
        code[at + 3] = 0x1d;
        code[imm] = 0;
        narrowed += 1;
    }
    Ok((widened, narrowed))
}

/// The index of the immediate of a `vpextrq m64, xmm, ib` in its 3-byte VEX form starting
/// at `at`, if that is what is there: `C4`, `RXB` and map `0F3A`, then `W = 1`,
/// `vvvv = 1111`, `L = 0`, `pp = 66`, opcode `16`, a ModRM with a memory operand (and its
/// SIB byte and displacement), then the immediate.
fn vpextrq_imm_at(code: &[u8], at: usize) -> Option<usize> {
    let b = code.get(at..at + 5)?;
    if !(b[0] == 0xc4 && b[1] & 0x1f == 0x03 && b[2] == 0xf9 && b[3] == 0x16) {
        return None;
    }
    let modrm = b[4];
    let (md, rm) = (modrm >> 6, modrm & 7);
    let sib = rm == 4;
    let disp = match md {
        0 if rm == 5 => 4,
        0 if sib => {
            let base = *code.get(at + 5)? & 7;
            if base == 5 { 4 } else { 0 }
        }
        0 => 0,
        1 => 1,
        2 => 4,
        _ => return None,
    };
    let imm = at + 5 + usize::from(sib) + disp;
    (imm < code.len()).then_some(imm)
}

/// Whether a `vpmovzxwd xmm, m64` in its 3-byte VEX form starts at `at`: `C4`, then
/// `RXB` and map `0F38`, then `W`, `vvvv = 1111` (no second source), `L = 0` and
/// `pp = 66`, opcode `33`, and a ModRM with a memory operand.
fn vpmovzxwd_at(code: &[u8], at: usize) -> bool {
    let Some(b) = code.get(at..at + 5) else { return false };
    b[0] == 0xc4 && b[1] & 0x1f == 0x02 && b[2] & 0x7f == 0x79 && b[3] == 0x33 && b[4] >> 6 != 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::{assert_refuses, assert_rewrites};

    /// The widening rewrite alone: how many loads it rewrote.
    fn widen(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
        patch(code, traps).map(|(widened, _)| widened)
    }

    /// The narrowing rewrite alone: how many stores it rewrote.
    fn narrow(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
        patch(code, traps).map(|(_, narrowed)| narrowed)
    }

    #[test]
    fn rewrites_vpmovzxwd_to_vcvtph2ps() {
        let cases: [(&[u8], &[u8]); 3] = [
            // vpmovzxwd (%rdi), %xmm0
            (&[0xc4, 0xe2, 0x79, 0x33, 0x07], &[0xc4, 0xe2, 0x79, 0x13, 0x07]),
            // vpmovzxwd 0x10(%r8,%r9,2), %xmm12 (VEX.R, X, B clear = extended registers)
            (&[0xc4, 0x02, 0x79, 0x33, 0x64, 0x48, 0x10], &[0xc4, 0x02, 0x79, 0x13, 0x64, 0x48, 0x10]),
            // W set (WIG lets an assembler set it): cleared, vcvtph2ps is W0
            (
                &[0xc4, 0xe2, 0xf9, 0x33, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00],
                &[0xc4, 0xe2, 0x79, 0x13, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00],
            ),
        ];
        assert_rewrites(MARK, &cases, widen);
    }

    #[test]
    fn refuses_anything_else() {
        let cases: [&[u8]; 6] = [
            &[0xc4, 0xe2, 0x79, 0x33, 0xc1], // vpmovzxwd %xmm1, %xmm0: a register operand
            &[0x66, 0x0f, 0x38, 0x33, 0x07], // pmovzxwd (%rdi), %xmm0: no VEX
            &[0xc4, 0xe2, 0x7d, 0x33, 0x07], // VEX.256
            &[0xc4, 0xe2, 0x79, 0x23, 0x07], // vpmovsxwd
            &[0xc4, 0xe1, 0x79, 0x33, 0x07], // map 0F
            &[0xc4, 0xe2, 0x79],             // truncated
        ];
        assert_refuses(MARK, &cases, widen);
    }

    #[test]
    fn rewrites_vpextrq_to_vcvtps2ph() {
        let cases: [(&[u8], &[u8]); 4] = [
            // vpextrq $0, %xmm0, (%rdi)
            (&[0xc4, 0xe3, 0xf9, 0x16, 0x07, 0x00], &[0xc4, 0xe3, 0x79, 0x1d, 0x07, 0x00]),
            // vpextrq $1, %xmm12, 0x10(%r8,%r9,2)
            (
                &[0xc4, 0x03, 0xf9, 0x16, 0x64, 0x48, 0x10, 0x01],
                &[0xc4, 0x03, 0x79, 0x1d, 0x64, 0x48, 0x10, 0x00],
            ),
            // vpextrq $0, %xmm1, 0x1000(%rsp): SIB and disp32
            (
                &[0xc4, 0xe3, 0xf9, 0x16, 0x8c, 0x24, 0x00, 0x10, 0x00, 0x00, 0x00],
                &[0xc4, 0xe3, 0x79, 0x1d, 0x8c, 0x24, 0x00, 0x10, 0x00, 0x00, 0x00],
            ),
            // vpextrq $1, %xmm2, 0x40(,%rax,1): SIB base 101 under mod 00 is a disp32 and
            // no base register.
            (
                &[0xc4, 0xe3, 0xf9, 0x16, 0x14, 0x05, 0x40, 0x00, 0x00, 0x00, 0x01],
                &[0xc4, 0xe3, 0x79, 0x1d, 0x14, 0x05, 0x40, 0x00, 0x00, 0x00, 0x00],
            ),
        ];
        // The other address forms: disp8 and disp32 without SIB, RIP-relative, and the
        // r13 base Cranelift emits (mod 01 with SIB base 101, a disp8 of 0).
        let more: [(&[u8], &[u8]); 4] = [
            (&[0xc4, 0xe3, 0xf9, 0x16, 0x47, 0x10, 0x01], &[0xc4, 0xe3, 0x79, 0x1d, 0x47, 0x10, 0x00]),
            (
                &[0xc4, 0xe3, 0xf9, 0x16, 0x87, 0x00, 0x10, 0x00, 0x00, 0x01],
                &[0xc4, 0xe3, 0x79, 0x1d, 0x87, 0x00, 0x10, 0x00, 0x00, 0x00],
            ),
            (
                &[0xc4, 0xe3, 0xf9, 0x16, 0x05, 0x10, 0x00, 0x00, 0x00, 0x01],
                &[0xc4, 0xe3, 0x79, 0x1d, 0x05, 0x10, 0x00, 0x00, 0x00, 0x00],
            ),
            (
                &[0xc4, 0xc3, 0xf9, 0x16, 0x4c, 0x45, 0x00, 0x01],
                &[0xc4, 0xc3, 0x79, 0x1d, 0x4c, 0x45, 0x00, 0x00],
            ),
        ];
        assert_rewrites(NARROW_MARK, &cases, narrow);
        assert_rewrites(NARROW_MARK, &more, narrow);
    }

    #[test]
    fn refuses_other_stores() {
        let cases: [&[u8]; 5] = [
            &[0xc4, 0xe3, 0xf9, 0x16, 0xc7, 0x00], // vpextrq $0, %xmm0, %rdi: a register operand
            &[0xc4, 0xe3, 0x79, 0x16, 0x07, 0x00], // vpextrd (W0)
            &[0x66, 0x48, 0x0f, 0x3a, 0x16, 0x07, 0x00], // pextrq: no VEX
            &[0xc4, 0xe3, 0xf9, 0x16, 0x47],       // truncated before the immediate
            &[0xc5, 0xf8, 0x11, 0x07],             // vmovups
        ];
        assert_refuses(NARROW_MARK, &cases, narrow);
    }
}
