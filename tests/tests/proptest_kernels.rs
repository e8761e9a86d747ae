//! Random well-typed kernels, run by the JIT and by the block-IR interpreter through the
//! differential harness (`common::diff`): every output buffer must come out the same.
//!
//! A kernel is built from a string of decision bytes (the shrinkable part of a case) and an
//! input seed: 1-D blocks (`BLOCK` 1..64) or 2-D blocks (`[BR, BC]`, the contiguous axis
//! last, columns tiled over a second grid axis or not), offsets `pid * BLOCK + arange`, masks
//! `offs < N` with `N` a runtime size that is not a multiple of the block, masked loads with
//! and without `other=`, float buffers stored as fp32, fp16 or bf16 (loaded with
//! `.to(tl.float32)`, stored rounded), expression trees of depth at most 4 over fp32 and i32 values
//! (arithmetic, `tl.maximum`/`minimum`, `tl.where` on comparisons and masks, math functions,
//! casts, bit operations, integer division), `tl.sum`/`max`/`min` along either axis (with
//! `keep_dims`, masked with the neutral element or not), reduced values broadcast back with
//! `[:, None]`/`[None, :]`, loops carrying an accumulator (with a load inside), `if`/`else`
//! on scalars, and load and store masks narrowed by a condition on the data. When the
//! decision bytes run out every choice is the simplest one, so shrinking removes code.
//!
//! Every operation in lnc is deterministic given its operands (the JIT and the
//! interpreter compute the same functions: `lnc_bir::math` for `exp` and `log` of `f32`,
//! libm for the other transcendental ones), except the order a float sum reduces in. The generator therefore tracks, for every value, whether it is exact
//! (bit-for-bit reproducible) or an approximation downstream of a float `tl.sum`, with a
//! bound on its magnitude and its error. Exact outputs are compared bit for bit (NaN equal
//! to NaN); an approximate value only flows through continuous operations (safe forms of
//! `/`, `log`, `sqrt`, `exp` on clamped bounded operands) and is compared within its error
//! bound; comparisons, casts to integers and other discontinuous operations only see exact
//! values. Exact values may overflow, divide by zero or take the log of a negative number:
//! inf and NaN are part of what is compared.
//!
//! Some kernels reduce disabled lanes that hold non-neutral values on purpose, which the
//! masked-lane lint warns about and the harness's `run_jit` refuses; those are compared by
//! `diff_unlinted`, the same comparison without the lint check. The differences this test
//! found are fixed; each minimized case runs as a regression test at the end.
//!
//! CI runs a fixed number of cases from a fixed seed so that a run is reproducible and its
//! duration bounded; `PROPTEST_CASES=<n>` runs more and `PROPTEST_RNG_SEED=<n>` explores
//! other kernels. Failures are not persisted to files: a counterexample worth keeping
//! becomes a regular test calling `replay` with its bytes and seed (printed on failure).

mod common;

use std::fmt;
use std::fmt::Write as _;

use common::diff::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use rand::{Rng, SeedableRng};

/// Cases per CI run: the test binary takes about 20 s of CPU in a debug build (the compiler
/// crates unoptimized, dependencies at opt-level 2), 26 s of wall time on a loaded 2-core
/// machine; 2000 cases take about 100 s.
const CI_CASES: u32 = 512;

/// The fixed seed of CI runs. A random seed would make CI nondeterministic (a red run that
/// cannot be reproduced from its log alone); `PROPTEST_RNG_SEED` overrides it.
const CI_SEED: u64 = 0x1c0d_e5ee_d0f1_7e57;

/// The test configuration; the `PROPTEST_*` environment variables override it.
fn config() -> Config {
    Config {
        cases: CI_CASES,
        rng_seed: RngSeed::Fixed(CI_SEED),
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

/// Unit roundoff of fp32.
const U: f64 = 1.0 / 16_777_216.0;
/// The largest magnitude an approximate value (or an operand of a float sum) may have.
const BIG: f64 = 1e12;
/// The clamp applied to operands that are larger or unbounded.
const CLAMP: f64 = 1e3;
/// The largest trip count of a runtime loop.
const MAX_TRIPS: i32 = 3;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dt {
    F32,
    I32,
}

impl Dt {
    fn tl(self) -> &'static str {
        match self {
            Dt::F32 => "tl.float32",
            Dt::I32 => "tl.int32",
        }
    }

    fn ptr(self) -> &'static str {
        match self {
            Dt::F32 => "*fp32",
            Dt::I32 => "*i32",
        }
    }
}

/// Shapes: a scalar, a 1-D block `[BLOCK]` (1-D kernels), or in 2-D kernels `[1, BC]`,
/// `[BR, 1]` and `[BR, BC]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sh {
    S,
    V,
    Row,
    Col,
    Full,
}

/// The shape of `a op b`.
fn join(a: Sh, b: Sh) -> Sh {
    match (a, b) {
        (Sh::S, x) | (x, Sh::S) => x,
        (x, y) if x == y => x,
        _ => Sh::Full,
    }
}

/// Whether a value of shape `s` may take part in an expression of shape `max`.
fn fits(s: Sh, max: Sh) -> bool {
    s == Sh::S || s == max || max == Sh::Full
}

/// A generated expression with what is known about its value.
#[derive(Clone, Debug)]
struct Node {
    text: String,
    dt: Dt,
    sh: Sh,
    /// A Python literal (no `.to()`, not alone under a function).
    literal: bool,
    /// A Python number: an expression of literals only, which Python folds to a number
    /// (`.to()` on it is rejected; the generator writes none). A name assigned a number is
    /// a tensor, as in Triton (`finding_an_assigned_number_is_a_tensor`, fixed).
    py: bool,
    /// Reproducible bit for bit.
    exact: bool,
    /// Bound on the magnitude of its non-NaN values (infinite: may be inf).
    mag: f64,
    /// Bound on the difference between two implementations (0 when exact).
    err: f64,
}

impl Node {
    fn new(text: impl Into<String>, dt: Dt, sh: Sh, mag: f64) -> Node {
        Node { text: text.into(), dt, sh, literal: false, py: false, exact: true, mag, err: 0.0 }
    }

    fn lit(text: &str, dt: Dt, mag: f64) -> Node {
        Node { literal: true, ..Node::new(text, dt, Sh::S, mag) }
    }
}

/// A condition (an `int1` value) and its shape.
#[derive(Clone, Debug)]
struct Cond {
    text: String,
    sh: Sh,
}

/// One kernel parameter.
struct Param {
    name: String,
    sig: String,
    arg: A,
}

/// A generated kernel and its launch: the value proptest shrinks and prints.
#[derive(Clone)]
struct Kernel {
    bytes: Vec<u8>,
    seed: u64,
    source: String,
    sig: String,
    grid: [u32; 3],
    names: Vec<String>,
    args: Vec<A>,
    checks: Vec<(usize, Check)>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "replay(&{:?}, {:#x})", self.bytes, self.seed)?;
        writeln!(f, "signature {}, grid {:?}", self.sig, self.grid)?;
        writeln!(f, "{}", self.source)?;
        for (i, (name, a)) in self.names.iter().zip(&self.args).enumerate() {
            let check = self.checks.iter().find(|c| c.0 == i).map(|c| format!(" [{:?}]", c.1));
            writeln!(f, "  {name} = {a:?}{}", check.unwrap_or_default())?;
        }
        Ok(())
    }
}

impl Kernel {
    fn case(&self) -> Case {
        let mut case = Case::new("kernel", &self.sig, self.grid, self.args.clone());
        for &(i, c) in &self.checks {
            case = case.check(i, c);
        }
        case
    }

    /// The kernel compiled with streaming stores everywhere, and with `fp16` tiles widened
    /// by F16C (where the host has it) for even seeds, by integer code for odd ones.
    fn module(&self) -> lnc::Module {
        let opts = lnc::CompileOptions {
            stream_threshold: 0,
            f16c: self.seed.is_multiple_of(2),
            ..Default::default()
        };
        lnc::Jit::with_options(opts)
            .module("generated.py", self.source.clone())
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Builds a kernel from decision bytes (0 when they run out: the simplest choice).
struct Gen<'a> {
    bytes: &'a [u8],
    pos: usize,
    rng: rand::rngs::StdRng,
    two_d: bool,
    /// `(BLOCK,)` or `(BR, BC)`.
    full_shape: String,
    /// Values available as leaves.
    env: Vec<Node>,
    /// Conditions available as leaves.
    conds: Vec<Cond>,
    ins: Vec<Param>,
    outs: Vec<Param>,
    checks: Vec<(usize, Check)>,
    body: String,
    fresh: usize,
    /// Extent of a full block in elements (N, or M * N) and of the row/column vectors.
    len: usize,
    m: usize,
    n: usize,
    programs: usize,
    grid1: usize,
    /// Reduction lengths: 1-D `BLOCK`; 2-D along axis 0 `BR`, along axis 1 `BC`.
    br: usize,
    bc: usize,
    trips: Option<i32>,
    /// Full-block input buffers: (pointer name, dtype, magnitude).
    full_inputs: Vec<(String, Dt, f64)>,
    /// How float buffers are stored: `fp32`, or `fp16`/`bf16` (loaded with
    /// `.to(tl.float32)`, stores rounding), which takes the tiler's row conversions.
    storage: Storage,
    /// The buffers stored in a half dtype.
    half_ptrs: Vec<String>,
}

/// The storage dtype of the float buffers of a kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Storage {
    F32,
    F16,
    BF16,
}

impl Storage {
    fn ptr(self) -> &'static str {
        match self {
            Storage::F32 => "*fp32",
            Storage::F16 => "*fp16",
            Storage::BF16 => "*bf16",
        }
    }

    /// Unit roundoff of the dtype.
    fn u(self) -> f64 {
        match self {
            Storage::F32 => U,
            Storage::F16 => 1.0 / 2048.0,
            Storage::BF16 => 1.0 / 256.0,
        }
    }

    /// `n` values rounded to the dtype.
    fn data(self, v: &[f32]) -> A {
        match self {
            Storage::F32 => A::from(v.to_vec()),
            Storage::F16 => A::from(v.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>()),
            Storage::BF16 => A::from(v.iter().map(|&x| half::bf16::from_f32(x)).collect::<Vec<_>>()),
        }
    }
}

impl Gen<'_> {
    fn pick(&mut self, n: usize) -> usize {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b as usize % n.max(1)
    }

    /// One of several weighted choices; the first is taken when the bytes run out.
    fn choose(&mut self, weights: &[usize]) -> usize {
        let total: usize = weights.iter().sum();
        let mut x = self.pick(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        unreachable!()
    }

    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh - 1)
    }

    fn line(&mut self, indent: usize, s: &str) {
        let _ = writeln!(self.body, "{:indent$}{s}", "");
    }

    fn full(&self) -> Sh {
        if self.two_d { Sh::Full } else { Sh::V }
    }

    fn f32_data(&mut self, n: usize) -> (Vec<f32>, f64) {
        const SPECIAL: [f32; 8] = [0.0, -0.0, 1.0, -1.0, 0.5, 4.0, -3.0, 2.5];
        let v = (0..n)
            .map(|_| {
                if self.rng.random_range(0..8) == 0 {
                    SPECIAL[self.rng.random_range(0..SPECIAL.len())]
                } else {
                    self.rng.random_range(-4.0f32..4.0)
                }
            })
            .collect();
        (v, 4.0)
    }

    fn i32_data(&mut self, n: usize) -> (Vec<i32>, f64) {
        const SPECIAL: [i32; 7] = [0, 1, -1, 7, -8, i32::MIN, i32::MAX];
        let v = (0..n)
            .map(|_| {
                if self.rng.random_range(0..8) == 0 {
                    SPECIAL[self.rng.random_range(0..SPECIAL.len())]
                } else {
                    self.rng.random_range(-1000..1000)
                }
            })
            .collect();
        (v, 2f64.powi(31))
    }

    /// A buffer parameter holding `n` random elements.
    fn input(&mut self, prefix: &str, dt: Dt, n: usize) -> (String, f64) {
        let name = format!("{prefix}{}", self.ins.len());
        let (arg, mag) = match dt {
            Dt::F32 => {
                let (v, m) = self.f32_data(n);
                (self.storage.data(&v), m)
            }
            Dt::I32 => {
                let (v, m) = self.i32_data(n);
                (A::from(v), m)
            }
        };
        let sig = if dt == Dt::F32 { self.storage.ptr() } else { dt.ptr() };
        if sig != dt.ptr() {
            self.half_ptrs.push(name.clone());
        }
        self.ins.push(Param { name: name.clone(), sig: sig.into(), arg });
        (name, mag)
    }

    /// `tl.load(args)` through pointer `p`, widened to fp32 when `p` holds a half dtype.
    fn load(&self, p: &str, args: &str) -> String {
        let widen = if self.half_ptrs.iter().any(|h| h == p) { ".to(tl.float32)" } else { "" };
        format!("tl.load({args}){widen}")
    }

    /// An output buffer of `n` poisoned elements, compared as the value's exactness says.
    fn output(&mut self, v: &Node, n: usize) -> String {
        let name = format!("Out{}", self.outs.len());
        let (arg, sig) = match v.dt {
            Dt::F32 => (self.storage.data(&vec![f32::NAN; n]), self.storage.ptr()),
            Dt::I32 => (A::from(vec![POISON_I32; n]), v.dt.ptr()),
        };
        // Rounding to the stored dtype moves two values `err` apart at most one unit in
        // its last place further apart.
        let rtol = if v.dt == Dt::F32 { 1e-6f64.max(2.0 * self.storage.u()) } else { 1e-6 };
        let check = if v.exact { Check::Exact } else { Check::Close { atol: 2.0 * v.err, rtol } };
        self.checks.push((self.outs.len(), check));
        self.outs.push(Param { name: name.clone(), sig: sig.into(), arg });
        name
    }

    /// `other=` of a masked load: (text, magnitude).
    fn other(&mut self, dt: Dt) -> (&'static str, f64) {
        match dt {
            Dt::F32 => [
                ("", 0.0),
                (", other=0.0", 0.0),
                (", other=1.5", 1.5),
                (", other=-2.0", 2.0),
                (", other=float(\"-inf\")", f64::INFINITY),
                (", other=float(\"inf\")", f64::INFINITY),
            ][self.choose(&[4, 3, 3, 3, 1, 1])],
            Dt::I32 => [("", 0.0), (", other=0", 0.0), (", other=-1", 1.0), (", other=7", 7.0)][self.pick(4)],
        }
    }

    // ---- expressions ----

    fn constant(&mut self, dt: Dt) -> Node {
        match dt {
            Dt::F32 => {
                const C: [(&str, f64); 8] = [
                    ("1.0", 1.0),
                    ("0.5", 0.5),
                    ("(-2.0)", 2.0),
                    ("3.0", 3.0),
                    ("0.0", 0.0),
                    ("1e-3", 1e-3),
                    ("(-0.25)", 0.25),
                    ("100.0", 100.0),
                ];
                let (t, m) = C[self.pick(C.len())];
                Node::lit(t, dt, m)
            }
            Dt::I32 => {
                const C: [(&str, f64); 6] =
                    [("1", 1.0), ("3", 3.0), ("(-7)", 7.0), ("0", 0.0), ("100", 100.0), ("65536", 65536.0)];
                let (t, m) = C[self.pick(C.len())];
                Node::lit(t, dt, m)
            }
        }
    }

    /// A variable or (unless `var_only`) a literal of type `dt` fitting `max`.
    fn leaf(&mut self, dt: Dt, max: Sh, exact_only: bool, var_only: bool) -> Node {
        let vars: Vec<Node> = self
            .env
            .iter()
            .filter(|n| n.dt == dt && fits(n.sh, max) && (n.exact || !exact_only) && !n.literal)
            .filter(|n| !(var_only && n.py))
            .cloned()
            .collect();
        let k = self.pick(vars.len() + if var_only || vars.is_empty() { 0 } else { 1 }).min(vars.len());
        match vars.get(k) {
            Some(v) => v.clone(),
            None if var_only || vars.is_empty() => {
                // Every kernel has `pid` (i32); a float variable is made from it.
                let pid = self.env.iter().find(|n| n.dt == Dt::I32 && n.sh == Sh::S).cloned().expect("pid");
                if dt == Dt::F32 { cast(&pid, Dt::F32) } else { pid }
            }
            None => self.constant(dt),
        }
    }

    /// An expression of type `dt` whose shape fits `max`.
    fn expr(&mut self, depth: u32, dt: Dt, max: Sh, exact_only: bool) -> Node {
        if depth == 0 {
            return self.leaf(dt, max, exact_only, false);
        }
        let d = depth - 1;
        match dt {
            Dt::F32 => match self.choose(&[3, 6, 2, 3, 2, 2, 1, 1]) {
                0 => self.leaf(dt, max, exact_only, false),
                1 => {
                    let op = ["+", "-", "*", "/", "max", "min", "%"][self.choose(&[3, 3, 3, 2, 1, 1, 1])];
                    let a = self.expr(d, dt, max, exact_only);
                    let b = self.expr(d, dt, max, exact_only);
                    self.binary(op, a, b, max)
                }
                2 => {
                    let f = [
                        "neg", "abs", "exp", "log", "sqrt", "rsqrt", "exp2", "log2", "sin", "cos", "sigmoid",
                        "floor", "ceil",
                    ][self.pick(13)];
                    let mut a = self.expr(d, dt, max, exact_only);
                    if a.literal {
                        a = self.leaf(dt, max, exact_only, true);
                    }
                    self.unary(f, a)
                }
                3 => {
                    let c = self.cond(d, max);
                    let a = self.expr(d, dt, max, exact_only);
                    let b = self.expr(d, dt, max, exact_only);
                    where_(c, a, b)
                }
                4 => {
                    let mut a = self.expr(d, Dt::I32, max, true);
                    if a.literal || a.py {
                        a = self.leaf(Dt::I32, max, true, true);
                    }
                    cast(&a, Dt::F32)
                }
                5 => {
                    // Mixed int/float arithmetic (the int operand is promoted), and true
                    // division of integers.
                    let op = ["+", "-", "*", "/"][self.pick(4)];
                    let a = self.expr(d, Dt::I32, max, true);
                    let b = if op == "/" && self.pick(2) == 0 {
                        self.expr(d, Dt::I32, max, true)
                    } else {
                        self.expr(d, dt, max, exact_only)
                    };
                    let (a, b) = if self.pick(2) == 0 { (a, b) } else { (b, a) };
                    self.binary(op, a, b, max)
                }
                6 => {
                    // A clamp, as Triton code writes it.
                    let a = self.expr(d, dt, max, exact_only);
                    let lo = self.constant(dt);
                    let hi = self.constant(dt);
                    let inner = self.binary("max", a, lo, max);
                    self.binary("min", inner, hi, max)
                }
                _ => {
                    let a = self.expr(d, dt, max, exact_only);
                    let b = self.expr(d, dt, max, exact_only);
                    self.binary("fdiv", a, b, max)
                }
            },
            Dt::I32 => match self.choose(&[3, 6, 2, 2, 2, 2]) {
                0 => self.leaf(dt, max, true, false),
                1 => {
                    let op =
                        ["+", "-", "*", "max", "min", "&", "|", "^"][self.choose(&[3, 3, 2, 1, 1, 1, 1, 1])];
                    let a = self.expr(d, dt, max, true);
                    let b = self.expr(d, dt, max, true);
                    self.binary(op, a, b, max)
                }
                2 => {
                    // Division and remainder by `(b & 7) + 1`, shifts by `b & 31`.
                    let op = ["//", "%", "<<", ">>"][self.pick(4)];
                    let a = self.expr(d, dt, max, true);
                    let b = self.expr(d, dt, max, true);
                    self.binary(op, a, b, max)
                }
                3 => {
                    let f = ["neg", "abs"][self.pick(2)];
                    let mut a = self.expr(d, dt, max, true);
                    if a.literal {
                        a = self.leaf(dt, max, true, true);
                    }
                    self.unary(f, a)
                }
                4 => {
                    let c = self.cond(d, max);
                    let a = self.expr(d, dt, max, true);
                    let b = self.expr(d, dt, max, true);
                    where_(c, a, b)
                }
                _ => {
                    let mut a = self.expr(d, Dt::F32, max, true);
                    if a.literal || a.py {
                        a = self.leaf(Dt::F32, max, true, true);
                    }
                    cast(&a, Dt::I32)
                }
            },
        }
    }

    /// A condition whose shape fits `max`, on exact values only.
    fn cond(&mut self, depth: u32, max: Sh) -> Cond {
        let masks: Vec<Cond> = self.conds.iter().filter(|c| fits(c.sh, max)).cloned().collect();
        let choice = self.choose(&[4, if masks.is_empty() { 0 } else { 2 }, if depth > 0 { 2 } else { 0 }]);
        match choice {
            0 => {
                let op = ["<", "<=", ">", ">=", "==", "!="][self.pick(6)];
                let d = depth.saturating_sub(1);
                let (da, db) =
                    [(Dt::F32, Dt::F32), (Dt::I32, Dt::I32), (Dt::I32, Dt::F32)][self.choose(&[3, 2, 1])];
                let a = self.leaf_or_expr(d, da, max);
                let mut b = self.leaf_or_expr(d, db, max);
                if a.literal && b.literal {
                    b = self.leaf(db, max, true, true);
                }
                Cond { text: format!("({} {op} {})", a.text, b.text), sh: join(a.sh, b.sh) }
            }
            1 => masks[self.pick(masks.len())].clone(),
            _ => {
                let a = self.cond(depth - 1, max);
                let b = self.cond(depth - 1, max);
                let op = ["&", "|"][self.pick(2)];
                Cond { text: format!("({} {op} {})", a.text, b.text), sh: join(a.sh, b.sh) }
            }
        }
    }

    fn leaf_or_expr(&mut self, depth: u32, dt: Dt, max: Sh) -> Node {
        if depth == 0 { self.leaf(dt, max, true, false) } else { self.expr(depth.min(2), dt, max, true) }
    }

    /// `a op b`; integer division, remainder and shifts take safe right operands.
    fn binary(&mut self, op: &str, mut a: Node, mut b: Node, max: Sh) -> Node {
        if a.literal && b.literal {
            b = self.leaf(b.dt, max, true, true);
        }
        let dt =
            if a.dt == Dt::F32 || b.dt == Dt::F32 || op == "/" || op == "fdiv" { Dt::F32 } else { Dt::I32 };
        let sh = join(a.sh, b.sh);
        let literal = false;
        let py = (a.py || a.literal) && (b.py || b.literal);
        if dt == Dt::I32 {
            let two31 = 2f64.powi(31);
            let (text, mag) = match op {
                "+" | "-" => (format!("({} {op} {})", a.text, b.text), a.mag + b.mag),
                "*" => (format!("({} * {})", a.text, b.text), a.mag * b.mag),
                "max" | "min" => (format!("tl.{op}imum({}, {})", a.text, b.text), a.mag.max(b.mag)),
                "&" | "|" | "^" => (format!("({} {op} {})", a.text, b.text), two31),
                "//" => (format!("({} // (({} & 7) + 1))", a.text, b.text), a.mag),
                "%" => (format!("({} % (({} & 7) + 1))", a.text, b.text), 8.0),
                "<<" | ">>" => (format!("({} {op} ({} & 31))", a.text, b.text), two31),
                _ => unreachable!("{op}"),
            };
            return Node { text, dt, sh, literal, py, exact: true, mag: mag.min(two31), err: 0.0 };
        }
        let exact = a.exact && b.exact;
        if !exact {
            // Approximate values only meet bounded operands in continuous operations.
            for x in [&mut a, &mut b] {
                if x.mag > BIG || (op == "*" && x.mag > CLAMP) {
                    *x = clamp(x, CLAMP);
                }
            }
        }
        let (ea, eb, ma, mb) = (a.err, b.err, a.mag, b.mag);
        let (text, mag, err) = match op {
            "+" | "-" => (format!("({} {op} {})", a.text, b.text), ma + mb, ea + eb),
            // A factor that is always 0 makes every non-NaN product 0, even with an
            // infinite other factor (`0.0 * x` of a load with `other=float("-inf")`), whose
            // 0 * inf would otherwise turn the bounds into NaN, which no check passes.
            "*" => {
                let mag = if ma == 0.0 || mb == 0.0 { 0.0 } else { ma * mb };
                (format!("({} * {})", a.text, b.text), mag, ea * mb + eb * ma + ea * eb)
            }
            "max" | "min" => (format!("tl.{op}imum({}, {})", a.text, b.text), ma.max(mb), ea.max(eb)),
            "/" | "fdiv" if exact && self.pick(3) != 0 => {
                let t = if op == "/" {
                    format!("({} / {})", a.text, b.text)
                } else {
                    format!("tl.fdiv({}, {})", a.text, b.text)
                };
                (t, f64::INFINITY, 0.0)
            }
            "/" | "fdiv" => {
                let c = [1.0, 0.5, 2.0][self.pick(3)];
                let t = format!("({} / (tl.abs({}) + {c:?}))", a.text, b.text);
                (t, ma / c, (ea + eb * ma / c) / c + U * (mb + c) * ma / c)
            }
            "%" if exact => (format!("({} % {})", a.text, b.text), ma, 0.0),
            "%" => (format!("({} + {})", a.text, b.text), ma + mb, ea + eb),
            _ => unreachable!("{op}"),
        };
        let err = if exact { 0.0 } else { err + U * mag };
        Node { text, dt, sh, literal, py, exact, mag, err }
    }

    fn unary(&mut self, f: &str, mut a: Node) -> Node {
        if a.dt == Dt::I32 {
            let text = match f {
                "neg" => format!("(-{})", a.text),
                _ => format!("tl.abs({})", a.text),
            };
            return Node { text, ..a };
        }
        let exact = a.exact;
        if !exact && a.mag > BIG {
            a = clamp(&a, CLAMP);
        }
        let (t, ma, ea) = (a.text.clone(), a.mag, a.err);
        // Exact operands: the function itself, sometimes in its safe form anyway.
        let raw = exact && self.pick(3) != 0;
        let inner = U * (ma + 1.0);
        let (text, mag, err) = match f {
            "neg" => (format!("(-{t})"), ma, ea),
            "abs" => (format!("tl.abs({t})"), ma, ea),
            "exp" | "exp2" if raw => (format!("tl.{f}({t})"), f64::INFINITY, 0.0),
            "exp" => {
                let m = ma.min(8.0).exp();
                (format!("tl.exp(tl.minimum({t}, 8.0))"), m, m * ea.exp_m1() + 2.0 * U * m)
            }
            "exp2" => {
                let m = ma.min(8.0).exp2();
                (format!("tl.exp2(tl.minimum({t}, 8.0))"), m, m * (ea * 2f64.ln()).exp_m1() + 2.0 * U * m)
            }
            "log" | "log2" | "sqrt" | "rsqrt" if raw => (format!("tl.{f}({t})"), f64::INFINITY, 0.0),
            "log" => (
                (format!("tl.log(tl.abs({t}) + 1.0)")),
                (ma + 1.0).ln(),
                ea + inner + 2.0 * U * (ma + 1.0).ln(),
            ),
            "log2" => {
                let m = (ma + 1.0).log2();
                (format!("tl.log2(tl.abs({t}) + 1.0)"), m, (ea + inner) / 2f64.ln() + 2.0 * U * m)
            }
            "sqrt" => {
                let m = (ma + 1.0).sqrt();
                (format!("tl.sqrt(tl.abs({t}) + 1.0)"), m, (ea + inner) / 2.0 + U * m)
            }
            "rsqrt" => (format!("tl.rsqrt(tl.abs({t}) + 1.0)"), 1.0, (ea + inner) / 2.0 + 2.0 * U),
            "sin" | "cos" => (format!("tl.{f}({t})"), 1.0, ea + 2.0 * U),
            "sigmoid" => (format!("tl.sigmoid({t})"), 1.0, ea / 4.0 + 4.0 * U),
            "floor" | "ceil" if exact => (format!("tl.{f}({t})"), ma + 1.0, 0.0),
            "floor" | "ceil" => (format!("tl.abs({t})"), ma, ea),
            _ => unreachable!("{f}"),
        };
        Node { text, mag, err: if exact { 0.0 } else { err }, literal: false, ..a }
    }

    /// Makes a value the full block shape.
    fn broadcast_full(&mut self, v: Node) -> Node {
        if v.sh == self.full() {
            return v;
        }
        let text = if !v.literal && self.pick(2) == 1 {
            format!("tl.broadcast_to({}, {})", v.text, self.full_shape)
        } else {
            format!("({} + tl.zeros({}, dtype={}))", v.text, self.full_shape, v.dt.tl())
        };
        Node { text, sh: self.full(), literal: false, ..v }
    }

    // ---- statements ----

    /// `t = expr`, stored when it has the full shape.
    fn let_step(&mut self) {
        let dt = [Dt::F32, Dt::I32][self.choose(&[3, 1])];
        let full = self.full();
        let sh = if self.two_d {
            [Sh::Full, Sh::Row, Sh::Col, Sh::S][self.choose(&[5, 1, 1, 1])]
        } else {
            [Sh::V, Sh::S][self.choose(&[5, 1])]
        };
        let mut v = self.expr(4, dt, sh, false);
        if sh == full {
            v = self.broadcast_full(v);
        } else if v.literal {
            return;
        }
        let name = self.name("t");
        self.line(4, &format!("{name} = {}", v.text));
        let var = Node { text: name.clone(), ..v };
        if var.sh == full {
            let out = self.output(&var, self.len);
            let mask = self.mask();
            self.line(4, &format!("tl.store({out} + offs, {name}, mask={mask})"));
        }
        self.env.push(var);
    }

    /// The block mask, sometimes narrowed by a condition on the data (lanes a mask not of
    /// the form `offs < N` disables: stores leave them poisoned, loads give `other`).
    fn mask(&mut self) -> String {
        if self.pick(4) == 3 {
            let c = self.cond(2, self.full());
            format!("mask & {}", c.text)
        } else {
            "mask".into()
        }
    }

    /// `if`/`else` on a scalar condition, each branch assigning the same variable.
    fn if_step(&mut self) {
        let dt = [Dt::F32, Dt::I32][self.choose(&[3, 1])];
        let full = self.full();
        let c = self.cond(2, Sh::S);
        let a = self.expr(3, dt, full, false);
        let a = self.broadcast_full(a);
        let b = self.expr(3, dt, full, false);
        let b = self.broadcast_full(b);
        let name = self.name("b");
        self.line(4, &format!("if {}:", c.text));
        self.line(8, &format!("{name} = {}", a.text));
        self.line(4, "else:");
        self.line(8, &format!("{name} = {}", b.text));
        let var = Node { text: name.clone(), ..where_(c, a, b) };
        let out = self.output(&var, self.len);
        self.line(4, &format!("tl.store({out} + offs, {name}, mask=mask)"));
        self.env.push(var);
    }

    /// A load of an input again, under a mask that depends on the data.
    fn load_step(&mut self) {
        let k = self.pick(self.full_inputs.len());
        let (p, dt, mag) = self.full_inputs[k].clone();
        let mask = self.mask();
        let (other, om) = self.other(dt);
        let name = self.name("l");
        let load = self.load(&p, &format!("{p} + offs, mask={mask}{other}"));
        self.line(4, &format!("{name} = {load}"));
        self.env.push(Node::new(name, dt, self.full(), mag.max(om)));
    }

    /// A reduction `op(where(mask, e, neutral))` of a full block along an axis of `n`
    /// elements: the reduced value.
    fn reduced(&mut self, op: &str, e: Node, n: usize, masked: bool, axis: usize, keep: bool) -> Node {
        let dt = e.dt;
        let mut e = e;
        if op == "sum" && dt == Dt::F32 && e.mag > BIG {
            e = clamp(&e, CLAMP);
        }
        let neutral = match (op, dt) {
            ("sum", Dt::F32) => "0.0",
            ("sum", Dt::I32) => "0",
            ("max", Dt::F32) => "float(\"-inf\")",
            ("min", Dt::F32) => "float(\"inf\")",
            // (-2147483648 would be an int64 literal.)
            ("max", Dt::I32) => "-2147483647",
            _ => "2147483647",
        };
        let operand = if masked { format!("tl.where(mask, {}, {neutral})", e.text) } else { e.text.clone() };
        let keep = if keep { ", keep_dims=True" } else { "" };
        let text = format!("tl.{op}({operand}, axis={axis}{keep})");
        let nf = n as f64;
        let (mag, exact, err) = match (op, dt) {
            ("sum", Dt::I32) => (2f64.powi(31), true, 0.0),
            ("sum", _) => {
                let mag = nf * e.mag;
                // Two elements add in one rounding whatever the order, so a sum of at most two
                // lanes is exact (zero signs included since disabled lanes holding +0.0 count,
                // `masked_positive_zeros_take_part_in_a_sum`); longer float sums are
                // approximate: compared numerically, kept out of discontinuous operations.
                let exact = n <= 2 && e.exact;
                (mag, exact, nf * e.err + (nf - 1.0).max(1.0) * U * mag)
            }
            _ if masked => (f64::INFINITY, e.exact, e.err),
            _ => (e.mag, e.exact, e.err),
        };
        Node {
            text,
            dt,
            sh: Sh::S,
            literal: false,
            py: false,
            exact,
            mag,
            err: if exact { 0.0 } else { err },
        }
    }

    fn reduce_step(&mut self) {
        let op = ["sum", "max", "min"][self.choose(&[2, 1, 1])];
        let dt = [Dt::F32, Dt::I32][self.choose(&[3, 1])];
        let full = self.full();
        let e = self.expr(3, dt, full, false);
        let e = self.broadcast_full(e);
        let masked = self.pick(3) != 0;
        let name = self.name("r");
        if !self.two_d {
            let r = self.reduced(op, e, self.br, masked, 0, false);
            self.line(4, &format!("{name} = {}", r.text));
            let var = Node { text: name.clone(), ..r };
            let out = self.output(&var, self.programs);
            self.line(4, &format!("tl.store({out} + pid, {name})"));
            self.env.push(var);
            return;
        }
        match self.choose(&[2, 2, 1]) {
            form @ (0 | 1) => {
                // Along the columns (axis 1: one value per row) or the rows (axis 0).
                let axis = 1 - form;
                let keep = self.pick(3) == 2;
                let n = if axis == 1 { self.bc } else { self.br };
                let r = self.reduced(op, e, n, masked, axis, keep);
                self.line(4, &format!("{name} = {}", r.text));
                let (sh, text) = match (axis, keep) {
                    (1, true) => (Sh::Col, name.clone()),
                    (1, false) => (Sh::Col, format!("{name}[:, None]")),
                    (_, true) => (Sh::Row, name.clone()),
                    _ => (Sh::Row, format!("{name}[None, :]")),
                };
                let var = Node { text, sh, ..r };
                let (store, size) = if axis == 1 {
                    let idx = if keep { ("rows[:, None]", "rmask[:, None]") } else { ("rows", "rmask") };
                    (format!("pid1 * M + {}, {name}, mask={}", idx.0, idx.1), self.grid1 * self.m)
                } else {
                    let idx = if keep { ("cols[None, :]", "cmask[None, :]") } else { ("cols", "cmask") };
                    (
                        format!("pid0 * N + {}, {name}, mask={}", idx.0, idx.1),
                        self.programs / self.grid1 * self.n,
                    )
                };
                let out = self.output(&var, size);
                self.line(4, &format!("tl.store({out} + {store})"));
                self.env.push(var);
            }
            _ => {
                // Both axes: one scalar per program.
                let inner = ["sum", "max", "min"][self.pick(3)];
                let axis = self.pick(2);
                let n = if axis == 1 { self.bc } else { self.br };
                let r1 = self.reduced(inner, e, n, masked, axis, false);
                let r1 = Node { sh: Sh::V, ..r1 };
                let r = self.reduced(op, r1, self.br + self.bc - n, false, 0, false);
                self.line(4, &format!("{name} = {}", r.text));
                let var = Node { text: name.clone(), ..r };
                let out = self.output(&var, self.programs);
                self.line(4, &format!("tl.store({out} + pid0 * tl.num_programs(1) + pid1, {name})"));
                self.env.push(var);
            }
        }
    }

    /// An accumulator carried through a loop.
    fn loop_step(&mut self) {
        let dt = [Dt::F32, Dt::I32][self.choose(&[3, 1])];
        let full = self.full();
        let sh = if self.pick(4) == 3 { Sh::S } else { full };
        let (form, trips, k_const) = match self.choose(&[3, 1, 1, 1]) {
            0 => ("range(0, K)", MAX_TRIPS, false),
            1 => ("range(K)", MAX_TRIPS, false),
            2 => ("tl.range(0, K)", MAX_TRIPS, false),
            _ => ("tl.static_range(0, 3)", 3, true),
        };
        if !k_const && self.trips.is_none() {
            self.trips = Some(self.pick(MAX_TRIPS as usize + 1) as i32);
        }
        let acc = self.name("acc");
        let k = self.name("k");
        let (zero, two) = if dt == Dt::F32 { ("0.0", "2.0") } else { ("0", "2") };
        let (init, init_mag) = match (sh == Sh::S, self.pick(2)) {
            (true, 0) => (zero.to_string(), 0.0),
            (true, _) => (two.to_string(), 2.0),
            (false, 0) => (format!("tl.zeros({}, dtype={})", self.full_shape, dt.tl()), 0.0),
            (false, _) => (format!("tl.full({}, 2, {})", self.full_shape, dt.tl()), 2.0),
        };
        self.line(4, &format!("{acc} = {init}"));
        self.line(4, &format!("for {k} in {form}:"));
        let saved = self.env.len();
        let kn = Node { literal: k_const, ..Node::new(k.clone(), Dt::I32, Sh::S, 3.0) };
        self.env.push(kn);
        if sh != Sh::S && self.pick(2) == 1 {
            // A load that depends on the iteration.
            let (xk, mag) = self.input("XK", dt, MAX_TRIPS as usize * self.len);
            let (other, om) = self.other(dt);
            let stride = if self.two_d { "M * N" } else { "N" };
            let xl = self.name("xl");
            let load = self.load(&xk, &format!("{xk} + {k} * {stride} + offs, mask=mask{other}"));
            self.line(8, &format!("{xl} = {load}"));
            self.env.push(Node::new(xl, dt, full, mag.max(om)));
        }
        let e = self.expr(3, dt, sh, false);
        let e = if sh != Sh::S && e.sh != sh { self.broadcast_full(e) } else { e };
        self.env.truncate(saved);
        let update = if dt == Dt::F32 { self.pick(3) } else { self.pick(2) };
        let t = trips as f64;
        let (line, mut mag, err) = match update {
            0 => (
                format!("{acc} += {}", e.text),
                init_mag + t * e.mag,
                t * e.err + t * U * (init_mag + t * e.mag),
            ),
            1 => (format!("{acc} = tl.maximum({acc}, {})", e.text), init_mag.max(e.mag), e.err),
            _ => (
                format!("{acc} = {acc} * 0.5 + {}", e.text),
                init_mag + 2.0 * e.mag,
                2.0 * e.err + 4.0 * U * e.mag,
            ),
        };
        if dt == Dt::I32 {
            mag = mag.min(2f64.powi(31));
        }
        self.line(8, &line);
        // A scalar accumulator starts as an assigned number: a tensor, `.to()` allowed.
        let var = Node {
            text: acc.clone(),
            dt,
            sh,
            literal: false,
            py: false,
            exact: e.exact,
            mag,
            err: if e.exact { 0.0 } else { err },
        };
        if sh == Sh::S {
            let out = self.output(&var, self.programs);
            let idx = if self.two_d { "pid0 * tl.num_programs(1) + pid1" } else { "pid" };
            self.line(4, &format!("tl.store({out} + {idx}, {acc})"));
        } else {
            let out = self.output(&var, self.len);
            let mask = self.mask();
            self.line(4, &format!("tl.store({out} + offs, {acc}, mask={mask})"));
        }
        self.env.push(var);
    }
}

fn cast(a: &Node, to: Dt) -> Node {
    let text = format!("{}.to({})", paren(&a.text), to.tl());
    let mag = match to {
        Dt::F32 => a.mag.min(2f64.powi(31)),
        Dt::I32 => a.mag.min(2f64.powi(31)),
    };
    Node { text, dt: to, literal: false, mag, ..a.clone() }
}

/// `x` as an operand of `.to()`: names, calls and parenthesized expressions as they are.
fn paren(x: &str) -> String {
    if x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || x.starts_with('(') && x.ends_with(')') {
        x.to_string()
    } else {
        format!("({x})")
    }
}

fn clamp(x: &Node, c: f64) -> Node {
    Node {
        text: format!("tl.minimum(tl.maximum({}, {:?}), {c:?})", x.text, -c),
        mag: x.mag.min(c),
        literal: false,
        ..x.clone()
    }
}

fn where_(c: Cond, a: Node, b: Node) -> Node {
    let dt = if a.dt == Dt::F32 || b.dt == Dt::F32 { Dt::F32 } else { Dt::I32 };
    Node {
        text: format!("tl.where({}, {}, {})", c.text, a.text, b.text),
        dt,
        sh: join(c.sh, join(a.sh, b.sh)),
        literal: false,
        py: false,
        exact: a.exact && b.exact,
        mag: a.mag.max(b.mag),
        err: a.err.max(b.err),
    }
}

fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

/// A size in `1..=limit` that is not a multiple of `block` (when `block > 1`).
fn size(g: &mut Gen, block: usize, limit: usize) -> usize {
    let mut n = 1 + (g.pick(256) * 256 + g.pick(256)) % limit;
    if block > 1 && n.is_multiple_of(block) {
        n -= 1;
    }
    n
}

/// The kernel the decision bytes describe, with inputs drawn from `seed`.
fn build(bytes: &[u8], seed: u64) -> Kernel {
    let mut g = Gen {
        bytes,
        pos: 0,
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        two_d: false,
        full_shape: String::new(),
        env: Vec::new(),
        conds: Vec::new(),
        ins: Vec::new(),
        outs: Vec::new(),
        checks: Vec::new(),
        body: String::new(),
        fresh: 0,
        len: 0,
        m: 1,
        n: 0,
        programs: 0,
        grid1: 1,
        br: 1,
        bc: 1,
        trips: None,
        full_inputs: Vec::new(),
        storage: Storage::F32,
        half_ptrs: Vec::new(),
    };
    // From the seed, not the decision bytes (shrinking keeps the storage), in a stream of
    // its own (the data of a seed stays what it was before storage was chosen).
    let pick = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5701_a6e5).random_range(0..4);
    g.storage = [Storage::F32, Storage::F32, Storage::F16, Storage::BF16][pick];
    g.two_d = g.pick(2) == 1;
    let extra = usize::from(g.pick(4) == 3);
    let mut constexprs = Vec::new();
    let grid;
    if !g.two_d {
        let block = 1 << g.pick(7);
        let n = size(&mut g, block, 3 * block);
        g.n = n;
        g.len = n;
        g.br = block;
        g.programs = cdiv(n, block) + extra;
        grid = [g.programs as u32, 1, 1];
        g.full_shape = "(BLOCK,)".into();
        constexprs.push(("BLOCK", block));
        g.line(4, "pid = tl.program_id(0)");
        g.line(4, "offs = pid * BLOCK + tl.arange(0, BLOCK)");
        g.line(4, "mask = offs < N");
        g.env.push(Node::new("pid", Dt::I32, Sh::S, g.programs as f64));
        g.env.push(Node::new("offs", Dt::I32, Sh::V, (g.programs * block) as f64));
        g.conds.push(Cond { text: "mask".into(), sh: Sh::V });
    } else {
        let (br, bc) = (1 << g.pick(5), 1 << g.pick(6));
        let tiled = g.pick(2) == 1;
        let m = size(&mut g, br, 3 * br);
        let n = if tiled { size(&mut g, bc, 3 * bc) } else { size(&mut g, bc, bc.max(2) - 1) };
        (g.m, g.n, g.len, g.br, g.bc) = (m, n, m * n, br, bc);
        g.grid1 = if tiled { cdiv(n, bc) } else { 1 };
        let grid0 = cdiv(m, br) + extra;
        g.programs = grid0 * g.grid1;
        grid = [grid0 as u32, g.grid1 as u32, 1];
        g.full_shape = "(BR, BC)".into();
        constexprs.push(("BR", br));
        constexprs.push(("BC", bc));
        g.line(4, "pid0 = tl.program_id(0)");
        g.line(4, "pid1 = tl.program_id(1)");
        g.line(4, "rows = pid0 * BR + tl.arange(0, BR)");
        g.line(4, if tiled { "cols = pid1 * BC + tl.arange(0, BC)" } else { "cols = tl.arange(0, BC)" });
        g.line(4, "rmask = rows < M");
        g.line(4, "cmask = cols < N");
        g.line(4, "mask = rmask[:, None] & cmask[None, :]");
        g.line(4, "offs = rows[:, None] * N + cols[None, :]");
        g.env.push(Node::new("pid0", Dt::I32, Sh::S, grid0 as f64));
        g.env.push(Node::new("rows[:, None]", Dt::I32, Sh::Col, (grid0 * br) as f64));
        g.env.push(Node::new("cols[None, :]", Dt::I32, Sh::Row, (g.grid1 * bc) as f64));
        for (text, sh) in [("mask", Sh::Full), ("rmask[:, None]", Sh::Col), ("cmask[None, :]", Sh::Row)] {
            g.conds.push(Cond { text: text.into(), sh });
        }
    }
    // Inputs: full blocks of floats and integers; in 2-D also a row and a column vector.
    let full = g.full();
    let (nf, ni) = (1 + g.pick(3), g.pick(3));
    for (count, dt, prefix) in [(nf, Dt::F32, "X"), (ni, Dt::I32, "I")] {
        for _ in 0..count {
            let (p, mag) = g.input(prefix, dt, g.len);
            g.full_inputs.push((p.clone(), dt, mag));
            let (other, om) = g.other(dt);
            let v = p.to_lowercase();
            let load = g.load(&p, &format!("{p} + offs, mask=mask{other}"));
            g.line(4, &format!("{v} = {load}"));
            g.env.push(Node::new(v, dt, full, mag.max(om)));
        }
    }
    if g.two_d {
        if g.pick(2) == 1 {
            let (p, mag) = g.input("W", Dt::F32, g.n);
            let (other, om) = g.other(Dt::F32);
            let v = p.to_lowercase();
            let load = g.load(&p, &format!("{p} + cols, mask=cmask{other}"));
            g.line(4, &format!("{v} = {load}"));
            g.env.push(Node::new(format!("{v}[None, :]"), Dt::F32, Sh::Row, mag.max(om)));
        }
        if g.pick(2) == 1 {
            let dt = [Dt::F32, Dt::I32][g.pick(2)];
            let (p, mag) = g.input("C", dt, g.m);
            let (other, om) = g.other(dt);
            let v = p.to_lowercase();
            let load = g.load(&p, &format!("{p} + rows, mask=rmask{other}"));
            g.line(4, &format!("{v} = {load}"));
            g.env.push(Node::new(format!("{v}[:, None]"), dt, Sh::Col, mag.max(om)));
        }
    }
    // One scalar per program, loaded.
    if g.pick(3) == 2 {
        let (p, mag) = g.input("S", Dt::F32, g.programs);
        let idx = if g.two_d { "pid0 * tl.num_programs(1) + pid1" } else { "pid" };
        let v = p.to_lowercase();
        let load = g.load(&p, &format!("{p} + {idx}"));
        g.line(4, &format!("{v} = {load}"));
        g.env.push(Node::new(v, Dt::F32, Sh::S, mag));
    }
    // Scalar parameters.
    let mut scalars: Vec<Param> = Vec::new();
    if g.pick(2) == 1 {
        let x = g.rng.random_range(-4.0f32..4.0);
        scalars.push(Param { name: "alpha".into(), sig: "fp32".into(), arg: x.into() });
        g.env.push(Node::new("alpha", Dt::F32, Sh::S, 4.0));
    }
    if g.pick(2) == 1 {
        let x = g.rng.random_range(-100..100);
        scalars.push(Param { name: "beta".into(), sig: "i32".into(), arg: x.into() });
        g.env.push(Node::new("beta", Dt::I32, Sh::S, 100.0));
    }
    // Statements.
    let steps = 1 + g.pick(5);
    let mut loops = 0;
    for _ in 0..steps {
        match g.choose(&[4, 3, 1, 1, if loops < 2 { 2 } else { 0 }]) {
            0 => g.let_step(),
            1 => g.reduce_step(),
            2 => g.load_step(),
            3 => g.if_step(),
            _ => {
                loops += 1;
                g.loop_step();
            }
        }
    }
    if g.outs.is_empty() {
        let v = g.leaf(Dt::F32, full, false, true);
        let v = g.broadcast_full(v);
        let out = g.output(&v, g.len);
        g.line(4, &format!("tl.store({out} + offs, {}, mask=mask)", v.text));
    }
    // Parameters: inputs, outputs, scalars, sizes, constexprs.
    if g.two_d {
        scalars.push(Param { name: "M".into(), sig: "i32".into(), arg: (g.m as i32).into() });
    }
    scalars.push(Param { name: "N".into(), sig: "i32".into(), arg: (g.n as i32).into() });
    if let Some(k) = g.trips {
        scalars.push(Param { name: "K".into(), sig: "i32".into(), arg: k.into() });
    }
    let checks: Vec<(usize, Check)> = g.checks.iter().map(|&(i, c)| (i + g.ins.len(), c)).collect();
    let params: Vec<Param> = g.ins.drain(..).chain(g.outs.drain(..)).chain(scalars).collect();
    let mut names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
    let mut sig: Vec<String> = params.iter().map(|p| p.sig.clone()).collect();
    sig.extend(constexprs.iter().map(|c| c.1.to_string()));
    names.extend(constexprs.iter().map(|c| format!("{}: tl.constexpr", c.0)));
    let source = format!(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef kernel({}):\n{}",
        names.join(", "),
        g.body
    );
    names.truncate(params.len());
    Kernel {
        bytes: bytes.to_vec(),
        seed,
        source,
        sig: sig.join(","),
        grid,
        names,
        args: params.into_iter().map(|p| p.arg).collect(),
        checks,
    }
}

/// The strategy: decision bytes and an input seed.
fn kernels() -> impl Strategy<Value = Kernel> {
    (prop::collection::vec(any::<u8>(), 0..128), any::<u64>()).prop_map(|(bytes, seed)| build(&bytes, seed))
}

/// Runs `f`, turning a panic into a test failure that names the kernel.
fn catch(k: &Kernel, f: impl FnOnce()) -> Result<(), TestCaseError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{msg}\n{k:?}"))
    })
}

/// The property: the JIT (on several pools) and the interpreter agree on the kernel.
fn agree(k: &Kernel) -> Result<(), TestCaseError> {
    catch(k, || {
        let module = k.module();
        let case = k.case();
        let kernel = module.kernel(&case.kernel, &case.sig).unwrap_or_else(|e| panic!("compilation: {e}"));
        if kernel.warnings().is_empty() {
            diff(&module, &case);
        } else {
            diff_unlinted(&module, &case);
        }
    })
}

/// Replays one case (the `replay(...)` line a failure prints).
#[allow(dead_code)]
fn replay(bytes: &[u8], seed: u64) {
    let k = build(bytes, seed);
    if let Err(e) = agree(&k) {
        panic!("{e}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_kernels_agree_with_the_interpreter(k in kernels()) {
        agree(&k)?;
    }
}

/// The same property against a reference with one element changed must fail, and shrink to
/// a small kernel: the property sees differences, and a failure prints the kernel.
#[test]
fn the_property_sees_a_wrong_reference() {
    let config = Config { cases: 8, max_shrink_iters: 256, ..config() };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&kernels(), |k| {
        catch(&k, || {
            let module = k.module();
            let case = k.case();
            let jit = run_jit_unlinted(&module, &case).unwrap_or_else(|e| panic!("JIT: {e}"));
            let mut reference = run_interp(&module, &case).unwrap_or_else(|e| panic!("interpreter: {e}"));
            // The first element of the last output (NaN, written or left poisoned, becomes 1).
            let last = k.checks.last().expect("an output").0;
            if let A::Buf(d, _) = &mut reference[last] {
                match d {
                    Data::F32(v) => v[0] = if v[0].is_nan() || v[0] == 0.0 { 1.0 } else { -2.0 * v[0] },
                    Data::I32(v) => v[0] ^= 1,
                    other => panic!("output of {:?}", other.dtype()),
                }
            }
            compare(&case, "tampered", &jit, &reference);
        })
    });
    match result {
        Err(TestError::Fail(reason, k)) => {
            let reason = reason.to_string();
            assert!(reason.contains("@triton.jit") && reason.contains("replay("), "{reason}");
            // Shrinking left the simplest kernel: one stored value.
            assert!(k.bytes.len() <= 8, "not shrunk:\n{k:?}");
            assert!(k.source.lines().count() <= 12, "not shrunk:\n{k:?}");
        }
        other => panic!("a wrong reference went unnoticed: {other:?}"),
    }
}

/// The generator produces every construct it claims to (without compiling them).
#[test]
fn the_generator_covers_the_language() {
    let mut runner = TestRunner::new(Config { rng_seed: RngSeed::Fixed(CI_SEED), ..Config::default() });
    let strategy = kernels();
    let mut text = String::new();
    let (mut two_d, mut tiled, mut approx) = (0, 0, 0);
    let (mut f16, mut bf16, mut rows) = (0, 0, [0, 0]);
    let (mut fp32, mut streams) = (0, 0);
    // The rows pass converts fp16 loads whole only when tiles do not widen them by F16C.
    let jit = lnc::Jit::with_options(lnc::CompileOptions { f16c: false, ..Default::default() });
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], ..Default::default() };
    for _ in 0..400 {
        let k = strategy.new_tree(&mut runner).expect("a kernel").current();
        two_d += usize::from(k.source.contains("BR: tl.constexpr"));
        tiled += usize::from(k.source.contains("cols = pid1 * BC"));
        approx += usize::from(k.checks.iter().any(|c| matches!(c.1, Check::Close { .. })));
        f16 += usize::from(k.sig.contains("*fp16"));
        bf16 += usize::from(k.sig.contains("*bf16"));
        if k.sig.contains("*fp16") {
            // Half kernels take the whole-row conversions of the tiler.
            let module = jit.module("kernel.py", &k.source).expect("a generated kernel parses");
            let lir =
                module.dump("kernel", &k.sig, &req).expect("a generated kernel compiles").remove(0).text;
            rows[0] += usize::from(lir.contains("row_load"));
            rows[1] += usize::from(lir.contains("row_store"));
        } else if !k.sig.contains("*bf16") && fp32 < 100 {
            // Float stores in unrolled loops stream (behind `stream_ok`).
            fp32 += 1;
            let module = jit.module("kernel.py", &k.source).expect("a generated kernel parses");
            let lir =
                module.dump("kernel", &k.sig, &req).expect("a generated kernel compiles").remove(0).text;
            streams += usize::from(lir.contains(" stream %"));
        }
        text.push_str(&k.source);
    }
    assert!(two_d > 100 && tiled > 30 && approx > 30, "2-D {two_d}, tiled {tiled}, approximate {approx}");
    assert!(f16 > 60 && bf16 > 60 && rows[0] > 30 && rows[1] > 30, "fp16 {f16}, bf16 {bf16}, rows {rows:?}");
    assert!(streams >= 5, "{streams} of {fp32} fp32 kernels stream");
    for construct in [
        "tl.sum(",
        "tl.max(",
        "tl.min(",
        "axis=0",
        "axis=1",
        "keep_dims=True",
        "[:, None]",
        "[None, :]",
        "tl.where(mask",
        "mask=mask & (",
        "tl.where((",
        "other=",
        "other=float(",
        "tl.maximum(",
        "tl.minimum(",
        "tl.exp(",
        "tl.log(",
        "tl.sqrt(",
        "tl.abs(",
        "tl.sigmoid(",
        "tl.floor(",
        ".to(tl.int32)",
        ".to(tl.float32)",
        " // ",
        " % ",
        " << ",
        " >> ",
        " / ",
        "for k",
        "in range(K)",
        "tl.static_range",
        "    if (",
        "    else:",
        "tl.broadcast_to(",
        "tl.full(",
        "tl.num_programs(1)",
        "alpha",
        "beta",
    ] {
        assert!(text.contains(construct), "no generated kernel has `{construct}`");
    }
}

/// Found by this test (minimized): a float sum of `-0.0` lanes is `-0.0`, in the JIT as in
/// the interpreter's pairwise tree (the JIT's accumulators once started at `+0.0`).
#[test]
fn sum_of_negative_zeros() {
    // Every lane enabled (with disabled lanes holding +0.0, see the test below).
    let src = "@triton.jit\ndef k(X, Out, N, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    \
               x = tl.load(X + offs, mask=offs < N)\n    tl.store(Out, tl.sum(x, axis=0))\n";
    let m = lnc::Jit::new().module("negative_zeros.py", src).unwrap();
    for (block, n) in [(1, 1), (4, 4), (16, 16)] {
        let x = vec![-0.0f32; n as usize];
        let case = Case::new(
            "k",
            &format!("*fp32,*fp32,i32,{block}"),
            1,
            vec![x.into(), vec![f32::NAN].into(), n.into()],
        )
        .check(1, Check::Exact);
        diff(&m, &case);
    }
}

/// Found by this test (minimized), fixed in tiling (`bounds.rs`): disabled lanes that hold
/// +0.0 (the `other` of a masked load, or `tl.where(mask, x, 0.0)`) take part in the sum in
/// the interpreter (and in Triton), so a zero sum is +0.0 unless every lane is -0.0; the
/// JIT skipped them as if neutral, and its accumulators start at -0.0, so its sum was -0.0.
#[test]
fn masked_positive_zeros_take_part_in_a_sum() {
    let src = "@triton.jit\ndef k(X, Out, N, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    \
               x = tl.load(X + offs, mask=offs < N)\n    tl.store(Out, tl.sum(x, axis=0))\n";
    let m = lnc::Jit::new().module("masked_zeros.py", src).unwrap();
    // One -0.0 and a disabled lane: -0.0 + 0.0 = +0.0; no enabled lane: 0.0 + 0.0 = +0.0.
    for (block, n, x) in [(2, 1, -0.0f32), (2, 0, 1.0), (16, 5, -0.0)] {
        let x = vec![x; n.max(1) as usize];
        let case = Case::new(
            "k",
            &format!("*fp32,*fp32,i32,{block}"),
            1,
            vec![x.into(), vec![f32::NAN].into(), n.into()],
        )
        .check(1, Check::Exact);
        let out = diff(&m, &case);
        assert_eq!(out[1].data().bits(0), 0, "BLOCK={block} N={n}: +0.0");
    }
}

/// Found by the generator (a compile error, minimized), fixed in the front end: Triton's
/// `visit_Assign` makes a tensor of every number assigned to a name (only
/// `x: tl.constexpr = ...` stays a constant), so `a = 2.0; a.to(...)` compiles and
/// `a = -7; a // 2` is int32 division (truncating: -3).
#[test]
fn finding_an_assigned_number_is_a_tensor() {
    let src = "@triton.jit\ndef k(Out):\n    a = 2.0\n    b = -7\n    \
               tl.store(Out, a.to(tl.int32) + b // 2 + b % 2 * 10)\n";
    let m = lnc::Jit::new().module("assigned_number.py", src).unwrap();
    let case = Case::new("k", "*i32", 1, vec![vec![POISON_I32].into()]);
    let out = diff(&m, &case);
    // 2 + (-3) + (-1) * 10, as int32 tensors compute it.
    assert_eq!(out[0], A::from(vec![-11i32]));
}

/// Found by this test (seed 1125202615, minimized), fixed in the generator: `0.0 * x0` of a
/// load with `other=float("-inf")` had the bound 0 · inf = NaN, so the output it reached was
/// checked with a NaN tolerance, which only bit-equal values pass, and the JIT's sum of 8
/// lanes, in another order than the interpreter's, was 2e-7 off. The bounds are finite now.
#[test]
fn finding_a_zero_product_of_an_infinite_bound_is_bounded() {
    let k = build(
        &[
            6, 0, 31, 3, 80, 4, 191, 73, 0, 0, 0, 27, 61, 56, 2, 4, 132, 4, 83, 37, 23, 230, 103, 37, 70, 51,
            216, 0, 0, 23, 95, 4, 218, 149, 72, 51, 0, 164, 75, 214, 104, 54, 0, 108, 4, 90, 24, 1, 0, 22, 0,
            0, 209, 0, 96, 0, 156, 71, 15, 8, 51, 5, 154, 15, 55, 0, 0, 0, 0, 60, 9, 44, 0, 29, 0, 104, 43,
            0, 103, 68, 18, 0, 0, 0, 43, 152, 108, 249, 143, 70, 83, 25, 40, 125, 0, 163, 62, 125, 84, 203,
        ],
        0xd2377a7ee32b60e0,
    );
    assert!(k.source.contains("(0.0 * x0)") && k.source.contains("other=float(\"-inf\")"), "{}", k.source);
    for (out, check) in &k.checks {
        if let Check::Close { atol, .. } = check {
            assert!(atol.is_finite(), "output {out}: atol {atol}");
        }
    }
    agree(&k).unwrap_or_else(|e| panic!("{e}"));
}
