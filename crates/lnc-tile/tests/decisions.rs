//! One test per tiling decision: what shares a loop, what lives in scratch, how each
//! access is addressed, what is refused. Each kernel also runs against the block-IR
//! interpreter.

mod common;

use common::*;
use lnc_bir::interp::{ArgValue, Buffer};
use lnc_lir::{Addressing, DType, Function, Opcode};

/// Top-level `for` loops of a function (the loops of its groups).
fn loops(f: &Function) -> usize {
    f.body.insts.iter().filter(|&&i| f.insts[i].opcode == Opcode::For).count()
}

/// Memory loads by addressing mode.
fn loads(f: &Function, mode: Addressing) -> usize {
    f.live_insts()
        .into_iter()
        .filter(|&i| matches!(f.insts[i].opcode, Opcode::Load { addr, .. } if addr == mode))
        .count()
}

fn run(src: &str, kernel: &str, sig: &str, grid: u32, args: &[ArgValue], bufs: &[Buffer]) {
    let f = bir(src, kernel, sig);
    differential(&f, [grid, 1, 1], args, bufs, &[1, 2, 4, 8]);
}

const INDEPENDENT: &str = r#"
@triton.jit
def k(X, S, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    mean = tl.sum(x, axis=0) / N
    top = tl.max(x, axis=0)
    tl.store(S, mean)
    tl.store(S + 1, top)
"#;

#[test]
fn independent_reductions_share_one_loop() {
    let f = lir_base(INDEPENDENT, "k", "*fp32,*fp32,i32,64");
    assert_eq!(loops(&f), 1, "{}", lnc_lir::print_function(&f));
    assert!(f.scratch.is_empty(), "x is used by one loop only");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    let bufs = [f32_buffer(1, 50), Buffer::zeros(DType::F32, 2)];
    run(
        INDEPENDENT,
        "k",
        "*fp32,*fp32,i32,64",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(50), ArgValue::Int(64)],
        &bufs,
    );
}

const DEPENDENT: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=-float('inf'))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(tl.where(mask, num, 0.), axis=0)
    tl.store(Y + cols, num / den, mask=mask)
"#;

#[test]
fn a_reduction_needing_another_waits_for_its_loop() {
    let f = lir_base(DEPENDENT, "k", "*fp32,*fp32,i32,32");
    assert_eq!(loops(&f), 3, "{}", lnc_lir::print_function(&f));
    // Nothing writes X: the second loop reads it again rather than keeping a copy; `exp`
    // costs more than a store and a load, so its block is kept for the third loop.
    assert_eq!(f.scratch.len(), 1, "num is kept: {}", lnc_lir::print_function(&f));
    assert_eq!(loads(&f, Addressing::Contiguous), 2, "the first two loops read x");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    // Written in place, X changes under the later loops: x is kept once and read once.
    let in_place = DEPENDENT.replace("tl.store(Y + cols", "tl.store(X + cols");
    let f = lir_base(&in_place, "k", "*fp32,*fp32,i32,32");
    assert_eq!(f.scratch.len(), 2, "x is kept once for the later loops, and num");
    assert_eq!(loads(&f, Addressing::Contiguous), 1, "x is read from memory once");
    let bufs = [f32_buffer(1, 29), Buffer::zeros(DType::F32, 29)];
    run(
        &in_place,
        "k",
        "*fp32,*fp32,i32,32",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(29), ArgValue::Int(32)],
        &bufs,
    );
    let bufs = [f32_buffer(1, 29), Buffer::zeros(DType::F32, 29)];
    run(
        DEPENDENT,
        "k",
        "*fp32,*fp32,i32,32",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(29), ArgValue::Int(32)],
        &bufs,
    );
}

const ADDRESSING: &str = r#"
@triton.jit
def k(X, Y, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a = tl.load(X + i + 3)
    b = tl.load(X + i * 2)
    c = tl.load(X + (BLOCK - 1 - i))
    d = tl.load(X + i // 2)
    e = tl.load(X + i * 0 + 7)
    f = tl.load(X + 2 * (i + 1) - i)
    tl.store(Y + i, a + b + c + d + e + f)
"#;

#[test]
fn contiguous_and_gather_addressing() {
    let f = lir_base(ADDRESSING, "k", "*fp32,*fp32,16");
    // `i + 3` and `2(i + 1) - i`: stride 1; `i·2`, `15 - i`, `i // 2`: gathers; `i·0 + 7`: one scalar.
    assert_eq!(loads(&f, Addressing::Contiguous), 2, "{}", lnc_lir::print_function(&f));
    assert_eq!(loads(&f, Addressing::Gather), 3);
    assert_eq!(loads(&f, Addressing::Scalar), 1);
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    let bufs = [f32_buffer(1, 40), Buffer::zeros(DType::F32, 16)];
    run(ADDRESSING, "k", "*fp32,*fp32,16", 1, &[ptr(0), ptr(1), ArgValue::Int(16)], &bufs);
}

const MATERIALIZE: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.)
    w = i.to(tl.float32) * 2.0
    s = tl.sum(x * w, axis=0)
    tl.store(Y + i, x * s + w, mask=m)
"#;

/// Reading a read-only row again beats copying it to scratch while the row stays in L2:
/// up to 64 KB (16384 fp32) it is read again, beyond that it is copied.
/// Half rows are always copied: scratch holds them converted, so later loops skip the
/// conversion.
#[test]
fn read_only_rows_are_read_again_up_to_64_kb() {
    for (block, dtype, scratch) in
        [(16384, "fp32", false), (32768, "fp32", true), (32, "fp16", true), (1024, "bf16", true)]
    {
        let sig = format!("*{dtype},*{dtype},i32,{block}");
        let f = lir_base(MATERIALIZE, "k", &sig);
        assert_eq!(!f.scratch.is_empty(), scratch, "{sig}: {}", lnc_lir::print_function(&f));
    }
}

#[test]
fn loads_of_written_arguments_are_kept_and_arithmetic_is_recomputed() {
    // Read-only X: read again by the second loop.
    let f = lir_base(MATERIALIZE, "k", "*fp32,*fp32,i32,32");
    assert_eq!(loops(&f), 2);
    assert!(f.scratch.is_empty(), "{}", lnc_lir::print_function(&f));
    assert_eq!(loads(&f, Addressing::Contiguous), 2);
    // X written by the kernel (the result stored in place): the load is kept.
    let in_place = MATERIALIZE.replace("tl.store(Y + i", "tl.store(X + i");
    let f = lir_base(&in_place, "k", "*fp32,*fp32,i32,32");
    assert_eq!(loops(&f), 2);
    assert_eq!(f.scratch.len(), 1, "only the load is kept: {}", lnc_lir::print_function(&f));
    assert_eq!(loads(&f, Addressing::Contiguous), 1);
    let text = lnc_lir::print_function(&f);
    assert_eq!(text.matches("cast").count(), 2, "w is recomputed in both loops:\n{text}");
    let bufs = [f32_buffer(1, 30), Buffer::zeros(DType::F32, 30)];
    run(
        &in_place,
        "k",
        "*fp32,*fp32,i32,32",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(30), ArgValue::Int(32)],
        &bufs,
    );
    let bufs = [f32_buffer(1, 30), Buffer::zeros(DType::F32, 30)];
    run(
        MATERIALIZE,
        "k",
        "*fp32,*fp32,i32,32",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(30), ArgValue::Int(32)],
        &bufs,
    );
}

const IN_PLACE: &str = r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    tl.store(X + i, x * 2.0)
"#;

#[test]
fn in_place_update_through_one_pointer_is_one_loop() {
    let f = lir_base(IN_PLACE, "k", "*fp32,16");
    assert_eq!(loops(&f), 1);
    assert!(f.scratch.is_empty());
    run(IN_PLACE, "k", "*fp32,16", 1, &[ptr(0), ArgValue::Int(16)], &[f32_buffer(1, 16)]);
}

const REVERSE: &str = r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    tl.store(X + (BLOCK - 1 - i), x)
    y = tl.load(X + i)
    tl.store(X + BLOCK + i, y + 1.0)
"#;

#[test]
fn a_load_is_not_fused_with_a_store_elsewhere_in_its_argument() {
    let f = lir_base(REVERSE, "k", "*fp32,16");
    // x must be read completely before the reversed store, and y after it. y is also
    // read in a loop of its own before the store at `BLOCK + i`: proving that those
    // positions never meet would need a distance analysis.
    assert_eq!(loops(&f), 4, "{}", lnc_lir::print_function(&f));
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    run(REVERSE, "k", "*fp32,16", 1, &[ptr(0), ArgValue::Int(16)], &[f32_buffer(1, 32)]);
}

const LOAD_THEN_STORE: &str = r#"
@triton.jit
def k(X, S, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    tl.store(X + i, x + 1.0)
    tl.store(S, 0.0)
    tl.store(S + 1, tl.sum(x, axis=0))
"#;

#[test]
fn a_load_still_needed_after_a_store_to_its_argument_is_kept() {
    let f = lir_base(LOAD_THEN_STORE, "k", "*fp32,*fp32,16");
    assert_eq!(f.scratch.len(), 1, "{}", lnc_lir::print_function(&f));
    run(
        LOAD_THEN_STORE,
        "k",
        "*fp32,*fp32,16",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(16)],
        &[f32_buffer(1, 16), Buffer::zeros(DType::F32, 2)],
    );
}

const WHERE_BASES: &str = r#"
@triton.jit
def k(X, Y, Z, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    p = tl.where(i < 2, X + i, Y + i)
    tl.store(Z + i, tl.load(p))
"#;

#[test]
fn pointers_into_different_arguments_are_refused() {
    let e = tile_err(WHERE_BASES, "k", "*fp32,*fp32,*fp32,16");
    let file = lnc_diag::SourceFile::new("k.py", WHERE_BASES);
    insta::assert_snapshot!(e.to_diagnostic().render(&file));
}

const WHERE_OFFSETS: &str = r#"
@triton.jit
def k(X, Z, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    p = tl.where(i < 4, X + i, X + (BLOCK - 1 - i))
    tl.store(Z + i, tl.load(p))
"#;

#[test]
fn pointers_selected_in_one_argument_are_gathered() {
    let f = lir_base(WHERE_OFFSETS, "k", "*fp32,*fp32,16");
    assert_eq!(loads(&f, Addressing::Gather), 1);
    run(
        WHERE_OFFSETS,
        "k",
        "*fp32,*fp32,16",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(16)],
        &[f32_buffer(1, 16), Buffer::zeros(DType::F32, 16)],
    );
}

const ATOMIC: &str = r#"
@triton.jit
def k(X, C, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    old = tl.atomic_add(C + i % 4, tl.load(X + i))
    tl.store(X + i, old)
"#;

#[test]
fn an_atomic_gets_its_own_loop_and_keeps_its_result() {
    let f = lir_base(ATOMIC, "k", "*i32,*i32,16");
    assert_eq!(loops(&f), 2, "{}", lnc_lir::print_function(&f));
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    let x = Buffer::from_f64_values(DType::I32, &(0..16).map(|v| v as f64).collect::<Vec<_>>());
    run(
        ATOMIC,
        "k",
        "*i32,*i32,16",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(16)],
        &[x, Buffer::zeros(DType::I32, 4)],
    );
}

const WHILE_CARRY: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    r = 0
    while r < N:
        acc += tl.load(X + r * BLOCK + i)
        r += 1
    tl.store(Y + i, acc)
"#;

#[test]
fn a_block_carried_by_a_while_lives_in_scratch() {
    let f = lir_base(WHILE_CARRY, "k", "*fp32,*fp32,i32,8");
    assert_eq!(f.scratch.len(), 1, "{}", lnc_lir::print_function(&f));
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    run(
        WHILE_CARRY,
        "k",
        "*fp32,*fp32,i32,8",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(3), ArgValue::Int(8)],
        &[f32_buffer(1, 24), Buffer::zeros(DType::F32, 8)],
    );
}

const TWO_D: &str = r#"
@triton.jit
def k(X, Y, Z, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * N + cols[None, :], mask=mask, other=0.)
    tl.store(Y + cols, tl.max(x, axis=0), mask=cols < N)
    tl.store(Z + rows[:, None] * N + cols[None, :], x * 2.0, mask=mask)
"#;

#[test]
fn two_d_blocks_are_nested_loops_over_rows_and_column_tiles() {
    let f = lir_base(TWO_D, "k", "*fp32,*fp32,*fp32,i32,i32,4,8");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    run(
        TWO_D,
        "k",
        "*fp32,*fp32,*fp32,i32,i32,4,8",
        1,
        &[ptr(0), ptr(1), ptr(2), ArgValue::Int(3), ArgValue::Int(7), ArgValue::Int(4), ArgValue::Int(8)],
        &[f32_buffer(1, 21), Buffer::zeros(DType::F32, 7), Buffer::zeros(DType::F32, 21)],
    );
}

const BLOCK_ASSERT: &str = r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.device_assert(tl.load(X + i) >= 0)
"#;

#[test]
fn an_assert_on_a_block_checks_every_tile() {
    let f = lir_base(BLOCK_ASSERT, "k", "*i32,16");
    assert_eq!(loops(&f), 1);
    let ok = Buffer::from_f64_values(DType::I32, &[1.0; 16]);
    run(BLOCK_ASSERT, "k", "*i32,16", 1, &[ptr(0), ArgValue::Int(16)], &[ok]);
}

/// The block IR built by hand (no front end): `Y[i] = X[i] + 1` for a block of 8.
#[test]
fn a_hand_built_kernel() {
    use lnc_bir::{BinOp, Builder, Elem, Opcode as B, Shape, Type};
    use lnc_diag::Span;
    let mut f = lnc_bir::Function::new("copy_plus_one");
    let x = f.add_param("X", 0, Type::ptr(DType::F32));
    let y = f.add_param("Y", 1, Type::ptr(DType::F32));
    let s = Span::new(0, 1);
    let mut b = Builder::new(&mut f);
    let blk = |e| Type::block(e, Shape::d1(8));
    let i = b.value(B::Arange { start: 0, end: 8 }, vec![], blk(Elem::Scalar(DType::I32)), s);
    let px = b.value(B::Splat, vec![x], blk(Elem::Ptr(DType::F32)), s);
    let px = b.value(B::PtrAdd, vec![px, i], blk(Elem::Ptr(DType::F32)), s);
    let v = b.value(
        B::Load { has_mask: false, has_other: false, volatile: false },
        vec![px],
        blk(Elem::Scalar(DType::F32)),
        s,
    );
    let one = b.const_float(DType::F32, 1.0, s);
    let one = b.value(B::Splat, vec![one], blk(Elem::Scalar(DType::F32)), s);
    let v = b.value(B::Binary(BinOp::Add), vec![v, one], blk(Elem::Scalar(DType::F32)), s);
    let py = b.value(B::Splat, vec![y], blk(Elem::Ptr(DType::F32)), s);
    let py = b.value(B::PtrAdd, vec![py, i], blk(Elem::Ptr(DType::F32)), s);
    b.inst(B::Store { has_mask: false, check_only: false }, vec![py, v], &[], s);
    b.finish();
    lnc_bir::verify::verify(&f).expect("valid block IR");
    let l = tile_with(&f, 4).expect("tiles");
    insta::assert_snapshot!(lnc_lir::print_function(&l));
    differential(
        &f,
        [1, 1, 1],
        &[ptr(0), ptr(1)],
        &[f32_buffer(1, 8), Buffer::zeros(DType::F32, 8)],
        &[1, 4, 8],
    );
}

const ROW_SUMS: &str = r#"
@triton.jit
def k(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * N + cols[None, :], mask=mask, other=0.)
    tl.store(Y + rows, tl.sum(x, axis=1), mask=rows < M)
"#;

#[test]
fn row_sums_of_a_two_d_block_reduce_each_lane_s_row() {
    let f = lir_base(ROW_SUMS, "k", "*fp32,*fp32,i32,i32,8,16");
    insta::assert_snapshot!(lnc_lir::print_function(&f));
    run(
        ROW_SUMS,
        "k",
        "*fp32,*fp32,i32,i32,8,16",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(6), ArgValue::Int(13), ArgValue::Int(8), ArgValue::Int(16)],
        &[f32_buffer(1, 78), Buffer::zeros(DType::F32, 6)],
    );
}

const KEEP_DIMS: &str = r#"
@triton.jit
def k(X, Y, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    m = tl.max(x, axis=0, keep_dims=True)
    tl.store(Y + i, x - m)
"#;

#[test]
fn a_reduction_keeping_its_axis_is_a_scalar_broadcast() {
    let f = lir_base(KEEP_DIMS, "k", "*fp32,*fp32,16");
    assert_eq!(loops(&f), 2);
    run(
        KEEP_DIMS,
        "k",
        "*fp32,*fp32,16",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(16)],
        &[f32_buffer(1, 16), Buffer::zeros(DType::F32, 16)],
    );
}

const FOR_CARRY: &str = r#"
@triton.jit
def k(X, Y, S, R, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    acc = tl.load(Y + i)
    total = 0.0
    for r in range(0, R):
        x = tl.load(X + r * BLOCK + i)
        total += tl.sum(x, axis=0)
        tl.store(S + r, total)
        acc = acc * 0.5 + x
    tl.store(Y + i, acc)
"#;

#[test]
fn a_for_carries_a_block_in_scratch_and_a_scalar_in_a_register() {
    let f = lir_base(FOR_CARRY, "k", "*fp32,*fp32,*fp32,i32,8");
    // `acc` across iterations. `x` is needed by the reduction and the yield, two loops
    // (the store of `total` between them orders them): X is never written, so the yield's
    // loop reads it again.
    assert_eq!(f.scratch.len(), 1, "{}", lnc_lir::print_function(&f));
    run(
        FOR_CARRY,
        "k",
        "*fp32,*fp32,*fp32,i32,8",
        1,
        &[ptr(0), ptr(1), ptr(2), ArgValue::Int(3), ArgValue::Int(8)],
        &[f32_buffer(1, 24), f32_buffer(2, 8), Buffer::zeros(DType::F32, 3)],
    );
}

const ATOMIC_CAPTURED: &str = r#"
@triton.jit
def k(C, Y, R, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    old = tl.atomic_add(C + i, 1)
    for r in range(0, R):
        tl.store(Y + r * BLOCK + i, old + r)
"#;

#[test]
fn an_atomic_result_used_in_a_loop_is_kept_once() {
    let f = lir_base(ATOMIC_CAPTURED, "k", "*i32,*i32,i32,8");
    assert_eq!(loops(&f), 2, "{}", lnc_lir::print_function(&f));
    let c = Buffer::from_f64_values(DType::I32, &(0..8).map(|v| v as f64).collect::<Vec<_>>());
    run(
        ATOMIC_CAPTURED,
        "k",
        "*i32,*i32,i32,8",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(2), ArgValue::Int(8)],
        &[c, Buffer::zeros(DType::I32, 16)],
    );
}

const PRINT_BLOCKS: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i[:, None] * 2 + i[None, :], mask=i[None, :] < N)
    tl.device_print("x", x, N)
    tl.store(Y + i[:, None] * 2 + i[None, :], x + 1)
"#;

#[test]
fn printing_a_block_prints_each_element_with_its_index() {
    // As Triton prints: one line per element of each operand, scalars with `idx ()`.
    let f = lir_base(PRINT_BLOCKS, "k", "*fp32,*fp32,i32,2");
    let prints: Vec<&str> = f
        .live_insts()
        .into_iter()
        .filter_map(|i| match f.insts[i].opcode {
            Opcode::Print(k) => Some(f.strings[k as usize].as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(prints, ["idx (0, 0) x:", "idx (0, 1) x:", "idx (1, 0) x:", "idx (1, 1) x:", "idx () x:"]);
    run(
        PRINT_BLOCKS,
        "k",
        "*fp32,*fp32,i32,2",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(1), ArgValue::Int(2)],
        &[f32_buffer(1, 4), Buffer::zeros(DType::F32, 4)],
    );
    let e = tile_err(PRINT_BLOCKS, "k", "*fp32,*fp32,i32,128");
    assert!(e.message.contains("at most 4096"), "{e}");
}

const CARRIED_PTRS: &str = r#"
@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    xp = X + cols
    yp = Y + cols
    for off in range(0, N, BLOCK):
        tl.store(yp, tl.load(xp, mask=off + cols < N) + 1.0, mask=off + cols < N)
        xp += BLOCK
        yp = yp + BLOCK
    n = 0
    while n < N:
        tl.store(yp, tl.load(xp - N, mask=n + cols < N), mask=n + cols < N)
        xp += BLOCK
        yp += BLOCK
        n += BLOCK
"#;

#[test]
fn carried_blocks_of_pointers_become_carried_offsets() {
    // `ptrs += BLOCK` in `for` and `while`: a fixed pointer block plus a scalar offset, so
    // the accesses stay contiguous.
    let f = lir_base(CARRIED_PTRS, "k", "*fp32,*fp32,i32,8");
    assert_eq!(loads(&f, Addressing::Gather), 0, "{}", lnc_lir::print_function(&f));
    assert!(loads(&f, Addressing::Contiguous) >= 2);
    run(
        CARRIED_PTRS,
        "k",
        "*fp32,*fp32,i32,8",
        1,
        &[ptr(0), ptr(1), ArgValue::Int(21), ArgValue::Int(8)],
        &[f32_buffer(1, 48), Buffer::zeros(DType::F32, 48)],
    );
}

const MOVING_APART: &str = r#"
@triton.jit
def k(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ptrs = X + offs
    for i in range(3):
        ptrs = ptrs + offs
    tl.store(Y + offs, tl.load(ptrs))
"#;

#[test]
fn carried_pointer_blocks_moving_lanes_apart_are_refused() {
    let e = tile_err(MOVING_APART, "k", "*fp32,*fp32,8");
    assert!(e.message.contains("by the same offset"), "{e}");
}

const DOT: &str = r#"
@triton.jit
def k(A, B, C, N):
    r = tl.arange(0, 16)
    c = tl.arange(0, 32)
    a = tl.load(A + r[:, None] * 32 + c[None, :])
    b = tl.load(B + c[:, None] * N + (r[None, :] * 3) % N)
    tl.store(C + r[:, None] * 16 + r[None, :], tl.dot(a, b))
"#;

#[test]
fn operands_a_broadcast_repeats_are_read_once_into_scratch() {
    // `tl.dot` multiplies `a[:, :, None]` and `b[None, :, :]`: each element of `a` is used
    // 16 times, each of `b` 16 times. Both are loaded once into scratch (`b` through a
    // gather) and the product's loop reads them there, not from memory.
    let f = lir_base(DOT, "k", "*fp32,*fp32,*fp32,i32");
    let text = lnc_lir::print_function(&f);
    assert_eq!(f.scratch.len(), 2, "{text}");
    assert_eq!(loads(&f, Addressing::Gather), 1, "b is gathered once: {text}");
    insta::assert_snapshot!(text);
    let bufs = [f32_buffer(1, 16 * 32), f32_buffer(2, 32 * 24), Buffer::zeros(DType::F32, 256)];
    run(DOT, "k", "*fp32,*fp32,*fp32,i32", 1, &[ptr(0), ptr(1), ptr(2), ArgValue::Int(24)], &bufs);
}

const POINTER_ROWS: &str = r#"
@triton.jit
def k(X, I, Y):
    r = tl.arange(0, 16)
    c = tl.arange(0, 32)
    idx = tl.load(I + r)
    p = X + idx
    v = tl.load(p[:, None] + c[None, :])
    tl.store(Y + r[:, None] * 32 + c[None, :], v)
"#;

#[test]
fn a_broadcast_pointer_block_is_not_kept_in_scratch() {
    // `p` reads memory (the gathered row starts) and is repeated 32 times, but a block of
    // pointers has no scratch form: the rule for repeated operands leaves it alone.
    let f = lir_base(POINTER_ROWS, "k", "*fp32,*i32,*fp32");
    assert!(f.scratch.is_empty(), "{}", lnc_lir::print_function(&f));
    let idx: Vec<f64> = (0..16).map(|i| ((i * 37) % 100) as f64).collect();
    let bufs =
        [f32_buffer(3, 4096), Buffer::from_f64_values(DType::I32, &idx), Buffer::zeros(DType::F32, 512)];
    run(POINTER_ROWS, "k", "*fp32,*i32,*fp32", 1, &[ptr(0), ptr(1), ptr(2)], &bufs);
}
