//! The text form of the loop IR, for stage dumps, snapshots and verifier reports.
//!
//! ```text
//! kernel @copy(X: *fp32 @slot0, Y: *fp32 @slot1)
//!   scratch s0: fp32[1024] at byte 0
//!   site 0: arg 0 (X) span 10..22
//! {
//!   %0 = arg 0 : *fp32
//!   %4 = for %5 = %1 to %2 step %3 iter(%6 = %7) -> fp32x4 {
//!     %8 = load.contig %0[%5] mask %9 other %10 : fp32x4  ; site 0
//!     scratch_store s0[%5], %8
//!     yield %11
//!   }
//! }
//! ```
//!
//! Values are renumbered densely in the order their definitions are printed (results of
//! an instruction before the arguments of its regions), so removing an instruction does
//! not renumber what comes before it. Printing never panics: a broken function (an
//! instruction listed twice, a value defined nowhere) prints with markers such as
//! `%?17` (a value defined nowhere, by entity index) so the verifier can show it.

use std::fmt::Write;

use cranelift_entity::{EntityRef, SecondaryMap};

use crate::ir::*;

/// Prints `f` in the text form.
pub fn print_function(f: &Function) -> String {
    print_function_annotated(f, &|_| Vec::new())
}

/// Prints `f` with the lines `annotate(inst)` returns as `; ` comments under each
/// instruction (the verifier marks its errors this way).
pub fn print_function_annotated(f: &Function, annotate: &dyn Fn(Inst) -> Vec<String>) -> String {
    Printer { f, names: Names::new(f), annotate, visited: SecondaryMap::new(), out: String::new() }.function()
}

/// The one-line text of an instruction (without its regions), numbered as in the whole
/// function's listing.
pub fn print_inst(f: &Function, inst: Inst) -> String {
    inst_header(f, &Names::new(f), inst)
}

/// Dense names of the values of a function.
pub struct Names {
    nums: SecondaryMap<Value, u32>,
}

impl Names {
    /// Numbers every value defined in `f`'s body in printing order.
    pub fn new(f: &Function) -> Names {
        let mut nums: SecondaryMap<Value, u32> = SecondaryMap::new();
        let mut next = 0;
        let mut assign = |nums: &mut SecondaryMap<Value, u32>, v: Value| {
            if nums[v] == 0 {
                next += 1;
                nums[v] = next;
            }
        };
        // An explicit stack rather than recursion: broken IR may nest in a cycle.
        enum Step<'a> {
            Region(&'a Region),
            Inst(Inst),
        }
        let mut visited: SecondaryMap<Inst, bool> = SecondaryMap::new();
        let mut work = vec![Step::Region(&f.body)];
        while let Some(step) = work.pop() {
            match step {
                Step::Region(r) => {
                    for &a in &r.args {
                        assign(&mut nums, a);
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
                        assign(&mut nums, r);
                    }
                    for r in data.regions.iter().rev() {
                        work.push(Step::Region(r));
                    }
                }
            }
        }
        Names { nums }
    }

    /// `%N`, or `%?I` (I the entity index) for a value defined nowhere in the body.
    pub fn name(&self, v: Value) -> String {
        match self.nums[v] {
            0 => format!("%?{}", v.index()),
            n => format!("%{}", n - 1),
        }
    }
}

fn const_text(c: Const) -> String {
    match c {
        Const::Int(i) => i.to_string(),
        Const::Float(x) => format!("{x:?}"),
    }
}

fn ty_text(f: &Function, v: Value) -> String {
    match f.values.get(v) {
        Some(d) => d.ty.to_string(),
        None => "?".to_string(),
    }
}

fn list(names: &Names, vs: &[Value]) -> String {
    vs.iter().map(|&v| names.name(v)).collect::<Vec<_>>().join(", ")
}

/// `%p[%o]` followed by the remaining operands, with `mask`/`other` keywords.
fn access(names: &Names, args: &[Value], middle: usize, has_mask: bool, has_other: bool) -> String {
    let get = |k: usize| args.get(k).map_or("<missing>".to_string(), |&v| names.name(v));
    let mut s = format!("{}[{}]", get(0), get(1));
    for k in 2..2 + middle {
        let _ = write!(s, ", {}", get(k));
    }
    let mut k = 2 + middle;
    if has_mask {
        let _ = write!(s, " mask {}", get(k));
        k += 1;
    }
    if has_other {
        let _ = write!(s, " other {}", get(k));
        k += 1;
    }
    for &extra in args.iter().skip(k) {
        let _ = write!(s, " <extra {}>", names.name(extra));
    }
    s
}

fn inst_header(f: &Function, names: &Names, i: Inst) -> String {
    let Some(data) = f.insts.get(i) else {
        return format!("<invalid instruction {i}>");
    };
    let args = &data.args;
    let mut s = String::new();
    if !data.results.is_empty() {
        s.push_str(&list(names, &data.results));
        s.push_str(" = ");
    }
    let mut site = None;
    match data.opcode {
        Opcode::Arg(n) => {
            let name = f.arg(n).map_or(String::new(), |a| format!("  ; {}", a.name));
            let _ = write!(s, "arg {n}");
            site = Some(name);
        }
        Opcode::Const(c) => {
            let _ = write!(s, "const {}", const_text(c));
        }
        Opcode::ProgramId(a) | Opcode::NumPrograms(a) => {
            let _ = write!(s, "{} {a}", data.opcode.mnemonic());
        }
        Opcode::Cmp(op) => {
            let _ = write!(s, "cmp {} {}", op.name(), list(names, args));
        }
        Opcode::Load { addr, has_mask, has_other, site: k, volatile } => {
            let v = if volatile { ".volatile" } else { "" };
            let _ = write!(s, "load.{}{v} {}", addr.name(), access(names, args, 0, has_mask, has_other));
            site = Some(format!("  ; site {k}"));
        }
        Opcode::Store { addr, has_mask, site: k, stream, check_only } => {
            let n = args.len().min(3 + has_mask as usize);
            let c = if check_only { ".check_only" } else { "" };
            let _ = write!(s, "store.{}{c} {}", addr.name(), access(names, &args[..n], 1, has_mask, false));
            if stream {
                let ok = args.get(n).map_or("<missing>".to_string(), |&v| names.name(v));
                let _ = write!(s, " stream {ok}");
            }
            site = Some(format!("  ; site {k}"));
        }
        Opcode::Atomic { op, addr, has_mask, site: k } => {
            let _ =
                write!(s, "atomic.{}.{} {}", op.name(), addr.name(), access(names, args, 1, has_mask, false));
            site = Some(format!("  ; site {k}"));
        }
        Opcode::AtomicCas { addr, site: k } => {
            let _ = write!(s, "atomic_cas.{} {}", addr.name(), access(names, args, 2, false, false));
            site = Some(format!("  ; site {k}"));
        }
        Opcode::Prefetch { write } => {
            let name = |k: usize| args.get(k).map_or("<missing>".to_string(), |&v| names.name(v));
            let _ = write!(s, "prefetch{} {}[{}]", if write { ".write" } else { "" }, name(0), name(1));
        }
        Opcode::ScratchLoad(slot) => {
            let _ = write!(s, "scratch_load s{slot}[{}]", list(names, args));
        }
        Opcode::ScratchStore(slot) => {
            let index = args.first().map_or("<missing>".to_string(), |&v| names.name(v));
            let _ = write!(s, "scratch_store s{slot}[{index}]");
            if args.len() > 1 {
                let _ = write!(s, ", {}", list(names, &args[1..]));
            }
        }
        Opcode::RowLoad { slot, site: k, .. } | Opcode::RowStore { slot, site: k, .. } => {
            let m = match data.opcode {
                Opcode::RowLoad { once: Some(flag), .. } => format!("row_load.once({flag})"),
                op => op.mnemonic().to_string(),
            };
            match args[..] {
                [p, o, n] | [p, o, n, _] => {
                    let (p, o, n) = (names.name(p), names.name(o), names.name(n));
                    if matches!(data.opcode, Opcode::RowLoad { .. }) {
                        let _ = write!(s, "{m} s{slot}[0..{n}] <- {p}[{o}..]");
                    } else {
                        let _ = write!(s, "{m} {p}[{o}..] <- s{slot}[0..{n}]");
                    }
                    if let (Opcode::RowStore { stream: true, .. }, Some(&ok)) = (data.opcode, args.get(3)) {
                        let _ = write!(s, " stream {}", names.name(ok));
                    }
                }
                _ => {
                    let _ = write!(s, "{m} s{slot} <malformed> {}", list(names, args));
                }
            }
            site = Some(format!("  ; site {k}"));
        }
        Opcode::ReduceLanes(op) => {
            let _ = write!(s, "reduce_lanes.{} {}", op.name(), list(names, args));
        }
        Opcode::For => {
            s.push_str("for");
            let iv = data.regions.first().and_then(|r| r.args.first());
            if let (Some(&iv), [lb, ub, step, ..]) = (iv, &args[..]) {
                let _ = write!(
                    s,
                    " {} = {} to {} step {}",
                    names.name(iv),
                    names.name(*lb),
                    names.name(*ub),
                    names.name(*step)
                );
                let carried = data.regions.first().map_or(&[][..], |r| &r.args[1.min(r.args.len())..]);
                if args.len() > 3 {
                    let pairs: Vec<String> = args[3..]
                        .iter()
                        .enumerate()
                        .map(|(k, &init)| match carried.get(k) {
                            Some(&a) => format!("{} = {}", names.name(a), names.name(init)),
                            None => format!("<missing> = {}", names.name(init)),
                        })
                        .collect();
                    let _ = write!(s, " iter({})", pairs.join(", "));
                }
            } else {
                let _ = write!(s, " <malformed> {}", list(names, args));
            }
        }
        Opcode::While => {
            let carried = data.regions.first().map_or(&[][..], |r| &r.args[..]);
            let pairs: Vec<String> = args
                .iter()
                .enumerate()
                .map(|(k, &init)| match carried.get(k) {
                    Some(&a) => format!("{} = {}", names.name(a), names.name(init)),
                    None => format!("<missing> = {}", names.name(init)),
                })
                .collect();
            let _ = write!(s, "while ({})", pairs.join(", "));
        }
        Opcode::Assert { site: k } => {
            let _ = write!(s, "assert {}", list(names, args));
            site = Some(format!("  ; site {k}"));
        }
        Opcode::Print(k) => {
            let prefix = match f.strings.get(k as usize) {
                Some(p) => format!("{p:?}"),
                None => format!("<missing string {k}>"),
            };
            let _ = write!(s, "print {prefix}");
            if !args.is_empty() {
                let _ = write!(s, ", {}", list(names, args));
            }
        }
        _ => {
            s.push_str(data.opcode.mnemonic());
            if !args.is_empty() {
                let _ = write!(s, " {}", list(names, args));
            }
        }
    }
    let results = &data.results;
    if data.opcode.is_control_flow() {
        match results.len() {
            0 => {}
            1 => {
                let _ = write!(s, " -> {}", ty_text(f, results[0]));
            }
            _ => {
                let tys: Vec<String> = results.iter().map(|&r| ty_text(f, r)).collect();
                let _ = write!(s, " -> ({})", tys.join(", "));
            }
        }
    } else if !results.is_empty() {
        let tys: Vec<String> = results.iter().map(|&r| ty_text(f, r)).collect();
        let _ = write!(s, " : {}", tys.join(", "));
    }
    if let Some(site) = site {
        s.push_str(&site);
    }
    s
}

struct Printer<'a> {
    f: &'a Function,
    names: Names,
    annotate: &'a dyn Fn(Inst) -> Vec<String>,
    visited: SecondaryMap<Inst, bool>,
    out: String,
}

impl Printer<'_> {
    fn function(mut self) -> String {
        let f = self.f;
        let args: Vec<String> =
            f.args.iter().map(|a| format!("{}: {} @slot{}", a.name, a.ty, a.slot)).collect();
        let _ = writeln!(self.out, "kernel @{}({})", f.name, args.join(", "));
        for (k, s) in f.scratch.iter().enumerate() {
            let _ = writeln!(self.out, "  scratch s{k}: {}[{}] at byte {}", s.dtype, s.len, s.offset);
        }
        for (k, s) in f.sites.iter().enumerate() {
            let arg = match f.arg(s.arg) {
                Some(a) => format!("arg {} ({})", s.arg, a.name),
                // Asserts check no memory.
                None if s.arg == u32::MAX => "no arg".to_string(),
                None => format!("arg {} (missing)", s.arg),
            };
            let _ = writeln!(self.out, "  site {k}: {arg} span {}..{}", s.span.start, s.span.end);
        }
        self.out.push_str("{\n");
        if !f.body.args.is_empty() {
            let _ = writeln!(self.out, "  ; body arguments: {}", list(&self.names, &f.body.args));
        }
        self.insts(&f.body, 1);
        self.out.push_str("}\n");
        self.out
    }

    fn insts(&mut self, r: &Region, depth: usize) {
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
        let header = inst_header(f, &self.names, i);
        if self.visited[i] {
            let _ = writeln!(self.out, "{indent}; <instruction {i} again: {header}>");
            self.notes(i, &indent);
            return;
        }
        self.visited[i] = true;
        let data = &f.insts[i];
        let _ = write!(self.out, "{indent}{header}");
        if data.regions.is_empty() {
            self.out.push('\n');
            self.notes(i, &indent);
            return;
        }
        self.out.push_str(" {\n");
        self.notes(i, &indent);
        for (k, r) in data.regions.iter().enumerate() {
            if k > 0 {
                let sep = match data.opcode {
                    Opcode::If => " else".to_string(),
                    Opcode::While => {
                        let args: Vec<String> = r
                            .args
                            .iter()
                            .map(|&a| format!("{}: {}", self.names.name(a), ty_text(f, a)))
                            .collect();
                        format!(" do ({})", args.join(", "))
                    }
                    _ => String::new(),
                };
                let _ = writeln!(self.out, "{indent}}}{sep} {{");
            }
            // Arguments the header does not show (the header shows for's and while's first).
            let shown = matches!(data.opcode, Opcode::For | Opcode::While) && k == 0
                || data.opcode == Opcode::While && k == 1;
            if !shown && !r.args.is_empty() {
                let _ = writeln!(self.out, "{indent}  ; region arguments: {}", list(&self.names, &r.args));
            }
            self.insts(r, depth + 1);
        }
        let _ = writeln!(self.out, "{indent}}}");
    }

    fn notes(&mut self, i: Inst, indent: &str) {
        for note in (self.annotate)(i) {
            let _ = writeln!(self.out, "{indent}; {note}");
        }
    }
}
