//! `fp16` tiles widened by the CPU's F16C instruction, which Cranelift does not have.
//!
//! Without it a tile of four `fp16` lanes widens to `f32` in about a dozen integer and
//! float instructions (`half.rs`). With it, one: `vcvtph2ps xmm, m64` loads the four
//! halves and converts them, exactly, as the runtime's row helpers do.
//!
//! Code generation emits the load as Cranelift's `uload16x4` (four `u16` lanes
//! zero-extended to `i32x4`), whose memory flags carry a trap code of our own, [`MARK`],
//! and takes its result as `f32x4`. With AVX, Cranelift encodes that load as `vpmovzxwd
//! xmm, m64`, which has the same prefix, operands and length as `vcvtph2ps`: after
//! compilation each marked one is rewritten in place:
//!
//! | Cranelift emits | becomes |
//! |---|---|
//! | `vpmovzxwd xmm, m64` (`VEX.128.66.0F38.WIG 33 /r`) | `vcvtph2ps xmm, m64` (`VEX.128.66.0F38.W0 13 /r`) |
//!
//! Only the opcode byte and the VEX `W` bit change; the register, the addressing (ModRM,
//! SIB, displacement) and the VEX `R`, `X`, `B` bits stay. Both write all 128 bits of
//! the register, and Cranelift only ever sees the value as a 128-bit vector, so it moves
//! and spills it whole. An instruction found at a mark that is not this encoding is an
//! error of the compilation, never left in the code.
//!
//! The conversion is exact for every pattern: subnormals become normal `f32`, infinities
//! stay, NaNs keep their sign and payload and are quieted, as `half.rs`'s conversion does
//! (the runtime's row helpers use the same instruction; the tests compare all 65 536
//! patterns). It does not read the MXCSR's rounding or denormal bits.

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, TrapCode, Value, types};

use crate::CodegenError;
use crate::base::FunctionCx;

/// The trap code marking a `uload16x4` to rewrite into `vcvtph2ps`.
pub(crate) const MARK: u8 = 0x51;

/// Whether kernels compiled for `isa` on this host widen `fp16` tiles with F16C: the
/// host has F16C, and the ISA has AVX, so that Cranelift emits the VEX form rewritten here.
pub(crate) fn available(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let flags = isa.isa_flags();
        let avx = flags.iter().any(|v| v.name == "has_avx" && v.as_bool() == Some(true));
        avx && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        false
    }
}

/// Loads the four `fp16` elements at `addr + offset` as an `f32x4`.
pub(crate) fn widen_4(fx: &mut FunctionCx, addr: Value, offset: i32) -> Value {
    let flags = MemFlagsData::new()
        .with_endianness(cranelift_codegen::ir::Endianness::Little)
        .with_trap_code(TrapCode::user(MARK));
    let v = fx.bcx.ins().uload16x4(flags, addr, offset);
    fx.bcx.ins().bitcast(types::F32X4, crate::value::bitcast_flags(), v)
}

/// Rewrites the marked loads of `code` (trap records `traps`) in place into `vcvtph2ps`;
/// returns how many.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> Result<u32, CodegenError> {
    let mark = TrapCode::user(MARK);
    let mut n = 0;
    for t in traps.iter().filter(|t| Some(t.code) == mark) {
        let at = t.offset as usize;
        if !vpmovzxwd_at(code, at) {
            let bytes = &code[at.min(code.len())..(at + 8).min(code.len())];
            return Err(CodegenError::Cranelift(format!(
                "an fp16 widening load was emitted as {bytes:02x?}, not as the vpmovzxwd it is \
                 rewritten from"
            )));
        }
        code[at + 2] &= 0x7f;
        code[at + 3] = 0x13;
        n += 1;
    }
    Ok(n)
}

/// Whether a `vpmovzxwd xmm, m64` in its 3-byte VEX form starts at `at`: `C4`, then
/// `RXB` and map `0F38`, then `W`, `vvvv = 1111` (no second source), `L = 0` and
/// `pp = 66`, opcode `33`, and a ModRM with a memory operand.
fn vpmovzxwd_at(code: &[u8], at: usize) -> bool {
    let Some(b) = code.get(at..at + 5) else { return false };
    b[0] == 0xc4 && b[1] & 0x1f == 0x02 && b[2] & 0x7f == 0x79 && b[3] == 0x33 && b[4] >> 6 != 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trap() -> MachTrap {
        MachTrap { offset: 0, code: TrapCode::user(MARK).unwrap() }
    }

    #[test]
    fn rewrites_vpmovzxwd_to_vcvtph2ps() {
        let cases: [(&[u8], &[u8]); 3] = [
            // vpmovzxwd (%rdi), %xmm0
            (&[0xc4, 0xe2, 0x79, 0x33, 0x07], &[0xc4, 0xe2, 0x79, 0x13, 0x07]),
            // vpmovzxwd 0x10(%r8,%r9,2), %xmm12 (VEX.R, X, B clear = extended registers)
            (&[0xc4, 0x02, 0x79, 0x33, 0x64, 0x48, 0x10], &[0xc4, 0x02, 0x79, 0x13, 0x64, 0x48, 0x10]),
            // W set (WIG lets an assembler set it): cleared, vcvtph2ps is W0
            (
                &[0xc4, 0xe2, 0xf9, 0x33, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00],
                &[0xc4, 0xe2, 0x79, 0x13, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00],
            ),
        ];
        for (from, to) in cases {
            let mut code = from.to_vec();
            assert_eq!(patch(&mut code, &[trap()]).unwrap(), 1);
            assert_eq!(code, to, "{from:02x?}");
        }
    }

    #[test]
    fn refuses_anything_else() {
        let cases: [&[u8]; 6] = [
            &[0xc4, 0xe2, 0x79, 0x33, 0xc1], // vpmovzxwd %xmm1, %xmm0: a register operand
            &[0x66, 0x0f, 0x38, 0x33, 0x07], // pmovzxwd (%rdi), %xmm0: no VEX
            &[0xc4, 0xe2, 0x7d, 0x33, 0x07], // VEX.256
            &[0xc4, 0xe2, 0x79, 0x23, 0x07], // vpmovsxwd
            &[0xc4, 0xe1, 0x79, 0x33, 0x07], // map 0F
            &[0xc4, 0xe2, 0x79],             // truncated
        ];
        for bytes in cases {
            let mut code = bytes.to_vec();
            assert!(patch(&mut code, &[trap()]).is_err(), "{bytes:02x?}");
            assert_eq!(code, bytes);
        }
    }
}
