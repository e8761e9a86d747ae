//! Triton's fused-softmax tutorial kernel, as the tutorial writes it (programs striding over
//! rows with `tl.range(..., num_stages=)`, `-inf` in the masked lanes, `tl.exp`), against a
//! float64 softmax on random rows with large and small values, for lengths that are not
//! multiples of the block or the vector width, outputs poisoned; and against the block-IR
//! interpreter through the differential harness.

mod common;

use common::diff::{A, Case, Check, diff};
use common::*;
use rand::Rng;

const SOFTMAX: &str = r#"
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                   num_stages: tl.constexpr):
    # starting row of the program
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        # The stride represents how much we need to increase the pointer to advance 1 row
        row_start_ptr = input_ptr + row_idx * input_row_stride
        # The block size is the next power of two greater than n_cols, so we can fit each
        # row in a single block
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        # Load the row into SRAM, using a mask since BLOCK_SIZE may be > than n_cols
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf'))
        # Subtract maximum for numerical stability
        row_minus_max = row - tl.max(row, axis=0)
        # Note that exponentiation in Triton is fast but approximate (i.e., think __expf in CUDA)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        # Write back output to DRAM
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)
"#;

/// `rows` rows of `n`: mostly N(0, 3²), some values far out (where `exp` of the
/// difference to the row's maximum underflows to zero).
fn inputs(rng: &mut impl Rng, rows: usize, n: usize) -> Vec<f32> {
    let mut x = randn(rng, rows * n, 0.0, 3.0);
    for v in x.iter_mut() {
        if rng.random_range(0..50) == 0 {
            *v = rng.random_range(-120.0..60.0);
        }
    }
    x
}

fn reference(x: &[f32], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / sum)
        })
        .collect()
}

fn signature(n: usize) -> String {
    format!("*fp32,*fp32,i32,i32,i32,i32,{},2", n.next_power_of_two())
}

#[test]
fn the_tutorial_softmax_matches_float64() {
    let module = lnc::Jit::new().module("softmax.py", SOFTMAX).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = rng();
    // Fewer programs than rows: each program strides over the rows, as the tutorial runs it.
    for (rows, n, programs) in [(151usize, 1000usize, 8u32), (7, 4097, 3), (33, 1, 33), (64, 333, 64)] {
        let k = module.kernel("softmax_kernel", &signature(n)).unwrap_or_else(|e| panic!("{e}"));
        let x = inputs(&mut rng, rows, n);
        let mut y = vec![f32::NAN; rows * n];
        let args = lnc::args![&mut y, &x, n as i32, n as i32, rows as i32, n as i32];
        k.launch(programs, &args).unwrap_or_else(|e| panic!("{e}"));
        // exp within 1.02 ulps, sums of up to 4097 terms: a few ulps of each output.
        assert_close(&format!("softmax {rows}x{n}"), &y, &reference(&x, n), 1e-9, 2e-6);
        for row in y.chunks(n) {
            let total: f64 = row.iter().map(|&v| f64::from(v)).sum();
            assert!((total - 1.0).abs() < 1e-5, "{rows}x{n}: a row sums to {total}");
        }
    }
}

#[test]
fn the_tutorial_softmax_agrees_with_the_interpreter() {
    let module = lnc::Jit::new().module("softmax.py", SOFTMAX).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = rng();
    for (rows, n, programs) in [(9usize, 1000usize, 4u32), (5, 61, 5)] {
        let x = inputs(&mut rng, rows, n);
        let buf = |v: Vec<f32>| A::Buf(common::diff::Data::F32(v), 0);
        let args = vec![
            buf(vec![f32::NAN; rows * n]),
            buf(x),
            A::I32(n as i32),
            A::I32(n as i32),
            A::I32(rows as i32),
            A::I32(n as i32),
        ];
        // The sums reduce in another order: within a few ulps of the quotient.
        let case = Case::new("softmax_kernel", &signature(n), programs, args)
            .check(0, Check::Close { atol: 1e-9, rtol: 1e-6 });
        diff(&module, &case);
    }
}
