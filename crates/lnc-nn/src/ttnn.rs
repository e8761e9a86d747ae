//! Tenstorrent ttnn's distributed layer norm (`kernels/ttnn_distributed.py`): the last axis
//! of `x [M, N]` is split into D shards (of any widths); each shard's `Σx` and `Σx²` per row
//! ([`Nn::layer_norm_pre_all_gather`]) are all-gathered ([`all_gather_stats`]) and every
//! shard is normalized with the combined statistics ([`Nn::layer_norm_post_all_gather`]).
//! Each call is a launch of its own, as on separate devices; the host plays the all-gather.

use crate::util::{chunk, expect_affine, int, launch, py, rows};
use crate::{Error, Float, Nn, Result};

/// ttnn's default epsilon for `layer_norm_post_all_gather` (`epsilon=1e-12`). Below fp32's
/// resolution of any variance of order 1, it matters only when the variance is (or cancels
/// to) 0: `rstd` is then 1e6 instead of infinity.
pub const TTNN_EPS: f32 = 1e-12;

impl Nn {
    /// `ttnn.layer_norm_pre_all_gather`: the partial statistics of a shard `x_shard`
    /// (`[M, width]`, row-major): `[M, 2]` in `f32`, `Σx` then `Σx²` of each row's
    /// `width` elements, summed in `fp32` lanes of [`CHUNK`](crate::CHUNK) (fewer for a
    /// narrower shard).
    pub fn layer_norm_pre_all_gather<T: Float>(&self, x_shard: &[T], width: usize) -> Result<Vec<f32>> {
        let rows = rows("the shard of x", x_shard.len(), width)?;
        let t = T::SIG;
        let k = self.ttnn.kernel("pre_all_gather", &format!("*{t},*fp32,i32,i32,{}", chunk(width)))?;
        let mut stats = vec![0.0f32; 2 * rows];
        let w32 = int(width)?;
        launch(&k, rows, &lnc::args![x_shard, &mut stats, w32, w32])?;
        Ok(stats)
    }

    /// `ttnn.layer_norm_post_all_gather`: normalizes the shard `x_shard` (`[M, width]`) of
    /// rows of `n` elements in all, with `stats`, the gathered `[M, D, 2]` statistics of
    /// the D shards ([`all_gather_stats`]): `mean = Σ_d Σx / n`, `var = Σ_d Σx² / n -
    /// mean²` (clamped at 0), `y = (x - mean) / sqrt(var + eps) [· weight [+ bias]]`, with
    /// `weight` and `bias` this shard's `width` columns. ttnn applies a bias only with a
    /// weight; pass [`TTNN_EPS`] for ttnn's default `eps`.
    ///
    /// The variance is `E[x²] - E[x]²`, the only form the gathered sums allow: it loses
    /// accuracy when a row's mean is large against its spread (`docs/numerics.md`).
    #[allow(clippy::too_many_arguments, reason = "ttnn's parameters, one for one")]
    pub fn layer_norm_post_all_gather<T: Float>(
        &self,
        x_shard: &[T],
        width: usize,
        stats: &[f32],
        n: usize,
        weight: Option<&[T]>,
        bias: Option<&[T]>,
        eps: f32,
    ) -> Result<Vec<T>> {
        let rows = rows("the shard of x", x_shard.len(), width)?;
        if n < width {
            return Err(Error::Shape(format!("rows of {n} elements cannot have a shard {width} wide")));
        }
        expect_affine(["weight", "bias"], [weight, bias], width, "the shard's width")?;
        if bias.is_some() && weight.is_none() {
            return Err(Error::Shape("ttnn applies a bias only with a weight".into()));
        }
        let mut y = vec![T::default(); x_shard.len()];
        if rows == 0 {
            return Ok(y);
        }
        if stats.is_empty() || !stats.len().is_multiple_of(2 * rows) {
            return Err(Error::Shape(format!(
                "stats has {} elements: expected [M, D, 2] gathered statistics, M = {rows}",
                stats.len()
            )));
        }
        let d = stats.len() / (2 * rows);
        let t = T::SIG;
        let sig = format!(
            "*{t},*{t},*fp32,*{t},*{t},i32,i32,i32,i32,i32,fp32,{},{},{}",
            py(weight.is_some()),
            py(bias.is_some()),
            chunk(width)
        );
        let k = self.ttnn.kernel("post_all_gather", &sig)?;
        // Without the term the kernel never reads the parameter: an empty buffer stands in.
        let (weight, bias) = (weight.unwrap_or(&[]), bias.unwrap_or(&[]));
        let w32 = int(width)?;
        launch(
            &k,
            rows,
            &lnc::args![x_shard, &mut y, stats, weight, bias, w32, w32, w32, int(n)?, int(d)?, eps],
        )?;
        Ok(y)
    }
}

/// The all-gather of the distributed layer norm, on the host: the `[M, 2]` statistics of
/// each of the D shards, in shard order, into the `[M, D, 2]` tensor that
/// [`Nn::layer_norm_post_all_gather`] takes.
pub fn all_gather_stats<S: AsRef<[f32]>>(shards: &[S]) -> Result<Vec<f32>> {
    let len = shards.first().map(|s| s.as_ref().len()).unwrap_or(0);
    if shards.is_empty() || !len.is_multiple_of(2) || shards.iter().any(|s| s.as_ref().len() != len) {
        let lens: Vec<usize> = shards.iter().map(|s| s.as_ref().len()).collect();
        return Err(Error::Shape(format!(
            "statistics of {lens:?} elements: expected one or more shards of the same [M, 2]"
        )));
    }
    let (rows, d) = (len / 2, shards.len());
    let mut gathered = vec![0.0f32; rows * d * 2];
    for (k, s) in shards.iter().enumerate() {
        for (r, pair) in s.as_ref().chunks_exact(2).enumerate() {
            gathered[(r * d + k) * 2..(r * d + k) * 2 + 2].copy_from_slice(pair);
        }
    }
    Ok(gathered)
}
