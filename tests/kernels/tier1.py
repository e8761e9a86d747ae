"""Tier 1 of the language: scalar loads and stores, pointer arithmetic, conversions, `.dtype`,
`tl.where`, math functions, `cdiv`, Python `min` / `max`, calls to other `@jit` functions,
`static_assert`, `device_print`."""

import triton
import triton.language as tl


@triton.jit
def scalar_io(X, Y, n):
    pid = tl.program_id(0)
    x = tl.load(X + pid)
    tl.store(Y + pid, x * 3 - 1)
    if pid == 0:
        tl.store(Y + n, tl.load(X + n - 1))


@triton.jit
def row_pointers(X, Y, stride_x, stride_y, n, BLOCK: tl.constexpr):
    # `X += row * stride` on pointer parameters, then pointer blocks from the moved pointer.
    row = tl.program_id(0)
    X += row * stride_x
    Y += row * stride_y
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < n, other=0.0)
        tl.store(Y + cols, x + row, mask=cols < n)
    Y -= 1
    tl.store(Y + 1 + n, tl.load(X + n - 1) * 0 + row)


@triton.jit
def conversions(F, I, ToI, ToF, ToU8, ToB, ToI64, ToF64, Like, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    f = tl.load(F + offs, mask=mask)
    i = tl.load(I + offs, mask=mask)
    tl.store(ToI + offs, f.to(tl.int32), mask=mask)
    tl.store(ToF + offs, i.to(tl.float32) * 0.5, mask=mask)
    tl.store(ToU8 + offs, i.to(tl.uint8), mask=mask)
    tl.store(ToB + offs, f.to(tl.int1), mask=mask)
    tl.store(ToI64 + offs, i.to(tl.int64) * 100000, mask=mask)
    tl.store(ToF64 + offs, f.to(tl.float64) / 3, mask=mask)
    z = tl.zeros([BLOCK], dtype=f.dtype) + i.to(f.dtype)
    tl.static_assert(z.dtype == tl.float32)
    tl.store(Like + offs, (z * 2).to(Like.dtype.element_ty), mask=mask)


@triton.jit
def math_fns(X, Y, Out, n, BLOCK: tl.constexpr):
    # Eight results per element.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=1.0)
    y = tl.load(Y + offs, mask=mask, other=1.0)
    ax = tl.abs(x)
    tl.store(Out + offs * 8 + 0, tl.where(x > y, x, y), mask=mask)
    tl.store(Out + offs * 8 + 1, tl.maximum(x, y) - tl.minimum(x, y), mask=mask)
    tl.store(Out + offs * 8 + 2, tl.sqrt(ax), mask=mask)
    tl.store(Out + offs * 8 + 3, tl.rsqrt(ax + 1.0), mask=mask)
    tl.store(Out + offs * 8 + 4, tl.exp(x), mask=mask)
    tl.store(Out + offs * 8 + 5, tl.log(ax + 0.5), mask=mask)
    tl.store(Out + offs * 8 + 6, ax, mask=mask)
    tl.store(Out + offs * 8 + 7, tl.where(x < 0, -1.0, 2.0) * y, mask=mask)


@triton.jit
def int_fns(X, Out, n, d, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Out + offs * 5 + 0, tl.abs(x), mask=mask)
    tl.store(Out + offs * 5 + 1, tl.maximum(x, d), mask=mask)
    tl.store(Out + offs * 5 + 2, tl.minimum(x, -d), mask=mask)
    tl.store(Out + offs * 5 + 3, tl.cdiv(tl.abs(x), d), mask=mask)
    tl.store(Out + offs * 5 + 4, tl.where(x % 2 == 0, x, 0), mask=mask)


@triton.jit
def scalar_fns(A, B, Out):
    # Python's `min` / `max`, `tl.cdiv` on scalars.
    a = tl.load(A)
    b = tl.load(B)
    tl.store(Out + 0, min(a, b))
    tl.store(Out + 1, max(a, b))
    tl.store(Out + 2, max(a, 0))
    tl.store(Out + 3, tl.cdiv(a, 7))
    tl.store(Out + 4, tl.cdiv(1000, 7) + min(3, 9) + max(-2, 1))
    tl.store(Out + 5, max(min(a, b), -5))


@triton.jit
def _affine(x, a, b):
    return x * a + b


@triton.jit
def _moments(x, mask, n):
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    return mean, tl.sum(d * d, axis=0) / n


@triton.jit
def _clamped(x, lo, HI: tl.constexpr = 4.0):
    return tl.minimum(tl.maximum(x, lo), HI)


@triton.jit
def _normalize(x, mask, n):
    x = tl.where(mask, x, 0.0)
    mean, var = _moments(x, mask, n)
    return _affine(x - mean, 1.0 / tl.sqrt(var + 1e-5), 0.0)


@triton.jit
def jit_calls(X, Y, Stats, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * n + cols, mask=mask, other=0.0)
    mean, var = _moments(x, mask, n)
    tl.store(Stats + 3 * row, mean)
    tl.store(Stats + 3 * row + 1, var)
    stats = _moments(x * 2.0, mask, n)
    tl.store(Stats + 3 * row + 2, stats[0])
    y = _clamped(_normalize(x, mask, n), -1.0) + _clamped(x, 0.0, HI=2.0)
    tl.store(Y + row * n + cols, y, mask=mask)


@triton.jit
def checks_and_prints(X, Y, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16, "BLOCK is too small")
    tl.static_assert(BLOCK % 16 == 0)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0)
    if pid == 1:
        tl.device_print("pid", pid)
        tl.device_print("x", x)
    tl.store(Y + offs, x + 1, mask=offs < n)


@triton.jit
def static_assert_fails(X, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16, "BLOCK is too small")
    tl.store(X, 1)


@triton.jit
def grid_ids(Out):
    x = tl.program_id(0)
    y = tl.program_id(1)
    z = tl.program_id(2)
    nx = tl.num_programs(0)
    ny = tl.num_programs(1)
    nz = tl.num_programs(2)
    lin = (z * ny + y) * nx + x
    tl.store(Out + 4 * lin, x)
    tl.store(Out + 4 * lin + 1, y)
    tl.store(Out + 4 * lin + 2, z)
    tl.store(Out + 4 * lin + 3, nx * 10000 + ny * 100 + nz)
