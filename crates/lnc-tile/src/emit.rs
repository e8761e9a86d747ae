//! Emission: building loop IR — instructions, constants, loop nests, and the loop of a
//! group of sinks.
//!
//! A group over a space `[d0, …, dn]` becomes
//! `for i0 = 0 to d0 step 1 { … for in = 0 to dn step L { body } }`: the last axis is
//! vectorized in tiles of `L = min(lanes, dn)` elements, the others are scalar loops, and
//! axes of extent 1 get no loop. Reductions carry one accumulator tile through the whole
//! nest, initialized to the neutral element (0, −∞/+∞, the integer min/max), and end with
//! `reduce_lanes`. Constants are placed at the function's entry so they are defined once.

use lnc_bir as bir;
use lnc_lir as lir;
use lnc_lir::{Const, DType, Ty};

use crate::TileError;
use crate::affine::Ev;
use crate::eval::{Idx, Point};
use crate::fusion::{Backing, EmitScope, Group, Lowerer, Sink};

/// The most elements one `device_print` of blocks prints (its loop is unrolled).
pub(crate) const MAX_PRINTED: u64 = 4096;

/// Lanes of the tiles over an axis of `extent` elements: `lanes`, or fewer for short
/// axes (a power of two that divides the extent).
pub(crate) fn tile_lanes(lanes: u8, extent: u32) -> u8 {
    let mut l = (lanes as u32).min(extent).max(1);
    while !extent.is_multiple_of(l) {
        l /= 2;
    }
    l as u8
}

/// The neutral element of a reduction.
pub(crate) fn neutral(op: bir::ReduceOp, d: DType) -> Const {
    let bits = d.bits();
    match (op, d.is_float()) {
        // -0.0, not +0.0: `x + -0.0` is `x` bit for bit, so a sum of negative zeros stays
        // -0.0 as IEEE 754 (and the reference interpreter) has it.
        (bir::ReduceOp::Sum, true) => Const::Float(-0.0),
        (bir::ReduceOp::Sum, false) => Const::Int(0),
        (bir::ReduceOp::Max, true) => Const::Float(f64::NEG_INFINITY),
        (bir::ReduceOp::Min, true) => Const::Float(f64::INFINITY),
        (bir::ReduceOp::Max, false) if d.is_signed() => Const::Int(i64::MIN >> (64 - bits)),
        (bir::ReduceOp::Max, false) => Const::Int(0),
        (bir::ReduceOp::Min, false) if d.is_signed() => Const::Int(i64::MAX >> (64 - bits)),
        (bir::ReduceOp::Min, false) => Const::Int(if bits == 64 { -1 } else { (1i64 << bits) - 1 }),
    }
}

/// The binary operation that folds a reduction.
pub(crate) fn combine(op: bir::ReduceOp) -> bir::BinOp {
    match op {
        bir::ReduceOp::Sum => bir::BinOp::Add,
        bir::ReduceOp::Max => bir::BinOp::Max,
        bir::ReduceOp::Min => bir::BinOp::Min,
    }
}

type Body<'b, 'a> =
    dyn FnMut(&mut Lowerer<'a>, lir::Value, &[lir::Value]) -> Result<Vec<lir::Value>, TileError> + 'b;
type NestBody<'b, 'a> =
    dyn FnMut(&mut Lowerer<'a>, &Point, &[lir::Value]) -> Result<Vec<lir::Value>, TileError> + 'b;

impl<'a> Lowerer<'a> {
    /// Appends an instruction with one result.
    pub(crate) fn ins(&mut self, op: lir::Opcode, args: Vec<lir::Value>, ty: Ty) -> lir::Value {
        if matches!(op, lir::Opcode::Arg(_)) {
            return self.b.value_at_entry(op, args, ty, self.span);
        }
        self.b.value(op, args, ty, self.span)
    }

    /// Appends an instruction without results.
    pub(crate) fn ins_effect(&mut self, op: lir::Opcode, args: Vec<lir::Value>) {
        self.b.effect(op, args, self.span);
    }

    /// The type of a loop-IR value.
    pub(crate) fn lty(&self, v: lir::Value) -> Ty {
        self.b.func.ty(v)
    }

    /// A constant, defined once at the function's entry.
    pub(crate) fn constant(&mut self, d: DType, c: Const) -> lir::Value {
        let key = match c {
            Const::Int(i) => (d, i as u64, false),
            Const::Float(x) => (d, x.to_bits(), true),
        };
        if let Some(&v) = self.scopes[0].consts.get(&key) {
            return v;
        }
        let v = self.b.value_at_entry(lir::Opcode::Const(c), vec![], Ty::Scalar(d), lnc_diag::Span::DUMMY);
        self.scopes[0].consts.insert(key, v);
        self.consts.insert(v, c);
        v
    }

    pub(crate) fn iconst(&mut self, d: DType, v: i64) -> lir::Value {
        self.constant(d, Const::Int(v))
    }

    /// The constant a value is, if it is one.
    pub(crate) fn const_of(&self, v: lir::Value) -> Option<Const> {
        self.consts.get(&v).copied()
    }

    fn is_int_const(&self, v: lir::Value, k: i64) -> bool {
        self.const_of(v) == Some(Const::Int(k))
    }

    /// A scalar or tile binary operation, skipping `x + 0`, `x - 0` and `x * 1`.
    pub(crate) fn sbin(&mut self, op: bir::BinOp, a: lir::Value, b: lir::Value) -> lir::Value {
        match op {
            bir::BinOp::Add if self.is_int_const(a, 0) => return b,
            bir::BinOp::Add | bir::BinOp::Sub if self.is_int_const(b, 0) => return a,
            bir::BinOp::Mul if self.is_int_const(a, 1) => return b,
            bir::BinOp::Mul if self.is_int_const(b, 1) => return a,
            bir::BinOp::Mul if self.is_int_const(a, 0) && !self.lty(b).is_tile() => return a,
            bir::BinOp::Mul if self.is_int_const(b, 0) && !self.lty(a).is_tile() => return b,
            _ => {}
        }
        let ty = self.lty(a);
        self.ins(lir::Opcode::Binary(op), vec![a, b], ty)
    }

    /// A conversion, skipped when the type already matches.
    pub(crate) fn cast(&mut self, v: lir::Value, to: Ty) -> lir::Value {
        if self.lty(v) == to {
            return v;
        }
        // Integer constants widen or wrap at compile time.
        if let (Some(Const::Int(k)), Ty::Scalar(d)) = (self.const_of(v), to)
            && d.is_int()
            && d != DType::I1
            && self.lty(v).dtype().is_int()
        {
            let from = self.lty(v).dtype();
            let k = if from.is_signed() || from.bits() == 64 { k } else { k & ((1i64 << from.bits()) - 1) };
            return self.iconst(d, d.wrap_int(k));
        }
        self.ins(lir::Opcode::Cast, vec![v], to)
    }

    /// Starts a nested region with its own caches.
    pub(crate) fn begin_region(&mut self) {
        self.b.begin_region();
        self.scopes.push(EmitScope::default());
    }

    /// Ends the region started last.
    pub(crate) fn end_region(&mut self) -> lir::Region {
        self.scopes.pop();
        self.b.end_region()
    }

    /// `for iv = 0 to extent step step iter(carried)`, the body given the induction
    /// variable and the carried values; returns the loop's results.
    pub(crate) fn for_loop(
        &mut self,
        extent: u32,
        step: u8,
        carried: &[lir::Value],
        body: &mut Body<'_, 'a>,
    ) -> Result<Vec<lir::Value>, TileError> {
        let lb = self.iconst(DType::I32, 0);
        let ub = self.iconst(DType::I32, extent as i64);
        let st = self.iconst(DType::I32, step as i64);
        let tys: Vec<Ty> = carried.iter().map(|&c| self.lty(c)).collect();
        let mut args = vec![lb, ub, st];
        args.extend(carried);
        let f = self.b.inst(lir::Opcode::For, args, &tys, self.span);
        self.begin_region();
        let iv = self.b.region_arg(f, 0, Ty::Scalar(DType::I32));
        let inner: Vec<lir::Value> = tys.iter().map(|&t| self.b.region_arg(f, 0, t)).collect();
        let next = body(self, iv, &inner)?;
        self.ins_effect(lir::Opcode::Yield, next);
        let region = self.end_region();
        self.b.set_regions(f, vec![region]);
        Ok(self.b.func.insts[f].results.clone())
    }

    /// Loops over every axis of `shape` from `axis` on, the last one in tiles of `lanes`.
    fn loop_nest(
        &mut self,
        shape: &[u32],
        lanes: u8,
        mut idx: Vec<Idx>,
        carried: &[lir::Value],
        body: &mut NestBody<'_, 'a>,
    ) -> Result<Vec<lir::Value>, TileError> {
        let axis = idx.len();
        if axis == shape.len() {
            return body(self, &Point { idx, lanes }, carried);
        }
        let ext = shape[axis];
        if ext == 1 {
            idx.push(Idx::Zero);
            return self.loop_nest(shape, lanes, idx, carried, body);
        }
        let tiled = axis + 1 == shape.len() && lanes > 1;
        self.for_loop(ext, if tiled { lanes } else { 1 }, carried, &mut |this, iv, inner| {
            let mut idx = idx.clone();
            idx.push(if tiled { Idx::Tile(iv) } else { Idx::Scalar(iv) });
            this.loop_nest(shape, lanes, idx, inner, body)
        })
    }

    /// The element index of point `idx` in a row-major buffer of `shape`.
    pub(crate) fn linear_index(&mut self, shape: &[u32], idx: &[Idx]) -> lir::Value {
        let key = (shape.to_vec(), idx.to_vec());
        if let Some(&v) = self.scopes.iter().rev().find_map(|s| s.linear.get(&key)) {
            return v;
        }
        let v = self.compute_linear_index(shape, idx);
        self.scopes.last_mut().expect("a scope").linear.insert(key, v);
        v
    }

    fn compute_linear_index(&mut self, shape: &[u32], idx: &[Idx]) -> lir::Value {
        let mut acc: Option<lir::Value> = None;
        let mut stride: i64 = 1;
        for (a, &i) in idx.iter().enumerate().rev() {
            if let Idx::Scalar(v) | Idx::Tile(v) = i {
                let term = if stride == 1 {
                    v
                } else {
                    let s = self.iconst(DType::I32, stride);
                    self.sbin(bir::BinOp::Mul, v, s)
                };
                acc = Some(match acc {
                    None => term,
                    Some(x) => self.sbin(bir::BinOp::Add, x, term),
                });
            }
            stride *= shape[a] as i64;
        }
        match acc {
            Some(v) => v,
            None => self.iconst(DType::I32, 0),
        }
    }

    /// A value as a tile at a tiled point, or as a scalar at a point without tiles.
    pub(crate) fn at_point(&mut self, e: Ev, p: &Point) -> Result<lir::Value, TileError> {
        if p.has_tile() {
            return Ok(self.tile_of(e, p.lanes));
        }
        match e {
            Ev::Uniform(v) => Ok(v),
            _ => Err(TileError::new(self.span, "internal: a tile computed at a point without tiles")),
        }
    }

    /// Writes `v` at point `p` of the buffer `slot` holding a block of `shape`.
    pub(crate) fn scratch_store(
        &mut self,
        slot: u32,
        shape: &[u32],
        p: &Point,
        e: Ev,
    ) -> Result<(), TileError> {
        let index = self.linear_index(shape, &p.idx);
        let v = self.at_point(e, p)?;
        self.ins_effect(lir::Opcode::ScratchStore(slot), vec![index, v]);
        Ok(())
    }

    /// `device_print` with operands, as Triton prints: one line per element of each
    /// operand, `pid (x, y, z) idx (i, j) prefix value` (scalars print `idx ()`). The
    /// elements are unrolled, each line with its index in its own string, so printed blocks
    /// are limited to [`MAX_PRINTED`] elements.
    pub(crate) fn print_blocks(&mut self, i: bir::Inst, prefix: u32) -> Result<(), TileError> {
        let bf = self.bf;
        self.span = bf.span(i);
        let args = bf.inst(i).args.clone();
        let total: u64 = args.iter().map(|&a| bf.ty(a).shape.numel()).sum();
        if total > MAX_PRINTED {
            return Err(self.err(
                i,
                format!("`device_print` of {total} elements: at most {MAX_PRINTED} can be printed at once"),
            ));
        }
        let text = bf.strings.get(prefix as usize).map_or("", |s| s.trim_end()).to_string();
        for a in args {
            let dims = self.shape(a);
            let numel: u32 = dims.iter().product();
            for lin in 0..numel {
                let mut coords = vec![0u32; dims.len()];
                let mut rem = lin;
                for (c, &d) in coords.iter_mut().zip(&dims).rev() {
                    *c = rem % d;
                    rem /= d;
                }
                let idx = coords
                    .iter()
                    .zip(&dims)
                    .map(
                        |(&c, &d)| {
                            if d == 1 { Idx::Zero } else { Idx::Scalar(self.iconst(DType::I32, c as i64)) }
                        },
                    )
                    .collect();
                let p = Point { idx, lanes: 1 };
                let e = self.eval(a, &p)?;
                let v = self.at_point(e, &p)?;
                let label: Vec<String> = coords.iter().map(u32::to_string).collect();
                let k = self.b.func.strings.len() as u32;
                self.b.func.strings.push(format!("idx ({}){text}", label.join(", ")));
                self.ins_effect(lir::Opcode::Print(k), vec![v]);
            }
        }
        Ok(())
    }

    /// Emits the loop nest of a group and binds the results of its reductions.
    pub(crate) fn emit_group(&mut self, g: &Group) -> Result<(), TileError> {
        let bf = self.bf;
        let last = g.shape.last().copied().unwrap_or(1);
        let lanes = if last > 1 { tile_lanes(self.opts.lanes, last) } else { 1 };
        let tiled = lanes > 1;
        let mut inits = Vec::new();
        let mut reductions = Vec::new();
        for s in &g.sinks {
            if let Sink::Reduce(i) = *s {
                let bir::Opcode::Reduce { op, .. } = bf.inst(i).opcode else { unreachable!() };
                let d = bf.ty(bf.inst(i).args[0]).elem.dtype();
                if d == DType::I1 {
                    return Err(
                        self.err(i, "a reduction of `int1` values (convert them to an integer type first)")
                    );
                }
                let n = self.constant(d, neutral(op, d));
                self.span = bf.span(i);
                let init = if tiled { self.ins(lir::Opcode::Splat, vec![n], Ty::Tile(d, lanes)) } else { n };
                inits.push(init);
                reductions.push((i, op, d));
            }
        }
        let finals = self.loop_nest(&g.shape, lanes, Vec::new(), &inits, &mut |this, p, accs| {
            this.tile_body(g, p, accs)
        })?;
        for (&(i, op, d), acc) in reductions.iter().zip(finals) {
            self.span = bf.span(i);
            let s =
                if tiled { self.ins(lir::Opcode::ReduceLanes(op), vec![acc], Ty::Scalar(d)) } else { acc };
            let r = bf.inst(i).results[0];
            if bf.ty(r).is_block() {
                self.backed.insert(r, Backing::Uniform(s));
            } else {
                self.scalars.insert(r, s);
            }
        }
        Ok(())
    }

    /// One tile of a group: every sink in order; returns the next accumulators.
    fn tile_body(&mut self, g: &Group, p: &Point, accs: &[lir::Value]) -> Result<Vec<lir::Value>, TileError> {
        let bf = self.bf;
        let mut next = Vec::new();
        let mut stores = Vec::new();
        for &s in &g.sinks {
            match s {
                Sink::Reduce(i) => {
                    self.span = bf.span(i);
                    let bir::Opcode::Reduce { op, .. } = bf.inst(i).opcode else { unreachable!() };
                    let x = self.eval(bf.inst(i).args[0], p)?;
                    let x = self.at_point(x, p)?;
                    let acc = accs[next.len()];
                    next.push(self.sbin(combine(op), acc, x));
                }
                Sink::Store(i) => {
                    self.span = bf.span(i);
                    self.emit_store(i, p)?;
                }
                Sink::Atomic(i) => {
                    self.span = bf.span(i);
                    self.emit_atomic(i, p)?;
                }
                Sink::Assert(i) => {
                    self.span = bf.span(i);
                    let c = self.eval(bf.inst(i).args[0], p)?;
                    let c = self.at_point(c, p)?;
                    let site = self.assert_site(i);
                    self.ins_effect(lir::Opcode::Assert { site }, vec![c]);
                }
                Sink::ToScratch(v, slot) => {
                    let e = self.eval(v, p)?;
                    let shape = self.shape(v);
                    if g.scratch_stores_last {
                        // Materialize the tile now: the value must be read before any store.
                        let val = self.at_point(e, p)?;
                        stores.push((slot, shape, val));
                    } else {
                        self.scratch_store(slot, &shape, p, e)?;
                    }
                }
                Sink::Materialize(v) => {
                    self.eval(v, p)?;
                }
            }
        }
        for (slot, shape, v) in stores {
            let index = self.linear_index(&shape, &p.idx);
            self.ins_effect(lir::Opcode::ScratchStore(slot), vec![index, v]);
        }
        Ok(next)
    }
}
