//! `tl.dot(a, b, acc=None, ...)`: the product of a `[M, K]` and a `[K, N]` block, as the
//! block-IR sum of their broadcast products, `sum(a[:, :, None] * b[None, :, :], axis=1)`,
//! plus `acc`.
//!
//! That form needs nothing new below the front end: the `[M, K, N]` product is an
//! elementwise block the tiler fuses into the reduction over `K`, so no `M·K·N` block is
//! ever stored; the loop nest it makes is the outer-product matmul (for each row of `a`
//! and each vector of columns of `b`, accumulators over `K` of `a[m, k] · b[k, n..n+4]`),
//! with `N` the contiguous, vectorized axis.
//!
//! Types follow Triton's `dot`: both operands of one type; `fp16`, `bf16` and `fp32`
//! multiply and accumulate in `fp32` (products of halves are exact there), `fp64` in
//! `fp64`, `int8` in `int32` (wrapping). Triton's GPU default for `fp32` operands,
//! `input_precision="tf32"`, rounds them to 10-bit mantissas on tensor cores; lnc computes
//! in full `fp32`, as `"ieee"` and Triton's interpreter do. The order of the additions
//! over `K` is the reduction's (unspecified in Triton too), and `acc` is added after them.

use lnc_bir::{DType, Elem, Opcode, ReduceOp, Shape};
use lnc_diag::Diagnostic;
use lnc_syntax::ast::BinOp;

use crate::args::{CallArgs, given};
use crate::diag::{shape_str, type_str};
use crate::lower::{Failed, Lowerer, R};
use crate::value::{Opnd, Val};

/// Triton requires every non-batch dimension of a `dot` to be at least 16.
const MIN_DIM: u32 = 16;

impl<'a, 'f> Lowerer<'a, 'f> {
    /// `tl.dot(input, other, acc=None, input_precision=None, allow_tf32=None,
    /// max_num_imprecise_acc=None, out_dtype=tl.float32)`.
    pub(crate) fn dot(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let params =
            ["input", "other", "acc", "input_precision", "allow_tf32", "max_num_imprecise_acc", "out_dtype"];
        let a = self.bind("tl.dot", &params, 2, args)?;
        let (x, y) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
        let (xv, yv) = (self.runtime_value(&x)?, self.runtime_value(&y)?);
        let (xt, yt) = (self.ty(xv), self.ty(yv));
        for (o, t) in [(&x, xt), (&y, yt)] {
            if t.elem.is_ptr() || t.shape.rank() != 2 {
                let e = Diagnostic::error(
                    format!("the operands of `tl.dot` must be 2-D blocks of numbers, got {}", type_str(t)),
                    o.span,
                    "",
                );
                return self.fail(e);
            }
            if let Some(&d) = t.shape.dims().iter().find(|&&d| d < MIN_DIM) {
                let e = Diagnostic::error(
                    format!("every dimension of a `tl.dot` operand must be at least {MIN_DIM}, got {d}"),
                    o.span,
                    shape_str(t.shape),
                );
                return self.fail(e);
            }
        }
        let (m, k) = (xt.shape.dims()[0], xt.shape.dims()[1]);
        let (k2, n) = (yt.shape.dims()[0], yt.shape.dims()[1]);
        if k != k2 {
            let e = Diagnostic::error(
                format!(
                    "`tl.dot` needs the first operand's columns to match the second's rows: {k} and {k2}"
                ),
                span,
                "",
            )
            .with_label(x.span, shape_str(xt.shape))
            .with_label(y.span, shape_str(yt.shape));
            return self.fail(e);
        }
        let (Elem::Scalar(d), Elem::Scalar(d2)) = (xt.elem, yt.elem) else { return Err(Failed) };
        if d != d2 {
            let e = Diagnostic::error(
                format!(
                    "both operands of `tl.dot` must have the same type, got {} and {}",
                    d.tl_name(),
                    d2.tl_name()
                ),
                span,
                "",
            )
            .with_label(x.span, type_str(xt))
            .with_label(y.span, type_str(yt))
            .with_help("convert one of them with `.to(...)`");
            return self.fail(e);
        }
        let out = match d {
            DType::F16 | DType::BF16 | DType::F32 => DType::F32,
            DType::F64 => DType::F64,
            DType::I8 => DType::I32,
            _ => {
                let e = Diagnostic::error(
                    format!("`tl.dot` of {} blocks is not supported", d.tl_name()),
                    x.span,
                    "",
                )
                .with_note("Triton's `dot` takes float16, bfloat16, float32, float64 or int8 operands");
                return self.fail(e);
            }
        };
        if let Some(o) = given(&a[6]) {
            let want = self.const_dtype(o, "`out_dtype`")?;
            if want != out {
                let e = Diagnostic::error(
                    format!(
                        "`tl.dot` of {} operands computes in {}, not {}",
                        d.tl_name(),
                        out.tl_name(),
                        want.tl_name()
                    ),
                    o.span,
                    "",
                )
                .with_help("leave `out_dtype` out and convert the result with `.to(...)`")
                .with_note(
                    "Triton can accumulate float16 products in float16; lnc does not support that yet and \
                     accumulates in float32",
                );
                return self.fail(e);
            }
        }
        if let Some(o) = given(&a[3]) {
            let p = self.const_str(o, "`input_precision`")?;
            if !matches!(p.as_str(), "tf32" | "tf32x3" | "ieee" | "bf16x3" | "bf16x6") {
                let e = Diagnostic::error(format!("unknown `input_precision` \"{p}\""), o.span, "")
                    .with_note("Triton accepts \"tf32\", \"tf32x3\", \"ieee\", \"bf16x3\" and \"bf16x6\"");
                return self.fail(e);
            }
        }
        // a[:, :, None] * b[None, :, :], summed over K.
        let xw = self.cast(xv, out, x.span);
        let yw = self.cast(yv, out, y.span);
        let cube = Shape::new(&[m, k, n]).ok_or(Failed)?;
        let xc = self.emit(
            Opcode::ExpandDims(2),
            vec![xw],
            xt.with_elem(Elem::Scalar(out)).with_shape(Shape::new(&[m, k, 1]).ok_or(Failed)?),
            x.span,
        );
        let yc = self.emit(
            Opcode::ExpandDims(0),
            vec![yw],
            yt.with_elem(Elem::Scalar(out)).with_shape(Shape::new(&[1, k, n]).ok_or(Failed)?),
            y.span,
        );
        let xb = self.expand_to(xc, cube, x.span);
        let yb = self.expand_to(yc, cube, y.span);
        let t = self.ty(xb);
        let prod = self.emit(Opcode::Binary(lnc_bir::BinOp::Mul), vec![xb, yb], t, span);
        let opc = Opcode::Reduce { op: ReduceOp::Sum, axis: 1, keep_dims: false };
        let sum = self.emit(opc, vec![prod], t.with_shape(Shape::d2(m, n)), span);
        let Some(acc) = given(&a[2]) else { return Ok(Val::Tensor(sum)) };
        let av = self.runtime_value(acc)?;
        let at = self.ty(av);
        if at.shape != Shape::d2(m, n) || at.elem != Elem::Scalar(out) {
            let e = Diagnostic::error(
                format!(
                    "the accumulator of `tl.dot` must be a [{m}, {n}] block of {}, got {}",
                    out.tl_name(),
                    type_str(at)
                ),
                acc.span,
                "",
            )
            .with_help(format!("accumulate in {} and convert the result with `.to(...)`", out.tl_name()))
            .with_note(
                "Triton takes a float16 accumulator to mean float16 accumulation; lnc does not support that \
                 yet and accumulates in float32",
            );
            return self.fail(e);
        }
        self.binary(BinOp::Add, Opnd::new(Val::Tensor(av), acc.span), Opnd::new(Val::Tensor(sum), span), span)
    }
}
