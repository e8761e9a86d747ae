//! `tl.argmax`/`tl.argmin(input, axis, tie_break_left=True, keep_dims=False)` and
//! `tl.max`/`tl.min(..., return_indices=True)`, as two block-IR reductions:
//!
//! ```text
//! m   = max(x, axis, keep_dims=True)                   ; the extremum, broadcast back
//! key = isnan(x) ? i : x == m ? n + i : INT32_MAX      ; i the index along the axis
//! k   = min(key, axis) ; index = k < n ? k : k - n
//! ```
//!
//! Nothing new below the front end: the tiler fuses the key into the minimum's loop, as
//! it fuses any elementwise block into its reduction. Ties go to the smallest index, which
//! is Triton's `tie_break_left=True` and a valid answer for `False` (Triton then returns
//! any of them). A NaN counts as the extremum, the first one winning, as in NumPy and
//! PyTorch; Triton's own combine function gives an order-dependent answer there. The
//! reductions widen the element type as `tl.max` does (`bf16` to `fp32`, integers
//! narrower than 32 bits, `int1` included, to 32); indices are `int32`. With
//! `return_indices=True` the value returned is the element at the index, a third
//! reduction (the sum of it and `-0.0`s), in
//! the input's type (`bf16` as `fp32`), as Triton's combine function returns it: the
//! extremum itself may be a zero of the other sign.

use lnc_bir::{BinOp, CmpOp, DType, Elem, Opcode, ReduceOp, Shape, Type, Value};
use lnc_diag::{Diagnostic, Span};

use crate::args::{CallArgs, given};
use crate::lower::{Failed, Lowerer, R};
use crate::value::{Cv, Opnd, Val};

impl<'a, 'f> Lowerer<'a, 'f> {
    /// `index` (its axis removed) with a size-1 axis inserted again at `axis`.
    fn keep_axis(&mut self, index: Value, axis: usize, span: Span) -> R<Value> {
        let t = self.ty(index);
        let s = t.shape.insert_axis(axis).ok_or(Failed)?;
        Ok(self.emit(Opcode::ExpandDims(axis as u8), vec![index], t.with_shape(s), span))
    }

    /// `tl.argmax` (`max`) or `tl.argmin`.
    pub(crate) fn arg_reduce(&mut self, max: bool, args: CallArgs) -> R<Val> {
        let span = args.span;
        let name = if max { "tl.argmax" } else { "tl.argmin" };
        let a = self.bind(name, &["input", "axis", "tie_break_left", "keep_dims"], 2, args)?;
        let x = a[0].clone().ok_or(Failed)?;
        if let Some(o) = given(&a[2]) {
            self.const_bool(o, "`tie_break_left`")?;
        }
        let keep = match given(&a[3]) {
            Some(o) => self.const_bool(o, "`keep_dims`")?,
            None => false,
        };
        let (_, index) = self.value_and_index(max, &x, given(&a[1]), (keep, false), name, span)?;
        Ok(Val::Tensor(index))
    }

    /// The first index of the maximum (`max`) or minimum of `x` along `axis` and, with
    /// `want_value`, the element there (as Triton's combine function returns it: of `x`'s
    /// own type but `bf16`, which becomes `fp32`; `-0.0` where the extremum is a zero of
    /// either sign at an index holding `-0.0`), each with the size-1 axis kept or removed
    /// (`keep`).
    pub(crate) fn value_and_index(
        &mut self,
        max: bool,
        x: &Opnd,
        axis: Option<&Opnd>,
        (keep, want_value): (bool, bool),
        name: &str,
        span: Span,
    ) -> R<(Option<Value>, Value)> {
        let mut v = self.runtime_value(x)?;
        let t = self.ty(v);
        let Elem::Scalar(d) = t.elem else {
            return self.ptr_not_allowed(name, v, x.span);
        };
        if t.shape.is_scalar() {
            let e = Diagnostic::error(format!("`{name}` needs a block, got a scalar"), x.span, "");
            return self.fail(e);
        }
        let rank = t.shape.rank();
        let axis = match axis {
            Some(o) => self.const_axis(o, rank, "the axis")?,
            None if rank == 1 => 0,
            None => {
                let e = Diagnostic::error(
                    format!("`{name}` without an axis on a block of rank {rank} is not supported"),
                    span,
                    "",
                )
                .with_help("give the axis (Triton flattens the block first, which lnc cannot yet)");
                return self.fail(e);
            }
        };
        let wide = crate::builtins::extremum_dtype(d);
        v = self.cast(v, wide, x.span);
        let t = self.ty(v);
        let shape = t.shape;
        let n = shape.dims()[axis];
        let mut kept_dims = shape.dims().to_vec();
        kept_dims[axis] = 1;
        let kept = Shape::new(&kept_dims).ok_or(Failed)?;
        let op = if max { ReduceOp::Max } else { ReduceOp::Min };
        let m = self.emit(
            Opcode::Reduce { op, axis: axis as u8, keep_dims: true },
            vec![v],
            t.with_shape(kept),
            span,
        );
        let m_all = self.expand_to(m, shape, span);
        // The index along the axis, as a block of `x`'s shape.
        let mut position = self.emit(
            Opcode::Arange { start: 0, end: i64::from(n) },
            vec![],
            Type::block(Elem::Scalar(DType::I32), Shape::d1(n)),
            span,
        );
        for k in (0..rank).filter(|&k| k != axis) {
            let it = self.ty(position);
            let s = it.shape.insert_axis(k).ok_or(Failed)?;
            position = self.emit(Opcode::ExpandDims(k as u8), vec![position], it.with_shape(s), span);
        }
        let position = self.expand_to(position, shape, span);
        let i32_block = Type::block(Elem::Scalar(DType::I32), shape);
        let bool_block = Type::block(Elem::Scalar(DType::I1), shape);
        let none = self.full_value(shape, &Cv::Int(i128::from(i32::MAX)), DType::I32, span);
        let hit = self.emit(Opcode::Cmp(CmpOp::Eq), vec![v, m_all], bool_block, span);
        let key = if wide.is_float() {
            let n_all = self.full_value(shape, &Cv::Int(i128::from(n)), DType::I32, span);
            let later = self.emit(Opcode::Binary(BinOp::Add), vec![position, n_all], i32_block, span);
            let key = self.emit(Opcode::Select, vec![hit, later, none], i32_block, span);
            let nan = self.emit(Opcode::Cmp(CmpOp::Ne), vec![v, v], bool_block, span);
            self.emit(Opcode::Select, vec![nan, position, key], i32_block, span)
        } else {
            self.emit(Opcode::Select, vec![hit, position, none], i32_block, span)
        };
        let out_shape = if keep { kept } else { shape.remove_axis(axis) };
        let out_ty = i32_block.with_shape(out_shape);
        let k = self.emit(
            Opcode::Reduce { op: ReduceOp::Min, axis: axis as u8, keep_dims: keep },
            vec![key],
            out_ty,
            span,
        );
        let index = if wide.is_float() {
            let n_out = self.full_value(out_shape, &Cv::Int(i128::from(n)), DType::I32, span);
            let bool_out = out_ty.with_elem(Elem::Scalar(DType::I1));
            let nan_first = self.emit(Opcode::Cmp(CmpOp::Lt), vec![k, n_out], bool_out, span);
            let shifted = self.emit(Opcode::Binary(BinOp::Sub), vec![k, n_out], out_ty, span);
            self.emit(Opcode::Select, vec![nan_first, k, shifted], out_ty, span)
        } else {
            k
        };
        if !want_value {
            return Ok((None, index));
        }
        // The element at the index: the sum of that one element and neutral zeros (`-0.0`
        // keeps every float, `-0.0` and NaN included, exact).
        let at = if keep { index } else { self.keep_axis(index, axis, span)? };
        let at = self.expand_to(at, shape, span);
        let chosen = self.emit(Opcode::Cmp(CmpOp::Eq), vec![position, at], bool_block, span);
        let zero = if wide.is_float() { Cv::Float(-0.0) } else { Cv::Int(0) };
        let zeros = self.full_value(shape, &zero, wide, span);
        let picked = self.emit(Opcode::Select, vec![chosen, v, zeros], t, span);
        let vt = t.with_shape(out_shape);
        let value = self.emit(
            Opcode::Reduce { op: ReduceOp::Sum, axis: axis as u8, keep_dims: keep },
            vec![picked],
            vt,
            span,
        );
        // Narrow integers were widened for the reduction only.
        let value = if d.is_int() { self.cast(value, d, span) } else { value };
        Ok((Some(value), index))
    }
}
