//! Masks to loop bounds: a tile loop whose masks test `base + iv + lane < n` (the
//! seeds' `cols < N`, also inside `&` with other conditions) is split in two.
//!
//! ```text
//! for iv = 0 to E step L iter(a) { … mask P … }
//! =>
//! nb   = min(max(n - base, 0), E)          ; in i64, so nothing wraps
//! full = nb & -L
//! a1   = for iv = 0 to full step L iter(a) { … P replaced by true: no masks … }
//! a2   = for iv = full to TUB step L iter(a1) { … mask P … }    ; the tail
//! ```
//!
//! Every tile of the first loop has all lanes of `P` true, so its loads and stores lose
//! their mask, `select(P, x, y)` is `x` and `P & q` is `q`. The tail loop is the original
//! loop from `full` on. It stops at `TUB = (nb + L - 1) & -L` (at most one tile) when the
//! tiles past `n` are proved to do nothing: every lane of `P` is false there, so masked
//! loads give their `other`, masked stores do nothing, each reduction adds the neutral
//! element (`tl.load(..., other=0)` summed), and the scratch it writes is read only at
//! positions below `n` (by loops dropping the same tiles). Otherwise `TUB = E` and
//! those tiles run with their masks, as before.
//!
//! A droppable tail becomes a loop over scalars from `full` to `nb`; where its body
//! qualifies, in tiles of 16 lanes or more, the row's last whole tile runs it instead and
//! the scalars only rows shorter than a tile (module `overlap`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use lnc_lir::{BinOp, CmpOp, Const, DType, Function, Inst, Opcode, ReduceOp, Ty, Value};

use crate::rewrite::{
    Lanes, Parent, clone_insts, const_of, def, defined_inside, dependents, insert_before, int_of,
    is_widened_iv, iv_plus, konst, parents, replace_uses, term_plus, walk_nested,
};

/// What a loop's bound predicate compares: `base + iv + lane < n` over `extent` in steps,
/// in `dt` (`iv` is widened to `i64` when the offsets are `i64` and the loop's index is
/// not: `off + tl.arange(...)` with a 64-bit `off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) n: Value,
    pub(crate) base: Option<Value>,
    pub(crate) extent: i64,
    pub(crate) step: i64,
    pub(crate) dt: DType,
}

impl Key {
    /// Whether `base + iv + lane` may wrap around for some `iv` of the loop, in a 64-bit
    /// comparison: a base within `extent` of its type's maximum. The lanes past the wrap
    /// are negative and pass the predicate, so it is not `iv + lane < nb` for any count
    /// `nb`; the split then guards its steady loop at run time ([`Key::no_wrap`]). (32-bit
    /// comparisons, as the seed kernels' are, are split without that guard.)
    pub(crate) fn may_wrap(&self) -> bool {
        self.dt == DType::I64 && self.base.is_some()
    }

    /// `base <= MAX - (extent - 1)` in the base's type (`i64`, or `i32` for `i64(iv + base)`):
    /// no lane of the loop wraps. `None` when none can.
    fn no_wrap(&self, f: &mut Function, emit: &mut Emit<'_>) -> Option<Value> {
        let base = self.base.filter(|_| self.may_wrap())?;
        let bt = f.ty(base).dtype();
        let max = if bt == DType::I64 { i64::MAX } else { i64::from(i32::MAX) };
        let limit = konst(f, bt, Const::Int(max - (self.extent - 1)));
        Some(emit(f, Opcode::Cmp(CmpOp::Le), vec![base, limit], Ty::Scalar(DType::I1)))
    }
}

struct Cand {
    inst: Inst,
    key: Key,
    droppable: bool,
    /// Scratch slots written by the loop's body.
    writes: Vec<u32>,
    /// Carried float sums to which the tiles past `n` add `+0.0` (see [`zero_sums`]).
    zero_sums: Vec<usize>,
}

/// Splits every loop with a bound predicate into a steady state and a tail.
pub(crate) fn run(f: &mut Function) {
    let top: HashSet<Value> = f.body.insts.iter().flat_map(|&i| f.insts[i].results.clone()).collect();
    let mut cands = Vec::new();
    let mut order = Vec::new();
    post_order(f, &f.body.insts.clone(), &mut order);
    for l in order {
        if let Some((key, pset)) = candidate(f, l) {
            let at_top = top.contains(&key.n) && key.base.is_none_or(|b| top.contains(&b));
            let dropped = local_drop(f, l, &pset);
            // A scalar loop's droppable tail is removed outright, which a run-time guard
            // against wrapping could not bring back.
            let droppable = dropped.as_ref().is_some_and(|(w, _)| w.is_empty() || at_top)
                && !(key.may_wrap() && key.step == 1);
            let (writes, zero_sums) = dropped.unwrap_or_default();
            cands.push(Cand { inst: l, key, droppable, writes, zero_sums });
        }
    }
    // Scratch reads: the innermost candidate around each, when its index is `iv + t`.
    let mut reads: Vec<(u32, Option<usize>)> = Vec::new();
    collect_reads(f, &f.body.insts.clone(), &cands, None, &mut reads);
    // Greatest fixpoint: a loop drops its tiles past `n` only if every read of the scratch
    // it writes is in a loop dropping the same tiles.
    loop {
        let mut changed = false;
        for c in 0..cands.len() {
            if !cands[c].droppable {
                continue;
            }
            let ok = cands[c].writes.iter().all(|s| {
                reads
                    .iter()
                    .filter(|(slot, _)| slot == s)
                    .all(|&(_, r)| r.is_some_and(|r| cands[r].droppable && cands[r].key == cands[c].key))
            });
            if !ok {
                cands[c].droppable = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let parent = parents(f);
    // The arguments the kernel reads: the splits clone accesses, never add arguments.
    let read = crate::rewrite::ArgAccess::of(f).read;
    for c in &cands {
        split(f, c, parent[&c.inst], &read);
    }
}

fn post_order(f: &Function, insts: &[Inst], out: &mut Vec<Inst>) {
    for &i in insts {
        for r in &f.insts[i].regions {
            post_order(f, &r.insts, out);
        }
        if f.insts[i].opcode == Opcode::For {
            out.push(i);
        }
    }
}

/// A `for iv = 0 to E step L` whose body tests a bound predicate: its key and the
/// predicate's values.
pub(crate) fn candidate(f: &Function, l: Inst) -> Option<(Key, HashSet<Value>)> {
    let d = &f.insts[l];
    if d.opcode != Opcode::For || int_of(f, d.args[0]) != Some(0) {
        return None;
    }
    let (extent, step) = (int_of(f, d.args[1])?, int_of(f, d.args[2])?);
    if extent <= 0 || step <= 0 || extent % step != 0 || step > 64 {
        return None;
    }
    let iv = d.regions[0].args[0];
    let inside = defined_inside(f, l);
    let mut key = None;
    let mut pset = HashSet::new();
    walk_nested(f, l, &mut |j| {
        if let Some(k) = match_bound(f, j, iv, &inside, extent, step)
            && *key.get_or_insert(k) == k
        {
            pset.insert(f.insts[j].results[0]);
        }
    });
    key.map(|k| (k, pset))
}

/// `iota(s) < splat(n)` (or `s < n` for scalar loops) with `s = iv` or `iv + base`, `n`
/// and `base` defined outside the loop, signed integers.
fn match_bound(
    f: &Function,
    j: Inst,
    iv: Value,
    inside: &HashSet<Value>,
    extent: i64,
    step: i64,
) -> Option<Key> {
    let d = &f.insts[j];
    let (a, b) = match d.opcode {
        Opcode::Cmp(CmpOp::Lt) => (d.args[0], d.args[1]),
        Opcode::Cmp(CmpOp::Gt) => (d.args[1], d.args[0]),
        _ => return None,
    };
    let dt = f.ty(a).dtype();
    if !matches!(dt, DType::I32 | DType::I64) {
        return None;
    }
    let (s, n) = if step > 1 {
        let (ia, ib) = (def(f, a)?, def(f, b)?);
        if f.ty(a) != Ty::Tile(dt, step as u8)
            || f.insts[ia].opcode != Opcode::Iota
            || f.insts[ib].opcode != Opcode::Splat
        {
            return None;
        }
        (f.insts[ia].args[0], f.insts[ib].args[0])
    } else {
        if f.ty(a).is_tile() {
            return None;
        }
        (a, b)
    };
    if inside.contains(&n) {
        return None;
    }
    let base = if f.ty(iv).dtype() == dt {
        iv_plus(f, s, iv, inside)?
    } else if dt == DType::I64 && f.ty(iv).dtype() == DType::I32 {
        widened_iv_plus(f, s, iv, inside)?
    } else {
        return None;
    };
    Some(Key { n, base, extent, step, dt })
}

/// For a 32-bit `iv` and 64-bit `v`: `Some(None)` when `v` is `iv` widened, `Some(Some(b))`
/// when it is that plus `b` (64-bit) or `iv + b` widened (`b` 32-bit), `b` defined outside
/// the loop. Widening `iv` is exact (`0 <= iv < extent`); `iv + b` is where it does not
/// wrap, which the split checks at run time ([`Key::no_wrap`]).
fn widened_iv_plus(f: &Function, v: Value, iv: Value, inside: &HashSet<Value>) -> Option<Option<Value>> {
    let d = &f.insts[def(f, v)?];
    if d.opcode == Opcode::Cast && f.ty(d.args[0]) == Ty::Scalar(DType::I32) {
        return iv_plus(f, d.args[0], iv, inside);
    }
    term_plus(f, v, |x| is_widened_iv(f, x, iv), |t| !inside.contains(&t))
}

/// An abstract lane value of the tiles past `n`: a known constant or anything.
type Abs = Option<Const>;

/// Whether the tiles of `l` past `n` do nothing; then the scratch slots they write.
fn local_drop(f: &Function, l: Inst, pset: &HashSet<Value>) -> Option<(Vec<u32>, Vec<usize>)> {
    let body = &f.insts[l].regions[0];
    let cx = DropCx {
        pset,
        iv: body.args[0],
        step: int_of(f, f.insts[l].args[2])?,
        deps: dependents(f, l, body.args[0]),
        zero_sums: RefCell::new(Vec::new()),
    };
    let mut env = HashMap::new();
    let mut writes = Vec::new();
    scan(f, &body.insts, Some(&body.args[1..]), &cx, &mut env, &mut writes)?;
    Some((writes, cx.zero_sums.into_inner()))
}

/// What [`scan`] knows of the loop being dropped.
struct DropCx<'a> {
    pset: &'a HashSet<Value>,
    iv: Value,
    step: i64,
    deps: HashSet<Value>,
    /// Carried float sums whose step adds `+0.0` on the tiles past `n`.
    zero_sums: RefCell<Vec<usize>>,
}

/// Evaluates `insts` on the tiles past `n`; `None` when they may do something. `carried`
/// are the carried values of the loop being dropped (`None`: a loop nested in it, whose
/// results are unknown but harmless).
fn scan(
    f: &Function,
    insts: &[Inst],
    carried: Option<&[Value]>,
    cx: &DropCx,
    env: &mut HashMap<Value, Abs>,
    writes: &mut Vec<u32>,
) -> Option<()> {
    let abs = |env: &HashMap<Value, Abs>, v: Value| -> Abs {
        if cx.pset.contains(&v) {
            return Some(Const::Int(0));
        }
        match env.get(&v) {
            Some(a) => *a,
            None => const_of(f, v),
        }
    };
    let is_false = |a: Abs| a == Some(Const::Int(0));
    for &j in insts {
        let d = &f.insts[j];
        let a = |k: usize| abs(env, d.args[k]);
        let r: Abs = match d.opcode {
            Opcode::Const(c) => Some(c),
            Opcode::Splat => a(0),
            // A zero stays zero through a numeric conversion (`other=0.` loaded as fp16
            // and widened to fp32).
            Opcode::Cast
                if matches!(a(0), Some(Const::Int(0)))
                    || matches!(a(0), Some(Const::Float(z)) if z == 0.0) =>
            {
                let float = f.ty(d.results[0]).dtype().is_float();
                // The sign of a float zero survives (an integer zero becomes `+0.0`).
                Some(match a(0) {
                    Some(Const::Float(z)) if float => Const::Float(z),
                    _ if float => Const::Float(0.0),
                    _ => Const::Int(0),
                })
            }
            Opcode::Binary(op) => fold(op, f.ty(d.args[0]).dtype(), a(0), a(1)),
            Opcode::Select if is_false(a(0)) => a(2),
            Opcode::Select if a(0) == Some(Const::Int(1)) => a(1),
            Opcode::Load { has_mask: true, has_other, .. } if is_false(a(2)) => {
                if has_other {
                    a(3)
                } else if f.ty(d.results[0]).dtype().is_float() {
                    Some(Const::Float(0.0))
                } else {
                    Some(Const::Int(0))
                }
            }
            Opcode::Store { has_mask: true, .. } if is_false(a(3)) => continue,
            Opcode::Atomic { has_mask: true, .. } if is_false(a(3)) => None,
            Opcode::ScratchStore(slot) => {
                // `s[i] = s[i] ⊕ e` with `e` neutral writes what is there already.
                if rewrites_itself(f, slot, d.args[0], d.args[1], &|v| abs(env, v)) {
                    continue;
                }
                let whole_tile = f.ty(d.args[1]).lanes() as i64 == cx.step;
                if carried.is_none() || !iv_based(f, d.args[0], cx.iv, &cx.deps) || !whole_tile {
                    return None;
                }
                writes.push(slot);
                continue;
            }
            Opcode::For if pure_loop(f, j) => None,
            // A loop nested in the dropped one: dropped with it if its body does nothing.
            Opcode::For => {
                scan(f, &d.regions[0].insts, None, cx, env, writes)?;
                None
            }
            Opcode::Yield => {
                let Some(carried) = carried else { continue };
                for (k, &y) in d.args.iter().enumerate() {
                    if y == carried[k] {
                        continue;
                    }
                    if !neutral_step(f, y, carried[k], &|v| abs(env, v)) {
                        return None;
                    }
                    if adds_positive_zero(f, y, carried[k], &|v| abs(env, v)) {
                        cx.zero_sums.borrow_mut().push(k);
                    }
                }
                continue;
            }
            op if op.is_pure() => None,
            _ => return None,
        };
        for &res in &d.results {
            env.insert(res, r);
        }
    }
    Some(())
}

/// `y = acc ⊕ x` with `x` the neutral element of `⊕` on every lane.
fn neutral_step(f: &Function, y: Value, acc: Value, abs: &dyn Fn(Value) -> Abs) -> bool {
    let Some(i) = def(f, y) else { return false };
    let d = &f.insts[i];
    let op = match d.opcode {
        Opcode::Binary(BinOp::Add) => ReduceOp::Sum,
        Opcode::Binary(BinOp::Max) => ReduceOp::Max,
        Opcode::Binary(BinOp::Min) => ReduceOp::Min,
        _ => return false,
    };
    let x = match (d.args[0] == acc, d.args[1] == acc) {
        (true, _) => d.args[1],
        (_, true) => d.args[0],
        _ => return false,
    };
    let dt = f.ty(y).dtype();
    match (abs(x), crate::emit::neutral(op, dt)) {
        // `+0.0` and `-0.0` leave a sum unchanged (up to the sign of a zero sum).
        (Some(Const::Float(a)), Const::Float(b)) => a == b,
        (Some(Const::Int(a)), Const::Int(b)) => dt.wrap_int(a) == dt.wrap_int(b),
        _ => false,
    }
}

/// `y = acc + x` with `x` a float `+0.0` on every lane: neutral for the value of a sum,
/// but not for the sign of a zero one (`-0.0 + +0.0 = +0.0`).
fn adds_positive_zero(f: &Function, y: Value, acc: Value, abs: &dyn Fn(Value) -> Abs) -> bool {
    let Some(i) = def(f, y) else { return false };
    let d = &f.insts[i];
    if d.opcode != Opcode::Binary(BinOp::Add) || !f.ty(y).dtype().is_float() {
        return false;
    }
    let x = if d.args[0] == acc { d.args[1] } else { d.args[0] };
    matches!(abs(x), Some(Const::Float(z)) if z == 0.0 && z.is_sign_positive())
}

/// `value = scratch_load(slot)[index] ⊕ e`, `e` the neutral element of `⊕`.
fn rewrites_itself(f: &Function, slot: u32, index: Value, value: Value, abs: &dyn Fn(Value) -> Abs) -> bool {
    let Some(i) = def(f, value) else { return false };
    f.insts[i].args.iter().any(|&a| {
        def(f, a).is_some_and(|j| {
            let d = &f.insts[j];
            d.opcode == Opcode::ScratchLoad(slot) && d.args[0] == index && neutral_step(f, value, a, abs)
        })
    })
}

/// Constant folding of the lanes past `n`.
fn fold(op: BinOp, d: DType, a: Abs, b: Abs) -> Abs {
    match (a, b) {
        (Some(Const::Int(0)), _) | (_, Some(Const::Int(0))) if op == BinOp::And && d.is_int() => {
            Some(Const::Int(0))
        }
        (Some(Const::Int(x)), Some(Const::Int(y))) if d.is_int() => {
            let r = match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                BinOp::And => x & y,
                BinOp::Or => x | y,
                _ => return None,
            };
            Some(Const::Int(d.wrap_int(r)))
        }
        (Some(Const::Float(x)), Some(Const::Float(y))) if matches!(d, DType::F32 | DType::F64) => {
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                _ => return None,
            };
            let r = if d == DType::F32 { r as f32 as f64 } else { r };
            Some(Const::Float(r))
        }
        _ => None,
    }
}

/// A loop whose body only computes (pure instructions, scratch reads, pure loops).
fn pure_loop(f: &Function, l: Inst) -> bool {
    let mut ok = true;
    walk_nested(f, l, &mut |j| {
        let op = f.insts[j].opcode;
        ok &= op.is_pure() || op == Opcode::Yield || op == Opcode::For;
    });
    ok
}

/// `idx = iv` or `iv + t` with `t` independent of `iv`.
fn iv_based(f: &Function, idx: Value, iv: Value, deps: &HashSet<Value>) -> bool {
    if idx == iv {
        return true;
    }
    let Some(i) = def(f, idx) else { return false };
    let d = &f.insts[i];
    d.opcode == Opcode::Binary(BinOp::Add)
        && ((d.args[0] == iv && !deps.contains(&d.args[1]))
            || (d.args[1] == iv && !deps.contains(&d.args[0])))
}

/// Every scratch read, with the innermost candidate loop around it when its index is
/// `iv + t` in that loop.
fn collect_reads(
    f: &Function,
    insts: &[Inst],
    cands: &[Cand],
    around: Option<usize>,
    out: &mut Vec<(u32, Option<usize>)>,
) {
    for &i in insts {
        let d = &f.insts[i];
        if let Opcode::ScratchLoad(slot) = d.opcode {
            let ok = around.filter(|&c| {
                let l = cands[c].inst;
                let iv = f.insts[l].regions[0].args[0];
                let lanes_ok = f.ty(d.results[0]).lanes() as i64 == cands[c].key.step;
                lanes_ok && iv_based(f, d.args[0], iv, &dependents(f, l, iv))
            });
            out.push((slot, ok));
        }
        let inner = cands.iter().position(|c| c.inst == i).or(around);
        for r in &d.regions {
            collect_reads(f, &r.insts, cands, inner, out);
        }
    }
}

/// Appends a new instruction with one result, returning it.
pub(crate) type Emit<'e> = dyn FnMut(&mut Function, Opcode, Vec<Value>, Ty) -> Value + 'e;

/// Splits candidate loop `c` (see the module documentation).
fn split(f: &mut Function, c: &Cand, parent: Parent, read: &HashSet<u32>) {
    let l = c.inst;
    // Predicates re-found now: inner loops were split before and cloned them.
    let iv = f.insts[l].regions[0].args[0];
    let inside = defined_inside(f, l);
    let mut pset = HashSet::new();
    walk_nested(f, l, &mut |j| {
        if match_bound(f, j, iv, &inside, c.key.extent, c.key.step) == Some(c.key) {
            pset.insert(f.insts[j].results[0]);
        }
    });
    let span = f.spans[l];
    let mut new = Vec::new();
    let mut emit = |f: &mut Function, op: Opcode, args: Vec<Value>, ty: Ty| -> Value {
        let i = f.create_inst(op, args, &[ty], span);
        new.push(i);
        f.insts[i].results[0]
    };
    let i32t = Ty::Scalar(DType::I32);
    let nb = enabled_count(f, &c.key, &mut emit);
    let no_wrap = c.key.no_wrap(f, &mut emit);
    let (full, tub) = if c.key.step == 1 {
        (nb, if c.droppable { nb } else { f.insts[l].args[1] })
    } else {
        let m = konst(f, DType::I32, Const::Int(-c.key.step));
        let full = emit(f, Opcode::Binary(BinOp::And), vec![nb, m], i32t);
        let tub = if c.droppable {
            let k = konst(f, DType::I32, Const::Int(c.key.step - 1));
            let up = emit(f, Opcode::Binary(BinOp::Add), vec![nb, k], i32t);
            emit(f, Opcode::Binary(BinOp::And), vec![up, m], i32t)
        } else {
            f.insts[l].args[1]
        };
        (full, tub)
    };
    // Where a lane wraps, the steady loop runs no tile and the tail all of them, masked.
    let (full, tub) = match no_wrap {
        Some(ok) => {
            let zero = konst(f, DType::I32, Const::Int(0));
            let full = emit(f, Opcode::Select, vec![ok, full, zero], i32t);
            let tub = emit(f, Opcode::Select, vec![ok, tub, f.insts[l].args[1]], i32t);
            (full, tub)
        }
        None => (full, tub),
    };
    // The tail's last tile (module `overlap`), built from the body before it becomes the
    // scalar tail, its bounds computed before the steady loop: a range check of the whole
    // pass made there covers it.
    let overlap = if c.droppable && c.key.step > 1 && no_wrap.is_none() {
        crate::overlap::tail(f, l, parent, read, [full, nb], &pset)
    } else {
        None
    };
    if let Some(t) = &overlap {
        new.extend(t.pre.iter().copied());
    }
    // The steady loop: a clone of the loop up to `full`, the predicate all-true.
    let mut map = HashMap::new();
    let mut truthy = pset.clone();
    let steady = clone_insts(f, &[l], &mut map, &mut truthy, Lanes::Same)[0];
    f.insts[steady].args[1] = full;
    new.push(steady);
    let results = f.insts[steady].results.clone();
    let args = &mut f.insts[l].args;
    args[0] = full;
    args[1] = tub;
    args.truncate(3);
    args.extend(results.iter().copied());
    // The scalar tail runs up to `nb`, which is no bound where a lane wraps; where the
    // row holds a whole tile, the tail is instead its last tile (module `overlap`).
    if c.droppable && c.key.step > 1 && no_wrap.is_none() {
        new.extend(scalar_tail(f, l, nb, &pset).unwrap_or_default());
        if let Some(t) = &overlap {
            f.insts[l].args[1] = t.split;
        }
    }
    insert_before(f, parent, l, &new);
    // The instructions after the scalar tail that end the split, and its results.
    let mut after_tail = Vec::new();
    let mut ends = None;
    if let Some(t) = &overlap {
        let old = f.insts[l].results.clone();
        let tile_results = f.insts[t.tile].results.clone();
        if t.fresh.is_empty() {
            // The tile continues the scalar tail's sums: its results replace the loop's.
            let map: HashMap<Value, Value> = old.iter().copied().zip(tile_results.iter().copied()).collect();
            replace_uses(f, &map);
            f.insts[t.tile].args.extend(old);
            after_tail.push(t.tile);
            ends = Some((t.tile, tile_results));
        } else {
            // The tile's sums start from splats; the scalar tail's are added to them.
            let span = f.spans[t.tile];
            let starts: Vec<Value> = t.fresh.iter().map(|&i| f.insts[i].results[0]).collect();
            f.insts[t.tile].args.extend(starts);
            after_tail.extend(t.fresh.iter().copied());
            after_tail.push(t.tile);
            let mut map = HashMap::new();
            let mut sums = Vec::new();
            for (&o, &r) in old.iter().zip(&tile_results) {
                let add = f.create_inst(Opcode::Binary(BinOp::Add), vec![o, r], &[f.ty(o)], span);
                sums.push(f.insts[add].results[0]);
                map.insert(o, f.insts[add].results[0]);
                after_tail.push(add);
            }
            // Before the additions are placed: they keep reading the scalar tail's sums.
            replace_uses(f, &map);
            ends = Some((*after_tail.last().unwrap_or(&t.tile), sums));
        }
        let region = crate::rewrite::region_mut(f, parent);
        let at = region.insts.iter().position(|&i| i == l).map_or(region.insts.len(), |p| p + 1);
        region.insts.splice(at..at, after_tail.iter().copied());
    }
    let (last, ends) = if let Some(ends) = ends {
        ends
    } else if c.droppable && c.key.step == 1 {
        // Nothing is left past `nb`: the tail loop goes, its results are the steady ones.
        let old = f.insts[l].results.clone();
        let map: HashMap<Value, Value> = old.into_iter().zip(results.iter().copied()).collect();
        replace_uses(f, &map);
        crate::rewrite::region_mut(f, parent).insts.retain(|&i| i != l);
        (steady, results)
    } else {
        (l, f.insts[l].results.clone())
    };
    if c.droppable && !c.zero_sums.is_empty() {
        count_positive_zeros(f, c, (last, &ends), nb, no_wrap, parent);
    }
}

/// `nb = min(max(n - base, 0), extent)` as an `i32`, computed in `i64` so that nothing
/// wraps (for 64-bit `n` and `base`, from the sign of `n - base` and whether it wrapped):
/// how many leading elements of the loop's space have the predicate true, when no lane
/// wraps ([`Key::may_wrap`]).
pub(crate) fn enabled_count(f: &mut Function, key: &Key, emit: &mut Emit<'_>) -> Value {
    let i64t = Ty::Scalar(DType::I64);
    let widen = |f: &mut Function, emit: &mut Emit<'_>, v: Value| {
        if f.ty(v) == i64t { v } else { emit(f, Opcode::Cast, vec![v], i64t) }
    };
    let n = widen(f, emit, key.n);
    let zero = konst(f, DType::I64, Const::Int(0));
    let ext = konst(f, DType::I64, Const::Int(key.extent));
    let t = match key.base {
        // `n - base` of 64-bit values may wrap: where `n > base`, a negative difference
        // is one beyond `i64::MAX`, so more than `extent`.
        Some(b) if key.dt == DType::I64 => {
            let b = widen(f, emit, b);
            let d = emit(f, Opcode::Binary(BinOp::Sub), vec![n, b], i64t);
            let i1 = Ty::Scalar(DType::I1);
            let above = emit(f, Opcode::Cmp(CmpOp::Gt), vec![n, b], i1);
            let wrapped = emit(f, Opcode::Cmp(CmpOp::Lt), vec![d, zero], i1);
            let t = emit(f, Opcode::Binary(BinOp::Min), vec![d, ext], i64t);
            let t = emit(f, Opcode::Select, vec![wrapped, ext, t], i64t);
            emit(f, Opcode::Select, vec![above, t, zero], i64t)
        }
        base => {
            let d = match base {
                Some(b) => {
                    let b = widen(f, emit, b);
                    emit(f, Opcode::Binary(BinOp::Sub), vec![n, b], i64t)
                }
                None => n,
            };
            let t = emit(f, Opcode::Binary(BinOp::Max), vec![d, zero], i64t);
            emit(f, Opcode::Binary(BinOp::Min), vec![t, ext], i64t)
        }
    };
    emit(f, Opcode::Cast, vec![t], Ty::Scalar(DType::I32))
}

/// The tiles past `n` are skipped, but in the program they take part: a float sum that
/// they add `+0.0` to is never `-0.0` when there are any (`nb < extent`), though it is when
/// every element is `-0.0` and none are skipped. So after `last` (the instruction that
/// ends the split, whose sums are `results`), each such sum `r` becomes `r + z`,
/// `z = nb < extent ? +0.0 : -0.0` on every lane: `r` unchanged except a `-0.0` lane
/// turned `+0.0` exactly when lanes were skipped.
fn count_positive_zeros(
    f: &mut Function,
    c: &Cand,
    (last, results): (Inst, &[Value]),
    nb: Value,
    no_wrap: Option<Value>,
    parent: Parent,
) {
    let span = f.spans[last];
    let ext = konst(f, DType::I32, Const::Int(c.key.extent));
    let mut new = Vec::new();
    let mut emit = |f: &mut Function, op: Opcode, args: Vec<Value>, ty: Ty| -> Value {
        let i = f.create_inst(op, args, &[ty], span);
        new.push(i);
        f.insts[i].results[0]
    };
    let mut skipped = emit(f, Opcode::Cmp(CmpOp::Lt), vec![nb, ext], Ty::Scalar(DType::I1));
    // Where a lane wraps, every tile ran.
    if let Some(ok) = no_wrap {
        skipped = emit(f, Opcode::Binary(BinOp::And), vec![skipped, ok], Ty::Scalar(DType::I1));
    }
    let mut map = HashMap::new();
    for &k in &c.zero_sums {
        let Some(&r) = results.get(k) else { continue };
        let ty = f.ty(r);
        let d = ty.dtype();
        let (pos, neg) = (konst(f, d, Const::Float(0.0)), konst(f, d, Const::Float(-0.0)));
        let z = emit(f, Opcode::Select, vec![skipped, pos, neg], Ty::Scalar(d));
        let z = match ty {
            Ty::Tile(..) => emit(f, Opcode::Splat, vec![z], ty),
            _ => z,
        };
        let fixed = emit(f, Opcode::Binary(BinOp::Add), vec![r, z], ty);
        map.insert(r, fixed);
    }
    if map.is_empty() {
        return;
    }
    // Before the new instructions are placed: they keep reading the loop's results.
    replace_uses(f, &map);
    let region = crate::rewrite::region_mut(f, parent);
    let pos = region.insts.iter().position(|&i| i == last).map_or(region.insts.len(), |p| p + 1);
    region.insts.splice(pos..pos, new.iter().copied());
}

/// Turns the tail `for iv = full to TUB step L { … mask P … }` of a droppable loop into
/// `for iv = full to nb step 1 { … }` on scalars: every `iv` below `nb` has `P` true, so
/// the accesses lose their masks (and their lanes), and Cranelift gets a few scalar
/// instructions instead of a tile of masked lanes. A carried accumulator stays a tile,
/// each scalar added into lane 0 (a maximum or minimum takes it on every lane). Returns
/// the instructions to put before the loop, or `None` (nothing changed) when the body
/// depends on its lane count or on tiles from outside.
fn scalar_tail(f: &mut Function, l: Inst, nb: Value, pset: &HashSet<Value>) -> Option<Vec<Inst>> {
    let crate::accum::Accumulations { rest, terms } = crate::accum::accumulations(f, l)?;
    let accs = f.insts[l].regions[0].args[1..].to_vec();
    let defined: HashSet<Value> = rest.iter().flat_map(|&i| f.insts[i].results.clone()).collect();
    for &i in &rest {
        let d = &f.insts[i];
        if matches!(d.opcode, Opcode::ReduceLanes(_) | Opcode::Print(_) | Opcode::Assert { .. }) {
            return None;
        }
        if d.args.iter().any(|a| f.ty(*a).is_tile() && !defined.contains(a)) {
            return None;
        }
    }
    let span = f.spans[l];
    let mut before = Vec::new();
    let mut map = HashMap::new();
    let mut truthy = pset.clone();
    let mut out = clone_insts(f, &rest, &mut map, &mut truthy, Lanes::One);
    let mut next = Vec::new();
    let mut lane0: HashMap<u8, Value> = HashMap::new();
    for (&(op, x), &acc) in terms.iter().zip(&accs) {
        let ty = f.ty(acc);
        let xs = *map.get(&x).unwrap_or(&x);
        let add = |f: &mut Function, to: &mut Vec<Inst>, op: Opcode, args: Vec<Value>, ty: Ty| {
            let i = f.create_inst(op, args, &[ty], span);
            to.push(i);
            f.insts[i].results[0]
        };
        let term_x = if !ty.is_tile() {
            xs
        } else {
            let t = add(f, &mut out, Opcode::Splat, vec![xs], ty);
            if op == BinOp::Add {
                // Lane 0 only: the other lanes add the sum's neutral element.
                let lanes = ty.lanes();
                let first = match lane0.get(&lanes) {
                    Some(&m) => m,
                    None => {
                        let z32 = konst(f, DType::I32, Const::Int(0));
                        let i32s = Ty::Tile(DType::I32, lanes);
                        let idx = add(f, &mut before, Opcode::Iota, vec![z32], i32s);
                        let zs = add(f, &mut before, Opcode::Splat, vec![z32], i32s);
                        let m = add(
                            f,
                            &mut before,
                            Opcode::Cmp(CmpOp::Eq),
                            vec![idx, zs],
                            Ty::Tile(DType::I1, lanes),
                        );
                        lane0.insert(lanes, m);
                        m
                    }
                };
                let zero = konst(f, ty.dtype(), crate::emit::neutral(ReduceOp::Sum, ty.dtype()));
                let zt = add(f, &mut before, Opcode::Splat, vec![zero], ty);
                add(f, &mut out, Opcode::Select, vec![first, t, zt], ty)
            } else {
                t
            }
        };
        next.push(add(f, &mut out, Opcode::Binary(op), vec![acc, term_x], ty));
    }
    let y = f.create_inst(Opcode::Yield, next, &[], span);
    out.push(y);
    let it = f.ty(f.insts[l].args[0]).dtype();
    let one = konst(f, it, Const::Int(1));
    f.insts[l].regions[0].insts = out;
    f.insts[l].args[1] = nb;
    f.insts[l].args[2] = one;
    Some(before)
}
