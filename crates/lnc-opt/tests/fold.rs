//! `constant-fold`: the IR's arithmetic on edge cases, and the shape of folded code.

mod common;

use common::*;
use lnc_bir::*;
use lnc_opt::fold;

/// Stores `build(k)` through a pointer parameter, folds, and returns what the store now
/// stores if it became a constant.
fn fold_stored(d: DType, f: impl FnOnce(&mut K) -> Value) -> Option<Const> {
    let mut func = build("k", |k| {
        let p = k.param("out", Type::ptr(d));
        let v = f(k);
        k.store(p, v, None);
    });
    must_verify(&func, "before folding");
    fold::run(&mut func);
    must_verify(&func, "after folding");
    const_of(&func, stored(&func, 0))
}

fn int_bin(d: DType, op: BinOp, a: i64, b: i64) -> Option<Const> {
    fold_stored(d, |k| {
        let (x, y) = (k.int(d, a), k.int(d, b));
        k.bin(op, x, y)
    })
}

fn float_bin(d: DType, op: BinOp, a: f64, b: f64) -> Option<Const> {
    fold_stored(d, |k| {
        let (x, y) = (k.float(d, a), k.float(d, b));
        k.bin(op, x, y)
    })
}

fn cast(from: DType, to: DType, a: Const) -> Option<Const> {
    fold_stored(to, |k| {
        let x = match a {
            Const::Int(i) => k.int(from, i),
            Const::Float(f) => k.float(from, f),
        };
        k.cast(x, to)
    })
}

fn cmp(d: DType, op: CmpOp, a: i64, b: i64) -> Option<Const> {
    fold_stored(DType::I1, |k| {
        let (x, y) = (k.int(d, a), k.int(d, b));
        k.cmp(op, x, y)
    })
}

#[test]
fn integers_wrap_at_the_dtype_width() {
    assert_eq!(int_bin(DType::I32, BinOp::Add, i32::MAX as i64, 1), Some(Const::Int(i32::MIN as i64)));
    assert_eq!(int_bin(DType::I32, BinOp::Mul, 65536, 65536), Some(Const::Int(0)));
    assert_eq!(int_bin(DType::I8, BinOp::Sub, -128, 1), Some(Const::Int(127)));
    assert_eq!(int_bin(DType::U8, BinOp::Add, 255, 1), Some(Const::Int(0)));
    assert_eq!(int_bin(DType::U32, BinOp::Sub, 0, 1), Some(Const::Int(u32::MAX as i64)));
    assert_eq!(int_bin(DType::I64, BinOp::Add, i64::MAX, 1), Some(Const::Int(i64::MIN)));
    assert_eq!(int_bin(DType::I1, BinOp::Add, 1, 1), Some(Const::Int(0)));
}

#[test]
fn integer_division_truncates_and_remainder_takes_the_dividends_sign() {
    assert_eq!(int_bin(DType::I32, BinOp::IDiv, -7, 2), Some(Const::Int(-3)));
    assert_eq!(int_bin(DType::I32, BinOp::Rem, -7, 2), Some(Const::Int(-1)));
    assert_eq!(int_bin(DType::I32, BinOp::IDiv, 7, -2), Some(Const::Int(-3)));
    assert_eq!(int_bin(DType::I32, BinOp::Rem, 7, -2), Some(Const::Int(1)));
    // Unsigned operands divide as unsigned: u32::MAX is not -1.
    assert_eq!(int_bin(DType::U32, BinOp::IDiv, u32::MAX as i64, 2), Some(Const::Int(0x7fff_ffff)));
    assert_eq!(int_bin(DType::U64, BinOp::Rem, -1, 10), Some(Const::Int((u64::MAX % 10) as i64)));
}

#[test]
fn division_by_zero_is_left_alone() {
    for op in [BinOp::IDiv, BinOp::Rem] {
        assert_eq!(int_bin(DType::I32, op, 7, 0), None);
        assert_eq!(int_bin(DType::U8, op, 7, 0), None);
    }
    // The instruction itself stays.
    let mut func = build("k", |k| {
        let p = k.param("out", Type::ptr(DType::I32));
        let (x, y) = (k.int(DType::I32, 1), k.int(DType::I32, 0));
        let q = k.bin(BinOp::IDiv, x, y);
        k.store(p, q, None);
    });
    assert!(!fold::run(&mut func));
    assert_eq!(count(&func, "idiv"), 1);
}

#[test]
fn overflowing_division_wraps() {
    assert_eq!(int_bin(DType::I32, BinOp::IDiv, i32::MIN as i64, -1), Some(Const::Int(i32::MIN as i64)));
    assert_eq!(int_bin(DType::I32, BinOp::Rem, i32::MIN as i64, -1), Some(Const::Int(0)));
    assert_eq!(int_bin(DType::I64, BinOp::IDiv, i64::MIN, -1), Some(Const::Int(i64::MIN)));
}

#[test]
fn shifts_and_bitwise_ops_follow_signedness() {
    assert_eq!(int_bin(DType::I32, BinOp::Shr, -8, 1), Some(Const::Int(-4)));
    assert_eq!(int_bin(DType::U32, BinOp::Shr, u32::MAX as i64, 28), Some(Const::Int(15)));
    assert_eq!(int_bin(DType::I32, BinOp::Shl, 1, 31), Some(Const::Int(i32::MIN as i64)));
    assert_eq!(int_bin(DType::I8, BinOp::Xor, 0x0f, -1), Some(Const::Int(-16)));
    // Amounts are unsigned; the width or more shifts every bit out.
    assert_eq!(int_bin(DType::I32, BinOp::Shl, 1, 32), Some(Const::Int(0)));
    assert_eq!(int_bin(DType::I32, BinOp::Shr, -5, -1), Some(Const::Int(-1)));
    assert_eq!(int_bin(DType::U8, BinOp::Shr, 200, 9), Some(Const::Int(0)));
    assert_eq!(int_bin(DType::I8, BinOp::Shl, 1, 7), Some(Const::Int(-128)));
    assert_eq!(int_bin(DType::U32, BinOp::Max, u32::MAX as i64, 1), Some(Const::Int(u32::MAX as i64)));
    assert_eq!(int_bin(DType::I32, BinOp::Max, -1, 1), Some(Const::Int(1)));
}

#[test]
fn comparisons_honour_signedness() {
    assert_eq!(cmp(DType::U32, CmpOp::Gt, u32::MAX as i64, 1), Some(Const::Int(1)));
    assert_eq!(cmp(DType::I32, CmpOp::Gt, -1, 1), Some(Const::Int(0)));
    assert_eq!(cmp(DType::U64, CmpOp::Lt, 1, -1), Some(Const::Int(1)));
    assert_eq!(cmp(DType::I64, CmpOp::Lt, 1, -1), Some(Const::Int(0)));
    assert_eq!(cmp(DType::I32, CmpOp::Le, 3, 3), Some(Const::Int(1)));
}

#[test]
fn float_comparisons_are_ordered_except_ne() {
    let fcmp = |op, a: f64, b: f64| {
        fold_stored(DType::I1, |k| {
            let (x, y) = (k.float(DType::F32, a), k.float(DType::F32, b));
            k.cmp(op, x, y)
        })
    };
    assert_eq!(fcmp(CmpOp::Eq, f64::NAN, f64::NAN), Some(Const::Int(0)));
    assert_eq!(fcmp(CmpOp::Ne, f64::NAN, f64::NAN), Some(Const::Int(1)));
    assert_eq!(fcmp(CmpOp::Lt, f64::NAN, 1.0), Some(Const::Int(0)));
    assert_eq!(fcmp(CmpOp::Eq, 0.0, -0.0), Some(Const::Int(1)));
}

#[test]
fn fp32_arithmetic_rounds_to_fp32() {
    let a = 0.1f32 as f64;
    let b = 0.2f32 as f64;
    let sum = (0.1f32 + 0.2f32) as f64;
    assert_ne!(sum, a + b, "the f64 sum would be a different constant");
    assert_eq!(float_bin(DType::F32, BinOp::Add, a, b), Some(Const::Float(sum)));
    assert_eq!(float_bin(DType::F32, BinOp::Add, 16777216.0, 1.0), Some(Const::Float(16777216.0)));
    assert_eq!(float_bin(DType::F64, BinOp::Add, 16777216.0, 1.0), Some(Const::Float(16777217.0)));
    assert_eq!(float_bin(DType::F32, BinOp::Div, 1.0, 3.0), Some(Const::Float((1.0f32 / 3.0) as f64)));
    assert_eq!(float_bin(DType::F32, BinOp::Mul, 3.0e38, 10.0), Some(Const::Float(f64::INFINITY)));
    assert_eq!(float_bin(DType::F16, BinOp::Add, 2048.0, 1.0), Some(Const::Float(2048.0)));
    assert_eq!(float_bin(DType::F16, BinOp::Mul, 256.0, 256.0), Some(Const::Float(f64::INFINITY)));
    // Float division by zero is IEEE's, not a trap: it folds.
    assert_eq!(float_bin(DType::F32, BinOp::Div, -1.0, 0.0), Some(Const::Float(f64::NEG_INFINITY)));
    assert_eq!(float_bin(DType::F32, BinOp::IDiv, -7.0, 2.0), Some(Const::Float(-4.0)));
    assert_eq!(float_bin(DType::F32, BinOp::Rem, -7.0, 2.0), Some(Const::Float(-1.0)));
}

#[test]
fn float_min_max_propagate_nan_and_order_signed_zeros() {
    let nan = float_bin(DType::F32, BinOp::Min, f64::NAN, 1.0);
    assert!(matches!(nan, Some(Const::Float(f)) if f.is_nan()));
    assert_eq!(float_bin(DType::F32, BinOp::Max, -1.0, 2.0), Some(Const::Float(2.0)));
    assert_eq!(float_bin(DType::F32, BinOp::Min, 0.0, -0.0), Some(Const::Float(-0.0)));
    assert_eq!(float_bin(DType::F32, BinOp::Max, -0.0, 0.0), Some(Const::Float(0.0)));
    let min = float_bin(DType::F32, BinOp::Min, 0.0, -0.0);
    assert!(matches!(min, Some(Const::Float(z)) if z.is_sign_negative()));
}

#[test]
fn unary_math_in_the_dtypes_precision() {
    let un = |d, op, a: f64| {
        fold_stored(d, |k| {
            let x = k.float(d, a);
            k.un(op, x)
        })
    };
    assert_eq!(un(DType::F32, UnOp::Sqrt, 2.0), Some(Const::Float(2f32.sqrt() as f64)));
    assert_eq!(un(DType::F64, UnOp::Sqrt, 2.0), Some(Const::Float(2f64.sqrt())));
    assert_eq!(un(DType::F32, UnOp::Rsqrt, 4.0), Some(Const::Float(0.5)));
    assert_eq!(un(DType::F32, UnOp::Neg, 0.0), Some(Const::Float(-0.0)));
    assert_eq!(un(DType::F32, UnOp::Floor, -1.5), Some(Const::Float(-2.0)));
    assert_eq!(un(DType::F32, UnOp::Exp, 1.0), Some(Const::Float(lnc_bir::math::exp(1.0) as f64)));
    let int = |d, op, a| {
        fold_stored(d, |k| {
            let x = k.int(d, a);
            k.un(op, x)
        })
    };
    assert_eq!(int(DType::I32, UnOp::Neg, i32::MIN as i64), Some(Const::Int(i32::MIN as i64)));
    assert_eq!(int(DType::I32, UnOp::Abs, -5), Some(Const::Int(5)));
    assert_eq!(int(DType::I1, UnOp::Not, 1), Some(Const::Int(0)));
    assert_eq!(int(DType::U8, UnOp::Not, 0), Some(Const::Int(255)));
}

#[test]
fn casts_truncate_saturate_and_round() {
    use DType::*;
    assert_eq!(cast(F32, I32, Const::Float(3.9)), Some(Const::Int(3)));
    assert_eq!(cast(F32, I32, Const::Float(-3.9)), Some(Const::Int(-3)));
    assert_eq!(cast(F32, I32, Const::Float(1e10)), Some(Const::Int(i32::MAX as i64)));
    assert_eq!(cast(F32, I8, Const::Float(-1e10)), Some(Const::Int(-128)));
    assert_eq!(cast(F32, U8, Const::Float(-3.0)), Some(Const::Int(0)));
    assert_eq!(cast(F32, I32, Const::Float(f64::NAN)), Some(Const::Int(0)));
    assert_eq!(cast(F32, I1, Const::Float(0.5)), Some(Const::Int(1)));
    assert_eq!(cast(F32, I1, Const::Float(-0.0)), Some(Const::Int(0)));
    assert_eq!(cast(I32, I1, Const::Int(2)), Some(Const::Int(1)));
    assert_eq!(cast(I32, U8, Const::Int(-1)), Some(Const::Int(255)));
    assert_eq!(cast(I8, U32, Const::Int(-1)), Some(Const::Int(u32::MAX as i64)));
    assert_eq!(cast(U32, I64, Const::Int(u32::MAX as i64)), Some(Const::Int(u32::MAX as i64)));
    assert_eq!(cast(U64, F32, Const::Int(-1)), Some(Const::Float(u64::MAX as f32 as f64)));
    assert_eq!(cast(I32, F32, Const::Int(16777217)), Some(Const::Float(16777216.0)));
    assert_eq!(cast(I32, F16, Const::Int(65519)), Some(Const::Float(65504.0)));
    assert_eq!(cast(I32, F16, Const::Int(-65520)), Some(Const::Float(f64::NEG_INFINITY)));
    assert_eq!(cast(I32, F16, Const::Int(2049)), Some(Const::Float(2048.0)));
    // 2^53 + 2^45 + 1 is just above a bf16 midpoint; through f64 it would land on it.
    let big = (1i64 << 53) + (1 << 45) + 1;
    assert_eq!(cast(I64, BF16, Const::Int(big)), Some(Const::Float(((1i64 << 53) + (1 << 46)) as f64)));
    assert_eq!(cast(F64, F32, Const::Float(0.1)), Some(Const::Float(0.1f32 as f64)));
    assert_eq!(cast(F32, F16, Const::Float(65520.0)), Some(Const::Float(f64::INFINITY)));
    assert_eq!(cast(F32, F16, Const::Float(65519.0)), Some(Const::Float(65504.0)));
    assert_eq!(cast(F32, BF16, Const::Float(1.0 + 1.0 / 256.0)), Some(Const::Float(1.0)));
    // 1 + 2^-11 + 2^-40 is just above the midpoint of two fp16 neighbours: one rounding
    // goes up, while rounding to f32 first lands on the midpoint and ties down to 1.0.
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(cast(F64, F16, Const::Float(x)), Some(Const::Float(1.0 + 2f64.powi(-10))));
    // The smallest fp16 subnormal, and half of it (a tie, to even: zero).
    assert_eq!(cast(F64, F16, Const::Float(2f64.powi(-24))), Some(Const::Float(2f64.powi(-24))));
    assert_eq!(cast(F64, F16, Const::Float(2f64.powi(-25))), Some(Const::Float(0.0)));
}

#[test]
fn bitcasts_reinterpret_bits() {
    use DType::*;
    let bitcast = |from, to, a| {
        fold_stored(to, |k| {
            let x = match a {
                Const::Int(i) => k.int(from, i),
                Const::Float(f) => k.float(from, f),
            };
            let ty = k.ty(x).with_elem(Elem::Scalar(to));
            k.op(Opcode::Bitcast, &[x], ty)
        })
    };
    assert_eq!(bitcast(F32, I32, Const::Float(1.0)), Some(Const::Int(0x3f80_0000)));
    assert_eq!(bitcast(I32, F32, Const::Int(0x3f80_0000)), Some(Const::Float(1.0)));
    assert_eq!(bitcast(F32, U32, Const::Float(-0.0)), Some(Const::Int(0x8000_0000)));
    assert_eq!(bitcast(I32, U32, Const::Int(-1)), Some(Const::Int(u32::MAX as i64)));
    assert_eq!(bitcast(U32, F32, Const::Int(0x7fc0_0000)), None);
    assert_eq!(bitcast(F16, I16, Const::Float(-2.0)), Some(Const::Int(0xc000u16 as i16 as i64)));
    assert_eq!(bitcast(U16, BF16, Const::Int(0x3f80)), Some(Const::Float(1.0)));
}

#[test]
fn block_results_become_splats_of_constants() {
    let mut func = build("blocks", |k| {
        let p = k.block_param("out", DType::F32, 16);
        let two = k.float(DType::F32, 2.0);
        let three = k.float(DType::F32, 3.0);
        let a = k.splat(two, 16);
        let b = k.splat(three, 16);
        let m = k.bin(BinOp::Mul, a, b);
        let c = k.cmp(CmpOp::Lt, a, b);
        let s = k.select(c, m, a);
        let r = k.reduce(ReduceOp::Max, s);
        let rs = k.splat(r, 16);
        k.store(p, rs, None);
    });
    insta::assert_snapshot!(run_printed(fold::NAME, &mut func));
}

#[test]
fn integer_sum_of_a_constant_block_wraps() {
    let got = fold_stored(DType::I8, |k| {
        let x = k.int(DType::I8, 3);
        let b = k.splat(x, 128);
        k.reduce(ReduceOp::Sum, b)
    });
    assert_eq!(got, Some(Const::Int((3i8).wrapping_mul(-128i8) as i64)));
    let float_sum = fold_stored(DType::F32, |k| {
        let x = k.float(DType::F32, 0.1);
        let b = k.splat(x, 128);
        k.reduce(ReduceOp::Sum, b)
    });
    assert_eq!(float_sum, None, "float sums depend on the summation order");
}

#[test]
fn masks_against_arange_fold_when_uniform() {
    let mask = |op, n: i64| {
        let mut func = build("k", |k| {
            let p = k.block_param("out", DType::I1, 8);
            let cols = k.arange(0, 8);
            let c = k.int(DType::I32, n);
            let cs = k.splat(c, 8);
            let m = k.cmp(op, cols, cs);
            k.store(p, m, None);
        });
        fold::run(&mut func);
        must_verify(&func, "after folding");
        const_of(&func, stored(&func, 0))
    };
    assert_eq!(mask(CmpOp::Lt, 8), Some(Const::Int(1)));
    assert_eq!(mask(CmpOp::Lt, 100), Some(Const::Int(1)));
    assert_eq!(mask(CmpOp::Lt, 7), None);
    assert_eq!(mask(CmpOp::Lt, 0), Some(Const::Int(0)));
    assert_eq!(mask(CmpOp::Ge, 0), Some(Const::Int(1)));
    assert_eq!(mask(CmpOp::Eq, 8), Some(Const::Int(0)));
    assert_eq!(mask(CmpOp::Eq, 3), None);
    assert_eq!(mask(CmpOp::Ne, -1), Some(Const::Int(1)));
}

#[test]
fn if_with_a_constant_condition_is_inlined() {
    let mut func = build("branch", |k| {
        let p = k.param("out", Type::ptr(DType::I32));
        let x = k.param("x", Type::scalar(DType::I32));
        let one = k.int(DType::I32, 1);
        let two = k.int(DType::I32, 2);
        let c = k.cmp(CmpOp::Lt, one, two);
        let r = k.if_else(
            c,
            &[Type::scalar(DType::I32)],
            |k| {
                let y = k.bin(BinOp::Add, x, one);
                k.store(p, y, None);
                vec![y]
            },
            |_| vec![x],
        );
        k.store(p, r[0], None);
    });
    insta::assert_snapshot!(run_printed(fold::NAME, &mut func));
}

#[test]
fn folds_inside_loops_and_selects() {
    let mut func = build("loop", |k| {
        let p = k.param("out", Type::ptr(DType::F32));
        let lb = k.int(DType::I32, 0);
        let ub = k.int(DType::I32, 4);
        let st = k.int(DType::I32, 1);
        let z = k.float(DType::F32, 0.0);
        let r = k.for_loop(lb, ub, st, &[z], |k, _, acc| {
            let half = k.float(DType::F32, 0.5);
            let q = k.bin(BinOp::Mul, half, half);
            let t = k.int(DType::I1, 0);
            let s = k.select(t, half, q);
            vec![k.bin(BinOp::Add, acc[0], s)]
        });
        k.store(p, r[0], None);
    });
    insta::assert_snapshot!(run_printed(fold::NAME, &mut func));
}
