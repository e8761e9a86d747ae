"""Integer semantics on every integer dtype (int8 … int64, uint8 … uint64): wrapping
arithmetic, C division and remainder, shifts by any amount, signed and unsigned
comparisons, bitwise operations, negation and complement. Each kernel is generic: the
signature picks the dtype, and the operands of each operation share it, so no promotion
happens and every result keeps the dtype of its operands."""

import triton
import triton.language as tl


@triton.jit
def wrap_bitwise(A, B, Out, n, BLOCK: tl.constexpr):
    # + - * wrap around; & | ^, unary - (wraps too: -MIN is MIN, -x on unsigned is 0 - x), ~.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask)
    b = tl.load(B + offs, mask=mask)
    s = a + b
    tl.static_assert(s.dtype == a.dtype)
    tl.static_assert((a * b).dtype == a.dtype)
    tl.static_assert((-a).dtype == a.dtype)
    tl.static_assert((~a).dtype == a.dtype)
    tl.static_assert((a ^ b).dtype == a.dtype)
    tl.store(Out + offs * 8 + 0, s, mask=mask)
    tl.store(Out + offs * 8 + 1, a - b, mask=mask)
    tl.store(Out + offs * 8 + 2, a * b, mask=mask)
    tl.store(Out + offs * 8 + 3, a & b, mask=mask)
    tl.store(Out + offs * 8 + 4, a | b, mask=mask)
    tl.store(Out + offs * 8 + 5, a ^ b, mask=mask)
    tl.store(Out + offs * 8 + 6, -a, mask=mask)
    tl.store(Out + offs * 8 + 7, ~a, mask=mask)


@triton.jit
def div_rem(A, B, Out, n, BLOCK: tl.constexpr):
    # C semantics: `//` truncates toward zero, `%` takes the dividend's sign, MIN // -1
    # wraps to MIN and MIN % -1 is 0. Masked-off lanes divide by 1, never by 0.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=1)
    b = tl.load(B + offs, mask=mask, other=1)
    q = a // b
    tl.static_assert(q.dtype == a.dtype)
    tl.static_assert((a % b).dtype == a.dtype)
    tl.store(Out + offs * 2 + 0, q, mask=mask)
    tl.store(Out + offs * 2 + 1, a % b, mask=mask)


@triton.jit
def shifts(A, S, Out, n, BLOCK: tl.constexpr):
    # The amount has the value's dtype. An amount at least the bit width shifts every bit
    # out: `<<` gives 0, `>>` gives 0 on unsigned and the sign fill (0 or -1) on signed.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask)
    s = tl.load(S + offs, mask=mask)
    tl.static_assert((a << s).dtype == a.dtype)
    tl.static_assert((a >> s).dtype == a.dtype)
    tl.store(Out + offs * 2 + 0, a << s, mask=mask)
    tl.store(Out + offs * 2 + 1, a >> s, mask=mask)


@triton.jit
def compares(A, B, Out, n, BLOCK: tl.constexpr):
    # Comparisons give int1 and compare unsigned dtypes as unsigned; stored as 0 / 1.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask)
    b = tl.load(B + offs, mask=mask)
    lt = a < b
    tl.static_assert(lt.dtype == tl.int1)
    tl.store(Out + offs * 6 + 0, lt, mask=mask)
    tl.store(Out + offs * 6 + 1, a <= b, mask=mask)
    tl.store(Out + offs * 6 + 2, a == b, mask=mask)
    tl.store(Out + offs * 6 + 3, a != b, mask=mask)
    tl.store(Out + offs * 6 + 4, a > b, mask=mask)
    tl.store(Out + offs * 6 + 5, a >= b, mask=mask)


@triton.jit
def scalar_ops(A, B, S, Out, Cmp):
    # The same operations on scalars, one element per program; comparisons stored as int1.
    pid = tl.program_id(0)
    a = tl.load(A + pid)
    b = tl.load(B + pid)
    s = tl.load(S + pid)
    tl.store(Out + pid * 12 + 0, a + b)
    tl.store(Out + pid * 12 + 1, a - b)
    tl.store(Out + pid * 12 + 2, a * b)
    tl.store(Out + pid * 12 + 3, a & b)
    tl.store(Out + pid * 12 + 4, a | b)
    tl.store(Out + pid * 12 + 5, a ^ b)
    tl.store(Out + pid * 12 + 6, -a)
    tl.store(Out + pid * 12 + 7, ~a)
    tl.store(Out + pid * 12 + 8, a // b)
    tl.store(Out + pid * 12 + 9, a % b)
    tl.store(Out + pid * 12 + 10, a << s)
    tl.store(Out + pid * 12 + 11, a >> s)
    tl.store(Cmp + pid * 6 + 0, a < b)
    tl.store(Cmp + pid * 6 + 1, a <= b)
    tl.store(Cmp + pid * 6 + 2, a == b)
    tl.store(Cmp + pid * 6 + 3, a != b)
    tl.store(Cmp + pid * 6 + 4, a > b)
    tl.store(Cmp + pid * 6 + 5, a >= b)


@triton.jit
def bool_arithmetic(X, Out):
    # Four pairs (a, b) of int1 values, from X (0 or 1): arithmetic on one bit, modulo 2,
    # as compiled Triton computes it. Blocks first, then the same on the scalars of the
    # program's pair.
    offs = tl.arange(0, 4)
    a = tl.load(X + offs * 2) != 0
    b = tl.load(X + offs * 2 + 1) != 0
    Out += tl.program_id(0) * 64
    tl.store(Out + offs * 8 + 0, a + b)
    tl.store(Out + offs * 8 + 1, a - b)
    tl.store(Out + offs * 8 + 2, a * b)
    tl.store(Out + offs * 8 + 3, a // b)
    tl.store(Out + offs * 8 + 4, a % b)
    tl.store(Out + offs * 8 + 5, a << b)
    tl.store(Out + offs * 8 + 6, a >> b)
    tl.store(Out + offs * 8 + 7, -a)
    pid = tl.program_id(0)
    sa = tl.load(X + pid * 2) != 0
    sb = tl.load(X + pid * 2 + 1) != 0
    tl.store(Out + 32 + 0, sa + sb)
    tl.store(Out + 32 + 1, sa - sb)
    tl.store(Out + 32 + 2, sa * sb)
    tl.store(Out + 32 + 3, sa // sb)
    tl.store(Out + 32 + 4, sa % sb)
    tl.store(Out + 32 + 5, sa << sb)
    tl.store(Out + 32 + 6, sa >> sb)
    tl.store(Out + 32 + 7, -sa)
