//! A small reference interpreter of the loop IR, so the tests can check that a tiling
//! computes what the block-IR interpreter computes on the same inputs.
//!
//! Numbers are held wide (`i64` wrapped to their dtype, `f64` rounded to theirs);
//! integer division by zero gives 0 (as the Cranelift code does); every access is
//! checked against its buffer, and a masked-off lane is never touched.

use std::collections::{HashMap, HashSet};

use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum S {
    I(i64),
    F(f64),
    P(usize, i64),
}

#[derive(Clone, Debug)]
enum V {
    S(S),
    T(Vec<S>),
}

impl V {
    fn s(&self) -> S {
        match self {
            V::S(s) => *s,
            V::T(_) => panic!("a tile where a scalar is expected"),
        }
    }
    fn lanes(&self, n: usize) -> Vec<S> {
        match self {
            V::S(s) => vec![*s; n],
            V::T(t) => t.clone(),
        }
    }
}

fn int(s: S) -> i64 {
    match s {
        S::I(i) => i,
        other => panic!("expected an integer, found {other:?}"),
    }
}

fn float(s: S) -> f64 {
    match s {
        S::F(x) => x,
        other => panic!("expected a float, found {other:?}"),
    }
}

fn read(b: &Buffer, k: i64) -> S {
    let d = b.dtype;
    let n = d.size() as usize;
    assert!(
        k >= 0 && (k as usize) < b.data.len() / n,
        "load out of bounds: element {k} of {}",
        b.data.len() / n
    );
    let bytes = &b.data[k as usize * n..k as usize * n + n];
    let mut raw = [0u8; 8];
    raw[..n].copy_from_slice(bytes);
    let bits = u64::from_le_bytes(raw);
    match d {
        DType::F32 => S::F(f32::from_bits(bits as u32) as f64),
        DType::F64 => S::F(f64::from_bits(bits)),
        DType::F16 => S::F(half::f16::from_bits(bits as u16).to_f64()),
        DType::BF16 => S::F(half::bf16::from_bits(bits as u16).to_f64()),
        d if d.is_float() => panic!("{d} is not supported by the test interpreter"),
        d => S::I(d.wrap_int(bits as i64)),
    }
}

fn write(b: &mut Buffer, k: i64, s: S) {
    let d = b.dtype;
    let n = d.size() as usize;
    assert!(
        k >= 0 && (k as usize) < b.data.len() / n,
        "store out of bounds: element {k} of {}",
        b.data.len() / n
    );
    let bits: u64 = match (d, s) {
        (DType::F32, S::F(x)) => (x as f32).to_bits() as u64,
        (DType::F64, S::F(x)) => x.to_bits(),
        // Rounded once, to nearest even: what a cast to the dtype or a `row_store` does.
        (DType::F16, S::F(x)) => half::f16::from_f64(x).to_bits() as u64,
        (DType::BF16, S::F(x)) => half::bf16::from_f64(x).to_bits() as u64,
        (_, S::I(i)) => i as u64,
        other => panic!("cannot store {other:?}"),
    };
    b.data[k as usize * n..k as usize * n + n].copy_from_slice(&bits.to_le_bytes()[..n]);
}

fn binary(op: BinOp, d: DType, a: S, b: S) -> S {
    if d.is_float() {
        let (x, y) = (float(a), float(b));
        let r = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            BinOp::IDiv => (x / y).floor(),
            BinOp::Rem => x % y,
            BinOp::Min => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                }
            }
            BinOp::Max => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                }
            }
            BinOp::Pow => x.powf(y),
            _ => panic!("{op:?} on floats"),
        };
        return S::F(d.round_float(r));
    }
    if let (S::P(buf, off), S::I(k)) = (a, b) {
        return S::P(buf, off + k);
    }
    let (x, y) = (int(a), int(b));
    let unsigned = !d.is_signed();
    let ux = |v: i64| if unsigned { (v as u64) & mask(d) } else { v as u64 };
    let r = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::IDiv if y == 0 => 0,
        BinOp::IDiv if unsigned => (ux(x) / ux(y)) as i64,
        BinOp::IDiv => x.wrapping_div(y),
        BinOp::Rem if y == 0 => 0,
        BinOp::Rem if unsigned => (ux(x) % ux(y)) as i64,
        BinOp::Rem => x.wrapping_rem(y),
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl if y < 0 || y >= d.bits() as i64 => 0,
        BinOp::Shl => x.wrapping_shl(y as u32),
        BinOp::Shr if unsigned => {
            if y < 0 || y >= d.bits() as i64 {
                0
            } else {
                (ux(x) >> y) as i64
            }
        }
        BinOp::Shr => x >> y.clamp(0, 63),
        BinOp::Min if unsigned => ux(x).min(ux(y)) as i64,
        BinOp::Min => x.min(y),
        BinOp::Max if unsigned => ux(x).max(ux(y)) as i64,
        BinOp::Max => x.max(y),
        _ => panic!("{op:?} on integers"),
    };
    S::I(d.wrap_int(r))
}

fn mask(d: DType) -> u64 {
    if d.bits() == 64 { u64::MAX } else { (1u64 << d.bits()) - 1 }
}

fn cmp(op: CmpOp, d: DType, a: S, b: S) -> S {
    let o = if d.is_float() {
        float(a).partial_cmp(&float(b))
    } else if d.is_signed() {
        Some(int(a).cmp(&int(b)))
    } else {
        Some(((int(a) as u64) & mask(d)).cmp(&((int(b) as u64) & mask(d))))
    };
    use std::cmp::Ordering::*;
    let r = match (op, o) {
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Equal,
        (CmpOp::Ne, Some(o)) => o != Equal,
        (CmpOp::Lt, Some(o)) => o == Less,
        (CmpOp::Le, Some(o)) => o != Greater,
        (CmpOp::Gt, Some(o)) => o == Greater,
        (CmpOp::Ge, Some(o)) => o != Less,
    };
    S::I(r as i64)
}

fn unary(op: UnOp, d: DType, a: S) -> S {
    if d.is_float() {
        let x = float(a);
        // exp and log of f32 (and of halves, computed in f32) are lnc's own.
        let own = if d == DType::F64 { None } else { lnc_bir::math::unary_f32(op, x as f32) };
        if let Some(r) = own {
            return S::F(d.round_float(f64::from(r)));
        }
        let r = match op {
            UnOp::Neg => -x,
            UnOp::Sqrt => x.sqrt(),
            UnOp::Rsqrt => 1.0 / x.sqrt(),
            UnOp::Exp => x.exp(),
            UnOp::Exp2 => x.exp2(),
            UnOp::Log => x.ln(),
            UnOp::Log2 => x.log2(),
            UnOp::Abs => x.abs(),
            UnOp::Sin => x.sin(),
            UnOp::Cos => x.cos(),
            UnOp::Floor => x.floor(),
            UnOp::Ceil => x.ceil(),
            UnOp::Not => panic!("not on floats"),
        };
        return S::F(d.round_float(r));
    }
    let x = int(a);
    let r = match op {
        UnOp::Neg => x.wrapping_neg(),
        UnOp::Not => !x,
        UnOp::Abs => x.wrapping_abs(),
        _ => panic!("{op:?} on integers"),
    };
    S::I(d.wrap_int(r))
}

fn cast(from: DType, to: DType, a: S) -> S {
    match (from.is_float(), to.is_float()) {
        (true, true) => S::F(to.round_float(float(a))),
        (false, true) => {
            let i = int(a);
            let x = if from.is_signed() { i as f64 } else { ((i as u64) & mask(from)) as f64 };
            S::F(to.round_float(x))
        }
        (true, false) => {
            let x = float(a);
            if to == DType::I1 {
                return S::I((x != 0.0) as i64);
            }
            let i = if x.is_nan() {
                0
            } else if to.is_signed() {
                x as i64
            } else {
                x as u64 as i64
            };
            S::I(to.wrap_int(i))
        }
        (false, false) => {
            let i = int(a);
            if to == DType::I1 {
                return S::I(((i as u64 & mask(from)) != 0) as i64);
            }
            let i = if from.is_signed() { i } else { ((i as u64) & mask(from)) as i64 };
            S::I(to.wrap_int(i))
        }
    }
}

fn reduce_lanes(op: ReduceOp, d: DType, mut v: Vec<S>) -> S {
    let bop = match op {
        ReduceOp::Sum => BinOp::Add,
        ReduceOp::Max => BinOp::Max,
        ReduceOp::Min => BinOp::Min,
    };
    while v.len() > 1 {
        let h = v.len() / 2;
        v = (0..h).map(|k| binary(bop, d, v[k], v[k + h])).collect();
    }
    v[0]
}

/// Why a program stopped.
#[derive(Debug)]
pub enum Stop {
    /// An `assert` failed at this site.
    Assert(u32),
}

/// How a launch's stores met the cache lines (64 bytes, buffers starting on one, as
/// `line_gap` assumes here): the elements each program stored last by streaming
/// (non-temporal) and by cached stores, and the lines a program wrote both ways.
#[derive(Debug, Default)]
pub struct Lines {
    pub streamed: usize,
    pub cached: usize,
    pub mixed: Vec<(usize, i64)>,
    /// The lines a program that streamed wrote by cached stores without having fetched
    /// them for ownership first (`prefetch.write`).
    pub cold: Vec<(usize, i64)>,
}

struct Machine<'a> {
    f: &'a Function,
    /// Per line (buffer, index) the program wrote: (streamed, cached).
    lines: HashMap<(usize, i64), (bool, bool)>,
    /// The lines the program prefetched for writing, and those it then wrote cached
    /// without.
    owned: HashSet<(usize, i64)>,
    cold: HashSet<(usize, i64)>,
    /// Per element (buffer, index) the program wrote: whether streamed.
    stored: HashMap<(usize, i64), bool>,
    vals: HashMap<Value, V>,
    scratch: Vec<Vec<S>>,
    pid: [u32; 3],
    grid: [u32; 3],
    bufs: &'a mut [Buffer],
}

enum Exit {
    Yield(Vec<V>),
    Condition(bool, Vec<V>),
    End,
}

impl Machine<'_> {
    fn get(&self, v: Value) -> V {
        self.vals.get(&v).cloned().unwrap_or_else(|| panic!("{v} has no value"))
    }

    fn region(&mut self, r: &Region, args: Vec<V>) -> Result<Exit, Stop> {
        for (&a, v) in r.args.iter().zip(args) {
            self.vals.insert(a, v);
        }
        for &i in &r.insts {
            let data = &self.f.insts[i];
            match data.opcode {
                Opcode::Yield => return Ok(Exit::Yield(data.args.iter().map(|&a| self.get(a)).collect())),
                Opcode::Condition => {
                    let flag = int(self.get(data.args[0]).s()) != 0;
                    let fwd = data.args[1..].iter().map(|&a| self.get(a)).collect();
                    return Ok(Exit::Condition(flag, fwd));
                }
                _ => self.inst(i)?,
            }
        }
        Ok(Exit::End)
    }

    fn addresses(&self, addr: Addressing, base: S, off: &V, lanes: usize) -> Vec<(usize, i64)> {
        let S::P(buf, b) = base else { panic!("not a pointer: {base:?}") };
        match addr {
            Addressing::Scalar => vec![(buf, b + int(off.s()))],
            Addressing::Contiguous => (0..lanes as i64).map(|k| (buf, b + int(off.s()) + k)).collect(),
            Addressing::Gather => off.lanes(lanes).into_iter().map(|o| (buf, b + int(o))).collect(),
        }
    }

    fn inst(&mut self, i: Inst) -> Result<(), Stop> {
        let f = self.f;
        let data = &f.insts[i];
        let a: Vec<V> = data.args.iter().map(|&x| self.get(x)).collect();
        let rty = data.results.first().map(|&r| f.ty(r));
        let lanes = rty.map_or(1, |t| t.lanes() as usize);
        let each = |n: usize, g: &dyn Fn(usize) -> S| -> V {
            if rty.is_some_and(|t| t.is_tile()) { V::T((0..n).map(g).collect()) } else { V::S(g(0)) }
        };
        let lane = |v: &V, k: usize| match v {
            V::S(s) => *s,
            V::T(t) => t[k],
        };
        let out: Option<V> = match data.opcode {
            Opcode::Arg(_) | Opcode::For | Opcode::While | Opcode::If => {
                unreachable!("handled by the caller")
            }
            Opcode::Const(c) => Some(V::S(match c {
                Const::Int(k) => S::I(k),
                Const::Float(x) => S::F(x),
            })),
            Opcode::ProgramId(ax) => Some(V::S(S::I(self.pid[ax as usize] as i64))),
            Opcode::NumPrograms(ax) => Some(V::S(S::I(self.grid[ax as usize] as i64))),
            // Whether stores bypass the caches does not change what they store: every
            // launch is large enough here, and the pointer must be 16-byte aligned (the
            // buffers start on a line).
            Opcode::StreamOk => {
                let size = f.ty(data.args[0]).dtype().size() as i64;
                let S::P(_, offset) = a[0].s() else { panic!("stream_ok of a non-pointer") };
                Some(V::S(S::I((offset * size % 16 == 0) as i64)))
            }
            // Buffers start on a line here: the gap follows from the element offset.
            Opcode::LineGap => {
                let size = f.ty(data.args[0]).dtype().size() as i64;
                let S::P(_, offset) = a[0].s() else { panic!("line_gap of a non-pointer") };
                Some(V::S(S::I((-(offset * size)).rem_euclid(64) / size)))
            }
            // A hint: no effect a program can see. Write prefetches are recorded.
            Opcode::Prefetch { write } => {
                if write {
                    let size = f.ty(data.args[0]).dtype().size() as i64;
                    let S::P(b, offset) = a[0].s() else { panic!("prefetch of a non-pointer") };
                    self.owned.insert((b, ((offset + int(a[1].s())) * size).div_euclid(64)));
                }
                None
            }
            Opcode::Splat => Some(V::T(vec![a[0].s(); lanes])),
            Opcode::Iota => {
                let d = rty.unwrap().dtype();
                let s = int(a[0].s());
                Some(V::T((0..lanes as i64).map(|k| S::I(d.wrap_int(s.wrapping_add(k)))).collect()))
            }
            Opcode::Binary(op) => {
                let d = f.ty(data.args[0]).dtype();
                Some(each(lanes, &|k| binary(op, d, lane(&a[0], k), lane(&a[1], k))))
            }
            Opcode::PtrAdd => Some(V::S(binary(BinOp::Add, DType::I64, a[0].s(), a[1].s()))),
            Opcode::Cmp(op) => {
                let d = f.ty(data.args[0]).dtype();
                Some(each(lanes, &|k| cmp(op, d, lane(&a[0], k), lane(&a[1], k))))
            }
            Opcode::Unary(op) => {
                let d = f.ty(data.args[0]).dtype();
                Some(each(lanes, &|k| unary(op, d, lane(&a[0], k))))
            }
            Opcode::Select => Some(each(lanes, &|k| {
                if int(lane(&a[0], k)) != 0 { lane(&a[1], k) } else { lane(&a[2], k) }
            })),
            Opcode::Fma => {
                let d = rty.unwrap().dtype();
                Some(each(lanes, &|k| {
                    S::F(lnc_bir::interp::fma(
                        d,
                        float(lane(&a[0], k)),
                        float(lane(&a[1], k)),
                        float(lane(&a[2], k)),
                    ))
                }))
            }
            Opcode::Cast => {
                let (from, to) = (f.ty(data.args[0]).dtype(), rty.unwrap().dtype());
                Some(each(lanes, &|k| cast(from, to, lane(&a[0], k))))
            }
            Opcode::Bitcast => panic!("bitcast is not supported by the test interpreter"),
            Opcode::Load { addr, has_mask, has_other, .. } => {
                let d = rty.unwrap().dtype();
                let addrs = self.addresses(addr, a[0].s(), &a[1], lanes);
                let zero = if d.is_float() { S::F(0.0) } else { S::I(0) };
                let vals: Vec<S> = addrs
                    .iter()
                    .enumerate()
                    .map(|(k, &(b, o))| {
                        let on = !has_mask || int(lane(&a[2], k)) != 0;
                        if on {
                            read(&self.bufs[b], o)
                        } else if has_other {
                            lane(&a[2 + has_mask as usize], k)
                        } else {
                            zero
                        }
                    })
                    .collect();
                Some(if rty.unwrap().is_tile() { V::T(vals) } else { V::S(vals[0]) })
            }
            Opcode::Store { addr, has_mask, check_only: true, .. } => {
                let n = f.ty(data.args[2]).lanes() as usize;
                for (k, (b, o)) in self.addresses(addr, a[0].s(), &a[1], n).into_iter().enumerate() {
                    let len = self.bufs[b].data.len() as i64 / i64::from(self.bufs[b].dtype.size());
                    if !has_mask || int(lane(&a[3], k)) != 0 {
                        assert!((0..len).contains(&o), "checked store out of bounds: element {o} of {len}");
                    }
                }
                None
            }
            Opcode::Store { addr, has_mask, stream, .. } => {
                let n = f.ty(data.args[2]).lanes() as usize;
                let size = f.ty(data.args[2]).dtype().size() as i64;
                let addrs = self.addresses(addr, a[0].s(), &a[1], n);
                let nt = stream && int(a[3 + has_mask as usize].s()) != 0;
                if let (true, Some(&(_, o))) = (nt, addrs.first()) {
                    assert_eq!(o * size % 16, 0, "a streaming store at element {o} is not 16-byte aligned");
                }
                for (k, (b, o)) in addrs.into_iter().enumerate() {
                    if !has_mask || int(lane(&a[3], k)) != 0 {
                        write(&mut self.bufs[b], o, lane(&a[2], k));
                        let key = (b, (o * size).div_euclid(64));
                        let line = self.lines.entry(key).or_default();
                        if nt {
                            line.0 = true;
                        } else {
                            line.1 = true;
                            if !self.owned.contains(&key) {
                                self.cold.insert(key);
                            }
                        }
                        self.stored.insert((b, o), nt);
                    }
                }
                None
            }
            Opcode::Atomic { op, addr, has_mask, .. } => {
                let d = rty.unwrap().dtype();
                let addrs = self.addresses(addr, a[0].s(), &a[1], lanes);
                let mut olds = Vec::new();
                for (k, (b, o)) in addrs.into_iter().enumerate() {
                    if has_mask && int(lane(&a[3], k)) == 0 {
                        olds.push(if d.is_float() { S::F(0.0) } else { S::I(0) });
                        continue;
                    }
                    let old = read(&self.bufs[b], o);
                    let v = lane(&a[2], k);
                    let new = match op {
                        AtomicOp::Xchg => v,
                        AtomicOp::Add => binary(BinOp::Add, d, old, v),
                        AtomicOp::Max => binary(BinOp::Max, d, old, v),
                        AtomicOp::Min => binary(BinOp::Min, d, old, v),
                        AtomicOp::And => binary(BinOp::And, d, old, v),
                        AtomicOp::Or => binary(BinOp::Or, d, old, v),
                        AtomicOp::Xor => binary(BinOp::Xor, d, old, v),
                    };
                    write(&mut self.bufs[b], o, new);
                    olds.push(old);
                }
                Some(if rty.unwrap().is_tile() { V::T(olds) } else { V::S(olds[0]) })
            }
            Opcode::AtomicCas { addr, .. } => {
                let addrs = self.addresses(addr, a[0].s(), &a[1], lanes);
                let mut olds = Vec::new();
                for (k, (b, o)) in addrs.into_iter().enumerate() {
                    let old = read(&self.bufs[b], o);
                    if old == lane(&a[2], k) {
                        write(&mut self.bufs[b], o, lane(&a[3], k));
                    }
                    olds.push(old);
                }
                Some(if rty.unwrap().is_tile() { V::T(olds) } else { V::S(olds[0]) })
            }
            Opcode::ScratchLoad(slot) => {
                let base = int(a[0].s()) as usize;
                let buf = &self.scratch[slot as usize];
                assert!(base + lanes <= buf.len(), "scratch load past s{slot}");
                let vals = buf[base..base + lanes].to_vec();
                assert!(
                    vals.iter().all(|&s| s != S::P(usize::MAX, 0)),
                    "scratch s{slot} read at {base} before being written"
                );
                Some(if rty.unwrap().is_tile() { V::T(vals) } else { V::S(vals[0]) })
            }
            Opcode::ScratchStore(slot) => {
                let base = int(a[0].s()) as usize;
                let vals = match &a[1] {
                    V::S(s) => vec![*s],
                    V::T(t) => t.clone(),
                };
                let buf = &mut self.scratch[slot as usize];
                assert!(base + vals.len() <= buf.len(), "scratch store past s{slot}");
                buf[base..base + vals.len()].copy_from_slice(&vals);
                None
            }
            Opcode::RowLoad { slot, .. } => {
                let (S::P(b, o), n) = (a[0].s(), int(a[2].s()).max(0) as usize) else {
                    panic!("not a pointer")
                };
                let start = o + int(a[1].s());
                let row: Vec<S> = (0..n as i64).map(|k| read(&self.bufs[b], start + k)).collect();
                let buf = &mut self.scratch[slot as usize];
                assert!(n <= buf.len(), "row load past s{slot}");
                // Past the row, scratch holds whatever was there: NaN, so that a value read
                // there and not masked away shows in the results.
                for (k, e) in buf.iter_mut().enumerate() {
                    *e = row.get(k).copied().unwrap_or(S::F(f64::NAN));
                }
                None
            }
            Opcode::RowStore { slot, .. } => {
                let (S::P(b, o), n) = (a[0].s(), int(a[2].s()).max(0) as usize) else {
                    panic!("not a pointer")
                };
                let start = o + int(a[1].s());
                let buf = &self.scratch[slot as usize];
                assert!(n <= buf.len(), "row store past s{slot}");
                let row = buf[..n].to_vec();
                assert!(row.iter().all(|&s| s != S::P(usize::MAX, 0)), "row store of unwritten s{slot}");
                for (k, v) in row.into_iter().enumerate() {
                    write(&mut self.bufs[b], start + k as i64, v);
                }
                None
            }
            Opcode::ReduceLanes(op) => {
                let d = f.ty(data.args[0]).dtype();
                Some(V::S(reduce_lanes(op, d, a[0].lanes(0))))
            }
            Opcode::Assert { site } => {
                let all = match &a[0] {
                    V::S(s) => int(*s) != 0,
                    V::T(t) => t.iter().all(|&s| int(s) != 0),
                };
                if !all {
                    return Err(Stop::Assert(site));
                }
                None
            }
            Opcode::Print(_) => None,
            Opcode::Yield | Opcode::Condition => unreachable!(),
        };
        if let Some(v) = out {
            self.vals.insert(data.results[0], v);
        }
        Ok(())
    }

    fn control(&mut self, i: Inst) -> Result<(), Stop> {
        let f = self.f;
        let data = &f.insts[i];
        let a: Vec<V> = data.args.iter().map(|&x| self.get(x)).collect();
        let results: Vec<V> = match data.opcode {
            Opcode::For => {
                let (lb, ub, step) = (int(a[0].s()), int(a[1].s()), int(a[2].s()));
                let ivd = f.ty(data.args[0]).dtype();
                let mut carried = a[3..].to_vec();
                let mut iv = lb;
                while (step > 0 && iv < ub) || (step < 0 && iv > ub) {
                    let mut args = vec![V::S(S::I(iv))];
                    args.extend(carried);
                    match self.block(&data.regions[0], args)? {
                        Exit::Yield(next) => carried = next,
                        _ => panic!("a for body must yield"),
                    }
                    iv = ivd.wrap_int(iv + step);
                }
                carried
            }
            Opcode::While => {
                let mut carried = a;
                loop {
                    match self.block(&data.regions[0], carried)? {
                        Exit::Condition(true, fwd) => match self.block(&data.regions[1], fwd)? {
                            Exit::Yield(next) => carried = next,
                            _ => panic!("a while body must yield"),
                        },
                        Exit::Condition(false, fwd) => break fwd,
                        _ => panic!("a while condition region must end in condition"),
                    }
                }
            }
            Opcode::If => {
                let k = if int(a[0].s()) != 0 { 0 } else { 1 };
                match self.block(&data.regions[k], vec![])? {
                    Exit::Yield(v) => v,
                    _ => panic!("an if branch must yield"),
                }
            }
            _ => unreachable!(),
        };
        for (&r, v) in data.results.iter().zip(results) {
            self.vals.insert(r, v);
        }
        Ok(())
    }

    /// A region whose instructions may themselves be control flow.
    fn block(&mut self, r: &Region, args: Vec<V>) -> Result<Exit, Stop> {
        for (&a, v) in r.args.iter().zip(args) {
            self.vals.insert(a, v);
        }
        for &i in &r.insts {
            let data = &self.f.insts[i];
            match data.opcode {
                Opcode::For | Opcode::While | Opcode::If => self.control(i)?,
                Opcode::Yield | Opcode::Condition => {
                    return self.region(&Region { args: vec![], insts: vec![i] }, vec![]);
                }
                _ => self.inst(i)?,
            }
        }
        Ok(Exit::End)
    }
}

/// Runs every program of `grid`, in order, on `bufs`.
pub fn run_grid(f: &Function, grid: [u32; 3], args: &[ArgValue], bufs: &mut [Buffer]) -> Result<(), Stop> {
    run_grid_lines(f, grid, args, bufs).map(|_| ())
}

/// [`run_grid`], also telling how the stores met the cache lines.
pub fn run_grid_lines(
    f: &Function,
    grid: [u32; 3],
    args: &[ArgValue],
    bufs: &mut [Buffer],
) -> Result<Lines, Stop> {
    let mut out = Lines::default();
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                let mut m = Machine {
                    f,
                    lines: HashMap::new(),
                    owned: HashSet::new(),
                    cold: HashSet::new(),
                    stored: HashMap::new(),
                    vals: HashMap::new(),
                    scratch: f.scratch.iter().map(|s| vec![S::P(usize::MAX, 0); s.len as usize]).collect(),
                    pid: [x, y, z],
                    grid,
                    bufs,
                };
                // Arguments are read up front; `arg` instructions only name them.
                for i in f.live_insts() {
                    if let Opcode::Arg(slot) = f.insts[i].opcode {
                        let v = match args[slot as usize] {
                            ArgValue::Ptr { buffer, offset } => S::P(buffer, offset),
                            ArgValue::Int(k) => S::I(f.ty(f.insts[i].results[0]).dtype().wrap_int(k)),
                            ArgValue::Float(x) => S::F(f.ty(f.insts[i].results[0]).dtype().round_float(x)),
                        };
                        m.vals.insert(f.insts[i].results[0], V::S(v));
                    }
                }
                let body = Region {
                    args: vec![],
                    insts: f
                        .body
                        .insts
                        .iter()
                        .copied()
                        .filter(|&i| !matches!(f.insts[i].opcode, Opcode::Arg(_)))
                        .collect(),
                };
                m.block(&body, vec![])?;
                out.streamed += m.stored.values().filter(|&&nt| nt).count();
                out.cached += m.stored.values().filter(|&&nt| !nt).count();
                let mut mixed: Vec<(usize, i64)> =
                    m.lines.iter().filter(|(_, v)| v.0 && v.1).map(|(&l, _)| l).collect();
                mixed.sort_unstable();
                out.mixed.extend(mixed);
                if m.stored.values().any(|&nt| nt) {
                    let mut cold: Vec<(usize, i64)> = m.cold.into_iter().collect();
                    cold.sort_unstable();
                    out.cold.extend(cold);
                }
            }
        }
    }
    Ok(out)
}
