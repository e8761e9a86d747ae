//! Structured control flow (`tests/kernels/control_flow.py`): every kernel against a
//! reference computed in Rust, and through the differential harness (JIT = interpreter).
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::*;
use common::*;
use rand::Rng;

fn module() -> lnc::Module {
    load("control_flow.py")
}

/// Python's `range(lo, hi, step)`.
fn py_range(lo: i64, hi: i64, step: i64) -> Vec<i64> {
    assert_ne!(step, 0);
    let mut out = Vec::new();
    let mut i = lo;
    while (step > 0 && i < hi) || (step < 0 && i > hi) {
        out.push(i);
        i += step;
    }
    out
}

fn hash(h: i32, x: i32) -> i32 {
    h.wrapping_mul(31).wrapping_add(x)
}

#[test]
fn loop_forms_match_python_ranges() {
    let m = module();
    let mut rng = rng();
    for (rows, n, stride) in [(1usize, 7usize, 7usize), (3, 13, 17), (5, 50, 53), (2, 9, 9)] {
        for _ in 0..6 {
            let lo = rng.random_range(0..n as i32);
            let hi = rng.random_range(0..=n as i32);
            let step = rng.random_range(1..6);
            let x: Vec<i32> = (0..rows * stride).map(|_| rng.random_range(-1000..1000)).collect();
            let case = Case::new(
                "loop_forms",
                "*i32,*i32,i32,i32,i32,i32,i32",
                rows as u32,
                vec![
                    x.clone().into(),
                    vec![POISON_I32; rows * 8].into(),
                    lo.into(),
                    hi.into(),
                    step.into(),
                    (n as i32).into(),
                    (stride as i32).into(),
                ],
            );
            let out = diff(&m, &case);
            let got = out[1].data().to_i64s();
            let (lo, hi, step, ni) = (lo as i64, hi as i64, step as i64, n as i64);
            for r in 0..rows {
                let xr = |i: i64| x[r * stride + i as usize];
                let mut want = [0i32; 8];
                want[0] = py_range(0, ni, 1).iter().fold(0i32, |a, &i| a.wrapping_add(xr(i)));
                want[1] = py_range(lo, hi, 1)
                    .iter()
                    .fold(0i32, |a, &i| a.wrapping_add(xr(i).wrapping_mul(i as i32)));
                want[2] = py_range(lo, hi, step).iter().fold(0, |h, &i| hash(h, xr(i)));
                want[3] = py_range(hi - 1, lo - 1, -3).iter().fold(0, |h, &i| hash(h, xr(i)));
                want[4] = py_range(hi, lo, -1).iter().fold(0, |h, &i| hash(h, xr(i - 1)));
                want[5] = [0, 3, 6, 1, 2].iter().fold(0, |h, &k| hash(h, xr(k)));
                want[6] = py_range(lo, hi, step).len() as i32;
                want[7] = py_range(ni - 1, -1, -step).iter().fold(0, |h, &i| hash(h, xr(i)));
                for k in 0..8 {
                    assert_eq!(
                        got[r * 8 + k],
                        want[k] as i64,
                        "row {r}, result {k}, lo {lo}, hi {hi}, step {step}, n {n}"
                    );
                }
            }
        }
    }
}

#[test]
fn runtime_steps_of_either_sign() {
    let m = module();
    let mut rng = rng();
    let x: Vec<i32> = (0..64).map(|_| rng.random_range(-50..50)).collect();
    let mut cases =
        vec![(0, 64, 1), (63, -1, -1), (10, 10, -2), (5, 40, -3), (40, 5, 3), (60, 3, -7), (3, 60, 7)];
    for _ in 0..20 {
        let step = match rng.random_range(-9..9) {
            0 => 1,
            s => s,
        };
        cases.push((rng.random_range(0..64), rng.random_range(0..64), step));
    }
    for (lo, hi, step) in cases {
        let case = Case::new(
            "runtime_negative_step",
            "*i32,*i32,i32,i32,i32",
            1,
            vec![x.clone().into(), vec![POISON_I32; 2].into(), lo.into(), hi.into(), step.into()],
        );
        let out = diff(&m, &case);
        let r = py_range(lo as i64, hi as i64, step as i64);
        let want = r.iter().fold(0, |h, &i| hash(h, x[i as usize]));
        assert_eq!(out[1].data().to_i64s(), vec![want as i64, r.len() as i64], "range({lo}, {hi}, {step})");
    }
}

/// Ranges near the ends of the index's type: the step past the last index overflows it,
/// and the loop must still stop there, as Python's `range` does (it wrapped around and
/// ran on before, forever for `range(0, 2**31 - 1, 1024)`). Each case runs on the JIT and
/// the interpreter (which counts the turns in 128 bits) and against Python's count.
#[test]
fn ranges_whose_next_index_overflows_stop_at_the_bound() {
    let m = module();
    let (i32max, i32min) = (i32::MAX as i64, i32::MIN as i64);
    let cases: Vec<(&str, i64, i64, i64)> = vec![
        ("i32", i32max - 700, i32max, 100),
        ("i32", i32max - 47, i32max, 100),
        ("i32", i32max, i32min, -1 << 30),
        ("i32", i32min, i32max, i32max),
        ("i32", i32min + 5, i32min, -3),
        ("i64", i64::MAX - 1000, i64::MAX, 500),
        ("i64", i64::MIN, i64::MAX, i64::MAX),
        ("i64", i64::MAX, i64::MIN, -(1 << 62)),
        ("i64", i64::MIN + 9, i64::MIN, -4),
        ("u32", u32::MAX as i64 - 300, u32::MAX as i64, 200),
        ("u64", (u64::MAX - 300) as i64, u64::MAX as i64, 200),
    ];
    for (ty, lo, hi, step) in cases {
        let arg = |v: i64| -> A {
            match ty {
                "i32" => (v as i32).into(),
                "i64" => v.into(),
                "u32" => (v as u32).into(),
                _ => (v as u64).into(),
            }
        };
        let sig = format!("*i64,{ty},{ty},{ty}");
        let case = Case::new("range_edges", &sig, 1, vec![vec![0i64; 2].into(), arg(lo), arg(hi), arg(step)]);
        let out = diff(&m, &case);
        // Python's range over the values as the type reads them.
        let val = |v: i64| -> i128 { if ty.starts_with('u') { v as u64 as i128 } else { v as i128 } };
        let (l, h, s) = (val(lo), val(hi), val(step));
        let count = if s > 0 { ((h - l).max(0) + s - 1) / s } else { ((l - h).max(0) - s - 1) / -s };
        let last = if count > 0 { l + (count - 1) * s } else { l };
        let got = out[0].data().to_i64s();
        assert_eq!(
            (got[0] as i128, got[1] as u64 as i128 & mask(ty)),
            (count, last & mask(ty)),
            "{ty} range({lo}, {hi}, {step})"
        );
    }
}

/// The bits of a value of type `ty` (the stored `last` is sign- or zero-extended).
fn mask(ty: &str) -> i128 {
    if ty.ends_with("32") { 0xffff_ffff } else { 0xffff_ffff_ffff_ffff }
}

/// A zero step known only at run time: Python's `range` raises, Triton's compiled loop
/// would never end; lnc runs no turn (the interpreter reports it as an error).
#[test]
fn a_zero_step_at_run_time_runs_no_turn() {
    let m = module();
    for (lo, hi) in [(0, 5), (5, 0), (3, 3)] {
        let case = Case::new(
            "range_edges",
            "*i64,i32,i32,i32",
            1,
            vec![vec![-1i64; 2].into(), lo.into(), hi.into(), 0i32.into()],
        );
        let out = run_jit(&m, &case).unwrap();
        assert_eq!(out[0].data().to_i64s(), vec![0, lo as i64], "range({lo}, {hi}, 0)");
    }
}

#[test]
fn while_loop_collatz() {
    let m = module();
    let mut rng = rng();
    let n = 301usize;
    let mut x: Vec<i32> = (0..n).map(|_| rng.random_range(1..5000)).collect();
    x[0] = 1;
    x[1] = 27;
    // Programs past n do nothing: their (nonexistent) outputs stay poisoned.
    let grid = n as u32 + 5;
    let case = Case::new(
        "collatz",
        "*i32,*i32,*i64,i32",
        grid,
        vec![x.clone().into(), vec![POISON_I32; n].into(), vec![-1i64; n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let (steps, peaks) = (out[1].data().to_i64s(), out[2].data().to_i64s());
    for i in 0..n {
        let (mut v, mut s, mut p) = (x[i] as i64, 0i64, x[i] as i64);
        while v != 1 {
            v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
            p = p.max(v);
            s += 1;
        }
        assert_eq!((steps[i], peaks[i]), (s, p), "collatz({})", x[i]);
    }
    assert_eq!(steps[1], 111);
}

#[test]
fn if_elif_else_and_folded_constexpr_branches() {
    let m = module();
    let mut rng = rng();
    let n = 203usize;
    let mut x: Vec<i32> = (0..n).map(|_| rng.random_range(-30..30)).collect();
    x[..4].copy_from_slice(&[0, -10, -11, 1]);
    for mode in [0, 1, 2] {
        let case = Case::new(
            "if_chain",
            &format!("*i32,*i32,{mode}"),
            n as u32,
            vec![x.clone().into(), vec![POISON_I32; n].into()],
        );
        let out = diff(&m, &case);
        let got = out[1].data().to_i64s();
        for i in 0..n {
            let v = x[i];
            let y = if v < -10 {
                -v * 2
            } else if v < 0 {
                v + 100
            } else if v == 0 {
                7
            } else {
                v / 3
            };
            let y = match mode {
                0 => y + 1,
                1 => y * 2,
                _ => -y,
            };
            assert_eq!(got[i], y as i64, "x = {v}, MODE = {mode}");
        }
    }
    // MODE = 7 compiles the branch the other modes fold away: its undefined name is an error.
    let e = m.kernel("if_chain", "*i32,*i32,7").unwrap_err().to_string();
    assert!(e.contains("undefined_name"), "{e}");
}

#[test]
fn boolean_operators_and_conditional_expressions() {
    let m = module();
    let mut rng = rng();
    let progs = 97usize;
    let mut x: Vec<i32> = (0..2 * progs).map(|_| rng.random_range(-3..4)).collect();
    x[..8].copy_from_slice(&[1, 1, 1, -1, -1, 1, -2, -2]);
    let case = Case::new(
        "bool_ops",
        "*i32,*i32",
        progs as u32,
        vec![x.clone().into(), vec![POISON_I32; 3 * progs].into()],
    );
    let out = diff(&m, &case);
    let got = out[1].data().to_i64s();
    for p in 0..progs {
        let (a, b) = (x[2 * p], x[2 * p + 1]);
        let r = if a > 0 && b > 0 {
            1
        } else if a > 0 || b > 0 {
            2
        } else if a != b {
            3
        } else {
            4
        };
        assert_eq!(&got[3 * p..3 * p + 3], &[r, a.max(b) as i64, 1], "a = {a}, b = {b}");
    }
}

#[test]
fn block_values_carried_through_loops() {
    let m = module();
    let mut rng = rng();
    for (rows, n, stride, block) in
        [(3usize, 1usize, 1usize, 16u32), (5, 37, 40, 16), (4, 1000, 1003, 128), (2, 64, 64, 64)]
    {
        let x: Vec<f32> = (0..rows * stride).map(|_| rng.random_range(-4.0..4.0)).collect();
        let case = Case::new(
            "row_stats",
            &format!("*fp32,*fp32,*fp32,*i32,i32,i32,{block}"),
            rows as u32,
            vec![
                x.clone().into(),
                vec![NAN32; rows].into(),
                vec![NAN32; rows].into(),
                vec![POISON_I32; rows].into(),
                (n as i32).into(),
                (stride as i32).into(),
            ],
        )
        .check(1, Check::Close { atol: 1e-4, rtol: 1e-5 });
        let out = diff(&m, &case);
        for r in 0..rows {
            let row = &x[r * stride..r * stride + n];
            let sum: f64 = row.iter().map(|&v| v as f64).sum();
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let cnt = row.iter().filter(|&&v| v > 0.0).count();
            let got_sum = out[1].data().get_f64(r);
            assert!(
                (got_sum - sum).abs() <= 1e-4 * (n as f64).sqrt() + 1e-5,
                "sum row {r}: {got_sum} vs {sum}"
            );
            assert_eq!(out[2].data().get_f64(r), mx as f64, "max row {r}");
            assert_eq!(out[3].data().get_f64(r), cnt as f64, "count row {r}");
        }
    }
}

#[test]
fn grid_stride_loop_with_num_programs() {
    let m = module();
    let mut rng = rng();
    for (n, grid) in [(1usize, 1u32), (1001, 3), (5000, 7), (129, 9)] {
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0..10.0)).collect();
        let case = Case::new(
            "grid_stride",
            "*fp32,*fp32,i32,64",
            grid,
            vec![x.clone().into(), vec![NAN32; n].into(), (n as i32).into()],
        );
        let out = diff(&m, &case);
        for i in 0..n {
            assert_eq!(out[1].data().get_f64(i), (x[i] * 2.0 + 1.0) as f64, "element {i} of {n}");
        }
    }
}

#[test]
fn branches_inside_a_loop_carry_two_values() {
    let m = module();
    let mut rng = rng();
    let (rows, n) = (7usize, 45usize);
    let x: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let case = Case::new(
        "branches_in_loop",
        "*fp32,*i32,*fp32,i32",
        rows as u32,
        vec![x.clone().into(), vec![POISON_I32; rows].into(), vec![NAN32; rows].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let pos = row.iter().filter(|&&v| v > 0.0).count() as f64;
        let neg: f64 = row.iter().filter(|&&v| v <= 0.0).map(|&v| v as f64).sum();
        assert_eq!(out[1].data().get_f64(r), pos);
        assert!((out[2].data().get_f64(r) - neg).abs() < 1e-4, "row {r}");
    }
}

#[test]
fn while_condition_reduces_a_carried_block() {
    let m = module();
    let mut rng = rng();
    let n = 203usize;
    let block = 32usize;
    let progs = n.div_ceil(block);
    let mut x: Vec<f32> = (0..n).map(|_| rng.random_range(-100.0..100.0)).collect();
    // The last program's block holds only small values: its loop runs zero times.
    for v in &mut x[(progs - 1) * block..] {
        *v *= 0.001;
    }
    let case = Case::new(
        "halve_until_small",
        "*fp32,*fp32,*i32,i32,32",
        progs as u32,
        vec![x.clone().into(), vec![NAN32; n].into(), vec![POISON_I32; progs].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    for p in 0..progs {
        let chunk = &x[p * block..((p + 1) * block).min(n)];
        let mut it = 0;
        let mut scale = 1.0f32;
        while chunk.iter().map(|v| (v * scale).abs()).fold(0.0, f32::max) >= 1.0 {
            scale *= 0.5;
            it += 1;
        }
        assert_eq!(out[2].data().get_f64(p), it as f64, "program {p}");
        for (k, v) in chunk.iter().enumerate() {
            assert_eq!(out[1].data().get_f64(p * block + k), (v * scale) as f64);
        }
    }
    assert_eq!(out[2].data().get_f64(progs - 1), 0.0);
}

#[test]
fn nested_loops_with_dependent_bounds() {
    let m = module();
    let mut rng = rng();
    for (rows, n) in [(1usize, 0usize), (3, 1), (4, 23)] {
        let x: Vec<i32> = (0..(rows * n).max(1)).map(|_| rng.random_range(-100..100)).collect();
        let case = Case::new(
            "triangle",
            "*i32,*i32,i32",
            rows as u32,
            vec![x.clone().into(), vec![POISON_I32; rows].into(), (n as i32).into()],
        );
        let out = diff(&m, &case);
        for r in 0..rows {
            let mut t = 0i32;
            for i in 0..n {
                for j in i..n {
                    t = t.wrapping_add(x[r * n + j].wrapping_mul(i as i32 + 1));
                }
            }
            assert_eq!(out[1].data().to_i64s()[r], t as i64, "row {r}, n {n}");
        }
    }
}

#[test]
fn loop_inside_while_inside_if() {
    let m = module();
    let mut rng = rng();
    let n = 11usize;
    let x: Vec<i32> = (0..n).map(|_| rng.random_range(1..10)).collect();
    let s: i32 = x.iter().sum();
    for limit in [-3, 0, 1, s, s + 1, 10 * s + 3] {
        let progs = 9usize;
        let case = Case::new(
            "while_with_loop_inside",
            "*i32,*i32,i32,i32",
            progs as u32,
            vec![x.clone().into(), vec![POISON_I32; 2 * progs].into(), (n as i32).into(), limit.into()],
        );
        let out = diff(&m, &case);
        let got = out[1].data().to_i64s();
        for p in 0..progs {
            let want = if p % 2 == 0 {
                let (mut t, mut r) = (0, 0);
                while t < limit {
                    t += s;
                    r += 1;
                }
                (t, r)
            } else {
                (0, -1)
            };
            assert_eq!(
                (got[2 * p], got[2 * p + 1]),
                (want.0 as i64, want.1 as i64),
                "program {p}, limit {limit}"
            );
        }
    }
}
