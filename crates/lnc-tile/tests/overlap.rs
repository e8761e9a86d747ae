//! Tails as one overlapping tile (module `overlap`): a split loop of 16 lanes or more ends
//! in the row's last whole tile, its lanes the steady loop ran masked out of sums; rows
//! shorter than a tile keep the scalar tail; a loop that reads what it writes keeps it
//! too. Every `N` around the tile boundaries gives the block IR's results.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;

/// `N` from 0 past two tiles of 16, and around the end of a block of `block`.
fn ns(block: i64) -> Vec<i64> {
    let mut v: Vec<i64> = (0..=40).collect();
    v.extend([47, 48, 49, block - 17, block - 16, block - 15, block - 1, block]);
    v.retain(|&n| n <= block);
    v.sort();
    v.dedup();
    v
}

/// Whether `text` (loop IR) has a tail tile: a loop from `full == 0 ? nb : full` whose
/// body starts by clamping its index, `min(iv, nb - L)`.
fn has_tail_tile(text: &str) -> bool {
    tail_tiles(text) > 0
}

/// How many tail tiles `text` (loop IR) has ([`has_tail_tile`]).
fn tail_tiles(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let selects: Vec<&str> =
        lines.iter().filter(|l| l.contains(" = select ")).filter_map(|l| l.split(" = ").next()).collect();
    lines
        .windows(2)
        .filter(|w| {
            let Some(head) = w[0].split("for ").nth(1) else { return false };
            let mut words = head.split_whitespace();
            let (iv, _, lb) = (words.next(), words.next(), words.next());
            let (Some(iv), Some(lb)) = (iv, lb) else { return false };
            selects.contains(&lb) && w[1].contains(&format!(" = min {iv}, "))
        })
        .count()
}

const CENTER: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.)
    s = tl.sum(x, axis=0)
    tl.store(Y + i, x - s, mask=m)
"#;

#[test]
fn a_sum_and_a_store_end_in_the_rows_last_tile() {
    let f = bir(CENTER, "k", "*fp32,*fp32,i32,64");
    let lf = tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}"));
    let text = lnc_lir::print_function(&lf);
    assert!(has_tail_tile(&text), "{text}");
    insta::assert_snapshot!(text);
    for n in ns(64) {
        let bufs = [f32_buffer(1, 64), Buffer::zeros(DType::F32, 64)];
        differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(64)], &bufs, &[16, 32]);
    }
}

/// Narrower tiles keep their scalar tail (`overlap::MIN_LANES`).
#[test]
fn tiles_of_eight_lanes_keep_the_scalar_tail() {
    let f = bir(CENTER, "k", "*fp32,*fp32,i32,64");
    let lf = tile_with(&f, 8).unwrap_or_else(|e| panic!("{e}"));
    let text = lnc_lir::print_function(&lf);
    assert!(!has_tail_tile(&text), "{text}");
}

const EXTREMES: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    hi = tl.max(tl.load(X + i, mask=m, other=float("-inf")), axis=0)
    lo = tl.min(tl.load(X + i, mask=m, other=float("inf")), axis=0)
    tl.store(Y, hi)
    tl.store(Y + 1, lo)
"#;

/// A maximum or minimum takes the lanes the steady loop ran again, which changes nothing.
#[test]
fn a_maximum_and_a_minimum_take_the_overlap_as_it_is() {
    let f = bir(EXTREMES, "k", "*fp32,*fp32,i32,64");
    let text = lnc_lir::print_function(&tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}")));
    assert!(has_tail_tile(&text), "{text}");
    for n in ns(64) {
        // The extremes in the overlapping lanes: counted twice, they would still be found.
        let mut x = data(2, 64);
        if n > 2 {
            x[n as usize - 2] = 50.0;
            x[n as usize - 3] = -50.0;
        }
        let bufs = [Buffer::from_f64_values(DType::F32, &x), Buffer::zeros(DType::F32, 2)];
        differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(64)], &bufs, &[16]);
    }
}

const INT_SUM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0)
    tl.store(Y, tl.sum(x * 3, axis=0))
"#;

/// An integer sum counts each element once: the overlapping lanes the steady loop ran
/// add 0.
#[test]
fn an_integer_sum_counts_each_element_once() {
    let f = bir(INT_SUM, "k", "*i32,*i32,i32,64");
    let text = lnc_lir::print_function(&tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}")));
    assert!(has_tail_tile(&text), "{text}");
    for n in ns(64) {
        let x: Vec<f64> = (0..64).map(|v| (v * 7 % 13) as f64 - 6.0).collect();
        let bufs = [Buffer::from_f64_values(DType::I32, &x), Buffer::zeros(DType::I32, 1)];
        differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(64)], &bufs, &[16]);
    }
}

const IN_PLACE: &str = r#"
@triton.jit
def k(X, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m)
    tl.store(X + i, x * 2.0 + 1.0, mask=m)
"#;

/// A loop that loads what it stores would read its own results again in the overlap: it
/// keeps the scalar tail.
#[test]
fn a_row_updated_in_place_keeps_the_scalar_tail() {
    let f = bir(IN_PLACE, "k", "*fp32,i32,64");
    let text = lnc_lir::print_function(&tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}")));
    assert!(!has_tail_tile(&text), "{text}");
    for n in ns(64) {
        let bufs = [f32_buffer(3, 64)];
        differential(&f, [1, 1, 1], &[ptr(0), ArgValue::Int(n), ArgValue::Int(64)], &bufs, &[16]);
    }
}

const HALF_ROWS: &str = r#"
@triton.jit
def k(X, Y, W, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * stride + i, mask=m, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(m, x - mean, 0.)
    var = tl.sum(d * d, axis=0) / N
    w = tl.load(W + i, mask=m)
    y = d / tl.sqrt(var + 1e-5) * w
    tl.store(Y + row * stride + i, y.to(tl.float16), mask=((y > -1e9) & m))
"#;

/// fp16 rows of several programs, a weight row shared by all of them, and a store whose
/// mask adds a condition of its own: every pass ends in its last tile.
#[test]
fn half_rows_of_several_programs_end_in_their_last_tiles() {
    let f = bir(HALF_ROWS, "k", "*fp16,*fp16,*fp16,i32,i32,128");
    let text = lnc_lir::print_function(&tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}")));
    assert!(has_tail_tile(&text), "{text}");
    for n in ns(128) {
        let stride = 130;
        let x: Vec<f64> = data(4, 3 * stride).iter().map(|v| (v * 64.0).round() / 64.0).collect();
        let w: Vec<f64> = data(5, 128).iter().map(|v| (v * 64.0).round() / 64.0).collect();
        let bufs = [
            Buffer::from_f64_values(DType::F16, &x),
            Buffer::zeros(DType::F16, 3 * stride),
            Buffer::from_f64_values(DType::F16, &w),
        ];
        let args =
            [ptr(0), ptr(1), ptr(2), ArgValue::Int(n), ArgValue::Int(stride as i64), ArgValue::Int(128)];
        differential(&f, [3, 1, 1], &args, &bufs, &[16]);
    }
}

const UNDER_IF: &str = r#"
@triton.jit
def k(X, Y, N, F, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    if F > 0:
        x = tl.load(X + i, mask=m, other=0.)
        tl.store(Y + i, x * 2.0 + 1.0, mask=m)
"#;

/// A loop under an `if` keeps its scalar tail: the tile is not worth its compile time
/// there (the seed backward's partial rows under the lock).
#[test]
fn a_loop_under_an_if_keeps_the_scalar_tail() {
    let f = bir(UNDER_IF, "k", "*fp32,*fp32,i32,i32,64");
    let text = lnc_lir::print_function(&tile_with(&f, 16).unwrap_or_else(|e| panic!("{e}")));
    assert!(text.contains("if ") && !has_tail_tile(&text), "{text}");
    for n in [0, 5, 16, 37, 64] {
        for flag in [0, 1] {
            let bufs = [f32_buffer(6, 64), Buffer::zeros(DType::F32, 64)];
            let args = [ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(flag), ArgValue::Int(64)];
            differential(&f, [1, 1, 1], &args, &bufs, &[16]);
        }
    }
}

/// The seed forward in fp16 whose rows module `rows` converts into scratch (no F16C): each
/// sum's loop reads its buffer and writes back what it read, `s[i] = p ? s[i] : 0`, which
/// running lanes again leaves as it is, so both sums end in the row's last tile, as they
/// do where the loops read the rows from memory. (Their tail elements then take the same
/// lanes, and the two plans' sums the same bits.)
#[test]
fn sums_over_a_row_in_scratch_end_in_the_rows_last_tile() {
    let f =
        bir(&seed_source(), "_layer_norm_fwd_fused", "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,64");
    for native_f16 in [false, true] {
        let opts = lnc_tile::TileOptions { lanes: 16, native_f16, ..Default::default() };
        let text = lnc_lir::print_function(&tile_opts(&f, opts).unwrap_or_else(|e| panic!("{e}")));
        // The mean's, the variance's and the output's passes.
        assert_eq!(tail_tiles(&text), 3, "native_f16 {native_f16}:\n{text}");
    }
    for n in [1, 15, 16, 17, 33, 47, 63, 64] {
        let x: Vec<f64> =
            data(5, 3 * 64).into_iter().map(|v| f64::from(half::f16::from_f64(v).to_f32())).collect();
        let wb: Vec<f64> =
            data(6, 64).into_iter().map(|v| f64::from(half::f16::from_f64(v + 1.0).to_f32())).collect();
        let bufs = [
            Buffer::from_f64_values(DType::F16, &x),
            Buffer::zeros(DType::F16, 3 * 64),
            Buffer::from_f64_values(DType::F16, &wb),
            Buffer::from_f64_values(DType::F16, &wb),
            Buffer::zeros(DType::F32, 3),
            Buffer::zeros(DType::F32, 3),
        ];
        let args = seed_forward_args(64, n, 64);
        differential(&f, [3, 1, 1], &args, &bufs, &[16]);
    }
}
