//! The threads a launch keeps awake for the next one (`set_linger`): they run the pool's
//! other work meanwhile and go back to it when another launch starts. One test, alone in
//! its binary: the setting and the count of such threads are process-wide.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lnc_runtime::{DEFAULT_LINGER, KernelFn, ProgramCtx, Programs, launch, linger, lingering, set_linger};
use rayon::prelude::*;

static PROGRAMS_RUN: AtomicU64 = AtomicU64::new(0);

/// Counts the programs it runs; touches no memory of the launch.
unsafe extern "C" fn count_programs(
    _args: *const u64,
    _pid: *const u32,
    _nprog: *const u32,
    _ctx: *mut ProgramCtx,
    count: u64,
) -> u32 {
    PROGRAMS_RUN.fetch_add(count, Ordering::Relaxed);
    0
}

fn run(pool: &rayon::ThreadPool, programs: u32) {
    let kernel: KernelFn = count_programs;
    let before = PROGRAMS_RUN.load(Ordering::Relaxed);
    // SAFETY: the kernel follows the ABI and reads no argument.
    unsafe { launch(kernel, [programs, 1, 1], &[], &[], 0, Programs::Independent, Some(pool)) }
        .expect("the launch runs");
    assert_eq!(PROGRAMS_RUN.load(Ordering::Relaxed) - before, u64::from(programs));
}

/// Waits until `lingering()` is `n`, for at most `within`.
fn until_lingering(n: u64, within: Duration) -> bool {
    let start = Instant::now();
    while lingering() != n {
        if start.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn threads_kept_awake_run_the_pools_work_and_leave_when_a_launch_starts() {
    assert_eq!(linger(), DEFAULT_LINGER);
    // Long enough that anything waiting for a kept thread to leave by itself would fail
    // the bounds below.
    let long = Duration::from_secs(60);
    let bound = Duration::from_secs(20);
    set_linger(long);
    assert_eq!(linger(), long);

    for threads in [2u64, 3] {
        let pool =
            rayon::ThreadPoolBuilder::new().num_threads(threads as usize).build().expect("a pool of threads");
        // Launched from outside the pool and from one of its threads, a launch with a
        // worker on each thread keeps the others awake: each its own.
        for inside in [false, true] {
            let what = format!("{threads} threads, launched inside the pool: {inside}");
            if inside {
                pool.install(|| run(&pool, 4096));
            } else {
                run(&pool, 4096);
            }
            assert!(until_lingering(threads - 1, bound), "{what}: {} kept awake", lingering());

            // The kept threads run the pool's work: a broadcast (a job for every thread,
            // which only that thread runs) and a parallel sum.
            let start = Instant::now();
            let ids = pool.broadcast(|c| c.index());
            assert_eq!(ids.len() as u64, threads);
            let sum: u64 = pool.install(|| (0..100_000u64).into_par_iter().sum());
            assert_eq!(sum, 100_000 * 99_999 / 2);
            assert!(start.elapsed() < bound, "{what}: the pool's work waited {:?}", start.elapsed());

            // A new launch sends them back to the pool; without a linger none stays.
            set_linger(Duration::ZERO);
            run(&pool, 4096);
            assert!(until_lingering(0, bound), "{what}: {} still kept awake", lingering());
            set_linger(long);
        }
        // A one-program launch runs on the calling thread and keeps none awake.
        run(&pool, 1);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(lingering(), 0);
    }
    set_linger(DEFAULT_LINGER);
}
