//! Snapshots of the text form, and its round trip through the parser.

mod common;

use common::*;
use lnc_bir::print::{print_function, print_function_with_spans, print_inst_line};
use lnc_bir::*;
use lnc_diag::{SourceFile, Span};

#[test]
fn layer_norm_text() {
    let f = layer_norm_fwd(1024);
    assert_roundtrip(&f);
    insta::assert_snapshot!(print_function(&f));
}

#[test]
fn for_text() {
    let f = for_sum();
    assert_roundtrip(&f);
    insta::assert_snapshot!(print_function(&f));
}

#[test]
fn while_if_text() {
    let f = collatz();
    assert_roundtrip(&f);
    insta::assert_snapshot!(print_function(&f));
}

#[test]
fn dead_instruction_renumbers_only_what_follows() {
    let mut f = layer_norm_fwd(16);
    let clean = print_function(&f);
    let dead = f.create_inst(Opcode::Const(Const::Int(5)), vec![], &[Type::scalar(DType::I32)], Span::DUMMY);
    f.body.insts.insert(5, dead);
    let with_dead = print_function(&f);
    assert!(lnc_bir::verify::verify(&f).is_ok());
    let (a, b): (Vec<&str>, Vec<&str>) = (clean.lines().collect(), with_dead.lines().collect());
    // Header plus the five instructions before the dead one are untouched.
    assert_eq!(a[..6], b[..6]);
    assert_eq!(b[6], "  %14 = const 5 : i32");
    assert_eq!(a.len() + 1, b.len());
}

#[test]
fn inst_line_of_control_flow_is_its_header() {
    let f = for_sum();
    let for_ = f.body.insts.iter().copied().find(|&i| f.inst(i).opcode == Opcode::For).unwrap();
    assert_eq!(print_inst_line(&f, for_), "%6, %7 = for %1 to %2 step %3 iter(%4, %4) -> (i64, i64)");
}

#[test]
fn spans_mode_adds_line_comments() {
    let src = SourceFile::new("k.py", "def k(X):\n    row = tl.program_id(0)\n    tl.store(X, row)\n");
    let mut f = Function::new("k");
    let x = f.add_param("X", 0, Type::ptr(DType::I32));
    let mut b = Builder::new(&mut f);
    let row = b.value(Opcode::ProgramId(0), vec![], Type::scalar(DType::I32), Span::new(20, 37));
    b.inst(Opcode::Store { has_mask: false, check_only: false }, vec![x, row], &[], Span::new(42, 58));
    b.finish();
    let text = print_function_with_spans(&f, &src);
    assert_eq!(
        text,
        "kernel @k(%0 X: *i32 @slot0) {\n  %1 = program_id 0 : i32  ; line 2\n  store %0, %1  ; line 3\n}\n"
    );
    // Comments are ignored by the parser.
    let g = lnc_bir::parse::parse_function(&text).unwrap();
    assert_eq!(print_function(&g), print_function(&f));
}

#[test]
fn floats_round_trip_bit_exactly() {
    for x in [0.1, -0.0, 1e-5, 1e300, 5e-324, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 123456789.125] {
        let mut f = Function::new("c");
        let mut b = Builder::new(&mut f);
        b.const_float(DType::F64, x, Span::DUMMY);
        b.finish();
        let text = print_function(&f);
        let g = lnc_bir::parse::parse_function(&text).unwrap();
        let Opcode::Const(Const::Float(y)) = g.inst(g.body.insts[0]).opcode else { panic!("{text}") };
        assert_eq!(x.to_bits(), y.to_bits(), "{text}");
    }
}

#[test]
fn text_forms_round_trip() {
    // Every syntactic form the printer has, written by hand.
    parse_ok(
        r#"kernel @forms(%0 P: *fp16 @slot0, %1 "odd name": i64 @slot2, %2: u8 @slot5) {
  %3 = const -7 : i64
  %4 = const 0f7ff8000000000000 : fp32
  %5 = num_programs 2 : i32
  %6 = arange 4, 12 : <8xi32>
  %7 = expand_dims axis=0 %6 : <1x8xi32>
  %8 = broadcast %7 : <4x8xi32>
  %9 = reduce max axis=1 keep_dims %8 : <4x1xi32>
  %10 = reduce min axis=0 %9 : <1xi32>
  %11 = splat %0 : <4x8x*fp16>
  %12 = ptr_add %11, %8 : <4x8x*fp16>
  %13 = load %12 : <4x8xfp16>
  %14 = cmp ge %8, %8 : <4x8xi1>
  %15 = atomic add %12, %13, mask %14 : <4x8xfp16>
  %16 = atomic_cas %12, %13, %13 : <4x8xfp16>
  %17 = bitcast %13 : <4x8xi16>
  %18 = cast %17 : <4x8xfp32>
  %19 = exp2 %18 : <4x8xfp32>
  %20 = select %14, %19, %18 : <4x8xfp32>
  %21 = not %2 : u8
  %22 = shr %21, %2 : u8
  %23 = load volatile %0 : fp16
  store %12, %13, mask %14
  store check_only %12, %13, mask %14
  store check_only %0, %23
  assert %14
  print "x = \"\n" %22, %3
  print ""
  %24 = while -> (i64) {
    %25 = const 0 : i1
    condition %25, %3
  } do {
    ^(%26: i64):
    yield
  }
}
"#,
    );
}

#[test]
fn parser_and_verifier_never_panic_on_mangled_text() {
    let texts = [print_function(&layer_norm_fwd(8)), print_function(&for_sum()), print_function(&collatz())];
    for text in &texts {
        let bytes: Vec<char> = text.chars().collect();
        for k in 0..bytes.len() {
            // Drop one character, or replace it by something likely to confuse.
            for replacement in [None, Some('0'), Some('%'), Some('}'), Some('<'), Some('9')] {
                let mut s: String = bytes[..k].iter().collect();
                s.extend(replacement);
                s.extend(&bytes[k + 1..]);
                if let Ok(f) = lnc_bir::parse::parse_function(&s) {
                    let _ = lnc_bir::verify::verify(&f).map_err(|e| e.to_string());
                    let _ = print_function(&f);
                }
            }
        }
    }
}

#[test]
fn module_doc_example_parses() {
    let text = "kernel @k(%0 X: *fp32 @slot0, %1 N: i32 @slot1) {
  %2 = arange 0, 1024 : <1024xi32>
  %3 = splat %1 : <1024xi32>
  %4 = cmp lt %2, %3 : <1024xi1>
  %5 = splat %0 : <1024x*fp32>
  %6 = ptr_add %5, %2 : <1024x*fp32>
  %7 = load %6, mask %4 : <1024xfp32>
  %8 = reduce sum axis=0 %7 : fp32
  %9 = const 0 : i32
  %10 = const 1 : i32
  %11 = for %9 to %1 step %10 iter(%8) -> (fp32) {
    ^(%12: i32, %13: fp32):
    %14 = add %13, %13 : fp32
    yield %14
  }
  store %0, %11
}
";
    parse_ok(text);
}
