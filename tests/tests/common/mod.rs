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

/// A fresh random generator; its seed is printed so a failure can be replayed with
/// `LNC_TEST_SEED=<seed>`.
pub fn rng() -> rand::rngs::StdRng {
    let seed = std::env::var("LNC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("LNC_TEST_SEED={seed}");
    rand::rngs::StdRng::seed_from_u64(seed)
}

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
