//! Triton tutorial 05's layer norm: the forward (one block per row, or the chunked kernel
//! for rows past the one-block limit) and the backward, with the tutorial's host flow.

use crate::util::{CHUNK, expect_len, fit_block, int, launch, one_block, rows};
use crate::{Error, Float, Nn, Result};

/// What [`Nn::layer_norm`], [`Nn::ascend_layer_norm_rstd`] and [`Nn::trt_layer_norm`]
/// return: `y`, and each row's mean and `1/std`.
#[derive(Clone, Debug)]
pub struct LayerNormOut<T> {
    /// The normalized rows, scaled by the weight and shifted by the bias.
    pub y: Vec<T>,
    /// Each row's mean.
    pub mean: Vec<f32>,
    /// Each row's `1 / sqrt(var + eps)`.
    pub rstd: Vec<f32>,
}

/// What [`Nn::layer_norm_backward`] returns.
#[derive(Clone, Debug)]
pub struct LayerNormGrads<T> {
    /// The gradient of the input.
    pub dx: Vec<T>,
    /// The gradient of the weight.
    pub dw: Vec<T>,
    /// The gradient of the bias.
    pub db: Vec<T>,
}

impl Nn {
    /// Layer norm over the last axis of `x`, rows of `n` elements: `y = (x - mean) · rstd
    /// · w + b`, as the tutorial's `LayerNorm.forward`: one program per row, the row in one
    /// block of `next_power_of_two(n)` elements while that is at most
    /// [`MAX_ROW_BYTES`](crate::MAX_ROW_BYTES) of `T`. Longer rows, which the tutorial
    /// rejects (any length while `x` has fewer than 2³¹ elements; tested to 10⁶), go to
    /// `_layer_norm_fwd_long`, which walks the row in chunks of [`CHUNK`] three times
    /// (mean, then the variance around it, then y): the same two-pass statistics.
    pub fn layer_norm<T: Float>(
        &self,
        x: &[T],
        n: usize,
        w: &[T],
        b: &[T],
        eps: f32,
    ) -> Result<LayerNormOut<T>> {
        let rows = rows("x", x.len(), n)?;
        expect_len("weight", w.len(), n, "n")?;
        expect_len("bias", b.len(), n, "n")?;
        // Both kernels take (X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE).
        let t = T::SIG;
        let k = match one_block::<T>(n) {
            Some(block) => self.layer_norm.kernel(
                "_layer_norm_fwd_fused",
                &format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}"),
            )?,
            None => self.layer_norm_long.kernel(
                "_layer_norm_fwd_long",
                &format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{CHUNK}"),
            )?,
        };
        let mut out =
            LayerNormOut { y: vec![T::default(); x.len()], mean: vec![0.0; rows], rstd: vec![0.0; rows] };
        let n32 = int(n)?;
        launch(&k, rows, &lnc::args![x, &mut out.y, w, b, &mut out.mean, &mut out.rstd, n32, n32, eps])?;
        Ok(out)
    }

    /// The gradients of [`Nn::layer_norm`] given `dy` and the forward's mean and rstd (`fwd`), by
    /// the tutorial's host flow: `dx` and partial `dw`/`db` per group of rows (the
    /// tutorial's `GROUP_SIZE_M` for `n`, groups guarded by spin locks), then the column
    /// sums of the partials. Rows must fit one block (the tutorial's limit: there is no
    /// long-row backward).
    pub fn layer_norm_backward<T: Float>(
        &self,
        dy: &[T],
        x: &[T],
        n: usize,
        w: &[T],
        b: &[T],
        fwd: &LayerNormOut<T>,
    ) -> Result<LayerNormGrads<T>> {
        let rows = rows("x", x.len(), n)?;
        expect_len("weight", w.len(), n, "n")?;
        expect_len("bias", b.len(), n, "n")?;
        expect_len("dy", dy.len(), x.len(), "the length of x")?;
        let (mean, rstd) = (&fwd.mean, &fwd.rstd);
        if mean.len() != rows || rstd.len() != rows {
            return Err(Error::Shape(format!(
                "the forward's mean has {} elements and rstd {}: expected one per row, {rows}",
                mean.len(),
                rstd.len()
            )));
        }
        let block = fit_block::<T>("layer_norm_backward", n)?;
        let group = group_size_m(n);
        let t = T::SIG;
        let dx_sig =
            format!("*{t},*{t},*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}");
        let dwdb_sig = format!("*{t},*{t},*{t},*{t},i32,i32,32,128");
        let k_dx = self.layer_norm.kernel("_layer_norm_bwd_dx_fused", &dx_sig)?;
        let k_dwdb = self.layer_norm.kernel("_layer_norm_bwd_dwdb", &dwdb_sig)?;
        let mut grads = LayerNormGrads {
            dx: vec![T::default(); x.len()],
            dw: vec![T::default(); n],
            db: vec![T::default(); n],
        };
        // The tutorial's partial sums are of x's dtype, like its `_dw`/`_db` buffers.
        let (mut pdw, mut pdb) = (vec![T::default(); group * n], vec![T::default(); group * n]);
        let mut locks = vec![0i32; 2 * group];
        let n32 = int(n)?;
        launch(
            &k_dx,
            rows,
            &lnc::args![
                &mut grads.dx,
                dy,
                &mut pdw,
                &mut pdb,
                x,
                w,
                b,
                mean,
                rstd,
                &mut locks,
                n32,
                n32,
                0.0f32
            ],
        )?;
        // Only the first min(group, rows) partial rows were written (row r goes to r % group).
        let used = group.min(rows);
        launch(
            &k_dwdb,
            n.div_ceil(128),
            &lnc::args![&pdw, &pdb, &mut grads.dw, &mut grads.db, int(used)?, n32],
        )?;
        Ok(grads)
    }
}

/// The tutorial's `GROUP_SIZE_M` for rows of `n` elements.
fn group_size_m(n: usize) -> usize {
    match n {
        ..=1024 => 256,
        1025..=4096 => 128,
        4097..=8192 => 96,
        _ => 64,
    }
}
