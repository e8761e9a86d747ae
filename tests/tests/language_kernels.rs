//! Every kernel file of `examples/kernels/` and `tests/kernels/` parses, and every `@jit`
//! function in them is accounted for: a kernel of the table below runs through the
//! differential harness (JIT on several pools = block-IR interpreter) on random inputs, a
//! kernel that must be rejected is rejected with its diagnostic, a helper is only called.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use std::collections::BTreeSet;

use common::diff::*;
use common::*;
use rand::Rng;
use rand::rngs::StdRng;

const DIRS: [&str; 2] = ["examples/kernels", "tests/kernels"];

fn repo_path(rel: &str) -> String {
    format!("{}/../{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// One differential run: a kernel of a file, its signature, grid and argument generator.
struct Entry {
    file: &'static str,
    kernel: &'static str,
    sig: &'static str,
    grid: [u32; 3],
    args: fn(&mut StdRng) -> Vec<A>,
    checks: &'static [(usize, Check)],
}

/// Kernels whose specialization must fail, with a fragment of the message.
const REJECTED: &[(&str, &str, &str, &str)] = &[
    ("tests/kernels/tier1.py", "static_assert_fails", "*i32,4", "BLOCK is too small"),
    ("tests/kernels/semantics.py", "bad_unsigned_literal", "*u32,*u32", "negative constant"),
    ("tests/kernels/semantics.py", "bad_literal_range", "*i32,*i32", "out of range"),
    ("tests/kernels/semantics.py", "bad_float_floordiv", "*fp32,*fp32", "`//` needs integer operands"),
    ("tests/kernels/semantics.py", "bad_mixed_sign_div", "*i32,*u32,*i32", "same signedness"),
    ("tests/kernels/blocks_2d.py", "pointer_walk_gather", "*fp32,*fp32,8", "by the same offset"),
];

/// `@jit` functions that are only called by other kernels.
/// Kernels run through the differential harness by a test file of their own (on every
/// integer dtype: `language_int_dtypes.rs`).
const OWN_TESTS: &[(&str, &str)] = &[
    ("tests/kernels/int_dtypes.py", "wrap_bitwise"),
    ("tests/kernels/int_dtypes.py", "div_rem"),
    ("tests/kernels/int_dtypes.py", "shifts"),
    ("tests/kernels/int_dtypes.py", "compares"),
    ("tests/kernels/int_dtypes.py", "scalar_ops"),
    ("tests/kernels/int_dtypes.py", "bool_arithmetic"),
    ("tests/kernels/assign.py", "assign_int"),
    ("tests/kernels/assign.py", "assign_float"),
    ("tests/kernels/assign.py", "assign_loop"),
    ("tests/kernels/assign.py", "assign_tuple"),
    ("tests/kernels/assign.py", "assign_block_size"),
    ("tests/kernels/control_flow.py", "range_edges"),
    // Program 0 waits for program 1: the interpreter, which runs them in order, would not end.
    ("tests/kernels/atomics.py", "fault_while_one_waits_on_a_volatile_flag"),
    ("tests/kernels/atomics.py", "volatile_copy"),
    // `tests/tests/random.rs`: each against a Philox reference and Triton's values.
    ("tests/kernels/random.py", "_seeded_dropout"),
    ("tests/kernels/random.py", "words"),
    ("tests/kernels/random.py", "words64"),
    ("tests/kernels/random.py", "umulhi32"),
    ("tests/kernels/random.py", "scalar_offset"),
    // `tests/tests/dot.rs`: against float64 (exact integer) references.
    ("tests/kernels/dot.py", "matmul_kernel"),
    ("tests/kernels/dot.py", "block_dot"),
    // `tests/tests/fma.rs`: bit for bit against Rust's `mul_add`.
    ("tests/kernels/fma.py", "fma_blocks"),
    ("tests/kernels/fma.py", "fma_mixed"),
    // `tests/tests/argmax.rs`: against first-index references (NaN first, ties left).
    ("tests/kernels/argmax.py", "arg_rows"),
    ("tests/kernels/argmax.py", "arg_ints"),
    ("tests/kernels/argmax.py", "arg_2d"),
];

const DOT_HELPERS: &[(&str, &str)] = &[("tests/kernels/dot.py", "leaky_relu")];

const HELPERS: &[(&str, &str)] = &[
    ("tests/kernels/tier1.py", "_affine"),
    ("tests/kernels/tier1.py", "_moments"),
    ("tests/kernels/tier1.py", "_clamped"),
    ("tests/kernels/tier1.py", "_normalize"),
];

fn f32s(r: &mut StdRng, n: usize, lo: f32, hi: f32) -> A {
    (0..n).map(|_| r.random_range(lo..hi)).collect::<Vec<f32>>().into()
}

fn i32s(r: &mut StdRng, n: usize, lo: i32, hi: i32) -> A {
    (0..n).map(|_| r.random_range(lo..hi)).collect::<Vec<i32>>().into()
}

fn nan32(n: usize) -> A {
    vec![f32::NAN; n].into()
}

fn poison32(n: usize) -> A {
    vec![POISON_I32; n].into()
}

const CLOSE: Check = Check::Close { atol: 1e-4, rtol: 1e-4 };

const CF: &str = "tests/kernels/control_flow.py";
const AT: &str = "tests/kernels/atomics.py";
const B2: &str = "tests/kernels/blocks_2d.py";
const T1: &str = "tests/kernels/tier1.py";
const SE: &str = "tests/kernels/semantics.py";
const LN: &str = "examples/kernels/layer_norm.py";

fn table() -> Vec<Entry> {
    vec![
        // control_flow.py
        Entry {
            file: CF,
            kernel: "loop_forms",
            sig: "*i32,*i32,i32,i32,i32,i32,i32",
            grid: [3, 1, 1],
            args: |r| {
                vec![
                    i32s(r, 3 * 21, -99, 99),
                    poison32(24),
                    2.into(),
                    19.into(),
                    3.into(),
                    21.into(),
                    21.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "runtime_negative_step",
            sig: "*i32,*i32,i32,i32,i32",
            grid: [1, 1, 1],
            args: |r| vec![i32s(r, 50, -9, 9), poison32(2), 47.into(), 3.into(), (-5).into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "collatz",
            sig: "*i32,*i32,*i64,i32",
            grid: [70, 1, 1],
            args: |r| vec![i32s(r, 67, 1, 3000), poison32(67), vec![-1i64; 67].into(), 67.into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "if_chain",
            sig: "*i32,*i32,2",
            grid: [45, 1, 1],
            args: |r| vec![i32s(r, 45, -20, 20), poison32(45)],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "bool_ops",
            sig: "*i32,*i32",
            grid: [33, 1, 1],
            args: |r| vec![i32s(r, 66, -2, 3), poison32(99)],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "row_stats",
            sig: "*fp32,*fp32,*fp32,*i32,i32,i32,32",
            grid: [5, 1, 1],
            args: |r| {
                vec![f32s(r, 5 * 103, -3.0, 3.0), nan32(5), nan32(5), poison32(5), 101.into(), 103.into()]
            },
            checks: &[(1, CLOSE)],
        },
        Entry {
            file: CF,
            kernel: "grid_stride",
            sig: "*fp32,*fp32,i32,16",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 333, -3.0, 3.0), nan32(333), 333.into()],
            checks: &[],
        },
        // The same with 64-bit lengths: bounds compared in 64 bits become loop bounds too.
        Entry {
            file: CF,
            kernel: "row_stats",
            sig: "*fp32,*fp32,*fp32,*i32,i64,i64,32",
            grid: [5, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 5 * 103, -3.0, 3.0),
                    nan32(5),
                    nan32(5),
                    poison32(5),
                    101i64.into(),
                    103i64.into(),
                ]
            },
            checks: &[(1, CLOSE)],
        },
        Entry {
            file: CF,
            kernel: "grid_stride",
            sig: "*fp32,*fp32,i64,16",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 333, -3.0, 3.0), nan32(333), 333i64.into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "branches_in_loop",
            sig: "*fp32,*i32,*fp32,i32",
            grid: [4, 1, 1],
            args: |r| vec![f32s(r, 4 * 19, -3.0, 3.0), poison32(4), nan32(4), 19.into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "halve_until_small",
            sig: "*fp32,*fp32,*i32,i32,16",
            grid: [7, 1, 1],
            args: |r| vec![f32s(r, 99, -500.0, 500.0), nan32(99), poison32(7), 99.into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "triangle",
            sig: "*i32,*i32,i32",
            grid: [3, 1, 1],
            args: |r| vec![i32s(r, 3 * 13, -50, 50), poison32(3), 13.into()],
            checks: &[],
        },
        Entry {
            file: CF,
            kernel: "while_with_loop_inside",
            sig: "*i32,*i32,i32,i32",
            grid: [5, 1, 1],
            args: |r| vec![i32s(r, 7, 1, 9), poison32(10), 7.into(), 100.into()],
            checks: &[],
        },
        // atomics.py
        Entry {
            file: AT,
            kernel: "publish_and_wait",
            sig: "*i32,*fp32,*fp32,fp32",
            grid: [2, 1, 1],
            args: |_| vec![vec![0i32].into(), vec![0f32].into(), vec![f32::NAN].into(), 2.5f32.into()],
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "counter",
            sig: "*i32,*i32",
            grid: [41, 23, 1],
            args: |_| vec![vec![5i32].into(), poison32(41 * 23)],
            checks: &[(1, Check::Multiset)],
        },
        Entry {
            file: AT,
            kernel: "masked_counter",
            sig: "*i32,*i32,i32",
            grid: [301, 1, 1],
            args: |_| vec![vec![0i32].into(), poison32(301), 4.into()],
            checks: &[(1, Check::Multiset)],
        },
        Entry {
            file: AT,
            kernel: "block_add",
            sig: "*fp32,*fp32,*fp32,i32,32",
            grid: [4, 1, 1],
            args: |r| vec![A::at(vec![-7.0f32; 140], 3), f32s(r, 101, -9.0, 9.0), nan32(101), 101.into()],
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "histogram",
            sig: "*i32,*i32,*i32,i32,i32,64",
            grid: [16, 1, 1],
            args: |r| {
                vec![
                    i32s(r, 1001, 0, 9),
                    i32s(r, 1001, -5, 50),
                    vec![-1i32; 10].into(),
                    1001.into(),
                    9.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "min_max",
            sig: "*fp32,*fp32,*fp32,*fp32,i32,i32,16",
            grid: [13, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 201, -50.0, 50.0),
                    vec![f32::NEG_INFINITY; 5].into(),
                    vec![f32::INFINITY; 5].into(),
                    nan32(201),
                    201.into(),
                    5.into(),
                ]
            },
            checks: &[(3, Check::Skip)],
        },
        Entry {
            file: AT,
            kernel: "bit_ops",
            sig: "*u32,*u32,*u32,*u32,i32,i32,32",
            grid: [7, 1, 1],
            args: |r| {
                let x: Vec<u32> = (0..199).map(|_| r.random::<u32>() | r.random::<u32>()).collect();
                vec![
                    x.into(),
                    vec![u32::MAX; 3].into(),
                    vec![0u32; 3].into(),
                    vec![0u32; 3].into(),
                    199.into(),
                    3.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "exchange",
            sig: "*i32,*i32,i32",
            grid: [257, 1, 1],
            args: |_| vec![vec![-1i32; 3].into(), poison32(257), 3.into()],
            checks: &[(0, Check::Skip), (1, Check::Skip)],
        },
        Entry {
            file: AT,
            kernel: "block_exchange",
            sig: "*i64,*i64,*i64,i32,16",
            grid: [3, 1, 1],
            args: |r| {
                let v: Vec<i64> = (0..41).map(|_| r.random()).collect();
                vec![A::at(vec![9i64; 60], 2), v.into(), vec![0i64; 41].into(), 41.into()]
            },
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "cas_block",
            sig: "*i32,*i32,*i32,*i32,8",
            grid: [4, 1, 1],
            args: |r| vec![i32s(r, 32, 0, 3), i32s(r, 32, 0, 3), i32s(r, 32, -9, 9), poison32(32)],
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "spin_lock",
            sig: "*i32,*i32,*i64,i32",
            grid: [500, 1, 1],
            args: |_| vec![vec![0i32].into(), vec![0i32].into(), vec![0i64].into(), 7.into()],
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "first_writer",
            sig: "*i32,*i32,i32",
            grid: [300, 1, 1],
            args: |_| vec![vec![0i32; 11].into(), vec![0i32; 11].into(), 11.into()],
            checks: &[(0, Check::Skip)],
        },
        Entry {
            file: AT,
            kernel: "float_accumulate",
            sig: "*fp32,*fp32,*fp32,*fp32,i32,32",
            grid: [10, 1, 1],
            args: |r| {
                let x: Vec<f32> = (0..301).map(|_| r.random_range(-64..64) as f32 / 8.0).collect();
                vec![
                    x.into(),
                    vec![0.0f32].into(),
                    vec![f32::NEG_INFINITY].into(),
                    vec![f32::INFINITY].into(),
                    301.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: AT,
            kernel: "scalar_rmw",
            sig: "*i32,*i32,*i32,*i32,*i32,i32",
            grid: [130, 1, 1],
            args: |r| {
                vec![
                    i32s(r, 127, i32::MIN, i32::MAX),
                    vec![i32::MIN].into(),
                    vec![i32::MAX].into(),
                    vec![-1i32, 0, 0].into(),
                    poison32(130),
                    127.into(),
                ]
            },
            checks: &[(4, Check::Skip)],
        },
        // blocks_2d.py
        Entry {
            file: B2,
            kernel: "tile_affine",
            sig: "*fp32,*fp32,i32,i32,i32,i32,8,16",
            grid: [3, 2, 1],
            args: |r| {
                vec![f32s(r, 19 * 23, -9.0, 9.0), nan32(19 * 25), 19.into(), 21.into(), 23.into(), 25.into()]
            },
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "reduce_axes",
            sig: "*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,16,16",
            grid: [1, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 11 * 13, -9.0, 9.0),
                    nan32(11),
                    nan32(13),
                    nan32(11 * 13),
                    nan32(11),
                    11.into(),
                    13.into(),
                ]
            },
            checks: &[(1, CLOSE)],
        },
        Entry {
            file: B2,
            kernel: "softmax_rows",
            sig: "*fp32,*fp32,i32,i32,i32,4,32",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 10 * 30, -9.0, 9.0), nan32(10 * 30), 10.into(), 29.into(), 30.into()],
            checks: &[(1, Check::Close { atol: 1e-7, rtol: 1e-5 })],
        },
        Entry {
            file: B2,
            kernel: "outer",
            sig: "*fp32,*fp32,*fp32,i32,i32,8,8",
            grid: [2, 3, 1],
            args: |r| {
                vec![f32s(r, 13, -2.0, 2.0), f32s(r, 17, -2.0, 2.0), nan32(13 * 17), 13.into(), 17.into()]
            },
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "transpose",
            sig: "*i32,*i32,i32,i32,8,4",
            grid: [2, 3, 1],
            args: |r| vec![i32s(r, 11 * 9, -99, 99), poison32(99), 11.into(), 9.into()],
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "matvec",
            sig: "*fp32,*fp32,*fp32,i32,i32,i32,8,16",
            grid: [3, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 21 * 50, -1.0, 1.0),
                    f32s(r, 50, -1.0, 1.0),
                    nan32(21),
                    21.into(),
                    50.into(),
                    50.into(),
                ]
            },
            checks: &[(2, CLOSE)],
        },
        Entry {
            file: B2,
            kernel: "matmul_outer",
            sig: "*fp32,*fp32,*fp32,i32,i32,i32,8,8",
            grid: [2, 2, 1],
            args: |r| {
                vec![
                    f32s(r, 11 * 7, -1.0, 1.0),
                    f32s(r, 7 * 13, -1.0, 1.0),
                    nan32(11 * 13),
                    11.into(),
                    13.into(),
                    7.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "tiles_in_one_program",
            sig: "*fp32,*fp32,*fp32,i32,i32,4,8",
            grid: [1, 1, 1],
            args: |r| vec![f32s(r, 9 * 19, -2.0, 2.0), nan32(9 * 19), nan32(1), 9.into(), 19.into()],
            checks: &[(2, CLOSE)],
        },
        Entry {
            file: B2,
            kernel: "int_reduce",
            sig: "*i32,*i32,*i32,*i32,*i32,i32,i32,8,8",
            grid: [1, 1, 1],
            args: |r| {
                vec![
                    i32s(r, 7 * 5, -999, 999),
                    poison32(5),
                    poison32(7),
                    poison32(5),
                    poison32(7),
                    7.into(),
                    5.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "pointer_walk_while",
            sig: "*fp32,*fp32,i32,8",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 3 * 29, -9.0, 9.0), nan32(3 * 29), 29.into()],
            checks: &[],
        },
        Entry {
            file: B2,
            kernel: "pointer_walk_nested",
            sig: "*fp32,*fp32,i32,i32,4,8",
            grid: [1, 1, 1],
            args: |r| vec![f32s(r, 11 * 19, -9.0, 9.0), nan32(32), 11.into(), 19.into()],
            checks: &[(1, CLOSE)],
        },
        Entry {
            file: B2,
            kernel: "pointer_by_branch",
            sig: "*fp32,*fp32,i32,8",
            grid: [4, 1, 1],
            args: |r| vec![f32s(r, 15, -9.0, 9.0), nan32(28), 7.into()],
            checks: &[],
        },
        // tier1.py
        Entry {
            file: T1,
            kernel: "scalar_io",
            sig: "*fp64,*fp64,i32",
            grid: [9, 1, 1],
            args: |r| {
                let x: Vec<f64> = (0..9).map(|_| r.random_range(-9.0..9.0)).collect();
                vec![x.into(), vec![f64::NAN; 11].into(), 9.into()]
            },
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "row_pointers",
            sig: "*fp32,*fp32,i32,i32,i32,16",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 3 * 40, -9.0, 9.0), nan32(3 * 41), 40.into(), 41.into(), 37.into()],
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "conversions",
            sig: "*fp32,*i32,*i32,*fp32,*u8,*i1,*i64,*fp64,*i16,i32,32",
            grid: [2, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 45, -3e9, 3e9),
                    i32s(r, 45, i32::MIN, i32::MAX),
                    poison32(45),
                    nan32(45),
                    vec![1u8; 45].into(),
                    vec![false; 45].into(),
                    vec![0i64; 45].into(),
                    vec![f64::NAN; 45].into(),
                    vec![0i16; 45].into(),
                    45.into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "math_fns",
            sig: "*fp32,*fp32,*fp32,i32,16",
            grid: [4, 1, 1],
            args: |r| vec![f32s(r, 61, -9.0, 9.0), f32s(r, 61, -9.0, 9.0), nan32(8 * 61), 61.into()],
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "int_fns",
            sig: "*i64,*i64,i32,i64,16",
            grid: [3, 1, 1],
            args: |r| {
                let x: Vec<i64> = (0..45).map(|_| r.random_range(-1 << 40..1 << 40)).collect();
                vec![x.into(), vec![0i64; 5 * 45].into(), 45.into(), 7i64.into()]
            },
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "scalar_fns",
            sig: "*i32,*i32,*i32",
            grid: [1, 1, 1],
            args: |r| vec![i32s(r, 1, -99, 99), i32s(r, 1, -99, 99), poison32(7)],
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "jit_calls",
            sig: "*fp32,*fp32,*fp32,i32,32",
            grid: [3, 1, 1],
            args: |r| vec![f32s(r, 3 * 29, -3.0, 3.0), nan32(3 * 29), nan32(9), 29.into()],
            checks: &[(1, CLOSE), (2, CLOSE)],
        },
        Entry {
            file: T1,
            kernel: "checks_and_prints",
            sig: "*i32,*i32,i32,16",
            grid: [2, 1, 1],
            args: |r| vec![i32s(r, 20, -9, 9), poison32(20), 20.into()],
            checks: &[],
        },
        Entry {
            file: T1,
            kernel: "grid_ids",
            sig: "*i32",
            grid: [3, 2, 2],
            args: |_| vec![poison32(4 * 12)],
            checks: &[],
        },
        // semantics.py
        Entry {
            file: SE,
            kernel: "div_mod",
            sig: "*i16,*i16,*i16,*i16,i32,32",
            grid: [3, 1, 1],
            args: |r| {
                let a: Vec<i16> = (0..77).map(|_| r.random()).collect();
                let b: Vec<i16> =
                    (0..77).map(|_| r.random_range(1..300) * if r.random() { 1 } else { -1 }).collect();
                vec![a.into(), b.into(), vec![0i16; 77].into(), vec![0i16; 77].into(), 77.into()]
            },
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "div_mod_scalar",
            sig: "*i64,*i64,*i64,i32",
            grid: [5, 1, 1],
            args: |r| {
                let a: Vec<i64> = (0..5).map(|_| r.random_range(-99999..99999)).collect();
                vec![a.into(), vec![3i64, -3, 7, -7, 1000].into(), vec![0i64; 40].into(), 5.into()]
            },
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "true_div",
            sig: "*i32,*i32,*fp32,i32,16",
            grid: [2, 1, 1],
            args: |r| vec![i32s(r, 29, -999, 999), i32s(r, 29, 1, 99), nan32(3 * 29), 29.into()],
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "promotion",
            sig: "*i8,*i32,*u32,*i64,*fp32,*fp64,*i32,*u32,*i64,*fp32,*fp64,*i8,i32,16",
            grid: [2, 1, 1],
            args: |r| {
                let n = 23;
                vec![
                    (0..n).map(|_| r.random::<i8>()).collect::<Vec<_>>().into(),
                    i32s(r, n, -999, 999),
                    (0..n).map(|_| r.random::<u32>()).collect::<Vec<_>>().into(),
                    (0..n).map(|_| r.random_range(-999i64..999)).collect::<Vec<_>>().into(),
                    f32s(r, n, -9.0, 9.0),
                    (0..n).map(|_| r.random_range(-9.0f64..9.0)).collect::<Vec<_>>().into(),
                    poison32(n),
                    vec![0u32; n].into(),
                    vec![0i64; n].into(),
                    nan32(2 * n),
                    vec![f64::NAN; n].into(),
                    vec![0i8; n].into(),
                    (n as i32).into(),
                ]
            },
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "signed_unsigned",
            sig: "*i32,*u32,*i64,*i32,i32,16",
            grid: [2, 1, 1],
            args: |r| {
                let u: Vec<u32> = (0..31).map(|_| r.random()).collect();
                let w: Vec<i64> = (0..31).map(|_| r.random_range(-9..9)).collect();
                vec![i32s(r, 31, -9, 9), u.into(), w.into(), poison32(6 * 31), 31.into()]
            },
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "literals",
            sig: "*i64,i32",
            grid: [1, 1, 1],
            args: |r| vec![vec![0i64; 8].into(), r.random::<i32>().into()],
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "shifts_and_wrap",
            sig: "*i32,*u32,*i32,i32,8",
            grid: [3, 1, 1],
            args: |r| {
                let u: Vec<u32> = (0..21).map(|_| r.random()).collect();
                vec![i32s(r, 21, i32::MIN, i32::MAX), u.into(), poison32(5 * 21), 21.into()]
            },
            checks: &[],
        },
        Entry {
            file: SE,
            kernel: "nan_compares",
            sig: "*fp64,*fp64,*i1,i32,8",
            grid: [3, 1, 1],
            args: |r| {
                let pick = [f64::NAN, 0.0, -0.0, 1.0, f64::INFINITY];
                let x: Vec<f64> = (0..19).map(|_| pick[r.random_range(0..5)]).collect();
                let y: Vec<f64> = (0..19).map(|_| pick[r.random_range(0..5)]).collect();
                vec![x.into(), y.into(), vec![true; 6 * 19].into(), 19.into()]
            },
            checks: &[],
        },
        // examples/kernels/layer_norm.py
        Entry {
            file: LN,
            kernel: "_layer_norm_fwd_fused",
            sig: "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,256",
            grid: [7, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 7 * 203, -3.0, 1.0),
                    nan32(7 * 203),
                    f32s(r, 203, 0.5, 1.5),
                    f32s(r, 203, -0.5, 0.5),
                    nan32(7),
                    nan32(7),
                    203.into(),
                    203.into(),
                    1e-5f32.into(),
                ]
            },
            checks: &[(1, CLOSE), (4, CLOSE), (5, CLOSE)],
        },
        Entry {
            file: LN,
            kernel: "_layer_norm_bwd_dx_fused",
            sig: "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,4,128",
            grid: [23, 1, 1],
            args: |r| {
                let (m, n, g) = (23, 101, 4);
                vec![
                    nan32(m * n),
                    f32s(r, m * n, -0.1, 0.1),
                    nan32(g * n),
                    nan32(g * n),
                    f32s(r, m * n, -3.0, 1.0),
                    f32s(r, n, 0.5, 1.5),
                    f32s(r, n, -0.5, 0.5),
                    f32s(r, m, -1.0, -0.5),
                    f32s(r, m, 0.5, 2.0),
                    vec![0i32; 2 * g].into(),
                    (n as i32).into(),
                    (n as i32).into(),
                    1e-5f32.into(),
                ]
            },
            // Partial sums accumulate the rows of a group in the order programs take the lock.
            checks: &[(0, CLOSE), (2, CLOSE), (3, CLOSE)],
        },
        Entry {
            file: LN,
            kernel: "_layer_norm_bwd_dwdb",
            sig: "*fp32,*fp32,*fp32,*fp32,i32,i32,8,32",
            grid: [4, 1, 1],
            args: |r| {
                vec![
                    f32s(r, 13 * 101, -1.0, 1.0),
                    f32s(r, 13 * 101, -1.0, 1.0),
                    nan32(101),
                    nan32(101),
                    13.into(),
                    101.into(),
                ]
            },
            checks: &[(2, CLOSE), (3, CLOSE)],
        },
    ]
}

/// The `.py` files of the kernel directories.
fn kernel_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in DIRS {
        let entries = std::fs::read_dir(repo_path(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for e in entries {
            let name = e.expect("directory entry").file_name().to_string_lossy().to_string();
            if name.ends_with(".py") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_kernel_file_parses_and_every_kernel_is_accounted_for() {
    let jit = lnc::Jit::new();
    let table = table();
    let mut listed: BTreeSet<(String, String)> = BTreeSet::new();
    // A kernel may run on several signatures, each once.
    let mut runs: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
    for e in &table {
        assert!(runs.insert((e.file, e.kernel, e.sig)), "{} listed twice with {}", e.kernel, e.sig);
        listed.insert((e.file.into(), e.kernel.into()));
    }
    for &(file, kernel, ..) in REJECTED {
        listed.insert((file.into(), kernel.into()));
    }
    for &(file, kernel) in HELPERS.iter().chain(OWN_TESTS).chain(DOT_HELPERS) {
        listed.insert((file.into(), kernel.into()));
    }
    let files = kernel_files();
    assert!(files.len() >= 6, "kernel files: {files:?}");
    let mut found = BTreeSet::new();
    for file in &files {
        let m = jit.load(repo_path(file)).unwrap_or_else(|e| panic!("{file} does not parse:\n{e}"));
        assert!(!m.kernels().is_empty(), "{file} has no @jit function");
        for k in m.kernels() {
            found.insert((file.clone(), k.name));
        }
    }
    let missing: Vec<_> = found.difference(&listed).collect();
    assert!(missing.is_empty(), "@jit functions missing from the table: {missing:?}");
    let stale: Vec<_> = listed.difference(&found).collect();
    assert!(stale.is_empty(), "table entries naming no @jit function: {stale:?}");
}

#[test]
fn every_table_kernel_agrees_with_the_interpreter() {
    let jit = lnc::Jit::new();
    let mut rng = rng();
    for e in table() {
        let m = jit.load(repo_path(e.file)).unwrap_or_else(|err| panic!("{err}"));
        let mut case = Case::new(e.kernel, e.sig, e.grid, (e.args)(&mut rng));
        for &(arg, check) in e.checks {
            case = case.check(arg, check);
        }
        diff(&m, &case);
    }
}

/// The masked-lane lint is silent on every kernel of the table: they all reduce only
/// lanes that hold the reduction's neutral element (or no masked lanes at all).
#[test]
fn no_table_kernel_trips_the_masked_lane_lint() {
    let jit = lnc::Jit::new();
    for e in table() {
        let m = jit.load(repo_path(e.file)).unwrap_or_else(|err| panic!("{err}"));
        let w = m.warnings(e.kernel, e.sig).unwrap_or_else(|err| panic!("{err}"));
        assert!(w.is_empty(), "{}: {}", e.kernel, lnc_diag::render_all(&w, m.file()));
    }
}

#[test]
fn rejected_kernels_report_their_diagnostic() {
    let jit = lnc::Jit::new();
    for &(file, kernel, sig, msg) in REJECTED {
        let m = jit.load(repo_path(file)).unwrap_or_else(|e| panic!("{e}"));
        let e = m.kernel(kernel, sig).unwrap_err();
        assert!(matches!(e, lnc::Error::Source(_)), "{kernel}: {e}");
        assert!(e.to_string().contains(msg), "{kernel}: expected `{msg}` in\n{e}");
    }
}

#[test]
fn the_harness_sees_a_one_element_difference() {
    let case = Case::new("k", "*i32,*fp32", 1, vec![vec![1i32, 2].into(), vec![1.0f32, f32::NAN].into()]);
    let same = case.args.clone();
    compare(&case, "identical", &same, &case.args);
    let mut ints = case.args.clone();
    ints[0] = vec![1i32, 3].into();
    let r = std::panic::catch_unwind(|| compare(&case, "ints", &ints, &case.args));
    assert!(r.is_err(), "an integer difference went unnoticed");
    let mut floats = case.args.clone();
    floats[1] = vec![1.0001f32, f32::NAN].into();
    let r = std::panic::catch_unwind(|| compare(&case, "floats", &floats, &case.args));
    assert!(r.is_err(), "a float difference went unnoticed");
    // Within the default 4 ulps: equal.
    floats[1] = vec![f32::from_bits(1.0f32.to_bits() + 2), f32::NAN].into();
    compare(&case, "ulps", &floats, &case.args);
    // An order-independent check ignores the order, not the values.
    let perm = Case::new("k", "*i32", 1, vec![vec![1i32, 2, 3].into()]).check(0, Check::Multiset);
    compare(&perm, "permuted", &[vec![3i32, 1, 2].into()], &perm.args);
    let r = std::panic::catch_unwind(|| compare(&perm, "other", &[vec![3i32, 1, 1].into()], &perm.args));
    assert!(r.is_err(), "a different multiset went unnoticed");
}
