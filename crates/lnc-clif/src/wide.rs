//! Tile loops in 256-bit vectors, which Cranelift does not emit (or 512-bit ones: a wide
//! part is then 16 lanes, [`ZMM_PER`], and module `evex` encodes the code again).
//!
//! Cranelift's x86 backend has 128-bit vectors only. A loop of `fp32x8` tiles would take
//! two `f32x4` of everything: two loads, two adds, two stores per tile. With AVX2 one
//! `ymm` instruction does the work of the pair, and the load and store ports, not the
//! arithmetic, bound the seed's loops.
//!
//! A loop qualifies ([`loops`]) when everything in it that touches a tile is a contiguous
//! unmasked load or store of `fp32` (of `fp16` converted by F16C, of half rows in scratch;
//! or a load of `bf16` that only arithmetic uses, [`BF16_LOAD_MARK`]), a splat, `+ - * /`,
//! `fma`, `sqrt` or an exact cast, of tiles of a multiple of 8 lanes (16 in 512-bit
//! loops), or a select of the lanes of `iota(t) >= splat(s)` ([`lane_select_mask`]: the
//! lanes of a row's last tile that a sum has not counted, lnc-tile's `overlap`); every
//! tile it uses is made inside it or carried by it; and its carried tiles start as
//! splats. Such a loop is
//! emitted with one Cranelift `f32x4` value per 8 lanes (a *wide part*, `Tile { per: 8 }`):
//! its low 128 bits are what Cranelift computes, its high 128 bits what module `widen`
//! makes the same instructions compute after compilation, by setting the `L` bit of their
//! VEX prefix. Loads and stores of wide parts carry trap codes of their own ([`LOAD_MARK`],
//! [`STORE_MARK`], [`STREAM_MARK`], and module `f16c`'s wide marks): only they are widened
//! to twice their memory. Lane-wise register instructions are widened inside the loop's
//! code, found by the source location every instruction of the loop carries ([`srcloc`]).
//!
//! Values enter the loop through the program's scratch area (bytes of its own for each,
//! [`staging_offset`]): an accumulator that starts as a splat, and each constant the loop
//! uses (and, in a loop with a select, each scalar computed outside it), as a broadcast of the
//! scalar stored there ([`enter_splat`], [`broadcast_constants`]). A result leaves in
//! registers: its first four lanes are the
//! wide part itself, the others are taken out of it by placeholders (`trunc`, `nearest`)
//! that module `widen` makes `vextractf128`, `vextractf32x4` and `vextractf64x4`
//! ([`leave`]).
//!
//! A tile rounded to `bf16` qualifies too when only stores use it: the store rounds it
//! with integer code and a marked placeholder that, in 512-bit loops ([`ZMM_PER`]: 16-lane
//! parts), `evex` makes a `vpmovdw` ([`BF16_STORE_MARK`]), and in 256-bit loops `widen`
//! makes a pack of the rounded lanes into another register that dies at the store (AVX2
//! has no `vpmovdw`); or, where the host has AVX512-BF16, the store stores it unrounded to a
//! placeholder that `evex` makes a `vcvtneps2bf16` ([`BF16_CVT_MARK`]); half stores may
//! stream ([`BF16_STREAM_MARK`], [`BF16_CVT_STREAM_MARK`], `f16c::WIDE_STREAM_MARK`).
//!
//! Module `widen` checks, by data flow over the whole machine code, that every value a
//! marked store writes, and every extraction reads, was computed by widened instructions
//! from marked loads and broadcasts only (and moves between registers of those). When it
//! cannot show that (a spill, an instruction it does not know), the kernel is compiled
//! again: with the loops' results stored and loaded back where they were extracted
//! (`CodegenOptions::stage_exits`), then with each loop's scalar broadcasts inside the
//! loop (`CodegenOptions::bcast_in_loop`: nothing held across the loop for them, so
//! nothing spilled), then in 256-bit loops, then without wide loops (`lib.rs`): the same
//! results, in 128-bit vectors.

use std::collections::HashSet;

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};
use lnc_lir::{self as lir, Addressing, BinOp, DType, Opcode, Ty, UnOp};

use crate::CodegenError;
use crate::base::{FunctionCx, data_flags};
use crate::memory::{self, Access};
use crate::value::{CVal, Tile};

/// The trap code marking a load of a wide part (32 or 64 bytes once widened).
pub(crate) const LOAD_MARK: u8 = 0x57;

/// The trap code marking a cached store of a wide part.
pub(crate) const STORE_MARK: u8 = 0x58;

/// The trap code marking a streaming store of a wide part (module `stream` makes it
/// non-temporal, module `widen` 32 or 64 bytes wide).
pub(crate) const STREAM_MARK: u8 = 0x59;

/// The trap code marking the load of a wide part of `bf16` lanes: `uload16x4`, which
/// Cranelift encodes as `vpmovzxwd xmm, m64` and module `widen` makes `vpmovzxwd ymm,
/// m128` (eight halves zero-extended to 32 bits); a shift by 16 then makes them `f32`.
pub(crate) const BF16_LOAD_MARK: u8 = 0x5c;

/// The trap code marking the store of a wide part of `bf16` lanes, rounded in the loop
/// (their bits in the low halves of 32-bit lanes): `vpextrq m64, xmm` to Cranelift. In
/// 512-bit loops `vpmovdw ymm16, zmm` (sixteen 32-bit lanes truncated to 16 bits) and
/// `vmovdqu16 m256, ymm16` once module `evex` has rewritten it; in 256-bit loops
/// `vextracti128 xmm, ymm, 1`, `vpackusdw xmm, xmm, xmm` (the eight lanes as 16 bits) and
/// `vmovdqu m128, xmm` through another register that dies there (module `widen`).
pub(crate) const BF16_STORE_MARK: u8 = 0x5e;

/// [`BF16_STORE_MARK`] for a streaming store: `vpmovdw ymm16, zmm` then `vmovntdq m256,
/// ymm16`; in 256 bits `vmovntdq m128, xmm` at the end.
pub(crate) const BF16_STREAM_MARK: u8 = 0x5f;

/// The trap code marking the store of a wide part of 16 `f32` lanes to round to `bf16`
/// with AVX512-BF16 (`CodegenOptions::bf16_cvt`): `vpextrq m64, xmm, 0` of the unrounded
/// lanes to Cranelift; module `evex` makes it `vcvtneps2bf16 ymm16, zmm` (with the
/// integer rounding of subnormal lanes, which it flushes, under a branch) and `vmovdqu16
/// m256, ymm16`. 512-bit loops only.
pub(crate) const BF16_CVT_MARK: u8 = 0x60;

/// [`BF16_CVT_MARK`] for a streaming store: `vmovntdq m256, ymm16` at the end.
pub(crate) const BF16_CVT_STREAM_MARK: u8 = 0x61;

/// The source locations of the instructions emitted for wide loops: this, plus the
/// loop's number.
const SRCLOC: u32 = 0x5749_0000;

/// The source location of the instructions of wide loop number `k`.
pub(crate) fn srcloc(k: u32) -> cranelift_codegen::ir::SourceLoc {
    cranelift_codegen::ir::SourceLoc::new(SRCLOC | (k & 0xffff))
}

/// The number of the wide loop whose instruction has source location `loc`.
pub(crate) fn loop_of(loc: cranelift_codegen::ir::SourceLoc) -> Option<u32> {
    (!loc.is_default() && loc.bits() & 0xffff_0000 == SRCLOC).then_some(loc.bits() & 0xffff)
}

/// Lanes of one wide part in 256-bit loops (module `widen` sets the `L` bit).
pub(crate) const YMM_PER: u8 = 8;

/// Lanes of one wide part in 512-bit loops (module `widen` re-encodes them with EVEX).
pub(crate) const ZMM_PER: u8 = 16;

/// The Cranelift type holding a wide part (its low half, as far as Cranelift knows).
pub(crate) const PART: Type = types::F32X4;

/// Whether `ty` is a tile a wide loop of parts of `per` lanes computes on: `fp32` lanes,
/// a multiple of `per`.
pub(crate) fn wide_tile(ty: Ty, per: u8) -> bool {
    matches!(ty, Ty::Tile(DType::F32, lanes) if lanes % per == 0)
}

/// Whether `ty` is a tile a wide loop moves: [`wide_tile`], or `fp16` lanes (held in
/// `f32`, converted by F16C when `f16c`), or half lanes in scratch (held in `f32` there).
fn wide_storage(ty: Ty, f16c: bool, scratch: bool, per: u8) -> bool {
    match ty {
        Ty::Tile(DType::F16, lanes) if f16c || scratch => lanes % per == 0,
        Ty::Tile(DType::BF16, lanes) if scratch => lanes % per == 0,
        _ => wide_tile(ty, per),
    }
}

/// Whether the tile `v`, loaded in a loop whose instructions use values as `uses` says,
/// is `bf16` used only by float arithmetic (`+ - * /`), through casts to `fp32` and one
/// select that passes it on to such arithmetic: then a signaling NaN needs no quieting
/// (the arithmetic quiets it), and the load widens in two instructions, `vpmovzxwd` and
/// `vpslld` (`half::only_arithmetic` is the rule for the other loads, which also follows
/// casts and selects further).
fn bf16_for_arithmetic(
    f: &lir::Function,
    uses: &std::collections::HashMap<lir::Value, Vec<lir::Inst>>,
    v: lir::Value,
    per: u8,
) -> bool {
    let only_by = |r: lir::Value, ok: &dyn Fn(&lir::InstData) -> bool| {
        uses.get(&r).is_some_and(|us| us.iter().all(|&u| ok(&f.insts[u])))
    };
    let computes = |d: &lir::InstData| {
        matches!(d.opcode, Opcode::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div))
    };
    // Or through a select that passes it on to such arithmetic (a row's last tile of sums,
    // `select(q, x, -0.0)`), which quiets a NaN as well (`half::only_arithmetic`).
    let arithmetic = |r: lir::Value| {
        only_by(r, &|d: &lir::InstData| {
            computes(d)
                || (d.opcode == Opcode::Select
                    && d.args[0] != r
                    && d.results.len() == 1
                    && only_by(d.results[0], &computes))
        })
    };
    matches!(f.ty(v), Ty::Tile(DType::BF16, lanes) if lanes % per == 0)
        && uses.get(&v).is_some_and(|us| {
            us.iter().all(|&u| {
                let d = &f.insts[u];
                d.opcode == Opcode::Cast
                    && d.results.len() == 1
                    && wide_tile(f.ty(d.results[0]), per)
                    && arithmetic(d.results[0])
            })
        })
}

/// Whether some loop of `f` is emitted with wide parts ([`loops`], stopping at the first).
pub(crate) fn any_loop(f: &lir::Function, f16c: bool, per: u8) -> bool {
    let ranges = lir::ranges::Ranges::analyze(f);
    let mut found = false;
    f.walk(|i| found = found || (f.insts[i].opcode == Opcode::For && eligible(f, &ranges, i, f16c, per)));
    found
}

/// The loops of `f` emitted with wide parts of `per` lanes; `f16c`: `fp16` tiles convert
/// with F16C; `ranges`: the intervals of `f`'s integers.
pub(crate) fn loops(
    f: &lir::Function,
    ranges: &lir::ranges::Ranges,
    f16c: bool,
    per: u8,
) -> HashSet<lir::Inst> {
    let mut out = HashSet::new();
    f.walk(|i| {
        if f.insts[i].opcode == Opcode::For && eligible(f, ranges, i, f16c, per) {
            out.insert(i);
        }
    });
    out
}

/// The definition of `v` when it is an instruction's result.
fn def_of(f: &lir::Function, v: lir::Value) -> Option<&lir::InstData> {
    match f.values[v].def {
        lir::ValueDef::Result(i, _) => Some(&f.insts[i]),
        lir::ValueDef::RegionArg(..) => None,
    }
}

/// Whether `q` (a lane mask of a loop whose instructions use values as `uses` says) is
/// `iota(t) >= splat(s)` of `i32` lanes, computed in the loop, whose lanes cannot wrap
/// (`t` plus the lanes stays an `i32`, from `ranges`), and only selects between two
/// `fp32` tiles of wide parts use it: lnc-tile's `overlap` picks so the lanes of a row's
/// last tile that a sum has not counted. [`codegen_inst`] emits the select alone, as
/// `x ^ ((x ^ z) & m)` with `m` the first `s - t` lanes set, loaded from [`LANES_BELOW`]:
/// comparisons and blends have no 512-bit form that writes a vector, and a vector of lane
/// numbers would come from Cranelift's constant pool, 16 bytes that are not widened.
fn lane_select_mask(
    f: &lir::Function,
    ranges: &lir::ranges::Ranges,
    uses: &std::collections::HashMap<lir::Value, Vec<lir::Inst>>,
    q: lir::Value,
    per: u8,
) -> bool {
    let Some(cmp) = def_of(f, q) else { return false };
    let Ty::Tile(DType::I1, lanes) = f.ty(q) else { return false };
    if cmp.opcode != Opcode::Cmp(lir::CmpOp::Ge) || lanes % per != 0 || lanes > 64 {
        return false;
    }
    let (Some(iota), Some(splat)) = (def_of(f, cmp.args[0]), def_of(f, cmp.args[1])) else { return false };
    let i32t = Ty::Scalar(DType::I32);
    let only = |v: lir::Value, k: usize| {
        uses.get(&v)
            .is_some_and(|us| us.iter().all(|&u| f.insts[u].args.iter().position(|&a| a == v) == Some(k)))
    };
    iota.opcode == Opcode::Iota
        && f.ty(iota.args[0]) == i32t
        && ranges.of(f, iota.args[0]).1 + i128::from(lanes) - 1 <= i128::from(i32::MAX)
        && splat.opcode == Opcode::Splat
        && f.ty(splat.args[0]) == i32t
        && only(cmp.args[0], 0)
        && only(cmp.args[1], 1)
        && uses.get(&q).is_some_and(|us| {
            us.iter().all(|&u| {
                let s = &f.insts[u];
                s.opcode == Opcode::Select
                    && s.args[0] == q
                    && s.args[1..]
                        .iter()
                        .all(|&a| a != q && wide_tile(f.ty(a), per) && f.ty(a).lanes() == lanes)
            })
        })
        && [cmp.args[0], cmp.args[1]].iter().all(|v| {
            uses.get(v).is_some_and(|us| {
                us.iter().all(|&u| f.insts[u].opcode == cmp.opcode && f.insts[u].results[0] == q)
            })
        })
}

/// Masks of lanes below a count, for [`lane_select_mask`]'s selects: 64 lanes set, then 64
/// clear. The lanes from index `64 - k` on have the first `k` set.
static LANES_BELOW: [i32; 128] = {
    let mut t = [0; 128];
    let mut i = 0;
    while i < 64 {
        t[i] = -1;
        i += 1;
    }
    t
};

fn eligible(f: &lir::Function, ranges: &lir::ranges::Ranges, l: lir::Inst, f16c: bool, per: u8) -> bool {
    let data = &f.insts[l];
    let [region] = &data.regions[..] else { return false };
    if !data.results.iter().all(|&r| !f.ty(r).is_tile() || wide_tile(f.ty(r), per)) {
        return false;
    }
    // A carried tile enters as a broadcast when it starts as the splat of a scalar (an
    // accumulator's identity). Any other starts through a 32-byte load of two 16-byte
    // stores, which waits for them to reach the cache: the remainder loop after an
    // unrolled reduction, one step or none, lost more that way than 256 bits gain it
    // (seed forward at N = 1000, one thread, warm: 21 % slower).
    let splat = |v: lir::Value| match f.values[v].def {
        lir::ValueDef::Result(i, _) => f.insts[i].opcode == Opcode::Splat,
        lir::ValueDef::RegionArg(..) => false,
    };
    if data.args[3..].iter().any(|&a| f.ty(a).is_tile() && !splat(a)) {
        return false;
    }
    let mut uses: std::collections::HashMap<lir::Value, Vec<lir::Inst>> = std::collections::HashMap::new();
    for &i in &region.insts {
        for &a in &f.insts[i].args {
            uses.entry(a).or_default().push(i);
        }
    }
    let mut inside: HashSet<lir::Value> = region.args.iter().copied().collect();
    let mut tiles = false;
    for &i in &region.insts {
        let d = &f.insts[i];
        if !d.regions.is_empty() {
            return false;
        }
        let touches = d.results.iter().chain(&d.args).any(|&v| f.ty(v).is_tile());
        if touches {
            tiles = true;
            let result = d.results.first().map(|&r| f.ty(r));
            let operands_ok = || {
                d.args.iter().all(|&a| match f.ty(a) {
                    Ty::Scalar(DType::F32) => true,
                    ty => wide_tile(ty, per) && Some(ty) == result,
                })
            };
            let ok = match d.opcode {
                Opcode::Yield => d.args.iter().all(|&a| !f.ty(a).is_tile() || wide_tile(f.ty(a), per)),
                Opcode::Load {
                    addr: Addressing::Contiguous,
                    has_mask: false,
                    has_other: false,
                    volatile: false,
                    ..
                } => {
                    result.is_some_and(|t| wide_storage(t, f16c, false, per))
                        || d.results.first().is_some_and(|&r| bf16_for_arithmetic(f, &uses, r, per))
                }
                Opcode::Store { addr: Addressing::Contiguous, has_mask: false, .. } => {
                    d.args.get(2).is_some_and(|&v| {
                        wide_storage(f.ty(v), f16c, false, per)
                            || matches!(f.ty(v), Ty::Tile(DType::BF16, n) if n % per == 0)
                    })
                }
                Opcode::ScratchLoad(_) => result.is_some_and(|t| wide_storage(t, f16c, true, per)),
                Opcode::ScratchStore(_) => d.args.get(1).is_some_and(|&v| wide_tile(f.ty(v), per)),
                Opcode::Cast => match (f.ty(d.args[0]), result) {
                    // Half lanes are held in `f32`: widening them is exact.
                    (Ty::Tile(DType::F16 | DType::BF16, n), Some(Ty::Tile(DType::F32, m))) => {
                        n == m && n % per == 0
                    }
                    // Rounding to `fp16` is left to the F16C stores that alone use it, and to
                    // `bf16` to the stores (`store_bf16`).
                    (a, Some(Ty::Tile(dt @ (DType::F16 | DType::BF16), m)))
                        if (dt == DType::BF16 || f16c) && wide_tile(a, per) && a.lanes() == m =>
                    {
                        let stored = |&u: &lir::Inst| {
                            let s = &f.insts[u];
                            matches!(s.opcode, Opcode::Store { .. })
                                && s.args.get(2) == Some(&d.results[0])
                                && s.args.iter().filter(|&&x| x == d.results[0]).count() == 1
                        };
                        uses.get(&d.results[0]).is_some_and(|us| us.iter().all(stored))
                    }
                    _ => false,
                },
                Opcode::Splat | Opcode::Iota if f.ty(d.args[0]) == Ty::Scalar(DType::I32) => {
                    uses.get(&d.results[0]).is_some_and(|us| {
                        us.iter().all(|&u| {
                            f.insts[u]
                                .results
                                .first()
                                .is_some_and(|&q| lane_select_mask(f, ranges, &uses, q, per))
                        })
                    })
                }
                Opcode::Splat => {
                    result.is_some_and(|t| wide_tile(t, per)) && f.ty(d.args[0]) == Ty::Scalar(DType::F32)
                }
                Opcode::Cmp(_) => lane_select_mask(f, ranges, &uses, d.results[0], per),
                Opcode::Select => {
                    lane_select_mask(f, ranges, &uses, d.args[0], per)
                        && result.is_some_and(|t| wide_tile(t, per))
                }
                Opcode::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div)
                | Opcode::Fma
                | Opcode::Unary(UnOp::Sqrt) => result.is_some_and(|t| wide_tile(t, per)) && operands_ok(),
                _ => false,
            };
            if !ok || d.args.iter().any(|&a| f.ty(a).is_tile() && !inside.contains(&a)) {
                return false;
            }
        }
        inside.extend(d.results.iter().copied());
    }
    tiles
}

/// The additions right after the wide loop `insts[n]` that sum its results pairwise,
/// each operand used by that addition alone: lnc-tile's `accum` combines the
/// accumulators of an unrolled reduction so. Emitted in wide parts at the loop's exit
/// (`base::codegen_for`), one tile leaves the loop instead of one per accumulator: with
/// 16-lane tiles, four accumulators left in sixteen `xmm` registers, and Cranelift
/// spilled inside the loop to make room for them.
pub(crate) fn exit_sums(fx: &mut FunctionCx, insts: &[lir::Inst], n: usize) -> Vec<lir::Inst> {
    let f = fx.f;
    let per = fx.wide_per;
    let mut live: HashSet<lir::Value> =
        f.insts[insts[n]].results.iter().copied().filter(|&r| wide_tile(f.ty(r), per)).collect();
    let uses = crate::half::uses_of(fx);
    let mut out = Vec::new();
    for &i in &insts[n + 1..] {
        let d = &f.insts[i];
        let single = |a: &lir::Value| live.contains(a) && uses.get(a).is_some_and(|u| u.len() == 1);
        if d.opcode != Opcode::Binary(BinOp::Add) || d.args[0] == d.args[1] || !d.args.iter().all(single) {
            break;
        }
        for a in &d.args {
            live.remove(a);
        }
        live.insert(d.results[0]);
        out.push(i);
    }
    out
}

/// Whether the streaming stores of wide loop `l` write vectors aligned to their size (32
/// or 64 bytes) from its first iteration (`lb`) on: the first one's address is, and the
/// others' offsets differ from it by multiples of that size. False when that cannot be
/// told from the loop.
pub(crate) fn streams_aligned(fx: &mut FunctionCx, l: lir::Inst, lb: Value) -> Result<Value, CodegenError> {
    let f = fx.f;
    let region = &f.insts[l].regions[0];
    let iv = region.args[0];
    // The constant each streaming store's offset adds to the index.
    let shift = |v: lir::Value| -> Option<i64> {
        if v == iv {
            return Some(0);
        }
        let lir::ValueDef::Result(i, _) = f.values[v].def else { return None };
        let d = &f.insts[i];
        let Opcode::Binary(BinOp::Add) = d.opcode else { return None };
        let c = if d.args[0] == iv {
            d.args[1]
        } else if d.args[1] == iv {
            d.args[0]
        } else {
            return None;
        };
        lnc_lir::ranges::const_int(f, c)
    };
    let mut first = None;
    let mut all = true;
    for &i in &region.insts {
        let d = &f.insts[i];
        if d.stream_flag().is_none() {
            continue;
        }
        let size = i64::from(f.ty(d.args[2]).dtype().size());
        // The bytes of one wide part, its non-temporal store's alignment.
        let bytes = size * i64::from(fx.wide_per);
        match shift(d.args[1]) {
            Some(k) if (k * size) % bytes == 0 => first = first.or(Some((d.args[0], size, bytes))),
            _ => all = false,
        }
    }
    // The loop's step must keep that alignment too.
    let step_ok = |size: i64, bytes: i64| {
        lnc_lir::ranges::const_int(f, f.insts[l].args[2]).is_some_and(|s| (s * size) % bytes == 0)
    };
    let Some((ptr, size, bytes)) = first.filter(|&(_, size, bytes)| all && step_ok(size, bytes)) else {
        return Ok(fx.bcx.ins().iconst(types::I8, 0));
    };
    let base = fx.scalar(ptr)?;
    let lb = crate::num::int_to_i64(&mut fx.bcx, f.ty(iv).dtype(), lb);
    let at = fx.bcx.ins().imul_imm_s(lb, size);
    let at = fx.bcx.ins().iadd(base, at);
    let low = fx.bcx.ins().band_imm_u(at, bytes - 1);
    Ok(fx.bcx.ins().icmp_imm_u(cranelift_codegen::ir::condcodes::IntCC::Equal, low, 0))
}

/// The Cranelift types of a carried value of type `ty` in a wide loop of parts of `per`
/// lanes.
pub(crate) fn carried_types(ty: Ty, per: u8) -> Result<Vec<Type>, CodegenError> {
    match ty {
        Ty::Tile(_, lanes) if wide_tile(ty, per) => Ok(vec![PART; (lanes / per) as usize]),
        _ => crate::value::canonical_types(ty),
    }
}

fn marked(mark: u8) -> MemFlagsData {
    crate::marks::flags(mark)
}

/// A marked load of a wide part. Loaded as `i32x4` and cast: Cranelift merges an `f32x4`
/// load used once into the arithmetic instruction using it (`vaddps xmm, xmm, m128`),
/// which would read 16 bytes where 32 are meant.
fn load_part(fx: &mut FunctionCx, at: Value, disp: i32) -> Value {
    let bits = fx.bcx.ins().load(types::I32X4, marked(LOAD_MARK), at, disp);
    fx.bcx.ins().bitcast(PART, crate::value::bitcast_flags(), bits)
}

/// A marked load of a wide part of `bf16` lanes ([`BF16_LOAD_MARK`]), widened to `f32` by
/// a shift (no quieting: [`bf16_for_arithmetic`]).
fn widen_bf16(fx: &mut FunctionCx, at: Value, disp: i32) -> Value {
    let h = fx.bcx.ins().uload16x4(marked(BF16_LOAD_MARK), at, disp);
    let bits = fx.bcx.ins().ishl_imm_u(h, 16);
    fx.bcx.ins().bitcast(PART, crate::value::bitcast_flags(), bits)
}

/// Where the program's scratch area holds the bytes (32 or 64, a wide part's) through
/// which one scalar enters a wide loop, broadcast from there: after the buffers and the
/// `fp16` rounding bytes (`base::f16c_round_offset`), [`staging_bytes`] for each such
/// transfer. A stack slot would not do: Cranelift addresses it from the stack pointer,
/// and such accesses keep no trap code.
pub(crate) fn staging_offset(f: &lir::Function) -> i64 {
    crate::base::f16c_round_offset(f) + 16
}

/// Bytes of one transfer: a wide part of `per` lanes.
pub(crate) fn staging_bytes(per: u8) -> i64 {
    4 * i64::from(per)
}

fn slot_address(fx: &mut FunctionCx) -> Value {
    let offset = staging_offset(fx.f) + staging_bytes(fx.wide_per) * i64::from(fx.wide_transfers);
    fx.wide_transfers += 1;
    crate::memory::scratch_at(fx, offset)
}

/// The wide parts of the initial value `v` of a wide loop when it is the splat of a
/// scalar (an accumulator's identity): a broadcast of the scalar stored in scratch, each
/// part from bytes of its own. Not `splat` of the scalar itself, which Cranelift folds
/// into a constant vector loaded from its constant pool when the scalar is a constant
/// (16 bytes: not widened), and merges between parts (copied by moves without VEX: not
/// wide either).
pub(crate) fn enter_splat(
    fx: &mut FunctionCx,
    ty: Ty,
    v: lir::Value,
) -> Result<Option<Vec<Value>>, CodegenError> {
    let f = fx.f;
    let lir::ValueDef::Result(i, _) = f.values[v].def else { return Ok(None) };
    if !wide_tile(ty, fx.wide_per)
        || f.insts[i].opcode != Opcode::Splat
        || f.ty(f.insts[i].args[0]) != Ty::Scalar(DType::F32)
    {
        return Ok(None);
    }
    let s = fx.scalar(f.insts[i].args[0])?;
    Ok(Some((0..ty.lanes() / fx.wide_per).map(|_| broadcast_from_scratch(fx, s)).collect()))
}

/// A wide part holding the `f32` scalar `s` in every lane: stored into bytes of scratch
/// of its own as `i32`, loaded back as `f32` (not forwarded from the store, so the load
/// stays a load, which the broadcast reads: `vbroadcastss xmm, m32`).
fn broadcast_from_scratch(fx: &mut FunctionCx, s: Value) -> Value {
    let at = store_to_scratch(fx, s);
    broadcast_at(fx, at)
}

/// The address of bytes of scratch of their own holding the `f32` scalar `s` (as `i32`).
fn store_to_scratch(fx: &mut FunctionCx, s: Value) -> Value {
    let at = slot_address(fx);
    let bits = fx.bcx.ins().bitcast(types::I32, crate::value::bitcast_flags(), s);
    fx.bcx.ins().store(data_flags(), bits, at, 0);
    at
}

/// A wide part broadcast from the `f32` at `at`.
fn broadcast_at(fx: &mut FunctionCx, at: Value) -> Value {
    let x = fx.bcx.ins().load(types::F32, data_flags(), at, 0);
    fx.bcx.ins().splat(PART, x)
}

/// The canonical `f32x4` parts of the wide parts `parts` a wide loop leaves with: each
/// wide part is its own lanes 0-3, and placeholders take the others out in registers:
/// - `trunc` (`vroundps xmm, xmm, 3`) stands for lanes 4-7, `vextractf128 xmm, ymm, 1`
///   or `vextractf32x4 xmm, zmm, 1`;
/// - in 512 bits, `nearest` (`vroundps xmm, xmm, 0`) for lanes 8-15, `vextractf64x4 ymm,
///   zmm, 1`, whose lanes 0-3 are lanes 8-11, and whose `trunc` is lanes 12-15.
///
/// Module `widen` finds them by their form alone, proves their sources wide and rewrites
/// them: `trunc` and `nearest` of `f32x4` are emitted nowhere else (the test
/// `no_other_f32x4_trunc_or_nearest` reads the sources), so Cranelift can neither merge a
/// placeholder with a rounding of the kernel's nor copy one somewhere it would not be
/// found. (Found by review: with `floor` and `ceil` as placeholders, recognized by a
/// source location of their own, Cranelift merged one with the kernel's `tl.floor` of the
/// same tile, and copied one without its source location into two blocks that did not
/// follow one another.)
///
/// Through memory instead (one 32- or 64-byte store, 16-byte loads of it) the loads wait
/// for the store to reach the cache: it forwarded to none of them here (Zen 5). With the
/// extractions, the seed forward took, per row in the cache (one thread, `lnc bench`), in
/// `fp16` 35 instead of 51-55 ns at N = 128 and 118-121 instead of 127 at 1024; with the
/// caches flushed (2 threads, 120 alternated launches of each), 0.95-0.97 of the time in
/// `fp16` and `bf16` at N = 768-1024. Stored by `vextractf32x4 m128, zmm, k` and loaded
/// back (each load the size and address of its store), in the cache: `fp16` 38 ns at N =
/// 128 but 102-125 at 768-1024, as through one store, and `fp32` 120-172 against 115-153.
pub(crate) fn leave(fx: &mut FunctionCx, ty: Ty, parts: &[Value]) -> Vec<Value> {
    let per = fx.wide_per;
    if !wide_tile(ty, per) {
        return parts.to_vec();
    }
    let mut out = Vec::with_capacity(parts.len() * usize::from(per / 4));
    for &w in parts {
        out.push(w);
        let at = slot_address(fx);
        if fx.stage_exits {
            fx.bcx.ins().store(marked(STORE_MARK), w, at, 0);
            fx.wide_stores += 1;
            for k in 1..i32::from(per / 4) {
                out.push(fx.bcx.ins().load(PART, data_flags(), at, 16 * k));
            }
            continue;
        }
        let mut taken = vec![fx.bcx.ins().trunc(w)];
        if per == ZMM_PER {
            let high = fx.bcx.ins().nearest(w);
            taken.extend([high, fx.bcx.ins().trunc(high)]);
        }
        // Stored here, in the block after the loop, so that Cranelift computes them here:
        // used first in two blocks that do not follow one another (the two ways of a
        // masked store), each would get a copy of its own, whose source register is no
        // longer the loop's result there, and the function would be refused.
        for (k, &t) in taken.iter().enumerate() {
            fx.bcx.ins().store(data_flags(), t, at, 16 * k as i32);
        }
        fx.wide_extracts += taken.len() as u32;
        out.extend(taken);
    }
    out
}

/// The wide parts of operand `v` of a wide loop's instruction: its own, or a scalar's
/// broadcast.
fn parts(fx: &mut FunctionCx, v: lir::Value, count: usize) -> Result<Vec<Value>, CodegenError> {
    match fx.val(v)? {
        CVal::Tile(t) if t.per == fx.wide_per => Ok(t.parts),
        CVal::Tile(_) => {
            Err(CodegenError::InvalidIr(format!("{v}: a tile of a wide loop not in wide parts")))
        }
        CVal::Scalar(s) => {
            let b = match (fx.wide_consts.get(&v), fx.wide_scalars.get(&v)) {
                (Some(&b), _) => b,
                // A load in the loop is not hoisted out of it: the broadcast reads it.
                (None, Some(&at)) => broadcast_at(fx, at),
                (None, None) => fx.bcx.ins().splat(PART, s),
            };
            Ok(vec![b; count])
        }
    }
}

/// Broadcasts, in front of wide loop `l`, the `fp32` constants its tile instructions use
/// ([`parts`] takes them): Cranelift folds the `splat` of a constant into a vector loaded
/// from its constant pool, 16 bytes that are not widened, so each goes through bytes of
/// scratch of its own instead (stored as `i32`, broadcast from memory as `f32`). With
/// `bcast_in_loop` ([`crate::CodegenOptions::bcast_in_loop`]) those and the other `f32`
/// scalars defined in front of the loop are only stored there, and [`parts`] broadcasts
/// them from memory inside the loop, where they are used. In a loop with a select (the
/// last tile of a row's sums) every `fp32` scalar an instruction outside the loop computes
/// goes so too (not the kernel's `fp32` arguments, nor a value an outer loop carries): there
/// Cranelift merged the broadcast of the seed dx kernel's mean with the same broadcast in
/// the pass's steady loop, which reached the tile through a spill and a reload without
/// VEX, and the 512-bit proof failed.
pub(crate) fn broadcast_constants(fx: &mut FunctionCx, l: lir::Inst) -> Result<(), CodegenError> {
    let f = fx.f;
    let bf16_store = f.insts[l].regions[0].insts.iter().any(|&i| {
        let d = &f.insts[i];
        matches!(d.opcode, Opcode::Store { check_only: false, .. }) && f.ty(d.args[2]).dtype() == DType::BF16
    });
    fx.bf16_consts = None;
    if bf16_store && !fx.bf16_cvt {
        let zmm = fx.wide_per == ZMM_PER;
        let mut broadcast = |c: u32| {
            let bits = fx.bcx.ins().iconst(types::I32, i64::from(c));
            let s = fx.bcx.ins().bitcast(types::F32, crate::value::bitcast_flags(), bits);
            let part = broadcast_from_scratch(fx, s);
            fx.bcx.ins().bitcast(types::I32X4, crate::value::bitcast_flags(), part)
        };
        // 512 bits pick the NaN lanes with integer code (`store_bf16`).
        let absm = zmm.then(|| broadcast(0x7FFF_FFFF));
        let [bias, one, quiet] = [0x7FFF, 1, 0x40].map(&mut broadcast);
        let masks = absm.map(|absm| (absm, broadcast(0x7F80_0000)));
        let consts = Bf16Consts { bias, one, quiet, masks };
        fx.bf16_consts = Some(consts);
    }
    let mut done = HashSet::new();
    let body = &f.insts[l].regions[0].insts;
    let selects = body.iter().any(|&i| f.insts[i].opcode == Opcode::Select);
    for &i in body {
        let d = &f.insts[i];
        if !d.results.iter().any(|&r| f.ty(r).is_tile()) {
            continue;
        }
        for &a in &d.args {
            let constant = matches!(f.values[a].def, lir::ValueDef::Result(c, _) if matches!(f.insts[c].opcode, Opcode::Const(_)));
            // With `bcast_in_loop`, every `f32` scalar defined in front of the loop; in a
            // loop with a select, every one an instruction outside it computes.
            let before = fx.bcast_in_loop && matches!(fx.val(a), Ok(CVal::Scalar(_)));
            let outside =
                selects && matches!(f.values[a].def, lir::ValueDef::Result(c, _) if !body.contains(&c));
            if f.ty(a) != Ty::Scalar(DType::F32) || !(constant || before || outside) || !done.insert(a) {
                continue;
            }
            let s = fx.scalar(a)?;
            if fx.bcast_in_loop {
                let at = store_to_scratch(fx, s);
                fx.wide_scalars.insert(a, at);
            } else {
                let b = broadcast_from_scratch(fx, s);
                fx.wide_consts.insert(a, b);
            }
        }
    }
    Ok(())
}

/// The `i32` constants [`store_bf16`] uses, broadcast in front of a wide loop with a
/// `bf16` store (a constant vector would come from Cranelift's constant pool, 16 bytes:
/// not widened): the rounding bias (0x7FFF), one, the quiet bit of the 16-bit result
/// (0x40), and in 512-bit loops, which select the NaN lanes with integer code, the
/// magnitude mask and the infinity. 256-bit loops select them with a comparison and a
/// blend (VEX forms, which write vector registers).
#[derive(Clone, Copy)]
pub(crate) struct Bf16Consts {
    bias: Value,
    one: Value,
    quiet: Value,
    masks: Option<(Value, Value)>,
}

/// Stores the `f32` lanes of wide part `v` rounded to `bf16` at `at + disp` (module
/// `evex` makes the marked store a `vpmovdw`, module `widen` a pack in 256 bits;
/// `streams`: non-temporal). The rounding of
/// `half::f32_to_bits` (`(bits + 0x7FFF + lsb) >> 16`, a NaN quieted), without its
/// comparison and select, whose EVEX forms write mask registers: the NaN lanes are
/// `(inf - |bits|) >> 31` (arithmetic), and the result `r ^ ((r ^ q) & nan)`. With
/// `bf16_cvt` the lanes are stored unrounded to a placeholder that `evex` makes one
/// conversion ([`BF16_CVT_MARK`]): in-cache, one thread, the seed forward in bf16 at N =
/// 1024 spent about a third of its time in the integer rounding.
fn store_bf16(
    fx: &mut FunctionCx,
    v: Value,
    at: Value,
    disp: i32,
    streams: bool,
) -> Result<(), CodegenError> {
    let flags = crate::value::bitcast_flags();
    if fx.bf16_cvt {
        let b = &mut fx.bcx;
        let q = b.ins().bitcast(types::I64X2, flags, v);
        let low = b.ins().extractlane(q, 0);
        let mark = if streams { BF16_CVT_STREAM_MARK } else { BF16_CVT_MARK };
        b.ins().store(marked(mark), low, at, disp);
        return Ok(());
    }
    let Bf16Consts { bias, one, quiet, masks } = fx
        .bf16_consts
        .ok_or_else(|| CodegenError::InvalidIr("a bf16 store in a wide loop without its constants".into()))?;
    let b = &mut fx.bcx;
    let u = b.ins().bitcast(types::I32X4, flags, v);
    let hi = b.ins().ushr_imm_u(u, 16);
    let lsb = b.ins().band(hi, one);
    let r = b.ins().iadd(u, bias);
    let r = b.ins().iadd(r, lsb);
    let r = b.ins().ushr_imm_u(r, 16);
    let q = b.ins().bor(hi, quiet);
    let out = match masks {
        // 256 bits: a comparison and a blend (`vcmpunordps`, `vpblendvb`) pick the
        // quieted NaN lanes, eight instructions where the form below takes thirteen. Seed
        // forward in bf16, one thread, rows in cache: with the form below the in-loop
        // rounding was 15 % slower than storing `f32` rows for the row helper, which
        // rounds so; with this one and `widen`'s pack, 2 threads, caches flushed, 0.94-0.96
        // of the helper's time at N = 768-16384.
        None => {
            let nan = b.ins().fcmp(FloatCC::Unordered, v, v);
            b.ins().bitselect(nan, q, r)
        }
        Some((absm, inf)) => {
            let a = b.ins().band(u, absm);
            let nan = b.ins().isub(inf, a);
            let nan = b.ins().sshr_imm_u(nan, 31);
            let x = b.ins().bxor(r, q);
            let x = b.ins().band(x, nan);
            b.ins().bxor(r, x)
        }
    };
    let q = b.ins().bitcast(types::I64X2, flags, out);
    let low = b.ins().extractlane(q, 0);
    let mark = if streams { BF16_STREAM_MARK } else { BF16_STORE_MARK };
    b.ins().store(marked(mark), low, at, disp);
    Ok(())
}

/// The split address of the contiguous load or store `inst` of a `ty` tile, through
/// arguments 0 (pointer) and 1 (offset), bounds-checked unless its check was hoisted.
fn contiguous_address(
    fx: &mut FunctionCx,
    inst: lir::Inst,
    site: u32,
    ty: Ty,
) -> Result<(Value, i32), CodegenError> {
    let data = &fx.f.insts[inst];
    let a = Access {
        ptr: data.args[0],
        offset: data.args[1],
        addr: Addressing::Contiguous,
        site,
        checked: !fx.prechecked.contains(&inst),
    };
    memory::checked_contiguous(fx, a, ty.lanes() as u32)
}

/// Emits `inst`, an instruction of a wide loop that touches tiles ([`eligible`]).
pub(crate) fn codegen_inst(fx: &mut FunctionCx, inst: lir::Inst) -> Result<(), CodegenError> {
    let f = fx.f;
    let data = &f.insts[inst];
    let per = fx.wide_per;
    let count = |ty: Ty| (ty.lanes() / per) as usize;
    // Bytes of one wide part in memory: `per` lanes of `f32`, or of halves.
    let (full, half) = (4 * i32::from(per), 2 * i32::from(per));
    let invalid = || CodegenError::InvalidIr(format!("{inst}: not an instruction of a wide loop"));
    let result = data.results.first().copied();
    let out = match data.opcode {
        Opcode::Load { site, .. } => {
            let ty = f.ty(result.ok_or_else(invalid)?);
            let (at, disp) = contiguous_address(fx, inst, site, ty)?;
            let mut out = Vec::with_capacity(count(ty));
            for j in 0..count(ty) as i32 {
                out.push(match ty.dtype() {
                    DType::F16 => crate::f16c::widen_wide(fx, at, disp + j * half),
                    DType::BF16 => widen_bf16(fx, at, disp + j * half),
                    _ => load_part(fx, at, disp + j * full),
                });
            }
            out
        }
        Opcode::Store { site, check_only: true, .. } => {
            contiguous_address(fx, inst, site, f.ty(data.args[2]))?;
            return Ok(());
        }
        Opcode::Store { site, stream, .. } => {
            let ty = f.ty(data.args[2]);
            let vals = parts(fx, data.args[2], count(ty))?;
            let (at, disp) = contiguous_address(fx, inst, site, ty)?;
            let streams = stream && fx.streaming;
            let mark = if streams { STREAM_MARK } else { STORE_MARK };
            for (j, &v) in vals.iter().enumerate() {
                fx.wide_stores += 1;
                if ty.dtype() == DType::BF16 {
                    store_bf16(fx, v, at, disp + j as i32 * half, streams)?;
                } else if ty.dtype() == DType::F16 && streams {
                    crate::f16c::stream_wide(fx, v, at, disp + j as i32 * half);
                } else if ty.dtype() == DType::F16 {
                    crate::f16c::narrow_wide(fx, v, at, disp + j as i32 * half);
                } else {
                    fx.bcx.ins().store(marked(mark), v, at, disp + j as i32 * full);
                }
            }
            return Ok(());
        }
        Opcode::ScratchLoad(slot) => {
            let ty = f.ty(result.ok_or_else(invalid)?);
            let ((at, disp), _) = memory::scratch_address(fx, slot, data.args[0])?;
            (0..count(ty) as i32).map(|j| load_part(fx, at, disp + j * full)).collect()
        }
        Opcode::ScratchStore(slot) => {
            let ty = f.ty(data.args[1]);
            let vals = parts(fx, data.args[1], count(ty))?;
            let ((at, disp), _) = memory::scratch_address(fx, slot, data.args[0])?;
            for (j, &v) in vals.iter().enumerate() {
                fx.wide_stores += 1;
                fx.bcx.ins().store(marked(STORE_MARK), v, at, disp + j as i32 * full);
            }
            return Ok(());
        }
        // Half lanes are held in `f32` (exact), and a rounding to `fp16` is left to the
        // stores using it ([`eligible`]).
        Opcode::Cast => parts(fx, data.args[0], count(f.ty(data.args[0])))?,
        // The lane masks of selects, which compute them ([`lane_select_mask`]).
        Opcode::Iota | Opcode::Cmp(_) => return Ok(()),
        Opcode::Splat if f.ty(data.args[0]) == Ty::Scalar(DType::I32) => return Ok(()),
        Opcode::Select => {
            let ty = f.ty(result.ok_or_else(invalid)?);
            let n = count(ty);
            let cmp = def_of(f, data.args[0]).ok_or_else(invalid)?;
            let (iota, splat) =
                (def_of(f, cmp.args[0]).ok_or_else(invalid)?, def_of(f, cmp.args[1]).ok_or_else(invalid)?);
            let (t, from) = (fx.scalar(iota.args[0])?, fx.scalar(splat.args[0])?);
            let (x, z) = (parts(fx, data.args[1], n)?, parts(fx, data.args[2], n)?);
            let b = &mut fx.bcx;
            let wide = |b: &mut cranelift_frontend::FunctionBuilder, v: Value| {
                if b.func.dfg.value_type(v) == types::I64 { v } else { b.ins().sextend(types::I64, v) }
            };
            // The lanes below `from - t` (clamped to the tile) are the ones not selected;
            // the iota's lanes do not wrap ([`lane_select_mask`]).
            let (t, from) = (wide(b, t), wide(b, from));
            let below = b.ins().isub(from, t);
            let (zero, all) =
                (b.ins().iconst(types::I64, 0), b.ins().iconst(types::I64, i64::from(ty.lanes())));
            let below = b.ins().smax(below, zero);
            let below = b.ins().smin(below, all);
            let table = b.ins().iconst(types::I64, LANES_BELOW.as_ptr() as i64 + 4 * 64);
            let back = b.ins().ishl_imm_u(below, 2);
            let at = b.ins().isub(table, back);
            let mut out = Vec::with_capacity(n);
            for j in 0..n {
                let m = load_part(fx, at, 4 * i32::from(per) * j as i32);
                let b = &mut fx.bcx;
                let d = b.ins().bxor(x[j], z[j]);
                let d = b.ins().band(d, m);
                out.push(b.ins().bxor(x[j], d));
            }
            out
        }
        Opcode::Splat => {
            let n = count(f.ty(result.ok_or_else(invalid)?));
            parts(fx, data.args[0], n)?
        }
        Opcode::Binary(op) => {
            let n = count(f.ty(result.ok_or_else(invalid)?));
            let (a, b) = (parts(fx, data.args[0], n)?, parts(fx, data.args[1], n)?);
            let mut out = Vec::with_capacity(n);
            for (&x, &y) in a.iter().zip(&b) {
                out.push(match op {
                    BinOp::Add => fx.bcx.ins().fadd(x, y),
                    BinOp::Sub => fx.bcx.ins().fsub(x, y),
                    BinOp::Mul => fx.bcx.ins().fmul(x, y),
                    BinOp::Div => fx.bcx.ins().fdiv(x, y),
                    _ => return Err(invalid()),
                });
            }
            out
        }
        Opcode::Fma => {
            let n = count(f.ty(result.ok_or_else(invalid)?));
            let (a, b, c) =
                (parts(fx, data.args[0], n)?, parts(fx, data.args[1], n)?, parts(fx, data.args[2], n)?);
            (0..n).map(|j| fx.bcx.ins().fma(a[j], b[j], c[j])).collect()
        }
        Opcode::Unary(UnOp::Sqrt) => {
            let n = count(f.ty(result.ok_or_else(invalid)?));
            let a = parts(fx, data.args[0], n)?;
            a.into_iter().map(|x| fx.bcx.ins().sqrt(x)).collect()
        }
        _ => return Err(invalid()),
    };
    let r = result.ok_or_else(invalid)?;
    fx.def(r, CVal::Tile(Tile { per, parts: out }));
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Module `widen` takes every `vroundps` rounding toward zero or to nearest for a
    /// placeholder of [`super::leave`]: no other code of this crate may emit `trunc` or
    /// `nearest` of `f32x4` (which would be merged with a placeholder of the same value, or
    /// taken for one). The one `nearest` of `vmath` rounds `f64` lanes (`vroundpd`).
    #[test]
    fn no_other_f32x4_trunc_or_nearest() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the crate's sources") {
            let path = entry.expect("a directory entry").path();
            let text = std::fs::read_to_string(&path).expect("a source file");
            // The code before the file's tests.
            for (n, line) in text.lines().enumerate().take_while(|(_, l)| !l.starts_with("#[cfg(test)]")) {
                let code = line.split("//").next().unwrap_or("");
                if code.contains(".trunc(") || code.contains(".nearest(") {
                    let name = path.file_name().and_then(|f| f.to_str()).unwrap_or("").to_string();
                    found.push((name, n + 1, code.trim().to_string()));
                }
            }
        }
        found.sort();
        let names: Vec<(&str, &str)> = found.iter().map(|(f, _, c)| (f.as_str(), c.as_str())).collect();
        assert_eq!(
            names,
            [
                ("vmath.rs", "let n = bcx.ins().nearest(t);"),
                ("wide.rs", "let mut taken = vec![fx.bcx.ins().trunc(w)];"),
                ("wide.rs", "let high = fx.bcx.ins().nearest(w);"),
                ("wide.rs", "taken.extend([high, fx.bcx.ins().trunc(high)]);"),
            ],
            "a new `trunc` or `nearest`: if it can round `f32x4` lanes, module `widen` would take it \
             for a placeholder of `leave` ({found:?})"
        );
    }
}
