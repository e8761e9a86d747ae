# TensorRT-LLM's `tensorrt_llm.functional.layer_norm` (seed 002), in the kernel language.
#
#   layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,
#              use_diff_of_squares=True)
#
# normalizes `input` over its trailing axes `normalized_shape` (one or several). The host
# flattens the input to rows: M = product of the leading axes, N = product of the
# normalized axes, row r = input.reshape(M, N)[r]; weight and bias have the shape
# `normalized_shape`, flattened to [N]. Per row:
#
#   mean = sum(x) / N
#   var  = sum(x^2) / N - mean^2        USE_DIFF_OF_SQUARES: one pass over x for both sums
#   var  = sum((x - mean)^2) / N        otherwise: a second pass, after the mean is known
#   rstd = 1 / sqrt(var + eps)
#   y    = (x - mean) * rstd [* weight] [+ bias]
#
# The one-pass form reads x once less, but loses the variance to cancellation when the
# mean is large against the standard deviation (sum(x^2)/N and mean^2 then agree in most of
# their digits); the two-pass form does not.
#
# Everything is computed in fp32 whatever the storage type of x, y, weight and bias
# (fp32, fp16, bf16: loads widen, stores round once to nearest even).
import triton
import triton.language as tl


@triton.jit
def layer_norm(X, Y, W, B, Mean, Rstd, stride, N, eps,
               HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
               USE_DIFF_OF_SQUARES: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Layer norm of one row per program.

    X      input rows [M, N], row `r` at X + r * stride;
    Y      output rows [M, N], row `r` at Y + r * stride;
    W, B   weight and bias [N] (read only when HAS_WEIGHT / HAS_BIAS; pass any buffer
           otherwise); each may be present without the other;
    Mean, Rstd  [M] fp32 outputs: the mean and 1/sqrt(var + eps) of every row (what a
           backward pass needs; TensorRT-LLM's op only returns y);
    stride row stride of X and Y, in elements (>= N);
    N      row length: the product of the normalized axes;
    eps    added to the variance (TensorRT-LLM's default: 1e-5);
    USE_DIFF_OF_SQUARES  variance as E[x^2] - E[x]^2 in one pass (clamped at 0: the
           cancellation may make it negative), or as E[(x - mean)^2] in two;
    BLOCK_SIZE  columns per step (a power of two; N may be larger: rows are walked in
           steps of BLOCK_SIZE, each lane accumulating its columns in fp32).
    """
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    if USE_DIFF_OF_SQUARES:
        acc_s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        acc_q = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
            acc_s += x
            acc_q += x * x
        mean = tl.sum(acc_s, axis=0) / N
        var = tl.maximum(tl.sum(acc_q, axis=0) / N - mean * mean, 0.)
    else:
        acc_s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
            acc_s += x
        mean = tl.sum(acc_s, axis=0) / N
        acc_q = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            mask = cols < N
            x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
            xm = tl.where(mask, x - mean, 0.)
            acc_q += xm * xm
        var = tl.sum(acc_q, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            w = tl.load(W + cols, mask=mask).to(tl.float32)
            y = y * w
        if HAS_BIAS:
            b = tl.load(B + cols, mask=mask).to(tl.float32)
            y = y + b
        tl.store(Y + cols, y, mask=mask)
