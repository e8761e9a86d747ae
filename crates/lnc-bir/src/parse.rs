//! Reader of the text form written by [`crate::print`].
//!
//! `parse_function(&print_function(f))` prints back to the same text, so pass tests can
//! start from IR files. The parser reads exactly the printer's grammar: values must be
//! defined before they are used (no forward references), `;` starts a comment that runs to
//! the end of the line, and every span is [`Span::DUMMY`]. It does not verify; run
//! [`crate::verify::verify`] on the result.

use std::collections::HashMap;
use std::fmt;

use lnc_diag::Span;

use crate::ir::*;
use crate::types::*;

/// A syntax error, located by 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Line, from 1.
    pub line: usize,
    /// Column (characters), from 1.
    pub col: usize,
    /// What was expected.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses one function in the printer's text form.
pub fn parse_function(text: &str) -> Result<Function, ParseError> {
    let mut p = Parser { src: text, pos: 0, f: Function::default(), values: HashMap::new() };
    p.function()?;
    p.skip_ws();
    if p.pos < p.src.len() {
        return Err(p.error("expected the end of the text"));
    }
    Ok(p.f)
}

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    f: Function,
    values: HashMap<u32, Value>,
}

type PResult<T> = Result<T, ParseError>;

/// The pieces of an instruction's header before it is created.
struct Header {
    opcode: Opcode,
    args: Vec<Value>,
}

impl<'s> Parser<'s> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        let before = &self.src[..self.pos];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ParseError { line, col, message: message.into() }
    }

    fn rest(&self) -> &'s str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Skips spaces and comments, newlines included.
    fn skip_ws(&mut self) {
        loop {
            let r = self.rest();
            let t = r.trim_start();
            self.pos += r.len() - t.len();
            if t.starts_with(';') {
                self.pos += t.find('\n').unwrap_or(t.len());
            } else {
                return;
            }
        }
    }

    /// Skips spaces and a comment, stopping at the end of the line.
    fn skip_inline(&mut self) {
        let r = self.rest();
        let t = r.trim_start_matches([' ', '\t', '\r']);
        self.pos += r.len() - t.len();
        if t.starts_with(';') {
            self.pos += t.find('\n').unwrap_or(t.len());
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_inline();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) { Ok(()) } else { Err(self.error(format!("expected `{s}`"))) }
    }

    /// The next word (`[A-Za-z0-9_]+`) without consuming it.
    fn peek_word(&mut self) -> &'s str {
        self.skip_inline();
        let r = self.rest();
        let n = r.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(r.len());
        &r[..n]
    }

    fn word(&mut self) -> PResult<&'s str> {
        let w = self.peek_word();
        if w.is_empty() {
            return Err(self.error("expected a word"));
        }
        self.pos += w.len();
        Ok(w)
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if self.peek_word() == w {
            self.pos += w.len();
            true
        } else {
            false
        }
    }

    fn expect_word(&mut self, w: &str) -> PResult<()> {
        if self.eat_word(w) { Ok(()) } else { Err(self.error(format!("expected `{w}`"))) }
    }

    fn int<T: std::str::FromStr>(&mut self) -> PResult<T> {
        self.skip_inline();
        let r = self.rest();
        let sign = usize::from(r.starts_with('-'));
        let n = r[sign..].find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len() - sign) + sign;
        let v = r[..n].parse().map_err(|_| self.error("expected an integer"))?;
        self.pos += n;
        Ok(v)
    }

    fn string(&mut self) -> PResult<String> {
        self.skip_inline();
        if !self.rest().starts_with('"') {
            return Err(self.error("expected a string"));
        }
        let mut out = String::new();
        let mut chars = self.rest().char_indices().skip(1);
        while let Some((k, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += k + 1;
                    return Ok(out);
                }
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        '\\' | '"' | '\'' => e,
                        'u' => {
                            let mut hex = String::new();
                            for (_, h) in chars.by_ref() {
                                match h {
                                    '{' => {}
                                    '}' => break,
                                    _ => hex.push(h),
                                }
                            }
                            u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or_else(|| self.error("bad unicode escape"))?
                        }
                        _ => return Err(self.error(format!("unknown escape `\\{e}`"))),
                    });
                }
                _ => out.push(c),
            }
        }
        Err(self.error("unterminated string"))
    }

    /// An identifier or a quoted string.
    fn name(&mut self) -> PResult<String> {
        self.skip_inline();
        if self.rest().starts_with('"') { self.string() } else { Ok(self.word()?.to_string()) }
    }

    /// `%N`, its number.
    fn value_number(&mut self) -> PResult<u32> {
        self.expect("%")?;
        if self.rest().starts_with('?') {
            return Err(self.error("value defined nowhere (`%?`)"));
        }
        let r = self.rest();
        let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        let v = r[..n].parse().map_err(|_| self.error("expected a value number"))?;
        self.pos += n;
        Ok(v)
    }

    fn use_value(&mut self) -> PResult<Value> {
        let at = self.pos;
        let n = self.value_number()?;
        self.values.get(&n).copied().ok_or_else(|| {
            self.pos = at;
            self.error(format!("%{n} is not defined before this use"))
        })
    }

    fn bind(&mut self, n: u32, v: Value) -> PResult<()> {
        if self.values.insert(n, v).is_some() {
            return Err(self.error(format!("%{n} is defined twice")));
        }
        Ok(())
    }

    fn dtype(&mut self) -> PResult<DType> {
        let w = self.word()?;
        DType::from_sig_name(w).ok_or_else(|| self.error(format!("unknown dtype `{w}`")))
    }

    fn elem(&mut self) -> PResult<Elem> {
        self.skip_inline();
        if self.eat("*") { Ok(Elem::Ptr(self.dtype()?)) } else { Ok(Elem::Scalar(self.dtype()?)) }
    }

    fn ty(&mut self) -> PResult<Type> {
        self.skip_inline();
        if !self.eat("<") {
            let e = self.elem()?;
            return Ok(Type::block(e, Shape::SCALAR));
        }
        let mut dims = Vec::new();
        // `<4x8xfp32>`: numbers each followed by `x`, then the element type.
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            dims.push(self.int::<u32>()?);
            if !self.rest().starts_with('x') {
                return Err(self.error("expected `x` after a dimension"));
            }
            self.pos += 1;
        }
        let e = self.elem()?;
        self.expect(">")?;
        let shape = Shape::new(&dims).ok_or_else(|| self.error("block of too high a rank"))?;
        Ok(Type::block(e, shape))
    }

    fn type_list(&mut self) -> PResult<Vec<Type>> {
        self.expect("(")?;
        let mut out = Vec::new();
        if !self.eat(")") {
            loop {
                out.push(self.ty()?);
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(out)
    }

    fn function(&mut self) -> PResult<()> {
        self.skip_ws();
        self.expect_word("kernel")?;
        self.expect("@")?;
        self.f.name = self.name()?;
        self.expect("(")?;
        if !self.eat(")") {
            loop {
                let n = self.value_number()?;
                self.skip_inline();
                let name = if self.peek() == Some(':') { String::new() } else { self.name()? };
                self.expect(":")?;
                let ty = self.ty()?;
                self.expect("@")?;
                self.expect_word_prefix("slot")?;
                let slot = self.int::<u32>()?;
                let v = self.f.add_param(name, slot, ty);
                self.bind(n, v)?;
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.expect("{")?;
        self.f.body = self.region_insts()?;
        Ok(())
    }

    /// `slot` directly followed by digits (`@slot3`).
    fn expect_word_prefix(&mut self, w: &str) -> PResult<()> {
        if self.rest().starts_with(w) {
            self.pos += w.len();
            Ok(())
        } else {
            Err(self.error(format!("expected `{w}`")))
        }
    }

    /// Instructions up to and including the closing `}`.
    fn region_insts(&mut self) -> PResult<Region> {
        let mut region = Region::default();
        loop {
            self.skip_ws();
            if self.eat("}") {
                return Ok(region);
            }
            if self.peek().is_none() {
                return Err(self.error("expected `}`"));
            }
            region.insts.push(self.inst()?);
        }
    }

    /// Operands, each optionally after a keyword from `labels`; returns them with their keyword.
    fn operands(&mut self, labels: &[&str]) -> PResult<Vec<(Option<&'s str>, Value)>> {
        let mut out = Vec::new();
        loop {
            self.skip_inline();
            let w = self.peek_word();
            let label = if !w.is_empty() && labels.contains(&w) {
                self.pos += w.len();
                Some(w)
            } else if self.peek() == Some('%') {
                None
            } else if out.is_empty() {
                return Ok(out);
            } else {
                return Err(self.error("expected an operand"));
            };
            out.push((label, self.use_value()?));
            if !self.eat(",") {
                return Ok(out);
            }
        }
    }

    fn plain_operands(&mut self) -> PResult<Vec<Value>> {
        Ok(self.operands(&[])?.into_iter().map(|(_, v)| v).collect())
    }

    fn axis(&mut self) -> PResult<u8> {
        self.expect_word("axis")?;
        self.expect("=")?;
        self.int()
    }

    fn constant(&mut self) -> PResult<Const> {
        self.skip_inline();
        let r = self.rest();
        let n =
            r.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))).unwrap_or(r.len());
        let tok = &r[..n];
        let c = if let Some(hex) = tok.strip_prefix("0f") {
            u64::from_str_radix(hex, 16).ok().map(|b| Const::Float(f64::from_bits(b)))
        } else if tok.contains(['.', 'e', 'E']) || tok.contains("inf") || tok.contains("NaN") {
            tok.parse().ok().map(Const::Float)
        } else {
            tok.parse().ok().map(Const::Int)
        };
        let c = c.ok_or_else(|| self.error(format!("bad constant `{tok}`")))?;
        self.pos += n;
        Ok(c)
    }

    fn header(&mut self, mnemonic: &str) -> PResult<Header> {
        let h = |opcode, args| Ok(Header { opcode, args });
        match mnemonic {
            "const" => h(Opcode::Const(self.constant()?), vec![]),
            "program_id" => h(Opcode::ProgramId(self.int()?), vec![]),
            "num_programs" => h(Opcode::NumPrograms(self.int()?), vec![]),
            "arange" => {
                let start = self.int()?;
                self.expect(",")?;
                h(Opcode::Arange { start, end: self.int()? }, vec![])
            }
            "splat" => h(Opcode::Splat, self.plain_operands()?),
            "broadcast" => h(Opcode::Broadcast, self.plain_operands()?),
            "expand_dims" => {
                let axis = self.axis()?;
                h(Opcode::ExpandDims(axis), self.plain_operands()?)
            }
            "cmp" => {
                let w = self.word()?;
                let op = CmpOp::from_name(w).ok_or_else(|| self.error(format!("unknown predicate `{w}`")))?;
                h(Opcode::Cmp(op), self.plain_operands()?)
            }
            "select" => h(Opcode::Select, self.plain_operands()?),
            "fma" => h(Opcode::Fma, self.plain_operands()?),
            "cast" => h(Opcode::Cast, self.plain_operands()?),
            "bitcast" => h(Opcode::Bitcast, self.plain_operands()?),
            "ptr_add" => h(Opcode::PtrAdd, self.plain_operands()?),
            "load" => {
                self.skip_inline();
                let volatile = self.eat_word("volatile");
                let ops = self.operands(&["mask", "other"])?;
                let has_mask = ops.iter().any(|(l, _)| *l == Some("mask"));
                let has_other = ops.iter().any(|(l, _)| *l == Some("other"));
                h(Opcode::Load { has_mask, has_other, volatile }, ops.into_iter().map(|(_, v)| v).collect())
            }
            "store" => {
                self.skip_inline();
                let check_only = self.eat_word("check_only");
                let ops = self.operands(&["mask"])?;
                let has_mask = ops.iter().any(|(l, _)| l.is_some());
                h(Opcode::Store { has_mask, check_only }, ops.into_iter().map(|(_, v)| v).collect())
            }
            "reduce" => {
                let w = self.word()?;
                let op =
                    ReduceOp::from_name(w).ok_or_else(|| self.error(format!("unknown reduction `{w}`")))?;
                let axis = self.axis()?;
                let keep_dims = self.eat_word("keep_dims");
                h(Opcode::Reduce { op, axis, keep_dims }, self.plain_operands()?)
            }
            "atomic" => {
                let w = self.word()?;
                let op = AtomicOp::from_name(w).ok_or_else(|| self.error(format!("unknown atomic `{w}`")))?;
                let ops = self.operands(&["mask"])?;
                let has_mask = ops.iter().any(|(l, _)| l.is_some());
                h(Opcode::Atomic { op, has_mask }, ops.into_iter().map(|(_, v)| v).collect())
            }
            "atomic_cas" => h(Opcode::AtomicCas, self.plain_operands()?),
            "for" => {
                let lb = self.use_value()?;
                self.expect_word("to")?;
                let ub = self.use_value()?;
                self.expect_word("step")?;
                let step = self.use_value()?;
                let mut args = vec![lb, ub, step];
                if self.eat_word("iter") {
                    self.expect("(")?;
                    args.extend(self.plain_operands()?);
                    self.expect(")")?;
                }
                h(Opcode::For, args)
            }
            "while" => {
                let mut args = Vec::new();
                if self.eat_word("iter") {
                    self.expect("(")?;
                    args = self.plain_operands()?;
                    self.expect(")")?;
                }
                h(Opcode::While, args)
            }
            "if" => h(Opcode::If, self.plain_operands()?),
            "yield" => h(Opcode::Yield, self.plain_operands()?),
            "condition" => h(Opcode::Condition, self.plain_operands()?),
            "assert" => h(Opcode::Assert, self.plain_operands()?),
            "print" => {
                let s = self.string()?;
                self.f.strings.push(s);
                let k = (self.f.strings.len() - 1) as u32;
                h(Opcode::Print(k), self.plain_operands()?)
            }
            m => {
                if let Some(op) = BinOp::from_name(m) {
                    h(Opcode::Binary(op), self.plain_operands()?)
                } else if let Some(op) = UnOp::from_name(m) {
                    h(Opcode::Unary(op), self.plain_operands()?)
                } else {
                    Err(self.error(format!("unknown instruction `{m}`")))
                }
            }
        }
    }

    fn inst(&mut self) -> PResult<Inst> {
        let mut results = Vec::new();
        if self.peek() == Some('%') {
            loop {
                results.push(self.value_number()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("=")?;
        }
        let mnemonic = self.word()?;
        let Header { opcode, args } = self.header(mnemonic)?;
        // Single results print `: T`, control flow and multiple results `-> (T, U)`.
        let types = if self.eat(":") || self.eat("->") {
            self.skip_inline();
            if self.peek() == Some('(') { self.type_list()? } else { vec![self.ty()?] }
        } else {
            Vec::new()
        };
        if types.len() != results.len() {
            return Err(self.error(format!("{} result(s) but {} type(s)", results.len(), types.len())));
        }
        let inst = self.f.create_inst(opcode, args, &types, Span::DUMMY);
        for (k, n) in results.into_iter().enumerate() {
            let v = self.f.insts[inst].results[k];
            self.bind(n, v)?;
        }
        if self.eat("{") {
            let mut regions = Vec::new();
            loop {
                regions.push(self.region(inst, regions.len() as u32)?);
                if !(self.eat_word("else")
                    || self.eat_word("do")
                    || self.rest().trim_start().starts_with('{'))
                {
                    break;
                }
                self.expect("{")?;
            }
            self.f.insts[inst].regions = regions;
        }
        Ok(inst)
    }

    /// A region's optional `^(args):` line and its instructions, after its `{`.
    fn region(&mut self, owner: Inst, index: u32) -> PResult<Region> {
        self.skip_ws();
        let mut args = Vec::new();
        if self.eat("^") {
            self.expect("(")?;
            if !self.eat(")") {
                loop {
                    let n = self.value_number()?;
                    self.expect(":")?;
                    let ty = self.ty()?;
                    let v = self.f.create_region_arg(owner, index, args.len() as u32, ty);
                    self.bind(n, v)?;
                    args.push(v);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.expect(":")?;
        }
        let mut region = self.region_insts()?;
        region.args = args;
        Ok(region)
    }
}
