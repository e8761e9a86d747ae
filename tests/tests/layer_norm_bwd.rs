//! The tutorial's host flow on lnc: forward, then the backward dx kernel with partial dw/db
//! accumulated under the seed's spin lock, then the dwdb kernel — all three kernels
//! compiled from the tutorial file as it is, checked against float64 references.

mod common;

use common::*;

struct Backward {
    dx: Vec<f32>,
    dw: Vec<f32>,
    db: Vec<f32>,
}

/// Runs forward, dx and dwdb like `LayerNorm.forward/backward` of the tutorial.
#[allow(clippy::too_many_arguments)]
fn run_flow(
    module: &lnc::Module,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    dy: &[f32],
    n: usize,
    group: usize,
    eps: f32,
) -> (Vec<f32>, Backward) {
    let m = x.len() / n;
    let block = n.next_power_of_two();
    let fwd = module
        .kernel("_layer_norm_fwd_fused", &format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
    fwd.launch(m as u32, &lnc::args![x, &mut y, w, b, &mut mean, &mut rstd, n as i32, n as i32, eps])
        .unwrap_or_else(|e| panic!("{e}"));

    let dx_k = module
        .kernel(
            "_layer_norm_bwd_dx_fused",
            &format!(
                "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let mut locks = vec![0i32; 2 * group];
    // Poisoned: the first program of each group must overwrite, not accumulate.
    let (mut pdw, mut pdb) = (vec![f32::NAN; group * n], vec![f32::NAN; group * n]);
    let mut dx = vec![f32::NAN; m * n];
    dx_k.launch(
        m as u32,
        &lnc::args![
            &mut dx, dy, &mut pdw, &mut pdb, x, w, b, &mean, &rstd, &mut locks, n as i32, n as i32, eps
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));

    let dwdb = module
        .kernel("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128")
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut dw, mut db) = (vec![f32::NAN; n], vec![f32::NAN; n]);
    // Groups no row maps to stay poisoned; the tutorial's kernel reads all GROUP_SIZE_M
    // rows, so only the first min(M, GROUP_SIZE_M) are summed here, as the tutorial's
    // buffers would be after `torch.empty` were they all written.
    let rows = group.min(m);
    dwdb.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &pdb, &mut dw, &mut db, rows as i32, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    (y, Backward { dx, dw, db })
}

#[test]
fn forward_and_backward_match_float64_reference() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    // 4099 rows: the runtime's longest chunks of programs, on a pool of up to 4 threads.
    for (m, n) in [(1usize, 1usize), (3, 17), (151, 1000), (300, 1537), (64, 4097), (4099, 33)] {
        let x = randn(&mut rng, m * n, -2.3, 0.5);
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let dy = randn(&mut rng, m * n, 0.0, 0.1);
        let eps = 1e-5f32;
        let group = group_size_m(n);
        let (y, bwd) = run_flow(&module, &x, &w, &b, &dy, n, group, eps);
        let (ry, _, _) = layer_norm_ref(&x, &w, &b, n, eps as f64);
        let (rdx, rdw, rdb) = backward_ref(&x, &w, &dy, n, eps as f64);
        assert_close(&format!("y ({m}x{n})"), &y, &ry, 1e-5, 1e-5);
        assert_close(&format!("dx ({m}x{n})"), &bwd.dx, &rdx, 1e-4, 1e-4);
        // dw/db sum m terms in float32.
        let tol = 1e-5 * m as f64;
        assert_close(&format!("dw ({m}x{n})"), &bwd.dw, &rdw, tol, 1e-4);
        assert_close(&format!("db ({m}x{n})"), &bwd.db, &rdb, tol, 1e-4);
    }
}

/// The dx kernel's programs wait for each other only within a group of `row %
/// GROUP_SIZE_M` (scheduled by group, unless `CompileOptions::group_programs` is off).
#[test]
fn only_the_kernel_with_atomics_runs_as_synchronizing_programs() {
    let dx_sig = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,256,1024";
    let ungrouped = seed_module(&lnc::Jit::with_options(lnc::CompileOptions {
        group_programs: false,
        ..Default::default()
    }));
    let k = ungrouped.kernel("_layer_norm_bwd_dx_fused", dx_sig).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.programs(), lnc::Programs::Synchronizing);
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let programs =
        |name: &str, sig: &str| module.kernel(name, sig).unwrap_or_else(|e| panic!("{e}")).programs();
    assert_eq!(
        programs("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024"),
        lnc::Programs::Independent
    );
    assert_eq!(programs("_layer_norm_bwd_dx_fused", dx_sig), lnc::Programs::Grouped { groups: 256 });
    assert_eq!(
        programs("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128"),
        lnc::Programs::Independent
    );
}

#[test]
fn backward_spin_lock_under_contention() {
    // Many rows share few lock-protected partial buffers, on pools with more threads than
    // cores: every repetition must finish (no deadlock) with every partial sum counted.
    let base = lnc::Jit::new();
    let mut rng = rng();
    let (m, n, group) = (4096usize, 200usize, 4usize);
    let x = randn(&mut rng, m * n, -2.3, 0.5);
    let w = randn(&mut rng, n, 1.0, 0.3);
    let b = randn(&mut rng, n, 0.0, 0.5);
    let dy = randn(&mut rng, m * n, 0.0, 0.1);
    let eps = 1e-5f32;
    let (rdx, rdw, rdb) = backward_ref(&x, &w, &dy, n, eps as f64);
    for threads in [2usize, 8, 16] {
        let jit = base.with_threads(threads).expect("thread pool");
        let module = seed_module(&jit);
        for rep in 0..8 {
            let (_, bwd) = run_flow(&module, &x, &w, &b, &dy, n, group, eps);
            let what = |v: &str| format!("{v} ({threads} threads, repetition {rep})");
            assert_close(&what("dx"), &bwd.dx, &rdx, 1e-4, 1e-4);
            assert_close(&what("dw"), &bwd.dw, &rdw, 2e-3, 1e-4);
            assert_close(&what("db"), &bwd.db, &rdb, 2e-3, 1e-4);
        }
    }
}

/// Scheduled by group (each worker runs the rows of its own share of the locks, on a pool
/// of 1, 2 and 3 threads) or from one shared range, the dx kernel computes the same dx
/// bits, and partial dw and db rows that match float64 sums over each group's rows (their
/// order of accumulation is the order in which programs take the lock).
#[test]
fn the_group_schedule_gives_the_same_results() {
    let mut rng = rng();
    let (group, n) = (64usize, 77usize);
    let m = 5 * group + 3;
    let x: Vec<f32> = randn(&mut rng, m * n, 0.7, 1.3);
    let dy: Vec<f32> = randn(&mut rng, m * n, 0.0, 0.2);
    let w: Vec<f32> = randn(&mut rng, n, 1.0, 0.3);
    let jit = |group_programs: bool| {
        lnc::Jit::with_options(lnc::CompileOptions { group_programs, ..Default::default() })
    };
    let module = |jit: lnc::Jit| seed_module(&jit);
    let (dx_ref, _, _) = run_seed_dx(&module(jit(false)), &x, &dy, &w, n, group, false);
    // Partial sums in float64, from the same mean and rstd (the forward in float64).
    let mut pdw_ref = vec![0.0f64; group * n];
    let mut pdb_ref = vec![0.0f64; group * n];
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for c in 0..n {
            let g = dy[r * n + c] as f64;
            pdw_ref[(r % group) * n + c] += g * (row[c] as f64 - mean) * rstd;
            pdb_ref[(r % group) * n + c] += g;
        }
    }
    for threads in [1, 2, 3] {
        let grouped = module(jit(true).with_threads(threads).unwrap_or_else(|e| panic!("{e}")));
        let (dx, pdw, pdb) = run_seed_dx(&grouped, &x, &dy, &w, n, group, false);
        assert!(dx.iter().zip(&dx_ref).all(|(a, b)| a.to_bits() == b.to_bits()), "{threads} threads: dx");
        assert_close(&format!("partial dw, {threads} threads"), &pdw, &pdw_ref, 1e-5, 1e-4);
        assert_close(&format!("partial db, {threads} threads"), &pdb, &pdb_ref, 1e-5, 1e-4);
    }
}
