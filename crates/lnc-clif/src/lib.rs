//! # Cranelift code generation: loop IR to machine code
//!
//! [`compile`] translates one loop-IR [`Function`](lnc_lir::Function) into one Cranelift
//! function with the kernel ABI of [`lnc_runtime::abi`], compiles it for the host
//! (x86-64 features detected by `cranelift-native`, `opt_level=speed`) and returns a
//! [`CompiledKernel`] that the launcher runs.
//!
//! The translation is direct, one loop-IR instruction at a time, driven the way
//! rustc_codegen_cranelift drives `cranelift-frontend`: the blocks of every structured
//! construct are created up front, one `FunctionCx` carries the builder and the
//! value map, `codegen_*` functions emit instructions, and loop-carried values travel as
//! block parameters. The representation of values (tiles as 128-bit vectors or lists of
//! scalars) is described in `value.rs`.
//!
//! Semantics the translation guarantees beyond Cranelift's own:
//! - a masked-off lane of a load, store or atomic is never accessed;
//! - integer division or remainder by zero gives 0 and `MIN / -1` wraps (no trap);
//! - shifts by the bit width or more give 0 (`>>` of a negative signed value: -1), as
//!   NumPy computes them in Triton's interpreter;
//! - float to integer casts saturate (NaN gives 0);
//! - `fp16`/`bf16` are stored in 16 bits and computed in `f32`, every result rounded to
//!   its dtype (to nearest even), with vectorized conversions (`half.rs`);
//! - with [`CodegenOptions::checked`], every access is checked against the bounds of
//!   the argument its site names; a violation records the fault in the program context
//!   and returns `Status::OutOfBounds` instead of touching memory;
//! - every turn of a `while` loop that uses atomics or volatile loads first checks whether a program of the
//!   launch has faulted (`ProgramCtx::stop`), and returns `Status::Cancelled` if so: a
//!   program waiting for a lock that a faulted program holds gives up instead of spinning
//!   forever.

mod base;
mod chain;
mod evex;
mod f16c;
mod half;
mod helpers;
mod hoist;
mod induction;
mod marks;
mod memory;
mod num;
mod ports;
mod prefetch;
mod stream;
mod value;
mod vex;
mod vmath;
mod wide;
mod widen;

use std::sync::{Mutex, OnceLock};

use cranelift_codegen::ir::{AbiParam, UserFuncName, types};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};
use lnc_runtime::KernelFn;
pub use stream::{Patched, default_threshold as default_stream_threshold};

/// How to compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodegenOptions {
    /// Bounds-check every memory access (safe launches).
    pub checked: bool,
    /// Keep the Cranelift IR before and after optimization and the machine code as text
    /// in [`CompiledKernel::text`].
    pub emit_text: bool,
    /// Bytes a launch must store through a loop's streaming stores (the loop's element
    /// count times the number of programs) for them to bypass the caches; `u64::MAX`
    /// never streams. Default: [`default_stream_threshold`].
    pub stream_bytes: u64,
    /// Emit some vector subtractions of a loop with more additions than multiplications
    /// as multiply-adds by 1 (the same bits), which run on the multiply units, when the
    /// host has AVX and FMA (`ports.rs`). Default: on.
    pub fused_subs: bool,
    /// Convert `fp16` tiles with the CPU's F16C instructions, one per four lanes each way,
    /// when the host has F16C and AVX (module `f16c`), instead of integer bit manipulation.
    /// The same bits either way. Default: on.
    pub f16c: bool,
    /// Compute the loops that qualify (module `wide`) in 256-bit vectors, when the host
    /// has AVX2: Cranelift emits them in 128-bit vectors and module `widen` rewrites
    /// them. The same bits either way. Default: on.
    pub wide: bool,
    /// Compute the wide loops in 512-bit vectors when the host has AVX-512 (F, DQ, BW and
    /// VL) and some loop has tiles of a multiple of 16 lanes (`lnc` tiles kernels with
    /// `fp16`/`bf16` arguments so): a wide part is then 16 lanes, and only such loops
    /// qualify. Module `evex` encodes the function
    /// again; where that cannot be proven, the kernel is compiled in 256-bit loops. The
    /// same bits either way. Default: off.
    pub zmm: bool,
    /// In 512-bit loops, round `f32` lanes stored as `bf16` with AVX512-BF16's
    /// `vcvtneps2bf16` where the host has it ([`rounds_bf16_natively`]), instead of
    /// twelve integer instructions per part: a tile holding a subnormal, which that
    /// instruction flushes to zero, has those lanes rounded again with integers. The same
    /// bits either way. Default: on.
    pub bf16_cvt: bool,
    /// Broadcast each scalar a wide loop's tiles use (a constant, or a value defined in
    /// front of the loop) inside the loop, from bytes of scratch stored in front of it,
    /// instead of once in front of it: a broadcast held across the loop is a register that
    /// Cranelift's allocator may spill, and a reload of 16 bytes is not wide. Set for a
    /// second try when the first compile's wide loops are refused (module `widen`); off
    /// otherwise.
    pub bcast_in_loop: bool,
    /// A wide loop's result leaves it through one marked store of each wide part and
    /// 16-byte loads of it, instead of in registers (`wide::leave`). Set for a try after
    /// the first compile's extractions are refused (module `widen`: the register allocator
    /// spilled a wide result before they read it); off otherwise.
    pub stage_exits: bool,
    /// Run Cranelift's verifier on the function before compiling it (a compiler bug in
    /// lnc's code generation is then an error, not whatever Cranelift makes of invalid IR).
    /// Default: in debug builds, as lnc's own verifiers (`lnc::CompileOptions::verify`);
    /// it takes about 4 % of a kernel's compile time.
    pub verify: bool,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            checked: true,
            emit_text: false,
            stream_bytes: stream::default_threshold(),
            fused_subs: true,
            f16c: true,
            wide: true,
            zmm: false,
            bf16_cvt: true,
            bcast_in_loop: false,
            stage_exits: false,
            verify: cfg!(debug_assertions),
        }
    }
}

impl CodegenOptions {
    /// Lanes of one wide part: 16 with [`CodegenOptions::zmm`] on a host with AVX-512,
    /// else 8.
    pub(crate) fn wide_per(&self) -> u8 {
        if self.zmm && computes_zmm() { wide::ZMM_PER } else { wide::YMM_PER }
    }
}

/// Why a function could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// The function uses something code generation does not handle yet.
    #[error("unsupported in code generation: {0}")]
    Unsupported(String),
    /// The loop IR breaks one of its invariants (a bug of the pass that produced it).
    #[error("invalid loop IR: {0}")]
    InvalidIr(String),
    /// The generated Cranelift IR does not verify (a bug of this crate).
    #[error("Cranelift verifier errors (compiler bug):\n{0}")]
    Verifier(String),
    /// Cranelift could not compile or link the function.
    #[error("Cranelift error: {0}")]
    Cranelift(String),
    /// Cranelift does not support the host machine.
    #[error("host machine not supported by Cranelift: {0}")]
    Host(String),
}

/// The text forms of a compiled kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelText {
    /// Cranelift IR as generated.
    pub clif: String,
    /// Cranelift IR after Cranelift's optimizations.
    pub opt_clif: String,
    /// Machine code, as Cranelift prints it after register allocation.
    pub asm: String,
    /// The machine code as it runs, after lnc's rewrites of Cranelift's output (512-bit
    /// and 256-bit forms, F16C and `bf16` conversions, non-temporal stores, prefetches),
    /// disassembled at offsets from the function's start.
    pub machine: String,
}

/// A kernel compiled to machine code.
///
/// The code lives as long as this value: the function pointer of [`entry`](Self::entry)
/// must not be called after it is dropped.
pub struct CompiledKernel {
    entry: KernelFn,
    scratch_bytes: usize,
    patched: Patched,
    prefetches: u32,
    widened: u32,
    unstreamed: bool,
    bf16_narrowed: bool,
    text: Option<KernelText>,
    /// Owns the code. Never touched after finalization except to free it; the mutex only
    /// makes the kernel `Sync` (the module holds a `RefCell`).
    module: Mutex<Option<JITModule>>,
}

impl CompiledKernel {
    /// The kernel's entry point, with the ABI of [`lnc_runtime::abi`].
    pub fn entry(&self) -> KernelFn {
        self.entry
    }

    /// Scratch bytes each program needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_bytes
    }

    /// Whether 256-bit loops had `fp16` tile stores marked streaming that could not all
    /// store non-temporally (module `widen`: a stored register read after its store), and
    /// so store them cached: tiled without `f16_stores`, such rows go through the row
    /// helper, which streams them.
    pub fn unstreamed(&self) -> bool {
        self.unstreamed
    }

    /// Whether 256-bit loops rounding `bf16` stores were refused (module `widen`: no
    /// register free at a store, or a spill the proof could not follow) and the kernel
    /// ended without 256-bit loops: tiled without `bf16_stores`, such rows go through the
    /// row helper, and its loops may widen again.
    pub fn bf16_narrowed(&self) -> bool {
        self.bf16_narrowed
    }

    /// The streaming stores rewritten to non-temporal stores (and those left cached).
    pub fn patched(&self) -> Patched {
        self.patched
    }

    /// The prefetch instructions in the machine code (see lnc-tile's `prefetch` pass).
    pub fn prefetches(&self) -> u32 {
        self.prefetches
    }

    /// The instructions of wide loops rewritten from `xmm` to `ymm` (module `widen`) or
    /// `zmm` (module `evex`); 0 when no loop qualified, or the rewrite could not be proven
    /// and the kernel was compiled in 128-bit vectors.
    pub fn widened(&self) -> u32 {
        self.widened
    }

    /// The text forms, when compiled with [`CodegenOptions::emit_text`].
    pub fn text(&self) -> Option<&KernelText> {
        self.text.as_ref()
    }
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledKernel")
            .field("entry", &(self.entry as *const u8))
            .field("scratch_bytes", &self.scratch_bytes)
            .finish()
    }
}

impl Drop for CompiledKernel {
    fn drop(&mut self) {
        let module = self.module.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(module) = module {
            // SAFETY: the code is only reachable through `entry`, whose contract ends
            // with the kernel's life.
            unsafe { module.free_memory() };
        }
    }
}

/// Whether kernels compiled on this host convert `fp16` tiles with F16C when
/// [`CodegenOptions::f16c`] is on (the host has F16C and AVX).
pub fn converts_f16_natively() -> bool {
    host_isa().is_ok_and(|isa| f16c::available(&*isa))
}

/// Whether kernels compiled on this host compute the loops that qualify in 256-bit
/// vectors when [`CodegenOptions::wide`] is on (the host has AVX2, module `wide`).
pub fn computes_wide() -> bool {
    host_isa().is_ok_and(|isa| marks::isa_has(&*isa, "has_avx2"))
}

/// Whether kernels compiled on this host compute the loops that qualify in 512-bit
/// vectors with [`CodegenOptions::zmm`] (the host has AVX-512 F, DQ, BW and VL, module
/// `evex`).
pub fn computes_zmm() -> bool {
    static ZMM: OnceLock<bool> = OnceLock::new();
    *ZMM.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            computes_wide()
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Whether the 512-bit loops of kernels compiled on this host round `bf16` stores with
/// `vcvtneps2bf16` when [`CodegenOptions::bf16_cvt`] is on (the host has AVX-512 and
/// AVX512-BF16).
pub fn rounds_bf16_natively() -> bool {
    static BF16: OnceLock<bool> = OnceLock::new();
    *BF16.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            computes_zmm() && std::arch::is_x86_feature_detected!("avx512bf16")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Whether some loop of `f` would be computed in wide vectors on this host with
/// [`CodegenOptions::wide`] (and `f16c` as [`CodegenOptions::f16c`]): in 256 bits, or in
/// 512 where its tiles allow and the host has AVX-512 (a loop that qualifies for 256 bits
/// qualifies for 512 when its tiles are a multiple of 16 lanes; only 512-bit loops round
/// and store `bf16` tiles).
pub fn has_wide_loops(f: &lnc_lir::Function, f16c: bool) -> bool {
    let f16c = f16c && converts_f16_natively();
    computes_wide()
        && (wide::any_loop(f, f16c, wide::YMM_PER)
            || (computes_zmm() && wide::any_loop(f, f16c, wide::ZMM_PER)))
}

/// The host ISA, built once: feature detection and flag parsing are not free and the
/// result never changes.
fn host_isa() -> Result<OwnedTargetIsa, CodegenError> {
    static ISA: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, name: &str, value: &str| {
            flags.set(name, value).map_err(|e| format!("setting {name}={value}: {e}"))
        };
        set(&mut flags, "opt_level", "speed")?;
        // Verified once in `translate` before compiling (`CodegenOptions::verify`); a second
        // run inside Cranelift would only cost compile time.
        set(&mut flags, "enable_verifier", "false")?;
        // JIT code calls helpers anywhere in the address space.
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        // Where a kernel lands modulo the 64-byte fetch line decides how its hot loops
        // straddle lines: without this, two compiles of one kernel ran up to 5 % apart.
        set(&mut flags, "log2_min_function_alignment", "6")?;
        let isa = cranelift_native::builder().map_err(str::to_string)?;
        isa.finish(settings::Flags::new(flags)).map_err(|e| e.to_string())
    })
    .clone()
    .map_err(CodegenError::Host)
}

fn new_module() -> Result<JITModule, CodegenError> {
    let mut builder = JITBuilder::with_isa(host_isa()?, cranelift_module::default_libcall_names());
    for (name, ptr) in helpers::symbols() {
        builder.symbol(name, ptr);
    }
    Ok(JITModule::new(builder))
}

fn cranelift_error(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Cranelift(e.to_string())
}

/// A Cranelift context taken from this thread's pool, given back cleared when dropped.
///
/// A context keeps its allocations across functions, the register allocator's among them,
/// and Cranelift's docs ask for one to be reused "to avoid needless allocator thrashing":
/// with a new one per compile, `malloc` and `free` took a tenth of a cold compile of the
/// seed's dx kernel. Nothing of one function survives `Context::clear` but capacity.
struct PooledContext(cranelift_codegen::Context);

thread_local! {
    static CONTEXTS: std::cell::RefCell<Vec<cranelift_codegen::Context>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Contexts a thread keeps: one per compile in progress on it (a refused widening compiles
/// the kernel again while its first context is alive), and no more, so that a thread that
/// once compiled a huge kernel does not hold several contexts' worth of its memory.
const POOLED_CONTEXTS: usize = 2;

impl PooledContext {
    fn take() -> Self {
        let pooled = CONTEXTS.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()));
        PooledContext(pooled.ok().flatten().unwrap_or_else(cranelift_codegen::Context::new))
    }
}

impl Drop for PooledContext {
    fn drop(&mut self) {
        // An empty context allocates nothing.
        let mut ctx = std::mem::replace(&mut self.0, cranelift_codegen::Context::new());
        ctx.clear();
        // `try_with`: a thread being torn down has no pool left, and the context is freed.
        let _ = CONTEXTS.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut()
                && p.len() < POOLED_CONTEXTS
            {
                p.push(ctx);
            }
        });
    }
}

impl std::ops::Deref for PooledContext {
    type Target = cranelift_codegen::Context;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for PooledContext {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// A kernel function declared and translated, not yet compiled.
struct Translated {
    module: JITModule,
    id: cranelift_module::FuncId,
    ctx: PooledContext,
    scratch_bytes: usize,
    /// Marked stores of wide parts emitted (module `wide`).
    wide_stores: u32,
    /// Lane groups taken out of wide parts (`wide::leave`).
    wide_extracts: u32,
}

fn translate(f: &lnc_lir::Function, opts: &CodegenOptions) -> Result<Translated, CodegenError> {
    let mut module = new_module()?;
    let mut sig = module.make_signature();
    let ptr = module.target_config().pointer_type();
    sig.params.extend([AbiParam::new(ptr); 4]);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I32));
    let name = if f.name.is_empty() { "kernel" } else { &f.name };
    let id = module.declare_function(name, Linkage::Local, &sig).map_err(cranelift_error)?;
    let mut ctx = PooledContext::take();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let (scratch_bytes, wide_stores, wide_extracts) = base::codegen_fn(&mut module, &mut ctx.func, f, opts)?;
    if opts.verify
        && let Err(errors) = cranelift_codegen::verify_function(&ctx.func, module.isa().flags())
    {
        return Err(CodegenError::Verifier(cranelift_codegen::print_errors::pretty_verifier_error(
            &ctx.func, None, errors,
        )));
    }
    Ok(Translated { module, id, ctx, scratch_bytes, wide_stores, wide_extracts })
}

/// Compiles `f` for the host.
pub fn compile(f: &lnc_lir::Function, opts: &CodegenOptions) -> Result<CompiledKernel, CodegenError> {
    // Parts of 16 lanes only where some loop has tiles of a multiple of 16 lanes.
    if opts.zmm && !(computes_zmm() && wide::any_loop(f, opts.f16c && converts_f16_natively(), wide::ZMM_PER))
    {
        return compile(f, &CodegenOptions { zmm: false, ..*opts });
    }
    let Translated { mut module, id, mut ctx, scratch_bytes, wide_stores, wide_extracts } =
        translate(f, opts)?;
    let clif = opts.emit_text.then(|| ctx.func.display().to_string());
    ctx.set_disasm(opts.emit_text);
    // Compiled here rather than by `define_function` so that the marked stores can be
    // rewritten before the code is placed (module `stream`).
    ctx.compile(module.isa(), &mut Default::default())
        .map_err(|e| cranelift_error(format!("{:?}", e.inner)))?;
    let compiled = ctx.compiled_code().ok_or_else(|| cranelift_error("no compiled code"))?;
    let mut code = compiled.code_buffer().to_vec();
    let patched = stream::patch(&mut code, compiled.buffer.traps());
    let prefetches = prefetch::patch(&mut code, compiled.buffer.traps())?;
    let write_prefetches = prefetch::patch_write(&mut code, compiled.buffer.traps())?;
    let (widened, narrowed) = f16c::patch(&mut code, compiled.buffer.traps())?;
    // Each wide loop's code, from the first to the last instruction of its source
    // location: Cranelift places what it hoists out of the loop (a broadcast) in front of
    // it with other code, and the blocks of the loop's bounds checks in between.
    let mut spans = std::collections::BTreeMap::<u32, (usize, usize)>::new();
    for s in compiled.buffer.get_srclocs_sorted() {
        if let Some(k) = wide::loop_of(s.loc) {
            let e = spans.entry(k).or_insert((s.start as usize, s.end as usize));
            *e = (e.0.min(s.start as usize), e.1.max(s.end as usize));
        }
    }
    let spans: Vec<(usize, usize)> = spans.into_values().collect();
    let mut relocs: Vec<_> = compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    let zmm = opts.wide_per() == wide::ZMM_PER;
    let mut offsets: Vec<u32> = relocs.iter().map(|r| r.offset).collect();
    // For the listing only: it decodes the whole function once more.
    let placeholders = if opts.emit_text { widen::placeholders(&code) } else { 0 };
    let mut outcome = widen::Outcome::default();
    let ymm = match widen::patch(
        &mut code,
        compiled.buffer.traps(),
        &spans,
        (wide_stores, wide_extracts),
        zmm,
        &mut offsets,
        &mut outcome,
    ) {
        Ok(n) => n,
        // Code without wide loops has nothing to refuse.
        Err(why) if !opts.wide => {
            return Err(CodegenError::InvalidIr(format!("widening without wide loops: {}", why.0)));
        }
        // The same kernel again (module `widen`): first, where loops' results left them in
        // registers, with them stored (a result the allocator spilled before its lanes were
        // taken out is stored before anything else); then with the loops' broadcasts inside
        // them (no register held across a loop for them, so none spilled), then in 256-bit
        // loops, then in 128-bit vectors; the listing says why.
        Err(why) => {
            let width = if zmm { 512 } else { 256 };
            let (then, next) = if why.at_extraction() && !opts.stage_exits {
                ("with its loops' results stored", CodegenOptions { stage_exits: true, ..*opts })
            } else if !opts.bcast_in_loop {
                ("with its broadcasts inside the loops", CodegenOptions { bcast_in_loop: true, ..*opts })
            } else if zmm {
                ("without them", CodegenOptions { zmm: false, ..*opts })
            } else {
                ("without them", CodegenOptions { wide: false, ..*opts })
            };
            let mut k = compile(f, &next)?;
            let bf16 = [wide::BF16_STORE_MARK, wide::BF16_STREAM_MARK]
                .iter()
                .any(|&m| marks::offsets(compiled.buffer.traps(), m).next().is_some());
            k.bf16_narrowed |= bf16 && !zmm && k.widened == 0;
            if let Some(t) = &mut k.text {
                // The next compile's notes (above) say what it became.
                t.asm.push_str(&format!(
                    "; {width}-bit loops refused, the kernel compiled again {then}: {} (an offset of the \
                     refused code)\n",
                    why.0
                ));
            }
            return Ok(k);
        }
    };
    for (r, o) in relocs.iter_mut().zip(offsets) {
        r.offset = o;
    }
    let alignment = u64::from(compiled.buffer.alignment);
    module.define_function_bytes(id, alignment, &code, &relocs).map_err(cranelift_error)?;
    let text = clif.map(|clif| KernelText {
        clif,
        opt_clif: ctx.func.display().to_string(),
        machine: {
            let symbols: Vec<(usize, String)> = relocs
                .iter()
                .map(|r| {
                    let name = match &r.name {
                        cranelift_module::ModuleRelocTarget::User { namespace: 0, index } => module
                            .declarations()
                            .get_function_decl(cranelift_module::FuncId::from_u32(*index))
                            .name
                            .clone()
                            .unwrap_or_default(),
                        other => format!("{other:?}"),
                    };
                    (r.offset as usize, name)
                })
                .collect();
            widen::listing(&code, &symbols)
        },
        asm: {
            let mut asm = ctx.compiled_code().and_then(|c| c.vcode.clone()).unwrap_or_default();
            if patched != Patched::default() {
                // Cranelift prints the code before the rewrite of module `stream`.
                asm.push_str(&format!(
                    "; {} store(s) of the streaming copies of loops above are rewritten after \
                     Cranelift from movups/movupd to movntps/movntpd (non-temporal); {} left cached\n",
                    patched.streamed, patched.skipped
                ));
            }
            if ymm > 0 && zmm {
                asm.push_str(&format!(
                    "; {ymm} instructions of the 512-bit loops above are rewritten after Cranelift from \
                     xmm to zmm (EVEX, the function encoded again; module evex)\n"
                ));
            } else if ymm > 0 {
                asm.push_str(&format!(
                    "; {ymm} instructions of the 256-bit loops above are rewritten after Cranelift from \
                     xmm to ymm (VEX.L set, or moves between registers encoded again; module widen)\n"
                ));
            }
            if ymm > 0 && placeholders > 0 {
                asm.push_str(&format!(
                    "; {placeholders} of those are vroundps placeholders, rewritten to lanes taken out of a wide \
                     loop's result: mode 3 (trunc) to lanes 4-7 ({}){}\n",
                    if zmm { "vextractf32x4 $1" } else { "vextractf128 $1" },
                    if zmm { ", mode 0 (nearest) to lanes 8-15 (vextractf64x4 $1)" } else { "" }
                ));
            }
            if outcome.vex_encoded > 0 {
                asm.push_str(&format!(
                    "; {} SSE instructions that Cranelift encodes without VEX (register moves, spills, reloads, \
                     a scalar min, max or conversion) are encoded again with VEX, whose high bits are zeroed: an SSE instruction \
                     after wide code waits for the high halves (module vex)\n",
                    outcome.vex_encoded
                ));
            }
            let packed = if ymm > 0 && !zmm { widen::bf16_packed_stores(&code) } else { 0 };
            if packed > 0 {
                asm.push_str(&format!(
                    "; {packed} of the bf16 stores of the 256-bit loops above, rounded in the loop, pack into another \
                     register that nothing reads after them and store it (vextracti128 $1; vpackusdw xmm; then vmovdqu, \
                     or vmovntdq where it streams; the function encoded again)\n"
                ));
            }
            let through = if ymm > 0 && !zmm { widen::f16_register_stores(&code) } else { 0 };
            if through > 0 {
                asm.push_str(&format!(
                    "; {through} of the fp16 stores of the 256-bit loops above convert into their register, \
                     or another that nothing reads after them, and store it (vcvtps2ph xmm, ymm; then vmovdqu, or vmovntdq where it streams; \
                     the function encoded again)\n"
                ));
            }
            asm.push_str(&marks::note(
                prefetches,
                "byte loads",
                prefetch::MARK,
                "prefetchnta of the same address",
            ));
            asm.push_str(&marks::note(
                write_prefetches,
                "byte loads",
                prefetch::WRITE_MARK,
                "prefetchw (prefetcht0 where the host has no prefetchw) of the same address",
            ));
            asm.push_str(&marks::note(
                widened,
                "vpmovzxwd loads of fp16 tiles",
                f16c::MARK,
                "vcvtph2ps (fp16 to fp32) of the same address",
            ));
            asm.push_str(&marks::note(
                narrowed,
                "vpextrq stores of fp16 tiles",
                f16c::NARROW_MARK,
                "vcvtps2ph (fp32 to fp16, nearest even) to the same address",
            ));
            for (mark, store) in [(wide::BF16_CVT_MARK, "a"), (wide::BF16_CVT_STREAM_MARK, "a non-temporal")]
            {
                // Rewritten only when the 512-bit proof held.
                let count = if zmm && ymm > 0 {
                    marks::offsets(compiled.buffer.traps(), mark).count() as u32
                } else {
                    0
                };
                asm.push_str(&marks::note(
                    count,
                    "vpextrq stores of bf16 tiles",
                    mark,
                    &format!(
                        "vcvtneps2bf16 (fp32 to bf16, nearest even; lanes of subnormals rounded with \
                         integers) and {store} 32-byte store to the same address"
                    ),
                ));
            }
            asm
        },
    });
    module.finalize_definitions().map_err(cranelift_error)?;
    let code = module.get_finalized_function(id);
    // SAFETY: the function was declared with the kernel ABI's signature (four pointers
    // and an i64 count, an i32 status) in the host's default calling convention, which is
    // "C".
    let entry = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    Ok(CompiledKernel {
        entry,
        scratch_bytes,
        patched,
        prefetches,
        widened: ymm,
        unstreamed: outcome.unstreamed,
        bf16_narrowed: false,
        text,
        module: Mutex::new(Some(module)),
    })
}

/// The Cranelift IR of `f` as generated, before Cranelift's optimizations (no machine
/// code is produced).
pub fn clif_text(f: &lnc_lir::Function, opts: &CodegenOptions) -> Result<String, CodegenError> {
    let t = translate(f, opts)?;
    Ok(t.ctx.func.display().to_string())
}

/// The machine code of `f` as Cranelift prints it.
pub fn asm_text(f: &lnc_lir::Function, opts: &CodegenOptions) -> Result<String, CodegenError> {
    let k = compile(f, &CodegenOptions { emit_text: true, ..*opts })?;
    Ok(k.text.as_ref().map(|t| t.asm.clone()).unwrap_or_default())
}

// The flags of `row_load.once` live in the scratch bytes the runtime zeroes.
const _: () = assert!(lnc_lir::SCRATCH_FLAG_BYTES as usize == lnc_runtime::abi::ZEROED_SCRATCH_BYTES);
