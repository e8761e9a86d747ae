//! A parsed file of kernels.

use std::sync::Arc;

use lnc_diag::SourceFile;
use lnc_front::Signature;
use lnc_syntax::ast;

use crate::error::{Error, Result};
use crate::jit::Jit;
use crate::kernel::Kernel;
use crate::pipeline::{self, Dump, DumpRequest};

/// A parameter of a kernel as written in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// Name.
    pub name: String,
    /// Annotated `tl.constexpr`.
    pub constexpr: bool,
    /// Default value as written, if any.
    pub default: Option<String>,
}

/// A kernel found in a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    /// Name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<ParamInfo>,
    /// `line:col` of the `def`.
    pub location: (usize, usize),
}

/// A parsed source file: its `@jit` functions, ready to be specialized.
#[derive(Clone)]
pub struct Module {
    pub(crate) jit: Jit,
    pub(crate) file: Arc<SourceFile>,
    pub(crate) ast: Arc<ast::File>,
    pub(crate) hash: u64,
}

fn is_constexpr(p: &ast::Param) -> bool {
    matches!(&p.annotation, Some(e) if matches!(&e.kind,
        ast::ExprKind::Attribute { attr, .. } if attr.name == "constexpr")
        || matches!(&e.kind, ast::ExprKind::Name(n) if n == "constexpr"))
}

impl Module {
    /// The source file.
    pub fn file(&self) -> &Arc<SourceFile> {
        &self.file
    }

    /// The syntax tree.
    pub fn ast(&self) -> &ast::File {
        &self.ast
    }

    /// The `@jit` functions of the file, in source order; of a name defined twice, the last
    /// definition, which Python binds (and which `Module::kernel` compiles and calls reach).
    pub fn kernels(&self) -> Vec<KernelInfo> {
        let fns = &self.ast.functions;
        fns.iter()
            .enumerate()
            // As in Python, a later definition of a name replaces the earlier one.
            .filter(|&(i, f)| self.ast.function_index(&f.name.name) == Some(i))
            .map(|(_, f)| KernelInfo {
                name: f.name.name.clone(),
                params: f
                    .params
                    .iter()
                    .map(|p| ParamInfo {
                        name: p.name.name.clone(),
                        constexpr: is_constexpr(p),
                        default: p.default.as_ref().map(|d| self.file.text[d.span.range()].to_string()),
                    })
                    .collect(),
                location: self.file.line_col(f.name.span.start),
            })
            .collect()
    }

    fn function(&self, name: &str) -> Result<&ast::FunctionDef> {
        self.ast.function(name).ok_or_else(|| Error::NoSuchKernel {
            name: name.to_string(),
            file: self.file.name.clone(),
            available: self.kernels().into_iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
        })
    }

    /// Parses a signature for kernel `name` (Triton's AOT format: `*fp32,i32,1024`).
    pub fn signature(&self, name: &str, signature: &str) -> Result<Signature> {
        let f = self.function(name)?;
        // Signature errors point at the kernel's parameters in the source.
        lnc_front::parse_signature(signature, f).map_err(|d| Error::source(&self.file, vec![d]))
    }

    /// Specializes and compiles kernel `name` on `signature`, or returns the cached one.
    pub fn kernel(&self, name: &str, signature: &str) -> Result<Arc<Kernel>> {
        let sig = self.signature(name, signature)?;
        self.kernel_for(name, &sig)
    }

    /// Like [`Module::kernel`] with a parsed signature.
    pub fn kernel_for(&self, name: &str, sig: &Signature) -> Result<Arc<Kernel>> {
        let opts = self.jit.inner.options.clone();
        let key = (self.hash, name.to_string(), sig.to_string(), opts.clone());
        if let Some(k) = self.jit.inner.cache.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(k.clone());
        }
        self.function(name)?;
        let arts = pipeline::compile(
            &self.file,
            &self.ast,
            name,
            sig,
            &opts,
            &DumpRequest::default(),
            &mut Vec::new(),
            true,
        )?;
        let kernel = Arc::new(Kernel::new(self, name, sig.clone(), arts)?);
        self.jit.inner.cache.lock().map_err(|_| poisoned())?.insert(key, kernel.clone());
        Ok(kernel)
    }

    /// The block IR of kernel `name` specialized on `signature`, straight from the front
    /// end (before optimization): what the reference interpreter runs.
    pub fn block_ir(&self, name: &str, signature: &str) -> Result<lnc_bir::Function> {
        let sig = self.signature(name, signature)?;
        self.function(name)?;
        lnc_front::lower_kernel(&self.file, &self.ast, name, &sig).map_err(|d| Error::source(&self.file, d))
    }

    /// Warnings for kernel `name` specialized on `signature` (the masked-lane lint), without
    /// compiling it: the front end and the lint only.
    pub fn warnings(&self, name: &str, signature: &str) -> Result<Vec<lnc_diag::Diagnostic>> {
        Ok(lnc_opt::masked_lanes::check(&self.block_ir(name, signature)?))
    }

    /// Runs the pipeline for the dumps asked for (what `lnc compile --emit` prints).
    pub fn dump(&self, name: &str, signature: &str, req: &DumpRequest) -> Result<Vec<Dump>> {
        let sig = self.signature(name, signature)?;
        let mut dumps = Vec::new();
        pipeline::compile(
            &self.file,
            &self.ast,
            name,
            &sig,
            &self.jit.inner.options,
            req,
            &mut dumps,
            false,
        )?;
        Ok(dumps)
    }
}

fn poisoned() -> Error {
    Error::Internal("kernel cache lock poisoned by a panic in another thread".into())
}
