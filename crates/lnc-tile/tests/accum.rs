//! Several accumulators per reduction: the unrolled loop, its pairwise combination, the
//! remainder loop — and the same results as the block IR for lengths around multiples of
//! the unrolled step, with and without the other passes.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::{DType, Opcode};
use lnc_tile::TileOptions;

/// Lengths around multiples of 4 lanes × 4 accumulators in a block of `block`.
fn ns(block: i64) -> Vec<i64> {
    let mut v = vec![-3, 0, 1, 3, 4, 5, 15, 16, 17, 31, 33, block - 1, block, block + 2];
    v.retain(|&n| n <= block + 2);
    v.sort();
    v.dedup();
    v
}

const THREE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.)
    s = tl.sum(x, axis=0)
    hi = tl.max(tl.where(m, x, -1e30), axis=0)
    lo = tl.min(tl.where(m, x, 1e30), axis=0)
    tl.store(Y, s)
    tl.store(Y + 1, hi)
    tl.store(Y + 2, lo)
"#;

/// A sum, a maximum and a minimum in one loop: two accumulators each (four would not fit
/// in registers with the loaded tiles), the maximum and minimum starting both at their
/// initial value.
#[test]
fn three_reductions_in_one_loop_get_two_accumulators_each() {
    let text = lir_text(THREE, "k", "*fp32,*fp32,i32,64");
    insta::assert_snapshot!(text);
    for n in ns(64) {
        let f = bir(THREE, "k", "*fp32,*fp32,i32,64");
        let bufs = [f32_buffer(7, 64), Buffer::zeros(DType::F32, 3)];
        differential(
            &f,
            [1, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(64)],
            &bufs,
            &[1, 4, 8],
        );
    }
}

const WITH_STORE: &str = r#"
@triton.jit
def k(X, Y, S, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.)
    tl.store(Y + i, x * 2., mask=m)
    tl.store(S, tl.sum(x * x, axis=0))
"#;

/// A loop that stores and reduces: the copies of the body keep the stores in order.
#[test]
fn a_loop_with_a_store_keeps_its_stores() {
    let text = lir_text(WITH_STORE, "k", "*fp32,*fp32,*fp32,i32,64");
    insta::assert_snapshot!(text);
    for n in ns(64) {
        let f = bir(WITH_STORE, "k", "*fp32,*fp32,*fp32,i32,64");
        let bufs = [f32_buffer(2, 64), Buffer::zeros(DType::F32, 64), Buffer::zeros(DType::F32, 1)];
        let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(n), ArgValue::Int(64)];
        differential(&f, [1, 1, 1], &args, &bufs, &[1, 4]);
    }
}

const INT_SUM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0)
    tl.store(Y, tl.sum(x * 1000003, axis=0))
"#;

/// An integer sum that wraps: any association gives the same bits.
#[test]
fn a_wrapping_integer_sum_is_exact() {
    for n in ns(128) {
        let f = bir(INT_SUM, "k", "*i32,*i32,i32,128");
        let vals: Vec<f64> = data(5, 128).iter().map(|v| (v * 1e9).round()).collect();
        let bufs = [Buffer::from_f64_values(DType::I32, &vals), Buffer::zeros(DType::I32, 1)];
        differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(128)], &bufs, &[1, 4]);
    }
}

/// The carried values of the `for` loops of `l`, in program order.
fn carried_counts(l: &lnc_lir::Function) -> Vec<usize> {
    let mut carried = Vec::new();
    l.walk(|i| {
        if l.insts[i].opcode == Opcode::For {
            carried.push(l.insts[i].args.len() - 3);
        }
    });
    carried
}

const ONE_SUM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y, tl.sum(tl.load(X + i, mask=i < N, other=0.), axis=0))
"#;

/// The wide loop carries `unroll` accumulators, as many as fit in registers with the
/// tiles each copy loads (12 live tiles); with `unroll: 1` the pass does nothing. A lone
/// sum over a row of run-time length, whose body is nothing but its chain, gets twice as
/// many, up to the 16 registers.
#[test]
fn the_unroll_option_sets_the_accumulators_within_the_registers() {
    // One sum, one load per copy: 2 live tiles per copy, twice the factor up to 8 copies
    // (16 registers, none for invariants).
    let one = bir(ONE_SUM, "k", "*fp32,*fp32,i32,64");
    // Three reductions of one load: 4 live tiles per copy, 2 copies at most.
    let three = bir(THREE, "k", "*fp32,*fp32,i32,64");
    for (unroll, one_wide, three_wide) in [(1u8, 1usize, 1usize), (2, 4, 2), (4, 8, 2), (8, 8, 2)] {
        for (f, per, wide) in [(&one, 1, one_wide), (&three, 3, three_wide)] {
            let l = tile_opts(f, TileOptions { lanes: 4, bounds: true, unroll, ..Default::default() })
                .expect("tiles");
            let carried = carried_counts(&l);
            let unrolled = carried.iter().filter(|&&c| c > per).copied().collect::<Vec<_>>();
            let expect = if wide == 1 { vec![] } else { vec![per * wide] };
            assert_eq!(unrolled, expect, "unroll {unroll}: {carried:?}");
        }
    }
}

const USER_SUM: &str = r#"
@triton.jit
def k(X, Y, N):
    acc = 0.0
    for i in range(0, N):
        acc += tl.load(X + i)
    tl.store(Y, acc)
"#;

/// A float sum the kernel writes as a loop adds in the program's order, as in Triton
/// (its interpreter gives 1.0000001 for ten additions of 0.1): the pass leaves the loop
/// alone, and the sum is the sequential float32 one to the bit, for lengths around
/// multiples of the unrolled step.
#[test]
fn a_float_sum_written_as_a_loop_keeps_its_order() {
    let f = bir(USER_SUM, "k", "*fp32,*fp32,i32");
    let l = tile_opts(&f, TileOptions { lanes: 4, bounds: true, unroll: 4, ..Default::default() })
        .expect("tiles");
    assert_eq!(carried_counts(&l), vec![1], "{}", lnc_lir::print_function(&l));
    for n in [10usize, 15, 16, 17, 33] {
        let x: Vec<f64> = if n == 10 { vec![0.1; 10] } else { data(9, n) };
        let mut bufs = vec![Buffer::from_f64_values(DType::F32, &x), Buffer::zeros(DType::F32, 1)];
        lir_interp::run_grid(&l, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n as i64)], &mut bufs)
            .unwrap_or_else(|e| panic!("lir interpreter: {e:?}"));
        let sequential = x.iter().fold(0.0f32, |a, &v| a + v as f32);
        assert_eq!(bufs[1].to_f64_values()[0].to_bits(), (sequential as f64).to_bits(), "N = {n}");
    }
    assert_eq!((0..10).fold(0.0f32, |a, _| a + 0.1), 1.000_000_1);
}

const WHERE_SUM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.)
    tl.store(Y, tl.sum(tl.where(x > 0.5, x, 0.25), axis=0))
"#;

/// Only a loop that loads tiles of one register and adds them into one float accumulator
/// gets twice the accumulators. A select and its splats need registers (eight chains
/// spilled three accumulators), an `fp64` tile takes two registers, and an `i32` sum's
/// additions take one cycle: those keep the factor.
#[test]
fn only_a_plain_sum_of_one_register_tiles_gets_twice_the_accumulators() {
    let opts = TileOptions { lanes: 4, bounds: true, unroll: 4, ..Default::default() };
    for (src, sig, wide) in [
        (ONE_SUM, "*fp32,*fp32,i32,64", 8),
        (ONE_SUM, "*fp64,*fp64,i32,64", 4),
        (WHERE_SUM, "*fp32,*fp32,i32,64", 4),
        (INT_SUM, "*i32,*i32,i32,64", 4),
    ] {
        let l = tile_opts(&bir(src, "k", sig), opts).expect("tiles");
        let carried = carried_counts(&l);
        assert_eq!(carried.iter().max(), Some(&wide), "{sig}: {carried:?}\n{}", lnc_lir::print_function(&l));
    }
}

/// The unrolled bound is rounded down with a mask, so the factor must be a power of two:
/// anything else is an error, not a wrong sum.
#[test]
fn an_unroll_factor_that_is_not_a_power_of_two_is_an_error() {
    let f = bir(ONE_SUM, "k", "*fp32,*fp32,i32,64");
    for unroll in [0u8, 3, 128] {
        let e = tile_opts(&f, TileOptions { lanes: 4, bounds: true, unroll, ..Default::default() })
            .expect_err("not a power of two from 1 to 64");
        assert!(e.message.contains("expected a power of two from 1 to 64"), "{unroll}: {}", e.message);
    }
}
