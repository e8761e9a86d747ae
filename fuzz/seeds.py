#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets from the repository's kernel files.

    python3 fuzz/seeds.py OUT_DIR [--front-bin PATH]

writes OUT_DIR/{lexer,parser,front}/: the whole kernel files (lexer and parser), and one
file per `@jit` function with the `@jit` helpers it calls and the file's top-level
non-function code (all three targets). The front seeds start with `#sig NAME: ENTRIES`
lines (see `lnc_fuzz::signature_lines`) chosen among the signature literals of the test
suites that have as many entries as the kernel has parameters. With --front-bin (the built
`front` fuzz target), each candidate is tried and up to three that compile through
Cranelift IR are kept, so the seeds reach the back of the pipeline.

The committed corpora were made with this script and then grown and minimized by
`cargo fuzz run` / `cargo fuzz cmin`; rerun it only to reseed from scratch.
"""

import ast
import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")

KERNEL_FILES = sorted(
    glob.glob(f"{ROOT}/examples/kernels/*.py")
    + glob.glob(f"{ROOT}/tests/kernels/*.py")
    + glob.glob(f"{ROOT}/crates/lnc-nn/kernels/*.py")
    + glob.glob(f"{SHARED}/seeds/triton_05_layer_norm.py")
)
SYNTAX_CASES = sorted(glob.glob(f"{ROOT}/crates/lnc-syntax/tests/cases/*"))
# Non-ASCII prose for the lexer (libFuzzer keeps the first -max_len bytes).
TEXT_FILES = sorted(glob.glob(f"{SHARED}/seeds/001_*.txt"))
SIG_SOURCES = sorted(
    glob.glob(f"{ROOT}/tests/tests/*.rs")
    + glob.glob(f"{ROOT}/crates/*/tests/*.rs")
    + glob.glob(f"{ROOT}/crates/*/src/*.rs")
    + [f"{ROOT}/README.md"]
)
MAX_LEN = 4096

TYPE_HOLES = re.compile(r"\{(t|s|u|like|s = T::SIG|t = T::SIG)\}")
VALUE_HOLES = re.compile(r"\{(block|bm|bn|bk|group|block_m|block_h|mode)\}")
SIG_ENTRY = re.compile(r"^(\*?(fp16|bf16|fp32|fp64|i1|i8|i16|i32|i64|u8|u16|u32|u64)(:\d+)?|-?[0-9][0-9.e+-]*|True|False|\w+=\S+)$")


def signature_pool():
    """Every signature literal of the tests, holes filled (types with fp32, sizes with 16)."""
    pool = set()
    for path in SIG_SOURCES:
        text = open(path, encoding="utf-8").read()
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', text):
            s = TYPE_HOLES.sub("fp32", lit)
            s = VALUE_HOLES.sub("16", s)
            s = s.replace("{}", "False")
            if "{" in s or "," not in s and not s.startswith("*"):
                continue
            entries = [e.strip() for e in s.split(",")]
            if entries and all(SIG_ENTRY.match(e) for e in entries) and any(e.startswith("*") for e in entries):
                pool.add(",".join(entries))
                # The same with integer elements, for the integer kernels.
                pool.add(",".join(e.replace("*fp32", "*i32") for e in entries))
    return sorted(pool)


def split_functions(text):
    """(name, source) of every `@jit` function, with the helpers it calls and the header."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines(keepends=True)
    header, funcs = [], {}
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        src = "".join(lines[start : node.end_lineno])
        if isinstance(node, ast.FunctionDef):
            if any("jit" in ast.unparse(d) for d in node.decorator_list):
                called = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                funcs[node.name] = (src, called)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign)) and len(src) < 300:
            header.append(src)
    out = []
    for name, (src, _) in funcs.items():
        # Helpers this function calls, transitively, in file order.
        need, todo = set(), [name]
        while todo:
            n = todo.pop()
            for m in funcs[n][1]:
                if m in funcs and m != name and m not in need:
                    need.add(m)
                    todo.append(m)
        parts = ["".join(header)] + [funcs[h][0] for h in funcs if h in need] + [src]
        out.append((name, "\n\n".join(p.strip("\n") for p in parts if p) + "\n"))
    return out


def param_count(src, name):
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            a = node.args
            return len(a.args), len(a.args) - len(a.defaults)
    return None


def write(directory, data):
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha1(data.encode()).hexdigest()
    with open(os.path.join(directory, digest), "w", encoding="utf-8") as f:
        f.write(data)


def choose_signatures(bin_path, kernels, pool):
    """For each (name, src), the candidate signatures that compile, tried with the fuzz target."""
    chosen = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (name, src) in enumerate(kernels):
            total, required = param_count(src, name)
            cands = [s for s in pool if required <= len(s.split(",")) <= total]
            for j, sig in enumerate(cands):
                p = os.path.join(tmp, f"{i}_{j}")
                with open(p, "w", encoding="utf-8") as f:
                    f.write(f"#sig {name}: {sig}\n{src}")
                files.append(p)
        ok = set()
        for k in range(0, len(files), 500):
            r = subprocess.run(
                [bin_path] + files[k : k + 500],
                env=dict(os.environ, LNC_FUZZ_VERBOSE="1"),
                capture_output=True,
                text=True,
            )
            for m in re.finditer(r"\[lnc-fuzz\] (\w+) \((.*)\): clif: ok", r.stderr):
                ok.add((m.group(1), m.group(2)))
        for name, src in kernels:
            total, required = param_count(src, name)
            cands = [s for s in pool if required <= len(s.split(",")) <= total and (name, s) in ok]
            chosen[(name, src)] = cands[:3]
    return chosen


def main():
    out = sys.argv[1]
    bin_path = sys.argv[sys.argv.index("--front-bin") + 1] if "--front-bin" in sys.argv else None
    kernels = []
    for path in KERNEL_FILES + SYNTAX_CASES:
        text = open(path, encoding="utf-8").read()
        write(f"{out}/lexer", text)
        write(f"{out}/parser", text)
        for name, src in split_functions(text):
            if len(src) <= MAX_LEN:
                kernels.append((name, src))
                write(f"{out}/lexer", src)
                write(f"{out}/parser", src)
    for path in TEXT_FILES:
        write(f"{out}/lexer", open(path, encoding="utf-8").read())
    pool = signature_pool()
    chosen = choose_signatures(bin_path, kernels, pool) if bin_path else {}
    for name, src in kernels:
        sigs = chosen.get((name, src), [])
        head = "".join(f"#sig {name}: {s}\n" for s in sigs)
        write(f"{out}/front", head + src)


if __name__ == "__main__":
    main()
