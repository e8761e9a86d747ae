//! Bounds checks hoisted out of loops: one range check per access before a loop instead
//! of one per iteration.
//!
//! In `for iv = lb to ub step s` (s a positive constant) an unmasked access at the top
//! level of the body, through a pointer defined before the loop, at offset `iv` or
//! `iv + k` (`k` defined before the loop), touches the elements from `first = lb (+ k)`
//! to `last (+ k) + lanes - 1`, where `last = lb + ((ub - lb - 1) / s)·s` is the last
//! value of `iv`. When the loop runs at all, those elements are checked once, before the
//! first iteration, and the access itself is emitted unchecked.
//!
//! Offsets are computed in the loop's integer type, wrapping as the body computes them.
//! A wrap inside the loop makes `first` come after `last`, which fails the check: such a
//! launch is reported as out of bounds even in the one case where every element would
//! still have been inside (a buffer spanning the whole 32-bit range of offsets).
//!
//! A failed check reports the first access, in body order, whose range leaves its
//! argument's bounds, and the first element of that range outside them — the element
//! the per-iteration checks would have reported for that access. Nothing of the loop has
//! run when it fails (a failed launch's memory is unspecified either way), and an access
//! later in the body may fault before an earlier one would have in the per-iteration
//! order: the launch fails either way, naming a real out-of-bounds access.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use lnc_lir::ranges::const_int;
use lnc_lir::{self as lir, Addressing, BinOp, DType, Opcode, Ty, ValueDef};

use crate::CodegenError;
use crate::base::{ArgBounds, FunctionCx, block_args};

/// Accesses whose checks are hoisted as one: through `ptr` at `iv + k` (`k` a value) or
/// at `iv + c` for constants `c` from `lo` to `hi` whose tiles leave no gap (the copies
/// of an unrolled body).
pub(crate) struct Hoisted {
    pub(crate) insts: Vec<lir::Inst>,
    pub(crate) ptr: lir::Value,
    /// `k` of `iv + k`, when not a constant.
    pub(crate) add: Option<lir::Value>,
    pub(crate) lo: i64,
    pub(crate) hi: i64,
    pub(crate) site: u32,
    pub(crate) lanes: u32,
    pub(crate) size: u32,
    /// The offset is `i64(iv + c) + k` of a 32-bit `iv` (`off + tl.arange(...)` with a
    /// 64-bit `off`): `lo`/`hi` are added before widening, as the body computes them.
    pub(crate) wide: bool,
    /// The body indexes by `min(iv, t)` instead of `iv` (`t` defined before the loop): the
    /// first and last values of `iv` are clamped at `t` too.
    pub(crate) clamp: Option<lir::Value>,
}

/// The accesses of `for` instruction `l` whose checks can be hoisted (and were not
/// checked already, `chain.rs`).
pub(crate) fn hoistable(fx: &FunctionCx, l: lir::Inst) -> Vec<Hoisted> {
    let f = fx.f;
    let region = &f.insts[l].regions[0];
    let iv = region.args[0];
    // With a 64-bit index the addresses of a loop's range may span 2^64 bytes or more,
    // wrapping around: a check of the first and last address would then pass while the
    // accesses between them leave the buffer. Such loops keep their per-access checks.
    if f.ty(iv).dtype().bits() == 64 {
        return Vec::new();
    }
    // `iv + k` values defined at the top level of the body.
    let mut shifted: Vec<(lir::Value, lir::Value)> = Vec::new();
    // `i64(iv + c)` (`c` a constant, 0 for `iv`) of a 32-bit `iv`, and those plus `k`.
    let narrow = f.ty(iv) == Ty::Scalar(DType::I32);
    // A body that starts with `m = min(iv, t)`, `t` defined before the loop, indexes by
    // `m` (lnc-tile's `stream` moves a loop's last iteration back so): `m` runs over the
    // values of `iv` clamped at `t`, a range as contiguous as theirs.
    let (iv, clamp) = match region.insts.first().map(|&i| &f.insts[i]) {
        Some(d)
            if d.opcode == Opcode::Binary(BinOp::Min)
                && narrow
                && d.args[0] == iv
                && d.args[1] != iv
                && fx.is_defined(d.args[1]) =>
        {
            (d.results[0], Some(d.args[1]))
        }
        _ => (iv, None),
    };
    let mut widened: Vec<(lir::Value, i64)> = Vec::new();
    let mut wide_shifted: Vec<(lir::Value, i64, lir::Value)> = Vec::new();
    let mut out = Vec::new();
    for &j in &region.insts {
        let d = &f.insts[j];
        match d.opcode {
            Opcode::Cast if narrow && f.ty(d.results[0]) == Ty::Scalar(DType::I64) => {
                let x = d.args[0];
                let c = if x == iv {
                    Some(0)
                } else {
                    shifted.iter().find(|(v, _)| *v == x).and_then(|&(_, k)| const_int(f, k))
                };
                if let Some(c) = c {
                    widened.push((d.results[0], c));
                }
                continue;
            }
            Opcode::Binary(BinOp::Add)
                if !widened.is_empty() && f.ty(d.results[0]) == Ty::Scalar(DType::I64) =>
            {
                let (a, b) = (d.args[0], d.args[1]);
                let wide_of = |v: lir::Value| widened.iter().find(|(w, _)| *w == v).map(|&(_, c)| c);
                let hit = match (wide_of(a), wide_of(b)) {
                    (Some(c), _) if fx.is_defined(b) => Some((c, b)),
                    (_, Some(c)) if fx.is_defined(a) => Some((c, a)),
                    _ => None,
                };
                if let Some((c, k)) = hit {
                    wide_shifted.push((d.results[0], c, k));
                }
                continue;
            }
            Opcode::Binary(BinOp::Add) => {
                let (a, b) = (d.args[0], d.args[1]);
                // `k` must be known before the loop: defined there, or a constant.
                let known = |v: lir::Value| fx.is_defined(v) || const_int(f, v).is_some();
                if a == iv && known(b) {
                    shifted.push((d.results[0], b));
                } else if b == iv && known(a) {
                    shifted.push((d.results[0], a));
                }
                continue;
            }
            Opcode::Load { addr, has_mask: false, site, .. }
            | Opcode::Store { addr, has_mask: false, site, .. }
                if !fx.prechecked.contains(&j) =>
            {
                let (ptr, offset) = (d.args[0], d.args[1]);
                let Ty::Ptr(elem) = f.ty(ptr) else { continue };
                let lanes = match (addr, &d.opcode) {
                    (Addressing::Contiguous, Opcode::Load { .. }) => f.ty(d.results[0]).lanes(),
                    (Addressing::Contiguous, _) => f.ty(d.args[2]).lanes(),
                    (Addressing::Scalar, _) => 1,
                    (Addressing::Gather, _) => continue,
                };
                if lanes == 0 || !fx.is_defined(ptr) {
                    continue;
                }
                let (lanes, size) = (lanes as u32, elem.size());
                let wide = match widened.iter().find(|(v, _)| *v == offset) {
                    Some(&(_, c)) => Some((None, c)),
                    None => wide_shifted.iter().find(|(v, _, _)| *v == offset).map(|&(_, c, k)| (Some(k), c)),
                };
                let single = |add, c, wide| Hoisted {
                    insts: vec![j],
                    ptr,
                    add,
                    lo: c,
                    hi: c,
                    site,
                    lanes,
                    size,
                    wide,
                    clamp,
                };
                if let Some((add, c)) = wide {
                    // One check each: their ranges are joined in the loop's type only.
                    out.push(single(add, c, true));
                    continue;
                }
                let (add, c) = if offset == iv {
                    (None, 0)
                } else if let Some(&(_, k)) = shifted.iter().find(|(v, _)| *v == offset) {
                    match const_int(f, k) {
                        Some(c) => (None, c),
                        None => (Some(k), 0),
                    }
                } else {
                    continue;
                };
                let joins = |h: &Hoisted| {
                    !h.wide
                        && h.add.is_none()
                        && add.is_none()
                        && (h.ptr, h.site, h.lanes, h.size) == (ptr, site, lanes, size)
                        && c >= h.lo - lanes as i64
                        && c <= h.hi + lanes as i64
                };
                match out.iter_mut().find(|h| joins(h)) {
                    Some(h) => {
                        h.insts.push(j);
                        h.lo = h.lo.min(c);
                        h.hi = h.hi.max(c);
                    }
                    None => out.push(single(add, c, false)),
                }
            }
            _ => {}
        }
    }
    // Consecutive iterations must leave no gap between their ranges either.
    let step = const_int(f, f.insts[l].args[2]).unwrap_or(i64::MAX);
    let mut split = Vec::new();
    for h in out {
        if h.hi - h.lo + h.lanes as i64 >= step || h.insts.len() == 1 {
            split.push(h);
            continue;
        }
        for &inst in &h.insts {
            let c = shift_of(f, inst, iv);
            split.push(Hoisted { insts: vec![inst], lo: c, hi: c, ..h.clone_shape() });
        }
    }
    split
}

/// The constant `c` of an access at `iv + c` (0 at `iv`).
fn shift_of(f: &lir::Function, inst: lir::Inst, iv: lir::Value) -> i64 {
    let offset = f.insts[inst].args[1];
    if offset == iv {
        return 0;
    }
    match f.values[offset].def {
        ValueDef::Result(i, _) => f.insts[i].args.iter().find_map(|&a| const_int(f, a)).unwrap_or(0),
        ValueDef::RegionArg(..) => 0,
    }
}

impl Hoisted {
    /// The same accesses' pointer, site and element shape, with no instructions.
    fn clone_shape(&self) -> Hoisted {
        Hoisted { insts: Vec::new(), add: self.add, lo: self.lo, hi: self.hi, ..*self }
    }
}

/// In checked mode, emits the hoisted checks of `for` instruction `l` in a block taken
/// when the loop runs (`runs`), continuing to `body` with `body_args`, else to `exit`
/// with `exit_args`. Returns false, emitting nothing, when no check can be hoisted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_loop_entry(
    fx: &mut FunctionCx,
    l: lir::Inst,
    d: DType,
    (lb, ub): (Value, Value),
    runs: Value,
    (body, body_args): (cranelift_codegen::ir::Block, &[Value]),
    (exit, exit_args): (cranelift_codegen::ir::Block, &[Value]),
) -> Result<bool, CodegenError> {
    let f = fx.f;
    let Some(step) = const_int(f, f.insts[l].args[2]).filter(|&s| s > 0) else { return Ok(false) };
    if !fx.opts.checked {
        return Ok(false);
    }
    let accesses = hoistable(fx, l);
    if accesses.is_empty() {
        return Ok(false);
    }
    let pre = fx.bcx.create_block();
    fx.bcx.ins().brif(runs, pre, &[], exit, &block_args(exit_args));
    fx.bcx.switch_to_block(pre);
    let last = last_start(fx, lb, ub, step);
    for a in accesses {
        // The constants go in first: for a widened offset, `i64(iv + c) + k` computes
        // `iv + c` in the loop's type (wrapping as the body does). With a 32-bit `iv` the
        // range spans less than 2^35 bytes, so its addresses are contiguous modulo 2^64
        // and the check of its ends is exact.
        let (mut first_off, mut last_off) = (lb, last);
        if let Some(t) = a.clamp {
            let t = fx.scalar(t)?;
            first_off = fx.bcx.ins().smin(first_off, t);
            last_off = fx.bcx.ins().smin(last_off, t);
        }
        if a.lo != 0 {
            first_off = fx.bcx.ins().iadd_imm_s(first_off, a.lo);
        }
        if a.hi != 0 {
            last_off = fx.bcx.ins().iadd_imm_s(last_off, a.hi);
        }
        let dt = if a.wide {
            first_off = fx.bcx.ins().sextend(cranelift_codegen::ir::types::I64, first_off);
            last_off = fx.bcx.ins().sextend(cranelift_codegen::ir::types::I64, last_off);
            DType::I64
        } else {
            d
        };
        if let Some(k) = a.add {
            let k = fx.scalar(k)?;
            first_off = fx.bcx.ins().iadd(first_off, k);
            last_off = fx.bcx.ins().iadd(last_off, k);
        }
        let base = fx.scalar(a.ptr)?;
        let first = element_address(fx, base, first_off, dt, a.size);
        let last_elem = element_address(fx, base, last_off, dt, a.size);
        let end = fx.bcx.ins().iadd_imm_s(last_elem, (a.lanes * a.size) as i64);
        check_span(fx, a.site, first, end, a.size)?;
        fx.prechecked.extend(a.insts.iter().copied());
    }
    fx.bcx.ins().jump(body, &block_args(body_args));
    Ok(true)
}

/// The last value of `iv` in `for iv = lb to ub step s` when it runs (`lb < ub`):
/// `lb + ((ub - lb - 1) / s)·s`, at most `ub - 1`, so it does not wrap. The distance is
/// divided unsigned: it may exceed the type's signed maximum.
pub(crate) fn last_start(fx: &mut FunctionCx, lb: Value, ub: Value, step: i64) -> Value {
    let dist = fx.bcx.ins().isub(ub, lb);
    let dist = fx.bcx.ins().iadd_imm_s(dist, -1);
    let trips = if (step as u64).is_power_of_two() {
        fx.bcx.ins().ushr_imm_u(dist, step.trailing_zeros() as i64)
    } else {
        let ty = fx.bcx.func.dfg.value_type(dist);
        let s = crate::base::iconst(&mut fx.bcx, ty, step);
        fx.bcx.ins().udiv(dist, s)
    };
    let span = fx.bcx.ins().imul_imm_s(trips, step);
    fx.bcx.ins().iadd(lb, span)
}

pub(crate) fn element_address(fx: &mut FunctionCx, base: Value, index: Value, d: DType, size: u32) -> Value {
    let index = crate::num::int_to_i64(&mut fx.bcx, d, index);
    let scaled = fx.bcx.ins().ishl_imm_u(index, size.trailing_zeros() as i64);
    fx.bcx.ins().iadd(base, scaled)
}

/// Branches to the out-of-bounds exit unless `[first, end)` lies inside the bounds of
/// the site's argument: `first - origin ≤ end - origin ≤ span`, unsigned.
pub(crate) fn check_span(
    fx: &mut FunctionCx,
    site: u32,
    first: Value,
    end: Value,
    size: u32,
) -> Result<(), CodegenError> {
    let s = fx.site(site)?;
    let ArgBounds { origin, span } = *fx
        .checked_args
        .get(&s.arg)
        .ok_or_else(|| CodegenError::InvalidIr(format!("site {site} was not seen before code generation")))?;
    let rel_first = fx.bcx.ins().isub(first, origin);
    let rel_end = fx.bcx.ins().isub(end, origin);
    let inverted = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThan, rel_first, rel_end);
    let past = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThan, rel_end, span);
    let bad = fx.bcx.ins().bor(inverted, past);
    let cont = fx.bcx.create_block();
    let fail = fx.bcx.create_block();
    fx.bcx.set_cold_block(fail);
    fx.bcx.ins().brif(bad, fail, &[], cont, &[]);

    fx.bcx.switch_to_block(fail);
    // The shared exit reports `first` when it is outside, else the first element past the end.
    fx.fail_out_of_bounds(site, first, size.trailing_zeros())?;
    fx.bcx.switch_to_block(cont);
    Ok(())
}
