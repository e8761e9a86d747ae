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
//! "Provably" comes from the interval analysis of the function's integer scalars
//! ([`lnc_lir::ranges`]). A loop qualifies when `hi(ub) + step` still fits in `i32`: then
//! no step of its index wraps, and the `i64` copy equals the sign extension of the index
//! on every iteration.
//!
//! Every other loop must still stop where Python's `range` stops ([`Stepping`]): an index
//! of at most 32 bits steps in `i64` too, only its addressing stays on the `i32` index;
//! a 64-bit index compares the distance left to the bound with the step.

use cranelift_codegen::ir::Value;
use lnc_lir::ranges::{Ranges, const_int};
use lnc_lir::{self as lir, BinOp, DType, Opcode, Ty, ValueDef};

use crate::base::FunctionCx;

/// How the index of a `for` loop steps. Python's `range`, which Triton's loops follow,
/// stops at the bound even where the next index would not fit the index's type; the
/// index must then not wrap around into the range again (a loop `range(0, n, 1024)` with
/// `n` near `2**31` would run forever, and a bounds check hoisted in front of the loop
/// would not cover the wrapped indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stepping {
    /// A constant positive step whose index provably never wraps ([`wide_step`]): the
    /// loop runs its index in `i64` and its `i64` copy serves addressing.
    Wide(i64),
    /// An index of at most 32 bits stepped in `i64` (sign- or zero-extended by its
    /// signedness), where the step past the bound cannot wrap.
    Extended,
    /// A 64-bit index: the loop goes on while the distance left to the bound is longer
    /// than the step (an unsigned comparison, which no sum can wrap).
    Checked,
}

/// How the index of `for` instruction `l` steps.
pub(crate) fn stepping(f: &lir::Function, ranges: &Ranges, l: lir::Inst) -> Stepping {
    if f.ty(f.insts[l].args[0]).dtype().bits() == 64 {
        return Stepping::Checked;
    }
    wide_step(f, ranges, l).map_or(Stepping::Extended, Stepping::Wide)
}

/// The constant positive step of `for` instruction `l` when its index runs in `i64`.
pub(crate) fn wide_step(f: &lir::Function, ranges: &Ranges, l: lir::Inst) -> Option<i64> {
    let d = &f.insts[l];
    let iv = d.regions[0].args[0];
    let step = const_int(f, d.args[2]).filter(|&s| s > 0)?;
    let (_, hi_ub) = ranges.of(f, d.args[1]);
    let known = ranges.known(iv);
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
    if !fx.ranges.known(v) {
        return None;
    }
    Some((idx, c))
}
