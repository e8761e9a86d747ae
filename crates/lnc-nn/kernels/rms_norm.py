"""RMSNorm forward and backward, Triton style: one program per row.

For a row x of N elements, a weight w (N elements) and eps:

    rstd = 1 / sqrt(mean(x^2) + eps)        (one fp32 scalar per row, saved for backward)
    y    = x * rstd * w

Backward, given dy (the gradient of y), with xhat = x * rstd and wdy = w * dy:

    dx = (wdy - xhat * mean(xhat * wdy)) * rstd
    dw = sum over the rows of dy * xhat

(d rstd / d x_j = -rstd^3 * x_j / N, hence the correction term.)

Design of the dw reduction: instead of the seed's lock-protected GROUP_SIZE_M partial
buffers (`_layer_norm_bwd_dx_fused`), `_rms_norm_bwd_dx` writes each row's partial
product dy * xhat to row `row` of an [M, N] buffer PDW, and `_rms_norm_bwd_dw` sums PDW
over its rows with 2-D blocks, like the seed's `_layer_norm_bwd_dwdb`. No locks, no
atomics, and the result does not depend on the order the programs run in (deterministic),
at the price of an M x N scratch buffer; PDW should be fp32 for accuracy (any float
dtype works: loads convert to fp32, the store rounds).

Every kernel loads its inputs and converts them to fp32 (`.to(tl.float32)`), so x, y, w,
dy, dx and dw may be stored in fp16/bf16 (the stores round once); rstd is fp32.
Row offsets are `row * stride` (i32): M * stride must fit in an i32.
"""
import triton
import triton.language as tl


@triton.jit
def _rms_norm_fwd(X, Y, W, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    """Forward: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps). Grid: (M,).

    X, Y: [M, stride] row-major, the first N elements of each row used (input, output).
    W: [N] weight. Rstd: [M] fp32 output, the row's rstd.
    stride: elements between rows of X and Y. N: row length. eps: added to mean(x^2).
    BLOCK_SIZE: a power of two >= N (the whole row is one block).
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    X += row * stride
    Y += row * stride
    # masked-off lanes load 0 and add nothing to the sum of squares
    x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N
    rstd = 1 / tl.sqrt(ms + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    y = x * rstd * w
    tl.store(Y + cols, y, mask=mask)


@triton.jit
def _rms_norm_bwd_dx(DX, DY, PDW, X, W, Rstd, stride, N, BLOCK_SIZE: tl.constexpr):
    """Backward, dx and per-row partial dw. Grid: (M,).

    DX: [M, stride] output, dx = (wdy - xhat * mean(xhat * wdy)) * rstd.
    DY, X: [M, stride] inputs (the gradient of y, the forward's input).
    PDW: [M, N] output, row `row` gets dy * xhat (summed over rows by _rms_norm_bwd_dw).
    W: [N] weight. Rstd: [M] fp32, the forward's rstd.
    stride: elements between rows of DX, DY and X. N: row length.
    BLOCK_SIZE: a power of two >= N.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    PDW += row * N
    x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0.).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    rstd = tl.load(Rstd + row)
    # masked-off lanes are 0 in x, dy and w, hence in xhat and wdy
    xhat = x * rstd
    wdy = w * dy
    c = tl.sum(xhat * wdy, axis=0) / N
    dx = (wdy - xhat * c) * rstd
    tl.store(DX + cols, dx, mask=mask)
    tl.store(PDW + cols, dy * xhat, mask=mask)


@triton.jit
def _rms_norm_bwd_dw(PDW, DW, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """Backward, dw = sum over the M rows of PDW. Grid: (cdiv(N, BLOCK_SIZE_N),).

    PDW: [M, N] partial products written by _rms_norm_bwd_dx. DW: [N] output.
    M, N: the shape of PDW. Each program sums BLOCK_SIZE_N columns, BLOCK_SIZE_M rows at a
    time, in fp32.
    """
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        acc += tl.load(PDW + offs, mask=mask, other=0.).to(tl.float32)
    dw = tl.sum(acc, axis=0)
    tl.store(DW + cols, dw, mask=cols < N)
