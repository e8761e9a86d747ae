//! Parser unit tests: precedence, statements, unsupported constructs, limits.

use lnc_diag::SourceFile;
use lnc_syntax::ast::{Expr, ExprKind, FunctionDef, Stmt, StmtKind};
use lnc_syntax::parser::parse_expression;

/// Fully parenthesized prefix form of an expression.
fn sexp(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v:?}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bool(b) => if *b { "True" } else { "False" }.into(),
        ExprKind::None => "None".into(),
        ExprKind::Attribute { value, attr } => format!("{}.{}", sexp(value), attr.name),
        ExprKind::Call { func, args, kwargs } => {
            let mut parts: Vec<String> = args.iter().map(sexp).collect();
            parts.extend(kwargs.iter().map(|(k, v)| format!("{}={}", k.name, sexp(v))));
            format!("{}({})", sexp(func), parts.join(", "))
        }
        ExprKind::Subscript { value, items } => {
            let items: Vec<String> = items.iter().map(sexp).collect();
            format!("{}[{}]", sexp(value), items.join(", "))
        }
        ExprKind::Slice { lower, upper, step } => {
            let part = |p: &Option<Box<Expr>>| p.as_deref().map(sexp).unwrap_or_default();
            format!("{}:{}:{}", part(lower), part(upper), part(step))
        }
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.as_str(), sexp(lhs), sexp(rhs))
        }
        ExprKind::Unary { op, operand } => format!("({} {})", op.as_str(), sexp(operand)),
        ExprKind::Compare { first, ops, rest } => {
            let mut s = format!("(cmp {}", sexp(first));
            for (op, r) in ops.iter().zip(rest) {
                s.push_str(&format!(" {} {}", op.as_str(), sexp(r)));
            }
            s + ")"
        }
        ExprKind::BoolOp { op, values } => {
            let v: Vec<String> = values.iter().map(sexp).collect();
            format!("({} {})", op.as_str(), v.join(" "))
        }
        ExprKind::IfExp { cond, then, orelse } => {
            format!("(if {} {} {})", sexp(cond), sexp(then), sexp(orelse))
        }
        ExprKind::Tuple(elts) => {
            let v: Vec<String> = elts.iter().map(sexp).collect();
            format!("(tuple {})", v.join(" "))
        }
        ExprKind::List(elts) => {
            let v: Vec<String> = elts.iter().map(sexp).collect();
            format!("[{}]", v.join(" "))
        }
        ExprKind::Unsupported(what) => format!("<{what}>"),
    }
}

fn expr(src: &str) -> String {
    match parse_expression(src) {
        Ok(e) => sexp(&e),
        Err(d) => panic!("{src}: {}", lnc_diag::render_all(&d, &SourceFile::new("e.py", src))),
    }
}

fn kernel(body: &str) -> FunctionDef {
    let src = format!("@triton.jit\ndef k(x):\n{body}");
    let file = SourceFile::new("k.py", src);
    match lnc_syntax::parse_file(&file) {
        Ok(mut f) => f.functions.remove(0),
        Err(d) => panic!("{}", lnc_diag::render_all(&d, &file)),
    }
}

fn kernel_error(body: &str) -> String {
    let src = format!("@triton.jit\ndef k(x):\n{body}");
    match lnc_syntax::parse_file(&SourceFile::new("k.py", src)) {
        Ok(f) => panic!("parsed: {f:?}"),
        Err(d) => d[0].message.clone(),
    }
}

#[test]
fn arithmetic_precedence() {
    assert_eq!(expr("a + b * c"), "(+ a (* b c))");
    assert_eq!(expr("a - b - c"), "(- (- a b) c)");
    assert_eq!(expr("a * b // c % d @ e"), "(@ (% (// (* a b) c) d) e)");
    assert_eq!(expr("a << b + c"), "(<< a (+ b c))");
    assert_eq!(expr("a | b ^ c & d >> e"), "(| a (^ b (& c (>> d e))))");
    assert_eq!(expr("a & b | c"), "(| (& a b) c)");
}

#[test]
fn power_and_unary() {
    assert_eq!(expr("-x**2"), "(- (** x 2))");
    assert_eq!(expr("2**3**2"), "(** 2 (** 3 2))");
    assert_eq!(expr("2**-1"), "(** 2 (- 1))");
    assert_eq!(expr("-a * b"), "(* (- a) b)");
    assert_eq!(expr("~-+a"), "(~ (- (+ a)))");
    assert_eq!(expr("a.b**c.d"), "(** a.b c.d)");
}

#[test]
fn comparisons_and_boolean_operators() {
    assert_eq!(expr("a < b <= c"), "(cmp a < b <= c)");
    assert_eq!(expr("a is not b"), "(cmp a is not b)");
    assert_eq!(expr("a not in b"), "(cmp a not in b)");
    assert_eq!(expr("a in b == c != d > e >= f is g"), "(cmp a in b == c != d > e >= f is g)");
    assert_eq!(expr("not a == b"), "(not (cmp a == b))");
    assert_eq!(expr("a or b and not c or d"), "(or a (and b (not c)) d)");
    assert_eq!(expr("a + 1 < b & c"), "(cmp (+ a 1) < (& b c))");
}

#[test]
fn conditional_and_lambda() {
    assert_eq!(expr("a if b else c if d else e"), "(if b a (if d c e))");
    assert_eq!(expr("a or b if c and d else e"), "(if (and c d) (or a b) e)");
    assert_eq!(expr("lambda x, y=1: x + y"), "<lambda>");
    assert_eq!(expr("f(lambda: 0, key=lambda d: d[1:2])"), "f(<lambda>, key=<lambda>)");
}

#[test]
fn primaries() {
    assert_eq!(
        expr("tl.load(X + cols, mask=mask, other=0).to(tl.float32)"),
        "tl.load((+ X cols), mask=mask, other=0).to(tl.float32)"
    );
    assert_eq!(expr("x[:, None]"), "x[::, None]");
    assert_eq!(expr("x[None, :]"), "x[None, ::]");
    assert_eq!(expr("x[1:2, ::3, a:]"), "x[1:2:, ::3, a::]");
    assert_eq!(expr("x[i,]"), "x[i]");
    assert_eq!(expr("x[0][1].y()"), "x[0][1].y()");
    assert_eq!(expr("f(a,)(b)"), "f(a)(b)");
}

#[test]
fn literals_and_displays() {
    assert_eq!(expr("'a' \"b\" '''c'''"), "\"abc\"");
    assert_eq!(expr("1e-5"), "1e-5");
    assert_eq!(expr("True, False, None"), "(tuple True False None)");
    assert_eq!(expr("()"), "(tuple )");
    assert_eq!(expr("(a,)"), "(tuple a)");
    assert_eq!(expr("(a)"), "a");
    assert_eq!(expr("[a, b,]"), "[a b]");
    assert_eq!(expr("0x10 + 0o7 + 0b1"), "(+ (+ 16 7) 1)");
}

#[test]
fn unsupported_expressions_are_named() {
    assert_eq!(expr("[i for i in x if i]"), "<list comprehension>");
    assert_eq!(expr("f(i for i in x)"), "f(<generator expression>)");
    assert_eq!(expr("(i for i in x)"), "<generator expression>");
    assert_eq!(expr("{}"), "<dict display>");
    assert_eq!(expr("{'a': 1, **b}"), "<dict display>");
    assert_eq!(expr("{1, 2}"), "<set display>");
    assert_eq!(expr("{k: v for k, v in x}"), "<dict comprehension>");
    assert_eq!(expr("{k for k in {1: 2}}"), "<set comprehension>");
    assert_eq!(expr("f'{x}' 'y'"), "<f-string>");
    assert_eq!(expr("b'x'"), "<bytes literal>");
    assert_eq!(expr("1j + 1"), "(+ <complex literal> 1)");
    assert_eq!(expr("x[...]"), "x[<ellipsis>]");
    assert_eq!(expr("f(*a, **k)"), "f(<*args>, <**kwargs>)");
    assert_eq!(expr("a, *b"), "(tuple a <starred expression>)");
    assert_eq!(expr("(y := 3)"), "<walrus>");
    assert_eq!(expr("await x"), "<await>");
    assert_eq!(expr("(yield x)"), "<yield>");
}

#[test]
fn unsupported_spans_cover_the_construct() {
    let src = "f(1, lambda a: a + 1, x)";
    let e = parse_expression(src).unwrap();
    let ExprKind::Call { args, .. } = &e.kind else { panic!() };
    assert_eq!(&src[args[1].span.range()], "lambda a: a + 1");
}

fn stmt_kinds(body: &[Stmt]) -> Vec<String> {
    body.iter()
        .map(|s| match &s.kind {
            StmtKind::Expr(_) => "expr".to_string(),
            StmtKind::Assign { targets, .. } => format!("assign{}", targets.len()),
            StmtKind::AugAssign { op, .. } => format!("aug{}", op.as_str()),
            StmtKind::AnnAssign { .. } => "ann".into(),
            StmtKind::If { orelse, .. } => format!("if/{}", stmt_kinds(orelse).join(",")),
            StmtKind::For { orelse, .. } => format!("for/{}", orelse.len()),
            StmtKind::While { orelse, .. } => format!("while/{}", orelse.len()),
            StmtKind::Pass => "pass".into(),
            StmtKind::Return(v) => format!("return{}", v.is_some() as u8),
            StmtKind::Break => "break".into(),
            StmtKind::Continue => "continue".into(),
            StmtKind::Assert { msg, .. } => format!("assert{}", msg.is_some() as u8),
            StmtKind::Unsupported(w) => format!("<{w}>"),
        })
        .collect()
}

#[test]
fn statements() {
    let f = kernel(
        "    \"\"\"doc\"\"\"\n    a = b = 1\n    a, b = b, a\n    x += 1; y **= 2; z >>= 1; w //= 3\n    \
         n: tl.constexpr = 3\n    m: int\n    assert x, 'msg'\n    assert x\n    \
         if a: pass\n    elif b:\n        return\n    else:\n        return a, b\n    \
         for i in range(3):\n        continue\n    else:\n        pass\n    \
         while x:\n        break\n    tl.store(p, v)\n",
    );
    assert_eq!(
        stmt_kinds(&f.body),
        [
            "expr",
            "assign2",
            "assign1",
            "aug+",
            "aug**",
            "aug>>",
            "aug//",
            "ann",
            "ann",
            "assert1",
            "assert0",
            "if/if/return1",
            "for/1",
            "while/0",
            "expr"
        ]
    );
    let StmtKind::Assign { targets, value } = &f.body[2].kind else { panic!() };
    assert_eq!((sexp(&targets[0]), sexp(value)), ("(tuple a b)".into(), "(tuple b a)".into()));
}

#[test]
fn elif_chain_nests_in_orelse() {
    let f = kernel(
        "    if a:\n        x = 1\n    elif b:\n        x = 2\n    elif c:\n        x = 3\n    else:\n        x = 4\n",
    );
    assert_eq!(stmt_kinds(&f.body), ["if/if/if/assign1"]);
}

#[test]
fn unsupported_statements_are_parsed_over() {
    let f = kernel(
        "    import math\n    from a import (b,\n        c)\n    global g\n    nonlocal n\n    del x\n    \
         raise ValueError('x')\n    def inner(y):\n        return {y: 1}\n    \
         @deco(1)\n    def decorated():\n        pass\n    class C:\n        def m(self): pass\n    \
         with open(f) as g:\n        pass\n    try:\n        pass\n    except E as e:\n        pass\n    \
         else:\n        pass\n    finally:\n        pass\n    async def co():\n        await x\n    \
         match x:\n        case 1:\n            pass\n    type T = int\n    x = 1\n",
    );
    assert_eq!(
        stmt_kinds(&f.body),
        [
            "<import>",
            "<import>",
            "<global>",
            "<nonlocal>",
            "<del>",
            "<raise>",
            "<def>",
            "<def>",
            "<class>",
            "<with>",
            "<try>",
            "<async def>",
            "<match>",
            "<type alias>",
            "assign1"
        ]
    );
    // `match` stays an ordinary name elsewhere.
    let f = kernel("    match = 1\n    match(x)\n");
    assert_eq!(stmt_kinds(&f.body), ["assign1", "expr"]);
}

#[test]
fn one_line_bodies_and_semicolons() {
    let src = "@jit\ndef k(x): return x\n@jit()\ndef j(x): a = 1; b = 2;\n";
    let f = lnc_syntax::parse_file(&SourceFile::new("k.py", src)).unwrap();
    assert_eq!(stmt_kinds(&f.functions[0].body), ["return1"]);
    assert_eq!(stmt_kinds(&f.functions[1].body), ["assign1", "assign1"]);
}

#[test]
fn parameters() {
    let src =
        "@triton.jit\ndef k(X, N: int, BLOCK: tl.constexpr = 128, /, *, flag=True) -> None:\n    pass\n";
    let f = lnc_syntax::parse_file(&SourceFile::new("k.py", src)).unwrap();
    let p = &f.functions[0].params;
    let names: Vec<&str> = p.iter().map(|p| p.name.name.as_str()).collect();
    assert_eq!(names, ["X", "N", "BLOCK", "flag"]);
    assert_eq!(p[2].default.as_ref().map(sexp).as_deref(), Some("128"));
    assert_eq!(p[2].annotation.as_ref().map(sexp).as_deref(), Some("tl.constexpr"));
    assert_eq!(&src[p[2].span.range()], "BLOCK: tl.constexpr = 128");
}

#[test]
fn parameter_errors() {
    let err = |sig: &str| {
        let src = format!("@jit\ndef k({sig}):\n    pass\n");
        lnc_syntax::parse_file(&SourceFile::new("k.py", src)).unwrap_err()[0].message.clone()
    };
    assert_eq!(err("*args"), "variadic parameters are not supported in kernels");
    assert_eq!(err("a, **kw"), "variadic parameters are not supported in kernels");
    assert_eq!(err("a, a"), "duplicate parameter `a`");
    assert_eq!(err("a=1, b"), "parameter without a default follows parameter with a default");
    assert_eq!(err("a b"), "expected `,` or `)`, found `b`");
}

#[test]
fn statement_errors() {
    assert_eq!(kernel_error("    f() = 1\n"), "cannot assign to a function call");
    assert_eq!(kernel_error("    a + 1 = 2\n"), "cannot assign to an expression");
    assert_eq!(kernel_error("    a, b += 1\n"), "invalid target for augmented assignment `+=`");
    assert_eq!(
        kernel_error("    a, b: int\n"),
        "only a single name, attribute or subscript can be annotated"
    );
    assert_eq!(kernel_error("    x = a if b\n"), "expected `else`, found end of line");
    assert_eq!(kernel_error("    f(a=1, b)\n"), "positional argument follows keyword argument");
    assert_eq!(kernel_error("    f(a=1, a=2)\n"), "keyword argument `a` repeated");
    assert_eq!(kernel_error("    x = 1 2\n"), "expected end of line, found an integer literal");
    assert_eq!(kernel_error("    if x == 1\n        pass\n"), "expected `:`, found end of line");
    assert_eq!(kernel_error("    for i range(3):\n        pass\n"), "expected `in`, found `range`");
    assert_eq!(kernel_error("    x = 18446744073709551616\n"), "integer literal is too large");
    assert_eq!(kernel_error("    else:\n        pass\n"), "expected a statement, found keyword `else`");
    assert_eq!(kernel_error("    x = y[]\n"), "expected an index, found `]`");
}

#[test]
fn one_error_per_function_and_recovery() {
    let src = "@jit\ndef a(x):\n    x = = 1\n    y = 2\n\nz = {1: 2}\n\n@jit\ndef b(x):\n    if x:\n        return (\n            x +)\n\n@jit\ndef c(x):\n    return x\n";
    let file = SourceFile::new("k.py", src);
    let tokens = lnc_syntax::lexer::tokenize(src).unwrap();
    let (parsed, diags) = lnc_syntax::parser::parse_tokens(src, &tokens);
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, ["expected an expression, found `=`", "expected an expression, found `)`"]);
    assert_eq!(parsed.functions.len(), 1);
    assert_eq!(parsed.functions[0].name.name, "c");
    assert_eq!(lnc_syntax::parse_file(&file).unwrap_err().len(), 2);
}

#[test]
fn nesting_is_capped_without_overflowing_the_stack() {
    // Each of these would recurse (or build a tree) once per repetition.
    let cases = [
        format!("    x = {}1\n", "-".repeat(100_000)),
        format!("    x = {}1\n", "not ".repeat(100_000)),
        format!("    x = 1{}\n", " + 1".repeat(100_000)),
        format!("    x = a{}\n", ".b".repeat(100_000)),
        format!("    x = a{}\n", "[0]".repeat(100_000)),
        format!("    x = 2{}\n", "**2".repeat(100_000)),
        format!("    x = {}1\n", "a if b else ".repeat(100_000)),
        format!("    x = {}1\n", "lambda: ".repeat(100_000)),
        format!("    x = 1{}\n", " if a else 1".repeat(100_000)),
    ];
    for body in &cases {
        assert_eq!(kernel_error(body), "code nested too deeply");
    }
    // Deep brackets parse up to the limit, whatever the stack of the calling thread
    // (test threads have 2 MiB).
    let deep = format!("    x = {}1{}\n", "(".repeat(190), ")".repeat(190));
    kernel(&deep);
    let deep = format!("    x = {}1{}\n", "f(".repeat(95), ")".repeat(95));
    kernel(&deep);
    let deep = format!("    x = {}1{}\n", "(".repeat(199), ")".repeat(199));
    assert_eq!(kernel_error(&deep), "code nested too deeply");
    // Long but shallow is fine: `elif` chains build no recursion.
    let mut body = String::from("    if a:\n        pass\n");
    for _ in 0..10_000 {
        body.push_str("    elif a:\n        pass\n");
    }
    kernel(&body);
}

#[test]
fn unsupported_diagnostics_list_every_construct() {
    let f = kernel(
        "    y = [i for i in x]\n    with a:\n        pass\n    for i in x:\n        pass\n    else:\n        pass\n",
    );
    let messages: Vec<String> =
        lnc_syntax::unsupported::unsupported_diagnostics(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        messages,
        [
            "list comprehensions are not supported in kernels",
            "`with` statements are not supported in kernels",
            "an `else` clause on a `for` loop is not supported in kernels",
        ]
    );
}
