//! The masked-lane lint: it fires on reductions that read masked-off lanes after an
//! operation that took the neutral element out of them, and is silent on the seed kernels
//! (which put it back with `tl.where`) and on the forms that keep it.

mod common;

use common::*;

const HEADER: &str = "import triton\nimport triton.language as tl\n\n";

/// The rendered warnings of `kernel` in `src` specialized on `sig`.
fn warnings(src: &str, kernel: &str, sig: &str) -> String {
    let jit = lnc::Jit::new();
    let module = jit.module("lint.py", format!("{HEADER}{src}")).unwrap_or_else(|e| panic!("{e}"));
    let diags = module.warnings(kernel, sig).unwrap_or_else(|e| panic!("{e}"));
    lnc_diag::render_all(&diags, module.file())
}

/// The layer-norm forward of the tutorial with the `where` left out: the bug the lint is for.
const FWD_WITHOUT_WHERE: &str = r#"
@triton.jit
def fwd(X, Y, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = x - mean
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
"#;

#[test]
fn the_tutorial_forward_without_where_warns() {
    let text = warnings(FWD_WITHOUT_WHERE, "fwd", "*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,256");
    insta::assert_snapshot!(text);
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    assert!(text.contains("lint.py:22:11"), "the warning points at `tl.sum(_var...)`:\n{text}");
}

const ONE_BLOCK: &str = r#"
@triton.jit
def one_block(X, Var, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=0.)
    mean = tl.sum(x, axis=0) / N
    xc = x - mean
    tl.store(Var, tl.sum(xc * xc, axis=0) / N)

@triton.jit
def one_block_fixed(X, Var, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=0.)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.)
    tl.store(Var, tl.sum(xc * xc, axis=0) / N)

@triton.jit
def one_block_fixed_by_a_second_mask_expression(X, Var, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(cols < N, x - mean, 0.)
    tl.store(Var, tl.sum(xc * xc, axis=0) / N)
"#;

#[test]
fn one_block_variance_warns_without_where_and_not_with_it() {
    let sig = "*fp32,*fp32,i32,64";
    let text = warnings(ONE_BLOCK, "one_block", sig);
    insta::assert_snapshot!(text);
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    assert_eq!(warnings(ONE_BLOCK, "one_block_fixed", sig), "");
    assert_eq!(warnings(ONE_BLOCK, "one_block_fixed_by_a_second_mask_expression", sig), "");
}

const SOFTMAX: &str = r#"
@triton.jit
def softmax_zero_fill(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * N + cols, num / tl.sum(num, axis=0), mask=cols < N)

@triton.jit
def softmax_tutorial(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=-float('inf'))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * N + cols, num / tl.sum(num, axis=0), mask=cols < N)

@triton.jit
def exp_of_zero_is_one(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    tl.store(Y, tl.sum(tl.exp(x), axis=0))

@triton.jit
def max_after_shift(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    tl.store(Y, tl.max(x * 2. + 1., axis=0))
"#;

#[test]
fn softmax_forms() {
    let sig = "*fp32,*fp32,i32,128";
    // Loaded as 0, `exp(0 - max)` is not 0: the denominator counts the padding.
    let text = warnings(SOFTMAX, "softmax_zero_fill", sig);
    insta::assert_snapshot!("softmax_zero_fill", text);
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    // Loaded as -inf, `exp(-inf - max)` is 0, and the max never sees anything but -inf.
    assert_eq!(warnings(SOFTMAX, "softmax_tutorial", sig), "");
    let text = warnings(SOFTMAX, "exp_of_zero_is_one", sig);
    insta::assert_snapshot!("exp_of_zero_is_one", text);
    assert!(text.contains("they hold 1 after this"), "{text}");
    let text = warnings(SOFTMAX, "max_after_shift", sig);
    assert!(text.contains("`tl.max` reads lanes the mask disabled"), "{text}");
    assert!(text.contains("they hold 1 after this"), "{text}");
}

const SILENT: &str = r#"
@triton.jit
def products_keep_zero(X, W, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    w = tl.load(W + cols, mask=cols < N)
    s = tl.program_id(0) * 1.5
    tl.store(Y, tl.sum(x * w * s, axis=0) + tl.sum(x / 3.0, axis=0))

@triton.jit
def unmasked_operand_lanes_are_meaningful(X, Z, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    z = tl.load(Z + cols)
    tl.store(Y, tl.sum(x + z, axis=0))

@triton.jit
def max_of_abs_with_zero_fill(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    tl.store(Y, tl.max(tl.abs(x), axis=0))

@triton.jit
def neutral_fill_chosen_by_the_user(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=1.)
    tl.store(Y, tl.sum(x, axis=0))

@triton.jit
def two_masks_are_not_guessed(X, Y, N, M, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    y = tl.load(X + cols, mask=cols < M, other=0.)
    tl.store(Y, tl.sum(x - y, axis=0))

@triton.jit
def accumulator_with_where(X, Y, N, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.)
        acc += tl.where(cols < N, (x - 1.) * (x - 1.), 0.)
    tl.store(Y, tl.sum(acc, axis=0))
"#;

#[test]
fn forms_that_keep_the_neutral_element_are_silent() {
    for (kernel, sig) in [
        ("products_keep_zero", "*fp32,*fp32,*fp32,i32,64"),
        ("unmasked_operand_lanes_are_meaningful", "*fp32,*fp32,*fp32,i32,64"),
        ("max_of_abs_with_zero_fill", "*fp32,*fp32,i32,64"),
        ("neutral_fill_chosen_by_the_user", "*fp32,*fp32,i32,64"),
        ("two_masks_are_not_guessed", "*fp32,*fp32,i32,i32,64"),
        ("accumulator_with_where", "*fp32,*fp32,i32,64"),
    ] {
        assert_eq!(warnings(SILENT, kernel, sig), "", "{kernel}");
    }
}

const LOOP_AND_BRANCH: &str = r#"
@triton.jit
def accumulator_without_where(X, Y, N, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.)
        acc += (x - 1.) * (x - 1.)
    tl.store(Y, tl.sum(acc, axis=0))

@triton.jit
def one_branch_forgets(X, Y, N, flag, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    if flag > 0:
        v = tl.where(cols < N, x - 2., 0.)
    else:
        v = x - 2.
    tl.store(Y, tl.sum(v, axis=0))

@triton.jit
def int_max_after_negation(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0)
    tl.store(Y, tl.max(-x - 1, axis=0))
"#;

#[test]
fn loops_branches_and_integers() {
    let text = warnings(LOOP_AND_BRANCH, "accumulator_without_where", "*fp32,*fp32,i32,64");
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    assert!(text.contains("the loop or branch carries those lanes"), "{text}");
    let text = warnings(LOOP_AND_BRANCH, "one_branch_forgets", "*fp32,*fp32,i32,i32,64");
    assert_eq!(text.matches("warning:").count(), 1, "{text}");
    insta::assert_snapshot!("one_branch_forgets", text);
    // Integer max: the neutral element is the dtype's minimum, which -0 - 1 is not.
    let text = warnings(LOOP_AND_BRANCH, "int_max_after_negation", "*i32,*i32,i32,64");
    assert!(text.contains("they hold -1 after this"), "{text}");
}

#[test]
fn the_seed_kernels_do_not_warn() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    for dtype in ["fp32", "fp16", "bf16"] {
        for block in [16, 1024, 4096] {
            let t = dtype;
            for (kernel, sig) in [
                ("_layer_norm_fwd_fused", format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{block}")),
                (
                    "_layer_norm_bwd_dx_fused",
                    format!("*{t},*{t},*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,*i32,i32,i32,fp32,64,{block}"),
                ),
                ("_layer_norm_bwd_dwdb", format!("*{t},*{t},*{t},*{t},i32,i32,32,{block}")),
            ] {
                let w = module.warnings(kernel, &sig).unwrap_or_else(|e| panic!("{e}"));
                assert!(w.is_empty(), "{kernel} {sig}: {}", lnc_diag::render_all(&w, module.file()));
                // The compiled kernel carries the same (empty) list.
                if block == 1024 {
                    assert!(module.kernel(kernel, &sig).unwrap().warnings().is_empty());
                }
            }
        }
    }
}

#[test]
fn a_kernel_that_warns_still_compiles_and_runs_and_carries_its_warning() {
    let jit = lnc::Jit::new();
    let module = jit.module("lint.py", format!("{HEADER}{ONE_BLOCK}")).unwrap();
    let k = module.kernel("one_block", "*fp32,*fp32,i32,64").unwrap();
    assert_eq!(k.warnings().len(), 1);
    let rendered = lnc_diag::render_all(k.warnings(), k.file());
    assert!(rendered.contains("lint.py:"), "{rendered}");
    // And the warning is right: the result counts mean² once per disabled lane.
    let n = 37usize;
    let mut r = rng();
    let x = randn(&mut r, n, 3.0, 1.0);
    let mut var = vec![f32::NAN; 1];
    k.launch(1, &lnc::args![&x, &mut var, n as i32]).unwrap();
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let true_var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
    let with_padding = true_var + (64 - n) as f64 * mean * mean / n as f64;
    assert!(((var[0] as f64) - with_padding).abs() < 1e-3 * with_padding, "{} vs {with_padding}", var[0]);
    assert!(((var[0] as f64) - true_var).abs() > 1.0, "the bug is visible: {} vs {true_var}", var[0]);
}
