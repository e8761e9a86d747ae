"""2-D blocks: broadcasting with `[:, None]` / `[None, :]`, blocks of pointers, masks combined
with `&`, reductions along either axis, `tl.zeros` / `tl.full` with tuple shapes, nested
loops."""

import triton
import triton.language as tl


@triton.jit
def tile_affine(X, Y, M, N, stride_xm, stride_ym, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0)
    y = x * 2.0 + rows[:, None] - cols[None, :] * 0.5
    tl.store(Y + rows[:, None] * stride_ym + cols[None, :], y, mask=mask)


@triton.jit
def reduce_axes(X, RowSum, ColMax, Centered, RowMinK, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # One program holds the whole (masked) matrix.
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    ptrs = X + rows[:, None] * N + cols[None, :]
    x = tl.load(ptrs, mask=mask, other=0.0)
    tl.store(RowSum + rows, tl.sum(x, axis=1), mask=rmask)
    xm = tl.where(mask, x, float("-inf"))
    tl.store(ColMax + cols, tl.max(xm, axis=0), mask=cmask)
    mn = tl.min(tl.where(mask, x, float("inf")), axis=1, keep_dims=True)
    tl.store(Centered + rows[:, None] * N + cols[None, :], x - mn, mask=mask)
    tl.store(RowMinK + rows[:, None] + cols[None, :] * 0, mn, mask=rmask[:, None] & (cols[None, :] == 0))


@triton.jit
def softmax_rows(X, Y, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride + cols[None, :], mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=1, keep_dims=True)
    num = tl.exp(z)
    den = tl.sum(num, axis=1)
    y = num / den[:, None]
    tl.store(Y + rows[:, None] * stride + cols[None, :], y, mask=mask)


@triton.jit
def outer(A, B, C, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    a = tl.load(A + rows, mask=rows < M, other=0.0)
    b = tl.load(B + cols, mask=cols < N, other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32) + tl.full((BM, BN), 1.5, tl.float32)
    acc += a[:, None] * b[None, :]
    ones = tl.full((1, BN), 1, tl.int32)
    idx = rows[:, None] * ones
    c = acc + idx.to(tl.float32)
    tl.store(C + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matvec(A, X, Y, M, K, stride, BM: tl.constexpr, BK: tl.constexpr):
    # Nested loops: the K chunks of each row block; a block of pointers advanced by BK.
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    a_ptrs = A + rows[:, None] * stride + ks[None, :]
    acc = tl.zeros((BM,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kmask = (k0 + ks) < K
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & kmask[None, :], other=0.0)
        x = tl.load(X + k0 + ks, mask=kmask, other=0.0)
        acc += tl.sum(a * x[None, :], axis=1)
        a_ptrs += BK
    tl.store(Y + rows, acc, mask=rows < M)


@triton.jit
def transpose(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(Y + cols[None, :] * M + rows[:, None], x, mask=mask)


@triton.jit
def matmul_outer(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    # C = A @ B as K rank-1 updates of a 2-D accumulator carried through the loop.
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(K):
        a = tl.load(A + rows * K + k, mask=rmask, other=0.0)
        b = tl.load(B + k * N + cols, mask=cmask, other=0.0)
        acc += a[:, None] * b[None, :]
    tl.store(C + rows[:, None] * N + cols[None, :], acc, mask=rmask[:, None] & cmask[None, :])


@triton.jit
def tiles_in_one_program(X, Y, Total, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Nested loops over the tiles of a matrix in a single program.
    total = 0.0
    for m0 in range(0, M, BM):
        rows = m0 + tl.arange(0, BM)
        for n0 in range(0, N, BN):
            cols = n0 + tl.arange(0, BN)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            offs = rows[:, None] * N + cols[None, :]
            x = tl.load(X + offs, mask=mask, other=0.0)
            tl.store(Y + offs, tl.abs(x), mask=mask)
            total += tl.sum(tl.sum(tl.abs(x), axis=1), axis=0)
    tl.store(Total, total)


@triton.jit
def int_reduce(X, S0, S1, Mx0, Mn1, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * N + cols[None, :], mask=mask, other=0)
    s0 = tl.sum(x, axis=0, keep_dims=True)
    s1 = tl.sum(x, axis=1, keep_dims=True)
    tl.store(S0 + cols[None, :] + rows[:, None] * 0, s0, mask=(cols[None, :] < N) & (rows[:, None] == 0))
    tl.store(S1 + rows[:, None] + cols[None, :] * 0, s1, mask=(rows[:, None] < M) & (cols[None, :] == 0))
    lo = tl.full((BM, BN), -(2**31), tl.int32)
    hi = tl.full((BM, BN), 2**31 - 1, tl.int32)
    tl.store(Mx0 + cols, tl.max(tl.where(mask, x, lo), axis=0), mask=cols < N)
    tl.store(Mn1 + rows, tl.min(tl.where(mask, x, hi), axis=1), mask=rows < M)


@triton.jit
def pointer_walk_while(X, Y, N, BN: tl.constexpr):
    # Blocks of pointers carried through a `while`.
    row = tl.program_id(0)
    cols = tl.arange(0, BN)
    xp = X + row * N + cols
    yp = Y + row * N + cols
    n0 = 0
    while n0 < N:
        mask = n0 + cols < N
        tl.store(yp, tl.load(xp, mask=mask) * 2.0, mask=mask)
        xp += BN
        yp += BN
        n0 += BN


@triton.jit
def pointer_walk_nested(X, Out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Sum of the tiles of a matrix: a row pointer block moved by the outer loop, a tile
    # pointer block started from it and moved by the inner loop.
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    row_ptrs = X + rows[:, None] * N + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for m0 in range(0, M, BM):
        ptrs = row_ptrs
        for n0 in range(0, N, BN):
            mask = ((m0 + rows)[:, None] < M) & ((n0 + cols)[None, :] < N)
            acc += tl.load(ptrs, mask=mask, other=0.0)
            ptrs += BN
        row_ptrs += BM * N
    tl.store(Out + rows[:, None] * BN + cols[None, :], acc)


@triton.jit
def pointer_by_branch(X, Y, N, BLOCK: tl.constexpr):
    # A block of pointers merged by an `if`: odd programs read the second half.
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    ptrs = X + offs
    if pid % 2 == 1:
        ptrs += N
    elif pid == 2:
        ptrs = ptrs + 1
    x = tl.load(ptrs, mask=offs < N)
    tl.store(Y + pid * N + offs, x, mask=offs < N)


@triton.jit
def pointer_walk_gather(X, Y, BLOCK: tl.constexpr):
    # Lanes moving by different offsets: not supported, refused with a diagnostic.
    offs = tl.arange(0, BLOCK)
    ptrs = X + offs
    for i in range(3):
        ptrs = ptrs + offs
    tl.store(Y + offs, tl.load(ptrs))
