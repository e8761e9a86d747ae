//! A specialized, compiled kernel and its launches.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use lnc_bir::{DType, Elem};
use lnc_diag::SourceFile;
use lnc_front::Signature;
use lnc_runtime::{Bounds, LaunchError, Programs, Status};

use crate::arg::{Arg, Scalar};
use crate::error::{Error, OutOfBounds, Result};
use crate::module::Module;
use crate::pipeline::{self, Artifacts, Timings};

/// A grid of programs: up to three axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid(pub [u32; 3]);

impl From<u32> for Grid {
    fn from(x: u32) -> Grid {
        Grid([x, 1, 1])
    }
}

impl From<(u32, u32)> for Grid {
    fn from((x, y): (u32, u32)) -> Grid {
        Grid([x, y, 1])
    }
}

impl From<(u32, u32, u32)> for Grid {
    fn from((x, y, z): (u32, u32, u32)) -> Grid {
        Grid([x, y, z])
    }
}

impl From<[u32; 3]> for Grid {
    fn from(g: [u32; 3]) -> Grid {
        Grid(g)
    }
}

/// A runtime parameter of a specialized kernel: what a launch must pass for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeParam {
    /// Source name.
    pub name: String,
    /// ABI slot (index among all source parameters).
    pub slot: u32,
    /// Element type.
    pub elem: Elem,
    /// The kernel stores or atomically updates through it (a writable buffer is required).
    pub written: bool,
}

/// A kernel specialized on a signature and compiled to machine code.
pub struct Kernel {
    name: String,
    file: Arc<SourceFile>,
    signature: Signature,
    params: Vec<RuntimeParam>,
    slots: usize,
    bir: lnc_bir::Function,
    lir: lnc_lir::Function,
    checked: lnc_clif::CompiledKernel,
    /// The unchecked code, and the sites of its loop IR when it was tiled apart from `lir`
    /// (an assert's fault names a site of the code that ran).
    unchecked: OnceLock<(lnc_clif::CompiledKernel, Option<Vec<lnc_lir::Site>>)>,
    /// How `unchecked` is compiled when first launched.
    unchecked_options: lnc_clif::CodegenOptions,
    /// The tiling of `unchecked`, used when it may differ from `lir`'s (a kernel with
    /// atomics): without what safe launches need around spin locks
    /// (`TileOptions::checked`).
    unchecked_tiling: lnc_tile::TileOptions,
    programs: Programs,
    pool: Option<Arc<rayon::ThreadPool>>,
    timings: Timings,
    warnings: Vec<lnc_diag::Diagnostic>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("signature", &self.signature.to_string())
            .finish()
    }
}

impl Kernel {
    pub(crate) fn new(module: &Module, name: &str, signature: Signature, arts: Artifacts) -> Result<Kernel> {
        let Artifacts { tile_opts, bir, lir, code, timings, warnings } = arts;
        // Tiled for checked code, a kernel with atomics may differ from its unchecked code:
        // stores deferred past a lock leave checks behind, and loads read before an atomic
        // are kept for after it (`TileOptions::checked`). It is tiled again on the
        // first unchecked launch, which compiles that code anyway: the safe launch's
        // compile does not pay for it.
        let unchecked_tiling = lnc_tile::TileOptions { checked: false, ..tile_opts };
        let checked = code.ok_or_else(|| Error::Internal("pipeline produced no code".into()))?;
        let written: BTreeSet<u32> = written_slots(&lir);
        let programs = programs_of(&bir, &lir, module.jit.inner.options.group_programs);
        let params = bir
            .params
            .iter()
            .map(|p| RuntimeParam {
                name: p.name.clone(),
                slot: p.slot,
                elem: bir.ty(p.value).elem,
                written: written.contains(&p.slot),
            })
            .collect();
        let slots = module.ast.function(name).map_or(0, |f| f.params.len());
        Ok(Kernel {
            name: name.to_string(),
            file: module.file.clone(),
            signature,
            params,
            slots,
            bir,
            lir,
            checked,
            unchecked: OnceLock::new(),
            unchecked_options: pipeline::codegen_options(&module.jit.inner.options, false, false),
            unchecked_tiling,
            programs,
            pool: module.jit.inner.pool.clone(),
            timings,
            warnings,
        })
    }

    /// Whether the kernel's programs may wait for each other (it uses atomics), and whether
    /// only within groups of program ids (`Programs::Grouped`: its locks are chosen by
    /// `program_id(0) % G`), which decides how a launch hands programs to its workers.
    pub fn programs(&self) -> Programs {
        self.programs
    }

    /// The non-temporal stores in the code a safe launch runs: streaming stores of the
    /// loop IR rewritten (`streamed`), and those left cached (`skipped`: an encoding the
    /// rewrite does not know). They run only when their loop's `stream_ok` holds.
    pub fn streaming_stores(&self) -> lnc_clif::Patched {
        self.checked.patched()
    }

    /// The prefetch instructions in the machine code of safe launches (lnc-tile's
    /// `prefetch` pass: the next program's rows, fetched during a second pass over a row).
    pub fn prefetches(&self) -> u32 {
        self.checked.prefetches()
    }

    /// The instructions of the loops computed in 256-bit vectors in the machine code of
    /// safe launches ([`CompileOptions::wide`](crate::CompileOptions::wide)); 0 when none.
    pub fn widened_instructions(&self) -> u32 {
        self.checked.widened()
    }

    /// Kernel name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The signature it is specialized on.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The parameters a launch passes, in order.
    pub fn params(&self) -> &[RuntimeParam] {
        &self.params
    }

    /// The source file the kernel comes from.
    pub fn file(&self) -> &Arc<SourceFile> {
        &self.file
    }

    /// Warnings about the source found while compiling (the masked-lane lint), rendered
    /// with [`lnc_diag::render_all`] against [`Kernel::file`].
    pub fn warnings(&self) -> &[lnc_diag::Diagnostic] {
        &self.warnings
    }

    /// The optimized block IR.
    pub fn bir(&self) -> &lnc_bir::Function {
        &self.bir
    }

    /// The loop IR.
    pub fn lir(&self) -> &lnc_lir::Function {
        &self.lir
    }

    /// How long each part of the compilation took.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Runs the kernel on a grid with bounds-checked memory accesses: an access outside
    /// the buffer a pointer derives from stops the launch with [`Error::OutOfBounds`].
    /// `args` has one entry per runtime parameter ([`Kernel::params`]), in order.
    pub fn launch<'a>(&self, grid: impl Into<Grid>, args: &[Arg<'a>]) -> Result<()> {
        self.run(grid.into(), args, true)
    }

    /// Runs the kernel without bounds checks.
    ///
    /// # Safety
    /// Every access the kernel makes must be inside the buffer its pointer derives from.
    pub unsafe fn launch_unchecked<'a>(&self, grid: impl Into<Grid>, args: &[Arg<'a>]) -> Result<()> {
        self.run(grid.into(), args, false)
    }

    fn launch_error(&self, message: String) -> Error {
        Error::Launch { kernel: self.name.clone(), message }
    }

    fn run(&self, grid: Grid, args: &[Arg<'_>], checked: bool) -> Result<()> {
        // Scalar arguments convert (`f64` to `fp32`, say) as the kernel computes, and the
        // unchecked code compiled on first use folds its constants so, whatever the
        // thread's floating-point control (`lnc_runtime::FpControl`).
        let _fp = lnc_runtime::FpControl::reset();
        if args.len() != self.params.len() {
            let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            return Err(self.launch_error(format!(
                "expected {} arguments ({}), got {}",
                self.params.len(),
                names.join(", "),
                args.len()
            )));
        }
        let mut slots = vec![0u64; self.slots.max(1)];
        let mut bounds = vec![Bounds::default(); self.slots.max(1)];
        // Element offsets valid per slot, for error messages.
        let mut valid = vec![(0i64, 0i64); self.slots.max(1)];
        for (p, a) in self.params.iter().zip(args) {
            let s = p.slot as usize;
            slots[s] = self.encode(p, a, &mut bounds[s], &mut valid[s])?;
        }
        let (code, sites) = if checked {
            (&self.checked, &self.lir.sites)
        } else {
            let (code, sites) = match self.unchecked.get() {
                Some(c) => c,
                None => {
                    let c = if self.programs != Programs::Independent {
                        let lir = lnc_tile::lower(&self.bir, &self.unchecked_tiling)
                            .map_err(|e| Error::source(&self.file, vec![e.to_diagnostic()]))?;
                        (pipeline::codegen(&lir, &self.unchecked_options)?, Some(lir.sites))
                    } else {
                        (pipeline::codegen(&self.lir, &self.unchecked_options)?, None)
                    };
                    self.unchecked.get_or_init(|| c)
                }
            };
            (code, sites.as_ref().unwrap_or(&self.lir.sites))
        };
        // SAFETY: every pointer slot comes from a borrowed buffer that outlives the launch,
        // writable when the kernel writes through it, and its bounds describe that buffer;
        // checked code stays inside them, and unchecked code is the caller's promise
        // (`launch_unchecked` is unsafe).
        let result = unsafe {
            lnc_runtime::launch(
                code.entry(),
                grid.0,
                &slots,
                &bounds,
                code.scratch_bytes(),
                self.programs,
                self.pool.as_deref(),
            )
        };
        match result {
            Ok(()) => Ok(()),
            Err(LaunchError::Fault { status, pid, fault }) => {
                let site = sites.get(fault.site as usize).copied();
                let span = site.map(|s| s.span).unwrap_or_default();
                let (line, col) = self.file.line_col(span.start);
                let location = format!("{}:{line}:{col}", self.file.name);
                if status == Status::AssertFailed {
                    let source_line = self.file.line_text(line).to_string();
                    return Err(Error::AssertFailed {
                        kernel: self.name.clone(),
                        location,
                        source_line,
                        pid,
                    });
                }
                let param = self
                    .params
                    .iter()
                    .find(|p| p.slot == fault.arg)
                    .map_or_else(|| format!("argument {}", fault.arg), |p| p.name.clone());
                Err(Error::OutOfBounds(Box::new(OutOfBounds {
                    kernel: self.name.clone(),
                    location,
                    source_line: self.file.line_text(line).to_string(),
                    pid,
                    param,
                    offset: fault.offset,
                    valid: valid.get(fault.arg as usize).copied().unwrap_or_default(),
                })))
            }
            Err(e) => Err(self.launch_error(e.to_string())),
        }
    }

    fn encode(
        &self,
        p: &RuntimeParam,
        a: &Arg<'_>,
        bounds: &mut Bounds,
        valid: &mut (i64, i64),
    ) -> Result<u64> {
        let mismatch = |got: String| {
            self.launch_error(format!("parameter `{}` is `{}` but the argument is {got}", p.name, p.elem))
        };
        match (p.elem, a) {
            (Elem::Ptr(d), Arg::Buffer(b)) => {
                if b.dtype != d {
                    return Err(mismatch(format!("a buffer of {}", b.dtype)));
                }
                if p.written && !b.writable {
                    return Err(self.launch_error(format!(
                        "parameter `{}` is written by the kernel but its buffer was passed read-only (pass `&mut`)",
                        p.name
                    )));
                }
                if b.offset > b.len {
                    return Err(self.launch_error(format!(
                        "parameter `{}`: offset {} is past the end of its buffer of {} elements",
                        p.name, b.offset, b.len
                    )));
                }
                let size = d.size() as i64;
                let (off, len) = (b.offset as i64, b.len as i64);
                *bounds = Bounds { lo: -off * size, hi: (len - off) * size };
                *valid = (-off, len - off);
                // The offset stays inside the allocation (checked above), so this is in bounds.
                Ok(b.base.wrapping_add(b.offset * size as usize) as u64)
            }
            (Elem::Ptr(_), Arg::Scalar(s)) => Err(mismatch(format!("the scalar {s}"))),
            (Elem::Scalar(d), Arg::Buffer(b)) => {
                let _ = d;
                Err(mismatch(format!("a buffer of {}", b.dtype)))
            }
            (Elem::Scalar(d), Arg::Scalar(s)) => encode_scalar(d, *s).ok_or_else(|| match s {
                Scalar::Int(..) | Scalar::Bool(_) if d.is_int() => self.launch_error(format!(
                    "parameter `{}` is `{}` but the argument {s} is out of its range",
                    p.name, p.elem
                )),
                _ => mismatch(format!("{s}")),
            }),
        }
    }
}

/// Packs a scalar into an ABI slot of dtype `d`; `None` when it does not fit.
fn encode_scalar(d: DType, s: Scalar) -> Option<u64> {
    let int = |v: i64| -> Option<u64> {
        let ok = match d {
            DType::I1 => v == 0 || v == 1,
            DType::I8 => i8::try_from(v).is_ok(),
            DType::I16 => i16::try_from(v).is_ok(),
            DType::I32 => i32::try_from(v).is_ok(),
            DType::I64 => true,
            DType::U8 => u8::try_from(v).is_ok(),
            DType::U16 => u16::try_from(v).is_ok(),
            DType::U32 => u32::try_from(v).is_ok(),
            DType::U64 => v >= 0,
            _ => false,
        };
        ok.then_some(v as u64)
    };
    match (d, s) {
        (DType::F32, Scalar::F32(v)) => Some(v.to_bits() as u64),
        (DType::F32, Scalar::F64(v)) => Some((v as f32).to_bits() as u64),
        (DType::F64, Scalar::F64(v)) => Some(v.to_bits()),
        (DType::F64, Scalar::F32(v)) => Some((v as f64).to_bits()),
        (DType::F16, Scalar::F32(v)) => Some(half::f16::from_f32(v).to_bits() as u64),
        (DType::BF16, Scalar::F32(v)) => Some(half::bf16::from_f32(v).to_bits() as u64),
        (DType::U64, Scalar::Int(v, DType::U64)) => Some(v as u64),
        (_, Scalar::Int(v, _)) if d.is_int() => int(v),
        (DType::I1, Scalar::Bool(b)) => Some(b as u64),
        (DType::F32 | DType::F64, Scalar::Int(..)) => None,
        _ => None,
    }
}

/// Whether the kernel's programs may wait for each other (a kernel with atomics or
/// volatile loads), and whether only within groups of program ids (its locks are chosen
/// by `program_id(0) % G`).
fn programs_of(bir: &lnc_bir::Function, lir: &lnc_lir::Function, grouped: bool) -> Programs {
    use lnc_lir::Opcode;
    let mut atomics = false;
    lir.walk(|i| {
        atomics |= matches!(
            lir.insts[i].opcode,
            Opcode::Atomic { .. } | Opcode::AtomicCas { .. } | Opcode::Load { volatile: true, .. }
        )
    });
    if !atomics {
        return Programs::Independent;
    }
    match lnc_tile::program_groups(bir).filter(|_| grouped).and_then(|g| u32::try_from(g).ok()) {
        Some(groups) => Programs::Grouped { groups },
        None => Programs::Synchronizing,
    }
}

/// Slots of the pointer arguments the kernel writes through.
fn written_slots(lir: &lnc_lir::Function) -> BTreeSet<u32> {
    use lnc_lir::Opcode;
    let mut out = BTreeSet::new();
    lir.walk(|i| {
        let site = match lir.insts[i].opcode {
            Opcode::Store { site, .. }
            | Opcode::Atomic { site, .. }
            | Opcode::AtomicCas { site, .. }
            | Opcode::RowStore { site, .. } => site,
            _ => return,
        };
        if let Some(s) = lir.sites.get(site as usize) {
            out.insert(s.arg);
        }
    });
    out
}
