//! Helpers of the loop-IR to loop-IR passes ([`bounds`](crate::bounds),
//! [`accum`](crate::accum)): constants, definitions, parents of loops, and cloning of
//! regions with the masks known to be all-true simplified away.

use std::collections::{HashMap, HashSet};

use lnc_lir::{Addressing, BinOp, Const, DType, Function, Inst, Opcode, Region, Ty, Value, ValueDef};

/// Where an instruction sits: the function's body (`None`) or region `r` of an instruction.
pub(crate) type Parent = Option<(Inst, usize)>;

/// The instruction defining a value (none for region arguments).
pub(crate) fn def(f: &Function, v: Value) -> Option<Inst> {
    match f.values[v].def {
        ValueDef::Result(i, _) => Some(i),
        ValueDef::RegionArg(..) => None,
    }
}

/// The constant a value is, if it is one.
pub(crate) fn const_of(f: &Function, v: Value) -> Option<Const> {
    match f.insts[def(f, v)?].opcode {
        Opcode::Const(c) => Some(c),
        _ => None,
    }
}

/// The integer constant a value is, if it is one.
pub(crate) fn int_of(f: &Function, v: Value) -> Option<i64> {
    match const_of(f, v)? {
        Const::Int(k) => Some(k),
        Const::Float(_) => None,
    }
}

/// A scalar constant defined at the function's entry (reusing an existing one).
pub(crate) fn konst(f: &mut Function, d: DType, c: Const) -> Value {
    let ty = Ty::Scalar(d);
    for &i in &f.body.insts {
        let data = &f.insts[i];
        if let Opcode::Const(k) = data.opcode
            && f.values[data.results[0]].ty == ty
            && same_const(k, c)
        {
            return data.results[0];
        }
    }
    let i = f.create_inst(Opcode::Const(c), vec![], &[ty], lnc_diag::Span::DUMMY);
    let pos = f
        .body
        .insts
        .iter()
        .take_while(|&&j| matches!(f.insts[j].opcode, Opcode::Arg(_) | Opcode::Const(_)))
        .count();
    f.body.insts.insert(pos, i);
    f.insts[i].results[0]
}

fn same_const(a: Const, b: Const) -> bool {
    match (a, b) {
        (Const::Int(x), Const::Int(y)) => x == y,
        (Const::Float(x), Const::Float(y)) => x.to_bits() == y.to_bits(),
        _ => false,
    }
}

/// The parent of every instruction reachable from the body.
pub(crate) fn parents(f: &Function) -> HashMap<Inst, Parent> {
    fn go(f: &Function, r: &Region, parent: Parent, out: &mut HashMap<Inst, Parent>) {
        for &i in &r.insts {
            out.insert(i, parent);
            for (k, sub) in f.insts[i].regions.iter().enumerate() {
                go(f, sub, Some((i, k)), out);
            }
        }
    }
    let mut out = HashMap::new();
    go(f, &f.body, None, &mut out);
    out
}

/// The region a parent designates.
pub(crate) fn region(f: &Function, p: Parent) -> &Region {
    match p {
        None => &f.body,
        Some((i, k)) => &f.insts[i].regions[k],
    }
}

/// The region a parent designates, to change.
pub(crate) fn region_mut(f: &mut Function, p: Parent) -> &mut Region {
    match p {
        None => &mut f.body,
        Some((i, k)) => &mut f.insts[i].regions[k],
    }
}

/// The arguments the kernel's instructions read and those they write (an atomic does
/// both), by argument index.
#[derive(Default)]
pub(crate) struct ArgAccess {
    pub(crate) read: HashSet<u32>,
    pub(crate) written: HashSet<u32>,
}

impl ArgAccess {
    pub(crate) fn of(f: &Function) -> ArgAccess {
        let mut a = ArgAccess::default();
        f.walk(|i| {
            let (read, write, site) = match f.insts[i].opcode {
                Opcode::Load { site, .. } | Opcode::RowLoad { site, .. } => (true, false, site),
                Opcode::Store { site, .. } | Opcode::RowStore { site, .. } => (false, true, site),
                Opcode::Atomic { site, .. } | Opcode::AtomicCas { site, .. } => (true, true, site),
                _ => return,
            };
            let arg = f.sites[site as usize].arg;
            if read {
                a.read.insert(arg);
            }
            if write {
                a.written.insert(arg);
            }
        });
        a
    }
}

/// Every `for` reachable from the body, parents first.
pub(crate) fn for_loops(f: &Function) -> Vec<Inst> {
    let mut loops = Vec::new();
    f.walk(|i| {
        if f.insts[i].opcode == Opcode::For {
            loops.push(i);
        }
    });
    loops
}

/// `v` as `iv` (`Some(None)`) or `iv + t` (`Some(Some(t))`) with `t` defined outside the
/// loop (not in `inside`).
pub(crate) fn iv_plus(f: &Function, v: Value, iv: Value, inside: &HashSet<Value>) -> Option<Option<Value>> {
    term_plus(f, v, |x| x == iv, |t| !inside.contains(&t))
}

/// `v` as a term (`Some(None)`) or `term + t` (`Some(Some(t))`, either order) with `t`
/// accepted by `other`.
pub(crate) fn term_plus(
    f: &Function,
    v: Value,
    is_term: impl Fn(Value) -> bool,
    other: impl Fn(Value) -> bool,
) -> Option<Option<Value>> {
    if is_term(v) {
        return Some(None);
    }
    let d = &f.insts[def(f, v)?];
    if d.opcode != Opcode::Binary(BinOp::Add) {
        return None;
    }
    let (x, y) = (d.args[0], d.args[1]);
    let t = if is_term(x) {
        y
    } else if is_term(y) {
        x
    } else {
        return None;
    };
    other(t).then_some(Some(t))
}

/// Whether `v` is `iv` converted to an integer type at least as wide (exact: `0 <= iv <
/// extent`).
pub(crate) fn is_widened_iv(f: &Function, v: Value, iv: Value) -> bool {
    def(f, v).is_some_and(|c| {
        let d = &f.insts[c];
        d.opcode == Opcode::Cast && d.args[0] == iv && f.ty(v).dtype().bits() >= f.ty(iv).dtype().bits()
    })
}

/// Inserts `new` into region `parent` as early as their operands allow: right after the
/// last instruction of the region defining a value they use and do not define (at its
/// start when all come from outside it).
pub(crate) fn insert_after_operands(f: &mut Function, parent: Parent, new: Vec<Inst>) {
    let made: HashSet<Value> = new.iter().flat_map(|&i| f.insts[i].results.iter().copied()).collect();
    let used: HashSet<Value> =
        new.iter().flat_map(|&i| f.insts[i].args.iter().copied()).filter(|v| !made.contains(v)).collect();
    let pos = region(f, parent)
        .insts
        .iter()
        .rposition(|&i| f.insts[i].results.iter().any(|r| used.contains(r)))
        .map_or(0, |k| k + 1);
    region_mut(f, parent).insts.splice(pos..pos, new);
}

/// Inserts `new` before `at` in its parent region.
pub(crate) fn insert_before(f: &mut Function, parent: Parent, at: Inst, new: &[Inst]) {
    let r = region_mut(f, parent);
    let pos = r.insts.iter().position(|&i| i == at).expect("instruction in its parent region");
    r.insts.splice(pos..pos, new.iter().copied());
}

/// Every value defined inside `i`'s regions (arguments and results, nested ones included).
pub(crate) fn defined_inside(f: &Function, i: Inst) -> HashSet<Value> {
    let mut out = HashSet::new();
    for r in &f.insts[i].regions {
        out.extend(r.args.iter().copied());
    }
    walk_nested(f, i, &mut |j| {
        out.extend(f.insts[j].results.iter().copied());
        for r in &f.insts[j].regions {
            out.extend(r.args.iter().copied());
        }
    });
    out
}

/// Visits every instruction nested in `i`'s regions, parents first.
pub(crate) fn walk_nested(f: &Function, i: Inst, g: &mut dyn FnMut(Inst)) {
    for r in &f.insts[i].regions {
        for &j in &r.insts {
            g(j);
            walk_nested(f, j, g);
        }
    }
}

/// The values in `i`'s regions that depend on value `root` (transitively, through operands
/// and the regions of control flow taking a dependent operand).
pub(crate) fn dependents(f: &Function, i: Inst, root: Value) -> HashSet<Value> {
    /// Returns whether the region's terminator passes on a dependent value.
    fn go(f: &Function, r: &Region, deps: &mut HashSet<Value>) -> bool {
        let mut out = false;
        for &j in &r.insts {
            let d = &f.insts[j];
            let mut dep = d.args.iter().any(|a| deps.contains(a));
            if d.opcode.is_terminator() {
                out |= dep;
                continue;
            }
            if dep {
                for sub in &d.regions {
                    deps.extend(sub.args.iter().copied());
                }
            }
            for sub in &d.regions {
                dep |= go(f, sub, deps);
            }
            if dep {
                deps.extend(d.results.iter().copied());
                for sub in &d.regions {
                    deps.extend(sub.args.iter().copied());
                }
            }
        }
        out
    }
    let mut deps = HashSet::from([root]);
    loop {
        let before = deps.len();
        for r in &f.insts[i].regions {
            go(f, r, &mut deps);
        }
        if deps.len() == before {
            return deps;
        }
    }
}

/// What the clones of [`clone_insts`] compute on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lanes {
    /// The same tiles.
    Same,
    /// One lane of each tile: tiles become scalars (`iota` and `splat` their operand,
    /// accesses scalar ones). The caller makes sure nothing depends on the lane count.
    One,
}

/// Clones instructions (with their regions) into new ones, mapping operands through `map`
/// and recording the clones' values there. Values in `truthy` are i1 scalars or tiles known
/// to be all-true here: masks equal to them are dropped from accesses, `select`s on them
/// take their first value, `and`s with them are their other operand.
pub(crate) fn clone_insts(
    f: &mut Function,
    insts: &[Inst],
    map: &mut HashMap<Value, Value>,
    truthy: &mut HashSet<Value>,
    lanes: Lanes,
) -> Vec<Inst> {
    let mut out = Vec::new();
    for &i in insts {
        let data = f.insts[i].clone();
        if lanes == Lanes::One && matches!(data.opcode, Opcode::Iota | Opcode::Splat) {
            // Lane 0 of `iota(s)` is `s`, of `splat(x)` is `x`.
            if data.opcode == Opcode::Splat && truthy.contains(&data.args[0]) {
                truthy.insert(data.results[0]);
            }
            let a = *map.get(&data.args[0]).unwrap_or(&data.args[0]);
            map.insert(data.results[0], a);
            continue;
        }
        // Simplifications: the result is all-true, or one of the (mapped) operands.
        let t = |k: usize| truthy.contains(&data.args[k]);
        let (alias, now_true) = match data.opcode {
            Opcode::Binary(BinOp::And) if t(0) && t(1) => (None, true),
            Opcode::Binary(BinOp::And) if t(0) => (Some(data.args[1]), false),
            Opcode::Binary(BinOp::And) if t(1) => (Some(data.args[0]), false),
            Opcode::Binary(BinOp::Or) if t(0) || t(1) => (None, true),
            Opcode::Splat if t(0) => (None, true),
            Opcode::Select if t(0) => (Some(data.args[1]), false),
            _ => (None, false),
        };
        if now_true {
            truthy.insert(data.results[0]);
        }
        let m = |v: &Value| *map.get(v).unwrap_or(v);
        let is_true = |v: &Value| truthy.contains(v);
        if let Some(a) = alias {
            if truthy.contains(&a) {
                truthy.insert(data.results[0]);
            }
            let a = *map.get(&a).unwrap_or(&a);
            map.insert(data.results[0], a);
            continue;
        }
        let (opcode, args) = match data.opcode {
            Opcode::Load { addr, has_mask: true, site, volatile, .. } if is_true(&data.args[2]) => (
                Opcode::Load { addr, has_mask: false, has_other: false, site, volatile },
                data.args[..2].iter().map(m).collect(),
            ),
            Opcode::Store { addr, has_mask: true, site, stream: false, check_only }
                if is_true(&data.args[3]) =>
            {
                (
                    Opcode::Store { addr, has_mask: false, site, stream: false, check_only },
                    data.args[..3].iter().map(m).collect(),
                )
            }
            Opcode::Atomic { op, addr, has_mask: true, site } if is_true(&data.args[3]) => {
                (Opcode::Atomic { op, addr, has_mask: false, site }, data.args[..3].iter().map(m).collect())
            }
            op => (op, data.args.iter().map(m).collect()),
        };
        let opcode = if lanes == Lanes::One { one_lane(opcode) } else { opcode };
        let tys: Vec<Ty> = data
            .results
            .iter()
            .map(|&r| match (lanes, f.ty(r)) {
                (Lanes::One, Ty::Tile(d, _)) => Ty::Scalar(d),
                (_, ty) => ty,
            })
            .collect();
        let span = f.spans[i];
        let n = f.create_inst(opcode, args, &tys, span);
        for (k, &r) in data.results.iter().enumerate() {
            let nr = f.insts[n].results[k];
            map.insert(r, nr);
        }
        let mut regions = Vec::new();
        for (k, r) in data.regions.iter().enumerate() {
            let mut args = Vec::new();
            for (idx, &a) in r.args.iter().enumerate() {
                let na = f.create_region_arg(n, k as u32, idx as u32, f.ty(a));
                map.insert(a, na);
                args.push(na);
            }
            let insts = clone_insts(f, &r.insts, map, truthy, lanes);
            regions.push(Region { args, insts });
        }
        f.insts[n].regions = regions;
        out.push(n);
    }
    out
}

/// An access of one lane: scalar addressing.
fn one_lane(op: Opcode) -> Opcode {
    match op {
        Opcode::Load { has_mask, has_other, site, volatile, .. } => {
            Opcode::Load { addr: Addressing::Scalar, has_mask, has_other, site, volatile }
        }
        Opcode::Store { has_mask, site, check_only, .. } => {
            Opcode::Store { addr: Addressing::Scalar, has_mask, site, stream: false, check_only }
        }
        Opcode::Atomic { op, has_mask, site, .. } => {
            Opcode::Atomic { op, addr: Addressing::Scalar, has_mask, site }
        }
        Opcode::AtomicCas { site, .. } => Opcode::AtomicCas { addr: Addressing::Scalar, site },
        op => op,
    }
}

/// Replaces every use of the keys of `map` by their values.
pub(crate) fn replace_uses(f: &mut Function, map: &HashMap<Value, Value>) {
    let mut live = Vec::new();
    f.walk(|i| live.push(i));
    for i in live {
        for a in &mut f.insts[i].args {
            if let Some(&to) = map.get(a) {
                *a = to;
            }
        }
    }
}
