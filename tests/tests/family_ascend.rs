//! Huawei Ascend C's layer-norm family written in the kernel language:
//! `crates/lnc-nn/kernels/ascend_layer_norm.py` (LayerNorm, form (a) with the variance and
//! form (b) with the rstd over padded rows) and `ascend_grad_beta.py` (LayerNormGradBeta).
//!
//! Each kernel runs on random data of awkward sizes (never multiples of the block or of
//! 4), in fp32, fp16 and bf16, with gamma/beta of a wider dtype than x where Ascend allows
//! it, every output poisoned with NaN first, against a float64 reference computed on the
//! same (rounded) inputs; through the JIT-vs-interpreter differential harness on small
//! sizes; and its block IR and loop IR are snapshotted.
//!
//! The generator's seed is fixed per test and printed; `LNC_TEST_SEED=<seed>` replaces it.

mod common;

use common::diff::{A, Case, Check, diff};
use common::{Float, randn, seeded};
use half::{bf16, f16};
use lnc::{DumpRequest, Stage};
use rand::rngs::StdRng;

const LAYER_NORM: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/ascend_layer_norm.py");
const GRAD_BETA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/ascend_grad_beta.py");

const VAR: &str = "ascend_layer_norm_var";
const RSTD: &str = "ascend_layer_norm_rstd";
const GRAD: &str = "ascend_layer_norm_grad_beta";

const EPS: f32 = 1e-5;

/// The four (IS_NO_GAMMA, IS_NO_BETA) combinations.
const FLAGS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

fn load(path: &str) -> lnc::Module {
    lnc::Jit::new().load(path).unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

fn round<T: Float>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

fn widen<T: Float>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.to_f64()).collect()
}

fn nans<T: Float>(n: usize) -> Vec<T> {
    vec![T::from_f32(f32::NAN); n]
}

fn buf<T: Float>(v: Vec<T>) -> A {
    A::Buf(T::data(v), 0)
}

fn py(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Form (a)'s signature: x/y of `T`, gamma/beta of `U`, mean/variance of `S`.
fn var_sig<T: Float, U: Float, S: Float>(block: usize, no_gamma: bool, no_beta: bool) -> String {
    let (t, u, s) = (T::SIG, U::SIG, S::SIG);
    format!("*{t},*{t},*{u},*{u},*{s},*{s},i32,fp32,{block},{},{}", py(no_gamma), py(no_beta))
}

/// Form (b)'s signature: x/y of `T`, gamma/beta of `U`, mean/rstd in fp32 (as in Ascend).
fn rstd_sig<T: Float, U: Float>(block: usize, no_gamma: bool, no_beta: bool) -> String {
    let (t, u) = (T::SIG, U::SIG);
    format!("*{t},*{t},*{u},*{u},*fp32,*fp32,i32,i32,fp32,{block},{},{}", py(no_gamma), py(no_beta))
}

fn grad_sig<T: Float>(block_m: usize, block_h: usize) -> String {
    let t = T::SIG;
    format!("*{t},*{t},*{t},*{t},i32,i32,{block_m},{block_h}")
}

/// Float64 statistics and output of `rows` rows of `n` elements: (y, mean, variance),
/// the affine terms applied when given.
fn reference(
    x: &[f64],
    n: usize,
    gamma: Option<&[f64]>,
    beta: Option<&[f64]>,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let rows = x.len() / n;
    let (mut y, mut mean, mut var) = (vec![0.0; rows * n], vec![0.0; rows], vec![0.0; rows]);
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().sum::<f64>() / n as f64;
        let v = row.iter().map(|&e| (e - mu).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (v + eps).sqrt();
        for (c, out) in y[r * n..(r + 1) * n].iter_mut().enumerate() {
            let mut e = (row[c] - mu) * rstd;
            if let Some(g) = gamma {
                e *= g[c];
            }
            if let Some(b) = beta {
                e += b[c];
            }
            *out = e;
        }
        mean[r] = mu;
        var[r] = v;
    }
    (y, mean, var)
}

/// Asserts `|got - want| <= tol(want)` element by element; NaN (unwritten poison) fails.
#[track_caller]
fn assert_within(what: &str, got: &[f64], want: &[f64], tol: impl Fn(f64) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let t = tol(w);
        assert!(!g.is_nan() && (g - w).abs() <= t, "{what}[{i}] = {g}, expected {w} (tolerance {t})");
    }
}

/// Tolerance of a layer-norm output of type `T`: fp32 arithmetic (a few 1e-6 absolute on
/// values of order 1), then one rounding to `T` on the store.
fn y_tol<T: Float>(w: f64) -> f64 {
    1e-5 + (2.0 * T::U + 1e-5) * w.abs()
}

/// Tolerance of a per-row statistic (mean, variance, rstd) computed in fp32 and stored
/// as `S`.
fn stat_tol<S: Float>(w: f64) -> f64 {
    1e-6 + (2.0 * S::U + 1e-5) * w.abs()
}

/// Random gamma and beta rounded to `U`; with its flag set a parameter is poisoned with NaN
/// instead, so that reading it would show in y.
fn affine<U: Float>(rng: &mut StdRng, n: usize, no_gamma: bool, no_beta: bool) -> (Vec<U>, Vec<U>) {
    let gamma = if no_gamma { nans(n) } else { round(&randn(rng, n, 1.0, 0.3)) };
    let beta = if no_beta { nans(n) } else { round(&randn(rng, n, 0.0, 0.5)) };
    (gamma, beta)
}

// ---------------------------------------------------------------------------------------
// Form (a): y, mean and variance of [B, S, H].

/// Runs form (a) on [b, s, h] and checks it against the float64 reference.
fn check_var<T: Float, U: Float, S: Float>(
    module: &lnc::Module,
    rng: &mut StdRng,
    (b, s, h): (usize, usize, usize),
    (no_gamma, no_beta): (bool, bool),
) {
    let rows = b * s;
    let block = h.next_power_of_two();
    let sig = var_sig::<T, U, S>(block, no_gamma, no_beta);
    let what = |v: &str| format!("{v} of {VAR} [{sig}] on [{b}, {s}, {h}]");
    let k = module.kernel(VAR, &sig).unwrap_or_else(|e| panic!("{}: {e}", what("compiling")));
    let x: Vec<T> = round(&randn(rng, rows * h, -2.3, 0.5));
    let (gamma, beta) = affine::<U>(rng, h, no_gamma, no_beta);
    let (mut y, mut mean, mut var) = (nans::<T>(rows * h), nans::<S>(rows), nans::<S>(rows));
    k.launch(rows as u32, &lnc::args![&x, &mut y, &gamma, &beta, &mut mean, &mut var, h as i32, EPS])
        .unwrap_or_else(|e| panic!("{}: {e}", what("launch")));

    let (g, bt) = (widen(&gamma), widen(&beta));
    let (ry, rmean, rvar) = reference(
        &widen(&x),
        h,
        (!no_gamma).then_some(g.as_slice()),
        (!no_beta).then_some(bt.as_slice()),
        EPS as f64,
    );
    assert_within(&what("y"), &widen(&y), &ry, y_tol::<T>);
    assert_within(&what("mean"), &widen(&mean), &rmean, stat_tol::<S>);
    assert_within(&what("variance"), &widen(&var), &rvar, stat_tol::<S>);
}

const VAR_SHAPES: [(usize, usize, usize); 4] = [(3, 5, 37), (2, 7, 1000), (1, 1, 1), (2, 3, 4097)];

#[test]
fn var_form_fp32_matches_float64_reference() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0001);
    for shape in VAR_SHAPES {
        check_var::<f32, f32, f32>(&m, &mut rng, shape, (false, false));
    }
}

#[test]
fn var_form_every_gamma_beta_flag_combination() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0002);
    for flags in FLAGS {
        for shape in [(3, 5, 37), (2, 7, 1000)] {
            check_var::<f32, f32, f32>(&m, &mut rng, shape, flags);
            check_var::<f16, f16, f16>(&m, &mut rng, shape, flags);
        }
    }
}

#[test]
fn var_form_half_precision() {
    // Ascend's form (a) keeps everything in T, statistics included.
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0003);
    for shape in VAR_SHAPES {
        check_var::<f16, f16, f16>(&m, &mut rng, shape, (false, false));
        check_var::<bf16, bf16, bf16>(&m, &mut rng, shape, (false, false));
    }
}

#[test]
fn var_form_wider_gamma_beta_and_statistics() {
    // x/y in half precision, gamma/beta and the statistics in fp32: only the signature
    // changes.
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0004);
    for shape in [(3, 5, 37), (2, 7, 1000)] {
        check_var::<f16, f32, f32>(&m, &mut rng, shape, (false, false));
        check_var::<bf16, f32, f32>(&m, &mut rng, shape, (false, true));
    }
}

// ---------------------------------------------------------------------------------------
// Form (b): y, mean and rstd of [A, R] rows padded to R_PAD.

/// rLengthWithPadding: `r` rounded up to 32 bytes of `T`.
fn pad_32_bytes<T: Float>(r: usize) -> usize {
    let per = 32 / std::mem::size_of::<T>();
    r.div_ceil(per) * per
}

/// x of [a, r_pad]: random values rounded to `T`, the padding filled with garbage
/// (alternately NaN and 1e30, which is infinity in fp16).
fn padded_x<T: Float>(rng: &mut StdRng, a: usize, r: usize, r_pad: usize) -> Vec<T> {
    let real = randn(rng, a * r, -2.3, 0.5);
    (0..a * r_pad)
        .map(|i| {
            let (row, col) = (i / r_pad, i % r_pad);
            if col < r {
                T::from_f32(real[row * r + col])
            } else if i % 2 == 0 {
                T::from_f32(f32::NAN)
            } else {
                T::from_f32(1e30)
            }
        })
        .collect()
}

/// The real elements of padded rows.
fn unpad(v: &[f64], r: usize, r_pad: usize) -> Vec<f64> {
    v.chunks(r_pad).flat_map(|row| row[..r].to_vec()).collect()
}

/// Runs form (b) on [a, r] padded to `r_pad` and checks it against the float64 reference
/// and that the padding of y keeps its poison.
fn check_rstd<T: Float, U: Float>(
    module: &lnc::Module,
    rng: &mut StdRng,
    (a, r, r_pad): (usize, usize, usize),
    (no_gamma, no_beta): (bool, bool),
) {
    let block = r.next_power_of_two();
    let sig = rstd_sig::<T, U>(block, no_gamma, no_beta);
    let what = |v: &str| format!("{v} of {RSTD} [{sig}] on [{a}, {r}] padded to {r_pad}");
    let k = module.kernel(RSTD, &sig).unwrap_or_else(|e| panic!("{}: {e}", what("compiling")));
    let x: Vec<T> = padded_x(rng, a, r, r_pad);
    let (gamma, beta) = affine::<U>(rng, r, no_gamma, no_beta);
    let (mut y, mut mean, mut rstd) = (nans::<T>(a * r_pad), nans::<f32>(a), nans::<f32>(a));
    k.launch(
        a as u32,
        &lnc::args![&x, &mut y, &gamma, &beta, &mut mean, &mut rstd, r as i32, r_pad as i32, EPS],
    )
    .unwrap_or_else(|e| panic!("{}: {e}", what("launch")));

    let (g, bt) = (widen(&gamma), widen(&beta));
    let (ry, rmean, rvar) = reference(
        &unpad(&widen(&x), r, r_pad),
        r,
        (!no_gamma).then_some(g.as_slice()),
        (!no_beta).then_some(bt.as_slice()),
        EPS as f64,
    );
    let rrstd: Vec<f64> = rvar.iter().map(|v| 1.0 / (v + EPS as f64).sqrt()).collect();
    let yw = widen(&y);
    assert_within(&what("y"), &unpad(&yw, r, r_pad), &ry, y_tol::<T>);
    assert_within(&what("mean"), &widen(&mean), &rmean, stat_tol::<f32>);
    assert_within(&what("rstd"), &widen(&rstd), &rrstd, stat_tol::<f32>);
    for (row, chunk) in yw.chunks(r_pad).enumerate() {
        assert!(chunk[r..].iter().all(|v| v.is_nan()), "{}: padding of row {row} written", what("y"));
    }
}

#[test]
fn rstd_form_fp32_ignores_the_padding() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0011);
    // (A, R, R_PAD): the seed's 32-byte alignment, and a wider stride.
    for shape in [(13, 1000, 1008), (5, 37, 40), (1, 1, 8), (3, 4097, 4104), (7, 300, 333)] {
        check_rstd::<f32, f32>(&m, &mut rng, shape, (false, false));
    }
}

#[test]
fn rstd_form_every_gamma_beta_flag_combination() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0012);
    for flags in FLAGS {
        for r in [37, 1000] {
            check_rstd::<f32, f32>(&m, &mut rng, (13, r, pad_32_bytes::<f32>(r)), flags);
            check_rstd::<f16, f32>(&m, &mut rng, (13, r, pad_32_bytes::<f16>(r)), flags);
        }
    }
}

#[test]
fn rstd_form_half_precision_and_wider_gamma_beta() {
    // Ascend: gamma/beta (U) at least as precise as x (T); mean and rstd in fp32.
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0013);
    for (a, r) in [(13, 1000), (5, 37), (3, 4097)] {
        check_rstd::<f16, f16>(&m, &mut rng, (a, r, pad_32_bytes::<f16>(r)), (false, false));
        check_rstd::<f16, f32>(&m, &mut rng, (a, r, pad_32_bytes::<f16>(r)), (false, false));
        check_rstd::<bf16, bf16>(&m, &mut rng, (a, r, pad_32_bytes::<bf16>(r)), (false, false));
        check_rstd::<bf16, f32>(&m, &mut rng, (a, r, pad_32_bytes::<bf16>(r)), (false, false));
        // fp64 gamma/beta: the affine step promotes to fp64, y is rounded to fp32 once.
        check_rstd::<f32, f64>(&m, &mut rng, (a, r, pad_32_bytes::<f32>(r)), (false, false));
    }
}

#[test]
fn both_forms_agree_on_unpadded_rows() {
    // Same data through both forms: the same mean, rstd = 1 / sqrt(variance + eps), the
    // same y up to the reciprocal square root's rounding.
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0014);
    let (rows, n) = (11usize, 333usize);
    let x = randn(&mut rng, rows * n, 1.5, 2.0);
    let (gamma, beta) = affine::<f32>(&mut rng, n, false, false);
    let a = m.kernel(VAR, &var_sig::<f32, f32, f32>(512, false, false)).unwrap_or_else(|e| panic!("{e}"));
    let b = m.kernel(RSTD, &rstd_sig::<f32, f32>(512, false, false)).unwrap_or_else(|e| panic!("{e}"));
    let (mut ya, mut mean_a, mut var_a) = (nans::<f32>(rows * n), nans::<f32>(rows), nans::<f32>(rows));
    a.launch(rows as u32, &lnc::args![&x, &mut ya, &gamma, &beta, &mut mean_a, &mut var_a, n as i32, EPS])
        .unwrap_or_else(|e| panic!("form (a): {e}"));
    let (mut yb, mut mean_b, mut rstd_b) = (nans::<f32>(rows * n), nans::<f32>(rows), nans::<f32>(rows));
    b.launch(
        rows as u32,
        &lnc::args![&x, &mut yb, &gamma, &beta, &mut mean_b, &mut rstd_b, n as i32, n as i32, EPS],
    )
    .unwrap_or_else(|e| panic!("form (b): {e}"));
    assert_eq!(mean_a, mean_b, "the same mean");
    let from_var: Vec<f64> = var_a.iter().map(|&v| 1.0 / (v as f64 + EPS as f64).sqrt()).collect();
    assert_within("rstd from the variance", &widen(&rstd_b), &from_var, |w| 4e-7 * w.abs());
    assert_within("y of both forms", &widen(&ya), &widen(&yb), |w| 1e-6 + 1e-6 * w.abs());
}

// ---------------------------------------------------------------------------------------
// LayerNormGradBeta.

/// Runs LayerNormGradBeta on [m, h] and checks it against the float64 reference; the
/// outputs have 3 extra elements that must keep their poison.
fn check_grad_beta<T: Float>(
    module: &lnc::Module,
    rng: &mut StdRng,
    (m, h): (usize, usize),
    (block_m, block_h): (usize, usize),
) {
    let sig = grad_sig::<T>(block_m, block_h);
    let what = |v: &str| format!("{v} of {GRAD} [{sig}] on [{m}, {h}]");
    let k = module.kernel(GRAD, &sig).unwrap_or_else(|e| panic!("{}: {e}", what("compiling")));
    // resForGamma is a normalized input; dy is small, as in the tutorial.
    let res: Vec<T> = round(&randn(rng, m * h, 0.0, 1.0));
    let dy: Vec<T> = round(&randn(rng, m * h, 0.0, 0.1));
    let (mut pd_gamma, mut pd_beta) = (nans::<T>(h + 3), nans::<T>(h + 3));
    k.launch(
        h.div_ceil(block_h) as u32,
        &lnc::args![&res, &dy, &mut pd_gamma, &mut pd_beta, m as i32, h as i32],
    )
    .unwrap_or_else(|e| panic!("{}: {e}", what("launch")));

    let (res, dy) = (widen(&res), widen(&dy));
    let (mut rg, mut rb) = (vec![0.0; h], vec![0.0; h]);
    let (mut ag, mut ab) = (vec![0.0; h], vec![0.0; h]);
    for (i, (&r, &d)) in res.iter().zip(&dy).enumerate() {
        rg[i % h] += d * r;
        rb[i % h] += d;
        ag[i % h] += (d * r).abs();
        ab[i % h] += d.abs();
    }
    // fp32 products (exact for half inputs) and an fp32 sum of m terms, then one rounding
    // to T.
    let bound = |abs: &[f64], want: &[f64]| -> Vec<f64> {
        abs.iter()
            .zip(want)
            .map(|(s, w)| (m as f64 + 2.0) * <f32 as Float>::U * s + T::U * w.abs() + 1e-30)
            .collect()
    };
    for (name, got, want, abs) in [("pd_gamma", &pd_gamma, &rg, &ag), ("pd_beta", &pd_beta, &rb, &ab)] {
        let tol = bound(abs, want);
        let got = widen(&got[..h]);
        for c in 0..h {
            let (g, w) = (got[c], want[c]);
            assert!(!g.is_nan() && (g - w).abs() <= tol[c], "{}[{c}] = {g}, expected {w}", what(name));
        }
    }
    for (name, out) in [("pd_gamma", &pd_gamma), ("pd_beta", &pd_beta)] {
        assert!(widen(&out[h..]).iter().all(|v| v.is_nan()), "{}: written past H", what(name));
    }
}

const GRAD_SHAPES: [((usize, usize), (usize, usize)); 4] = [
    ((15, 37), (16, 32)),     // B=3, S=5
    ((308, 1000), (32, 128)), // B=4, S=77
    ((1, 1), (4, 4)),
    ((33, 7), (8, 16)),
];

#[test]
fn grad_beta_fp32_matches_float64_reference() {
    let module = load(GRAD_BETA);
    let mut rng = seeded(0xA5C0_0021);
    for (shape, blocks) in GRAD_SHAPES {
        check_grad_beta::<f32>(&module, &mut rng, shape, blocks);
    }
}

#[test]
fn grad_beta_half_precision_matches_float64_reference() {
    let module = load(GRAD_BETA);
    let mut rng = seeded(0xA5C0_0022);
    for (shape, blocks) in GRAD_SHAPES {
        check_grad_beta::<f16>(&module, &mut rng, shape, blocks);
        check_grad_beta::<bf16>(&module, &mut rng, shape, blocks);
    }
}

// ---------------------------------------------------------------------------------------
// JIT against the block-IR interpreter.

/// The sums run in a different order in the JIT (lanes) and the interpreter: fp32
/// statistics differ by a few ulps, and so do the outputs computed from them (absolutely,
/// so near zero by many ulps); half-precision outputs may round to the neighbouring value.
fn close<T: Float>() -> Check {
    Check::Close { atol: 1e-5, rtol: 2.0 * T::U + 1e-5 }
}

fn diff_var<T: Float, U: Float, S: Float>(module: &lnc::Module, rng: &mut StdRng, flags: (bool, bool)) {
    let (rows, h) = (6usize, 37usize);
    let (gamma, beta) = affine::<U>(rng, h, flags.0, flags.1);
    let case = Case::new(
        VAR,
        &var_sig::<T, U, S>(64, flags.0, flags.1),
        rows as u32,
        vec![
            buf(round::<T>(&randn(rng, rows * h, -2.3, 0.5))),
            buf(nans::<T>(rows * h)),
            buf(gamma),
            buf(beta),
            buf(nans::<S>(rows)),
            buf(nans::<S>(rows)),
            (h as i32).into(),
            EPS.into(),
        ],
    )
    .check(1, close::<T>())
    .check(4, close::<S>())
    .check(5, close::<S>());
    let out = diff(module, &case);
    assert!(out[1].data().to_f64s().iter().all(|v| !v.is_nan()), "y fully written");
}

fn diff_rstd<T: Float, U: Float>(module: &lnc::Module, rng: &mut StdRng, flags: (bool, bool)) {
    let (a, r) = (5usize, 37usize);
    let r_pad = pad_32_bytes::<T>(r);
    let (gamma, beta) = affine::<U>(rng, r, flags.0, flags.1);
    let case = Case::new(
        RSTD,
        &rstd_sig::<T, U>(64, flags.0, flags.1),
        a as u32,
        vec![
            buf(padded_x::<T>(rng, a, r, r_pad)),
            buf(nans::<T>(a * r_pad)),
            buf(gamma),
            buf(beta),
            buf(nans::<f32>(a)),
            buf(nans::<f32>(a)),
            (r as i32).into(),
            (r_pad as i32).into(),
            EPS.into(),
        ],
    )
    .check(1, close::<T>())
    .check(4, close::<f32>())
    .check(5, close::<f32>());
    let out = diff(module, &case);
    for (row, chunk) in out[1].data().to_f64s().chunks(r_pad).enumerate() {
        assert!(chunk[..r].iter().all(|v| !v.is_nan()), "row {row} written");
        assert!(chunk[r..].iter().all(|v| v.is_nan()), "padding of row {row} untouched");
    }
}

fn diff_grad_beta<T: Float>(module: &lnc::Module, rng: &mut StdRng, (m, h): (usize, usize)) {
    let (block_m, block_h) = (8usize, 16usize);
    let case = Case::new(
        GRAD,
        &grad_sig::<T>(block_m, block_h),
        h.div_ceil(block_h) as u32,
        vec![
            buf(round::<T>(&randn(rng, m * h, 0.0, 1.0))),
            buf(round::<T>(&randn(rng, m * h, 0.0, 0.1))),
            buf(nans::<T>(h)),
            buf(nans::<T>(h)),
            (m as i32).into(),
            (h as i32).into(),
        ],
    )
    .check(2, close::<T>())
    .check(3, close::<T>());
    diff(module, &case);
}

#[test]
fn var_form_jit_equals_interpreter() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0031);
    for flags in FLAGS {
        diff_var::<f32, f32, f32>(&m, &mut rng, flags);
    }
    diff_var::<f16, f16, f16>(&m, &mut rng, (false, false));
    diff_var::<bf16, f32, f32>(&m, &mut rng, (false, false));
}

#[test]
fn rstd_form_jit_equals_interpreter() {
    let m = load(LAYER_NORM);
    let mut rng = seeded(0xA5C0_0032);
    for flags in FLAGS {
        diff_rstd::<f16, f32>(&m, &mut rng, flags);
    }
    diff_rstd::<f32, f32>(&m, &mut rng, (false, false));
    diff_rstd::<bf16, bf16>(&m, &mut rng, (false, false));
}

#[test]
fn grad_beta_jit_equals_interpreter() {
    let m = load(GRAD_BETA);
    let mut rng = seeded(0xA5C0_0033);
    for shape in [(15, 37), (1, 1), (9, 16)] {
        diff_grad_beta::<f32>(&m, &mut rng, shape);
        diff_grad_beta::<f16>(&m, &mut rng, shape);
    }
}

// ---------------------------------------------------------------------------------------
// Snapshots of the block IR after optimization and of the loop IR.

fn dump(path: &str, kernel: &str, sig: &str, stage: Stage) -> String {
    // Without F16C widening, which depends on the host, and with the 8-lane tiles of hosts
    // with AVX2 everywhere: the same text on every host.
    let jit = lnc::Jit::with_options(lnc::CompileOptions {
        verify: true,
        f16c: false,
        lanes: 8,
        ..Default::default()
    });
    let module = jit.load(path).unwrap_or_else(|e| panic!("loading {path}: {e}"));
    let req = DumpRequest { stages: vec![stage], checked: true, ..Default::default() };
    let dumps = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{kernel} [{sig}]: {e}"));
    assert_eq!(dumps.len(), 1, "one dump per stage");
    dumps.into_iter().next().map(|d| d.text).unwrap_or_default()
}

const VAR_SNAP_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,fp32,1024,False,False";
const VAR_NO_AFFINE_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,fp32,1024,True,True";
const RSTD_SNAP_SIG: &str = "*fp16,*fp16,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024,False,False";
const GRAD_SNAP_SIG: &str = "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128";

#[test]
fn var_opt() {
    insta::assert_snapshot!(dump(LAYER_NORM, VAR, VAR_SNAP_SIG, Stage::Opt));
}

#[test]
fn var_lir() {
    insta::assert_snapshot!(dump(LAYER_NORM, VAR, VAR_SNAP_SIG, Stage::Lir));
}

#[test]
fn var_no_gamma_no_beta_opt() {
    // The flags fold away: GAMMA and BETA are never loaded.
    let text = dump(LAYER_NORM, VAR, VAR_NO_AFFINE_SIG, Stage::Opt);
    assert_eq!(text.matches(" = load ").count(), 1, "only x is loaded:\n{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn var_no_gamma_no_beta_lir() {
    insta::assert_snapshot!(dump(LAYER_NORM, VAR, VAR_NO_AFFINE_SIG, Stage::Lir));
}

#[test]
fn rstd_opt() {
    insta::assert_snapshot!(dump(LAYER_NORM, RSTD, RSTD_SNAP_SIG, Stage::Opt));
}

#[test]
fn rstd_lir() {
    insta::assert_snapshot!(dump(LAYER_NORM, RSTD, RSTD_SNAP_SIG, Stage::Lir));
}

#[test]
fn grad_beta_opt() {
    insta::assert_snapshot!(dump(GRAD_BETA, GRAD, GRAD_SNAP_SIG, Stage::Opt));
}

#[test]
fn grad_beta_lir() {
    insta::assert_snapshot!(dump(GRAD_BETA, GRAD, GRAD_SNAP_SIG, Stage::Lir));
}
