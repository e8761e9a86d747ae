"""Atomics on scalars and blocks, with and without masks, returning old values, integer and
float, contended by many programs."""

import triton
import triton.language as tl


@triton.jit
def counter(C, Old):
    # Every program of a 2-D grid takes a ticket.
    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    old = tl.atomic_add(C, 1)
    tl.store(Old + pid, old)


@triton.jit
def masked_counter(C, Old, every):
    # A scalar atomic under a scalar mask: only every `every`-th program counts.
    pid = tl.program_id(0)
    old = tl.atomic_add(C, 1, mask=pid % every == 0)
    tl.store(Old + pid, old)


@triton.jit
def block_add(X, V, Old, n, BLOCK: tl.constexpr):
    # Masked block atomic add; lanes past `n` must not touch X.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(V + offs, mask=mask)
    old = tl.atomic_add(X + offs, v, mask=mask)
    tl.store(Old + offs, old, mask=mask)


@triton.jit
def histogram(Idx, W, H, n, bins, BLOCK: tl.constexpr):
    # Contended block atomic adds: many programs, few bins.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # Masked-off lanes would add 1 to the slot past the last bin.
    idx = tl.load(Idx + offs, mask=mask, other=bins)
    w = tl.load(W + offs, mask=mask, other=1)
    tl.atomic_add(H + idx, w, mask=mask)


@triton.jit
def min_max(X, Mx, Mn, OldMx, n, bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    b = offs % bins
    old = tl.atomic_max(Mx + b, x, mask=mask)
    tl.atomic_min(Mn + b, x, mask=mask)
    tl.store(OldMx + offs, old, mask=mask)


@triton.jit
def bit_ops(X, And, Or, Xor, n, bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    b = offs % bins
    tl.atomic_and(And + b, x, mask=mask)
    tl.atomic_or(Or + b, x, mask=mask)
    tl.atomic_xor(Xor + b, x, mask=mask)


@triton.jit
def exchange(Slots, Old, nslots):
    # Every program swaps its id into a shared slot and records what it took out.
    pid = tl.program_id(0)
    old = tl.atomic_xchg(Slots + pid % nslots, pid)
    tl.store(Old + pid, old)


@triton.jit
def block_exchange(X, V, Old, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(V + offs, mask=mask)
    old = tl.atomic_xchg(X + offs, v, mask=mask)
    tl.store(Old + offs, old, mask=mask)


@triton.jit
def cas_block(X, Cmp, Val, Old, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    c = tl.load(Cmp + offs)
    v = tl.load(Val + offs)
    old = tl.atomic_cas(X + offs, c, v)
    tl.store(Old + offs, old)


@triton.jit
def spin_lock(Lock, Counter, Total, n):
    # A critical section of plain loads and stores under a lock built from atomic_cas /
    # atomic_xchg: no increment may be lost.
    pid = tl.program_id(0)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    c = tl.load(Counter)
    tl.store(Counter, c + 1)
    t = tl.load(Total)
    tl.store(Total, t + pid % n)
    tl.atomic_xchg(Lock, 0)


@triton.jit
def first_writer(Flags, Winner, nflags):
    # atomic_cas as a once-flag: exactly one program per flag sees 0.
    pid = tl.program_id(0)
    f = pid % nflags
    old = tl.atomic_cas(Flags + f, 0, pid + 1)
    if old == 0:
        tl.atomic_add(Winner + f, 1)


@triton.jit
def float_accumulate(X, Sum, Mx, Mn, n, BLOCK: tl.constexpr):
    # Float atomics (add is a compare-and-swap loop) on a single address from every lane.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # Masked-off lanes hold values that would show if they took part.
    hi = tl.load(X + offs, mask=mask, other=100.0)
    lo = tl.load(X + offs, mask=mask, other=-100.0)
    tl.atomic_add(Sum + tl.zeros([BLOCK], dtype=tl.int32), hi, mask=mask)
    tl.atomic_max(Mx + offs * 0, hi, mask=mask)
    tl.atomic_min(Mn + offs * 0, lo, mask=mask)


@triton.jit
def scalar_rmw(X, Mx, Mn, Bits, Old, n):
    # Scalar atomics of every kind under a scalar mask: programs past `n` do nothing.
    pid = tl.program_id(0)
    valid = pid < n
    x = tl.load(X + pid, mask=valid, other=0)
    old = tl.atomic_max(Mx, x, mask=valid)
    tl.atomic_min(Mn, x, mask=valid)
    tl.atomic_and(Bits, x, mask=valid)
    tl.atomic_or(Bits + 1, x, mask=valid)
    tl.atomic_xor(Bits + 2, x, mask=valid)
    tl.store(Old + pid, old)


@triton.jit
def publish_and_wait(Flag, Data, Y, value):
    # Program 0 writes Data, then sets Flag; program 1 waits on a volatile load of Flag,
    # then copies Data: it must see the value.
    if tl.program_id(0) == 0:
        tl.store(Data, value)
        tl.atomic_xchg(Flag, 1)
    else:
        while tl.load(Flag, volatile=True) == 0:
            pass
        tl.store(Y, tl.load(Data))


@triton.jit
def fault_while_one_waits_on_a_volatile_flag(Flag, Arrived, Y):
    # Program 0 waits until program 1 is waiting on Flag, then stores past the end of Y
    # without ever setting Flag.
    if tl.program_id(0) == 0:
        while tl.atomic_add(Arrived, 0) == 0:
            pass
        tl.store(Y + 1, 1.0)
        tl.atomic_xchg(Flag, 1)
    else:
        tl.atomic_xchg(Arrived, 1)
        while tl.load(Flag, volatile=True) == 0:
            pass


@triton.jit
def volatile_copy(X, Y, n):
    # Volatile loads of every dtype, masked and not: Y[0] = X[1], Y[1] = X[n] if n < 4.
    tl.store(Y, tl.load(X + 1, volatile=True))
    tl.store(Y + 1, tl.load(X + n, mask=n < 4, other=0, volatile=True))
