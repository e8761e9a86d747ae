//! Streaming stores: the full-line stores of a loop into an argument the kernel never
//! reads may bypass the caches.
//!
//! ```text
//! for iv = lb to ub step S { … store.contig q[iv + c], y … }
//! =>
//! ok = stream_ok (q + lb), ub - lb
//! for iv = lb to ub step S { … store.contig q[iv + c], y stream ok … }
//! ```
//!
//! A cached store of a line the core does not hold first reads the line from memory
//! (read for ownership), then writes it back when it is evicted: writing `y` of a layer
//! norm costs twice its bytes of memory traffic. When a launch writes more than the cache
//! could keep anyway, a non-temporal store writes the line once, without reading it.
//! Measured on the seed forward (4096 rows, 2 threads, cold caches): 4096 columns 5.5 →
//! 3.6 ms, 16384 columns 23.7 → 12.9 ms, against a hand-written Rust layer norm at 5.6 and
//! 24 ms. Whether to stream is decided per loop at run time by `stream_ok`: the first
//! store address is 16-byte aligned (non-temporal vector stores require it) and the launch
//! stores at least the code generator's threshold through the loop (its element count
//! times the number of programs); code generation runs one copy of the loop for each
//! answer.
//!
//! Which stores: unmasked contiguous stores of whole 16-byte vectors of `fp32` or `fp64`
//! (the stores x86-64 has a non-temporal form of that Cranelift emits), and of `fp16` and
//! `bf16` with `TileOptions::half_stores` (converted into a register first, lnc-clif's
//! `evex`), and of `fp16` with `TileOptions::f16_stores` (in 256-bit loops converted into
//! the stored register where it dies there, lnc-clif's `widen`, else stored cached) at
//! `iv + c` with
//! `c` a constant multiple of the vector, or at `iv + t + c` with `t` invariant in the loop
//! (one `t` per loop), in the straight-line body of a `for` whose constant step covers at
//! least two vectors (so the remainder loop of a pass, which writes one vector once, keeps
//! cached stores), into an argument no instruction of the kernel reads (so no
//! program of the launch reads what was streamed: the runtime fences the stores before a
//! launch returns). Nothing else about the stores changes: the same values at the same
//! addresses, in the same order within the program.
//!
//! Whole lines only. A line that non-temporal stores write in part and cached stores in
//! part (the row's remainder loop, the next row's first elements) makes the cached store
//! wait for the line to leave the write-combining buffer and read it back from memory; and
//! a row that does not start on a 16-byte vector could not stream at all. Where a loop's
//! stores of an iteration write exactly its `S` elements and running an iteration twice
//! changes nothing ([`whole_lines`]), the loop is split at the row's first and last line
//! boundaries ([`split_at_lines`]): the lines between stream, the partial lines at the ends
//! are written by cached stores only. A row that starts on a vector and that no later loop
//! writes on streams whole from its start instead, its partial end lines joined in the
//! write-combining buffers with the neighbouring rows' (each cached, such a line would be
//! read for ownership). Measured on the seed forward (lnc-bench, 4096 rows, 2 threads,
//! caches flushed, three alternating runs, medians): N = 1023, rows not 16-byte aligned,
//! 0.955 → 0.726 ms (0.99 → 1.21× the Rust baseline); N = 1000, 1004, 2048, 4096, 8192
//! within 2 % either way.
//!
//! A `row_store` into such an argument (a half row rounded whole by a runtime helper,
//! module `rows`) gets the same test, `stream_ok (q + offset), count`, as an operand: its
//! helper then writes the row's whole 16-byte groups with non-temporal stores. Measured on
//! the fp16 forward (4096 × 4096, one thread, cold): a cached `y` made the row 1.4× slower
//! than the same kernel with an fp32 `y`, though it writes half the bytes.

use std::collections::{HashMap, HashSet};

use lnc_lir::{Addressing, BinOp, CmpOp, Const, DType, Function, Inst, Opcode, Region, Ty, Value};

use crate::rewrite::{
    Lanes, Parent, clone_insts, def, defined_inside, for_loops, insert_after_operands, insert_before, int_of,
    iv_plus, konst, parents, region, region_mut,
};

/// Bytes of one non-temporal vector store.
const VECTOR_BYTES: i64 = 16;
/// Bytes a loop's step must cover: two vectors, as in the unrolled steady loop of a pass,
/// not its remainder loop, which runs once and would leave a partial line in the
/// write-combining buffers. With 8-lane `fp32` tiles a remainder loop of one tile covers
/// 32 bytes and streams: keeping its stores cached (a step of at least two tiles) made the
/// seed forward and backward at N = 1000 (whose rows end in such a tile) 2–7 % slower in
/// three alternated lnc-bench runs, and saved 0.1 ms of the dx kernel's compile time.
/// The same holds for a remainder of one 16-lane half tile: kept cached, the fp16 dx kernel
/// compiled 0.15–0.3 ms faster, but the forward at N = 2064, 4080 and 4095 (streamed, 2
/// threads, caches flushed, alternated launches, two runs) was 0–13 % slower in fp16 and
/// 2–7 % faster in bf16.
const MIN_STEP_BYTES: i64 = 32;
/// Bytes of a cache line.
const LINE_BYTES: i64 = 64;

/// Which half tile stores may stream: `fp16` ones (`TileOptions::half_stores` or
/// `f16_stores`), `bf16` ones (`half_stores`).
#[derive(Clone, Copy)]
pub(crate) struct Halves {
    pub(crate) f16: bool,
    pub(crate) bf16: bool,
}

/// Marks the streaming stores of every qualifying loop.
/// `halves`: which half tile stores stream too.
pub(crate) fn run(f: &mut Function, halves: Halves) {
    let read = crate::rewrite::ArgAccess::of(f).read;
    let parent = parents(f);
    for l in for_loops(f) {
        mark_loop(f, l, parent[&l], &read, halves);
    }
    let mut rows = Vec::new();
    f.walk(|i| {
        if let Opcode::RowStore { site, stream: false, .. } = f.insts[i].opcode
            && !read.contains(&f.sites[site as usize].arg)
        {
            rows.push(i);
        }
    });
    for r in rows {
        mark_row_store(f, r, parent[&r]);
    }
}

/// A `row_store` into an argument the kernel never reads streams under the same run-time
/// test as a loop, on the row's first address and element count.
fn mark_row_store(f: &mut Function, r: Inst, parent: Parent) {
    let (ptr, offset, count) = (f.insts[r].args[0], f.insts[r].args[1], f.insts[r].args[2]);
    let mut pre = Vec::new();
    let flag = flag_of(f, ptr, offset, count, f.spans[r], &mut pre);
    insert_before(f, parent, r, &pre);
    let d = &mut f.insts[r];
    if let Opcode::RowStore { slot, site, .. } = d.opcode {
        d.opcode = Opcode::RowStore { slot, site, stream: true };
        d.args.push(flag);
    }
}

/// `stream_ok (ptr + start), count`, its instructions appended to `pre`; the flag.
fn flag_of(
    f: &mut Function,
    ptr: Value,
    start: Value,
    count: Value,
    span: lnc_diag::Span,
    pre: &mut Vec<Inst>,
) -> Value {
    let at = f.create_inst(Opcode::PtrAdd, vec![ptr, start], &[f.ty(ptr)], span);
    let ok =
        f.create_inst(Opcode::StreamOk, vec![f.insts[at].results[0], count], &[Ty::Scalar(DType::I1)], span);
    pre.extend([at, ok]);
    f.insts[ok].results[0]
}

/// A store that may stream: the instruction, its pointer, the invariant part `t` of its
/// offset (`None` when the offset is `iv + c`), its constant part `c` and its lanes.
struct Candidate {
    inst: Inst,
    ptr: Value,
    shift: Option<Value>,
    c: i64,
    lanes: i64,
}

fn mark_loop(f: &mut Function, l: Inst, parent: Parent, read: &HashSet<u32>, halves: Halves) {
    let data = &f.insts[l];
    let (lb, ub) = (data.args[0], data.args[1]);
    let Some(step) = int_of(f, data.args[2]) else { return };
    if f.ty(lb) != Ty::Scalar(DType::I32) {
        return;
    }
    let body = &data.regions[0];
    if body.insts.iter().any(|&i| f.insts[i].opcode.is_control_flow()) {
        return;
    }
    let iv = body.args[0];
    let inside = defined_inside(f, l);
    let mut found: Vec<Candidate> = Vec::new();
    for &i in &body.insts {
        let d = &f.insts[i];
        let Opcode::Store {
            addr: Addressing::Contiguous,
            has_mask: false,
            site,
            stream: false,
            check_only: false,
        } = d.opcode
        else {
            continue;
        };
        let (ptr, offset, value) = (d.args[0], d.args[1], d.args[2]);
        let Ty::Tile(dtype @ (DType::F32 | DType::F64 | DType::F16 | DType::BF16), lanes) = f.ty(value)
        else {
            continue;
        };
        if (dtype == DType::F16 && !halves.f16) || (dtype == DType::BF16 && !halves.bf16) {
            continue;
        }
        let size = i64::from(dtype.size());
        if (i64::from(lanes) * size) % VECTOR_BYTES != 0
            || step * size < MIN_STEP_BYTES
            || (step * size) % VECTOR_BYTES != 0
            || read.contains(&f.sites[site as usize].arg)
            || inside.contains(&ptr)
        {
            continue;
        }
        let Some((shift, c)) = split_offset(f, offset, iv, &inside) else { continue };
        if (c * size) % VECTOR_BYTES != 0 {
            continue;
        }
        found.push(Candidate { inst: i, ptr, shift, c, lanes: i64::from(lanes) });
    }
    // One flag per loop: the stores of the first pointer and shift found.
    let Some(first) = found.first() else { return };
    let (ptr, shift) = (first.ptr, first.shift);
    let found: Vec<Candidate> = found.into_iter().filter(|c| c.ptr == ptr && c.shift == shift).collect();
    if let Some(size) = whole_lines(f, l, &found, read) {
        split_at_lines(f, l, parent, &found, size);
        return;
    }
    let chosen: Vec<Inst> = found.iter().map(|c| c.inst).collect();
    let span = f.spans[l];
    let i32t = Ty::Scalar(DType::I32);
    let mut pre = Vec::new();
    let mut start = lb;
    if let Some(t) = shift {
        let add = f.create_inst(Opcode::Binary(BinOp::Add), vec![lb, t], &[i32t], span);
        pre.push(add);
        start = f.insts[add].results[0];
    }
    let count = f.create_inst(Opcode::Binary(BinOp::Sub), vec![ub, lb], &[i32t], span);
    pre.push(count);
    let flag = flag_of(f, ptr, start, f.insts[count].results[0], span, &mut pre);
    insert_before(f, parent, l, &pre);
    for s in chosen {
        let d = &mut f.insts[s];
        if let Opcode::Store { addr, has_mask, site, .. } = d.opcode {
            d.opcode = Opcode::Store { addr, has_mask, site, stream: true, check_only: false };
            d.args.push(flag);
        }
    }
}

/// The element size of the stores `chosen` (one pointer and shift) when loop `l` can
/// stream whole cache lines only ([`split_at_lines`]):
/// - the loop carries nothing and starts at a small constant;
/// - its step covers a whole fraction of a line, and the chosen stores of an iteration
///   write exactly its elements `[iv, iv + step)`, so that the iterations of a range
///   starting on a line write whole lines;
/// - running an iteration twice changes nothing: its body only computes, loads (not
///   volatile), prefetches and stores into arguments the kernel never reads, so the
///   loads see the same memory and the stores write the same values again.
fn whole_lines(f: &Function, l: Inst, chosen: &[Candidate], read: &HashSet<u32>) -> Option<i64> {
    let data = &f.insts[l];
    if data.args.len() != 3 || !data.results.is_empty() {
        return None;
    }
    let lb = int_of(f, data.args[0])?;
    let step = int_of(f, data.args[2])?;
    if !(0..1 << 30).contains(&lb) {
        return None;
    }
    let first = chosen.first()?;
    let size = i64::from(f.ty(f.insts[first.inst].args[2]).dtype().size());
    if step <= 0 || LINE_BYTES % (step * size) != 0 {
        return None;
    }
    let mut by_offset: Vec<(i64, i64)> = chosen.iter().map(|c| (c.c, c.lanes)).collect();
    by_offset.sort_unstable();
    let mut covered = 0;
    for (c, lanes) in by_offset {
        if c != covered {
            return None;
        }
        covered += lanes;
    }
    if covered != step {
        return None;
    }
    let rerun_safe = data.regions[0].insts.iter().all(|&i| {
        let d = &f.insts[i];
        match d.opcode {
            Opcode::Load { volatile, .. } => !volatile,
            Opcode::Store { site, .. } => !read.contains(&f.sites[site as usize].arg),
            Opcode::Prefetch { .. } | Opcode::Yield => true,
            op => op.is_pure(),
        }
    });
    rerun_safe.then_some(size)
}

/// Splits loop `l` so that its chosen stores stream whole 64-byte lines only:
///
/// ```text
/// for iv = lb to ub step S { body }
/// =>
/// g = line_gap (q + lb + t)                      ; elements to the first line boundary
/// h = g == 0 ? 0 : g < S ? g + L : g             ; L elements per line; h ≥ S unless 0
/// a = lb + h                                     ; the first line boundary past a head
/// r = (ub - a) & (L - 1)                         ; past the last one, r ≥ S unless 0
/// e = ub - r - (0 < r < S ? L : 0)
/// ok = stream_ok (q + a + t), ub - lb  and  g ≥ 0  and  ub - a ≥ 2 L
/// a' = ok ? a : lb ; e' = ok ? e : ub
/// for iv = lb to a' step S { body[iv := min(iv, a' - S)] }    ; the first partial line
/// for iv = a' to e' step S { body, the chosen stores stream ok }
/// for iv = e' to ub step S { body[iv := min(iv, ub - S)] }    ; the last partial line
/// ```
///
/// A line that non-temporal stores write only in part is still written through the cache
/// by other stores, its own program's or the next row's: the cached store then waits for
/// the line to leave the write-combining buffer and reads it back from memory. Here the
/// partial lines at both ends of the range are written only by cached stores, and the
/// lines between only by non-temporal ones. The iterations of the first and last loops
/// are moved back so as not to reach past `a'` and `ub` (overlapping the one before,
/// which [`whole_lines`] allows): `h` and `ub - e` are multiples of the line, not of `S`.
/// When the row does not stream (`ok` false: too few bytes in the launch, a row not
/// aligned to its element size or shorter than two lines past `a`) the middle loop runs
/// over the whole range with cached stores, as before the split. A row that is not
/// 16-byte aligned now streams too.
///
/// The head and tail loops' cached stores write lines that the core does not hold (the
/// rest of the row bypasses the caches): each waits for its line to be read from memory,
/// and the streaming stores behind it in the store queue wait with it. So those lines are
/// fetched for ownership ahead (`prefetch.write`): the first two lines of the range as
/// soon as the row's pointer is known (in the seed forward, at the program's start, two
/// passes ahead), the last two or three (with a remainder after the loop) before the head
/// loop. Measured on the seed forward (fp32, 4096 rows, 2 threads, caches flushed, 40-60
/// alternated launches in one process) with rows 16 bytes past a line, as large `Vec`s
/// are: 0.84-0.85 of the time at N = 768, 0.86-0.88 at 1000, 0.95-0.96 at 1024, 0.96-0.99
/// at 2048-4096; with rows on lines, 0.94-1.05 (the noise). Either pair alone gained half
/// as much. Against rows on lines without them: 1.02 of their time at N = 768 and 1000,
/// 1.14 at 1024.
fn split_at_lines(f: &mut Function, l: Inst, parent: Parent, chosen: &[Candidate], size: i64) {
    let span = f.spans[l];
    let i32t = Ty::Scalar(DType::I32);
    let i1t = Ty::Scalar(DType::I1);
    let (lb, ub, step) = (f.insts[l].args[0], f.insts[l].args[1], f.insts[l].args[2]);
    let Some(s) = int_of(f, step) else { return };
    let line = LINE_BYTES / size;
    let (ptr, shift) = (chosen[0].ptr, chosen[0].shift);
    let k = |f: &mut Function, v: i64| konst(f, DType::I32, Const::Int(v));
    let (zero, s_c, line_c, two_lines, low_c) =
        (k(f, 0), k(f, s), k(f, line), k(f, 2 * line), k(f, line - 1));
    let one = k(f, 1);
    // A row streamed whole must start on one of its stores' tiles: 32 or 64 bytes where the
    // code generator computes them at once (lnc-clif's `wide`, whose non-temporal stores
    // then need that alignment); a row 16 bytes past one streams its whole lines instead.
    let tile_bytes =
        chosen.iter().map(|c| c.lanes * size).max().unwrap_or(VECTOR_BYTES).clamp(VECTOR_BYTES, LINE_BYTES);
    let vector_low_c = k(f, tile_bytes / size - 1);
    let no = konst(f, DType::I1, Const::Int(0));
    let row_end = row_end(f, l, parent, ptr);
    let ptr_ty = f.ty(ptr);
    let mut b = Pre { f, insts: Vec::new(), span };
    let add = Opcode::Binary(BinOp::Add);
    let sub = Opcode::Binary(BinOp::Sub);
    let and = Opcode::Binary(BinOp::And);
    let shifted = |b: &mut Pre, v| match shift {
        Some(t) => b.op(add, vec![v, t], i32t),
        None => v,
    };
    let start = shifted(&mut b, lb);
    let p0 = b.op(Opcode::PtrAdd, vec![ptr, start], ptr_ty);
    let g = b.op(Opcode::LineGap, vec![p0], i32t);
    let short = b.op(Opcode::Cmp(CmpOp::Lt), vec![g, s_c], i1t);
    let g_next = b.op(add, vec![g, line_c], i32t);
    let h = b.op(Opcode::Select, vec![short, g_next, g], i32t);
    let on_line = b.op(Opcode::Cmp(CmpOp::Eq), vec![g, zero], i1t);
    let h = b.op(Opcode::Select, vec![on_line, zero, h], i32t);
    let a = b.op(add, vec![lb, h], i32t);
    let left = b.op(sub, vec![ub, a], i32t);
    let r = b.op(and, vec![left, low_c], i32t);
    let e = b.op(sub, vec![ub, r], i32t);
    let r_short = b.op(Opcode::Cmp(CmpOp::Lt), vec![r, s_c], i1t);
    let r_some = b.op(Opcode::Cmp(CmpOp::Ne), vec![r, zero], i1t);
    let r_short = b.op(and, vec![r_short, r_some], i1t);
    let e_back = b.op(sub, vec![e, line_c], i32t);
    let e = b.op(Opcode::Select, vec![r_short, e_back, e], i32t);
    let a_start = shifted(&mut b, a);
    let count = b.op(sub, vec![ub, lb], i32t);
    let large = flag_of(b.f, ptr, a_start, count, span, &mut b.insts);
    let aligned = b.op(Opcode::Cmp(CmpOp::Ge), vec![g, zero], i1t);
    let room = b.op(Opcode::Cmp(CmpOp::Ge), vec![left, two_lines], i1t);
    let ok = b.op(and, vec![large, aligned], i1t);
    let split = b.op(and, vec![ok, room], i1t);
    // A row starting on a 16-byte vector that no later loop writes on from `ub` streams
    // whole instead, from its start to `ub`: its partial first and last lines are those
    // of the neighbouring rows, which stream too, and the write-combining buffers join
    // them. Cached, each such line would be read for ownership.
    let (split, ok) = match row_end {
        Some(end) => {
            let vector_gap = b.op(and, vec![g, vector_low_c], i32t);
            let on_vector = b.op(Opcode::Cmp(CmpOp::Eq), vec![vector_gap, zero], i1t);
            let last = b.op(Opcode::Cmp(CmpOp::Eq), vec![end, ub], i1t);
            let whole = b.op(and, vec![ok, on_vector], i1t);
            let whole = b.op(and, vec![whole, last], i1t);
            let partial = b.op(Opcode::Cmp(CmpOp::Eq), vec![whole, no], i1t);
            (b.op(and, vec![split, partial], i1t), b.op(Opcode::Binary(BinOp::Or), vec![split, whole], i1t))
        }
        None => (split, split),
    };
    let a = b.op(Opcode::Select, vec![split, a, lb], i32t);
    let e = b.op(Opcode::Select, vec![split, e, ub], i32t);
    // `lb ≤ a ≤ e ≤ ub` already (a split row has two lines past `a`), but not provably:
    // bounded so, the three loops are a run that lnc-clif's `chain` checks once for the
    // row, as it did the loop before the split, instead of each with its own checks.
    let (max, min) = (Opcode::Binary(BinOp::Max), Opcode::Binary(BinOp::Min));
    let a = b.op(max, vec![a, lb], i32t);
    let a = b.op(min, vec![a, ub], i32t);
    let e = b.op(max, vec![e, a], i32t);
    let e = b.op(min, vec![e, ub], i32t);
    let last_head = b.op(sub, vec![a, s_c], i32t);
    let last_tail = b.op(sub, vec![ub, s_c], i32t);

    // The lines the head and tail loops write, fetched for ownership ahead: the last ones
    // here, the first two as soon as the row's pointer and start are known. The tail loop writes at
    // most two lines, from a line boundary to `ub`: those of `ub - 1 - L` and `ub - 1`.
    // The loops after it, if any (`row_end`: a remainder and a scalar tail, less than `S`
    // elements, so less than a line), write cached into at most the line of
    // `ub - 1 + L` besides.
    let last = b.op(sub, vec![ub, one], i32t);
    let last = shifted(&mut b, last);
    let before = b.op(sub, vec![last, line_c], i32t);
    let mut ends = vec![before, last];
    if row_end.is_some() {
        ends.push(b.op(add, vec![last, line_c], i32t));
    }
    for at in ends {
        let p = b.f.create_inst(Opcode::Prefetch { write: true }, vec![ptr, at], &[], span);
        b.insts.push(p);
    }
    let lb_line =
        int_of(b.f, lb).filter(|_| shift.is_none()).map(|lb| konst(b.f, DType::I32, Const::Int(lb + line)));
    let mut early = Pre { f: b.f, insts: Vec::new(), span };
    let first = shifted(&mut early, lb);
    let second = match lb_line {
        Some(c) => c,
        None => early.op(add, vec![first, line_c], i32t),
    };
    for at in [first, second] {
        let p = early.f.create_inst(Opcode::Prefetch { write: true }, vec![ptr, at], &[], span);
        early.insts.push(p);
    }
    let early = early.insts;
    let mut pre = b.insts;
    insert_after_operands(f, parent, early);
    let body = f.insts[l].regions[0].clone();
    let head = clamped_copy(f, &body, [lb, a, step], last_head, span);
    let tail = clamped_copy(f, &body, [e, ub, step], last_tail, span);
    // The whole lines, streaming when `ok`; the whole range, cached, otherwise.
    f.insts[l].args[0] = a;
    f.insts[l].args[1] = e;
    for c in chosen {
        let d = &mut f.insts[c.inst];
        if let Opcode::Store { addr, has_mask, site, .. } = d.opcode {
            d.opcode = Opcode::Store { addr, has_mask, site, stream: true, check_only: false };
            d.args.push(ok);
        }
    }
    pre.push(head);
    insert_before(f, parent, l, &pre);
    let region = region_mut(f, parent);
    if let Some(at) = region.insts.iter().position(|&i| i == l) {
        region.insts.insert(at + 1, tail);
    }
}

/// Scalar instructions built in order, to be inserted before a loop.
struct Pre<'f> {
    f: &'f mut Function,
    insts: Vec<Inst>,
    span: lnc_diag::Span,
}

impl Pre<'_> {
    fn op(&mut self, opcode: Opcode, args: Vec<Value>, ty: Ty) -> Value {
        let i = self.f.create_inst(opcode, args, &[ty], self.span);
        self.insts.push(i);
        self.f.insts[i].results[0]
    }
}

/// Where the stores through `ptr` of loop `l` and of the loops after it end: the upper
/// bound of the last of the loops that follow `l` in its region, each starting where the
/// one before ends and storing through `ptr` (the remainder and tail loops of a pass).
/// `None` when no such loop follows.
fn row_end(f: &Function, l: Inst, parent: Parent, ptr: Value) -> Option<Value> {
    let region = region(f, parent);
    let at = region.insts.iter().position(|&i| i == l)?;
    let mut end = f.insts[l].args[1];
    let mut found = false;
    for &s in &region.insts[at + 1..] {
        let d = &f.insts[s];
        if d.opcode != Opcode::For {
            if d.opcode.is_pure() {
                continue;
            }
            break;
        }
        let stores = d.regions[0]
            .insts
            .iter()
            .any(|&i| matches!(f.insts[i].opcode, Opcode::Store { .. }) && f.insts[i].args[0] == ptr);
        if d.args[0] != end || !stores {
            break;
        }
        end = d.args[1];
        found = true;
    }
    found.then_some(end)
}

/// `for iv = lb to ub step S { body[iv := min(iv, last)] }`: a copy of a loop body whose
/// iterations do not start past `last`.
fn clamped_copy(
    f: &mut Function,
    body: &Region,
    [lb, ub, step]: [Value; 3],
    last: Value,
    span: lnc_diag::Span,
) -> Inst {
    let i32t = Ty::Scalar(DType::I32);
    let l = f.create_inst(Opcode::For, vec![lb, ub, step], &[], span);
    let iv = f.create_region_arg(l, 0, 0, i32t);
    let clamp = f.create_inst(Opcode::Binary(BinOp::Min), vec![iv, last], &[i32t], span);
    let mut map = HashMap::from([(body.args[0], f.insts[clamp].results[0])]);
    let mut insts = vec![clamp];
    insts.extend(clone_insts(f, &body.insts, &mut map, &mut HashSet::new(), Lanes::Same));
    f.insts[l].regions = vec![Region { args: vec![iv], insts }];
    l
}

/// `offset` as `iv + t + c`: the invariant `t` (absent when zero) and the constant `c`.
fn split_offset(
    f: &Function,
    offset: Value,
    iv: Value,
    inside: &HashSet<Value>,
) -> Option<(Option<Value>, i64)> {
    if let Some(t) = iv_plus(f, offset, iv, inside) {
        return match t.map(|t| (t, int_of(f, t))) {
            None => Some((None, 0)),
            Some((_, Some(c))) => Some((None, c)),
            Some((t, None)) => (f.ty(t) == Ty::Scalar(DType::I32)).then_some((Some(t), 0)),
        };
    }
    // `(iv + t) + c`.
    let d = &f.insts[def(f, offset)?];
    if d.opcode != Opcode::Binary(BinOp::Add) {
        return None;
    }
    let (inner, c) = match (int_of(f, d.args[0]), int_of(f, d.args[1])) {
        (None, Some(c)) => (d.args[0], c),
        (Some(c), None) => (d.args[1], c),
        _ => return None,
    };
    let (t, c0) = split_offset(f, inner, iv, inside)?;
    Some((t, c0 + c))
}
