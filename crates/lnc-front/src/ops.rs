//! Typed operations on values: constants, conversions, broadcasting, and the arithmetic,
//! comparison and unary operators with Triton's promotion rules.
//!
//! Operator semantics follow Triton's `semantic.py`: operands are first converted to a
//! common dtype (`computation_type`, literals weakly typed), then broadcast to a common
//! shape (right-aligned, size-1 axes expand, scalars splat), then combined. When both
//! operands are compile-time values the operation is Python's (see `consteval.rs`).

use lnc_bir::{BinOp as BBin, CmpOp as BCmp, Const, DType, Elem, Opcode, Shape, Type, UnOp, Value};
use lnc_diag::{Diagnostic, Span};
use lnc_syntax::ast::{BinOp, CmpOp, UnaryOp};

use crate::consteval;
use crate::diag::{shape_str, type_str};
use crate::lower::{Failed, Lowerer, R};
use crate::promote::{computation_type, int_range, literal_dtype};
use crate::value::{Cv, Opnd, Val};

/// Right-aligned broadcast of two shapes, or the first axis (counted from the left of the
/// longer shape) where they conflict.
pub(crate) fn broadcast_shapes(a: Shape, b: Shape) -> Result<Shape, usize> {
    let (a, b) = (a.dims(), b.dims());
    let rank = a.len().max(b.len());
    let mut dims = vec![0u32; rank];
    for (i, d) in dims.iter_mut().enumerate() {
        let x = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let y = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        *d = if x == 1 {
            y
        } else if y == 1 || x == y {
            x
        } else {
            return Err(i);
        };
    }
    Shape::new(&dims).ok_or(0)
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// The dtype a literal gets alone (Triton's `runtime_value`), or an error at `span`.
    pub(crate) fn literal_dtype(&mut self, c: &Cv, span: Span) -> R<DType> {
        match literal_dtype(c) {
            Some(d) => Ok(d),
            None if c.is_number() => {
                let d = Diagnostic::error("integer constant does not fit in 64 bits", span, "");
                self.fail(d)
            }
            None => {
                let d = Diagnostic::error(
                    format!("expected a number, got {}", crate::diag::cv_str(c)),
                    span,
                    "not a number",
                );
                self.fail(d)
            }
        }
    }

    /// A scalar constant of dtype `d` holding the number `c`, converted the way Triton
    /// converts a literal to a typed constant (ints wrap, floats round to nearest even,
    /// floats truncate toward zero into ints, anything non-zero is `True` in `int1`). Its
    /// value is known (see `known.rs`).
    pub(crate) fn const_of(&mut self, c: &Cv, d: DType, span: Span) -> Value {
        let (i, f, nonzero) = match *c {
            Cv::Int(i) => (i as i64, i as f64, i != 0),
            Cv::Bool(b) => (b as i64, b as i64 as f64, b),
            Cv::Float(x) => (if x.is_finite() { x.trunc() as i64 } else { 0 }, x, x != 0.0),
            _ => (0, 0.0, false),
        };
        let k = if d.is_float() {
            Const::Float(d.round_float(f))
        } else if d.is_bool() {
            Const::Int(nonzero as i64)
        } else {
            Const::Int(d.wrap_int(i))
        };
        let v = self.emit(Opcode::Const(k), vec![], Type::scalar(d), span);
        self.known.insert(v, k);
        v
    }

    /// Any value usable as a runtime operand: a literal becomes a constant of its own type.
    pub(crate) fn runtime_value(&mut self, o: &Opnd) -> R<Value> {
        match &o.v {
            Val::Tensor(v) => Ok(*v),
            Val::Const(c) if c.is_number() => {
                let d = self.literal_dtype(c, o.span)?;
                Ok(self.const_of(c, d, o.span))
            }
            Val::Undef(_) => Err(Failed),
            other => {
                let what = self.describe(other);
                let d = Diagnostic::error(format!("expected a scalar or a block, got {what}"), o.span, "");
                self.fail(d)
            }
        }
    }

    /// `v` converted to dtype `d` (same shape); no instruction when it already is.
    pub(crate) fn cast(&mut self, v: Value, d: DType, span: Span) -> Value {
        let t = self.ty(v);
        if t.elem == Elem::Scalar(d) {
            return v;
        }
        self.emit(Opcode::Cast, vec![v], t.with_elem(Elem::Scalar(d)), span)
    }

    /// A scalar `v` repeated to `shape` (nothing for a scalar shape).
    pub(crate) fn splat(&mut self, v: Value, shape: Shape, span: Span) -> Value {
        if shape.is_scalar() {
            return v;
        }
        let t = self.ty(v);
        self.emit(Opcode::Splat, vec![v], t.with_shape(shape), span)
    }

    /// `v` broadcast to `shape`, which must be a broadcast of its shape: scalars splat,
    /// missing leading axes are inserted, size-1 axes expand.
    pub(crate) fn expand_to(&mut self, v: Value, shape: Shape, span: Span) -> Value {
        let mut v = v;
        let mut t = self.ty(v);
        if t.shape == shape {
            return v;
        }
        if t.shape.is_scalar() {
            return self.splat(v, shape, span);
        }
        while t.shape.rank() < shape.rank() {
            let Some(s) = t.shape.insert_axis(0) else {
                break;
            };
            v = self.emit(Opcode::ExpandDims(0), vec![v], t.with_shape(s), span);
            t = self.ty(v);
        }
        if t.shape != shape {
            v = self.emit(Opcode::Broadcast, vec![v], t.with_shape(shape), span);
        }
        v
    }

    /// The error for two shapes that do not broadcast.
    pub(crate) fn shape_error(
        &mut self,
        what: &str,
        a: (Shape, Span),
        b: (Shape, Span),
        span: Span,
    ) -> Failed {
        let rank = a.0.rank().max(b.0.rank());
        let axis = broadcast_shapes(a.0, b.0).err().unwrap_or(0);
        let dim = |s: Shape| {
            let d = s.dims();
            if axis + d.len() >= rank { d[axis + d.len() - rank] } else { 1 }
        };
        let d = Diagnostic::error(
            format!("incompatible shapes {} and {}{what}", shape_str(a.0), shape_str(b.0)),
            span,
            "these shapes do not broadcast",
        )
        .with_label(a.1, format!("shape {}", shape_str(a.0)))
        .with_label(b.1, format!("shape {}", shape_str(b.0)))
        .with_note(format!(
            "axis {axis} has size {} on one side and {} on the other; shapes are aligned on the right \
             and sizes must be equal or 1",
            dim(a.0),
            dim(b.0)
        ))
        .with_help("add an axis of size 1 where one is missing (`x[:, None]`, `x[None, :]`), or make the sizes agree");
        self.diags.push(d);
        Failed
    }

    /// Both values broadcast to their common shape.
    pub(crate) fn broadcast_pair(
        &mut self,
        a: (Value, Span),
        b: (Value, Span),
        span: Span,
    ) -> R<(Value, Value)> {
        let (sa, sb) = (self.ty(a.0).shape, self.ty(b.0).shape);
        let Ok(s) = broadcast_shapes(sa, sb) else {
            return Err(self.shape_error("", (sa, a.1), (sb, b.1), span));
        };
        Ok((self.expand_to(a.0, s, a.1), self.expand_to(b.0, s, b.1)))
    }

    /// The dtype of an arithmetic operand and whether it is a weakly typed literal; errors
    /// for pointers (handled by the callers that allow them) and non-numbers.
    fn operand_dtype(&mut self, o: &Opnd, opname: &str) -> R<(DType, bool)> {
        match &o.v {
            Val::Tensor(v) => match self.ty(*v).elem {
                Elem::Scalar(d) => Ok((d, false)),
                Elem::Ptr(_) => {
                    let t = type_str(self.ty(*v));
                    let d = Diagnostic::error(
                        format!("`{opname}` is not defined on pointers"),
                        o.span,
                        format!("this is a {t}"),
                    )
                    .with_help("pointers support `+` and `-` with integer offsets only");
                    self.fail(d)
                }
            },
            Val::Const(c) if c.is_number() => Ok((self.literal_dtype(c, o.span)?, true)),
            Val::Undef(_) => Err(Failed),
            other => {
                let what = self.describe(other);
                let d = Diagnostic::error(format!("unsupported operand for `{opname}`: {what}"), o.span, "");
                self.fail(d)
            }
        }
    }

    /// Triton's `binary_op_type_checking_impl` for numbers: both operands converted to
    /// their computation dtype and broadcast together.
    pub(crate) fn numeric_pair(
        &mut self,
        l: &Opnd,
        r: &Opnd,
        div_or_mod: bool,
        opname: &str,
        span: Span,
    ) -> R<(Value, Value, DType)> {
        let (lt, lw) = self.operand_dtype(l, opname)?;
        let (rt, rw) = self.operand_dtype(r, opname)?;
        let d = match computation_type(lt, lw, rt, rw, div_or_mod) {
            Ok(d) => d,
            Err(msg) => {
                let d = Diagnostic::error(msg, span, "")
                    .with_label(l.span, lt.tl_name())
                    .with_label(r.span, rt.tl_name())
                    .with_help("cast one operand with `.to(...)`");
                return self.fail(d);
            }
        };
        for o in [l, r] {
            let Val::Const(Cv::Int(i)) = o.v else {
                continue;
            };
            if !d.is_int() || d.is_bool() {
                continue;
            }
            let (lo, hi) = int_range(d);
            if i < 0 && !d.is_signed() {
                let e = Diagnostic::error(
                    format!("cannot combine a {} value with the negative constant {i}", d.tl_name()),
                    o.span,
                    "negative",
                )
                .with_help("cast one of them explicitly with `.to(...)`");
                return self.fail(e);
            }
            if i < lo || i > hi {
                let e = Diagnostic::error(
                    format!("constant {i} is out of range for type {}", d.tl_name()),
                    o.span,
                    format!("{} holds {lo}..={hi}", d.tl_name()),
                )
                .with_help(format!(
                    "convert the other operand to a wider type first, e.g. `x.to(tl.{})`",
                    if i > u32::MAX as i128 || i < i32::MIN as i128 || d.is_signed() && d.bits() >= 32 {
                        "int64"
                    } else {
                        "int32"
                    }
                ));
                return self.fail(e);
            }
        }
        let lv = self.materialize(l, d)?;
        let rv = self.materialize(r, d)?;
        let (lv, rv) = self.broadcast_pair((lv, l.span), (rv, r.span), span)?;
        Ok((lv, rv, d))
    }

    /// A numeric operand as a runtime value of dtype `d`.
    pub(crate) fn materialize(&mut self, o: &Opnd, d: DType) -> R<Value> {
        match &o.v {
            Val::Tensor(v) => Ok(self.cast(*v, d, o.span)),
            Val::Const(c) if c.is_number() => Ok(self.const_of(c, d, o.span)),
            Val::Undef(_) => Err(Failed),
            other => {
                let what = self.describe(other);
                let e = Diagnostic::error(format!("expected a number, got {what}"), o.span, "");
                self.fail(e)
            }
        }
    }

    fn is_ptr(&self, o: &Opnd) -> bool {
        matches!(o.v, Val::Tensor(v) if self.ty(v).elem.is_ptr())
    }

    /// `l op r`.
    pub(crate) fn binary(&mut self, op: BinOp, l: Opnd, r: Opnd, span: Span) -> R<Val> {
        let sym = op.as_str();
        if let (Val::Const(a), Val::Const(b)) = (&l.v, &r.v) {
            return match consteval::binop(op, a, b) {
                Ok(c) => Ok(Val::Const(c)),
                Err(msg) => {
                    let d = Diagnostic::error(msg, span, "in this compile-time expression");
                    self.fail(d)
                }
            };
        }
        if let (Val::Tuple(a), Val::Tuple(b), BinOp::Add) = (&l.v, &r.v, op) {
            let mut items = a.to_vec();
            items.extend(b.iter().cloned());
            return Ok(Val::tuple(items));
        }
        if op == BinOp::MatMul {
            // Triton's `a @ b` is `tl.dot(a, b)`.
            return self.dot(crate::args::CallArgs { pos: vec![l, r], kw: Vec::new(), span });
        }
        if matches!(op, BinOp::Add | BinOp::Sub) && (self.is_ptr(&l) || self.is_ptr(&r)) {
            return self.ptr_arith(op, &l, &r, span);
        }
        let (a, b, d) =
            self.numeric_pair(&l, &r, matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::Mod), sym, span)?;
        let t = self.ty(a);
        if d.is_bool()
            && let Some(v) = self.bool_arithmetic(op, a, b, span)
        {
            return Ok(Val::Tensor(v));
        }
        let bop = match op {
            BinOp::Add => BBin::Add,
            BinOp::Sub => BBin::Sub,
            BinOp::Mul => BBin::Mul,
            BinOp::Div => {
                // Integer true division computes in float32, as in Triton.
                let (a, b) = if d.is_int() {
                    (self.cast(a, DType::F32, l.span), self.cast(b, DType::F32, r.span))
                } else {
                    (a, b)
                };
                let t = self.ty(a);
                return Ok(Val::Tensor(self.emit(Opcode::Binary(BBin::Div), vec![a, b], t, span)));
            }
            BinOp::FloorDiv => {
                if d.is_float() {
                    let e = Diagnostic::error(
                        format!("`//` needs integer operands; Triton does not define it on {}", d.tl_name()),
                        span,
                        "",
                    )
                    .with_help("use `/` for floats (and `tl.floor` to round down)");
                    return self.fail(e);
                }
                BBin::IDiv
            }
            BinOp::Mod => BBin::Rem,
            BinOp::Pow => {
                if !d.is_float() {
                    let e = Diagnostic::error(
                        format!("`**` on {} values is not supported", d.tl_name()),
                        span,
                        "",
                    )
                    .with_help("convert to a float type first, e.g. `x.to(tl.float32) ** 2`");
                    return self.fail(e);
                }
                // `x ** 2` is `x * x`, as NumPy (Triton's interpreter) computes a power by
                // the scalar 2: one rounding, and a multiplication on vector lanes instead
                // of a call to libm's `pow` per lane.
                let square = match r.v {
                    Val::Const(Cv::Int(k)) => k == 2,
                    Val::Const(Cv::Float(k)) => k == 2.0,
                    _ => false,
                };
                if square {
                    return Ok(Val::Tensor(self.emit(Opcode::Binary(BBin::Mul), vec![a, a], t, span)));
                }
                BBin::Pow
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
                if d.is_float() {
                    let e = Diagnostic::error(
                        format!("`{sym}` needs integer or boolean operands, got {}", d.tl_name()),
                        span,
                        "",
                    )
                    .with_label(l.span, self.operand_desc(&l))
                    .with_label(r.span, self.operand_desc(&r))
                    .with_help(
                        "convert the value with `.to(tl.int32)`, or reinterpret its bits with \
                         `.to(tl.int32, bitcast=True)`",
                    );
                    return self.fail(e);
                }
                match op {
                    BinOp::BitAnd => BBin::And,
                    BinOp::BitOr => BBin::Or,
                    BinOp::BitXor => BBin::Xor,
                    BinOp::Shl => BBin::Shl,
                    _ => BBin::Shr,
                }
            }
            // Rejected before the operands were converted.
            BinOp::MatMul => return Err(Failed),
        };
        Ok(Val::Tensor(self.emit(Opcode::Binary(bop), vec![a, b], t, span)))
    }

    /// Arithmetic on `int1` operands (of one shape), as compiled Triton computes it: on one
    /// bit, modulo 2, so that `True + True` is `False` (as Triton's interpreter gives for
    /// assigned booleans). Spelt with the logical operators, which code generation has for
    /// `int1`: `+` and `-` are `^`, `*` is `&`; `//` is `&` and `%` is 0 (division by 1, or by
    /// zero, which gives 0 as for every integer type); a shift by 1 is by the whole width,
    /// giving 0, so `<<` and `>>` are `a & ~b`. `None` for the other operators.
    fn bool_arithmetic(&mut self, op: BinOp, a: Value, b: Value, span: Span) -> Option<Value> {
        let t = self.ty(a);
        let bin =
            |me: &mut Self, o: BBin, x: Value, y: Value| me.emit(Opcode::Binary(o), vec![x, y], t, span);
        Some(match op {
            BinOp::Add | BinOp::Sub => bin(self, BBin::Xor, a, b),
            BinOp::Mul | BinOp::FloorDiv => bin(self, BBin::And, a, b),
            BinOp::Mod => {
                let z = self.const_of(&Cv::Bool(false), DType::I1, span);
                self.splat(z, t.shape, span)
            }
            BinOp::Shl | BinOp::Shr => {
                let nb = self.emit(Opcode::Unary(UnOp::Not), vec![b], t, span);
                bin(self, BBin::And, a, nb)
            }
            _ => return None,
        })
    }

    fn operand_desc(&self, o: &Opnd) -> String {
        match &o.v {
            Val::Tensor(v) => type_str(self.ty(*v)),
            Val::Const(c) => crate::diag::cv_str(c),
            other => self.describe(other),
        }
    }

    /// Pointer plus or minus integer offsets (counted in elements).
    fn ptr_arith(&mut self, op: BinOp, l: &Opnd, r: &Opnd, span: Span) -> R<Val> {
        let (lp, rp) = (self.is_ptr(l), self.is_ptr(r));
        if lp && rp {
            let d = if op == BinOp::Add {
                Diagnostic::error("cannot add two pointers", span, "")
            } else {
                Diagnostic::error("subtracting pointers is not supported", span, "")
                    .with_help("subtract the integer offsets the pointers were built from instead")
            };
            let d = d.with_label(l.span, self.operand_desc(l)).with_label(r.span, self.operand_desc(r));
            return self.fail(d);
        }
        let (ptr, off) = if lp { (l, r) } else { (r, l) };
        if op == BinOp::Sub && !lp {
            let d = Diagnostic::error("cannot subtract a pointer from a number", span, "")
                .with_label(r.span, self.operand_desc(r));
            return self.fail(d);
        }
        let Val::Tensor(pv) = ptr.v else {
            return Err(Failed);
        };
        // The offset is an integer; unsigned offsets narrower than 64 bits are widened first
        // (zero-extended) so that they stay positive, as in Triton.
        let neg = op == BinOp::Sub;
        let ov = match &off.v {
            Val::Const(c @ (Cv::Int(_) | Cv::Bool(_))) => {
                let c = if neg {
                    match consteval::unop(UnaryOp::Neg, c) {
                        Ok(c) => c,
                        Err(m) => {
                            let d = Diagnostic::error(m, off.span, "");
                            return self.fail(d);
                        }
                    }
                } else {
                    c.clone()
                };
                let d = self.literal_dtype(&c, off.span)?;
                self.const_of(&c, d, off.span)
            }
            Val::Tensor(v) if self.ty(*v).num_dtype().is_some_and(DType::is_int) => {
                let d = self.ty(*v).num_dtype().unwrap_or(DType::I64);
                let mut v = *v;
                if !d.is_signed() && d.bits() < 64 {
                    v = self.cast(v, DType::I64, off.span);
                }
                if neg {
                    let t = self.ty(v);
                    v = self.emit(Opcode::Unary(UnOp::Neg), vec![v], t, off.span);
                }
                v
            }
            Val::Undef(_) => return Err(Failed),
            other => {
                let what = match other {
                    Val::Tensor(v) => type_str(self.ty(*v)),
                    Val::Const(c) => crate::diag::cv_str(c),
                    o => self.describe(o),
                };
                let d = Diagnostic::error(
                    format!("pointer offsets must be integers, got {what}"),
                    off.span,
                    "not an integer",
                )
                .with_label(ptr.span, self.operand_desc(ptr))
                .with_help(
                    "offsets count elements: compute them with integers, or convert with `.to(tl.int32)`",
                );
                return self.fail(d);
            }
        };
        let (p, o) = self.broadcast_pair((pv, ptr.span), (ov, off.span), span)?;
        let t = self.ty(p);
        Ok(Val::Tensor(self.emit(Opcode::PtrAdd, vec![p, o], t, span)))
    }

    /// `l op r` for `==`, `!=`, `<`, `<=`, `>`, `>=`, giving `int1`.
    pub(crate) fn compare(&mut self, op: CmpOp, l: Opnd, r: Opnd, span: Span) -> R<Val> {
        if let (Val::Const(a), Val::Const(b)) = (&l.v, &r.v) {
            return match consteval::compare(op, a, b) {
                Ok(x) => Ok(Val::Const(Cv::Bool(x))),
                Err(msg) => {
                    let d = Diagnostic::error(msg, span, "");
                    self.fail(d)
                }
            };
        }
        if self.is_ptr(&l) || self.is_ptr(&r) {
            let d = Diagnostic::error("comparing pointers is not supported", span, "")
                .with_label(l.span, self.operand_desc(&l))
                .with_label(r.span, self.operand_desc(&r))
                .with_help("compare the integer offsets the pointers were built from instead");
            return self.fail(d);
        }
        for o in [&l, &r] {
            if let Val::Const(c) = &o.v
                && !c.is_number()
            {
                let d = Diagnostic::error(
                    format!("cannot compare a run-time value with {}", crate::diag::cv_str(c)),
                    span,
                    "",
                )
                .with_help("`is None` / `is not None` test whether an optional argument was given");
                return self.fail(d);
            }
        }
        let sym = op.as_str();
        let (a, b, _) = self.numeric_pair(&l, &r, false, sym, span)?;
        let c = match op {
            CmpOp::Eq => BCmp::Eq,
            CmpOp::Ne => BCmp::Ne,
            CmpOp::Lt => BCmp::Lt,
            CmpOp::Le => BCmp::Le,
            CmpOp::Gt => BCmp::Gt,
            _ => BCmp::Ge,
        };
        let t = self.ty(a).with_elem(Elem::Scalar(DType::I1));
        Ok(Val::Tensor(self.emit(Opcode::Cmp(c), vec![a, b], t, span)))
    }

    /// `op x` (`-x`, `+x`, `~x`, `not x`).
    pub(crate) fn unary(&mut self, op: UnaryOp, x: Opnd, span: Span) -> R<Val> {
        let v = match &x.v {
            Val::Const(c) => {
                return match consteval::unop(op, c) {
                    Ok(c) => Ok(Val::Const(c)),
                    Err(m) => {
                        let d = Diagnostic::error(m, span, "");
                        self.fail(d)
                    }
                };
            }
            Val::Tuple(items) if op == UnaryOp::Not => {
                return Ok(Val::Const(Cv::Bool(items.is_empty())));
            }
            Val::Tensor(v) => *v,
            Val::Undef(_) => return Err(Failed),
            other => {
                if op == UnaryOp::Not {
                    return Ok(Val::Const(Cv::Bool(false)));
                }
                let what = self.describe(other);
                let d = Diagnostic::error(format!("bad operand for a unary operator: {what}"), x.span, "");
                return self.fail(d);
            }
        };
        let t = self.ty(v);
        if op == UnaryOp::Pos {
            return Ok(Val::Tensor(v));
        }
        let Elem::Scalar(d) = t.elem else {
            let dg = Diagnostic::error("this operator is not defined on pointers", span, "")
                .with_label(x.span, type_str(t));
            return self.fail(dg);
        };
        // `-x` of one bit, modulo 2, is `x` (see `bool_arithmetic`).
        if op == UnaryOp::Neg && d.is_bool() {
            return Ok(Val::Tensor(v));
        }
        let out = match op {
            UnaryOp::Pos => v,
            UnaryOp::Neg => self.emit(Opcode::Unary(UnOp::Neg), vec![v], t, span),
            UnaryOp::Invert => {
                if d.is_float() {
                    let dg = Diagnostic::error(
                        format!("`~` needs an integer operand, got {}", d.tl_name()),
                        span,
                        "",
                    )
                    .with_label(x.span, type_str(t));
                    return self.fail(dg);
                }
                self.emit(Opcode::Unary(UnOp::Not), vec![v], t, span)
            }
            UnaryOp::Not => {
                if d.is_bool() {
                    self.emit(Opcode::Unary(UnOp::Not), vec![v], t, span)
                } else {
                    // Python's `not x` is `x == 0` for numbers.
                    let z = self.const_of(&Cv::Int(0), d, span);
                    let z = self.splat(z, t.shape, span);
                    self.emit(Opcode::Cmp(BCmp::Eq), vec![v, z], t.with_elem(Elem::Scalar(DType::I1)), span)
                }
            }
        };
        Ok(Val::Tensor(out))
    }

    /// `x.to(dtype)` / `tl.cast`: numeric conversion, or reinterpretation with `bitcast`.
    pub(crate) fn convert(&mut self, x: &Opnd, d: DType, bitcast: bool, span: Span) -> R<Val> {
        let v = match &x.v {
            Val::Const(c) if c.is_number() => {
                if bitcast {
                    let cd = self.literal_dtype(c, x.span)?;
                    let v = self.const_of(c, cd, x.span);
                    return self.bitcast(v, d, x.span, span);
                }
                return Ok(Val::Tensor(self.const_of(c, d, span)));
            }
            Val::Tensor(v) => *v,
            Val::Undef(_) => return Err(Failed),
            other => {
                let what = self.describe(other);
                let e = Diagnostic::error(format!("cannot convert {what} to {}", d.tl_name()), x.span, "");
                return self.fail(e);
            }
        };
        if self.ty(v).elem.is_ptr() {
            let e = Diagnostic::error("converting pointers is not supported", x.span, type_str(self.ty(v)));
            return self.fail(e);
        }
        if bitcast {
            return self.bitcast(v, d, x.span, span);
        }
        Ok(Val::Tensor(self.cast(v, d, span)))
    }

    fn bitcast(&mut self, v: Value, d: DType, vspan: Span, span: Span) -> R<Val> {
        let t = self.ty(v);
        let src = t.num_dtype().unwrap_or(d);
        if src == d {
            return Ok(Val::Tensor(v));
        }
        if src.bits() != d.bits() {
            let e = Diagnostic::error(
                format!("cannot bitcast a {}-bit type to a {}-bit type", src.bits(), d.bits()),
                span,
                "",
            )
            .with_label(vspan, type_str(t));
            return self.fail(e);
        }
        Ok(Val::Tensor(self.emit(Opcode::Bitcast, vec![v], t.with_elem(Elem::Scalar(d)), span)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        let s = |d: &[u32]| Shape::new(d).unwrap();
        assert_eq!(broadcast_shapes(s(&[128]), s(&[])), Ok(s(&[128])));
        assert_eq!(broadcast_shapes(s(&[32, 1]), s(&[1, 128])), Ok(s(&[32, 128])));
        assert_eq!(broadcast_shapes(s(&[128]), s(&[32, 1])), Ok(s(&[32, 128])));
        assert_eq!(broadcast_shapes(s(&[128]), s(&[64])), Err(0));
        assert_eq!(broadcast_shapes(s(&[4, 8]), s(&[2, 8])), Err(0));
        assert_eq!(broadcast_shapes(s(&[4, 8]), s(&[4, 2])), Err(1));
    }
}
