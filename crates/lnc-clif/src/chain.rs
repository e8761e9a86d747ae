//! One bounds check for a run of loops that sweep one range together.
//!
//! The tiler splits a pass over a row into sibling loops that continue where the previous
//! one stopped: `for i = 0 to a step 16`, `for i = a to b step 4`, `for i = b to n step 1`
//! (unrolled steady state, vector remainder, scalar tail). Checked per loop (`hoist.rs`)
//! that is a range check for every argument before each of them; and a layer norm makes
//! three passes over the same row. Here, in front of the first loop of such a run, each
//! argument the run reads or writes densely gets one check of the whole range instead,
//! and a later run over the same range of the same access reuses a check already made.
//!
//! A run is loops `L1 … Lm` of one region, in order, with nothing but pure scalar and tile
//! arithmetic between them, each with a constant positive step and each starting at the
//! previous one's end (the same value). An access through pointer `p` at `iv + k` is
//! *dense* in `Li` when it is the loop's only hoisted group for `p` and its tiles cover
//! `[iv, iv + step)` without gap. When the loop's trip span `ub - lb` is provably a
//! multiple of the step (both bounds multiples of it: constants, or `x & -2^j` with `2^j` a
//! multiple of the step), `Li` touches exactly `[lb + k, ub + k)`. When the bounds provably
//! do not decrease along the run (`lb1 ≤ ub1 ≤ … ≤ ubm`), the loops of a stretch where the
//! access is dense touch exactly `[lb_first + k, ub_last + k)`, and one check of that range
//! is the same as the per-loop checks: it fails exactly when one of them would, and
//! reports the same kind of element (the first outside, or the first past the end).
//!
//! Two kinds of loops may reach past their bounds (`Reach`), and lnc-tile's `stream` makes
//! both when it splits a row at its cache lines: the head and end loops index by
//! `min(iv, ub - step)`, whose last iteration moves back and may reach below `lb` (only if
//! `ub - lb < step`, which that pass never makes), and the middle loop's span is a multiple
//! of the step that no structural proof sees, so its last iteration could reach past `ub`.
//! lnc-tile's `overlap` makes a clamped loop of a row's tail, one iteration that does reach
//! below its `lb` (into elements the loops before it touched), from `full == 0 ? nb : full`,
//! where the scalar tail before it stops: the bounds' order is proved through the `select`.
//! The run's check then covers the range the loops that run reach, computed at run time
//! (the lowest clamp, the highest rounded end): still one range without gaps, since each
//! loop that runs touches at least its own bounds, and exactly the run's range when the
//! loops stay within their bounds. An earlier check of `[lb_first, ub_last)` does not
//! stand for such a check; a later run over that range may reuse it, as it covers more.
//!
//! A load and a store of the same elements through the same pointer in the same loops (a
//! row read, updated and written back) get one check between them, naming the first of
//! the two in the body: the access two checks in that order would have reported.
//!
//! A check is reused when a previous one of this region or an enclosing one, emitted
//! before, had the same pointer, site, element size and bounds (structurally equal values:
//! the tiler recomputes the bounds of every pass). It was made on every path here, so a
//! failure would already have stopped the program.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use lnc_lir::ranges::{const_int, full};
use lnc_lir::{self as lir, BinOp, DType, Opcode, Ty, ValueDef};

use crate::CodegenError;
use crate::base::FunctionCx;
use crate::hoist::{check_span, element_address, hoistable, last_start};

/// A range check made in the current scope: `ptr[first + k .. end + k)` of `site`.
#[derive(Clone, Copy)]
pub(crate) struct Proven {
    ptr: lir::Value,
    site: u32,
    size: u32,
    add: Option<lir::Value>,
    first: lir::Value,
    end: lir::Value,
}

/// How deep structural comparisons look through definitions (the tiler's bounds are a
/// few casts, clamps and masks of an argument), and proofs of `≤` and alignment: each
/// level may branch in two, so these stay small.
const DEPTH: u32 = 8;
const PROOF_DEPTH: u32 = 4;

fn def(f: &lir::Function, v: lir::Value) -> Option<&lir::InstData> {
    match f.values[v].def {
        ValueDef::Result(i, 0) => Some(&f.insts[i]),
        _ => None,
    }
}

/// Whether `a` and `b` always hold the same value: the same value, or results of the same
/// pure operation on the same operands.
fn same(f: &lir::Function, a: lir::Value, b: lir::Value, depth: u32) -> bool {
    if a == b {
        return true;
    }
    if depth == 0 || f.ty(a) != f.ty(b) {
        return false;
    }
    let (Some(da), Some(db)) = (def(f, a), def(f, b)) else { return false };
    // A scratch load reads memory the program writes: two of them may differ.
    let pure = da.opcode.is_pure() && !matches!(da.opcode, Opcode::ScratchLoad(_));
    pure && da.opcode == db.opcode
        && da.regions.is_empty()
        && da.results.len() == 1
        && db.results.len() == 1
        && da.args.len() == db.args.len()
        && da.args.iter().zip(&db.args).all(|(&x, &y)| same(f, x, y, depth - 1))
}

/// Whether `v` is provably a multiple of `step`.
fn aligned(f: &lir::Function, v: lir::Value, step: i64, depth: u32) -> bool {
    if step == 1 {
        return true;
    }
    if let Some(c) = const_int(f, v) {
        return c % step == 0;
    }
    let Some(d) = def(f, v) else { return false };
    if depth == 0 {
        return false;
    }
    match d.opcode {
        Opcode::Binary(BinOp::And) => [0, 1].iter().any(|&i| {
            const_int(f, d.args[i]).is_some_and(|m| m < 0 && (-m).count_ones() == 1 && (-m) % step == 0)
        }),
        Opcode::Binary(BinOp::Max | BinOp::Min | BinOp::Add | BinOp::Sub) => {
            aligned(f, d.args[0], step, depth - 1) && aligned(f, d.args[1], step, depth - 1)
        }
        _ => false,
    }
}

/// Whether `a ≤ b` always holds (signed, in their common integer type).
fn le(fx: &FunctionCx, a: lir::Value, b: lir::Value, depth: u32) -> bool {
    let f = fx.f;
    if same(f, a, b, DEPTH) {
        return true;
    }
    let (ra, rb) = (fx.ranges.of(f, a), fx.ranges.of(f, b));
    if ra.1 <= rb.0 {
        return true;
    }
    if depth == 0 {
        return false;
    }
    let below = |x: lir::Value| le(fx, x, b, depth - 1);
    let above = |x: lir::Value| le(fx, a, x, depth - 1);
    let by_a = def(f, a).is_some_and(|d| match d.opcode {
        // Clearing low bits never increases a two's-complement value.
        Opcode::Binary(BinOp::And) => const_int(f, d.args[1]).is_some_and(|m| m < 0) && below(d.args[0]),
        Opcode::Binary(BinOp::Max) => below(d.args[0]) && below(d.args[1]),
        Opcode::Binary(BinOp::Min) => below(d.args[0]) || below(d.args[1]),
        // Either value may be chosen (lnc-tile's `overlap` starts its tile where the
        // scalar tail stops, at `full == 0 ? nb : full`).
        Opcode::Select => below(d.args[1]) && below(d.args[2]),
        _ => false,
    });
    by_a || def(f, b).is_some_and(|d| match d.opcode {
        Opcode::Binary(BinOp::Max) => above(d.args[0]) || above(d.args[1]),
        Opcode::Binary(BinOp::Min) => above(d.args[0]) && above(d.args[1]),
        Opcode::Select => above(d.args[1]) && above(d.args[2]),
        _ => false,
    })
}

/// The loops of the run starting with the `for` at `insts[start]`: their instructions.
fn run_of(fx: &FunctionCx, insts: &[lir::Inst], start: usize) -> Vec<lir::Inst> {
    let f = fx.f;
    let positive_step = |l: lir::Inst| const_int(f, f.insts[l].args[2]).is_some_and(|s| s > 0);
    let mut run = vec![insts[start]];
    for &j in &insts[start + 1..] {
        let d = &f.insts[j];
        if d.opcode != Opcode::For {
            // Nothing with an effect or control flow between the loops.
            if d.opcode.is_pure() {
                continue;
            }
            break;
        }
        let prev = &f.insts[run[run.len() - 1]];
        if !positive_step(j) || d.args[0] != prev.args[1] || !fx.is_defined(d.args[1]) {
            break;
        }
        run.push(j);
    }
    run
}

/// What a check covers: pointer, element size and `k`.
type Checked = (lir::Value, u32, Option<lir::Value>);

/// Dense accesses of `for` instruction `l`, by (pointer, site, size, `k`): the accesses.
type Dense = Vec<((lir::Value, u32, u32, Option<lir::Value>), Vec<lir::Inst>)>;

/// How far past its bounds a loop of a run may reach.
#[derive(Clone, Copy, PartialEq)]
enum Reach {
    /// `ub - lb` is provably a multiple of the step: the loop touches `[lb, ub)`.
    Exact,
    /// The body indexes by `min(iv, t)` with `t = ub - step`, as lnc-tile's `stream` moves
    /// the last iteration of the loops before and after a row's streamed lines back: when
    /// the loop runs it touches `[min(lb, t), ub)`, below `lb` only if `ub - lb < step`.
    Clamped(lir::Value),
    /// Its span is not known to be a multiple of the step: the last iteration may reach
    /// past `ub`, to `lb + ⌈(ub - lb) / step⌉·step`, which the interval analysis proves
    /// does not wrap in the loop's type (else the loop is not chained).
    Rounded,
}

/// The dense accesses of `for` instruction `l`, and how far it reaches.
fn dense(fx: &FunctionCx, l: lir::Inst) -> (Dense, Reach) {
    let f = fx.f;
    let d = &f.insts[l];
    let Some(step) = const_int(f, d.args[2]) else { return (Vec::new(), Reach::Exact) };
    let groups = hoistable(fx, l);
    let clamp = groups.first().and_then(|g| g.clamp);
    let reach = match clamp {
        // `t = ub - step` must not wrap in the loop's type (it would stop clamping, and the
        // last iteration reach past `ub`): the interval analysis must bound `ub` a step
        // above the type's minimum (found by review).
        Some(t)
            if ends_at(f, t, d.args[1], step)
                && fx.ranges.of(f, d.args[1]).0 >= full(f.ty(d.args[1]).dtype()).0 + i128::from(step) =>
        {
            Reach::Clamped(t)
        }
        Some(_) => return (Vec::new(), Reach::Exact),
        None if aligned(f, d.args[0], step, PROOF_DEPTH) && aligned(f, d.args[1], step, PROOF_DEPTH) => {
            Reach::Exact
        }
        // The rounded end, at most `ub - 1 + step`, must not wrap in the loop's type (the
        // check would then end at `ub` and miss the last iteration's elements past it): the
        // interval analysis must bound `ub` a step below the type's maximum.
        None if fx.ranges.of(f, d.args[1]).1 <= full(f.ty(d.args[1]).dtype()).1 - i128::from(step) => {
            Reach::Rounded
        }
        None => return (Vec::new(), Reach::Exact),
    };
    let mut out: Dense = Vec::new();
    // Chained checks add `k` in the loops' type: widened offsets keep their own.
    for g in groups.iter().filter(|g| !g.wide && g.clamp == clamp) {
        let key = (g.ptr, g.site, g.size, g.add);
        let only = groups.iter().filter(|h| (h.ptr, h.site, h.size, h.add) == key).count() == 1;
        if only && g.lo == 0 && g.hi + g.lanes as i64 == step {
            out.push((key, g.insts.clone()));
        }
    }
    (out, reach)
}

/// Whether `t` is `ub - step`.
fn ends_at(f: &lir::Function, t: lir::Value, ub: lir::Value, step: i64) -> bool {
    def(f, t).is_some_and(|d| {
        d.opcode == Opcode::Binary(BinOp::Sub)
            && same(f, d.args[0], ub, DEPTH)
            && const_int(f, d.args[1]) == Some(step)
    })
}

/// In checked mode, before the `for` at `insts[start]`: one range check per dense access
/// of the run of loops it starts (or none when an earlier check covers it), marking the
/// accesses checked.
pub(crate) fn emit_run_checks(
    fx: &mut FunctionCx,
    insts: &[lir::Inst],
    start: usize,
) -> Result<(), CodegenError> {
    if !fx.opts.checked {
        return Ok(());
    }
    let f = fx.f;
    if !fx.is_defined(f.insts[insts[start]].args[1]) {
        return Ok(());
    }
    let run = run_of(fx, insts, start);
    let lb = f.insts[insts[start]].args[0];
    if !fx.is_defined(lb) || f.ty(lb) != Ty::Scalar(f.ty(lb).dtype()) || !f.ty(lb).dtype().is_int() {
        return Ok(());
    }
    // The bounds must not decrease along the run, else the loops' ranges could leave gaps.
    let mut monotone = run.len();
    for (i, &l) in run.iter().enumerate() {
        let d = &f.insts[l];
        if !le(fx, d.args[0], d.args[1], PROOF_DEPTH) {
            monotone = i;
            break;
        }
    }
    let run = &run[..monotone];
    let dense: Vec<(Dense, Reach)> = run.iter().map(|&l| dense(fx, l)).collect();
    let dt = f.ty(lb).dtype();
    // Each key of the first loop, over the loops from the first that keep it dense.
    // Checks made here, by pointer, element size, `k` and loops: a load and a store of the
    // same elements (a read-modify-write) need one, which reports the first of them in the
    // body, as their two checks would.
    let mut made: Vec<(Checked, usize)> = Vec::new();
    for (key, _) in dense.first().map(|d| d.0.clone()).unwrap_or_default() {
        let mut stretch = Vec::new();
        let mut inexact = Vec::new();
        for (&l, (d, reach)) in run.iter().zip(&dense) {
            match d.iter().find(|(k, _)| *k == key) {
                Some((_, accesses)) => stretch.push(accesses),
                None => break,
            }
            if *reach != Reach::Exact {
                inexact.push((l, *reach));
            }
        }
        // A loop that may reach past its bounds may reach past the run's range: no earlier
        // check of that range alone covers it.
        if stretch.len() < 2 && (!inexact.is_empty() || !covered(fx, key, lb, f.insts[run[0]].args[1])) {
            // One loop alone: its own hoisted check (`hoist.rs`) is as good.
            continue;
        }
        let end = f.insts[run[stretch.len() - 1]].args[1];
        let loops = stretch.len();
        let accesses: Vec<lir::Inst> = stretch.into_iter().flatten().copied().collect();
        let (ptr, _, size, add) = key;
        if made.contains(&((ptr, size, add), loops)) {
            record(fx, key, (lb, end));
        } else {
            let reach = if inexact.is_empty() { None } else { Some(reach_of(fx, (lb, end), &inexact, dt)?) };
            emit_check(fx, key, (lb, end), dt, reach)?;
            made.push(((ptr, size, add), loops));
        }
        fx.prechecked.extend(accesses);
    }
    Ok(())
}

/// The indices `[first, end)` that the loops of a run over `[lb, end)` with bounds in order
/// touch, given those that may reach past their own bounds (`inexact`): from the lowest of
/// `lb` and the clamps of the clamped loops that run, to the highest of `end` and the
/// rounded ends of the others that run. Each loop that runs touches at least its own
/// bounds, which continue one another: the range has no gap.
fn reach_of(
    fx: &mut FunctionCx,
    (lb, end): (lir::Value, lir::Value),
    inexact: &[(lir::Inst, Reach)],
    dt: DType,
) -> Result<(Value, Value), CodegenError> {
    let signed = dt.is_signed();
    let cc = if signed { IntCC::SignedLessThan } else { IntCC::UnsignedLessThan };
    let (lb, end) = (fx.scalar(lb)?, fx.scalar(end)?);
    let (mut first, mut last) = (lb, end);
    for &(l, reach) in inexact {
        let d = &fx.f.insts[l];
        let step = const_int(fx.f, d.args[2]).unwrap_or(1);
        let (lo, hi) = (fx.scalar(d.args[0])?, fx.scalar(d.args[1])?);
        let runs = fx.bcx.ins().icmp(cc, lo, hi);
        match reach {
            Reach::Clamped(t) => {
                let t = fx.scalar(t)?;
                let low = fx.bcx.ins().select(runs, t, lb);
                first = if signed { fx.bcx.ins().smin(first, low) } else { fx.bcx.ins().umin(first, low) };
            }
            Reach::Rounded => {
                // One step past the last iteration's start, as `hoist.rs` counts the trips.
                let start = last_start(fx, lo, hi, step);
                let reached = fx.bcx.ins().iadd_imm_s(start, step);
                let high = fx.bcx.ins().select(runs, reached, end);
                last = if signed { fx.bcx.ins().smax(last, high) } else { fx.bcx.ins().umax(last, high) };
            }
            Reach::Exact => {}
        }
    }
    Ok((first, last))
}

/// Whether a check in scope already covers `key` over `[first, end)`.
fn covered(
    fx: &FunctionCx,
    key: (lir::Value, u32, u32, Option<lir::Value>),
    first: lir::Value,
    end: lir::Value,
) -> bool {
    let f = fx.f;
    let (ptr, site, size, add) = key;
    fx.proven.iter().flatten().any(|p| {
        (p.ptr, p.site, p.size) == (ptr, site, size)
            && match (p.add, add) {
                (None, None) => true,
                (Some(a), Some(b)) => same(f, a, b, DEPTH),
                _ => false,
            }
            && same(f, p.first, first, DEPTH)
            && same(f, p.end, end, DEPTH)
    })
}

/// Checks `ptr[first + k .. end + k)` when it is not empty, unless a check in scope did;
/// or, when given, the range `reach` (in Cranelift values) that contains it, which is then
/// checked whatever was before (the range recorded as checked is still `[first, end)`).
fn emit_check(
    fx: &mut FunctionCx,
    key: (lir::Value, u32, u32, Option<lir::Value>),
    (first, end): (lir::Value, lir::Value),
    dt: DType,
    reach: Option<(Value, Value)>,
) -> Result<(), CodegenError> {
    if reach.is_none() && covered(fx, key, first, end) {
        return Ok(());
    }
    let (ptr, site, size, add) = key;
    let (mut lo, hi) = match reach {
        Some(r) => r,
        None => (fx.scalar(first)?, fx.scalar(end)?),
    };
    let cc = if dt.is_signed() { IntCC::SignedLessThan } else { IntCC::UnsignedLessThan };
    let nonempty = fx.bcx.ins().icmp(cc, lo, hi);
    // The last element's index, `k` added in the loops' type as the body adds it, and one
    // element past it in addresses: the end itself plus `k` could wrap where the body's
    // last index does not (found by review).
    let mut last = fx.bcx.ins().iadd_imm_s(hi, -1);
    if let Some(k) = add {
        let k = fx.scalar(k)?;
        lo = fx.bcx.ins().iadd(lo, k);
        last = fx.bcx.ins().iadd(last, k);
    }
    let check = fx.bcx.create_block();
    let cont = fx.bcx.create_block();
    fx.bcx.ins().brif(nonempty, check, &[], cont, &[]);
    fx.bcx.switch_to_block(check);
    let base = fx.scalar(ptr)?;
    let first_addr = element_address(fx, base, lo, dt, size);
    let last_addr = element_address(fx, base, last, dt, size);
    let end_addr = fx.bcx.ins().iadd_imm_s(last_addr, i64::from(size));
    check_span(fx, site, first_addr, end_addr, size)?;
    fx.bcx.ins().jump(cont, &[]);
    fx.bcx.switch_to_block(cont);
    record(fx, key, (first, end));
    Ok(())
}

/// Records that `ptr[first + k .. end + k)` of `key` was checked in the current scope.
fn record(
    fx: &mut FunctionCx,
    key: (lir::Value, u32, u32, Option<lir::Value>),
    (first, end): (lir::Value, lir::Value),
) {
    let (ptr, site, size, add) = key;
    if let Some(scope) = fx.proven.last_mut() {
        scope.push(Proven { ptr, site, size, add, first, end });
    }
}
