//! The JIT: parses files into modules and caches compiled kernels.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

use lnc_diag::SourceFile;

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::module::Module;
use crate::pipeline::CompileOptions;

/// Cache key: (source hash, kernel, canonical signature, options).
pub(crate) type CacheKey = (u64, String, String, CompileOptions);

pub(crate) struct JitInner {
    pub(crate) options: CompileOptions,
    pub(crate) pool: Option<Arc<rayon::ThreadPool>>,
    pub(crate) cache: Mutex<HashMap<CacheKey, Arc<Kernel>>>,
}

/// The entry point of the embedding API: `Jit` → [`Module`] → [`Kernel`] → `launch`.
///
/// A `Jit` is cheap to clone (it is shared) and safe to use from several threads. Compiled
/// kernels are cached by source hash, kernel name, signature and options.
#[derive(Clone)]
pub struct Jit {
    pub(crate) inner: Arc<JitInner>,
}

impl Default for Jit {
    fn default() -> Self {
        Jit::new()
    }
}

impl Jit {
    /// A JIT with default options that launches on rayon's global thread pool.
    pub fn new() -> Jit {
        Jit::with_options(CompileOptions::default())
    }

    /// A JIT with the given compile options.
    pub fn with_options(options: CompileOptions) -> Jit {
        Jit { inner: Arc::new(JitInner { options, pool: None, cache: Mutex::new(HashMap::new()) }) }
    }

    /// The same JIT launching on its own pool of `threads` threads.
    pub fn with_threads(&self, threads: usize) -> Result<Jit> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Internal(format!("cannot start a pool of {threads} threads: {e}")))?;
        Ok(Jit {
            inner: Arc::new(JitInner {
                options: self.inner.options.clone(),
                pool: Some(Arc::new(pool)),
                cache: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The compile options.
    pub fn options(&self) -> &CompileOptions {
        &self.inner.options
    }

    /// Parses a file of kernels (any Python file; its `@jit` functions are the kernels).
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Module> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| Error::Io { path: path.display().to_string(), source })?;
        self.module(path.display().to_string(), text)
    }

    /// Parses kernel source text; `name` is what diagnostics call the file.
    pub fn module(&self, name: impl Into<String>, text: impl Into<String>) -> Result<Module> {
        let file = Arc::new(SourceFile::new(name, text));
        // Literals parse to the same values whatever the thread's floating-point control.
        let _fp = lnc_runtime::FpControl::reset();
        let ast = lnc_syntax::parse_file(&file).map_err(|d| Error::source(&file, d))?;
        let mut h = DefaultHasher::new();
        file.text.hash(&mut h);
        Ok(Module { jit: self.clone(), file, ast: Arc::new(ast), hash: h.finish() })
    }
}
