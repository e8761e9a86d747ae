//! The syntax tree of `@jit` functions. Every node carries the span of its source text.

use lnc_diag::Span;

/// A parsed file: the `@jit` functions found in it, in source order. Everything else at
/// top level (imports, classes, host code) has been skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    /// The jit functions.
    pub functions: Vec<FunctionDef>,
}

impl File {
    /// The index of the function `name` binds: of a name defined twice, the last
    /// definition, as Python binds it.
    pub fn function_index(&self, name: &str) -> Option<usize> {
        self.functions.iter().rposition(|f| f.name.name == name)
    }

    /// The function `name` binds (see [`File::function_index`]).
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        self.function_index(name).map(|i| &self.functions[i])
    }
}

/// A name with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// A decorator line such as `@triton.jit` or `@triton.autotune(configs=[...], key=['N'])`.
#[derive(Clone, Debug, PartialEq)]
pub struct Decorator {
    /// The dotted name (`triton.jit`).
    pub name: String,
    /// Span of the whole decorator expression.
    pub span: Span,
}

/// A `def` decorated with `@triton.jit`, `@jit` or `@lnc.jit`.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionDef {
    /// Function name.
    pub name: Ident,
    /// All decorators, in source order.
    pub decorators: Vec<Decorator>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Body statements (a leading docstring is kept as an expression statement).
    pub body: Vec<Stmt>,
    /// Span of the whole definition (from `def` to the end of the body).
    pub span: Span,
}

/// A function parameter: `X`, `BLOCK: tl.constexpr`, `BLOCK: tl.constexpr = 128`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Name.
    pub name: Ident,
    /// Annotation after `:`.
    pub annotation: Option<Expr>,
    /// Default after `=`.
    pub default: Option<Expr>,
    /// Span of the whole parameter.
    pub span: Span,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// Span of the whole statement (without its trailing newline).
    pub span: Span,
}

/// Statement kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// An expression evaluated for its effect (`tl.store(...)`, a docstring).
    Expr(Expr),
    /// `a = b = value` (targets in order; each may be a name, tuple, attribute or subscript).
    Assign {
        /// Targets, left to right.
        targets: Vec<Expr>,
        /// Assigned value.
        value: Expr,
    },
    /// `target op= value`.
    AugAssign {
        /// Target.
        target: Expr,
        /// The operator (`+=` is [`BinOp::Add`]).
        op: BinOp,
        /// Right-hand side.
        value: Expr,
    },
    /// `target: annotation [= value]`.
    AnnAssign {
        /// Target.
        target: Expr,
        /// Annotation.
        annotation: Expr,
        /// Value, when present.
        value: Option<Expr>,
    },
    /// `if cond: … elif …: … else: …` (`elif` is an `If` alone in `orelse`).
    If {
        /// Condition.
        cond: Expr,
        /// Then branch.
        body: Vec<Stmt>,
        /// Else branch (empty when absent).
        orelse: Vec<Stmt>,
    },
    /// `for target in iter: body`.
    For {
        /// Loop variable(s).
        target: Expr,
        /// Iterated expression (`range(...)`, `tl.range(...)`, `tl.static_range(...)`).
        iter: Expr,
        /// Body.
        body: Vec<Stmt>,
        /// `else:` clause (unsupported by lnc, kept for a clear error).
        orelse: Vec<Stmt>,
    },
    /// `while cond: body`.
    While {
        /// Condition.
        cond: Expr,
        /// Body.
        body: Vec<Stmt>,
        /// `else:` clause (unsupported by lnc, kept for a clear error).
        orelse: Vec<Stmt>,
    },
    /// `pass`.
    Pass,
    /// `return [value]`.
    Return(Option<Expr>),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `assert test[, msg]`.
    Assert {
        /// Condition.
        test: Expr,
        /// Message.
        msg: Option<Expr>,
    },
    /// A statement Python has but kernels cannot use (`def` inside a kernel, `with`, `try`,
    /// `class`, `import`, `global`, `del`, `raise`, `lambda` …): parsed over so the front end
    /// can say what is supported instead. The string names the construct.
    Unsupported(&'static str),
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Its source text.
    pub span: Span,
}

/// Expression kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A name.
    Name(String),
    /// An integer literal (Python ints are unbounded; lnc keeps up to 64 bits unsigned).
    Int(u64),
    /// A float literal.
    Float(f64),
    /// A string literal (adjacent literals concatenated; f-strings are [`ExprKind::Unsupported`]).
    Str(String),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// `value.attr`.
    Attribute {
        /// The object.
        value: Box<Expr>,
        /// The attribute name.
        attr: Ident,
    },
    /// `func(args..., name=value...)`.
    Call {
        /// Callee.
        func: Box<Expr>,
        /// Positional arguments.
        args: Vec<Expr>,
        /// Keyword arguments, in order.
        kwargs: Vec<(Ident, Expr)>,
    },
    /// `value[items]` (`x[:, None]`; one item per comma-separated index).
    Subscript {
        /// Indexed value.
        value: Box<Expr>,
        /// Indices.
        items: Vec<Expr>,
    },
    /// A slice inside a subscript: `a:b:c`, any part optional.
    Slice {
        /// Lower bound.
        lower: Option<Box<Expr>>,
        /// Upper bound.
        upper: Option<Box<Expr>>,
        /// Step.
        step: Option<Box<Expr>>,
    },
    /// `lhs op rhs`.
    Binary {
        /// Operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `op operand`.
    Unary {
        /// Operator.
        op: UnaryOp,
        /// Operand.
        operand: Box<Expr>,
    },
    /// `a < b <= c` (Python chains comparisons: `ops.len() == rest.len()`).
    Compare {
        /// First operand.
        first: Box<Expr>,
        /// Operators, in order.
        ops: Vec<CmpOp>,
        /// Following operands, in order.
        rest: Vec<Expr>,
    },
    /// `a and b and c` / `a or b`.
    BoolOp {
        /// `and` or `or`.
        op: BoolOp,
        /// Operands (two or more).
        values: Vec<Expr>,
    },
    /// `then if cond else orelse`.
    IfExp {
        /// Condition.
        cond: Box<Expr>,
        /// Value when true.
        then: Box<Expr>,
        /// Value when false.
        orelse: Box<Expr>,
    },
    /// `(a, b)` or `a, b`.
    Tuple(Vec<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// An expression Python has but kernels cannot use (`lambda`, comprehensions, dicts,
    /// sets, f-strings, `await`, `yield`, starred, walrus …), parsed over for a clear error.
    /// The string names the construct.
    Unsupported(&'static str),
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `//`.
    FloorDiv,
    /// `%`.
    Mod,
    /// `**`.
    Pow,
    /// `@` (matrix multiply).
    MatMul,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `+x`.
    Pos,
    /// `~x`.
    Invert,
    /// `not x`.
    Not,
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `is`.
    Is,
    /// `is not`.
    IsNot,
    /// `in`.
    In,
    /// `not in`.
    NotIn,
}

/// Boolean operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    /// `and`.
    And,
    /// `or`.
    Or,
}

impl BinOp {
    /// The operator as written in Python (`+`, `//`, `**` …).
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::MatMul => "@",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }
}

impl UnaryOp {
    /// The operator as written in Python (`-`, `+`, `~`, `not`).
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Pos => "+",
            UnaryOp::Invert => "~",
            UnaryOp::Not => "not",
        }
    }
}

impl CmpOp {
    /// The operator as written in Python (`<`, `is not`, `not in` …).
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
        }
    }
}

impl BoolOp {
    /// The operator as written in Python (`and`, `or`).
    pub fn as_str(self) -> &'static str {
        match self {
            BoolOp::And => "and",
            BoolOp::Or => "or",
        }
    }
}
