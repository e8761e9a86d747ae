//! Expressions: names, literals, attributes, subscripts, calls, and the Python operators
//! that are not plain arithmetic (`and`/`or`, chained comparisons, `is`, `in`).

use lnc_bir::{BinOp as BBin, DType, Elem, Opcode};
use lnc_diag::{Diagnostic, Span};
use lnc_syntax::ast::{BoolOp, CmpOp, Expr, ExprKind, Ident};

use crate::args::CallArgs;
use crate::builtins::Builtin;
use crate::diag::{module_str, suggest};
use crate::lower::{Failed, Lowerer, R};
use crate::value::{Callee, Cv, DTypePred, Method, Module, Opnd, Val};

impl<'a, 'f> Lowerer<'a, 'f> {
    /// Evaluates an expression, emitting the instructions of its runtime parts.
    pub(crate) fn expr(&mut self, e: &'a Expr) -> R<Val> {
        match &e.kind {
            ExprKind::Name(n) => self.lookup(n, e.span),
            ExprKind::Int(i) => Ok(Val::Const(Cv::Int(*i as i128))),
            ExprKind::Float(f) => Ok(Val::Const(Cv::Float(*f))),
            ExprKind::Str(s) => Ok(Val::Const(Cv::Str(s.as_str().into()))),
            ExprKind::Bool(b) => Ok(Val::Const(Cv::Bool(*b))),
            ExprKind::None => Ok(Val::NONE),
            ExprKind::Attribute { value, attr } => {
                let v = self.expr(value)?;
                self.attribute(v, value.span, attr, e.span)
            }
            ExprKind::Call { func, args, kwargs } => {
                let f = self.expr(func)?;
                let mut pos = Vec::with_capacity(args.len());
                for a in args {
                    pos.push(self.opnd(a)?);
                }
                let mut kw = Vec::with_capacity(kwargs.len());
                for (name, a) in kwargs {
                    kw.push((name.name.clone(), name.span, self.opnd(a)?));
                }
                self.call(f, func.span, CallArgs { pos, kw, span: e.span })
            }
            ExprKind::Subscript { value, items } => {
                let v = self.expr(value)?;
                self.subscript(v, value.span, items, e.span)
            }
            ExprKind::Slice { .. } => {
                let d = Diagnostic::error("a slice can only appear inside `[...]`", e.span, "");
                self.fail(d)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.opnd(lhs)?;
                let r = self.opnd(rhs)?;
                self.binary(*op, l, r, e.span)
            }
            ExprKind::Unary { op, operand } => {
                let o = self.opnd(operand)?;
                self.unary(*op, o, e.span)
            }
            ExprKind::Compare { first, ops, rest } => self.compare_chain(first, ops, rest, e.span),
            ExprKind::BoolOp { op, values } => self.bool_op(*op, values, e.span),
            ExprKind::IfExp { cond, then, orelse } => self.if_exp(cond, then, orelse, e.span),
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                let mut vals = Vec::with_capacity(items.len());
                for i in items {
                    vals.push(self.expr(i)?);
                }
                Ok(Val::tuple(vals))
            }
            ExprKind::Unsupported(what) => {
                let d = crate::lower::unsupported(what, e.span);
                self.fail(d)
            }
        }
    }

    /// Evaluates an expression into an operand (value plus span).
    pub(crate) fn opnd(&mut self, e: &'a Expr) -> R<Opnd> {
        Ok(Opnd::new(self.expr(e)?, e.span))
    }

    fn call(&mut self, f: Val, fspan: Span, args: CallArgs) -> R<Val> {
        match f {
            Val::Func(Callee::Builtin(b)) => self.call_builtin(b, args),
            Val::Func(Callee::Jit(i)) => self.call_jit(i, args),
            Val::Bound(recv, m) => self.call_method(*recv, m, fspan, args),
            Val::Undef(_) => Err(Failed),
            other => {
                let what = self.describe(&other);
                let d = Diagnostic::error(format!("`{}` is not callable", self.text(fspan)), fspan, what);
                self.fail(d)
            }
        }
    }

    fn call_method(&mut self, recv: Val, m: Method, fspan: Span, mut args: CallArgs) -> R<Val> {
        // The receiver's own span is not kept with the bound method; `x.method` covers it.
        let recv_span = fspan;
        match m {
            Method::Builtin(b) => {
                args.pos.insert(0, Opnd::new(recv, recv_span));
                self.call_builtin(b, args)
            }
            Method::To => {
                let span = args.span;
                let a = self.bind("to", &["dtype", "fp_downcast_rounding", "bitcast"], 1, args)?;
                self.convert_method(Opnd::new(recv, recv_span), &a, span)
            }
            Method::DTypePred(p) => {
                self.bind("dtype predicate", &[], 0, args)?;
                let Val::Const(Cv::DType(e)) = recv else {
                    return Err(Failed);
                };
                let d = match e {
                    Elem::Scalar(d) => Some(d),
                    Elem::Ptr(_) => None,
                };
                let r = match p {
                    DTypePred::IsPtr => d.is_none(),
                    DTypePred::IsFloating => d.is_some_and(DType::is_float),
                    DTypePred::IsInt => d.is_some_and(DType::is_int),
                    DTypePred::IsIntSigned => d.is_some_and(DType::is_signed),
                    DTypePred::IsIntUnsigned => d.is_some_and(|d| d.is_int() && !d.is_signed()),
                    DTypePred::IsBool => d == Some(DType::I1),
                    DTypePred::IsFp16 => d == Some(DType::F16),
                    DTypePred::IsBf16 => d == Some(DType::BF16),
                    DTypePred::IsFp32 => d == Some(DType::F32),
                    DTypePred::IsFp64 => d == Some(DType::F64),
                };
                Ok(Val::Const(Cv::Bool(r)))
            }
        }
    }

    /// `x.to(dtype, fp_downcast_rounding=None, bitcast=False)` on bound arguments.
    pub(crate) fn convert_method(&mut self, x: Opnd, a: &[Option<Opnd>], span: Span) -> R<Val> {
        let Some(dt) = &a[0] else { return Err(Failed) };
        let d = self.const_dtype(dt, "the target of `.to`")?;
        let bitcast = match crate::args::given(&a[2]) {
            Some(o) => self.const_bool(o, "`bitcast`")?,
            None => false,
        };
        if let Some(o) = crate::args::given(&a[1]) {
            let mode = self.const_str(o, "`fp_downcast_rounding`")?;
            if mode != "rtne" {
                let e = Diagnostic::error(
                    format!("rounding mode `{mode}` is not supported"),
                    o.span,
                    "lnc rounds to nearest even",
                );
                return self.fail(e);
            }
        }
        self.convert(&x, d, bitcast, span)
    }

    /// `value.attr`.
    fn attribute(&mut self, v: Val, vspan: Span, attr: &Ident, span: Span) -> R<Val> {
        let name = attr.name.as_str();
        let found = match &v {
            Val::Module(m) => return self.module_attr(*m, name, span),
            Val::Tensor(x) => {
                let t = self.ty(*x);
                match name {
                    "dtype" => Some(Val::Const(Cv::DType(t.elem))),
                    "type" => Some(Val::Const(Cv::Type(t))),
                    "shape" => Some(shape_tuple(t.shape.dims())),
                    "numel" => Some(Val::Const(Cv::Int(t.shape.numel() as i128))),
                    "to" => Some(Val::Bound(Box::new(v.clone()), Method::To)),
                    _ => Builtin::member(name).map(|b| Val::Bound(Box::new(v.clone()), Method::Builtin(b))),
                }
            }
            Val::Const(Cv::DType(e)) => match (name, e) {
                ("element_ty", Elem::Ptr(d)) => Some(Val::Const(Cv::DType(Elem::Scalar(*d)))),
                ("primitive_bitwidth", Elem::Scalar(d)) => Some(Val::Const(Cv::Int(d.bits() as i128))),
                ("primitive_bitwidth", Elem::Ptr(_)) => Some(Val::Const(Cv::Int(64))),
                ("scalar", _) => Some(v.clone()),
                _ => dtype_pred(name).map(|p| Val::Bound(Box::new(v.clone()), Method::DTypePred(p))),
            },
            Val::Const(Cv::Type(t)) => match name {
                "element_ty" if t.is_block() => Some(Val::Const(Cv::DType(t.elem))),
                "element_ty" => match t.elem {
                    Elem::Ptr(d) => Some(Val::Const(Cv::DType(Elem::Scalar(d)))),
                    Elem::Scalar(_) => Some(Val::Const(Cv::DType(t.elem))),
                },
                "scalar" => Some(Val::Const(Cv::DType(t.elem))),
                "shape" => Some(shape_tuple(t.shape.dims())),
                _ => None,
            },
            Val::Const(_) if name == "value" => Some(v.clone()),
            Val::Undef(_) => return Err(Failed),
            _ => None,
        };
        match found {
            Some(x) => Ok(x),
            None => {
                let what = self.describe(&v);
                let mut d = Diagnostic::error(
                    format!("{what} has no attribute `{name}`"),
                    attr.span,
                    "unknown attribute",
                )
                .with_label(vspan, what.clone());
                if matches!(v, Val::Tensor(_)) {
                    d = d.with_note(
                        "blocks have `.dtype`, `.shape`, `.to(...)` and the `tl` functions that take them first \
                         (`x.sum(axis=0)`)",
                    );
                }
                self.fail(d)
            }
        }
    }

    fn module_attr(&mut self, m: Module, name: &str, span: Span) -> R<Val> {
        match m {
            Module::Triton => match name {
                "language" => return Ok(Val::Module(Module::Tl)),
                "cdiv" => return Ok(Val::Func(Callee::Builtin(Builtin::Cdiv))),
                _ => {}
            },
            Module::Tl => {
                if name == "math" {
                    return Ok(Val::Module(Module::TlMath));
                }
                if let Some(d) = tl_dtype(name) {
                    return Ok(Val::Const(Cv::DType(Elem::Scalar(d))));
                }
                if let Some(b) = Builtin::tl(name) {
                    return Ok(Val::Func(Callee::Builtin(b)));
                }
            }
            Module::TlMath => {
                if let Some(b) = Builtin::math(name) {
                    return Ok(Val::Func(Callee::Builtin(b)));
                }
            }
        }
        let full = match self.text(span) {
            "" => format!("{}.{name}", module_str(m)),
            t => t.split_whitespace().collect::<String>(),
        };
        let mut d = Diagnostic::error(
            format!("`{full}` is not a Triton builtin lnc supports"),
            span,
            "unknown or unsupported",
        );
        if crate::builtins::KNOWN_UNSUPPORTED.contains(&name) {
            d = d.with_note(format!("Triton has `{name}`, but lnc does not implement it yet"));
        } else if matches!(name, "float8e4nv" | "float8e5" | "float8e4b15" | "float8e4b8" | "float8e5b16") {
            d = d.with_note("8-bit float types are not supported");
        } else if let Some(s) = suggest(name, crate::builtins::TL_NAMES.iter().copied()) {
            let prefix = full.rsplit_once('.').map_or(module_str(m), |(p, _)| p);
            d = d.with_help(format!("did you mean `{prefix}.{s}`?"));
        } else {
            d = d.with_note("docs/language.md lists the `tl` functions lnc supports");
        }
        self.fail(d)
    }

    /// `value[items]`: `None` adds an axis, `:` keeps one (blocks); an index picks a
    /// tuple element.
    fn subscript(&mut self, v: Val, vspan: Span, items: &'a [Expr], span: Span) -> R<Val> {
        match v {
            Val::Tensor(mut x) => {
                for (dim, item) in items.iter().enumerate() {
                    match &item.kind {
                        ExprKind::None => {
                            let t = self.ty(x);
                            if t.shape.is_scalar() {
                                x = self.splat(x, lnc_bir::Shape::d1(1), item.span);
                                continue;
                            }
                            let Some(s) = t.shape.insert_axis(dim.min(t.shape.rank())) else {
                                let d = Diagnostic::error(
                                    format!("blocks of rank above {} are not supported", lnc_bir::MAX_RANK),
                                    item.span,
                                    "",
                                );
                                return self.fail(d);
                            };
                            let axis = dim.min(t.shape.rank()) as u8;
                            x = self.emit(Opcode::ExpandDims(axis), vec![x], t.with_shape(s), item.span);
                        }
                        ExprKind::Slice { lower: None, upper: None, step: None } => {}
                        _ => {
                            let d = Diagnostic::error(
                                "unsupported index: blocks can only be indexed with `None` and `:`",
                                item.span,
                                "",
                            )
                            .with_help(
                                "`x[:, None]` and `x[None, :]` add axes; to pick elements, use masks and \
                                 `tl.where`, or load from memory",
                            );
                            return self.fail(d);
                        }
                    }
                }
                Ok(Val::Tensor(x))
            }
            Val::Tuple(vals) => {
                let [item] = items else {
                    let d = Diagnostic::error("a tuple takes a single index", span, "");
                    return self.fail(d);
                };
                let o = self.opnd(item)?;
                let i = self.const_int(&o, "a tuple index")?;
                let n = vals.len() as i128;
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    let d = Diagnostic::error(
                        format!("tuple index {i} out of range for a tuple of {n} elements"),
                        item.span,
                        "",
                    );
                    return self.fail(d);
                }
                Ok(vals[k as usize].clone())
            }
            Val::Undef(_) => Err(Failed),
            other => {
                let what = self.describe(&other);
                let d = Diagnostic::error(format!("{what} cannot be indexed"), vspan, "");
                self.fail(d)
            }
        }
    }

    /// `a < b <= c`: each comparison with its neighbours, combined with `and`.
    fn compare_chain(&mut self, first: &'a Expr, ops: &[CmpOp], rest: &'a [Expr], span: Span) -> R<Val> {
        let mut left = self.opnd(first)?;
        let mut acc: Option<Val> = None;
        for (op, r) in ops.iter().zip(rest) {
            let right = self.opnd(r)?;
            let pair_span = left.span.to(right.span);
            let res = match op {
                CmpOp::Is | CmpOp::IsNot => {
                    let same = identical(&left.v, &right.v);
                    Val::Const(Cv::Bool(if *op == CmpOp::Is { same } else { !same }))
                }
                CmpOp::In | CmpOp::NotIn => {
                    let found = self.contains(&right, &left)?;
                    Val::Const(Cv::Bool(if *op == CmpOp::In { found } else { !found }))
                }
                _ => self.compare(*op, left.clone(), right.clone(), pair_span)?,
            };
            acc = Some(match acc {
                None => res,
                Some(prev) => {
                    self.logical(BoolOp::And, Opnd::new(prev, span), Opnd::new(res, pair_span), span)?
                }
            });
            left = right;
        }
        acc.ok_or(Failed)
    }

    /// `item in container` for compile-time tuples.
    fn contains(&mut self, container: &Opnd, item: &Opnd) -> R<bool> {
        match (&container.v, &item.v) {
            (Val::Tuple(vals), Val::Const(c)) if vals.iter().all(|v| matches!(v, Val::Const(_))) => {
                Ok(vals.iter().any(|v| match v {
                    Val::Const(x) => crate::consteval::compare(CmpOp::Eq, x, c).unwrap_or(false),
                    _ => false,
                }))
            }
            _ => {
                let d = Diagnostic::error(
                    "`in` is only supported on compile-time values (a constant in a tuple of constants)",
                    container.span.to(item.span),
                    "",
                );
                self.fail(d)
            }
        }
    }

    /// `a and b and c` / `a or b`, with Python's short circuit on compile-time values.
    fn bool_op(&mut self, op: BoolOp, values: &'a [Expr], span: Span) -> R<Val> {
        let Some((first, rest)) = values.split_first() else {
            return Err(Failed);
        };
        let mut acc = self.opnd(first)?;
        for e in rest {
            if let Val::Const(c) = &acc.v {
                let t = crate::consteval::truthy(c);
                // Python returns the deciding operand itself.
                if (op == BoolOp::And && !t) || (op == BoolOp::Or && t) {
                    return Ok(acc.v);
                }
                acc = self.opnd(e)?;
                continue;
            }
            let next = self.opnd(e)?;
            let v = self.logical(op, acc, next, span)?;
            acc = Opnd::new(v, span);
        }
        Ok(acc.v)
    }

    /// Logical `and`/`or` of two values of which at least one is known only at run time:
    /// both as `int1`, broadcast together.
    pub(crate) fn logical(&mut self, op: BoolOp, a: Opnd, b: Opnd, span: Span) -> R<Val> {
        if let (Val::Const(x), Val::Const(y)) = (&a.v, &b.v) {
            let (tx, ty) = (crate::consteval::truthy(x), crate::consteval::truthy(y));
            return Ok(Val::Const(Cv::Bool(if op == BoolOp::And { tx && ty } else { tx || ty })));
        }
        let x = self.as_bool(&a)?;
        let y = self.as_bool(&b)?;
        let (x, y) = self.broadcast_pair((x, a.span), (y, b.span), span)?;
        let t = self.ty(x);
        let bop = if op == BoolOp::And { BBin::And } else { BBin::Or };
        Ok(Val::Tensor(self.emit(Opcode::Binary(bop), vec![x, y], t, span)))
    }

    /// A value as `int1` (scalar or block): compile-time values by their truth.
    pub(crate) fn as_bool(&mut self, o: &Opnd) -> R<lnc_bir::Value> {
        match &o.v {
            Val::Tensor(v) => {
                if self.ty(*v).elem.is_ptr() {
                    let d = Diagnostic::error("a pointer cannot be used as a condition", o.span, "");
                    return self.fail(d);
                }
                Ok(self.truth_value(*v, o.span))
            }
            Val::Undef(_) => Err(Failed),
            v => {
                let t = self.truthy(v, o.span)?;
                Ok(self.const_of(&Cv::Bool(t), DType::I1, o.span))
            }
        }
    }
}

/// Python's `is` between two values.
fn identical(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Const(x), Val::Const(y)) => x == y,
        (Val::Tensor(x), Val::Tensor(y)) => x == y,
        _ => crate::value::same(a, b),
    }
}

fn shape_tuple(dims: &[u32]) -> Val {
    Val::tuple(dims.iter().map(|&d| Val::Const(Cv::Int(d as i128))).collect())
}

fn dtype_pred(name: &str) -> Option<DTypePred> {
    Some(match name {
        "is_floating" => DTypePred::IsFloating,
        "is_int" => DTypePred::IsInt,
        "is_int_signed" => DTypePred::IsIntSigned,
        "is_int_unsigned" => DTypePred::IsIntUnsigned,
        "is_bool" | "is_int1" => DTypePred::IsBool,
        "is_fp16" => DTypePred::IsFp16,
        "is_bf16" => DTypePred::IsBf16,
        "is_fp32" => DTypePred::IsFp32,
        "is_fp64" => DTypePred::IsFp64,
        "is_ptr" => DTypePred::IsPtr,
        _ => return None,
    })
}

/// `tl.<name>` as a dtype.
pub(crate) fn tl_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "int1" => DType::I1,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        _ => return None,
    })
}
