//! The main job, as a host program embedding lnc: compile the seed's layer-norm forward
//! kernel, run it on generated data, check it against a float64 reference and print the
//! throughput.
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
        "layer norm forward (seed kernel _layer_norm_fwd_fused), fp32, {} threads",
        rayon::current_num_threads()
    );
    println!("{:>6} {:>6} {:>10} {:>12} {:>10} {:>10}", "M", "N", "compile", "max |err|", "time", "GB/s");
    let mut failed = false;
    for &(m, n) in sizes {
        let block = n.next_power_of_two();
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
        let t = Instant::now();
        let k = module.kernel("_layer_norm_fwd_fused", &sig)?;
        let compile = t.elapsed();

        let x: Vec<f32> = (0..m * n).map(|_| -2.3 + 0.5 * rng.random::<f32>() * 2.0).collect();
        let w: Vec<f32> = (0..n).map(|_| rng.random::<f32>()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.random::<f32>() - 0.5).collect();
        // Poisoned outputs: an element the kernel forgets to write shows up as NaN.
        let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
        k.launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, EPS])?;

        let (ry, rmean, rrstd) = reference(&x, &w, &b, n);
        let err = max_err(&y, &ry).max(max_err(&mean, &rmean)).max(max_err(&rstd, &rrstd) / rrstd[0].abs());
        let ok = err <= 1e-4;
        failed |= !ok;

        let reps = if quick { 10 } else { 30 };
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            k.launch(
                m as u32,
                &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, EPS],
            )?;
            times.push(t.elapsed().as_secs_f64());
        }
        let t = median(&mut times);
        let gbps = 2.0 * (m * n * 4) as f64 / t / 1e9;
        println!(
            "{m:>6} {n:>6} {:>8.2}ms {err:>12.2e} {:>8.3}ms {gbps:>10.2}{}",
            compile.as_secs_f64() * 1e3,
            t * 1e3,
            if ok { "" } else { "  MISMATCH" }
        );
    }
    if failed {
        return Err("results differ from the float64 reference".into());
    }
    println!("all results match the float64 reference (max |err| <= 1e-4)");
    Ok(())
}
