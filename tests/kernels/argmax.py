import triton
import triton.language as tl


@triton.jit
def arg_rows(X, VAL, IDX, ARG, n, stride, BLOCK: tl.constexpr, MAX: tl.constexpr):
    # One row per program: the extremum, its index by `return_indices` and by
    # tl.argmax/tl.argmin; masked lanes hold the identity.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    if MAX:
        x = tl.load(X + row * stride + cols, mask=m, other=-float("inf"))
        v, i = tl.max(x, axis=0, return_indices=True)
        j = tl.argmax(x, 0)
    else:
        x = tl.load(X + row * stride + cols, mask=m, other=float("inf"))
        v, i = tl.min(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
        j = tl.argmin(x, axis=0, tie_break_left=True)
    tl.store(VAL + row, v)
    tl.store(IDX + row, i)
    tl.store(ARG + row, j)


@triton.jit
def arg_ints(X, ARG, BLOCK: tl.constexpr):
    # A whole block of integers per program (any width): argmax and argmin.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * BLOCK + cols)
    tl.store(ARG + 2 * row, tl.argmax(x, 0))
    tl.store(ARG + 2 * row + 1, tl.argmin(x, 0))


@triton.jit
def arg_2d(X, ROWS, COLS, KEEP, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # A 2-D block: the argmax of each row (axis 1), of each column (axis 0), and of each
    # row again with keep_dims.
    r = tl.arange(0, BM)
    c = tl.arange(0, BN)
    m = (r[:, None] < M) & (c[None, :] < N)
    x = tl.load(X + r[:, None] * N + c[None, :], mask=m, other=-float("inf"))
    tl.store(ROWS + r, tl.argmax(x, axis=1), mask=r < M)
    tl.store(COLS + c, tl.argmax(x, axis=0), mask=c < N)
    k = tl.argmax(x, axis=1, keep_dims=True)
    tl.store(KEEP + r[:, None] + c[None, :] * 0, k, mask=(r[:, None] < M) & (c[None, :] < 1))
