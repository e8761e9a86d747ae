//! The interval analysis of integer scalars (`ranges`).

use lnc_diag::Span;
use lnc_lir::ranges::Ranges;
use lnc_lir::*;

const S: Span = Span { start: 1, end: 2 };
const I32: Ty = Ty::Scalar(DType::I32);

#[test]
fn bounds_a_clamped_and_rounded_loop_bound() {
    let mut f = Function::new("k");
    f.add_arg("N", 0, I32);
    let mut b = Builder::new(f);
    let n = b.value(Opcode::Arg(0), vec![], I32, S);
    let (zero, block, mask) =
        (b.const_int(DType::I32, 0, S), b.const_int(DType::I32, 1024, S), b.const_int(DType::I32, -16, S));
    // The tiler's steady-loop bound: `max(min(n, 1024), 0) & -16`.
    let m = b.value(Opcode::Binary(BinOp::Min), vec![n, block], I32, S);
    let m = b.value(Opcode::Binary(BinOp::Max), vec![m, zero], I32, S);
    let ub = b.value(Opcode::Binary(BinOp::And), vec![m, mask], I32, S);
    // `n + 1` may wrap: known no better than its type.
    let one = b.const_int(DType::I32, 1, S);
    let wraps = b.value(Opcode::Binary(BinOp::Add), vec![n, one], I32, S);
    let f = b.finish();
    let r = Ranges::analyze(&f);
    assert_eq!(r.of(&f, ub), (0, 1024));
    assert!(r.known(ub));
    assert_eq!(r.of(&f, n), (i32::MIN as i128, i32::MAX as i128));
    assert!(!r.known(n) && !r.known(wraps));
}
