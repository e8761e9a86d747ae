//! `dce`: removes instructions whose results are unused and that have no effect.
//!
//! The rewrites, applied in every region until nothing more goes:
//!
//! - `v = op(…)` with `v` unused `=>` (removed), for pure `op` and for `load`.
//! - `r… = for/while/if { … }` with every `r` unused and no store, atomic, assert or
//!   print anywhere inside `=>` (removed, with its regions).
//!
//! Loads whose results are unused are removed, as Triton does: a load has no effect on
//! memory. The price is that a safe launch no longer reports an out-of-bounds access made
//! only by a dead load. A `while` without effects and with unused results is removed even
//! though it might not terminate: kernels are assumed to make progress, as C++ threads are.
//!
//! It does NOT remove stores, atomics (even with unused results), asserts or prints, nor
//! terminators; it does not remove unused results, carried values or region arguments of a
//! loop that stays (the loop is kept whole), and it does not remove stores that a later
//! store overwrites.

use cranelift_entity::SecondaryMap;
use lnc_bir::{Function, Inst, Opcode, Region, Value};

use crate::util::{put_regions, take_regions, use_counts};

/// The pass's name, for `--passes` and test headers.
pub const NAME: &str = "dce";

/// Runs the pass; returns whether anything changed.
pub fn run(func: &mut Function) -> bool {
    let mut changed = false;
    // One backward sweep frees whole chains; another round catches what a removed
    // instruction's release made dead in a region already swept.
    loop {
        let mut uses = use_counts(func);
        let mut body = std::mem::take(&mut func.body);
        let swept = sweep(func, &mut body, &mut uses);
        func.body = body;
        if !swept {
            return changed;
        }
        changed = true;
    }
}

/// Removes dead instructions of `region`, last first, so that a removal frees the
/// operands of instructions still ahead in the sweep.
fn sweep(func: &mut Function, region: &mut Region, uses: &mut SecondaryMap<Value, u32>) -> bool {
    let mut changed = false;
    let mut kept = Vec::with_capacity(region.insts.len());
    for &inst in region.insts.iter().rev() {
        if !func.insts[inst].regions.is_empty() {
            let mut regions = take_regions(func, inst);
            for r in regions.iter_mut().rev() {
                changed |= sweep(func, r, uses);
            }
            put_regions(func, inst, regions);
        }
        if is_dead(func, inst, uses) {
            release(func, inst, uses);
            changed = true;
        } else {
            kept.push(inst);
        }
    }
    kept.reverse();
    region.insts = kept;
    changed
}

fn is_dead(func: &Function, inst: Inst, uses: &SecondaryMap<Value, u32>) -> bool {
    let data = &func.insts[inst];
    if data.results.iter().any(|&r| uses[r] > 0) {
        return false;
    }
    match data.opcode {
        Opcode::Load { volatile, .. } => !volatile,
        Opcode::For | Opcode::While | Opcode::If => !data.regions.iter().any(|r| has_effects(func, r)),
        op => op.is_pure(),
    }
}

/// True when something in `region` (nested regions included) writes memory, asserts or
/// prints.
fn has_effects(func: &Function, region: &Region) -> bool {
    region.insts.iter().any(|&i| {
        let data = &func.insts[i];
        matches!(
            data.opcode,
            Opcode::Store { .. }
                | Opcode::Load { volatile: true, .. }
                | Opcode::Atomic { .. }
                | Opcode::AtomicCas
                | Opcode::Assert
                | Opcode::Print(_)
        ) || data.regions.iter().any(|r| has_effects(func, r))
    })
}

/// Drops the uses made by `inst` and everything nested in it.
fn release(func: &Function, inst: Inst, uses: &mut SecondaryMap<Value, u32>) {
    let data = &func.insts[inst];
    for &a in &data.args {
        uses[a] -= 1;
    }
    for r in &data.regions {
        for &i in &r.insts {
            release(func, i, uses);
        }
    }
}
