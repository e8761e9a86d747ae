//! # Tiling: block IR to loop IR
//!
//! A block of the block IR is an *iteration space*, not an array. This crate decides, per
//! kernel, which loops run over those spaces and what each loop computes, and builds the
//! loop IR for that plan:
//!
//! - Scalars (rank-0 values) become scalar instructions in program order.
//! - Every *sink* — a reduction of a block to a scalar, a store or atomic of a block, an
//!   assert on a block — consumes its block inside a loop over tiles of `lanes` elements
//!   (the last axis vectorized, outer axes as scalar loops). The elementwise DAG that
//!   feeds the sink is computed per tile in that loop: nothing between a load and its
//!   sink is ever stored ([`eval`](crate::eval)).
//! - Consecutive sinks over the same space share one loop when that keeps the program's
//!   meaning: no sink may need a scalar computed from another sink of the loop, memory
//!   written by one sink must not be read or written at other positions by another, and
//!   instructions with memory effects keep their order ([`fusion`](crate::fusion)).
//! - A block read by several loops is recomputed when it is pure arithmetic or a
//!   contiguous load of at most 64 KB (not of `bf16`, nor of `fp16` unless its tiles convert in one instruction, `TileOptions::native_f16`) from an argument the kernel never writes (arguments do
//!   not overlap, so that memory is constant during the launch), and kept in a per-program scratch buffer
//!   when it holds another load (so later stores cannot change it), an atomic's result or
//!   a reduction of a block. Blocks carried through `for`/`while`/`if` live in scratch
//!   buffers too.
//! - Each access's addressing comes from its offset's affine form `base + stride·lane`
//!   ([`affine`](crate::affine)): stride 1 is a contiguous vector access, anything else a
//!   gather; each access names the pointer argument it derives from
//!   ([`provenance`](crate::provenance)) for bounds checks.
//! - `device_print` prints one line per element of each operand with its index, as Triton
//!   does; the elements are unrolled, so a print of a block is limited in size.
//!
//! Masks stay data (lane masks on accesses) in that plan. Loop-IR passes follow: the
//! `fp16`/`bf16` rows a loop reads or writes are converted whole, in one runtime call,
//! where that is cheaper than converting tiles ([`rows`](crate::rows)); masks `offs < N` become a loop bound plus a tail
//! ([`bounds`](crate::bounds)); reduction loops get several accumulators
//! ([`accum`](crate::accum)); and the full-line stores of a loop into an argument the
//! kernel never reads may bypass the caches ([`stream`](crate::stream)); and a second
//! pass over a row prefetches the next program's row ([`prefetch`](crate::prefetch)).
//!
//! Blocks of pointers carried through loops become a pointer block fixed before the loop
//! plus a carried scalar offset ([`carried`](crate::carried)).
//!
//! The pipeline is [`lower`]: carried pointer blocks → provenance → deferred stores
//! ([`defer`](crate::defer)) → uses → scheduling and
//! emission → half rows → masks to bounds → accumulators → prefetches → streaming stores →
//! dead-code removal. What cannot be tiled is a [`TileError`] pointing at the
//! source.

mod accum;
mod affine;
mod bounds;
mod carried;
mod dce;
mod defer;
mod emit;
mod eval;
mod fusion;
mod locks;
mod never;
mod overlap;
mod prefetch;
mod provenance;
mod rewrite;
mod rows;
mod scalar;
mod stream;
mod uses;

use lnc_diag::{Diagnostic, Span};

/// Options of the tiling passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileOptions {
    /// Elements per tile, a power of two (4: one 128-bit vector of `fp32`). A block whose
    /// last axis is shorter uses that length.
    pub lanes: u8,
    /// Turn masks `base + arange < n` into a loop bound plus a tail (module `bounds`).
    pub bounds: bool,
    /// Independent accumulators per reduction loop, the loop unrolled as many times
    /// (module `accum`); 1 keeps one accumulator.
    pub unroll: u8,
    /// Convert rows of `fp16`/`bf16` loaded or stored by a tile loop in one runtime call
    /// each, through scratch (module `rows`), instead of tile by tile.
    pub rows: bool,
    /// Let the full-line stores of a loop into an argument the kernel never reads bypass
    /// the caches when the launch writes more than they could keep (module `stream`).
    pub stream: bool,
    /// While a program passes over a row a second time, prefetch the same row of the
    /// worker's next program (module `prefetch`).
    pub prefetch: bool,
    /// `fp16` tiles convert in one instruction per tile each way (the host's F16C, see
    /// lnc-clif's `f16c`), as cheap as `fp32` loads and stores: a later loop reads an `fp16`
    /// row again from memory instead of a scratch copy, and the `rows` pass converts `fp16`
    /// loads whole only where it does `bf16` loads, and `fp16` stores only where the row
    /// store streams a long row (module `rows`).
    pub native_f16: bool,
    /// `bf16` tiles of 8 lanes widen in two 256-bit instructions where only arithmetic
    /// uses them (lnc-clif's wide loops, with AVX2): a later loop reads a `bf16` row again
    /// from memory instead of a scratch copy, as it does `fp32` ones.
    pub native_bf16: bool,
    /// `fp16` and `bf16` tile stores stay in their loops whatever the row's length, and may
    /// stream like `fp32` ones (module `stream`): in 512-bit loops code generation rounds
    /// a tile to `bf16` in the loop, and converts either half into a register and stores
    /// it non-temporally (lnc-clif's `evex`), so the `rows` pass no longer sends such
    /// rows through the row helper.
    pub half_stores: bool,
    /// `fp16` tile stores stay in their loops whatever the row's length, and may stream
    /// (module `stream`): in 256-bit loops code generation converts a tile into its
    /// register and stores it (lnc-clif's `widen`; non-temporally where it streams and the
    /// register dies at the store, else cached), which ran faster than the row helper
    /// (module `rows`, [`rows::MAX_F16_TILE_STORE_ROW`]).
    pub f16_stores: bool,
    /// `bf16` tile stores stay in their loops whatever the row's length, and may stream
    /// (module `stream`): in 256-bit loops code generation rounds a tile to `bf16` in the
    /// loop with integer code and packs it into a register that dies at the store
    /// (lnc-clif's `widen`), instead of the row helper (module `rows`).
    pub bf16_stores: bool,
    /// Move the stores into arguments the kernel never reads past the spin lock's acquire
    /// that follows them, where the lock is one of many (module `defer`).
    pub defer_stores: bool,
    /// Tiling for bounds-checked code, where nothing may first be read or written after a
    /// spin lock's acquire that the source reads or writes before it (an access out of
    /// bounds would fault with the lock held): a store moved by `defer_stores` leaves a
    /// copy that only checks its bounds where it was, and a load of an argument nothing
    /// writes is kept in scratch before an atomic when nothing read it there yet (module
    /// `fusion`). Code without checks has no use for either.
    pub checked: bool,
}

impl Default for TileOptions {
    fn default() -> Self {
        TileOptions {
            lanes: 4,
            bounds: true,
            unroll: 4,
            rows: true,
            stream: true,
            prefetch: true,
            native_f16: false,
            native_bf16: false,
            half_stores: false,
            f16_stores: false,
            bf16_stores: false,
            defer_stores: true,
            checked: true,
        }
    }
}

/// Something in a kernel that the tiling passes cannot lower.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TileError {
    /// Where in the source.
    pub span: Span,
    /// What is not supported, in the user's terms.
    pub message: String,
}

impl TileError {
    pub(crate) fn new(span: Span, message: impl Into<String>) -> TileError {
        TileError { span, message: message.into() }
    }

    /// The error as a source diagnostic.
    pub fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::error(self.message.clone(), self.span, "here")
    }
}

/// `G` when the programs of `f` use atomics (and volatile loads) only on locks chosen by
/// `program_id(0) % G`, `G` a constant of 2 or more (the seed backward's `row %
/// GROUP_SIZE_M`), each lock word touched by the programs of one residue only: programs
/// of different groups never wait for each other, so the runtime may give each worker its
/// own groups (lnc-runtime's `Programs::Grouped`).
pub fn program_groups(f: &lnc_bir::Function) -> Option<i64> {
    let rewritten = carried::rewrite(f);
    let f = rewritten.as_ref().unwrap_or(f);
    locks::program_groups(f, &provenance::analyze(f).ok()?)
}

/// Lowers a specialized kernel from block IR to loop IR.
pub fn lower(f: &lnc_bir::Function, opts: &TileOptions) -> Result<lnc_lir::Function, TileError> {
    // The unrolled loop's bound is rounded down with a mask of `-(unroll · lanes)`, which
    // needs a power of two.
    for (what, n) in [("lanes per tile", opts.lanes), ("accumulators per reduction (unroll)", opts.unroll)] {
        if !(1..=64).contains(&n) || !n.is_power_of_two() {
            let span = f.body.insts.first().map_or(Span::DUMMY, |&i| f.span(i));
            return Err(TileError::new(span, format!("{n} {what}: expected a power of two from 1 to 64")));
        }
    }
    let rewritten = carried::rewrite(f);
    if cfg!(debug_assertions)
        && let Some(g) = &rewritten
        && let Err(e) = lnc_bir::verify::verify(g)
    {
        panic!("the rewrite of carried pointer blocks of `{}` is invalid (a compiler bug):\n{e}", f.name);
    }
    let f = rewritten.as_ref().unwrap_or(f);
    let prov = provenance::analyze(f)?;
    // Reordering keeps every value, so the provenance found holds for the result.
    let deferred = if opts.defer_stores { defer::run(f, &prov, opts.checked) } else { None };
    let f = deferred.as_ref().unwrap_or(f);
    if cfg!(debug_assertions)
        && deferred.is_some()
        && let Err(e) = lnc_bir::verify::verify(f)
    {
        panic!("deferring the stores of `{}` built invalid block IR (a compiler bug):\n{e}", f.name);
    }
    let uses = uses::analyze(f);
    let mut lir = fusion::Lowerer::new(f, *opts, prov, uses).run()?;
    if opts.rows {
        let kept = rows::Kept { half: opts.half_stores, f16: opts.f16_stores, bf16: opts.bf16_stores };
        rows::run(&mut lir, opts.native_f16, opts.stream, kept);
    }
    if opts.bounds {
        bounds::run(&mut lir);
    }
    accum::run(&mut lir, opts.unroll);
    // Prefetches first: the streaming pass may split a host loop in three, and its copies
    // keep the prefetches.
    if opts.prefetch {
        prefetch::run(&mut lir);
    }
    if opts.stream {
        stream::run(
            &mut lir,
            stream::Halves {
                f16: opts.half_stores || opts.f16_stores,
                bf16: opts.half_stores || opts.bf16_stores,
            },
        );
    }
    never::run(&mut lir);
    dce::run(&mut lir);
    if cfg!(debug_assertions)
        && let Err(e) = lnc_lir::verify(&lir)
    {
        panic!("the tiling of `{}` built invalid loop IR (a compiler bug):\n{e}", f.name);
    }
    Ok(lir)
}
