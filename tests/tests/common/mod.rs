//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

pub mod diff;

use rand::{Rng, SeedableRng};

/// The seed tutorial file, as it is.
pub const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/seeds/triton_05_layer_norm.py");

/// Reads the seed file.
pub fn seed_source() -> String {
    std::fs::read_to_string(SEED).expect("../shared/seeds/triton_05_layer_norm.py is beside the repository")
}

/// The seed file as a module of `jit`.
pub fn seed_module(jit: &lnc::Jit) -> lnc::Module {
    jit.module("triton_05_layer_norm.py", seed_source()).expect("seed parses")
}

/// A fresh random generator; its seed is printed so a failure can be replayed with
/// `LNC_TEST_SEED=<seed>`.
pub fn rng() -> rand::rngs::StdRng {
    seeded(rand::rng().random())
}

/// A random generator seeded with `LNC_TEST_SEED` when set, else with `default` (for tests
/// whose thresholds were measured on one seed); the seed is printed.
pub fn seeded(default: u64) -> rand::rngs::StdRng {
    let seed = std::env::var("LNC_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    eprintln!("LNC_TEST_SEED={seed}");
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// A float dtype kernel arguments are stored in: fp32, fp64, fp16 or bf16.
pub trait Float: lnc::Element + std::fmt::Debug {
    /// Its name in a signature.
    const SIG: &'static str;
    /// Unit roundoff: half an ulp of 1.0.
    const U: f64;
    /// The nearest value (to nearest even).
    fn from_f32(x: f32) -> Self;
    /// The value, widened or rounded to `f32`.
    fn to_f32(self) -> f32;
    /// The value, exactly.
    fn to_f64(self) -> f64;
    /// The differential harness's buffer holding these elements.
    fn data(v: Vec<Self>) -> diff::Data;
    /// A buffer argument of the differential harness.
    fn arg(v: Vec<Self>) -> diff::A {
        diff::A::Buf(Self::data(v), 0)
    }
}

macro_rules! float {
    ($t:ty, $sig:literal, $u:expr, $from:expr, $to32:expr, $to64:expr, $data:ident) => {
        impl Float for $t {
            const SIG: &'static str = $sig;
            const U: f64 = $u;
            fn from_f32(x: f32) -> Self {
                $from(x)
            }
            fn to_f32(self) -> f32 {
                $to32(self)
            }
            fn to_f64(self) -> f64 {
                $to64(self)
            }
            fn data(v: Vec<Self>) -> diff::Data {
                diff::Data::$data(v)
            }
        }
    };
}

float!(f32, "fp32", 1.0 / 16_777_216.0, |x| x, |x| x, |x: f32| x as f64, F32);
float!(f64, "fp64", f64::EPSILON / 2.0, |x: f32| x as f64, |x: f64| x as f32, |x| x, F64);
float!(half::f16, "fp16", 1.0 / 2048.0, half::f16::from_f32, half::f16::to_f32, half::f16::to_f64, F16);
float!(half::bf16, "bf16", 1.0 / 256.0, half::bf16::from_f32, half::bf16::to_f32, half::bf16::to_f64, BF16);

/// Normal-ish random numbers (sum of uniforms) with a mean and a spread.
pub fn randn(rng: &mut impl Rng, n: usize, mean: f32, std: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let s: f32 = (0..4).map(|_| rng.random::<f32>()).sum::<f32>() - 2.0;
            mean + std * s * 1.7
        })
        .collect()
}

/// Layer-norm forward in float64: (y, mean, rstd).
pub fn layer_norm_ref(x: &[f32], w: &[f32], b: &[f32], n: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut y, mut mean, mut rstd) = (vec![0.0; m * n], vec![0.0; m], vec![0.0; m]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + eps).sqrt();
        for c in 0..n {
            y[r * n + c] = (row[c] as f64 - mu) * rs * w[c] as f64 + b[c] as f64;
        }
        mean[r] = mu;
        rstd[r] = rs;
    }
    (y, mean, rstd)
}

/// The tutorial's choice of GROUP_SIZE_M for a row length.
pub fn group_size_m(n: usize) -> usize {
    let mut g = 64;
    if n <= 8192 {
        g = 96;
    }
    if n <= 4096 {
        g = 128;
    }
    if n <= 1024 {
        g = 256;
    }
    g
}

/// dx, dw, db in float64 for y = xhat * w + b, given dy.
pub fn backward_ref(x: &[f32], w: &[f32], dy: &[f32], n: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut dx, mut dw, mut db) = (vec![0.0; m * n], vec![0.0; n], vec![0.0; n]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mu) * rstd).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] as f64 * dy[r * n + c] as f64).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        for c in 0..n {
            dx[r * n + c] = (wdy[c] - (xhat[c] * c1 + c2)) * rstd;
            dw[c] += dy[r * n + c] as f64 * xhat[c];
            db[c] += dy[r * n + c] as f64;
        }
    }
    (dx, dw, db)
}

/// Asserts every element is within `atol + rtol * |want|`; NaN (a poisoned, unwritten
/// element) always fails.
#[track_caller]
pub fn assert_close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = atol + rtol * w.abs();
        assert!(
            !g.is_nan() && (g as f64 - w).abs() <= tol,
            "{what}[{i}] = {g}, expected {w} (tolerance {tol})"
        );
    }
}

/// Runs the seed forward `k` on rows of `w.len()` with `Y` starting `shift` elements into
/// its buffer, every output poisoned with NaN, checked or not; returns y (without the
/// shift), mean and rstd, after checking that the elements before y kept their poison.
pub fn run_forward<T: Float>(
    k: &lnc::Kernel,
    x: &[T],
    w: &[T],
    b: &[T],
    shift: usize,
    checked: bool,
) -> (Vec<T>, Vec<f32>, Vec<f32>) {
    let n = w.len();
    let m = x.len() / n;
    let mut buf = vec![T::from_f32(f32::NAN); m * n + shift];
    let (mut mean, mut rstd) = (vec![f32::NAN; m], vec![f32::NAN; m]);
    let y = &mut buf[shift..];
    let args = lnc::args![x, y, w, b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
    if checked {
        k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
    } else {
        // SAFETY: every buffer holds the rows the kernel touches.
        unsafe { k.launch_unchecked(m as u32, &args) }.unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(buf[..shift].iter().all(|v| v.to_f64().is_nan()), "elements before y were written");
    (buf.split_off(shift), mean, rstd)
}

/// The signature of the seed's dx kernel with storage dtype `t` (mean and rstd fp32).
pub fn seed_dx_signature(t: &str, group: usize, block: usize) -> String {
    format!("*{t},*{t},*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}")
}

/// The seed's dx kernel of `module` on rows of `n` (mean and rstd from the module's
/// forward, b = 0.25) with `group` locks, every output poisoned with NaN, launched
/// unchecked when `unchecked`; returns dx and the partial dw and db rows, after checking
/// that every lock was released.
pub fn run_seed_dx<T: Float>(
    module: &lnc::Module,
    x: &[T],
    dy: &[T],
    w: &[T],
    n: usize,
    group: usize,
    unchecked: bool,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let m = x.len() / n;
    let block = n.next_power_of_two();
    let nan = T::from_f32(f32::NAN);
    let t = T::SIG;
    let fwd = module
        .kernel("_layer_norm_fwd_fused", &format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut y, mut mean, mut rstd) = (vec![nan; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
    let b = vec![T::from_f32(0.25); n];
    fwd.launch(m as u32, &lnc::args![x, &mut y, w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32])
        .unwrap_or_else(|e| panic!("{e}"));
    let k = module
        .kernel("_layer_norm_bwd_dx_fused", &seed_dx_signature(t, group, block))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut locks = vec![0i32; 2 * group];
    let (mut dx, mut pdw, mut pdb) = (vec![nan; m * n], vec![nan; group * n], vec![nan; group * n]);
    let args = lnc::args![
        &mut dx, dy, &mut pdw, &mut pdb, x, w, &b, &mean, &rstd, &mut locks, n as i32, n as i32, 1e-5f32
    ];
    let launched = if unchecked {
        // SAFETY: the buffers have the lengths the kernel indexes: m rows of n, `group`
        // partial rows, 2 * group lock words.
        unsafe { k.launch_unchecked(m as u32, &args) }
    } else {
        k.launch(m as u32, &args)
    };
    launched.unwrap_or_else(|e| panic!("{e}"));
    assert!(locks[..group].iter().all(|&l| l == 0), "a lock left held");
    (dx, pdw, pdb)
}
