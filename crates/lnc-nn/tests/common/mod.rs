//! What the tests of `lnc-nn` share: storage conversions, random data, float64 references
//! and element-by-element comparisons.
#![allow(dead_code)]

use half::{bf16, f16};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// A storage dtype as the tests see it: its rounding and its exact value.
pub trait Num: lnc_nn::Float + std::fmt::Debug + PartialEq {
    /// Unit roundoff: half an ulp of 1.0.
    const U: f64;
    /// The nearest value (to nearest even).
    fn from_f64(v: f64) -> Self;
    /// The value, exactly.
    fn to_f64(self) -> f64;
}

impl Num for f32 {
    const U: f64 = 1.0 / 16_777_216.0;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Num for f16 {
    const U: f64 = 1.0 / 2048.0;
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
}

impl Num for bf16 {
    const U: f64 = 1.0 / 256.0;
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
}

/// A generator seeded with `LNC_TEST_SEED` when set, else with `default` (the thresholds
/// that depend on the data were measured on it, with margin); the seed is printed so a
/// failure can be replayed.
pub fn seeded(default: u64) -> StdRng {
    let seed = std::env::var("LNC_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    eprintln!("LNC_TEST_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// `len` values of mean `mean` and spread `std` (a sum of four uniforms: bell-shaped,
/// bounded), rounded to `T`; never exactly 0 unless the rounding makes it so.
pub fn randn<T: Num>(rng: &mut StdRng, len: usize, mean: f64, std: f64) -> Vec<T> {
    (0..len)
        .map(|_| {
            let s: f64 = (0..4).map(|_| rng.random::<f64>()).sum::<f64>() - 2.0;
            T::from_f64(mean + std * s * 3f64.sqrt())
        })
        .collect()
}

/// The exact values of a buffer.
pub fn wide<T: Num>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&e| e.to_f64()).collect()
}

/// `f32` statistics, widened.
pub fn wide32(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&e| e as f64).collect()
}

/// Layer norm of rows of `n` in float64, weight and bias optional: y, mean and the biased
/// two-pass variance.
pub struct LnRef {
    pub y: Vec<f64>,
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
    /// Per element, `|x̂ · w| + |b|`: the magnitudes y is computed through.
    pub scale: Vec<f64>,
}

impl LnRef {
    pub fn rstd(&self, eps: f64) -> Vec<f64> {
        self.var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect()
    }
}

pub fn ln_ref(x: &[f64], n: usize, w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> LnRef {
    let rows = x.len() / n;
    let mut r = LnRef { y: Vec::new(), mean: Vec::new(), var: Vec::new(), scale: Vec::new() };
    for row in x.chunks(n).take(rows) {
        let mu = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + eps).sqrt();
        for (c, v) in row.iter().enumerate() {
            let xw = (v - mu) * rs * w.map_or(1.0, |w| w[c]);
            let bias = b.map_or(0.0, |b| b[c]);
            r.y.push(xw + bias);
            r.scale.push(xw.abs() + bias.abs());
        }
        r.mean.push(mu);
        r.var.push(var);
    }
    r
}

/// Asserts `|got[i] - want[i]| <= tol(i, want[i])` for every element (NaN fails); prints
/// the worst ratio of error to tolerance, so that margins can be read off a test run.
#[track_caller]
pub fn assert_within(what: &str, got: &[f64], want: &[f64], tol: impl Fn(usize, f64) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let t = tol(i, w);
        let err = (g - w).abs();
        assert!(err <= t, "{what}[{i}] = {g}, expected {w} (error {err:e}, tolerance {t:e})");
        worst = worst.max(err / t);
    }
    eprintln!("{what}: worst error / tolerance = {worst:.3}");
}

/// The largest `|got - want|`.
pub fn max_abs_err(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max)
}

/// A fresh `Nn` on a fresh `Jit`.
pub fn nn() -> lnc_nn::Nn {
    lnc_nn::Nn::new(lnc::Jit::new()).unwrap_or_else(|e| panic!("the kernels parse: {e}"))
}

/// The message of an expected [`lnc_nn::Error::Shape`]; any other outcome fails.
#[track_caller]
pub fn shape_error<T: std::fmt::Debug>(r: lnc_nn::Result<T>) -> String {
    match r {
        Err(lnc_nn::Error::Shape(m)) => m,
        other => panic!("expected Error::Shape, got {other:?}"),
    }
}
