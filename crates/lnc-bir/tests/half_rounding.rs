//! Rounding to `fp16` and `bf16`: `DType::round_float` (what the interpreter's casts,
//! arguments and buffers use) rounds once from the exact `f64`, checked against the
//! nearest of all 65 536 bit patterns of each format.

use half::{bf16, f16};
use lnc_bir::interp::{ArgValue, Buffer, run_grid};
use lnc_bir::parse::parse_function;
use lnc_bir::*;

/// Every finite value of a 16-bit format, ascending, `-0.0` dropped (the sign of a zero
/// result is checked apart).
fn finite_values(to_f64: impl Fn(u16) -> f64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..=u16::MAX).map(to_f64).filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| a == b);
    v
}

/// The reference rounding: the nearer of the two finite neighbours (ties to the even bit
/// pattern), overflow past the largest finite value plus half an ulp to infinity.
fn nearest(values: &[f64], to_bits: impl Fn(f64) -> u16, x: f64) -> f64 {
    if x.is_nan() || x.is_infinite() {
        return x;
    }
    let max = *values.last().unwrap();
    // Half an ulp above the largest finite value: the ulp there is max - previous.
    let limit = max + (max - values[values.len() - 2]) / 2.0;
    if x.abs() >= limit {
        return f64::INFINITY.copysign(x);
    }
    if x.abs() >= max {
        return max.copysign(x);
    }
    let k = values.partition_point(|&v| v <= x);
    let (lo, hi) = (values[k - 1], values[k]);
    // Both differences are exact: lo <= x <= hi are neighbours of a coarser format.
    let (dlo, dhi) = (x - lo, hi - x);
    let r = if dlo < dhi {
        lo
    } else if dhi < dlo {
        hi
    } else if to_bits(lo) & 1 == 0 {
        lo
    } else {
        hi
    };
    if r == 0.0 { 0.0f64.copysign(x) } else { r }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The bit pattern of a value of the format (exact: the value is one).
type ToBits = fn(f64) -> u16;

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn round_float_rounds_once_like_the_nearest_value() {
    let f16s = finite_values(|b| f16::from_bits(b).to_f64());
    let bf16s = finite_values(|b| bf16::from_bits(b).to_f64());
    let cases: [(DType, &[f64], ToBits); 2] = [
        (DType::F16, &f16s, |x| f16::from_f64(x).to_bits()),
        (DType::BF16, &bf16s, |x| bf16::from_f64(x).to_bits()),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (d, values, to_bits) in cases {
        let mut inputs: Vec<f64> = Vec::new();
        // Every value, the midpoints between neighbours (ties) and the f64 values right
        // beside them: where truncating or rounding through f32 first goes wrong.
        for w in values.windows(2) {
            let mid = (w[0] + w[1]) / 2.0;
            inputs.extend([w[0], mid, mid.next_up(), mid.next_down()]);
            inputs.push(mid + mid.abs() * 2f64.powi(-40));
            inputs.push(mid - mid.abs() * 2f64.powi(-40));
        }
        // Random f64 in and around the format's range.
        for _ in 0..200_000 {
            let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
            let exp = (rng.next() % 300) as i32 - 160;
            let mant = 1.0 + (rng.next() >> 12) as f64 * 2f64.powi(-52);
            inputs.push(sign * mant * 2f64.powi(exp));
        }
        inputs.extend([0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MAX, f64::MIN_POSITIVE]);
        for x in inputs {
            let want = nearest(values, to_bits, x);
            let got = d.round_float(x);
            assert!(
                same(got, want),
                "{d} round_float({x:e} = {:#018x}) = {got:e}, expected {want:e}",
                x.to_bits()
            );
        }
    }
}

#[test]
fn round_float_known_double_rounding_cases() {
    // Just above a tie by less than what survives the `half` crate's truncation of the
    // f64's low 32 bits: the correct result rounds up, away from the even neighbour.
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(DType::F16.round_float(x), 1.0 + 2f64.powi(-10));
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    assert_eq!(DType::BF16.round_float(x), 1.0 + 2f64.powi(-7));
    // Half the smallest subnormal is a tie to zero; anything above it rounds up.
    assert_eq!(DType::F16.round_float(2f64.powi(-25)), 0.0);
    assert_eq!(DType::F16.round_float(2f64.powi(-25) + 2f64.powi(-60)), 2f64.powi(-24));
    assert_eq!(DType::F16.round_float(65519.99), 65504.0);
    assert_eq!(DType::F16.round_float(65520.0), f64::INFINITY);
    assert_eq!(DType::F16.round_float(-65520.0), f64::NEG_INFINITY);
    assert!(DType::BF16.round_float(-0.0).is_sign_negative());
}

/// The interpreter's `cast` from `fp64` and its `fp64` buffers round once.
#[test]
fn interpreter_casts_from_fp64_round_once() {
    for (to, x, want) in [
        ("fp16", 1.0 + 2f64.powi(-11) + 2f64.powi(-40), 1.0 + 2f64.powi(-10)),
        ("bf16", 1.0 + 2f64.powi(-8) + 2f64.powi(-40), 1.0 + 2f64.powi(-7)),
        ("bf16", -(3.0 + 2f64.powi(-7) + 2f64.powi(-45)), -(3.0 + 2f64.powi(-6))),
    ] {
        let text = format!(
            "kernel @k(%0 a: fp64 @slot0, %1 out: *{to} @slot1) {{\n  %2 = cast %0 : {to}\n  store %1, %2\n}}\n"
        );
        let f = parse_function(&text).unwrap();
        let d = DType::from_sig_name(to).unwrap();
        let mut bufs = [Buffer::zeros(d, 1)];
        run_grid(&f, [1, 1, 1], &[ArgValue::Float(x), ArgValue::Ptr { buffer: 0, offset: 0 }], &mut bufs)
            .unwrap();
        assert_eq!(bufs[0].to_f64_values(), [want], "cast {x:e} to {to}");
        assert_eq!(Buffer::from_f64_values(d, &[x]).to_f64_values(), [want], "{to} buffer of {x:e}");
    }
}
