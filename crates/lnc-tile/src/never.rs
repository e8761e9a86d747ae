//! Loops that never run: a `for` whose step is positive and whose lower bound is at least
//! its upper bound, whatever values they take (`lnc_lir::ranges`), goes, its results
//! replaced by its initial values.
//!
//! ```text
//! for r = 32 to 32 step 1 iter(a = s) { … }       ; r = … the loop's results: s
//! ```
//!
//! Tiling leaves such loops where the trip count is known: the remainder of a reduction
//! unrolled by four over a block of 32 rows (the seed dwdb kernel's column sums), the
//! tail of a loop over a block whose size is a multiple of the tile. Cranelift folds their
//! bounds but still compiles their bodies, in 128-bit parts where they carry a tile that
//! did not start as a splat.

use std::collections::HashMap;

use lnc_lir::Function;
use lnc_lir::ranges::Ranges;

use crate::rewrite::{for_loops, parents, region_mut, replace_uses};

pub(crate) fn run(f: &mut Function) {
    let ranges = Ranges::analyze(f);
    let never: Vec<_> = for_loops(f)
        .into_iter()
        .filter(|&l| {
            // A negative step runs while `iv > ub`: only a step known to be positive
            // (a run-time one may not be: `range(10, 0, s)`) makes `lb ≥ ub` empty.
            let d = &f.insts[l];
            ranges.of(f, d.args[2]).0 > 0 && ranges.of(f, d.args[0]).0 >= ranges.of(f, d.args[1]).1
        })
        .collect();
    if never.is_empty() {
        return;
    }
    let mut map = HashMap::new();
    for &l in &never {
        let d = &f.insts[l];
        map.extend(d.results.iter().copied().zip(d.args[3..].iter().copied()));
    }
    // A loop's initial value may be another such loop's result: follow the chain.
    let resolved: HashMap<_, _> = map
        .keys()
        .map(|&k| {
            let mut v = map[&k];
            while let Some(&next) = map.get(&v) {
                v = next;
            }
            (k, v)
        })
        .collect();
    replace_uses(f, &resolved);
    let parents = parents(f);
    for l in never {
        if let Some(&p) = parents.get(&l) {
            region_mut(f, p).insts.retain(|&i| i != l);
        }
    }
}
