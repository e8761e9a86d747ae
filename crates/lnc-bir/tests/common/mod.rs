//! Functions and helpers shared by the test files.
#![allow(dead_code)]

use lnc_bir::parse::parse_function;
use lnc_bir::print::print_function;
use lnc_bir::verify::verify;
use lnc_bir::*;
use lnc_diag::Span;

const D: Span = Span::DUMMY;

/// A deterministic generator (xorshift), so tests need no extra dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// Parses text IR, checks it verifies and that printing it gives the text back.
pub fn parse_ok(text: &str) -> Function {
    let f = parse_function(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    if let Err(e) = verify(&f) {
        panic!("{e}");
    }
    assert_eq!(print_function(&f), text, "printing the parsed text changes it");
    f
}

/// Checks `parse(print(f))` prints the same as `f`.
pub fn assert_roundtrip(f: &Function) {
    let text = print_function(f);
    let g = parse_function(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print_function(&g), text);
    assert!(verify(&g).is_ok());
}

fn f32t() -> Type {
    Type::scalar(DType::F32)
}

/// `_layer_norm_fwd_fused` of Triton's tutorial 05, written by hand, for a `block`-wide row.
pub fn layer_norm_fwd(block: u32) -> Function {
    let mut f = Function::new("_layer_norm_fwd_fused");
    let pf = Type::ptr(DType::F32);
    let ptrs: Vec<Value> = ["X", "Y", "W", "B", "M", "V"]
        .iter()
        .enumerate()
        .map(|(k, n)| f.add_param(*n, k as u32, pf))
        .collect();
    let [x, y, w, bias, m, v] = <[Value; 6]>::try_from(ptrs).expect("six pointers");
    let stride = f.add_param("stride", 6, Type::scalar(DType::I32));
    let n = f.add_param("N", 7, Type::scalar(DType::I32));
    let eps = f.add_param("eps", 8, f32t());

    let shape = Shape::d1(block);
    let i32b = Type::block(Elem::Scalar(DType::I32), shape);
    let i1b = Type::block(Elem::Scalar(DType::I1), shape);
    let f32b = Type::block(Elem::Scalar(DType::F32), shape);
    let pf32b = Type::block(Elem::Ptr(DType::F32), shape);
    let i32 = Type::scalar(DType::I32);

    let mut b = Builder::new(&mut f);
    let row = b.value(Opcode::ProgramId(0), vec![], i32, D);
    let cols = b.value(Opcode::Arange { start: 0, end: block as i64 }, vec![], i32b, D);
    let ns = b.value(Opcode::Splat, vec![n], i32b, D);
    let mask = b.value(Opcode::Cmp(CmpOp::Lt), vec![cols, ns], i1b, D);
    let off = b.value(Opcode::Binary(BinOp::Mul), vec![row, stride], i32, D);
    let xr = b.value(Opcode::PtrAdd, vec![x, off], pf, D);
    let yr = b.value(Opcode::PtrAdd, vec![y, off], pf, D);
    let xs = b.value(Opcode::Splat, vec![xr], pf32b, D);
    let xp = b.value(Opcode::PtrAdd, vec![xs, cols], pf32b, D);
    let zero = b.const_float(DType::F32, 0.0, D);
    let zeros = b.value(Opcode::Splat, vec![zero], f32b, D);
    let xv = b.value(
        Opcode::Load { has_mask: true, has_other: true, volatile: false },
        vec![xp, mask, zeros],
        f32b,
        D,
    );
    let red = Opcode::Reduce { op: ReduceOp::Sum, axis: 0, keep_dims: false };
    let sum = b.value(red, vec![xv], f32t(), D);
    let nf = b.value(Opcode::Cast, vec![n], f32t(), D);
    let mean = b.value(Opcode::Binary(BinOp::Div), vec![sum, nf], f32t(), D);
    let means = b.value(Opcode::Splat, vec![mean], f32b, D);
    let diff = b.value(Opcode::Binary(BinOp::Sub), vec![xv, means], f32b, D);
    let xmean = b.value(Opcode::Select, vec![mask, diff, zeros], f32b, D);
    let sq = b.value(Opcode::Binary(BinOp::Mul), vec![xmean, xmean], f32b, D);
    let sqsum = b.value(red, vec![sq], f32t(), D);
    let var = b.value(Opcode::Binary(BinOp::Div), vec![sqsum, nf], f32t(), D);
    let ve = b.value(Opcode::Binary(BinOp::Add), vec![var, eps], f32t(), D);
    let sd = b.value(Opcode::Unary(UnOp::Sqrt), vec![ve], f32t(), D);
    let one = b.const_float(DType::F32, 1.0, D);
    let rstd = b.value(Opcode::Binary(BinOp::Div), vec![one, sd], f32t(), D);
    let rstds = b.value(Opcode::Splat, vec![rstd], f32b, D);
    let xhat = b.value(Opcode::Binary(BinOp::Mul), vec![xmean, rstds], f32b, D);
    let mrow = b.value(Opcode::PtrAdd, vec![m, row], pf, D);
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![mrow, mean], &[], D);
    let vrow = b.value(Opcode::PtrAdd, vec![v, row], pf, D);
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![vrow, rstd], &[], D);
    let ws = b.value(Opcode::Splat, vec![w], pf32b, D);
    let wp = b.value(Opcode::PtrAdd, vec![ws, cols], pf32b, D);
    let wv =
        b.value(Opcode::Load { has_mask: true, has_other: false, volatile: false }, vec![wp, mask], f32b, D);
    let bs = b.value(Opcode::Splat, vec![bias], pf32b, D);
    let bp = b.value(Opcode::PtrAdd, vec![bs, cols], pf32b, D);
    let bv =
        b.value(Opcode::Load { has_mask: true, has_other: false, volatile: false }, vec![bp, mask], f32b, D);
    let xw = b.value(Opcode::Binary(BinOp::Mul), vec![xhat, wv], f32b, D);
    let yv = b.value(Opcode::Binary(BinOp::Add), vec![xw, bv], f32b, D);
    let ys = b.value(Opcode::Splat, vec![yr], pf32b, D);
    let yp = b.value(Opcode::PtrAdd, vec![ys, cols], pf32b, D);
    b.inst(Opcode::Store { has_mask: true, check_only: false }, vec![yp, yv, mask], &[], D);
    b.finish();
    f
}

/// `out[0] = sum(iv for iv in range(lb, ub, step))` and `out[1]` = the iteration count,
/// as a `for` carrying two `i64` values.
pub fn for_sum() -> Function {
    let mut f = Function::new("for_sum");
    let i32 = Type::scalar(DType::I32);
    let i64 = Type::scalar(DType::I64);
    let out = f.add_param("out", 0, Type::ptr(DType::I64));
    let lb = f.add_param("lb", 1, i32);
    let ub = f.add_param("ub", 2, i32);
    let step = f.add_param("step", 3, i32);
    let mut b = Builder::new(&mut f);
    let zero = b.const_int(DType::I64, 0, D);
    let one = b.const_int(DType::I64, 1, D);
    let for_ = b.inst(Opcode::For, vec![lb, ub, step, zero, zero], &[i64, i64], D);
    b.begin_region();
    let iv = b.region_arg(for_, 0, i32);
    let acc = b.region_arg(for_, 0, i64);
    let count = b.region_arg(for_, 0, i64);
    let ivw = b.value(Opcode::Cast, vec![iv], i64, D);
    let acc2 = b.value(Opcode::Binary(BinOp::Add), vec![acc, ivw], i64, D);
    let count2 = b.value(Opcode::Binary(BinOp::Add), vec![count, one], i64, D);
    b.inst(Opcode::Yield, vec![acc2, count2], &[], D);
    let body = b.end_region();
    b.set_regions(for_, vec![body]);
    let [sum, n] = [b.func.insts[for_].results[0], b.func.insts[for_].results[1]];
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![out, sum], &[], D);
    let out1 = b.value(Opcode::PtrAdd, vec![out, one], Type::ptr(DType::I64), D);
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![out1, n], &[], D);
    b.finish();
    f
}

/// Collatz: `out[0]` = steps for `n` to reach 1, as a `while` whose body holds an `if`.
pub fn collatz() -> Function {
    let mut f = Function::new("collatz");
    let i64 = Type::scalar(DType::I64);
    let i1 = Type::scalar(DType::I1);
    let out = f.add_param("out", 0, Type::ptr(DType::I64));
    let n = f.add_param("n", 1, i64);
    let mut b = Builder::new(&mut f);
    let zero = b.const_int(DType::I64, 0, D);
    let one = b.const_int(DType::I64, 1, D);
    let two = b.const_int(DType::I64, 2, D);
    let three = b.const_int(DType::I64, 3, D);
    let w = b.inst(Opcode::While, vec![n, zero], &[i64, i64], D);
    b.begin_region();
    let x = b.region_arg(w, 0, i64);
    let s = b.region_arg(w, 0, i64);
    let c = b.value(Opcode::Cmp(CmpOp::Ne), vec![x, one], i1, D);
    b.inst(Opcode::Condition, vec![c, x, s], &[], D);
    let cond = b.end_region();
    b.begin_region();
    let x = b.region_arg(w, 1, i64);
    let s = b.region_arg(w, 1, i64);
    let r = b.value(Opcode::Binary(BinOp::Rem), vec![x, two], i64, D);
    let even = b.value(Opcode::Cmp(CmpOp::Eq), vec![r, zero], i1, D);
    let if_ = b.inst(Opcode::If, vec![even], &[i64], D);
    b.begin_region();
    let h = b.value(Opcode::Binary(BinOp::IDiv), vec![x, two], i64, D);
    b.inst(Opcode::Yield, vec![h], &[], D);
    let then = b.end_region();
    b.begin_region();
    let t = b.value(Opcode::Binary(BinOp::Mul), vec![x, three], i64, D);
    let t1 = b.value(Opcode::Binary(BinOp::Add), vec![t, one], i64, D);
    b.inst(Opcode::Yield, vec![t1], &[], D);
    let else_ = b.end_region();
    b.set_regions(if_, vec![then, else_]);
    let next = b.func.insts[if_].results[0];
    let s1 = b.value(Opcode::Binary(BinOp::Add), vec![s, one], i64, D);
    b.inst(Opcode::Yield, vec![next, s1], &[], D);
    let body = b.end_region();
    b.set_regions(w, vec![cond, body]);
    let steps = b.func.insts[w].results[1];
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![out, steps], &[], D);
    b.finish();
    f
}
