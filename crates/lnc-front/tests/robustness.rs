//! Lowering never panics, and whatever it accepts passes the verifier: the seed kernels
//! with statements removed, with other element types, and assorted odd kernels.

mod common;

use lnc_diag::SourceFile;

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");

fn check(file: &SourceFile, ast: &lnc_syntax::ast::File, kernel: &str, sig: &lnc_front::Signature) -> bool {
    match lnc_front::lower_kernel(file, ast, kernel, sig) {
        Ok(f) => {
            if let Err(e) = lnc_bir::verify::verify(&f) {
                panic!("{kernel} ({sig}) lowered to invalid IR:\n{e}");
            }
            common::check_spans(&f, file);
            true
        }
        Err(d) => {
            assert!(!d.is_empty());
            // Rendering must not panic either.
            let _ = lnc_diag::render_all(&d, file);
            false
        }
    }
}

#[test]
fn seed_kernels_with_a_statement_removed() {
    let text = std::fs::read_to_string(SEED).unwrap();
    let file = SourceFile::new("seed.py", text);
    let ast = lnc_syntax::parse_file(&file).unwrap();
    let sigs = [
        ("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024"),
        (
            "_layer_norm_bwd_dx_fused",
            "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024",
        ),
        ("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128"),
    ];
    let (mut ok, mut failed) = (0, 0);
    for (kernel, sig) in sigs {
        let idx = ast.functions.iter().position(|f| f.name.name == kernel).unwrap();
        let s = lnc_front::parse_signature(sig, &ast.functions[idx]).unwrap();
        for i in 0..ast.functions[idx].body.len() {
            let mut mutated = ast.clone();
            mutated.functions[idx].body.remove(i);
            if check(&file, &mutated, kernel, &s) { ok += 1 } else { failed += 1 }
        }
    }
    // Removing a statement either leaves a valid kernel or breaks a later use of a name.
    assert!(ok > 10 && failed > 10, "ok {ok}, failed {failed}");
}

#[test]
fn seed_kernels_on_other_types() {
    let text = std::fs::read_to_string(SEED).unwrap();
    let file = SourceFile::new("seed.py", text);
    let ast = lnc_syntax::parse_file(&file).unwrap();
    let sigs = [
        ("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024"),
        (
            "_layer_norm_bwd_dx_fused",
            "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024",
        ),
        ("_layer_norm_bwd_dwdb", "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128"),
    ];
    let ptrs = ["*fp16", "*bf16", "*fp64", "*i8", "*i32", "*i64", "*u8", "*u32", "*i1"];
    let scalars = ["i64", "u32", "fp32", "fp16", "i1", "7", "2.5", "True"];
    let consts = ["1", "16", "3", "0", "-4", "2.0", "False"];
    let mut lowered = 0;
    for (kernel, sig) in sigs {
        let f = ast.functions.iter().find(|f| f.name.name == kernel).unwrap();
        // Every pointer of one element type: the 16-bit float ones must lower (with fp64,
        // `partial_dw` of the dx kernel changes type in a branch, an error in Triton too).
        for p in ptrs {
            let s = lnc_front::parse_signature(&sig.replace("*fp32", p), f).unwrap();
            if check(&file, &ast, kernel, &s) {
                lowered += 1;
            } else {
                assert!(
                    !matches!(p, "*fp16" | "*bf16"),
                    "{kernel} on {p} failed: {}",
                    lnc_diag::render_all(
                        &lnc_front::lower_kernel(&file, &ast, kernel, &s).unwrap_err(),
                        &file
                    )
                );
            }
        }
        // Mixed and odd types: only no panic and valid IR matter.
        for round in 0..ptrs.len() {
            let entries: Vec<&str> = sig
                .split(',')
                .enumerate()
                .map(|(i, e)| {
                    let k = i + round;
                    if e.starts_with('*') {
                        ptrs[k % ptrs.len()]
                    } else if e.starts_with('i') || e.starts_with('f') {
                        scalars[k % scalars.len()]
                    } else {
                        consts[k % consts.len()]
                    }
                })
                .collect();
            if let Ok(s) = lnc_front::parse_signature(&entries.join(","), f) {
                check(&file, &ast, kernel, &s);
            }
        }
    }
    assert!(lowered >= 6, "{lowered}");
}

const ODD: &[&str] = &[
    // Recursion is reported, not a stack overflow.
    "@triton.jit\ndef r(x):\n    return r(x + 1)\n\n@triton.jit\ndef k(X):\n    tl.store(X, r(1))\n",
    "@triton.jit\ndef k(X):\n    while False:\n        pass\n    while True and 0:\n        pass\n",
    "@triton.jit\ndef k(X):\n    for i in range(0):\n        pass\n    for i in tl.static_range(0):\n        pass\n",
    "@triton.jit\ndef k(X):\n    for i in range(1, 2, 0):\n        pass\n",
    "@triton.jit\ndef k(X):\n    x = (1, 2)\n    a, b, c = x\n",
    "@triton.jit\ndef k(X):\n    x = tl.arange(0, 16)[None, None, None, None, None]\n",
    "@triton.jit\ndef k(X):\n    x = tl.zeros((2, 2, 2, 2, 2), dtype=tl.float32)\n",
    "@triton.jit\ndef k(X):\n    x = tl.arange(0, 2**40)\n",
    "@triton.jit\ndef k(X):\n    x = 2 ** 200\n",
    "@triton.jit\ndef k(X):\n    x = tl.load(X)[0]\n",
    "@triton.jit\ndef k(X):\n    x = tl.load(X)\n    y = x.foo\n    z = X.dtype.element_ty.primitive_bitwidth\n",
    "@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X), mask=1.5)\n",
    "@triton.jit\ndef k(X):\n    tl.store(X + tl.arange(0, 4), 1, mask=tl.arange(0, 4)[:, None] < 2)\n",
    "@triton.jit\ndef k(X):\n    x = tl.load(X)\n    if x:\n        x = 1\n    y = x if x else 2\n    tl.store(X, y)\n",
    "@triton.jit\ndef k(X):\n    i = 0\n    while i < 10:\n        i = i + 0.5\n    tl.store(X, i)\n",
    "@triton.jit\ndef k(X):\n    acc = 0\n    for i in range(10):\n        acc = acc + tl.load(X + tl.arange(0, 8))\n    tl.store(X + tl.arange(0, 8), acc)\n",
    "@triton.jit\ndef k(X):\n    t = (tl.load(X), 1)\n    for i in range(3):\n        t = (t[0] + 1.0, t[1])\n    tl.store(X, t[0] + t[1])\n",
    "@triton.jit\ndef k(X):\n    x = tl.sum(3)\n    y = tl.max(tl.load(X), axis=0)\n",
    "@triton.jit\ndef k(X):\n    p = X\n    if tl.program_id(0) > 0:\n        p = X + 1\n    tl.store(p, 1.0)\n",
    "@triton.jit\ndef k(X):\n    x = tl.load(X).to(tl.int64, bitcast=True)\n    y = tl.load(X).to(tl.float16, bitcast=True)\n",
    "@triton.jit\ndef k(X):\n    x = -tl.load(X)\n    y = ~tl.load(X)\n    z = not tl.load(X)\n    w = +X\n",
    "@triton.jit\ndef k(X):\n    tl.atomic_add(X, 1.0)\n    tl.atomic_and(X, 1)\n    tl.atomic_cas(X, 0.0, 1.0, sem='relaxed')\n",
    "@triton.jit\ndef k(X):\n    a = tl.broadcast_to(tl.arange(0, 4)[None, :], 8, 4)\n    b, c = tl.broadcast(tl.arange(0, 4), tl.zeros((2, 4), dtype=tl.int8))\n    d = tl.expand_dims(tl.arange(0, 4), (0, 2))\n    tl.store(X + a, b + c + tl.sum(d))\n",
    "@triton.jit\ndef k(X):\n    if tl.program_id(0) == 0:\n        return\n    elif tl.program_id(0) == 1:\n        tl.store(X, 1.0)\n        return\n    tl.store(X, 2.0)\n",
    "@triton.jit\ndef f(x):\n    if x > 0:\n        return x\n    return 1.5\n\n@triton.jit\ndef k(X):\n    tl.store(X, f(tl.load(X)))\n",
    "@triton.jit\ndef k(X):\n    print('x', tl.load(X))\n    tl.device_assert(tl.load(X) > 0, 'positive')\n    assert tl.program_id(0) >= 0, 'pid'\n    assert 1 == 1\n",
    "@triton.jit\ndef k(X):\n    x = tl.where(tl.arange(0, 4) < 2, X + tl.arange(0, 4), X)\n    tl.store(x, 0.0)\n",
    "@triton.jit\ndef k(X):\n    x: tl.constexpr = 4\n    y: tl.constexpr = tl.load(X)\n",
    "@triton.jit\ndef k(X):\n    del X\n",
    "@triton.jit\ndef k(X):\n    x = [i for i in range(3)]\n",
];

#[test]
fn odd_kernels_never_panic() {
    for (n, body) in ODD.iter().enumerate() {
        let src = format!("import triton\nimport triton.language as tl\n\n{body}");
        let file = SourceFile::new("odd.py", src);
        let ast = match lnc_syntax::parse_file(&file) {
            Ok(a) => a,
            Err(d) => panic!("case {n} does not parse:\n{}", lnc_diag::render_all(&d, &file)),
        };
        let f = ast.functions.iter().find(|f| f.name.name == "k").unwrap();
        for sig in ["*fp32", "*i32", "*fp16", "1"] {
            if let Ok(s) = lnc_front::parse_signature(sig, f) {
                check(&file, &ast, "k", &s);
                if std::env::var("SHOW").is_ok() && sig == "*fp32" {
                    match lnc_front::lower_kernel(&file, &ast, "k", &s) {
                        Ok(f) => {
                            println!("--- case {n}: ok\n{}", lnc_bir::print::print_function(&f))
                        }
                        Err(d) => {
                            println!("--- case {n}: err\n{}", lnc_diag::render_all(&d, &file))
                        }
                    }
                }
            }
        }
    }
}
