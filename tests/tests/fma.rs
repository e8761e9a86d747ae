//! `tl.fma(x, y, z)` (kernels in `tests/kernels/fma.py`): `x · y + z` rounded once, bit for
//! bit against Rust's `mul_add` in fp32 and fp64 and against the fp32 `mul_add` rounded once
//! more in fp16 and bf16, on sizes that are not multiples of the block, outputs poisoned;
//! cases where the fused result differs from the product rounded then added; promotion and
//! broadcasting with scalars; located errors; and the block-IR interpreter through the
//! differential harness.

mod common;

use common::diff::{A, Case, Check, diff, load};
use common::*;
use half::{bf16, f16};
use rand::Rng;

/// Inputs whose fused and unfused results differ: `(1 + 2^-12)(1 - 2^-12) - 1` is `-2^-24`
/// exactly, while the product rounds to 1 in fp32; then random values.
fn inputs(rng: &mut impl Rng, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..n {
        if k % 5 == 0 {
            let e = 2f64.powi(-12 - (k % 3) as i32);
            x.push(1.0 + e);
            y.push(1.0 - e);
            z.push(-1.0);
        } else {
            x.push(rng.random_range(-4.0..4.0));
            y.push(rng.random_range(-4.0..4.0));
            z.push(rng.random_range(-16.0..16.0));
        }
    }
    (x, y, z)
}

#[test]
fn fma_rounds_once_in_every_float_type() {
    let module = load("fma.py");
    let mut rng = rng();
    for n in [1usize, 7, 1000, 1029] {
        let (x, y, z) = inputs(&mut rng, n);
        let grid = n.div_ceil(256) as u32;
        // fp32: f32::mul_add, and at least one input where it is not x * y + z.
        let (xf, yf, zf): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            x.iter().map(|&v| v as f32).collect(),
            y.iter().map(|&v| v as f32).collect(),
            z.iter().map(|&v| v as f32).collect(),
        );
        let mut out = vec![f32::NAN; n + 3];
        let k =
            module.kernel("fma_blocks", "*fp32,*fp32,*fp32,*fp32,i32,256").unwrap_or_else(|e| panic!("{e}"));
        k.launch(grid, &lnc::args![&xf, &yf, &zf, &mut out, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        let mut differs = 0;
        for i in 0..n {
            let want = xf[i].mul_add(yf[i], zf[i]);
            assert_eq!(out[i].to_bits(), want.to_bits(), "fp32 n = {n}, element {i}");
            differs += (want != xf[i] * yf[i] + zf[i]) as usize;
        }
        assert!(differs > 0 || n < 5, "no input tells fused from unfused");
        assert!(out[n..].iter().all(|v| v.is_nan()), "written past n");
        // fp64: f64::mul_add.
        let mut out = vec![f64::NAN; n];
        let k =
            module.kernel("fma_blocks", "*fp64,*fp64,*fp64,*fp64,i32,256").unwrap_or_else(|e| panic!("{e}"));
        k.launch(grid, &lnc::args![&x, &y, &z, &mut out, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..n {
            assert_eq!(out[i].to_bits(), x[i].mul_add(y[i], z[i]).to_bits(), "fp64 n = {n}, element {i}");
        }
        // fp16 and bf16: the fp32 fma of the half values, rounded to the half type.
        let (xh, yh, zh): (Vec<f16>, Vec<f16>, Vec<f16>) = (
            x.iter().map(|&v| f16::from_f64(v)).collect(),
            y.iter().map(|&v| f16::from_f64(v)).collect(),
            z.iter().map(|&v| f16::from_f64(v)).collect(),
        );
        let mut out = vec![f16::NAN; n];
        let k =
            module.kernel("fma_blocks", "*fp16,*fp16,*fp16,*fp16,i32,256").unwrap_or_else(|e| panic!("{e}"));
        k.launch(grid, &lnc::args![&xh, &yh, &zh, &mut out, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..n {
            let want = f16::from_f32(xh[i].to_f32().mul_add(yh[i].to_f32(), zh[i].to_f32()));
            assert_eq!(out[i].to_bits(), want.to_bits(), "fp16 n = {n}, element {i}");
        }
        let (xb, yb, zb): (Vec<bf16>, Vec<bf16>, Vec<bf16>) = (
            x.iter().map(|&v| bf16::from_f64(v)).collect(),
            y.iter().map(|&v| bf16::from_f64(v)).collect(),
            z.iter().map(|&v| bf16::from_f64(v)).collect(),
        );
        let mut out = vec![bf16::NAN; n];
        let k =
            module.kernel("fma_blocks", "*bf16,*bf16,*bf16,*bf16,i32,256").unwrap_or_else(|e| panic!("{e}"));
        k.launch(grid, &lnc::args![&xb, &yb, &zb, &mut out, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..n {
            let want = bf16::from_f32(xb[i].to_f32().mul_add(yb[i].to_f32(), zb[i].to_f32()));
            assert_eq!(out[i].to_bits(), want.to_bits(), "bf16 n = {n}, element {i}");
        }
    }
}

#[test]
fn fma_promotes_and_broadcasts_scalars() {
    let module = load("fma.py");
    let mut rng = rng();
    let n = 333usize;
    let x = randn(&mut rng, n, 0.0, 3.0);
    let a = 1.0f32 + 2f32.powi(-12);
    let mut out = vec![f32::NAN; n];
    let k = module.kernel("fma_mixed", "*fp32,*fp32,fp32,i32,128").unwrap_or_else(|e| panic!("{e}"));
    k.launch(n.div_ceil(128) as u32, &lnc::args![&x, &mut out, a, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    let s = a.mul_add(a, 0.5);
    for i in 0..n {
        let want = x[i].mul_add(a, 1.0) + s;
        assert_eq!(out[i].to_bits(), want.to_bits(), "element {i}");
    }
}

#[test]
fn fma_agrees_with_the_block_ir_interpreter() {
    let module = load("fma.py");
    let mut rng = rng();
    let n = 700usize;
    let (x, y, z) = inputs(&mut rng, n);
    for (sig, conv) in [
        ("*fp32,*fp32,*fp32,*fp32,i32,256", 32),
        ("*fp64,*fp64,*fp64,*fp64,i32,256", 64),
        ("*fp16,*fp16,*fp16,*fp16,i32,256", 16),
    ] {
        let data = |v: &[f64]| -> A {
            match conv {
                32 => A::Buf(v.iter().map(|&t| t as f32).collect::<Vec<f32>>().into(), 0),
                64 => A::Buf(v.to_vec().into(), 0),
                _ => A::Buf(v.iter().map(|&t| f16::from_f64(t)).collect::<Vec<f16>>().into(), 0),
            }
        };
        let out = match conv {
            32 => A::Buf(vec![f32::NAN; n].into(), 0),
            64 => A::Buf(vec![f64::NAN; n].into(), 0),
            _ => A::Buf(vec![f16::NAN; n].into(), 0),
        };
        let args = vec![data(&x), data(&y), data(&z), out, A::I32(n as i32)];
        diff(&module, &Case::new("fma_blocks", sig, n.div_ceil(256) as u32, args).check(3, Check::Exact));
    }
}

#[test]
fn fma_errors_are_located() {
    let jit = lnc::Jit::new();
    let src = |body: &str| {
        format!(
            "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, Y, n):\n    i = tl.arange(0, 16)\n    x = tl.load(X + i)\n    {body}\n"
        )
    };
    for (body, sig, want) in [
        (
            "tl.store(Y + i, tl.fma(x, x, x))",
            "*i32,*i32,i32",
            "`tl.fma` needs floating-point operands, got int32",
        ),
        ("tl.store(Y + i, tl.fma(x, X, x))", "*fp32,*fp32,i32", "tl.fma"),
        ("tl.store(Y + i, tl.fma(x, x))", "*fp32,*fp32,i32", "tl.fma"),
    ] {
        let m = jit.module("k.py", src(body)).unwrap_or_else(|e| panic!("{e}"));
        let e = m.kernel("k", sig).err().unwrap_or_else(|| panic!("{body} compiled")).to_string();
        assert!(e.contains(want) && e.contains("k.py:8:"), "{body}: {e}");
    }
}
