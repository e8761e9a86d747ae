//! Lowering of small kernels: promotion, broadcasting, constexpr folding, control flow,
//! inlining. Each result is verified and snapshotted as printed block IR.

mod common;

use common::bir;

const PRELUDE: &str = "import triton\nimport triton.language as tl\n\n";

fn k(body: &str) -> String {
    format!("{PRELUDE}{body}")
}

/// The printed type of the first instruction whose line contains `needle`.
fn line_with<'s>(out: &'s str, needle: &str) -> &'s str {
    out.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in:\n{out}"))
}

#[test]
fn weak_literals_keep_the_block_type() {
    let src = k(r#"
@triton.jit
def scale(X, Y, I, J, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    tl.store(Y + offs, x * 2.0)
    i = tl.load(I + offs)
    tl.store(I + offs, i + 1)
    j = tl.load(J + offs)
    tl.store(J + offs, j * 3)
"#);
    let out = bir(&src, "scale", "*fp16,*fp16,*i64,*i8,128");
    assert!(line_with(&out, "= mul").ends_with("<128xfp16>"), "{out}");
    assert!(line_with(&out, "= add").ends_with("<128xi64>"), "{out}");
    assert!(out.contains("const 3 : i8"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn promotion_of_typed_operands() {
    let src = k(r#"
@triton.jit
def promote(A, B, C, D, n, m, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs)
    b = tl.load(B + offs)
    tl.store(C + offs, a + b)
    tl.store(D + offs, offs / n)
    tl.store(D + offs, offs // n)
    tl.store(D + offs, offs % n)
    tl.store(D + offs, (offs + m).to(tl.float64))
"#);
    // fp32 + fp64 is fp64; int32 / int32 is fp32; `//` and `%` stay int; int32 + int64 is int64.
    let out = bir(&src, "promote", "*fp32,*fp64,*fp64,*fp64,i32,i64,64");
    assert!(line_with(&out, "= add").ends_with("<64xfp64>"), "{out}");
    assert!(line_with(&out, "= div").ends_with("<64xfp32>"), "{out}");
    assert!(line_with(&out, "= idiv").ends_with("<64xi32>"), "{out}");
    assert!(line_with(&out, "= rem").ends_with("<64xi32>"), "{out}");
    assert!(out.contains(": <64xi64>"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn comparisons_masks_and_2d_broadcasting() {
    let src = k(r#"
@triton.jit
def tile(X, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0)
    tl.store(X + offs, x + 1.0, mask=mask)
    tl.store(X + cols, tl.sum(x, axis=0), mask=cols < N)
    tl.store(X + rows, tl.max(x, axis=1), mask=rows < M)
    tl.store(X + rows[:, None], tl.min(x, axis=1, keep_dims=True), mask=rows[:, None] < M)
    tl.store(X, tl.sum(x))
"#);
    let out = bir(&src, "tile", "*fp32,i32,i32,16,32");
    assert!(line_with(&out, "= and").ends_with("<16x32xi1>"), "{out}");
    assert!(line_with(&out, "reduce sum").ends_with("<32xfp32>"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn constexpr_folding() {
    let src = k(r#"
@triton.jit
def fold(X, BLOCK: tl.constexpr, USE_BIAS: tl.constexpr, SCALE: tl.constexpr = 0.5):
    tl.static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32")
    HALF = BLOCK // 2
    offs = tl.arange(0, HALF * 2 // 2)
    x = tl.load(X + offs)
    if USE_BIAS and BLOCK > 64:
        x = x + 1.0
    elif not USE_BIAS:
        x = x - 1.0
    else:
        x = x * 3.0
    if x.dtype == tl.float16:
        x = x.to(tl.float32)
    for i in tl.static_range(0, 3):
        x = x * (i + SCALE)
    tl.store(X + offs, x)
"#);
    let out = bir(&src, "fold", "*fp16,128,False");
    assert!(out.contains("arange 0, 64"), "{out}");
    assert!(out.contains("sub"), "{out}");
    assert!(!out.contains(" add "), "{out}");
    assert_eq!(out.matches("= mul").count(), 3, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn runtime_if_yields_changed_variables() {
    let src = k(r#"
@triton.jit
def branch(X, Y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    acc = 0.0
    if pid < n:
        x = x * 2.0
        acc = tl.sum(x, axis=0)
    elif pid == n:
        x = x + 1.0
    else:
        fresh = 1
    tl.store(Y + pid, acc)
    tl.store(X + offs, x)
"#);
    let out = bir(&src, "branch", "*fp32,*fp32,i32,64");
    insta::assert_snapshot!(out);
}

#[test]
fn for_loops_carry_what_changes() {
    let src = k(r#"
@triton.jit
def loops(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    total = 0
    count = 0.0
    for i in range(0, n, BLOCK):
        x = tl.load(X + i + offs, mask=i + offs < n, other=0.0)
        acc += x
        count += 1
    for j in range(10, 0, -3):
        total += j
    for k in tl.range(n, num_stages=2):
        acc = acc * 0.5
    tl.store(Y + offs, acc / count + total)
"#);
    let out = bir(&src, "loops", "*fp32,*fp32,i32,64");
    assert_eq!(out.matches("= for ").count(), 3, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn while_loop_recomputes_its_condition() {
    let src = k(r#"
@triton.jit
def spin(L, C, n):
    i = 0
    s = 0.0
    while i < n:
        s += i * 0.5
        i += 1
    while tl.atomic_cas(L, 0, 1) == 1:
        pass
    tl.store(C, s)
    tl.atomic_xchg(L, 0)
"#);
    let out = bir(&src, "spin", "*i32,*fp32,i32");
    insta::assert_snapshot!(out);
}

#[test]
fn jit_calls_are_inlined() {
    let src = k(r#"
@triton.jit
def stats(x, N, EPS: tl.constexpr = 1e-5):
    mean = tl.sum(x, axis=0) / N
    xm = x - mean
    var = tl.sum(xm * xm, axis=0) / N
    return mean, 1.0 / tl.sqrt(var + EPS)

@triton.jit
def clamp_index(i, n):
    if i >= n:
        return n - 1
    return i

@triton.jit
def norm(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.0)
    mean, rstd = stats(x, N)
    row = clamp_index(tl.program_id(0), N)
    tl.store(Y + row * BLOCK + offs, (x - mean) * rstd, mask=offs < N)
"#);
    let out = bir(&src, "norm", "*fp32,*fp32,i32,128");
    // 1e-5 rounded to float32.
    assert!(out.contains("const 9.999999747378752e-6 : fp32"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn early_return_takes_the_rest_into_the_branch() {
    let src = k(r#"
@triton.jit
def guarded(X, n):
    pid = tl.program_id(0)
    if pid >= n:
        return
    tl.store(X + pid, pid)
"#);
    let out = bir(&src, "guarded", "*i32,i32");
    insta::assert_snapshot!(out);
}

#[test]
fn specialized_runtime_parameter_keeps_its_slot() {
    let src = k(r#"
@triton.jit
def spec(X, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(X + offs, x + eps, mask=offs < n)
"#);
    let out = bir(&src, "spec", "*fp16,1000,1e-3,64");
    // `n` and `eps` are constants of their literal types; only `X` is a parameter.
    assert!(out.starts_with("kernel @spec(%0 X: *fp16 @slot0)"), "{out}");
    assert!(out.contains("const 1000 : i32"), "{out}");
    // eps is an fp32 constant (not weak): fp16 + fp32 computes in fp32.
    assert!(line_with(&out, "= add").ends_with("<64xfp32>"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn builtins_tier_one() {
    let src = k(r#"
@triton.jit
def misc(X, Y, Z, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    nprog = tl.num_programs(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m, other=float("-inf"))
    y = tl.where(m, tl.exp(x - tl.max(x, axis=0)), 0.0)
    y = tl.maximum(y, 0.0) + tl.minimum(tl.abs(y), 1.0)
    y += tl.log(tl.rsqrt(y + 1.0)) + tl.exp2(tl.log2(y + 2.0)) + tl.sin(y) * tl.cos(y)
    z = tl.full([BLOCK], 7, tl.int32) + tl.zeros((BLOCK,), dtype=tl.int32)
    bits = x.to(tl.int32, bitcast=True)
    tl.store(Y + offs, y, mask=m)
    tl.store(Z + offs, z + bits + tl.cdiv(n, BLOCK) + tl.cdiv(BLOCK, 3) + min(BLOCK, 16) + max(nprog, 2), mask=m)
    tl.atomic_add(Y + offs, 1.0, mask=m)
    tl.atomic_max(Z + offs, z)
    tl.device_print("x", x)
"#);
    let out = bir(&src, "misc", "*fp32,*fp32,*i32,i32,64");
    insta::assert_snapshot!(out);
}

#[test]
fn conditional_expressions_and_logic() {
    let src = k(r#"
@triton.jit
def cond(X, n, FLAG: tl.constexpr):
    pid = tl.program_id(0)
    v = 1.0 if pid < n else 2.0
    w = 3 if FLAG else 4.5
    ok = (pid > 0) and (pid < n) or not (pid == 5)
    tl.store(X + pid, v + w, mask=ok)
"#);
    let out = bir(&src, "cond", "*fp32,i32,True");
    assert!(out.contains("const 3.0 : fp32") || out.contains("const 3 "), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn pointer_arithmetic() {
    let src = k(r#"
@triton.jit
def ptrs(X, u, BLOCK: tl.constexpr):
    p = X + 4
    p -= 1
    p = p + u
    offs = tl.arange(0, BLOCK)
    q = p + offs
    q = offs + q
    tl.store(q - 2, 0)
"#);
    let out = bir(&src, "ptrs", "*fp32,u32,32");
    // unsigned offsets are widened to i64 before being added.
    assert!(out.contains("cast %1 : i64"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn nested_loops_and_unrolling() {
    let src = k(r#"
@triton.jit
def nest(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    for i in range(0, M, BM):
        row_sum = tl.zeros((BM,), dtype=tl.float32)
        for j in tl.range(0, N, BN):
            offs = (i + rows)[:, None] * N + (j + cols)[None, :]
            x = tl.load(X + offs, mask=((i + rows)[:, None] < M) & ((j + cols)[None, :] < N), other=0.0)
            acc += x
            row_sum += tl.sum(x, axis=1)
        for s in tl.static_range(2):
            acc = acc * 0.5 + s
        tl.store(Y + i + rows, row_sum, mask=i + rows < M)
    tl.store(Y + cols, tl.sum(acc, axis=0))
"#);
    let out = bir(&src, "nest", "*fp32,*fp32,i32,i32,16,32");
    assert_eq!(out.matches("= for ").count(), 2, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn assigned_numbers_are_typed_scalars() {
    // Triton converts an assigned number to a tensor of its literal type: `a // 2` is C
    // division on int32 (-3), `b + 1` wraps, `s` is an fp32 tensor that promotes an fp16
    // block, and `x * 1.5` (a literal) stays fp16. Known scalars fold with the IR's
    // semantics, so only constants remain.
    let src = k(r#"
@triton.jit
def assigned(Out, X, Y, BLOCK: tl.constexpr):
    a = -7
    tl.store(Out + 0, a // 2)
    tl.store(Out + 1, a % 2)
    b = 2147483647
    tl.store(Out + 2, (b + 1) // 65536)
    tl.store(Out + 3, -7 // 2)
    c = 0.001
    tl.store(Out + 4, (c * c * 1000.0).to(tl.int64, bitcast=False))
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    s = 1.5
    tl.store(Y + offs, (x * s).to(tl.float16))
    tl.store(Y + offs, x * 1.5)
"#);
    let out = bir(&src, "assigned", "*i64,*fp16,*fp16,16");
    assert!(out.contains("const -3 : i64"), "{out}");
    assert!(out.contains("const -1 : i64"), "{out}");
    assert!(out.contains("const -32768 : i64"), "{out}");
    assert!(out.contains("const -4 : i64"), "{out}");
    assert!(!out.contains("idiv") && !out.contains("rem "), "{out}");
    // fp32 rounding after each product: 0.001f32² · 1000 is not 0.001 rounded once.
    assert_eq!(out.matches("= mul").count(), 2, "{out}");
    assert!(line_with(&out, "= mul").ends_with("<16xfp32>"), "{out}");
    assert!(out.lines().filter(|l| l.contains("= mul")).nth(1).unwrap().ends_with("<16xfp16>"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn assigned_numbers_known_while_compiling() {
    // lnc extension: a known scalar may stand where Triton needs a constexpr (shapes,
    // arange bounds, static_range bounds, constexpr parameters, compile-time `if`s).
    let src = k(r#"
@triton.jit
def fill(P, N: tl.constexpr, V: tl.constexpr):
    tl.store(P + tl.arange(0, N), tl.full([N], V, dtype=tl.int32))

@triton.jit
def known(Out, BLOCK: tl.constexpr):
    B2 = BLOCK * 2
    B4 = B2 * 2
    FLAG = B2 > 4
    offs = tl.arange(0, B4)
    z = tl.zeros([B4], dtype=tl.int32) + B2
    if FLAG and not (B4 == 3):
        z = z + 1
    else:
        z = z.to(tl.float32)
    w = 1 if FLAG else 2.5
    for i in tl.static_range(B2 // 2):
        z = z + i
    tl.static_assert(B4 == 4 * BLOCK)
    fill(Out + B4, B2, w)
    tl.store(Out + offs, z)
"#);
    let out = bir(&src, "known", "*i32,2");
    assert!(out.contains("arange 0, 8"), "{out}");
    assert!(out.contains("arange 0, 4"), "{out}");
    assert!(!out.contains("= if"), "{out}");
    assert!(!out.contains("cmp"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn annotated_constexpr_keeps_python_semantics() {
    // `x: tl.constexpr = ...` is not converted: Python's floor division applies (-4), and
    // a literal stays weakly typed (fp16 block * C stays fp16).
    let src = k(r#"
@triton.jit
def ann(Out, X, BLOCK: tl.constexpr):
    a: tl.constexpr = -7
    tl.store(Out, a // 2)
    C: tl.constexpr = 1.5
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    tl.store(X + offs, x * C)
"#);
    let out = bir(&src, "ann", "*i32,*fp16,16");
    assert!(out.contains("const -4 : i32"), "{out}");
    assert!(line_with(&out, "= mul").ends_with("<16xfp16>"), "{out}");
}

#[test]
fn loop_carried_assigned_numbers() {
    // `acc = 0.0` is an fp32 scalar: adding fp16 values keeps it fp32 (Triton's promotion
    // of two tensors); `k = 0` carried through `k += 3` stays int32; `z = 0` becomes the
    // block it is accumulated into, as the number it was assigned from did.
    let src = k(r#"
@triton.jit
def loop(Out, X, n, BLOCK: tl.constexpr):
    acc = 0.0
    k = 0
    z = 0
    for i in range(0, n):
        acc += tl.load(X + i)
        k += 3
        z += tl.load(X + tl.arange(0, BLOCK))
    tl.store(Out, acc + k)
    tl.store(Out + tl.arange(0, BLOCK), z)
"#);
    let out = bir(&src, "loop", "*fp32,*fp16,i32,16");
    assert!(out.contains("-> (fp32, i32, <16xfp16>)"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn a_square_is_a_multiplication() {
    // `** 2` (int or float) multiplies, as NumPy's power by the scalar 2 does; other
    // exponents, and a run-time one, stay `pow`.
    let src = k(r#"
@triton.jit
def powers(X, Y, E):
    x = tl.load(X)
    e = tl.load(E)
    tl.store(Y, x ** 2)
    tl.store(Y + 1, x ** 2.0)
    tl.store(Y + 2, x ** 3)
    tl.store(Y + 3, x ** e)
"#);
    let out = bir(&src, "powers", "*fp16,*fp16,*fp16");
    assert_eq!(out.matches("= mul").count(), 2, "{out}");
    assert_eq!(out.matches("= pow").count(), 2, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn random_numbers_are_philox_rounds_of_elementwise_operations() {
    // One round: the key from the seed's halves, the counter from the offsets, then two
    // `umulhi` (a 64-bit product's high half), two wrapping products, the xors and the key
    // increments; `rand` folds negative words and scales them into [0, 1).
    let src = k(r#"
@triton.jit
def rng(O, R, seed):
    offs = tl.arange(0, 16)
    tl.store(O + offs, tl.randint(seed, offs, 1))
    tl.store(R + offs, tl.rand(seed, offs, n_rounds=1))
"#);
    let out = bir(&src, "rng", "*u32,*fp32,i64");
    assert!(out.contains("<16xu64>"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn umulhi_of_64_bit_integers_takes_four_partial_products() {
    let src = k(r#"
@triton.jit
def hi(X, Y, O):
    offs = tl.arange(0, 4)
    tl.store(O + offs, tl.umulhi(tl.load(X + offs), tl.load(Y + offs)))
"#);
    let out = bir(&src, "hi", "*i64,*i64,*i64");
    assert_eq!(out.matches("= mul").count(), 4, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn a_dot_is_the_sum_of_broadcast_products() {
    // fp16 operands widen to fp32, meet as [M, K, 1] and [1, K, N] blocks, multiply and sum
    // over K; the accumulator is added after; `@` is the same `dot`.
    let src = k(r#"
@triton.jit
def mm(A, B, C):
    r = tl.arange(0, 16)
    a = tl.load(A + r[:, None] * 32 + tl.arange(0, 32)[None, :])
    b = tl.load(B + tl.arange(0, 32)[:, None] * 16 + r[None, :])
    acc = tl.zeros((16, 16), dtype=tl.float32)
    acc = tl.dot(a, b, acc)
    tl.store(C + r[:, None] * 16 + r[None, :], acc + a @ b)
"#);
    let out = bir(&src, "mm", "*fp16,*fp16,*fp32");
    assert_eq!(out.matches("reduce sum axis=1").count(), 2, "{out}");
    assert!(out.contains("<16x32x16xfp32>"), "{out}");
    insta::assert_snapshot!(out);
}
