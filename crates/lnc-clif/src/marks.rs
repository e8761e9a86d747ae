//! Instructions rewritten after Cranelift: what Cranelift cannot emit (non-temporal
//! stores, prefetches, F16C conversions) is emitted as an instruction of the same shape
//! whose memory flags carry a trap code of our own, found again by the trap record
//! Cranelift keeps for every instruction with a trap code, and rewritten in place
//! (modules `stream`, `prefetch`, `f16c`). Data accesses are `notrap` and bounds checks
//! branch instead of trapping, so user trap codes mark only these.

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::{Endianness, MemFlagsData, TrapCode};

use crate::CodegenError;

/// Memory flags of an access marked `mark`.
pub(crate) fn flags(mark: u8) -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little).with_trap_code(TrapCode::user(mark))
}

/// The code offsets of the instructions marked `mark`.
pub(crate) fn offsets(traps: &[MachTrap], mark: u8) -> impl Iterator<Item = usize> + '_ {
    let code = TrapCode::user(mark);
    traps.iter().filter(move |t| Some(t.code) == code).map(|t| t.offset as usize)
}

/// The error for a marked instruction at `at` that is not the encoding `expected` a
/// rewrite starts from.
pub(crate) fn unexpected(code: &[u8], at: usize, what: &str, expected: &str) -> CodegenError {
    let bytes = &code[at.min(code.len())..(at + 8).min(code.len())];
    CodegenError::Cranelift(format!(
        "{what} was emitted as {bytes:02x?}, not as the {expected} it is rewritten from"
    ))
}

/// The line of the machine-code listing (which Cranelift prints before the rewrites)
/// saying that `count` of the instructions `what` became `becomes`; empty when none did.
pub(crate) fn note(count: u32, what: &str, mark: u8, becomes: &str) -> String {
    if count == 0 {
        return String::new();
    }
    let code = TrapCode::user(mark).map_or(String::new(), |c| c.to_string());
    format!("; {count} of the {what} above (trap code {code}) are rewritten after Cranelift to {becomes}\n")
}

/// Whether the boolean ISA flag `name` (such as `has_avx`) is set for `isa`.
pub(crate) fn isa_has(isa: &dyn cranelift_codegen::isa::TargetIsa, name: &str) -> bool {
    isa.isa_flags().iter().any(|v| v.name == name && v.as_bool() == Some(true))
}

/// A trap record of `mark` at offset 0, for the rewrite tests.
#[cfg(test)]
fn trap(mark: u8) -> MachTrap {
    MachTrap { offset: 0, code: TrapCode::user(mark).expect("user trap codes are nonzero") }
}

/// Checks that `patch` rewrites each `from`, marked `mark` at its start, into `to` and
/// counts one rewrite.
#[cfg(test)]
pub(crate) fn assert_rewrites(
    mark: u8,
    cases: &[(&[u8], &[u8])],
    patch: impl Fn(&mut [u8], &[MachTrap]) -> Result<u32, CodegenError>,
) {
    for &(from, to) in cases {
        let mut code = from.to_vec();
        assert_eq!(patch(&mut code, &[trap(mark)]).expect("a known encoding"), 1, "{from:02x?}");
        assert_eq!(code, to, "{from:02x?}");
    }
}

/// Checks that `patch` refuses each of `cases`, marked `mark` at its start, and leaves it
/// unchanged.
#[cfg(test)]
pub(crate) fn assert_refuses(
    mark: u8,
    cases: &[&[u8]],
    patch: impl Fn(&mut [u8], &[MachTrap]) -> Result<u32, CodegenError>,
) {
    for &bytes in cases {
        let mut code = bytes.to_vec();
        assert!(patch(&mut code, &[trap(mark)]).is_err(), "{bytes:02x?}");
        assert_eq!(code, bytes);
    }
}
