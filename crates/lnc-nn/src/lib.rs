//! # lnc-nn: the layer-norm family as Rust functions
//!
//! Kernels written in the kernel language (`kernels/*.py`), compiled by lnc on first use
//! (and cached by the [`lnc::Jit`]) and launched with the host logic of the system they
//! come from. Work in progress (issue 6): the Triton tutorial's layer norm, forward and
//! backward, with the tutorial's host flow; the other forms of the seeds follow.
//!
//! ```no_run
//! let nn = lnc_nn::Nn::new(lnc::Jit::new())?;
//! let (rows, n) = (4, 1000);
//! let x = vec![0.5f32; rows * n];
//! let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
//! let out = nn.layer_norm(&x, n, &w, &b, 1e-5)?;
//! assert_eq!(out.y.len(), rows * n);
//! # Ok::<(), lnc_nn::Error>(())
//! ```

use half::{bf16, f16};
use lnc::{Element, Jit, Module};

/// The seed's three kernels (Triton tutorial 05), unchanged: the workspace's one copy,
/// which the examples and the language tests also use.
const LAYER_NORM: &str = include_str!("../../../examples/kernels/layer_norm.py");

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

/// The storage dtypes the layer norms accept (compute is in `fp32`).
pub trait Float: Element + Copy + Default {
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

/// The largest row the one-block kernels take, in bytes: the tutorial's limit.
const MAX_ROW_BYTES: usize = 65536;

/// What [`Nn::layer_norm`] returns: `y`, and each row's mean and `1/std`.
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

/// The layer-norm family, compiled on demand by one [`Jit`].
pub struct Nn {
    layer_norm: Module,
}

impl Nn {
    /// Parses the kernels (compilation happens at first use, per signature).
    pub fn new(jit: Jit) -> Result<Nn> {
        Ok(Nn { layer_norm: jit.module("examples/kernels/layer_norm.py", LAYER_NORM)? })
    }

    /// Layer norm over the last axis of `x`, rows of `n` elements: `y = (x - mean) · rstd
    /// · w + b`, as the tutorial's `LayerNorm.forward` (one program per row, the row in
    /// one block of `next_power_of_two(n)` elements).
    pub fn layer_norm<T: Float>(
        &self,
        x: &[T],
        n: usize,
        w: &[T],
        b: &[T],
        eps: f32,
    ) -> Result<LayerNormOut<T>> {
        let (rows, block) = shape::<T>(x.len(), n, w.len(), b.len())?;
        let sig = format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}", t = T::SIG);
        let k = self.layer_norm.kernel("_layer_norm_fwd_fused", &sig)?;
        let mut out =
            LayerNormOut { y: vec![T::default(); x.len()], mean: vec![0.0; rows], rstd: vec![0.0; rows] };
        let n32 = int(n)?;
        k.launch(
            int(rows)? as u32,
            &lnc::args![x, &mut out.y, w, b, &mut out.mean, &mut out.rstd, n32, n32, eps],
        )?;
        Ok(out)
    }

    /// The gradients of [`Nn::layer_norm`] given `dy` and the forward's mean and rstd (`fwd`), by
    /// the tutorial's host flow: `dx` and partial `dw`/`db` per group of rows (the
    /// tutorial's `GROUP_SIZE_M` for `n`, groups guarded by spin locks), then the column
    /// sums of the partials.
    pub fn layer_norm_backward<T: Float>(
        &self,
        dy: &[T],
        x: &[T],
        n: usize,
        w: &[T],
        b: &[T],
        fwd: &LayerNormOut<T>,
    ) -> Result<LayerNormGrads<T>> {
        let (rows, block) = shape::<T>(x.len(), n, w.len(), b.len())?;
        let (mean, rstd) = (&fwd.mean, &fwd.rstd);
        if dy.len() != x.len() || mean.len() != rows || rstd.len() != rows {
            return Err(Error::Shape(format!(
                "dy has {} elements, mean {} and rstd {}: expected {}, {rows} and {rows}",
                dy.len(),
                mean.len(),
                rstd.len(),
                x.len()
            )));
        }
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
        let (mut pdw, mut pdb) = (vec![T::default(); group * n], vec![T::default(); group * n]);
        let mut locks = vec![0i32; 2 * group];
        let n32 = int(n)?;
        k_dx.launch(
            int(rows)? as u32,
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
        let used = group.min(rows);
        k_dwdb.launch(
            int(n.div_ceil(128))? as u32,
            &lnc::args![&pdw, &pdb, &mut grads.dw, &mut grads.db, int(used)?, n32],
        )?;
        Ok(grads)
    }
}

/// Rows and block size of a problem, checked.
fn shape<T: Float>(len: usize, n: usize, w: usize, b: usize) -> Result<(usize, usize)> {
    if n == 0 || !len.is_multiple_of(n) {
        return Err(Error::Shape(format!("x has {len} elements: not rows of n = {n}")));
    }
    if w != n || b != n {
        return Err(Error::Shape(format!("weight has {w} elements and bias {b}: expected n = {n}")));
    }
    let block = n.next_power_of_two();
    if block * std::mem::size_of::<T>() > MAX_ROW_BYTES {
        return Err(Error::Shape(format!(
            "rows of {n} elements do not fit one block of {MAX_ROW_BYTES} bytes (the tutorial's limit)"
        )));
    }
    Ok((len / n, block))
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

fn int(v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Shape(format!("{v} does not fit the kernels' 32-bit sizes")))
}
