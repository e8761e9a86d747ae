//! Loads, stores, atomics, scratch buffers and the bounds checks of safe launches.
//!
//! A contiguous tile whose lanes are all enabled is one vector access per part (one
//! range check in checked mode). Otherwise every lane is its own scalar access, and a
//! disabled lane accesses a dummy location in the program context instead of its
//! element, so a disabled lane's element is never touched, not even read: that is what
//! lets a mask guard a ragged tail at the very end of a buffer. The lanes are checked
//! together, with one branch.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AtomicRmwOp, InstBuilder, MemFlagsData, Type, Value, types};
use lnc_lir::{self as lir, Addressing, AtomicOp, DType, Ty};
use lnc_runtime::abi::ctx_offsets;

use crate::base::{ArgBounds, FunctionCx, block_args, data_flags};
use crate::num;
use crate::value::{self, CVal, Tile};
use crate::{CodegenError, base, half};

/// The address operands of an access.
#[derive(Clone, Copy)]
pub(crate) struct Access {
    pub(crate) ptr: lir::Value,
    pub(crate) offset: lir::Value,
    pub(crate) addr: Addressing,
    pub(crate) site: u32,
    /// Bounds-checked here (false when the check was hoisted out of the loop).
    pub(crate) checked: bool,
}

/// Which atomic instruction.
pub(crate) enum AtomicKind {
    Rmw(AtomicOp),
    Cas,
}

fn invalid(msg: impl Into<String>) -> CodegenError {
    CodegenError::InvalidIr(msg.into())
}

/// The pointee dtype of a pointer operand.
fn pointee(fx: &FunctionCx, ptr: lir::Value) -> Result<DType, CodegenError> {
    match fx.f.ty(ptr) {
        Ty::Ptr(d) => Ok(d),
        ty => Err(invalid(format!("{ptr}: {ty} used as a pointer"))),
    }
}

/// `base + index * size` with `index` extended to 64 bits by its signedness.
fn element_address(fx: &mut FunctionCx, base: Value, index: Value, index_dtype: DType, size: u32) -> Value {
    let index = num::int_to_i64(&mut fx.bcx, index_dtype, index);
    let scaled = if size == 1 { index } else { fx.bcx.ins().ishl_imm_u(index, size.trailing_zeros() as i64) };
    fx.bcx.ins().iadd(base, scaled)
}

/// `base + offset * size` for the scalar loop-IR offset `offset`: from its 64-bit form
/// when it has one (a loop index, `induction::wide_index`), so that x86 addressing folds the
/// scaling and no sign extension is needed.
pub(crate) fn offset_address(
    fx: &mut FunctionCx,
    base: Value,
    offset: lir::Value,
    size: u32,
) -> Result<Value, CodegenError> {
    let (at, disp) = split_address(fx, base, offset, size)?;
    Ok(joined(fx, at, disp))
}

/// [`offset_address`] as an address and a constant displacement for the memory
/// instruction's own offset field. Cranelift folds `iadd(b, ishl(i, k))` and that field
/// into one x86 address wherever a load goes, but it folds only one level of addition into
/// a load merged into an arithmetic instruction (`vmulps (mem), …`): an address
/// `(b + i·4) + 16` would be computed with a `lea` first, and `(area + off) + i·4` with one
/// for `area + off`, which Cranelift rematerializes in every loop iteration.
pub(crate) fn split_address(
    fx: &mut FunctionCx,
    base: Value,
    offset: lir::Value,
    size: u32,
) -> Result<(Value, i32), CodegenError> {
    if let Some((w, c)) = crate::induction::wide_index(fx, offset)
        && let Ok(disp) = i32::try_from(c * size as i64)
    {
        let scaled = if size == 1 { w } else { fx.bcx.ins().ishl_imm_u(w, size.trailing_zeros() as i64) };
        return Ok((fx.bcx.ins().iadd(base, scaled), disp));
    }
    let index = fx.scalar(offset)?;
    Ok((element_address(fx, base, index, fx.f.ty(offset).dtype(), size), 0))
}

/// The address `at + disp` as one value (for range checks).
fn joined(fx: &mut FunctionCx, at: Value, disp: i32) -> Value {
    if disp == 0 { at } else { fx.bcx.ins().iadd_imm_s(at, disp as i64) }
}

pub(crate) fn codegen_ptr_add(
    fx: &mut FunctionCx,
    ptr: lir::Value,
    offset: lir::Value,
) -> Result<CVal, CodegenError> {
    let d = pointee(fx, ptr)?;
    let base = fx.scalar(ptr)?;
    Ok(CVal::Scalar(offset_address(fx, base, offset, d.size())?))
}

/// The split address ([`split_address`]) of the contiguous access `a` of `lanes`
/// elements, bounds-checked in checked mode.
pub(crate) fn checked_contiguous(
    fx: &mut FunctionCx,
    a: Access,
    lanes: u32,
) -> Result<(Value, i32), CodegenError> {
    let d = pointee(fx, a.ptr)?;
    let base = fx.scalar(a.ptr)?;
    let at = split_address(fx, base, a.offset, d.size())?;
    check_split(fx, a, at, lanes, d.size())?;
    Ok(at)
}

/// In checked mode, branches to the out-of-bounds exit unless the `lanes` consecutive
/// elements of `size` bytes at `addr` lie inside the bounds of the site's argument. The
/// fault names the first element outside.
/// [`check_range`] of a split address ([`split_address`]).
fn check_split(
    fx: &mut FunctionCx,
    a: Access,
    (at, disp): (Value, i32),
    lanes: u32,
    size: u32,
) -> Result<(), CodegenError> {
    if !fx.opts.checked || !a.checked {
        return Ok(());
    }
    let addr = joined(fx, at, disp);
    check_range(fx, a, addr, lanes, size)
}

fn check_range(
    fx: &mut FunctionCx,
    a: Access,
    addr: Value,
    lanes: u32,
    size: u32,
) -> Result<(), CodegenError> {
    let site = a.site;
    let s = fx.site(site)?;
    if !fx.opts.checked || !a.checked {
        return Ok(());
    }
    let ArgBounds { origin, span } = *fx
        .checked_args
        .get(&s.arg)
        .ok_or_else(|| invalid(format!("site {site} was not seen before code generation")))?;
    let bytes = (lanes * size) as i64;
    // One unsigned comparison: `addr - origin` wraps to a huge number below the range,
    // and the limit is 0 when not even one access fits. The limit is loop-invariant.
    let limit = fx.bcx.ins().iadd_imm_s(span, 1 - bytes);
    let zero = fx.bcx.ins().iconst(types::I64, 0);
    let limit = fx.bcx.ins().smax(limit, zero);
    let rel = fx.bcx.ins().isub(addr, origin);
    let bad = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, rel, limit);
    let cont = fx.bcx.create_block();
    let fail = fx.bcx.create_block();
    fx.bcx.set_cold_block(fail);
    // The failure edge first: Cranelift's LICM walks the dominator tree in reverse
    // post-order and loses track of the enclosing loop after visiting a block outside
    // it, so the in-loop continuation must come first in that order.
    fx.bcx.ins().brif(bad, fail, &[], cont, &[]);

    fx.bcx.switch_to_block(fail);
    fx.fail_out_of_bounds(site, addr, size.trailing_zeros())?;
    fx.bcx.switch_to_block(cont);
    Ok(())
}

/// Runs `body` only when `mask` (an `i8`) is non-zero; the value `body` returns, or
/// `other` when the mask is zero, is the result.
fn guarded(
    fx: &mut FunctionCx,
    mask: Option<Value>,
    other: Option<Value>,
    body: impl FnOnce(&mut FunctionCx) -> Result<Option<Value>, CodegenError>,
) -> Result<Option<Value>, CodegenError> {
    let Some(mask) = mask else { return body(fx) };
    let on = fx.bcx.create_block();
    let join = fx.bcx.create_block();
    let result = other.map(|o| {
        let ty = fx.bcx.func.dfg.value_type(o);
        fx.bcx.append_block_param(join, ty)
    });
    let other_args: Vec<Value> = other.into_iter().collect();
    fx.bcx.ins().brif(mask, on, &[], join, &block_args(&other_args));
    fx.bcx.switch_to_block(on);
    let v = body(fx)?;
    let v: Vec<Value> = v.into_iter().collect();
    if v.len() != other_args.len() {
        return Err(invalid("a masked access yields no value for its masked-off lanes"));
    }
    fx.bcx.ins().jump(join, &block_args(&v));
    fx.bcx.switch_to_block(join);
    Ok(result)
}

/// Loads one scalar of `d` (`i1`: a byte, normalized to 0 or 1).
fn load_scalar(fx: &mut FunctionCx, d: DType, addr: Value, offset: i32) -> Result<Value, CodegenError> {
    if half::is_half(d) {
        return Ok(half::load_scalar(fx, d, addr, offset));
    }
    let ty = value::scalar_type(d)?;
    let v = fx.bcx.ins().load(ty, data_flags(), addr, offset);
    Ok(if d == DType::I1 { fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, v, 0) } else { v })
}

/// Loads one scalar of `d` with an atomic load (`volatile=True`): Cranelift neither merges
/// it with another load nor moves it out of a loop, as it may a plain load when nothing in
/// the loop writes memory it knows of.
fn load_scalar_volatile(fx: &mut FunctionCx, d: DType, addr: Value) -> Result<Value, CodegenError> {
    let bits = match d.size() {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    };
    let raw = fx.bcx.ins().atomic_load(bits, data_flags(), addr);
    Ok(match d {
        DType::I1 => fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, raw, 0),
        DType::F32 | DType::F64 => fx.bcx.ins().bitcast(value::scalar_type(d)?, MemFlagsData::new(), raw),
        _ if half::is_half(d) => half::widen_bits(fx, d, raw),
        _ => raw,
    })
}

/// Loads `lanes` consecutive elements at `addr` in the canonical form.
fn load_full(fx: &mut FunctionCx, d: DType, lanes: u8, addr: Value, disp: i32) -> Result<Tile, CodegenError> {
    let per = value::canonical_per(d, lanes)?;
    if d == DType::I1 || per == 1 {
        let mut ls = Vec::with_capacity(lanes as usize);
        for k in 0..lanes as i32 {
            ls.push(load_scalar(fx, d, addr, disp + k * d.size() as i32)?);
        }
        return value::from_lanes(&mut fx.bcx, d, per, &ls);
    }
    if half::is_half(d) {
        return Ok(Tile { per, parts: half::load_parts(fx, d, (lanes / per) as usize, addr, disp) });
    }
    let ty = value::part_type(d, per)?;
    let parts =
        (0..(lanes / per) as i32).map(|j| fx.bcx.ins().load(ty, data_flags(), addr, disp + j * 16)).collect();
    Ok(Tile { per, parts })
}

/// Stores one scalar of `d` (half dtypes: converted to their 16 bits).
fn store_scalar(fx: &mut FunctionCx, d: DType, v: Value, addr: Value, offset: i32) {
    if half::is_half(d) {
        half::store_scalar(fx, d, v, addr, offset);
    } else {
        fx.bcx.ins().store(data_flags(), v, addr, offset);
    }
}

/// Stores the lanes of `t` at `addr`, consecutive; `stream`: as non-temporal stores (the
/// address is 16-byte aligned, module `stream`).
fn store_full(
    fx: &mut FunctionCx,
    d: DType,
    t: &Tile,
    (addr, disp): (Value, i32),
    stream: bool,
) -> Result<(), CodegenError> {
    if d == DType::I1 || t.per == 1 {
        for (k, l) in value::lanes(&mut fx.bcx, d, t).into_iter().enumerate() {
            store_scalar(fx, d, l, addr, disp + k as i32 * d.size() as i32);
        }
        return Ok(());
    }
    if half::is_half(d) {
        half::store_parts(fx, d, &t.parts, addr, disp);
        return Ok(());
    }
    let stream = stream && matches!(d, DType::F32 | DType::F64);
    let flags = if stream { crate::stream::marked_flags() } else { data_flags() };
    for (j, &p) in t.parts.iter().enumerate() {
        fx.bcx.ins().store(flags, p, addr, disp + j as i32 * 16);
    }
    Ok(())
}

/// The mask operand: `None` (all lanes), one `i8` for every lane, or a tile.
enum Mask {
    All,
    Scalar(Value),
    Tile(Tile),
}

fn mask_of(fx: &mut FunctionCx, mask: Option<lir::Value>) -> Result<Mask, CodegenError> {
    Ok(match mask {
        None => Mask::All,
        Some(m) => match fx.val(m)? {
            CVal::Scalar(s) => Mask::Scalar(s),
            CVal::Tile(t) => Mask::Tile(t),
        },
    })
}

/// The mask bit of each of `lanes` lanes (`None`: enabled).
fn mask_lanes(fx: &mut FunctionCx, mask: &Mask, lanes: usize) -> Vec<Option<Value>> {
    match mask {
        Mask::All => vec![None; lanes],
        Mask::Scalar(s) => vec![Some(*s); lanes],
        Mask::Tile(t) => value::lanes(&mut fx.bcx, DType::I1, t).into_iter().map(Some).collect(),
    }
}

/// The address of every lane of a tile access.
fn lane_addresses(fx: &mut FunctionCx, a: Access, d: DType, lanes: u8) -> Result<Vec<Value>, CodegenError> {
    let base = fx.scalar(a.ptr)?;
    let od = fx.f.ty(a.offset).dtype();
    match a.addr {
        Addressing::Scalar => Err(invalid("a tile access with scalar addressing")),
        Addressing::Contiguous => {
            let start = offset_address(fx, base, a.offset, d.size())?;
            Ok((0..lanes as i64)
                .map(|k| if k == 0 { start } else { fx.bcx.ins().iadd_imm_s(start, k * d.size() as i64) })
                .collect())
        }
        Addressing::Gather => {
            let offsets = fx.tile(a.offset, lanes)?;
            let offsets = value::lanes(&mut fx.bcx, od, &offsets);
            if offsets.len() != lanes as usize {
                return Err(invalid("gather offsets and data have different lane counts"));
            }
            Ok(offsets.into_iter().map(|o| element_address(fx, base, o, od, d.size())).collect())
        }
    }
}

pub(crate) fn codegen_load(
    fx: &mut FunctionCx,
    a: Access,
    (mask, other): (Option<lir::Value>, Option<lir::Value>),
    ty: Ty,
    volatile: bool,
) -> Result<CVal, CodegenError> {
    let d = pointee(fx, a.ptr)?;
    if ty.dtype() != d {
        return Err(invalid(format!("a load of {ty} through a pointer to {d}")));
    }
    let mask = mask_of(fx, mask)?;
    let Ty::Tile(_, lanes) = ty else {
        if a.addr != Addressing::Scalar {
            return Err(invalid("a scalar load must use scalar addressing"));
        }
        let base = fx.scalar(a.ptr)?;
        let addr = offset_address(fx, base, a.offset, d.size())?;
        let other = match other {
            Some(o) => fx.scalar(o)?,
            None => base::const_scalar(&mut fx.bcx, lir::Const::Int(0), d)?,
        };
        let m = match mask {
            Mask::All => None,
            Mask::Scalar(m) => Some(m),
            Mask::Tile(_) => return Err(invalid("a scalar load with a tile mask")),
        };
        let v = guarded(fx, m, Some(other), |fx| {
            check_range(fx, a, addr, 1, d.size())?;
            if volatile { load_scalar_volatile(fx, d, addr) } else { load_scalar(fx, d, addr, 0) }.map(Some)
        })?;
        return Ok(CVal::Scalar(v.expect("guarded returns a value with `other`")));
    };
    if volatile {
        return Err(invalid("a volatile load of a tile"));
    }
    let per = value::canonical_per(d, lanes)?;
    let result_types = value::canonical_types(ty)?;

    if a.addr == Addressing::Contiguous {
        let base = fx.scalar(a.ptr)?;
        let (at, disp) = split_address(fx, base, a.offset, d.size())?;
        let all = match &mask {
            Mask::All => None,
            Mask::Scalar(m) => Some(*m),
            Mask::Tile(t) => Some(num::all_true(&mut fx.bcx, t)),
        };
        let Some(all) = all else {
            check_split(fx, a, (at, disp), lanes as u32, d.size())?;
            return Ok(CVal::Tile(load_full(fx, d, lanes, at, disp)?));
        };
        // Every lane enabled: the vector path; otherwise lane by lane.
        let full = fx.bcx.create_block();
        let partial = fx.bcx.create_block();
        let merge = fx.bcx.create_block();
        for &t in &result_types {
            fx.bcx.append_block_param(merge, t);
        }
        fx.bcx.ins().brif(all, full, &[], partial, &[]);
        fx.bcx.switch_to_block(full);
        check_split(fx, a, (at, disp), lanes as u32, d.size())?;
        let t = load_full(fx, d, lanes, at, disp)?;
        fx.bcx.ins().jump(merge, &block_args(&t.parts));
        fx.bcx.switch_to_block(partial);
        let t = match mask {
            // One bit for every lane, and it is off: nothing to read.
            Mask::Scalar(_) => other_tile(fx, d, lanes, other)?,
            _ => load_lanes(fx, a, d, lanes, &mask, other)?,
        };
        let t = value::rechunk(&mut fx.bcx, d, &t, per)?;
        fx.bcx.ins().jump(merge, &block_args(&t.parts));
        fx.bcx.switch_to_block(merge);
        return Ok(CVal::Tile(Tile { per, parts: fx.bcx.block_params(merge).to_vec() }));
    }
    let t = load_lanes(fx, a, d, lanes, &mask, other)?;
    Ok(CVal::Tile(value::rechunk(&mut fx.bcx, d, &t, per)?))
}

/// The `other` operand of a masked load as a tile (zeros when absent).
fn other_tile(
    fx: &mut FunctionCx,
    d: DType,
    lanes: u8,
    other: Option<lir::Value>,
) -> Result<Tile, CodegenError> {
    match other {
        Some(o) => fx.tile(o, lanes),
        None => {
            let zero = base::const_scalar(&mut fx.bcx, lir::Const::Int(0), d)?;
            value::splat(&mut fx.bcx, d, lanes, value::canonical_per(d, lanes)?, zero)
        }
    }
}

/// Where a masked-off lane of a load or store goes instead of its own address: the
/// program context's fault record, 16 bytes the program owns that are only read after
/// the program reports a fault (which rewrites them). Branching around every lane
/// instead costs Cranelift more blocks than the rest of a kernel.
fn dummy_address(fx: &mut FunctionCx) -> Value {
    fx.bcx.ins().iadd_imm_s(fx.abi[3], ctx_offsets::FAULT_SITE as i64)
}

/// The address lane `k` accesses: its own when enabled, the dummy otherwise.
fn lane_target(fx: &mut FunctionCx, addr: Value, bit: Option<Value>, dummy: Value) -> Value {
    match bit {
        Some(b) => fx.bcx.ins().select(b, addr, dummy),
        None => addr,
    }
}

/// In checked mode, one branch to the out-of-bounds exit when any enabled lane's element
/// of `size` bytes lies outside the site's argument; the fault names the lowest such lane.
fn check_lanes(
    fx: &mut FunctionCx,
    a: Access,
    addrs: &[Value],
    bits: &[Option<Value>],
    size: u32,
) -> Result<(), CodegenError> {
    let s = fx.site(a.site)?;
    if !fx.opts.checked || !a.checked {
        return Ok(());
    }
    let ArgBounds { origin, span } = *fx
        .checked_args
        .get(&s.arg)
        .ok_or_else(|| invalid(format!("site {} was not seen before code generation", a.site)))?;
    let limit = fx.bcx.ins().iadd_imm_s(span, 1 - size as i64);
    let zero = fx.bcx.ins().iconst(types::I64, 0);
    let limit = fx.bcx.ins().smax(limit, zero);
    let mut bad_lanes = Vec::with_capacity(addrs.len());
    for (&addr, bit) in addrs.iter().zip(bits) {
        let rel = fx.bcx.ins().isub(addr, origin);
        let out = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, rel, limit);
        bad_lanes.push(match bit {
            Some(b) => {
                let on = fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, *b, 0);
                fx.bcx.ins().band(out, on)
            }
            None => out,
        });
    }
    let any = bad_lanes.iter().copied().reduce(|x, y| fx.bcx.ins().bor(x, y)).expect("a tile has lanes");
    let cont = fx.bcx.create_block();
    let fail = fx.bcx.create_block();
    fx.bcx.set_cold_block(fail);
    // The failure edge first (see `check_range`).
    fx.bcx.ins().brif(any, fail, &[], cont, &[]);

    fx.bcx.switch_to_block(fail);
    // The lowest lane at fault.
    let mut at = None;
    for (&addr, &bad) in addrs.iter().zip(&bad_lanes).rev() {
        at = Some(match at {
            None => addr,
            Some(later) => fx.bcx.ins().select(bad, addr, later),
        });
    }
    fx.fail_out_of_bounds(a.site, at.expect("a tile has lanes"), size.trailing_zeros())?;
    fx.bcx.switch_to_block(cont);
    Ok(())
}

/// A tile load lane by lane: an enabled lane reads its element, a masked-off lane reads
/// the dummy and takes `other`.
fn load_lanes(
    fx: &mut FunctionCx,
    a: Access,
    d: DType,
    lanes: u8,
    mask: &Mask,
    other: Option<lir::Value>,
) -> Result<Tile, CodegenError> {
    let addrs = lane_addresses(fx, a, d, lanes)?;
    let bits = mask_lanes(fx, mask, lanes as usize);
    let others = match other {
        Some(o) => {
            let t = fx.tile(o, lanes)?;
            value::lanes(&mut fx.bcx, d, &t)
        }
        None => vec![base::const_scalar(&mut fx.bcx, lir::Const::Int(0), d)?; lanes as usize],
    };
    if others.len() != lanes as usize {
        return Err(invalid("`other` and the loaded tile have different lane counts"));
    }
    check_lanes(fx, a, &addrs, &bits, d.size())?;
    let dummy = dummy_address(fx);
    let mut out = Vec::with_capacity(lanes as usize);
    for k in 0..lanes as usize {
        let target = lane_target(fx, addrs[k], bits[k], dummy);
        let v = load_scalar(fx, d, target, 0)?;
        out.push(match bits[k] {
            Some(b) => fx.bcx.ins().select(b, v, others[k]),
            None => v,
        });
    }
    Ok(Tile { per: 1, parts: out })
}

pub(crate) fn codegen_store(
    fx: &mut FunctionCx,
    a: Access,
    val: lir::Value,
    mask: Option<lir::Value>,
    stream: bool,
) -> Result<(), CodegenError> {
    let d = pointee(fx, a.ptr)?;
    let vty = fx.f.ty(val);
    if vty.dtype() != d {
        return Err(invalid(format!("a store of {vty} through a pointer to {d}")));
    }
    let mask = mask_of(fx, mask)?;
    let lanes = match (&mask, vty, a.addr) {
        (_, Ty::Tile(_, l), _) => l,
        (Mask::Tile(t), _, _) => (t.parts.len() * t.per as usize) as u8,
        (_, _, Addressing::Gather) => fx.f.ty(a.offset).lanes(),
        _ => 1,
    };
    if a.addr == Addressing::Scalar {
        if vty.is_tile() {
            return Err(invalid("a tile store with scalar addressing"));
        }
        let base = fx.scalar(a.ptr)?;
        let addr = offset_address(fx, base, a.offset, d.size())?;
        let v = fx.scalar(val)?;
        let m = match mask {
            Mask::All => None,
            Mask::Scalar(m) => Some(m),
            Mask::Tile(_) => return Err(invalid("a scalar store with a tile mask")),
        };
        guarded(fx, m, None, |fx| {
            check_range(fx, a, addr, 1, d.size())?;
            store_scalar(fx, d, v, addr, 0);
            Ok(None)
        })?;
        return Ok(());
    }
    let t = fx.tile(val, lanes)?;
    if a.addr == Addressing::Contiguous {
        let base = fx.scalar(a.ptr)?;
        let at = split_address(fx, base, a.offset, d.size())?;
        let all = match &mask {
            Mask::All => None,
            Mask::Scalar(m) => Some(*m),
            Mask::Tile(mt) => Some(num::all_true(&mut fx.bcx, mt)),
        };
        let Some(all) = all else {
            check_split(fx, a, at, lanes as u32, d.size())?;
            return store_full(fx, d, &t, at, stream);
        };
        let full = fx.bcx.create_block();
        let partial = fx.bcx.create_block();
        let merge = fx.bcx.create_block();
        fx.bcx.ins().brif(all, full, &[], partial, &[]);
        fx.bcx.switch_to_block(full);
        check_split(fx, a, at, lanes as u32, d.size())?;
        store_full(fx, d, &t, at, false)?;
        fx.bcx.ins().jump(merge, &[]);
        fx.bcx.switch_to_block(partial);
        if !matches!(mask, Mask::Scalar(_)) {
            store_lanes(fx, a, d, lanes, &mask, &t)?;
        }
        fx.bcx.ins().jump(merge, &[]);
        fx.bcx.switch_to_block(merge);
        return Ok(());
    }
    store_lanes(fx, a, d, lanes, &mask, &t)
}

/// The bounds checks of a store whose lanes are `lanes` (a store with `check_only`):
/// exactly those of [`codegen_store`], in checked code, and nothing else.
pub(crate) fn codegen_check(
    fx: &mut FunctionCx,
    a: Access,
    lanes: u8,
    mask: Option<lir::Value>,
) -> Result<(), CodegenError> {
    if !fx.opts.checked || !a.checked {
        return Ok(());
    }
    let d = pointee(fx, a.ptr)?;
    let mask = mask_of(fx, mask)?;
    let lanes = match (&mask, a.addr) {
        (Mask::Tile(t), _) => (t.parts.len() * t.per as usize) as u8,
        (_, Addressing::Gather) => fx.f.ty(a.offset).lanes(),
        _ => lanes,
    };
    let base = fx.scalar(a.ptr)?;
    match (a.addr, &mask) {
        (Addressing::Scalar, Mask::Tile(_)) => Err(invalid("a scalar store with a tile mask")),
        (Addressing::Scalar, _) => {
            let addr = offset_address(fx, base, a.offset, d.size())?;
            let m = if let Mask::Scalar(m) = mask { Some(m) } else { None };
            guarded(fx, m, None, |fx| check_range(fx, a, addr, 1, d.size()).map(|()| None))?;
            Ok(())
        }
        (Addressing::Contiguous, Mask::All) => {
            let at = split_address(fx, base, a.offset, d.size())?;
            check_split(fx, a, at, lanes as u32, d.size())
        }
        (Addressing::Contiguous, Mask::Scalar(m)) => {
            let at = split_address(fx, base, a.offset, d.size())?;
            let m = *m;
            guarded(fx, Some(m), None, |fx| check_split(fx, a, at, lanes as u32, d.size()).map(|()| None))?;
            Ok(())
        }
        _ => {
            let addrs = lane_addresses(fx, a, d, lanes)?;
            let bits = mask_lanes(fx, &mask, lanes as usize);
            check_lanes(fx, a, &addrs, &bits, d.size())
        }
    }
}

fn store_lanes(
    fx: &mut FunctionCx,
    a: Access,
    d: DType,
    lanes: u8,
    mask: &Mask,
    t: &Tile,
) -> Result<(), CodegenError> {
    let addrs = lane_addresses(fx, a, d, lanes)?;
    let bits = mask_lanes(fx, mask, lanes as usize);
    // Half lanes convert a vector part at a time, not one by one.
    let half = half::is_half(d);
    let vals = if half { half::lane_bits(fx, d, t) } else { value::lanes(&mut fx.bcx, d, t) };
    check_lanes(fx, a, &addrs, &bits, d.size())?;
    let dummy = dummy_address(fx);
    for k in 0..lanes as usize {
        let target = lane_target(fx, addrs[k], bits[k], dummy);
        if half {
            half::store_bits(fx, vals[k], target, 0);
        } else {
            store_scalar(fx, d, vals[k], target, 0);
        }
    }
    Ok(())
}

/// Atomics are per lane: x86 has no vector atomics, and each lane is its own
/// sequentially consistent operation (Cranelift's atomics are seq-cst).
pub(crate) fn codegen_atomic(
    fx: &mut FunctionCx,
    a: Access,
    kind: AtomicKind,
    operands: &[lir::Value],
    mask: Option<lir::Value>,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = pointee(fx, a.ptr)?;
    if ty.dtype() != d {
        return Err(invalid(format!("an atomic on {d} returns {ty}")));
    }
    let lanes = ty.lanes();
    let mask = mask_of(fx, mask)?;
    let addrs = if ty.is_tile() {
        lane_addresses(fx, a, d, lanes)?
    } else {
        if a.addr != Addressing::Scalar {
            return Err(invalid("a scalar atomic must use scalar addressing"));
        }
        let base = fx.scalar(a.ptr)?;
        vec![offset_address(fx, base, a.offset, d.size())?]
    };
    let mut lane_vals = Vec::new();
    for &o in operands {
        lane_vals.push(if ty.is_tile() {
            let t = fx.tile(o, lanes)?;
            value::lanes(&mut fx.bcx, d, &t)
        } else {
            vec![fx.scalar(o)?]
        });
    }
    let bits = mask_lanes(fx, &mask, lanes as usize);
    let zero = base::const_scalar(&mut fx.bcx, lir::Const::Int(0), d)?;
    let mut out = Vec::with_capacity(lanes as usize);
    for k in 0..lanes as usize {
        let addr = addrs[k];
        let args: Vec<Value> = lane_vals.iter().map(|l| l[k]).collect();
        let v = guarded(fx, bits[k], Some(zero), |fx| {
            check_range(fx, a, addr, 1, d.size())?;
            match kind {
                AtomicKind::Rmw(op) => atomic_rmw(fx, op, d, addr, args[0]).map(Some),
                AtomicKind::Cas => atomic_cas(fx, d, addr, args[0], args[1]).map(Some),
            }
        })?;
        out.push(v.expect("guarded returns a value with `other`"));
    }
    if !ty.is_tile() {
        return Ok(CVal::Scalar(out[0]));
    }
    let per = value::canonical_per(d, lanes)?;
    Ok(CVal::Tile(value::from_lanes(&mut fx.bcx, d, per, &out)?))
}

fn atomic_flags() -> MemFlagsData {
    MemFlagsData::new()
}

/// The integer type of `d`'s width.
fn bits_type(d: DType) -> Result<Type, CodegenError> {
    Ok(value::scalar_type(d)?.as_int())
}

fn atomic_rmw(
    fx: &mut FunctionCx,
    op: AtomicOp,
    d: DType,
    addr: Value,
    v: Value,
) -> Result<Value, CodegenError> {
    if half::is_half(d) {
        return half::atomic_rmw(&mut fx.bcx, op, d, addr, v);
    }
    let ty = value::scalar_type(d)?;
    if d.is_float() {
        let int = bits_type(d)?;
        return Ok(match op {
            AtomicOp::Xchg => {
                let bits = fx.bcx.ins().bitcast(int, MemFlagsData::new(), v);
                let old = fx.bcx.ins().atomic_rmw(int, atomic_flags(), AtomicRmwOp::Xchg, addr, bits);
                fx.bcx.ins().bitcast(ty, MemFlagsData::new(), old)
            }
            AtomicOp::Add | AtomicOp::Max | AtomicOp::Min => cas_loop(fx, op, d, addr, v)?,
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
                return Err(CodegenError::Unsupported(format!("atomic {op:?} on {d}")));
            }
        });
    }
    let signed = d.is_signed();
    let rmw = match op {
        AtomicOp::Add => AtomicRmwOp::Add,
        AtomicOp::And => AtomicRmwOp::And,
        AtomicOp::Or => AtomicRmwOp::Or,
        AtomicOp::Xor => AtomicRmwOp::Xor,
        AtomicOp::Xchg => AtomicRmwOp::Xchg,
        AtomicOp::Max if signed => AtomicRmwOp::Smax,
        AtomicOp::Min if signed => AtomicRmwOp::Smin,
        AtomicOp::Max => AtomicRmwOp::Umax,
        AtomicOp::Min => AtomicRmwOp::Umin,
    };
    Ok(fx.bcx.ins().atomic_rmw(ty, atomic_flags(), rmw, addr, v))
}

/// A float read-modify-write: compute on the value read, install it with a
/// compare-and-swap of the bit pattern, retry with what the CAS saw on failure.
fn cas_loop(
    fx: &mut FunctionCx,
    op: AtomicOp,
    d: DType,
    addr: Value,
    v: Value,
) -> Result<Value, CodegenError> {
    let ty = value::scalar_type(d)?;
    let int = bits_type(d)?;
    let first = fx.bcx.ins().atomic_load(int, atomic_flags(), addr);
    let retry = fx.bcx.create_block();
    let expected = fx.bcx.append_block_param(retry, int);
    let done = fx.bcx.create_block();
    let old = fx.bcx.append_block_param(done, int);
    fx.bcx.ins().jump(retry, &block_args(&[first]));
    fx.bcx.switch_to_block(retry);
    let cur = fx.bcx.ins().bitcast(ty, MemFlagsData::new(), expected);
    let new = match op {
        AtomicOp::Add => fx.bcx.ins().fadd(cur, v),
        AtomicOp::Max => fx.bcx.ins().fmax(cur, v),
        _ => fx.bcx.ins().fmin(cur, v),
    };
    let new_bits = fx.bcx.ins().bitcast(int, MemFlagsData::new(), new);
    let seen = fx.bcx.ins().atomic_cas(atomic_flags(), addr, expected, new_bits);
    let swapped = fx.bcx.ins().icmp(IntCC::Equal, seen, expected);
    fx.bcx.ins().brif(swapped, done, &block_args(&[seen]), retry, &block_args(&[seen]));
    fx.bcx.switch_to_block(done);
    Ok(fx.bcx.ins().bitcast(ty, MemFlagsData::new(), old))
}

fn atomic_cas(
    fx: &mut FunctionCx,
    d: DType,
    addr: Value,
    cmp: Value,
    v: Value,
) -> Result<Value, CodegenError> {
    if !d.is_float() {
        return Ok(fx.bcx.ins().atomic_cas(atomic_flags(), addr, cmp, v));
    }
    if half::is_half(d) {
        return Ok(half::atomic_cas(&mut fx.bcx, d, addr, cmp, v));
    }
    let ty = value::scalar_type(d)?;
    let int = bits_type(d)?;
    let cmp = fx.bcx.ins().bitcast(int, MemFlagsData::new(), cmp);
    let v = fx.bcx.ins().bitcast(int, MemFlagsData::new(), v);
    let old = fx.bcx.ins().atomic_cas(atomic_flags(), addr, cmp, v);
    Ok(fx.bcx.ins().bitcast(ty, MemFlagsData::new(), old))
}

/// The address of element `index` of scratch buffer `slot` as [`split_address`] gives it
/// (the buffer's offset joins the displacement), and the buffer's dtype.
pub(crate) fn scratch_address(
    fx: &mut FunctionCx,
    slot: u32,
    index: lir::Value,
) -> Result<((Value, i32), DType), CodegenError> {
    let s = scratch_entry(fx, slot)?;
    let area = scratch_area(fx);
    let (at, disp) = split_address(fx, area, index, lir::Scratch::elem_bytes(s.dtype))?;
    let total = s.offset as i64 + disp as i64;
    Ok(match i32::try_from(total) {
        Ok(disp) => ((at, disp), s.dtype),
        Err(_) => ((fx.bcx.ins().iadd_imm_s(at, total), 0), s.dtype),
    })
}

/// The address of scratch buffer `slot`'s first element, and the buffer.
pub(crate) fn scratch_base(fx: &mut FunctionCx, slot: u32) -> Result<(Value, lir::Scratch), CodegenError> {
    let s = scratch_entry(fx, slot)?;
    Ok((scratch_at(fx, s.offset as i64), s))
}

/// Scratch buffer `slot` of the function's table.
fn scratch_entry(fx: &FunctionCx, slot: u32) -> Result<lir::Scratch, CodegenError> {
    fx.f.scratch
        .get(slot as usize)
        .copied()
        .ok_or_else(|| invalid(format!("scratch buffer {slot} is not in the table")))
}

/// The address `offset` bytes into the program's scratch area.
pub(crate) fn scratch_at(fx: &mut FunctionCx, offset: i64) -> Value {
    let area = scratch_area(fx);
    fx.bcx.ins().iadd_imm_s(area, offset)
}

/// The address of the program's scratch area.
pub(crate) fn scratch_area(fx: &mut FunctionCx) -> Value {
    fx.load_abi(types::I64, fx.abi[3], ctx_offsets::SCRATCH)
}

/// The dtype whose layout scratch holds `d` in: half dtypes in their `f32` compute form.
fn scratch_layout(d: DType) -> DType {
    if half::is_half(d) { DType::F32 } else { d }
}

pub(crate) fn codegen_scratch_load(
    fx: &mut FunctionCx,
    slot: u32,
    index: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let ((at, disp), d) = scratch_address(fx, slot, index)?;
    if ty.dtype() != d {
        return Err(invalid(format!("a {ty} load from a scratch buffer of {d}")));
    }
    let d = scratch_layout(d);
    Ok(match ty {
        Ty::Tile(_, lanes) => CVal::Tile(load_full(fx, d, lanes, at, disp)?),
        _ => CVal::Scalar(load_scalar(fx, d, at, disp)?),
    })
}

pub(crate) fn codegen_scratch_store(
    fx: &mut FunctionCx,
    slot: u32,
    index: lir::Value,
    val: lir::Value,
) -> Result<(), CodegenError> {
    let (addr, d) = scratch_address(fx, slot, index)?;
    let ty = fx.f.ty(val);
    if ty.dtype() != d {
        return Err(invalid(format!("a {ty} store to a scratch buffer of {d}")));
    }
    let d = scratch_layout(d);
    match fx.val(val)? {
        CVal::Tile(t) => store_full(fx, d, &t, addr, false),
        CVal::Scalar(v) => {
            store_scalar(fx, d, v, addr.0, addr.1);
            Ok(())
        }
    }
}
