//! Software prefetches, which Cranelift does not have.
//!
//! A `prefetch` of the loop IR (module `prefetch` of lnc-tile) is emitted as a byte load
//! whose memory flags carry a trap code of our own, [`MARK`], and whose result nothing
//! uses: a load that may trap is not moved or removed as dead code, and Cranelift records
//! the code offset of every instruction with a trap code. After compilation each one is rewritten
//! in place to a prefetch of the same address, which has the same length:
//!
//! | Cranelift emits | becomes |
//! |---|---|
//! | `movzb{l,q} m8, r` (`[REX] 0F B6 /r`) | `prefetchnta m8` (`[REX] 0F 18 /0`) |
//! | the same, marked [`WRITE_MARK`] | `prefetchw m8` (`[REX] 0F 0D /1`) |
//!
//! The register field of the ModRM byte becomes the prefetch's `/0`, and the REX prefix
//! loses its W and R bits (the width and the register, which a prefetch does not have);
//! its X and B bits, which extend the address's index and base registers, and the ModRM's
//! addressing bits, SIB byte and displacement stay as they are.
//!
//! Why `prefetchnta` ([`HINT`]): the lines are the worker's next program's row, read by
//! that program's first pass and by its later passes while they are still in the core's
//! caches; the non-temporal hint brings them close to the core without making room for
//! them among the lines the current program keeps in the second-level cache (the seed
//! backward's partial rows of dw and db, the current rows). It was `prefetcht1` (the
//! outer levels), chosen on a C model of the fp16 forward (7.5 against 8.2 ms for 4096
//! rows of 4096 with `prefetcht0`). Measured on the seed kernels compiled both ways,
//! launches alternated in one process (M = 4096, 2 threads, caches flushed before each
//! launch, medians of 60 launches (40 for the half backward), the ratio the median of
//! the paired ratios, two runs, the machine in both of its memory states during them):
//! `prefetchnta` over `prefetcht1` took
//! - fp32 forward: 0.94–0.95 at N = 512–768, 0.95–0.98 at 1000–4096, 0.99–1.00 at 8192
//!   and 16384;
//! - fp32 dx + dwdb: 0.97–0.98 at 768, 0.94–0.96 at 1000, 0.92–0.93 at 2048, 0.83–0.91
//!   at 4096–8192, 0.99–1.00 at 16384 (at 512 0.96 and 1.02, at 1024 0.94 and 1.04);
//! - fp16 and bf16 forward: 0.95–1.00 at N = 768–8192, at 16384 fp16 1.01 and bf16
//!   0.94–0.96 (at 512, whose rows of 1 KB get no prefetches, 1.00–1.02);
//! - fp16 dx + dwdb 0.96–0.98 at 512–2048 and 0.85–0.94 at 4096–8192; bf16 0.98–1.01 at
//!   512–4096 and 0.93 at 8192.
//!
//! `prefetcht0` measured between the two (one run of 40 launches: fp32 forward 0.87–1.07
//! of `prefetcht1`, dx + dwdb 0.85–1.02).
//!
//! A write prefetch (`prefetch.write`, module `stream` of lnc-tile) asks for the line in
//! the exclusive state, as a store that misses would, but without the store waiting for
//! it: the cached stores at the ends of a streamed row then find their lines owned.
//! `prefetchw` is in every x86-64 processor AMD has made and in Intel's since Broadwell
//! (CPUID `0x8000_0001`, ECX bit 8); where the host lacks it, `prefetcht0` stands in.
//!
//! A prefetch never faults, so its address may be anything, such as the row after the
//! grid's last. The byte load it replaces could fault: an instruction that is not the
//! expected encoding is an error of the compilation, never left in the code.

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::{AliasRegionData, InstBuilder, types};
use lnc_lir as lir;

use crate::CodegenError;
use crate::base::FunctionCx;

/// The trap code marking a load to rewrite into a prefetch.
pub(crate) const MARK: u8 = 0x50;

/// The trap code marking a load to rewrite into a write prefetch.
pub(crate) const WRITE_MARK: u8 = 0x53;

/// The prefetch's hint, the register field of its ModRM byte (`0F 18 /hint`): 0 is
/// `prefetchnta` (1 `prefetcht0`, 2 `prefetcht1`, 3 `prefetcht2`; see the module docs).
const HINT: u8 = 0;

/// Emits the marked load standing for a prefetch of element `offset` of `ptr`; nothing on
/// hosts other than x86-64, whose machine code this module does not rewrite.
///
/// The load is in an alias region of its own: Cranelift's redundant-load elimination
/// never lets a data load take its result, which no instruction writes once it is a
/// prefetch. (Cranelift may still drop a second marked load of the same address: one
/// prefetch fewer.)
/// `write`: a write prefetch.
pub(crate) fn codegen_prefetch(
    fx: &mut FunctionCx,
    ptr: lir::Value,
    offset: lir::Value,
    write: bool,
) -> Result<(), CodegenError> {
    // The code is for the host (`cranelift_native`), so the host's architecture decides.
    if !cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    let size = fx.f.ty(ptr).dtype().size();
    let base = fx.scalar(ptr)?;
    let addr = crate::memory::offset_address(fx, base, offset, size)?;
    let region = *fx.prefetch_region.get_or_insert_with(|| {
        fx.bcx
            .func
            .dfg
            .alias_regions
            .insert(AliasRegionData { user_id: u32::from(MARK), description: "prefetch".into() })
    });
    let flags = crate::marks::flags(if write { WRITE_MARK } else { MARK }).with_alias_region(Some(region));
    fx.bcx.ins().load(types::I8, flags, addr, 0);
    Ok(())
}

/// Rewrites the marked loads of `code` (trap records `traps`) in place into prefetches;
/// returns how many.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
    rewrite(code, traps, MARK, [0x18, HINT])
}

/// Rewrites the loads marked [`WRITE_MARK`] of `code` in place into write prefetches
/// (`prefetcht0` where the host has no `prefetchw`); returns how many.
pub(crate) fn patch_write(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
    rewrite(code, traps, WRITE_MARK, if host_has_prefetchw() { [0x0d, 1] } else { [0x18, 1] })
}

/// Whether the host has `prefetchw` (CPUID `0x8000_0001`, ECX bit 8, "3DNowPrefetch"),
/// asked once: under a hypervisor each CPUID exits to it.
fn host_has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let max = std::arch::x86_64::__cpuid(0x8000_0000).eax;
            max >= 0x8000_0001 && (std::arch::x86_64::__cpuid(0x8000_0001).ecx >> 8) & 1 == 1
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Rewrites the loads marked `mark` into `0F opcode /reg` with the same address.
fn rewrite(
    code: &mut [u8],
    traps: &[MachTrap],
    mark: u8,
    [opcode, reg]: [u8; 2],
) -> Result<u32, CodegenError> {
    let mut n = 0;
    for at in crate::marks::offsets(traps, mark) {
        let (rex, op) = movzx_at(code, at)
            .ok_or_else(|| crate::marks::unexpected(code, at, "a prefetch", "byte load"))?;
        if let Some(r) = rex {
            code[r] &= !0x0c;
        }
        code[op] = opcode;
        code[op + 1] = (code[op + 1] & 0xc7) | (reg << 3);
        n += 1;
    }
    Ok(n)
}

/// The index of the REX prefix, if any, and of the `B6` opcode byte of a `movzx r, m8` with
/// a memory operand starting at `at`, if that is what is there.
fn movzx_at(code: &[u8], at: usize) -> Option<(Option<usize>, usize)> {
    let b = code.get(at..)?;
    let rex = (0x40..=0x4f).contains(b.first()?);
    let k = rex as usize;
    let modrm = *b.get(k + 2)?;
    // `mod = 11` is a register operand.
    let ok = b.get(k) == Some(&0x0f) && b.get(k + 1) == Some(&0xb6) && modrm >> 6 != 3;
    ok.then_some((rex.then_some(at), at + k + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_byte_loads_to_prefetches() {
        // movzbl (%rdi), %eax ; movzbq 0x40(%r8,%r9,4), %r11 (REX.WRXB) ; movzbl 0x1000(%rsp), %ecx
        let cases: [(&[u8], &[u8]); 3] = [
            (&[0x0f, 0xb6, 0x07], &[0x0f, 0x18, 0x07]),
            (&[0x4f, 0x0f, 0xb6, 0x5c, 0x88, 0x40], &[0x43, 0x0f, 0x18, 0x44, 0x88, 0x40]),
            (
                &[0x0f, 0xb6, 0x8c, 0x24, 0x00, 0x10, 0x00, 0x00],
                &[0x0f, 0x18, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00],
            ),
        ];
        crate::marks::assert_rewrites(MARK, &cases, patch);
    }

    #[test]
    fn rewrites_write_marked_byte_loads_to_write_prefetches() {
        // `prefetchw` is `0F 0D /1`; `prefetcht0` (`0F 18 /1`) stands in without it.
        let op = if host_has_prefetchw() { 0x0d } else { 0x18 };
        let cases: [(&[u8], &[u8]); 2] = [
            (&[0x0f, 0xb6, 0x07], &[0x0f, op, 0x0f]),
            (&[0x4f, 0x0f, 0xb6, 0x5c, 0x88, 0x40], &[0x43, 0x0f, op, 0x4c, 0x88, 0x40]),
        ];
        crate::marks::assert_rewrites(WRITE_MARK, &cases, patch_write);
        // Each rewrite takes its own marks only.
        let mut code = vec![0x0f, 0xb6, 0x07];
        let read =
            MachTrap { offset: 0, code: cranelift_codegen::ir::TrapCode::user(MARK).expect("nonzero") };
        assert_eq!(patch_write(&mut code, &[read]).expect("nothing to rewrite"), 0);
        assert_eq!(code, [0x0f, 0xb6, 0x07]);
    }

    #[test]
    fn refuses_anything_else() {
        let cases: [&[u8]; 5] = [
            &[0x0f, 0xb6, 0xc7],       // movzbl %dil, %eax: a register operand
            &[0x0f, 0xb7, 0x07],       // movzwl
            &[0x8a, 0x07],             // movb
            &[0xc5, 0xf8, 0x10, 0x00], // vmovups
            &[0x0f],                   // truncated
        ];
        crate::marks::assert_refuses(MARK, &cases, patch);
    }
}
