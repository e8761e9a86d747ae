//! The reference interpreter: kernels against float64 references, and the semantics the
//! IR documentation pins down.

mod common;

use common::*;
use lnc_bir::interp::{Access, ArgValue, Buffer, InterpError, Interpreter, run_grid};
use lnc_bir::*;
use lnc_diag::Span;

use ArgValue::{Float, Int};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Parses (checking the round trip) and runs a text kernel over `grid`.
fn run(text: &str, grid: [u32; 3], args: &[ArgValue], bufs: &mut [Buffer]) -> Result<(), InterpError> {
    let f = parse_ok(text);
    run_grid(&f, grid, args, bufs)
}

/// `out[0] = a <op> b` on scalars of dtype `d`; the result as f64.
fn binary(op: &str, d: &str, a: ArgValue, b: ArgValue) -> Result<f64, InterpError> {
    let dt = DType::from_sig_name(d).unwrap();
    let text = format!(
        "kernel @k(%0 a: {d} @slot0, %1 b: {d} @slot1, %2 out: *{d} @slot2) {{\n  %3 = {op} %0, %1 : {d}\n  store %2, %3\n}}\n"
    );
    let mut bufs = [Buffer::zeros(dt, 1)];
    run(&text, [1, 1, 1], &[a, b, ptr(0)], &mut bufs)?;
    Ok(bufs[0].to_f64_values()[0])
}

fn int_op(op: &str, d: &str, a: i64, b: i64) -> i64 {
    binary(op, d, Int(a), Int(b)).unwrap_or_else(|e| panic!("{op} {d} {a} {b}: {e}")) as i64
}

fn float_op(op: &str, d: &str, a: f64, b: f64) -> f64 {
    binary(op, d, Float(a), Float(b)).unwrap()
}

/// `out[0] = cast(a)` from `from` to `to`.
fn cast(op: &str, from: &str, to: &str, a: ArgValue) -> f64 {
    let dt = DType::from_sig_name(to).unwrap();
    let text = format!(
        "kernel @k(%0 a: {from} @slot0, %1 out: *{to} @slot1) {{\n  %2 = {op} %0 : {to}\n  store %1, %2\n}}\n"
    );
    let mut bufs = [Buffer::zeros(dt, 1)];
    run(&text, [1, 1, 1], &[a, ptr(0)], &mut bufs).unwrap();
    bufs[0].to_f64_values()[0]
}

#[test]
fn layer_norm_matches_float64_reference() {
    for (rows, n, block) in [(5usize, 100usize, 128u32), (3, 64, 64), (2, 1, 1)] {
        let mut rng = Rng::new(rows as u64 * 1000 + n as u64);
        let mut vec = |len: usize, scale: f64, shift: f64| -> Vec<f32> {
            (0..len).map(|_| (rng.unit() * scale + shift) as f32).collect()
        };
        let x = vec(rows * n, 3.0, 0.5);
        let w = vec(n, 1.0, 1.0);
        let b = vec(n, 0.5, 0.0);
        let eps = 1e-5f32;
        let mut bufs = vec![
            Buffer::from_f32(&x),
            Buffer::zeros(DType::F32, rows * n),
            Buffer::from_f32(&w),
            Buffer::from_f32(&b),
            Buffer::zeros(DType::F32, rows),
            Buffer::zeros(DType::F32, rows),
        ];
        let f = layer_norm_fwd(block);
        let args =
            [ptr(0), ptr(1), ptr(2), ptr(3), ptr(4), ptr(5), Int(n as i64), Int(n as i64), Float(eps as f64)];
        run_grid(&f, [rows as u32, 1, 1], &args, &mut bufs).unwrap();
        let (y, mean, rstd) = (bufs[1].to_f32(), bufs[4].to_f32(), bufs[5].to_f32());
        for r in 0..rows {
            let row: Vec<f64> = x[r * n..(r + 1) * n].iter().map(|&v| v as f64).collect();
            let m = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n as f64;
            let rs = 1.0 / (var + eps as f64).sqrt();
            assert!((mean[r] as f64 - m).abs() < 1e-5, "mean row {r}: {} vs {m}", mean[r]);
            assert!((rstd[r] as f64 - rs).abs() < 1e-5 * rs.max(1.0), "rstd row {r}: {} vs {rs}", rstd[r]);
            for c in 0..n {
                let want = (row[c] - m) * rs * w[c] as f64 + b[c] as f64;
                let got = y[r * n + c] as f64;
                assert!((got - want).abs() < 1e-4 * want.abs().max(1.0), "y[{r}][{c}]: {got} vs {want}");
            }
        }
    }
}

#[test]
fn integer_division_truncates_and_remainder_follows_the_dividend() {
    for (a, b, q, r) in [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1)] {
        assert_eq!(int_op("idiv", "i32", a, b), q, "{a} // {b}");
        assert_eq!(int_op("rem", "i32", a, b), r, "{a} % {b}");
    }
    assert_eq!(int_op("idiv", "i32", i32::MIN as i64, -1), i32::MIN as i64);
    assert_eq!(int_op("rem", "i32", i32::MIN as i64, -1), 0);
    assert_eq!(int_op("idiv", "i64", i64::MIN, -1), i64::MIN);
    assert_eq!(int_op("idiv", "u8", 200, 3), 66);
    assert_eq!(int_op("rem", "u32", u32::MAX as i64, 10), 5);
    assert_eq!(float_op("idiv", "fp32", -7.0, 2.0), -4.0);
    assert_eq!(float_op("rem", "fp64", -7.0, 2.0), -1.0);
    let err = binary("idiv", "i32", Int(1), Int(0)).unwrap_err();
    let InterpError::DivisionByZero { site } = &err else { panic!("{err}") };
    assert_eq!(site.text, "%3 = idiv %0, %1 : i32");
    assert_eq!(err.to_string(), "integer division by zero by `%3 = idiv %0, %1 : i32` in program (0, 0, 0)");
    assert!(matches!(binary("rem", "u16", Int(1), Int(0)), Err(InterpError::DivisionByZero { .. })));
}

#[test]
fn wrapping_arithmetic() {
    assert_eq!(int_op("add", "i32", i32::MAX as i64, 1), i32::MIN as i64);
    assert_eq!(int_op("sub", "u8", 0, 1), 255);
    assert_eq!(int_op("mul", "i16", 300, 300), (300i32 * 300) as i16 as i64);
    assert_eq!(int_op("add", "i1", 1, 1), 0);
    assert_eq!(int_op("min", "u32", u32::MAX as i64, 1), 1);
    assert_eq!(int_op("max", "i32", -5, 3), 3);
}

#[test]
fn shifts() {
    assert_eq!(int_op("shl", "i32", 1, 31), i32::MIN as i64);
    assert_eq!(int_op("shl", "i32", 1, 32), 0);
    assert_eq!(int_op("shl", "i32", 3, 40), 0);
    assert_eq!(int_op("shl", "u8", 0xff, 4), 0xf0);
    assert_eq!(int_op("shr", "i32", -8, 1), -4);
    assert_eq!(int_op("shr", "i32", -8, 32), -1);
    assert_eq!(int_op("shr", "i32", 8, 99), 0);
    assert_eq!(int_op("shr", "u32", 0x8000_0000, 31), 1);
    assert_eq!(int_op("shr", "u32", 0x8000_0000, 32), 0);
    assert_eq!(int_op("shr", "u8", 0x80, 7), 1);
    // A negative amount reads as a huge unsigned one.
    assert_eq!(int_op("shl", "i32", 1, -1), 0);
    assert_eq!(int_op("shr", "i64", -1, 64), -1);
}

#[test]
fn float_min_max_propagate_nan_and_order_zeros() {
    assert!(float_op("min", "fp32", f64::NAN, 1.0).is_nan());
    assert!(float_op("max", "fp64", 1.0, f64::NAN).is_nan());
    assert!(float_op("min", "fp32", 0.0, -0.0).is_sign_negative());
    assert!(float_op("max", "fp32", -0.0, 0.0).is_sign_positive());
    assert_eq!(float_op("max", "fp16", -2.0, 3.0), 3.0);
}

#[test]
fn float_precision_per_dtype() {
    // 2048 + 1 is 2049 in f32, then rounds to even in fp16.
    assert_eq!(float_op("add", "fp16", 2048.0, 1.0), 2048.0);
    assert_eq!(float_op("add", "bf16", 256.0, 1.0), 256.0);
    // f32 arithmetic, not f64 rounded once.
    assert_eq!(float_op("add", "fp32", 16777216.0, 1.0), 16777216.0);
    assert_eq!(float_op("add", "fp64", 16777216.0, 1.0), 16777217.0);
    assert_eq!(float_op("pow", "fp32", 2.0, 10.0), 1024.0);
}

#[test]
fn comparisons_are_unsigned_on_unsigned_types() {
    let cmp = |d: &str, a: i64, b: i64| {
        let text = format!(
            "kernel @k(%0 a: {d} @slot0, %1 b: {d} @slot1, %2 out: *i1 @slot2) {{\n  %3 = cmp lt %0, %1 : i1\n  store %2, %3\n}}\n"
        );
        let mut bufs = [Buffer::zeros(DType::I1, 1)];
        run(&text, [1, 1, 1], &[Int(a), Int(b), ptr(0)], &mut bufs).unwrap();
        bufs[0].to_u8()[0]
    };
    assert_eq!(cmp("u32", u32::MAX as i64, 1), 0);
    assert_eq!(cmp("i32", -1, 1), 1);
    assert_eq!(cmp("u64", -1, 1), 0);
    assert_eq!(cmp("i64", -1, 1), 1);
}

#[test]
fn casts() {
    let c = |from: &str, to: &str, a: ArgValue| cast("cast", from, to, a);
    assert_eq!(c("fp32", "i32", Float(3.7)), 3.0);
    assert_eq!(c("fp32", "i32", Float(-3.7)), -3.0);
    assert_eq!(c("fp32", "i32", Float(1e10)), i32::MAX as f64);
    assert_eq!(c("fp32", "i32", Float(f64::NAN)), 0.0);
    assert_eq!(c("fp32", "u8", Float(-1.0)), 0.0);
    assert_eq!(c("fp32", "u8", Float(300.0)), 255.0);
    assert_eq!(c("fp32", "i1", Float(0.5)), 1.0);
    assert_eq!(c("fp32", "i1", Float(f64::NAN)), 1.0);
    assert_eq!(c("fp32", "i1", Float(-0.0)), 0.0);
    assert_eq!(c("i32", "u32", Int(-1)), u32::MAX as f64);
    assert_eq!(c("u8", "i32", Int(255)), 255.0);
    assert_eq!(c("i8", "i64", Int(-1)), -1.0);
    assert_eq!(c("i32", "i8", Int(256 + 5)), 5.0);
    assert_eq!(c("i32", "i1", Int(2)), 1.0);
    assert_eq!(c("i1", "i32", Int(1)), 1.0);
    assert_eq!(c("i64", "fp64", Int((1 << 53) + 1)), (1u64 << 53) as f64);
    assert_eq!(c("i64", "fp32", Int((1 << 24) + 1)), 16777216.0);
    assert_eq!(c("u64", "fp64", Int(-1)), u64::MAX as f64);
    assert_eq!(c("i32", "bf16", Int(257)), 256.0);
    assert_eq!(c("i32", "bf16", Int(259)), 260.0);
    assert_eq!(c("i32", "fp16", Int(2049)), 2048.0);
    assert_eq!(c("i32", "fp16", Int(-2051)), -2052.0);
    assert_eq!(c("i32", "fp16", Int(70000)), f64::INFINITY);
    // One rounding from a 64-bit integer to bf16 (a double rounding via f32 gives 2^25).
    let x: i64 = (1 << 25) + (1 << 17) + 1;
    assert_eq!(c("i64", "bf16", Int(x)), ((1 << 25) + (1 << 18)) as f64);
    assert_eq!(c("fp32", "fp16", Float(65520.0)), f64::INFINITY);
    assert_eq!(c("fp64", "fp32", Float(0.1)), 0.1f32 as f64);
    assert_eq!(cast("bitcast", "fp32", "i32", Float(1.0)), 0x3f80_0000 as f64);
    assert_eq!(cast("bitcast", "i16", "fp16", Int(0x3c00)), 1.0);
}

#[test]
fn unary_ops() {
    let u = |op: &str, d: &str, a: ArgValue| cast(op, d, d, a);
    assert_eq!(u("neg", "i32", Int(i32::MIN as i64)), i32::MIN as f64);
    assert_eq!(u("abs", "i8", Int(-128)), -128.0);
    assert_eq!(u("not", "u8", Int(0x0f)), 240.0);
    assert_eq!(u("not", "i1", Int(1)), 0.0);
    assert_eq!(u("sqrt", "fp32", Float(2.0)), 2f32.sqrt() as f64);
    assert_eq!(u("rsqrt", "fp64", Float(4.0)), 0.5);
    assert_eq!(u("exp2", "fp32", Float(3.0)), 8.0);
    assert_eq!(u("floor", "fp32", Float(-1.5)), -2.0);
    assert_eq!(u("ceil", "fp16", Float(-1.5)), -1.0);
}

const MASKED: &str = "kernel @k(%0 X: *fp32 @slot0, %1 Y: *fp32 @slot1, %2 n: i32 @slot2) {
  %3 = arange 0, 8 : <8xi32>
  %4 = splat %2 : <8xi32>
  %5 = cmp lt %3, %4 : <8xi1>
  %6 = splat %0 : <8x*fp32>
  %7 = ptr_add %6, %3 : <8x*fp32>
  %8 = const -1.0 : fp32
  %9 = splat %8 : <8xfp32>
  %10 = load %7, mask %5, other %9 : <8xfp32>
  %11 = load %7, mask %5 : <8xfp32>
  %12 = add %10, %11 : <8xfp32>
  %13 = splat %1 : <8x*fp32>
  %14 = ptr_add %13, %3 : <8x*fp32>
  store %14, %12, mask %5
  %15 = reduce sum axis=0 %10 : fp32
  %16 = const 5 : i32
  %17 = ptr_add %1, %16 : *fp32
  store %17, %15
}
";

#[test]
fn masked_lanes_are_never_accessed() {
    // X has 5 elements: lanes 5..8 point past its end and must not be read.
    let mut bufs = [Buffer::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0]), Buffer::from_f32(&[9.0; 7])];
    run(MASKED, [1, 1, 1], &[ptr(0), ptr(1), Int(5)], &mut bufs).unwrap();
    // Masked-off lanes: `other` (-1) for the first load, 0 for the second, so the sum sees 3 × -1.
    assert_eq!(bufs[1].to_f32(), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 9.0]);
    // The same kernel with the base pointer moved before the buffer's start: the masked
    // lanes would be at negative offsets.
    let mut bufs = [Buffer::from_f32(&[1.0, 2.0]), Buffer::from_f32(&[0.0; 6])];
    run(MASKED, [1, 1, 1], &[ptr(0), ptr(1), Int(2)], &mut bufs).unwrap();
    assert_eq!(bufs[1].to_f32(), [2.0, 4.0, 0.0, 0.0, 0.0, -3.0]);
}

#[test]
fn out_of_bounds_names_program_instruction_and_offset() {
    let text = "kernel @k(%0 X: *fp32 @slot0) {
  %1 = program_id 0 : i32
  %2 = const 4 : i32
  %3 = mul %1, %2 : i32
  %4 = ptr_add %0, %3 : *fp32
  %5 = splat %4 : <4x*fp32>
  %6 = arange 0, 4 : <4xi32>
  %7 = ptr_add %5, %6 : <4x*fp32>
  %8 = load %7 : <4xfp32>
  store %7, %8
}
";
    let mut f = parse_ok(text);
    let load = f.body.insts[7];
    f.spans[load] = Span::new(10, 20);
    let mut bufs = [Buffer::zeros(DType::F32, 6)];
    let err = run_grid(&f, [3, 1, 1], &[ptr(0)], &mut bufs).unwrap_err();
    let InterpError::OutOfBounds { site, buffer, offset, len, access } = &err else { panic!("{err}") };
    assert_eq!((site.inst, site.span, site.pid), (load, Span::new(10, 20), [1, 0, 0]));
    assert_eq!((*buffer, *offset, *len, *access), (0, 6, 6, Access::Read));
    assert_eq!(
        err.to_string(),
        "out-of-bounds read at offset 6 of buffer 0 (6 elements) by `%8 = load %7 : <4xfp32>` in program (1, 0, 0)"
    );
    // A negative offset is out of bounds too, for writes as well.
    let text = "kernel @k(%0 X: *i32 @slot0) {\n  %1 = const 7 : i32\n  store %0, %1\n}\n";
    let mut bufs = [Buffer::zeros(DType::I32, 6)];
    let err = run(text, [1, 1, 1], &[ArgValue::Ptr { buffer: 0, offset: -1 }], &mut bufs).unwrap_err();
    assert!(matches!(err, InterpError::OutOfBounds { offset: -1, access: Access::Write, .. }), "{err}");
}

#[test]
fn two_dimensional_blocks() {
    // out[0..4] = row sums of a 4x8 matrix; out[4..12] = column maxima (keep_dims).
    let text = "kernel @k(%0 A: *fp32 @slot0, %1 out: *fp32 @slot1) {
  %2 = arange 0, 4 : <4xi32>
  %3 = expand_dims axis=1 %2 : <4x1xi32>
  %4 = const 8 : i32
  %5 = splat %4 : <4x1xi32>
  %6 = mul %3, %5 : <4x1xi32>
  %7 = broadcast %6 : <4x8xi32>
  %8 = arange 0, 8 : <8xi32>
  %9 = expand_dims axis=0 %8 : <1x8xi32>
  %10 = broadcast %9 : <4x8xi32>
  %11 = add %7, %10 : <4x8xi32>
  %12 = splat %0 : <4x8x*fp32>
  %13 = ptr_add %12, %11 : <4x8x*fp32>
  %14 = load %13 : <4x8xfp32>
  %15 = reduce sum axis=1 %14 : <4xfp32>
  %16 = splat %1 : <4x*fp32>
  %17 = ptr_add %16, %2 : <4x*fp32>
  store %17, %15
  %18 = reduce max axis=0 keep_dims %14 : <1x8xfp32>
  %19 = const 4 : i32
  %20 = ptr_add %1, %19 : *fp32
  %21 = splat %20 : <1x8x*fp32>
  %22 = ptr_add %21, %9 : <1x8x*fp32>
  store %22, %18
}
";
    let a: Vec<f32> = (0..32).map(|k| ((k * 7) % 11) as f32 - 5.0).collect();
    let mut bufs = [Buffer::from_f32(&a), Buffer::zeros(DType::F32, 12)];
    run(text, [1, 1, 1], &[ptr(0), ptr(1)], &mut bufs).unwrap();
    let out = bufs[1].to_f32();
    for r in 0..4 {
        assert_eq!(out[r], a[r * 8..r * 8 + 8].iter().sum::<f32>());
    }
    for c in 0..8 {
        assert_eq!(out[4 + c], (0..4).map(|r| a[r * 8 + c]).fold(f32::MIN, f32::max));
    }
}

#[test]
fn reduction_is_pairwise() {
    // 1 + 1e8 + (-1e8) + 1: sequential f32 summation gives 1, the tree ((1 + 1e8) + (-1e8 + 1)) gives 0.
    let text = "kernel @k(%0 X: *fp32 @slot0) {
  %1 = arange 0, 4 : <4xi32>
  %2 = splat %0 : <4x*fp32>
  %3 = ptr_add %2, %1 : <4x*fp32>
  %4 = load %3 : <4xfp32>
  %5 = reduce sum axis=0 %4 : fp32
  store %0, %5
}
";
    let mut bufs = [Buffer::from_f32(&[1.0, 1e8, -1e8, 1.0])];
    run(text, [1, 1, 1], &[ptr(0)], &mut bufs).unwrap();
    assert_eq!(bufs[0].to_f32()[0], 0.0);
}

#[test]
fn atomics_return_old_values() {
    // Each program adds pid+1 to a counter and records the old value: programs run in order.
    let text = "kernel @k(%0 C: *i32 @slot0, %1 olds: *i32 @slot1) {
  %2 = program_id 0 : i32
  %3 = const 1 : i32
  %4 = add %2, %3 : i32
  %5 = atomic add %0, %4 : i32
  %6 = ptr_add %1, %2 : *i32
  store %6, %5
}
";
    let mut bufs = [Buffer::zeros(DType::I32, 1), Buffer::zeros(DType::I32, 4)];
    run(text, [4, 1, 1], &[ptr(0), ptr(1)], &mut bufs).unwrap();
    assert_eq!(bufs[0].to_i32(), [10]);
    assert_eq!(bufs[1].to_i32(), [0, 1, 3, 6]);

    // Block atomics, masked lanes (past the end of the 6-element buffer) untouched and 0.
    let block = |op: &str, d: &str| {
        format!(
            "kernel @k(%0 B: *{d} @slot0, %1 V: *{d} @slot1, %2 olds: *{d} @slot2) {{
  %3 = arange 0, 8 : <8xi32>
  %4 = const 6 : i32
  %5 = splat %4 : <8xi32>
  %6 = cmp lt %3, %5 : <8xi1>
  %7 = splat %0 : <8x*{d}>
  %8 = ptr_add %7, %3 : <8x*{d}>
  %9 = splat %1 : <8x*{d}>
  %10 = ptr_add %9, %3 : <8x*{d}>
  %11 = load %10 : <8x{d}>
  %12 = atomic {op} %8, %11, mask %6 : <8x{d}>
  %13 = splat %2 : <8x*{d}>
  %14 = ptr_add %13, %3 : <8x*{d}>
  store %14, %12
}}
"
        )
    };
    let cases: [(&str, &str, [f64; 6], [f64; 6]); 6] = [
        ("max", "i32", [5.0, -1.0, 2.0, 9.0, 0.0, 3.0], [5.0, 1.0, 2.0, 9.0, 4.0, 5.0]),
        ("min", "u8", [5.0, 0.0, 2.0, 9.0, 0.0, 3.0], [0.0, 0.0, 2.0, 3.0, 0.0, 3.0]),
        ("add", "fp32", [0.5, 1.0, 2.0, 9.0, 0.0, 3.0], [0.5, 2.0, 4.0, 12.0, 4.0, 8.0]),
        ("xchg", "fp64", [0.5, 1.0, 2.0, 9.0, 0.0, 3.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        ("or", "i64", [8.0, 8.0, 8.0, 8.0, 8.0, 8.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0]),
        ("xor", "u16", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 3.0, 2.0, 5.0, 4.0]),
    ];
    for (op, d, init, want) in cases {
        let dt = DType::from_sig_name(d).unwrap();
        let vals: Vec<f64> = (0..8).map(|k| k as f64).collect();
        let mut bufs =
            [Buffer::from_f64_values(dt, &init), Buffer::from_f64_values(dt, &vals), Buffer::zeros(dt, 8)];
        run(&block(op, d), [1, 1, 1], &[ptr(0), ptr(1), ptr(2)], &mut bufs).unwrap();
        assert_eq!(bufs[0].to_f64_values(), want, "atomic {op} {d}");
        let mut olds = init.to_vec();
        olds.extend([0.0, 0.0]);
        assert_eq!(bufs[2].to_f64_values(), olds, "atomic {op} {d} old values");
    }
}

#[test]
fn atomic_cas_swaps_only_on_match() {
    let text = "kernel @k(%0 L: *i32 @slot0, %1 olds: *i32 @slot1) {
  %2 = const 0 : i32
  %3 = const 1 : i32
  %4 = const 2 : i32
  %5 = atomic_cas %0, %2, %3 : i32
  %6 = atomic_cas %0, %2, %4 : i32
  store %1, %5
  %7 = ptr_add %1, %3 : *i32
  store %7, %6
}
";
    let mut bufs = [Buffer::zeros(DType::I32, 1), Buffer::zeros(DType::I32, 2)];
    run(text, [1, 1, 1], &[ptr(0), ptr(1)], &mut bufs).unwrap();
    assert_eq!(bufs[0].to_i32(), [1]);
    assert_eq!(bufs[1].to_i32(), [0, 1]);
}

fn python_range(lb: i64, ub: i64, step: i64) -> (i64, i64) {
    let (mut sum, mut n, mut iv) = (0, 0, lb);
    while (step > 0 && iv < ub) || (step < 0 && iv > ub) {
        sum += iv;
        n += 1;
        iv += step;
    }
    (sum, n)
}

#[test]
fn for_runs_like_python_range() {
    let f = for_sum();
    let check = |lb: i64, ub: i64, step: i64| {
        let mut bufs = [Buffer::zeros(DType::I64, 2)];
        run_grid(&f, [1, 1, 1], &[ptr(0), Int(lb), Int(ub), Int(step)], &mut bufs).unwrap();
        let (sum, n) = python_range(lb, ub, step);
        assert_eq!(bufs[0].to_i64(), [sum, n], "range({lb}, {ub}, {step})");
    };
    check(10, 0, -3);
    check(0, 10, 3);
    check(5, 5, 1);
    check(0, 10, -1);
    check(-3, 4, 1);
    check(i32::MAX as i64 - 3, i32::MAX as i64, 1);
    check(i32::MIN as i64 + 2, i32::MIN as i64, -1);
    check(0, i32::MAX as i64, 1 << 30);
    let mut rng = Rng::new(7);
    for _ in 0..50 {
        let r = |rng: &mut Rng, m: u64| (rng.next_u64() % m) as i64 - (m / 2) as i64;
        let (lb, ub, mut step) = (r(&mut rng, 60), r(&mut rng, 60), r(&mut rng, 14));
        if step == 0 {
            step = 1;
        }
        check(lb, ub, step);
    }
    let mut bufs = [Buffer::zeros(DType::I64, 2)];
    let err = run_grid(&f, [1, 1, 1], &[ptr(0), Int(0), Int(5), Int(0)], &mut bufs).unwrap_err();
    assert!(matches!(err, InterpError::ZeroStep { .. }), "{err}");
}

#[test]
fn while_and_if() {
    let f = collatz();
    for (n, steps) in [(1, 0), (2, 1), (6, 8), (27, 111)] {
        let mut bufs = [Buffer::zeros(DType::I64, 1)];
        run_grid(&f, [1, 1, 1], &[ptr(0), Int(n)], &mut bufs).unwrap();
        assert_eq!(bufs[0].to_i64(), [steps], "collatz({n})");
    }
}

#[test]
fn step_limit_stops_endless_loops() {
    let text = "kernel @k(%0 c: i1 @slot0) {
  while {
    condition %0
  } do {
    yield
  }
}
";
    let f = parse_ok(text);
    let mut it = Interpreter::new(&f).unwrap();
    it.step_limit = Some(1000);
    it.run_grid([1, 1, 1], &[Int(0)], &mut []).unwrap();
    let err = it.run_grid([1, 1, 1], &[Int(1)], &mut []).unwrap_err();
    assert!(matches!(err, InterpError::StepLimit { limit: 1000, .. }), "{err}");
}

#[test]
fn programs_run_x_fastest() {
    let text = "kernel @k(%0 C: *i32 @slot0, %1 order: *i32 @slot1) {
  %2 = program_id 0 : i32
  %3 = program_id 1 : i32
  %4 = program_id 2 : i32
  %5 = num_programs 0 : i32
  %6 = num_programs 1 : i32
  %7 = mul %4, %6 : i32
  %8 = add %7, %3 : i32
  %9 = mul %8, %5 : i32
  %10 = add %9, %2 : i32
  %11 = const 1 : i32
  %12 = atomic add %0, %11 : i32
  %13 = ptr_add %1, %10 : *i32
  store %13, %12
}
";
    let mut bufs = [Buffer::zeros(DType::I32, 1), Buffer::zeros(DType::I32, 12)];
    run(text, [2, 3, 2], &[ptr(0), ptr(1)], &mut bufs).unwrap();
    assert_eq!(bufs[1].to_i32(), (0..12).collect::<Vec<_>>());
}

#[test]
fn print_and_assert() {
    let text = "kernel @k(%0 n: i32 @slot0) {
  %1 = arange 0, 2 : <2xi32>
  %2 = program_id 0 : i32
  print \"x: \" %1, %2
  print \"done\"
  %3 = splat %0 : <2xi32>
  %4 = cmp lt %1, %3 : <2xi1>
  assert %4
}
";
    let f = parse_ok(text);
    let mut it = Interpreter::new(&f).unwrap();
    it.run_grid([2, 1, 1], &[Int(2)], &mut []).unwrap();
    assert_eq!(
        it.log,
        [
            "pid (0, 0, 0) idx (0) x: 0",
            "pid (0, 0, 0) idx (1) x: 1",
            "pid (0, 0, 0) idx () x: 0",
            "pid (0, 0, 0) done",
            "pid (1, 0, 0) idx (0) x: 0",
            "pid (1, 0, 0) idx (1) x: 1",
            "pid (1, 0, 0) idx () x: 1",
            "pid (1, 0, 0) done",
        ]
    );
    let err = it.run_grid([1, 1, 1], &[Int(1)], &mut []).unwrap_err();
    assert!(matches!(err, InterpError::AssertionFailed { lane: 1, .. }), "{err}");
}

#[test]
fn half_precision_memory() {
    let text = "kernel @k(%0 X: *fp16 @slot0, %1 Y: *bf16 @slot1) {
  %2 = arange 0, 2 : <2xi32>
  %3 = splat %0 : <2x*fp16>
  %4 = ptr_add %3, %2 : <2x*fp16>
  %5 = load %4 : <2xfp16>
  %6 = cast %5 : <2xbf16>
  %7 = splat %1 : <2x*bf16>
  %8 = ptr_add %7, %2 : <2x*bf16>
  %9 = load %8 : <2xbf16>
  %10 = mul %6, %9 : <2xbf16>
  store %8, %10
}
";
    let x = [half::f16::from_f32(1.5), half::f16::from_f32(-3.0)];
    let y = [half::bf16::from_f32(2.0), half::bf16::from_f32(0.25)];
    let mut bufs = [Buffer::from_f16(&x), Buffer::from_bf16(&y)];
    run(text, [1, 1, 1], &[ptr(0), ptr(1)], &mut bufs).unwrap();
    assert_eq!(bufs[1].to_f64_values(), [3.0, -0.75]);
}

#[test]
fn bad_arguments_and_invalid_functions() {
    let f = for_sum();
    let mut bufs = [Buffer::zeros(DType::I32, 2)];
    let err = run_grid(&f, [1, 1, 1], &[ptr(0), Int(0), Int(1), Int(1)], &mut bufs).unwrap_err();
    assert_eq!(err.to_string(), "argument for slot 0 (`out`): pointer to i64 given buffer 0 of i32");
    let mut bufs = [Buffer::zeros(DType::I64, 2)];
    let err = run_grid(&f, [1, 1, 1], &[ptr(0)], &mut bufs).unwrap_err();
    assert_eq!(err.to_string(), "argument for slot 1 (`lb`): missing (1 arguments given)");
    let err = run_grid(&f, [1, 1, 1], &[ptr(3), Int(0), Int(1), Int(1)], &mut bufs).unwrap_err();
    assert_eq!(err.to_string(), "argument for slot 0 (`out`): buffer 3 does not exist (1 buffers)");
    let err = run_grid(&f, [1, 1, 1], &[ptr(0), Float(0.0), Int(1), Int(1)], &mut bufs).unwrap_err();
    assert_eq!(err.to_string(), "argument for slot 1 (`lb`): expected i32, found Float(0.0)");
    let mut g = for_sum();
    g.body.insts.swap(0, 2);
    assert!(matches!(run_grid(&g, [1, 1, 1], &[], &mut []), Err(InterpError::Invalid(_))));
}
