//! `tl.argmax`/`tl.argmin` and `tl.max`/`tl.min(..., return_indices=True)` (kernels in
//! `tests/kernels/argmax.py`): the first index of the extremum (ties to the left, a NaN
//! counting as the extremum and the first NaN winning, as in NumPy), in every float type
//! and several integer types, along either axis of a 2-D block and with `keep_dims`, on
//! rows whose lengths are not multiples of the block or the vector, outputs poisoned;
//! against the block-IR interpreter through the differential harness; located errors.

mod common;

use common::diff::{A, Case, Check, diff, load};
use common::*;
use half::{bf16, f16};
use rand::Rng;

/// The first index of the maximum (`max`) or minimum of `row`; a NaN wins, the first one.
fn first_extremum(row: &[f64], max: bool) -> usize {
    if let Some(i) = row.iter().position(|v| v.is_nan()) {
        return i;
    }
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if (max && v > row[best]) || (!max && v < row[best]) {
            best = i;
        }
    }
    best
}

/// Rows of small integers as floats (ties are common), some with NaNs.
fn rows(rng: &mut impl Rng, m: usize, n: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..m * n).map(|_| f64::from(rng.random_range(-6i32..6))).collect();
    for r in (0..m).filter(|r| r % 7 == 3) {
        x[r * n + rng.random_range(0..n)] = f64::NAN;
        x[r * n + rng.random_range(0..n)] = f64::NAN;
    }
    x
}

#[test]
fn row_extrema_and_their_first_index_in_every_float_type() {
    let module = load("argmax.py");
    let mut rng = rng();
    for (m, n, block) in [(23usize, 1000usize, 1024u32), (9, 13, 16), (5, 1, 1), (4, 4097, 8192)] {
        let x = rows(&mut rng, m, n);
        for max in [true, false] {
            for d in ["fp32", "fp64", "fp16", "bf16"] {
                let sig = format!(
                    "*{d},*{},*i32,*i32,i32,i32,{block},{}",
                    if d == "bf16" { "fp32" } else { d },
                    max as i32
                );
                let k = module.kernel("arg_rows", &sig).unwrap_or_else(|e| panic!("{e}"));
                let (mut idx, mut arg) = (vec![-7i32; m], vec![-7i32; m]);
                let mut val = vec![f64::NAN; m];
                match d {
                    "fp32" => {
                        let xs: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                        let mut v32 = vec![f32::NAN; m];
                        let args = lnc::args![&xs, &mut v32, &mut idx, &mut arg, n as i32, n as i32];
                        k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                        val = v32.iter().map(|&v| f64::from(v)).collect();
                    }
                    "fp64" => {
                        let args = lnc::args![&x, &mut val, &mut idx, &mut arg, n as i32, n as i32];
                        k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                    }
                    "fp16" => {
                        let xs: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
                        let mut vh = vec![f16::NAN; m];
                        let args = lnc::args![&xs, &mut vh, &mut idx, &mut arg, n as i32, n as i32];
                        k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                        val = vh.iter().map(|v| v.to_f64()).collect();
                    }
                    _ => {
                        let xs: Vec<bf16> = x.iter().map(|&v| bf16::from_f64(v)).collect();
                        let mut v32 = vec![f32::NAN; m];
                        let args = lnc::args![&xs, &mut v32, &mut idx, &mut arg, n as i32, n as i32];
                        k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                        val = v32.iter().map(|&v| f64::from(v)).collect();
                    }
                }
                for r in 0..m {
                    let row = &x[r * n..(r + 1) * n];
                    let want = first_extremum(row, max);
                    let what = format!("{d} {m}x{n} max={max} row {r}");
                    assert_eq!(idx[r], want as i32, "return_indices, {what}: {row:?}");
                    assert_eq!(arg[r], want as i32, "arg{}, {what}", if max { "max" } else { "min" });
                    // The value: the extremum, or NaN where the row has one.
                    if row[want].is_nan() {
                        assert!(val[r].is_nan() || !row.iter().all(|v| v.is_nan()), "{what}");
                    } else {
                        assert_eq!(val[r], row[want], "value, {what}");
                    }
                }
            }
        }
    }
}

#[test]
fn integer_blocks_of_every_width() {
    let module = load("argmax.py");
    let mut rng = rng();
    let (m, block) = (11usize, 64usize);
    let x: Vec<i64> = (0..m * block).map(|_| rng.random_range(-100..100)).collect();
    let check = |arg: &[i32], what: &str| {
        for r in 0..m {
            let row: Vec<f64> = x[r * block..(r + 1) * block].iter().map(|&v| v as f64).collect();
            assert_eq!(arg[2 * r], first_extremum(&row, true) as i32, "{what} argmax row {r}");
            assert_eq!(arg[2 * r + 1], first_extremum(&row, false) as i32, "{what} argmin row {r}");
        }
    };
    let mut arg = vec![-7i32; 2 * m];
    let xs: Vec<i8> = x.iter().map(|&v| v as i8).collect();
    let k = module.kernel("arg_ints", "*i8,*i32,64").unwrap_or_else(|e| panic!("{e}"));
    k.launch(m as u32, &lnc::args![&xs, &mut arg]).unwrap_or_else(|e| panic!("{e}"));
    check(&arg, "int8");
    let xs: Vec<i32> = x.iter().map(|&v| v as i32).collect();
    let k = module.kernel("arg_ints", "*i32,*i32,64").unwrap_or_else(|e| panic!("{e}"));
    k.launch(m as u32, &lnc::args![&xs, &mut arg]).unwrap_or_else(|e| panic!("{e}"));
    check(&arg, "int32");
    let xs: Vec<u16> = x.iter().map(|&v| (v + 100) as u16).collect();
    let k = module.kernel("arg_ints", "*u16,*i32,64").unwrap_or_else(|e| panic!("{e}"));
    k.launch(m as u32, &lnc::args![&xs, &mut arg]).unwrap_or_else(|e| panic!("{e}"));
    check(&arg, "uint16");
    let k = module.kernel("arg_ints", "*i64,*i32,64").unwrap_or_else(|e| panic!("{e}"));
    k.launch(m as u32, &lnc::args![&x, &mut arg]).unwrap_or_else(|e| panic!("{e}"));
    check(&arg, "int64");
}

#[test]
fn both_axes_of_a_2d_block_and_keep_dims() {
    let module = load("argmax.py");
    let mut rng = rng();
    let (m, n) = (13usize, 37usize);
    let x: Vec<f32> = (0..m * n).map(|_| rng.random_range(-5i32..5) as f32).collect();
    let (mut rows, mut cols, mut keep) = (vec![-7i32; m + 3], vec![-7i32; n + 3], vec![-7i32; m + 3]);
    let k = module.kernel("arg_2d", "*fp32,*i32,*i32,*i32,i32,i32,16,64").unwrap_or_else(|e| panic!("{e}"));
    k.launch(1, &lnc::args![&x, &mut rows, &mut cols, &mut keep, m as i32, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    for r in 0..m {
        let row: Vec<f64> = (0..n).map(|c| f64::from(x[r * n + c])).collect();
        assert_eq!(rows[r], first_extremum(&row, true) as i32, "row {r}");
        assert_eq!(keep[r], rows[r], "keep_dims row {r}");
    }
    for c in 0..n {
        let col: Vec<f64> = (0..m).map(|r| f64::from(x[r * n + c])).collect();
        assert_eq!(cols[c], first_extremum(&col, true) as i32, "column {c}");
    }
    assert!(rows[m..].iter().chain(&cols[n..]).chain(&keep[m..]).all(|&v| v == -7), "written past the end");
}

#[test]
fn argmax_agrees_with_the_block_ir_interpreter() {
    let module = load("argmax.py");
    let mut rng = rng();
    let (m, n) = (9usize, 300usize);
    let x: Vec<f32> = rows(&mut rng, m, n).iter().map(|&v| v as f32).collect();
    for max in [1, 0] {
        let args = vec![
            A::Buf(x.clone().into(), 0),
            A::Buf(vec![f32::NAN; m].into(), 0),
            A::Buf(vec![-7i32; m].into(), 0),
            A::Buf(vec![-7i32; m].into(), 0),
            A::I32(n as i32),
            A::I32(n as i32),
        ];
        let sig = format!("*fp32,*fp32,*i32,*i32,i32,i32,512,{max}");
        diff(&module, &Case::new("arg_rows", &sig, m as u32, args).check(1, Check::Exact));
    }
}

#[test]
fn argmax_errors_are_located() {
    let jit = lnc::Jit::new();
    let src = |body: &str| {
        format!(
            "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, Y):\n    i = tl.arange(0, 16)\n    x = tl.load(X + i[:, None] * 16 + i[None, :])\n    {body}\n"
        )
    };
    for (body, want) in [
        (
            "tl.store(Y, tl.argmax(x, None))",
            "`tl.argmax` without an axis on a block of rank 2 is not supported",
        ),
        ("tl.store(Y + i, tl.argmin(x, 2))", "axis"),
        ("tl.store(Y, tl.argmax(tl.sum(tl.sum(x, 0), 0), 0))", "`tl.argmax` needs a block, got a scalar"),
    ] {
        let m = jit.module("k.py", src(body)).unwrap_or_else(|e| panic!("{e}"));
        let e = m.kernel("k", "*fp32,*i32").err().unwrap_or_else(|| panic!("{body} compiled")).to_string();
        assert!(e.contains(want) && e.contains("k.py:8:"), "{body}: {e}");
    }
}

/// What a review against Triton found: the value `return_indices` returns is the element
/// at the index, of the input's own type (narrow integers wrap as Triton's do; a `-0.0`
/// there stays `-0.0`), and the method forms `x.argmax(...)`/`x.argmin(...)` exist.
#[test]
fn the_value_is_the_element_at_the_index_in_the_input_type() {
    let jit = lnc::Jit::new();
    let src = r#"
import triton
import triton.language as tl

@triton.jit
def narrow(X, O):
    x = tl.load(X + tl.arange(0, 4))
    v, i = tl.max(x, 0, return_indices=True)
    tl.store(O, (v + v).to(tl.int32))
    tl.store(O + 1, i)

@triton.jit
def zeros(X, V, I):
    x = tl.load(X + tl.arange(0, 4))
    v, i = tl.max(x, 0, return_indices=True)
    w, j = tl.min(x, 0, return_indices=True)
    tl.store(V, v)
    tl.store(V + 1, w)
    tl.store(I, i)
    tl.store(I + 1, j)

@triton.jit
def flags(X, I):
    x = tl.load(X + tl.arange(0, 4)) > 0
    tl.store(I, tl.argmax(x, 0))
    tl.store(I + 1, tl.argmin(x, 0))

@triton.jit
def methods(X, I):
    x = tl.load(X + tl.arange(0, 4))
    tl.store(I, x.argmax(0))
    tl.store(I + 1, x.argmin(axis=0))
"#;
    let m = jit.module("review.py", src).unwrap_or_else(|e| panic!("{e}"));
    // int8: 100 + 100 wraps to -56 in int8 (widened, it would be 200).
    let x = vec![100i8, 1, 2, 3];
    let mut o = vec![0i32; 2];
    let k = m.kernel("narrow", "*i8,*i32").unwrap_or_else(|e| panic!("{e}"));
    k.launch(1, &lnc::args![&x, &mut o]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o, [-56, 0]);
    // Zeros of both signs compare equal: index 0, and the element there.
    let x = vec![-0.0f32, 0.0, -0.0, 0.0];
    let (mut v, mut i) = (vec![f32::NAN; 2], vec![-7i32; 2]);
    let k = m.kernel("zeros", "*fp32,*fp32,*i32").unwrap_or_else(|e| panic!("{e}"));
    k.launch(1, &lnc::args![&x, &mut v, &mut i]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (v[0].to_bits(), v[1].to_bits(), i.clone()),
        ((-0.0f32).to_bits(), (-0.0f32).to_bits(), vec![0, 0])
    );
    let x = vec![f32::NAN, 3.0, f32::NAN, -1.0];
    k.launch(1, &lnc::args![&x, &mut v, &mut i]).unwrap_or_else(|e| panic!("{e}"));
    assert!(v[0].is_nan() && v[1].is_nan() && i == [0, 0], "{v:?} {i:?}");
    // int1 blocks compare as tl.max does, widened.
    let x = vec![0.0f32, 2.0, 3.0, -1.0];
    let k = m.kernel("flags", "*fp32,*i32").unwrap_or_else(|e| panic!("{e}"));
    k.launch(1, &lnc::args![&x, &mut i]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(i, [1, 0]);
    let x = vec![1.0f32, 7.0, -2.0, 7.0];
    let k = m.kernel("methods", "*fp32,*i32").unwrap_or_else(|e| panic!("{e}"));
    k.launch(1, &lnc::args![&x, &mut i]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(i, [1, 2]);
}
