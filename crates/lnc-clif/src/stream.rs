//! Non-temporal stores, which Cranelift does not have.
//!
//! A streaming store of the loop IR (module `stream` of lnc-tile) runs in a copy of its
//! loop taken only when `stream_ok` holds (the address is 16-byte aligned). There it is
//! emitted as an ordinary vector store whose memory flags carry a trap code of our own,
//! [`MARK`]: Cranelift records the code offset of every instruction with a trap code, so
//! after compilation the offsets of exactly those stores are known, and each one is
//! rewritten in place to its non-temporal form, which has the same length and operands:
//!
//! | Cranelift emits | becomes |
//! |---|---|
//! | `(v)movups m128, xmm` (`[VEX] 0F 11`) | `(v)movntps m128, xmm` (`[VEX] 0F 2B`) |
//! | `(v)movupd m128, xmm` (`66`/VEX.66 `0F 11`) | `(v)movntpd m128, xmm` (`0F 2B`) |
//!
//! An instruction that is not one of these encodings is left as it is (a cached store:
//! the same result, only slower) and counted in [`Patched::skipped`]. Non-temporal stores
//! are weakly ordered: the runtime fences them before a launch returns
//! (`lnc_runtime::launch`), and the tiler streams only into arguments no program reads.

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::MemFlagsData;

/// The trap code marking a store to rewrite (module `marks`).
pub(crate) const MARK: u8 = 0x4e;

/// Memory flags of a store to rewrite into a non-temporal store.
pub(crate) fn marked_flags() -> MemFlagsData {
    crate::marks::flags(MARK)
}

/// What [`patch`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Patched {
    /// Stores rewritten to non-temporal stores.
    pub streamed: u32,
    /// Marked stores left as they were (an encoding this module does not rewrite).
    pub skipped: u32,
}

/// Rewrites the marked stores of `code` (trap records `traps`) in place.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> Patched {
    let mut out = Patched::default();
    let wide = crate::marks::offsets(traps, crate::wide::STREAM_MARK);
    for at in crate::marks::offsets(traps, MARK).chain(wide) {
        match opcode_at(code, at) {
            Some(k) => {
                code[k] = 0x2b;
                out.streamed += 1;
            }
            None => out.skipped += 1,
        }
    }
    out
}

/// The index of the `0F 11` opcode byte of an unaligned 128-bit `movups`/`movupd` store
/// starting at `at`, if that is what is there.
fn opcode_at(code: &[u8], at: usize) -> Option<usize> {
    let b = code.get(at..)?;
    match *b.first()? {
        // Two-byte VEX: [R vvvv L pp], map 0F implied; vvvv must be unused (1111).
        0xc5 => {
            let p = *b.get(1)?;
            let ok = p & 0x78 == 0x78 && p & 0x04 == 0 && p & 0x03 <= 1 && *b.get(2)? == 0x11;
            ok.then_some(at + 2)
        }
        // Three-byte VEX: [RXB mmmmm] with map 0F, then [W vvvv L pp].
        0xc4 => {
            let (m, p) = (*b.get(1)?, *b.get(2)?);
            let ok =
                m & 0x1f == 1 && p & 0x78 == 0x78 && p & 0x04 == 0 && p & 0x03 <= 1 && *b.get(3)? == 0x11;
            ok.then_some(at + 3)
        }
        // Legacy SSE: [66] [REX] 0F 11.
        _ => {
            let mut k = 0;
            if b[k] == 0x66 {
                k += 1;
            }
            if (0x40..=0x4f).contains(b.get(k)?) {
                k += 1;
            }
            (*b.get(k)? == 0x0f && *b.get(k + 1)? == 0x11).then_some(at + k + 1)
        }
    }
}

/// The default streaming threshold in bytes: three quarters of the last-level cache's
/// share per hardware thread that shares it, the size from which glibc's `memcpy` switches
/// to non-temporal stores (a launch writing more would evict its own output). 8 MiB when
/// the cache cannot be read from `/sys`.
///
/// The threshold counts bytes, so a half kernel streams from twice the elements an `fp32`
/// one does: the seed forward's y streams in `fp32` from N = 768 (M = 4096: 12.6 MB) but
/// in `fp16` only from 2048. Under the benchmark's cache flush that is most of the gap
/// between them at N = 768-1024: the `fp32` forward with its stores cached took 1.09,
/// 1.02 and 1.14 of the time at N = 768, 1000 and 1024 (2 threads, 80 alternated
/// launches), while the `fp16` one streaming took 0.96, 1.12 and 1.06 (rows of 2 KB or
/// less gain little, and those of N = 1000 start off a line). Not done instead: `clzero`
/// (AMD) of each output line before its stores, to skip the read for ownership and keep
/// the line cached: 0.6 GB/s on this machine's EPYC, a hundred times slower than the
/// stores it saves.
pub fn default_threshold() -> u64 {
    lnc_runtime::last_level_cache().map_or(8 << 20, |c| c.bytes / c.threads / 4 * 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_the_unaligned_vector_stores_it_knows() {
        // vmovups %xmm4, (%rdi,%r15,4) ; vmovups %xmm4, 0x10(%rdi,%r15,4) (3-byte VEX) ;
        // movups %xmm0, (%rax) ; movupd %xmm1, (%r8) (66 REX.B 0F 11)
        let cases: [(&[u8], usize); 4] = [
            (&[0xc5, 0xf8, 0x11, 0x24, 0xb7], 2),
            (&[0xc4, 0x81, 0x78, 0x11, 0x64, 0xbf, 0x10], 3),
            (&[0x0f, 0x11, 0x00], 1),
            (&[0x66, 0x41, 0x0f, 0x11, 0x08], 3),
        ];
        for (bytes, k) in cases {
            assert_eq!(opcode_at(bytes, 0), Some(k), "{bytes:02x?}");
        }
    }

    #[test]
    fn leaves_every_other_encoding_alone() {
        let cases: [&[u8]; 6] = [
            &[0xc5, 0xfa, 0x7f, 0x00],       // vmovdqu (F3): no movntdqu form
            &[0xc5, 0xfc, 0x11, 0x00],       // 256-bit vmovups (L = 1)
            &[0xc5, 0xf8, 0x10, 0x00],       // a load
            &[0xc4, 0xe2, 0x79, 0x11, 0x00], // map 0F38
            &[0xf3, 0x0f, 0x11, 0x00],       // movss
            &[0x62, 0xf1, 0x7c, 0x08, 0x11], // EVEX
        ];
        for bytes in cases {
            assert_eq!(opcode_at(bytes, 0), None, "{bytes:02x?}");
        }
        assert_eq!(opcode_at(&[0xc5], 0), None);
        assert_eq!(opcode_at(&[], 0), None);
    }
}
