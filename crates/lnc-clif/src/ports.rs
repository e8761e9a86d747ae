//! Additions on the multiply units: in a loop with more vector additions and subtractions
//! than multiplications, some of them are emitted as `fma(x, 1, y)` and `fma(x, 1, -y)`.
//!
//! x86-64 cores run vector additions and multiply-adds on different units: current AMD
//! cores add on two pipes and multiply (or multiply-add) on two others. The variance loop
//! of a layer norm, `acc += (x - mean) * (x - mean)`, has two additions per multiplication,
//! so its adds wait on their two pipes while the multiply pipes idle half the time. A
//! multiply-add by 1 is the same operation to the bit: `x · 1` is exact, so `fma(x, 1, y)`
//! rounds `x + y` once, as the addition does, with the same signed zeros, infinities and
//! NaNs. Moving half of the surplus over balances the two kinds of pipe: the seed
//! forward's variance loop, timed alone on rows of 1024 in L2, went from 6.03 to 5.56 µs
//! for 64 rows, and the whole forward from 17.0 to 16.1 µs.
//!
//! Which additions move: those of an innermost loop's body whose result is not a
//! loop-carried value. An accumulator's update is a chain whose speed is the latency of
//! each step, and a multiply-add takes a cycle longer than an addition. The moved ones are
//! spread evenly over the body (one copy in two of an unrolled loop, rather than the first
//! copies), so that every stretch of the body keeps both kinds of pipe busy.
//!
//! Only when the host has FMA ([`host_has_fma`]); otherwise Cranelift could not lower a
//! vector `fma`.

use std::collections::HashSet;

use lnc_lir::{self as lir, BinOp, Opcode, Ty};

/// The additions and subtractions of `f` to emit as multiply-adds by 1.
pub(crate) fn fused_adds(f: &lir::Function) -> HashSet<lir::Inst> {
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
        let Some(&term) = body.insts.last() else { return };
        let carried = &f.insts[term].args;
        let (mut adds, mut muls, mut movable) = (0usize, 0usize, Vec::new());
        for &i in body.insts.iter() {
            let d = &f.insts[i];
            let Opcode::Binary(op) = d.opcode else { continue };
            if !matches!(f.ty(d.results[0]), Ty::Tile(dt, _) if dt.is_float() && dt.size() >= 4) {
                continue;
            }
            match op {
                BinOp::Add | BinOp::Sub => {
                    adds += 1;
                    if !carried.contains(&d.results[0]) {
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

/// Whether the host ISA that kernels are compiled for has FMA.
pub(crate) fn host_has_fma(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    isa.isa_flags().iter().any(|v| v.name == "has_fma" && v.as_bool() == Some(true))
}
