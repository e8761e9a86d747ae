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
    loop {
        let mut uses: HashMap<Value, u32> = HashMap::new();
        for i in f.live_insts() {
            for &a in &f.insts[i].args {
                *uses.entry(a).or_default() += 1;
            }
        }
        let dead = |f: &Function, r: &Region, k: usize| {
            let d = &f.insts[r.insts[k]];
            (d.opcode.is_pure() && d.results.iter().all(|r| !uses.contains_key(r))) || self_store(f, r, k)
        };
        let mut removed = false;
        fn sweep(
            f: &Function,
            r: &Region,
            dead: &dyn Fn(&Function, &Region, usize) -> bool,
            removed: &mut bool,
        ) -> Region {
            let mut out = Region { args: r.args.clone(), insts: Vec::new() };
            for (k, &i) in r.insts.iter().enumerate() {
                if dead(f, r, k) {
                    *removed = true;
                } else {
                    out.insts.push(i);
                }
            }
            out
        }
        let body = sweep(f, &f.body, &dead, &mut removed);
        let mut nested = Vec::new();
        for i in f.live_insts() {
            let regions: Vec<Region> =
                f.insts[i].regions.iter().map(|r| sweep(f, r, &dead, &mut removed)).collect();
            nested.push((i, regions));
        }
        f.body = body;
        for (i, regions) in nested {
            f.insts[i].regions = regions;
        }
        if !removed {
            return;
        }
    }
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
