//! Several accumulators per reduction: a tile loop whose carried values are all reduction
//! accumulators is unrolled `U` times with `U` independent accumulators, combined pairwise
//! after the loop.
//!
//! ```text
//! r = for iv = 0 to ub step L iter(a = init) { … yield a ⊕ x(iv) }
//! =>
//! ubU = max(ub, 0) & -(U·L)
//! r0, …, rU-1 = for iv = 0 to ubU step U·L iter(a0 = init, a1 = e, …) {
//!   … a0 ⊕ x(iv), a1 ⊕ x(iv + L), …          ; the body U times, in order
//! }
//! r = for iv = ubU to ub step L iter(a = (r0 ⊕ r1) ⊕ (r2 ⊕ r3)) { … yield a ⊕ x(iv) }
//! ```
//!
//! One accumulator makes every tile wait for the previous addition (3–4 cycles of
//! latency per vector), so a reduction runs at a fraction of the load throughput; `U`
//! chains run in parallel. `e` is the neutral element of a sum and the initial value for
//! a maximum or minimum (they are idempotent). The body's effects keep their order: copy
//! `k` is iteration `U·j + k` of the original loop. Floating-point sums associate
//! differently, as the lanes of a tile already do.
//!
//! `U` is the requested factor, halved while the copies' accumulators and loaded tiles
//! would not fit in the 16 vector registers. A loop over a row of run-time length whose
//! body only loads tiles of one register each and adds, maximizes or minimizes them into
//! one float accumulator (`tl.sum(x)` of a loaded row) gets twice the factor: with
//! nothing else to overlap, its speed is the latency of its chains. A vector addition
//! takes 3 cycles on AMD's Zen 4, which starts two per cycle, so six chains keep the
//! adders busy and four leave a third of them idle: the mean of the seed forward's row at
//! N = 1024, timed alone on L2-resident rows, took 3.7 µs for 64 rows with eight chains
//! against 4.0 µs with four. Other bodies keep the factor: more arithmetic (the
//! variance's subtraction and multiplication) already fills the arithmetic units at four
//! copies, selects and splats need registers of their own (a sum of `tl.where(x > c, x,
//! d)` with eight chains spilled three accumulators, 16 % slower), a tile of two
//! registers (`fp64`) would spill, and a loop of constant extent (the rows of a 2-D
//! block) is short, so the doubling would only cost compile time.
//!
//! Tiles of 8 and 16 lanes (one `ymm` or `zmm` register in the 256- and 512-bit loops of
//! lnc-clif) keep four chains too: eight measured the same for the fp32 forward (8 lanes,
//! in the cache, one thread, N = 1000 and 1024: 161–167 against 163–168 ns a row) and
//! slower in fp16 and bf16 (16 lanes: 140–150 against 136–141, 199–214 against 199–213).
//!
//! A loop qualifies when it starts at 0 with a positive constant step, has no nested
//! regions, and each carried value `a` is used once, by `a ⊕ x` with `⊕` an addition,
//! maximum or minimum whose result only feeds the `yield` — except a scalar float sum:
//! that is a loop the kernel's author wrote, whose additions keep their order.

use std::collections::{HashMap, HashSet};

use lnc_lir::{BinOp, Const, Function, Inst, Opcode, ReduceOp, Region, Ty, Value};

use crate::rewrite::{Lanes, Parent, clone_insts, def, for_loops, int_of, konst, parents};

/// Bodies longer than this stay rolled: unrolling them costs more compile time than the
/// latency it hides.
const MAX_BODY: usize = 48;

/// Unrolls every qualifying reduction loop `unroll` times (`unroll` ≥ 2).
pub(crate) fn run(f: &mut Function, unroll: u8) {
    if unroll < 2 {
        return;
    }
    let parent = parents(f);
    for l in for_loops(f) {
        if let Some(updates) = reductions(f, l) {
            let ops: Vec<BinOp> = updates.iter().map(|&(op, _)| op).collect();
            // A loop without accumulators has no chain to break: two copies only halve
            // its loop overhead. Four measured 3 % faster on rows in L2 (seed forward,
            // N = 4096), but a row of 1000 (62 steps of 16 and 8 lanes) then ends in a
            // remainder tile loop, whose cached stores probably share lines with the
            // steady loop's non-temporal ones (module `stream`; with two copies 1000 is
            // 125 steps of 8): the seed forward at N = 1000 took 1.51 against 0.88 ms, its
            // backward 2.90 against 2.25 ms (lnc-bench, 2 threads). Under an `if` (the
            // seed backward's lock-protected update, both branches) that is not worth the
            // compile time it costs.
            let chains_only = only_accumulations(f, l, &updates);
            let cap = match (ops.is_empty(), parent[&l]) {
                (false, _) if chains_only => unroll.saturating_mul(2),
                (false, _) => unroll,
                (true, Some((p, _))) if f.insts[p].opcode == Opcode::If => 1,
                (true, _) => unroll.min(2),
            };
            // Only the accumulators and the loaded tiles are live in a body of
            // accumulations: no invariants need registers.
            let budget = if chains_only { VECTOR_REGISTERS } else { LIVE_TILES };
            let u = fitting_unroll(f, l, cap, budget);
            if u >= 2 {
                unroll_loop(f, l, &ops, u as i64, parent[&l]);
            }
        }
    }
}

/// The vector registers of x86-64.
const VECTOR_REGISTERS: usize = 16;

/// Tiles an unrolled body may keep live at once: a few of the vector registers hold loop
/// invariants (splats of scalars).
const LIVE_TILES: usize = 12;

/// Whether loop `l` runs to a bound known only at run time and its body is only loads of
/// tiles the type of its one accumulator, a float tile of one vector register, index
/// arithmetic on integer scalars, and the accumulator's update. (Several reductions of one
/// loop are as many chains per copy already.)
fn only_accumulations(f: &Function, l: Inst, updates: &[(BinOp, Inst)]) -> bool {
    let d = &f.insts[l];
    let &[(_, step)] = updates else { return false };
    let acc = f.ty(d.results[0]);
    // `fp16`/`bf16` tiles are computed in `f32`, twice their storage.
    let one_register = matches!(acc, Ty::Tile(dt, lanes) if dt.is_float() && dt.size() >= 4 && dt.size() * lanes as u32 == 16);
    if int_of(f, d.args[1]).is_some() || !one_register {
        return false;
    }
    // What the update depends on, walking back; dead code that `bounds` left (a mask's
    // `iota` and comparison, removed later) does not count.
    let body = &d.regions[0];
    let Some((_, insts)) = body.insts.split_last() else { return false };
    let mut live: HashSet<Value> = HashSet::new();
    for &i in insts.iter().rev() {
        let data = &f.insts[i];
        if i != step && !data.results.iter().any(|r| live.contains(r)) {
            if !data.opcode.is_pure() {
                return false;
            }
            continue;
        }
        let load = matches!(data.opcode, Opcode::Load { .. } | Opcode::ScratchLoad(_))
            && f.ty(data.results[0]) == acc;
        let index = data.results.iter().all(|&r| matches!(f.ty(r), Ty::Scalar(dt) if dt.is_int()));
        if i != step && !load && !index {
            return false;
        }
        live.extend(data.args.iter().copied());
    }
    true
}

/// The largest power of two up to `unroll` at which the copies' accumulators and loaded
/// tiles fit in registers: past that, Cranelift spills the accumulators to the stack on
/// every iteration and the extra chains buy nothing.
fn fitting_unroll(f: &Function, l: Inst, unroll: u8, budget: usize) -> u8 {
    let body = &f.insts[l].regions[0];
    let loads = body
        .insts
        .iter()
        .filter(|&&i| matches!(f.insts[i].opcode, Opcode::Load { .. } | Opcode::ScratchLoad(_)))
        .count();
    let live = body.args.len() - 1 + loads;
    let mut u = unroll;
    while u > 1 && u as usize * live > budget {
        u /= 2;
    }
    u
}

/// The reduction of each carried value of `l` and the instruction that updates it, when
/// the loop qualifies.
fn reductions(f: &Function, l: Inst) -> Option<Vec<(BinOp, Inst)>> {
    let d = &f.insts[l];
    if int_of(f, d.args[0]) != Some(0) || int_of(f, d.args[2]).is_none_or(|s| s <= 0) {
        return None;
    }
    let body = &d.regions[0];
    if body.insts.len() > MAX_BODY {
        return None;
    }
    let updates = carried_updates(f, l)?;
    // A scalar float sum carried by a loop is one the kernel's author wrote (`acc += …` in
    // a `for`; the tiler's reductions carry tiles): its order is the program's, as in
    // Triton, where `acc = 0.0; for _ in range(10): acc += 0.1` rounds after every
    // addition. Only block reductions, whose order is unspecified, are reassociated.
    let sequential = |&(op, step): &(BinOp, Inst)| {
        let r = f.insts[step].results[0];
        op == BinOp::Add && matches!(f.ty(r), Ty::Scalar(d) if d.is_float())
    };
    if updates.iter().any(sequential) {
        return None;
    }
    Some(updates)
}

/// For each carried value `a` of loop `l` (whose body has no nested regions), the
/// operation `⊕` and the instruction `a ⊕ x` that updates it: `a` is read once, by that
/// addition, maximum or minimum, whose result only feeds the `yield`.
pub(crate) fn carried_updates(f: &Function, l: Inst) -> Option<Vec<(BinOp, Inst)>> {
    let body = &f.insts[l].regions[0];
    let mut uses: HashMap<Value, Vec<Inst>> = HashMap::new();
    for &j in &body.insts {
        if !f.insts[j].regions.is_empty() {
            return None;
        }
        for &a in &f.insts[j].args {
            uses.entry(a).or_default().push(j);
        }
    }
    let term = *body.insts.last()?;
    let yields = &f.insts[term].args;
    let mut out = Vec::new();
    for (k, &acc) in body.args[1..].iter().enumerate() {
        let y = yields[k];
        let step = def(f, y)?;
        let op = match f.insts[step].opcode {
            Opcode::Binary(op @ (BinOp::Add | BinOp::Max | BinOp::Min)) => op,
            _ => return None,
        };
        let sd = &f.insts[step];
        let acc_uses = uses.get(&acc).map_or(&[][..], Vec::as_slice);
        let y_uses = uses.get(&y).map_or(&[][..], Vec::as_slice);
        if acc_uses != [step] || sd.args.iter().filter(|&&a| a == acc).count() != 1 || y_uses != [term] {
            return None;
        }
        out.push((op, step));
    }
    Some(out)
}

/// The body of a loop split at its carried updates ([`carried_updates`]): the
/// instructions but the updates and the terminator, and for each carried value its
/// operation `⊕` and the operand `x` of its update `a ⊕ x`. A tail rebuilt from them
/// (module `bounds`'s scalars, module `overlap`'s last tile) adds its own `x`.
pub(crate) struct Accumulations {
    pub(crate) rest: Vec<Inst>,
    pub(crate) terms: Vec<(BinOp, Value)>,
}

/// [`Accumulations`] of loop `l`, when its carried values qualify ([`carried_updates`]).
pub(crate) fn accumulations(f: &Function, l: Inst) -> Option<Accumulations> {
    let updates = carried_updates(f, l)?;
    let body = &f.insts[l].regions[0];
    let (_, insts) = body.insts.split_last()?;
    let update_insts: HashSet<Inst> = updates.iter().map(|&(_, u)| u).collect();
    let rest = insts.iter().copied().filter(|i| !update_insts.contains(i)).collect();
    let terms = updates
        .iter()
        .zip(&body.args[1..])
        .map(|(&(op, u), &acc)| {
            let d = &f.insts[u].args;
            (op, if d[0] == acc { d[1] } else { d[0] })
        })
        .collect();
    Some(Accumulations { rest, terms })
}

/// Rewrites loop `l` as in the module documentation.
fn unroll_loop(f: &mut Function, l: Inst, ops: &[BinOp], u: i64, parent: Parent) {
    let span = f.spans[l];
    let (ub, step) = (f.insts[l].args[1], int_of(f, f.insts[l].args[2]).expect("constant step"));
    let ivt = f.ty(ub);
    let it = ivt.dtype();
    let inits: Vec<Value> = f.insts[l].args[3..].to_vec();
    let body = f.insts[l].regions[0].clone();
    let (iv, accs) = (body.args[0], &body.args[1..]);
    let (term, insts) = body.insts.split_last().expect("a loop body ends in yield");
    let yields = f.insts[*term].args.clone();

    let mut before = Vec::new();
    let mut emit = |f: &mut Function, op: Opcode, args: Vec<Value>, ty: Ty| -> Value {
        let i = f.create_inst(op, args, &[ty], span);
        before.push(i);
        f.insts[i].results[0]
    };
    let zero = konst(f, it, Const::Int(0));
    let mask = konst(f, it, Const::Int(-(u * step)));
    let nonneg = emit(f, Opcode::Binary(BinOp::Max), vec![ub, zero], ivt);
    let ub_u = emit(f, Opcode::Binary(BinOp::And), vec![nonneg, mask], ivt);
    // The other accumulators start at the neutral element of a sum, or at the initial
    // value of an idempotent maximum or minimum.
    let mut zeros: HashMap<Ty, Value> = HashMap::new();
    let mut rest = Vec::new();
    for (k, &op) in ops.iter().enumerate() {
        rest.push(if op == BinOp::Add {
            let ty = f.ty(inits[k]);
            if let Some(&z) = zeros.get(&ty) {
                z
            } else {
                let c = konst(f, ty.dtype(), crate::emit::neutral(ReduceOp::Sum, ty.dtype()));
                let z = if ty.is_tile() { emit(f, Opcode::Splat, vec![c], ty) } else { c };
                zeros.insert(ty, z);
                z
            }
        } else {
            inits[k]
        });
    }
    let mut starts: Vec<Vec<Value>> = vec![inits.clone()];
    starts.extend((1..u).map(|_| rest.clone()));
    let step_u = konst(f, it, Const::Int(u * step));
    let mut args = vec![zero, ub_u, step_u];
    args.extend(starts.iter().flatten().copied());
    let tys: Vec<Ty> = (0..u).flat_map(|_| inits.iter().map(|&v| f.ty(v))).collect::<Vec<_>>();
    let wide = f.create_inst(Opcode::For, args, &tys, span);
    let wide_iv = f.create_region_arg(wide, 0, 0, ivt);
    let mut region = Region { args: vec![wide_iv], insts: Vec::new() };
    let mut next = Vec::new();
    for k in 0..u {
        let mut map = HashMap::new();
        let iv_k = if k == 0 {
            wide_iv
        } else {
            let off = konst(f, it, Const::Int(k * step));
            let i = f.create_inst(Opcode::Binary(BinOp::Add), vec![wide_iv, off], &[ivt], span);
            region.insts.push(i);
            f.insts[i].results[0]
        };
        map.insert(iv, iv_k);
        for (j, &a) in accs.iter().enumerate() {
            let idx = 1 + (k as usize) * accs.len() + j;
            let na = f.create_region_arg(wide, 0, idx as u32, f.ty(a));
            region.args.push(na);
            map.insert(a, na);
        }
        region.insts.extend(clone_insts(f, insts, &mut map, &mut HashSet::new(), Lanes::Same));
        next.extend(yields.iter().map(|y| map[y]));
    }
    let y = f.create_inst(Opcode::Yield, next, &[], span);
    region.insts.push(y);
    f.insts[wide].regions = vec![region];
    before.push(wide);

    // Pairwise combination of the U partial results of each accumulator.
    let results = f.insts[wide].results.clone();
    let mut combined = Vec::new();
    for (j, &op) in ops.iter().enumerate() {
        let mut level: Vec<Value> = (0..u as usize).map(|k| results[k * accs.len() + j]).collect();
        let ty = f.ty(level[0]);
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|p| {
                    if p.len() == 1 {
                        return p[0];
                    }
                    let i = f.create_inst(Opcode::Binary(op), p.to_vec(), &[ty], span);
                    before.push(i);
                    f.insts[i].results[0]
                })
                .collect();
        }
        combined.push(level[0]);
    }
    let a = &mut f.insts[l].args;
    a[0] = ub_u;
    a.truncate(3);
    a.extend(combined);
    crate::rewrite::insert_before(f, parent, l, &before);
}
