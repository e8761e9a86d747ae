//! Locks chosen by program id: which atomics address `arg + program_id(0) % G` (plus
//! constants), the seed backward's `row % GROUP_SIZE_M` locks. Module `defer` moves
//! stores past such a lock when it is one of many; [`program_groups`] tells the runtime
//! that programs of different groups never wait for each other
//! (lnc-runtime's `Programs::Grouped`).

use std::collections::{HashMap, HashSet};

use lnc_bir::{BinOp, Const, Function, Opcode, Value, ValueDef};

use crate::provenance::Provenance;

/// `G` when the programs of `f` touch their locks only by group: every atomic and
/// volatile load (one at least), and every other access to an argument one of them
/// addresses, is of a scalar `arg + program_id(0) % G + c` (`c` a sum of constants), with
/// one constant `G` of 2 or more, and the constants `c` of one argument are equal or at
/// least `G` apart (`Lock + r` and `Lock + G + r`, the seed's lock and count): then a
/// word is touched by the programs of one residue `r` only, and programs of different
/// groups never wait for each other.
pub(crate) fn program_groups(f: &Function, prov: &Provenance) -> Option<i64> {
    let mut locked = HashSet::new();
    f.walk(|i| {
        let data = f.inst(i);
        if matches!(
            data.opcode,
            Opcode::Atomic { .. } | Opcode::AtomicCas | Opcode::Load { volatile: true, .. }
        ) {
            locked.insert(prov.root(data.args[0]));
        }
    });
    let mut groups = None;
    let mut offsets: HashMap<u32, Vec<i64>> = HashMap::new();
    let mut all = !locked.is_empty();
    f.walk(|i| {
        let data = f.inst(i);
        if !matches!(
            data.opcode,
            Opcode::Atomic { .. } | Opcode::AtomicCas | Opcode::Load { .. } | Opcode::Store { .. }
        ) || !locked.contains(&prov.root(data.args[0]))
        {
            return;
        }
        match lock_address(f, data.args[0]) {
            Some((g, c)) if *groups.get_or_insert(g) == g => {
                offsets.entry(prov.root(data.args[0])).or_default().push(c)
            }
            _ => all = false,
        }
    });
    let g = groups.filter(|&g| all && g >= 2)?;
    let apart =
        offsets.values().all(|cs| cs.iter().all(|&a| cs.iter().all(|&b| a == b || (a - b).abs() >= g)));
    apart.then_some(g)
}

/// `G` when the scalar pointer `p` is an argument plus `program_id(0) % G` (`G` a
/// constant) plus constants, added in any grouping.
pub(crate) fn lock_groups(f: &Function, p: Value) -> Option<i64> {
    lock_address(f, p).map(|(g, _)| g)
}

/// `(G, c)` when the scalar pointer `p` is an argument plus `program_id(0) % G` (`G` a
/// constant) plus constants summing to `c`, added in any grouping.
fn lock_address(f: &Function, mut p: Value) -> Option<(i64, i64)> {
    if !f.ty(p).shape.is_scalar() {
        return None;
    }
    let (mut groups, mut c) = (None, 0i64);
    loop {
        match f.values[p].def {
            ValueDef::Param(_) => return groups.map(|g| (g, c)),
            ValueDef::Result(i, 0) if f.inst(i).opcode == Opcode::PtrAdd => {
                let (g, k) = offset_groups(f, f.inst(i).args[1])?;
                if let Some(g) = g
                    && groups.replace(g).is_some()
                {
                    return None;
                }
                c = c.checked_add(k)?;
                p = f.inst(i).args[0];
            }
            _ => return None,
        }
    }
}

/// For an offset that is constants and at most one `program_id(0) % G` added together:
/// `Some((Some(G), c))` with that term, `Some((None, c))` without it, `c` the sum of the
/// constants; `None` for anything else.
fn offset_groups(f: &Function, v: Value) -> Option<(Option<i64>, i64)> {
    if let Some(c) = int_const(f, v) {
        return Some((None, c));
    }
    if let Some(g) = pid_modulus(f, v) {
        return Some((Some(g), 0));
    }
    let ValueDef::Result(i, 0) = f.values[v].def else { return None };
    let data = f.inst(i);
    if data.opcode != Opcode::Binary(BinOp::Add) {
        return None;
    }
    match (offset_groups(f, data.args[0])?, offset_groups(f, data.args[1])?) {
        ((Some(_), _), (Some(_), _)) => None,
        ((a, x), (b, y)) => Some((a.or(b), x.checked_add(y)?)),
    }
}

/// `G` when `v` is `program_id(0) % G` for a constant `G`. (Another axis may have one
/// program in a launch, which would make every program take the same lock.)
fn pid_modulus(f: &Function, v: Value) -> Option<i64> {
    let ValueDef::Result(i, 0) = f.values[v].def else { return None };
    let data = f.inst(i);
    if data.opcode != Opcode::Binary(BinOp::Rem) {
        return None;
    }
    let ValueDef::Result(p, 0) = f.values[data.args[0]].def else { return None };
    matches!(f.inst(p).opcode, Opcode::ProgramId(0)).then_some(())?;
    int_const(f, data.args[1])
}

fn int_const(f: &Function, v: Value) -> Option<i64> {
    match f.values[v].def {
        ValueDef::Result(i, 0) => match f.inst(i).opcode {
            Opcode::Const(Const::Int(c)) => Some(c),
            _ => None,
        },
        _ => None,
    }
}
