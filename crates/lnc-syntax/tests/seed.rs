//! The layer-norm tutorial file must parse as it is: three kernels, host code skipped.

use lnc_diag::SourceFile;
use lnc_syntax::ast::{ExprKind, FunctionDef};

fn seed() -> SourceFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");
    let text = std::fs::read_to_string(path).expect("seed file is readable");
    SourceFile::new("triton_05_layer_norm.py", text)
}

fn parse_seed() -> (SourceFile, Vec<FunctionDef>) {
    let file = seed();
    match lnc_syntax::parse_file(&file) {
        Ok(f) => (file, f.functions),
        Err(d) => panic!("{}", lnc_diag::render_all(&d, &file)),
    }
}

/// `(name, is annotated tl.constexpr)` per parameter.
fn signature(f: &FunctionDef) -> Vec<(String, bool)> {
    f.params
        .iter()
        .map(|p| {
            let constexpr = match &p.annotation {
                Some(a) => match &a.kind {
                    ExprKind::Attribute { value, attr } => {
                        attr.name == "constexpr" && matches!(&value.kind, ExprKind::Name(n) if n == "tl")
                    }
                    other => panic!("unexpected annotation {other:?}"),
                },
                None => false,
            };
            assert!(p.default.is_none(), "no defaults in the seed");
            (p.name.name.clone(), constexpr)
        })
        .collect()
}

fn names(plain: &[&str], constexpr: &[&str]) -> Vec<(String, bool)> {
    plain
        .iter()
        .map(|n| (n.to_string(), false))
        .chain(constexpr.iter().map(|n| (n.to_string(), true)))
        .collect()
}

#[test]
fn finds_exactly_the_three_kernels() {
    let (file, fns) = parse_seed();
    let found: Vec<&str> = fns.iter().map(|f| f.name.name.as_str()).collect();
    assert_eq!(found, ["_layer_norm_fwd_fused", "_layer_norm_bwd_dx_fused", "_layer_norm_bwd_dwdb"]);
    for f in &fns {
        let decorators: Vec<&str> = f.decorators.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(decorators, ["triton.jit"]);
        assert!(file.text[f.span.range()].starts_with("def "), "span starts at `def`");
        assert!(!f.body.is_empty());
    }
    assert_eq!(
        signature(&fns[0]),
        names(&["X", "Y", "W", "B", "M", "V", "stride", "N", "eps"], &["BLOCK_SIZE"])
    );
    assert_eq!(
        signature(&fns[1]),
        names(
            &["DX", "DY", "DW", "DB", "X", "W", "B", "M", "V", "Lock", "stride", "N", "eps"],
            &["GROUP_SIZE_M", "BLOCK_SIZE_N"]
        )
    );
    assert_eq!(
        signature(&fns[2]),
        names(&["DW", "DB", "FINAL_DW", "FINAL_DB", "M", "N"], &["BLOCK_SIZE_M", "BLOCK_SIZE_N"])
    );
}

#[test]
fn kernel_bodies_end_where_the_kernels_end() {
    let (file, fns) = parse_seed();
    let last_lines = [
        "tl.store(Y + cols, y, mask=mask)",
        "tl.atomic_xchg(Lock, 0)",
        "tl.store(FINAL_DB + cols, sum_db, mask=cols < N)",
    ];
    for (f, last) in fns.iter().zip(last_lines) {
        assert!(file.text[f.span.range()].ends_with(last), "{}", f.name.name);
    }
}

#[test]
fn snapshot_fwd_fused() {
    let (_, fns) = parse_seed();
    insta::assert_snapshot!("layer_norm_fwd_fused", lnc_syntax::dump_function(&fns[0]));
}

#[test]
fn snapshot_bwd_dx_fused() {
    let (_, fns) = parse_seed();
    insta::assert_snapshot!("layer_norm_bwd_dx_fused", lnc_syntax::dump_function(&fns[1]));
}

#[test]
fn snapshot_bwd_dwdb() {
    let (_, fns) = parse_seed();
    insta::assert_snapshot!("layer_norm_bwd_dwdb", lnc_syntax::dump_function(&fns[2]));
}

#[test]
fn no_unsupported_constructs_in_the_seed_kernels() {
    let (_, fns) = parse_seed();
    for f in &fns {
        assert!(lnc_syntax::unsupported::unsupported_diagnostics(f).is_empty(), "{}", f.name.name);
    }
}
