//! Tails as one overlapping tile: the elements a split loop's steady state leaves (fewer
//! than a tile) run as the row's last whole tile, which ends at the last element.
//!
//! ```text
//! for iv = 0 to full step L { … }                 ; the steady loop (module `bounds`)
//! for iv = full to nb step 1 { … }                ; the tail on scalars
//! =>
//! vlb  = full == 0 ? nb : full                    ; no whole tile in the row: scalars only
//! last = nb - L
//! for iv = 0 to full step L { … }
//! for iv = full to vlb step 1 { … }               ; runs only when nb < L
//! for iv = vlb to nb step L iter(a = -0.0) {      ; once when full < nb, L ≤ nb
//!   t = min(iv, last)                             ; the tile [nb - L, nb)
//!   q = iota(t) >= splat(iv)                      ; its lanes the steady loop did not run
//!   … body at t, the bound predicate true …
//!   yield a + select(q, x, -0.0)                  ; sums count each element once
//! }
//! sum = scalar tail's sum + the tile's
//! ```
//!
//! (A loop carrying maxima or minima continues the scalar tail's values instead.)
//!
//! A row whose length is not a multiple of the tile otherwise ends in up to `L - 1`
//! iterations on scalars, each a whole pass of the body for one element, and with 16-lane
//! tiles of `fp16` or `bf16` each converting its element with integer code: measured on
//! the seed forward in fp16 (N = 1000, hot, one thread), 183 ns a row against 130 at
//! N = 992 and 133 at 1008, whose rows end on a whole tile.
//!
//! The tile's first `L - (nb - full)` lanes are elements the steady loop ran already, so
//! running them again must change nothing:
//! - the body computes, loads (not volatile) from arguments and scratch buffers it does not
//!   store into, and stores, at most once per argument and per buffer; the loads then
//!   read what they read the first time and the stores write the same values again;
//! - every value is a function of the lanes' element indices: the induction variable is
//!   used only as the start of `iota`, as the index of a contiguous access of a whole tile,
//!   or added to invariants for those uses; no `iota` starts elsewhere, no tile comes from
//!   outside the loop but a splat, and no instruction combines lanes;
//! - each carried value is a tile updated by `a ⊕ x`: a sum adds the neutral element in
//!   the lanes already counted, and a maximum or minimum takes an element twice, which
//!   changes nothing.
//!
//! The tile's elements are all below `nb`, where the bound predicate is true: the program
//! accesses each of them in the original loop too. Loops under an `if`, and loops whose
//! stores only check their bounds, keep their scalar tail ([`worth_it`]).
//!
//! The tile of a sum runs in lnc-clif's 512-bit loops: its sums start from the neutral
//! element (a carried splat) and are added to the scalar tail's after it, and its select
//! becomes a mask loaded from a table of lanes below a count. Measured when first built,
//! with each pass's second exit through scratch, it was dropped: the seed forward ran
//! slower in the cache (one thread, 256 rows of 1000: `fp16` by about 2 %, `bf16` by 11 %).
//! With exits in registers (lnc-clif's `wide::leave`), and a `bf16` row's mean pass in
//! 512 bits too (its select passes the conversion on to the sum, `half::only_arithmetic`),
//! against the four 128-bit parts (`lnc bench`, hot, one thread, ns a row, two runs
//! alternated): `fp16` N = 1000 126-139 → 122-123, 1023 132-133 → 125-128; `bf16` 1000
//! 148-151 → 136-139, 1023 153-174 → 141-147; 1008 (no tail) within 2 %. With the caches
//! flushed (2 threads, 4096 rows, `lnc bench --flush`, 150 launches, three alternated
//! runs), N = 1000: `fp16` 364-378 → 351-369 µs, `bf16` 379-416 → 367-383. In-process
//! compile times (medians of 150, two alternated runs): `fp16` dx 4.67-4.71 → 4.56-4.61
//! ms, dwdb 4.44-4.46 → 4.54-4.61, forward within 3 %.
//!
//! Where the pass's stores stream, the scalar tail runs instead (`vlb = nb` also when the
//! launch streams the row's stores, as module `stream` decides): the tile would store
//! again, through the cache, into lines the steady loop wrote with non-temporal stores.
//! Measured on the seed forward in fp16 at N = 2052 (4096 rows, 2 threads, caches flushed,
//! the output streamed): 704 µs with the scalar tail, 804–826 with the tile.

use std::collections::{HashMap, HashSet};

use lnc_lir::{Addressing, BinOp, CmpOp, Const, DType, Function, Inst, Opcode, ReduceOp, Region, Ty, Value};

use crate::rewrite::{Lanes, Parent, clone_insts, def, defined_inside, int_of, konst};

/// The fewest lanes of a tile whose loop's tail runs as one. Narrower loops (`fp32` in
/// 8 lanes) keep their scalar tail: at most 7 iterations of a few `fp32` instructions.
/// With the tile, the seed dx kernel in `fp32` compiled in 5.2–5.4 ms instead of 3.7–4.0
/// (its checked code no longer fit 256-bit loops: Cranelift's allocator, under the
/// pressure of the tile's broadcasts, moved a result with an SSE instruction, and the
/// kernel was compiled again in 128 bits). Since lnc-clif's `widen` encodes such moves
/// again (8405819) it stays in 256-bit loops, but still compiles slower for a tail that
/// `fp32` rows of a multiple of 8 never run: in-process medians of 100 compiles, dx
/// 3.9 → 4.7 ms, forward 2.6 → 3.1, dwdb 3.3 → 3.9.
const MIN_LANES: i64 = 16;

/// The overlapping tile of a split loop's tail.
pub(crate) struct Tail {
    /// Scalar instructions to place before the tail loops.
    pub(crate) pre: Vec<Inst>,
    /// The loop, to place after the scalar tail.
    pub(crate) tile: Inst,
    /// Where the scalar tail stops and the tile loop starts (`vlb`).
    pub(crate) split: Value,
    /// For a loop whose carried values are all sums: the splats of their neutral element
    /// the tile's sums start from, to place right before it; the scalar tail's sums are
    /// added to the tile's after it. Empty: the tile continues the scalar tail's values.
    pub(crate) fresh: Vec<Inst>,
}

/// The overlapping tile for the tail of loop `l` (the loop from `full`, its body a tile
/// of `L` lanes testing the bound predicates `pset`, before it becomes the scalar tail)
/// whose elements end at `nb`; `None` when the body does not qualify (module docs).
/// `read`: the arguments the kernel reads (stores into the others may stream).
pub(crate) fn tail(
    f: &mut Function,
    l: Inst,
    parent: Parent,
    read: &HashSet<u32>,
    [full, nb]: [Value; 2],
    pset: &HashSet<Value>,
) -> Option<Tail> {
    if !worth_it(f, l, parent) {
        return None;
    }
    let lanes = int_of(f, f.insts[l].args[2])?;
    let crate::accum::Accumulations { rest, terms } = crate::accum::accumulations(f, l)?;
    let body = f.insts[l].regions[0].clone();
    let iv = body.args[0];
    if f.ty(iv) != Ty::Scalar(DType::I32) || !(MIN_LANES..=64).contains(&lanes) {
        return None;
    }
    for &a in &body.args[1..] {
        if f.ty(a).lanes() as i64 != lanes || !f.ty(a).is_tile() {
            return None;
        }
    }
    if !rerun_safe(f, &body, pset) || !lanewise_in_iv(f, l, &body) {
        return None;
    }
    // The row pointers of the stores that may stream (below), defined before the loop.
    let inside = defined_inside(f, l);
    let mut streamed = Vec::new();
    for &i in &body.insts {
        let Opcode::Store { site, .. } = f.insts[i].opcode else { continue };
        if !read.contains(&f.sites[site as usize].arg) {
            let ptr = f.insts[i].args[0];
            if inside.contains(&ptr) {
                return None;
            }
            streamed.push(ptr);
        }
    }
    let span = f.spans[l];
    let i32t = Ty::Scalar(DType::I32);
    let mut pre = Vec::new();
    let op = |f: &mut Function, to: &mut Vec<Inst>, opcode: Opcode, args: Vec<Value>, ty: Ty| -> Value {
        let i = f.create_inst(opcode, args, &[ty], span);
        to.push(i);
        f.insts[i].results[0]
    };
    let zero = konst(f, DType::I32, Const::Int(0));
    let step = konst(f, DType::I32, Const::Int(lanes));
    let i1t = Ty::Scalar(DType::I1);
    let mut scalars = op(f, &mut pre, Opcode::Cmp(CmpOp::Eq), vec![full, zero], i1t);
    // Where the pass's stores may stream (module `stream`: into an argument the kernel
    // never reads, in a launch storing more than the threshold), the tile's cached stores
    // would rewrite elements in lines the steady loop wrote with non-temporal ones, and
    // wait for each such line to leave the write-combining buffer and come back from
    // memory: the scalar tail, whose elements lie past the steady loop's, runs instead.
    // The test is `stream`'s, on the row's first whole line and all its elements.
    for ptr in streamed {
        let gap = op(f, &mut pre, Opcode::LineGap, vec![ptr], i32t);
        let line = op(f, &mut pre, Opcode::PtrAdd, vec![ptr, gap], f.ty(ptr));
        let streams = op(f, &mut pre, Opcode::StreamOk, vec![line, nb], i1t);
        scalars = op(f, &mut pre, Opcode::Binary(BinOp::Or), vec![scalars, streams], i1t);
    }
    let split = op(f, &mut pre, Opcode::Select, vec![scalars, nb, full], i32t);
    let last = op(f, &mut pre, Opcode::Binary(BinOp::Sub), vec![nb, step], i32t);

    let carried: Vec<Ty> = body.args[1..].iter().map(|&a| f.ty(a)).collect();
    let tile = f.create_inst(Opcode::For, vec![split, nb, step], &carried, span);
    let tiv = f.create_region_arg(tile, 0, 0, i32t);
    let accs: Vec<Value> =
        carried.iter().enumerate().map(|(k, &ty)| f.create_region_arg(tile, 0, k as u32 + 1, ty)).collect();
    let mut insts = Vec::new();
    let t = op(f, &mut insts, Opcode::Binary(BinOp::Min), vec![tiv, last], i32t);
    // The updates are not cloned: the carried values have no other use.
    let mut map: HashMap<Value, Value> = HashMap::from([(iv, t)]);
    insts.extend(clone_insts(f, &rest, &mut map, &mut pset.clone(), Lanes::Same));
    // The lanes at or past `iv` (where the steady loop stopped) are the tail's elements.
    let mut fresh = None;
    let mut next = Vec::new();
    for (k, &(bop, x)) in terms.iter().enumerate() {
        let ty = carried[k];
        let x = *map.get(&x).unwrap_or(&x);
        let term = if bop == BinOp::Add {
            let q = match fresh {
                Some(q) => q,
                None => {
                    let it = Ty::Tile(DType::I32, lanes as u8);
                    let idx = op(f, &mut insts, Opcode::Iota, vec![t], it);
                    let from = op(f, &mut insts, Opcode::Splat, vec![tiv], it);
                    let q = op(
                        f,
                        &mut insts,
                        Opcode::Cmp(CmpOp::Ge),
                        vec![idx, from],
                        Ty::Tile(DType::I1, lanes as u8),
                    );
                    *fresh.insert(q)
                }
            };
            let neutral = konst(f, ty.dtype(), crate::emit::neutral(ReduceOp::Sum, ty.dtype()));
            // Made in the loop: a tile live across the passes before it would hold a register.
            let z = op(f, &mut insts, Opcode::Splat, vec![neutral], ty);
            op(f, &mut insts, Opcode::Select, vec![q, x, z], ty)
        } else {
            x
        };
        next.push(op(f, &mut insts, Opcode::Binary(bop), vec![accs[k], term], ty));
    }
    let y = f.create_inst(Opcode::Yield, next, &[], span);
    insts.push(y);
    f.insts[tile].regions = vec![Region { args: std::iter::once(tiv).chain(accs).collect(), insts }];
    // Sums start afresh, from splats: lnc-clif's wide loops take a carried tile that
    // starts as a splat, in one 512-bit register, where another start would enter through
    // scratch (and a tile loop that does not qualify takes four 128-bit parts of every
    // tile, its code compiled four times over). The tile adds one term per lane to the
    // neutral element, which leaves it as it is, so the scalar tail's sum plus the tile's
    // is the sum the tile would have continued.
    let mut fresh = Vec::new();
    if terms.iter().all(|&(bop, _)| bop == BinOp::Add) {
        for &ty in &carried {
            let neutral = konst(f, ty.dtype(), crate::emit::neutral(ReduceOp::Sum, ty.dtype()));
            let i = f.create_inst(Opcode::Splat, vec![neutral], &[ty], span);
            fresh.push(i);
        }
    }
    Some(Tail { pre, tile, split, fresh })
}

/// Whether the tile is worth its compile time (it is the code of another pass, 0.5–1 ms
/// for a half kernel's three or four): not for a loop under an `if` (the seed backward's
/// update of its partial rows under the lock, whose first program of a group stores them
/// once per group), nor for one whose stores only check their bounds (left by module
/// `defer` where a store moved from: code generation emits nothing for such a loop once
/// its checks are hoisted in front of it, and the tile would add checks of its own).
fn worth_it(f: &Function, l: Inst, parent: Parent) -> bool {
    let under_if = parent.is_some_and(|(p, _)| f.insts[p].opcode == Opcode::If);
    let checks_only = f.insts[l].regions[0]
        .insts
        .iter()
        .any(|&i| matches!(f.insts[i].opcode, Opcode::Store { check_only: true, .. }));
    !under_if && !checks_only
}

/// Whether running an iteration of `body` again changes nothing: it only computes, loads
/// (not volatile) from arguments and scratch buffers it does not store into, and stores;
/// no instruction combines the lanes of a tile. A buffer may be read where the same
/// iteration writes back what it read, the bound predicates `pset` true: the masked row
/// module `rows` keeps in scratch for later passes, `s[i] = p ? s[i] : 0`.
fn rerun_safe(f: &Function, body: &Region, pset: &HashSet<Value>) -> bool {
    let mut stored_args = HashSet::new();
    let mut stored_slots = HashSet::new();
    let mut rewritten = HashSet::new();
    for &i in &body.insts {
        // One store per argument and per buffer: two at different offsets could write the
        // same element, the later store's value the one that stays, and the tile would
        // write the earlier one's over it. (Fusion puts two stores into one argument in a
        // loop only through the same pointer; this does not rely on it.)
        let fresh = match f.insts[i].opcode {
            Opcode::Store { site, .. } => stored_args.insert(f.sites[site as usize].arg),
            Opcode::ScratchStore(slot) if writes_back(f, i, pset) => rewritten.insert(slot),
            Opcode::ScratchStore(slot) => stored_slots.insert(slot),
            _ => true,
        };
        if !fresh || rewritten.iter().any(|s| stored_slots.contains(s)) {
            return false;
        }
    }
    body.insts.iter().all(|&i| match f.insts[i].opcode {
        Opcode::Load { volatile, site, .. } => {
            !volatile && !stored_args.contains(&f.sites[site as usize].arg)
        }
        Opcode::ScratchLoad(slot) => !stored_slots.contains(&slot),
        Opcode::Store { stream, .. } => !stream,
        Opcode::ScratchStore(_) | Opcode::Prefetch { .. } | Opcode::Yield => true,
        Opcode::ReduceLanes(_) => false,
        op => op.is_pure(),
    })
}

/// Whether scratch store `i` writes back what a load of the same buffer at the same index
/// read, selected by a bound predicate (true in the tile): `s[i] = p ? s[i] : z`, or
/// `s[i] = s[i]`.
fn writes_back(f: &Function, i: Inst, pset: &HashSet<Value>) -> bool {
    let d = &f.insts[i];
    let Opcode::ScratchStore(slot) = d.opcode else { return false };
    let [index, v] = d.args[..] else { return false };
    let loaded = |v: Value| {
        def(f, v)
            .is_some_and(|j| f.insts[j].opcode == Opcode::ScratchLoad(slot) && f.insts[j].args[0] == index)
    };
    loaded(v)
        || def(f, v).is_some_and(|j| {
            let s = &f.insts[j];
            s.opcode == Opcode::Select && pset.contains(&s.args[0]) && loaded(s.args[1])
        })
}

/// Whether the body of loop `l` uses its induction variable only through element indices:
/// as the start of `iota`, as the index of a contiguous access of a whole tile (or a
/// prefetch), or plus a loop invariant for those uses; and whether every lane of a tile is
/// a function of its element's index: no `iota` but of an index, no tile from outside the
/// loop but a splat (a lane `k` of the last tile is element `nb - L + k`, not `k`).
fn lanewise_in_iv(f: &Function, l: Inst, body: &Region) -> bool {
    let inside = defined_inside(f, l);
    let mut index = HashSet::from([body.args[0]]);
    for &i in &body.insts {
        let d = &f.insts[i];
        if d.opcode == Opcode::Iota && !index.contains(&d.args[0]) {
            return false;
        }
        let outside_tile = |a: &Value| {
            f.ty(*a).is_tile()
                && !inside.contains(a)
                && !def(f, *a).is_some_and(|j| f.insts[j].opcode == Opcode::Splat)
        };
        if d.args.iter().any(outside_tile) {
            return false;
        }
        for (k, a) in d.args.iter().enumerate() {
            if !index.contains(a) {
                continue;
            }
            let tile_result = d.results.first().is_some_and(|&r| f.ty(r).is_tile());
            let ok = match d.opcode {
                Opcode::Iota | Opcode::Prefetch { .. } => true,
                Opcode::Binary(BinOp::Add) if !inside.contains(&d.args[1 - k]) && d.args[0] != d.args[1] => {
                    index.insert(d.results[0]);
                    true
                }
                Opcode::Load { addr: Addressing::Contiguous, .. } => k == 1 && tile_result,
                Opcode::Store { addr: Addressing::Contiguous, .. } => k == 1 && f.ty(d.args[2]).is_tile(),
                Opcode::ScratchLoad(_) => k == 0 && tile_result,
                Opcode::ScratchStore(_) => k == 0 && f.ty(d.args[1]).is_tile(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}
