//! Deferred stores: a store into an argument the kernel never reads, followed by a spin
//! lock's acquire loop, moves to just after that loop.
//!
//! ```text
//! store DX, dx                      ; a row of results, into lines not in the cache
//! t = mul …                         ; pure instructions and loads stay where they are
//! while { atomic_cas Lock + pid % G, 0, 1 … }
//! =>
//! t = mul …
//! while { atomic_cas Lock + pid % G, 0, 1 … }
//! store DX, dx
//! ```
//!
//! Why: on x86 an atomic read-modify-write (`lock cmpxchg`, `xchg`) waits until every
//! earlier store of the core has left its store buffer. A row of stores just issued into
//! lines that are not in the cache is still waiting for those lines from memory, so the
//! acquire stalls for them: in the seed backward's dx kernel, the lock right after the
//! store of `dx` cost up to a fifth of the kernel. Moved after the acquire, the stores
//! drain while the program goes on with the partial sums, and the release at the end
//! finds them done. Measured on the seed's dx kernel written both ways (2 threads,
//! M = 4096, caches flushed, medians of 80 launches interleaved): N = 512 0.838 → 0.785
//! ms, 768 1.201 → 1.005, 1024 1.635 → 1.384; the compiled pass in `lnc-bench
//! --unchecked` (dx + dwdb, paired, order alternated): 512 +5 %, 768 +21 %, 1000 and 1024
//! +16 %, from 2048 up 0 to +7 %.
//!
//! Why it keeps the program's meaning: the atomics are sequentially consistent, and a
//! store may not move past one in general; another program that acquires the lock after
//! this one released it must see the store. Here no program of the launch reads the
//! argument at all (no load or atomic derives from it; distinct arguments do not overlap,
//! module `provenance`), so no program can see when the store happens, and the launch's
//! end orders it before the host reads it. Two programs storing to the same element were
//! unordered before (their stores preceded their acquires) and are ordered by the lock
//! after: one of the outcomes allowed before. A program's own stores to the argument keep
//! their order: all the stores of a run move together, and nothing moves past a loop that
//! stores into the same argument.
//!
//! What moves, past one loop only: the stores into never-read arguments among the
//! instructions right before a `while` that performs atomics, back to the first instruction
//! that is neither such a store, a pure instruction without regions, nor a non-volatile
//! load (which may read only other arguments). An atomic, an assert, a print, a volatile
//! load or another loop ends the run.
//!
//! Bounds-checked code (`checked`): a store that faulted after the move would do so with
//! its program holding the lock (a later launch on the same lock words would wait for it
//! forever), and a launch where both the store and the lock are out of bounds would report
//! the lock. So each moved store leaves a copy where it was that only checks its bounds
//! (`check_only`), with the store's own operands: fusion evaluates its value where the
//! store was, in the pass the unmoved store had, so the loads that value reads are checked
//! there too (with a constant instead, a load only the moved store used was first read
//! after the lock; found by review). The launch fails there, before the lock, reporting the
//! access the unmoved kernel reported, and the moved store and its loads are then in bounds
//! (checked again after the lock, which cannot fail). Code generation drops the value (and
//! Cranelift the arithmetic), merges the checks of a pass where it can, and emits nothing
//! for a loop left with only loads and checks made in front of it. Only what a failed
//! launch leaves in memory differs, which is unspecified. Code without checks has no use
//! for the copy (`TileOptions::checked`). Seed dx + dwdb, bounds-checked, 2 threads,
//! caches flushed, paired with the kernel compiled without `defer` in `lnc-bench`: N =
//! 512–1024 +4 to +14 %, 2048 +3 to +5 %, from 4096 up within ±1 %.
//!
//! Which loops: no assert in them, and every atomic in the loop addresses a scalar
//! `arg + program_id(0) % G (+ constants)` with a compile-time `G` of at least
//! [`MIN_LOCKS`], the seed's `row % GROUP_SIZE_M` locks. The stores now run while the
//! lock is held, so a program waiting for the same lock waits longer; with one lock per
//! `G` ≥ 64 program ids two workers rarely meet (module `launch` of lnc-runtime counts
//! the waits), but a kernel with a single global
//! lock would serialize its stores, and keeps them where they are.

use std::collections::HashSet;

use lnc_bir::{Function, Inst, Opcode, Region};

use crate::locks::lock_groups;
use crate::provenance::Provenance;

/// The fewest locks (`G` in `pid % G`) for which stores move into the critical section.
pub(crate) const MIN_LOCKS: i64 = 64;

/// `f` with its stores deferred, or `None` when nothing moves. `checked`: each moved
/// store leaves a copy that only checks its bounds where it was.
pub(crate) fn run(f: &Function, prov: &Provenance, checked: bool) -> Option<Function> {
    let read = read_slots(f, prov);
    let mut g = f.clone();
    let mut body = std::mem::take(&mut g.body);
    let changed = defer_in(&mut g, prov, &read, checked, &mut body);
    g.body = body;
    changed.then_some(g)
}

/// The slots of the arguments some load or atomic reads.
fn read_slots(f: &Function, prov: &Provenance) -> HashSet<u32> {
    let mut read = HashSet::new();
    f.walk(|i| {
        let data = f.inst(i);
        if matches!(data.opcode, Opcode::Load { .. } | Opcode::Atomic { .. } | Opcode::AtomicCas) {
            read.insert(prov.root(data.args[0]));
        }
    });
    read
}

fn defer_in(
    f: &mut Function,
    prov: &Provenance,
    read: &HashSet<u32>,
    checked: bool,
    region: &mut Region,
) -> bool {
    let mut changed = false;
    for k in 0..region.insts.len() {
        let inst = region.insts[k];
        if f.inst(inst).regions.is_empty() {
            continue;
        }
        let mut regions = std::mem::take(&mut f.insts[inst].regions);
        for r in &mut regions {
            changed |= defer_in(f, prov, read, checked, r);
        }
        f.insts[inst].regions = regions;
    }
    // Stores moved past one loop stay after it: the next loop's walk back stops at them.
    let mut moved_once: HashSet<Inst> = HashSet::new();
    let mut j = 0;
    while j < region.insts.len() {
        let w = region.insts[j];
        if !is_rare_lock_loop(f, w) {
            j += 1;
            continue;
        }
        let moved = movable_stores(f, prov, read, &region.insts[..j], w, &moved_once);
        if moved.is_empty() {
            j += 1;
            continue;
        }
        let stores: Vec<Inst> = moved.iter().map(|&k| region.insts[k]).collect();
        moved_once.extend(stores.iter().copied());
        let mut kept = Vec::with_capacity(region.insts.len());
        for &i in &region.insts {
            if !stores.contains(&i) {
                kept.push(i);
            } else if checked {
                kept.push(check_of(f, i));
            }
        }
        region.insts = kept;
        let after = region.insts.iter().position(|&i| i == w).map_or(region.insts.len(), |p| p + 1);
        region.insts.splice(after..after, stores.iter().copied());
        changed = true;
        j = after + stores.len();
    }
    changed
}

/// A copy of store `s` that only checks its bounds (`check_only`), with the store's own
/// operands: fusion then evaluates the value where the store was, so the loads it reads
/// are checked before the lock too, in the order the unmoved store's pass had them (code
/// generation drops the value, and Cranelift the arithmetic and loads nothing else uses).
fn check_of(f: &mut Function, s: Inst) -> Inst {
    let data = f.inst(s).clone();
    let has_mask = matches!(data.opcode, Opcode::Store { has_mask: true, .. });
    let span = f.span(s);
    f.create_inst(Opcode::Store { has_mask, check_only: true }, data.args, &[], span)
}

/// Indices (ascending) of the stores before `w` (`before` is the region up to it) that
/// move past it.
fn movable_stores(
    f: &Function,
    prov: &Provenance,
    read: &HashSet<u32>,
    before: &[Inst],
    w: Inst,
    moved_once: &HashSet<Inst>,
) -> Vec<usize> {
    let mut found = Vec::new();
    for (k, &i) in before.iter().enumerate().rev() {
        if moved_once.contains(&i) {
            break;
        }
        let data = f.inst(i);
        match data.opcode {
            Opcode::Store { check_only: false, .. } if !read.contains(&prov.root(data.args[0])) => {
                found.push(k)
            }
            Opcode::Load { volatile: false, .. } => {}
            op if op.is_pure() && data.regions.is_empty() => {}
            _ => break,
        }
    }
    // A slot the loop stores into keeps all its stores before the loop.
    let mut stored_in_loop = HashSet::new();
    walk_regions(f, w, &mut |i| {
        let data = f.inst(i);
        if matches!(data.opcode, Opcode::Store { .. }) {
            stored_in_loop.insert(prov.root(data.args[0]));
        }
    });
    found.retain(|&k| !stored_in_loop.contains(&prov.root(f.inst(before[k]).args[0])));
    found.reverse();
    found
}

/// Whether `w` is a `while` loop with atomics, all on locks few programs share, and no
/// assert (one that stops the launch while the program waits must find the stores done).
fn is_rare_lock_loop(f: &Function, w: Inst) -> bool {
    if f.inst(w).opcode != Opcode::While {
        return false;
    }
    let (mut atomics, mut all_rare, mut asserts) = (0, true, false);
    walk_regions(f, w, &mut |i| {
        let data = f.inst(i);
        match data.opcode {
            Opcode::Atomic { .. } | Opcode::AtomicCas => {
                atomics += 1;
                all_rare &= lock_groups(f, data.args[0]).is_some_and(|g| g >= MIN_LOCKS);
            }
            Opcode::Assert => asserts = true,
            _ => {}
        }
    });
    atomics > 0 && all_rare && !asserts
}

/// Every instruction nested in the regions of `inst`.
fn walk_regions(f: &Function, inst: Inst, visit: &mut impl FnMut(Inst)) {
    for r in &f.inst(inst).regions {
        for &i in &r.insts {
            visit(i);
            walk_regions(f, i, visit);
        }
    }
}
