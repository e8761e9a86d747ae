//! The verifier: one invalid function per invariant, with the expected message.

mod common;

use common::*;
use lnc_bir::parse::parse_function;
use lnc_bir::verify::verify;
use lnc_bir::*;
use lnc_diag::Span;

/// Verifies `f` and checks one of its errors contains `expected`.
fn expect_error(f: &Function, expected: &str) {
    let errs = verify(f).expect_err(&format!("verifies but should fail with `{expected}`"));
    assert!(
        errs.messages().iter().any(|m| m.contains(expected)),
        "expected an error containing `{expected}`, got:\n{errs}"
    );
}

/// Wraps instruction lines in a kernel with a few handy parameters:
/// `%0: *fp32`, `%1: i32`, `%2: fp32`, `%3: *i32`, `%4: i1`.
fn kernel(body: &str) -> String {
    format!(
        "kernel @k(%0 P: *fp32 @slot0, %1 n: i32 @slot1, %2 x: fp32 @slot2, %3 Q: *i32 @slot3, %4 c: i1 @slot4) {{\n{body}}}\n"
    )
}

fn text_error(body: &str, expected: &str) {
    let text = kernel(body);
    let f = parse_function(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    expect_error(&f, expected);
}

#[test]
fn valid_functions_verify() {
    for f in [layer_norm_fwd(128), layer_norm_fwd(1), for_sum(), collatz()] {
        verify(&f).unwrap();
    }
    let ok = kernel("  %5 = arange 0, 8 : <8xi32>\n");
    verify(&parse_function(&ok).unwrap()).unwrap();
    let fma = kernel("  %5 = fma %2, %2, %2 : fp32\n");
    let f = parse_function(&fma).unwrap();
    verify(&f).unwrap();
    assert!(lnc_bir::print::print_function(&f).contains("%5 = fma %2, %2, %2 : fp32"));
}

#[test]
fn structure() {
    // Parameters.
    let mut f = Function::new("k");
    f.add_param("a", 3, Type::scalar(DType::I32));
    f.add_param("b", 1, Type::scalar(DType::I32));
    expect_error(&f, "parameter `b` has slot 1 after slot 3; slots must increase");
    let mut f = Function::new("k");
    f.add_param("a", 0, Type::block(Elem::Scalar(DType::I32), Shape::d1(4)));
    expect_error(&f, "parameter `a` has block type <4xi32>; parameters are scalars or pointers");

    // An instruction listed twice.
    let mut f = layer_norm_fwd(16);
    let i = f.body.insts[0];
    f.body.insts.push(i);
    expect_error(&f, "instruction appears more than once in the body");

    // A value defined by two instructions.
    let mut f = layer_norm_fwd(16);
    let (a, b) = (f.body.insts[0], f.body.insts[8]);
    f.insts[b].results = f.insts[a].results.clone();
    expect_error(&f, "%9 is defined more than once");

    // A result whose definition record is wrong.
    let mut f = layer_norm_fwd(16);
    let r = f.inst(f.body.insts[0]).results[0];
    f.values[r].def = ValueDef::Param(0);
    expect_error(&f, "%9 records definition Param(0), expected Result(");

    // Use before definition: swap the first two instructions that depend on each other.
    let mut f = layer_norm_fwd(16);
    f.body.insts.swap(2, 3);
    expect_error(&f, "%12 is used before its definition or outside its scope");

    // Use of a loop's value after the loop.
    let mut f = for_sum();
    let for_ = f.body.insts[2];
    let inner = f.inst(for_).regions[0].insts[0];
    let inner_v = f.inst(inner).results[0];
    let store = f.body.insts[3];
    f.insts[store].args[1] = inner_v;
    expect_error(&f, "%11 is used before its definition or outside its scope");

    // Body with arguments.
    let mut f = for_sum();
    let v = f.create_region_arg(Inst::from_u32(0), 0, 0, Type::scalar(DType::I32));
    f.body.args.push(v);
    expect_error(&f, "the body region has arguments");

    // Block dimensions.
    text_error("  %5 = splat %1 : <3xi32>\n", "type <3xi32> of %5: dimension 3 is not a power of two");

    // Missing string of a print.
    let mut f = Function::new("k");
    let mut b = Builder::new(&mut f);
    b.inst(Opcode::Print(3), vec![], &[], Span::DUMMY);
    b.finish();
    expect_error(&f, "print refers to missing string 3");
}

#[test]
fn terminators_and_regions() {
    text_error("  yield\n", "terminator `yield` in the function body");
    text_error(
        "  if %4 {\n    yield\n    yield\n  } else {\n    yield\n  }\n",
        "terminator `yield` before the end of its region",
    );
    text_error("  if %4 {\n  } else {\n    yield\n  }\n", "region 0 does not end with a terminator");
    text_error("  %5 = const 0 : i32\n  for %5 to %5 step %5\n", "`for` has 0 region(s), expected 1");
    text_error("  %5 = add %1, %1 : i32 {\n  }\n", "`add` has 1 region(s), expected 0");
    text_error(
        "  while {\n    yield\n  } do {\n    yield\n  }\n",
        "region 0 must end with `condition`, found `yield`",
    );
    text_error(
        "  while {\n    condition %4\n  } do {\n    condition %4\n  }\n",
        "region 1 must end with `yield`, found `condition`",
    );
}

#[test]
fn counts() {
    text_error("  %5 = add %1 : i32\n", "`add` takes 2 operand(s), found 1");
    text_error("  %5, %6 = add %1, %1 -> (i32, i32)\n", "`add` has 1 result(s), found 2");
    text_error("  %5 = store %0, %2 : i32\n", "`store` has 0 result(s), found 1");
    text_error("  if %4 {\n    %5 = yield : i32\n  } else {\n    yield\n  }\n", "`yield` has no results");
}

#[test]
fn constants_and_indices() {
    text_error("  %5 = const 1 : fp32\n", "integer constant with float type fp32");
    text_error("  %5 = const 1.5 : i32\n", "float constant with integer type i32");
    text_error("  %5 = const 300 : i8\n", "constant 300 is out of range for i8");
    text_error("  %5 = const 0.1 : fp32\n", "float constant 0.1 is not exactly representable in fp32");
    text_error("  %5 = const 1 : <4xi32>\n", "const result must be a scalar number, found <4xi32>");
    text_error("  %5 = program_id 3 : i32\n", "`program_id` axis 3 is out of range 0..3");
    text_error("  %5 = num_programs 0 : i64\n", "`num_programs` result must be i32, found i64");
    text_error(
        "  %5 = arange 0, 12 : <12xi32>\n",
        "arange length end - start = 12 is not a positive power of two",
    );
    text_error(
        "  %5 = arange 8, 0 : <8xi32>\n",
        "arange length end - start = -8 is not a positive power of two",
    );
    text_error("  %5 = arange 0, 8 : <8xi64>\n", "arange result must be <8xi32>, found <8xi64>");
    text_error(
        "  %5 = arange 2147483646, 2147483654 : <8xi32>\n",
        "arange bounds 2147483646, 2147483654 do not fit in int32",
    );
}

#[test]
fn shapes() {
    let ar = "  %5 = arange 0, 8 : <8xi32>\n";
    text_error(&format!("{ar}  %6 = splat %5 : <8xi32>\n"), "splat operand must be a scalar, found <8xi32>");
    text_error("  %5 = splat %1 : i32\n", "splat result must be a block, found i32");
    text_error("  %5 = splat %1 : <4xi64>\n", "splat changes the element type from i32 to i64");
    text_error(
        &format!("{ar}  %6 = broadcast %5 : <16xi32>\n"),
        "broadcast axis 0: size 8 cannot become 16 (only size-1 axes broadcast)",
    );
    text_error(
        &format!("{ar}  %6 = expand_dims axis=0 %5 : <2x8xi32>\n  %7 = broadcast %6 : <2x8xi32>\n"),
        "expand_dims result must be <1x8xi32>, found <2x8xi32>",
    );
    text_error(
        &format!("{ar}  %6 = expand_dims axis=2 %5 : <8x1xi32>\n"),
        "expand_dims axis 2 is out of range for <8xi32>",
    );
    text_error(
        &format!("{ar}  %6 = expand_dims axis=0 %5 : <1x8xi32>\n  %7 = broadcast %6 : <8xi32>\n"),
        "broadcast needs a block operand and a result of the same rank",
    );
    text_error(
        &format!("{ar}  %6 = reduce sum axis=0 %5 : <1xi32>\n"),
        "reduce result must be i32, found <1xi32>",
    );
    text_error(
        &format!("{ar}  %6 = reduce sum axis=1 %5 : i32\n"),
        "reduce axis 1 is out of range for <8xi32>",
    );
    text_error(
        &format!("{ar}  %6 = reduce max axis=0 keep_dims %5 : i32\n"),
        "reduce result must be <1xi32>, found i32",
    );
}

#[test]
fn elementwise() {
    let ar = "  %5 = arange 0, 8 : <8xi32>\n";
    text_error(
        "  %5 = add %1, %2 : i32\n",
        "operands and result of `add` must have one type, found i32, fp32 -> i32",
    );
    text_error("  %5 = div %1, %1 : i32\n", "`div` needs floats, found i32");
    text_error("  %5 = pow %1, %1 : i32\n", "`pow` needs floats, found i32");
    text_error("  %5 = and %2, %2 : fp32\n", "`and` needs integers, found fp32");
    text_error("  %5 = shl %2, %2 : fp32\n", "`shl` needs integers, found fp32");
    text_error("  %5 = add %0, %0 : *fp32\n", "`add` needs numbers, found *fp32");
    text_error("  %5 = sqrt %1 : i32\n", "`sqrt` needs floats, found i32");
    text_error("  %5 = not %2 : fp32\n", "`not` needs integers, found fp32");
    text_error("  %5 = neg %1 : i64\n", "operand and result of `neg` must have one type, found i32 -> i64");
    text_error("  %5 = cmp lt %1, %2 : i1\n", "cmp operands must have one type, found i32 and fp32");
    text_error(&format!("{ar}  %6 = cmp lt %5, %5 : <8xi32>\n"), "cmp result must be <8xi1>, found <8xi32>");
    text_error("  %5 = select %1, %2, %2 : fp32\n", "select condition must be i1, found i32");
    text_error("  %5 = select %4, %1, %2 : fp32\n", "select operands and result must have one type");
    text_error("  %5 = fma %1, %1, %1 : i32\n", "`fma` needs floats, found i32");
    text_error(
        "  %5 = fma %2, %2, %1 : fp32\n",
        "fma operands and result must have one type, found fp32, fp32, i32",
    );
    text_error("  %5 = bitcast %1 : fp64\n", "bitcast between types of different widths (i32 and fp64)");
    text_error("  %5 = cast %0 : i64\n", "`cast` converts numbers only, found *fp32 -> i64");
    text_error(&format!("{ar}  %6 = cast %5 : fp32\n"), "`cast` changes the shape: <8xi32> -> fp32");
    text_error(
        "  %5 = ptr_add %0, %2 : *fp32\n",
        "ptr_add offset must be integers of the pointer's shape, found fp32",
    );
    text_error("  %5 = ptr_add %1, %1 : i32\n", "ptr_add needs a pointer, found i32");
    text_error("  %5 = ptr_add %0, %1 : *i32\n", "ptr_add result must be *fp32, found *i32");
}

#[test]
fn memory() {
    let ar = "  %5 = arange 0, 8 : <8xi32>\n  %6 = splat %0 : <8x*fp32>\n  %7 = ptr_add %6, %5 : <8x*fp32>\n";
    text_error(&format!("{ar}  %8 = load %7, mask %4 : <8xfp32>\n"), "mask must be <8xi1>, found i1");
    text_error(&format!("{ar}  %8 = load %7 : <8xfp16>\n"), "load result must be <8xfp32>, found <8xfp16>");
    text_error("  %5 = load %1 : i32\n", "load needs a pointer, found i32");
    text_error("  %5 = load %0, mask %4, other %1 : fp32\n", "load `other` must be fp32, found i32");
    let mut f = parse_function(&kernel("  %5 = load %0, mask %4, other %2 : fp32\n")).unwrap();
    let load = f.body.insts[0];
    f.insts[load].opcode = Opcode::Load { has_mask: false, has_other: true, volatile: false };
    expect_error(&f, "load has `other` without a mask");
    text_error(&format!("{ar}  store %7, %2\n"), "stored value must be <8xfp32>, found fp32");
    text_error("  store %0, %2, mask %1\n", "mask must be i1, found i32");
    text_error("  %5 = atomic and %0, %2 : fp32\n", "atomic `and` needs integers, found fp32");
    text_error("  %5 = atomic add %3, %2 : fp32\n", "atomic value must be i32, found fp32");
    text_error("  %5 = atomic add %3, %1 : i64\n", "atomic result must be i32, found i64");
    text_error("  %5 = atomic_cas %3, %1, %2 : i32\n", "atomic_cas new value must be i32, found fp32");
    text_error("  assert %1\n", "assert needs int1, found i32");
}

#[test]
fn control_flow() {
    let c = "  %5 = const 0 : i32\n  %6 = const 0 : i64\n";
    text_error(
        &format!("{c}  for %5 to %6 step %5 {{\n    ^(%7: i32):\n    yield\n  }}\n"),
        "for bounds must be scalar integers of one type, found i32, i64, i32",
    );
    text_error(
        &format!(
            "{c}  %7 = for %5 to %5 step %5 iter(%2) -> (fp32) {{\n    ^(%8: i32):\n    yield %2\n  }}\n"
        ),
        "for region arguments (induction variable, carried values): 1 value(s), expected 2",
    );
    text_error(
        &format!(
            "{c}  %7 = for %5 to %5 step %5 iter(%2) -> (fp32) {{\n    ^(%8: i64, %9: fp32):\n    yield %9\n  }}\n"
        ),
        "for region arguments (induction variable, carried values): value 0 has type i64, expected i32",
    );
    text_error(
        &format!(
            "{c}  %7 = for %5 to %5 step %5 iter(%2) -> (fp32) {{\n    ^(%8: i32, %9: fp32):\n    yield %8\n  }}\n"
        ),
        "for yield: value 0 has type i32, expected fp32",
    );
    text_error(
        &format!(
            "{c}  %7 = for %5 to %5 step %5 iter(%2) -> (i32) {{\n    ^(%8: i32, %9: fp32):\n    yield %9\n  }}\n"
        ),
        "for results: value 0 has type i32, expected fp32",
    );
}

#[test]
fn while_and_if() {
    text_error(
        "  %5 = while iter(%1) -> (i32) {\n    ^(%6: i32):\n    condition %6, %6\n  } do {\n    ^(%7: i32):\n    yield %7\n  }\n",
        "condition flag must be i1, found i32",
    );
    text_error(
        "  while iter(%1) {\n    ^(%6: fp32):\n    condition %4\n  } do {\n    yield %1\n  }\n",
        "while condition region arguments: value 0 has type fp32, expected i32",
    );
    text_error(
        "  %5 = while iter(%1) -> (fp32) {\n    ^(%6: i32):\n    condition %4, %6\n  } do {\n    ^(%7: i32):\n    yield %7\n  }\n",
        "while results: value 0 has type fp32, expected i32",
    );
    text_error(
        "  while iter(%1) {\n    ^(%6: i32):\n    condition %4\n  } do {\n    yield %2\n  }\n",
        "while body yield: value 0 has type fp32, expected i32",
    );
    text_error(
        "  while iter(%1) {\n    ^(%6: i32):\n    condition %4, %6\n  } do {\n    yield %6\n  }\n",
        "while body region arguments: 0 value(s), expected 1",
    );
    text_error("  while {\n    condition\n  } do {\n    yield\n  }\n", "`condition` needs a flag operand");
    text_error("  if %1 {\n    yield\n  } else {\n    yield\n  }\n", "if condition must be i1, found i32");
    text_error(
        "  %5 = if %4 -> (i32) {\n    yield %1\n  } else {\n    yield\n  }\n",
        "if region 1 yield: 0 value(s), expected 1",
    );
    text_error(
        "  if %4 {\n    ^(%5: i32):\n    yield\n  } else {\n    yield\n  }\n",
        "if region 0 takes no arguments",
    );
}

#[test]
fn display_shows_errors_under_instructions() {
    let text = kernel("  %5 = add %1, %2 : i32\n  if %1 {\n    yield\n  } else {\n  }\n");
    let mut f = parse_function(&text).unwrap();
    f.add_param("late", 0, Type::scalar(DType::I32));
    let errs = verify(&f).unwrap_err();
    insta::assert_snapshot!(errs.to_string());
}

#[test]
fn verifier_survives_garbage() {
    // Dangling values and instructions, and an instruction nested in itself.
    let mut f = for_sum();
    let for_ = f.body.insts[2];
    f.insts[for_].regions[0].insts.insert(0, for_);
    f.insts[for_].args.push(Value::from_u32(9999));
    f.body.insts.push(Inst::from_u32(9999));
    let errs = verify(&f).unwrap_err();
    let text = errs.to_string();
    assert!(text.contains("instruction appears more than once"), "{text}");
    assert!(text.contains("operand 5 (%?9999) is not a value"), "{text}");
    assert!(text.contains("a region lists instruction i9999, which does not exist"), "{text}");
}
