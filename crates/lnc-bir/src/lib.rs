//! # Block IR
//!
//! The block IR (bir) is lnc's Triton-level representation: typed SSA in which a value is
//! a scalar, a pointer, or a *block* — a tensor of constant shape of numbers or pointers.
//! A kernel specialized on a signature becomes one [`Function`]; its parameters are the
//! runtime arguments (constexpr parameters have been folded away by the front end).
//!
//! ## Evaluation model
//! One *program* of the grid executes the function's body once, top to bottom. Every
//! instruction on blocks is elementwise or a reduction; nothing in the IR says how a block
//! is laid out in memory or iterated — that is the tiling passes' decision. Loads and
//! stores take a mask: a masked-off lane is never accessed.
//!
//! ## Structure
//! Values and instructions are `u32` handles ([`Value`], [`Inst`]) into per-function
//! `PrimaryMap`s. Control flow is structured: `for`, `while` and `if` own [`Region`]s whose
//! last instruction is a terminator (`yield` / `condition`) passing values to the parent,
//! like MLIR's `scf`. The body region has no terminator. Spans live in a side table and a
//! rewrite keeps the span of the instruction it replaces.
//!
//! The [`verify`] module lists the invariants; [`print`](mod@print) gives the text form used by the
//! stage dumps and snapshots; [`interp`] executes a function and is the semantic definition
//! the JIT is tested against; [`parse`] reads the text form back; [`reach`] proves, before a
//! launch, that its accesses stay inside their buffers.
#![deny(missing_docs)]

pub mod builder;
pub mod interp;
pub mod ir;
pub mod math;
pub mod parse;
pub mod print;
pub mod reach;
pub mod types;
pub mod verify;

pub use builder::Builder;
pub use ir::*;
pub use types::*;
