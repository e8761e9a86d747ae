//! Provenance: the pointer argument every pointer value derives from.
//!
//! `root(p) = slot` for every pointer-typed value, scalar or block:
//! `arg => its slot`, `ptr_add(p, o) / splat(p) / broadcast(p) / expand_dims(p) => root(p)`,
//! `select(c, a, b) => root(a)` when `root(a) == root(b)`, a loop-carried or `if`-merged
//! pointer => the root shared by its init and every value flowing into it.
//!
//! Each memory access names its root in its site, and a safe launch checks the access
//! against that argument's buffer. Distinct arguments are assumed not to overlap
//! (the hazard analysis of [`fusion`](crate::fusion) reasons per root).
//!
//! Not handled (a [`TileError`]): pointers selected from different arguments, pointers
//! made from integers, a loop that changes the argument its pointer derives from.

use std::collections::HashMap;

use lnc_bir::{Function, Inst, Opcode, Value};

use crate::TileError;

/// The root argument slot of every pointer value.
pub(crate) struct Provenance {
    root: HashMap<Value, u32>,
}

impl Provenance {
    /// The ABI slot of the argument `p` derives from (`p` is pointer-typed).
    pub(crate) fn root(&self, p: Value) -> u32 {
        self.root[&p]
    }
}

pub(crate) fn analyze(f: &Function) -> Result<Provenance, TileError> {
    let mut a = Analyzer { f, root: HashMap::new() };
    for p in &f.params {
        if f.ty(p.value).elem.is_ptr() {
            a.root.insert(p.value, p.slot);
        }
    }
    a.region(&f.body.insts)?;
    Ok(Provenance { root: a.root })
}

struct Analyzer<'a> {
    f: &'a Function,
    root: HashMap<Value, u32>,
}

impl Analyzer<'_> {
    fn is_ptr(&self, v: Value) -> bool {
        self.f.ty(v).elem.is_ptr()
    }

    fn get(&self, v: Value, at: Inst) -> Result<u32, TileError> {
        self.root.get(&v).copied().ok_or_else(|| {
            TileError::new(
                self.f.span(at),
                "this pointer is not derived from a pointer argument of the kernel",
            )
        })
    }

    /// Records `root` for `v`, or checks it against the root already flowing into `v`.
    fn merge(&mut self, v: Value, root: u32, at: Inst, what: &str) -> Result<(), TileError> {
        match self.root.insert(v, root) {
            Some(old) if old != root => Err(TileError::new(
                self.f.span(at),
                format!(
                    "{what} mixes pointers into different arguments (slots {old} and {root}); \
                     each pointer must derive from one argument"
                ),
            )),
            _ => Ok(()),
        }
    }

    fn region(&mut self, insts: &[Inst]) -> Result<(), TileError> {
        for &i in insts {
            self.inst(i)?;
        }
        Ok(())
    }

    /// The roots of the values a region's terminator passes on (skipping `condition`'s flag).
    fn terminator_roots(&self, insts: &[Inst], skip: usize) -> Vec<Option<u32>> {
        let Some(&t) = insts.last() else {
            return Vec::new();
        };
        let data = self.f.inst(t);
        if !data.opcode.is_terminator() {
            return Vec::new();
        }
        data.args.iter().skip(skip).map(|v| self.root.get(v).copied()).collect()
    }

    fn inst(&mut self, i: Inst) -> Result<(), TileError> {
        let f = self.f;
        let data = f.inst(i);
        match data.opcode {
            Opcode::PtrAdd | Opcode::Splat | Opcode::Broadcast | Opcode::ExpandDims(_)
                if self.is_ptr(data.results[0]) =>
            {
                let r = self.get(data.args[0], i)?;
                self.root.insert(data.results[0], r);
            }
            Opcode::Select if self.is_ptr(data.results[0]) => {
                let (a, b) = (self.get(data.args[1], i)?, self.get(data.args[2], i)?);
                if a != b {
                    return Err(TileError::new(
                        f.span(i),
                        format!(
                            "`where` selects between pointers into different arguments \
                             (slots {a} and {b}); each pointer must derive from one argument"
                        ),
                    ));
                }
                self.root.insert(data.results[0], a);
            }
            Opcode::For => {
                let body = &data.regions[0];
                for (k, &init) in data.args[3..].iter().enumerate() {
                    if self.is_ptr(init) {
                        let r = self.get(init, i)?;
                        self.root.insert(body.args[k + 1], r);
                        self.root.insert(data.results[k], r);
                    }
                }
                self.region(&body.insts)?;
                let yielded = self.terminator_roots(&body.insts, 0);
                for (k, r) in yielded.into_iter().enumerate() {
                    if let Some(r) = r {
                        self.merge(data.results[k], r, i, "this loop")?;
                    }
                }
            }
            Opcode::While => {
                let (cond, body) = (&data.regions[0], &data.regions[1]);
                for (k, &init) in data.args.iter().enumerate() {
                    if self.is_ptr(init) {
                        let r = self.get(init, i)?;
                        self.root.insert(cond.args[k], r);
                    }
                }
                self.region(&cond.insts)?;
                for (k, r) in self.terminator_roots(&cond.insts, 1).into_iter().enumerate() {
                    if let Some(r) = r {
                        self.root.insert(body.args[k], r);
                        self.root.insert(data.results[k], r);
                    }
                }
                self.region(&body.insts)?;
                for (k, r) in self.terminator_roots(&body.insts, 0).into_iter().enumerate() {
                    if let Some(r) = r {
                        self.merge(cond.args[k], r, i, "this loop")?;
                    }
                }
            }
            Opcode::If => {
                for r in &data.regions {
                    self.region(&r.insts)?;
                    for (k, root) in self.terminator_roots(&r.insts, 0).into_iter().enumerate() {
                        if let Some(root) = root {
                            self.merge(data.results[k], root, i, "this `if`")?;
                        }
                    }
                }
            }
            _ => {
                if data.results.iter().any(|&r| self.is_ptr(r)) {
                    return Err(TileError::new(
                        f.span(i),
                        format!(
                            "a pointer made by `{}` is not derived from a pointer argument",
                            data.opcode.mnemonic()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
