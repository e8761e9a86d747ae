//! Dead code: removes pure loop-IR instructions whose results nothing uses.
//!
//! `x = pure(...)` with `x` unused `=> ` (nothing). The lowering emits some values on the
//! chance they are needed (arguments, a scalar pointer also kept as `base[offset]`);
//! removing them keeps the printed plan readable. Loads, stores, loops and everything else
//! with an effect stay, used or not.

use std::collections::HashMap;

use lnc_lir::{Function, Inst, Region, Value};

pub(crate) fn run(f: &mut Function) {
    loop {
        let mut uses: HashMap<Value, u32> = HashMap::new();
        for i in f.live_insts() {
            for &a in &f.insts[i].args {
                *uses.entry(a).or_default() += 1;
            }
        }
        let dead = |f: &Function, i: Inst| {
            let d = &f.insts[i];
            d.opcode.is_pure() && d.results.iter().all(|r| !uses.contains_key(r))
        };
        let mut removed = false;
        fn sweep(
            f: &Function,
            r: &Region,
            dead: &dyn Fn(&Function, Inst) -> bool,
            removed: &mut bool,
        ) -> Region {
            let mut out = Region { args: r.args.clone(), insts: Vec::new() };
            for &i in &r.insts {
                if dead(f, i) {
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
