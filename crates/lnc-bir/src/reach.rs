//! What memory a launch can reach: a proof, made before a launch runs, that no access of
//! any program leaves the buffer its pointer derives from.
//!
//! A safe launch that has such a proof can run the code without bounds checks (faster to
//! compile and to run), and needs the checked code only where the proof fails.
//!
//! [`Reach::new`] keeps, from a function, the integer and pointer arithmetic its accesses'
//! addresses depend on, as a list of steps; [`Reach::in_bounds`] evaluates those steps on
//! intervals, with the launch's grid, scalar arguments and buffer bounds: each value becomes
//! an interval holding every value it takes, in every element, program and iteration, and
//! each access the bytes it may touch. The proof holds when those bytes lie inside the
//! bounds of the argument each access's pointer derives from.
//!
//! Sound by construction, not exact:
//! - `program_id(a)` ranges over the whole grid axis, a loop index over the values it takes
//!   in `[lb, ub)` (a step known only as an interval, such as `num_programs(0)` in a
//!   grid-stride loop, must not change sign);
//! - both branches of an `if` are taken, a `select` joins its two sides;
//! - an integer result whose exact interval does not fit its type (it may wrap) is
//!   unknown, as is everything computed from memory (loads, atomics) or carried around a
//!   loop; an address that depends on one of those is never proved.
//!
//! A mask is taken into account where it is built from comparisons (`offs < N`, joined by
//! `&`): an enabled element satisfies each of them, so the operand compared is narrowed to
//! what the comparison allows, and the pointer computed again from the narrowed interval.
//! That narrowing is exact only when the mask and the pointer read the operand at the same
//! element: both reach it from the access through elementwise operations and broadcasts
//! only, which map an element of the access's shape to the same element of the operand's
//! (numpy's rule, same rank). A path through `expand_dims` is not followed; a scalar
//! operand has one element and is narrowed everywhere. A mask that no element can satisfy
//! leaves an access that touches nothing, as does a loop that no program runs.

use std::collections::HashMap;

use crate::{BinOp, CmpOp, Const, DType, Elem, Function, Inst, Opcode, Region, UnOp, Value, ValueDef};

/// The values taken in every element, program and iteration: integers in the value domain
/// of their dtype; pointers as the argument slot they derive from and byte offsets from
/// that argument's pointer. `Empty`: no element at all (an access masked off everywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Av {
    Unknown,
    Empty,
    Int(i128, i128),
    Ptr(u32, i128, i128),
}

/// A register of the step list.
type Reg = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Set {
        out: Reg,
        lo: i128,
        hi: i128,
    },
    /// A scalar argument in ABI slot `slot`, read as dtype `d`.
    Arg {
        out: Reg,
        slot: u32,
        d: DType,
    },
    Ptr {
        out: Reg,
        slot: u32,
    },
    /// `program_id(axis)`.
    Pid {
        out: Reg,
        axis: u8,
    },
    /// `num_programs(axis)`.
    Programs {
        out: Reg,
        axis: u8,
    },
    Copy {
        out: Reg,
        a: Reg,
    },
    Join {
        out: Reg,
        a: Reg,
        b: Reg,
    },
    Binary {
        out: Reg,
        op: BinOp,
        a: Reg,
        b: Reg,
        d: DType,
    },
    Neg {
        out: Reg,
        a: Reg,
        d: DType,
    },
    /// Integer conversion to `d`.
    Cast {
        out: Reg,
        a: Reg,
        d: DType,
    },
    /// A pointer plus `a` elements of `size` bytes.
    PtrAdd {
        out: Reg,
        p: Reg,
        a: Reg,
        size: u32,
    },
    /// `a` narrowed to at most `hi + adjust` (`upper`) or at least `lo + adjust` of `bound`.
    Narrow {
        out: Reg,
        a: Reg,
        bound: Reg,
        upper: bool,
        adjust: i8,
    },
    /// `for iv = lb to ub step step`; the steps of its body end before `end`.
    For {
        iv: Reg,
        lb: Reg,
        ub: Reg,
        step: Reg,
        d: DType,
        end: u32,
    },
    /// An access of one element of `size` bytes at every pointer of `p`, through argument
    /// `slot` (as found by the front end), by instruction `inst`.
    Access {
        p: Reg,
        size: u32,
        inst: Inst,
    },
}

/// The steps that decide where a function's accesses go (module docs).
#[derive(Clone, Debug)]
pub struct Reach {
    steps: Vec<Step>,
    regs: usize,
}

/// The bytes a launch may access through a pointer argument: `[lo, hi)`, relative to the
/// pointer passed (negative `lo` when the pointer is an offset into its buffer).
pub type ArgBytes = (i64, i64);

impl Reach {
    /// The steps of `f`'s accesses, or `None` when some access's address depends on a
    /// value no launch can bound (read from memory, carried around a loop, a float).
    pub fn new(f: &Function) -> Option<Reach> {
        let mut b = Build { f, regs: HashMap::new(), defs: HashMap::new(), steps: Vec::new(), next: 0 };
        for p in &f.params {
            match f.ty(p.value).elem {
                Elem::Ptr(_) => b.push(Some(p.value), Step::Ptr { out: 0, slot: p.slot }),
                Elem::Scalar(d) if d.is_int() => b.push(Some(p.value), Step::Arg { out: 0, slot: p.slot, d }),
                Elem::Scalar(_) => continue,
            };
        }
        b.region(&f.body)?;
        Some(b.finish())
    }

    /// Whether every access of a launch with these ABI `slots`, argument `bounds` (by
    /// slot) and `grid` stays inside the bounds of the argument its pointer derives from.
    pub fn in_bounds(&self, slots: &[u64], bounds: impl Fn(u32) -> Option<ArgBytes>, grid: [u32; 3]) -> bool {
        self.first_unproved(slots, bounds, grid).is_none()
    }

    /// The first access (in program order) that the proof does not show inside its
    /// bounds, if any.
    pub fn first_unproved(
        &self,
        slots: &[u64],
        bounds: impl Fn(u32) -> Option<ArgBytes>,
        grid: [u32; 3],
    ) -> Option<Inst> {
        if grid.contains(&0) {
            return None;
        }
        let mut r = vec![Av::Unknown; self.regs];
        let mut pc = 0;
        while let Some(&step) = self.steps.get(pc) {
            pc += 1;
            let get = |x: Reg| r[x as usize];
            let (out, v) = match step {
                Step::Set { out, lo, hi } => (out, Av::Int(lo, hi)),
                Step::Arg { out, slot, d } => match slots.get(slot as usize) {
                    Some(&raw) => (out, Av::Int(decode(raw, d), decode(raw, d))),
                    None => (out, Av::Unknown),
                },
                Step::Ptr { out, slot } => (out, Av::Ptr(slot, 0, 0)),
                // Both are `i32` in the code: a larger grid wraps them (launches refuse one).
                Step::Pid { out, axis } => (out, fit(DType::I32, 0, i128::from(grid[axis as usize]) - 1)),
                Step::Programs { out, axis } => {
                    let n = i128::from(grid[axis as usize]);
                    (out, fit(DType::I32, n, n))
                }
                Step::Copy { out, a } => (out, get(a)),
                Step::Join { out, a, b } => (out, join(get(a), get(b))),
                Step::Binary { out, op, a, b, d } => (out, binary(op, get(a), get(b), d)),
                Step::Neg { out, a, d } => (out, map_int(get(a), |lo, hi| fit(d, -hi, -lo))),
                Step::Cast { out, a, d: DType::I1 } => (out, map_int(get(a), |_, _| Av::Int(0, 1))),
                Step::Cast { out, a, d } => (out, map_int(get(a), |lo, hi| fit(d, lo, hi))),
                Step::PtrAdd { out, p, a, size } => match (get(p), get(a)) {
                    (Av::Empty, _) | (_, Av::Empty) => (out, Av::Empty),
                    (Av::Ptr(s, plo, phi), Av::Int(lo, hi)) => {
                        let size = i128::from(size);
                        (out, Av::Ptr(s, plo + lo * size, phi + hi * size))
                    }
                    _ => (out, Av::Unknown),
                },
                Step::Narrow { out, a, bound, upper, adjust } => {
                    let adjust = i128::from(adjust);
                    let v = match (get(a), get(bound)) {
                        (Av::Empty, _) | (_, Av::Empty) => Av::Empty,
                        (Av::Int(lo, hi), Av::Int(blo, bhi)) => {
                            let (lo, hi) =
                                if upper { (lo, hi.min(bhi + adjust)) } else { (lo.max(blo + adjust), hi) };
                            if lo > hi { Av::Empty } else { Av::Int(lo, hi) }
                        }
                        (a, _) => a,
                    };
                    (out, v)
                }
                Step::For { iv, lb, ub, step, d, end } => {
                    let (Av::Int(lb0, lb1), Av::Int(ub0, ub1), Av::Int(s0, s1)) =
                        (get(lb), get(ub), get(step))
                    else {
                        r[iv as usize] = Av::Unknown;
                        continue;
                    };
                    // The last index run, exactly where `lb` and the step are known: the
                    // one of `lb`'s residue below `ub`.
                    let exact = lb0 == lb1 && s0 == s1;
                    let v = if s0 > 0 {
                        if lb0 >= ub1 {
                            pc = end as usize;
                            continue;
                        }
                        let last = if exact { lb0 + (ub1 - lb0 - 1) / s0 * s0 } else { ub1 - 1 };
                        // The code steps the index without wrapping (lnc-clif's
                        // `induction.rs`); the proof does not rely on it.
                        fit(d, lb0, last + s1).then_int(lb0, last)
                    } else if s1 < 0 {
                        if lb1 <= ub0 {
                            pc = end as usize;
                            continue;
                        }
                        let last = if exact { lb1 - (lb1 - ub0 - 1) / -s0 * -s0 } else { ub0 + 1 };
                        fit(d, last + s0, lb1).then_int(last, lb1)
                    } else {
                        Av::Unknown
                    };
                    (iv, v)
                }
                Step::Access { p, size, inst } => {
                    match get(p) {
                        Av::Empty => {}
                        Av::Ptr(s, lo, hi) => {
                            let Some((blo, bhi)) = bounds(s) else { return Some(inst) };
                            if lo < i128::from(blo) || hi + i128::from(size) > i128::from(bhi) {
                                return Some(inst);
                            }
                        }
                        _ => return Some(inst),
                    }
                    continue;
                }
            };
            r[out as usize] = v;
        }
        None
    }

    /// How many steps the proof evaluates.
    pub fn steps(&self) -> usize {
        self.steps.len()
    }
}

impl Av {
    /// `Int(lo, hi)` when `self` is an interval (one that fits its type), else unknown.
    fn then_int(self, lo: i128, hi: i128) -> Av {
        match self {
            Av::Int(..) => Av::Int(lo, hi),
            _ => Av::Unknown,
        }
    }
}

fn map_int(a: Av, f: impl Fn(i128, i128) -> Av) -> Av {
    match a {
        Av::Int(lo, hi) => f(lo, hi),
        Av::Empty => Av::Empty,
        _ => Av::Unknown,
    }
}

/// The value an argument slot holds as dtype `d`: its low bits, sign- or zero-extended,
/// as the kernel reads them (`int1`: whether any bit is set).
fn decode(raw: u64, d: DType) -> i128 {
    if d == DType::I1 {
        return i128::from(raw != 0);
    }
    let bits = d.bits();
    let low = if bits >= 64 { raw } else { raw & ((1u64 << bits) - 1) };
    if d.is_signed() && (low >> (bits - 1)) & 1 == 1 {
        i128::from(low) - (1i128 << bits)
    } else {
        i128::from(low)
    }
}

/// The values of integer dtype `d`.
fn domain(d: DType) -> (i128, i128) {
    let bits = d.bits();
    if d.is_signed() { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) }
}

fn fit(d: DType, lo: i128, hi: i128) -> Av {
    let (a, b) = domain(d);
    if d.is_int() && lo <= hi && lo >= a && hi <= b { Av::Int(lo, hi) } else { Av::Unknown }
}

fn join(a: Av, b: Av) -> Av {
    match (a, b) {
        (Av::Empty, x) | (x, Av::Empty) => x,
        (Av::Int(a0, a1), Av::Int(b0, b1)) => Av::Int(a0.min(b0), a1.max(b1)),
        (Av::Ptr(s, a0, a1), Av::Ptr(t, b0, b1)) if s == t => Av::Ptr(s, a0.min(b0), a1.max(b1)),
        _ => Av::Unknown,
    }
}

/// The smallest and largest of `f` over the corners of two intervals (exact for
/// functions monotonic in each argument), `None` if one overflows.
fn corners(a: (i128, i128), b: (i128, i128), f: impl Fn(i128, i128) -> Option<i128>) -> Option<(i128, i128)> {
    let v = [f(a.0, b.0)?, f(a.0, b.1)?, f(a.1, b.0)?, f(a.1, b.1)?];
    Some((v.iter().copied().min()?, v.iter().copied().max()?))
}

/// Integer `op` of dtype `d` on intervals; unknown where the result may wrap or the
/// operation is not modeled.
fn binary(op: BinOp, a: Av, b: Av, d: DType) -> Av {
    let (a0, a1, b0, b1) = match (a, b) {
        (Av::Empty, _) | (_, Av::Empty) => return Av::Empty,
        (Av::Int(a0, a1), Av::Int(b0, b1)) => (a0, a1, b0, b1),
        _ => return Av::Unknown,
    };
    let (a, b) = ((a0, a1), (b0, b1));
    let bits = i128::from(d.bits());
    let by_corners = |f: &dyn Fn(i128, i128) -> Option<i128>| corners(a, b, f).map(|(lo, hi)| fit(d, lo, hi));
    let range = match op {
        BinOp::Add => (a0 + b0, a1 + b1),
        BinOp::Sub => (a0 - b1, a1 - b0),
        BinOp::Mul => return by_corners(&i128::checked_mul).unwrap_or(Av::Unknown),
        BinOp::Min => (a0.min(b0), a1.min(b1)),
        BinOp::Max => (a0.max(b0), a1.max(b1)),
        // Truncating division is monotonic in each operand on either side of a zero
        // divisor; `MIN / -1` overflows, which `fit` rejects.
        BinOp::IDiv if b0 > 0 || b1 < 0 => return by_corners(&i128::checked_div).unwrap_or(Av::Unknown),
        // The remainder takes the dividend's sign and is smaller than the divisor.
        BinOp::Rem if b0 > 0 || b1 < 0 => {
            let m = b0.abs().max(b1.abs()) - 1;
            if a0 >= 0 {
                (0, a1.min(m))
            } else if a1 <= 0 {
                (a0.max(-m), 0)
            } else {
                (-m, m)
            }
        }
        // A mask of the high bits (`-2^k` in the type's bits) rounds down to a multiple of
        // `2^k`, which is monotonic.
        BinOp::And if b0 == b1 && low_zeros_mask(b0, d).is_some() => {
            let k = low_zeros_mask(b0, d).unwrap_or(0);
            (a0 >> k << k, a1 >> k << k)
        }
        BinOp::And if a0 == a1 && low_zeros_mask(a0, d).is_some() => {
            let k = low_zeros_mask(a0, d).unwrap_or(0);
            (b0 >> k << k, b1 >> k << k)
        }
        // Clearing bits of a value that is not negative only lowers it; a mask that is
        // not negative bounds the result.
        BinOp::And if a0 >= 0 && b0 >= 0 => (0, a1.min(b1)),
        BinOp::And if a0 >= 0 => (0, a1),
        BinOp::And if b0 >= 0 => (0, b1),
        BinOp::Or | BinOp::Xor if a0 >= 0 && b0 >= 0 => {
            let width = 128 - a1.max(b1).leading_zeros();
            (0, (1i128 << width) - 1)
        }
        // Shifts by less than the width: a product by, or a floor division by, `2^b`.
        BinOp::Shl if b0 >= 0 && b1 < bits => {
            return by_corners(&|x, y| x.checked_mul(1i128 << y)).unwrap_or(Av::Unknown);
        }
        BinOp::Shr if b0 >= 0 && b1 < bits => return by_corners(&|x, y| Some(x >> y)).unwrap_or(Av::Unknown),
        _ => return Av::Unknown,
    };
    fit(d, range.0, range.1)
}

/// `k` when `m` is, in the bits of `d`, ones above `k` zero bits (`-2^k`), `k > 0`.
fn low_zeros_mask(m: i128, d: DType) -> Option<u32> {
    let bits = d.bits();
    if !(2..=64).contains(&bits) {
        return None;
    }
    let pattern = (m as u128) & (u128::MAX >> (128 - bits));
    if pattern == 0 {
        return None;
    }
    let k = pattern.trailing_zeros();
    let ones_above = (u128::MAX >> (128 - bits)) >> k << k;
    (k > 0 && k < bits && pattern == ones_above).then_some(k)
}

struct Build<'f> {
    f: &'f Function,
    /// Registers of the values known so far.
    regs: HashMap<Value, Reg>,
    /// The step that computes each register's value (to compute it again, narrowed).
    defs: HashMap<Reg, Step>,
    steps: Vec<Step>,
    next: Reg,
}

/// A comparison a mask's enabled elements satisfy: `a op b`.
type Constraint = (CmpOp, Value, Value);

impl Build<'_> {
    fn fresh(&mut self) -> Reg {
        let r = self.next;
        self.next += 1;
        r
    }

    fn get(&self, v: Value) -> Option<Reg> {
        self.regs.get(&v).copied()
    }

    fn push(&mut self, v: Option<Value>, mut step: Step) -> Reg {
        let out = self.fresh();
        set_out(&mut step, out);
        if let Some(v) = v {
            self.regs.insert(v, out);
        }
        self.defs.insert(out, step);
        self.steps.push(step);
        out
    }

    fn region(&mut self, region: &Region) -> Option<()> {
        for &i in &region.insts {
            self.inst(i)?;
        }
        Some(())
    }

    /// Adds the steps of `i`; `None` when it is an access whose address is unknowable.
    fn inst(&mut self, i: Inst) -> Option<()> {
        let f = self.f;
        let d = f.inst(i);
        let arg = |k: usize| d.args.get(k).copied();
        match d.opcode {
            Opcode::Load { has_mask, .. } => return self.access(i, d.args[0], has_mask.then(|| d.args[1])),
            Opcode::Store { has_mask, .. } | Opcode::Atomic { has_mask, .. } => {
                return self.access(i, d.args[0], has_mask.then(|| d.args[2]));
            }
            Opcode::AtomicCas => return self.access(i, d.args[0], None),
            Opcode::For => {
                let iv = d.regions[0].args[0];
                let at = self.steps.len();
                let dt = f.ty(iv).elem.dtype();
                let bounded = match (self.get(d.args[0]), self.get(d.args[1]), self.get(d.args[2])) {
                    (Some(lb), Some(ub), Some(step)) => {
                        self.push(Some(iv), Step::For { iv: 0, lb, ub, step, d: dt, end: 0 });
                        true
                    }
                    _ => false,
                };
                self.region(&d.regions[0])?;
                let len = u32::try_from(self.steps.len()).ok()?;
                if bounded && let Some(Step::For { end, .. }) = self.steps.get_mut(at) {
                    *end = len;
                }
                return Some(());
            }
            Opcode::While => {
                for r in &d.regions {
                    self.region(r)?;
                }
                return Some(());
            }
            Opcode::If => {
                for r in &d.regions {
                    self.region(r)?;
                }
                let yields = |r: usize| -> Option<&Vec<Value>> {
                    let last = *d.regions.get(r)?.insts.last()?;
                    (f.inst(last).opcode == Opcode::Yield).then_some(&f.inst(last).args)
                };
                if let (Some(t), Some(e)) = (yields(0), yields(1)) {
                    for (k, &res) in d.results.iter().enumerate() {
                        let side = |y: &Vec<Value>| y.get(k).and_then(|&v| self.get(v));
                        if let (Some(a), Some(b)) = (side(t), side(e)) {
                            self.push(Some(res), Step::Join { out: 0, a, b });
                        }
                    }
                }
                return Some(());
            }
            _ => {}
        }
        let [res] = d.results[..] else { return Some(()) };
        let elem = f.ty(res).elem;
        let dt = elem.dtype();
        let is_ptr = matches!(elem, Elem::Ptr(_));
        if !is_ptr && !dt.is_int() {
            return Some(());
        }
        let known = |b: &Self, k: usize| arg(k).and_then(|v| b.get(v));
        let step = match d.opcode {
            // A constant holds the bits of its dtype in 64 (a `u64` above 2^63 looks
            // negative): its value is read as an argument's is.
            Opcode::Const(Const::Int(k)) => {
                let k = if dt == DType::I1 { i128::from(k != 0) } else { decode(k as u64, dt) };
                Some(Step::Set { out: 0, lo: k, hi: k })
            }
            Opcode::ProgramId(axis) => Some(Step::Pid { out: 0, axis }),
            Opcode::NumPrograms(axis) => Some(Step::Programs { out: 0, axis }),
            Opcode::Arange { start, end } if start < end => {
                Some(Step::Set { out: 0, lo: i128::from(start), hi: i128::from(end) - 1 })
            }
            Opcode::Cmp(_) => Some(Step::Set { out: 0, lo: 0, hi: 1 }),
            Opcode::Splat | Opcode::Broadcast | Opcode::ExpandDims(_) => {
                known(self, 0).map(|a| Step::Copy { out: 0, a })
            }
            Opcode::Binary(op) => match (known(self, 0), known(self, 1)) {
                (Some(a), Some(b)) => Some(Step::Binary { out: 0, op, a, b, d: dt }),
                _ => None,
            },
            Opcode::Unary(UnOp::Neg) => known(self, 0).map(|a| Step::Neg { out: 0, a, d: dt }),
            Opcode::Select => match (known(self, 1), known(self, 2)) {
                (Some(a), Some(b)) => Some(Step::Join { out: 0, a, b }),
                _ => None,
            },
            Opcode::Cast if arg(0).is_some_and(|a| f.ty(a).elem.dtype().is_int()) && !is_ptr => {
                known(self, 0).map(|a| Step::Cast { out: 0, a, d: dt })
            }
            Opcode::Bitcast if is_ptr && arg(0).is_some_and(|a| matches!(f.ty(a).elem, Elem::Ptr(_))) => {
                known(self, 0).map(|a| Step::Copy { out: 0, a })
            }
            Opcode::PtrAdd => match (known(self, 0), known(self, 1), arg(0).map(|p| f.ty(p).elem)) {
                (Some(p), Some(a), Some(Elem::Ptr(pointee))) => {
                    Some(Step::PtrAdd { out: 0, p, a, size: pointee.size() })
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(step) = step {
            self.push(Some(res), step);
        }
        Some(())
    }

    fn access(&mut self, i: Inst, p: Value, mask: Option<Value>) -> Option<()> {
        let Elem::Ptr(pointee) = self.f.ty(p).elem else { return None };
        let mut reg = self.get(p)?;
        if let Some(mask) = mask {
            let mut constraints = Vec::new();
            self.constraints(mask, &mut constraints);
            let mut narrowed: HashMap<Value, Reg> = HashMap::new();
            for (op, a, b) in constraints {
                let (Some(ra), Some(rb)) = (self.get(a), self.get(b)) else { continue };
                if !self.f.ty(a).elem.dtype().is_int() {
                    continue;
                }
                // `a < b`: `a ≤ hi(b) - 1` and `b ≥ lo(a) + 1`; the others alike.
                let (upper_a, adjust) = match op {
                    CmpOp::Lt => (true, -1),
                    CmpOp::Le => (true, 0),
                    CmpOp::Gt => (false, 1),
                    CmpOp::Ge => (false, 0),
                    CmpOp::Eq | CmpOp::Ne => continue,
                };
                let cur_a = narrowed.get(&a).copied().unwrap_or(ra);
                let na =
                    self.push(None, Step::Narrow { out: 0, a: cur_a, bound: rb, upper: upper_a, adjust });
                narrowed.insert(a, na);
                let cur_b = narrowed.get(&b).copied().unwrap_or(rb);
                let nb = self.push(
                    None,
                    Step::Narrow { out: 0, a: cur_b, bound: ra, upper: !upper_a, adjust: -adjust },
                );
                narrowed.insert(b, nb);
            }
            if !narrowed.is_empty() {
                let mut memo = HashMap::new();
                reg = self.again(p, &narrowed, &mut memo)?;
            }
        }
        self.steps.push(Step::Access { p: reg, size: pointee.size(), inst: i });
        Some(())
    }

    /// The comparisons every enabled element of `mask` satisfies, at the same element of
    /// their operands (module docs): through `&` and broadcasts only.
    fn constraints(&self, mask: Value, out: &mut Vec<Constraint>) {
        let ValueDef::Result(i, 0) = self.f.values[mask].def else { return };
        let d = self.f.inst(i);
        match d.opcode {
            Opcode::Binary(BinOp::And) => {
                self.constraints(d.args[0], out);
                self.constraints(d.args[1], out);
            }
            Opcode::Broadcast => self.constraints(d.args[0], out),
            Opcode::Splat if self.f.ty(d.args[0]).shape.is_scalar() => self.constraints(d.args[0], out),
            Opcode::Cmp(op) => out.push((op, d.args[0], d.args[1])),
            _ => {}
        }
    }

    /// The register of `v` computed again with the `narrowed` values, through elementwise
    /// operations and broadcasts only (else `v`'s own register).
    fn again(
        &mut self,
        v: Value,
        narrowed: &HashMap<Value, Reg>,
        memo: &mut HashMap<Value, Reg>,
    ) -> Option<Reg> {
        if let Some(&r) = narrowed.get(&v).or_else(|| memo.get(&v)) {
            return Some(r);
        }
        let own = self.get(v)?;
        let ValueDef::Result(i, 0) = self.f.values[v].def else { return Some(own) };
        let d = self.f.inst(i);
        let follows = match d.opcode {
            Opcode::Broadcast | Opcode::Binary(_) | Opcode::Unary(_) | Opcode::Cast | Opcode::Bitcast => true,
            Opcode::PtrAdd | Opcode::Select => true,
            Opcode::Splat => self.f.ty(d.args[0]).shape.is_scalar(),
            _ => false,
        };
        let step = self.defs.get(&own).copied();
        let (true, Some(mut step)) = (follows, step) else { return Some(own) };
        let mut changed = false;
        let mut args = Vec::new();
        for &a in &d.args {
            let before = self.get(a);
            let after = if before.is_some() { Some(self.again(a, narrowed, memo)?) } else { None };
            changed |= before != after;
            args.push((before, after));
        }
        if !changed {
            memo.insert(v, own);
            return Some(own);
        }
        map_inputs(&mut step, &mut |r| {
            args.iter().find(|(b, _)| *b == Some(r)).and_then(|&(_, a)| a).unwrap_or(r)
        });
        let r = self.push(None, step);
        memo.insert(v, r);
        Some(r)
    }

    /// Drops the steps no access depends on and numbers the registers left densely.
    fn finish(self) -> Reach {
        let n = self.steps.len();
        let mut needed = vec![false; self.next as usize];
        let mut keep = vec![false; n];
        // A loop's body comes after it: seen first in reverse order.
        for at in (0..n).rev() {
            let step = self.steps[at];
            let k = match step {
                Step::Access { .. } => true,
                Step::For { iv, end, .. } => {
                    needed[iv as usize]
                        || keep.get(at + 1..end as usize).is_some_and(|b| b.iter().any(|&k| k))
                }
                s => needed[out_of(&s) as usize],
            };
            if k {
                keep[at] = true;
                let mut s = step;
                map_inputs(&mut s, &mut |r| {
                    needed[r as usize] = true;
                    r
                });
            }
        }
        let mut position = vec![0u32; n + 1];
        let mut count = 0u32;
        for (at, &k) in keep.iter().enumerate() {
            position[at] = count;
            count += u32::from(k);
        }
        position[n] = count;
        let mut renumber = vec![u32::MAX; self.next as usize];
        let mut next = 0;
        let mut steps = Vec::with_capacity(count as usize);
        for (at, step) in self.steps.iter().enumerate() {
            if !keep[at] {
                continue;
            }
            let mut s = *step;
            let mut map = |r: Reg| {
                if renumber[r as usize] == u32::MAX {
                    renumber[r as usize] = next;
                    next += 1;
                }
                renumber[r as usize]
            };
            map_inputs(&mut s, &mut map);
            if let Some(out) = out_mut(&mut s) {
                *out = map(*out);
            }
            if let Step::For { end, .. } = &mut s {
                *end = position[*end as usize];
            }
            steps.push(s);
        }
        Reach { steps, regs: next as usize }
    }
}

fn out_mut(s: &mut Step) -> Option<&mut Reg> {
    match s {
        Step::Set { out, .. }
        | Step::Arg { out, .. }
        | Step::Ptr { out, .. }
        | Step::Pid { out, .. }
        | Step::Programs { out, .. }
        | Step::Copy { out, .. }
        | Step::Join { out, .. }
        | Step::Binary { out, .. }
        | Step::Neg { out, .. }
        | Step::Cast { out, .. }
        | Step::PtrAdd { out, .. }
        | Step::Narrow { out, .. } => Some(out),
        Step::For { iv, .. } => Some(iv),
        Step::Access { .. } => None,
    }
}

fn set_out(s: &mut Step, r: Reg) {
    if let Some(out) = out_mut(s) {
        *out = r;
    }
}

fn out_of(s: &Step) -> Reg {
    let mut s = *s;
    out_mut(&mut s).map_or(u32::MAX, |r| *r)
}

/// Applies `m` to every register a step reads.
fn map_inputs(s: &mut Step, m: &mut impl FnMut(Reg) -> Reg) {
    match s {
        Step::Set { .. } | Step::Arg { .. } | Step::Ptr { .. } | Step::Pid { .. } | Step::Programs { .. } => {
        }
        Step::Copy { a, .. } | Step::Neg { a, .. } | Step::Cast { a, .. } => *a = m(*a),
        Step::Join { a, b, .. } | Step::Binary { a, b, .. } => {
            *a = m(*a);
            *b = m(*b);
        }
        Step::PtrAdd { p, a, .. } => {
            *p = m(*p);
            *a = m(*a);
        }
        Step::Narrow { a, bound, .. } => {
            *a = m(*a);
            *bound = m(*bound);
        }
        Step::For { lb, ub, step, .. } => {
            *lb = m(*lb);
            *ub = m(*ub);
            *step = m(*step);
        }
        Step::Access { p, .. } => *p = m(*p),
    }
}
