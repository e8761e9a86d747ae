//! Triton tutorial 05's layer norm through `Nn::layer_norm` / `Nn::layer_norm_backward`:
//! forward and backward against float64 references computed here on the same (rounded)
//! inputs, in fp32, fp16 and bf16 storage, on row lengths that are not multiples of the
//! tile nor of 4, and rows past the one-block limit (the chunked long-row kernel).

mod common;

use common::*;
use half::{bf16, f16};
use rand::rngs::StdRng;

const EPS: f64 = 1e-5;

/// dx, dw, db of the layer norm in float64, and what their errors scale with: per element
/// of dx the size of the terms it is computed from (it cancels), per column of dw and db
/// the sum of the magnitudes of the terms.
struct BwdRef {
    dx: Vec<f64>,
    dw: Vec<f64>,
    db: Vec<f64>,
    dx_scale: Vec<f64>,
    dw_scale: Vec<f64>,
    db_scale: Vec<f64>,
}

fn reference_backward(dy: &[f64], x: &[f64], n: usize, w: &[f64]) -> BwdRef {
    let mut r = BwdRef {
        dx: Vec::new(),
        dw: vec![0.0; n],
        db: vec![0.0; n],
        dx_scale: Vec::new(),
        dw_scale: vec![0.0; n],
        db_scale: vec![0.0; n],
    };
    for (row, g) in x.chunks(n).zip(dy.chunks(n)) {
        let mu = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + EPS).sqrt();
        let xhat: Vec<f64> = row.iter().map(|v| (v - mu) * rs).collect();
        let wdy: Vec<f64> = g.iter().zip(w).map(|(g, w)| g * w).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        let c1_abs = xhat.iter().zip(&wdy).map(|(a, b)| (a * b).abs()).sum::<f64>() / n as f64;
        let c2_abs = wdy.iter().map(|v| v.abs()).sum::<f64>() / n as f64;
        for k in 0..n {
            r.dx.push((wdy[k] - (xhat[k] * c1 + c2)) * rs);
            r.dx_scale.push((wdy[k].abs() + xhat[k].abs() * c1_abs + c2_abs) * rs);
            r.dw[k] += g[k] * xhat[k];
            r.db[k] += g[k];
            r.dw_scale[k] += (g[k] * xhat[k]).abs();
            r.db_scale[k] += g[k].abs();
        }
    }
    r
}

/// A forward run: the inputs and what `Nn::layer_norm` returned.
struct Forward<T> {
    x: Vec<T>,
    w: Vec<T>,
    b: Vec<T>,
    out: lnc_nn::LayerNormOut<T>,
}

/// Forward of `rows × n` random rows against float64. The statistics are fp32 sums
/// (`docs/numerics.md`): within 1e-5 of the row's mean magnitude for the mean, 1e-5
/// relative for rstd. y is computed in fp32 through the magnitudes `|x̂·w| + |b|` and
/// rounded once to `T`.
fn check_forward<T: Num>(nn: &lnc_nn::Nn, rng: &mut StdRng, rows: usize, n: usize) -> Forward<T> {
    let x: Vec<T> = randn(rng, rows * n, -2.3, 0.5);
    let w: Vec<T> = randn(rng, n, 1.0, 0.3);
    let b: Vec<T> = randn(rng, n, 0.0, 0.5);
    let what = |v: &str| format!("{} {v} of {rows}x{n}", T::SIG);
    let out = nn.layer_norm(&x, n, &w, &b, EPS as f32).unwrap_or_else(|e| panic!("{}: {e}", what("forward")));
    let xf = wide(&x);
    let r = ln_ref(&xf, n, Some(&wide(&w)), Some(&wide(&b)), EPS);
    let row_abs: Vec<f64> =
        xf.chunks(n).map(|row| row.iter().map(|v| v.abs()).sum::<f64>() / n as f64).collect();
    assert_within(&what("mean"), &wide32(&out.mean), &r.mean, |i, _| 1e-5 * row_abs[i]);
    assert_within(&what("rstd"), &wide32(&out.rstd), &r.rstd(EPS), |_, w| 1e-5 * w);
    assert_within(&what("y"), &wide(&out.y), &r.y, |i, w| 2.0 * T::U * w.abs() + 1e-5 * (1.0 + r.scale[i]));
    Forward { x, w, b, out }
}

fn check<T: Num>(seed: u64) {
    let nn = nn();
    let mut rng = seeded(seed);
    // Rows of 1 (a row is its mean: x̂ = 0, y = b), 3, 1000, 1537: not multiples of the
    // tile (4 lanes) nor of its unrolled accumulators; 300 rows of 3 make several rows
    // share a partial-gradient row (GROUP_SIZE_M = 256) under its lock.
    for (rows, n) in [(3, 1), (300, 3), (5, 1000), (3, 1537)] {
        let what = |v: &str| format!("{} {v} of {rows}x{n}", T::SIG);
        let Forward { x, w, b, out } = check_forward::<T>(&nn, &mut rng, rows, n);
        let dy: Vec<T> = randn(&mut rng, rows * n, 0.0, 0.1);
        let g = nn
            .layer_norm_backward(&dy, &x, n, &w, &b, &out)
            .unwrap_or_else(|e| panic!("{}: {e}", what("backward")));
        let r = reference_backward(&wide(&dy), &wide(&x), n, &wide(&w));
        // dx: fp32 arithmetic on terms of size dx_scale (it cancels), rounded once to T.
        assert_within(&what("dx"), &wide(&g.dx), &r.dx, |i, v| {
            2.0 * T::U * v.abs() + 1e-5 * r.dx_scale[i] + 1e-9
        });
        // dw, db: each row's term rounded to T (the tutorial's partial buffers are of x's
        // dtype), at most two per partial row added in T, the partial rows summed in fp32
        // and the result rounded to T.
        assert_within(&what("dw"), &wide(&g.dw), &r.dw, |i, v| {
            2.0 * T::U * v.abs() + (3.0 * T::U + 1e-5) * r.dw_scale[i] + 1e-9
        });
        assert_within(&what("db"), &wide(&g.db), &r.db, |i, v| {
            2.0 * T::U * v.abs() + (3.0 * T::U + 1e-5) * r.db_scale[i] + 1e-9
        });
    }
}

#[test]
fn fp32_forward_and_backward_match_float64() {
    check::<f32>(0x1a7e_0001);
}

#[test]
fn fp16_forward_and_backward_match_float64() {
    check::<f16>(0x1a7e_0002);
}

#[test]
fn bf16_forward_and_backward_match_float64() {
    check::<bf16>(0x1a7e_0003);
}

/// Rows longer than 64 KB of storage go to the chunked kernel: the same two-pass
/// statistics, the same tolerances (each lane now sums N / 1024 elements before the
/// block reduction).
#[test]
fn long_rows_take_the_chunked_kernel() {
    let nn = nn();
    let mut rng = seeded(0x1a7e_0004);
    // fp32: one block holds at most 16384 elements, fp16/bf16 32768.
    check_forward::<f32>(&nn, &mut rng, 3, 20011);
    check_forward::<f16>(&nn, &mut rng, 2, 40009);
    check_forward::<bf16>(&nn, &mut rng, 2, 40009);
    // The largest size the issue asks for: a row of about a million elements.
    check_forward::<f32>(&nn, &mut rng, 1, 1_000_003);
}

/// Either side of the one-block limit the two kernels compute the same statistics: rows
/// of 16385 values that fp16 represents exactly take one block in fp16 (up to 32768
/// elements) and the chunked kernel in fp32 (one block holds 16384).
#[test]
fn one_block_and_chunked_kernels_agree_at_the_limit() {
    let nn = nn();
    let mut rng = seeded(0x1a7e_0005);
    let (rows, n) = (2, 16385);
    let xh: Vec<f16> = randn(&mut rng, rows * n, 0.7, 1.9);
    let wh: Vec<f16> = randn(&mut rng, n, 1.0, 0.3);
    let bh: Vec<f16> = randn(&mut rng, n, 0.0, 0.5);
    let f32s = |v: &[f16]| v.iter().map(|e| e.to_f32()).collect::<Vec<f32>>();
    let one = nn.layer_norm(&xh, n, &wh, &bh, 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let long = nn.layer_norm(&f32s(&xh), n, &f32s(&wh), &f32s(&bh), 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let r = ln_ref(&wide(&xh), n, Some(&wide(&wh)), Some(&wide(&bh)), 1e-5);
    for (name, mean, rstd) in
        [("one block (fp16)", &one.mean, &one.rstd), ("chunked (fp32)", &long.mean, &long.rstd)]
    {
        assert_within(&format!("{name} mean"), &wide32(mean), &r.mean, |_, _| 1e-6);
        assert_within(&format!("{name} rstd"), &wide32(rstd), &r.rstd(1e-5), |_, v| 1e-6 * v);
    }
    // The fp32 output of the chunked kernel, rounded to fp16, is the fp16 output of the
    // one-block kernel but for ties of the last bit.
    let y_long: Vec<f64> = long.y.iter().map(|&v| f16::from_f32(v).to_f64()).collect();
    assert_within("one block vs chunked y", &wide(&one.y), &y_long, |_, v| 2.0 * f16::U * v.abs() + 1e-6);
}

#[test]
fn empty_input_gives_empty_outputs() {
    let nn = nn();
    let out = nn.layer_norm::<f32>(&[], 7, &[1.0; 7], &[0.0; 7], 1e-5).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.y.is_empty() && out.mean.is_empty() && out.rstd.is_empty());
    let g = nn
        .layer_norm_backward::<f32>(&[], &[], 7, &[1.0; 7], &[0.0; 7], &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(g.dx.is_empty());
    assert_eq!((g.dw, g.db), (vec![0.0; 7], vec![0.0; 7]), "no rows: zero gradients");
}

#[test]
fn bad_shapes_are_errors() {
    let nn = nn();
    let x = vec![0.5f32; 10];
    let e = shape_error(nn.layer_norm(&x, 3, &[1.0; 3], &[0.0; 3], 1e-5));
    assert!(e.contains("not rows of n = 3"), "{e}");
    let e = shape_error(nn.layer_norm(&x, 0, &[], &[], 1e-5));
    assert!(e.contains("not rows of n = 0"), "{e}");
    let e = shape_error(nn.layer_norm(&x, 5, &[1.0; 4], &[0.0; 5], 1e-5));
    assert!(e.contains("weight has 4"), "{e}");
    let e = shape_error(nn.layer_norm(&x, 5, &[1.0; 5], &[0.0; 6], 1e-5));
    assert!(e.contains("bias has 6"), "{e}");

    let (w, b) = ([1.0f32; 5], [0.0f32; 5]);
    let out = nn.layer_norm(&x, 5, &w, &b, 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let e = shape_error(nn.layer_norm_backward(&x[..5], &x, 5, &w, &b, &out));
    assert!(e.contains("dy has 5"), "{e}");
    let mut short = out.clone();
    short.rstd.pop();
    let e = shape_error(nn.layer_norm_backward(&x, &x, 5, &w, &b, &short));
    assert!(e.contains("rstd 1"), "{e}");

    // The forward takes long rows; the backward has no long-row form.
    let n = 20000;
    let long: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
    let out = nn.layer_norm(&long, n, &w, &b, 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let e = shape_error(nn.layer_norm_backward(&long, &long, n, &w, &b, &out));
    assert!(e.contains("one block"), "{e}");
}
