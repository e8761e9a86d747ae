//! A deterministic, indented text dump of the syntax tree: one node per line with its
//! kind, its key data and its byte span `[start..end]`. It is what
//! `lnc compile --emit ast` prints and what the snapshot tests compare, so it leaves out
//! line and column numbers (they would churn on unrelated edits above a kernel).

use std::fmt::Write;

use lnc_diag::Span;

use crate::ast::{Expr, ExprKind, File, FunctionDef, Stmt, StmtKind};

/// Dumps every function of `file`, separated by blank lines.
pub fn dump_file(file: &File) -> String {
    let dumps: Vec<String> = file.functions.iter().map(dump_function).collect();
    dumps.join("\n")
}

/// Dumps one function.
pub fn dump_function(f: &FunctionDef) -> String {
    let mut p = Printer { out: String::new() };
    p.line(0, "", &format!("FunctionDef {}", f.name.name), f.span);
    for d in &f.decorators {
        p.line(1, "", &format!("decorator {}", d.name), d.span);
    }
    for param in &f.params {
        p.line(1, "", &format!("param {}", param.name.name), param.span);
        if let Some(a) = &param.annotation {
            p.expr(2, "annotation: ", a);
        }
        if let Some(d) = &param.default {
            p.expr(2, "default: ", d);
        }
    }
    p.block(1, "body:", &f.body);
    p.out
}

struct Printer {
    out: String,
}

impl Printer {
    fn line(&mut self, depth: usize, role: &str, text: &str, span: Span) {
        let _ = writeln!(
            self.out,
            "{:indent$}{role}{text} [{}..{}]",
            "",
            span.start,
            span.end,
            indent = depth * 2
        );
    }

    fn label(&mut self, depth: usize, text: &str) {
        let _ = writeln!(self.out, "{:indent$}{text}", "", indent = depth * 2);
    }

    fn block(&mut self, depth: usize, label: &str, stmts: &[Stmt]) {
        self.label(depth, label);
        for s in stmts {
            self.stmt(depth + 1, s);
        }
    }

    fn stmt(&mut self, d: usize, s: &Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => {
                self.line(d, "", "ExprStmt", s.span);
                self.expr(d + 1, "value: ", e);
            }
            StmtKind::Assign { targets, value } => {
                self.line(d, "", "Assign", s.span);
                for t in targets {
                    self.expr(d + 1, "target: ", t);
                }
                self.expr(d + 1, "value: ", value);
            }
            StmtKind::AugAssign { target, op, value } => {
                self.line(d, "", &format!("AugAssign {}=", op.as_str()), s.span);
                self.expr(d + 1, "target: ", target);
                self.expr(d + 1, "value: ", value);
            }
            StmtKind::AnnAssign { target, annotation, value } => {
                self.line(d, "", "AnnAssign", s.span);
                self.expr(d + 1, "target: ", target);
                self.expr(d + 1, "annotation: ", annotation);
                if let Some(v) = value {
                    self.expr(d + 1, "value: ", v);
                }
            }
            StmtKind::If { cond, body, orelse } => {
                self.line(d, "", "If", s.span);
                self.expr(d + 1, "cond: ", cond);
                self.block(d + 1, "then:", body);
                if !orelse.is_empty() {
                    self.block(d + 1, "else:", orelse);
                }
            }
            StmtKind::For { target, iter, body, orelse } => {
                self.line(d, "", "For", s.span);
                self.expr(d + 1, "target: ", target);
                self.expr(d + 1, "iter: ", iter);
                self.block(d + 1, "body:", body);
                if !orelse.is_empty() {
                    self.block(d + 1, "else:", orelse);
                }
            }
            StmtKind::While { cond, body, orelse } => {
                self.line(d, "", "While", s.span);
                self.expr(d + 1, "cond: ", cond);
                self.block(d + 1, "body:", body);
                if !orelse.is_empty() {
                    self.block(d + 1, "else:", orelse);
                }
            }
            StmtKind::Pass => self.line(d, "", "Pass", s.span),
            StmtKind::Break => self.line(d, "", "Break", s.span),
            StmtKind::Continue => self.line(d, "", "Continue", s.span),
            StmtKind::Return(v) => {
                self.line(d, "", "Return", s.span);
                if let Some(v) = v {
                    self.expr(d + 1, "value: ", v);
                }
            }
            StmtKind::Assert { test, msg } => {
                self.line(d, "", "Assert", s.span);
                self.expr(d + 1, "test: ", test);
                if let Some(m) = msg {
                    self.expr(d + 1, "msg: ", m);
                }
            }
            StmtKind::Unsupported(what) => {
                self.line(d, "", &format!("Unsupported({what})"), s.span);
            }
        }
    }

    fn expr(&mut self, d: usize, role: &str, e: &Expr) {
        let span = e.span;
        match &e.kind {
            ExprKind::Name(n) => self.line(d, role, &format!("Name {n}"), span),
            ExprKind::Int(v) => self.line(d, role, &format!("Int {v}"), span),
            ExprKind::Float(v) => self.line(d, role, &format!("Float {v:?}"), span),
            ExprKind::Str(s) => self.line(d, role, &format!("Str {s:?}"), span),
            ExprKind::Bool(b) => {
                self.line(d, role, if *b { "Bool True" } else { "Bool False" }, span);
            }
            ExprKind::None => self.line(d, role, "None", span),
            ExprKind::Attribute { value, attr } => {
                self.line(d, role, &format!("Attribute .{}", attr.name), span);
                self.expr(d + 1, "value: ", value);
            }
            ExprKind::Call { func, args, kwargs } => {
                self.line(d, role, "Call", span);
                self.expr(d + 1, "func: ", func);
                for a in args {
                    self.expr(d + 1, "arg: ", a);
                }
                for (k, v) in kwargs {
                    self.expr(d + 1, &format!("kwarg {}: ", k.name), v);
                }
            }
            ExprKind::Subscript { value, items } => {
                self.line(d, role, "Subscript", span);
                self.expr(d + 1, "value: ", value);
                for i in items {
                    self.expr(d + 1, "index: ", i);
                }
            }
            ExprKind::Slice { lower, upper, step } => {
                self.line(d, role, "Slice", span);
                for (name, part) in [("lower: ", lower), ("upper: ", upper), ("step: ", step)] {
                    if let Some(p) = part {
                        self.expr(d + 1, name, p);
                    }
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                self.line(d, role, &format!("Binary {}", op.as_str()), span);
                self.expr(d + 1, "lhs: ", lhs);
                self.expr(d + 1, "rhs: ", rhs);
            }
            ExprKind::Unary { op, operand } => {
                self.line(d, role, &format!("Unary {}", op.as_str()), span);
                self.expr(d + 1, "operand: ", operand);
            }
            ExprKind::Compare { first, ops, rest } => {
                let ops: Vec<&str> = ops.iter().map(|o| o.as_str()).collect();
                self.line(d, role, &format!("Compare {}", ops.join(", ")), span);
                self.expr(d + 1, "operand: ", first);
                for r in rest {
                    self.expr(d + 1, "operand: ", r);
                }
            }
            ExprKind::BoolOp { op, values } => {
                self.line(d, role, &format!("BoolOp {}", op.as_str()), span);
                for v in values {
                    self.expr(d + 1, "operand: ", v);
                }
            }
            ExprKind::IfExp { cond, then, orelse } => {
                self.line(d, role, "IfExp", span);
                self.expr(d + 1, "cond: ", cond);
                self.expr(d + 1, "then: ", then);
                self.expr(d + 1, "else: ", orelse);
            }
            ExprKind::Tuple(elts) => {
                self.line(d, role, "Tuple", span);
                for e in elts {
                    self.expr(d + 1, "elt: ", e);
                }
            }
            ExprKind::List(elts) => {
                self.line(d, role, "List", span);
                for e in elts {
                    self.expr(d + 1, "elt: ", e);
                }
            }
            ExprKind::Unsupported(what) => {
                self.line(d, role, &format!("Unsupported({what})"), span);
            }
        }
    }
}
