#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Module docstring with a fake kernel inside:

@triton.jit
def not_a_kernel(x):
    return x
"""
from __future__ import annotations

import functools, itertools as it
from typing import (
    Any,
    Callable,  # trailing comment inside brackets
)

import triton
import triton.language as tl

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
else:
    pass
finally:
    DEVICE = "cpu"

CONFIGS = [
    triton.Config({'BLOCK': 128}, num_warps=4),
    triton.Config({"BLOCK": 256},
                  num_warps=8),
]
squares = [i * i for i in range(10) if i % 2]
table = {k: v for k, v in zip("abc", range(3))}
unique = {x for x in squares}
gen = (x for x in squares)
greeting = f"hello {DEVICE!r:>10} {squares[0]:{3}} {{literal}} {table['a']}"
nested = f"{f'{1 + 1}'}"
raw = rb'\d+' + Rb"\w"
path = r'C:\new\table'
long_text = '''It's a "triple" string with \''' escapes
def fake(x):
    return x
'''
joined = 1 + \
    2
numbers = [0x1F, 0o17, 0b101, 1_000, 1e-5, 0., .5, 3j, 1E+10]
ops = 1 << 2 >> 1 ** 2 // 3 @ 4 if False else None
matrix = [[1, 2],
          [3, 4]]
sentinel = ...
lam = lambda x, *a, k=1, **kw: (x, a, k, kw)
walrus = [y := 5, y ** 2]
star, *rest = [1, 2, 3]


def helper(*args, **kwargs):
    """Undecorated host function: never parsed."""
    def inner():
        nonlocal args
        yield from args
    return {**kwargs, "n": len(args)}


@functools.lru_cache(maxsize=None)
def cached(n: int) -> int:
    return n if n < 2 else cached(n - 1) + cached(n - 2)


class Launcher(object):
    """A class with methods, decorators and nested classes."""

    grid = lambda meta: (triton.cdiv(1024, meta['BLOCK']),)

    class Inner:
        pass

    @staticmethod
    def run(x):
        with open("/dev/null") as f, open("/dev/null") as g:
            print(f, g, sep="\t")
        async def co():
            async with x as y:
                await y
            async for z in x:
                pass
        match x:
            case [1, *others] if others:
                pass
            case {"k": v}:
                pass
            case _:
                pass
        return co

    @property
    def value(self): return self._value


@triton.autotune(configs=CONFIGS, key=['N'])
@triton.heuristics({'EVEN': lambda args: args['N'] % args['BLOCK'] == 0})
@triton.jit
def add_kernel(X, Y, Z, N, BLOCK: tl.constexpr = 128, EVEN: tl.constexpr = False):
    """Adds two vectors."""
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask)
    y = tl.load(Y + offs, mask=mask)
    tl.store(Z + offs, x + y, mask=mask)


@jit
def scale(x, factor):
    return x * factor


@lnc.jit(debug=True)
def relu_kernel(X, Y, N,
                BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.)
    tl.store(Y + offs, tl.where(x > 0, x, 0.), mask=offs < N)


@tl.jit
@other_decorator
def tl_kernel(X):
    pass


@not_jit
def not_a_kernel_either(X):
    return [x for x in X]


@triton.jit.something
def attribute_of_jit_is_not_jit(X):
    pass


async def host_coroutine():
    await something()


if __name__ == "__main__":
    for dtype in (torch.float16, torch.float32):
        print(f"{dtype=}")
    else:
        print("done")
    while False: pass
