//! Helpers shared by the front end's integration tests.
#![allow(dead_code)]

use lnc_bir::Function;
use lnc_diag::{SourceFile, render_all};

/// Parses `src` (a Python file with `@triton.jit` kernels) and lowers `kernel` on `sig`.
pub fn lower(src: &str, kernel: &str, sig: &str) -> (SourceFile, Result<Function, String>) {
    let file = SourceFile::new("k.py", src);
    let ast = match lnc_syntax::parse_file(&file) {
        Ok(a) => a,
        Err(d) => panic!("parse error:\n{}", render_all(&d, &file)),
    };
    let Some(f) = ast.functions.iter().find(|f| f.name.name == kernel) else {
        panic!("no kernel {kernel}");
    };
    let sig = match lnc_front::parse_signature(sig, f) {
        Ok(s) => s,
        Err(d) => return (file.clone(), Err(d.render(&file))),
    };
    let r = lnc_front::lower_kernel(&file, &ast, kernel, &sig).map_err(|d| render_all(&d, &file));
    (file, r)
}

/// Lowers, verifies and prints `kernel`; panics with the diagnostics on failure.
pub fn bir(src: &str, kernel: &str, sig: &str) -> String {
    let (file, r) = lower(src, kernel, sig);
    match r {
        Ok(f) => {
            if let Err(e) = lnc_bir::verify::verify(&f) {
                panic!("verifier rejected the lowering of {kernel}:\n{e}");
            }
            check_spans(&f, &file);
            lnc_bir::print::print_function(&f)
        }
        Err(d) => panic!("lowering {kernel} failed:\n{d}"),
    }
}

/// The rendered diagnostics of a lowering that must fail.
pub fn err(src: &str, kernel: &str, sig: &str) -> String {
    match lower(src, kernel, sig).1 {
        Ok(f) => panic!("expected an error, got:\n{}", lnc_bir::print::print_function(&f)),
        Err(d) => d,
    }
}

/// Every instruction reachable from the body has a span inside the file.
pub fn check_spans(f: &Function, file: &SourceFile) {
    for i in f.live_insts() {
        let s = f.span(i);
        let op = f.inst(i).opcode;
        assert!(
            s.end as usize <= file.text.len() && (s.start < s.end || matches!(op, lnc_bir::Opcode::Yield)),
            "instruction {} has no source span ({s:?})",
            lnc_bir::print::print_inst_line(f, i)
        );
    }
}
