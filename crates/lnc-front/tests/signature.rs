//! Signature parsing: positional and named entries, defaults, specialization literals,
//! and the canonical text.

use lnc_bir::DType;
use lnc_diag::SourceFile;
use lnc_front::{ConstValue, SigEntry, parse_signature};
use lnc_syntax::ast::FunctionDef;

const SRC: &str = r#"
import triton
import triton.language as tl

@triton.jit
def k(X, Y, n, eps, BLOCK: tl.constexpr, FLAG: tl.constexpr = True, ALPHA: tl.constexpr = -0.5, G=4):
    pass
"#;

fn kernel() -> (SourceFile, FunctionDef) {
    let file = SourceFile::new("k.py", SRC);
    let ast = lnc_syntax::parse_file(&file).expect("parses");
    let f = ast.functions.into_iter().next().expect("one kernel");
    (file, f)
}

fn parse(sig: &str) -> Result<lnc_front::Signature, String> {
    let (file, f) = kernel();
    parse_signature(sig, &f).map_err(|d| d.render(&file))
}

#[test]
fn positional_entries_and_defaults() {
    let s = parse("*fp32,*bf16,i32,fp32,1024").unwrap();
    assert_eq!(
        s.entries,
        vec![
            SigEntry::Ptr(DType::F32),
            SigEntry::Ptr(DType::BF16),
            SigEntry::Scalar(DType::I32),
            SigEntry::Scalar(DType::F32),
            SigEntry::Const(ConstValue::Int(1024)),
            SigEntry::Const(ConstValue::Bool(true)),
            SigEntry::Const(ConstValue::Float(-0.5)),
            SigEntry::Const(ConstValue::Int(4)),
        ]
    );
    assert_eq!(s.to_string(), "*fp32,*bf16,i32,fp32,1024,True,-0.5,4");
}

#[test]
fn named_entries_mix_with_positional_ones() {
    let s = parse("*fp16, *fp16, n=i64, BLOCK=256, eps=1e-5, FLAG=False, G=u32").unwrap();
    assert_eq!(s.to_string(), "*fp16,*fp16,i64,1e-5,256,False,-0.5,u32");
}

#[test]
fn literals_for_runtime_parameters_and_hints() {
    let s = parse("*fp32:16,*fp32:16,i32:16,1e-6,64").unwrap();
    assert_eq!(s.entries[2], SigEntry::Scalar(DType::I32));
    assert_eq!(s.entries[3], SigEntry::Const(ConstValue::Float(1e-6)));
    assert_eq!(ConstValue::Float(1e-6).dtype(), Some(DType::F32));
    assert_eq!(ConstValue::Int(7).dtype(), Some(DType::I32));
    assert_eq!(ConstValue::Bool(false).dtype(), Some(DType::I1));
}

#[test]
fn canonical_text_parses_back() {
    for sig in
        ["*fp32,*fp32,i32,fp32,1024", "*i1,*u8,u64,0.5,2,False,1e-5,-3", "*i64,*fp64,i1,bf16,1,True,2.0,0"]
    {
        let s = parse(sig).unwrap();
        let again = parse(&s.to_string()).unwrap();
        assert_eq!(s, again, "{sig}");
    }
}

#[test]
fn errors() {
    let cases = [
        ("*fp32,*fp32,i32", "missing"),
        ("*fp32,*fp32,i32,fp32,i32", "needs a value"),
        ("*fp32,*fp32,i32,fp32,1024,True,1.0,4,5", "too many"),
        ("*fp32,*fp32,i32,fp32,BLOCK=1,BLOCK=2", "twice"),
        ("*fp32,*fp32,i32,fp32,BLOKC=1", "did you mean `BLOCK`"),
        ("*fp32,*fp32,i32,float,1", "invalid signature entry `float`"),
        ("*fp32,*fp33,i32,fp32,1", "unknown pointer type"),
        ("*fp32,BLOCK=4,*fp32", "after a named one"),
        ("*fp32,,*fp32", "empty entry"),
    ];
    for (sig, expected) in cases {
        let e = parse(sig).expect_err(sig);
        assert!(e.contains(expected), "{sig}: {e}");
    }
}
