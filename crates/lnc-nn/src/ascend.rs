//! Huawei Ascend C's layer norm: `LayerNorm` in its two output forms
//! (`kernels/ascend_layer_norm.py`) and `LayerNormGradBeta` (`kernels/ascend_grad_beta.py`).
//!
//! Ascend's `LayerNormConfig{isNoGamma, isNoBeta}` is the `None`s of gamma and beta: the
//! kernel is specialized without the term, and the parameter is never read. Gamma and beta
//! have a dtype of their own (Ascend's `U`, "at least the input's precision"), e.g. `f32`
//! with `f16` rows.

use crate::layer_norm::LayerNormOut;
use crate::util::{expect_affine, expect_len, fit_block, int, launch, py, rows};
use crate::{Error, Float, Nn, Result};

/// What [`Nn::ascend_layer_norm`] returns.
#[derive(Clone, Debug)]
pub struct AscendLayerNormOut<T> {
    /// `(x - mean) / sqrt(variance + eps) [· gamma] [+ beta]`.
    pub y: Vec<T>,
    /// Each row's mean.
    pub mean: Vec<f32>,
    /// Each row's biased variance: the mean of the squared deviations from the row's mean.
    pub variance: Vec<f32>,
}

/// What [`Nn::layer_norm_grad_beta`] returns.
#[derive(Clone, Debug)]
pub struct GradBetaOut<T> {
    /// `Σ_rows dy · resForGamma`, per column.
    pub pd_gamma: Vec<T>,
    /// `Σ_rows dy`, per column.
    pub pd_beta: Vec<T>,
}

impl Nn {
    /// Ascend C `LayerNorm`, the form with the variance: `x` is `[B, S, H]` (any `B·S`
    /// rows of `h` elements); returns y (`[B, S, H]`), and the mean and biased variance of
    /// each row (`[B, S]`, in `f32`; Ascend stores them in x's dtype, which the caller can
    /// round to). `gamma` and `beta` have `h` elements; `None` is `isNoGamma` / `isNoBeta`.
    /// Rows must fit one block ([`MAX_ROW_BYTES`](crate::MAX_ROW_BYTES) of `T`), as
    /// Ascend does not split the H axis either.
    ///
    /// With both `None`, name the parameters' dtype: `nn.ascend_layer_norm::<f16, f16>(..)`.
    pub fn ascend_layer_norm<T: Float, G: Float>(
        &self,
        x: &[T],
        h: usize,
        gamma: Option<&[G]>,
        beta: Option<&[G]>,
        eps: f32,
    ) -> Result<AscendLayerNormOut<T>> {
        let rows = rows("x", x.len(), h)?;
        expect_affine(["gamma", "beta"], [gamma, beta], h, "H")?;
        let block = fit_block::<T>("ascend_layer_norm", h)?;
        let (t, g) = (T::SIG, G::SIG);
        let sig = format!(
            "*{t},*{t},*{g},*{g},*fp32,*fp32,i32,fp32,{block},{},{}",
            py(gamma.is_none()),
            py(beta.is_none())
        );
        let k = self.ascend_layer_norm.kernel("ascend_layer_norm_var", &sig)?;
        let mut out = AscendLayerNormOut {
            y: vec![T::default(); x.len()],
            mean: vec![0.0; rows],
            variance: vec![0.0; rows],
        };
        // Without the term the kernel never reads the parameter: an empty buffer stands in.
        let (gamma, beta) = (gamma.unwrap_or(&[]), beta.unwrap_or(&[]));
        launch(
            &k,
            rows,
            &lnc::args![x, &mut out.y, gamma, beta, &mut out.mean, &mut out.variance, int(h)?, eps],
        )?;
        Ok(out)
    }

    /// Ascend C `LayerNorm`, the form with the rstd over `[A, R]` rows padded to
    /// `rLengthWithPadding`: `x` holds rows of `r_pad` elements (`r_pad >= r`), the first
    /// `r` of each are normalized and the padding is never read, so it cannot change the
    /// result (Ascend pads to 32 bytes with zeros; any stride and any padding values work
    /// here). Returns y in x's layout (`[A, R_PAD]`, its padding left zero), and the mean
    /// and rstd of each row. `gamma` and `beta` have `r` elements (or `r_pad`, the padding
    /// ignored, as Ascend allocates them); `None` is `isNoGamma` / `isNoBeta`.
    pub fn ascend_layer_norm_rstd<T: Float, G: Float>(
        &self,
        x: &[T],
        r: usize,
        r_pad: usize,
        gamma: Option<&[G]>,
        beta: Option<&[G]>,
        eps: f32,
    ) -> Result<LayerNormOut<T>> {
        if r == 0 || r_pad < r {
            return Err(Error::Shape(format!(
                "rLength {r} and rLengthWithPadding {r_pad}: expected 0 < rLength <= rLengthWithPadding"
            )));
        }
        let rows = rows("x", x.len(), r_pad)?;
        for (what, p) in [("gamma", gamma), ("beta", beta)] {
            if let Some(p) = p
                && p.len() != r
                && p.len() != r_pad
            {
                return Err(Error::Shape(format!(
                    "{what} has {} elements: expected rLength = {r} (or rLengthWithPadding = {r_pad})",
                    p.len()
                )));
            }
        }
        let block = fit_block::<T>("ascend_layer_norm_rstd", r)?;
        let (t, g) = (T::SIG, G::SIG);
        let sig = format!(
            "*{t},*{t},*{g},*{g},*fp32,*fp32,i32,i32,fp32,{block},{},{}",
            py(gamma.is_none()),
            py(beta.is_none())
        );
        let k = self.ascend_layer_norm.kernel("ascend_layer_norm_rstd", &sig)?;
        let mut out =
            LayerNormOut { y: vec![T::default(); x.len()], mean: vec![0.0; rows], rstd: vec![0.0; rows] };
        let (gamma, beta) = (gamma.unwrap_or(&[]), beta.unwrap_or(&[]));
        launch(
            &k,
            rows,
            &lnc::args![x, &mut out.y, gamma, beta, &mut out.mean, &mut out.rstd, int(r)?, int(r_pad)?, eps],
        )?;
        Ok(out)
    }

    /// Ascend C `LayerNormGradBeta`: from `res_for_gamma = (x - mean) · rstd` and `dy`, both
    /// `[B, S, H]` (rows of `h`), `pd_gamma[h] = Σ dy · res_for_gamma` and `pd_beta[h] = Σ
    /// dy` over the `B·S` rows, summed in `fp32` and rounded once to `T`. Blocks of 32 rows
    /// by 128 columns, as the tutorial's `_layer_norm_bwd_dwdb`.
    pub fn layer_norm_grad_beta<T: Float>(
        &self,
        res_for_gamma: &[T],
        dy: &[T],
        h: usize,
    ) -> Result<GradBetaOut<T>> {
        let rows = rows("resForGamma", res_for_gamma.len(), h)?;
        expect_len("dy", dy.len(), res_for_gamma.len(), "the length of resForGamma")?;
        let t = T::SIG;
        let k = self.ascend_grad_beta.kernel(
            "ascend_layer_norm_grad_beta",
            &format!("*{t},*{t},*{t},*{t},i32,i32,{GRAD_BLOCK_M},{GRAD_BLOCK_H}"),
        )?;
        let mut out = GradBetaOut { pd_gamma: vec![T::default(); h], pd_beta: vec![T::default(); h] };
        launch(
            &k,
            h.div_ceil(GRAD_BLOCK_H),
            &lnc::args![res_for_gamma, dy, &mut out.pd_gamma, &mut out.pd_beta, int(rows)?, int(h)?],
        )?;
        Ok(out)
    }
}

/// Rows and columns of `LayerNormGradBeta`'s blocks: the tutorial's `_layer_norm_bwd_dwdb`
/// block (32 × 128 `fp32` accumulators, 16 KB per sum).
const GRAD_BLOCK_M: usize = 32;
const GRAD_BLOCK_H: usize = 128;
