//! Lanewise arithmetic, comparisons, selects, casts and lane reductions.
//!
//! Every operation is written once for one Cranelift value that is either a scalar or a
//! 128-bit vector part; [`lanewise`] applies it to every part of a tile. An operation
//! x86-64 has no vector form for (integer division, per-lane shifts, calls) runs on
//! scalar lanes instead.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{ConstantData, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use lnc_lir::{self as lir, BinOp, CmpOp, DType, Opcode, ReduceOp, Ty, UnOp};

use crate::base::{FunctionCx, iconst};
use crate::value::{self, CVal, Tile};
use crate::{CodegenError, half, helpers, vmath};

fn unsupported(what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Unsupported(what.to_string())
}

/// Applies `op` to the operands part by part, `per` lanes per part. Scalar operands of a
/// tile operation are broadcast.
pub(crate) fn lanewise(
    fx: &mut FunctionCx,
    ty: Ty,
    per_of: impl Fn(u8) -> u8,
    operands: &[lir::Value],
    mut op: impl FnMut(&mut FunctionCx, &[Value]) -> Result<Value, CodegenError>,
) -> Result<CVal, CodegenError> {
    let Ty::Tile(_, lanes) = ty else {
        let vals = operands.iter().map(|&a| fx.scalar(a)).collect::<Result<Vec<_>, _>>()?;
        return Ok(CVal::Scalar(op(fx, &vals)?));
    };
    let mut tiles = Vec::with_capacity(operands.len());
    for &a in operands {
        let d = fx.f.ty(a).dtype();
        let t = fx.tile(a, lanes)?;
        tiles.push((d, t));
    }
    let per = per_of(lanes);
    let mut ops = Vec::with_capacity(tiles.len());
    for (d, t) in &tiles {
        // Rechunked masks get the lane width of the data: 128 / per bits.
        let t = value::rechunk(&mut fx.bcx, *d, t, per)?;
        if t.parts.len() * t.per as usize != lanes as usize {
            return Err(CodegenError::InvalidIr(format!(
                "operand tiles of {lanes} lanes have {} lanes",
                t.parts.len() * t.per as usize
            )));
        }
        ops.push(t);
    }
    let n = lanes as usize / per as usize;
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        let args: Vec<Value> = ops.iter().map(|t| t.parts[i]).collect();
        parts.push(op(fx, &args)?);
    }
    Ok(CVal::Tile(Tile { per, parts }))
}

/// Lanes per part for an operation on `d` tiles: the canonical vectors when `vector`
/// (masks get the lane width of 4- or 2-lane data), scalar lanes otherwise.
fn per_for(d: DType, vector: bool) -> impl Fn(u8) -> u8 {
    move |lanes| {
        if vector { value::canonical_per(d, lanes).unwrap_or(1) } else { 1 }
    }
}

pub(crate) fn codegen_iota(fx: &mut FunctionCx, start: lir::Value, ty: Ty) -> Result<CVal, CodegenError> {
    let Ty::Tile(d, lanes) = ty else {
        return Err(CodegenError::InvalidIr("iota to a non-tile".into()));
    };
    if !matches!(d, DType::I32 | DType::I64 | DType::U32 | DType::U64) {
        return Err(CodegenError::InvalidIr(format!("iota of {d}")));
    }
    let start = fx.scalar(start)?;
    let per = value::canonical_per(d, lanes)?;
    let mut parts = Vec::new();
    if per == 1 {
        for k in 0..lanes {
            parts.push(fx.bcx.ins().iadd_imm_s(start, k as i64));
        }
    } else {
        let vty = value::part_type(d, per)?;
        let base = fx.bcx.ins().splat(vty, start);
        for j in 0..lanes / per {
            let mut bytes = Vec::with_capacity(16);
            for k in 0..per as u64 {
                let lane = j as u64 * per as u64 + k;
                bytes.extend_from_slice(&lane.to_le_bytes()[..vty.lane_type().bytes() as usize]);
            }
            let c = fx.bcx.func.dfg.constants.insert(ConstantData::from(bytes));
            let offsets = fx.bcx.ins().vconst(vty, c);
            parts.push(fx.bcx.ins().iadd(base, offsets));
        }
    }
    Ok(CVal::Tile(Tile { per, parts }))
}

/// True when x86-64 has a vector form of `op` on `d`.
fn binary_vectorizes(op: BinOp, d: DType) -> bool {
    match op {
        BinOp::Rem | BinOp::Pow => false,
        BinOp::Div | BinOp::IDiv => d.is_float(),
        BinOp::Shl | BinOp::Shr => false,
        BinOp::Mul => d.size() > 1,
        _ => true,
    }
}

pub(crate) fn codegen_binary(
    fx: &mut FunctionCx,
    op: BinOp,
    a: lir::Value,
    b: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = ty.dtype();
    if d == DType::I1 {
        if !matches!(op, BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Min | BinOp::Max) {
            return Err(unsupported(format_args!("{op:?} on i1")));
        }
        return lanewise(fx, ty, per_for(DType::I1, true), &[a, b], |fx, v| {
            let (x, y) = (v[0], v[1]);
            Ok(match op {
                BinOp::And | BinOp::Min => fx.bcx.ins().band(x, y),
                BinOp::Or | BinOp::Max => fx.bcx.ins().bor(x, y),
                _ => fx.bcx.ins().bxor(x, y),
            })
        });
    }
    if matches!(op, BinOp::IDiv | BinOp::Rem)
        && let Some(k) = power_of_two(fx.f, b, d)
    {
        return lanewise(fx, ty, per_for(d, true), &[a], |fx, v| by_power_of_two(fx, op, d, v[0], k));
    }
    if matches!(op, BinOp::Shl | BinOp::Shr)
        && let Some(n) = int_constant(fx.f, b, d)
    {
        return lanewise(fx, ty, per_for(d, true), &[a], |fx, v| shift_by_constant(fx, op, d, v[0], n));
    }
    lanewise(fx, ty, per_for(d, binary_vectorizes(op, d)), &[a, b], |fx, v| {
        emit_binary(fx, op, d, v[0], v[1])
    })
}

/// The integer constant `v` is (or splats), as an unsigned number of `d`'s width.
fn int_constant(f: &lir::Function, v: lir::Value, d: DType) -> Option<u64> {
    if !d.is_int() || d == DType::I1 {
        return None;
    }
    let c = match f.values[v].def {
        lir::ValueDef::Result(i, 0) if f.insts[i].opcode == lir::Opcode::Splat => {
            return int_constant(f, f.insts[i].args[0], d);
        }
        _ => lir::ranges::const_int(f, v)?,
    };
    Some((c as u64) & (u64::MAX >> (64 - d.bits())))
}

/// `k` when `v` is the integer constant `2^k` (or a splat of it), positive in `d`.
fn power_of_two(f: &lir::Function, v: lir::Value, d: DType) -> Option<u32> {
    let u = int_constant(f, v, d)?;
    let negative = d.is_signed() && u >> (d.bits() - 1) == 1;
    (u.is_power_of_two() && !negative).then(|| u.trailing_zeros())
}

/// `x << n` or `x >> n` by a constant: one vector shift (x86-64 shifts vectors only by
/// an amount common to all lanes). An amount of the width or more shifts everything out,
/// as NumPy computes it: 0, or the sign of a signed `>>`.
fn shift_by_constant(
    fx: &mut FunctionCx,
    op: BinOp,
    d: DType,
    x: Value,
    n: u64,
) -> Result<Value, CodegenError> {
    let bits = u64::from(d.bits());
    if n >= bits && !(op == BinOp::Shr && d.is_signed()) {
        let ty = fx.bcx.func.dfg.value_type(x);
        return const_like(&mut fx.bcx, ty, lir::Const::Int(0));
    }
    let amount = fx.bcx.ins().iconst(types::I32, n.min(bits - 1) as i64);
    Ok(match op {
        BinOp::Shl => fx.bcx.ins().ishl(x, amount),
        _ if d.is_signed() => fx.bcx.ins().sshr(x, amount),
        _ => fx.bcx.ins().ushr(x, amount),
    })
}

/// `x // 2^k` or `x % 2^k` (truncating toward zero, the remainder taking the dividend's
/// sign) with shifts and masks, which x86-64 has on vectors: integer division has no
/// vector form, and a tile of `offs % C` with a power-of-two `C` (a column index) was
/// otherwise divided lane by lane.
fn by_power_of_two(
    fx: &mut FunctionCx,
    op: BinOp,
    d: DType,
    x: Value,
    k: u32,
) -> Result<Value, CodegenError> {
    let ty = fx.bcx.func.dfg.value_type(x);
    let bits = i64::from(d.bits());
    let low = (1i64 << k).wrapping_sub(1);
    let amount = |fx: &mut FunctionCx, n: i64| fx.bcx.ins().iconst(types::I32, n);
    if !d.is_signed() {
        return Ok(if op == BinOp::IDiv {
            let n = amount(fx, i64::from(k));
            fx.bcx.ins().ushr(x, n)
        } else {
            let m = const_like(&mut fx.bcx, ty, lir::Const::Int(low))?;
            fx.bcx.ins().band(x, m)
        });
    }
    // A negative dividend is biased by 2^k - 1 first, so the shift rounds toward zero.
    let bias = if k == 0 {
        const_like(&mut fx.bcx, ty, lir::Const::Int(0))?
    } else {
        let n = amount(fx, bits - 1);
        let sign = fx.bcx.ins().sshr(x, n);
        let n = amount(fx, bits - i64::from(k));
        fx.bcx.ins().ushr(sign, n)
    };
    let t = fx.bcx.ins().iadd(x, bias);
    Ok(if op == BinOp::IDiv {
        let n = amount(fx, i64::from(k));
        fx.bcx.ins().sshr(t, n)
    } else {
        let m = const_like(&mut fx.bcx, ty, lir::Const::Int(!low))?;
        let q = fx.bcx.ins().band(t, m);
        fx.bcx.ins().isub(x, q)
    })
}

/// `a - b` of float tiles as `fma(a, 1, -b)`: the same bits, on the multiply units
/// (`ports.rs`).
pub(crate) fn codegen_fused_sub(
    fx: &mut FunctionCx,
    a: lir::Value,
    b: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = ty.dtype();
    if !matches!(d, DType::F32 | DType::F64) {
        return Err(CodegenError::InvalidIr(format!("a fused subtraction of {d}")));
    }
    lanewise(fx, ty, per_for(d, true), &[a, b], |fx, v| {
        let (x, y) = (v[0], v[1]);
        let like = fx.bcx.func.dfg.value_type(x);
        let one = const_like(&mut fx.bcx, like, lir::Const::Float(1.0))?;
        // One `vfmsub`: Cranelift folds the negation into the multiply-add.
        let minus_y = fx.bcx.ins().fneg(y);
        Ok(fx.bcx.ins().fma(x, one, minus_y))
    })
}

/// `a · b + c` rounded once: one `vfmadd` per vector where the host has FMA (Cranelift
/// calls `fmaf`/`fma` per lane otherwise); `fp16`/`bf16` in `f32`, rounded to their type.
pub(crate) fn codegen_fma(
    fx: &mut FunctionCx,
    [a, b, c]: [lir::Value; 3],
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = ty.dtype();
    if !d.is_float() {
        return Err(CodegenError::InvalidIr(format!("an fma of {d}")));
    }
    lanewise(fx, ty, per_for(d, true), &[a, b, c], |fx, v| {
        let r = fx.bcx.ins().fma(v[0], v[1], v[2]);
        Ok(half::round_value(fx, d, r))
    })
}

/// A constant of the lane type of `like` (scalar or vector), splatted for vectors.
fn const_like(bcx: &mut FunctionBuilder, like: Type, c: lir::Const) -> Result<Value, CodegenError> {
    let lane = like.lane_type();
    let d = match lane {
        types::F32 => DType::F32,
        types::F64 => DType::F64,
        types::I8 => DType::I8,
        types::I16 => DType::I16,
        types::I32 => DType::I32,
        _ => DType::I64,
    };
    let s = crate::base::const_scalar(bcx, c, d)?;
    Ok(if like.is_vector() { bcx.ins().splat(like, s) } else { s })
}

fn emit_binary(fx: &mut FunctionCx, op: BinOp, d: DType, x: Value, y: Value) -> Result<Value, CodegenError> {
    if d.is_float() {
        let r = match op {
            BinOp::Add => fx.bcx.ins().fadd(x, y),
            BinOp::Sub => fx.bcx.ins().fsub(x, y),
            BinOp::Mul => fx.bcx.ins().fmul(x, y),
            BinOp::Div => fx.bcx.ins().fdiv(x, y),
            BinOp::IDiv => {
                let q = fx.bcx.ins().fdiv(x, y);
                fx.bcx.ins().floor(q)
            }
            BinOp::Min => fx.bcx.ins().fmin(x, y),
            BinOp::Max => fx.bcx.ins().fmax(x, y),
            BinOp::Rem | BinOp::Pow => {
                let t = value::scalar_type(d)?;
                let name = match (op, d) {
                    (BinOp::Rem, DType::F64) => "lnc_fmod_f64",
                    (BinOp::Rem, _) => "lnc_fmod_f32",
                    (_, DType::F64) => "lnc_pow_f64",
                    _ => "lnc_pow_f32",
                };
                fx.call_helper(name, &[t, t], &[t], &[x, y])?[0]
            }
            BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
                return Err(unsupported(format_args!("{op:?} on {d}")));
            }
        };
        // fp16/bf16: computed in f32, rounded to the dtype (min/max pick an operand).
        return Ok(if matches!(op, BinOp::Min | BinOp::Max) { r } else { half::round_value(fx, d, r) });
    }
    let signed = d.is_signed();
    let ty = fx.bcx.func.dfg.value_type(x);
    Ok(match op {
        BinOp::Add => fx.bcx.ins().iadd(x, y),
        BinOp::Sub => fx.bcx.ins().isub(x, y),
        BinOp::Mul => fx.bcx.ins().imul(x, y),
        BinOp::And => fx.bcx.ins().band(x, y),
        BinOp::Or => fx.bcx.ins().bor(x, y),
        BinOp::Xor => fx.bcx.ins().bxor(x, y),
        BinOp::Min if signed => fx.bcx.ins().smin(x, y),
        BinOp::Min => fx.bcx.ins().umin(x, y),
        BinOp::Max if signed => fx.bcx.ins().smax(x, y),
        BinOp::Max => fx.bcx.ins().umax(x, y),
        BinOp::Div | BinOp::IDiv | BinOp::Rem => {
            // Cranelift traps on a zero divisor and on MIN / -1; the IR defines both
            // (0, and wrapping). Constant divisors fold the guards away.
            let is_rem = op == BinOp::Rem;
            let zero = iconst(&mut fx.bcx, ty, 0);
            let one = iconst(&mut fx.bcx, ty, 1);
            let by_zero = fx.bcx.ins().icmp_imm_u(IntCC::Equal, y, 0);
            if signed {
                let by_m1 = fx.bcx.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let bad = fx.bcx.ins().bor(by_zero, by_m1);
                let safe = fx.bcx.ins().select(bad, one, y);
                let r = if is_rem { fx.bcx.ins().srem(x, safe) } else { fx.bcx.ins().sdiv(x, safe) };
                let special = if is_rem { zero } else { fx.bcx.ins().ineg(x) };
                let r = fx.bcx.ins().select(by_m1, special, r);
                fx.bcx.ins().select(by_zero, zero, r)
            } else {
                let safe = fx.bcx.ins().select(by_zero, one, y);
                let r = if is_rem { fx.bcx.ins().urem(x, safe) } else { fx.bcx.ins().udiv(x, safe) };
                fx.bcx.ins().select(by_zero, zero, r)
            }
        }
        BinOp::Shl | BinOp::Shr => {
            // NumPy's shifts: an amount of the width or more shifts everything out.
            let bits = ty.bits() as i64;
            let too_far = fx.bcx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, y, bits);
            match (op, signed) {
                (BinOp::Shl, _) => {
                    let r = fx.bcx.ins().ishl(x, y);
                    let zero = iconst(&mut fx.bcx, ty, 0);
                    fx.bcx.ins().select(too_far, zero, r)
                }
                (_, false) => {
                    let r = fx.bcx.ins().ushr(x, y);
                    let zero = iconst(&mut fx.bcx, ty, 0);
                    fx.bcx.ins().select(too_far, zero, r)
                }
                (_, true) => {
                    let max = iconst(&mut fx.bcx, ty, bits - 1);
                    let amount = fx.bcx.ins().select(too_far, max, y);
                    fx.bcx.ins().sshr(x, amount)
                }
            }
        }
        BinOp::Pow => return Err(unsupported(format_args!("pow on {d}"))),
    })
}

pub(crate) fn codegen_cmp(
    fx: &mut FunctionCx,
    op: CmpOp,
    a: lir::Value,
    b: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = fx.f.ty(a).dtype();
    if ty.dtype() != DType::I1 {
        return Err(CodegenError::InvalidIr("a comparison must produce i1".into()));
    }
    let per_of = per_for(d, true);
    let result_ty = if let Ty::Tile(_, l) = ty { Ty::Tile(d, l) } else { ty };
    lanewise(fx, result_ty, per_of, &[a, b], |fx, v| {
        let (x, y) = (v[0], v[1]);
        Ok(if d.is_float() {
            let cc = match op {
                CmpOp::Eq => FloatCC::Equal,
                CmpOp::Ne => FloatCC::NotEqual,
                CmpOp::Lt => FloatCC::LessThan,
                CmpOp::Le => FloatCC::LessThanOrEqual,
                CmpOp::Gt => FloatCC::GreaterThan,
                CmpOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            fx.bcx.ins().fcmp(cc, x, y)
        } else {
            let signed = d.is_signed();
            let cc = match op {
                CmpOp::Eq => IntCC::Equal,
                CmpOp::Ne => IntCC::NotEqual,
                CmpOp::Lt if signed => IntCC::SignedLessThan,
                CmpOp::Le if signed => IntCC::SignedLessThanOrEqual,
                CmpOp::Gt if signed => IntCC::SignedGreaterThan,
                CmpOp::Ge if signed => IntCC::SignedGreaterThanOrEqual,
                CmpOp::Lt => IntCC::UnsignedLessThan,
                CmpOp::Le => IntCC::UnsignedLessThanOrEqual,
                CmpOp::Gt => IntCC::UnsignedGreaterThan,
                CmpOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
            };
            // Masks are all-ones for true: as unsigned numbers true > false still holds.
            fx.bcx.ins().icmp(cc, x, y)
        })
    })
}

/// Whether `op` on `d` lanes runs on vector parts (no call per lane).
fn unary_vectorizes(op: UnOp, d: DType) -> bool {
    let bits64 = d == DType::F64;
    helpers::unary(op, bits64).is_none() || (!bits64 && vmath::vectorizes(op))
}

pub(crate) fn codegen_unary(
    fx: &mut FunctionCx,
    op: UnOp,
    a: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = ty.dtype();
    if d == DType::I1 {
        return match op {
            UnOp::Not => lanewise(fx, ty, per_for(DType::I1, true), &[a], |fx, v| {
                Ok(if fx.bcx.func.dfg.value_type(v[0]).is_vector() {
                    fx.bcx.ins().bnot(v[0])
                } else {
                    fx.bcx.ins().bxor_imm_u(v[0], 1)
                })
            }),
            UnOp::Abs | UnOp::Floor | UnOp::Ceil => fx.val(a),
            _ => Err(unsupported(format_args!("{op:?} on i1"))),
        };
    }
    if d.is_int() {
        return match op {
            UnOp::Neg => lanewise(fx, ty, per_for(d, true), &[a], |fx, v| Ok(fx.bcx.ins().ineg(v[0]))),
            UnOp::Not => lanewise(fx, ty, per_for(d, true), &[a], |fx, v| Ok(fx.bcx.ins().bnot(v[0]))),
            UnOp::Abs if d.is_signed() => {
                lanewise(fx, ty, per_for(d, true), &[a], |fx, v| Ok(fx.bcx.ins().iabs(v[0])))
            }
            UnOp::Abs | UnOp::Floor | UnOp::Ceil => fx.val(a),
            _ => Err(unsupported(format_args!("{op:?} on {d}"))),
        };
    }
    let t = value::scalar_type(d)?;
    lanewise(fx, ty, per_for(d, unary_vectorizes(op, d)), &[a], |fx, v| {
        let x = v[0];
        // f32 lanes (fp16/bf16 too) compute exp and log themselves: see `vmath.rs`.
        let computed = match op {
            _ if t != types::F32 => None,
            UnOp::Sin | UnOp::Cos => Some(vmath::sin_cos(fx, x, op == UnOp::Cos)?),
            _ => vmath::unary(&mut fx.bcx, op, x),
        };
        let r = match op {
            _ if let Some(r) = computed => r,
            UnOp::Neg => fx.bcx.ins().fneg(x),
            UnOp::Abs => fx.bcx.ins().fabs(x),
            UnOp::Sqrt => fx.bcx.ins().sqrt(x),
            UnOp::Rsqrt => {
                // Exactly rounded 1/sqrt(x), as Triton's CPU path computes it.
                let s = fx.bcx.ins().sqrt(x);
                let ty = fx.bcx.func.dfg.value_type(x);
                let one = const_like(&mut fx.bcx, ty, lir::Const::Float(1.0))?;
                fx.bcx.ins().fdiv(one, s)
            }
            UnOp::Floor => fx.bcx.ins().floor(x),
            UnOp::Ceil => fx.bcx.ins().ceil(x),
            UnOp::Not => return Err(unsupported(format_args!("~ on {d}"))),
            _ => {
                let name =
                    helpers::unary(op, d == DType::F64).ok_or_else(|| unsupported(format_args!("{op:?}")))?;
                fx.call_helper(name, &[t], &[t], &[x])?[0]
            }
        };
        // fp16/bf16: computed in f32, rounded to the dtype (the exact operations need not).
        Ok(match op {
            UnOp::Neg | UnOp::Abs | UnOp::Floor | UnOp::Ceil => r,
            _ => half::round_value(fx, d, r),
        })
    })
}

/// A mask part (integer lanes of the data's width) as the type of the data part.
pub(crate) fn mask_for(bcx: &mut FunctionBuilder, mask: Value, data: Type) -> Value {
    if bcx.func.dfg.value_type(mask) == data {
        mask
    } else {
        bcx.ins().bitcast(data, value::bitcast_flags(), mask)
    }
}

pub(crate) fn codegen_select(
    fx: &mut FunctionCx,
    cond: lir::Value,
    a: lir::Value,
    b: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = ty.dtype();
    if !fx.f.ty(cond).is_tile() {
        // One condition for every lane: a plain `select` per part.
        let c = fx.scalar(cond)?;
        let per_of = per_for(d, true);
        return lanewise(fx, ty, per_of, &[a, b], |fx, v| Ok(fx.bcx.ins().select(c, v[0], v[1])));
    }
    let per_of = per_for(d, true);
    // A mask known at compile time picks whole parts without a blend: the lane-0 mask
    // through which a reduction's scalar tail adds each element into its tile selects
    // the identity for every part but the first.
    let known = const_mask(fx.f, cond);
    let per = usize::from(per_of(ty.lanes()));
    let mut part = 0;
    lanewise(fx, ty, per_of, &[cond, a, b], |fx, v| {
        let (c, x, y) = (v[0], v[1], v[2]);
        let lanes = known.as_ref().and_then(|m| m.get(part * per..(part + 1) * per));
        part += 1;
        match lanes {
            Some(l) if l.iter().all(|&t| t) => return Ok(x),
            Some(l) if l.iter().all(|&t| !t) => return Ok(y),
            _ => {}
        }
        let xt = fx.bcx.func.dfg.value_type(x);
        if !xt.is_vector() {
            return Ok(fx.bcx.ins().select(c, x, y));
        }
        let m = mask_for(&mut fx.bcx, c, xt);
        Ok(fx.bcx.ins().bitselect(m, x, y))
    })
}

/// The lanes of the mask tile `v` when they are known at compile time: a comparison of
/// signed integer tiles that are each an `iota` of a constant or a splat of one.
fn const_mask(f: &lir::Function, v: lir::Value) -> Option<Vec<bool>> {
    let lanes = i64::from(f.ty(v).lanes());
    let lir::ValueDef::Result(i, _) = f.values[v].def else { return None };
    let d = &f.insts[i];
    let Opcode::Cmp(op) = d.opcode else { return None };
    let known = |a: lir::Value| -> Option<Vec<i64>> {
        // The lanes as the code computes them: `i32` lanes wrap.
        let wrap = match f.ty(a).dtype() {
            DType::I32 => |x: i64| i64::from(x as i32),
            DType::I64 => |x: i64| x,
            _ => return None,
        };
        let lir::ValueDef::Result(j, _) = f.values[a].def else { return None };
        let dj = &f.insts[j];
        let c = lnc_lir::ranges::const_int(f, *dj.args.first()?)?;
        match dj.opcode {
            Opcode::Iota => Some((0..lanes).map(|k| wrap(c.wrapping_add(k))).collect()),
            Opcode::Splat => Some(vec![wrap(c); lanes as usize]),
            _ => None,
        }
    };
    let (x, y) = (known(d.args[0])?, known(d.args[1])?);
    Some(x.iter().zip(&y).map(|(a, b)| op.holds(a, b)).collect())
}

/// True when `s -> d` has an x86-64 vector form between parts of the same lane count.
fn cast_vectorizes(s: DType, d: DType) -> bool {
    if s == DType::I1 || d == DType::I1 {
        return false;
    }
    if s.bits() != d.bits() {
        return false;
    }
    match (s.is_float(), d.is_float()) {
        (false, false) | (true, true) => true,
        (false, true) => s.bits() == 32 || (s.bits() == 64 && s.is_signed()),
        (true, false) => s == DType::F32 && d == DType::I32,
    }
}

pub(crate) fn codegen_cast(fx: &mut FunctionCx, a: lir::Value, ty: Ty) -> Result<CVal, CodegenError> {
    let s = fx.f.ty(a).dtype();
    let d = ty.dtype();
    value::scalar_type(s)?;
    value::scalar_type(d)?;
    if s == d {
        return fx.val(a);
    }
    if half::is_half(s) || half::is_half(d) {
        return half::codegen_cast(fx, a, ty);
    }
    if let Ty::Tile(_, lanes) = ty {
        if cast_vectorizes(s, d) && lanes >= value::vector_per(d) {
            let per = value::vector_per(d);
            return lanewise(fx, Ty::Tile(s, lanes), move |_| per, &[a], |fx, v| emit_cast(fx, s, d, v[0]));
        }
        if let Some(t) = int_width_cast(fx, a, s, d, lanes)? {
            return Ok(CVal::Tile(t));
        }
        // Scalar lanes, then the canonical form of the result.
        let t = fx.tile(a, lanes)?;
        let src = value::lanes(&mut fx.bcx, s, &t);
        let mut out = Vec::with_capacity(src.len());
        for l in src {
            out.push(emit_cast(fx, s, d, l)?);
        }
        let per = value::canonical_per(d, lanes)?;
        return Ok(CVal::Tile(value::from_lanes(&mut fx.bcx, d, per, &out)?));
    }
    let x = fx.scalar(a)?;
    Ok(CVal::Scalar(emit_cast(fx, s, d, x)?))
}

/// A tile of 32-bit integers widened to 64 bits, or of 64-bit integers truncated to 32,
/// on vectors: each `i32x4` becomes two `i64x2` (sign- or zero-extended by the source's
/// signedness: `vpmovsxdq`/`vpmovzxdq`), and each pair of `i64x2` one `i32x4` of their
/// low halves (a shuffle of the even 32-bit lanes). Without this every lane is extracted,
/// converted and inserted on its own (64-bit offsets, `umulhi` of `tl.rand`). `None` for
/// the other casts.
fn int_width_cast(
    fx: &mut FunctionCx,
    a: lir::Value,
    s: DType,
    d: DType,
    lanes: u8,
) -> Result<Option<Tile>, CodegenError> {
    let ints = !s.is_float() && !d.is_float() && s != DType::I1 && d != DType::I1;
    if !ints || lanes < 4 || !lanes.is_multiple_of(4) {
        return Ok(None);
    }
    let t = fx.tile(a, lanes)?;
    match (s.bits(), d.bits()) {
        (32, 64) => {
            let t = value::rechunk(&mut fx.bcx, s, &t, 4)?;
            let mut parts = Vec::with_capacity(t.parts.len() * 2);
            for &p in &t.parts {
                let (lo, hi) = if s.is_signed() {
                    (fx.bcx.ins().swiden_low(p), fx.bcx.ins().swiden_high(p))
                } else {
                    (fx.bcx.ins().uwiden_low(p), fx.bcx.ins().uwiden_high(p))
                };
                parts.extend([lo, hi]);
            }
            Ok(Some(Tile { per: 2, parts }))
        }
        (64, 32) => {
            let t = value::rechunk(&mut fx.bcx, s, &t, 2)?;
            // Bytes 0-3 and 8-11 of each operand: the low halves of its two lanes.
            let bytes: Vec<u8> = [0u8, 8, 16, 24].iter().flat_map(|&b| b..b + 4).collect();
            let mask = fx.bcx.func.dfg.immediates.push(bytes.into());
            let flags = value::bitcast_flags();
            let mut parts = Vec::with_capacity(t.parts.len() / 2);
            for pair in t.parts.chunks(2) {
                let [x, y] = pair else {
                    return Err(CodegenError::InvalidIr(format!("a 64-bit tile of {lanes} lanes")));
                };
                let x = fx.bcx.ins().bitcast(types::I8X16, flags, *x);
                let y = fx.bcx.ins().bitcast(types::I8X16, flags, *y);
                let lows = fx.bcx.ins().shuffle(x, y, mask);
                parts.push(fx.bcx.ins().bitcast(types::I32X4, flags, lows));
            }
            Ok(Some(Tile { per: 4, parts }))
        }
        _ => Ok(None),
    }
}

/// Converts one scalar or vector part from `s` to `d` (vectors: same lane count).
pub(crate) fn emit_cast(fx: &mut FunctionCx, s: DType, d: DType, x: Value) -> Result<Value, CodegenError> {
    let xt = fx.bcx.func.dfg.value_type(x);
    let lanes = xt.lane_count();
    let dt = value::scalar_type(d)?.by(lanes).unwrap_or(value::scalar_type(d)?);
    Ok(match (s.is_float(), d.is_float()) {
        (true, true) => {
            if d.bits() > s.bits() {
                fx.bcx.ins().fpromote(dt, x)
            } else {
                fx.bcx.ins().fdemote(dt, x)
            }
        }
        (false, true) => {
            if s.is_signed() {
                fx.bcx.ins().fcvt_from_sint(dt, x)
            } else {
                fx.bcx.ins().fcvt_from_uint(dt, x)
            }
        }
        (true, false) if d == DType::I1 => {
            let zero = const_like(&mut fx.bcx, xt, lir::Const::Float(0.0))?;
            fx.bcx.ins().fcmp(FloatCC::NotEqual, x, zero)
        }
        (true, false) => match d {
            DType::I32 | DType::I64 => fx.bcx.ins().fcvt_to_sint_sat(dt, x),
            DType::U32 | DType::U64 => fx.bcx.ins().fcvt_to_uint_sat(dt, x),
            _ => {
                // Saturate through i32, then clamp to the narrow range.
                let (lo, hi) = match d {
                    DType::I8 => (i8::MIN as i64, i8::MAX as i64),
                    DType::I16 => (i16::MIN as i64, i16::MAX as i64),
                    DType::U8 => (0, u8::MAX as i64),
                    _ => (0, u16::MAX as i64),
                };
                let wide = if d.is_signed() {
                    fx.bcx.ins().fcvt_to_sint_sat(types::I32, x)
                } else {
                    fx.bcx.ins().fcvt_to_uint_sat(types::I32, x)
                };
                let lo = iconst(&mut fx.bcx, types::I32, lo);
                let hi = iconst(&mut fx.bcx, types::I32, hi);
                let clamped = if d.is_signed() {
                    let c = fx.bcx.ins().smax(wide, lo);
                    fx.bcx.ins().smin(c, hi)
                } else {
                    // Already non-negative, as an unsigned number.
                    fx.bcx.ins().umin(wide, hi)
                };
                fx.bcx.ins().ireduce(dt, clamped)
            }
        },
        (false, false) if d == DType::I1 => fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, x, 0),
        (false, false) => {
            let (sb, db) = (xt.lane_bits(), dt.lane_bits());
            if db > sb {
                if s.is_signed() { fx.bcx.ins().sextend(dt, x) } else { fx.bcx.ins().uextend(dt, x) }
            } else if db < sb {
                fx.bcx.ins().ireduce(dt, x)
            } else {
                x
            }
        }
    })
}

pub(crate) fn codegen_bitcast(fx: &mut FunctionCx, a: lir::Value, ty: Ty) -> Result<CVal, CodegenError> {
    let s = fx.f.ty(a).dtype();
    let d = ty.dtype();
    if s.bits() != d.bits() || s == DType::I1 || d == DType::I1 {
        return Err(CodegenError::InvalidIr(format!("bitcast from {s} to {d}")));
    }
    if half::is_half(s) || half::is_half(d) {
        return half::codegen_bitcast(fx, a, ty);
    }
    value::scalar_type(s)?;
    let per_of = per_for(s, true);
    lanewise(fx, ty, per_of, &[a], |fx, v| {
        let xt = fx.bcx.func.dfg.value_type(v[0]);
        let dt = value::scalar_type(d)?.by(xt.lane_count()).unwrap_or(value::scalar_type(d)?);
        Ok(if xt == dt {
            v[0]
        } else if xt.is_vector() {
            fx.bcx.ins().bitcast(dt, value::bitcast_flags(), v[0])
        } else {
            fx.bcx.ins().bitcast(dt, MemFlagsData::new(), v[0])
        })
    })
}

/// Combines two scalars as `op` does on `d`.
pub(crate) fn combine(
    bcx: &mut FunctionBuilder,
    op: ReduceOp,
    d: DType,
    x: Value,
    y: Value,
) -> Result<Value, CodegenError> {
    let ins = bcx.ins();
    Ok(match (op, d) {
        (ReduceOp::Sum, DType::I1) => return Err(unsupported("sum of i1 lanes")),
        (ReduceOp::Max, DType::I1) => ins.bor(x, y),
        (ReduceOp::Min, DType::I1) => ins.band(x, y),
        (ReduceOp::Sum, _) if d.is_float() => {
            let s = ins.fadd(x, y);
            half::round_if_half(bcx, d, s)
        }
        (ReduceOp::Sum, _) => ins.iadd(x, y),
        (ReduceOp::Max, _) if d.is_float() => ins.fmax(x, y),
        (ReduceOp::Min, _) if d.is_float() => ins.fmin(x, y),
        (ReduceOp::Max, _) if d.is_signed() => ins.smax(x, y),
        (ReduceOp::Min, _) if d.is_signed() => ins.smin(x, y),
        (ReduceOp::Max, _) => ins.umax(x, y),
        (ReduceOp::Min, _) => ins.umin(x, y),
    })
}

/// Adjacent lanes pairwise: `((l0 ∘ l1) ∘ (l2 ∘ l3)) ∘ ((l4 ∘ l5) ∘ (l6 ∘ l7))`, the
/// order the loop IR fixes.
pub(crate) fn codegen_reduce_lanes(
    fx: &mut FunctionCx,
    op: ReduceOp,
    a: lir::Value,
    ty: Ty,
) -> Result<CVal, CodegenError> {
    let d = fx.f.ty(a).dtype();
    if ty != Ty::Scalar(d) {
        return Err(CodegenError::InvalidIr(format!("a lane reduction of a {d} tile gives {ty}")));
    }
    let t = match fx.val(a)? {
        CVal::Tile(t) => t,
        scalar @ CVal::Scalar(_) => return Ok(scalar),
    };
    let mut level = value::lanes(&mut fx.bcx, d, &t);
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            next.push(if let [x, y] = *pair { combine(&mut fx.bcx, op, d, x, y)? } else { pair[0] });
        }
        level = next;
    }
    Ok(CVal::Scalar(level[0]))
}

/// An `i8` that is 1 when every lane of the mask is true.
pub(crate) fn all_true(bcx: &mut FunctionBuilder, t: &Tile) -> Value {
    let mut acc: Option<Value> = None;
    for &p in &t.parts {
        let v = if t.per > 1 { bcx.ins().vall_true(p) } else { p };
        acc = Some(match acc {
            Some(a) => bcx.ins().band(a, v),
            None => v,
        });
    }
    acc.unwrap_or_else(|| bcx.ins().iconst(types::I8, 1))
}

/// A float scalar widened to `f64`.
pub(crate) fn float_to_f64(bcx: &mut FunctionBuilder, d: DType, x: Value) -> Value {
    if d == DType::F64 { x } else { bcx.ins().fpromote(types::F64, x) }
}

/// An integer scalar extended to 64 bits by its signedness.
pub(crate) fn int_to_i64(bcx: &mut FunctionBuilder, d: DType, x: Value) -> Value {
    if d.bits() == 64 {
        x
    } else if d.is_signed() {
        bcx.ins().sextend(types::I64, x)
    } else {
        bcx.ins().uextend(types::I64, x)
    }
}
