//! The `tl` builtins and the Python builtins kernels may call.
//!
//! Each builtin checks its arguments the way Triton's `core.py`/`semantic.py` do (and with
//! Triton's messages where users may search for them), then emits block IR.

use lnc_bir::{AtomicOp, BinOp as BBin, DType, Elem, Opcode, ReduceOp, Shape, Type, UnOp, Value};
use lnc_diag::{Diagnostic, Span};
use lnc_syntax::ast::BinOp;

use crate::args::{CallArgs, given};
use crate::diag::{shape_str, type_str};
use crate::lower::{Failed, Lowerer, R};
use crate::ops::broadcast_shapes;
use crate::random::RandomFn;
use crate::value::{Cv, Opnd, Val};

/// Which `range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeKind {
    /// Python's `range`: a runtime loop.
    Python,
    /// `tl.range`: a runtime loop with scheduling hints (ignored).
    Tl,
    /// `tl.static_range`: unrolled at compile time.
    Static,
}

/// Compiler hints that do not change values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    MultipleOf,
    MaxContiguous,
    MaxConstancy,
}

/// A builtin function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    ProgramId,
    NumPrograms,
    Arange,
    Zeros,
    ZerosLike,
    Full,
    Load,
    Store,
    Where,
    Reduce(ReduceOp),
    /// Float math functions (`sqrt`, `exp`, …).
    Math(UnOp),
    Abs,
    Sigmoid,
    Fdiv,
    Maximum,
    Minimum,
    Cdiv,
    StaticAssert,
    StaticPrint,
    DevicePrint,
    DeviceAssert,
    DebugBarrier,
    Hint(Hint),
    AtomicCas,
    Atomic(AtomicOp),
    ExpandDims,
    BroadcastTo,
    Broadcast,
    Range(RangeKind),
    Cast,
    Constexpr,
    PyMin,
    PyMax,
    PyAbs,
    PyLen,
    PyInt,
    PyFloat,
    PyBool,
    PyPrint,
    /// `tl.randint`, `tl.rand`, `tl.randn` and their `4x` forms.
    Random(RandomFn),
    Umulhi,
    /// `tl.argmax` (`true`) / `tl.argmin`.
    ArgReduce(bool),
    /// `tl.fma(x, y, z)`: `x · y + z` rounded once.
    Fma,
    Dot,
}

/// Every `tl` name lnc implements, for suggestions.
pub(crate) const TL_NAMES: &[&str] = &[
    "program_id",
    "num_programs",
    "arange",
    "zeros",
    "zeros_like",
    "full",
    "load",
    "store",
    "where",
    "sum",
    "max",
    "min",
    "sqrt",
    "rsqrt",
    "exp",
    "exp2",
    "log",
    "log2",
    "sin",
    "cos",
    "floor",
    "ceil",
    "abs",
    "sigmoid",
    "fdiv",
    "maximum",
    "minimum",
    "cdiv",
    "static_assert",
    "static_print",
    "device_print",
    "device_assert",
    "debug_barrier",
    "multiple_of",
    "max_contiguous",
    "max_constancy",
    "atomic_cas",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_xchg",
    "expand_dims",
    "broadcast_to",
    "broadcast",
    "randint",
    "randint4x",
    "rand",
    "rand4x",
    "randn",
    "randn4x",
    "umulhi",
    "argmax",
    "argmin",
    "fma",
    "dot",
    "range",
    "static_range",
    "cast",
    "constexpr",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int1",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
];

/// Triton builtins lnc does not implement (yet): named in the error instead of "unknown".
pub(crate) const KNOWN_UNSUPPORTED: &[&str] = &[
    "dot_scaled",
    "reshape",
    "view",
    "trans",
    "permute",
    "cat",
    "join",
    "split",
    "interleave",
    "ravel",
    "flip",
    "cumsum",
    "cumprod",
    "associative_scan",
    "reduce",
    "histogram",
    "gather",
    "sort",
    "topk",
    "xor_sum",
    "softmax",
    "make_block_ptr",
    "advance",
    "make_tensor_descriptor",
    "inline_asm_elementwise",
    "clamp",
    "erf",
    "sqrt_rn",
    "div_rn",
    "swizzle2d",
    "pointer_type",
    "tensor",
    "extra",
    "assume",
    "full_like",
    "map_elementwise",
];

impl Builtin {
    /// `tl.<name>`.
    pub(crate) fn tl(name: &str) -> Option<Builtin> {
        if let Some(b) = Builtin::math(name) {
            return Some(b);
        }
        Some(match name {
            "program_id" => Builtin::ProgramId,
            "num_programs" => Builtin::NumPrograms,
            "arange" => Builtin::Arange,
            "zeros" => Builtin::Zeros,
            "zeros_like" => Builtin::ZerosLike,
            "full" => Builtin::Full,
            "load" => Builtin::Load,
            "store" => Builtin::Store,
            "where" => Builtin::Where,
            "sum" => Builtin::Reduce(ReduceOp::Sum),
            "max" => Builtin::Reduce(ReduceOp::Max),
            "min" => Builtin::Reduce(ReduceOp::Min),
            "sigmoid" => Builtin::Sigmoid,
            "cdiv" => Builtin::Cdiv,
            "static_assert" => Builtin::StaticAssert,
            "static_print" => Builtin::StaticPrint,
            "device_print" => Builtin::DevicePrint,
            "device_assert" => Builtin::DeviceAssert,
            "debug_barrier" => Builtin::DebugBarrier,
            "multiple_of" => Builtin::Hint(Hint::MultipleOf),
            "max_contiguous" => Builtin::Hint(Hint::MaxContiguous),
            "max_constancy" => Builtin::Hint(Hint::MaxConstancy),
            "atomic_cas" => Builtin::AtomicCas,
            "atomic_add" => Builtin::Atomic(AtomicOp::Add),
            "atomic_max" => Builtin::Atomic(AtomicOp::Max),
            "atomic_min" => Builtin::Atomic(AtomicOp::Min),
            "atomic_and" => Builtin::Atomic(AtomicOp::And),
            "atomic_or" => Builtin::Atomic(AtomicOp::Or),
            "atomic_xor" => Builtin::Atomic(AtomicOp::Xor),
            "atomic_xchg" => Builtin::Atomic(AtomicOp::Xchg),
            "expand_dims" => Builtin::ExpandDims,
            "broadcast_to" => Builtin::BroadcastTo,
            "broadcast" => Builtin::Broadcast,
            "range" => Builtin::Range(RangeKind::Tl),
            "static_range" => Builtin::Range(RangeKind::Static),
            "cast" => Builtin::Cast,
            "constexpr" => Builtin::Constexpr,
            "dot" => Builtin::Dot,
            _ => return RandomFn::from_name(name).map(Builtin::Random),
        })
    }

    /// `tl.math.<name>` (also reachable as `tl.<name>`).
    pub(crate) fn math(name: &str) -> Option<Builtin> {
        Some(match name {
            "sqrt" => Builtin::Math(UnOp::Sqrt),
            "rsqrt" => Builtin::Math(UnOp::Rsqrt),
            "exp" => Builtin::Math(UnOp::Exp),
            "exp2" => Builtin::Math(UnOp::Exp2),
            "log" => Builtin::Math(UnOp::Log),
            "log2" => Builtin::Math(UnOp::Log2),
            "sin" => Builtin::Math(UnOp::Sin),
            "cos" => Builtin::Math(UnOp::Cos),
            "floor" => Builtin::Math(UnOp::Floor),
            "ceil" => Builtin::Math(UnOp::Ceil),
            "abs" => Builtin::Abs,
            "fdiv" => Builtin::Fdiv,
            "maximum" => Builtin::Maximum,
            "minimum" => Builtin::Minimum,
            "umulhi" => Builtin::Umulhi,
            "fma" => Builtin::Fma,
            "argmax" => Builtin::ArgReduce(true),
            "argmin" => Builtin::ArgReduce(false),
            _ => return None,
        })
    }

    /// Python builtins available in kernels.
    pub(crate) fn python(name: &str) -> Option<Builtin> {
        Some(match name {
            "range" => Builtin::Range(RangeKind::Python),
            "min" => Builtin::PyMin,
            "max" => Builtin::PyMax,
            "abs" => Builtin::PyAbs,
            "len" => Builtin::PyLen,
            "int" => Builtin::PyInt,
            "float" => Builtin::PyFloat,
            "bool" => Builtin::PyBool,
            "print" => Builtin::PyPrint,
            _ => return None,
        })
    }

    /// Methods of blocks that forward to a `tl` function (`x.sum(axis=0)`).
    pub(crate) fn member(name: &str) -> Option<Builtin> {
        match name {
            "sum" | "max" | "min" | "argmax" | "argmin" | "sqrt" | "rsqrt" | "exp" | "exp2" | "log"
            | "log2" | "sin" | "cos" | "floor" | "ceil" | "abs" | "sigmoid" | "fma" | "expand_dims"
            | "broadcast_to" | "cast" => Builtin::tl(name),
            _ => None,
        }
    }

    /// The name users write.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Builtin::ProgramId => "tl.program_id",
            Builtin::NumPrograms => "tl.num_programs",
            Builtin::Arange => "tl.arange",
            Builtin::Zeros => "tl.zeros",
            Builtin::ZerosLike => "tl.zeros_like",
            Builtin::Full => "tl.full",
            Builtin::Load => "tl.load",
            Builtin::Store => "tl.store",
            Builtin::Where => "tl.where",
            Builtin::Reduce(ReduceOp::Sum) => "tl.sum",
            Builtin::Reduce(ReduceOp::Max) => "tl.max",
            Builtin::Reduce(ReduceOp::Min) => "tl.min",
            Builtin::Math(op) => match op {
                UnOp::Sqrt => "tl.sqrt",
                UnOp::Rsqrt => "tl.rsqrt",
                UnOp::Exp => "tl.exp",
                UnOp::Exp2 => "tl.exp2",
                UnOp::Log => "tl.log",
                UnOp::Log2 => "tl.log2",
                UnOp::Sin => "tl.sin",
                UnOp::Cos => "tl.cos",
                UnOp::Floor => "tl.floor",
                UnOp::Ceil => "tl.ceil",
                UnOp::Abs => "tl.abs",
                UnOp::Neg | UnOp::Not => "tl.math",
            },
            Builtin::Abs => "tl.abs",
            Builtin::Sigmoid => "tl.sigmoid",
            Builtin::Fdiv => "tl.fdiv",
            Builtin::Maximum => "tl.maximum",
            Builtin::Minimum => "tl.minimum",
            Builtin::Cdiv => "tl.cdiv",
            Builtin::StaticAssert => "tl.static_assert",
            Builtin::StaticPrint => "tl.static_print",
            Builtin::DevicePrint => "tl.device_print",
            Builtin::DeviceAssert => "tl.device_assert",
            Builtin::DebugBarrier => "tl.debug_barrier",
            Builtin::Hint(Hint::MultipleOf) => "tl.multiple_of",
            Builtin::Hint(Hint::MaxContiguous) => "tl.max_contiguous",
            Builtin::Hint(Hint::MaxConstancy) => "tl.max_constancy",
            Builtin::AtomicCas => "tl.atomic_cas",
            Builtin::Atomic(op) => match op {
                AtomicOp::Add => "tl.atomic_add",
                AtomicOp::Max => "tl.atomic_max",
                AtomicOp::Min => "tl.atomic_min",
                AtomicOp::And => "tl.atomic_and",
                AtomicOp::Or => "tl.atomic_or",
                AtomicOp::Xor => "tl.atomic_xor",
                AtomicOp::Xchg => "tl.atomic_xchg",
            },
            Builtin::ExpandDims => "tl.expand_dims",
            Builtin::BroadcastTo => "tl.broadcast_to",
            Builtin::Broadcast => "tl.broadcast",
            Builtin::Range(RangeKind::Python) => "range",
            Builtin::Range(RangeKind::Tl) => "tl.range",
            Builtin::Range(RangeKind::Static) => "tl.static_range",
            Builtin::Cast => "tl.cast",
            Builtin::Constexpr => "tl.constexpr",
            Builtin::PyMin => "min",
            Builtin::PyMax => "max",
            Builtin::PyAbs => "abs",
            Builtin::PyLen => "len",
            Builtin::PyInt => "int",
            Builtin::PyFloat => "float",
            Builtin::PyBool => "bool",
            Builtin::PyPrint => "print",
            Builtin::Random(f) => f.name(),
            Builtin::Umulhi => "tl.umulhi",
            Builtin::Fma => "tl.fma",
            Builtin::ArgReduce(true) => "tl.argmax",
            Builtin::ArgReduce(false) => "tl.argmin",
            Builtin::Dot => "tl.dot",
        }
    }
}

/// A pointer operand: its value, pointee dtype and shape.
struct Ptr {
    v: Value,
    pointee: DType,
    shape: Shape,
    span: Span,
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// Calls a builtin.
    pub(crate) fn call_builtin(&mut self, b: Builtin, args: CallArgs) -> R<Val> {
        let name = b.name();
        let span = args.span;
        match b {
            Builtin::ProgramId | Builtin::NumPrograms => {
                let a = self.bind(name, &["axis"], 1, args)?;
                let o = a[0].clone().ok_or(Failed)?;
                let axis = self.const_int(&o, "the axis")?;
                if !(0..=2).contains(&axis) {
                    let d = Diagnostic::error(
                        format!("{} axis must be 0, 1, or 2 but got {axis}", &name[3..]),
                        o.span,
                        "",
                    );
                    return self.fail(d);
                }
                let op = if b == Builtin::ProgramId {
                    Opcode::ProgramId(axis as u8)
                } else {
                    Opcode::NumPrograms(axis as u8)
                };
                Ok(Val::Tensor(self.emit(op, vec![], Type::scalar(DType::I32), span)))
            }
            Builtin::Arange => self.arange(args),
            Builtin::Random(f) => self.random(f, args),
            Builtin::Umulhi => self.umulhi_call(args),
            Builtin::Dot => self.dot(args),
            Builtin::Zeros => {
                let a = self.bind(name, &["shape", "dtype"], 2, args)?;
                let shape = self.const_shape(a[0].as_ref().ok_or(Failed)?, "the shape")?;
                let d = self.const_dtype(a[1].as_ref().ok_or(Failed)?, "`dtype`")?;
                Ok(Val::Tensor(self.full_value(shape, &Cv::Int(0), d, span)))
            }
            Builtin::ZerosLike => {
                let a = self.bind(name, &["input"], 1, args)?;
                let x = self.runtime_value(a[0].as_ref().ok_or(Failed)?)?;
                let t = self.ty(x);
                let Elem::Scalar(d) = t.elem else {
                    return self.ptr_not_allowed(name, x, span);
                };
                Ok(Val::Tensor(self.full_value(t.shape, &Cv::Int(0), d, span)))
            }
            Builtin::Full => {
                let a = self.bind(name, &["shape", "value", "dtype"], 3, args)?;
                let shape = self.const_shape(a[0].as_ref().ok_or(Failed)?, "the shape")?;
                let d = self.const_dtype(a[2].as_ref().ok_or(Failed)?, "`dtype`")?;
                let v = a[1].clone().ok_or(Failed)?;
                match &v.v {
                    Val::Const(c) if c.is_number() => Ok(Val::Tensor(self.full_value(shape, c, d, span))),
                    Val::Tensor(x) if !self.ty(*x).is_block() && !self.ty(*x).elem.is_ptr() => {
                        let s = self.cast(*x, d, v.span);
                        Ok(Val::Tensor(self.splat(s, shape, span)))
                    }
                    other => {
                        let what = self.describe(other);
                        let e = Diagnostic::error(
                            format!("the value of `tl.full` must be a scalar, got {what}"),
                            v.span,
                            "",
                        );
                        self.fail(e)
                    }
                }
            }
            Builtin::Load => self.load(args),
            Builtin::Store => self.store(args),
            Builtin::Where => self.where_(args),
            Builtin::Reduce(op) => self.reduce(op, args),
            Builtin::ArgReduce(max) => self.arg_reduce(max, args),
            Builtin::Math(op) => {
                let a = self.bind(name, &["x"], 1, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                let v = self.runtime_value(&x)?;
                let t = self.ty(v);
                if !t.num_dtype().is_some_and(DType::is_float) {
                    let e = Diagnostic::error(
                        format!("`{name}` needs a floating-point argument, got {}", type_str(t)),
                        x.span,
                        "not a float",
                    )
                    .with_help("convert first, e.g. `x.to(tl.float32)`");
                    return self.fail(e);
                }
                Ok(Val::Tensor(self.emit(Opcode::Unary(op), vec![v], t, span)))
            }
            Builtin::Abs | Builtin::PyAbs => {
                let a = self.bind(name, &["x"], 1, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                if let Val::Const(c) = &x.v
                    && b == Builtin::PyAbs
                {
                    return match *c {
                        Cv::Int(i) => match i.checked_abs() {
                            Some(a) => Ok(Val::Const(Cv::Int(a))),
                            None => self.fail(Diagnostic::error("integer overflow", x.span, "")),
                        },
                        Cv::Bool(v) => Ok(Val::Const(Cv::Int(v as i128))),
                        Cv::Float(f) => Ok(Val::Const(Cv::Float(f.abs()))),
                        _ => self.fail(Diagnostic::error("`abs` needs a number", x.span, "")),
                    };
                }
                let v = self.runtime_value(&x)?;
                let t = self.ty(v);
                match t.elem {
                    Elem::Ptr(_) => self.ptr_not_allowed(name, v, x.span),
                    Elem::Scalar(d) if d.is_int() && !d.is_signed() => Ok(Val::Tensor(v)),
                    Elem::Scalar(_) => Ok(Val::Tensor(self.emit(Opcode::Unary(UnOp::Abs), vec![v], t, span))),
                }
            }
            Builtin::Sigmoid => {
                let a = self.bind(name, &["x"], 1, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                let v = self.runtime_value(&x)?;
                let t = self.ty(v);
                if !t.num_dtype().is_some_and(DType::is_float) {
                    let e = Diagnostic::error(
                        format!("`{name}` needs a floating-point argument, got {}", type_str(t)),
                        x.span,
                        "",
                    )
                    .with_help("convert first, e.g. `x.to(tl.float32)`");
                    return self.fail(e);
                }
                // Triton's definition: 1 / (1 + exp(-x)).
                let n = self.emit(Opcode::Unary(UnOp::Neg), vec![v], t, span);
                let e = self.emit(Opcode::Unary(UnOp::Exp), vec![n], t, span);
                let one = Val::Const(Cv::Int(1));
                let den = self.binary(
                    BinOp::Add,
                    Opnd::new(one.clone(), span),
                    Opnd::new(Val::Tensor(e), span),
                    span,
                )?;
                self.binary(BinOp::Div, Opnd::new(one, span), Opnd::new(den, span), span)
            }
            Builtin::Fdiv => {
                let a = self.bind(name, &["x", "y", "ieee_rounding"], 2, args)?;
                let (x, y) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
                for o in [&x, &y] {
                    let is_float = match &o.v {
                        Val::Tensor(v) => self.ty(*v).num_dtype().is_some_and(DType::is_float),
                        Val::Const(c) => matches!(c, Cv::Float(_)),
                        _ => false,
                    };
                    if !is_float {
                        let e = Diagnostic::error("both operands of `tl.fdiv` must be floats", o.span, "");
                        return self.fail(e);
                    }
                }
                self.binary(BinOp::Div, x, y, span)
            }
            Builtin::Fma => {
                let a = self.bind(name, &["x", "y", "z"], 3, args)?;
                let (x, y, z) =
                    (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?, a[2].clone().ok_or(Failed)?);
                self.fma(x, y, z, span)
            }
            Builtin::Maximum | Builtin::Minimum => {
                let a = self.bind(name, &["x", "y", "propagate_nan"], 2, args)?;
                let (x, y) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
                self.min_max(b == Builtin::Maximum, x, y, span)
            }
            Builtin::PyMin | Builtin::PyMax => {
                let (_, vals) = self.bind_varargs(name, &[], 0, args)?;
                let vals = match vals.as_slice() {
                    [one] => match &one.v {
                        Val::Tuple(items) => items.iter().map(|v| Opnd::new(v.clone(), one.span)).collect(),
                        _ => vals,
                    },
                    _ => vals,
                };
                let Some((first, rest)) = vals.split_first() else {
                    let d = Diagnostic::error(format!("`{name}` expects at least one argument"), span, "");
                    return self.fail(d);
                };
                let mut acc = first.clone();
                for o in rest {
                    let v = if let (Val::Const(x), Val::Const(y)) = (&acc.v, &o.v) {
                        let lt = crate::consteval::compare(lnc_syntax::ast::CmpOp::Lt, y, x);
                        match lt {
                            Ok(y_lt_x) => {
                                let take_y = if b == Builtin::PyMin {
                                    y_lt_x
                                } else {
                                    crate::consteval::compare(lnc_syntax::ast::CmpOp::Gt, y, x)
                                        .unwrap_or(false)
                                };
                                if take_y { o.v.clone() } else { acc.v.clone() }
                            }
                            Err(m) => return self.fail(Diagnostic::error(m, span, "")),
                        }
                    } else {
                        self.min_max(b == Builtin::PyMax, acc.clone(), o.clone(), span)?
                    };
                    acc = Opnd::new(v, span);
                }
                Ok(acc.v)
            }
            Builtin::Cdiv => {
                let a = self.bind(name, &["x", "div"], 2, args)?;
                let (x, d) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
                // Triton's definition: (x + div - 1) // div.
                let s = self.binary(BinOp::Add, x, d.clone(), span)?;
                let s = self.binary(
                    BinOp::Sub,
                    Opnd::new(s, span),
                    Opnd::new(Val::Const(Cv::Int(1)), span),
                    span,
                )?;
                self.binary(BinOp::FloorDiv, Opnd::new(s, span), d, span)
            }
            Builtin::StaticAssert => {
                let a = self.bind(name, &["cond", "msg"], 1, args)?;
                let c = a[0].clone().ok_or(Failed)?;
                if matches!(c.v, Val::Tensor(x) if !self.is_known(x)) {
                    let d = Diagnostic::error(
                        "`tl.static_assert` needs a condition known at compile time",
                        c.span,
                        "known only at run time",
                    )
                    .with_help("use `tl.device_assert` for checks at run time");
                    return self.fail(d);
                }
                if self.truthy(&c.v, c.span)? {
                    return Ok(Val::NONE);
                }
                let msg = match given(&a[1]) {
                    Some(m) => self.const_str(m, "the message")?,
                    None => String::new(),
                };
                let d = Diagnostic::error(
                    if msg.is_empty() {
                        "static assertion failed".to_string()
                    } else {
                        format!("static assertion failed: {msg}")
                    },
                    c.span,
                    "false at compile time",
                );
                self.fail(d)
            }
            Builtin::StaticPrint => {
                self.bind_varargs(name, &["sep", "end", "file", "flush"], 0, args)?;
                Ok(Val::NONE)
            }
            Builtin::DevicePrint | Builtin::PyPrint => {
                let (a, vals) = self.bind_varargs(name, &["prefix", "hex"], 1, args)?;
                let p = a[0].clone().ok_or(Failed)?;
                let prefix = self.const_str(&p, "the prefix of `device_print`")?;
                if let Some(h) = given(&a[1])
                    && self.const_bool(h, "`hex`")?
                {
                    let d = Diagnostic::error("`hex=True` is not supported", h.span, "");
                    return self.fail(d);
                }
                if !prefix.is_ascii() {
                    let d = Diagnostic::error("the prefix of `device_print` must be ASCII", p.span, "");
                    return self.fail(d);
                }
                let mut vs = Vec::with_capacity(vals.len());
                for o in &vals {
                    vs.push(self.runtime_value(o)?);
                }
                let idx = self.b.string(print_prefix(&prefix, !vs.is_empty()));
                self.b.inst(Opcode::Print(idx), vs, &[], span);
                Ok(Val::NONE)
            }
            Builtin::DeviceAssert => {
                let a = self.bind(name, &["cond", "msg", "mask"], 1, args)?;
                let c = a[0].clone().ok_or(Failed)?;
                if let Some(m) = given(&a[1]) {
                    self.const_str(m, "the message")?;
                }
                let mut cond = self.as_bool(&c)?;
                if let Some(m) = given(&a[2]) {
                    // A masked-off lane passes: cond | !mask.
                    let mv = self.as_bool(m)?;
                    let t = self.ty(mv);
                    let not = self.emit(Opcode::Unary(UnOp::Not), vec![mv], t, m.span);
                    let (x, y) = self.broadcast_pair((cond, c.span), (not, m.span), span)?;
                    let t = self.ty(x);
                    cond = self.emit(Opcode::Binary(BBin::Or), vec![x, y], t, span);
                }
                self.b.inst(Opcode::Assert, vec![cond], &[], span);
                Ok(Val::NONE)
            }
            // Each program is one thread of execution on the CPU: nothing to synchronize.
            Builtin::DebugBarrier => {
                self.bind(name, &[], 0, args)?;
                Ok(Val::NONE)
            }
            Builtin::Hint(_) => {
                let a = self.bind(name, &["input", "values"], 2, args)?;
                let v = a[1].clone().ok_or(Failed)?;
                let items: Vec<Val> = match &v.v {
                    Val::Tuple(items) => items.to_vec(),
                    other => vec![other.clone()],
                };
                for it in items {
                    self.const_int(&Opnd::new(it, v.span), "a hint value")?;
                }
                Ok(a[0].clone().ok_or(Failed)?.v)
            }
            Builtin::AtomicCas => self.atomic_cas(args),
            Builtin::Atomic(op) => self.atomic(op, args),
            Builtin::ExpandDims => {
                let a = self.bind(name, &["input", "axis"], 2, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                let ax = a[1].clone().ok_or(Failed)?;
                let mut v = self.runtime_value(&x)?;
                let axes: Vec<Val> = match &ax.v {
                    Val::Tuple(items) => items.to_vec(),
                    other => vec![other.clone()],
                };
                let rank = self.ty(v).shape.rank() + axes.len();
                let mut idx = Vec::new();
                for it in axes {
                    idx.push(self.const_axis(&Opnd::new(it, ax.span), rank, "the axis")?);
                }
                idx.sort_unstable();
                for i in idx {
                    let t = self.ty(v);
                    if t.shape.is_scalar() {
                        v = self.splat(v, Shape::d1(1), span);
                        continue;
                    }
                    let Some(s) = t.shape.insert_axis(i) else {
                        let d = Diagnostic::error("too many axes (blocks have rank 4 at most)", ax.span, "");
                        return self.fail(d);
                    };
                    v = self.emit(Opcode::ExpandDims(i as u8), vec![v], t.with_shape(s), span);
                }
                Ok(Val::Tensor(v))
            }
            Builtin::BroadcastTo => {
                let (a, rest) = self.bind_varargs(name, &["input"], 1, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                let shape_o = match rest.as_slice() {
                    [one] => one.clone(),
                    many => Opnd::new(
                        Val::tuple(many.iter().map(|o| o.v.clone()).collect()),
                        many.first().map_or(span, |o| o.span),
                    ),
                };
                let shape = self.const_shape(&shape_o, "the shape")?;
                let v = self.runtime_value(&x)?;
                let t = self.ty(v);
                let ok = t.shape.is_scalar()
                    || (t.shape.rank() == shape.rank()
                        && t.shape.dims().iter().zip(shape.dims()).all(|(a, b)| a == b || *a == 1));
                if !ok {
                    let d = Diagnostic::error(
                        format!(
                            "cannot broadcast a block of shape {} to {}",
                            shape_str(t.shape),
                            shape_str(shape)
                        ),
                        span,
                        "",
                    )
                    .with_label(x.span, shape_str(t.shape))
                    .with_note("the ranks must be equal and each size must match or be 1");
                    return self.fail(d);
                }
                Ok(Val::Tensor(self.expand_to(v, shape, span)))
            }
            Builtin::Broadcast => {
                let a = self.bind(name, &["input", "other"], 2, args)?;
                let (x, y) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
                let (xv, yv) = (self.runtime_value(&x)?, self.runtime_value(&y)?);
                let (p, q) = self.broadcast_pair((xv, x.span), (yv, y.span), span)?;
                Ok(Val::tuple(vec![Val::Tensor(p), Val::Tensor(q)]))
            }
            Builtin::Range(_) => {
                let d = Diagnostic::error(
                    format!("`{name}` can only be used as the iterable of a `for` loop"),
                    span,
                    "",
                );
                self.fail(d)
            }
            Builtin::Cast => {
                let a = self.bind(name, &["input", "dtype", "fp_downcast_rounding", "bitcast"], 2, args)?;
                let x = a[0].clone().ok_or(Failed)?;
                self.convert_method(x, &a[1..], span)
            }
            Builtin::Constexpr => {
                let a = self.bind(name, &["value"], 1, args)?;
                let v = a[0].clone().ok_or(Failed)?;
                if !v.v.is_compile_time() {
                    let d =
                        Diagnostic::error("`tl.constexpr` needs a value known at compile time", v.span, "");
                    return self.fail(d);
                }
                Ok(v.v)
            }
            Builtin::PyLen => {
                let a = self.bind(name, &["obj"], 1, args)?;
                let v = a[0].clone().ok_or(Failed)?;
                match &v.v {
                    Val::Tuple(items) => Ok(Val::Const(Cv::Int(items.len() as i128))),
                    Val::Const(Cv::Str(s)) => Ok(Val::Const(Cv::Int(s.chars().count() as i128))),
                    other => {
                        let what = self.describe(other);
                        self.fail(Diagnostic::error(format!("{what} has no length"), v.span, ""))
                    }
                }
            }
            Builtin::PyInt | Builtin::PyFloat | Builtin::PyBool => {
                let a = self.bind(name, &["x"], 1, args)?;
                let v = a[0].clone().ok_or(Failed)?;
                let Val::Const(c) = &self.static_view(&v.v) else {
                    let help = match b {
                        Builtin::PyInt => "use `x.to(tl.int32)` for values known at run time",
                        Builtin::PyFloat => "use `x.to(tl.float32)` for values known at run time",
                        _ => "compare explicitly, e.g. `x != 0`",
                    };
                    let d =
                        Diagnostic::error(format!("`{name}(...)` needs a compile-time value"), v.span, "")
                            .with_help(help);
                    return self.fail(d);
                };
                let r = match (b, c) {
                    (Builtin::PyBool, c) => Cv::Bool(crate::consteval::truthy(c)),
                    (Builtin::PyInt, Cv::Int(i)) => Cv::Int(*i),
                    (Builtin::PyInt, Cv::Bool(x)) => Cv::Int(*x as i128),
                    (Builtin::PyInt, Cv::Float(f)) if f.is_finite() => Cv::Int(f.trunc() as i128),
                    (Builtin::PyFloat, Cv::Int(i)) => Cv::Float(*i as f64),
                    (Builtin::PyFloat, Cv::Bool(x)) => Cv::Float(*x as i64 as f64),
                    (Builtin::PyFloat, Cv::Float(f)) => Cv::Float(*f),
                    // `float("-inf")` is how kernels spell infinities.
                    (Builtin::PyFloat, Cv::Str(s)) => match s.trim().to_ascii_lowercase().parse::<f64>() {
                        Ok(f) => Cv::Float(f),
                        Err(_) => {
                            let d = Diagnostic::error(
                                format!("could not convert string to float: {s:?}"),
                                v.span,
                                "",
                            );
                            return self.fail(d);
                        }
                    },
                    _ => {
                        let d = Diagnostic::error(
                            format!("cannot convert {} with `{name}`", crate::diag::cv_str(c)),
                            v.span,
                            "",
                        );
                        return self.fail(d);
                    }
                };
                Ok(Val::Const(r))
            }
        }
    }

    pub(crate) fn ptr_not_allowed<T>(&mut self, name: &str, v: Value, span: Span) -> R<T> {
        let d = Diagnostic::error(format!("`{name}` is not defined on pointers"), span, type_str(self.ty(v)));
        self.fail(d)
    }

    /// A block of `shape` filled with the number `c` converted to `d`.
    pub(crate) fn full_value(&mut self, shape: Shape, c: &Cv, d: DType, span: Span) -> Value {
        let s = self.const_of(c, d, span);
        self.splat(s, shape, span)
    }

    fn arange(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind("tl.arange", &["start", "end"], 2, args)?;
        let (so, eo) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
        let mut bounds = [0i128; 2];
        for (i, o) in [&so, &eo].into_iter().enumerate() {
            bounds[i] = match self.static_view(&o.v) {
                Val::Const(Cv::Int(v)) => v,
                Val::Undef(_) => return Err(Failed),
                _ => {
                    let d = Diagnostic::error(
                        "arange's arguments must be of type tl.constexpr",
                        o.span,
                        "not a compile-time integer",
                    )
                    .with_help(
                        "annotate the parameter `NAME: tl.constexpr` and give its value in the signature",
                    );
                    return self.fail(d);
                }
            };
        }
        let [start, end] = bounds;
        if !(i32::MIN as i128..=i32::MAX as i128).contains(&start)
            || !(i32::MIN as i128..=i32::MAX as i128).contains(&end)
        {
            let d = Diagnostic::error("arange must fit in int32", span, "");
            return self.fail(d);
        }
        if end <= start {
            let d =
                Diagnostic::error("arange's end argument must be greater than the start argument", span, "")
                    .with_note(format!("start is {start}, end is {end}"));
            return self.fail(d);
        }
        let n = end - start;
        if n & (n - 1) != 0 {
            let d =
                Diagnostic::error("arange's range must be a power of 2", span, format!("the range is {n}"))
                    .with_help("round the block size up to a power of two and mask the extra elements");
            return self.fail(d);
        }
        if n as u64 > crate::args::MAX_NUMEL {
            let d = Diagnostic::error(
                format!("a block of {n} elements exceeds the maximum of {}", crate::args::MAX_NUMEL),
                span,
                "",
            );
            return self.fail(d);
        }
        let t = Type::block(Elem::Scalar(DType::I32), Shape::d1(n as u32));
        Ok(Val::Tensor(self.emit(Opcode::Arange { start: start as i64, end: end as i64 }, vec![], t, span)))
    }

    /// `tl.fma(x, y, z)`: the operands promoted and broadcast together as Triton's binary
    /// operators do, pairwise; floats only (Cranelift's `fma`, one `vfmadd` per vector).
    /// Triton's GPU code fuses it; its CPU interpreter multiplies and adds separately.
    fn fma(&mut self, x: Opnd, y: Opnd, z: Opnd, span: Span) -> R<Val> {
        let name = "tl.fma";
        for o in [&x, &y, &z] {
            if let Val::Tensor(v) = o.v
                && matches!(self.ty(v).elem, Elem::Ptr(_))
            {
                return self.ptr_not_allowed(name, v, o.span);
            }
        }
        let (x1, y1, _) = self.numeric_pair(&x, &y, false, name, span)?;
        let (x2, z1, d) = self.numeric_pair(&Opnd::new(Val::Tensor(x1), x.span), &z, false, name, span)?;
        if !d.is_float() {
            let e = Diagnostic::error(
                format!("`{name}` needs floating-point operands, got {}", d.tl_name()),
                span,
                "",
            )
            .with_label(x.span, "")
            .with_help("convert first, e.g. `x.to(tl.float32)`");
            return self.fail(e);
        }
        let y2 = self.cast(y1, d, y.span);
        let (y3, x3) = self.broadcast_pair((y2, y.span), (x2, x.span), span)?;
        let t = self.ty(x3);
        Ok(Val::Tensor(self.emit(Opcode::Fma, vec![x3, y3, z1], t, span)))
    }

    /// `tl.maximum` / `tl.minimum`: operands as runtime values (bf16 computed in fp32).
    fn min_max(&mut self, max: bool, x: Opnd, y: Opnd, span: Span) -> R<Val> {
        let name = if max { "tl.maximum" } else { "tl.minimum" };
        let mut ops = Vec::new();
        for o in [x, y] {
            let mut v = self.runtime_value(&o)?;
            match self.ty(v).elem {
                Elem::Ptr(_) => return self.ptr_not_allowed(name, v, o.span),
                Elem::Scalar(DType::BF16) => v = self.cast(v, DType::F32, o.span),
                Elem::Scalar(_) => {}
            }
            ops.push(Opnd::new(Val::Tensor(v), o.span));
        }
        let (a, b, _) = self.numeric_pair(&ops[0], &ops[1], false, name, span)?;
        let t = self.ty(a);
        let op = if max { BBin::Max } else { BBin::Min };
        Ok(Val::Tensor(self.emit(Opcode::Binary(op), vec![a, b], t, span)))
    }

    fn ptr_arg(&mut self, o: &Opnd, what: &str) -> R<Ptr> {
        let v = match &o.v {
            Val::Tensor(v) => *v,
            Val::Undef(_) => return Err(Failed),
            other => {
                let desc = self.describe(other);
                let d = Diagnostic::error(
                    format!("`{what}` expects a pointer, got {desc}"),
                    o.span,
                    "not a pointer",
                );
                return self.fail(d);
            }
        };
        let t = self.ty(v);
        match t.elem {
            Elem::Ptr(d) => Ok(Ptr { v, pointee: d, shape: t.shape, span: o.span }),
            Elem::Scalar(_) => {
                let d = Diagnostic::error(
                    format!("`{what}` expects a pointer, got {}", type_str(t)),
                    o.span,
                    "not a pointer",
                )
                .with_help("pointers come from `*T` parameters, offset with `+`");
                self.fail(d)
            }
        }
    }

    /// A mask operand: `int1` (a compile-time bool becomes a constant).
    fn mask_arg(&mut self, o: &Opnd, what: &str) -> R<Value> {
        match &o.v {
            Val::Const(Cv::Bool(b)) => Ok(self.const_of(&Cv::Bool(*b), DType::I1, o.span)),
            Val::Tensor(v) if self.ty(*v).elem == Elem::Scalar(DType::I1) => Ok(*v),
            Val::Undef(_) => Err(Failed),
            other => {
                let desc = match other {
                    Val::Tensor(v) => type_str(self.ty(*v)),
                    o => self.describe(o),
                };
                let d = Diagnostic::error(
                    format!("the mask of `{what}` must be a boolean (int1), got {desc}"),
                    o.span,
                    "",
                )
                .with_help("build masks with comparisons, e.g. `offs < N`");
                self.fail(d)
            }
        }
    }

    /// `x` (scalar or block) converted to `shape`, which must not grow the pointer: the
    /// value or mask of a store or an atomic.
    fn fit_to_ptr(&mut self, x: Value, xspan: Span, ptr: &Ptr, role: &str) -> R<Value> {
        let s = self.ty(x).shape;
        if ptr.shape.is_scalar() {
            if s.is_scalar() {
                return Ok(x);
            }
            let d = Diagnostic::error(
                format!("the {role} is a block but the pointer is a scalar"),
                xspan,
                format!("shape {}", shape_str(s)),
            )
            .with_label(ptr.span, "a single pointer");
            return self.fail(d);
        }
        match broadcast_shapes(ptr.shape, s) {
            Ok(r) if r == ptr.shape => Ok(self.expand_to(x, ptr.shape, xspan)),
            _ => {
                let d = Diagnostic::error(
                    format!(
                        "{role} shape {} does not match pointer shape {}",
                        shape_str(s),
                        shape_str(ptr.shape)
                    ),
                    xspan,
                    format!("shape {}", shape_str(s)),
                )
                .with_label(ptr.span, format!("pointer shape {}", shape_str(ptr.shape)))
                .with_note(
                    "it must broadcast to the pointer's shape (aligned on the right, sizes equal or 1)",
                )
                .with_help(
                    "compute it on blocks of the pointer's shape, or reduce it first (`tl.sum(x, axis=0)`)",
                );
                self.fail(d)
            }
        }
    }

    fn load(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind(
            "tl.load",
            &[
                "pointer",
                "mask",
                "other",
                "boundary_check",
                "padding_option",
                "cache_modifier",
                "eviction_policy",
                "volatile",
            ],
            1,
            args,
        )?;
        let mut p = self.ptr_arg(a[0].as_ref().ok_or(Failed)?, "tl.load")?;
        self.check_no_block_ptr_args(&a[3], &a[4])?;
        let volatile = match given(&a[7]).cloned() {
            Some(v) => {
                let on = self.const_bool(&v, "`volatile`")?;
                if on && !p.shape.is_scalar() {
                    // A block is read tile by tile in the loops that use it, not at one
                    // point of the program.
                    let d = Diagnostic::error("`volatile=True` loads of blocks are not supported", v.span, "")
                        .with_label(p.span, format!("a block of shape {}", shape_str(p.shape)))
                        .with_help(
                            "load the flag other programs write through a single pointer, or read it with an atomic",
                        );
                    return self.fail(d);
                }
                on
            }
            None => false,
        };
        let mask = given(&a[1]).cloned();
        let other = given(&a[2]).cloned();
        if mask.is_none()
            && let Some(o) = &other
        {
            let d = Diagnostic::error("`other` cannot be provided without `mask`", o.span, "")
                .with_help("masked-off lanes take `other`; without a mask every lane is loaded");
            return self.fail(d);
        }
        let mut args_v = Vec::new();
        let mut mv = None;
        if let Some(m) = &mask {
            let v = self.mask_arg(m, "tl.load")?;
            let ms = self.ty(v).shape;
            if p.shape.is_scalar() && !ms.is_scalar() {
                let d = Diagnostic::error(
                    "Mask argument cannot be block type if pointer argument is not a block",
                    m.span,
                    format!("shape {}", shape_str(ms)),
                )
                .with_label(p.span, "a single pointer");
                return self.fail(d);
            }
            // Triton broadcasts the pointer and the mask together.
            let Ok(s) = broadcast_shapes(p.shape, ms) else {
                let d = Diagnostic::error(
                    format!(
                        "mask shape {} does not match pointer shape {}",
                        shape_str(ms),
                        shape_str(p.shape)
                    ),
                    m.span,
                    format!("shape {}", shape_str(ms)),
                )
                .with_label(p.span, format!("pointer shape {}", shape_str(p.shape)))
                .with_note(
                    "the mask must broadcast with the pointer (aligned on the right, sizes equal or 1)",
                )
                .with_help("build the mask from the offsets the pointer is built from, e.g. `mask=offs < N`");
                return self.fail(d);
            };
            p.v = self.expand_to(p.v, s, p.span);
            p.shape = s;
            mv = Some((v, m.span));
        }
        let mut ov = None;
        if let Some(o) = &other {
            let v = match &o.v {
                Val::Const(c) if c.is_number() => self.const_of(c, p.pointee, o.span),
                Val::Tensor(x) if !self.ty(*x).elem.is_ptr() => *x,
                other_v => {
                    let desc = self.describe(other_v);
                    let d = Diagnostic::error(
                        format!("`other` must be a number or a block of numbers, got {desc}"),
                        o.span,
                        "",
                    );
                    return self.fail(d);
                }
            };
            let os = self.ty(v).shape;
            if p.shape.is_scalar() && !os.is_scalar() {
                let d = Diagnostic::error(
                    "Other argument cannot be block type if pointer argument is not a block",
                    o.span,
                    "",
                )
                .with_label(p.span, "a single pointer");
                return self.fail(d);
            }
            let Ok(s) = broadcast_shapes(p.shape, os) else {
                return Err(self.shape_error(
                    " between the pointer and `other`",
                    (p.shape, p.span),
                    (os, o.span),
                    span,
                ));
            };
            p.v = self.expand_to(p.v, s, p.span);
            p.shape = s;
            let v = self.cast(v, p.pointee, o.span);
            ov = Some((v, o.span));
        }
        args_v.push(p.v);
        if let Some((m, ms)) = mv {
            args_v.push(self.expand_to(m, p.shape, ms));
        }
        if let Some((o, os)) = ov {
            args_v.push(self.expand_to(o, p.shape, os));
        }
        let t = Type::block(Elem::Scalar(p.pointee), p.shape);
        let op = Opcode::Load { has_mask: mv.is_some(), has_other: ov.is_some(), volatile };
        Ok(Val::Tensor(self.emit(op, args_v, t, span)))
    }

    fn check_no_block_ptr_args(&mut self, boundary: &Option<Opnd>, padding: &Option<Opnd>) -> R<()> {
        let used = |o: &Option<Opnd>| match given(o).map(|o| &o.v) {
            None => false,
            Some(Val::Tuple(items)) => !items.is_empty(),
            Some(Val::Const(Cv::Str(s))) => !s.is_empty(),
            Some(_) => true,
        };
        if used(boundary) || used(padding) {
            let o = given(boundary).or(given(padding)).cloned().ok_or(Failed)?;
            let d = Diagnostic::error(
                "`boundary_check` and `padding_option` need block pointers, which lnc does not support",
                o.span,
                "",
            )
            .with_help("use a tensor of pointers with a `mask=` instead");
            return self.fail(d);
        }
        Ok(())
    }

    fn store(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind(
            "tl.store",
            &["pointer", "value", "mask", "boundary_check", "cache_modifier", "eviction_policy"],
            2,
            args,
        )?;
        let p = self.ptr_arg(a[0].as_ref().ok_or(Failed)?, "tl.store")?;
        self.check_no_block_ptr_args(&a[3], &None)?;
        let vo = a[1].clone().ok_or(Failed)?;
        let v = match &vo.v {
            Val::Const(c) if c.is_number() => self.const_of(c, p.pointee, vo.span),
            Val::Tensor(x) if !self.ty(*x).elem.is_ptr() => self.cast(*x, p.pointee, vo.span),
            other => {
                let desc = match other {
                    Val::Tensor(x) => type_str(self.ty(*x)),
                    o => self.describe(o),
                };
                let d = Diagnostic::error(format!("cannot store {desc}"), vo.span, "")
                    .with_help("store numbers; pointers cannot be written to memory");
                return self.fail(d);
            }
        };
        let v = self.fit_to_ptr(v, vo.span, &p, "value")?;
        let mut ops = vec![p.v, v];
        let mut has_mask = false;
        if let Some(m) = given(&a[2]) {
            let mv = self.mask_arg(m, "tl.store")?;
            let mv = self.fit_to_ptr(mv, m.span, &p, "mask")?;
            ops.push(mv);
            has_mask = true;
        }
        self.b.inst(Opcode::Store { has_mask, check_only: false }, ops, &[], span);
        Ok(Val::NONE)
    }

    fn where_(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind("tl.where", &["condition", "x", "y"], 3, args)?;
        let (c, x, y) =
            (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?, a[2].clone().ok_or(Failed)?);
        let cv = self.as_bool(&c)?;
        let is_ptr = |me: &Self, o: &Opnd| matches!(o.v, Val::Tensor(v) if me.ty(v).elem.is_ptr());
        let (xv, yv) = if is_ptr(self, &x) || is_ptr(self, &y) {
            let (Val::Tensor(xv), Val::Tensor(yv)) = (&x.v, &y.v) else {
                let d = Diagnostic::error("`tl.where` cannot mix pointers and numbers", span, "");
                return self.fail(d);
            };
            if self.ty(*xv).elem != self.ty(*yv).elem {
                let d = Diagnostic::error("`tl.where` needs both pointers of the same type", span, "")
                    .with_label(x.span, type_str(self.ty(*xv)))
                    .with_label(y.span, type_str(self.ty(*yv)));
                return self.fail(d);
            }
            self.broadcast_pair((*xv, x.span), (*yv, y.span), span)?
        } else {
            let (xv, yv, _) = self.numeric_pair(&x, &y, false, "tl.where", span)?;
            (xv, yv)
        };
        let (cs, xs) = (self.ty(cv).shape, self.ty(xv).shape);
        let Ok(s) = broadcast_shapes(cs, xs) else {
            return Err(self.shape_error(
                " between the condition and the values",
                (cs, c.span),
                (xs, x.span),
                span,
            ));
        };
        let cv = self.expand_to(cv, s, c.span);
        let xv = self.expand_to(xv, s, x.span);
        let yv = self.expand_to(yv, s, y.span);
        let t = self.ty(xv);
        Ok(Val::Tensor(self.emit(Opcode::Select, vec![cv, xv, yv], t, span)))
    }

    fn reduce(&mut self, op: ReduceOp, args: CallArgs) -> R<Val> {
        let span = args.span;
        let name = Builtin::Reduce(op).name();
        let a = if op == ReduceOp::Sum {
            self.bind(name, &["input", "axis", "keep_dims", "dtype"], 1, args)?
        } else {
            self.bind(
                name,
                &["input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims"],
                1,
                args,
            )?
        };
        let x = a[0].clone().ok_or(Failed)?;
        let mut v = self.runtime_value(&x)?;
        let t = self.ty(v);
        let Elem::Scalar(d) = t.elem else {
            return self.ptr_not_allowed(name, v, x.span);
        };
        let keep_idx = if op == ReduceOp::Sum { 2 } else { 4 };
        let keep = match given(&a[keep_idx]) {
            Some(o) => self.const_bool(o, "`keep_dims`")?,
            None => false,
        };
        let target = if op == ReduceOp::Sum {
            match given(&a[3]) {
                Some(o) => Some(self.const_dtype(o, "`dtype`")?),
                // Triton sums narrow integers in 32 bits to avoid overflow.
                None if d.is_int() && d.bits() < 32 => {
                    Some(if d.is_signed() { DType::I32 } else { DType::U32 })
                }
                None => None,
            }
        } else {
            if let Some(o) = given(&a[3]) {
                self.const_bool(o, "`return_indices_tie_break_left`")?;
            }
            if let Some(o) = given(&a[2])
                && self.const_bool(o, "`return_indices`")?
            {
                let (m, index) =
                    self.value_and_index(op == ReduceOp::Max, &x, given(&a[1]), (keep, true), name, span)?;
                let m = m.ok_or(Failed)?;
                return Ok(Val::tuple(vec![Val::Tensor(m), Val::Tensor(index)]));
            }
            Some(extremum_dtype(d)).filter(|&w| w != d)
        };
        if let Some(td) = target {
            v = self.cast(v, td, x.span);
        }
        let t = self.ty(v);
        let axes: Vec<usize> = match given(&a[1]) {
            Some(o) => {
                if t.shape.is_scalar() {
                    let e = Diagnostic::error(
                        format!("`{name}` along an axis needs a block, got a scalar"),
                        x.span,
                        "",
                    );
                    return self.fail(e);
                }
                vec![self.const_axis(o, t.shape.rank(), "the axis")?]
            }
            // Every axis, last first so that the remaining axis numbers stay valid.
            None => (0..t.shape.rank()).rev().collect(),
        };
        for axis in axes {
            let t = self.ty(v);
            let s = if keep {
                let mut dims = t.shape.dims().to_vec();
                dims[axis] = 1;
                Shape::new(&dims).ok_or(Failed)?
            } else {
                t.shape.remove_axis(axis)
            };
            let opc = Opcode::Reduce { op, axis: axis as u8, keep_dims: keep };
            v = self.emit(opc, vec![v], t.with_shape(s), span);
        }
        Ok(Val::Tensor(v))
    }

    /// Checks the element type of an atomic's pointer (Triton's `atom_red_typechecking_impl`).
    fn atomic_elem_check(&mut self, p: &Ptr, name: &str, op: Option<AtomicOp>) -> R<()> {
        let d = p.pointee;
        // The first rule that rejects `d`, as the help that says which types do work.
        let help = match op {
            None if !matches!(d.bits(), 16 | 32 | 64) => {
                Some("`tl.atomic_cas` works on 16-, 32- and 64-bit elements (e.g. an `int32` lock)")
            }
            None => None,
            Some(op) => {
                if d.bits() < 16 || matches!(d, DType::I16 | DType::U16) {
                    Some(
                        "atomics work on 32- and 64-bit elements (and `atomic_add` also on float16 and \
                         bfloat16): use an `int32` or `float32` buffer",
                    )
                } else if matches!(d, DType::F16 | DType::BF16) && op != AtomicOp::Add {
                    Some("of the atomics only `atomic_add` takes float16 and bfloat16 elements")
                } else if matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) && d.is_float() {
                    Some("bitwise atomics need integer elements")
                } else if matches!(op, AtomicOp::Max | AtomicOp::Min)
                    && d.is_float()
                    && !matches!(d, DType::F32 | DType::F64)
                {
                    Some("`atomic_max` and `atomic_min` on floats need float32 or float64 elements")
                } else {
                    None
                }
            }
        };
        if let Some(help) = help {
            let e = Diagnostic::error(
                format!("`{name}` does not support {} elements", d.tl_name()),
                p.span,
                format!("a pointer to {}", d.tl_name()),
            )
            .with_help(help);
            return self.fail(e);
        }
        Ok(())
    }

    fn check_sem_scope(&mut self, sem: &Option<Opnd>, scope: &Option<Opnd>) -> R<()> {
        if let Some(o) = given(sem) {
            let s = self.const_str(o, "`sem`")?;
            if !matches!(s.as_str(), "acquire" | "release" | "acq_rel" | "relaxed") {
                let d = Diagnostic::error(format!("memory semantic `{s}` is not supported"), o.span, "")
                    .with_note("`sem` is one of \"acquire\", \"release\", \"acq_rel\", \"relaxed\"");
                return self.fail(d);
            }
        }
        if let Some(o) = given(scope) {
            let s = self.const_str(o, "`scope`")?;
            if !matches!(s.as_str(), "gpu" | "cta" | "sys") {
                let d = Diagnostic::error(format!("memory scope `{s}` is not supported"), o.span, "")
                    .with_note("`scope` is one of \"gpu\", \"cta\", \"sys\"");
                return self.fail(d);
            }
        }
        Ok(())
    }

    /// A value operand of an atomic: converted to the pointee type, fitted to the pointer.
    fn atomic_value(&mut self, o: &Opnd, p: &Ptr, role: &str) -> R<Value> {
        let v = match &o.v {
            Val::Const(c) if c.is_number() => self.const_of(c, p.pointee, o.span),
            Val::Tensor(x) if !self.ty(*x).elem.is_ptr() => self.cast(*x, p.pointee, o.span),
            Val::Undef(_) => return Err(Failed),
            other => {
                let desc = self.describe(other);
                let d = Diagnostic::error(format!("the {role} must be a number, got {desc}"), o.span, "");
                return self.fail(d);
            }
        };
        self.fit_to_ptr(v, o.span, p, role)
    }

    fn atomic_cas(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind("tl.atomic_cas", &["pointer", "cmp", "val", "sem", "scope"], 3, args)?;
        let p = self.ptr_arg(a[0].as_ref().ok_or(Failed)?, "tl.atomic_cas")?;
        self.atomic_elem_check(&p, "tl.atomic_cas", None)?;
        self.check_sem_scope(&a[3], &a[4])?;
        let cmp = self.atomic_value(a[1].as_ref().ok_or(Failed)?, &p, "compared value")?;
        let val = self.atomic_value(a[2].as_ref().ok_or(Failed)?, &p, "value")?;
        let t = Type::block(Elem::Scalar(p.pointee), p.shape);
        Ok(Val::Tensor(self.emit(Opcode::AtomicCas, vec![p.v, cmp, val], t, span)))
    }

    fn atomic(&mut self, op: AtomicOp, args: CallArgs) -> R<Val> {
        let span = args.span;
        let name = Builtin::Atomic(op).name();
        let a = self.bind(name, &["pointer", "val", "mask", "sem", "scope"], 2, args)?;
        let p = self.ptr_arg(a[0].as_ref().ok_or(Failed)?, name)?;
        self.atomic_elem_check(&p, name, Some(op))?;
        self.check_sem_scope(&a[3], &a[4])?;
        let val = self.atomic_value(a[1].as_ref().ok_or(Failed)?, &p, "value")?;
        let mut ops = vec![p.v, val];
        let mut has_mask = false;
        if let Some(m) = given(&a[2]) {
            let mv = self.mask_arg(m, name)?;
            ops.push(self.fit_to_ptr(mv, m.span, &p, "mask")?);
            has_mask = true;
        }
        let t = Type::block(Elem::Scalar(p.pointee), p.shape);
        Ok(Val::Tensor(self.emit(Opcode::Atomic { op, has_mask }, ops, t, span)))
    }
}

/// Triton's normalization of `device_print` prefixes: `"x"` prints as `" x: "`.
fn print_prefix(prefix: &str, has_args: bool) -> String {
    let mut p = prefix.to_string();
    if has_args && !p.ends_with(' ') {
        p.push(' ');
    }
    if has_args && !p.ends_with(": ") {
        p.pop();
        p.push_str(": ");
    }
    if p.len() > 2 && !p.starts_with(' ') {
        p.insert(0, ' ');
    }
    p
}

/// The element type `tl.max`/`tl.min` (and the reductions of `tl.argmax`/`tl.argmin`)
/// compare in: `bf16` as `fp32`, integers narrower than 32 bits (and `int1`) in 32.
pub(crate) fn extremum_dtype(d: DType) -> DType {
    match d {
        DType::BF16 => DType::F32,
        d if d.is_int() && d.bits() < 32 => {
            if d.is_signed() {
                DType::I32
            } else {
                DType::U32
            }
        }
        d => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(print_prefix("pid", true), " pid: ");
        assert_eq!(print_prefix("pid: ", true), " pid: ");
        assert_eq!(print_prefix("hello", false), " hello");
    }

    #[test]
    fn names_resolve() {
        for n in TL_NAMES {
            assert!(
                Builtin::tl(n).is_some() || crate::expr::tl_dtype(n).is_some(),
                "`tl.{n}` is listed but does not resolve"
            );
        }
        assert_eq!(Builtin::tl("sum").map(Builtin::name), Some("tl.sum"));
        assert_eq!(Builtin::math("exp").map(Builtin::name), Some("tl.exp"));
    }
}
