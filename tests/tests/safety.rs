//! Safe launches: an access outside the buffer a pointer comes from stops the launch with
//! the kernel, source line, program id, parameter and element offset, before it touches
//! memory. The buffers are slices of larger allocations whose tails hold sentinels, so a
//! write that escaped the check would show.

mod common;

use common::*;

const SRC: &str = r#"import triton
import triton.language as tl


@triton.jit
def write_at(Y, K):
    tl.store(Y + K, 7.0)


@triton.jit
def fill_mask_off_by_one(Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, offs.to(tl.float32) + 1.0, mask=offs <= N)


@triton.jit
def copy_mask_from_the_wrong_length(X, Y, N, M, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(Y + offs, x * 2.0, mask=offs < N)


@triton.jit
def copy_unmasked(X, Y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs) + 1.0)


@triton.jit
def row_sums_unmasked(X, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        acc += tl.load(X + row * N + off + tl.arange(0, BLOCK))
    tl.store(S + row, tl.sum(acc, axis=0))


@triton.jit
def count_at(C, K):
    tl.atomic_add(C + K, 1)


@triton.jit
def center_rows(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(cols < N, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    tl.store(Y + row * N + cols, xc * var, mask=cols < N)


@triton.jit
def store_every(Y, lo, hi, S: tl.constexpr):
    for i in range(lo, hi, S):
        tl.store(Y + i, 1.0)


@triton.jit
def check_row_count(Y, N):
    pid = tl.program_id(0)
    tl.device_assert(pid < N, "pid too large")
    tl.store(Y + pid, 1.0)


@triton.jit
def fault_holding_a_lock(Lock, Waiting, Y):
    if tl.program_id(0) == 0:
        while tl.atomic_cas(Lock, 0, 1) == 1:
            pass
        while tl.atomic_add(Waiting, 0) == 0:
            pass
        tl.store(Y + 1, 1.0)
        tl.atomic_xchg(Lock, 0)
    else:
        while tl.atomic_add(Lock, 0) == 0:
            pass
        tl.atomic_xchg(Waiting, 1)
        while tl.atomic_cas(Lock, 0, 1) == 1:
            pass
        tl.atomic_xchg(Lock, 0)


@triton.jit
def double_in_blocks(X, Y, N, BLOCK: tl.constexpr):
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < N
        tl.store(Y + cols, tl.load(X + cols, mask=m) * 2.0, mask=m)


@triton.jit
def add_rows_into(ACC, X, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)
    acc = tl.load(ACC + row * N + cols, mask=cols < N, other=0.0)
    tl.store(ACC + row * N + cols, acc + x * 2.0, mask=cols < N)


@triton.jit
def fill_pairs(Y, lo, hi):
    for i in range(lo, hi, 2):
        for c in tl.static_range(2):
            tl.store(Y + i + c, 1)


@triton.jit
def fill_pairs_twice(Y, A, B, C):
    B2 = tl.maximum(A, B)
    C2 = tl.maximum(B2, C)
    fill_pairs(Y, A, B2)
    fill_pairs(Y, B2, C2)


@triton.jit
def fill_clamped(P, lo, hi, t):
    for i in range(lo, hi, 2):
        j = tl.minimum(i, t)
        for c in tl.static_range(2):
            tl.store(P + (j + c), 1)


@triton.jit
def fill_clamped_twice(Y, A, B, C, K):
    P = Y + K
    B2 = tl.maximum(A, B)
    C2 = tl.maximum(B2, C)
    t1 = B2 - 2
    t2 = C2 - 2
    fill_clamped(P, A, B2, t1)
    fill_clamped(P, B2, C2, t2)


@triton.jit
def store_from(P, lo, hi, K):
    for i in range(lo, hi):
        tl.store(P + (i + K), 1)


@triton.jit
def store_twice_up_to(Y, A, B, C, K, S):
    P = Y - S
    B2 = tl.maximum(A, B)
    C2 = tl.maximum(B2, C)
    store_from(P, A, B2, K)
    store_from(P, B2, C2, K)
"#;

const SENTINEL: f32 = -12345.0;

fn module() -> lnc::Module {
    lnc::Jit::new().module("safety.py", SRC).unwrap_or_else(|e| panic!("{e}"))
}

/// The out-of-bounds report of a launch that must fail.
fn oob(r: lnc::Result<()>) -> lnc::OutOfBounds {
    match r {
        Err(lnc::Error::OutOfBounds(o)) => *o,
        Err(e) => panic!("expected an out-of-bounds error, got: {e}"),
        Ok(()) => panic!("expected an out-of-bounds error, the launch succeeded"),
    }
}

/// `len` usable elements followed by sentinels.
fn guarded(len: usize) -> Vec<f32> {
    vec![SENTINEL; len + 64]
}

fn assert_guard_intact(buf: &[f32], len: usize) {
    assert!(
        buf[len..].iter().all(|&v| v == SENTINEL),
        "memory past the buffer was written: {:?}",
        &buf[len..]
    );
}

#[test]
fn a_store_one_element_past_the_end_fails_with_its_source_line() {
    let m = module();
    let k = m.kernel("write_at", "*fp32,i32").unwrap();
    let len = 10;
    let mut y = guarded(len);
    let o = oob(k.launch(1, &lnc::args![&mut y[..len], len as i32]));
    assert_eq!(o.kernel, "write_at");
    assert_eq!(o.location, "safety.py:7:5");
    assert_eq!(o.source_line.trim(), "tl.store(Y + K, 7.0)");
    assert_eq!((o.param.as_str(), o.offset, o.valid, o.pid), ("Y", 10, (0, 10), [0, 0, 0]));
    assert_guard_intact(&y, len);
    let text = lnc::Error::OutOfBounds(Box::new(o)).to_string();
    assert!(text.contains("element offset 10 of `Y` is outside its buffer [0, 10)"), "{text}");

    // One before the start, and the last element (which is fine).
    let o = oob(k.launch(1, &lnc::args![&mut y[..len], -1i32]));
    assert_eq!((o.offset, o.valid), (-1, (0, 10)));
    k.launch(1, &lnc::args![&mut y[..len], 9i32]).unwrap();
    assert_eq!(y[9], 7.0);
    assert_guard_intact(&y, len);
}

#[test]
fn a_masked_store_with_a_wrong_mask_fails_in_the_program_that_overruns() {
    let m = module();
    let k = m.kernel("fill_mask_off_by_one", "*fp32,i32,16").unwrap();
    // N = 37: `offs <= N` also enables offset 37, in program 2 (offsets 32..48).
    let len = 37;
    let mut y = guarded(len);
    let o = oob(k.launch(3, &lnc::args![&mut y[..len], len as i32]));
    assert_eq!(o.location, "safety.py:13:5");
    assert_eq!(o.source_line.trim(), "tl.store(Y + offs, offs.to(tl.float32) + 1.0, mask=offs <= N)");
    assert_eq!((o.param.as_str(), o.offset, o.pid), ("Y", 37, [2, 0, 0]));
    assert_guard_intact(&y, len);

    // With a length that is a whole number of blocks, the enabled lane past the end
    // belongs to the next program: two programs are in bounds, a third one overruns.
    let len = 32;
    let mut y = guarded(len);
    k.launch(2, &lnc::args![&mut y[..len], len as i32]).unwrap();
    assert!(y[..len].iter().enumerate().all(|(i, &v)| v == i as f32 + 1.0));
    let o = oob(k.launch(3, &lnc::args![&mut y[..len], len as i32]));
    assert_eq!((o.offset, o.pid), (32, [2, 0, 0]));
    assert_guard_intact(&y, len);
}

#[test]
fn a_mask_computed_from_another_buffers_length_is_caught_on_the_load_and_the_store() {
    let m = module();
    let k = m.kernel("copy_mask_from_the_wrong_length", "*fp32,*fp32,i32,i32,16").unwrap();
    let mut r = rng();
    let (n, short) = (45usize, 40usize);
    // Y is the short one: X is read correctly, the store overruns Y.
    let x = randn(&mut r, n, 0.0, 1.0);
    let mut y = guarded(short);
    let o = oob(k.launch(3, &lnc::args![&x, &mut y[..short], n as i32, short as i32]));
    assert_eq!(o.location, "safety.py:20:5");
    assert_eq!((o.param.as_str(), o.pid, o.valid), ("Y", [2, 0, 0], (0, 40)));
    assert!((40..45).contains(&o.offset), "{o:?}");
    assert_guard_intact(&y, short);
    // X is the short one: the load overruns, and nothing of that program is stored.
    let mut y = vec![f32::NAN; n];
    let o = oob(k.launch(3, &lnc::args![&x[..short], &mut y, n as i32, short as i32]));
    assert_eq!(o.location, "safety.py:19:9");
    assert_eq!((o.param.as_str(), o.pid, o.valid), ("X", [2, 0, 0], (0, 40)));
    // The program stops at the first tile that faults: nothing at or past the bad element
    // is stored.
    assert!((40..45).contains(&o.offset), "{o:?}");
    assert!(y[o.offset as usize..].iter().all(|v| v.is_nan()), "stored past the faulting load: {y:?}");
}

#[test]
fn an_unmasked_block_past_the_end_fails_and_the_checked_and_unchecked_runs_agree_when_in_bounds() {
    let m = module();
    let k = m.kernel("copy_unmasked", "*fp32,*fp32,8").unwrap();
    let mut r = rng();
    let x = randn(&mut r, 24, 1.0, 1.0);
    let mut y = guarded(20);
    // Three programs of 8 over 20 output elements.
    let o = oob(k.launch(3, &lnc::args![&x, &mut y[..20]]));
    assert_eq!((o.param.as_str(), o.pid, o.location.as_str()), ("Y", [2, 0, 0], "safety.py:26:5"));
    assert_guard_intact(&y, 20);

    let mut checked = vec![f32::NAN; 24];
    let mut unchecked = vec![f32::NAN; 24];
    k.launch(3, &lnc::args![&x, &mut checked]).unwrap();
    // SAFETY: three programs of 8 read and write offsets 0..24, and both buffers hold 24.
    unsafe { k.launch_unchecked(3, &lnc::args![&x, &mut unchecked]).unwrap() };
    assert_eq!(checked, unchecked);
    let want: Vec<f64> = x.iter().map(|&v| (v + 1.0) as f64).collect();
    assert_close("copy_unmasked", &checked, &want, 0.0, 0.0);
}

#[test]
fn a_loop_whose_check_is_hoisted_still_reports_the_first_bad_element() {
    let m = module();
    let k = m.kernel("row_sums_unmasked", "*fp32,*fp32,i32,16").unwrap();
    let mut r = rng();
    // Rows of N = 40 walked in steps of 16: the last step reads 48..64 of a 40-element
    // row; for the last row that is past the end of X.
    let (rows, n) = (3usize, 40usize);
    let x = randn(&mut r, rows * n, 0.0, 1.0);
    let mut s = vec![f32::NAN; rows];
    let o = oob(k.launch(rows as u32, &lnc::args![&x, &mut s, n as i32]));
    assert_eq!((o.param.as_str(), o.location.as_str()), ("X", "safety.py:34:16"));
    assert_eq!(o.valid, (0, 120));
    assert_eq!(o.offset, 120, "the first element past the end: {o:?}");
    assert_eq!(o.pid, [2, 0, 0], "rows 0 and 1 read into the next row, inside X");
}

#[test]
fn an_atomic_past_the_end_fails() {
    let m = module();
    let k = m.kernel("count_at", "*i32,i32").unwrap();
    let mut c = [0i32; 8];
    k.launch(1, &lnc::args![&mut c[..4], 3i32]).unwrap();
    assert_eq!(c[3], 1);
    let o = match k.launch(1, &lnc::args![&mut c[..4], 4i32]) {
        Err(lnc::Error::OutOfBounds(o)) => o,
        other => panic!("{other:?}"),
    };
    assert_eq!((o.param.as_str(), o.offset, o.location.as_str()), ("C", 4, "safety.py:40:5"));
    assert_eq!(c[4..], [0, 0, 0, 0]);
}

/// `center_rows` over the rows of `x` (length `n` each) in bounds: checked and unchecked
/// runs write the same, NaN-poisoned outputs, and agree with a float64 reference.
fn assert_center_rows_in_bounds(k: &lnc::Kernel, x: &[f32], n: usize, what: &str) {
    let rows = x.len() / n;
    let mut checked = vec![f32::NAN; x.len()];
    let mut unchecked = vec![f32::NAN; x.len()];
    k.launch(rows as u32, &lnc::args![x, &mut checked, n as i32]).unwrap();
    // SAFETY: every program reads and writes its own row, and both buffers hold all rows.
    unsafe { k.launch_unchecked(rows as u32, &lnc::args![x, &mut unchecked, n as i32]).unwrap() };
    assert_eq!(checked, unchecked, "{what}");
    let mut want = Vec::new();
    for row in x.chunks(n) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        want.extend(row.iter().map(|&v| (v as f64 - mean) * var));
    }
    assert_close(what, &checked, &want, 1e-5, 1e-5);
}

/// The tiler splits each pass over a row into loops that continue one another (unrolled
/// steady state, vector remainder, scalar tail); a safe launch checks each argument once
/// for the whole run of loops, and once per program for passes over the same range. The
/// report must still be the first element past the end, in the program that overruns,
/// whichever of the loops reaches it: N is chosen so that the scalar tail does (N = 75) or
/// the steady loop does (N = 64).
#[test]
fn one_check_for_the_loops_of_a_pass_reports_the_first_element_past_the_end() {
    let m = module();
    let k = m.kernel("center_rows", "*fp32,*fp32,i32,128").unwrap();
    let mut r = rng();
    for n in [75usize, 64, 3] {
        let rows = 5;
        let len = rows * n;
        let x = randn(&mut r, len, 0.5, 1.0);
        let mut y = guarded(len);
        // X one element short: the last row's last element is past the end.
        let o = oob(k.launch(rows as u32, &lnc::args![&x[..len - 1], &mut y[..len], n as i32]));
        assert_eq!((o.param.as_str(), o.location.as_str()), ("X", "safety.py:47:9"), "N = {n}");
        assert_eq!((o.valid, o.offset), ((0, len as i64 - 1), len as i64 - 1), "N = {n}");
        assert_eq!(o.pid, [rows as u32 - 1, 0, 0], "N = {n}");
        assert_guard_intact(&y, len);

        // Y one element short: the store of the last row fails, and nothing past Y is written.
        let o = oob(k.launch(rows as u32, &lnc::args![&x, &mut y[..len - 1], n as i32]));
        assert_eq!((o.param.as_str(), o.location.as_str()), ("Y", "safety.py:51:5"), "N = {n}");
        assert_eq!(o.pid, [rows as u32 - 1, 0, 0], "N = {n}");
        assert_guard_intact(&y, len - 1);

        // In bounds: checked and unchecked runs agree with a float64 reference.
        assert_center_rows_in_bounds(&k, &x, n, &format!("N = {n}"));
    }
}

/// Rows whose stores stream (`stream_threshold = 0`) are split at their cache lines into a
/// cached head, streamed lines and a cached end (lnc-tile's `stream`), whose last iterations
/// are moved back; the three loops and the remainder loops after them are checked once per
/// argument, over the range their iterations reach. The report must be the same as for
/// unsplit rows: the first element past the end, in the program that overruns, with nothing
/// written past Y. Rows start at every phase of a line (`shift`), so heads and ends of every
/// length run, including heads of two overlapping iterations.
#[test]
fn rows_split_at_their_lines_are_checked_once_and_report_the_first_element_past_the_end() {
    for lanes in [4u8, 8, 16] {
        let opts = lnc::CompileOptions { stream_threshold: 0, lanes, ..Default::default() };
        let m = lnc::Jit::with_options(opts).module("safety.py", SRC).unwrap_or_else(|e| panic!("{e}"));
        let k = m.kernel("center_rows", "*fp32,*fp32,i32,1024").unwrap();
        let mut r = rng();
        for n in [1000usize, 523, 200, 75, 64, 37] {
            for shift in [0usize, 1, 3, 4, 9, 15] {
                let rows = 5;
                let len = rows * n;
                let what = format!("lanes = {lanes}, N = {n}, shift = {shift}");
                let x_buf = randn(&mut r, len + shift, 0.5, 1.0);
                let x = &x_buf[shift..];
                let mut y_buf = guarded(len + shift);
                let y = &mut y_buf[shift..];

                assert_center_rows_one_short(&k, x, y, n, SENTINEL, &what);

                assert_center_rows_in_bounds(&k, x, n, &what);
            }
        }
    }
}

/// A row read and written back (`acc += x`) is checked once for the load and the store of
/// the same elements: a buffer one element short is reported at the load, the first of
/// the two in the program, as two checks in that order would; nothing past it is written.
#[test]
fn a_row_read_and_written_back_is_reported_at_its_load() {
    let m = module();
    let k = m.kernel("add_rows_into", "*fp32,*fp32,i32,1024").unwrap();
    let mut r = rng();
    for n in [1000usize, 75, 64, 3] {
        let rows = 5;
        let len = rows * n;
        let x = randn(&mut r, len, 0.5, 1.0);
        let mut acc = guarded(len);
        let start = randn(&mut r, len, 0.0, 1.0);
        acc[..len].copy_from_slice(&start);
        let o = oob(k.launch(rows as u32, &lnc::args![&mut acc[..len - 1], &x, n as i32]));
        assert_eq!(o.param.as_str(), "ACC", "N = {n}");
        let line = SRC.lines().position(|l| l.contains("acc = tl.load(ACC")).unwrap() + 1;
        assert!(o.location.starts_with(&format!("safety.py:{line}:")), "N = {n}: {}", o.location);
        assert_eq!((o.valid, o.offset), ((0, len as i64 - 1), len as i64 - 1), "N = {n}");
        assert_eq!(o.pid, [rows as u32 - 1, 0, 0], "N = {n}");
        assert_eq!(acc[len - 1], start[len - 1], "N = {n}: the element past the buffer was written");
        assert_guard_intact(&acc, len);

        acc[..len].copy_from_slice(&start);
        k.launch(rows as u32, &lnc::args![&mut acc[..len], &x, n as i32]).unwrap();
        let want: Vec<f64> = start.iter().zip(&x).map(|(&a, &v)| a as f64 + 2.0 * v as f64).collect();
        assert_close("add_rows_into", &acc[..len], &want, 1e-6, 1e-6);
        assert_guard_intact(&acc, len);
    }
}

/// Two loops one after the other whose span need not be a multiple of their step (their
/// last iteration may pass their bound): their last element is past `i32::MAX - 1` here, so
/// a range check for both ending at their rounded end computed in `i32` would wrap and
/// miss it. The launch must fail at the last element instead of writing past Y (found by
/// review). The buffer is 2 GiB of zero pages that are never touched but for its end.
#[test]
fn loops_whose_rounded_end_would_wrap_are_still_checked() {
    let k = module().kernel("fill_pairs_twice", "*i8,i32,i32,i32").unwrap();
    let len = i32::MAX as usize;
    let mut y = vec![0i8; len + 64];
    let a = i32::MAX - 1;
    let o = oob(k.launch(1, &lnc::args![&mut y[..len], a, a, i32::MAX]));
    assert_eq!((o.param.as_str(), o.offset), ("Y", i64::from(i32::MAX)));
    assert!(y[len..].iter().all(|&v| v == 0), "memory past Y was written");
}

/// Two loops whose last iteration is moved back to `ub - 2`, with `ub` near `i32::MIN`:
/// `ub - 2` wraps to a large value, so the clamp does nothing and the last iteration passes
/// `ub`. A check for both loops from the clamp down would miss it; the launch must fail at
/// the element past Y (found by review). P is Y moved by 2^31 so that index `i32::MIN` is
/// `Y[0]`.
#[test]
fn loops_whose_clamp_would_wrap_are_still_checked() {
    let k = module().kernel("fill_clamped_twice", "*i8,i32,i32,i32,i64").unwrap();
    let mut y = [0i8; 65];
    let (a, b) = (i32::MIN, i32::MIN + 1);
    let o = oob(k.launch(1, &lnc::args![&mut y[..1], a, b, b, 1i64 << 31]));
    assert_eq!((o.param.as_str(), o.offset), ("Y", 1));
    assert!(y[1..].iter().all(|&v| v == 0), "memory past Y was written");
}

/// Two loops whose last element's index plus the offset is exactly `i32::MAX`: a check
/// ending at the loops' end plus the offset would wrap there and fail a launch that stays
/// inside Y (found by review). P is Y moved back by `i32::MAX - 2`.
#[test]
fn loops_ending_at_the_largest_index_pass_their_check() {
    let k = module().kernel("store_twice_up_to", "*i8,i32,i32,i32,i32,i64").unwrap();
    let mut y = [0i8; 3 + 64];
    let m = i32::MAX;
    k.launch(1, &lnc::args![&mut y[..3], m - 3, m - 1, m, 1, i64::from(m - 2)]).unwrap();
    assert_eq!(&y[..3], &[1, 1, 1]);
    assert!(y[3..].iter().all(|&v| v == 0), "memory past Y was written");
    let o = oob(k.launch(1, &lnc::args![&mut y[..2], m - 3, m - 1, m, 1, i64::from(m - 2)]));
    assert_eq!((o.param.as_str(), o.offset), ("Y", 2));
}

/// fp16 rows converted whole (`row_load`/`row_store`): one check of the row before the
/// conversion, naming the load's or the store's source line; nothing past Y is written.
/// The same with the tiles converted by F16C (`CompileOptions::f16c`), where the host has
/// it.
#[test]
fn a_half_row_past_the_end_fails_at_its_access() {
    for f16c in [false, true] {
        half_row_past_the_end(f16c);
    }
}

fn half_row_past_the_end(f16c: bool) {
    use half::f16;
    let m = lnc::Jit::with_options(lnc::CompileOptions { f16c, ..Default::default() })
        .module("safety.py", SRC)
        .unwrap_or_else(|e| panic!("{e}"));
    let k = m.kernel("center_rows", "*fp16,*fp16,i32,128").unwrap();
    let ir = m
        .dump(
            "center_rows",
            "*fp16,*fp16,i32,128",
            &lnc::DumpRequest { stages: vec![lnc::Stage::Lir], ..Default::default() },
        )
        .unwrap()
        .remove(0)
        .text;
    // With F16C the rows stay tiles (128 elements: short rows store tile by tile too).
    let native = f16c && lnc::converts_f16_natively();
    assert_eq!(ir.contains("row_load") || ir.contains("row_store"), !native, "{ir}");
    let mut r = rng();
    for n in [75usize, 64, 3] {
        let x: Vec<f16> = randn(&mut r, 5 * n, 0.5, 1.0).into_iter().map(f16::from_f32).collect();
        assert_half_center_rows_one_short(&k, &x, n);
    }
}

/// `center_rows` on 5 rows of `n` (`x`) with X, then Y, one element short: reported at the
/// first element past the end, in the last program, at the access's line; nothing past Y
/// is written (`y` holds `sentinel` from element `5·n - 1` on).
fn assert_center_rows_one_short<T>(k: &lnc::Kernel, x: &[T], y: &mut [T], n: usize, sentinel: T, what: &str)
where
    T: lnc::Element + Copy + PartialEq + std::fmt::Debug,
{
    let rows = 5;
    let len = rows * n;
    let o = oob(k.launch(rows as u32, &lnc::args![&x[..len - 1], &mut y[..len], n as i32]));
    assert_eq!((o.param.as_str(), o.location.as_str()), ("X", "safety.py:47:9"), "{what}");
    assert_eq!((o.valid, o.offset), ((0, len as i64 - 1), len as i64 - 1), "{what}");
    assert_eq!(o.pid, [rows as u32 - 1, 0, 0], "{what}");

    let o = oob(k.launch(rows as u32, &lnc::args![x, &mut y[..len - 1], n as i32]));
    assert_eq!((o.param.as_str(), o.location.as_str()), ("Y", "safety.py:51:5"), "{what}");
    assert_eq!((o.valid, o.offset), ((0, len as i64 - 1), len as i64 - 1), "{what}");
    assert_eq!(o.pid, [rows as u32 - 1, 0, 0], "{what}");
    assert!(
        y[len - 1..].iter().all(|&v| v == sentinel),
        "{what}: memory past Y was written: {:?}",
        &y[len - 1..]
    );
}

/// [`assert_center_rows_one_short`] on fp16 rows; returns Y in bounds.
fn assert_half_center_rows_one_short(k: &lnc::Kernel, x: &[half::f16], n: usize) -> Vec<half::f16> {
    let sentinel = half::f16::from_f32(SENTINEL);
    let len = 5 * n;
    let mut y = vec![sentinel; len + 64];
    assert_center_rows_one_short(k, x, &mut y, n, sentinel, &format!("fp16, N = {n}"));
    let rows = 5;
    y.fill(half::f16::NAN);
    k.launch(rows as u32, &lnc::args![x, &mut y[..len], n as i32]).unwrap_or_else(|e| panic!("{e}"));
    y.truncate(len);
    y
}

/// Half rows whose tail runs as their last whole tile (lnc-tile's `overlap`, 16-lane
/// tiles): the check of each pass covers the tile, and a buffer one element short is
/// reported at its first element past the end, in the last program, as the scalar tail
/// did; nothing past Y is written. In bounds, the rows match float64.
#[test]
fn a_row_ending_in_its_last_tile_reports_the_first_element_past_the_end() {
    use half::f16;
    let opts = lnc::CompileOptions { lanes: 16, ..Default::default() };
    let m = lnc::Jit::with_options(opts).module("safety.py", SRC).unwrap_or_else(|e| panic!("{e}"));
    let k = m.kernel("center_rows", "*fp16,*fp16,i32,1024").unwrap();
    let mut r = rng();
    for n in [1000usize, 1009, 523, 75, 37, 17] {
        let x: Vec<f16> = randn(&mut r, 5 * n, 0.5, 1.0).into_iter().map(f16::from_f32).collect();
        let y = assert_half_center_rows_one_short(&k, &x, n);
        let mut want = Vec::new();
        for row in x.chunks(n) {
            let v: Vec<f64> = row.iter().map(|h| h.to_f64()).collect();
            let mean = v.iter().sum::<f64>() / n as f64;
            let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n as f64;
            want.extend(v.iter().map(|a| (a - mean) * var));
        }
        let got: Vec<f32> = y.iter().map(|v| v.to_f32()).collect();
        assert_close(&format!("center_rows N = {n}"), &got, &want, 2e-3, 2e-3);
    }
}

/// Runs `launch` on a thread of its own and returns its result, failing the test if it
/// does not finish within a minute (a launch that hangs would otherwise hang the suite).
fn within_a_minute<T: Send + 'static>(launch: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(launch());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the launch hung")
}

/// A program that faults while holding a spin lock never releases it; the programs
/// waiting for that lock must give up (`Status::Cancelled`), so that the launch reports
/// the fault instead of hanging. Program 0 takes the lock, waits until program 1 spins on
/// it, then stores past the end of `Y`; the two run on different workers (one program per
/// chunk on two threads), so without the give-up program 1 spins forever.
#[test]
fn a_fault_while_holding_a_lock_is_reported_not_a_hang() {
    let o = within_a_minute(|| {
        let m = lnc::Jit::new()
            .with_threads(2)
            .unwrap()
            .module("safety.py", SRC)
            .unwrap_or_else(|e| panic!("{e}"));
        let k = m.kernel("fault_holding_a_lock", "*i32,*i32,*fp32").unwrap();
        let (mut lock, mut waiting, mut y) = (vec![0i32], vec![0i32], vec![0f32]);
        oob(k.launch(2, &lnc::args![&mut lock, &mut waiting, &mut y]))
    });
    assert_eq!((o.param.as_str(), o.offset, o.pid), ("Y", 1, [0, 0, 0]));
    assert_eq!(o.location, "safety.py:74:9");
}

/// The same with the seed backward's dx kernel and a partial-dw buffer one row short: a
/// program of the last group faults inside its critical section, holding the group's lock,
/// while the other worker's programs of that group wait for it (this hung before).
#[test]
fn the_seed_backward_with_a_short_partial_buffer_fails_instead_of_hanging() {
    // Rows long enough that the other worker is running programs of the last group by
    // the time the first one faults (this launch hung in 3 of 3 runs before the fix).
    let (n, rows, groups) = (16384usize, 512usize, 8usize);
    let o = within_a_minute(move || {
        let m = lnc::Jit::new().with_threads(2).unwrap().module("seed.py", seed_source()).unwrap();
        let sig =
            format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,{groups},{n}");
        let k = m.kernel("_layer_norm_bwd_dx_fused", &sig).unwrap();
        let (x, dy) = (vec![0.5f32; rows * n], vec![0.25f32; rows * n]);
        let (w, b) = (vec![1.0f32; n], vec![0.0f32; n]);
        let (mean, rstd) = (vec![0.0f32; rows], vec![1.0f32; rows]);
        let mut dx = vec![0.0f32; rows * n];
        let (mut dw, mut db) = (vec![0.0f32; (groups - 1) * n], vec![0.0f32; groups * n]);
        let mut locks = vec![0i32; 2 * groups];
        for _ in 0..3 {
            locks.fill(0);
            let o = oob(k.launch(
                rows as u32,
                &lnc::args![
                    &mut dx, &dy, &mut dw, &mut db, &x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32,
                    1e-5f32
                ],
            ));
            // Which program of the last group takes its lock first, and faults, depends on
            // timing; the others gave up waiting.
            assert_eq!((o.param.as_str(), o.pid[0] as usize % groups), ("DW", groups - 1), "{o:?}");
        }
        n
    });
    assert_eq!(o, n);
}

/// A failed `device_assert` names the first failing program, the location and the source
/// line, which carries the assertion's message.
#[test]
fn a_failed_device_assert_shows_its_line_and_message() {
    let k = module().kernel("check_row_count", "*fp32,i32").unwrap();
    let mut y = vec![0.0f32; 8];
    match k.launch(8, &lnc::args![&mut y, 5i32]) {
        Err(e @ lnc::Error::AssertFailed { .. }) => {
            let lnc::Error::AssertFailed { ref location, pid, ref source_line, .. } = e else {
                unreachable!()
            };
            assert_eq!((location.as_str(), pid), ("safety.py:63:5", [5, 0, 0]));
            assert_eq!(source_line.trim(), r#"tl.device_assert(pid < N, "pid too large")"#);
            assert!(e.to_string().ends_with(r#"| tl.device_assert(pid < N, "pid too large")"#), "{e}");
        }
        other => panic!("expected a failed assertion, got {other:?}"),
    }
    assert_eq!(y[..5], [1.0; 5]);
}

/// A loop with a 64-bit index may address a range of 2^64 bytes or more, which wraps
/// around the address space: a check hoisted in front of it (first and last address)
/// would pass while the stores between leave the buffer (this run crashed). Such loops
/// check each access: the store at element 2^40 is reported.
#[test]
fn a_64_bit_loop_whose_addresses_wrap_is_checked_per_access() {
    let k = module().kernel("store_every", "*fp32,i64,i64,1099511627776").unwrap();
    let mut y = guarded(1);
    let o = oob(k.launch(1, &lnc::args![&mut y[..1], 0i64, (1i64 << 62) + 1]));
    assert_eq!((o.param.as_str(), o.offset, o.location.as_str()), ("Y", 1 << 40, "safety.py:57:9"));
    assert_eq!(y[0], 1.0);
    assert_guard_intact(&y, 1);
}

/// A loop over blocks to a 64-bit `N` (offsets `i64(iv) + off`, bounds checked once per
/// block loop) reports the same first element past the buffer as with a 32-bit `N`, and
/// runs right when everything is inside.
#[test]
fn a_loop_to_a_64_bit_bound_is_checked_like_a_32_bit_one() {
    for ty in ["i32", "i64"] {
        let k = module().kernel("double_in_blocks", &format!("*fp32,*fp32,{ty},16")).unwrap();
        let x: Vec<f32> = (0..100).map(|i| i as f32 - 40.5).collect();
        let n = |v: i64| if ty == "i32" { lnc::Arg::from(v as i32) } else { lnc::Arg::from(v) };
        let mut y = guarded(61);
        k.launch(1, &[lnc::Arg::from(&x[..]), lnc::Arg::from(&mut y[..61]), n(61)]).unwrap();
        assert!((0..61).all(|i| y[i] == 2.0 * x[i]), "{ty}: {:?}", &y[..61]);
        assert_guard_intact(&y, 61);
        let mut y = guarded(60);
        let o = oob(k.launch(1, &[lnc::Arg::from(&x[..]), lnc::Arg::from(&mut y[..60]), n(100)]));
        assert_eq!((o.param.as_str(), o.offset, o.location.as_str()), ("Y", 60, "safety.py:90:9"), "{ty}");
        assert_guard_intact(&y, 60);
    }
}
