//! Recursive-descent parser for `@jit` functions, and the top-level walk that finds them.
//!
//! The top level of a file is host code: it is skipped a logical line (plus its indented
//! block) at a time without being parsed, so any Python there is fine. Only a `def`
//! carrying a jit decorator is parsed, with Python's grammar and operator precedence.
//! Constructs kernels cannot use are still parsed over, into
//! [`StmtKind::Unsupported`] / [`ExprKind::Unsupported`], so the front end can name
//! them instead of this parser failing on valid Python.
//!
//! Recursion is bounded: brackets and indentation are capped by the lexer, and
//! [`MAX_DEPTH`] caps the nesting of everything else (unary chains, conditional
//! expressions, long operator and trailer chains), so no input overflows the stack of a
//! parser, of `Drop`, or of later tree walks.

use lnc_diag::{Diagnostic, Span};

use crate::ast::{
    BinOp, BoolOp, CmpOp, Decorator, Expr, ExprKind, File, FunctionDef, Ident, Param, Stmt, StmtKind, UnaryOp,
};
use crate::lexer::{self, Keyword, Op, StrKind, Token, TokenKind};

/// Decorators that make a `def` a kernel (bare or called with arguments).
pub const JIT_DECORATORS: [&str; 4] = ["triton.jit", "jit", "lnc.jit", "tl.jit"];

/// Deepest nesting of statements and expressions the parser accepts.
pub const MAX_DEPTH: usize = 200;

/// Diagnostics are boxed so that `Result`s stay small on the deep recursive paths.
type PResult<T> = Result<T, Box<Diagnostic>>;

/// Positional and keyword arguments of a call.
type CallArgs = (Vec<Expr>, Vec<(Ident, Expr)>);

static EOF: Token = Token { kind: TokenKind::EndMarker, span: Span { start: 0, end: 0 } };

/// Parses the jit functions of a token stream (from [`lexer::tokenize`] on `src`) and
/// skips everything else at top level.
///
/// Returns the functions that parsed and one diagnostic per function that did not (the
/// parser resumes at the next top-level statement), plus indentation errors found while
/// skipping host code.
pub fn parse_tokens(src: &str, tokens: &[Token]) -> (File, Vec<Diagnostic>) {
    parse_module(src, tokens)
}

/// Stack the parser must have left before it goes one level deeper (`stacker`): between
/// two such checks unoptimised builds spend about 16 KiB (one bracket level).
const RED_ZONE: usize = 128 << 10;

/// Stack `stacker` allocates when less than [`RED_ZONE`] is left.
const STACK_SEGMENT: usize = 2 << 20;

/// Runs `f`, on a new stack segment if this one is nearly used up, so that the depth
/// limits hold whatever thread the parser runs on (test and worker threads have 2 MiB).
/// A thread of its own for every parse cost about 0.2 ms, half the parse of the seed file.
fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, f)
}

fn parse_module(src: &str, tokens: &[Token]) -> (File, Vec<Diagnostic>) {
    let mut p = Parser::new(src, tokens);
    let mut functions = Vec::new();
    let mut diags = Vec::new();
    loop {
        match p.kind() {
            TokenKind::EndMarker => break,
            TokenKind::Newline | TokenKind::Dedent => {
                p.bump();
            }
            TokenKind::Op(Op::At) => {
                let decorators = p.decorators();
                let jit = decorators.iter().any(|(_, jit)| *jit);
                if jit && p.is_kw(Keyword::Def) {
                    let decorators = decorators.into_iter().map(|(d, _)| d).collect();
                    match p.function(decorators) {
                        Ok(f) => functions.push(f),
                        Err(d) => {
                            diags.push(*d);
                            p.recover_top_level();
                        }
                    }
                } else {
                    p.skip_statement(&mut diags);
                }
            }
            _ => p.skip_statement(&mut diags),
        }
    }
    (File { functions }, diags)
}

/// Parses `src` as one expression (a tuple if it has top-level commas). For tests and
/// tools; kernels go through [`crate::parse_file`].
pub fn parse_expression(src: &str) -> Result<Expr, Vec<Diagnostic>> {
    let tokens = lexer::tokenize(src).map_err(|d| vec![d])?;
    grow(|| {
        let mut p = Parser::new(src, &tokens);
        let result = p.star_expressions().and_then(|e| {
            if matches!(p.kind(), TokenKind::Newline) {
                p.bump();
            }
            match p.kind() {
                TokenKind::EndMarker => Ok(e),
                _ => Err(p.expected("end of input")),
            }
        });
        result.map_err(|d| vec![*d])
    })
}

struct Parser<'a> {
    src: &'a str,
    toks: &'a [Token],
    pos: usize,
    /// End of the last consumed token that has text (not `Newline`/`Indent`/`Dedent`):
    /// where the span of the node being built ends.
    prev_end: u32,
    /// Open `Indent`s, for recovery.
    level: usize,
    depth: usize,
}

fn binop(kind: &TokenKind) -> Option<(BinOp, u8)> {
    let TokenKind::Op(op) = kind else { return None };
    Some(match op {
        Op::Pipe => (BinOp::BitOr, 1),
        Op::Caret => (BinOp::BitXor, 2),
        Op::Amp => (BinOp::BitAnd, 3),
        Op::Shl => (BinOp::Shl, 4),
        Op::Shr => (BinOp::Shr, 4),
        Op::Plus => (BinOp::Add, 5),
        Op::Minus => (BinOp::Sub, 5),
        Op::Star => (BinOp::Mul, 6),
        Op::Slash => (BinOp::Div, 6),
        Op::DoubleSlash => (BinOp::FloorDiv, 6),
        Op::Percent => (BinOp::Mod, 6),
        Op::At => (BinOp::MatMul, 6),
        _ => return None,
    })
}

fn aug_op(op: Op) -> Option<BinOp> {
    Some(match op {
        Op::PlusEq => BinOp::Add,
        Op::MinusEq => BinOp::Sub,
        Op::StarEq => BinOp::Mul,
        Op::SlashEq => BinOp::Div,
        Op::DoubleSlashEq => BinOp::FloorDiv,
        Op::PercentEq => BinOp::Mod,
        Op::DoubleStarEq => BinOp::Pow,
        Op::AtEq => BinOp::MatMul,
        Op::AmpEq => BinOp::BitAnd,
        Op::PipeEq => BinOp::BitOr,
        Op::CaretEq => BinOp::BitXor,
        Op::ShlEq => BinOp::Shl,
        Op::ShrEq => BinOp::Shr,
        _ => return None,
    })
}

/// How error messages name an expression that cannot be assigned to.
fn describe(e: &Expr) -> &'static str {
    match &e.kind {
        ExprKind::Call { .. } => "a function call",
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::None => {
            "a literal"
        }
        ExprKind::Compare { .. } => "a comparison",
        ExprKind::IfExp { .. } => "a conditional expression",
        ExprKind::Slice { .. } => "a slice",
        ExprKind::Tuple(_) => "a tuple",
        ExprKind::List(_) => "a list",
        ExprKind::Unsupported(what) => what,
        ExprKind::Name(_)
        | ExprKind::Attribute { .. }
        | ExprKind::Subscript { .. }
        | ExprKind::Binary { .. }
        | ExprKind::Unary { .. }
        | ExprKind::BoolOp { .. } => "an expression",
    }
}

fn check_target(e: &Expr) -> PResult<()> {
    match &e.kind {
        ExprKind::Name(_) | ExprKind::Attribute { .. } | ExprKind::Subscript { .. } => Ok(()),
        ExprKind::Tuple(elts) | ExprKind::List(elts) => elts.iter().try_for_each(check_target),
        ExprKind::Unsupported("starred expression") => Ok(()),
        _ => Err(Box::new(
            Diagnostic::error(format!("cannot assign to {}", describe(e)), e.span, "not assignable")
                .with_help(
                    "the left side of `=` must be a name, an attribute, a subscript \
                 or a tuple of those",
                ),
        )),
    }
}

fn is_single_target(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Name(_) | ExprKind::Attribute { .. } | ExprKind::Subscript { .. })
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, toks: &'a [Token]) -> Self {
        Parser { src, toks, pos: 0, prev_end: 0, level: 0, depth: 0 }
    }

    // ---- token access ----

    fn tok(&self) -> &'a Token {
        let toks: &'a [Token] = self.toks;
        toks.get(self.pos).or(toks.last()).unwrap_or(&EOF)
    }

    fn kind(&self) -> &'a TokenKind {
        &self.tok().kind
    }

    fn nth(&self, n: usize) -> &'a TokenKind {
        let toks: &'a [Token] = self.toks;
        toks.get(self.pos + n).or(toks.last()).map_or(&EOF.kind, |t| &t.kind)
    }

    fn span(&self) -> Span {
        self.tok().span
    }

    fn bump(&mut self) -> &'a Token {
        let t = self.tok();
        match t.kind {
            TokenKind::EndMarker => return t,
            TokenKind::Newline => {}
            TokenKind::Indent => self.level += 1,
            TokenKind::Dedent => self.level = self.level.saturating_sub(1),
            _ => self.prev_end = t.span.end,
        }
        self.pos += 1;
        t
    }

    fn is_op(&self, op: Op) -> bool {
        *self.kind() == TokenKind::Op(op)
    }

    fn is_kw(&self, kw: Keyword) -> bool {
        *self.kind() == TokenKind::Keyword(kw)
    }

    fn eat_op(&mut self, op: Op) -> bool {
        let hit = self.is_op(op);
        if hit {
            self.bump();
        }
        hit
    }

    fn eat_kw(&mut self, kw: Keyword) -> bool {
        let hit = self.is_kw(kw);
        if hit {
            self.bump();
        }
        hit
    }

    /// The span from `start` to the end of the last consumed token.
    fn since(&self, start: Span) -> Span {
        Span { start: start.start, end: self.prev_end.max(start.start) }
    }

    fn text(&self, span: Span) -> &'a str {
        let src: &'a str = self.src;
        src.get(span.range()).unwrap_or("")
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Box::new(
                Diagnostic::error(
                    "code nested too deeply",
                    self.span(),
                    format!("more than {MAX_DEPTH} levels of nesting"),
                )
                .with_help("split it into several statements"),
            ));
        }
        Ok(())
    }

    // ---- diagnostics ----

    fn expected(&self, what: &str) -> Box<Diagnostic> {
        let t = self.tok();
        if t.kind == TokenKind::Indent {
            return Box::new(unexpected_indent(t.span));
        }
        // A missing token at the end of a line is best shown right after the last token,
        // not after a trailing comment or on the next line.
        let span = match t.kind {
            TokenKind::Newline | TokenKind::EndMarker => Span { start: self.prev_end, end: self.prev_end },
            _ => t.span,
        };
        let mut d =
            Diagnostic::error(format!("expected {what}, found {}", t.kind), span, format!("expected {what}"));
        if let TokenKind::Keyword(kw @ (Keyword::Else | Keyword::Elif)) = t.kind {
            d = d.with_help(format!(
                "`{kw}` must be indented exactly like the `if`, `for` or `while` it belongs to"
            ));
        }
        Box::new(d)
    }

    fn expect_op(&mut self, op: Op) -> PResult<Span> {
        let span = self.span();
        if self.eat_op(op) { Ok(span) } else { Err(self.expected(&format!("`{op}`"))) }
    }

    /// Expects the `:` that ends a compound statement's header line.
    fn expect_colon(&mut self, header: &str) -> PResult<()> {
        if self.eat_op(Op::Colon) {
            return Ok(());
        }
        let mut d = self.expected("`:`");
        match self.kind() {
            TokenKind::Op(Op::Assign) => {
                *d = d.with_help("to compare for equality use `==`");
            }
            TokenKind::Newline | TokenKind::EndMarker => {
                *d = d.with_help(format!("add `:` at the end of the {header} line"));
            }
            _ => {}
        }
        Err(d)
    }

    /// Expects the closing bracket of a comma-separated list.
    fn close(&mut self, close: Op, open: Span) -> PResult<()> {
        if self.eat_op(close) {
            return Ok(());
        }
        let mut d = self.expected(&format!("`,` or `{close}`"));
        *d = d.with_label(open, "in the brackets opened here");
        if self.starts_expr() {
            *d = d.with_help("a `,` or an operator may be missing before this");
        }
        Err(d)
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.kind() {
            TokenKind::Name(n) => {
                let span = self.bump().span;
                Ok(Ident { name: n.clone(), span })
            }
            _ => Err(self.expected(what)),
        }
    }

    // ---- top level ----

    /// Consumes `@…` lines at token level. Each decorator comes with whether it makes
    /// the function a kernel.
    fn decorators(&mut self) -> Vec<(Decorator, bool)> {
        let mut out = Vec::new();
        while self.eat_op(Op::At) {
            let start = self.span();
            let mut name = String::new();
            if let TokenKind::Name(n) = self.kind() {
                name.push_str(n);
                self.bump();
                while self.is_op(Op::Dot) {
                    let TokenKind::Name(n) = self.nth(1) else {
                        break;
                    };
                    name.push('.');
                    name.push_str(n);
                    self.bump();
                    self.bump();
                }
            }
            let plain =
                matches!(self.kind(), TokenKind::Newline | TokenKind::EndMarker | TokenKind::Op(Op::LParen));
            while !matches!(
                self.kind(),
                TokenKind::Newline | TokenKind::EndMarker | TokenKind::Indent | TokenKind::Dedent
            ) {
                self.bump();
            }
            let span = self.since(start);
            if matches!(self.kind(), TokenKind::Newline) {
                self.bump();
            }
            if name.is_empty() {
                name = self.text(span).to_string();
            }
            let jit = plain && JIT_DECORATORS.contains(&name.as_str());
            out.push((Decorator { name, span }, jit));
        }
        out
    }

    /// Skips one logical line and the indented block that follows it, checking only what
    /// the tokens show: an indented block must follow exactly the lines that end in `:`.
    fn skip_statement(&mut self, diags: &mut Vec<Diagnostic>) {
        let header = self.span();
        let mut ends_with_colon = false;
        loop {
            match self.kind() {
                TokenKind::Newline => {
                    self.bump();
                    break;
                }
                TokenKind::EndMarker | TokenKind::Indent | TokenKind::Dedent => break,
                k => {
                    ends_with_colon = *k == TokenKind::Op(Op::Colon);
                    self.bump();
                }
            }
        }
        if matches!(self.kind(), TokenKind::Indent) {
            if !ends_with_colon {
                diags.push(unexpected_indent(self.span()));
            }
            self.skip_block(diags);
        } else if ends_with_colon {
            diags.push(
                Diagnostic::error(
                    "expected an indented block",
                    self.span(),
                    "expected an indented line here",
                )
                .with_label(self.since(header), "after this line ending in `:`"),
            );
        }
    }

    fn skip_block(&mut self, diags: &mut Vec<Diagnostic>) {
        self.bump();
        loop {
            match self.kind() {
                TokenKind::Dedent => {
                    self.bump();
                    break;
                }
                TokenKind::EndMarker => break,
                _ => self.skip_statement(diags),
            }
        }
    }

    /// After an error inside a function, moves to the start of the next top-level
    /// logical line.
    fn recover_top_level(&mut self) {
        loop {
            match self.kind() {
                TokenKind::EndMarker => return,
                TokenKind::Newline | TokenKind::Dedent => {
                    self.bump();
                    if self.level == 0 && !matches!(self.kind(), TokenKind::Indent | TokenKind::Dedent) {
                        return;
                    }
                }
                _ => {
                    self.bump();
                }
            }
        }
    }

    fn function(&mut self, decorators: Vec<Decorator>) -> PResult<FunctionDef> {
        self.depth = 0;
        let def = self.bump().span;
        let name = self.ident("a function name")?;
        let open = self.expect_op(Op::LParen)?;
        let params = self.params(open)?;
        if self.eat_op(Op::Arrow) {
            self.test()?;
        }
        self.expect_colon("`def`")?;
        let body = self.block("function definition", def)?;
        Ok(FunctionDef { name, decorators, params, body, span: self.since(def) })
    }

    fn params(&mut self, open: Span) -> PResult<Vec<Param>> {
        let mut params: Vec<Param> = Vec::new();
        let mut keyword_only = false;
        loop {
            if self.eat_op(Op::RParen) {
                break;
            }
            match self.kind() {
                TokenKind::Op(op @ (Op::Star | Op::DoubleStar)) => {
                    let star = self.span();
                    if *op == Op::Star && !matches!(self.nth(1), TokenKind::Name(_)) {
                        // A bare `*` only makes the following parameters keyword-only.
                        self.bump();
                        keyword_only = true;
                    } else {
                        self.bump();
                        let name = self.ident("a parameter name")?;
                        return Err(Box::new(
                            Diagnostic::error(
                                "variadic parameters are not supported in kernels",
                                star.to(name.span),
                                "kernels take a fixed list of parameters",
                            )
                            .with_help("list the parameters one by one"),
                        ));
                    }
                }
                TokenKind::Op(Op::Slash) => {
                    self.bump();
                }
                TokenKind::Name(_) => {
                    let name = self.ident("a parameter name")?;
                    if let Some(prev) = params.iter().find(|p| p.name.name == name.name) {
                        return Err(Box::new(
                            Diagnostic::error(
                                format!("duplicate parameter `{}`", name.name),
                                name.span,
                                "declared again here",
                            )
                            .with_label(prev.name.span, "first declared here"),
                        ));
                    }
                    let annotation = if self.eat_op(Op::Colon) { Some(self.test()?) } else { None };
                    let default = if self.eat_op(Op::Assign) { Some(self.test()?) } else { None };
                    if default.is_none()
                        && !keyword_only
                        && let Some(prev) = params.last().filter(|p| p.default.is_some())
                    {
                        return Err(Box::new(
                            Diagnostic::error(
                                "parameter without a default follows parameter with a default",
                                name.span,
                                "needs a default value",
                            )
                            .with_label(prev.name.span, "this parameter has a default"),
                        ));
                    }
                    let span = self.since(name.span);
                    params.push(Param { name, annotation, default, span });
                }
                _ => return Err(self.expected("a parameter name")),
            }
            if !self.eat_op(Op::Comma) {
                self.close(Op::RParen, open)?;
                break;
            }
        }
        Ok(params)
    }

    /// The body after a header's `:`: an indented block, or simple statements on the
    /// same line.
    fn block(&mut self, what: &str, header: Span) -> PResult<Vec<Stmt>> {
        let mut body = Vec::new();
        if !matches!(self.kind(), TokenKind::Newline) {
            self.simple_statements(&mut body)?;
            return Ok(body);
        }
        self.bump();
        if !matches!(self.kind(), TokenKind::Indent) {
            return Err(Box::new(
                Diagnostic::error(
                    format!("expected an indented block after the {what}"),
                    self.span(),
                    "expected an indented line here",
                )
                .with_label(header, format!("the {what} starts here"))
                .with_help("indent the body, or write `pass` if it is meant to be empty"),
            ));
        }
        self.bump();
        loop {
            match self.kind() {
                TokenKind::Dedent => {
                    self.bump();
                    break;
                }
                TokenKind::EndMarker => break,
                _ => self.statement(&mut body)?,
            }
        }
        Ok(body)
    }

    // ---- statements ----

    fn statement(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        self.enter()?;
        let r = grow(|| self.statement_inner(out));
        self.depth -= 1;
        r
    }

    fn statement_inner(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        let start = self.span();
        let stmt = match self.kind() {
            TokenKind::Keyword(Keyword::If) => self.if_stmt()?,
            TokenKind::Keyword(Keyword::While) => self.while_stmt()?,
            TokenKind::Keyword(Keyword::For) => self.for_stmt()?,
            TokenKind::Keyword(Keyword::Def) => self.skip_compound(start, "def")?,
            TokenKind::Keyword(Keyword::Class) => self.skip_compound(start, "class")?,
            TokenKind::Keyword(Keyword::With) => self.skip_compound(start, "with")?,
            TokenKind::Keyword(Keyword::Try) => self.skip_compound(start, "try")?,
            TokenKind::Keyword(Keyword::Async) => {
                let what = match self.nth(1) {
                    TokenKind::Keyword(Keyword::Def) => "async def",
                    TokenKind::Keyword(Keyword::For) => "async for",
                    TokenKind::Keyword(Keyword::With) => "async with",
                    _ => "async",
                };
                self.skip_compound(start, what)?
            }
            TokenKind::Op(Op::At) => {
                self.decorators();
                let what = match self.kind() {
                    TokenKind::Keyword(Keyword::Class) => "class",
                    TokenKind::Keyword(Keyword::Async) => "async def",
                    _ => "def",
                };
                self.skip_compound(start, what)?
            }
            TokenKind::Keyword(Keyword::Else | Keyword::Elif | Keyword::Except | Keyword::Finally)
            | TokenKind::Indent => return Err(self.expected("a statement")),
            TokenKind::Name(n) if n == "match" && self.looks_like_match() => {
                self.skip_compound(start, "match")?
            }
            _ => return self.simple_statements(out),
        };
        out.push(stmt);
        Ok(())
    }

    /// `match` is a soft keyword: a line starting with it is a `match` statement only if
    /// it ends in `:` and opens a block.
    fn looks_like_match(&self) -> bool {
        let rest = self.toks.get(self.pos..).unwrap_or(&[]);
        let Some(nl) = rest
            .iter()
            .position(|t| matches!(t.kind, TokenKind::Newline | TokenKind::EndMarker | TokenKind::Indent))
        else {
            return false;
        };
        nl >= 2
            && rest.get(nl - 1).is_some_and(|t| t.kind == TokenKind::Op(Op::Colon))
            && rest.get(nl + 1).is_some_and(|t| t.kind == TokenKind::Indent)
    }

    /// Parses over a compound statement kernels do not support (its block and, for
    /// `try`, its `except`/`else`/`finally` clauses).
    fn skip_compound(&mut self, start: Span, what: &'static str) -> PResult<Stmt> {
        let mut diags = Vec::new();
        self.skip_statement(&mut diags);
        if what == "try" {
            while matches!(
                self.kind(),
                TokenKind::Keyword(Keyword::Except | Keyword::Else | Keyword::Finally)
            ) {
                self.skip_statement(&mut diags);
            }
        }
        if let Some(d) = diags.into_iter().next() {
            return Err(Box::new(d));
        }
        Ok(Stmt { kind: StmtKind::Unsupported(what), span: self.since(start) })
    }

    fn simple_statements(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        loop {
            out.push(self.small_statement()?);
            if self.eat_op(Op::Semi) && !matches!(self.kind(), TokenKind::Newline | TokenKind::EndMarker) {
                continue;
            }
            break;
        }
        match self.kind() {
            TokenKind::Newline => {
                self.bump();
                Ok(())
            }
            TokenKind::EndMarker => Ok(()),
            TokenKind::Op(Op::Walrus) => {
                let mut d = self.expected("end of line");
                *d = d.with_help("use `=` to assign in a statement");
                Err(d)
            }
            TokenKind::Keyword(kw @ (Keyword::If | Keyword::For | Keyword::While)) => {
                let mut d = self.expected("end of line");
                *d = d.with_help(format!("a `{kw}` statement must start on a new line"));
                Err(d)
            }
            _ => {
                let mut d = self.expected("end of line");
                if self.starts_expr() {
                    *d = d.with_help("an operator or a `,` may be missing before this");
                }
                Err(d)
            }
        }
    }

    fn skip_small(&mut self) {
        while !matches!(
            self.kind(),
            TokenKind::Newline
                | TokenKind::EndMarker
                | TokenKind::Indent
                | TokenKind::Dedent
                | TokenKind::Op(Op::Semi)
        ) {
            self.bump();
        }
    }

    fn small_statement(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let kind = match self.kind() {
            TokenKind::Keyword(Keyword::Pass) => {
                self.bump();
                StmtKind::Pass
            }
            TokenKind::Keyword(Keyword::Break) => {
                self.bump();
                StmtKind::Break
            }
            TokenKind::Keyword(Keyword::Continue) => {
                self.bump();
                StmtKind::Continue
            }
            TokenKind::Keyword(Keyword::Return) => {
                self.bump();
                let value = if self.starts_expr() { Some(self.star_expressions()?) } else { None };
                StmtKind::Return(value)
            }
            TokenKind::Keyword(Keyword::Assert) => {
                self.bump();
                let test = self.test()?;
                let msg = if self.eat_op(Op::Comma) { Some(self.test()?) } else { None };
                StmtKind::Assert { test, msg }
            }
            TokenKind::Keyword(Keyword::Import | Keyword::From) => {
                self.skip_small();
                StmtKind::Unsupported("import")
            }
            TokenKind::Keyword(Keyword::Global) => {
                self.skip_small();
                StmtKind::Unsupported("global")
            }
            TokenKind::Keyword(Keyword::Nonlocal) => {
                self.skip_small();
                StmtKind::Unsupported("nonlocal")
            }
            TokenKind::Keyword(Keyword::Del) => {
                self.skip_small();
                StmtKind::Unsupported("del")
            }
            TokenKind::Keyword(Keyword::Raise) => {
                self.skip_small();
                StmtKind::Unsupported("raise")
            }
            TokenKind::Name(n)
                if n == "type"
                    && matches!(self.nth(1), TokenKind::Name(_))
                    && matches!(self.nth(2), TokenKind::Op(Op::Assign | Op::LBracket)) =>
            {
                self.skip_small();
                StmtKind::Unsupported("type alias")
            }
            _ => return self.expr_statement(),
        };
        Ok(Stmt { kind, span: self.since(start) })
    }

    fn expr_statement(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let first = self.assign_value()?;
        let aug = match *self.kind() {
            TokenKind::Op(op) => aug_op(op).map(|bin| (op, bin)),
            _ => None,
        };
        if let Some((op, bin)) = aug {
            if !is_single_target(&first) {
                return Err(Box::new(
                    Diagnostic::error(
                        format!("invalid target for augmented assignment `{op}`"),
                        first.span,
                        format!("this is {}", describe(&first)),
                    )
                    .with_help("the target must be a name, an attribute or a subscript"),
                ));
            }
            self.bump();
            let value = self.assign_value()?;
            return Ok(Stmt {
                kind: StmtKind::AugAssign { target: first, op: bin, value },
                span: self.since(start),
            });
        }
        let kind = match self.kind() {
            TokenKind::Op(Op::Colon) => {
                if !is_single_target(&first) {
                    return Err(Box::new(Diagnostic::error(
                        "only a single name, attribute or subscript can be annotated",
                        first.span,
                        format!("this is {}", describe(&first)),
                    )));
                }
                self.bump();
                let annotation = self.test()?;
                let value = if self.eat_op(Op::Assign) { Some(self.assign_value()?) } else { None };
                StmtKind::AnnAssign { target: first, annotation, value }
            }
            TokenKind::Op(Op::Assign) => {
                check_target(&first)?;
                let mut targets = vec![first];
                loop {
                    self.bump();
                    let rhs = self.assign_value()?;
                    if self.is_op(Op::Assign) {
                        check_target(&rhs)?;
                        targets.push(rhs);
                    } else {
                        break StmtKind::Assign { targets, value: rhs };
                    }
                }
            }
            _ => StmtKind::Expr(first),
        };
        Ok(Stmt { kind, span: self.since(start) })
    }

    fn assign_value(&mut self) -> PResult<Expr> {
        if self.is_kw(Keyword::Yield) { self.yield_expr() } else { self.star_expressions() }
    }

    /// `if`/`elif`/`else`, built bottom-up so a long `elif` chain costs no recursion.
    fn if_stmt(&mut self) -> PResult<Stmt> {
        let mut clauses = Vec::new();
        let mut orelse = Vec::new();
        loop {
            let start = self.bump().span;
            let cond = self.named_expr()?;
            self.expect_colon("`if`")?;
            let body = self.block("`if` statement", start)?;
            clauses.push((start, cond, body));
            if self.is_kw(Keyword::Elif) {
                continue;
            }
            if self.is_kw(Keyword::Else) {
                let start = self.bump().span;
                self.expect_colon("`else`")?;
                orelse = self.block("`else` clause", start)?;
            }
            break;
        }
        let end = self.prev_end;
        let mut stmt = None;
        for (start, cond, body) in clauses.into_iter().rev() {
            if let Some(inner) = stmt.take() {
                orelse = vec![inner];
            }
            let span = Span { start: start.start, end: end.max(start.start) };
            stmt =
                Some(Stmt { kind: StmtKind::If { cond, body, orelse: std::mem::take(&mut orelse) }, span });
        }
        stmt.ok_or_else(|| self.expected("`if`"))
    }

    fn else_clause(&mut self) -> PResult<Vec<Stmt>> {
        if !self.is_kw(Keyword::Else) {
            return Ok(Vec::new());
        }
        let start = self.bump().span;
        self.expect_colon("`else`")?;
        self.block("`else` clause", start)
    }

    fn while_stmt(&mut self) -> PResult<Stmt> {
        let start = self.bump().span;
        let cond = self.named_expr()?;
        self.expect_colon("`while`")?;
        let body = self.block("`while` statement", start)?;
        let orelse = self.else_clause()?;
        Ok(Stmt { kind: StmtKind::While { cond, body, orelse }, span: self.since(start) })
    }

    fn for_stmt(&mut self) -> PResult<Stmt> {
        let start = self.bump().span;
        let target = self.target_list()?;
        if !self.eat_kw(Keyword::In) {
            return Err(self.expected("`in`"));
        }
        let iter = self.star_expressions()?;
        self.expect_colon("`for`")?;
        let body = self.block("`for` statement", start)?;
        let orelse = self.else_clause()?;
        Ok(Stmt { kind: StmtKind::For { target, iter, body, orelse }, span: self.since(start) })
    }

    /// A `for` target: `i`, `a, b`, `(a, b)`, parsed at `|` precedence so that `in`
    /// stops it.
    fn target_list(&mut self) -> PResult<Expr> {
        let start = self.span();
        let first = self.star_or(|p| p.binary(1))?;
        let target = if self.is_op(Op::Comma) {
            let mut elts = vec![first];
            while self.eat_op(Op::Comma) {
                if self.is_kw(Keyword::In) {
                    break;
                }
                elts.push(self.star_or(|p| p.binary(1))?);
            }
            Expr { kind: ExprKind::Tuple(elts), span: self.since(start) }
        } else {
            first
        };
        check_target(&target)?;
        Ok(target)
    }

    // ---- expressions ----

    fn starts_expr(&self) -> bool {
        match self.kind() {
            TokenKind::Name(_)
            | TokenKind::Int(_)
            | TokenKind::Float(_)
            | TokenKind::Imaginary
            | TokenKind::Str(_) => true,
            TokenKind::Keyword(k) => matches!(
                k,
                Keyword::True
                    | Keyword::False
                    | Keyword::None
                    | Keyword::Not
                    | Keyword::Lambda
                    | Keyword::Await
            ),
            TokenKind::Op(op) => matches!(
                op,
                Op::LParen
                    | Op::LBracket
                    | Op::LBrace
                    | Op::Minus
                    | Op::Plus
                    | Op::Tilde
                    | Op::Ellipsis
                    | Op::Star
            ),
            TokenKind::Newline | TokenKind::Indent | TokenKind::Dedent | TokenKind::EndMarker => false,
        }
    }

    /// Expressions separated by commas, a tuple if there is a comma (statement level).
    fn star_expressions(&mut self) -> PResult<Expr> {
        let start = self.span();
        let first = self.star_or(Self::test)?;
        if !self.is_op(Op::Comma) {
            return Ok(first);
        }
        let mut elts = vec![first];
        while self.eat_op(Op::Comma) {
            if !self.starts_expr() {
                break;
            }
            elts.push(self.star_or(Self::test)?);
        }
        Ok(Expr { kind: ExprKind::Tuple(elts), span: self.since(start) })
    }

    /// `*operand` (unsupported) or whatever `rest` parses.
    fn star_or(&mut self, rest: fn(&mut Self) -> PResult<Expr>) -> PResult<Expr> {
        if !self.is_op(Op::Star) {
            return rest(self);
        }
        let start = self.bump().span;
        self.binary(1)?;
        Ok(Expr { kind: ExprKind::Unsupported("starred expression"), span: self.since(start) })
    }

    /// An expression where Python allows `name := value`.
    fn named_expr(&mut self) -> PResult<Expr> {
        if matches!(self.kind(), TokenKind::Name(_)) && *self.nth(1) == TokenKind::Op(Op::Walrus) {
            let start = self.bump().span;
            self.bump();
            self.test()?;
            return Ok(Expr { kind: ExprKind::Unsupported("walrus"), span: self.since(start) });
        }
        self.test()
    }

    fn test(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = grow(|| self.test_inner());
        self.depth -= 1;
        r
    }

    fn test_inner(&mut self) -> PResult<Expr> {
        if self.is_kw(Keyword::Lambda) {
            return self.lambda();
        }
        let start = self.span();
        let then = self.or_test()?;
        if !self.eat_kw(Keyword::If) {
            return Ok(then);
        }
        let cond = self.or_test()?;
        if !self.eat_kw(Keyword::Else) {
            let mut d = self.expected("`else`");
            *d = d.with_help("a conditional expression is written `a if condition else b`");
            return Err(d);
        }
        let orelse = self.test()?;
        Ok(Expr {
            kind: ExprKind::IfExp { cond: Box::new(cond), then: Box::new(then), orelse: Box::new(orelse) },
            span: self.since(start),
        })
    }

    /// `lambda params: body`, parsed over: the parameters at token level, the body as an
    /// expression.
    fn lambda(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        let mut depth = 0usize;
        loop {
            match self.kind() {
                TokenKind::Op(Op::LParen | Op::LBracket | Op::LBrace) => depth += 1,
                TokenKind::Op(Op::RParen | Op::RBracket | Op::RBrace) if depth > 0 => depth -= 1,
                TokenKind::Op(Op::Colon) if depth == 0 => break,
                TokenKind::Op(Op::RParen | Op::RBracket | Op::RBrace)
                | TokenKind::Newline
                | TokenKind::EndMarker
                | TokenKind::Indent
                | TokenKind::Dedent => return Err(self.expected("`:` after the lambda parameters")),
                _ => {}
            }
            self.bump();
        }
        self.bump();
        self.test()?;
        Ok(Expr { kind: ExprKind::Unsupported("lambda"), span: self.since(start) })
    }

    fn bool_op(&mut self, kw: Keyword, op: BoolOp, operand: fn(&mut Self) -> PResult<Expr>) -> PResult<Expr> {
        let start = self.span();
        let first = operand(self)?;
        if !self.is_kw(kw) {
            return Ok(first);
        }
        let mut values = vec![first];
        while self.eat_kw(kw) {
            values.push(operand(self)?);
        }
        Ok(Expr { kind: ExprKind::BoolOp { op, values }, span: self.since(start) })
    }

    fn or_test(&mut self) -> PResult<Expr> {
        self.bool_op(Keyword::Or, BoolOp::Or, Self::and_test)
    }

    fn and_test(&mut self) -> PResult<Expr> {
        self.bool_op(Keyword::And, BoolOp::And, Self::not_test)
    }

    fn not_test(&mut self) -> PResult<Expr> {
        if !self.is_kw(Keyword::Not) {
            return self.comparison();
        }
        self.enter()?;
        let start = self.bump().span;
        let operand = grow(|| self.not_test());
        self.depth -= 1;
        let operand = operand?;
        Ok(Expr {
            kind: ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(operand) },
            span: self.since(start),
        })
    }

    fn comparison(&mut self) -> PResult<Expr> {
        let start = self.span();
        let first = self.binary(1)?;
        let mut ops = Vec::new();
        let mut rest = Vec::new();
        loop {
            let op = match self.kind() {
                TokenKind::Op(Op::Lt) => CmpOp::Lt,
                TokenKind::Op(Op::Le) => CmpOp::Le,
                TokenKind::Op(Op::Gt) => CmpOp::Gt,
                TokenKind::Op(Op::Ge) => CmpOp::Ge,
                TokenKind::Op(Op::EqEq) => CmpOp::Eq,
                TokenKind::Op(Op::NotEq) => CmpOp::Ne,
                TokenKind::Keyword(Keyword::In) => CmpOp::In,
                TokenKind::Keyword(Keyword::Not) if *self.nth(1) == TokenKind::Keyword(Keyword::In) => {
                    self.bump();
                    CmpOp::NotIn
                }
                TokenKind::Keyword(Keyword::Is) => {
                    if *self.nth(1) == TokenKind::Keyword(Keyword::Not) {
                        self.bump();
                        CmpOp::IsNot
                    } else {
                        CmpOp::Is
                    }
                }
                _ => break,
            };
            self.bump();
            ops.push(op);
            rest.push(self.binary(1)?);
        }
        if ops.is_empty() {
            return Ok(first);
        }
        Ok(Expr { kind: ExprKind::Compare { first: Box::new(first), ops, rest }, span: self.since(start) })
    }

    /// Binary operators from `|` (precedence 1) to `*`/`/`/`//`/`%`/`@` (6), by
    /// precedence climbing; all are left-associative.
    fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let start = self.span();
        let mut lhs = self.unary()?;
        let mut nested = 0;
        while let Some((op, prec)) = binop(self.kind()) {
            if prec < min_prec {
                break;
            }
            // A long chain builds a deep left spine: count it as nesting.
            self.enter()?;
            nested += 1;
            self.bump();
            let rhs = grow(|| self.binary(prec + 1))?;
            lhs = Expr {
                kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) },
                span: self.since(start),
            };
        }
        self.depth -= nested;
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.kind() {
            TokenKind::Op(Op::Minus) => UnaryOp::Neg,
            TokenKind::Op(Op::Plus) => UnaryOp::Pos,
            TokenKind::Op(Op::Tilde) => UnaryOp::Invert,
            _ => return self.power(),
        };
        self.enter()?;
        let start = self.bump().span;
        let operand = grow(|| self.unary());
        self.depth -= 1;
        let operand = operand?;
        Ok(Expr { kind: ExprKind::Unary { op, operand: Box::new(operand) }, span: self.since(start) })
    }

    /// `primary ** unary`: right-associative, and tighter than a unary operator on its
    /// left (`-x**2` is `-(x**2)`) but not on its right (`2**-1`).
    fn power(&mut self) -> PResult<Expr> {
        let start = self.span();
        let base = self.await_primary()?;
        if !self.eat_op(Op::DoubleStar) {
            return Ok(base);
        }
        self.enter()?;
        let exp = grow(|| self.unary());
        self.depth -= 1;
        let exp = exp?;
        Ok(Expr {
            kind: ExprKind::Binary { op: BinOp::Pow, lhs: Box::new(base), rhs: Box::new(exp) },
            span: self.since(start),
        })
    }

    fn await_primary(&mut self) -> PResult<Expr> {
        if !self.is_kw(Keyword::Await) {
            return self.primary();
        }
        let start = self.bump().span;
        self.primary()?;
        Ok(Expr { kind: ExprKind::Unsupported("await"), span: self.since(start) })
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let mut e = self.atom()?;
        let mut nested = 0;
        loop {
            let kind = match self.kind() {
                TokenKind::Op(Op::Dot) => {
                    self.bump();
                    let attr = self.ident("an attribute name")?;
                    ExprKind::Attribute { value: Box::new(e), attr }
                }
                TokenKind::Op(Op::LParen) => {
                    let open = self.bump().span;
                    let (args, kwargs) = self.call_args(open)?;
                    ExprKind::Call { func: Box::new(e), args, kwargs }
                }
                TokenKind::Op(Op::LBracket) => {
                    let open = self.bump().span;
                    let items = self.subscript_items(open)?;
                    ExprKind::Subscript { value: Box::new(e), items }
                }
                _ => break,
            };
            self.enter()?;
            nested += 1;
            e = Expr { kind, span: self.since(start) };
        }
        self.depth -= nested;
        Ok(e)
    }

    fn call_args(&mut self, open: Span) -> PResult<CallArgs> {
        let mut args = Vec::new();
        let mut kwargs: Vec<(Ident, Expr)> = Vec::new();
        loop {
            if self.eat_op(Op::RParen) {
                break;
            }
            let start = self.span();
            match self.kind() {
                TokenKind::Op(op @ (Op::Star | Op::DoubleStar)) => {
                    let what = if *op == Op::Star { "*args" } else { "**kwargs" };
                    self.bump();
                    self.test()?;
                    args.push(Expr { kind: ExprKind::Unsupported(what), span: self.since(start) });
                }
                TokenKind::Name(n) if *self.nth(1) == TokenKind::Op(Op::Assign) => {
                    let name = Ident { name: n.clone(), span: start };
                    self.bump();
                    self.bump();
                    let value = self.test()?;
                    if let Some((first, _)) = kwargs.iter().find(|(k, _)| k.name == name.name) {
                        return Err(Box::new(
                            Diagnostic::error(
                                format!("keyword argument `{}` repeated", name.name),
                                name.span,
                                "repeated here",
                            )
                            .with_label(first.span, "first given here"),
                        ));
                    }
                    kwargs.push((name, value));
                }
                _ => {
                    let e = self.named_expr()?;
                    if self.is_kw(Keyword::For) || self.is_kw(Keyword::Async) {
                        self.skip_to_close();
                        args.push(Expr {
                            kind: ExprKind::Unsupported("generator expression"),
                            span: self.since(start),
                        });
                    } else {
                        if let Some((k, _)) = kwargs.first() {
                            return Err(Box::new(
                                Diagnostic::error(
                                    "positional argument follows keyword argument",
                                    e.span,
                                    "positional argument",
                                )
                                .with_label(k.span, "keyword argument given before it")
                                .with_help("put the positional arguments first, or name this one too"),
                            ));
                        }
                        args.push(e);
                    }
                }
            }
            if !self.eat_op(Op::Comma) {
                self.close(Op::RParen, open)?;
                break;
            }
        }
        Ok((args, kwargs))
    }

    fn subscript_items(&mut self, open: Span) -> PResult<Vec<Expr>> {
        if self.is_op(Op::RBracket) {
            return Err(self.expected("an index"));
        }
        let mut items = Vec::new();
        loop {
            items.push(self.slice_item()?);
            if self.eat_op(Op::Comma) {
                if self.eat_op(Op::RBracket) {
                    break;
                }
                continue;
            }
            self.close(Op::RBracket, open)?;
            break;
        }
        Ok(items)
    }

    fn slice_item(&mut self) -> PResult<Expr> {
        let start = self.span();
        let lower = if self.is_op(Op::Colon) {
            None
        } else {
            let e = self.star_or(Self::named_expr)?;
            if !self.is_op(Op::Colon) {
                return Ok(e);
            }
            Some(Box::new(e))
        };
        self.bump();
        let bound_ends = |p: &Self| matches!(p.kind(), TokenKind::Op(Op::Colon | Op::Comma | Op::RBracket));
        let upper = if bound_ends(self) { None } else { Some(Box::new(self.test()?)) };
        let step =
            if self.eat_op(Op::Colon) && !bound_ends(self) { Some(Box::new(self.test()?)) } else { None };
        Ok(Expr { kind: ExprKind::Slice { lower, upper, step }, span: self.since(start) })
    }

    /// Moves to the bracket that closes the innermost open one, without consuming it.
    /// The lexer has checked that brackets balance.
    fn skip_to_close(&mut self) {
        let mut depth = 0usize;
        loop {
            match self.kind() {
                TokenKind::Op(Op::LParen | Op::LBracket | Op::LBrace) => depth += 1,
                TokenKind::Op(Op::RParen | Op::RBracket | Op::RBrace) => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                TokenKind::EndMarker | TokenKind::Newline => return,
                _ => {}
            }
            self.bump();
        }
    }

    fn yield_expr(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        if self.eat_kw(Keyword::From) {
            self.test()?;
        } else if self.starts_expr() {
            self.star_expressions()?;
        }
        Ok(Expr { kind: ExprKind::Unsupported("yield"), span: self.since(start) })
    }

    fn atom(&mut self) -> PResult<Expr> {
        let t = self.tok();
        let kind = match &t.kind {
            TokenKind::Name(n) => ExprKind::Name(n.clone()),
            TokenKind::Int(Some(v)) => ExprKind::Int(*v),
            TokenKind::Int(None) => {
                return Err(Box::new(Diagnostic::error(
                    "integer literal is too large",
                    t.span,
                    "does not fit in 64 bits",
                )));
            }
            TokenKind::Float(v) => ExprKind::Float(*v),
            TokenKind::Imaginary => ExprKind::Unsupported("complex literal"),
            TokenKind::Str(_) => return Ok(self.strings()),
            TokenKind::Keyword(Keyword::True) => ExprKind::Bool(true),
            TokenKind::Keyword(Keyword::False) => ExprKind::Bool(false),
            TokenKind::Keyword(Keyword::None) => ExprKind::None,
            TokenKind::Keyword(Keyword::Lambda) => return self.lambda(),
            TokenKind::Op(Op::Ellipsis) => ExprKind::Unsupported("ellipsis"),
            TokenKind::Op(Op::LParen) => return self.paren(),
            TokenKind::Op(Op::LBracket) => return self.list(),
            TokenKind::Op(Op::LBrace) => return Ok(self.brace()),
            _ => return Err(self.expected("an expression")),
        };
        self.bump();
        Ok(Expr { kind, span: t.span })
    }

    /// Adjacent string literals, concatenated.
    fn strings(&mut self) -> Expr {
        let start = self.span();
        let mut value = String::new();
        let mut unsupported = None;
        while let TokenKind::Str(lit) = self.kind() {
            match lit.kind {
                StrKind::Str => value.push_str(&lit.value),
                StrKind::Bytes => {
                    unsupported.get_or_insert("bytes literal");
                }
                StrKind::Format => unsupported = Some("f-string"),
            }
            self.bump();
        }
        let kind = unsupported.map_or(ExprKind::Str(value), ExprKind::Unsupported);
        Expr { kind, span: self.since(start) }
    }

    fn paren(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        if self.eat_op(Op::RParen) {
            return Ok(Expr { kind: ExprKind::Tuple(Vec::new()), span: self.since(open) });
        }
        if self.is_kw(Keyword::Yield) {
            let e = self.yield_expr()?;
            self.close(Op::RParen, open)?;
            return Ok(e);
        }
        let first = self.star_or(Self::named_expr)?;
        if self.is_kw(Keyword::For) || self.is_kw(Keyword::Async) {
            self.skip_to_close();
            self.close(Op::RParen, open)?;
            return Ok(Expr { kind: ExprKind::Unsupported("generator expression"), span: self.since(open) });
        }
        if !self.is_op(Op::Comma) {
            self.close(Op::RParen, open)?;
            return Ok(first);
        }
        let mut elts = vec![first];
        while self.eat_op(Op::Comma) {
            if self.is_op(Op::RParen) {
                break;
            }
            elts.push(self.star_or(Self::named_expr)?);
        }
        self.close(Op::RParen, open)?;
        Ok(Expr { kind: ExprKind::Tuple(elts), span: self.since(open) })
    }

    fn list(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        if self.eat_op(Op::RBracket) {
            return Ok(Expr { kind: ExprKind::List(Vec::new()), span: self.since(open) });
        }
        let first = self.star_or(Self::named_expr)?;
        if self.is_kw(Keyword::For) || self.is_kw(Keyword::Async) {
            self.skip_to_close();
            self.close(Op::RBracket, open)?;
            return Ok(Expr { kind: ExprKind::Unsupported("list comprehension"), span: self.since(open) });
        }
        let mut elts = vec![first];
        while self.eat_op(Op::Comma) {
            if self.is_op(Op::RBracket) {
                break;
            }
            elts.push(self.star_or(Self::named_expr)?);
        }
        self.close(Op::RBracket, open)?;
        Ok(Expr { kind: ExprKind::List(elts), span: self.since(open) })
    }

    /// `{…}`: dicts and sets are all unsupported, so the contents are skipped at token
    /// level and only looked at to name the construct.
    fn brace(&mut self) -> Expr {
        let open = self.bump().span;
        let mut dict = self.is_op(Op::RBrace);
        let mut comprehension = false;
        let mut depth = 0usize;
        loop {
            match self.kind() {
                TokenKind::Op(Op::LParen | Op::LBracket | Op::LBrace) => depth += 1,
                TokenKind::Op(Op::RParen | Op::RBracket | Op::RBrace) => {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                }
                TokenKind::Keyword(Keyword::For) if depth == 0 => comprehension = true,
                TokenKind::Op(Op::Colon | Op::DoubleStar) if depth == 0 && !comprehension => {
                    dict = true;
                }
                TokenKind::EndMarker | TokenKind::Newline => break,
                _ => {}
            }
            self.bump();
        }
        self.eat_op(Op::RBrace);
        let what = match (dict, comprehension) {
            (true, true) => "dict comprehension",
            (false, true) => "set comprehension",
            (true, false) => "dict display",
            (false, false) => "set display",
        };
        Expr { kind: ExprKind::Unsupported(what), span: self.since(open) }
    }
}

fn unexpected_indent(span: Span) -> Diagnostic {
    Diagnostic::error("unexpected indent", span, "this line is indented more than the one above")
        .with_help("only the lines after one ending in `:` start an indented block")
}
