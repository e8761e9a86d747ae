//! Spans, source files and diagnostics shared by every stage of lnc.
//!
//! Every stage reports user errors as [`Diagnostic`]s that point into a [`SourceFile`] by
//! byte [`Span`]s. Rendering happens only at the edges (CLI, tests, `Display` of the
//! embedding API's errors), through codespan-reporting, so the text has file, line, column
//! and a caret.
#![deny(missing_docs)]

use std::fmt;

use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;

/// A half-open byte range `[start, end)` into one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }

    /// The empty span at offset 0, for things that come from no source text.
    pub const DUMMY: Span = Span { start: 0, end: 0 };

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// The byte range, for slicing the source.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A source file: its name as shown to the user and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Name shown in diagnostics (usually the path given by the user).
    pub name: String,
    /// Full text.
    pub text: String,
}

impl SourceFile {
    /// Wraps a name and a text.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile { name: name.into(), text: text.into() }
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = (offset as usize).min(self.text.len());
        let before = &self.text[..offset];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = self.text[line_start..offset].chars().count() + 1;
        (line, col)
    }

    /// The byte offset of a 1-based line and column (the inverse of [`line_col`]), or
    /// `None` when the file has no such position.
    ///
    /// [`line_col`]: SourceFile::line_col
    pub fn offset(&self, line: usize, col: usize) -> Option<u32> {
        let line_start = match line {
            0 => return None,
            1 => 0,
            _ => self.text.match_indices('\n').nth(line - 2)?.0 + 1,
        };
        let rest = &self.text[line_start..];
        let line_text = &rest[..rest.find('\n').unwrap_or(rest.len())];
        let in_line = match col.checked_sub(1)? {
            c if c == line_text.chars().count() => line_text.len(),
            c => line_text.char_indices().nth(c)?.0,
        };
        u32::try_from(line_start + in_line).ok()
    }

    /// The text of the 1-based line `line`, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        self.text.lines().nth(line.saturating_sub(1)).unwrap_or("")
    }
}

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The input is rejected.
    Error,
    /// The input is accepted but probably wrong.
    Warning,
}

/// A span with a message, shown under the source line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What to say there (may be empty).
    pub message: String,
}

/// A user-facing error or warning with source locations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// One-line summary.
    pub message: String,
    /// The place the diagnostic is about.
    pub primary: Option<Label>,
    /// Other related places ("defined here").
    pub secondary: Vec<Label>,
    /// Notes and help lines shown after the source excerpt.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error with a primary label.
    pub fn error(message: impl Into<String>, span: Span, label: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            primary: Some(Label { span, message: label.into() }),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// An error with no source location (bad command-line input, for instance).
    pub fn error_nospan(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A warning with a primary label.
    pub fn warning(message: impl Into<String>, span: Span, label: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(message, span, label) }
    }

    /// Adds a secondary label.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label { span, message: message.into() });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Adds a help line (a note that starts with `help:`).
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("help: {}", help.into()));
        self
    }

    /// Renders to plain text (no colors) against the file the spans point into.
    pub fn render(&self, file: &SourceFile) -> String {
        render_all(std::slice::from_ref(self), file)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Renders several diagnostics to plain text, one after another.
pub fn render_all(diags: &[Diagnostic], file: &SourceFile) -> String {
    let cs_file = SimpleFile::new(file.name.as_str(), file.text.as_str());
    let config = term::Config::default();
    let mut out = String::new();
    for d in diags {
        let mut labels = Vec::new();
        let clamp = |s: Span| {
            let len = file.text.len();
            let start = (s.start as usize).min(len);
            start..(s.end as usize).clamp(start, len)
        };
        if let Some(p) = &d.primary {
            labels.push(cs::Label::primary((), clamp(p.span)).with_message(p.message.clone()));
        }
        for l in &d.secondary {
            labels.push(cs::Label::secondary((), clamp(l.span)).with_message(l.message.clone()));
        }
        let diag = match d.severity {
            Severity::Error => cs::Diagnostic::error(),
            Severity::Warning => cs::Diagnostic::warning(),
        }
        .with_message(d.message.clone())
        .with_labels(labels)
        .with_notes(d.notes.clone());
        let mut buf = String::new();
        // Rendering can only fail on spans outside the file, which `clamp` rules out;
        // fall back to the bare message rather than lose the diagnostic.
        if term::emit_to_string(&mut buf, &config, &cs_file, &diag).is_err() {
            buf = format!("error: {}\n", d.message);
        }
        out.push_str(&buf);
    }
    out
}

/// Edit distance counting an adjacent transposition as one edit (the commonest typo).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The closest candidate to `name`, if one is close enough to be a likely typo, for a
/// "did you mean" help. Names of one or two letters get no suggestion: every other short
/// name would be "close".
pub fn suggest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let limit = (name.chars().count() / 3).min(3);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let f = SourceFile::new("k.py", "ab\ncd\n");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(4), (2, 2));
        assert_eq!(f.line_text(2), "cd");
        for offset in 0..=6 {
            let (line, col) = f.line_col(offset);
            assert_eq!(f.offset(line, col), Some(offset));
        }
        assert_eq!(f.offset(2, 9), None);
        assert_eq!(f.offset(0, 1), None);
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(suggest("maks", ["mask", "other", "pointer"]), Some("mask"));
        assert_eq!(suggest("xyz", ["mask", "other"]), None);
        assert_eq!(suggest("laod", ["load", "store"]), Some("load"));
        assert_eq!(suggest("y", ["X"]), None);
    }

    #[test]
    fn renders_caret_under_span() {
        let f = SourceFile::new("k.py", "x = tl.foo(1)\n");
        let d = Diagnostic::error("unknown function `tl.foo`", Span::new(4, 10), "not a tl builtin")
            .with_help("see docs/language.md");
        let text = d.render(&f);
        assert!(text.contains("k.py:1:5"), "{text}");
        assert!(text.contains("^^^^^^ not a tl builtin"), "{text}");
        assert!(text.contains("help: see docs/language.md"), "{text}");
    }
}
