//! `tl.dot` and `@` (kernels in `tests/kernels/dot.py`): Triton's matrix multiplication
//! tutorial kernel as the tutorial writes it (grouped program order, `% M` offsets, masks
//! on K, `tl.dot(a, b, accumulator)`, the `leaky_relu` activation chosen by a string
//! `tl.constexpr`) and one-block products in every operand type, against float64 (exact
//! integer) references on sizes that are not multiples of the blocks, outputs poisoned;
//! and against the block-IR interpreter through the differential harness.

mod common;

use common::diff::{A, Case, Check, Data, diff, load};
use common::*;
use half::{bf16, f16};
use rand::Rng;

/// `a · b` in float64, `a` of `m × k`, `b` of `k × n`, row-major.
fn matmul(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j];
            }
        }
    }
    c
}

fn halves(rng: &mut impl Rng, n: usize) -> Vec<f16> {
    randn(rng, n, 0.0, 1.0).into_iter().map(f16::from_f32).collect()
}

fn tutorial_signature(bm: u32, bn: u32, bk: u32, group: u32, activation: &str) -> String {
    format!("*fp16,*fp16,*fp16,i32,i32,i32,i32,1,i32,1,i32,1,{bm},{bn},{bk},{group},\"{activation}\"")
}

#[test]
fn the_tutorial_matmul_matches_float64() {
    let module = load("dot.py");
    let mut rng = rng();
    for (m, n, k, (bm, bn, bk, group), act) in [
        (77usize, 53usize, 100usize, (32u32, 32u32, 32u32, 2u32), "leaky_relu"),
        (130, 190, 65, (64, 64, 32, 8), ""),
        (16, 16, 16, (16, 16, 16, 1), "leaky_relu"),
    ] {
        let sig = tutorial_signature(bm, bn, bk, group, act);
        let kern = module.kernel("matmul_kernel", &sig).unwrap_or_else(|e| panic!("{e}"));
        let (a, b) = (halves(&mut rng, m * k), halves(&mut rng, k * n));
        let mut c = vec![f16::NAN; m * n];
        let grid = (m as u32).div_ceil(bm) * (n as u32).div_ceil(bn);
        let args = lnc::args![&a, &b, &mut c, m as i32, n as i32, k as i32, k as i32, n as i32, n as i32];
        kern.launch(grid, &args).unwrap_or_else(|e| panic!("{e}"));
        let wide = |v: &[f16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
        let mut want = matmul(&wide(&a), &wide(&b), m, n, k);
        if act == "leaky_relu" {
            want.iter_mut().filter(|v| **v < 0.0).for_each(|v| *v *= 0.01);
        }
        for (i, (got, want)) in c.iter().zip(&want).enumerate() {
            // Exact products, fp32 sums, then one fp16 rounding.
            let tol = want.abs() * 2f64.powi(-10) + 1e-4;
            assert!(
                (got.to_f64() - want).abs() <= tol,
                "{m}x{k} @ {k}x{n} ({act:?}): C[{}, {}] = {got} against {want}",
                i / n,
                i % n
            );
        }
    }
}

#[test]
fn the_tutorial_matmul_agrees_with_the_interpreter() {
    let module = load("dot.py");
    let mut rng = rng();
    let (m, n, k) = (40usize, 24usize, 50usize);
    let args = vec![
        A::at(halves(&mut rng, m * k), 0),
        A::at(halves(&mut rng, k * n), 0),
        A::at(vec![f16::NAN; m * n], 0),
        A::I32(m as i32),
        A::I32(n as i32),
        A::I32(k as i32),
        A::I32(k as i32),
        A::I32(n as i32),
        A::I32(n as i32),
    ];
    let sig = tutorial_signature(16, 16, 16, 2, "leaky_relu");
    // Sums over K in another order: within an fp16 ulp.
    let case = Case::new("matmul_kernel", &sig, 6, args).check(2, Check::Close { atol: 1e-3, rtol: 2e-3 });
    diff(&module, &case);
}

/// One `block_dot` launch over `m × n` in blocks of `bm × bn` (K in one block of `bk`),
/// through the differential harness; returns C.
#[allow(clippy::too_many_arguments)]
fn block_dot(
    a: Data,
    b: Data,
    c: Data,
    (m, n, k): (usize, usize, usize),
    blocks: (u32, u32, u32),
    types: &str,
    at: bool,
) -> Data {
    let (bm, bn, bk) = blocks;
    let sig = format!("{types},i32,i32,i32,{bm},{bn},{bk},{}", at as i32);
    let grid = ((m as u32).div_ceil(bm), (n as u32).div_ceil(bn));
    let args =
        vec![A::Buf(a, 0), A::Buf(b, 0), A::Buf(c, 0), A::I32(m as i32), A::I32(n as i32), A::I32(k as i32)];
    let case = Case::new("block_dot", &sig, grid, args).check(2, Check::Close { atol: 2e-5, rtol: 1e-5 });
    diff(&load("dot.py"), &case)[2].data().clone()
}

#[test]
fn every_operand_type_multiplies_and_accumulates_as_triton_does() {
    let mut rng = rng();
    let (m, n, k) = (37usize, 45usize, 29usize);
    let dims = (m, n, k);
    let blocks = (16u32, 32u32, 32u32);
    for at in [false, true] {
        // fp32 and bf16 operands accumulate in fp32 onto C's fp32.
        let a = randn(&mut rng, m * k, 0.0, 1.0);
        let b = randn(&mut rng, k * n, 0.0, 1.0);
        let c0 = randn(&mut rng, m * n, 0.0, 1.0);
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        let want: Vec<f64> =
            matmul(&wide(&a), &wide(&b), m, n, k).iter().zip(&c0).map(|(p, &c)| p + f64::from(c)).collect();
        let got = block_dot(
            a.clone().into(),
            b.clone().into(),
            c0.clone().into(),
            dims,
            blocks,
            "*fp32,*fp32,*fp32",
            at,
        );
        assert_close("fp32 dot", &got_f32(&got), &want, 1e-5, 1e-5);
        let (ab, bb): (Vec<bf16>, Vec<bf16>) =
            (a.iter().map(|&x| bf16::from_f32(x)).collect(), b.iter().map(|&x| bf16::from_f32(x)).collect());
        let wb = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
        let want: Vec<f64> =
            matmul(&wb(&ab), &wb(&bb), m, n, k).iter().zip(&c0).map(|(p, &c)| p + f64::from(c)).collect();
        let got = block_dot(ab.into(), bb.into(), c0.clone().into(), dims, blocks, "*bf16,*bf16,*fp32", at);
        assert_close("bf16 dot", &got_f32(&got), &want, 1e-5, 1e-5);
        // fp64 in fp64.
        let (a64, b64, c64): (Vec<f64>, Vec<f64>, Vec<f64>) = (wide(&a), wide(&b), wide(&c0));
        let want: Vec<f64> = matmul(&a64, &b64, m, n, k).iter().zip(&c64).map(|(p, c)| p + c).collect();
        let got = block_dot(a64.into(), b64.into(), c64.into(), dims, blocks, "*fp64,*fp64,*fp64", at);
        let Data::F64(got) = got else { panic!("fp64 C") };
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "fp64 dot: {g} against {w}");
        }
        // int8 in int32, exactly.
        let a8: Vec<i8> = (0..m * k).map(|_| rng.random()).collect();
        let b8: Vec<i8> = (0..k * n).map(|_| rng.random()).collect();
        let c32: Vec<i32> = (0..m * n).map(|_| rng.random_range(-1000..1000)).collect();
        let got = block_dot(
            a8.clone().into(),
            b8.clone().into(),
            c32.clone().into(),
            dims,
            blocks,
            "*i8,*i8,*i32",
            at,
        );
        let got = got.to_i64s();
        for i in 0..m {
            for j in 0..n {
                let dot: i64 = (0..k).map(|p| i64::from(a8[i * k + p]) * i64::from(b8[p * n + j])).sum();
                assert_eq!(got[i * n + j], dot + i64::from(c32[i * n + j]), "int8 dot at ({i}, {j})");
            }
        }
    }
}

fn got_f32(d: &Data) -> Vec<f32> {
    match d {
        Data::F32(v) => v.clone(),
        other => panic!("not fp32: {other:?}"),
    }
}

#[test]
fn bad_operands_are_located_errors() {
    let jit = lnc::Jit::new();
    let cases = [
        ("tl.dot(a, c)", "*fp32", "", "columns to match the second's rows: 32 and 16"),
        ("tl.dot(a, e)", "*fp32", "", "at least 16, got 8"),
        ("tl.dot(a, b.to(tl.float16))", "*fp32", "", "the same type"),
        ("tl.dot(a.to(tl.int16), b.to(tl.int16))", "*fp32", "", "`tl.dot` of int16 blocks is not supported"),
        ("tl.dot(a, b, out_dtype=tl.float16)", "*fp32", "", "computes in float32, not float16"),
        ("tl.dot(a, b, e)", "*fp32", "", "the accumulator of `tl.dot` must be a [32, 32] block of float32"),
        ("tl.dot(a, b, input_precision=\"fast\")", "*fp32", "", "unknown `input_precision`"),
        ("tl.dot(tl.sum(a, axis=0), b)", "*fp32", "", "must be 2-D blocks"),
        ("a", "*fp32", ",\"relu\"", "it cannot take the string \"relu\""),
    ];
    for (expr, ptr, extra, want) in cases {
        let src = format!(
            "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, n):\n    \
             r = tl.arange(0, 32)\n    a = tl.load(X + r[:, None] * 32 + r[None, :])\n    \
             b = tl.load(X + r[:, None] * 32 + r[None, :])\n    \
             c = tl.load(X + tl.arange(0, 16)[:, None] * 32 + r[None, :])\n    \
             e = tl.load(X + r[:, None] * 32 + tl.arange(0, 8)[None, :])\n    tl.store(X + r[:, None] * 32 + r[None, :], {expr})\n"
        );
        let m = jit.module("bad.py", &src).unwrap_or_else(|e| panic!("{e}"));
        let e = match m.kernel("k", &format!("{ptr}{}", if extra.is_empty() { ",i32" } else { extra })) {
            Ok(_) => panic!("`{expr}` compiled"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "`{expr}`: {e}");
        assert!(e.contains("bad.py:"), "`{expr}`: no location in {e}");
    }
}
