//! Building, running and printing functions for the pass tests.
#![allow(dead_code)]

use lnc_bir::print::print_function;
use lnc_bir::verify::verify;
use lnc_bir::*;
use lnc_diag::Span;

/// A thin layer over [`Builder`] that infers result types the way the verifier expects.
pub struct K<'f> {
    pub b: Builder<'f>,
}

pub fn f32s(n: u32) -> Type {
    Type::block(Elem::Scalar(DType::F32), Shape::d1(n))
}

pub fn i32s(n: u32) -> Type {
    Type::block(Elem::Scalar(DType::I32), Shape::d1(n))
}

/// Builds a function named `name` with the body written by `f`.
pub fn build(name: &str, f: impl FnOnce(&mut K)) -> Function {
    let mut func = Function::new(name);
    let mut k = K { b: Builder::new(&mut func) };
    f(&mut k);
    k.b.finish();
    func
}

impl K<'_> {
    pub fn param(&mut self, name: &str, ty: Type) -> Value {
        let slot = self.b.func.params.len() as u32;
        self.b.func.add_param(name, slot, ty)
    }

    pub fn ty(&self, v: Value) -> Type {
        self.b.func.ty(v)
    }

    pub fn op(&mut self, opcode: Opcode, args: &[Value], ty: Type) -> Value {
        self.b.value(opcode, args.to_vec(), ty, Span::DUMMY)
    }

    pub fn int(&mut self, d: DType, v: i64) -> Value {
        self.b.const_int(d, v, Span::DUMMY)
    }

    /// A float constant, rounded to `d` as constants must be.
    pub fn float(&mut self, d: DType, v: f64) -> Value {
        self.b.const_float(d, d.round_float(v), Span::DUMMY)
    }

    /// A pointer parameter and the block of pointers to its first `n` elements.
    pub fn block_param(&mut self, name: &str, d: DType, n: u32) -> Value {
        let p = self.param(name, Type::ptr(d));
        let ps = self.splat(p, n);
        let offs = self.arange(0, n as i64);
        self.ptr_add(ps, offs)
    }

    pub fn bin(&mut self, op: BinOp, a: Value, c: Value) -> Value {
        let ty = self.ty(a);
        self.op(Opcode::Binary(op), &[a, c], ty)
    }

    pub fn cmp(&mut self, op: CmpOp, a: Value, c: Value) -> Value {
        let ty = self.ty(a).with_elem(Elem::Scalar(DType::I1));
        self.op(Opcode::Cmp(op), &[a, c], ty)
    }

    pub fn un(&mut self, op: UnOp, a: Value) -> Value {
        let ty = self.ty(a);
        self.op(Opcode::Unary(op), &[a], ty)
    }

    pub fn select(&mut self, c: Value, a: Value, e: Value) -> Value {
        let ty = self.ty(a);
        self.op(Opcode::Select, &[c, a, e], ty)
    }

    pub fn cast(&mut self, a: Value, d: DType) -> Value {
        let ty = self.ty(a).with_elem(Elem::Scalar(d));
        self.op(Opcode::Cast, &[a], ty)
    }

    pub fn splat(&mut self, a: Value, n: u32) -> Value {
        let ty = self.ty(a).with_shape(Shape::d1(n));
        self.op(Opcode::Splat, &[a], ty)
    }

    pub fn arange(&mut self, start: i64, end: i64) -> Value {
        self.op(Opcode::Arange { start, end }, &[], i32s((end - start) as u32))
    }

    pub fn ptr_add(&mut self, p: Value, o: Value) -> Value {
        let ty = self.ty(p);
        self.op(Opcode::PtrAdd, &[p, o], ty)
    }

    pub fn load(&mut self, p: Value, mask: Option<Value>, other: Option<Value>) -> Value {
        let pty = self.ty(p);
        let ty = pty.with_elem(Elem::Scalar(pty.elem.dtype()));
        let mut args = vec![p];
        args.extend(mask);
        args.extend(other);
        let opcode = Opcode::Load { has_mask: mask.is_some(), has_other: other.is_some(), volatile: false };
        self.op(opcode, &args, ty)
    }

    pub fn store(&mut self, p: Value, v: Value, mask: Option<Value>) {
        let mut args = vec![p, v];
        args.extend(mask);
        self.effect(Opcode::Store { has_mask: mask.is_some(), check_only: false }, &args);
    }

    pub fn reduce(&mut self, op: ReduceOp, a: Value) -> Value {
        let ty = self.ty(a);
        let ty = ty.with_shape(ty.shape.remove_axis(0));
        self.op(Opcode::Reduce { op, axis: 0, keep_dims: false }, &[a], ty)
    }

    pub fn effect(&mut self, opcode: Opcode, args: &[Value]) -> Inst {
        self.b.inst(opcode, args.to_vec(), &[], Span::DUMMY)
    }

    /// `for iv in lb..ub step s` carrying `inits`; `body(k, iv, carried)` returns the
    /// values to yield. Returns the loop's results.
    pub fn for_loop(
        &mut self,
        lb: Value,
        ub: Value,
        step: Value,
        inits: &[Value],
        body: impl FnOnce(&mut K, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let mut args = vec![lb, ub, step];
        args.extend_from_slice(inits);
        let types: Vec<Type> = inits.iter().map(|&v| self.ty(v)).collect();
        let inst = self.b.inst(Opcode::For, args, &types, Span::DUMMY);
        self.b.begin_region();
        let iv_ty = self.ty(lb);
        let iv = self.b.region_arg(inst, 0, iv_ty);
        let carried: Vec<Value> = types.iter().map(|&t| self.b.region_arg(inst, 0, t)).collect();
        let next = body(self, iv, &carried);
        self.effect(Opcode::Yield, &next);
        let r = self.b.end_region();
        self.b.set_regions(inst, vec![r]);
        self.b.func.insts[inst].results.clone()
    }

    /// `if c { then } else { els }`, each branch returning the values it yields, of
    /// types `types`.
    pub fn if_else(
        &mut self,
        c: Value,
        types: &[Type],
        then: impl FnOnce(&mut K) -> Vec<Value>,
        els: impl FnOnce(&mut K) -> Vec<Value>,
    ) -> Vec<Value> {
        let inst = self.b.inst(Opcode::If, vec![c], types, Span::DUMMY);
        self.b.begin_region();
        let t = then(self);
        self.effect(Opcode::Yield, &t);
        let r0 = self.b.end_region();
        self.b.begin_region();
        let e = els(self);
        self.effect(Opcode::Yield, &e);
        let r1 = self.b.end_region();
        self.b.set_regions(inst, vec![r0, r1]);
        self.b.func.insts[inst].results.clone()
    }
}

/// Verifies `func`, panicking with the verifier's listing when it is invalid.
pub fn must_verify(func: &Function, when: &str) {
    if let Err(e) = verify(func) {
        panic!("invalid IR {when}:\n{e}");
    }
}

/// Runs pass `name` on a valid `func` and returns the input and output listings, the way
/// a file test shows them; the output must verify too.
pub fn run_printed(name: &str, func: &mut Function) -> String {
    must_verify(func, "before the pass");
    let before = print_function(func);
    let changed = lnc_opt::run_pass(name, func).expect("known pass");
    must_verify(func, &format!("after {name}"));
    format!("{before}\n// after {name} (changed: {changed})\n{}", print_function(func))
}

/// The constant `v` is defined as, if any.
pub fn const_of(func: &Function, v: Value) -> Option<Const> {
    match func.values[v].def {
        ValueDef::Result(i, _) => match func.insts[i].opcode {
            Opcode::Const(c) => Some(c),
            Opcode::Splat => const_of(func, func.insts[i].args[0]),
            _ => None,
        },
        _ => None,
    }
}

/// The value stored by the `n`-th store of the body.
pub fn stored(func: &Function, n: usize) -> Value {
    let stores: Vec<Inst> = func
        .live_insts()
        .into_iter()
        .filter(|&i| matches!(func.insts[i].opcode, Opcode::Store { .. }))
        .collect();
    func.insts[stores[n]].args[1]
}

/// How many live instructions have this mnemonic.
pub fn count(func: &Function, mnemonic: &str) -> usize {
    func.live_insts().into_iter().filter(|&i| func.insts[i].opcode.mnemonic() == mnemonic).count()
}
