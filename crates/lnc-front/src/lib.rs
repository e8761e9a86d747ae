//! # Front end: AST + signature → block IR
//!
//! lnc compiles `@triton.jit` kernels unchanged. Triton itself runs the kernel's Python
//! code at compile time, with `tl` functions building IR; this crate does the same job
//! without Python: it *interprets* the kernel's AST, evaluating what is known at compile
//! time and emitting block IR for the rest.
//!
//! ## Specialization
//! A kernel is lowered for one [`Signature`] (Triton's AOT format, [`parse_signature`]):
//! pointer and scalar parameters become the function's parameters, `tl.constexpr`
//! parameters become compile-time values. Shapes, `tl.arange` bounds, reduction axes and
//! the conditions of folded `if`s must be compile-time values.
//!
//! ## Values
//! A name is bound to a compile-time Python value (int, float, bool, None, string, dtype,
//! tuple, module, function) or to an SSA value of the IR (scalar, pointer or block).
//! Operations on compile-time values are Python's; as soon as one operand is a runtime value
//! Triton's semantics apply: type promotion where literals are weakly typed (an fp16 block
//! times `2.0` stays fp16), right-aligned broadcasting, `int1` comparisons, pointer
//! arithmetic in elements. Local variables assigned a literal stay compile-time values, as
//! in Triton's interpreter, so `BLOCK = 128; tl.arange(0, BLOCK)` works.
//!
//! ## Control flow
//! Python scoping: one flat scope per function. An `if` on a compile-time condition keeps
//! only the taken branch. A runtime `if` becomes a bir `if` whose results are the variables
//! the branches assign differently. `for` over `range`/`tl.range` becomes a bir `for`
//! carrying the variables the body changes (found by lowering the body once as a dry run),
//! `tl.static_range` is unrolled, `while` becomes a bir `while` whose condition region
//! recomputes the condition. Calls to other `@jit` functions of the file are inlined; an
//! early `return` inside a runtime `if` takes the rest of the function into the branches.
//!
//! ## Errors
//! Every user error is a [`lnc_diag::Diagnostic`] pointing at the offending source. Lowering
//! continues after a failed statement, with the names it assigned poisoned so that they do
//! not cause further reports, and returns every independent error it found.
#![deny(missing_docs)]

mod argmax;
mod args;
mod builtins;
mod consteval;
mod control;
mod diag;
mod dot;
mod expr;
mod known;
mod lower;
mod ops;
mod promote;
mod random;
mod signature;
mod value;

pub use lower::lower_kernel;
pub use signature::{ConstValue, SigEntry, Signature, parse_signature};
