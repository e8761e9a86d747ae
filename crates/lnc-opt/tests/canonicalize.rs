//! `canonicalize`: exact identities fire, inexact look-alikes do not.

mod common;

use common::*;
use lnc_bir::*;
use lnc_opt::canonicalize;

#[test]
fn integer_identities() {
    let mut func = build("ints", |k| {
        let out = k.param("out", Type::ptr(DType::I32));
        let x = k.param("x", Type::scalar(DType::I32));
        let zero = k.int(DType::I32, 0);
        let one = k.int(DType::I32, 1);
        let ones = k.int(DType::I32, -1);
        for (op, c) in [
            (BinOp::Add, zero),
            (BinOp::Sub, zero),
            (BinOp::Mul, one),
            (BinOp::IDiv, one),
            (BinOp::Mul, zero),
            (BinOp::Rem, one),
            (BinOp::Mul, ones),
            (BinOp::And, ones),
            (BinOp::Or, ones),
            (BinOp::Shl, zero),
        ] {
            let v = k.bin(op, x, c);
            k.store(out, v, None);
        }
        // k op x => x op k
        let v = k.bin(BinOp::Add, one, x);
        k.store(out, v, None);
        for op in [BinOp::Sub, BinOp::Xor, BinOp::And, BinOp::Max] {
            let v = k.bin(op, x, x);
            k.store(out, v, None);
        }
        let n = k.un(UnOp::Neg, x);
        let nn = k.un(UnOp::Neg, n);
        k.store(out, nn, None);
        let b = k.un(UnOp::Not, x);
        let bb = k.un(UnOp::Not, b);
        k.store(out, bb, None);
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}

#[test]
fn float_identities_respect_signed_zeros() {
    let mut func = build("floats", |k| {
        let out = k.param("out", Type::ptr(DType::F32));
        let x = k.param("x", Type::scalar(DType::F32));
        let pz = k.float(DType::F32, 0.0);
        let nz = k.float(DType::F32, -0.0);
        let one = k.float(DType::F32, 1.0);
        let mone = k.float(DType::F32, -1.0);
        for (op, c) in [
            // kept: -0.0 + 0.0 is +0.0
            (BinOp::Add, pz),
            // x + -0.0 => x
            (BinOp::Add, nz),
            // x - 0.0 => x
            (BinOp::Sub, pz),
            // kept: x - -0.0 is x + 0.0, which turns -0.0 into +0.0
            (BinOp::Sub, nz),
            // kept: NaN, infinities and -0.0
            (BinOp::Mul, pz),
            (BinOp::Mul, one),
            (BinOp::Div, one),
            // kept: -x would flip the sign of a NaN
            (BinOp::Mul, mone),
        ] {
            let v = k.bin(op, x, c);
            k.store(out, v, None);
        }
        // constants move right
        let v = k.bin(BinOp::Mul, one, x);
        k.store(out, v, None);
        // kept: NaN - NaN is not 0
        let v = k.bin(BinOp::Sub, x, x);
        k.store(out, v, None);
        let v = k.bin(BinOp::Min, x, x);
        k.store(out, v, None);
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}

#[test]
fn comparisons_select_and_casts() {
    let mut func = build("cmp", |k| {
        let out = k.param("out", Type::ptr(DType::I1));
        let outf = k.param("outf", Type::ptr(DType::F32));
        let x = k.param("x", Type::scalar(DType::I32));
        let f = k.param("f", Type::scalar(DType::F32));
        let c = k.param("c", Type::scalar(DType::I1));
        let five = k.int(DType::I32, 5);
        // 5 < x => x > 5
        let v = k.cmp(CmpOp::Lt, five, x);
        k.store(out, v, None);
        // x <= x => true, but not on floats
        let v = k.cmp(CmpOp::Le, x, x);
        k.store(out, v, None);
        let v = k.cmp(CmpOp::Eq, f, f);
        k.store(out, v, None);
        // select(c, a, a) => a, select(~c, a, b) => select(c, b, a)
        let g = k.un(UnOp::Neg, f);
        let v = k.select(c, g, g);
        k.store(outf, v, None);
        let nc = k.un(UnOp::Not, c);
        let v = k.select(nc, f, g);
        k.store(outf, v, None);
        // select(c, true, false) => c
        let t = k.int(DType::I1, 1);
        let e = k.int(DType::I1, 0);
        let v = k.select(c, t, e);
        k.store(out, v, None);
        // cast to the same type => x; bitcast round trip => x
        let v = k.cast(f, DType::F32);
        k.store(outf, v, None);
        let i_ty = Type::scalar(DType::I32);
        let bits = k.op(Opcode::Bitcast, &[f], i_ty);
        let back = k.op(Opcode::Bitcast, &[bits], Type::scalar(DType::F32));
        k.store(outf, back, None);
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}

#[test]
fn splats_broadcasts_and_pointer_chains() {
    let mut func = build("blocks", |k| {
        let x_ptr = k.param("X", Type::ptr(DType::F32));
        let row = k.param("row", Type::scalar(DType::I32));
        let a = k.param("a", Type::scalar(DType::F32));
        let b = k.param("b", Type::scalar(DType::F32));
        let cols = k.arange(0, 16);
        // ptr_add(ptr_add(splat X, splat row), cols): the inner splats hoist first.
        let xs = k.splat(x_ptr, 16);
        let rs = k.splat(row, 16);
        let base = k.ptr_add(xs, rs);
        let p = k.ptr_add(base, cols);
        // ptr_add(ptr_add(p, cols), cols) => ptr_add(p, cols + cols)
        let p2 = k.ptr_add(p, cols);
        let p3 = k.ptr_add(p2, cols);
        // ptr_add(p, 0) => p
        let z = k.int(DType::I32, 0);
        let zs = k.splat(z, 16);
        let p4 = k.ptr_add(p3, zs);
        // splat(a) * splat(b) => splat(a * b)
        let sa = k.splat(a, 16);
        let sb = k.splat(b, 16);
        let m = k.bin(BinOp::Mul, sa, sb);
        k.store(p4, m, None);
        // broadcast/expand_dims of splats, broadcast to the same type, reduce max of a splat
        let t2 = Type::block(Elem::Scalar(DType::F32), Shape::d2(1, 16));
        let e = k.op(Opcode::ExpandDims(0), &[sa], t2);
        let t3 = Type::block(Elem::Scalar(DType::F32), Shape::d2(4, 16));
        let bc = k.op(Opcode::Broadcast, &[e], t3);
        let bc2 = k.op(Opcode::Broadcast, &[bc], t3);
        let r = k.op(Opcode::Reduce { op: ReduceOp::Max, axis: 0, keep_dims: false }, &[bc2], f32s(16));
        k.store(p4, r, None);
        let mx = k.reduce(ReduceOp::Max, sb);
        let out = k.ptr_add(x_ptr, row);
        k.store(out, mx, None);
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}

#[test]
fn constant_masks_on_loads_and_stores() {
    let mut func = build("masks", |k| {
        let p = k.block_param("P", DType::F32, 16);
        let t = k.int(DType::I1, 1);
        let f = k.int(DType::I1, 0);
        let ts = k.splat(t, 16);
        let fs = k.splat(f, 16);
        let one = k.float(DType::F32, 1.0);
        let other = k.splat(one, 16);
        let a = k.load(p, Some(ts), Some(other));
        let b = k.load(p, Some(fs), Some(other));
        let c = k.load(p, Some(fs), None);
        let s = k.bin(BinOp::Add, a, b);
        let s = k.bin(BinOp::Add, s, c);
        k.store(p, s, Some(ts));
        k.store(p, s, Some(fs));
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}

#[test]
fn shared_inner_ptr_add_is_not_combined() {
    let mut func = build("shared", |k| {
        let p = k.param("P", Type::ptr(DType::F32));
        let ps = k.splat(p, 16);
        let cols = k.arange(0, 16);
        let q = k.ptr_add(ps, cols);
        let r = k.ptr_add(q, cols);
        let v = k.load(q, None, None);
        k.store(r, v, None);
    });
    insta::assert_snapshot!(run_printed(canonicalize::NAME, &mut func));
}
