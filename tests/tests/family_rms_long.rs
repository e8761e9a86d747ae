//! The layer-norm family of `crates/lnc-nn/kernels`: RMSNorm forward and backward
//! (`rms_norm.py`) and the long-row layer-norm forward that loops over its row in chunks
//! (`layer_norm_long.py`), loaded from their files and run
//!
//! - on random data of awkward sizes (never a multiple of the block or of 4, rows padded
//!   to a stride larger than N), every output poisoned with NaN, against float64
//!   references, with x, y, w, b, dy, dx and dw stored in fp32, fp16 and bf16 (rstd, mean
//!   and the per-row partial dw in fp32);
//! - through the JIT-vs-interpreter differential harness on small sizes;
//! - and their block IR (`Stage::Opt`) and loop IR (`Stage::Lir`) are snapshotted.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::{Case, Check, diff};
use common::*;
use half::{bf16, f16};
use lnc::{DumpRequest, Stage};

const RMS_NORM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/rms_norm.py");
const LAYER_NORM_LONG: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/lnc-nn/kernels/layer_norm_long.py");

const EPS: f32 = 1e-5;

/// Value written into the padding of input rows (between N and the stride): a kernel
/// reading it would visibly change its sums.
const PAD: f32 = 1e4;

fn load_file(path: &str) -> lnc::Module {
    lnc::Jit::new().load(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

use common::Float as Elem;

fn to_elems<T: Elem>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

fn to_f32s<T: Elem>(v: &[T]) -> Vec<f32> {
    v.iter().map(|&x| x.to_f32()).collect()
}

fn nans<T: Elem>(len: usize) -> Vec<T> {
    vec![T::from_f32(f32::NAN); len]
}

/// `m` dense rows of `n` laid out with a row stride, the padding filled with `fill`.
fn padded(dense: &[f32], n: usize, stride: usize, fill: f32) -> Vec<f32> {
    let m = dense.len() / n;
    let mut out = vec![fill; m * stride];
    for r in 0..m {
        out[r * stride..r * stride + n].copy_from_slice(&dense[r * n..(r + 1) * n]);
    }
    out
}

/// The first `n` elements of each row of a strided buffer, as f32.
fn dense<T: Elem>(v: &[T], n: usize, stride: usize) -> Vec<f32> {
    let m = v.len() / stride;
    (0..m).flat_map(|r| v[r * stride..r * stride + n].iter().map(|&x| x.to_f32())).collect()
}

/// The padding of every row (elements `n..stride`) must still be NaN.
#[track_caller]
fn assert_padding_untouched<T: Elem>(what: &str, v: &[T], n: usize, stride: usize) {
    for r in 0..v.len() / stride {
        for c in n..stride {
            assert!(v[r * stride + c].to_f32().is_nan(), "{what}: padding ({r}, {c}) was written");
        }
    }
}

/// Asserts `|got - want| <= tol[i]` element by element (NaN, an unwritten element, always
/// fails); prints the worst ratio of error to tolerance.
#[track_caller]
fn assert_within(what: &str, got: &[f32], want: &[f64], tol: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    assert_eq!(got.len(), tol.len(), "{what}: tolerances");
    let mut worst = 0.0f64;
    for (i, ((&g, &w), &t)) in got.iter().zip(want).zip(tol).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(!g.is_nan() && err <= t, "{what}[{i}] = {g}, expected {w} (tolerance {t})");
        worst = worst.max(err / t);
    }
    eprintln!("{what}: worst error / tolerance = {worst:.3}");
}

/// `atol + rtol * |want|` per element.
fn tols(want: &[f64], atol: f64, rtol: f64) -> Vec<f64> {
    want.iter().map(|w| atol + rtol * w.abs()).collect()
}

// ---------------------------------------------------------------------------------------
// RMSNorm
// ---------------------------------------------------------------------------------------

fn rms_fwd_sig(t: &str, block: usize) -> String {
    format!("*{t},*{t},*{t},*fp32,i32,i32,fp32,{block}")
}

fn rms_dx_sig(t: &str, block: usize) -> String {
    format!("*{t},*{t},*fp32,*{t},*{t},*fp32,i32,i32,{block}")
}

fn rms_dw_sig(t: &str) -> String {
    format!("*fp32,*{t},i32,i32,32,128")
}

/// RMSNorm in float64 on dense rows, with what the tolerances scale with.
struct RmsRef {
    y: Vec<f64>,
    rstd: Vec<f64>,
    dx: Vec<f64>,
    /// Per-row partial dw, dy * xhat (`m × n`).
    pdw: Vec<f64>,
    dw: Vec<f64>,
    /// Per element, the size of the terms dx is computed from (before cancellation).
    dx_scale: Vec<f64>,
    /// Per column, the sum over the rows of |dy * xhat|.
    dw_scale: Vec<f64>,
}

fn rms_ref(x: &[f32], w: &[f32], dy: &[f32], n: usize, eps: f64) -> RmsRef {
    let m = x.len() / n;
    let mut r = RmsRef {
        y: vec![0.0; m * n],
        rstd: vec![0.0; m],
        dx: vec![0.0; m * n],
        pdw: vec![0.0; m * n],
        dw: vec![0.0; n],
        dx_scale: vec![0.0; m * n],
        dw_scale: vec![0.0; n],
    };
    for row in 0..m {
        let xs: Vec<f64> = x[row * n..(row + 1) * n].iter().map(|&v| v as f64).collect();
        let ms = xs.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let rstd = 1.0 / (ms + eps).sqrt();
        r.rstd[row] = rstd;
        let xhat: Vec<f64> = xs.iter().map(|v| v * rstd).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] as f64 * dy[row * n + c] as f64).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c1_abs = xhat.iter().zip(&wdy).map(|(a, b)| (a * b).abs()).sum::<f64>() / n as f64;
        for c in 0..n {
            let k = row * n + c;
            r.y[k] = xhat[c] * w[c] as f64;
            r.dx[k] = (wdy[c] - xhat[c] * c1) * rstd;
            r.dx_scale[k] = (wdy[c].abs() + xhat[c].abs() * c1_abs) * rstd;
            r.pdw[k] = dy[k] as f64 * xhat[c];
            r.dw[c] += r.pdw[k];
            r.dw_scale[c] += r.pdw[k].abs();
        }
    }
    r
}

/// (M, N, row stride): N never a multiple of 4 nor a power of two (but 1), M = 37 not a
/// multiple of the dw kernel's BLOCK_SIZE_M, rows padded in the last case.
const RMS_SIZES: [(usize, usize, usize); 4] = [(37, 1, 1), (37, 17, 17), (37, 1000, 1000), (37, 1537, 1541)];

fn rms_matches_float64<T: Elem>() {
    let module = load_file(RMS_NORM);
    let mut rng = rng();
    let u = T::U;
    for (m, n, stride) in RMS_SIZES {
        let what = |v: &str| format!("{v} ({} {m}x{n}, stride {stride})", T::SIG);
        let block = n.next_power_of_two();
        let x: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, 0.3, 1.0), n, stride, PAD));
        let w: Vec<T> = to_elems(&randn(&mut rng, n, 1.0, 0.3));
        let dy: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, 0.0, 0.1), n, stride, PAD));

        // Forward.
        let fwd =
            module.kernel("_rms_norm_fwd", &rms_fwd_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
        let (mut y, mut rstd) = (nans::<T>(m * stride), vec![f32::NAN; m]);
        fwd.launch(m as u32, &lnc::args![&x, &mut y, &w, &mut rstd, stride as i32, n as i32, EPS])
            .unwrap_or_else(|e| panic!("{}: {e}", what("forward launch")));

        // Backward: dx and the per-row partial dw, then their sum over the rows.
        let dx_k =
            module.kernel("_rms_norm_bwd_dx", &rms_dx_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
        let (mut dx, mut pdw) = (nans::<T>(m * stride), vec![f32::NAN; m * n]);
        dx_k.launch(m as u32, &lnc::args![&mut dx, &dy, &mut pdw, &x, &w, &rstd, stride as i32, n as i32])
            .unwrap_or_else(|e| panic!("{}: {e}", what("dx launch")));
        let dw_k = module.kernel("_rms_norm_bwd_dw", &rms_dw_sig(T::SIG)).unwrap_or_else(|e| panic!("{e}"));
        let mut dw = nans::<T>(n);
        dw_k.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &mut dw, m as i32, n as i32])
            .unwrap_or_else(|e| panic!("{}: {e}", what("dw launch")));

        // The reference runs on the same (rounded) inputs, in float64.
        let (xd, wf, dyd) = (dense(&x, n, stride), to_f32s(&w), dense(&dy, n, stride));
        let r = rms_ref(&xd, &wf, &dyd, n, EPS as f64);
        // fp32 computations (a few roundings, rstd from an fp32 sum of n squares) rounded
        // once to T on the store.
        let y_tol: Vec<f64> = r.y.iter().map(|v| (2.0 * u + 1e-5) * v.abs() + 1e-6).collect();
        assert_within(&what("y"), &dense(&y, n, stride), &r.y, &y_tol);
        assert_padding_untouched(&what("y"), &y, n, stride);
        assert_within(&what("rstd"), &rstd, &r.rstd, &tols(&r.rstd, 0.0, 1e-5));
        // dx cancels: its error scales with the terms it is computed from.
        let dx_tol: Vec<f64> =
            r.dx.iter().zip(&r.dx_scale).map(|(v, s)| 2.0 * u * v.abs() + 1e-5 * s + 1e-7).collect();
        assert_within(&what("dx"), &dense(&dx, n, stride), &r.dx, &dx_tol);
        assert_padding_untouched(&what("dx"), &dx, n, stride);
        // Partial dw: one fp32 product per element; dw: m of them summed in fp32, rounded
        // once to T.
        assert_within(&what("partial dw"), &pdw, &r.pdw, &tols(&r.pdw, 1e-9, 1e-5));
        let dw_tol: Vec<f64> =
            r.dw.iter().zip(&r.dw_scale).map(|(v, s)| 2.0 * u * v.abs() + 1e-5 * s + 1e-7).collect();
        assert_within(&what("dw"), &to_f32s(&dw), &r.dw, &dw_tol);
    }
}

#[test]
fn rms_norm_fp32_matches_float64_reference() {
    rms_matches_float64::<f32>();
}

#[test]
fn rms_norm_fp16_matches_float64_reference() {
    rms_matches_float64::<f16>();
}

#[test]
fn rms_norm_bf16_matches_float64_reference() {
    rms_matches_float64::<bf16>();
}

#[test]
fn rms_norm_dw_reduces_over_many_row_blocks() {
    // The dw kernel alone on an M that takes several BLOCK_SIZE_M steps with a partial
    // last one, N spanning several programs with a partial last one.
    let module = load_file(RMS_NORM);
    let mut rng = rng();
    let (m, n) = (101usize, 300usize);
    let pdw = randn(&mut rng, m * n, 0.0, 1.0);
    let k = module.kernel("_rms_norm_bwd_dw", &rms_dw_sig("fp32")).unwrap_or_else(|e| panic!("{e}"));
    let mut dw = vec![f32::NAN; n];
    k.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &mut dw, m as i32, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    let want: Vec<f64> = (0..n).map(|c| (0..m).map(|r| pdw[r * n + c] as f64).sum()).collect();
    assert_close("dw", &dw, &want, 1e-4, 1e-5);
}

// ---------------------------------------------------------------------------------------
// Long-row layer norm
// ---------------------------------------------------------------------------------------

fn long_sig(t: &str, block: usize) -> String {
    format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}")
}

/// (M, N, row stride, BLOCK_SIZE): rows of several chunks with a partial last one, up to
/// ~300 K elements; a row shorter than one chunk, a row of one element, a row that is an
/// exact number of chunks, padded rows.
const LONG_SIZES: [(usize, usize, usize, usize); 6] = [
    (37, 1, 1, 1024),
    (37, 17, 19, 1024),
    (37, 5000, 5000, 1024),
    (5, 2048, 2051, 512),
    (9, 70001, 70003, 1024),
    (3, 300_007, 300_007, 1024),
];

fn long_matches_float64<T: Elem>() {
    let module = load_file(LAYER_NORM_LONG);
    let mut rng = rng();
    let u = T::U;
    for (m, n, stride, block) in LONG_SIZES {
        let what = |v: &str| format!("{v} ({} {m}x{n}, stride {stride}, BLOCK_SIZE {block})", T::SIG);
        // The tutorial's distributions: a mean far from 0 makes the two-pass variance matter.
        let x: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, -2.3, 0.5), n, stride, PAD));
        let w: Vec<T> = to_elems(&randn(&mut rng, n, 1.0, 0.3));
        let b: Vec<T> = to_elems(&randn(&mut rng, n, 0.0, 0.5));
        let k =
            module.kernel("_layer_norm_fwd_long", &long_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
        let (mut y, mut mean, mut rstd) = (nans::<T>(m * stride), vec![f32::NAN; m], vec![f32::NAN; m]);
        k.launch(
            m as u32,
            &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, stride as i32, n as i32, EPS],
        )
        .unwrap_or_else(|e| panic!("{}: {e}", what("launch")));

        let (xd, wf, bf) = (dense(&x, n, stride), to_f32s(&w), to_f32s(&b));
        let (ry, rmean, rrstd) = layer_norm_ref(&xd, &wf, &bf, n, EPS as f64);
        // fp32 sums of up to 300 K terms, accumulated in BLOCK_SIZE lanes.
        let mean_tol = tols(&rmean, 1e-6, 1e-6);
        assert_within(&what("mean"), &mean, &rmean, &mean_tol);
        assert_within(&what("rstd"), &rstd, &rrstd, &tols(&rrstd, 0.0, 1e-5));
        // y = (x - mean) * rstd * w + b: the mean's error times rstd * |w|, a few fp32
        // roundings of |xhat * w| and |b|, then one rounding to T.
        let tol: Vec<f64> = (0..m * n)
            .map(|k| {
                let (r, c) = (k / n, k % n);
                let (w, b) = (wf[c] as f64, bf[c] as f64);
                let xhat = (xd[k] as f64 - rmean[r]) * rrstd[r];
                2.0 * u * ry[k].abs()
                    + mean_tol[r] * rrstd[r] * w.abs()
                    + 1e-5 * ((xhat * w).abs() + b.abs())
                    + 1e-6
            })
            .collect();
        assert_within(&what("y"), &dense(&y, n, stride), &ry, &tol);
        assert_padding_untouched(&what("y"), &y, n, stride);
    }
}

#[test]
fn layer_norm_long_fp32_matches_float64_reference() {
    long_matches_float64::<f32>();
}

#[test]
fn layer_norm_long_fp16_matches_float64_reference() {
    long_matches_float64::<f16>();
}

#[test]
fn layer_norm_long_bf16_matches_float64_reference() {
    long_matches_float64::<bf16>();
}

// ---------------------------------------------------------------------------------------
// JIT against the interpreter
// ---------------------------------------------------------------------------------------

/// Relative tolerance between two fp32 sums of `n` terms taken in different orders (the
/// JIT accumulates in lanes, the interpreter in sequence).
fn order_tol(n: usize) -> f64 {
    2e-6 * (n as f64).sqrt()
}

fn rms_jit_equals_interpreter<T: Elem>() {
    let module = load_file(RMS_NORM);
    let mut rng = rng();
    for (m, n, stride, block) in [(2usize, 1usize, 1usize, 1usize), (5, 17, 19, 32), (3, 100, 100, 128)] {
        let tol = order_tol(n);
        let x: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, 0.3, 1.0), n, stride, PAD));
        let w: Vec<T> = to_elems(&randn(&mut rng, n, 1.0, 0.3));
        let dy: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, 0.0, 0.1), n, stride, PAD));
        let fwd = Case::new(
            "_rms_norm_fwd",
            &rms_fwd_sig(T::SIG, block),
            m as u32,
            vec![
                T::arg(x.clone()),
                T::arg(nans(m * stride)),
                T::arg(w.clone()),
                vec![f32::NAN; m].into(),
                (stride as i32).into(),
                (n as i32).into(),
                EPS.into(),
            ],
        )
        .check(1, Check::Close { atol: tol, rtol: 2.0 * T::U + tol })
        .check(3, Check::Close { atol: tol, rtol: tol });
        let out = diff(&module, &fwd);
        let rstd = out[3].clone();

        // The same rstd on both sides: dx differs only by the order of one sum (and dx
        // cancels, hence the absolute tolerance), the partial products not at all.
        let dx = Case::new(
            "_rms_norm_bwd_dx",
            &rms_dx_sig(T::SIG, block),
            m as u32,
            vec![
                T::arg(nans(m * stride)),
                T::arg(dy),
                vec![f32::NAN; m * n].into(),
                T::arg(x),
                T::arg(w),
                rstd,
                (stride as i32).into(),
                (n as i32).into(),
            ],
        )
        .check(0, Check::Close { atol: 1e-5, rtol: 2.0 * T::U + tol });
        let out = diff(&module, &dx);

        let dw = Case::new(
            "_rms_norm_bwd_dw",
            &rms_dw_sig(T::SIG),
            n.div_ceil(128) as u32,
            vec![out[2].clone(), T::arg(nans(n)), (m as i32).into(), (n as i32).into()],
        )
        .check(1, Check::Close { atol: 1e-6, rtol: 2.0 * T::U + 1e-5 });
        diff(&module, &dw);
    }
}

#[test]
fn rms_norm_fp32_jit_equals_interpreter() {
    rms_jit_equals_interpreter::<f32>();
}

#[test]
fn rms_norm_fp16_jit_equals_interpreter() {
    rms_jit_equals_interpreter::<f16>();
}

#[test]
fn rms_norm_bf16_jit_equals_interpreter() {
    rms_jit_equals_interpreter::<bf16>();
}

#[test]
fn rms_norm_dw_jit_equals_interpreter_on_many_row_blocks() {
    let module = load_file(RMS_NORM);
    let mut rng = rng();
    let (m, n) = (70usize, 131usize);
    let case = Case::new(
        "_rms_norm_bwd_dw",
        &rms_dw_sig("fp32"),
        n.div_ceil(128) as u32,
        vec![
            randn(&mut rng, m * n, 0.0, 1.0).into(),
            vec![f32::NAN; n].into(),
            (m as i32).into(),
            (n as i32).into(),
        ],
    )
    .check(1, Check::Close { atol: 1e-5, rtol: 1e-5 });
    diff(&module, &case);
}

fn long_jit_equals_interpreter<T: Elem>() {
    let module = load_file(LAYER_NORM_LONG);
    let mut rng = rng();
    for (m, n, stride, block) in
        [(2usize, 1usize, 1usize, 4usize), (3, 37, 40, 8), (2, 300, 300, 64), (2, 1500, 1503, 1024)]
    {
        let tol = order_tol(n);
        let x: Vec<T> = to_elems(&padded(&randn(&mut rng, m * n, -2.3, 0.5), n, stride, PAD));
        let w: Vec<T> = to_elems(&randn(&mut rng, n, 1.0, 0.3));
        let b: Vec<T> = to_elems(&randn(&mut rng, n, 0.0, 0.5));
        let case = Case::new(
            "_layer_norm_fwd_long",
            &long_sig(T::SIG, block),
            m as u32,
            vec![
                T::arg(x),
                T::arg(nans(m * stride)),
                T::arg(w),
                T::arg(b),
                vec![f32::NAN; m].into(),
                vec![f32::NAN; m].into(),
                (stride as i32).into(),
                (n as i32).into(),
                EPS.into(),
            ],
        )
        .check(1, Check::Close { atol: 4.0 * tol, rtol: 2.0 * T::U + tol })
        .check(4, Check::Close { atol: tol, rtol: tol })
        .check(5, Check::Close { atol: tol, rtol: tol });
        diff(&module, &case);
    }
}

#[test]
fn layer_norm_long_fp32_jit_equals_interpreter() {
    long_jit_equals_interpreter::<f32>();
}

#[test]
fn layer_norm_long_fp16_jit_equals_interpreter() {
    long_jit_equals_interpreter::<f16>();
}

#[test]
fn layer_norm_long_bf16_jit_equals_interpreter() {
    long_jit_equals_interpreter::<bf16>();
}

// ---------------------------------------------------------------------------------------
// Snapshots of the block IR and the loop IR
// ---------------------------------------------------------------------------------------

fn dump(path: &str, kernel: &str, sig: &str, stage: Stage) -> String {
    // The 8-lane tiles of hosts with AVX2, on every host: the same text everywhere.
    let jit = lnc::Jit::with_options(lnc::CompileOptions { verify: true, lanes: 8, ..Default::default() });
    let module = jit.load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let req = DumpRequest { stages: vec![stage], checked: true, ..Default::default() };
    let dumps = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dumps.len(), 1, "one dump of {kernel}");
    dumps.into_iter().next().map(|d| d.text).unwrap_or_default()
}

const RMS_FWD_SIG: &str = "*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024";
const RMS_DX_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,1024";
const RMS_DW_SIG: &str = "*fp32,*fp32,i32,i32,32,128";
const LONG_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024";

#[test]
fn rms_fwd_opt() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_fwd", RMS_FWD_SIG, Stage::Opt));
}

#[test]
fn rms_fwd_lir() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_fwd", RMS_FWD_SIG, Stage::Lir));
}

#[test]
fn rms_bwd_dx_opt() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_bwd_dx", RMS_DX_SIG, Stage::Opt));
}

#[test]
fn rms_bwd_dx_lir() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_bwd_dx", RMS_DX_SIG, Stage::Lir));
}

#[test]
fn rms_bwd_dw_opt() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_bwd_dw", RMS_DW_SIG, Stage::Opt));
}

#[test]
fn rms_bwd_dw_lir() {
    insta::assert_snapshot!(dump(RMS_NORM, "_rms_norm_bwd_dw", RMS_DW_SIG, Stage::Lir));
}

#[test]
fn layer_norm_long_opt() {
    insta::assert_snapshot!(dump(LAYER_NORM_LONG, "_layer_norm_fwd_long", LONG_SIG, Stage::Opt));
}

#[test]
fn layer_norm_long_lir() {
    insta::assert_snapshot!(dump(LAYER_NORM_LONG, "_layer_norm_fwd_long", LONG_SIG, Stage::Lir));
}
