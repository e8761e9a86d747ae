//! Affine offsets: `a + b·lane`, the form that makes an access contiguous.
//!
//! While a tile is computed ([`eval`](crate::eval)), every integer value is kept
//! symbolically as long as possible:
//! - `Uniform(x)`: every lane is the scalar `x` (splats, scalars, axes not tiled);
//! - `Affine { base, stride }`: lane `k` is `base + stride·k` (`i32`/`i64` only);
//! - `Tile(t)`: anything else, an explicit tile.
//!
//! The rules (`u` uniform, `c` a constant, `A(b, s)` affine):
//! `arange at tile j => A(j + start, 1)`, `A(b, s) ± u => A(b ± u, s)`,
//! `A(b1, s1) ± A(b2, s2) => A(b1 ± b2, s1 ± s2)`, `A(b, s) · c => A(b·c, s·c)`,
//! `A(b, s) << c => A(b << c, s << c)`, `-A(b, s) => A(-b, -s)`,
//! `cast i32 <-> i64: A(b, s) => A(cast b, s)`, `A(b, 0) => u`. Anything else turns its
//! operands into tiles (`splat`, `iota`) and computes lanewise.
//!
//! An access whose offset ends `Uniform` is a scalar access, `A(b, 1)` a contiguous one
//! at `b`, anything else a gather. Widening an `i32` offset assumes it does not wrap
//! inside one tile (offsets of one tile of a Triton kernel are within the block's range).
//!
//! [`stride`] is the same analysis on the block IR, for the planner: the per-lane stride
//! of a 1-D offset or pointer block, when it is a constant.

use lnc_bir as bir;
use lnc_lir as lir;
use lnc_lir::{Const, DType, Ty};

use crate::fusion::Lowerer;

/// A block's value in the tile being computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// Every lane equals this scalar.
    Uniform(lir::Value),
    /// Lane `k` is `base + stride·k`.
    Affine { base: lir::Value, stride: i64, lanes: u8 },
    /// An explicit tile.
    Tile(lir::Value),
}

fn affine_dtype(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64)
}

/// A stride as the dtype's arithmetic computes it.
fn wrap(d: DType, s: i64) -> i64 {
    if d == DType::I32 { s as i32 as i64 } else { s }
}

impl Lowerer<'_> {
    /// The dtype of a value.
    pub(crate) fn ev_dtype(&self, e: Ev) -> DType {
        match e {
            Ev::Uniform(v) | Ev::Tile(v) | Ev::Affine { base: v, .. } => self.lty(v).dtype(),
        }
    }

    fn affine(&self, base: lir::Value, stride: i64, lanes: u8) -> Ev {
        let stride = wrap(self.lty(base).dtype(), stride);
        if stride == 0 { Ev::Uniform(base) } else { Ev::Affine { base, stride, lanes } }
    }

    /// The value as an explicit tile of `lanes`.
    pub(crate) fn tile_of(&mut self, e: Ev, lanes: u8) -> lir::Value {
        match e {
            Ev::Tile(t) => t,
            Ev::Uniform(v) => {
                let d = self.lty(v).dtype();
                self.ins(lir::Opcode::Splat, vec![v], Ty::Tile(d, lanes))
            }
            Ev::Affine { base, stride, lanes } => {
                let d = self.lty(base).dtype();
                let ty = Ty::Tile(d, lanes);
                if stride == 1 {
                    return self.ins(lir::Opcode::Iota, vec![base], ty);
                }
                let zero = self.iconst(d, 0);
                let iota = self.ins(lir::Opcode::Iota, vec![zero], ty);
                let s = self.iconst(d, stride);
                let s = self.ins(lir::Opcode::Splat, vec![s], ty);
                let scaled = self.sbin(bir::BinOp::Mul, iota, s);
                let b = self.ins(lir::Opcode::Splat, vec![base], ty);
                self.sbin(bir::BinOp::Add, scaled, b)
            }
        }
    }

    fn int_const(&self, e: Ev) -> Option<i64> {
        match e {
            Ev::Uniform(v) => match self.const_of(v) {
                Some(Const::Int(k)) => Some(k),
                _ => None,
            },
            _ => None,
        }
    }

    /// Lanewise `a op b`, keeping affine forms where the rules allow.
    pub(crate) fn ev_binary(&mut self, op: bir::BinOp, a: Ev, b: Ev, lanes: u8) -> Ev {
        use bir::BinOp::*;
        if let (Ev::Uniform(x), Ev::Uniform(y)) = (a, b) {
            return Ev::Uniform(self.sbin(op, x, y));
        }
        let d = self.ev_dtype(a);
        if affine_dtype(d) {
            match (op, a, b) {
                (Add, Ev::Affine { base, stride, .. }, Ev::Uniform(u))
                | (Add, Ev::Uniform(u), Ev::Affine { base, stride, .. }) => {
                    let nb = self.sbin(Add, base, u);
                    return self.affine(nb, stride, lanes);
                }
                (
                    Add | Sub,
                    Ev::Affine { base: b1, stride: s1, .. },
                    Ev::Affine { base: b2, stride: s2, .. },
                ) => {
                    let nb = self.sbin(op, b1, b2);
                    let s = if op == Add { s1.wrapping_add(s2) } else { s1.wrapping_sub(s2) };
                    return self.affine(nb, s, lanes);
                }
                (Sub, Ev::Affine { base, stride, .. }, Ev::Uniform(u)) => {
                    let nb = self.sbin(Sub, base, u);
                    return self.affine(nb, stride, lanes);
                }
                (Sub, Ev::Uniform(u), Ev::Affine { base, stride, .. }) => {
                    let nb = self.sbin(Sub, u, base);
                    return self.affine(nb, stride.wrapping_neg(), lanes);
                }
                (Mul, Ev::Affine { base, stride, .. }, c) | (Mul, c, Ev::Affine { base, stride, .. })
                    if self.int_const(c).is_some() =>
                {
                    let k = self.int_const(c).expect("checked");
                    let Ev::Uniform(cv) = c else { unreachable!() };
                    let nb = self.sbin(Mul, base, cv);
                    return self.affine(nb, stride.wrapping_mul(k), lanes);
                }
                (Shl, Ev::Affine { base, stride, .. }, c)
                    if self.int_const(c).is_some_and(|k| (0..d.bits() as i64).contains(&k)) =>
                {
                    let k = self.int_const(c).expect("checked");
                    let Ev::Uniform(cv) = c else { unreachable!() };
                    let nb = self.sbin(Shl, base, cv);
                    return self.affine(nb, stride.wrapping_shl(k as u32), lanes);
                }
                _ => {}
            }
        }
        let (x, y) = (self.tile_of(a, lanes), self.tile_of(b, lanes));
        Ev::Tile(self.sbin(op, x, y))
    }

    /// Lanewise comparison.
    pub(crate) fn ev_cmp(&mut self, op: bir::CmpOp, a: Ev, b: Ev, lanes: u8) -> Ev {
        if let (Ev::Uniform(x), Ev::Uniform(y)) = (a, b) {
            return Ev::Uniform(self.ins(lir::Opcode::Cmp(op), vec![x, y], Ty::Scalar(DType::I1)));
        }
        let (x, y) = (self.tile_of(a, lanes), self.tile_of(b, lanes));
        Ev::Tile(self.ins(lir::Opcode::Cmp(op), vec![x, y], Ty::Tile(DType::I1, lanes)))
    }

    /// Lanewise unary operation.
    pub(crate) fn ev_unary(&mut self, op: bir::UnOp, a: Ev, lanes: u8) -> Ev {
        match a {
            Ev::Uniform(x) => {
                let ty = self.lty(x);
                Ev::Uniform(self.ins(lir::Opcode::Unary(op), vec![x], ty))
            }
            Ev::Affine { base, stride, .. } if op == bir::UnOp::Neg => {
                let ty = self.lty(base);
                let nb = self.ins(lir::Opcode::Unary(op), vec![base], ty);
                self.affine(nb, stride.wrapping_neg(), lanes)
            }
            _ => {
                let x = self.tile_of(a, lanes);
                let ty = self.lty(x);
                Ev::Tile(self.ins(lir::Opcode::Unary(op), vec![x], ty))
            }
        }
    }

    /// Lanewise `c ? a : b`; a uniform condition stays scalar.
    pub(crate) fn ev_select(&mut self, c: Ev, a: Ev, b: Ev, lanes: u8) -> Ev {
        if let (Ev::Uniform(c), Ev::Uniform(x), Ev::Uniform(y)) = (c, a, b) {
            let ty = self.lty(x);
            return Ev::Uniform(self.ins(lir::Opcode::Select, vec![c, x, y], ty));
        }
        let c = match c {
            Ev::Uniform(c) => c,
            _ => self.tile_of(c, lanes),
        };
        let (x, y) = (self.tile_of(a, lanes), self.tile_of(b, lanes));
        let ty = self.lty(x);
        Ev::Tile(self.ins(lir::Opcode::Select, vec![c, x, y], ty))
    }

    /// Lanewise fused multiply-add `a · b + c`.
    pub(crate) fn ev_fma(&mut self, a: Ev, b: Ev, c: Ev, lanes: u8) -> Ev {
        if let (Ev::Uniform(x), Ev::Uniform(y), Ev::Uniform(z)) = (a, b, c) {
            let ty = self.lty(x);
            return Ev::Uniform(self.ins(lir::Opcode::Fma, vec![x, y, z], ty));
        }
        let (x, y, z) = (self.tile_of(a, lanes), self.tile_of(b, lanes), self.tile_of(c, lanes));
        let ty = self.lty(x);
        Ev::Tile(self.ins(lir::Opcode::Fma, vec![x, y, z], ty))
    }

    /// Lanewise numeric conversion to `to`.
    pub(crate) fn ev_cast(&mut self, a: Ev, to: DType, lanes: u8) -> Ev {
        if self.ev_dtype(a) == to {
            return a;
        }
        match a {
            Ev::Uniform(x) => Ev::Uniform(self.cast(x, Ty::Scalar(to))),
            Ev::Affine { base, stride, .. } if affine_dtype(to) => {
                let nb = self.cast(base, Ty::Scalar(to));
                self.affine(nb, stride, lanes)
            }
            _ => {
                let x = self.tile_of(a, lanes);
                Ev::Tile(self.cast(x, Ty::Tile(to, lanes)))
            }
        }
    }

    /// Lanewise reinterpretation as `to`.
    pub(crate) fn ev_bitcast(&mut self, a: Ev, to: DType, lanes: u8) -> Ev {
        match a {
            Ev::Uniform(x) => Ev::Uniform(self.ins(lir::Opcode::Bitcast, vec![x], Ty::Scalar(to))),
            _ => {
                let x = self.tile_of(a, lanes);
                Ev::Tile(self.ins(lir::Opcode::Bitcast, vec![x], Ty::Tile(to, lanes)))
            }
        }
    }

    /// The sum of two offsets; offsets of different pointer additions are added in
    /// `i64`, as the pointer arithmetic they replace would.
    pub(crate) fn add_offsets(&mut self, a: Ev, b: Ev, lanes: u8) -> Ev {
        let a = self.ev_cast(a, DType::I64, lanes);
        let b = self.ev_cast(b, DType::I64, lanes);
        self.ev_binary(bir::BinOp::Add, a, b, lanes)
    }
}

/// The constant per-lane stride of a 1-D integer or pointer block, if it has one.
pub(crate) fn stride(f: &bir::Function, v: bir::Value) -> Option<i64> {
    let t = f.ty(v);
    if !t.is_block() {
        return Some(0);
    }
    if t.shape.rank() != 1 {
        return None;
    }
    let bir::ValueDef::Result(i, _) = f.values[v].def else {
        return None;
    };
    let data = f.inst(i);
    let int_splat = |v: bir::Value| -> Option<i64> {
        let bir::ValueDef::Result(s, _) = f.values[v].def else { return None };
        if f.inst(s).opcode != bir::Opcode::Splat {
            return None;
        }
        let bir::ValueDef::Result(c, _) = f.values[f.inst(s).args[0]].def else { return None };
        match f.inst(c).opcode {
            bir::Opcode::Const(Const::Int(k)) => Some(k),
            _ => None,
        }
    };
    match data.opcode {
        bir::Opcode::Arange { .. } => Some(1),
        bir::Opcode::Splat => Some(0),
        bir::Opcode::PtrAdd => Some(stride(f, data.args[0])?.wrapping_add(stride(f, data.args[1])?)),
        bir::Opcode::Cast
            if affine_dtype(t.elem.dtype()) && affine_dtype(f.ty(data.args[0]).elem.dtype()) =>
        {
            stride(f, data.args[0])
        }
        bir::Opcode::Binary(bir::BinOp::Add) => {
            Some(stride(f, data.args[0])?.wrapping_add(stride(f, data.args[1])?))
        }
        bir::Opcode::Binary(bir::BinOp::Sub) => {
            Some(stride(f, data.args[0])?.wrapping_sub(stride(f, data.args[1])?))
        }
        bir::Opcode::Binary(bir::BinOp::Mul) => match (int_splat(data.args[0]), int_splat(data.args[1])) {
            (Some(k), _) => Some(stride(f, data.args[1])?.wrapping_mul(k)),
            (_, Some(k)) => Some(stride(f, data.args[0])?.wrapping_mul(k)),
            _ => None,
        },
        _ => None,
    }
}

/// True when `a` and `b` compute the same values: the same value, or the same pure
/// instruction on operands that compute the same values (the front end does not merge
/// `X + i` written twice, and a store through one and a load through the other touch
/// the same positions).
pub(crate) fn same_values(f: &bir::Function, a: bir::Value, b: bir::Value) -> bool {
    fn go(f: &bir::Function, a: bir::Value, b: bir::Value, fuel: &mut u32) -> bool {
        if a == b {
            return true;
        }
        if *fuel == 0 || f.ty(a) != f.ty(b) {
            return false;
        }
        *fuel -= 1;
        let (bir::ValueDef::Result(i, 0), bir::ValueDef::Result(j, 0)) = (f.values[a].def, f.values[b].def)
        else {
            return false;
        };
        let (x, y) = (f.inst(i), f.inst(j));
        // Program ids and constants are the same wherever computed; other pure ops
        // compare their operands.
        x.opcode == y.opcode
            && x.opcode.is_pure()
            && x.regions.is_empty()
            && x.args.len() == y.args.len()
            && x.args.iter().zip(&y.args).all(|(&p, &q)| go(f, p, q, fuel))
    }
    go(f, a, b, &mut 256)
}
