//! The seed's forward layer norm (`_layer_norm_fwd_fused`, BLOCK_SIZE=256) as a naive front
//! end would emit it — duplicate splats, masks and offsets, same-type casts, pointer offsets
//! in two steps, dead values — through the whole pipeline, checked against the interpreter.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer, run_grid};
use lnc_bir::print::print_function;
use lnc_bir::*;

const BLOCK: u32 = 256;

fn layer_norm_fwd() -> Function {
    use DType::{F32, I32};
    build("_layer_norm_fwd_fused", |k| {
        let x_ptr = k.param("X", Type::ptr(F32));
        let y_ptr = k.param("Y", Type::ptr(F32));
        let w_ptr = k.param("W", Type::ptr(F32));
        let b_ptr = k.param("B", Type::ptr(F32));
        let m_ptr = k.param("M", Type::ptr(F32));
        let v_ptr = k.param("V", Type::ptr(F32));
        let stride = k.param("stride", Type::scalar(I32));
        let n = k.param("N", Type::scalar(I32));
        let eps = k.param("eps", Type::scalar(F32));
        // row = tl.program_id(0); cols = tl.arange(0, BLOCK_SIZE); mask = cols < N
        let row = k.op(Opcode::ProgramId(0), &[], Type::scalar(I32));
        let cols = k.arange(0, BLOCK as i64);
        let ns = k.splat(n, BLOCK);
        let mask = k.cmp(CmpOp::Lt, cols, ns);
        // X += row * stride (scalar pointer arithmetic)
        let off = k.bin(BinOp::Mul, row, stride);
        let x_row = k.ptr_add(x_ptr, off);
        // Y += row * stride, recomputed and done on blocks
        let off2 = k.bin(BinOp::Mul, row, stride);
        let ys = k.splat(y_ptr, BLOCK);
        let offs = k.splat(off2, BLOCK);
        let y_row = k.ptr_add(ys, offs);
        // x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
        let xs = k.splat(x_row, BLOCK);
        let xp = k.ptr_add(xs, cols);
        let zero_i = k.int(I32, 0);
        let zero_f = k.cast(zero_i, F32);
        let other = k.splat(zero_f, BLOCK);
        let x0 = k.load(xp, Some(mask), Some(other));
        let x = k.cast(x0, F32);
        // mean = tl.sum(x, axis=0) / N
        let sum = k.reduce(ReduceOp::Sum, x);
        let nf = k.cast(n, F32);
        let mean = k.bin(BinOp::Div, sum, nf);
        // xmean = tl.where(mask, x - mean, 0.)
        let mean_s = k.splat(mean, BLOCK);
        let diff = k.bin(BinOp::Sub, x, mean_s);
        let ns2 = k.splat(n, BLOCK);
        let mask2 = k.cmp(CmpOp::Gt, ns2, cols);
        let zero = k.float(F32, 0.0);
        let zeros = k.splat(zero, BLOCK);
        let xmean = k.select(mask2, diff, zeros);
        // var = tl.sum(xmean * xmean, axis=0) / N
        let sq = k.bin(BinOp::Mul, xmean, xmean);
        let vsum = k.reduce(ReduceOp::Sum, sq);
        let nf2 = k.cast(n, F32);
        let var = k.bin(BinOp::Div, vsum, nf2);
        // rstd = 1 / tl.sqrt(var + eps)
        let ve = k.bin(BinOp::Add, var, eps);
        let sd = k.un(UnOp::Sqrt, ve);
        let one_i = k.int(I32, 1);
        let one = k.cast(one_i, F32);
        let rstd = k.bin(BinOp::Div, one, sd);
        // xhat = xmean * rstd
        let rstd_s = k.splat(rstd, BLOCK);
        let xhat = k.bin(BinOp::Mul, xmean, rstd_s);
        // a debugging remnant nobody uses
        let two = k.float(F32, 2.0);
        let twos = k.splat(two, BLOCK);
        k.bin(BinOp::Mul, xhat, twos);
        // tl.store(M + row, mean); tl.store(V + row, rstd)
        let mp = k.ptr_add(m_ptr, row);
        k.store(mp, mean, None);
        let vp = k.ptr_add(v_ptr, row);
        k.store(vp, rstd, None);
        // w = tl.load(W + cols, mask=mask); b = tl.load(B + cols, mask=mask)
        let ns3 = k.splat(n, BLOCK);
        let mask3 = k.cmp(CmpOp::Lt, cols, ns3);
        let ws = k.splat(w_ptr, BLOCK);
        let wp = k.ptr_add(ws, cols);
        let w = k.load(wp, Some(mask3), None);
        let bs = k.splat(b_ptr, BLOCK);
        let bp = k.ptr_add(bs, cols);
        let b = k.load(bp, Some(mask3), None);
        // an unused reload of w
        k.load(wp, Some(mask3), None);
        // y = xhat * w + b, with a `* 1.0` from an inlined helper
        let y0 = k.bin(BinOp::Mul, xhat, w);
        let onef = k.float(F32, 1.0);
        let ones = k.splat(onef, BLOCK);
        let y1 = k.bin(BinOp::Mul, y0, ones);
        let y = k.bin(BinOp::Add, y1, b);
        // tl.store(Y + cols, y, mask=mask)
        let yp = k.ptr_add(y_row, cols);
        k.store(yp, y, Some(mask));
    })
}

/// Runs `func` on 3 rows of 200 columns (stride 256) and returns every buffer.
fn run(func: &Function) -> Vec<Buffer> {
    let (rows, n, stride) = (3usize, 200usize, 256usize);
    let x: Vec<f32> = (0..rows * stride).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
    let w: Vec<f32> = (0..n).map(|i| 1.0 + (i % 5) as f32 / 8.0).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 3) as f32 - 1.0).collect();
    let mut buffers = vec![
        Buffer::from_f32(&x),
        Buffer::from_f32(&vec![0.0; rows * stride]),
        Buffer::from_f32(&w),
        Buffer::from_f32(&b),
        Buffer::from_f32(&vec![0.0; rows]),
        Buffer::from_f32(&vec![0.0; rows]),
    ];
    let mut args: Vec<ArgValue> = (0..6).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([ArgValue::Int(stride as i64), ArgValue::Int(n as i64), ArgValue::Float(1e-5f32 as f64)]);
    run_grid(func, [rows as u32, 1, 1], &args, &mut buffers).expect("the kernel runs");
    buffers
}

#[test]
fn layer_norm_forward_pipeline() {
    let mut func = layer_norm_fwd();
    must_verify(&func, "as built");
    let expected = run(&func);
    let before = print_function(&func);
    let mut log = Vec::new();
    lnc_opt::optimize(&mut func, &mut |name, f| {
        must_verify(f, &format!("after {name}"));
        log.push(name);
    });
    assert_eq!(&log[..lnc_opt::PASSES.len()], lnc_opt::PASSES);
    assert_eq!(log.len() % lnc_opt::PASSES.len(), 0);
    // A fixpoint: one more round changes nothing.
    for name in lnc_opt::PASSES {
        assert_eq!(lnc_opt::run_pass(name, &mut func), Some(false), "{name} after the pipeline");
    }
    assert_eq!(run(&func), expected, "the optimized kernel computes the same bits");
    insta::assert_snapshot!(format!(
        "{before}\n// after optimize ({} passes run)\n{}",
        log.len(),
        print_function(&func)
    ));
}

#[test]
fn unknown_pass_names_are_rejected() {
    let mut func = layer_norm_fwd();
    assert_eq!(lnc_opt::run_pass("licm", &mut func), None);
    assert_eq!(lnc_opt::PASSES, ["canonicalize", "constant-fold", "cse", "sink", "dce"]);
}
