//! Masks to loop bounds: the steady state without masks, the tail, and the tiles past `N`
//! dropped only when they do nothing — and the same results as the block IR for every `N`
//! around tile and extent boundaries (zero, negative, beyond the block).

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;

/// `N` values around the tile and extent boundaries of a block of `block` elements.
fn ns(block: i64) -> Vec<i64> {
    let mut v =
        vec![-5, -1, 0, 1, 2, 3, 4, 5, 7, 8, 9, block - 5, block - 4, block - 1, block, block + 1, block + 9];
    v.retain(|&n| n <= block + 9);
    v.sort();
    v.dedup();
    v
}

const SUM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.)
    s = tl.sum(x, axis=0)
    tl.store(Y + i, x - s, mask=m)
"#;

#[test]
fn a_masked_sum_drops_the_tiles_past_n() {
    let text = lir_text(SUM, "k", "*fp32,*fp32,i32,16");
    insta::assert_snapshot!(text);
    for n in ns(16) {
        let f = bir(SUM, "k", "*fp32,*fp32,i32,16");
        let bufs = [f32_buffer(1, 16), Buffer::zeros(DType::F32, 16)];
        differential(
            &f,
            [1, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(16)],
            &bufs,
            &[1, 2, 4, 8],
        );
    }
}

const MAX_OTHER: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.)
    tl.store(Y, tl.max(x, axis=0))
"#;

/// `other=0` is not the neutral element of a maximum: the masked tiles keep running.
#[test]
fn a_maximum_over_zeros_keeps_the_masked_tiles() {
    let text = lir_text(MAX_OTHER, "k", "*fp32,*fp32,i32,16");
    insta::assert_snapshot!(text);
    for n in ns(16) {
        let f = bir(MAX_OTHER, "k", "*fp32,*fp32,i32,16");
        let mut x = data(3, 16);
        x.iter_mut().for_each(|v| *v = -v.abs() - 1.0);
        let bufs = [Buffer::from_f64_values(DType::F32, &x), Buffer::zeros(DType::F32, 1)];
        differential(
            &f,
            [1, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(16)],
            &bufs,
            &[1, 4, 8],
        );
    }
}

const OFFSET: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=1.)
    tl.store(Y + cols, x * 2., mask=cols < N)
"#;

/// `base + arange < N` with a per-program base.
#[test]
fn a_bound_with_a_base_per_program() {
    let text = lir_text(OFFSET, "k", "*fp32,*fp32,i32,8");
    insta::assert_snapshot!(text);
    for n in ns(24) {
        let f = bir(OFFSET, "k", "*fp32,*fp32,i32,8");
        let bufs = [f32_buffer(1, 24), Buffer::zeros(DType::F32, 24)];
        differential(
            &f,
            [3, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(8)],
            &bufs,
            &[1, 2, 4, 8],
        );
    }
}

const TWO_D: &str = r#"
@triton.jit
def k(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    m = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * BN + cols[None, :], mask=m, other=0.)
    tl.store(Y + cols, tl.sum(x, axis=0), mask=cols < N)
"#;

/// `rows < M & cols < N`: both loops get a bound.
#[test]
fn two_d_masks_bound_rows_and_columns() {
    let text = lir_text(TWO_D, "k", "*fp32,*fp32,i32,i32,4,16");
    insta::assert_snapshot!(text);
    for m in [-1, 0, 1, 3, 4, 5] {
        for n in ns(16) {
            let f = bir(TWO_D, "k", "*fp32,*fp32,i32,i32,4,16");
            let bufs = [f32_buffer(1, 64), Buffer::zeros(DType::F32, 16)];
            let args =
                [ptr(0), ptr(1), ArgValue::Int(m), ArgValue::Int(n), ArgValue::Int(4), ArgValue::Int(16)];
            differential(&f, [1, 1, 1], &args, &bufs, &[1, 4, 8]);
        }
    }
}

const ACCUMULATE: &str = r#"
@triton.jit
def k(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    cols = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, M, BM):
        rows = i + tl.arange(0, BM)
        m = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.load(X + rows[:, None] * N + cols[None, :], mask=m, other=0.)
    tl.store(Y + cols, tl.sum(acc, axis=0), mask=cols < N)
"#;

/// The seed's dw/db reduction: a block accumulated over a loop of row blocks. The rows
/// past `M` add zeros to the accumulator (`s[i] = s[i] + 0` writes nothing new), so the
/// row loop drops them too.
#[test]
fn accumulating_zeros_into_scratch_drops_the_rows_past_m() {
    let text = lir_text(ACCUMULATE, "k", "*fp32,*fp32,i32,i32,4,8");
    insta::assert_snapshot!(text);
    for m in [0, 1, 3, 4, 5, 9] {
        for n in [0, 1, 3, 7, 8, 9] {
            let f = bir(ACCUMULATE, "k", "*fp32,*fp32,i32,i32,4,8");
            let bufs = [f32_buffer(4, 128), Buffer::zeros(DType::F32, 9)];
            let args =
                [ptr(0), ptr(1), ArgValue::Int(m), ArgValue::Int(n), ArgValue::Int(4), ArgValue::Int(8)];
            differential(&f, [1, 1, 1], &args, &bufs, &[1, 4]);
        }
    }
}

/// `N` values of a 64-bit bound: around the blocks, and far beyond 32 bits either way.
fn wide_ns(block: i64) -> Vec<i64> {
    let mut v = ns(block);
    v.extend([1 << 40, -(1 << 40), i64::MAX, i64::MIN, i64::MAX - 3]);
    v
}

/// `cols < N` with a 64-bit `N`: `i64(pid * BLOCK + arange)` is compared, and the loop is
/// split as with a 32-bit `N`.
#[test]
fn a_64_bit_bound_with_a_32_bit_base() {
    let text = lir_text(OFFSET, "k", "*fp32,*fp32,i64,8");
    insta::assert_snapshot!(text);
    // Three programs touch elements 0..24 whatever N is: N far past 32 bits enables them all.
    let f = bir(OFFSET, "k", "*fp32,*fp32,i64,8");
    for n in wide_ns(24) {
        let bufs = [f32_buffer(1, 24), Buffer::zeros(DType::F32, 24)];
        differential(&f, [3, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(8)], &bufs, &[1, 4, 8]);
    }
}

const LOOP_64: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < N
        x = tl.load(X + cols, mask=m, other=0.)
        acc += x
        tl.store(Y + cols, x * 3. + 1., mask=m)
    tl.store(Y + N, tl.sum(acc, axis=0))
"#;

/// `off + arange < N` with a 64-bit `off` (a loop to a 64-bit `N`): `i64(iv) + off` is
/// compared, and the tile loop is split behind a run-time check that no lane wraps.
#[test]
fn a_64_bit_base_from_a_loop() {
    let text = lir_text(LOOP_64, "k", "*fp32,*fp32,i64,8");
    insta::assert_snapshot!(text);
    let f = bir(LOOP_64, "k", "*fp32,*fp32,i64,8");
    for n in ns(24).into_iter().filter(|&n| n >= 0) {
        let bufs = [f32_buffer(2, 33), Buffer::zeros(DType::F32, 34)];
        differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(8)], &bufs, &[1, 4, 8]);
    }
}

const WRAPS: &str = r#"
@triton.jit
def k(Out, base, N, BLOCK: tl.constexpr):
    cols = base + tl.arange(0, BLOCK)
    m = cols < N
    tl.store(Out, tl.sum(tl.where(m, 1, 0), axis=0))
    tl.store(Out + 1, tl.sum(tl.where(m, 1.0, 0.0), axis=0).to(tl.int32))
"#;

/// Lanes of `base + arange` past the type's maximum wrap to negative values, which pass
/// `< N`: no count of leading lanes describes the mask, so the steady loop is skipped at
/// run time and the tail runs every tile with its mask. Counted here against Python's
/// wrapping arithmetic, for a 64-bit base, and for a 32-bit one compared in 64 bits up to
/// the last base whose lanes do not wrap (where they do, the tile code widens `base + iv`
/// before adding the lanes, which the block IR adds in 32 bits: a known gap).
#[test]
fn lanes_that_wrap_past_the_maximum_keep_their_mask() {
    let block = 16i64;
    for (ty, max) in [("i64", i64::MAX), ("i32", i64::from(i32::MAX))] {
        let sig = format!("*i32,{ty},i64,{block}");
        let f = bir(WRAPS, "k", &sig);
        let bases: &[i64] = if ty == "i64" {
            &[max - 5, max - block + 1, max - block, max, -5, 0]
        } else {
            &[max - block + 1, max - block, -5, 0]
        };
        for &base in bases {
            let ns = [0, 3, max, max - 2, i64::MIN, -(1 << 40), i64::MAX];
            for n in ns {
                let bufs = [Buffer::zeros(DType::I32, 2)];
                let args = [ptr(0), ArgValue::Int(base), ArgValue::Int(n), ArgValue::Int(block)];
                differential(&f, [1, 1, 1], &args, &bufs, &[1, 4, 8]);
                let mut got = bufs.to_vec();
                lnc_bir::interp::run_grid(&f, [1, 1, 1], &args, &mut got).unwrap();
                let wrap = |k: i64| {
                    if ty == "i64" {
                        base.wrapping_add(k)
                    } else {
                        i64::from((base as i32).wrapping_add(k as i32))
                    }
                };
                let count = (0..block).filter(|&k| wrap(k) < n).count() as f64;
                assert_eq!(got[0].to_f64_values(), vec![count, count], "{ty} base {base}, N {n}");
            }
        }
    }
}
