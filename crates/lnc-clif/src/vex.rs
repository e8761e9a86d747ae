//! The SSE instructions Cranelift emits without VEX, encoded again with VEX in code that
//! has wide loops (module `widen`).
//!
//! With AVX, Cranelift encodes its arithmetic with VEX but not every instruction on
//! vector registers: its register-to-register moves (the register allocator's, and the
//! one of a `select` of floats, which jumps over a move), its spills and reloads of
//! vector registers (`movdqu`, `movss`), the sequence of a scalar `fmin`/`fmax`
//! (`ucomiss`, `andps`, `orps`, `addss`, `maxss`), and those of its conversions between
//! floats and integers (`cvttss2si`, `cvtsi2ss`, `subss`, `xorps`, `movd`) are SSE
//! instructions. An SSE instruction keeps the bits of its destination above 128, so after
//! code that left the high halves of `ymm` registers set (the wide loops) it waits for
//! them. On Zen 3 the `movaps` of the seed forward's `select(N < BLOCK_SIZE, 0.0, -0.0)`,
//! run once per row after the wide loops, made a program take 158-164 ns instead of 53
//! (rows of 8 elements, `BLOCK_SIZE` 1024, one thread, rows in the cache), and the
//! forward at N = 768 and 1000 took 1.13-1.27 times as long in fp32, fp16 and bf16 (4096
//! rows, two threads, caches flushed, launches alternated); TensorRT-LLM's layer norm
//! with the difference of squares, whose `max(var, 0)` is such a sequence, 1.05 times as
//! long at N = 768-1024.
//!
//! The VEX form of such an instruction does the same to the low 128 bits and zeroes the
//! bits above, which Cranelift's code never reads. `widen`'s proof already takes a write
//! by one of these as leaving its register narrow (inside a wide loop's code, the moves the
//! proof needs are encoded instead as moves of the whole register), so none lies between
//! a wide value and a use of its high lanes. A VEX form is often the same length (the
//! prefixes `F3 0F` become `C5 xx`), and is then written in place; otherwise the function
//! is encoded again. The forms this module knows are those Cranelift 0.135 emits; a
//! memory source of the arithmetic is left as it is (Cranelift gives it registers), and
//! `tests/tests/wide.rs` checks the kernels it compiles have no SSE instruction left.

use iced_x86::{Code, EncodingKind, Instruction, OpKind};

/// The VEX form of `ins` when it is an SSE instruction this module encodes again (those
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
        Code::Movq_xmm_xmmm64 => Code::VEX_Vmovq_xmm_xmmm64,
        Code::Movq_xmmm64_xmm => Code::VEX_Vmovq_xmmm64_xmm,
        Code::Movd_xmm_rm32 => Code::VEX_Vmovd_xmm_rm32,
        Code::Movq_xmm_rm64 => Code::VEX_Vmovq_xmm_rm64,
        Code::Movd_rm32_xmm => Code::VEX_Vmovd_rm32_xmm,
        Code::Movq_rm64_xmm => Code::VEX_Vmovq_rm64_xmm,
        Code::Ucomiss_xmm_xmmm32 => Code::VEX_Vucomiss_xmm_xmmm32,
        Code::Ucomisd_xmm_xmmm64 => Code::VEX_Vucomisd_xmm_xmmm64,
        Code::Comiss_xmm_xmmm32 => Code::VEX_Vcomiss_xmm_xmmm32,
        Code::Comisd_xmm_xmmm64 => Code::VEX_Vcomisd_xmm_xmmm64,
        Code::Cvttss2si_r32_xmmm32 => Code::VEX_Vcvttss2si_r32_xmmm32,
        Code::Cvttss2si_r64_xmmm32 => Code::VEX_Vcvttss2si_r64_xmmm32,
        Code::Cvttsd2si_r32_xmmm64 => Code::VEX_Vcvttsd2si_r32_xmmm64,
        Code::Cvttsd2si_r64_xmmm64 => Code::VEX_Vcvttsd2si_r64_xmmm64,
        code => {
            let vex = destructive(code)?;
            if ins.op0_kind() != OpKind::Register || ins.op1_kind() != OpKind::Register {
                return None;
            }
            let (dst, src) = (ins.op0_register(), ins.op1_register());
            let mut made = Instruction::with3(vex, dst, dst, src).ok()?;
            made.set_ip(ins.ip());
            return Some(made);
        }
    };
    let mut made = *ins;
    made.set_code(same_operands);
    Some(made)
}

/// The VEX form of the two-operand SSE instructions Cranelift emits without VEX: the
/// sequence of a scalar `fmin`/`fmax` (`ucomiss`, then `andps`/`orps` for zeros of
/// either sign, `addss` for a NaN, `minss`/`maxss`), those of its conversions between
/// floats and integers (`cvttss2si` with `subss` and `xorps` around it, `cvtsi2ss`), and
/// the rest of the scalar and bitwise arithmetic, in case. The first operand is also a
/// source: the VEX form names it twice.
fn destructive(code: Code) -> Option<Code> {
    Some(match code {
        Code::Addss_xmm_xmmm32 => Code::VEX_Vaddss_xmm_xmm_xmmm32,
        Code::Addsd_xmm_xmmm64 => Code::VEX_Vaddsd_xmm_xmm_xmmm64,
        Code::Subss_xmm_xmmm32 => Code::VEX_Vsubss_xmm_xmm_xmmm32,
        Code::Subsd_xmm_xmmm64 => Code::VEX_Vsubsd_xmm_xmm_xmmm64,
        Code::Mulss_xmm_xmmm32 => Code::VEX_Vmulss_xmm_xmm_xmmm32,
        Code::Mulsd_xmm_xmmm64 => Code::VEX_Vmulsd_xmm_xmm_xmmm64,
        Code::Divss_xmm_xmmm32 => Code::VEX_Vdivss_xmm_xmm_xmmm32,
        Code::Divsd_xmm_xmmm64 => Code::VEX_Vdivsd_xmm_xmm_xmmm64,
        Code::Sqrtss_xmm_xmmm32 => Code::VEX_Vsqrtss_xmm_xmm_xmmm32,
        Code::Sqrtsd_xmm_xmmm64 => Code::VEX_Vsqrtsd_xmm_xmm_xmmm64,
        Code::Minss_xmm_xmmm32 => Code::VEX_Vminss_xmm_xmm_xmmm32,
        Code::Minsd_xmm_xmmm64 => Code::VEX_Vminsd_xmm_xmm_xmmm64,
        Code::Maxss_xmm_xmmm32 => Code::VEX_Vmaxss_xmm_xmm_xmmm32,
        Code::Maxsd_xmm_xmmm64 => Code::VEX_Vmaxsd_xmm_xmm_xmmm64,
        Code::Andps_xmm_xmmm128 => Code::VEX_Vandps_xmm_xmm_xmmm128,
        Code::Andpd_xmm_xmmm128 => Code::VEX_Vandpd_xmm_xmm_xmmm128,
        Code::Andnps_xmm_xmmm128 => Code::VEX_Vandnps_xmm_xmm_xmmm128,
        Code::Andnpd_xmm_xmmm128 => Code::VEX_Vandnpd_xmm_xmm_xmmm128,
        Code::Orps_xmm_xmmm128 => Code::VEX_Vorps_xmm_xmm_xmmm128,
        Code::Orpd_xmm_xmmm128 => Code::VEX_Vorpd_xmm_xmm_xmmm128,
        Code::Xorps_xmm_xmmm128 => Code::VEX_Vxorps_xmm_xmm_xmmm128,
        Code::Xorpd_xmm_xmmm128 => Code::VEX_Vxorpd_xmm_xmm_xmmm128,
        Code::Pxor_xmm_xmmm128 => Code::VEX_Vpxor_xmm_xmm_xmmm128,
        Code::Cvtss2sd_xmm_xmmm32 => Code::VEX_Vcvtss2sd_xmm_xmm_xmmm32,
        Code::Cvtsd2ss_xmm_xmmm64 => Code::VEX_Vcvtsd2ss_xmm_xmm_xmmm64,
        Code::Cvtsi2ss_xmm_rm32 => Code::VEX_Vcvtsi2ss_xmm_xmm_rm32,
        Code::Cvtsi2ss_xmm_rm64 => Code::VEX_Vcvtsi2ss_xmm_xmm_rm64,
        Code::Cvtsi2sd_xmm_rm32 => Code::VEX_Vcvtsi2sd_xmm_xmm_rm32,
        Code::Cvtsi2sd_xmm_rm64 => Code::VEX_Vcvtsi2sd_xmm_xmm_rm64,
        _ => return None,
    })
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
        // The register forms of the store opcode (0F 11), whose destination is the r/m
        // operand: movss %xmm2,%xmm3 and movsd %xmm0,%xmm1.
        assert_eq!(round_trip(&[0xf3, 0x0f, 0x11, 0xd3]).1, "vmovss %xmm2,%xmm3,%xmm3");
        assert_eq!(round_trip(&[0xf2, 0x0f, 0x11, 0xc1]).1, "vmovsd %xmm0,%xmm1,%xmm1");
    }

    /// Cranelift's conversions between floats and integers (`fcvt_to_sint_sat`,
    /// `fcvt_from_uint`).
    #[test]
    fn the_sse_of_conversions_takes_its_vex_forms() {
        let cases: [(&[u8], &str); 6] = [
            (&[0xf3, 0x44, 0x0f, 0x2c, 0xd3], "vcvttss2si %xmm3,%r10d"),
            (&[0x66, 0x0f, 0x57, 0xc0], "vxorpd %xmm0,%xmm0,%xmm0"),
            (&[0x66, 0x41, 0x0f, 0x6e, 0xe2], "vmovd %r10d,%xmm4"),
            (&[0xf3, 0x0f, 0x5c, 0xc4], "vsubss %xmm4,%xmm0,%xmm0"),
            (&[0xf3, 0x49, 0x0f, 0x2a, 0xf0], "vcvtsi2ss %r8,%xmm6,%xmm6"),
            (&[0x66, 0x0f, 0x2e, 0xc1], "vucomisd %xmm1,%xmm0"),
        ];
        for (bytes, want) in cases {
            assert_eq!(round_trip(bytes).1, want, "{bytes:02x?}");
        }
    }

    /// Cranelift's sequence of a scalar `fmax`, as in TensorRT-LLM's `max(var, 0)`.
    #[test]
    fn the_sse_of_a_scalar_fmax_takes_its_vex_forms() {
        let cases: [(&[u8], &str); 6] = [
            (&[0x0f, 0x2e, 0xe5], "vucomiss %xmm5,%xmm4"),
            (&[0x0f, 0x54, 0xe5], "vandps %xmm5,%xmm4,%xmm4"),
            (&[0x0f, 0x56, 0xe5], "vorps %xmm5,%xmm4,%xmm4"),
            (&[0xf3, 0x0f, 0x58, 0xe5], "vaddss %xmm5,%xmm4,%xmm4"),
            (&[0xf3, 0x0f, 0x5f, 0xe5], "vmaxss %xmm5,%xmm4,%xmm4"),
            (&[0xf2, 0x45, 0x0f, 0x5d, 0xc1], "vminsd %xmm9,%xmm8,%xmm8"),
        ];
        for (bytes, want) in cases {
            assert_eq!(round_trip(bytes).1, want, "{bytes:02x?}");
        }
    }

    #[test]
    fn other_instructions_stay() {
        for bytes in [
            &[0xc5, 0xf8, 0x28, 0xec][..],   // vmovaps %xmm4,%xmm5
            &[0x48, 0x89, 0xc8],             // mov %rcx,%rax
            &[0x0f, 0x58, 0xc1],             // addps %xmm1,%xmm0: not emitted by Cranelift
            &[0xf3, 0x0f, 0x58, 0x04, 0x24], // addss (%rsp),%xmm0: a memory source is not handled
        ] {
            let ins = Decoder::with_ip(64, bytes, 0, DecoderOptions::NONE).decode();
            assert!(vex_form(&ins).is_none(), "{bytes:02x?}");
        }
    }
}
