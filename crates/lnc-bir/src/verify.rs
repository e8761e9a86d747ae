//! Verifier of the block IR.
//!
//! A function that passes [`verify`] satisfies every invariant below; passes and the
//! interpreter rely on them instead of re-checking. A failure is a compiler bug, so the
//! error prints the whole function with `; error:` lines under the offending instructions.
//! Every error is collected (not only the first), and the verifier never panics, whatever
//! the function holds.
//!
//! ## Structure
//! - Parameters are in strictly increasing slot order, record `ValueDef::Param(n)` for
//!   their position `n`, and have scalar types (a number or a pointer).
//! - Every instruction listed in a region exists and appears once in the whole body.
//! - Every value is defined once: as a parameter, a result (recording
//!   `ValueDef::Result(inst, n)`) or a region argument (`ValueDef::RegionArg(inst, r, n)`).
//! - Every operand is defined before its use, in the same region or an enclosing one
//!   (a region sees its owner's scope but not its owner's results; values of a region are
//!   not visible after it).
//! - Every type's block dimensions are powers of two (1 included).
//! - The body has no arguments and no terminator. Every region of `for`/`while`/`if` ends
//!   with a terminator, and a terminator appears only there: `condition` ends a while's
//!   first region, `yield` ends every other region.
//! - Only `for` (1 region), `while` (2) and `if` (2) have regions.
//!
//! ## Operands and types, per opcode (as documented on [`Opcode`])
//! - Result counts: one for value-producing instructions, none for `store`, `yield`,
//!   `condition`, `assert`, `print`; as many as carried values for control flow.
//! - `const`: scalar number; `Int` for integer dtypes, in canonical (wrapped) form; `Float`
//!   for float dtypes, exactly representable in the dtype.
//! - `program_id`/`num_programs`: axis < 3, result `i32`.
//! - `arange`: `end - start` a positive power of two, bounds within `i32`, result `<n x i32>`.
//! - `splat`: scalar operand, block result of the same element type.
//! - `broadcast`: same element type and rank; an axis changes size only from 1.
//! - `expand_dims`: result is the operand's shape with a 1 inserted at `axis`.
//! - Elementwise `binary`/`unary`/`select`: operands and result of one type (the
//!   condition of `select` is `int1` of the result's shape); numbers only; `div`, `pow` and
//!   the float math functions need floats; bitwise ops, shifts and `not` need integers.
//! - `cmp`: operands of one type, result `int1` of their shape.
//! - `cast`/`bitcast`: numbers of the same shape; `bitcast` keeps the bit width.
//! - `ptr_add`: pointer (scalar or block) plus integers of the same shape; result the pointer's type.
//! - `load`/`store`/`atomic`/`atomic_cas`: values are numbers of the pointee dtype and
//!   the pointer's shape, the mask is `int1` of that shape, `other` has the result's type,
//!   and `other` needs a mask; bitwise atomics need integers.
//! - `reduce`: axis < rank; result is the operand's shape without the axis (size 1 with
//!   `keep_dims`; a scalar when a rank-1 block loses its only axis), same element type.
//! - `for`: `lb`, `ub`, `step` scalar integers of one type; region arguments are the
//!   induction variable (that type) and the carried values (types of the inits); the
//!   `yield` and the results have the inits' types.
//! - `while`: the condition region's arguments have the inits' types; it ends with
//!   `condition(flag, forwarded...)`, `flag` a scalar `int1`; the body region's arguments and
//!   the results have the forwarded values' types (the results are the values forwarded
//!   when the flag is false, as in MLIR's `scf.while`); the body yields the inits' types.
//! - `if`: the condition is a scalar `int1`; both regions take no arguments and yield the
//!   results' types.
//! - `assert`: one `int1` operand (scalar or block). `print`: its string exists.

use cranelift_entity::SecondaryMap;
use thiserror::Error;

use crate::ir::*;
use crate::print::{Names, print_function_annotated};
use crate::types::{DType, Elem, Shape, Type};

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierError {
    /// The instruction at fault (`None` for function-level errors such as parameters).
    pub inst: Option<Inst>,
    /// What is wrong.
    pub message: String,
}

/// Every error found in a function; `Display` prints the function with each error under
/// its instruction (function-level errors first).
#[derive(Clone, Debug, Error)]
#[error("{listing}")]
pub struct VerifierErrors {
    /// The errors, in the order found.
    pub errors: Vec<VerifierError>,
    listing: String,
}

impl VerifierErrors {
    /// The messages alone, in order.
    pub fn messages(&self) -> Vec<&str> {
        self.errors.iter().map(|e| e.message.as_str()).collect()
    }
}

/// Checks every invariant listed in the module documentation.
pub fn verify(f: &Function) -> Result<(), VerifierErrors> {
    let mut v = Verifier {
        f,
        names: Names::new(f),
        errors: Vec::new(),
        defined: SecondaryMap::new(),
        visible: SecondaryMap::new(),
        seen: SecondaryMap::new(),
        scopes: Vec::new(),
    };
    v.function();
    if v.errors.is_empty() {
        return Ok(());
    }
    let errors = v.errors;
    let annotate = |i: Inst| -> Vec<String> {
        errors.iter().filter(|e| e.inst == Some(i)).map(|e| format!("error: {}", e.message)).collect()
    };
    let mut listing = String::new();
    for e in errors.iter().filter(|e| e.inst.is_none()) {
        listing.push_str(&format!("; error: {}\n", e.message));
    }
    listing.push_str(&print_function_annotated(f, &annotate));
    let n = errors.len();
    listing.push_str(&format!("; {n} verifier error{}\n", if n == 1 { "" } else { "s" }));
    Err(VerifierErrors { errors, listing })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RegionKind {
    Body,
    ForBody,
    WhileCond,
    WhileBody,
    IfBranch,
    // A region of an instruction that should have none; walked so its definitions exist.
    Stray,
}

struct Verifier<'a> {
    f: &'a Function,
    names: Names,
    errors: Vec<VerifierError>,
    defined: SecondaryMap<Value, bool>,
    visible: SecondaryMap<Value, bool>,
    seen: SecondaryMap<Inst, bool>,
    scopes: Vec<Vec<Value>>,
}

fn is_pow2(d: u32) -> bool {
    d != 0 && d.is_power_of_two()
}

fn int1(shape: Shape) -> Type {
    Type::block(Elem::Scalar(DType::I1), shape)
}

impl<'a> Verifier<'a> {
    fn err(&mut self, inst: Option<Inst>, message: impl Into<String>) {
        self.errors.push(VerifierError { inst, message: message.into() });
    }

    /// Records an error unless `ok`; returns `ok` so structural checks can stop early.
    fn check(&mut self, ok: bool, i: Inst, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.err(Some(i), message());
        }
        ok
    }

    fn ty(&self, v: Value) -> Type {
        self.f.values[v].ty
    }

    fn name(&self, v: Value) -> String {
        self.names.name(v)
    }

    fn function(&mut self) {
        let f = self.f;
        self.scopes.push(Vec::new());
        let mut last_slot: Option<u32> = None;
        for (n, p) in f.params.iter().enumerate() {
            if let Some(prev) = last_slot
                && p.slot <= prev
            {
                self.err(
                    None,
                    format!(
                        "parameter `{}` has slot {} after slot {prev}; slots must increase",
                        p.name, p.slot
                    ),
                );
            }
            last_slot = Some(p.slot);
            if !f.values.is_valid(p.value) {
                self.err(None, format!("parameter `{}` is not a value", p.name));
                continue;
            }
            self.define(p.value, None, ValueDef::Param(n as u32));
            let ty = self.ty(p.value);
            if ty.is_block() {
                self.err(
                    None,
                    format!("parameter `{}` has block type {ty}; parameters are scalars or pointers", p.name),
                );
            }
        }
        if !f.body.args.is_empty() {
            self.err(None, "the body region has arguments");
        }
        self.region(&f.body, RegionKind::Body, None);
        self.scopes.pop();
    }

    fn define(&mut self, v: Value, at: Option<Inst>, expected: ValueDef) {
        if !self.f.values.is_valid(v) {
            self.err(at, format!("{} is not a value", self.name(v)));
            return;
        }
        if self.defined[v] {
            self.err(at, format!("{} is defined more than once", self.name(v)));
            return;
        }
        self.defined[v] = true;
        self.visible[v] = true;
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(v);
        }
        let data = self.f.values[v];
        if data.def != expected {
            self.err(
                at,
                format!("{} records definition {:?}, expected {:?}", self.name(v), data.def, expected),
            );
        }
        if let Some(&d) = data.ty.shape.dims().iter().find(|&&d| !is_pow2(d)) {
            self.err(
                at,
                format!("type {} of {}: dimension {d} is not a power of two", data.ty, self.name(v)),
            );
        }
    }

    fn region(&mut self, r: &Region, kind: RegionKind, owner: Option<(Inst, u32)>) {
        let owner_inst = owner.map(|(i, _)| i);
        self.scopes.push(Vec::new());
        for (k, &a) in r.args.iter().enumerate() {
            let expected = match owner {
                Some((i, ri)) => ValueDef::RegionArg(i, ri, k as u32),
                None => ValueDef::Param(u32::MAX),
            };
            self.define(a, owner_inst, expected);
        }
        let n = r.insts.len();
        for (pos, &i) in r.insts.iter().enumerate() {
            if !self.f.insts.is_valid(i) {
                self.err(owner_inst, format!("a region lists instruction {i}, which does not exist"));
                continue;
            }
            if self.seen[i] {
                self.err(Some(i), "instruction appears more than once in the body");
                continue;
            }
            self.seen[i] = true;
            self.inst(i, kind, pos + 1 == n);
        }
        if let Some((i, ri)) = owner
            && kind != RegionKind::Body
            && kind != RegionKind::Stray
        {
            let ends = r
                .insts
                .last()
                .is_some_and(|&t| self.f.insts.get(t).is_some_and(|d| d.opcode.is_terminator()));
            if !ends {
                self.err(Some(i), format!("region {ri} does not end with a terminator"));
            }
        }
        for v in self.scopes.pop().unwrap_or_default() {
            self.visible[v] = false;
        }
    }

    fn inst(&mut self, i: Inst, kind: RegionKind, is_last: bool) {
        let f = self.f;
        let data = &f.insts[i];
        let mut operands_ok = true;
        for (k, &a) in data.args.iter().enumerate() {
            if !f.values.is_valid(a) {
                self.err(Some(i), format!("operand {k} ({}) is not a value", self.name(a)));
                operands_ok = false;
            } else if !self.visible[a] {
                self.err(
                    Some(i),
                    format!("{} is used before its definition or outside its scope", self.name(a)),
                );
            }
        }
        if data.opcode.is_terminator() {
            let m = data.opcode.mnemonic();
            if kind == RegionKind::Body {
                self.err(Some(i), format!("terminator `{m}` in the function body"));
            } else if !is_last {
                self.err(Some(i), format!("terminator `{m}` before the end of its region"));
            }
        }
        let kinds: &[RegionKind] = match data.opcode {
            Opcode::For => &[RegionKind::ForBody],
            Opcode::While => &[RegionKind::WhileCond, RegionKind::WhileBody],
            Opcode::If => &[RegionKind::IfBranch, RegionKind::IfBranch],
            _ => &[],
        };
        if data.regions.len() != kinds.len() {
            self.err(
                Some(i),
                format!(
                    "`{}` has {} region(s), expected {}",
                    data.opcode.mnemonic(),
                    data.regions.len(),
                    kinds.len()
                ),
            );
        }
        for (ri, r) in data.regions.iter().enumerate() {
            let kind = kinds.get(ri).copied().unwrap_or(RegionKind::Stray);
            self.region(r, kind, Some((i, ri as u32)));
        }
        if operands_ok {
            self.opcode(i);
        }
        for (k, &r) in data.results.iter().enumerate() {
            self.define(r, Some(i), ValueDef::Result(i, k as u32));
        }
    }

    fn counts(&mut self, i: Inst, args: usize, results: usize) -> bool {
        let f = self.f;
        let data = &f.insts[i];
        let m = data.opcode.mnemonic();
        let a = self.check(data.args.len() == args, i, || {
            format!("`{m}` takes {args} operand(s), found {}", data.args.len())
        });
        let r = self.check(data.results.len() == results, i, || {
            format!("`{m}` has {results} result(s), found {}", data.results.len())
        });
        a && r && data.results.iter().all(|&v| self.f.values.is_valid(v))
    }

    fn opcode(&mut self, i: Inst) {
        let f = self.f;
        let data = &f.insts[i];
        let args = &data.args;
        let m = data.opcode.mnemonic();
        match data.opcode {
            Opcode::Const(c) => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                let ty = self.ty(data.results[0]);
                let Some(d) = ty.num_dtype().filter(|_| !ty.is_block()) else {
                    self.err(Some(i), format!("const result must be a scalar number, found {ty}"));
                    return;
                };
                match c {
                    Const::Int(_) if d.is_float() => {
                        self.err(Some(i), format!("integer constant with float type {d}"));
                    }
                    Const::Float(_) if d.is_int() => {
                        self.err(Some(i), format!("float constant with integer type {d}"));
                    }
                    Const::Int(v) => {
                        self.check(d.wrap_int(v) == v, i, || format!("constant {v} is out of range for {d}"));
                    }
                    Const::Float(x) => {
                        let r = d.round_float(x);
                        self.check(r == x || x.is_nan(), i, || {
                            format!("float constant {x:?} is not exactly representable in {d}")
                        });
                    }
                }
            }
            Opcode::ProgramId(axis) | Opcode::NumPrograms(axis) => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                self.check(axis < 3, i, || format!("`{m}` axis {axis} is out of range 0..3"));
                let ty = self.ty(data.results[0]);
                self.check(ty == Type::scalar(DType::I32), i, || {
                    format!("`{m}` result must be i32, found {ty}")
                });
            }
            Opcode::Arange { start, end } => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                let n = end as i128 - start as i128;
                let in_i32 = |x: i64| (i32::MIN as i64..=i32::MAX as i64 + 1).contains(&x);
                let pow2 = n > 0 && n <= u32::MAX as i128 && (n as u32).is_power_of_two();
                if !self.check(pow2, i, || {
                    format!("arange length end - start = {n} is not a positive power of two")
                }) {
                    return;
                }
                self.check(in_i32(start) && in_i32(end), i, || {
                    format!("arange bounds {start}, {end} do not fit in int32")
                });
                let expected = Type::block(Elem::Scalar(DType::I32), Shape::d1(n as u32));
                let ty = self.ty(data.results[0]);
                self.check(ty == expected, i, || format!("arange result must be {expected}, found {ty}"));
            }
            Opcode::Splat => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                self.check(!a.is_block(), i, || format!("splat operand must be a scalar, found {a}"));
                self.check(r.is_block(), i, || format!("splat result must be a block, found {r}"));
                self.check(a.elem == r.elem, i, || {
                    format!("splat changes the element type from {} to {}", a.elem, r.elem)
                });
            }
            Opcode::Broadcast => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                self.check(a.elem == r.elem, i, || {
                    format!("broadcast changes the element type from {} to {}", a.elem, r.elem)
                });
                if !self.check(a.shape.rank() == r.shape.rank() && a.is_block(), i, || {
                    format!("broadcast needs a block operand and a result of the same rank, found {a} -> {r}")
                }) {
                    return;
                }
                for (k, (&x, &y)) in a.shape.dims().iter().zip(r.shape.dims()).enumerate() {
                    self.check(x == y || x == 1, i, || {
                        format!("broadcast axis {k}: size {x} cannot become {y} (only size-1 axes broadcast)")
                    });
                }
            }
            Opcode::ExpandDims(axis) => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                match a.shape.insert_axis(axis as usize) {
                    None => {
                        self.err(Some(i), format!("expand_dims axis {axis} is out of range for {a}"));
                    }
                    Some(s) => {
                        let expected = a.with_shape(s);
                        self.check(r == expected, i, || {
                            format!("expand_dims result must be {expected}, found {r}")
                        });
                    }
                }
            }
            Opcode::Binary(op) => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (a, b, r) = (self.ty(args[0]), self.ty(args[1]), self.ty(data.results[0]));
                if !self.check(a == b && a == r, i, || {
                    format!("operands and result of `{m}` must have one type, found {a}, {b} -> {r}")
                }) {
                    return;
                }
                let Some(d) = r.num_dtype() else {
                    self.err(Some(i), format!("`{m}` needs numbers, found {r}"));
                    return;
                };
                match op {
                    BinOp::Div | BinOp::Pow => {
                        self.check(d.is_float(), i, || format!("`{m}` needs floats, found {d}"));
                    }
                    BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
                        self.check(d.is_int(), i, || format!("`{m}` needs integers, found {d}"));
                    }
                    _ => {}
                }
            }
            Opcode::Cmp(_) => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (a, b, r) = (self.ty(args[0]), self.ty(args[1]), self.ty(data.results[0]));
                self.check(a == b, i, || format!("cmp operands must have one type, found {a} and {b}"));
                let expected = int1(a.shape);
                self.check(r == expected, i, || format!("cmp result must be {expected}, found {r}"));
            }
            Opcode::Unary(op) => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                if !self.check(a == r, i, || {
                    format!("operand and result of `{m}` must have one type, found {a} -> {r}")
                }) {
                    return;
                }
                let Some(d) = r.num_dtype() else {
                    self.err(Some(i), format!("`{m}` needs numbers, found {r}"));
                    return;
                };
                match op {
                    UnOp::Neg | UnOp::Abs => {}
                    UnOp::Not => {
                        self.check(d.is_int(), i, || format!("`{m}` needs integers, found {d}"));
                    }
                    _ => {
                        self.check(d.is_float(), i, || format!("`{m}` needs floats, found {d}"));
                    }
                }
            }
            Opcode::Select => {
                if !self.counts(i, 3, 1) {
                    return;
                }
                let (c, a, b, r) =
                    (self.ty(args[0]), self.ty(args[1]), self.ty(args[2]), self.ty(data.results[0]));
                let expected = int1(r.shape);
                self.check(c == expected, i, || format!("select condition must be {expected}, found {c}"));
                self.check(a == b && a == r, i, || {
                    format!("select operands and result must have one type, found {a}, {b} -> {r}")
                });
            }
            Opcode::Fma => {
                if !self.counts(i, 3, 1) {
                    return;
                }
                let (a, b, c, r) =
                    (self.ty(args[0]), self.ty(args[1]), self.ty(args[2]), self.ty(data.results[0]));
                self.check(a == b && b == c && c == r, i, || {
                    format!("fma operands and result must have one type, found {a}, {b}, {c} -> {r}")
                });
                self.check(r.num_dtype().is_some_and(|d| d.is_float()), i, || {
                    format!("`fma` needs floats, found {r}")
                });
            }
            Opcode::Cast | Opcode::Bitcast => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                self.check(a.shape == r.shape, i, || format!("`{m}` changes the shape: {a} -> {r}"));
                let (Some(da), Some(dr)) = (a.num_dtype(), r.num_dtype()) else {
                    self.err(Some(i), format!("`{m}` converts numbers only, found {a} -> {r}"));
                    return;
                };
                if data.opcode == Opcode::Bitcast {
                    self.check(da.bits() == dr.bits(), i, || {
                        format!("bitcast between types of different widths ({da} and {dr})")
                    });
                }
            }
            Opcode::PtrAdd => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (p, o, r) = (self.ty(args[0]), self.ty(args[1]), self.ty(data.results[0]));
                self.check(p.elem.is_ptr(), i, || format!("ptr_add needs a pointer, found {p}"));
                self.check(r == p, i, || format!("ptr_add result must be {p}, found {r}"));
                self.check(o.shape == p.shape && o.num_dtype().is_some_and(|d| d.is_int()), i, || {
                    format!("ptr_add offset must be integers of the pointer's shape, found {o}")
                });
            }
            Opcode::Load { has_mask, has_other, volatile } => {
                if !self.check(has_mask || !has_other, i, || "load has `other` without a mask".into()) {
                    return;
                }
                if volatile
                    && !self.check(!self.ty(data.results[0]).is_block(), i, || {
                        "a volatile load must be scalar".into()
                    })
                {
                    return;
                }
                if !self.counts(i, 1 + has_mask as usize + has_other as usize, 1) {
                    return;
                }
                let Some(value) = self.access(i, "load", args[0]) else { return };
                let r = self.ty(data.results[0]);
                self.check(r == value, i, || format!("load result must be {value}, found {r}"));
                if has_mask {
                    self.mask(i, args[1], value.shape);
                }
                if has_other {
                    let o = self.ty(args[2]);
                    self.check(o == value, i, || format!("load `other` must be {value}, found {o}"));
                }
            }
            Opcode::Store { has_mask, .. } => {
                if !self.counts(i, 2 + has_mask as usize, 0) {
                    return;
                }
                let Some(value) = self.access(i, "store", args[0]) else { return };
                let v = self.ty(args[1]);
                self.check(v == value, i, || format!("stored value must be {value}, found {v}"));
                if has_mask {
                    self.mask(i, args[2], value.shape);
                }
            }
            Opcode::Reduce { axis, keep_dims, .. } => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.ty(data.results[0]));
                if !self.check(a.num_dtype().is_some(), i, || format!("reduce needs numbers, found {a}")) {
                    return;
                }
                let axis = axis as usize;
                if !self
                    .check(axis < a.shape.rank(), i, || format!("reduce axis {axis} is out of range for {a}"))
                {
                    return;
                }
                let shape = if keep_dims {
                    let mut dims = a.shape.dims().to_vec();
                    dims[axis] = 1;
                    Shape::new(&dims).unwrap_or(a.shape)
                } else {
                    a.shape.remove_axis(axis)
                };
                let expected = a.with_shape(shape);
                self.check(r == expected, i, || format!("reduce result must be {expected}, found {r}"));
            }
            Opcode::Atomic { op, has_mask } => {
                if !self.counts(i, 2 + has_mask as usize, 1) {
                    return;
                }
                let Some(value) = self.access(i, "atomic", args[0]) else { return };
                let (v, r) = (self.ty(args[1]), self.ty(data.results[0]));
                self.check(v == value, i, || format!("atomic value must be {value}, found {v}"));
                self.check(r == value, i, || format!("atomic result must be {value}, found {r}"));
                if has_mask {
                    self.mask(i, args[2], value.shape);
                }
                let d = value.elem.dtype();
                if matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) {
                    self.check(d.is_int(), i, || format!("atomic `{}` needs integers, found {d}", op.name()));
                }
            }
            Opcode::AtomicCas => {
                if !self.counts(i, 3, 1) {
                    return;
                }
                let Some(value) = self.access(i, "atomic_cas", args[0]) else { return };
                for (what, v) in
                    [("compared value", args[1]), ("new value", args[2]), ("result", data.results[0])]
                {
                    let t = self.ty(v);
                    self.check(t == value, i, || format!("atomic_cas {what} must be {value}, found {t}"));
                }
            }
            Opcode::For => self.for_(i),
            Opcode::While => self.while_(i),
            Opcode::If => self.if_(i),
            Opcode::Yield => {
                self.check(data.results.is_empty(), i, || "`yield` has no results".into());
            }
            Opcode::Condition => {
                self.check(data.results.is_empty(), i, || "`condition` has no results".into());
            }
            Opcode::Assert => {
                if !self.counts(i, 1, 0) {
                    return;
                }
                let c = self.ty(args[0]);
                self.check(c.elem == Elem::Scalar(DType::I1), i, || format!("assert needs int1, found {c}"));
            }
            Opcode::Print(k) => {
                self.check(data.results.is_empty(), i, || "`print` has no results".into());
                self.check((k as usize) < f.strings.len(), i, || {
                    format!("print refers to missing string {k}")
                });
            }
        }
    }

    /// The type of the values a pointer operand accesses, after checking it is a pointer.
    fn access(&mut self, i: Inst, what: &str, ptr: Value) -> Option<Type> {
        let p = self.ty(ptr);
        match p.elem {
            Elem::Ptr(d) => Some(Type::block(Elem::Scalar(d), p.shape)),
            Elem::Scalar(_) => {
                self.err(Some(i), format!("{what} needs a pointer, found {p}"));
                None
            }
        }
    }

    fn mask(&mut self, i: Inst, mask: Value, shape: Shape) {
        let expected = int1(shape);
        let t = self.ty(mask);
        self.check(t == expected, i, || format!("mask must be {expected}, found {t}"));
    }

    /// The operands of the terminator ending region `ri` of `i`, if it is a `want`.
    fn terminator(&mut self, i: Inst, ri: usize, want: &str) -> Option<&'a [Value]> {
        let f = self.f;
        let r = f.insts[i].regions.get(ri)?;
        let t = f.insts.get(*r.insts.last()?)?;
        if !t.opcode.is_terminator() {
            return None; // reported by `region`
        }
        if t.opcode.mnemonic() != want {
            self.err(Some(i), format!("region {ri} must end with `{want}`, found `{}`", t.opcode.mnemonic()));
            return None;
        }
        if t.args.iter().any(|&v| !f.values.is_valid(v)) {
            return None;
        }
        Some(&t.args)
    }

    fn types_match(&mut self, i: Inst, what: &str, found: &[Type], expected: &[Type]) {
        if found.len() != expected.len() {
            self.err(Some(i), format!("{what}: {} value(s), expected {}", found.len(), expected.len()));
            return;
        }
        for (k, (a, b)) in found.iter().zip(expected).enumerate() {
            self.check(a == b, i, || format!("{what}: value {k} has type {a}, expected {b}"));
        }
    }

    fn types(&self, vs: &[Value]) -> Vec<Type> {
        vs.iter().map(|&v| self.ty(v)).collect()
    }

    fn region_arg_types(&self, i: Inst, ri: usize) -> Option<Vec<Type>> {
        let r = self.f.insts[i].regions.get(ri)?;
        if r.args.iter().any(|&v| !self.f.values.is_valid(v)) {
            return None;
        }
        Some(self.types(&r.args))
    }

    fn results_ok(&self, i: Inst) -> bool {
        self.f.insts[i].results.iter().all(|&v| self.f.values.is_valid(v))
    }

    fn for_(&mut self, i: Inst) {
        let f = self.f;
        let data = &f.insts[i];
        if !self.check(data.args.len() >= 3, i, || {
            format!("for needs lb, ub and step operands, found {} operand(s)", data.args.len())
        }) {
            return;
        }
        let (lb, ub, step) = (self.ty(data.args[0]), self.ty(data.args[1]), self.ty(data.args[2]));
        self.check(
            lb == ub && lb == step && !lb.is_block() && lb.num_dtype().is_some_and(|d| d.is_int()),
            i,
            || format!("for bounds must be scalar integers of one type, found {lb}, {ub}, {step}"),
        );
        let inits = self.types(&data.args[3..]);
        if self.results_ok(i) {
            let results = self.types(&data.results);
            self.types_match(i, "for results", &results, &inits);
        }
        if let Some(args) = self.region_arg_types(i, 0) {
            let mut expected = vec![lb];
            expected.extend(&inits);
            self.types_match(
                i,
                "for region arguments (induction variable, carried values)",
                &args,
                &expected,
            );
        }
        if let Some(y) = self.terminator(i, 0, "yield") {
            let y = self.types(y);
            self.types_match(i, "for yield", &y, &inits);
        }
    }

    fn while_(&mut self, i: Inst) {
        let f = self.f;
        let data = &f.insts[i];
        let inits = self.types(&data.args);
        if let Some(args) = self.region_arg_types(i, 0) {
            self.types_match(i, "while condition region arguments", &args, &inits);
        }
        let forwarded = match self.terminator(i, 0, "condition") {
            Some([]) => {
                self.err(Some(i), "`condition` needs a flag operand");
                None
            }
            Some([flag, rest @ ..]) => {
                let (flag, rest) = (*flag, rest.to_vec());
                let t = self.ty(flag);
                self.check(t == Type::scalar(DType::I1), i, || {
                    format!("condition flag must be i1, found {t}")
                });
                Some(self.types(&rest))
            }
            None => None,
        };
        if let Some(fwd) = &forwarded {
            if let Some(args) = self.region_arg_types(i, 1) {
                self.types_match(i, "while body region arguments", &args, fwd);
            }
            if self.results_ok(i) {
                let results = self.types(&data.results);
                self.types_match(i, "while results", &results, fwd);
            }
        }
        if let Some(y) = self.terminator(i, 1, "yield") {
            let y = self.types(y);
            self.types_match(i, "while body yield", &y, &inits);
        }
    }

    fn if_(&mut self, i: Inst) {
        let f = self.f;
        let data = &f.insts[i];
        if !self.check(data.args.len() == 1, i, || format!("if takes 1 operand, found {}", data.args.len())) {
            return;
        }
        let c = self.ty(data.args[0]);
        self.check(c == Type::scalar(DType::I1), i, || format!("if condition must be i1, found {c}"));
        if !self.results_ok(i) {
            return;
        }
        let results = self.types(&data.results);
        for ri in 0..data.regions.len().min(2) {
            if !data.regions[ri].args.is_empty() {
                self.err(Some(i), format!("if region {ri} takes no arguments"));
            }
            if let Some(y) = self.terminator(i, ri, "yield") {
                let y = self.types(y);
                self.types_match(i, &format!("if region {ri} yield"), &y, &results);
            }
        }
    }
}
