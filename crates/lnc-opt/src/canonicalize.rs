//! `canonicalize`: exact algebraic identities and a canonical operand order.
//!
//! Every rewrite holds for every input, NaN, infinities and signed zeros included; none
//! trades precision for speed. The rewrites:
//!
//! - `k op x => x op k` for commutative `op` (`+ * & | ^ min max`) and a constant `k`;
//!   `k cmp x => x cmp' k` with the mirrored predicate; otherwise `a > b => b < a` and
//!   `a >= b => b <= a`, so that `cse` sees one spelling and masks read `offs < n`.
//! - Integers: `x + 0 => x`, `x - 0 => x`, `x * 1 => x`, `x // 1 => x`, `x * 0 => 0`,
//!   `x % 1 => 0`, `x * -1 => -x` (signed), `x - x => 0`, `x & 0 => 0`, `x & ~0 => x`,
//!   `x | 0 => x`, `x | ~0 => ~0`, `x ^ 0 => x`, `x ^ x => 0`, `x & x => x`, `x | x => x`,
//!   `x << 0 => x`, `x >> 0 => x`, `x cmp x => true/false`. On `int1`, `~0` is `true`.
//! - Floats: `x + -0.0 => x`, `x - 0.0 => x`, `x * 1.0 => x`, `x / 1.0 => x`.
//! - `min(x, x) => x`, `max(x, x) => x`, `-(-x) => x`, `~(~x) => x`.
//! - `select(c, a, a) => a`, `select(~c, a, b) => select(c, b, a)`,
//!   `select(c, true, false) => c`.
//! - `cast x: T -> T => x`, `bitcast x: T -> T => x`,
//!   `bitcast(bitcast(x)) => bitcast(x)` (or `x` when back to its type).
//! - `op(splat(a), splat(b)) => splat(op(a, b))` for elementwise `op` (binary, cmp, unary,
//!   select, cast, bitcast, ptr_add), so the work is done once per program and
//!   `constant-fold` sees scalar constants.
//! - `broadcast x: T -> T => x`, `broadcast(broadcast(x)) => broadcast(x)`,
//!   `broadcast(splat(x)) => splat(x)`, `expand_dims(splat(x)) => splat(x)`.
//! - `reduce max/min(splat(x)) => x` (or `splat(x)` when the result is a block).
//! - `ptr_add(p, 0) => p`; `ptr_add(ptr_add(p, a), b) => ptr_add(p, a + b)` when `a` and `b`
//!   have one type and the inner `ptr_add` has no other use (or both offsets are
//!   constants). Like Triton's `AddPtr` combine, this assumes `a + b` does not overflow the
//!   offset type, as offsets into one buffer do not.
//! - `load(p, true, o) => load(p)`, `load(p, false, o) => o` (or `0` without `o`),
//!   `store(p, v, true) => store(p, v)`, `store(p, v, false) =>` (removed): masked-off
//!   lanes are never accessed.
//!
//! It does NOT: rewrite `x + 0.0` or `x * 0.0` on floats (wrong for `-0.0`, NaN and
//! infinities), nor `x * -1.0 => -x` (the sign of a NaN result would differ, visible
//! through a `bitcast`), reassociate or distribute, fold constants (that is `constant-fold`), merge
//! duplicates (`cse`) or delete the instructions it bypasses (`dce`); it does not simplify
//! atomics with constant masks, nor `expand_dims`/`broadcast` chains beyond the rules above.

use cranelift_entity::SecondaryMap;
use lnc_bir::{BinOp, CmpOp, Const, DType, Function, Inst, Opcode, Region, Type, UnOp, Value};

use crate::fold::mirror;
use crate::util::{
    Subst, def_inst, def_opcode, elem_type, emit, emit_const, is_int_type, lanes_const, lanes_float,
    lanes_int, put_regions, splat_operand, take_regions, use_counts,
};

/// The pass's name, for `--passes` and test headers.
pub const NAME: &str = "canonicalize";

/// Runs the pass; returns whether anything changed.
pub fn run(func: &mut Function) -> bool {
    // Counted once up front: they only steer the `ptr_add` combine's profitability, so a
    // count that goes stale during the walk costs at most a missed or extra rewrite.
    let uses = use_counts(func);
    let mut body = std::mem::take(&mut func.body);
    let changed = canon_region(func, &mut body, &mut Subst::default(), &uses);
    func.body = body;
    changed
}

/// What to do with an instruction after looking at it.
enum Action {
    /// Keep it as it is.
    Keep,
    /// Keep it; it was modified in place.
    Changed,
    /// Drop it; its (single) result is replaced by this value.
    Replace(Value),
    /// Drop it; it has no results.
    Delete,
}

fn canon_region(
    func: &mut Function,
    region: &mut Region,
    subst: &mut Subst,
    uses: &SecondaryMap<Value, u32>,
) -> bool {
    let mut changed = false;
    let old = std::mem::take(&mut region.insts);
    let mut out = Vec::with_capacity(old.len());
    for inst in old {
        subst.apply(func, inst);
        if !func.insts[inst].regions.is_empty() {
            let mut regions = take_regions(func, inst);
            for r in &mut regions {
                changed |= canon_region(func, r, subst, uses);
            }
            put_regions(func, inst, regions);
        }
        match canon_inst(func, inst, &mut out, uses) {
            Action::Keep => out.push(inst),
            Action::Changed => {
                out.push(inst);
                changed = true;
            }
            Action::Replace(v) => {
                subst.replace(func.insts[inst].results[0], v);
                changed = true;
            }
            Action::Delete => changed = true,
        }
    }
    region.insts = out;
    changed
}

fn canon_inst(
    func: &mut Function,
    inst: Inst,
    out: &mut Vec<Inst>,
    uses: &SecondaryMap<Value, u32>,
) -> Action {
    let data = &func.insts[inst];
    let opcode = data.opcode;
    let args = data.args.clone();
    match opcode {
        Opcode::Load { has_mask: true, has_other, .. } => {
            return masked_load(func, inst, &args, has_other, out);
        }
        Opcode::Store { has_mask: true, check_only } => return masked_store(func, inst, &args, check_only),
        _ => {}
    }
    let [result] = data.results[..] else {
        return Action::Keep;
    };
    let ty = func.ty(result);
    if let Some(action) = hoist_splats(func, inst, opcode, &args, ty, out) {
        return action;
    }
    match opcode {
        Opcode::Binary(op) => binary(func, inst, op, &args, ty, out),
        Opcode::Cmp(op) => cmp(func, inst, op, &args, ty, out),
        Opcode::Unary(op) => match def_opcode(func, args[0]) {
            // -(-x) => x, ~(~x) => x
            Some(Opcode::Unary(inner)) if inner == op && matches!(op, UnOp::Neg | UnOp::Not) => {
                Action::Replace(operand(func, args[0], 0))
            }
            _ => Action::Keep,
        },
        Opcode::Select => select(func, inst, &args, ty),
        // cast x: T -> T => x
        Opcode::Cast | Opcode::Broadcast if func.ty(args[0]) == ty => Action::Replace(args[0]),
        Opcode::Bitcast => bitcast(func, inst, &args, ty),
        Opcode::Broadcast => match def_opcode(func, args[0]) {
            // broadcast(broadcast(x)) => broadcast(x)
            Some(Opcode::Broadcast) => {
                let x = operand(func, args[0], 0);
                if func.ty(x) == ty {
                    Action::Replace(x)
                } else {
                    func.insts[inst].args = vec![x];
                    Action::Changed
                }
            }
            Some(Opcode::Splat) => Action::Replace(resplat(func, args[0], ty, inst, out)),
            _ => Action::Keep,
        },
        // expand_dims(splat(x)) => splat(x)
        Opcode::ExpandDims(_) if splat_operand(func, args[0]).is_some() => {
            Action::Replace(resplat(func, args[0], ty, inst, out))
        }
        // reduce max/min(splat(x)) => x
        Opcode::Reduce { op: lnc_bir::ReduceOp::Max | lnc_bir::ReduceOp::Min, .. } => {
            match splat_operand(func, args[0]) {
                Some(x) if func.ty(x) == ty => Action::Replace(x),
                Some(_) => Action::Replace(resplat(func, args[0], ty, inst, out)),
                None => Action::Keep,
            }
        }
        Opcode::PtrAdd => ptr_add(func, inst, &args, uses, out),
        _ => Action::Keep,
    }
}

/// The `n`-th operand of the instruction defining `v`.
fn operand(func: &Function, v: Value, n: usize) -> Value {
    let (i, _) = def_inst(func, v).expect("caller matched the defining opcode");
    func.insts[i].args[n]
}

/// `splat(x)` of type `ty`, for the `splat` `s`.
fn resplat(func: &mut Function, s: Value, ty: Type, like: Inst, out: &mut Vec<Inst>) -> Value {
    let x = splat_operand(func, s).expect("caller checked for a splat");
    emit(func, out, Opcode::Splat, vec![x], ty, like)
}

/// `op(splat(a), splat(b)) => splat(op(a, b))` for elementwise `op`.
fn hoist_splats(
    func: &mut Function,
    inst: Inst,
    opcode: Opcode,
    args: &[Value],
    ty: Type,
    out: &mut Vec<Inst>,
) -> Option<Action> {
    let elementwise = matches!(
        opcode,
        Opcode::Binary(_)
            | Opcode::Cmp(_)
            | Opcode::Unary(_)
            | Opcode::Select
            | Opcode::Fma
            | Opcode::Cast
            | Opcode::Bitcast
            | Opcode::PtrAdd
    );
    if !elementwise || !ty.is_block() {
        return None;
    }
    let scalars: Vec<Value> = args.iter().map(|&a| splat_operand(func, a)).collect::<Option<_>>()?;
    let s = emit(func, out, opcode, scalars, elem_type(ty), inst);
    Some(Action::Replace(emit(func, out, Opcode::Splat, vec![s], ty, inst)))
}

fn is_commutative(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Min | BinOp::Max)
}

fn binary(
    func: &mut Function,
    inst: Inst,
    op: BinOp,
    args: &[Value],
    ty: Type,
    out: &mut Vec<Inst>,
) -> Action {
    let (mut a, mut b) = (args[0], args[1]);
    let mut action = Action::Keep;
    // k op x => x op k
    if is_commutative(op) && lanes_const(func, a).is_some() && lanes_const(func, b).is_none() {
        (a, b) = (b, a);
        func.insts[inst].args = vec![a, b];
        action = Action::Changed;
    }
    let Some(d) = ty.num_dtype() else {
        return action;
    };
    let zero = |func: &mut Function, out: &mut Vec<Inst>| {
        let v = emit_const(func, out, ty, Const::Int(0), inst).expect("integer type");
        Action::Replace(v)
    };
    let neg = |func: &mut Function, out: &mut Vec<Inst>| {
        Action::Replace(emit(func, out, Opcode::Unary(UnOp::Neg), vec![a], ty, inst))
    };
    if a == b {
        match op {
            // min(x, x) => x, max(x, x) => x, x & x => x, x | x => x
            BinOp::Min | BinOp::Max | BinOp::And | BinOp::Or => return Action::Replace(a),
            // x - x => 0, x ^ x => 0
            BinOp::Sub | BinOp::Xor if d.is_int() => return zero(func, out),
            _ => {}
        }
    }
    if d.is_int() {
        let Some(k) = lanes_int(func, b).map(|k| d.wrap_int(k)) else {
            return action;
        };
        let ones = d.wrap_int(-1);
        match (op, k) {
            // x + 0 => x, x - 0 => x, x | 0 => x, x ^ 0 => x, x << 0 => x, x >> 0 => x
            (BinOp::Add | BinOp::Sub | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr, 0) => {
                Action::Replace(a)
            }
            // x * 1 => x, x // 1 => x
            (BinOp::Mul | BinOp::IDiv, 1) => Action::Replace(a),
            // x * 0 => 0, x & 0 => 0
            (BinOp::Mul | BinOp::And, 0) => Action::Replace(b),
            // x % 1 => 0
            (BinOp::Rem, 1) => zero(func, out),
            // x & ~0 => x
            (BinOp::And, k) if k == ones => Action::Replace(a),
            // x | ~0 => ~0
            (BinOp::Or, k) if k == ones => Action::Replace(b),
            // x * -1 => -x
            (BinOp::Mul, -1) if d.is_signed() => neg(func, out),
            _ => action,
        }
    } else {
        let Some(k) = lanes_float(func, b) else {
            return action;
        };
        match op {
            // x + -0.0 => x
            BinOp::Add if k == 0.0 && k.is_sign_negative() => Action::Replace(a),
            // x - 0.0 => x
            BinOp::Sub if k == 0.0 && k.is_sign_positive() => Action::Replace(a),
            // x * 1.0 => x, x / 1.0 => x
            BinOp::Mul | BinOp::Div if k == 1.0 => Action::Replace(a),
            _ => action,
        }
    }
}

fn cmp(func: &mut Function, inst: Inst, op: CmpOp, args: &[Value], ty: Type, out: &mut Vec<Inst>) -> Action {
    let (a, b) = (args[0], args[1]);
    let (a_const, b_const) = (lanes_const(func, a).is_some(), lanes_const(func, b).is_some());
    // k cmp x => x cmp' k; a > b => b < a, a >= b => b <= a
    if (a_const && !b_const) || (a_const == b_const && matches!(op, CmpOp::Gt | CmpOp::Ge)) {
        let data = &mut func.insts[inst];
        data.args = vec![b, a];
        data.opcode = Opcode::Cmp(mirror(op));
        return Action::Changed;
    }
    // x cmp x => true/false; not on floats, where NaN is unequal to itself.
    if a == b && is_int_type(func.ty(a)) {
        let flag = matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge);
        if let Some(v) = emit_const(func, out, ty, Const::Int(flag as i64), inst) {
            return Action::Replace(v);
        }
    }
    Action::Keep
}

fn select(func: &mut Function, inst: Inst, args: &[Value], ty: Type) -> Action {
    let (c, a, b) = (args[0], args[1], args[2]);
    // select(c, a, a) => a
    if a == b {
        return Action::Replace(a);
    }
    // select(~c, a, b) => select(c, b, a)
    if def_opcode(func, c) == Some(Opcode::Unary(UnOp::Not)) {
        func.insts[inst].args = vec![operand(func, c, 0), b, a];
        return Action::Changed;
    }
    // select(c, true, false) => c
    let is_bool = ty.num_dtype() == Some(DType::I1);
    if is_bool && func.ty(c) == ty && lanes_int(func, a) == Some(1) && lanes_int(func, b) == Some(0) {
        return Action::Replace(c);
    }
    Action::Keep
}

fn bitcast(func: &mut Function, inst: Inst, args: &[Value], ty: Type) -> Action {
    // bitcast x: T -> T => x
    if func.ty(args[0]) == ty {
        return Action::Replace(args[0]);
    }
    // bitcast(bitcast(x)) => bitcast(x), or x when back to its type
    if def_opcode(func, args[0]) == Some(Opcode::Bitcast) {
        let x = operand(func, args[0], 0);
        if func.ty(x) == ty {
            return Action::Replace(x);
        }
        func.insts[inst].args = vec![x];
        return Action::Changed;
    }
    Action::Keep
}

fn ptr_add(
    func: &mut Function,
    inst: Inst,
    args: &[Value],
    uses: &SecondaryMap<Value, u32>,
    out: &mut Vec<Inst>,
) -> Action {
    let (p, b) = (args[0], args[1]);
    // ptr_add(p, 0) => p
    if lanes_int(func, b) == Some(0) {
        return Action::Replace(p);
    }
    // ptr_add(ptr_add(p, a), b) => ptr_add(p, a + b)
    if def_opcode(func, p) == Some(Opcode::PtrAdd) {
        let (q, a) = (operand(func, p, 0), operand(func, p, 1));
        let both_const = lanes_const(func, a).is_some() && lanes_const(func, b).is_some();
        if func.ty(a) == func.ty(b) && (uses[p] == 1 || both_const) {
            let sum = emit(func, out, Opcode::Binary(BinOp::Add), vec![a, b], func.ty(b), inst);
            func.insts[inst].args = vec![q, sum];
            return Action::Changed;
        }
    }
    Action::Keep
}

/// `load(p, true, o) => load(p)`, `load(p, false, o) => o`.
fn masked_load(
    func: &mut Function,
    inst: Inst,
    args: &[Value],
    has_other: bool,
    out: &mut Vec<Inst>,
) -> Action {
    let Some(mask) = lanes_int(func, args[1]) else {
        return Action::Keep;
    };
    if mask != 0 {
        let data = &mut func.insts[inst];
        if let Opcode::Load { has_mask, has_other, .. } = &mut data.opcode {
            (*has_mask, *has_other) = (false, false);
        }
        data.args.truncate(1);
        return Action::Changed;
    }
    let ty = func.ty(func.insts[inst].results[0]);
    if has_other {
        return if func.ty(args[2]) == ty { Action::Replace(args[2]) } else { Action::Keep };
    }
    let zero = match ty.num_dtype() {
        Some(d) if d.is_float() => Const::Float(0.0),
        _ => Const::Int(0),
    };
    match emit_const(func, out, ty, zero, inst) {
        Some(v) => Action::Replace(v),
        None => Action::Keep,
    }
}

/// `store(p, v, true) => store(p, v)`, `store(p, v, false) =>` removed.
fn masked_store(func: &mut Function, inst: Inst, args: &[Value], check_only: bool) -> Action {
    match lanes_int(func, args[2]) {
        Some(0) => Action::Delete,
        Some(_) => {
            let data = &mut func.insts[inst];
            data.opcode = Opcode::Store { has_mask: false, check_only };
            data.args.truncate(2);
            Action::Changed
        }
        None => Action::Keep,
    }
}
