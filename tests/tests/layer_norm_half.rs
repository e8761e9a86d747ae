//! The seed's three layer-norm kernels on half-precision tensors, with the tutorial's
//! dtype layout (its `test_layer_norm(..., dtype=torch.float16)`): x, y, w, b, dy, dx and
//! the partial and final dw/db in `fp16` or `bf16`, mean and rstd in `fp32`, the kernels
//! computing in `fp32`. Checked against a float64 reference within the error half
//! precision allows, and against the block-IR interpreter.

mod common;

use common::diff::{Case, Check, diff};
use common::*;
use half::{bf16, f16};

use common::Float as Half;

fn to_half<T: Half>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

fn to_f32<T: Half>(v: &[T]) -> Vec<f32> {
    v.iter().map(|&x| x.to_f32()).collect()
}

/// Random layer-norm data, already rounded to `T`: x, w, b, dy (the tutorial's
/// distributions).
fn data<T: Half>(rng: &mut rand::rngs::StdRng, m: usize, n: usize) -> [Vec<T>; 4] {
    [
        to_half(&randn(rng, m * n, -2.3, 0.5)),
        to_half(&randn(rng, n, 1.0, 0.3)),
        to_half(&randn(rng, n, 0.0, 0.5)),
        to_half(&randn(rng, m * n, 0.0, 0.1)),
    ]
}

/// Everything the tutorial's forward and backward passes produce.
struct Flow<T> {
    y: Vec<T>,
    mean: Vec<f32>,
    rstd: Vec<f32>,
    dx: Vec<T>,
    /// The partial sums of the dx kernel, `group × n`.
    pdw: Vec<T>,
    pdb: Vec<T>,
    dw: Vec<T>,
    db: Vec<T>,
}

fn fwd_sig(t: &str, block: usize) -> String {
    format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}")
}

fn dx_sig(t: &str, group: usize, block: usize) -> String {
    format!("*{t},*{t},*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}")
}

fn dwdb_sig(t: &str) -> String {
    format!("*{t},*{t},*{t},*{t},i32,i32,32,128")
}

/// Runs forward, dx and dwdb like `LayerNorm.forward/backward` of the tutorial, every
/// output poisoned with NaN first.
#[allow(clippy::too_many_arguments)]
fn run_flow<T: Half>(
    module: &lnc::Module,
    x: &[T],
    w: &[T],
    b: &[T],
    dy: &[T],
    n: usize,
    group: usize,
    eps: f32,
) -> Flow<T> {
    let m = x.len() / n;
    let block = n.next_power_of_two();
    let nan = T::from_f32(f32::NAN);
    let fwd =
        module.kernel("_layer_norm_fwd_fused", &fwd_sig(T::SIG, block)).unwrap_or_else(|e| panic!("{e}"));
    let (mut y, mut mean, mut rstd) = (vec![nan; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
    fwd.launch(m as u32, &lnc::args![x, &mut y, w, b, &mut mean, &mut rstd, n as i32, n as i32, eps])
        .unwrap_or_else(|e| panic!("{e}"));

    let dx_k = module
        .kernel("_layer_norm_bwd_dx_fused", &dx_sig(T::SIG, group, block))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut locks = vec![0i32; 2 * group];
    let (mut pdw, mut pdb) = (vec![nan; group * n], vec![nan; group * n]);
    let mut dx = vec![nan; m * n];
    dx_k.launch(
        m as u32,
        &lnc::args![
            &mut dx, dy, &mut pdw, &mut pdb, x, w, b, &mean, &rstd, &mut locks, n as i32, n as i32, eps
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(locks[..group].iter().all(|&l| l == 0), "every lock is released");

    let dwdb = module.kernel("_layer_norm_bwd_dwdb", &dwdb_sig(T::SIG)).unwrap_or_else(|e| panic!("{e}"));
    let (mut dw, mut db) = (vec![nan; n], vec![nan; n]);
    // Only the groups some row maps to hold partial sums (see layer_norm_bwd.rs).
    let rows = group.min(m);
    dwdb.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &pdb, &mut dw, &mut db, rows as i32, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    Flow { y, mean, rstd, dx, pdw, pdb, dw, db }
}

/// Asserts `|got - want| <= tol[i]` element by element (NaN fails).
#[track_caller]
fn assert_within(what: &str, got: &[f32], want: &[f64], tol: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &t)) in got.iter().zip(want).zip(tol).enumerate() {
        assert!(!g.is_nan() && (g as f64 - w).abs() <= t, "{what}[{i}] = {g}, expected {w} (tolerance {t})");
    }
}

/// Per column, the sums of |dy·xhat| and |dy| over the rows (float64): what the rounding
/// errors of the partial sums scale with.
fn abs_sums(x: &[f32], dy: &[f32], n: usize, eps: f64) -> (Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut sw, mut sb) = (vec![0.0; n], vec![0.0; n]);
    let (_, mean, rstd) = layer_norm_ref(x, &vec![1.0; n], &vec![0.0; n], n, eps);
    for r in 0..m {
        for c in 0..n {
            let xhat = (x[r * n + c] as f64 - mean[r]) * rstd[r];
            sw[c] += (dy[r * n + c] as f64 * xhat).abs();
            sb[c] += (dy[r * n + c] as f64).abs();
        }
    }
    (sw, sb)
}

fn check_against_float64<T: Half>() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    let u = T::U;
    let eps = 1e-5f32;
    // (M, N, GROUP_SIZE_M): N never a power of two; the tutorial's group sizes, and small
    // ones so that several rows accumulate into each half-precision partial sum.
    for (m, n, group) in
        [(3usize, 17usize, group_size_m(17)), (151, 1000, 256), (300, 1537, 128), (64, 300, 4), (7, 4097, 96)]
    {
        let what = |v: &str| format!("{v} ({} {m}x{n}, GROUP_SIZE_M {group})", T::SIG);
        let [x, w, b, dy] = data::<T>(&mut rng, m, n);
        let f = run_flow(&module, &x, &w, &b, &dy, n, group, eps);
        // The reference runs on the same (rounded) inputs, in float64.
        let (xf, wf, bf, dyf) = (to_f32(&x), to_f32(&w), to_f32(&b), to_f32(&dy));
        let (ry, rmean, rrstd) = layer_norm_ref(&xf, &wf, &bf, n, eps as f64);
        let (rdx, rdw, rdb) = backward_ref(&xf, &wf, &dyf, n, eps as f64);

        // y and dx: fp32 computations rounded once to T on the store.
        let tol = |r: &[f64], atol: f64| -> Vec<f64> {
            r.iter().map(|v| atol + (2.0 * u + 1e-5) * v.abs()).collect()
        };
        assert_within(&what("y"), &to_f32(&f.y), &ry, &tol(&ry, 1e-5));
        assert_close(&what("mean"), &f.mean, &rmean, 1e-5, 1e-5);
        assert_close(&what("rstd"), &f.rstd, &rrstd, 1e-5, 1e-5);
        assert_within(&what("dx"), &to_f32(&f.dx), &rdx, &tol(&rdx, 1e-4));

        // dw and db: every product rounded to T, up to `k` of them added in T per group
        // (each addition rounded), the groups summed in fp32, the total rounded to T.
        let k = m.div_ceil(group) as f64;
        let (sw, sb) = abs_sums(&xf, &dyf, n, eps as f64);
        let bound = |s: &[f64], r: &[f64]| -> Vec<f64> {
            s.iter().zip(r).map(|(s, r)| (k + 1.0) * u * s + u * r.abs() + 1e-5 * (1.0 + s)).collect()
        };
        assert_within(&what("dw"), &to_f32(&f.dw), &rdw, &bound(&sw, &rdw));
        assert_within(&what("db"), &to_f32(&f.db), &rdb, &bound(&sb, &rdb));
        // The partial sums of the groups some row maps to add up to the same totals.
        let rows = group.min(m);
        for c in 0..n {
            let pw: f64 = (0..rows).map(|g| f.pdw[g * n + c].to_f32() as f64).sum();
            let pb: f64 = (0..rows).map(|g| f.pdb[g * n + c].to_f32() as f64).sum();
            assert!((pw - rdw[c]).abs() <= bound(&sw[c..c + 1], &rdw[c..c + 1])[0], "{}", what("partial dw"));
            assert!((pb - rdb[c]).abs() <= bound(&sb[c..c + 1], &rdb[c..c + 1])[0], "{}", what("partial db"));
        }
    }
}

#[test]
fn fp16_forward_and_backward_match_float64_reference() {
    check_against_float64::<f16>();
}

#[test]
fn bf16_forward_and_backward_match_float64_reference() {
    check_against_float64::<bf16>();
}

/// Each kernel through the JIT and through the interpreter on the front end's block IR,
/// on the same half-precision inputs.
fn check_against_interpreter<T: Half>() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    let eps = 1e-5f32;
    for (m, n, group) in [(3usize, 17usize, 256usize), (20, 300, 8)] {
        let [x, w, b, dy] = data::<T>(&mut rng, m, n);
        let block = n.next_power_of_two();
        let nan = T::from_f32(f32::NAN);
        let poison = |len: usize| T::arg(vec![nan; len]);

        // Forward. mean and rstd are fp32 sums whose order differs between the two (the
        // JIT accumulates in lanes): fp32 rounding of an n-term sum apart.
        let tol = 2e-6 * (n as f64).sqrt();
        let fwd = Case::new(
            "_layer_norm_fwd_fused",
            &fwd_sig(T::SIG, block),
            m as u32,
            vec![
                T::arg(x.clone()),
                poison(m * n),
                T::arg(w.clone()),
                T::arg(b.clone()),
                vec![f32::NAN; m].into(),
                vec![f32::NAN; m].into(),
                (n as i32).into(),
                (n as i32).into(),
                eps.into(),
            ],
        )
        .check(4, Check::Close { atol: tol, rtol: tol })
        .check(5, Check::Close { atol: tol, rtol: tol });
        let out = diff(&module, &fwd);
        let (mean, rstd) = (out[4].clone(), out[5].clone());

        // dx and the partial sums. With several rows per group the partial sums depend on
        // the order the programs take the lock in: within the rounding of `k` additions
        // in T of terms up to `big`.
        let k = m.div_ceil(group) as f64;
        let big = dy.iter().map(|v| v.to_f32().abs() as f64).fold(0.0, f64::max) * 4.0;
        let partial = Check::Close { atol: 2.0 * k * k * T::U * big, rtol: 0.0 };
        let dx = Case::new(
            "_layer_norm_bwd_dx_fused",
            &dx_sig(T::SIG, group, block),
            m as u32,
            vec![
                poison(m * n),
                T::arg(dy.clone()),
                poison(group * n),
                poison(group * n),
                T::arg(x.clone()),
                T::arg(w.clone()),
                T::arg(b.clone()),
                mean,
                rstd,
                vec![0i32; 2 * group].into(),
                (n as i32).into(),
                (n as i32).into(),
                eps.into(),
            ],
        )
        .check(2, partial)
        .check(3, partial);
        let out = diff(&module, &dx);

        // dw/db from the JIT's partial sums: no order left to differ in.
        let rows = group.min(m);
        let dwdb = Case::new(
            "_layer_norm_bwd_dwdb",
            &dwdb_sig(T::SIG),
            n.div_ceil(128) as u32,
            vec![
                out[2].clone(),
                out[3].clone(),
                poison(n),
                poison(n),
                (rows as i32).into(),
                (n as i32).into(),
            ],
        );
        diff(&module, &dwdb);
    }
}

#[test]
fn fp16_kernels_jit_equals_interpreter() {
    check_against_interpreter::<f16>();
}

#[test]
fn bf16_kernels_jit_equals_interpreter() {
    check_against_interpreter::<bf16>();
}

/// The three kernels of both `modules` on the same inputs give the same bits in every
/// output, and write every element of `y` and `dx`; one row per group, so that no result
/// depends on the order the programs take the locks in. Rows of 17 (misaligned), 1000 and
/// 2048 (aligned) and 4097 elements (alternately so).
fn same_flows<T: Half + PartialEq + std::fmt::Debug>(modules: &[lnc::Module; 2]) {
    let mut rng = rng();
    for (m, n) in [(9usize, 17usize), (37, 1000), (5, 4097), (16, 2048)] {
        let [x, w, b, dy] = data::<T>(&mut rng, m, n);
        let [r, t] = modules.each_ref().map(|module| run_flow(module, &x, &w, &b, &dy, n, m, 1e-5));
        let what = |v: &str| format!("{v} ({} {m}x{n})", T::SIG);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(r.y, t.y, "{}", what("y"));
        assert_eq!(bits(&r.mean), bits(&t.mean), "{}", what("mean"));
        assert_eq!(bits(&r.rstd), bits(&t.rstd), "{}", what("rstd"));
        assert_eq!(r.dx, t.dx, "{}", what("dx"));
        assert_eq!(r.pdw, t.pdw, "{}", what("partial dw"));
        assert_eq!(r.pdb, t.pdb, "{}", what("partial db"));
        assert_eq!(r.dw, t.dw, "{}", what("dw"));
        assert_eq!(r.db, t.db, "{}", what("db"));
        assert!(r.y.iter().chain(&r.dx).all(|v| !v.to_f32().is_nan()), "{}", what("every y and dx written"));
    }
}

/// Whole-row conversions (`row_load`/`row_store`, the default without F16C) and
/// conversions tile by tile in JIT code give the same bits ([`same_flows`]).
fn rows_equal_tiles<T: Half + PartialEq + std::fmt::Debug>() {
    // Tiles of one width in both: with 256-bit loops the width follows the plan (8 lanes
    // where a loop qualifies, as over the rows' scratch; 4 where none does, as over
    // integer-converted tiles), and the width orders a reduction's additions.
    let opts = lnc::CompileOptions { verify: true, f16c: false, lanes: 8, wide: false, ..Default::default() };
    let with_rows = lnc::Jit::with_options(opts.clone());
    let tiles = lnc::Jit::with_options(lnc::CompileOptions { half_rows: false, ..opts });
    let modules = [&with_rows, &tiles].map(seed_module);
    // Without F16C the plan converts rows: fp16 loads and stores, bf16 stores.
    let lir = |m: &lnc::Module, k: &str, sig: &str| {
        let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
        m.dump(k, sig, &req).unwrap_or_else(|e| panic!("{e}")).remove(0).text
    };
    let (fwd, dx) = (fwd_sig(T::SIG, 1024), dx_sig(T::SIG, 64, 1024));
    for (k, sig) in [("_layer_norm_fwd_fused", &fwd), ("_layer_norm_bwd_dx_fused", &dx)] {
        let (a, b) = (lir(&modules[0], k, sig), lir(&modules[1], k, sig));
        assert!(a.contains("row_store") && (T::SIG == "bf16" || a.contains("row_load")), "{k}:\n{a}");
        assert!(!b.contains("row_"), "{k}:\n{b}");
    }
    same_flows::<T>(&modules);
}

/// Rows rounded with non-temporal stores (every aligned row under a threshold of 0) give
/// the bits of cached stores ([`same_flows`]). In 8-lane tiles: 16-lane ones on a host
/// with AVX-512 store half rows in their loops ([`streamed_half_tiles_equal_cached_ones`]),
/// and so do 256-bit loops in bf16 (rounded in the loop: lnc-clif's `widen`), whose
/// tile stores stream; in 128-bit vectors the row helper streams the rows.
fn streamed_rows_equal_cached_rows<T: Half + PartialEq + std::fmt::Debug>() {
    for wide in [false, true] {
        let module = |threshold| {
            let opts = lnc::CompileOptions {
                verify: true,
                stream_threshold: threshold,
                f16c: false,
                ..lnc::CompileOptions::default().in_256_bits()
            };
            seed_module(&lnc::Jit::with_options(lnc::CompileOptions { wide, ..opts }))
        };
        let modules = [module(0), module(u64::MAX)];
        let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
        let lir = modules[0].dump("_layer_norm_fwd_fused", &fwd_sig(T::SIG, 1024), &req).expect("compiles");
        let text = &lir[0].text;
        if wide && T::SIG == "bf16" && lnc::computes_wide() {
            assert!(!text.contains("row_store") && text.contains(" stream %"), "{text}");
        } else {
            assert!(text.contains("row_store") && text.contains("] stream %"), "{text}");
        }
        same_flows::<T>(&modules);
    }
}

/// With 16-lane tiles on a host with AVX-512, half rows are stored by the 512-bit loops
/// themselves (rounded to `bf16` in the loop, converted to `fp16` by `vcvtps2ph`), with
/// non-temporal stores under a threshold of 0: the bits of cached stores.
fn streamed_half_tiles_equal_cached_ones<T: Half + PartialEq + std::fmt::Debug>() {
    let module = |threshold| {
        let opts = lnc::CompileOptions { verify: true, stream_threshold: threshold, ..Default::default() };
        seed_module(&lnc::Jit::with_options(opts))
    };
    let modules = [module(0), module(u64::MAX)];
    if lnc::computes_zmm() {
        let req = lnc::DumpRequest {
            stages: vec![lnc::Stage::Lir, lnc::Stage::Asm],
            checked: true,
            ..Default::default()
        };
        let dumps = modules[0].dump("_layer_norm_fwd_fused", &fwd_sig(T::SIG, 4096), &req).expect("compiles");
        let (lir, asm) = (&dumps[0].text, &dumps[1].text);
        assert!(!lir.contains("row_store") && lir.contains(" stream %"), "{lir}");
        assert!(asm.contains("512-bit loops"), "{asm}");
    }
    same_flows::<T>(&modules);
}

#[test]
fn fp16_streamed_tiles_equal_cached_tiles() {
    streamed_half_tiles_equal_cached_ones::<f16>();
}

#[test]
fn bf16_streamed_tiles_equal_cached_tiles() {
    streamed_half_tiles_equal_cached_ones::<bf16>();
}

#[test]
fn fp16_streamed_rows_equal_cached_rows() {
    streamed_rows_equal_cached_rows::<f16>();
}

#[test]
fn bf16_streamed_rows_equal_cached_rows() {
    streamed_rows_equal_cached_rows::<bf16>();
}

#[test]
fn fp16_row_conversions_equal_tile_conversions() {
    rows_equal_tiles::<f16>();
}

#[test]
fn bf16_row_conversions_equal_tile_conversions() {
    rows_equal_tiles::<bf16>();
}

/// fp16 tiles converted by F16C (the default where the host has it: fp16 loads and short
/// rows' stores in the loops, long streamed rows through the row helper, unless 256-bit
/// loops store them in the loops, `TileOptions::f16_stores`) give the bits of the integer
/// conversions and row helpers without it ([`same_flows`]), at row lengths on both sides
/// of the tile stores' limit: in 256-bit loops, and in 128-bit vectors, whose long rows go
/// through the helper. In 8-lane tiles (16-lane ones in 512-bit loops store long rows in
/// the loops too: [`streamed_half_tiles_equal_cached_ones`]).
#[test]
fn fp16_f16c_conversions_equal_integer_conversions() {
    let module = |f16c, wide| {
        let opts = lnc::CompileOptions {
            verify: true,
            f16c,
            wide,
            stream_threshold: 0,
            ..lnc::CompileOptions::default().in_256_bits()
        };
        seed_module(&lnc::Jit::with_options(opts))
    };
    for wide in [true, false] {
        let modules = [module(true, wide), module(false, wide)];
        if lnc::converts_f16_natively() {
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
            let lir = |block| {
                let sig = fwd_sig("fp16", block);
                modules[0].dump("_layer_norm_fwd_fused", &sig, &req).expect("compiles").remove(0).text
            };
            let (short, long) = (lir(1024), lir(8192));
            // x in the loops; w and b, the same in every program, still converted once a launch.
            assert!(!short.contains("row_load ") && !short.contains("row_store"), "{short}");
            assert!(short.contains("row_load.once"), "{short}");
            assert!(!long.contains("row_load "), "{long}");
            assert_eq!(long.contains("row_store"), !(wide && lnc::computes_wide()), "{long}");
        }
        same_flows::<f16>(&modules);
    }
}

const FP16_ARITHMETIC: &str = r#"
import triton
import triton.language as tl

@triton.jit
def k(X, W, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    w = tl.load(W + i, mask=m, other=0.)
    s = tl.sum(x.to(tl.float32), axis=0) / N
    z = x * w + x
    tl.store(Y + row * N + i, z - s.to(tl.float16), mask=m)
"#;

/// Arithmetic on fp16 tiles rounds after every operation whether F16C rounds them (through
/// scratch, past a `row_load.once` buffer and its flag, on every worker) or integer code
/// does: the same bits, every element written, and each within an ulp or two of the
/// step-by-step rounding of a float64 reference.
#[test]
fn fp16_arithmetic_rounds_alike_with_and_without_f16c() {
    use rand::Rng;
    let mut rng = rng();
    let (m, n) = (64usize, 1000usize);
    let x: Vec<f16> = (0..m * n).map(|_| f16::from_f32(rng.random_range(-4.0f32..4.0))).collect();
    let w: Vec<f16> = (0..n).map(|_| f16::from_f32(rng.random_range(-2.0f32..2.0))).collect();
    let sig = "*fp16,*fp16,*fp16,i32,1024";
    let run = |f16c: bool| {
        let opts = lnc::CompileOptions { verify: true, f16c, ..Default::default() };
        let module = lnc::Jit::with_options(opts).module("arith.py", FP16_ARITHMETIC).expect("parses");
        if f16c && lnc::converts_f16_natively() {
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
            let lir = module.dump("k", sig, &req).expect("compiles").remove(0).text;
            assert!(lir.contains("row_load.once"), "{lir}");
        }
        let k = module.kernel("k", sig).expect("compiles");
        let mut y = vec![f16::NAN; m * n];
        k.launch(m as u32, &lnc::args![&x, &w, &mut y, n as i32]).expect("runs");
        y
    };
    let (with, without) = (run(true), run(false));
    assert_eq!(
        with.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        without.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let r = |v: f64| f16::from_f64(v).to_f64();
    for row in 0..m {
        let xs = &x[row * n..][..n];
        let s = xs.iter().map(|v| v.to_f64()).sum::<f64>() / n as f64;
        for (j, (&xv, &wv)) in xs.iter().zip(&w).enumerate() {
            let (a, b) = (xv.to_f64(), wv.to_f64());
            let want = r(r(r(a * b) + a) - r(s));
            let got = with[row * n + j].to_f64();
            let ulp = f16::from_f64(want).to_f64().abs().max(6.1e-5) * 2f64.powi(-10);
            // The kernel's mean is an fp32 sum, the reference's an f64 one: near a rounding
            // boundary `s.to(fp16)` may differ by one ulp of `s`, which a small difference
            // `z - s` shows whole.
            let s_ulp = r(s).abs().max(6.1e-5) * 2f64.powi(-10);
            assert!((got - want).abs() <= 2.0 * ulp + s_ulp, "row {row} element {j}: {got} vs {want}");
        }
    }
}
