//! Scalars: rank-0 block-IR instructions become the same scalar loop-IR instructions.
//!
//! `ptr_add(p, o) => ptr_add(p, o)`, remembering `(p, o)` so that a scalar access through
//! it addresses `p[o]` directly; `load(p) => load.scalar base[offset]` with the access's
//! site. Everything else maps one to one.

use lnc_bir as bir;
use lnc_lir as lir;

use crate::TileError;
use crate::fusion::Lowerer;

impl Lowerer<'_> {
    /// The loop-IR value of a scalar block-IR value already lowered.
    pub(crate) fn scalar(&self, v: bir::Value) -> lir::Value {
        match self.scalars.get(&v) {
            Some(&s) => s,
            None => panic!("scalar {v} used before it was lowered (a tiling bug)"),
        }
    }

    /// `(base, offset)` addressing of a scalar pointer.
    pub(crate) fn scalar_address(&mut self, p: bir::Value) -> (lir::Value, lir::Value) {
        if let Some(&parts) = self.ptr_parts.get(&p) {
            return parts;
        }
        let zero = self.iconst(lir::DType::I32, 0);
        (self.scalar(p), zero)
    }

    pub(crate) fn site(&mut self, i: bir::Inst, ptr: bir::Value) -> u32 {
        let arg = self.prov.root(ptr);
        self.b.func.add_site(lir::Site { span: self.bf.span(i), arg })
    }

    /// Lowers a scalar instruction in place.
    pub(crate) fn scalar_inst(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        self.span = bf.span(i);
        let args: Vec<lir::Value> = data.args.iter().map(|&a| self.scalar(a)).collect();
        let result_ty = match data.results.first() {
            Some(&r) => Some(self.scalar_ty(r, Some(i))?),
            None => None,
        };
        let ty = || result_ty.expect("value-producing instruction");
        let v = match data.opcode {
            bir::Opcode::Const(c) => {
                let d = ty().dtype();
                self.constant(d, c)
            }
            bir::Opcode::ProgramId(a) => self.ins(lir::Opcode::ProgramId(a), vec![], ty()),
            bir::Opcode::NumPrograms(a) => self.ins(lir::Opcode::NumPrograms(a), vec![], ty()),
            bir::Opcode::Binary(op) => self.sbin(op, args[0], args[1]),
            bir::Opcode::Cmp(op) => self.ins(lir::Opcode::Cmp(op), args, ty()),
            bir::Opcode::Unary(op) => self.ins(lir::Opcode::Unary(op), args, ty()),
            bir::Opcode::Select => self.ins(lir::Opcode::Select, args, ty()),
            bir::Opcode::Fma => self.ins(lir::Opcode::Fma, args, ty()),
            bir::Opcode::Cast => self.cast(args[0], ty()),
            bir::Opcode::Bitcast => self.ins(lir::Opcode::Bitcast, args, ty()),
            bir::Opcode::PtrAdd => {
                let v = self.ins(lir::Opcode::PtrAdd, args.clone(), ty());
                self.ptr_parts.insert(data.results[0], (args[0], args[1]));
                v
            }
            bir::Opcode::Load { has_mask, has_other, volatile } => {
                let (base, off) = self.scalar_address(data.args[0]);
                let site = self.site(i, data.args[0]);
                let mut a = vec![base, off];
                a.extend(&args[1..]);
                let op =
                    lir::Opcode::Load { addr: lir::Addressing::Scalar, has_mask, has_other, site, volatile };
                self.ins(op, a, ty())
            }
            bir::Opcode::Store { has_mask, check_only } => {
                let (base, off) = self.scalar_address(data.args[0]);
                let site = self.site(i, data.args[0]);
                let mut a = vec![base, off];
                a.extend(&args[1..]);
                let op = lir::Opcode::Store {
                    addr: lir::Addressing::Scalar,
                    has_mask,
                    site,
                    stream: false,
                    check_only,
                };
                self.ins_effect(op, a);
                return Ok(());
            }
            bir::Opcode::Atomic { op, has_mask } => {
                let (base, off) = self.scalar_address(data.args[0]);
                let site = self.site(i, data.args[0]);
                let mut a = vec![base, off];
                a.extend(&args[1..]);
                let op = lir::Opcode::Atomic { op, addr: lir::Addressing::Scalar, has_mask, site };
                self.ins(op, a, ty())
            }
            bir::Opcode::AtomicCas => {
                let (base, off) = self.scalar_address(data.args[0]);
                let site = self.site(i, data.args[0]);
                let mut a = vec![base, off];
                a.extend(&args[1..]);
                let op = lir::Opcode::AtomicCas { addr: lir::Addressing::Scalar, site };
                self.ins(op, a, ty())
            }
            bir::Opcode::Assert => {
                let site = self.assert_site(i);
                self.ins_effect(lir::Opcode::Assert { site }, args);
                return Ok(());
            }
            bir::Opcode::Print(k) => {
                self.ins_effect(lir::Opcode::Print(k), args);
                return Ok(());
            }
            _ => {
                return Err(self.err(i, format!("`{}` on scalars cannot be lowered", data.opcode.mnemonic())));
            }
        };
        self.scalars.insert(data.results[0], v);
        Ok(())
    }

    /// A site for an assert: its span; no argument is involved.
    pub(crate) fn assert_site(&mut self, i: bir::Inst) -> u32 {
        self.b.func.add_site(lir::Site { span: self.bf.span(i), arg: u32::MAX })
    }
}
