//! Integer semantics on every integer dtype (`tests/kernels/int_dtypes.py`): `int8` …
//! `int64` and `uint8` … `uint64`, each through wrapping `+ - *`, C `//` and `%`, shifts
//! by amounts up to twice the bit width, the six comparisons, `& | ^`, unary `-` and `~` —
//! on the dtype's edge values and seeded random values, against Rust references and
//! through the differential harness.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::*;
use common::*;
use rand::Rng;

fn module() -> lnc::Module {
    load("int_dtypes.py")
}

/// Runs `$case!(m, rng, type, Data variant, signature entry)` for the 8 integer dtypes.
macro_rules! for_each_int_dtype {
    ($case:ident, $m:expr, $rng:expr) => {
        $case!($m, $rng, i8, I8, "i8");
        $case!($m, $rng, i16, I16, "i16");
        $case!($m, $rng, i32, I32, "i32");
        $case!($m, $rng, i64, I64, "i64");
        $case!($m, $rng, u8, U8, "u8");
        $case!($m, $rng, u16, U16, "u16");
        $case!($m, $rng, u32, U32, "u32");
        $case!($m, $rng, u64, U64, "u64");
    };
}

/// The values of a dtype worth testing, sorted and distinct: its extremes, the values
/// around zero (-2 and -1 are MAX - 1 and MAX when unsigned) and the middle of the range
/// (the sign boundary of the other signedness).
macro_rules! edges {
    ($t:ty) => {{
        let mut v: Vec<$t> = vec![
            <$t>::MIN,
            <$t>::MIN.wrapping_add(1),
            (0 as $t).wrapping_sub(2),
            (0 as $t).wrapping_sub(1),
            0,
            1,
            2,
            <$t>::MAX / 2,
            (<$t>::MAX / 2).wrapping_add(1),
            <$t>::MAX - 1,
            <$t>::MAX,
        ];
        v.sort_unstable();
        v.dedup();
        v
    }};
}

/// A random value: over the whole range half of the time, small (|v| < 16, or within 16 of
/// MAX when unsigned) otherwise.
macro_rules! random_int {
    ($rng:expr, $t:ty) => {
        if $rng.random() { $rng.random::<$t>() } else { ($rng.random::<i8>() / 8) as $t }
    };
}

/// `n` operand pairs that `keep` accepts: every pair of `edges` first, then random pairs.
fn operands<T: Copy>(
    n: usize,
    edges: &[T],
    keep: impl Fn(T, T) -> bool,
    mut random: impl FnMut() -> (T, T),
) -> (Vec<T>, Vec<T>) {
    let mut pairs: Vec<(T, T)> =
        edges.iter().flat_map(|&a| edges.iter().map(move |&b| (a, b))).filter(|&(a, b)| keep(a, b)).collect();
    assert!(pairs.len() <= n, "{} edge pairs do not fit in {n} elements", pairs.len());
    while pairs.len() < n {
        let (a, b) = random();
        if keep(a, b) {
            pairs.push((a, b));
        }
    }
    pairs.into_iter().unzip()
}

/// The expression an assertion checks, for its message: `x op y`, or `op x` when unary.
fn expr(op: &str, x: impl std::fmt::Display, y: impl std::fmt::Display) -> String {
    match op {
        "unary -" => format!("-({x})"),
        "~" => format!("~({x})"),
        _ => format!("{x} {op} {y}"),
    }
}

/// Checks that the `width` slots past the `n` elements of an output were never written
/// (the lanes of the last program past `n` are masked off).
#[track_caller]
fn assert_tail_untouched<T: PartialEq + std::fmt::Debug>(
    o: &[T],
    n: usize,
    width: usize,
    poison: T,
    sig: &str,
) {
    assert_eq!(o.len(), (n + 1) * width, "{sig}: output length");
    for (k, v) in o[n * width..].iter().enumerate() {
        assert_eq!(*v, poison, "{sig}: masked-off slot {} was written", n * width + k);
    }
}

macro_rules! wrap_bitwise_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        // 3 programs of 64, the last one partial.
        let (n, block) = (157usize, 64usize);
        let (a, b) = operands(n, &edges!($t), |_, _| true, || (random_int!($rng, $t), random_int!($rng, $t)));
        let poison = POISON_I32 as $t;
        let case = Case::new(
            "wrap_bitwise",
            &format!("*{s},*{s},*{s},i32,{block}", s = $sig),
            n.div_ceil(block) as u32,
            vec![a.clone().into(), b.clone().into(), vec![poison; 8 * (n + 1)].into(), (n as i32).into()],
        );
        let out = diff(&$m, &case);
        let Data::$var(o) = out[2].data() else { unreachable!() };
        for k in 0..n {
            let (x, y) = (a[k], b[k]);
            let want = [
                ("+", x.wrapping_add(y)),
                ("-", x.wrapping_sub(y)),
                ("*", x.wrapping_mul(y)),
                ("&", x & y),
                ("|", x | y),
                ("^", x ^ y),
                ("unary -", x.wrapping_neg()),
                ("~", !x),
            ];
            for (j, (op, w)) in want.into_iter().enumerate() {
                assert_eq!(o[8 * k + j], w, "{} ({}), element {k}", expr(op, x, y), $sig);
            }
        }
        assert_tail_untouched(o, n, 8, poison, $sig);
    }};
}

#[test]
fn wrapping_arithmetic_bitwise_negation_and_complement() {
    let m = module();
    let mut rng = rng();
    for_each_int_dtype!(wrap_bitwise_case, m, rng);
}

macro_rules! div_rem_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        // One program of 256 (the next power of two), most of it masked off.
        let (n, block) = (149usize, 256usize);
        let edges = edges!($t);
        let (mut a, mut b) =
            operands(n, &edges, |_, y| y != 0, || (random_int!($rng, $t), random_int!($rng, $t)));
        // Hand-picked, at the end: signs of dividend and divisor, and MIN // -1 (wraps to
        // MIN, remainder 0) when signed.
        let picked: [(i64, i64); 6] =
            [(7, 2), (-7, 2), (7, -2), (-7, -2), (<$t>::MIN as i64, -1), (-1, <$t>::MIN as i64)];
        for (k, &(x, y)) in picked.iter().enumerate() {
            if <$t>::MIN == 0 && (x < 0 || y < 0) {
                continue;
            }
            a[n - 1 - k] = x as $t;
            b[n - 1 - k] = y as $t;
        }
        assert!(b.iter().all(|&y| y != 0), "a zero divisor ({})", $sig);
        let poison = POISON_I32 as $t;
        let case = Case::new(
            "div_rem",
            &format!("*{s},*{s},*{s},i32,{block}", s = $sig),
            n.div_ceil(block) as u32,
            vec![a.clone().into(), b.clone().into(), vec![poison; 2 * (n + 1)].into(), (n as i32).into()],
        );
        let out = diff(&$m, &case);
        let Data::$var(o) = out[2].data() else { unreachable!() };
        for k in 0..n {
            let (x, y) = (a[k], b[k]);
            assert_eq!(o[2 * k], x.wrapping_div(y), "{x} // {y} ({}), element {k}", $sig);
            assert_eq!(o[2 * k + 1], x.wrapping_rem(y), "{x} % {y} ({}), element {k}", $sig);
        }
        if <$t>::MIN != 0 {
            let min = <$t>::MIN;
            assert_eq!((o[2 * (n - 5)], o[2 * (n - 5) + 1]), (min, 0), "MIN // -1, MIN % -1 ({})", $sig);
            let signs = [o[2 * (n - 4)], o[2 * (n - 4) + 1], o[2 * (n - 3)], o[2 * (n - 3) + 1]];
            assert_eq!(signs.map(|v| v as i64), [3, -1, -3, 1], "-7 // -2, -7 % -2, 7 // -2, 7 % -2");
        }
        assert_tail_untouched(o, n, 2, poison, $sig);
    }};
}

#[test]
fn division_truncates_and_remainder_takes_the_dividend_sign() {
    let m = module();
    let mut rng = rng();
    for_each_int_dtype!(div_rem_case, m, rng);
}

macro_rules! shifts_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        let bits = <$t>::BITS as usize;
        let signed = <$t>::MIN != 0;
        // Every amount in 0..2 * bits, once on a value with the top bit set and once on one
        // with it clear; then the largest amounts on the extremes. Not a multiple of 4.
        let n = 4 * bits + 5;
        let block = 32usize;
        let top: $t = (1 as $t) << (bits - 1);
        let mut a: Vec<$t> = (0..4 * bits)
            .map(|k| {
                let r: $t = $rng.random();
                if k < 2 * bits { r | top } else { r & !top }
            })
            .collect();
        let mut s: Vec<$t> = (0..4 * bits).map(|k| (k % (2 * bits)) as $t).collect();
        let minus_one = (0 as $t).wrapping_sub(1);
        for (x, y) in [
            (<$t>::MIN, <$t>::MAX),
            (minus_one, <$t>::MAX),
            (<$t>::MAX, <$t>::MAX / 2 + 1),
            (minus_one, bits as $t),
            (<$t>::MIN, (bits - 1) as $t),
        ] {
            a.push(x);
            s.push(y);
        }
        let poison = POISON_I32 as $t;
        let case = Case::new(
            "shifts",
            &format!("*{s},*{s},*{s},i32,{block}", s = $sig),
            n.div_ceil(block) as u32,
            vec![a.clone().into(), s.clone().into(), vec![poison; 2 * (n + 1)].into(), (n as i32).into()],
        );
        let out = diff(&$m, &case);
        let Data::$var(o) = out[2].data() else { unreachable!() };
        for k in 0..n {
            let (x, amount) = (a[k], s[k] as u64);
            let shl = if amount < bits as u64 { x << amount } else { 0 };
            // `>>` is arithmetic on signed Rust types and logical on unsigned ones.
            let shr = if amount < bits as u64 {
                x >> amount
            } else if signed {
                x >> (bits - 1)
            } else {
                0
            };
            assert_eq!(o[2 * k], shl, "{x} << {amount} ({}), element {k}", $sig);
            assert_eq!(o[2 * k + 1], shr, "{x} >> {amount} ({}), element {k}", $sig);
        }
        assert_tail_untouched(o, n, 2, poison, $sig);
    }};
}

#[test]
fn shifts_by_up_to_twice_the_width() {
    let m = module();
    let mut rng = rng();
    for_each_int_dtype!(shifts_case, m, rng);
}

macro_rules! compares_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        let (n, block) = (157usize, 64usize);
        // A quarter of the random pairs are equal.
        let (a, b) = operands(
            n,
            &edges!($t),
            |_, _| true,
            || {
                let x = random_int!($rng, $t);
                (x, if $rng.random_ratio(1, 4) { x } else { random_int!($rng, $t) })
            },
        );
        let poison = POISON_I32 as i8;
        let case = Case::new(
            "compares",
            &format!("*{s},*{s},*i8,i32,{block}", s = $sig),
            n.div_ceil(block) as u32,
            vec![a.clone().into(), b.clone().into(), vec![poison; 6 * (n + 1)].into(), (n as i32).into()],
        );
        let out = diff(&$m, &case);
        let Data::I8(o) = out[2].data() else { unreachable!() };
        for k in 0..n {
            let (x, y) = (a[k], b[k]);
            let want =
                [("<", x < y), ("<=", x <= y), ("==", x == y), ("!=", x != y), (">", x > y), (">=", x >= y)];
            for (j, (op, w)) in want.into_iter().enumerate() {
                assert_eq!(o[6 * k + j], w as i8, "{x} {op} {y} ({}), element {k}", $sig);
            }
        }
        assert_tail_untouched(o, n, 6, poison, $sig);
    }};
}

#[test]
fn comparisons_are_signed_or_unsigned_by_dtype() {
    let m = module();
    let mut rng = rng();
    for_each_int_dtype!(compares_case, m, rng);
}

macro_rules! scalar_case {
    ($m:expr, $rng:expr, $t:ty, $var:ident, $sig:literal) => {{
        let bits = <$t>::BITS as u64;
        let signed = <$t>::MIN != 0;
        // One program per element; the edge pairs do not all fit, so take them at random.
        let n = 37usize;
        let edges = edges!($t);
        let pick = |rng: &mut rand::rngs::StdRng| -> $t {
            if rng.random() { edges[rng.random_range(0..edges.len())] } else { random_int!(rng, $t) }
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        while a.len() < n {
            let (x, y) = (pick(&mut $rng), pick(&mut $rng));
            if y != 0 {
                a.push(x);
                b.push(y);
            }
        }
        let s: Vec<$t> = (0..n).map(|_| $rng.random_range(0..2 * bits) as $t).collect();
        let want_cmp: Vec<bool> = (0..n)
            .flat_map(|k| {
                let (x, y) = (a[k], b[k]);
                [x < y, x <= y, x == y, x != y, x > y, x >= y]
            })
            .collect();
        let poison = POISON_I32 as $t;
        // The int1 output starts as the opposite of every expected result.
        let case = Case::new(
            "scalar_ops",
            &format!("*{s},*{s},*{s},*{s},*i1", s = $sig),
            n as u32,
            vec![
                a.clone().into(),
                b.clone().into(),
                s.clone().into(),
                vec![poison; 12 * n].into(),
                want_cmp.iter().map(|&w| !w).collect::<Vec<bool>>().into(),
            ],
        );
        let out = diff(&$m, &case);
        let Data::$var(o) = out[3].data() else { unreachable!() };
        let Data::I1(c) = out[4].data() else { unreachable!() };
        for k in 0..n {
            let (x, y, amount) = (a[k], b[k], s[k] as u64);
            let want = [
                ("+", x.wrapping_add(y)),
                ("-", x.wrapping_sub(y)),
                ("*", x.wrapping_mul(y)),
                ("&", x & y),
                ("|", x | y),
                ("^", x ^ y),
                ("unary -", x.wrapping_neg()),
                ("~", !x),
                ("//", x.wrapping_div(y)),
                ("%", x.wrapping_rem(y)),
                ("<<", if amount < bits { x << amount } else { 0 }),
                (
                    ">>",
                    if amount < bits {
                        x >> amount
                    } else if signed {
                        x >> (bits - 1)
                    } else {
                        0
                    },
                ),
            ];
            for (j, (op, w)) in want.into_iter().enumerate() {
                let rhs = if j >= 10 { amount.to_string() } else { y.to_string() };
                assert_eq!(o[12 * k + j], w, "scalar {} ({}), program {k}", expr(op, x, rhs), $sig);
            }
            for (j, op) in ["<", "<=", "==", "!=", ">", ">="].into_iter().enumerate() {
                assert_eq!(c[6 * k + j], want_cmp[6 * k + j], "scalar {x} {op} {y} ({}), program {k}", $sig);
            }
        }
    }};
}

#[test]
fn scalar_operations_on_every_dtype() {
    let m = module();
    let mut rng = rng();
    for_each_int_dtype!(scalar_case, m, rng);
}

/// Arithmetic on `int1` values is arithmetic on one bit, modulo 2, as compiled Triton
/// computes it (`True + True` is `False`), on blocks and on scalars; division and
/// remainder by zero give 0 and a shift by 1 shifts the bit out, as for every integer
/// type. It stopped code generation with an internal error before.
#[test]
fn bool_arithmetic_is_modulo_two() {
    let m = module();
    let pairs = [(0i32, 0i32), (0, 1), (1, 0), (1, 1)];
    let x: Vec<i32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let case = Case::new("bool_arithmetic", "*i32,*i32", 4, vec![x.into(), vec![POISON_I32; 4 * 64].into()]);
    let out = diff(&m, &case)[1].data().to_i64s();
    for (k, &(a, b)) in pairs.iter().enumerate() {
        let want = [
            a ^ b,
            a ^ b,
            a & b,
            if b == 0 { 0 } else { a },
            0,
            if b == 0 { a } else { 0 },
            if b == 0 { a } else { 0 },
            a,
        ];
        for program in 0..4 {
            let block = &out[program * 64 + k * 8..][..8];
            let want: Vec<i64> = want.iter().map(|&v| v as i64).collect();
            assert_eq!(
                block,
                &want[..],
                "block lanes of pair ({a}, {b}), program {program}: + - * // % << >> -a"
            );
        }
        assert_eq!(
            &out[k * 64 + 32..][..8],
            &want.map(|v| v as i64)[..],
            "scalars ({a}, {b}): + - * // % << >> -a"
        );
    }
}
