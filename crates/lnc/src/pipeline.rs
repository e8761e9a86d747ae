//! The compilation pipeline, source to callable code, as one plain ordered function.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lnc_diag::SourceFile;
use lnc_front::Signature;
use lnc_syntax::ast;

use crate::error::{Error, Result};
use crate::stage::Stage;

/// Options of a compilation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Lanes of a tile (4 fills a 128-bit vector with fp32).
    pub lanes: u8,
    /// Run the IR verifiers after every stage and pass (always on in debug builds).
    pub verify: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { lanes: 4, verify: cfg!(debug_assertions) }
    }
}

/// One text dump produced while compiling: a stage, or a pass within the `opt` stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump {
    /// The stage.
    pub stage: Stage,
    /// The pass, for dumps after each optimization pass.
    pub pass: Option<&'static str>,
    /// The text.
    pub text: String,
}

/// Which dumps a compilation should produce.
#[derive(Clone, Debug)]
pub struct DumpRequest {
    /// Stages to print.
    pub stages: Vec<Stage>,
    /// Also print the block IR after every optimization pass.
    pub after_each_pass: bool,
    /// Show the bounds-checked code (what a safe launch runs).
    pub checked: bool,
}

impl Default for DumpRequest {
    fn default() -> Self {
        DumpRequest { stages: Vec::new(), after_each_pass: false, checked: true }
    }
}

impl DumpRequest {
    fn wants(&self, s: Stage) -> bool {
        self.stages.contains(&s)
    }
}

/// Wall-clock time of each part of a compilation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Front end (specialization to block IR).
    pub front: Duration,
    /// Optimization passes.
    pub opt: Duration,
    /// Tiling to loop IR.
    pub tile: Duration,
    /// Cranelift code generation and finalization.
    pub codegen: Duration,
}

impl Timings {
    /// Sum of all parts.
    pub fn total(&self) -> Duration {
        self.front + self.opt + self.tile + self.codegen
    }
}

/// What compiling one specialization produces.
pub(crate) struct Artifacts {
    pub(crate) bir: lnc_bir::Function,
    pub(crate) lir: lnc_lir::Function,
    pub(crate) code: Option<lnc_clif::CompiledKernel>,
    pub(crate) timings: Timings,
}

fn internal(stage: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("{stage} verifier failed:\n{e}"))
}

/// Runs the whole pipeline; the code is bounds-checked when `req.checked`.
pub(crate) fn compile(
    file: &Arc<SourceFile>,
    ast: &ast::File,
    kernel: &str,
    sig: &Signature,
    opts: &CompileOptions,
    req: &DumpRequest,
    dumps: &mut Vec<Dump>,
) -> Result<Artifacts> {
    let mut timings = Timings::default();
    if req.wants(Stage::Ast)
        && let Some(f) = ast.functions.iter().find(|f| f.name.name == kernel)
    {
        dumps.push(Dump { stage: Stage::Ast, pass: None, text: lnc_syntax::print::dump_function(f) });
    }

    let t = Instant::now();
    let mut bir = lnc_front::lower_kernel(file, ast, kernel, sig).map_err(|d| Error::source(file, d))?;
    timings.front = t.elapsed();
    if opts.verify {
        lnc_bir::verify::verify(&bir).map_err(|e| internal("block IR (front end)", e))?;
    }
    if req.wants(Stage::Bir) {
        dumps.push(Dump { stage: Stage::Bir, pass: None, text: lnc_bir::print::print_function(&bir) });
    }

    let t = Instant::now();
    let mut verify_err = None;
    lnc_opt::optimize(&mut bir, &mut |pass, f| {
        if opts.verify
            && verify_err.is_none()
            && let Err(e) = lnc_bir::verify::verify(f)
        {
            verify_err = Some(internal(&format!("block IR (after {pass})"), e));
        }
        if req.after_each_pass {
            dumps.push(Dump { stage: Stage::Opt, pass: Some(pass), text: lnc_bir::print::print_function(f) });
        }
    });
    timings.opt = t.elapsed();
    if let Some(e) = verify_err {
        return Err(e);
    }
    if req.wants(Stage::Opt) {
        dumps.push(Dump { stage: Stage::Opt, pass: None, text: lnc_bir::print::print_function(&bir) });
    }

    let t = Instant::now();
    let tile_opts = lnc_tile::TileOptions { lanes: opts.lanes };
    let lir = lnc_tile::lower(&bir, &tile_opts).map_err(|e| Error::source(file, vec![e.to_diagnostic()]))?;
    timings.tile = t.elapsed();
    if opts.verify {
        lnc_lir::verify::verify(&lir).map_err(|e| internal("loop IR", e))?;
    }
    if req.wants(Stage::Lir) {
        dumps.push(Dump { stage: Stage::Lir, pass: None, text: lnc_lir::print::print_function(&lir) });
    }

    let cg_opts = lnc_clif::CodegenOptions { checked: req.checked, ..Default::default() };
    if req.wants(Stage::Clif) {
        let text = lnc_clif::clif_text(&lir, &cg_opts).map_err(|e| Error::Internal(e.to_string()))?;
        dumps.push(Dump { stage: Stage::Clif, pass: None, text });
    }
    if req.wants(Stage::Asm) {
        let text = lnc_clif::asm_text(&lir, &cg_opts).map_err(|e| Error::Internal(e.to_string()))?;
        dumps.push(Dump { stage: Stage::Asm, pass: None, text });
    }

    let t = Instant::now();
    let code = lnc_clif::compile(&lir, &cg_opts).map_err(|e| Error::Internal(e.to_string()))?;
    timings.codegen = t.elapsed();
    Ok(Artifacts { bir, lir, code: Some(code), timings })
}

/// Compiles only the unchecked variant of an already tiled kernel.
pub(crate) fn codegen(lir: &lnc_lir::Function, checked: bool) -> Result<lnc_clif::CompiledKernel> {
    let cg_opts = lnc_clif::CodegenOptions { checked, ..Default::default() };
    lnc_clif::compile(lir, &cg_opts).map_err(|e| Error::Internal(e.to_string()))
}
