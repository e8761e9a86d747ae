//! Value intervals of a function's integer scalars.
//!
//! An interval analysis in program order: constants, `min`, `max`, `and` with a negative
//! mask (a multiple of a power of two, rounding down) or of a constant, `add`, `sub`, integer casts that
//! fit; a loop index with a constant positive step ranges over `[lo(lb), hi(ub) - 1]`. A
//! result that may wrap is known no better than its type. Code generation uses it to run
//! loop indices in 64 bits and to merge range checks; tiling, to bound the rows it
//! prefetches.

use std::collections::HashMap;

use crate::{BinOp, Const, DType, Function, Inst, Opcode, Ty, Value, ValueDef};

/// Value intervals of integer scalars, `i128` so that sums never overflow here.
#[derive(Debug, Default)]
pub struct Ranges {
    map: HashMap<Value, (i128, i128)>,
}

/// The values a scalar of `d` can hold at all: its smallest and largest.
pub fn full(d: DType) -> (i128, i128) {
    let bits = d.bits();
    if !d.is_int() || bits >= 128 {
        return (i128::MIN, i128::MAX);
    }
    if d.is_signed() { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) }
}

/// Whether `(lo, hi)` lies within the values of `d`.
fn fits(d: DType, (lo, hi): (i128, i128)) -> bool {
    let (a, b) = full(d);
    lo >= a && hi <= b
}

impl Ranges {
    /// The interval of `v` (every value of its type when nothing better is known).
    pub fn of(&self, f: &Function, v: Value) -> (i128, i128) {
        self.map.get(&v).copied().unwrap_or_else(|| full(f.ty(v).dtype()))
    }

    /// Whether the analysis bounded `v` better than its type (for a result: it never
    /// wraps).
    pub fn known(&self, v: Value) -> bool {
        self.map.contains_key(&v)
    }

    /// Analyzes every integer scalar of `f`.
    pub fn analyze(f: &Function) -> Ranges {
        let mut r = Ranges::default();
        f.walk(|i| r.visit(f, i));
        r
    }

    fn visit(&mut self, f: &Function, i: Inst) {
        let d = &f.insts[i];
        if d.opcode == Opcode::For {
            if let (Some(step), Ty::Scalar(DType::I32)) = (const_int(f, d.args[2]), f.ty(d.args[0]))
                && step > 0
            {
                let (lb, ub) = (self.of(f, d.args[0]), self.of(f, d.args[1]));
                if lb.0 < ub.1 {
                    self.map.insert(d.regions[0].args[0], (lb.0, ub.1 - 1));
                }
            }
            return;
        }
        let [res] = d.results[..] else { return };
        let Ty::Scalar(dt) = f.ty(res) else { return };
        if !dt.is_int() {
            return;
        }
        let a = |k: usize| self.of(f, d.args[k]);
        let range = match d.opcode {
            Opcode::Const(Const::Int(k)) => (k as i128, k as i128),
            Opcode::Binary(BinOp::Add) => (a(0).0 + a(1).0, a(0).1 + a(1).1),
            Opcode::Binary(BinOp::Sub) => (a(0).0 - a(1).1, a(0).1 - a(1).0),
            Opcode::Binary(BinOp::Min) => (a(0).0.min(a(1).0), a(0).1.min(a(1).1)),
            Opcode::Binary(BinOp::Max) => (a(0).0.max(a(1).0), a(0).1.max(a(1).1)),
            // A constant masked by a constant (a bound the tiler rounds down to a
            // multiple of its step) is known exactly.
            Opcode::Binary(BinOp::And) if a(0).0 == a(0).1 && const_int(f, d.args[1]).is_some() => {
                let v = i128::from(a(0).0 as i64 & const_int(f, d.args[1]).unwrap_or(-1));
                (v, v)
            }
            // `x & -2^k` with `x ≥ 0` rounds down: between 0 and `x`.
            Opcode::Binary(BinOp::And)
                if a(0).0 >= 0
                    && const_int(f, d.args[1]).is_some_and(|m| m < 0 && (-m).count_ones() == 1) =>
            {
                (0, a(0).1)
            }
            // `x & m` with a constant `m ≥ 0` keeps bits of `m` only.
            Opcode::Binary(BinOp::And) if const_int(f, d.args[1]).is_some_and(|m| m >= 0) => {
                (0, const_int(f, d.args[1]).unwrap_or(0) as i128)
            }
            Opcode::Select => (a(1).0.min(a(2).0), a(1).1.max(a(2).1)),
            Opcode::LineGap => (-1, 63),
            Opcode::Cast if f.ty(d.args[0]).dtype().is_int() => a(0),
            _ => return,
        };
        if fits(dt, range) {
            self.map.insert(res, range);
        }
    }
}

/// The integer constant `v` is, if it is one.
pub fn const_int(f: &Function, v: Value) -> Option<i64> {
    match f.values[v].def {
        ValueDef::Result(i, _) => match f.insts[i].opcode {
            Opcode::Const(Const::Int(k)) => Some(k),
            _ => None,
        },
        ValueDef::RegionArg(..) => None,
    }
}
