//! Rust functions that JIT code calls: math Cranelift has no instruction for, and
//! `device_print`. They are registered as JIT symbols under their Rust names.

use std::cell::RefCell;
use std::fmt::Write;
use std::io::Write as _;

use lnc_lir::UnOp;

macro_rules! unary_helpers {
    ($($name:ident: $t:ty => $method:ident;)*) => {
        $(extern "C" fn $name(x: $t) -> $t { x.$method() })*
    };
}

unary_helpers! {
    lnc_exp_f32: f32 => exp;
    lnc_exp_f64: f64 => exp;
    lnc_exp2_f32: f32 => exp2;
    lnc_exp2_f64: f64 => exp2;
    lnc_log_f32: f32 => ln;
    lnc_log_f64: f64 => ln;
    lnc_log2_f32: f32 => log2;
    lnc_log2_f64: f64 => log2;
    lnc_sin_f32: f32 => sin;
    lnc_sin_f64: f64 => sin;
    lnc_cos_f32: f32 => cos;
    lnc_cos_f64: f64 => cos;
}

extern "C" fn lnc_pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

extern "C" fn lnc_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

extern "C" fn lnc_fmod_f32(x: f32, y: f32) -> f32 {
    x % y
}

extern "C" fn lnc_fmod_f64(x: f64, y: f64) -> f64 {
    x % y
}

/// The helper computing a unary math function, by float width.
pub(crate) fn unary(op: UnOp, bits64: bool) -> Option<&'static str> {
    Some(match (op, bits64) {
        (UnOp::Exp, false) => "lnc_exp_f32",
        (UnOp::Exp, true) => "lnc_exp_f64",
        (UnOp::Exp2, false) => "lnc_exp2_f32",
        (UnOp::Exp2, true) => "lnc_exp2_f64",
        (UnOp::Log, false) => "lnc_log_f32",
        (UnOp::Log, true) => "lnc_log_f64",
        (UnOp::Log2, false) => "lnc_log2_f32",
        (UnOp::Log2, true) => "lnc_log2_f64",
        (UnOp::Sin, false) => "lnc_sin_f32",
        (UnOp::Sin, true) => "lnc_sin_f64",
        (UnOp::Cos, false) => "lnc_cos_f32",
        (UnOp::Cos, true) => "lnc_cos_f64",
        _ => return None,
    })
}

thread_local! {
    /// The line `device_print` is building on this thread; printed whole so that lines
    /// of concurrent programs do not interleave.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Starts a line: `pid (x, y, z) prefix`.
extern "C" fn lnc_print_begin(pid: *const u32, prefix: *const u8, len: usize) {
    // SAFETY: JIT code passes the kernel's pid array and a string of its data section.
    let (pid, prefix) =
        unsafe { (std::slice::from_raw_parts(pid, 3), std::slice::from_raw_parts(prefix, len)) };
    LINE.with_borrow_mut(|line| {
        line.clear();
        let _ = write!(line, "pid ({}, {}, {}) {}", pid[0], pid[1], pid[2], String::from_utf8_lossy(prefix));
    });
}

/// Punctuation between values: 0 a space, 1 `[`, 2 `, `, 3 `]`.
extern "C" fn lnc_print_sep(kind: u32) {
    let sep = match kind {
        0 => " ",
        1 => " [",
        2 => ", ",
        _ => "]",
    };
    LINE.with_borrow_mut(|line| line.push_str(sep));
}

extern "C" fn lnc_print_int(v: i64) {
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_uint(v: u64) {
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_float(v: f64) {
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_end() {
    LINE.with_borrow_mut(|line| {
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        line.clear();
    });
}

/// Every helper by name, for the JIT's symbol table.
pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("lnc_exp_f32", lnc_exp_f32 as *const u8),
        ("lnc_exp_f64", lnc_exp_f64 as *const u8),
        ("lnc_exp2_f32", lnc_exp2_f32 as *const u8),
        ("lnc_exp2_f64", lnc_exp2_f64 as *const u8),
        ("lnc_log_f32", lnc_log_f32 as *const u8),
        ("lnc_log_f64", lnc_log_f64 as *const u8),
        ("lnc_log2_f32", lnc_log2_f32 as *const u8),
        ("lnc_log2_f64", lnc_log2_f64 as *const u8),
        ("lnc_sin_f32", lnc_sin_f32 as *const u8),
        ("lnc_sin_f64", lnc_sin_f64 as *const u8),
        ("lnc_cos_f32", lnc_cos_f32 as *const u8),
        ("lnc_cos_f64", lnc_cos_f64 as *const u8),
        ("lnc_pow_f32", lnc_pow_f32 as *const u8),
        ("lnc_pow_f64", lnc_pow_f64 as *const u8),
        ("lnc_fmod_f32", lnc_fmod_f32 as *const u8),
        ("lnc_fmod_f64", lnc_fmod_f64 as *const u8),
        ("lnc_print_begin", lnc_print_begin as *const u8),
        ("lnc_print_sep", lnc_print_sep as *const u8),
        ("lnc_print_int", lnc_print_int as *const u8),
        ("lnc_print_uint", lnc_print_uint as *const u8),
        ("lnc_print_float", lnc_print_float as *const u8),
        ("lnc_print_end", lnc_print_end as *const u8),
    ]
}
