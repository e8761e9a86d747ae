//! Helpers shared by the tiling tests: source → block IR → loop IR, and differential
//! runs of both IRs on the same inputs.
#![allow(dead_code)]

pub mod lir_interp;

use lnc_bir::interp::{ArgValue, Buffer};
use lnc_diag::{SourceFile, render_all};
use lnc_tile::{TileError, TileOptions};

pub const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");

/// The seed file's text.
pub fn seed_source() -> String {
    std::fs::read_to_string(SEED).expect("seed file")
}

/// Parses `src` and lowers `kernel` on `sig` to verified block IR.
pub fn bir(src: &str, kernel: &str, sig: &str) -> lnc_bir::Function {
    let file = SourceFile::new("k.py", src);
    let ast = lnc_syntax::parse_file(&file).unwrap_or_else(|d| panic!("{}", render_all(&d, &file)));
    let f =
        ast.functions.iter().find(|f| f.name.name == kernel).unwrap_or_else(|| panic!("no kernel {kernel}"));
    let s = lnc_front::parse_signature(sig, f).unwrap_or_else(|d| panic!("{}", d.render(&file)));
    let func = lnc_front::lower_kernel(&file, &ast, kernel, &s)
        .unwrap_or_else(|d| panic!("{}", render_all(&d, &file)));
    if let Err(e) = lnc_bir::verify::verify(&func) {
        panic!("the block IR of {kernel} does not verify:\n{e}");
    }
    func
}

/// Tiles a block-IR function with `lanes`, checks the loop-IR verifier accepts it.
pub fn tile_with(f: &lnc_bir::Function, lanes: u8) -> Result<lnc_lir::Function, TileError> {
    tile_opts(f, TileOptions { lanes, ..Default::default() })
}

/// Tiles a block-IR function with `opts`, checks the loop-IR verifier accepts it.
pub fn tile_opts(f: &lnc_bir::Function, opts: TileOptions) -> Result<lnc_lir::Function, TileError> {
    let l = lnc_tile::lower(f, &opts)?;
    if let Err(e) = lnc_lir::verify(&l) {
        panic!("the loop IR of {} does not verify:\n{e}", f.name);
    }
    Ok(l)
}

/// Source → loop IR (default options), panicking on errors.
pub fn lir(src: &str, kernel: &str, sig: &str) -> lnc_lir::Function {
    let f = bir(src, kernel, sig);
    tile_with(&f, 4).unwrap_or_else(|e| panic!("tiling failed: {e}"))
}

/// Source → loop IR of the fusion decisions alone (masks stay masks), panicking on errors.
pub fn lir_base(src: &str, kernel: &str, sig: &str) -> lnc_lir::Function {
    let f = bir(src, kernel, sig);
    tile_opts(
        &f,
        TileOptions {
            lanes: 4,
            bounds: false,
            unroll: 1,
            rows: false,
            stream: false,
            prefetch: false,
            native_f16: false,
            native_bf16: false,
            half_stores: false,
            f16_stores: false,
            bf16_stores: false,
            defer_stores: false,
            checked: false,
        },
    )
    .unwrap_or_else(|e| panic!("tiling failed: {e}"))
}

/// Source → printed loop IR.
pub fn lir_text(src: &str, kernel: &str, sig: &str) -> String {
    lnc_lir::print_function(&lir(src, kernel, sig))
}

/// The tiling error of a kernel that must not tile.
pub fn tile_err(src: &str, kernel: &str, sig: &str) -> TileError {
    let f = bir(src, kernel, sig);
    match lnc_tile::lower(&f, &TileOptions::default()) {
        Ok(l) => panic!("expected a tiling error, got:\n{}", lnc_lir::print_function(&l)),
        Err(e) => e,
    }
}

/// Deterministic pseudo-random values in `[-2, 2)`.
pub fn data(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64) * 4.0 - 2.0
        })
        .collect()
}

/// Runs `f` with the block-IR interpreter and its tiling (for every lane count in
/// `lanes`) with the loop-IR interpreter on copies of `bufs`, and checks every buffer
/// ends the same (floats to a relative 1e-5: reductions associate differently).
pub fn differential(f: &lnc_bir::Function, grid: [u32; 3], args: &[ArgValue], bufs: &[Buffer], lanes: &[u8]) {
    let mut expected = bufs.to_vec();
    lnc_bir::interp::run_grid(f, grid, args, &mut expected)
        .unwrap_or_else(|e| panic!("bir interpreter: {e}"));
    // (lanes, bounds, unroll, rows, native fp16 loads)
    let plans = |l| {
        [
            (l, true, 4, true, false),
            (l, true, 4, true, true),
            (l, false, 4, true, false),
            (l, true, 1, false, false),
        ]
    };
    for (l, bounds, unroll, rows, native) in lanes.iter().flat_map(|&l| plans(l)) {
        let opts = TileOptions {
            lanes: l,
            bounds,
            unroll,
            rows,
            stream: rows,
            prefetch: rows,
            native_f16: native,
            native_bf16: native,
            // At 8 lanes, fp16 stores alone stay in their loops (as with 256-bit loops).
            half_stores: native && rows && l != 8,
            f16_stores: native && rows,
            // bf16 stores too in 256-bit loops, tiles of 8 lanes.
            bf16_stores: native && rows && l == 8,
            defer_stores: rows,
            checked: bounds,
        };
        let lf = tile_opts(f, opts).unwrap_or_else(|e| panic!("tiling failed: {e}"));
        let mut got = bufs.to_vec();
        lir_interp::run_grid(&lf, grid, args, &mut got)
            .unwrap_or_else(|e| panic!("lir interpreter: {e:?}\n{}", lnc_lir::print_function(&lf)));
        for (k, (e, g)) in expected.iter().zip(&got).enumerate() {
            let (ev, gv) = (e.to_f64_values(), g.to_f64_values());
            for (j, (x, y)) in ev.iter().zip(&gv).enumerate() {
                let ok = x == y
                    || (x.is_nan() && y.is_nan())
                    || (x - y).abs() <= 1e-5 * x.abs().max(y.abs()).max(1.0);
                assert!(
                    ok,
                    "lanes={l} bounds={bounds} unroll={unroll} rows={rows} native_f16={native}: buffer {k} element {j}: bir {x}, lir {y}\n{}",
                    lnc_lir::print_function(&lf)
                );
            }
        }
    }
}

/// A float32 buffer of `n` pseudo-random values.
pub fn f32_buffer(seed: u64, n: usize) -> Buffer {
    Buffer::from_f64_values(lnc_lir::DType::F32, &data(seed, n))
}

pub fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// The seed forward's arguments: buffers 0 to 5 (X, Y, W, B, Mean, Rstd), the row
/// `stride`, `n`, `eps = 1e-5` and `BLOCK_SIZE`.
#[allow(dead_code)]
pub fn seed_forward_args(stride: i64, n: i64, block: i64) -> Vec<ArgValue> {
    let mut args: Vec<ArgValue> = (0..6).map(ptr).collect();
    args.extend([ArgValue::Int(stride), ArgValue::Int(n), ArgValue::Float(1e-5), ArgValue::Int(block)]);
    args
}
