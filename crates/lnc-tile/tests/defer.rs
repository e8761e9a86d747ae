//! Deferred stores (module `defer`): which stores move past a spin lock's acquire, and the
//! same results as the block IR when they do.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;
use lnc_tile::TileOptions;

/// A row result stored, then a partial row accumulated under lock `row % G`.
const LOCKED: &str = r#"
@triton.jit
def k(Y, P, X, Lock, N, G: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, x * 2.0, mask=m)
    lock = Lock + row % G
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    p = tl.load(P + (row % G) * N + i, mask=m)
    tl.store(P + (row % G) * N + i, p + x, mask=m)
    tl.atomic_xchg(lock, 0)
"#;

const SIG: &str = "*fp32,*fp32,*fp32,*i32,i32,64,64";

fn opts(defer_stores: bool) -> TileOptions {
    TileOptions { lanes: 4, defer_stores, ..Default::default() }
}

/// Lines of the printed loop IR of `src` that start spin loops, those that store through
/// the row store into `Y` (the first access to slot 0 in the source), and those that only
/// check that store's bounds (left where a deferred store was, for bounds-checked code).
struct Lines {
    spins: Vec<usize>,
    stores: Vec<usize>,
    checks: Vec<usize>,
    text: String,
}

fn spins_and_y_stores(src: &str, sig: &str, defer: bool) -> Lines {
    let f = bir(src, "k", sig);
    let text = lnc_lir::print_function(&tile_opts(&f, opts(defer)).expect("tiles"));
    // `site K: arg 0 (Y) span A..B`: the site whose span starts first.
    let site = text
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("site ")?;
            let (k, rest) = rest.split_once(": arg 0 (Y) span ")?;
            let start: usize = rest.split("..").next()?.parse().ok()?;
            Some((start, k.to_string()))
        })
        .min()
        .map(|(_, k)| k)
        .unwrap_or_else(|| panic!("no access to Y:\n{text}"));
    let marker = format!("; site {site}");
    let lines_where = |keep: &dyn Fn(&str) -> bool| -> Vec<usize> {
        text.lines().enumerate().filter(|(_, l)| keep(l)).map(|(k, _)| k).collect()
    };
    let spins = lines_where(&|l| l.trim_start().starts_with("while"));
    let of_y = |l: &str, check: bool| {
        l.contains("store") && l.contains(".check_only") == check && l.ends_with(&marker)
    };
    let stores = lines_where(&|l| of_y(l, false));
    let checks = lines_where(&|l| of_y(l, true));
    assert!(!spins.is_empty() && !stores.is_empty(), "no spin loop or no store into Y:\n{text}");
    Lines { spins, stores, checks, text }
}

/// Whether the row store into `Y` comes after the (first) spin loop; checking that its
/// bounds are then checked before it (and not otherwise).
fn y_stored_after_lock(src: &str, sig: &str, defer: bool) -> bool {
    let Lines { spins, stores, checks, text } = spins_and_y_stores(src, sig, defer);
    let after = stores.iter().all(|&k| k > spins[0]);
    assert!(after || stores.iter().all(|&k| k < spins[0]), "stores on both sides of the lock:\n{text}");
    assert_eq!(!checks.is_empty(), after, "a deferred store is checked where it was:\n{text}");
    assert!(checks.iter().all(|&k| k < spins[0]), "checks after the lock:\n{text}");
    after
}

#[test]
fn a_row_store_moves_past_the_acquire_of_one_of_many_locks() {
    let f = bir(LOCKED, "k", SIG);
    insta::assert_snapshot!(lnc_lir::print_function(&tile_opts(&f, opts(true)).expect("tiles")));
    assert!(y_stored_after_lock(LOCKED, SIG, true));
    assert!(!y_stored_after_lock(LOCKED, SIG, false));
    // Code without bounds checks has no use for the check left behind.
    let unchecked = TileOptions { checked: false, ..opts(true) };
    let text = lnc_lir::print_function(&tile_opts(&f, unchecked).expect("tiles"));
    assert!(!text.contains("check_only"), "{text}");
    // Constants added around the lock's index, in any grouping.
    let shifted = LOCKED.replace("lock = Lock + row % G", "lock = Lock + 3 + row % G + 1");
    assert!(y_stored_after_lock(&shifted, SIG, true));
    // Two indices by program id added: not one lock per G programs.
    let twice = LOCKED.replace("lock = Lock + row % G", "lock = Lock + row % G + row % G");
    assert!(!y_stored_after_lock(&twice, SIG, true));
    // The seed's own group counts.
    for g in [64, 96, 128, 256] {
        assert!(y_stored_after_lock(LOCKED, &format!("*fp32,*fp32,*fp32,*i32,i32,{g},64"), true));
    }
}

#[test]
fn stores_stay_where_moving_them_could_be_seen_or_serialize() {
    // Fewer locks than the pass requires: workers would meet at them.
    assert!(!y_stored_after_lock(LOCKED, "*fp32,*fp32,*fp32,*i32,i32,8,64", true));
    // One lock for all programs.
    let global = LOCKED.replace("lock = Lock + row % G", "lock = Lock");
    assert!(!y_stored_after_lock(&global, SIG, true));
    // A lock chosen by data, not by program id.
    let by_data =
        LOCKED.replace("lock = Lock + row % G", "lock = Lock + tl.load(X + row * N) .to(tl.int32) % G");
    assert!(!y_stored_after_lock(&by_data, SIG, true));
    // The kernel reads Y: another program could see the store happen late.
    let read = LOCKED.replace("p + x, mask=m)", "p + x + tl.load(Y + i, mask=m), mask=m)");
    assert!(!y_stored_after_lock(&read, SIG, true));
    // An atomic between the store and the lock.
    let atomic = LOCKED
        .replace("    lock = Lock + row % G", "    tl.atomic_add(Lock + 200, 1)\n    lock = Lock + row % G");
    assert!(!y_stored_after_lock(&atomic, SIG, true));
    // An assert between them: it must see the store done if it stops the launch.
    let assert =
        LOCKED.replace("    lock = Lock + row % G", "    tl.device_assert(N > 0)\n    lock = Lock + row % G");
    assert!(!y_stored_after_lock(&assert, SIG, true));
    // A lock chosen by another axis of the grid, which may have one program.
    let other_axis = LOCKED.replace("lock = Lock + row % G", "lock = Lock + tl.program_id(1) % G");
    assert!(!y_stored_after_lock(&other_axis, SIG, true));
    // An assert in the spin loop (a timeout) may stop the launch while the program waits.
    let timeout = LOCKED.replace("        pass", "        tl.device_assert(N > 0)");
    assert!(!y_stored_after_lock(&timeout, SIG, true));
    // The spin loop stores into Y itself: the two stores must keep their order.
    let in_loop = LOCKED.replace("        pass", "        tl.store(Y + row * N, 0.)");
    assert!(!y_stored_after_lock(&in_loop, SIG, true));
}

/// Two locks taken in a row: the store moves past the first only.
#[test]
fn a_store_moves_past_one_lock() {
    let two = LOCKED.replace(
        "    p = tl.load(",
        "    lock2 = Lock + 64 + row % G\n    while tl.atomic_cas(lock2, 0, 1) == 1:\n        pass\n    p = tl.load(",
    );
    let Lines { spins, stores, checks, text } = spins_and_y_stores(&two, SIG, true);
    assert_eq!(spins.len(), 2, "{text}");
    assert!(stores.iter().all(|&store| spins[0] < store && store < spins[1]), "{text}");
    assert!(!checks.is_empty() && checks.iter().all(|&c| c < spins[0]), "{text}");
}

#[test]
fn deferred_stores_compute_what_the_block_ir_does() {
    for (rows, n) in [(70u32, 13i64), (3, 64), (130, 7)] {
        let f = bir(LOCKED, "k", SIG);
        let (len, nu) = (rows as usize * n as usize, n as usize);
        let bufs = vec![
            Buffer::zeros(DType::F32, len),
            Buffer::zeros(DType::F32, 64 * nu),
            f32_buffer(1, len),
            Buffer::zeros(DType::I32, 64),
        ];
        let args = [ptr(0), ptr(1), ptr(2), ptr(3), ArgValue::Int(n), ArgValue::Int(64), ArgValue::Int(64)];
        differential(&f, [rows, 1, 1], &args, &bufs, &[1, 4, 8]);
    }
}

/// Which kernels the runtime may schedule by lock group: every atomic on a lock chosen by
/// `program_id(0) % G`, one `G`, each lock word of one residue only.
#[test]
fn program_groups_are_the_locks_modulus() {
    let groups = |src: &str, sig: &str| lnc_tile::program_groups(&bir(src, "k", sig));
    assert_eq!(groups(LOCKED, SIG), Some(64));
    assert_eq!(groups(LOCKED, "*fp32,*fp32,*fp32,*i32,i32,8,64"), Some(8));
    let shifted = LOCKED.replace("lock = Lock + row % G", "lock = Lock + 3 + row % G + 1");
    assert_eq!(groups(&shifted, SIG), Some(64));
    // The seed's lock and count, `G` apart, and a second word of the same residue.
    let count = LOCKED.replace("    tl.atomic_xchg(lock, 0)", "    tl.atomic_xchg(lock + 64, 1)\n    tl.atomic_xchg(lock + 128, tl.load(lock + 64))\n    tl.atomic_xchg(lock, 0)");
    assert_eq!(groups(&count, SIG), Some(64));
    for (what, src) in [
        ("one lock for all programs", LOCKED.replace("lock = Lock + row % G", "lock = Lock")),
        ("a lock chosen by data", LOCKED.replace("lock = Lock + row % G", "lock = Lock + tl.load(X + row * N).to(tl.int32) % G")),
        ("another axis", LOCKED.replace("lock = Lock + row % G", "lock = Lock + tl.program_id(1) % G")),
        ("a counter shared by all", LOCKED.replace("    tl.atomic_xchg(lock, 0)", "    tl.atomic_add(Lock + 200, 1)\n    tl.atomic_xchg(lock, 0)")),
        ("one group", LOCKED.replace("row % G", "row % 1")),
        // Residue 63's `Lock + 63 + 1` is residue 0's `Lock + 0 + 64` (found by review: a
        // cross-group wait under the group schedule could then wait forever).
        ("words of two residues", LOCKED.replace("    tl.atomic_xchg(lock, 0)", "    tl.atomic_xchg(lock + 1, 0)\n    tl.atomic_xchg(lock + 64, 0)")),
        ("a plain store to a lock word", LOCKED.replace("    tl.atomic_xchg(lock, 0)", "    tl.store(Lock + 5, 0)\n    tl.atomic_xchg(lock, 0)")),
        ("a block of lock words", LOCKED.replace("    tl.atomic_xchg(lock, 0)", "    tl.store(Lock + i, i)\n    tl.atomic_xchg(lock, 0)")),
        ("no atomics", "@triton.jit\ndef k(Y, P, X, Lock, N, G: tl.constexpr, BLOCK: tl.constexpr):\n    tl.store(Y + tl.program_id(0), 1.0)\n".to_string()),
    ] {
        assert_eq!(groups(&src, SIG), None, "{what}");
    }
}
