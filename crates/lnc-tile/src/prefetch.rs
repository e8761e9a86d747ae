//! Prefetching the next program's rows: while a program makes a second pass over a row it
//! has read once, it asks for the same row of the worker's next program.
//!
//! ```text
//! p = ptr_add X, f(pid)                        ; the program's row, a function of its id
//! for iv = 0 to n step S { … load.contig p[iv + t] … }   ; first read (or row_load s <- p[t..])
//! for iv = 0 to n step S { … load.contig p[iv + t] … }   ; a second pass over the row
//! =>
//! p' = ptr_add X, f(pid + 1)                   ; the next program's row
//! for iv = 0 to n step S { prefetch p'[iv + t] ; prefetch p'[iv + t + 16] ; … }
//! ```
//!
//! A row kernel reads its row from memory in its first pass, then computes on it from the
//! cache. Rows of consecutive programs are usually adjacent, but the hardware prefetchers
//! only follow the demand reads, a few lines ahead: while a program computes, nothing
//! fetches the next program's row, and its first pass waits on memory line after line.
//! Measured on the seed forward (4096 rows of 4096, one thread, caches flushed): one row
//! took 2.3 µs in `fp16` and 1.8 µs in `fp32`, against 1.5 and 1.06 µs with the rows in
//! the cache. The runtime runs a worker's programs in increasing order (module `launch` of
//! lnc-runtime), so program `pid + 1` is the worker's next one but at the end of a chunk.
//!
//! The prefetches are spread over the second pass, one per 64-byte line of the next row
//! (one per iteration when an iteration covers less), so that the core never has more
//! line requests in flight than it can hold: issued all at once, they stall the program
//! as the reads they replace would.
//!
//! What qualifies:
//! - the kernel uses `program_id(0)` only, so the next program in flat order is `pid + 1`;
//! - the row pointer is a `ptr_add` computed at the top level from the program id, the
//!   arguments and constants by pure scalar instructions, which are copied with `pid + 1`;
//! - its first read is a top-level loop without nested loops that loads it contiguously,
//!   or a top-level `row_load` (a half row converted into scratch);
//! - a later top-level loop without nested loops starts where the first read started (the
//!   same lower bound, not the remainder loop of the first pass) and reads the row again:
//!   at `p[i]` (prefetch `p'[i]`), or, after a `row_load s[0..] <- p[t..]`, at scratch
//!   `s[i]` (prefetch `p'[t + i]`). It is the host of the prefetches: the first such loop
//!   after a loop's first read, so that they are issued as early as possible and more of
//!   the next row has arrived when its program starts; the last after a `row_load`.
//!   Measured on the seed forward (4096 rows, 2 threads, caches flushed, alternating
//!   lnc-bench runs): fp32 hosted by the variance pass instead of the normalization pass
//!   after it, N = 1024 0.83-0.84 → 0.76-0.78 ms, 4096 3.32-3.39 → 3.10-3.22 ms, 8192
//!   7.05-7.13 → 6.50-6.69 ms, 16384 within the noise; bf16 rows (read by a `row_load`)
//!   hosted by the mean pass instead, 1024 10 % faster but 4096 and 16384 about 4 %
//!   slower, so those keep the last pass. With `prefetchnta`, the last pass hosting a
//!   loop's row again (launches alternated in one process, 40-60 each): fp32 forward
//!   1.00-1.12 of the time at N = 1024-8192, fp16 1.01-1.19 at 768-4096, dx + dwdb within
//!   1 %. The first read's own loop hosting them (fp16 forward, two runs of 100 alternated
//!   launches): 0.95-1.01 at N = 768-1024, 1.02-1.03 at 2048, where the same kernel
//!   against itself read 0.89-1.05: no gain to take.
//! - the host's upper bound (interval analysis, [`lnc_lir::ranges`]) is at most a
//!   constant, and the row it covers at least [`MIN_ROW_BYTES`], a page, or
//!   [`MIN_HALF_ROW_BYTES`] for a row a `row_load` reads, or [`MIN_WIDE_ROW_BYTES`] for
//!   a host loop of tiles of 32 bytes or more (8 lanes of fp32 or 16 of a half type,
//!   computed in 256 or 512 bits): its passes are too short for the hardware prefetchers
//!   to bring the next row meanwhile;
//! - the rows one host prefetches come to at most [`MAX_PASS_BYTES`]: more would push
//!   out the current program's data before the next program used the prefetched lines.
//!
//! Nor the lines past the host's range, prefetched in front of it (`ub` plus each index's
//! offset, and `ub + step - 1`): the last partial line of a row that does not start on
//! a line (a large `Vec` starts 16 bytes past one), which the host's prefetches miss, and
//! what the remainder and tail loops read. Seed forward, 4096 rows, 2 threads, caches
//! flushed, rows 16 bytes past a line, 40-60 alternated launches in one process, against
//! the same kernel without them: fp32 0.98-0.99 of the time at N = 768, 1.03 at 1000,
//! 1.01-1.07 at 1024; fp16 and bf16 at 4096 1.04-1.07.
//!
//! Not prefetched: rows read only under a lock, in loops nested in an `if` (the seed
//! backward's partial rows of dw and db, `(pid % G)·N` into their buffers). Hosted by the
//! same loop as the next program's x and dy, at the same indices, they made the seed
//! backward slower in three alternated lnc-bench runs (2 threads, caches flushed): N = 768
//! 0.97-1.08 → 1.25-1.31 ms, 1024 1.29-1.51 → 1.61-1.73, 2048 2.67-2.86 → 2.74-3.15.
//! With `prefetchnta` (launches alternated in one process, two runs of 60): fp32 dx +
//! dwdb 1.35-1.50 of the time at N = 512-1024, 1.28-1.29 at 2048; fp16 1.00-1.02 at 512,
//! 1.13-1.19 at 1024-2048. The program's own partial rows, prefetched by its first pass
//! so that they are in the cache when the lock is taken: 0.97-1.07 (`prefetchnta`) and
//! 0.94-1.06 (`prefetcht0`), within the noise at N ≤ 1024 and slower from 2048 up.
//!
//! Not prefetched either: the next program's output row, before its stores (an experiment
//! hosted with the next row of x, at the same indices, seed forward, 2 threads, caches
//! flushed, two alternated runs): a row the stores would read for ownership anyway, fp16
//! N = 768 (6 MiB of output, below the streaming threshold) 325-340 → 353-368 µs, 1024
//! 394-456 → 472-512; fp32 at 768-1024, whose stores stream, 10-20 % slower. With
//! `prefetchnta` (launches alternated in one process, 60-80 of each; the same kernel
//! against itself within 1.00-1.11): fp16 1.03-1.14 of the time at N = 512-1024, 0.97 at
//! 2048; bf16 1.05-1.09; fp32 1.07-1.16; as `prefetchw` (the line fetched for writing)
//! 1.12-1.42. In the dx kernel (its row of dx) 0.92-0.94 at N = 512 and in fp16 at 1024,
//! but 1.25 in fp32 at 1024. Nor the program's own output row, prefetched by its first
//! pass so that the stores of its last find their lines (`prefetchnta`, or `prefetchw`):
//! fp16 forward 1.03-1.36 of the time at N = 512-2048, fp32 1.03-1.23 at 512-1024.
//! (The streaming pass fetches for writing only the few lines of a streamed row that
//! cached stores write, which it measured faster: module `stream`.)
//!
//! Nor two programs ahead (`pid + 2`, the same spread): seed forward, caches flushed, 2
//! threads, alternated launches in one process, the machine in its fast memory state: fp16
//! N = 1000 357 → 391 µs, 1024 336 → 355, 2048 569 → 536; fp32 N = 1024 478 → 457. With
//! `prefetchnta`, medians of paired ratios of 40-60 launches: fp32 forward 0.98-1.03 at
//! N = 512-4096, dx + dwdb 1.07-1.17; fp16 forward 1.03-1.07 at 768-1024 and 4096, 0.96
//! at 2048.
//!
//! Nor by group, with the prefetches aimed at the right row: runtime workers running a
//! group's rows one after the other (`g`, `g + G`, …, whose partial rows then stay in the
//! first-level cache, lnc-runtime's `launch.rs`) and prefetching `pid + G` instead: the
//! seed dx + dwdb at M = 4096 took 1.13-1.70 ms against 0.76-1.26 at N = 512-1024 (lnc-bench,
//! two runs each, with `prefetcht1`; the same with the prefetches of `pid + 1`).
//!
//! A prefetch is only a hint: it never faults (the row after the grid's last is prefetched
//! too) and changes no value, so none of this changes what a program computes.

use std::collections::{HashMap, HashSet};

use lnc_lir::ranges::Ranges;
use lnc_lir::{Addressing, BinOp, Const, DType, Function, Inst, Opcode, Ty, Value};

use crate::rewrite::{Lanes, clone_insts, def, int_of, iv_plus, konst};

/// The most bytes of the next program's rows one pass prefetches (all its rows). Measured
/// with `prefetchnta` (lnc-clif's `prefetch.rs`), seed kernels compiled both ways, launches
/// alternated in one process (M = 4096, 2 threads, caches flushed, two runs of 40 and 25
/// launches, medians of the paired ratios): the fp32 forward at N = 16384 (one row of 64
/// KB, in 256-bit loops) took 0.935-0.937 of the time without its prefetches, the dx
/// kernel at 16384 (x and dy, 128 KB) 1.055-1.097 with them. With `prefetcht1`, rows of
/// 32-byte tiles were limited to 32 KB each (the forward at 16384: 7.96 ms without
/// prefetches, 9.34 with); the dx kernel at N = 8192 (two rows of 32 KB) gains with them.
pub(crate) const MAX_PASS_BYTES: i64 = 64 << 10;

/// The shortest row a loop of 4-lane tiles reads that is worth it: a page. Rows within a
/// page the hardware's stream prefetchers follow from one program to the next (measured on
/// the seed forward at 2 threads, caches flushed: no gain at 2 KB rows, fp32 N = 512, and
/// 3 % slower in some runs); they stop at page boundaries, which longer rows cross.
pub(crate) const MIN_ROW_BYTES: i64 = 4 << 10;

/// The shortest row a `row_load` reads that is worth it. The helper reads the whole row in
/// one burst at the start of the program, which then computes from scratch: the hardware
/// prefetchers, which follow demand reads, have no time to run ahead into the next row,
/// as they do while a loop's first pass walks an `fp32` row. Measured on the seed forward
/// (its x read by a `row_load`, as without F16C) at 4096 rows, 2 threads, caches flushed,
/// five alternating runs of 60 launches (time with prefetches over time without, with
/// `prefetcht1`): fp16 N = 1024 (2 KB rows) 0.88-1.00, median 0.95; bf16 N = 1024
/// 0.94-1.03, median 0.96; at 1.5 KB rows (N = 768) within 1 %.
pub(crate) const MIN_HALF_ROW_BYTES: i64 = 2 << 10;

/// The shortest row a loop of tiles of 32 bytes or more reads that is worth it: its passes
/// over a row in the cache end too soon for the hardware prefetchers to bring the next row
/// meanwhile (fp32 rows of 3 KB and 4 KB, 2 threads, flushed: 15-38 % faster with the
/// prefetches). At 1 KB (N = 512 in fp16 and bf16, 16-lane tiles), with `prefetchnta`,
/// launches alternated in one process (M = 4096, 2 threads, caches flushed, medians of
/// the paired ratios of 150 launches, two runs each; the same kernel against itself:
/// 0.996-1.030): dx + dwdb 0.86-0.92 of the time without them, the forward 0.96-0.99.
/// (With `prefetcht1` the half forward at 1 KB had been slower: fp16 33.3-36.5 →
/// 30.3-35.8 GB/s in lnc-bench.) Shorter rows measured within that harness's noise
/// there (up to 13 % at N = 256).
pub(crate) const MIN_WIDE_ROW_BYTES: i64 = 1 << 10;

/// A row index a host loop reads: element `offset + index` of the row (`offset` absent:
/// 0), where `index` is a value of the host's body.
type RowIndex = (Value, Option<Value>);

/// The name of the program id in [`Keys`].
const PID: &str = "$pid";

/// Bytes of a cache line: one prefetch each.
const LINE_BYTES: i64 = 64;

/// Adds the prefetches of the next program's rows.
pub(crate) fn run(f: &mut Function) {
    let mut pids = Vec::new();
    let mut other_axis = false;
    f.walk(|i| match f.insts[i].opcode {
        Opcode::ProgramId(0) => pids.push(f.insts[i].results[0]),
        Opcode::ProgramId(_) => other_axis = true,
        _ => {}
    });
    if other_axis || pids.is_empty() {
        return;
    }
    let top: Vec<Inst> = f.body.insts.clone();
    let mut keys =
        Keys { position: top.iter().enumerate().map(|(k, &i)| (i, k)).collect(), memo: HashMap::new() };
    let ranges = Ranges::analyze(f);
    let mut plans: Vec<(Inst, Value, Vec<RowIndex>, i128)> = Vec::new();
    let mut done = HashSet::new();
    for (k, &s) in top.iter().enumerate() {
        for (row, first) in row_reads(f, s) {
            let Some(key) = keys.of(f, row) else { continue };
            if !done.insert(key.clone()) || !key.contains(PID) {
                continue;
            }
            if let Some((host, indices, bytes)) =
                host_of(f, &ranges, &mut keys, &top[k + 1..], &key, row, first)
            {
                plans.push((host, row, indices, bytes));
            }
        }
    }
    let mut per_host: HashMap<Inst, i128> = HashMap::new();
    for &(host, _, _, bytes) in &plans {
        *per_host.entry(host).or_default() += bytes;
    }
    for (host, row, indices, _) in plans {
        if per_host.get(&host).is_some_and(|&b| b <= i128::from(MAX_PASS_BYTES)) {
            add_prefetches(f, host, row, &indices, &pids);
        }
    }
}

/// Structural names of the scalars computed at the top level by pure instructions from
/// arguments, constants and the program id: pointers with the same name hold the same
/// address in every program (the front end may compute a row's address once per load).
struct Keys {
    position: HashMap<Inst, usize>,
    memo: HashMap<Value, Option<String>>,
}

impl Keys {
    fn of(&mut self, f: &Function, v: Value) -> Option<String> {
        if let Some(k) = self.memo.get(&v) {
            return k.clone();
        }
        let key = (|| {
            let i = def(f, v)?;
            let d = &f.insts[i];
            // A scratch load is pure but reads what the program wrote: two with the same
            // index may differ.
            let reads_scratch = matches!(d.opcode, Opcode::ScratchLoad(_));
            if !self.position.contains_key(&i) || !d.opcode.is_pure() || reads_scratch || f.ty(v).is_tile() {
                return None;
            }
            if d.opcode == Opcode::ProgramId(0) {
                return Some(PID.to_string());
            }
            let head = format!("{}:{:?}", f.ty(v), d.opcode);
            let args: Option<Vec<String>> = d.args.iter().map(|&a| self.of(f, a)).collect();
            Some(format!("{head}({})", args?.join(",")))
        })();
        self.memo.insert(v, key.clone());
        key
    }
}

/// How a statement first reads a row: the lower bound of the loop loading it, or the
/// `row_load` converting it.
#[derive(Clone, Copy)]
enum First {
    Loop(Value),
    Row,
}

/// The row pointers top-level statement `s` reads, and how.
fn row_reads(f: &Function, s: Inst) -> Vec<(Value, First)> {
    let data = &f.insts[s];
    match data.opcode {
        Opcode::RowLoad { once: None, .. } => vec![(data.args[0], First::Row)],
        Opcode::For if innermost(f, s) => {
            let lb = data.args[0];
            let mut out = Vec::new();
            for &i in &data.regions[0].insts {
                if let Opcode::Load { addr: Addressing::Contiguous, .. } = f.insts[i].opcode {
                    out.push((f.insts[i].args[0], First::Loop(lb)));
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Whether loop `l` only checks bounds: its stores only check theirs (`check_only`, left
/// by module `defer`), and it carries nothing. Code generation emits nothing for it once
/// the checks are made in front of it (the loads it reads are checked, never used), so a
/// prefetch placed there would not run.
fn only_checks(f: &Function, l: Inst) -> bool {
    let body = &f.insts[l].regions[0];
    f.insts[l].results.is_empty()
        && body.insts.iter().any(|&i| matches!(f.insts[i].opcode, Opcode::Store { check_only: true, .. }))
        && body.insts.iter().all(|&i| !matches!(f.insts[i].opcode, Opcode::Store { check_only: false, .. }))
}

fn innermost(f: &Function, l: Inst) -> bool {
    f.insts[l].regions[0].insts.iter().all(|&i| f.insts[i].regions.is_empty())
}

/// The loop among `later` that hosts the prefetches of the row named `key` (first read
/// through `row`): the first (after a loop's first read; after a `row_load`, the last)
/// that starts where the first read started and reads the row again, directly or from the
/// scratch buffer a `row_load` of it filled. Returns the row indices the host reads per
/// iteration, each `(index, offset)`: element `offset + index` of the row, where `index`
/// is a value of the host's body; and the most bytes of the row the host covers.
fn host_of(
    f: &Function,
    ranges: &Ranges,
    keys: &mut Keys,
    later: &[Inst],
    key: &str,
    row: Value,
    first: First,
) -> Option<(Inst, Vec<RowIndex>, i128)> {
    // The scratch buffers holding the row, with the row offset of their element 0.
    let mut scratch: HashMap<u32, Value> = HashMap::new();
    if let First::Row = first {
        for &s in &f.body.insts {
            if let Opcode::RowLoad { slot, once: None, .. } = f.insts[s].opcode
                && keys.of(f, f.insts[s].args[0]).as_deref() == Some(key)
            {
                scratch.insert(slot, f.insts[s].args[1]);
            }
        }
    }
    let mut found = None;
    for &s in later {
        let data = &f.insts[s];
        if data.opcode != Opcode::For || !innermost(f, s) || only_checks(f, s) {
            continue;
        }
        let lb = data.args[0];
        let starts_with_row = match first {
            First::Loop(l) => same_int(f, l, lb),
            First::Row => int_of(f, lb) == Some(0),
        };
        if !starts_with_row {
            continue;
        }
        let body = &data.regions[0];
        let iv = body.args[0];
        let mut indices = Vec::new();
        for &i in &body.insts {
            let d = &f.insts[i];
            match d.opcode {
                Opcode::Load { addr: Addressing::Contiguous, .. }
                    if matches!(first, First::Loop(_)) && keys.of(f, d.args[0]).as_deref() == Some(key) =>
                {
                    indices.push((d.args[1], None));
                }
                Opcode::ScratchLoad(slot) if f.ty(d.results[0]).is_tile() => {
                    if let Some(&offset) = scratch.get(&slot) {
                        indices.push((d.args[0], Some(offset)));
                    }
                }
                _ => {}
            }
        }
        if indices.is_empty() {
            continue;
        }
        let elem = i64::from(row_elem_bytes(f, row)?);
        let (_, max_ub) = ranges.of(f, data.args[1]);
        let wide = data.regions[0].insts.iter().any(|&i| {
            f.insts[i]
                .results
                .iter()
                .any(|&r| matches!(f.ty(r), Ty::Tile(dt, lanes) if dt.size().max(4) * lanes as u32 >= 32))
        });
        let min_row = match first {
            First::Loop(_) if wide => MIN_WIDE_ROW_BYTES,
            First::Loop(_) => MIN_ROW_BYTES,
            First::Row => MIN_HALF_ROW_BYTES,
        };
        let bytes = max_ub.saturating_mul(elem.into());
        if !(i128::from(min_row)..=i128::from(MAX_PASS_BYTES)).contains(&bytes) {
            return None;
        }
        // One prefetch per line the iteration covers: the reads at iv + c whose element
        // offset c is a multiple of the line, or the first read when the step is shorter.
        let step = int_of(f, data.args[2])?;
        if step <= 0 {
            return None;
        }
        let per_line = (LINE_BYTES / elem).max(1);
        let mut chosen: Vec<RowIndex> = indices
            .iter()
            .copied()
            .filter(|&(ix, _)| offset_from(f, ix, iv).is_some_and(|c| c % per_line == 0))
            .collect();
        chosen.sort_by_key(|&(ix, _)| offset_from(f, ix, iv));
        chosen.dedup_by_key(|&mut (ix, _)| offset_from(f, ix, iv));
        if chosen.is_empty() {
            chosen.push(indices[0]);
        }
        found = Some((s, chosen, bytes));
        if matches!(first, First::Loop(_)) {
            break;
        }
    }
    found
}

/// Bytes of one element of the row `p` points into.
fn row_elem_bytes(f: &Function, p: Value) -> Option<u32> {
    match f.ty(p) {
        Ty::Ptr(d) => Some(d.size()),
        _ => None,
    }
}

/// `c` when `v` is `iv` (0) or `iv + c` with `c` a constant.
fn offset_from(f: &Function, v: Value, iv: Value) -> Option<i64> {
    match iv_plus(f, v, iv, &HashSet::new())? {
        None => Some(0),
        Some(c) => int_of(f, c),
    }
}

/// Whether `a` and `b` are the same value or equal integer constants.
fn same_int(f: &Function, a: Value, b: Value) -> bool {
    a == b || matches!((int_of(f, a), int_of(f, b)), (Some(x), Some(y)) if x == y)
}

/// Copies the computation of `row` with `pid + 1` for the program id before `host`, and
/// adds the prefetches of that row at `indices` to the start of the host's body.
fn add_prefetches(f: &mut Function, host: Inst, row: Value, indices: &[RowIndex], pids: &[Value]) {
    // `host_of` found the host among the top-level instructions; looked up here so that a
    // mistake drops the prefetches instead of panicking.
    if !f.body.insts.contains(&host) {
        return;
    }
    let span = f.spans[host];
    let mut new = Vec::new();
    let mut map = HashMap::new();
    let one = konst(f, DType::I32, Const::Int(1));
    for &p in pids {
        let next = f.create_inst(Opcode::Binary(BinOp::Add), vec![p, one], &[Ty::Scalar(DType::I32)], span);
        new.push(next);
        map.insert(p, f.insts[next].results[0]);
    }
    // The instructions computing `row` from the program id, in program order.
    let chain: Vec<Inst> = {
        let mut needed = HashSet::new();
        let mut stack = vec![row];
        while let Some(v) = stack.pop() {
            if pids.contains(&v) {
                continue;
            }
            if let Some(i) = def(f, v)
                && needed.insert(i)
            {
                stack.extend(f.insts[i].args.iter().copied());
            }
        }
        let depends = depends_on_pid(f, &needed, pids);
        f.body.insts.iter().copied().filter(|i| needed.contains(i) && depends.contains(i)).collect()
    };
    new.extend(clone_insts(f, &chain, &mut map, &mut HashSet::new(), Lanes::Same));
    let Some(&next_row) = map.get(&row) else { return };
    let mut body_new = Vec::new();
    for &(index, offset) in indices {
        let at = match offset {
            None => index,
            Some(t) if int_of(f, t) == Some(0) => index,
            Some(t) => {
                let ty = f.ty(index);
                let t = if f.ty(t) == ty {
                    t
                } else {
                    let c = f.create_inst(Opcode::Cast, vec![t], &[ty], span);
                    body_new.push(c);
                    f.insts[c].results[0]
                };
                let sum = f.create_inst(Opcode::Binary(BinOp::Add), vec![t, index], &[ty], span);
                body_new.push(sum);
                f.insts[sum].results[0]
            }
        };
        body_new.push(f.create_inst(Opcode::Prefetch { write: false }, vec![next_row, at], &[], span));
    }
    // Looked up again: `konst` may have added constants to the top level since.
    let Some(pos) = f.body.insts.iter().position(|&i| i == host) else { return };
    f.body.insts.splice(pos..pos, new);
    // The indices are defined in the body: the prefetches go right after the last of them.
    let body = &f.insts[host].regions[0];
    let after = body
        .insts
        .iter()
        .rposition(|&i| f.insts[i].results.iter().any(|r| indices.iter().any(|&(ix, _)| ix == *r)))
        .map_or(0, |k| k + 1);
    f.insts[host].regions[0].insts.splice(after..after, body_new);
}

/// The instructions of `insts` whose results depend on a program id.
fn depends_on_pid(f: &Function, insts: &HashSet<Inst>, pids: &[Value]) -> HashSet<Inst> {
    let mut out = HashSet::new();
    for &i in &f.body.insts {
        if insts.contains(&i)
            && f.insts[i]
                .args
                .iter()
                .any(|&a| pids.contains(&a) || def(f, a).is_some_and(|d| out.contains(&d)))
        {
            out.insert(i);
        }
    }
    out
}
