//! # lnc-nn: the layer-norm family as Rust functions
//!
//! Kernels written in the kernel language (`kernels/*.py`, and the seed's tutorial kernels
//! in `examples/kernels/layer_norm.py`), compiled by lnc on first use of each signature
//! (and cached by the [`lnc::Jit`]), launched with the host logic of the system they come
//! from. Every function takes its tensors as flat row-major slices plus the lengths that
//! shape them, checks those lengths (a mismatch is an [`Error::Shape`], never a panic),
//! and returns fresh output buffers. Storage may be `f32`, [`half::f16`] or
//! [`half::bf16`] (the [`Float`] types); the arithmetic is `fp32` whatever the storage,
//! and the per-row statistics are returned in `f32`.
//!
//! | system | functions | kernels |
//! |---|---|---|
//! | Triton tutorial 05 | [`Nn::layer_norm`] (rows of any length: a chunked kernel past 64 KB), [`Nn::layer_norm_backward`] | `_layer_norm_fwd_fused`, `_layer_norm_fwd_long`, `_layer_norm_bwd_dx_fused`, `_layer_norm_bwd_dwdb` |
//! | RMSNorm, Triton style | [`Nn::rms_norm`], [`Nn::rms_norm_backward`] | `rms_norm.py` |
//! | Huawei Ascend C | [`Nn::ascend_layer_norm`] (`[B, S, H]`: mean, variance), [`Nn::ascend_layer_norm_rstd`] (`[A, R]` padded rows: mean, rstd), [`Nn::layer_norm_grad_beta`] | `ascend_layer_norm.py`, `ascend_grad_beta.py` |
//! | Tenstorrent ttnn | [`Nn::layer_norm_pre_all_gather`], [`all_gather_stats`], [`Nn::layer_norm_post_all_gather`] | `ttnn_distributed.py` |
//! | TensorRT-LLM | [`Nn::trt_layer_norm`] (`normalized_shape` over trailing axes, `use_diff_of_squares`) | `trtllm_layer_norm.py` |
//!
//! Block sizes follow the tutorial's host code: a kernel that holds a row in one block gets
//! `next_power_of_two(n)` lanes, up to 64 KB of storage per row; the kernels that walk their
//! rows in chunks get [`CHUNK`] lanes (fewer for short rows). How the sums are taken and
//! what that means for accuracy is in `docs/numerics.md`.
//!
//! ```
//! let nn = lnc_nn::Nn::new(lnc::Jit::new())?;
//! let (rows, n) = (4, 1000);
//! let x: Vec<f32> = (0..rows * n).map(|i| (i % 7) as f32 * 0.25).collect();
//! let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
//! let out = nn.layer_norm(&x, n, &w, &b, 1e-5)?; // y, mean, rstd
//! let dy = vec![0.01f32; rows * n];
//! let grads = nn.layer_norm_backward(&dy, &x, n, &w, &b, &out)?; // dx, dw, db
//! assert_eq!((out.y.len(), grads.dw.len()), (rows * n, n));
//! // The same rows normalized without weight nor bias, TensorRT-LLM style.
//! let trt = nn.trt_layer_norm(&x, &[rows, n], &[n], None, None, 1e-5, false)?;
//! assert_eq!(trt.rstd.len(), rows);
//! # Ok::<(), lnc_nn::Error>(())
//! ```

mod ascend;
mod layer_norm;
mod rms;
mod trt;
mod ttnn;
mod util;

use half::{bf16, f16};
use lnc::{Element, Jit, Module};

pub use ascend::{AscendLayerNormOut, GradBetaOut};
pub use layer_norm::{LayerNormGrads, LayerNormOut};
pub use rms::{RmsNormGrads, RmsNormOut};
pub use ttnn::{TTNN_EPS, all_gather_stats};
pub use util::{CHUNK, MAX_ROW_BYTES};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Compiling or launching a kernel failed.
    #[error(transparent)]
    Lnc(#[from] lnc::Error),
    /// The arguments do not describe a valid problem.
    #[error("{0}")]
    Shape(String),
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The storage dtypes the layer norms accept (compute is in `fp32`): `f32`, `f16`, `bf16`.
/// Sealed: a kernel signature is only known for these.
pub trait Float: Element + Copy + Default + sealed::Sealed {
    /// The dtype's name in a kernel signature.
    const SIG: &'static str;
}

impl Float for f32 {
    const SIG: &'static str = "fp32";
}

impl Float for f16 {
    const SIG: &'static str = "fp16";
}

impl Float for bf16 {
    const SIG: &'static str = "bf16";
}

/// The seed's three kernels (Triton tutorial 05), unchanged: the workspace's one copy,
/// which the examples and the language tests also use.
const LAYER_NORM: &str = include_str!("../../../examples/kernels/layer_norm.py");
const LAYER_NORM_LONG: &str = include_str!("../kernels/layer_norm_long.py");
const RMS_NORM: &str = include_str!("../kernels/rms_norm.py");
const ASCEND_LAYER_NORM: &str = include_str!("../kernels/ascend_layer_norm.py");
const ASCEND_GRAD_BETA: &str = include_str!("../kernels/ascend_grad_beta.py");
const TTNN_DISTRIBUTED: &str = include_str!("../kernels/ttnn_distributed.py");
const TRTLLM_LAYER_NORM: &str = include_str!("../kernels/trtllm_layer_norm.py");

/// The layer-norm family, compiled on demand by one [`Jit`]: one [`Module`] per kernel
/// file, each kernel compiled once per signature (dtypes, block size, flags).
pub struct Nn {
    layer_norm: Module,
    layer_norm_long: Module,
    rms_norm: Module,
    ascend_layer_norm: Module,
    ascend_grad_beta: Module,
    ttnn: Module,
    trt: Module,
}

impl Nn {
    /// Parses the kernels (compilation happens at first use, per signature).
    pub fn new(jit: Jit) -> Result<Nn> {
        let file = |path: &str, text: &str| jit.module(path, text);
        Ok(Nn {
            layer_norm: file("examples/kernels/layer_norm.py", LAYER_NORM)?,
            layer_norm_long: file("crates/lnc-nn/kernels/layer_norm_long.py", LAYER_NORM_LONG)?,
            rms_norm: file("crates/lnc-nn/kernels/rms_norm.py", RMS_NORM)?,
            ascend_layer_norm: file("crates/lnc-nn/kernels/ascend_layer_norm.py", ASCEND_LAYER_NORM)?,
            ascend_grad_beta: file("crates/lnc-nn/kernels/ascend_grad_beta.py", ASCEND_GRAD_BETA)?,
            ttnn: file("crates/lnc-nn/kernels/ttnn_distributed.py", TTNN_DISTRIBUTED)?,
            trt: file("crates/lnc-nn/kernels/trtllm_layer_norm.py", TRTLLM_LAYER_NORM)?,
        })
    }
}
