# Tenstorrent ttnn's distributed layer norm (seed 000): `ttnn.layer_norm_pre_all_gather`
# and `ttnn.layer_norm_post_all_gather`, in the kernel language.
#
# The last axis of x [M, N] is split across D devices; device d holds the shard
# x[:, c_d : c_d + N_d] (the shards may have different widths). Layer norm over the whole
# row is then computed in three steps:
#
#   1. pre_all_gather (on every device, on its shard):   s_d = sum_j x[j],  q_d = sum_j x[j]^2
#   2. all-gather of the [M, 2] statistics of every device into [M, D, 2] (host side);
#   3. post_all_gather (on every device, on its shard):
#          mean = (sum_d s_d) / N
#          var  = (sum_d q_d) / N - mean^2          (biased variance, "E[x^2] - E[x]^2")
#          rstd = 1 / sqrt(var + eps)               (ttnn's default eps: 1e-12)
#          y    = (x - mean) * rstd [* weight [+ bias]]
#
# Everything is computed in fp32 whatever the storage type of x, y, weight and bias
# (fp32, fp16, bf16: loads widen, stores round once to nearest even); the statistics are
# fp32. One program per row.
import triton
import triton.language as tl


@triton.jit
def pre_all_gather(X, STATS, stride, Nd, BLOCK_SIZE: tl.constexpr):
    """Partial statistics of one shard, one program per row.

    X      shard [M, Nd] of x, row `r` at X + r * stride (stride >= Nd: the shard may be
           read in place from the full tensor, X pointing at its first column);
    STATS  [M, 2] fp32 output: STATS[r, 0] = sum of x[r, :Nd], STATS[r, 1] = sum of squares;
    stride row stride of X, in elements;
    Nd     width of the shard (any value >= 0);
    BLOCK_SIZE  columns read per step (a power of two; Nd may be larger: the row is walked
           in steps of BLOCK_SIZE, each lane accumulating its columns in fp32).
    """
    row = tl.program_id(0)
    X += row * stride
    acc_s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    acc_q = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, Nd, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < Nd, other=0.).to(tl.float32)
        acc_s += x
        acc_q += x * x
    tl.store(STATS + row * 2, tl.sum(acc_s, axis=0))
    tl.store(STATS + row * 2 + 1, tl.sum(acc_q, axis=0))


@triton.jit
def post_all_gather(X, Y, STATS, W, B, stride_x, stride_y, Nd, N, D, eps,
                    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr):
    """Normalizes one shard with the gathered statistics, one program per row.

    X      shard [M, Nd] of x, row `r` at X + r * stride_x;
    Y      output shard [M, Nd], row `r` at Y + r * stride_y (same storage type as X or not);
    STATS  [M, D, 2] fp32, the pre_all_gather outputs of the D shards, gathered:
           STATS[r, d, 0] = sum of x over shard d of row r, STATS[r, d, 1] = sum of squares;
    W, B   weight and bias of this shard, [Nd] (read only when HAS_WEIGHT / HAS_BIAS;
           pass any buffer otherwise);
    stride_x, stride_y  row strides of X and Y, in elements;
    Nd     width of this shard;  N  length of the whole row (sum of the shard widths);
    D      number of shards;  eps  added to the variance (ttnn's default: 1e-12);
    HAS_WEIGHT, HAS_BIAS  apply y = y * w, then y = y + b (ttnn: bias only with weight;
           HAS_BIAS without HAS_WEIGHT is rejected at specialization);
    BLOCK_SIZE  columns per step (a power of two; Nd may be larger).

    The variance is E[x^2] - E[x]^2, the only form the gathered sums allow; it is clamped at
    0 so that cancellation (a row whose mean is large against its spread) cannot produce
    a negative variance, hence a NaN rstd.
    """
    tl.static_assert(HAS_WEIGHT or not HAS_BIAS, "ttnn: bias only with weight")
    row = tl.program_id(0)
    X += row * stride_x
    Y += row * stride_y
    STATS += row * D * 2
    # Sum the statistics of the shards, in shard order.
    s = 0.
    q = 0.
    for d in range(0, D):
        s += tl.load(STATS + d * 2)
        q += tl.load(STATS + d * 2 + 1)
    mean = s / N
    var = tl.maximum(q / N - mean * mean, 0.)
    rstd = 1 / tl.sqrt(var + eps)
    for off in range(0, Nd, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < Nd
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            w = tl.load(W + cols, mask=mask).to(tl.float32)
            y = y * w
            if HAS_BIAS:
                b = tl.load(B + cols, mask=mask).to(tl.float32)
                y = y + b
        tl.store(Y + cols, y, mask=mask)
