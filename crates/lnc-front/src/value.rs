//! What a name or an expression stands for while a kernel is lowered.
//!
//! Python code mixes two worlds: values known while compiling (literals, `tl.constexpr`
//! parameters, dtypes, modules, functions, tuples of those) and values that exist only when
//! the kernel runs (SSA values of the block IR). A [`Val`] is either; operations fold when
//! every operand is known and emit instructions otherwise.
//!
//! A number assigned to a name leaves the first world: Triton makes it a scalar tensor, so
//! it is a [`Val::Tensor`] (a typed `const`) whose value the lowerer still knows
//! (`known.rs`): arithmetic on it has tensor semantics, and places that need a
//! compile-time value may read it.

use std::rc::Rc;

use lnc_bir::{Elem, Type, Value};
use lnc_diag::Span;

use crate::builtins::Builtin;

/// A compile-time Python value (Triton's `tl.constexpr`). Numbers are *weakly typed*: they
/// take the type of the block they meet, as Triton's scalars do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cv {
    /// A Python `int` (unbounded in Python; 128 bits here, checked).
    Int(i128),
    /// A Python `float`.
    Float(f64),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// A string (`device_print` prefixes, messages, `eviction_policy`…).
    Str(Rc<str>),
    /// A dtype (`tl.float32`), or a pointer type (`X.dtype` of a pointer).
    DType(Elem),
    /// The `.type` of a value: its element type and shape.
    Type(Type),
}

impl Cv {
    /// True for `int`, `float` and `bool`, the values that take part in arithmetic.
    pub(crate) fn is_number(&self) -> bool {
        matches!(self, Cv::Int(_) | Cv::Float(_) | Cv::Bool(_))
    }
}

/// A module reachable from kernel code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Module {
    /// `tl` / `triton.language`.
    Tl,
    /// `tl.math`.
    TlMath,
    /// `triton`.
    Triton,
}

/// Something callable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callee {
    /// A builtin (`tl.load`, `range`, `min`…).
    Builtin(Builtin),
    /// A `@jit` function of the file, by index in [`lnc_syntax::ast::File::functions`].
    Jit(usize),
}

/// A predicate method of a dtype (`x.dtype.is_floating()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DTypePred {
    IsFloating,
    IsInt,
    IsIntSigned,
    IsIntUnsigned,
    IsBool,
    IsFp16,
    IsBf16,
    IsFp32,
    IsFp64,
    IsPtr,
}

/// A method bound to its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    /// `x.to(dtype, bitcast=False)`.
    To,
    /// A `tl` function called as a method (`x.sum(axis=0)` is `tl.sum(x, axis=0)`).
    Builtin(Builtin),
    /// `dtype.is_floating()` and friends.
    DTypePred(DTypePred),
}

/// Why a name has no usable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Undef {
    /// Its definition failed and was reported: using it reports nothing more.
    Silent,
    /// Assigned in only one branch of the runtime `if` at this span.
    BranchOnly(Span),
    /// First assigned inside the body of the loop at this span.
    InLoop(Span),
    /// The induction variable of the loop at this span.
    LoopVar(Span),
}

/// The value of a name or an expression.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    /// Known at compile time.
    Const(Cv),
    /// A runtime value: a scalar, a pointer, or a block.
    Tensor(Value),
    /// A tuple; its elements may be of either world.
    Tuple(Rc<Vec<Val>>),
    /// A module.
    Module(Module),
    /// A function.
    Func(Callee),
    /// A method bound to its receiver.
    Bound(Box<Val>, Method),
    /// A name that must not be used (see [`Undef`]).
    Undef(Undef),
}

impl Val {
    /// `None`.
    pub(crate) const NONE: Val = Val::Const(Cv::None);

    /// A tuple of values.
    pub(crate) fn tuple(items: Vec<Val>) -> Val {
        Val::Tuple(Rc::new(items))
    }

    /// True when the value is fully known at compile time.
    pub(crate) fn is_compile_time(&self) -> bool {
        match self {
            Val::Const(_) | Val::Module(_) | Val::Func(_) => true,
            Val::Tuple(items) => items.iter().all(Val::is_compile_time),
            Val::Tensor(_) | Val::Bound(..) | Val::Undef(_) => false,
        }
    }

    /// True for the `None` constant.
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Val::Const(Cv::None))
    }
}

/// Identity of two values, as far as the IR is concerned: the same SSA value, equal
/// constants (same Python type, same bits for floats), or tuples of identical values.
pub(crate) fn same(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Const(Cv::Float(x)), Val::Const(Cv::Float(y))) => x.to_bits() == y.to_bits(),
        (Val::Const(x), Val::Const(y)) => x == y,
        (Val::Tensor(x), Val::Tensor(y)) => x == y,
        (Val::Tuple(x), Val::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| same(a, b))
        }
        (Val::Module(x), Val::Module(y)) => x == y,
        (Val::Func(x), Val::Func(y)) => x == y,
        (Val::Bound(x, m), Val::Bound(y, n)) => m == n && same(x, y),
        (Val::Undef(x), Val::Undef(y)) => x == y,
        _ => false,
    }
}

/// An operand: a value with the span of the expression it comes from, for diagnostics and
/// for the spans of the conversions it needs.
#[derive(Clone, Debug)]
pub(crate) struct Opnd {
    pub(crate) v: Val,
    pub(crate) span: Span,
}

impl Opnd {
    pub(crate) fn new(v: Val, span: Span) -> Opnd {
        Opnd { v, span }
    }
}
