//! The lexer and parser never panic: truncations and random edits of real files must
//! give either a tree or diagnostics whose spans lie inside the file.

use lnc_diag::SourceFile;

fn corpus() -> Vec<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    [
        format!("{dir}/../../../shared/seeds/triton_05_layer_norm.py"),
        format!("{dir}/tests/cases/host_code.py"),
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).expect("corpus file"))
    .collect()
}

fn check(text: String) {
    let len = text.len() as u32;
    let file = SourceFile::new("fuzz.py", text);
    match lnc_syntax::parse_file(&file) {
        Ok(f) => {
            let dump = lnc_syntax::dump_file(&f);
            assert!(f.functions.is_empty() || !dump.is_empty());
            for func in &f.functions {
                lnc_syntax::unsupported::unsupported_diagnostics(func);
            }
        }
        Err(diags) => {
            assert!(!diags.is_empty());
            for d in &diags {
                if let Some(p) = &d.primary {
                    assert!(p.span.start <= p.span.end && p.span.end <= len, "{d:?}");
                }
                d.render(&file);
            }
        }
    }
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[test]
fn every_truncation() {
    for text in corpus() {
        for end in (0..text.len()).step_by(13) {
            check(text[..boundary(&text, end)].to_string());
        }
    }
}

#[test]
fn random_edits() {
    const PIECES: [&str; 32] = [
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ":",
        "\n",
        "\n    ",
        "\t",
        "'",
        "\"",
        "'''",
        "\\",
        "#",
        "@triton.jit\n",
        "def ",
        "lambda",
        "if ",
        "else",
        " = ",
        "**",
        "-",
        "not ",
        "f'{",
        "0x",
        "1e",
        ".",
        ",",
        "é",
        "\r",
        "$",
    ];
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for text in corpus() {
        for _ in 0..400 {
            let mut t = text.clone();
            for _ in 0..1 + rng.below(4) {
                let at = boundary(&t, rng.below(t.len() + 1));
                if rng.below(2) == 0 {
                    t.insert_str(at, PIECES[rng.below(PIECES.len())]);
                } else {
                    let end = boundary(&t, at + rng.below(20));
                    t.replace_range(at..end, "");
                }
            }
            check(t);
        }
    }
}

#[test]
fn pathological_inputs() {
    let cases = [
        "\u{FEFF}".to_string(),
        "\0".to_string(),
        "@".to_string(),
        "@triton.jit".to_string(),
        "@triton.jit\n".to_string(),
        "@triton.jit\ndef".to_string(),
        "@triton.jit\ndef k(".to_string(),
        "@triton.jit\ndef k():".to_string(),
        "@triton.jit\ndef k():\n".to_string(),
        "@jit\n@jit\nclass C: pass\n".to_string(),
        "\\".to_string(),
        "x = \\\n".to_string(),
        "f'{'".to_string(),
        format!("x = f'{}'\n", "{f'".repeat(100)),
        "'''".to_string(),
        "\t\t\n  \n\x0c\n".to_string(),
        format!("@jit\ndef k():\n    x = {}\n", "[".repeat(300)),
        format!("@jit\ndef k():\n    x = {}\n", "a if b else (".repeat(150)),
        "@jit\ndef k():\n    x = 99999999999999999999999\n".to_string(),
        "@jit\ndef k():\n    x = 1\n  y = 2\n".to_string(),
    ];
    for c in cases {
        check(c);
    }
}
