//! How loop-IR values live in Cranelift values.
//!
//! A scalar is one Cranelift value: `i1` is an `i8` holding 0 or 1 (what `icmp` yields),
//! a pointer is an `i64` address, an `fp16`/`bf16` is an `f32` holding a value of the
//! dtype (converted at loads and stores, see `half.rs`). A tile of `L` lanes is a list of
//! *parts*, each holding `per` consecutive lanes: `per > 1` parts are 128-bit vectors
//! (`f32x4`, `i64x2`, `i8x16`…), `per == 1` parts are scalars. One part of `L` lanes is
//! the common case (an `f32x4` tile), several vector parts carry wider tiles (`f32x16` is
//! four `f32x4`), and scalar parts carry tiles that do not fill a vector (two `fp32`
//! lanes) or that an operation has no vector form for.
//!
//! An `i1` tile (a mask) in vector form has all-ones or all-zero lanes of the width
//! `128 / per`, the form vector comparisons produce (`fcmp` on `f32x4` gives an `i32x4`);
//! in scalar form each lane is an `i8` 0 or 1. Operations take any form and convert what
//! they need; block parameters use the *canonical* form of the type ([`canonical_per`]).

use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use lnc_lir::{DType, Ty};

use crate::CodegenError;

/// A loop-IR value in Cranelift values.
#[derive(Clone, Debug)]
pub(crate) enum CVal {
    /// A scalar or a pointer.
    Scalar(Value),
    /// A tile.
    Tile(Tile),
}

/// A tile: `parts.len() * per` lanes.
#[derive(Clone, Debug)]
pub(crate) struct Tile {
    /// Lanes per part; 1 for scalar parts.
    pub(crate) per: u8,
    /// The parts, lowest lanes first.
    pub(crate) parts: Vec<Value>,
}

impl CVal {
    /// The scalar value; a compiler bug for tiles (the lir verifier rules them out).
    pub(crate) fn scalar(&self) -> Result<Value, CodegenError> {
        match self {
            CVal::Scalar(v) => Ok(*v),
            CVal::Tile(_) => Err(CodegenError::InvalidIr("a tile where a scalar is expected".into())),
        }
    }
}

/// The Cranelift type of one scalar of `d`.
pub(crate) fn scalar_type(d: DType) -> Result<Type, CodegenError> {
    Ok(match d {
        DType::I1 | DType::I8 | DType::U8 => types::I8,
        DType::I16 | DType::U16 => types::I16,
        DType::I32 | DType::U32 => types::I32,
        DType::I64 | DType::U64 => types::I64,
        // Computed in f32: see `half.rs`.
        DType::F32 | DType::F16 | DType::BF16 => types::F32,
        DType::F64 => types::F64,
    })
}

/// The Cranelift type of a scalar or pointer loop-IR type.
pub(crate) fn value_type(ty: Ty) -> Result<Type, CodegenError> {
    match ty {
        Ty::Scalar(d) => scalar_type(d),
        Ty::Ptr(_) => Ok(types::I64),
        Ty::Tile(..) => Err(CodegenError::InvalidIr(format!("tile type {ty} where a scalar is expected"))),
    }
}

/// The Cranelift type of one part of an `d` tile with `per` lanes per part.
pub(crate) fn part_type(d: DType, per: u8) -> Result<Type, CodegenError> {
    if per == 1 {
        return scalar_type(d);
    }
    let lane =
        if d == DType::I1 { Type::int(128 / per as u16).expect("mask lane width") } else { scalar_type(d)? };
    Ok(lane.by(per as u32).expect("128-bit vector"))
}

/// Lanes per part a `d` tile uses natively: a full 128-bit vector (`f32x4` for the half
/// dtypes, which compute in `f32`).
pub(crate) fn vector_per(d: DType) -> u8 {
    if d == DType::I1 || crate::half::is_half(d) { 4 } else { (128 / d.bits()) as u8 }
}

/// The canonical lanes per part of a tile type: vectors when the lanes fill at least one.
pub(crate) fn canonical_per(d: DType, lanes: u8) -> Result<u8, CodegenError> {
    scalar_type(d)?;
    Ok(match d {
        DType::I1 if lanes >= 4 => 4,
        DType::I1 if lanes == 2 => 2,
        DType::I1 => 1,
        _ if lanes >= vector_per(d) => vector_per(d),
        _ => 1,
    })
}

/// The Cranelift types of the canonical form of `ty`, flattened.
pub(crate) fn canonical_types(ty: Ty) -> Result<Vec<Type>, CodegenError> {
    match ty {
        Ty::Tile(d, lanes) => {
            let per = canonical_per(d, lanes)?;
            Ok(vec![part_type(d, per)?; (lanes / per) as usize])
        }
        _ => Ok(vec![value_type(ty)?]),
    }
}

/// Rebuilds a value of type `ty` from flat Cranelift values in canonical form.
pub(crate) fn from_flat(ty: Ty, flat: &[Value]) -> Result<CVal, CodegenError> {
    Ok(match ty {
        Ty::Tile(d, lanes) => CVal::Tile(Tile { per: canonical_per(d, lanes)?, parts: flat.to_vec() }),
        _ => CVal::Scalar(flat[0]),
    })
}

/// Flags of vector bitcasts: Cranelift wants the lane order spelled out.
pub(crate) fn bitcast_flags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}

/// The lanes of a tile as scalars (`i8` 0/1 for masks).
pub(crate) fn lanes(bcx: &mut FunctionBuilder, d: DType, t: &Tile) -> Vec<Value> {
    if t.per == 1 {
        return t.parts.clone();
    }
    let mut out = Vec::with_capacity(t.parts.len() * t.per as usize);
    for &p in &t.parts {
        for k in 0..t.per {
            let lane = bcx.ins().extractlane(p, k);
            out.push(if d == DType::I1 {
                bcx.ins().icmp_imm_u(cranelift_codegen::ir::condcodes::IntCC::NotEqual, lane, 0)
            } else {
                lane
            });
        }
    }
    out
}

/// Builds a tile of `per` lanes per part from scalar lanes.
pub(crate) fn from_lanes(
    bcx: &mut FunctionBuilder,
    d: DType,
    per: u8,
    lanes: &[Value],
) -> Result<Tile, CodegenError> {
    if per == 1 {
        return Ok(Tile { per, parts: lanes.to_vec() });
    }
    let ty = part_type(d, per)?;
    let mut parts = Vec::with_capacity(lanes.len() / per as usize);
    for chunk in lanes.chunks(per as usize) {
        let scalars: Vec<Value> = if d == DType::I1 {
            chunk.iter().map(|&l| bcx.ins().bmask(ty.lane_type(), l)).collect()
        } else {
            chunk.to_vec()
        };
        let mut v = bcx.ins().splat(ty, scalars[0]);
        for (k, &s) in scalars.iter().enumerate().skip(1) {
            v = bcx.ins().insertlane(v, s, k as u8);
        }
        parts.push(v);
    }
    Ok(Tile { per, parts })
}

/// The tile with `per` lanes per part.
pub(crate) fn rechunk(bcx: &mut FunctionBuilder, d: DType, t: &Tile, per: u8) -> Result<Tile, CodegenError> {
    if t.per == per {
        return Ok(t.clone());
    }
    let l = lanes(bcx, d, t);
    from_lanes(bcx, d, per, &l)
}

/// `v` in the canonical form of `ty`, flattened (for block arguments).
pub(crate) fn to_canonical(bcx: &mut FunctionBuilder, ty: Ty, v: &CVal) -> Result<Vec<Value>, CodegenError> {
    match (ty, v) {
        (Ty::Tile(d, lanes), CVal::Tile(t)) => Ok(rechunk(bcx, d, t, canonical_per(d, lanes)?)?.parts),
        (Ty::Tile(..), CVal::Scalar(_)) | (_, CVal::Tile(_)) => {
            Err(CodegenError::InvalidIr(format!("a value does not match its type {ty}")))
        }
        (_, CVal::Scalar(s)) => Ok(vec![*s]),
    }
}

/// A tile with every lane equal to the scalar `s`, `per` lanes per part.
pub(crate) fn splat(
    bcx: &mut FunctionBuilder,
    d: DType,
    lanes: u8,
    per: u8,
    s: Value,
) -> Result<Tile, CodegenError> {
    let n = (lanes / per) as usize;
    if per == 1 {
        return Ok(Tile { per, parts: vec![s; n] });
    }
    let ty = part_type(d, per)?;
    let lane = if d == DType::I1 { bcx.ins().bmask(ty.lane_type(), s) } else { s };
    let v = bcx.ins().splat(ty, lane);
    Ok(Tile { per, parts: vec![v; n] })
}
