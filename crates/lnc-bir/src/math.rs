//! What `exp`, `exp2`, `log`, `log2`, `sin` and `cos` of `f32` (and of `fp16`/`bf16`,
//! computed in `f32`) mean in lnc: these functions, bit for bit, everywhere a value is
//! computed — the interpreter, constant folding and the JIT, whose vector code (lnc-clif's
//! `vmath`) is the same sequence of operations on the lanes of a tile.
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
//! `sin` and `cos` (musl's `sinf`/`cosf` kernels) reduce the argument by `π/2` in `f64`
//! and evaluate in `f64`, so the result is rounded once: within 0.501 ulps on every 97th
//! bit pattern below [`SIN_COS_RANGE`], where the reduction is exact enough; beyond it
//! (and at infinities) they are libm's `sinf`/`cosf`. On all 2^32 inputs the worst is
//! 0.561 ulps for both, at arguments beyond the range.
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
        UnOp::Sin => sin_cos(x, false),
        UnOp::Cos => sin_cos(x, true),
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

/// Below this magnitude `sin` and `cos` reduce their argument in `f64` by two parts of
/// `π/2`, which leaves the remainder exact enough for a result rounded once (musl's
/// `__rem_pio2f`, up to 2^28·π/2); above it, and at infinities, they are libm's.
pub const SIN_COS_RANGE: f32 = 4.2e8;
/// `2/π`.
pub const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;
/// The first 33 bits of `π/2` (musl's `pio2_1`).
pub const PIO2_HI: f64 = f64::from_bits(0x3FF9_21FB_5000_0000);
/// `π/2 - PIO2_HI` (musl's `pio2_1t`).
pub const PIO2_LO: f64 = f64::from_bits(0x3E51_10B4_611A_6263);
/// `sin r ≈ r + r³·(S1 + r²·S2) + r⁷·(S3 + r²·S4)` on `|r| ≤ π/4` (musl's `__sindf`:
/// -0x15555554cbac77p-55, 0x111110896efbb2p-59, -0x1a00f9e2cae774p-65, 0x16cd878c3b46a7p-71).
pub const SIN_P: [f64; 4] = [
    f64::from_bits(0xBFC5_5555_54CB_AC77),
    f64::from_bits(0x3F81_1110_896E_FBB2),
    f64::from_bits(0xBF2A_00F9_E2CA_E774),
    f64::from_bits(0x3EC6_CD87_8C3B_46A7),
];
/// `cos r ≈ 1 + r²·C0 + r⁴·C1 + r⁶·(C2 + r²·C3)` on `|r| ≤ π/4` (musl's `__cosdf`:
/// -0x1ffffffd0c5e81p-54, 0x155553e1053a42p-57, -0x16c087e80f1e27p-62, 0x199342e0ee5069p-68).
pub const COS_P: [f64; 4] = [
    f64::from_bits(0xBFDF_FFFF_FD0C_5E81),
    f64::from_bits(0x3FA5_5553_E105_3A42),
    f64::from_bits(0xBF56_C087_E80F_1E27),
    f64::from_bits(0x3EF9_9342_E0EE_5069),
];
/// Below this magnitude `sin x` rounds to `x` and `cos x` to 1 (2^-12).
pub const SIN_COS_TINY: f32 = 1.0 / 4096.0;

/// `sin r` for `|r| ≤ π/4`, in `f64`.
pub fn sin_kernel(r: f64) -> f64 {
    let z = r * r;
    let w = z * z;
    let t = SIN_P[2] + z * SIN_P[3];
    let s = z * r;
    (r + s * (SIN_P[0] + z * SIN_P[1])) + s * w * t
}

/// `cos r` for `|r| ≤ π/4`, in `f64`.
pub fn cos_kernel(r: f64) -> f64 {
    let z = r * r;
    let w = z * z;
    let t = COS_P[2] + z * COS_P[3];
    ((1.0 + z * COS_P[0]) + w * COS_P[1]) + (w * z) * t
}

/// `x = n·π/2 + r`: `r` and the quadrant `n mod 4` (as `0.0 ..= 3.0`).
pub fn reduce_pio2(x: f64) -> (f64, f64) {
    let n = (x * TWO_OVER_PI).round_ties_even();
    let r = (x - n * PIO2_HI) - n * PIO2_LO;
    let q = n - 4.0 * (n * 0.25).floor();
    (r, q)
}

/// `sin x` (`cos x` when `cosine`), reduced and evaluated in `f64`, rounded once; within
/// [`SIN_COS_RANGE`]. Below 2^-12 in magnitude the result is `x` (`sin`, keeping `-0`) or
/// 1 (`cos`), the correctly rounded values there.
pub fn sin_cos(x: f32, cosine: bool) -> f32 {
    if x.is_nan() || x.abs() > SIN_COS_RANGE {
        return if cosine { x.cos() } else { x.sin() };
    }
    if x.abs() < SIN_COS_TINY {
        return if cosine { 1.0 } else { x };
    }
    let (r, q) = reduce_pio2(f64::from(x));
    let (s, c) = (sin_kernel(r), cos_kernel(r));
    let odd = q == 1.0 || q == 3.0;
    let negative = if cosine { q == 1.0 || q == 2.0 } else { q == 2.0 || q == 3.0 };
    let v = if odd != cosine { c } else { s };
    (if negative { -v } else { v }) as f32
}
