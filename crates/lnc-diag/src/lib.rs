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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let f = SourceFile::new("k.py", "ab\ncd\n");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(4), (2, 2));
        assert_eq!(f.line_text(2), "cd");
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
