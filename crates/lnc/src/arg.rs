//! Kernel arguments as the host passes them: borrowed buffers and scalars.

use std::marker::PhantomData;

use lnc_bir::DType;

/// A Rust type that can be the element of a buffer passed to a kernel.
///
/// # Safety
/// `DTYPE` must describe the type's in-memory representation exactly (size and bit layout).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The kernel-language dtype with the same representation.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        // SAFETY: each pair has the same size and bit layout.
        unsafe impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

element!(
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f32 => F32, f64 => F64, bool => I1,
    half::f16 => F16, half::bf16 => BF16,
);

/// A buffer borrowed for the duration of a launch.
#[derive(Debug)]
pub struct BufferArg<'a> {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    pub(crate) offset: usize,
    pub(crate) dtype: DType,
    pub(crate) writable: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> BufferArg<'a> {
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements in the whole buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pointer the kernel receives points `offset` elements into the buffer (like
    /// `X + offset` in Triton); accesses before it, down to the buffer's start, stay in
    /// bounds.
    pub fn at(mut self, offset: usize) -> BufferArg<'a> {
        self.offset = offset;
        self
    }

    /// A writable buffer from raw parts.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `len` elements of `dtype` for `'a`, and
    /// not accessed by anything else while a launch uses it.
    pub unsafe fn from_raw(base: *mut u8, len: usize, dtype: DType) -> BufferArg<'a> {
        BufferArg { base, len, offset: 0, dtype, writable: true, _borrow: PhantomData }
    }
}

/// A scalar argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `i1`.
    Bool(bool),
    /// Any integer, with the dtype it was given as.
    Int(i64, DType),
    /// `fp32`.
    F32(f32),
    /// `fp64`.
    F64(f64),
}

impl std::fmt::Display for Scalar {
    /// The value and its type, as an error message shows them (`3000000000 (i64)`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Scalar::Bool(b) => write!(f, "{} (i1)", if b { "True" } else { "False" }),
            Scalar::Int(v, DType::U64) => write!(f, "{} (u64)", v as u64),
            Scalar::Int(v, d) => write!(f, "{v} ({d})"),
            Scalar::F32(v) => write!(f, "{v} (fp32)"),
            Scalar::F64(v) => write!(f, "{v} (fp64)"),
        }
    }
}

/// One argument of a launch: a buffer for a pointer parameter, a scalar otherwise.
#[derive(Debug)]
pub enum Arg<'a> {
    /// A buffer (pointer parameter).
    Buffer(BufferArg<'a>),
    /// A scalar.
    Scalar(Scalar),
}

impl<'a> Arg<'a> {
    /// A read-only buffer whose kernel pointer points `offset` elements in.
    pub fn at<T: Element>(slice: &'a [T], offset: usize) -> Arg<'a> {
        Arg::Buffer(BufferArg::from(slice).at(offset))
    }

    /// A writable buffer whose kernel pointer points `offset` elements in.
    pub fn at_mut<T: Element>(slice: &'a mut [T], offset: usize) -> Arg<'a> {
        Arg::Buffer(BufferArg::from(slice).at(offset))
    }
}

impl<'a, T: Element> From<&'a [T]> for BufferArg<'a> {
    fn from(s: &'a [T]) -> BufferArg<'a> {
        BufferArg {
            base: s.as_ptr() as *mut u8,
            len: s.len(),
            offset: 0,
            dtype: T::DTYPE,
            writable: false,
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: Element> From<&'a mut [T]> for BufferArg<'a> {
    fn from(s: &'a mut [T]) -> BufferArg<'a> {
        BufferArg {
            base: s.as_mut_ptr() as *mut u8,
            len: s.len(),
            offset: 0,
            dtype: T::DTYPE,
            writable: true,
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: Element> From<&'a [T]> for Arg<'a> {
    fn from(s: &'a [T]) -> Arg<'a> {
        Arg::Buffer(s.into())
    }
}

impl<'a, T: Element> From<&'a mut [T]> for Arg<'a> {
    fn from(s: &'a mut [T]) -> Arg<'a> {
        Arg::Buffer(s.into())
    }
}

impl<'a, T: Element> From<&'a Vec<T>> for Arg<'a> {
    fn from(s: &'a Vec<T>) -> Arg<'a> {
        Arg::Buffer(s.as_slice().into())
    }
}

impl<'a, T: Element> From<&'a mut Vec<T>> for Arg<'a> {
    fn from(s: &'a mut Vec<T>) -> Arg<'a> {
        Arg::Buffer(s.as_mut_slice().into())
    }
}

impl<'a> From<BufferArg<'a>> for Arg<'a> {
    fn from(b: BufferArg<'a>) -> Arg<'a> {
        Arg::Buffer(b)
    }
}

macro_rules! int_scalar {
    ($($t:ty => $d:ident),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::Scalar(Scalar::Int(v as i64, DType::$d))
            }
        }
    )*};
}
int_scalar!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32);

impl From<u64> for Arg<'_> {
    fn from(v: u64) -> Self {
        // Stored as the same 64 bits; the dtype says to read them unsigned.
        Arg::Scalar(Scalar::Int(v as i64, DType::U64))
    }
}

impl From<f32> for Arg<'_> {
    fn from(v: f32) -> Self {
        Arg::Scalar(Scalar::F32(v))
    }
}

impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Scalar(Scalar::F64(v))
    }
}

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Scalar(Scalar::Bool(v))
    }
}

/// Builds an array of [`Arg`]s from buffers and scalars: `args![&x, &mut y, n, 1e-5f32]`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$($crate::Arg::from($a)),*]
    };
}
