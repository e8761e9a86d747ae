//! A small builder of loop-IR functions and a harness that compiles and launches them.
#![allow(dead_code)]

use lnc_clif::{CodegenOptions, CompiledKernel, compile};
use lnc_diag::Span;
use lnc_lir::*;
use lnc_runtime::{Bounds, LaunchError, Programs, launch};

/// Builds a function region by region.
pub struct B {
    pub f: Function,
    /// Instructions of the regions being built, innermost last.
    stack: Vec<Vec<Inst>>,
}

impl B {
    pub fn new(name: &str) -> B {
        B { f: Function { name: name.into(), ..Function::default() }, stack: vec![Vec::new()] }
    }

    pub fn finish(mut self) -> Function {
        assert_eq!(self.stack.len(), 1);
        self.f.body.insts = self.stack.pop().unwrap();
        self.f
    }

    pub fn inst(&mut self, opcode: Opcode, args: &[Value], results: &[Ty]) -> Inst {
        let i = self.f.create_inst(opcode, args.to_vec(), results, Span::default());
        self.stack.last_mut().unwrap().push(i);
        i
    }

    pub fn val(&mut self, opcode: Opcode, args: &[Value], ty: Ty) -> Value {
        let i = self.inst(opcode, args, &[ty]);
        self.f.insts[i].results[0]
    }

    pub fn arg(&mut self, slot: u32, ty: Ty) -> Value {
        self.f.args.push(ArgInfo { name: format!("a{slot}"), slot, ty });
        self.val(Opcode::Arg(slot), &[], ty)
    }

    pub fn ptr(&mut self, slot: u32, d: DType) -> Value {
        self.arg(slot, Ty::Ptr(d))
    }

    pub fn site(&mut self, arg: u32) -> u32 {
        self.f.sites.push(Site { span: Span::default(), arg });
        self.f.sites.len() as u32 - 1
    }

    pub fn int(&mut self, d: DType, v: i64) -> Value {
        self.val(Opcode::Const(Const::Int(v)), &[], Ty::Scalar(d))
    }

    pub fn i32(&mut self, v: i64) -> Value {
        self.int(DType::I32, v)
    }

    pub fn float(&mut self, d: DType, v: f64) -> Value {
        self.val(Opcode::Const(Const::Float(v)), &[], Ty::Scalar(d))
    }

    pub fn ty(&self, v: Value) -> Ty {
        self.f.ty(v)
    }

    pub fn bin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.val(Opcode::Binary(op), &[a, b], ty)
    }

    pub fn un(&mut self, op: UnOp, a: Value) -> Value {
        let ty = self.ty(a);
        self.val(Opcode::Unary(op), &[a], ty)
    }

    pub fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        let ty = match self.ty(a) {
            Ty::Tile(_, l) => Ty::Tile(DType::I1, l),
            _ => Ty::Scalar(DType::I1),
        };
        self.val(Opcode::Cmp(op), &[a, b], ty)
    }

    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.val(Opcode::Select, &[c, a, b], ty)
    }

    pub fn cast(&mut self, a: Value, d: DType) -> Value {
        let ty = match self.ty(a) {
            Ty::Tile(_, l) => Ty::Tile(d, l),
            _ => Ty::Scalar(d),
        };
        self.val(Opcode::Cast, &[a], ty)
    }

    pub fn splat(&mut self, s: Value, lanes: u8) -> Value {
        let d = self.ty(s).dtype();
        self.val(Opcode::Splat, &[s], Ty::Tile(d, lanes))
    }

    pub fn iota(&mut self, start: Value, lanes: u8) -> Value {
        let d = self.ty(start).dtype();
        self.val(Opcode::Iota, &[start], Ty::Tile(d, lanes))
    }

    pub fn ptr_add(&mut self, p: Value, off: Value) -> Value {
        let ty = self.ty(p);
        self.val(Opcode::PtrAdd, &[p, off], ty)
    }

    /// A load; `ty` is the result type.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        &mut self,
        addr: Addressing,
        p: Value,
        off: Value,
        mask: Option<Value>,
        other: Option<Value>,
        site: u32,
        ty: Ty,
    ) -> Value {
        let mut args = vec![p, off];
        args.extend(mask);
        args.extend(other);
        self.val(
            Opcode::Load {
                addr,
                has_mask: mask.is_some(),
                has_other: other.is_some(),
                site,
                volatile: false,
            },
            &args,
            ty,
        )
    }

    pub fn store(
        &mut self,
        addr: Addressing,
        p: Value,
        off: Value,
        v: Value,
        mask: Option<Value>,
        site: u32,
    ) {
        let mut args = vec![p, off, v];
        args.extend(mask);
        self.inst(
            Opcode::Store { addr, has_mask: mask.is_some(), site, stream: false, check_only: false },
            &args,
            &[],
        );
    }

    /// `for iv in lb..ub step step` carrying `init`; `body` returns the next carried values.
    pub fn for_(
        &mut self,
        lb: Value,
        ub: Value,
        step: Value,
        init: &[Value],
        body: impl FnOnce(&mut B, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let tys: Vec<Ty> = init.iter().map(|&v| self.ty(v)).collect();
        let mut args = vec![lb, ub, step];
        args.extend(init);
        let inst = self.inst(Opcode::For, &args, &tys);
        let iv_ty = self.ty(lb);
        let iv = self.f.create_region_arg(inst, 0, 0, iv_ty);
        let carried: Vec<Value> = tys
            .iter()
            .enumerate()
            .map(|(n, &t)| self.f.create_region_arg(inst, 0, n as u32 + 1, t))
            .collect();
        self.stack.push(Vec::new());
        let next = body(self, iv, &carried);
        self.inst(Opcode::Yield, &next, &[]);
        let insts = self.stack.pop().unwrap();
        let mut region_args = vec![iv];
        region_args.extend(&carried);
        self.f.insts[inst].regions.push(Region { args: region_args, insts });
        self.f.insts[inst].results.clone()
    }

    /// `if c { then } else { else }` yielding values of `tys`.
    pub fn if_(
        &mut self,
        c: Value,
        tys: &[Ty],
        then: impl FnOnce(&mut B) -> Vec<Value>,
        else_: impl FnOnce(&mut B) -> Vec<Value>,
    ) -> Vec<Value> {
        let inst = self.inst(Opcode::If, &[c], tys);
        for branch in [Box::new(then) as Box<dyn FnOnce(&mut B) -> Vec<Value>>, Box::new(else_)] {
            self.stack.push(Vec::new());
            let vals = branch(self);
            self.inst(Opcode::Yield, &vals, &[]);
            let insts = self.stack.pop().unwrap();
            self.f.insts[inst].regions.push(Region { args: vec![], insts });
        }
        self.f.insts[inst].results.clone()
    }

    /// `while cond(carried) { body(carried) }`; the condition forwards the carried values.
    pub fn while_(
        &mut self,
        init: &[Value],
        cond: impl FnOnce(&mut B, &[Value]) -> Value,
        body: impl FnOnce(&mut B, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let tys: Vec<Ty> = init.iter().map(|&v| self.ty(v)).collect();
        let inst = self.inst(Opcode::While, init, &tys);
        let before: Vec<Value> =
            tys.iter().enumerate().map(|(n, &t)| self.f.create_region_arg(inst, 0, n as u32, t)).collect();
        self.stack.push(Vec::new());
        let flag = cond(self, &before);
        let mut cargs = vec![flag];
        cargs.extend(&before);
        self.inst(Opcode::Condition, &cargs, &[]);
        let insts = self.stack.pop().unwrap();
        self.f.insts[inst].regions.push(Region { args: before, insts });
        let after: Vec<Value> =
            tys.iter().enumerate().map(|(n, &t)| self.f.create_region_arg(inst, 1, n as u32, t)).collect();
        self.stack.push(Vec::new());
        let next = body(self, &after);
        self.inst(Opcode::Yield, &next, &[]);
        let insts = self.stack.pop().unwrap();
        self.f.insts[inst].regions.push(Region { args: after, insts });
        self.f.insts[inst].results.clone()
    }
}

/// Checked and unchecked, each with `fp16` tiles widened by F16C (where the host has
/// it) and 256-bit loops (where it has AVX2), and with integer code and 128-bit vectors
/// only, for tests that must pass every way.
pub const MODES: [CodegenOptions; 4] =
    [NATIVE, CodegenOptions { checked: false, ..NATIVE }, PLAIN, CodegenOptions { checked: false, ..PLAIN }];

/// Checked, F16C and 256-bit loops where the host has them.
const NATIVE: CodegenOptions = CodegenOptions {
    checked: true,
    emit_text: false,
    stream_bytes: u64::MAX,
    fused_subs: true,
    f16c: true,
    wide: true,
    zmm: true,
    bf16_cvt: true,
    bcast_in_loop: false,
    stage_exits: false,
    verify: true,
};

/// Checked, integer conversions and 128-bit vectors only.
const PLAIN: CodegenOptions =
    CodegenOptions { f16c: false, wide: false, zmm: false, bf16_cvt: false, ..NATIVE };

/// A pointer argument slot and its bounds.
pub fn slot<T>(buf: &mut [T]) -> (u64, Bounds) {
    (buf.as_mut_ptr() as usize as u64, Bounds { lo: 0, hi: std::mem::size_of_val(buf) as i64 })
}

/// A scalar argument slot (no bounds).
pub fn scalar(bits: u64) -> (u64, Bounds) {
    (bits, Bounds::default())
}

pub fn compile_ok(f: &Function, opts: &CodegenOptions) -> CompiledKernel {
    match compile(f, opts) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    }
}

/// Launches `k` on `grid`.
pub fn run(
    k: &CompiledKernel,
    grid: [u32; 3],
    slots: &[(u64, Bounds)],
    pool: Option<&rayon::ThreadPool>,
) -> Result<(), LaunchError> {
    let args: Vec<u64> = slots.iter().map(|s| s.0).collect();
    let bounds: Vec<Bounds> = slots.iter().map(|s| s.1).collect();
    // The tests pass live buffers with their exact bounds.
    // SAFETY: the test functions only access the buffers their tests allocate; checked
    // ones are stopped by their bounds.
    unsafe { launch(k.entry(), grid, &args, &bounds, k.scratch_bytes(), Programs::Independent, pool) }
}

pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// An elementwise kernel over `n` elements in tiles of `lanes`: the operands are loaded
/// from slots 0..inputs as `d_in` with the mask `offs < n`, `op` combines them, the
/// result is stored to slot `inputs` as the dtype `op` returns; `n` is slot `inputs + 1`.
pub fn elementwise(
    d_in: DType,
    inputs: u32,
    lanes: u8,
    op: impl FnOnce(&mut B, &[Value]) -> Value,
) -> Function {
    let mut b = B::new("elementwise");
    let ptrs: Vec<Value> = (0..inputs).map(|s| b.ptr(s, d_in)).collect();
    let n = b.arg(inputs + 1, Ty::Scalar(DType::I32));
    let zero = b.i32(0);
    let step = b.i32(lanes as i64);
    let sites: Vec<u32> = (0..=inputs).map(|s| b.site(s)).collect();
    // The output pointer's dtype is only known after `op`: build the body, then patch.
    let out_slot = inputs;
    let out_arg_inst = {
        let i = b.inst(Opcode::Arg(out_slot), &[], &[Ty::Ptr(d_in)]);
        b.f.args.push(ArgInfo { name: "out".into(), slot: out_slot, ty: Ty::Ptr(d_in) });
        i
    };
    let out = b.f.insts[out_arg_inst].results[0];
    b.for_(zero, n, step, &[], |b, i, _| {
        let offs = b.iota(i, lanes);
        let ns = b.splat(n, lanes);
        let mask = b.cmp(CmpOp::Lt, offs, ns);
        let xs: Vec<Value> = (0..inputs as usize)
            .map(|k| {
                b.load(Addressing::Contiguous, ptrs[k], i, Some(mask), None, sites[k], Ty::Tile(d_in, lanes))
            })
            .collect();
        let r = op(b, &xs);
        let d_out = b.ty(r).dtype();
        b.f.values[out].ty = Ty::Ptr(d_out);
        b.f.args.last_mut().unwrap().ty = Ty::Ptr(d_out);
        b.store(Addressing::Contiguous, out, i, r, Some(mask), sites[inputs as usize]);
        vec![]
    });
    b.finish()
}

/// fp32 inputs where rounding to a 16-bit format is delicate: every value of the format,
/// the ties halfway between neighbours and the floats right beside them, the overflow
/// threshold, subnormals of both formats, infinities and NaNs of assorted payloads.
pub fn edge_f32(d: DType) -> Vec<u32> {
    let to_f32 = |h: u16| {
        if d == DType::F16 { half::f16::from_bits(h).to_f32() } else { half::bf16::from_bits(h).to_f32() }
    };
    let mut finite: Vec<f32> = (0..=u16::MAX).map(to_f32).filter(|x| x.is_finite()).collect();
    finite.sort_by(f32::total_cmp);
    let mut out = Vec::new();
    for w in finite.windows(2) {
        out.push(w[0].to_bits());
        let mid = ((w[0] as f64 + w[1] as f64) / 2.0) as f32;
        for m in [mid, mid.next_up(), mid.next_down()] {
            out.push(m.to_bits());
        }
    }
    out.extend([
        0x0000_0000,
        0x8000_0000,
        0x0000_0001, // the smallest f32 subnormal
        0x8000_0001,
        0x007F_FFFF, // the largest f32 subnormal
        0x0080_0000, // the smallest f32 normal
        0x3380_0000, // 2^-24, the smallest fp16 subnormal
        0x3300_0000, // 2^-25: a tie, to zero
        0x3300_0001, // just above: up
        0x387F_C000, // halfway between fp16's largest subnormal and smallest normal
        0x3880_0000, // 2^-14
        0x477F_E000, // 65504
        0x477F_EFFF, // just below 65520
        0x477F_F000, // 65520: a tie, to infinity
        0x4780_0000, // 65536
        0x7F7F_FFFF, // the largest f32
        0x7F7F_8000, // a bf16 tie to infinity
        0x7F7F_7FFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0xFFC0_0000,
        0x7F80_0001, // signalling NaNs, payload only in the low bits
        0xFF80_0001,
        0x7F80_2000,
        0x7FBF_FFFF,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
        0x7FA0_1234,
    ]);
    out
}
