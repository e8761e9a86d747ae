//! A builder that appends instructions to a loop-IR function, region by region.

use lnc_diag::Span;

use crate::ir::*;

/// Appends instructions at the end of the region being built. Regions nest:
/// [`Builder::begin_region`] starts collecting into a new region and
/// [`Builder::end_region`] returns it for the caller to attach to its owner.
///
/// The builder owns the function so that a lowering can keep it in a struct beside its
/// own state; [`Builder::finish`] gives it back.
pub struct Builder {
    /// The function being built (its body is held by the builder until `finish`).
    pub func: Function,
    stack: Vec<Region>,
    entry_len: usize,
}

impl Builder {
    /// A builder appending to `func`'s body.
    pub fn new(mut func: Function) -> Builder {
        let body = std::mem::take(&mut func.body);
        Builder { func, stack: vec![body], entry_len: 0 }
    }

    /// Appends an instruction and returns it.
    pub fn inst(&mut self, opcode: Opcode, args: Vec<Value>, result_types: &[Ty], span: Span) -> Inst {
        let inst = self.func.create_inst(opcode, args, result_types, span);
        self.stack.last_mut().expect("builder has a region").insts.push(inst);
        inst
    }

    /// Appends an instruction with one result and returns that result.
    pub fn value(&mut self, opcode: Opcode, args: Vec<Value>, ty: Ty, span: Span) -> Value {
        let inst = self.inst(opcode, args, &[ty], span);
        self.func.insts[inst].results[0]
    }

    /// Places an instruction with one result at the function's entry, after those placed
    /// there before, wherever the builder is: for values that depend on nothing
    /// (arguments, constants), so that one definition dominates every use.
    pub fn value_at_entry(&mut self, opcode: Opcode, args: Vec<Value>, ty: Ty, span: Span) -> Value {
        let inst = self.func.create_inst(opcode, args, &[ty], span);
        self.stack[0].insts.insert(self.entry_len, inst);
        self.entry_len += 1;
        self.func.insts[inst].results[0]
    }

    /// Appends an instruction without results.
    pub fn effect(&mut self, opcode: Opcode, args: Vec<Value>, span: Span) -> Inst {
        self.inst(opcode, args, &[], span)
    }

    /// A scalar constant of dtype `d`.
    pub fn const_int(&mut self, d: DType, v: i64, span: Span) -> Value {
        self.value(Opcode::Const(Const::Int(v)), vec![], Ty::Scalar(d), span)
    }

    /// A float constant of dtype `d`.
    pub fn const_float(&mut self, d: DType, v: f64, span: Span) -> Value {
        self.value(Opcode::Const(Const::Float(v)), vec![], Ty::Scalar(d), span)
    }

    /// Starts a new region; instructions go there until [`Builder::end_region`].
    pub fn begin_region(&mut self) {
        self.stack.push(Region::default());
    }

    /// Adds an argument to the region being built; `owner` and `region` name where the
    /// region will be attached.
    pub fn region_arg(&mut self, owner: Inst, region: u32, ty: Ty) -> Value {
        let index = self.stack.last().expect("builder has a region").args.len() as u32;
        let v = self.func.create_region_arg(owner, region, index, ty);
        self.stack.last_mut().expect("builder has a region").args.push(v);
        v
    }

    /// Ends the region being built and returns it.
    pub fn end_region(&mut self) -> Region {
        assert!(self.stack.len() > 1, "end_region without begin_region");
        self.stack.pop().expect("checked above")
    }

    /// Attaches regions to an instruction created with [`Builder::inst`].
    pub fn set_regions(&mut self, inst: Inst, regions: Vec<Region>) {
        self.func.insts[inst].regions = regions;
    }

    /// How many regions are open (1 at the body).
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Ends building and returns the function.
    pub fn finish(mut self) -> Function {
        assert_eq!(self.stack.len(), 1, "unbalanced regions");
        self.func.body = self.stack.pop().expect("one region");
        self.func
    }
}
