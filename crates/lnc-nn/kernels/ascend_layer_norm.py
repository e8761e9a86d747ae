# The two forms of Huawei Ascend C's `LayerNorm` high-level API
# (../shared/seeds/001_14582ea974b123e2.txt), written in Triton's kernel language:
#
#   (a) `ascend_layer_norm_var`:  input [B, S, H] -> y, mean and *variance* per row;
#   (b) `ascend_layer_norm_rstd`: input [A, R] padded to rLengthWithPadding -> y, mean and
#       *rstd* per row.
#
# Both follow Triton tutorial 05's `_layer_norm_fwd_fused` (one program per row, the row in
# one block, statistics in fp32) and take Ascend's `LayerNormConfig` flags `isNoGamma` /
# `isNoBeta` as the constexprs IS_NO_GAMMA / IS_NO_BETA.
#
# Element types come from the signature, one per pointer: x and y share one (fp32, fp16
# or bf16, Ascend's T), gamma and beta may be wider (Ascend's U, "at least the input's
# precision"), e.g. `*fp16,*fp16,*fp32,*fp32,...`. Every element is computed in fp32
# (or in fp64 when gamma/beta are fp64, by Triton's promotion) and rounded once on the
# store.
import triton
import triton.language as tl


@triton.jit
def ascend_layer_norm_var(X, Y, GAMMA, BETA, MEAN, VARIANCE, H, eps,
                          BLOCK_H: tl.constexpr,
                          IS_NO_GAMMA: tl.constexpr, IS_NO_BETA: tl.constexpr):
    """Ascend C LayerNorm, form (a): normalized output, mean and variance.

    Math, per row r of x viewed as [B*S, H] (m = H):
        mean[r]     = sum_h x[r, h] / m
        variance[r] = sum_h (x[r, h] - mean[r])^2 / m          (biased)
        y[r, h]     = (x[r, h] - mean[r]) / sqrt(variance[r] + eps) * gamma[h] + beta[h]
    with the `* gamma[h]` term dropped when IS_NO_GAMMA and the `+ beta[h]` term dropped
    when IS_NO_BETA (GAMMA / BETA are then never read, but must still be passed).

    Mirrors `LayerNorm<T, isReuseSource>(output, outputMean, outputVariance, inputX, gamma,
    beta, epsilon, tiling)`. Ascend scales by 1/m with Muls before ReduceSum and forms
    1/sqrt(var + eps) as Exp(Muls(Ln(var + eps), -0.5)); here the sum is divided by m and
    the reciprocal square root computed directly: the same values up to fp32 rounding.

    Arguments:
        X: [B*S, H] input rows, contiguous (row stride H).
        Y: [B*S, H] output, same dtype as X in Ascend (any float dtype here).
        GAMMA, BETA: [H] affine parameters.
        MEAN, VARIANCE: [B*S] per-row statistics (Ascend: dtype T, like X).
        H: row length (the reduced axis).
        eps: added to the variance before the square root.
        BLOCK_H: power of two >= H.
        IS_NO_GAMMA, IS_NO_BETA: Ascend's isNoGamma / isNoBeta.
    Grid: (B*S,), one program per row.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    X += row * H
    Y += row * H
    x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
    # mean: ReduceSum(x) * (1/m)
    mean = tl.sum(x, axis=0) / H
    # variance: ReduceSum((x - mean)^2) * (1/m); the masked lanes must not count
    xmean = tl.where(mask, x - mean, 0.)
    variance = tl.sum(xmean * xmean, axis=0) / H
    rstd = 1 / tl.sqrt(variance + eps)
    y = xmean * rstd
    if not IS_NO_GAMMA:
        y = y * tl.load(GAMMA + cols, mask=mask)
    if not IS_NO_BETA:
        y = y + tl.load(BETA + cols, mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(VARIANCE + row, variance)
    tl.store(Y + cols, y, mask=mask)


@triton.jit
def ascend_layer_norm_rstd(X, Y, GAMMA, BETA, MEAN, RSTD, R, R_PAD, eps,
                           BLOCK_R: tl.constexpr,
                           IS_NO_GAMMA: tl.constexpr, IS_NO_BETA: tl.constexpr):
    """Ascend C LayerNorm, form (b): normalized output, mean and rstd.

    Math, per row a of x [A, R] (rows R_PAD elements apart):
        mean[a] = sum_{r < R} x[a, r] / R
        var     = sum_{r < R} (x[a, r] - mean[a])^2 / R         (biased)
        rstd[a] = 1 / sqrt(var + eps)
        y[a, r] = (x[a, r] - mean[a]) * rstd[a] * gamma[r] + beta[r]       for r < R
    with the gamma / beta terms dropped when IS_NO_GAMMA / IS_NO_BETA.

    Mirrors `LayerNorm<U, T, isReuseSource, config>(output, outputMean, outputRstd,
    inputX, gamma, beta, epsilon, para, tiling)` with `LayerNormPara{aLength, rLength,
    rLengthWithPadding}` = (A, R, R_PAD). Ascend scales every element by 1/R and sums with
    a pairwise (binary) accumulation so the sum cannot overflow; lnc's reductions already
    accumulate in several lanes combined pairwise, so the sum is written `tl.sum(x) / R`.
    The padding x[a, R..R_PAD-1] (zeros in Ascend, anything here: 1e30, NaN) is masked
    out of every load, and y[a, R..R_PAD-1] is never written.

    Arguments:
        X: [A, R_PAD] input (Ascend's T: fp32, fp16 or bf16).
        Y: [A, R_PAD] output, same layout; only the first R elements of each row are written.
        GAMMA, BETA: [R] (or longer) affine parameters, any float dtype at least as wide as
            X's (Ascend's U), e.g. fp32 with an fp16 X.
        MEAN, RSTD: [A] per-row statistics (fp32 in Ascend).
        R: real row length; R_PAD: row stride (rLengthWithPadding), R_PAD >= R.
        eps: added to the variance before the reciprocal square root.
        BLOCK_R: power of two >= R.
        IS_NO_GAMMA, IS_NO_BETA: Ascend's LayerNormConfig isNoGamma / isNoBeta.
    Grid: (A,), one program per row.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_R)
    mask = cols < R
    X += row * R_PAD
    Y += row * R_PAD
    x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / R
    xmean = tl.where(mask, x - mean, 0.)
    var = tl.sum(xmean * xmean, axis=0) / R
    rstd = tl.rsqrt(var + eps)
    y = xmean * rstd
    if not IS_NO_GAMMA:
        y = y * tl.load(GAMMA + cols, mask=mask)
    if not IS_NO_BETA:
        y = y + tl.load(BETA + cols, mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)
    tl.store(Y + cols, y, mask=mask)
