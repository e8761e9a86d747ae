//! Runtime control flow: `if`, conditional expressions, `for` and `while`.
//!
//! The block IR's control flow is structured (`if`/`for`/`while` own regions that `yield`
//! values), while Python's is not: a branch or a loop body just reassigns variables. The
//! bridge is a *merge plan* per variable: after lowering both branches of an `if`, every
//! variable assigned in them that is visible afterwards is compared across the branches;
//! those that differ become results of the `if`, yielded by each branch after conversion
//! to a common type (weakly typed constants adapt to the other side's type).
//!
//! Loops need the plan *before* their body is lowered, since the carried values are region
//! arguments the body reads. The body is therefore lowered once as a dry run, into a region
//! that is thrown away afterwards (the function is restored to its state before), to learn
//! which variables it changes and to what types; the dry run repeats, with the carried
//! variables bound to placeholders, until the plan stops changing. Then the body is lowered
//! for real with the carried variables bound to region arguments.

use lnc_bir::{Elem, Inst, InstData, Opcode, Region, Type, Value, ValueData};
use lnc_diag::{Diagnostic, Span};
use lnc_syntax::ast::{Expr, ExprKind, Stmt};

use cranelift_entity::{PrimaryMap, SecondaryMap};

use crate::args::CallArgs;
use crate::builtins::{Builtin, RangeKind};
use crate::diag::type_str;
use crate::lower::{Env, Failed, Flow, Lowerer, R, assigned_names};
use crate::promote::{computation_type, integer_promote};
use crate::value::{Callee, Cv, Opnd, Undef, Val, same};

/// How one variable comes out of a construct with several paths.
#[derive(Clone, Debug)]
pub(crate) enum Merge {
    /// The same on every path: nothing to yield.
    Same(Val),
    /// A runtime value of this type: one result.
    Leaf(Type),
    /// A tuple, element by element.
    Tuple(Vec<Merge>),
}

/// Where a merge happens, for the wording of type mismatches.
#[derive(Clone, Copy)]
pub(crate) enum MergeCtx {
    If,
    IfExp,
    Return,
    Loop,
}

/// The function's maps, saved before a dry run and restored after it.
struct Snapshot {
    values: PrimaryMap<Value, ValueData>,
    insts: PrimaryMap<Inst, InstData>,
    spans: SecondaryMap<Inst, Span>,
    strings: usize,
}

/// Bounds on loop-body dry runs (each run of an outer loop lowers its inner loops again).
const MAX_DRY_RUNS: usize = 8;
/// Bound on the iterations of an unrolled `tl.static_range`.
const MAX_UNROLL: i128 = 1 << 16;

fn merge_leaves(m: &Merge, out: &mut Vec<Type>) {
    match m {
        Merge::Same(_) => {}
        Merge::Leaf(t) => out.push(*t),
        Merge::Tuple(ms) => ms.iter().for_each(|m| merge_leaves(m, out)),
    }
}

fn merge_eq(a: &Merge, b: &Merge) -> bool {
    match (a, b) {
        (Merge::Same(x), Merge::Same(y)) => same(x, y),
        (Merge::Leaf(x), Merge::Leaf(y)) => x == y,
        (Merge::Tuple(x), Merge::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| merge_eq(a, b))
        }
        _ => false,
    }
}

/// The value a plan gives, taking one of `vals` for each leaf.
fn rebuild(m: &Merge, vals: &mut impl Iterator<Item = Value>) -> Val {
    match m {
        Merge::Same(v) => v.clone(),
        Merge::Leaf(_) => vals.next().map_or(Val::Undef(Undef::Silent), Val::Tensor),
        Merge::Tuple(ms) => Val::tuple(ms.iter().map(|m| rebuild(m, vals)).collect()),
    }
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// Runs `f` with a new region on top of the builder's stack and returns that region.
    pub(crate) fn in_region<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> (Region, T) {
        self.b.begin_region();
        let t = f(self);
        (self.b.end_region(), t)
    }

    /// A scalar condition as `int1`.
    pub(crate) fn scalar_cond(&mut self, c: Value, span: Span, what: &str) -> R<Value> {
        let t = self.ty(c);
        if t.is_block() {
            let d = Diagnostic::error(
                format!("the condition of `{what}` must be a scalar, got a block of type {}", type_str(t)),
                span,
                "a block",
            )
            .with_help(
                "use `tl.where(cond, a, b)` to choose per element, or reduce the block first (e.g. `tl.max(x, 0) > 0`)",
            );
            return self.fail(d);
        }
        if t.elem.is_ptr() {
            let d = Diagnostic::error("a pointer cannot be used as a condition", span, "");
            return self.fail(d);
        }
        Ok(self.truth_value(c, span))
    }

    /// How a variable with value `a` on one path and `b` on another comes out.
    pub(crate) fn merge(&mut self, ctx: MergeCtx, name: &str, a: &Val, b: &Val, span: Span) -> R<Merge> {
        if same(a, b) {
            return Ok(Merge::Same(a.clone()));
        }
        match (a, b) {
            (Val::Undef(x), Val::Undef(y)) if *x == Undef::Silent || *y == Undef::Silent => {
                Ok(Merge::Same(Val::Undef(Undef::Silent)))
            }
            (Val::Undef(u), _) | (_, Val::Undef(u)) => Ok(Merge::Same(Val::Undef(*u))),
            (Val::Tensor(x), Val::Tensor(y)) => {
                let (tx, ty) = (self.ty(*x), self.ty(*y));
                if tx == ty {
                    return Ok(Merge::Leaf(tx));
                }
                // An assigned number adapts to the other side's type, as the Python number
                // it was assigned from did (an lnc extension: Triton requires equal types).
                match (self.known_scalar(*x), self.known_scalar(*y)) {
                    (Some((dx, _)), Some((dy, _))) => match computation_type(dx, false, dy, false, false) {
                        Ok(d) => Ok(Merge::Leaf(Type::scalar(d))),
                        Err(_) => self.mismatch(ctx, name, a, b, span),
                    },
                    (Some(_), None) if !ty.elem.is_ptr() => Ok(Merge::Leaf(ty)),
                    (None, Some(_)) if !tx.elem.is_ptr() => Ok(Merge::Leaf(tx)),
                    _ => self.mismatch(ctx, name, a, b, span),
                }
            }
            (Val::Tensor(x), Val::Const(c)) | (Val::Const(c), Val::Tensor(x)) => {
                let t = self.ty(*x);
                if c.is_number() && !t.elem.is_ptr() {
                    Ok(Merge::Leaf(t))
                } else {
                    self.mismatch(ctx, name, a, b, span)
                }
            }
            (Val::Const(x), Val::Const(y)) if x.is_number() && y.is_number() => {
                let dx = self.literal_dtype(x, span)?;
                let dy = self.literal_dtype(y, span)?;
                match computation_type(dx, false, dy, false, false) {
                    Ok(d) => Ok(Merge::Leaf(Type::scalar(d))),
                    Err(_) => self.mismatch(ctx, name, a, b, span),
                }
            }
            (Val::Tuple(x), Val::Tuple(y)) if x.len() == y.len() => {
                let mut ms = Vec::with_capacity(x.len());
                for (p, q) in x.iter().zip(y.iter()) {
                    ms.push(self.merge(ctx, name, p, q, span)?);
                }
                Ok(Merge::Tuple(ms))
            }
            _ => self.mismatch(ctx, name, a, b, span),
        }
    }

    /// How a value is named in a mismatch: runtime values by their type.
    fn merge_desc(&self, v: &Val) -> String {
        match v {
            Val::Tensor(x) => type_str(self.ty(*x)),
            Val::Const(c) => crate::diag::cv_str(c),
            other => self.describe(other),
        }
    }

    fn mismatch<T>(&mut self, ctx: MergeCtx, name: &str, a: &Val, b: &Val, span: Span) -> R<T> {
        let (da, db) = (self.merge_desc(a), self.merge_desc(b));
        self.mismatch_desc(ctx, name, &da, &db, span)
    }

    fn mismatch_desc<T>(&mut self, ctx: MergeCtx, name: &str, da: &str, db: &str, span: Span) -> R<T> {
        let d = match ctx {
            MergeCtx::If => Diagnostic::error(
                format!("`{name}` is {da} in one branch of this `if` and {db} in the other"),
                span,
                "branches disagree",
            )
            .with_help(
                "give the variable the same type in both branches, converting with `.to(...)` if needed",
            ),
            MergeCtx::IfExp => Diagnostic::error(
                format!("the branches of this conditional expression are {da} and {db}"),
                span,
                "branches disagree",
            )
            .with_help("convert one side with `.to(...)`"),
            MergeCtx::Return => Diagnostic::error(
                format!("this function returns {da} on one path and {db} on another"),
                span,
                "paths disagree",
            )
            .with_help("return values of the same type on every path"),
            MergeCtx::Loop => Diagnostic::error(
                format!("loop-carried variable `{name}` is {da} before the loop but becomes {db} in it"),
                span,
                "in this loop",
            )
            .with_help(
                "a variable carried through a loop must keep its type: initialize it with the final type, \
                 e.g. `tl.zeros([BLOCK], dtype=tl.float32)`, or convert inside the loop with `.to(...)`",
            ),
        };
        self.fail(d)
    }

    /// `v` as a runtime value of type `t`: itself when it has that type, a constant for a
    /// weakly typed number or a known scalar.
    fn coerce(&mut self, v: &Val, t: Type, span: Span) -> Option<Value> {
        match v {
            Val::Tensor(x) if self.ty(*x) == t => Some(*x),
            Val::Tensor(x) if self.is_known(*x) => {
                let Elem::Scalar(d) = t.elem else { return None };
                let s = self.cast(*x, d, span);
                Some(self.splat(s, t.shape, span))
            }
            Val::Const(c) if c.is_number() => {
                let Elem::Scalar(d) = t.elem else { return None };
                let s = self.const_of(c, d, span);
                Some(self.splat(s, t.shape, span))
            }
            _ => None,
        }
    }

    /// The values of `v` for the leaves of plan `m`, in order.
    fn leaf_values(
        &mut self,
        ctx: MergeCtx,
        name: &str,
        m: &Merge,
        v: &Val,
        span: Span,
        out: &mut Vec<Value>,
    ) -> R<()> {
        match (m, v) {
            (_, Val::Undef(_)) => Err(Failed),
            (Merge::Same(s), v) => {
                if same(s, v) {
                    Ok(())
                } else {
                    self.mismatch(ctx, name, s, v, span)
                }
            }
            (Merge::Leaf(t), v) => match self.coerce(v, *t, span) {
                Some(x) => {
                    out.push(x);
                    Ok(())
                }
                None => {
                    let dv = self.merge_desc(v);
                    self.mismatch_desc(ctx, name, &type_str(*t), &dv, span)
                }
            },
            (Merge::Tuple(ms), Val::Tuple(vals)) if ms.len() == vals.len() => {
                for (m, v) in ms.iter().zip(vals.iter()) {
                    self.leaf_values(ctx, name, m, v, span, out)?;
                }
                Ok(())
            }
            (_, v) => {
                let s = Val::tuple(Vec::new());
                self.mismatch(ctx, name, &s, v, span)
            }
        }
    }

    /// Appends, at the end of `region`, the conversions of `plan`'s variables as found in
    /// `env` and the `yield` of them.
    fn append_yield(
        &mut self,
        region: &mut Region,
        ctx: MergeCtx,
        plan: &[(String, Merge)],
        values: &[Val],
        span: Span,
    ) -> R<()> {
        let (tail, res) = self.in_region(|me| {
            let mut out = Vec::new();
            let mut res = Ok(());
            for ((name, m), v) in plan.iter().zip(values) {
                if let Err(e) = me.leaf_values(ctx, name, m, v, span, &mut out) {
                    res = Err(e);
                }
            }
            me.b.inst(Opcode::Yield, out, &[], span);
            res
        });
        region.insts.extend(tail.insts);
        res
    }

    /// A runtime `if` none of whose branches returns.
    pub(crate) fn runtime_if(
        &mut self,
        s: &'a Stmt,
        cond: Value,
        cspan: Span,
        body: &'a [Stmt],
        orelse: &'a [Stmt],
    ) -> R<()> {
        let c = self.scalar_cond(cond, cspan, "if")?;
        let before = self.env.clone();
        let body_refs: Vec<&'a Stmt> = body.iter().collect();
        let else_refs: Vec<&'a Stmt> = orelse.iter().collect();
        let (mut r_then, _) = self.in_region(|me| me.block(&body_refs, false));
        let env_then = std::mem::replace(&mut self.env, before.clone());
        let (mut r_else, _) = self.in_region(|me| me.block(&else_refs, false));
        let env_else = std::mem::replace(&mut self.env, before);
        let mut plan = Vec::new();
        let mut then_vals = Vec::new();
        let mut else_vals = Vec::new();
        for name in assigned_names(&[s]) {
            match (env_then.get(&name), env_else.get(&name)) {
                (Some(a), Some(b)) => match self.merge(MergeCtx::If, &name, a, b, s.span) {
                    Ok(m) => {
                        then_vals.push(a.clone());
                        else_vals.push(b.clone());
                        plan.push((name, m));
                    }
                    Err(Failed) => {
                        self.env.insert(name, Val::Undef(Undef::Silent));
                    }
                },
                (Some(_), None) | (None, Some(_)) => {
                    self.env.insert(name, Val::Undef(Undef::BranchOnly(s.span)));
                }
                (None, None) => {}
            }
        }
        let r1 = self.append_yield(&mut r_then, MergeCtx::If, &plan, &then_vals, s.span);
        let r2 = self.append_yield(&mut r_else, MergeCtx::If, &plan, &else_vals, s.span);
        let results = self.emit_if(c, r_then, r_else, &plan, s.span);
        let mut it = results.into_iter();
        for (name, m) in &plan {
            let v = rebuild(m, &mut it);
            self.env.insert(name.clone(), v);
        }
        r1.and(r2)
    }

    fn emit_if(
        &mut self,
        c: Value,
        then: Region,
        orelse: Region,
        plan: &[(String, Merge)],
        span: Span,
    ) -> Vec<Value> {
        let mut types = Vec::new();
        for (_, m) in plan {
            merge_leaves(m, &mut types);
        }
        let inst = self.b.inst(Opcode::If, vec![c], &types, span);
        self.b.set_regions(inst, vec![then, orelse]);
        self.b.func.insts[inst].results.clone()
    }

    /// A runtime `if` (in a function's tail) with a `return` in a branch: each branch
    /// takes the rest of the function with it, and the `if` yields the returned value.
    pub(crate) fn returning_if(
        &mut self,
        s: &'a Stmt,
        cond: Value,
        cspan: Span,
        body: &'a [Stmt],
        orelse: &'a [Stmt],
        rest: &[&'a Stmt],
    ) -> Flow {
        let Ok(c) = self.scalar_cond(cond, cspan, "if") else {
            return Flow::Return(Val::Undef(Undef::Silent), s.span);
        };
        let before = self.env.clone();
        let mut then_seq: Vec<&'a Stmt> = body.iter().collect();
        then_seq.extend_from_slice(rest);
        let mut else_seq: Vec<&'a Stmt> = orelse.iter().collect();
        else_seq.extend_from_slice(rest);
        let (mut r_then, f1) = self.in_region(|me| me.block(&then_seq, true));
        self.env = before.clone();
        let (mut r_else, f2) = self.in_region(|me| me.block(&else_seq, true));
        self.env = before;
        let (Flow::Return(a, _), Flow::Return(b, _)) = (f1, f2) else {
            return Flow::Return(Val::Undef(Undef::Silent), s.span);
        };
        let plan = match self.merge(MergeCtx::Return, "", &a, &b, s.span) {
            Ok(m) => vec![(String::new(), m)],
            Err(Failed) => return Flow::Return(Val::Undef(Undef::Silent), s.span),
        };
        let r1 = self.append_yield(&mut r_then, MergeCtx::Return, &plan, &[a], s.span);
        let r2 = self.append_yield(&mut r_else, MergeCtx::Return, &plan, &[b], s.span);
        let results = self.emit_if(c, r_then, r_else, &plan, s.span);
        if r1.is_err() || r2.is_err() {
            return Flow::Return(Val::Undef(Undef::Silent), s.span);
        }
        Flow::Return(rebuild(&plan[0].1, &mut results.into_iter()), s.span)
    }

    /// `then if cond else orelse`.
    pub(crate) fn if_exp(&mut self, cond: &'a Expr, then: &'a Expr, orelse: &'a Expr, span: Span) -> R<Val> {
        let c = self.expr(cond)?;
        let c = self.static_view(&c);
        let Val::Tensor(cv) = c else {
            return if self.truthy(&c, cond.span)? { self.expr(then) } else { self.expr(orelse) };
        };
        let c = self.scalar_cond(cv, cond.span, "... if ... else ...")?;
        let (mut r_then, a) = self.in_region(|me| me.expr(then));
        let (mut r_else, b) = self.in_region(|me| me.expr(orelse));
        let (a, b) = (a?, b?);
        let m = self.merge(MergeCtx::IfExp, "", &a, &b, span)?;
        let plan = vec![(String::new(), m)];
        let r1 = self.append_yield(&mut r_then, MergeCtx::IfExp, &plan, &[a], span);
        let r2 = self.append_yield(&mut r_else, MergeCtx::IfExp, &plan, &[b], span);
        let results = self.emit_if(c, r_then, r_else, &plan, span);
        r1?;
        r2?;
        Ok(rebuild(&plan[0].1, &mut results.into_iter()))
    }

    fn snapshot(&self) -> Snapshot {
        let f = &*self.b.func;
        Snapshot {
            values: f.values.clone(),
            insts: f.insts.clone(),
            spans: f.spans.clone(),
            strings: f.strings.len(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        let f = &mut *self.b.func;
        f.values = s.values;
        f.insts = s.insts;
        f.spans = s.spans;
        f.strings.truncate(s.strings);
        self.prune_known();
    }

    /// A value standing for plan `m` during a dry run.
    fn placeholder(&mut self, m: &Merge, span: Span) -> Val {
        match m {
            Merge::Same(v) => v.clone(),
            Merge::Leaf(t) => Val::Tensor(self.placeholder_value(*t, span)),
            Merge::Tuple(ms) => Val::tuple(ms.iter().map(|m| self.placeholder(m, span)).collect()),
        }
    }

    /// Finds the variables a loop body carries: those that exist before the loop and whose
    /// value the body changes, with their types. `target` is the induction variable.
    fn carried(
        &mut self,
        body: &'a [Stmt],
        target: Option<(&str, Type)>,
        span: Span,
    ) -> R<Vec<(String, Merge)>> {
        let refs: Vec<&'a Stmt> = body.iter().collect();
        let before = self.env.clone();
        let names: Vec<String> = assigned_names(&refs)
            .into_iter()
            .filter(|n| target.is_none_or(|(t, _)| t != n))
            .filter(|n| matches!(before.get(n), Some(v) if !matches!(v, Val::Undef(_))))
            .collect();
        let mut plan: Vec<(String, Merge)> = Vec::new();
        for _ in 0..MAX_DRY_RUNS {
            let snap = self.snapshot();
            let ndiags = self.diags.len();
            let (_, (bound, after)) = self.in_region(|me| {
                let mut bound: Env = before.clone();
                for (n, m) in &plan {
                    let ph = me.placeholder(m, span);
                    bound.insert(n.clone(), ph);
                }
                if let Some((t, ty)) = target {
                    let iv = me.placeholder_value(ty, span);
                    bound.insert(t.to_string(), Val::Tensor(iv));
                }
                me.env = bound.clone();
                me.block(&refs, false);
                (bound, std::mem::replace(&mut me.env, before.clone()))
            });
            if self.diags.len() > ndiags {
                self.restore(snap);
                return Err(Failed);
            }
            let mut next: Vec<(String, Merge)> = Vec::new();
            let mut res = Ok(());
            for n in &names {
                let (Some(init), Some(b), Some(now)) = (before.get(n), bound.get(n), after.get(n)) else {
                    continue;
                };
                let prev = plan.iter().find(|(p, _)| p == n).map(|(_, m)| m.clone());
                if same(b, now) {
                    if let Some(m) = prev {
                        next.push((n.clone(), m));
                    }
                    continue;
                }
                match self.merge(MergeCtx::Loop, n, init, now, span) {
                    Ok(m) => next.push((n.clone(), m)),
                    Err(e) => res = Err(e),
                }
            }
            self.restore(snap);
            res?;
            let stable = next.len() == plan.len()
                && next.iter().zip(&plan).all(|((a, x), (b, y))| a == b && merge_eq(x, y));
            if stable {
                return Ok(plan);
            }
            plan = next;
        }
        let d = Diagnostic::error(
            "cannot determine the types of the variables carried by this loop",
            span,
            "in this loop",
        )
        .with_help("initialize loop-carried variables before the loop with their final type");
        self.fail(d)
    }

    /// The runtime initial values of a plan's variables.
    fn plan_values(
        &mut self,
        plan: &[(String, Merge)],
        env: &Env,
        ctx: MergeCtx,
        span: Span,
    ) -> R<Vec<Value>> {
        let mut out = Vec::new();
        for (n, m) in plan {
            let v = env.get(n).cloned().unwrap_or(Val::Undef(Undef::Silent));
            self.leaf_values(ctx, n, m, &v, span, &mut out)?;
        }
        Ok(out)
    }

    /// Binds a plan's variables to the values `vals` (one per leaf, in order).
    fn bind_plan(&mut self, plan: &[(String, Merge)], vals: Vec<Value>) {
        let mut it = vals.into_iter();
        for (n, m) in plan {
            let v = rebuild(m, &mut it);
            self.env.insert(n.clone(), v);
        }
    }

    /// After a loop: names first assigned in its body are not visible, nor is its variable.
    fn end_loop_scope(&mut self, before: &Env, body_env: &Env, target: Option<&str>, span: Span) {
        for n in body_env.keys() {
            if !before.contains_key(n) && !self.env.contains_key(n) {
                self.env.insert(n.clone(), Val::Undef(Undef::InLoop(span)));
            }
        }
        if let Some(t) = target {
            self.env.insert(t.to_string(), Val::Undef(Undef::LoopVar(span)));
        }
    }

    /// `for target in range(...) / tl.range(...) / tl.static_range(...)`.
    pub(crate) fn lower_for(
        &mut self,
        s: &'a Stmt,
        target: &'a Expr,
        iter: &'a Expr,
        body: &'a [Stmt],
        orelse: &'a [Stmt],
    ) -> R<()> {
        if let Some(e) = orelse.first() {
            let d = Diagnostic::error("`for ... else` is not supported", e.span, "this `else` clause")
                .with_help("move the `else` block after the loop");
            return self.fail(d);
        }
        let ExprKind::Name(tname) = &target.kind else {
            let d = Diagnostic::error("a loop variable must be a single name", target.span, "");
            return self.fail(d);
        };
        let not_range = |me: &mut Self| {
            let d = Diagnostic::error(
                "kernels can only loop over `range(...)`, `tl.range(...)` or `tl.static_range(...)`",
                iter.span,
                "not a range",
            )
            .with_help(
                "loop over indices, e.g. `for i in tl.static_range(3):` (unrolled), and pick the \
                 element inside",
            );
            me.fail::<()>(d)
        };
        let ExprKind::Call { func, args, kwargs } = &iter.kind else {
            return not_range(self);
        };
        let Val::Func(Callee::Builtin(Builtin::Range(kind))) = self.expr(func)? else {
            return not_range(self);
        };
        let mut pos = Vec::new();
        for a in args {
            pos.push(self.opnd(a)?);
        }
        let mut kw = Vec::new();
        for (n, a) in kwargs {
            kw.push((n.name.clone(), n.span, self.opnd(a)?));
        }
        let call = CallArgs { pos, kw, span: iter.span };
        let a = match kind {
            RangeKind::Python => self.bind("range", &["start", "stop", "step"], 1, call)?,
            RangeKind::Static => self.bind("tl.static_range", &["arg1", "arg2", "step"], 1, call)?,
            RangeKind::Tl => self.bind(
                "tl.range",
                &[
                    "arg1",
                    "arg2",
                    "step",
                    "num_stages",
                    "loop_unroll_factor",
                    "disallow_acc_multi_buffer",
                    "flatten",
                    "warp_specialize",
                ],
                1,
                call,
            )?,
        };
        let one = Opnd::new(Val::Const(Cv::Int(1)), iter.span);
        let zero = Opnd::new(Val::Const(Cv::Int(0)), iter.span);
        let a0 = a[0].clone().ok_or(Failed)?;
        let (start, end) = match crate::args::given(&a[1]) {
            Some(e) => (a0, e.clone()),
            None => (zero, a0),
        };
        let step = crate::args::given(&a[2]).cloned().unwrap_or(one);
        if kind == RangeKind::Static {
            return self.static_for(s, tname, start, end, step, body);
        }
        self.runtime_for(s, tname, start, end, step, body)
    }

    fn static_for(
        &mut self,
        s: &'a Stmt,
        tname: &str,
        start: Opnd,
        end: Opnd,
        step: Opnd,
        body: &'a [Stmt],
    ) -> R<()> {
        let what = "a bound of `tl.static_range`";
        let (lo, hi, st) =
            (self.const_int(&start, what)?, self.const_int(&end, what)?, self.const_int(&step, what)?);
        if st == 0 {
            let d = Diagnostic::error("the step of a range must not be zero", step.span, "");
            return self.fail(d);
        }
        // Python's `len(range(lo, hi, st))`, saturating: absurd counts are rejected below.
        let count = if st > 0 {
            hi.saturating_sub(lo).saturating_add(st - 1).max(0) / st
        } else {
            lo.saturating_sub(hi).saturating_sub(st + 1).max(0) / st.saturating_neg()
        };
        if count > MAX_UNROLL {
            let d = Diagnostic::error(
                format!("`tl.static_range` would unroll {count} iterations (at most {MAX_UNROLL})"),
                s.span,
                "",
            )
            .with_help("use `range(...)` for a runtime loop");
            return self.fail(d);
        }
        let refs: Vec<&'a Stmt> = body.iter().collect();
        for k in 0..count {
            self.env.insert(tname.to_string(), Val::Const(Cv::Int(lo + k * st)));
            self.block(&refs, false);
        }
        Ok(())
    }

    /// The dtype of a loop bound, which must be an integer scalar.
    fn bound_dtype(&mut self, o: &Opnd) -> R<lnc_bir::DType> {
        let d = match &o.v {
            Val::Const(c) if matches!(c, Cv::Int(_) | Cv::Bool(_)) => Some(self.literal_dtype(c, o.span)?),
            Val::Tensor(v) => {
                let t = self.ty(*v);
                t.num_dtype().filter(|d| d.is_int() && !t.is_block())
            }
            Val::Undef(_) => return Err(Failed),
            _ => None,
        };
        match d {
            Some(d) => Ok(d),
            None => {
                let what = match &o.v {
                    Val::Tensor(v) => type_str(self.ty(*v)),
                    other => self.describe(other),
                };
                let e = Diagnostic::error(
                    format!("range bounds must be integer scalars, got {what}"),
                    o.span,
                    "",
                );
                self.fail(e)
            }
        }
    }

    fn runtime_for(
        &mut self,
        s: &'a Stmt,
        tname: &str,
        start: Opnd,
        end: Opnd,
        step: Opnd,
        body: &'a [Stmt],
    ) -> R<()> {
        let (mut lo, mut hi, mut st) = (start, end, step);
        let mut negative = false;
        if let Val::Const(_) = self.static_view(&st.v) {
            let k = self.const_int(&st, "the step of a range")?;
            if k == 0 {
                let d = Diagnostic::error("the step of a range must not be zero", st.span, "");
                return self.fail(d);
            }
            // A constant negative step runs the mirrored ascending loop, as Triton does.
            if k < 0 {
                negative = true;
                st = Opnd::new(Val::Const(Cv::Int(-k)), st.span);
                std::mem::swap(&mut lo, &mut hi);
            }
        }
        let ivt = integer_promote(
            integer_promote(self.bound_dtype(&lo)?, self.bound_dtype(&hi)?),
            self.bound_dtype(&st)?,
        );
        let lb = self.materialize(&lo, ivt)?;
        let ub = self.materialize(&hi, ivt)?;
        let stv = self.materialize(&st, ivt)?;
        let iv_ty = Type::scalar(ivt);
        let plan = self.carried(body, Some((tname, iv_ty)), s.span)?;
        let before = self.env.clone();
        let inits = self.plan_values(&plan, &before, MergeCtx::Loop, s.span)?;
        let mut types = Vec::new();
        for (_, m) in &plan {
            merge_leaves(m, &mut types);
        }
        let mut args = vec![lb, ub, stv];
        args.extend(inits);
        let inst = self.b.inst(Opcode::For, args, &types, s.span);
        let refs: Vec<&'a Stmt> = body.iter().collect();
        let (region, res) = self.in_region(|me| {
            let iv = me.b.region_arg(inst, 0, iv_ty);
            let carried: Vec<Value> = types.iter().map(|t| me.b.region_arg(inst, 0, *t)).collect();
            me.bind_plan(&plan, carried);
            let iv = if negative {
                // iv = ub - iv' + lb, mapping 0, step, 2*step… back onto the descending range.
                let d = me.emit(Opcode::Binary(lnc_bir::BinOp::Sub), vec![ub, iv], iv_ty, s.span);
                me.emit(Opcode::Binary(lnc_bir::BinOp::Add), vec![d, lb], iv_ty, s.span)
            } else {
                iv
            };
            me.env.insert(tname.to_string(), Val::Tensor(iv));
            me.block(&refs, false);
            let env = me.env.clone();
            let res = me.plan_values(&plan, &env, MergeCtx::Loop, s.span);
            let yields = match &res {
                Ok(v) => v.clone(),
                Err(_) => Vec::new(),
            };
            me.b.inst(Opcode::Yield, yields, &[], s.span);
            (env, res.map(drop))
        });
        self.b.set_regions(inst, vec![region]);
        let (body_env, res) = res;
        self.env = before.clone();
        let results = self.b.func.insts[inst].results.clone();
        self.bind_plan(&plan, results);
        self.end_loop_scope(&before, &body_env, Some(tname), s.span);
        res
    }

    /// `while cond: body`.
    pub(crate) fn lower_while(
        &mut self,
        s: &'a Stmt,
        cond: &'a Expr,
        body: &'a [Stmt],
        orelse: &'a [Stmt],
    ) -> R<()> {
        if let Some(e) = orelse.first() {
            let d = Diagnostic::error("`while ... else` is not supported", e.span, "this `else` clause")
                .with_help("move the `else` block after the loop");
            return self.fail(d);
        }
        let plan = self.carried(body, None, s.span)?;
        let before = self.env.clone();
        let inits = self.plan_values(&plan, &before, MergeCtx::Loop, s.span)?;
        let mut types = Vec::new();
        for (_, m) in &plan {
            merge_leaves(m, &mut types);
        }
        let inst = self.b.inst(Opcode::While, inits, &types, s.span);
        let (r_cond, rc) = self.in_region(|me| {
            let args: Vec<Value> = types.iter().map(|t| me.b.region_arg(inst, 0, *t)).collect();
            me.bind_plan(&plan, args.clone());
            let flag = match me.expr(cond) {
                Ok(Val::Tensor(c)) => me.scalar_cond(c, cond.span, "while"),
                Ok(other) => me.as_bool(&Opnd::new(other, cond.span)),
                Err(e) => Err(e),
            };
            let flag = match flag {
                Ok(f) => f,
                Err(e) => {
                    // Keep the region well formed; the error is reported already.
                    let f = me.const_of(&Cv::Bool(false), lnc_bir::DType::I1, cond.span);
                    me.b.inst(Opcode::Condition, [vec![f], args].concat(), &[], cond.span);
                    return Err(e);
                }
            };
            me.b.inst(Opcode::Condition, [vec![flag], args].concat(), &[], cond.span);
            Ok(())
        });
        self.env = before.clone();
        let refs: Vec<&'a Stmt> = body.iter().collect();
        let (r_body, (body_env, rb)) = self.in_region(|me| {
            let args: Vec<Value> = types.iter().map(|t| me.b.region_arg(inst, 1, *t)).collect();
            me.bind_plan(&plan, args);
            me.block(&refs, false);
            let env = me.env.clone();
            let res = me.plan_values(&plan, &env, MergeCtx::Loop, s.span);
            let yields = match &res {
                Ok(v) => v.clone(),
                Err(_) => Vec::new(),
            };
            me.b.inst(Opcode::Yield, yields, &[], s.span);
            (env, res.map(drop))
        });
        self.b.set_regions(inst, vec![r_cond, r_body]);
        self.env = before.clone();
        let results = self.b.func.insts[inst].results.clone();
        self.bind_plan(&plan, results);
        self.end_loop_scope(&before, &body_env, None, s.span);
        rc.and(rb)
    }
}
