//! Every user error is a diagnostic pointing at the offending source; the rendered text is
//! the expectation.

mod common;

use common::err;

const PRELUDE: &str = "import triton\nimport triton.language as tl\n\n";

/// Renders the errors of lowering `kernel` (defined in `body`) on `sig`.
fn errors(body: &str, kernel: &str, sig: &str) -> String {
    err(&format!("{PRELUDE}{body}"), kernel, sig)
}

macro_rules! error_test {
    ($name:ident, $sig:expr, $src:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(errors($src, "k", $sig));
        }
    };
}

error_test!(
    unknown_name,
    "*fp32",
    r#"
@triton.jit
def k(X):
    tl.store(X, y)
"#
);

error_test!(
    unknown_name_typo,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, count):
    tl.store(X, cuont)
"#
);

error_test!(
    unknown_tl_function,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.foo(X)
"#
);

error_test!(
    volatile_block_load,
    "*i32,*fp32",
    r#"
@triton.jit
def k(Flags, X):
    offs = tl.arange(0, 4)
    while tl.sum(tl.load(Flags + offs, volatile=True), axis=0) < 4:
        pass
    tl.store(X, 1.0)
"#
);

error_test!(
    unsupported_tl_function,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.cumsum(X)
"#
);

error_test!(
    tl_function_typo,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = triton.language.laod(X)
"#
);

error_test!(
    too_many_arguments,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X, None, None, (), "", "", "", False, 1)
"#
);

error_test!(
    unknown_keyword,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X, maks=None)
"#
);

error_test!(
    missing_argument,
    "*fp32",
    r#"
@triton.jit
def k(X):
    tl.store(X)
"#
);

error_test!(
    jit_call_arity,
    "*fp32",
    r#"
@triton.jit
def helper(a, b):
    return a + b

@triton.jit
def k(X):
    tl.store(X, helper(1, 2, 3))
"#
);

error_test!(
    break_is_unsupported,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in range(n):
        break
"#
);

error_test!(
    lambda_is_unsupported,
    "*fp32",
    r#"
@triton.jit
def k(X):
    f = lambda v: v + 1
"#
);

error_test!(
    continue_is_unsupported,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in range(n):
        if i % 2 == 0:
            continue
        tl.store(X + i, 1.0)
"#
);

error_test!(
    list_comprehension_is_unsupported,
    "*fp32",
    r#"
@triton.jit
def k(X):
    xs = [tl.load(X + i) for i in range(4)]
"#
);

error_test!(
    nested_function_is_unsupported,
    "*fp32",
    r#"
@triton.jit
def k(X):
    def twice(v):
        return v * 2
    tl.store(X, twice(tl.load(X)))
"#
);

error_test!(
    for_else_is_unsupported,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in range(n):
        tl.store(X + i, 0.0)
    else:
        tl.store(X, 1.0)
"#
);

error_test!(
    with_is_unsupported,
    "*fp32",
    r#"
@triton.jit
def k(X):
    with open("f") as fh:
        pass
"#
);

error_test!(
    arange_not_power_of_two,
    "*fp32",
    r#"
@triton.jit
def k(X):
    offs = tl.arange(0, 100)
"#
);

error_test!(
    arange_needs_constexpr,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    offs = tl.arange(0, n)
"#
);

error_test!(
    incompatible_broadcast,
    "*fp32",
    r#"
@triton.jit
def k(X):
    a = tl.arange(0, 128)
    b = tl.arange(0, 64)
    c = a + b
"#
);

error_test!(
    incompatible_broadcast_2d,
    "*fp32",
    r#"
@triton.jit
def k(X):
    a = tl.zeros((32, 8), dtype=tl.float32)
    b = tl.zeros((16, 8), dtype=tl.float32)
    c = a * b
"#
);

error_test!(
    mask_shape_mismatch,
    "*fp32",
    r#"
@triton.jit
def k(X):
    offs = tl.arange(0, 128)
    m = tl.arange(0, 64) < 10
    x = tl.load(X + offs, mask=m)
"#
);

error_test!(
    store_value_shape_mismatch,
    "*fp32",
    r#"
@triton.jit
def k(X):
    offs = tl.arange(0, 128)
    tl.store(X + offs, tl.zeros((2, 128), dtype=tl.float32))
"#
);

error_test!(
    shape_needs_constexpr,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    z = tl.zeros((n, 4), dtype=tl.float32)
"#
);

error_test!(
    shape_not_power_of_two,
    "*fp32",
    r#"
@triton.jit
def k(X):
    z = tl.zeros((3, 4), dtype=tl.float32)
"#
);

error_test!(
    axis_needs_constexpr,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, a):
    s = tl.sum(tl.load(X + tl.arange(0, 16)), axis=a)
"#
);

error_test!(
    axis_out_of_range,
    "*fp32",
    r#"
@triton.jit
def k(X):
    s = tl.sum(tl.load(X + tl.arange(0, 16)), axis=1)
"#
);

error_test!(
    float_bitwise_and,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X)
    y = x & 1
"#
);

error_test!(
    pointer_times_int,
    "*fp32",
    r#"
@triton.jit
def k(X):
    y = X * 2
"#
);

error_test!(
    pointer_minus_pointer,
    "*fp32,*fp32",
    r#"
@triton.jit
def k(X, Y):
    d = Y - X
"#
);

error_test!(
    pointer_plus_float,
    "*fp32",
    r#"
@triton.jit
def k(X):
    p = X + 1.5
"#
);

error_test!(
    float_floor_division,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X) // 2
"#
);

error_test!(
    unsigned_negative_constant,
    "*u32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X) + -1
"#
);

error_test!(
    constant_out_of_range,
    "*i8",
    r#"
@triton.jit
def k(X):
    x = tl.load(X) + 300
"#
);

error_test!(
    mixed_signedness_division,
    "*i32,*u32",
    r#"
@triton.jit
def k(X, Y):
    x = tl.load(X) / tl.load(Y)
"#
);

error_test!(
    math_on_integers,
    "*i32",
    r#"
@triton.jit
def k(X):
    x = tl.exp(tl.load(X))
"#
);

error_test!(
    atomic_add_on_bool,
    "*i1",
    r#"
@triton.jit
def k(Flags):
    tl.atomic_add(Flags, 1)
"#
);

error_test!(
    atomic_xor_on_float,
    "*fp32",
    r#"
@triton.jit
def k(X):
    tl.atomic_xor(X, 1.0)
"#
);

error_test!(
    atomic_max_on_fp16,
    "*fp16",
    r#"
@triton.jit
def k(X):
    tl.atomic_max(X + tl.arange(0, 16), 1.0)
"#
);

error_test!(
    atomic_cas_on_int8,
    "*i8",
    r#"
@triton.jit
def k(Lock):
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
"#
);

error_test!(
    loop_carried_type_change,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    acc = tl.zeros((16,), dtype=tl.int32)
    for i in range(n):
        acc += tl.load(X + tl.arange(0, 16))
"#
);

error_test!(
    loop_carried_shape_change,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    acc = tl.load(X)
    for i in range(n):
        acc = tl.load(X + tl.arange(0, 16))
"#
);

error_test!(
    if_branches_disagree,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    if n > 0:
        v = tl.load(X)
    else:
        v = tl.program_id(0)
    tl.store(X, v)
"#
);

error_test!(
    defined_in_one_branch,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    if n > 0:
        v = tl.load(X)
    tl.store(X, v)
"#
);

error_test!(
    defined_in_loop,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in range(n):
        v = tl.load(X + i)
    tl.store(X, v)
"#
);

error_test!(
    block_condition,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.load(X + tl.arange(0, 16))
    if x > 0:
        x = x + 1
"#
);

error_test!(
    return_in_loop,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in range(n):
        if i > 3:
            return
"#
);

error_test!(
    static_assert_fails,
    "*fp32,48",
    r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32")
"#
);

error_test!(
    static_assert_needs_constexpr,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    tl.static_assert(n > 0)
"#
);

error_test!(
    kernel_returns_value,
    "*fp32",
    r#"
@triton.jit
def k(X):
    return tl.load(X)
"#
);

error_test!(
    not_a_range,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n):
    for i in (1, 2, 3):
        pass
"#
);

error_test!(
    constexpr_param_gets_runtime_value,
    "*fp32,i32",
    r#"
@triton.jit
def helper(x, B: tl.constexpr):
    return x

@triton.jit
def k(X, n):
    y = helper(X, n)
"#
);

error_test!(
    assign_to_subscript,
    "*fp32",
    r#"
@triton.jit
def k(X):
    x = tl.zeros((16,), dtype=tl.float32)
    x[0] = 1.0
"#
);

error_test!(
    compile_time_division_by_zero,
    "*fp32,0",
    r#"
@triton.jit
def k(X, B: tl.constexpr):
    y = 4 // B
"#
);

error_test!(
    several_errors_are_reported,
    "*fp32",
    r#"
@triton.jit
def k(X):
    a = tl.arange(0, 100)
    b = undefined_thing + 1
    c = a + 1
    tl.store(X, b)
    d = X * X
"#
);

error_test!(
    signature_wrong_count,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, Y, n):
    pass
"#
);

error_test!(
    signature_unknown_type,
    "*fp33",
    r#"
@triton.jit
def k(X):
    pass
"#
);

error_test!(
    signature_constexpr_given_type,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    pass
"#
);

error_test!(
    signature_unknown_name,
    "*fp32,BLOK=128",
    r#"
@triton.jit
def k(X, BLOCK: tl.constexpr):
    pass
"#
);

error_test!(
    signature_missing_constexpr,
    "*fp32,i32",
    r#"
@triton.jit
def k(X, n, BLOCK: tl.constexpr):
    pass
"#
);

error_test!(
    signature_too_many,
    "*fp32,i32,i32",
    r#"
@triton.jit
def k(X, n):
    pass
"#
);

#[test]
fn unknown_kernel() {
    let file = lnc_diag::SourceFile::new("k.py", format!("{PRELUDE}@triton.jit\ndef kernel(X):\n    pass\n"));
    let ast = lnc_syntax::parse_file(&file).unwrap();
    let sig = lnc_front::Signature { entries: vec![] };
    let d = lnc_front::lower_kernel(&file, &ast, "kernal", &sig).unwrap_err();
    insta::assert_snapshot!(lnc_diag::render_all(&d, &file));
}

error_test!(
    assigned_integer_too_large,
    "*i64",
    r#"
@triton.jit
def k(Out):
    a = 2**70
    tl.store(Out, a)
"#
);

// A recursive function calling itself twice: one diagnostic, at once (it used to expand
// 2³² times before giving up, found by the `front` fuzz target).
error_test!(
    recursion_calling_itself_twice,
    "*fp32",
    r#"
@triton.jit
def _r(x):
    a = _r(x)
    b = _r(x * 2.0)
    return a + b

@triton.jit
def k(X):
    tl.store(X, _r(tl.load(X)))
"#
);

// Twenty functions each calling the next twice would inline 2²⁰ calls.
error_test!(
    too_many_inlined_calls,
    "*fp32",
    r#"
@triton.jit
def _f0(x):
    return _f1(x) + _f1(x)

@triton.jit
def _f1(x):
    return _f2(x) + _f2(x)

@triton.jit
def _f2(x):
    return _f3(x) + _f3(x)

@triton.jit
def _f3(x):
    return _f4(x) + _f4(x)

@triton.jit
def _f4(x):
    return _f5(x) + _f5(x)

@triton.jit
def _f5(x):
    return _f6(x) + _f6(x)

@triton.jit
def _f6(x):
    return _f7(x) + _f7(x)

@triton.jit
def _f7(x):
    return _f8(x) + _f8(x)

@triton.jit
def _f8(x):
    return _f9(x) + _f9(x)

@triton.jit
def _f9(x):
    return _f10(x) + _f10(x)

@triton.jit
def _f10(x):
    return _f11(x) + _f11(x)

@triton.jit
def _f11(x):
    return _f12(x) + _f12(x)

@triton.jit
def _f12(x):
    return _f13(x) + _f13(x)

@triton.jit
def _f13(x):
    return _f14(x) + _f14(x)

@triton.jit
def _f14(x):
    return _f15(x) + _f15(x)

@triton.jit
def _f15(x):
    return _f16(x) + _f16(x)

@triton.jit
def _f16(x):
    return _f17(x) + _f17(x)

@triton.jit
def _f17(x):
    return _f18(x) + _f18(x)

@triton.jit
def _f18(x):
    return _f19(x) + _f19(x)

@triton.jit
def _f19(x):
    return _f20(x) + _f20(x)

@triton.jit
def _f20(x):
    return x

@triton.jit
def k(X):
    tl.store(X, _f0(tl.load(X)))
"#
);
