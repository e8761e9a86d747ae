//! Diagnostics for the Python constructs the parser accepted but kernels cannot use.
//!
//! The parser keeps them as [`StmtKind::Unsupported`] / [`ExprKind::Unsupported`] nodes
//! (and `for`/`while` `else` clauses) so that a kernel using one gets a message naming
//! the construct rather than a syntax error; [`unsupported_diagnostics`] produces those
//! messages for a front end that wants them all at once.

use lnc_diag::Diagnostic;

use crate::ast::{Expr, ExprKind, FunctionDef, Stmt, StmtKind};

/// One diagnostic per unsupported construct in `f`, in source order.
pub fn unsupported_diagnostics(f: &FunctionDef) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &f.params {
        for e in p.annotation.iter().chain(&p.default) {
            expr(e, &mut out);
        }
    }
    stmts(&f.body, &mut out);
    out
}

/// The message and help for an `Unsupported` node's name. The help says what a kernel
/// writes instead, where there is such a thing.
pub fn describe_unsupported(what: &str) -> (String, Option<&'static str>) {
    let in_kernels = "not supported in kernels";
    match what {
        "lambda" => (
            format!("`lambda` is {in_kernels}"),
            Some("define a separate `@triton.jit` function and call it"),
        ),
        "list comprehension" | "generator expression" | "set comprehension" | "dict comprehension" => (
            format!("{what}s are {in_kernels}"),
            Some(
                "compute on a whole block instead (build it with `tl.arange(0, N)`), \
                 or unroll a loop with `for i in tl.static_range(N)`",
            ),
        ),
        "dict display" => (format!("dicts are {in_kernels}"), Some("use separate variables or a tuple")),
        "set display" => (format!("sets are {in_kernels}"), Some("use separate variables or a tuple")),
        "f-string" => (format!("f-strings are {in_kernels}"), Some("use a plain string literal")),
        "bytes literal" => (format!("bytes literals are {in_kernels}"), Some("use a plain string literal")),
        "complex literal" => (format!("complex numbers are {in_kernels}"), None),
        "ellipsis" => (format!("`...` is {in_kernels}"), Some("write `pass` for an empty body")),
        "starred expression" => {
            (format!("starred expressions (`*x`) are {in_kernels}"), Some("write the elements one by one"))
        }
        "*args" | "**kwargs" => {
            (format!("argument unpacking (`{what}`) is {in_kernels}"), Some("pass the arguments one by one"))
        }
        "walrus" => (
            format!("assignment expressions (`:=`) are {in_kernels}"),
            Some("assign in a separate statement"),
        ),
        "yield" => (format!("`yield` is {in_kernels}"), Some("write results to memory with `tl.store`")),
        "await" => (format!("`await` is {in_kernels}"), None),
        "def" | "async def" => (
            format!("nested function definitions are {in_kernels}"),
            Some("define it at top level with `@triton.jit` and call it"),
        ),
        "class" => (format!("class definitions are {in_kernels}"), None),
        "type alias" => (format!("type aliases are {in_kernels}"), None),
        // `break` is not supported either, so an `else` clause always runs when the loop ends.
        "for else" | "while else" => {
            let kw = if what == "for else" { "for" } else { "while" };
            (
                format!("an `else` clause on a `{kw}` loop is {in_kernels}"),
                Some("without `break` the `else` body always runs: write it after the loop, unindented"),
            )
        }
        "import" => (
            format!("`import` statements are {in_kernels}"),
            Some("import at the top of the file; kernels reach Triton's functions through `tl`"),
        ),
        "global" | "nonlocal" => (
            format!("`{what}` statements are {in_kernels}"),
            Some("pass the value as a parameter (a `tl.constexpr` one for a compile-time constant)"),
        ),
        "raise" => (
            format!("`raise` statements are {in_kernels}"),
            Some("check with `tl.static_assert` at compile time or `tl.device_assert` at run time"),
        ),
        "try" => (
            format!("`try` statements are {in_kernels}"),
            Some("kernels raise no exceptions: keep the body of the `try` and drop the handlers"),
        ),
        "with" | "async with" => (
            format!("`{what}` statements are {in_kernels}"),
            Some("kernels have no context managers: keep the body and drop the `with` line"),
        ),
        other => (format!("`{other}` statements are {in_kernels}"), None),
    }
}

fn report(what: &str, span: lnc_diag::Span, out: &mut Vec<Diagnostic>) {
    let (message, help) = describe_unsupported(what);
    let mut d = Diagnostic::error(message, span, "not supported by lnc");
    if let Some(h) = help {
        d = d.with_help(h);
    }
    out.push(d);
}

fn stmts(body: &[Stmt], out: &mut Vec<Diagnostic>) {
    for s in body {
        stmt(s, out);
    }
}

fn stmt(s: &Stmt, out: &mut Vec<Diagnostic>) {
    match &s.kind {
        StmtKind::Expr(e) => expr(e, out),
        StmtKind::Assign { targets, value } => {
            targets.iter().for_each(|t| expr(t, out));
            expr(value, out);
        }
        StmtKind::AugAssign { target, value, .. } => {
            expr(target, out);
            expr(value, out);
        }
        StmtKind::AnnAssign { target, annotation, value } => {
            expr(target, out);
            expr(annotation, out);
            value.iter().for_each(|v| expr(v, out));
        }
        StmtKind::If { cond, body, orelse } => {
            expr(cond, out);
            stmts(body, out);
            stmts(orelse, out);
        }
        StmtKind::For { target, iter, body, orelse } => {
            expr(target, out);
            expr(iter, out);
            stmts(body, out);
            if let Some(first) = orelse.first() {
                report("for else", first.span, out);
            }
            stmts(orelse, out);
        }
        StmtKind::While { cond, body, orelse } => {
            expr(cond, out);
            stmts(body, out);
            if let Some(first) = orelse.first() {
                report("while else", first.span, out);
            }
            stmts(orelse, out);
        }
        StmtKind::Return(v) => v.iter().for_each(|v| expr(v, out)),
        StmtKind::Assert { test, msg } => {
            expr(test, out);
            msg.iter().for_each(|m| expr(m, out));
        }
        StmtKind::Pass | StmtKind::Break | StmtKind::Continue => {}
        StmtKind::Unsupported(what) => report(what, s.span, out),
    }
}

fn expr(e: &Expr, out: &mut Vec<Diagnostic>) {
    match &e.kind {
        ExprKind::Name(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::None => {}
        ExprKind::Attribute { value, .. } => expr(value, out),
        ExprKind::Call { func, args, kwargs } => {
            expr(func, out);
            args.iter().for_each(|a| expr(a, out));
            kwargs.iter().for_each(|(_, v)| expr(v, out));
        }
        ExprKind::Subscript { value, items } => {
            expr(value, out);
            items.iter().for_each(|i| expr(i, out));
        }
        ExprKind::Slice { lower, upper, step } => {
            for p in [lower, upper, step].into_iter().flatten() {
                expr(p, out);
            }
        }
        ExprKind::Binary { lhs, rhs, .. } => {
            expr(lhs, out);
            expr(rhs, out);
        }
        ExprKind::Unary { operand, .. } => expr(operand, out),
        ExprKind::Compare { first, rest, .. } => {
            expr(first, out);
            rest.iter().for_each(|r| expr(r, out));
        }
        ExprKind::BoolOp { values, .. } => values.iter().for_each(|v| expr(v, out)),
        ExprKind::IfExp { cond, then, orelse } => {
            expr(cond, out);
            expr(then, out);
            expr(orelse, out);
        }
        ExprKind::Tuple(elts) | ExprKind::List(elts) => elts.iter().for_each(|x| expr(x, out)),
        ExprKind::Unsupported(what) => report(what, e.span, out),
    }
}
