//! Entities, types, instructions and functions of the loop IR.

use cranelift_entity::{PrimaryMap, SecondaryMap, entity_impl};
use lnc_diag::Span;

pub use lnc_bir::{AtomicOp, BinOp, CmpOp, Const, DType, ReduceOp, UnOp};

/// An SSA value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "i");

/// The type of a loop-IR value. There are no blocks any more: a value is one scalar, one
/// pointer, or one *tile* of `lanes` scalars processed together (a SIMD vector when the
/// lanes fill 128 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A scalar number.
    Scalar(DType),
    /// A pointer to elements of the dtype (an address; arithmetic in elements).
    Ptr(DType),
    /// `lanes` numbers of one dtype. `lanes` is a power of two.
    Tile(DType, u8),
}

impl Ty {
    /// The number dtype, or the pointee of a pointer.
    pub fn dtype(self) -> DType {
        match self {
            Ty::Scalar(d) | Ty::Ptr(d) | Ty::Tile(d, _) => d,
        }
    }

    /// Lanes of a tile, 1 for scalars and pointers.
    pub fn lanes(self) -> u8 {
        match self {
            Ty::Tile(_, l) => l,
            _ => 1,
        }
    }

    /// True for tiles.
    pub fn is_tile(self) -> bool {
        matches!(self, Ty::Tile(..))
    }
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Scalar(d) => write!(f, "{d}"),
            Ty::Ptr(d) => write!(f, "*{d}"),
            Ty::Tile(d, l) => write!(f, "{d}x{l}"),
        }
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The `n`-th result of an instruction.
    Result(Inst, u32),
    /// The `n`-th argument of region `r` of an instruction.
    RegionArg(Inst, u32, u32),
}

/// Per-value data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueData {
    /// Type.
    pub ty: Ty,
    /// Definition.
    pub def: ValueDef,
}

/// How a memory access addresses its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Addressing {
    /// One element at `base + offset` (scalar offset): a scalar access.
    Scalar,
    /// A tile of consecutive elements starting at `base + offset` (scalar offset):
    /// one vector access when every lane is enabled.
    Contiguous,
    /// A tile of elements at `base + offset[lane]` (tile offset): one access per lane.
    Gather,
}

/// What an instruction does. Operands are in [`InstData::args`], listed per variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// `() -> scalar or ptr`: the kernel argument in ABI slot `n`.
    Arg(u32),
    /// `() -> scalar`: a constant of the result's dtype.
    Const(Const),
    /// `() -> i32`.
    ProgramId(u8),
    /// `() -> i32`.
    NumPrograms(u8),
    /// `(scalar) -> tile`: every lane equals the scalar.
    Splat,
    /// `(start: i32 or i64 scalar) -> tile`: lane `k` is `start + k`.
    Iota,
    /// `(a, b) -> c`: same types (scalars or tiles).
    Binary(BinOp),
    /// `(a, b) -> i1 or i1 tile`.
    Cmp(CmpOp),
    /// `(a) -> b`.
    Unary(UnOp),
    /// `(cond, a, b) -> c`: lanewise for tiles (cond a tile of i1 or a scalar i1).
    Select,
    /// `(a, b, c) -> d`: fused multiply-add `a · b + c`, rounded once; floats of one type
    /// (scalars or tiles), `fp16`/`bf16` computed in `fp32` and rounded to their type.
    Fma,
    /// `(a) -> b`: numeric conversion to the result's dtype, lanewise.
    Cast,
    /// `(a) -> b`: same bits, another dtype of the same width.
    Bitcast,
    /// `(ptr, offset: int scalar) -> ptr`: offset counted in elements.
    PtrAdd,
    /// `(ptr, offset [, mask [, other]]) -> scalar or tile`. `offset` is a scalar for
    /// `Scalar`/`Contiguous` addressing and a tile for `Gather`. Masked-off lanes are
    /// never read and take `other` (zero when absent).
    Load {
        /// Addressing mode.
        addr: Addressing,
        /// A mask operand follows the offset.
        has_mask: bool,
        /// An `other` operand follows the mask.
        has_other: bool,
        /// Index into [`Function::sites`].
        site: u32,
        /// `volatile=True` (scalar addressing only): read from memory at this point on
        /// every execution, as an atomic load, so that a loop may wait on memory another
        /// program writes; a `while` loop doing it gives up when a program faults.
        volatile: bool,
    },
    /// `(ptr, offset, value [, mask] [, stream]) -> ()`.
    Store {
        /// Addressing mode.
        addr: Addressing,
        /// A mask operand follows the value.
        has_mask: bool,
        /// Index into [`Function::sites`].
        site: u32,
        /// A loop-invariant `i1` operand follows the mask (see [`Opcode::StreamOk`]): when
        /// it is true, the store may bypass the caches (a non-temporal store). What is
        /// stored, and where, does not change.
        stream: bool,
        /// Writes nothing: in bounds-checked code, checks that every enabled lane is
        /// inside its argument and faults as the store would; nothing in unchecked code.
        /// Left by lnc-tile's `defer` where it moved a store from. The value is dropped.
        check_only: bool,
    },
    /// `(ptr, count: i32 scalar) -> i1`: whether a loop storing `count` contiguous
    /// elements per program from `ptr` on should bypass the caches: `ptr` is 16-byte
    /// aligned and the launch as a whole stores at least the code generator's streaming
    /// threshold (`count` elements times the number of programs), so that the data could
    /// not stay in the cache anyway and reading each line before overwriting it (what a
    /// cached store costs) would only waste memory bandwidth.
    StreamOk,
    /// `(ptr) -> i32`: how many elements of the pointee's dtype lie between `ptr` and the
    /// next 64-byte boundary (a cache line; 0 when `ptr` is on one), or -1 when `ptr` is
    /// not aligned to its element size. Lets a loop stream only whole lines (module
    /// `stream` of lnc-tile).
    LineGap,
    /// `(ptr, offset, value [, mask]) -> old`: seq-cst read-modify-write per lane.
    Atomic {
        /// Kind.
        op: AtomicOp,
        /// Addressing mode.
        addr: Addressing,
        /// A mask operand follows the value.
        has_mask: bool,
        /// Index into [`Function::sites`].
        site: u32,
    },
    /// `(ptr, offset, cmp, value) -> old`: seq-cst compare-and-swap per lane.
    AtomicCas {
        /// Addressing mode.
        addr: Addressing,
        /// Index into [`Function::sites`].
        site: u32,
    },
    /// `(index: scalar) -> tile`: reads `lanes` consecutive elements of scratch buffer
    /// `slot` starting at element `index` (a scalar result reads the one element there).
    ScratchLoad(u32),
    /// `(index: scalar, value: tile) -> ()`: writes them (a scalar value writes one element).
    ScratchStore(u32),
    /// `(ptr, offset: int scalar, count: i32 scalar) -> ()`: reads the `count` elements
    /// at `ptr + offset` (a half dtype) into elements `[0, count)` of scratch buffer
    /// `slot` (of that dtype, held as `fp32`), converting a whole row in one call instead
    /// of tile by tile. Nothing is read when `count <= 0`.
    RowLoad {
        /// Scratch buffer written.
        slot: u32,
        /// Index into [`Function::sites`].
        site: u32,
        /// Once per launch and worker: the row is the same for every program (its
        /// operands do not depend on the program, and the kernel never writes the
        /// argument), so the `u32` flag at byte `4·k` of the scratch area (zero when a
        /// worker starts a launch, see `lnc_runtime::abi::ProgramCtx::scratch`) records
        /// that the buffer holds it already. The buffer must be written by nothing else.
        once: Option<u8>,
    },
    /// `(ptr, offset: int scalar, count: i32 scalar [, stream]) -> ()`: writes elements
    /// `[0, count)` of scratch buffer `slot` (of the pointee's half dtype or `fp32`) to the
    /// `count` elements at `ptr + offset`, rounded to the pointee's dtype (to nearest even).
    RowStore {
        /// Scratch buffer read.
        slot: u32,
        /// Index into [`Function::sites`].
        site: u32,
        /// An `i1` operand follows the count (see [`Opcode::StreamOk`]): when true, the
        /// helper writes whole 16-byte groups with non-temporal stores.
        stream: bool,
    },
    /// `(ptr, offset: int scalar) -> ()`: a hint that the program, or the worker's next
    /// one, will read the cache line holding element `ptr + offset` soon (module `prefetch`
    /// of lnc-tile), or with `write`, will write it (module `stream`): it asks for the line
    /// to be brought into the cache, for writing with `write`. It reads and writes nothing
    /// the program sees, never faults, whatever the address, and may be dropped.
    Prefetch {
        /// The line will be written: it is fetched for ownership.
        write: bool,
    },
    /// `(tile) -> scalar`: combines the lanes (pairwise, lane order fixed).
    ReduceLanes(ReduceOp),
    /// `(lb, ub, step, init...) -> carried...`: one region with arguments
    /// `(iv, carried...)`, ending in `yield next...`. Runs while `iv < ub` (`iv > ub` for a
    /// negative step).
    For,
    /// `(init...) -> carried...`: region 0 (arguments = carried) ends in
    /// `condition(flag, fwd...)`; region 1 (arguments = fwd) ends in `yield next...`.
    While,
    /// `(cond) -> results...`: regions then/else, each ending in `yield`.
    If,
    /// `(values...) -> ()`: region terminator.
    Yield,
    /// `(flag, values...) -> ()`: terminator of a while's condition region.
    Condition,
    /// `(cond) -> ()`: stops the launch when false.
    Assert {
        /// Index into [`Function::sites`].
        site: u32,
    },
    /// `(values...) -> ()`: prints the prefix string and the values.
    Print(u32),
}

/// An ordered list of instructions with arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Region {
    /// Arguments.
    pub args: Vec<Value>,
    /// Instructions in order.
    pub insts: Vec<Inst>,
}

/// Per-instruction data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstData {
    /// What it does.
    pub opcode: Opcode,
    /// Operands.
    pub args: Vec<Value>,
    /// Results.
    pub results: Vec<Value>,
    /// Nested regions.
    pub regions: Vec<Region>,
}

impl InstData {
    /// The `stream_ok` flag operand of a streaming store (not of a `row_store`, whose
    /// flag is an operand of its helper call, not a choice between loop copies).
    pub fn stream_flag(&self) -> Option<Value> {
        match self.opcode {
            Opcode::Store { stream: true, has_mask, .. } => self.args.get(3 + has_mask as usize).copied(),
            _ => None,
        }
    }
}

/// A memory access site of the source: where an out-of-bounds error points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Source span of the access.
    pub span: Span,
    /// ABI slot of the pointer argument the accessed pointer derives from; bounds are
    /// those of that argument's buffer.
    pub arg: u32,
}

/// Bytes at the start of a worker's scratch area that are zero when it starts a launch:
/// flags of `row_load.once`. A function using them places its buffers after them.
pub const SCRATCH_FLAG_BYTES: u32 = 64;

/// A per-program scratch buffer: a block that lives across loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scratch {
    /// Element type.
    pub dtype: DType,
    /// Number of elements.
    pub len: u32,
    /// Byte offset in the program's scratch area (64-byte aligned).
    pub offset: u32,
}

impl Scratch {
    /// Bytes one element takes in scratch: the dtype's size, except for `fp16` and
    /// `bf16`, which scratch holds in the form they are computed in, `fp32`, so that
    /// keeping a block across loops costs no conversions (scratch is private to the
    /// program: its layout is code generation's choice).
    pub fn elem_bytes(dtype: DType) -> u32 {
        match dtype {
            DType::F16 | DType::BF16 => 4,
            d => d.size(),
        }
    }

    /// The byte just past the buffer's end.
    pub fn end(&self) -> u32 {
        self.offset + self.len * Scratch::elem_bytes(self.dtype)
    }
}

/// A kernel argument as the ABI passes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgInfo {
    /// Source name.
    pub name: String,
    /// ABI slot.
    pub slot: u32,
    /// Scalar or pointer type.
    pub ty: Ty,
}

/// A kernel in loop IR.
#[derive(Clone, Debug, Default)]
pub struct Function {
    /// Kernel name.
    pub name: String,
    /// Runtime arguments.
    pub args: Vec<ArgInfo>,
    /// Values.
    pub values: PrimaryMap<Value, ValueData>,
    /// Instructions.
    pub insts: PrimaryMap<Inst, InstData>,
    /// Source span of each instruction.
    pub spans: SecondaryMap<Inst, Span>,
    /// Top-level region.
    pub body: Region,
    /// Memory access sites.
    pub sites: Vec<Site>,
    /// Scratch buffers.
    pub scratch: Vec<Scratch>,
    /// `device_print` prefixes.
    pub strings: Vec<String>,
}

impl Function {
    /// Total scratch bytes of the buffers. Code generation may need more after them (it
    /// rounds `fp16` tiles through scratch with F16C): allocate what the compiled kernel
    /// says (`lnc_clif::CompiledKernel::scratch_bytes`).
    pub fn scratch_bytes(&self) -> u32 {
        self.scratch.iter().map(Scratch::end).max().unwrap_or(0)
    }

    /// Type of a value.
    pub fn ty(&self, v: Value) -> Ty {
        self.values[v].ty
    }

    /// Creates a detached instruction with fresh results.
    pub fn create_inst(&mut self, opcode: Opcode, args: Vec<Value>, result_types: &[Ty], span: Span) -> Inst {
        let inst = self.insts.push(InstData { opcode, args, results: Vec::new(), regions: Vec::new() });
        let results = result_types
            .iter()
            .enumerate()
            .map(|(n, &ty)| self.values.push(ValueData { ty, def: ValueDef::Result(inst, n as u32) }))
            .collect();
        self.insts[inst].results = results;
        self.spans[inst] = span;
        inst
    }

    /// Creates a region argument.
    pub fn create_region_arg(&mut self, inst: Inst, region: u32, index: u32, ty: Ty) -> Value {
        self.values.push(ValueData { ty, def: ValueDef::RegionArg(inst, region, index) })
    }

    /// Visits every instruction reachable from the body, parents first.
    pub fn walk(&self, mut f: impl FnMut(Inst)) {
        fn go(func: &Function, region: &Region, f: &mut impl FnMut(Inst)) {
            for &i in &region.insts {
                f(i);
                for r in &func.insts[i].regions {
                    go(func, r, f);
                }
            }
        }
        go(self, &self.body, &mut f);
    }
}

impl Function {
    /// An empty function.
    pub fn new(name: impl Into<String>) -> Function {
        Function { name: name.into(), ..Function::default() }
    }

    /// Declares a runtime argument in ABI slot `slot`.
    pub fn add_arg(&mut self, name: impl Into<String>, slot: u32, ty: Ty) {
        self.args.push(ArgInfo { name: name.into(), slot, ty });
    }

    /// The argument in ABI slot `slot`.
    pub fn arg(&self, slot: u32) -> Option<&ArgInfo> {
        self.args.iter().find(|a| a.slot == slot)
    }

    /// Adds a memory access site and returns its index; an identical site is reused.
    pub fn add_site(&mut self, site: Site) -> u32 {
        if let Some(k) = self.sites.iter().position(|s| *s == site) {
            return k as u32;
        }
        self.sites.push(site);
        (self.sites.len() - 1) as u32
    }

    /// Adds a scratch buffer of `len` elements after the existing ones, at the next
    /// 64-byte boundary (a cache line, so buffers never share one), and returns its slot.
    pub fn add_scratch(&mut self, dtype: DType, len: u32) -> u32 {
        let offset = self.scratch_bytes().div_ceil(64) * 64;
        self.scratch.push(Scratch { dtype, len, offset });
        (self.scratch.len() - 1) as u32
    }

    /// Every instruction reachable from the body, parents first.
    pub fn live_insts(&self) -> Vec<Inst> {
        let mut out = Vec::new();
        self.walk(|i| out.push(i));
        out
    }
}

impl Opcode {
    /// True for instructions whose only effect is their results: removing an unused one
    /// changes nothing (a load is not pure: a checked launch reports its faults).
    pub fn is_pure(&self) -> bool {
        matches!(
            self,
            Opcode::Arg(_)
                | Opcode::Const(_)
                | Opcode::ProgramId(_)
                | Opcode::NumPrograms(_)
                | Opcode::Splat
                | Opcode::Iota
                | Opcode::Binary(_)
                | Opcode::Cmp(_)
                | Opcode::Unary(_)
                | Opcode::Select
                | Opcode::Fma
                | Opcode::Cast
                | Opcode::Bitcast
                | Opcode::PtrAdd
                | Opcode::ScratchLoad(_)
                | Opcode::ReduceLanes(_)
                | Opcode::StreamOk
                | Opcode::LineGap
        )
    }

    /// True for region terminators (`yield`, `condition`).
    pub fn is_terminator(&self) -> bool {
        matches!(self, Opcode::Yield | Opcode::Condition)
    }

    /// True for `for`, `while` and `if`, the instructions that own regions.
    pub fn is_control_flow(&self) -> bool {
        matches!(self, Opcode::For | Opcode::While | Opcode::If)
    }

    /// The site of a memory access or an assert.
    pub fn site(&self) -> Option<u32> {
        match *self {
            Opcode::Load { site, .. }
            | Opcode::Store { site, .. }
            | Opcode::Atomic { site, .. }
            | Opcode::AtomicCas { site, .. }
            | Opcode::RowLoad { site, .. }
            | Opcode::RowStore { site, .. }
            | Opcode::Assert { site } => Some(site),
            _ => None,
        }
    }

    /// The mnemonic that starts the instruction's text.
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Opcode::Arg(_) => "arg",
            Opcode::Const(_) => "const",
            Opcode::ProgramId(_) => "program_id",
            Opcode::NumPrograms(_) => "num_programs",
            Opcode::Splat => "splat",
            Opcode::Iota => "iota",
            Opcode::Binary(op) => op.name(),
            Opcode::Cmp(_) => "cmp",
            Opcode::Unary(op) => op.name(),
            Opcode::Select => "select",
            Opcode::Fma => "fma",
            Opcode::Cast => "cast",
            Opcode::Bitcast => "bitcast",
            Opcode::PtrAdd => "ptr_add",
            Opcode::Load { .. } => "load",
            Opcode::Store { .. } => "store",
            Opcode::Atomic { .. } => "atomic",
            Opcode::AtomicCas { .. } => "atomic_cas",
            Opcode::ScratchLoad(_) => "scratch_load",
            Opcode::ScratchStore(_) => "scratch_store",
            Opcode::RowLoad { .. } => "row_load",
            Opcode::RowStore { .. } => "row_store",
            Opcode::StreamOk => "stream_ok",
            Opcode::LineGap => "line_gap",
            Opcode::Prefetch { .. } => "prefetch",
            Opcode::ReduceLanes(_) => "reduce_lanes",
            Opcode::For => "for",
            Opcode::While => "while",
            Opcode::If => "if",
            Opcode::Yield => "yield",
            Opcode::Condition => "condition",
            Opcode::Assert { .. } => "assert",
            Opcode::Print(_) => "print",
        }
    }
}

impl Addressing {
    /// Suffix in the text form (`load.contig`).
    pub fn name(self) -> &'static str {
        match self {
            Addressing::Scalar => "scalar",
            Addressing::Contiguous => "contig",
            Addressing::Gather => "gather",
        }
    }
}
