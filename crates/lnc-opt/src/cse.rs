//! `cse`: merges pure instructions that compute the same thing.
//!
//! Two instructions compute the same thing when they have the same opcode (attributes and
//! constants included, floats compared by their bits, so `0.0` and `-0.0` stay apart),
//! the same operands and the same result types. The later one is dropped and its results
//! replaced by the earlier one's:
//!
//! - `a = op(x, y); …; b = op(x, y) => a = op(x, y); …` (uses of `b` read `a`)
//! - `a = x + y; …; b = y + x => a = x + y; …` for commutative binary operators.
//!
//! Scoping follows the regions: an instruction of an enclosing region can stand in for one
//! in a nested region, never the other way, and nothing computed in a loop body, a `while`
//! condition or an `if` branch is visible after it or in a sibling branch.
//!
//! It does NOT merge loads (memory may change in between, through this program's stores or
//! another program's atomics), atomics, or control flow (`for`/`while`/`if` with equal
//! bodies); it does not hoist loop-invariant instructions out of loops, and it does not
//! delete anything but the duplicates (the replaced values' other producers are for `dce`).

use std::collections::HashMap;

use lnc_bir::{BinOp, Function, Opcode, Region, Type, Value};

use crate::util::{Subst, put_regions, take_regions};

/// The pass's name, for `--passes` and test headers.
pub const NAME: &str = "cse";

/// Runs the pass; returns whether anything changed.
pub fn run(func: &mut Function) -> bool {
    let mut body = std::mem::take(&mut func.body);
    let mut cx = Cse { scopes: Vec::new(), subst: Subst::default(), changed: false };
    cx.region(func, &mut body);
    func.body = body;
    cx.changed
}

/// What makes two pure instructions interchangeable.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    opcode: Opcode,
    args: Vec<Value>,
    types: Vec<Type>,
}

struct Cse {
    /// Available expressions, one map per region being walked, outermost first.
    scopes: Vec<HashMap<Key, Vec<Value>>>,
    subst: Subst,
    changed: bool,
}

impl Cse {
    fn region(&mut self, func: &mut Function, region: &mut Region) {
        self.scopes.push(HashMap::new());
        let old = std::mem::take(&mut region.insts);
        let mut out = Vec::with_capacity(old.len());
        for inst in old {
            self.subst.apply(func, inst);
            let data = &func.insts[inst];
            if !data.regions.is_empty() {
                let mut regions = take_regions(func, inst);
                for r in &mut regions {
                    self.region(func, r);
                }
                put_regions(func, inst, regions);
                out.push(inst);
                continue;
            }
            if !data.opcode.is_pure() || data.results.is_empty() {
                out.push(inst);
                continue;
            }
            let mut args = data.args.clone();
            if matches!(data.opcode, Opcode::Binary(op) if is_commutative(op)) {
                args.sort();
            }
            let key =
                Key { opcode: data.opcode, args, types: data.results.iter().map(|&r| func.ty(r)).collect() };
            match self.scopes.iter().rev().find_map(|s| s.get(&key)) {
                Some(prev) => {
                    for (&r, &p) in data.results.iter().zip(prev) {
                        self.subst.replace(r, p);
                    }
                    self.changed = true;
                }
                None => {
                    let results = data.results.clone();
                    self.scopes.last_mut().expect("a scope per region").insert(key, results);
                    out.push(inst);
                }
            }
        }
        region.insts = out;
        self.scopes.pop();
    }
}

fn is_commutative(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Min | BinOp::Max)
}
