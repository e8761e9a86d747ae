//! lnc's runtime: the kernel ABI, the grid launcher and the machine's cache. It knows
//! nothing of the compiler.
#![deny(missing_docs)]

pub mod abi;
pub mod cache;
pub mod launch;

pub use abi::*;
pub use cache::{CacheFlush, LastLevelCache, last_level_cache};
pub use launch::*;
