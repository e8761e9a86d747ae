//! Verifier of the loop IR.
//!
//! A function that passes [`verify`] satisfies every invariant below; code generation
//! relies on them. A failure is a compiler bug (of the pass that built the function), so
//! the error prints the whole function with `; error:` lines under the offending
//! instructions. Every error is collected, and the verifier never panics.
//!
//! ## Function
//! - Argument slots are unique; arguments are scalars or pointers, never tiles.
//! - Scratch buffers hold at least one element, start at a multiple of 64 bytes and do
//!   not overlap (`fp16`/`bf16` elements take 4 bytes: [`Scratch::elem_bytes`]).
//!
//! ## Structure
//! - Every instruction listed in a region exists and appears once in the whole body.
//! - Every value is defined once, as a result (recording `ValueDef::Result(inst, n)`) or
//!   a region argument (`ValueDef::RegionArg(inst, r, n)`); the body has no arguments.
//! - Every operand is defined before its use, in the same region or an enclosing one
//!   (a region sees its owner's scope but not its owner's results; values of a region are
//!   not visible after it).
//! - Tiles have a power-of-two number of lanes, at least 2 (one lane is a scalar).
//! - Only `for` (1 region), `while` (2) and `if` (2) have regions.
//! - Terminators end regions and appear nowhere else: `yield` ends a for's region, a
//!   while's second region and both regions of an if; `condition` ends a while's first
//!   region; the body has no terminator.
//!
//! ## Operands and types, per opcode (as documented on [`Opcode`])
//! - Operand and result counts as documented (with the optional mask/other operands the
//!   opcode announces).
//! - `arg n`: slot `n` is an argument; the result has its type.
//! - `const`: a scalar number; `Int` for integer dtypes, `Float` for float dtypes.
//! - `program_id`/`num_programs`: axis < 3, result `i32`.
//! - `splat`: a scalar number to a tile of its dtype. `iota`: an `i32`/`i64` scalar to a
//!   tile of that dtype.
//! - `binary`: operands and result of one number type (scalars or tiles of equal lanes);
//!   `div` and `pow` need floats; `and`, `or`, `xor`, `shl`, `shr` need integers.
//! - `cmp`: operands of one number type; result `i1` with their lanes.
//! - `unary`: operand and result of one number type; `not` needs integers, the math
//!   functions (`sqrt` … `ceil`) floats.
//! - `select`: condition `i1`, a scalar or a tile with the result's lanes; both values
//!   and the result of one type (a tile condition needs tile values).
//! - `cast`: numbers with equal lanes; `bitcast`: also equal bit widths.
//! - `ptr_add`: a pointer and an integer scalar; result the pointer's type.
//! - Memory accesses (`load`, `store`, `atomic`, `atomic_cas`): the pointer is a scalar
//!   pointer whose pointee is the accessed dtype. `scalar` and `contig` addressing take an
//!   integer scalar offset, `gather` an integer tile with the access's lanes. `scalar`
//!   accesses move scalars, the others tiles. A mask is `i1`: a scalar, or a tile with the
//!   access's lanes. `other` has the result's type or (tile loads) is a scalar of its
//!   dtype. The stored, exchanged or compared values have the access's type; an atomic's
//!   result too. Bitwise atomics need integers. The site exists and names a pointer
//!   argument.
//! - `scratch_load`/`scratch_store`: the buffer exists; the index is an integer scalar;
//!   the value is a scalar or a tile of the buffer's dtype with no more lanes than the
//!   buffer holds.
//! - `prefetch`: a scalar pointer and an integer scalar offset; no result.
//! - `reduce_lanes`: a tile to a scalar of its dtype.
//! - `stream_ok`: a pointer and an `i32` count to an `i1`. A store that streams is
//!   contiguous and unmasked, its flag a scalar `i1`; the streaming stores of a loop sit
//!   directly in the body of a `for` without control flow and share one flag defined
//!   outside the loop.
//! - `for`: `lb`, `ub`, `step` integer scalars of one type; the region's arguments are the
//!   induction variable (that type) and the carried values (the inits' types); the
//!   `yield` and the results have the inits' types.
//! - `while`: the first region's arguments have the inits' types; its `condition` takes a
//!   scalar `i1` flag and forwarded values of the second region's argument types, which
//!   are also the result types (the results are the values forwarded when the flag is
//!   false, as in MLIR's `scf.while`); the second region yields the inits' types.
//! - `if`: a scalar `i1` condition; both regions take no arguments and yield the result
//!   types.
//! - `assert`: one `i1` operand (scalar or tile); the site exists. `print`: the string
//!   exists.

use std::fmt;

use cranelift_entity::SecondaryMap;

use crate::ir::*;
use crate::print::{Names, print_function_annotated, print_inst};

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierError {
    /// The instruction at fault (`None` for function-level errors).
    pub inst: Option<Inst>,
    /// The instruction's text, for context (empty for function-level errors).
    pub context: String,
    /// What is wrong.
    pub message: String,
}

/// Every error found in a function. `Display` prints the function with each error under
/// its instruction, function-level errors first.
#[derive(Clone, Debug)]
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

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.listing)
    }
}

impl std::error::Error for VerifierErrors {}

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
    /// A region that ends with `yield`.
    Yielding,
    /// A while's first region, ending with `condition`.
    Condition,
    /// A region of an instruction that should have none; walked so its definitions exist.
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

fn is_int(t: Ty) -> bool {
    !matches!(t, Ty::Ptr(_)) && t.dtype().is_int()
}

fn is_number(t: Ty) -> bool {
    !matches!(t, Ty::Ptr(_))
}

fn is_int_scalar(t: Ty) -> bool {
    matches!(t, Ty::Scalar(d) if d.is_int())
}

fn with_dtype(t: Ty, d: DType) -> Ty {
    match t {
        Ty::Tile(_, l) => Ty::Tile(d, l),
        _ => Ty::Scalar(d),
    }
}

fn types_text(ts: &[Ty]) -> String {
    let v: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
    format!("({})", v.join(", "))
}

impl<'a> Verifier<'a> {
    fn err(&mut self, inst: Option<Inst>, message: impl Into<String>) {
        let context = inst.map_or(String::new(), |i| print_inst(self.f, i));
        self.errors.push(VerifierError { inst, context, message: message.into() });
    }

    fn ty(&self, v: Value) -> Ty {
        self.f.values[v].ty
    }

    fn name(&self, v: Value) -> String {
        self.names.name(v)
    }

    fn function(&mut self) {
        let f = self.f;
        for (k, a) in f.args.iter().enumerate() {
            if f.args[..k].iter().any(|b| b.slot == a.slot) {
                self.err(None, format!("argument `{}` reuses slot {}", a.name, a.slot));
            }
            if a.ty.is_tile() {
                self.err(
                    None,
                    format!(
                        "argument `{}` has tile type {}; arguments are scalars or pointers",
                        a.name, a.ty
                    ),
                );
            }
        }
        for (k, s) in f.scratch.iter().enumerate() {
            if s.len == 0 {
                self.err(None, format!("scratch buffer s{k} is empty"));
            }
            if !s.offset.is_multiple_of(64) {
                self.err(
                    None,
                    format!("scratch buffer s{k} starts at byte {}, not a multiple of 64", s.offset),
                );
            }
            let end = |s: &Scratch| s.offset as u64 + s.len as u64 * Scratch::elem_bytes(s.dtype) as u64;
            for (j, t) in f.scratch[..k].iter().enumerate() {
                if (s.offset as u64) < end(t) && (t.offset as u64) < end(s) {
                    self.err(None, format!("scratch buffers s{j} and s{k} overlap"));
                }
            }
        }
        if !f.body.args.is_empty() {
            self.err(None, "the body region has arguments");
        }
        self.region(&f.body, RegionKind::Body, None);
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
        if let Ty::Tile(_, l) = data.ty
            && (l < 2 || !l.is_power_of_two())
        {
            self.err(
                at,
                format!(
                    "type {} of {}: a tile has a power-of-two number of lanes, at least 2",
                    data.ty,
                    self.name(v)
                ),
            );
        }
    }

    fn region(&mut self, r: &Region, kind: RegionKind, owner: Option<(Inst, u32)>) {
        let owner_inst = owner.map(|(i, _)| i);
        self.scopes.push(Vec::new());
        if let Some((i, ri)) = owner {
            for (k, &a) in r.args.iter().enumerate() {
                self.define(a, Some(i), ValueDef::RegionArg(i, ri, k as u32));
            }
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
            && matches!(kind, RegionKind::Yielding | RegionKind::Condition)
        {
            let want = if kind == RegionKind::Condition { Opcode::Condition } else { Opcode::Yield };
            let ends = r.insts.last().is_some_and(|&t| self.f.insts.get(t).is_some_and(|d| d.opcode == want));
            if !ends {
                self.err(Some(i), format!("region {ri} does not end with `{}`", want.mnemonic()));
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
            Opcode::For => &[RegionKind::Yielding],
            Opcode::While => &[RegionKind::Condition, RegionKind::Yielding],
            Opcode::If => &[RegionKind::Yielding, RegionKind::Yielding],
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
        let results_ok = data.results.iter().all(|&v| f.values.is_valid(v));
        if operands_ok && results_ok {
            self.opcode(i);
        }
        for (k, &r) in data.results.iter().enumerate() {
            self.define(r, Some(i), ValueDef::Result(i, k as u32));
        }
    }

    /// Checks operand and result counts; false (with an error) when they are wrong.
    fn counts(&mut self, i: Inst, args: usize, results: usize) -> bool {
        let data = &self.f.insts[i];
        let m = data.opcode.mnemonic();
        let mut ok = true;
        if data.args.len() != args {
            self.err(Some(i), format!("`{m}` takes {args} operand(s), found {}", data.args.len()));
            ok = false;
        }
        if data.results.len() != results {
            self.err(Some(i), format!("`{m}` has {results} result(s), found {}", data.results.len()));
            ok = false;
        }
        ok
    }

    fn res(&self, i: Inst, k: usize) -> Ty {
        self.ty(self.f.insts[i].results[k])
    }

    /// The types a region's terminator passes to its owner.
    fn terminator_types(&self, r: &Region, want: Opcode) -> Option<Vec<Ty>> {
        let &t = r.insts.last()?;
        let data = self.f.insts.get(t)?;
        if data.opcode != want || !data.args.iter().all(|&a| self.f.values.is_valid(a)) {
            return None;
        }
        Some(data.args.iter().map(|&a| self.ty(a)).collect())
    }

    fn region_arg_types(&self, r: &Region) -> Vec<Ty> {
        r.args.iter().filter(|&&a| self.f.values.is_valid(a)).map(|&a| self.ty(a)).collect()
    }

    fn site(&mut self, i: Inst, site: u32, access: bool) {
        let f = self.f;
        match f.sites.get(site as usize) {
            None => self.err(Some(i), format!("site {site} does not exist")),
            Some(s) if access => {
                if !f.arg(s.arg).is_some_and(|a| matches!(a.ty, Ty::Ptr(_))) {
                    self.err(Some(i), format!("site {site} names slot {}, not a pointer argument", s.arg));
                }
            }
            Some(_) => {}
        }
    }

    /// Checks `(ptr, offset)` of an access and returns the type it moves.
    fn access(&mut self, i: Inst, addr: Addressing, lanes_from: Option<Ty>) -> Option<Ty> {
        let data = &self.f.insts[i];
        let (p, o) = (self.ty(data.args[0]), self.ty(data.args[1]));
        let Ty::Ptr(d) = p else {
            self.err(Some(i), format!("the address base has type {p}, not a scalar pointer"));
            return None;
        };
        match addr {
            Addressing::Scalar | Addressing::Contiguous => {
                if !is_int_scalar(o) {
                    self.err(
                        Some(i),
                        format!("{} addressing needs an integer scalar offset, found {o}", addr.name()),
                    );
                    return None;
                }
            }
            Addressing::Gather => {
                if !(o.is_tile() && is_int(o)) {
                    self.err(Some(i), format!("gather addressing needs an integer tile offset, found {o}"));
                    return None;
                }
            }
        }
        let moved = match (addr, lanes_from) {
            (Addressing::Scalar, _) => Ty::Scalar(d),
            (Addressing::Gather, _) => Ty::Tile(d, o.lanes()),
            (Addressing::Contiguous, Some(Ty::Tile(_, l))) => Ty::Tile(d, l),
            (Addressing::Contiguous, _) => {
                self.err(Some(i), "contiguous addressing moves a tile");
                return None;
            }
        };
        Some(moved)
    }

    fn mask(&mut self, i: Inst, mask: Value, access: Ty) {
        let m = self.ty(mask);
        let ok = match m {
            Ty::Scalar(DType::I1) => true,
            Ty::Tile(DType::I1, l) => access.is_tile() && l == access.lanes(),
            _ => false,
        };
        if !(ok) {
            self.err(
                Some(i),
                format!(
                    "mask {} has type {m}; expected i1 or an i1 tile of {access}'s lanes",
                    self.name(mask)
                ),
            );
        }
    }

    /// Operands of `row_load`/`row_store`: a pointer to a half dtype, an integer offset,
    /// an `i32` count, and a scratch buffer holding the row as `fp32` values.
    fn row(&mut self, i: Inst, slot: u32) {
        let data = &self.f.insts[i];
        let load = matches!(data.opcode, Opcode::RowLoad { .. });
        let m = data.opcode.mnemonic();
        let (p, o, n) = (self.ty(data.args[0]), self.ty(data.args[1]), self.ty(data.args[2]));
        let Ty::Ptr(d) = p else {
            self.err(Some(i), format!("`{m}` needs a pointer, found {p}"));
            return;
        };
        if !matches!(d, DType::F16 | DType::BF16) {
            self.err(Some(i), format!("`{m}` converts rows of fp16 or bf16, found {p}"));
        }
        if !is_int_scalar(o) {
            self.err(Some(i), format!("`{m}` needs an integer scalar offset, found {o}"));
        }
        if n != Ty::Scalar(DType::I32) {
            self.err(Some(i), format!("`{m}` needs an i32 count, found {n}"));
        }
        let Some(s) = self.f.scratch.get(slot as usize).copied() else {
            self.err(Some(i), format!("scratch buffer s{slot} does not exist"));
            return;
        };
        let ok = s.dtype == d || (!load && s.dtype == DType::F32);
        if !ok {
            self.err(Some(i), format!("`{m}` moves {d} through scratch buffer s{slot} of {}", s.dtype));
        }
    }

    fn value_of(&mut self, i: Inst, v: Value, what: &str, want: Ty) {
        let t = self.ty(v);
        if !(t == want) {
            self.err(Some(i), format!("{what} {} has type {t}, expected {want}", self.name(v)));
        }
    }

    fn opcode(&mut self, i: Inst) {
        let f = self.f;
        let data = &f.insts[i];
        let args = &data.args;
        let m = data.opcode.mnemonic();
        match data.opcode {
            Opcode::Arg(n) => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                match f.arg(n) {
                    None => self.err(Some(i), format!("slot {n} is not an argument")),
                    Some(a) => {
                        let (want, got) = (a.ty, self.res(i, 0));
                        if !(want == got) {
                            self.err(Some(i), format!("argument {n} has type {want}, the result {got}"));
                        }
                    }
                }
            }
            Opcode::Const(c) => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                match (self.res(i, 0), c) {
                    (Ty::Scalar(d), Const::Int(_)) if d.is_int() => {}
                    (Ty::Scalar(d), Const::Float(_)) if d.is_float() => {}
                    (t, _) => self.err(Some(i), format!("constant {c:?} cannot have type {t}")),
                }
            }
            Opcode::ProgramId(a) | Opcode::NumPrograms(a) => {
                if !self.counts(i, 0, 1) {
                    return;
                }
                if a >= 3 {
                    self.err(Some(i), format!("`{m}` axis {a} is not 0, 1 or 2"));
                }
                let t = self.res(i, 0);
                if !(t == Ty::Scalar(DType::I32)) {
                    self.err(Some(i), format!("`{m}` gives i32, not {t}"));
                }
            }
            Opcode::Splat => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.res(i, 0));
                let ok = matches!(a, Ty::Scalar(d) if r == Ty::Tile(d, r.lanes()) && r.is_tile());
                if !(ok) {
                    self.err(Some(i), format!("`splat` makes a tile of a scalar's dtype, not {a} -> {r}"));
                }
            }
            Opcode::Iota => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.res(i, 0));
                let ok =
                    matches!(a, Ty::Scalar(d @ (DType::I32 | DType::I64)) if r.is_tile() && r.dtype() == d);
                if !(ok) {
                    self.err(
                        Some(i),
                        format!("`iota` makes an i32/i64 tile from a scalar of its dtype, not {a} -> {r}"),
                    );
                }
            }
            Opcode::Binary(op) => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (a, b, r) = (self.ty(args[0]), self.ty(args[1]), self.res(i, 0));
                if !(a == b && b == r && is_number(r)) {
                    self.err(
                        Some(i),
                        format!("`{m}` needs operands and result of one number type, found {a}, {b} -> {r}"),
                    );
                    return;
                }
                let d = r.dtype();
                match op {
                    BinOp::Div | BinOp::Pow if !d.is_float() => {
                        self.err(Some(i), format!("`{m}` needs floats, found {r}"))
                    }
                    BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr if !d.is_int() => {
                        self.err(Some(i), format!("`{m}` needs integers, found {r}"))
                    }
                    _ => {}
                }
            }
            Opcode::Cmp(_) => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (a, b, r) = (self.ty(args[0]), self.ty(args[1]), self.res(i, 0));
                let ok = a == b && is_number(a) && r == with_dtype(a, DType::I1);
                if !(ok) {
                    self.err(
                        Some(i),
                        format!(
                            "`cmp` compares numbers of one type into i1 of their lanes, found {a}, {b} -> {r}"
                        ),
                    );
                }
            }
            Opcode::Unary(op) => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.res(i, 0));
                if !(a == r && is_number(r)) {
                    self.err(
                        Some(i),
                        format!("`{m}` needs operand and result of one number type, found {a} -> {r}"),
                    );
                    return;
                }
                match op {
                    UnOp::Neg | UnOp::Abs => {}
                    UnOp::Not if !r.dtype().is_int() => {
                        self.err(Some(i), format!("`not` needs integers, found {r}"))
                    }
                    UnOp::Not => {}
                    _ if !r.dtype().is_float() => self.err(Some(i), format!("`{m}` needs floats, found {r}")),
                    _ => {}
                }
            }
            Opcode::Fma => {
                if !self.counts(i, 3, 1) {
                    return;
                }
                let (a, b, c, r) = (self.ty(args[0]), self.ty(args[1]), self.ty(args[2]), self.res(i, 0));
                if !(a == b && b == c && c == r && r.dtype().is_float() && !matches!(r, Ty::Ptr(_))) {
                    self.err(Some(i), format!("`fma` needs floats of one type, found {a}, {b}, {c} -> {r}"));
                }
            }
            Opcode::Select => {
                if !self.counts(i, 3, 1) {
                    return;
                }
                let (c, a, b, r) = (self.ty(args[0]), self.ty(args[1]), self.ty(args[2]), self.res(i, 0));
                if !(a == b && b == r) {
                    self.err(
                        Some(i),
                        format!("`select` needs values and result of one type, found {a}, {b} -> {r}"),
                    );
                }
                let ok = match c {
                    Ty::Scalar(DType::I1) => true,
                    Ty::Tile(DType::I1, l) => r.is_tile() && r.lanes() == l,
                    _ => false,
                };
                if !(ok) {
                    self.err(
                        Some(i),
                        format!("`select` condition has type {c}; expected i1 or an i1 tile of {r}'s lanes"),
                    );
                }
            }
            Opcode::Cast | Opcode::Bitcast => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.res(i, 0));
                let same_shape = a.is_tile() == r.is_tile() && a.lanes() == r.lanes();
                if !(is_number(a) && is_number(r) && same_shape) {
                    self.err(Some(i), format!("`{m}` converts numbers of equal lanes, found {a} -> {r}"));
                } else if data.opcode == Opcode::Bitcast && a.dtype().bits() != r.dtype().bits() {
                    self.err(Some(i), format!("`bitcast` keeps the bit width, found {a} -> {r}"));
                }
            }
            Opcode::PtrAdd => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (p, o, r) = (self.ty(args[0]), self.ty(args[1]), self.res(i, 0));
                let ok = matches!(p, Ty::Ptr(_)) && is_int_scalar(o) && r == p;
                if !(ok) {
                    self.err(
                        Some(i),
                        format!("`ptr_add` adds an integer scalar to a pointer, found {p}, {o} -> {r}"),
                    );
                }
            }
            Opcode::Load { addr, has_mask, has_other, site, volatile } => {
                self.site(i, site, true);
                if volatile && (addr != Addressing::Scalar || self.res(i, 0).is_tile()) {
                    self.err(Some(i), "a volatile load must be a scalar load".to_string());
                }
                if !self.counts(i, 2 + has_mask as usize + has_other as usize, 1) {
                    return;
                }
                let r = self.res(i, 0);
                let Some(t) = self.access(i, addr, Some(r)) else { return };
                if !(r == t) {
                    self.err(Some(i), format!("the load gives {t}, not {r}"));
                }
                if has_mask {
                    self.mask(i, args[2], t);
                }
                if has_other {
                    let o = args[2 + has_mask as usize];
                    let ot = self.ty(o);
                    let ok = ot == t || (t.is_tile() && ot == Ty::Scalar(t.dtype()));
                    if !(ok) {
                        self.err(
                            Some(i),
                            format!("`other` {} has type {ot}, expected {t} or its scalar", self.name(o)),
                        );
                    }
                }
            }
            Opcode::Store { addr, has_mask, site, stream, check_only } => {
                self.site(i, site, true);
                if stream && check_only {
                    self.err(Some(i), "a store that only checks its bounds does not stream");
                }
                if !self.counts(i, 3 + has_mask as usize + stream as usize, 0) {
                    return;
                }
                let Some(t) = self.access(i, addr, Some(self.ty(args[2]))) else { return };
                self.value_of(i, args[2], "the stored value", t);
                if has_mask {
                    self.mask(i, args[3], t);
                }
                if stream {
                    let ok = self.ty(args[3 + has_mask as usize]);
                    if ok != Ty::Scalar(DType::I1) || addr != Addressing::Contiguous || has_mask {
                        self.err(
                            Some(i),
                            format!(
                                "a streaming store is unmasked and contiguous with an i1 flag, found {ok}"
                            ),
                        );
                    }
                }
            }
            Opcode::Prefetch { .. } => {
                if !self.counts(i, 2, 0) {
                    return;
                }
                let (p, o) = (self.ty(args[0]), self.ty(args[1]));
                if !(matches!(p, Ty::Ptr(_)) && is_int_scalar(o)) {
                    self.err(
                        Some(i),
                        format!("`prefetch` takes a pointer and an integer scalar offset, found {p}, {o}"),
                    );
                }
            }
            Opcode::LineGap => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (p, r) = (self.ty(args[0]), self.res(i, 0));
                if !(matches!(p, Ty::Ptr(_)) && r == Ty::Scalar(DType::I32)) {
                    self.err(Some(i), format!("`line_gap` takes a pointer to i32, found {p} -> {r}"));
                }
            }
            Opcode::StreamOk => {
                if !self.counts(i, 2, 1) {
                    return;
                }
                let (p, n, r) = (self.ty(args[0]), self.ty(args[1]), self.res(i, 0));
                if !(matches!(p, Ty::Ptr(_)) && n == Ty::Scalar(DType::I32) && r == Ty::Scalar(DType::I1)) {
                    self.err(
                        Some(i),
                        format!("`stream_ok` takes a pointer and an i32 count to i1, found {p}, {n} -> {r}"),
                    );
                }
            }
            Opcode::Atomic { op, addr, has_mask, site } => {
                self.site(i, site, true);
                if !self.counts(i, 3 + has_mask as usize, 1) {
                    return;
                }
                let Some(t) = self.access(i, addr, Some(self.ty(args[2]))) else { return };
                self.value_of(i, args[2], "the operand", t);
                let r = self.res(i, 0);
                if !(r == t) {
                    self.err(Some(i), format!("the atomic gives {t}, not {r}"));
                }
                if has_mask {
                    self.mask(i, args[3], t);
                }
                if matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) && !t.dtype().is_int() {
                    self.err(Some(i), format!("bitwise atomics need integers, found {t}"));
                }
            }
            Opcode::AtomicCas { addr, site } => {
                self.site(i, site, true);
                if !self.counts(i, 4, 1) {
                    return;
                }
                let Some(t) = self.access(i, addr, Some(self.ty(args[3]))) else { return };
                self.value_of(i, args[2], "the compared value", t);
                self.value_of(i, args[3], "the new value", t);
                let r = self.res(i, 0);
                if !(r == t) {
                    self.err(Some(i), format!("the compare-and-swap gives {t}, not {r}"));
                }
            }
            Opcode::ScratchLoad(slot) | Opcode::ScratchStore(slot) => {
                let load = matches!(data.opcode, Opcode::ScratchLoad(_));
                let ok = if load { self.counts(i, 1, 1) } else { self.counts(i, 2, 0) };
                if !ok {
                    return;
                }
                let Some(s) = f.scratch.get(slot as usize).copied() else {
                    self.err(Some(i), format!("scratch buffer s{slot} does not exist"));
                    return;
                };
                let index = self.ty(args[0]);
                if !(is_int_scalar(index)) {
                    self.err(Some(i), format!("the scratch index has type {index}, not an integer scalar"));
                }
                let t = if load { self.res(i, 0) } else { self.ty(args[1]) };
                let ok = is_number(t) && t.dtype() == s.dtype && t.lanes() as u32 <= s.len;
                if !(ok) {
                    self.err(
                        Some(i),
                        format!(
                            "scratch buffer s{slot} holds {} {}, which cannot move as {t}",
                            s.len, s.dtype
                        ),
                    );
                }
            }
            Opcode::RowLoad { slot, site, .. } | Opcode::RowStore { slot, site, .. } => {
                self.site(i, site, true);
                if let Opcode::RowLoad { once: Some(k), .. } = data.opcode
                    && (k as u32 + 1) * 4 > crate::SCRATCH_FLAG_BYTES
                {
                    self.err(Some(i), format!("flag {k} is past the scratch area's zeroed flag bytes"));
                }
                let stream = matches!(data.opcode, Opcode::RowStore { stream: true, .. });
                if !self.counts(i, 3 + stream as usize, 0) {
                    return;
                }
                if stream {
                    self.value_of(i, args[3], "the streaming flag", Ty::Scalar(DType::I1));
                }
                self.row(i, slot);
            }
            Opcode::ReduceLanes(_) => {
                if !self.counts(i, 1, 1) {
                    return;
                }
                let (a, r) = (self.ty(args[0]), self.res(i, 0));
                let ok = a.is_tile() && is_number(a) && r == Ty::Scalar(a.dtype());
                if !(ok) {
                    self.err(
                        Some(i),
                        format!(
                            "`reduce_lanes` combines a tile into a scalar of its dtype, found {a} -> {r}"
                        ),
                    );
                }
            }
            Opcode::For => self.for_(i),
            Opcode::While => self.while_(i),
            Opcode::If => self.if_(i),
            Opcode::Yield | Opcode::Condition => {
                self.counts(i, args.len(), 0);
                if data.opcode == Opcode::Condition {
                    let ok = args.first().is_some_and(|&a| self.ty(a) == Ty::Scalar(DType::I1));
                    if !(ok) {
                        self.err(Some(i), "`condition` needs a scalar i1 flag first".to_string());
                    }
                }
            }
            Opcode::Assert { site } => {
                self.site(i, site, false);
                if !self.counts(i, 1, 0) {
                    return;
                }
                let c = self.ty(args[0]);
                if !(c.dtype() == DType::I1 && is_number(c)) {
                    self.err(Some(i), format!("`assert` needs i1, found {c}"));
                }
            }
            Opcode::Print(k) => {
                self.counts(i, args.len(), 0);
                if k as usize >= f.strings.len() {
                    self.err(Some(i), format!("string {k} does not exist"));
                }
            }
        }
    }

    /// Stores that stream share one flag per loop, defined outside it, and sit in the
    /// straight-line body of a `for` (code generation runs two copies of such a loop).
    fn streaming_body(&mut self, i: Inst, r: &Region) {
        let f = self.f;
        let flags: Vec<Value> = r.insts.iter().filter_map(|&s| f.insts.get(s)?.stream_flag()).collect();
        let Some(&flag) = flags.first() else { return };
        if flags.iter().any(|&g| g != flag) {
            self.err(Some(i), "the streaming stores of a loop share one flag".to_string());
        }
        let inside = |v: Value| match f.values.get(v).map(|d| d.def) {
            Some(ValueDef::Result(d, _)) => r.insts.contains(&d),
            Some(ValueDef::RegionArg(d, _, _)) => d == i,
            None => false,
        };
        if inside(flag) {
            self.err(Some(i), format!("the streaming flag {} is defined inside the loop", self.name(flag)));
        }
        if r.insts.iter().any(|&s| f.insts.get(s).is_some_and(|d| d.opcode.is_control_flow())) {
            self.err(Some(i), "a loop with streaming stores has control flow in its body".to_string());
        }
    }

    fn for_(&mut self, i: Inst) {
        let data = &self.f.insts[i];
        if data.args.len() < 3 {
            self.err(
                Some(i),
                format!("`for` takes lb, ub, step and inits, found {} operand(s)", data.args.len()),
            );
            return;
        }
        let (lb, ub, step) = (self.ty(data.args[0]), self.ty(data.args[1]), self.ty(data.args[2]));
        if !(is_int_scalar(lb) && lb == ub && ub == step) {
            self.err(
                Some(i),
                format!("`for` bounds and step are integer scalars of one type, found {lb}, {ub}, {step}"),
            );
        }
        let inits: Vec<Ty> = data.args[3..].iter().map(|&a| self.ty(a)).collect();
        let results: Vec<Ty> = data.results.iter().map(|&r| self.ty(r)).collect();
        if results != inits {
            self.err(
                Some(i),
                format!(
                    "`for` results {} differ from its inits {}",
                    types_text(&results),
                    types_text(&inits)
                ),
            );
        }
        let Some(r) = data.regions.first() else { return };
        self.streaming_body(i, r);
        let mut want = vec![lb];
        want.extend(&inits);
        let got = self.region_arg_types(r);
        if got != want {
            self.err(
                Some(i),
                format!(
                    "`for` region arguments {} should be (iv, carried) {}",
                    types_text(&got),
                    types_text(&want)
                ),
            );
        }
        if let Some(y) = self.terminator_types(r, Opcode::Yield)
            && y != inits
        {
            self.err(
                Some(i),
                format!("`for` body yields {}, expected {}", types_text(&y), types_text(&inits)),
            );
        }
    }

    fn while_(&mut self, i: Inst) {
        let data = &self.f.insts[i];
        let inits: Vec<Ty> = data.args.iter().map(|&a| self.ty(a)).collect();
        let results: Vec<Ty> = data.results.iter().map(|&r| self.ty(r)).collect();
        let [before, after] = &data.regions[..] else { return };
        let carried = self.region_arg_types(before);
        if carried != inits {
            self.err(
                Some(i),
                format!(
                    "`while` condition region arguments {} differ from its inits {}",
                    types_text(&carried),
                    types_text(&inits)
                ),
            );
        }
        let fwd = self.region_arg_types(after);
        if let Some(c) = self.terminator_types(before, Opcode::Condition)
            && c.get(1..).is_some_and(|c| c != fwd)
        {
            self.err(
                Some(i),
                format!("`condition` forwards {}, the body takes {}", types_text(&c[1..]), types_text(&fwd)),
            );
        }
        if results != fwd {
            self.err(
                Some(i),
                format!(
                    "`while` results {} differ from the forwarded values {}",
                    types_text(&results),
                    types_text(&fwd)
                ),
            );
        }
        if let Some(y) = self.terminator_types(after, Opcode::Yield)
            && y != inits
        {
            self.err(
                Some(i),
                format!("`while` body yields {}, expected {}", types_text(&y), types_text(&inits)),
            );
        }
    }

    fn if_(&mut self, i: Inst) {
        let data = &self.f.insts[i];
        if !self.counts(i, 1, data.results.len()) {
            return;
        }
        let c = self.ty(data.args[0]);
        if !(c == Ty::Scalar(DType::I1)) {
            self.err(Some(i), format!("`if` needs a scalar i1 condition, found {c}"));
        }
        let results: Vec<Ty> = data.results.iter().map(|&r| self.ty(r)).collect();
        for (k, r) in data.regions.iter().enumerate() {
            if !r.args.is_empty() {
                self.err(Some(i), format!("`if` region {k} has arguments"));
            }
            if let Some(y) = self.terminator_types(r, Opcode::Yield)
                && y != results
            {
                self.err(
                    Some(i),
                    format!("`if` region {k} yields {}, expected {}", types_text(&y), types_text(&results)),
                );
            }
        }
    }
}
