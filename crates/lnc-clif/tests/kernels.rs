//! Hand-built loop-IR kernels compiled and launched, checked against Rust.

mod common;

use common::*;
use lnc_clif::CodegenOptions;
use lnc_lir::*;
use lnc_runtime::{Fault, LaunchError, Status, pack_f32, pack_int};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(0x5eed)
}

/// `y = x * a + b` over `n` floats, one block of `block` elements per program, tiles of
/// `lanes` with the tail masked.
fn axpb_kernel(lanes: u8, block: i64) -> Function {
    let mut b = B::new("axpb");
    let x = b.ptr(0, DType::F32);
    let y = b.ptr(1, DType::F32);
    let a = b.arg(2, Ty::Scalar(DType::F32));
    let c = b.arg(3, Ty::Scalar(DType::F32));
    let n = b.arg(4, Ty::Scalar(DType::I32));
    let (sx, sy) = (b.site(0), b.site(1));
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let blk = b.i32(block);
    let start = b.bin(BinOp::Mul, pid, blk);
    let end = b.bin(BinOp::Add, start, blk);
    let end = b.bin(BinOp::Min, end, n);
    let step = b.i32(lanes as i64);
    let av = b.splat(a, lanes);
    let cv = b.splat(c, lanes);
    b.for_(start, end, step, &[], |b, i, _| {
        let offs = b.iota(i, lanes);
        let ends = b.splat(end, lanes);
        let m = b.cmp(CmpOp::Lt, offs, ends);
        let xv = b.load(Addressing::Contiguous, x, i, Some(m), None, sx, Ty::Tile(DType::F32, lanes));
        let t = b.bin(BinOp::Mul, xv, av);
        let r = b.bin(BinOp::Add, t, cv);
        b.store(Addressing::Contiguous, y, i, r, Some(m), sy);
        vec![]
    });
    b.finish()
}

/// `y = 1.5 x - 2` by [`axpb_kernel`] with blocks of 100, `y` poisoned with NaN first.
fn run_axpb(k: &lnc_clif::CompiledKernel, x: &[f32], pool: Option<&rayon::ThreadPool>) -> Vec<f32> {
    let n = x.len();
    let (mut xb, mut y) = (x.to_vec(), vec![f32::NAN; n]);
    let slots = [
        slot(&mut xb),
        slot(&mut y),
        scalar(pack_f32(1.5)),
        scalar(pack_f32(-2.0)),
        scalar(pack_int(n as i64)),
    ];
    run(k, [n.div_ceil(100) as u32, 1, 1], &slots, pool).unwrap();
    y
}

#[test]
fn axpb_with_ragged_tails() {
    let mut rng = rng();
    let p = pool(2);
    for lanes in [1, 2, 4, 8, 16] {
        let f = axpb_kernel(lanes, 100);
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            for n in [0usize, 1, 3, 4, 5, 99, 100, 101, 1003] {
                let x: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0..10.0)).collect();
                let y = run_axpb(&k, &x, Some(&p));
                for i in 0..n {
                    assert_eq!(y[i], x[i] * 1.5 - 2.0, "lanes {lanes}, n {n}, i {i}, {opts:?}");
                }
            }
        }
    }
}

/// Masked-off lanes point outside the buffer: they must neither fault nor be touched.
#[test]
fn masked_lanes_outside_the_buffer_are_not_touched() {
    const SENTINEL: f32 = 12345.0;
    for lanes in [2, 4, 8] {
        let f = axpb_kernel(lanes, 1 << 20);
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            for n in [1usize, 5, 6, 7, 9, 13] {
                // The buffers proper sit between sentinels; bounds cover exactly `n` elements.
                let mut xs = vec![SENTINEL; n + 32];
                let mut ys = vec![SENTINEL; n + 32];
                for i in 0..n {
                    xs[16 + i] = i as f32;
                }
                let (xp, yp) = (&mut xs[16..16 + n], &mut ys[16..16 + n]);
                let slots = [
                    slot(xp),
                    slot(yp),
                    scalar(pack_f32(2.0)),
                    scalar(pack_f32(0.0)),
                    scalar(pack_int(n as i64)),
                ];
                run(&k, [1, 1, 1], &slots, None).unwrap();
                for i in 0..n {
                    assert_eq!(ys[16 + i], 2.0 * i as f32);
                }
                assert!(ys[..16].iter().chain(&ys[16 + n..]).all(|&v| v == SENTINEL), "lanes {lanes}, n {n}");
            }
        }
    }
}

/// Gathered loads and stores with masks: `y[idx[k]] = x[idx[k]] + 1` for `k < n`, the
/// masked-off lanes holding indices far out of range.
#[test]
fn masked_gather_scatter() {
    let lanes = 4;
    let mut b = B::new("gather");
    let x = b.ptr(0, DType::F32);
    let y = b.ptr(1, DType::F32);
    let idx = b.ptr(2, DType::I32);
    let n = b.arg(3, Ty::Scalar(DType::I32));
    let (sx, sy, si) = (b.site(0), b.site(1), b.site(2));
    let zero = b.i32(0);
    let step = b.i32(lanes as i64);
    b.for_(zero, n, step, &[], |b, i, _| {
        let offs = b.iota(i, lanes);
        let ns = b.splat(n, lanes);
        let m = b.cmp(CmpOp::Lt, offs, ns);
        let big = b.i32(1 << 28);
        let bigs = b.splat(big, lanes);
        let ix = b.load(Addressing::Contiguous, idx, i, Some(m), Some(bigs), si, Ty::Tile(DType::I32, lanes));
        let v = b.load(Addressing::Gather, x, ix, Some(m), None, sx, Ty::Tile(DType::F32, lanes));
        let one = b.float(DType::F32, 1.0);
        let ones = b.splat(one, lanes);
        let r = b.bin(BinOp::Add, v, ones);
        b.store(Addressing::Gather, y, ix, r, Some(m), sy);
        vec![]
    });
    let f = b.finish();
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        let n = 10;
        let mut x: Vec<f32> = (0..n).map(|i| i as f32 * 10.0).collect();
        let mut y = vec![0.0f32; n];
        let mut ix: Vec<i32> = (0..n as i32).rev().collect();
        run(
            &k,
            [1, 1, 1],
            &[slot(&mut x), slot(&mut y), slot(&mut ix), scalar(pack_int(n as i64 - 1))],
            None,
        )
        .unwrap();
        let expect: Vec<f32> = (0..n).map(|i| if i == 0 { 0.0 } else { i as f32 * 10.0 + 1.0 }).collect();
        assert_eq!(y, expect);
    }
}

/// `out[pid] = sum(x[pid*n .. pid*n+n])` with accumulators carried as a tile, then
/// reduced pairwise.
fn row_sum_kernel(lanes: u8) -> Function {
    let mut b = B::new("row_sum");
    let x = b.ptr(0, DType::F32);
    let out = b.ptr(1, DType::F32);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, so) = (b.site(0), b.site(1));
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let row_start = b.bin(BinOp::Mul, pid, n);
    let row = b.ptr_add(x, row_start);
    let zero = b.i32(0);
    let step = b.i32(lanes as i64);
    let fz = b.float(DType::F32, 0.0);
    let acc0 = b.splat(fz, lanes);
    let acc = b.for_(zero, n, step, &[acc0], |b, i, carried| {
        let offs = b.iota(i, lanes);
        let ns = b.splat(n, lanes);
        let m = b.cmp(CmpOp::Lt, offs, ns);
        let v = b.load(Addressing::Contiguous, row, i, Some(m), Some(acc0), sx, Ty::Tile(DType::F32, lanes));
        vec![b.bin(BinOp::Add, carried[0], v)]
    });
    let s = b.val(Opcode::ReduceLanes(ReduceOp::Sum), &[acc[0]], Ty::Scalar(DType::F32));
    b.store(Addressing::Scalar, out, pid, s, None, so);
    b.finish()
}

/// The same order of additions in Rust: lane accumulators, then adjacent pairs.
fn row_sum_reference(row: &[f32], lanes: usize) -> f32 {
    let mut acc = vec![0.0f32; lanes];
    for (k, &v) in row.iter().enumerate() {
        acc[k % lanes] += v;
    }
    while acc.len() > 1 {
        acc = acc.chunks(2).map(|p| p[0] + p[1]).collect();
    }
    acc[0]
}

#[test]
fn masked_sum_reduction() {
    let mut rng = rng();
    let p = pool(2);
    for lanes in [4, 8, 16, 2] {
        let f = row_sum_kernel(lanes);
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            let (rows, n) = (7, 1000);
            let mut x: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut out = vec![0.0f32; rows];
            run(
                &k,
                [rows as u32, 1, 1],
                &[slot(&mut x), slot(&mut out), scalar(pack_int(n as i64))],
                Some(&p),
            )
            .unwrap();
            for r in 0..rows {
                assert_eq!(
                    out[r],
                    row_sum_reference(&x[r * n..(r + 1) * n], lanes as usize),
                    "lanes {lanes}, row {r}"
                );
            }
        }
    }
}

/// A row goes to scratch in one loop and comes back in another: `y = x - mean(x)`.
#[test]
fn scratch_round_trip() {
    let lanes = 4;
    let mut b = B::new("center");
    let x = b.ptr(0, DType::F32);
    let y = b.ptr(1, DType::F32);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, sy) = (b.site(0), b.site(1));
    b.f.scratch.push(Scratch { dtype: DType::F32, len: 64, offset: 0 });
    b.f.scratch.push(Scratch { dtype: DType::I32, len: 16, offset: 256 });
    let zero = b.i32(0);
    let step = b.i32(lanes as i64);
    let fz = b.float(DType::F32, 0.0);
    let acc0 = b.splat(fz, lanes);
    let acc = b.for_(zero, n, step, &[acc0], |b, i, c| {
        let v = b.load(Addressing::Contiguous, x, i, None, None, sx, Ty::Tile(DType::F32, lanes));
        b.inst(Opcode::ScratchStore(0), &[i, v], &[]);
        vec![b.bin(BinOp::Add, c[0], v)]
    });
    let s = b.val(Opcode::ReduceLanes(ReduceOp::Sum), &[acc[0]], Ty::Scalar(DType::F32));
    // A scalar round trip through the second buffer too.
    let seven = b.i32(7);
    let three = b.i32(3);
    b.inst(Opcode::ScratchStore(1), &[three, seven], &[]);
    let nf = b.cast(n, DType::F32);
    let mean = b.bin(BinOp::Div, s, nf);
    let means = b.splat(mean, lanes);
    b.for_(zero, n, step, &[], |b, i, _| {
        let v = b.val(Opcode::ScratchLoad(0), &[i], Ty::Tile(DType::F32, lanes));
        let r = b.bin(BinOp::Sub, v, means);
        b.store(Addressing::Contiguous, y, i, r, None, sy);
        vec![]
    });
    let back = b.val(Opcode::ScratchLoad(1), &[three], Ty::Scalar(DType::I32));
    let back = b.cast(back, DType::F32);
    b.store(Addressing::Scalar, y, n, back, None, sy);
    let f = b.finish();
    assert_eq!(f.scratch_bytes(), 320);
    let p = pool(2);
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        assert_eq!(k.scratch_bytes(), 320);
        let n = 64;
        let mut x: Vec<f32> = (0..n).map(|i| (i * i) as f32).collect();
        let mut y = vec![0.0f32; n + 1];
        run(&k, [3, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(n as i64))], Some(&p)).unwrap();
        let mean = row_sum_reference(&x, lanes as usize) / n as f32;
        for i in 0..n {
            assert_eq!(y[i], x[i] - mean);
        }
        assert_eq!(y[n], 7.0);
    }
}

/// Scalar loops with a runtime step of either sign, a while loop and an if.
#[test]
fn scalar_control_flow() {
    let mut b = B::new("scalar");
    let out = b.ptr(0, DType::I64);
    let lb = b.arg(1, Ty::Scalar(DType::I64));
    let ub = b.arg(2, Ty::Scalar(DType::I64));
    let step = b.arg(3, Ty::Scalar(DType::I64));
    let so = b.site(0);
    // out[0] = sum of iv*iv, out[1] = number of iterations
    let z = b.int(DType::I64, 0);
    let r = b.for_(lb, ub, step, &[z, z], |b, iv, c| {
        let sq = b.bin(BinOp::Mul, iv, iv);
        let one = b.int(DType::I64, 1);
        vec![b.bin(BinOp::Add, c[0], sq), b.bin(BinOp::Add, c[1], one)]
    });
    let zero = b.int(DType::I64, 0);
    let one = b.int(DType::I64, 1);
    b.store(Addressing::Scalar, out, zero, r[0], None, so);
    b.store(Addressing::Scalar, out, one, r[1], None, so);
    // out[2] = Collatz steps of ub (while), out[3] = if ub odd { 3 } else { 4 }
    let w = b.while_(
        &[ub, zero],
        |b, c| {
            let one = b.int(DType::I64, 1);
            b.cmp(CmpOp::Gt, c[0], one)
        },
        |b, c| {
            let two = b.int(DType::I64, 2);
            let one = b.int(DType::I64, 1);
            let three = b.int(DType::I64, 3);
            let odd = b.bin(BinOp::Rem, c[0], two);
            let z = b.int(DType::I64, 0);
            let is_odd = b.cmp(CmpOp::Ne, odd, z);
            let half = b.bin(BinOp::IDiv, c[0], two);
            let t = b.bin(BinOp::Mul, c[0], three);
            let t = b.bin(BinOp::Add, t, one);
            let next = b.select(is_odd, t, half);
            vec![next, b.bin(BinOp::Add, c[1], one)]
        },
    );
    let two = b.int(DType::I64, 2);
    b.store(Addressing::Scalar, out, two, w[1], None, so);
    let odd = b.bin(BinOp::Rem, ub, two);
    let is_odd = b.cmp(CmpOp::Ne, odd, zero);
    let v = b.if_(
        is_odd,
        &[Ty::Scalar(DType::I64)],
        |b| vec![b.int(DType::I64, 3)],
        |b| vec![b.int(DType::I64, 4)],
    );
    let three = b.int(DType::I64, 3);
    b.store(Addressing::Scalar, out, three, v[0], None, so);
    let f = b.finish();

    fn collatz(mut x: i64) -> i64 {
        let mut n = 0;
        while x > 1 {
            x = if x % 2 != 0 { 3 * x + 1 } else { x / 2 };
            n += 1;
        }
        n
    }

    for opts in MODES {
        let k = compile_ok(&f, &opts);
        for (lb, ub, step) in [
            (0i64, 10i64, 1i64),
            (0, 10, 3),
            (10, 0, -1),
            (10, -5, -4),
            (5, 5, 1),
            (5, 3, 1),
            (3, 5, -1),
            (-7, 27, 5),
        ] {
            let mut out = vec![0i64; 4];
            run(
                &k,
                [1, 1, 1],
                &[slot(&mut out), scalar(lb as u64), scalar(ub as u64), scalar(step as u64)],
                None,
            )
            .unwrap();
            let ivs: Vec<i64> = if step > 0 {
                (lb..ub).step_by(step as usize).collect()
            } else {
                (ub + 1..=lb).rev().step_by((-step) as usize).collect()
            };
            let expect = [
                ivs.iter().map(|i| i * i).sum(),
                ivs.len() as i64,
                collatz(ub),
                if ub % 2 != 0 { 3 } else { 4 },
            ];
            assert_eq!(out, expect, "lb {lb} ub {ub} step {step}");
        }
    }
}

/// Stores at `base + k` for `k` in a tile of 4: a full tile crossing the end of the
/// buffer faults at its first outside element; a scalar store names its element; a
/// gather names the first bad lane.
#[test]
fn out_of_bounds_faults() {
    for addr in [Addressing::Contiguous, Addressing::Scalar, Addressing::Gather] {
        let mut b = B::new("oob");
        let y = b.ptr(0, DType::F32);
        let base = b.arg(1, Ty::Scalar(DType::I32));
        let _unused = b.site(0);
        let s = b.site(0);
        let one = b.float(DType::F32, 1.0);
        match addr {
            Addressing::Contiguous => {
                let v = b.splat(one, 4);
                b.store(addr, y, base, v, None, s);
            }
            Addressing::Scalar => b.store(addr, y, base, one, None, s),
            Addressing::Gather => {
                let offs = b.iota(base, 4);
                let v = b.splat(one, 4);
                b.store(addr, y, offs, v, None, s);
            }
        }
        let f = b.finish();
        let k = compile_ok(&f, &CodegenOptions { checked: true, emit_text: false, ..Default::default() });
        let mut buf = vec![0.0f32; 10];
        // In bounds.
        run(&k, [1, 1, 1], &[slot(&mut buf), scalar(pack_int(6))], None).unwrap();
        for (base, bad) in [
            (8i64, if addr == Addressing::Scalar { None } else { Some(10) }),
            (10, Some(10)),
            (-1, Some(-1)),
            (-3, Some(-3)),
            (1000, Some(1000)),
        ] {
            let mut buf = vec![0.0f32; 10];
            let r = run(&k, [1, 1, 1], &[slot(&mut buf), scalar(pack_int(base))], None);
            match bad {
                None => r.unwrap(),
                Some(offset) => {
                    assert_eq!(
                        r,
                        Err(LaunchError::Fault {
                            status: Status::OutOfBounds,
                            pid: [0, 0, 0],
                            fault: Fault { site: 1, arg: 0, offset }
                        }),
                        "{addr:?} at {base}"
                    );
                    // A vector or scalar access is checked as a whole before it writes
                    // (a gather checks lane by lane and may have written earlier lanes).
                    if addr != Addressing::Gather {
                        assert!(buf.iter().all(|&v| v == 0.0), "{addr:?} at {base}: {buf:?}");
                    }
                }
            }
        }
    }
}

/// Every program adds to one counter: integer and float atomics from a pool.
#[test]
fn atomics_from_many_programs() {
    let mut b = B::new("atomics");
    let ci = b.ptr(0, DType::I32);
    let cf = b.ptr(1, DType::F32);
    let cmax = b.ptr(2, DType::I32);
    let tile = b.ptr(3, DType::I32);
    let (s0, s1, s2, s3) = (b.site(0), b.site(1), b.site(2), b.site(3));
    let zero = b.i32(0);
    let one = b.i32(1);
    let fone = b.float(DType::F32, 1.0);
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    b.val(
        Opcode::Atomic { op: AtomicOp::Add, addr: Addressing::Scalar, has_mask: false, site: s0 },
        &[ci, zero, one],
        Ty::Scalar(DType::I32),
    );
    b.val(
        Opcode::Atomic { op: AtomicOp::Add, addr: Addressing::Scalar, has_mask: false, site: s1 },
        &[cf, zero, fone],
        Ty::Scalar(DType::F32),
    );
    b.val(
        Opcode::Atomic { op: AtomicOp::Max, addr: Addressing::Scalar, has_mask: false, site: s2 },
        &[cmax, zero, pid],
        Ty::Scalar(DType::I32),
    );
    // A tile of 4 counters, lane 3 masked off.
    let offs = b.iota(zero, 4);
    let three = b.i32(3);
    let threes = b.splat(three, 4);
    let m = b.cmp(CmpOp::Lt, offs, threes);
    let ones = b.splat(one, 4);
    b.val(
        Opcode::Atomic { op: AtomicOp::Add, addr: Addressing::Contiguous, has_mask: true, site: s3 },
        &[tile, zero, ones, m],
        Ty::Tile(DType::I32, 4),
    );
    let f = b.finish();
    let p = pool(4);
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        let mut ci = [0i32; 1];
        let mut cf = [0.0f32; 1];
        let mut cmax = [-1i32; 1];
        // Lane 3 of the tile would be outside its 3-element buffer.
        let mut tile = [0i32; 3];
        let n = 3000u32;
        run(&k, [n, 1, 1], &[slot(&mut ci), slot(&mut cf), slot(&mut cmax), slot(&mut tile)], Some(&p))
            .unwrap();
        assert_eq!(ci[0], n as i32);
        assert_eq!(cf[0], n as f32);
        assert_eq!(cmax[0], n as i32 - 1);
        assert_eq!(tile, [n as i32; 3]);
    }
}

/// A spin lock built from `atomic_cas` and `atomic_xchg` guards a non-atomic counter.
#[test]
fn spin_lock() {
    let mut b = B::new("lock");
    let lock = b.ptr(0, DType::I32);
    let count = b.ptr(1, DType::I64);
    let (sl, sc) = (b.site(0), b.site(1));
    let zero = b.i32(0);
    let one = b.i32(1);
    b.while_(
        &[],
        |b, _| {
            let old = b.val(
                Opcode::AtomicCas { addr: Addressing::Scalar, site: sl },
                &[lock, zero, zero, one],
                Ty::Scalar(DType::I32),
            );
            b.cmp(CmpOp::Ne, old, zero)
        },
        |_, _| vec![],
    );
    let z64 = b.int(DType::I64, 0);
    let c = b.load(Addressing::Scalar, count, z64, None, None, sc, Ty::Scalar(DType::I64));
    let one64 = b.int(DType::I64, 1);
    let c = b.bin(BinOp::Add, c, one64);
    b.store(Addressing::Scalar, count, z64, c, None, sc);
    b.val(
        Opcode::Atomic { op: AtomicOp::Xchg, addr: Addressing::Scalar, has_mask: false, site: sl },
        &[lock, zero, zero],
        Ty::Scalar(DType::I32),
    );
    let f = b.finish();
    let k = compile_ok(&f, &CodegenOptions::default());
    let p = pool(4);
    let mut lock = [0i32];
    let mut count = [0i64];
    run(&k, [5000, 1, 1], &[slot(&mut lock), slot(&mut count)], Some(&p)).unwrap();
    assert_eq!(count[0], 5000);
    assert_eq!(lock[0], 0);
}

/// `assert pid <op> x` with `x` the i32 argument, the assert at site 1.
fn pid_assert_kernel(op: CmpOp) -> Function {
    let mut b = B::new("assert");
    let x = b.arg(0, Ty::Scalar(DType::I32));
    let _ = b.site(0);
    let s = b.site(0);
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let c = b.cmp(op, pid, x);
    b.inst(Opcode::Assert { site: s }, &[c], &[]);
    b.finish()
}

/// The error of `pid_assert_kernel`'s assert failing in program `pid`.
fn assert_failed_in(pid: [u32; 3]) -> LaunchError {
    LaunchError::Fault { status: Status::AssertFailed, pid, fault: Fault { site: 1, arg: 0, offset: 0 } }
}

#[test]
fn assert_fails_with_its_site() {
    let f = pid_assert_kernel(CmpOp::Lt);
    let k = compile_ok(&f, &CodegenOptions::default());
    run(&k, [5, 1, 1], &[scalar(pack_int(5))], None).unwrap();
    let err = run(&k, [5, 1, 1], &[scalar(pack_int(3))], Some(&pool(2))).unwrap_err();
    assert_eq!(err, assert_failed_in([3, 0, 0]));
}

/// A compiled kernel runs a whole chunk of programs per call (the runtime's chunks reach
/// 127 programs on grids this large), so a fault in the middle of a call must still name
/// its own program: here pid 3000 on a 5000 x 3 grid stops (flat index 3000 + 5000·k).
#[test]
fn a_fault_inside_a_chunk_names_its_program() {
    let f = pid_assert_kernel(CmpOp::Ne);
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        for threads in [1, 2] {
            let err = run(&k, [5000, 3, 1], &[scalar(pack_int(3000))], Some(&pool(threads))).unwrap_err();
            assert_eq!(err, assert_failed_in([3000, 0, 0]), "{threads} threads");
        }
    }
}

#[test]
fn print_runs() {
    let mut b = B::new("print");
    let x = b.arg(0, Ty::Scalar(DType::F32));
    b.f.strings.push("x =".into());
    let zero = b.i32(0);
    let t = b.iota(zero, 4);
    b.inst(Opcode::Print(0), &[x, t], &[]);
    let f = b.finish();
    let k = compile_ok(&f, &CodegenOptions::default());
    run(&k, [2, 1, 1], &[scalar(pack_f32(2.5))], None).unwrap();
}

#[test]
fn program_ids_and_grid() {
    let mut b = B::new("pids");
    let out = b.ptr(0, DType::I32);
    let s = b.site(0);
    let p: Vec<Value> = (0..3).map(|a| b.val(Opcode::ProgramId(a), &[], Ty::Scalar(DType::I32))).collect();
    let n: Vec<Value> = (0..3).map(|a| b.val(Opcode::NumPrograms(a), &[], Ty::Scalar(DType::I32))).collect();
    // flat = p0 + n0 * (p1 + n1 * p2); out[flat] = flat * 1000 + n0 * 100 + n1 * 10 + n2
    let t = b.bin(BinOp::Mul, n[1], p[2]);
    let t = b.bin(BinOp::Add, p[1], t);
    let t = b.bin(BinOp::Mul, n[0], t);
    let flat = b.bin(BinOp::Add, p[0], t);
    let k1000 = b.i32(1000);
    let k100 = b.i32(100);
    let k10 = b.i32(10);
    let v = b.bin(BinOp::Mul, flat, k1000);
    let a = b.bin(BinOp::Mul, n[0], k100);
    let v = b.bin(BinOp::Add, v, a);
    let a = b.bin(BinOp::Mul, n[1], k10);
    let v = b.bin(BinOp::Add, v, a);
    let v = b.bin(BinOp::Add, v, n[2]);
    b.store(Addressing::Scalar, out, flat, v, None, s);
    let f = b.finish();
    let k = compile_ok(&f, &CodegenOptions::default());
    // A call runs a chunk of programs, stepping the pid itself: on one thread the chunks
    // are long enough (7 and 31 programs) to cross the wraps of axis 0 into axis 1 and of
    // axis 1 into axis 2 inside a call.
    for (grid, threads) in [([3u32, 4, 5], 3), ([3, 4, 5], 1), ([2, 3, 40], 1), ([5, 1, 7], 2)] {
        let total = grid.iter().product::<u32>() as usize;
        let mut out = vec![0i32; total];
        run(&k, grid, &[slot(&mut out)], Some(&pool(threads))).unwrap();
        let dims = (grid[0] * 100 + grid[1] * 10 + grid[2]) as i32;
        for (i, &v) in out.iter().enumerate() {
            assert_eq!(v, i as i32 * 1000 + dims, "grid {grid:?}, {threads} threads, program {i}");
        }
    }
}

#[test]
fn text_forms() {
    let f = row_sum_kernel(4);
    let k = compile_ok(&f, &CodegenOptions { checked: true, emit_text: true, ..Default::default() });
    let text = k.text().unwrap();
    assert!(text.clif.contains("function"));
    assert!(text.opt_clif.contains("fadd.f32x4") || text.opt_clif.contains("fadd"), "{}", text.opt_clif);
    assert!(!text.asm.is_empty());
    let asm = lnc_clif::asm_text(&f, &CodegenOptions::default()).unwrap();
    assert!(asm.contains("ret"), "{asm}");
    insta::assert_snapshot!(
        lnc_clif::clif_text(
            &axpb_kernel(4, 64),
            &CodegenOptions { checked: false, emit_text: false, ..Default::default() }
        )
        .unwrap()
    );
}

/// `x ** x` of an `i32`, which code generation does not support.
fn ipow_kernel() -> Function {
    let mut b = B::new("ipow");
    let x = b.arg(0, Ty::Scalar(DType::I32));
    let _ = b.bin(BinOp::Pow, x, x);
    b.finish()
}

#[test]
fn unsupported_operations_are_errors() {
    let e = lnc_clif::compile(&ipow_kernel(), &CodegenOptions::default()).unwrap_err();
    assert!(matches!(e, lnc_clif::CodegenError::Unsupported(_)), "{e}");
}

#[test]
fn kernels_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<lnc_clif::CompiledKernel>();
}

/// Every atomic kind on several dtypes, one program: the returned old values and the
/// memory afterwards.
#[test]
fn atomic_kinds() {
    fn case(
        d: DType,
        op: Option<AtomicOp>,
        init: [u64; 4],
        operand: [u64; 4],
        mask: [bool; 4],
        want_mem: [u64; 4],
    ) {
        let lanes = 4;
        let mut b = B::new("atomic");
        let p = b.ptr(0, d);
        let vals = b.ptr(1, d);
        let old = b.ptr(2, d);
        let mk = b.ptr(3, DType::I1);
        let (s0, s1, s2, s3) = (b.site(0), b.site(1), b.site(2), b.site(3));
        let zero = b.i32(0);
        let v = b.load(Addressing::Contiguous, vals, zero, None, None, s1, Ty::Tile(d, lanes));
        let m = b.load(Addressing::Contiguous, mk, zero, None, None, s3, Ty::Tile(DType::I1, lanes));
        // Gather addressing, lanes in reverse order.
        let three = b.i32(3);
        let io = b.iota(zero, lanes);
        let threes = b.splat(three, lanes);
        let rev = b.bin(BinOp::Sub, threes, io);
        let r = match op {
            Some(op) => b.val(
                Opcode::Atomic { op, addr: Addressing::Gather, has_mask: true, site: s0 },
                &[p, rev, v, m],
                Ty::Tile(d, lanes),
            ),
            None => {
                // CAS expecting the initial values on even lanes only.
                let cmp = b.load(Addressing::Gather, p, rev, None, None, s0, Ty::Tile(d, lanes));
                let fz = b.val(Opcode::Const(Const::Int(0)), &[], Ty::Scalar(d));
                let zs = b.splat(fz, lanes);
                let cmp = b.select(m, cmp, zs);
                b.val(
                    Opcode::AtomicCas { addr: Addressing::Gather, site: s0 },
                    &[p, rev, cmp, v],
                    Ty::Tile(d, lanes),
                )
            }
        };
        b.store(Addressing::Gather, old, rev, r, None, s2);
        let f = b.finish();
        let size = d.size() as usize;
        let bytes =
            |v: [u64; 4]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()[..size].to_vec()).collect() };
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            let mut mem = bytes(init);
            // The operands are listed per memory element: lane k works on element 3 - k.
            let mut vals: Vec<u8> = bytes([operand[3], operand[2], operand[1], operand[0]]);
            let mut olds = vec![0xAAu8; 4 * size];
            let mut mask: Vec<u8> = mask.iter().rev().map(|&m| m as u8).collect();
            run(&k, [1, 1, 1], &[slot(&mut mem), slot(&mut vals), slot(&mut olds), slot(&mut mask)], None)
                .unwrap();
            assert_eq!(mem, bytes(want_mem), "{op:?} on {d}");
            let want_old: Vec<u64> = init
                .iter()
                .zip(&mask.iter().rev().collect::<Vec<_>>())
                .map(|(&i, &&m)| if m != 0 || op.is_none() { i } else { 0 })
                .collect();
            assert_eq!(olds, bytes(want_old.try_into().unwrap()), "{op:?} on {d}: old values");
        }
    }
    let f = |x: f32| x.to_bits() as u64;
    let g = |x: f64| x.to_bits();
    let m = [true, true, false, true];
    case(DType::I32, Some(AtomicOp::Add), [1, 2, 3, 4], [10, 20, 30, 40], m, [11, 22, 3, 44]);
    case(DType::I8, Some(AtomicOp::Add), [1, 2, 3, 255], [10, 20, 30, 1], m, [11, 22, 3, 0]);
    case(DType::I16, Some(AtomicOp::Max), [5, 0xffff, 3, 7], [1, 1, 100, 9], m, [5, 1, 3, 9]);
    case(DType::U16, Some(AtomicOp::Max), [5, 0xffff, 3, 7], [1, 1, 100, 9], m, [5, 0xffff, 3, 9]);
    case(DType::I64, Some(AtomicOp::Min), [5, 0, 3, 7], [1, u64::MAX, 1, 9], m, [1, u64::MAX, 3, 7]);
    case(DType::U32, Some(AtomicOp::Min), [5, 0, 3, 7], [1, 0xffff_ffff, 1, 9], m, [1, 0, 3, 7]);
    case(DType::U8, Some(AtomicOp::And), [0xff, 0x0f, 3, 7], [0x3c, 0x3c, 0, 1], m, [0x3c, 0x0c, 3, 1]);
    case(DType::U64, Some(AtomicOp::Or), [1, 2, 4, 8], [16, 16, 16, 16], m, [17, 18, 4, 24]);
    case(DType::I32, Some(AtomicOp::Xor), [1, 3, 4, 8], [1, 1, 1, 1], m, [0, 2, 4, 9]);
    case(DType::I32, Some(AtomicOp::Xchg), [1, 3, 4, 8], [9, 9, 9, 9], m, [9, 9, 4, 9]);
    case(
        DType::F32,
        Some(AtomicOp::Add),
        [f(1.5), f(2.0), f(3.0), f(-1.0)],
        [f(1.0), f(0.25), f(5.0), f(1.0)],
        m,
        [f(2.5), f(2.25), f(3.0), f(0.0)],
    );
    case(
        DType::F64,
        Some(AtomicOp::Max),
        [g(1.5), g(2.0), g(3.0), g(-1.0)],
        [g(1.0), g(7.0), g(5.0), g(1.0)],
        m,
        [g(1.5), g(7.0), g(3.0), g(1.0)],
    );
    case(
        DType::F32,
        Some(AtomicOp::Min),
        [f(1.5), f(2.0), f(3.0), f(-1.0)],
        [f(1.0), f(7.0), f(-5.0), f(1.0)],
        m,
        [f(1.0), f(2.0), f(3.0), f(-1.0)],
    );
    case(
        DType::F32,
        Some(AtomicOp::Xchg),
        [f(1.5), f(2.0), f(3.0), f(-1.0)],
        [f(1.0), f(7.0), f(-5.0), f(1.0)],
        m,
        [f(1.0), f(7.0), f(3.0), f(1.0)],
    );
    // CAS: lanes whose mask is off compare against 0 and fail (memory is non-zero).
    case(DType::I32, None, [1, 2, 3, 4], [10, 20, 30, 40], m, [10, 20, 3, 40]);
    case(
        DType::F64,
        None,
        [g(1.0), g(2.0), g(3.0), g(4.0)],
        [g(9.0), g(9.0), g(9.0), g(9.0)],
        m,
        [g(9.0), g(9.0), g(3.0), g(9.0)],
    );
}

/// Tiles of every representation carried through loops, ifs and whiles: a multi-vector
/// `f32x8`, a scalarized `i64x4`, a mask, and a wide mask made from `i8` data.
#[test]
fn carried_tiles() {
    let mut b = B::new("carried");
    let out_f = b.ptr(0, DType::F32);
    let out_i = b.ptr(1, DType::I64);
    let out_m = b.ptr(2, DType::I1);
    let n = b.arg(3, Ty::Scalar(DType::I32));
    let (sf, si, sm) = (b.site(0), b.site(1), b.site(2));
    let zero = b.i32(0);
    let one = b.i32(1);
    let fz = b.float(DType::F32, 0.0);
    let f0 = b.splat(fz, 8);
    let iz = b.int(DType::I64, 0);
    let i0 = b.iota(iz, 4);
    let z4 = b.splat(zero, 4);
    let m0 = b.cmp(CmpOp::Lt, z4, z4);
    let r = b.for_(zero, n, one, &[f0, i0, m0], |b, iv, c| {
        // f += iota * iv (as floats), in an if on the parity of iv.
        let two = b.i32(2);
        let par = b.bin(BinOp::Rem, iv, two);
        let z = b.i32(0);
        let odd = b.cmp(CmpOp::Ne, par, z);
        let fi = b.iota(iv, 8);
        let ff = b.cast(fi, DType::F32);
        let fty = b.ty(c[0]);
        let nf =
            b.if_(odd, &[fty], |b| vec![b.bin(BinOp::Add, c[0], ff)], |b| vec![b.bin(BinOp::Sub, c[0], ff)]);
        // i = i * 3 + 1 lanewise
        let three = b.int(DType::I64, 3);
        let threes = b.splat(three, 4);
        let ione = b.int(DType::I64, 1);
        let ones = b.splat(ione, 4);
        let t = b.bin(BinOp::Mul, c[1], threes);
        let ni = b.bin(BinOp::Add, t, ones);
        // m ^= (iota8(iv) as i8 lanes 0..3 < 2), via an i8x16 comparison narrowed to 4 lanes
        let ivs = b.splat(iv, 4);
        let io = b.iota(zero, 4);
        let sum = b.bin(BinOp::Add, ivs, io);
        let s8 = b.cast(sum, DType::I8);
        let two8 = b.int(DType::I8, 2);
        let two8s = b.splat(two8, 4);
        let lt = b.cmp(CmpOp::Lt, s8, two8s);
        let nm = b.bin(BinOp::Xor, c[2], lt);
        vec![nf[0], ni, nm]
    });
    // A while that halves the float tile until its lane 7 is below 100.
    let w = b.while_(
        &[r[0]],
        |b, c| {
            let t = b.val(Opcode::ReduceLanes(ReduceOp::Max), &[c[0]], Ty::Scalar(DType::F32));
            let hundred = b.float(DType::F32, 100.0);
            b.cmp(CmpOp::Ge, t, hundred)
        },
        |b, c| {
            let half = b.float(DType::F32, 0.5);
            let halves = b.splat(half, 8);
            vec![b.bin(BinOp::Mul, c[0], halves)]
        },
    );
    b.store(Addressing::Contiguous, out_f, zero, w[0], None, sf);
    b.store(Addressing::Contiguous, out_i, zero, r[1], None, si);
    b.store(Addressing::Contiguous, out_m, zero, r[2], None, sm);
    let f = b.finish();

    for opts in MODES {
        let k = compile_ok(&f, &opts);
        for n in [0i32, 1, 5, 40] {
            let (mut of, mut oi, mut om) = ([0f32; 8], [0i64; 4], [false; 4]);
            run(
                &k,
                [1, 1, 1],
                &[slot(&mut of), slot(&mut oi), slot(&mut om), scalar(pack_int(n as i64))],
                None,
            )
            .unwrap();
            let (mut wf, mut wi, mut wm) = ([0f32; 8], [0i64, 1, 2, 3], [false; 4]);
            for iv in 0..n {
                for (k, x) in wf.iter_mut().enumerate() {
                    let v = (iv + k as i32) as f32;
                    *x = if iv % 2 != 0 { *x + v } else { *x - v };
                }
                for x in wi.iter_mut() {
                    *x = x.wrapping_mul(3).wrapping_add(1);
                }
                for (k, m) in wm.iter_mut().enumerate() {
                    *m ^= ((iv + k as i32) as i8) < 2;
                }
            }
            while wf.iter().cloned().fold(f32::NEG_INFINITY, f32::max) >= 100.0 {
                wf.iter_mut().for_each(|x| *x *= 0.5);
            }
            assert_eq!((of, oi, om), (wf, wi, wm), "n {n}");
        }
    }
}

/// Nested loops over a 2-D block: `y[r][c] = x[r][c] * (r + 1)` with a masked column tail.
#[test]
fn nested_loops() {
    let lanes = 4;
    let mut b = B::new("nested");
    let x = b.ptr(0, DType::F64);
    let y = b.ptr(1, DType::F64);
    let rows = b.arg(2, Ty::Scalar(DType::I64));
    let cols = b.arg(3, Ty::Scalar(DType::I64));
    let (sx, sy) = (b.site(0), b.site(1));
    let zero = b.int(DType::I64, 0);
    let one = b.int(DType::I64, 1);
    let step = b.int(DType::I64, lanes as i64);
    b.for_(zero, rows, one, &[], |b, r, _| {
        let base = b.bin(BinOp::Mul, r, cols);
        let xr = b.ptr_add(x, base);
        let yr = b.ptr_add(y, base);
        let r1 = b.bin(BinOp::Add, r, one);
        let rf = b.cast(r1, DType::F64);
        let rfs = b.splat(rf, lanes);
        b.for_(zero, cols, step, &[], |b, c, _| {
            let offs = b.iota(c, lanes);
            let cs = b.splat(cols, lanes);
            let m = b.cmp(CmpOp::Lt, offs, cs);
            let v = b.load(Addressing::Contiguous, xr, c, Some(m), None, sx, Ty::Tile(DType::F64, lanes));
            let p = b.bin(BinOp::Mul, v, rfs);
            b.store(Addressing::Contiguous, yr, c, p, Some(m), sy);
            vec![]
        });
        vec![]
    });
    let f = b.finish();
    for opts in MODES {
        let k = compile_ok(&f, &opts);
        let (rows, cols) = (5usize, 7usize);
        let mut xs: Vec<f64> = (0..rows * cols).map(|i| i as f64).collect();
        let mut ys = vec![0.0f64; rows * cols];
        run(&k, [1, 1, 1], &[slot(&mut xs), slot(&mut ys), scalar(rows as u64), scalar(cols as u64)], None)
            .unwrap();
        for i in 0..rows * cols {
            assert_eq!(ys[i], xs[i] * (i / cols + 1) as f64);
        }
    }
}

/// `for i = lb to ub step s { Y[i:i+4] = X[i+k : i+k+4] }`, unmasked: both checks are
/// hoisted in front of the loop. In bounds it copies; out of bounds it faults before
/// the loop runs, at the first access (in body order) whose range leaves its buffer,
/// naming that range's first element outside; a loop that does not run never faults.
#[test]
fn hoisted_checks_cover_the_whole_loop() {
    // `copies` > 1: the body repeated at `i + 4c` (an unrolled loop), one merged check
    // per pointer.
    for (step, copies) in [(4i64, 1i64), (3, 1), (8, 2), (16, 4)] {
        let mut b = B::new("shift");
        let x = b.ptr(0, DType::F32);
        let y = b.ptr(1, DType::F32);
        let lb = b.arg(2, Ty::Scalar(DType::I32));
        let ub = b.arg(3, Ty::Scalar(DType::I32));
        let k = b.arg(4, Ty::Scalar(DType::I32));
        let (sx, sy) = (b.site(0), b.site(1));
        let s = b.i32(step);
        // `k + 4c`, computed before the loop: the loads at `i + (k + 4c)` are hoisted one
        // by one, the stores at `i + 4c` (constants) merged.
        let ks: Vec<Value> = (0..copies)
            .map(|c| {
                let four_c = b.i32(4 * c);
                b.bin(BinOp::Add, k, four_c)
            })
            .collect();
        b.for_(lb, ub, s, &[], |b, i, _| {
            for c in 0..copies {
                let at = b.bin(BinOp::Add, i, ks[c as usize]);
                let i = if c == 0 {
                    i
                } else {
                    let four_c = b.i32(4 * c);
                    b.bin(BinOp::Add, i, four_c)
                };
                let v = b.load(Addressing::Contiguous, x, at, None, None, sx, Ty::Tile(DType::F32, 4));
                b.store(Addressing::Contiguous, y, i, v, None, sy);
            }
            vec![]
        });
        let f = b.finish();
        let k = compile_ok(&f, &CodegenOptions { checked: true, emit_text: false, ..Default::default() });
        let text = lnc_clif::clif_text(
            &f,
            &CodegenOptions { checked: true, emit_text: false, ..Default::default() },
        )
        .unwrap();
        let checks = copies as usize + 1;
        assert!(text.matches("brif").count() <= checks + 3, "one check per access outside the loop:\n{text}");
        let xs: Vec<f32> = (0..40).map(|v| v as f32 + 0.5).collect();
        for (lo, hi, shift) in [
            (0i64, 36i64, 0i64),
            (0, 33, 3),
            (4, 20, -4),
            (0, 37, 0),
            (0, 40, 0),
            (-4, 8, 4),
            (0, 8, 33),
            (0, 8, 37),
            (5, 5, 1000),
            (9, 2, -1000),
            (0, 8, i32::MAX as i64 - 2),
        ] {
            let mut xb = xs.clone();
            let mut yb = vec![f32::NAN; 40];
            let args = [
                slot(&mut xb),
                slot(&mut yb),
                scalar(pack_int(lo)),
                scalar(pack_int(hi)),
                scalar(pack_int(shift)),
            ];
            let r = run(&k, [1, 1, 1], &args, None);
            // The reference: each access's element range over the loop, in body order.
            let ivs: Vec<i64> = (lo..hi).step_by(step as usize).collect();
            // The elements from `first` to `last`: the range of one hoisted check.
            let bad = |site: u32, off: i64, width: i64| -> Option<Fault> {
                let (first, last) = (*ivs.first()? + off, *ivs.last()? + off + width - 1);
                let wrapped = (first as i32 as i64) != first || (last as i32 as i64) != last;
                if wrapped || first < 0 {
                    Some(Fault { site, arg: site, offset: first as i32 as i64 })
                } else if last >= 40 {
                    Some(Fault { site, arg: site, offset: 40.max(first) })
                } else {
                    None
                }
            };
            // One check per load copy (its own `k + 4c`), one merged check for the stores:
            // whichever fails first in the emitted order is reported.
            let mut faults: Vec<Fault> = (0..copies).filter_map(|c| bad(0, shift + 4 * c, 4)).collect();
            faults.extend(bad(1, 0, 4 * copies));
            match faults.first() {
                None => {
                    r.unwrap_or_else(|e| panic!("step {step} [{lo}, {hi}) + {shift}: {e:?}"));
                    for &i in &ivs {
                        for l in 0..4 * copies {
                            assert_eq!(yb[(i + l) as usize], xs[(i + l + shift) as usize]);
                        }
                    }
                }
                Some(_) => {
                    let got = match r {
                        Err(LaunchError::Fault { status: Status::OutOfBounds, pid: [0, 0, 0], fault }) => {
                            fault
                        }
                        other => panic!("step {step} [{lo}, {hi}) + {shift}: {other:?}"),
                    };
                    assert!(
                        faults.contains(&got),
                        "step {step} [{lo}, {hi}) + {shift}: {got:?} not in {faults:?}"
                    );
                    assert!(yb.iter().all(|v| v.is_nan()), "nothing ran before the fault");
                }
            }
        }
    }
}

/// `for i = 0 to min(n, 64) step 4 { Y[i:i+4] = X[i+2 : i+6] }`: the index provably stays
/// below 64, so the loop addresses from its `i64` copy; with an unbounded `n` the index
/// also steps in `i64` (so that the step past `n` cannot wrap), but `i + 2` might
/// overflow, so addresses sign-extend the `i32` sum. Both compute the same copies.
#[test]
fn loop_indices_that_cannot_wrap_run_in_i64() {
    for bounded in [true, false] {
        let mut b = B::new("shifted");
        let x = b.ptr(0, DType::F32);
        let y = b.ptr(1, DType::F32);
        let n = b.arg(2, Ty::Scalar(DType::I32));
        let (sx, sy) = (b.site(0), b.site(1));
        let (zero, four, two) = (b.i32(0), b.i32(4), b.i32(2));
        let ub = if bounded {
            let cap = b.i32(64);
            b.bin(BinOp::Min, n, cap)
        } else {
            n
        };
        b.for_(zero, ub, four, &[], |b, i, _| {
            let at = b.bin(BinOp::Add, i, two);
            let v = b.load(Addressing::Contiguous, x, at, None, None, sx, Ty::Tile(DType::F32, 4));
            b.store(Addressing::Contiguous, y, i, v, None, sy);
            vec![]
        });
        let f = b.finish();
        let text = lnc_clif::clif_text(
            &f,
            &CodegenOptions { checked: false, emit_text: false, ..Default::default() },
        )
        .unwrap();
        // Both step their index in i64 (stepping past an unbounded `n` must not wrap);
        // only the bounded loop addresses from it, the other sign-extends its i32 index.
        let header = text.lines().find(|l| l.starts_with("block1(")).expect("a loop body block");
        assert!(header.contains("i64"), "the index steps in i64:\n{text}");
        let body: String =
            text.lines().skip_while(|l| !l.starts_with("block1(")).take_while(|l| !l.is_empty()).collect();
        assert_eq!(
            body.contains("sextend"),
            !bounded,
            "addresses from the i64 index only when bounded:\n{text}"
        );
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            for len in [0i64, 4, 8, 60, 64] {
                let xs: Vec<f32> = (0..70).map(|v| v as f32 * 0.5).collect();
                let mut xb = xs.clone();
                let mut yb = vec![f32::NAN; 70];
                run(&k, [1, 1, 1], &[slot(&mut xb), slot(&mut yb), scalar(pack_int(len))], None)
                    .unwrap_or_else(|e| panic!("n = {len}: {e:?}"));
                for (i, &v) in yb.iter().enumerate() {
                    let want = if (i as i64) < len { xs[i + 2] } else { f32::NAN };
                    assert!(
                        v == want || (v.is_nan() && want.is_nan()),
                        "n = {len}, y[{i}] = {v}, want {want}"
                    );
                }
            }
        }
    }
}

/// `G[i] = line_gap(X + i)` for `i` in `0..n` (slots: X: *d, G: *i32, n).
fn line_gap_kernel(d: DType) -> Function {
    let mut b = B::new("gaps");
    let x = b.ptr(0, d);
    let g = b.ptr(1, DType::I32);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let sg = b.site(1);
    let (zero, one) = (b.i32(0), b.i32(1));
    b.for_(zero, n, one, &[], |b, i, _| {
        let p = b.ptr_add(x, i);
        let gap = b.val(Opcode::LineGap, &[p], Ty::Scalar(DType::I32));
        b.store(Addressing::Scalar, g, i, gap, None, sg);
        vec![]
    });
    b.finish()
}

#[test]
fn line_gap_counts_elements_to_the_next_line() {
    for d in [DType::F32, DType::F64, DType::F16, DType::I8] {
        let size = d.size() as usize;
        let f = line_gap_kernel(d);
        for opts in &MODES {
            let k = compile_ok(&f, opts);
            // The pointer at every byte of a line, element-aligned or not (-1).
            for shift in 0..64usize {
                let n = 40usize;
                let mut xb = vec![0u8; 64 + shift + n * size];
                let base = xb.as_mut_ptr() as usize;
                let start = base.next_multiple_of(64) - base + shift;
                let mut gaps = vec![i32::MIN; n];
                let xs = slot(&mut xb[start..]);
                run(&k, [1, 1, 1], &[xs, slot(&mut gaps), scalar(pack_int(n as i64))], None)
                    .unwrap_or_else(|e| panic!("{e}"));
                for (i, &got) in gaps.iter().enumerate() {
                    let addr = shift + i * size;
                    let want =
                        if !addr.is_multiple_of(size) { -1 } else { ((64 - addr % 64) % 64 / size) as i32 };
                    assert_eq!(got, want, "{d:?}, byte {addr} of a line");
                }
            }
        }
    }
}

/// `for iv = 0 to n step 8 { m = min(iv, t); Y[m .. m + 8) = 1 }` (slots: Y: *fp32, n, t):
/// a loop whose last iteration lnc-tile's `stream` moves back (`t = n - 8`), its bounds
/// check hoisted over the clamped range.
fn clamped_kernel() -> Function {
    let mut b = B::new("clamped");
    let y = b.ptr(0, DType::F32);
    let n = b.arg(1, Ty::Scalar(DType::I32));
    let t = b.arg(2, Ty::Scalar(DType::I32));
    let sy = b.site(0);
    let (zero, eight, four) = (b.i32(0), b.i32(8), b.i32(4));
    let one = b.float(DType::F32, 1.0);
    let ones = b.splat(one, 4);
    b.for_(zero, n, eight, &[], |b, iv, _| {
        let m = b.bin(BinOp::Min, iv, t);
        b.store(Addressing::Contiguous, y, m, ones, None, sy);
        let m4 = b.bin(BinOp::Add, m, four);
        b.store(Addressing::Contiguous, y, m4, ones, None, sy);
        vec![]
    });
    b.finish()
}

#[test]
fn clamped_indices_are_checked_over_their_range() {
    let f = clamped_kernel();
    for checked in [true, false] {
        let k = compile_ok(&f, &CodegenOptions { checked, emit_text: false, ..Default::default() });
        // 20 elements: iterations at 0, 8 and 16 clamped to 12, the last overlapping.
        let mut buf = vec![0.0f32; 20];
        run(&k, [1, 1, 1], &[slot(&mut buf), scalar(pack_int(20)), scalar(pack_int(12))], None).unwrap();
        assert!(buf.iter().all(|&v| v == 1.0), "{buf:?}");
        if !checked {
            continue;
        }
        // A clamp below the loop's start or past the buffer is out of bounds, though the
        // unclamped range [0, 24) would not show it the first way.
        for (t, offset) in [(-4i64, -4i64), (16, 20)] {
            let mut buf = vec![0.0f32; 20];
            let r = run(&k, [1, 1, 1], &[slot(&mut buf), scalar(pack_int(20)), scalar(pack_int(t))], None);
            let fault = Fault { site: 0, arg: 0, offset };
            assert_eq!(
                r,
                Err(LaunchError::Fault { status: Status::OutOfBounds, pid: [0, 0, 0], fault }),
                "t = {t}"
            );
            assert!(buf.iter().all(|&v| v == 0.0), "t = {t}: checked before the loop ran: {buf:?}");
        }
    }
}

/// Each thread reuses its Cranelift contexts (`PooledContext`): a context given back by a
/// compile that failed halfway, or by another kernel's, compiles the next kernel to the
/// same machine code as a fresh one, and that kernel computes what it should.
#[test]
fn a_reused_context_compiles_like_a_fresh_one() {
    let axpb = axpb_kernel(8, 100);
    let opts = CodegenOptions { emit_text: true, ..CodegenOptions::default() };
    let fresh = std::thread::spawn({
        let (f, opts) = (axpb.clone(), opts);
        move || lnc_clif::asm_text(&f, &opts).unwrap()
    })
    .join()
    .unwrap();
    let reused = std::thread::spawn(move || {
        assert!(lnc_clif::compile(&ipow_kernel(), &CodegenOptions::default()).is_err());
        let _ = compile_ok(&row_sum_kernel(4), &CodegenOptions::default());
        let asm = lnc_clif::asm_text(&axpb, &opts).unwrap();
        let k = compile_ok(&axpb, &CodegenOptions::default());
        let x: Vec<f32> = (0..1003).map(|i| i as f32 * 0.37 - 50.0).collect();
        let y = run_axpb(&k, &x, None);
        assert!(x.iter().zip(&y).all(|(x, y)| *y == x * 1.5 - 2.0), "wrong results after reuse");
        asm
    })
    .join()
    .unwrap();
    assert!(fresh.lines().count() > 20, "{fresh}");
    assert_eq!(fresh, reused);
}
