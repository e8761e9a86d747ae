//! Tier 1 of the language (`tests/kernels/tier1.py`): scalar loads and stores, pointer
//! arithmetic, `.to()` and `.dtype`, `tl.where`, math functions, `cdiv`, Python `min` /
//! `max`, inlined `@jit` calls returning values and tuples, `static_assert`,
//! `device_print` — against references and through the differential harness.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::*;
use common::*;
use rand::Rng;

fn module() -> lnc::Module {
    load("tier1.py")
}

#[test]
fn scalar_loads_and_stores() {
    let m = module();
    let mut rng = rng();
    for n in [1usize, 2, 37] {
        let x: Vec<i64> = (0..n).map(|_| rng.random_range(-1 << 40..1 << 40)).collect();
        let case = Case::new(
            "scalar_io",
            "*i64,*i64,i32",
            n as u32,
            vec![x.clone().into(), vec![i64::MIN; n + 2].into(), (n as i32).into()],
        );
        let out = diff(&m, &case);
        let y = out[1].data().to_i64s();
        for i in 0..n {
            assert_eq!(y[i], x[i] * 3 - 1, "element {i}");
        }
        assert_eq!(y[n], x[n - 1]);
        assert_eq!(y[n + 1], i64::MIN, "past the end");
    }
}

#[test]
fn pointer_arithmetic_on_parameters() {
    let m = module();
    let mut rng = rng();
    for (rows, n, sx, sy, block) in
        [(1usize, 1usize, 1usize, 2usize, 16u32), (9, 100, 103, 110, 32), (4, 257, 257, 258, 64)]
    {
        let x: Vec<f32> = (0..rows * sx).map(|_| rng.random_range(-10.0..10.0)).collect();
        let case = Case::new(
            "row_pointers",
            &format!("*fp32,*fp32,i32,i32,i32,{block}"),
            rows as u32,
            vec![
                x.clone().into(),
                vec![NAN32; rows * sy].into(),
                (sx as i32).into(),
                (sy as i32).into(),
                (n as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        let y = out[1].data().to_f64s();
        for r in 0..rows {
            for c in 0..n {
                assert_eq!(y[r * sy + c], (x[r * sx + c] + r as f32) as f64, "({r}, {c})");
            }
            assert_eq!(y[r * sy + n], r as f64, "row {r}: store through the decremented pointer");
            assert!(y[r * sy + n + 1..(r + 1) * sy].iter().all(|v| v.is_nan()), "row {r}: padding");
        }
    }
}

#[test]
fn conversions_and_dtypes() {
    let m = module();
    let mut rng = rng();
    let n = 301usize;
    let mut f: Vec<f32> = (0..n).map(|_| rng.random_range(-1000.0..1000.0)).collect();
    f[..8].copy_from_slice(&[0.0, -0.0, 0.5, -0.99, 2.5e9, -3e9, f32::NAN, f32::INFINITY]);
    let mut i: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    i[..4].copy_from_slice(&[0, -1, 255, 256]);
    for like in ["i16", "fp64"] {
        let like_buf: A = if like == "i16" { vec![0x7777i16; n].into() } else { vec![f64::NAN; n].into() };
        let case = Case::new(
            "conversions",
            &format!("*fp32,*i32,*i32,*fp32,*u8,*i1,*i64,*fp64,*{like},i32,64"),
            n.div_ceil(64) as u32,
            vec![
                f.clone().into(),
                i.clone().into(),
                vec![POISON_I32; n].into(),
                vec![NAN32; n].into(),
                vec![0xa5u8; n].into(),
                vec![true; n].into(),
                vec![i64::MIN; n].into(),
                vec![f64::NAN; n].into(),
                like_buf,
                (n as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        for k in 0..n {
            // float -> int truncates toward zero and saturates.
            let want_i = f[k] as i32 as i64;
            assert_eq!(out[2].data().to_i64s()[k], want_i, "{} .to(int32)", f[k]);
            assert_eq!(out[3].data().get_f64(k), (i[k] as f32 * 0.5) as f64, "{} .to(float32)", i[k]);
            assert_eq!(out[4].data().to_i64s()[k], (i[k] as u8) as i64, "{} .to(uint8)", i[k]);
            assert_eq!(out[5].data().to_i64s()[k], (f[k] != 0.0) as i64, "{} .to(int1)", f[k]);
            assert_eq!(out[6].data().to_i64s()[k], i[k] as i64 * 100000, "{} .to(int64)", i[k]);
            let want = f[k] as f64 / 3.0;
            let got = out[7].data().get_f64(k);
            assert!(got == want || (got.is_nan() && want.is_nan()), "{} .to(float64)", f[k]);
            let z = (i[k] as f32) * 2.0;
            let want = if like == "i16" {
                z.clamp(i16::MIN as f32, i16::MAX as f32) as i16 as f64
            } else {
                z as f64
            };
            assert_eq!(out[8].data().get_f64(k), want, "{} .to(element_ty of {like})", i[k]);
        }
    }
}

#[test]
fn float_math_functions() {
    let m = module();
    let mut rng = rng();
    let n = 203usize;
    let mut x: Vec<f32> = (0..n).map(|_| rng.random_range(-20.0..20.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.random_range(-20.0..20.0)).collect();
    x[..3].copy_from_slice(&[0.0, -0.0, 1e-30]);
    let case = Case::new(
        "math_fns",
        "*fp32,*fp32,*fp32,i32,32",
        n.div_ceil(32) as u32,
        vec![x.clone().into(), y.clone().into(), vec![NAN32; 8 * n + 5].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let o = out[2].data().to_f64s();
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() <= 2e-6 * want.abs() + 1e-30, "{what}: {got} vs {want}");
    };
    for k in 0..n {
        let (a, b) = (x[k] as f64, y[k] as f64);
        let s = &o[8 * k..8 * k + 8];
        assert_eq!(s[0], if a > b { a } else { b }, "where({a} > {b})");
        assert_eq!(s[1], (x[k].max(y[k]) - x[k].min(y[k])) as f64, "maximum - minimum");
        close(s[2], a.abs().sqrt(), "sqrt");
        // The kernel rounds `|x| + c` to float32 before the function.
        close(s[3], 1.0 / ((x[k].abs() + 1.0) as f64).sqrt(), "rsqrt");
        close(s[4], a.exp(), "exp");
        close(s[5], ((x[k].abs() + 0.5) as f64).ln(), "log");
        assert_eq!(s[6], a.abs(), "abs");
        assert_eq!(s[7], if a < 0.0 { -b } else { 2.0 * b }, "where with literals");
    }
    assert!(o[8 * n..].iter().all(|v| v.is_nan()), "past the end");
}

#[test]
fn integer_functions_and_cdiv() {
    let m = module();
    let mut rng = rng();
    let n = 77usize;
    for d in [1i32, 3, 8] {
        let x: Vec<i32> = (0..n).map(|_| rng.random_range(-100_000..100_000)).collect();
        let case = Case::new(
            "int_fns",
            "*i32,*i32,i32,i32,16",
            n.div_ceil(16) as u32,
            vec![x.clone().into(), vec![POISON_I32; 5 * n].into(), (n as i32).into(), d.into()],
        );
        let out = diff(&m, &case);
        let o = out[1].data().to_i64s();
        for k in 0..n {
            let v = x[k];
            let want = [v.abs(), v.max(d), v.min(-d), (v.abs() + d - 1) / d, if v % 2 == 0 { v } else { 0 }];
            let got: Vec<i64> = o[5 * k..5 * k + 5].to_vec();
            assert_eq!(got, want.iter().map(|&w| w as i64).collect::<Vec<_>>(), "x = {v}, d = {d}");
        }
    }
}

#[test]
fn python_min_max_and_cdiv_on_scalars() {
    let m = module();
    for (a, b) in [(3, 9), (9, 3), (-20, -4), (0, 0), (-3, 100), (50, -50)] {
        let case = Case::new(
            "scalar_fns",
            "*i32,*i32,*i32",
            1,
            vec![vec![a].into(), vec![b].into(), vec![POISON_I32; 7].into()],
        );
        let out = diff(&m, &case);
        // tl.cdiv(a, 7) is (a + 6) // 7, with C division.
        let want =
            [a.min(b), a.max(b), a.max(0), (a + 6) / 7, 147, a.min(b).max(-5), POISON_I32].map(|w| w as i64);
        assert_eq!(out[2].data().to_i64s(), want.to_vec(), "a = {a}, b = {b}");
    }
}

#[test]
fn jit_functions_inlined_with_values_and_tuples() {
    let m = module();
    let mut rng = rng();
    for (rows, n, block) in [(1usize, 1usize, 1u32), (6, 50, 64), (3, 128, 128)] {
        let x: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-3.0..3.0)).collect();
        let case = Case::new(
            "jit_calls",
            &format!("*fp32,*fp32,*fp32,i32,{block}"),
            rows as u32,
            vec![
                x.clone().into(),
                vec![NAN32; rows * n].into(),
                vec![NAN32; 3 * rows].into(),
                (n as i32).into(),
            ],
        )
        .check(1, Check::Close { atol: 1e-5, rtol: 1e-5 })
        .check(2, Check::Close { atol: 1e-5, rtol: 1e-5 });
        let out = diff(&m, &case);
        for r in 0..rows {
            let row: Vec<f64> = x[r * n..(r + 1) * n].iter().map(|&v| v as f64).collect();
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let st = out[2].data().to_f64s();
            assert!((st[3 * r] - mean).abs() < 1e-5, "mean of row {r}: {} vs {mean}", st[3 * r]);
            assert!((st[3 * r + 1] - var).abs() < 1e-4, "var of row {r}: {} vs {var}", st[3 * r + 1]);
            assert!((st[3 * r + 2] - 2.0 * mean).abs() < 2e-5, "tuple element of row {r}: {}", st[3 * r + 2]);
            for c in 0..n {
                let norm = (row[c] - mean) / (var + 1e-5).sqrt();
                let want = norm.clamp(-1.0, 4.0) + row[c].clamp(0.0, 2.0);
                let got = out[1].data().get_f64(r * n + c);
                assert!((got - want).abs() < 1e-3, "({r}, {c}): {got} vs {want}");
            }
        }
    }
}

#[test]
fn static_assert_and_device_print() {
    let m = module();
    let n = 40usize;
    let x: Vec<i32> = (0..n as i32).collect();
    let case = Case::new(
        "checks_and_prints",
        "*i32,*i32,i32,16",
        n.div_ceil(16) as u32,
        vec![x.clone().into(), vec![POISON_I32; n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    assert_eq!(out[1].data().to_i64s(), (1..=n as i64).collect::<Vec<_>>());
    // A failing static_assert is a compile error with its message.
    let e = m.kernel("checks_and_prints", "*i32,*i32,i32,8").unwrap_err().to_string();
    assert!(e.contains("BLOCK is too small"), "{e}");
    let e = m.kernel("static_assert_fails", "*i32,4").unwrap_err().to_string();
    assert!(e.contains("BLOCK is too small"), "{e}");
    assert!(m.kernel("static_assert_fails", "*i32,32").is_ok());
}

#[test]
fn program_ids_and_grid_sizes_in_three_axes() {
    let m = module();
    for grid in [[1u32, 1, 1], [3, 5, 7], [17, 1, 2]] {
        let total = (grid[0] * grid[1] * grid[2]) as usize;
        let case = Case::new("grid_ids", "*i32", grid, vec![vec![POISON_I32; 4 * total].into()]);
        let out = diff(&m, &case);
        let o = out[0].data().to_i64s();
        let mut lin = 0;
        for z in 0..grid[2] as i64 {
            for y in 0..grid[1] as i64 {
                for x in 0..grid[0] as i64 {
                    let code = grid[0] as i64 * 10000 + grid[1] as i64 * 100 + grid[2] as i64;
                    assert_eq!(&o[4 * lin..4 * lin + 4], &[x, y, z, code], "program ({x}, {y}, {z})");
                    lin += 1;
                }
            }
        }
    }
}
