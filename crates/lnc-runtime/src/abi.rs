//! The kernel ABI: the one calling convention shared by code generation and the launcher.
//!
//! A compiled kernel is
//! `unsafe extern "C" fn(args: *const u64, pid: *const u32, nprog: *const u32, ctx: *mut ProgramCtx, count: u64) -> u32`,
//! one call running `count` (at least 1) programs of a grid in flat order, axis 0 fastest:
//!
//! - `args` has one 8-byte slot per *source* parameter of the kernel, constexpr ones
//!   included (their slots are ignored), in declaration order. A pointer is its address;
//!   an integer is sign- (signed) or zero- (unsigned, `i1`) extended to 64 bits; an `fp32`
//!   is its bits in the low 32 bits; an `fp64` is its bits.
//! - `pid` and `nprog` point at three `u32`: the first program's id and the grid size on
//!   axes 0, 1, 2. The programs after it are the next ones in flat order; the caller keeps
//!   them inside the grid.
//! - `ctx` is the programs' context: bounds for safe launches, the worker's scratch area,
//!   and the record of the first fault.
//! - The return value is a [`Status`] code: 0 when all `count` programs finished. A
//!   program that faults ends the call: the kernel fills `ctx.fault` and sets `ctx.ran` to
//!   the number of programs of the call that finished before it.
//! - A program in a `while` loop that uses atomics or volatile loads (a spin lock, a flag,
//!   or any other such loop: the check cannot tell waiting from working) reads
//!   `*ctx.stop` on every turn of the loop, and gives up with [`Status::Cancelled`] once
//!   it no longer holds [`NO_FAULT`], setting `ctx.ran` to the number of programs of the
//!   call left, itself included (not the number finished: the call's count would
//!   otherwise hold a register through every loop of the kernel). The launcher then calls
//!   the kernel for the programs after it. A program that faulted while holding a lock
//!   would otherwise keep the programs waiting for it spinning forever, and the launch
//!   would hang instead of reporting the fault.
//!
//! Running a chunk of programs per call, rather than one, keeps the call, the function's
//! prologue and the loads of everything that does not depend on the pid (argument slots,
//! bounds) out of the per-program cost.

use std::sync::atomic::AtomicU64;

/// Status codes a kernel returns.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The program ran to completion.
    Ok = 0,
    /// A checked access fell outside its buffer; `ctx.fault` says where.
    OutOfBounds = 1,
    /// A `device_assert` failed; `ctx.fault.site` says which.
    AssertFailed = 2,
    /// The program stopped waiting in a loop because another program of the launch
    /// faulted (`*ctx.stop` is not [`NO_FAULT`]); not a fault of its own. `ctx.ran` holds
    /// how many programs of the call were left, this one included.
    Cancelled = 3,
}

/// What `*ProgramCtx::stop` holds while no program of the launch has faulted.
pub const NO_FAULT: u64 = u64::MAX;

/// The valid byte range of one pointer argument, relative to the address passed in its
/// slot: an access of `size` bytes at byte offset `off` is in bounds when
/// `lo <= off && off + size <= hi`. Non-pointer slots have `lo = hi = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Lowest valid byte offset (negative when the pointer points into the buffer).
    pub lo: i64,
    /// One past the highest valid byte offset.
    pub hi: i64,
}

/// What a faulting program records before returning a non-zero [`Status`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fault {
    /// Index of the access site (the compiler's site table maps it to a source span).
    pub site: u32,
    /// ABI slot of the pointer argument whose buffer was violated.
    pub arg: u32,
    /// Offending offset in elements, relative to the argument's pointer.
    pub offset: i64,
}

/// Bytes at the start of a scratch area that are zero when a worker starts a launch.
pub const ZEROED_SCRATCH_BYTES: usize = 64;

/// The context passed to a kernel call, shared by the programs it runs.
#[repr(C)]
#[derive(Debug)]
pub struct ProgramCtx {
    /// One [`Bounds`] per argument slot (read by checked code only).
    pub bounds: *const Bounds,
    /// The worker's scratch area, 64-byte aligned, at least the kernel's scratch size. Its
    /// first [`ZEROED_SCRATCH_BYTES`] bytes (or all of it, when smaller) are zero when the
    /// worker starts a launch, and the programs a worker runs in a launch share the area:
    /// what a program writes there is seen by the worker's next program (kernels keep
    /// flags there, set once per launch and worker).
    pub scratch: *mut u8,
    /// Written by the kernel when it returns a non-zero status.
    pub fault: Fault,
    /// Written with `fault`: how many programs of the call finished before the one that
    /// stopped; with [`Status::Cancelled`] (`fault` unwritten): how many programs of the
    /// call were left, the cancelled one included.
    pub ran: u64,
    /// The launch's lowest faulting flat program index, [`NO_FAULT`] while none has
    /// faulted; written by the launcher, read by programs waiting in loops (see the module
    /// docs). Never null.
    pub stop: *const AtomicU64,
}

/// Byte offsets of [`ProgramCtx`]'s fields, for code generation.
pub mod ctx_offsets {
    /// `bounds`.
    pub const BOUNDS: i32 = 0;
    /// `scratch`.
    pub const SCRATCH: i32 = 8;
    /// `fault.site` (u32).
    pub const FAULT_SITE: i32 = 16;
    /// `fault.arg` (u32).
    pub const FAULT_ARG: i32 = 20;
    /// `fault.offset` (i64).
    pub const FAULT_OFFSET: i32 = 24;
    /// `ran` (u64).
    pub const RAN: i32 = 32;
    /// `stop` (a pointer to a u64).
    pub const STOP: i32 = 40;
}

/// Byte offsets of [`Bounds`]'s fields and its size, for code generation.
pub mod bounds_offsets {
    /// `lo`.
    pub const LO: i32 = 0;
    /// `hi`.
    pub const HI: i32 = 8;
    /// Size of one entry.
    pub const SIZE: i32 = 16;
}

/// The signature every compiled kernel has.
pub type KernelFn = unsafe extern "C" fn(
    args: *const u64,
    pid: *const u32,
    nprog: *const u32,
    ctx: *mut ProgramCtx,
    count: u64,
) -> u32;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn offsets_match_layout() {
        assert_eq!(offset_of!(ProgramCtx, bounds) as i32, ctx_offsets::BOUNDS);
        assert_eq!(offset_of!(ProgramCtx, scratch) as i32, ctx_offsets::SCRATCH);
        assert_eq!((offset_of!(ProgramCtx, fault) + offset_of!(Fault, site)) as i32, ctx_offsets::FAULT_SITE);
        assert_eq!((offset_of!(ProgramCtx, fault) + offset_of!(Fault, arg)) as i32, ctx_offsets::FAULT_ARG);
        assert_eq!(
            (offset_of!(ProgramCtx, fault) + offset_of!(Fault, offset)) as i32,
            ctx_offsets::FAULT_OFFSET
        );
        assert_eq!(offset_of!(ProgramCtx, ran) as i32, ctx_offsets::RAN);
        assert_eq!(offset_of!(ProgramCtx, stop) as i32, ctx_offsets::STOP);
        assert_eq!(std::mem::size_of::<Bounds>() as i32, bounds_offsets::SIZE);
    }
}
