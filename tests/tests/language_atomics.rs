//! Atomics (`tests/kernels/atomics.py`): scalar and block atomics, masked and not, returning
//! old values, on integers and floats, contended by thousands of programs on pools of 2, 8
//! and 16 threads; masked-off lanes point at memory that exists and must stay untouched.
//! Every kernel also runs through the differential harness, comparing only what does not
//! depend on the order the programs ran in.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use std::fmt::Debug;

use common::diff::*;
use common::*;
use rand::Rng;
use rand::rngs::StdRng;

const FILE: &str = "atomics.py";

fn module() -> lnc::Module {
    load(FILE)
}

/// Modules of the test kernels on JITs with their own pools of 2, 8 and 16 threads.
fn pooled_modules() -> Vec<(usize, lnc::Module)> {
    [2usize, 8, 16]
        .into_iter()
        .map(|t| {
            let jit = lnc::Jit::new().with_threads(t).expect("thread pool");
            (t, jit.load(kernel_path(FILE)).unwrap_or_else(|e| panic!("{e}")))
        })
        .collect()
}

/// Element types the tests run on.
trait Num: Copy + PartialOrd + Debug + Send + 'static {
    const SIG: &'static str;
    fn wrapping_add(self, o: Self) -> Self;
    fn random(rng: &mut StdRng) -> Self;
    fn sentinel() -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn data(v: Vec<Self>) -> Data;
    fn vec(d: &Data) -> Vec<Self>;
    fn same(a: Self, b: Self) -> bool;
}

macro_rules! num_int {
    ($($t:ty => $var:ident, $sig:literal);*) => {$(
        impl Num for $t {
            const SIG: &'static str = $sig;
            fn wrapping_add(self, o: Self) -> Self { <$t>::wrapping_add(self, o) }
            fn random(rng: &mut StdRng) -> Self { rng.random() }
            fn sentinel() -> Self { 0x5a as $t }
            fn lowest() -> Self { <$t>::MIN }
            fn highest() -> Self { <$t>::MAX }
            fn data(v: Vec<Self>) -> Data { Data::$var(v) }
            fn vec(d: &Data) -> Vec<Self> {
                match d { Data::$var(v) => v.clone(), other => panic!("{:?}", other.dtype()) }
            }
            fn same(a: Self, b: Self) -> bool { a == b }
        }
    )*};
}
num_int!(i32 => I32, "i32"; i64 => I64, "i64"; u32 => U32, "u32"; u64 => U64, "u64");

macro_rules! num_float {
    ($($t:ty => $var:ident, $sig:literal);*) => {$(
        impl Num for $t {
            const SIG: &'static str = $sig;
            fn wrapping_add(self, o: Self) -> Self { self + o }
            fn random(rng: &mut StdRng) -> Self { rng.random_range(-1000.0..1000.0) }
            fn sentinel() -> Self { -12345.5 }
            fn lowest() -> Self { <$t>::NEG_INFINITY }
            fn highest() -> Self { <$t>::INFINITY }
            fn data(v: Vec<Self>) -> Data { Data::$var(v) }
            fn vec(d: &Data) -> Vec<Self> {
                match d { Data::$var(v) => v.clone(), other => panic!("{:?}", other.dtype()) }
            }
            fn same(a: Self, b: Self) -> bool { a.to_bits() == b.to_bits() }
        }
    )*};
}
num_float!(f32 => F32, "fp32"; f64 => F64, "fp64");

#[test]
fn counter_from_thousands_of_programs() {
    let grid = (123u32, 37u32);
    let total = (grid.0 * grid.1) as usize;
    let case =
        Case::new("counter", "*i32,*i32", grid, vec![vec![0i32].into(), vec![POISON_I32; total].into()])
            .check(1, Check::Multiset);
    let out = diff(&module(), &case);
    let check = |out: &[A], what: &str| {
        assert_eq!(out[0].data().to_i64s(), vec![total as i64], "{what}: final count");
        let mut old = out[1].data().to_i64s();
        old.sort_unstable();
        assert!(old.iter().enumerate().all(|(k, &v)| v == k as i64), "{what}: tickets are not 0..{total}");
    };
    check(&out, "default pool");
    for (t, m) in pooled_modules() {
        for rep in 0..3 {
            let out = run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}"));
            check(&out, &format!("{t} threads, repetition {rep}"));
        }
    }
}

#[test]
fn scalar_atomic_under_a_scalar_mask() {
    let n = 1001usize;
    for every in [1, 3, 7] {
        let case = Case::new(
            "masked_counter",
            "*i64,*i64,i32",
            n as u32,
            vec![vec![0i64, 77].into(), vec![-1i64; n].into(), (every as i32).into()],
        )
        .check(1, Check::Multiset);
        let counted = n.div_ceil(every);
        let mut outs = vec![diff(&module(), &case)];
        for (_, m) in pooled_modules() {
            outs.push(run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")));
        }
        for out in outs {
            assert_eq!(out[0].data().to_i64s(), vec![counted as i64, 77], "every {every}");
            let old = out[1].data().to_i64s();
            let mut taken: Vec<i64> = (0..n).filter(|p| p % every == 0).map(|p| old[p]).collect();
            taken.sort_unstable();
            assert!(taken.iter().enumerate().all(|(k, &v)| v == k as i64), "every {every}: tickets");
            // Masked-off lanes of an atomic return 0 (the IR's definition).
            assert!(
                (0..n).filter(|p| p % every != 0).all(|p| old[p] == 0),
                "every {every}: masked-off results"
            );
        }
    }
}

/// `block_add` and `block_exchange` on T: no two lanes share an address, so the result is
/// deterministic; X's pointer starts `k` elements into its buffer and the lanes past `n`
/// point at sentinels that must stay.
fn masked_block_rmw<T: Num>(kernel: &str, rng: &mut StdRng) {
    let m = module();
    for (n, block, k) in [(1usize, 16u32, 3usize), (37, 16, 5), (1000, 64, 1), (4099, 128, 7)] {
        let pad = block as usize + 3;
        let x0: Vec<T> = (0..n).map(|_| T::random(rng)).collect();
        let v: Vec<T> = (0..n).map(|_| T::random(rng)).collect();
        let mut xbuf = vec![T::sentinel(); k + n + pad];
        xbuf[k..k + n].copy_from_slice(&x0);
        let case = Case::new(
            kernel,
            &format!("*{s},*{s},*{s},i32,{block}", s = T::SIG),
            n.div_ceil(block as usize) as u32,
            vec![
                A::at(T::data(xbuf), k),
                T::data(v.clone()).into_arg(),
                T::data(vec![T::sentinel(); n]).into_arg(),
                (n as i32).into(),
            ],
        )
        .check(0, Check::Exact)
        .check(2, Check::Exact);
        let out = diff(&m, &case);
        let (x, old) = (T::vec(out[0].data()), T::vec(out[2].data()));
        let what = format!("{kernel} on {}, n {n}, block {block}", T::SIG);
        for i in 0..n {
            let want = if kernel == "block_add" { x0[i].wrapping_add(v[i]) } else { v[i] };
            assert!(T::same(x[k + i], want), "{what}: X[{i}] = {:?}, expected {want:?}", x[k + i]);
            assert!(T::same(old[i], x0[i]), "{what}: old[{i}] = {:?}, expected {:?}", old[i], x0[i]);
        }
        assert!(
            x[..k].iter().chain(&x[k + n..]).all(|&s| T::same(s, T::sentinel())),
            "{what}: a masked-off lane wrote"
        );
    }
}

trait IntoArg {
    fn into_arg(self) -> A;
}

impl IntoArg for Data {
    fn into_arg(self) -> A {
        A::Buf(self, 0)
    }
}

#[test]
fn masked_block_add_returns_old_values_and_leaves_masked_lanes() {
    let mut rng = rng();
    masked_block_rmw::<i32>("block_add", &mut rng);
    masked_block_rmw::<i64>("block_add", &mut rng);
    masked_block_rmw::<u32>("block_add", &mut rng);
    masked_block_rmw::<u64>("block_add", &mut rng);
    masked_block_rmw::<f32>("block_add", &mut rng);
    masked_block_rmw::<f64>("block_add", &mut rng);
}

#[test]
fn masked_block_exchange_returns_old_values_and_leaves_masked_lanes() {
    let mut rng = rng();
    masked_block_rmw::<i32>("block_exchange", &mut rng);
    masked_block_rmw::<i64>("block_exchange", &mut rng);
    masked_block_rmw::<u32>("block_exchange", &mut rng);
    masked_block_rmw::<f32>("block_exchange", &mut rng);
    masked_block_rmw::<f64>("block_exchange", &mut rng);
}

#[test]
fn contended_histograms_integer_and_float() {
    let mut rng = rng();
    let (n, bins, block) = (10007usize, 5usize, 128usize);
    let idx: Vec<i32> = (0..n).map(|_| rng.random_range(0..bins as i32)).collect();
    // Weights are multiples of 1/4: float sums are exact whatever the order.
    let wi: Vec<i32> = (0..n).map(|_| rng.random_range(-50..100)).collect();
    let mut want = vec![0f64; bins];
    for i in 0..n {
        want[idx[i] as usize] += wi[i] as f64;
    }
    let hist = |w: Data, h: Data| {
        Case::new(
            "histogram",
            &format!("*i32,*{},*{},i32,i32,{block}", sig_of(&w), sig_of(&h)),
            n.div_ceil(block) as u32,
            vec![idx.clone().into(), w.into_arg(), A::at(h, 2), (n as i32).into(), (bins as i32).into()],
        )
    };
    let cases = [
        (hist(Data::I32(wi.clone()), Data::I32(vec![-9; bins + 4])), 1.0),
        (hist(Data::I64(wi.iter().map(|&v| v as i64).collect()), Data::I64(vec![-9; bins + 4])), 1.0),
        (
            hist(Data::F32(wi.iter().map(|&v| v as f32 * 0.25).collect()), Data::F32(vec![-9.0; bins + 4])),
            0.25,
        ),
        (
            hist(Data::F64(wi.iter().map(|&v| v as f64 * 0.25).collect()), Data::F64(vec![-9.0; bins + 4])),
            0.25,
        ),
    ];
    for (case, scale) in cases {
        let check = |out: &[A], what: &str| {
            let h = out[2].data().to_f64s();
            assert_eq!(&h[..2], &[-9.0, -9.0], "{what}: before the pointer");
            for b in 0..bins {
                assert_eq!(h[2 + b], -9.0 + want[b] * scale, "{what}: bin {b}");
            }
            // Slot `bins` is where masked-off lanes would have added 1.
            assert_eq!(&h[2 + bins..], &[-9.0, -9.0], "{what}: past the bins");
        };
        check(&diff(&module(), &case), &case.sig);
        for (t, m) in pooled_modules() {
            for _ in 0..2 {
                check(
                    &run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")),
                    &format!("{} on {t} threads", case.sig),
                );
            }
        }
    }
}

fn sig_of(d: &Data) -> &'static str {
    match d {
        Data::I32(_) => "i32",
        Data::I64(_) => "i64",
        Data::U32(_) => "u32",
        Data::U64(_) => "u64",
        Data::F32(_) => "fp32",
        Data::F64(_) => "fp64",
        other => panic!("{:?}", other.dtype()),
    }
}

/// `atomic_max` / `atomic_min` into 7 bins, on values of one sign (so that a masked-off
/// lane's 0 would show) and of both.
fn min_max_on<T: Num>(rng: &mut StdRng, make: impl Fn(&mut StdRng, i32) -> T) {
    let (n, bins, block) = (3001usize, 7usize, 64u32);
    for sign in [-1, 1, 0] {
        let x: Vec<T> = (0..n).map(|_| make(rng, sign)).collect();
        let case = Case::new(
            "min_max",
            &format!("*{s},*{s},*{s},*{s},i32,i32,{block}", s = T::SIG),
            n.div_ceil(block as usize) as u32,
            vec![
                T::data(x.clone()).into_arg(),
                T::data(vec![T::lowest(); bins]).into_arg(),
                T::data(vec![T::highest(); bins]).into_arg(),
                T::data(vec![T::sentinel(); n]).into_arg(),
                (n as i32).into(),
                (bins as i32).into(),
            ],
        )
        .check(3, Check::Skip);
        let mut outs = vec![diff(&module(), &case)];
        for (_, m) in pooled_modules() {
            outs.push(run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")));
        }
        for out in outs {
            let (mx, mn, old) = (T::vec(out[1].data()), T::vec(out[2].data()), T::vec(out[3].data()));
            for b in 0..bins {
                let vals: Vec<T> = (b..n).step_by(bins).map(|i| x[i]).collect();
                let wmax = vals.iter().copied().fold(T::lowest(), |a, v| if v > a { v } else { a });
                let wmin = vals.iter().copied().fold(T::highest(), |a, v| if v < a { v } else { a });
                assert!(
                    T::same(mx[b], wmax),
                    "{} sign {sign}: max of bin {b} = {:?}, expected {wmax:?}",
                    T::SIG,
                    mx[b]
                );
                assert!(
                    T::same(mn[b], wmin),
                    "{} sign {sign}: min of bin {b} = {:?}, expected {wmin:?}",
                    T::SIG,
                    mn[b]
                );
            }
            // Each old value is the bin's start or one of its values, and at most its max.
            for i in 0..n {
                let b = i % bins;
                let ok = T::same(old[i], T::lowest()) || (b..n).step_by(bins).any(|j| T::same(x[j], old[i]));
                assert!(ok && old[i] <= mx[b], "{}: old value {:?} of lane {i}", T::SIG, old[i]);
            }
        }
    }
}

#[test]
fn atomic_max_and_min_signed_unsigned_and_float() {
    let mut rng = rng();
    min_max_on::<i32>(&mut rng, |r, s| match s {
        -1 => r.random_range(i32::MIN..0),
        1 => r.random_range(1..i32::MAX),
        _ => r.random(),
    });
    min_max_on::<i64>(&mut rng, |r, s| match s {
        -1 => r.random_range(i64::MIN..0),
        1 => r.random_range(1..i64::MAX),
        _ => r.random(),
    });
    // Unsigned: values above 2^31 / 2^63 must count as large.
    min_max_on::<u32>(&mut rng, |r, s| match s {
        -1 => r.random_range(1u32 << 31..u32::MAX),
        1 => r.random_range(1..1u32 << 31),
        _ => r.random(),
    });
    min_max_on::<u64>(&mut rng, |r, s| match s {
        -1 => r.random_range(1u64 << 63..u64::MAX),
        _ => r.random(),
    });
    min_max_on::<f32>(&mut rng, |r, s| match s {
        -1 => r.random_range(-1e6..-1e-3),
        1 => r.random_range(1e-3..1e6),
        _ => r.random_range(-1e6..1e6),
    });
    min_max_on::<f64>(&mut rng, |r, s| match s {
        -1 => r.random_range(-1e6..-1e-3),
        1 => r.random_range(1e-3..1e6),
        _ => r.random_range(-1e6..1e6),
    });
}

fn bit_ops_on<T: Num>(x: Vec<T>, ones: T, zero: T, fold: impl Fn(&[T]) -> (T, T, T)) {
    let (n, bins, block) = (x.len(), 6usize, 32u32);
    let case = Case::new(
        "bit_ops",
        &format!("*{s},*{s},*{s},*{s},i32,i32,{block}", s = T::SIG),
        n.div_ceil(block as usize) as u32,
        vec![
            T::data(x.clone()).into_arg(),
            T::data(vec![ones; bins]).into_arg(),
            T::data(vec![zero; bins]).into_arg(),
            T::data(vec![zero; bins]).into_arg(),
            (n as i32).into(),
            (bins as i32).into(),
        ],
    );
    let mut outs = vec![diff(&module(), &case)];
    for (_, m) in pooled_modules() {
        outs.push(run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")));
    }
    for out in outs {
        for b in 0..bins {
            let vals: Vec<T> = (b..n).step_by(bins).map(|i| x[i]).collect();
            let (a, o, xr) = fold(&vals);
            assert_eq!(
                (T::vec(out[1].data())[b], T::vec(out[2].data())[b], T::vec(out[3].data())[b]),
                (a, o, xr),
                "{}: bin {b}",
                T::SIG
            );
        }
    }
}

#[test]
fn atomic_and_or_xor() {
    let mut rng = rng();
    let n = 999usize;
    // Mostly-set words so that `and` keeps some bits; masked-off lanes would clear them all.
    let x: Vec<i32> =
        (0..n).map(|_| !(1i32 << rng.random_range(0..31)) & !(1 << rng.random_range(0..31))).collect();
    bit_ops_on(x, -1, 0, |v| {
        (v.iter().fold(-1, |a, &b| a & b), v.iter().fold(0, |a, &b| a | b), v.iter().fold(0, |a, &b| a ^ b))
    });
    let x: Vec<u32> = (0..n).map(|_| rng.random::<u32>() | rng.random::<u32>() | 0x8000_0000).collect();
    bit_ops_on(x, u32::MAX, 0, |v| {
        (
            v.iter().fold(u32::MAX, |a, &b| a & b),
            v.iter().fold(0, |a, &b| a | b),
            v.iter().fold(0, |a, &b| a ^ b),
        )
    });
    let x: Vec<i64> = (0..n).map(|_| !(1i64 << rng.random_range(0..63))).collect();
    bit_ops_on(x, -1, 0, |v| {
        (v.iter().fold(-1, |a, &b| a & b), v.iter().fold(0, |a, &b| a | b), v.iter().fold(0, |a, &b| a ^ b))
    });
    let x: Vec<u64> = (0..n).map(|_| rng.random::<u64>() | (1 << 63)).collect();
    bit_ops_on(x, u64::MAX, 0, |v| {
        (
            v.iter().fold(u64::MAX, |a, &b| a & b),
            v.iter().fold(0, |a, &b| a | b),
            v.iter().fold(0, |a, &b| a ^ b),
        )
    });
}

#[test]
fn scalar_atomics_of_every_kind_under_a_mask() {
    let mut rng = rng();
    let (n, progs) = (2001usize, 2048usize);
    let x: Vec<i64> = (0..n).map(|_| rng.random::<i64>() | rng.random::<i64>()).collect();
    let (mx, mn) = (*x.iter().max().unwrap(), *x.iter().min().unwrap());
    let and = x.iter().fold(-1i64, |a, &b| a & b);
    let or = x.iter().fold(0i64, |a, &b| a | b);
    let xor = x.iter().fold(0i64, |a, &b| a ^ b);
    let case = Case::new(
        "scalar_rmw",
        "*i64,*i64,*i64,*i64,*i64,i32",
        progs as u32,
        vec![
            x.clone().into(),
            vec![i64::MIN, 3].into(),
            vec![i64::MAX, 3].into(),
            vec![-1i64, 0, 0, 3].into(),
            vec![7i64; progs].into(),
            (n as i32).into(),
        ],
    )
    .check(4, Check::Skip);
    let check = |out: &[A], what: &str| {
        assert_eq!(out[1].data().to_i64s(), vec![mx, 3], "{what}: max");
        assert_eq!(out[2].data().to_i64s(), vec![mn, 3], "{what}: min");
        assert_eq!(out[3].data().to_i64s(), vec![and, or, xor, 3], "{what}: and, or, xor");
        let old = out[4].data().to_i64s();
        for p in 0..n {
            assert!(old[p] == i64::MIN || x.contains(&old[p]), "{what}: old value {} of program {p}", old[p]);
        }
        // Masked-off atomics return 0.
        assert!(old[n..].iter().all(|&v| v == 0), "{what}: masked-off programs");
    };
    check(&diff(&module(), &case), "default pool");
    for (t, m) in pooled_modules() {
        check(&run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")), &format!("{t} threads"));
    }
}

#[test]
fn exchange_conserves_values() {
    let (progs, nslots) = (3001usize, 7usize);
    let init: Vec<i32> = (0..nslots as i32).map(|s| -1 - s).collect();
    let case = Case::new(
        "exchange",
        "*i32,*i32,i32",
        progs as u32,
        vec![init.clone().into(), vec![POISON_I32; progs].into(), (nslots as i32).into()],
    )
    .check(0, Check::Skip)
    .check(1, Check::Skip);
    let check = |out: &[A], what: &str| {
        let (slots, old) = (out[0].data().to_i64s(), out[1].data().to_i64s());
        // Per slot: the values taken out plus the one left in are the initial value and the
        // ids of the programs that used the slot.
        for s in 0..nslots {
            let mut got: Vec<i64> = (s..progs).step_by(nslots).map(|p| old[p]).collect();
            got.push(slots[s]);
            got.sort_unstable();
            let mut want: Vec<i64> = (s..progs).step_by(nslots).map(|p| p as i64).collect();
            want.push(init[s] as i64);
            want.sort_unstable();
            assert_eq!(got, want, "{what}: slot {s}");
        }
    };
    check(&diff(&module(), &case), "default pool");
    for (t, m) in pooled_modules() {
        for _ in 0..3 {
            check(&run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")), &format!("{t} threads"));
        }
    }
}

#[test]
fn compare_and_swap_on_blocks() {
    let mut rng = rng();
    let (progs, block) = (13usize, 16usize);
    let n = progs * block;
    let x: Vec<i64> = (0..n).map(|_| rng.random_range(-5..5)).collect();
    let cmp: Vec<i64> = (0..n).map(|i| if rng.random() { x[i] } else { x[i] + 1 }).collect();
    let val: Vec<i64> = (0..n).map(|_| rng.random()).collect();
    let case = Case::new(
        "cas_block",
        &format!("*i64,*i64,*i64,*i64,{block}"),
        progs as u32,
        vec![x.clone().into(), cmp.clone().into(), val.clone().into(), vec![7i64; n].into()],
    );
    let out = diff(&module(), &case);
    let (got, old) = (out[0].data().to_i64s(), out[3].data().to_i64s());
    for i in 0..n {
        assert_eq!(got[i], if x[i] == cmp[i] { val[i] } else { x[i] }, "element {i}");
        assert_eq!(old[i], x[i], "old {i}");
    }
    // Float CAS compares bit patterns.
    let xf: Vec<f32> = (0..n).map(|i| [0.0, -0.0, 1.5, f32::NAN][i % 4]).collect();
    let cmpf: Vec<f32> = (0..n).map(|i| [-0.0, -0.0, 1.5, f32::NAN][i % 4]).collect();
    let case = Case::new(
        "cas_block",
        &format!("*fp32,*fp32,*fp32,*fp32,{block}"),
        progs as u32,
        vec![xf.clone().into(), cmpf.into(), vec![9.0f32; n].into(), vec![NAN32; n].into()],
    )
    .check(0, Check::Exact)
    .check(3, Check::Exact);
    let out = diff(&module(), &case);
    let got = out[0].data().to_f64s();
    for i in 0..n {
        let want = if i % 4 == 0 { 0.0 } else { 9.0 };
        assert_eq!(got[i], want, "element {i}");
    }
}

#[test]
fn spin_lock_protects_plain_loads_and_stores() {
    let (progs, n) = (2000usize, 13i32);
    let case = Case::new(
        "spin_lock",
        "*i32,*i32,*i64,i32",
        progs as u32,
        vec![vec![0i32].into(), vec![0i32].into(), vec![0i64].into(), n.into()],
    );
    let total: i64 = (0..progs as i64).map(|p| p % n as i64).sum();
    let check = |out: &[A], what: &str| {
        assert_eq!(out[0].data().to_i64s(), vec![0], "{what}: lock released");
        assert_eq!(out[1].data().to_i64s(), vec![progs as i64], "{what}: counter");
        assert_eq!(out[2].data().to_i64s(), vec![total], "{what}: total");
    };
    check(&diff(&module(), &case), "default pool");
    for (t, m) in pooled_modules() {
        for _ in 0..3 {
            check(&run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")), &format!("{t} threads"));
        }
    }
}

#[test]
fn compare_and_swap_once_flags() {
    let (progs, nflags) = (3000usize, 13usize);
    let case = Case::new(
        "first_writer",
        "*i32,*i32,i32",
        progs as u32,
        vec![vec![0i32; nflags].into(), vec![0i32; nflags].into(), (nflags as i32).into()],
    )
    .check(0, Check::Skip);
    let check = |out: &[A], what: &str| {
        assert_eq!(out[1].data().to_i64s(), vec![1; nflags], "{what}: one winner per flag");
        for (f, &w) in out[0].data().to_i64s().iter().enumerate() {
            assert!(w >= 1 && (w as usize - 1) % nflags == f, "{what}: flag {f} holds {w}");
        }
    };
    check(&diff(&module(), &case), "default pool");
    for (t, m) in pooled_modules() {
        check(&run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")), &format!("{t} threads"));
    }
}

#[test]
fn float_atomics_on_one_address_from_every_lane() {
    let mut rng = rng();
    for (n, block) in [(1usize, 16u32), (5003, 64), (777, 128)] {
        // Multiples of 1/8 in [-8, 8): sums are exact in any order.
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-64..64) as f32 / 8.0).collect();
        let sum: f32 = x.iter().sum();
        let mx = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mn = x.iter().copied().fold(f32::INFINITY, f32::min);
        let case = Case::new(
            "float_accumulate",
            &format!("*fp32,*fp32,*fp32,*fp32,i32,{block}"),
            n.div_ceil(block as usize) as u32,
            vec![
                x.clone().into(),
                A::at(vec![5.0f32, 0.0, 5.0], 1),
                vec![f32::NEG_INFINITY, 5.0].into(),
                vec![f32::INFINITY, 5.0].into(),
                (n as i32).into(),
            ],
        )
        .check(1, Check::Exact);
        let check = |out: &[A], what: &str| {
            assert_eq!(out[1].data().to_f64s(), vec![5.0, sum as f64, 5.0], "{what}: sum");
            assert_eq!(out[2].data().to_f64s(), vec![mx as f64, 5.0], "{what}: max");
            assert_eq!(out[3].data().to_f64s(), vec![mn as f64, 5.0], "{what}: min");
        };
        check(&diff(&module(), &case), &format!("n {n}"));
        for (t, m) in pooled_modules() {
            check(&run_jit(&m, &case).unwrap_or_else(|e| panic!("{e}")), &format!("n {n}, {t} threads"));
        }
    }
}

#[test]
fn atomic_diagnostics() {
    // Element types Triton's atomics reject are source errors, not wrong answers.
    let jit = lnc::Jit::new();
    let src = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, Y):\n    tl.atomic_and(X, 1.0)\n    tl.atomic_add(Y, 1)\n";
    let m = jit.module("bad_atomics.py", src).unwrap();
    let e = m.kernel("k", "*fp32,*i32").unwrap_err().to_string();
    assert!(e.contains("tl.atomic_and") && e.contains("float32"), "{e}");
    let e = m.kernel("k", "*i32,*i8").unwrap_err().to_string();
    assert!(e.contains("tl.atomic_add") && e.contains("int8"), "{e}");
}

/// A loop waiting on a `volatile=True` load sees another program's store (it was removed as
/// a loop without effects when the load was plain), on 2 threads, each program on its own
/// worker or one after the other.
#[test]
fn a_volatile_load_waits_for_another_programs_store() {
    let jit = lnc::Jit::new().with_threads(2).expect("thread pool");
    let m = jit.load(kernel_path(FILE)).unwrap_or_else(|e| panic!("{e}"));
    let k = m.kernel("publish_and_wait", "*i32,*fp32,*fp32,fp32").unwrap();
    let lir = lnc_lir::print_function(k.lir());
    assert!(lir.contains("load.scalar.volatile"), "{lir}");
    for rep in 0..50 {
        let value = 1.5 + rep as f32;
        let (mut flag, mut data, mut y) = (vec![0i32], vec![0f32], vec![f32::NAN]);
        k.launch(2, &lnc::args![&mut flag, &mut data, &mut y, value]).unwrap();
        assert_eq!(y[0], value, "repetition {rep}");
    }
}

/// A loop waiting on a volatile load gives up when another program faults, as loops using
/// atomics do: program 0 faults without setting the flag program 1 waits for.
#[test]
fn a_volatile_wait_gives_up_after_a_fault() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let jit = lnc::Jit::new().with_threads(2).expect("thread pool");
        let m = jit.load(kernel_path(FILE)).unwrap_or_else(|e| panic!("{e}"));
        let k = m.kernel("fault_while_one_waits_on_a_volatile_flag", "*i32,*i32,*fp32").unwrap();
        let (mut flag, mut arrived, mut y) = (vec![0i32], vec![0i32], vec![0f32]);
        let r = k.launch(2, &lnc::args![&mut flag, &mut arrived, &mut y]);
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    let r = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the launch hung");
    let e = r.expect_err("program 0 stores out of bounds");
    assert!(e.contains("element offset 1 of `Y`") && e.contains("program [0, 0, 0]"), "{e}");
}

/// Volatile loads of every element type give the loaded values, masked lanes `other`
/// (JIT against the interpreter and the inputs).
#[test]
fn volatile_loads_of_every_dtype() {
    let m = module();
    let x: [f64; 4] = [3.0, -2.0, 1.0, 0.0];
    let cases: Vec<(&str, Data, Data)> = vec![
        ("i1", Data::I1(x.iter().map(|&v| v != 0.0).collect()), Data::I1(vec![true; 2])),
        ("i8", Data::I8(x.iter().map(|&v| v as i8).collect()), Data::I8(vec![9; 2])),
        ("i16", Data::I16(x.iter().map(|&v| v as i16).collect()), Data::I16(vec![9; 2])),
        ("i32", Data::I32(x.iter().map(|&v| v as i32).collect()), Data::I32(vec![9; 2])),
        ("i64", Data::I64(x.iter().map(|&v| v as i64).collect()), Data::I64(vec![9; 2])),
        ("u8", Data::U8(x.iter().map(|&v| v.abs() as u8).collect()), Data::U8(vec![9; 2])),
        (
            "fp16",
            Data::F16(x.iter().map(|&v| half::f16::from_f64(v)).collect()),
            Data::F16(vec![half::f16::NAN; 2]),
        ),
        (
            "bf16",
            Data::BF16(x.iter().map(|&v| half::bf16::from_f64(v)).collect()),
            Data::BF16(vec![half::bf16::NAN; 2]),
        ),
        ("fp32", Data::F32(x.iter().map(|&v| v as f32).collect()), Data::F32(vec![f32::NAN; 2])),
        ("fp64", Data::F64(x.to_vec()), Data::F64(vec![f64::NAN; 2])),
    ];
    for (ty, xs, ys) in cases {
        for n in [2i32, 7] {
            let case = Case::new(
                "volatile_copy",
                &format!("*{ty},*{ty},i32"),
                1,
                vec![A::Buf(xs.clone(), 0), A::Buf(ys.clone(), 0), n.into()],
            );
            let out = diff(&m, &case);
            let got = out[1].data().to_f64s();
            let want = [x[1], if n < 4 { x[n as usize] } else { 0.0 }];
            let want: Vec<f64> = match ty {
                "i1" => want.iter().map(|&v| (v != 0.0) as i64 as f64).collect(),
                "u8" => want.iter().map(|v| v.abs()).collect(),
                _ => want.to_vec(),
            };
            assert_eq!(got, want, "{ty}, n = {n}");
        }
    }
}
