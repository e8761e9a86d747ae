//! Element types, value types and shapes of the block IR.

use std::fmt;

/// A scalar element type (Triton's `tl.dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `int1`, a boolean.
    I1,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float16`.
    F16,
    /// `bfloat16`.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 13] = [
        DType::I1,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Storage size in bytes (`int1` is stored as one byte).
    pub fn size(self) -> u32 {
        match self {
            DType::I1 | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// Width in bits of the value (1 for `int1`).
    pub fn bits(self) -> u32 {
        if self == DType::I1 { 1 } else { self.size() * 8 }
    }

    /// True for the float types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the integer types, `int1` included.
    pub fn is_int(self) -> bool {
        !self.is_float()
    }

    /// True for signed integers (`int1` counts as unsigned, as in Triton).
    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// True for `int1`.
    pub fn is_bool(self) -> bool {
        self == DType::I1
    }

    /// The name used in signatures (`fp32`, `i32`, `u8`, `i1`, `bf16`).
    pub fn sig_name(self) -> &'static str {
        match self {
            DType::I1 => "i1",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "fp16",
            DType::BF16 => "bf16",
            DType::F32 => "fp32",
            DType::F64 => "fp64",
        }
    }

    /// Parses a signature name (`fp32`, `i32`, also `f32`, `int32`, `float32`).
    pub fn from_sig_name(s: &str) -> Option<DType> {
        Some(match s {
            "i1" | "int1" | "bool" => DType::I1,
            "i8" | "int8" => DType::I8,
            "i16" | "int16" => DType::I16,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "u8" | "uint8" => DType::U8,
            "u16" | "uint16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "u64" | "uint64" => DType::U64,
            "fp16" | "f16" | "float16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "fp32" | "f32" | "float32" => DType::F32,
            "fp64" | "f64" | "float64" => DType::F64,
            _ => return None,
        })
    }

    /// The Triton name (`float32`, `int32`, …), as `tl.<name>` spells it.
    pub fn tl_name(self) -> &'static str {
        match self {
            DType::I1 => "int1",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sig_name())
    }
}

/// What one element of a value is: a number or a pointer to numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// A number of this dtype.
    Scalar(DType),
    /// A pointer to elements of this dtype (8 bytes, arithmetic in elements).
    Ptr(DType),
}

impl Elem {
    /// The dtype of a number, or the pointee of a pointer.
    pub fn dtype(self) -> DType {
        match self {
            Elem::Scalar(d) | Elem::Ptr(d) => d,
        }
    }

    /// True for pointers.
    pub fn is_ptr(self) -> bool {
        matches!(self, Elem::Ptr(_))
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Scalar(d) => write!(f, "{d}"),
            Elem::Ptr(d) => write!(f, "*{d}"),
        }
    }
}

/// Maximum rank of a block.
pub const MAX_RANK: usize = 4;

/// The constant shape of a block; rank 0 is a scalar.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    rank: u8,
    dims: [u32; MAX_RANK],
}

impl Shape {
    /// The shape of a scalar.
    pub const SCALAR: Shape = Shape { rank: 0, dims: [0; MAX_RANK] };

    /// A shape from its dimensions; `None` when the rank is above [`MAX_RANK`].
    pub fn new(dims: &[u32]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut s = Shape { rank: dims.len() as u8, dims: [0; MAX_RANK] };
        s.dims[..dims.len()].copy_from_slice(dims);
        Some(s)
    }

    /// A rank-1 shape.
    pub fn d1(n: u32) -> Shape {
        Shape { rank: 1, dims: [n, 0, 0, 0] }
    }

    /// A rank-2 shape.
    pub fn d2(m: u32, n: u32) -> Shape {
        Shape { rank: 2, dims: [m, n, 0, 0] }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u32] {
        &self.dims[..self.rank as usize]
    }

    /// The rank (0 for scalars).
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// True for rank 0.
    pub fn is_scalar(&self) -> bool {
        self.rank == 0
    }

    /// Number of elements (1 for scalars).
    pub fn numel(&self) -> u64 {
        self.dims().iter().map(|&d| d as u64).product()
    }

    /// The shape with `axis` removed.
    pub fn remove_axis(&self, axis: usize) -> Shape {
        let mut d: Vec<u32> = self.dims().to_vec();
        d.remove(axis);
        Shape::new(&d).expect("rank decreased")
    }

    /// The shape with a 1 inserted at `axis`; `None` past [`MAX_RANK`].
    pub fn insert_axis(&self, axis: usize) -> Option<Shape> {
        let mut d: Vec<u32> = self.dims().to_vec();
        if axis > d.len() {
            return None;
        }
        d.insert(axis, 1);
        Shape::new(&d)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str("x")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// The type of an SSA value: an element type and a shape (scalar when rank 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    /// Element type.
    pub elem: Elem,
    /// Shape; [`Shape::SCALAR`] for scalars and scalar pointers.
    pub shape: Shape,
}

impl Type {
    /// A scalar number.
    pub fn scalar(d: DType) -> Type {
        Type { elem: Elem::Scalar(d), shape: Shape::SCALAR }
    }

    /// A scalar pointer.
    pub fn ptr(d: DType) -> Type {
        Type { elem: Elem::Ptr(d), shape: Shape::SCALAR }
    }

    /// A block of `elem` with `shape`.
    pub fn block(elem: Elem, shape: Shape) -> Type {
        Type { elem, shape }
    }

    /// The same element type with another shape.
    pub fn with_shape(self, shape: Shape) -> Type {
        Type { elem: self.elem, shape }
    }

    /// The same shape with another element type.
    pub fn with_elem(self, elem: Elem) -> Type {
        Type { elem, shape: self.shape }
    }

    /// True when the shape has rank > 0.
    pub fn is_block(&self) -> bool {
        !self.shape.is_scalar()
    }

    /// The number dtype, or `None` for pointers.
    pub fn num_dtype(&self) -> Option<DType> {
        match self.elem {
            Elem::Scalar(d) => Some(d),
            Elem::Ptr(_) => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shape.is_scalar() {
            write!(f, "{}", self.elem)
        } else {
            write!(f, "<{}x{}>", self.shape, self.elem)
        }
    }
}

impl DType {
    /// `v` wrapped to this integer dtype's width and sign- or zero-extended back to 64 bits
    /// (the canonical form of integer constants and interpreter values; `u64` keeps its bit
    /// pattern, `int1` becomes 0 or 1). Floats return `v` unchanged.
    pub fn wrap_int(self, v: i64) -> i64 {
        match self {
            DType::I1 => v & 1,
            DType::I8 => v as i8 as i64,
            DType::I16 => v as i16 as i64,
            DType::I32 => v as i32 as i64,
            DType::U8 => v as u8 as i64,
            DType::U16 => v as u16 as i64,
            DType::U32 => v as u32 as i64,
            DType::I64 | DType::U64 | DType::F16 | DType::BF16 | DType::F32 | DType::F64 => v,
        }
    }

    /// `x` rounded to the nearest value of this float dtype (ties to even, overflowing to
    /// infinity), as `f64`; NaN and infinities pass through. Integers return `x` unchanged.
    ///
    /// One rounding from the exact `f64`: the `half` crate's `from_f64` truncates the low
    /// bits of the `f64` first (or converts through `f32` with F16C), which rounds twice
    /// for some inputs.
    pub fn round_float(self, x: f64) -> f64 {
        let (mantissa_bits, min_exp, max_finite) = match self {
            DType::F32 => return x as f32 as f64,
            DType::F16 => (11, -14, 65504.0),
            DType::BF16 => (8, -126, f64::from_bits(0x47EF_E000_0000_0000)),
            _ => return x,
        };
        if !x.is_finite() || x == 0.0 {
            return x;
        }
        // Far outside both formats' ranges: the result is a signed zero or infinity, and
        // staying away from f64's own subnormals keeps the exponent arithmetic below exact.
        if x.abs() < pow2(-200) {
            return 0.0f64.copysign(x);
        }
        if x.abs() > pow2(200) {
            return f64::INFINITY.copysign(x);
        }
        let exp = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        // Subnormals of the dtype share the quantum of its smallest normal binade.
        let quantum = exp.max(min_exp) - (mantissa_bits - 1);
        let r = (x * pow2(-quantum)).round_ties_even() * pow2(quantum);
        if r.abs() > max_finite { f64::INFINITY.copysign(x) } else { r }
    }
}

/// `2^n` for `n` in f64's normal exponent range.
fn pow2(n: i32) -> f64 {
    f64::from_bits(((n + 1023) as u64) << 52)
}
