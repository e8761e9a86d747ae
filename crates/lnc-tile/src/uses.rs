//! Uses: which instructions consume each block, through the elementwise DAG.
//!
//! A *lazy* instruction produces a block that is never stored anywhere by itself: it is
//! computed per tile inside the loops of the instructions that consume it (elementwise
//! ops, `arange`, `splat`, shape changes, loads of blocks, reductions of a 2-D block to a
//! block). Every other instruction that uses a block is a *consumer*: a sink (reduction
//! to a scalar, store, atomic, assert), a terminator passing the block on, a control-flow
//! instruction taking it as an init.
//!
//! `consumers(v)` is the set of consumers reached from `v` through lazy instructions,
//! wherever they are nested. The scheduler asks it "does anything outside this loop still
//! need `v`?" to decide what to keep in scratch.

use std::collections::{BTreeSet, HashMap};

use lnc_bir::{Function, Inst, Opcode, Value};

/// Consumers of every block value.
pub(crate) struct Uses {
    consumers: HashMap<Value, BTreeSet<Inst>>,
}

impl Uses {
    /// The consumers of block `v` (empty for values nothing consumes).
    pub(crate) fn consumers(&self, v: Value) -> impl Iterator<Item = Inst> + '_ {
        self.consumers.get(&v).into_iter().flatten().copied()
    }
}

/// True when `i` produces a block that its consumers compute per tile.
pub(crate) fn is_lazy(f: &Function, i: Inst) -> bool {
    let data = f.inst(i);
    let Some(&r) = data.results.first() else {
        return false;
    };
    if !f.ty(r).is_block() {
        return false;
    }
    match data.opcode {
        Opcode::Arange { .. }
        | Opcode::Splat
        | Opcode::Broadcast
        | Opcode::ExpandDims(_)
        | Opcode::Binary(_)
        | Opcode::Cmp(_)
        | Opcode::Unary(_)
        | Opcode::Select
        | Opcode::Fma
        | Opcode::Cast
        | Opcode::Bitcast
        | Opcode::PtrAdd
        | Opcode::Load { .. } => true,
        Opcode::Reduce { .. } => f.ty(r).shape.numel() > 1,
        _ => false,
    }
}

pub(crate) fn analyze(f: &Function) -> Uses {
    let order = f.live_insts();
    let mut consumers: HashMap<Value, BTreeSet<Inst>> = HashMap::new();
    // Users come after definitions in program order (nested regions after their owner),
    // so walking backwards completes a result's consumers before its operands need them.
    for &i in order.iter().rev() {
        let data = f.inst(i);
        let through: BTreeSet<Inst> = if is_lazy(f, i) {
            consumers.get(&data.results[0]).cloned().unwrap_or_default()
        } else {
            BTreeSet::from([i])
        };
        for &a in &data.args {
            if f.ty(a).is_block() {
                consumers.entry(a).or_default().extend(through.iter().copied());
            }
        }
    }
    Uses { consumers }
}
