//! The grid launcher: runs every program of a grid once, on the calling thread and the
//! threads of a rayon pool.
//!
//! The grid is flattened with axis 0 fastest and cut into contiguous ranges, one per worker
//! for independent programs, one shared by all for programs that use atomics
//! ([`Programs`]), and for programs whose locks are chosen by their id modulo `G`, one per
//! worker holding the ids of its own share of the `G` residues (below). A worker takes the
//! next contiguous chunk of program ids of its range from the range's counter until none is
//! left, then takes chunks of the other ranges the same way: a worker walking its chunks
//! touches neighbouring rows (its prefetchers stay busy), and a slow worker (the machine is
//! shared) takes fewer chunks.
//!
//! Why a range per worker: with one shared counter the two workers' chunks of 127 rows
//! interleaved in memory, and each worker's stream restarted at every chunk. Measured
//! with lnc-bench on the seed forward (2 threads, M = 4096, caches flushed), in a state of
//! the machine where the copy moved 52–66 GB/s: lnc/Rust 0.85–0.91 → 1.05–1.28 at N =
//! 512, 0.84–0.87 → 1.01–1.04 at N = 768, 0.86–1.01 → 1.09–1.10 at N = 1024. (When the
//! copy moved 33–41 GB/s, halves and one counter measured alike.) Programs that use
//! atomics keep one counter (unless grouped, below): the seed backward's lock timings
//! below were measured so.
//!
//! Why a range of lock groups per worker ([`Programs::Grouped`]): in the seed backward
//! (program `row` adds its partial dw and db rows into the row of group `row % G` under
//! that group's lock), two workers taking chunks of one range both visit every group, so
//! the group's partial rows move between their caches at every visit and a worker finds
//! the lock held now and then. With its own groups (rows `0..G/2`, `G..3G/2`, … for the
//! first of two workers), a worker never waits for a lock and keeps its partial rows in
//! its own cache, and it still streams through runs of `G/2` neighbouring rows. Measured
//! with lnc-bench (seed dx + dwdb, 2 threads, M = 4096, caches flushed, paired with the
//! shared range in the same repetitions): when the copy moved 90–107 GB/s, 16–30 % faster
//! at N = 512–8192 (6 % at 16384); when it moved 52–54 GB/s, where the backward runs at
//! 72–80 % of the copy, −2 to +5 %. The partial sums took 32–35 % of the backward at one
//! thread and 56–59 % at two with one shared range: their cost per row tripled. A worker
//! done with its own ranges takes chunks of the others', as above. The ids keep
//! increasing within a range, so faults are still reported as described below, and a
//! program that waits only for earlier ones never waits forever: the lowest program not
//! done is always running (its range's worker ran everything before it there).
//!
//! The lock's own instructions cost little there. Measured with lnc-clif emitting the
//! release (`atomic_xchg`) as a plain store, launches alternated in one process (fp32,
//! 2 threads, caches flushed, 60 of each): 0.99-1.02 of the time at N = 512-2048, where
//! the same kernel against itself read 0.97-1.00; with the acquiring compare-and-swap
//! plain too (no longer a lock: measured only, at N = 512), 1.075 against 1.033. What
//! the partial sums cost is their rows' traffic, not the locked instructions.
//!
//! Not by group: running a group's rows one after the other (`g`, `g + G`, `g + 2G`, …,
//! then `g + 1`, …) keeps its partial rows in the first-level cache for all of them, but
//! each program then starts a new stream of rows `G` apart in memory. Measured with
//! lnc-bench (seed dx + dwdb, 2 threads, caches flushed, M = 4096, chunks of 1, 4 and 16
//! of that order), the backward took 1.5–1.9× as long at N = 512 and 1024 as with the
//! ranges above, with the next-row prefetches on or off, and also with them aimed at
//! `pid + G`, the program that runs next in that order (lnc-tile's `prefetch.rs`). Nor in blocks of `B` neighbouring
//! groups, the block's rows round after round (`g..g + B`, then `g + G..g + G + B`, …,
//! then the next block), which keeps a block's partial rows in the core's caches while
//! its rows still come in runs of `B`: with `B` = 8, 16 and 32 (lnc-bench `--reps 10`, two
//! runs each, alternated with the ranges above) the backward went 0.645 → 0.78–0.82 ms at
//! N = 512 and 0.83–0.86 → 0.96–1.04 at 768, 3–9 % slower at 2048, and within ±5 % from
//! 4096 up.
//!
//! Chunks of the ranges above are of odd length: with chunks of a power-of-two length,
//! workers fall into step at distances that are multiples of the power-of-two group
//! counts kernels hash program ids into (the seed backward's `row % GROUP_SIZE_M` locks),
//! and then wait on the same lock every time. (A range of groups splits each run of
//! residues into chunks of even length instead: its workers meet only once one takes
//! chunks of another's range.)
//!
//! How long a chunk may be depends on whether the programs interact ([`Programs`]).
//! Independent programs take chunks of up to [`MAX_CHUNK`]: a core's prefetchers then
//! follow one contiguous stream for longer. Programs that use atomics take chunks of up
//! to [`MAX_SYNC_CHUNK`], because longer chunks made the seed backward slower in some runs.
//! Workers then meet at locks: in lnc-bench's Rust version of the seed's backward (the
//! same locks, rows handed out the same way; N = 16384, 64 lock groups, 2 threads), a
//! worker found its lock held in 0 rows of 4096 in 18 of 19 calls with chunks of 31, and
//! in 4 to 328 rows in 15 of 19 calls with chunks of 95, 13 % slower. Once one worker
//! waits behind another, the two can go on in a convoy until one of them starts a new
//! chunk.
//!
//! A worker uses one [`ProgramCtx`] and one scratch area for all of its programs: the
//! scratch area of a program is dead when the program returns, so nothing is allocated
//! per program. Scratch areas are cached per thread between launches, which keeps a warm
//! one-program launch to a function call plus a few stores.
//!
//! A chunk is one call of the kernel, which loops over the chunk's programs itself (see
//! [`crate::abi`]).
//!
//! Faults are deterministic: the error names the faulting program with the lowest flat
//! index, whatever the number of threads. Each range hands out its chunks in increasing
//! order, a chunk stops at its first faulting program, and a worker takes no chunk that
//! starts above the lowest fault seen so far but goes on to the other ranges, so every
//! program that could fault earlier still runs and a faulting launch does not run to the
//! end of the grid.
//!
//! One exception: a program in a `while` loop that uses atomics or volatile loads gives up
//! at its next turn once any program has faulted ([`Status::Cancelled`], see
//! [`crate::abi`]), because the faulting program may hold the lock it waits for, and would
//! then keep it waiting forever. The programs after it in its chunk still run (up to the
//! lowest fault), but the one that gave up does not run on to a fault of its own, so for
//! programs with such loops the program reported can depend on timing (as the order in
//! which programs take a lock does); for programs without them it is still the first.

use std::alloc::Layout;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::abi::{Bounds, Fault, KernelFn, NO_FAULT, ProgramCtx, Status, ZEROED_SCRATCH_BYTES};

/// Alignment of scratch areas, as the ABI promises.
pub const SCRATCH_ALIGN: usize = 64;

/// The longest chunk of [`Programs::Independent`] programs a worker takes at once (odd:
/// see the module docs).
///
/// Measured with lnc-bench on the seed forward (2 threads, M = 4096, caches flushed; 127
/// against 31 in the same repetitions, the median of paired ratios, three runs): 4-20 %
/// faster at N ≤ 1024, where a chunk of 31 rows of 2-4 KB is a stream of only 62-124 KB
/// per tensor, and from 1.3 % slower to 3.4 % faster from N = 2048 up. Chunks of 63, 79,
/// 95 and 161 measured alike.
///
/// The cost: on a grid of long programs, the worker that takes the last chunk can run up
/// to a chunk's worth longer than the others; giving each worker at least 8 chunks bounds
/// that to an eighth of a worker's share. Guided chunks (shrinking to single programs
/// near the end of the grid) would remove it, but made the forward 10 % slower at
/// N = 512 (0.42-0.44 against 0.47-0.49 ms, three alternating runs): its last quarter ran
/// in short chunks.
pub const MAX_CHUNK: u64 = 127;

/// The longest chunk of [`Programs::Synchronizing`] programs a worker takes at once (odd).
///
/// Measured on the seed backward (its dx kernel waits on spin locks) as above: chunks of
/// 63, 79, 95 or 127 were 2-30 % faster at N ≤ 1024 but 16-22 % slower at N = 16384 in 5
/// of 12 runs, whatever their distance modulo the kernel's 64 lock groups (95 and 31 are
/// both 31 groups apart); the module docs count the lock waits. Short enough that a
/// convoy ends within 31 programs, long enough that the shared counter is touched once
/// per dozens of programs.
pub const MAX_SYNC_CHUNK: u64 = 31;

/// The fewest groups per worker for which [`Programs::Grouped`] programs are scheduled by
/// group: each worker's programs then come in runs of at least this many consecutive ids,
/// so that a worker still streams through neighbouring rows (and a kernel's prefetch of
/// the next program's row mostly fetches a row of its own worker).
pub const MIN_GROUP_RUN: u64 = 16;

/// Whether the programs of a kernel interact while a launch runs; it decides how long a
/// chunk of programs a worker takes (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// Programs that do not use atomics: none waits for another.
    Independent,
    /// Programs that use atomics, so they may wait for each other (spin locks).
    Synchronizing,
    /// Programs that use atomics only on memory chosen by their axis-0 id modulo `groups`
    /// (the seed backward's `row % GROUP_SIZE_M` locks, found by lnc-tile's
    /// `program_groups`): programs of different groups never wait for each other, and
    /// those of one group share the memory the lock guards. On a grid with one axis, each
    /// worker then runs the programs of its own share of the groups (see the module docs).
    Grouped {
        /// The number of groups, `G` of `pid % G`.
        groups: u32,
    },
}

impl Programs {
    /// The longest chunk of such programs a worker takes at once: [`MAX_CHUNK`] or
    /// [`MAX_SYNC_CHUNK`].
    pub fn longest_chunk(self) -> u64 {
        match self {
            Programs::Independent => MAX_CHUNK,
            Programs::Synchronizing | Programs::Grouped { .. } => MAX_SYNC_CHUNK,
        }
    }
}

/// Chunks per worker at least, when the grid is small: the slack that lets fast workers
/// take over from slow ones.
const MIN_CHUNKS_PER_WORKER: u64 = 8;

/// Why a launch failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A program returned a non-zero status (the one with the lowest flat program index).
    #[error("program {pid:?} stopped with {status:?} at site {} (argument slot {}, element offset {})", fault.site, fault.arg, fault.offset)]
    Fault {
        /// What went wrong.
        status: Status,
        /// Program id of the faulting program.
        pid: [u32; 3],
        /// What the program recorded.
        fault: Fault,
    },
    /// A kernel returned a status code the ABI does not define: a compiler bug.
    #[error("program {pid:?} returned unknown status code {code}")]
    UnknownStatus {
        /// The code returned.
        code: u32,
        /// Program id of the program.
        pid: [u32; 3],
    },
    /// `args` and `bounds` must have one entry per argument slot each.
    #[error("{args} argument slots but {bounds} bounds entries")]
    BoundsMismatch {
        /// Length of `args`.
        args: usize,
        /// Length of `bounds`.
        bounds: usize,
    },
    /// The grid has more programs than a `u64` counts.
    #[error("grid {0:?} has too many programs")]
    GridTooLarge([u32; 3]),
    /// The scratch area could not be allocated.
    #[error("cannot allocate {0} bytes of scratch memory")]
    ScratchAlloc(usize),
}

/// Runs `kernel` once for every program of `grid`.
///
/// `args` has one slot per kernel argument (see [`crate::abi`]; the `pack_*` functions
/// build slots) and `bounds` one entry per slot. `scratch_bytes` is the kernel's scratch
/// size per program; `programs` says whether its programs use atomics. `pool` picks the
/// thread pool (`None`: the current rayon pool, the global one outside any pool); the
/// calling thread runs one of the workers, the pool the others, so a launch uses as many
/// threads as the pool has. A grid with a zero dimension runs nothing; a one-program grid
/// runs on the caller's thread.
///
/// The kernel is trusted, as are the addresses in `args`: `launch` cannot check them, so
/// the caller guarantees that `kernel` follows the ABI and that every pointer in `args`
/// is valid for every access the kernel makes through it (a kernel compiled with bounds
/// checks makes only accesses inside `bounds`, which must then describe live memory), and
/// that nothing else touches the memory programs write during the launch. This is the
/// runtime's one trusted entry point; the embedding API wraps it with typed arguments.
///
/// # Safety
/// `kernel` must follow the ABI, and every access it makes through the pointers in `args`
/// must be valid for the whole launch (see above).
pub unsafe fn launch(
    kernel: KernelFn,
    grid: [u32; 3],
    args: &[u64],
    bounds: &[Bounds],
    scratch_bytes: usize,
    programs: Programs,
    pool: Option<&rayon::ThreadPool>,
) -> Result<(), LaunchError> {
    if args.len() != bounds.len() {
        return Err(LaunchError::BoundsMismatch { args: args.len(), bounds: bounds.len() });
    }
    let total = (grid[0] as u64)
        .checked_mul(grid[1] as u64)
        .and_then(|n| n.checked_mul(grid[2] as u64))
        .ok_or(LaunchError::GridTooLarge(grid))?;
    if total == 0 {
        return Ok(());
    }
    let job = Job {
        kernel,
        grid,
        args: args.as_ptr(),
        bounds: bounds.as_ptr(),
        scratch_bytes,
        lowest_fault: AtomicU64::new(NO_FAULT),
    };
    if total == 1 {
        return job.run_worker(&[Range::span(0, 1)], 0, 1).map_err(|f| f.1);
    }
    let threads = match pool {
        Some(p) => p.current_num_threads(),
        None => rayon::current_num_threads(),
    } as u64;
    let chunk = chunk_len(total, threads, programs);
    let workers = threads.max(1).min(total.div_ceil(chunk));
    // Independent programs: one contiguous range per worker (see the module docs);
    // programs that use atomics: one range all workers share.
    let ranges: Vec<Range> = match programs {
        Programs::Independent => {
            (0..workers).map(|r| Range::span(total * r / workers, total * (r + 1) / workers)).collect()
        }
        Programs::Grouped { groups }
            if grid[1] == 1 && grid[2] == 1 && u64::from(groups) >= MIN_GROUP_RUN * workers =>
        {
            (0..workers).map(|r| Range::groups(total, u64::from(groups), r, workers)).collect()
        }
        Programs::Synchronizing | Programs::Grouped { .. } => vec![Range::span(0, total)],
    };
    let parts = ranges.len() as u64;
    let homes = AtomicU64::new(0);
    let first: Mutex<Option<Failure>> = Mutex::new(None);
    let work = || {
        let home = (homes.fetch_add(1, Ordering::Relaxed) % parts) as usize;
        if let Err(f) = job.run_worker(&ranges, home, chunk) {
            let mut first = first.lock().unwrap_or_else(|p| p.into_inner());
            if first.as_ref().is_none_or(|g| f.0 < g.0) {
                *first = Some(f);
            }
        }
    };
    // The calling thread is a worker too: it starts at once, while the pool's threads
    // may take tens of microseconds to wake (measured: 15-40 µs after a pause, against
    // 0.5-1 ms launches of the seed kernels at 4096 x 512); the range counters hand the
    // chunks they would have taken to the workers already running.
    let work = &work;
    // Threads kept awake after an earlier launch go back to their pool ([`set_linger`]).
    let launch = (workers > 1).then(|| LAUNCHES.fetch_add(1, Ordering::Relaxed) + 1);
    match pool {
        Some(p) => p.in_place_scope(|s| run_workers(s, workers, work)),
        None => rayon::in_place_scope(|s| run_workers(s, workers, work)),
    }
    if let Some(launch) = launch {
        keep_awake(pool, workers, launch);
    }
    let first = first.into_inner().unwrap_or_else(|p| p.into_inner());
    first.map_or(Ok(()), |f| Err(f.1))
}

/// Launches with more than one worker started so far, on any pool; a thread kept awake
/// after one ([`keep_awake`]) goes back to its pool when another starts.
static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// [`linger`] in nanoseconds.
static LINGER_NS: AtomicU64 = AtomicU64::new(DEFAULT_LINGER.as_nanos() as u64);

/// How long the pool's threads stay awake after a launch without work, by default
/// ([`set_linger`]).
///
/// A rayon thread that finds no work falls asleep within microseconds, and waking it
/// takes 15-40 µs on this machine (a VM: the idle virtual CPU halts). Measured with a
/// kernel whose 4096 programs take 150 ns each (2 threads, 307 µs of work each): launched
/// 50 µs after the last one, the second thread started 21 µs late (median of 200) and the
/// launch took 328.5 µs; after a cache flush on the pool, as in lnc-bench, 30-37 µs late
/// and 337-345 µs. Kept awake, it started within 0.4-2.4 µs and the launches took
/// 310-313 µs, against 310 back to back. On the seed forward (2 threads, 4096 rows,
/// caches flushed on the pool, launches kept awake after or not alternated in one
/// process, 60 of each), 17-24 µs less per launch: `fp16` 246 → 222 µs at N = 512, 339 →
/// 319 at 768, 437 → 417 at 1000; `fp32` 462 → 435 at 512, 579 → 567 at 768.
pub const DEFAULT_LINGER: Duration = Duration::from_micros(100);

/// How much longer than [`linger`] a thread kept awake may stay while it finds work to
/// run: enough for lnc-bench's cache flush between launches (64 MiB written on the pool,
/// 2.2 ms here), and a bound on how long a thread that took up such a wait inside a wait
/// of its own (a `join`) notices its own work done late.
pub const LINGER_WITH_WORK: Duration = Duration::from_millis(5);

/// Sets how long the threads of a launch's pool stay awake once their work is done, so
/// that the next launch finds them running instead of waking them (process-wide): up to
/// `workers - 1` of them (not the calling thread) run the pool's other jobs meanwhile
/// (`rayon::yield_now`), and go back to the pool when a launch with more than one worker
/// starts (on any pool), when they have found nothing to do for that long, or at most
/// [`LINGER_WITH_WORK`] after that in all. Zero: not at all. The cost, as with an OpenMP
/// runtime that spins before it sleeps: up to that long of a core's time after each
/// launch with more than one worker; and a thread of the pool that takes up such a wait
/// while it waits for work of its own (inside a `join`) notices its own work done only
/// when it leaves.
pub fn set_linger(d: Duration) {
    LINGER_NS.store(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// How long the threads of a launch's pool stay awake once their work is done without
/// finding any ([`set_linger`]; [`DEFAULT_LINGER`] unless set).
pub fn linger() -> Duration {
    Duration::from_nanos(LINGER_NS.load(Ordering::Relaxed))
}

/// Threads of any pool kept awake by launches now ([`set_linger`]).
pub fn lingering() -> u64 {
    LINGERING.load(Ordering::Relaxed)
}

/// [`lingering`].
static LINGERING: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The launch this thread is kept awake after, and when that began
    /// ([`keep_awake`]); `None` when it is not.
    static AWAKE_AFTER: Cell<Option<(u64, Instant)>> = const { Cell::new(None) };
}

/// Keeps up to `workers - 1` threads of the launch's pool other than the calling one
/// awake after launch number `launch` ([`set_linger`]). One job per thread of the pool
/// (a broadcast: no thread can take up another's), of which the first `workers - 1` to
/// run on a thread other than the caller stay.
fn keep_awake(pool: Option<&rayon::ThreadPool>, workers: u64, launch: u64) {
    let limit = linger();
    if limit.is_zero() {
        return;
    }
    let caller = std::thread::current().id();
    let slots = std::sync::Arc::new(AtomicU64::new(workers - 1));
    let stay = move |_: rayon::BroadcastContext<'_>| {
        if std::thread::current().id() == caller
            || slots.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_err()
        {
            return;
        }
        // Already awake after an earlier launch, in a job this one runs (the thread took it
        // up inside that job's `yield_now`): that job stays for this launch instead.
        if AWAKE_AFTER.with(|a| a.replace(Some((launch, Instant::now())))).is_some() {
            return;
        }
        LINGERING.fetch_add(1, Ordering::Relaxed);
        let mut idle = Instant::now();
        while let Some((after, since)) = AWAKE_AFTER.with(Cell::get) {
            if LAUNCHES.load(Ordering::Relaxed) != after || since.elapsed() >= limit + LINGER_WITH_WORK {
                break;
            }
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => idle = Instant::now(),
                // `None` (not on a pool's thread) cannot happen: the job runs in a pool.
                _ if idle.elapsed() >= limit => break,
                _ => std::hint::spin_loop(),
            }
        }
        AWAKE_AFTER.with(|a| a.set(None));
        LINGERING.fetch_sub(1, Ordering::Relaxed);
    };
    match pool {
        Some(p) => p.spawn_broadcast(stay),
        None => rayon::spawn_broadcast(stay),
    }
}

/// The length of the chunks of a grid of `total` programs on `threads` threads: odd, at
/// most the longest chunk of the kind of programs, and short enough that each thread
/// takes [`MIN_CHUNKS_PER_WORKER`] chunks where the grid allows.
fn chunk_len(total: u64, threads: u64, programs: Programs) -> u64 {
    (total / (threads.max(1) * MIN_CHUNKS_PER_WORKER)).clamp(1, programs.longest_chunk()) | 1
}

// `| 1` keeps a chunk within its longest length only if that length is odd.
const _: () = assert!(MAX_CHUNK % 2 == 1 && MAX_SYNC_CHUNK % 2 == 1);

/// Spawns `workers - 1` copies of `work` on the scope's pool, then runs one on this
/// thread.
fn run_workers<'s>(s: &rayon::Scope<'s>, workers: u64, work: &'s (impl Fn() + Sync)) {
    for _ in 1..workers {
        s.spawn(move |_| work());
    }
    work();
}

/// Program ids handed out in chunks by a counter, in increasing order: `start..end` of
/// the flat ids, or the ids whose residue modulo `groups` lies in `lo..lo + run`,
/// numbered `0..end` in increasing order (the counter counts these).
struct Range {
    next: AtomicU64,
    end: u64,
    groups: Option<(u64, u64, u64)>,
}

impl Range {
    fn span(start: u64, end: u64) -> Range {
        Range { next: AtomicU64::new(start), end, groups: None }
    }

    /// Share `r` of `workers` of the `groups` residues of `0..total`: residues
    /// `groups·r/workers .. groups·(r+1)/workers`.
    fn groups(total: u64, groups: u64, r: u64, workers: u64) -> Range {
        let (lo, hi) = (groups * r / workers, groups * (r + 1) / workers);
        let run = hi - lo;
        let end = total / groups * run + (total % groups).saturating_sub(lo).min(run);
        Range { next: AtomicU64::new(0), end, groups: Some((groups, lo, run)) }
    }

    /// The next chunk of at most `chunk` programs, as flat ids `start..end` (consecutive:
    /// a chunk of grouped ids stops at the end of its run of residues, whose chunks are
    /// of even length: a run of 32 is two of 16, not 31 and 1).
    fn take(&self, chunk: u64) -> Option<(u64, u64)> {
        let Some((groups, lo, run)) = self.groups else {
            let start = self.next.fetch_add(chunk, Ordering::Relaxed);
            return (start < self.end).then(|| (start, (start + chunk).min(self.end)));
        };
        let chunk = run.div_ceil(run.div_ceil(chunk.max(1)));
        let mut k = self.next.load(Ordering::Relaxed);
        loop {
            if k >= self.end {
                return None;
            }
            let stop = (k + chunk).min((k / run + 1) * run).min(self.end);
            match self.next.compare_exchange_weak(k, stop, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let start = k / run * groups + lo + k % run;
                    return Some((start, start + (stop - k)));
                }
                Err(now) => k = now,
            }
        }
    }
}

/// What every worker of one launch shares.
struct Job {
    kernel: KernelFn,
    grid: [u32; 3],
    args: *const u64,
    bounds: *const Bounds,
    scratch_bytes: usize,
    /// Flat index of the lowest faulting program seen so far ([`NO_FAULT`] while none);
    /// programs waiting in loops read it through [`ProgramCtx::stop`].
    lowest_fault: AtomicU64,
}

// SAFETY: the raw pointers are the caller's argument and bounds arrays, borrowed for the
// whole launch and only read; `launch`'s contract makes concurrent kernel calls sound.
unsafe impl Sync for Job {}

/// A failed program: its flat index and the error.
struct Failure(u64, LaunchError);

/// The floating-point control of the thread (x86's MXCSR) at its reset value until it is
/// dropped, the thread's own restored then: kernels compute IEEE arithmetic, rounding to
/// nearest even and keeping subnormals, whatever the thread was set to (a library built
/// with `-ffast-math` sets flush-to-zero and denormals-are-zero for the whole process).
/// Each worker holds one while it runs programs, and the compiler while it compiles
/// (constant folding) and converts scalar arguments. Code generation relies on it too:
/// lnc-clif rounds `bf16` stores with `vcvtneps2bf16`, whose subnormal inputs it finds with
/// `vfpclassps`, which sees them as zero under denormals-are-zero.
pub struct FpControl(#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] Option<u32>);

/// The MXCSR's reset value: every exception masked, rounding to nearest, no flushing. The
/// low six bits are exception flags, left as they are.
#[cfg(target_arch = "x86_64")]
const MXCSR_RESET: u32 = 0x1f80;

impl FpControl {
    /// Sets the thread's floating-point control to its reset value, until dropped.
    pub fn reset() -> FpControl {
        #[cfg(target_arch = "x86_64")]
        {
            let mut csr = 0u32;
            // SAFETY: `stmxcsr` writes four bytes to a local; SSE is part of x86-64.
            unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
            if csr & !0x3f == MXCSR_RESET {
                return FpControl(None);
            }
            let reset = MXCSR_RESET | (csr & 0x3f);
            // SAFETY: loads a valid MXCSR value (reserved bits clear) from a local.
            unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &reset, options(nostack, preserves_flags)) };
            FpControl(Some(csr))
        }
        #[cfg(not(target_arch = "x86_64"))]
        FpControl(None)
    }
}

impl Drop for FpControl {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if let Some(csr) = self.0 {
            // SAFETY: restores the value `stmxcsr` read from this thread.
            unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags)) };
        }
    }
}

impl Job {
    /// Takes chunks of `chunk` programs from the range `home` of `ranges` (the next
    /// program to hand out, the end) until it is handed out, then from the others in
    /// turn, running each chunk's programs in order; returns the first failure.
    fn run_worker(&self, ranges: &[Range], home: usize, chunk: u64) -> Result<(), Failure> {
        let _fp = FpControl::reset();
        let scratch = ScratchArea::take(self.scratch_bytes).map_err(|e| Failure(0, e))?;
        if !scratch.ptr.is_null() {
            // SAFETY: the area holds at least `scratch_bytes` bytes.
            unsafe { std::ptr::write_bytes(scratch.ptr, 0, self.scratch_bytes.min(ZEROED_SCRATCH_BYTES)) };
        }
        let mut ctx = ProgramCtx {
            bounds: self.bounds,
            scratch: scratch.ptr,
            fault: Fault::default(),
            ran: 0,
            stop: &self.lowest_fault,
        };
        let mut result = Ok(());
        'ranges: for k in 0..ranges.len() {
            let range = &ranges[(home + k) % ranges.len()];
            while let Some((start, end)) = range.take(chunk) {
                if start > self.lowest_fault.load(Ordering::Relaxed) {
                    break;
                }
                if let Err(e) = self.run_chunk(&mut ctx, start, end) {
                    result = Err(e);
                    break 'ranges;
                }
            }
        }
        // Kernels may store with non-temporal stores (lnc-clif's `stream`), which x86 does
        // not order with the later stores that report this worker done: fence them.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is part of every x86-64 CPU.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
        scratch.give_back();
        result
    }

    /// Runs programs `start..end` in order, in one call of the kernel; returns the first
    /// failure.
    fn run_chunk(&self, ctx: &mut ProgramCtx, start: u64, end: u64) -> Result<(), Failure> {
        let mut start = start;
        let code = loop {
            let pid = self.pid_of(start);
            // SAFETY: the caller's guarantees documented on `launch`.
            let code =
                unsafe { (self.kernel)(self.args, pid.as_ptr(), self.grid.as_ptr(), ctx, end - start) };
            crate::clear_upper_vector_state();
            if code != Status::Cancelled as u32 {
                break code;
            }
            // A program gave up waiting because another one faulted, which that program's
            // worker reports. The programs after it in the chunk still run, as far as the
            // lowest fault: one of them may fault earlier in the launch's order.
            let left = ctx.ran.clamp(1, end - start);
            start = end - left + 1;
            if start >= end || start > self.lowest_fault.load(Ordering::Relaxed) {
                return Ok(());
            }
        };
        if code == Status::Ok as u32 {
            return Ok(());
        }
        // A kernel that follows the ABI says which of its programs stopped; the clamp keeps
        // one that does not from naming a program outside the chunk.
        let index = start + ctx.ran.min(end - start - 1);
        self.lowest_fault.fetch_min(index, Ordering::Relaxed);
        let pid = self.pid_of(index);
        let error = match status_of(code) {
            Some(status) => LaunchError::Fault { status, pid, fault: ctx.fault },
            None => LaunchError::UnknownStatus { code, pid },
        };
        Err(Failure(index, error))
    }

    /// The program id of the program with flat index `index` (axis 0 fastest).
    fn pid_of(&self, index: u64) -> [u32; 3] {
        let [gx, gy, _] = self.grid.map(u64::from);
        [(index % gx) as u32, (index / gx % gy) as u32, (index / (gx * gy)) as u32]
    }
}

fn status_of(code: u32) -> Option<Status> {
    [Status::Ok, Status::OutOfBounds, Status::AssertFailed].into_iter().find(|&s| s as u32 == code)
}

/// A 64-byte-aligned scratch area owned by one worker for the duration of a chunk.
struct ScratchArea {
    ptr: *mut u8,
    layout: Option<Layout>,
}

thread_local! {
    /// The scratch area this thread used last, kept for the next launch.
    static CACHED_SCRATCH: Cell<Option<ScratchArea>> = const { Cell::new(None) };
}

impl ScratchArea {
    /// This thread's cached area if it is big enough, a new one otherwise. Taking it out
    /// of the cache keeps two chunks on one thread (rayon nesting) from sharing it.
    fn take(bytes: usize) -> Result<ScratchArea, LaunchError> {
        if bytes == 0 {
            return Ok(ScratchArea { ptr: std::ptr::null_mut(), layout: None });
        }
        // A cached area too small is freed here.
        if let Some(area) = CACHED_SCRATCH.take()
            && area.layout.is_some_and(|l| l.size() >= bytes)
        {
            return Ok(area);
        }
        let layout =
            Layout::from_size_align(bytes, SCRATCH_ALIGN).map_err(|_| LaunchError::ScratchAlloc(bytes))?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(LaunchError::ScratchAlloc(bytes));
        }
        Ok(ScratchArea { ptr, layout: Some(layout) })
    }

    /// Returns the area to this thread's cache, keeping the bigger of the two.
    fn give_back(self) {
        if self.layout.is_none() {
            return;
        }
        let keep = match CACHED_SCRATCH.take() {
            Some(cached) if cached.layout.map(|l| l.size()) >= self.layout.map(|l| l.size()) => cached,
            _ => self,
        };
        CACHED_SCRATCH.set(Some(keep));
    }
}

impl Drop for ScratchArea {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `take` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

/// The bounds of a buffer of `bytes` bytes passed by its start address.
pub fn buffer_bounds(bytes: usize) -> Bounds {
    Bounds { lo: 0, hi: bytes as i64 }
}

/// The argument slot of an `fp32`: its bits in the low half.
pub fn pack_f32(v: f32) -> u64 {
    v.to_bits() as u64
}

/// The argument slot of an `fp64`: its bits.
pub fn pack_f64(v: f64) -> u64 {
    v.to_bits()
}

/// The argument slot of a signed integer (`i8`..`i64`): sign-extended.
pub fn pack_int(v: i64) -> u64 {
    v as u64
}

/// The argument slot of an unsigned integer (`u8`..`u64`): zero-extended.
pub fn pack_uint(v: u64) -> u64 {
    v
}

/// The argument slot of an `i1`.
pub fn pack_bool(v: bool) -> u64 {
    v as u64
}

/// The argument slot of a pointer: its address.
pub fn pack_ptr<T>(p: *const T) -> u64 {
    p as usize as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test kernels below only touch the buffers their tests pass.
    fn run(
        kernel: KernelFn,
        grid: [u32; 3],
        args: &[u64],
        bounds: &[Bounds],
        scratch_bytes: usize,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<(), LaunchError> {
        // SAFETY: see above; every test kernel follows the ABI.
        unsafe { launch(kernel, grid, args, bounds, scratch_bytes, Programs::Independent, pool) }
    }
    use std::sync::atomic::AtomicU32;

    /// Runs `program` on each of a call's `count` programs from `pid` on, as compiled
    /// kernels do: in flat order, stopping at the first non-zero status with `ctx.ran` set.
    ///
    /// # Safety
    /// `pid` and `nprog` point at three `u32` each, `ctx` at a live context.
    unsafe fn each_program(
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
        mut program: impl FnMut([u32; 3]) -> u32,
    ) -> u32 {
        let (mut p, n) = unsafe { ([*pid, *pid.add(1), *pid.add(2)], [*nprog, *nprog.add(1)]) };
        for ran in 0..count {
            let code = program(p);
            if code != 0 {
                // `Cancelled` counts the programs left instead (see `Status::Cancelled`).
                unsafe { (*ctx).ran = if code == Status::Cancelled as u32 { count - ran } else { ran } };
                return code;
            }
            p[0] += 1;
            if p[0] == n[0] {
                p[0] = 0;
                p[1] += 1;
                if p[1] == n[1] {
                    p[1] = 0;
                    p[2] += 1;
                }
            }
        }
        0
    }

    /// The flat index of program `p` in a grid of `n` programs per axis.
    fn flat(p: [u32; 3], n: *const u32) -> usize {
        let n = unsafe { [*n as usize, *n.add(1) as usize] };
        p[0] as usize + n[0] * (p[1] as usize + n[1] * p[2] as usize)
    }

    /// Counts runs per program: `args[0]` points at one `AtomicU32` per program, indexed
    /// by the flat program id.
    unsafe extern "C" fn count_runs(
        args: *const u64,
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
    ) -> u32 {
        unsafe {
            let counters = *args as *const AtomicU32;
            each_program(pid, nprog, ctx, count, |p| {
                (*counters.add(flat(p, nprog))).fetch_add(1, Ordering::Relaxed);
                0
            })
        }
    }

    /// Writes its flat pid into `out[pid]` (`args[0]`); programs whose flat id is a
    /// multiple of 7 above 0 fault with the pid as offset.
    unsafe extern "C" fn fault_on_sevens(
        args: *const u64,
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
    ) -> u32 {
        unsafe {
            let out = *args as *mut u32;
            each_program(pid, nprog, ctx, count, |p| {
                let flat = flat(p, nprog);
                if flat != 0 && flat.is_multiple_of(7) {
                    (*ctx).fault = Fault { site: 3, arg: 0, offset: flat as i64 };
                    return Status::OutOfBounds as u32;
                }
                *out.add(flat) = flat as u32;
                0
            })
        }
    }

    /// Program 0 sets `*args[0]` and then waits until `*ctx.stop` reports a fault, as a
    /// program spinning on a lock held by a faulting one does, and gives up with
    /// `Cancelled`. Program `*args[1]` waits for that flag and faults; so does program
    /// `*args[2]`, at once (`u32::MAX`: none). The others do nothing.
    unsafe extern "C" fn fault_while_one_waits(
        args: *const u64,
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
    ) -> u32 {
        unsafe {
            let waiting = &*(*args as *const AtomicU32);
            let (late, early) = (*args.add(1) as u32, *args.add(2) as u32);
            each_program(pid, nprog, ctx, count, |p| {
                if p[0] == 0 {
                    waiting.store(1, Ordering::Release);
                    while (*(*ctx).stop).load(Ordering::Relaxed) == NO_FAULT {
                        std::hint::spin_loop();
                    }
                    return Status::Cancelled as u32;
                }
                if p[0] == late {
                    while waiting.load(Ordering::Acquire) == 0 {
                        std::hint::spin_loop();
                    }
                }
                if p[0] == late || p[0] == early {
                    (*ctx).fault = Fault { site: 5, arg: 0, offset: p[0] as i64 };
                    return Status::OutOfBounds as u32;
                }
                0
            })
        }
    }

    /// Checks the scratch area is aligned and private to the worker while it runs.
    unsafe extern "C" fn use_scratch(
        args: *const u64,
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
    ) -> u32 {
        unsafe {
            let scratch = (*ctx).scratch as *mut u32;
            each_program(pid, nprog, ctx, count, |p| {
                if !(scratch as usize).is_multiple_of(SCRATCH_ALIGN) {
                    return 7;
                }
                for k in 0..256 {
                    scratch.add(k).write_volatile(p[0] + k as u32);
                }
                for k in 0..256 {
                    if scratch.add(k).read_volatile() != p[0] + k as u32 {
                        return 9;
                    }
                }
                let done = *args as *const AtomicU32;
                (*done).fetch_add(1, Ordering::Relaxed);
                0
            })
        }
    }

    /// Counts (in `args[0]`) the programs that find the scratch area's first word zero, and
    /// sets it: once per worker and launch.
    unsafe extern "C" fn once_per_worker(
        args: *const u64,
        pid: *const u32,
        nprog: *const u32,
        ctx: *mut ProgramCtx,
        count: u64,
    ) -> u32 {
        unsafe {
            let flag = (*ctx).scratch as *mut u32;
            each_program(pid, nprog, ctx, count, |_| {
                if flag.read_volatile() == 0 {
                    flag.write_volatile(1);
                    (*(*args as *const AtomicU32)).fetch_add(1, Ordering::Relaxed);
                }
                0
            })
        }
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
    }

    fn run_counting(grid: [u32; 3], programs: Programs, pool: Option<&rayon::ThreadPool>) -> Vec<u32> {
        let n = grid.iter().map(|&g| g as usize).product();
        let counters: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        let args = [pack_ptr(counters.as_ptr())];
        // SAFETY: `count_runs` touches one counter per program of `grid`.
        unsafe { launch(count_runs, grid, &args, &[Bounds::default()], 0, programs, pool) }.unwrap();
        counters.into_iter().map(|c| c.into_inner()).collect()
    }

    #[test]
    fn every_program_runs_exactly_once() {
        // The largest grids take chunks of the longest length of either kind.
        let grids = [
            [1, 1, 1],
            [2, 1, 1],
            [37, 1, 1],
            [5, 3, 2],
            [1, 7, 11],
            [1000, 3, 1],
            [4096, 1, 1],
            [5003, 7, 1],
        ];
        let kinds = [
            Programs::Independent,
            Programs::Synchronizing,
            Programs::Grouped { groups: 2 },
            Programs::Grouped { groups: 7 },
            Programs::Grouped { groups: 64 },
            Programs::Grouped { groups: 256 },
            Programs::Grouped { groups: 5000 },
        ];
        for programs in kinds {
            for threads in [1, 2, 3, 8] {
                let p = pool(threads);
                for grid in grids {
                    let runs = run_counting(grid, programs, Some(&p));
                    assert!(runs.iter().all(|&r| r == 1), "{programs:?}, threads {threads}, grid {grid:?}");
                }
            }
            assert!(run_counting([64, 2, 1], programs, None).iter().all(|&r| r == 1));
        }
    }

    /// The chunks a worker of share `r` of `workers` takes from a grouped range: every
    /// program whose residue is in its share, once, in increasing order, each chunk
    /// consecutive ids of one run of residues.
    #[test]
    fn grouped_ranges_hand_out_their_groups_in_order() {
        for (total, groups) in [(4096u64, 256u64), (4096, 128), (4097, 256), (100, 7), (5, 64), (1000, 1000)]
        {
            for workers in [1u64, 2, 3] {
                let mut seen = vec![0u32; total as usize];
                for r in 0..workers {
                    let range = Range::groups(total, groups, r, workers);
                    let (lo, hi) = (groups * r / workers, groups * (r + 1) / workers);
                    let mut last = None;
                    let run = hi - lo;
                    let even = run.div_ceil(run.div_ceil(31));
                    while let Some((start, end)) = range.take(31) {
                        assert!(start < end && end - start <= even && end <= total);
                        assert!(last.is_none_or(|l| l < start), "in increasing order");
                        assert_eq!(start / groups, (end - 1) / groups, "one run");
                        for p in start..end {
                            assert!((lo..hi).contains(&(p % groups)), "{total} {groups} {r}/{workers}: {p}");
                            seen[p as usize] += 1;
                        }
                        last = Some(end - 1);
                    }
                }
                assert!(seen.iter().all(|&s| s == 1), "{total} {groups} {workers}: {seen:?}");
            }
        }
    }

    #[test]
    fn chunks_are_odd_and_as_long_as_the_kind_of_programs_allows() {
        for programs in [Programs::Independent, Programs::Synchronizing, Programs::Grouped { groups: 256 }] {
            let longest = programs.longest_chunk();
            for threads in [0, 1, 2, 3, 8, 64] {
                for total in [1, 2, 15, 16, 17, 100, 255, 256, 257, 4096, 5003, 1 << 20, u64::MAX] {
                    let c = chunk_len(total, threads, programs);
                    assert!(c % 2 == 1 && c <= longest, "{programs:?} {threads} {total}: {c}");
                }
            }
            // A large grid takes the longest chunks; a small one gives each thread 8.
            assert_eq!(chunk_len(4096, 2, programs), longest);
            assert_eq!(chunk_len(160, 2, programs), 11);
        }
        assert_eq!((MAX_CHUNK, MAX_SYNC_CHUNK), (127, 31));
        assert_eq!(
            (Programs::Independent.longest_chunk(), Programs::Synchronizing.longest_chunk()),
            (MAX_CHUNK, MAX_SYNC_CHUNK)
        );
        assert_eq!(Programs::Grouped { groups: 64 }.longest_chunk(), MAX_SYNC_CHUNK);
    }

    #[test]
    fn empty_grid_runs_nothing() {
        for grid in [[0, 1, 1], [4, 0, 1], [4, 4, 0]] {
            let runs = run_counting(grid, Programs::Independent, None);
            assert!(runs.is_empty());
        }
    }

    /// Whatever hands the programs out: one range per worker, one shared, or one per
    /// worker's share of the groups (on the one-axis grids; a shared one on the others).
    #[test]
    fn lowest_fault_is_reported() {
        let kinds = [Programs::Independent, Programs::Synchronizing, Programs::Grouped { groups: 64 }];
        for (threads, programs) in [1, 2, 8].into_iter().flat_map(|t| kinds.map(|k| (t, k))) {
            let p = pool(threads);
            for grid in [[100, 1, 1], [1000, 1, 1], [10, 10, 1], [3, 4, 9]] {
                let n = grid.iter().product::<u32>() as usize;
                let mut out = vec![u32::MAX; n];
                let args = [pack_ptr(out.as_mut_ptr())];
                // SAFETY: `fault_on_sevens` writes one element per program.
                let err = unsafe {
                    launch(fault_on_sevens, grid, &args, &[Bounds::default()], 0, programs, Some(&p))
                }
                .unwrap_err();
                let pid = [7 % grid[0], 7 / grid[0] % grid[1], 7 / (grid[0] * grid[1])];
                assert_eq!(
                    err,
                    LaunchError::Fault {
                        status: Status::OutOfBounds,
                        pid,
                        fault: Fault { site: 3, arg: 0, offset: 7 }
                    }
                );
                // Every program before the first fault ran.
                assert_eq!(&out[..7], &[0, 1, 2, 3, 4, 5, 6]);
            }
        }
    }

    /// The error of a launch of [`fault_while_one_waits`] on `programs` programs and two
    /// threads, with programs `late` and `early` faulting.
    fn cancel_case(programs: u32, late: u32, early: u32) -> LaunchError {
        let p = pool(2);
        let waiting = AtomicU32::new(0);
        let args = [pack_ptr(&waiting), late as u64, early as u64];
        run(fault_while_one_waits, [programs, 1, 1], &args, &[Bounds::default(); 3], 0, Some(&p)).unwrap_err()
    }

    /// A program that gives up waiting (`Cancelled`) is not reported, though its index is
    /// lower; the fault that made it give up is. Two programs on two threads run on
    /// different workers (chunks of one program), so program 0 is waiting when program 1
    /// faults.
    #[test]
    fn a_cancelled_program_gives_way_to_the_fault() {
        let fault = Fault { site: 5, arg: 0, offset: 1 };
        assert_eq!(
            cancel_case(2, 1, u32::MAX),
            LaunchError::Fault { status: Status::OutOfBounds, pid: [1, 0, 0], fault }
        );
    }

    /// The programs after a cancelled one in its chunk still run: one of them may fault
    /// earlier in the launch's order than the fault that cancelled it. 64 programs on two
    /// threads come in chunks of 5: program 0 waits until program 5 faults (run by the
    /// other worker, which takes that chunk once its own range is done), then program 2 of
    /// program 0's chunk faults, and is the one reported.
    #[test]
    fn programs_after_a_cancelled_one_still_run() {
        assert_eq!(chunk_len(64, 2, Programs::Independent), 5);
        let fault = Fault { site: 5, arg: 0, offset: 2 };
        assert_eq!(
            cancel_case(64, 5, 2),
            LaunchError::Fault { status: Status::OutOfBounds, pid: [2, 0, 0], fault }
        );
    }

    #[test]
    fn one_program_fault() {
        // Program 0 never faults; a one-program grid whose program faults needs pid 7.
        let mut out = [0u32; 8];
        let args = [pack_ptr(out.as_mut_ptr())];
        let ok = run(fault_on_sevens, [1, 1, 1], &args, &[Bounds::default()], 0, None);
        assert_eq!(ok, Ok(()));
        let err = run(fault_on_sevens, [8, 1, 1], &args, &[Bounds::default()], 0, None).unwrap_err();
        assert!(matches!(err, LaunchError::Fault { pid: [7, 0, 0], .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "program [7, 0, 0] stopped with OutOfBounds at site 3 (argument slot 0, element offset 7)"
        );
    }

    /// The flag bytes are zero when a worker starts a launch, even in a cached area another
    /// kernel filled, and stay as a program left them for the worker's next programs.
    #[test]
    fn scratch_flags_are_zero_once_per_worker_and_launch() {
        for threads in [1, 2, 4] {
            let p = pool(threads);
            for _ in 0..3 {
                let done = AtomicU32::new(0);
                let args = [pack_ptr(&done)];
                // Leaves every worker's cached area full of non-zero words.
                run(use_scratch, [64, 1, 1], &args, &[Bounds::default()], 1024, Some(&p)).unwrap();
                let first = AtomicU32::new(0);
                let args = [pack_ptr(&first)];
                run(once_per_worker, [500, 1, 1], &args, &[Bounds::default()], 1024, Some(&p)).unwrap();
                let n = first.load(Ordering::Relaxed);
                assert!((1..=threads as u32).contains(&n), "{threads} threads: {n} programs saw a zero flag");
            }
        }
    }

    #[test]
    fn scratch_is_aligned_and_private() {
        for threads in [1, 2, 8] {
            let p = pool(threads);
            let done = AtomicU32::new(0);
            let args = [pack_ptr(&done)];
            run(use_scratch, [500, 1, 1], &args, &[Bounds::default()], 1024, Some(&p)).unwrap();
            assert_eq!(done.load(Ordering::Relaxed), 500);
        }
    }

    #[test]
    fn validation_errors() {
        let err = run(count_runs, [1, 1, 1], &[0, 0], &[Bounds::default()], 0, None).unwrap_err();
        assert_eq!(err, LaunchError::BoundsMismatch { args: 2, bounds: 1 });
        let err = run(count_runs, [u32::MAX; 3], &[], &[], 0, None).unwrap_err();
        assert_eq!(err, LaunchError::GridTooLarge([u32::MAX; 3]));
    }

    #[test]
    fn packing() {
        assert_eq!(pack_f32(1.0), 0x3f80_0000);
        assert_eq!(pack_f64(-2.0), (-2.0f64).to_bits());
        assert_eq!(pack_int(-1), u64::MAX);
        assert_eq!(pack_uint(7), 7);
        assert_eq!(pack_bool(true), 1);
        assert_eq!(buffer_bounds(16), Bounds { lo: 0, hi: 16 });
    }
}
