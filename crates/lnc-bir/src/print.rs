//! Text form of the block IR.
//!
//! The form is the one [`crate::parse`] reads back, and the one stage dumps and snapshot
//! tests show. Values are renumbered densely in print order — parameters first, then each
//! instruction's results followed by the arguments and contents of its regions — so
//! removing a dead instruction renumbers only what comes after it, and the entity indices
//! (which depend on construction history) never leak into snapshots.
//!
//! ```text
//! kernel @k(%0 X: *fp32 @slot0, %1 N: i32 @slot1) {
//!   %2 = arange 0, 1024 : <1024xi32>
//!   %3 = splat %1 : <1024xi32>
//!   %4 = cmp lt %2, %3 : <1024xi1>
//!   %5 = splat %0 : <1024x*fp32>
//!   %6 = ptr_add %5, %2 : <1024x*fp32>
//!   %7 = load %6, mask %4 : <1024xfp32>
//!   %8 = reduce sum axis=0 %7 : fp32
//!   %9 = const 0 : i32
//!   %10 = const 1 : i32
//!   %11 = for %9 to %1 step %10 iter(%8) -> (fp32) {
//!     ^(%12: i32, %13: fp32):
//!     %14 = add %13, %13 : fp32
//!     yield %14
//!   }
//!   store %0, %11
//! }
//! ```
//!
//! Floats print with Rust's shortest round-trip form (`1e-5`, `0.5`), non-finite ones as
//! their `f64` bits (`0f7ff0000000000000`), so parsing gives back the same bits.
//!
//! The printer never panics on malformed IR (the verifier prints functions it rejects):
//! unknown values print as `%?N` (N the entity index), and an instruction reached twice is
//! printed once and flagged.

use std::fmt::Write as _;

use cranelift_entity::{EntityRef, SecondaryMap};
use lnc_diag::{SourceFile, Span};

use crate::ir::*;

/// Prints a function in the text form.
pub fn print_function(f: &Function) -> String {
    Printer::new(f, &|_| Vec::new(), None).function()
}

/// Prints a function, ending the line of each instruction that has a source span with a
/// `; line N` comment (1-based line in `source`).
pub fn print_function_with_spans(f: &Function, source: &SourceFile) -> String {
    Printer::new(f, &|_| Vec::new(), Some(source)).function()
}

/// Prints a function with comment lines (`; {text}`) after the instructions `annotate`
/// returns text for; used by the verifier to show errors in place.
pub fn print_function_annotated(f: &Function, annotate: &dyn Fn(Inst) -> Vec<String>) -> String {
    Printer::new(f, annotate, None).function()
}

/// The one-line text of an instruction, as it appears in [`print_function`] (for control
/// flow: the header, without its regions), with values named as in the whole function.
pub fn print_inst_line(f: &Function, inst: Inst) -> String {
    inst_header(f, &Names::new(f), inst)
}

/// The printed name (`%N`) of every value, in the dense print-order numbering.
pub struct Names {
    // `n + 1` for `%n`; 0 means the value is not defined anywhere reachable.
    nums: SecondaryMap<Value, u32>,
}

impl Names {
    /// Numbers the values of `f` in print order.
    pub fn new(f: &Function) -> Names {
        let mut names = Names { nums: SecondaryMap::new() };
        let mut next = 0u32;
        let mut assign = |nums: &mut SecondaryMap<Value, u32>, v: Value| {
            // Writing a SecondaryMap grows it to the index: never do that for a dangling handle.
            if f.values.is_valid(v) && nums[v] == 0 {
                next += 1;
                nums[v] = next;
            }
        };
        for p in &f.params {
            assign(&mut names.nums, p.value);
        }
        // An explicit stack rather than recursion: malformed IR may nest deeply or in a cycle.
        let mut visited: SecondaryMap<Inst, bool> = SecondaryMap::new();
        enum Step<'a> {
            Region(&'a Region),
            Inst(Inst),
        }
        let mut work: Vec<Step> = vec![Step::Region(&f.body)];
        while let Some(step) = work.pop() {
            match step {
                Step::Region(r) => {
                    for &a in &r.args {
                        assign(&mut names.nums, a);
                    }
                    for &i in r.insts.iter().rev() {
                        work.push(Step::Inst(i));
                    }
                }
                Step::Inst(i) => {
                    if !f.insts.is_valid(i) || visited[i] {
                        continue;
                    }
                    visited[i] = true;
                    let data = &f.insts[i];
                    for &r in &data.results {
                        assign(&mut names.nums, r);
                    }
                    for r in data.regions.iter().rev() {
                        work.push(Step::Region(r));
                    }
                }
            }
        }
        names
    }

    /// The printed name of `v`: `%N`, or `%?I` (I the entity index) for a value defined
    /// nowhere in the body.
    pub fn name(&self, v: Value) -> String {
        match self.nums[v] {
            0 => format!("%?{}", v.index()),
            n => format!("%{}", n - 1),
        }
    }

    /// The dense number of `v`, if it is defined in the body.
    pub fn number(&self, v: Value) -> Option<u32> {
        self.nums[v].checked_sub(1)
    }
}

impl BinOp {
    /// Mnemonic in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::IDiv => "idiv",
            BinOp::Rem => "rem",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Pow => "pow",
        }
    }

    /// Every operator.
    pub const ALL: [BinOp; 14] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::IDiv,
        BinOp::Rem,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::Min,
        BinOp::Max,
        BinOp::Pow,
    ];

    /// The operator with this mnemonic.
    pub fn from_name(s: &str) -> Option<BinOp> {
        BinOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

impl CmpOp {
    /// Mnemonic in the text form.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }

    /// Every predicate.
    pub const ALL: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];

    /// The predicate with this mnemonic.
    pub fn from_name(s: &str) -> Option<CmpOp> {
        CmpOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

impl UnOp {
    /// Mnemonic in the text form.
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::Sqrt => "sqrt",
            UnOp::Rsqrt => "rsqrt",
            UnOp::Exp => "exp",
            UnOp::Exp2 => "exp2",
            UnOp::Log => "log",
            UnOp::Log2 => "log2",
            UnOp::Abs => "abs",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Floor => "floor",
            UnOp::Ceil => "ceil",
        }
    }

    /// Every operator.
    pub const ALL: [UnOp; 13] = [
        UnOp::Neg,
        UnOp::Not,
        UnOp::Sqrt,
        UnOp::Rsqrt,
        UnOp::Exp,
        UnOp::Exp2,
        UnOp::Log,
        UnOp::Log2,
        UnOp::Abs,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Floor,
        UnOp::Ceil,
    ];

    /// The operator with this mnemonic.
    pub fn from_name(s: &str) -> Option<UnOp> {
        UnOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

impl ReduceOp {
    /// Mnemonic in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }

    /// The kind with this mnemonic.
    pub fn from_name(s: &str) -> Option<ReduceOp> {
        [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min].into_iter().find(|o| o.name() == s)
    }
}

impl AtomicOp {
    /// Mnemonic in the text form.
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Max => "max",
            AtomicOp::Min => "min",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
            AtomicOp::Xchg => "xchg",
        }
    }

    /// The kind with this mnemonic.
    pub fn from_name(s: &str) -> Option<AtomicOp> {
        [
            AtomicOp::Add,
            AtomicOp::Max,
            AtomicOp::Min,
            AtomicOp::And,
            AtomicOp::Or,
            AtomicOp::Xor,
            AtomicOp::Xchg,
        ]
        .into_iter()
        .find(|o| o.name() == s)
    }
}

impl Opcode {
    /// The mnemonic that starts the instruction's text (`add`, `cmp`, `reduce`, …).
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Opcode::Const(_) => "const",
            Opcode::ProgramId(_) => "program_id",
            Opcode::NumPrograms(_) => "num_programs",
            Opcode::Arange { .. } => "arange",
            Opcode::Splat => "splat",
            Opcode::Broadcast => "broadcast",
            Opcode::ExpandDims(_) => "expand_dims",
            Opcode::Binary(op) => op.name(),
            Opcode::Cmp(_) => "cmp",
            Opcode::Unary(op) => op.name(),
            Opcode::Select => "select",
            Opcode::Fma => "fma",
            Opcode::Cast => "cast",
            Opcode::Bitcast => "bitcast",
            Opcode::PtrAdd => "ptr_add",
            Opcode::Load { .. } => "load",
            Opcode::Store { .. } => "store",
            Opcode::Reduce { .. } => "reduce",
            Opcode::Atomic { .. } => "atomic",
            Opcode::AtomicCas => "atomic_cas",
            Opcode::For => "for",
            Opcode::While => "while",
            Opcode::If => "if",
            Opcode::Yield => "yield",
            Opcode::Condition => "condition",
            Opcode::Assert => "assert",
            Opcode::Print(_) => "print",
        }
    }

    /// True for `for`, `while` and `if`, the instructions that own regions.
    pub fn is_control_flow(&self) -> bool {
        matches!(self, Opcode::For | Opcode::While | Opcode::If)
    }
}

/// Text of a constant: integers in decimal, finite floats in Rust's shortest round-trip
/// form (always with a `.` or an exponent, so the parser can tell them from integers),
/// other floats as `0f` and their 16 hex digits of `f64` bits.
pub fn const_text(c: Const) -> String {
    match c {
        Const::Int(i) => i.to_string(),
        Const::Float(x) if x.is_finite() => format!("{x:?}"),
        Const::Float(x) => format!("0f{:016x}", x.to_bits()),
    }
}

/// True when `s` prints bare (a Python identifier); other names are quoted.
fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(crate) fn name_text(s: &str) -> String {
    if is_ident(s) { s.to_string() } else { format!("{s:?}") }
}

fn type_text(f: &Function, v: Value) -> String {
    match f.values.get(v) {
        Some(d) => d.ty.to_string(),
        None => "?".to_string(),
    }
}

fn list(names: &Names, vs: &[Value]) -> String {
    vs.iter().map(|&v| names.name(v)).collect::<Vec<_>>().join(", ")
}

/// Operands with a keyword before some positions (`mask %3`).
fn labeled(names: &Names, vs: &[Value], labels: &[&str]) -> String {
    vs.iter()
        .enumerate()
        .map(|(k, &v)| {
            let label = labels.get(k).copied().unwrap_or("");
            if label.is_empty() { names.name(v) } else { format!("{label} {}", names.name(v)) }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn inst_header(f: &Function, names: &Names, i: Inst) -> String {
    let Some(data) = f.insts.get(i) else { return format!("<invalid instruction {i}>") };
    let mut s = String::new();
    if !data.results.is_empty() {
        s.push_str(&list(names, &data.results));
        s.push_str(" = ");
    }
    s.push_str(data.opcode.mnemonic());
    let args = &data.args;
    let operands = match data.opcode {
        Opcode::Const(c) => const_text(c),
        Opcode::ProgramId(a) | Opcode::NumPrograms(a) => a.to_string(),
        Opcode::Arange { start, end } => format!("{start}, {end}"),
        Opcode::ExpandDims(axis) => format!("axis={axis} {}", list(names, args)),
        Opcode::Cmp(op) => format!("{} {}", op.name(), list(names, args)),
        Opcode::Load { has_mask, has_other, volatile } => {
            let mut labels = vec![""];
            if has_mask {
                labels.push("mask");
            }
            if has_other {
                labels.push("other");
            }
            let ops = labeled(names, args, &labels);
            if volatile { format!("volatile {ops}") } else { ops }
        }
        Opcode::Store { has_mask, check_only } => {
            let ops = labeled(names, args, &["", "", if has_mask { "mask" } else { "" }]);
            if check_only { format!("check_only {ops}") } else { ops }
        }
        Opcode::Reduce { op, axis, keep_dims } => format!(
            "{} axis={axis}{} {}",
            op.name(),
            if keep_dims { " keep_dims" } else { "" },
            list(names, args)
        ),
        Opcode::Atomic { op, has_mask } => {
            format!("{} {}", op.name(), labeled(names, args, &["", "", if has_mask { "mask" } else { "" }]))
        }
        Opcode::For if args.len() >= 3 => {
            let mut s =
                format!("{} to {} step {}", names.name(args[0]), names.name(args[1]), names.name(args[2]));
            if args.len() > 3 {
                let _ = write!(s, " iter({})", list(names, &args[3..]));
            }
            s
        }
        Opcode::While if !args.is_empty() => format!("iter({})", list(names, args)),
        Opcode::Print(k) => {
            let prefix = match f.strings.get(k as usize) {
                Some(p) => format!("{p:?}"),
                None => format!("<missing string {k}>"),
            };
            if args.is_empty() { prefix } else { format!("{prefix} {}", list(names, args)) }
        }
        _ => list(names, args),
    };
    if !operands.is_empty() {
        s.push(' ');
        s.push_str(&operands);
    }
    let results = &data.results;
    if data.opcode.is_control_flow() || results.len() > 1 {
        if !results.is_empty() {
            let tys: Vec<String> = results.iter().map(|&r| type_text(f, r)).collect();
            let _ = write!(s, " -> ({})", tys.join(", "));
        }
    } else if let [r] = results[..] {
        let _ = write!(s, " : {}", type_text(f, r));
    }
    s
}

struct Printer<'a> {
    f: &'a Function,
    names: Names,
    annotate: &'a dyn Fn(Inst) -> Vec<String>,
    source: Option<&'a SourceFile>,
    visited: SecondaryMap<Inst, bool>,
    out: String,
}

impl<'a> Printer<'a> {
    fn new(
        f: &'a Function,
        annotate: &'a dyn Fn(Inst) -> Vec<String>,
        source: Option<&'a SourceFile>,
    ) -> Printer<'a> {
        Printer {
            f,
            names: Names::new(f),
            annotate,
            source,
            visited: SecondaryMap::new(),
            out: String::new(),
        }
    }

    fn function(mut self) -> String {
        let f = self.f;
        let params: Vec<String> = f
            .params
            .iter()
            .map(|p| {
                let name = if p.name.is_empty() { String::new() } else { format!(" {}", name_text(&p.name)) };
                format!("{}{name}: {} @slot{}", self.names.name(p.value), type_text(f, p.value), p.slot)
            })
            .collect();
        let _ = writeln!(self.out, "kernel @{}({}) {{", name_text(&f.name), params.join(", "));
        self.region_contents(&f.body, 1);
        self.out.push_str("}\n");
        self.out
    }

    fn region_contents(&mut self, r: &Region, depth: usize) {
        let indent = "  ".repeat(depth);
        if !r.args.is_empty() {
            let args: Vec<String> =
                r.args.iter().map(|&a| format!("{}: {}", self.names.name(a), type_text(self.f, a))).collect();
            let _ = writeln!(self.out, "{indent}^({}):", args.join(", "));
        }
        for &i in &r.insts {
            self.inst(i, depth);
        }
    }

    fn inst(&mut self, i: Inst, depth: usize) {
        let indent = "  ".repeat(depth);
        let f = self.f;
        if !f.insts.is_valid(i) {
            let _ = writeln!(self.out, "{indent}; <invalid instruction {i}>");
            return;
        }
        if self.visited[i] {
            let _ =
                writeln!(self.out, "{indent}; <instruction {i} again: {}>", inst_header(f, &self.names, i));
            for note in (self.annotate)(i) {
                let _ = writeln!(self.out, "{indent}; {note}");
            }
            return;
        }
        self.visited[i] = true;
        let data = &f.insts[i];
        let mut line = format!("{indent}{}", inst_header(f, &self.names, i));
        if !data.regions.is_empty() {
            line.push_str(" {");
        }
        if let Some(src) = self.source {
            let span = f.spans[i];
            if span != Span::DUMMY {
                let (l, _) = src.line_col(span.start);
                let _ = write!(line, "  ; line {l}");
            }
        }
        self.out.push_str(&line);
        self.out.push('\n');
        for note in (self.annotate)(i) {
            let _ = writeln!(self.out, "{indent}; {note}");
        }
        for (k, r) in data.regions.iter().enumerate() {
            if k > 0 {
                let sep = match data.opcode {
                    Opcode::If => " else",
                    Opcode::While => " do",
                    _ => "",
                };
                let _ = writeln!(self.out, "{indent}}}{sep} {{");
            }
            self.region_contents(r, depth + 1);
        }
        if !data.regions.is_empty() {
            let _ = writeln!(self.out, "{indent}}}");
        }
    }
}
