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
//! (the stores x86-64 has a non-temporal form of that Cranelift emits) at `iv + c` with
//! `c` a constant multiple of the vector, or at `iv + t + c` with `t` invariant in the loop
//! (one `t` per loop), in the straight-line body of a `for` whose constant step covers at
//! least two vectors (so the remainder loop of a pass, which writes one vector once, keeps
//! cached stores), into an argument no instruction of the kernel reads (so no
//! program of the launch reads what was streamed: the runtime fences the stores before a
//! launch returns). Nothing else about the stores changes: the same values at the same
//! addresses, in the same order within the program.
//!
//! A `row_store` into such an argument (a half row rounded whole by a runtime helper,
//! module `rows`) gets the same test, `stream_ok (q + offset), count`, as an operand: its
//! helper then writes the row's whole 16-byte groups with non-temporal stores. Measured on
//! the fp16 forward (4096 × 4096, one thread, cold): a cached `y` made the row 1.4× slower
//! than the same kernel with an fp32 `y`, though it writes half the bytes.

use std::collections::HashSet;

use lnc_lir::{Addressing, BinOp, DType, Function, Inst, Opcode, Ty, Value};

use crate::rewrite::{Parent, def, defined_inside, for_loops, insert_before, int_of, iv_plus, parents};

/// Bytes of one non-temporal vector store.
const VECTOR_BYTES: i64 = 16;
/// Bytes a loop's step must cover: two vectors, as in the unrolled steady loop of a pass,
/// not its remainder loop, which runs once and would leave a partial line in the
/// write-combining buffers.
const MIN_STEP_BYTES: i64 = 32;

/// Marks the streaming stores of every qualifying loop.
pub(crate) fn run(f: &mut Function) {
    let read = crate::rewrite::ArgAccess::of(f).read;
    let parent = parents(f);
    for l in for_loops(f) {
        mark_loop(f, l, parent[&l], &read);
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

/// A store that may stream: the instruction, its pointer and the invariant part `t` of
/// its offset (`None` when the offset is `iv + c`).
struct Candidate {
    inst: Inst,
    ptr: Value,
    shift: Option<Value>,
}

fn mark_loop(f: &mut Function, l: Inst, parent: Parent, read: &HashSet<u32>) {
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
        let Opcode::Store { addr: Addressing::Contiguous, has_mask: false, site, stream: false } = d.opcode
        else {
            continue;
        };
        let (ptr, offset, value) = (d.args[0], d.args[1], d.args[2]);
        let Ty::Tile(dtype @ (DType::F32 | DType::F64), lanes) = f.ty(value) else { continue };
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
        found.push(Candidate { inst: i, ptr, shift });
    }
    // One flag per loop: the stores of the first pointer and shift found.
    let Some(first) = found.first() else { return };
    let (ptr, shift) = (first.ptr, first.shift);
    let chosen: Vec<Inst> =
        found.iter().filter(|c| c.ptr == ptr && c.shift == shift).map(|c| c.inst).collect();
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
            d.opcode = Opcode::Store { addr, has_mask, site, stream: true };
            d.args.push(flag);
        }
    }
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
