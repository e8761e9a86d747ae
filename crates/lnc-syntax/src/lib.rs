//! Lexer and parser for lnc's kernel language: the Python subset `@triton.jit` functions
//! are written in.
//!
//! [`parse_file`] reads any Python file, finds the functions decorated with
//! `@triton.jit`, `@jit`, `@lnc.jit` or `@tl.jit` (with or without call parentheses),
//! parses them into an [`ast::File`], and skips everything else at top level without
//! interpreting it.
//!
//! The stages are [`lexer::tokenize`] (the whole file, with Python's indentation rules)
//! then [`parser::parse_tokens`]. [`print`](mod@print) dumps the tree for `--emit ast` and snapshot
//! tests; [`unsupported`] turns the Python constructs kernels cannot use, which the
//! parser keeps as `Unsupported` nodes, into diagnostics.
#![deny(missing_docs)]

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod print;
pub mod unsupported;

pub use print::{dump_file, dump_function};

/// Lexes the whole of `file` and parses its jit functions.
///
/// Fails with the first lexical error, or with the parse errors of the jit functions
/// (one per function that does not parse) and the indentation errors found in host code.
pub fn parse_file(file: &lnc_diag::SourceFile) -> Result<ast::File, Vec<lnc_diag::Diagnostic>> {
    let tokens = lexer::tokenize(&file.text).map_err(|d| vec![d])?;
    let (parsed, diags) = parser::parse_tokens(&file.text, &tokens);
    if diags.is_empty() { Ok(parsed) } else { Err(diags) }
}
