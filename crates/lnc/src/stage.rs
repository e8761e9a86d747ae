//! The stages of the pipeline, named once for the CLI, the tests and the docs.

use std::fmt;
use std::str::FromStr;

/// A stage of lowering whose text form `lnc compile --emit` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// The syntax tree of the kernel.
    Ast,
    /// Block IR straight from the front end.
    Bir,
    /// Block IR after the optimization passes.
    Opt,
    /// Loop IR after tiling.
    Lir,
    /// Cranelift IR, before and after Cranelift's own optimizations.
    Clif,
    /// Machine code as Cranelift prints it, with notes on what lnc rewrites after it.
    Asm,
    /// Machine code as it runs, after those rewrites, disassembled.
    Mc,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 7] =
        [Stage::Ast, Stage::Bir, Stage::Opt, Stage::Lir, Stage::Clif, Stage::Asm, Stage::Mc];

    /// The name used by `--emit` and in test folders.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Ast => "ast",
            Stage::Bir => "bir",
            Stage::Opt => "opt",
            Stage::Lir => "lir",
            Stage::Clif => "clif",
            Stage::Asm => "asm",
            Stage::Mc => "mc",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stage {
    type Err = String;
    fn from_str(s: &str) -> Result<Stage, String> {
        Stage::ALL.into_iter().find(|st| st.name() == s).ok_or_else(|| {
            format!("unknown stage `{s}` (expected one of: ast, bir, opt, lir, clif, asm, mc)")
        })
    }
}
