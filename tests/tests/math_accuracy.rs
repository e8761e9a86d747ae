//! `tl.exp`, `tl.exp2`, `tl.log`, `tl.log2`, `tl.sin` and `tl.cos` on `f32` lanes, computed
//! by the JIT's own code (lnc-clif's `vmath`): bit for bit what `lnc_bir::math` defines (which the
//! interpreter and constant folding compute), and within each function's bound ([`FNS`])
//! of `f64` references, on a sweep of the `f32` bit patterns (every [`STRIDE`]th, plus
//! dense runs where the functions change regime), special values exactly; the vector lanes
//! and the scalar code of a program bit for bit the same; and `fp16`/`bf16` (computed in
//! `f32`, rounded once) within one of their ulps on every one of their bit patterns.
//!
//! `LNC_MATH_STRIDE=1` sweeps all 2^32 patterns (use `--release`; about two minutes a
//! function); `LNC_MATH_ONLY=sin,cos` limits the sweep to the functions named.

mod common;

use lnc_bir::UnOp;
use lnc_bir::math;

/// Every this many bit patterns (odd, so every exponent and both signs are visited).
const STRIDE: u32 = 1021;

/// Each function, its operation, its `f64` reference, and the most its result may be from
/// the exact value, in ulps of the correctly rounded result (the worst found on every bit
/// pattern, rounded up: see `lnc_bir::math`).
const FNS: [Function; 6] = [
    ("exp", UnOp::Exp, f64::exp, 1.02),
    ("exp2", UnOp::Exp2, f64::exp2, 1.23),
    ("log", UnOp::Log, f64::ln, 0.86),
    ("log2", UnOp::Log2, f64::log2, 1.53),
    ("sin", UnOp::Sin, f64::sin, 0.57),
    ("cos", UnOp::Cos, f64::cos, 0.57),
];

/// A function's name, operation, `f64` reference and bound in ulps.
type Function = (&'static str, UnOp, fn(f64) -> f64, f64);

/// What lnc defines `op` of `x` to be (`lnc_bir::math`), which the JIT must give bit for
/// bit.
fn defined(op: UnOp, x: f32) -> f32 {
    math::unary_f32(op, x).unwrap_or_else(|| panic!("{op:?} is not in lnc_bir::math"))
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn source() -> String {
    let mut s = String::from("import triton\nimport triton.language as tl\n");
    for (name, ..) in FNS {
        s.push_str(&format!(
            r#"
@triton.jit
def tiles_{name}(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(Y + i, tl.{name}(tl.load(X + i, mask=m)), mask=m)

@triton.jit
def scalar_{name}(X, Y):
    p = tl.program_id(0)
    tl.store(Y + p, tl.{name}(tl.load(X + p)))
"#
        ));
    }
    s
}

fn module() -> lnc::Module {
    lnc::Jit::new().module("math.py", source()).unwrap_or_else(|e| panic!("{e}"))
}

/// `f` of every element of `x`, through tiles of 1024 lanes (the last one partial), into
/// outputs poisoned with `poison`.
fn run_half<T: lnc::Element + Copy>(m: &lnc::Module, name: &str, dtype: &str, x: &[T], poison: T) -> Vec<T> {
    let sig = format!("*{dtype},*{dtype},i32,1024");
    let k = m.kernel(&format!("tiles_{name}"), &sig).unwrap_or_else(|e| panic!("{e}"));
    let mut y = vec![poison; x.len()];
    let grid = x.len().div_ceil(1024) as u32;
    k.launch(grid, &lnc::args![x, &mut y, x.len() as i32]).unwrap_or_else(|e| panic!("{e}"));
    y
}

fn run_f32(m: &lnc::Module, kernel: &str, x: &[f32]) -> Vec<f32> {
    let scalar = kernel.starts_with("scalar");
    let sig = if scalar { "*fp32,*fp32" } else { "*fp32,*fp32,i32,1024" };
    let k = m.kernel(kernel, sig).unwrap_or_else(|e| panic!("{e}"));
    let mut y = vec![f32::from_bits(0x7fc0_dead); x.len()];
    if scalar {
        k.launch(x.len() as u32, &lnc::args![x, &mut y]).unwrap_or_else(|e| panic!("{e}"));
    } else {
        let grid = x.len().div_ceil(1024) as u32;
        k.launch(grid, &lnc::args![x, &mut y, x.len() as i32]).unwrap_or_else(|e| panic!("{e}"));
    }
    y
}

/// The distance of `got` from the exact `want`, in ulps of `want` rounded to `f32`
/// (subnormal ulps below the normal range). `None` where the two must match exactly:
/// `want` is NaN, infinite or zero, or rounds to an infinity.
fn ulps(got: f32, want: f64) -> Option<f64> {
    let r = want as f32;
    if want.is_nan() || want.is_infinite() || want == 0.0 || r.is_infinite() {
        return None;
    }
    let e = (r.abs().to_bits() >> 23) as i32;
    let ulp = 2f64.powi(e.max(1) - 127 - 23);
    Some((f64::from(got) - want).abs() / ulp)
}

/// Whether `got` is what `f` must give exactly where [`ulps`] is `None`; for results
/// below half the smallest subnormal, the rounded zero or the smallest subnormal.
fn exact_ok(got: f32, want: f64) -> bool {
    let r = want as f32;
    if want.is_nan() {
        got.is_nan()
    } else if r.is_infinite() {
        // Past the largest finite value the result overflows; just below it the
        // correctly rounded result is still finite, and within 1 ulp of it too.
        got == r || (got.is_finite() && (f64::from(got) - want).abs() <= 2f64.powi(104))
    } else {
        got == r || (want != 0.0 && (f64::from(got) - want).abs() <= 2f64.powi(-149))
    }
}

/// The special values and dense runs around 0, 1, 2, 0.5, the overflow and underflow
/// thresholds of `exp`/`exp2` and through the subnormals, both signs.
fn edges() -> Vec<f32> {
    let mut x = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        88.722_83,
        88.722_84,
        -87.336_55,
        -103.972_08,
        -103.972_09,
        128.0,
        127.999_99,
        -126.0,
        -149.0,
        -150.0,
    ];
    for centre in [0.0f32, 1.0, 88.722_84, -87.336_55, -103.972_08, 128.0, -126.0, -149.0, 2.0, 0.5] {
        for sign in [1.0f32, -1.0] {
            let c = (centre * sign).to_bits();
            x.extend(
                (0..4096u32)
                    .flat_map(|d| [f32::from_bits(c.wrapping_add(d)), f32::from_bits(c.wrapping_sub(d))]),
            );
        }
    }
    x.extend((0..1u32 << 16).map(|k| f32::from_bits(k * 128 + 1)));
    x
}

/// Every `stride`th bit pattern, in pieces of at most 2^24, then [`edges`].
fn inputs(stride: u32) -> impl Iterator<Item = Vec<f32>> {
    let count = u64::from(u32::MAX / stride) + 1;
    let pieces = (0..count).step_by(1 << 24).map(move |start| {
        (start..(start + (1 << 24)).min(count))
            .map(|k| f32::from_bits((k * u64::from(stride)) as u32))
            .collect()
    });
    pieces.chain(std::iter::once(edges()))
}

#[test]
fn f32_lanes_are_within_their_bound_and_special_values_exact() {
    let stride = std::env::var("LNC_MATH_STRIDE").ok().and_then(|s| s.parse().ok()).unwrap_or(STRIDE);
    let only = std::env::var("LNC_MATH_ONLY").unwrap_or_default();
    let m = module();
    for (name, op, reference, bound) in FNS {
        if !only.is_empty() && !only.split(',').any(|o| o == name) {
            continue;
        }
        let (mut worst, mut at, mut checked) = (0f64, 0f32, 0usize);
        for x in inputs(stride) {
            let y = run_f32(&m, &format!("tiles_{name}"), &x);
            for (&x, &y) in x.iter().zip(&y) {
                let d = defined(op, x);
                assert!(same(y, d), "{name}({x:e} = {:#x}): JIT {y:e}, lnc_bir::math {d:e}", x.to_bits());
                let want = reference(f64::from(x));
                match ulps(y, want) {
                    Some(u) => {
                        assert!(
                            u <= bound,
                            "{name}({x:e} = {:#x}) = {y:e}, exact {want:e}: {u:.3} ulps",
                            x.to_bits()
                        );
                        if u > worst {
                            (worst, at) = (u, x);
                        }
                    }
                    None => assert!(
                        exact_ok(y, want),
                        "{name}({x:e} = {:#x}) = {y:e}, want {want:e}",
                        x.to_bits()
                    ),
                }
                checked += 1;
            }
        }
        eprintln!("{name}: {checked} values, worst {worst:.3} ulps at {at:e} ({:#x})", at.to_bits());
    }
}

#[test]
fn a_scalar_lane_computes_what_a_vector_lane_does() {
    let m = module();
    let x: Vec<f32> = inputs(1 << 12 | 1).flatten().collect();
    for (name, ..) in FNS {
        let tiles = run_f32(&m, &format!("tiles_{name}"), &x);
        let scalar = run_f32(&m, &format!("scalar_{name}"), &x);
        for ((x, t), s) in x.iter().zip(&tiles).zip(&scalar) {
            assert!(
                t.to_bits() == s.to_bits() || (t.is_nan() && s.is_nan()),
                "{name}({x:e}): tiles {t:e}, scalar {s:e}"
            );
        }
    }
}

/// Every `fp16` and `bf16` bit pattern: the result is the `f32` value rounded once to
/// the dtype, so within one of its ulps of the exact value (and exact at special values).
#[test]
fn half_lanes_are_within_one_ulp_on_every_input() {
    use half::{bf16, f16};
    let m = module();
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    for dtype in ["fp16", "bf16"] {
        let to_f64 =
            |b: u16| if dtype == "fp16" { f16::from_bits(b).to_f64() } else { bf16::from_bits(b).to_f64() };
        let from_f64 =
            |v: f64| if dtype == "fp16" { f16::from_f64(v).to_bits() } else { bf16::from_f64(v).to_bits() };
        for (name, _, reference, _) in FNS {
            let y: Vec<u16> = if dtype == "fp16" {
                let x: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
                run_half(&m, name, dtype, &x, f16::from_bits(0x7e01)).iter().map(|v| v.to_bits()).collect()
            } else {
                let x: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
                run_half(&m, name, dtype, &x, bf16::from_bits(0x7f81)).iter().map(|v| v.to_bits()).collect()
            };
            for (&x, &y) in bits.iter().zip(&y) {
                let want = reference(to_f64(x));
                let got = to_f64(y);
                if want.is_nan() {
                    assert!(got.is_nan(), "{dtype} {name}({:e}) = {got:e}, want NaN", to_f64(x));
                    continue;
                }
                // One ulp of the dtype at the correctly rounded result: the distance to
                // the next pattern away from zero (none past the largest finite value).
                let r = to_f64(from_f64(want));
                let next = to_f64(from_f64(r).wrapping_add(1));
                let ulp = if r.is_finite() && next.is_finite() { (next - r).abs() } else { 0.0 };
                assert!(
                    got == r || (got - want).abs() <= ulp,
                    "{dtype} {name}({:e}) = {got:e}, exact {want:e} (rounded {r:e})",
                    to_f64(x)
                );
            }
        }
    }
}
