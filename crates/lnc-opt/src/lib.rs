//! Block IR optimization passes of lnc, one per file.
//!
//! Each pass is a module with a free function `run(&mut Function) -> bool` (whether it
//! changed anything) and a `NAME`, its kebab-case name for `lnc compile --passes` and for
//! the headers of test cases. The module docs list each pass's rewrites as `lhs => rhs`
//! and what it does not do.
//!
//! The passes keep the function valid: every rewrite replaces a value by one of the same
//! type, new instructions carry the span of the instruction they replace, and removed
//! instructions stay in the function's instruction map, unreachable from the body.
//!
//! [`optimize`] is the pipeline: a plain ordered list of passes, repeated while any of them
//! changes something.
//!
//! [`masked_lanes`] is not a pass but a lint over the same IR: it changes nothing and
//! returns warnings.
#![deny(missing_docs)]

use lnc_bir::Function;

pub mod canonicalize;
pub mod cse;
pub mod dce;
pub mod fold;
pub mod masked_lanes;
pub mod sink;
mod util;

/// The passes of [`optimize`], in the order they run.
pub const PASSES: &[&str] = &[canonicalize::NAME, fold::NAME, cse::NAME, sink::NAME, dce::NAME];

/// How many times [`optimize`] runs the list at most. Each round only shrinks or
/// simplifies the function, so this is a guard against a pair of rewrites undoing each
/// other, not a budget real kernels reach.
const MAX_ROUNDS: usize = 16;

/// Runs the pass named `name` (kebab-case, as in [`PASSES`]) on `func`; `None` when no pass
/// has that name, otherwise whether the pass changed anything.
pub fn run_pass(name: &str, func: &mut Function) -> Option<bool> {
    Some(match name {
        canonicalize::NAME => canonicalize::run(func),
        fold::NAME => fold::run(func),
        cse::NAME => cse::run(func),
        sink::NAME => sink::run(func),
        dce::NAME => dce::run(func),
        _ => return None,
    })
}

/// Runs the pipeline on `func` until no pass changes anything (at most a fixed number of
/// rounds), calling `after_pass(name, func)` after every pass, changed or not (for
/// `--print-after-all`).
pub fn optimize(func: &mut Function, after_pass: &mut dyn FnMut(&'static str, &Function)) {
    for _ in 0..MAX_ROUNDS {
        let mut changed = false;
        for &name in PASSES {
            changed |= run_pass(name, func).expect("PASSES lists known passes");
            after_pass(name, func);
        }
        if !changed {
            return;
        }
    }
}
