//! Rows whose length is not a multiple of a 16-lane tile end in their last whole tile
//! (lnc-tile's `overlap`): the elements the steady loop left run again with the ones before
//! them, sums counting each once. The seed forward in fp16 and bf16 on every N from 1 to
//! 70 and on long rows, checked and unchecked, against float64, outputs poisoned; and the
//! extremes of a row, whose overlapping lanes count twice.

mod common;

use common::*;
use half::{bf16, f16};

/// With `stream_threshold` 0 every launch streams its output rows: the stores' pass then
/// ends in its scalar tail, not in the tile (its cached stores would land in streamed
/// lines), while the sums' passes keep their tiles.
fn seed_module_with_16_lanes(stream_threshold: u64) -> lnc::Module {
    seed_module(&lnc::Jit::with_options(lnc::CompileOptions {
        lanes: 16,
        stream_threshold,
        ..Default::default()
    }))
}

fn fwd_signature(t: &str, block: usize) -> String {
    format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}")
}

/// The row lengths: every one up to 70 (shorter than a tile, a tile, a tile and a few
/// elements, …) and long rows ending 1, 8 and 15 elements past a tile.
fn lengths() -> impl Iterator<Item = usize> {
    (1..=70).chain([1000, 1009, 1023])
}

fn forward_matches_float64<T: Float>(atol: f64, rtol: f64) {
    for threshold in [lnc::CompileOptions::default().stream_threshold, 0] {
        forward_matches_float64_with::<T>(atol, rtol, threshold);
    }
}

fn forward_matches_float64_with<T: Float>(atol: f64, rtol: f64, stream_threshold: u64) {
    let module = seed_module_with_16_lanes(stream_threshold);
    let mut r = rng();
    // The steady loops of these rows end before their last element: the tail tile runs.
    let lir = module
        .dump(
            "_layer_norm_fwd_fused",
            &fwd_signature(T::SIG, 1024),
            &lnc::DumpRequest { stages: vec![lnc::Stage::Lir], ..Default::default() },
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
        .text;
    // On a host without AVX-512, 16 lanes are 8 (`CompileOptions::lanes`), and rows end
    // in their scalar tails instead: the rows below still match.
    if lnc::computes_zmm() {
        assert!(lir.contains("cmp ge") && lir.contains("i1x16"), "{lir}");
    } else {
        assert!(lir.contains("fp32x8") && !lir.contains("x16"), "{lir}");
    }
    for n in lengths() {
        let block = n.next_power_of_two().max(16);
        let k = module
            .kernel("_layer_norm_fwd_fused", &fwd_signature(T::SIG, block))
            .unwrap_or_else(|e| panic!("{e}"));
        let rows = 5;
        let round = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(T::from_f32).collect() };
        let x = round(randn(&mut r, rows * n, -2.3, 0.5));
        let w = round(randn(&mut r, n, 1.0, 0.3));
        let b = round(randn(&mut r, n, 0.0, 0.5));
        let f32s = |v: &[T]| -> Vec<f32> { v.iter().map(|v| v.to_f32()).collect() };
        let (want, mean, rstd) = layer_norm_ref(&f32s(&x), &f32s(&w), &f32s(&b), n, 1e-5);
        for (shift, checked) in [(0, true), (1, false), (3, true)] {
            let what = format!(
                "{} N = {n}, shift {shift}, checked {checked}, stream threshold {stream_threshold}",
                T::SIG
            );
            let (y, m, s) = run_forward(&k, &x, &w, &b, shift, checked);
            assert_close(&format!("{what}: y"), &f32s(&y), &want, atol, rtol);
            assert_close(&format!("{what}: mean"), &m, &mean, 1e-5, 1e-5);
            assert_close(&format!("{what}: rstd"), &s, &rstd, 1e-4, 1e-4);
        }
    }
}

#[test]
fn fp16_rows_of_every_length_match_float64() {
    forward_matches_float64::<f16>(2e-2, 1e-2);
}

#[test]
fn bf16_rows_of_every_length_match_float64() {
    forward_matches_float64::<bf16>(1.5e-1, 3e-2);
}

const EXTREMES: &str = r#"import triton
import triton.language as tl


@triton.jit
def extremes(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
    lo = tl.load(X + row * N + cols, mask=cols < N, other=float("inf")).to(tl.float32)
    tl.store(Y + 3 * row, tl.max(x, axis=0))
    tl.store(Y + 3 * row + 1, tl.min(lo, axis=0))
    tl.store(Y + 3 * row + 2, tl.sum(tl.where(cols < N, x, 0.0), axis=0))
"#;

/// The largest and smallest elements placed in the lanes the tail tile runs twice, and a
/// sum of the same row, which must count them once.
#[test]
fn extremes_and_sums_in_the_overlap_count_once() {
    let m = lnc::Jit::with_options(lnc::CompileOptions { lanes: 16, ..Default::default() })
        .module("extremes.py", EXTREMES)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut r = rng();
    for n in lengths() {
        let block = n.next_power_of_two().max(16);
        let k = m.kernel("extremes", &format!("*fp16,*fp32,i32,{block}")).unwrap_or_else(|e| panic!("{e}"));
        let rows = 4;
        let mut x: Vec<f32> = randn(&mut r, rows * n, 0.0, 1.0);
        for row in 0..rows {
            // The last whole tile starts at n - 16: its first lanes were the steady loop's.
            if n > 17 {
                x[row * n + n - 16 + row] = 40.0 + row as f32;
                x[row * n + n - 15 + row] = -40.0 - row as f32;
            }
        }
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let mut y = vec![f32::NAN; 3 * rows];
        k.launch(rows as u32, &lnc::args![&xh, &mut y, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        let mut want = Vec::new();
        for row in xh.chunks(n) {
            let v: Vec<f64> = row.iter().map(|h| h.to_f64()).collect();
            want.push(v.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
            want.push(v.iter().cloned().fold(f64::INFINITY, f64::min));
            want.push(v.iter().sum());
        }
        assert_close(&format!("N = {n}"), &y, &want, 1e-4, 1e-5);
    }
}
