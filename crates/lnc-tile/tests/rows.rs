//! Half rows converted whole (`row_load`/`row_store`): which accesses move, and the same
//! results as the block IR — tile conversions and row conversions alike — for every `N`
//! around tile and extent boundaries, outputs poisoned with NaN.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::DType;
use lnc_tile::TileOptions;

fn ns(block: i64) -> Vec<i64> {
    let mut v = vec![-3, 0, 1, 3, 4, 5, 9, block - 5, block - 1, block, block + 2];
    v.sort();
    v.dedup();
    v
}

fn half_buffer(d: DType, seed: u64, n: usize) -> Buffer {
    Buffer::from_f64_values(d, &data(seed, n))
}

fn poison(d: DType, n: usize) -> Buffer {
    Buffer::from_f64_values(d, &vec![f64::NAN; n])
}

/// Runs `src`'s kernel `k(X, Y, N, BLOCK)` over `n` in `ns(block)` against the block IR
/// (`X` of `d`, `Y` of `out`).
fn check(src: &str, sig: &str, [d, out]: [DType; 2], block: i64, len: usize) {
    for n in ns(block) {
        let f = bir(src, "k", sig);
        let bufs = [half_buffer(d, 5, len), poison(out, len)];
        differential(
            &f,
            [1, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(block)],
            &bufs,
            &[1, 4, 8],
        );
    }
}

/// Runs `src`'s kernel `k(X, Y, N, 32)` on a grid of `programs` against the block IR for
/// each `n` of `ns`, `X` and `Y` both of `d` and holding data (`Y` is read too).
fn check_in_out(src: &str, sig: &str, d: DType, programs: u32, ns: impl IntoIterator<Item = i64>) {
    let len = 32 * programs as usize;
    for n in ns {
        let f = bir(src, "k", sig);
        let bufs = [half_buffer(d, 5, len), half_buffer(d, 6, len)];
        differential(
            &f,
            [programs, 1, 1],
            &[ptr(0), ptr(1), ArgValue::Int(n), ArgValue::Int(32)],
            &bufs,
            &[1, 4, 8],
        );
    }
}

const SCALE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.).to(tl.float32)
    tl.store(Y + i, x * 2. + 1., mask=i < N)
"#;

/// fp16: the masked load becomes a `row_load` of the enabled elements and a select of
/// scratch; the store of `cast(y)` stores `y` into fp32 scratch, then one `row_store`.
#[test]
fn fp16_loads_and_stores_convert_whole_rows() {
    let text = lir_text(SCALE, "k", "*fp16,*fp16,i32,32");
    insta::assert_snapshot!(text);
    assert!(text.contains("row_load") && text.contains("row_store"));
    check(SCALE, "*fp16,*fp16,i32,32", [DType::F16; 2], 32, 32);
}

const SCALE_PID: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.).to(tl.float32)
    tl.store(Y + i, x * 2. + 1., mask=i < N)
"#;

/// bf16 widens in two instructions per tile, cheaper than a pass through scratch: only
/// the store (eleven instructions per four lanes to round) converts the row, unless the
/// loaded row is the same in every program (next test).
#[test]
fn bf16_stores_convert_whole_rows_and_loads_stay_tiles() {
    let text = lir_text(SCALE_PID, "k", "*bf16,*bf16,i32,32");
    insta::assert_snapshot!(text);
    assert!(!text.contains("row_load") && text.contains("row_store"));
    check(SCALE_PID, "*bf16,*bf16,i32,32", [DType::BF16; 2], 32, 32);
}

/// A row every program loads the same (no `program_id` in its pointer, offset or count,
/// from an argument the kernel never writes) is converted once per launch and worker, for
/// bf16 too; a row that depends on the program is not.
#[test]
fn rows_the_same_in_every_program_convert_once() {
    for t in ["fp16", "bf16"] {
        let text = lir_text(SCALE, "k", &format!("*{t},*{t},i32,32"));
        assert!(text.contains("row_load.once(0) s0[0..%"), "{text}");
        assert!(text.contains("at byte 64"), "buffers after the flag bytes: {text}");
    }
    let text = lir_text(SCALE_PID, "k", "*fp16,*fp16,i32,32");
    assert!(text.contains("row_load s0") && !text.contains(".once"), "{text}");
    check(SCALE_PID, "*fp16,*fp16,i32,32", [DType::F16; 2], 32, 32);
    check(SCALE, "*bf16,*bf16,i32,32", [DType::BF16; 2], 32, 32);
}

const SHIFTED: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + 3 + i, mask=i < N, other=-1.5)
    tl.store(Y + i + 1, x - 0.25, mask=i < N)
"#;

/// Rows starting at an offset (`iv + t`), and an `other` that is not zero.
#[test]
fn rows_at_an_offset_and_their_other() {
    let text = lir_text(SHIFTED, "k", "*fp16,*fp16,i32,16");
    insta::assert_snapshot!(text);
    check(SHIFTED, "*fp16,*fp16,i32,16", [DType::F16; 2], 16, 24);
}

const NORM: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(i < N, x - mean, 0.)
    var = tl.sum(d * d, axis=0) / N
    tl.store(Y + i, d / tl.sqrt(var + 1e-5), mask=i < N)
"#;

/// A row kept in scratch for later loops is converted straight into that scratch: the
/// first loop's copy of it disappears from the steady state. (The output is fp32: the
/// sums associate differently in tiles, and fp16 output would round some of those
/// differences to a whole ulp.)
#[test]
fn a_row_kept_for_later_loops_is_converted_into_its_scratch() {
    let text = lir_text(NORM, "k", "*fp16,*fp32,i32,64");
    insta::assert_snapshot!(text);
    assert_eq!(text.matches("row_load s0").count(), 1, "{text}");
    check(NORM, "*fp16,*fp32,i32,64", [DType::F16, DType::F32], 64, 64);
}

const NORM_PID: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    row = tl.program_id(0) * BLOCK
    x = tl.load(X + row + i, mask=i < N, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(i < N, x - mean, 0.)
    var = tl.sum(d * d, axis=0) / N
    tl.store(Y + row + i, d / tl.sqrt(var + 1e-5), mask=i < N)
"#;

/// A bf16 row kept in scratch for later loops is converted by `row_load` too, although it
/// differs between programs: widened tile by tile, the kept values would have their NaNs
/// quieted before the store to scratch, six instructions per tile.
#[test]
fn a_bf16_row_kept_for_later_loops_is_converted_into_its_scratch() {
    let text = lir_text(NORM_PID, "k", "*bf16,*fp32,i32,64");
    assert_eq!(text.matches("row_load s0").count(), 1, "{text}");
    assert!(!text.contains(".once"), "{text}");
    check(NORM_PID, "*bf16,*fp32,i32,64", [DType::BF16, DType::F32], 64, 64);
    // A bf16 row used by its own loop alone stays tiles.
    assert!(!lir_text(SCALE_PID, "k", "*bf16,*bf16,i32,32").contains("row_load"));
}

const IN_PLACE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.)
    tl.store(X + i, x * 3., mask=i < N)
    tl.store(Y + i, x, mask=(i < N) & (i % 3 == 0))
"#;

/// A load and a store of the same argument in one loop, the load first at the same tile:
/// the store converts the row after the loop, the load stays (it would read what the loop
/// has not stored yet, were it moved, in general). A store whose mask is not the loop's
/// bound stays a tile.
#[test]
fn in_place_rows_store_whole_and_other_masks_stay_tiles() {
    let text = lir_text(IN_PLACE, "k", "*fp16,*fp16,i32,16");
    insta::assert_snapshot!(text);
    assert!(!text.contains("row_load"), "{text}");
    assert_eq!(text.matches("row_store %0[").count(), 1, "{text}");
    assert!(text.contains("store.contig %1[") && !text.contains("row_store %1["), "{text}");
    check(IN_PLACE, "*fp16,*fp16,i32,16", [DType::F16; 2], 16, 16);
}

const ACCUMULATE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(Y + i, mask=i < N, other=0.)
    x = tl.load(X + i, mask=i < N, other=0.).to(tl.float32)
    tl.store(Y + i, x * 2. + y, mask=i < N)
"#;

/// `y += f(x)` in half, the seed backward's partial rows: each iteration reads its own
/// tile of `Y` before storing it, so the store converts the whole row after the loop (in
/// bf16, one instruction per sixteen lanes in the helper against about ten per four in a
/// tile); the load of `Y` stays a tile.
#[test]
fn read_modify_write_rows_store_whole() {
    for d in ["bf16", "fp16"] {
        let sig = format!("*{d},*{d},i32,32");
        let text = lir_text(ACCUMULATE, "k", &sig);
        if d == "bf16" {
            insta::assert_snapshot!(text);
        }
        assert!(text.contains("load.contig %1[") && text.contains("row_store %1["), "{text}");
        let dtype = if d == "bf16" { DType::BF16 } else { DType::F16 };
        check_in_out(ACCUMULATE, &sig, dtype, 3, ns(32).into_iter().chain([40, 63, 64, 70]));
    }
}

const UNMASKED_STORES: [&str; 2] = [
    r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=0.)
    y = tl.load(Y + i, mask=i < N, other=0.)
    tl.store(Y + i, y + x)
"#,
    r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < N, other=3.)
    tl.store(Y + i, x * 2.)
"#,
];

/// An unmasked store in a loop the bound predicate splits stays a tile: the tiles past
/// `n` store too (`other=` values), so they must run, where a row store of scratch would
/// read what the dropped tail never wrote (the previous launch's values, the area being
/// reused).
#[test]
fn unmasked_stores_in_bounded_loops_stay_tiles() {
    for src in UNMASKED_STORES {
        for d in ["bf16", "fp16"] {
            let sig = format!("*{d},*{d},i32,32");
            let text = lir_text(src, "k", &sig);
            assert!(!text.contains("row_store"), "{text}");
            let dtype = if d == "bf16" { DType::BF16 } else { DType::F16 };
            check_in_out(src, &sig, dtype, 1, ns(32));
        }
    }
}

const STORE_THEN_LOAD: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < N) * 2., mask=i < N)
    z = tl.load(Y + i, mask=i < N)
    tl.store(X + i, z + 1., mask=i < N)
"#;

/// A store the loop reads back afterwards stays a tile: delayed after the loop, the load
/// would read the old value. (`X`, loaded before its store, still converts whole.)
#[test]
fn stores_read_back_in_the_loop_stay_tiles() {
    let text = lir_text(STORE_THEN_LOAD, "k", "*bf16,*bf16,i32,32");
    assert!(text.contains("store.contig %1[") && !text.contains("row_store %1["), "{text}");
    assert!(text.contains("row_store %0["), "{text}");
    check_in_out(STORE_THEN_LOAD, "*bf16,*bf16,i32,32", DType::BF16, 1, ns(32));
}

const UNMASKED: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i) + N)
"#;

/// No mask: the row is the whole extent.
#[test]
fn unmasked_rows_are_the_whole_block() {
    let text = lir_text(UNMASKED, "k", "*fp16,*fp16,i32,8");
    insta::assert_snapshot!(text);
    assert!(text.contains("row_load.once(0) s0[0..%") && text.contains("row_store"), "{text}");
    let f = bir(UNMASKED, "k", "*fp16,*fp16,i32,8");
    let bufs = [half_buffer(DType::F16, 9, 8), poison(DType::F16, 8)];
    differential(&f, [1, 1, 1], &[ptr(0), ptr(1), ArgValue::Int(2), ArgValue::Int(8)], &bufs, &[1, 4, 8]);
}

const TWO_D: &str = r#"
@triton.jit
def k(X, Y, M, N, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.arange(0, BC)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.5).to(tl.float32)
    tl.store(Y + offs, x * 2. - 1., mask=mask)
"#;

/// 2-D blocks: each row of the block is a row conversion, its offset (computed from the
/// outer loop's index inside the tile loop) moved before the tile loop, and the row mask
/// (`rows < M`, a splat in the tile loop) guarding the count.
#[test]
fn two_d_blocks_convert_each_row() {
    let sig = "*fp16,*fp16,i32,i32,4,16";
    let text = lir_text(TWO_D, "k", sig);
    insta::assert_snapshot!(text);
    assert!(text.contains("row_load") && text.contains("row_store"), "{text}");
    for m in [-1, 0, 3, 4, 6] {
        for n in [-2, 0, 1, 5, 15, 16] {
            let f = bir(TWO_D, "k", sig);
            let len = 8 * 16;
            let bufs = [half_buffer(DType::F16, 11, len), poison(DType::F16, len)];
            let args =
                [ptr(0), ptr(1), ArgValue::Int(m), ArgValue::Int(n), ArgValue::Int(4), ArgValue::Int(16)];
            differential(&f, [2, 1, 1], &args, &bufs, &[1, 4, 8]);
        }
    }
}

/// Where the host converts fp16 tiles in one instruction each way (F16C, `native_f16`),
/// an fp16 load is treated as a bf16 one: it stays a tile load, and a row used by later
/// loops is read again from its argument by each (as an fp32 row is) instead of being kept
/// in scratch. An fp16 store stays a tile store too, unless its row is longer than 2 KB and
/// the row store would stream (into an argument the kernel never reads).
#[test]
fn native_fp16_rows_stay_tiles() {
    let native = TileOptions { native_f16: true, ..Default::default() };
    let lir = |src, sig, opts| {
        let l = tile_opts(&bir(src, "k", sig), opts).unwrap_or_else(|e| panic!("tiling failed: {e}"));
        lnc_lir::print_function(&l)
    };
    let text = lir(SCALE_PID, "*fp16,*fp16,i32,32", native);
    insta::assert_snapshot!(text);
    assert!(!text.contains("row_load") && !text.contains("row_store"), "{text}");
    let text = lir(NORM_PID, "*fp16,*fp32,i32,64", native);
    insta::assert_snapshot!("native_fp16_rows_stay_tiles_norm", text);
    assert!(!text.contains("row_load") && !text.contains("scratch"), "{text}");
    // 4 KB rows: the row store streams them; 2 KB rows stay tiles.
    let text = lir(SCALE_PID, "*fp16,*fp16,i32,2048", native);
    assert!(!text.contains("row_load") && text.contains("row_store"), "{text}");
    let text = lir(SCALE_PID, "*fp16,*fp16,i32,1024", native);
    assert!(!text.contains("row_store"), "{text}");
    // Not when nothing streams, or when the kernel reads the row it stores.
    let text = lir(SCALE_PID, "*fp16,*fp16,i32,4096", TileOptions { stream: false, ..native });
    assert!(!text.contains("row_store"), "{text}");
    let in_place = SCALE_PID.replace("tl.store(Y + i", "tl.store(X + i");
    let text = lir(&in_place, "*fp16,*fp16,i32,4096", native);
    assert!(!text.contains("row_store"), "{text}");
    // Nor with `f16_stores` (256-bit loops, whose stores convert in a register): the
    // 4 KB rows stay tiles, cached.
    let text = lir(SCALE_PID, "*fp16,*fp16,i32,2048", TileOptions { f16_stores: true, ..native });
    assert!(!text.contains("row_store") && !text.contains("stream"), "{text}");
    // With `bf16_stores` (256-bit loops, which round in the loop) bf16 rows stay tiles,
    // long ones streaming in their loops; without it they convert whole.
    let eight = TileOptions { lanes: 8, stream: true, ..native };
    let text = lir(SCALE_PID, "*bf16,*bf16,i32,4096", TileOptions { bf16_stores: true, ..eight });
    assert!(!text.contains("row_store") && text.contains(" stream %"), "{text}");
    let text = lir(SCALE_PID, "*bf16,*bf16,i32,4096", eight);
    assert!(text.contains("row_store"), "{text}");
}
