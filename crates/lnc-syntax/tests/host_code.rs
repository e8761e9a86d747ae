//! Host Python around the kernels is skipped without being interpreted: lambdas,
//! f-strings, decorators with arguments, classes, comprehensions, strings with fake
//! `def`s inside, `match`, `async`…

use lnc_diag::SourceFile;

fn host_file() -> SourceFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cases/host_code.py");
    SourceFile::new("host_code.py", std::fs::read_to_string(path).expect("case file"))
}

#[test]
fn only_jit_functions_are_parsed() {
    let file = host_file();
    let parsed = match lnc_syntax::parse_file(&file) {
        Ok(f) => f,
        Err(d) => panic!("{}", lnc_diag::render_all(&d, &file)),
    };
    let found: Vec<(&str, Vec<&str>)> = parsed
        .functions
        .iter()
        .map(|f| (f.name.name.as_str(), f.decorators.iter().map(|d| d.name.as_str()).collect()))
        .collect();
    assert_eq!(
        found,
        [
            ("add_kernel", vec!["triton.autotune", "triton.heuristics", "triton.jit"]),
            ("scale", vec!["jit"]),
            ("relu_kernel", vec!["lnc.jit"]),
            ("tl_kernel", vec!["tl.jit", "other_decorator"]),
        ]
    );
    let add = &parsed.functions[0];
    let params: Vec<(&str, bool)> =
        add.params.iter().map(|p| (p.name.name.as_str(), p.default.is_some())).collect();
    assert_eq!(
        params,
        [("X", false), ("Y", false), ("Z", false), ("N", false), ("BLOCK", true), ("EVEN", true)]
    );
    let autotune = &add.decorators[0];
    assert_eq!(&file.text[autotune.span.range()], "triton.autotune(configs=CONFIGS, key=['N'])");
}

#[test]
fn snapshot_host_file_kernels() {
    let file = host_file();
    let parsed = lnc_syntax::parse_file(&file).expect("parses");
    insta::assert_snapshot!("host_code_kernels", lnc_syntax::dump_file(&parsed));
}

#[test]
fn a_file_without_kernels_is_empty() {
    let file = SourceFile::new("empty.py", "");
    assert!(lnc_syntax::parse_file(&file).expect("parses").functions.is_empty());
    let file = SourceFile::new("comments.py", "# just a comment\n\n   \n");
    assert!(lnc_syntax::parse_file(&file).expect("parses").functions.is_empty());
}

#[test]
fn kernels_inside_host_blocks_are_not_top_level() {
    let src =
        "if True:\n    @triton.jit\n    def k(x):\n        pass\nclass C:\n    @jit\n    def m(self): pass\n";
    let parsed = lnc_syntax::parse_file(&SourceFile::new("k.py", src)).expect("parses");
    assert!(parsed.functions.is_empty());
}

#[test]
fn host_code_errors_the_tokens_show_are_reported() {
    let cases = [
        ("x = 1\n    y = 2\n", "unexpected indent"),
        ("  x = 1\n", "unexpected indent"),
        ("if x:\ny = 2\n", "expected an indented block"),
        ("class C:\n    def f(self):\n    pass\n", "expected an indented block"),
    ];
    for (src, message) in cases {
        let d = lnc_syntax::parse_file(&SourceFile::new("k.py", src)).unwrap_err();
        assert_eq!(d[0].message, message, "{src:?}");
    }
}
