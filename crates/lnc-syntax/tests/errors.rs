//! Rendered diagnostics, caret included, for lexical and syntax errors.

use lnc_diag::{SourceFile, render_all};

/// Parses `src` and renders the diagnostics it must produce.
fn errors(src: &str) -> String {
    let file = SourceFile::new("kernel.py", src);
    match lnc_syntax::parse_file(&file) {
        Ok(f) => panic!("parsed without error: {}", lnc_syntax::dump_file(&f)),
        Err(d) => render_all(&d, &file),
    }
}

const HEADER: &str = "import triton\nimport triton.language as tl\n\n@triton.jit\n";

fn kernel_errors(body: &str) -> String {
    errors(&format!("{HEADER}{body}"))
}

#[test]
fn unterminated_string() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    tl.device_print('x is, X)\n    return X\n"));
}

#[test]
fn unterminated_triple_string() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    \"\"\"Docstring that never ends.\n    return X\n"));
}

#[test]
fn mixed_tabs_and_spaces() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    if X:\n        X = 1\n\tX = 2\n"));
}

#[test]
fn unindent_mismatch() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    if X > 0:\n        X = 1\n      X = 2\n"));
}

#[test]
fn unexpected_indent() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    x = 1\n        y = 2\n"));
}

#[test]
fn missing_colon() {
    insta::assert_snapshot!(kernel_errors(
        "def k(X, N):\n    for i in range(N)  # loop over rows\n        X += i\n"
    ));
}

#[test]
fn comparison_written_as_assignment() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    if X = 1:\n        pass\n"));
}

#[test]
fn unclosed_paren() {
    insta::assert_snapshot!(kernel_errors(
        "def k(X, N):\n    x = tl.load(X + tl.arange(0, 16), mask=N > 0\n    tl.store(X, x)\n"
    ));
}

#[test]
fn mismatched_bracket() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    x = tl.load(X[0)]\n"));
}

#[test]
fn bad_token() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    x = $X + 1\n"));
}

#[test]
fn expected_expression() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    x = X * (1 + )\n"));
}

#[test]
fn missing_comma_in_call() {
    insta::assert_snapshot!(kernel_errors("def k(X, Y):\n    tl.store(X Y)\n"));
}

#[test]
fn positional_after_keyword() {
    insta::assert_snapshot!(kernel_errors("def k(X, N):\n    x = tl.load(X, mask=N > 0, 0.0)\n"));
}

#[test]
fn empty_block() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    if X:\n    return X\n"));
}

#[test]
fn invalid_numeric_literal() {
    insta::assert_snapshot!(kernel_errors("def k(X):\n    x = 12abc\n"));
}

#[test]
fn variadic_parameters() {
    insta::assert_snapshot!(kernel_errors("def k(X, *args):\n    pass\n"));
}

#[test]
fn errors_from_several_kernels() {
    insta::assert_snapshot!(errors(
        "@triton.jit\ndef a(X):\n    X = = 1\n\n\
         def host():\n    return {x: y for x, y in z}\n\n\
         @triton.jit\ndef b(X):\n    f(a=1, X)\n\n\
         @triton.jit\ndef c(X):\n    return X\n"
    ));
}

#[test]
fn walrus_in_a_kernel() {
    // `:=` parses (so the rest of the kernel does too) and is reported as unsupported,
    // with its span, by the parser crate's own pass over the tree.
    let src = format!("{HEADER}def k(X, N):\n    if (n := tl.load(N)) > 0:\n        tl.store(X, n)\n");
    let file = SourceFile::new("kernel.py", src);
    let parsed = lnc_syntax::parse_file(&file).expect("`:=` is valid syntax");
    let diags = lnc_syntax::unsupported::unsupported_diagnostics(&parsed.functions[0]);
    insta::assert_snapshot!(render_all(&diags, &file));
}
