//! `constant-fold`: evaluates instructions whose operands are constants.
//!
//! An operand is constant when it is a scalar `const` or a `splat` of one. The result is
//! computed with exactly the semantics of the reference interpreter (`lnc_bir::interp`,
//! the IR's definition) and becomes a `const`, or a `splat` of a new `const` when the
//! result is a block. The rewrites:
//!
//! - `binary(k1, k2) => k`: integers wrap at the dtype's width and honour its signedness;
//!   `idiv` truncates toward zero and `rem` takes the dividend's sign (`MIN // -1` wraps to
//!   `MIN`, `MIN % -1` is 0); a shift amount is unsigned and shifting by the width or more
//!   leaves 0 (or the sign). Floats are computed in the dtype's precision: `fp64` in `f64`,
//!   `fp32` in `f32`, `fp16`/`bf16` in `f32` rounded once to the dtype; `idiv` is
//!   `floor(a / b)`, `rem` is `fmod`, `min`/`max` propagate NaN and put `-0.0` below `+0.0`.
//! - `cmp(k1, k2) => k` (floats: false on NaN, except `!=`).
//! - `cmp(arange(s, e), k) => splat(k')` when every lane compares the same way.
//! - `unary(k1) => k`, `cast(k1) => k`, `bitcast(k1) => k`: float to int truncates toward
//!   zero and saturates (NaN gives 0); a cast to `int1` is `!= 0` (NaN gives true), as in
//!   Triton; int to float and float to float round to nearest even, once.
//! - `select(k, a, b) => a` if `k` is true, `b` otherwise.
//! - `reduce max/min(splat(k)) => k`; `reduce sum(splat(k)) => k * n` on integers.
//! - `if k { A } else { B } => A` (or `B`) inlined, the `if`'s results replaced by the
//!   values the taken region yields.
//!
//! It does NOT fold: integer division or remainder by zero (a run-time error, which must
//! stay where the program put it); float `reduce sum` (its rounding depends on the
//! summation order); `bitcast`s giving NaN (the payload need not survive); `pow` on
//! integers; `for` or `while` with constant trip counts; `arange` itself. It leaves the
//! constants it consumed for `dce` and the duplicate constants it creates for `cse`.
//!
//! Casts to `fp16`/`bf16` round once from the exact value (`DType::round_float`, shared
//! with the interpreter), the IEEE result.

use lnc_bir::{BinOp, CmpOp, Const, DType, Function, Inst, Opcode, Region, UnOp};

use crate::util::{
    Subst, def_opcode, emit_const, lanes_const, lanes_int, put_regions, round_float, take_regions,
};

/// The pass's name, for `--passes` and test headers.
pub const NAME: &str = "constant-fold";

/// Runs the pass; returns whether anything changed.
pub fn run(func: &mut Function) -> bool {
    let mut body = std::mem::take(&mut func.body);
    let changed = fold_region(func, &mut body, &mut Subst::default());
    func.body = body;
    changed
}

fn fold_region(func: &mut Function, region: &mut Region, subst: &mut Subst) -> bool {
    let mut changed = false;
    let old = std::mem::take(&mut region.insts);
    let mut out = Vec::with_capacity(old.len());
    for inst in old {
        subst.apply(func, inst);
        if !func.insts[inst].regions.is_empty() {
            let mut regions = take_regions(func, inst);
            for r in &mut regions {
                changed |= fold_region(func, r, subst);
            }
            if let Some(taken) = taken_branch(func, inst, &mut regions) {
                inline_region(func, inst, taken, &mut out, subst);
                changed = true;
            } else {
                put_regions(func, inst, regions);
                out.push(inst);
            }
            continue;
        }
        match fold_inst(func, inst) {
            Some(Folded::Value(v)) => {
                subst.replace(func.insts[inst].results[0], v);
                changed = true;
            }
            Some(Folded::Const(c)) => {
                let result = func.insts[inst].results[0];
                match emit_const(func, &mut out, func.ty(result), c, inst) {
                    Some(v) => {
                        subst.replace(result, v);
                        changed = true;
                    }
                    None => out.push(inst),
                }
            }
            None => out.push(inst),
        }
    }
    region.insts = out;
    changed
}

/// `if k { A } else { B } => A or B`: the region to inline, when the condition is constant.
fn taken_branch(func: &Function, inst: Inst, regions: &mut Vec<Region>) -> Option<Region> {
    let data = &func.insts[inst];
    if data.opcode != Opcode::If || regions.len() != 2 {
        return None;
    }
    let cond = lanes_int(func, data.args[0])?;
    Some(regions.swap_remove(if cond != 0 { 0 } else { 1 }))
}

/// Moves the instructions of `region` before the `if` it belongs to and replaces the `if`'s
/// results by what the region yields.
fn inline_region(func: &Function, inst: Inst, region: Region, out: &mut Vec<Inst>, subst: &mut Subst) {
    let Some((&term, body)) = region.insts.split_last() else {
        return;
    };
    out.extend_from_slice(body);
    let yielded = &func.insts[term].args;
    for (&r, &y) in func.insts[inst].results.iter().zip(yielded) {
        subst.replace(r, y);
    }
}

enum Folded {
    /// The result is an existing value.
    Value(lnc_bir::Value),
    /// The result is a constant in every lane.
    Const(Const),
}

fn fold_inst(func: &Function, inst: Inst) -> Option<Folded> {
    let data = &func.insts[inst];
    if data.results.len() != 1 {
        return None;
    }
    let ty = func.ty(data.results[0]);
    let args = &data.args;
    let operand_dtype = |n: usize| func.num_dtype(*args.get(n)?);
    match data.opcode {
        Opcode::Binary(op) => {
            let d = operand_dtype(0)?;
            eval_binary(op, d, lanes_const(func, args[0])?, lanes_const(func, args[1])?).map(Folded::Const)
        }
        Opcode::Cmp(op) => {
            let d = operand_dtype(0)?;
            let flag = match (lanes_const(func, args[0]), lanes_const(func, args[1])) {
                (Some(a), Some(b)) => eval_cmp(op, d, a, b)?,
                (None, Some(_)) => cmp_arange(func, op, d, args[0], args[1])?,
                (Some(_), None) => cmp_arange(func, mirror(op), d, args[1], args[0])?,
                (None, None) => return None,
            };
            Some(Folded::Const(Const::Int(flag as i64)))
        }
        Opcode::Unary(op) => {
            eval_unary(op, operand_dtype(0)?, lanes_const(func, args[0])?).map(Folded::Const)
        }
        Opcode::Cast => {
            eval_cast(operand_dtype(0)?, ty.num_dtype()?, lanes_const(func, args[0])?).map(Folded::Const)
        }
        Opcode::Bitcast => {
            eval_bitcast(operand_dtype(0)?, ty.num_dtype()?, lanes_const(func, args[0])?).map(Folded::Const)
        }
        Opcode::Select => {
            let pick = if lanes_int(func, args[0])? != 0 { args[1] } else { args[2] };
            if func.ty(pick) == ty {
                Some(Folded::Value(pick))
            } else {
                lanes_const(func, pick).map(Folded::Const)
            }
        }
        Opcode::Reduce { op, axis, .. } => {
            let src = args[0];
            let c = lanes_const(func, src)?;
            match (op, c) {
                (lnc_bir::ReduceOp::Max | lnc_bir::ReduceOp::Min, _) => Some(Folded::Const(c)),
                (lnc_bir::ReduceOp::Sum, Const::Int(k)) => {
                    let d = operand_dtype(0)?;
                    let n = *func.ty(src).shape.dims().get(axis as usize)? as i64;
                    Some(Folded::Const(Const::Int(d.wrap_int(k.wrapping_mul(n)))))
                }
                (lnc_bir::ReduceOp::Sum, Const::Float(_)) => None,
            }
        }
        _ => None,
    }
}

/// `cmp(arange(s, e), k) => splat(k')`: lanes are increasing, so the first and last lane
/// bound every other for the order predicates; `==`/`!=` are uniform only when `k` lies
/// outside the range.
fn cmp_arange(
    func: &Function,
    op: CmpOp,
    d: DType,
    range: lnc_bir::Value,
    k: lnc_bir::Value,
) -> Option<bool> {
    let Some(Opcode::Arange { start, end }) = def_opcode(func, range) else {
        return None;
    };
    let k = d.wrap_int(lanes_int(func, k)?);
    // Lanes must be the dtype's own values for the integer order to match the lanes' order.
    if !d.is_signed() || end <= start || d.wrap_int(start) != start || d.wrap_int(end - 1) != end - 1 {
        return None;
    }
    let first = eval_cmp(op, d, Const::Int(start), Const::Int(k))?;
    let last = eval_cmp(op, d, Const::Int(end - 1), Const::Int(k))?;
    let inside = (start..end).contains(&k);
    match op {
        CmpOp::Eq | CmpOp::Ne if inside => None,
        _ => (first == last).then_some(first),
    }
}

/// The predicate that holds for `(b, a)` when `op` holds for `(a, b)`.
pub(crate) fn mirror(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Eq,
        CmpOp::Ne => CmpOp::Ne,
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
    }
}

/// `a op b` on constants of dtype `d`.
pub fn eval_binary(op: BinOp, d: DType, a: Const, b: Const) -> Option<Const> {
    match (a, b) {
        (Const::Int(x), Const::Int(y)) if d.is_int() => int_binary(op, d, x, y).map(Const::Int),
        (Const::Float(x), Const::Float(y)) if d.is_float() => float_binary(op, d, x, y).map(Const::Float),
        _ => None,
    }
}

fn int_binary(op: BinOp, d: DType, x: i64, y: i64) -> Option<i64> {
    let (x, y) = (d.wrap_int(x), d.wrap_int(y));
    // Unsigned values are stored zero-extended (u64 as its bits), so their order and
    // quotients are those of the `u64` reinterpretation.
    let (ux, uy) = (x as u64, y as u64);
    let signed = d.is_signed();
    let r = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::IDiv | BinOp::Rem if y == 0 => return None,
        // `MIN // -1` wraps to `MIN` and `MIN % -1` is 0, as the interpreter defines them.
        BinOp::IDiv if signed => x.wrapping_div(y),
        BinOp::IDiv => (ux / uy) as i64,
        BinOp::Rem if signed => x.wrapping_rem(y),
        BinOp::Rem => (ux % uy) as i64,
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl | BinOp::Shr => {
            // The amount is an unsigned number of the operand's width; shifting by the
            // width or more shifts every bit out (the sign fills a signed `shr`).
            let amount = uy & (u64::MAX >> (64 - d.bits()));
            let out = amount >= d.bits() as u64;
            match (op, signed) {
                (BinOp::Shl, _) if out => 0,
                (BinOp::Shl, _) => x.wrapping_shl(amount as u32),
                (_, true) => x >> amount.min(63),
                (_, false) if out => 0,
                (_, false) => (ux >> amount) as i64,
            }
        }
        BinOp::Min if signed => x.min(y),
        BinOp::Min => ux.min(uy) as i64,
        BinOp::Max if signed => x.max(y),
        BinOp::Max => ux.max(uy) as i64,
        BinOp::Div | BinOp::Pow => return None,
    };
    Some(d.wrap_int(r))
}

fn float_binary(op: BinOp, d: DType, x: f64, y: f64) -> Option<f64> {
    match d {
        DType::F64 => f64_binary(op, x, y),
        DType::F32 => f32_binary(op, x as f32, y as f32).map(f64::from),
        // Both operands are exact in f32, and f32 carries more than twice the precision of
        // these formats plus two bits, so rounding the f32 result once more is exact for
        // + - * /; for the others it is what a runtime computing in f32 gets.
        DType::F16 | DType::BF16 => f32_binary(op, x as f32, y as f32).map(|r| round_float(d, r as f64)),
        _ => None,
    }
}

macro_rules! float_ops {
    ($binary:ident, $unary:ident, $t:ty) => {
        fn $binary(op: BinOp, x: $t, y: $t) -> Option<$t> {
            Some(match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::IDiv => (x / y).floor(),
                BinOp::Rem => x % y,
                BinOp::Pow => x.powf(y),
                // IEEE 754-2019 `minimum`/`maximum`: NaN wins, and -0.0 is below +0.0.
                BinOp::Min | BinOp::Max if x.is_nan() || y.is_nan() => <$t>::NAN,
                BinOp::Min if x < y || (x == y && x.is_sign_negative()) => x,
                BinOp::Max if x > y || (x == y && x.is_sign_positive()) => x,
                BinOp::Min | BinOp::Max => y,
                _ => return None,
            })
        }

        fn $unary(op: UnOp, x: $t) -> Option<$t> {
            Some(match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Sqrt => x.sqrt(),
                UnOp::Rsqrt => 1.0 / x.sqrt(),
                UnOp::Exp => x.exp(),
                UnOp::Exp2 => x.exp2(),
                UnOp::Log => x.ln(),
                UnOp::Log2 => x.log2(),
                UnOp::Sin => x.sin(),
                UnOp::Cos => x.cos(),
                UnOp::Floor => x.floor(),
                UnOp::Ceil => x.ceil(),
                UnOp::Not => return None,
            })
        }
    };
}

float_ops!(f32_binary, f32_unary, f32);
float_ops!(f64_binary, f64_unary, f64);

fn f32_math(op: UnOp, x: f32) -> Option<f32> {
    lnc_bir::math::unary_f32(op, x).or_else(|| f32_unary(op, x))
}

/// `a op b` on constants of dtype `d`; `None` when the dtype and constants disagree.
pub fn eval_cmp(op: CmpOp, d: DType, a: Const, b: Const) -> Option<bool> {
    use std::cmp::Ordering;
    match (a, b) {
        (Const::Int(x), Const::Int(y)) if d.is_int() => {
            let (x, y) = (d.wrap_int(x), d.wrap_int(y));
            let ord = if d.is_signed() { x.cmp(&y) } else { (x as u64).cmp(&(y as u64)) };
            Some(match op {
                CmpOp::Eq => ord == Ordering::Equal,
                CmpOp::Ne => ord != Ordering::Equal,
                CmpOp::Lt => ord == Ordering::Less,
                CmpOp::Le => ord != Ordering::Greater,
                CmpOp::Gt => ord == Ordering::Greater,
                CmpOp::Ge => ord != Ordering::Less,
            })
        }
        (Const::Float(x), Const::Float(y)) if d.is_float() => Some(op.holds(x, y)),
        _ => None,
    }
}

/// `op a` on a constant of dtype `d`.
pub fn eval_unary(op: UnOp, d: DType, a: Const) -> Option<Const> {
    match a {
        Const::Int(x) if d.is_int() => {
            let x = d.wrap_int(x);
            let r = match op {
                UnOp::Neg => x.wrapping_neg(),
                UnOp::Not => !x,
                UnOp::Abs if d.is_signed() => x.wrapping_abs(),
                UnOp::Abs => x,
                _ => return None,
            };
            Some(Const::Int(d.wrap_int(r)))
        }
        Const::Float(x) if d.is_float() => {
            let r = match d {
                DType::F64 => f64_unary(op, x)?,
                // exp and log of f32 fold to what the JIT computes (`lnc_bir::math`).
                DType::F32 => f32_math(op, x as f32)? as f64,
                _ => round_float(d, f32_math(op, x as f32)? as f64),
            };
            Some(Const::Float(r))
        }
        _ => None,
    }
}

/// Numeric conversion of a constant of dtype `from` to dtype `to` (Triton's `.to`).
pub fn eval_cast(from: DType, to: DType, a: Const) -> Option<Const> {
    match a {
        Const::Int(x) if from.is_int() => {
            let x = from.wrap_int(x);
            if to == DType::I1 {
                return Some(Const::Int((x != 0) as i64));
            }
            if to.is_int() {
                // `x` is already sign- or zero-extended by `from`, which is exactly the
                // extension the conversion performs before truncating to `to`.
                return Some(Const::Int(to.wrap_int(x)));
            }
            let (negative, mag) =
                if from.is_signed() && x < 0 { (true, x.unsigned_abs()) } else { (false, x as u64) };
            let m = match to {
                DType::F64 => mag as f64,
                DType::F32 => mag as f32 as f64,
                _ => round_float(to, round_to_bits(mag, if to == DType::F16 { 11 } else { 8 })),
            };
            Some(Const::Float(if negative { -m } else { m }))
        }
        Const::Float(x) if from.is_float() => Some(match to {
            _ if to.is_float() => Const::Float(round_float(to, x)),
            DType::I1 => Const::Int((x != 0.0) as i64),
            DType::I8 => Const::Int(x as i8 as i64),
            DType::I16 => Const::Int(x as i16 as i64),
            DType::I32 => Const::Int(x as i32 as i64),
            DType::I64 => Const::Int(x as i64),
            DType::U8 => Const::Int(x as u8 as i64),
            DType::U16 => Const::Int(x as u16 as i64),
            DType::U32 => Const::Int(x as u32 as i64),
            DType::U64 => Const::Int(x as u64 as i64),
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => unreachable!("handled above"),
        }),
        _ => None,
    }
}

/// `mag` rounded to nearest even with `bits` significant bits, as an exact `f64`: one
/// rounding from the integer, where going through `f64` or `f32` would round twice.
fn round_to_bits(mag: u64, bits: u32) -> f64 {
    let len = 64 - mag.leading_zeros();
    if len <= bits {
        return mag as f64;
    }
    let shift = len - bits;
    let (q, rest, half) = (mag >> shift, mag & ((1 << shift) - 1), 1u64 << (shift - 1));
    let q = if rest > half || (rest == half && q & 1 == 1) { q + 1 } else { q };
    q as f64 * 2f64.powi(shift as i32)
}

/// Reinterpretation of the bits of a constant of dtype `from` as dtype `to`.
pub fn eval_bitcast(from: DType, to: DType, a: Const) -> Option<Const> {
    if from.bits() != to.bits() {
        return None;
    }
    let bits = match (a, from) {
        (Const::Int(x), _) if from.is_int() => from.wrap_int(x) as u64,
        // Constants are exact in their dtype, so these conversions do not round.
        (Const::Float(x), DType::F16) => half::f16::from_f64(x).to_bits() as u64,
        (Const::Float(x), DType::BF16) => half::bf16::from_f64(x).to_bits() as u64,
        (Const::Float(x), DType::F32) => (x as f32).to_bits() as u64,
        (Const::Float(x), DType::F64) => x.to_bits(),
        _ => return None,
    };
    let r = match to {
        _ if to.is_int() => Const::Int(to.wrap_int(bits as i64)),
        DType::F16 => Const::Float(half::f16::from_bits(bits as u16).to_f64()),
        DType::BF16 => Const::Float(half::bf16::from_bits(bits as u16).to_f64()),
        DType::F32 => Const::Float(f32::from_bits(bits as u32) as f64),
        DType::F64 => Const::Float(f64::from_bits(bits)),
        _ => unreachable!("every dtype is an integer or one of the floats above"),
    };
    // A NaN's payload need not survive the trip through `f64` and back.
    match r {
        Const::Float(f) if f.is_nan() => None,
        _ => Some(r),
    }
}
