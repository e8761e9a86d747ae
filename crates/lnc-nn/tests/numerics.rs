//! The accuracy claims of `docs/numerics.md`, measured:
//!
//! - the kernels' sums (fp32 lanes, several accumulators, combined pairwise) against a
//!   naive sequential fp32 sum of the same values, both against float64;
//! - TensorRT-LLM's `use_diff_of_squares` (and ttnn's gathered statistics, which have no
//!   other choice) against the two-pass variance on rows whose mean is large against their
//!   spread.
//!
//! The thresholds were measured on the fixed seeds, with margins stated beside them.

mod common;

use common::*;
use lnc_nn::{TTNN_EPS, all_gather_stats};

/// Relative error of a sum.
fn rel(got: f64, exact: f64) -> f64 {
    (got - exact).abs() / exact.abs()
}

/// Naive left-to-right fp32 summation: each addition rounds against the whole running sum.
fn naive(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |s, &v| s + v)
}

/// Root mean square of relative errors.
fn rms(errors: &[f64]) -> f64 {
    (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt()
}

/// Relative errors of the sums of the rows of `x` (rows of `n`) against float64: the
/// naive sequential fp32 sums, and `kernel` (one sum per row).
fn sum_errors(x: &[f32], n: usize, kernel: &[f64]) -> (Vec<f64>, Vec<f64>) {
    x.chunks(n)
        .zip(kernel)
        .map(|(row, &k)| {
            let exact: f64 = row.iter().map(|&v| v as f64).sum();
            (rel(naive(row) as f64, exact), rel(k, exact))
        })
        .unzip()
}

#[test]
fn kernel_sums_beat_naive_sequential_fp32_summation() {
    let nn = nn();
    let mut rng = seeded(0x5e_0001);
    // Rows of about a million values in [1, 2) (mean 1.5): past 2^20 every addition of a
    // naive sum rounds at the scale of the running sum (ulp 0.125), while each of the
    // chunked kernels' 1024 lanes only reaches ~1500 (ulp 1.2e-4) before the block
    // reduction. Rounding errors of random data are random: the naive error of one row
    // varies from 4e-7 to 3e-5 with the data, hence several rows and their RMS.
    let (rows, n) = (6, 1_000_003);
    let x: Vec<f32> = randn(&mut rng, rows * n, 1.5, 0.25);
    let stats = nn.layer_norm_pre_all_gather(&x, n).unwrap_or_else(|e| panic!("{e}"));
    let sums: Vec<f64> = stats.chunks(2).map(|p| p[0] as f64).collect();
    let (naive_err, kernel_err) = sum_errors(&x, n, &sums);
    let ln = nn.layer_norm(&x, n, &vec![1.0; n], &vec![0.0; n], 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let from_mean: Vec<f64> = ln.mean.iter().map(|&m| m as f64 * n as f64).collect();
    let (_, mean_err) = sum_errors(&x, n, &from_mean);
    let (naive_rms, kernel_rms, mean_rms) = (rms(&naive_err), rms(&kernel_err), rms(&mean_err));
    eprintln!(
        "Σx of {rows} rows of {n} values in [1, 2), RMS rel err: naive fp32 {naive_rms:.2e}, \
         pre_all_gather {kernel_rms:.2e}, layer_norm mean {mean_rms:.2e}"
    );
    // Measured: naive 1.28e-5; pre_all_gather 5.9e-8, layer_norm's mean 5.2e-8 (an ulp of
    // a sum of 1.5e6 is 8e-8 of it: the kernels' sums are within about one ulp).
    // Thresholds: kernel < 2e-7, and at least 20 times better than naive (measured 215).
    assert!(kernel_rms < 2e-7 && mean_rms < 2e-7, "kernel sums off by {kernel_rms:e} / {mean_rms:e}");
    assert!(kernel_rms * 20.0 < naive_rms, "kernel {kernel_rms:e} vs naive {naive_rms:e}");

    // One block (the whole row, one tl.sum): 32 chains (4 lanes × 8 accumulators) of 512
    // additions, combined pairwise, instead of one chain of 16384.
    let (rows, n) = (16, 16384);
    let x: Vec<f32> = randn(&mut rng, rows * n, 1.5, 0.25);
    let ln = nn.layer_norm(&x, n, &vec![1.0; n], &vec![0.0; n], 1e-5).unwrap_or_else(|e| panic!("{e}"));
    let from_mean: Vec<f64> = ln.mean.iter().map(|&m| m as f64 * n as f64).collect();
    let (naive_err, block_err) = sum_errors(&x, n, &from_mean);
    let (naive_rms, block_rms) = (rms(&naive_err), rms(&block_err));
    eprintln!(
        "Σx of {rows} rows of {n} values in [1, 2), RMS rel err: naive fp32 {naive_rms:.2e}, one-block tl.sum {block_rms:.2e}"
    );
    // Measured: naive 2.0e-6, one block 1.3e-7, 15 times better: chains 16 times shorter
    // whose partial sums are 16 times smaller (rounding steps 16 times finer, sqrt(16)
    // times fewer of them per chain, 16 chains adding up in quadrature: 16 / 4 · 4 = 16).
    // Thresholds: < 5e-7 and 4 times better than naive.
    assert!(block_rms < 5e-7, "one-block sum off by {block_rms:e}");
    assert!(block_rms * 4.0 < naive_rms, "one block {block_rms:e} vs naive {naive_rms:e}");
}

/// The variance a kernel used, recovered from its rstd, relative to the true one.
fn var_errors(rstd: &[f32], var: &[f64], eps: f64) -> Vec<f64> {
    rstd.iter().zip(var).map(|(&r, &v)| ((1.0 / (r as f64).powi(2) - eps) - v).abs() / v).collect()
}

#[test]
fn diff_of_squares_cancels_when_the_mean_dominates() {
    let nn = nn();
    let mut rng = seeded(0x5e_0002);
    let (rows, n, eps) = (16usize, 1003usize, 1e-5f64);
    // mean 1e4, std 0.1: E[x²] ≈ 1e8, where fp32's ulp is 8, while var ≈ 0.01. Σx²/N and
    // mean² agree in all their significant bits but the last few: their difference is a
    // few multiples of 8 (or 0, clamped) whatever the variance.
    let x: Vec<f32> = randn(&mut rng, rows * n, 1e4, 0.1);
    let r = ln_ref(&wide32(&x), n, None, None, eps);
    let shape = [rows, n];
    let two =
        nn.trt_layer_norm(&x, &shape, &[n], None, None, eps as f32, false).unwrap_or_else(|e| panic!("{e}"));
    let one =
        nn.trt_layer_norm(&x, &shape, &[n], None, None, eps as f32, true).unwrap_or_else(|e| panic!("{e}"));
    let e2 = var_errors(&two.rstd, &r.var, eps);
    let e1 = var_errors(&one.rstd, &r.var, eps);
    let max2 = e2.iter().copied().fold(0.0, f64::max);
    let min1 = e1.iter().copied().fold(f64::INFINITY, f64::min);
    let y2 = max_abs_err(&wide32(&two.y), &r.y);
    let y1 = max_abs_err(&wide32(&one.y), &r.y);
    eprintln!(
        "mean 1e4, std 0.1: variance rel err two-pass max {max2:.2e}, diff of squares min {min1:.2e}; \
         y max abs err two-pass {y2:.2e}, diff of squares {y1:.2e}"
    );
    // Two-pass: the mean is off by about an ulp of 1e4 (1e-3), a hundredth of the std, which
    // enters the variance squared. Measured max 1.9e-4; threshold 1e-3.
    assert!(max2 < 1e-3, "two-pass variance off by {max2:e}");
    // Diff of squares: off by 100 % or more on every row. Measured min 1.0; threshold 0.5.
    assert!(min1 > 0.5, "diff-of-squares variance only off by {min1:e} on some row");
    // y = (x - mean)·rstd is of order 1: the two-pass mean's error (1.4 ulps of 1e4) times
    // rstd (≈ 10) gives 1.4e-2 (measured; fp32 cannot hold a mean of 1e4 closer than half an
    // ulp, 4.9e-4, which alone is 4.9e-3 of y); threshold 5e-2. With the wrong rstd (the
    // variance clamped to 0, rstd = 1/sqrt(eps) ≈ 316 instead of 10), y is off by 99.6
    // (measured); threshold 1.
    assert!(y2 < 5e-2, "two-pass y off by {y2:e}");
    assert!(y1 > 1.0, "diff-of-squares y only off by {y1:e}");

    // ttnn's distributed form has only Σx and Σx² to work with: the same cancellation.
    let half = n / 2;
    let left: Vec<f32> = x.chunks(n).flat_map(|row| row[..half].to_vec()).collect();
    let right: Vec<f32> = x.chunks(n).flat_map(|row| row[half..].to_vec()).collect();
    let pre = |s: &[f32], w| nn.layer_norm_pre_all_gather(s, w).unwrap_or_else(|e| panic!("{e}"));
    let stats =
        all_gather_stats(&[pre(&left, half), pre(&right, n - half)]).unwrap_or_else(|e| panic!("{e}"));
    let yl = nn
        .layer_norm_post_all_gather(&left, half, &stats, n, None, None, TTNN_EPS)
        .unwrap_or_else(|e| panic!("{e}"));
    let r_left: Vec<f64> = r.y.chunks(n).flat_map(|row| row[..half].to_vec()).collect();
    let yd = max_abs_err(&wide32(&yl), &r_left);
    eprintln!("mean 1e4, std 0.1: ttnn sharded y max abs err {yd:.2e}");
    // ttnn's eps (1e-12) makes it worse: rstd = 1e6 on a clamped variance. Measured 3.3e5.
    assert!(yd > 1.0, "ttnn's y only off by {yd:e}");

    // Well-conditioned rows (mean 0.5, std 1): both forms within 1e-5.
    let x: Vec<f32> = randn(&mut rng, rows * n, 0.5, 1.0);
    let r = ln_ref(&wide32(&x), n, None, None, eps);
    for diff_sq in [false, true] {
        let out = nn
            .trt_layer_norm(&x, &shape, &[n], None, None, eps as f32, diff_sq)
            .unwrap_or_else(|e| panic!("{e}"));
        let e = var_errors(&out.rstd, &r.var, eps).into_iter().fold(0.0, f64::max);
        eprintln!("mean 0.5, std 1: variance rel err (diff of squares {diff_sq}) {e:.2e}");
        assert!(e < 1e-5, "diff of squares {diff_sq}: variance off by {e:e} on well-conditioned rows");
    }
}
