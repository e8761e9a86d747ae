//! The JIT against the block-IR reference interpreter: same kernel, same inputs, the
//! interpreter running the front end's block IR (before any optimization), the JIT running
//! the whole pipeline.

mod common;

use common::*;
use lnc_bir::interp::{self, ArgValue, Buffer};

#[test]
fn forward_layer_norm_jit_equals_interpreter() {
    let jit = common::diff::streaming_jit();
    let module = seed_module(&jit);
    let mut rng = rng();
    for (m, n) in [(1usize, 1usize), (3, 17), (151, 1000), (64, 1024), (7, 4097)] {
        let block = n.next_power_of_two();
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
        let k = module.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));
        let bir = module.block_ir("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));

        let x = randn(&mut rng, m * n, -2.3, 0.5);
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let eps = 1e-5f32;

        let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
        k.launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, eps])
            .unwrap_or_else(|e| panic!("{e}"));

        let mut bufs = vec![
            Buffer::from_f32(&x),
            Buffer::from_f32(&vec![f32::NAN; m * n]),
            Buffer::from_f32(&w),
            Buffer::from_f32(&b),
            Buffer::from_f32(&vec![f32::NAN; m]),
            Buffer::from_f32(&vec![f32::NAN; m]),
        ];
        let mut args: Vec<ArgValue> = (0..6).map(|i| ArgValue::Ptr { buffer: i, offset: 0 }).collect();
        args.extend([
            ArgValue::Int(n as i64),
            ArgValue::Int(n as i64),
            ArgValue::Float(eps as f64),
            ArgValue::Int(0),
        ]);
        interp::run_grid(&bir, [m as u32, 1, 1], &args, &mut bufs).unwrap_or_else(|e| panic!("{e}"));

        // Summation order differs (the JIT sums in several lanes), so agreement is up to
        // float32 rounding of a sum of n terms.
        let tol = 2e-6 * (n as f64).sqrt().max(1.0);
        for (what, got, want) in [
            ("y", &y, bufs[1].to_f32()),
            ("mean", &mean, bufs[4].to_f32()),
            ("rstd", &rstd, bufs[5].to_f32()),
        ] {
            let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
            assert_close(&format!("{what} ({m}x{n}) JIT vs interpreter"), got, &want, tol, tol);
        }
    }
}

#[test]
fn a_sum_of_negative_zeros_is_negative_zero() {
    // The accumulators start at -0.0, the identity of IEEE addition: +0.0 would turn a
    // sum of -0.0 into +0.0, which `1 / sum` or `rsqrt` would then show.
    let src = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, Out, N, BLOCK: tl.constexpr):\n    \
               offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs, mask=offs < N, other=-0.0)\n    \
               tl.store(Out, tl.sum(x, axis=0))\n";
    let jit = lnc::Jit::new();
    let module = jit.module("negzero.py", src).unwrap();
    for (n, block) in [(1usize, 1u32), (2, 2), (4, 4), (5, 16), (16, 16), (37, 64)] {
        let k = module.kernel("k", &format!("*fp32,*fp32,i32,{block}")).unwrap();
        let x = vec![-0.0f32; n];
        let mut out = vec![f32::NAN; 1];
        k.launch(1, &lnc::args![&x, &mut out, n as i32]).unwrap();
        assert_eq!(out[0].to_bits(), (-0.0f32).to_bits(), "n = {n}, BLOCK = {block}: {}", out[0]);
    }
}
