//! Entities, instructions and functions of the block IR.

use cranelift_entity::{PrimaryMap, SecondaryMap, entity_impl};
use lnc_diag::Span;

use crate::types::{DType, Type};

/// An SSA value: an instruction result, a region argument or a function parameter.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "i");

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The `n`-th function parameter.
    Param(u32),
    /// The `n`-th result of an instruction.
    Result(Inst, u32),
    /// The `n`-th argument of a region of an instruction (loop induction variable and
    /// carried values).
    RegionArg(Inst, u32, u32),
}

/// Per-value data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueData {
    /// The value's type.
    pub ty: Type,
    /// Its definition.
    pub def: ValueDef,
}

/// A constant scalar, stored wide; its dtype comes from the result type.
///
/// Constants are equal when they are the same bits: `0.0` and `-0.0` differ (they compute
/// differently: `1 / x`, the sign of a zero sum), and a NaN equals itself. Equality and
/// hashing agree, so constants can key hash maps (value numbering, constant pools); with
/// `f64`'s `==`, the two zeros would be merged whenever their hashes met in one bucket.
#[derive(Clone, Copy, Debug)]
pub enum Const {
    /// An integer (also `int1` as 0/1), sign- or zero-extended to 64 bits by its dtype.
    Int(i64),
    /// A float, held as `f64`; for narrower dtypes it is already rounded to that dtype.
    Float(f64),
}

impl PartialEq for Const {
    fn eq(&self, other: &Const) -> bool {
        match (self, other) {
            (Const::Int(a), Const::Int(b)) => a == b,
            (Const::Float(a), Const::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Const {}

impl std::hash::Hash for Const {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Const::Int(i) => (0u8, *i).hash(state),
            Const::Float(f) => (1u8, f.to_bits()).hash(state),
        }
    }
}

/// Binary elementwise operators. Operands and result share one type unless noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` on floats.
    Div,
    /// Integer `//`: truncates toward zero (C, as compiled Triton does); floats: floor of the quotient.
    IDiv,
    /// `%`: integers take the dividend's sign (C); floats: `fmod`.
    Rem,
    /// Bitwise and (also logical on `int1`).
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
    /// Shift left.
    Shl,
    /// Shift right: arithmetic for signed, logical for unsigned.
    Shr,
    /// `tl.minimum` (floats: NaN-propagating like Triton's default).
    Min,
    /// `tl.maximum`.
    Max,
    /// `**` on floats (`pow`).
    Pow,
}

/// Comparison predicates; the result element type is `int1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// Whether `a op b` holds (IEEE comparisons for floats: false with a NaN, but `!=`).
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// Unary elementwise operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Arithmetic negation.
    Neg,
    /// Bitwise not (`~`; logical not on `int1`).
    Not,
    /// `tl.sqrt`.
    Sqrt,
    /// `tl.rsqrt`.
    Rsqrt,
    /// `tl.exp`.
    Exp,
    /// `tl.exp2`.
    Exp2,
    /// `tl.log`.
    Log,
    /// `tl.log2`.
    Log2,
    /// `tl.abs`.
    Abs,
    /// `tl.sin`.
    Sin,
    /// `tl.cos`.
    Cos,
    /// `tl.floor`.
    Floor,
    /// `tl.ceil`.
    Ceil,
}

/// Reduction kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `tl.sum`.
    Sum,
    /// `tl.max`.
    Max,
    /// `tl.min`.
    Min,
}

/// Atomic read-modify-write kinds (`atomic_cas` is [`Opcode::AtomicCas`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `atomic_add`.
    Add,
    /// `atomic_max`.
    Max,
    /// `atomic_min`.
    Min,
    /// `atomic_and`.
    And,
    /// `atomic_or`.
    Or,
    /// `atomic_xor`.
    Xor,
    /// `atomic_xchg`.
    Xchg,
}

/// What an instruction does. Operands are in [`InstData::args`]; the comment of each
/// variant lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// `() -> scalar`: a constant of the result's dtype.
    Const(Const),
    /// `() -> i32`: `tl.program_id(axis)`.
    ProgramId(u8),
    /// `() -> i32`: `tl.num_programs(axis)`.
    NumPrograms(u8),
    /// `() -> <n x i32>`: `start, start+1, …, end-1`.
    Arange {
        /// First value.
        start: i64,
        /// One past the last value.
        end: i64,
    },
    /// `(scalar) -> block`: every element equals the scalar.
    Splat,
    /// `(block) -> block`: size-1 axes of the operand repeated to the result's shape
    /// (operand and result have the same rank).
    Broadcast,
    /// `(block) -> block`: a size-1 axis inserted at `axis`.
    ExpandDims(u8),
    /// `(a, b) -> c`: elementwise, same shapes.
    Binary(BinOp),
    /// `(a, b) -> int1`: elementwise comparison, same shapes and element types.
    Cmp(CmpOp),
    /// `(a) -> b`: elementwise.
    Unary(UnOp),
    /// `(cond, a, b) -> c`: elementwise `cond ? a : b`.
    Select,
    /// `(a, b, c) -> d`: elementwise fused multiply-add `a · b + c`, rounded once (floats
    /// of one type; `fp16`/`bf16` computed in `fp32`, then rounded to their type).
    Fma,
    /// `(a) -> b`: elementwise numeric conversion to the result dtype (Triton's `.to`).
    Cast,
    /// `(a) -> b`: reinterpretation of the bits as the result dtype (same width).
    Bitcast,
    /// `(ptr, offset) -> ptr`: pointer plus offset counted in elements; same shapes.
    PtrAdd,
    /// `(ptr [, mask [, other]]) -> value`: load through a pointer or a block of pointers.
    /// Masked-off lanes are never read and take `other` (0 when absent).
    Load {
        /// A mask operand follows the pointer.
        has_mask: bool,
        /// An `other` operand follows the mask.
        has_other: bool,
        /// `volatile=True` (scalar loads only): read from memory where the program reads
        /// it, never merged with another load, moved, or removed, so that a loop may wait
        /// on memory another program writes.
        volatile: bool,
    },
    /// `(ptr, value [, mask]) -> ()`: store; masked-off lanes are never written.
    Store {
        /// A mask operand follows the value.
        has_mask: bool,
        /// Writes nothing: only checks, where bounds are checked, that every enabled lane
        /// is inside its argument, faulting as the store would. Left by lnc-tile's `defer`
        /// where it moved a store from, so that a safe launch faults where the source puts
        /// the store, before any lock is taken. The value is computed (its loads checked)
        /// and dropped.
        check_only: bool,
    },
    /// `(block) -> block or scalar`: reduction along `axis`.
    Reduce {
        /// Kind.
        op: ReduceOp,
        /// Axis reduced.
        axis: u8,
        /// The reduced axis stays with size 1.
        keep_dims: bool,
    },
    /// `(ptr, value [, mask]) -> old`: atomic read-modify-write per element, seq-cst.
    Atomic {
        /// Kind.
        op: AtomicOp,
        /// A mask operand follows the value.
        has_mask: bool,
    },
    /// `(ptr, cmp, value) -> old`: atomic compare-and-swap, seq-cst.
    AtomicCas,
    /// `(lb, ub, step, init...) -> carried...`: one region whose arguments are the
    /// induction variable and the carried values; it ends with a `yield` of the next
    /// carried values.
    For,
    /// `(init...) -> carried...`: two regions. The first (condition) takes the carried
    /// values and ends with `condition(flag, forwarded...)`; the second (body) takes the
    /// forwarded values and yields the next carried values.
    While,
    /// `(cond) -> results...`: two regions (then, else) each ending with a `yield`.
    If,
    /// `(values...) -> ()`: terminator of a region, passes values to the parent.
    Yield,
    /// `(flag, values...) -> ()`: terminator of a while's condition region.
    Condition,
    /// `(cond) -> ()`: `tl.device_assert`; a false lane stops the launch.
    Assert,
    /// `(values...) -> ()`: `tl.device_print`; the prefix is in the function's string table.
    Print(u32),
}

impl Opcode {
    /// True for instructions with no effect besides their results (CSE and DCE may touch them).
    pub fn is_pure(&self) -> bool {
        !matches!(
            self,
            Opcode::Load { .. }
                | Opcode::Store { .. }
                | Opcode::Atomic { .. }
                | Opcode::AtomicCas
                | Opcode::For
                | Opcode::While
                | Opcode::If
                | Opcode::Yield
                | Opcode::Condition
                | Opcode::Assert
                | Opcode::Print(_)
        )
    }

    /// True for terminators of regions.
    pub fn is_terminator(&self) -> bool {
        matches!(self, Opcode::Yield | Opcode::Condition)
    }
}

/// A region: an ordered list of instructions with arguments, nested in an instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Region {
    /// Arguments (defined by [`ValueDef::RegionArg`]).
    pub args: Vec<Value>,
    /// Instructions, in order.
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
    /// Nested regions (control flow only).
    pub regions: Vec<Region>,
}

/// A parameter of a specialized kernel (constexpr parameters are gone by then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Source name.
    pub name: String,
    /// Index of the parameter among all the kernel's source parameters (its ABI slot).
    pub slot: u32,
    /// The SSA value.
    pub value: Value,
}

/// A specialized kernel in block IR.
#[derive(Clone, Debug, Default)]
pub struct Function {
    /// Kernel name.
    pub name: String,
    /// Runtime parameters, in slot order.
    pub params: Vec<Param>,
    /// All values.
    pub values: PrimaryMap<Value, ValueData>,
    /// All instructions, including ones no longer in the body.
    pub insts: PrimaryMap<Inst, InstData>,
    /// Source span of each instruction (side table; rewrites keep the span they replace).
    pub spans: SecondaryMap<Inst, Span>,
    /// The top-level region (no arguments, no terminator).
    pub body: Region,
    /// Strings used by `device_print`.
    pub strings: Vec<String>,
}

impl Function {
    /// An empty function.
    pub fn new(name: impl Into<String>) -> Function {
        Function { name: name.into(), ..Function::default() }
    }

    /// Type of a value.
    pub fn ty(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// The instruction's data.
    pub fn inst(&self, i: Inst) -> &InstData {
        &self.insts[i]
    }

    /// Adds a parameter value of type `ty`.
    pub fn add_param(&mut self, name: impl Into<String>, slot: u32, ty: Type) -> Value {
        let n = self.params.len() as u32;
        let value = self.values.push(ValueData { ty, def: ValueDef::Param(n) });
        self.params.push(Param { name: name.into(), slot, value });
        value
    }

    /// Creates a detached instruction with fresh result values; the caller places it in a region.
    pub fn create_inst(
        &mut self,
        opcode: Opcode,
        args: Vec<Value>,
        result_types: &[Type],
        span: Span,
    ) -> Inst {
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

    /// Creates a region argument of type `ty` for region `region` of `inst`.
    pub fn create_region_arg(&mut self, inst: Inst, region: u32, index: u32, ty: Type) -> Value {
        self.values.push(ValueData { ty, def: ValueDef::RegionArg(inst, region, index) })
    }

    /// Visits every instruction reachable from the body, in program order, parents first.
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

    /// Every instruction reachable from the body, in program order.
    pub fn live_insts(&self) -> Vec<Inst> {
        let mut out = Vec::new();
        self.walk(|i| out.push(i));
        out
    }

    /// Replaces every use of `from` by `to` in instructions reachable from the body.
    pub fn replace_uses(&mut self, from: Value, to: Value) {
        for i in self.live_insts() {
            for a in &mut self.insts[i].args {
                if *a == from {
                    *a = to;
                }
            }
        }
    }

    /// Span of an instruction.
    pub fn span(&self, i: Inst) -> Span {
        self.spans[i]
    }

    /// The dtype of a value's elements when they are numbers.
    pub fn num_dtype(&self, v: Value) -> Option<DType> {
        self.ty(v).num_dtype()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::Const;

    /// Equality is by bits, as hashing is: the two zeros stay apart in a hash set, whatever
    /// its random keys, and a NaN is found again.
    #[test]
    fn constants_are_equal_when_their_bits_are() {
        assert_ne!(Const::Float(0.0), Const::Float(-0.0));
        assert_eq!(Const::Float(f64::NAN), Const::Float(f64::NAN));
        assert_ne!(Const::Float(0.0), Const::Int(0));
        for _ in 0..100 {
            let set: HashSet<Const> = [Const::Float(0.0), Const::Float(-0.0), Const::Float(f64::NAN)].into();
            assert_eq!(set.len(), 3);
            assert!(set.contains(&Const::Float(f64::NAN)));
        }
    }
}
