//! The masked-lane lint: a reduction that reads lanes a mask disabled, after an operation
//! that did not keep the reduction's neutral element in them.
//!
//! The classic layer-norm bug: `x = tl.load(X + cols, mask=cols < N, other=0.)`, then
//! `tl.sum((x - mean) * (x - mean))`. The disabled lanes were loaded as 0, but `x - mean`
//! turned them into `-mean`, and the sum counts `mean²` once per disabled lane. The Triton
//! tutorial writes `tl.where(cols < N, x - mean, 0.)` to put the 0 back; the lint is silent
//! on that form.
//!
//! This is an analysis, not a pass: it reads the front end's block IR (before
//! optimization, so every operation is still the one the user wrote) and returns warnings.
//! It tracks, for every value, what its disabled lanes hold ([`Lanes`]): a mask is known by
//! value number, so `cols < N` written twice is one mask. It errs towards silence: whenever
//! it cannot tell which lanes a mask disabled (two different masks meet, a shape changes,
//! a loop carries a partly masked value), the value becomes [`Lanes::Opaque`] and no
//! reduction of it warns. Only a fill that is provably not neutral, or unknown after an
//! operation that changed it, warns.

use std::collections::{BTreeMap, HashMap};

use lnc_bir::{BinOp, CmpOp, Const, DType, Function, Inst, Opcode, ReduceOp, Region, UnOp, Value, ValueDef};
use lnc_diag::Diagnostic;

/// What a value's masked-off lanes hold, as far as the lint can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lanes {
    /// Every lane holds the same value (scalars, splats); the constant when known.
    Uniform(Option<Bits>),
    /// Every lane holds a meaningful value.
    Full,
    /// Where the mask (by value number) is false, lanes hold `fill`; the others are meaningful.
    Masked { mask: u32, fill: Fill, origin: Origin },
    /// Some lanes hold values computed from disabled lanes after an operation changed them
    /// (to `fill` when known), and which mask disabled them is no longer known (a loop or
    /// branch merged them).
    Tainted(Origin, Fill),
    /// Unknown: nothing to say, nothing to warn about.
    Opaque,
}

/// An `f64` compared by bits, so that states can be compared for the fixed point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bits(u64);

impl Bits {
    fn of(x: f64) -> Bits {
        Bits(x.to_bits())
    }

    fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// The value of disabled lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    Known(Bits),
    Unknown,
}

/// Where a mask's fill came from, and which operation first changed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Origin {
    /// The masked load or the `where` that put the fill into the disabled lanes.
    site: Inst,
    /// The fill that site put there.
    initial: Fill,
    /// The first operation after it that changed the fill.
    changed: Option<Inst>,
}

/// Structural identity of a pure value, for recognizing the same mask written twice.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Param(u32),
    /// A region argument or an impure result: only equal to itself.
    Unique(Value),
    Pure(Opcode, Vec<u32>, u32, lnc_bir::Type),
}

/// Warnings for the reductions of `func` that read masked-off lanes holding a value that
/// is not the reduction's neutral element.
pub fn check(func: &Function) -> Vec<Diagnostic> {
    let mut lint = Lint {
        func,
        numbers: HashMap::new(),
        keys: HashMap::new(),
        lanes: HashMap::new(),
        warnings: BTreeMap::new(),
        report: true,
    };
    lint.region(&func.body);
    lint.warnings.into_values().collect()
}

/// How many times a loop body is analysed before its carried values are declared opaque.
/// The lattice is a few levels high, so real kernels settle in two or three rounds.
const MAX_ROUNDS: usize = 8;

struct Lint<'f> {
    func: &'f Function,
    numbers: HashMap<Value, u32>,
    keys: HashMap<Key, u32>,
    lanes: HashMap<Value, Lanes>,
    warnings: BTreeMap<Inst, Diagnostic>,
    /// False while a loop body is analysed towards its fixed point: only the last round,
    /// which sees the final carried states, reports.
    report: bool,
}

impl Lint<'_> {
    /// The value number of `v`: equal for values computed by the same pure operations on
    /// the same operands.
    fn number(&mut self, v: Value) -> u32 {
        if let Some(&n) = self.numbers.get(&v) {
            return n;
        }
        let key = match self.func.values[v].def {
            ValueDef::Param(n) => Key::Param(n),
            ValueDef::RegionArg(..) => Key::Unique(v),
            ValueDef::Result(inst, n) => {
                let data = self.func.inst(inst);
                if data.opcode.is_pure() {
                    let args = data.args.clone();
                    let args = args.into_iter().map(|a| self.number(a)).collect();
                    Key::Pure(data.opcode, args, n, self.func.ty(v))
                } else {
                    Key::Unique(v)
                }
            }
        };
        let next = self.keys.len() as u32;
        let n = *self.keys.entry(key).or_insert(next);
        self.numbers.insert(v, n);
        n
    }

    fn get(&self, v: Value) -> Lanes {
        self.lanes.get(&v).copied().unwrap_or(Lanes::Opaque)
    }

    fn set(&mut self, v: Value, l: Lanes) {
        self.lanes.insert(v, l);
    }

    fn region(&mut self, r: &Region) {
        for &inst in &r.insts {
            self.inst(inst);
        }
    }

    /// The states of the values a region's terminator passes on.
    fn terminator_args(&self, r: &Region) -> Vec<Lanes> {
        r.insts
            .last()
            .map(|&t| self.func.inst(t))
            .filter(|d| d.opcode.is_terminator())
            .map(|d| {
                let skip = usize::from(d.opcode == Opcode::Condition);
                d.args.iter().skip(skip).map(|&a| self.get(a)).collect()
            })
            .unwrap_or_default()
    }

    fn inst(&mut self, inst: Inst) {
        let func = self.func;
        let data = func.inst(inst);
        let args = &data.args;
        let result = data.results.first().copied();
        let out = match data.opcode {
            Opcode::Const(c) => Lanes::Uniform(Some(Bits::of(const_f64(c)))),
            Opcode::ProgramId(_) | Opcode::NumPrograms(_) => Lanes::Uniform(None),
            Opcode::Arange { .. } => Lanes::Full,
            Opcode::Splat => match self.get(args[0]) {
                Lanes::Uniform(c) => Lanes::Uniform(c),
                _ => Lanes::Uniform(None),
            },
            // A mask's value number belongs to its own shape: after a shape change the
            // lint no longer knows which lanes are disabled.
            Opcode::Broadcast | Opcode::ExpandDims(_) => match self.get(args[0]) {
                l @ (Lanes::Uniform(_) | Lanes::Full | Lanes::Tainted(..)) => l,
                Lanes::Masked { .. } | Lanes::Opaque => Lanes::Opaque,
            },
            Opcode::Binary(op) => binary(inst, op, self.get(args[0]), self.get(args[1])),
            Opcode::Cmp(op) => {
                let (a, b) = (self.get(args[0]), self.get(args[1]));
                combine(inst, a, b, |x, y| Some(f64::from(u8::from(compare(op, x, y)))), Identity::None)
            }
            Opcode::Unary(op) => map_fill(inst, self.get(args[0]), |x| unary(op, x)),
            // As the product, then the sum (the fill is the same up to rounding).
            Opcode::Fma => {
                let product = binary(inst, BinOp::Mul, self.get(args[0]), self.get(args[1]));
                binary(inst, BinOp::Add, product, self.get(args[2]))
            }
            Opcode::Cast => {
                let to = func.ty(data.results[0]).num_dtype();
                map_fill(inst, self.get(args[0]), |x| Some(cast(to, x)))
            }
            Opcode::Bitcast => map_fill(inst, self.get(args[0]), |x| (x == 0.0).then_some(0.0)),
            Opcode::PtrAdd => match (self.get(args[0]), self.get(args[1])) {
                (Lanes::Uniform(_), Lanes::Uniform(_)) => Lanes::Uniform(None),
                _ => Lanes::Full,
            },
            Opcode::Select => {
                let cond = self.number(args[0]);
                self.select(inst, cond, self.get(args[1]), self.get(args[2]))
            }
            Opcode::Load { has_mask, has_other, .. } => {
                let ty = func.ty(data.results[0]);
                if !ty.is_block() {
                    Lanes::Uniform(None)
                } else if !has_mask {
                    Lanes::Full
                } else {
                    let mask = self.number(args[1]);
                    // lnc loads 0 into disabled lanes when there is no `other`.
                    let other =
                        if has_other { self.get(args[2]) } else { Lanes::Uniform(Some(Bits::of(0.0))) };
                    match other {
                        Lanes::Uniform(Some(c)) => masked(inst, mask, Fill::Known(c)),
                        Lanes::Full => Lanes::Full,
                        _ => Lanes::Opaque,
                    }
                }
            }
            Opcode::Reduce { op, .. } => {
                let operand = self.get(args[0]);
                if self.report {
                    self.check_reduce(inst, op, operand);
                }
                if func.ty(data.results[0]).is_block() { Lanes::Full } else { Lanes::Uniform(None) }
            }
            Opcode::Atomic { .. } | Opcode::AtomicCas => {
                if result.is_some_and(|v| func.ty(v).is_block()) {
                    Lanes::Full
                } else {
                    Lanes::Uniform(None)
                }
            }
            Opcode::For => {
                self.for_loop(inst);
                return;
            }
            Opcode::While => {
                self.while_loop(inst);
                return;
            }
            Opcode::If => {
                self.if_else(inst);
                return;
            }
            Opcode::Store { .. } | Opcode::Yield | Opcode::Condition | Opcode::Assert | Opcode::Print(_) => {
                return;
            }
        };
        if let Some(v) = result {
            self.set(v, out);
        }
    }

    fn select(&self, inst: Inst, cond: u32, a: Lanes, b: Lanes) -> Lanes {
        let a_fits = match a {
            Lanes::Uniform(_) | Lanes::Full => true,
            Lanes::Masked { mask, .. } => mask == cond,
            Lanes::Tainted(..) | Lanes::Opaque => false,
        };
        if !a_fits {
            return Lanes::Opaque;
        }
        match b {
            Lanes::Uniform(Some(c)) => masked(inst, cond, Fill::Known(c)),
            Lanes::Full => Lanes::Full,
            Lanes::Masked { mask, fill, origin } if mask == cond => Lanes::Masked { mask, fill, origin },
            _ => Lanes::Opaque,
        }
    }

    fn for_loop(&mut self, inst: Inst) {
        let data = self.func.inst(inst);
        let body = &data.regions[0];
        let init: Vec<Lanes> = data.args[3..].iter().map(|&a| self.get(a)).collect();
        self.set(body.args[0], Lanes::Uniform(None));
        let carried = self.fixed_point(init, |lint, carried| {
            for (&arg, &l) in body.args[1..].iter().zip(carried) {
                lint.set(arg, l);
            }
            lint.region(body);
            lint.terminator_args(body)
        });
        for (&v, l) in data.results.iter().zip(carried) {
            self.set(v, l);
        }
    }

    fn while_loop(&mut self, inst: Inst) {
        let data = self.func.inst(inst);
        let (cond, body) = (&data.regions[0], &data.regions[1]);
        let init: Vec<Lanes> = data.args.iter().map(|&a| self.get(a)).collect();
        let mut forwarded = Vec::new();
        self.fixed_point(init, |lint, carried| {
            for (&arg, &l) in cond.args.iter().zip(carried) {
                lint.set(arg, l);
            }
            lint.region(cond);
            forwarded = lint.terminator_args(cond);
            for (&arg, &l) in body.args.iter().zip(&forwarded) {
                lint.set(arg, l);
            }
            lint.region(body);
            lint.terminator_args(body)
        });
        for (&v, &l) in data.results.iter().zip(&forwarded) {
            self.set(v, l);
        }
    }

    fn if_else(&mut self, inst: Inst) {
        let data = self.func.inst(inst);
        let mut yields = Vec::new();
        for r in &data.regions {
            self.region(r);
            yields.push(self.terminator_args(r));
        }
        for (k, &v) in data.results.iter().enumerate() {
            let l = yields.iter().filter_map(|y| y.get(k).copied()).reduce(join).unwrap_or(Lanes::Opaque);
            self.set(v, l);
        }
    }

    /// Runs `round` (one analysis of a loop, from the carried states to the next ones)
    /// until the carried states stop changing, then once more to report; returns the
    /// carried states, which are also what the loop produces.
    fn fixed_point(
        &mut self,
        init: Vec<Lanes>,
        mut round: impl FnMut(&mut Self, &[Lanes]) -> Vec<Lanes>,
    ) -> Vec<Lanes> {
        let report = std::mem::replace(&mut self.report, false);
        let mut carried = init;
        let mut settled = false;
        for _ in 0..MAX_ROUNDS {
            let next = round(self, &carried);
            let joined: Vec<Lanes> = carried.iter().zip(&next).map(|(&a, &b)| join(a, b)).collect();
            if joined == carried {
                settled = true;
                break;
            }
            carried = joined;
        }
        if !settled {
            carried = vec![Lanes::Opaque; carried.len()];
        }
        self.report = report;
        if report {
            round(self, &carried);
        }
        carried
    }

    fn check_reduce(&mut self, inst: Inst, op: ReduceOp, operand: Lanes) {
        let dtype = self.func.ty(self.func.inst(inst).args[0]).num_dtype();
        let neutral = neutral(op, dtype);
        let origin = match operand {
            Lanes::Masked { fill: Fill::Known(c), origin, .. } | Lanes::Tainted(origin, Fill::Known(c))
                if origin.changed.is_some() && !is_neutral(c.get(), neutral) =>
            {
                origin
            }
            Lanes::Masked { fill: Fill::Unknown, origin, .. } | Lanes::Tainted(origin, Fill::Unknown) => {
                origin
            }
            _ => return,
        };
        let func = self.func;
        let (name, neutral_text) = match op {
            ReduceOp::Sum => ("tl.sum", "0"),
            ReduceOp::Max => ("tl.max", "-inf"),
            ReduceOp::Min => ("tl.min", "+inf"),
        };
        let mut d = Diagnostic::warning(
            format!("`{name}` reads lanes the mask disabled, and they do not hold {neutral_text} here"),
            func.span(inst),
            "this reduction includes the masked-off lanes",
        );
        let site = func.inst(origin.site);
        let what = if matches!(site.opcode, Opcode::Load { .. }) { "loaded as" } else { "set to" };
        let initial = match origin.initial {
            Fill::Known(c) => format!("{what} {}", show(c.get())),
            Fill::Unknown => "filled".to_string(),
        };
        d = d.with_label(func.span(origin.site), format!("lanes where the mask is false are {initial} here"));
        if let Some(changed) = origin.changed {
            let now = match operand {
                Lanes::Masked { fill: Fill::Known(c), .. } => {
                    format!("they hold {} after this", show(c.get()))
                }
                _ => format!("after this they no longer hold {neutral_text}"),
            };
            d = d.with_label(func.span(changed), now);
        }
        if matches!(operand, Lanes::Tainted(..)) {
            d = d.with_note("the loop or branch carries those lanes into the reduced value");
        }
        d = d.with_help(format!(
            "put the neutral element back before reducing: `tl.where(mask, value, {})` (as Triton's \
             layer-norm tutorial does with `tl.where(cols < N, x - mean, 0.)`)",
            match op {
                ReduceOp::Sum => "0.",
                ReduceOp::Max => "float('-inf')",
                ReduceOp::Min => "float('inf')",
            }
        ));
        self.warnings.insert(inst, d);
    }
}

fn masked(site: Inst, mask: u32, fill: Fill) -> Lanes {
    Lanes::Masked { mask, fill, origin: Origin { site, initial: fill, changed: None } }
}

fn const_f64(c: Const) -> f64 {
    match c {
        Const::Int(i) => i as f64,
        Const::Float(f) => f,
    }
}

fn show(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+inf".into() } else { "-inf".into() }
    } else {
        format!("{x}")
    }
}

/// The neutral element of a reduction of `dtype` elements.
fn neutral(op: ReduceOp, dtype: Option<DType>) -> f64 {
    let int_range = dtype.filter(|d| d.is_int()).map(|d| {
        let bits = d.bits().min(63) as i32;
        match (d.is_bool(), d.is_signed()) {
            (true, _) => (0.0, 1.0),
            (false, true) => (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0),
            (false, false) => (0.0, 2f64.powi(bits) - 1.0),
        }
    });
    match (op, int_range) {
        (ReduceOp::Sum, _) => 0.0,
        (ReduceOp::Max, Some((lo, _))) => lo,
        (ReduceOp::Min, Some((_, hi))) => hi,
        (ReduceOp::Max, None) => f64::NEG_INFINITY,
        (ReduceOp::Min, None) => f64::INFINITY,
    }
}

fn is_neutral(x: f64, neutral: f64) -> bool {
    x == neutral
}

/// Which fill of one operand leaves the other operand's lanes as they are.
#[derive(Clone, Copy)]
enum Identity {
    None,
    /// `x op e == x` and `e op x == x`.
    Both(f64),
    /// Only `x op e == x` (subtraction, division).
    Right(f64),
}

fn binary(inst: Inst, op: BinOp, a: Lanes, b: Lanes) -> Lanes {
    let identity = match op {
        BinOp::Add | BinOp::Or | BinOp::Xor => Identity::Both(0.0),
        BinOp::Sub | BinOp::Shl | BinOp::Shr => Identity::Right(0.0),
        BinOp::Mul => Identity::Both(1.0),
        BinOp::Div => Identity::Right(1.0),
        BinOp::Max => Identity::Both(f64::NEG_INFINITY),
        BinOp::Min => Identity::Both(f64::INFINITY),
        BinOp::IDiv | BinOp::Rem | BinOp::And | BinOp::Pow => Identity::None,
    };
    // Zero times (or and) anything finite stays zero: a masked operand that is 0 keeps the
    // product's disabled lanes at 0 whatever the other operand holds.
    let absorbs = |l: Lanes| matches!(l, Lanes::Masked { fill: Fill::Known(c), .. } if c.get() == 0.0);
    if matches!(op, BinOp::Mul | BinOp::And) {
        for (z, other) in [(a, b), (b, a)] {
            if absorbs(z) && matches!(other, Lanes::Uniform(_) | Lanes::Full) {
                return z;
            }
        }
    }
    if op == BinOp::Div
        && absorbs(a)
        && matches!(b, Lanes::Uniform(Some(c)) if c.get() != 0.0 && c.get().is_finite())
    {
        return a;
    }
    // An infinite fill plus or minus a finite value stays infinite: the tutorial's softmax
    // loads -inf and subtracts the row's max. Values that are not masked are taken as finite.
    if matches!(op, BinOp::Add | BinOp::Sub) {
        let infinite =
            |l: Lanes| matches!(l, Lanes::Masked { fill: Fill::Known(c), .. } if c.get().is_infinite());
        let finite = |l: Lanes| matches!(l, Lanes::Uniform(_) | Lanes::Full);
        if infinite(a) && finite(b) {
            return a;
        }
        if infinite(b) && finite(a) {
            return match (op, b) {
                (BinOp::Sub, Lanes::Masked { mask, fill: Fill::Known(c), origin }) => {
                    changed(inst, mask, Fill::Known(c), Fill::Known(Bits::of(-c.get())), origin)
                }
                _ => b,
            };
        }
    }
    combine(inst, a, b, |x, y| fold(op, x, y), identity)
}

/// The state of an elementwise operation of two operands: disabled lanes combine their
/// fills; a fill that is the operation's identity lets the other operand's lanes through.
fn combine(inst: Inst, a: Lanes, b: Lanes, f: impl Fn(f64, f64) -> Option<f64>, identity: Identity) -> Lanes {
    use Lanes::*;
    let eval = |x: Fill, y: Fill| match (x, y) {
        (Fill::Known(x), Fill::Known(y)) => {
            f(x.get(), y.get()).map_or(Fill::Unknown, |r| Fill::Known(Bits::of(r)))
        }
        _ => Fill::Unknown,
    };
    let is = |fill: Fill, e: f64| matches!(fill, Fill::Known(c) if c.get() == e);
    match (a, b) {
        (Tainted(o, f), _) | (_, Tainted(o, f)) => Tainted(o, f),
        (Opaque, _) | (_, Opaque) => Opaque,
        (Uniform(x), Uniform(y)) => Uniform(match (x, y) {
            (Some(x), Some(y)) => f(x.get(), y.get()).map(Bits::of),
            _ => None,
        }),
        (Full | Uniform(_), Full | Uniform(_)) => Full,
        (Masked { mask, fill, origin }, Uniform(c)) => {
            let other = c.map_or(Fill::Unknown, Fill::Known);
            changed(inst, mask, fill, eval(fill, other), origin)
        }
        (Uniform(c), Masked { mask, fill, origin }) => {
            let other = c.map_or(Fill::Unknown, Fill::Known);
            changed(inst, mask, fill, eval(other, fill), origin)
        }
        (Masked { mask, fill, origin }, Full) => match identity {
            Identity::Both(e) | Identity::Right(e) if is(fill, e) => Full,
            _ => changed(inst, mask, fill, Fill::Unknown, origin),
        },
        (Full, Masked { mask, fill, origin }) => match identity {
            Identity::Both(e) if is(fill, e) => Full,
            _ => changed(inst, mask, fill, Fill::Unknown, origin),
        },
        (Masked { mask: ma, fill: fa, origin: oa }, Masked { mask: mb, fill: fb, origin: ob }) => {
            if ma != mb {
                return Opaque;
            }
            let r = eval(fa, fb);
            let origin = if oa.changed.is_some() || ob.changed.is_none() { oa } else { ob };
            if r == fa || r == fb {
                Masked { mask: ma, fill: r, origin }
            } else {
                changed(inst, ma, fa, r, origin)
            }
        }
    }
}

/// A masked state whose fill went from `before` to `after` at `inst`.
fn changed(inst: Inst, mask: u32, before: Fill, after: Fill, mut origin: Origin) -> Lanes {
    if after != before && origin.changed.is_none() {
        origin.changed = Some(inst);
    }
    Lanes::Masked { mask, fill: after, origin }
}

fn map_fill(inst: Inst, l: Lanes, f: impl Fn(f64) -> Option<f64>) -> Lanes {
    match l {
        Lanes::Uniform(c) => Lanes::Uniform(c.and_then(|c| f(c.get())).map(Bits::of)),
        Lanes::Masked { mask, fill, origin } => {
            let after = match fill {
                Fill::Known(c) => f(c.get()).map_or(Fill::Unknown, |r| Fill::Known(Bits::of(r))),
                Fill::Unknown => Fill::Unknown,
            };
            changed(inst, mask, fill, after, origin)
        }
        other => other,
    }
}

/// The state of a value that is `a` on some paths and `b` on others.
fn join(a: Lanes, b: Lanes) -> Lanes {
    use Lanes::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (Tainted(o, f), _) | (_, Tainted(o, f)) => Tainted(o, f),
        // Disabled lanes an operation changed, merged with another state (a loop's carried
        // value, an `if`'s result): the lanes stay suspect though the mask is lost.
        (Masked { fill, origin, .. }, _) | (_, Masked { fill, origin, .. })
            if origin.changed.is_some() && fill != origin.initial =>
        {
            Tainted(origin, fill)
        }
        (Uniform(_), Uniform(_)) => Uniform(None),
        (Full | Uniform(_), Full | Uniform(_)) => Full,
        // A fill known on one path but not on another (a loop accumulator, whose disabled
        // lanes of this round held real sums in earlier rounds): nothing reliable to say.
        _ => Opaque,
    }
}

fn fold(op: BinOp, x: f64, y: f64) -> Option<f64> {
    Some(match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::Max => x.max(y),
        BinOp::Min => x.min(y),
        BinOp::Pow => x.powf(y),
        _ => return None,
    })
}

fn compare(op: CmpOp, x: f64, y: f64) -> bool {
    op.holds(x, y)
}

fn unary(op: UnOp, x: f64) -> Option<f64> {
    Some(match op {
        UnOp::Neg => -x,
        UnOp::Not => return None,
        UnOp::Sqrt => x.sqrt(),
        UnOp::Rsqrt => 1.0 / x.sqrt(),
        UnOp::Exp => x.exp(),
        UnOp::Exp2 => x.exp2(),
        UnOp::Log => x.ln(),
        UnOp::Log2 => x.log2(),
        UnOp::Abs => x.abs(),
        UnOp::Sin => x.sin(),
        UnOp::Cos => x.cos(),
        UnOp::Floor => x.floor(),
        UnOp::Ceil => x.ceil(),
    })
}

fn cast(to: Option<DType>, x: f64) -> f64 {
    match to {
        Some(d) if d.is_bool() => f64::from(u8::from(x != 0.0)),
        Some(d) if d.is_int() && x.is_finite() => x.trunc(),
        _ => x,
    }
}
