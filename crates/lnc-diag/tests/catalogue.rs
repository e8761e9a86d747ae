//! The catalogue of user errors and the error reference generated from it.
//!
//! Every entry names one snapshot test of a rendered diagnostic (the tests live next to
//! the stage that reports the error: `crates/lnc-syntax/tests/errors.rs`,
//! `crates/lnc-front/tests/errors.rs`, `crates/lnc-cli/tests/errors.rs`, ...) and gives
//! the mistake a title and a one-sentence explanation with the fix. `docs/errors.md` is
//! generated from these entries and the snapshots' text; the test fails when it is out of
//! date, and `LNC_BLESS=1 cargo test -p lnc-diag --test catalogue` rewrites it.
//!
//! An entry's id (`syntax-unterminated-string`) is the stage's prefix and the test's name:
//! it is the anchor of the entry in the reference and stays stable as long as the test
//! keeps its name.
//!
//! Every `errors__*.snap` of the catalogued test files must be an entry or be listed in
//! [`NOT_ENTRIES`] with the reason, so a new error test cannot be forgotten here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where a stage's snapshot tests are, and the prefix of its entries' ids.
struct Source {
    prefix: &'static str,
    test_file: &'static str,
    snapshots: &'static str,
    /// Snapshot file names are `{file_prefix}{test name}.snap`.
    file_prefix: &'static str,
}

const SYNTAX: Source = Source {
    prefix: "syntax",
    test_file: "crates/lnc-syntax/tests/errors.rs",
    snapshots: "crates/lnc-syntax/tests/snapshots",
    file_prefix: "errors__",
};
const FRONT: Source = Source {
    prefix: "front",
    test_file: "crates/lnc-front/tests/errors.rs",
    snapshots: "crates/lnc-front/tests/snapshots",
    file_prefix: "errors__",
};
const TILE: Source = Source {
    prefix: "tile",
    test_file: "crates/lnc-tile/tests/decisions.rs",
    snapshots: "crates/lnc-tile/tests/snapshots",
    file_prefix: "decisions__",
};
const CLI: Source = Source {
    prefix: "cli",
    test_file: "crates/lnc-cli/tests/errors.rs",
    snapshots: "crates/lnc-cli/tests/snapshots",
    file_prefix: "errors__",
};

/// The sources whose every `errors__*.snap` must be accounted for.
const CHECKED: [&Source; 3] = [&SYNTAX, &FRONT, &CLI];

/// A section of the reference: the stage of compilation (or use) that reports the errors.
struct Section {
    title: &'static str,
    intro: &'static str,
    entries: &'static [Entry],
}

/// One mistake.
struct Entry {
    source: &'static Source,
    /// The snapshot test's name.
    test: &'static str,
    title: &'static str,
    /// What the mistake is and how to fix it, in one sentence.
    explanation: &'static str,
}

const fn e(
    source: &'static Source,
    test: &'static str,
    title: &'static str,
    explanation: &'static str,
) -> Entry {
    Entry { source, test, title, explanation }
}

/// Snapshots of the checked sources that are not entries of their own, with the reason.
const NOT_ENTRIES: &[(&Source, &str, &str)] = &[
    (&SYNTAX, "errors_from_several_kernels", "shows that each kernel's first syntax error is reported"),
    (&FRONT, "several_errors_are_reported", "shows that one run reports independent errors together"),
    (&FRONT, "incompatible_broadcast_2d", "the 2-D case of `incompatible_broadcast`"),
    (&CLI, "integer_too_large", "the case of `bad_arg_value` with an integer beyond 64 bits"),
    (&CLI, "grid_too_large", "the case of `bad_grid` with a count too large for an axis"),
    (&CLI, "empty_buffer", "the case of `buffer_too_short` with a buffer of no element"),
];

const SECTIONS: &[Section] = &[
    Section {
        title: "Lexing",
        intro: "The file is read as Python: these errors stop before any kernel is parsed.",
        entries: &[
            e(
                &SYNTAX,
                "unterminated_string",
                "Unterminated string",
                "A quoted string must close on the line it starts on; close it, or use a triple-quoted string to span lines.",
            ),
            e(
                &SYNTAX,
                "unterminated_triple_string",
                "Unterminated triple-quoted string",
                "A `\"\"\"` string (often a docstring) runs to the end of the file; close it with the same three quotes.",
            ),
            e(
                &SYNTAX,
                "mixed_tabs_and_spaces",
                "Tabs mixed with spaces in indentation",
                "An indentation that mixes tabs and spaces has no single depth; indent with spaces only.",
            ),
            e(
                &SYNTAX,
                "unindent_mismatch",
                "Dedent to no enclosing level",
                "A line that is indented less than the one before must line up with one of the enclosing blocks.",
            ),
            e(
                &SYNTAX,
                "unexpected_indent",
                "Unexpected indent",
                "Only the lines after one ending in `:` start an indented block; line this one up with the one above.",
            ),
            e(
                &SYNTAX,
                "bad_token",
                "Character that starts no token",
                "Characters such as `$` or `?` are not Python; remove or replace them.",
            ),
            e(
                &SYNTAX,
                "invalid_numeric_literal",
                "Number run into a name",
                "A number directly followed by letters (`12abc`) is neither; separate them with a space or an operator.",
            ),
        ],
    },
    Section {
        title: "Parsing",
        intro: "The `@triton.jit` functions are parsed; each function reports its first syntax error.",
        entries: &[
            e(
                &SYNTAX,
                "missing_colon",
                "Missing `:`",
                "`if`, `for`, `while` and `def` lines end with a colon.",
            ),
            e(
                &SYNTAX,
                "comparison_written_as_assignment",
                "`=` where `==` was meant",
                "A condition compares with `==`; `=` is an assignment statement.",
            ),
            e(
                &SYNTAX,
                "unclosed_paren",
                "Unclosed bracket",
                "Every `(`, `[` and `{` needs its matching closing bracket.",
            ),
            e(
                &SYNTAX,
                "mismatched_bracket",
                "Mismatched brackets",
                "A closing bracket must match the innermost open one; swap or fix them.",
            ),
            e(
                &SYNTAX,
                "expected_expression",
                "Missing operand",
                "An operator needs an expression on both sides (`1 + x`, not `1 + `).",
            ),
            e(
                &SYNTAX,
                "missing_comma_in_call",
                "Missing comma between arguments",
                "Arguments are separated by commas; a comma or an operator is missing between two of them.",
            ),
            e(
                &SYNTAX,
                "positional_after_keyword",
                "Positional argument after a keyword argument",
                "Python passes positional arguments first; move it before the keyword arguments, or name it too.",
            ),
            e(
                &SYNTAX,
                "empty_block",
                "Empty block",
                "The line after one ending in `:` must be indented; write `pass` for an empty body.",
            ),
            e(
                &SYNTAX,
                "variadic_parameters",
                "Variadic kernel parameters",
                "A kernel takes a fixed list of parameters; `*args` and `**kwargs` cannot be specialized, so list them one by one.",
            ),
        ],
    },
    Section {
        title: "Unsupported Python",
        intro: "Valid Python that Triton kernels do not allow; each message says what to write instead.",
        entries: &[
            e(
                &FRONT,
                "break_is_unsupported",
                "`break`",
                "Triton loops have no early exit; put the stop condition in a `while` loop's condition or the rest of the body under an `if`, or mask the lanes of a block.",
            ),
            e(
                &FRONT,
                "continue_is_unsupported",
                "`continue`",
                "Triton loops cannot skip to the next iteration; put the rest of the body under an `if`.",
            ),
            e(
                &FRONT,
                "lambda_is_unsupported",
                "`lambda`",
                "Kernels cannot create functions; write a separate `@triton.jit` function and call it.",
            ),
            e(
                &FRONT,
                "list_comprehension_is_unsupported",
                "List comprehension",
                "Kernels have no lists; compute on a whole block built with `tl.arange`, or unroll a loop with `tl.static_range`.",
            ),
            e(
                &FRONT,
                "nested_function_is_unsupported",
                "Nested `def`",
                "Functions cannot be defined inside a kernel; define it at top level with `@triton.jit` and call it.",
            ),
            e(
                &FRONT,
                "with_is_unsupported",
                "`with` statement",
                "Kernels have no context managers; keep the body and drop the `with` line.",
            ),
            e(
                &FRONT,
                "for_else_is_unsupported",
                "`else` on a loop",
                "Without `break` a loop's `else` block always runs, so write it after the loop instead.",
            ),
            e(
                &SYNTAX,
                "walrus_in_a_kernel",
                "Assignment expression (`:=`)",
                "Kernels do not assign inside expressions; assign in a statement of its own first.",
            ),
            e(
                &FRONT,
                "assign_to_subscript",
                "Assignment to a block element",
                "Blocks are immutable values; build the new block with `tl.where(mask, new, old)`.",
            ),
            e(
                &FRONT,
                "return_in_loop",
                "`return` inside a loop",
                "A kernel cannot leave a loop early; carry the result in loop variables and return after the loop.",
            ),
            e(
                &FRONT,
                "kernel_returns_value",
                "Kernel returning a value",
                "A kernel's results go to memory; store them with `tl.store` (only `@jit` helpers return values).",
            ),
        ],
    },
    Section {
        title: "Names and calls",
        intro: "Names are resolved and calls bound to the parameters of `tl` builtins and `@jit` helpers.",
        entries: &[
            e(
                &FRONT,
                "unknown_name",
                "Unknown name",
                "A kernel sees its parameters, its local variables, the file's `@jit` functions and `tl`, not module-level Python variables; pass the value as a parameter.",
            ),
            e(
                &FRONT,
                "unknown_name_typo",
                "Misspelt name",
                "A name close to a defined one is probably a typo; the message suggests the defined name.",
            ),
            e(
                &FRONT,
                "unknown_tl_function",
                "Unknown `tl` function",
                "The function is not part of `triton.language` as lnc knows it; see the language reference for the supported builtins.",
            ),
            e(
                &FRONT,
                "tl_function_typo",
                "Misspelt `tl` function",
                "A `tl` name close to a builtin is probably a typo; the message suggests the builtin.",
            ),
            e(
                &FRONT,
                "unsupported_tl_function",
                "`tl` function lnc does not implement",
                "Triton has the function but lnc does not implement it yet; the kernel needs rewriting without it.",
            ),
            e(
                &FRONT,
                "volatile_block_load",
                "`volatile` load of a block",
                "A block is read tile by tile in the loops that use it, not at one point of the program, so `volatile=True` is supported on single pointers only; load the flag other programs write through a single pointer.",
            ),
            e(
                &FRONT,
                "too_many_arguments",
                "Too many arguments to a builtin",
                "The call gives more positional arguments than the builtin has parameters; the message shows its signature.",
            ),
            e(
                &FRONT,
                "unknown_keyword",
                "Unknown keyword argument",
                "The builtin has no parameter of that name; use one from the signature the message shows.",
            ),
            e(
                &FRONT,
                "missing_argument",
                "Missing argument",
                "A required argument of the builtin is not given; the message names it.",
            ),
            e(
                &FRONT,
                "jit_call_arity",
                "Wrong number of arguments to a `@jit` function",
                "Call a helper with as many arguments as it has parameters.",
            ),
            e(
                &FRONT,
                "recursion_calling_itself_twice",
                "Recursive `@jit` function",
                "Every call of a `@jit` function is inlined, so a function that calls itself without a compile-time end nests past 32 levels; write the repetition as a loop.",
            ),
            e(
                &FRONT,
                "too_many_inlined_calls",
                "Too many inlined calls",
                "Every call of a `@jit` function is inlined, and helpers that call others several times each multiply them past 16,384 calls in one kernel; call the helpers from a loop or fewer times.",
            ),
            e(
                &FRONT,
                "not_a_range",
                "Loop over something other than a range",
                "Kernels loop over `range`, `tl.range` or `tl.static_range`; loop over indices and pick the element inside.",
            ),
            e(
                &FRONT,
                "unknown_kernel",
                "Unknown kernel (embedding API)",
                "The requested kernel is not a `@jit` function of the file; check the name (the message suggests a close one).",
            ),
        ],
    },
    Section {
        title: "Compile-time values",
        intro: "Block shapes, axes and `tl.constexpr` parameters must be known when the kernel is specialized.",
        entries: &[
            e(
                &FRONT,
                "arange_not_power_of_two",
                "`arange` range not a power of two",
                "Triton blocks have power-of-two sizes; round the block up and mask the extra elements.",
            ),
            e(
                &FRONT,
                "arange_needs_constexpr",
                "`arange` bound known only at run time",
                "`tl.arange` needs compile-time bounds; make the parameter `tl.constexpr` and give its value in the signature.",
            ),
            e(
                &FRONT,
                "shape_needs_constexpr",
                "Block shape known only at run time",
                "Shapes of `tl.zeros`, `tl.full` and friends are compile-time constants; use a `tl.constexpr` parameter.",
            ),
            e(
                &FRONT,
                "shape_not_power_of_two",
                "Block shape not a power of two",
                "Every block dimension is a power of two; round up with `triton.next_power_of_2` on the host and mask.",
            ),
            e(
                &FRONT,
                "axis_needs_constexpr",
                "Reduction axis known only at run time",
                "The axis of a reduction must be a literal or a `tl.constexpr`.",
            ),
            e(
                &FRONT,
                "constexpr_param_gets_runtime_value",
                "Run-time value for a `tl.constexpr` parameter",
                "A helper's `tl.constexpr` parameter must receive a compile-time value; pass a literal or a constexpr, or drop the annotation.",
            ),
            e(
                &FRONT,
                "static_assert_fails",
                "Failed `tl.static_assert`",
                "The assertion is false for the values in the signature; change the values or the kernel.",
            ),
            e(
                &FRONT,
                "static_assert_needs_constexpr",
                "`tl.static_assert` on a run-time value",
                "`tl.static_assert` checks compile-time conditions; use `tl.device_assert` for run-time ones.",
            ),
            e(
                &FRONT,
                "compile_time_division_by_zero",
                "Division by zero at compile time",
                "A constant expression divides by zero for the values in the signature.",
            ),
        ],
    },
    Section {
        title: "Types and shapes",
        intro: "Triton's typing, promotion and broadcasting rules, checked as the kernel is specialized.",
        entries: &[
            e(
                &FRONT,
                "incompatible_broadcast",
                "Shapes that do not broadcast",
                "Shapes are aligned on the right and each pair of sizes must be equal or 1; reshape one operand (`x[:, None]`) or fix the block sizes.",
            ),
            e(
                &FRONT,
                "mask_shape_mismatch",
                "Mask shape mismatch",
                "The mask of a `load` or `store` must broadcast to the pointer block's shape; build both from the same offsets.",
            ),
            e(
                &FRONT,
                "store_value_shape_mismatch",
                "Stored value shape mismatch",
                "The value stored must broadcast to the pointer block's shape.",
            ),
            e(
                &FRONT,
                "axis_out_of_range",
                "Axis out of range",
                "A block of rank r has axes 0 to r-1 (or -r to -1 from the end).",
            ),
            e(
                &FRONT,
                "float_bitwise_and",
                "Bitwise operator on floats",
                "`&`, `|`, `^`, `<<` and `>>` need integers; convert with `.to(tl.int32)`, or bitcast to reinterpret the bits.",
            ),
            e(
                &FRONT,
                "float_floor_division",
                "`//` on floats",
                "Triton defines `//` on integers only; use `/` and round down with `tl.floor`.",
            ),
            e(
                &FRONT,
                "mixed_signedness_division",
                "Division of signed by unsigned",
                "`/`, `//` and `%` need operands of the same signedness; convert one with `.to(...)`.",
            ),
            e(
                &FRONT,
                "math_on_integers",
                "Float math on integers",
                "`tl.exp`, `tl.log`, `tl.sqrt` and friends need floats; convert first with `.to(tl.float32)`.",
            ),
            e(
                &FRONT,
                "unsigned_negative_constant",
                "Negative constant with an unsigned value",
                "A negative literal cannot combine with an unsigned value; convert one of them explicitly.",
            ),
            e(
                &FRONT,
                "constant_out_of_range",
                "Constant out of range for the type",
                "A literal combined with a narrow integer must fit in it; convert the other operand to a wider type first.",
            ),
            e(
                &FRONT,
                "assigned_integer_too_large",
                "Assigned integer too large",
                "A name assigned a number becomes a tensor, as in Triton, and its integer must fit in 64 bits; compute it in a float or in parts.",
            ),
            e(
                &FRONT,
                "pointer_times_int",
                "Arithmetic on a pointer",
                "Pointers support `+` and `-` with integer offsets only.",
            ),
            e(
                &FRONT,
                "pointer_minus_pointer",
                "Subtracting pointers",
                "Subtract the integer offsets the pointers were built from instead.",
            ),
            e(
                &FRONT,
                "pointer_plus_float",
                "Float offset on a pointer",
                "Pointer offsets count elements and must be integers; convert with `.to(tl.int32)`.",
            ),
            e(
                &FRONT,
                "atomic_add_on_bool",
                "Atomic on a bool (or 8-bit) buffer",
                "Atomics work on 32- and 64-bit elements (and `atomic_add` also on float16 and bfloat16); use an int32 or float32 buffer.",
            ),
            e(
                &FRONT,
                "atomic_xor_on_float",
                "Bitwise atomic on floats",
                "`atomic_and`, `atomic_or` and `atomic_xor` need integer elements.",
            ),
            e(
                &FRONT,
                "atomic_max_on_fp16",
                "`atomic_max`/`atomic_min` on float16",
                "Of the atomics only `atomic_add` takes float16 and bfloat16 elements; use a float32 buffer.",
            ),
            e(
                &FRONT,
                "atomic_cas_on_int8",
                "`atomic_cas` on 8-bit elements",
                "`atomic_cas` works on 16-, 32- and 64-bit elements; make the lock an int32.",
            ),
        ],
    },
    Section {
        title: "Variables and control flow",
        intro: "A variable keeps one type through a loop or an `if`, and is defined on every path that uses it.",
        entries: &[
            e(
                &FRONT,
                "loop_carried_type_change",
                "Loop-carried variable changes dtype",
                "A variable carried through a loop must keep its type; initialize it with the final dtype or convert inside the loop.",
            ),
            e(
                &FRONT,
                "loop_carried_shape_change",
                "Loop-carried variable changes shape",
                "A scalar cannot become a block in a loop; initialize it as a block, e.g. with `tl.zeros([BLOCK], dtype=...)`.",
            ),
            e(
                &FRONT,
                "if_branches_disagree",
                "Branches assign different types",
                "Both branches of an `if` must give a variable the same type; convert one with `.to(...)`.",
            ),
            e(
                &FRONT,
                "defined_in_one_branch",
                "Variable defined in one branch only",
                "A variable used after an `if` must be assigned in both branches, or before the `if`.",
            ),
            e(
                &FRONT,
                "defined_in_loop",
                "Variable first defined in a loop",
                "A variable used after a loop must be assigned before it, so that it is carried through it.",
            ),
            e(
                &FRONT,
                "block_condition",
                "`if` on a block",
                "An `if` condition is one scalar; choose per element with `tl.where`, or reduce the block first.",
            ),
        ],
    },
    Section {
        title: "Signatures",
        intro: "A kernel is specialized on a signature in Triton's AOT format, one entry per parameter (`*fp32,i32,1024`).",
        entries: &[
            e(
                &FRONT,
                "signature_wrong_count",
                "Too few signature entries",
                "Give one entry per parameter: a pointer type, a scalar type or, for a `tl.constexpr`, a literal.",
            ),
            e(
                &FRONT,
                "signature_too_many",
                "Too many signature entries",
                "The signature has more entries than the kernel has parameters; remove the extra ones.",
            ),
            e(
                &FRONT,
                "signature_missing_constexpr",
                "No value for a `tl.constexpr` parameter",
                "A `tl.constexpr` parameter without a default needs its value in the signature, e.g. `BLOCK=128`.",
            ),
            e(
                &FRONT,
                "signature_constexpr_given_type",
                "Type given for a `tl.constexpr` parameter",
                "A `tl.constexpr` parameter is specialized on a value, not a type; give a literal.",
            ),
            e(
                &FRONT,
                "signature_unknown_type",
                "Unknown type in the signature",
                "Types are spelled as in Triton: `*fp32`, `*bf16`, `i32`, `u64`, ...",
            ),
            e(
                &FRONT,
                "signature_unknown_name",
                "Signature names no parameter",
                "A `NAME=entry` must name a parameter of the kernel; the message suggests a close one.",
            ),
        ],
    },
    Section {
        title: "Tiling",
        intro: "Limits of the lowering to loops over SIMD tiles.",
        entries: &[e(
            &TILE,
            "pointers_into_different_arguments_are_refused",
            "Pointer chosen between two arguments",
            "Each pointer must derive from one argument (for bounds checks); select between loaded values, or between offsets into one buffer, instead.",
        )],
    },
    Section {
        title: "Command line",
        intro: "`lnc check`, `lnc compile` and `lnc run`: files, kernels, arguments and launches.",
        entries: &[
            e(
                &CLI,
                "missing_source_file",
                "Missing kernel file",
                "The Python file given does not exist; check the path.",
            ),
            e(
                &CLI,
                "unknown_kernel",
                "Unknown kernel",
                "`--kernel` must name a `@jit` function of the file; the message suggests a close name or lists them.",
            ),
            e(
                &CLI,
                "unknown_arg_name",
                "`--arg` for no parameter",
                "`--arg NAME=...` must name a parameter of the kernel; the message suggests a close one and lists them.",
            ),
            e(
                &CLI,
                "missing_arg",
                "Parameter without a value",
                "Every parameter without a default needs `--arg NAME=VALUE`.",
            ),
            e(
                &CLI,
                "bad_arg_value",
                "`--arg` value lnc cannot read",
                "A value is a buffer (`@file.npy`, `@file.npy+K`, `rand:f32:1024`), an integer, a float, True/False, or a string for a `tl.constexpr` parameter.",
            ),
            e(
                &CLI,
                "string_for_a_runtime_parameter",
                "A string for a runtime parameter",
                "A bare word or a quoted text is a string; only a `tl.constexpr` parameter (such as the `ACTIVATION` of Triton's matmul tutorial) can take one.",
            ),
            e(
                &CLI,
                "bad_grid",
                "Bad `--grid`",
                "The grid is one to three non-negative program counts separated by commas.",
            ),
            e(
                &CLI,
                "missing_npy_file",
                "Missing `.npy` file",
                "A buffer argument names an `.npy` file that does not exist; fix the path or generate the buffer (`zeros:f32:1024`).",
            ),
            e(
                &CLI,
                "unreadable_npy_element_type",
                "`.npy` element type lnc cannot pass",
                "Buffers hold bool, integers or floats up to 64 bits, little-endian; save the array with one of those dtypes.",
            ),
            e(
                &CLI,
                "buffer_element_type_mismatch",
                "Buffer dtype differs from the signature",
                "With `--signature` each buffer's dtype must match its pointer type; convert the array or leave the types to the arguments.",
            ),
            e(
                &CLI,
                "float_for_integer_parameter",
                "Float for an integer parameter",
                "A parameter typed as an integer in the signature needs an integer value.",
            ),
            e(
                &CLI,
                "number_for_pointer_parameter",
                "Number for a pointer parameter",
                "A pointer parameter needs a buffer (`@file.npy`), not a literal.",
            ),
            e(
                &CLI,
                "kernel_error_at_run",
                "Buffer dtype the kernel cannot work on",
                "Without `--signature` the `.npy` dtypes make the signature, so a kernel error can come from an array's dtype; save the array in a type the kernel supports.",
            ),
            e(
                &CLI,
                "device_assert_fails",
                "Failed `tl.device_assert`",
                "A run-time assertion was false for some element; the message shows the assertion and the program that failed it.",
            ),
            e(
                &CLI,
                "buffer_too_short",
                "Buffer too short (out-of-bounds access)",
                "A checked launch stops at the first access outside a buffer, naming the parameter, the program and the offset; pass a larger buffer or mask the access.",
            ),
        ],
    },
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn snapshot_path(source: &Source, test: &str) -> PathBuf {
    repo_root().join(source.snapshots).join(format!("{}{test}.snap", source.file_prefix))
}

/// The rendered text of a snapshot: what follows insta's `---` metadata block.
fn snapshot_body(source: &Source, test: &str) -> Result<String, String> {
    let path = snapshot_path(source, test);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    if lines.next() != Some("---") || !lines.by_ref().any(|l| l == "---") {
        return Err(format!("{}: no insta metadata block", path.display()));
    }
    let body: Vec<&str> = lines.collect();
    Ok(body.join("\n").trim_end().to_string())
}

fn id(entry: &Entry) -> String {
    format!("{}-{}", entry.source.prefix, entry.test.replace('_', "-"))
}

/// A heading's GitHub anchor, for the contents list.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The text of `docs/errors.md`.
fn reference() -> Result<String, String> {
    let count: usize = SECTIONS.iter().map(|s| s.entries.len()).sum();
    let mut out = String::new();
    out.push_str("# Error reference\n\n");
    out.push_str(
        "<!-- Generated from the error catalogue in crates/lnc-diag/tests/catalogue.rs and the snapshot\n     \
         tests it names; do not edit. Regenerate: LNC_BLESS=1 cargo test -p lnc-diag --test catalogue -->\n\n",
    );
    out.push_str(&format!(
        "The {count} user errors below are lnc's catalogue of mistakes, by the stage that reports them. \
         Each has a title, what went wrong and the fix, and the message exactly as lnc prints it \
         (file, line, column, caret, labels, notes and a `help:` line where a fix is known). \
         Every message is the snapshot of a test, named under it; the test suite fails when this \
         page and the tests disagree. The anchor of an entry (`#syntax-unterminated-string`) is \
         its stable id.\n\n"
    ));
    for s in SECTIONS {
        out.push_str(&format!("- [{}](#{}) ({})\n", s.title, anchor(s.title), s.entries.len()));
    }
    for s in SECTIONS {
        out.push_str(&format!("\n## {}\n\n{}\n", s.title, s.intro));
        for entry in s.entries {
            let body = snapshot_body(entry.source, entry.test)?;
            out.push_str(&format!(
                "\n<a id=\"{}\"></a>\n### {}\n\n{}\n\n```text\n{body}\n```\n\n<sub>`{}`: `{}`</sub>\n",
                id(entry),
                entry.title,
                entry.explanation,
                entry.source.test_file,
                entry.test
            ));
        }
    }
    Ok(out)
}

#[test]
fn catalogue_is_complete_and_well_formed() {
    let entries: Vec<&Entry> = SECTIONS.iter().flat_map(|s| s.entries).collect();
    assert!(entries.len() >= 40, "the catalogue has {} entries, fewer than 40", entries.len());

    let mut problems = Vec::new();
    let mut ids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for entry in &entries {
        if !ids.insert(id(entry)) {
            problems.push(format!("duplicate entry `{}`", id(entry)));
        }
        if !titles.insert(entry.title) {
            problems.push(format!("duplicate title `{}`", entry.title));
        }
        if !entry.explanation.ends_with('.') || entry.explanation.len() < 20 {
            problems.push(format!("`{}`: the explanation is not a sentence", id(entry)));
        }
        match snapshot_body(entry.source, entry.test) {
            Ok(body) if body.starts_with("error") || body.starts_with("exit code") => {}
            Ok(body) => problems.push(format!("`{}`: the snapshot is not an error:\n{body}", id(entry))),
            Err(e) => problems.push(format!("`{}`: {e}", id(entry))),
        }
    }
    for (source, test, _) in NOT_ENTRIES {
        if !snapshot_path(source, test).exists() {
            problems.push(format!("NOT_ENTRIES lists `{test}`, which has no snapshot"));
        }
    }

    // Every error snapshot of the checked sources is an entry or excused.
    for source in CHECKED {
        let dir = repo_root().join(source.snapshots);
        let files = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for f in files {
            let name = f.unwrap().file_name().to_string_lossy().into_owned();
            let Some(test) = name.strip_prefix("errors__").and_then(|n| n.strip_suffix(".snap")) else {
                continue;
            };
            let listed = entries.iter().any(|e| e.source.prefix == source.prefix && e.test == test)
                || NOT_ENTRIES.iter().any(|(s, t, _)| s.prefix == source.prefix && *t == test);
            if !listed {
                problems.push(format!(
                    "{}/{name} is in no catalogue entry: add one to crates/lnc-diag/tests/catalogue.rs",
                    source.snapshots
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn error_reference_is_up_to_date() {
    let path = repo_root().join("docs/errors.md");
    let want = reference().unwrap_or_else(|e| panic!("cannot build the reference: {e}"));
    if std::env::var_os("LNC_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/errors.md is out of date with the error catalogue and its snapshots; \
         regenerate it with `LNC_BLESS=1 cargo test -p lnc-diag --test catalogue` and review the diff"
    );
}
