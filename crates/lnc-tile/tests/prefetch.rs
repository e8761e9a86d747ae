//! Prefetches of the next program's rows (module `prefetch`): which rows, from which loop,
//! and the same results as the block IR.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::{DType, Function, Opcode};
use lnc_tile::TileOptions;

/// Two passes over a row: the second re-reads it from the cache.
const NORM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    mean = tl.sum(x, axis=0) / N
    y = tl.load(X + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, y - mean, mask=m)
"#;

/// The prefetches of `f`, with the loop each is in (its position among the top-level
/// instructions).
fn prefetches(f: &Function) -> Vec<usize> {
    let mut out = Vec::new();
    for (k, &s) in f.body.insts.iter().enumerate() {
        let mut n = 0;
        for r in &f.insts[s].regions {
            n += r
                .insts
                .iter()
                .filter(|&&i| matches!(f.insts[i].opcode, Opcode::Prefetch { write: false }))
                .count();
        }
        out.extend(std::iter::repeat_n(k, n));
    }
    out
}

/// The positions of the top-level loops that start at element 0: the steady loop of each
/// pass over a row (the remainder and tail loops of a pass start later).
fn passes(f: &Function) -> Vec<usize> {
    let zero = |v: lnc_lir::Value| {
        f.body.insts.iter().any(|&i| {
            f.insts[i].results.first() == Some(&v)
                && f.insts[i].opcode == Opcode::Const(lnc_lir::Const::Int(0))
        })
    };
    let starts_at_zero = |i: lnc_lir::Inst| f.insts[i].opcode == Opcode::For && zero(f.insts[i].args[0]);
    f.body.insts.iter().enumerate().filter(|&(_, &i)| starts_at_zero(i)).map(|(k, _)| k).collect()
}

/// The number of prefetches in each top-level loop that has some.
fn per_loop(f: &Function) -> Vec<usize> {
    let p = prefetches(f);
    let mut out: Vec<usize> = Vec::new();
    for (k, &pos) in p.iter().enumerate() {
        if k > 0 && p[k - 1] == pos {
            *out.last_mut().unwrap() += 1;
        } else {
            out.push(1);
        }
    }
    out
}

#[test]
fn the_second_pass_prefetches_the_next_row() {
    let f = lir(NORM, "k", "*fp32,*fp32,i32,1024");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    // One per iteration: the store loop's step, 8 fp32, is half a line (each line gets
    // two prefetches; a longer step gets one per line). The streaming pass then splits the
    // store loop in three (first partial line, whole lines, last partial line), and each
    // copy keeps its prefetch.
    assert_eq!(per_loop(&f), [1, 1, 1]);
}

#[test]
fn a_half_row_converted_into_scratch_prefetches_from_the_scratch_loop() {
    // The row_load of x reads the row; the loops after it read scratch.
    let f = lir(NORM, "k", "*fp16,*fp16,i32,2048");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    assert_eq!(prefetches(&f).len(), 1);
    // From 2 KB (the same rows read by a loop in fp32 need 4 KB).
    assert_eq!(prefetches(&lir(NORM, "k", "*fp16,*fp16,i32,1024")).len(), 1);
    // bf16 loads that only feed arithmetic convert tile by tile: a loop reads that row.
    assert!(prefetches(&lir(NORM, "k", "*bf16,*bf16,i32,1024")).is_empty());
    assert!(prefetches(&lir(NORM, "k", "*fp32,*fp32,i32,512")).is_empty());
}

#[test]
fn the_seed_kernels_prefetch_in_their_second_pass() {
    let src = seed_source();
    // Forward: x, in the variance pass in fp32; fp16 and bf16, which a row_load converts,
    // from scratch in the normalization pass.
    for sig in [
        "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024",
        "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,2048",
        "*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,4096",
        // Half rows of 2 KB, which their row_load reads.
        "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,1024",
        "*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,1024",
    ] {
        let f = lir(&src, "_layer_norm_fwd_fused", sig);
        let p = prefetches(&f);
        assert_eq!(p.len(), 1, "{sig}:\n{}", lnc_lir::print_function(&f));
        // The host: after a loop's first read (fp32), the first pass after it, the
        // variance pass, which leaves the prefetches more time than the normalization
        // pass; after a row_load (fp16 and bf16 here), the last pass.
        let passes = passes(&f);
        let host = if sig.starts_with("*fp32") { passes[1] } else { passes[passes.len() - 1] };
        assert_eq!(p[0], host, "{sig}:\n{}", lnc_lir::print_function(&f));
    }
    // Backward dx: x and dy, in the pass that writes dx.
    let f = lir(
        &src,
        "_layer_norm_bwd_dx_fused",
        "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024",
    );
    // Two per iteration, in each of the three copies the streaming pass makes of it.
    assert_eq!(per_loop(&f), [2, 2, 2], "{}", lnc_lir::print_function(&f));
    // dwdb: a grid over column blocks, no second pass over a row.
    let f = lir(&src, "_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128");
    assert!(prefetches(&f).is_empty());
}

#[test]
fn rows_that_do_not_qualify_get_no_prefetch() {
    let none = |src: &str, sig: &str| {
        let f = lir(src, "k", sig);
        assert!(prefetches(&f).is_empty(), "{src}\n{}", lnc_lir::print_function(&f));
    };
    // One pass only: nothing re-reads the row.
    let one_pass = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + i, mask=i < N, other=0.)
    tl.store(Y + row * N + i, x * 2.0, mask=i < N)
"#;
    none(one_pass, "*fp32,*fp32,i32,1024");
    // A 2-D grid: the next program in flat order is not `pid + 1` on axis 0 alone.
    none(
        &NORM.replace("row = tl.program_id(0)", "row = tl.program_id(0) + tl.program_id(1)"),
        "*fp32,*fp32,i32,1024",
    );
    // The row is found through memory: the next program's row is not known without a load.
    let indirect = NORM
        .replace("def k(X, Y, N,", "def k(X, Y, IDX, N,")
        .replace("row = tl.program_id(0)", "row = tl.load(IDX + tl.program_id(0))");
    none(&indirect, "*fp32,*fp32,*i32,i32,1024");
    // A row of 128 KB: prefetching it whole would evict the current one.
    none(NORM, "*fp32,*fp32,i32,32768");
    // Rows a loop reads, of at most 2 KB: within a page, the hardware prefetchers follow
    // them. Half rows a row_load reads in one burst qualify from 2 KB.
    none(NORM, "*fp32,*fp32,i32,512");
    none(NORM, "*fp16,*fp16,i32,512");
    // Not the program's row: the same for every program.
    none(&NORM.replace("row = tl.program_id(0)", "row = 0 * tl.program_id(0)"), "*fp32,*fp32,i32,1024");
}

/// Loops of 32-byte tiles (8 lanes of fp32, computed in 256 bits on hosts with AVX2)
/// prefetch rows from 1 KB (their passes are too short for the hardware prefetchers to
/// bring the next row meanwhile), loops of 4-lane tiles from a page; neither more than 64
/// KB a pass.
#[test]
fn wide_tiles_prefetch_rows_of_1_to_64_kb() {
    let count = |lanes: u8, block: usize| {
        let f = bir(NORM, "k", &format!("*fp32,*fp32,i32,{block}"));
        let l = tile_opts(&f, TileOptions { lanes, ..Default::default() }).unwrap();
        prefetches(&l).len()
    };
    assert_eq!(count(4, 512), 0);
    assert!(count(8, 512) > 0);
    assert!(count(8, 256) > 0);
    assert_eq!(count(8, 128), 0);
    assert!(count(4, 16384) > 0);
    assert!(count(8, 16384) > 0);
    assert_eq!(count(8, 32768), 0);
    assert_eq!(count(4, 32768), 0);
}

/// The 64 KB a pass may prefetch count all of its rows: the dx kernel's pass prefetches x
/// and dy, two rows of 32 KB at N = 8192 in fp32, none of 64 KB at 16384.
#[test]
fn a_pass_prefetches_at_most_64_kb_of_rows() {
    let src = seed_source();
    let count = |block: usize| {
        let sig =
            format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,{block}");
        let f = bir(&src, "_layer_norm_bwd_dx_fused", &sig);
        let l = tile_opts(&f, TileOptions { lanes: 8, ..Default::default() }).unwrap();
        prefetches(&l).len()
    };
    assert!(count(8192) > 0);
    assert_eq!(count(16384), 0);
    // The forward's one row of 64 KB qualifies.
    let f = bir(&src, "_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,16384");
    let l = tile_opts(&f, TileOptions { lanes: 8, ..Default::default() }).unwrap();
    assert!(!prefetches(&l).is_empty());
}

#[test]
fn the_option_turns_it_off() {
    let f = bir(NORM, "k", "*fp32,*fp32,i32,1024");
    let l = tile_opts(&f, TileOptions { prefetch: false, ..Default::default() }).unwrap();
    assert!(prefetches(&l).is_empty());
}

/// A mean stored in fp32 and a second pass whose stores do not depend on it: the half
/// outputs are exact whatever order the sum takes.
const TWO_PASSES: &str = r#"
@triton.jit
def k(X, Y, M, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.).to(tl.float32)
    tl.store(M + row, tl.sum(x, axis=0))
    y = tl.load(X + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, y * 2.0, mask=m)
"#;

#[test]
fn prefetching_kernels_compute_what_the_block_ir_computes() {
    for (d, sig) in [
        (DType::F32, "*fp32,*fp32,*fp32,i32,1024"),
        (DType::F16, "*fp16,*fp16,*fp32,i32,2048"),
        (DType::BF16, "*bf16,*bf16,*fp32,i32,2048"),
    ] {
        let f = bir(TWO_PASSES, "k", sig);
        let l = tile_with(&f, 4).unwrap();
        // fp32: the store loop, split in three by the streaming pass; halves: the loop
        // writing scratch for the row_store.
        let copies = if d == DType::F32 { 3 } else { 1 };
        assert_eq!(per_loop(&l), vec![1; copies], "{sig}:\n{}", lnc_lir::print_function(&l));
        let block = sig.rsplit(',').next().unwrap().parse::<i64>().unwrap();
        for n in [1i64, 7, 16, 17, 100, 1023, 1024, block - 1, block] {
            let len = 3 * block as usize;
            let bufs = [
                Buffer::from_f64_values(d, &data(5, len)),
                Buffer::from_f64_values(d, &vec![f64::NAN; len]),
                Buffer::from_f64_values(DType::F32, &[f64::NAN; 3]),
            ];
            differential(
                &f,
                [3, 1, 1],
                &[ptr(0), ptr(1), ptr(2), ArgValue::Int(n), ArgValue::Int(block)],
                &bufs,
                &[4, 8],
            );
        }
    }
}
