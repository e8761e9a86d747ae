//! Evaluation: the elementwise DAG of a block, computed for one tile of a loop.
//!
//! A *point* names the tile: one index per axis of the block — `Zero` for axes of extent
//! 1, a scalar loop index for outer axes, the start of the tile for the last (vectorized)
//! axis. Evaluating a block at a point gives its value there ([`Ev`]):
//! `arange => iota`, `splat(s) => s`, `broadcast`/`expand_dims` => the operand at the
//! point with the broadcast axes at `Zero` (so a row broadcast along a column stays one
//! scalar), elementwise ops lanewise, `load` => a load whose addressing follows its
//! offset's affine form ([`affine`](crate::affine)), a reduction of a 2-D block along its
//! outer axis => an inner loop accumulating tiles, a block in scratch => `scratch_load`.
//! Results are cached per point for the region being built, so a block used by two sinks
//! of one loop is computed once per tile; a block the planner chose to materialize is
//! stored to its scratch buffer right where it is computed.
//!
//! Pointers are evaluated apart: a pointer block is `base + offset`, `base` the scalar
//! pointer that was splat and `offset` the sum of the offsets added to it.
//!
//! A reduction along the last (contiguous) axis into a block that is itself tiled, e.g.
//! row sums `sum(x, axis=1)` of a 2-D block stored as a 1-D block, reduces each lane's
//! row on its own and gathers the lanes through a small scratch buffer.
//!
//! Not handled (a [`TileError`]): blocks of pointers selected from different base
//! pointers, an atomic's result block used at a position other than its own loop's.

use lnc_bir as bir;
use lnc_lir as lir;
use lnc_lir::{Addressing, DType, Ty};

use crate::TileError;
use crate::affine::Ev;
use crate::emit::{combine, neutral, tile_lanes};
use crate::fusion::{Backing, Lowerer};

/// The index of one axis at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Idx {
    /// Index 0 (an axis of extent 1, or broadcast).
    Zero,
    /// A scalar loop index.
    Scalar(lir::Value),
    /// The first index of a tile of the point's lanes.
    Tile(lir::Value),
}

/// A tile of an iteration space.
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub(crate) idx: Vec<Idx>,
    pub(crate) lanes: u8,
}

impl Point {
    pub(crate) fn has_tile(&self) -> bool {
        self.idx.iter().any(|i| matches!(i, Idx::Tile(_)))
    }

    fn with(&self, idx: Vec<Idx>) -> Point {
        Point { idx, lanes: self.lanes }
    }
}

/// A pointer block at a point: `base + offset` (no offset: `base` in every lane).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PtrEv {
    base: lir::Value,
    off: Option<Ev>,
}

fn def_inst(f: &bir::Function, v: bir::Value) -> Option<bir::Inst> {
    match f.values[v].def {
        bir::ValueDef::Result(i, _) => Some(i),
        _ => None,
    }
}

impl Lowerer<'_> {
    fn cached(&self, key: &(bir::Value, Vec<Idx>)) -> Option<Ev> {
        self.scopes.iter().rev().find_map(|s| s.evals.get(key).copied())
    }

    fn cache(&mut self, key: (bir::Value, Vec<Idx>), e: Ev) {
        self.scopes.last_mut().expect("a scope").evals.insert(key, e);
    }

    /// The point of a broadcast operand of shape `src`.
    fn unbroadcast(p: &Point, src: &[u32]) -> Point {
        p.with(p.idx.iter().zip(src).map(|(&i, &d)| if d == 1 { Idx::Zero } else { i }).collect())
    }

    fn without_axis(p: &Point, axis: usize) -> Point {
        let mut idx = p.idx.clone();
        idx.remove(axis);
        p.with(idx)
    }

    /// The value of block (or scalar) `v` at point `p`.
    pub(crate) fn eval(&mut self, v: bir::Value, p: &Point) -> Result<Ev, TileError> {
        if !self.is_block(v) {
            return Ok(Ev::Uniform(self.scalar(v)));
        }
        let key = (v, p.idx.clone());
        if let Some(e) = self.cached(&key) {
            return Ok(e);
        }
        match self.backed.get(&v).copied() {
            Some(Backing::Uniform(s)) => return Ok(Ev::Uniform(s)),
            Some(Backing::Scratch(slot)) => {
                let shape = self.shape(v);
                let index = self.linear_index(&shape, &p.idx);
                let d = self.bf.ty(v).elem.dtype();
                let ty = if p.has_tile() { Ty::Tile(d, p.lanes) } else { Ty::Scalar(d) };
                let x = self.ins(lir::Opcode::ScratchLoad(slot), vec![index], ty);
                let e = if p.has_tile() { Ev::Tile(x) } else { Ev::Uniform(x) };
                self.cache(key, e);
                return Ok(e);
            }
            None => {}
        }
        let bf = self.bf;
        let Some(i) = def_inst(bf, v) else {
            return Err(TileError::new(self.span, "internal: a block region argument without a buffer"));
        };
        let data = bf.inst(i);
        let d = bf.ty(v).elem.dtype();
        let lanes = p.lanes;
        let e = match data.opcode {
            bir::Opcode::Arange { start, .. } => {
                let s = self.iconst(DType::I32, start);
                match p.idx[0] {
                    Idx::Zero => Ev::Uniform(s),
                    Idx::Scalar(i) => Ev::Uniform(self.sbin(bir::BinOp::Add, i, s)),
                    Idx::Tile(j) => {
                        let base = self.sbin(bir::BinOp::Add, j, s);
                        Ev::Affine { base, stride: 1, lanes }
                    }
                }
            }
            bir::Opcode::Splat => Ev::Uniform(self.scalar(data.args[0])),
            bir::Opcode::Broadcast => {
                let src = self.shape(data.args[0]);
                self.eval(data.args[0], &Self::unbroadcast(p, &src))?
            }
            bir::Opcode::ExpandDims(axis) => {
                self.eval(data.args[0], &Self::without_axis(p, axis as usize))?
            }
            bir::Opcode::Binary(op) => {
                let a = self.eval(data.args[0], p)?;
                let b = self.eval(data.args[1], p)?;
                self.ev_binary(op, a, b, lanes)
            }
            bir::Opcode::Cmp(op) => {
                let a = self.eval(data.args[0], p)?;
                let b = self.eval(data.args[1], p)?;
                self.ev_cmp(op, a, b, lanes)
            }
            bir::Opcode::Unary(op) => {
                let a = self.eval(data.args[0], p)?;
                self.ev_unary(op, a, lanes)
            }
            bir::Opcode::Select => {
                let c = self.eval(data.args[0], p)?;
                let a = self.eval(data.args[1], p)?;
                let b = self.eval(data.args[2], p)?;
                self.ev_select(c, a, b, lanes)
            }
            bir::Opcode::Fma => {
                let a = self.eval(data.args[0], p)?;
                let b = self.eval(data.args[1], p)?;
                let c = self.eval(data.args[2], p)?;
                self.ev_fma(a, b, c, lanes)
            }
            bir::Opcode::Cast => {
                let a = self.eval(data.args[0], p)?;
                self.ev_cast(a, d, lanes)
            }
            bir::Opcode::Bitcast => {
                let a = self.eval(data.args[0], p)?;
                self.ev_bitcast(a, d, lanes)
            }
            bir::Opcode::Load { volatile: true, .. } => {
                // The front end and the block-IR verifier refuse these.
                return Err(TileError::new(self.span, "internal: a volatile load of a block"));
            }
            bir::Opcode::Load { has_mask, has_other, .. } => self.emit_load(i, p, has_mask, has_other)?,
            bir::Opcode::Reduce { op, axis, keep_dims } => {
                self.block_reduce(i, p, op, axis as usize, keep_dims)?
            }
            bir::Opcode::Atomic { .. } | bir::Opcode::AtomicCas => {
                return Err(self.err(
                    i,
                    "the result of this atomic is used at other positions than its own; \
                     this is not supported yet",
                ));
            }
            _ => {
                return Err(
                    self.err(i, format!("`{}` on blocks is not supported yet", data.opcode.mnemonic()))
                );
            }
        };
        if let Some(&slot) = self.mat_slots.get(&v) {
            let shape = self.shape(v);
            self.scratch_store(slot, &shape, p, e)?;
        }
        self.cache(key, e);
        Ok(e)
    }

    /// The pointer block (or scalar pointer) `v` at point `p`.
    fn eval_ptr(&mut self, v: bir::Value, p: &Point) -> Result<PtrEv, TileError> {
        if !self.is_block(v) {
            return Ok(PtrEv { base: self.scalar(v), off: None });
        }
        let key = (v, p.idx.clone());
        if let Some(pe) = self.scopes.iter().rev().find_map(|s| s.ptrs.get(&key).copied()) {
            return Ok(pe);
        }
        let bf = self.bf;
        let Some(i) = def_inst(bf, v) else {
            return Err(TileError::new(
                self.span,
                "a block of pointers carried through control flow must move all its lanes by the same \
                 offset (`ptrs += step`); this one does not",
            ));
        };
        let data = bf.inst(i);
        let pe = match data.opcode {
            bir::Opcode::Splat => self.eval_ptr(data.args[0], p)?,
            bir::Opcode::Broadcast => {
                let src = self.shape(data.args[0]);
                self.eval_ptr(data.args[0], &Self::unbroadcast(p, &src))?
            }
            bir::Opcode::ExpandDims(axis) => {
                self.eval_ptr(data.args[0], &Self::without_axis(p, axis as usize))?
            }
            bir::Opcode::PtrAdd => {
                let base = self.eval_ptr(data.args[0], p)?;
                let o = self.eval(data.args[1], p)?;
                let off = match base.off {
                    None => o,
                    Some(a) => self.add_offsets(a, o, p.lanes),
                };
                PtrEv { base: base.base, off: Some(off) }
            }
            bir::Opcode::Select => {
                let c = self.eval(data.args[0], p)?;
                let a = self.eval_ptr(data.args[1], p)?;
                let b = self.eval_ptr(data.args[2], p)?;
                if a.base != b.base {
                    return Err(self.err(
                        i,
                        "`where` selects between pointers with different base pointers; \
                         select offsets from one base instead",
                    ));
                }
                let zero = self.iconst(DType::I64, 0);
                let oa = a.off.unwrap_or(Ev::Uniform(zero));
                let ob = b.off.unwrap_or(Ev::Uniform(zero));
                let (oa, ob) = (self.ev_cast(oa, DType::I64, p.lanes), self.ev_cast(ob, DType::I64, p.lanes));
                PtrEv { base: a.base, off: Some(self.ev_select(c, oa, ob, p.lanes)) }
            }
            _ => {
                return Err(self.err(
                    i,
                    format!("a block of pointers made by `{}` is not supported", data.opcode.mnemonic()),
                ));
            }
        };
        self.scopes.last_mut().expect("a scope").ptrs.insert(key, pe);
        Ok(pe)
    }

    /// Addressing of an access: a scalar one when nothing needs a tile, contiguous for a
    /// stride-1 offset, else a gather. Returns the mode and the offset operand.
    fn address(&mut self, pe: PtrEv, tile: bool, lanes: u8) -> (Addressing, lir::Value) {
        let zero = self.iconst(DType::I32, 0);
        let mut off = pe.off.unwrap_or(Ev::Uniform(zero));
        // Offsets of narrow or unsigned types are extended by their own rules first.
        if !matches!(self.ev_dtype(off), DType::I32 | DType::I64) {
            off = self.ev_cast(off, DType::I64, lanes);
        }
        match off {
            Ev::Uniform(u) if !tile => (Addressing::Scalar, u),
            Ev::Affine { base, stride: 1, .. } => (Addressing::Contiguous, base),
            _ => (Addressing::Gather, self.tile_of(off, lanes)),
        }
    }

    fn is_uniform(e: Option<Ev>) -> bool {
        matches!(e, None | Some(Ev::Uniform(_)))
    }

    /// A mask operand; `None` when it is the constant true.
    fn mask_operand(&mut self, m: Ev, tile: bool, lanes: u8) -> Option<lir::Value> {
        match m {
            Ev::Uniform(v) if self.const_of(v) == Some(lir::Const::Int(1)) => None,
            Ev::Uniform(v) => Some(v),
            _ if tile => Some(self.tile_of(m, lanes)),
            _ => unreachable!("a tile mask at a point without tiles"),
        }
    }

    fn emit_load(
        &mut self,
        i: bir::Inst,
        p: &Point,
        has_mask: bool,
        has_other: bool,
    ) -> Result<Ev, TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let d = bf.ty(data.results[0]).elem.dtype();
        let pe = self.eval_ptr(data.args[0], p)?;
        let mask = if has_mask { Some(self.eval(data.args[1], p)?) } else { None };
        let other = if has_other { Some(self.eval(data.args[1 + has_mask as usize], p)?) } else { None };
        let tile =
            p.has_tile() && !(Self::is_uniform(pe.off) && Self::is_uniform(mask) && Self::is_uniform(other));
        let (addr, off) = self.address(pe, tile, p.lanes);
        let site = self.site(i, data.args[0]);
        let mut args = vec![pe.base, off];
        let mask = mask.and_then(|m| self.mask_operand(m, tile, p.lanes));
        args.extend(mask);
        // `other` of zero is what a masked-off lane gives anyway (`+0.0`: a `-0.0` is kept,
        // its sign shows in a sum of negative zeros).
        let positive_zero =
            |c: Option<lir::Const>| matches!(c, Some(lir::Const::Float(z)) if z.to_bits() == 0);
        let other = match (mask, other) {
            (Some(_), Some(Ev::Uniform(o))) if matches!(self.const_of(o), Some(lir::Const::Int(0))) => None,
            (Some(_), Some(Ev::Uniform(o))) if positive_zero(self.const_of(o)) => None,
            (Some(_), Some(Ev::Uniform(o))) => Some(o),
            (Some(_), Some(o)) => Some(self.tile_of(o, p.lanes)),
            _ => None,
        };
        args.extend(other);
        let ty = if tile { Ty::Tile(d, p.lanes) } else { Ty::Scalar(d) };
        let op = lir::Opcode::Load {
            addr,
            has_mask: mask.is_some(),
            has_other: other.is_some(),
            site,
            volatile: false,
        };
        let x = self.ins(op, args, ty);
        Ok(if tile { Ev::Tile(x) } else { Ev::Uniform(x) })
    }

    /// A store of a block at point `p`.
    pub(crate) fn emit_store(&mut self, i: bir::Inst, p: &Point) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let bir::Opcode::Store { has_mask, check_only } = data.opcode else { unreachable!() };
        let pe = self.eval_ptr(data.args[0], p)?;
        let val = self.eval(data.args[1], p)?;
        let mask = if has_mask { Some(self.eval(data.args[2], p)?) } else { None };
        let tile = p.has_tile()
            && !(Self::is_uniform(pe.off) && Self::is_uniform(Some(val)) && Self::is_uniform(mask));
        let (addr, off) = self.address(pe, tile, p.lanes);
        let site = self.site(i, data.args[0]);
        let v = if tile { self.tile_of(val, p.lanes) } else { self.at_point(val, &p.with(vec![]))? };
        let mut args = vec![pe.base, off, v];
        let mask = mask.and_then(|m| self.mask_operand(m, tile, p.lanes));
        args.extend(mask);
        let op = lir::Opcode::Store { addr, has_mask: mask.is_some(), site, stream: false, check_only };
        self.ins_effect(op, args);
        Ok(())
    }

    /// An atomic on a block at point `p`: one operation per element, so always per lane
    /// at a tiled point.
    pub(crate) fn emit_atomic(&mut self, i: bir::Inst, p: &Point) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let r = data.results[0];
        let d = bf.ty(r).elem.dtype();
        let tile = p.has_tile();
        let pe = self.eval_ptr(data.args[0], p)?;
        let (addr, off) = self.address(pe, tile, p.lanes);
        let site = self.site(i, data.args[0]);
        let mut args = vec![pe.base, off];
        let op = match data.opcode {
            bir::Opcode::Atomic { op, has_mask } => {
                let val = self.eval(data.args[1], p)?;
                args.push(self.at_point(val, p)?);
                let mut masked = false;
                if has_mask {
                    let m = self.eval(data.args[2], p)?;
                    if let Some(m) = self.mask_operand(m, tile, p.lanes) {
                        args.push(m);
                        masked = true;
                    }
                }
                lir::Opcode::Atomic { op, addr, has_mask: masked, site }
            }
            _ => {
                for &a in &data.args[1..3] {
                    let e = self.eval(a, p)?;
                    args.push(self.at_point(e, p)?);
                }
                lir::Opcode::AtomicCas { addr, site }
            }
        };
        let ty = if tile { Ty::Tile(d, p.lanes) } else { Ty::Scalar(d) };
        let old = self.ins(op, args, ty);
        let e = if tile { Ev::Tile(old) } else { Ev::Uniform(old) };
        if let Some(&slot) = self.mat_slots.get(&r) {
            let shape = self.shape(r);
            self.scratch_store(slot, &shape, p, e)?;
        }
        self.cache((r, p.idx.clone()), e);
        Ok(())
    }

    /// A reduction of a block into a block, at point `p` of its result: an inner loop
    /// over the reduced axis.
    fn block_reduce(
        &mut self,
        i: bir::Inst,
        p: &Point,
        op: bir::ReduceOp,
        axis: usize,
        keep_dims: bool,
    ) -> Result<Ev, TileError> {
        let bf = self.bf;
        let x = bf.inst(i).args[0];
        let shape = self.shape(x);
        let d = bf.ty(x).elem.dtype();
        if d == DType::I1 {
            return Err(self.err(i, "a reduction of `int1` values (convert them to an integer type first)"));
        }
        let last = axis + 1 == shape.len();
        let base: Vec<Idx> = if keep_dims {
            p.idx.clone()
        } else {
            let mut v = p.idx.clone();
            v.insert(axis, Idx::Zero);
            v
        };
        let n = self.constant(d, neutral(op, d));
        let bop = combine(op);
        if last && p.has_tile() {
            // Each lane of the result is a row of its own: reduce the rows one by one and
            // gather the scalars into a tile through a small buffer.
            let Some(Idx::Tile(j)) = base.get(axis - 1).copied() else {
                return Err(self.err(i, "internal: a tiled reduction result without a tiled axis"));
            };
            let slot = match self.lane_buffers.get(&i) {
                Some(&s) => s,
                None => {
                    let s = self.b.func.add_scratch(d, p.lanes as u32);
                    self.lane_buffers.insert(i, s);
                    s
                }
            };
            for k in 0..p.lanes {
                let kc = self.iconst(DType::I32, k as i64);
                let row = self.sbin(bir::BinOp::Add, j, kc);
                let mut idx = base.clone();
                idx[axis - 1] = Idx::Scalar(row);
                let s = self.reduce_last_axis(x, &shape, idx, op, n)?;
                self.ins_effect(lir::Opcode::ScratchStore(slot), vec![kc, s]);
            }
            let zero = self.iconst(DType::I32, 0);
            let t = self.ins(lir::Opcode::ScratchLoad(slot), vec![zero], Ty::Tile(d, p.lanes));
            return Ok(Ev::Tile(t));
        }
        if last {
            return Ok(Ev::Uniform(self.reduce_last_axis(x, &shape, base, op, n)?));
        }
        let init = if p.has_tile() { self.ins(lir::Opcode::Splat, vec![n], Ty::Tile(d, p.lanes)) } else { n };
        let acc = self.for_loop(shape[axis], 1, &[init], &mut |this, iv, accs| {
            let mut idx = base.clone();
            idx[axis] = Idx::Scalar(iv);
            let q = p.with(idx);
            let e = this.eval(x, &q)?;
            let e = this.at_point(e, &q)?;
            Ok(vec![this.sbin(bop, accs[0], e)])
        })?[0];
        Ok(if p.has_tile() { Ev::Tile(acc) } else { Ev::Uniform(acc) })
    }

    /// The reduction of `x` along its last axis at the other indices of `idx`, as a scalar:
    /// tiles of the contiguous axis into an accumulator tile, then across its lanes.
    fn reduce_last_axis(
        &mut self,
        x: bir::Value,
        shape: &[u32],
        idx: Vec<Idx>,
        op: bir::ReduceOp,
        neutral: lir::Value,
    ) -> Result<lir::Value, TileError> {
        let axis = shape.len() - 1;
        let d = self.lty(neutral).dtype();
        let lanes = tile_lanes(self.opts.lanes, shape[axis]);
        let tiled = lanes > 1;
        let init =
            if tiled { self.ins(lir::Opcode::Splat, vec![neutral], Ty::Tile(d, lanes)) } else { neutral };
        let step = if tiled { lanes } else { 1 };
        let bop = combine(op);
        let acc = self.for_loop(shape[axis], step, &[init], &mut |this, iv, accs| {
            let mut idx = idx.clone();
            idx[axis] = if tiled { Idx::Tile(iv) } else { Idx::Scalar(iv) };
            let q = Point { idx, lanes };
            let e = this.eval(x, &q)?;
            let e = this.at_point(e, &q)?;
            Ok(vec![this.sbin(bop, accs[0], e)])
        })?[0];
        Ok(if tiled { self.ins(lir::Opcode::ReduceLanes(op), vec![acc], Ty::Scalar(d)) } else { acc })
    }
}
