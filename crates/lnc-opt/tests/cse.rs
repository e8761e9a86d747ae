//! `cse`: duplicates merge within scope, never across it, and loads never merge.

mod common;

use common::*;
use lnc_bir::*;
use lnc_opt::cse;

#[test]
fn duplicates_merge_and_commuted_operands_match() {
    let mut func = build("dups", |k| {
        let out = k.block_param("out", DType::F32, 16);
        let x = k.param("x", Type::scalar(DType::F32));
        let y = k.param("y", Type::scalar(DType::F32));
        let a = k.splat(x, 16);
        let b = k.splat(x, 16);
        let s1 = k.bin(BinOp::Add, a, b);
        let s2 = k.bin(BinOp::Add, b, a);
        let z1 = k.float(DType::F32, 0.0);
        // -0.0 is not 0.0: these constants stay apart.
        let z2 = k.float(DType::F32, -0.0);
        let z3 = k.float(DType::F32, 0.0);
        let d1 = k.bin(BinOp::Sub, x, y);
        let d2 = k.bin(BinOp::Sub, y, x);
        let m = k.bin(BinOp::Mul, s1, s2);
        k.store(out, m, None);
        for v in [z1, z2, z3, d1, d2] {
            let vs = k.splat(v, 16);
            k.store(out, vs, None);
        }
    });
    insta::assert_snapshot!(run_printed(cse::NAME, &mut func));
}

#[test]
fn loads_are_not_merged() {
    let mut func = build("loads", |k| {
        let p = k.block_param("P", DType::F32, 16);
        let a = k.load(p, None, None);
        k.store(p, a, None);
        let b = k.load(p, None, None);
        let s = k.bin(BinOp::Add, a, b);
        k.store(p, s, None);
    });
    assert!(!cse::run(&mut func));
    assert_eq!(count(&func, "load"), 2);
}

#[test]
fn scopes_follow_regions() {
    let mut func = build("scopes", |k| {
        let out = k.param("out", Type::ptr(DType::I32));
        let x = k.param("x", Type::scalar(DType::I32));
        let c = k.param("c", Type::scalar(DType::I1));
        let outer = k.bin(BinOp::Mul, x, x);
        let lb = k.int(DType::I32, 0);
        let st = k.int(DType::I32, 1);
        let r = k.for_loop(lb, x, st, &[outer], |k, i, acc| {
            // The outer `x * x` stands in for this one.
            let inner = k.bin(BinOp::Mul, x, x);
            // Only in the loop: the `x + x` after the loop must not use it.
            let body_only = k.bin(BinOp::Add, x, x);
            let t = k.bin(BinOp::Add, inner, body_only);
            let t = k.bin(BinOp::Add, t, i);
            vec![k.bin(BinOp::Add, acc[0], t)]
        });
        let after = k.bin(BinOp::Add, x, x);
        k.store(out, after, None);
        let ty = Type::scalar(DType::I32);
        let branches = k.if_else(
            c,
            &[ty],
            |k| vec![k.bin(BinOp::Sub, x, r[0])],
            // The then-branch's `x - r` is not visible here.
            |k| vec![k.bin(BinOp::Sub, x, r[0])],
        );
        k.store(out, branches[0], None);
    });
    insta::assert_snapshot!(run_printed(cse::NAME, &mut func));
}
