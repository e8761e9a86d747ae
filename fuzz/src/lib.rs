//! Bodies of lnc's fuzz targets (issue 7: no panic reachable from user input).
//!
//! Each target in `fuzz_targets/` is a one-line call into this library, so a reproducer can
//! also be replayed from a test or a debugger without libFuzzer.
//!
//! * [`lex`]: the lexer on any UTF-8 text.
//! * [`parse`]: the parser on any UTF-8 text, plus everything the embedding API and the CLI
//!   do with a parsed file before specializing (AST dump, `unsupported` diagnostics, kernel
//!   listing), plus rendering every diagnostic.
//! * [`front`]: parse, then specialize every kernel found (on signatures written in the input
//!   and on one derived from the kernel's parameters), lower to block IR, optimize, tile to
//!   loop IR and translate to Cranelift IR, running every verifier on the way, as
//!   `lnc compile` does. No generated code is executed.
//!
//! A panic anywhere, including in rendering a diagnostic, is a finding. So is a verifier
//! failure: the embedding API reports those as internal errors, which are compiler bugs.

use std::collections::{HashMap, HashSet};

use lnc_diag::{Diagnostic, SourceFile, Span};
use lnc_syntax::ast::{self, ExprKind, StmtKind};
use lnc_syntax::lexer::TokenKind;

/// At most this many specializations are compiled per input, so one input stays fast.
pub const MAX_SPECIALIZATIONS: usize = 8;

/// Prints what happened to each specialization when `LNC_FUZZ_VERBOSE` is set (for checking
/// that seeds reach the stages they are meant to).
fn verbose() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var_os("LNC_FUZZ_VERBOSE").is_some())
}

fn check_span(span: Span, text: &str, what: &dyn std::fmt::Debug) {
    assert!(
        span.start <= span.end && span.end as usize <= text.len(),
        "span {span:?} outside the text ({} bytes): {what:?}",
        text.len()
    );
}

/// Diagnostics point inside the file they are rendered against, and rendering them does
/// not panic.
fn check_diags(diags: &[Diagnostic], file: &SourceFile) {
    for d in diags {
        if let Some(p) = &d.primary {
            check_span(p.span, &file.text, d);
        }
        for l in &d.secondary {
            check_span(l.span, &file.text, d);
        }
        let _ = d.to_string();
    }
    let text = lnc_diag::render_all(diags, file);
    assert!(diags.is_empty() || !text.is_empty());
}

/// The lexer runs to completion on any UTF-8 input: tokens (ending with `EndMarker`, every
/// span inside the text on character boundaries) or one renderable diagnostic.
pub fn lex(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match lnc_syntax::lexer::tokenize(src) {
        Ok(tokens) => {
            assert!(
                matches!(tokens.last().map(|t| &t.kind), Some(TokenKind::EndMarker)),
                "token stream does not end with EndMarker"
            );
            for t in &tokens {
                check_span(t.span, src, t);
                assert!(
                    src.is_char_boundary(t.span.start as usize) && src.is_char_boundary(t.span.end as usize),
                    "token span not on character boundaries: {t:?}"
                );
            }
        }
        Err(d) => check_diags(&[d], &SourceFile::new("fuzz.py", src)),
    }
}

/// Parses a module as `Jit::module` does, then does what the embedding API and the CLI do
/// with it short of specializing; every diagnostic is checked and rendered. Also parses the
/// text as a lone expression (`parse_expression`, used by tools).
pub fn parse(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let file = SourceFile::new("fuzz.py", src);
    match lnc_syntax::parse_file(&file) {
        Ok(parsed) => {
            let dump = lnc_syntax::dump_file(&parsed);
            assert!(parsed.functions.is_empty() || !dump.is_empty());
            for f in &parsed.functions {
                let diags = lnc_syntax::unsupported::unsupported_diagnostics(f);
                check_diags(&diags, &file);
                // `Module::kernels` (what `lnc check` lists).
                let _ = file.line_col(f.name.span.start);
                let _ = file.line_text(file.line_col(f.span.end).0);
                for p in &f.params {
                    if let Some(d) = &p.default {
                        check_span(d.span, src, d);
                        let _ = &file.text[d.span.range()];
                    }
                }
            }
        }
        Err(diags) => {
            assert!(!diags.is_empty(), "parse_file failed without a diagnostic");
            check_diags(&diags, &file);
        }
    }
    if let Err(diags) = lnc_syntax::parser::parse_expression(src) {
        assert!(!diags.is_empty(), "parse_expression failed without a diagnostic");
        check_diags(&diags, &file);
    }
}

/// `#sig NAME: ENTRIES` lines of the input: signatures for kernel `NAME` (the front target's
/// way to let the input choose types and constexpr values).
pub fn signature_lines(src: &str) -> Vec<(&str, &str)> {
    src.lines()
        .filter_map(|l| l.strip_prefix("#sig "))
        .filter_map(|l| l.split_once(':'))
        .map(|(name, sig)| (name.trim(), sig.trim()))
        .take(MAX_SPECIALIZATIONS)
        .collect()
}

fn is_constexpr(p: &ast::Param) -> bool {
    p.annotation.as_ref().is_some_and(|e| match &e.kind {
        ExprKind::Attribute { attr, .. } => attr.name == "constexpr",
        ExprKind::Name(n) => n == "constexpr",
        ExprKind::Str(s) => s == "constexpr" || s.ends_with(".constexpr"),
        _ => false,
    })
}

/// The name a pointer expression is based on: `X` in `X + row * stride + cols`,
/// `ptrs[:, None]`, `(X)`.
fn pointer_base(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(n) => Some(n),
        ExprKind::Binary { op: ast::BinOp::Add | ast::BinOp::Sub, lhs, rhs } => {
            pointer_base(lhs).or_else(|| pointer_base(rhs))
        }
        ExprKind::Subscript { value, .. } => pointer_base(value),
        _ => None,
    }
}

const POINTER_FUNCTIONS: [&str; 11] = [
    "load",
    "store",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "atomic_cas",
    "atomic_xchg",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "make_block_ptr",
];

#[derive(Default)]
struct PointerUses<'a> {
    /// Names used as the base of the pointer argument of a memory operation.
    roots: HashSet<&'a str>,
    /// `local = base + ...`: which names each local's pointer value may come from.
    aliases: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> PointerUses<'a> {
    fn stmts(&mut self, body: &'a [ast::Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &'a ast::Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { targets, value } => {
                if let Some(base) = pointer_base(value) {
                    for t in targets {
                        if let ExprKind::Name(n) = &t.kind {
                            self.aliases.entry(n).or_default().push(base);
                        }
                    }
                }
                self.expr(value);
            }
            StmtKind::AugAssign { value, .. } => self.expr(value),
            StmtKind::AnnAssign { value: Some(value), .. } => self.expr(value),
            StmtKind::If { cond, body, orelse } | StmtKind::While { cond, body, orelse } => {
                self.expr(cond);
                self.stmts(body);
                self.stmts(orelse);
            }
            StmtKind::For { iter, body, orelse, .. } => {
                self.expr(iter);
                self.stmts(body);
                self.stmts(orelse);
            }
            StmtKind::Return(Some(e)) => self.expr(e),
            _ => {}
        }
    }

    fn expr(&mut self, e: &'a ast::Expr) {
        match &e.kind {
            ExprKind::Call { func, args, kwargs } => {
                if let ExprKind::Attribute { attr, .. } = &func.kind
                    && POINTER_FUNCTIONS.contains(&attr.name.as_str())
                {
                    let ptr = args.first().or_else(|| {
                        kwargs.iter().find(|(k, _)| k.name == "pointer" || k.name == "base").map(|(_, v)| v)
                    });
                    if let Some(base) = ptr.and_then(pointer_base) {
                        self.roots.insert(base);
                    }
                }
                self.expr(func);
                args.iter().for_each(|a| self.expr(a));
                kwargs.iter().for_each(|(_, a)| self.expr(a));
            }
            ExprKind::Attribute { value, .. } => self.expr(value),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Subscript { value, items } => {
                self.expr(value);
                items.iter().for_each(|a| self.expr(a));
            }
            ExprKind::Tuple(items) | ExprKind::List(items) => items.iter().for_each(|a| self.expr(a)),
            ExprKind::IfExp { cond, then, orelse } => {
                self.expr(cond);
                self.expr(then);
                self.expr(orelse);
            }
            ExprKind::Compare { first, rest, .. } => {
                self.expr(first);
                rest.iter().for_each(|a| self.expr(a));
            }
            ExprKind::BoolOp { values, .. } => values.iter().for_each(|a| self.expr(a)),
            _ => {}
        }
    }

    /// Every name a pointer used by a memory operation may come from.
    fn pointer_names(&self) -> HashSet<&'a str> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut todo: Vec<&str> = self.roots.iter().copied().collect();
        while let Some(n) = todo.pop() {
            if seen.insert(n)
                && let Some(from) = self.aliases.get(n)
            {
                todo.extend(from.iter().copied());
            }
        }
        seen
    }
}

/// A signature for `f` derived from its parameters: `*fp32` for the parameters its memory
/// operations use as pointers, `fp32` for scalars named like `eps`, `i32` for other scalars;
/// `tl.constexpr` parameters get one of 16, 4, 128, 1 (chosen by the length of their name)
/// unless they have a default, which is then kept.
pub fn derived_signature(f: &ast::FunctionDef) -> String {
    let mut uses = PointerUses::default();
    uses.stmts(&f.body);
    let pointers = uses.pointer_names();
    let mut entries = Vec::new();
    let mut named = false;
    for p in &f.params {
        let name = p.name.name.as_str();
        if p.default.is_some() {
            // Filled in from the default; later entries must then be named.
            named = true;
            continue;
        }
        let entry = if is_constexpr(p) {
            ["16", "4", "128", "1"][name.len() % 4].to_string()
        } else if pointers.contains(name) {
            "*fp32".to_string()
        } else if name.to_ascii_lowercase().contains("eps") {
            "fp32".to_string()
        } else {
            "i32".to_string()
        };
        entries.push(if named { format!("{name}={entry}") } else { entry });
    }
    entries.join(",")
}

/// Parses the input and compiles every kernel in it, up to [`MAX_SPECIALIZATIONS`]
/// specializations: first those of the `#sig NAME: ENTRIES` lines, then one on the
/// [`derived_signature`] of each kernel. Specializations alternate between bounds-checked
/// code (what `launch` runs) and unchecked code (`launch_unchecked`, `--unchecked`).
pub fn front(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let file = SourceFile::new("fuzz.py", src);
    let parsed = match lnc_syntax::parse_file(&file) {
        Ok(parsed) => parsed,
        Err(diags) => {
            check_diags(&diags, &file);
            return;
        }
    };
    let mut jobs: Vec<(String, String)> =
        signature_lines(src).into_iter().map(|(name, sig)| (name.to_string(), sig.to_string())).collect();
    for f in &parsed.functions {
        jobs.push((f.name.name.clone(), derived_signature(f)));
    }
    jobs.truncate(MAX_SPECIALIZATIONS);
    for (i, (kernel, sig)) in jobs.iter().enumerate() {
        compile(&file, &parsed, kernel, sig, i % 2 == 0);
    }
}

/// Specializes `kernel` on `sig_text` and runs the pipeline of `lnc compile` up to and
/// including the translation to Cranelift IR (bounds-checked when `checked`), with every
/// verifier.
pub fn compile(file: &SourceFile, parsed: &ast::File, kernel: &str, sig_text: &str, checked: bool) {
    let report = |stage: &str, what: &str| {
        if verbose() {
            eprintln!("[lnc-fuzz] {kernel} ({sig_text}): {stage}: {what}");
        }
    };
    let Some(fdef) = parsed.functions.iter().find(|f| f.name.name == kernel) else {
        // What `Module::kernel` and `lower_kernel` say about a missing kernel.
        let sig = lnc_front::Signature { entries: Vec::new() };
        match lnc_front::lower_kernel(file, parsed, kernel, &sig) {
            Ok(_) => panic!("lower_kernel found a kernel `{kernel}` that is not in the file"),
            Err(d) => check_diags(&d, file),
        }
        report("lookup", "no such kernel");
        return;
    };
    let sig = match lnc_front::parse_signature(sig_text, fdef) {
        Ok(sig) => sig,
        Err(d) => {
            // As `Module::signature`: rendered against a file made of the signature, but the
            // span points at the kernel's parameters, so check against the source file.
            check_span(d.primary.as_ref().map_or(Span::DUMMY, |l| l.span), &file.text, &d);
            let _ = d.render(&SourceFile::new("<signature>", sig_text));
            report("signature", &d.message);
            return;
        }
    };
    // The canonical text is the kernel cache's key: it must parse back to itself.
    let canonical = sig.to_string();
    match lnc_front::parse_signature(&canonical, fdef) {
        Ok(again) => assert_eq!(again.to_string(), canonical, "signature `{sig_text}` does not round-trip"),
        Err(d) => {
            panic!("canonical signature `{canonical}` (from `{sig_text}`) does not parse: {}", d.message)
        }
    }

    let mut bir = match lnc_front::lower_kernel(file, parsed, kernel, &sig) {
        Ok(bir) => bir,
        Err(diags) => {
            assert!(!diags.is_empty(), "lower_kernel failed without a diagnostic");
            check_diags(&diags, file);
            report("front", &diags[0].message);
            return;
        }
    };
    if let Err(e) = lnc_bir::verify::verify(&bir) {
        panic!("block IR from the front end does not verify:\n{e}");
    }
    let _ = lnc_bir::print::print_function_with_spans(&bir, file);

    lnc_opt::optimize(&mut bir, &mut |pass, f| {
        if let Err(e) = lnc_bir::verify::verify(f) {
            panic!("block IR after pass {pass} does not verify:\n{e}");
        }
    });
    let _ = lnc_bir::print::print_function(&bir);

    let lir = match lnc_tile::lower(&bir, &lnc_tile::TileOptions::default()) {
        Ok(lir) => lir,
        Err(e) => {
            check_diags(&[e.to_diagnostic()], file);
            report("tile", &e.message);
            return;
        }
    };
    if let Err(e) = lnc_lir::verify(&lir) {
        panic!("loop IR does not verify:\n{e}");
    }
    let _ = lnc_lir::print_function(&lir);

    let opts = lnc_clif::CodegenOptions { checked, emit_text: false, ..Default::default() };
    match lnc_clif::clif_text(&lir, &opts) {
        Ok(_) => report("clif", "ok"),
        Err(e @ (lnc_clif::CodegenError::Unsupported(_) | lnc_clif::CodegenError::Host(_))) => {
            report("clif", &e.to_string())
        }
        Err(e) => panic!("code generation failed: {e}"),
    }
}
