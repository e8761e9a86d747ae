//! RMSNorm through `Nn::rms_norm` / `Nn::rms_norm_backward` against float64 references
//! computed here on the same (rounded) inputs, in fp32, fp16 and bf16 storage.

mod common;

use common::*;
use half::{bf16, f16};

const EPS: f64 = 1e-5;

/// RMSNorm in float64, with the magnitudes the errors of dx and dw scale with.
struct RmsRef {
    y: Vec<f64>,
    rstd: Vec<f64>,
    dx: Vec<f64>,
    dw: Vec<f64>,
    /// Per element of dx, the size of the terms it is computed from (before cancellation).
    dx_scale: Vec<f64>,
    /// Per column, `Σ_rows |dy · x̂|`.
    dw_scale: Vec<f64>,
}

fn rms_ref(x: &[f64], w: &[f64], dy: &[f64], n: usize) -> RmsRef {
    let mut r = RmsRef {
        y: Vec::new(),
        rstd: Vec::new(),
        dx: Vec::new(),
        dw: vec![0.0; n],
        dx_scale: Vec::new(),
        dw_scale: vec![0.0; n],
    };
    for (row, g) in x.chunks(n).zip(dy.chunks(n)) {
        let rstd = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + EPS).sqrt();
        let xhat: Vec<f64> = row.iter().map(|v| v * rstd).collect();
        let wdy: Vec<f64> = g.iter().zip(w).map(|(g, w)| g * w).collect();
        let c = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c_abs = xhat.iter().zip(&wdy).map(|(a, b)| (a * b).abs()).sum::<f64>() / n as f64;
        for k in 0..n {
            r.y.push(xhat[k] * w[k]);
            r.dx.push((wdy[k] - xhat[k] * c) * rstd);
            r.dx_scale.push((wdy[k].abs() + xhat[k].abs() * c_abs) * rstd);
            r.dw[k] += g[k] * xhat[k];
            r.dw_scale[k] += (g[k] * xhat[k]).abs();
        }
        r.rstd.push(rstd);
    }
    r
}

fn check<T: Num>(seed: u64) {
    let nn = nn();
    let mut rng = seeded(seed);
    for (rows, n) in [(37, 1), (37, 3), (37, 1000), (5, 1537)] {
        let what = |v: &str| format!("{} {v} of {rows}x{n}", T::SIG);
        let x: Vec<T> = randn(&mut rng, rows * n, 0.3, 1.0);
        let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3);
        let dy: Vec<T> = randn(&mut rng, rows * n, 0.0, 0.1);
        let out = nn.rms_norm(&x, n, &w, EPS as f32).unwrap_or_else(|e| panic!("{}: {e}", what("forward")));
        let g = nn
            .rms_norm_backward(&dy, &x, n, &w, &out)
            .unwrap_or_else(|e| panic!("{}: {e}", what("backward")));
        let r = rms_ref(&wide(&x), &wide(&w), &wide(&dy), n);
        // fp32 arithmetic (rstd from an fp32 sum of n squares), rounded once to T.
        assert_within(&what("rstd"), &wide32(&out.rstd), &r.rstd, |_, v| 1e-5 * v);
        assert_within(&what("y"), &wide(&out.y), &r.y, |_, v| (2.0 * T::U + 1e-5) * v.abs() + 1e-7);
        assert_within(&what("dx"), &wide(&g.dx), &r.dx, |i, v| {
            2.0 * T::U * v.abs() + 1e-5 * r.dx_scale[i] + 1e-9
        });
        // The per-row partials are fp32: only the final rounding to T is T's.
        assert_within(&what("dw"), &wide(&g.dw), &r.dw, |i, v| {
            2.0 * T::U * v.abs() + 1e-5 * r.dw_scale[i] + 1e-9
        });
    }
}

#[test]
fn fp32_rms_norm_matches_float64() {
    check::<f32>(0x7_0001);
}

#[test]
fn fp16_rms_norm_matches_float64() {
    check::<f16>(0x7_0002);
}

#[test]
fn bf16_rms_norm_matches_float64() {
    check::<bf16>(0x7_0003);
}

#[test]
fn bad_shapes_are_errors() {
    let nn = nn();
    let x = vec![0.5f32; 12];
    let e = shape_error(nn.rms_norm(&x, 5, &[1.0; 5], 1e-5));
    assert!(e.contains("x has 12 elements: not rows of n = 5"), "{e}");
    let e = shape_error(nn.rms_norm(&x, 4, &[1.0; 3], 1e-5));
    assert!(e.contains("weight has 3"), "{e}");
    let out = nn.rms_norm(&x, 4, &[1.0; 4], 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let e = shape_error(nn.rms_norm_backward(&x[..8], &x, 4, &[1.0; 4], &out));
    assert!(e.contains("dy has 8"), "{e}");
    let e = shape_error(nn.rms_norm_backward(&x, &x, 6, &[1.0; 6], &out));
    assert!(e.contains("rstd has 3 elements: expected one per row, 2"), "{e}");
    // No long-row RMSNorm: rows past 64 KB of storage are refused, not truncated.
    let long = vec![0.5f32; 16385];
    let e = shape_error(nn.rms_norm(&long, 16385, &long, 1e-5));
    assert!(e.contains("do not fit one block"), "{e}");
}
