//! Lanewise semantics of every dtype against Rust, on random data with edge values, for
//! vector, multi-vector and scalarized tiles.

mod common;

use std::fmt::Debug;

use common::*;
use lnc_clif::CodegenOptions;
use lnc_lir::*;
use lnc_runtime::pack_int;
use rand::{Rng, SeedableRng, rngs::StdRng};

trait Elem: Copy + Debug + PartialEq + 'static {
    const D: DType;
    fn sample(rng: &mut StdRng) -> Self;
    /// The value of an integer constant of the IR (wrapped as the type computes it).
    fn of_int(v: i64) -> Self;
    fn bin(op: BinOp, a: Self, b: Self) -> Option<Self>;
    fn un(op: UnOp, a: Self) -> Option<Self>;
    fn cmp(op: CmpOp, a: Self, b: Self) -> bool;
    /// Equal, NaNs of any payload included.
    fn same(a: Self, b: Self) -> bool;
    /// [`Elem::same`], or (floats) finite, of one sign and at most `ulps` representable
    /// values apart.
    fn near(a: Self, b: Self, _ulps: u64) -> bool {
        Self::same(a, b)
    }
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn add(a: Self, b: Self) -> Self;
}

fn cmp_by<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    op.holds(a, b)
}

macro_rules! int_elem {
    ($t:ty, $ut:ty, $d:expr, $signed:expr) => {
        impl Elem for $t {
            const D: DType = $d;
            fn of_int(v: i64) -> Self {
                v as $t
            }
            fn sample(rng: &mut StdRng) -> Self {
                match rng.random_range(0..4) {
                    0 => [0 as $t, 1 as $t, <$t>::MAX, <$t>::MIN, (0 as $t).wrapping_sub(1)]
                        [rng.random_range(0..5)],
                    1 => rng.random::<$t>(),
                    _ => rng.random_range(-3i64..70) as $t,
                }
            }
            fn bin(op: BinOp, a: Self, b: Self) -> Option<Self> {
                let bits = <$t>::BITS as u64;
                let amount = b as $ut as u64;
                Some(match op {
                    BinOp::Add => a.wrapping_add(b),
                    BinOp::Sub => a.wrapping_sub(b),
                    BinOp::Mul => a.wrapping_mul(b),
                    BinOp::Div | BinOp::IDiv => {
                        if b == 0 {
                            0
                        } else {
                            a.wrapping_div(b)
                        }
                    }
                    BinOp::Rem => {
                        if b == 0 {
                            0
                        } else {
                            a.wrapping_rem(b)
                        }
                    }
                    BinOp::And => a & b,
                    BinOp::Or => a | b,
                    BinOp::Xor => a ^ b,
                    BinOp::Shl => {
                        if amount >= bits {
                            0
                        } else {
                            a << amount
                        }
                    }
                    BinOp::Shr if $signed => a >> amount.min(bits - 1),
                    BinOp::Shr => {
                        if amount >= bits {
                            0
                        } else {
                            a >> amount
                        }
                    }
                    BinOp::Min => Ord::min(a, b),
                    BinOp::Max => Ord::max(a, b),
                    BinOp::Pow => return None,
                })
            }
            fn un(op: UnOp, a: Self) -> Option<Self> {
                Some(match op {
                    UnOp::Neg => a.wrapping_neg(),
                    UnOp::Not => !a,
                    #[allow(unused_comparisons)]
                    UnOp::Abs => {
                        if a < 0 {
                            a.wrapping_neg()
                        } else {
                            a
                        }
                    }
                    UnOp::Floor | UnOp::Ceil => a,
                    _ => return None,
                })
            }
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
                cmp_by(op, a, b)
            }
            fn same(a: Self, b: Self) -> bool {
                a == b
            }
            fn max(a: Self, b: Self) -> Self {
                Ord::max(a, b)
            }
            fn min(a: Self, b: Self) -> Self {
                Ord::min(a, b)
            }
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
        }
    };
}

int_elem!(i8, u8, DType::I8, true);
int_elem!(i16, u16, DType::I16, true);
int_elem!(i32, u32, DType::I32, true);
int_elem!(i64, u64, DType::I64, true);
int_elem!(u8, u8, DType::U8, false);
int_elem!(u16, u16, DType::U16, false);
int_elem!(u32, u32, DType::U32, false);
int_elem!(u64, u64, DType::U64, false);

macro_rules! float_elem {
    ($t:ty, $d:expr) => {
        impl Elem for $t {
            const D: DType = $d;
            fn of_int(v: i64) -> Self {
                v as $t
            }
            fn sample(rng: &mut StdRng) -> Self {
                match rng.random_range(0..5) {
                    0 => [0.0, -0.0, <$t>::NAN, <$t>::INFINITY, <$t>::NEG_INFINITY, 1.5, -2.5, 1e-30]
                        [rng.random_range(0..8)],
                    1 => rng.random_range(-3.0..3.0),
                    _ => rng.random_range(-100.0..100.0),
                }
            }
            fn bin(op: BinOp, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    BinOp::Div => a / b,
                    BinOp::IDiv => (a / b).floor(),
                    BinOp::Rem => a % b,
                    BinOp::Min => <$t as Elem>::min(a, b),
                    BinOp::Max => <$t as Elem>::max(a, b),
                    BinOp::Pow => a.powf(b),
                    _ => return None,
                })
            }
            fn un(op: UnOp, a: Self) -> Option<Self> {
                Some(match op {
                    UnOp::Neg => -a,
                    UnOp::Abs => a.abs(),
                    UnOp::Sqrt => a.sqrt(),
                    UnOp::Rsqrt => 1.0 / a.sqrt(),
                    UnOp::Exp => a.exp(),
                    UnOp::Exp2 => a.exp2(),
                    UnOp::Log => a.ln(),
                    UnOp::Log2 => a.log2(),
                    UnOp::Sin => a.sin(),
                    UnOp::Cos => a.cos(),
                    UnOp::Floor => a.floor(),
                    UnOp::Ceil => a.ceil(),
                    UnOp::Not => return None,
                })
            }
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
                cmp_by(op, a, b)
            }
            fn same(a: Self, b: Self) -> bool {
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
            }
            fn near(a: Self, b: Self, ulps: u64) -> bool {
                let close = a.is_finite()
                    && b.is_finite()
                    && a.is_sign_positive() == b.is_sign_positive()
                    && (a.to_bits() as u64).abs_diff(b.to_bits() as u64) <= ulps;
                Self::same(a, b) || close
            }
            /// IEEE 754-2019 `maximum`: NaN wins, +0 > -0.
            fn max(a: Self, b: Self) -> Self {
                if a.is_nan() || b.is_nan() {
                    <$t>::NAN
                } else if a == b {
                    if a.is_sign_positive() { a } else { b }
                } else {
                    a.max(b)
                }
            }
            fn min(a: Self, b: Self) -> Self {
                if a.is_nan() || b.is_nan() {
                    <$t>::NAN
                } else if a == b {
                    if a.is_sign_negative() { a } else { b }
                } else {
                    a.min(b)
                }
            }
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
        }
    };
}

float_elem!(f32, DType::F32);
float_elem!(f64, DType::F64);

impl Elem for bool {
    const D: DType = DType::I1;
    fn of_int(v: i64) -> Self {
        v & 1 == 1
    }
    fn sample(rng: &mut StdRng) -> Self {
        rng.random()
    }
    fn bin(op: BinOp, a: Self, b: Self) -> Option<Self> {
        Some(match op {
            BinOp::And | BinOp::Min => a & b,
            BinOp::Or | BinOp::Max => a | b,
            BinOp::Xor => a ^ b,
            _ => return None,
        })
    }
    fn un(op: UnOp, a: Self) -> Option<Self> {
        match op {
            UnOp::Not => Some(!a),
            _ => None,
        }
    }
    fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
        cmp_by(op, a, b)
    }
    fn same(a: Self, b: Self) -> bool {
        a == b
    }
    fn max(a: Self, b: Self) -> Self {
        a | b
    }
    fn min(a: Self, b: Self) -> Self {
        a & b
    }
    fn add(_: Self, _: Self) -> Self {
        unreachable!("no sums of i1")
    }
}

const N: usize = 37;

fn data<T: Elem>(rng: &mut StdRng) -> Vec<T> {
    (0..N).map(|_| T::sample(rng)).collect()
}

/// Lane counts to try for `d`: one vector, several vectors, scalar lanes.
fn lane_counts(d: DType) -> [u8; 3] {
    let per = (128 / d.bits().max(8)) as u8;
    [per, per * 2, (per / 2).max(1)]
}

/// Runs an elementwise kernel with inputs `ins` and returns its output.
fn launch_elementwise<T: Elem, O: Elem>(f: &Function, opts: &CodegenOptions, ins: &mut [Vec<T>]) -> Vec<O> {
    let k = compile_ok(f, opts);
    // Out-of-range lanes of the output must not be written: a short buffer proves it.
    let mut out: Vec<O> = (0..N).map(|_| O::sample(&mut StdRng::seed_from_u64(1))).collect();
    let mut slots: Vec<_> = ins.iter_mut().map(|v| slot(v)).collect();
    slots.push(slot(&mut out));
    slots.push(scalar(pack_int(N as i64)));
    run(&k, [1, 1, 1], &slots, None).unwrap();
    out
}

fn check_binary<T: Elem>(ops: &[BinOp]) {
    let mut rng = StdRng::seed_from_u64(7);
    for &op in ops {
        for lanes in lane_counts(T::D) {
            let f = elementwise(T::D, 2, lanes, |b, x| b.bin(op, x[0], x[1]));
            let mut ins = vec![data::<T>(&mut rng), data::<T>(&mut rng)];
            let (a, bb) = (ins[0].clone(), ins[1].clone());
            for opts in MODES {
                let out: Vec<T> = launch_elementwise(&f, &opts, &mut ins);
                for i in 0..N {
                    let want = T::bin(op, a[i], bb[i]).unwrap();
                    assert!(
                        T::same(out[i], want),
                        "{op:?} {:?} x{lanes}: {:?} {:?} gave {:?}, want {want:?}",
                        T::D,
                        a[i],
                        bb[i],
                        out[i]
                    );
                }
            }
        }
    }
}

const INT_OPS: [BinOp; 12] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Rem,
    BinOp::And,
    BinOp::Or,
    BinOp::Xor,
    BinOp::Shl,
    BinOp::Shr,
    BinOp::Min,
    BinOp::Max,
];
const FLOAT_OPS: [BinOp; 9] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::IDiv,
    BinOp::Rem,
    BinOp::Min,
    BinOp::Max,
    BinOp::Pow,
];

#[test]
fn binary_ints() {
    check_binary::<i8>(&INT_OPS);
    check_binary::<i16>(&INT_OPS);
    check_binary::<i32>(&INT_OPS);
    check_binary::<i64>(&INT_OPS);
    check_binary::<u8>(&INT_OPS);
    check_binary::<u16>(&INT_OPS);
    check_binary::<u32>(&INT_OPS);
    check_binary::<u64>(&INT_OPS);
}

/// `x op c` with `c` a constant (splatted), lanes of one vector, two, and scalarized,
/// against Rust.
fn check_by_constants<T: Elem>(ops: &[BinOp], constants: &[i64]) {
    let mut rng = StdRng::seed_from_u64(11);
    for &c in constants {
        for &op in ops {
            for lanes in lane_counts(T::D) {
                let f = elementwise(T::D, 1, lanes, |b, x| {
                    let k = b.int(T::D, c);
                    let ks = b.splat(k, lanes);
                    b.bin(op, x[0], ks)
                });
                let mut ins = vec![data::<T>(&mut rng)];
                let a = ins[0].clone();
                let out: Vec<T> = launch_elementwise(&f, &MODES[1], &mut ins);
                for i in 0..N {
                    let want = T::bin(op, a[i], T::of_int(c)).unwrap();
                    assert!(
                        T::same(out[i], want),
                        "{op:?} {:?} x{lanes} by {c}: {:?} gave {:?}, want {want:?}",
                        T::D,
                        a[i],
                        out[i]
                    );
                }
            }
        }
    }
}

fn check_constant_operands<T: Elem>() {
    let bits = T::D.bits() as i64;
    // `//` and `%` by powers of two (shifts and masks on vector lanes), up to the type's
    // largest positive one.
    let top = if T::D.is_signed() { bits - 2 } else { bits - 1 };
    let powers: Vec<i64> = [0, 1, 2, 3, 6.min(top), top].iter().map(|&k| 1i64 << k).collect();
    check_by_constants::<T>(&[BinOp::IDiv, BinOp::Rem], &powers);
    // Shifts by constants (one vector shift), including amounts of the width and more and
    // negative ones, which shift everything out as NumPy does.
    check_by_constants::<T>(&[BinOp::Shl, BinOp::Shr], &[0, 1, 3, bits - 1, bits, bits + 5, -1]);
}

#[test]
fn power_of_two_divisors_and_constant_shift_amounts() {
    check_constant_operands::<i8>();
    check_constant_operands::<i16>();
    check_constant_operands::<i32>();
    check_constant_operands::<i64>();
    check_constant_operands::<u8>();
    check_constant_operands::<u16>();
    check_constant_operands::<u32>();
    check_constant_operands::<u64>();
}

#[test]
fn binary_floats() {
    check_binary::<f32>(&FLOAT_OPS);
    check_binary::<f64>(&FLOAT_OPS);
}

#[test]
fn binary_bools() {
    check_binary::<bool>(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Min, BinOp::Max]);
}

fn check_unary<T: Elem>(ops: &[UnOp]) {
    let mut rng = StdRng::seed_from_u64(9);
    for &op in ops {
        for lanes in lane_counts(T::D) {
            let f = elementwise(T::D, 1, lanes, |b, x| b.un(op, x[0]));
            let mut ins = vec![data::<T>(&mut rng)];
            let a = ins[0].clone();
            let out: Vec<T> = launch_elementwise(&f, &MODES[0], &mut ins);
            // The JIT computes these on f32 lanes itself (lnc-clif's `vmath`, within 1.53
            // ulps of the exact value), Rust's libm within about one half: at most 2 apart.
            let own = T::D == DType::F32
                && matches!(op, UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos);
            for i in 0..N {
                let want = T::un(op, a[i]).unwrap();
                assert!(
                    if own { T::near(out[i], want, 2) } else { T::same(out[i], want) },
                    "{op:?} {:?} x{lanes}: {:?} gave {:?}, want {want:?}",
                    T::D,
                    a[i],
                    out[i]
                );
            }
        }
    }
}

#[test]
fn unary() {
    let float_ops = [
        UnOp::Neg,
        UnOp::Abs,
        UnOp::Sqrt,
        UnOp::Rsqrt,
        UnOp::Exp,
        UnOp::Exp2,
        UnOp::Log,
        UnOp::Log2,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Floor,
        UnOp::Ceil,
    ];
    check_unary::<f32>(&float_ops);
    check_unary::<f64>(&float_ops);
    let int_ops = [UnOp::Neg, UnOp::Not, UnOp::Abs, UnOp::Floor];
    check_unary::<i8>(&int_ops);
    check_unary::<i16>(&int_ops);
    check_unary::<i32>(&int_ops);
    check_unary::<i64>(&int_ops);
    check_unary::<u8>(&int_ops);
    check_unary::<u32>(&int_ops);
    check_unary::<u64>(&int_ops);
    check_unary::<bool>(&[UnOp::Not]);
}

fn check_cmp<T: Elem>() {
    let mut rng = StdRng::seed_from_u64(11);
    for op in [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge] {
        for lanes in lane_counts(T::D) {
            let f = elementwise(T::D, 2, lanes, |b, x| b.cmp(op, x[0], x[1]));
            let mut ins = vec![data::<T>(&mut rng), data::<T>(&mut rng)];
            // Some equal pairs.
            for i in (0..N).step_by(3) {
                ins[1][i] = ins[0][i];
            }
            let (a, bb) = (ins[0].clone(), ins[1].clone());
            let out: Vec<bool> = launch_elementwise(&f, &MODES[0], &mut ins);
            for i in 0..N {
                assert_eq!(
                    out[i],
                    T::cmp(op, a[i], bb[i]),
                    "{op:?} {:?} x{lanes}: {:?} {:?}",
                    T::D,
                    a[i],
                    bb[i]
                );
            }
        }
    }
}

#[test]
fn comparisons() {
    check_cmp::<i8>();
    check_cmp::<i16>();
    check_cmp::<i32>();
    check_cmp::<i64>();
    check_cmp::<u8>();
    check_cmp::<u16>();
    check_cmp::<u32>();
    check_cmp::<u64>();
    check_cmp::<f32>();
    check_cmp::<f64>();
    check_cmp::<bool>();
}

/// `where(a < b, a, b)` and `where(!(a < b) ^ (a == b), a, b)`: selects with tile masks
/// of the data's width, and mask logic.
fn check_select<T: Elem>() {
    let mut rng = StdRng::seed_from_u64(13);
    for lanes in lane_counts(T::D) {
        for variant in 0..2 {
            let f = elementwise(T::D, 2, lanes, |b, x| {
                let lt = b.cmp(CmpOp::Lt, x[0], x[1]);
                let m = if variant == 0 {
                    lt
                } else {
                    let nlt = b.un(UnOp::Not, lt);
                    let eq = b.cmp(CmpOp::Eq, x[0], x[1]);
                    b.bin(BinOp::Xor, nlt, eq)
                };
                b.select(m, x[0], x[1])
            });
            let mut ins = vec![data::<T>(&mut rng), data::<T>(&mut rng)];
            let (a, bb) = (ins[0].clone(), ins[1].clone());
            let out: Vec<T> = launch_elementwise(&f, &MODES[1], &mut ins);
            for i in 0..N {
                let lt = T::cmp(CmpOp::Lt, a[i], bb[i]);
                let m = if variant == 0 { lt } else { !lt ^ T::cmp(CmpOp::Eq, a[i], bb[i]) };
                let want = if m { a[i] } else { bb[i] };
                assert!(
                    T::same(out[i], want),
                    "{:?} x{lanes} variant {variant}: {:?} {:?} gave {:?}",
                    T::D,
                    a[i],
                    bb[i],
                    out[i]
                );
            }
        }
    }
}

#[test]
fn selects() {
    check_select::<i8>();
    check_select::<i16>();
    check_select::<i32>();
    check_select::<i64>();
    check_select::<u32>();
    check_select::<f32>();
    check_select::<f64>();
}

/// A scalar condition selects between whole tiles.
#[test]
fn select_on_scalar_condition() {
    for flag in [false, true] {
        let f = elementwise(DType::F32, 2, 4, |b, x| {
            let c = b.val(Opcode::Const(Const::Int(flag as i64)), &[], Ty::Scalar(DType::I1));
            b.select(c, x[0], x[1])
        });
        let mut ins = vec![vec![1.0f32; N], vec![2.0f32; N]];
        let out: Vec<f32> = launch_elementwise(&f, &MODES[0], &mut ins);
        assert!(out.iter().all(|&v| v == if flag { 1.0 } else { 2.0 }));
    }
}

trait CastTo<O> {
    fn cast(self) -> O;
}

macro_rules! casts {
    ($($from:ty),*; $to:tt) => { $(casts!(@one $from; $to);)* };
    (@one $from:ty; [$($to:ty),*]) => { $(impl CastTo<$to> for $from { fn cast(self) -> $to { self as $to } })* };
}

casts!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64; [i8, i16, i32, i64, u8, u16, u32, u64, f32, f64]);

macro_rules! bool_casts {
    ($($t:ty),*) => {$(
        impl CastTo<bool> for $t {
            #[allow(clippy::float_cmp)]
            fn cast(self) -> bool { self != (0u8 as $t) }
        }
        impl CastTo<$t> for bool { fn cast(self) -> $t { self as u8 as $t } }
    )*};
}
bool_casts!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
impl CastTo<bool> for bool {
    fn cast(self) -> bool {
        self
    }
}

fn check_cast<S: Elem + CastTo<D>, D: Elem>() {
    let mut rng = StdRng::seed_from_u64(17);
    for lanes in lane_counts(S::D).into_iter().chain(lane_counts(D::D)) {
        let f = elementwise(S::D, 1, lanes, |b, x| b.cast(x[0], D::D));
        let mut ins = vec![data::<S>(&mut rng)];
        let a = ins[0].clone();
        let out: Vec<D> = launch_elementwise(&f, &MODES[0], &mut ins);
        for i in 0..N {
            let want: D = a[i].cast();
            assert!(
                D::same(out[i], want),
                "{:?} -> {:?} x{lanes}: {:?} gave {:?}, want {want:?}",
                S::D,
                D::D,
                a[i],
                out[i]
            );
        }
    }
}

macro_rules! cast_matrix {
    ($($from:ty),*) => {$(
        check_cast::<$from, i8>();
        check_cast::<$from, i16>();
        check_cast::<$from, i32>();
        check_cast::<$from, i64>();
        check_cast::<$from, u8>();
        check_cast::<$from, u16>();
        check_cast::<$from, u32>();
        check_cast::<$from, u64>();
        check_cast::<$from, f32>();
        check_cast::<$from, f64>();
        check_cast::<$from, bool>();
    )*};
}

#[test]
fn casts() {
    cast_matrix!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, bool);
}

#[test]
fn bitcasts() {
    let f = elementwise(DType::F32, 1, 4, |b, x| b.val(Opcode::Bitcast, &[x[0]], Ty::Tile(DType::I32, 4)));
    let mut ins = vec![data::<f32>(&mut StdRng::seed_from_u64(3))];
    let a = ins[0].clone();
    let out: Vec<i32> = launch_elementwise(&f, &MODES[0], &mut ins);
    assert!(a.iter().zip(&out).all(|(x, &y)| x.to_bits() as i32 == y));
    let f = elementwise(DType::U64, 1, 1, |b, x| b.val(Opcode::Bitcast, &[x[0]], Ty::Tile(DType::F64, 1)));
    let mut ins = vec![(0..N as u64).map(|i| (i as f64 * 1.25).to_bits()).collect::<Vec<u64>>()];
    let out: Vec<f64> = launch_elementwise(&f, &MODES[0], &mut ins);
    assert!(out.iter().enumerate().all(|(i, &y)| y == i as f64 * 1.25));
}

/// `out[0] = reduce(x[0..lanes])`, lanes combined adjacent pairs first.
fn check_reduce<T: Elem>(ops: &[ReduceOp]) {
    let mut rng = StdRng::seed_from_u64(19);
    for &op in ops {
        for lanes in lane_counts(T::D) {
            let mut b = B::new("reduce");
            let x = b.ptr(0, T::D);
            let out = b.ptr(1, T::D);
            let (sx, so) = (b.site(0), b.site(1));
            let zero = b.i32(0);
            let v = b.load(Addressing::Contiguous, x, zero, None, None, sx, Ty::Tile(T::D, lanes));
            let r = b.val(Opcode::ReduceLanes(op), &[v], Ty::Scalar(T::D));
            b.store(Addressing::Scalar, out, zero, r, None, so);
            let f = b.finish();
            let k = compile_ok(&f, &CodegenOptions::default());
            let mut xs: Vec<T> = (0..lanes).map(|_| T::sample(&mut rng)).collect();
            let mut o = vec![T::sample(&mut rng)];
            run(&k, [1, 1, 1], &[slot(&mut xs), slot(&mut o)], None).unwrap();
            let mut level = xs.clone();
            while level.len() > 1 {
                level = level
                    .chunks(2)
                    .map(|p| match op {
                        ReduceOp::Sum => T::add(p[0], p[1]),
                        ReduceOp::Max => T::max(p[0], p[1]),
                        ReduceOp::Min => T::min(p[0], p[1]),
                    })
                    .collect();
            }
            assert!(
                T::same(o[0], level[0]),
                "{op:?} {:?} x{lanes}: {xs:?} gave {:?}, want {:?}",
                T::D,
                o[0],
                level[0]
            );
        }
    }
}

#[test]
fn lane_reductions() {
    let all = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
    check_reduce::<f32>(&all);
    check_reduce::<f64>(&all);
    check_reduce::<i8>(&all);
    check_reduce::<i32>(&all);
    check_reduce::<i64>(&all);
    check_reduce::<u16>(&all);
    check_reduce::<u64>(&all);
    check_reduce::<bool>(&[ReduceOp::Max, ReduceOp::Min]);
}

#[test]
fn unsupported_ops_are_errors() {
    for (d, op) in [(DType::F32, BinOp::Shl), (DType::I32, BinOp::Pow), (DType::I1, BinOp::Add)] {
        let f = elementwise(d, 2, 4, |b, x| b.bin(op, x[0], x[1]));
        let e = lnc_clif::compile(&f, &CodegenOptions::default()).unwrap_err();
        assert!(matches!(e, lnc_clif::CodegenError::Unsupported(_)), "{e}");
    }
}
