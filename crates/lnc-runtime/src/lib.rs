//! lnc's runtime: the kernel ABI, the grid launcher and the machine's cache. It knows
//! nothing of the compiler.
#![deny(missing_docs)]

pub mod abi;
pub mod cache;
pub mod launch;

pub use abi::*;
pub use cache::{CacheFlush, LastLevelCache, last_level_cache};
pub use launch::*;

/// Clears the upper halves of the vector registers (`vzeroupper`), which the 256-bit
/// loops of a kernel leave set (lnc-clif's `wide`). Until then every SSE instruction the
/// thread runs waits to merge them: measured on the Rust baseline run after lnc's
/// forward on the same threads, 33 → 11.5 GB/s. The runtime calls it when a kernel
/// returns, and the helpers kernels call (row conversions, math) on entry.
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX.
        unsafe { zero_upper() }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn zero_upper() {
    std::arch::x86_64::_mm256_zeroupper();
}
