//! Lexer and parser for lnc's kernel language: the Python subset `@triton.jit` functions
//! are written in.
//!
//! [`parse_file`] reads any Python file, finds the functions decorated with
//! `@triton.jit`, `@jit` or `@lnc.jit` (with or without call parentheses), parses them into
//! an [`ast::File`], and skips everything else at top level without interpreting it.
#![deny(missing_docs)]

pub mod ast;
