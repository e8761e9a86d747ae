//! Huawei Ascend C's LayerNorm (both output forms) and LayerNormGradBeta through `Nn`,
//! against float64 references computed here on the same (rounded) inputs: fp32, fp16 and
//! bf16 rows, gamma/beta of the rows' dtype or wider (fp32), every isNoGamma/isNoBeta
//! combination, padded rows whose padding holds garbage.

mod common;

use common::*;
use half::{bf16, f16};
use rand::rngs::StdRng;

const EPS: f64 = 1e-5;

/// The four (gamma, beta) presences: Ascend's isNoGamma / isNoBeta negated.
const AFFINE: [(bool, bool); 4] = [(true, true), (false, true), (true, false), (false, false)];

/// Tolerances shared by both forms: the mean within 1e-5 of the row's mean magnitude, the
/// variance and rstd within 2e-5 relative (fp32 sums of up to 1537 terms); y in fp32
/// through `|x̂·γ| + |β|`, rounded once to `T`.
fn check_stats_and_y<T: Num>(
    what: &dyn Fn(&str) -> String,
    x: &[f64],
    n: usize,
    out: Stats<'_, T>,
    r: &LnRef,
) {
    let row_abs: Vec<f64> =
        x.chunks(n).map(|row| row.iter().map(|v| v.abs()).sum::<f64>() / n as f64).collect();
    assert_within(&what("mean"), &wide32(out.mean), &r.mean, |i, _| 1e-5 * row_abs[i]);
    match out.spread {
        Spread::Variance(v) => assert_within(&what("variance"), &wide32(v), &r.var, |_, w| 2e-5 * w + 1e-12),
        Spread::Rstd(v) => assert_within(&what("rstd"), &wide32(v), &r.rstd(EPS), |_, w| 2e-5 * w),
    }
    assert_within(&what("y"), &wide(out.y), &r.y, |i, w| 2.0 * T::U * w.abs() + 1e-5 * (1.0 + r.scale[i]));
}

struct Stats<'a, T> {
    y: &'a [T],
    mean: &'a [f32],
    spread: Spread<'a>,
}

enum Spread<'a> {
    Variance(&'a [f32]),
    Rstd(&'a [f32]),
}

/// Random gamma (around 1) and beta (around 0) of dtype `G`.
fn affine<G: Num>(rng: &mut StdRng, n: usize) -> (Vec<G>, Vec<G>) {
    (randn(rng, n, 1.0, 0.3), randn(rng, n, 0.0, 0.5))
}

// ---------------------------------------------------------------------------------------
// Form (a): [B, S, H] -> y, mean, variance.

fn check_var_form<T: Num, G: Num>(seed: u64) {
    let nn = nn();
    let mut rng = seeded(seed);
    for (b, s, h) in [(1, 1, 1), (2, 3, 3), (2, 5, 1000), (3, 1, 1537)] {
        let x: Vec<T> = randn(&mut rng, b * s * h, -2.3, 0.5);
        let (gamma, beta) = affine::<G>(&mut rng, h);
        for (has_g, has_b) in AFFINE {
            let what = |v: &str| {
                format!("{v} of [{b}, {s}, {h}] {} gamma {has_g} beta {has_b} ({})", T::SIG, G::SIG)
            };
            let (g, bt) = (has_g.then_some(&gamma[..]), has_b.then_some(&beta[..]));
            let out = nn
                .ascend_layer_norm(&x, h, g, bt, EPS as f32)
                .unwrap_or_else(|e| panic!("{}: {e}", what("call")));
            let (gw, bw) = (wide(&gamma), wide(&beta));
            let xf = wide(&x);
            let r = ln_ref(&xf, h, has_g.then_some(&gw[..]), has_b.then_some(&bw[..]), EPS);
            let stats = Stats { y: &out.y, mean: &out.mean, spread: Spread::Variance(&out.variance) };
            check_stats_and_y(&what, &xf, h, stats, &r);
        }
    }
}

#[test]
fn var_form_fp32_matches_float64() {
    check_var_form::<f32, f32>(0xa5_0001);
}

#[test]
fn var_form_fp16_matches_float64() {
    check_var_form::<f16, f16>(0xa5_0002);
}

#[test]
fn var_form_bf16_matches_float64() {
    check_var_form::<bf16, bf16>(0xa5_0003);
}

#[test]
fn var_form_half_rows_with_fp32_gamma_beta() {
    check_var_form::<f16, f32>(0xa5_0004);
    check_var_form::<bf16, f32>(0xa5_0005);
}

// ---------------------------------------------------------------------------------------
// Form (b): [A, R] rows R_PAD apart -> y, mean, rstd.

/// Rows of `r` random values `r_pad` apart, the padding filled with `pad(i)`.
fn padded<T: Num>(real: &[T], r: usize, r_pad: usize, pad: impl Fn(usize) -> T) -> Vec<T> {
    (0..real.len() / r * r_pad)
        .map(|i| if i % r_pad < r { real[i / r_pad * r + i % r_pad] } else { pad(i) })
        .collect()
}

fn check_rstd_form<T: Num, G: Num>(seed: u64) {
    let nn = nn();
    let mut rng = seeded(seed);
    // rLengthWithPadding: 32-byte alignment of T as in Ascend, no padding at all, and a
    // stride that is not aligned to anything.
    let align = 32 / std::mem::size_of::<T>();
    for (a, r, r_pad) in
        [(3, 1, align), (7, 3, 3), (5, 1000, 1000usize.next_multiple_of(align)), (3, 1537, 1541)]
    {
        let real: Vec<T> = randn(&mut rng, a * r, -2.3, 0.5);
        // Garbage in the padding: NaN, and 1e30 (infinity in fp16).
        let x = padded(&real, r, r_pad, |i| T::from_f64(if i % 2 == 0 { f64::NAN } else { 1e30 }));
        let zeros = padded(&real, r, r_pad, |_| T::from_f64(0.0));
        let (gamma, beta) = affine::<G>(&mut rng, r);
        for (has_g, has_b) in AFFINE {
            let what = |v: &str| {
                format!(
                    "{v} of [{a}, {r}] padded to {r_pad} {} gamma {has_g} beta {has_b} ({})",
                    T::SIG,
                    G::SIG
                )
            };
            let (g, bt) = (has_g.then_some(&gamma[..]), has_b.then_some(&beta[..]));
            let out = nn
                .ascend_layer_norm_rstd(&x, r, r_pad, g, bt, EPS as f32)
                .unwrap_or_else(|e| panic!("{}: {e}", what("call")));
            let (gw, bw) = (wide(&gamma), wide(&beta));
            let xf = wide(&real);
            let ref_ = ln_ref(&xf, r, has_g.then_some(&gw[..]), has_b.then_some(&bw[..]), EPS);
            let y: Vec<T> = out.y.chunks(r_pad).flat_map(|row| row[..r].to_vec()).collect();
            let stats = Stats { y: &y, mean: &out.mean, spread: Spread::Rstd(&out.rstd) };
            check_stats_and_y(&what, &xf, r, stats, &ref_);
            // The padding of y is left zero.
            for (row, chunk) in out.y.chunks(r_pad).enumerate() {
                assert!(chunk[r..].iter().all(|v| v.to_f64() == 0.0), "{}: padding of row {row}", what("y"));
            }
            // Ascend's zero padding gives bit for bit the same results as garbage.
            let z = nn
                .ascend_layer_norm_rstd(&zeros, r, r_pad, g, bt, EPS as f32)
                .unwrap_or_else(|e| panic!("{}: {e}", what("call on zero padding")));
            assert_eq!(z.y, out.y, "{}", what("y with zero vs garbage padding"));
            assert_eq!(z.mean, out.mean, "{}", what("mean with zero vs garbage padding"));
            assert_eq!(z.rstd, out.rstd, "{}", what("rstd with zero vs garbage padding"));
        }
    }
}

#[test]
fn rstd_form_fp32_matches_float64_whatever_the_padding() {
    check_rstd_form::<f32, f32>(0xa5_0011);
}

#[test]
fn rstd_form_fp16_matches_float64_whatever_the_padding() {
    check_rstd_form::<f16, f16>(0xa5_0012);
    check_rstd_form::<f16, f32>(0xa5_0013);
}

#[test]
fn rstd_form_bf16_matches_float64_whatever_the_padding() {
    check_rstd_form::<bf16, bf16>(0xa5_0014);
    check_rstd_form::<bf16, f32>(0xa5_0015);
}

#[test]
fn rstd_form_takes_gamma_beta_padded_like_the_rows() {
    // Ascend allocates gamma and beta with rLengthWithPadding elements: the padding is
    // ignored.
    let nn = nn();
    let mut rng = seeded(0xa5_0016);
    let (a, r, r_pad) = (4, 37, 40);
    let x: Vec<f32> = randn(&mut rng, a * r_pad, 0.5, 2.0);
    let (gamma, beta) = affine::<f32>(&mut rng, r);
    let pad = |v: &[f32]| v.iter().copied().chain([f32::NAN; 3]).collect::<Vec<f32>>();
    let short = nn.ascend_layer_norm_rstd(&x, r, r_pad, Some(&gamma), Some(&beta), 1e-5);
    let long = nn.ascend_layer_norm_rstd(&x, r, r_pad, Some(&pad(&gamma)), Some(&pad(&beta)), 1e-5);
    let (short, long) = (short.unwrap_or_else(|e| panic!("{e}")), long.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(short.y, long.y);
}

// ---------------------------------------------------------------------------------------
// LayerNormGradBeta.

fn check_grad_beta<T: Num>(seed: u64) {
    let nn = nn();
    let mut rng = seeded(seed);
    // (B·S, H): rows and columns not multiples of the 32 × 128 blocks nor of 4.
    for (m, h) in [(1, 1), (15, 3), (77, 1000), (33, 1537)] {
        let what = |v: &str| format!("{} {v} of [{m}, {h}]", T::SIG);
        let res: Vec<T> = randn(&mut rng, m * h, 0.0, 1.0);
        let dy: Vec<T> = randn(&mut rng, m * h, 0.0, 0.1);
        let out = nn.layer_norm_grad_beta(&res, &dy, h).unwrap_or_else(|e| panic!("{}: {e}", what("call")));
        let (res, dy) = (wide(&res), wide(&dy));
        let (mut g, mut b, mut g_abs, mut b_abs) = (vec![0.0; h], vec![0.0; h], vec![0.0; h], vec![0.0; h]);
        for (i, (r, d)) in res.iter().zip(&dy).enumerate() {
            g[i % h] += d * r;
            b[i % h] += d;
            g_abs[i % h] += (d * r).abs();
            b_abs[i % h] += d.abs();
        }
        // fp32 products (exact for half inputs) summed in fp32: per column, chains of at most
        // m additions, so within m·u32 of the sum of magnitudes; then one rounding to T.
        let u32 = <f32 as Num>::U;
        let bound = |abs: &[f64]| {
            let abs = abs.to_vec();
            move |i: usize, w: f64| 2.0 * T::U * w.abs() + (m as f64 + 1.0) * u32 * abs[i] + 1e-30
        };
        assert_within(&what("pd_gamma"), &wide(&out.pd_gamma), &g, bound(&g_abs));
        assert_within(&what("pd_beta"), &wide(&out.pd_beta), &b, bound(&b_abs));
    }
}

#[test]
fn grad_beta_fp32_matches_float64() {
    check_grad_beta::<f32>(0xa5_0021);
}

#[test]
fn grad_beta_fp16_matches_float64() {
    check_grad_beta::<f16>(0xa5_0022);
}

#[test]
fn grad_beta_bf16_matches_float64() {
    check_grad_beta::<bf16>(0xa5_0023);
}

// ---------------------------------------------------------------------------------------
// Bad inputs.

#[test]
fn bad_shapes_are_errors() {
    let nn = nn();
    let x = vec![0.25f32; 24];
    let (g, b) = (vec![1.0f32; 6], vec![0.0f32; 6]);
    let e = shape_error(nn.ascend_layer_norm(&x, 5, Some(&g), Some(&b), 1e-5));
    assert!(e.contains("not rows of n = 5"), "{e}");
    let e = shape_error(nn.ascend_layer_norm(&x, 6, Some(&g[..5]), Some(&b), 1e-5));
    assert!(e.contains("gamma has 5 elements: expected H = 6"), "{e}");
    let e = shape_error(nn.ascend_layer_norm(&x, 6, None, Some(&b[..2]), 1e-5));
    assert!(e.contains("beta has 2"), "{e}");

    let e = shape_error(nn.ascend_layer_norm_rstd(&x, 7, 6, Some(&g), Some(&b), 1e-5));
    assert!(e.contains("expected 0 < rLength <= rLengthWithPadding"), "{e}");
    let e = shape_error(nn.ascend_layer_norm_rstd(&x, 0, 6, None::<&[f32]>, None, 1e-5));
    assert!(e.contains("rLength 0"), "{e}");
    let e = shape_error(nn.ascend_layer_norm_rstd(&x, 5, 5, Some(&g[..5]), None, 1e-5));
    assert!(e.contains("not rows of n = 5"), "{e}");
    let e = shape_error(nn.ascend_layer_norm_rstd(&x, 5, 6, Some(&g[..4]), None, 1e-5));
    assert!(e.contains("gamma has 4 elements: expected rLength = 5 (or rLengthWithPadding = 6)"), "{e}");

    let e = shape_error(nn.layer_norm_grad_beta(&x, &x[..12], 6));
    assert!(e.contains("dy has 12"), "{e}");
    let e = shape_error(nn.layer_norm_grad_beta(&x, &x, 0));
    assert!(e.contains("not rows of n = 0"), "{e}");
    let e = shape_error(nn.layer_norm_grad_beta(&x, &x, 7));
    assert!(e.contains("resForGamma has 24 elements"), "{e}");
}
