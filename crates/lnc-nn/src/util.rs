//! What every family form's host code shares: length checks, block sizes, launches.

use lnc::{Arg, Kernel};

use crate::{Error, Float, Result};

/// The largest row the one-block kernels take, in bytes of storage: the tutorial's limit
/// (`MAX_FUSED_SIZE = 65536 // x.element_size()`, set by a GPU's shared memory), kept so
/// that the one-block kernels take the rows and blocks the tutorial's host code gives
/// them (each program holds its row in per-program scratch memory). Longer rows go to a
/// chunked kernel where the family has one ([`Nn::layer_norm`](crate::Nn::layer_norm)).
pub const MAX_ROW_BYTES: usize = 65536;

/// Lanes of the kernels that walk a row in chunks (`range(0, N, BLOCK_SIZE)`: the long-row
/// layer norm, ttnn's and TensorRT-LLM's kernels). Each lane accumulates every
/// `CHUNK`-th element of the row in `fp32`, so a row of `N` elements is summed in chains
/// of `N / CHUNK` additions before the block reduction (`docs/numerics.md`). 1024 `fp32`
/// accumulators are 4 KB per sum; of 256 to 4096, 1024 was the fastest on rows of 2^20
/// elements and within the noise on rows of 2·10^4 and 10^5.
pub const CHUNK: usize = 1024;

/// The number of rows of `n` elements in a tensor of `len`.
pub(crate) fn rows(what: &str, len: usize, n: usize) -> Result<usize> {
    if n == 0 || !len.is_multiple_of(n) {
        return Err(Error::Shape(format!("{what} has {len} elements: not rows of n = {n}")));
    }
    // Row offsets (`row * stride`) are i32 in the kernels.
    int(len)?;
    Ok(len / n)
}

/// Checks that `what` has `want` elements.
pub(crate) fn expect_len(what: &str, len: usize, want: usize, name: &str) -> Result<()> {
    if len != want {
        return Err(Error::Shape(format!("{what} has {len} elements: expected {name} = {want}")));
    }
    Ok(())
}

/// The block of a kernel that holds a row of `n` elements of `T` in one block:
/// `next_power_of_two(n)`, or `None` past [`MAX_ROW_BYTES`].
pub(crate) fn one_block<T: Float>(n: usize) -> Option<usize> {
    let block = n.next_power_of_two();
    (block * std::mem::size_of::<T>() <= MAX_ROW_BYTES).then_some(block)
}

/// [`one_block`] for a kernel that has no chunked form: a row too long is an error.
pub(crate) fn fit_block<T: Float>(what: &str, n: usize) -> Result<usize> {
    one_block::<T>(n).ok_or_else(|| {
        Error::Shape(format!(
            "{what}: rows of {n} {} elements do not fit one block of {MAX_ROW_BYTES} bytes (the \
             tutorial's limit; this kernel has no long-row form)",
            T::SIG
        ))
    })
}

/// The chunk of a kernel that walks rows of `n` elements: [`CHUNK`], or the row's next
/// power of two when that is smaller (lanes past the row would only ever add masked zeros).
pub(crate) fn chunk(n: usize) -> usize {
    n.next_power_of_two().min(CHUNK)
}

/// A size as the kernels' `i32`.
pub(crate) fn int(v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Shape(format!("{v} does not fit the kernels' 32-bit sizes")))
}

/// A constexpr flag as a signature spells it.
pub(crate) fn py(flag: bool) -> &'static str {
    if flag { "True" } else { "False" }
}

/// Launches `k` on `programs` programs; an empty grid (no rows) launches nothing.
pub(crate) fn launch(k: &Kernel, programs: usize, args: &[Arg<'_>]) -> Result<()> {
    if programs == 0 {
        return Ok(());
    }
    let grid = u32::try_from(programs)
        .map_err(|_| Error::Shape(format!("{programs} programs do not fit a launch grid")))?;
    Ok(k.launch(grid, args)?)
}

/// Checks that optional affine parameters have `n` elements each.
pub(crate) fn expect_affine<T>(
    names: [&str; 2],
    params: [Option<&[T]>; 2],
    n: usize,
    name: &str,
) -> Result<()> {
    for (what, p) in names.into_iter().zip(params) {
        if let Some(p) = p {
            expect_len(what, p.len(), n, name)?;
        }
    }
    Ok(())
}
