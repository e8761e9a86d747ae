//! Tenstorrent ttnn's distributed layer norm, the host playing the devices: the last axis
//! of x [M, N] is split over D shards of unequal widths (D = 1, 2, 4, 8); each "device"
//! computes the partial statistics of its shard (`layer_norm_pre_all_gather`, a launch of
//! its own), the host all-gathers them, each device normalizes its shard with the gathered
//! statistics (`layer_norm_post_all_gather`), and the reassembled output is checked
//! against the unsharded layer norm (`Nn::layer_norm`) and a float64 reference.
//!
//! `cargo run --release -p lnc-examples --bin distributed_layer_norm`
//!
//! Exits with an error when a sharded result is further from the unsharded one than the
//! storage precision allows.

use half::bf16;
use lnc_nn::{Float, Nn, TTNN_EPS, all_gather_stats};
use rand::{Rng, SeedableRng};

const SEED: u64 = 0x0d15_7a1e;

/// The column bounds of `d` shards of `n` columns with widths proportional to 1, 2, …, d.
fn unequal_bounds(n: usize, d: usize) -> Vec<usize> {
    let total = d * (d + 1) / 2;
    (0..=d).map(|k| n * (k * (k + 1) / 2) / total).collect()
}

/// A storage type of the example: converted from and to f64 for data and errors.
trait Storage: Float {
    /// Tolerance of the sharded result against the unsharded one, relative to |y|: the two
    /// variance forms differ by a few fp32 ulps (the data below has E[x²]/var ≈ 1.3), then
    /// both round to the storage type.
    const REL_TOL: f64;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Storage for f32 {
    const REL_TOL: f64 = 1e-5;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Storage for bf16 {
    // Two roundings to bf16 apart at most: 2 · 2^-8.
    const REL_TOL: f64 = 2.0 / 256.0;
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
}

/// The distributed layer norm over the shards `bounds` of rows of `n`.
fn sharded<T: Storage>(
    nn: &Nn,
    x: &[T],
    n: usize,
    w: &[T],
    b: &[T],
    bounds: &[usize],
) -> lnc_nn::Result<Vec<T>> {
    // Each device holds its columns of x, weight and bias, contiguous.
    let shards: Vec<(usize, usize, Vec<T>)> = bounds
        .windows(2)
        .map(|c| (c[0], c[1], x.chunks(n).flat_map(|row| row[c[0]..c[1]].to_vec()).collect()))
        .collect();
    // Step 1, on every device: Σx and Σx² of its part of each row, [M, 2].
    let mut stats = Vec::with_capacity(shards.len());
    for (c0, c1, xs) in &shards {
        stats.push(nn.layer_norm_pre_all_gather(xs, c1 - c0)?);
    }
    // Step 2, the all-gather: every device receives the [M, D, 2] statistics.
    let gathered = all_gather_stats(&stats)?;
    // Step 3, on every device: normalize its shard; the host reassembles the rows.
    let mut y = vec![T::default(); x.len()];
    for (c0, c1, xs) in &shards {
        let (c0, c1) = (*c0, *c1);
        let ys = nn.layer_norm_post_all_gather(
            xs,
            c1 - c0,
            &gathered,
            n,
            Some(&w[c0..c1]),
            Some(&b[c0..c1]),
            TTNN_EPS,
        )?;
        for (row, part) in y.chunks_mut(n).zip(ys.chunks(c1 - c0)) {
            row[c0..c1].copy_from_slice(part);
        }
    }
    Ok(y)
}

/// Runs every D for one storage type; returns whether all matched.
fn run<T: Storage>(nn: &Nn, rng: &mut rand::rngs::StdRng, m: usize, n: usize) -> lnc_nn::Result<bool> {
    let mut draw = |len: usize, mean: f64, spread: f64| -> Vec<T> {
        (0..len).map(|_| T::from_f64(mean + spread * (2.0 * rng.random::<f64>() - 1.0))).collect()
    };
    let x = draw(m * n, 0.8, 2.5);
    let w = draw(n, 1.0, 0.5);
    let b = draw(n, 0.0, 0.5);
    let unsharded = nn.layer_norm(&x, n, &w, &b, TTNN_EPS)?;

    // The float64 layer norm of the same (rounded) values.
    let mut reference = Vec::with_capacity(m * n);
    for row in x.chunks(n) {
        let row: Vec<f64> = row.iter().map(|v| v.to_f64()).collect();
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + TTNN_EPS as f64).sqrt();
        reference
            .extend(row.iter().enumerate().map(|(c, v)| (v - mean) * rstd * w[c].to_f64() + b[c].to_f64()));
    }

    let mut all_ok = true;
    for d in [1, 2, 4, 8] {
        let bounds = unequal_bounds(n, d);
        let widths: Vec<usize> = bounds.windows(2).map(|c| c[1] - c[0]).collect();
        let y = sharded(nn, &x, n, &w, &b, &bounds)?;
        let (mut vs_unsharded, mut vs_f64, mut ok) = (0.0f64, 0.0f64, true);
        for ((g, u), r) in y.iter().zip(&unsharded.y).zip(&reference) {
            let (g, u) = (g.to_f64(), u.to_f64());
            let e = (g - u).abs();
            ok &= e <= T::REL_TOL * u.abs() + 1e-5;
            vs_unsharded = vs_unsharded.max(e);
            vs_f64 = vs_f64.max((g - r).abs());
        }
        all_ok &= ok;
        println!(
            "{:>5} D = {d}  widths {:<40} max |sharded - unsharded| {vs_unsharded:.2e}  max |sharded - float64| {vs_f64:.2e}{}",
            T::SIG,
            format!("{widths:?}"),
            if ok { "" } else { "  MISMATCH" }
        );
    }
    Ok(all_ok)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nn = Nn::new(lnc::Jit::new())?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let (m, n) = (256, 4099);
    println!(
        "distributed layer norm (ttnn pre/post all-gather), x [{m}, {n}], eps {TTNN_EPS:e}, seed {SEED:#x}"
    );
    let ok = run::<f32>(&nn, &mut rng, m, n)? & run::<bf16>(&nn, &mut rng, m, n)?;
    if !ok {
        return Err("a sharded layer norm differs from the unsharded one".into());
    }
    println!("every sharding matches the unsharded layer norm");
    Ok(())
}
