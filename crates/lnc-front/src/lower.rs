//! The lowering driver: kernel entry, scopes, statements and assignments.
//!
//! A [`Lowerer`] walks one kernel's statements in order, keeping the Python scope of the
//! function being lowered (`env`: name → [`Val`]) and appending instructions through the
//! bir [`Builder`]. Expressions are in `expr.rs`, typed operations in `ops.rs`, builtins in
//! `builtins.rs`, control flow in `control.rs`.
//!
//! Errors: every user error becomes a [`Diagnostic`] pushed on `diags` at the point it is
//! found, and the failing computation returns [`Failed`]. A failed statement binds the
//! names it would have assigned to [`Undef::Silent`], so later uses fail quietly instead of
//! cascading, and lowering goes on with the next statement: one run reports the
//! independent errors of a kernel.

use std::collections::HashMap;

use lnc_bir::{Builder, Const, Function, Opcode, Type, Value};
use lnc_diag::{Diagnostic, SourceFile, Span};
use lnc_syntax::ast::{self, Expr, ExprKind, Stmt, StmtKind};

use crate::builtins::Builtin;
use crate::consteval;
use crate::diag::{suggest, val_str};
use crate::signature::{ConstValue, SigEntry, Signature, is_constexpr_annotation};
use crate::value::{Callee, Cv, Module, Opnd, Undef, Val};

/// The error of a lowering step whose diagnostic has already been recorded.
#[derive(Debug)]
pub(crate) struct Failed;

/// Result of a lowering step.
pub(crate) type R<T> = Result<T, Failed>;

/// A Python scope: the variables of the function being lowered.
pub(crate) type Env = HashMap<String, Val>;

/// How a statement list ended.
pub(crate) enum Flow {
    /// It fell through.
    Normal,
    /// It returned this value (`None` for a bare `return` or falling off a function).
    Return(Val, Span),
}

/// Inlining deeper than this is treated as unbounded recursion.
const MAX_INLINE_DEPTH: u32 = 32;

/// Calls inlined into one kernel at most: every call of a `@jit` function is inlined, so a
/// function calling the next twice, thirty deep, would otherwise expand 2³⁰ times.
const MAX_INLINED_CALLS: u32 = 1 << 14;

/// State of the lowering of one kernel.
pub(crate) struct Lowerer<'a, 'f> {
    pub(crate) b: Builder<'f>,
    pub(crate) file: &'a SourceFile,
    pub(crate) ast: &'a ast::File,
    pub(crate) env: Env,
    pub(crate) diags: Vec<Diagnostic>,
    /// Inlined calls being lowered (the kernel is depth 0).
    pub(crate) depth: u32,
    /// Calls inlined so far.
    pub(crate) inlined: u32,
    /// Inlining failed for good (too deep or too many): later calls fail at once instead of
    /// expanding again, so that a recursive function calling itself twice stops after one
    /// diagnostic instead of 2³² attempts.
    pub(crate) inlining_failed: bool,
    /// Span of the function whose body is being lowered (for implicit returns).
    pub(crate) fn_span: Span,
    /// The scalar constants whose value may stand for a compile-time value: literals made
    /// runtime values, assigned numbers and what folds from them (see `known.rs`).
    pub(crate) known: HashMap<Value, Const>,
}

/// Lowers the `@jit` function `kernel` of `ast`, specialized on `sig`, to block IR.
///
/// Every runtime parameter (a `*T` or scalar entry) becomes a function parameter whose
/// slot is its index among all the source parameters. `tl.constexpr` parameters are folded
/// in; a runtime parameter given a literal becomes a constant of the literal's type. Calls
/// to other `@jit` functions of the file are inlined. On failure, every error found is
/// returned (at least one), each pointing at the offending source.
pub fn lower_kernel(
    file: &SourceFile,
    ast: &ast::File,
    kernel: &str,
    sig: &Signature,
) -> Result<Function, Vec<Diagnostic>> {
    let Some(fdef) = ast.function(kernel) else {
        let mut d = Diagnostic::error_nospan(format!("no @jit function named `{kernel}` in {}", file.name));
        let names: Vec<&str> = ast.functions.iter().map(|f| f.name.name.as_str()).collect();
        if let Some(s) = suggest(kernel, names.iter().copied()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        } else if !names.is_empty() {
            d = d.with_note(format!("the @jit functions of this file are: {}", names.join(", ")));
        }
        return Err(vec![d]);
    };
    if sig.entries.len() != fdef.params.len() {
        return Err(vec![Diagnostic::error(
            format!(
                "the signature has {} entries but `{kernel}` has {} parameters",
                sig.entries.len(),
                fdef.params.len()
            ),
            fdef.name.span,
            "kernel defined here",
        )]);
    }
    let mut func = Function::new(kernel);
    let mut diags = Vec::new();
    let mut params: Vec<(String, Span, ParamVal)> = Vec::new();
    for (slot, (p, e)) in fdef.params.iter().zip(&sig.entries).enumerate() {
        let constexpr = p.annotation.as_ref().is_some_and(is_constexpr_annotation);
        let name = p.name.name.clone();
        let pv = match e {
            SigEntry::Ptr(_) | SigEntry::Scalar(_) if constexpr => {
                diags.push(
                    Diagnostic::error(
                        format!(
                            "parameter `{name}` is a `tl.constexpr` and needs a value, not the type `{e}`"
                        ),
                        p.span,
                        "declared `tl.constexpr` here",
                    )
                    .with_help(format!("give a literal, e.g. `{name}=128`")),
                );
                ParamVal::Const(Cv::None)
            }
            &SigEntry::Ptr(d) => ParamVal::Runtime(func.add_param(&name, slot as u32, Type::ptr(d))),
            &SigEntry::Scalar(d) => ParamVal::Runtime(func.add_param(&name, slot as u32, Type::scalar(d))),
            SigEntry::Const(c) => {
                let cv = match c {
                    ConstValue::Int(i) => Cv::Int(*i as i128),
                    ConstValue::Float(f) => Cv::Float(*f),
                    ConstValue::Bool(b) => Cv::Bool(*b),
                    ConstValue::Str(s) => Cv::Str(std::rc::Rc::from(&**s)),
                };
                match c.dtype() {
                    _ if constexpr => ParamVal::Const(cv),
                    Some(d) => ParamVal::Specialized(cv, d),
                    None => {
                        diags.push(
                            Diagnostic::error(
                                format!("parameter `{name}` is not a `tl.constexpr`: it cannot take the string {c}"),
                                p.span,
                                "a runtime parameter",
                            )
                            .with_help(format!("annotate it `{name}: tl.constexpr`")),
                        );
                        ParamVal::Const(Cv::None)
                    }
                }
            }
        };
        params.push((name, p.span, pv));
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let mut lw = Lowerer {
        b: Builder::new(&mut func),
        file,
        ast,
        env: Env::new(),
        diags: Vec::new(),
        depth: 0,
        inlined: 0,
        inlining_failed: false,
        fn_span: fdef.span,
        known: HashMap::new(),
    };
    for (name, span, pv) in params {
        let v = match pv {
            ParamVal::Runtime(v) => Val::Tensor(v),
            ParamVal::Const(c) => Val::Const(c),
            // A specialized runtime parameter keeps its runtime type: specializing must not
            // change what the kernel computes.
            ParamVal::Specialized(c, d) => {
                let v = lw.const_of(&c, d, span);
                lw.known.remove(&v);
                Val::Tensor(v)
            }
        };
        lw.env.insert(name, v);
    }
    let body: Vec<&Stmt> = fdef.body.iter().collect();
    if let Flow::Return(v, span) = lw.block(&body, true)
        && !matches!(v, Val::Const(Cv::None) | Val::Undef(_))
    {
        lw.diags.push(
            Diagnostic::error("a kernel cannot return a value", span, "this returns a value")
                .with_help("write results to memory with `tl.store`"),
        );
    }
    let Lowerer { b, diags, .. } = lw;
    b.finish();
    if diags.is_empty() { Ok(func) } else { Err(dedup(diags)) }
}

enum ParamVal {
    Runtime(Value),
    Const(Cv),
    Specialized(Cv, lnc_bir::DType),
}

/// Drops repeated diagnostics (an inlined function with an error reports it once).
fn dedup(diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::with_capacity(diags.len());
    for d in diags {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Names a statement list may assign, in source order, without duplicates (assignment
/// targets, augmented assignments, loop variables, nested blocks included).
pub(crate) fn assigned_names(stmts: &[&Stmt]) -> Vec<String> {
    fn target(e: &Expr, out: &mut Vec<String>) {
        match &e.kind {
            ExprKind::Name(n) if !out.contains(n) => out.push(n.clone()),
            ExprKind::Tuple(items) | ExprKind::List(items) => items.iter().for_each(|i| target(i, out)),
            _ => {}
        }
    }
    fn stmt(s: &Stmt, out: &mut Vec<String>) {
        match &s.kind {
            StmtKind::Assign { targets, .. } => targets.iter().for_each(|t| target(t, out)),
            StmtKind::AugAssign { target: t, .. } => target(t, out),
            StmtKind::AnnAssign { target: t, value: Some(_), .. } => target(t, out),
            StmtKind::If { body, orelse, .. } => body.iter().chain(orelse).for_each(|s| stmt(s, out)),
            StmtKind::For { target: t, body, orelse, .. } => {
                target(t, out);
                body.iter().chain(orelse).for_each(|s| stmt(s, out));
            }
            StmtKind::While { body, orelse, .. } => body.iter().chain(orelse).for_each(|s| stmt(s, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for s in stmts {
        stmt(s, &mut out);
    }
    out
}

/// True when a `return` appears in the statements (nested blocks included).
pub(crate) fn contains_return(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If { body, orelse, .. }
        | StmtKind::For { body, orelse, .. }
        | StmtKind::While { body, orelse, .. } => contains_return(body) || contains_return(orelse),
        _ => false,
    })
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// Records a diagnostic and fails.
    pub(crate) fn fail<T>(&mut self, d: Diagnostic) -> R<T> {
        self.diags.push(d);
        Err(Failed)
    }

    /// Type of an SSA value.
    pub(crate) fn ty(&self, v: Value) -> Type {
        self.b.func.ty(v)
    }

    /// Appends a one-result instruction, or a known constant when its operands are known
    /// scalars and it folds (see `known.rs`).
    pub(crate) fn emit(&mut self, op: Opcode, args: Vec<Value>, ty: Type, span: Span) -> Value {
        if let Some(k) = self.fold(&op, &args, ty) {
            let v = self.b.value(Opcode::Const(k), vec![], ty, span);
            self.known.insert(v, k);
            return v;
        }
        self.b.value(op, args, ty, span)
    }

    /// Describes a value for a message.
    pub(crate) fn describe(&self, v: &Val) -> String {
        val_str(v, |x| self.ty(x))
    }

    /// The source text of a span (for quoting the user's code in messages).
    pub(crate) fn text(&self, span: Span) -> &'a str {
        self.file.text.get(span.range()).unwrap_or("")
    }

    /// Makes the names a failed statement would have assigned unusable, quietly.
    fn poison(&mut self, stmts: &[&Stmt]) {
        for n in assigned_names(stmts) {
            self.env.insert(n, Val::Undef(Undef::Silent));
        }
    }

    /// Lowers a statement list. With `tail`, the list ends the function being lowered: a
    /// `return` (or falling off the end) returns from it, and a runtime `if` containing a
    /// `return` takes the rest of the list into its branches. Loop bodies are not tails.
    pub(crate) fn block(&mut self, stmts: &[&'a Stmt], tail: bool) -> Flow {
        let mut i = 0;
        while i < stmts.len() {
            let s = stmts[i];
            let rest = &stmts[i + 1..];
            match &s.kind {
                StmtKind::Return(value) => {
                    if !tail {
                        self.diags.push(
                            Diagnostic::error(
                                "`return` inside a loop is not supported",
                                s.span,
                                "returns from a loop",
                            )
                            .with_help(
                                "compute the result in loop-carried variables and return after the loop",
                            ),
                        );
                        i += 1;
                        continue;
                    }
                    let v = match value {
                        None => Val::NONE,
                        Some(e) => self.expr(e).unwrap_or(Val::Undef(Undef::Silent)),
                    };
                    return Flow::Return(v, s.span);
                }
                StmtKind::If { cond, body, orelse } => {
                    // A known scalar decides the `if` while compiling (an lnc extension:
                    // Triton would emit a runtime `if`, with the same result).
                    match self.expr(cond).map(|v| self.static_view(&v)) {
                        Err(Failed) => self.poison(&[s]),
                        Ok(Val::Tensor(c)) => {
                            if contains_return(body) || contains_return(orelse) {
                                if tail {
                                    return self.returning_if(s, c, cond.span, body, orelse, rest);
                                }
                                self.diags.push(
                                Diagnostic::error(
                                    "`return` inside a loop is not supported",
                                    s.span,
                                    "this `if` returns from inside a loop",
                                )
                                .with_help("compute the result in loop-carried variables and return after the loop"),
                            );
                                self.poison(&[s]);
                            } else if self.runtime_if(s, c, cond.span, body, orelse).is_err() {
                                self.poison(&[s]);
                            }
                        }
                        Ok(v) => match self.truthy(&v, cond.span) {
                            Ok(t) => {
                                // A compile-time condition: only the taken branch exists, and it
                                // shares the enclosing scope, so splice it in place.
                                let taken = if t { body } else { orelse };
                                let mut seq: Vec<&'a Stmt> = taken.iter().collect();
                                seq.extend_from_slice(rest);
                                return self.block(&seq, tail);
                            }
                            Err(Failed) => self.poison(&[s]),
                        },
                    }
                }
                _ => {
                    if self.stmt(s).is_err() {
                        self.poison(&[s]);
                    }
                }
            }
            i += 1;
        }
        if tail {
            let end = self.fn_span.end;
            Flow::Return(Val::NONE, Span { start: end, end })
        } else {
            Flow::Normal
        }
    }

    /// The truth value of a compile-time condition.
    pub(crate) fn truthy(&mut self, v: &Val, span: Span) -> R<bool> {
        match v {
            Val::Const(c) => Ok(consteval::truthy(c)),
            Val::Tensor(x) if self.is_known(*x) => match self.static_view(v) {
                Val::Const(c) => Ok(consteval::truthy(&c)),
                _ => Err(Failed),
            },
            Val::Tuple(items) => Ok(!items.is_empty()),
            Val::Module(_) | Val::Func(_) | Val::Bound(..) => Ok(true),
            Val::Undef(_) => Err(Failed),
            Val::Tensor(_) => {
                let d =
                    Diagnostic::error("expected a compile-time condition", span, "known only at run time");
                self.fail(d)
            }
        }
    }

    fn stmt(&mut self, s: &'a Stmt) -> R<()> {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e).map(drop),
            StmtKind::Assign { targets, value } => {
                let v = self.expr(value)?;
                let v = self.assigned_value(v, value.span)?;
                for t in targets {
                    self.assign(t, v.clone())?;
                }
                Ok(())
            }
            StmtKind::AugAssign { target, op, value } => {
                let ExprKind::Name(name) = &target.kind else {
                    return self.bad_target(target);
                };
                let cur = self.lookup(name, target.span)?;
                let rhs = self.expr(value)?;
                let v = self.binary(*op, Opnd::new(cur, target.span), Opnd::new(rhs, value.span), s.span)?;
                // Triton lowers `a op= b` as `a = a op b`: the result is assigned.
                let v = self.assigned_value(v, s.span)?;
                self.env.insert(name.clone(), v);
                Ok(())
            }
            StmtKind::AnnAssign { target, annotation, value } => {
                let Some(value) = value else { return Ok(()) };
                let v = self.expr(value)?;
                if !is_constexpr_annotation(annotation) {
                    let v = self.assigned_value(v, value.span)?;
                    return self.assign(target, v);
                }
                // `x: tl.constexpr = ...` keeps a compile-time value (a known scalar gives
                // its value).
                let v = self.static_view(&v);
                if !v.is_compile_time() {
                    let d = Diagnostic::error(
                        "a `tl.constexpr` variable needs a value known at compile time",
                        value.span,
                        "known only at run time",
                    );
                    return self.fail(d);
                }
                self.assign(target, v)
            }
            StmtKind::For { target, iter, body, orelse } => self.lower_for(s, target, iter, body, orelse),
            StmtKind::While { cond, body, orelse } => self.lower_while(s, cond, body, orelse),
            StmtKind::Pass => Ok(()),
            StmtKind::Break => {
                let d =
                    Diagnostic::error("`break` is not supported in Triton kernels", s.span, "not supported")
                        .with_help(
                            "say when to stop in the loop's condition (`while i < n and not done:`), or put \
                         the rest of the body under an `if`; to skip lanes of a block, use a mask",
                        );
                self.fail(d)
            }
            StmtKind::Continue => {
                let d = Diagnostic::error(
                    "`continue` is not supported in Triton kernels",
                    s.span,
                    "not supported",
                )
                .with_help(
                    "put the rest of the loop body under an `if` instead; to skip lanes of a \
                             block, use a mask",
                );
                self.fail(d)
            }
            StmtKind::Assert { test, msg } => self.assert_stmt(s, test, msg.as_ref()),
            StmtKind::Unsupported(what) => {
                // A nested `def`/`class` binds its name: mark it unusable so that its calls
                // do not also report an unknown name.
                if matches!(*what, "def" | "async def" | "class")
                    && let Some(name) = defined_name(self.text(s.span))
                {
                    self.env.insert(name.to_string(), Val::Undef(Undef::Silent));
                }
                let d = unsupported(what, s.span);
                self.fail(d)
            }
            // `if` and `return` shape the control flow and are handled by `block`.
            StmtKind::If { .. } | StmtKind::Return(_) => Ok(()),
        }
    }

    fn assert_stmt(&mut self, s: &Stmt, test: &'a Expr, msg: Option<&'a Expr>) -> R<()> {
        let c = self.expr(test)?;
        let text = match msg {
            Some(m) => match self.expr(m)? {
                Val::Const(Cv::Str(t)) => t.to_string(),
                _ => String::new(),
            },
            None => String::new(),
        };
        match c {
            Val::Tensor(v) => {
                let cond = self.truth_value(v, test.span);
                self.b.inst(Opcode::Assert, vec![cond], &[], s.span);
                Ok(())
            }
            other => {
                if self.truthy(&other, test.span)? {
                    Ok(())
                } else {
                    let d = Diagnostic::error(
                        if text.is_empty() {
                            "assertion failed".to_string()
                        } else {
                            format!("assertion failed: {text}")
                        },
                        test.span,
                        "false at compile time",
                    );
                    self.fail(d)
                }
            }
        }
    }

    /// Binds `v` to an assignment target (a name or a tuple of targets).
    pub(crate) fn assign(&mut self, target: &Expr, v: Val) -> R<()> {
        match &target.kind {
            ExprKind::Name(n) => {
                self.env.insert(n.clone(), v);
                Ok(())
            }
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                let values = match &v {
                    Val::Tuple(vals) => vals.clone(),
                    other => {
                        let what = self.describe(other);
                        let d = Diagnostic::error(
                            format!("cannot unpack {what} into {} names", items.len()),
                            target.span,
                            "",
                        );
                        return self.fail(d);
                    }
                };
                if values.len() != items.len() {
                    let d = Diagnostic::error(
                        format!("cannot unpack {} values into {} names", values.len(), items.len()),
                        target.span,
                        "",
                    );
                    return self.fail(d);
                }
                for (t, v) in items.iter().zip(values.iter()) {
                    self.assign(t, v.clone())?;
                }
                Ok(())
            }
            _ => self.bad_target(target),
        }
    }

    fn bad_target<T>(&mut self, target: &Expr) -> R<T> {
        let d = match &target.kind {
            ExprKind::Subscript { .. } => Diagnostic::error(
                "cannot assign to an element of a block",
                target.span,
                "blocks are immutable values",
            )
            .with_help("build the new block with `tl.where(mask, new, old)`"),
            ExprKind::Attribute { .. } => Diagnostic::error("cannot assign to an attribute", target.span, ""),
            _ => Diagnostic::error("cannot assign to this expression", target.span, ""),
        };
        self.fail(d)
    }

    /// The value of a name: a local, a `@jit` function of the file, a module or a builtin.
    pub(crate) fn lookup(&mut self, name: &str, span: Span) -> R<Val> {
        if let Some(v) = self.env.get(name) {
            let d = match v {
                Val::Undef(Undef::Silent) => return Err(Failed),
                Val::Undef(Undef::BranchOnly(at)) => Diagnostic::error(
                    format!("`{name}` is only defined in one branch of an `if`"),
                    span,
                    "may be undefined here",
                )
                .with_label(*at, "the `if` that assigns it in one branch only")
                .with_help(format!("assign `{name}` before the `if` or in both branches")),
                Val::Undef(Undef::InLoop(at)) => Diagnostic::error(
                    format!("`{name}` is first assigned inside a loop and cannot be used after it"),
                    span,
                    "used after the loop",
                )
                .with_label(*at, "the loop")
                .with_help(format!("assign `{name}` before the loop so that it is carried through it")),
                Val::Undef(Undef::LoopVar(at)) => Diagnostic::error(
                    format!("the loop variable `{name}` cannot be used after its loop"),
                    span,
                    "used after the loop",
                )
                .with_label(*at, "the loop"),
                other => return Ok(other.clone()),
            };
            return self.fail(d);
        }
        if let Some(i) = self.ast.function_index(name) {
            return Ok(Val::Func(Callee::Jit(i)));
        }
        match name {
            "tl" => return Ok(Val::Module(Module::Tl)),
            "triton" => return Ok(Val::Module(Module::Triton)),
            _ => {}
        }
        if let Some(b) = Builtin::python(name) {
            return Ok(Val::Func(Callee::Builtin(b)));
        }
        let mut d = Diagnostic::error(format!("unknown name `{name}`"), span, "not defined in this kernel");
        let mut candidates: Vec<&str> = self.env.keys().map(String::as_str).collect();
        candidates.extend(self.ast.functions.iter().map(|f| f.name.name.as_str()));
        candidates.extend(["tl", "triton", "range", "min", "max"]);
        if let Some(s) = suggest(name, candidates) {
            d = d.with_help(format!("did you mean `{s}`?"));
        } else if matches!(name, "torch" | "np" | "numpy" | "math") {
            d = d.with_note("only `triton.language` (imported as `tl`) can be used inside a kernel");
        } else {
            d = d
                .with_note(
                    "a kernel sees its parameters, its local variables, the file's @jit functions and `tl`; \
                     module-level Python variables are not available",
                )
                .with_help(
                    "assign it first, or pass it as a parameter (`tl.constexpr` for a compile-time constant)",
                );
        }
        self.fail(d)
    }

    /// Inlines a call to the `@jit` function `index`.
    pub(crate) fn call_jit(&mut self, index: usize, args: crate::args::CallArgs) -> R<Val> {
        let f = &self.ast.functions[index];
        let fname = f.name.name.clone();
        if self.inlining_failed {
            return Err(Failed);
        }
        self.inlined += 1;
        let limit = if self.depth >= MAX_INLINE_DEPTH {
            Some(Diagnostic::error(
                format!("calls to `{fname}` nest too deeply (recursion is not supported)"),
                args.span,
                "",
            ))
        } else if self.inlined > MAX_INLINED_CALLS {
            Some(
                Diagnostic::error(
                    format!("more than {MAX_INLINED_CALLS} calls inlined into this kernel"),
                    args.span,
                    "one call too many",
                )
                .with_help(
                    "every call of a `@jit` function is inlined: a function calling others several \
                     times each multiplies them",
                ),
            )
        } else {
            None
        };
        if let Some(d) = limit {
            self.inlining_failed = true;
            return self.fail(d);
        }
        let mut bound: Vec<Option<Opnd>> = vec![None; f.params.len()];
        if args.pos.len() > f.params.len() {
            let d = Diagnostic::error(
                format!(
                    "`{fname}` takes {} argument{} but {} were given",
                    f.params.len(),
                    if f.params.len() == 1 { "" } else { "s" },
                    args.pos.len()
                ),
                args.pos[f.params.len()].span,
                "unexpected argument",
            )
            .with_label(f.name.span, "defined here");
            return self.fail(d);
        }
        for (i, a) in args.pos.into_iter().enumerate() {
            bound[i] = Some(a);
        }
        for (name, nspan, a) in args.kw {
            let Some(i) = f.params.iter().position(|p| p.name.name == name) else {
                let mut d = Diagnostic::error(
                    format!("`{fname}` has no parameter named `{name}`"),
                    nspan,
                    "unknown parameter",
                )
                .with_label(f.name.span, "defined here");
                if let Some(s) = suggest(&name, f.params.iter().map(|p| p.name.name.as_str())) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                return self.fail(d);
            };
            if bound[i].is_some() {
                let d = Diagnostic::error(format!("`{fname}` got `{name}` twice"), nspan, "given again here");
                return self.fail(d);
            }
            bound[i] = Some(a);
        }
        let mut env = Env::new();
        for (p, a) in f.params.iter().zip(bound) {
            let v = match a {
                Some(a) => a.v,
                None => match &p.default {
                    // Python evaluates defaults where the function is defined: no locals.
                    Some(d) => {
                        let saved = std::mem::take(&mut self.env);
                        let v = self.expr(d);
                        self.env = saved;
                        v?
                    }
                    None => {
                        let d = Diagnostic::error(
                            format!("missing argument `{}` in the call to `{fname}`", p.name.name),
                            args.span,
                            "",
                        )
                        .with_label(p.span, "parameter declared here");
                        return self.fail(d);
                    }
                },
            };
            let constexpr = p.annotation.as_ref().is_some_and(is_constexpr_annotation);
            // A known scalar passed to a `tl.constexpr` parameter gives its value.
            let v = if constexpr { self.static_view(&v) } else { v };
            if constexpr && !v.is_compile_time() {
                let d = Diagnostic::error(
                    format!(
                        "parameter `{}` of `{fname}` is a `tl.constexpr` but receives a run-time value",
                        p.name.name
                    ),
                    args.span,
                    "in this call",
                )
                .with_label(p.span, "declared `tl.constexpr` here")
                .with_help(
                    "pass a literal or a `tl.constexpr` of the caller, or drop the annotation if the \
                     value may be known only at run time",
                );
                return self.fail(d);
            }
            env.insert(p.name.name.clone(), v);
        }
        let body: Vec<&'a Stmt> = self.ast.functions[index].body.iter().collect();
        let ndiags = self.diags.len();
        let saved_env = std::mem::replace(&mut self.env, env);
        let saved_span = std::mem::replace(&mut self.fn_span, self.ast.functions[index].span);
        self.depth += 1;
        let flow = self.block(&body, true);
        self.depth -= 1;
        self.env = saved_env;
        self.fn_span = saved_span;
        if self.diags.len() > ndiags {
            return Err(Failed);
        }
        match flow {
            Flow::Return(Val::Undef(_), _) | Flow::Normal => Err(Failed),
            Flow::Return(v, _) => Ok(v),
        }
    }

    /// A scalar or block condition as `int1` (`x != 0` for other types).
    pub(crate) fn truth_value(&mut self, v: Value, span: Span) -> Value {
        let t = self.ty(v);
        if t.elem == lnc_bir::Elem::Scalar(lnc_bir::DType::I1) {
            return v;
        }
        self.emit(Opcode::Cast, vec![v], t.with_elem(lnc_bir::Elem::Scalar(lnc_bir::DType::I1)), span)
    }

    /// A throwaway value of type `ty`, standing for a value whose identity does not matter
    /// (only its type does) while a loop body is lowered to learn what it changes.
    pub(crate) fn placeholder_value(&mut self, ty: Type, span: Span) -> Value {
        self.emit(Opcode::Const(Const::Int(0)), vec![], ty, span)
    }
}

/// The name a `def` or `class` statement binds, from its source text (which may start
/// with decorators).
fn defined_name(text: &str) -> Option<&str> {
    text.lines().find_map(|line| {
        let line = line.trim_start();
        let line = line.strip_prefix("async").map_or(line, str::trim_start);
        let rest = line.strip_prefix("def ").or_else(|| line.strip_prefix("class "))?.trim_start();
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

/// The diagnostic for a Python construct kernels cannot contain (worded by the parser's
/// crate, which names the construct).
pub(crate) fn unsupported(what: &str, span: Span) -> Diagnostic {
    let (message, help) = lnc_syntax::unsupported::describe_unsupported(what);
    let d = Diagnostic::error(message, span, "not supported by lnc");
    match help {
        Some(h) => d.with_help(h),
        None => d,
    }
}
