//! Safe launches that prove their bounds before they run (`lnc_bir::reach`,
//! `CompileOptions::prove_bounds`) and then run the code without checks:
//! - soundness: on random arguments and buffer lengths around what each kernel touches, a
//!   launch is proved only if the reference interpreter, which checks every access, finds
//!   none out of bounds; the proved launch gives the interpreter's results, and an unproved
//!   one runs the checked code, compiled then, which fails exactly where the interpreter
//!   does;
//! - precision: the seed kernels on buffers of the exact lengths are proved, and one element
//!   less in any buffer is not, and fails naming that buffer;
//! - the checked code the proof replaces still computes the same bits.
//!
//! The kernels after `gather` come from a review: unsigned constants of 2^63 and more
//! (held as negative `i64`s) were taken as negative, and grids beyond `i32` wrapped.

mod common;

use common::diff::*;
use common::*;
use rand::Rng;
use rand::rngs::StdRng;

const SRC: &str = r#"import triton
import triton.language as tl


@triton.jit
def add(X, Y, Z, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(Z + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def rows_2d(X, Y, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tl.store(Y + rows[:, None] * N + cols[None, :], x + 1.0, mask=mask)


@triton.jit
def transposed_mask(X, Y, M, B: tl.constexpr):
    # The mask bounds `r` along rows; the load reads `r` along columns: every column.
    r = tl.arange(0, B)
    mask = r[:, None] < M
    x = tl.load(X + r[None, :] + 0 * r[:, None], mask=mask, other=0.0)
    tl.store(Y + r[:, None] * B + r[None, :], x, mask=mask)


@triton.jit
def mask_expanded_after(X, Y, M, B: tl.constexpr):
    r = tl.arange(0, B)
    mask = (r < M)[:, None] & (r < B)[None, :]
    x = tl.load(X + r[None, :] + 0 * r[:, None], mask=mask, other=0.0)
    tl.store(Y + r[:, None] * B + r[None, :], x, mask=mask)


@triton.jit
def row_sums(X, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + row * N + cols, mask=cols < N, other=0.0)
    tl.store(S + row, tl.sum(acc, axis=0))


@triton.jit
def row_sums_unmasked(X, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        acc += tl.load(X + row * N + off + tl.arange(0, BLOCK))
    tl.store(S + row, tl.sum(acc, axis=0))


@triton.jit
def backwards(X, Y, N):
    for i in range(N - 1, -1, -2):
        tl.store(Y + i, tl.load(X + i) * 2.0)


@triton.jit
def int_ops(X, Y, N, K):
    pid = tl.program_id(0)
    a = (pid * 7) % N
    b = (pid // 3) << 1
    c = (pid >> 1) & 15
    tl.store(Y + pid, tl.load(X + a) + tl.load(X + b) + tl.load(X + c + K))


@triton.jit
def lower_mask(X, Y, lo, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) - lo
    m = (offs >= 0) & (offs < N)
    tl.store(Y + offs, tl.load(X + offs, mask=m), mask=m)


@triton.jit
def clamped(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.where(offs < N, offs, N - 1)
    tl.store(Y + offs, tl.load(X + idx), mask=offs < N)


@triton.jit
def branchy(X, Y, K):
    pid = tl.program_id(0)
    if pid % 2 == 0:
        j = pid + K
    else:
        j = pid - K
    tl.store(Y + pid, tl.load(X + j))


@triton.jit
def wide_offsets(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)


@triton.jit
def wrapping(X, Y, K):
    pid = tl.program_id(0)
    tl.store(Y + pid, tl.load(X + (pid + K) * 65536))


@triton.jit
def gather(X, I, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.load(I + offs, mask=offs < N, other=0)
    tl.store(Y + offs, tl.load(X + idx, mask=offs < N), mask=offs < N)

@triton.jit
def u64_mask(Y, N):
    offs = N + tl.arange(0, 16).to(tl.uint64)
    tl.store(Y + offs, 1.0, mask=offs < 9223372036854775808)


@triton.jit
def u64_rem(Y, N):
    tl.store(Y + N % 18446744073709551615, 1.0)


@triton.jit
def u64_max(Y, N):
    tl.store(Y + (tl.maximum(N, 18446744073709551615) - N), 1.0)


@triton.jit
def u64_step(Y, N):
    for i in range(0, N, 9223372036854775808):
        tl.store(Y + 1000, 1.0)


@triton.jit
def u64_ub(Y, N):
    for i in range(N, 18446744073709551615):
        tl.store(Y + 1000, 1.0)


@triton.jit
def u64_gt(Y, N):
    offs = N + tl.arange(0, 16).to(tl.uint64)
    tl.store(Y + offs, 1.0, mask=18446744073709551615 > offs)


@triton.jit
def grid_size(Y):
    tl.store(Y + ((tl.num_programs(0) >> 30) - 2), 1.0)


@triton.jit
def nested(X, N, M):
    for i in range(0, N):
        for j in range(i, M, 3):
            tl.store(X + i * 8 + j, 1.0)


@triton.jit
def scalar_mask(X, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(X + pid * BLOCK + tl.arange(0, BLOCK), 1.0, mask=pid < K)


@triton.jit
def loop_mask(X, N):
    for i in range(0, 64, 16):
        offs = i + tl.arange(0, 16)
        tl.store(X + offs, 1.0, mask=(offs < N) & (offs >= i))


@triton.jit
def both_sides(X, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    n = tl.zeros([BLOCK], dtype=tl.int32) + N
    tl.store(X + n - 1 - offs, 1.0, mask=offs < n)


@triton.jit
def unsigned32(X, K, N):
    offs = tl.arange(0, 16).to(tl.uint32) + K
    tl.store(X + offs, 1.0, mask=offs < N)


@triton.jit
def ptr_select(X, A, B):
    pid = tl.program_id(0)
    p = tl.where(pid % 2 == 0, X + A, X + B)
    tl.store(p, 1.0)


@triton.jit
def bool_cmp(X, N, M, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c = (offs < N) < (offs < M)
    tl.store(X + offs, 1.0, mask=c)


@triton.jit
def branch_loop(X, N, K):
    pid = tl.program_id(0)
    if pid < K:
        for i in range(pid, N):
            tl.store(X + i, 1.0)
    else:
        tl.store(X + pid - K, 2.0)

@triton.jit
def grid_stride(X, Y, N, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, N, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(Y + offs, tl.load(X + offs, mask=offs < N) * 2.0, mask=offs < N)


@triton.jit
def runtime_step(X, Y, lo, hi, S):
    for i in range(lo, hi, S):
        tl.store(Y + i, tl.load(X + i) + 1.0)

@triton.jit
def per_program_step(Y, lo, hi):
    # -1 in program 0, 1 in program 1: a step of either sign.
    for i in range(lo, hi, 2 * tl.program_id(0) - 1):
        tl.store(Y + i, 1.0)
"#;

/// A length near `need`: short by up to 2, exact, or longer.
fn near(rng: &mut StdRng, need: i64) -> usize {
    (need + [-2, -1, -1, 0, 0, 0, 0, 1, 3][rng.random_range(0..9)]).max(0) as usize
}

fn buf(rng: &mut StdRng, len: usize) -> A {
    A::at(randn(rng, len, 0.0, 1.0), 0)
}

/// A buffer of a length [`near`] `need`.
fn near_buf(rng: &mut StdRng, need: i64) -> A {
    let len = near(rng, need);
    buf(rng, len)
}

#[derive(Default, Debug)]
struct Tally {
    proved: usize,
    checked_ok: usize,
    out_of_bounds: usize,
    /// Out of bounds to the interpreter, in bounds modulo 2^64 to the checked code.
    wrapped: usize,
}

/// Runs `trials` random cases of one kernel: the proof never passes a launch the
/// interpreter finds out of bounds; proved and checked launches both match it.
fn sound(module: &lnc::Module, trials: usize, case: impl FnMut(&mut StdRng) -> Case) -> Tally {
    let t = sound_modulo(module, trials, case);
    assert_eq!(t.wrapped, 0, "{t:?}");
    t
}

/// [`sound`] where the checked code may find in bounds, modulo 2^64 bytes, an access the
/// interpreter does not.
fn sound_modulo(module: &lnc::Module, trials: usize, mut case: impl FnMut(&mut StdRng) -> Case) -> Tally {
    let mut rng = seeded(0x5eac);
    let mut t = Tally::default();
    for _ in 0..trials {
        let c = case(&mut rng);
        let proved = proved(module, &c).unwrap_or_else(|e| panic!("{e}"));
        let reference = run_interp(module, &c);
        match reference {
            Err(e) if e.contains("out-of-bounds") => {
                assert!(!proved, "{} {:?}: proved, but the interpreter says: {e}", c.kernel, c.args);
                match run_jit_unlinted(module, &c) {
                    Err(lnc::Error::OutOfBounds(_)) => t.out_of_bounds += 1,
                    // The code computes addresses modulo 2^64 bytes, the interpreter offsets
                    // exactly: an offset of 2^62 `fp32` elements is the address itself to the
                    // checked code (docs/safety.md).
                    Ok(_) => t.wrapped += 1,
                    Err(err) => panic!("{}: {err}", c.kernel),
                }
            }
            Err(e) => panic!("{}: {e}", c.kernel),
            Ok(reference) => {
                let jit = run_jit_unlinted(module, &c).unwrap_or_else(|e| panic!("{}: {e}", c.kernel));
                compare(&c, if proved { "proved" } else { "checked" }, &jit, &reference);
                if proved {
                    t.proved += 1;
                } else {
                    t.checked_ok += 1;
                }
            }
        }
    }
    t
}

fn module(jit: &lnc::Jit) -> lnc::Module {
    jit.module("reach.py", SRC).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn proofs_agree_with_the_interpreter_on_masked_rows() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    let t = sound(&m, 60, |rng| {
        let n = rng.random_range(0..300i64);
        let grid = rng.random_range(0..7u32);
        let need = n.min(i64::from(grid) * 64);
        let args = vec![near_buf(rng, need), near_buf(rng, need), near_buf(rng, need), A::I32(n as i32)];
        Case::new("add", "*fp32,*fp32,*fp32,i32,64", grid, args)
    });
    assert!(t.proved >= 15 && t.out_of_bounds >= 15, "{t:?}");

    let t = sound(&m, 60, |rng| {
        let (rows, n) = (rng.random_range(1..20i64), rng.random_range(1..40i64));
        let stride = n + rng.random_range(0..3);
        let grid = (rows as u32).div_ceil(4) + rng.random_range(0..2);
        let args = vec![
            near_buf(rng, (rows - 1) * stride + n.min(32)),
            near_buf(rng, (rows - 1) * n + n.min(32)),
            A::I32(rows as i32),
            A::I32(n as i32),
            A::I32(stride as i32),
        ];
        Case::new("rows_2d", "*fp32,*fp32,i32,i32,i32,4,32", grid, args)
    });
    assert!(t.proved >= 15 && t.out_of_bounds >= 15, "{t:?}");
}

#[test]
fn a_mask_narrows_only_the_elements_it_reads_at() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    for kernel in ["transposed_mask", "mask_expanded_after"] {
        let t = sound(&m, 40, |rng| {
            let rows = rng.random_range(1..17i64);
            // Every column of X is read whatever `M`: 16 elements.
            let len = rng.random_range(rows as usize..18);
            let args = vec![buf(rng, len), buf(rng, 256), A::I32(rows as i32)];
            Case::new(kernel, "*fp32,*fp32,i32,16", 1u32, args)
        });
        assert!(t.proved >= 5 && t.out_of_bounds >= 10, "{kernel}: {t:?}");
    }
}

#[test]
fn proofs_agree_with_the_interpreter_on_loops() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    for kernel in ["row_sums", "row_sums_unmasked"] {
        let t = sound(&m, 50, |rng| {
            let (rows, n) = (rng.random_range(1..6u32), rng.random_range(0..70i64));
            let need = if kernel == "row_sums" {
                i64::from(rows) * n
            } else {
                (i64::from(rows) - 1) * n + (n + 15) / 16 * 16
            };
            let args = vec![near_buf(rng, need), near_buf(rng, rows.into()), A::I32(n as i32)];
            // The JIT sums a row in another order than the interpreter.
            Case::new(kernel, "*fp32,*fp32,i32,16", rows, args)
                .check(1, Check::Close { atol: 1e-5, rtol: 1e-5 })
        });
        assert!(t.proved >= 10 && t.out_of_bounds >= 10, "{kernel}: {t:?}");
    }
    let t = sound(&m, 40, |rng| {
        let n = rng.random_range(-2..40i64);
        let args = vec![near_buf(rng, n.max(0)), near_buf(rng, n.max(0)), A::I32(n as i32)];
        Case::new("backwards", "*fp32,*fp32,i32", 1u32, args)
    });
    assert!(t.proved >= 10 && t.out_of_bounds >= 10, "backwards: {t:?}");
}

#[test]
fn proofs_agree_with_the_interpreter_on_integer_arithmetic() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    let t = sound(&m, 60, |rng| {
        let (grid, n, k) =
            (rng.random_range(1..40u32), rng.random_range(1..30i64), rng.random_range(-3..20i64));
        let g = i64::from(grid);
        let need = (n - 1).min(7 * (g - 1)).max((g - 1) / 3 * 2).max(15.min((g - 1) / 2) + k) + 1;
        let args = vec![near_buf(rng, need), near_buf(rng, g), A::I32(n as i32), A::I32(k as i32)];
        Case::new("int_ops", "*fp32,*fp32,i32,i32", grid, args)
    });
    assert!(t.proved >= 10 && t.out_of_bounds >= 10, "int_ops: {t:?}");

    let t = sound(&m, 60, |rng| {
        let (lo, n, grid) =
            (rng.random_range(-40..40i64), rng.random_range(0..80i64), rng.random_range(1..4u32));
        let args = vec![near_buf(rng, n), near_buf(rng, n), A::I32(lo as i32), A::I32(n as i32)];
        Case::new("lower_mask", "*fp32,*fp32,i32,i32,32", grid, args)
    });
    assert!(t.proved >= 10 && t.out_of_bounds >= 5, "lower_mask: {t:?}");

    let t = sound(&m, 40, |rng| {
        let (grid, k) = (rng.random_range(1..12u32), rng.random_range(0..6i64));
        let g = i64::from(grid);
        let len = near(rng, g + 2 * k);
        let args = vec![A::at(randn(rng, len, 0.0, 1.0), k as usize), buf(rng, g as usize), A::I32(k as i32)];
        Case::new("branchy", "*fp32,*fp32,i32", grid, args)
    });
    assert!(t.proved >= 5 && t.out_of_bounds >= 5, "branchy: {t:?}");

    let t = sound(&m, 40, |rng| {
        let (n, grid) = (rng.random_range(0..200i64), rng.random_range(1..5u32));
        let args = vec![
            near_buf(rng, n.min(i64::from(grid) * 64)),
            near_buf(rng, n.min(i64::from(grid) * 64)),
            A::I64(n),
        ];
        Case::new("wide_offsets", "*fp32,*fp32,i64,64", grid, args)
    });
    assert!(t.proved >= 10 && t.out_of_bounds >= 5, "wide_offsets: {t:?}");
}

#[test]
fn what_cannot_be_proved_runs_checked() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    // `where` joins both sides: the proof asks for 32 elements where `N` suffice.
    let t = sound(&m, 30, |rng| {
        let n = rng.random_range(1..40i64);
        let args = vec![near_buf(rng, n.min(32)), near_buf(rng, n.min(32)), A::I32(n as i32)];
        Case::new("clamped", "*fp32,*fp32,i32,32", 1u32, args)
    });
    assert!(t.checked_ok >= 5 && t.out_of_bounds >= 5, "clamped: {t:?}");
    // `(pid + K) * 65536` wraps in 32 bits for large `K`: never proved then.
    let t = sound(&m, 20, |rng| {
        let k = [0i64, 1, 40_000][rng.random_range(0..3)];
        let len = if k == 40_000 { 1 } else { 65536 * (2 + k as usize) };
        let args = vec![buf(rng, len), buf(rng, 2), A::I32(k as i32)];
        Case::new("wrapping", "*fp32,*fp32,i32", 2u32, args)
    });
    assert!(t.proved >= 3 && t.out_of_bounds >= 3, "wrapping: {t:?}");
    // An index read from memory: never proved.
    let t = sound(&m, 20, |rng| {
        let n = rng.random_range(1..32i64);
        let idx: Vec<i32> = (0..32).map(|_| rng.random_range(0..40)).collect();
        let args = vec![buf(rng, 40), A::at(idx, 0), buf(rng, 32), A::I32(n as i32)];
        Case::new("gather", "*fp32,*i32,*fp32,i32,32", 1u32, args)
    });
    assert_eq!(t.proved, 0, "gather: {t:?}");
    assert!(t.checked_ok >= 5, "gather: {t:?}");
}

/// Launches `k` safely on `bufs` (by index, shortened by one element where `short` says)
/// followed by `tail`; returns whether it was proved and what the launch gave.
fn launch_short<'a>(
    k: &lnc::Kernel,
    grid: u32,
    bufs: &'a mut [Vec<f32>],
    short: Option<usize>,
    tail: Vec<lnc::Arg<'a>>,
) -> (bool, lnc::Result<()>) {
    let mut args: Vec<lnc::Arg<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let len = b.len() - usize::from(short == Some(i));
            lnc::Arg::from(&mut b[..len])
        })
        .collect();
    args.extend(tail);
    let proved = k.bounds_proved(grid, &args).unwrap_or_else(|e| panic!("{e}"));
    (proved, k.launch(grid, &args))
}

/// The seed's three kernels: buffers of the lengths they touch are proved; any one of them
/// an element short is not, and that launch fails naming it.
#[test]
fn seed_kernels_are_proved_on_exact_buffers_only() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    for (m, n, group) in [(9usize, 100usize, 4usize), (37, 1000, 8)] {
        let block = n.next_power_of_two();
        let fwd = module
            .kernel(
                "_layer_norm_fwd_fused",
                &format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let names = ["X", "Y", "W", "B", "M", "V"];
        let mut bufs = vec![randn(&mut rng, m * n, 0.5, 1.0), vec![0.0; m * n], randn(&mut rng, n, 1.0, 0.1)];
        bufs.extend([randn(&mut rng, n, 0.0, 0.1), vec![0.0; m], vec![0.0; m]]);
        let scalars = || vec![lnc::Arg::from(n as i32), lnc::Arg::from(n as i32), lnc::Arg::from(1e-5f32)];
        let (proved, run) = launch_short(&fwd, m as u32, &mut bufs, None, scalars());
        assert!(proved, "forward {m}x{n}");
        run.unwrap_or_else(|e| panic!("{e}"));
        for (i, name) in names.iter().enumerate() {
            let (proved, run) = launch_short(&fwd, m as u32, &mut bufs, Some(i), scalars());
            assert!(!proved, "forward {m}x{n}, {name} short");
            match run {
                Err(lnc::Error::OutOfBounds(e)) => assert_eq!(e.param, *name),
                other => panic!("forward {m}x{n}, {name} short: {other:?}"),
            }
        }

        let dx = module
            .kernel("_layer_norm_bwd_dx_fused", &seed_dx_signature("fp32", group, block))
            .unwrap_or_else(|e| panic!("{e}"));
        let names = ["DX", "DY", "DW", "DB", "X", "W", "B", "M", "V"];
        let mut bufs = vec![
            vec![0.0; m * n],
            randn(&mut rng, m * n, 0.0, 1.0),
            vec![0.0; group * n],
            vec![0.0; group * n],
        ];
        bufs.extend([
            randn(&mut rng, m * n, 0.5, 1.0),
            randn(&mut rng, n, 1.0, 0.1),
            randn(&mut rng, n, 0.0, 0.1),
        ]);
        bufs.extend([randn(&mut rng, m, 0.0, 0.1), randn(&mut rng, m, 1.0, 0.1)]);
        for short in std::iter::once(None).chain((0..names.len()).map(Some)) {
            let mut locks = vec![0i32; 2 * group];
            let tail = vec![
                lnc::Arg::from(&mut locks[..]),
                lnc::Arg::from(n as i32),
                lnc::Arg::from(n as i32),
                lnc::Arg::from(1e-5f32),
            ];
            let (proved, run) = launch_short(&dx, m as u32, &mut bufs, short, tail);
            match short {
                None => {
                    assert!(proved, "dx {m}x{n}");
                    run.unwrap_or_else(|e| panic!("{e}"));
                }
                // The kernel never reads B.
                Some(i) if names[i] == "B" => {
                    assert!(proved, "dx {m}x{n}, B short");
                    run.unwrap_or_else(|e| panic!("{e}"));
                }
                Some(i) => {
                    assert!(!proved, "dx {m}x{n}, {} short", names[i]);
                    match run {
                        Err(lnc::Error::OutOfBounds(e)) => assert_eq!(e.param, names[i]),
                        other => panic!("dx {m}x{n}, {} short: {other:?}", names[i]),
                    }
                }
            }
        }

        let dwdb = module
            .kernel("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128")
            .unwrap_or_else(|e| panic!("{e}"));
        let names = ["DW", "DB", "FINAL_DW", "FINAL_DB"];
        let mut bufs = vec![
            randn(&mut rng, group * n, 0.0, 1.0),
            randn(&mut rng, group * n, 0.0, 1.0),
            vec![0.0; n],
            vec![0.0; n],
        ];
        let scalars = || vec![lnc::Arg::from(group as i32), lnc::Arg::from(n as i32)];
        let grid = n.div_ceil(128) as u32;
        let (proved, run) = launch_short(&dwdb, grid, &mut bufs, None, scalars());
        assert!(proved, "dwdb {group}x{n}");
        run.unwrap_or_else(|e| panic!("{e}"));
        for (i, name) in names.iter().enumerate() {
            let (proved, run) = launch_short(&dwdb, grid, &mut bufs, Some(i), scalars());
            assert!(!proved, "dwdb {group}x{n}, {name} short");
            match run {
                Err(lnc::Error::OutOfBounds(e)) => assert_eq!(e.param, *name),
                other => panic!("dwdb {group}x{n}, {name} short: {other:?}"),
            }
        }
    }
}

/// The checked code a proved launch skips computes the same bits: the seed's forward and
/// dx kernels in every storage dtype, checked (no proof) against proved.
#[test]
fn checked_and_proved_launches_compute_the_same_bits() {
    let proving = lnc::Jit::new();
    let checking = lnc::Jit::with_options(lnc::CompileOptions { prove_bounds: false, ..Default::default() });
    let (pm, cm) = (seed_module(&proving), seed_module(&checking));
    let mut rng = rng();
    for (m, n) in [(5usize, 77usize), (19, 1000)] {
        let x = randn(&mut rng, m * n, 0.5, 1.0);
        let w = randn(&mut rng, n, 1.0, 0.1);
        let dy = randn(&mut rng, m * n, 0.0, 1.0);
        fn both<T: Float>(pm: &lnc::Module, cm: &lnc::Module, x: &[f32], w: &[f32], dy: &[f32], n: usize) {
            let conv = |v: &[f32]| v.iter().map(|&f| T::from_f32(f)).collect::<Vec<T>>();
            let (x, w, dy) = (conv(x), conv(w), conv(dy));
            // A lock per row: the partial sums then do not depend on which program
            // takes a lock first.
            let a = run_seed_dx(pm, &x, &dy, &w, n, 32, false);
            let b = run_seed_dx(cm, &x, &dy, &w, n, 32, false);
            let bits = |v: &[T]| v.iter().map(|t| t.to_f64().to_bits()).collect::<Vec<u64>>();
            assert_eq!(bits(&a.0), bits(&b.0), "{} dx", T::SIG);
            assert_eq!(bits(&a.1), bits(&b.1), "{} partial dw", T::SIG);
            assert_eq!(bits(&a.2), bits(&b.2), "{} partial db", T::SIG);
        }
        both::<f32>(&pm, &cm, &x, &w, &dy, n);
        both::<half::f16>(&pm, &cm, &x, &w, &dy, n);
        both::<half::bf16>(&pm, &cm, &x, &w, &dy, n);
    }
}

/// Unsigned values and constants at the edges of `u64`, which the IR holds as the bits of
/// an `i64`.
#[test]
fn proofs_agree_with_the_interpreter_on_unsigned_edges() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    const EDGES: [u64; 6] = [0, 1, 5, 1 << 63, u64::MAX - 2, u64::MAX - 1];
    for (kernel, values) in [
        ("u64_mask", &EDGES[..]),
        ("u64_rem", &EDGES[..]),
        ("u64_max", &EDGES[..]),
        ("u64_gt", &EDGES[..]),
        // Loops of at most a few turns.
        ("u64_step", &[0, 10, (1 << 63) + 5][..]),
        ("u64_ub", &[u64::MAX - 1, u64::MAX - 3][..]),
    ] {
        let t = sound_modulo(&m, 40, |rng| {
            let n = values[rng.random_range(0..values.len())];
            let len = [1usize, 6, 17, 1001][rng.random_range(0..4)];
            Case::new(kernel, "*fp32,u64", 1u32, vec![buf(rng, len), A::U64(n)])
        });
        assert!(t.out_of_bounds > 0 && t.proved + t.checked_ok > 0, "{kernel}: {t:?}");
    }
}

/// Loops in loops and in branches, scalar and `int1` masks, masks on both sides of a
/// comparison, unsigned offsets, pointers chosen by `where`.
#[test]
fn proofs_agree_with_the_interpreter_on_more_shapes() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    let r = |rng: &mut StdRng| rng.random_range(-5..70i64) as i32;
    type Scalars = Box<dyn Fn(&mut StdRng) -> (u32, Vec<A>)>;
    let cases: [(&str, &str, Scalars); 8] = [
        ("nested", "*fp32,i32,i32", Box::new(move |rng| (1, vec![A::I32(r(rng) / 6), A::I32(r(rng) / 4)]))),
        (
            "scalar_mask",
            "*fp32,i32,16",
            Box::new(move |rng| (rng.random_range(1..6), vec![A::I32(r(rng) / 10)])),
        ),
        ("loop_mask", "*fp32,i32", Box::new(move |rng| (1, vec![A::I32(r(rng))]))),
        ("both_sides", "*fp32,i32,16", Box::new(move |rng| (1, vec![A::I32(r(rng) / 3)]))),
        (
            "unsigned32",
            "*fp32,u32,u32",
            Box::new(|rng| (1, vec![A::U32(rng.random_range(0..70)), A::U32(rng.random_range(0..90))])),
        ),
        (
            "ptr_select",
            "*fp32,i32,i32",
            Box::new(move |rng| (rng.random_range(1..6), vec![A::I32(r(rng)), A::I32(r(rng))])),
        ),
        ("bool_cmp", "*fp32,i32,i32,64", Box::new(move |rng| (1, vec![A::I32(r(rng)), A::I32(r(rng))]))),
        (
            "branch_loop",
            "*fp32,i32,i32",
            Box::new(move |rng| (rng.random_range(1..6), vec![A::I32(r(rng)), A::I32(r(rng) / 10)])),
        ),
    ];
    for (kernel, sig, scalars) in &cases {
        let t = sound(&m, 50, |rng| {
            let len = rng.random_range(0..80usize);
            let (grid, mut args) = scalars(rng);
            args.insert(0, buf(rng, len));
            Case::new(kernel, sig, grid, args)
        });
        assert!(t.proved >= 5 && t.out_of_bounds >= 5, "{kernel}: {t:?}");
    }
}

/// Program ids and grid sizes are `i32` in the code: a grid axis beyond it is refused, not
/// wrapped (a proof over the unwrapped sizes passed a kernel that wrote outside its buffer).
#[test]
fn a_grid_axis_beyond_i32_is_refused() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    let k = m.kernel("grid_size", "*fp32").unwrap_or_else(|e| panic!("{e}"));
    let mut y = [0.0f32; 1];
    for grid in [[1u32 << 31, 1, 1], [1, 1 << 31, 1], [1, 1, u32::MAX]] {
        let args = [lnc::Arg::from(&mut y[..])];
        let e = k.launch(grid, &args).expect_err("launched");
        assert!(e.to_string().contains("program ids are `i32`"), "{e}");
        assert!(k.bounds_proved(grid, &args).is_err());
        // SAFETY: refused before it runs.
        assert!(unsafe { k.launch_unchecked(grid, &args) }.is_err());
    }
    // The largest grid the proof sees: `num_programs(0) >> 30` is 1, the offset -1.
    let grid = [i32::MAX as u32, 1, 1];
    assert!(!k.bounds_proved(grid, &[lnc::Arg::from(&mut y[..])]).unwrap_or_else(|e| panic!("{e}")));
}

/// The forward with half storage is proved too (its rows are two-byte elements: a wrong
/// element size in the proof shows here), and with an element short it is not.
#[test]
fn half_seed_kernels_are_proved_on_exact_buffers_only() {
    fn run<T: Float>(module: &lnc::Module) {
        let (m, n) = (13usize, 333usize);
        let t = T::SIG;
        let k = module
            .kernel("_layer_norm_fwd_fused", &format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,512"))
            .unwrap_or_else(|e| panic!("{e}"));
        let half = |len: usize| vec![T::from_f32(0.5); len];
        for short in [None, Some(0), Some(1), Some(2), Some(3)] {
            let cut = |i: usize, len: usize| len - usize::from(short == Some(i));
            let (x, mut y, w, b) =
                (half(cut(0, m * n)), half(cut(1, m * n)), half(cut(2, n)), half(cut(3, n)));
            let (mut mean, mut rstd) = (vec![0f32; m], vec![0f32; m]);
            let args = lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
            let proved = k.bounds_proved(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(proved, short.is_none(), "{t} forward, short {short:?}");
            assert_eq!(k.launch(m as u32, &args).is_ok(), short.is_none(), "{t} forward, short {short:?}");
        }
    }
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    run::<half::f16>(&module);
    run::<half::bf16>(&module);
}

/// Loops whose step is known only at launch: a grid-stride loop (`num_programs(0)`) and a
/// step passed as an argument, of either sign.
#[test]
fn proofs_agree_with_the_interpreter_on_runtime_steps() {
    let jit = lnc::Jit::new();
    let m = module(&jit);
    let t = sound(&m, 60, |rng| {
        let (n, grid) = (rng.random_range(0..300i64), rng.random_range(1..5u32));
        Case::new(
            "grid_stride",
            "*fp32,*fp32,i32,32",
            grid,
            vec![near_buf(rng, n), near_buf(rng, n), A::I32(n as i32)],
        )
    });
    assert!(t.proved >= 15 && t.out_of_bounds >= 15, "grid_stride: {t:?}");
    let t = sound(&m, 60, |rng| {
        let step = [-3i64, -2, -1, 1, 2, 3][rng.random_range(0..6)];
        let (a, b) = (rng.random_range(-2..30i64), rng.random_range(-2..30i64));
        let (lo, hi) = if step > 0 { (a.min(b), a.max(b)) } else { (a.max(b), a.min(b)) };
        let need = lo.max(hi) + 1;
        let args = vec![
            near_buf(rng, need),
            near_buf(rng, need),
            A::I32(lo as i32),
            A::I32(hi as i32),
            A::I32(step as i32),
        ];
        Case::new("runtime_step", "*fp32,*fp32,i32,i32,i32", 1u32, args)
    });
    assert!(t.proved >= 10 && t.out_of_bounds >= 10, "runtime_step: {t:?}");
    // A step that may be of either sign bounds no index: proved only on one program.
    let t = sound(&m, 40, |rng| {
        let (lo, hi, grid) =
            (rng.random_range(-2..20i64), rng.random_range(-2..20i64), rng.random_range(1..3u32));
        let args = vec![near_buf(rng, lo.max(hi) + 1), A::I32(lo as i32), A::I32(hi as i32)];
        Case::new("per_program_step", "*fp32,i32,i32", grid, args)
    });
    assert!(t.proved >= 3 && t.out_of_bounds >= 5, "per_program_step: {t:?}");
}
