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
//! | `movzb{l,q} m8, r` (`[REX] 0F B6 /r`) | `prefetcht1 m8` (`[REX] 0F 18 /2`) |
//!
//! The register field of the ModRM byte becomes the prefetch's `/2`, and the REX prefix
//! loses its W and R bits (the width and the register, which a prefetch does not have);
//! its X and B bits, which extend the address's index and base registers, and the ModRM's
//! addressing bits, SIB byte and displacement stay as they are. `prefetcht1` is the hint
//! for the outer cache levels (AMD's cores before Zen 4 treat it as `prefetcht0`): the
//! lines are for the worker's next program, and bringing them into the first-level cache
//! early would evict the current program's rows. It measured faster than `prefetcht0` in a
//! C model of the fp16 forward (7.5 against 8.2 ms for 4096 rows of 4096).
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

/// Emits the marked load standing for a prefetch of element `offset` of `ptr`; nothing on
/// hosts other than x86-64, whose machine code this module does not rewrite.
///
/// The load is in an alias region of its own: Cranelift's redundant-load elimination
/// never lets a data load take its result, which no instruction writes once it is a
/// prefetch. (Cranelift may still drop a second marked load of the same address: one
/// prefetch fewer.)
pub(crate) fn codegen_prefetch(
    fx: &mut FunctionCx,
    ptr: lir::Value,
    offset: lir::Value,
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
    let flags = crate::marks::flags(MARK).with_alias_region(Some(region));
    fx.bcx.ins().load(types::I8, flags, addr, 0);
    Ok(())
}

/// Rewrites the marked loads of `code` (trap records `traps`) in place into prefetches;
/// returns how many.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
    let mut n = 0;
    for at in crate::marks::offsets(traps, MARK) {
        let (rex, op) = movzx_at(code, at)
            .ok_or_else(|| crate::marks::unexpected(code, at, "a prefetch", "byte load"))?;
        if let Some(r) = rex {
            code[r] &= !0x0c;
        }
        code[op] = 0x18;
        code[op + 1] = (code[op + 1] & 0xc7) | (2 << 3);
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
            (&[0x0f, 0xb6, 0x07], &[0x0f, 0x18, 0x17]),
            (&[0x4f, 0x0f, 0xb6, 0x5c, 0x88, 0x40], &[0x43, 0x0f, 0x18, 0x54, 0x88, 0x40]),
            (
                &[0x0f, 0xb6, 0x8c, 0x24, 0x00, 0x10, 0x00, 0x00],
                &[0x0f, 0x18, 0x94, 0x24, 0x00, 0x10, 0x00, 0x00],
            ),
        ];
        crate::marks::assert_rewrites(MARK, &cases, patch);
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
