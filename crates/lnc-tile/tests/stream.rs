//! Streaming stores (module `stream`): which stores may bypass the caches, and the same
//! results as the block IR whatever `stream_ok` answers.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::{DType, Opcode};
use lnc_tile::TileOptions;

const SCALE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + row * N + i, mask=m, other=0.)
    tl.store(Y + row * N + i, x * 2.0 + 1.0, mask=m)
"#;

/// The streaming stores of `f` and their flags.
fn streaming(f: &lnc_lir::Function) -> usize {
    let mut n = 0;
    f.walk(|i| n += matches!(f.insts[i].opcode, Opcode::Store { stream: true, .. }) as usize);
    n
}

#[test]
fn the_steady_loop_of_a_store_pass_streams() {
    let f = lir(SCALE, "k", "*fp32,*fp32,i32,1024");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    // The unrolled steady loop's two stores; not the remainder's or the tail's.
    assert_eq!(streaming(&f), 2);
}

#[test]
fn stores_that_may_not_stream_do_not() {
    // fp64 streams too (movupd has a non-temporal form).
    assert!(streaming(&lir(SCALE, "k", "*fp64,*fp64,i32,1024")) > 0);
    // Integers: Cranelift stores them with movdqu, whose non-temporal form differs.
    let ints = SCALE.replace("x * 2.0 + 1.0", "x * 2 + 1").replace("other=0.", "other=0");
    assert_eq!(streaming(&lir(&ints, "k", "*i32,*i32,i32,1024")), 0);
    // Half stores convert whole rows in a runtime call instead (see below).
    assert_eq!(streaming(&lir(SCALE, "k", "*fp16,*fp16,i32,1024")), 0);
    // Y read by the kernel (in place): a program may read what it streamed.
    let in_place = SCALE.replace("tl.store(Y + row", "tl.store(X + row");
    assert_eq!(streaming(&lir(&in_place, "k", "*fp32,*fp32,i32,1024")), 0);
    // Off by one element from the vector: the stores of one iteration cannot all be
    // aligned.
    let shifted = SCALE.replace("tl.store(Y + row * N + i", "tl.store(Y + row * N + i + 1");
    assert_eq!(streaming(&lir(&shifted, "k", "*fp32,*fp32,i32,1024")), 0);
}

/// Where non-temporal stores write only part of a line that cached stores write too, the
/// cached store waits for the line to leave the write-combining buffer and reads it back:
/// a program's streaming stores write lines no cached store of it writes, aligned or not,
/// and rows that do not start on a 16-byte vector stream as well (the first and last
/// partial lines cached).
#[test]
fn streaming_stores_write_lines_no_cached_store_writes() {
    let f = bir(SCALE, "k", "*fp32,*fp32,i32,1024");
    let l = lir(SCALE, "k", "*fp32,*fp32,i32,1024");
    for n in [9i64, 61, 100, 1000, 1004, 1020, 1023, 1024] {
        // Y starting 0-3 elements past a line: rows aligned or not to the vector.
        for shift in 0..4i64 {
            let len = 3 * 1024 + 4;
            let bufs = [
                Buffer::from_f64_values(DType::F32, &data(7, len)),
                Buffer::from_f64_values(DType::F32, &vec![f64::NAN; len]),
            ];
            let args =
                [ptr(0), ArgValue::Ptr { buffer: 1, offset: shift }, ArgValue::Int(n), ArgValue::Int(1024)];
            let mut want = bufs.to_vec();
            lnc_bir::interp::run_grid(&f, [3, 1, 1], &args, &mut want).unwrap();
            let mut got = bufs.to_vec();
            let lines = lir_interp::run_grid_lines(&l, [3, 1, 1], &args, &mut got).unwrap();
            let what = format!("n = {n}, Y + {shift}");
            assert_eq!(want[1].to_f64_values().iter().filter(|v| v.is_nan()).count(), len - 3 * n as usize);
            for (k, (x, y)) in want[1].to_f64_values().iter().zip(got[1].to_f64_values()).enumerate() {
                assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()), "{what}: element {k}");
            }
            assert!(lines.mixed.is_empty(), "{what}: lines written both ways: {:?}", lines.mixed);
            // A cached store into a line the core does not hold waits for it, and the
            // streaming stores behind it with it: a row that streams owns those lines first.
            assert!(lines.cold.is_empty(), "{what}: lines written cached, not owned first: {:?}", lines.cold);
            assert_eq!(lines.streamed + lines.cached, 3 * n as usize, "{what}");
            // Every row of two whole lines or more past its first line boundary streams
            // (the interpreter's stream_ok agrees whenever aligned), 16-byte aligned or
            // not, all but at most a line and a half at each end (the head and tail
            // loops' S + L - 1 elements), and the remainder and tail of the pass.
            if n >= 64 {
                assert!(lines.streamed >= 3 * (n as usize - 2 * 23 - 7), "{what}: {lines:?}");
            }
        }
    }
}

/// The `row_store`s of `f` with a streaming flag, and all of them.
fn streaming_rows(f: &lnc_lir::Function) -> (usize, usize) {
    let (mut streamed, mut all) = (0, 0);
    f.walk(|i| {
        if let Opcode::RowStore { stream, .. } = f.insts[i].opcode {
            streamed += stream as usize;
            all += 1;
        }
    });
    (streamed, all)
}

#[test]
fn a_half_row_store_streams_under_the_rows_flag() {
    for sig in ["*fp16,*fp16,i32,1024", "*bf16,*bf16,i32,1024", "*fp32,*fp16,i32,1024"] {
        let f = lir(SCALE, "k", sig);
        assert_eq!(streaming_rows(&f), (1, 1), "{sig}");
        let text = lnc_lir::print_function(&f);
        assert!(text.contains("stream_ok") && text.contains("] stream %"), "{sig}:\n{text}");
    }
    // In place: a program may read what another streamed.
    let in_place = SCALE.replace("tl.store(Y + row", "tl.store(X + row");
    assert_eq!(streaming_rows(&lir(&in_place, "k", "*fp16,*fp16,i32,1024")).0, 0);
}

#[test]
fn streaming_kernels_compute_what_the_block_ir_computes() {
    for n in [0i64, 1, 7, 8, 9, 100, 1023, 1024] {
        let f = bir(SCALE, "k", "*fp32,*fp32,i32,1024");
        let len = 3 * 1024;
        let bufs = [
            Buffer::from_f64_values(DType::F32, &data(3, len)),
            Buffer::from_f64_values(DType::F32, &vec![f64::NAN; len]),
        ];
        differential(&f, [3, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(1024)], &bufs, &[4, 8]);
    }
}

#[test]
fn streaming_half_rows_compute_what_the_block_ir_computes() {
    for (d, sig) in [(DType::F16, "*fp16,*fp16,i32,1024"), (DType::BF16, "*bf16,*bf16,i32,1024")] {
        for n in [0i64, 1, 7, 8, 9, 15, 17, 100, 1023, 1024] {
            let f = bir(SCALE, "k", sig);
            let len = 3 * 1024;
            let bufs =
                [Buffer::from_f64_values(d, &data(3, len)), Buffer::from_f64_values(d, &vec![f64::NAN; len])];
            differential(
                &f,
                [3, 1, 1],
                &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(1024)],
                &bufs,
                &[4, 8],
            );
        }
    }
}

/// With `half_stores` (16-lane tiles computed in 512 bits, where lnc-clif converts an
/// `fp16` tile into a register and stores it non-temporally) the `fp16` stores stay in
/// their loop whatever the row's length, and the steady loop's stream like `fp32` ones.
#[test]
fn fp16_tile_stores_stream_under_half_stores() {
    let f = bir(SCALE, "k", "*fp16,*fp16,i32,4096");
    let opts = TileOptions {
        lanes: 16,
        native_f16: true,
        native_bf16: true,
        half_stores: true,
        ..TileOptions::default()
    };
    let lf = tile_opts(&f, opts).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!(lnc_lir::print_function(&lf));
    // The two stores of the line-split steady loop's middle copy, and the remainder loop's
    // one (a 16-lane fp16 tile is two 16-byte vectors, as an 8-lane fp32 tile is).
    assert_eq!(streaming(&lf), 3);
    assert_eq!(streaming_rows(&lf), (0, 0), "no row store");
    // Without it, a 4 KB fp16 row goes through the row helper's streaming store.
    let lf = tile_opts(&f, TileOptions { half_stores: false, ..opts }).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((streaming(&lf), streaming_rows(&lf)), (0, (1, 1)));
    // The same results as the block IR, whatever `stream_ok` answers.
    for n in [0i64, 1, 15, 16, 17, 100, 4095, 4096] {
        let len = 3 * 4096;
        let bufs = [
            Buffer::from_f64_values(DType::F16, &data(3, len)),
            Buffer::from_f64_values(DType::F16, &vec![f64::NAN; len]),
        ];
        differential(&f, [3, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(4096)], &bufs, &[16]);
    }
}
