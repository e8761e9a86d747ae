//! The main job, as a host program embedding lnc: compile the seed's three layer-norm
//! kernels (forward; backward dx with partial dw/db under a spin lock; dwdb), run them on
//! generated data the way the tutorial's host code does, check them against float64
//! references and print the throughput.
//!
//! `cargo run --release -p lnc-examples --bin layer_norm [-- --quick]`

use std::time::Instant;

use rand::{Rng, SeedableRng};

const KERNELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/layer_norm.py");
const EPS: f32 = 1e-5;

/// The float64 reference: per row, y = (x - mean) / sqrt(var + eps) * w + b.
fn reference(x: &[f32], w: &[f32], b: &[f32], n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut y, mut mean, mut rstd) = (vec![0.0; m * n], vec![0.0; m], vec![0.0; m]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + EPS as f64).sqrt();
        for c in 0..n {
            y[r * n + c] = (row[c] as f64 - mu) * rs * w[c] as f64 + b[c] as f64;
        }
        mean[r] = mu;
        rstd[r] = rs;
    }
    (y, mean, rstd)
}

/// dx, dw, db in float64.
fn backward_reference(x: &[f32], w: &[f32], dy: &[f32], n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = x.len() / n;
    let (mut dx, mut dw, mut db) = (vec![0.0; m * n], vec![0.0; n], vec![0.0; n]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + EPS as f64).sqrt();
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mu) * rs).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] as f64 * dy[r * n + c] as f64).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        for c in 0..n {
            dx[r * n + c] = (wdy[c] - (xhat[c] * c1 + c2)) * rs;
            dw[c] += dy[r * n + c] as f64 * xhat[c];
            db[c] += dy[r * n + c] as f64;
        }
    }
    (dx, dw, db)
}

/// The tutorial's GROUP_SIZE_M for a row length.
fn group_size_m(n: usize) -> usize {
    match n {
        0..=1024 => 256,
        1025..=4096 => 128,
        4097..=8192 => 96,
        _ => 64,
    }
}

/// Largest error relative to the largest reference magnitude (for sums over many rows).
fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1.0f64, |a, &b| a.max(b.abs()));
    max_err(got, want) / scale
}

fn max_err(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| if g.is_nan() { f64::INFINITY } else { (g as f64 - w).abs() })
        .fold(0.0, f64::max)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let jit = lnc::Jit::new();
    let module = jit.load(KERNELS)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let sizes: &[(usize, usize)] = if quick {
        &[(151, 1000), (4096, 1024)]
    } else {
        &[(151, 1000), (4096, 512), (4096, 1000), (4096, 2048), (4096, 4096), (4096, 8192)]
    };

    println!(
        "layer norm (seed kernels of Triton tutorial 05), fp32, {} threads",
        rayon::current_num_threads()
    );
    println!(
        "{:>6} {:>6} {:>9} {:>10} {:>9} {:>8} | {:>10} {:>9} {:>8}",
        "M", "N", "compile", "fwd err", "fwd time", "GB/s", "bwd err", "bwd time", "GB/s"
    );
    let mut failed = false;
    let reps = if quick { 10 } else { 30 };
    for &(m, n) in sizes {
        let block = n.next_power_of_two();
        let group = group_size_m(n);
        let t = Instant::now();
        let fwd = module.kernel(
            "_layer_norm_fwd_fused",
            &format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}"),
        )?;
        let dx_k = module.kernel(
            "_layer_norm_bwd_dx_fused",
            &format!(
                "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}"
            ),
        )?;
        let dwdb = module.kernel("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128")?;
        let compile = t.elapsed();

        let x: Vec<f32> = (0..m * n).map(|_| -2.3 + 0.5 * (rng.random::<f32>() * 2.0 - 1.0)).collect();
        let w: Vec<f32> = (0..n).map(|_| rng.random::<f32>()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.random::<f32>() - 0.5).collect();
        let dy: Vec<f32> = (0..m * n).map(|_| 0.1 * (rng.random::<f32>() * 2.0 - 1.0)).collect();
        // Poisoned outputs: an element a kernel forgets to write shows up as NaN.
        let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
        let (mut dx, mut dw, mut db) = (vec![f32::NAN; m * n], vec![f32::NAN; n], vec![f32::NAN; n]);
        let (mut pdw, mut pdb) = (vec![f32::NAN; group * n], vec![f32::NAN; group * n]);
        let mut locks = vec![0i32; 2 * group];
        // Partial buffers no row maps to are never written: sum only the used ones.
        let rows = group.min(m) as i32;

        fwd.launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, EPS])?;
        dx_k.launch(
            m as u32,
            &lnc::args![
                &mut dx, &dy, &mut pdw, &mut pdb, &x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32,
                EPS
            ],
        )?;
        dwdb.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &pdb, &mut dw, &mut db, rows, n as i32])?;

        let (ry, rmean, rrstd) = reference(&x, &w, &b, n);
        let fwd_err =
            max_err(&y, &ry).max(max_err(&mean, &rmean)).max(max_err(&rstd, &rrstd) / rrstd[0].abs());
        let (rdx, rdw, rdb) = backward_reference(&x, &w, &dy, n);
        let bwd_err = max_err(&dx, &rdx).max(rel_err(&dw, &rdw)).max(rel_err(&db, &rdb));
        let ok = fwd_err <= 1e-4 && bwd_err <= 1e-4;
        failed |= !ok;

        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            fwd.launch(
                m as u32,
                &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, EPS],
            )?;
            times.push(t.elapsed().as_secs_f64());
        }
        let tf = median(&mut times);
        times.clear();
        for _ in 0..reps {
            // The tutorial zeroes the locks before each backward; that is not timed.
            locks.iter_mut().for_each(|l| *l = 0);
            let t = Instant::now();
            dx_k.launch(
                m as u32,
                &lnc::args![
                    &mut dx, &dy, &mut pdw, &mut pdb, &x, &w, &b, &mean, &rstd, &mut locks, n as i32,
                    n as i32, EPS
                ],
            )?;
            dwdb.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &pdb, &mut dw, &mut db, rows, n as i32])?;
            times.push(t.elapsed().as_secs_f64());
        }
        let tb = median(&mut times);
        let bytes = (m * n * 4) as f64;
        println!(
            "{m:>6} {n:>6} {:>7.2}ms {fwd_err:>10.1e} {:>7.3}ms {:>8.2} | {bwd_err:>10.1e} {:>7.3}ms {:>8.2}{}",
            compile.as_secs_f64() * 1e3,
            tf * 1e3,
            2.0 * bytes / tf / 1e9,
            tb * 1e3,
            3.0 * bytes / tb / 1e9,
            if ok { "" } else { "  MISMATCH" }
        );
    }
    if failed {
        return Err("results differ from the float64 reference".into());
    }
    println!(
        "all results match the float64 references (max error <= 1e-4; dw/db relative to their largest value)"
    );
    println!(
        "GB/s as Triton counts them: forward 2*M*N*4 bytes, backward 3*M*N*4 bytes per launch (median of {reps} runs)"
    );
    Ok(())
}
