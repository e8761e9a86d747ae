//! Python 3 tokens.
//!
//! Two stages: a [logos] automaton recognises the raw tokens of one physical line at a time
//! (names, numbers, strings, operators, newlines; comments, blanks and backslash
//! continuations are skipped), then [`tokenize`] walks them like CPython's tokenizer does:
//! newlines inside brackets are dropped (implicit line joining), blank and comment-only
//! lines vanish, and the indentation of each logical line becomes `Indent` / `Dedent`
//! tokens against a stack of open levels.
//!
//! The lexer accepts every valid Python file, not only kernels: host code around the
//! kernels has to be skipped token by token, so f-strings with nested quotes (PEP 701),
//! every string prefix and every number form must lex even though kernels reject most of
//! them later.

use std::fmt;

use lnc_diag::{Diagnostic, Span};
use logos::Logos;

/// One token with its byte span in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Where it is. `Newline` covers the line break (empty at the end of the file),
    /// `Indent` the indentation whitespace, `Dedent` and `EndMarker` are empty.
    pub span: Span,
}

/// Token kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// An identifier (soft keywords such as `match`, `case` and `type` included).
    Name(String),
    /// A hard keyword.
    Keyword(Keyword),
    /// An integer literal; `None` when it does not fit in 64 bits (Python ints are
    /// unbounded, so host code may hold larger ones).
    Int(Option<u64>),
    /// A float literal.
    Float(f64),
    /// An imaginary literal (`1j`, `2.5e3J`).
    Imaginary,
    /// A string or bytes literal, escapes decoded.
    Str(StrLit),
    /// An operator or delimiter.
    Op(Op),
    /// End of a logical line.
    Newline,
    /// The indentation grew: a block starts.
    Indent,
    /// The indentation shrank back to an enclosing level: a block ends.
    Dedent,
    /// End of the file; always the last token.
    EndMarker,
}

/// A string literal.
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    /// The value: escapes decoded unless the literal is raw. For f-strings, the source
    /// text between the quotes, undecoded (kernels do not support them).
    pub value: String,
    /// Plain, bytes or formatted.
    pub kind: StrKind,
}

/// What kind of string literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrKind {
    /// `"…"`, `r"…"`, `u"…"`.
    Str,
    /// `b"…"`, `rb"…"`.
    Bytes,
    /// `f"…"`, `rf"…"`, and template strings `t"…"`.
    Format,
}

macro_rules! spelled_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// The token as written in source.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

spelled_enum! {
    /// Python's hard keywords.
    Keyword {
        /// `False`.
        False = "False",
        /// `None`.
        None = "None",
        /// `True`.
        True = "True",
        /// `and`.
        And = "and",
        /// `as`.
        As = "as",
        /// `assert`.
        Assert = "assert",
        /// `async`.
        Async = "async",
        /// `await`.
        Await = "await",
        /// `break`.
        Break = "break",
        /// `class`.
        Class = "class",
        /// `continue`.
        Continue = "continue",
        /// `def`.
        Def = "def",
        /// `del`.
        Del = "del",
        /// `elif`.
        Elif = "elif",
        /// `else`.
        Else = "else",
        /// `except`.
        Except = "except",
        /// `finally`.
        Finally = "finally",
        /// `for`.
        For = "for",
        /// `from`.
        From = "from",
        /// `global`.
        Global = "global",
        /// `if`.
        If = "if",
        /// `import`.
        Import = "import",
        /// `in`.
        In = "in",
        /// `is`.
        Is = "is",
        /// `lambda`.
        Lambda = "lambda",
        /// `nonlocal`.
        Nonlocal = "nonlocal",
        /// `not`.
        Not = "not",
        /// `or`.
        Or = "or",
        /// `pass`.
        Pass = "pass",
        /// `raise`.
        Raise = "raise",
        /// `return`.
        Return = "return",
        /// `try`.
        Try = "try",
        /// `while`.
        While = "while",
        /// `with`.
        With = "with",
        /// `yield`.
        Yield = "yield",
    }
}

impl Keyword {
    /// The keyword spelled `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Keyword> {
        use Keyword::*;
        Some(match name {
            "False" => False,
            "None" => None,
            "True" => True,
            "and" => And,
            "as" => As,
            "assert" => Assert,
            "async" => Async,
            "await" => Await,
            "break" => Break,
            "class" => Class,
            "continue" => Continue,
            "def" => Def,
            "del" => Del,
            "elif" => Elif,
            "else" => Else,
            "except" => Except,
            "finally" => Finally,
            "for" => For,
            "from" => From,
            "global" => Global,
            "if" => If,
            "import" => Import,
            "in" => In,
            "is" => Is,
            "lambda" => Lambda,
            "nonlocal" => Nonlocal,
            "not" => Not,
            "or" => Or,
            "pass" => Pass,
            "raise" => Raise,
            "return" => Return,
            "try" => Try,
            "while" => While,
            "with" => With,
            "yield" => Yield,
            _ => return Option::None,
        })
    }
}

spelled_enum! {
    /// Operators and delimiters.
    Op {
        /// `(`.
        LParen = "(",
        /// `)`.
        RParen = ")",
        /// `[`.
        LBracket = "[",
        /// `]`.
        RBracket = "]",
        /// `{`.
        LBrace = "{",
        /// `}`.
        RBrace = "}",
        /// `,`.
        Comma = ",",
        /// `:`.
        Colon = ":",
        /// `;`.
        Semi = ";",
        /// `.`.
        Dot = ".",
        /// `...`.
        Ellipsis = "...",
        /// `->`.
        Arrow = "->",
        /// `:=`.
        Walrus = ":=",
        /// `=`.
        Assign = "=",
        /// `@`.
        At = "@",
        /// `+`.
        Plus = "+",
        /// `-`.
        Minus = "-",
        /// `*`.
        Star = "*",
        /// `**`.
        DoubleStar = "**",
        /// `/`.
        Slash = "/",
        /// `//`.
        DoubleSlash = "//",
        /// `%`.
        Percent = "%",
        /// `&`.
        Amp = "&",
        /// `|`.
        Pipe = "|",
        /// `^`.
        Caret = "^",
        /// `~`.
        Tilde = "~",
        /// `<<`.
        Shl = "<<",
        /// `>>`.
        Shr = ">>",
        /// `<`.
        Lt = "<",
        /// `>`.
        Gt = ">",
        /// `<=`.
        Le = "<=",
        /// `>=`.
        Ge = ">=",
        /// `==`.
        EqEq = "==",
        /// `!=`.
        NotEq = "!=",
        /// `+=`.
        PlusEq = "+=",
        /// `-=`.
        MinusEq = "-=",
        /// `*=`.
        StarEq = "*=",
        /// `/=`.
        SlashEq = "/=",
        /// `//=`.
        DoubleSlashEq = "//=",
        /// `%=`.
        PercentEq = "%=",
        /// `@=`.
        AtEq = "@=",
        /// `&=`.
        AmpEq = "&=",
        /// `|=`.
        PipeEq = "|=",
        /// `^=`.
        CaretEq = "^=",
        /// `<<=`.
        ShlEq = "<<=",
        /// `>>=`.
        ShrEq = ">>=",
        /// `**=`.
        DoubleStarEq = "**=",
    }
}

impl fmt::Display for TokenKind {
    /// How "found …" messages name a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenKind::Name(n) => write!(f, "`{n}`"),
            TokenKind::Keyword(k) => write!(f, "keyword `{k}`"),
            TokenKind::Int(_) => f.write_str("an integer literal"),
            TokenKind::Float(_) => f.write_str("a float literal"),
            TokenKind::Imaginary => f.write_str("an imaginary literal"),
            TokenKind::Str(s) => match s.kind {
                StrKind::Str => f.write_str("a string literal"),
                StrKind::Bytes => f.write_str("a bytes literal"),
                StrKind::Format => f.write_str("an f-string"),
            },
            TokenKind::Op(op) => write!(f, "`{op}`"),
            TokenKind::Newline => f.write_str("end of line"),
            TokenKind::Indent => f.write_str("an indented line"),
            TokenKind::Dedent => f.write_str("end of the indented block"),
            TokenKind::EndMarker => f.write_str("end of file"),
        }
    }
}

/// Most open brackets CPython allows (`too many nested parentheses`). Also bounds the
/// parser's recursion on bracketed expressions.
pub const MAX_BRACKET_DEPTH: usize = 200;

/// Most indentation levels CPython allows (`too many levels of indentation`). Also bounds
/// the parser's recursion on nested blocks.
pub const MAX_INDENT_DEPTH: usize = 100;

/// Nesting bound for f-strings inside f-string replacement fields.
const MAX_FSTRING_DEPTH: usize = 32;

/// Why a raw token failed; turned into a [`Diagnostic`] by [`tokenize`], which knows the
/// span and the source.
#[derive(Clone, Debug, Default, PartialEq)]
enum RawError {
    /// No token starts here.
    #[default]
    BadChar,
    /// A string whose closing quote is missing. `open` is the length of prefix and
    /// opening quotes.
    Unterminated { open: usize, triple: bool },
    /// A malformed escape sequence, `at..at+len` relative to the token start.
    BadEscape { at: usize, len: usize, message: &'static str },
    /// A bytes literal with a non-ASCII character at `at` (relative).
    NonAsciiBytes { at: usize },
    /// A malformed number.
    BadNumber { message: &'static str, help: &'static str },
    /// F-strings nested beyond [`MAX_FSTRING_DEPTH`].
    FStringTooDeep,
}

#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error = RawError)]
#[logos(skip r"[ \t\x0C]+")]
#[logos(skip(r"#[^\r\n]*", allow_greedy = true))]
#[logos(skip r"\\(\r\n|\r|\n)")]
#[logos(subpattern digits = r"[0-9](_?[0-9])*")]
#[logos(subpattern exponent = r"[eE][+-]?(?&digits)")]
#[logos(subpattern float = r"(?&digits)\.(?&digits)?(?&exponent)?|\.(?&digits)(?&exponent)?|(?&digits)(?&exponent)")]
enum Raw {
    #[regex(r"\r\n|\r|\n")]
    Newline,
    #[regex(r"[\p{XID_Start}_][\p{XID_Continue}]*")]
    Name,
    #[regex(r"(?&digits)", lex_decimal)]
    #[regex(r"0[xX](_?[0-9a-fA-F])+", |lex| lex_radix(lex, 16))]
    #[regex(r"0[oO](_?[0-7])+", |lex| lex_radix(lex, 8))]
    #[regex(r"0[bB](_?[01])+", |lex| lex_radix(lex, 2))]
    Int(Option<u64>),
    #[regex(r"(?&float)", lex_float)]
    Float(f64),
    #[regex(r"((?&float)|(?&digits))[jJ]")]
    Imaginary,
    #[regex(r#"([rRuUfFbBtT]|[bB][rR]|[rR][bB]|[fF][rR]|[rR][fF]|[tT][rR]|[rR][tT])?["']"#, lex_string)]
    Str(StrLit),

    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token(".")]
    Dot,
    #[token("...")]
    Ellipsis,
    #[token("->")]
    Arrow,
    #[token(":=")]
    Walrus,
    #[token("=")]
    Assign,
    #[token("@")]
    At,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("**")]
    DoubleStar,
    #[token("/")]
    Slash,
    #[token("//")]
    DoubleSlash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("+=")]
    PlusEq,
    #[token("-=")]
    MinusEq,
    #[token("*=")]
    StarEq,
    #[token("/=")]
    SlashEq,
    #[token("//=")]
    DoubleSlashEq,
    #[token("%=")]
    PercentEq,
    #[token("@=")]
    AtEq,
    #[token("&=")]
    AmpEq,
    #[token("|=")]
    PipeEq,
    #[token("^=")]
    CaretEq,
    #[token("<<=")]
    ShlEq,
    #[token(">>=")]
    ShrEq,
    #[token("**=")]
    DoubleStarEq,
}

impl Raw {
    fn op(&self) -> Option<Op> {
        Some(match self {
            Raw::LParen => Op::LParen,
            Raw::RParen => Op::RParen,
            Raw::LBracket => Op::LBracket,
            Raw::RBracket => Op::RBracket,
            Raw::LBrace => Op::LBrace,
            Raw::RBrace => Op::RBrace,
            Raw::Comma => Op::Comma,
            Raw::Colon => Op::Colon,
            Raw::Semi => Op::Semi,
            Raw::Dot => Op::Dot,
            Raw::Ellipsis => Op::Ellipsis,
            Raw::Arrow => Op::Arrow,
            Raw::Walrus => Op::Walrus,
            Raw::Assign => Op::Assign,
            Raw::At => Op::At,
            Raw::Plus => Op::Plus,
            Raw::Minus => Op::Minus,
            Raw::Star => Op::Star,
            Raw::DoubleStar => Op::DoubleStar,
            Raw::Slash => Op::Slash,
            Raw::DoubleSlash => Op::DoubleSlash,
            Raw::Percent => Op::Percent,
            Raw::Amp => Op::Amp,
            Raw::Pipe => Op::Pipe,
            Raw::Caret => Op::Caret,
            Raw::Tilde => Op::Tilde,
            Raw::Shl => Op::Shl,
            Raw::Shr => Op::Shr,
            Raw::Lt => Op::Lt,
            Raw::Gt => Op::Gt,
            Raw::Le => Op::Le,
            Raw::Ge => Op::Ge,
            Raw::EqEq => Op::EqEq,
            Raw::NotEq => Op::NotEq,
            Raw::PlusEq => Op::PlusEq,
            Raw::MinusEq => Op::MinusEq,
            Raw::StarEq => Op::StarEq,
            Raw::SlashEq => Op::SlashEq,
            Raw::DoubleSlashEq => Op::DoubleSlashEq,
            Raw::PercentEq => Op::PercentEq,
            Raw::AtEq => Op::AtEq,
            Raw::AmpEq => Op::AmpEq,
            Raw::PipeEq => Op::PipeEq,
            Raw::CaretEq => Op::CaretEq,
            Raw::ShlEq => Op::ShlEq,
            Raw::ShrEq => Op::ShrEq,
            Raw::DoubleStarEq => Op::DoubleStarEq,
            Raw::Newline | Raw::Name | Raw::Int(_) | Raw::Float(_) | Raw::Imaginary | Raw::Str(_) => {
                return None;
            }
        })
    }
}

fn lex_decimal(lex: &mut logos::Lexer<'_, Raw>) -> Result<Option<u64>, RawError> {
    let text = lex.slice();
    // CPython rejects `0123` (it would be octal in Python 2) but accepts `000`.
    if text.len() > 1 && text.starts_with('0') && text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return Err(RawError::BadNumber {
            message: "leading zeros in decimal integer literals are not permitted",
            help: "use an `0o` prefix for octal integers",
        });
    }
    Ok(parse_radix(text, 10))
}

fn lex_radix(lex: &mut logos::Lexer<'_, Raw>, radix: u32) -> Option<u64> {
    parse_radix(lex.slice().get(2..).unwrap_or(""), radix)
}

fn parse_radix(digits: &str, radix: u32) -> Option<u64> {
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    u64::from_str_radix(&digits, radix).ok()
}

fn lex_float(lex: &mut logos::Lexer<'_, Raw>) -> Result<f64, RawError> {
    let text: String = lex.slice().chars().filter(|&c| c != '_').collect();
    text.parse().map_err(|_| RawError::BadNumber {
        message: "invalid float literal",
        help: "write it as digits, an optional `.` fraction and an optional `e` exponent",
    })
}

/// The logos pattern matched the prefix and the first quote; scan the rest by hand
/// because triple quotes and f-string nesting are beyond a regular language.
fn lex_string(lex: &mut logos::Lexer<'_, Raw>) -> Result<StrLit, RawError> {
    let open = lex.slice();
    let quote = open.as_bytes().last().copied().unwrap_or(b'"');
    let prefix = open.get(..open.len().saturating_sub(1)).unwrap_or("").to_ascii_lowercase();
    let raw = prefix.contains('r');
    let kind = if prefix.contains('b') {
        StrKind::Bytes
    } else if prefix.contains('f') || prefix.contains('t') {
        StrKind::Format
    } else {
        StrKind::Str
    };
    let rest = lex.remainder();
    let triple = rest.as_bytes().get(..2) == Some(&[quote, quote][..]);
    let open_len = open.len() + if triple { 2 } else { 0 };
    let body_start = if triple { 2 } else { 0 };
    let scanned = scan_string(
        rest.as_bytes(),
        body_start,
        StrShape { quote, triple, format: kind == StrKind::Format },
        0,
    );
    match scanned {
        Ok(end) => {
            let qlen = if triple { 3 } else { 1 };
            let body = rest.get(body_start..end.saturating_sub(qlen)).unwrap_or("");
            lex.bump(end);
            let value = if kind == StrKind::Format {
                body.to_string()
            } else if raw {
                normalize_newlines(body)
            } else {
                decode_escapes(body, kind == StrKind::Bytes)
                    .map_err(|(at, len, message)| RawError::BadEscape { at: open_len + at, len, message })?
            };
            if kind == StrKind::Bytes
                && let Some(at) = body.char_indices().find(|(_, c)| !c.is_ascii()).map(|(i, _)| i)
            {
                return Err(RawError::NonAsciiBytes { at: open_len + at });
            }
            Ok(StrLit { value, kind })
        }
        Err(ScanError::Unterminated(stop)) => {
            lex.bump(stop.min(rest.len()));
            Err(RawError::Unterminated { open: open_len, triple })
        }
        Err(ScanError::TooDeep(stop)) => {
            lex.bump(stop.min(rest.len()));
            Err(RawError::FStringTooDeep)
        }
    }
}

#[derive(Clone, Copy)]
struct StrShape {
    quote: u8,
    triple: bool,
    format: bool,
}

enum ScanError {
    /// Where scanning stopped (end of line or of input), relative to the scanned slice.
    Unterminated(usize),
    /// Where the too-deep nested f-string starts.
    TooDeep(usize),
}

/// Finds the end of a string body in `s` starting at `i`; returns the offset just past
/// the closing quote(s). Works on bytes: every character that matters is ASCII, and
/// UTF-8 continuation bytes never equal an ASCII byte.
fn scan_string(s: &[u8], mut i: usize, shape: StrShape, depth: usize) -> Result<usize, ScanError> {
    let at = |i: usize| s.get(i).copied();
    loop {
        let Some(c) = at(i) else {
            return Err(ScanError::Unterminated(i));
        };
        match c {
            b'\\' => {
                // Even in raw strings a backslash keeps the next quote from closing the
                // string; in f-strings it does not protect a `{`.
                match at(i + 1) {
                    Some(b'{') if shape.format => i += 1,
                    Some(b'\r') if at(i + 2) == Some(b'\n') => i += 3,
                    Some(_) => i += 2,
                    None => i += 1,
                }
            }
            b'\n' | b'\r' if !shape.triple => return Err(ScanError::Unterminated(i)),
            q if q == shape.quote => {
                if !shape.triple {
                    return Ok(i + 1);
                }
                if at(i + 1) == Some(q) && at(i + 2) == Some(q) {
                    return Ok(i + 3);
                }
                i += 1;
            }
            b'{' if shape.format => {
                if at(i + 1) == Some(b'{') {
                    i += 2;
                } else {
                    i = scan_replacement_field(s, i + 1, shape, depth)?;
                }
            }
            _ => i += 1,
        }
    }
}

/// Skips an f-string replacement field starting after its `{`; returns the offset just
/// past its `}`. Python 3.12 (PEP 701) lets the expression hold any string, the
/// enclosing quote included, and comments and newlines; the format spec after a
/// top-level `:` is literal text that may hold nested fields.
fn scan_replacement_field(s: &[u8], mut i: usize, shape: StrShape, depth: usize) -> Result<usize, ScanError> {
    if depth >= MAX_FSTRING_DEPTH {
        return Err(ScanError::TooDeep(i));
    }
    let at = |i: usize| s.get(i).copied();
    let mut brackets = 0usize;
    loop {
        let Some(c) = at(i) else {
            return Err(ScanError::Unterminated(i));
        };
        match c {
            b'(' | b'[' | b'{' => {
                brackets += 1;
                i += 1;
            }
            b')' | b']' => {
                brackets = brackets.saturating_sub(1);
                i += 1;
            }
            b'}' if brackets == 0 => return Ok(i + 1),
            b'}' => {
                brackets -= 1;
                i += 1;
            }
            b':' if brackets == 0 => return scan_format_spec(s, i + 1, shape, depth),
            b'#' => {
                while let Some(c) = at(i) {
                    if c == b'\n' || c == b'\r' {
                        break;
                    }
                    i += 1;
                }
            }
            b'\'' | b'"' => {
                let mut p = i;
                let mut prefix = String::new();
                while p > 0 && prefix.len() < 2 {
                    match at(p - 1) {
                        Some(b) if b.is_ascii_alphabetic() => {
                            prefix.push(b.to_ascii_lowercase() as char);
                            p -= 1;
                        }
                        _ => break,
                    }
                }
                // A letter run longer than a prefix is a name followed by a string
                // (`x'…'` is not valid Python anyway); treat it as unprefixed.
                if p > 0 && at(p - 1).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    prefix.clear();
                }
                let triple = at(i + 1) == Some(c) && at(i + 2) == Some(c);
                let inner =
                    StrShape { quote: c, triple, format: prefix.contains('f') || prefix.contains('t') };
                let start = i + if triple { 3 } else { 1 };
                i = scan_string(s, start, inner, depth + 1)?;
            }
            b'\n' | b'\r' if !shape.triple && brackets == 0 => {
                // Newlines inside a single-quoted f-string's field are legal in 3.12,
                // but a missing `}` is by far the likelier story.
                return Err(ScanError::Unterminated(i));
            }
            _ => i += 1,
        }
    }
}

fn scan_format_spec(s: &[u8], mut i: usize, shape: StrShape, depth: usize) -> Result<usize, ScanError> {
    let at = |i: usize| s.get(i).copied();
    loop {
        let Some(c) = at(i) else {
            return Err(ScanError::Unterminated(i));
        };
        match c {
            b'{' => i = scan_replacement_field(s, i + 1, shape, depth + 1)?,
            b'}' => return Ok(i + 1),
            b'\n' | b'\r' if !shape.triple => return Err(ScanError::Unterminated(i)),
            q if q == shape.quote => return Err(ScanError::Unterminated(i)),
            _ => i += 1,
        }
    }
}

/// Python reads source with universal newlines, so string values see `\n` only.
fn normalize_newlines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// Decodes the escapes of a non-raw string body. Unknown escapes keep their backslash
/// (CPython only warns about them); `\N{…}` is kept as written since decoding it needs
/// the Unicode name table. Errors are `(offset, length, message)` within `body`.
fn decode_escapes(body: &str, bytes: bool) -> Result<String, (usize, usize, &'static str)> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\r' {
            if chars.peek().map(|&(_, c)| c) == Some('\n') {
                chars.next();
            }
            out.push('\n');
            continue;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            '\n' => {}
            '\r' => {
                if chars.peek().map(|&(_, c)| c) == Some('\n') {
                    chars.next();
                }
            }
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0C'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0B'),
            '0'..='7' => {
                let mut value = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|&(_, c)| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value).unwrap_or('\u{FFFD}'));
            }
            'x' | 'u' | 'U' if !(bytes && e != 'x') => {
                let (n, message) = match e {
                    'x' => (2, "truncated `\\xXX` escape"),
                    'u' => (4, "truncated `\\uXXXX` escape"),
                    _ => (8, "truncated `\\UXXXXXXXX` escape"),
                };
                let mut value = 0u32;
                for k in 0..n {
                    match chars.peek().and_then(|&(_, c)| c.to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            chars.next();
                        }
                        None => return Err((i, 2 + k, message)),
                    }
                }
                if e == 'U' && value > 0x10FFFF {
                    return Err((i, 2 + n, "escape sequence is not a valid Unicode code point"));
                }
                // Lone surrogates are legal in Python strings but not in Rust ones.
                out.push(char::from_u32(value).unwrap_or('\u{FFFD}'));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

/// Splits `src` into Python tokens, ending with `Newline` (if the last line has content),
/// the `Dedent`s that close open blocks, and `EndMarker`.
///
/// Stops at the first error: an unterminated string, a character no token starts with,
/// an inconsistent dedent, tabs and spaces mixed ambiguously, an unclosed or mismatched
/// bracket.
pub fn tokenize(src: &str) -> Result<Vec<Token>, Diagnostic> {
    let bom = if src.starts_with('\u{FEFF}') { '\u{FEFF}'.len_utf8() } else { 0 };
    let body = src.get(bom..).unwrap_or("");
    let mut st = Indenter::new(src);
    st.line_begin = bom;
    let mut lex = Raw::lexer(body);
    while let Some(res) = lex.next() {
        let r = lex.span();
        let (start, end) = (r.start + bom, r.end + bom);
        match res {
            Ok(raw) => st.push(raw, start, end)?,
            Err(e) => return Err(st.raw_error(e, start, end)),
        }
    }
    st.finish()
}

/// Turns raw tokens into logical lines (see the module docs).
struct Indenter<'a> {
    src: &'a str,
    out: Vec<Token>,
    /// Open indentation levels as `(column with tabs to multiples of 8, column with tabs
    /// as 1)`: CPython's check that the two orders agree is what makes a tab/space mix
    /// an error exactly when its meaning depends on the tab width.
    levels: Vec<(usize, usize)>,
    brackets: Vec<(Op, Span)>,
    at_line_start: bool,
    /// Start of the physical line the next logical line starts on.
    line_begin: usize,
}

impl<'a> Indenter<'a> {
    fn new(src: &'a str) -> Self {
        Indenter {
            src,
            out: Vec::new(),
            levels: vec![(0, 0)],
            brackets: Vec::new(),
            at_line_start: true,
            line_begin: 0,
        }
    }

    fn emit(&mut self, kind: TokenKind, start: usize, end: usize) {
        self.out.push(Token { kind, span: Span::new(start, end) });
    }

    fn push(&mut self, raw: Raw, start: usize, end: usize) -> Result<(), Diagnostic> {
        if raw == Raw::Newline {
            if self.brackets.is_empty() {
                if !self.at_line_start {
                    self.emit(TokenKind::Newline, start, end);
                    self.at_line_start = true;
                }
                self.line_begin = end;
            }
            return Ok(());
        }
        if self.at_line_start {
            self.indent(start)?;
            self.at_line_start = false;
        }
        let text = self.src.get(start..end).unwrap_or("");
        let kind = match raw {
            Raw::Name => match Keyword::from_name(text) {
                Some(k) => TokenKind::Keyword(k),
                None => TokenKind::Name(text.to_string()),
            },
            Raw::Int(v) => TokenKind::Int(v),
            Raw::Float(v) => TokenKind::Float(v),
            Raw::Imaginary => TokenKind::Imaginary,
            Raw::Str(s) => TokenKind::Str(s),
            other => match other.op() {
                Some(op) => {
                    self.bracket(op, Span::new(start, end))?;
                    TokenKind::Op(op)
                }
                None => return Err(self.raw_error(RawError::BadChar, start, end)),
            },
        };
        self.check_adjacent_number(&kind, start)?;
        self.emit(kind, start, end);
        Ok(())
    }

    /// `1abc` lexes as `1` then `abc`; CPython rejects it, and so do we, but keywords may
    /// follow a number directly (`1if x else 2` is legal).
    fn check_adjacent_number(&self, kind: &TokenKind, start: usize) -> Result<(), Diagnostic> {
        let Some(prev) = self.out.last() else {
            return Ok(());
        };
        let prev_is_number =
            matches!(prev.kind, TokenKind::Int(_) | TokenKind::Float(_) | TokenKind::Imaginary);
        let next_is_word = matches!(
            kind,
            TokenKind::Name(_) | TokenKind::Int(_) | TokenKind::Float(_) | TokenKind::Imaginary
        );
        if prev_is_number && next_is_word && prev.span.end as usize == start {
            let end = self.src.get(start..).map_or(start, |rest| {
                start
                    + rest
                        .char_indices()
                        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
                        .map_or(rest.len(), |(i, _)| i)
            });
            return Err(Diagnostic::error(
                "invalid numeric literal",
                Span::new(prev.span.start as usize, end),
                "a number cannot be directly followed by a name",
            )
            .with_help("separate them with a space or an operator"));
        }
        Ok(())
    }

    fn bracket(&mut self, op: Op, span: Span) -> Result<(), Diagnostic> {
        let opener = match op {
            Op::LParen | Op::LBracket | Op::LBrace => {
                if self.brackets.len() >= MAX_BRACKET_DEPTH {
                    return Err(Diagnostic::error(
                        "too many nested parentheses",
                        span,
                        format!("more than {MAX_BRACKET_DEPTH} brackets are open here"),
                    ));
                }
                self.brackets.push((op, span));
                return Ok(());
            }
            Op::RParen => Op::LParen,
            Op::RBracket => Op::LBracket,
            Op::RBrace => Op::LBrace,
            _ => return Ok(()),
        };
        match self.brackets.pop() {
            Some((open, _)) if open == opener => Ok(()),
            Some((open, open_span)) => Err(Diagnostic::error(
                format!("closing bracket `{op}` does not match opening bracket `{open}`"),
                span,
                format!("expected `{}`", closer(open)),
            )
            .with_label(open_span, "unclosed bracket opened here")),
            None => {
                Err(Diagnostic::error(format!("unmatched `{op}`"), span, "no open bracket to close here"))
            }
        }
    }

    /// Measures the indentation of a logical line whose first token starts at `pos`.
    fn indent(&mut self, pos: usize) -> Result<(), Diagnostic> {
        let (mut col, mut alt) = (0usize, 0usize);
        let lead = self.src.get(self.line_begin..pos).unwrap_or("");
        for b in lead.bytes() {
            match b {
                b' ' => {
                    col += 1;
                    alt += 1;
                }
                b'\t' => {
                    col = (col / 8 + 1) * 8;
                    alt += 1;
                }
                b'\x0C' => {
                    col = 0;
                    alt = 0;
                }
                _ => break,
            }
        }
        let ws = Span::new(self.line_begin, pos);
        let tab_error = || {
            Diagnostic::error(
                "inconsistent use of tabs and spaces in indentation",
                ws,
                "this indentation mixes tabs and spaces",
            )
            .with_note("its depth relative to the lines above depends on how wide a tab is")
            .with_help("indent with spaces only")
        };
        let &(top, alt_top) = self.levels.last().unwrap_or(&(0, 0));
        if col == top {
            if alt != alt_top {
                return Err(tab_error());
            }
        } else if col > top {
            if alt <= alt_top {
                return Err(tab_error());
            }
            if self.levels.len() > MAX_INDENT_DEPTH {
                return Err(Diagnostic::error(
                    "too many levels of indentation",
                    ws,
                    format!("more than {MAX_INDENT_DEPTH} nested blocks"),
                ));
            }
            self.levels.push((col, alt));
            self.emit(TokenKind::Indent, self.line_begin, pos);
        } else {
            while self.levels.len() > 1 && self.levels.last().is_some_and(|&(c, _)| col < c) {
                self.levels.pop();
                self.emit(TokenKind::Dedent, pos, pos);
            }
            let &(top, alt_top) = self.levels.last().unwrap_or(&(0, 0));
            if col != top {
                let mut outer: Vec<String> = self.levels.iter().map(|(c, _)| c.to_string()).collect();
                let last = outer.pop().unwrap_or_default();
                let outer = if outer.is_empty() { last } else { format!("{} or {last}", outer.join(", ")) };
                return Err(Diagnostic::error(
                    "unindent does not match any outer indentation level",
                    ws,
                    format!("this line is indented by {col} columns"),
                )
                .with_note(format!("the enclosing blocks are indented by {outer} columns"))
                .with_help("indent it exactly like one of the enclosing blocks"));
            }
            if alt != alt_top {
                return Err(tab_error());
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Token>, Diagnostic> {
        if let Some(&(op, span)) = self.brackets.last() {
            return Err(Diagnostic::error(
                format!("`{op}` was never closed"),
                span,
                "this bracket is never closed",
            )
            .with_help(format!("add the matching `{}`", closer(op))));
        }
        let end = self.src.len();
        if !self.at_line_start {
            self.emit(TokenKind::Newline, end, end);
        }
        for _ in 1..self.levels.len() {
            self.emit(TokenKind::Dedent, end, end);
        }
        self.emit(TokenKind::EndMarker, end, end);
        Ok(self.out)
    }

    fn raw_error(&self, e: RawError, start: usize, end: usize) -> Diagnostic {
        match e {
            RawError::BadChar => self.bad_char(start),
            RawError::Unterminated { open, triple: false } => Diagnostic::error(
                "unterminated string literal",
                Span::new(start, start + open),
                "this string is never closed",
            )
            .with_help(
                "close it with the same quote before the end of the line, \
                 or use a triple-quoted string to span lines",
            ),
            RawError::Unterminated { open, triple: true } => {
                let quotes = self.src.get(start..start + open).unwrap_or("\"\"\"");
                let q = quotes.get(quotes.len().saturating_sub(3)..).unwrap_or("\"\"\"");
                Diagnostic::error(
                    "unterminated triple-quoted string literal",
                    Span::new(start, start + open),
                    "this string is never closed",
                )
                .with_note(format!("the file ends before a closing `{q}`"))
                .with_help(format!("close the string with `{q}` where it is meant to end"))
            }
            RawError::BadEscape { at, len, message } => {
                Diagnostic::error(message, Span::new(start + at, start + at + len), "in this escape")
            }
            RawError::NonAsciiBytes { at } => {
                let len = self.src.get(start + at..).and_then(|s| s.chars().next()).map_or(1, char::len_utf8);
                Diagnostic::error(
                    "bytes literals can only contain ASCII characters",
                    Span::new(start + at, start + at + len),
                    "not ASCII",
                )
                .with_help("write it as a `\\x` escape")
            }
            RawError::BadNumber { message, help } => {
                Diagnostic::error(message, Span::new(start, end), "invalid number").with_help(help)
            }
            RawError::FStringTooDeep => Diagnostic::error(
                "f-string nested too deeply",
                Span::new(start, end),
                format!("more than {MAX_FSTRING_DEPTH} levels of nested f-strings"),
            ),
        }
    }

    fn bad_char(&self, start: usize) -> Diagnostic {
        let c = self.src.get(start..).and_then(|s| s.chars().next()).unwrap_or('\0');
        let span = Span::new(start, start + c.len_utf8());
        match c {
            '\\' => Diagnostic::error(
                "unexpected character after line continuation character",
                span,
                "a `\\` outside a string must end its line",
            )
            .with_help("remove anything after the `\\`, including spaces and comments"),
            '\0' => Diagnostic::error("source code cannot contain null bytes", span, "null byte"),
            '!' => Diagnostic::error("invalid character `!`", span, "not a Python operator")
                .with_help("write `not x` for negation and `!=` for inequality"),
            '\u{2018}' | '\u{2019}' | '\u{201C}' | '\u{201D}' => Diagnostic::error(
                format!("invalid character `{c}` (U+{:04X})", c as u32),
                span,
                "typographic quote",
            )
            .with_help("use an ASCII quote `'` or `\"`"),
            c if c.is_control() || c.is_whitespace() => {
                Diagnostic::error(format!("invalid character U+{:04X}", c as u32), span, "not allowed here")
            }
            c => Diagnostic::error(
                format!("invalid character `{c}` (U+{:04X})", c as u32),
                span,
                "no Python token starts with this character",
            ),
        }
    }
}

fn closer(open: Op) -> Op {
    match open {
        Op::LParen => Op::RParen,
        Op::LBracket => Op::RBracket,
        _ => Op::RBrace,
    }
}
