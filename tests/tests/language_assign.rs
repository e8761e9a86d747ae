//! Assigned numbers are tensors (`tests/kernels/assign.py`): after `a = -7`, `a` is an
//! `int32` scalar (C division and remainder, wrapping), after `a = 0.1` a `float32` one
//! (rounded after every operation, promoting an `fp16` block), while literals written
//! inline keep Python's folding and weak typing. Every case runs through the differential
//! harness (JIT against the block-IR interpreter); the expected values were produced by
//! Triton 3.9's interpreter (`../shared/oracle/run_oracle.py`) on the same kernels and
//! inputs, and are hard-coded here.

mod common;

use common::diff::*;
use half::f16;

fn module() -> lnc::Module {
    load("assign.py")
}

/// The `fp16` input of the float kernels (exact `fp16` values).
const X16: [f64; 4] = [0.125732421875, -0.132080078125, 0.640625, 0.10491943359375];

#[test]
fn assigned_ints_divide_and_wrap_as_int32() {
    let case = Case::new("assign_int", "*i64", 1, vec![vec![i64::MIN; 14].into()]);
    let out = diff(&module(), &case);
    // Triton's interpreter, `run_oracle.py --kernel assign_int --arg 'Out:i64[14]'`.
    let triton: [i64; 14] =
        [-3, -1, -32768, -4, 1, -3, 1, 1705032704, 4398046511104, 0, 2, 0, 4294967296, -3];
    assert_eq!(out[0].data().to_i64s(), triton.to_vec());
}

#[test]
fn assigned_floats_are_float32_tensors() {
    let x: Vec<f16> = X16.iter().map(|&v| f16::from_f64(v)).collect();
    let case = Case::new(
        "assign_float",
        "*fp32,*fp16,*fp16",
        1,
        vec![vec![f32::NAN; 14].into(), A::Buf(Data::F16(x), 0), A::Buf(Data::F16(vec![f16::NAN; 4]), 0)],
    )
    .check(0, Check::Exact)
    .check(2, Check::Exact);
    let out = diff(&module(), &case);
    // Triton's interpreter on the same inputs (bit patterns of its float32 outputs).
    let triton: [f64; 14] = [
        2.0,
        f32::from_bits(0x3e99_999a) as f64, // 0.1f32 * 3.0
        f32::from_bits(0x3a83_1270) as f64, // (0.001f32 * 0.001f32) * 1000.0, rounded each step
        f32::from_bits(0x3a83_126f) as f64, // 1e-3 * 1e-3 * 1000.0 in doubles, rounded once
        16777216.0,
        1.5,
        0.75,
        0.0, // unused slot
        0.1885986328125,
        -0.1981201171875,
        0.9609375,
        0.157379150390625, // fp16 * float32 tensor: computed in float32
        0.0,               // (0.1f32 + 0.2) - 0.3 in float32
        5.551115123125783e-17,
    ];
    let Data::F32(o) = out[0].data() else { unreachable!() };
    for (k, (&got, &want)) in o.iter().zip(&triton).enumerate() {
        if k == 7 {
            continue;
        }
        assert_eq!(got as f64, want, "Out[{k}]: {got:e} vs Triton's {want:e}");
    }
    // A literal is weak: fp16 * 1.5 stays fp16 (its last element differs from float32's).
    let Data::F16(o16) = out[2].data() else { unreachable!() };
    let triton16 = [0.1885986328125, -0.1981201171875, 0.9609375, 0.1573486328125];
    assert_eq!(o16.iter().map(|v| v.to_f64()).collect::<Vec<_>>(), triton16.to_vec());
}

#[test]
fn loop_carried_assigned_numbers() {
    let x: Vec<f16> = [2048.0, 1.0, 1.0, 1.0].iter().map(|&v| f16::from_f32(v)).collect();
    let case = Case::new(
        "assign_loop",
        "*fp32,*fp16,i32",
        1,
        vec![vec![f32::NAN; 3].into(), A::Buf(Data::F16(x), 0), 4i32.into()],
    )
    .check(0, Check::Exact);
    let out = diff(&module(), &case);
    // Triton's interpreter: `acc = 0.0` is float32, so 2048 + 1 + 1 + 1 is exact (an fp16
    // accumulator would stay at 2048); `k += 3` four times; 0.5⁴.
    assert_eq!(out[0].data().to_f64s(), vec![2051.0, 12.0, 0.0625]);
}

#[test]
fn assigned_tuples_convert_each_element() {
    // Triton's compiler converts each element (`_sanitize_target_value`); its interpreter
    // does not convert tuples, so these values follow the compiler: int32 C division.
    let case = Case::new("assign_tuple", "*i32", 1, vec![vec![POISON_I32; 2].into()]);
    let out = diff(&module(), &case);
    assert_eq!(out[0].data().to_i64s(), vec![-2, 1]);
}

#[test]
fn known_assigned_numbers_size_blocks() {
    // lnc extension (Triton's compiler rejects it): `B4 = BLOCK * 2 * 2` sizes
    // `tl.arange`/`tl.zeros`, and `B2 > 4` decides an `if` while compiling.
    for (block, bump) in [(2, 0), (4, 1)] {
        let n = 4 * block as usize;
        let case =
            Case::new("assign_block_size", &format!("*i32,{block}"), 1, vec![vec![POISON_I32; n].into()]);
        let out = diff(&module(), &case);
        let want: Vec<i64> = (0..n as i64).map(|k| 2 * block + bump + k).collect();
        assert_eq!(out[0].data().to_i64s(), want, "BLOCK = {block}");
    }
}
