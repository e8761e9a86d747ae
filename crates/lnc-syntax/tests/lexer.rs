//! Lexer unit tests: numbers, strings, operators, indentation and line joining.

use lnc_syntax::lexer::{Keyword, Op, StrKind, Token, TokenKind, tokenize};

fn lex(src: &str) -> Vec<Token> {
    match tokenize(src) {
        Ok(t) => t,
        Err(d) => panic!("{src:?}: {}", d.render(&lnc_diag::SourceFile::new("t.py", src))),
    }
}

fn kinds(src: &str) -> Vec<TokenKind> {
    lex(src).into_iter().map(|t| t.kind).collect()
}

/// A compact spelling of the token stream, one word per token.
fn words(src: &str) -> String {
    let toks: Vec<String> = kinds(src)
        .iter()
        .map(|k| match k {
            TokenKind::Name(n) => n.clone(),
            TokenKind::Keyword(k) => k.as_str().to_string(),
            TokenKind::Int(Some(v)) => format!("int:{v}"),
            TokenKind::Int(None) => "int:big".into(),
            TokenKind::Float(v) => format!("float:{v:?}"),
            TokenKind::Imaginary => "imag".into(),
            TokenKind::Str(s) => format!("{:?}:{:?}", s.kind, s.value),
            TokenKind::Op(op) => op.as_str().to_string(),
            TokenKind::Newline => "NL".into(),
            TokenKind::Indent => "INDENT".into(),
            TokenKind::Dedent => "DEDENT".into(),
            TokenKind::EndMarker => "END".into(),
        })
        .collect();
    toks.join(" ")
}

fn error(src: &str) -> String {
    match tokenize(src) {
        Ok(t) => panic!("{src:?} lexed: {t:?}"),
        Err(d) => d.message,
    }
}

#[test]
fn integers() {
    assert_eq!(
        words("0 7 1_000 0x1F 0XfF 0o17 0b101 0B1_1 000"),
        "int:0 int:7 int:1000 int:31 int:255 int:15 int:5 int:3 int:0 NL END"
    );
    assert_eq!(words("18446744073709551615 18446744073709551616"), "int:18446744073709551615 int:big NL END");
}

#[test]
fn floats() {
    assert_eq!(
        words("1e-5 0. .5 1.5 1_0.2_5 1E+3 3.e2 09.5"),
        "float:1e-5 float:0.0 float:0.5 float:1.5 float:10.25 float:1000.0 float:300.0 float:9.5 NL END"
    );
}

#[test]
fn imaginary() {
    assert_eq!(words("1j 2.5J 1e3j .5j"), "imag imag imag imag NL END");
}

#[test]
fn number_then_name_is_an_error() {
    assert_eq!(error("x = 1abc\n"), "invalid numeric literal");
    assert_eq!(error("x = 1_\n"), "invalid numeric literal");
    assert_eq!(error("x = 0123\n"), "leading zeros in decimal integer literals are not permitted");
    // A keyword may follow a number directly.
    assert_eq!(words("1if x else 2"), "int:1 if x else int:2 NL END");
}

#[test]
fn strings_and_prefixes() {
    assert_eq!(
        words(r#"'a' "b" r'\n' R"\d" u'x' b'y' Rb'\x' bR"z" f'{x}' rF"{y}""#),
        r#"Str:"a" Str:"b" Str:"\\n" Str:"\\d" Str:"x" Bytes:"y" Bytes:"\\x" Bytes:"z" Format:"{x}" Format:"{y}" NL END"#
    );
}

#[test]
fn escapes_are_decoded() {
    let k = kinds(r#"'a\n\t\\\'\"\x41\u00e9\U0001F600\101\q' b'\x41\u0041'"#);
    let TokenKind::Str(s) = &k[0] else { panic!("{k:?}") };
    assert_eq!(s.value, "a\n\t\\'\"Aé😀A\\q");
    let TokenKind::Str(b) = &k[1] else { panic!("{k:?}") };
    assert_eq!((b.kind, b.value.as_str()), (StrKind::Bytes, "A\\u0041"));
    assert_eq!(error(r"x = '\x4'"), "truncated `\\xXX` escape");
}

#[test]
fn triple_quoted_strings_span_lines() {
    let src = "x = '''a\n'b' \"c\"\n''' \"\"\"d\\\"\"\"\"\ny = 1\n";
    assert_eq!(words(src), r#"x = Str:"a\n'b' \"c\"\n" Str:"d\"" NL y = int:1 NL END"#);
    // A fake `def` inside a docstring is just text.
    assert_eq!(words("'''\ndef f():\n    pass\n'''\n"), r#"Str:"\ndef f():\n    pass\n" NL END"#);
}

#[test]
fn empty_strings_are_not_triple_quotes() {
    assert_eq!(words("'' \"\" x"), r#"Str:"" Str:"" x NL END"#);
}

#[test]
fn fstrings_with_nested_quotes_and_braces() {
    let spec = words(r#"f"{x["a"]:>{w}} {{lit}} {d['k']!r}" y"#);
    assert!(spec.starts_with("Format:") && spec.ends_with(" y NL END"), "{spec}");
    assert_eq!(words(r#"f"{x["a"]}" y"#), r#"Format:"{x[\"a\"]}" y NL END"#);
    assert_eq!(words("f'''{\n  x  # comment\n}''' z"), "Format:\"{\\n  x  # comment\\n}\" z NL END");
    assert_eq!(error("f'{x'\n"), "unterminated string literal");
}

#[test]
fn unterminated_strings() {
    assert_eq!(error("x = 'abc\ny = 2\n"), "unterminated string literal");
    assert_eq!(error("x = \"abc"), "unterminated string literal");
    assert_eq!(error("x = '''abc\n\ny = 2\n"), "unterminated triple-quoted string literal");
    assert_eq!(error("x = '\\"), "unterminated string literal");
}

#[test]
fn backslash_continues_a_string_line() {
    assert_eq!(words("'a\\\nb'"), r#"Str:"ab" NL END"#);
}

#[test]
fn every_operator() {
    let src = "( ) [ ] { } , : ; . ... -> := = @ + - * ** / // % & | ^ ~ << >> < > <= >= == != \
               += -= *= /= //= %= @= &= |= ^= <<= >>= **=";
    let ops: Vec<&str> = src.split_whitespace().collect();
    let lexed: Vec<String> = kinds(src)
        .into_iter()
        .filter_map(|k| match k {
            TokenKind::Op(op) => Some(op.as_str().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(lexed, ops);
    assert_eq!(words("a..b"), "a . . b NL END");
    assert_eq!(words("x[...]"), "x [ ... ] NL END");
    assert_eq!(words("a->b"), "a -> b NL END");
    assert_eq!(words("a-=-b"), "a -= - b NL END");
}

#[test]
fn keywords_and_soft_keywords() {
    assert_eq!(
        kinds("lambda match type _ None"),
        vec![
            TokenKind::Keyword(Keyword::Lambda),
            TokenKind::Name("match".into()),
            TokenKind::Name("type".into()),
            TokenKind::Name("_".into()),
            TokenKind::Keyword(Keyword::None),
            TokenKind::Newline,
            TokenKind::EndMarker,
        ]
    );
}

#[test]
fn unicode_identifiers() {
    assert_eq!(words("résumé = π"), "résumé = π NL END");
    assert_eq!(error("x = a → b\n"), "invalid character `→` (U+2192)");
}

#[test]
fn bad_characters() {
    assert_eq!(error("x = $y\n"), "invalid character `$` (U+0024)");
    assert_eq!(error("x = a ? b\n"), "invalid character `?` (U+003F)");
    assert_eq!(error("if !x:\n"), "invalid character `!`");
    assert_eq!(error("x = 1 \\ 2\n"), "unexpected character after line continuation character");
}

#[test]
fn spans_are_byte_offsets() {
    let toks = lex("é = 'ü'\n");
    let spans: Vec<(u32, u32)> = toks.iter().map(|t| (t.span.start, t.span.end)).collect();
    assert_eq!(spans, [(0, 2), (3, 4), (5, 9), (9, 10), (10, 10)]);
}

#[test]
fn indentation_blocks() {
    let src = "if a:\n    b\n    if c:\n        d\ne\n";
    assert_eq!(words(src), "if a : NL INDENT b NL if c : NL INDENT d NL DEDENT DEDENT e NL END");
}

#[test]
fn blank_and_comment_lines_do_not_count() {
    let src = "if a:\n\n  # comment at another depth\n    b  # trailing\n\n        \n# x\n    c\n";
    assert_eq!(words(src), "if a : NL INDENT b NL c NL DEDENT END");
}

#[test]
fn dedents_at_end_of_file_without_newline() {
    assert_eq!(words("if a:\n  if b:\n    c"), "if a : NL INDENT if b : NL INDENT c NL DEDENT DEDENT END");
}

#[test]
fn brackets_join_lines() {
    let src = "x = f(a,\n  b,   # comment\n\n        [c,\n d])\ny\n";
    assert_eq!(words(src), "x = f ( a , b , [ c , d ] ) NL y NL END");
}

#[test]
fn backslash_joins_lines() {
    assert_eq!(words("x = 1 + \\\n      2\ny\n"), "x = int:1 + int:2 NL y NL END");
    assert_eq!(words("x = 1 + \\\r\n2\r\ny\r\n"), "x = int:1 + int:2 NL y NL END");
}

#[test]
fn crlf_and_cr_newlines() {
    assert_eq!(words("if a:\r\n    b\r\nc\rd"), "if a : NL INDENT b NL DEDENT c NL d NL END");
}

#[test]
fn bom_is_skipped() {
    let toks = lex("\u{FEFF}x = 1\n");
    assert_eq!(toks[0].kind, TokenKind::Name("x".into()));
    assert_eq!(toks[0].span.start, 3);
}

#[test]
fn tabs_consistent_with_spaces_are_fine() {
    assert_eq!(words("if a:\n\tb\n\tc\n"), "if a : NL INDENT b NL c NL DEDENT END");
    // Eight spaces then a tab: both columns and tab counts grow, no ambiguity.
    assert_eq!(
        words("if a:\n        b\n        \tc\n"),
        "if a : NL INDENT b NL INDENT c NL DEDENT DEDENT END"
    );
}

#[test]
fn ambiguous_tabs_are_an_error() {
    // Same results as CPython: the block's depth would depend on the width of a tab.
    let tab_error = "inconsistent use of tabs and spaces in indentation";
    assert_eq!(error("if a:\n    b\n\tc\n"), tab_error);
    assert_eq!(error("if a:\n        b\n\tc\n"), tab_error);
    assert_eq!(error("if a:\n\tb\n        c\n"), tab_error);
    assert_eq!(error("if a:\n  \tb\n\tc\n"), tab_error);
}

#[test]
fn inconsistent_dedent_is_an_error() {
    let message = "unindent does not match any outer indentation level";
    assert_eq!(error("if a:\n    b\n  c\n"), message);
    assert_eq!(error("if a:\n\tb\n    c\n"), message);
}

#[test]
fn unbalanced_brackets() {
    assert_eq!(error("x = (1,\n2\n"), "`(` was never closed");
    assert_eq!(error("x = [1)\n"), "closing bracket `)` does not match opening bracket `[`");
    assert_eq!(error("x = 1)\n"), "unmatched `)`");
}

#[test]
fn nesting_limits() {
    let deep = format!("x = {}1{}\n", "(".repeat(250), ")".repeat(250));
    assert_eq!(error(&deep), "too many nested parentheses");
    let mut src = String::new();
    for i in 0..120 {
        src.push_str(&format!("{}if x:\n", " ".repeat(i)));
    }
    src.push_str(&format!("{}pass\n", " ".repeat(120)));
    assert_eq!(error(&src), "too many levels of indentation");
}

#[test]
fn op_kinds_round_trip() {
    assert_eq!(kinds("**=")[0], TokenKind::Op(Op::DoubleStarEq));
    assert_eq!(kinds(":=")[0], TokenKind::Op(Op::Walrus));
}
