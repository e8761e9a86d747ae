//! Two members of the layer-norm family written in the kernel language, in
//! `crates/lnc-nn/kernels/`:
//!
//! - Tenstorrent ttnn's distributed layer norm (`ttnn_distributed.py`): `pre_all_gather`
//!   (Σx and Σx² of a shard of the last axis) and `post_all_gather` (normalizes a shard with
//!   the gathered statistics of every shard). The host plays the devices and the all-gather:
//!   the last axis of x [M, N] is split into D shards, each launched separately, and the
//!   reassembled output must be the unsharded layer norm.
//! - TensorRT-LLM's `functional.layer_norm` (`trtllm_layer_norm.py`): `normalized_shape` over
//!   one or several trailing axes, optional weight and bias, and `use_diff_of_squares`,
//!   whose loss of accuracy on rows with a large mean is measured here.
//!
//! Every kernel runs through the embedding API on random inputs of awkward sizes (never a
//! multiple of the block or of 4), outputs poisoned with NaN, against float64 references
//! computed here; in fp32 and in fp16/bf16 storage; through the JIT-vs-interpreter
//! differential harness; and its block IR and loop IR are snapshotted.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::assert_close;
use common::diff::{A, Case, Check, diff};
use common::randn;
use half::{bf16, f16};
use lnc::{DumpRequest, Stage};
use rand::Rng;
use rand::rngs::StdRng;

const TTNN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/ttnn_distributed.py");
const TRT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/trtllm_layer_norm.py");

/// ttnn's default epsilon.
const TTNN_EPS: f32 = 1e-12;
/// TensorRT-LLM's usual epsilon.
const TRT_EPS: f32 = 1e-5;
/// fp32's unit roundoff.
const U32: f64 = 1.0 / 16_777_216.0;

fn load(path: &str) -> lnc::Module {
    lnc::Jit::new().load(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A generator seeded with `LNC_TEST_SEED` when set, with a fixed seed otherwise (the
/// accuracy thresholds below were measured on it, with margin for other seeds).
fn seeded() -> StdRng {
    common::seeded(0x7e57_1a7e)
}

use common::Float as Store;

fn round<T: Store>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

fn widen<T: Store>(v: &[T]) -> Vec<f32> {
    v.iter().map(|&x| x.to_f32()).collect()
}

fn nan<T: Store>(len: usize) -> Vec<T> {
    vec![T::from_f32(f32::NAN); len]
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Layer norm of rows of length `n` in float64, weight and bias optional: (y, mean, var)
/// with the two-pass (exact up to float64 rounding) biased variance.
fn ln_ref(
    x: &[f32],
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    n: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut y, mut mean, mut var) = (vec![0.0; m * n], vec![0.0; m], vec![0.0; m]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let va = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rs = 1.0 / (va + eps).sqrt();
        for c in 0..n {
            let mut v = (row[c] as f64 - mu) * rs;
            if let Some(w) = w {
                v *= w[c] as f64;
            }
            if let Some(b) = b {
                v += b[c] as f64;
            }
            y[r * n + c] = v;
        }
        mean[r] = mu;
        var[r] = va;
    }
    (y, mean, var)
}

/// What the fp32 computation of y = (x - mean)·rstd·w + b may be off by, per element:
/// `rel` times the magnitudes the computation goes through (1 for the mean, |x̂·w|, |b|),
/// plus rounding the result once to the storage type (`u` of it).
fn y_tol(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, n: usize, eps: f64, rel: f64, u: f64) -> Vec<f64> {
    let (_, mean, var) = ln_ref(x, None, None, n, eps);
    (0..x.len())
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let xhat = (x[i] as f64 - mean[r]) / (var[r] + eps).sqrt();
            let wv = w.map_or(1.0, |w| w[c] as f64);
            let bv = b.map_or(0.0, |b| b[c] as f64);
            let full = xhat * wv + bv;
            rel * (1.0 + (xhat * wv).abs() + bv.abs()) + 2.0 * u * full.abs()
        })
        .collect()
}

/// Asserts `|got - want| <= tol[i]` element by element (NaN, the poison, fails).
#[track_caller]
fn assert_within(what: &str, got: &[f32], want: &[f64], tol: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &t)) in got.iter().zip(want).zip(tol).enumerate() {
        assert!(!g.is_nan() && (g as f64 - w).abs() <= t, "{what}[{i}] = {g}, expected {w} (tolerance {t})");
    }
}

// ---------------------------------------------------------------------------------------
// ttnn: pre_all_gather / post_all_gather
// ---------------------------------------------------------------------------------------

fn pre_sig(t: &str, block: usize) -> String {
    format!("*{t},*fp32,i32,i32,{block}")
}

fn post_sig(t: &str, has_w: bool, has_b: bool, block: usize) -> String {
    format!(
        "*{t},*{t},*fp32,*{t},*{t},i32,i32,i32,i32,i32,fp32,{},{},{block}",
        py_bool(has_w),
        py_bool(has_b)
    )
}

/// Optional affine terms: none, weight only, weight and bias (ttnn's combinations).
const TTNN_AFFINE: [(bool, bool); 3] = [(false, false), (true, false), (true, true)];

/// Column bounds of `d` shards of `n` columns as even as integer division makes them.
fn even_bounds(n: usize, d: usize) -> Vec<usize> {
    (0..=d).map(|i| i * n / d).collect()
}

/// Copies columns `c0..c1` of the rows of `x` (row length `n`) into a dense shard.
fn columns<T: Copy>(x: &[T], n: usize, c0: usize, c1: usize) -> Vec<T> {
    x.chunks(n).flat_map(|row| row[c0..c1].iter().copied()).collect()
}

/// The distributed layer norm, the host playing D devices: every shard is copied into a
/// buffer of its own, pre_all_gather runs on each (a launch per shard), the [M, 2] stats
/// are all-gathered into [M, D, 2], post_all_gather runs on each shard, and the shards of y
/// are reassembled. Returns y and the gathered stats.
#[allow(clippy::too_many_arguments)]
fn ttnn_sharded<T: Store>(
    module: &lnc::Module,
    x: &[T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    n: usize,
    bounds: &[usize],
    eps: f32,
    block: usize,
) -> (Vec<T>, Vec<f32>) {
    let m = x.len() / n;
    let d = bounds.len() - 1;
    let pre = module.kernel("pre_all_gather", &pre_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
    let post = module
        .kernel("post_all_gather", &post_sig(T::SIG, w.is_some(), b.is_some(), block))
        .unwrap_or_else(|e| panic!("{e}"));
    let shards: Vec<Vec<T>> = bounds.windows(2).map(|c| columns(x, n, c[0], c[1])).collect();
    // pre_all_gather on every "device".
    let mut gathered = vec![f32::NAN; m * d * 2];
    for (k, xs) in shards.iter().enumerate() {
        let nd = bounds[k + 1] - bounds[k];
        let mut stats = vec![f32::NAN; m * 2];
        pre.launch(m as u32, &lnc::args![xs, &mut stats, nd as i32, nd as i32])
            .unwrap_or_else(|e| panic!("pre_all_gather, shard {k} of {d}: {e}"));
        // The all-gather.
        for r in 0..m {
            gathered[(r * d + k) * 2..(r * d + k) * 2 + 2].copy_from_slice(&stats[r * 2..r * 2 + 2]);
        }
    }
    // post_all_gather on every "device", then reassembly.
    let mut y = nan::<T>(m * n);
    for (k, xs) in shards.iter().enumerate() {
        let (c0, c1) = (bounds[k], bounds[k + 1]);
        let nd = c1 - c0;
        // Without weight or bias the kernel never reads them: any buffer of T will do.
        let ws = w.map_or(&xs[..], |w| &w[c0..c1]);
        let bs = b.map_or(&xs[..], |b| &b[c0..c1]);
        let mut ys = nan::<T>(m * nd);
        post.launch(
            m as u32,
            &lnc::args![
                xs, &mut ys, &gathered, ws, bs, nd as i32, nd as i32, nd as i32, n as i32, d as i32, eps
            ],
        )
        .unwrap_or_else(|e| panic!("post_all_gather, shard {k} of {d}: {e}"));
        for r in 0..m {
            y[r * n + c0..r * n + c1].copy_from_slice(&ys[r * nd..(r + 1) * nd]);
        }
    }
    (y, gathered)
}

/// The same, every shard read and written in place in the full tensors (row stride N,
/// pointers at the shard's first column).
#[allow(clippy::too_many_arguments)]
fn ttnn_in_place<T: Store>(
    module: &lnc::Module,
    x: &[T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    n: usize,
    bounds: &[usize],
    eps: f32,
    block: usize,
) -> Vec<T> {
    let m = x.len() / n;
    let d = bounds.len() - 1;
    let pre = module.kernel("pre_all_gather", &pre_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
    let post = module
        .kernel("post_all_gather", &post_sig(T::SIG, w.is_some(), b.is_some(), block))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut gathered = vec![f32::NAN; m * d * 2];
    for k in 0..d {
        let nd = bounds[k + 1] - bounds[k];
        let mut stats = vec![f32::NAN; m * 2];
        pre.launch(m as u32, &lnc::args![lnc::Arg::at(x, bounds[k]), &mut stats, n as i32, nd as i32])
            .unwrap_or_else(|e| panic!("pre_all_gather in place, shard {k} of {d}: {e}"));
        for r in 0..m {
            gathered[(r * d + k) * 2..(r * d + k) * 2 + 2].copy_from_slice(&stats[r * 2..r * 2 + 2]);
        }
    }
    let mut y = nan::<T>(m * n);
    for k in 0..d {
        let (c0, c1) = (bounds[k], bounds[k + 1]);
        let nd = c1 - c0;
        let (ws, bs) = (lnc::Arg::at(w.unwrap_or(x), c0), lnc::Arg::at(b.unwrap_or(x), c0));
        post.launch(
            m as u32,
            &lnc::args![
                lnc::Arg::at(x, c0),
                lnc::Arg::at_mut(&mut y, c0),
                &gathered,
                ws,
                bs,
                n as i32,
                n as i32,
                nd as i32,
                n as i32,
                d as i32,
                eps
            ],
        )
        .unwrap_or_else(|e| panic!("post_all_gather in place, shard {k} of {d}: {e}"));
    }
    y
}

/// Random ttnn data rounded to `T`: x [M, N] (mean -2.3, spread 0.5), weight, bias.
fn ttnn_data<T: Store>(rng: &mut StdRng, m: usize, n: usize) -> [Vec<T>; 3] {
    [round(&randn(rng, m * n, -2.3, 0.5)), round(&randn(rng, n, 1.0, 0.3)), round(&randn(rng, n, 0.0, 0.5))]
}

#[test]
fn ttnn_pre_all_gather_sums_match_float64() {
    let module = load(TTNN);
    let mut rng = seeded();
    // (M, width of the shard, row stride, first column, BLOCK_SIZE): one partial block, a
    // block and a tail, several blocks and a tail, a shard read in place from a wider row.
    for (m, nd, stride, c0, block) in [
        (1usize, 1usize, 1usize, 0usize, 16usize),
        (19, 37, 37, 0, 16),
        (19, 301, 301, 0, 64),
        (7, 130, 1003, 501, 128),
    ] {
        let x: Vec<f32> = randn(&mut rng, m * stride, 1.7, 2.5);
        let k = module.kernel("pre_all_gather", &pre_sig("fp32", block)).unwrap_or_else(|e| panic!("{e}"));
        let mut stats = vec![f32::NAN; m * 2 + 3];
        k.launch(m as u32, &lnc::args![lnc::Arg::at(&x, c0), &mut stats, stride as i32, nd as i32])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(stats[m * 2..].iter().all(|v| v.is_nan()), "stats written past row {m}");
        for r in 0..m {
            let row = &x[r * stride + c0..r * stride + c0 + nd];
            let s: f64 = row.iter().map(|&v| v as f64).sum();
            let q: f64 = row.iter().map(|&v| (v as f64).powi(2)).sum();
            let abs: f64 = row.iter().map(|&v| (v as f64).abs()).sum();
            // Each lane accumulates ceil(nd / block) terms, then the lanes are summed in some
            // order (no more than `block` additions deep): a sum computed with additions at
            // most `depth` deep is off by at most depth·u of the sum of the magnitudes.
            let depth = (nd.div_ceil(block) + block).min(nd) as f64;
            let what = format!("stats of row {r} ({m}x{nd}, stride {stride}, BLOCK {block})");
            assert_close(&what, &stats[r * 2..r * 2 + 1], &[s], depth * U32 * abs, 0.0);
            assert_close(&what, &stats[r * 2 + 1..r * 2 + 2], &[q], depth * U32 * q, 0.0);
        }
    }
}

/// Sharded (D ∈ {1, 2, 4, 8}, and an irregular split with an empty shard) against the
/// unsharded float64 layer norm, for every affine combination.
fn check_sharded<T: Store>(m: usize, n: usize, block: usize) {
    let module = load(TTNN);
    let mut rng = seeded();
    let [x, w, b] = ttnn_data::<T>(&mut rng, m, n);
    let (xf, wf, bf) = (widen(&x), widen(&w), widen(&b));
    let mut splits: Vec<Vec<usize>> = [1, 2, 4, 8].iter().map(|&d| even_bounds(n, d)).collect();
    // Shards of widths 0, 1, 2n/3 - 1 and the rest.
    splits.push(vec![0, 0, 1, 2 * n / 3, n]);
    for (has_w, has_b) in TTNN_AFFINE {
        let (wo, bo) = (has_w.then_some(&w[..]), has_b.then_some(&b[..]));
        let (wr, br) = (has_w.then_some(&wf[..]), has_b.then_some(&bf[..]));
        let (ry, rmean, rvar) = ln_ref(&xf, wr, br, n, TTNN_EPS as f64);
        // The one-pass variance of the gathered sums loses about κ = E[x²]/var (22 for
        // this data) times fp32's rounding of the sums; 2e-5 of the magnitudes covers it
        // (measured: at most 3e-6 in fp32).
        let tol = y_tol(&xf, wr, br, n, TTNN_EPS as f64, 2e-5, T::U);
        for bounds in &splits {
            let d = bounds.len() - 1;
            let what = format!("{} y, {m}x{n} in shards {bounds:?}, weight {has_w}, bias {has_b}", T::SIG);
            let (y, gathered) = ttnn_sharded(&module, &x, wo, bo, n, bounds, TTNN_EPS, block);
            assert_within(&what, &widen(&y), &ry, &tol);
            // The gathered stats add up to the row's Σx and Σx².
            for r in 0..m {
                let s: f64 = (0..d).map(|k| gathered[(r * d + k) * 2] as f64).sum();
                let q: f64 = (0..d).map(|k| gathered[(r * d + k) * 2 + 1] as f64).sum();
                let sq = n as f64 * (rvar[r] + rmean[r] * rmean[r]);
                assert!((s / n as f64 - rmean[r]).abs() <= 1e-5 * rmean[r].abs(), "{what}: Σx of row {r}");
                assert!(
                    (q / n as f64 - sq / n as f64).abs() <= 1e-5 * sq / n as f64,
                    "{what}: Σx² of row {r}"
                );
            }
            // Reading and writing the shards in place (row stride N) is the same computation.
            let yi = ttnn_in_place(&module, &x, wo, bo, n, bounds, TTNN_EPS, block);
            let (a, c) = (widen(&y), widen(&yi));
            assert!(
                a.iter().zip(&c).all(|(p, q)| p.to_bits() == q.to_bits()),
                "{what}: in place differs from copied shards"
            );
        }
    }
}

#[test]
fn ttnn_sharded_fp32_equals_unsharded_layer_norm() {
    check_sharded::<f32>(19, 1003, 128);
}

#[test]
fn ttnn_sharded_bf16_equals_unsharded_layer_norm() {
    // bf16: ttnn's own storage type for x, weight and bias.
    check_sharded::<bf16>(19, 1003, 64);
}

#[test]
fn ttnn_sharded_fp16_equals_unsharded_layer_norm() {
    check_sharded::<f16>(5, 333, 32);
}

#[test]
fn ttnn_post_all_gather_eps_and_constant_rows() {
    // Constant rows (values whose sums are exact in fp32): the mean is exact, x - mean is
    // 0, and y = 0·rstd·w + b = b exactly. E[x²] - E[x]² is not exact for -1234.5 (Σx² needs
    // more than 24 bits) and may come out negative: the kernel clamps it at 0, so rstd is
    // at most 1/sqrt(1e-12) = 1e6, finite, and y is not NaN.
    let module = load(TTNN);
    let (m, n) = (3usize, 77usize);
    let x: Vec<f32> = (0..m * n).map(|i| [0.0f32, 3.0, -1234.5][i / n]).collect();
    let bounds = even_bounds(n, 2);
    let b: Vec<f32> = (0..n).map(|c| c as f32 * 0.25 - 3.0).collect();
    let w = vec![1.5f32; n];
    let (y, _) = ttnn_sharded(&module, &x, Some(&w), Some(&b), n, &bounds, TTNN_EPS, 32);
    for i in 0..m * n {
        assert_eq!(y[i], b[i % n], "y[{i}] of a constant row is the bias");
    }
}

#[test]
fn ttnn_bias_without_weight_is_rejected() {
    let module = load(TTNN);
    let e = module.kernel("post_all_gather", &post_sig("fp32", false, true, 64)).err();
    let text = e.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("ttnn: bias only with weight"), "{text}");
}

// ---------------------------------------------------------------------------------------
// TensorRT-LLM: layer_norm
// ---------------------------------------------------------------------------------------

fn trt_sig(t: &str, has_w: bool, has_b: bool, diff_sq: bool, block: usize) -> String {
    format!(
        "*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{},{},{},{block}",
        py_bool(has_w),
        py_bool(has_b),
        py_bool(diff_sq)
    )
}

/// The outputs of `layer_norm`.
struct TrtOut<T> {
    y: Vec<T>,
    mean: Vec<f32>,
    rstd: Vec<f32>,
}

/// `tensorrt_llm.functional.layer_norm(x, normalized_shape, weight, bias, eps,
/// use_diff_of_squares)` on a tensor of shape `shape`: the kernel sees M rows of
/// N = Π normalized_shape elements.
#[allow(clippy::too_many_arguments)]
fn trt_layer_norm<T: Store>(
    module: &lnc::Module,
    x: &[T],
    shape: &[usize],
    normalized_shape: &[usize],
    w: Option<&[T]>,
    b: Option<&[T]>,
    eps: f32,
    diff_sq: bool,
) -> TrtOut<T> {
    assert!(shape.ends_with(normalized_shape), "normalized_shape {normalized_shape:?} of {shape:?}");
    assert_eq!(x.len(), shape.iter().product::<usize>());
    let n: usize = normalized_shape.iter().product();
    let m = x.len() / n;
    for p in [w, b].into_iter().flatten() {
        assert_eq!(p.len(), n, "weight and bias have normalized_shape");
    }
    let block = n.next_power_of_two().min(128);
    let k = module
        .kernel("layer_norm", &trt_sig(T::SIG, w.is_some(), b.is_some(), diff_sq, block))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = TrtOut { y: nan::<T>(m * n), mean: vec![f32::NAN; m], rstd: vec![f32::NAN; m] };
    k.launch(
        m as u32,
        &lnc::args![
            x,
            &mut out.y,
            w.unwrap_or(x),
            b.unwrap_or(x),
            &mut out.mean,
            &mut out.rstd,
            n as i32,
            n as i32,
            eps
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    out
}

const ALL_AFFINE: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

fn check_trt<T: Store>(shape: &[usize], normalized_shape: &[usize]) {
    let module = load(TRT);
    let mut rng = seeded();
    let total: usize = shape.iter().product();
    let n: usize = normalized_shape.iter().product();
    let x: Vec<T> = round(&randn(&mut rng, total, 0.8, 1.3));
    let w: Vec<T> = round(&randn(&mut rng, n, 1.0, 0.3));
    let b: Vec<T> = round(&randn(&mut rng, n, 0.0, 0.5));
    let (xf, wf, bf) = (widen(&x), widen(&w), widen(&b));
    for (has_w, has_b) in ALL_AFFINE {
        let (wo, bo) = (has_w.then_some(&w[..]), has_b.then_some(&b[..]));
        let (wr, br) = (has_w.then_some(&wf[..]), has_b.then_some(&bf[..]));
        let (ry, rmean, rvar) = ln_ref(&xf, wr, br, n, TRT_EPS as f64);
        let rrstd: Vec<f64> = rvar.iter().map(|v| 1.0 / (v + TRT_EPS as f64).sqrt()).collect();
        for diff_sq in [false, true] {
            let what = |v: &str| {
                format!(
                    "{v} ({} {shape:?} over {normalized_shape:?}, weight {has_w}, bias {has_b}, \
                     diff of squares {diff_sq})",
                    T::SIG
                )
            };
            let out = trt_layer_norm(&module, &x, shape, normalized_shape, wo, bo, TRT_EPS, diff_sq);
            // Well-conditioned rows (κ = E[x²]/var ≈ 1.4): both forms within 1e-5.
            let tol = y_tol(&xf, wr, br, n, TRT_EPS as f64, 1e-5, T::U);
            assert_within(&what("y"), &widen(&out.y), &ry, &tol);
            assert_close(&what("mean"), &out.mean, &rmean, 1e-5, 1e-5);
            assert_close(&what("rstd"), &out.rstd, &rrstd, 0.0, 1e-5);
        }
    }
}

#[test]
fn trt_fp32_normalized_over_one_two_and_three_axes() {
    // x [4, 6, 7, 9]: normalized_shape (9,): 168 rows of 9; (7, 9): 24 rows of 63;
    // (6, 7, 9): 4 rows of 378 (three blocks of 128 and a tail).
    for normalized in [&[9usize][..], &[7, 9], &[6, 7, 9]] {
        check_trt::<f32>(&[4, 6, 7, 9], normalized);
    }
    // A single row of one element: var 0, y = bias.
    check_trt::<f32>(&[1], &[1]);
}

#[test]
fn trt_fp16_and_bf16_normalized_over_two_axes() {
    check_trt::<f16>(&[4, 6, 7, 9], &[7, 9]);
    check_trt::<bf16>(&[4, 6, 7, 9], &[7, 9]);
    check_trt::<bf16>(&[3, 1003], &[1003]);
}

#[test]
fn trt_multi_axis_equals_flattened_rows() {
    // normalized_shape (7, 9) of [4, 6, 7, 9] is normalized_shape (63,) of [24, 63].
    let module = load(TRT);
    let mut rng = seeded();
    let x = randn(&mut rng, 4 * 6 * 7 * 9, -1.0, 2.0);
    let w = randn(&mut rng, 63, 1.0, 0.3);
    let a = trt_layer_norm(&module, &x, &[4, 6, 7, 9], &[7, 9], Some(&w), None, TRT_EPS, false);
    let b = trt_layer_norm(&module, &x, &[24, 63], &[63], Some(&w), None, TRT_EPS, false);
    assert_eq!(a.y, b.y);
    assert_eq!(a.rstd, b.rstd);
}

/// Relative error of the variance the kernel used, recovered from its rstd.
fn var_rel_err(rstd: &[f32], var: &[f64], eps: f64) -> Vec<f64> {
    rstd.iter().zip(var).map(|(&r, &v)| ((1.0 / (r as f64).powi(2) - eps) - v).abs() / v).collect()
}

#[test]
fn trt_diff_of_squares_loses_accuracy_when_the_mean_dominates() {
    let module = load(TRT);
    let mut rng = seeded();
    let (m, n) = (32usize, 1003usize);
    let eps = TRT_EPS as f64;

    // x = 1000 + 0.01·randn (std of randn ≈ 0.98): E[x²] ≈ 1e6 while var ≈ 1e-4.
    // Diff of squares: Σx²/N and mean² are fp32 numbers in [2^19, 2^20), so their
    // difference is a multiple of 2^-4 = 0.0625: either 0 (clamped; rstd = 1/sqrt(eps)) or
    // at least 600 times the variance. Its relative error is therefore at least 1 on every
    // row (measured on the fixed seed: min 1.0000000080 over the rows).
    // Two-pass: the mean is off by about an ulp of 1000 (6e-5, a fraction 6e-3 of the
    // std), which enters the variance squared: 3.7e-5 relative (measured max over the
    // rows). Thresholds: two-pass < 5e-4 (a mean off by 2 ulps: 1.5e-4, with margin),
    // diff of squares > 0.5 on every row.
    let x = randn(&mut rng, m * n, 1000.0, 0.01);
    let (ry, _, rvar) = ln_ref(&x, None, None, n, eps);
    let two = trt_layer_norm(&module, &x, &[m, n], &[n], None, None, TRT_EPS, false);
    let one = trt_layer_norm(&module, &x, &[m, n], &[n], None, None, TRT_EPS, true);
    let e2 = var_rel_err(&two.rstd, &rvar, eps);
    let e1 = var_rel_err(&one.rstd, &rvar, eps);
    let max2 = e2.iter().copied().fold(0.0, f64::max);
    let min1 = e1.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!("large mean: two-pass var rel err max {max2:e}; diff of squares min {min1:e}");
    assert!(max2 < 5e-4, "two-pass variance off by {max2:e}");
    assert!(min1 > 0.5, "diff-of-squares variance only off by {min1:e} on some row");
    // y: the two-pass mean's error (an ulp of 1000) times rstd (≈ 100) is ~6e-3 absolute
    // (measured max 5.9e-3; threshold 3e-2, two ulps with margin); the diff-of-squares y
    // is scaled by a wrong rstd (measured max error 6.9; threshold > 0.5).
    let y2 = two.y.iter().zip(&ry).map(|(&g, &w)| (g as f64 - w).abs()).fold(0.0, f64::max);
    let y1 = one.y.iter().zip(&ry).map(|(&g, &w)| (g as f64 - w).abs()).fold(0.0, f64::max);
    eprintln!("large mean: two-pass y max abs err {y2:e}; diff of squares {y1:e}");
    assert!(y2 < 3e-2, "two-pass y off by {y2:e}");
    assert!(y1 > 0.5, "diff-of-squares y only off by {y1:e}");

    // On well-conditioned data (mean 0.5, spread 1) both agree with each other and with
    // float64 within 1e-5 relative.
    let x = randn(&mut rng, m * n, 0.5, 1.0);
    let (_, _, rvar) = ln_ref(&x, None, None, n, eps);
    let two = trt_layer_norm(&module, &x, &[m, n], &[n], None, None, TRT_EPS, false);
    let one = trt_layer_norm(&module, &x, &[m, n], &[n], None, None, TRT_EPS, true);
    for (name, out) in [("two-pass", &two), ("diff of squares", &one)] {
        let e = var_rel_err(&out.rstd, &rvar, eps).into_iter().fold(0.0, f64::max);
        assert!(e < 1e-5, "{name}: variance off by {e:e} on well-conditioned data");
    }
    assert_close(
        "y, one pass vs two",
        &one.y,
        &two.y.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        1e-5,
        1e-5,
    );
}

// ---------------------------------------------------------------------------------------
// JIT against the block-IR interpreter
// ---------------------------------------------------------------------------------------

/// fp32 sums whose order may differ between the JIT and the interpreter.
const SUMS: Check = Check::Close { atol: 1e-5, rtol: 1e-5 };

fn ttnn_diff<T: Store>(rng: &mut StdRng) {
    let module = load(TTNN);
    let (m, n, block) = (5usize, 45usize, 16usize);
    let [x, w, b] = ttnn_data::<T>(rng, m, n);
    let bounds = [0usize, 13, 45];
    let d = bounds.len() - 1;
    let mut gathered = vec![f32::NAN; m * d * 2];
    for k in 0..d {
        let nd = bounds[k + 1] - bounds[k];
        // The shard read in place: pointer at its first column, row stride n.
        let case = Case::new(
            "pre_all_gather",
            &pre_sig(T::SIG, block),
            m as u32,
            vec![
                A::Buf(T::data(x.clone()), bounds[k]),
                vec![f32::NAN; m * 2].into(),
                (n as i32).into(),
                (nd as i32).into(),
            ],
        )
        .check(1, SUMS);
        let out = diff(&module, &case);
        let stats = out[1].data().to_f64s();
        for r in 0..m {
            gathered[(r * d + k) * 2] = stats[r * 2] as f32;
            gathered[(r * d + k) * 2 + 1] = stats[r * 2 + 1] as f32;
        }
    }
    for (has_w, has_b) in TTNN_AFFINE {
        for k in 0..d {
            let (c0, c1) = (bounds[k], bounds[k + 1]);
            let nd = c1 - c0;
            let case = Case::new(
                "post_all_gather",
                &post_sig(T::SIG, has_w, has_b, block),
                m as u32,
                vec![
                    A::Buf(T::data(columns(&x, n, c0, c1)), 0),
                    A::Buf(T::data(nan::<T>(m * nd)), 0),
                    gathered.clone().into(),
                    A::Buf(T::data(w[c0..c1].to_vec()), 0),
                    A::Buf(T::data(b[c0..c1].to_vec()), 0),
                    (nd as i32).into(),
                    (nd as i32).into(),
                    (nd as i32).into(),
                    (n as i32).into(),
                    (d as i32).into(),
                    TTNN_EPS.into(),
                ],
            );
            diff(&module, &case);
        }
    }
}

#[test]
fn ttnn_kernels_jit_equals_interpreter() {
    let mut rng = seeded();
    ttnn_diff::<f32>(&mut rng);
    ttnn_diff::<bf16>(&mut rng);
    ttnn_diff::<f16>(&mut rng);
}

fn trt_diff<T: Store>(rng: &mut StdRng) {
    let module = load(TRT);
    // Rows of 63 in blocks of 16: four steps, the last one partial.
    let (m, n, block) = (6usize, 63usize, 16usize);
    let w: Vec<T> = round(&randn(rng, n, 1.0, 0.3));
    let b: Vec<T> = round(&randn(rng, n, 0.0, 0.5));
    // Random rows: the JIT sums in lanes, the interpreter in another order, so mean and
    // rstd may differ by a few fp32 ulps and y by the same relative to its magnitudes
    // (seen: 10 ulps of a y of 0.07, 4.5e-8 absolute); y in half precision may then round
    // the other way (2 units of T).
    let random: Vec<T> = round(&randn(rng, m * n, 0.8, 1.3));
    let close = Check::Close { atol: 1e-5, rtol: 1e-5 + 2.0 * T::U };
    // Rows of 16 + k/4 (k in -8..8): every x, x² and every partial sum of them is exact in
    // fp32, so the one-pass sums cannot depend on the order: mean, rstd and y must come
    // out bit for bit the same with USE_DIFF_OF_SQUARES, though the mean is large against
    // the spread (κ = E[x²]/var ≈ 170). The two-pass Σ(x - mean)² is not exact (the mean
    // is s/63): close as above.
    let grid: Vec<T> =
        (0..m * n).map(|_| T::from_f32(16.0 + rng.random_range(-8i32..=8) as f32 / 4.0)).collect();
    for (data, strict) in [(&random, false), (&grid, true)] {
        for (has_w, has_b) in ALL_AFFINE {
            for diff_sq in [false, true] {
                let check = if strict && diff_sq { Check::Exact } else { close };
                let case = Case::new(
                    "layer_norm",
                    &trt_sig(T::SIG, has_w, has_b, diff_sq, block),
                    m as u32,
                    vec![
                        A::Buf(T::data(data.clone()), 0),
                        A::Buf(T::data(nan::<T>(m * n)), 0),
                        A::Buf(T::data(w.clone()), 0),
                        A::Buf(T::data(b.clone()), 0),
                        vec![f32::NAN; m].into(),
                        vec![f32::NAN; m].into(),
                        (n as i32).into(),
                        (n as i32).into(),
                        TRT_EPS.into(),
                    ],
                )
                .check(1, check)
                .check(4, if strict { Check::Exact } else { close })
                .check(5, check);
                diff(&module, &case);
            }
        }
    }
}

#[test]
fn trt_kernel_jit_equals_interpreter() {
    let mut rng = seeded();
    trt_diff::<f32>(&mut rng);
    trt_diff::<f16>(&mut rng);
    trt_diff::<bf16>(&mut rng);
}

// ---------------------------------------------------------------------------------------
// Snapshots of the block IR after optimization and of the loop IR
// ---------------------------------------------------------------------------------------

fn dump(path: &str, kernel: &str, sig: &str, stage: Stage) -> String {
    // The 8-lane tiles of hosts with AVX2, on every host: the same text everywhere.
    let jit = lnc::Jit::with_options(lnc::CompileOptions { verify: true, lanes: 8, ..Default::default() });
    let module = jit.load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let req = DumpRequest { stages: vec![stage], checked: true, ..Default::default() };
    let dumps = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dumps.len(), 1);
    dumps.into_iter().next().map(|d| d.text).unwrap_or_default()
}

#[test]
fn snapshot_ttnn_pre_all_gather() {
    let sig = pre_sig("bf16", 128);
    insta::assert_snapshot!("ttnn_pre_all_gather_opt", dump(TTNN, "pre_all_gather", &sig, Stage::Opt));
    insta::assert_snapshot!("ttnn_pre_all_gather_lir", dump(TTNN, "pre_all_gather", &sig, Stage::Lir));
}

#[test]
fn snapshot_ttnn_post_all_gather() {
    let sig = post_sig("bf16", true, true, 128);
    insta::assert_snapshot!("ttnn_post_all_gather_opt", dump(TTNN, "post_all_gather", &sig, Stage::Opt));
    insta::assert_snapshot!("ttnn_post_all_gather_lir", dump(TTNN, "post_all_gather", &sig, Stage::Lir));
}

/// ttnn's post-all-gather in bf16 with 8-lane tiles (an AVX2-only host's) has its 256-bit
/// loops and gives the bits of 128-bit code. (While its bf16 stores went through the row
/// helper, Cranelift's allocator spilled a broadcast it held across a loop and reloaded 16
/// bytes of it, so lnc-clif's `widen` refused the first compile, and the second, with the
/// broadcasts inside the loops, `CodegenOptions::bcast_in_loop`, had them; since the loops
/// round their bf16 stores themselves, the first compile has them. Either way the listing
/// says which: `tests/wide.rs` covers the second path.)
#[test]
fn broadcasts_inside_the_loops_give_ttnn_post_all_gather_its_256_bit_loops() {
    let module = |wide| {
        lnc::Jit::with_options(lnc::CompileOptions { lanes: 8, wide, ..Default::default() })
            .load(TTNN)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (wide, narrow) = (module(true), module(false));
    for checked in [true, false] {
        let req = DumpRequest { stages: vec![Stage::Asm], checked, ..Default::default() };
        let sig = post_sig("bf16", true, true, 128);
        let asm = wide.dump("post_all_gather", &sig, &req).unwrap_or_else(|e| panic!("{e}"));
        let asm = &asm[0].text;
        let tail = asm.lines().rev().take(4).collect::<Vec<_>>().join("\n");
        let widened = asm.contains("instructions of the 256-bit loops above");
        assert_eq!(widened, lnc::computes_wide(), "checked {checked}: {tail}");
        if asm.contains("; 256-bit loops refused") {
            assert!(asm.contains("refused, the kernel compiled again with its broadcasts"), "{tail}");
        }
    }
    let mut rng = seeded();
    for (m, n, d) in [(7usize, 1000usize, 3usize), (5, 300, 2), (3, 77, 1)] {
        let [x, w, b] = ttnn_data::<bf16>(&mut rng, m, n);
        let bounds = even_bounds(n, d);
        let run = |module| ttnn_in_place(module, &x, Some(&w), Some(&b), n, &bounds, TTNN_EPS, 128);
        let (got, want) = (run(&wide), run(&narrow));
        let bits = |v: &[bf16]| v.iter().map(|e| e.to_bits()).collect::<Vec<u16>>();
        assert_eq!(bits(&got), bits(&want), "{m}x{n} in {d} shards");
        assert!(got.iter().all(|e| e.is_finite()), "{m}x{n}: unwritten or non-finite outputs");
    }
}

#[test]
fn snapshot_trt_layer_norm() {
    for diff_sq in [false, true] {
        let sig = trt_sig("fp32", true, true, diff_sq, 128);
        let form = if diff_sq { "diff_of_squares" } else { "two_pass" };
        insta::assert_snapshot!(
            format!("trt_layer_norm_{form}_opt"),
            dump(TRT, "layer_norm", &sig, Stage::Opt)
        );
        insta::assert_snapshot!(
            format!("trt_layer_norm_{form}_lir"),
            dump(TRT, "layer_norm", &sig, Stage::Lir)
        );
    }
}
