//! The seed kernels (Triton's layer-norm tutorial): their loop IR, and the same results as
//! the block-IR interpreter.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;

const FWD: &str = "_layer_norm_fwd_fused";
const DX: &str = "_layer_norm_bwd_dx_fused";
const DWDB: &str = "_layer_norm_bwd_dwdb";

#[test]
fn forward_plan() {
    let out = lir_text(&seed_source(), FWD, "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024");
    insta::assert_snapshot!(out);
}

#[test]
fn backward_dx_plan() {
    let out = lir_text(
        &seed_source(),
        DX,
        "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024",
    );
    insta::assert_snapshot!(out);
}

#[test]
fn backward_dwdb_plan() {
    let out = lir_text(&seed_source(), DWDB, "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128");
    insta::assert_snapshot!(out);
}

fn forward_run(block: u32, n: i64, rows: u32) {
    let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
    let f = bir(&seed_source(), FWD, &sig);
    let len = rows as usize * n as usize;
    let bufs = vec![
        f32_buffer(1, len),
        Buffer::zeros(DType::F32, len),
        f32_buffer(2, n as usize),
        f32_buffer(3, n as usize),
        Buffer::zeros(DType::F32, rows as usize),
        Buffer::zeros(DType::F32, rows as usize),
    ];
    let args = seed_forward_args(n, n, i64::from(block));
    differential(&f, [rows, 1, 1], &args, &bufs, &[1, 2, 4, 8]);
}

/// The forward kernel with `N` apart from the row length: every `N` around tile and
/// block boundaries, zero and negative included.
fn forward_run_n(block: u32, n: i64) {
    let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
    let f = bir(&seed_source(), FWD, &sig);
    let (rows, b) = (2usize, block as usize);
    let bufs = vec![
        f32_buffer(1, rows * b),
        Buffer::zeros(DType::F32, rows * b),
        f32_buffer(2, b),
        f32_buffer(3, b),
        Buffer::zeros(DType::F32, rows),
        Buffer::zeros(DType::F32, rows),
    ];
    let args = seed_forward_args(i64::from(block), n, i64::from(block));
    differential(&f, [rows as u32, 1, 1], &args, &bufs, &[1, 4, 8]);
}

#[test]
fn forward_runs_like_the_block_ir_for_every_n() {
    for n in [-3, 0, 1, 3, 4, 5, 8, 12, 13, 15, 16, 17, 40] {
        forward_run_n(16, n);
    }
}

#[test]
fn forward_runs_like_the_block_ir() {
    forward_run(16, 13, 3);
    forward_run(16, 16, 2);
    forward_run(1024, 1000, 2);
}

fn dx_run(block: u32, n: i64, rows: u32, group: u32) {
    let sig =
        format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}");
    let f = bir(&seed_source(), DX, &sig);
    let (nu, len, g) = (n as usize, rows as usize * n as usize, group as usize);
    let mut rstd = data(9, rows as usize);
    rstd.iter_mut().for_each(|x| *x = x.abs() + 0.5);
    let bufs = vec![
        Buffer::zeros(DType::F32, len),
        f32_buffer(1, len),
        Buffer::zeros(DType::F32, g * nu),
        Buffer::zeros(DType::F32, g * nu),
        f32_buffer(2, len),
        f32_buffer(3, nu),
        f32_buffer(4, nu),
        f32_buffer(5, rows as usize),
        Buffer::from_f64_values(DType::F32, &rstd),
        Buffer::zeros(DType::I32, 2 * g),
    ];
    let mut args: Vec<ArgValue> = (0..10).map(ptr).collect();
    args.extend([
        ArgValue::Int(n),
        ArgValue::Int(n),
        ArgValue::Float(1e-5),
        ArgValue::Int(group as i64),
        ArgValue::Int(block as i64),
    ]);
    differential(&f, [rows, 1, 1], &args, &bufs, &[1, 4, 8]);
}

#[test]
fn backward_dx_runs_like_the_block_ir() {
    dx_run(16, 13, 5, 2);
    dx_run(64, 64, 3, 4);
    // Enough locks for the store of dx to move past the acquire (module `defer`), and
    // more rows than locks, so that both the first store and the accumulation run.
    dx_run(16, 13, 70, 64);
    dx_run(64, 50, 5, 256);
}

fn dwdb_run(bm: u32, bn: u32, rows: i64, n: i64) {
    let sig = format!("*fp32,*fp32,*fp32,*fp32,i32,i32,{bm},{bn}");
    let f = bir(&seed_source(), DWDB, &sig);
    let (r, nu) = (rows as usize, n as usize);
    let bufs = vec![
        f32_buffer(1, r * nu),
        f32_buffer(2, r * nu),
        Buffer::zeros(DType::F32, nu),
        Buffer::zeros(DType::F32, nu),
    ];
    let args = [
        ptr(0),
        ptr(1),
        ptr(2),
        ptr(3),
        ArgValue::Int(rows),
        ArgValue::Int(n),
        ArgValue::Int(bm as i64),
        ArgValue::Int(bn as i64),
    ];
    let grid = (n as u32).div_ceil(bn);
    differential(&f, [grid, 1, 1], &args, &bufs, &[1, 4, 8]);
}

#[test]
fn backward_dwdb_runs_like_the_block_ir() {
    dwdb_run(4, 8, 10, 13);
    dwdb_run(32, 128, 40, 200);
}
