//! Helpers shared by the passes: value substitution, constant lookup, constant creation
//! and use counts.
//!
//! Passes rewrite one region at a time in program order. Instead of calling
//! [`Function::replace_uses`] for every replaced value (a walk of the whole function each
//! time, and blind to regions a pass has taken out to edit), they record replacements in a
//! [`Subst`] and resolve each instruction's operands when they reach it: in structured SSA
//! every use comes after its definition in program order, so one walk sees them all.

use std::collections::HashMap;

use cranelift_entity::SecondaryMap;
use lnc_bir::{Const, DType, Elem, Function, Inst, Opcode, Region, Type, Value, ValueDef};

/// Pending replacements of values, applied to operands as instructions are visited.
#[derive(Default)]
pub(crate) struct Subst {
    map: HashMap<Value, Value>,
}

impl Subst {
    /// The value that now stands for `v`.
    pub(crate) fn resolve(&self, mut v: Value) -> Value {
        while let Some(&to) = self.map.get(&v) {
            v = to;
        }
        v
    }

    /// Records that every later use of `from` reads `to`.
    pub(crate) fn replace(&mut self, from: Value, to: Value) {
        let to = self.resolve(to);
        if from != to {
            self.map.insert(from, to);
        }
    }

    /// Rewrites the operands of `inst` through the pending replacements.
    pub(crate) fn apply(&self, func: &mut Function, inst: Inst) {
        if self.map.is_empty() {
            return;
        }
        for a in &mut func.insts[inst].args {
            *a = self.resolve(*a);
        }
    }
}

/// The instruction defining `v` and the result index, when `v` is an instruction result.
pub(crate) fn def_inst(func: &Function, v: Value) -> Option<(Inst, u32)> {
    match func.values[v].def {
        ValueDef::Result(i, n) => Some((i, n)),
        _ => None,
    }
}

/// The opcode of the instruction defining `v`.
pub(crate) fn def_opcode(func: &Function, v: Value) -> Option<Opcode> {
    def_inst(func, v).map(|(i, _)| func.insts[i].opcode)
}

/// The scalar constant `v` is, when it is a `const`.
pub(crate) fn scalar_const(func: &Function, v: Value) -> Option<Const> {
    match def_opcode(func, v)? {
        Opcode::Const(c) => Some(c),
        _ => None,
    }
}

/// The operand of the `splat` defining `v`.
pub(crate) fn splat_operand(func: &Function, v: Value) -> Option<Value> {
    let (i, _) = def_inst(func, v)?;
    let data = &func.insts[i];
    (data.opcode == Opcode::Splat).then(|| data.args[0])
}

/// The constant every lane of `v` holds: a scalar `const`, or a `splat` of one.
pub(crate) fn lanes_const(func: &Function, v: Value) -> Option<Const> {
    scalar_const(func, v).or_else(|| scalar_const(func, splat_operand(func, v)?))
}

/// The integer every lane of `v` holds.
pub(crate) fn lanes_int(func: &Function, v: Value) -> Option<i64> {
    match lanes_const(func, v)? {
        Const::Int(i) => Some(i),
        Const::Float(_) => None,
    }
}

/// The float every lane of `v` holds.
pub(crate) fn lanes_float(func: &Function, v: Value) -> Option<f64> {
    match lanes_const(func, v)? {
        Const::Float(f) => Some(f),
        Const::Int(_) => None,
    }
}

/// Appends to `out` the instructions computing `c` as a value of type `ty`: a `const`, and
/// a `splat` of it when `ty` is a block. `None` when `ty` is not made of numbers.
pub(crate) fn emit_const(
    func: &mut Function,
    out: &mut Vec<Inst>,
    ty: Type,
    c: Const,
    like: Inst,
) -> Option<Value> {
    let d = ty.num_dtype()?;
    let span = func.span(like);
    let ci = func.create_inst(Opcode::Const(c), vec![], &[Type::scalar(d)], span);
    out.push(ci);
    let scalar = func.insts[ci].results[0];
    if !ty.is_block() {
        return Some(scalar);
    }
    Some(emit(func, out, Opcode::Splat, vec![scalar], ty, like))
}

/// Appends a one-result instruction carrying the span of `like` and returns its result.
pub(crate) fn emit(
    func: &mut Function,
    out: &mut Vec<Inst>,
    opcode: Opcode,
    args: Vec<Value>,
    ty: Type,
    like: Inst,
) -> Value {
    let span = func.span(like);
    let i = func.create_inst(opcode, args, &[ty], span);
    out.push(i);
    func.insts[i].results[0]
}

/// The scalar type of the elements of `ty`.
pub(crate) fn elem_type(ty: Type) -> Type {
    Type { elem: ty.elem, shape: lnc_bir::Shape::SCALAR }
}

/// Rounds `x` to the nearest value of float dtype `d`, ties to even, overflowing to
/// infinity; NaN and infinities pass through: one rounding from the exact `f64`, exactly
/// as the interpreter rounds ([`DType::round_float`]).
pub(crate) fn round_float(d: DType, x: f64) -> f64 {
    debug_assert!(d.is_float(), "round_float on an integer dtype");
    d.round_float(x)
}

/// How many times each value is used by instructions reachable from the body.
pub(crate) fn use_counts(func: &Function) -> SecondaryMap<Value, u32> {
    let mut uses = SecondaryMap::new();
    func.walk(|i| {
        for &a in &func.insts[i].args {
            uses[a] += 1;
        }
    });
    uses
}

/// Takes the regions of `inst` out of the function so they can be edited while the
/// function is borrowed mutably; [`put_regions`] puts them back.
pub(crate) fn take_regions(func: &mut Function, inst: Inst) -> Vec<Region> {
    std::mem::take(&mut func.insts[inst].regions)
}

/// Reattaches regions taken with [`take_regions`].
pub(crate) fn put_regions(func: &mut Function, inst: Inst, regions: Vec<Region>) {
    func.insts[inst].regions = regions;
}

/// True when `ty` holds numbers of an integer dtype.
pub(crate) fn is_int_type(ty: Type) -> bool {
    matches!(ty.elem, Elem::Scalar(d) if d.is_int())
}
