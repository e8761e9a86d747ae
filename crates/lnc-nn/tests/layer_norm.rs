//! The Triton-style layer norm through `lnc_nn::Nn`: forward and backward against float64
//! references, fp32 and fp16 storage, row lengths that are not multiples of the tile.

use half::f16;
use lnc_nn::{Float, Nn};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn reference(x: &[f64], n: usize, w: &[f64], b: &[f64], eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut mean, mut rstd) = (Vec::new(), Vec::new(), Vec::new());
    for row in x.chunks(n) {
        let mu = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + eps).sqrt();
        y.extend(row.iter().zip(w).zip(b).map(|((v, w), b)| (v - mu) * rs * w + b));
        mean.push(mu);
        rstd.push(rs);
    }
    (y, mean, rstd)
}

/// dx, dw, db of the layer norm in float64.
fn reference_backward(dy: &[f64], x: &[f64], n: usize, w: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut dx, mut dw, mut db) = (Vec::new(), vec![0.0; n], vec![0.0; n]);
    for (row, g) in x.chunks(n).zip(dy.chunks(n)) {
        let mu = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + 1e-5).sqrt();
        let xhat: Vec<f64> = row.iter().map(|v| (v - mu) * rs).collect();
        let wdy: Vec<f64> = g.iter().zip(w).map(|(g, w)| g * w).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        dx.extend(xhat.iter().zip(&wdy).map(|(xh, wd)| (wd - (xh * c1 + c2)) * rs));
        for k in 0..n {
            dw[k] += g[k] * xhat[k];
            db[k] += g[k];
        }
    }
    (dx, dw, db)
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
    }
}

fn check<T: Float>(to: fn(f64) -> T, from: fn(T) -> f64, tol: f64) {
    let nn = Nn::new(lnc::Jit::new()).expect("the kernels parse");
    let mut rng = StdRng::seed_from_u64(7);
    for (rows, n) in [(1, 1), (37, 17), (5, 1000), (3, 1537)] {
        let draw = |rng: &mut StdRng, len: usize, lo: f64, hi: f64| -> Vec<T> {
            (0..len).map(|_| to(rng.random_range(lo..hi))).collect()
        };
        let x = draw(&mut rng, rows * n, -3.0, 2.0);
        let w = draw(&mut rng, n, 0.5, 1.5);
        let b = draw(&mut rng, n, -0.5, 0.5);
        let dy = draw(&mut rng, rows * n, -0.1, 0.1);
        let f = |v: &[T]| v.iter().map(|&e| from(e)).collect::<Vec<f64>>();
        let out = nn.layer_norm(&x, n, &w, &b, 1e-5).unwrap_or_else(|e| panic!("{rows}x{n}: {e}"));
        let (y, mean, rstd) = reference(&f(&x), n, &f(&w), &f(&b), 1e-5);
        close(&format!("{} y {rows}x{n}", T::SIG), &f(&out.y), &y, tol);
        let wide = |v: &[f32]| v.iter().map(|&e| e as f64).collect::<Vec<f64>>();
        close("mean", &wide(&out.mean), &mean, 1e-5);
        close("rstd", &wide(&out.rstd), &rstd, 1e-4);
        if n == 1 {
            continue;
        }
        let g =
            nn.layer_norm_backward(&dy, &x, n, &w, &b, &out).unwrap_or_else(|e| panic!("{rows}x{n}: {e}"));
        let (dx, dw, db) = reference_backward(&f(&dy), &f(&x), n, &f(&w));
        close(&format!("{} dx {rows}x{n}", T::SIG), &f(&g.dx), &dx, tol);
        close(&format!("{} dw {rows}x{n}", T::SIG), &f(&g.dw), &dw, tol * rows as f64);
        close(&format!("{} db {rows}x{n}", T::SIG), &f(&g.db), &db, tol * rows as f64);
    }
}

#[test]
fn fp32_forward_and_backward_match_float64() {
    check::<f32>(|v| v as f32, |v| v as f64, 2e-5);
}

#[test]
fn fp16_forward_and_backward_match_float64() {
    check::<f16>(f16::from_f64, |v| v.to_f64(), 1e-2);
}

#[test]
fn bad_shapes_are_errors() {
    let nn = Nn::new(lnc::Jit::new()).expect("the kernels parse");
    let x = vec![0.0f32; 10];
    let e = nn.layer_norm(&x, 3, &[1.0; 3], &[0.0; 3], 1e-5).expect_err("10 is not rows of 3");
    assert!(e.to_string().contains("not rows of n = 3"), "{e}");
    let e = nn.layer_norm(&x, 5, &[1.0; 4], &[0.0; 5], 1e-5).expect_err("weight of 4");
    assert!(e.to_string().contains("weight has 4"), "{e}");
    let long = vec![0.0f32; 20000];
    let e = nn.layer_norm(&long, 20000, &long, &long, 1e-5).expect_err("too long for one block");
    assert!(e.to_string().contains("one block"), "{e}");
}
