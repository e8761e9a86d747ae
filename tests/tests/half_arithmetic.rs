//! Random expressions on `fp16` and `bf16` blocks, every operation computed in `fp32` and
//! rounded to the dtype: the JIT (with F16C rounding `fp16` tiles through scratch where the
//! host has it, and without) against the block-IR interpreter, bit for bit (NaN matching
//! NaN), and the two JIT flows against each other bit for bit, NaNs included. The result
//! `z` is stored, and so is `z * z - x`, so `z` is both stored and used (its rounding must
//! not be left to the store). Inputs mix ordinary values with zeros, subnormals,
//! infinities and NaNs; `N` is not a multiple of the block, and the tail lanes load
//! `other=1.`. A fixed seed, as in `proptest_kernels.rs` (`PROPTEST_RNG_SEED` and
//! `PROPTEST_CASES` override it).

mod common;

use common::diff::{A, Case, Check, diff};
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// An expression over `x` and `y` built from `bytes` (the simplest leaf when they run out).
fn expr(bytes: &[u8], pos: &mut usize, depth: u32) -> String {
    let b = bytes.get(*pos).copied().unwrap_or(0);
    *pos += 1;
    if depth == 0 || b % 4 == 0 {
        return ["x", "y", "(x * 0.75)", "(y + 2.5)"][(b as usize / 4) % 4].into();
    }
    let a = expr(bytes, pos, depth - 1);
    let c = expr(bytes, pos, depth - 1);
    match (b / 4) % 9 {
        0 => format!("({a} + {c})"),
        1 => format!("({a} - {c})"),
        2 => format!("({a} * {c})"),
        3 => format!("({a} / {c})"),
        4 => format!("tl.maximum({a}, {c})"),
        5 => format!("tl.where({a} < {c}, {a}, {c} * 0.5)"),
        6 => format!("({a} * 1.5 + {c})"),
        7 => format!("(({a}).to(tl.float32) * 0.1).to(x.dtype) - {c}"),
        _ => format!("tl.sqrt(tl.abs({a})) * {c}"),
    }
}

fn kernel(body: &str) -> String {
    format!(
        r#"
import triton
import triton.language as tl

@triton.jit
def k(X, Y, Z, W, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=1.)
    y = tl.load(Y + i, mask=m, other=1.)
    z = {body}
    tl.store(Z + i, z, mask=m)
    tl.store(W + i, z * z - x, mask=m)
"#
    )
}

/// `n` inputs from `seed`: mostly moderate values, some special ones.
fn inputs(seed: u64, n: usize) -> Vec<f32> {
    let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 6.0e-8, -3.0e-5, 65504.0, 1.0e30];
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            if s.is_multiple_of(16) {
                specials[(s >> 5) as usize % specials.len()]
            } else {
                (u * 200.0 - 100.0) as f32
            }
        })
        .collect()
}

fn check(bytes: &[u8], seed: u64, n: i32, block: u32, dtype: &str) {
    let body = expr(bytes, &mut 0, 3);
    let source = kernel(&body);
    let sig = format!("*{dtype},*{dtype},*{dtype},*{dtype},i32,{block}");
    let len = n as usize;
    let (x, y) = (inputs(seed, len), inputs(seed ^ 0x9e37_79b9, len));
    let buf = |v: &[f32]| -> A {
        match dtype {
            "fp16" => v.iter().map(|&a| f16::from_f32(a)).collect::<Vec<_>>().into(),
            _ => v.iter().map(|&a| bf16::from_f32(a)).collect::<Vec<_>>().into(),
        }
    };
    let poisoned = || -> A {
        match dtype {
            "fp16" => vec![f16::NAN; len].into(),
            _ => vec![bf16::NAN; len].into(),
        }
    };
    let grid = (len as u32).div_ceil(block);
    let case = Case::new("k", &sig, grid, vec![buf(&x), buf(&y), poisoned(), poisoned(), A::I32(n)])
        .check(2, Check::Exact)
        .check(3, Check::Exact);
    // F16C converts fp16 only: bf16 runs once.
    let flows: &[bool] = if dtype == "fp16" { &[true, false] } else { &[false] };
    let outs: Vec<Vec<A>> = flows
        .iter()
        .map(|&f16c| {
            let opts = lnc::CompileOptions { verify: true, f16c, ..Default::default() };
            let module = lnc::Jit::with_options(opts)
                .module("half_arithmetic.py", source.clone())
                .unwrap_or_else(|e| panic!("{e}\n{source}"));
            diff(&module, &case)
        })
        .collect();
    for arg in [2, 3] {
        let bits = |o: &[A]| (0..len).map(|k| o[arg].data().bits(k)).collect::<Vec<_>>();
        assert!(outs.iter().all(|o| bits(o) == bits(&outs[0])), "F16C and integer flows differ:\n{source}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        rng_seed: RngSeed::Fixed(0x4a1f_2026_1125),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn half_expressions_match_the_interpreter(
        bytes in proptest::collection::vec(any::<u8>(), 0..24),
        seed in any::<u64>(),
        n in 1i32..200,
        block in prop::sample::select(vec![4u32, 16, 64]),
        bf in any::<bool>(),
    ) {
        check(&bytes, seed, n, block, if bf { "bf16" } else { "fp16" });
    }
}

/// Every operation of the generator on leaves `y` and `x * 0.75`, in both dtypes.
#[test]
fn every_operation_in_both_dtypes() {
    for k in 0..9u8 {
        assert_eq!(expr(&[1 + 4 * k, 4, 8], &mut 0, 3).matches("0.75").count(), 1 + (k == 5) as usize);
        for dtype in ["fp16", "bf16"] {
            check(&[1 + 4 * k, 4, 8], 7, 133, 16, dtype);
        }
    }
}
