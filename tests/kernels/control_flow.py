"""Structured control flow: `for` over `range` / `tl.range` / `tl.static_range` with runtime
bounds and negative steps, `while`, `if`/`elif`/`else` on scalars and on constexprs, values
carried out of regions."""

import triton
import triton.language as tl


@triton.jit
def loop_forms(X, Out, lo, hi, step, n, stride):
    # One row of X per program; eight results per program, each from another loop form.
    # The hashes `h * 31 + x` depend on the order of the iterations.
    pid = tl.program_id(0)
    X += pid * stride
    Out += pid * 8
    a = 0
    for i in range(n):
        a += tl.load(X + i)
    tl.store(Out + 0, a)
    b = 0
    for i in range(lo, hi):
        b += tl.load(X + i) * i
    tl.store(Out + 1, b)
    c = 0
    for i in tl.range(lo, hi, step):
        c = c * 31 + tl.load(X + i)
    tl.store(Out + 2, c)
    d = 0
    for i in range(hi - 1, lo - 1, -3):
        d = d * 31 + tl.load(X + i)
    tl.store(Out + 3, d)
    e = 0
    for i in range(hi, lo, -1):
        e = e * 31 + tl.load(X + i - 1)
    tl.store(Out + 4, e)
    f = 0
    for k in tl.static_range(0, 8, 3):
        f = f * 31 + tl.load(X + k)
    for k in tl.static_range(2):
        f = f * 31 + tl.load(X + k + 1)
    tl.store(Out + 5, f)
    count = 0
    for i in tl.range(lo, hi, step, num_stages=2):
        count += 1
    tl.store(Out + 6, count)
    g = 0
    for i in range(n - 1, -1, -step):
        g = g * 31 + tl.load(X + i)
    tl.store(Out + 7, g)


@triton.jit
def runtime_negative_step(X, Out, lo, hi, step):
    # A runtime step of either sign: Python's `range`.
    h = 0
    count = 0
    for i in range(lo, hi, step):
        h = h * 31 + tl.load(X + i)
        count += 1
    tl.store(Out, h)
    tl.store(Out + 1, count)


@triton.jit
def range_edges(Out, lo, hi, step):
    # How many turns, and the last index: ranges whose index past the bound does not fit
    # the index's type.
    count = 0
    last = lo
    for i in range(lo, hi, step):
        count += 1
        last = i
    tl.store(Out, count)
    tl.store(Out + 1, last)


@triton.jit
def collatz(X, Steps, Peak, n):
    pid = tl.program_id(0)
    if pid < n:
        x = tl.load(X + pid).to(tl.int64)
        steps = 0
        peak = x
        while x != 1:
            if x % 2 == 0:
                x = x // 2
            else:
                x = 3 * x + 1
            peak = tl.maximum(peak, x)
            steps += 1
        tl.store(Steps + pid, steps)
        tl.store(Peak + pid, peak)


@triton.jit
def if_chain(X, Y, MODE: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(X + pid)
    if x < -10:
        y = -x * 2
    elif x < 0:
        y = x + 100
    elif x == 0:
        y = 7
    else:
        y = x // 3
    if MODE == 0:
        y = y + 1
    elif MODE == 1:
        y = y * 2
    else:
        y = -y
    if MODE > 5:
        # Folded away: never compiled, so the undefined name is no error.
        y = undefined_name(y)
    tl.store(Y + pid, y)


@triton.jit
def bool_ops(X, Y):
    pid = tl.program_id(0)
    a = tl.load(X + 2 * pid)
    b = tl.load(X + 2 * pid + 1)
    if a > 0 and b > 0:
        r = 1
    elif a > 0 or b > 0:
        r = 2
    elif not (a == b):
        r = 3
    else:
        r = 4
    bigger = a if a > b else b
    tl.store(Y + 3 * pid, r)
    tl.store(Y + 3 * pid + 1, bigger)
    tl.store(Y + 3 * pid + 2, (a < b) == (b > a))


@triton.jit
def row_stats(X, Sum, Max, Count, n, stride, BLOCK: tl.constexpr):
    # Block values carried through a loop over a row (the layer-norm pattern), reduced after.
    row = tl.program_id(0)
    X += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    cnt = tl.zeros([BLOCK], dtype=tl.int32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(X + cols, mask=mask, other=0.0)
        acc += x
        mx = tl.maximum(mx, tl.where(mask, x, float("-inf")))
        cnt += tl.where(mask & (x > 0), 1, 0)
    tl.store(Sum + row, tl.sum(acc, axis=0))
    tl.store(Max + row, tl.max(mx, axis=0))
    tl.store(Count + row, tl.sum(cnt, axis=0))


@triton.jit
def grid_stride(X, Y, n, BLOCK: tl.constexpr):
    # Each program walks the array with a stride of the whole grid.
    start = tl.program_id(0) * BLOCK
    step = tl.num_programs(0) * BLOCK
    for off in range(start, n, step):
        offs = off + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(X + offs, mask=mask)
        tl.store(Y + offs, x * 2 + 1, mask=mask)


@triton.jit
def branches_in_loop(X, Pos, Neg, n):
    row = tl.program_id(0)
    pos = 0
    neg = 0.0
    for i in range(n):
        v = tl.load(X + row * n + i)
        if v > 0:
            pos += 1
        else:
            neg += v
    tl.store(Pos + row, pos)
    tl.store(Neg + row, neg)


@triton.jit
def halve_until_small(X, Y, Iters, n, BLOCK: tl.constexpr):
    # A `while` whose condition reduces a carried block.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    it = 0
    while tl.max(tl.abs(x), axis=0) >= 1.0:
        x = x * 0.5
        it += 1
    tl.store(Y + offs, x, mask=mask)
    tl.store(Iters + pid, it)


@triton.jit
def triangle(X, Out, n):
    # Nested runtime loops, the inner bound depending on the outer induction variable.
    row = tl.program_id(0)
    total = 0
    for i in range(n):
        for j in range(i, n):
            total += tl.load(X + row * n + j) * (i + 1)
    tl.store(Out + row, total)


@triton.jit
def while_with_loop_inside(X, Out, n, limit):
    # `for` inside `while` inside `if`, all carrying values out.
    pid = tl.program_id(0)
    total = 0
    rounds = 0
    if pid % 2 == 0:
        while total < limit:
            for i in range(n):
                total += tl.load(X + i)
            rounds += 1
    else:
        rounds = -1
    tl.store(Out + 2 * pid, total)
    tl.store(Out + 2 * pid + 1, rounds)
