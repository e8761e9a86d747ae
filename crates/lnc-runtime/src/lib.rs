//! lnc's runtime: the kernel ABI and the grid launcher. It knows nothing of the compiler.
#![deny(missing_docs)]

pub mod abi;
pub mod launch;

pub use abi::*;
pub use launch::*;
