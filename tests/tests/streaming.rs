//! Streaming (non-temporal) stores: the same results whether the stores bypass the caches
//! or not, aligned or not, forward and backward, on sizes that are not multiples of the
//! vector or the block.

mod common;

use common::*;

const FWD: &str = "_layer_norm_fwd_fused";

fn module_with(threshold: u64) -> lnc::Module {
    let opts = lnc::CompileOptions { stream_threshold: threshold, ..Default::default() };
    seed_module(&lnc::Jit::with_options(opts))
}

/// Runs the forward with `Y` starting `shift` elements into its buffer; returns y, mean,
/// rstd (y without the shift), checking that the elements before it keep their poison.
#[allow(clippy::too_many_arguments)]
fn forward(
    module: &lnc::Module,
    streams: bool,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    m: usize,
    shift: usize,
    checked: bool,
) -> Vec<Vec<f32>> {
    let n = w.len();
    let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two());
    let k = module.kernel(FWD, &sig).unwrap_or_else(|e| panic!("{e}"));
    // The steady loop of a pass covers two vectors a step: rows of 8 elements or more.
    let streams = streams && n >= 8;
    assert_eq!(k.streaming_stores().streamed > 0, streams, "{n}: {:?}", k.streaming_stores());
    assert_eq!(k.streaming_stores().skipped, 0);
    assert_eq!(x.len(), m * n);
    let (y, mean, rstd) = run_forward(&k, x, w, b, shift, checked);
    vec![y, mean, rstd]
}

#[test]
fn forward_streams_the_same_results_as_cached_stores() {
    // Threshold 0: every aligned launch streams; u64::MAX: none does.
    let (streaming, cached) = (module_with(0), module_with(u64::MAX));
    let mut rng = rng();
    for (m, n) in [(37usize, 1000usize), (5, 4097), (64, 1024), (3, 61), (2, 8)] {
        let x = randn(&mut rng, m * n, -2.3, 0.5);
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let (ry, rmean, rrstd) = layer_norm_ref(&x, &w, &b, n, 1e-5);
        let want = forward(&cached, false, &x, &w, &b, m, 0, true);
        // Shifts 1-3 leave y misaligned: the cached copy of the loop must run instead.
        for shift in 0..4 {
            for checked in [true, false] {
                let got = forward(&streaming, true, &x, &w, &b, m, shift, checked);
                let what = format!("{m}x{n}, y shifted by {shift}, checked {checked}");
                assert_close(&format!("y ({what})"), &got[0], &ry, 1e-5, 1e-5);
                assert_close(&format!("mean ({what})"), &got[1], &rmean, 1e-5, 1e-6);
                assert_close(&format!("rstd ({what})"), &got[2], &rrstd, 1e-5, 1e-5);
                for (k, (g, c)) in got.iter().zip(&want).enumerate() {
                    let same = g.iter().zip(c).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "output {k} differs from the cached stores' ({what})");
                }
            }
        }
    }
}

#[test]
fn the_default_threshold_keeps_small_launches_cached_and_streams_large_ones() {
    // Same bits either way; here only that both regimes run and agree with float64.
    let module = seed_module(&lnc::Jit::new());
    let mut rng = rng();
    let n = 2000usize;
    let rows_for_threshold = (lnc_clif::default_stream_threshold() / (n as u64 * 4) + 2) as usize;
    for m in [3usize, rows_for_threshold] {
        let x = randn(&mut rng, m * n, 0.5, 2.0);
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let got = forward(&module, true, &x, &w, &b, m, 0, true);
        let (ry, _, _) = layer_norm_ref(&x, &w, &b, n, 1e-5);
        assert_close(&format!("y ({m}x{n})"), &got[0], &ry, 1e-5, 1e-5);
    }
}

#[test]
fn backward_dx_streams_the_same_results() {
    let (streaming, cached) = (module_with(0), module_with(u64::MAX));
    let mut rng = rng();
    let (m, n, group) = (67usize, 1001usize, 8usize);
    let sig = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,8,1024";
    let x = randn(&mut rng, m * n, -2.3, 0.5);
    let dy = randn(&mut rng, m * n, 0.0, 0.1);
    let w = randn(&mut rng, n, 1.0, 0.3);
    let b = randn(&mut rng, n, 0.0, 0.5);
    let (_, mean, rstd) = layer_norm_ref(&x, &w, &b, n, 1e-5);
    let (mean, rstd): (Vec<f32>, Vec<f32>) =
        (mean.iter().map(|&v| v as f32).collect(), rstd.iter().map(|&v| v as f32).collect());
    let run = |module: &lnc::Module| {
        let k = module.kernel("_layer_norm_bwd_dx_fused", sig).unwrap_or_else(|e| panic!("{e}"));
        let mut dx = vec![f32::NAN; m * n];
        let (mut dw, mut db) = (vec![f32::NAN; group * n], vec![f32::NAN; group * n]);
        let mut locks = vec![0i32; 2 * group];
        k.launch(
            m as u32,
            &lnc::args![
                &mut dx, &dy, &mut dw, &mut db, &x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32,
                1e-5f32
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (k.streaming_stores().streamed, dx)
    };
    let ((streamed, dx), (none, want)) = (run(&streaming), run(&cached));
    assert!(streamed > 0 && none == 0, "dx streams only when allowed: {streamed}, {none}");
    assert!(dx.iter().all(|v| v.is_finite()), "every dx element written");
    // The dx of every row depends on no other row: equal bits, whatever the lock order.
    assert!(dx.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "dx differs");
}
