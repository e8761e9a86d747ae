//! `fp16` and `bf16`: 16-bit storage, `fp32` computation.
//!
//! Cranelift has no half-precision arithmetic, so a half value lives in an `f32` (a
//! scalar, or a lane of an `f32x4` part: a half tile has the layout of an `fp32` tile)
//! holding exactly a value of its dtype. Loads convert the 16 stored bits to that `f32`,
//! stores convert back (exactly, the value being on the dtype's grid), and every
//! operation that can leave the grid — arithmetic, math functions, casts into the dtype —
//! computes in `f32` and rounds the result to the dtype, as the reference interpreter
//! does. Rounding produces the bit pattern first: a store of the rounded value reuses it
//! (`FunctionCx::half_bits`), so `y.to(tl.float16)` then a store converts once. (With F16C
//! an `fp16` tile rounds through memory instead, and not at all when only stores use the
//! result, since each store rounds: [`round_value`].) Scratch buffers hold half blocks as
//! `f32` (see `lnc_lir::Scratch::elem_bytes`).
//!
//! The conversions are integer bit manipulation on `i32` lanes, the same instruction
//! sequence for a scalar and for an `i32x4`, so tiles convert four lanes at a time.
//! x86-64 has F16C, which Cranelift does not expose: where the host has it, `fp16` tiles
//! convert with it instead, one instruction per four lanes each way, rewritten into the
//! code after Cranelift (`f16c.rs`). Whole rows convert in a runtime helper that uses
//! AVX-512 or F16C (`row_load`/`row_store`, placed by the tiler's `rows` pass;
//! [`codegen_row`]). All give the same bits. They are bit-exact with the
//! `half` crate: round to nearest even, denormals kept, overflow to infinity, NaN kept
//! with its sign and high payload bits and quieted.
//!
//! - `fp16 → fp32`: the exponent and mantissa bits shifted into place and multiplied by
//!   2¹¹² (exact: it rebiases the exponent and normalizes subnormals); infinities and NaNs
//!   get the all-ones exponent.
//! - `fp32 → fp16`: normal results add the rounding bias (`0xFFF` plus the kept lsb, ties
//!   to even) below the kept bits and shift; magnitudes below 2⁻¹⁴ are rounded by the FPU
//!   itself, adding `0.5` so that the sum's ulp is 2⁻²⁴, the subnormal quantum.
//! - `bf16 → fp32` is a 16-bit shift; `fp32 → bf16` is `(bits + 0x7FFF + lsb) >> 16`.
//! - `fp64 → half` rounds once: to `f32` rounding to odd (the FPU's nearest, moved one
//!   ulp toward the exact value when it was inexact and even), then to the dtype — exact
//!   since `f32` keeps more than two extra bits. Integers go to `f32` rounding to odd too.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{AtomicRmwOp, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use lnc_lir::{self as lir, AtomicOp, BinOp, Const, DType, Opcode, Ty};

use crate::base::{FunctionCx, block_args, data_flags};
use crate::value::{self, CVal, Tile};
use crate::{CodegenError, num};

/// True for the dtypes stored in 16 bits and computed in `f32`.
pub(crate) fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// Lanes of a half tile's vector part: an `f32x4`.
pub(crate) const PER: u8 = 4;

/// An `i32` constant of type `ty` (`i32` or `i32x4`, splatted).
pub(crate) fn k(bcx: &mut FunctionBuilder, ty: Type, v: u32) -> Value {
    let s = bcx.ins().iconst(types::I32, v as i64);
    if ty.is_vector() { bcx.ins().splat(ty, s) } else { s }
}

/// An `f32` constant of type `ty` (`f32` or `f32x4`, splatted).
pub(crate) fn fk(bcx: &mut FunctionBuilder, ty: Type, v: f32) -> Value {
    let s = bcx.ins().f32const(v);
    if ty.is_vector() { bcx.ins().splat(ty, s) } else { s }
}

/// `c ? a : b`, lanewise for vectors (`c` a lane mask from `icmp`).
fn sel(bcx: &mut FunctionBuilder, c: Value, a: Value, b: Value) -> Value {
    if bcx.func.dfg.value_type(a).is_vector() {
        bcx.ins().bitselect(c, a, b)
    } else {
        bcx.ins().select(c, a, b)
    }
}

fn flags_for(ty: Type) -> MemFlagsData {
    if ty.is_vector() { value::bitcast_flags() } else { MemFlagsData::new() }
}

/// The bits of an `f32` or `f32x4` as `i32` lanes.
pub(crate) fn as_int(bcx: &mut FunctionBuilder, x: Value) -> Value {
    let ty = bcx.func.dfg.value_type(x);
    let it = if ty.is_vector() { types::I32X4 } else { types::I32 };
    bcx.ins().bitcast(it, flags_for(ty), x)
}

/// `i32` lanes as the `f32` lanes with those bits.
pub(crate) fn as_float(bcx: &mut FunctionBuilder, u: Value) -> Value {
    let ty = bcx.func.dfg.value_type(u);
    let ft = if ty.is_vector() { types::F32X4 } else { types::F32 };
    bcx.ins().bitcast(ft, flags_for(ty), u)
}

fn shr(bcx: &mut FunctionBuilder, x: Value, n: i64) -> Value {
    let n = bcx.ins().iconst(types::I32, n);
    bcx.ins().ushr(x, n)
}

fn shl(bcx: &mut FunctionBuilder, x: Value, n: i64) -> Value {
    let n = bcx.ins().iconst(types::I32, n);
    bcx.ins().ishl(x, n)
}

/// `a > b` as signed `i32` lanes (every operand here is non-negative).
fn gt(bcx: &mut FunctionBuilder, a: Value, b: u32) -> Value {
    let ty = bcx.func.dfg.value_type(a);
    let b = k(bcx, ty, b);
    bcx.ins().icmp(IntCC::SignedGreaterThan, a, b)
}

/// The 16-bit pattern of `d` nearest to the `f32` (or `f32x4`) `x`, in `i32` lanes.
pub(crate) fn f32_to_bits(bcx: &mut FunctionBuilder, d: DType, x: Value) -> Value {
    let u = as_int(bcx, x);
    let ty = bcx.func.dfg.value_type(u);
    let m = k(bcx, ty, 0x7FFF_FFFF);
    let a = bcx.ins().band(u, m);
    let nan = gt(bcx, a, 0x7F80_0000);
    if d == DType::BF16 {
        let hi = shr(bcx, u, 16);
        let one = k(bcx, ty, 1);
        let lsb = bcx.ins().band(hi, one);
        let bias = k(bcx, ty, 0x7FFF);
        let r = bcx.ins().iadd(u, bias);
        let r = bcx.ins().iadd(r, lsb);
        let r = shr(bcx, r, 16);
        let quiet = k(bcx, ty, 0x40);
        let q = bcx.ins().bor(hi, quiet);
        return sel(bcx, nan, q, r);
    }
    let sign = bcx.ins().bxor(u, a);
    // Normal results: rebias (-112 << 23), add the rounding bias, shift; anything that
    // rounds past the largest finite value saturates at infinity.
    let kept = shr(bcx, a, 13);
    let one = k(bcx, ty, 1);
    let lsb = bcx.ins().band(kept, one);
    let bias = k(bcx, ty, 0xC800_0FFF);
    let n = bcx.ins().iadd(a, bias);
    let n = bcx.ins().iadd(n, lsb);
    let n = shr(bcx, n, 13);
    let inf = k(bcx, ty, 0x7C00);
    let n = bcx.ins().umin(n, inf);
    // Below 2^-14: the FPU rounds `|x| + 0.5` to a multiple of 2^-24.
    let ft = bcx.func.dfg.value_type(x);
    let af = as_float(bcx, a);
    let half = fk(bcx, ft, 0.5);
    let sum = bcx.ins().fadd(af, half);
    let sum = as_int(bcx, sum);
    let magic = k(bcx, ty, 0x3F00_0000);
    let s = bcx.ins().isub(sum, magic);
    // NaN: quiet, the payload's high bits kept.
    let pm = k(bcx, ty, 0x3FF);
    let payload = bcx.ins().band(kept, pm);
    let quiet = k(bcx, ty, 0x7E00);
    let q = bcx.ins().bor(payload, quiet);
    let min_normal = k(bcx, ty, 0x3880_0000);
    let small = bcx.ins().icmp(IntCC::SignedLessThan, a, min_normal);
    let r = sel(bcx, small, s, n);
    let r = sel(bcx, nan, q, r);
    let sign = shr(bcx, sign, 16);
    bcx.ins().bor(r, sign)
}

/// `v` where the lanes of mask `c` are set, 0 elsewhere (`c` from `icmp`: a lane mask for
/// vectors, an `i8` flag for scalars).
fn mask_and(bcx: &mut FunctionBuilder, c: Value, v: Value) -> Value {
    let ty = bcx.func.dfg.value_type(v);
    if ty.is_vector() {
        bcx.ins().band(c, v)
    } else {
        let zero = bcx.ins().iconst(ty, 0);
        bcx.ins().select(c, v, zero)
    }
}

/// The `f32` (or `f32x4`) value of 16-bit patterns of `d` held in `i32` lanes (upper
/// bits zero).
pub(crate) fn bits_to_f32(bcx: &mut FunctionBuilder, d: DType, h: Value) -> Value {
    convert(bcx, d, h, true)
}

/// [`bits_to_f32`], NaNs quieted only when `quiet`: a value that only float arithmetic
/// consumes needs no quieting, as x86's arithmetic quiets a signaling NaN operand to the
/// same bits (payload kept, quiet bit set) and picks among NaN operands by position alone.
fn convert(bcx: &mut FunctionBuilder, d: DType, h: Value, quiet: bool) -> Value {
    let ty = bcx.func.dfg.value_type(h);
    if d == DType::BF16 {
        let u = shl(bcx, h, 16);
        if !quiet {
            return as_float(bcx, u);
        }
        let m = k(bcx, ty, 0x7FFF_FFFF);
        let a = bcx.ins().band(u, m);
        let nan = gt(bcx, a, 0x7F80_0000);
        let quiet = k(bcx, ty, 0x0040_0000);
        let q = mask_and(bcx, nan, quiet);
        let r = bcx.ins().bor(u, q);
        return as_float(bcx, r);
    }
    // Exponent and mantissa moved into place and scaled by 2^112 (rebiasing the exponent
    // from 15 to 127): exact, and it normalizes subnormals. Infinities and NaNs get the
    // all-ones exponent, NaNs the quiet bit.
    let m = k(bcx, ty, 0x7FFF);
    let em = bcx.ins().band(h, m);
    let sign = bcx.ins().bxor(h, em);
    let sign = shl(bcx, sign, 16);
    let o = shl(bcx, em, 13);
    let o = as_float(bcx, o);
    let ft = bcx.func.dfg.value_type(o);
    let scale = fk(bcx, ft, f32::from_bits((127 + 112) << 23));
    let scaled = bcx.ins().fmul(o, scale);
    let scaled = as_int(bcx, scaled);
    let is_inf_nan = gt(bcx, em, 0x7BFF);
    let all_ones = k(bcx, ty, 0x7F80_0000);
    let exp = mask_and(bcx, is_inf_nan, all_ones);
    let mut r = bcx.ins().bor(scaled, exp);
    if quiet {
        let is_nan = gt(bcx, em, 0x7C00);
        let q = k(bcx, ty, 0x0040_0000);
        let q = mask_and(bcx, is_nan, q);
        r = bcx.ins().bor(r, q);
    }
    let r = bcx.ins().bor(r, sign);
    as_float(bcx, r)
}

/// The users of every loop-IR value (computed once).
pub(crate) fn uses_of<'a>(fx: &'a mut FunctionCx) -> &'a HashMap<lir::Value, Vec<lir::Inst>> {
    let f = fx.f;
    fx.uses.get_or_insert_with(|| {
        let mut uses: HashMap<lir::Value, Vec<lir::Inst>> = HashMap::new();
        f.walk(|i| {
            for &a in &f.insts[i].args {
                uses.entry(a).or_default().push(i);
            }
        });
        uses
    })
}

/// Whether every use of `v` is float arithmetic (`+ - * /`), directly or through casts to
/// a float type (free for a half value, already held as `f32`) and selects that pass it on
/// (a row's last tile of sums, `select(q, x, -0.0)`, lnc-tile's `overlap`): then a NaN
/// loaded into `v` needs no quieting, since the arithmetic quiets it. Only on x86-64,
/// whose arithmetic returns its first operand's NaN, quieted, whether or not either is
/// signaling; AArch64's returns a signaling operand's first, so quieting one there would
/// change which NaN comes out.
pub(crate) fn only_arithmetic(fx: &mut FunctionCx, v: lir::Value) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let f = fx.f;
    let uses = uses_of(fx);
    let mut todo = vec![v];
    let mut seen = 0;
    while let Some(v) = todo.pop() {
        seen += 1;
        if seen > 64 {
            return false;
        }
        for &u in uses.get(&v).map_or(&[][..], Vec::as_slice) {
            let d = &f.insts[u];
            match d.opcode {
                Opcode::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div) => {}
                Opcode::Cast if d.results.len() == 1 && f.ty(d.results[0]).dtype().is_float() => {
                    let r = d.results[0];
                    if f.ty(r).dtype().size() < 4 {
                        return false;
                    }
                    todo.push(r);
                }
                Opcode::Select if d.args[0] != v && d.results.len() == 1 => todo.push(d.results[0]),
                _ => return false,
            }
        }
    }
    true
}

/// `x` (`f32` or `f32x4`) rounded to the nearest value of `d`, still as `f32`.
pub(crate) fn round(bcx: &mut FunctionBuilder, d: DType, x: Value) -> Value {
    if d == DType::BF16 {
        // The two conversions fused: round at bit 16 and clear the low half.
        let u = as_int(bcx, x);
        let ty = bcx.func.dfg.value_type(u);
        let m = k(bcx, ty, 0x7FFF_FFFF);
        let a = bcx.ins().band(u, m);
        let nan = gt(bcx, a, 0x7F80_0000);
        let hi = shr(bcx, u, 16);
        let one = k(bcx, ty, 1);
        let lsb = bcx.ins().band(hi, one);
        let bias = k(bcx, ty, 0x7FFF);
        let r = bcx.ins().iadd(u, bias);
        let r = bcx.ins().iadd(r, lsb);
        let quiet = k(bcx, ty, 0x0040_0000);
        let q = bcx.ins().bor(u, quiet);
        let r = sel(bcx, nan, q, r);
        let high = k(bcx, ty, 0xFFFF_0000);
        let r = bcx.ins().band(r, high);
        return as_float(bcx, r);
    }
    let bits = f32_to_bits(bcx, d, x);
    bits_to_f32(bcx, d, bits)
}

/// `x` rounded to `d` when `d` is a half dtype, unchanged otherwise.
pub(crate) fn round_if_half(bcx: &mut FunctionBuilder, d: DType, x: Value) -> Value {
    if is_half(d) { round(bcx, d, x) } else { x }
}

/// [`round_if_half`], remembering the rounded value's bit pattern for a later store:
/// converting the result back would give the same bits (NaNs included, being quiet
/// already), so a cast or an operation followed by a store converts once. With F16C, an
/// `fp16` tile rounds through memory instead ([`crate::f16c::round_4`]), or not at all
/// when the instruction's result is only stored ([`only_stored`]): every store rounds
/// what it stores to nearest even, and rounding twice so gives the bits of rounding once.
pub(crate) fn round_value(fx: &mut FunctionCx, d: DType, x: Value) -> Value {
    if !is_half(d) {
        return x;
    }
    if d == DType::F16 && fx.f16c && fx.bcx.func.dfg.value_type(x) == types::F32X4 {
        return if fx.only_stored { x } else { crate::f16c::round_4(fx, x) };
    }
    if scalar_f16c(fx, d, x) {
        let (r, bits) = crate::f16c::round_1(fx, x);
        fx.half_bits.insert((r, d), bits);
        return r;
    }
    let bits = f32_to_bits(&mut fx.bcx, d, x);
    let r = bits_to_f32(&mut fx.bcx, d, bits);
    fx.half_bits.insert((r, d), bits);
    r
}

/// Whether F16C converts `fp16` tiles and every use of `r`, an `fp16` tile, stores it (as
/// the value, once per store): then nothing but stores reads `r`, and they round it.
pub(crate) fn only_stored(fx: &mut FunctionCx, r: lir::Value) -> bool {
    if !fx.f16c || !matches!(fx.f.ty(r), Ty::Tile(DType::F16, _)) {
        return false;
    }
    let f = fx.f;
    let stored = |u: lir::Inst| {
        let d = &f.insts[u];
        matches!(d.opcode, Opcode::Store { .. })
            && d.args.get(2) == Some(&r)
            && d.args.iter().filter(|&&a| a == r).count() == 1
    };
    uses_of(fx).get(&r).is_some_and(|us| us.iter().all(|&u| stored(u)))
}

/// The bit patterns of the half value `v`: the ones it was rounded to when known,
/// converted otherwise.
fn bits_of(fx: &mut FunctionCx, d: DType, v: Value) -> Value {
    match fx.half_bits.get(&(v, d)) {
        Some(&b) => b,
        None if scalar_f16c(fx, d, v) => crate::f16c::bits_1(fx, v),
        None => f32_to_bits(&mut fx.bcx, d, v),
    }
}

/// Whether the scalar `x` converts to or from `d` with F16C ([`crate::f16c::widen_1`],
/// [`crate::f16c::bits_1`], [`crate::f16c::round_1`]): an `fp16` `f32` scalar where F16C
/// converts tiles, outside the loops computed in wide parts (module `widen` knows none of
/// those conversions). Of the fp16 dx kernel's Cranelift IR (its scalar tails: 12 loads
/// and 6 roundings), integer conversions were about an eighth. Measured with both ways in
/// one build (medians of 300 compiles in process, three alternated runs): the seed's fp16
/// dx kernel 5.78-6.17 → 4.99-5.52 ms, forward 3.62-3.74 → 3.27-3.44, dwdb within the
/// noise; and running (M = 4096, 2 threads, caches flushed, medians of paired ratios of 60
/// launches) dx + dwdb at N = 1000, 1023 and 2052, whose scalar tails run, 0.82-0.95 of
/// the time, the forward within 2 %.
fn scalar_f16c(fx: &FunctionCx, d: DType, x: Value) -> bool {
    f16c_scalars(fx, d) && fx.bcx.func.dfg.value_type(x) == types::F32
}

/// Whether scalars of `d` convert with F16C here (see [`scalar_f16c`]).
fn f16c_scalars(fx: &FunctionCx, d: DType) -> bool {
    d == DType::F16 && fx.f16c && !fx.in_wide
}

/// The `f32` value one ulp from `r` (bits `rb`) toward `x`, when `r` is an inexact, even
/// rounding of `x`: the result is `x` rounded to odd.
fn to_odd(bcx: &mut FunctionBuilder, r: Value, exact: Value, back: Value, x: Value) -> Value {
    let rb = as_int(bcx, r);
    let one = bcx.ins().iconst(types::I32, 1);
    let lsb = bcx.ins().band(rb, one);
    let odd = bcx.ins().icmp_imm_u(IntCC::NotEqual, lsb, 0);
    let keep = bcx.ins().bor(exact, odd);
    let (ab, ax) = (bcx.ins().fabs(back), bcx.ins().fabs(x));
    let above = bcx.ins().fcmp(FloatCC::GreaterThan, ab, ax);
    let down = bcx.ins().isub(rb, one);
    let up = bcx.ins().iadd(rb, one);
    let adj = bcx.ins().select(above, down, up);
    let rb = bcx.ins().select(keep, rb, adj);
    as_float(bcx, rb)
}

/// An `f64` scalar rounded to `f32` to odd: rounding that to a half dtype rounds once.
fn f64_to_odd(bcx: &mut FunctionBuilder, x: Value) -> Value {
    let r = bcx.ins().fdemote(types::F32, x);
    let back = bcx.ins().fpromote(types::F64, r);
    // Exact, or NaN (kept as the FPU converted it).
    let exact = bcx.ins().fcmp(FloatCC::UnorderedOrEqual, back, x);
    to_odd(bcx, r, exact, back, x)
}

/// An integer scalar of dtype `s` rounded to `f32` to odd: rounding that to a half
/// dtype rounds once.
fn int_to_odd(bcx: &mut FunctionBuilder, s: DType, x: Value) -> Value {
    let x = num::int_to_i64(bcx, s, x);
    let (neg, m) = if s.is_signed() {
        // |i64::MIN| wraps to itself, which read unsigned is the right magnitude.
        (Some(bcx.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0)), bcx.ins().iabs(x))
    } else {
        (None, x)
    };
    // Keep the top 24 significant bits, the bits shifted out ORed into the lowest one:
    // the magnitude rounded to odd, converted exactly.
    let lz = bcx.ins().clz(m);
    let forty = bcx.ins().iconst(types::I64, 40);
    let sh = bcx.ins().isub(forty, lz);
    let zero = bcx.ins().iconst(types::I64, 0);
    let sh = bcx.ins().smax(sh, zero);
    let one = bcx.ins().iconst(types::I64, 1);
    let low = bcx.ins().ishl(one, sh);
    let low = bcx.ins().isub(low, one);
    let rest = bcx.ins().band(m, low);
    let sticky = bcx.ins().icmp_imm_u(IntCC::NotEqual, rest, 0);
    let sticky = bcx.ins().uextend(types::I64, sticky);
    let kept = bcx.ins().ushr(m, sh);
    let kept = bcx.ins().bor(kept, sticky);
    let f = bcx.ins().fcvt_from_uint(types::F32, kept);
    // Times 2^sh (at most 2^40): exact.
    let e = bcx.ins().iadd_imm_s(sh, 127);
    let e = bcx.ins().ireduce(types::I32, e);
    let e = shl(bcx, e, 23);
    let scale = as_float(bcx, e);
    let f = bcx.ins().fmul(f, scale);
    match neg {
        Some(neg) => {
            let n = bcx.ins().fneg(f);
            bcx.ins().select(neg, n, f)
        }
        None => f,
    }
}

/// The value of constant `c` of half dtype `d`, rounded once to `d`.
pub(crate) fn const_value(d: DType, c: Const) -> f32 {
    let x = match c {
        Const::Float(x) => x,
        Const::Int(i) => {
            // Exact below 2^53; above, rounded to odd at 53 bits so that the rounding to
            // `d` is still the only one that matters.
            let m = i.unsigned_abs();
            let sh = 11u32.saturating_sub(m.leading_zeros());
            let kept = (m >> sh) | ((m & ((1u64 << sh) - 1) != 0) as u64);
            let v = kept as f64 * 2f64.powi(sh as i32);
            if i < 0 { -v } else { v }
        }
    };
    d.round_float(x) as f32
}

/// A scalar argument of half dtype `d` from its raw slot (the bits in the low 16).
pub(crate) fn from_arg(bcx: &mut FunctionBuilder, d: DType, raw: Value) -> Value {
    let bits = bcx.ins().ireduce(types::I32, raw);
    let bits = bcx.ins().band_imm_u(bits, 0xFFFF);
    bits_to_f32(bcx, d, bits)
}

/// Loads one element of `d`.
pub(crate) fn load_scalar(fx: &mut FunctionCx, d: DType, addr: Value, offset: i32) -> Value {
    let h = fx.bcx.ins().uload16(types::I32, data_flags(), addr, offset);
    widen_i32(fx, d, h)
}

/// Widens the 16 bits `h` (an `i16`) of an element of `d`.
pub(crate) fn widen_bits(fx: &mut FunctionCx, d: DType, h: Value) -> Value {
    let h = fx.bcx.ins().uextend(types::I32, h);
    widen_i32(fx, d, h)
}

/// Widens the 16 bits of an element of `d` held in the `i32` `h` (upper bits zero). F16C
/// quiets a NaN always; where the integer code would not (`half_quiet` false), only float
/// arithmetic consumes the value, which quiets it to the same bits.
fn widen_i32(fx: &mut FunctionCx, d: DType, h: Value) -> Value {
    if f16c_scalars(fx, d) {
        return crate::f16c::widen_1(fx, h);
    }
    convert(&mut fx.bcx, d, h, fx.half_quiet)
}

/// Stores one element of `d`.
pub(crate) fn store_scalar(fx: &mut FunctionCx, d: DType, v: Value, addr: Value, offset: i32) {
    let h = bits_of(fx, d, v);
    fx.bcx.ins().istore16(data_flags(), h, addr, offset);
}

/// The 16-bit patterns of the lanes of the half tile `t`, each in the low bits of an
/// `i32`, for stores lane by lane (masked ones): converted a vector part at a time, with
/// F16C one `vcvtps2ph` per four lanes read back from scratch ([`crate::f16c::bits_4`]),
/// else the integer rounding on `i32x4` lanes. Converting each lane as a scalar took about
/// 30 instructions a lane: the fp16 dwdb kernel's two masked stores of 16 lanes were 2200
/// of the 5100 lines of its Cranelift IR.
pub(crate) fn lane_bits(fx: &mut FunctionCx, d: DType, t: &crate::value::Tile) -> Vec<Value> {
    if t.per == 1 {
        return t.parts.iter().map(|&v| bits_of(fx, d, v)).collect();
    }
    let mut out = Vec::with_capacity(t.parts.len() * usize::from(t.per));
    for &p in &t.parts {
        if d == DType::F16 && fx.f16c && t.per == 4 {
            out.extend(crate::f16c::bits_4(fx, p));
            continue;
        }
        let b = bits_of(fx, d, p);
        for k in 0..t.per {
            out.push(fx.bcx.ins().extractlane(b, k));
        }
    }
    out
}

/// Stores the 16 bits `h` (in the low bits of an `i32`) of an element.
pub(crate) fn store_bits(fx: &mut FunctionCx, h: Value, addr: Value, offset: i32) {
    fx.bcx.ins().istore16(data_flags(), h, addr, offset);
}

/// Loads `parts` vector parts (four consecutive elements each) at `addr`.
pub(crate) fn load_parts(fx: &mut FunctionCx, d: DType, parts: usize, addr: Value, disp: i32) -> Vec<Value> {
    (0..parts)
        .map(|j| {
            if d == DType::F16 && fx.f16c {
                return crate::f16c::widen_4(fx, addr, disp + j as i32 * 8);
            }
            let h = fx.bcx.ins().uload16x4(data_flags(), addr, disp + j as i32 * 8);
            convert(&mut fx.bcx, d, h, fx.half_quiet)
        })
        .collect()
}

/// Stores vector parts (four lanes each) at `addr`, consecutive: with F16C (`fp16`) one
/// conversion per part, which rounds (a part is rounded already, or only stores use it:
/// [`round_value`]); else two parts narrow into one 16-byte store, a last odd one into an
/// 8-byte store.
pub(crate) fn store_parts(fx: &mut FunctionCx, d: DType, parts: &[Value], addr: Value, disp: i32) {
    if d == DType::F16 && fx.f16c {
        for (j, &p) in parts.iter().enumerate() {
            crate::f16c::narrow_4(fx, p, addr, disp + j as i32 * 8);
        }
        return;
    }
    let bits: Vec<Value> = parts.iter().map(|&p| bits_of(fx, d, p)).collect();
    let bcx = &mut fx.bcx;
    for (j, pair) in bits.chunks(2).enumerate() {
        let offset = disp + j as i32 * 16;
        match *pair {
            [a, b] => {
                let v = bcx.ins().unarrow(a, b);
                bcx.ins().store(data_flags(), v, addr, offset);
            }
            [a] => {
                let v = bcx.ins().unarrow(a, a);
                let q = bcx.ins().bitcast(types::I64X2, value::bitcast_flags(), v);
                let lo = bcx.ins().extractlane(q, 0);
                bcx.ins().store(data_flags(), lo, addr, offset);
            }
            _ => unreachable!("chunks of two"),
        }
    }
}

/// A read-modify-write atomic on a half element: exchange directly, arithmetic in a
/// compare-and-swap loop on the 16-bit pattern (computed in `f32`, rounded to `d`).
pub(crate) fn atomic_rmw(
    bcx: &mut FunctionBuilder,
    op: AtomicOp,
    d: DType,
    addr: Value,
    v: Value,
) -> Result<Value, CodegenError> {
    let flags = MemFlagsData::new();
    let narrow = |bcx: &mut FunctionBuilder, x: Value| {
        let b = f32_to_bits(bcx, d, x);
        bcx.ins().ireduce(types::I16, b)
    };
    let widen = |bcx: &mut FunctionBuilder, b: Value| {
        let b = bcx.ins().uextend(types::I32, b);
        bits_to_f32(bcx, d, b)
    };
    match op {
        AtomicOp::Xchg => {
            let bits = narrow(bcx, v);
            let old = bcx.ins().atomic_rmw(types::I16, flags, AtomicRmwOp::Xchg, addr, bits);
            Ok(widen(bcx, old))
        }
        AtomicOp::Add | AtomicOp::Max | AtomicOp::Min => {
            let first = bcx.ins().atomic_load(types::I16, flags, addr);
            let retry = bcx.create_block();
            let expected = bcx.append_block_param(retry, types::I16);
            let done = bcx.create_block();
            let old = bcx.append_block_param(done, types::I16);
            bcx.ins().jump(retry, &block_args(&[first]));
            bcx.switch_to_block(retry);
            let cur = widen(bcx, expected);
            let new = match op {
                AtomicOp::Add => bcx.ins().fadd(cur, v),
                AtomicOp::Max => bcx.ins().fmax(cur, v),
                _ => bcx.ins().fmin(cur, v),
            };
            let new_bits = narrow(bcx, new);
            let seen = bcx.ins().atomic_cas(flags, addr, expected, new_bits);
            let swapped = bcx.ins().icmp(IntCC::Equal, seen, expected);
            bcx.ins().brif(swapped, done, &block_args(&[seen]), retry, &block_args(&[seen]));
            bcx.switch_to_block(done);
            Ok(widen(bcx, old))
        }
        AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
            Err(CodegenError::Unsupported(format!("atomic {op:?} on {d}")))
        }
    }
}

/// A compare-and-swap of a half element, comparing bit patterns.
pub(crate) fn atomic_cas(bcx: &mut FunctionBuilder, d: DType, addr: Value, cmp: Value, v: Value) -> Value {
    let cmp = f32_to_bits(bcx, d, cmp);
    let cmp = bcx.ins().ireduce(types::I16, cmp);
    let v = f32_to_bits(bcx, d, v);
    let v = bcx.ins().ireduce(types::I16, v);
    let old = bcx.ins().atomic_cas(MemFlagsData::new(), addr, cmp, v);
    let old = bcx.ins().uextend(types::I32, old);
    bits_to_f32(bcx, d, old)
}

/// True when `s -> d` (one of them a half dtype) converts whole `f32x4`/`i32x4` parts.
fn cast_vectorizes(s: DType, d: DType) -> bool {
    let f = |t: DType| is_half(t) || t == DType::F32;
    (f(s) && f(d)) || (s == DType::I32 && d == DType::F16) || (is_half(s) && d == DType::I32)
}

/// Converts one 4-lane part (see [`cast_vectorizes`]).
fn cast_part(fx: &mut FunctionCx, s: DType, d: DType, x: Value) -> Value {
    match (s, d) {
        (DType::I32, _) => {
            // Exact below 2^24, and anything above rounds to infinity in fp16.
            let f = fx.bcx.ins().fcvt_from_sint(types::F32X4, x);
            round_value(fx, d, f)
        }
        (_, DType::I32) => fx.bcx.ins().fcvt_to_sint_sat(types::I32X4, x),
        (_, DType::F32) => x,
        _ => round_value(fx, d, x),
    }
}

/// Converts one scalar from `s` to `d`, one of them a half dtype.
fn cast_scalar(fx: &mut FunctionCx, s: DType, d: DType, x: Value) -> Result<Value, CodegenError> {
    Ok(match (s, d) {
        // The value is exact in f32.
        (_, DType::F32) if is_half(s) => x,
        (_, DType::F64) => fx.bcx.ins().fpromote(types::F64, x),
        (DType::F64, _) => {
            let odd = f64_to_odd(&mut fx.bcx, x);
            round_value(fx, d, odd)
        }
        _ if s == DType::F32 || (is_half(s) && is_half(d)) => round_value(fx, d, x),
        _ if s.is_int() => {
            let odd = int_to_odd(&mut fx.bcx, s, x);
            round_value(fx, d, odd)
        }
        // Half to an integer: as from the f32 holding the same value.
        _ => num::emit_cast(fx, DType::F32, d, x)?,
    })
}

/// `cast` when the source or the result is a half dtype.
pub(crate) fn codegen_cast(fx: &mut FunctionCx, a: lir::Value, ty: Ty) -> Result<CVal, CodegenError> {
    let s = fx.f.ty(a).dtype();
    let d = ty.dtype();
    let Ty::Tile(_, lanes) = ty else {
        let x = fx.scalar(a)?;
        return Ok(CVal::Scalar(cast_scalar(fx, s, d, x)?));
    };
    if lanes >= PER && cast_vectorizes(s, d) {
        return num::lanewise(fx, Ty::Tile(s, lanes), |_| PER, &[a], |fx, v| Ok(cast_part(fx, s, d, v[0])));
    }
    let t = fx.tile(a, lanes)?;
    let src = value::lanes(&mut fx.bcx, s, &t);
    let mut out = Vec::with_capacity(src.len());
    for l in src {
        out.push(cast_scalar(fx, s, d, l)?);
    }
    let per = value::canonical_per(d, lanes)?;
    Ok(CVal::Tile(value::from_lanes(&mut fx.bcx, d, per, &out)?))
}

/// The 16-bit pattern of a scalar of `d` (half, or a 16-bit integer) in an `i32`.
fn scalar_bits(fx: &mut FunctionCx, d: DType, x: Value) -> Value {
    if is_half(d) { bits_of(fx, d, x) } else { fx.bcx.ins().uextend(types::I32, x) }
}

/// A scalar of `d` from its 16-bit pattern in an `i32`.
fn scalar_from_bits(fx: &mut FunctionCx, d: DType, b: Value) -> Value {
    if is_half(d) { bits_to_f32(&mut fx.bcx, d, b) } else { fx.bcx.ins().ireduce(types::I16, b) }
}

/// `bitcast` between 16-bit dtypes, one of them half: through the bit pattern. Whole
/// vectors when both sides are (`i16x8` parts widen into two `f32x4`, two narrow into
/// one), lane by lane otherwise.
pub(crate) fn codegen_bitcast(fx: &mut FunctionCx, a: lir::Value, ty: Ty) -> Result<CVal, CodegenError> {
    let s = fx.f.ty(a).dtype();
    let d = ty.dtype();
    if s.size() != 2 || d.size() != 2 {
        return Err(CodegenError::InvalidIr(format!("bitcast from {s} to {d}")));
    }
    let Ty::Tile(_, lanes) = ty else {
        let x = fx.scalar(a)?;
        let b = scalar_bits(fx, s, x);
        return Ok(CVal::Scalar(scalar_from_bits(fx, d, b)));
    };
    let (ps, pd) = (value::canonical_per(s, lanes)?, value::canonical_per(d, lanes)?);
    let t = fx.tile(a, lanes)?;
    let t = value::rechunk(&mut fx.bcx, s, &t, ps)?;
    // The bit patterns as i32x4 parts, when the source is in vectors.
    let bits: Option<Vec<Value>> = match ps {
        1 => None,
        PER if is_half(s) => Some(t.parts.iter().map(|&p| bits_of(fx, s, p)).collect()),
        _ => Some(
            t.parts.iter().flat_map(|&p| [fx.bcx.ins().uwiden_low(p), fx.bcx.ins().uwiden_high(p)]).collect(),
        ),
    };
    let parts = match (bits, pd) {
        (Some(bits), PER) if is_half(d) => bits.iter().map(|&b| bits_to_f32(&mut fx.bcx, d, b)).collect(),
        (Some(bits), 8) => bits.chunks(2).map(|c| fx.bcx.ins().unarrow(c[0], c[1])).collect(),
        _ => {
            let src = value::lanes(&mut fx.bcx, s, &t);
            let mut out = Vec::with_capacity(src.len());
            for x in src {
                let b = scalar_bits(fx, s, x);
                out.push(scalar_from_bits(fx, d, b));
            }
            return Ok(CVal::Tile(value::from_lanes(&mut fx.bcx, d, pd, &out)?));
        }
    };
    Ok(CVal::Tile(Tile { per: pd, parts }))
}

/// `row_load` (`load`) or `row_store`: one call of a row helper of [`crate::helpers`]
/// converting `count` elements between `ptr + offset` and scratch buffer `slot`; under a
/// safe launch, one range check of the whole row first. A `row_store` passes its
/// `stream` flag (false without one) to the helper.
pub(crate) fn codegen_row(
    fx: &mut FunctionCx,
    (load, once, stream): (bool, Option<u8>, Option<lir::Value>),
    (slot, site): (u32, u32),
    [ptr, offset, count]: [lir::Value; 3],
) -> Result<(), CodegenError> {
    // `once`: the conversion runs in the worker's first program of the launch only.
    let skip = match once {
        Some(k) => {
            let area = fx.load_abi(types::I64, fx.abi[3], lnc_runtime::abi::ctx_offsets::SCRATCH);
            let flag = fx.bcx.ins().load(types::I32, data_flags(), area, 4 * k as i32);
            let convert = fx.bcx.create_block();
            let done = fx.bcx.create_block();
            fx.bcx.ins().brif(flag, done, &[], convert, &[]);
            fx.bcx.switch_to_block(convert);
            let one = fx.bcx.ins().iconst(types::I32, 1);
            fx.bcx.ins().store(data_flags(), one, area, 4 * k as i32);
            Some(done)
        }
        None => None,
    };
    let Ty::Ptr(d) = fx.f.ty(ptr) else {
        return Err(CodegenError::InvalidIr(format!("{ptr} converts a row but is not a pointer")));
    };
    let name = match (load, d) {
        (true, DType::F16) => "lnc_row_f16_to_f32",
        (true, DType::BF16) => "lnc_row_bf16_to_f32",
        (false, DType::F16) => "lnc_row_f32_to_f16",
        (false, DType::BF16) => "lnc_row_f32_to_bf16",
        _ => return Err(CodegenError::InvalidIr(format!("a row of {d} is not a half row"))),
    };
    let size = d.size();
    let base = fx.scalar(ptr)?;
    let off = fx.scalar(offset)?;
    let first = crate::hoist::element_address(fx, base, off, fx.f.ty(offset).dtype(), size);
    let (scratch, s) = crate::memory::scratch_base(fx, slot)?;
    // The count never exceeds the scratch buffer: the tiler makes it so, and a wrong
    // count must not write past the buffer into another program's scratch.
    let n = fx.scalar(count)?;
    let n = num::int_to_i64(&mut fx.bcx, fx.f.ty(count).dtype(), n);
    let len = fx.bcx.ins().iconst(types::I64, s.len as i64);
    let n = fx.bcx.ins().smin(n, len);
    if fx.opts.checked {
        let nonempty = fx.bcx.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let check = fx.bcx.create_block();
        let cont = fx.bcx.create_block();
        fx.bcx.ins().brif(nonempty, check, &[], cont, &[]);
        fx.bcx.switch_to_block(check);
        let bytes = fx.bcx.ins().ishl_imm_u(n, size.trailing_zeros() as i64);
        let end = fx.bcx.ins().iadd(first, bytes);
        crate::hoist::check_span(fx, site, first, end, size)?;
        fx.bcx.ins().jump(cont, &[]);
        fx.bcx.switch_to_block(cont);
    }
    if load {
        fx.call_helper(name, &[types::I64; 3], &[], &[first, scratch, n])?;
    } else {
        let stream = match stream {
            Some(flag) => {
                let flag = fx.scalar(flag)?;
                fx.bcx.ins().uextend(types::I64, flag)
            }
            None => fx.bcx.ins().iconst(types::I64, 0),
        };
        fx.call_helper(name, &[types::I64; 4], &[], &[scratch, first, n, stream])?;
    }
    if let Some(done) = skip {
        fx.bcx.ins().jump(done, &[]);
        fx.bcx.switch_to_block(done);
    }
    Ok(())
}
