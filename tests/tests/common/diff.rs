//! The differential harness: one kernel, one grid, one argument list, run by the JIT (on
//! the module's pool and on pools of 1 and 4 threads) and by the block-IR reference
//! interpreter on the front end's block IR, each on its own copy of the same (poisoned)
//! buffers; every buffer must come out the same.
//!
//! Integers are compared bit for bit. Floats are compared within a few ulps by default
//! (a slack: the two compute the same operations, `lnc_bir::math` and libm's functions
//! included, but a sum may reduce in another order), or as a
//! [`Check`] says: exactly, within a tolerance where the reduction order differs, or only
//! by an order-independent property for kernels whose result depends on the order the
//! programs run in (atomics returning old values, `atomic_xchg`).

#![allow(dead_code)]

use std::sync::OnceLock;

use half::{bf16, f16};
use lnc::DType;
use lnc_bir::interp::{self, ArgValue, Buffer};

/// The contents of a host buffer, of any element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// `int1`.
    I1(Vec<bool>),
    /// `int8`.
    I8(Vec<i8>),
    /// `int16`.
    I16(Vec<i16>),
    /// `int32`.
    I32(Vec<i32>),
    /// `int64`.
    I64(Vec<i64>),
    /// `uint8`.
    U8(Vec<u8>),
    /// `uint16`.
    U16(Vec<u16>),
    /// `uint32`.
    U32(Vec<u32>),
    /// `uint64`.
    U64(Vec<u64>),
    /// `float16`.
    F16(Vec<f16>),
    /// `bfloat16`.
    BF16(Vec<bf16>),
    /// `float32`.
    F32(Vec<f32>),
    /// `float64`.
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the vector inside a [`Data`], whatever its type.
macro_rules! with_data {
    ($d:expr, $v:ident => $body:expr) => {
        match $d {
            Data::I1($v) => $body,
            Data::I8($v) => $body,
            Data::I16($v) => $body,
            Data::I32($v) => $body,
            Data::I64($v) => $body,
            Data::U8($v) => $body,
            Data::U16($v) => $body,
            Data::U32($v) => $body,
            Data::U64($v) => $body,
            Data::F16($v) => $body,
            Data::BF16($v) => $body,
            Data::F32($v) => $body,
            Data::F64($v) => $body,
        }
    };
}

macro_rules! data_from {
    ($($t:ty => $var:ident),* $(,)?) => {$(
        impl From<Vec<$t>> for Data {
            fn from(v: Vec<$t>) -> Data {
                Data::$var(v)
            }
        }
        impl From<Vec<$t>> for A {
            fn from(v: Vec<$t>) -> A {
                A::Buf(Data::$var(v), 0)
            }
        }
    )*};
}
data_from!(bool => I1, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16,
    u32 => U32, u64 => U64, f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);

impl Data {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Data::I1(_) => DType::I1,
            Data::I8(_) => DType::I8,
            Data::I16(_) => DType::I16,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::U8(_) => DType::U8,
            Data::U16(_) => DType::U16,
            Data::U32(_) => DType::U32,
            Data::U64(_) => DType::U64,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The interpreter's buffer with the same bytes.
    pub fn to_buffer(&self) -> Buffer {
        match self {
            Data::I1(v) => Buffer::from_bool(v),
            Data::I8(v) => Buffer::from_i8(v),
            Data::I16(v) => Buffer::from_i16(v),
            Data::I32(v) => Buffer::from_i32(v),
            Data::I64(v) => Buffer::from_i64(v),
            Data::U8(v) => Buffer::from_u8(v),
            Data::U16(v) => Buffer::from_u16(v),
            Data::U32(v) => Buffer::from_u32(v),
            Data::U64(v) => Buffer::from_u64(v),
            Data::F16(v) => Buffer::from_f16(v),
            Data::BF16(v) => Buffer::from_bf16(v),
            Data::F32(v) => Buffer::from_f32(v),
            Data::F64(v) => Buffer::from_f64(v),
        }
    }

    /// The contents of an interpreter buffer.
    pub fn from_buffer(b: &Buffer) -> Data {
        match b.dtype {
            DType::I1 => Data::I1(b.data.iter().map(|&x| x != 0).collect()),
            DType::I8 => Data::I8(b.to_i8()),
            DType::I16 => Data::I16(b.to_i16()),
            DType::I32 => Data::I32(b.to_i32()),
            DType::I64 => Data::I64(b.to_i64()),
            DType::U8 => Data::U8(b.to_u8()),
            DType::U16 => Data::U16(b.to_u16()),
            DType::U32 => Data::U32(b.to_u32()),
            DType::U64 => Data::U64(b.to_u64()),
            DType::F16 => Data::F16(b.to_u16().into_iter().map(f16::from_bits).collect()),
            DType::BF16 => Data::BF16(b.to_u16().into_iter().map(bf16::from_bits).collect()),
            DType::F32 => Data::F32(b.to_f32()),
            DType::F64 => Data::F64(b.to_f64()),
        }
    }

    /// A writable kernel argument pointing `offset` elements into the buffer.
    pub fn arg_mut(&mut self, offset: usize) -> lnc::Arg<'_> {
        with_data!(self, v => lnc::Arg::at_mut(v.as_mut_slice(), offset))
    }

    /// Element `k` as `f64` (64-bit integers beyond 2^53 lose bits; use [`Data::bits`]).
    pub fn get_f64(&self, k: usize) -> f64 {
        match self {
            Data::I1(v) => v[k] as u8 as f64,
            Data::I8(v) => v[k] as f64,
            Data::I16(v) => v[k] as f64,
            Data::I32(v) => v[k] as f64,
            Data::I64(v) => v[k] as f64,
            Data::U8(v) => v[k] as f64,
            Data::U16(v) => v[k] as f64,
            Data::U32(v) => v[k] as f64,
            Data::U64(v) => v[k] as f64,
            Data::F16(v) => v[k].to_f64(),
            Data::BF16(v) => v[k].to_f64(),
            Data::F32(v) => v[k] as f64,
            Data::F64(v) => v[k],
        }
    }

    /// Element `k`'s bits, zero-extended.
    pub fn bits(&self, k: usize) -> u64 {
        match self {
            Data::I1(v) => v[k] as u64,
            Data::I8(v) => v[k] as u8 as u64,
            Data::I16(v) => v[k] as u16 as u64,
            Data::I32(v) => v[k] as u32 as u64,
            Data::I64(v) => v[k] as u64,
            Data::U8(v) => v[k] as u64,
            Data::U16(v) => v[k] as u64,
            Data::U32(v) => v[k] as u64,
            Data::U64(v) => v[k],
            Data::F16(v) => v[k].to_bits() as u64,
            Data::BF16(v) => v[k].to_bits() as u64,
            Data::F32(v) => v[k].to_bits() as u64,
            Data::F64(v) => v[k].to_bits(),
        }
    }

    /// Every element as `f64`.
    pub fn to_f64s(&self) -> Vec<f64> {
        (0..self.len()).map(|k| self.get_f64(k)).collect()
    }

    /// Every element as an `i64` (integers only; `u64` keeps its bits).
    pub fn to_i64s(&self) -> Vec<i64> {
        match self {
            Data::I1(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I8(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I16(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
            Data::U8(v) => v.iter().map(|&x| x as i64).collect(),
            Data::U16(v) => v.iter().map(|&x| x as i64).collect(),
            Data::U32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::U64(v) => v.iter().map(|&x| x as i64).collect(),
            other => panic!("to_i64s on {:?} data", other.dtype()),
        }
    }

    fn float_ulp(&self, x: f64) -> f64 {
        let eps = match self.dtype() {
            DType::F16 => 2f64.powi(-10),
            DType::BF16 => 2f64.powi(-7),
            DType::F32 => 2f64.powi(-23),
            _ => 2f64.powi(-52),
        };
        let tiny = match self.dtype() {
            DType::F16 => 2f64.powi(-24),
            DType::BF16 | DType::F32 => 2f64.powi(-149),
            _ => f64::MIN_POSITIVE,
        };
        (x.abs() * eps).max(tiny)
    }
}

/// A kernel argument: a buffer (with the element offset its pointer starts at) or a scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum A {
    /// A buffer; the kernel's pointer points `.1` elements in (`lnc::Arg::at_mut`).
    Buf(Data, usize),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `u32`.
    U32(u32),
    /// `u64`.
    U64(u64),
    /// `fp32`.
    F32(f32),
    /// `fp64`.
    F64(f64),
    /// `i1`.
    Bool(bool),
}

impl A {
    /// A buffer whose kernel pointer points `offset` elements in.
    pub fn at(data: impl Into<Data>, offset: usize) -> A {
        A::Buf(data.into(), offset)
    }

    /// The buffer's data (panics on scalars).
    pub fn data(&self) -> &Data {
        match self {
            A::Buf(d, _) => d,
            other => panic!("argument {other:?} is not a buffer"),
        }
    }
}

macro_rules! a_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for A {
            fn from(x: $t) -> A {
                A::$v(x)
            }
        }
    )*};
}
a_scalar!(i32 => I32, i64 => I64, u32 => U32, u64 => U64, f32 => F32, f64 => F64, bool => Bool);

/// How the JIT's and the interpreter's contents of one buffer are compared.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// The default: integers bit for bit, floats within 4 ulps (NaN matches NaN).
    Default,
    /// Bit for bit (floats: equal, or both NaN).
    Exact,
    /// Floats within `atol + rtol * |interpreter|`.
    Close {
        /// Absolute tolerance.
        atol: f64,
        /// Relative tolerance.
        rtol: f64,
    },
    /// The same elements in any order (results that depend on the order programs ran in,
    /// such as old values returned by contended atomics).
    Multiset,
    /// Not compared (the test checks it another way).
    Skip,
}

/// One differential case.
#[derive(Clone, Debug)]
pub struct Case {
    /// Kernel name.
    pub kernel: String,
    /// Signature (Triton's AOT format).
    pub sig: String,
    /// Grid.
    pub grid: [u32; 3],
    /// One entry per runtime parameter.
    pub args: Vec<A>,
    /// Comparison per argument index (default: [`Check::Default`]).
    pub checks: Vec<(usize, Check)>,
}

impl Case {
    /// A case on a grid (`u32`, `(u32, u32)` or `[u32; 3]`).
    pub fn new(kernel: &str, sig: &str, grid: impl Into<lnc::Grid>, args: Vec<A>) -> Case {
        Case { kernel: kernel.into(), sig: sig.into(), grid: grid.into().0, args, checks: Vec::new() }
    }

    /// Compares argument `arg` as `check` says.
    pub fn check(mut self, arg: usize, check: Check) -> Case {
        self.checks.push((arg, check));
        self
    }

    fn check_of(&self, arg: usize) -> Check {
        self.checks.iter().rev().find(|(a, _)| *a == arg).map_or(Check::Default, |c| c.1)
    }

    fn what(&self) -> String {
        format!("`{}` [{}] on grid {:?}", self.kernel, self.sig, self.grid)
    }
}

/// A JIT whose stores stream wherever they may (threshold 0: every aligned launch), so the
/// differential tests run the non-temporal copies of their loops; streaming must change
/// no result. (Other tests run the default threshold, under which their small launches
/// keep cached stores.)
#[allow(dead_code)]
pub fn streaming_jit() -> lnc::Jit {
    lnc::Jit::with_options(streaming_options())
}

fn streaming_options() -> lnc::CompileOptions {
    lnc::CompileOptions { stream_threshold: 0, ..Default::default() }
}

/// JITs launching on their own pools of 1 and 4 threads. The one of 1 thread proves no
/// launch's bounds (`CompileOptions::prove_bounds`): its safe launches run the checked
/// code, which the others' run only where the proof fails.
fn pools() -> &'static [lnc::Jit] {
    static POOLS: OnceLock<Vec<lnc::Jit>> = OnceLock::new();
    POOLS.get_or_init(|| {
        let checked =
            lnc::Jit::with_options(lnc::CompileOptions { prove_bounds: false, ..streaming_options() });
        vec![
            checked.with_threads(1).expect("thread pool"),
            streaming_jit().with_threads(4).expect("thread pool"),
        ]
    })
}

/// Launches the JIT's kernel on copies of the arguments; returns the buffers after the run.
pub fn run_jit(module: &lnc::Module, case: &Case) -> Result<Vec<A>, lnc::Error> {
    let k = module.kernel(&case.kernel, &case.sig)?;
    // Every kernel of the differential tests is written correctly, so the masked-lane lint
    // must be silent on all of them: a warning here is a false positive of the lint.
    assert!(
        k.warnings().is_empty(),
        "{} {}: {}",
        case.kernel,
        case.sig,
        lnc_diag::render_all(k.warnings(), k.file())
    );
    launch_case(&k, case)
}

/// [`run_jit`] without the lint check, for kernels that reduce disabled lanes on purpose.
#[allow(dead_code)]
pub fn run_jit_unlinted(module: &lnc::Module, case: &Case) -> Result<Vec<A>, lnc::Error> {
    let k = module.kernel(&case.kernel, &case.sig)?;
    launch_case(&k, case)
}

fn launch_args(args: &mut [A]) -> Vec<lnc::Arg<'_>> {
    args.iter_mut()
        .map(|a| match a {
            A::Buf(d, off) => d.arg_mut(*off),
            A::I32(x) => (*x).into(),
            A::I64(x) => (*x).into(),
            A::U32(x) => (*x).into(),
            A::U64(x) => (*x).into(),
            A::F32(x) => (*x).into(),
            A::F64(x) => (*x).into(),
            A::Bool(x) => (*x).into(),
        })
        .collect()
}

fn launch_case(k: &lnc::Kernel, case: &Case) -> Result<Vec<A>, lnc::Error> {
    let mut args = case.args.clone();
    let launch = launch_args(&mut args);
    k.launch(case.grid, &launch)?;
    drop(launch);
    Ok(args)
}

/// Whether a safe launch of the case runs the code without bounds checks
/// ([`lnc::Kernel::bounds_proved`]).
#[allow(dead_code)]
pub fn proved(module: &lnc::Module, case: &Case) -> Result<bool, lnc::Error> {
    let k = module.kernel(&case.kernel, &case.sig)?;
    let mut args = case.args.clone();
    k.bounds_proved(case.grid, &launch_args(&mut args))
}

/// Runs the reference interpreter on the front end's block IR, on copies of the arguments.
pub fn run_interp(module: &lnc::Module, case: &Case) -> Result<Vec<A>, String> {
    let k = module.kernel(&case.kernel, &case.sig).map_err(|e| e.to_string())?;
    let bir = module.block_ir(&case.kernel, &case.sig).map_err(|e| e.to_string())?;
    let params = k.params();
    assert_eq!(params.len(), case.args.len(), "{}: argument count", case.what());
    let slots = params.iter().map(|p| p.slot as usize + 1).max().unwrap_or(0);
    let mut values = vec![ArgValue::Int(0); slots];
    let mut buffers = Vec::new();
    let mut which = Vec::new();
    for (p, a) in params.iter().zip(&case.args) {
        values[p.slot as usize] = match a {
            A::Buf(d, off) => {
                which.push(buffers.len());
                buffers.push(d.to_buffer());
                ArgValue::Ptr { buffer: buffers.len() - 1, offset: *off as i64 }
            }
            A::I32(x) => ArgValue::Int(*x as i64),
            A::I64(x) => ArgValue::Int(*x),
            A::U32(x) => ArgValue::Int(*x as i64),
            A::U64(x) => ArgValue::Int(*x as i64),
            A::F32(x) => ArgValue::Float(*x as f64),
            A::F64(x) => ArgValue::Float(*x),
            A::Bool(x) => ArgValue::Int(*x as i64),
        };
    }
    interp::run_grid(&bir, case.grid, &values, &mut buffers).map_err(|e| e.to_string())?;
    let mut out = case.args.clone();
    let mut next = buffers.iter();
    for a in &mut out {
        if let A::Buf(d, _) = a {
            *d = Data::from_buffer(next.next().expect("one buffer per buffer argument"));
        }
    }
    Ok(out)
}

/// Compares the JIT's buffers with the interpreter's; panics with the first difference.
#[track_caller]
pub fn compare(case: &Case, run: &str, jit: &[A], reference: &[A]) {
    for (i, (j, r)) in jit.iter().zip(reference).enumerate() {
        let (A::Buf(j, _), A::Buf(r, _)) = (j, r) else {
            continue;
        };
        let check = case.check_of(i);
        let what = || format!("{} ({run}), argument {i} ({:?})", case.what(), j.dtype());
        assert_eq!(j.len(), r.len(), "{}: length", what());
        let float = j.dtype().is_float();
        match check {
            Check::Skip => {}
            Check::Multiset => {
                let mut a: Vec<u64> = (0..j.len()).map(|k| j.bits(k)).collect();
                let mut b: Vec<u64> = (0..r.len()).map(|k| r.bits(k)).collect();
                a.sort_unstable();
                b.sort_unstable();
                assert!(a == b, "{}: JIT and interpreter hold different multisets", what());
            }
            Check::Exact | Check::Default if !float => {
                for k in 0..j.len() {
                    assert!(
                        j.bits(k) == r.bits(k),
                        "{}[{k}]: JIT {} != interpreter {}",
                        what(),
                        j.get_f64(k),
                        r.get_f64(k)
                    );
                }
            }
            Check::Exact | Check::Default | Check::Close { .. } => {
                for k in 0..j.len() {
                    let (a, b) = (j.get_f64(k), r.get_f64(k));
                    if a.is_nan() && b.is_nan() {
                        continue;
                    }
                    let ok = match check {
                        Check::Exact => j.bits(k) == r.bits(k),
                        Check::Close { atol, rtol } => a == b || (a - b).abs() <= atol + rtol * b.abs(),
                        _ => a == b || (a - b).abs() <= 4.0 * j.float_ulp(b),
                    };
                    assert!(ok, "{}[{k}]: JIT {a:e} != interpreter {b:e} ({check:?})", what());
                }
            }
        }
    }
}

/// Runs `case` through the JIT (on the module's own pool, then on pools of 1 thread, with
/// bounds-checked code, and 4 threads) and through the interpreter, compares every buffer, and returns the buffers of
/// the first JIT run.
#[track_caller]
pub fn diff(module: &lnc::Module, case: &Case) -> Vec<A> {
    diff_with(module, case, run_jit)
}

/// [`diff`] for kernels the masked-lane lint warns about on purpose (the generated kernels
/// of the proptest reduce disabled lanes holding non-neutral values: the result is defined).
#[track_caller]
#[allow(dead_code)]
pub fn diff_unlinted(module: &lnc::Module, case: &Case) -> Vec<A> {
    diff_with(module, case, run_jit_unlinted)
}

#[track_caller]
fn diff_with(
    module: &lnc::Module,
    case: &Case,
    jit: fn(&lnc::Module, &Case) -> Result<Vec<A>, lnc::Error>,
) -> Vec<A> {
    if let Err(e) = module.kernel(&case.kernel, &case.sig) {
        panic!("{}: compilation: {e}", case.what());
    }
    let reference = run_interp(module, case).unwrap_or_else(|e| panic!("{}: interpreter: {e}", case.what()));
    let first = jit(module, case).unwrap_or_else(|e| panic!("{}: JIT: {e}", case.what()));
    compare(case, "JIT on the module's pool", &first, &reference);
    for (n, pool) in [1, 4].iter().zip(pools()) {
        let m = pool.module(module.file().name.clone(), module.file().text.clone()).expect("module parses");
        let out = jit(&m, case).unwrap_or_else(|e| panic!("{}: JIT on {n} threads: {e}", case.what()));
        compare(
            case,
            &format!("JIT on {n} threads{}", if *n == 1 { ", checked" } else { "" }),
            &out,
            &reference,
        );
    }
    first
}

/// Both the JIT and the interpreter must reject the launch (an out-of-bounds access, a
/// division by zero…); returns their messages.
#[track_caller]
pub fn diff_fails(module: &lnc::Module, case: &Case) -> (String, String) {
    let i = run_interp(module, case).err().unwrap_or_else(|| panic!("{}: the interpreter ran", case.what()));
    let j = run_jit(module, case).err().unwrap_or_else(|| panic!("{}: the JIT ran", case.what()));
    (j.to_string(), i)
}

/// The file of test kernels `tests/kernels/<name>`.
pub fn kernel_path(name: &str) -> String {
    format!("{}/kernels/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Loads `tests/kernels/<name>` into a module of a [`streaming_jit`].
pub fn load(name: &str) -> lnc::Module {
    streaming_jit().load(kernel_path(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// Poison for float outputs.
pub const NAN32: f32 = f32::NAN;
/// Poison for integer outputs.
pub const POISON_I32: i32 = -0x5eed_beef;
