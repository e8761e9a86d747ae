//! Half rows converted whole: the contiguous `fp16`/`bf16` loads and stores of a tile loop
//! become one conversion of the row through scratch.
//!
//! ```text
//! for iv = 0 to E step L { x = load.contig p[iv + t] mask P other o ; … store.contig q[iv + u], cast(y) mask P }
//! =>
//! nb = min(max(n - base, 0), E)                 ; the elements P enables (E when unmasked)
//! row_load s1[0..nb] <- p[t..]
//! for iv = 0 to E step L { x = select(P, scratch_load s1[iv], o) ; … scratch_store s2[iv], y }
//! row_store q[u..] <- s2[0..nb]
//! ```
//!
//! Cranelift has no half-precision conversions, so without F16C a tile converts with
//! integer bit manipulation: about a dozen instructions per four lanes to widen `fp16`,
//! two dozen to round `fp32` to it. The row conversions are runtime helpers that use
//! AVX-512 or F16C where the CPU has them, sixteen or eight lanes per instruction, and read
//! or write exactly the enabled elements. The values are the same: scratch holds a half
//! block as the `fp32` value it is computed in, widened with quieted NaNs as the tile
//! conversion does, and `row_store` rounds to nearest even, as a cast to the dtype does; a
//! store of `cast(y)` stores `y` into `fp32` scratch, so the rounding happens once, in the
//! helper.
//!
//! Which accesses: `fp16` loads and `fp16`/`bf16` stores; `bf16` loads only when the row is
//! the same in every program (below) or kept in scratch for later loops, since widening
//! `bf16` for arithmetic alone is two instructions per tile (with 256-bit loops,
//! `TileOptions::native_bf16`, fusion reads such a row again in later loops instead of
//! keeping it). Where code generation
//! converts `fp16` tiles with F16C, one instruction per four lanes each way
//! ([`crate::TileOptions::native_f16`]), `fp16` loads are treated as `bf16` ones, and an
//! `fp16` store converts whole only when its row (the loop's extent, the block, not the
//! run-time length) is longer than [`MAX_F16_TILE_STORE_ROW`] (2 KB) and the row store may
//! stream: the option is on and the kernel never reads the argument (module `stream`). The
//! helper's non-temporal stores then save reading the output's lines. Whether it streams
//! is decided at run time (the launch's size, the row's alignment): a launch that does
//! not goes through the helper with cached stores, slower than tiles on rows in the cache.
//!
//! Only what keeps the program's meaning moves:
//! - the loop is innermost, from 0 to a constant extent, with no atomics, asserts or
//!   prints (their order against the moved accesses is observable), and its access tiles
//!   cover one step each (`lanes == step`) at `iv` or `iv + t` (`iv` possibly widened),
//!   `t` invariant in the loop (pure scalar instructions of the body computing it, such as
//!   a 2-D block's row offset, are copied before the loop);
//! - a mask is the loop's bound predicate `P = base + iv + lane < n` (module `bounds`), `P
//!   & splat(c)` with `c` invariant (a 2-D block's row mask: the count is `c ? nb : 0`), or
//!   absent: the row is then the whole extent `E`. An unmasked store moves only out of a
//!   loop without a bound predicate: `bounds` may drop the tiles past `n` of one, which
//!   would leave the scratch past `nb` unwritten for the row store;
//! - a load moves before the loop only when the loop stores nothing into the same
//!   argument; a store moves after it only when the loop accesses that argument nowhere
//!   else (arguments do not overlap), or only by one load of the same tile before the
//!   store (`p[i] += y`, the seed backward's partial rows): each iteration then reads a
//!   tile no earlier one wrote. That load stays a tile. In bf16 this measured 0.022 against
//!   0.016 ms on 16 rows of the seed's dx kernel in cache (N = 1024, one thread) and 6.4
//!   against 5.1 ms on 4096 rows, caches flushed: the tile rounding took 65 % of the time.
//!
//! A row load whose pointer, offset and count are the same in every program (computed
//! from arguments and constants), from an argument the kernel never writes, into a buffer
//! nothing else writes, is `row_load.once(k)`: the worker's first program of a launch
//! converts it and sets flag `k` in the scratch bytes the runtime zeroes when a worker
//! starts a launch; the others find it done (a layer norm's `w` and `b`).
//!
//! A store's mask may have been the predicate's only use: `bounds`, which runs next, finds
//! the comparison itself (dead code is removed after it), so the loop is still split.

use std::collections::HashMap;

use lnc_lir::{Addressing, Const, DType, Function, Inst, Opcode, SCRATCH_FLAG_BYTES, Ty, Value};

use crate::bounds::{candidate, enabled_count};
use crate::rewrite::{
    ArgAccess, Parent, def, defined_inside, for_loops, insert_before, int_of, is_widened_iv, konst, parents,
    region_mut, term_plus,
};

/// The longest `fp16` row (bytes) stored tile by tile when tiles narrow in one
/// instruction and the row store may stream (unless `TileOptions::f16_stores`, below).
/// Measured on the seed forward in fp16 (2 threads, caches flushed, medians of 40
/// launches, three alternating runs; tiles against the row helper, whose non-temporal
/// stores save reading the output's lines first):
/// - 1 KB rows (32 MiB of output): 3.15-3.63 against 3.36-3.87 ms;
/// - 2 KB rows (32 MiB): 2.90-2.95 against 3.08-3.69 ms;
/// - 4 KB rows (16 MiB): 1.66-1.72 against 1.57-1.83 ms, and in two runs of lnc-bench
///   18.7-18.9 against 20.0-21.0 GB/s (with the helper: 19.3-22.2 against 20.0-20.8);
/// - 8 KB rows (32 MiB): 3.31-4.29 against 3.13-4.15 ms;
/// - 16 KB rows (64 MiB): 7.55-7.98 against 6.76-8.34 ms;
/// - 32 KB rows (128 MiB): 15.7-18.4 against 14.0-14.4 ms.
///
/// A store that would not stream converts tile by tile whatever its length: 8 KB rows in
/// the cache took 1.30 against 1.45 µs (one thread).
///
/// Those tiles were stored by `vcvtps2ph m128, ymm`. Converted into their register and
/// stored (lnc-clif's `widen`; `TileOptions::f16_stores`), tiles ran faster than the
/// helper's non-temporal stores at every length on Zen 3 (AVX2, 2 threads, 4096 rows,
/// caches flushed, 30 launches of each alternated): 0.927 of the time at 4 KB rows, 0.831
/// at 8 KB, 0.852 at 32 KB; with the memory form they had been 4-6 % slower at 8 KB there.
pub(crate) const MAX_F16_TILE_STORE_ROW: i64 = 2 << 10;

/// `fp16` tiles convert in one instruction each way; `stream`: row stores may stream.
#[derive(Clone, Copy)]
struct NativeF16 {
    stream: bool,
}

/// How the half stores of a loop are kept: `native`, `fp16` tiles convert in one
/// instruction each way; `tiles`, `bf16` stores, and `fp16` ones where `native`, stay in
/// their loops (`TileOptions::half_stores`).
#[derive(Clone, Copy)]
struct HalfStores {
    native: Option<NativeF16>,
    tiles: bool,
    /// `fp16` stores, where `native`, stay in their loops (`TileOptions::f16_stores`).
    f16_tiles: bool,
    /// `bf16` stores stay in their loops (`TileOptions::bf16_stores`).
    bf16_tiles: bool,
}

/// Which half tile stores stay in their loops: `half`, `TileOptions::half_stores`;
/// `f16`, `TileOptions::f16_stores`; `bf16`, `TileOptions::bf16_stores`.
#[derive(Clone, Copy)]
pub(crate) struct Kept {
    pub(crate) half: bool,
    pub(crate) f16: bool,
    pub(crate) bf16: bool,
}

/// Rewrites the half accesses of every qualifying loop.
/// `native_f16`: `fp16` tiles convert in one instruction each way
/// ([`crate::TileOptions::native_f16`]); `stream`: row stores into arguments the kernel
/// never reads will stream (module `stream`).
/// `kept.half`: `bf16` stores, and `fp16` ones with `native_f16`, stay in their loops
/// (`TileOptions::half_stores`); `kept.f16`: `fp16` ones with `native_f16` do
/// (`TileOptions::f16_stores`); `kept.bf16`: `bf16` ones do (`TileOptions::bf16_stores`).
pub(crate) fn run(f: &mut Function, native_f16: bool, stream: bool, kept: Kept) {
    let loops = for_loops(f);
    let args = ArgAccess::of(f);
    let native = native_f16.then_some(NativeF16 { stream });
    let parent = parents(f);
    let mut flags = 0u8;
    for l in loops {
        rewrite_loop(
            f,
            l,
            parent[&l],
            &args,
            HalfStores { native, tiles: kept.half, f16_tiles: kept.f16, bf16_tiles: kept.bf16 },
            &mut flags,
        );
    }
    if flags > 0 {
        // The flags take the scratch area's first bytes, which the runtime zeroes.
        for s in &mut f.scratch {
            s.offset += SCRATCH_FLAG_BYTES;
        }
    }
}

/// Flags of `row_load.once` that fit in the zeroed bytes of the scratch area.
const MAX_FLAGS: u8 = (SCRATCH_FLAG_BYTES / 4) as u8;

/// Whether `v` is the same in every program of a launch: computed from arguments,
/// constants and `num_programs` by pure scalar instructions.
fn launch_invariant(f: &Function, v: Value, depth: u32) -> bool {
    let Some(i) = def(f, v) else { return false };
    let d = &f.insts[i];
    match d.opcode {
        Opcode::Arg(_) | Opcode::Const(_) | Opcode::NumPrograms(_) => true,
        Opcode::ProgramId(_) | Opcode::ScratchLoad(_) => false,
        op => {
            depth > 0
                && op.is_pure()
                && !f.ty(v).is_tile()
                && d.args.iter().all(|&a| launch_invariant(f, a, depth - 1))
        }
    }
}

/// A half access of the loop that moves.
struct Moved {
    inst: Inst,
    /// The memory offset of the row's first element: `t` of `iv + t`, none for `iv`.
    start: Option<Value>,
    masked: bool,
    /// `c` of a mask `P & splat(c)`: the row is enabled only when `c` holds.
    guard: Option<Value>,
}

fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

fn rewrite_loop(
    f: &mut Function,
    l: Inst,
    parent: Parent,
    args: &ArgAccess,
    half: HalfStores,
    flags: &mut u8,
) {
    let native = half.native;
    let written = &args.written;
    let d = &f.insts[l];
    if int_of(f, d.args[0]) != Some(0) {
        return;
    }
    let (Some(extent), Some(step)) = (int_of(f, d.args[1]), int_of(f, d.args[2])) else { return };
    if extent <= 0 || step <= 0 || extent % step != 0 || extent > i32::MAX as i64 / 4 {
        return;
    }
    let body = &d.regions[0];
    let iv = body.args[0];
    let fixed_order = body.insts.iter().any(|&j| {
        matches!(
            f.insts[j].opcode,
            Opcode::For
                | Opcode::While
                | Opcode::If
                | Opcode::Atomic { .. }
                | Opcode::AtomicCas { .. }
                | Opcode::Assert { .. }
                | Opcode::Print(_)
                | Opcode::RowLoad { .. }
                | Opcode::RowStore { .. }
        )
    });
    if fixed_order {
        return;
    }
    let inside = defined_inside(f, l);
    // A bound whose lanes may wrap is no count of leading elements (`bounds::Key::may_wrap`).
    let bound = candidate(f, l).filter(|(k, _)| !k.may_wrap());
    let pset = bound.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
    // Accesses per argument: (loads, stores).
    let mut per_arg: HashMap<u32, (usize, usize)> = HashMap::new();
    for &j in &body.insts {
        match f.insts[j].opcode {
            Opcode::Load { site, .. } => per_arg.entry(f.sites[site as usize].arg).or_default().0 += 1,
            Opcode::Store { site, .. } => per_arg.entry(f.sites[site as usize].arg).or_default().1 += 1,
            _ => {}
        }
    }
    // At `iv` or `iv + t`, `iv` possibly widened, `t` invariant in the loop.
    let start_of = |offset: Value| -> Option<Option<Value>> {
        term_plus(f, offset, |v| v == iv || is_widened_iv(f, v, iv), |t| invariant(f, t, &inside, DEPTH))
    };
    // The mask of an access: the predicate `P`, or `P & splat(c)` with `c` invariant;
    // `Some(guard)` when acceptable.
    let mask_of = |m: Value| -> Option<Option<Value>> {
        if pset.contains(&m) {
            return Some(None);
        }
        let md = &f.insts[def(f, m)?];
        if md.opcode != Opcode::Binary(lnc_lir::BinOp::And) {
            return None;
        }
        let (a, b) = (md.args[0], md.args[1]);
        let other = if pset.contains(&a) {
            b
        } else if pset.contains(&b) {
            a
        } else {
            return None;
        };
        let sd = &f.insts[def(f, other)?];
        let c = sd.args.first().copied().filter(|_| sd.opcode == Opcode::Splat)?;
        invariant(f, c, &inside, DEPTH).then_some(Some(c))
    };
    let mut loads = Vec::new();
    let mut stores = Vec::new();
    for &j in &body.insts {
        let dj = &f.insts[j];
        match dj.opcode {
            Opcode::Load { addr: Addressing::Contiguous, has_mask, site, .. } => {
                let ty = f.ty(dj.results[0]);
                let arg = f.sites[site as usize].arg;
                let guard = if has_mask { mask_of(dj.args[2]) } else { Some(None) };
                // bf16 widens in two instructions per tile when only arithmetic uses the
                // value: a pass through scratch pays for a row converted once per launch
                // (see `same_everywhere` below), or for a row the loop keeps in scratch for
                // later loops, where the tile conversion quiets NaNs before storing (six
                // instructions per tile; the helper measured 7-10 % faster on the forward).
                let bf16_once = || {
                    let bound_same = bound.as_ref().is_none_or(|(k, _)| {
                        launch_invariant(f, k.n, 12) && k.base.is_none_or(|b| launch_invariant(f, b, 12))
                    });
                    !written.contains(&arg)
                        && launch_invariant(f, dj.args[0], 12)
                        && start_of(dj.args[1]).is_some_and(|t| t.is_none_or(|t| launch_invariant(f, t, 12)))
                        && (!has_mask || (guard == Some(None) && bound_same))
                };
                let like_bf16 = ty == Ty::Tile(DType::BF16, step as u8)
                    || (native.is_some() && ty == Ty::Tile(DType::F16, step as u8));
                let ok = ((native.is_none() && ty == Ty::Tile(DType::F16, step as u8))
                    || (like_bf16 && (kept_in(f, l, dj.results[0]).is_some() || bf16_once())))
                    && invariant(f, dj.args[0], &inside, DEPTH)
                    && per_arg[&arg].1 == 0;
                if let (true, Some(start), Some(guard)) = (ok, start_of(dj.args[1]), guard) {
                    loads.push(Moved { inst: j, start, masked: has_mask, guard });
                }
            }
            Opcode::Store {
                addr: Addressing::Contiguous,
                has_mask,
                site,
                stream: false,
                check_only: false,
            } => {
                let ty = f.ty(dj.args[2]);
                let arg = f.sites[site as usize].arg;
                let tile_f16 = ty.dtype() == DType::F16
                    && native.is_some_and(|n| {
                        half.tiles
                            || half.f16_tiles
                            || !(n.stream && !args.read.contains(&arg) && extent * 2 > MAX_F16_TILE_STORE_ROW)
                    });
                // An unmasked store in a loop `bounds` will split stores in the tiles past
                // `n` too, which `bounds` may then drop as doing nothing but scratch writes
                // no later loop reads: the row store would write stale scratch.
                let ok = ty == Ty::Tile(ty.dtype(), step as u8)
                    && is_half(ty.dtype())
                    && !tile_f16
                    && !((half.tiles || half.bf16_tiles) && ty.dtype() == DType::BF16)
                    && (has_mask || bound.is_none())
                    && invariant(f, dj.args[0], &inside, DEPTH)
                    && (per_arg[&arg] == (0, 1)
                        || (per_arg[&arg] == (1, 1) && reads_first(f, body, j, step)));
                let guard = if has_mask { mask_of(dj.args[3]) } else { Some(None) };
                if let (true, Some(start), Some(guard)) = (ok, start_of(dj.args[1]), guard) {
                    stores.push(Moved { inst: j, start, masked: has_mask, guard });
                }
            }
            _ => {}
        }
    }
    if loads.is_empty() && stores.is_empty() {
        return;
    }
    let span = f.spans[l];
    let mut before = Vec::new();
    let mut emit = |f: &mut Function, op: Opcode, args: Vec<Value>, ty: Ty| -> Value {
        let i = f.create_inst(op, args, &[ty], span);
        before.push(i);
        f.insts[i].results[0]
    };
    let masked = loads.iter().chain(&stores).any(|m| m.masked);
    let nb = match &bound {
        Some((key, _)) if masked => enabled_count(f, key, &mut emit),
        _ => konst(f, DType::I32, Const::Int(extent)),
    };
    let full = konst(f, DType::I32, Const::Int(extent));
    let zero = konst(f, DType::I32, Const::Int(0));
    let iv_zero = konst(f, f.ty(iv).dtype(), Const::Int(0));
    let inside = defined_inside(f, l);
    let mut hoisted = HashMap::new();
    // The row's pointer, first offset and count, computed before the loop.
    let mut operands = |f: &mut Function, m: &Moved, ptr: Value, before: &mut Vec<Inst>| -> [Value; 3] {
        let mut h = |f: &mut Function, v| hoist(f, v, &inside, &mut hoisted, before, span);
        let ptr = h(f, ptr);
        let start = m.start.map_or(iv_zero, |t| h(f, t));
        let count = match (m.masked, m.guard) {
            (false, _) => full,
            (true, None) => nb,
            (true, Some(c)) => {
                let c = h(f, c);
                let i = f.create_inst(Opcode::Select, vec![c, nb, zero], &[Ty::Scalar(DType::I32)], span);
                before.push(i);
                f.insts[i].results[0]
            }
        };
        [ptr, start, count]
    };
    let mut replace = HashMap::new();
    for m in &loads {
        let dj = f.insts[m.inst].clone();
        let Opcode::Load { has_other, site, .. } = dj.opcode else { continue };
        let ty = f.ty(dj.results[0]);
        let kept = kept_in(f, l, dj.results[0]);
        let slot = kept.unwrap_or_else(|| f.add_scratch(ty.dtype(), extent as u32));
        let args = operands(f, m, dj.args[0], &mut before);
        // A row every program reads the same (W and B of a layer norm) is converted once
        // per launch and worker, into a buffer nothing else writes.
        let same_everywhere = kept.is_none()
            && !written.contains(&f.sites[site as usize].arg)
            && args.iter().all(|&a| launch_invariant(f, a, 12))
            && *flags < MAX_FLAGS;
        let once = same_everywhere.then(|| {
            *flags += 1;
            *flags - 1
        });
        let row = f.create_inst(Opcode::RowLoad { slot, site, once }, args.to_vec(), &[], f.spans[m.inst]);
        before.push(row);
        let mut new = Vec::new();
        let span = f.spans[m.inst];
        let mut at = |f: &mut Function, op: Opcode, args: Vec<Value>, ty: Ty| -> Value {
            let i = f.create_inst(op, args, &[ty], span);
            new.push(i);
            f.insts[i].results[0]
        };
        let mut v = at(f, Opcode::ScratchLoad(slot), vec![iv], ty);
        if m.masked {
            let other = match has_other {
                true if f.ty(dj.args[3]).is_tile() => dj.args[3],
                true => at(f, Opcode::Splat, vec![dj.args[3]], ty),
                false => {
                    let z = konst(f, ty.dtype(), Const::Float(0.0));
                    at(f, Opcode::Splat, vec![z], ty)
                }
            };
            v = at(f, Opcode::Select, vec![dj.args[2], v, other], ty);
        }
        replace.insert(dj.results[0], v);
        splice(f, l, m.inst, &new);
    }
    let mut after = Vec::new();
    for m in &stores {
        let dj = f.insts[m.inst].clone();
        let Opcode::Store { site, .. } = dj.opcode else { continue };
        let v = dj.args[2];
        let lanes = f.ty(v).lanes();
        // A store of `cast(y)` keeps `y` in fp32: the helper rounds it, once.
        let widened = def(f, v)
            .filter(|&c| f.insts[c].opcode == Opcode::Cast)
            .map(|c| f.insts[c].args[0])
            .filter(|&y| f.ty(y) == Ty::Tile(DType::F32, lanes));
        let (value, dtype) = match widened {
            Some(y) => (y, DType::F32),
            None => (v, f.ty(v).dtype()),
        };
        let slot = f.add_scratch(dtype, extent as u32);
        let span = f.spans[m.inst];
        let st = f.create_inst(Opcode::ScratchStore(slot), vec![iv, value], &[], span);
        splice(f, l, m.inst, &[st]);
        let args = operands(f, m, dj.args[0], &mut before);
        after.push(f.create_inst(Opcode::RowStore { slot, site, stream: false }, args.to_vec(), &[], span));
    }
    replace_in(f, l, &replace);
    insert_before(f, parent, l, &before);
    let region = region_mut(f, parent);
    let pos = region.insts.iter().position(|&i| i == l).map_or(region.insts.len(), |p| p + 1);
    region.insts.splice(pos..pos, after);
}

/// Whether the one load of store `store`'s argument in `body` reads the tile the store
/// writes (the same pointer and offset, a whole step) before it: a read-modify-write such
/// as `p[i] += y`. Each iteration then reads only its own tile, which no earlier iteration
/// wrote, so storing every tile after the loop changes nothing the loads see.
fn reads_first(f: &Function, body: &lnc_lir::Region, store: Inst, step: i64) -> bool {
    let sd = &f.insts[store];
    let Opcode::Store { site, .. } = sd.opcode else { return false };
    let arg = f.sites[site as usize].arg;
    for &j in &body.insts {
        if j == store {
            return false;
        }
        let d = &f.insts[j];
        if let Opcode::Load { addr: Addressing::Contiguous, site: s, .. } = d.opcode
            && f.sites[s as usize].arg == arg
        {
            return d.args[0] == sd.args[0]
                && d.args[1] == sd.args[1]
                && f.ty(d.results[0]).lanes() as i64 == step;
        }
    }
    false
}

/// How deep [`invariant`] looks through definitions (a row's offset is a few products and
/// sums of the outer loops' indices).
const DEPTH: u32 = 6;

/// Whether `v` can be computed before the loop whose values are `inside`: defined outside,
/// or by pure scalar instructions of the body (not scratch reads) from such values.
fn invariant(f: &Function, v: Value, inside: &std::collections::HashSet<Value>, depth: u32) -> bool {
    if !inside.contains(&v) {
        return true;
    }
    let Some(i) = def(f, v) else { return false };
    let d = &f.insts[i];
    depth > 0
        && d.opcode.is_pure()
        && !matches!(d.opcode, Opcode::ScratchLoad(_))
        && !f.ty(v).is_tile()
        && d.args.iter().all(|&a| invariant(f, a, inside, depth - 1))
}

/// `v` (an [`invariant`] value) before the loop: itself, or a copy of its computation
/// appended to `before` (each instruction copied once, recorded in `map`).
fn hoist(
    f: &mut Function,
    v: Value,
    inside: &std::collections::HashSet<Value>,
    map: &mut HashMap<Value, Value>,
    before: &mut Vec<Inst>,
    span: lnc_diag::Span,
) -> Value {
    if !inside.contains(&v) {
        return v;
    }
    if let Some(&h) = map.get(&v) {
        return h;
    }
    let Some(i) = def(f, v) else { return v };
    let d = f.insts[i].clone();
    let args = d.args.iter().map(|&a| hoist(f, a, inside, map, before, span)).collect();
    let j = f.create_inst(d.opcode, args, &[f.ty(v)], span);
    before.push(j);
    let h = f.insts[j].results[0];
    map.insert(v, h);
    h
}

/// The scratch buffer that loop `l` keeps the loaded row `x` in for later loops
/// (`scratch_store s[iv], x` is its only access to `s`): the row is converted into it
/// directly. The store stays — it writes `other` where the mask is off, as before — and
/// once `bounds` has made the steady state unmasked, it stores what `s` holds already and
/// `dce` removes it.
fn kept_in(f: &Function, l: Inst, x: Value) -> Option<u32> {
    let body = &f.insts[l].regions[0];
    let iv = body.args[0];
    let mut found = None;
    for &j in &body.insts {
        let d = &f.insts[j];
        if let Opcode::ScratchStore(s) = d.opcode
            && d.args[..] == [iv, x]
        {
            found = Some(s);
        }
    }
    let s = found?;
    let buf = f.scratch[s as usize];
    let ok = buf.dtype == f.ty(x).dtype() && buf.len as i64 >= int_of(f, f.insts[l].args[1])?;
    let others = body.insts.iter().filter(|&&j| match f.insts[j].opcode {
        Opcode::ScratchStore(t) | Opcode::ScratchLoad(t) => t == s,
        _ => false,
    });
    (ok && others.count() == 1).then_some(s)
}

/// Replaces instruction `at` of loop `l`'s body by `new`.
fn splice(f: &mut Function, l: Inst, at: Inst, new: &[Inst]) {
    let insts = &mut f.insts[l].regions[0].insts;
    if let Some(pos) = insts.iter().position(|&i| i == at) {
        insts.splice(pos..=pos, new.iter().copied());
    }
}

/// Replaces the uses in loop `l`'s body of the keys of `map` by their values.
fn replace_in(f: &mut Function, l: Inst, map: &HashMap<Value, Value>) {
    let insts = f.insts[l].regions[0].insts.clone();
    for i in insts {
        for a in &mut f.insts[i].args {
            if let Some(&to) = map.get(a) {
                *a = to;
            }
        }
    }
}
