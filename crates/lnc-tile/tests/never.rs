//! Loops that never run (module `never`): the remainder of a reduction unrolled over a
//! block whose rows are a multiple of the unrolling, and the tail of a loop over a block
//! that is a multiple of the tile, go; their results are their initial values. The same
//! results as the block IR's.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;

/// The loops of `f` with a positive step whose lower bound is provably at least their
/// upper bound.
fn never_running(f: &lnc_lir::Function) -> Vec<lnc_lir::Inst> {
    let ranges = lnc_lir::ranges::Ranges::analyze(f);
    let mut out = Vec::new();
    f.walk(|i| {
        let d = &f.insts[i];
        if d.opcode == lnc_lir::Opcode::For
            && ranges.of(f, d.args[2]).0 > 0
            && ranges.of(f, d.args[0]).0 >= ranges.of(f, d.args[1]).1
        {
            out.push(i);
        }
    });
    out
}

/// Column sums of a block of 32 rows, the seed dwdb kernel's shape, over `M` rows.
const COLUMNS: &str = r#"
@triton.jit
def k(X, Y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.load(X + rows[:, None] * N + cols[None, :], mask=mask, other=0.)
    tl.store(Y + cols, tl.sum(acc, axis=0), mask=cols < N)
"#;

#[test]
fn the_remainders_of_block_reductions_go() {
    let f = bir(COLUMNS, "k", "*fp32,*fp32,i32,i32,32,16");
    let lf = tile_with(&f, 8).unwrap_or_else(|e| panic!("{e}"));
    let kept = lnc_lir::print_function(&lf);
    assert!(never_running(&lf).is_empty(), "{kept}");
    insta::assert_snapshot!(kept);
    for (m, n) in [(1, 1), (5, 3), (32, 16), (33, 17), (70, 40), (64, 9)] {
        let bufs = [f32_buffer(3, m * n), Buffer::zeros(DType::F32, n)];
        let args = [
            ptr(0),
            ptr(1),
            ArgValue::Int(m as i64),
            ArgValue::Int(n as i64),
            ArgValue::Int(32),
            ArgValue::Int(16),
        ];
        differential(&f, [n.div_ceil(16) as u32, 1, 1], &args, &bufs, &[4, 8, 16]);
    }
}

const DOWN: &str = r#"
@triton.jit
def k(Y, S):
    acc = 0
    for i in range(10, 0, S):
        acc += i
    tl.store(Y, acc)
"#;

/// A loop from 10 down to 0 by a step known only at run time is no loop that never runs:
/// a negative step runs while `iv > ub`.
#[test]
fn a_loop_down_by_a_run_time_step_stays() {
    let f = bir(DOWN, "k", "*i32,i32");
    let text = lnc_lir::print_function(&tile_with(&f, 8).unwrap_or_else(|e| panic!("{e}")));
    assert!(text.contains("for "), "{text}");
    for s in [-1, -3, -10, -11, 1, 4] {
        let bufs = [Buffer::zeros(DType::I32, 1)];
        differential(&f, [1, 1, 1], &[ptr(0), ArgValue::Int(s)], &bufs, &[4, 8]);
    }
}
