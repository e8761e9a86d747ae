# Huawei Ascend C's `LayerNormGradBeta` (../shared/seeds/004_975dd773feec6fda.txt), written
# in Triton's kernel language like tutorial 05's `_layer_norm_bwd_dwdb`.
import triton
import triton.language as tl


@triton.jit
def ascend_layer_norm_grad_beta(RES_FOR_GAMMA, DY, PD_GAMMA, PD_BETA, M, H,
                                BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    """Ascend C LayerNormGradBeta: the gradients of the affine parameters.

    Math, over the M = B*S rows of resForGamma and dy viewed as [M, H]:
        pd_gamma[h] = sum_m dy[m, h] * resForGamma[m, h]
        pd_beta[h]  = sum_m dy[m, h]
    where resForGamma = (x - mean) * rstd is what LayerNormGrad produces. A column
    reduction over all rows: each program owns BLOCK_H columns and walks the rows
    BLOCK_M at a time, accumulating [BLOCK_M, BLOCK_H] fp32 partial sums that it reduces
    along axis 0 at the end.

    Mirrors `LayerNormGradBeta<T, isReuseSource>(outputPdGamma, outputPdBeta,
    resForGamma, inputDy, tiling)`; the element types come from the signature (Ascend's T:
    fp32, fp16 or bf16), the sums are accumulated in fp32 and rounded once on the store.

    Arguments:
        RES_FOR_GAMMA: [M, H] normalized input (x - mean) * rstd.
        DY: [M, H] gradient of the output.
        PD_GAMMA, PD_BETA: [H] outputs.
        M: number of rows (B*S); H: row length.
        BLOCK_M, BLOCK_H: block sizes (powers of two).
    Grid: (cdiv(H, BLOCK_H),).
    """
    pid = tl.program_id(0)
    cols = pid * BLOCK_H + tl.arange(0, BLOCK_H)
    dgamma = tl.zeros((BLOCK_M, BLOCK_H), dtype=tl.float32)
    dbeta = tl.zeros((BLOCK_M, BLOCK_H), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < H)
        offs = rows[:, None] * H + cols[None, :]
        res = tl.load(RES_FOR_GAMMA + offs, mask=mask, other=0.).to(tl.float32)
        dy = tl.load(DY + offs, mask=mask, other=0.).to(tl.float32)
        dgamma += dy * res
        dbeta += dy
    pd_gamma = tl.sum(dgamma, axis=0)
    pd_beta = tl.sum(dbeta, axis=0)
    tl.store(PD_GAMMA + cols, pd_gamma, mask=cols < H)
    tl.store(PD_BETA + cols, pd_beta, mask=cols < H)
