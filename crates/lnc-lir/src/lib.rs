//! # Loop IR
//!
//! The loop IR (lir) is the CPU's level: the blocks of the block IR are gone, replaced by
//! explicit `for` loops over *tiles* of `lanes` consecutive elements (a tile of 4 × fp32
//! is one 128-bit vector), loop-carried accumulators for reductions, per-program scratch
//! buffers for blocks that must live across loops, and memory accesses whose addressing
//! mode (scalar, contiguous, gather) is explicit. Every access names a [`Site`]: the
//! source span and the pointer argument whose bounds a safe launch checks it against.
//!
//! Control flow is structured as in the block IR. Codegen to Cranelift is a direct
//! translation: one Cranelift value per lir value (tiles that fill 128 bits are vectors).
//!
//! The [`verify`] module lists the invariants every function satisfies; [`print`] gives
//! the text form of stage dumps and snapshots; [`builder`] appends instructions region by
//! region; [`ranges`] bounds the integer scalars.
#![deny(missing_docs)]

pub mod builder;
pub mod ir;
pub mod print;
pub mod ranges;
pub mod verify;

pub use builder::Builder;
pub use ir::*;
/// The meaning of `exp` and `log` of `f32` lanes, which the JIT's vector code reproduces.
pub use lnc_bir::math;
pub use print::print_function;
pub use verify::{VerifierError, VerifierErrors, verify};
