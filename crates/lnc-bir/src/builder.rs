//! A builder that appends instructions to a function, region by region.

use lnc_diag::Span;

use crate::ir::*;
use crate::types::*;

/// Appends instructions at the end of the region being built. Regions nest: `begin_region`
/// starts collecting into a new region, `end_region` returns it for the caller to attach.
pub struct Builder<'f> {
    /// The function being built.
    pub func: &'f mut Function,
    stack: Vec<Region>,
}

impl<'f> Builder<'f> {
    /// A builder appending to the function's body.
    pub fn new(func: &'f mut Function) -> Builder<'f> {
        let body = std::mem::take(&mut func.body);
        Builder { func, stack: vec![body] }
    }

    /// Appends an instruction and returns it.
    pub fn inst(&mut self, opcode: Opcode, args: Vec<Value>, result_types: &[Type], span: Span) -> Inst {
        let inst = self.func.create_inst(opcode, args, result_types, span);
        self.stack.last_mut().expect("builder has a region").insts.push(inst);
        inst
    }

    /// Appends an instruction with one result and returns that result.
    pub fn value(&mut self, opcode: Opcode, args: Vec<Value>, ty: Type, span: Span) -> Value {
        let inst = self.inst(opcode, args, &[ty], span);
        self.func.insts[inst].results[0]
    }

    /// A scalar constant of dtype `d`.
    pub fn const_int(&mut self, d: DType, v: i64, span: Span) -> Value {
        self.value(Opcode::Const(Const::Int(v)), vec![], Type::scalar(d), span)
    }

    /// A float constant of dtype `d`.
    pub fn const_float(&mut self, d: DType, v: f64, span: Span) -> Value {
        self.value(Opcode::Const(Const::Float(v)), vec![], Type::scalar(d), span)
    }

    /// Starts a new region; instructions go there until [`Builder::end_region`].
    pub fn begin_region(&mut self) {
        self.stack.push(Region::default());
    }

    /// Adds an argument to the region being built. `owner` and `region` name where the
    /// region will be attached.
    pub fn region_arg(&mut self, owner: Inst, region: u32, ty: Type) -> Value {
        let r = self.stack.last_mut().expect("builder has a region");
        let index = r.args.len() as u32;
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

    /// Adds a `device_print` prefix string and returns its index.
    pub fn string(&mut self, s: impl Into<String>) -> u32 {
        self.func.strings.push(s.into());
        (self.func.strings.len() - 1) as u32
    }

    /// Ends building: the top-level region goes back into the function.
    pub fn finish(mut self) {
        assert_eq!(self.stack.len(), 1, "unbalanced regions");
        self.func.body = self.stack.pop().expect("one region");
    }
}
