//! Assigned numbers: scalar tensors whose value is known while compiling.
//!
//! Triton's code generator turns every number a name is assigned into a tensor
//! (`CodeGenerator._sanitize_target_value`: `_unwrap_if_constexpr`, then
//! `semantic.to_tensor`): after `a = -7`, `a` is an `int32` scalar, so `a // 2` is `-3`
//! (C division) where the literal expression `-7 // 2` is Python's `-4`; after `a = 0.1`,
//! `a` is a `float32` and `a * 3.0` is rounded to `float32` at each step; and an `fp16`
//! block times `a` is computed in `float32` (a tensor takes part in promotion, a literal
//! does not). Only `x: tl.constexpr = ...` keeps a constant.
//!
//! lnc binds such a name to a scalar constant of Triton's type (`to_tensor_type`:
//! `int32`, else `uint32`, `int64`, `uint64`; `float32` unless the value needs `float64`;
//! `int1` for `bool`) and remembers its value in [`Lowerer::known`]. Operations whose
//! operands are all known scalars fold into a new known constant, computed with the block
//! IR's semantics (`lnc_opt::fold`, the interpreter's definition: integers wrap, `//`
//! truncates, floats round in their dtype after every operation), never with Python's.
//!
//! The extension: where Triton requires a `tl.constexpr` (block shapes, `tl.arange`
//! bounds, axes, `tl.static_range` bounds, `tl.constexpr` parameters of called functions,
//! `if` conditions decided while compiling, `tl.static_assert`), lnc also accepts a known
//! scalar and uses its value ([`Lowerer::static_view`]). Triton rejects such kernels, so
//! accepting them changes no meaning: `BLOCK2 = BLOCK * 2` then `tl.arange(0, BLOCK2)`
//! keeps working, as it did when assigned numbers stayed Python constants.
//!
//! Values the map does not hold, though they are `const` instructions too: runtime
//! parameters specialized on a literal (they stay runtime values) and the placeholders of
//! loop dry runs (their value is not the one the loop will see).

use lnc_bir::{Const, DType, Elem, Opcode, Type, UnOp, Value};
use lnc_diag::Span;

use crate::lower::{Lowerer, R};
use crate::value::{Cv, Val};

/// The Python value of a constant of dtype `d` (`bool` for `int1`; unsigned integers by
/// their unsigned value).
pub(crate) fn const_to_cv(d: DType, k: Const) -> Cv {
    match k {
        Const::Int(i) if d == DType::I1 => Cv::Bool(i != 0),
        Const::Int(i) if d.is_signed() => Cv::Int(d.wrap_int(i) as i128),
        Const::Int(i) => Cv::Int(d.wrap_int(i) as u64 as i128),
        Const::Float(f) => Cv::Float(f),
    }
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// The value of `v` when it is a known scalar, with its dtype.
    pub(crate) fn known_scalar(&self, v: Value) -> Option<(DType, Const)> {
        let k = *self.known.get(&v)?;
        let t = self.ty(v);
        match t.elem {
            Elem::Scalar(d) if !t.is_block() => Some((d, k)),
            _ => None,
        }
    }

    /// True when `v` is a known scalar.
    pub(crate) fn is_known(&self, v: Value) -> bool {
        self.known_scalar(v).is_some()
    }

    /// `v` as seen by a place that needs a compile-time value: a known scalar becomes the
    /// Python number it holds (tuples element by element); anything else is unchanged.
    pub(crate) fn static_view(&self, v: &Val) -> Val {
        match v {
            Val::Tensor(x) => match self.known_scalar(*x) {
                Some((d, k)) => Val::Const(const_to_cv(d, k)),
                None => v.clone(),
            },
            Val::Tuple(items) => Val::tuple(items.iter().map(|i| self.static_view(i)).collect()),
            _ => v.clone(),
        }
    }

    /// The value a name is bound to by an assignment (Triton's `_sanitize_target_value`):
    /// a number becomes a known scalar of its literal type, tuples element by element;
    /// tensors, dtypes, `None` and the other compile-time values are bound as they are.
    pub(crate) fn assigned_value(&mut self, v: Val, span: Span) -> R<Val> {
        Ok(match v {
            Val::Const(c) if c.is_number() => {
                let d = self.literal_dtype(&c, span)?;
                Val::Tensor(self.const_of(&c, d, span))
            }
            Val::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items.iter() {
                    out.push(self.assigned_value(i.clone(), span)?);
                }
                Val::tuple(out)
            }
            other => other,
        })
    }

    /// The known result of instruction `op` on `args`, when every argument is a known
    /// scalar and the operation is one whose result does not depend on the target
    /// (arithmetic, comparisons, negation, casts; not `pow`, `exp`, ...), computed with the
    /// block IR's semantics. `None` leaves the instruction to be emitted.
    pub(crate) fn fold(&self, op: &Opcode, args: &[Value], ty: Type) -> Option<Const> {
        use lnc_opt::fold::{eval_binary, eval_bitcast, eval_cast, eval_cmp, eval_unary};
        let Elem::Scalar(d) = ty.elem else { return None };
        if ty.is_block() || args.is_empty() {
            return None;
        }
        let mut ks = Vec::with_capacity(args.len());
        for &a in args {
            ks.push(self.known_scalar(a)?);
        }
        match (op, ks.as_slice()) {
            (Opcode::Binary(b), [(_, x), (_, y)]) if *b != lnc_bir::BinOp::Pow => eval_binary(*b, d, *x, *y),
            (Opcode::Cmp(c), [(from, x), (_, y)]) => {
                eval_cmp(*c, *from, *x, *y).map(|r| Const::Int(r as i64))
            }
            (Opcode::Unary(u), [(_, x)]) if matches!(u, UnOp::Neg | UnOp::Not | UnOp::Abs) => {
                eval_unary(*u, d, *x)
            }
            (Opcode::Cast, [(from, x)]) => eval_cast(*from, d, *x),
            (Opcode::Bitcast, [(from, x)]) => eval_bitcast(*from, d, *x),
            _ => None,
        }
    }

    /// Forgets the known values the function no longer has (after a dry run is undone).
    pub(crate) fn prune_known(&mut self) {
        let n = self.b.func.values.len();
        self.known.retain(|v, _| cranelift_entity::EntityRef::index(*v) < n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_read_back_as_python_values() {
        assert_eq!(const_to_cv(DType::I32, Const::Int(-3)), Cv::Int(-3));
        assert_eq!(const_to_cv(DType::U32, Const::Int(3_000_000_000)), Cv::Int(3_000_000_000));
        assert_eq!(const_to_cv(DType::U64, Const::Int(-1)), Cv::Int(u64::MAX as i128));
        assert_eq!(const_to_cv(DType::I1, Const::Int(1)), Cv::Bool(true));
        assert_eq!(const_to_cv(DType::F32, Const::Float(0.5)), Cv::Float(0.5));
    }
}
