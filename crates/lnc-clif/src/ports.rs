//! Subtractions on the multiply units: in a loop with more vector additions and
//! subtractions than multiplications, some subtractions are emitted as `fma(x, 1, -y)`.
//!
//! AMD's Zen cores add on two pipes and multiply (or multiply-add) on two others. The
//! variance loop of a layer norm, `acc += (x - mean) * (x - mean)`, has two additions per
//! multiplication, so its adds wait on their two pipes while the multiply pipes idle half
//! the time. A multiply-add by 1 is the same operation to the bit: `x · 1` is exact, so
//! `fma(x, 1, -y)` rounds `x - y` once, as the subtraction does, with the same signed
//! zeros and infinities, and Cranelift emits one `vfmsub`, which returns the same NaN as
//! `vsubps` (`x`'s when both are NaN, else the NaN operand, its sign untouched). On this
//! machine (Zen 4) the seed forward's variance loop, timed alone on rows of 1024 in L2,
//! went from 6.03 to 5.56 µs for 64 rows, and the whole forward from 17.0 to 16.1 µs. On
//! Intel cores from Skylake to Tiger Lake additions and multiply-adds share two ports with
//! the same latency, so there it changes nothing.
//!
//! Which subtractions move:
//! - those of an innermost loop's body that do not depend on a loop-carried value: an
//!   accumulator's chain runs at the latency of each step, and a multiply-add takes a
//!   cycle longer than a subtraction;
//! - not those with a negated operand: Cranelift folds the negation into the multiply-add
//!   (`vfmadd`, `vfnmsub`), which returns a NaN operand unnegated where the plain code
//!   negates it first;
//! - not additions: Cranelift swaps an addition's operands to fold a load, which changes
//!   which of two NaNs it returns, and a multiply-add would not follow it;
//! - spread evenly over the body (one copy in two of an unrolled loop, rather than the
//!   first copies), so that every stretch of it keeps both kinds of pipe busy.
//!
//! Only when the host has AVX and FMA ([`host_has_fma`]): without them Cranelift lowers a
//! vector `fma` to a call per lane.
//!
//! Only in 128-bit loops: the 256- and 512-bit loops of module `wide` emit subtractions.
//! Measured on this machine (Zen 5) with those loops fusing theirs too (a broadcast `1.0`
//! in front of each loop): the variance loop's body alone, in 512 bits with `fp16` rows,
//! took 6.94 cycles an iteration with four subtractions, 6.38 with two fused and 5.88 with
//! all four (its conversions run on the addition pipes); but the seed forward per row in
//! the cache (one thread, `lnc bench`) was within 3 % either way with two fused (`fp16`
//! 99.6-121 ns at N = 768-1024 against 99.3-124.5, `fp32` 115-155 against 118-168), and
//! 5-20 % slower with every movable subtraction fused.

use std::collections::HashSet;

use lnc_lir::{self as lir, BinOp, Opcode, Ty, UnOp};

/// The subtractions of `f` to emit as multiply-adds by 1.
pub(crate) fn fused_subs(f: &lir::Function) -> HashSet<lir::Inst> {
    let mut fused = HashSet::new();
    f.walk(|l| {
        let data = &f.insts[l];
        if data.opcode != Opcode::For {
            return;
        }
        let body = &data.regions[0];
        if body.insts.iter().any(|&i| !f.insts[i].regions.is_empty()) {
            return;
        }
        // The values that depend on a loop-carried one (the body is in program order).
        let mut carried: HashSet<lir::Value> = body.args[1..].iter().copied().collect();
        let (mut adds, mut muls, mut movable) = (0usize, 0usize, Vec::new());
        for &i in body.insts.iter() {
            let d = &f.insts[i];
            if d.args.iter().any(|a| carried.contains(a)) {
                carried.extend(d.results.iter().copied());
            }
            let Opcode::Binary(op) = d.opcode else { continue };
            if !matches!(f.ty(d.results[0]), Ty::Tile(dt, _) if dt.is_float() && dt.size() >= 4) {
                continue;
            }
            match op {
                BinOp::Add => adds += 1,
                BinOp::Sub => {
                    adds += 1;
                    let negated = d.args.iter().any(|&a| {
                        matches!(f.values[a].def, lir::ValueDef::Result(j, _)
                            if f.insts[j].opcode == Opcode::Unary(UnOp::Neg))
                    });
                    if !negated && !carried.contains(&d.results[0]) {
                        movable.push(i);
                    }
                }
                BinOp::Mul => muls += 1,
                _ => {}
            }
        }
        let k = (adds.saturating_sub(muls) / 2).min(movable.len());
        fused.extend((0..k).map(|j| movable[j * movable.len() / k]));
    });
    fused
}

/// Whether the host ISA that kernels are compiled for has AVX and FMA (what Cranelift
/// needs to emit `vfmsub`).
pub(crate) fn host_has_fma(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    crate::marks::isa_has(isa, "has_avx") && crate::marks::isa_has(isa, "has_fma")
}
