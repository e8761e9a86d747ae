//! Dead code: removes pure loop-IR instructions whose results nothing uses.
//!
//! `x = pure(...)` with `x` unused `=> ` (nothing). The lowering emits some values on the
//! chance they are needed (arguments, a scalar pointer also kept as `base[offset]`);
//! removing them keeps the printed plan readable. Loads, stores, loops and everything else
//! with an effect stay, used or not — except a scratch store of what the buffer holds
//! there already: `x = scratch_load s[i] … scratch_store s[i], x` with nothing writing `s`
//! in between (a row converted into the scratch a loop materializes it in, module `rows`,
//! leaves that in the steady state).

use std::collections::HashMap;

use lnc_lir::{Function, Inst, Opcode, Region, Value};

pub(crate) fn run(f: &mut Function) {
    let mut uses: HashMap<Value, u32> = HashMap::new();
    for i in f.live_insts() {
        for &a in &f.insts[i].args {
            *uses.entry(a).or_default() += 1;
        }
    }
    // Backwards, each instruction's regions before it: every use of a value is seen before
    // its definition, so a chain of dead values goes in one sweep.
    let body = f.body.clone();
    f.body = sweep(f, &body, &mut uses);
}

/// `r` without its dead instructions (and theirs in nested regions), the uses of what
/// they read taken off `uses`.
fn sweep(f: &mut Function, r: &Region, uses: &mut HashMap<Value, u32>) -> Region {
    let mut kept = Vec::with_capacity(r.insts.len());
    for k in (0..r.insts.len()).rev() {
        let i = r.insts[k];
        let regions = f.insts[i].regions.clone();
        f.insts[i].regions = regions.iter().map(|n| sweep(f, n, uses)).collect();
        let d = &f.insts[i];
        let unused = d.results.iter().all(|v| uses.get(v).is_none_or(|&n| n == 0));
        if (d.opcode.is_pure() && unused) || self_store(f, r, k) {
            for a in d.args.clone() {
                if let Some(n) = uses.get_mut(&a) {
                    *n = n.saturating_sub(1);
                }
            }
            continue;
        }
        kept.push(i);
    }
    kept.reverse();
    Region { args: r.args.clone(), insts: kept }
}

/// Whether `r.insts[k]` stores into a scratch buffer the value loaded from the same place
/// earlier in the region, with nothing writing the buffer in between.
fn self_store(f: &Function, r: &Region, k: usize) -> bool {
    let d = &f.insts[r.insts[k]];
    let Opcode::ScratchStore(slot) = d.opcode else { return false };
    let [index, v] = d.args[..] else { return false };
    let Some(at) = r.insts[..k].iter().position(|&j| f.insts[j].results.first() == Some(&v)) else {
        return false;
    };
    let ld = &f.insts[r.insts[at]];
    if ld.opcode != Opcode::ScratchLoad(slot) || ld.args[..] != [index] {
        return false;
    }
    let mut writes = false;
    let mut visit = |j: Inst| {
        writes |= matches!(
            f.insts[j].opcode,
            Opcode::ScratchStore(s) | Opcode::RowLoad { slot: s, .. } if s == slot
        );
    };
    for &j in &r.insts[at + 1..k] {
        visit(j);
        crate::rewrite::walk_nested(f, j, &mut visit);
    }
    !writes
}
