//! `exp`, `exp2`, `log`, `log2`, `sin` and `cos` of `f32` lanes, as instructions on the
//! lanes themselves.
//!
//! Cranelift has no instruction for them, and a call per lane to a Rust function spills
//! every vector register around each call (all of them are caller-saved): `exp` of 65 536
//! `f32` in L2 took 249 µs that way against 78 µs here, Triton's fused softmax (4096 rows
//! of 1000) 33.0 against 8.2 ms (one thread, `lnc bench`).
//!
//! What the functions compute is defined by `lnc_bir::math` (Cephes' algorithms, their
//! accuracy measured there); this is the same sequence of `f32` operations, written once
//! for an `f32` or an `f32x4` value, so the JIT's vector lanes, its scalar code, the
//! interpreter and constant folding agree bit for bit (`tests/tests/math_accuracy.rs`
//! compares them on a sweep of the bit patterns).
//!
//! `sin` and `cos` work in `f64` (each half of an `f32x4` promoted to an `f64x2`), and a
//! tile with a lane beyond `SIN_COS_RANGE` (or infinite) branches to libm for its lanes:
//! `sin` of 65 536 `f32` in L2 took 377 µs with a call per lane against 250 µs here, and
//! `x·cos θ + x·sin θ` 603 against 337 µs (one thread). These loops are bound by latency
//! and by the reloads of their twenty-odd constants, which do not fit in 16 registers.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use lnc_lir::UnOp;
use lnc_lir::math::{
    COS_P, EXP_P, EXP_RANGE, EXP2_P, EXP2_RANGE, LN2_HI, LN2_LO, LOG_P, LOG2E_MINUS_1, PIO2_HI, PIO2_LO,
    SHIFTER, SIN_COS_RANGE, SIN_COS_TINY, SIN_P, TWO_OVER_PI,
};

use crate::CodegenError;
use crate::base::FunctionCx;
use crate::half::{as_float, as_int, fk, k};

/// `op` of `x` (an `f32` or `f32x4`), for the operations `lnc_bir::math` defines.
pub(crate) fn unary(bcx: &mut FunctionBuilder, op: UnOp, x: Value) -> Option<Value> {
    Some(match op {
        UnOp::Exp => exp(bcx, x),
        UnOp::Exp2 => exp2(bcx, x),
        UnOp::Log => log(bcx, x, false),
        UnOp::Log2 => log(bcx, x, true),
        _ => return None,
    })
}

/// Whether [`unary`] computes `op` (on `f32` lanes), with no call at all.
pub(crate) fn computes(op: UnOp) -> bool {
    matches!(op, UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2)
}

/// Whether `op` of `f32` lanes runs on the vectors ([`unary`] or [`sin_cos`]).
pub(crate) fn vectorizes(op: UnOp) -> bool {
    computes(op) || matches!(op, UnOp::Sin | UnOp::Cos)
}

/// An `f64` constant of type `ty` (`f64` or `f64x2`, splatted).
fn dk(bcx: &mut FunctionBuilder, ty: Type, v: f64) -> Value {
    let s = bcx.ins().f64const(v);
    if ty.is_vector() { bcx.ins().splat(ty, s) } else { s }
}

/// `lnc_bir::math::sin_cos` of an `f64` or `f64x2` value promoted from `f32`: the value
/// rounded to `f32` lanes is the result, for arguments within `SIN_COS_RANGE`.
fn sin_cos_f64(bcx: &mut FunctionBuilder, x: Value, cosine: bool) -> Value {
    let ty = bcx.func.dfg.value_type(x);
    let two_over_pi = dk(bcx, ty, TWO_OVER_PI);
    let t = bcx.ins().fmul(x, two_over_pi);
    let n = bcx.ins().nearest(t);
    let (hi, lo) = (dk(bcx, ty, PIO2_HI), dk(bcx, ty, PIO2_LO));
    let a = bcx.ins().fmul(n, hi);
    let r = bcx.ins().fsub(x, a);
    let b = bcx.ins().fmul(n, lo);
    let r = bcx.ins().fsub(r, b);
    let quarter = dk(bcx, ty, 0.25);
    let nq = bcx.ins().fmul(n, quarter);
    let fl = bcx.ins().floor(nq);
    let four = dk(bcx, ty, 4.0);
    let m = bcx.ins().fmul(four, fl);
    let q = bcx.ins().fsub(n, m);
    // sin r and cos r, as `lnc_bir::math::{sin_kernel, cos_kernel}`.
    let z = bcx.ins().fmul(r, r);
    let w = bcx.ins().fmul(z, z);
    let c = |bcx: &mut FunctionBuilder, v| dk(bcx, ty, v);
    let (s0, s1, s2, s3) = (c(bcx, SIN_P[0]), c(bcx, SIN_P[1]), c(bcx, SIN_P[2]), c(bcx, SIN_P[3]));
    let t = mul_add(bcx, z, s3, s2);
    let sz = bcx.ins().fmul(z, r);
    let p = mul_add(bcx, z, s1, s0);
    let sin = mul_add(bcx, sz, p, r);
    let swt = bcx.ins().fmul(sz, w);
    let sin = mul_add(bcx, swt, t, sin);
    let (c0, c1, c2, c3) = (c(bcx, COS_P[0]), c(bcx, COS_P[1]), c(bcx, COS_P[2]), c(bcx, COS_P[3]));
    let t = mul_add(bcx, z, c3, c2);
    let one = dk(bcx, ty, 1.0);
    let cos = mul_add(bcx, z, c0, one);
    let cos = mul_add(bcx, w, c1, cos);
    let wz = bcx.ins().fmul(w, z);
    let cos = mul_add(bcx, wz, t, cos);
    // The quadrant picks the function and the sign.
    let is = |bcx: &mut FunctionBuilder, k: f64| {
        let kv = dk(bcx, ty, k);
        bcx.ins().fcmp(FloatCC::Equal, q, kv)
    };
    let (q1, q2, q3) = (is(bcx, 1.0), is(bcx, 2.0), is(bcx, 3.0));
    let odd = bcx.ins().bor(q1, q3);
    let negative = if cosine { bcx.ins().bor(q1, q2) } else { bcx.ins().bor(q2, q3) };
    let (if_odd, if_even) = if cosine { (sin, cos) } else { (cos, sin) };
    let v = fsel(bcx, odd, if_odd, if_even);
    let minus = bcx.ins().fneg(v);
    fsel(bcx, negative, minus, v)
}

/// `sin x` (`cos x` when `cosine`) of an `f32` or `f32x4` value: `lnc_bir::math::sin_cos`.
pub(crate) fn sin_cos(fx: &mut FunctionCx, x: Value, cosine: bool) -> Result<Value, CodegenError> {
    let ty = fx.bcx.func.dfg.value_type(x);
    let bcx = &mut fx.bcx;
    let fast = if ty.is_vector() {
        // Lanes 0-1 and 2-3 as two f64x2, computed, narrowed and put back together.
        let low = bcx.ins().fvpromote_low(x);
        let bits = bcx.ins().bitcast(types::I64X2, crate::value::bitcast_flags(), x);
        let upper = bcx.ins().extractlane(bits, 1);
        let upper = bcx.ins().scalar_to_vector(types::I64X2, upper);
        let upper = bcx.ins().bitcast(types::F32X4, crate::value::bitcast_flags(), upper);
        let high = bcx.ins().fvpromote_low(upper);
        let low = sin_cos_f64(bcx, low, cosine);
        let high = sin_cos_f64(bcx, high, cosine);
        let low = bcx.ins().fvdemote(low);
        let high = bcx.ins().fvdemote(high);
        let low = bcx.ins().bitcast(types::I64X2, crate::value::bitcast_flags(), low);
        let high = bcx.ins().bitcast(types::I64X2, crate::value::bitcast_flags(), high);
        let upper = bcx.ins().extractlane(high, 0);
        let both = bcx.ins().insertlane(low, upper, 1);
        bcx.ins().bitcast(types::F32X4, crate::value::bitcast_flags(), both)
    } else {
        let wide = bcx.ins().fpromote(types::F64, x);
        let r = sin_cos_f64(bcx, wide, cosine);
        bcx.ins().fdemote(types::F32, r)
    };
    // Tiny arguments: x itself (sin, keeping -0) or 1 (cos).
    let ax = bcx.ins().fabs(x);
    let tiny_limit = fk(bcx, ty, SIN_COS_TINY);
    let tiny = bcx.ins().fcmp(FloatCC::LessThan, ax, tiny_limit);
    let small = if cosine { fk(bcx, ty, 1.0) } else { x };
    let fast = fsel(bcx, tiny, small, fast);
    // Beyond the range (or infinite): libm for the lanes of the tile.
    let range = fk(bcx, ty, SIN_COS_RANGE);
    let far = bcx.ins().fcmp(FloatCC::GreaterThan, ax, range);
    let any = if ty.is_vector() { bcx.ins().vany_true(far) } else { far };
    let slow = bcx.create_block();
    bcx.set_cold_block(slow);
    let done = bcx.create_block();
    let result = bcx.append_block_param(done, ty);
    bcx.ins().brif(any, slow, &[], done, &[BlockArg::Value(fast)]);
    fx.bcx.switch_to_block(slow);
    let name = if cosine { "lnc_cos_f32" } else { "lnc_sin_f32" };
    let libm = if ty.is_vector() {
        let mut v = fast;
        for lane in 0..4u8 {
            let e = fx.bcx.ins().extractlane(x, lane);
            let r = fx.call_helper(name, &[types::F32], &[types::F32], &[e])?[0];
            v = fx.bcx.ins().insertlane(v, r, lane);
        }
        fsel(&mut fx.bcx, far, v, fast)
    } else {
        fx.call_helper(name, &[types::F32], &[types::F32], &[x])?[0]
    };
    fx.bcx.ins().jump(done, &[BlockArg::Value(libm)]);
    fx.bcx.switch_to_block(done);
    Ok(result)
}

/// `c ? a : b` for float lanes, `c` the result of an `fcmp` of the same shape.
fn fsel(bcx: &mut FunctionBuilder, c: Value, a: Value, b: Value) -> Value {
    let ty = bcx.func.dfg.value_type(a);
    if ty.is_vector() {
        let m = crate::num::mask_for(bcx, c, ty);
        bcx.ins().bitselect(m, a, b)
    } else {
        bcx.ins().select(c, a, b)
    }
}

/// `a · b + c`, rounded twice (no fused multiply-add: the same result on every CPU).
fn mul_add(bcx: &mut FunctionBuilder, a: Value, b: Value, c: Value) -> Value {
    let p = bcx.ins().fmul(a, b);
    bcx.ins().fadd(p, c)
}

/// `lnc_bir::math::estrin`.
fn estrin(bcx: &mut FunctionBuilder, ty: Type, x: Value, cs: &[f32]) -> Value {
    let mut terms: Vec<Value> = cs.iter().rev().map(|&c| fk(bcx, ty, c)).collect();
    let mut power = x;
    while terms.len() > 1 {
        let mut next = Vec::with_capacity(terms.len().div_ceil(2));
        for pair in terms.chunks(2) {
            next.push(match *pair {
                [lo, hi] => mul_add(bcx, hi, power, lo),
                [lo] => lo,
                _ => unreachable!("chunks of one or two"),
            });
        }
        terms = next;
        if terms.len() > 1 {
            power = bcx.ins().fmul(power, power);
        }
    }
    terms[0]
}

/// `lnc_bir::math::horner`.
fn horner(bcx: &mut FunctionBuilder, ty: Type, x: Value, cs: &[f32]) -> Value {
    let mut p = fk(bcx, ty, cs[0]);
    for &c in &cs[1..] {
        let c = fk(bcx, ty, c);
        p = mul_add(bcx, p, x, c);
    }
    p
}

/// `v` clamped to `[lo, hi]`; NaN stays NaN (a comparison with NaN is false).
fn clamp(bcx: &mut FunctionBuilder, v: Value, (lo, hi): (f32, f32)) -> Value {
    let ty = bcx.func.dfg.value_type(v);
    let (lo, hi) = (fk(bcx, ty, lo), fk(bcx, ty, hi));
    let above = bcx.ins().fcmp(FloatCC::GreaterThan, v, hi);
    let v = fsel(bcx, above, hi, v);
    let below = bcx.ins().fcmp(FloatCC::LessThan, v, lo);
    fsel(bcx, below, lo, v)
}

/// `round(v)` as a float and as integer lanes, for `|v| < 2^22` (NaN gives NaN and some
/// integer, which only scales the NaN).
fn round_split(bcx: &mut FunctionBuilder, v: Value) -> (Value, Value) {
    let ty = bcx.func.dfg.value_type(v);
    let shifter = fk(bcx, ty, SHIFTER);
    let t = bcx.ins().fadd(v, shifter);
    let n = bcx.ins().fsub(t, shifter);
    let bits = as_int(bcx, t);
    let ity = bcx.func.dfg.value_type(bits);
    let base = k(bcx, ity, SHIFTER.to_bits());
    (n, bcx.ins().isub(bits, base))
}

/// `y · 2^n` for integer lanes `n` in [-151, 129]: two scalings by powers of two in the
/// normal range.
fn scale(bcx: &mut FunctionBuilder, y: Value, n: Value) -> Value {
    let ity = bcx.func.dfg.value_type(n);
    let one = bcx.ins().iconst(types::I32, 1);
    let half = bcx.ins().sshr(n, one);
    let rest = bcx.ins().isub(n, half);
    let mut r = y;
    for e in [half, rest] {
        let bias = k(bcx, ity, 127);
        let biased = bcx.ins().iadd(e, bias);
        let shift = bcx.ins().iconst(types::I32, 23);
        let bits = bcx.ins().ishl(biased, shift);
        let p = as_float(bcx, bits);
        r = bcx.ins().fmul(r, p);
    }
    r
}

/// `lnc_bir::math::exp`.
fn exp(bcx: &mut FunctionBuilder, x: Value) -> Value {
    let ty = bcx.func.dfg.value_type(x);
    let x = clamp(bcx, x, EXP_RANGE);
    let log2e = fk(bcx, ty, std::f32::consts::LOG2_E);
    let t = bcx.ins().fmul(x, log2e);
    let (n, ni) = round_split(bcx, t);
    let (hi, lo) = (fk(bcx, ty, LN2_HI), fk(bcx, ty, LN2_LO));
    let a = bcx.ins().fmul(n, hi);
    let r = bcx.ins().fsub(x, a);
    let b = bcx.ins().fmul(n, lo);
    let r = bcx.ins().fsub(r, b);
    let p = estrin(bcx, ty, r, &EXP_P);
    let z = bcx.ins().fmul(r, r);
    let y = mul_add(bcx, p, z, r);
    let one = fk(bcx, ty, 1.0);
    let y = bcx.ins().fadd(y, one);
    scale(bcx, y, ni)
}

/// `lnc_bir::math::exp2`.
fn exp2(bcx: &mut FunctionBuilder, x: Value) -> Value {
    let ty = bcx.func.dfg.value_type(x);
    let x = clamp(bcx, x, EXP2_RANGE);
    let (n, ni) = round_split(bcx, x);
    let r = bcx.ins().fsub(x, n);
    let p = horner(bcx, ty, r, &EXP2_P);
    let pr = bcx.ins().fmul(p, r);
    let one = fk(bcx, ty, 1.0);
    let y = bcx.ins().fadd(pr, one);
    scale(bcx, y, ni)
}

/// `lnc_bir::math::log`; the non-positive, infinite and NaN arguments selected at the end.
fn log(bcx: &mut FunctionBuilder, x: Value, base2: bool) -> Value {
    let ty = bcx.func.dfg.value_type(x);
    let min_normal = fk(bcx, ty, f32::MIN_POSITIVE);
    let tiny = bcx.ins().fcmp(FloatCC::LessThan, x, min_normal);
    let two23 = fk(bcx, ty, 8_388_608.0);
    let scaled = bcx.ins().fmul(x, two23);
    let xs = fsel(bcx, tiny, scaled, x);
    let (zero, minus23) = (fk(bcx, ty, 0.0), fk(bcx, ty, -23.0));
    let e_adjust = fsel(bcx, tiny, minus23, zero);

    let bits = as_int(bcx, xs);
    let ity = bcx.func.dfg.value_type(bits);
    let shift = bcx.ins().iconst(types::I32, 23);
    let biased = bcx.ins().ushr(bits, shift);
    let bias = k(bcx, ity, 126);
    let e = bcx.ins().isub(biased, bias);
    let e = bcx.ins().fcvt_from_sint(ty, e);
    let e = bcx.ins().fadd(e, e_adjust);
    let keep = k(bcx, ity, 0x807F_FFFF);
    let half_exp = k(bcx, ity, 0x3F00_0000);
    let m = bcx.ins().band(bits, keep);
    let m = bcx.ins().bor(m, half_exp);
    let m = as_float(bcx, m);
    let sqrt_half = fk(bcx, ty, std::f32::consts::FRAC_1_SQRT_2);
    let low = bcx.ins().fcmp(FloatCC::LessThan, m, sqrt_half);
    let one = fk(bcx, ty, 1.0);
    let e_minus = bcx.ins().fsub(e, one);
    let e = fsel(bcx, low, e_minus, e);
    let doubled = bcx.ins().fadd(m, m);
    let m = fsel(bcx, low, doubled, m);
    let f = bcx.ins().fsub(m, one);

    let z = bcx.ins().fmul(f, f);
    let p = estrin(bcx, ty, f, &LOG_P);
    let pf = bcx.ins().fmul(p, f);
    let y = bcx.ins().fmul(pf, z);
    let minus_half = fk(bcx, ty, -0.5);
    let r = if base2 {
        let y = mul_add(bcx, z, minus_half, y);
        let l = fk(bcx, ty, LOG2E_MINUS_1);
        let a = bcx.ins().fmul(y, l);
        let b = mul_add(bcx, f, l, a);
        let c = bcx.ins().fadd(b, y);
        let d = bcx.ins().fadd(c, f);
        bcx.ins().fadd(d, e)
    } else {
        let lo = fk(bcx, ty, LN2_LO);
        let y = mul_add(bcx, e, lo, y);
        let y = mul_add(bcx, z, minus_half, y);
        let s = bcx.ins().fadd(f, y);
        let hi = fk(bcx, ty, LN2_HI);
        mul_add(bcx, e, hi, s)
    };

    let inf = fk(bcx, ty, f32::INFINITY);
    let positive = bcx.ins().fcmp(FloatCC::GreaterThan, x, zero);
    let finite = bcx.ins().fcmp(FloatCC::LessThan, x, inf);
    let finite_positive = bcx.ins().band(positive, finite);
    let (neg_inf, nan) = (fk(bcx, ty, f32::NEG_INFINITY), fk(bcx, ty, f32::NAN));
    let is_zero = bcx.ins().fcmp(FloatCC::Equal, x, zero);
    let special = fsel(bcx, is_zero, neg_inf, nan);
    let is_inf = bcx.ins().fcmp(FloatCC::Equal, x, inf);
    let special = fsel(bcx, is_inf, inf, special);
    fsel(bcx, finite_positive, r, special)
}
