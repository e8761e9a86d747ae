//! Errors of the embedding API. Source errors keep their diagnostics and render them with
//! file, line, column and caret when displayed.

use std::fmt;
use std::sync::Arc;

use lnc_diag::{Diagnostic, SourceFile, render_all};

/// Diagnostics about one source file.
#[derive(Clone, Debug)]
pub struct SourceError {
    /// The file the spans point into.
    pub file: Arc<SourceFile>,
    /// The diagnostics, in order.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(render_all(&self.diagnostics, &self.file).trim_end())
    }
}

/// A checked access that fell outside its buffer during a safe launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// Kernel name.
    pub kernel: String,
    /// `file:line:col` of the access.
    pub location: String,
    /// The source line of the access.
    pub source_line: String,
    /// Program id of the faulting program.
    pub pid: [u32; 3],
    /// Name of the pointer parameter whose buffer was overrun.
    pub param: String,
    /// Offending element offset, relative to the pointer passed for that parameter.
    pub offset: i64,
    /// Valid element offsets `[lo, hi)` relative to that pointer.
    pub valid: (i64, i64),
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "out-of-bounds access in kernel `{}` at {} (program {:?}): element offset {} of `{}` is outside its buffer [{}, {})\n  | {}",
            self.kernel,
            self.location,
            self.pid,
            self.offset,
            self.param,
            self.valid.0,
            self.valid.1,
            self.source_line.trim()
        )
    }
}

/// Everything that can go wrong when compiling or launching a kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The source (or the signature applied to it) has errors.
    #[error("{0}")]
    Source(SourceError),
    /// No kernel of that name in the module.
    #[error("no @jit kernel named `{name}` in {file} (kernels: {available})")]
    NoSuchKernel {
        /// Requested name.
        name: String,
        /// File name.
        file: String,
        /// Comma-separated names found.
        available: String,
    },
    /// The arguments of a launch do not fit the kernel.
    #[error("cannot launch `{kernel}`: {message}")]
    Launch {
        /// Kernel name.
        kernel: String,
        /// What is wrong, naming the parameter.
        message: String,
    },
    /// A safe launch stopped on an out-of-bounds access.
    #[error("{0}")]
    OutOfBounds(Box<OutOfBounds>),
    /// A `device_assert` failed.
    #[error("assertion failed in kernel `{kernel}` at {location} (program {pid:?})\n  | {}", source_line.trim())]
    AssertFailed {
        /// Kernel name.
        kernel: String,
        /// `file:line:col`.
        location: String,
        /// The source line of the assertion (with its message).
        source_line: String,
        /// Program id.
        pid: [u32; 3],
    },
    /// A bug in lnc: an IR verifier or Cranelift rejected what lnc produced.
    #[error("internal compiler error (please report): {0}")]
    Internal(String),
}

impl Error {
    /// The diagnostics, when this is a source error.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Error::Source(e) => &e.diagnostics,
            _ => &[],
        }
    }

    pub(crate) fn source(file: &Arc<SourceFile>, diagnostics: Vec<Diagnostic>) -> Error {
        Error::Source(SourceError { file: file.clone(), diagnostics })
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
