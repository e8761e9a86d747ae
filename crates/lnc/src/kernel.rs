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
    /// The loop IR of `code`.
    lir: lnc_lir::Function,
    /// The code compiled with the kernel: unchecked when `reach` holds a proof (safe
    /// launches it covers run it), else checked.
    code: lnc_clif::CompiledKernel,
    /// Whether `code` has bounds checks.
    code_checked: bool,
    /// The proof of safe launches' bounds (`CompileOptions::prove_bounds`), over `bir`.
    reach: Option<lnc_bir::reach::Reach>,
    /// The other variant (checked or not), compiled on first use, and the sites of its loop
    /// IR when it was tiled apart from `lir` (a fault names a site of the code that ran).
    other: OnceLock<(lnc_clif::CompiledKernel, Option<Vec<lnc_lir::Site>>)>,
    /// How `other` is compiled.
    other_options: lnc_clif::CodegenOptions,
    /// The tiling of `lir`. A kernel whose programs synchronize is tiled apart for checked
    /// and unchecked code (`TileOptions::checked`).
    tiling: lnc_tile::TileOptions,
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
        let Artifacts { tile_opts, bir, lir, code, checked, reach, timings, warnings } = arts;
        let code = code.ok_or_else(|| Error::Internal("pipeline produced no code".into()))?;
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
            code,
            code_checked: checked,
            reach,
            other: OnceLock::new(),
            other_options: pipeline::codegen_options(&module.jit.inner.options, !checked, false),
            tiling: tile_opts,
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

    /// The non-temporal stores in the code compiled with the kernel (what a safe launch
    /// runs: unchecked where the kernel has a proof of its bounds): streaming stores of the
    /// loop IR rewritten (`streamed`), and those left cached (`skipped`: an encoding the
    /// rewrite does not know). They run only when their loop's `stream_ok` holds.
    pub fn streaming_stores(&self) -> lnc_clif::Patched {
        self.code.patched()
    }

    /// The prefetch instructions in the machine code compiled with the kernel (lnc-tile's
    /// `prefetch` pass: the next program's rows, fetched during a second pass over a row).
    pub fn prefetches(&self) -> u32 {
        self.code.prefetches()
    }

    /// The instructions of the loops computed in 256-bit vectors in the machine code
    /// compiled with the kernel ([`CompileOptions::wide`](crate::CompileOptions::wide)); 0
    /// when none.
    pub fn widened_instructions(&self) -> u32 {
        self.code.widened()
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

    /// The loop IR of the code compiled with the kernel: tiled for unchecked code when the
    /// kernel has a proof of its bounds ([`Kernel::bounds_proved`]), else for checked code
    /// (the two differ only around spin locks, `lnc_tile::TileOptions::checked`).
    pub fn lir(&self) -> &lnc_lir::Function {
        &self.lir
    }

    /// How long each part of the compilation took.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Runs the kernel on a grid safely: an access outside the buffer a pointer derives
    /// from stops the launch with [`Error::OutOfBounds`]. A launch whose bounds the kernel's
    /// proof covers ([`Kernel::bounds_proved`]) runs the code without checks; the others run
    /// the bounds-checked code, compiled on the first such launch if the kernel was compiled
    /// without checks. `args` has one entry per runtime parameter ([`Kernel::params`]), in
    /// order.
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
        // code compiled on first use (`variant`) folds its constants so, whatever the
        // thread's floating-point control (`lnc_runtime::FpControl`).
        let _fp = lnc_runtime::FpControl::reset();
        self.check_grid(grid)?;
        let (slots, bounds, valid) = self.encode_all(args)?;
        let checked = checked && !self.proved(&slots, &bounds, grid);
        let (code, sites) = self.variant(checked)?;
        // SAFETY: every pointer slot comes from a borrowed buffer that outlives the launch,
        // writable when the kernel writes through it, and its bounds describe that buffer;
        // checked code stays inside them, and unchecked code runs on the caller's promise
        // (`launch_unchecked` is unsafe) or on the kernel's proof that every access of this
        // launch is inside them (`proved`).
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

    /// The code with or without bounds checks, compiled on first use, and the sites of
    /// its loop IR.
    fn variant(&self, checked: bool) -> Result<(&lnc_clif::CompiledKernel, &[lnc_lir::Site])> {
        if checked == self.code_checked {
            return Ok((&self.code, &self.lir.sites));
        }
        let (code, sites) = match self.other.get() {
            Some(c) => c,
            None => {
                let c = if self.programs != Programs::Independent {
                    let tiling = lnc_tile::TileOptions { checked, ..self.tiling };
                    let lir = lnc_tile::lower(&self.bir, &tiling)
                        .map_err(|e| Error::source(&self.file, vec![e.to_diagnostic()]))?;
                    (pipeline::codegen(&lir, &self.other_options)?, Some(lir.sites))
                } else {
                    (pipeline::codegen(&self.lir, &self.other_options)?, None)
                };
                self.other.get_or_init(|| c)
            }
        };
        Ok((code, sites.as_deref().unwrap_or(&self.lir.sites)))
    }

    /// Whether the kernel's proof shows every access of a launch inside its buffer.
    fn proved(&self, slots: &[u64], bounds: &[Bounds], grid: Grid) -> bool {
        self.reach
            .as_ref()
            .is_some_and(|r| r.in_bounds(slots, |s| bounds.get(s as usize).map(|b| (b.lo, b.hi)), grid.0))
    }

    /// Whether a safe launch with these arguments runs the code without bounds checks: the
    /// kernel's proof ([`CompileOptions::prove_bounds`](crate::CompileOptions::prove_bounds))
    /// shows every access of every program inside its buffer. Arguments are checked as
    /// a launch checks them.
    pub fn bounds_proved<'a>(&self, grid: impl Into<Grid>, args: &[Arg<'a>]) -> Result<bool> {
        let grid = grid.into();
        self.check_grid(grid)?;
        let (slots, bounds, _) = self.encode_all(args)?;
        Ok(self.proved(&slots, &bounds, grid))
    }

    /// Program ids and grid sizes are `i32` in the code, as in Triton: a larger axis would
    /// wrap them.
    fn check_grid(&self, grid: Grid) -> Result<()> {
        match grid.0.iter().position(|&n| i32::try_from(n).is_err()) {
            Some(axis) => Err(self.launch_error(format!(
                "grid axis {axis} has {} programs; program ids are `i32`: at most {}",
                grid.0[axis],
                i32::MAX
            ))),
            None => Ok(()),
        }
    }

    /// The ABI slots of a launch's arguments, the bounds of its buffers, and the element
    /// offsets valid in each (for error messages).
    #[allow(clippy::type_complexity)]
    fn encode_all(&self, args: &[Arg<'_>]) -> Result<(Vec<u64>, Vec<Bounds>, Vec<(i64, i64)>)> {
        if args.len() != self.params.len() {
            let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            return Err(self.launch_error(format!(
                "expected {} arguments ({}), got {}",
                self.params.len(),
                names.join(", "),
                args.len()
            )));
        }
        let n = self.slots.max(1);
        let (mut slots, mut bounds, mut valid) =
            (vec![0u64; n], vec![Bounds::default(); n], vec![(0i64, 0i64); n]);
        for (p, a) in self.params.iter().zip(args) {
            let s = p.slot as usize;
            slots[s] = self.encode(p, a, &mut bounds[s], &mut valid[s])?;
        }
        Ok((slots, bounds, valid))
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
