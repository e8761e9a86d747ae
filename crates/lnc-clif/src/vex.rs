//! The SSE moves Cranelift encodes without VEX, encoded again with VEX in code that has
//! wide loops (module `widen`).
//!
//! With AVX, Cranelift encodes its arithmetic with VEX but not every move of a vector
//! register: its register-to-register moves (the register allocator's, and the one of a
//! `select` of floats, which jumps over a move), its spills and reloads of vector
//! registers (`movdqu`, `movss`) and some others are SSE instructions. An SSE instruction
//! keeps the bits of its destination above 128, so after code that left the high halves
//! of `ymm` registers set (the wide loops) it waits for them. On Zen 3 that made the
//! `movaps` of the seed forward's `select(N < BLOCK, 0.0, -0.0)`, run once per row,
//! cost about 90 ns a program (rows of 8 elements, `BLOCK_SIZE` 1024, one thread, rows in
//! the cache: 164 ns a program against 74 without it), and the forward at N = 768 took
//! 1.25 times as long in every dtype (4096 rows, two threads, caches flushed).
//!
//! The VEX form of such a move does the same to the low 128 bits and zeroes the bits
//! above, which Cranelift's code never reads; inside a wide loop's code `widen` encodes the
//! moves the proof needs as moves of the whole register instead, so a register it proves
//! wide is never written by one of these. A VEX form is often the same length (the
//! prefixes `F3 0F` become `C5 xx`), and is then written in place; otherwise the function
//! is encoded again.

use iced_x86::{Code, EncodingKind, Instruction, OpKind};

/// The VEX form of `ins` when it is an SSE move this module encodes again (the moves
/// Cranelift emits); None otherwise.
pub(crate) fn vex_form(ins: &Instruction) -> Option<Instruction> {
    if ins.encoding() != EncodingKind::Legacy {
        return None;
    }
    let same_operands = match ins.code() {
        Code::Movaps_xmm_xmmm128 => Code::VEX_Vmovaps_xmm_xmmm128,
        Code::Movaps_xmmm128_xmm => Code::VEX_Vmovaps_xmmm128_xmm,
        Code::Movapd_xmm_xmmm128 => Code::VEX_Vmovapd_xmm_xmmm128,
        Code::Movapd_xmmm128_xmm => Code::VEX_Vmovapd_xmmm128_xmm,
        Code::Movups_xmm_xmmm128 => Code::VEX_Vmovups_xmm_xmmm128,
        Code::Movups_xmmm128_xmm => Code::VEX_Vmovups_xmmm128_xmm,
        Code::Movupd_xmm_xmmm128 => Code::VEX_Vmovupd_xmm_xmmm128,
        Code::Movupd_xmmm128_xmm => Code::VEX_Vmovupd_xmmm128_xmm,
        Code::Movdqa_xmm_xmmm128 => Code::VEX_Vmovdqa_xmm_xmmm128,
        Code::Movdqa_xmmm128_xmm => Code::VEX_Vmovdqa_xmmm128_xmm,
        Code::Movdqu_xmm_xmmm128 => Code::VEX_Vmovdqu_xmm_xmmm128,
        Code::Movdqu_xmmm128_xmm => Code::VEX_Vmovdqu_xmmm128_xmm,
        // A scalar move between registers merges into its destination: the VEX form
        // names the destination twice (`vmovss x1, x1, x2`).
        Code::Movss_xmm_xmmm32 | Code::Movss_xmmm32_xmm | Code::Movsd_xmm_xmmm64 | Code::Movsd_xmmm64_xmm
            if ins.op0_kind() == OpKind::Register && ins.op1_kind() == OpKind::Register =>
        {
            let code = if ins.code() == Code::Movss_xmm_xmmm32 || ins.code() == Code::Movss_xmmm32_xmm {
                Code::VEX_Vmovss_xmm_xmm_xmm
            } else {
                Code::VEX_Vmovsd_xmm_xmm_xmm
            };
            let (dst, src) = (ins.op0_register(), ins.op1_register());
            let mut made = Instruction::with3(code, dst, dst, src).ok()?;
            made.set_ip(ins.ip());
            return Some(made);
        }
        Code::Movss_xmm_xmmm32 => Code::VEX_Vmovss_xmm_m32,
        Code::Movss_xmmm32_xmm => Code::VEX_Vmovss_m32_xmm,
        Code::Movsd_xmm_xmmm64 => Code::VEX_Vmovsd_xmm_m64,
        Code::Movsd_xmmm64_xmm => Code::VEX_Vmovsd_m64_xmm,
        _ => return None,
    };
    let mut made = *ins;
    made.set_code(same_operands);
    Some(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Encoder, Formatter, GasFormatter};

    /// `bytes` decoded, rewritten by [`vex_form`], encoded and decoded again: the text of
    /// each, and whether the form kept the length.
    fn round_trip(bytes: &[u8]) -> (String, String, bool) {
        let ins = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode();
        assert_eq!(ins.len(), bytes.len(), "{bytes:02x?} is one instruction");
        let made = vex_form(&ins).expect("an SSE move");
        let mut enc = Encoder::new(64);
        enc.encode(&made, 0x1000).expect("encodes");
        let out = enc.take_buffer();
        let again = Decoder::with_ip(64, &out, 0x1000, DecoderOptions::NONE).decode();
        let mut f = GasFormatter::new();
        f.options_mut().set_uppercase_hex(false);
        let (mut a, mut b) = (String::new(), String::new());
        f.format(&ins, &mut a);
        f.format(&again, &mut b);
        assert_eq!(again.encoding(), EncodingKind::VEX);
        (a, b, out.len() == bytes.len())
    }

    #[test]
    fn sse_moves_take_their_vex_forms() {
        // movaps %xmm4,%xmm5: three bytes, no VEX form as short.
        assert_eq!(
            round_trip(&[0x0f, 0x28, 0xec]),
            ("movaps %xmm4,%xmm5".into(), "vmovaps %xmm4,%xmm5".into(), false)
        );
        // movdqu 0xa0(%rsp),%xmm5 and its store: the same length.
        assert_eq!(
            round_trip(&[0xf3, 0x0f, 0x6f, 0xac, 0x24, 0xa0, 0, 0, 0]),
            ("movdqu 0xa0(%rsp),%xmm5".into(), "vmovdqu 0xa0(%rsp),%xmm5".into(), true)
        );
        assert_eq!(
            round_trip(&[0xf3, 0x0f, 0x7f, 0x84, 0x24, 0x90, 0, 0, 0]),
            ("movdqu %xmm0,0x90(%rsp)".into(), "vmovdqu %xmm0,0x90(%rsp)".into(), true)
        );
        // movss 8(%rsp),%xmm9: the two-byte VEX prefix holds REX.R, one byte shorter; and
        // movsd %xmm1,(%r12), whose REX.B takes the three-byte one.
        assert_eq!(
            round_trip(&[0xf3, 0x44, 0x0f, 0x10, 0x4c, 0x24, 0x08]),
            ("movss 8(%rsp),%xmm9".into(), "vmovss 8(%rsp),%xmm9".into(), false)
        );
        assert_eq!(
            round_trip(&[0xf2, 0x41, 0x0f, 0x11, 0x0c, 0x24]),
            ("movsd %xmm1,(%r12)".into(), "vmovsd %xmm1,(%r12)".into(), true)
        );
        // A scalar move between registers merges: movss %xmm2,%xmm3.
        assert_eq!(
            round_trip(&[0xf3, 0x0f, 0x10, 0xda]),
            ("movss %xmm2,%xmm3".into(), "vmovss %xmm2,%xmm3,%xmm3".into(), true)
        );
        // movdqa %xmm11,%xmm3 (REX.B: the three-byte VEX prefix).
        let (_, b, _) = round_trip(&[0x66, 0x41, 0x0f, 0x6f, 0xdb]);
        assert_eq!(b, "vmovdqa %xmm11,%xmm3");
    }

    #[test]
    fn other_instructions_stay() {
        for bytes in [
            &[0xc5, 0xf8, 0x28, 0xec][..], // vmovaps %xmm4,%xmm5
            &[0x48, 0x89, 0xc8],           // mov %rcx,%rax
            &[0x0f, 0x58, 0xc1],           // addps %xmm1,%xmm0: not a move Cranelift emits
        ] {
            let ins = Decoder::with_ip(64, bytes, 0, DecoderOptions::NONE).decode();
            assert!(vex_form(&ins).is_none(), "{bytes:02x?}");
        }
    }
}
