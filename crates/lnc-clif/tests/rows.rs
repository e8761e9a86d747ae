//! `row_load` and `row_store`: whole rows of `fp16`/`bf16` converted by a runtime helper
//! (AVX-512, F16C or AVX2 where the CPU has them), bit for bit against the `half` crate — every
//! 16-bit pattern widened, every pattern and a million `fp32` values rounded back — in
//! rows at non-zero offsets, with counts that are not multiples of the helpers' eight
//! lanes, from misaligned pointers, and bounds-checked as one range.

mod common;

use common::*;
use half::{bf16, f16};
use lnc_clif::CodegenOptions;
use lnc_lir::*;
use lnc_runtime::{Fault, LaunchError, Status, pack_int};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Elements per row: each program converts one row of the input.
const ROW: i64 = 4096;

/// `count = min(max(n - pid·ROW, 0), ROW)` and `pid·ROW`: the row of this program.
fn this_row(b: &mut B, n: Value) -> (Value, Value) {
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let row = b.i32(ROW);
    let start = b.bin(BinOp::Mul, pid, row);
    let left = b.bin(BinOp::Sub, n, start);
    let zero = b.i32(0);
    let left = b.bin(BinOp::Max, left, zero);
    (b.bin(BinOp::Min, left, row), start)
}

/// `row_load` of `X: *d` into scratch, then each element stored to `Y: *fp32` (slots: X,
/// Y, n).
fn widen_kernel(d: DType) -> Function {
    let mut b = B::new("widen");
    let x = b.ptr(0, d);
    let y = b.ptr(1, DType::F32);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, sy) = (b.site(0), b.site(1));
    let s = b.f.add_scratch(d, ROW as u32);
    let (count, start) = this_row(&mut b, n);
    b.inst(Opcode::RowLoad { slot: s, site: sx, once: None }, &[x, start, count], &[]);
    let (zero, one) = (b.i32(0), b.i32(1));
    b.for_(zero, count, one, &[], |b, i, _| {
        let v = b.val(Opcode::ScratchLoad(s), &[i], Ty::Scalar(d));
        let w = b.cast(v, DType::F32);
        let at = b.bin(BinOp::Add, start, i);
        b.store(Addressing::Scalar, y, at, w, None, sy);
        vec![]
    });
    b.finish()
}

/// Each element of `X: *from` put in scratch of `held` (cast to it), then `row_store`d to
/// `Y: *d` (slots: X, Y, n); with `stream`, under a `stream_ok` flag of the row.
fn narrow_kernel(from: DType, held: DType, d: DType, stream: bool) -> Function {
    let mut b = B::new("narrow");
    let x = b.ptr(0, from);
    let y = b.ptr(1, d);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sx, sy) = (b.site(0), b.site(1));
    let s = b.f.add_scratch(held, ROW as u32);
    let (count, start) = this_row(&mut b, n);
    let (zero, one) = (b.i32(0), b.i32(1));
    b.for_(zero, count, one, &[], |b, i, _| {
        let at = b.bin(BinOp::Add, start, i);
        let v = b.load(Addressing::Scalar, x, at, None, None, sx, Ty::Scalar(from));
        let v = if from == held { v } else { b.cast(v, held) };
        b.inst(Opcode::ScratchStore(s), &[i, v], &[]);
        vec![]
    });
    if stream {
        let at = b.val(Opcode::PtrAdd, &[y, start], Ty::Ptr(d));
        let ok = b.val(Opcode::StreamOk, &[at, count], Ty::Scalar(DType::I1));
        b.inst(Opcode::RowStore { slot: s, site: sy, stream: true }, &[y, start, count, ok], &[]);
    } else {
        b.inst(Opcode::RowStore { slot: s, site: sy, stream: false }, &[y, start, count], &[]);
    }
    b.finish()
}

fn grid(n: usize) -> [u32; 3] {
    [n.div_ceil(ROW as usize) as u32, 1, 1]
}

/// Both modes, each also with every `stream_ok` true where aligned (a threshold of 0).
fn modes() -> Vec<CodegenOptions> {
    MODES.iter().flat_map(|&m| [m, CodegenOptions { stream_bytes: 0, ..m }]).collect()
}

/// Runs `f` (slots X, Y, n) on `input` with `Y` filled with `fill`, in every mode of
/// [`modes`]; with `misaligned`, the half-typed side sits one byte off its alignment.
fn run_rows<I: Copy, O: Copy>(f: &Function, input: &[I], fill: O, misaligned: bool) -> Vec<Vec<O>> {
    modes()
        .iter()
        .map(|opts| {
            let k = compile_ok(f, opts);
            let n = input.len();
            let (isz, osz) = (size_of::<I>(), size_of::<O>());
            // Byte buffers, the data starting at byte `shift`.
            let shift = misaligned as usize;
            let mut xb = vec![0u8; n * isz + shift];
            let mut yb = vec![0u8; n * osz + shift];
            for (k, v) in input.iter().enumerate() {
                // SAFETY: inside `xb`; unaligned writes.
                unsafe { xb.as_mut_ptr().add(shift + k * isz).cast::<I>().write_unaligned(*v) };
            }
            for k in 0..n {
                // SAFETY: inside `yb`; unaligned writes.
                unsafe { yb.as_mut_ptr().add(shift + k * osz).cast::<O>().write_unaligned(fill) };
            }
            let xs = slot(&mut xb[shift..]);
            let ys = slot(&mut yb[shift..]);
            run(&k, grid(n), &[xs, ys, scalar(pack_int(n as i64))], None).unwrap_or_else(|e| panic!("{e}"));
            (0..n)
                // SAFETY: inside `yb`; unaligned reads.
                .map(|k| unsafe { yb.as_ptr().add(shift + k * osz).cast::<O>().read_unaligned() })
                .collect()
        })
        .collect()
}

/// Every 16-bit pattern, then three more: 65 539 elements, 17 rows, the last one of 3
/// elements (none of the helpers' eight-lane groups).
fn all_patterns() -> Vec<u16> {
    let mut v: Vec<u16> = (0..=u16::MAX).collect();
    v.extend([0x7C01, 0x8001, 0x3C00]);
    v
}

fn to_f32(d: DType, h: u16) -> f32 {
    if d == DType::F16 { f16::from_bits(h).to_f32() } else { bf16::from_bits(h).to_f32() }
}

fn from_f32(d: DType, x: f32) -> u16 {
    if d == DType::F16 { f16::from_f32(x).to_bits() } else { bf16::from_f32(x).to_bits() }
}

#[test]
fn every_fp16_and_bf16_pattern_through_a_row_load() {
    let pats = all_patterns();
    for d in [DType::F16, DType::BF16] {
        let f = widen_kernel(d);
        for misaligned in [false, true] {
            for (m, got) in run_rows(&f, &pats, 0u32, misaligned).into_iter().enumerate() {
                for (i, (&g, &h)) in got.iter().zip(&pats).enumerate() {
                    let want = to_f32(d, h).to_bits();
                    assert_eq!(g, want, "{d}, misaligned {misaligned}, mode {m}: {h:#06x} (element {i})");
                }
            }
        }
    }
}

#[test]
fn every_fp16_and_bf16_pattern_back_through_a_row_store() {
    let pats = all_patterns();
    for d in [DType::F16, DType::BF16] {
        // Held as the dtype (its fp32 value) and stored: the pattern, NaNs quieted.
        for (f, misaligned) in
            [false, true].map(|s| narrow_kernel(d, d, d, s)).iter().flat_map(|f| [(f, false), (f, true)])
        {
            for (m, got) in run_rows(f, &pats, 0u16, misaligned).into_iter().enumerate() {
                for (i, (&g, &h)) in got.iter().zip(&pats).enumerate() {
                    let want = from_f32(d, to_f32(d, h));
                    assert_eq!(g, want, "{d}, misaligned {misaligned}, mode {m}: {h:#06x} (element {i})");
                }
            }
        }
    }
}

#[test]
fn fp32_rows_round_to_fp16_and_bf16_bit_exactly() {
    let mut rng = StdRng::seed_from_u64(0x20f5);
    for d in [DType::F16, DType::BF16] {
        let mut inputs = edge_f32(d);
        for _ in 0..300_000 {
            inputs.push(rng.random::<u32>());
            let e = rng.random_range(100u32..150) << 23;
            inputs.push(e | (rng.random::<u32>() & 0x807F_FFFF));
        }
        // A last row of 5 elements.
        inputs.truncate(inputs.len() / ROW as usize * ROW as usize + 5);
        let xs: Vec<f32> = inputs.iter().map(|&u| f32::from_bits(u)).collect();
        let kernels = [false, true].map(|s| narrow_kernel(DType::F32, DType::F32, d, s));
        for (f, misaligned) in kernels.iter().flat_map(|f| [(f, false), (f, true)]) {
            for (m, got) in run_rows(f, &xs, 0u16, misaligned).into_iter().enumerate() {
                for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
                    let want = from_f32(d, x);
                    assert_eq!(
                        g,
                        want,
                        "fp32 -> {d}, misaligned {misaligned}, mode {m}: {:#010x}",
                        x.to_bits()
                    );
                    assert!(i < xs.len());
                }
            }
        }
        assert!(xs.len() > 600_000);
    }
}

/// A row reaching past its buffer is one range check: the fault names the first element
/// past the end, before anything is converted; a row of no elements touches nothing.
#[test]
fn a_row_past_the_end_faults_at_the_first_element_outside() {
    for d in [DType::F16, DType::BF16] {
        let k = compile_ok(&widen_kernel(d), &Default::default());
        let mut x = vec![0x3C00u16; 100];
        let mut y = vec![-1.0f32; 101];
        let r = run(&k, [1, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(101))], None);
        let fault = Fault { site: 0, arg: 0, offset: 100 };
        assert_eq!(r, Err(LaunchError::Fault { status: Status::OutOfBounds, pid: [0, 0, 0], fault }));
        assert!(y.iter().all(|&v| v == -1.0), "{d}: nothing runs past the check");
        // The second program's row starts past the end.
        let mut x = vec![0x3C00u16; ROW as usize];
        let mut y = vec![-1.0f32; ROW as usize + 1];
        let r = run(&k, [2, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(ROW + 1))], None);
        let fault = Fault { site: 0, arg: 0, offset: ROW };
        assert_eq!(r, Err(LaunchError::Fault { status: Status::OutOfBounds, pid: [1, 0, 0], fault }));

        let k = compile_ok(&narrow_kernel(DType::F32, DType::F32, d, true), &Default::default());
        let mut x = vec![1.0f32; 10];
        let mut y = vec![0u16; 9];
        let r = run(&k, [1, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(10))], None);
        let fault = Fault { site: 1, arg: 1, offset: 9 };
        assert_eq!(r, Err(LaunchError::Fault { status: Status::OutOfBounds, pid: [0, 0, 0], fault }));
        assert!(y.iter().all(|&v| v == 0), "{d}: the row store did not run");

        // `n <= 0`: empty rows, empty buffers.
        for n in [0, -3] {
            let (mut x, mut y) = (Vec::<f32>::new(), Vec::<u16>::new());
            run(&k, [1, 1, 1], &[slot(&mut x), slot(&mut y), scalar(pack_int(n))], None)
                .unwrap_or_else(|e| panic!("{d}, n = {n}: {e}"));
        }
    }
}

/// `row_load.once(3)` of the same row `W[0..n]` in every program, each program copying it
/// to its row of `Y: *fp32` (slots: W, Y, n).
fn broadcast_kernel(d: DType) -> Function {
    let mut b = B::new("broadcast");
    let w = b.ptr(0, d);
    let y = b.ptr(1, DType::F32);
    let n = b.arg(2, Ty::Scalar(DType::I32));
    let (sw, sy) = (b.site(0), b.site(1));
    // After the flag bytes the runtime zeroes, as the tiler places buffers.
    let _flags = b.f.add_scratch(DType::I32, 16);
    let s = b.f.add_scratch(d, ROW as u32);
    let zero = b.i32(0);
    let row = b.i32(ROW);
    let count = b.bin(BinOp::Min, n, row);
    let count = b.bin(BinOp::Max, count, zero);
    b.inst(Opcode::RowLoad { slot: s, site: sw, once: Some(3) }, &[w, zero, count], &[]);
    let pid = b.val(Opcode::ProgramId(0), &[], Ty::Scalar(DType::I32));
    let base = b.bin(BinOp::Mul, pid, count);
    let one = b.i32(1);
    b.for_(zero, count, one, &[], |b, i, _| {
        let v = b.val(Opcode::ScratchLoad(s), &[i], Ty::Scalar(d));
        let v = b.cast(v, DType::F32);
        let at = b.bin(BinOp::Add, base, i);
        b.store(Addressing::Scalar, y, at, v, None, sy);
        vec![]
    });
    b.finish()
}

/// A row converted once per launch and worker: every program sees it, on pools of 1, 2 and
/// 4 threads, and a launch after the row changed sees the new one (the flags are zeroed
/// for every launch, not kept with the cached scratch area).
#[test]
fn a_row_converted_once_per_launch_is_seen_by_every_program() {
    for d in [DType::F16, DType::BF16] {
        let f = broadcast_kernel(d);
        assert!(lnc_lir::print_function(&f).contains("row_load.once(3)"));
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            for threads in [1, 2, 4] {
                let p = pool(threads);
                for launch in 0..3u16 {
                    let n = 37;
                    let programs = 23;
                    let mut w: Vec<u16> =
                        (0..n).map(|i| from_f32(d, i as f32 * 0.5 + launch as f32)).collect();
                    let mut y = vec![f32::NAN; n * programs];
                    let args = [slot(&mut w), slot(&mut y), scalar(pack_int(n as i64))];
                    run(&k, [programs as u32, 1, 1], &args, Some(&p)).unwrap_or_else(|e| panic!("{e}"));
                    for (i, v) in y.iter().enumerate() {
                        let want = to_f32(d, w[i % n]);
                        assert_eq!(*v, want, "{d}, {threads} threads, launch {launch}, element {i}");
                    }
                }
            }
        }
    }
}

/// `k = c[0]²` broadcast by a tile loop writing `k` to a row of `Y: *fp32`, then the row of
/// `X: *d` converted by `row_load`, then a second tile loop writing `X·k` over it (slots: X,
/// Y, c, n; rows of whole tiles only).
fn rebroadcast_kernel(d: DType) -> Function {
    let mut b = B::new("rebroadcast");
    let x = b.ptr(0, d);
    let y = b.ptr(1, DType::F32);
    let c = b.ptr(2, DType::F32);
    let n = b.arg(3, Ty::Scalar(DType::I32));
    let (sx, sy, sc) = (b.site(0), b.site(1), b.site(2));
    let s = b.f.add_scratch(d, ROW as u32);
    let (count, start) = this_row(&mut b, n);
    let zero = b.i32(0);
    let c0 = b.load(Addressing::Scalar, c, zero, None, None, sc, Ty::Scalar(DType::F32));
    let k = b.bin(BinOp::Mul, c0, c0);
    let four = b.i32(4);
    b.for_(zero, count, four, &[], |b, i, _| {
        let at = b.bin(BinOp::Add, start, i);
        let v = b.splat(k, 4);
        b.store(Addressing::Contiguous, y, at, v, None, sy);
        vec![]
    });
    b.inst(Opcode::RowLoad { slot: s, site: sx, once: None }, &[x, start, count], &[]);
    b.for_(zero, count, four, &[], |b, i, _| {
        let t = b.val(Opcode::ScratchLoad(s), &[i], Ty::Tile(d, 4));
        let t = b.cast(t, DType::F32);
        let kk = b.splat(k, 4);
        let v = b.bin(BinOp::Mul, t, kk);
        let at = b.bin(BinOp::Add, start, i);
        b.store(Addressing::Contiguous, y, at, v, None, sy);
        vec![]
    });
    b.finish()
}

/// A scalar that loops on both sides of a helper call broadcast is saved to a stack slot
/// where it is defined and loaded again after the call, so that the second loop
/// broadcasts it in front of itself (a vector kept across the call would live in a stack
/// slot inside that loop); the results are those of the scalar itself.
#[test]
fn a_scalar_broadcast_after_a_row_helper_call_is_reloaded() {
    for d in [DType::F16, DType::BF16] {
        let f = rebroadcast_kernel(d);
        let clif = lnc_clif::clif_text(&f, &MODES[1]).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<&str> = clif.lines().collect();
        let call = lines.iter().position(|l| l.contains(" call ")).expect("the row_load call");
        // `stack_store`/`stack_load` print as a `stack_addr` and a store or load.
        let slot_access = |ls: &[&str], op: &str| {
            ls.windows(2).any(|w| {
                let addr = w[0].split_whitespace().next().unwrap_or("");
                w[0].contains("stack_addr") && w[1].contains(op) && w[1].ends_with(addr)
            })
        };
        assert!(slot_access(&lines[..call], " store "), "{clif}");
        assert!(slot_access(&lines[call..], " = load."), "{clif}");
        for opts in MODES {
            let k = compile_ok(&f, &opts);
            let n = 3 * ROW as usize + 1000;
            let mut rng = StdRng::seed_from_u64(7);
            let mut x: Vec<u16> = (0..n).map(|_| from_f32(d, rng.random_range(-4.0..4.0))).collect();
            let mut y = vec![f32::NAN; n];
            let mut c = vec![1.25f32];
            let args = [slot(&mut x), slot(&mut y), slot(&mut c), scalar(pack_int(n as i64))];
            run(&k, grid(n), &args, None).unwrap_or_else(|e| panic!("{e}"));
            for (i, (&h, &v)) in x.iter().zip(&y).enumerate() {
                assert_eq!(v, to_f32(d, h) * (1.25f32 * 1.25f32), "{d}, element {i}");
            }
        }
    }
}
