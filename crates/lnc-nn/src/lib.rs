//! # lnc-nn: the layer-norm family as Rust functions
//!
//! Kernels written in the kernel language (`kernels/*.py`), compiled by lnc on first use
//! and launched with the host logic of the systems they come from. Work in progress: the
//! Triton tutorial's layer norm (forward and backward) is here; the other forms of the
//! seeds are being added (issue 6).
