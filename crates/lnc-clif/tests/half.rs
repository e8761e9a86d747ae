//! `fp16` and `bf16` in JIT-compiled code, bit for bit against the `half` crate: every
//! 16-bit pattern to `fp32` and back, `fp32` to half on random and edge values, through
//! vectorized tiles (one, two and four `f32x4` parts), scalarized tiles and scalar code,
//! masked tails included; then the other conversions, arithmetic rounded after every
//! operation, and the memory operations (gathers, bounds checks, scratch, atomics).

mod common;

use common::*;
use half::{bf16, f16};
use lnc_clif::CodegenOptions;
use lnc_lir::*;
use lnc_runtime::{Fault, LaunchError, Status, pack_int};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(0x4a1f)
}

/// Tile widths: scalar parts (2), one vector part (4), two (8), four (16).
const LANES: [u8; 4] = [2, 4, 8, 16];

/// `out[i] = op(x[i])` for `i < n` in scalar code: one element per iteration.
fn scalar_kernel(d_in: DType, d_out: DType, op: impl FnOnce(&mut B, Value) -> Value) -> Function {
    let mut b = B::new("scalar");
    let x = b.ptr(0, d_in);
    let out = b.ptr(1, d_out);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, so) = (b.site(0), b.site(1));
    let zero = b.i32(0);
    let one = b.i32(1);
    b.for_(zero, n, one, &[], |b, i, _| {
        let v = b.load(Addressing::Scalar, x, i, None, None, sx, Ty::Scalar(d_in));
        let r = op(b, v);
        b.store(Addressing::Scalar, out, i, r, None, so);
        vec![]
    });
    b.finish()
}

/// Runs a one-input kernel (slots: input, output, n) over `input` in both modes; the
/// outputs of the two modes.
fn run_unary<I: Copy, O: Copy>(f: &Function, input: &[I], fill: O) -> Vec<Vec<O>> {
    MODES
        .iter()
        .map(|opts| {
            let k = compile_ok(f, opts);
            let mut x = input.to_vec();
            let mut y = vec![fill; input.len()];
            run(&k, [1, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(input.len() as i64))], None)
                .unwrap_or_else(|e| panic!("{e}"));
            y
        })
        .collect()
}

/// Checks a conversion kernel family (tiles of every width and scalar code) against
/// `want`, bit for bit, `what` naming the case in failures.
#[allow(clippy::too_many_arguments)]
fn check_all_widths<I: Copy, O: Copy + PartialEq + std::fmt::Debug>(
    what: &str,
    d_in: DType,
    d_out: DType,
    op: impl Fn(&mut B, &[Value]) -> Value,
    input: &[I],
    fill: O,
    want: impl Fn(I) -> O,
    show: impl Fn(I) -> String,
) -> usize {
    let expected: Vec<O> = input.iter().map(|&x| want(x)).collect();
    let mut kernels: Vec<(String, Function)> =
        LANES.iter().map(|&l| (format!("{l} lanes"), elementwise(d_in, 1, l, |b, xs| op(b, xs)))).collect();
    kernels.push(("scalar code".into(), scalar_kernel(d_in, d_out, |b, x| op(b, &[x]))));
    let mut checked = 0;
    for (name, f) in &kernels {
        for (m, got) in run_unary(f, input, fill).into_iter().enumerate() {
            for (i, (&g, &w)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(g, w, "{what}, {name}, mode {m}: input {} (element {i})", show(input[i]));
            }
            checked += got.len();
        }
    }
    checked
}

/// Every 16-bit pattern, then three more so that the last tile of every width is ragged
/// (its lanes loaded and stored one by one under the mask).
fn all_patterns() -> Vec<u16> {
    let mut v: Vec<u16> = (0..=u16::MAX).collect();
    v.extend([0x7C01, 0x8001, 0x3C00]);
    v
}

#[test]
fn every_fp16_and_bf16_pattern_to_fp32() {
    let pats = all_patterns();
    let n = check_all_widths(
        "fp16 -> fp32",
        DType::F16,
        DType::F32,
        |b, x| b.cast(x[0], DType::F32),
        &pats,
        0u32,
        |h| f16::from_bits(h).to_f32().to_bits(),
        |h| format!("{h:#06x}"),
    );
    let m = check_all_widths(
        "bf16 -> fp32",
        DType::BF16,
        DType::F32,
        |b, x| b.cast(x[0], DType::F32),
        &pats,
        0u32,
        |h| bf16::from_bits(h).to_f32().to_bits(),
        |h| format!("{h:#06x}"),
    );
    assert_eq!(n + m, 2 * 5 * MODES.len() * pats.len());
}

/// A loaded half value that only arithmetic consumes is converted without quieting its
/// NaNs (the arithmetic does that): every pattern times 1.0, on either side, gives the
/// bits of the `half` crate's conversion times 1.0 — NaN payloads included.
#[test]
fn every_fp16_and_bf16_pattern_through_arithmetic() {
    let pats = all_patterns();
    let one = std::hint::black_box(1.0f32);
    let mut n = 0;
    for d in [DType::F16, DType::BF16] {
        for one_first in [false, true] {
            let op = |b: &mut B, x: &[Value]| {
                let c = b.cast(x[0], DType::F32);
                let k = b.float(DType::F32, 1.0);
                let k = match b.ty(c) {
                    Ty::Tile(_, lanes) => b.splat(k, lanes),
                    _ => k,
                };
                if one_first { b.bin(BinOp::Mul, k, c) } else { b.bin(BinOp::Mul, c, k) }
            };
            let to_f32 = |h: u16| match d {
                DType::F16 => f16::from_bits(h).to_f32(),
                _ => bf16::from_bits(h).to_f32(),
            };
            // One NaN operand: the product is that NaN, quieted, on either side.
            let want = |h: u16| (to_f32(h) * one).to_bits();
            n += check_all_widths(&format!("{d} * 1.0"), d, DType::F32, op, &pats, 0u32, want, |h| {
                format!("{h:#06x}")
            });
        }
    }
    assert_eq!(n, 2 * 2 * 5 * MODES.len() * pats.len());
}

#[test]
fn every_fp16_and_bf16_pattern_to_fp32_and_back() {
    let pats = all_patterns();
    for d in [DType::F16, DType::BF16] {
        // Through an fp32 value and a cast back: the pattern itself, NaN quieted.
        let want = |h: u16| match d {
            DType::F16 => f16::from_f32(f16::from_bits(h).to_f32()).to_bits(),
            _ => bf16::from_f32(bf16::from_bits(h).to_f32()).to_bits(),
        };
        check_all_widths(
            &format!("{d} -> fp32 -> {d}"),
            d,
            d,
            |b, x| {
                let w = b.cast(x[0], DType::F32);
                b.cast(w, d)
            },
            &pats,
            0u16,
            want,
            |h| format!("{h:#06x}"),
        );
        // A plain copy: loaded and stored as the dtype.
        check_all_widths(&format!("{d} copy"), d, d, |_, x| x[0], &pats, 0u16, want, |h| format!("{h:#06x}"));
        for &h in &pats {
            let w = want(h);
            let nan = (h & 0x7FFF) > if d == DType::F16 { 0x7C00 } else { 0x7F80 };
            assert!(w == h || nan, "only NaNs change: {h:#06x}");
        }
    }
}

#[test]
fn fp32_to_fp16_and_bf16_rounding_is_bit_exact() {
    let mut rng = rng();
    for d in [DType::F16, DType::BF16] {
        let mut inputs = edge_f32(d);
        let edges = inputs.len();
        // Random bit patterns, and random values in the format's range (where most
        // rounding happens rather than overflow or underflow).
        for _ in 0..600_000 {
            inputs.push(rng.random::<u32>());
            let e = rng.random_range(100u32..150) << 23;
            inputs.push(e | (rng.random::<u32>() & 0x807F_FFFF));
        }
        // Odd length: a ragged last tile.
        inputs.push(0x3F80_0001);
        let want = |u: u32| {
            let x = f32::from_bits(u);
            if d == DType::F16 { f16::from_f32(x).to_bits() } else { bf16::from_f32(x).to_bits() }
        };
        let checked = check_all_widths(
            &format!("fp32 -> {d}"),
            DType::F32,
            d,
            |b, x| b.cast(x[0], d),
            // The kernel reads f32s: the same bits.
            &inputs.iter().map(|&u| f32::from_bits(u)).collect::<Vec<_>>(),
            0u16,
            |x: f32| want(x.to_bits()),
            |x: f32| format!("{:#010x} ({x:e})", x.to_bits()),
        );
        assert!(inputs.len() - edges >= 1_000_000);
        assert_eq!(checked, 5 * MODES.len() * inputs.len());
    }
}

/// The nearest value of `d` to an integer, rounded once (the interpreter's rule).
fn int_to_half(d: DType, neg: bool, mag: u64) -> f64 {
    let bits = if d == DType::F16 { 11 } else { 8 };
    let len = 64 - mag.leading_zeros();
    let m = if len <= bits {
        mag as f64
    } else {
        let shift = len - bits;
        let (q, rest, half) = (mag >> shift, mag & ((1 << shift) - 1), 1u64 << (shift - 1));
        let q = if rest > half || (rest == half && q & 1 == 1) { q + 1 } else { q };
        q as f64 * 2f64.powi(shift as i32)
    };
    d.round_float(if neg { -m } else { m })
}

fn half_bits(d: DType, x: f64) -> u16 {
    if d == DType::F16 { f16::from_f64(x).to_bits() } else { bf16::from_f64(x).to_bits() }
}

fn half_value(d: DType, h: u16) -> f32 {
    if d == DType::F16 { f16::from_bits(h).to_f32() } else { bf16::from_bits(h).to_f32() }
}

/// Random integers of every size, with the values around rounding ties and powers of two.
fn int_inputs(rng: &mut StdRng) -> Vec<i64> {
    let mut v = vec![0, 1, -1, 2047, 2048, 2049, 2050, 2051, 4097, 65504, 65519, 65520, 65535, 65536];
    v.extend([i64::MIN, i64::MAX, i32::MIN as i64, i32::MAX as i64, 257, 258, 259, -259, 0x0100_8001]);
    for s in 0..63 {
        let p = 1i64 << s;
        v.extend([p, p - 1, p + 1, -p, p + (p >> 8), p + (p >> 8) + 1, p + (p >> 11) + 1]);
    }
    for _ in 0..20_000 {
        let bits = rng.random_range(1..64);
        v.push(rng.random::<i64>() >> (64 - bits));
    }
    v
}

#[test]
fn integer_and_fp64_casts_to_half_round_once() {
    let mut rng = rng();
    let ints = int_inputs(&mut rng);
    for d in [DType::F16, DType::BF16] {
        // i32: a vector conversion for fp16.
        let i32s: Vec<i32> = ints.iter().map(|&i| i as i32).collect();
        check_all_widths(
            &format!("i32 -> {d}"),
            DType::I32,
            d,
            |b, x| b.cast(x[0], d),
            &i32s,
            0u16,
            |i| half_bits(d, int_to_half(d, i < 0, (i as i64).unsigned_abs())),
            |i| i.to_string(),
        );
        check_all_widths(
            &format!("i64 -> {d}"),
            DType::I64,
            d,
            |b, x| b.cast(x[0], d),
            &ints,
            0u16,
            |i| half_bits(d, int_to_half(d, i < 0, i.unsigned_abs())),
            |i| i.to_string(),
        );
        let u64s: Vec<u64> = ints.iter().map(|&i| i as u64).collect();
        check_all_widths(
            &format!("u64 -> {d}"),
            DType::U64,
            d,
            |b, x| b.cast(x[0], d),
            &u64s,
            0u16,
            |u| half_bits(d, int_to_half(d, false, u)),
            |u| u.to_string(),
        );
        let i8s: Vec<i8> = ints.iter().map(|&i| i as i8).collect();
        check_all_widths(
            &format!("i8 -> {d}"),
            DType::I8,
            d,
            |b, x| b.cast(x[0], d),
            &i8s,
            0u16,
            |i| half_bits(d, i as f64),
            |i| i.to_string(),
        );
        // fp64: random values over the whole range, and the ties of the format nudged by
        // less than the low 32 bits of an f64 (where rounding through f32 or truncating
        // the f64 goes wrong).
        let mut f64s: Vec<f64> = Vec::new();
        for h in 0..=u16::MAX {
            let x = half_value(d, h) as f64;
            if x.is_finite() {
                let next = half_value(d, h.wrapping_add(1)) as f64;
                let mid = (x + next) / 2.0;
                if mid.is_finite() {
                    f64s.extend([mid, mid + mid.abs() * 2f64.powi(-45), mid - mid.abs() * 2f64.powi(-45)]);
                }
            }
        }
        for _ in 0..100_000 {
            f64s.push(f64::from_bits(rng.random::<u64>()));
            f64s.push(rng.random_range(-70000.0..70000.0));
        }
        f64s.extend([0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, 1e-300, 3.4028235677973366e38]);
        check_all_widths(
            &format!("fp64 -> {d}"),
            DType::F64,
            d,
            |b, x| b.cast(x[0], d),
            &f64s,
            0u16,
            |x| if x.is_nan() { half_bits(d, x) } else { half_bits(d, d.round_float(x)) },
            |x| format!("{x:e} ({:#018x})", x.to_bits()),
        );
    }
}

#[test]
fn half_to_fp64_integers_and_the_other_half() {
    let pats = all_patterns();
    for d in [DType::F16, DType::BF16] {
        let value = move |h: u16| half_value(d, h);
        check_all_widths(
            &format!("{d} -> fp64"),
            d,
            DType::F64,
            |b, x| b.cast(x[0], DType::F64),
            &pats,
            0u64,
            |h| (value(h) as f64).to_bits(),
            |h| format!("{h:#06x}"),
        );
        check_all_widths(
            &format!("{d} -> i32"),
            d,
            DType::I32,
            |b, x| b.cast(x[0], DType::I32),
            &pats,
            0i32,
            |h| value(h) as i32,
            |h| format!("{h:#06x}"),
        );
        check_all_widths(
            &format!("{d} -> u8"),
            d,
            DType::U8,
            |b, x| b.cast(x[0], DType::U8),
            &pats,
            0u8,
            |h| value(h) as u8,
            |h| format!("{h:#06x}"),
        );
        check_all_widths(
            &format!("{d} -> i64"),
            d,
            DType::I64,
            |b, x| b.cast(x[0], DType::I64),
            &pats,
            0i64,
            |h| value(h) as i64,
            |h| format!("{h:#06x}"),
        );
        let other = if d == DType::F16 { DType::BF16 } else { DType::F16 };
        check_all_widths(
            &format!("{d} -> {other}"),
            d,
            other,
            |b, x| b.cast(x[0], other),
            &pats,
            0u16,
            |h| {
                let x = value(h);
                if other == DType::F16 { f16::from_f32(x).to_bits() } else { bf16::from_f32(x).to_bits() }
            },
            |h| format!("{h:#06x}"),
        );
        // Bit patterns reinterpreted as i16 and back (NaN quieted by the trip through f32).
        check_all_widths(
            &format!("{d} bitcast i16"),
            d,
            DType::I16,
            |b, x| b.val(Opcode::Bitcast, &[x[0]], b.ty(x[0]).with_dtype(DType::I16)),
            &pats,
            0u16,
            |h| {
                if d == DType::F16 {
                    f16::from_f32(value(h)).to_bits()
                } else {
                    bf16::from_f32(value(h)).to_bits()
                }
            },
            |h| format!("{h:#06x}"),
        );
        check_all_widths(
            &format!("u16 bitcast {d}"),
            DType::U16,
            d,
            |b, x| b.val(Opcode::Bitcast, &[x[0]], b.ty(x[0]).with_dtype(d)),
            &pats,
            0u16,
            |h| {
                if d == DType::F16 {
                    f16::from_f32(value(h)).to_bits()
                } else {
                    bf16::from_f32(value(h)).to_bits()
                }
            },
            |h| format!("{h:#06x}"),
        );
    }
}

/// Lanes of a tile type with another dtype.
trait WithDType {
    fn with_dtype(self, d: DType) -> Ty;
}

impl WithDType for Ty {
    fn with_dtype(self, d: DType) -> Ty {
        match self {
            Ty::Tile(_, l) => Ty::Tile(d, l),
            _ => Ty::Scalar(d),
        }
    }
}

/// `x <op> y` on `d` as the interpreter computes it: in f32, rounded to `d`.
fn reference_binary(d: DType, op: BinOp, x: f32, y: f32) -> f32 {
    let r = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::IDiv => (x / y).floor(),
        BinOp::Rem => x % y,
        BinOp::Pow => x.powf(y),
        BinOp::Max if x.is_nan() || y.is_nan() => f32::NAN,
        BinOp::Min if x.is_nan() || y.is_nan() => f32::NAN,
        BinOp::Max => {
            if x > y || (x == y && x.is_sign_positive()) {
                x
            } else {
                y
            }
        }
        BinOp::Min => {
            if x < y || (x == y && x.is_sign_negative()) {
                x
            } else {
                y
            }
        }
        _ => unreachable!("float operations only"),
    };
    half_value(d, half_bits(d, r as f64))
}

/// Equal bit patterns, or both NaN (payloads of computed NaNs are the FPU's business).
fn same_half(d: DType, a: u16, b: u16) -> bool {
    let nan = |h: u16| (h & 0x7FFF) > if d == DType::F16 { 0x7C00 } else { 0x7F80 };
    a == b || (nan(a) && nan(b))
}

/// Runs an `elementwise` kernel of two half inputs on `xs` and `ys`; its output bits.
fn run_binary(k: &lnc_clif::CompiledKernel, xs: &[u16], ys: &[u16]) -> Vec<u16> {
    let n = xs.len();
    let (mut x, mut y, mut out) = (xs.to_vec(), ys.to_vec(), vec![0u16; n]);
    run(k, [1, 1, 1], &[slot(&mut x), slot(&mut y), slot(&mut out), scalar(pack_int(n as i64))], None)
        .unwrap();
    out
}

/// `fp16` results round after every operation also where F16C rounds tiles (through
/// memory, module `f16c`): a chain of operations and a cast whose result is used twice
/// (so its rounding is live), every mode bit for bit equal to the `half` crate's
/// step-by-step rounding, NaNs included, and to each other.
#[test]
fn chained_fp16_arithmetic_rounds_each_step_in_every_mode() {
    let mut rng = rng();
    let n = 4099;
    let mut xs: Vec<u16> = (0..n)
        .map(|_| {
            if rng.random_range(0..4) == 0 {
                rng.random()
            } else {
                half_bits(DType::F16, rng.random_range(-300.0..300.0))
            }
        })
        .collect();
    xs[..6].copy_from_slice(&[0x7C01, 0xFE00, 0x7BFF, 0x0001, 0x8400, 0x3C01]);
    let ys: Vec<u16> = xs.iter().rev().copied().collect();
    let r = |v: f32| f16::from_f32(v).to_f32();
    for lanes in LANES {
        // ((x * y + x) - y), then (x as fp32 * 0.1) cast to fp16 and squared.
        let f = elementwise(DType::F16, 2, lanes, |b, v| {
            let p = b.bin(BinOp::Mul, v[0], v[1]);
            let s = b.bin(BinOp::Add, p, v[0]);
            let s = b.bin(BinOp::Sub, s, v[1]);
            let w = b.cast(v[0], DType::F32);
            let k = b.float(DType::F32, 0.1);
            let k = if lanes > 1 { b.splat(k, lanes) } else { k };
            let t = b.bin(BinOp::Mul, w, k);
            let t = b.cast(t, DType::F16);
            let t = b.bin(BinOp::Mul, t, t);
            b.bin(BinOp::Add, s, t)
        });
        let mut outs = Vec::new();
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            // Rounding through scratch (tiles, and scalars since F16C converts them too)
            // asks for 16 bytes past the kernel's buffers.
            let through_scratch = opts.f16c && lnc_clif::converts_f16_natively();
            let buffers = f.scratch_bytes() as usize;
            let want = if through_scratch { buffers.next_multiple_of(16) + 16 } else { buffers };
            assert_eq!(k.scratch_bytes(), want, "f16c {}", opts.f16c);
            let out = run_binary(&k, &xs, &ys);
            for i in 0..n {
                let (x, y) = (half_value(DType::F16, xs[i]), half_value(DType::F16, ys[i]));
                let s = r(r(r(x * y) + x) - y);
                let t = r(x * 0.1);
                let want = f16::from_f32(s + r(t * t)).to_bits();
                assert!(
                    same_half(DType::F16, out[i], want),
                    "{:#06x}, {:#06x}: {:#06x}, expected {want:#06x} ({lanes} lanes, f16c {})",
                    xs[i],
                    ys[i],
                    out[i],
                    opts.f16c
                );
            }
            outs.push(out);
        }
        assert!(outs.iter().all(|o| o == &outs[0]), "the modes differ ({lanes} lanes)");
    }
}

#[test]
fn arithmetic_rounds_to_the_dtype_after_every_operation() {
    let mut rng = rng();
    let n = 4099;
    for d in [DType::F16, DType::BF16] {
        let sample = |rng: &mut StdRng| -> u16 {
            match rng.random_range(0..4) {
                0 => rng.random(),
                // Moderate magnitudes, where results are rarely infinite or zero.
                _ => half_bits(d, rng.random_range(-300.0..300.0)),
            }
        };
        let xs: Vec<u16> = (0..n).map(|_| sample(&mut rng)).collect();
        let ys: Vec<u16> = (0..n).map(|_| sample(&mut rng)).collect();
        for op in [
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::IDiv,
            BinOp::Rem,
            BinOp::Pow,
            BinOp::Min,
            BinOp::Max,
        ] {
            for lanes in LANES {
                let f = elementwise(d, 2, lanes, |b, v| b.bin(op, v[0], v[1]));
                for opts in MODES {
                    let out = run_binary(&compile_ok(&f, &opts), &xs, &ys);
                    for i in 0..n {
                        let want = reference_binary(d, op, half_value(d, xs[i]), half_value(d, ys[i]));
                        let want = half_bits(d, want as f64);
                        assert!(
                            same_half(d, out[i], want),
                            "{d} {op:?} {:#06x} {:#06x} = {:#06x}, expected {want:#06x} ({lanes} lanes)",
                            xs[i],
                            ys[i],
                            out[i]
                        );
                    }
                }
            }
        }
        // Unary functions, computed in f32 (helpers for exp and log) and rounded.
        for (op, r) in [
            (UnOp::Sqrt, f32::sqrt as fn(f32) -> f32),
            (UnOp::Rsqrt, |x: f32| 1.0 / x.sqrt()),
            (UnOp::Exp, f32::exp),
            (UnOp::Log, f32::ln),
            (UnOp::Neg, |x: f32| -x),
            (UnOp::Abs, f32::abs),
            (UnOp::Floor, f32::floor),
        ] {
            for lanes in [2, 8] {
                let f = elementwise(d, 1, lanes, |b, v| b.un(op, v[0]));
                let got = run_unary(&f, &xs, 0u16);
                for out in got {
                    for i in 0..n {
                        let want = half_bits(d, r(half_value(d, xs[i])) as f64);
                        assert!(
                            same_half(d, out[i], want),
                            "{d} {op:?} {:#06x} = {:#06x}, expected {want:#06x}",
                            xs[i],
                            out[i]
                        );
                    }
                }
            }
        }
    }
}

/// `x * 0.1 + c` with an fp16 constant and an fp16 scalar argument: both rounded once to
/// the dtype, every step rounded.
#[test]
fn constants_and_scalar_arguments() {
    for d in [DType::F16, DType::BF16] {
        let mut b = B::new("consts");
        let x = b.ptr(0, d);
        let out = b.ptr(1, d);
        let c = b.arg(2, Ty::Scalar(d));
        let (sx, so) = (b.site(0), b.site(1));
        let zero = b.i32(0);
        let v = b.load(Addressing::Contiguous, x, zero, None, None, sx, Ty::Tile(d, 8));
        let tenth = d.round_float(0.1);
        let k = b.float(d, tenth);
        let ks = b.splat(k, 8);
        let cs = b.splat(c, 8);
        let t = b.bin(BinOp::Mul, v, ks);
        let r = b.bin(BinOp::Add, t, cs);
        b.store(Addressing::Contiguous, out, zero, r, None, so);
        let f = b.finish();
        let cval = 3.3f32;
        let cbits = half_bits(d, cval as f64);
        for opts in MODES {
            let kern = compile_ok(&f, &opts);
            let mut xs: Vec<u16> = (0..8).map(|i| half_bits(d, i as f64 * 7.25 - 11.0)).collect();
            let mut ys = vec![0u16; 8];
            run(&kern, [1, 1, 1], &[slot(&mut xs), slot(&mut ys), scalar(cbits as u64)], None).unwrap();
            for i in 0..8 {
                let t = reference_binary(d, BinOp::Mul, half_value(d, xs[i]), tenth as f32);
                let want = reference_binary(d, BinOp::Add, t, half_value(d, cbits));
                assert_eq!(ys[i], half_bits(d, want as f64), "{d} element {i}");
            }
        }
    }
}

/// Lane sums: pairwise, every addition rounded to the dtype.
#[test]
fn lane_reductions_round_every_step() {
    let mut rng = rng();
    for d in [DType::F16, DType::BF16] {
        for lanes in [2u8, 4, 8, 16] {
            let mut b = B::new("reduce");
            let x = b.ptr(0, d);
            let out = b.ptr(1, d);
            let (sx, so) = (b.site(0), b.site(1));
            let zero = b.i32(0);
            let v = b.load(Addressing::Contiguous, x, zero, None, None, sx, Ty::Tile(d, lanes));
            let s = b.val(Opcode::ReduceLanes(ReduceOp::Sum), &[v], Ty::Scalar(d));
            let m = b.val(Opcode::ReduceLanes(ReduceOp::Max), &[v], Ty::Scalar(d));
            let one = b.i32(1);
            b.store(Addressing::Scalar, out, zero, s, None, so);
            b.store(Addressing::Scalar, out, one, m, None, so);
            let f = b.finish();
            let k = compile_ok(&f, &CodegenOptions::default());
            for _ in 0..200 {
                let mut xs: Vec<u16> =
                    (0..lanes).map(|_| half_bits(d, rng.random_range(-1000.0..1000.0))).collect();
                let mut ys = vec![0u16; 2];
                run(&k, [1, 1, 1], &[slot(&mut xs), slot(&mut ys)], None).unwrap();
                let mut level: Vec<f32> = xs.iter().map(|&h| half_value(d, h)).collect();
                let max = level.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                while level.len() > 1 {
                    level = level.chunks(2).map(|p| reference_binary(d, BinOp::Add, p[0], p[1])).collect();
                }
                assert_eq!(
                    ys,
                    [half_bits(d, level[0] as f64), half_bits(d, max as f64)],
                    "{d} {lanes} lanes {xs:?}"
                );
            }
        }
    }
}

/// Masked gathers and scatters of fp16: `y[idx[k]] = x[idx[k]] * 2` for `k < n`, the
/// masked-off lanes pointing far outside the buffers; then a checked access past the end.
#[test]
fn gathers_scatters_and_bounds_checks() {
    for d in [DType::F16, DType::BF16] {
        for lanes in [4u8, 8] {
            let mut b = B::new("gather");
            let x = b.ptr(0, d);
            let y = b.ptr(1, d);
            let idx = b.ptr(2, DType::I32);
            let n = b.arg(3, Ty::Scalar(DType::I32));
            let (sx, sy, si) = (b.site(0), b.site(1), b.site(2));
            let zero = b.i32(0);
            let step = b.i32(lanes as i64);
            let total = b.i32(16);
            b.for_(zero, total, step, &[], |b, i, _| {
                let offs = b.iota(i, lanes);
                let ns = b.splat(n, lanes);
                let m = b.cmp(CmpOp::Lt, offs, ns);
                let big = b.i32(1 << 28);
                let bigs = b.splat(big, lanes);
                let ix = b.load(
                    Addressing::Contiguous,
                    idx,
                    i,
                    Some(m),
                    Some(bigs),
                    si,
                    Ty::Tile(DType::I32, lanes),
                );
                let v = b.load(Addressing::Gather, x, ix, Some(m), None, sx, Ty::Tile(d, lanes));
                let two = b.float(d, 2.0);
                let twos = b.splat(two, lanes);
                let r = b.bin(BinOp::Mul, v, twos);
                b.store(Addressing::Gather, y, ix, r, Some(m), sy);
                vec![]
            });
            let f = b.finish();
            for opts in MODES {
                let k = compile_ok(&f, &opts);
                let n = 11;
                let mut xs: Vec<u16> = (0..16).map(|i| half_bits(d, i as f64 * 1.5 - 3.0)).collect();
                let mut ys = vec![0xFFFFu16; 16];
                let mut ix: Vec<i32> = (0..16).rev().collect();
                run(&k, [1, 1, 1], &[slot(&mut xs), slot(&mut ys), slot(&mut ix), scalar(pack_int(n))], None)
                    .unwrap();
                for (i, &v) in ys.iter().enumerate() {
                    let want = if i >= 16 - n as usize {
                        half_bits(d, (i as f64 * 1.5 - 3.0) * 2.0)
                    } else {
                        0xFFFF
                    };
                    assert_eq!(v, want, "{d}, {lanes} lanes, element {i}");
                }
                // A gather index one past the end: a fault in checked mode.
                if opts.checked {
                    ix[3] = 16;
                    let r = run(
                        &k,
                        [1, 1, 1],
                        &[slot(&mut xs), slot(&mut ys), slot(&mut ix), scalar(pack_int(n))],
                        None,
                    );
                    assert_eq!(
                        r,
                        Err(LaunchError::Fault {
                            status: Status::OutOfBounds,
                            pid: [0, 0, 0],
                            fault: Fault { site: 0, arg: 0, offset: 16 }
                        })
                    );
                }
            }
        }
        // A contiguous fp16 tile reaching one element past the end of its buffer.
        let f = elementwise(d, 1, 8, |_, v| v[0]);
        let k = compile_ok(&f, &CodegenOptions::default());
        let mut xs = [0u16; 12];
        let mut ys = [0u16; 12];
        let r = run(&k, [1, 1, 1], &[slot(&mut xs[..12]), slot(&mut ys[..11]), scalar(pack_int(16))], None);
        assert!(
            matches!(
                r,
                Err(LaunchError::Fault { status: Status::OutOfBounds, fault: Fault { site: 0, .. }, .. })
            ),
            "{r:?}"
        );
    }
}

/// A half tile goes through a scratch buffer of the dtype (held as f32: 4 bytes an
/// element).
#[test]
fn scratch_buffers_of_half_dtypes() {
    for d in [DType::F16, DType::BF16] {
        for lanes in [2u8, 4, 8] {
            let mut b = B::new("scratch");
            let x = b.ptr(0, d);
            let y = b.ptr(1, d);
            let (sx, sy) = (b.site(0), b.site(1));
            let slot0 = b.f.add_scratch(d, 32);
            let zero = b.i32(0);
            let step = b.i32(lanes as i64);
            let total = b.i32(32);
            b.for_(zero, total, step, &[], |b, i, _| {
                let v = b.load(Addressing::Contiguous, x, i, None, None, sx, Ty::Tile(d, lanes));
                b.inst(Opcode::ScratchStore(slot0), &[i, v], &[]);
                vec![]
            });
            b.for_(zero, total, step, &[], |b, i, _| {
                let v = b.val(Opcode::ScratchLoad(slot0), &[i], Ty::Tile(d, lanes));
                // Reversed tiles: the scratch really holds the data.
                let j = b.bin(BinOp::Sub, total, i);
                let j = b.bin(BinOp::Sub, j, step);
                b.store(Addressing::Contiguous, y, j, v, None, sy);
                vec![]
            });
            let three = b.i32(3);
            let s = b.val(Opcode::ScratchLoad(slot0), &[three], Ty::Scalar(d));
            let thirty = b.i32(30);
            b.inst(Opcode::ScratchStore(slot0), &[thirty, s], &[]);
            let back = b.val(Opcode::ScratchLoad(slot0), &[thirty], Ty::Scalar(d));
            let last = b.i32(31);
            b.store(Addressing::Scalar, y, last, back, None, sy);
            let f = b.finish();
            assert_eq!(f.scratch_bytes(), 128);
            for opts in MODES {
                let k = compile_ok(&f, &opts);
                // The scalar fp16 element converts through 16 bytes past the buffers with
                // F16C.
                let f16c = d == DType::F16 && opts.f16c && lnc_clif::converts_f16_natively();
                // A bf16 store of a 256-bit loop (8 lanes) broadcasts its three rounding
                // constants from 32 bytes of scratch each, past those 16 bytes.
                let staged = d == DType::BF16 && lanes == 8 && opts.wide && lnc_clif::computes_wide();
                let want = if f16c {
                    144
                } else if staged {
                    128 + 16 + 3 * 32
                } else {
                    128
                };
                assert_eq!(k.scratch_bytes(), want);
                let mut xs: Vec<u16> = (0..32).map(|i| half_bits(d, i as f64 - 7.5)).collect();
                let mut ys = vec![0u16; 32];
                run(&k, [1, 1, 1], &[slot(&mut xs), slot(&mut ys)], None).unwrap();
                for t in 0..32 / lanes as usize {
                    for l in 0..lanes as usize {
                        let i = t * lanes as usize + l;
                        let j = 32 - (t + 1) * lanes as usize + l;
                        if j != 31 {
                            assert_eq!(ys[j], xs[i], "{d}, {lanes} lanes, element {i}");
                        }
                    }
                }
                assert_eq!(ys[31], xs[3]);
            }
        }
    }
}

/// Atomic add, exchange and compare-and-swap on fp16 elements from many programs.
#[test]
fn atomics_on_half_elements() {
    for d in [DType::F16, DType::BF16] {
        let mut b = B::new("atomics");
        let p = b.ptr(0, d);
        let (s0, s1) = (b.site(0), b.site(0));
        let zero = b.i32(0);
        let one = b.i32(1);
        let two = b.i32(2);
        let inc = b.float(d, 1.0);
        b.val(
            Opcode::Atomic { op: AtomicOp::Add, addr: Addressing::Scalar, has_mask: false, site: s0 },
            &[p, zero, inc],
            Ty::Scalar(d),
        );
        let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
        let pf = b.cast(pid, d);
        b.val(
            Opcode::Atomic { op: AtomicOp::Max, addr: Addressing::Scalar, has_mask: false, site: s1 },
            &[p, one, pf],
            Ty::Scalar(d),
        );
        // Element 2 counts the programs that swapped 0.5 -> 0.5 + 1 (only one can).
        let half = b.float(d, 0.5);
        let three_halves = b.float(d, 1.5);
        let old = b.val(
            Opcode::AtomicCas { addr: Addressing::Scalar, site: s1 },
            &[p, two, half, three_halves],
            Ty::Scalar(d),
        );
        let won = b.cmp(CmpOp::Eq, old, half);
        let three = b.i32(3);
        b.if_(
            won,
            &[],
            |b| {
                let ten = b.float(d, 10.0);
                b.val(
                    Opcode::Atomic {
                        op: AtomicOp::Xchg,
                        addr: Addressing::Scalar,
                        has_mask: false,
                        site: s1,
                    },
                    &[p, three, ten],
                    Ty::Scalar(d),
                );
                vec![]
            },
            |_| vec![],
        );
        let f = b.finish();
        let threads = pool(4);
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            let mut mem = vec![half_bits(d, 0.0), half_bits(d, -1.0), half_bits(d, 0.5), half_bits(d, 0.0)];
            run(&k, [1000, 1, 1], &[slot(&mut mem)], Some(&threads)).unwrap();
            // 1000 is exact in both formats only for fp16; bf16 sums stop at 256 (256 + 1
            // rounds back to 256), as the interpreter's sequential additions do.
            let sum = if d == DType::F16 { 1000.0 } else { 256.0 };
            let max = half_value(d, half_bits(d, 999.0));
            assert_eq!(
                mem,
                [half_bits(d, sum), half_bits(d, max as f64), half_bits(d, 1.5), half_bits(d, 10.0)],
                "{d}"
            );
        }
    }
}

/// The steady state of a half tile conversion without F16C is vector code: 64-bit loads
/// widened to `i32x4`, integer bit manipulation, narrowing stores — no calls.
#[test]
fn conversions_are_vectorized() {
    for d in [DType::F16, DType::BF16] {
        let to32 = elementwise(d, 1, 8, |b, v| b.cast(v[0], DType::F32));
        let from32 = elementwise(DType::F32, 1, 8, |b, v| b.cast(v[0], d));
        let opts = CodegenOptions { checked: false, emit_text: true, f16c: false, ..Default::default() };
        for (f, want) in [(&to32, "uload16x4"), (&from32, "unarrow")] {
            let k = compile_ok(f, &opts);
            let clif = &k.text().unwrap().opt_clif;
            assert!(clif.contains(want), "{d}: no {want}:\n{clif}");
            assert!(clif.contains("i32x4"), "{d}: no i32x4 code:\n{clif}");
            assert!(!clif.contains("call"), "{d}: a call:\n{clif}");
        }
    }
}

/// Where the host has F16C and AVX, an `fp16` tile converts in one instruction: widening,
/// a marked `uload16x4` that Cranelift emits as `vpmovzxwd`, rewritten to `vcvtph2ps`
/// after it; narrowing, a marked store of the low 64 bits (`vpextrq`), rewritten to
/// `vcvtps2ph` of the cast's `fp32` operand, whose integer rounding is then dead code. With
/// `f16c` off, or elsewhere, in integer code. (The bits are compared in every mode by the
/// tests above.)
#[test]
fn fp16_tiles_convert_with_f16c_where_the_host_has_it() {
    let to32 = elementwise(DType::F16, 1, 8, |b, v| b.cast(v[0], DType::F32));
    let from32 = elementwise(DType::F32, 1, 8, |b, v| b.cast(v[0], DType::F16));
    for f16c in [true, false] {
        let opts = CodegenOptions { checked: false, emit_text: true, f16c, ..Default::default() };
        let native = f16c && lnc_clif::converts_f16_natively();
        let text = compile_ok(&to32, &opts).text().unwrap().clone();
        assert_eq!(text.asm.contains("rewritten after Cranelift to vcvtph2ps"), native, "{}", text.asm);
        let text = compile_ok(&from32, &opts).text().unwrap().clone();
        assert_eq!(text.asm.contains("rewritten after Cranelift to vcvtps2ph"), native, "{}", text.asm);
        // No integer rounding, whose results pair up into one 16-byte store.
        assert_eq!(text.opt_clif.contains("unarrow"), !native, "{}", text.opt_clif);
    }
    // bf16 widens by a shift in any case.
    let f = elementwise(DType::BF16, 1, 8, |b, v| b.cast(v[0], DType::F32));
    let opts = CodegenOptions { checked: false, emit_text: true, ..Default::default() };
    assert!(!compile_ok(&f, &opts).text().unwrap().asm.contains("vcvtph2ps"));
}
