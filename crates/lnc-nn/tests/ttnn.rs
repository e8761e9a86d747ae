//! Tenstorrent ttnn's distributed layer norm through `Nn::layer_norm_pre_all_gather`,
//! `lnc_nn::all_gather_stats` and `Nn::layer_norm_post_all_gather`: the last axis split
//! into D ∈ {1, 2, 4, 8} shards of unequal widths, one launch per shard and step, the
//! reassembled output against the unsharded layer norm and a float64 reference, in fp32,
//! fp16 and bf16.

mod common;

use common::*;
use half::{bf16, f16};
use lnc_nn::{Nn, TTNN_EPS, all_gather_stats};

/// Column bounds of `d` shards of `n` columns with widths proportional to 1, 2, …, d:
/// unequal whenever d > 1 (and none empty for n ≥ d(d+1)/2).
fn unequal_bounds(n: usize, d: usize) -> Vec<usize> {
    let total = d * (d + 1) / 2;
    (0..=d).map(|k| n * (k * (k + 1) / 2) / total).collect()
}

/// Columns `c0..c1` of rows of `n`, as a dense shard.
fn columns<T: Copy>(x: &[T], n: usize, c0: usize, c1: usize) -> Vec<T> {
    x.chunks(n).flat_map(|row| row[c0..c1].to_vec()).collect()
}

/// The distributed flow, the host playing D devices: pre_all_gather on every shard, the
/// all-gather, post_all_gather on every shard, then the shards of y reassembled.
fn sharded<T: Num>(nn: &Nn, x: &[T], n: usize, bounds: &[usize], w: Option<&[T]>, b: Option<&[T]>) -> Vec<T> {
    let shards: Vec<Vec<T>> = bounds.windows(2).map(|c| columns(x, n, c[0], c[1])).collect();
    let stats: Vec<Vec<f32>> = shards
        .iter()
        .zip(bounds.windows(2))
        .map(|(s, c)| nn.layer_norm_pre_all_gather(s, c[1] - c[0]).unwrap_or_else(|e| panic!("pre: {e}")))
        .collect();
    let gathered = all_gather_stats(&stats).unwrap_or_else(|e| panic!("all-gather: {e}"));
    let mut y = vec![T::from_f64(f64::NAN); x.len()];
    for (s, c) in shards.iter().zip(bounds.windows(2)) {
        let (c0, c1) = (c[0], c[1]);
        let ys = nn
            .layer_norm_post_all_gather(
                s,
                c1 - c0,
                &gathered,
                n,
                w.map(|w| &w[c0..c1]),
                b.map(|b| &b[c0..c1]),
                TTNN_EPS,
            )
            .unwrap_or_else(|e| panic!("post, shard {c0}..{c1}: {e}"));
        for (row, part) in y.chunks_mut(n).zip(ys.chunks(c1 - c0)) {
            row[c0..c1].copy_from_slice(part);
        }
    }
    y
}

fn check_sharded<T: Num>(seed: u64, rows: usize, n: usize) {
    let nn = nn();
    let mut rng = seeded(seed);
    let x: Vec<T> = randn(&mut rng, rows * n, -2.3, 0.5);
    let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3);
    let b: Vec<T> = randn(&mut rng, n, 0.0, 0.5);
    let (xf, wf, bf) = (wide(&x), wide(&w), wide(&b));
    // The unsharded layer norm (two-pass statistics), with the same weight and bias.
    let unsharded = nn.layer_norm(&x, n, &w, &b, TTNN_EPS).unwrap_or_else(|e| panic!("{e}"));
    for (has_w, has_b) in [(false, false), (true, false), (true, true)] {
        let (wo, bo) = (has_w.then_some(&w[..]), has_b.then_some(&b[..]));
        let r = ln_ref(&xf, n, has_w.then_some(&wf[..]), has_b.then_some(&bf[..]), TTNN_EPS as f64);
        for d in [1, 2, 4, 8] {
            let bounds = unequal_bounds(n, d);
            let what = format!("{} {rows}x{n} in shards {bounds:?}, weight {has_w}, bias {has_b}", T::SIG);
            let y = sharded(&nn, &x, n, &bounds, wo, bo);
            // E[x²] - E[x]² from gathered fp32 sums loses about κ = E[x²]/var ≈ 22 (this
            // data) times the sums' relative error in the variance: 2e-5 of the magnitudes
            // covers it.
            assert_within(&what, &wide(&y), &r.y, |i, v| 2.0 * T::U * v.abs() + 2e-5 * (1.0 + r.scale[i]));
            if has_w && has_b {
                // Sharded equals unsharded, up to the variance's two forms and rounding to T.
                assert_within(&format!("{what} vs unsharded"), &wide(&y), &wide(&unsharded.y), |i, v| {
                    4.0 * T::U * v.abs() + 3e-5 * (1.0 + r.scale[i])
                });
            }
        }
    }
}

#[test]
fn fp32_sharded_equals_unsharded_layer_norm() {
    check_sharded::<f32>(0x77_0001, 7, 1537);
}

#[test]
fn fp16_sharded_equals_unsharded_layer_norm() {
    check_sharded::<f16>(0x77_0002, 5, 1003);
}

#[test]
fn bf16_sharded_equals_unsharded_layer_norm() {
    // bf16 is ttnn's own storage type for x, weight and bias.
    check_sharded::<bf16>(0x77_0003, 5, 1003);
}

#[test]
fn pre_all_gather_sums_match_float64() {
    let nn = nn();
    let mut rng = seeded(0x77_0004);
    // Widths below one chunk, and several chunks with a partial last one.
    for (rows, width) in [(3, 1), (9, 37), (4, 3001)] {
        let x: Vec<f32> = randn(&mut rng, rows * width, 1.7, 2.5);
        let stats = nn.layer_norm_pre_all_gather(&x, width).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stats.len(), 2 * rows);
        let xf = wide(&x);
        let s: Vec<f64> = xf.chunks(width).map(|r| r.iter().sum()).collect();
        let q: Vec<f64> = xf.chunks(width).map(|r| r.iter().map(|v| v * v).sum()).collect();
        let abs: Vec<f64> = xf.chunks(width).map(|r| r.iter().map(|v| v.abs()).sum()).collect();
        let got = wide32(&stats);
        let (gs, gq): (Vec<f64>, Vec<f64>) = got.chunks(2).map(|p| (p[0], p[1])).unzip();
        // Chains of at most width / 1024 + 1024 / 16 + 4 additions (lanes, then the
        // pairwise combination): within that many ulps of the sum of magnitudes.
        let depth = (width.div_ceil(1024) + 64 + 4).min(width) as f64;
        let u = <f32 as Num>::U;
        assert_within(&format!("Σx of {rows}x{width}"), &gs, &s, |i, _| depth * u * abs[i]);
        assert_within(&format!("Σx² of {rows}x{width}"), &gq, &q, |i, _| depth * u * q[i]);
    }
}

#[test]
fn bad_inputs_are_errors() {
    let nn = nn();
    let x = vec![0.5f32; 12];
    let stats = nn.layer_norm_pre_all_gather(&x, 4).unwrap_or_else(|e| panic!("{e}"));
    let gathered = all_gather_stats(&[&stats[..], &stats[..]]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gathered.len(), 3 * 2 * 2);
    let w = [1.0f32; 4];

    let e = shape_error(nn.layer_norm_pre_all_gather(&x, 5));
    assert!(e.contains("the shard of x has 12 elements: not rows of n = 5"), "{e}");
    let e = shape_error(nn.layer_norm_pre_all_gather(&x, 0));
    assert!(e.contains("not rows of n = 0"), "{e}");
    let e = shape_error(nn.layer_norm_post_all_gather(&x, 4, &gathered[..11], 8, None, None, TTNN_EPS));
    assert!(e.contains("stats has 11 elements"), "{e}");
    let e = shape_error(nn.layer_norm_post_all_gather(&x, 4, &[], 8, None, None, TTNN_EPS));
    assert!(e.contains("stats has 0 elements"), "{e}");
    let e = shape_error(nn.layer_norm_post_all_gather(&x, 4, &gathered, 3, None, None, TTNN_EPS));
    assert!(e.contains("cannot have a shard 4 wide"), "{e}");
    let e = shape_error(nn.layer_norm_post_all_gather(&x, 4, &gathered, 8, Some(&w[..3]), None, TTNN_EPS));
    assert!(e.contains("weight has 3 elements"), "{e}");
    let e = shape_error(nn.layer_norm_post_all_gather(&x, 4, &gathered, 8, None, Some(&w), TTNN_EPS));
    assert!(e.contains("bias only with a weight"), "{e}");

    let e = shape_error(all_gather_stats(&[&stats[..], &stats[..4]]));
    assert!(e.contains("[6, 4]"), "{e}");
    let e = shape_error(all_gather_stats::<Vec<f32>>(&[]));
    assert!(e.contains("one or more shards"), "{e}");
    let e = shape_error(all_gather_stats(&[&stats[..5]]));
    assert!(e.contains("[5]"), "{e}");
}
