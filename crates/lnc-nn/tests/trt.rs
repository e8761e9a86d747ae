//! TensorRT-LLM's `functional.layer_norm` through `Nn::trt_layer_norm`: `normalized_shape`
//! over one or several trailing axes, optional weight and bias, both variance forms, in
//! fp32, fp16 and bf16, against a float64 reference computed here. The accuracy of
//! `use_diff_of_squares` on ill-conditioned rows is measured in `numerics.rs`.

mod common;

use common::*;
use half::{bf16, f16};

const EPS: f64 = 1e-5;

fn check<T: Num>(seed: u64, shape: &[usize], normalized_shape: &[usize]) {
    let nn = nn();
    let mut rng = seeded(seed);
    let total: usize = shape.iter().product();
    let n: usize = normalized_shape.iter().product();
    // Well-conditioned rows (κ = E[x²]/var ≈ 1.4): both variance forms are accurate.
    let x: Vec<T> = randn(&mut rng, total, 0.8, 1.3);
    let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3);
    let b: Vec<T> = randn(&mut rng, n, 0.0, 0.5);
    let (xf, wf, bf) = (wide(&x), wide(&w), wide(&b));
    let row_abs: Vec<f64> =
        xf.chunks(n).map(|row| row.iter().map(|v| v.abs()).sum::<f64>() / n as f64).collect();
    for (has_w, has_b) in [(false, false), (true, false), (false, true), (true, true)] {
        let r = ln_ref(&xf, n, has_w.then_some(&wf[..]), has_b.then_some(&bf[..]), EPS);
        for diff_sq in [false, true] {
            let what = |v: &str| {
                format!(
                    "{v} of {} {shape:?} over {normalized_shape:?}, weight {has_w}, bias {has_b}, diff of squares \
                     {diff_sq}",
                    T::SIG
                )
            };
            let out = nn
                .trt_layer_norm(
                    &x,
                    shape,
                    normalized_shape,
                    has_w.then_some(&w[..]),
                    has_b.then_some(&b[..]),
                    EPS as f32,
                    diff_sq,
                )
                .unwrap_or_else(|e| panic!("{}: {e}", what("call")));
            assert_within(&what("mean"), &wide32(&out.mean), &r.mean, |i, _| 1e-5 * row_abs[i]);
            assert_within(&what("rstd"), &wide32(&out.rstd), &r.rstd(EPS), |_, v| 2e-5 * v);
            assert_within(&what("y"), &wide(&out.y), &r.y, |i, v| {
                2.0 * T::U * v.abs() + 1e-5 * (1.0 + r.scale[i])
            });
        }
    }
}

#[test]
fn fp32_over_one_two_and_three_axes() {
    // x [4, 6, 7, 9] normalized over (9,): 168 rows of 9; (7, 9): 24 rows of 63; (6, 7, 9):
    // 4 rows of 378.
    for normalized in [&[9usize][..], &[7, 9], &[6, 7, 9]] {
        check::<f32>(0x7e_0001, &[4, 6, 7, 9], normalized);
    }
    // Rows of one element (var 0: y = bias), of 1537, and of 3001 (three chunks of 1024).
    check::<f32>(0x7e_0002, &[5, 1], &[1]);
    check::<f32>(0x7e_0003, &[3, 1537], &[1537]);
    check::<f32>(0x7e_0004, &[2, 3001], &[3001]);
}

#[test]
fn fp16_over_one_and_two_axes() {
    check::<f16>(0x7e_0011, &[4, 6, 7, 9], &[7, 9]);
    check::<f16>(0x7e_0012, &[3, 1537], &[1537]);
}

#[test]
fn bf16_over_one_and_two_axes() {
    check::<bf16>(0x7e_0021, &[4, 6, 7, 9], &[7, 9]);
    check::<bf16>(0x7e_0022, &[2, 3, 1000], &[1000]);
}

#[test]
fn several_axes_are_the_flattened_row() {
    // normalized_shape (7, 9) of [4, 6, 7, 9] is normalized_shape (63,) of [24, 63], bit for
    // bit.
    let nn = nn();
    let mut rng = seeded(0x7e_0031);
    let x: Vec<f32> = randn(&mut rng, 4 * 6 * 7 * 9, -1.0, 2.0);
    let w: Vec<f32> = randn(&mut rng, 63, 1.0, 0.3);
    let a = nn.trt_layer_norm(&x, &[4, 6, 7, 9], &[7, 9], Some(&w), None, 1e-5, false);
    let b = nn.trt_layer_norm(&x, &[24, 63], &[63], Some(&w), None, 1e-5, false);
    let (a, b) = (a.unwrap_or_else(|e| panic!("{e}")), b.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(a.y, b.y);
    assert_eq!((a.mean, a.rstd), (b.mean, b.rstd));
}

#[test]
fn bad_shapes_are_errors() {
    let nn = nn();
    let x = vec![0.5f32; 24];
    let call = |shape: &[usize], norm: &[usize], w: Option<&[f32]>, b: Option<&[f32]>| {
        shape_error(nn.trt_layer_norm(&x, shape, norm, w, b, 1e-5, true))
    };
    let e = call(&[5, 5], &[5], None, None);
    assert!(e.contains("x has 24 elements: not of shape [5, 5]"), "{e}");
    let e = call(&[2, 3, 4], &[3], None, None);
    assert!(e.contains("normalized_shape [3] is not the trailing axes of shape [2, 3, 4]"), "{e}");
    let e = call(&[2, 3, 4], &[2, 3], None, None);
    assert!(e.contains("not the trailing axes"), "{e}");
    let e = call(&[2, 3, 4], &[], None, None);
    assert!(e.contains("normalized_shape [] is not the trailing axes"), "{e}");
    let e = call(&[2, 3, 4], &[1, 2, 3, 4], None, None);
    assert!(e.contains("not the trailing axes"), "{e}");
    let e = call(&[2, 3, 4], &[3, 4], Some(&[1.0; 4]), None);
    assert!(e.contains("weight has 4 elements: expected Π normalized_shape = 12"), "{e}");
    let e = call(&[2, 3, 4], &[4], None, Some(&[0.0; 12]));
    assert!(e.contains("bias has 12 elements"), "{e}");
    let e = shape_error(nn.trt_layer_norm::<f32>(&[], &[3, 0], &[0], None, None, 1e-5, true));
    assert!(e.contains("normalized_shape [0] has no elements"), "{e}");
}
