"""Layer-norm forward for rows longer than one block (N up to about 1 M elements).

One program per row, which walks its row in chunks of BLOCK_SIZE three times, as the
forward of Triton's layer-norm tutorial does for long rows:

    1. mean = sum(x) / N
    2. var  = sum((x - mean)^2) / N,  rstd = 1 / sqrt(var + eps)   (two-pass variance)
    3. y    = (x - mean) * rstd * w + b

Sums are accumulated lane by lane in a BLOCK_SIZE-wide fp32 block across the chunks and
reduced once at the end. x, y, w and b may be fp32, fp16 or bf16 (loads convert to fp32,
the store rounds once); Mean and Rstd are fp32.
"""
import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd_long(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    """y = (x - mean) * rstd * w + b over rows of any length. Grid: (M,).

    X, Y: [M, stride] row-major, the first N elements of each row used (input, output).
    W, B: [N] weight and bias. Mean, Rstd: [M] fp32 outputs, the row's mean and rstd.
    stride: elements between rows of X and Y. N: row length (row * stride and N must fit
    in an i32). eps: added to the variance.
    BLOCK_SIZE: a power of two, the chunk length (need not divide N nor exceed it).
    """
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    # pass 1: mean
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    # pass 2: variance around the mean (masked-off lanes add nothing)
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    # pass 3: normalize and apply the affine transform
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask).to(tl.float32)
        b = tl.load(B + cols, mask=mask).to(tl.float32)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)
