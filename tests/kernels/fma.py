import triton
import triton.language as tl


@triton.jit
def fma_blocks(X, Y, Z, OUT, n, BLOCK: tl.constexpr):
    # Elementwise x * y + z rounded once, on tiles, in the operands' dtype.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m)
    y = tl.load(Y + offs, mask=m)
    z = tl.load(Z + offs, mask=m)
    tl.store(OUT + offs, tl.fma(x, y, z), mask=m)


@triton.jit
def fma_mixed(X, OUT, a, n, BLOCK: tl.constexpr):
    # A scalar runtime factor, a Python int addend and a scalar fma: promoted and broadcast
    # as `x * a + 1` would be.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m)
    s = tl.fma(a, a, 0.5)
    tl.store(OUT + offs, tl.fma(x, a, 1) + s, mask=m)
