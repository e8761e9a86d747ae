//! Triton's subtle semantics (`tests/kernels/semantics.py`): C integer division and
//! remainder, type promotion, signed/unsigned comparisons, literal types, shifts and
//! wrapping — against Rust references and through the differential harness.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::*;
use common::*;
use rand::Rng;
use rand::rngs::StdRng;

fn module() -> lnc::Module {
    load("semantics.py")
}

macro_rules! div_mod_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        let n = 203usize;
        let mut a: Vec<$t> = (0..n).map(|_| $rng.random()).collect();
        let mut b: Vec<$t> = (0..n)
            .map(|_| {
                loop {
                    // Small and large divisors, never zero.
                    let v: $t =
                        if $rng.random() { $rng.random::<$t>() } else { ($rng.random::<i8>() / 8) as $t };
                    if v != 0 {
                        break v;
                    }
                }
            })
            .collect();
        // Hand-picked: signs of dividend and divisor, and MIN / -1 (wraps to MIN, remainder 0).
        let edge: [(i64, i64); 6] =
            [(7, 2), (-7, 2), (7, -2), (-7, -2), (<$t>::MIN as i64, -1), (-1, <$t>::MIN as i64)];
        for (k, &(x, y)) in edge.iter().enumerate() {
            if <$t>::MIN == 0 && (x < 0 || y < 0) {
                continue;
            }
            a[k] = x as $t;
            b[k] = y as $t;
        }
        let case = Case::new(
            "div_mod",
            &format!("*{s},*{s},*{s},*{s},i32,64", s = $sig),
            n.div_ceil(64) as u32,
            vec![
                a.clone().into(),
                b.clone().into(),
                vec![0x3b as $t; n].into(),
                vec![0x3b as $t; n].into(),
                (n as i32).into(),
            ],
        );
        let out = diff(&$m, &case);
        let (Data::$var(q), Data::$var(r)) = (out[2].data(), out[3].data()) else { unreachable!() };
        for k in 0..n {
            assert_eq!(q[k], a[k].wrapping_div(b[k]), "{} // {} ({})", a[k], b[k], $sig);
            assert_eq!(r[k], a[k].wrapping_rem(b[k]), "{} % {} ({})", a[k], b[k], $sig);
        }
    }};
}

#[test]
fn integer_division_truncates_and_remainder_takes_the_dividend_sign() {
    let m = module();
    let mut rng = rng();
    div_mod_case!(m, rng, i8, I8, "i8");
    div_mod_case!(m, rng, i16, I16, "i16");
    div_mod_case!(m, rng, i32, I32, "i32");
    div_mod_case!(m, rng, i64, I64, "i64");
    div_mod_case!(m, rng, u8, U8, "u8");
    div_mod_case!(m, rng, u16, U16, "u16");
    div_mod_case!(m, rng, u32, U32, "u32");
    div_mod_case!(m, rng, u64, U64, "u64");
}

#[test]
fn scalar_division_with_literals_on_either_side() {
    let m = module();
    let mut rng = rng();
    let n = 41usize;
    let mut a: Vec<i32> = (0..n).map(|_| rng.random_range(-10_000..10_000)).collect();
    let mut b: Vec<i32> =
        (0..n).map(|_| rng.random_range(1..50) * if rng.random() { 1 } else { -1 }).collect();
    a[..4].copy_from_slice(&[7, -7, 7, -7]);
    b[..4].copy_from_slice(&[2, 2, -2, -2]);
    let case = Case::new(
        "div_mod_scalar",
        "*i32,*i32,*i32,i32",
        n as u32,
        vec![a.clone().into(), b.clone().into(), vec![POISON_I32; 8 * n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let o = out[2].data().to_i64s();
    for k in 0..n {
        let (x, y) = (a[k], b[k]);
        let want = [x / y, x % y, x / 7, x % 7, x / -7, x % -7, -1000 / y, 1000 % y].map(|v| v as i64);
        assert_eq!(&o[8 * k..8 * k + 8], &want, "a = {x}, b = {y}");
    }
    assert_eq!(&o[..16], &[3, 1, 1, 0, -1, 0, -500, 0, -3, -1, -1, 0, 1, 0, -500, 0]);
}

#[test]
fn true_division_of_integers_and_float_remainder() {
    let m = module();
    let mut rng = rng();
    let n = 99usize;
    for sig in ["i32", "i64"] {
        let a: Vec<i64> = (0..n).map(|_| rng.random_range(-100_000..100_000)).collect();
        let b: Vec<i64> =
            (0..n).map(|_| rng.random_range(1..300) * if rng.random() { 1 } else { -1 }).collect();
        let (ad, bd): (Data, Data) = if sig == "i32" {
            (
                Data::I32(a.iter().map(|&v| v as i32).collect()),
                Data::I32(b.iter().map(|&v| v as i32).collect()),
            )
        } else {
            (Data::I64(a.clone()), Data::I64(b.clone()))
        };
        let case = Case::new(
            "true_div",
            &format!("*{sig},*{sig},*fp32,i32,32"),
            n.div_ceil(32) as u32,
            vec![A::Buf(ad, 0), A::Buf(bd, 0), vec![NAN32; 3 * n].into(), (n as i32).into()],
        )
        .check(2, Check::Exact);
        let out = diff(&m, &case);
        let o = out[2].data().to_f64s();
        for k in 0..n {
            let (x, y) = (a[k] as f32, b[k] as f32);
            let af = x * 0.75;
            assert_eq!(o[3 * k], (x / y) as f64, "{} / {} ({sig})", a[k], b[k]);
            assert_eq!(o[3 * k + 1], (af % y) as f64, "{af} % {y}: fmod");
            assert_eq!(o[3 * k + 2], (af / 2.0) as f64);
        }
    }
}

#[test]
fn type_promotion() {
    let m = module();
    let mut rng: StdRng = rng();
    let n = 77usize;
    let i8s: Vec<i8> = (0..n).map(|_| rng.random()).collect();
    let i32s: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    let u32s: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let i64s: Vec<i64> = (0..n).map(|_| rng.random_range(-1 << 20..1 << 20)).collect();
    let f32s: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0..10.0)).collect();
    let f64s: Vec<f64> = (0..n).map(|_| rng.random_range(-10.0..10.0)).collect();
    let case = Case::new(
        "promotion",
        "*i8,*i32,*u32,*i64,*fp32,*fp64,*i32,*u32,*i64,*fp32,*fp64,*i8,i32,32",
        n.div_ceil(32) as u32,
        vec![
            i8s.clone().into(),
            i32s.clone().into(),
            u32s.clone().into(),
            i64s.clone().into(),
            f32s.clone().into(),
            f64s.clone().into(),
            vec![POISON_I32; n].into(),
            vec![7u32; n].into(),
            vec![7i64; n].into(),
            vec![NAN32; 2 * n].into(),
            vec![f64::NAN; n].into(),
            vec![7i8; n].into(),
            (n as i32).into(),
        ],
    )
    .check(9, Check::Exact)
    .check(10, Check::Exact);
    let out = diff(&m, &case);
    let Data::U32(ou32) = out[7].data() else { unreachable!() };
    let Data::I8(oi8) = out[11].data() else { unreachable!() };
    for k in 0..n {
        let (i8v, i32v, u32v, i64v, f32v, f64v) = (i8s[k], i32s[k], u32s[k], i64s[k], f32s[k], f64s[k]);
        assert_eq!(out[6].data().to_i64s()[k], (i8v as i32).wrapping_add(i32v) as i64, "int8 + int32");
        assert_eq!(ou32[k], (i32v as u32).wrapping_add(u32v), "int32 + uint32 is uint32");
        assert_eq!(
            out[8].data().to_i64s()[k],
            (i64v + u32v as i64).wrapping_mul(i32v as i64),
            "int64 + uint32 is int64"
        );
        let d = i32v as f32 * f32v + i8v as f32;
        assert_eq!(out[9].data().get_f64(k), d as f64, "int32 * float32 + int8");
        assert_eq!(out[10].data().get_f64(k), (f32v as f64 + f64v) * i64v as f64, "float32 + float64");
        assert_eq!(oi8[k], i8v.wrapping_add(100), "int8 + 100 stays int8");
        assert_eq!(out[9].data().get_f64(n + k), (i8v as f32 * 2.5) as f64, "int8 * 2.5 is float32");
    }
}

#[test]
fn comparisons_between_signed_and_unsigned() {
    let m = module();
    let mut rng = rng();
    let n = 130usize;
    let mut i: Vec<i32> = (0..n).map(|_| rng.random_range(-10..10)).collect();
    let mut u: Vec<u32> =
        (0..n).map(|_| if rng.random() { rng.random_range(0..10) } else { rng.random() }).collect();
    let w: Vec<i64> = (0..n).map(|_| rng.random_range(-10..10)).collect();
    i[..3].copy_from_slice(&[-1, -1, 5]);
    u[..3].copy_from_slice(&[1, u32::MAX, 2147483648]);
    let case = Case::new(
        "signed_unsigned",
        "*i32,*u32,*i64,*i32,i32,16",
        n.div_ceil(16) as u32,
        vec![
            i.clone().into(),
            u.clone().into(),
            w.clone().into(),
            vec![POISON_I32; 6 * n].into(),
            (n as i32).into(),
        ],
    );
    let out = diff(&m, &case);
    let o = out[3].data().to_i64s();
    for k in 0..n {
        let (a, b, c) = (i[k], u[k], w[k]);
        let want = [
            ((a as u32) < b) as i32,
            ((a as u32) == b) as i32,
            (c < b as i64) as i32,
            (b > 2147483648) as i32,
            (a >= -5) as i32,
            (b >> 31).wrapping_add((a >> 31) as u32) as i32,
        ]
        .map(|v| v as i64);
        assert_eq!(&o[6 * k..6 * k + 6], &want, "i = {a}, u = {b}, w = {c}");
    }
    // -1 < 1 is false once -1 is read as uint32; -1 == 4294967295 is true.
    assert_eq!((o[0], o[7]), (0, 1));
}

#[test]
fn literal_types_and_constant_folding() {
    let m = module();
    for x in [0i32, 1, -1, 5, i32::MAX, i32::MIN, 123456] {
        let case = Case::new("literals", "*i64,i32", 1, vec![vec![i64::MIN; 9].into(), x.into()]);
        let out = diff(&m, &case);
        let want = [
            x.wrapping_add(2147483647) as i64,
            3000000000u32.wrapping_add(x as u32) as i64,
            (1i64 << 40) + x as i64,
            x.wrapping_add(3) as i64,
            // Python folds `-7 // 2` to -4 and `-7 % 3` to 2 (compile-time values are Python's).
            x.wrapping_add(-4) as i64,
            x.wrapping_add(2) as i64,
            // At run time, C: 7 // -2 = -3, -7 % 3 = -1.
            -3,
            -1,
            i64::MIN,
        ];
        assert_eq!(out[0].data().to_i64s(), want.to_vec(), "x = {x}");
    }
}

#[test]
fn shifts_and_wrapping_arithmetic() {
    let m = module();
    let mut rng = rng();
    let n = 71usize;
    let mut i: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    let u: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    i[..3].copy_from_slice(&[-1, i32::MIN, i32::MAX]);
    let case = Case::new(
        "shifts_and_wrap",
        "*i32,*u32,*i32,i32,8",
        n.div_ceil(8) as u32,
        vec![i.clone().into(), u.clone().into(), vec![POISON_I32; 5 * n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let o = out[2].data().to_i64s();
    for k in 0..n {
        let (a, b) = (i[k], u[k]);
        let want = [a >> 3, (b >> 3) as i32, a.wrapping_shl(5), a.wrapping_mul(65537), (!a ^ (a & 0xFF)) | 1];
        assert_eq!(&o[5 * k..5 * k + 5], &want.map(|v| v as i64), "i = {a}, u = {b}");
    }
}

#[test]
fn comparisons_with_nan_are_ieee() {
    let m = module();
    let vals = [f32::NAN, -f32::NAN, 0.0, -0.0, 1.0, -1.5, f32::INFINITY, f32::NEG_INFINITY];
    let (x, y): (Vec<f32>, Vec<f32>) = vals.iter().flat_map(|&a| vals.iter().map(move |&b| (a, b))).unzip();
    let n = x.len();
    let case = Case::new(
        "nan_compares",
        "*fp32,*fp32,*i8,i32,16",
        n.div_ceil(16) as u32,
        vec![x.clone().into(), y.clone().into(), vec![-1i8; 6 * n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let o = out[2].data().to_i64s();
    for k in 0..n {
        let (a, b) = (x[k], y[k]);
        let want = [a == b, a != b, a < b, a >= b, a.is_nan()].map(|v| v as i64);
        assert_eq!(&o[6 * k..6 * k + 5], &want, "{a} vs {b}");
        assert_eq!(o[6 * k + 5], (a > b) as i64 + 2 * (a <= b) as i64, "{a} vs {b}: where");
    }
}

#[test]
fn rejected_operations_are_diagnosed() {
    let m = module();
    let cases = [
        ("bad_unsigned_literal", "*u32,*u32", "negative constant"),
        ("bad_literal_range", "*i32,*i32", "out of range"),
        ("bad_float_floordiv", "*fp32,*fp32", "`//` needs integer operands"),
        ("bad_mixed_sign_div", "*i32,*u32,*i32", "same signedness"),
    ];
    for (kernel, sig, msg) in cases {
        let e = m.kernel(kernel, sig).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, lnc::Error::Source(_)), "{kernel}: {text}");
        assert!(text.contains(msg), "{kernel}: expected `{msg}` in\n{text}");
        assert!(text.contains("semantics.py:"), "{kernel}: no source location in\n{text}");
    }
}

/// A name defined twice is bound to its last definition, as Python binds it: the kernel
/// compiled, the helper a kernel calls, and the listing of the module's kernels.
#[test]
fn the_last_definition_of_a_name_wins() {
    const SRC: &str = r#"import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x + 1.0


@triton.jit
def k(X):
    tl.store(X, 1.0)


@triton.jit
def helper(x):
    return x + 10.0


@triton.jit
def k(X):
    tl.store(X, helper(2.0))
"#;
    let m = lnc::Jit::new().module("dup.py", SRC).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = m.kernels().into_iter().map(|k| k.name).collect();
    assert_eq!(names, ["helper", "k"]);
    assert_eq!(m.kernels()[1].location.0, 21, "the second `k`");
    let k = m.kernel("k", "*fp32").unwrap();
    let mut x = vec![0.0f32];
    k.launch(1, &lnc::args![&mut x]).unwrap();
    assert_eq!(x, [12.0]);
}
