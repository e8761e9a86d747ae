//! The hand-written Rust layer norm the benchmark compares lnc with, and a parallel copy.
//!
//! This is the code a good Rust programmer writes without reaching for intrinsics: rayon
//! over rows, every row processed while it is in cache (the statistics passes, then the
//! output pass), reductions with `LANES` independent accumulators over `chunks_exact` so
//! LLVM can keep them in vector registers (a single accumulator would serialize the adds:
//! float addition is not reassociated), elementwise loops as zipped slice iterators that
//! LLVM vectorizes. The math is the seed kernels' (two-pass mean and variance, the same
//! dx formula, dw/db partial sums per chunk of rows then summed).

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use rayon::prelude::*;

/// Independent accumulators per reduction: 16 fp32 lanes, 4 SSE registers. (On the
/// benchmark machine 8 to 64 perform alike within noise; what matters is one accumulator
/// array per loop, the form LLVM turns into full 4-lane vector code.)
const LANES: usize = 16;

/// `Σ x`.
#[inline]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

/// `Σ (x - mean)²`.
#[inline]
fn sum_sq_dev(x: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            let d = v - mean;
            *a += d * d;
        }
    }
    acc.iter().sum::<f32>() + tail.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>()
}

/// One row of the forward pass; returns (mean, rstd).
#[inline]
fn row_forward(x: &[f32], y: &mut [f32], w: &[f32], b: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = sum(x) / n;
    let var = sum_sq_dev(x, mean) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    for (((y, &x), &w), &b) in y.iter_mut().zip(x).zip(w).zip(b) {
        *y = (x - mean) * rstd * w + b;
    }
    (mean, rstd)
}

/// Layer norm forward of the rows of `x` (row length `w.len()`): `y`, and each row's mean
/// and 1/std, like the seed's `_layer_norm_fwd_fused`.
pub fn forward(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], mean: &mut [f32], rstd: &mut [f32], eps: f32) {
    let n = w.len();
    y.par_chunks_mut(n).zip(x.par_chunks(n)).zip(mean.par_iter_mut().zip(rstd.par_iter_mut())).for_each(
        |((y, x), (m, r))| {
            (*m, *r) = row_forward(x, y, w, b, eps);
        },
    );
}

/// Pass 1 of a backward row: `(Σ xhat·wdy / n, Σ wdy / n)`, the seed's `mean1` and `mean2`.
#[inline]
fn row_sums(x: &[f32], dy: &[f32], w: &[f32], mean: f32, rstd: f32) -> (f32, f32) {
    let n = x.len();
    // Pass 1: Σ xhat·wdy and Σ wdy, one reduction per loop (two accumulator arrays in one
    // loop come out as 2-lane shuffles instead of 4-lane vector code).
    let body = n - n % LANES;
    let (x_body, dy_body, w_body) = (&x[..body], &dy[..body], &w[..body]);
    let mut a1 = [0.0f32; LANES];
    for ((xc, dyc), wc) in
        x_body.chunks_exact(LANES).zip(dy_body.chunks_exact(LANES)).zip(w_body.chunks_exact(LANES))
    {
        for (((a, &x), &dy), &w) in a1.iter_mut().zip(xc).zip(dyc).zip(wc) {
            *a += (x - mean) * rstd * (w * dy);
        }
    }
    let mut a2 = [0.0f32; LANES];
    for (dyc, wc) in dy_body.chunks_exact(LANES).zip(w_body.chunks_exact(LANES)) {
        for ((a, &dy), &w) in a2.iter_mut().zip(dyc).zip(wc) {
            *a += w * dy;
        }
    }
    let (mut s1, mut s2) = (a1.iter().sum::<f32>(), a2.iter().sum::<f32>());
    for ((&x, &dy), &w) in x[body..].iter().zip(&dy[body..]).zip(&w[body..]) {
        let xhat = (x - mean) * rstd;
        let wdy = w * dy;
        s1 += xhat * wdy;
        s2 += wdy;
    }
    (s1 / n as f32, s2 / n as f32)
}

/// One row of the backward pass: writes dx, adds this row's terms to dw and db.
#[allow(clippy::too_many_arguments)]
#[inline]
fn row_backward(
    x: &[f32],
    dy: &[f32],
    w: &[f32],
    mean: f32,
    rstd: f32,
    dx: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
) {
    let (c1, c2) = row_sums(x, dy, w, mean, rstd);
    // Pass 2: dx, and the partial dw/db.
    for (((((dx, &x), &dy), &w), dw), db) in dx.iter_mut().zip(x).zip(dy).zip(w).zip(dw).zip(db) {
        let xhat = (x - mean) * rstd;
        let wdy = w * dy;
        *dx = (wdy - (xhat * c1 + c2)) * rstd;
        *dw += dy * xhat;
        *db += dy;
    }
}

/// Layer norm backward given the forward's mean and rstd: `dx`, and `dw`, `db` summed over
/// rows. Rows are split into `chunks` contiguous chunks; each accumulates its own dw/db in
/// cache, and the partial sums are added at the end.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    x: &[f32],
    dy: &[f32],
    w: &[f32],
    mean: &[f32],
    rstd: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    chunks: usize,
) {
    let n = w.len();
    let rows = mean.len();
    let per = rows.div_ceil(chunks.max(1)).max(1);
    let partials: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(per * n)
        .zip(x.par_chunks(per * n))
        .zip(dy.par_chunks(per * n))
        .zip(mean.par_chunks(per).zip(rstd.par_chunks(per)))
        .map(|(((dx, x), dy), (mean, rstd))| {
            let (mut pdw, mut pdb) = (vec![0.0f32; n], vec![0.0f32; n]);
            for ((((dx, x), dy), &m), &r) in
                dx.chunks_exact_mut(n).zip(x.chunks_exact(n)).zip(dy.chunks_exact(n)).zip(mean).zip(rstd)
            {
                row_backward(x, dy, w, m, r, dx, &mut pdw, &mut pdb);
            }
            (pdw, pdb)
        })
        .collect();
    dw.fill(0.0);
    db.fill(0.0);
    for (pdw, pdb) in &partials {
        for (d, p) in dw.iter_mut().zip(pdw) {
            *d += p;
        }
        for (d, p) in db.iter_mut().zip(pdb) {
            *d += p;
        }
    }
}

/// A pointer shared by the workers of [`backward_grouped`]; each writes disjoint rows, or
/// rows it holds the lock of.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see the type's docs; every access goes through rows a worker owns at the time.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The row of length `n` at `row` (a method, so closures capture the whole `Shared`).
    ///
    /// # Safety
    /// No other worker accesses that row meanwhile.
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, row: usize, n: usize) -> &mut [f32] {
        unsafe { std::slice::from_raw_parts_mut(self.0.add(row * n), n) }
    }
}

/// The seed's backward algorithm written in Rust, to tell the algorithm's cost from the
/// compiler's: every row adds its dw/db terms into one of `group` partial rows
/// (`row % group`) under a spin lock, the first row of a group storing instead of adding,
/// and [`sum_partials`] then sums the partial rows by column (the dwdb kernel). Rows go
/// to the workers in chunks of [`lnc_runtime::MAX_SYNC_CHUNK`] from a shared counter, as lnc's
/// runtime does (rayon's halving would put both threads on the same lock at every step
/// when `group` divides M/2). `locks` holds `2 * group` zeros: the locks, then the groups'
/// first-store flags.
#[allow(clippy::too_many_arguments)]
pub fn backward_grouped(
    x: &[f32],
    dy: &[f32],
    w: &[f32],
    mean: &[f32],
    rstd: &[f32],
    dx: &mut [f32],
    pdw: &mut [f32],
    pdb: &mut [f32],
    locks: &[AtomicI32],
    group: usize,
) {
    const CHUNK: usize = lnc_runtime::MAX_SYNC_CHUNK as usize;
    let n = w.len();
    let rows = mean.len();
    assert!(
        dx.len() == rows * n && pdw.len() == group * n && pdb.len() == group * n && locks.len() == 2 * group
    );
    let next = AtomicUsize::new(0);
    let (dxp, dwp, dbp) = (Shared(dx.as_mut_ptr()), Shared(pdw.as_mut_ptr()), Shared(pdb.as_mut_ptr()));
    rayon::broadcast(|_| {
        let mut tmp = vec![0.0f32; n];
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= rows {
                break;
            }
            for row in start..(start + CHUNK).min(rows) {
                let (x, dy) = (&x[row * n..][..n], &dy[row * n..][..n]);
                let (m, r) = (mean[row], rstd[row]);
                // SAFETY: row `row` of dx belongs to this worker alone.
                let dx = unsafe { dxp.row(row, n) };
                let (c1, c2) = row_sums(x, dy, w, m, r);
                for ((((dx, t), &x), &dy), &w) in dx.iter_mut().zip(&mut tmp).zip(x).zip(dy).zip(w) {
                    let xhat = (x - m) * r;
                    let wdy = w * dy;
                    *dx = (wdy - (xhat * c1 + c2)) * r;
                    *t = dy * xhat;
                }
                let g = row % group;
                while locks[g].compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
                    std::hint::spin_loop();
                }
                // SAFETY: partial row `g` is only touched under lock `g`, which this worker holds.
                let (dw, db) = unsafe { (dwp.row(g, n), dbp.row(g, n)) };
                if locks[group + g].load(Ordering::Relaxed) == 0 {
                    locks[group + g].store(1, Ordering::Relaxed);
                    dw.copy_from_slice(&tmp);
                    db.copy_from_slice(dy);
                } else {
                    for (d, &t) in dw.iter_mut().zip(&tmp) {
                        *d += t;
                    }
                    for (d, &v) in db.iter_mut().zip(dy) {
                        *d += v;
                    }
                }
                locks[g].store(0, Ordering::Release);
            }
        }
    });
}

/// Column sums of `group` partial rows of length `n` (the seed's dwdb kernel).
pub fn sum_partials(pdw: &[f32], pdb: &[f32], dw: &mut [f32], db: &mut [f32]) {
    let n = dw.len();
    const COLS: usize = 256;
    let sum = |p: &[f32], out: &mut [f32]| {
        out.par_chunks_mut(COLS).enumerate().for_each(|(j, out)| {
            out.fill(0.0);
            for row in p.chunks_exact(n) {
                for (o, &v) in out.iter_mut().zip(&row[j * COLS..]) {
                    *o += v;
                }
            }
        })
    };
    sum(pdw, dw);
    sum(pdb, db);
}

/// A parallel copy of the same bytes as the forward pass (read `x`, write `y`), in pieces
/// of whole rows of at least [`COPY_PIECE`] bytes (but the last, shorter when the rows
/// run out).
///
/// Row by row, rows of 2 KiB or less took glibc's `memcpy` path for small sizes, which
/// moved them at half the speed of rows of 2.1 KiB (measured, one thread, caches flushed:
/// 10.2 GB/s at N = 512, 20.5 GB/s at N = 544), so the copy's speed depended on N.
pub fn copy(x: &[f32], y: &mut [f32], n: usize) {
    let rows = COPY_PIECE.div_ceil(n.max(1) * size_of::<f32>()).max(1);
    let piece = rows * n.max(1);
    y.par_chunks_mut(piece).zip(x.par_chunks(piece)).for_each(|(y, x)| y.copy_from_slice(x));
}

/// The least bytes [`copy`] hands to one `copy_from_slice`, but for the last piece.
pub const COPY_PIECE: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_forward(x: &[f32], w: &[f32], b: &[f32]) -> Vec<f64> {
        let n = w.len();
        let mut y = Vec::new();
        for row in x.chunks(n) {
            let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
            let rs = 1.0 / (var + 1e-5).sqrt();
            y.extend(
                row.iter().zip(w).zip(b).map(|((&v, &w), &b)| (v as f64 - mu) * rs * w as f64 + b as f64),
            );
        }
        y
    }

    #[test]
    fn forward_matches_float64() {
        for (m, n) in [(3usize, 1usize), (5, 31), (7, 100), (4, 1000)] {
            let x: Vec<f32> = (0..m * n).map(|i| ((i * 7919) % 113) as f32 * 0.01 - 0.5).collect();
            let w: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 5) as f32 * 0.1).collect();
            let (mut y, mut mean, mut rstd) = (vec![0.0; m * n], vec![0.0; m], vec![0.0; m]);
            forward(&x, &w, &b, &mut y, &mut mean, &mut rstd, 1e-5);
            for (g, r) in y.iter().zip(reference_forward(&x, &w, &b)) {
                assert!((*g as f64 - r).abs() < 1e-4 * (1.0 + r.abs()), "{m}x{n}: {g} vs {r}");
            }
        }
    }

    #[test]
    fn backward_matches_float64() {
        let (m, n) = (9usize, 70usize);
        let x: Vec<f32> = (0..m * n).map(|i| ((i * 7919) % 113) as f32 * 0.01 - 0.5).collect();
        let dy: Vec<f32> = (0..m * n).map(|i| ((i * 104_729) % 97) as f32 * 0.002 - 0.1).collect();
        let w: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
        let b = vec![0.0f32; n];
        let (mut y, mut mean, mut rstd) = (vec![0.0; m * n], vec![0.0; m], vec![0.0; m]);
        forward(&x, &w, &b, &mut y, &mut mean, &mut rstd, 1e-5);
        let (mut dx, mut dw, mut db) = (vec![0.0; m * n], vec![0.0; n], vec![0.0; n]);
        backward(&x, &dy, &w, &mean, &rstd, &mut dx, &mut dw, &mut db, 4);
        // float64 reference of the same formulas.
        let (mut rdw, mut rdb) = (vec![0.0f64; n], vec![0.0f64; n]);
        for r in 0..m {
            let row = &x[r * n..(r + 1) * n];
            let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
            let rs = 1.0 / (var + 1e-5).sqrt();
            let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mu) * rs).collect();
            let wdy: Vec<f64> = (0..n).map(|c| w[c] as f64 * dy[r * n + c] as f64).collect();
            let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
            let c2 = wdy.iter().sum::<f64>() / n as f64;
            for c in 0..n {
                let want = (wdy[c] - (xhat[c] * c1 + c2)) * rs;
                let got = dx[r * n + c] as f64;
                assert!((got - want).abs() < 1e-4 * (1.0 + want.abs()), "dx[{r},{c}]: {got} vs {want}");
                rdw[c] += dy[r * n + c] as f64 * xhat[c];
                rdb[c] += dy[r * n + c] as f64;
            }
        }
        for c in 0..n {
            assert!((dw[c] as f64 - rdw[c]).abs() < 1e-4, "dw[{c}]");
            assert!((db[c] as f64 - rdb[c]).abs() < 1e-4, "db[{c}]");
        }
        // The seed's algorithm gives the same results for any number of partial rows up to
        // the row count (each partial row written, so the NaN poison never reaches dw/db).
        for group in [1usize, 4, 9] {
            let mut gdx = vec![f32::NAN; m * n];
            let (mut pdw, mut pdb) = (vec![f32::NAN; group * n], vec![f32::NAN; group * n]);
            let locks: Vec<AtomicI32> = (0..2 * group).map(|_| AtomicI32::new(0)).collect();
            backward_grouped(&x, &dy, &w, &mean, &rstd, &mut gdx, &mut pdw, &mut pdb, &locks, group);
            let (mut gdw, mut gdb) = (vec![f32::NAN; n], vec![f32::NAN; n]);
            sum_partials(&pdw, &pdb, &mut gdw, &mut gdb);
            for (i, (g, r)) in gdx.iter().zip(&dx).enumerate() {
                assert!((g - r).abs() <= 1e-6 * (1.0 + r.abs()), "group {group}: dx[{i}] {g} vs {r}");
            }
            for c in 0..n {
                assert!((gdw[c] as f64 - rdw[c]).abs() < 1e-4, "group {group}: dw[{c}]");
                assert!((gdb[c] as f64 - rdb[c]).abs() < 1e-4, "group {group}: db[{c}]");
            }
            assert!(locks.iter().take(group).all(|l| l.load(Ordering::Relaxed) == 0), "a lock left held");
        }
    }

    #[test]
    fn copy_copies() {
        // Rows shorter and longer than a piece, and a last piece of fewer rows.
        for (rows, n) in [(5usize, 12usize), (4099, 7), (3, 20000)] {
            let x: Vec<f32> = (0..rows * n).map(|i| i as f32).collect();
            let mut y = vec![f32::NAN; rows * n];
            copy(&x, &mut y, n);
            assert_eq!(x, y, "{rows} x {n}");
        }
    }
}
