//! What `exp`, `exp2`, `log` and `log2` of `f32` (and of `fp16`/`bf16`, computed in `f32`)
//! mean in lnc: these functions, bit for bit, everywhere a value is computed — the
//! interpreter, constant folding and the JIT, whose vector code (lnc-clif's `vmath`) is
//! the same sequence of `f32` operations on four lanes at once.
//!
//! They are Cephes' `expf`, `exp2f`, `logf` and `log2f` (S. L. Moshier): a reduction to a
//! small interval, a polynomial there, and a rescaling by the exponent, with no fused
//! multiply-add, so the result does not depend on the CPU. Against `f64` references on
//! every one of the 2^32 `f32` bit patterns (`tests/tests/math_accuracy.rs` with
//! `LNC_MATH_STRIDE=1`), the worst errors in ulps of the correctly rounded result are
//! `exp` 1.014 (at 26.704473), `exp2` 1.227, `log` 0.852 and `log2` 1.520 (at 1.4106256,
//! a significand near √2), and the special values are exact:
//! - `exp`: `+inf` past 88.72284 (where `f32` overflows), `+0` below -103.97, subnormal
//!   results in between rounded once, `exp(±0) = 1`, `exp(-inf) = 0`, NaN stays NaN;
//!   `exp2` likewise past 128 and below -150;
//! - `log`, `log2`: `-inf` at `±0`, NaN below zero and at NaN, `+inf` at `+inf`;
//!   subnormal arguments are scaled into the normal range first.
//!
//! Rust's own `f32::exp` (libm) rounds better (within half an ulp) but cannot be computed
//! on vector lanes: a call per lane made a loop of `exp` three times slower. `f64` keeps
//! libm everywhere.

use crate::UnOp;

/// `op` of `x`, for the operations this module defines.
pub fn unary_f32(op: UnOp, x: f32) -> Option<f32> {
    Some(match op {
        UnOp::Exp => exp(x),
        UnOp::Exp2 => exp2(x),
        UnOp::Log => log(x, false),
        UnOp::Log2 => log(x, true),
        _ => return None,
    })
}

/// The coefficients of `(e^r - 1 - r) / r²` on `|r| ≤ ln 2 / 2`, highest degree first.
pub const EXP_P: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];
/// The coefficients of `(2^r - 1) / r` on `|r| ≤ 1/2`, highest degree first.
pub const EXP2_P: [f32; 6] =
    [1.535_336_2e-4, 1.339_887_4e-3, 9.618_437e-3, 5.550_332_5e-2, 2.402_264_8e-1, 6.931_472e-1];
/// The coefficients of `(ln(1 + f) - f + f²/2) / f³` on `√½ - 1 ≤ f < √2 - 1`, highest
/// degree first.
pub const LOG_P: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333e-1,
];
/// `ln 2` in two parts: `n · LN2_HI` is exact for `|n| < 2^15` (9 significant bits).
pub const LN2_HI: f32 = 355.0 / 512.0;
/// `ln 2 - LN2_HI`.
pub const LN2_LO: f32 = -2.121_944_4e-4;
/// `log2 e - 1`.
pub const LOG2E_MINUS_1: f32 = 0.442_695_04;
/// Adding then subtracting 1.5·2^23 rounds an `f32` of magnitude below 2^22 to the
/// nearest integer (ties to even); the integer is then also the low bits of the sum.
pub const SHIFTER: f32 = 12_582_912.0;
/// `exp` clamps its argument to these bounds first (the result is `0` or `+inf` past
/// them anyway), `exp2` to [`EXP2_RANGE`]: the exponent then stays within [-151, 129].
pub const EXP_RANGE: (f32, f32) = (-104.0, 89.0);
/// See [`EXP_RANGE`].
pub const EXP2_RANGE: (f32, f32) = (-151.0, 129.0);

/// `a · b + c`, rounded twice.
fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    a * b + c
}

/// The polynomial `cs[0]·x^(n-1) + … + cs[n-1]` by Estrin's scheme: pairs `a·x + b`
/// combined with `x²`, `x⁴`, …, which halves the chain of dependent operations of the
/// vector code (a loop of them is bound by that latency).
pub fn estrin(x: f32, cs: &[f32]) -> f32 {
    // terms[k] is the coefficient of power^k (no polynomial here has more than 16).
    let mut terms = [0f32; 16];
    let mut len = cs.len();
    for (t, &c) in terms.iter_mut().zip(cs.iter().rev()) {
        *t = c;
    }
    let mut power = x;
    while len > 1 {
        for k in 0..len / 2 {
            terms[k] = mul_add(terms[2 * k + 1], power, terms[2 * k]);
        }
        if len % 2 == 1 {
            terms[len / 2] = terms[len - 1];
        }
        len = len.div_ceil(2);
        if len > 1 {
            power *= power;
        }
    }
    terms[0]
}

/// The polynomial by Horner's rule, for `exp2`, whose worst rounding it keeps at 1.227
/// ulps (1.48 with [`estrin`]).
pub fn horner(x: f32, cs: &[f32]) -> f32 {
    cs[1..].iter().fold(cs[0], |p, &c| mul_add(p, x, c))
}

/// `v` clamped to `[lo, hi]`; NaN stays NaN.
fn clamp(v: f32, (lo, hi): (f32, f32)) -> f32 {
    let v = if v > hi { hi } else { v };
    if v < lo { lo } else { v }
}

/// `round(v)` as a float and as an integer, for `|v| < 2^22`.
fn round_split(v: f32) -> (f32, i32) {
    let t = v + SHIFTER;
    (t - SHIFTER, (t.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32))
}

/// `y · 2^n` for `n` in [-151, 129] and `y` in [0.5, 2): two exact scalings by powers of
/// two in the normal range, so only a subnormal result is rounded, once.
fn scale(y: f32, n: i32) -> f32 {
    let half = n >> 1;
    let rest = n.wrapping_sub(half);
    let pow2 = |e: i32| f32::from_bits((e.wrapping_add(127) << 23) as u32);
    y * pow2(half) * pow2(rest)
}

/// `e^x`: `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, `e^r = 1 + r + r²·P(r)`, times `2^n`.
pub fn exp(x: f32) -> f32 {
    let x = clamp(x, EXP_RANGE);
    let (n, ni) = round_split(x * std::f32::consts::LOG2_E);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = estrin(r, &EXP_P);
    let y = mul_add(p, r * r, r) + 1.0;
    scale(y, ni)
}

/// `2^x`: `x = n + r` with `|r| ≤ 1/2` (exact), `2^r = 1 + r·P(r)`, times `2^n`.
pub fn exp2(x: f32) -> f32 {
    let x = clamp(x, EXP2_RANGE);
    let (n, ni) = round_split(x);
    let r = x - n;
    let y = horner(r, &EXP2_P) * r + 1.0;
    scale(y, ni)
}

/// `ln x` (`log2 x` when `base2`): `x = m·2^e` with `m` in [√½, √2), `ln m = f - f²/2 +
/// f³·P(f)` with `f = m - 1`, plus `e·ln 2` in two parts (`log2`: the terms times
/// `log2 e` split as `1 + 0.4427…`, then `e`).
pub fn log(x: f32, base2: bool) -> f32 {
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let e_adjust = if tiny { -23.0 } else { 0.0 };
    let bits = xs.to_bits();
    let e = ((bits >> 23) as i32).wrapping_sub(126) as f32 + e_adjust;
    let m = f32::from_bits((bits & 0x807F_FFFF) | 0x3F00_0000);
    let low = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = if low { e - 1.0 } else { e };
    let m = if low { m + m } else { m };
    let f = m - 1.0;
    let z = f * f;
    let y = estrin(f, &LOG_P) * f * z;
    let r = if base2 {
        let y = mul_add(z, -0.5, y);
        let a = y * LOG2E_MINUS_1;
        (mul_add(f, LOG2E_MINUS_1, a) + y + f) + e
    } else {
        let y = mul_add(e, LN2_LO, y);
        let y = mul_add(z, -0.5, y);
        mul_add(e, LN2_HI, f + y)
    };
    if x > 0.0 && x < f32::INFINITY {
        r
    } else if x == f32::INFINITY {
        x
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else {
        f32::NAN
    }
}
