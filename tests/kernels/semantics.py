"""Triton's subtle semantics: integer division and remainder (C: `//` truncates toward zero,
`%` takes the dividend's sign), type promotion, comparisons between signed and unsigned
values, the types of literals."""

import triton
import triton.language as tl


@triton.jit
def div_mod(A, B, Q, R, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=1)
    b = tl.load(B + offs, mask=mask, other=1)
    tl.store(Q + offs, a // b, mask=mask)
    tl.store(R + offs, a % b, mask=mask)


@triton.jit
def div_mod_scalar(A, B, Out, n):
    # Scalars, and literals on either side.
    pid = tl.program_id(0)
    a = tl.load(A + pid)
    b = tl.load(B + pid)
    tl.store(Out + pid * 8 + 0, a // b)
    tl.store(Out + pid * 8 + 1, a % b)
    tl.store(Out + pid * 8 + 2, a // 7)
    tl.store(Out + pid * 8 + 3, a % 7)
    tl.store(Out + pid * 8 + 4, a // -7)
    tl.store(Out + pid * 8 + 5, a % -7)
    tl.store(Out + pid * 8 + 6, -1000 // b)
    tl.store(Out + pid * 8 + 7, 1000 % b)


@triton.jit
def true_div(A, B, Out, n, BLOCK: tl.constexpr):
    # `/` on integers computes in float32; `%` on floats is `fmod`.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=1)
    b = tl.load(B + offs, mask=mask, other=1)
    q = a / b
    tl.static_assert(q.dtype == tl.float32)
    tl.store(Out + offs * 3, q, mask=mask)
    af = a.to(tl.float32) * 0.75
    bf = b.to(tl.float32)
    tl.store(Out + offs * 3 + 1, af % bf, mask=mask)
    tl.store(Out + offs * 3 + 2, af / 2, mask=mask)


@triton.jit
def promotion(I8, I32, U32, I64, F32, F64, Out32, OutU32, Out64, OutF32, OutF64, OutI8, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i8 = tl.load(I8 + offs, mask=mask)
    i32 = tl.load(I32 + offs, mask=mask)
    u32 = tl.load(U32 + offs, mask=mask)
    i64 = tl.load(I64 + offs, mask=mask)
    f32 = tl.load(F32 + offs, mask=mask)
    f64 = tl.load(F64 + offs, mask=mask)
    a = i8 + i32
    tl.static_assert(a.dtype == tl.int32)
    tl.store(Out32 + offs, a, mask=mask)
    b = i32 + u32
    tl.static_assert(b.dtype == tl.uint32)
    tl.store(OutU32 + offs, b, mask=mask)
    c = i64 + u32
    tl.static_assert(c.dtype == tl.int64)
    tl.store(Out64 + offs, c * i32, mask=mask)
    d = i32 * f32
    tl.static_assert(d.dtype == tl.float32)
    tl.store(OutF32 + offs, d + i8, mask=mask)
    e = f32 + f64
    tl.static_assert(e.dtype == tl.float64)
    tl.store(OutF64 + offs, e * i64, mask=mask)
    # A literal does not promote a block of its kind: int8 stays int8 and wraps.
    g = i8 + 100
    tl.static_assert(g.dtype == tl.int8)
    h = i8 * 2.5
    tl.static_assert(h.dtype == tl.float32)
    # tl.maximum makes tensors of its operands first: the literal is a strong int32.
    m = tl.maximum(i8, 1)
    tl.static_assert(m.dtype == tl.int32)
    tl.store(OutI8 + offs, g, mask=mask)
    tl.store(OutF32 + n + offs, h, mask=mask)


@triton.jit
def signed_unsigned(I, U, I64, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i = tl.load(I + offs, mask=mask)
    u = tl.load(U + offs, mask=mask)
    w = tl.load(I64 + offs, mask=mask)
    # int32 against uint32 compares as uint32: -1 is the largest.
    tl.store(Out + offs * 6 + 0, i < u, mask=mask)
    tl.store(Out + offs * 6 + 1, i == u, mask=mask)
    # int64 against uint32 compares as int64.
    tl.store(Out + offs * 6 + 2, w < u, mask=mask)
    # A literal takes the block's type.
    tl.store(Out + offs * 6 + 3, u > 2147483648, mask=mask)
    tl.store(Out + offs * 6 + 4, i >= -5, mask=mask)
    tl.store(Out + offs * 6 + 5, (u >> 31) + (i >> 31), mask=mask)


@triton.jit
def literals(Out, x):
    # Literal types: int32 unless the value needs uint32/int64; floats are float32.
    a = 2147483647
    tl.store(Out + 0, x + a)
    b = 3000000000
    tl.store(Out + 1, b + x.to(tl.uint32))
    c = 2**40
    tl.store(Out + 2, c + x.to(tl.int64))
    tl.store(Out + 3, 7 // 2 + x)
    tl.store(Out + 4, -7 // 2 + x)
    tl.store(Out + 5, -7 % 3 + x)
    tl.store(Out + 6, (x * 0 + 7) // -2)
    tl.store(Out + 7, (x * 0 - 7) % 3)


@triton.jit
def shifts_and_wrap(I, U, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i = tl.load(I + offs, mask=mask)
    u = tl.load(U + offs, mask=mask)
    tl.store(Out + offs * 5 + 0, i >> 3, mask=mask)
    tl.store(Out + offs * 5 + 1, (u >> 3).to(tl.int32), mask=mask)
    tl.store(Out + offs * 5 + 2, i << 5, mask=mask)
    tl.store(Out + offs * 5 + 3, i * 65537, mask=mask)
    tl.store(Out + offs * 5 + 4, ~i ^ (i & 0xFF) | 1, mask=mask)


@triton.jit
def nan_compares(X, Y, Out, n, BLOCK: tl.constexpr):
    # IEEE comparisons: only `!=` is true when an operand is NaN.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    y = tl.load(Y + offs, mask=mask)
    tl.store(Out + offs * 6 + 0, x == y, mask=mask)
    tl.store(Out + offs * 6 + 1, x != y, mask=mask)
    tl.store(Out + offs * 6 + 2, x < y, mask=mask)
    tl.store(Out + offs * 6 + 3, x >= y, mask=mask)
    tl.store(Out + offs * 6 + 4, x != x, mask=mask)
    tl.store(Out + offs * 6 + 5, tl.where(x > y, 1, 0) + tl.where(x <= y, 2, 0), mask=mask)


@triton.jit
def bad_unsigned_literal(U, Out):
    u = tl.load(U)
    tl.store(Out, u + -1)


@triton.jit
def bad_literal_range(I, Out):
    i = tl.load(I)
    tl.store(Out, i + 3000000000)


@triton.jit
def bad_float_floordiv(X, Out):
    x = tl.load(X)
    tl.store(Out, x // 2.0)


@triton.jit
def bad_mixed_sign_div(I, U, Out):
    tl.store(Out, tl.load(I) // tl.load(U))
