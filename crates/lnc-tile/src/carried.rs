//! Carried blocks of pointers: a rewrite of the block IR before tiling.
//!
//! A block of pointers carried by a loop or merged by an `if` — `ptrs += BLOCK` in a loop,
//! Triton's matmul idiom — has no scratch buffer to live in (only numbers do). When every
//! value flowing into it is the same pointer block `P` moved by *uniform* offsets (splats
//! of scalars), it is rewritten as `P + splat(d)` with `d` a carried `int64` scalar:
//!
//! ```text
//! for … iter(ptrs = P) { … yield ptr_add(ptrs, splat(s)) }
//! =>
//! for … iter(d = 0) { ptrs = ptr_add(P, splat(d)); … yield d + s }; ptrs = ptr_add(P, splat(d'))
//! ```
//!
//! `P` is defined before the loop, so the pointer block keeps its affine form and loads
//! through it stay contiguous. For an `if`, `P` is the pointer block both branches start
//! from. A `while` is rewritten when its condition forwards its carried values unchanged
//! (as the front end builds it). Other carried pointer blocks are left as they are and
//! refused by the tiling with a source-located error.
//!
//! Loops are rewritten innermost first, so that an outer loop sees the inner loop's result
//! as `P + splat(d)` already.

use lnc_bir::*;

/// The function with its carried pointer blocks rewritten, or `None` when it has none.
pub(crate) fn rewrite(f: &Function) -> Option<Function> {
    let mut any = false;
    f.walk(|i| {
        let d = f.inst(i);
        any |= matches!(d.opcode, Opcode::For | Opcode::While | Opcode::If)
            && d.results.iter().any(|&r| is_ptr_block(f, r));
    });
    if !any {
        return None;
    }
    let mut g = f.clone();
    let mut body = std::mem::take(&mut g.body);
    region(&mut g, &mut body);
    g.body = body;
    Some(g)
}

fn is_ptr_block(f: &Function, v: Value) -> bool {
    let t = f.ty(v);
    t.elem.is_ptr() && t.is_block()
}

fn def(f: &Function, v: Value) -> Option<&InstData> {
    match f.values[v].def {
        ValueDef::Result(i, _) => Some(f.inst(i)),
        _ => None,
    }
}

/// The scalar a block offset repeats, if it is uniform.
fn uniform(f: &Function, o: Value) -> Option<Value> {
    let d = def(f, o)?;
    match d.opcode {
        Opcode::Splat => Some(d.args[0]),
        Opcode::Broadcast | Opcode::ExpandDims(_) => uniform(f, d.args[0]),
        _ => None,
    }
}

/// Walks `y = ptr_add(…ptr_add(root, splat(s1))…, splat(sn))` back to its root, stopping at
/// `stop` when given; returns the root and the scalars added.
fn chain(f: &Function, mut y: Value, stop: Option<Value>) -> (Value, Vec<Value>) {
    let mut deltas = Vec::new();
    while Some(y) != stop {
        let Some(d) = def(f, y) else { break };
        if d.opcode != Opcode::PtrAdd {
            break;
        }
        let Some(s) = uniform(f, d.args[1]) else { break };
        deltas.push(s);
        y = d.args[0];
    }
    deltas.reverse();
    (y, deltas)
}

/// Rewrites the control flow of a region, innermost first, then this region's.
fn region(f: &mut Function, r: &mut Region) {
    let mut k = 0;
    while k < r.insts.len() {
        let i = r.insts[k];
        let mut regions = std::mem::take(&mut f.insts[i].regions);
        for sub in &mut regions {
            region(f, sub);
        }
        f.insts[i].regions = regions;
        let positions: Vec<usize> =
            (0..f.inst(i).results.len()).filter(|&n| is_ptr_block(f, f.inst(i).results[n])).collect();
        for n in positions {
            let done = match f.inst(i).opcode {
                Opcode::For => rewrite_for(f, i, n),
                Opcode::While => rewrite_while(f, i, n),
                Opcode::If => rewrite_if(f, i, n),
                _ => None,
            };
            if let Some(Rewritten { before, after, old, new }) = done {
                let nb = before.len();
                r.insts.splice(k..k, before);
                k += nb;
                replace_in(f, &r.insts[k + 1..], old, new);
                r.insts.splice(k + 1..k + 1, after);
            }
        }
        k += 1;
    }
}

/// What a rewrite adds around the instruction: instructions before it, instructions after
/// it, and the old result that later instructions must stop using for `new`.
struct Rewritten {
    before: Vec<Inst>,
    after: Vec<Inst>,
    old: Value,
    new: Value,
}

/// Replaces `from` by `to` in `insts` and their nested regions.
fn replace_in(f: &mut Function, insts: &[Inst], from: Value, to: Value) {
    for &i in insts {
        for a in &mut f.insts[i].args {
            if *a == from {
                *a = to;
            }
        }
        let nested: Vec<Inst> = f.insts[i].regions.iter().flat_map(|r| r.insts.iter().copied()).collect();
        replace_in(f, &nested, from, to);
    }
}

fn i64_ty() -> Type {
    Type::scalar(DType::I64)
}

/// `ptr_add(p, splat(d))`: two new instructions and the pointer block.
fn moved(f: &mut Function, p: Value, d: Value, span: lnc_diag::Span) -> (Vec<Inst>, Value) {
    let shape = f.ty(p).shape;
    let sp = f.create_inst(Opcode::Splat, vec![d], &[Type::block(Elem::Scalar(DType::I64), shape)], span);
    let s = f.insts[sp].results[0];
    let add = f.create_inst(Opcode::PtrAdd, vec![p, s], &[f.ty(p)], span);
    (vec![sp, add], f.insts[add].results[0])
}

/// `base + s1 + … + sn` in `int64`: the new instructions and the sum.
fn sum(f: &mut Function, base: Option<Value>, deltas: &[Value], span: lnc_diag::Span) -> (Vec<Inst>, Value) {
    let mut insts = Vec::new();
    let mut acc = base;
    for &s in deltas {
        let s = if f.ty(s) == i64_ty() {
            s
        } else {
            let c = f.create_inst(Opcode::Cast, vec![s], &[i64_ty()], span);
            insts.push(c);
            f.insts[c].results[0]
        };
        acc = Some(match acc {
            None => s,
            Some(a) => {
                let add = f.create_inst(Opcode::Binary(BinOp::Add), vec![a, s], &[i64_ty()], span);
                insts.push(add);
                f.insts[add].results[0]
            }
        });
    }
    let v = match acc {
        Some(v) => v,
        None => {
            let c = f.create_inst(Opcode::Const(Const::Int(0)), vec![], &[i64_ty()], span);
            insts.push(c);
            f.insts[c].results[0]
        }
    };
    (insts, v)
}

/// Inserts `insts` before the terminator of region `ri` of `i` (its last instruction).
fn before_terminator(f: &mut Function, i: Inst, ri: usize, insts: Vec<Inst>) {
    let r = &mut f.insts[i].regions[ri];
    let at = r.insts.len().saturating_sub(1);
    r.insts.splice(at..at, insts);
}

fn terminator(f: &Function, i: Inst, ri: usize) -> Option<Inst> {
    f.inst(i).regions.get(ri)?.insts.last().copied()
}

/// Replaces region argument `index` of region `ri` of `i` (a pointer block `A`) by an
/// `int64` argument `d`, and every use of `A` in that region by `ptr_add(p, splat(d))`
/// computed at the region's start; returns `d`.
fn offset_arg(f: &mut Function, i: Inst, ri: usize, index: usize, p: Value) -> Value {
    let span = f.span(i);
    let old = f.insts[i].regions[ri].args[index];
    let d = f.create_region_arg(i, ri as u32, index as u32, i64_ty());
    f.insts[i].regions[ri].args[index] = d;
    let (insts, moved_p) = moved(f, p, d, span);
    let body: Vec<Inst> = f.insts[i].regions[ri].insts.clone();
    replace_in(f, &body, old, moved_p);
    f.insts[i].regions[ri].insts.splice(0..0, insts);
    d
}

/// Replaces result `n` of `i` by an `int64` value; returns the old result, the new
/// offset result and the instructions computing the pointer block after `i`.
fn offset_result(f: &mut Function, i: Inst, n: usize, p: Value) -> Rewritten {
    let span = f.span(i);
    let old = f.insts[i].results[n];
    let r = f.values.push(ValueData { ty: i64_ty(), def: ValueDef::Result(i, n as u32) });
    f.insts[i].results[n] = r;
    let (after, new) = moved(f, p, r, span);
    Rewritten { before: Vec::new(), after, old, new }
}

fn rewrite_for(f: &mut Function, i: Inst, n: usize) -> Option<Rewritten> {
    let p = f.inst(i).args[3 + n];
    let arg = f.inst(i).regions.first()?.args[1 + n];
    let y = terminator(f, i, 0)?;
    let (root, deltas) = chain(f, f.inst(y).args[n], Some(arg));
    if root != arg {
        return None;
    }
    let span = f.span(i);
    let (zero_insts, zero) = sum(f, None, &[], span);
    f.insts[i].args[3 + n] = zero;
    let d = offset_arg(f, i, 0, 1 + n, p);
    let (insts, next) = sum(f, Some(d), &deltas, span);
    before_terminator(f, i, 0, insts);
    f.insts[y].args[n] = next;
    let mut rw = offset_result(f, i, n, p);
    rw.before = zero_insts;
    Some(rw)
}

fn rewrite_while(f: &mut Function, i: Inst, n: usize) -> Option<Rewritten> {
    let data = f.inst(i);
    let (cond, body) = (data.regions.first()?, data.regions.get(1)?);
    let c = *cond.insts.last()?;
    // The condition must forward its carried values as they are.
    if f.inst(c).args[1..] != cond.args[..] || body.args.len() != cond.args.len() {
        return None;
    }
    let p = data.args[n];
    let arg1 = body.args[n];
    let y = *body.insts.last()?;
    let (root, deltas) = chain(f, f.inst(y).args[n], Some(arg1));
    if root != arg1 {
        return None;
    }
    let span = f.span(i);
    let (zero_insts, zero) = sum(f, None, &[], span);
    f.insts[i].args[n] = zero;
    let d0 = offset_arg(f, i, 0, n, p);
    // `offset_arg` made the condition forward the pointer block; it forwards `d0`.
    f.insts[c].args[1 + n] = d0;
    let d1 = offset_arg(f, i, 1, n, p);
    let (insts, next) = sum(f, Some(d1), &deltas, span);
    before_terminator(f, i, 1, insts);
    f.insts[y].args[n] = next;
    let mut rw = offset_result(f, i, n, p);
    rw.before = zero_insts;
    Some(rw)
}

fn rewrite_if(f: &mut Function, i: Inst, n: usize) -> Option<Rewritten> {
    let (yt, ye) = (terminator(f, i, 0)?, terminator(f, i, 1)?);
    let (rt, dt) = chain(f, f.inst(yt).args[n], None);
    let (re, de) = chain(f, f.inst(ye).args[n], None);
    // The common start must be defined outside the `if` (it is visible in both branches
    // only then, and after the `if`).
    if rt != re || defined_in(f, i, rt) {
        return None;
    }
    let span = f.span(i);
    for (ri, y, deltas) in [(0, yt, dt), (1, ye, de)] {
        let (insts, off) = sum(f, None, &deltas, span);
        before_terminator(f, i, ri, insts);
        f.insts[y].args[n] = off;
    }
    Some(offset_result(f, i, n, rt))
}

/// True when `v` is defined by an instruction nested in `i`'s regions.
fn defined_in(f: &Function, i: Inst, v: Value) -> bool {
    fn go(f: &Function, r: &Region, v: Value) -> bool {
        r.args.contains(&v)
            || r.insts
                .iter()
                .any(|&j| f.inst(j).results.contains(&v) || f.inst(j).regions.iter().any(|s| go(f, s, v)))
    }
    f.inst(i).regions.iter().any(|r| go(f, r, v))
}
