//! `constant-fold` agrees with the reference interpreter, the IR's definition: every
//! operator on every dtype, over edge-case operands, computes the same stored bits whether
//! the interpreter evaluates the instruction or the pass folds it beforehand.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer, InterpError, run_grid};
use lnc_bir::*;

fn int_values(d: DType) -> Vec<i64> {
    let raw = [
        0,
        1,
        -1,
        2,
        -2,
        3,
        7,
        -7,
        8,
        31,
        32,
        63,
        64,
        127,
        128,
        -128,
        255,
        65535,
        i32::MIN as i64,
        i32::MAX as i64,
        i64::MIN,
        i64::MAX,
    ];
    let mut v: Vec<i64> = raw.iter().map(|&x| d.wrap_int(x)).collect();
    v.sort();
    v.dedup();
    v
}

fn float_values(d: DType) -> Vec<f64> {
    let raw = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        2.5,
        -7.0,
        3.0e38,
        65504.0,
        1e-40,
        6e-8,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
    ];
    raw.iter().map(|&x| d.round_float(x)).collect()
}

fn consts(d: DType) -> Vec<Const> {
    if d.is_int() {
        int_values(d).into_iter().map(Const::Int).collect()
    } else {
        float_values(d).into_iter().map(Const::Float).collect()
    }
}

/// Runs `func` (one pointer parameter to a one-element buffer of `d`) in the interpreter.
fn interpret(func: &Function, d: DType) -> Result<Buffer, InterpError> {
    let mut buffers = vec![Buffer::zeros(d, 1)];
    run_grid(func, [1, 1, 1], &[ArgValue::Ptr { buffer: 0, offset: 0 }], &mut buffers)?;
    Ok(buffers.pop().expect("one buffer"))
}

fn same(a: &Buffer, b: &Buffer) -> bool {
    a.data == b.data || (a.dtype.is_float() && a.to_f64_values()[0].is_nan() && b.to_f64_values()[0].is_nan())
}

/// Builds `out = f(k)` storing into a `*out_d`, interprets it unfolded and folded, and
/// checks they agree (or that folding left an erroring instruction alone).
fn check(what: &str, out_d: DType, f: impl FnOnce(&mut K) -> Value) {
    let mut func = build("k", |k| {
        let p = k.param("out", Type::ptr(out_d));
        let v = f(k);
        k.store(p, v, None);
    });
    must_verify(&func, what);
    let reference = interpret(&func, out_d);
    let folded_any = lnc_opt::fold::run(&mut func);
    must_verify(&func, what);
    match reference {
        Ok(want) => {
            let got = interpret(&func, out_d).unwrap_or_else(|e| panic!("{what}: folded code fails: {e}"));
            assert!(
                same(&want, &got),
                "{what}: interpreter {:?}, folded {:?}",
                want.to_f64_values(),
                got.to_f64_values()
            );
        }
        Err(_) => assert!(!folded_any, "{what}: folded an instruction the interpreter rejects"),
    }
}

fn mk(k: &mut K, d: DType, c: Const) -> Value {
    match c {
        Const::Int(i) => k.int(d, i),
        Const::Float(f) => k.float(d, f),
    }
}

#[test]
fn binary_operators() {
    for d in DType::ALL {
        for op in BinOp::ALL {
            let valid = match op {
                BinOp::Div | BinOp::Pow => d.is_float(),
                BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => d.is_int(),
                _ => true,
            };
            if !valid {
                continue;
            }
            for a in consts(d) {
                for b in consts(d) {
                    check(&format!("{d} {op:?} {a:?} {b:?}"), d, |k| {
                        let (x, y) = (mk(k, d, a), mk(k, d, b));
                        k.bin(op, x, y)
                    });
                }
            }
        }
    }
}

#[test]
fn comparisons() {
    for d in DType::ALL {
        for op in CmpOp::ALL {
            for a in consts(d) {
                for b in consts(d) {
                    check(&format!("{d} cmp {op:?} {a:?} {b:?}"), DType::I1, |k| {
                        let (x, y) = (mk(k, d, a), mk(k, d, b));
                        k.cmp(op, x, y)
                    });
                }
            }
        }
    }
}

#[test]
fn unary_operators() {
    for d in DType::ALL {
        for op in UnOp::ALL {
            let valid = match op {
                UnOp::Neg | UnOp::Abs => true,
                UnOp::Not => d.is_int(),
                _ => d.is_float(),
            };
            if !valid {
                continue;
            }
            for a in consts(d) {
                check(&format!("{d} {op:?} {a:?}"), d, |k| {
                    let x = mk(k, d, a);
                    k.un(op, x)
                });
            }
        }
    }
}

#[test]
fn casts_between_every_pair() {
    for from in DType::ALL {
        for to in DType::ALL {
            for a in consts(from) {
                check(&format!("cast {from} -> {to} {a:?}"), to, |k| {
                    let x = mk(k, from, a);
                    k.cast(x, to)
                });
            }
        }
    }
}

#[test]
fn bitcasts_between_same_widths() {
    for from in DType::ALL {
        for to in DType::ALL {
            if from.bits() != to.bits() || from == DType::I1 {
                continue;
            }
            for a in consts(from) {
                check(&format!("bitcast {from} -> {to} {a:?}"), to, |k| {
                    let x = mk(k, from, a);
                    let ty = Type::scalar(to);
                    k.op(Opcode::Bitcast, &[x], ty)
                });
            }
        }
    }
}
