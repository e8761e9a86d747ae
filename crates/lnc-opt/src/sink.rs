//! `sink`: the instructions right after an `if` that consume its results move into both
//! branches, and the results nobody reads any more are dropped.
//!
//! ```text
//! r = if c { A; yield a } else { B; yield b }
//! store P, r
//! =>
//! if c { A; store P, a; yield } else { B; store P, b; yield }
//! ```
//!
//! The run that moves is the longest sequence of instructions directly after the `if`
//! each of which reads a result of the `if` or of an instruction moved before it, and
//! whose own results are read only inside the run. Execution order is unchanged: the run
//! followed the `if` and now ends each branch.
//!
//! Why: a block result of an `if` has to live in memory between the branch that computes
//! it and the code after the `if` (the seed backward's partial sums of dw and db, one
//! scratch buffer each and a loop to copy them out). Sunk into the branches, the stores
//! fuse with the loops that compute their values.
//!
//! It does NOT move instructions with regions, does not move a run whose values are read
//! after it, and does not look past the first instruction that reads no result.

use std::collections::{HashMap, HashSet};

use lnc_bir::{Function, Inst, Opcode, Region, Value};

use crate::util::{put_regions, take_regions};

/// The pass's name, for `--passes` and test headers.
pub const NAME: &str = "sink";

/// Runs the pass; returns whether anything changed.
pub fn run(func: &mut Function) -> bool {
    let mut body = std::mem::take(&mut func.body);
    let changed = sink_region(func, &mut body);
    func.body = body;
    if changed {
        drop_unused_results(func);
    }
    changed
}

fn sink_region(func: &mut Function, region: &mut Region) -> bool {
    let mut changed = false;
    for &inst in &region.insts {
        if !func.insts[inst].regions.is_empty() {
            let mut regions = take_regions(func, inst);
            for r in &mut regions {
                changed |= sink_region(func, r);
            }
            put_regions(func, inst, regions);
        }
    }
    let mut p = 0;
    while p < region.insts.len() {
        let i = region.insts[p];
        if func.insts[i].opcode == Opcode::If && !func.insts[i].results.is_empty() {
            let run = sinkable_run(func, region, p);
            if run > 0 {
                let moved: Vec<Inst> = region.insts.drain(p + 1..p + 1 + run).collect();
                sink_into(func, i, &moved);
                changed = true;
            }
        }
        p += 1;
    }
    changed
}

/// How many instructions after the `if` at `p` form the run that can move.
fn sinkable_run(func: &Function, region: &Region, p: usize) -> usize {
    let mut produced: HashSet<Value> = func.insts[region.insts[p]].results.iter().copied().collect();
    let mut len = 0;
    for &j in &region.insts[p + 1..] {
        let d = &func.insts[j];
        if !d.regions.is_empty() || d.opcode.is_terminator() || !d.args.iter().any(|a| produced.contains(a)) {
            break;
        }
        produced.extend(d.results.iter().copied());
        len += 1;
    }
    // Shrink until nothing after the run reads a value defined in it.
    while len > 0 {
        let inside: HashSet<Value> =
            region.insts[p + 1..p + 1 + len].iter().flat_map(|&j| func.insts[j].results.clone()).collect();
        let mut read_after = false;
        for &j in &region.insts[p + 1 + len..] {
            visit_args(func, j, &mut |a| read_after |= inside.contains(&a));
        }
        if !read_after {
            break;
        }
        len -= 1;
    }
    len
}

/// Calls `g` on every operand of `i` and of the instructions nested in it.
fn visit_args(func: &Function, i: Inst, g: &mut dyn FnMut(Value)) {
    for &a in &func.insts[i].args {
        g(a);
    }
    for r in &func.insts[i].regions {
        for &j in &r.insts {
            visit_args(func, j, g);
        }
    }
}

/// Appends a copy of `moved` to each branch of `if_inst`, before its `yield`, reading the
/// branch's yielded values for the `if`'s results.
fn sink_into(func: &mut Function, if_inst: Inst, moved: &[Inst]) {
    let results = func.insts[if_inst].results.clone();
    let mut regions = take_regions(func, if_inst);
    for r in &mut regions {
        let term = r.insts.pop().expect("an if branch ends in yield");
        let yielded = func.insts[term].args.clone();
        let mut map: HashMap<Value, Value> = results.iter().copied().zip(yielded).collect();
        for &j in moved {
            let d = func.insts[j].clone();
            let args = d.args.iter().map(|a| *map.get(a).unwrap_or(a)).collect();
            let tys: Vec<_> = d.results.iter().map(|&v| func.ty(v)).collect();
            let span = func.span(j);
            let n = func.create_inst(d.opcode, args, &tys, span);
            for (k, &v) in d.results.iter().enumerate() {
                map.insert(v, func.insts[n].results[k]);
            }
            r.insts.push(n);
        }
        r.insts.push(term);
    }
    put_regions(func, if_inst, regions);
}

/// Rebuilds every `if` some of whose results are unread without them.
fn drop_unused_results(func: &mut Function) {
    let mut read: HashSet<Value> = HashSet::new();
    func.walk(|i| read.extend(func.insts[i].args.iter().copied()));
    let mut ifs = Vec::new();
    func.walk(|i| {
        let d = &func.insts[i];
        if d.opcode == Opcode::If && d.results.iter().any(|r| !read.contains(r)) {
            ifs.push(i);
        }
    });
    for old in ifs {
        let keep: Vec<usize> = (0..func.insts[old].results.len())
            .filter(|&k| read.contains(&func.insts[old].results[k]))
            .collect();
        let tys: Vec<_> = keep.iter().map(|&k| func.ty(func.insts[old].results[k])).collect();
        let span = func.span(old);
        let new = func.create_inst(Opcode::If, func.insts[old].args.clone(), &tys, span);
        let mut regions = take_regions(func, old);
        for r in &mut regions {
            let term = *r.insts.last().expect("an if branch ends in yield");
            let args = func.insts[term].args.clone();
            func.insts[term].args = keep.iter().map(|&k| args[k]).collect();
        }
        put_regions(func, new, regions);
        let mut body = std::mem::take(&mut func.body);
        replace_inst(&mut body, old, new, &mut func.insts);
        func.body = body;
        for (n, &k) in keep.iter().enumerate() {
            let (from, to) = (func.insts[old].results[k], func.insts[new].results[n]);
            func.replace_uses(from, to);
        }
    }
}

/// Puts `new` where `old` is in the region tree rooted at `region`.
fn replace_inst(
    region: &mut Region,
    old: Inst,
    new: Inst,
    insts: &mut cranelift_entity::PrimaryMap<Inst, lnc_bir::InstData>,
) -> bool {
    for k in 0..region.insts.len() {
        let i = region.insts[k];
        if i == old {
            region.insts[k] = new;
            return true;
        }
        let mut regions = std::mem::take(&mut insts[i].regions);
        let found = regions.iter_mut().any(|r| replace_inst(r, old, new, insts));
        insts[i].regions = regions;
        if found {
            return true;
        }
    }
    false
}
