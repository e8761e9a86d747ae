//! TensorRT-LLM's `functional.layer_norm` (`kernels/trtllm_layer_norm.py`).

use crate::layer_norm::LayerNormOut;
use crate::util::{chunk, expect_affine, int, launch, py, rows};
use crate::{Error, Float, Nn, Result};

impl Nn {
    /// `tensorrt_llm.functional.layer_norm(input, normalized_shape, weight, bias, eps,
    /// use_diff_of_squares)` on `x` of shape `shape` (row-major): normalizes over the
    /// trailing axes `normalized_shape` (one or several; they must be the tail of
    /// `shape`), i.e. over rows of `N = Π normalized_shape` elements. `weight` and `bias`
    /// have the normalized shape (flattened, `N` elements), each optional on its own.
    ///
    /// `use_diff_of_squares` takes the variance as `E[x²] - E[x]²` in one pass over the row
    /// (clamped at 0) instead of `E[(x - mean)²]` after the mean: one read of x less, but it
    /// cancels catastrophically when `|mean|` is large against the standard deviation
    /// (`docs/numerics.md` has the figures). TensorRT-LLM's default is `true`; `eps` is
    /// usually 1e-5. Returns y (x's shape) and each row's mean and rstd.
    #[allow(clippy::too_many_arguments, reason = "TensorRT-LLM's parameters, one for one")]
    pub fn trt_layer_norm<T: Float>(
        &self,
        x: &[T],
        shape: &[usize],
        normalized_shape: &[usize],
        weight: Option<&[T]>,
        bias: Option<&[T]>,
        eps: f32,
        use_diff_of_squares: bool,
    ) -> Result<LayerNormOut<T>> {
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if numel != Some(x.len()) {
            return Err(Error::Shape(format!("x has {} elements: not of shape {shape:?}", x.len())));
        }
        if normalized_shape.is_empty() || !shape.ends_with(normalized_shape) {
            return Err(Error::Shape(format!(
                "normalized_shape {normalized_shape:?} is not the trailing axes of shape {shape:?}"
            )));
        }
        let n: usize = normalized_shape.iter().product();
        if n == 0 {
            return Err(Error::Shape(format!("normalized_shape {normalized_shape:?} has no elements")));
        }
        expect_affine(["weight", "bias"], [weight, bias], n, "Π normalized_shape")?;
        let rows = rows("x", x.len(), n)?;
        let t = T::SIG;
        let sig = format!(
            "*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{},{},{},{}",
            py(weight.is_some()),
            py(bias.is_some()),
            py(use_diff_of_squares),
            chunk(n)
        );
        let k = self.trt.kernel("layer_norm", &sig)?;
        let mut out =
            LayerNormOut { y: vec![T::default(); x.len()], mean: vec![0.0; rows], rstd: vec![0.0; rows] };
        // Without the term the kernel never reads the parameter: an empty buffer stands in.
        let (weight, bias) = (weight.unwrap_or(&[]), bias.unwrap_or(&[]));
        let n32 = int(n)?;
        launch(
            &k,
            rows,
            &lnc::args![x, &mut out.y, weight, bias, &mut out.mean, &mut out.rstd, n32, n32, eps],
        )?;
        Ok(out)
    }
}
