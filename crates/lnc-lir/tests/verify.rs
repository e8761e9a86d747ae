//! The printer on a representative function, and one broken function per verifier rule
//! with the message expected.

use lnc_diag::Span;
use lnc_lir::*;

const S: Span = Span { start: 1, end: 2 };
const F32X4: Ty = Ty::Tile(DType::F32, 4);
const I32: Ty = Ty::Scalar(DType::I32);

/// `X: *fp32 @0, Y: *fp32 @1, N: i32 @2`, one site per pointer, one scratch buffer.
fn base() -> Builder {
    let mut f = Function::new("k");
    f.add_arg("X", 0, Ty::Ptr(DType::F32));
    f.add_arg("Y", 1, Ty::Ptr(DType::F32));
    f.add_arg("N", 2, I32);
    f.add_site(Site { span: Span::new(10, 20), arg: 0 });
    f.add_site(Site { span: Span::new(30, 40), arg: 1 });
    f.add_site(Site { span: Span::new(50, 60), arg: 2 });
    f.add_scratch(DType::F32, 16);
    Builder::new(f)
}

fn arg(b: &mut Builder, slot: u32) -> Value {
    let ty = b.func.arg(slot).expect("slot").ty;
    b.value(Opcode::Arg(slot), vec![], ty, S)
}

fn load(addr: Addressing, mask: bool, other: bool) -> Opcode {
    Opcode::Load { addr, has_mask: mask, has_other: other, site: 0, volatile: false }
}

/// A loop summing X into an accumulator, storing through Y and keeping X in scratch.
fn sample() -> Function {
    let mut b = base();
    let x = arg(&mut b, 0);
    let y = arg(&mut b, 1);
    let n = arg(&mut b, 2);
    let zero = b.const_int(DType::I32, 0, S);
    let sixteen = b.const_int(DType::I32, 16, S);
    let four = b.const_int(DType::I32, 4, S);
    let fz = b.const_float(DType::F32, 0.0, S);
    let init = b.value(Opcode::Splat, vec![fz], F32X4, S);
    let f = b.inst(Opcode::For, vec![zero, sixteen, four, init], &[F32X4], S);
    b.begin_region();
    let iv = b.region_arg(f, 0, I32);
    let acc = b.region_arg(f, 0, F32X4);
    let idx = b.value(Opcode::Iota, vec![iv], Ty::Tile(DType::I32, 4), S);
    let nn = b.value(Opcode::Splat, vec![n], Ty::Tile(DType::I32, 4), S);
    let m = b.value(Opcode::Cmp(CmpOp::Lt), vec![idx, nn], Ty::Tile(DType::I1, 4), S);
    let v = b.value(load(Addressing::Contiguous, true, true), vec![x, iv, m, fz], F32X4, S);
    b.effect(Opcode::ScratchStore(0), vec![iv, v], S);
    let next = b.value(Opcode::Binary(BinOp::Add), vec![acc, v], F32X4, S);
    b.effect(
        Opcode::Store { addr: Addressing::Gather, has_mask: true, site: 1, stream: false, check_only: false },
        vec![y, idx, next, m],
        S,
    );
    b.effect(Opcode::Yield, vec![next], S);
    let r = b.end_region();
    b.set_regions(f, vec![r]);
    let total = b.func.insts[f].results[0];
    let s = b.value(Opcode::ReduceLanes(ReduceOp::Sum), vec![total], Ty::Scalar(DType::F32), S);
    let w = b.inst(Opcode::While, vec![zero], &[I32], S);
    b.begin_region();
    let c = b.region_arg(w, 0, I32);
    let flag = b.value(Opcode::Cmp(CmpOp::Lt), vec![c, n], Ty::Scalar(DType::I1), S);
    b.effect(Opcode::Condition, vec![flag, c], S);
    let r0 = b.end_region();
    b.begin_region();
    let c1 = b.region_arg(w, 1, I32);
    let one = b.const_int(DType::I32, 1, S);
    let c2 = b.value(Opcode::Binary(BinOp::Add), vec![c1, one], I32, S);
    b.effect(Opcode::Yield, vec![c2], S);
    let r1 = b.end_region();
    b.set_regions(w, vec![r0, r1]);
    let wr = b.func.insts[w].results[0];
    let pos = b.value(Opcode::Cmp(CmpOp::Gt), vec![wr, zero], Ty::Scalar(DType::I1), S);
    let i = b.inst(Opcode::If, vec![pos], &[Ty::Scalar(DType::F32)], S);
    b.begin_region();
    b.effect(Opcode::Yield, vec![s], S);
    let t = b.end_region();
    b.begin_region();
    b.effect(Opcode::Yield, vec![fz], S);
    let e = b.end_region();
    b.set_regions(i, vec![t, e]);
    let ir = b.func.insts[i].results[0];
    b.effect(
        Opcode::Store {
            addr: Addressing::Scalar,
            has_mask: false,
            site: 1,
            stream: false,
            check_only: false,
        },
        vec![y, zero, ir],
        S,
    );
    b.finish()
}

#[test]
fn prints_a_function() {
    let f = sample();
    verify(&f).expect("the sample verifies");
    insta::assert_snapshot!(print_function(&f));
}

/// Builds `X`, `Y`, `N` args and lets `build` add the instruction(s) under test; checks
/// that the verifier reports `expected`.
fn rejects(expected: &str, build: impl FnOnce(&mut Builder, Value, Value, Value)) {
    let mut b = base();
    let x = arg(&mut b, 0);
    let y = arg(&mut b, 1);
    let n = arg(&mut b, 2);
    build(&mut b, x, y, n);
    let f = b.finish();
    match verify(&f) {
        Ok(()) => panic!("expected `{expected}`, the function verifies:\n{}", print_function(&f)),
        Err(e) => {
            assert!(e.errors.iter().any(|m| m.message.contains(expected)), "expected `{expected}`, got:\n{e}")
        }
    }
}

fn c(b: &mut Builder, v: i64) -> Value {
    b.const_int(DType::I32, v, S)
}

fn tile(b: &mut Builder, v: Value, ty: Ty) -> Value {
    b.value(Opcode::Splat, vec![v], ty, S)
}

#[test]
fn the_listing_marks_errors() {
    let mut b = base();
    let n = arg(&mut b, 2);
    let f = b.value(Opcode::Const(Const::Float(1.0)), vec![], Ty::Scalar(DType::F32), S);
    b.value(Opcode::Binary(BinOp::Add), vec![n, f], I32, S);
    let e = verify(&b.finish()).expect_err("mixed types");
    insta::assert_snapshot!(e.to_string());
}

// Function-level rules.

#[test]
fn argument_slots_are_unique() {
    rejects("reuses slot 1", |b, _, _, _| b.func.add_arg("Z", 1, I32));
}

#[test]
fn arguments_are_not_tiles() {
    rejects("has tile type", |b, _, _, _| b.func.add_arg("Z", 5, F32X4));
}

#[test]
fn scratch_buffers_are_not_empty() {
    rejects("is empty", |b, _, _, _| {
        b.func.scratch.push(Scratch { dtype: DType::F32, len: 0, offset: 128 });
    });
}

#[test]
fn scratch_buffers_are_aligned() {
    rejects("not a multiple of 64", |b, _, _, _| {
        b.func.scratch.push(Scratch { dtype: DType::F32, len: 4, offset: 100 });
    });
}

#[test]
fn scratch_buffers_do_not_overlap() {
    rejects("overlap", |b, _, _, _| {
        b.func.scratch.push(Scratch { dtype: DType::F32, len: 4, offset: 0 });
    });
}

// Structure.

/// Checks that the verifier reports `expected` for a finished function.
fn rejects_function(expected: &str, f: &Function) {
    match verify(f) {
        Ok(()) => panic!("expected `{expected}`, the function verifies:\n{}", print_function(f)),
        Err(e) => {
            assert!(e.errors.iter().any(|m| m.message.contains(expected)), "expected `{expected}`, got:\n{e}")
        }
    }
}

#[test]
fn instructions_appear_once() {
    let mut b = base();
    let n = arg(&mut b, 2);
    let v = b.value(Opcode::Binary(BinOp::Add), vec![n, n], I32, S);
    let mut f = b.finish();
    let ValueDef::Result(i, _) = f.values[v].def else { unreachable!() };
    f.body.insts.push(i);
    rejects_function("appears more than once", &f);
}

#[test]
fn values_record_their_definition() {
    rejects("records definition", |b, _, _, n| {
        let v = b.value(Opcode::Binary(BinOp::Add), vec![n, n], I32, S);
        b.func.values[v].def = ValueDef::RegionArg(Inst::from_u32(0), 0, 0);
    });
}

#[test]
fn operands_are_defined_before_use() {
    let mut b = base();
    let n = arg(&mut b, 2);
    let later = b.func.create_inst(Opcode::Binary(BinOp::Add), vec![n, n], &[I32], S);
    let v = b.func.insts[later].results[0];
    b.value(Opcode::Binary(BinOp::Add), vec![v, n], I32, S);
    let mut f = b.finish();
    f.body.insts.push(later);
    rejects_function("used before its definition", &f);
}

#[test]
fn region_values_are_not_visible_after_it() {
    rejects("outside its scope", |b, _, _, n| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st], &[], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        let inner = b.value(Opcode::Binary(BinOp::Add), vec![n, n], I32, S);
        b.effect(Opcode::Yield, vec![], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
        b.value(Opcode::Binary(BinOp::Add), vec![inner, n], I32, S);
    });
}

#[test]
fn tiles_have_at_least_two_lanes() {
    rejects("at least 2", |b, _, _, n| {
        tile(b, n, Ty::Tile(DType::I32, 1));
    });
}

#[test]
fn tiles_have_a_power_of_two_lanes() {
    rejects("power-of-two number of lanes", |b, _, _, n| {
        tile(b, n, Ty::Tile(DType::I32, 3));
    });
}

#[test]
fn only_control_flow_has_regions() {
    rejects("region(s), expected 0", |b, _, _, n| {
        let i = b.inst(Opcode::Binary(BinOp::Add), vec![n, n], &[I32], S);
        b.set_regions(i, vec![Region::default()]);
    });
}

#[test]
fn regions_end_with_their_terminator() {
    rejects("does not end with `yield`", |b, _, _, _| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st], &[], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

#[test]
fn the_body_has_no_terminator() {
    rejects("in the function body", |b, _, _, _| {
        b.effect(Opcode::Yield, vec![], S);
    });
}

#[test]
fn terminators_end_regions() {
    rejects("before the end of its region", |b, _, _, n| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st], &[], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        b.effect(Opcode::Yield, vec![], S);
        b.value(Opcode::Binary(BinOp::Add), vec![n, n], I32, S);
        b.effect(Opcode::Yield, vec![], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

// Operands and types.

#[test]
fn operand_counts() {
    rejects("takes 2 operand(s), found 1", |b, _, _, n| {
        b.value(Opcode::Binary(BinOp::Add), vec![n], I32, S);
    });
}

#[test]
fn arg_names_an_argument() {
    rejects("slot 7 is not an argument", |b, _, _, _| {
        b.value(Opcode::Arg(7), vec![], I32, S);
    });
}

#[test]
fn arg_has_the_argument_type() {
    rejects("argument 2 has type i32", |b, _, _, _| {
        b.value(Opcode::Arg(2), vec![], Ty::Scalar(DType::I64), S);
    });
}

#[test]
fn constants_match_their_dtype() {
    rejects("cannot have type fp32", |b, _, _, _| {
        b.value(Opcode::Const(Const::Int(1)), vec![], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn program_id_axis() {
    rejects("axis 3", |b, _, _, _| {
        b.value(Opcode::ProgramId(3), vec![], I32, S);
    });
}

#[test]
fn splat_keeps_the_dtype() {
    rejects("`splat` makes a tile", |b, _, _, n| {
        tile(b, n, F32X4);
    });
}

#[test]
fn iota_is_i32_or_i64() {
    rejects("`iota` makes an i32/i64 tile", |b, _, _, _| {
        let v = b.const_int(DType::I16, 0, S);
        b.value(Opcode::Iota, vec![v], Ty::Tile(DType::I16, 4), S);
    });
}

#[test]
fn binary_operands_share_a_type() {
    rejects("one number type", |b, _, _, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        b.value(Opcode::Binary(BinOp::Add), vec![t, n], Ty::Tile(DType::I32, 4), S);
    });
}

#[test]
fn division_needs_floats() {
    rejects("`div` needs floats", |b, _, _, n| {
        b.value(Opcode::Binary(BinOp::Div), vec![n, n], I32, S);
    });
}

#[test]
fn bitwise_ops_need_integers() {
    rejects("`and` needs integers", |b, _, _, _| {
        let f = b.const_float(DType::F32, 1.0, S);
        b.value(Opcode::Binary(BinOp::And), vec![f, f], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn compare_gives_i1_of_the_lanes() {
    rejects("`cmp` compares", |b, _, _, n| {
        b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], I32, S);
    });
}

#[test]
fn math_needs_floats() {
    rejects("`sqrt` needs floats", |b, _, _, n| {
        b.value(Opcode::Unary(UnOp::Sqrt), vec![n], I32, S);
    });
}

#[test]
fn not_needs_integers() {
    rejects("`not` needs integers", |b, _, _, _| {
        let f = b.const_float(DType::F32, 1.0, S);
        b.value(Opcode::Unary(UnOp::Not), vec![f], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn select_condition_has_the_result_lanes() {
    rejects("`select` condition", |b, _, _, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        let m = b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], Ty::Scalar(DType::I1), S);
        let m = tile(b, m, Ty::Tile(DType::I1, 8));
        b.value(Opcode::Select, vec![m, t, t], Ty::Tile(DType::I32, 4), S);
    });
}

#[test]
fn fma_needs_floats_of_one_type() {
    rejects("`fma` needs floats of one type", |b, _, _, n| {
        b.value(Opcode::Fma, vec![n, n, n], I32, S);
    });
    rejects("`fma` needs floats of one type", |b, _, _, _| {
        let f = b.const_float(DType::F32, 1.0, S);
        let t = tile(b, f, F32X4);
        b.value(Opcode::Fma, vec![t, f, t], F32X4, S);
    });
}

#[test]
fn cast_keeps_the_lanes() {
    rejects("converts numbers of equal lanes", |b, _, _, n| {
        b.value(Opcode::Cast, vec![n], F32X4, S);
    });
}

#[test]
fn bitcast_keeps_the_width() {
    rejects("keeps the bit width", |b, _, _, n| {
        b.value(Opcode::Bitcast, vec![n], Ty::Scalar(DType::F64), S);
    });
}

#[test]
fn ptr_add_takes_a_scalar_offset() {
    rejects("`ptr_add` adds an integer scalar", |b, x, _, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        b.value(Opcode::PtrAdd, vec![x, t], Ty::Ptr(DType::F32), S);
    });
}

#[test]
fn contiguous_offsets_are_scalars() {
    rejects("contig addressing needs an integer scalar offset", |b, x, _, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        b.value(load(Addressing::Contiguous, false, false), vec![x, t], F32X4, S);
    });
}

#[test]
fn gather_offsets_are_tiles() {
    rejects("gather addressing needs an integer tile offset", |b, x, _, n| {
        b.value(load(Addressing::Gather, false, false), vec![x, n], F32X4, S);
    });
}

#[test]
fn gather_offsets_have_the_access_lanes() {
    rejects("the load gives fp32x8", |b, x, _, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 8));
        b.value(load(Addressing::Gather, false, false), vec![x, t], F32X4, S);
    });
}

#[test]
fn loads_give_the_pointee() {
    rejects("the load gives fp32, not i32", |b, x, _, n| {
        b.value(load(Addressing::Scalar, false, false), vec![x, n], I32, S);
    });
}

#[test]
fn contiguous_accesses_move_tiles() {
    rejects("contiguous addressing moves a tile", |b, x, _, n| {
        b.value(load(Addressing::Contiguous, false, false), vec![x, n], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn masks_are_i1_of_the_access_lanes() {
    rejects("mask", |b, x, _, n| {
        let m = b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], Ty::Scalar(DType::I1), S);
        let m = tile(b, m, Ty::Tile(DType::I1, 2));
        b.value(load(Addressing::Contiguous, true, false), vec![x, n, m], F32X4, S);
    });
}

#[test]
fn other_has_the_result_type() {
    rejects("`other`", |b, x, _, n| {
        let m = b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], Ty::Scalar(DType::I1), S);
        b.value(load(Addressing::Contiguous, true, true), vec![x, n, m, n], F32X4, S);
    });
}

#[test]
fn sites_exist() {
    rejects("site 9 does not exist", |b, x, _, n| {
        let op = Opcode::Load {
            addr: Addressing::Scalar,
            has_mask: false,
            has_other: false,
            site: 9,
            volatile: false,
        };
        b.value(op, vec![x, n], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn access_sites_name_pointer_arguments() {
    rejects("not a pointer argument", |b, x, _, n| {
        let op = Opcode::Load {
            addr: Addressing::Scalar,
            has_mask: false,
            has_other: false,
            site: 2,
            volatile: false,
        };
        b.value(op, vec![x, n], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn addresses_are_pointers() {
    rejects("not a scalar pointer", |b, _, _, n| {
        b.value(load(Addressing::Scalar, false, false), vec![n, n], I32, S);
    });
}

#[test]
fn stored_values_have_the_access_type() {
    rejects("the stored value", |b, _, y, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        let op = Opcode::Store {
            addr: Addressing::Contiguous,
            has_mask: false,
            site: 1,
            stream: false,
            check_only: false,
        };
        b.effect(op, vec![y, n, t], S);
    });
}

#[test]
fn bitwise_atomics_need_integers() {
    rejects("bitwise atomics need integers", |b, x, _, n| {
        let f = b.const_float(DType::F32, 1.0, S);
        let op = Opcode::Atomic { op: AtomicOp::Or, addr: Addressing::Scalar, has_mask: false, site: 0 };
        b.value(op, vec![x, n, f], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn compare_and_swap_values_have_the_access_type() {
    rejects("the compared value", |b, x, _, n| {
        let f = b.const_float(DType::F32, 1.0, S);
        let op = Opcode::AtomicCas { addr: Addressing::Scalar, site: 0 };
        b.value(op, vec![x, n, n, f], Ty::Scalar(DType::F32), S);
    });
}

#[test]
fn scratch_slots_exist() {
    rejects("s3 does not exist", |b, _, _, n| {
        b.value(Opcode::ScratchLoad(3), vec![n], F32X4, S);
    });
}

#[test]
fn scratch_accesses_have_the_buffer_dtype() {
    rejects("cannot move as i32x4", |b, _, _, n| {
        b.value(Opcode::ScratchLoad(0), vec![n], Ty::Tile(DType::I32, 4), S);
    });
}

#[test]
fn scratch_indices_are_integers() {
    rejects("the scratch index", |b, _, _, _| {
        let f = b.const_float(DType::F32, 1.0, S);
        b.value(Opcode::ScratchLoad(0), vec![f], F32X4, S);
    });
}

#[test]
fn reduce_lanes_takes_a_tile() {
    rejects("`reduce_lanes` combines a tile", |b, _, _, n| {
        b.value(Opcode::ReduceLanes(ReduceOp::Sum), vec![n], I32, S);
    });
}

#[test]
fn for_bounds_share_an_integer_type() {
    rejects("bounds and step", |b, _, _, _| {
        let (lb, st) = (c(b, 0), c(b, 1));
        let ub = b.const_int(DType::I64, 4, S);
        let f = b.inst(Opcode::For, vec![lb, ub, st], &[], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        b.effect(Opcode::Yield, vec![], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

#[test]
fn for_region_arguments_are_iv_and_carried() {
    rejects("should be (iv, carried)", |b, _, _, n| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st, n], &[I32], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        b.effect(Opcode::Yield, vec![n], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

#[test]
fn for_yields_the_carried_types() {
    rejects("body yields", |b, _, _, n| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st, n], &[I32], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        b.region_arg(f, 0, I32);
        let g = b.const_float(DType::F32, 1.0, S);
        b.effect(Opcode::Yield, vec![g], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

#[test]
fn for_results_are_the_carried_types() {
    rejects("`for` results", |b, _, _, n| {
        let (lb, ub, st) = (c(b, 0), c(b, 4), c(b, 1));
        let f = b.inst(Opcode::For, vec![lb, ub, st, n], &[Ty::Scalar(DType::I64)], S);
        b.begin_region();
        b.region_arg(f, 0, I32);
        let a = b.region_arg(f, 0, I32);
        b.effect(Opcode::Yield, vec![a], S);
        let r = b.end_region();
        b.set_regions(f, vec![r]);
    });
}

/// A while over one `i32` whose parts the closure may break.
fn while_loop(b: &mut Builder, n: Value, results: &[Ty], cond_arg: Ty, body_arg: Ty, flag_i1: bool) {
    let w = b.inst(Opcode::While, vec![n], results, S);
    b.begin_region();
    let a = b.region_arg(w, 0, cond_arg);
    let flag =
        if flag_i1 { b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], Ty::Scalar(DType::I1), S) } else { n };
    b.effect(Opcode::Condition, vec![flag, a], S);
    let r0 = b.end_region();
    b.begin_region();
    let a1 = b.region_arg(w, 1, body_arg);
    let _ = a1;
    b.effect(Opcode::Yield, vec![n], S);
    let r1 = b.end_region();
    b.set_regions(w, vec![r0, r1]);
}

#[test]
fn while_condition_region_takes_the_inits() {
    rejects("condition region arguments", |b, _, _, n| {
        while_loop(b, n, &[I32], Ty::Scalar(DType::I64), I32, true)
    });
}

#[test]
fn while_forwards_the_body_arguments() {
    rejects("`condition` forwards", |b, _, _, n| {
        while_loop(b, n, &[Ty::Scalar(DType::I64)], I32, Ty::Scalar(DType::I64), true)
    });
}

#[test]
fn while_results_are_the_forwarded_values() {
    rejects("`while` results", |b, _, _, n| while_loop(b, n, &[], I32, I32, true));
}

#[test]
fn condition_flags_are_i1() {
    rejects("scalar i1 flag", |b, _, _, n| while_loop(b, n, &[I32], I32, I32, false));
}

#[test]
fn if_conditions_are_i1() {
    rejects("`if` needs a scalar i1 condition", |b, _, _, n| {
        let i = b.inst(Opcode::If, vec![n], &[], S);
        let yields = |b: &mut Builder| {
            b.begin_region();
            b.effect(Opcode::Yield, vec![], S);
            b.end_region()
        };
        let (t, e) = (yields(b), yields(b));
        b.set_regions(i, vec![t, e]);
    });
}

#[test]
fn if_branches_yield_the_results() {
    rejects("`if` region 1 yields", |b, _, _, n| {
        let m = b.value(Opcode::Cmp(CmpOp::Lt), vec![n, n], Ty::Scalar(DType::I1), S);
        let i = b.inst(Opcode::If, vec![m], &[I32], S);
        b.begin_region();
        b.effect(Opcode::Yield, vec![n], S);
        let t = b.end_region();
        b.begin_region();
        b.effect(Opcode::Yield, vec![], S);
        let e = b.end_region();
        b.set_regions(i, vec![t, e]);
    });
}

#[test]
fn asserts_take_i1() {
    rejects("`assert` needs i1", |b, _, _, n| {
        b.effect(Opcode::Assert { site: 0 }, vec![n], S);
    });
}

#[test]
fn print_strings_exist() {
    rejects("string 4 does not exist", |b, _, _, n| {
        b.effect(Opcode::Print(4), vec![n], S);
    });
}

#[test]
fn the_verifier_never_panics_on_dangling_entities() {
    let mut f = Function::new("broken");
    let i = f.create_inst(Opcode::Yield, vec![], &[], S);
    f.body.insts.push(i);
    f.body.insts.push(Inst::from_u32(99));
    let e = verify(&f).expect_err("broken");
    assert!(e.messages().iter().any(|m| m.contains("does not exist")), "{e}");
}

#[test]
fn prefetches_take_a_pointer_and_a_scalar_offset() {
    rejects("`prefetch` takes a pointer and an integer scalar offset", |b, _x, _y, n| {
        let zero = c(b, 0);
        b.effect(Opcode::Prefetch { write: false }, vec![n, zero], S);
    });
    rejects("`prefetch` takes a pointer and an integer scalar offset", |b, x, _y, n| {
        let t = tile(b, n, Ty::Tile(DType::I32, 4));
        b.effect(Opcode::Prefetch { write: false }, vec![x, t], S);
    });
    let mut b = base();
    let x = arg(&mut b, 0);
    let n = arg(&mut b, 2);
    b.effect(Opcode::Prefetch { write: false }, vec![x, n], S);
    let f = b.finish();
    verify(&f).expect("a prefetch of X[N] verifies");
    assert!(print_function(&f).contains("prefetch %0[%1]"), "{}", print_function(&f));
}
