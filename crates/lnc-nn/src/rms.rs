//! RMSNorm, Triton style (`kernels/rms_norm.py`): one program per row, the row in one
//! block; the backward writes per-row partial `dw` that a second kernel sums over the rows.

use crate::util::{expect_len, fit_block, int, launch, rows};
use crate::{Error, Float, Nn, Result};

/// What [`Nn::rms_norm`] returns.
#[derive(Clone, Debug)]
pub struct RmsNormOut<T> {
    /// `x · rstd · w`.
    pub y: Vec<T>,
    /// Each row's `1 / sqrt(mean(x²) + eps)`.
    pub rstd: Vec<f32>,
}

/// What [`Nn::rms_norm_backward`] returns.
#[derive(Clone, Debug)]
pub struct RmsNormGrads<T> {
    /// The gradient of the input.
    pub dx: Vec<T>,
    /// The gradient of the weight.
    pub dw: Vec<T>,
}

impl Nn {
    /// RMSNorm over rows of `n` elements: `rstd = 1 / sqrt(mean(x²) + eps)`, `y = x · rstd ·
    /// w`. Rows must fit one block ([`MAX_ROW_BYTES`](crate::MAX_ROW_BYTES) of `T`).
    pub fn rms_norm<T: Float>(&self, x: &[T], n: usize, w: &[T], eps: f32) -> Result<RmsNormOut<T>> {
        let rows = rows("x", x.len(), n)?;
        expect_len("weight", w.len(), n, "n")?;
        let block = fit_block::<T>("rms_norm", n)?;
        let t = T::SIG;
        let k =
            self.rms_norm.kernel("_rms_norm_fwd", &format!("*{t},*{t},*{t},*fp32,i32,i32,fp32,{block}"))?;
        let mut out = RmsNormOut { y: vec![T::default(); x.len()], rstd: vec![0.0; rows] };
        let n32 = int(n)?;
        launch(&k, rows, &lnc::args![x, &mut out.y, w, &mut out.rstd, n32, n32, eps])?;
        Ok(out)
    }

    /// The gradients of [`Nn::rms_norm`] given `dy` and the forward's rstd (`fwd`): `dx =
    /// (w·dy - x̂ · mean(x̂ · w·dy)) · rstd` with `x̂ = x · rstd`, and `dw = Σ_rows dy · x̂`.
    /// Each row's `dy · x̂` goes to a row of an `fp32` scratch buffer of `x`'s size, summed
    /// over the rows by a second kernel: no locks, and the result does not depend on the
    /// order the programs run in.
    pub fn rms_norm_backward<T: Float>(
        &self,
        dy: &[T],
        x: &[T],
        n: usize,
        w: &[T],
        fwd: &RmsNormOut<T>,
    ) -> Result<RmsNormGrads<T>> {
        let rows = rows("x", x.len(), n)?;
        expect_len("weight", w.len(), n, "n")?;
        expect_len("dy", dy.len(), x.len(), "the length of x")?;
        if fwd.rstd.len() != rows {
            return Err(Error::Shape(format!(
                "the forward's rstd has {} elements: expected one per row, {rows}",
                fwd.rstd.len()
            )));
        }
        let block = fit_block::<T>("rms_norm_backward", n)?;
        let t = T::SIG;
        let k_dx = self
            .rms_norm
            .kernel("_rms_norm_bwd_dx", &format!("*{t},*{t},*fp32,*{t},*{t},*fp32,i32,i32,{block}"))?;
        let k_dw = self.rms_norm.kernel("_rms_norm_bwd_dw", &format!("*fp32,*{t},i32,i32,32,128"))?;
        let mut grads = RmsNormGrads { dx: vec![T::default(); x.len()], dw: vec![T::default(); n] };
        let mut pdw = vec![0.0f32; x.len()];
        let n32 = int(n)?;
        launch(&k_dx, rows, &lnc::args![&mut grads.dx, dy, &mut pdw, x, w, &fwd.rstd, n32, n32])?;
        launch(&k_dw, n.div_ceil(128), &lnc::args![&pdw, &mut grads.dw, int(rows)?, n32])?;
        Ok(grads)
    }
}
