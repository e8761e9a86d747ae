//! The seed kernels (Triton's layer-norm tutorial) lower, verify, and keep their form.

mod common;

use lnc_diag::SourceFile;

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");

fn lower_seed(kernel: &str, sig: &str) -> String {
    let text = std::fs::read_to_string(SEED).expect("seed file");
    let file = SourceFile::new("triton_05_layer_norm.py", text);
    let ast = lnc_syntax::parse_file(&file).unwrap_or_else(|d| panic!("{}", lnc_diag::render_all(&d, &file)));
    let f = ast.functions.iter().find(|f| f.name.name == kernel).expect("kernel in seed");
    let s = lnc_front::parse_signature(sig, f).unwrap_or_else(|d| panic!("{}", d.render(&file)));
    if !sig.contains('=') {
        assert_eq!(s.to_string(), sig, "the signature prints back canonically");
    }
    let func = lnc_front::lower_kernel(&file, &ast, kernel, &s)
        .unwrap_or_else(|d| panic!("{}", lnc_diag::render_all(&d, &file)));
    if let Err(e) = lnc_bir::verify::verify(&func) {
        panic!("verifier rejected {kernel}:\n{e}");
    }
    common::check_spans(&func, &file);
    lnc_bir::print::print_function_with_spans(&func, &file)
}

#[test]
fn layer_norm_forward() {
    let out = lower_seed("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024");
    insta::assert_snapshot!(out);
}

#[test]
fn layer_norm_backward_dx() {
    let out = lower_seed(
        "_layer_norm_bwd_dx_fused",
        "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024",
    );
    insta::assert_snapshot!(out);
}

#[test]
fn layer_norm_backward_dwdb() {
    let out = lower_seed("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128");
    insta::assert_snapshot!(out);
}

#[test]
fn layer_norm_forward_fp16_named_entries() {
    // Named entries, and fp16 storage: loads are converted to fp32 by `.to(tl.float32)`,
    // and the fp32 result is converted back to fp16 by the store.
    let out = lower_seed(
        "_layer_norm_fwd_fused",
        "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,BLOCK_SIZE=256",
    );
    assert!(out.contains("arange 0, 256"), "{out}");
    assert!(out.contains("cast"), "{out}");
}
