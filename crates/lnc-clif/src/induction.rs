//! 64-bit copies of 32-bit loop indices, for addressing.
//!
//! Offsets in the loop IR are `i32`, as in Triton, and an address is `base + sext(offset)
//! · size`: every access inside a loop would sign-extend its offset again (`movslq`) and
//! scale it in a separate instruction. When a loop's index provably never wraps, the loop
//! runs its index in `i64` (the `i32` index is its truncation, computed where used); an
//! offset that is the index, or the index plus a constant that provably does not
//! overflow, is then taken from that `i64` directly and x86 folds the scaling and the
//! constant into the access's addressing mode.
//!
//! "Provably" comes from an interval analysis of the function's integer scalars, in
//! program order: constants, `min`, `max`, `and` with a negative mask (a multiple of a
//! power of two, rounding down), `add`, `sub`, integer casts that fit; a loop index with
//! a constant positive step ranges over `[lo(lb), hi(ub) - 1]`. A loop qualifies when
//! `hi(ub) + step` still fits in `i32`: then no step of its index wraps, and the `i64`
//! copy equals the sign extension of the index on every iteration.

use std::collections::HashMap;

use cranelift_codegen::ir::Value;
use lnc_lir::{self as lir, BinOp, Const, DType, Opcode, Ty, ValueDef};

use crate::base::FunctionCx;

/// Value intervals of integer scalars, `i128` so that sums never overflow here.
#[derive(Default)]
pub(crate) struct Ranges {
    map: HashMap<lir::Value, (i128, i128)>,
}

/// The values a scalar of `d` can hold at all.
fn full(d: DType) -> (i128, i128) {
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
    pub(crate) fn of(&self, f: &lir::Function, v: lir::Value) -> (i128, i128) {
        self.map.get(&v).copied().unwrap_or_else(|| full(f.ty(v).dtype()))
    }

    /// Analyzes every integer scalar of `f`.
    pub(crate) fn analyze(f: &lir::Function) -> Ranges {
        let mut r = Ranges::default();
        f.walk(|i| r.visit(f, i));
        r
    }

    fn visit(&mut self, f: &lir::Function, i: lir::Inst) {
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
            // `x & -2^k` with `x ≥ 0` rounds down: between 0 and `x`.
            Opcode::Binary(BinOp::And)
                if a(0).0 >= 0
                    && const_int(f, d.args[1]).is_some_and(|m| m < 0 && (-m).count_ones() == 1) =>
            {
                (0, a(0).1)
            }
            Opcode::Cast if f.ty(d.args[0]).dtype().is_int() => a(0),
            _ => return,
        };
        // A result that may wrap is known no better than its type.
        if fits(dt, range) {
            self.map.insert(res, range);
        }
    }
}

/// The integer constant `v` is, if it is one.
fn const_int(f: &lir::Function, v: lir::Value) -> Option<i64> {
    match f.values[v].def {
        ValueDef::Result(i, _) => match f.insts[i].opcode {
            Opcode::Const(Const::Int(k)) => Some(k),
            _ => None,
        },
        ValueDef::RegionArg(..) => None,
    }
}

/// The constant positive step of `for` instruction `l` when its index runs in `i64`.
pub(crate) fn wide_step(f: &lir::Function, ranges: &Ranges, l: lir::Inst) -> Option<i64> {
    let d = &f.insts[l];
    let iv = d.regions[0].args[0];
    let step = const_int(f, d.args[2]).filter(|&s| s > 0)?;
    let (_, hi_ub) = ranges.of(f, d.args[1]);
    let known = ranges.map.contains_key(&iv);
    (known && hi_ub + step as i128 <= i32::MAX as i128).then_some(step)
}

/// The scalar offset `v` as `(w, c)`, `v = w + c` in `i64`: a loop index with an `i64`
/// copy `w` (`c = 0`), or such an index plus a constant `c` that cannot overflow.
pub(crate) fn wide_index(fx: &FunctionCx, v: lir::Value) -> Option<(Value, i64)> {
    if let Some(&w) = fx.wide.get(&v) {
        return Some((w, 0));
    }
    let f = fx.f;
    let ValueDef::Result(i, _) = f.values[v].def else { return None };
    let d = &f.insts[i];
    if d.opcode != Opcode::Binary(BinOp::Add) || f.ty(v) != Ty::Scalar(DType::I32) {
        return None;
    }
    let (idx, c) = match (fx.wide.get(&d.args[0]), fx.wide.get(&d.args[1])) {
        (Some(&w), _) => (w, const_int(f, d.args[1])?),
        (_, Some(&w)) => (w, const_int(f, d.args[0])?),
        _ => return None,
    };
    // The sum never wraps in `i32`: it equals the 64-bit sum.
    if !fx.ranges.map.contains_key(&v) {
        return None;
    }
    Some((idx, c))
}
