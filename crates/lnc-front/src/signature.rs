//! Kernel signatures in the format of Triton's AOT compiler.
//!
//! `*fp32,*fp32,i32,fp32,1024` gives, per source parameter and in order, a pointer type, a
//! scalar type or a literal. A literal specializes the parameter: a `tl.constexpr`
//! parameter must get one (or keep its default); a runtime parameter given one becomes a
//! constant of the literal's type while keeping its argument slot. `NAME=entry` entries
//! name their parameter and may follow the positional ones. Triton's divisibility hints
//! (`*fp32:16`) are accepted and ignored.

use std::fmt;
use std::sync::Arc;

use lnc_bir::DType;
use lnc_diag::Diagnostic;
use lnc_syntax::ast;

use crate::diag::suggest;

/// A literal value of a specialized parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstValue {
    /// An integer (`1024`, `-1`).
    Int(i64),
    /// A float (`1e-5`).
    Float(f64),
    /// `True` / `False`.
    Bool(bool),
    /// A string, for `tl.constexpr` parameters only (`"leaky_relu"`, the activation of
    /// Triton's matmul tutorial); written in double or single quotes, with no double quote inside.
    Str(Arc<str>),
}

impl ConstValue {
    /// The dtype the literal has on its own in Triton: `i32` for ints that fit (`u32`,
    /// then `i64` beyond), `fp32` for floats (`fp64` when out of fp32's range), `i1`;
    /// `None` for a string.
    pub fn dtype(&self) -> Option<DType> {
        let c = match *self {
            ConstValue::Int(i) => crate::value::Cv::Int(i as i128),
            ConstValue::Float(f) => crate::value::Cv::Float(f),
            ConstValue::Bool(b) => crate::value::Cv::Bool(b),
            ConstValue::Str(_) => return None,
        };
        Some(crate::promote::literal_dtype(&c).unwrap_or(DType::I64))
    }
}

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstValue::Int(i) => write!(f, "{i}"),
            // `{:?}` keeps a `.0` or an exponent, so the text parses back as a float.
            ConstValue::Float(x) => write!(f, "{x:?}"),
            ConstValue::Bool(true) => f.write_str("True"),
            ConstValue::Bool(false) => f.write_str("False"),
            ConstValue::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

/// What one parameter is specialized to.
#[derive(Clone, Debug, PartialEq)]
pub enum SigEntry {
    /// A pointer to elements of this dtype (`*fp32`).
    Ptr(DType),
    /// A runtime scalar of this dtype (`i32`).
    Scalar(DType),
    /// A compile-time value (`1024`).
    Const(ConstValue),
}

impl fmt::Display for SigEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SigEntry::Ptr(d) => write!(f, "*{}", d.sig_name()),
            SigEntry::Scalar(d) => f.write_str(d.sig_name()),
            SigEntry::Const(c) => write!(f, "{c}"),
        }
    }
}

/// A kernel's specialization: one entry per source parameter, in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    /// The entries, parameter by parameter (defaults filled in).
    pub entries: Vec<SigEntry>,
}

impl fmt::Display for Signature {
    /// The canonical text: every entry positional, types by their short names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// True when a parameter annotation is `tl.constexpr` (any spelling ending in `constexpr`).
pub(crate) fn is_constexpr_annotation(e: &ast::Expr) -> bool {
    match &e.kind {
        ast::ExprKind::Attribute { attr, .. } => attr.name == "constexpr",
        ast::ExprKind::Name(n) => n == "constexpr",
        ast::ExprKind::Str(s) => s == "constexpr" || s.ends_with(".constexpr"),
        _ => false,
    }
}

/// A parameter's default as a literal, when it is one (`128`, `-1`, `1e-5`, `True`).
pub(crate) fn literal_default(e: &ast::Expr) -> Option<ConstValue> {
    match &e.kind {
        ast::ExprKind::Int(i) => i64::try_from(*i).ok().map(ConstValue::Int),
        ast::ExprKind::Float(f) => Some(ConstValue::Float(*f)),
        ast::ExprKind::Bool(b) => Some(ConstValue::Bool(*b)),
        ast::ExprKind::Str(t) if !t.contains('"') => Some(ConstValue::Str(Arc::from(t.as_str()))),
        ast::ExprKind::Unary { op: ast::UnaryOp::Neg, operand } => match literal_default(operand)? {
            ConstValue::Int(i) => i.checked_neg().map(ConstValue::Int),
            ConstValue::Float(f) => Some(ConstValue::Float(-f)),
            ConstValue::Bool(_) | ConstValue::Str(_) => None,
        },
        _ => None,
    }
}

fn parse_literal(s: &str) -> Option<ConstValue> {
    for q in ['"', '\''] {
        // No double quote inside: the canonical text writes the string in double quotes.
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q))
            && !inner.contains([q, '"'])
        {
            return Some(ConstValue::Str(Arc::from(inner)));
        }
    }
    match s {
        "True" | "true" => return Some(ConstValue::Bool(true)),
        "False" | "false" => return Some(ConstValue::Bool(false)),
        _ => {}
    }
    let digits = s.replace('_', "");
    let (neg, body) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
    };
    let int = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        body.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Some(ConstValue::Int(if neg { -i } else { i }));
    }
    let looks_float = body.bytes().any(|b| b.is_ascii_digit())
        && body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    let special = matches!(body.to_ascii_lowercase().as_str(), "inf" | "infinity" | "nan");
    if looks_float || special {
        return digits.parse::<f64>().ok().map(ConstValue::Float);
    }
    None
}

/// The comma-separated entries of a signature; a comma inside a quoted string belongs to
/// the string (`ACTIVATION="a,b"`).
fn split_entries(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quote) = (0, None);
    for (i, c) in text.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            (',', None) => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// Parses one entry; `Err` carries the message and a help line.
fn parse_entry(text: &str) -> Result<SigEntry, (String, String)> {
    // Triton's AOT signatures may carry a divisibility hint after a colon.
    let ty = text.split_once(':').map_or(text, |(t, _)| t).trim();
    if let Some(p) = ty.strip_prefix('*') {
        return DType::from_sig_name(p.trim()).map(SigEntry::Ptr).ok_or_else(|| {
            (
                format!("unknown pointer type `{text}` in the signature"),
                "pointer types are `*fp16`, `*bf16`, `*fp32`, `*fp64`, `*i1`, `*i8`…`*i64`, `*u8`…`*u64`"
                    .into(),
            )
        });
    }
    if let Some(d) = DType::from_sig_name(ty) {
        return Ok(SigEntry::Scalar(d));
    }
    if let Some(c) = parse_literal(text) {
        return Ok(SigEntry::Const(c));
    }
    Err((
        format!("invalid signature entry `{text}`"),
        "an entry is a pointer type (`*fp32`), a scalar type (`i32`, `fp32`) or a literal (`1024`, `1e-5`, `True`, `\"leaky_relu\"`)"
            .into(),
    ))
}

/// Parses a signature for `kernel`: one entry per parameter (positional, then `NAME=entry`),
/// defaults of omitted parameters filled in. Errors point at the kernel's parameters.
pub fn parse_signature(text: &str, kernel: &ast::FunctionDef) -> Result<Signature, Diagnostic> {
    let params = &kernel.params;
    let fname = &kernel.name.name;
    let mut given: Vec<Option<SigEntry>> = vec![None; params.len()];
    let items: Vec<&str> = if text.trim().is_empty() {
        Vec::new()
    } else {
        split_entries(text).into_iter().map(str::trim).collect()
    };
    let mut positional = 0usize;
    let mut seen_named = false;
    for item in items {
        if item.is_empty() {
            return Err(Diagnostic::error(
                format!("empty entry in the signature `{text}`"),
                kernel.name.span,
                "for this kernel",
            ));
        }
        let named = item.split_once('=').filter(|(n, _)| {
            let n = n.trim();
            !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
        let (index, entry_text) = match named {
            Some((name, value)) => {
                seen_named = true;
                let name = name.trim();
                let Some(i) = params.iter().position(|p| p.name.name == name) else {
                    let mut d = Diagnostic::error(
                        format!("the signature names `{name}`, which is not a parameter of `{fname}`"),
                        kernel.name.span,
                        "kernel defined here",
                    );
                    if let Some(s) = suggest(name, params.iter().map(|p| p.name.name.as_str())) {
                        d = d.with_help(format!("did you mean `{s}`?"));
                    }
                    return Err(d);
                };
                (i, value.trim())
            }
            None => {
                if seen_named {
                    return Err(Diagnostic::error(
                        format!("positional signature entry `{item}` after a named one"),
                        kernel.name.span,
                        "for this kernel",
                    )
                    .with_help("give positional entries first, then `NAME=entry` ones"));
                }
                if positional >= params.len() {
                    let names: Vec<String> = params.iter().map(|p| format!("`{}`", p.name.name)).collect();
                    return Err(Diagnostic::error(
                        format!(
                            "the signature has too many entries: `{fname}` has {} parameter{}",
                            params.len(),
                            if params.len() == 1 { "" } else { "s" }
                        ),
                        kernel.name.span,
                        "kernel defined here",
                    )
                    .with_help(format!(
                        "give one entry per parameter ({}) and remove the others",
                        names.join(", ")
                    )));
                }
                positional += 1;
                (positional - 1, item)
            }
        };
        let p = &params[index];
        if given[index].is_some() {
            return Err(Diagnostic::error(
                format!("parameter `{}` is given twice in the signature", p.name.name),
                p.span,
                "this parameter",
            ));
        }
        let entry = parse_entry(entry_text).map_err(|(msg, help)| {
            Diagnostic::error(format!("{msg} for parameter `{}`", p.name.name), p.span, "this parameter")
                .with_help(help)
        })?;
        let constexpr = p.annotation.as_ref().is_some_and(is_constexpr_annotation);
        if constexpr && !matches!(entry, SigEntry::Const(_)) {
            return Err(Diagnostic::error(
                format!(
                    "parameter `{}` is a `tl.constexpr` and needs a value, not the type `{entry}`",
                    p.name.name
                ),
                p.span,
                "declared `tl.constexpr` here",
            )
            .with_help(format!("give a literal, e.g. `{}=128`", p.name.name)));
        }
        given[index] = Some(entry);
    }
    let mut entries = Vec::with_capacity(params.len());
    let mut missing = Vec::new();
    for (p, g) in params.iter().zip(given) {
        match g {
            Some(e) => entries.push(e),
            None => match &p.default {
                Some(d) => match literal_default(d) {
                    Some(c) => entries.push(SigEntry::Const(c)),
                    None => {
                        return Err(Diagnostic::error(
                            format!(
                                "the default value of `{}` is not a literal lnc can specialize on",
                                p.name.name
                            ),
                            d.span,
                            "this default",
                        )
                        .with_help(format!("give `{}` a value in the signature", p.name.name)));
                    }
                },
                None => missing.push(p),
            },
        }
    }
    if let Some(first) = missing.first() {
        let names: Vec<String> = missing.iter().map(|p| format!("`{}`", p.name.name)).collect();
        let is_constexpr = |p: &ast::Param| p.annotation.as_ref().is_some_and(is_constexpr_annotation);
        let help = if missing.iter().all(|p| is_constexpr(p)) {
            let values: Vec<String> = missing.iter().map(|p| format!("{}=128", p.name.name)).collect();
            format!(
                "a `tl.constexpr` parameter without a default needs its value in the signature, e.g. `{}`",
                values.join(",")
            )
        } else {
            "add an entry for each: a pointer type (`*fp32`), a scalar type (`i32`) or, \
             for a `tl.constexpr`, a literal (`1024`)"
                .to_string()
        };
        return Err(Diagnostic::error(
            format!(
                "the signature has {} entr{} but `{fname}` has {} parameters: {} missing",
                positional,
                if positional == 1 { "y" } else { "ies" },
                params.len(),
                names.join(", ")
            ),
            first.span,
            "no signature entry for this parameter",
        )
        .with_help(help));
    }
    Ok(Signature { entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(parse_literal("1024"), Some(ConstValue::Int(1024)));
        assert_eq!(parse_literal("-1"), Some(ConstValue::Int(-1)));
        assert_eq!(parse_literal("0x10"), Some(ConstValue::Int(16)));
        assert_eq!(parse_literal("1e-5"), Some(ConstValue::Float(1e-5)));
        assert_eq!(parse_literal("0.5"), Some(ConstValue::Float(0.5)));
        assert_eq!(parse_literal("True"), Some(ConstValue::Bool(true)));
        assert_eq!(parse_literal("inf"), Some(ConstValue::Float(f64::INFINITY)));
        assert_eq!(parse_literal("fp33"), None);
        assert_eq!(parse_literal("e5"), None);
        assert_eq!(parse_literal("\"leaky_relu\""), Some(ConstValue::Str("leaky_relu".into())));
        assert_eq!(parse_literal("''"), Some(ConstValue::Str("".into())));
        assert_eq!(parse_literal("\"a\"b\""), None);
        assert_eq!(parse_literal("\"open"), None);
        assert_eq!(split_entries("*fp32,\"a,b\", 'c,d',4"), vec!["*fp32", "\"a,b\"", " 'c,d'", "4"]);
        assert_eq!(parse_literal("\"a,b\""), Some(ConstValue::Str("a,b".into())));
        assert_eq!(parse_literal("'a\"b'"), None);
        assert_eq!(ConstValue::Str("x".into()).to_string(), "\"x\"");
    }

    #[test]
    fn entries() {
        assert_eq!(parse_entry("*fp32"), Ok(SigEntry::Ptr(DType::F32)));
        assert_eq!(parse_entry("*i1"), Ok(SigEntry::Ptr(DType::I1)));
        assert_eq!(parse_entry("*fp16:16"), Ok(SigEntry::Ptr(DType::F16)));
        assert_eq!(parse_entry("i32:16"), Ok(SigEntry::Scalar(DType::I32)));
        assert_eq!(parse_entry("bf16"), Ok(SigEntry::Scalar(DType::BF16)));
        assert!(parse_entry("*fp33").is_err());
        assert!(parse_entry("float").is_err());
        assert_eq!(ConstValue::Float(1e-5).to_string(), "1e-5");
        assert_eq!(ConstValue::Float(2.0).to_string(), "2.0");
        assert_eq!(ConstValue::Int(1 << 40).dtype(), Some(DType::I64));
        assert_eq!(ConstValue::Str("x".into()).dtype(), None);
        assert_eq!(ConstValue::Float(0.5).dtype(), Some(DType::F32));
    }
}
