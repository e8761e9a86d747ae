//! `tl.randint`, `tl.rand`, `tl.randn` and their `4x` forms, and `tl.umulhi`: Triton's
//! counter-based generator (Philox 4x32 with ten rounds by default), expanded into block
//! IR elementwise operations.
//!
//! Triton writes these functions in its own language (`triton/language/random.py`); lnc
//! lowers the same steps through the same operators, so that promotion, wrapping and
//! conversions are those of any kernel's code and the numbers are Triton's bit for bit:
//! - the seed, converted to `uint64`, is the key: its low and high 32 bits;
//! - the offset is the counter: its low 32 bits, its high 32 bits when it has more (else
//!   0), then two zero words;
//! - each round multiplies two words by Philox's constants (the high halves through
//!   `umulhi`), mixes them with the other words and the key, and adds the Weyl constants to
//!   the key;
//! - `randint` is the first word (`uint32`); `rand` turns a word into `x · 4.6566127342e-10`
//!   after folding negative `int32` values onto `~x`, a float in [0, 1); `randn` applies
//!   the Box-Muller transform to the first two uniforms.
//!
//! `randn` computes `log`, `sqrt`, `cos` and `sin` in `float32` with lnc's functions, which
//! are within two ulps of NumPy's (Triton's interpreter) but not always the same bits.

use lnc_bir::{BinOp as BBin, DType, Opcode, UnOp, Value};
use lnc_diag::{Diagnostic, Span};
use lnc_syntax::ast::{BinOp, CmpOp, UnaryOp};

use crate::args::CallArgs;
use crate::diag::type_str;
use crate::lower::{Failed, Lowerer, R};
use crate::value::{Cv, Opnd, Val};

/// Philox's default number of rounds (`N_ROUNDS_DEFAULT`).
const DEFAULT_ROUNDS: i128 = 10;

/// The most rounds a call may ask for: each is about a dozen block operations.
const MAX_ROUNDS: i128 = 1 << 10;

/// Philox 4x32's round multipliers and key increments (Salmon et al., 2011).
const ROUND_A: i128 = 0xD251_1F53;
const ROUND_B: i128 = 0xCD9E_8D57;
const KEY_A: i128 = 0x9E37_79B9;
const KEY_B: i128 = 0xBB67_AE85;

/// The largest `int32` times this is below 1.0 in `float32` (Triton's `uint_to_uniform_float`).
const SCALE_32: f64 = 4.6566127342e-10;

/// Which generator function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RandomFn {
    Randint,
    Randint4x,
    Rand,
    Rand4x,
    Randn,
    Randn4x,
}

impl RandomFn {
    pub(crate) fn from_name(name: &str) -> Option<RandomFn> {
        Some(match name {
            "randint" => RandomFn::Randint,
            "randint4x" => RandomFn::Randint4x,
            "rand" => RandomFn::Rand,
            "rand4x" => RandomFn::Rand4x,
            "randn" => RandomFn::Randn,
            "randn4x" => RandomFn::Randn4x,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            RandomFn::Randint => "tl.randint",
            RandomFn::Randint4x => "tl.randint4x",
            RandomFn::Rand => "tl.rand",
            RandomFn::Rand4x => "tl.rand4x",
            RandomFn::Randn => "tl.randn",
            RandomFn::Randn4x => "tl.randn4x",
        }
    }
}

fn int(k: i128) -> Val {
    Val::Const(Cv::Int(k))
}

impl<'a, 'f> Lowerer<'a, 'f> {
    /// `tl.randint(seed, offset, n_rounds=10)` and the other generator functions.
    pub(crate) fn random(&mut self, f: RandomFn, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind(f.name(), &["seed", "offset", "n_rounds"], 2, args)?;
        let seed = a[0].clone().ok_or(Failed)?;
        let offset = a[1].clone().ok_or(Failed)?;
        let rounds = match &a[2] {
            Some(o) => {
                let n = self.const_int(o, "`n_rounds`")?;
                if !(0..=MAX_ROUNDS).contains(&n) {
                    let e = Diagnostic::error(
                        format!("`n_rounds` must be between 0 and {MAX_ROUNDS}, got {n}"),
                        o.span,
                        "",
                    );
                    return self.fail(e);
                }
                n
            }
            None => DEFAULT_ROUNDS,
        };
        let words = self.philox(&seed, &offset, rounds, span)?;
        match f {
            RandomFn::Randint => Ok(words[0].clone()),
            RandomFn::Randint4x => Ok(Val::tuple(words.to_vec())),
            RandomFn::Rand => self.uniform(&words[0], span),
            RandomFn::Rand4x => {
                let mut u = Vec::with_capacity(4);
                for w in &words {
                    u.push(self.uniform(w, span)?);
                }
                Ok(Val::tuple(u))
            }
            RandomFn::Randn => {
                let u1 = self.uniform(&words[0], span)?;
                let u2 = self.uniform(&words[1], span)?;
                Ok(self.box_muller(&u1, &u2, span)?.0)
            }
            RandomFn::Randn4x => {
                let mut u = Vec::with_capacity(4);
                for w in &words {
                    u.push(self.uniform(w, span)?);
                }
                let (n1, n2) = self.box_muller(&u[0], &u[1], span)?;
                let (n3, n4) = self.box_muller(&u[2], &u[3], span)?;
                Ok(Val::tuple(vec![n1, n2, n3, n4]))
            }
        }
    }

    /// `tl.umulhi(x, y)`: the high half of the double-width product of two integers of
    /// 32 or 64 bits, multiplied as unsigned numbers (signed ones by their bits) and
    /// returned in their common type.
    pub(crate) fn umulhi_call(&mut self, args: CallArgs) -> R<Val> {
        let span = args.span;
        let a = self.bind("tl.umulhi", &["x", "y"], 2, args)?;
        let (x, y) = (a[0].clone().ok_or(Failed)?, a[1].clone().ok_or(Failed)?);
        self.umulhi(&x.v, &y.v, x.span, y.span, span)
    }

    fn umulhi(&mut self, x: &Val, y: &Val, xspan: Span, yspan: Span, span: Span) -> R<Val> {
        let (x, y) = (Opnd::new(x.clone(), xspan), Opnd::new(y.clone(), yspan));
        let (a, b, d) = self.numeric_pair(&x, &y, false, "umulhi", span)?;
        if !matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::U64) {
            let t = self.ty(a);
            let e = Diagnostic::error(
                format!("`tl.umulhi` needs 32- or 64-bit integers, got {}", type_str(t)),
                span,
                "",
            )
            .with_help("convert first, e.g. `x.to(tl.uint32)`");
            return self.fail(e);
        }
        let (u, wide) = if d.bits() == 32 { (DType::U32, DType::U64) } else { (DType::U64, DType::U64) };
        let t = self.ty(a).with_elem(lnc_bir::Elem::Scalar(u));
        let bits = |me: &mut Self, v: Value| -> Value {
            if d == u { v } else { me.emit(Opcode::Bitcast, vec![v], t, span) }
        };
        let (a, b) = (bits(self, a), bits(self, b));
        let hi = if d.bits() == 32 {
            let wa = self.cast(a, wide, span);
            let wb = self.cast(b, wide, span);
            let p = self.emit(Opcode::Binary(BBin::Mul), vec![wa, wb], self.ty(wa), span);
            let k = self.full_value(self.ty(p).shape, &Cv::Int(32), wide, span);
            let h = self.emit(Opcode::Binary(BBin::Shr), vec![p, k], self.ty(p), span);
            self.cast(h, u, span)
        } else {
            self.umulhi64(a, b, span)
        };
        let back = self.ty(hi).with_elem(lnc_bir::Elem::Scalar(d));
        Ok(Val::Tensor(if d == u { hi } else { self.emit(Opcode::Bitcast, vec![hi], back, span) }))
    }

    /// The high 64 bits of the 128-bit product of two `uint64` values, from four products
    /// of 32-bit halves. The middle sum cannot overflow: at most `3 · (2³² − 1) + (2³² − 1)²
    /// = 2⁶⁴ − 1 − … < 2⁶⁴`.
    fn umulhi64(&mut self, a: Value, b: Value, span: Span) -> Value {
        let t = self.ty(a);
        let shape = t.shape;
        let k32 = self.full_value(shape, &Cv::Int(32), DType::U64, span);
        let low = self.full_value(shape, &Cv::Int(0xFFFF_FFFF), DType::U64, span);
        let bin =
            |me: &mut Self, op: BBin, x: Value, y: Value| me.emit(Opcode::Binary(op), vec![x, y], t, span);
        let (a_lo, a_hi) = (bin(self, BBin::And, a, low), bin(self, BBin::Shr, a, k32));
        let (b_lo, b_hi) = (bin(self, BBin::And, b, low), bin(self, BBin::Shr, b, k32));
        let lo_lo = bin(self, BBin::Mul, a_lo, b_lo);
        let hi_lo = bin(self, BBin::Mul, a_hi, b_lo);
        let lo_hi = bin(self, BBin::Mul, a_lo, b_hi);
        let hi_hi = bin(self, BBin::Mul, a_hi, b_hi);
        let carry = bin(self, BBin::Shr, lo_lo, k32);
        let mid = bin(self, BBin::And, hi_lo, low);
        let cross = bin(self, BBin::Add, carry, mid);
        let cross = bin(self, BBin::Add, cross, lo_hi);
        let top = bin(self, BBin::Shr, hi_lo, k32);
        let hi = bin(self, BBin::Add, hi_hi, top);
        let cross_hi = bin(self, BBin::Shr, cross, k32);
        bin(self, BBin::Add, hi, cross_hi)
    }

    fn op(&mut self, op: BinOp, a: &Val, b: &Val, span: Span) -> R<Val> {
        self.binary(op, Opnd::new(a.clone(), span), Opnd::new(b.clone(), span), span)
    }

    fn to(&mut self, x: &Val, d: DType, bitcast: bool, span: Span) -> R<Val> {
        self.convert(&Opnd::new(x.clone(), span), d, bitcast, span)
    }

    /// Philox's four output words for counter `offset` and key `seed` (Triton's
    /// `randint4x` → `philox` → `philox_impl`).
    fn philox(&mut self, seed: &Opnd, offset: &Opnd, rounds: i128, span: Span) -> R<[Val; 4]> {
        let seed_dtype = match &seed.v {
            Val::Const(Cv::Int(_) | Cv::Bool(_)) => Some(DType::I64),
            Val::Tensor(v) => self.ty(*v).num_dtype(),
            _ => None,
        };
        if !seed_dtype.is_some_and(|d| d.is_int() || d.is_bool()) {
            let what = match &seed.v {
                Val::Tensor(v) => type_str(self.ty(*v)),
                other => self.describe(other),
            };
            let e = Diagnostic::error(format!("the seed must be an integer, got {what}"), seed.span, "");
            return self.fail(e);
        }
        let offset_dtype = match &offset.v {
            Val::Tensor(v) if !self.ty(*v).elem.is_ptr() => self.ty(*v).num_dtype(),
            Val::Const(c) if c.is_number() => Some(self.literal_dtype(c, offset.span)?),
            _ => None,
        };
        let Some(offset_dtype) = offset_dtype else {
            let what = self.describe(&offset.v);
            let e = Diagnostic::error(
                format!("the offset must be a number or a block, got {what}"),
                offset.span,
                "",
            );
            return self.fail(e);
        };
        // seed = seed.to(tl.uint64); the key is its two 32-bit halves.
        let seed = self.to(&seed.v, DType::U64, false, seed.span)?;
        let mask = int(0xFFFF_FFFF);
        let hi = self.op(BinOp::Shr, &seed, &int(32), span)?;
        let hi = self.op(BinOp::BitAnd, &hi, &mask, span)?;
        let mut k1 = self.to(&hi, DType::U32, false, span)?;
        let lo = self.op(BinOp::BitAnd, &seed, &mask, span)?;
        let mut k0 = self.to(&lo, DType::U32, false, span)?;
        // The counter: the offset's low word, its high word (or 0), two zero words.
        let offset_v = match &offset.v {
            Val::Const(c) => Val::Tensor(self.const_of(c, offset_dtype, offset.span)),
            v => v.clone(),
        };
        let mut c0 = self.to(&offset_v, DType::U32, false, offset.span)?;
        let zero = self.op(BinOp::Mul, &c0, &int(0), span)?;
        let mut c1 = if offset_dtype.bits() > 32 {
            let h = self.op(BinOp::Shr, &offset_v, &int(32), span)?;
            self.to(&h, DType::U32, false, span)?
        } else {
            zero.clone()
        };
        let (mut c2, mut c3) = (zero.clone(), zero);
        for _ in 0..rounds {
            let (p0, p2) = (c0.clone(), c2.clone());
            let h = self.umulhi(&int(ROUND_B), &p2, span, span, span)?;
            let h = self.op(BinOp::BitXor, &h, &c1, span)?;
            c0 = self.op(BinOp::BitXor, &h, &k0, span)?;
            let h = self.umulhi(&int(ROUND_A), &p0, span, span, span)?;
            let h = self.op(BinOp::BitXor, &h, &c3, span)?;
            c2 = self.op(BinOp::BitXor, &h, &k1, span)?;
            c1 = self.op(BinOp::Mul, &int(ROUND_B), &p2, span)?;
            c3 = self.op(BinOp::Mul, &int(ROUND_A), &p0, span)?;
            k0 = self.op(BinOp::Add, &k0, &int(KEY_A), span)?;
            k1 = self.op(BinOp::Add, &k1, &int(KEY_B), span)?;
        }
        Ok([c0, c1, c2, c3])
    }

    /// Triton's `uint_to_uniform_float` of a `uint32` word: a `float32` in [0, 1).
    fn uniform(&mut self, x: &Val, span: Span) -> R<Val> {
        let x = self.to(x, DType::I32, true, span)?;
        // A float assigned to a name is a `float32` scalar in Triton.
        let scale = Val::Tensor(self.const_of(&Cv::Float(SCALE_32), DType::F32, span));
        let neg = self.compare(CmpOp::Lt, Opnd::new(x.clone(), span), Opnd::new(int(0), span), span)?;
        let inv = self.unary(UnaryOp::Invert, Opnd::new(x.clone(), span), span)?;
        let folded = self.select(&neg, &inv, &x, span)?;
        self.op(BinOp::Mul, &folded, &scale, span)
    }

    /// `tl.where(c, a, b)` of values of one type and shape.
    fn select(&mut self, c: &Val, a: &Val, b: &Val, span: Span) -> R<Val> {
        let (Val::Tensor(c), Val::Tensor(a), Val::Tensor(b)) = (c, a, b) else {
            return Err(Failed);
        };
        let t = self.ty(*a);
        Ok(Val::Tensor(self.emit(Opcode::Select, vec![*c, *a, *b], t, span)))
    }

    /// Triton's `pair_uniform_to_normal`: two normal samples from two uniform ones.
    fn box_muller(&mut self, u1: &Val, u2: &Val, span: Span) -> R<(Val, Val)> {
        let (Val::Tensor(u1v), Val::Tensor(_)) = (u1, u2) else {
            return Err(Failed);
        };
        let t = self.ty(*u1v);
        // u1 = tl.maximum(1.0e-7, u1)
        let floor = self.const_of(&Cv::Float(1.0e-7), DType::F32, span);
        let floor = self.splat(floor, t.shape, span);
        let u1 = self.emit(Opcode::Binary(BBin::Max), vec![floor, *u1v], t, span);
        // Triton writes 6.283185307179586, which is `TAU`.
        let th = self.op(BinOp::Mul, &Val::Const(Cv::Float(std::f64::consts::TAU)), u2, span)?;
        let l = self.emit(Opcode::Unary(UnOp::Log), vec![u1], t, span);
        let m = self.op(BinOp::Mul, &Val::Const(Cv::Float(-2.0)), &Val::Tensor(l), span)?;
        let Val::Tensor(m) = m else { return Err(Failed) };
        let r = Val::Tensor(self.emit(Opcode::Unary(UnOp::Sqrt), vec![m], t, span));
        let Val::Tensor(thv) = th else { return Err(Failed) };
        let cos = Val::Tensor(self.emit(Opcode::Unary(UnOp::Cos), vec![thv], t, span));
        let sin = Val::Tensor(self.emit(Opcode::Unary(UnOp::Sin), vec![thv], t, span));
        Ok((self.op(BinOp::Mul, &r, &cos, span)?, self.op(BinOp::Mul, &r, &sin, span)?))
    }
}
