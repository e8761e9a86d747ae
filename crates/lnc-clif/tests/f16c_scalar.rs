//! Scalar `fp16` conversions through the F16C scratch slot (`f16c::widen_1`, `bits_1`,
//! `round_1`): many in a row, values reused after later conversions, mixed with tiles,
//! wide loops (scalar code before, between, after and inside them), atomics, and every
//! mode bit for bit equal (F16C and integer code, checked and unchecked).

mod common;

use common::*;
use half::f16;
use lnc_clif::CodegenOptions;
use lnc_lir::*;
use lnc_runtime::pack_int;
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(0x5ca1a)
}

fn r16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

fn h(x: u16) -> f32 {
    f16::from_bits(x).to_f32()
}

fn nan16(a: u16) -> bool {
    (a & 0x7FFF) > 0x7C00
}

/// Interesting fp16 inputs: every NaN kind, infinities, subnormals, ties, random.
fn inputs(n: usize) -> Vec<u16> {
    let mut rng = rng();
    let mut v = vec![
        0x7C01, 0xFC01, 0x7DFF, 0x7E00, 0xFE00, 0x7FFF, 0x7C00, 0xFC00, 0x0001, 0x8001, 0x03FF, 0x0400,
        0x7BFF, 0xFBFF, 0x3C00, 0x3C01, 0x0000, 0x8000, 0x3555, 0x5A5A,
    ];
    while v.len() < n {
        v.push(if rng.random_range(0..3) == 0 {
            rng.random()
        } else {
            f16::from_f32(rng.random_range(-300.0f32..300.0)).to_bits()
        });
    }
    v
}

/// Many scalar conversions in a row, every value used again after later conversions
/// through the same 8 bytes: loads (`widen_1`), roundings (`round_1`), stores of rounded
/// and unrounded values (`bits_1`), a bitcast, an fp32 result of a loaded value used only
/// by arithmetic (loaded unquieted by integer code).
#[test]
fn many_scalar_conversions_in_a_row() {
    let mut b = B::new("scalars");
    let x = b.ptr(0, DType::F16);
    let y = b.ptr(1, DType::F16);
    let o0 = b.ptr(2, DType::F16);
    let o1 = b.ptr(3, DType::F16);
    let o2 = b.ptr(4, DType::F32);
    let o3 = b.ptr(5, DType::I16);
    let o4 = b.ptr(6, DType::F16);
    let n = b.arg(7, Ty::Scalar(DType::I32));
    let sites: Vec<u32> = (0..7).map(|s| b.site(s)).collect();
    let zero = b.i32(0);
    let one = b.i32(1);
    b.for_(zero, n, one, &[], |b, i, _| {
        let a = b.load(Addressing::Scalar, x, i, None, None, sites[0], Ty::Scalar(DType::F16));
        let c = b.load(Addressing::Scalar, y, i, None, None, sites[1], Ty::Scalar(DType::F16));
        let p = b.bin(BinOp::Mul, a, c);
        let q = b.bin(BinOp::Add, p, a);
        let af = b.cast(a, DType::F32);
        let qf = b.cast(q, DType::F32);
        let tenth = b.float(DType::F32, 0.1);
        let t = b.bin(BinOp::Mul, qf, tenth);
        let t = b.cast(t, DType::F16);
        let u = b.bin(BinOp::Sub, q, c);
        let w = b.bin(BinOp::Mul, t, t);
        let pb = b.val(Opcode::Bitcast, &[p], Ty::Scalar(DType::I16));
        // An fp32 value cast to fp16 and stored without arithmetic in between: `bits_1`
        // of an unrounded value.
        let e = b.bin(BinOp::Mul, af, qf);
        let eh = b.cast(e, DType::F16);
        b.store(Addressing::Scalar, o0, i, u, None, sites[2]);
        b.store(Addressing::Scalar, o1, i, w, None, sites[3]);
        let s = b.bin(BinOp::Add, af, qf);
        b.store(Addressing::Scalar, o2, i, s, None, sites[4]);
        b.store(Addressing::Scalar, o3, i, pb, None, sites[5]);
        b.store(Addressing::Scalar, o4, i, eh, None, sites[6]);
        vec![]
    });
    let f = b.finish();
    let n = 4099;
    let xs = inputs(n);
    let ys: Vec<u16> = xs.iter().rev().copied().collect();
    let mut outs = Vec::new();
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        let (mut x, mut y) = (xs.clone(), ys.clone());
        let (mut r0, mut r1, mut r2, mut r3, mut r4) =
            (vec![0u16; n], vec![0u16; n], vec![0u32; n], vec![0u16; n], vec![0u16; n]);
        run(
            &k,
            [1, 1, 1],
            &[
                slot(&mut x),
                slot(&mut y),
                slot(&mut r0),
                slot(&mut r1),
                slot(&mut r2),
                slot(&mut r3),
                slot(&mut r4),
                scalar(pack_int(n as i64)),
            ],
            None,
        )
        .unwrap();
        for i in 0..n {
            let (a, c) = (h(xs[i]), h(ys[i]));
            let p = r16(a * c);
            let q = r16(p + a);
            let t = r16(q * 0.1);
            let u = f16::from_f32(q - c).to_bits();
            let w = f16::from_f32(t * t).to_bits();
            let s = a + q;
            let e = f16::from_f32(a * q).to_bits();
            let ctx = format!("{:#06x} {:#06x} f16c {} checked {}", xs[i], ys[i], opts.f16c, opts.checked);
            assert!(r0[i] == u || (nan16(r0[i]) && nan16(u)), "u {ctx}: {:#06x} != {u:#06x}", r0[i]);
            assert!(r1[i] == w || (nan16(r1[i]) && nan16(w)), "w {ctx}: {:#06x} != {w:#06x}", r1[i]);
            let gs = f32::from_bits(r2[i]);
            assert!(gs.to_bits() == s.to_bits() || (gs.is_nan() && s.is_nan()), "s {ctx}: {gs} != {s}");
            let pb = f16::from_f32(p).to_bits();
            assert!(r3[i] == pb || (nan16(r3[i]) && nan16(pb)), "p {ctx}: {:#06x} != {pb:#06x}", r3[i]);
            assert!(r4[i] == e || (nan16(r4[i]) && nan16(e)), "e {ctx}: {:#06x} != {e:#06x}", r4[i]);
        }
        outs.push((r0, r1, r2, r3, r4));
    }
    // F16C and integer code, checked and unchecked: the same bits, NaN payloads included.
    for (m, o) in outs.iter().enumerate() {
        assert!(o == &outs[0], "mode {m} differs from mode 0");
    }
}

/// Wide loops (`fp16` tiles of `lanes`, F16C, 256 or 512 bits) with scalar `fp16` code
/// before, between and after them, and inside them (where it converts with integer code):
/// an accumulator entering and leaving through the staging bytes after the rounding slot.
fn wide_mix(lanes: u8) -> Function {
    let mut b = B::new("wide_mix");
    let x = b.ptr(0, DType::F16);
    let y = b.ptr(1, DType::F16);
    let z = b.ptr(2, DType::F16);
    let s = b.ptr(3, DType::F16);
    let o = b.ptr(4, DType::F32);
    let t = b.ptr(5, DType::F16);
    let n = b.arg(6, Ty::Scalar(DType::I32));
    let sites: Vec<u32> = (0..6).map(|k| b.site(k)).collect();
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let base = b.bin(BinOp::Mul, pid, n);
    let xr = b.ptr_add(x, base);
    let yr = b.ptr_add(y, base);
    let zr = b.ptr_add(z, base);
    // Before the loops: a scalar load and rounding.
    let sv = b.load(Addressing::Scalar, s, pid, None, None, sites[3], Ty::Scalar(DType::F16));
    let s2 = b.bin(BinOp::Mul, sv, sv);
    let c = b.cast(s2, DType::F32);
    // The loaded scalar stored as it is (`bits_1` of it: no rounding remembered) and
    // broadcast by the second wide loop below.
    b.store(Addressing::Scalar, s, pid, sv, None, sites[3]);
    let svf = b.cast(sv, DType::F32);
    let zero = b.i32(0);
    let step = b.i32(lanes as i64);
    let fz = b.float(DType::F32, 0.0);
    let acc0 = b.splat(fz, lanes);
    let r = b.for_(zero, n, step, &[acc0], |b, i, carried| {
        let xt = b.load(Addressing::Contiguous, xr, i, None, None, sites[0], Ty::Tile(DType::F16, lanes));
        let xf = b.cast(xt, DType::F32);
        // Inside the wide loop, scalar fp16 code: a load, a rounding, a store.
        let k = b.load(Addressing::Scalar, xr, i, None, None, sites[0], Ty::Scalar(DType::F16));
        let kk = b.bin(BinOp::Mul, k, k);
        let kf = b.cast(kk, DType::F32);
        b.store(Addressing::Scalar, t, pid, kk, None, sites[5]);
        let cs = b.splat(c, lanes);
        let ks = b.splat(kf, lanes);
        let m = b.bin(BinOp::Mul, xf, cs);
        let yv = b.bin(BinOp::Add, m, ks);
        let yh = b.cast(yv, DType::F16);
        b.store(Addressing::Contiguous, yr, i, yh, None, sites[1]);
        let sq = b.bin(BinOp::Mul, xf, xf);
        vec![b.bin(BinOp::Add, carried[0], sq)]
    });
    let sum = b.val(Opcode::ReduceLanes(ReduceOp::Sum), &[r[0]], Ty::Scalar(DType::F32));
    // Between the loops: scalar roundings of the sum and of the loaded scalar.
    let rh = b.cast(sum, DType::F16);
    let u = b.bin(BinOp::Mul, rh, sv);
    b.store(Addressing::Scalar, s, pid, u, None, sites[3]);
    let uf = b.cast(u, DType::F32);
    b.for_(zero, n, step, &[], |b, i, _| {
        let xt = b.load(Addressing::Contiguous, xr, i, None, None, sites[0], Ty::Tile(DType::F16, lanes));
        let xf = b.cast(xt, DType::F32);
        let us = b.splat(uf, lanes);
        let cs = b.splat(c, lanes);
        let m = b.bin(BinOp::Mul, xf, us);
        let d = b.bin(BinOp::Sub, m, cs);
        let svs = b.splat(svf, lanes);
        let d = b.bin(BinOp::Add, d, svs);
        let dh = b.cast(d, DType::F16);
        b.store(Addressing::Contiguous, zr, i, dh, None, sites[2]);
        vec![]
    });
    // After: a scalar load of what the second loop stored; the sum stored as fp32.
    let one = b.i32(1);
    let last = b.bin(BinOp::Sub, n, one);
    let lz = b.load(Addressing::Scalar, zr, last, None, None, sites[2], Ty::Scalar(DType::F16));
    let lf = b.cast(lz, DType::F32);
    let out = b.bin(BinOp::Mul, lf, c);
    let two = b.i32(2);
    let p2 = b.bin(BinOp::Mul, pid, two);
    b.store(Addressing::Scalar, o, p2, out, None, sites[4]);
    let p21 = b.bin(BinOp::Add, p2, one);
    b.store(Addressing::Scalar, o, p21, sum, None, sites[4]);
    b.finish()
}

#[test]
fn scalar_fp16_before_between_after_and_inside_wide_loops() {
    let mut rng = rng();
    for lanes in [8u8, 16] {
        let f = wide_mix(lanes);
        assert!(!lnc_clif::computes_wide() || lnc_clif::has_wide_loops(&f, true), "{lanes} lanes");
        let (rows, n) = (5usize, 16 * 9);
        // Multiples of 1/8 below 8 in magnitude: every square and sum is exact in fp32,
        // whatever the order of the reduction.
        let xs: Vec<u16> = (0..rows * n)
            .map(|_| f16::from_f32(rng.random_range(-64i32..64) as f32 / 8.0).to_bits())
            .collect();
        let ss: Vec<u16> = (0..rows).map(|r| f16::from_f32(0.375 + r as f32 * 0.8125).to_bits()).collect();
        let mut outs = Vec::new();
        let mut modes: Vec<CodegenOptions> = MODES.to_vec();
        // 256-bit loops too, where the host would take 512.
        modes.push(CodegenOptions { zmm: false, ..MODES[0] });
        modes.push(CodegenOptions { zmm: false, ..MODES[1] });
        for opts in &modes {
            let k = compile_ok(&f, opts);
            let (mut x, mut y, mut z, mut s, mut o, mut t) = (
                xs.clone(),
                vec![0u16; rows * n],
                vec![0u16; rows * n],
                ss.clone(),
                vec![0f32; 2 * rows],
                vec![0u16; rows],
            );
            run(
                &k,
                [rows as u32, 1, 1],
                &[
                    slot(&mut x),
                    slot(&mut y),
                    slot(&mut z),
                    slot(&mut s),
                    slot(&mut o),
                    slot(&mut t),
                    scalar(pack_int(n as i64)),
                ],
                None,
            )
            .unwrap();
            for r in 0..rows {
                let sv = h(ss[r]);
                let c = r16(sv * sv);
                let mut sum = 0f32;
                for j in 0..n {
                    let xv = h(xs[r * n + j]);
                    sum += xv * xv;
                }
                let rh = r16(sum);
                let u = r16(rh * sv);
                let ctx = format!("row {r}, {lanes} lanes, {opts:?}");
                assert_eq!(s[r], f16::from_f32(u).to_bits(), "s {ctx}");
                let lastk = (n / lanes as usize - 1) * lanes as usize;
                let kk = r16(h(xs[r * n + lastk]) * h(xs[r * n + lastk]));
                assert_eq!(t[r], f16::from_f32(kk).to_bits(), "t {ctx}");
                for j in 0..n {
                    let xv = h(xs[r * n + j]);
                    let k0 = (j / lanes as usize) * lanes as usize;
                    let kk = r16(h(xs[r * n + k0]) * h(xs[r * n + k0]));
                    assert_eq!(y[r * n + j], f16::from_f32(xv * c + kk).to_bits(), "y {ctx} {j}");
                    assert_eq!(z[r * n + j], f16::from_f32(xv * u - c + sv).to_bits(), "z {ctx} {j}");
                }
                let lz = h(z[r * n + n - 1]);
                assert_eq!(o[2 * r].to_bits(), (lz * c).to_bits(), "o {ctx}");
                assert_eq!(o[2 * r + 1].to_bits(), sum.to_bits(), "sum {ctx}");
            }
            outs.push((y, z, s, o.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), t));
        }
        for (m, o) in outs.iter().enumerate() {
            assert!(o == &outs[0], "{lanes} lanes: mode {m} differs");
        }
    }
}

/// Atomics on `fp16` scalars between F16C scalar conversions: each program exchanges and
/// adds into its own elements values it rounded, and stores what it got back, rounded.
#[test]
fn fp16_atomics_between_scalar_conversions() {
    let mut b = B::new("atomics");
    let x = b.ptr(0, DType::F16);
    let p = b.ptr(1, DType::F16);
    let o = b.ptr(2, DType::F16);
    let (sx, sp, so) = (b.site(0), b.site(1), b.site(2));
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let v = b.load(Addressing::Scalar, x, pid, None, None, sx, Ty::Scalar(DType::F16));
    let k = b.float(DType::F16, 1.5);
    let w = b.bin(BinOp::Mul, v, k);
    let old = b.val(
        Opcode::Atomic { op: AtomicOp::Xchg, addr: Addressing::Scalar, has_mask: false, site: sp },
        &[p, pid, w],
        Ty::Scalar(DType::F16),
    );
    let s = b.bin(BinOp::Add, old, w);
    let old2 = b.val(
        Opcode::Atomic { op: AtomicOp::Add, addr: Addressing::Scalar, has_mask: false, site: sp },
        &[p, pid, s],
        Ty::Scalar(DType::F16),
    );
    let q = b.bin(BinOp::Sub, old2, v);
    b.store(Addressing::Scalar, o, pid, q, None, so);
    let f = b.finish();
    let progs = 2000;
    let xs = inputs(progs);
    let ps: Vec<u16> = xs.iter().map(|&a| f16::from_f32(h(a) * 0.75 - 1.0).to_bits()).collect();
    let threads = pool(2);
    let mut outs = Vec::new();
    for opts in MODES {
        let kern = compile_ok(&f, &opts);
        let (mut xm, mut pm, mut om) = (xs.clone(), ps.clone(), vec![0u16; progs]);
        run(&kern, [progs as u32, 1, 1], &[slot(&mut xm), slot(&mut pm), slot(&mut om)], Some(&threads))
            .unwrap();
        for i in 0..progs {
            let v = h(xs[i]);
            let w = r16(v * 1.5);
            let s = r16(h(ps[i]) + w);
            let fin = f16::from_f32(w + s).to_bits();
            let q = f16::from_f32(w - v).to_bits();
            let ctx = format!("{:#06x} f16c {}", xs[i], opts.f16c);
            assert!(pm[i] == fin || (nan16(pm[i]) && nan16(fin)), "p {ctx}: {:#06x} {fin:#06x}", pm[i]);
            assert!(om[i] == q || (nan16(om[i]) && nan16(q)), "o {ctx}: {:#06x} {q:#06x}", om[i]);
        }
        outs.push((pm, om));
    }
    for (m, o) in outs.iter().enumerate() {
        assert!(o == &outs[0], "mode {m} differs");
    }
}

/// A serial chain of scalar `fp16` roundings (a loop-carried fp16 value, `c = c * v + v`,
/// rounded after each operation), every element of the output the chain so far: each step
/// reads back what the slot's previous round trip wrote. Bit for bit the `half` crate's
/// step-by-step rounding, in every mode, on random inputs of an odd length. (Timed once
/// while the change was made, unchecked, one thread, 2^20 steps: 9.4 ns a step with F16C
/// against 17.6 with integer code; timings belong in benchmarks, not here.)
#[test]
fn serial_fp16_chain_rounds_every_step() {
    let mut b = B::new("serial");
    let x = b.ptr(0, DType::F16);
    let o = b.ptr(1, DType::F16);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, so) = (b.site(0), b.site(1));
    let zero = b.i32(0);
    let one = b.i32(1);
    let init = b.float(DType::F16, 0.0);
    b.for_(zero, n, one, &[init], |b, i, c| {
        let v = b.load(Addressing::Scalar, x, i, None, None, sx, Ty::Scalar(DType::F16));
        let m = b.bin(BinOp::Mul, c[0], v);
        let next = b.bin(BinOp::Add, m, v);
        b.store(Addressing::Scalar, o, i, next, None, so);
        vec![next]
    });
    let f = b.finish();
    let n = 10_007;
    let mut rng = rng();
    // |v| < 0.9 keeps the chain bounded (|c| < 9).
    let xs: Vec<u16> = (0..n).map(|_| f16::from_f32(rng.random_range(-0.9f32..0.9)).to_bits()).collect();
    let mut want = Vec::with_capacity(n);
    let mut c = 0f32;
    for &x in &xs {
        let v = h(x);
        c = r16(r16(c * v) + v);
        want.push(f16::from_f32(c).to_bits());
    }
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        let (mut xm, mut om) = (xs.clone(), vec![0x7E00u16; n]);
        run(&k, [1, 1, 1], &[slot(&mut xm), slot(&mut om), scalar(pack_int(n as i64))], None).unwrap();
        for i in 0..n {
            assert_eq!(om[i], want[i], "step {i}, f16c {} checked {}", opts.f16c, opts.checked);
        }
    }
}

/// A scalar stored as fp16 (`bits_1`) that a later wide loop also broadcasts: the kernel's
/// wide loops are proven on the first compile, not refused into the second
/// (`bcast_in_loop`). With a `splat` in `bits_1` (as at 87afb27), Cranelift's egraph merged
/// it with the loop's broadcast of the same scalar, placed outside the loop.
#[test]
fn scalar_roundings_leave_wide_loops_provable() {
    if !lnc_clif::computes_wide() || !lnc_clif::converts_f16_natively() {
        return;
    }
    for lanes in [8u8, 16] {
        let f = wide_mix(lanes);
        for zmm in [false, true] {
            for checked in [true, false] {
                let opts = CodegenOptions { emit_text: true, zmm, checked, ..MODES[0] };
                let k = compile_ok(&f, &opts);
                let asm = &k.text().unwrap().asm;
                assert!(!asm.contains("refused"), "{lanes} lanes zmm {zmm} checked {checked}:\n{asm}");
                assert!(k.widened() > 0);
            }
        }
    }
}
