//! `dce`: dead pure code and dead loads go, effects stay.

mod common;

use common::*;
use lnc_bir::*;
use lnc_opt::dce;

#[test]
fn dead_chains_and_loads_go_effects_stay() {
    let mut func = build("dead", |k| {
        let p = k.block_param("P", DType::F32, 16);
        let cnt = k.param("Count", Type::ptr(DType::I32));
        let c = k.param("c", Type::scalar(DType::I1));
        let a = k.load(p, None, None);
        let b = k.bin(BinOp::Mul, a, a);
        let _dead = k.un(UnOp::Exp, b);
        let one = k.int(DType::I32, 1);
        // An atomic with an unused result still writes memory.
        k.op(Opcode::Atomic { op: AtomicOp::Add, has_mask: false }, &[cnt, one], Type::scalar(DType::I32));
        k.effect(Opcode::Assert, &[c]);
        let s = k.b.string("c =");
        k.effect(Opcode::Print(s), &[c]);
        let kept = k.bin(BinOp::Add, a, a);
        k.store(p, kept, None);
    });
    insta::assert_snapshot!(run_printed(dce::NAME, &mut func));
}

#[test]
fn control_flow_goes_only_without_effects_and_uses() {
    let mut func = build("loops", |k| {
        let out = k.param("out", Type::ptr(DType::F32));
        let n = k.param("n", Type::scalar(DType::I32));
        let c = k.param("c", Type::scalar(DType::I1));
        let lb = k.int(DType::I32, 0);
        let st = k.int(DType::I32, 1);
        let z = k.float(DType::F32, 0.0);
        // Pure loop, result unused: removed, and with it the outer value only it used.
        let only_in_loop = k.float(DType::F32, 2.0);
        k.for_loop(lb, n, st, &[z], |k, _, acc| {
            let v = k.load(out, None, None);
            let t = k.bin(BinOp::Mul, v, only_in_loop);
            vec![k.bin(BinOp::Add, acc[0], t)]
        });
        // Result unused but it stores: kept, and its dead inner code goes.
        k.for_loop(lb, n, st, &[z], |k, _, acc| {
            let _dead = k.bin(BinOp::Mul, acc[0], acc[0]);
            k.store(out, acc[0], None);
            vec![acc[0]]
        });
        // An `if` with no effects and an unused result: removed.
        let ty = Type::scalar(DType::F32);
        k.if_else(c, &[ty], |_| vec![z], |k| vec![k.un(UnOp::Neg, z)]);
        // An `if` whose result is used: kept.
        let r = k.if_else(c, &[ty], |_| vec![z], |k| vec![k.un(UnOp::Neg, z)]);
        k.store(out, r[0], None);
        // A loop reading memory with a plain load and nothing else: removed. With a
        // volatile load, which a loop waits on for another program's store: kept.
        for volatile in [false, true] {
            k.for_loop(lb, n, st, &[], |k, _, _| {
                k.op(Opcode::Load { has_mask: false, has_other: false, volatile }, &[out], ty);
                vec![]
            });
        }
    });
    insta::assert_snapshot!(run_printed(dce::NAME, &mut func));
}

#[test]
fn nothing_to_do_reports_no_change() {
    let mut func = build("live", |k| {
        let out = k.param("out", Type::ptr(DType::F32));
        let x = k.param("x", Type::scalar(DType::F32));
        k.store(out, x, None);
    });
    assert!(!dce::run(&mut func));
}
