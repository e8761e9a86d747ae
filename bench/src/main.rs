//! The layer-norm benchmark: lnc running the seed's Triton kernels against a hand-written
//! Rust layer norm and a parallel copy, Triton-style table; plus cold-compile time of each
//! seed kernel and the launch overhead of a 1-program grid. See README.md.
//!
//! `cargo run --release -p lnc-bench -- [--quick] [--threads N] [--scaling]`

mod baseline;

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Parser;
use lnc::{Jit, Kernel, Module};
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

const M: usize = 4096;
const EPS: f32 = 1e-5;
const SIZES: &[usize] = &[512, 768, 1000, 1024, 2048, 4096, 8192, 16384];
const QUICK_SIZES: &[usize] = &[512, 4096, 16384];
const FWD: &str = "_layer_norm_fwd_fused";
const BWD_DX: &str = "_layer_norm_bwd_dx_fused";
const BWD_DWDB: &str = "_layer_norm_bwd_dwdb";
/// Separately compiled copies of the forward kernel the repetitions rotate over.
const FWD_COPIES: usize = 4;
/// The trivial kernel whose warm launch measures lnc's launch overhead.
const TRIVIAL: &str = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _trivial(X):\n    tl.store(X + tl.program_id(0), 1.0)\n";

type Result<T> = std::result::Result<T, String>;

#[derive(Parser)]
#[command(name = "lnc-bench", about = "Layer norm: lnc vs hand-written Rust vs a parallel copy")]
struct Opts {
    /// Fewer sizes and repetitions (finishes in well under a minute).
    #[arg(long)]
    quick: bool,
    /// Threads of the pool every measurement runs on (default: all of the machine's).
    #[arg(long)]
    threads: Option<usize>,
    /// Measure at 1 thread and at --threads (default all) and print the speedup.
    #[arg(long)]
    scaling: bool,
    /// Timed repetitions per measurement (default 30, 10 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Row lengths N, comma-separated (default 512,768,1000,1024,2048,4096,8192,16384).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Launch lnc's kernels without bounds checks (`launch_unchecked`).
    #[arg(long)]
    unchecked: bool,
    /// Run every safe launch with bounds checks, without first proving its bounds
    /// (`CompileOptions::prove_bounds = false`): what a launch the proof does not cover
    /// costs.
    #[arg(long)]
    no_prove: bool,
    /// The kernels' file (default: ../shared/seeds/triton_05_layer_norm.py, else
    /// examples/kernels/layer_norm.py).
    #[arg(long)]
    kernels: Option<PathBuf>,
    /// Skip the fp16/bf16 forward table.
    #[arg(long)]
    no_half: bool,
    /// Time with warm caches: no cache flush before each timed run (see README.md).
    #[arg(long)]
    hot: bool,
    /// Compile lnc's kernels without prefetching the next program's rows
    /// (`CompileOptions::prefetch = false`), to measure what the prefetches gain.
    #[arg(long)]
    no_prefetch: bool,
    /// Compile lnc's kernels converting fp16 tiles with integer code instead of F16C
    /// (`CompileOptions::f16c = false`), to measure what F16C gains.
    #[arg(long)]
    no_f16c: bool,
    /// Compile lnc's kernels with 128-bit vectors only (`CompileOptions::narrow`: 4 lanes,
    /// no 256-bit loops), to measure what the 256-bit loops gain.
    #[arg(long)]
    no_wide: bool,
    /// Compile lnc's fp16/bf16 kernels in 256-bit loops (8-lane tiles) instead of
    /// 512-bit ones on a host with AVX-512 (`CompileOptions::lanes = 8`), to measure what
    /// the 512-bit loops gain.
    #[arg(long)]
    no_zmm: bool,
    /// Compile lnc's kernels without moving stores past the spin lock that follows them
    /// (`CompileOptions::defer_stores = false`). Without it, the backward's table of what
    /// deferring gains times the dx kernel compiled both ways.
    #[arg(long)]
    no_defer_stores: bool,
    /// Launch the backward's dx kernel with workers taking chunks of one shared range
    /// (`CompileOptions::group_programs = false`) instead of each its own share of the
    /// lock groups. Without it, the backward's table of what the group schedule gains
    /// times the dx kernel launched both ways.
    #[arg(long)]
    no_group_programs: bool,
}

/// Median and best of a set of timings, in seconds.
#[derive(Clone, Copy, Debug)]
struct Times {
    median: f64,
    best: f64,
}

impl Times {
    fn of(mut v: Vec<f64>) -> Times {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Times { median, best: v[0] }
    }

    /// GB/s for `bytes` moved: (from the median, from the best).
    fn gbps(&self, bytes: f64) -> (f64, f64) {
        (bytes / self.median / 1e9, bytes / self.best / 1e9)
    }
}

/// A variant's times and the median over repetitions of `ratio(variant, lnc)` within each
/// repetition (pairing them cancels the drift of the machine's bandwidth between
/// repetitions); `None` when the variant did not run.
fn paired(variant: Vec<f64>, lnc: &[f64], ratio: fn(f64, f64) -> f64) -> Option<(Times, f64)> {
    if variant.is_empty() {
        return None;
    }
    let ratios = variant.iter().zip(lnc).map(|(&v, &a)| ratio(v, a)).collect();
    Some((Times::of(variant), Times::of(ratios).median))
}

struct Row {
    n: usize,
    /// Compile time of the kernels this N needed that were not compiled yet in this sweep
    /// (one measurement each); `None` when all came from the cache.
    compile: Option<f64>,
    lnc: Times,
    rust: Times,
    copy: Times,
    /// Backward only: lnc's dwdb kernel alone.
    dwdb: Option<Times>,
    /// Backward only: the seed's algorithm (locked partial rows) written in Rust.
    rust_seed: Option<Times>,
    /// Forward of safe launches: the same kernel launched without checks, and the median
    /// over repetitions of safe time / unchecked time of the same repetition.
    unchecked: Option<(Times, f64)>,
    /// Forward: whether the safe launches were proved in bounds (and ran unchecked code).
    proved: bool,
    /// Forward: the kernel compiled with 128-bit vectors only, and the median over
    /// repetitions of its time / lnc's time of the same repetition.
    narrow: Option<(Times, f64)>,
    /// Backward only: lnc's dx kernel compiled without deferred stores, and the median of
    /// its time over lnc's in the same repetitions.
    undeferred: Option<(Times, f64)>,
    /// Backward only: lnc's dx kernel launched without the group schedule, and the median
    /// of its time over lnc's in the same repetitions.
    ungrouped: Option<(Times, f64)>,
    /// Backward only: the seed's dx kernel cut before its partial sums (dx alone).
    dx_alone: Option<Times>,
}

/// The largest inputs and outputs, allocated and touched once; each size uses prefixes.
struct Buffers {
    x: Vec<f32>,
    dy: Vec<f32>,
    out_lnc: Vec<f32>,
    out_rust: Vec<f32>,
}

/// Per-chunk seeded normal values `mean + std·N(0,1)`, generated in parallel.
fn randn(len: usize, mean: f32, std: f32, seed: u64) -> Vec<f32> {
    let mut v = vec![0.0f32; len];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| {
        let mut rng =
            rand::rngs::SmallRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for pair in c.chunks_mut(2) {
            let u1: f32 = 1.0 - rng.random::<f32>();
            let u2: f32 = rng.random::<f32>();
            let r = (-2.0 * u1.ln()).sqrt();
            let t = std::f32::consts::TAU * u2;
            pair[0] = mean + std * r * t.cos();
            if let Some(p) = pair.get_mut(1) {
                *p = mean + std * r * t.sin();
            }
        }
    });
    v
}

fn rand_uniform(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random::<f32>()).collect()
}

/// A touched buffer: every page written once, so timing never pays its page faults.
fn touched(len: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(len);
    v.par_extend((0..len).into_par_iter().map(|_| f32::NAN));
    v
}

/// The tutorial's choice of GROUP_SIZE_M for a row length.
fn group_size_m(n: usize) -> usize {
    if n <= 1024 {
        256
    } else if n <= 4096 {
        128
    } else if n <= 8192 {
        96
    } else {
        64
    }
}

fn fwd_signature(n: usize) -> String {
    half_fwd_signature("fp32", n)
}

/// The forward's signature with `x`, `y`, `w`, `b` in `dtype` (mean and rstd stay fp32).
fn half_fwd_signature(dtype: &str, n: usize) -> String {
    let d = dtype;
    format!("*{d},*{d},*{d},*{d},*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two())
}

fn dx_signature(n: usize) -> String {
    half_dx_signature("fp32", n)
}

/// The dx kernel's signature with `dx`, `dy`, the partial rows, `x`, `w`, `b` in `dtype`
/// (mean and rstd stay fp32), the tutorial's dtype layout.
fn half_dx_signature(dtype: &str, n: usize) -> String {
    let d = dtype;
    format!(
        "*{d},*{d},*{d},*{d},*{d},*{d},*{d},*fp32,*fp32,*i32,i32,i32,fp32,{},{}",
        group_size_m(n),
        n.next_power_of_two()
    )
}

const DWDB_SIGNATURE: &str = "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128";

/// The dwdb kernel's signature with the partial and final rows in `dtype`.
fn half_dwdb_signature(dtype: &str) -> String {
    format!("*{dtype},*{dtype},*{dtype},*{dtype},i32,i32,32,128")
}

/// Launches, bounds-checked unless `unchecked`.
fn launch(k: &Kernel, grid: u32, args: &[lnc::Arg<'_>], unchecked: bool) -> Result<()> {
    let r = if unchecked {
        // SAFETY: the seed kernels stay inside their buffers for these shapes: every such
        // launch is first run bounds-checked by the correctness check of the same size.
        unsafe { k.launch_unchecked(grid, args) }
    } else {
        k.launch(grid, args)
    };
    r.map_err(|e| e.to_string())
}

/// Cools the caches, then times one launch (seconds).
fn timed_launch(ctx: &Ctx<'_>, k: &Kernel, args: &[lnc::Arg<'_>], unchecked: bool) -> Result<f64> {
    ctx.cool();
    let t = Instant::now();
    launch(k, M as u32, args, unchecked)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Kernel `name` on `signature` from `module`, when there is one (the paired variants).
fn kernel_in(module: Option<&Module>, name: &str, signature: &str) -> Result<Option<Arc<Kernel>>> {
    module.map(|m| m.kernel(name, signature).map_err(|e| e.to_string())).transpose()
}

/// Checks `got` against `want` elementwise: |got - want| ≤ atol + rtol·|want|.
fn check(what: &str, n: usize, got: &[f32], want: &[f32], atol: f32, rtol: f32) -> Result<()> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // Written so that a NaN fails.
        if (g - w).abs() <= atol + rtol * w.abs() {
            continue;
        }
        return Err(format!(
            "MISMATCH at N = {n}: {what}[{i}] is {g} from lnc but {w} from the Rust baseline"
        ));
    }
    Ok(())
}

struct Ctx<'a> {
    module: &'a Module,
    /// (kernel, signature) compiled so far in this sweep.
    compiled: RefCell<HashSet<(String, String)>>,
    reps: usize,
    warmup: usize,
    unchecked: bool,
    /// Chunks of rows of the Rust backward (4 per thread).
    chunks: usize,
    /// Written over before every timed run, unless `--hot`.
    flush: Option<&'a Mutex<lnc_runtime::CacheFlush>>,
    /// More modules of the same source, for more copies of the forward kernel (below).
    copies: &'a [Module],
    /// The same source compiled with 128-bit vectors only (`CompileOptions::narrow`), when
    /// lnc's kernels have 256-bit loops: timed in the forward's repetitions too.
    narrow: Option<&'a Module>,
    /// The same source compiled without deferred stores (`CompileOptions::defer_stores`),
    /// when lnc's kernels defer them: timed in the backward's repetitions too.
    undeferred: Option<&'a Module>,
    /// The same source compiled without the group schedule
    /// (`CompileOptions::group_programs`): timed in the backward's repetitions too.
    ungrouped: Option<&'a Module>,
    /// The seed's dx kernel cut before its partial sums of dw and db ([`dx_alone_source`]):
    /// what the row's arithmetic costs without the algorithm's accumulation.
    dx_alone: Option<&'a Module>,
}

impl Ctx<'_> {
    /// Evicts the caches, as Triton's `do_bench` does before every run: otherwise each
    /// contestant would start from whatever the previous one left in the last-level cache
    /// (at N ≤ 1024 a whole x and y fit in it), and the order of the runs would decide the
    /// ratios. Every thread of the pool writes its part, so private caches are cleared too.
    fn cool(&self) {
        if let Some(flush) = self.flush {
            flush.lock().unwrap_or_else(|e| e.into_inner()).run();
        }
    }
}

/// The kernel, and its compile time unless it was compiled before in this sweep.
fn kernel(ctx: &Ctx<'_>, name: &str, signature: &str) -> Result<(Arc<Kernel>, Option<f64>)> {
    let t = Instant::now();
    let k = ctx.module.kernel(name, signature).map_err(|e| e.to_string())?;
    let elapsed = t.elapsed().as_secs_f64();
    let new = ctx.compiled.borrow_mut().insert((name.to_string(), signature.to_string()));
    Ok((k, new.then_some(elapsed)))
}

fn add_times(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Forward at row length `n`: check lnc against the baseline once, then time lnc, the
/// baseline and the copy interleaved (one of each per repetition).
fn forward(ctx: &Ctx<'_>, buf: &mut Buffers, n: usize) -> Result<Row> {
    let mn = M * n;
    let x = &buf.x[..mn];
    let (y_lnc, y_rust) = (&mut buf.out_lnc[..mn], &mut buf.out_rust[..mn]);
    let w = rand_uniform(n, 1);
    let b = rand_uniform(n, 2);
    let (mut mean_l, mut rstd_l, mut mean_r, mut rstd_r) = (touched(M), touched(M), touched(M), touched(M));
    let (k, compile) = kernel(ctx, FWD, &fwd_signature(n))?;
    // Where the code of a kernel lands moves its time by a few percent (measured: two
    // compiles of the same kernel, timed as below, ran up to 5 % apart), as much as the
    // bounds checks cost. So the repetitions rotate over several separately compiled copies.
    let mut copies = vec![k.clone()];
    for m in ctx.copies {
        copies.push(m.kernel(FWD, &fwd_signature(n)).map_err(|e| e.to_string())?);
    }

    let run_lnc = |rep: usize, y: &mut [f32], mean: &mut [f32], rstd: &mut [f32], unchecked: bool| {
        let args = lnc::args![x, y, &w, &b, mean, rstd, n as i32, n as i32, EPS];
        let t = Instant::now();
        launch(&copies[rep % copies.len()], M as u32, &args, unchecked)?;
        Ok::<f64, String>(t.elapsed().as_secs_f64())
    };
    // Correctness, once, before timing: lnc's safe launch against the baseline.
    y_lnc.fill(f32::NAN);
    let proved = k
        .bounds_proved(
            M as u32,
            &lnc::args![x, &mut *y_lnc, &w, &b, &mut mean_l, &mut rstd_l, n as i32, n as i32, EPS],
        )
        .map_err(|e| e.to_string())?;
    k.launch(
        M as u32,
        &lnc::args![x, &mut *y_lnc, &w, &b, &mut mean_l, &mut rstd_l, n as i32, n as i32, EPS],
    )
    .map_err(|e| e.to_string())?;
    baseline::forward(x, &w, &b, y_rust, &mut mean_r, &mut rstd_r, EPS);
    check("y", n, y_lnc, y_rust, 1e-4, 1e-4)?;
    check("mean", n, &mean_l, &mean_r, 1e-5, 1e-5)?;
    check("rstd", n, &rstd_l, &rstd_r, 1e-5, 1e-4)?;

    let k_narrow = kernel_in(ctx.narrow, FWD, &fwd_signature(n))?;
    let (mut tl, mut tr, mut tc, mut tu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut tn = Vec::new();
    for rep in 0..ctx.warmup + ctx.reps {
        // The cost of bounds checks: the same copy of the kernel unchecked, in the same
        // repetition, before the checked launch on odd repetitions and after it on even ones.
        // The Rust baseline and the copy run before lnc's kernels on odd repetitions and
        // after them on even ones: lnc's time relative to the baseline's, paired within a
        // repetition, measured 0.96 with the baselines after and 1.05 with them before
        // (N = 512, 2 threads, flushed; 0.73 and 0.76 at N = 4096).
        let run_baselines = |y: &mut [f32], mean: &mut [f32], rstd: &mut [f32]| {
            ctx.cool();
            let t = Instant::now();
            baseline::forward(x, &w, &b, y, mean, rstd, EPS);
            let r = t.elapsed().as_secs_f64();
            ctx.cool();
            let t = Instant::now();
            baseline::copy(x, y, n);
            (r, t.elapsed().as_secs_f64())
        };
        let baselines_first = rep % 2 == 1;
        let (mut r, mut c) = (0.0, 0.0);
        if baselines_first {
            (r, c) = run_baselines(y_rust, &mut mean_r, &mut rstd_r);
        }
        let mut u = None;
        if !ctx.unchecked && rep % 2 == 1 {
            ctx.cool();
            u = Some(run_lnc(rep, y_lnc, &mut mean_l, &mut rstd_l, true)?);
        }
        // The 128-bit kernel runs before lnc's on repetitions 1 and 2 modulo 4 and after it
        // otherwise: a fixed order measured the run after the other one 4-10 % faster.
        let mut narrow = None;
        let mut run_narrow = |y: &mut [f32], mean: &mut [f32], rstd: &mut [f32]| -> Result<()> {
            if let Some(kn) = &k_narrow {
                let args = lnc::args![x, y, &w, &b, mean, rstd, n as i32, n as i32, EPS];
                narrow = Some(timed_launch(ctx, kn, &args, ctx.unchecked)?);
            }
            Ok(())
        };
        let narrow_first = matches!(rep % 4, 1 | 2);
        if narrow_first {
            run_narrow(y_lnc, &mut mean_l, &mut rstd_l)?;
        }
        ctx.cool();
        let a = run_lnc(rep, y_lnc, &mut mean_l, &mut rstd_l, ctx.unchecked)?;
        if !ctx.unchecked && rep % 2 == 0 {
            ctx.cool();
            u = Some(run_lnc(rep, y_lnc, &mut mean_l, &mut rstd_l, true)?);
        }
        if !narrow_first {
            run_narrow(y_lnc, &mut mean_l, &mut rstd_l)?;
        }
        if !baselines_first {
            (r, c) = run_baselines(y_rust, &mut mean_r, &mut rstd_r);
        }
        if rep >= ctx.warmup {
            tl.push(a);
            tr.push(r);
            tc.push(c);
            tu.extend(u);
            tn.extend(narrow);
        }
    }
    let unchecked = paired(tu, &tl, |u, a| a / u);
    let narrow = paired(tn, &tl, |n, a| n / a);
    Ok(Row {
        n,
        compile,
        lnc: Times::of(tl),
        rust: Times::of(tr),
        copy: Times::of(tc),
        dwdb: None,
        rust_seed: None,
        unchecked,
        proved,
        narrow,
        undeferred: None,
        ungrouped: None,
        dx_alone: None,
    })
}

/// The backward's `w` and `b` for row length `n`, and the mean and rstd of the forward
/// pass over `x` (the baseline's, which lnc's match: the forward checks it), its `y`
/// written to `scratch`.
fn backward_stats(x: &[f32], scratch: &mut [f32], n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let w = rand_uniform(n, 1);
    let b = rand_uniform(n, 2);
    let (mut mean, mut rstd) = (touched(M), touched(M));
    baseline::forward(x, &w, &b, scratch, &mut mean, &mut rstd, EPS);
    (w, b, mean, rstd)
}

/// The kernels' file cut where the dx kernel starts its partial sums of dw and db (at its
/// comment `# accumulate partial sums for dw/db`): the dx kernel then ends after storing dx.
/// `None` when the file has no such line.
fn dx_alone_source(source: &str) -> Option<String> {
    let cut = source.find("    # accumulate partial sums for dw/db")?;
    Some(source[..cut].to_string())
}

/// Backward at row length `n` (dx kernel + dwdb kernel, the tutorial's host flow), checked
/// once against the baseline, then timed interleaved with it. The locks are zeroed before
/// every lnc run, outside the timed region.
fn backward(ctx: &Ctx<'_>, buf: &mut Buffers, n: usize, copy: Times) -> Result<Row> {
    let mn = M * n;
    let (x, dy) = (&buf.x[..mn], &buf.dy[..mn]);
    let (dx_lnc, dx_rust) = (&mut buf.out_lnc[..mn], &mut buf.out_rust[..mn]);
    let (w, b, mean, rstd) = backward_stats(x, dx_rust, n);

    let group = group_size_m(n);
    let (k_dx, c_dx) = kernel(ctx, BWD_DX, &dx_signature(n))?;
    let (k_dwdb, c_dwdb) = kernel(ctx, BWD_DWDB, DWDB_SIGNATURE)?;
    let compile = add_times(c_dx, c_dwdb);
    let mut locks = vec![0i32; 2 * group];
    let (mut pdw, mut pdb) = (touched(group * n), touched(group * n));
    let (mut dw_l, mut db_l, mut dw_r, mut db_r) = (touched(n), touched(n), touched(n), touched(n));
    let dwdb_grid = n.div_ceil(128) as u32;

    let proved = k_dx
        .bounds_proved(
            M as u32,
            &lnc::args![
                &mut *dx_lnc,
                dy,
                &mut pdw,
                &mut pdb,
                x,
                &w,
                &b,
                &mean,
                &rstd,
                &mut locks,
                n as i32,
                n as i32,
                EPS
            ],
        )
        .and_then(|dx| {
            let dwdb = k_dwdb.bounds_proved(
                dwdb_grid,
                &lnc::args![&pdw, &pdb, &mut dw_l, &mut db_l, group as i32, n as i32],
            )?;
            Ok(dx && dwdb)
        })
        .map_err(|e| e.to_string())?;
    // One lnc backward with dx kernel `k`: (total, dwdb alone).
    let mut run_lnc =
        |k: &Kernel, dx: &mut [f32], dw: &mut [f32], db: &mut [f32], unchecked: bool| -> Result<(f64, f64)> {
            locks.fill(0);
            ctx.cool();
            let t = Instant::now();
            launch(
                k,
                M as u32,
                &lnc::args![
                    dx, dy, &mut pdw, &mut pdb, x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32, EPS
                ],
                unchecked,
            )?;
            let t1 = Instant::now();
            launch(&k_dwdb, dwdb_grid, &lnc::args![&pdw, &pdb, dw, db, group as i32, n as i32], unchecked)?;
            let end = Instant::now();
            Ok(((end - t).as_secs_f64(), (end - t1).as_secs_f64()))
        };
    let k_undeferred = kernel_in(ctx.undeferred, BWD_DX, &dx_signature(n))?;
    let k_ungrouped = kernel_in(ctx.ungrouped, BWD_DX, &dx_signature(n))?;
    dx_lnc.fill(f32::NAN);
    run_lnc(&k_dx, dx_lnc, &mut dw_l, &mut db_l, false)?;
    baseline::backward(x, dy, &w, &mean, &rstd, dx_rust, &mut dw_r, &mut db_r, ctx.chunks);
    check("dx", n, dx_lnc, dx_rust, 1e-5, 1e-4)?;
    check("dw", n, &dw_l, &dw_r, 2e-3, 1e-4)?;
    check("db", n, &db_l, &db_r, 2e-3, 1e-4)?;
    let seed_locks: Vec<AtomicI32> = (0..2 * group).map(|_| AtomicI32::new(0)).collect();
    let (mut pdw_s, mut pdb_s) = (touched(group * n), touched(group * n));
    let mut run_seed = |dx: &mut [f32], dw: &mut [f32], db: &mut [f32]| {
        seed_locks.iter().for_each(|l| l.store(0, Ordering::Relaxed));
        ctx.cool();
        let t = Instant::now();
        baseline::backward_grouped(x, dy, &w, &mean, &rstd, dx, &mut pdw_s, &mut pdb_s, &seed_locks, group);
        baseline::sum_partials(&pdw_s, &pdb_s, dw, db);
        t.elapsed().as_secs_f64()
    };
    dx_rust.fill(f32::NAN);
    let (mut dw_s, mut db_s) = (touched(n), touched(n));
    run_seed(dx_rust, &mut dw_s, &mut db_s);
    check("dx (Rust, seed algorithm)", n, dx_rust, dx_lnc, 1e-5, 1e-4)?;
    check("dw (Rust, seed algorithm)", n, &dw_s, &dw_r, 2e-3, 1e-4)?;
    check("db (Rust, seed algorithm)", n, &db_s, &db_r, 2e-3, 1e-4)?;

    for (what, k) in [("stores not deferred", &k_undeferred), ("no group schedule", &k_ungrouped)] {
        let Some(k) = k else { continue };
        dx_rust.fill(f32::NAN);
        run_lnc(k, dx_rust, &mut dw_s, &mut db_s, false)?;
        check(&format!("dx (lnc, {what})"), n, dx_rust, dx_lnc, 1e-5, 1e-4)?;
        check(&format!("dw (lnc, {what})"), n, &dw_s, &dw_r, 2e-3, 1e-4)?;
        check(&format!("db (lnc, {what})"), n, &db_s, &db_r, 2e-3, 1e-4)?;
    }

    let k_alone = kernel_in(ctx.dx_alone, BWD_DX, &dx_signature(n))?;
    // The cut kernel never touches DW, DB or Lock: one element each.
    let (unused_f, unused_i) = (vec![0.0f32; 1], vec![0i32; 1]);
    let run_alone = |k: &Kernel, dx: &mut [f32], unchecked: bool| -> Result<f64> {
        let args = lnc::args![
            dx, dy, &unused_f, &unused_f, x, &w, &b, &mean, &rstd, &unused_i, n as i32, n as i32, EPS
        ];
        timed_launch(ctx, k, &args, unchecked)
    };
    if let Some(k) = &k_alone {
        dx_rust.fill(f32::NAN);
        run_alone(k, dx_rust, false)?;
        check("dx (lnc, dx kernel alone)", n, dx_rust, dx_lnc, 1e-5, 1e-4)?;
    }
    let (mut tl, mut td, mut tr, mut ts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut tu, mut tg, mut ta) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..ctx.warmup + ctx.reps {
        // The kernel without deferred stores runs before lnc's on odd repetitions and after
        // it on even ones; the one without the group schedule before it on repetitions 1
        // and 2 modulo 4 (so that its place does not follow the other's).
        // The Rust baselines and the cut dx kernel run before lnc's kernels on odd
        // repetitions and after them on even ones (see the forward).
        let mut others = |dx_rust: &mut [f32], dx_lnc: &mut [f32]| -> Result<(f64, f64, Option<f64>)> {
            ctx.cool();
            let t = Instant::now();
            baseline::backward(x, dy, &w, &mean, &rstd, dx_rust, &mut dw_r, &mut db_r, ctx.chunks);
            let r = t.elapsed().as_secs_f64();
            let sd = run_seed(dx_rust, &mut dw_s, &mut db_s);
            let alone = match &k_alone {
                Some(k) => Some(run_alone(k, dx_lnc, ctx.unchecked)?),
                None => None,
            };
            Ok((r, sd, alone))
        };
        let mut measured = None;
        if rep % 2 == 1 {
            measured = Some(others(dx_rust, dx_lnc)?);
        }
        let mut u = None;
        if let Some(k) = k_undeferred.as_ref().filter(|_| rep % 2 == 1) {
            u = Some(run_lnc(k, dx_lnc, &mut dw_l, &mut db_l, ctx.unchecked)?.0);
        }
        let ungrouped_first = matches!(rep % 4, 1 | 2);
        let mut g = None;
        if let Some(k) = k_ungrouped.as_ref().filter(|_| ungrouped_first) {
            g = Some(run_lnc(k, dx_lnc, &mut dw_l, &mut db_l, ctx.unchecked)?.0);
        }
        let (a, d) = run_lnc(&k_dx, dx_lnc, &mut dw_l, &mut db_l, ctx.unchecked)?;
        if let Some(k) = k_undeferred.as_ref().filter(|_| rep % 2 == 0) {
            u = Some(run_lnc(k, dx_lnc, &mut dw_l, &mut db_l, ctx.unchecked)?.0);
        }
        if let Some(k) = k_ungrouped.as_ref().filter(|_| !ungrouped_first) {
            g = Some(run_lnc(k, dx_lnc, &mut dw_l, &mut db_l, ctx.unchecked)?.0);
        }
        let (r, sd, alone) = match measured {
            Some(m) => m,
            None => others(dx_rust, dx_lnc)?,
        };
        if rep >= ctx.warmup {
            tl.push(a);
            td.push(d);
            tr.push(r);
            ts.push(sd);
            tu.extend(u);
            tg.extend(g);
            ta.extend(alone);
        }
    }
    let undeferred = paired(tu, &tl, |u, a| u / a);
    let ungrouped = paired(tg, &tl, |g, a| g / a);
    Ok(Row {
        n,
        compile,
        lnc: Times::of(tl),
        rust: Times::of(tr),
        copy,
        dwdb: Some(Times::of(td)),
        rust_seed: Some(Times::of(ts)),
        unchecked: None,
        proved,
        narrow: None,
        undeferred,
        ungrouped,
        dx_alone: (!ta.is_empty()).then(|| Times::of(ta)),
    })
}

/// Forward and backward rows for every size, on the current rayon pool.
/// Inputs and outputs of the fp16/bf16 forward, for the largest N; each size uses prefixes.
struct HalfBuffers {
    x16: Vec<half::f16>,
    y16: Vec<half::f16>,
    xb: Vec<half::bf16>,
    yb: Vec<half::bf16>,
    /// The backward's `dy` (its `dx` goes to `y16`/`yb`).
    dy16: Vec<half::f16>,
    dyb: Vec<half::bf16>,
}

/// A storage dtype of the backward table.
trait Storage: lnc::Element {
    const NAME: &'static str;
    const NAN: Self;
    fn of(v: f32) -> Self;
    fn value(self) -> f32;
}

impl Storage for f32 {
    const NAME: &'static str = "fp32";
    const NAN: Self = f32::NAN;
    fn of(v: f32) -> Self {
        v
    }
    fn value(self) -> f32 {
        self
    }
}

macro_rules! half_storage {
    ($($t:ty => $name:literal),+) => {$(
        impl Storage for $t {
            const NAME: &'static str = $name;
            const NAN: Self = <$t>::NAN;
            fn of(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn value(self) -> f32 {
                self.to_f32()
            }
        }
    )+};
}

half_storage!(half::f16 => "fp16", half::bf16 => "bf16");

/// The seed backward (dx kernel + dwdb kernel) with storage `T`: its kernels and the
/// buffers besides the rows of `x`, `dy` and `dx`.
struct HalfBackward<T> {
    k_dx: Arc<Kernel>,
    k_dwdb: Arc<Kernel>,
    n: usize,
    group: usize,
    w: Vec<T>,
    b: Vec<T>,
    pdw: Vec<T>,
    pdb: Vec<T>,
    dw: Vec<T>,
    db: Vec<T>,
    locks: Vec<i32>,
}

impl<T: Storage> HalfBackward<T> {
    fn new(ctx: &Ctx<'_>, n: usize, w: &[f32], b: &[f32]) -> Result<Self> {
        let group = group_size_m(n);
        let poisoned = |len: usize| vec![T::NAN; len];
        Ok(HalfBackward {
            k_dx: kernel(ctx, BWD_DX, &half_dx_signature(T::NAME, n))?.0,
            k_dwdb: kernel(ctx, BWD_DWDB, &half_dwdb_signature(T::NAME))?.0,
            n,
            group,
            w: w.iter().map(|&v| T::of(v)).collect(),
            b: b.iter().map(|&v| T::of(v)).collect(),
            pdw: poisoned(group * n),
            pdb: poisoned(group * n),
            dw: poisoned(n),
            db: poisoned(n),
            locks: vec![0; 2 * group],
        })
    }

    /// One backward, timed (the locks zeroed and the caches cooled before, untimed).
    fn run(
        &mut self,
        ctx: &Ctx<'_>,
        x: &[T],
        dy: &[T],
        dx: &mut [T],
        mean: &[f32],
        rstd: &[f32],
    ) -> Result<f64> {
        let (n, group) = (self.n, self.group);
        self.locks.fill(0);
        ctx.cool();
        let t = Instant::now();
        let args = lnc::args![
            dx,
            dy,
            &mut self.pdw,
            &mut self.pdb,
            x,
            &self.w,
            &self.b,
            mean,
            rstd,
            &mut self.locks,
            n as i32,
            n as i32,
            EPS
        ];
        launch(&self.k_dx, M as u32, &args, ctx.unchecked)?;
        let args = lnc::args![&self.pdw, &self.pdb, &mut self.dw, &mut self.db, group as i32, n as i32];
        launch(&self.k_dwdb, n.div_ceil(128) as u32, &args, ctx.unchecked)?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Runs once on poisoned outputs and checks dx, dw and db against the fp32 baseline's
    /// (`atol`/`rtol` for dx, ten times `atol` for the sums over M rows).
    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        ctx: &Ctx<'_>,
        x: &[T],
        dy: &[T],
        dx: &mut [T],
        (mean, rstd): (&[f32], &[f32]),
        (dx_want, dw_want, db_want): (&[f32], &[f32], &[f32]),
        (atol, rtol): (f32, f32),
    ) -> Result<()> {
        dx.fill(T::NAN);
        self.dw.fill(T::NAN);
        self.db.fill(T::NAN);
        self.run(ctx, x, dy, dx, mean, rstd)?;
        let values = |v: &[T]| -> Vec<f32> { v.iter().map(|&h| h.value()).collect() };
        let name = T::NAME;
        check(&format!("dx ({name})"), self.n, &values(dx), dx_want, atol, rtol)?;
        check(&format!("dw ({name})"), self.n, &values(&self.dw), dw_want, 10.0 * atol, rtol)?;
        check(&format!("db ({name})"), self.n, &values(&self.db), db_want, 10.0 * atol, rtol)
    }
}

/// The seed backward at row length `n` in fp16 and bf16 (compute in fp32; x, dy, dx, w, b
/// and the partial and final dw/db rows in half, mean and rstd in fp32: the tutorial's
/// layout), each checked once against the fp32 Rust baseline (to the rounding of its
/// inputs, partial sums and outputs), then timed interleaved with lnc's fp32 backward.
fn half_backward(ctx: &Ctx<'_>, buf: &mut Buffers, hb: &mut HalfBuffers, n: usize) -> Result<HalfRow> {
    let mn = M * n;
    let (x, dy) = (&buf.x[..mn], &buf.dy[..mn]);
    let (dx_lnc, dx_rust) = (&mut buf.out_lnc[..mn], &mut buf.out_rust[..mn]);
    let (w, b, mean, rstd) = backward_stats(x, dx_rust, n);
    let (mut dw_r, mut db_r) = (touched(n), touched(n));
    baseline::backward(x, dy, &w, &mean, &rstd, dx_rust, &mut dw_r, &mut db_r, ctx.chunks);
    let want = (&dx_rust[..], &dw_r[..], &db_r[..]);
    let stats = (&mean[..], &rstd[..]);

    let mut b32 = HalfBackward::<f32>::new(ctx, n, &w, &b)?;
    let mut b16 = HalfBackward::<half::f16>::new(ctx, n, &w, &b)?;
    let mut bb = HalfBackward::<half::bf16>::new(ctx, n, &w, &b)?;
    let (x16, dy16, dx16) = (&hb.x16[..mn], &hb.dy16[..mn], &mut hb.y16[..mn]);
    let (xb, dyb, dxb) = (&hb.xb[..mn], &hb.dyb[..mn], &mut hb.yb[..mn]);
    // fp16 keeps 11 significant bits, bf16 8; the partial rows add M / GROUP_SIZE_M rows
    // each, rounded after every addition.
    b32.check(ctx, x, dy, dx_lnc, stats, want, (1e-5, 1e-4))?;
    b16.check(ctx, x16, dy16, dx16, stats, want, (5e-3, 2e-3))?;
    bb.check(ctx, xb, dyb, dxb, stats, want, (4e-2, 1e-2))?;

    let (mut t32, mut t16, mut tb) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..ctx.warmup + ctx.reps {
        // In reverse order on odd repetitions (see the forward's half table).
        let (mut a, mut h, mut g) = (0.0, 0.0, 0.0);
        for k in if rep % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] } {
            match k {
                0 => a = b32.run(ctx, x, dy, dx_lnc, &mean, &rstd)?,
                1 => h = b16.run(ctx, x16, dy16, dx16, &mean, &rstd)?,
                _ => g = bb.run(ctx, xb, dyb, dxb, &mean, &rstd)?,
            }
        }
        if rep >= ctx.warmup {
            t32.push(a);
            t16.push(h);
            tb.push(g);
        }
    }
    Ok(HalfRow { n, f32: Times::of(t32), f16: Times::of(t16), bf16: Times::of(tb), tiles: None })
}

/// The forward or the backward at `n` with fp16 and with bf16 storage (compute in fp32),
/// timed interleaved with lnc's fp32 one.
struct HalfRow {
    n: usize,
    f32: Times,
    f16: Times,
    bf16: Times,
    /// The same fp16 and bf16 kernels converting tile by tile
    /// (`CompileOptions::half_rows = false`; the forward's table).
    tiles: Option<(Times, Times)>,
}

/// The fp16/bf16 forward at row length `n`: each checked once against the fp32 Rust
/// baseline (to the rounding of its inputs and output), then lnc at fp32, fp16 and bf16
/// timed interleaved.
fn half_forward(
    ctx: &Ctx<'_>,
    tiles: &Module,
    buf: &mut Buffers,
    hb: &mut HalfBuffers,
    n: usize,
) -> Result<HalfRow> {
    let mn = M * n;
    let x = &buf.x[..mn];
    let (y_lnc, y_rust) = (&mut buf.out_lnc[..mn], &mut buf.out_rust[..mn]);
    let w = rand_uniform(n, 1);
    let b = rand_uniform(n, 2);
    let (w16, b16): (Vec<half::f16>, Vec<half::f16>) = (
        w.iter().map(|&v| half::f16::from_f32(v)).collect(),
        b.iter().map(|&v| half::f16::from_f32(v)).collect(),
    );
    let (wb, bb): (Vec<half::bf16>, Vec<half::bf16>) = (
        w.iter().map(|&v| half::bf16::from_f32(v)).collect(),
        b.iter().map(|&v| half::bf16::from_f32(v)).collect(),
    );
    let (mut mean, mut rstd) = (touched(M), touched(M));
    let (k32, _) = kernel(ctx, FWD, &fwd_signature(n))?;
    let (k16, _) = kernel(ctx, FWD, &half_fwd_signature("fp16", n))?;
    let (kb, _) = kernel(ctx, FWD, &half_fwd_signature("bf16", n))?;
    let k16t = tiles.kernel(FWD, &half_fwd_signature("fp16", n)).map_err(|e| e.to_string())?;
    let kbt = tiles.kernel(FWD, &half_fwd_signature("bf16", n)).map_err(|e| e.to_string())?;
    let (x16, xb) = (&hb.x16[..mn], &hb.xb[..mn]);
    let (y16, yb) = (&mut hb.y16[..mn], &mut hb.yb[..mn]);

    // Correctness against the fp32 baseline: fp16 keeps 11 significant bits, bf16 8.
    baseline::forward(x, &w, &b, y_rust, &mut mean, &mut rstd, EPS);
    y16.fill(half::f16::NAN);
    yb.fill(half::bf16::NAN);
    let args = lnc::args![x16, &mut *y16, &w16, &b16, &mut mean, &mut rstd, n as i32, n as i32, EPS];
    k16.launch(M as u32, &args).map_err(|e| e.to_string())?;
    let got: Vec<f32> = y16.iter().map(|v| v.to_f32()).collect();
    check("y (fp16)", n, &got, y_rust, 2e-2, 1e-2)?;
    let args = lnc::args![xb, &mut *yb, &wb, &bb, &mut mean, &mut rstd, n as i32, n as i32, EPS];
    kb.launch(M as u32, &args).map_err(|e| e.to_string())?;
    let got: Vec<f32> = yb.iter().map(|v| v.to_f32()).collect();
    check("y (bf16)", n, &got, y_rust, 1.5e-1, 3e-2)?;

    let (mut t32, mut t16, mut tb) = (Vec::new(), Vec::new(), Vec::new());
    let (mut t16t, mut tbt) = (Vec::new(), Vec::new());
    for rep in 0..ctx.warmup + ctx.reps {
        // The five kernels run in reverse order on odd repetitions: where a run falls in a
        // repetition moves its time (see the bench README's protocol).
        let mut times = [0.0f64; 5];
        let order = if rep % 2 == 0 { [0, 1, 2, 3, 4] } else { [4, 3, 2, 1, 0] };
        for k in order {
            let (kernel, args) = match k {
                0 => {
                    (&k32, lnc::args![x, &mut *y_lnc, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, EPS])
                }
                1 => (
                    &k16,
                    lnc::args![x16, &mut *y16, &w16, &b16, &mut mean, &mut rstd, n as i32, n as i32, EPS],
                ),
                2 => (&kb, lnc::args![xb, &mut *yb, &wb, &bb, &mut mean, &mut rstd, n as i32, n as i32, EPS]),
                3 => (
                    &k16t,
                    lnc::args![x16, &mut *y16, &w16, &b16, &mut mean, &mut rstd, n as i32, n as i32, EPS],
                ),
                _ => {
                    (&kbt, lnc::args![xb, &mut *yb, &wb, &bb, &mut mean, &mut rstd, n as i32, n as i32, EPS])
                }
            };
            times[k] = timed_launch(ctx, kernel, &args, ctx.unchecked)?;
        }
        let [a, h, g, ht, gt] = times;
        if rep >= ctx.warmup {
            t32.push(a);
            t16.push(h);
            tb.push(g);
            t16t.push(ht);
            tbt.push(gt);
        }
    }
    Ok(HalfRow {
        n,
        f32: Times::of(t32),
        f16: Times::of(t16),
        bf16: Times::of(tb),
        tiles: Some((Times::of(t16t), Times::of(tbt))),
    })
}

/// The half table of `rows`, GB/s counting `moved` elements per element of the M × N
/// block (2 forward, 3 backward) at 2 bytes (4 for fp32).
fn print_half_table(title: &str, rows: &[HalfRow], moved: f64) {
    let tiles = rows.iter().any(|r| r.tiles.is_some());
    println!("\n{title}");
    print!(
        "{:>6} | {:>15} | {:>15} | {:>15} | {:>9} | {:>9}",
        "N", "fp32 GB/s", "fp16 GB/s", "bf16 GB/s", "fp16/fp32", "bf16/fp32"
    );
    println!(
        "{}",
        if tiles { format!(" | {:>10} | {:>10}", "fp16 tiles", "bf16 tiles") } else { String::new() }
    );
    for r in rows {
        let elems = moved * (M * r.n) as f64;
        let (a, ab) = r.f32.gbps(elems * 4.0);
        let (h, hb) = r.f16.gbps(elems * 2.0);
        let (g, gb) = r.bf16.gbps(elems * 2.0);
        print!(
            "{:>6} | {a:>6.2} ({ab:>6.2}) | {h:>6.2} ({hb:>6.2}) | {g:>6.2} ({gb:>6.2}) | {:>8.2}x | {:>8.2}x",
            r.n,
            h / a,
            g / a
        );
        match &r.tiles {
            Some((ht, gt)) => {
                println!(" | {:>9.2}x | {:>9.2}x", ht.gbps(elems * 2.0).0 / a, gt.gbps(elems * 2.0).0 / a)
            }
            None => println!(),
        }
    }
}

fn sweep(ctx: &Ctx<'_>, buf: &mut Buffers, sizes: &[usize]) -> Result<(Vec<Row>, Vec<Row>)> {
    let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
    for &n in sizes {
        let f = forward(ctx, buf, n)?;
        let b = backward(ctx, buf, n, f.copy)?;
        fwd.push(f);
        bwd.push(b);
    }
    Ok((fwd, bwd))
}

fn print_table(title: &str, rows: &[Row], factor: f64) {
    println!("\n{title}");
    let dwdb = rows.iter().any(|r| r.dwdb.is_some());
    let seed = rows.iter().any(|r| r.rust_seed.is_some());
    println!(
        "{:>6} | {:>15} | {:>15} | {:>15} | {:>8} | {:>8} | {:>9} | {:>9}{}{}",
        "N",
        "lnc GB/s",
        "rust GB/s",
        "copy GB/s",
        "lnc/rust",
        "lnc/copy",
        "lnc ms",
        "compile",
        if dwdb { " | dwdb share" } else { "" },
        if seed { " | rust seed-alg GB/s | lnc/seed-alg" } else { "" }
    );
    for r in rows {
        let bytes = factor * (M * r.n * 4) as f64;
        let (l, lb) = r.lnc.gbps(bytes);
        let (b, bb) = r.rust.gbps(bytes);
        let (c, cb) = r.copy.gbps(2.0 * (M * r.n * 4) as f64);
        let share =
            r.dwdb.map(|d| format!(" | {:>10.1}%", 100.0 * d.median / r.lnc.median)).unwrap_or_default();
        let seed = r
            .rust_seed
            .map(|t| {
                let (s, sb) = t.gbps(bytes);
                format!(" | {s:>9.2} ({sb:>6.2}) | {:>11.2}x", l / s)
            })
            .unwrap_or_default();
        println!(
            "{:>6} | {:>6.2} ({:>6.2}) | {:>6.2} ({:>6.2}) | {:>6.2} ({:>6.2}) | {:>7.2}x | {:>7.0}% | {:>9.3} | {:>9}{share}{seed}",
            r.n,
            l,
            lb,
            b,
            bb,
            c,
            cb,
            l / b,
            100.0 * l / c,
            r.lnc.median * 1e3,
            r.compile.map_or_else(|| "cached".to_string(), |c| format!("{:.1} ms", c * 1e3)),
        );
    }
}

/// The forward against another build of it timed in the same repetitions (`pick`: its
/// times, and the median over repetitions of the ratio of the two): `header` names lnc's
/// column, the other's and the ratio's, `legend` says what the ratio is.
fn print_paired(
    title: &str,
    legend: &str,
    header: [&str; 3],
    rows: &[Row],
    pick: impl Fn(&Row) -> Option<(Times, f64)>,
) {
    println!("\n{title}: median ms per launch (best); {legend}");
    println!("{:>6} | {:>17} | {:>17} | {:>8}", "N", header[0], header[1], header[2]);
    for r in rows {
        let Some((t, ratio)) = pick(r) else { continue };
        println!(
            "{:>6} | {:>7.3} ({:>7.3}) | {:>7.3} ({:>7.3}) | {:>7.1}%",
            r.n,
            r.lnc.median * 1e3,
            r.lnc.best * 1e3,
            t.median * 1e3,
            t.best * 1e3,
            100.0 * (ratio - 1.0)
        );
    }
}

/// Where the backward's time goes: lnc's dx + dwdb, the dx kernel cut before its partial
/// sums, and the Rust backward, medians of the same repetitions.
fn print_dx_alone(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "{:>6} | {:>10} | {:>13} | {:>10} | {:>15} | {:>17}",
        "N", "lnc ms", "dx alone ms", "rust ms", "dx alone / rust", "partial-sum share"
    );
    for r in rows {
        let Some(a) = r.dx_alone else { continue };
        println!(
            "{:>6} | {:>10.3} | {:>13.3} | {:>10.3} | {:>14.2}x | {:>16.0}%",
            r.n,
            r.lnc.median * 1e3,
            a.median * 1e3,
            r.rust.median * 1e3,
            a.median / r.rust.median,
            100.0 * (1.0 - a.median / r.lnc.median)
        );
    }
}

/// Cold compile of one kernel: a fresh `Jit` every time (no cache), source text to callable.
fn cold_compile(
    opts: &lnc::CompileOptions,
    source: &str,
    kernel: &str,
    signature: &str,
    reps: usize,
) -> Result<()> {
    let mut wall = Vec::new();
    let mut parts: [Vec<f64>; 4] = Default::default();
    for _ in 0..reps + 2 {
        let t = Instant::now();
        let jit = Jit::with_options(opts.clone());
        let k = jit
            .module("triton_05_layer_norm.py", source)
            .and_then(|m| m.kernel(kernel, signature))
            .map_err(|e| e.to_string())?;
        wall.push(t.elapsed().as_secs_f64());
        let tm = k.timings();
        for (p, d) in parts.iter_mut().zip([tm.front, tm.opt, tm.tile, tm.codegen]) {
            p.push(d.as_secs_f64());
        }
    }
    let first = wall[0];
    // The first two runs are warm-up (the very first one also pays for first-use paging of
    // the compiler's own code); they are reported separately.
    let w = Times::of(wall.split_off(2));
    let med: Vec<f64> = parts.into_iter().map(|mut p| Times::of(p.split_off(2)).median * 1e3).collect();
    println!(
        "{kernel:<26} | {:>8.2} | {:>8.2} | {:>8.2} | {:>5.2} {:>5.2} {:>5.2} {:>7.2} | {signature}",
        w.median * 1e3,
        w.best * 1e3,
        first * 1e3,
        med[0],
        med[1],
        med[2],
        med[3],
    );
    Ok(())
}

/// Launch overhead of a warm 1-program grid of a trivial kernel: median over batches.
fn launch_overhead(unchecked: bool) -> Result<()> {
    const BATCH: usize = 100;
    const BATCHES: usize = 200;
    let module = Jit::new().module("trivial.py", TRIVIAL).map_err(|e| e.to_string())?;
    let k = module.kernel("_trivial", "*fp32").map_err(|e| e.to_string())?;
    let mut out = vec![0.0f32; 1];
    let mut per = Vec::with_capacity(BATCHES);
    for b in 0..BATCHES + 10 {
        let t = Instant::now();
        for _ in 0..BATCH {
            launch(&k, 1, &lnc::args![&mut out], unchecked)?;
        }
        if b >= 10 {
            per.push(t.elapsed().as_secs_f64() / BATCH as f64);
        }
    }
    if out[0] != 1.0 {
        return Err(format!("the trivial kernel wrote {} instead of 1", out[0]));
    }
    let t = Times::of(per);
    println!(
        "\nlaunch overhead, warm 1-program grid of a trivial kernel (store one value){}: median {:.2} µs, best {:.2} µs ({BATCHES} batches of {BATCH} launches)",
        if unchecked { ", unchecked" } else { "" },
        t.median * 1e6,
        t.best * 1e6
    );
    Ok(())
}

fn kernels_path(opts: &Opts) -> PathBuf {
    if let Some(p) = &opts.kernels {
        return p.clone();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let seed = root.join("../shared/seeds/triton_05_layer_norm.py");
    if seed.exists() { seed } else { root.join("examples/kernels/layer_norm.py") }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())
}

fn main() -> std::process::ExitCode {
    match run(Opts::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(opts: Opts) -> Result<()> {
    let started = Instant::now();
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = opts.threads.unwrap_or(machine).max(1);
    let sizes: Vec<usize> = match &opts.sizes {
        Some(s) => s.clone(),
        None if opts.quick => QUICK_SIZES.to_vec(),
        None => SIZES.to_vec(),
    };
    if sizes.is_empty() || sizes.iter().any(|&n| n == 0 || n > 16384) {
        return Err(
            "--sizes: at least one N, every N in 1..=16384 (the seed's BLOCK_SIZE limit for fp32)".into()
        );
    }
    let reps = opts.reps.unwrap_or(if opts.quick { 10 } else { 30 }).max(1);
    let warmup = if opts.quick { 2 } else { 3 };
    let path = kernels_path(&opts);
    let source =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;

    println!("lnc layer-norm benchmark (fp32, M = {M})");
    println!(
        "machine: {} hardware threads{}; pool: {threads} thread{}; {} launches",
        machine,
        cpu_model().map(|m| format!(" ({m})")).unwrap_or_default(),
        if threads == 1 { "" } else { "s" },
        if opts.unchecked {
            "unchecked"
        } else if opts.no_prove {
            "safe, bounds-checked (--no-prove)"
        } else {
            "safe (proved in bounds before they run, else bounds-checked)"
        }
    );
    println!("kernels: {}", path.display());
    let compile_opts = lnc::CompileOptions {
        prefetch: !opts.no_prefetch,
        f16c: !opts.no_f16c,
        defer_stores: !opts.no_defer_stores,
        group_programs: !opts.no_group_programs,
        prove_bounds: !opts.no_prove,
        ..Default::default()
    };
    let compile_opts = if opts.no_wide { compile_opts.narrow() } else { compile_opts };
    let compile_opts = if opts.no_zmm { compile_opts.in_256_bits() } else { compile_opts };
    if opts.no_wide {
        println!("compiled with 128-bit vectors only (--no-wide)");
    } else if compile_opts.wide && lnc::computes_wide() {
        println!("fp32 tile loops that qualify run in 256-bit vectors (AVX2), rewritten after Cranelift");
        if compile_opts.lanes == 16 {
            println!(
                "fp16/bf16 kernels' tile loops that qualify run in 512-bit vectors (AVX-512), encoded again after Cranelift"
            );
        } else if opts.no_zmm && lnc::computes_zmm() {
            println!("fp16/bf16 kernels compiled in 256-bit loops, not 512 (--no-zmm)");
        }
    }
    if opts.no_defer_stores {
        println!("compiled without deferring stores past spin locks (--no-defer-stores)");
    }
    if opts.no_group_programs {
        println!("programs with locks by program id run from one shared range (--no-group-programs)");
    }
    if opts.no_prefetch {
        println!("compiled without prefetches of the next program's rows (--no-prefetch)");
    }
    if opts.no_f16c {
        println!("compiled converting fp16 tiles with integer code, not F16C (--no-f16c)");
    } else if lnc::converts_f16_natively() {
        println!("fp16 tiles convert with F16C (vcvtph2ps, vcvtps2ph), rewritten after Cranelift");
    }
    let flush = (!opts.hot).then(|| Mutex::new(lnc_runtime::CacheFlush::new()));
    println!(
        "protocol: {warmup} warm-up + {reps} timed repetitions, interleaved (lnc, rust, copy); median (best); {}",
        match &flush {
            Some(f) => format!(
                "caches flushed before every timed run ({} MiB written)",
                f.lock().unwrap_or_else(|e| e.into_inner()).bytes() >> 20
            ),
            None => "hot caches (--hot): no flush between runs".to_string(),
        }
    );

    // Compile time and launch overhead first, before the big buffers exist.
    let compile_reps = 20;
    println!(
        "\ncold compile, source text to callable, fresh Jit each time (ms; median and best of {compile_reps}, first = first in process)"
    );
    println!(
        "{:<26} | {:>8} | {:>8} | {:>8} | {:>5} {:>5} {:>5} {:>7} | signature",
        "kernel", "median", "best", "first", "front", "opt", "tile", "codegen"
    );
    cold_compile(&compile_opts, &source, FWD, &fwd_signature(1024), compile_reps)?;
    cold_compile(&compile_opts, &source, BWD_DX, &dx_signature(1024), compile_reps)?;
    cold_compile(&compile_opts, &source, BWD_DWDB, DWDB_SIGNATURE, compile_reps)?;
    launch_overhead(opts.unchecked)?;

    let max_n = sizes.iter().copied().max().unwrap_or(1);
    let t = Instant::now();
    let mut buf = Buffers {
        x: randn(M * max_n, -2.3, 0.5, 3),
        dy: randn(M * max_n, 0.0, 0.1, 4),
        out_lnc: touched(M * max_n),
        out_rust: touched(M * max_n),
    };
    println!(
        "\ninputs: x = -2.3 + 0.5·randn, dy = 0.1·randn, w, b = rand; {:.0} MiB allocated and touched in {:.1} s",
        4.0 * (buf.x.len() * 4) as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );

    // lnc launches from inside the pool (`install`): a `Jit` without a pool of its own runs
    // on the current one, so lnc and the baselines share the same threads. A fresh `Jit`
    // per sweep, so that each sweep's compile column shows first compiles.
    let measure = |threads: usize, buf: &mut Buffers| -> Result<(Vec<Row>, Vec<Row>)> {
        pool(threads)?.install(|| {
            let new_module = |opts: lnc::CompileOptions| {
                Jit::with_options(opts)
                    .module(path.display().to_string(), source.clone())
                    .map_err(|e| e.to_string())
            };
            let module = new_module(compile_opts.clone())?;
            let copies =
                (1..FWD_COPIES).map(|_| new_module(compile_opts.clone())).collect::<Result<Vec<_>>>()?;
            let narrow = (compile_opts.wide && lnc::computes_wide())
                .then(|| new_module(compile_opts.clone().narrow()))
                .transpose()?;
            let dx_alone = dx_alone_source(&source).map(|src| {
                Jit::with_options(compile_opts.clone()).module("dx_alone.py", src).map_err(|e| e.to_string())
            });
            let dx_alone = dx_alone.transpose()?;
            let undeferred = compile_opts
                .defer_stores
                .then(|| new_module(lnc::CompileOptions { defer_stores: false, ..compile_opts.clone() }))
                .transpose()?;
            let ungrouped = compile_opts
                .group_programs
                .then(|| new_module(lnc::CompileOptions { group_programs: false, ..compile_opts.clone() }))
                .transpose()?;
            let ctx = Ctx {
                module: &module,
                compiled: RefCell::default(),
                reps,
                warmup,
                unchecked: opts.unchecked,
                chunks: 4 * threads,
                flush: flush.as_ref(),
                copies: &copies,
                narrow: narrow.as_ref(),
                undeferred: undeferred.as_ref(),
                ungrouped: ungrouped.as_ref(),
                dx_alone: dx_alone.as_ref(),
            };
            sweep(&ctx, buf, &sizes)
        })
    };

    let (fwd, bwd) = measure(threads, &mut buf)?;
    let tag = format!("{threads} thread{}", if threads == 1 { "" } else { "s" });
    print_table(
        &format!("forward, {tag}: GB/s = 2·M·N·4 / t, median (best); copy = parallel copy of x into y"),
        &fwd,
        2.0,
    );
    print_table(
        &format!("backward (dx kernel + dwdb kernel), {tag}: GB/s = 3·M·N·4 / t, median (best)"),
        &bwd,
        3.0,
    );
    if !opts.unchecked {
        for (what, rows) in [("forward", &fwd), ("backward", &bwd)] {
            let proved: Vec<String> = rows.iter().filter(|r| r.proved).map(|r| r.n.to_string()).collect();
            println!(
                "safe launches of the {what} proved in bounds (running the unchecked code) at N = {}",
                if proved.is_empty() { "none".to_string() } else { proved.join(", ") }
            );
        }
    }

    if fwd.iter().any(|r| r.unchecked.is_some()) {
        print_paired(
            &format!(
                "cost of safe launches on the forward, {tag}: {}",
                match fwd.iter().filter(|r| r.proved).count() {
                    0 => "none proved in bounds, they run the bounds-checked code".to_string(),
                    k if k == fwd.len() => {
                        "all proved in bounds: they run the unchecked code (--no-prove: the checked code)"
                            .to_string()
                    }
                    k => format!(
                        "{k} of {} sizes proved in bounds (unchecked code), the others checked",
                        fwd.len()
                    ),
                }
            ),
            "overhead = median over repetitions of safe/unchecked − 1",
            ["safe ms", "unchecked ms", "overhead"],
            &fwd,
            |r| r.unchecked,
        );
    }
    if fwd.iter().any(|r| r.narrow.is_some()) {
        print_paired(
            &format!("256-bit loops on the forward, {tag}"),
            "lnc and lnc compiled with 128-bit vectors only (--no-wide); gain = median over \
             repetitions of 128-bit/lnc − 1",
            ["lnc ms", "128-bit ms", "gain"],
            &fwd,
            |r| r.narrow,
        );
    }
    if bwd.iter().any(|r| r.dx_alone.is_some()) {
        print_dx_alone(
            &format!(
                "where the backward's time goes, {tag}: median ms; dx alone = the seed's dx kernel cut \
                 before its partial sums of dw and db (it stores dx only), timed in the same repetitions; \
                 partial-sum share = 1 − dx alone / lnc"
            ),
            &bwd,
        );
    }
    if bwd.iter().any(|r| r.undeferred.is_some()) {
        print_paired(
            &format!("stores deferred past the spin lock on the backward's dx kernel, {tag}"),
            "lnc and lnc compiled without deferred stores (--no-defer-stores), dx + dwdb; gain = \
             median over repetitions of undeferred/lnc − 1",
            ["lnc ms", "undeferred ms", "gain"],
            &bwd,
            |r| r.undeferred,
        );
    }
    if bwd.iter().any(|r| r.ungrouped.is_some()) {
        print_paired(
            &format!("programs scheduled by lock group on the backward's dx kernel, {tag}"),
            "lnc (each worker runs the rows of its own share of the `row % GROUP_SIZE_M` locks) and \
             lnc with workers taking chunks of one shared range (--no-group-programs), dx + dwdb; \
             gain = median over repetitions of ungrouped/lnc − 1",
            ["lnc ms", "ungrouped ms", "gain"],
            &bwd,
            |r| r.ungrouped,
        );
    }

    if !opts.no_half {
        let t = Instant::now();
        let mut hb = HalfBuffers {
            x16: buf.x.par_iter().map(|&v| half::f16::from_f32(v)).collect(),
            y16: vec![half::f16::ZERO; M * max_n],
            xb: buf.x.par_iter().map(|&v| half::bf16::from_f32(v)).collect(),
            yb: vec![half::bf16::ZERO; M * max_n],
            dy16: buf.dy.par_iter().map(|&v| half::f16::from_f32(v)).collect(),
            dyb: buf.dy.par_iter().map(|&v| half::bf16::from_f32(v)).collect(),
        };
        let converted = t.elapsed().as_secs_f64();
        let rows = pool(threads)?.install(|| {
            let module = Jit::with_options(compile_opts.clone())
                .module(path.display().to_string(), source.clone())
                .map_err(|e| e.to_string())?;
            let ctx = Ctx {
                module: &module,
                compiled: RefCell::default(),
                reps,
                warmup,
                unchecked: opts.unchecked,
                chunks: 4 * threads,
                flush: flush.as_ref(),
                copies: &[],
                narrow: None,
                undeferred: None,
                ungrouped: None,
                dx_alone: None,
            };
            // The same kernels converting tile by tile, for the gain of whole-row conversions.
            let opts = lnc::CompileOptions { half_rows: false, ..compile_opts.clone() };
            let tiles = Jit::with_options(opts)
                .module(path.display().to_string(), source.clone())
                .map_err(|e| e.to_string())?;
            let fwd = sizes
                .iter()
                .map(|&n| half_forward(&ctx, &tiles, &mut buf, &mut hb, n))
                .collect::<Result<Vec<_>>>()?;
            let bwd = sizes
                .iter()
                .map(|&n| half_backward(&ctx, &mut buf, &mut hb, n))
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, String>((fwd, bwd))
        })?;
        let (rows, bwd_rows) = rows;
        print_half_table(
            &format!(
                "forward with fp16 / bf16 storage (compute fp32), {tag}: GB/s = 2·M·N·bytes / t at 2 bytes per \
                 element (4 for fp32), median (best); inputs converted in {converted:.1} s"
            ),
            &rows,
            2.0,
        );
        print_half_table(
            &format!(
                "backward (dx kernel + dwdb kernel) with fp16 / bf16 storage (compute fp32), {tag}: GB/s = \
                 3·M·N·bytes / t at 2 bytes per element (4 for fp32), median (best)"
            ),
            &bwd_rows,
            3.0,
        );
    }

    if opts.scaling {
        let (fwd1, bwd1) = measure(1, &mut buf)?;
        print_table("forward, 1 thread", &fwd1, 2.0);
        print_table("backward, 1 thread", &bwd1, 3.0);
        println!("\n1 → {threads} threads speedup (ratio of median times); lnc/copy at {threads} threads");
        println!(
            "{:>6} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | {:>13} | {:>12}",
            "N", "lnc fwd", "rust fwd", "copy", "lnc bwd", "rust bwd", "rust seed-alg", "lnc/copy fwd"
        );
        for (((f1, fp), b1), bp) in fwd1.iter().zip(&fwd).zip(&bwd1).zip(&bwd) {
            println!(
                "{:>6} | {:>7.2}x | {:>7.2}x | {:>7.2}x | {:>7.2}x | {:>7.2}x | {:>12.2}x | {:>11.0}%",
                f1.n,
                f1.lnc.median / fp.lnc.median,
                f1.rust.median / fp.rust.median,
                f1.copy.median / fp.copy.median,
                b1.lnc.median / bp.lnc.median,
                b1.rust.median / bp.rust.median,
                match (b1.rust_seed, bp.rust_seed) {
                    (Some(a), Some(b)) => a.median / b.median,
                    _ => f64::NAN,
                },
                100.0 * fp.copy.median / fp.lnc.median,
            );
        }
    }
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
