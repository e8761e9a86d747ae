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

/// Converts the `n` elements at `src` into `dst` (nothing when `n <= 0`): `whole` on the
/// two rows as slices, or `each` element by element when a pointer is misaligned (a raw
/// buffer an embedder handed in; JIT code accesses it unaligned too).
///
/// # Safety
/// `src` and `dst` must be valid for `n` elements and not overlap: JIT code passes a
/// kernel argument's row, range-checked under a safe launch, and a scratch buffer of at
/// least `n` elements (the count is clamped to it).
unsafe fn convert_row<S: Copy, D>(
    src: *const S,
    dst: *mut D,
    n: i64,
    whole: impl FnOnce(&[S], &mut [D]),
    each: impl Fn(S) -> D,
) {
    let Some(n) = usize::try_from(n).ok().filter(|&n| n > 0) else { return };
    if src.is_aligned() && dst.is_aligned() {
        // SAFETY: the caller's contract, and both pointers are aligned.
        unsafe { whole(std::slice::from_raw_parts(src, n), std::slice::from_raw_parts_mut(dst, n)) }
    } else {
        for k in 0..n {
            // SAFETY: the caller's contract; `k < n`.
            unsafe { dst.add(k).write_unaligned(each(src.add(k).read_unaligned())) }
        }
    }
}

/// `bf16` bits widened to `f32`, a NaN quieted (as the `half` crate and tiles do).
fn bf16_to_f32(h: u16) -> f32 {
    let b = (h as u32) << 16;
    let nan = (b & 0x7FFF_FFFF) > 0x7F80_0000;
    f32::from_bits(b | (nan as u32) << 22)
}

/// `f32` rounded to `bf16` bits, to nearest even; a NaN keeps its high payload, quieted.
/// Branch-free, so that a loop of it vectorizes.
fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let nan = (b & 0x7FFF_FFFF) > 0x7F80_0000;
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    if nan { (b >> 16) as u16 | 0x40 } else { rounded }
}

/// Widens an fp16 row into fp32 scratch; NaNs come out quieted, as from a tile.
extern "C" fn lnc_row_f16_to_f32(src: *const u16, dst: *mut f32, n: i64) {
    let f16_to_f32 = |h: u16| ::half::f16::from_bits(h).to_f32();
    let whole = |s: &[u16], d: &mut [f32]| in_groups(s, d, simd::widen_f16(), f16_to_f32);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f16_to_f32) }
}

/// Rounds an fp32 scratch row to fp16 (to nearest even) into memory.
extern "C" fn lnc_row_f32_to_f16(src: *const f32, dst: *mut u16, n: i64) {
    let f32_to_f16 = |x: f32| ::half::f16::from_f32(x).to_bits();
    let whole = |s: &[f32], d: &mut [u16]| in_groups(s, d, simd::narrow_f16(), f32_to_f16);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f32_to_f16) }
}

/// Widens a bf16 row into fp32 scratch.
extern "C" fn lnc_row_bf16_to_f32(src: *const u16, dst: *mut f32, n: i64) {
    let whole = |s: &[u16], d: &mut [f32]| in_groups(s, d, simd::widen_bf16(), bf16_to_f32);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, bf16_to_f32) }
}

/// Rounds an fp32 scratch row to bf16 into memory.
extern "C" fn lnc_row_f32_to_bf16(src: *const f32, dst: *mut u16, n: i64) {
    let whole = |s: &[f32], d: &mut [u16]| in_groups(s, d, simd::narrow_bf16(), f32_to_bf16);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f32_to_bf16) }
}

/// A SIMD row conversion: converts the whole groups of eight of `src` into `dst` and
/// returns how many elements that is. Unsafe to call on a CPU without its features.
type Groups<S, D> = unsafe fn(&[S], &mut [D]) -> usize;

/// Converts `src` into `dst`: with `groups` (when this CPU can run it), then the last
/// elements, or all of them, with `scalar`.
fn in_groups<S: Copy, D>(src: &[S], dst: &mut [D], groups: Option<Groups<S, D>>, scalar: impl Fn(S) -> D) {
    // SAFETY: `simd` hands out a conversion only when the CPU has its features.
    let done = groups.map_or(0, |g| unsafe { g(src, dst) });
    for (d, &x) in dst[done..].iter_mut().zip(&src[done..]) {
        *d = scalar(x);
    }
}

/// Row conversions eight lanes per instruction: F16C for fp16, AVX2 for bf16 (rustc does
/// not vectorize the scalar forms' NaN selects), each when the CPU has it. (The `half`
/// crate's slice conversions use F16C too, but one out-of-line call and two array copies
/// per eight lanes: measured at two thirds of a layer norm's time.)
mod simd {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::Groups;

    /// `conversion` when the CPU has `feature` (detected once, then cached by `std`).
    macro_rules! when_detected {
        ($feature:tt, $conversion:ident) => {{
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!($feature) {
                return Some($conversion);
            }
            None
        }};
    }

    pub(super) fn widen_f16() -> Option<Groups<u16, f32>> {
        when_detected!("f16c", widen_f16c)
    }

    pub(super) fn narrow_f16() -> Option<Groups<f32, u16>> {
        when_detected!("f16c", narrow_f16c)
    }

    pub(super) fn widen_bf16() -> Option<Groups<u16, f32>> {
        when_detected!("avx2", widen_avx2)
    }

    pub(super) fn narrow_bf16() -> Option<Groups<f32, u16>> {
        when_detected!("avx2", narrow_avx2)
    }

    /// Converts whole groups of eight; returns how many elements it converted.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,f16c")]
    fn widen_f16c(src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        for k in (0..n).step_by(8) {
            // SAFETY: `k + 8 <= n` is inside both slices; the accesses are unaligned.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(k).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(k), _mm256_cvtph_ps(h));
            }
        }
        n
    }

    /// Converts whole groups of eight, rounding to nearest even whatever the MXCSR says;
    /// returns how many elements it converted.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,f16c")]
    fn narrow_f16c(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        for k in (0..n).step_by(8) {
            // SAFETY: `k + 8 <= n` is inside both slices; the accesses are unaligned.
            unsafe {
                let x = _mm256_loadu_ps(src.as_ptr().add(k));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                _mm_storeu_si128(dst.as_mut_ptr().add(k).cast(), h);
            }
        }
        n
    }

    /// `bf16_to_f32` on whole groups of eight; returns how many elements it converted.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn widen_avx2(src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let (abs, inf, quiet) =
            (_mm256_set1_epi32(0x7FFF_FFFF), _mm256_set1_epi32(0x7F80_0000), _mm256_set1_epi32(0x0040_0000));
        for k in (0..n).step_by(8) {
            // SAFETY: `k + 8 <= n` is inside both slices; the accesses are unaligned.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(k).cast());
                let b = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
                // Signed comparison: both sides are below 2³¹.
                let nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs), inf);
                let x = _mm256_or_si256(b, _mm256_and_si256(nan, quiet));
                _mm256_storeu_si256(dst.as_mut_ptr().add(k).cast(), x);
            }
        }
        n
    }

    /// `f32_to_bf16` on whole groups of eight; returns how many elements it converted.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn narrow_avx2(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let (abs, inf) = (_mm256_set1_epi32(0x7FFF_FFFF), _mm256_set1_epi32(0x7F80_0000));
        let (one, bias, quiet) = (_mm256_set1_epi32(1), _mm256_set1_epi32(0x7FFF), _mm256_set1_epi32(0x40));
        for k in (0..n).step_by(8) {
            // SAFETY: `k + 8 <= n` is inside both slices; the accesses are unaligned.
            unsafe {
                let b = _mm256_loadu_si256(src.as_ptr().add(k).cast());
                let nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs), inf);
                let high = _mm256_srli_epi32::<16>(b);
                let lsb = _mm256_and_si256(high, one);
                let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(_mm256_add_epi32(b, bias), lsb));
                let r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
                // Lanes hold values below 2¹⁶: the unsigned pack keeps them. It packs per
                // 128-bit half, so the two halves' low quarters are gathered after.
                let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(r, r));
                _mm_storeu_si128(dst.as_mut_ptr().add(k).cast(), _mm256_castsi256_si128(packed));
            }
        }
        n
    }
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
        ("lnc_row_f16_to_f32", lnc_row_f16_to_f32 as *const u8),
        ("lnc_row_f32_to_f16", lnc_row_f32_to_f16 as *const u8),
        ("lnc_row_bf16_to_f32", lnc_row_bf16_to_f32 as *const u8),
        ("lnc_row_f32_to_bf16", lnc_row_f32_to_bf16 as *const u8),
    ]
}
