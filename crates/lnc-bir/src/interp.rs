//! Reference interpreter: the semantic definition of the block IR.
//!
//! The JIT is tested against this module, so it favours being obviously right over being
//! fast. A function is verified before it runs; after that, nothing a program does can make
//! the interpreter panic: every trap (out-of-bounds access, integer division by zero, failed
//! assertion, zero `for` step, step limit) is an [`InterpError`] naming the instruction, its
//! span and the program id.
//!
//! ## Values
//! A value is a flat row-major array of elements (one element for a scalar). Integers are
//! held as `i64` wrapped to their dtype and sign- or zero-extended by its signedness
//! ([`DType::wrap_int`]; `u64` keeps its bit pattern). Floats are held as `f64` but computed
//! in their own precision: `fp64` in `f64`, `fp32` in `f32`, `fp16`/`bf16` in `f32` rounded to
//! the dtype after every operation. Pointers are (buffer index, offset in elements).
//!
//! ## Semantics the IR documentation leaves open, fixed here
//! - `idiv`/`rem` on integers truncate toward zero / take the dividend's sign (C); a zero
//!   divisor is an error; `MIN / -1` wraps to `MIN` and `MIN % -1` is 0. On floats `idiv` is
//!   `floor(a / b)` and `rem` is `fmod`.
//! - Shifts read the amount as an unsigned number of the operand's width. An amount at least
//!   the width gives 0 for `shl` and unsigned `shr`, and the sign fill (0 or -1) for signed
//!   `shr` — the result of shifting one bit at a time, not x86's masked amount.
//! - `min`/`max` on floats propagate NaN and order `-0.0` below `+0.0` (IEEE 754-2019
//!   `minimum`/`maximum`). Comparisons on unsigned dtypes (and `int1`) are unsigned.
//! - `cast`: float → int truncates toward zero and saturates, NaN → 0; any number → `int1`
//!   is `x != 0` (Triton's rule, so NaN → 1); int → float rounds to nearest even, in one
//!   rounding; int → int truncates or extends by the source's signedness; float → float
//!   rounds to nearest even.
//! - `reduce` combines the elements of each lane along the axis as a balanced binary tree
//!   (pairwise: the first half, the second half, then the two), each step rounded to the
//!   dtype — the order a vectorized reduction can reproduce, and more accurate than a
//!   sequential sum.
//! - Masked-off lanes of a load take `other` (0 when absent) and are never read; masked-off
//!   lanes of a store or atomic are never accessed; an atomic's masked-off results are 0.
//!   Atomics run one element at a time in row-major order, each reading the old value,
//!   writing the new one and returning the old; `atomic_cas` compares bit patterns.
//! - Every access is checked against the bounds of the buffer its pointer was derived from.
//! - `for` runs like Python's `range(lb, ub, step)` (negative steps included); the bounds and
//!   step are evaluated once. `while` follows MLIR's `scf.while`: the results are the values
//!   forwarded by `condition` when its flag is false.
//! - `print` appends lines `pid (x, y, z) idx (i, j) <prefix><value>` to
//!   [`Interpreter::log`], one per element of each operand (scalars print `idx ()`); the
//!   free functions [`run_grid`] and [`run_program`] write those lines to stderr.
//! - `assert` fails on its first false lane in row-major order.
//! - The programs of a grid run one after another, `x` fastest, then `y`, then `z`.

use std::fmt;
use std::rc::Rc;

use half::{bf16, f16};
use lnc_diag::Span;
use thiserror::Error;

use crate::ir::*;
use crate::print::print_inst_line;
use crate::types::*;
use crate::verify::{VerifierErrors, verify};

/// The largest block the interpreter materializes: beyond it a run fails instead of
/// exhausting memory (real kernels' blocks are far smaller).
pub const MAX_ELEMENTS: usize = 1 << 24;

/// A memory buffer: elements of one dtype, little-endian (`int1` as one byte 0 or 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Element type.
    pub dtype: DType,
    /// The bytes, `len * dtype.size()` of them.
    pub data: Vec<u8>,
}

macro_rules! buffer_conversions {
    ($($from:ident, $to:ident, $t:ty, $d:expr;)*) => {
        impl Buffer {
            $(
                #[doc = concat!("A buffer of `", stringify!($t), "` elements.")]
                pub fn $from(values: &[$t]) -> Buffer {
                    Buffer { dtype: $d, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
                }

                #[doc = concat!("The elements as `", stringify!($t), "` (the bytes reinterpreted, whatever the dtype).")]
                pub fn $to(&self) -> Vec<$t> {
                    self.data
                        .chunks_exact(std::mem::size_of::<$t>())
                        .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")))
                        .collect()
                }
            )*
        }
    };
}

buffer_conversions! {
    from_f32, to_f32, f32, DType::F32;
    from_f64, to_f64, f64, DType::F64;
    from_i8, to_i8, i8, DType::I8;
    from_i16, to_i16, i16, DType::I16;
    from_i32, to_i32, i32, DType::I32;
    from_i64, to_i64, i64, DType::I64;
    from_u8, to_u8, u8, DType::U8;
    from_u16, to_u16, u16, DType::U16;
    from_u32, to_u32, u32, DType::U32;
    from_u64, to_u64, u64, DType::U64;
}

impl Buffer {
    /// `len` zero elements of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> Buffer {
        Buffer { dtype, data: vec![0; len * dtype.size() as usize] }
    }

    /// A buffer of `dtype` holding `values` converted like a `cast` from `fp64` (integers
    /// truncate toward zero and saturate, floats round to nearest).
    pub fn from_f64_values(dtype: DType, values: &[f64]) -> Buffer {
        let mut b = Buffer::zeros(dtype, values.len());
        for (k, &x) in values.iter().enumerate() {
            b.write_elem(k, cast(DType::F64, dtype, S::F(x)));
        }
        b
    }

    /// The elements converted to `f64` (exactly, except 64-bit integers beyond 2^53).
    pub fn to_f64_values(&self) -> Vec<f64> {
        (0..self.len())
            .map(|k| match self.read_elem(k) {
                S::F(x) => x,
                S::I(v) if self.dtype.is_signed() => v as f64,
                S::I(v) => v as u64 as f64,
                S::P(..) => f64::NAN,
            })
            .collect()
    }

    /// A buffer of `fp16` elements.
    pub fn from_f16(values: &[f16]) -> Buffer {
        Buffer { dtype: DType::F16, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// A buffer of `bf16` elements.
    pub fn from_bf16(values: &[bf16]) -> Buffer {
        Buffer { dtype: DType::BF16, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// A buffer of `int1` elements.
    pub fn from_bool(values: &[bool]) -> Buffer {
        Buffer { dtype: DType::I1, data: values.iter().map(|&b| b as u8).collect() }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size() as usize
    }

    /// True when the buffer has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read_elem(&self, k: usize) -> S {
        let size = self.dtype.size() as usize;
        let mut bytes = [0u8; 8];
        bytes[..size].copy_from_slice(&self.data[k * size..(k + 1) * size]);
        let bits = u64::from_le_bytes(bytes);
        if self.dtype == DType::I1 { S::I((bits != 0) as i64) } else { from_bits(self.dtype, bits) }
    }

    fn write_elem(&mut self, k: usize, s: S) {
        let size = self.dtype.size() as usize;
        let bits = to_bits(self.dtype, s);
        self.data[k * size..(k + 1) * size].copy_from_slice(&bits.to_le_bytes()[..size]);
    }
}

/// A runtime argument, as the launcher passes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    /// A pointer into `buffers[buffer]`, `offset` elements from its start.
    Ptr {
        /// Index into the buffers given to the run.
        buffer: usize,
        /// Offset in elements (may be out of bounds; only accesses are checked).
        offset: i64,
    },
    /// An integer scalar (wrapped to the parameter's dtype).
    Int(i64),
    /// A float scalar (rounded to the parameter's dtype).
    Float(f64),
}

/// Where a trap happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The instruction.
    pub inst: Inst,
    /// Its source span.
    pub span: Span,
    /// The program id.
    pub pid: [u32; 3],
    /// The instruction's text, as printed.
    pub text: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.pid;
        write!(f, "`{}` in program ({x}, {y}, {z})", self.text)
    }
}

/// A read or a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load (or the read of an atomic).
    Read,
    /// A store (or the write of an atomic).
    Write,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// Why a run stopped.
#[derive(Clone, Debug, Error)]
pub enum InterpError {
    /// The function does not verify.
    #[error("the function does not verify:\n{0}")]
    Invalid(#[from] VerifierErrors),
    /// An argument is missing or does not match its parameter.
    #[error("argument for slot {slot} (`{name}`): {message}")]
    BadArgument {
        /// The parameter's slot.
        slot: u32,
        /// The parameter's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An access outside the buffer a pointer points into.
    #[error("out-of-bounds {access} at offset {offset} of buffer {buffer} ({len} elements) by {site}")]
    OutOfBounds {
        /// Where.
        site: Site,
        /// The buffer.
        buffer: usize,
        /// The offending offset, in elements.
        offset: i64,
        /// The buffer's length, in elements.
        len: usize,
        /// Read or write.
        access: Access,
    },
    /// Integer `idiv` or `rem` by zero.
    #[error("integer division by zero by {site}")]
    DivisionByZero {
        /// Where.
        site: Site,
    },
    /// A false lane of an `assert`.
    #[error("assertion failed (lane {lane}) at {site}")]
    AssertionFailed {
        /// Where.
        site: Site,
        /// The first false lane, row-major.
        lane: usize,
    },
    /// A `for` with a zero step.
    #[error("`for` with a zero step at {site}")]
    ZeroStep {
        /// Where.
        site: Site,
    },
    /// More instructions executed by one program than [`Interpreter::step_limit`].
    #[error("step limit of {limit} instructions reached at {site}")]
    StepLimit {
        /// Where.
        site: Site,
        /// The limit.
        limit: u64,
    },
    /// A block with more than [`MAX_ELEMENTS`] elements.
    #[error("block of {numel} elements is too large for the interpreter at {site}")]
    TooLarge {
        /// Where.
        site: Site,
        /// Its number of elements.
        numel: usize,
    },
    /// Something the verifier should have excluded (an interpreter or verifier bug).
    #[error("internal error: {message} at {site}")]
    Internal {
        /// Where.
        site: Site,
        /// What.
        message: String,
    },
}

impl InterpError {
    /// Where the run stopped, for traps inside a program.
    pub fn site(&self) -> Option<&Site> {
        match self {
            InterpError::Invalid(_) | InterpError::BadArgument { .. } => None,
            InterpError::OutOfBounds { site, .. }
            | InterpError::DivisionByZero { site }
            | InterpError::AssertionFailed { site, .. }
            | InterpError::ZeroStep { site }
            | InterpError::StepLimit { site, .. }
            | InterpError::TooLarge { site, .. }
            | InterpError::Internal { site, .. } => Some(site),
        }
    }
}

/// Runs every program of `grid` on `args` (indexed by [`Param::slot`]; entries for other
/// slots are ignored). `print` output goes to stderr.
pub fn run_grid(
    f: &Function,
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &mut [Buffer],
) -> Result<(), InterpError> {
    let mut it = Interpreter::new(f)?;
    let r = it.run_grid(grid, args, buffers);
    it.flush_log();
    r
}

/// Runs the one program `pid` of `grid`. `print` output goes to stderr.
pub fn run_program(
    f: &Function,
    pid: [u32; 3],
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &mut [Buffer],
) -> Result<(), InterpError> {
    let mut it = Interpreter::new(f)?;
    let r = it.run_program(pid, grid, args, buffers);
    it.flush_log();
    r
}

/// An interpreter for one verified function, keeping the `print` log.
pub struct Interpreter<'f> {
    func: &'f Function,
    /// Lines written by `print`, in execution order.
    pub log: Vec<String>,
    /// Most instructions one program may execute (`None`: no limit); guards tests
    /// against loops that never end.
    pub step_limit: Option<u64>,
}

impl<'f> Interpreter<'f> {
    /// Verifies `func` and prepares to run it.
    pub fn new(func: &'f Function) -> Result<Interpreter<'f>, InterpError> {
        verify(func)?;
        Ok(Interpreter { func, log: Vec::new(), step_limit: None })
    }

    /// Runs every program of `grid`, `x` fastest.
    pub fn run_grid(
        &mut self,
        grid: [u32; 3],
        args: &[ArgValue],
        buffers: &mut [Buffer],
    ) -> Result<(), InterpError> {
        let params = bind_args(self.func, args, buffers)?;
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    self.program(&params, [x, y, z], grid, buffers)?;
                }
            }
        }
        Ok(())
    }

    /// Runs the one program `pid` of `grid`.
    pub fn run_program(
        &mut self,
        pid: [u32; 3],
        grid: [u32; 3],
        args: &[ArgValue],
        buffers: &mut [Buffer],
    ) -> Result<(), InterpError> {
        let params = bind_args(self.func, args, buffers)?;
        self.program(&params, pid, grid, buffers)
    }

    fn program(
        &mut self,
        params: &[(Value, S)],
        pid: [u32; 3],
        grid: [u32; 3],
        buffers: &mut [Buffer],
    ) -> Result<(), InterpError> {
        let f = self.func;
        let mut ex = Exec {
            f,
            env: vec![None; f.values.len()],
            buffers,
            pid,
            grid,
            steps: 0,
            limit: self.step_limit,
            log: &mut self.log,
        };
        for &(v, s) in params {
            ex.env[v.as_u32() as usize] = Some(Rc::from([s]));
        }
        ex.region(&f.body, Vec::new())?;
        Ok(())
    }

    fn flush_log(&mut self) {
        for line in self.log.drain(..) {
            eprintln!("{line}");
        }
    }
}

fn bind_args(f: &Function, args: &[ArgValue], buffers: &[Buffer]) -> Result<Vec<(Value, S)>, InterpError> {
    let mut out = Vec::new();
    for p in &f.params {
        let bad = |message: String| InterpError::BadArgument { slot: p.slot, name: p.name.clone(), message };
        let Some(&a) = args.get(p.slot as usize) else {
            return Err(bad(format!("missing ({} arguments given)", args.len())));
        };
        let ty = f.ty(p.value);
        let s = match (ty.elem, a) {
            (Elem::Ptr(d), ArgValue::Ptr { buffer, offset }) => {
                let Some(b) = buffers.get(buffer) else {
                    return Err(bad(format!("buffer {buffer} does not exist ({} buffers)", buffers.len())));
                };
                if b.dtype != d {
                    return Err(bad(format!("pointer to {d} given buffer {buffer} of {}", b.dtype)));
                }
                S::P(buffer, offset)
            }
            (Elem::Scalar(d), ArgValue::Int(v)) if d.is_int() => S::I(d.wrap_int(v)),
            (Elem::Scalar(d), ArgValue::Float(x)) if d.is_float() => S::F(d.round_float(x)),
            _ => return Err(bad(format!("expected {ty}, found {a:?}"))),
        };
        out.push((p.value, s));
    }
    Ok(out)
}

/// One element of a value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum S {
    I(i64),
    F(f64),
    P(usize, i64),
}

type Val = Rc<[S]>;

/// Why an element operation failed.
enum ElemError {
    DivisionByZero,
    Unsupported(&'static str),
}

struct Exec<'a> {
    f: &'a Function,
    env: Vec<Option<Val>>,
    buffers: &'a mut [Buffer],
    pid: [u32; 3],
    grid: [u32; 3],
    steps: u64,
    limit: Option<u64>,
    log: &'a mut Vec<String>,
}

impl Exec<'_> {
    fn site(&self, i: Inst) -> Site {
        Site { inst: i, span: self.f.span(i), pid: self.pid, text: print_inst_line(self.f, i) }
    }

    fn internal(&self, i: Inst, message: impl Into<String>) -> InterpError {
        InterpError::Internal { site: self.site(i), message: message.into() }
    }

    fn elem_error(&self, i: Inst, e: ElemError) -> InterpError {
        match e {
            ElemError::DivisionByZero => InterpError::DivisionByZero { site: self.site(i) },
            ElemError::Unsupported(m) => self.internal(i, m),
        }
    }

    fn get(&self, i: Inst, v: Value) -> Result<Val, InterpError> {
        self.env
            .get(v.as_u32() as usize)
            .and_then(|x| x.clone())
            .ok_or_else(|| self.internal(i, "operand has no value"))
    }

    fn set(&mut self, v: Value, val: Val) {
        if let Some(slot) = self.env.get_mut(v.as_u32() as usize) {
            *slot = Some(val);
        }
    }

    fn dtype(&self, v: Value) -> DType {
        self.f.ty(v).elem.dtype()
    }

    fn scalar(&self, i: Inst, v: Value) -> Result<S, InterpError> {
        let val = self.get(i, v)?;
        val.first().copied().ok_or_else(|| self.internal(i, "empty value"))
    }

    /// Runs a region and returns the operands of its terminator (none for the body).
    fn region(&mut self, r: &Region, args: Vec<Val>) -> Result<Vec<Val>, InterpError> {
        for (&a, v) in r.args.iter().zip(args) {
            self.set(a, v);
        }
        for &i in &r.insts {
            self.steps += 1;
            if let Some(limit) = self.limit
                && self.steps > limit
            {
                return Err(InterpError::StepLimit { site: self.site(i), limit });
            }
            let data = &self.f.insts[i];
            if data.opcode.is_terminator() {
                return data.args.iter().map(|&a| self.get(i, a)).collect();
            }
            self.inst(i)?;
        }
        Ok(Vec::new())
    }

    fn inst(&mut self, i: Inst) -> Result<(), InterpError> {
        let f = self.f;
        let data = &f.insts[i];
        let args = &data.args;
        let result_ty = data.results.first().map(|&r| f.ty(r));
        let numel = result_ty.map_or(1, |t| t.shape.numel() as usize);
        if numel > MAX_ELEMENTS {
            return Err(InterpError::TooLarge { site: self.site(i), numel });
        }
        let out: Vec<S> = match data.opcode {
            Opcode::Const(Const::Int(v)) => vec![S::I(v)],
            Opcode::Const(Const::Float(x)) => vec![S::F(x)],
            Opcode::ProgramId(a) => vec![S::I(*self.pid.get(a as usize).unwrap_or(&0) as i64)],
            Opcode::NumPrograms(a) => vec![S::I(*self.grid.get(a as usize).unwrap_or(&0) as i64)],
            Opcode::Arange { start, end } => (start..end).map(S::I).collect(),
            Opcode::Splat => vec![self.scalar(i, args[0])?; numel],
            Opcode::Broadcast => {
                let a = self.get(i, args[0])?;
                let to = result_ty.map(|t| t.shape).unwrap_or_default();
                broadcast(&a, f.ty(args[0]).shape.dims(), to.dims())
            }
            Opcode::ExpandDims(_) => {
                // Row-major order does not change when a size-1 axis is inserted.
                let a = self.get(i, args[0])?;
                self.set(data.results[0], a);
                return Ok(());
            }
            Opcode::Binary(op) => {
                let (a, b) = (self.get(i, args[0])?, self.get(i, args[1])?);
                let d = self.dtype(args[0]);
                a.iter()
                    .zip(b.iter())
                    .map(|(&x, &y)| binary(op, d, x, y))
                    .collect::<Result<_, _>>()
                    .map_err(|e| self.elem_error(i, e))?
            }
            Opcode::Cmp(op) => {
                let (a, b) = (self.get(i, args[0])?, self.get(i, args[1])?);
                let d = self.dtype(args[0]);
                a.iter().zip(b.iter()).map(|(&x, &y)| S::I(compare(op, d, x, y) as i64)).collect()
            }
            Opcode::Unary(op) => {
                let a = self.get(i, args[0])?;
                let d = self.dtype(args[0]);
                a.iter()
                    .map(|&x| unary(op, d, x))
                    .collect::<Result<_, _>>()
                    .map_err(|e| self.elem_error(i, e))?
            }
            Opcode::Select => {
                let (c, a, b) = (self.get(i, args[0])?, self.get(i, args[1])?, self.get(i, args[2])?);
                (0..c.len()).map(|k| if c[k] != S::I(0) { a[k] } else { b[k] }).collect()
            }
            Opcode::Fma => {
                let (a, b, c) = (self.get(i, args[0])?, self.get(i, args[1])?, self.get(i, args[2])?);
                let d = self.dtype(data.results[0]);
                (0..a.len())
                    .map(|k| match (a[k], b[k], c[k]) {
                        (S::F(x), S::F(y), S::F(z)) => Ok(S::F(fma(d, x, y, z))),
                        _ => Err(self.elem_error(i, ElemError::Unsupported("fma of integers"))),
                    })
                    .collect::<Result<_, _>>()?
            }
            Opcode::Cast => {
                let a = self.get(i, args[0])?;
                let (from, to) = (self.dtype(args[0]), self.dtype(data.results[0]));
                a.iter().map(|&x| cast(from, to, x)).collect()
            }
            Opcode::Bitcast => {
                let a = self.get(i, args[0])?;
                let (from, to) = (self.dtype(args[0]), self.dtype(data.results[0]));
                a.iter().map(|&x| from_bits(to, to_bits(from, x))).collect()
            }
            Opcode::PtrAdd => {
                let (p, o) = (self.get(i, args[0])?, self.get(i, args[1])?);
                p.iter()
                    .zip(o.iter())
                    .map(|(&p, &o)| match (p, o) {
                        (S::P(b, off), S::I(d)) => Ok(S::P(b, off.wrapping_add(d))),
                        _ => Err(self.internal(i, "ptr_add on a non-pointer")),
                    })
                    .collect::<Result<_, _>>()?
            }
            Opcode::Load { has_mask, has_other, .. } => {
                let p = self.get(i, args[0])?;
                let mask = if has_mask { Some(self.get(i, args[1])?) } else { None };
                let other = if has_other { Some(self.get(i, args[2])?) } else { None };
                let d = self.dtype(data.results[0]);
                let mut out = Vec::with_capacity(p.len());
                for k in 0..p.len() {
                    if mask.as_ref().is_some_and(|m| m[k] == S::I(0)) {
                        out.push(other.as_ref().map_or(zero(d), |o| o[k]));
                    } else {
                        out.push(self.read(i, p[k], d)?);
                    }
                }
                out
            }
            Opcode::Store { has_mask, check_only } => {
                let (p, v) = (self.get(i, args[0])?, self.get(i, args[1])?);
                let mask = if has_mask { Some(self.get(i, args[2])?) } else { None };
                let d = self.dtype(args[1]);
                for k in 0..p.len() {
                    if mask.as_ref().is_none_or(|m| m[k] != S::I(0)) {
                        if check_only {
                            self.locate(i, p[k], d, Access::Write)?;
                        } else {
                            self.write(i, p[k], d, v[k])?;
                        }
                    }
                }
                return Ok(());
            }
            Opcode::Reduce { op, axis, .. } => {
                let a = self.get(i, args[0])?;
                let d = self.dtype(args[0]);
                let op = match op {
                    ReduceOp::Sum => BinOp::Add,
                    ReduceOp::Max => BinOp::Max,
                    ReduceOp::Min => BinOp::Min,
                };
                reduce(op, d, &a, f.ty(args[0]).shape.dims(), axis as usize)
                    .map_err(|e| self.elem_error(i, e))?
            }
            Opcode::Atomic { op, has_mask } => {
                let (p, v) = (self.get(i, args[0])?, self.get(i, args[1])?);
                let mask = if has_mask { Some(self.get(i, args[2])?) } else { None };
                let d = self.dtype(args[1]);
                let mut out = Vec::with_capacity(p.len());
                for k in 0..p.len() {
                    if mask.as_ref().is_some_and(|m| m[k] == S::I(0)) {
                        out.push(zero(d));
                        continue;
                    }
                    let old = self.read(i, p[k], d)?;
                    let new = match op {
                        AtomicOp::Add => binary(BinOp::Add, d, old, v[k]),
                        AtomicOp::Max => binary(BinOp::Max, d, old, v[k]),
                        AtomicOp::Min => binary(BinOp::Min, d, old, v[k]),
                        AtomicOp::And => binary(BinOp::And, d, old, v[k]),
                        AtomicOp::Or => binary(BinOp::Or, d, old, v[k]),
                        AtomicOp::Xor => binary(BinOp::Xor, d, old, v[k]),
                        AtomicOp::Xchg => Ok(v[k]),
                    }
                    .map_err(|e| self.elem_error(i, e))?;
                    self.write(i, p[k], d, new)?;
                    out.push(old);
                }
                out
            }
            Opcode::AtomicCas => {
                let (p, c, v) = (self.get(i, args[0])?, self.get(i, args[1])?, self.get(i, args[2])?);
                let d = self.dtype(args[1]);
                let mut out = Vec::with_capacity(p.len());
                for k in 0..p.len() {
                    let old = self.read(i, p[k], d)?;
                    if to_bits(d, old) == to_bits(d, c[k]) {
                        self.write(i, p[k], d, v[k])?;
                    }
                    out.push(old);
                }
                out
            }
            Opcode::For => return self.for_(i),
            Opcode::While => return self.while_(i),
            Opcode::If => {
                let c = self.scalar(i, args[0])?;
                let r = &data.regions[if c != S::I(0) { 0 } else { 1 }];
                let results = self.region(r, Vec::new())?;
                return self.set_results(i, results);
            }
            Opcode::Yield | Opcode::Condition => return Err(self.internal(i, "terminator outside its place")),
            Opcode::Assert => {
                let c = self.get(i, args[0])?;
                if let Some(lane) = c.iter().position(|&x| x == S::I(0)) {
                    return Err(InterpError::AssertionFailed { site: self.site(i), lane });
                }
                return Ok(());
            }
            Opcode::Print(k) => {
                self.print(i, k, args)?;
                return Ok(());
            }
        };
        match data.results.first() {
            Some(&r) if out.len() == numel => {
                self.set(r, out.into());
                Ok(())
            }
            _ => Err(self.internal(i, "result has the wrong number of elements")),
        }
    }

    fn set_results(&mut self, i: Inst, values: Vec<Val>) -> Result<(), InterpError> {
        let results = &self.f.insts[i].results;
        if values.len() != results.len() {
            return Err(self.internal(i, "region passed the wrong number of values"));
        }
        for (&r, v) in results.iter().zip(values) {
            self.set(r, v);
        }
        Ok(())
    }

    fn for_(&mut self, i: Inst) -> Result<(), InterpError> {
        let f = self.f;
        let data = &f.insts[i];
        let d = self.dtype(data.args[0]);
        let wide = |s: S| match s {
            S::I(v) if d.is_signed() => v as i128,
            S::I(v) => v as u64 as i128,
            _ => 0,
        };
        let lb = wide(self.scalar(i, data.args[0])?);
        let ub = wide(self.scalar(i, data.args[1])?);
        let step = wide(self.scalar(i, data.args[2])?);
        if step == 0 {
            return Err(InterpError::ZeroStep { site: self.site(i) });
        }
        let count = if step > 0 {
            if ub > lb { (ub - lb + step - 1) / step } else { 0 }
        } else if lb > ub {
            (lb - ub - step - 1) / -step
        } else {
            0
        };
        let mut carried: Vec<Val> =
            data.args[3..].iter().map(|&a| self.get(i, a)).collect::<Result<_, _>>()?;
        let mut k: i128 = 0;
        while k < count {
            let iv: Val = Rc::from([S::I(d.wrap_int((lb + k * step) as i64))]);
            let mut args = vec![iv];
            args.extend(carried);
            carried = self.region(&data.regions[0], args)?;
            k += 1;
        }
        self.set_results(i, carried)
    }

    fn while_(&mut self, i: Inst) -> Result<(), InterpError> {
        let f = self.f;
        let data = &f.insts[i];
        let mut carried: Vec<Val> = data.args.iter().map(|&a| self.get(i, a)).collect::<Result<_, _>>()?;
        loop {
            let mut cond = self.region(&data.regions[0], carried)?;
            if cond.is_empty() {
                return Err(self.internal(i, "condition without a flag"));
            }
            let flag = cond.remove(0);
            if flag.first() == Some(&S::I(0)) {
                return self.set_results(i, cond);
            }
            carried = self.region(&data.regions[1], cond)?;
        }
    }

    fn print(&mut self, i: Inst, k: u32, args: &[Value]) -> Result<(), InterpError> {
        let prefix = self.f.strings.get(k as usize).cloned().unwrap_or_default();
        let [x, y, z] = self.pid;
        if args.is_empty() {
            self.log.push(format!("pid ({x}, {y}, {z}) {prefix}"));
        }
        for &a in args {
            let v = self.get(i, a)?;
            let ty = self.f.ty(a);
            let dims = ty.shape.dims();
            for (lin, &s) in v.iter().enumerate() {
                let mut idx = vec![0u64; dims.len()];
                let mut rem = lin as u64;
                for (ax, &n) in dims.iter().enumerate().rev() {
                    idx[ax] = rem % n as u64;
                    rem /= n as u64;
                }
                let idx: Vec<String> = idx.iter().map(|c| c.to_string()).collect();
                let text = format_elem(ty.elem.dtype(), s);
                self.log.push(format!("pid ({x}, {y}, {z}) idx ({}) {prefix}{text}", idx.join(", ")));
            }
        }
        Ok(())
    }

    /// The buffer and element index `p` designates, bounds-checked.
    fn locate(&self, i: Inst, p: S, d: DType, access: Access) -> Result<(usize, usize), InterpError> {
        let S::P(b, offset) = p else { return Err(self.internal(i, "access through a non-pointer")) };
        let Some(buf) = self.buffers.get(b) else { return Err(self.internal(i, "pointer to no buffer")) };
        if buf.dtype != d {
            return Err(self.internal(i, format!("{d} access to a buffer of {}", buf.dtype)));
        }
        let len = buf.len();
        if offset < 0 || offset as u64 >= len as u64 {
            return Err(InterpError::OutOfBounds { site: self.site(i), buffer: b, offset, len, access });
        }
        Ok((b, offset as usize))
    }

    fn read(&self, i: Inst, p: S, d: DType) -> Result<S, InterpError> {
        let (b, k) = self.locate(i, p, d, Access::Read)?;
        Ok(self.buffers[b].read_elem(k))
    }

    fn write(&mut self, i: Inst, p: S, d: DType, v: S) -> Result<(), InterpError> {
        let (b, k) = self.locate(i, p, d, Access::Write)?;
        self.buffers[b].write_elem(k, v);
        Ok(())
    }
}

fn format_elem(d: DType, s: S) -> String {
    match s {
        S::I(v) if d.is_signed() => v.to_string(),
        S::I(v) => (v as u64).to_string(),
        S::F(x) if d == DType::F64 => x.to_string(),
        S::F(x) => (x as f32).to_string(),
        S::P(b, off) => format!("<buffer {b} + {off}>"),
    }
}

fn zero(d: DType) -> S {
    if d.is_float() { S::F(0.0) } else { S::I(0) }
}

/// Elements of `src` (shape `from`) repeated along its size-1 axes to shape `to`.
fn broadcast(src: &[S], from: &[u32], to: &[u32]) -> Vec<S> {
    let rank = to.len();
    let mut strides = vec![0usize; rank];
    let mut acc = 1usize;
    for k in (0..rank).rev() {
        let n = *from.get(k).unwrap_or(&1) as usize;
        strides[k] = if n == 1 { 0 } else { acc };
        acc *= n;
    }
    let numel: usize = to.iter().map(|&d| d as usize).product();
    (0..numel)
        .map(|lin| {
            let mut rem = lin;
            let mut idx = 0;
            for k in (0..rank).rev() {
                let n = to[k] as usize;
                idx += (rem % n) * strides[k];
                rem /= n;
            }
            src.get(idx).copied().unwrap_or(S::I(0))
        })
        .collect()
}

fn reduce(op: BinOp, d: DType, data: &[S], dims: &[u32], axis: usize) -> Result<Vec<S>, ElemError> {
    fn tree(op: BinOp, d: DType, lane: &[S]) -> Result<S, ElemError> {
        match lane {
            [] => Err(ElemError::Unsupported("empty reduction")),
            [x] => Ok(*x),
            _ => {
                let (l, r) = lane.split_at(lane.len() / 2);
                binary(op, d, tree(op, d, l)?, tree(op, d, r)?)
            }
        }
    }
    let outer: usize = dims[..axis].iter().map(|&n| n as usize).product();
    let n = dims[axis] as usize;
    let inner: usize = dims[axis + 1..].iter().map(|&n| n as usize).product();
    let mut out = Vec::with_capacity(outer * inner);
    let mut lane = Vec::with_capacity(n);
    for o in 0..outer {
        for j in 0..inner {
            lane.clear();
            lane.extend((0..n).map(|k| data[(o * n + k) * inner + j]));
            out.push(tree(op, d, &lane)?);
        }
    }
    Ok(out)
}

fn width_mask(d: DType) -> u64 {
    if d.bits() >= 64 { u64::MAX } else { (1u64 << d.bits()) - 1 }
}

fn int_lt(d: DType, a: i64, b: i64) -> bool {
    if d.is_signed() { a < b } else { (a as u64) < (b as u64) }
}

fn binary(op: BinOp, d: DType, a: S, b: S) -> Result<S, ElemError> {
    match (a, b) {
        (S::I(a), S::I(b)) => int_binary(op, d, a, b).map(S::I),
        (S::F(a), S::F(b)) => float_binary(op, d, a, b).map(S::F),
        _ => Err(ElemError::Unsupported("binary operation on mismatched or pointer operands")),
    }
}

fn int_binary(op: BinOp, d: DType, a: i64, b: i64) -> Result<i64, ElemError> {
    let signed = d.is_signed();
    let bits = d.bits() as u64;
    let r = match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::IDiv | BinOp::Rem if b == 0 => return Err(ElemError::DivisionByZero),
        BinOp::IDiv if signed => a.wrapping_div(b),
        BinOp::IDiv => ((a as u64) / (b as u64)) as i64,
        BinOp::Rem if signed => a.wrapping_rem(b),
        BinOp::Rem => ((a as u64) % (b as u64)) as i64,
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl | BinOp::Shr => {
            let amount = (b as u64) & width_mask(d);
            match (op, signed) {
                _ if amount < bits && op == BinOp::Shl => ((a as u64) << amount) as i64,
                (BinOp::Shl, _) => 0,
                (_, true) => a >> amount.min(63),
                (_, false) if amount < bits => ((a as u64) >> amount) as i64,
                (_, false) => 0,
            }
        }
        BinOp::Min => {
            if int_lt(d, b, a) {
                b
            } else {
                a
            }
        }
        BinOp::Max => {
            if int_lt(d, a, b) {
                b
            } else {
                a
            }
        }
        BinOp::Div | BinOp::Pow => return Err(ElemError::Unsupported("float operation on integers")),
    };
    Ok(d.wrap_int(r))
}

macro_rules! float_ops {
    ($bin:ident, $un:ident, $t:ty) => {
        fn $bin(op: BinOp, a: $t, b: $t) -> Option<$t> {
            Some(match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                BinOp::IDiv => (a / b).floor(),
                BinOp::Rem => a % b,
                BinOp::Pow => a.powf(b),
                BinOp::Min if a.is_nan() || b.is_nan() => <$t>::NAN,
                BinOp::Min => {
                    if a < b || (a == b && a.is_sign_negative()) {
                        a
                    } else {
                        b
                    }
                }
                BinOp::Max if a.is_nan() || b.is_nan() => <$t>::NAN,
                BinOp::Max => {
                    if a > b || (a == b && a.is_sign_positive()) {
                        a
                    } else {
                        b
                    }
                }
                BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => return None,
            })
        }

        fn $un(op: UnOp, a: $t) -> Option<$t> {
            Some(match op {
                UnOp::Neg => -a,
                UnOp::Sqrt => a.sqrt(),
                UnOp::Rsqrt => 1.0 / a.sqrt(),
                UnOp::Exp => a.exp(),
                UnOp::Exp2 => a.exp2(),
                UnOp::Log => a.ln(),
                UnOp::Log2 => a.log2(),
                UnOp::Abs => a.abs(),
                UnOp::Sin => a.sin(),
                UnOp::Cos => a.cos(),
                UnOp::Floor => a.floor(),
                UnOp::Ceil => a.ceil(),
                UnOp::Not => return None,
            })
        }
    };
}

float_ops!(f32_binary, f32_unary, f32);
float_ops!(f64_binary, f64_unary, f64);

/// An `f32` result rounded to `d` (`fp32` itself, `fp16` or `bf16`), as `f64`.
fn in_f32(d: DType, r: Option<f32>) -> Option<f64> {
    let r = r?;
    Some(match d {
        DType::F16 => f16::from_f32(r).to_f64(),
        DType::BF16 => bf16::from_f32(r).to_f64(),
        _ => r as f64,
    })
}

fn float_binary(op: BinOp, d: DType, a: f64, b: f64) -> Result<f64, ElemError> {
    match d {
        DType::F64 => f64_binary(op, a, b),
        _ => in_f32(d, f32_binary(op, a as f32, b as f32)),
    }
    .ok_or(ElemError::Unsupported("integer operation on floats"))
}

/// `x · y + z` rounded once to `d` (`fp16`/`bf16`: once to `fp32`, then to `d`, as the
/// JIT computes it).
pub fn fma(d: DType, x: f64, y: f64, z: f64) -> f64 {
    match d {
        DType::F64 => x.mul_add(y, z),
        _ => d.round_float(f64::from((x as f32).mul_add(y as f32, z as f32))),
    }
}

fn unary(op: UnOp, d: DType, a: S) -> Result<S, ElemError> {
    match a {
        S::I(a) => {
            let r = match op {
                UnOp::Neg => 0i64.wrapping_sub(a),
                UnOp::Not => !a,
                UnOp::Abs if d.is_signed() => a.wrapping_abs(),
                UnOp::Abs => a,
                _ => return Err(ElemError::Unsupported("float function on integers")),
            };
            Ok(S::I(d.wrap_int(r)))
        }
        S::F(a) => match d {
            DType::F64 => f64_unary(op, a),
            // exp and log of f32 are lnc's own (`crate::math`), as the JIT computes them.
            _ => in_f32(d, crate::math::unary_f32(op, a as f32).or_else(|| f32_unary(op, a as f32))),
        }
        .map(S::F)
        .ok_or(ElemError::Unsupported("bitwise not on floats")),
        S::P(..) => Err(ElemError::Unsupported("unary operation on a pointer")),
    }
}

fn compare(op: CmpOp, d: DType, a: S, b: S) -> bool {
    use std::cmp::Ordering;
    let ord = match (a, b) {
        (S::I(a), S::I(b)) if d.is_signed() => Some(a.cmp(&b)),
        (S::I(a), S::I(b)) => Some((a as u64).cmp(&(b as u64))),
        (S::F(a), S::F(b)) => a.partial_cmp(&b),
        (S::P(ba, oa), S::P(bb, ob)) => Some((ba, oa).cmp(&(bb, ob))),
        _ => None,
    };
    // Unordered (NaN) compares false except for `!=`, as IEEE says.
    match (op, ord) {
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
        (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    }
}

/// `mag` rounded to nearest even with `bits` significant bits, as an exact `f64`.
fn round_to_bits(mag: u64, bits: u32) -> f64 {
    let len = 64 - mag.leading_zeros();
    if len <= bits {
        return mag as f64;
    }
    let shift = len - bits;
    let mut q = mag >> shift;
    let rem = mag & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    q as f64 * 2f64.powi(shift as i32)
}

fn cast(from: DType, to: DType, s: S) -> S {
    match s {
        S::I(a) if to == DType::I1 => S::I((a != 0) as i64),
        S::I(a) if to.is_int() => S::I(to.wrap_int(a)),
        S::I(a) => {
            let (neg, mag) =
                if from.is_signed() && a < 0 { (true, a.unsigned_abs()) } else { (false, a as u64) };
            let m = match to {
                DType::F64 => mag as f64,
                DType::F32 => mag as f32 as f64,
                DType::F16 => f16::from_f64(round_to_bits(mag, 11)).to_f64(),
                _ => bf16::from_f64(round_to_bits(mag, 8)).to_f64(),
            };
            S::F(if neg { -m } else { m })
        }
        S::F(x) => match to {
            DType::I1 => S::I((x != 0.0) as i64),
            DType::I8 => S::I(x as i8 as i64),
            DType::I16 => S::I(x as i16 as i64),
            DType::I32 => S::I(x as i32 as i64),
            DType::I64 => S::I(x as i64),
            DType::U8 => S::I(x as u8 as i64),
            DType::U16 => S::I(x as u16 as i64),
            DType::U32 => S::I(x as u32 as i64),
            DType::U64 => S::I(x as u64 as i64),
            _ => S::F(to.round_float(x)),
        },
        S::P(..) => s,
    }
}

fn to_bits(d: DType, s: S) -> u64 {
    match s {
        S::I(a) => (a as u64) & width_mask(d),
        S::F(x) => match d {
            DType::F32 => (x as f32).to_bits() as u64,
            DType::F16 => f16::from_f64(x).to_bits() as u64,
            DType::BF16 => bf16::from_f64(x).to_bits() as u64,
            _ => x.to_bits(),
        },
        S::P(..) => 0,
    }
}

fn from_bits(d: DType, bits: u64) -> S {
    match d {
        DType::F64 => S::F(f64::from_bits(bits)),
        DType::F32 => S::F(f32::from_bits(bits as u32) as f64),
        DType::F16 => S::F(f16::from_bits(bits as u16).to_f64()),
        DType::BF16 => S::F(bf16::from_bits(bits as u16).to_f64()),
        _ => S::I(d.wrap_int(bits as i64)),
    }
}
