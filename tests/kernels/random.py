import triton
import triton.language as tl


# Triton's low-memory dropout tutorial (04), as the tutorial writes it.
@triton.jit
def _seeded_dropout(
    x_ptr,
    output_ptr,
    n_elements,
    p,
    seed,
    BLOCK_SIZE: tl.constexpr,
):
    # compute memory offsets of elements handled by this instance
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # load data from x
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # randomly prune it
    random = tl.rand(seed, offsets)
    x_keep = random > p
    # write-back
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


# The four Philox words, `rand` with 7 rounds and `randn` of 32-bit offsets.
@triton.jit
def words(O0, O1, O2, O3, R, N, n, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a, b, c, d = tl.randint4x(seed, offs)
    tl.store(O0 + offs, a, mask=mask)
    tl.store(O1 + offs, b, mask=mask)
    tl.store(O2 + offs, c, mask=mask)
    tl.store(O3 + offs, d, mask=mask)
    tl.store(R + offs, tl.rand(seed, offs, 7), mask=mask)
    tl.store(N + offs, tl.randn(seed, offs), mask=mask)


# 64-bit offsets (their high word is Philox's second counter word) and `umulhi` of int64.
@triton.jit
def words64(O0, O1, R, n, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    big = offs.to(tl.int64) * 3000000019 - 123456789012
    tl.store(O0 + offs, tl.randint(seed, big), mask=mask)
    u1, u2, u3, u4 = tl.rand4x(seed, big)
    tl.store(O1 + offs, u4, mask=mask)
    tl.store(R + offs, tl.umulhi(big, big * 7 + 5), mask=mask)


# `umulhi` of 32-bit integers, signed (by their bits) and unsigned.
@triton.jit
def umulhi32(X, Y, S, U, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    y = tl.load(Y + offs, mask=mask)
    tl.store(S + offs, tl.umulhi(x, y), mask=mask)
    tl.store(U + offs, tl.math.umulhi(x.to(tl.uint32, bitcast=True), y.to(tl.uint32, bitcast=True)), mask=mask)


# `randn4x` of scalar offsets (loaded: a scalar tensor) with a seed from a `tl.constexpr`.
@triton.jit
def scalar_offset(Offs, O, n, SEED: tl.constexpr):
    for i in range(n):
        a, b, c, d = tl.randn4x(SEED, tl.load(Offs + i), n_rounds=3)
        tl.store(O + 4 * i, a)
        tl.store(O + 4 * i + 1, b)
        tl.store(O + 4 * i + 2, c)
        tl.store(O + 4 * i + 3, d)
