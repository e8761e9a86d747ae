"""Assigned numbers are tensors (`tests/tests/language_assign.rs`).

Triton's code generator converts every number a name is assigned into a scalar tensor of
the number's literal type (`int32`, else `uint32`/`int64`/`uint64`; `float32`; `int1`), so
arithmetic on an assigned name follows tensor semantics (C division, wrapping, `float32`
rounding after each operation, strong promotion) while the same literals written inline
fold with Python's. The expected values come from Triton's interpreter.
"""
import triton
import triton.language as tl


@triton.jit
def assign_int(Out):
    a = -7
    tl.store(Out + 0, a // 2)  # int32: C division, -3 (Python: -4)
    tl.store(Out + 1, a % 2)  # -1 (Python: 1)
    b = 2147483647
    tl.store(Out + 2, (b + 1) // 65536)  # int32 wraps: -32768
    tl.store(Out + 3, -7 // 2)  # literals fold with Python's rules: -4
    tl.store(Out + 4, -7 % 2)  # 1
    c = 7
    tl.store(Out + 5, c // -2)  # -3
    tl.store(Out + 6, c % -2)  # 1 (Python: -1)
    d = 3000000000
    tl.store(Out + 7, d + d)  # uint32 wraps
    e = 2**40
    tl.store(Out + 8, e * 4)  # int64
    f = True
    tl.store(Out + 9, f + f)  # int1 + int1 wraps to 0
    g = 1 / 2
    tl.store(Out + 10, (g * 4).to(tl.int64))  # 1 / 2 folds to 0.5 before the assignment
    h = 65536
    tl.store(Out + 11, h * h)  # int32 wraps to 0
    tl.store(Out + 12, 65536 * 65536)  # Python: 4294967296
    m = -7
    m += 0
    tl.store(Out + 13, m // 2)  # augmented assignment: still an int32 tensor


@triton.jit
def assign_float(Out, X16, Out16):
    a = 2.0
    tl.store(Out + 0, a.to(tl.float32))
    b = 0.1
    tl.store(Out + 1, b * 3.0)
    c = 1e-3
    tl.store(Out + 2, c * c * 1000.0)  # rounded to float32 after each product
    tl.store(Out + 3, 1e-3 * 1e-3 * 1000.0)  # Python doubles, rounded once when stored
    k = 16777217.0
    tl.store(Out + 4, k)
    m = 3
    tl.store(Out + 5, m / 2)
    tl.store(Out + 6, m.to(tl.float16).to(tl.float32) / 4)
    x = tl.load(X16 + tl.arange(0, 4))
    s = 1.5
    tl.store(Out + 8 + tl.arange(0, 4), x * s)  # float32 tensor: fp16 * fp32 is fp32
    tl.store(Out16 + tl.arange(0, 4), x * 1.5)  # a literal is weak: fp16
    t = 0.1
    tl.store(Out + 12, (t + 0.2) - 0.3)  # float32 arithmetic
    tl.store(Out + 13, (0.1 + 0.2) - 0.3)  # Python double arithmetic, then float32


@triton.jit
def assign_loop(Out, X16, n):
    acc = 0.0
    for i in range(0, n):
        acc += tl.load(X16 + i)  # float32 + fp16: the accumulator stays float32
    tl.store(Out + 0, acc)
    k = 0
    for i in range(0, n):
        k += 3
    tl.store(Out + 1, k.to(tl.float32))
    r = 1.0
    for i in range(0, n):
        r = r * 0.5
    tl.store(Out + 2, r)


@triton.jit
def assign_tuple(Out):
    # Triton's compiler converts each element of an assigned tuple (`_sanitize_target_value`);
    # its interpreter leaves tuples of numbers alone, so this kernel only runs compiled.
    p, q = -9, 4
    tl.store(Out + 0, p // q)  # int32: -2 (Python: -3)
    t = (7, -2)
    tl.store(Out + 1, t[0] % t[1])  # 1 (Python: -1)


@triton.jit
def assign_block_size(Out, BLOCK: tl.constexpr):
    # lnc extension: an assigned number known while compiling may be used where Triton
    # requires a tl.constexpr (Triton's compiler rejects this kernel).
    B2 = BLOCK * 2
    B4 = B2 * 2
    offs = tl.arange(0, B4)
    z = tl.zeros([B4], dtype=tl.int32) + B2
    big = B2 > 4
    if big:
        z = z + 1
    tl.store(Out + offs, z + offs)
