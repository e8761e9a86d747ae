//! Stores deferred past a spin lock's acquire (lnc-tile's `defer`): the seed's dx kernel
//! with `GROUP_SIZE_M` ≥ 64 stores dx after taking its lock. The same bits as the kernel
//! compiled without deferring, launched safely and unchecked, in fp32, fp16 and bf16,
//! against a float64 reference, with outputs poisoned; and a safe launch whose dx store
//! would fault fails where the source puts the store (its bounds are checked there), before
//! taking its lock: it reports dx even when the lock is out of bounds too, and leaves no
//! lock held.

mod common;

use common::*;
use half::{bf16, f16};
use lnc::{DumpRequest, Stage};

const DX: &str = "_layer_norm_bwd_dx_fused";

fn module(defer_stores: bool) -> lnc::Module {
    let opts = lnc::CompileOptions { defer_stores, ..Default::default() };
    seed_module(&lnc::Jit::with_options(opts))
}

/// The dx kernel's outputs (dx, partial dw, partial db) as f64 ([`run_seed_dx`]).
fn dx_outputs<T: Float>(
    module: &lnc::Module,
    x: &[T],
    dy: &[T],
    w: &[T],
    n: usize,
    group: usize,
    unchecked: bool,
) -> [Vec<f64>; 3] {
    let (dx, pdw, pdb) = run_seed_dx(module, x, dy, w, n, group, unchecked);
    let f = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    [f(&dx), f(&pdw), f(&pdb)]
}

/// Where, in the loop IR of `kernel` (of safe launches when `checked`), the first store
/// into parameter `param` is, and the first that only checks its bounds, if any:
/// whether each comes after the first spin loop.
fn stores_after_lock(
    module: &lnc::Module,
    kernel: &str,
    sig: &str,
    param: &str,
    checked: bool,
) -> (bool, Option<bool>) {
    let req = DumpRequest { stages: vec![Stage::Lir], checked, ..Default::default() };
    let dumps = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{e}"));
    let text = &dumps[0].text;
    let marker = format!(" ({param}) span ");
    let site = text
        .lines()
        .filter(|l| l.contains(&marker))
        .find_map(|l| l.trim_start().strip_prefix("site ")?.split_once(':').map(|(k, _)| k.to_string()))
        .unwrap_or_else(|| panic!("no access to {param}:\n{text}"));
    let lines: Vec<&str> = text.lines().collect();
    let spin = lines.iter().position(|l| l.trim_start().starts_with("while")).expect("the spin loop");
    let of_site = |check: bool| {
        lines.iter().position(|l| {
            l.contains("store")
                && l.contains(".check_only") == check
                && l.ends_with(&format!("; site {site}"))
        })
    };
    let store = of_site(false).unwrap_or_else(|| panic!("no store into {param}:\n{text}"));
    (store > spin, of_site(true).map(|c| c > spin))
}

/// Whether the store into `param` comes after the spin loop, in the code of both kinds of
/// launch; checking that safe launches check its bounds before the loop, and unchecked
/// ones not at all.
fn stored_after_lock(module: &lnc::Module, kernel: &str, sig: &str, param: &str) -> bool {
    let (safe, check) = stores_after_lock(module, kernel, sig, param, true);
    let (unchecked, none) = stores_after_lock(module, kernel, sig, param, false);
    assert_eq!(safe, unchecked, "both kinds of launch store {param} at the same place");
    assert_eq!(none, None, "unchecked code checks no bounds");
    assert_eq!(check, safe.then_some(false), "a safe launch checks a deferred store before the lock");
    safe
}

fn deferred_matches<T: Float>(atol: f64, rtol: f64) {
    let mut rng = rng();
    let (deferred, kept) = (module(true), module(false));
    let sig = seed_dx_signature(T::SIG, 64, 1024);
    assert!(stored_after_lock(&deferred, DX, &sig, "DX"), "dx is stored after taking the lock");
    assert!(!stored_after_lock(&kept, DX, &sig, "DX"));
    // m = group: one row per lock, so the partial sums do not depend on the schedule.
    for (group, n) in [(64usize, 1000usize), (64, 61), (128, 1029), (256, 7)] {
        let m = group;
        let x: Vec<T> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(T::from_f32).collect();
        let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3).into_iter().map(T::from_f32).collect();
        let dy: Vec<T> = randn(&mut rng, m * n, 0.0, 0.1).into_iter().map(T::from_f32).collect();
        let got = dx_outputs(&deferred, &x, &dy, &w, n, group, true);
        for (what, want) in [
            ("the kernel without deferred stores", dx_outputs(&kept, &x, &dy, &w, n, group, true)),
            ("the safe launch", dx_outputs(&deferred, &x, &dy, &w, n, group, false)),
        ] {
            for (k, (g, c)) in got.iter().zip(&want).enumerate() {
                let same = g.iter().zip(c).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{} {m}x{n}: output {k} differs from {what}", T::SIG);
            }
        }
        // dx against float64, from the inputs as stored.
        let (x32, w32, dy32): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            x.iter().map(|v| v.to_f64() as f32).collect(),
            w.iter().map(|v| v.to_f64() as f32).collect(),
            dy.iter().map(|v| v.to_f64() as f32).collect(),
        );
        let (dx_ref, _, _) = backward_ref(&x32, &w32, &dy32, n, 1e-5);
        let dx: Vec<f32> = got[0].iter().map(|&v| v as f32).collect();
        assert_close(&format!("{} dx {m}x{n}", T::SIG), &dx, &dx_ref, atol, rtol);
    }
}

#[test]
fn deferred_stores_give_the_same_bits_fp32() {
    deferred_matches::<f32>(1e-5, 1e-4);
}

#[test]
fn deferred_stores_give_the_same_bits_fp16() {
    deferred_matches::<f16>(2e-3, 1e-2);
}

#[test]
fn deferred_stores_give_the_same_bits_bf16() {
    deferred_matches::<bf16>(1.6e-2, 2e-2);
}

/// The line of the seed's `tl.store(DX + cols, dx, mask=mask)`, as errors name it.
fn dx_store_line() -> String {
    let line = seed_source().lines().position(|l| l.contains("tl.store(DX + cols")).expect("the dx store");
    format!("triton_05_layer_norm.py:{}:", line + 1)
}

/// A safe launch of the seed's dx kernel (`group` locks, rows of `n`) on `m` rows with
/// `dx` and `locks` of the lengths given (the other buffers whole), which must fail;
/// returns its error and the lock words of the groups (`locks[..group]`).
fn failed_dx_launch(
    k: &lnc::Kernel,
    m: usize,
    n: usize,
    group: usize,
    dx_len: usize,
    locks_len: usize,
) -> (String, Vec<i32>) {
    let x = vec![0.5f32; m * n];
    let dy = vec![0.1f32; m * n];
    let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
    let (mean, rstd) = (vec![0.0f32; m], vec![1.0f32; m]);
    let mut dx = vec![f32::NAN; dx_len];
    let (mut pdw, mut pdb) = (vec![0.0f32; group * n], vec![0.0f32; group * n]);
    let mut locks = vec![0i32; locks_len];
    let args = lnc::args![
        &mut dx, &dy, &mut pdw, &mut pdb, &x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32, 1e-5f32
    ];
    let err = k.launch(m as u32, &args).expect_err("a buffer is too short");
    (err.to_string(), locks[..group].to_vec())
}

/// A safe launch checks the bounds of dx where the source stores it, before the lock: dx
/// one element (or rows) short fails naming DX at that line, and no lock is left held
/// (checked after the lock, the faulting program would have held its lock, and a later
/// launch on the same lock words would wait forever).
#[test]
fn a_safe_launch_whose_dx_store_faults_leaves_no_lock_held() {
    let (group, n) = (64usize, 1000usize);
    let m = 3 * group;
    let k =
        module(true).kernel(DX, &seed_dx_signature("fp32", group, 1024)).unwrap_or_else(|e| panic!("{e}"));
    for short in [1, n + 1, 2 * n + 5] {
        let (text, locks) = failed_dx_launch(&k, m, n, group, m * n - short, 2 * group);
        assert!(text.contains("DX") && text.contains(&dx_store_line()), "{text}");
        assert!(locks.iter().all(|&l| l == 0), "short by {short}: a lock left held: {locks:?}");
    }
}

/// A program whose dx store and lock count are both out of bounds fails on dx, the first
/// of the two in the source, as when the store is not deferred.
#[test]
fn a_safe_launch_reports_the_dx_store_before_the_lock() {
    let (group, n) = (64usize, 100usize);
    let m = group;
    let sig = seed_dx_signature("fp32", group, 128);
    for defer_stores in [true, false] {
        let k = module(defer_stores).kernel(DX, &sig).unwrap_or_else(|e| panic!("{e}"));
        // Rows 62 and 63: dx short by n + 1, their counts (after the locks) past the end.
        let (text, locks) = failed_dx_launch(&k, m, n, group, m * n - n - 1, 2 * group - 2);
        assert!(text.contains("DX") && text.contains(&dx_store_line()), "deferred {defer_stores}: {text}");
        assert!(locks.iter().all(|&l| l == 0), "a lock left held: {locks:?}");
    }
}

/// An assert after the lock in code whose store was deferred, launched unchecked: the
/// failure names the assert's line (the unchecked code was tiled apart from the safe
/// launch's, and its own sites are the ones reported).
#[test]
fn an_assert_after_a_deferred_store_names_its_line() {
    let src = r#"import triton
import triton.language as tl

@triton.jit
def k(Y, X, Lock, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, x * 2.0, mask=m)
    lock = Lock + row % 64
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.device_assert(row < 5, "row too large")
    tl.atomic_xchg(lock, 0)
"#;
    let module = lnc::Jit::new().module("assert_after_lock.py", src.to_string()).expect("parses");
    let sig = "*fp32,*fp32,*i32,i32,64";
    assert!(stored_after_lock(&module, "k", sig, "Y"), "the store is deferred");
    let k = module.kernel("k", sig).unwrap_or_else(|e| panic!("{e}"));
    let (m, n) = (8usize, 40usize);
    let x = vec![1.0f32; m * n];
    let mut y = vec![f32::NAN; m * n];
    let mut locks = vec![0i32; 64];
    // SAFETY: every buffer has the length the kernel indexes.
    let err = unsafe { k.launch_unchecked(m as u32, &lnc::args![&mut y, &x, &mut locks, n as i32]) }
        .expect_err("rows 5 to 7 fail the assert");
    let text = err.to_string();
    assert!(text.contains("assert_after_lock.py:14:"), "{text}");
    assert!(text.contains("device_assert"), "{text}");
}

/// A kernel whose deferred store's value reads an argument nothing before the lock reads
/// (`z`): its copy that checks the store's bounds keeps the store's value, so `z` is read,
/// and its bounds checked, before the lock too (found by review: with a constant in the
/// check, Z one element short faulted under the lock and left it held).
const LAZY_LOAD: &str = r#"import triton
import triton.language as tl

@triton.jit
def k(Y, X, Z, Lock, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    s = tl.sum(x, axis=0) / N
    z = tl.load(Z + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, x * s + z, mask=m)
    lock = Lock + row % 64
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.atomic_xchg(lock, 0)
"#;

/// With Z short (and Y too), a safe launch fails as the kernel compiled without deferring
/// does, naming the same access, and leaves no lock held.
#[test]
fn a_load_the_deferred_store_reads_is_checked_before_the_lock() {
    let sig = "*fp32,*fp32,*fp32,*i32,i32,64";
    let (m, n) = (4usize, 40usize);
    let x = vec![1.0f32; m * n];
    let run = |defer_stores: bool, y_short: usize| {
        let opts = lnc::CompileOptions { defer_stores, ..Default::default() };
        let module = lnc::Jit::with_options(opts).module("lazy.py", LAZY_LOAD.to_string()).expect("parses");
        if defer_stores {
            assert!(stored_after_lock(&module, "k", sig, "Y"), "the store is deferred");
        }
        let k = module.kernel("k", sig).unwrap_or_else(|e| panic!("{e}"));
        let z = vec![1.0f32; m * n - 1];
        let mut y = vec![f32::NAN; m * n - y_short];
        let mut locks = vec![0i32; 64];
        let err =
            k.launch(m as u32, &lnc::args![&mut y, &x, &z, &mut locks, n as i32]).expect_err("Z is short");
        assert!(locks.iter().all(|&l| l == 0), "deferred {defer_stores}: a lock left held: {locks:?}");
        err.to_string()
    };
    for y_short in [0, 1] {
        let (kept, deferred) = (run(false, y_short), run(true, y_short));
        assert!(kept.contains("`Z`") && kept.contains("lazy.py:11:"), "{kept}");
        assert_eq!(deferred, kept, "Y short by {y_short}");
    }
}

/// A load before the lock that only the critical section uses (`z`, of an argument
/// nothing writes, which the tiler would otherwise read again where it is used): a safe
/// launch reads it, and checks its bounds, before taking the lock (found by review: with
/// Z short, the fault happened with the lock held, with or without deferred stores).
#[test]
fn a_load_before_the_lock_used_only_after_it_is_checked_before() {
    let src = r#"import triton
import triton.language as tl

@triton.jit
def k(Z, P, Lock, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    z = tl.load(Z + row * N + i, mask=m, other=0.)
    lock = Lock + row % 64
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    p = tl.load(P + (row % 64) * N + i, mask=m, other=0.)
    tl.store(P + (row % 64) * N + i, p + z, mask=m)
    tl.atomic_xchg(lock, 0)
"#;
    let (m, n) = (4usize, 40usize);
    let sig = "*fp32,*fp32,*i32,i32,64";
    for defer_stores in [true, false] {
        let opts = lnc::CompileOptions { defer_stores, ..Default::default() };
        let module = lnc::Jit::with_options(opts).module("early.py", src.to_string()).expect("parses");
        let k = module.kernel("k", sig).unwrap_or_else(|e| panic!("{e}"));
        let z = vec![1.0f32; m * n - 1];
        let mut p = vec![0.0f32; 64 * n];
        let mut locks = vec![0i32; 64];
        let err = k.launch(m as u32, &lnc::args![&z, &mut p, &mut locks, n as i32]).expect_err("Z is short");
        let text = err.to_string();
        assert!(text.contains("`Z`") && text.contains("early.py:9:"), "{text}");
        assert!(locks.iter().all(|&l| l == 0), "deferred {defer_stores}: a lock left held: {locks:?}");
        // Whole, it computes the sums, unchecked too.
        let z = vec![1.5f32; m * n];
        for unchecked in [false, true] {
            let mut p = vec![0.0f32; 64 * n];
            let args = lnc::args![&z, &mut p, &mut locks, n as i32];
            // SAFETY: every buffer has the length the kernel indexes.
            let r = if unchecked {
                unsafe { k.launch_unchecked(m as u32, &args) }
            } else {
                k.launch(m as u32, &args)
            };
            r.unwrap_or_else(|e| panic!("{e}"));
            assert!(p[..m * n].iter().all(|&v| v == 1.5) && p[m * n..].iter().all(|&v| v == 0.0));
        }
    }
}
