//! `exp`, `exp2`, `log` and `log2` of `f32` lanes, as instructions on the lanes themselves.
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

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use lnc_lir::UnOp;
use lnc_lir::math::{EXP_P, EXP_RANGE, EXP2_P, EXP2_RANGE, LN2_HI, LN2_LO, LOG_P, LOG2E_MINUS_1, SHIFTER};

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

/// Whether [`unary`] computes `op` (on `f32` lanes).
pub(crate) fn computes(op: UnOp) -> bool {
    matches!(op, UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2)
}

/// `c ? a : b` for float lanes, `c` the result of an `fcmp` of the same shape.
fn fsel(bcx: &mut FunctionBuilder, c: Value, a: Value, b: Value) -> Value {
    let ty = bcx.func.dfg.value_type(a);
    if ty.is_vector() {
        let m = bcx.ins().bitcast(ty, crate::value::bitcast_flags(), c);
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
