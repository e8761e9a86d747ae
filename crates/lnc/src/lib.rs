//! # lnc: Triton kernels JIT-compiled to native CPU code
//!
//! lnc takes kernels written in Triton's block-level language and compiles them through
//! Cranelift, in milliseconds, inside the host process. The embedding API follows the
//! pipeline: a [`Jit`] parses a file into a [`Module`]; [`Module::kernel`] specializes a
//! kernel on a signature (Triton's AOT format) and compiles it, cached; [`Kernel::launch`]
//! runs it on a grid of programs on a thread pool, with every memory access checked.
//!
//! ```no_run
//! # fn main() -> Result<(), lnc::Error> {
//! let jit = lnc::Jit::new();
//! let module = jit.load("layer_norm.py")?;
//! let k = module.kernel("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024")?;
//! let (m, n) = (151usize, 1000usize);
//! let x = vec![1.0f32; m * n];
//! let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
//! let (mut y, mut mean, mut rstd) = (vec![0.0f32; m * n], vec![0.0f32; m], vec![0.0f32; m]);
//! k.launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32])?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod arg;
mod error;
mod jit;
mod kernel;
mod module;
mod pipeline;
mod stage;

pub use arg::{Arg, BufferArg, Element, Scalar};
pub use error::{Error, OutOfBounds, Result, SourceError};
pub use jit::Jit;
pub use kernel::{Grid, Kernel, RuntimeParam};
pub use lnc_bir::{DType, Elem};
/// What this host's code computes with: 256-bit and 512-bit loops, F16C conversions of
/// `fp16` tiles ([`CompileOptions::f16c`]), `vcvtneps2bf16` roundings to `bf16`
/// ([`CompileOptions::bf16_cvt`]).
pub use lnc_clif::{computes_wide, computes_zmm, converts_f16_natively, rounds_bf16_natively};
pub use lnc_diag::{Diagnostic, SourceFile};
pub use lnc_front::Signature;
pub use lnc_runtime::Programs;
/// How long the threads of a launch's pool stay awake for the next launch.
pub use lnc_runtime::{DEFAULT_LINGER, LINGER_WITH_WORK, linger, lingering, set_linger};
pub use module::{KernelInfo, Module, ParamInfo};
pub use pipeline::{CLIF_AFTER, CLIF_BEFORE, CompileOptions, Dump, DumpRequest, Timings};
pub use stage::Stage;
