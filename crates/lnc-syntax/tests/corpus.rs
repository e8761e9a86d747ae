//! Robustness over a corpus of real Python: every file CPython compiles must lex and be
//! skipped (or parsed) without error, and no file may panic the lexer or the parser.
//!
//! Ignored by default because the corpus lives outside the repository. Run with
//! `LNC_PY_CORPUS=/usr/lib/python3.11 cargo test -p lnc-syntax --test corpus -- --ignored`;
//! with `LNC_PY_VALID` pointing to a file listing the paths CPython accepts (one per
//! line), those must parse without any diagnostic.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "py") {
            out.push(p);
        }
    }
}

#[test]
#[ignore = "needs LNC_PY_CORPUS"]
fn corpus_lexes_and_skips() {
    let Ok(root) = std::env::var("LNC_PY_CORPUS") else {
        return;
    };
    let valid: Vec<String> = std::env::var("LNC_PY_VALID")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut files = Vec::new();
    walk(Path::new(&root), &mut files);
    files.sort();
    let mut failures = Vec::new();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let name = path.display().to_string();
        let file = lnc_diag::SourceFile::new(name.clone(), text);
        if let Err(d) = lnc_syntax::parse_file(&file)
            && valid.contains(&name)
        {
            failures.push(lnc_diag::render_all(&d, &file));
        }
    }
    eprintln!("{} files, {} failures", files.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
