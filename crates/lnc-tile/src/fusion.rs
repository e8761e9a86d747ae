//! Fusion: which sinks share a loop, which blocks live in scratch, and the walk over the
//! block IR that drives everything.
//!
//! The block IR is walked in program order, one region at a time. Each region keeps an
//! *open group*: sinks over the same iteration space waiting to be emitted as one loop
//! nest. A sink joins the open group unless
//! - its space differs (shapes must be equal),
//! - it needs a scalar computed from a sink of the group (a *tainted* scalar: pure scalar
//!   instructions that depend on a group's results are deferred until after its loop, so
//!   two independent reductions still share a loop even with `/ N` between them),
//! - it touches an argument's memory that the group also touches with a write, at other
//!   positions (*hazard*): one sink storing `p[i]` and another loading or storing the same
//!   argument share a loop only through the same pointer block with a nonzero stride in a
//!   1-D space, where every tile reads a position before any tile writes it again,
//! - it is an atomic (atomics get a loop of their own: they order memory).
//!
//! Otherwise the group is *flushed*: its loop nest is emitted ([`emit`](crate::emit)),
//! then the deferred scalars. Scalar instructions with memory effects and control flow
//! flush first, so memory effects keep their program order.
//!
//! Loads are lazy: a load of a block is computed in the loop of its first consumer. That
//! is only right while its memory is unchanged, so before anything writes an argument
//! (a store, an atomic — an atomic may synchronize with other programs, so it counts as
//! writing every argument — or control flow containing those), every pending load of that
//! argument that is still needed afterwards is *materialized*: computed in the open
//! group (or a new one) and kept in a scratch buffer. At a flush, every load, atomic
//! result or block reduction computed in the loop that something outside the loop still
//! consumes is materialized as well, so memory is read once, and so are the results of
//! costly elementwise operations ([`costly`]: `exp`, `log`, …); other pure elementwise
//! blocks are recomputed instead, and so are contiguous loads of up to [`RELOAD_MAX_BYTES`] from
//! arguments no store or atomic of the kernel writes: their memory cannot change during the
//! launch, and reading a row that is still in L1 again costs less than the copy's stores. Blocks used inside a control-flow region but defined outside are
//! materialized before it when they hold a load, because the region may run many times.
//! So are blocks that read memory and that a broadcast repeats at least [`MIN_REPEATS`]
//! times in a sink's loop (the operands of `tl.dot`): their own loop computes them once.
//!
//! Blocks carried by `for`/`while` or merged by `if` live in one scratch buffer per
//! carried position: the inits are copied in before the loop, each `yield` writes the
//! next values (computing all of a tile before storing any, since yielded values may read
//! the buffers they replace), and the results read the buffer after it.

use std::collections::{BTreeSet, HashMap, HashSet};

use lnc_bir as bir;
use lnc_diag::Span;
use lnc_lir as lir;

use crate::provenance::Provenance;
use crate::uses::{Uses, is_lazy};
use crate::{TileError, TileOptions, affine};

/// The largest block a later loop reads again from its argument instead of a scratch copy:
/// 64 KB, a row that stays in L2 (at least 512 KB per core on current x86-64) between the
/// passes over it. Measured on the seed forward (M = 4096, 2 threads, caches flushed,
/// medians of 15, AMD EPYC Zen 4): reading again instead of copying took 2.2 vs 3.2 ms at
/// 8 KB rows, 5.7 vs 6.2 ms at 16 KB and 23.7 vs 24.2 ms at 64 KB; an earlier session's
/// machine measured the copy 3–12 % faster at 16–64 KB, so the choice is a machine's, and
/// this limit follows the current benchmark machine. The copy's stores are one more
/// stream competing with the row's loads; reading again from L1 or L2 costs only loads.
const RELOAD_MAX_BYTES: u64 = 64 << 10;

/// How many times a broadcast must repeat a block that reads memory for the loop to read
/// it from scratch instead (`Lowerer::repeated_reads`).
const MIN_REPEATS: u64 = 16;

/// Elementwise operations that cost more per tile than a store and a load of the tile:
/// their blocks are kept in scratch for later loops like loads, not computed again. An
/// `f32` `exp` or `log` takes 40-50 vector instructions per four lanes, `sin` or `cos`
/// about 90 (lnc-clif's `vmath`); `**` and every `f64` one a call per lane. Measured on Triton's
/// fused softmax (4096 rows of 1000, one thread, `lnc bench`), whose `exp` feeds both the
/// sum and the stored quotient: 8.1 ms kept against 13.1 ms computed again.
fn costly(op: &bir::Opcode) -> bool {
    use bir::UnOp::*;
    match op {
        bir::Opcode::Unary(u) => matches!(u, Exp | Exp2 | Log | Log2 | Sin | Cos),
        bir::Opcode::Binary(b) => *b == bir::BinOp::Pow,
        _ => false,
    }
}

/// Where a block that is not computed per tile lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// In scratch buffer `slot`, row-major over the block's shape.
    Scratch(u32),
    /// A block of one element, held as a scalar (a reduction with `keep_dims`).
    Uniform(lir::Value),
}

/// What a sink of a group does per tile.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sink {
    /// A reduction of a block to one element, accumulated across the loop.
    Reduce(bir::Inst),
    /// A store of a block.
    Store(bir::Inst),
    /// An atomic or compare-and-swap on a block.
    Atomic(bir::Inst),
    /// An assert on a block.
    Assert(bir::Inst),
    /// Writes a block to a carried-block buffer (inits, yields).
    ToScratch(bir::Value, u32),
    /// Computes a block only so that it gets materialized.
    Materialize(bir::Value),
}

/// Sinks waiting to be emitted as one loop nest.
pub(crate) struct Group {
    pub(crate) shape: Vec<u32>,
    pub(crate) sinks: Vec<Sink>,
    /// The block-IR instructions the sinks stand for.
    pub(crate) insts: HashSet<bir::Inst>,
    /// Blocks to keep in scratch whatever their uses.
    pub(crate) forced: BTreeSet<bir::Value>,
    /// Nothing else may join (atomics, yields).
    pub(crate) isolated: bool,
    /// Store every `ToScratch` value of a tile after computing all of them.
    pub(crate) scratch_stores_last: bool,
    pub(crate) span: lnc_diag::Span,
}

/// Scheduling state of one block-IR region being lowered.
#[derive(Default)]
pub(crate) struct Sched {
    group: Option<Group>,
    tainted: HashSet<bir::Value>,
    deferred: Vec<bir::Inst>,
    /// Loads of blocks defined in this region and not yet in scratch.
    live_loads: Vec<bir::Value>,
    /// Blocks computed by the loop nests emitted at this region's level so far (each runs
    /// whenever the region does).
    evaluated: HashSet<bir::Value>,
}

/// Memory positions a sink reads or writes: the root argument and the pointer block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Access {
    root: u32,
    ptr: bir::Value,
}

/// Caches of one lir region: values computed there are visible in it and nested regions.
#[derive(Default)]
pub(crate) struct EmitScope {
    pub(crate) consts: HashMap<(lir::DType, u64, bool), lir::Value>,
    pub(crate) evals: HashMap<(bir::Value, Vec<crate::eval::Idx>), affine::Ev>,
    pub(crate) ptrs: HashMap<(bir::Value, Vec<crate::eval::Idx>), crate::eval::PtrEv>,
    pub(crate) linear: HashMap<(Vec<u32>, Vec<crate::eval::Idx>), lir::Value>,
}

/// The lowering of one function: block-IR inputs, the loop IR being built, and the state
/// of the plan.
pub(crate) struct Lowerer<'a> {
    pub(crate) bf: &'a bir::Function,
    pub(crate) opts: TileOptions,
    pub(crate) prov: Provenance,
    pub(crate) uses: Uses,
    pub(crate) b: lir::Builder,
    /// Span given to the instructions being emitted.
    pub(crate) span: Span,
    pub(crate) scalars: HashMap<bir::Value, lir::Value>,
    /// `(base, offset)` of scalar pointers made by `ptr_add`, for `base[offset]` accesses.
    pub(crate) ptr_parts: HashMap<bir::Value, (lir::Value, lir::Value)>,
    pub(crate) backed: HashMap<bir::Value, Backing>,
    pub(crate) consts: HashMap<lir::Value, lir::Const>,
    pub(crate) scopes: Vec<EmitScope>,
    sched: Vec<Sched>,
    /// Consumers already placed in a group or emitted.
    scheduled: HashSet<bir::Inst>,
    /// Scratch slots of the blocks materialized by the loop being emitted.
    pub(crate) mat_slots: HashMap<bir::Value, u32>,
    /// Buffers gathering the per-lane results of reductions along the last axis.
    pub(crate) lane_buffers: HashMap<bir::Inst, u32>,
    /// Argument slots some store or atomic of the kernel writes through.
    written_roots: BTreeSet<u32>,
}

impl<'a> Lowerer<'a> {
    pub(crate) fn new(bf: &'a bir::Function, opts: TileOptions, prov: Provenance, uses: Uses) -> Self {
        let mut written_roots = BTreeSet::new();
        bf.walk(|i| {
            let d = bf.inst(i);
            if matches!(
                d.opcode,
                bir::Opcode::Store { .. } | bir::Opcode::Atomic { .. } | bir::Opcode::AtomicCas
            ) {
                written_roots.insert(prov.root(d.args[0]));
            }
        });
        let mut lf = lir::Function::new(bf.name.clone());
        lf.strings = bf.strings.clone();
        Lowerer {
            bf,
            opts,
            prov,
            uses,
            b: lir::Builder::new(lf),
            span: Span::DUMMY,
            scalars: HashMap::new(),
            ptr_parts: HashMap::new(),
            backed: HashMap::new(),
            consts: HashMap::new(),
            scopes: vec![EmitScope::default()],
            sched: Vec::new(),
            scheduled: HashSet::new(),
            mat_slots: HashMap::new(),
            lane_buffers: HashMap::new(),
            written_roots,
        }
    }

    pub(crate) fn run(mut self) -> Result<lir::Function, TileError> {
        let bf = self.bf;
        for p in &bf.params {
            let ty = self.scalar_ty(p.value, None)?;
            self.b.func.add_arg(p.name.clone(), p.slot, ty);
            let v = self.ins(lir::Opcode::Arg(p.slot), vec![], ty);
            self.scalars.insert(p.value, v);
        }
        self.sched.push(Sched::default());
        if let Some(t) = self.region_body(&bf.body)? {
            return Err(self.err(t, "a terminator in the kernel's body"));
        }
        self.flush()?;
        self.sched.pop();
        Ok(self.b.finish())
    }

    pub(crate) fn err(&self, i: bir::Inst, message: impl Into<String>) -> TileError {
        TileError::new(self.bf.span(i), message)
    }

    /// The loop-IR type of a scalar or pointer value (`at`: where a block would be an error).
    pub(crate) fn scalar_ty(&self, v: bir::Value, at: Option<bir::Inst>) -> Result<lir::Ty, TileError> {
        let t = self.bf.ty(v);
        if t.is_block() {
            let span = at.map_or(Span::DUMMY, |i| self.bf.span(i));
            return Err(TileError::new(span, format!("a block of type {t} where a scalar is expected")));
        }
        Ok(match t.elem {
            bir::Elem::Scalar(d) => lir::Ty::Scalar(d),
            bir::Elem::Ptr(d) => lir::Ty::Ptr(d),
        })
    }

    pub(crate) fn shape(&self, v: bir::Value) -> Vec<u32> {
        self.bf.ty(v).shape.dims().to_vec()
    }

    pub(crate) fn is_block(&self, v: bir::Value) -> bool {
        self.bf.ty(v).is_block()
    }

    fn cur(&mut self) -> &mut Sched {
        self.sched.last_mut().expect("a region is being lowered")
    }

    /// Lowers a region's instructions up to its terminator, which it returns.
    fn region_body(&mut self, r: &bir::Region) -> Result<Option<bir::Inst>, TileError> {
        for (k, &i) in r.insts.iter().enumerate() {
            if self.bf.inst(i).opcode.is_terminator() {
                if k + 1 != r.insts.len() {
                    return Err(self.err(i, "a terminator before the end of its region"));
                }
                return Ok(Some(i));
            }
            self.inst(i)?;
        }
        Ok(None)
    }

    fn inst(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        self.span = bf.span(i);
        let block_operand = data.args.iter().any(|&a| self.is_block(a));
        match data.opcode {
            bir::Opcode::For | bir::Opcode::While | bir::Opcode::If => self.control(i)?,
            bir::Opcode::Load { .. } if self.is_block(data.results[0]) => {
                self.cur().live_loads.push(data.results[0]);
            }
            _ if is_lazy(bf, i) => {}
            bir::Opcode::Reduce { .. } => self.add_sink(Sink::Reduce(i), i)?,
            bir::Opcode::Store { .. } if block_operand => self.add_sink(Sink::Store(i), i)?,
            bir::Opcode::Atomic { .. } | bir::Opcode::AtomicCas if block_operand => {
                self.add_sink(Sink::Atomic(i), i)?
            }
            bir::Opcode::Assert if block_operand => self.add_sink(Sink::Assert(i), i)?,
            bir::Opcode::Print(k) if !data.args.is_empty() => {
                // An effect in program order, like the others; one line per element.
                self.flush()?;
                self.print_blocks(i, k)?;
            }
            bir::Opcode::Store { .. } => {
                let root = self.prov.root(data.args[0]);
                self.protect_live_loads(Some(root), None)?;
                self.flush()?;
                self.scalar_inst(i)?;
            }
            bir::Opcode::Atomic { .. } | bir::Opcode::AtomicCas => {
                self.protect_live_loads(None, None)?;
                self.flush()?;
                self.scalar_inst(i)?;
            }
            bir::Opcode::Load { .. } | bir::Opcode::Assert | bir::Opcode::Print(_) => {
                self.flush()?;
                self.scalar_inst(i)?;
            }
            _ => {
                let tainted = {
                    let s = self.cur();
                    data.args.iter().any(|a| s.tainted.contains(a))
                };
                if tainted {
                    let s = self.cur();
                    s.deferred.push(i);
                    s.tainted.extend(data.results.iter().copied());
                } else {
                    self.scalar_inst(i)?;
                }
            }
        }
        self.scheduled.insert(i);
        Ok(())
    }

    /// The iteration space of a sink instruction.
    fn sink_shape(&self, i: bir::Inst) -> Vec<u32> {
        let data = self.bf.inst(i);
        match data.opcode {
            bir::Opcode::Reduce { .. } | bir::Opcode::Assert => self.shape(data.args[0]),
            _ => data.args.iter().map(|&a| self.shape(a)).max_by_key(|s| s.len()).unwrap_or_default(),
        }
    }

    fn sink_values(&self, s: Sink) -> Vec<bir::Value> {
        match s {
            Sink::Reduce(i) | Sink::Store(i) | Sink::Atomic(i) | Sink::Assert(i) => {
                self.bf.inst(i).args.clone()
            }
            Sink::ToScratch(v, _) | Sink::Materialize(v) => vec![v],
        }
    }

    fn sink_write(&self, s: Sink) -> Option<Access> {
        match s {
            Sink::Store(i) | Sink::Atomic(i) => {
                let ptr = self.bf.inst(i).args[0];
                Some(Access { root: self.prov.root(ptr), ptr })
            }
            _ => None,
        }
    }

    /// Visits the DAG under `roots` the way a loop computes it: through lazy instructions,
    /// stopping at scalars and at blocks that live somewhere. `f` sees every value reached.
    fn visit_dag(&self, roots: &[bir::Value], f: &mut dyn FnMut(bir::Value)) {
        let mut seen = HashSet::new();
        let mut work: Vec<bir::Value> = roots.to_vec();
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            f(v);
            if !self.is_block(v) || self.backed.contains_key(&v) {
                continue;
            }
            if let bir::ValueDef::Result(i, _) = self.bf.values[v].def
                && is_lazy(self.bf, i)
            {
                work.extend(self.bf.inst(i).args.iter().copied());
            }
        }
    }

    /// Values computed per tile by `sinks`, and the loads among them.
    fn dag_of(&self, sinks: &[Sink]) -> (Vec<bir::Value>, Vec<Access>) {
        let roots: Vec<bir::Value> = sinks.iter().flat_map(|&s| self.sink_values(s)).collect();
        let mut values = Vec::new();
        self.visit_dag(&roots, &mut |v| values.push(v));
        let loads = values
            .iter()
            .filter_map(|&v| {
                let bir::ValueDef::Result(i, _) = self.bf.values[v].def else {
                    return None;
                };
                let data = self.bf.inst(i);
                let pending = self.is_block(v) && !self.backed.contains_key(&v);
                (pending && matches!(data.opcode, bir::Opcode::Load { .. }))
                    .then(|| Access { root: self.prov.root(data.args[0]), ptr: data.args[0] })
            })
            .collect();
        (values, loads)
    }

    /// Whether a write and another access to the same argument can share one loop.
    fn compatible(&self, a: Access, b: Access, shape: &[u32]) -> bool {
        a.root != b.root
            || (shape.len() == 1
                && affine::same_values(self.bf, a.ptr, b.ptr)
                && affine::stride(self.bf, a.ptr).is_some_and(|s| s != 0))
    }

    fn hazard(&self, group: &Group, sinks: &[Sink]) -> bool {
        let (_, g_reads) = self.dag_of(&group.sinks);
        let g_writes: Vec<Access> = group.sinks.iter().filter_map(|&s| self.sink_write(s)).collect();
        let (_, s_reads) = self.dag_of(sinks);
        let s_writes: Vec<Access> = sinks.iter().filter_map(|&s| self.sink_write(s)).collect();
        let clash = |ws: &[Access], others: &[Access]| {
            ws.iter().any(|&w| others.iter().any(|&o| !self.compatible(w, o, &group.shape)))
        };
        clash(&s_writes, &g_reads) || clash(&s_writes, &g_writes) || clash(&g_writes, &s_reads)
    }

    fn depends_on_tainted(&self, sinks: &[Sink]) -> bool {
        let s = self.sched.last().expect("a region is being lowered");
        if s.tainted.is_empty() {
            return false;
        }
        let roots: Vec<bir::Value> = sinks.iter().flat_map(|&k| self.sink_values(k)).collect();
        let mut hit = false;
        self.visit_dag(&roots, &mut |v| hit |= s.tainted.contains(&v));
        hit
    }

    /// Adds a sink to the open group, flushing first when it cannot join.
    fn push_sink(
        &mut self,
        sink: Sink,
        shape: Vec<u32>,
        inst: Option<bir::Inst>,
        isolated: bool,
    ) -> Result<(), TileError> {
        self.keep_repeated_reads(&[sink])?;
        let must_flush = match &self.sched.last().expect("a region").group {
            None => false,
            Some(g) => {
                g.isolated
                    || isolated
                    || g.shape != shape
                    || self.depends_on_tainted(&[sink])
                    || self.hazard(g, &[sink])
            }
        };
        if must_flush {
            self.flush()?;
        }
        let span = self.span;
        let s = self.cur();
        let g = s.group.get_or_insert_with(|| Group {
            shape,
            sinks: Vec::new(),
            insts: HashSet::new(),
            forced: BTreeSet::new(),
            isolated: false,
            scratch_stores_last: false,
            span,
        });
        g.sinks.push(sink);
        g.isolated |= isolated;
        if let Some(i) = inst {
            g.insts.insert(i);
        }
        Ok(())
    }

    fn add_sink(&mut self, sink: Sink, i: bir::Inst) -> Result<(), TileError> {
        let shape = self.sink_shape(i);
        if let Some(w) = self.sink_write(sink) {
            // Loads of the written argument at other positions must come from an earlier loop.
            let (values, _) = self.dag_of(&[sink]);
            let clashing: Vec<bir::Value> = values
                .iter()
                .copied()
                .filter(|&v| {
                    let bir::ValueDef::Result(d, _) = self.bf.values[v].def else { return false };
                    let data = self.bf.inst(d);
                    matches!(data.opcode, bir::Opcode::Load { .. })
                        && self.is_block(v)
                        && !self.backed.contains_key(&v)
                        && !self.compatible(
                            w,
                            Access { root: self.prov.root(data.args[0]), ptr: data.args[0] },
                            &shape,
                        )
                })
                .collect();
            if !clashing.is_empty() {
                for v in clashing {
                    self.ensure_materialized(v)?;
                }
                self.flush()?;
            }
            let atomic = matches!(sink, Sink::Atomic(_));
            self.protect_live_loads((!atomic).then_some(w.root), Some(i))?;
        }
        let isolated = matches!(sink, Sink::Atomic(_));
        self.push_sink(sink, shape, Some(i), isolated)?;
        // Results exist only after the loop: whatever uses them waits for the flush.
        let results = self.bf.inst(i).results.clone();
        self.cur().tainted.extend(results);
        Ok(())
    }

    /// Computes the [`Lowerer::repeated_reads`] of `sinks` into scratch, in loops of their
    /// own emitted before the sinks'.
    fn keep_repeated_reads(&mut self, sinks: &[Sink]) -> Result<(), TileError> {
        let repeated: Vec<bir::Value> = sinks.iter().flat_map(|&s| self.repeated_reads(s)).collect();
        if repeated.is_empty() {
            return Ok(());
        }
        for v in repeated {
            self.ensure_materialized(v)?;
        }
        self.flush()
    }

    /// The blocks that read memory and that `sink`'s loop would read again for every
    /// repetition a broadcast makes of them, at least [`MIN_REPEATS`] times: the operands
    /// of `tl.dot`, lowered to `sum(a[:, :, None] * b[None, :, :], axis=1)`, where each
    /// element of `a` is used N times and each of `b` M times. Computed once into scratch
    /// instead (in `fp32` for half operands), the loop reads them there. Measured with
    /// `lnc bench`, 512×512×512, 64×64×32 blocks, one thread: the matmul tutorial's kernel
    /// in fp16, whose `b` is a gather (`offs % N`), 353 → 34.6 ms; an fp32 variant with
    /// contiguous `b`, 51.3 → 26.7 ms (both with four copies of loops without
    /// accumulators, since back to two: 32.4 and 23.6 ms).
    fn repeated_reads(&self, sink: Sink) -> Vec<bir::Value> {
        let (values, _) = self.dag_of(&[sink]);
        let mut out = Vec::new();
        for &v in &values {
            let bir::ValueDef::Result(i, _) = self.bf.values[v].def else { continue };
            let data = self.bf.inst(i);
            if data.opcode != bir::Opcode::Broadcast || self.backed.contains_key(&v) {
                continue;
            }
            let mut u = data.args[0];
            while let bir::ValueDef::Result(j, _) = self.bf.values[u].def
                && matches!(self.bf.inst(j).opcode, bir::Opcode::ExpandDims(_))
                && !self.backed.contains_key(&u)
            {
                u = self.bf.inst(j).args[0];
            }
            let repeats = self.bf.ty(v).shape.numel() / self.bf.ty(u).shape.numel().max(1);
            // Pointer blocks are never stored in scratch: their loads are what is kept.
            if !self.is_block(u)
                || self.bf.ty(u).elem.is_ptr()
                || self.backed.contains_key(&u)
                || repeats < MIN_REPEATS
                || out.contains(&u)
            {
                continue;
            }
            let mut reads = false;
            self.visit_dag(&[u], &mut |w| {
                if let bir::ValueDef::Result(k, _) = self.bf.values[w].def {
                    reads |= matches!(self.bf.inst(k).opcode, bir::Opcode::Load { .. });
                }
            });
            if reads {
                out.push(u);
            }
        }
        out
    }

    /// Before a write to `root` (`None`: to any argument, an atomic), keeps in scratch every
    /// pending load of it that a consumer other than `except` still needs.
    ///
    /// A load of an argument nothing writes is read again where it is needed instead
    /// (`reloadable`), except in bounds-checked code before an atomic when no loop nest
    /// of this region has read it yet: read first after the atomic (a spin lock's
    /// acquire), an access out of bounds would fault with the lock held, which a later
    /// launch on the same lock words would wait for forever. Kept in scratch, it is read
    /// and checked before, where the source reads it (found by review).
    fn protect_live_loads(&mut self, root: Option<u32>, except: Option<bir::Inst>) -> Result<(), TileError> {
        let loads = std::mem::take(&mut self.cur().live_loads);
        let mut keep = Vec::new();
        for v in loads {
            if self.backed.contains_key(&v) {
                continue;
            }
            keep.push(v);
            let bir::ValueDef::Result(d, _) = self.bf.values[v].def else { continue };
            let r = self.prov.root(self.bf.inst(d).args[0]);
            if root.is_some_and(|root| root != r) {
                continue;
            }
            let pending = self.uses.consumers(v).any(|c| !self.scheduled.contains(&c) && Some(c) != except);
            if pending && (!self.reloadable(v) || (root.is_none() && self.opts.checked && !self.read_here(v)))
            {
                self.ensure_materialized(v)?;
            }
        }
        let s = self.cur();
        keep.append(&mut s.live_loads);
        s.live_loads = keep;
        Ok(())
    }

    /// Whether a loop nest of the current region, emitted or open, computes `v`.
    fn read_here(&self, v: bir::Value) -> bool {
        let Some(s) = self.sched.last() else { return false };
        s.evaluated.contains(&v) || s.group.as_ref().is_some_and(|g| self.dag_of(&g.sinks).0.contains(&v))
    }

    /// Makes sure `v` ends up in scratch: by the open group if it computes `v` anyway,
    /// else by a sink that computes only `v`.
    fn ensure_materialized(&mut self, v: bir::Value) -> Result<(), TileError> {
        if self.backed.contains_key(&v) {
            return Ok(());
        }
        if let Some(g) = &self.sched.last().expect("a region").group {
            let (mut values, _) = self.dag_of(&g.sinks);
            // An atomic's result is computed by its sink.
            values.extend(g.sinks.iter().filter_map(|s| match s {
                Sink::Atomic(i) => Some(self.bf.inst(*i).results[0]),
                _ => None,
            }));
            if values.contains(&v) {
                self.cur().group.as_mut().expect("checked").forced.insert(v);
                return Ok(());
            }
        }
        let shape = self.shape(v);
        self.push_sink(Sink::Materialize(v), shape, None, false)?;
        self.cur().group.as_mut().expect("just pushed").forced.insert(v);
        Ok(())
    }

    /// True for a small contiguous load of an argument nothing in the kernel writes: its
    /// memory cannot change during the launch (arguments do not overlap, and no program
    /// writes it), so a later loop reads it again instead of a scratch copy, saving the
    /// copy's stores. Not for `fp16` unless its tiles convert in one instruction
    /// (`TileOptions::native_f16`, as cheap as an `fp32` load), nor for `bf16` unless they
    /// widen in two 256-bit instructions (`TileOptions::native_bf16`): scratch holds them
    /// converted to `f32`, and reading the row again would convert it again in every loop
    /// (measured on the seed forward, 4096 × 1024, in scratch instead: fp16 4.65 → 4.17 ms,
    /// bf16 1.84 → 1.74 ms, with integer conversions in 128-bit vectors). With 256-bit
    /// `bf16` loads in each pass instead of the row helper's copy in scratch, the seed
    /// forward in bf16 (2 threads, caches flushed, copy at 90–107 GB/s): 4–9 % faster at N
    /// = 512–1024, 20 % at 4096, 68 % at 16384.
    fn reloadable(&self, v: bir::Value) -> bool {
        let bir::ValueDef::Result(i, _) = self.bf.values[v].def else { return false };
        let data = self.bf.inst(i);
        let ty = self.bf.ty(v);
        matches!(data.opcode, bir::Opcode::Load { .. })
            && self.is_block(v)
            && match ty.elem.dtype() {
                bir::DType::BF16 => self.opts.native_bf16,
                bir::DType::F16 => self.opts.native_f16,
                _ => true,
            }
            && ty.shape.numel() * u64::from(ty.elem.dtype().size()) <= RELOAD_MAX_BYTES
            && !self.written_roots.contains(&self.prov.root(data.args[0]))
            && affine::stride(self.bf, data.args[0]) == Some(1)
    }

    /// True for the blocks worth keeping rather than recomputing.
    ///
    /// Not the `f32` conversion of a half row that several loops read, though its first
    /// loop could store it in scratch for the others to load instead of converting again
    /// (measured on the seed forward in `fp16`, 512-bit loops, the cast kept like a
    /// [`costly`] one): one thread with the rows in the cache, 0.93-0.98 of the time per row
    /// at N = 512-2048; but caches flushed (M = 4096, 2 threads, launches alternated in one
    /// process, 150 of each, two runs), 1.06-1.24 of the time at N = 768-1024, where the
    /// first pass waits on memory and its scratch stores add to it. The row copied into
    /// scratch by the conversion helper first (the load not `reloadable`): 1.07 of the time
    /// in the cache at N = 1024, 1.08 flushed.
    fn materializable(&self, v: bir::Value) -> bool {
        if !self.is_block(v) || self.backed.contains_key(&v) || self.reloadable(v) {
            return false;
        }
        let bir::ValueDef::Result(i, _) = self.bf.values[v].def else {
            return false;
        };
        let op = &self.bf.inst(i).opcode;
        costly(op)
            || matches!(
                op,
                bir::Opcode::Load { .. }
                    | bir::Opcode::Reduce { .. }
                    | bir::Opcode::Atomic { .. }
                    | bir::Opcode::AtomicCas
            )
    }

    /// Emits the open group's loop nest and the scalars deferred behind it.
    pub(crate) fn flush(&mut self) -> Result<(), TileError> {
        let s = self.cur();
        let group = s.group.take();
        let deferred = std::mem::take(&mut s.deferred);
        s.tainted.clear();
        if let Some(g) = group {
            let (values, _) = self.dag_of(&g.sinks);
            self.cur().evaluated.extend(values.iter().copied());
            let mut results: Vec<bir::Value> = g
                .sinks
                .iter()
                .filter_map(|s| match s {
                    Sink::Atomic(i) => Some(self.bf.inst(*i).results[0]),
                    _ => None,
                })
                .collect();
            results.extend(values);
            let mut mat = Vec::new();
            for v in results {
                if !self.materializable(v) || self.mat_slots.contains_key(&v) {
                    continue;
                }
                let needed_later =
                    g.forced.contains(&v) || self.uses.consumers(v).any(|c| !g.insts.contains(&c));
                if needed_later {
                    let d = self.bf.ty(v).elem.dtype();
                    let len = self.bf.ty(v).shape.numel() as u32;
                    let slot = self.b.func.add_scratch(d, len);
                    self.mat_slots.insert(v, slot);
                    mat.push((v, slot));
                }
            }
            let saved = self.span;
            self.span = g.span;
            self.emit_group(&g)?;
            self.span = saved;
            self.mat_slots.clear();
            for (v, slot) in mat {
                self.backed.insert(v, Backing::Scratch(slot));
            }
        }
        for i in deferred {
            self.span = self.bf.span(i);
            self.scalar_inst(i)?;
        }
        Ok(())
    }

    /// Lowers `for`, `while` and `if`.
    fn control(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        // Blocks captured from outside: keep what holds a load, the region may run many times.
        let mut inside = HashSet::new();
        let mut nested = Vec::new();
        fn walk(
            f: &bir::Function,
            r: &bir::Region,
            inside: &mut HashSet<bir::Value>,
            nested: &mut Vec<bir::Inst>,
        ) {
            inside.extend(r.args.iter().copied());
            for &i in &r.insts {
                nested.push(i);
                inside.extend(f.inst(i).results.iter().copied());
                for r in &f.inst(i).regions {
                    walk(f, r, inside, nested);
                }
            }
        }
        for r in &data.regions {
            walk(bf, r, &mut inside, &mut nested);
        }
        let captured: Vec<bir::Value> = nested
            .iter()
            .flat_map(|&n| bf.inst(n).args.iter().copied())
            .filter(|v| !inside.contains(v) && self.is_block(*v))
            .collect();
        let mut keep = Vec::new();
        self.visit_dag(&captured, &mut |v| keep.push(v));
        for v in keep {
            if self.materializable(v) {
                self.ensure_materialized(v)?;
            }
        }
        // Memory written inside.
        let mut written: Option<BTreeSet<u32>> = Some(BTreeSet::new());
        for &n in &nested {
            let nd = bf.inst(n);
            match nd.opcode {
                bir::Opcode::Store { .. } => {
                    if let Some(w) = &mut written {
                        w.insert(self.prov.root(nd.args[0]));
                    }
                }
                bir::Opcode::Atomic { .. } | bir::Opcode::AtomicCas => written = None,
                _ => {}
            }
        }
        match written {
            None => self.protect_live_loads(None, None)?,
            Some(roots) => {
                for r in roots {
                    self.protect_live_loads(Some(r), None)?;
                }
            }
        }
        self.span = bf.span(i);
        match data.opcode {
            bir::Opcode::For => self.lower_for(i),
            bir::Opcode::While => self.lower_while(i),
            _ => self.lower_if(i),
        }?;
        self.scheduled.extend(nested);
        Ok(())
    }

    /// A scratch buffer for a carried block, refusing blocks of pointers.
    fn carried_slot(&mut self, v: bir::Value, at: bir::Inst) -> Result<u32, TileError> {
        let t = self.bf.ty(v);
        if t.elem.is_ptr() {
            return Err(self.err(
                at,
                "a block of pointers carried through control flow must move all its lanes by the same \
                 offset (`ptrs += step`); this one does not",
            ));
        }
        Ok(self.b.func.add_scratch(t.elem.dtype(), t.shape.numel() as u32))
    }

    /// Copies the block inits of loop `owner` into their buffers, then flushes.
    fn init_carried(&mut self, owner: bir::Inst, inits: &[(bir::Value, u32)]) -> Result<(), TileError> {
        for &(v, slot) in inits {
            let shape = self.shape(v);
            self.push_sink(Sink::ToScratch(v, slot), shape, Some(owner), false)?;
        }
        self.flush()
    }

    /// Lowers a region's terminator: flushes, writes yielded blocks to their buffers (one
    /// isolated group per shape, reads before writes), and returns the scalar operands.
    fn yield_blocks(
        &mut self,
        values: &[bir::Value],
        slots: &[Option<u32>],
        term: bir::Inst,
    ) -> Result<Vec<lir::Value>, TileError> {
        self.span = self.bf.span(term);
        self.flush()?;
        let mut scalars = Vec::new();
        let mut by_shape: Vec<(Vec<u32>, Vec<Sink>)> = Vec::new();
        for (&v, &slot) in values.iter().zip(slots) {
            match slot {
                None => scalars.push(self.scalar(v)),
                Some(slot) => {
                    if self.backed.get(&v) == Some(&Backing::Scratch(slot)) {
                        continue;
                    }
                    let shape = self.shape(v);
                    match by_shape.iter_mut().find(|(s, _)| *s == shape) {
                        Some((_, sinks)) => sinks.push(Sink::ToScratch(v, slot)),
                        None => by_shape.push((shape, vec![Sink::ToScratch(v, slot)])),
                    }
                }
            }
        }
        let sinks: Vec<Sink> = by_shape.iter().flat_map(|(_, sinks)| sinks.iter().copied()).collect();
        self.keep_repeated_reads(&sinks)?;
        let mut written: Vec<u32> = Vec::new();
        for (shape, sinks) in by_shape {
            let mut reads_written = false;
            let roots: Vec<bir::Value> = sinks.iter().flat_map(|&s| self.sink_values(s)).collect();
            self.visit_dag(&roots, &mut |v| {
                if let Some(Backing::Scratch(s)) = self.backed.get(&v) {
                    reads_written |= written.contains(s);
                }
            });
            if reads_written {
                return Err(self
                    .err(term, "blocks of different shapes yielded from one another are not supported yet"));
            }
            written.extend(sinks.iter().filter_map(|s| match s {
                Sink::ToScratch(_, slot) => Some(*slot),
                _ => None,
            }));
            let span = self.span;
            self.cur().group = Some(Group {
                shape,
                sinks,
                insts: HashSet::from([term]),
                forced: BTreeSet::new(),
                isolated: true,
                scratch_stores_last: true,
                span,
            });
            self.flush()?;
        }
        self.scheduled.insert(term);
        Ok(scalars)
    }

    fn scalar_arg(
        &mut self,
        owner: lir::Inst,
        region: u32,
        v: bir::Value,
        at: bir::Inst,
    ) -> Result<lir::Value, TileError> {
        let ty = self.scalar_ty(v, Some(at))?;
        let a = self.b.region_arg(owner, region, ty);
        self.scalars.insert(v, a);
        Ok(a)
    }

    fn lower_for(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let body = &data.regions[0];
        let mut slots = Vec::new();
        let mut block_inits = Vec::new();
        for &init in &data.args[3..] {
            if self.is_block(init) {
                let slot = self.carried_slot(init, i)?;
                block_inits.push((init, slot));
                slots.push(Some(slot));
            } else {
                slots.push(None);
            }
        }
        self.init_carried(i, &block_inits)?;
        let mut args: Vec<lir::Value> = data.args[..3].iter().map(|&a| self.scalar(a)).collect();
        let mut result_tys = Vec::new();
        for (k, &init) in data.args[3..].iter().enumerate() {
            if slots[k].is_none() {
                args.push(self.scalar(init));
                result_tys.push(self.scalar_ty(init, Some(i))?);
            }
        }
        self.span = bf.span(i);
        let lf = self.b.inst(lir::Opcode::For, args, &result_tys, self.span);
        self.begin_region();
        self.scalar_arg(lf, 0, body.args[0], i)?;
        for (k, &a) in body.args[1..].iter().enumerate() {
            match slots[k] {
                Some(slot) => {
                    self.backed.insert(a, Backing::Scratch(slot));
                }
                None => {
                    self.scalar_arg(lf, 0, a, i)?;
                }
            }
        }
        self.sched.push(Sched::default());
        let term = self.region_body(body)?.ok_or_else(|| self.err(i, "a loop body without `yield`"))?;
        let yielded = bf.inst(term).args.clone();
        let ys = self.yield_blocks(&yielded, &slots, term)?;
        self.ins_effect(lir::Opcode::Yield, ys);
        self.sched.pop();
        let region = self.end_region();
        self.b.set_regions(lf, vec![region]);
        self.bind_results(i, lf, &slots);
        Ok(())
    }

    /// Maps a control-flow instruction's results: scalars to the lir results in order,
    /// blocks to their buffers.
    fn bind_results(&mut self, i: bir::Inst, li: lir::Inst, slots: &[Option<u32>]) {
        let results = self.b.func.insts[li].results.clone();
        let mut next = results.into_iter();
        for (k, &r) in self.bf.inst(i).results.iter().enumerate() {
            match slots[k] {
                Some(slot) => {
                    self.backed.insert(r, Backing::Scratch(slot));
                }
                None => {
                    let v = next.next().expect("one lir result per scalar result");
                    self.scalars.insert(r, v);
                }
            }
        }
    }

    fn lower_while(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let (cond, body) = (&data.regions[0], &data.regions[1]);
        let mut slots = Vec::new();
        let mut block_inits = Vec::new();
        let mut args = Vec::new();
        for &init in &data.args {
            if self.is_block(init) {
                let slot = self.carried_slot(init, i)?;
                block_inits.push((init, slot));
                slots.push(Some(slot));
            } else {
                slots.push(None);
            }
        }
        self.init_carried(i, &block_inits)?;
        for (k, &init) in data.args.iter().enumerate() {
            if slots[k].is_none() {
                args.push(self.scalar(init));
            }
        }
        // Forwarded blocks: the buffer of the carried block forwarded as is, else a new one.
        let cond_term = *cond.insts.last().ok_or_else(|| self.err(i, "a while without `condition`"))?;
        let fwd: Vec<bir::Value> = bf.inst(cond_term).args[1..].to_vec();
        let mut fwd_slots = Vec::new();
        let mut fwd_tys = Vec::new();
        for &v in &fwd {
            if self.is_block(v) {
                let alias = cond.args.iter().position(|&a| a == v).and_then(|k| slots[k]);
                let slot = match alias {
                    Some(s) => s,
                    None => self.carried_slot(v, i)?,
                };
                fwd_slots.push(Some(slot));
            } else {
                fwd_slots.push(None);
                fwd_tys.push(self.scalar_ty(v, Some(cond_term))?);
            }
        }
        self.span = bf.span(i);
        let lw = self.b.inst(lir::Opcode::While, args, &fwd_tys, self.span);

        self.begin_region();
        for (k, &a) in cond.args.iter().enumerate() {
            match slots[k] {
                Some(slot) => {
                    self.backed.insert(a, Backing::Scratch(slot));
                }
                None => {
                    self.scalar_arg(lw, 0, a, i)?;
                }
            }
        }
        self.sched.push(Sched::default());
        let term = self.region_body(cond)?.ok_or_else(|| self.err(i, "a while without `condition`"))?;
        let flag_v = bf.inst(term).args[0];
        let mut cargs = self.yield_blocks(&fwd, &fwd_slots, term)?;
        cargs.insert(0, self.scalar(flag_v));
        self.ins_effect(lir::Opcode::Condition, cargs);
        self.sched.pop();
        let r0 = self.end_region();

        self.begin_region();
        for (k, &a) in body.args.iter().enumerate() {
            match fwd_slots.get(k).copied().flatten() {
                Some(slot) => {
                    self.backed.insert(a, Backing::Scratch(slot));
                }
                None => {
                    self.scalar_arg(lw, 1, a, i)?;
                }
            }
        }
        self.sched.push(Sched::default());
        let term = self.region_body(body)?.ok_or_else(|| self.err(i, "a while body without `yield`"))?;
        let yielded = bf.inst(term).args.clone();
        let ys = self.yield_blocks(&yielded, &slots, term)?;
        self.ins_effect(lir::Opcode::Yield, ys);
        self.sched.pop();
        let r1 = self.end_region();
        self.b.set_regions(lw, vec![r0, r1]);
        self.bind_results(i, lw, &fwd_slots);
        Ok(())
    }

    fn lower_if(&mut self, i: bir::Inst) -> Result<(), TileError> {
        let bf = self.bf;
        let data = bf.inst(i);
        let mut slots = Vec::new();
        let mut tys = Vec::new();
        for &r in &data.results {
            if self.is_block(r) {
                slots.push(Some(self.carried_slot(r, i)?));
            } else {
                slots.push(None);
                tys.push(self.scalar_ty(r, Some(i))?);
            }
        }
        self.flush()?;
        let c = self.scalar(data.args[0]);
        self.span = bf.span(i);
        let li = self.b.inst(lir::Opcode::If, vec![c], &tys, self.span);
        let mut regions = Vec::new();
        for r in &data.regions {
            self.begin_region();
            self.sched.push(Sched::default());
            let term = self.region_body(r)?.ok_or_else(|| self.err(i, "an `if` branch without `yield`"))?;
            let yielded = bf.inst(term).args.clone();
            let ys = self.yield_blocks(&yielded, &slots, term)?;
            self.ins_effect(lir::Opcode::Yield, ys);
            self.sched.pop();
            regions.push(self.end_region());
        }
        self.b.set_regions(li, regions);
        self.bind_results(i, li, &slots);
        Ok(())
    }
}
