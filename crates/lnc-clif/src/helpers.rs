//! Rust functions that JIT code calls: math Cranelift has no instruction for, and
//! `device_print`. They are registered as JIT symbols under their Rust names.

use std::cell::RefCell;
use std::fmt::Write;
use std::io::Write as _;

use lnc_lir::UnOp;

macro_rules! unary_helpers {
    ($($name:ident: $t:ty => $method:ident;)*) => {
        $(extern "C" fn $name(x: $t) -> $t {
            lnc_runtime::clear_upper_vector_state();
            x.$method()
        })*
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
    lnc_runtime::clear_upper_vector_state();
    x.powf(y)
}

extern "C" fn lnc_pow_f64(x: f64, y: f64) -> f64 {
    lnc_runtime::clear_upper_vector_state();
    x.powf(y)
}

extern "C" fn lnc_fmod_f32(x: f32, y: f32) -> f32 {
    lnc_runtime::clear_upper_vector_state();
    x % y
}

extern "C" fn lnc_fmod_f64(x: f64, y: f64) -> f64 {
    lnc_runtime::clear_upper_vector_state();
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
    lnc_runtime::clear_upper_vector_state();
    // SAFETY: JIT code passes a copy of the current program's pid (three u32 in a stack
    // slot) and a string of its data section.
    let (pid, prefix) =
        unsafe { (std::slice::from_raw_parts(pid, 3), std::slice::from_raw_parts(prefix, len)) };
    LINE.with_borrow_mut(|line| {
        line.clear();
        let _ = write!(line, "pid ({}, {}, {}) {}", pid[0], pid[1], pid[2], String::from_utf8_lossy(prefix));
    });
}

/// Punctuation between values: 0 a space, 1 `[`, 2 `, `, 3 `]`.
extern "C" fn lnc_print_sep(kind: u32) {
    lnc_runtime::clear_upper_vector_state();
    let sep = match kind {
        0 => " ",
        1 => " [",
        2 => ", ",
        _ => "]",
    };
    LINE.with_borrow_mut(|line| line.push_str(sep));
}

extern "C" fn lnc_print_int(v: i64) {
    lnc_runtime::clear_upper_vector_state();
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_uint(v: u64) {
    lnc_runtime::clear_upper_vector_state();
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_float(v: f64) {
    lnc_runtime::clear_upper_vector_state();
    LINE.with_borrow_mut(|line| {
        let _ = write!(line, "{v}");
    });
}

extern "C" fn lnc_print_end() {
    lnc_runtime::clear_upper_vector_state();
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
    lnc_runtime::clear_upper_vector_state();
    let f16_to_f32 = |h: u16| ::half::f16::from_bits(h).to_f32();
    let whole = |s: &[u16], d: &mut [f32]| in_groups(s, d, simd::widen_f16(), f16_to_f32);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f16_to_f32) }
}

/// Rounds an fp32 scratch row to fp16 (to nearest even) into memory; `stream` non-zero:
/// whole groups with non-temporal stores where `dst` is 16-byte aligned (lnc-tile's
/// `stream` decided that the launch writes more than the caches keep).
extern "C" fn lnc_row_f32_to_f16(src: *const f32, dst: *mut u16, n: i64, stream: i64) {
    lnc_runtime::clear_upper_vector_state();
    let f32_to_f16 = |x: f32| ::half::f16::from_f32(x).to_bits();
    let whole = |s: &[f32], d: &mut [u16]| in_groups(s, d, simd::narrow_f16(stream != 0), f32_to_f16);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f32_to_f16) }
}

/// Widens a bf16 row into fp32 scratch.
extern "C" fn lnc_row_bf16_to_f32(src: *const u16, dst: *mut f32, n: i64) {
    lnc_runtime::clear_upper_vector_state();
    let whole = |s: &[u16], d: &mut [f32]| in_groups(s, d, simd::widen_bf16(), bf16_to_f32);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, bf16_to_f32) }
}

/// Rounds an fp32 scratch row to bf16 into memory; `stream` as for fp16.
extern "C" fn lnc_row_f32_to_bf16(src: *const f32, dst: *mut u16, n: i64, stream: i64) {
    lnc_runtime::clear_upper_vector_state();
    let whole = |s: &[f32], d: &mut [u16]| in_groups(s, d, simd::narrow_bf16(stream != 0), f32_to_bf16);
    // SAFETY: see `convert_row`.
    unsafe { convert_row(src, dst, n, whole, f32_to_bf16) }
}

/// A SIMD row conversion: converts a prefix of `src` into `dst` (its whole groups of
/// eight, or all of it with masks) and returns how many elements that is; the caller
/// converts the rest. Unsafe to call on a CPU without its features.
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

/// Row conversions sixteen lanes per instruction with AVX-512, else eight: F16C for fp16,
/// AVX2 for bf16 (rustc does not vectorize the scalar forms' NaN selects), each when the
/// CPU has it. (The `half`
/// crate's slice conversions use F16C too, but one out-of-line call and two array copies
/// per eight lanes: measured at two thirds of a layer norm's time.)
mod simd {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::Groups;

    /// The first of `conversions` whose features the CPU has (detected once, then cached
    /// by `std`).
    macro_rules! first_detected {
        ($(($($feature:tt),+) => $conversion:expr),+ $(,)?) => {{
            $(
                #[cfg(target_arch = "x86_64")]
                if $(std::arch::is_x86_feature_detected!($feature))&&+ {
                    return Some($conversion);
                }
            )+
            None
        }};
    }

    /// Every conversion of `conversions` this CPU can run, by name (for the tests, which
    /// check each against the scalar one whichever the helpers pick).
    #[cfg(test)]
    macro_rules! all_detected {
        ($(($($feature:tt),+) => $conversion:expr),+ $(,)?) => {{
            #[allow(unused_mut)]
            let mut v: Vec<(&'static str, _)> = Vec::new();
            $(
                #[cfg(target_arch = "x86_64")]
                if $(std::arch::is_x86_feature_detected!($feature))&&+ {
                    v.push((stringify!($conversion), $conversion as _));
                }
            )+
            v
        }};
    }

    /// The conversions of each direction, fastest first. AVX-512 converts sixteen lanes
    /// per instruction and masks the last partial group, so no element is left to the
    /// scalar loop.
    macro_rules! widen_f16s {
        ($m:ident) => { $m!(("avx512f", "avx512bw", "avx512vl") => widen_f16_avx512, ("f16c") => widen_f16c) };
    }
    macro_rules! narrow_f16s {
        ($m:ident, $nt:literal) => {
            $m!(("avx512f", "avx512bw", "avx512vl") => narrow_f16_avx512::<$nt>, ("f16c") => narrow_f16c::<$nt>)
        };
    }
    macro_rules! widen_bf16s {
        ($m:ident) => { $m!(("avx512f", "avx512bw", "avx512vl") => widen_bf16_avx512, ("avx2") => widen_avx2) };
    }
    macro_rules! narrow_bf16s {
        ($m:ident, $nt:literal) => {
            $m!(
                ("avx512f", "avx512bw", "avx512vl", "avx512bf16") => narrow_bf16_avx512bf16::<$nt>,
                ("avx512f", "avx512bw", "avx512vl") => narrow_bf16_avx512::<$nt>,
                ("avx2") => narrow_avx2::<$nt>
            )
        };
    }

    pub(super) fn widen_f16() -> Option<Groups<u16, f32>> {
        widen_f16s!(first_detected)
    }

    /// `stream`: the conversion that stores whole groups non-temporally when the row is
    /// 16-byte aligned.
    pub(super) fn narrow_f16(stream: bool) -> Option<Groups<f32, u16>> {
        if stream { narrow_f16s!(first_detected, true) } else { narrow_f16s!(first_detected, false) }
    }

    pub(super) fn widen_bf16() -> Option<Groups<u16, f32>> {
        widen_bf16s!(first_detected)
    }

    pub(super) fn narrow_bf16(stream: bool) -> Option<Groups<f32, u16>> {
        if stream { narrow_bf16s!(first_detected, true) } else { narrow_bf16s!(first_detected, false) }
    }

    #[cfg(test)]
    pub(super) fn all_widen_f16() -> Vec<(&'static str, Groups<u16, f32>)> {
        widen_f16s!(all_detected)
    }

    #[cfg(test)]
    pub(super) fn all_narrow_f16() -> Vec<(&'static str, Groups<f32, u16>)> {
        let mut v = narrow_f16s!(all_detected, false);
        v.extend(narrow_f16s!(all_detected, true));
        v
    }

    #[cfg(test)]
    pub(super) fn all_widen_bf16() -> Vec<(&'static str, Groups<u16, f32>)> {
        widen_bf16s!(all_detected)
    }

    #[cfg(test)]
    pub(super) fn all_narrow_bf16() -> Vec<(&'static str, Groups<f32, u16>)> {
        let mut v = narrow_bf16s!(all_detected, false);
        v.extend(narrow_bf16s!(all_detected, true));
        v
    }

    /// Stores the eight halves `h` at `p`: non-temporally when `nt` (`p` then 16-byte
    /// aligned), so that the line is written without first being read.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse2")]
    #[inline]
    unsafe fn put_8(p: *mut u16, h: __m128i, nt: bool) {
        // SAFETY: the caller's: `p` is valid for eight elements, aligned when `nt`.
        unsafe { if nt { _mm_stream_si128(p.cast(), h) } else { _mm_storeu_si128(p.cast(), h) } }
    }

    /// Stores the sixteen halves `h` at `p` as [`put_8`] does (two 16-byte halves when
    /// `nt`: the row is 16-byte aligned, not always 32).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn put_16(p: *mut u16, h: __m256i, nt: bool) {
        // SAFETY: the caller's: `p` is valid for sixteen elements, aligned when `nt`.
        unsafe {
            if nt {
                _mm_stream_si128(p.cast(), _mm256_castsi256_si128(h));
                _mm_stream_si128(p.add(8).cast(), _mm256_extracti128_si256::<1>(h));
            } else {
                _mm256_storeu_si256(p.cast(), h)
            }
        }
    }

    /// Whether a conversion of stream mode `NT` stores to `dst` non-temporally: only when
    /// aligned, so every whole group (16 or 32 bytes from the start) is too.
    fn streams<const NT: bool>(dst: *const u16) -> bool {
        NT && dst.addr().is_multiple_of(16)
    }

    /// Calls `group(k)` for every whole group of sixteen lanes `k..k + 16` of `0..n`, then
    /// `last(k, mask)` for the partial group left, if any, `mask` enabling its lanes.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn by_sixteen(n: usize, mut group: impl FnMut(usize), last: impl FnOnce(usize, u16)) {
        let mut k = 0;
        while k + 16 <= n {
            group(k);
            k += 16;
        }
        if k < n {
            last(k, ((1u32 << (n - k)) - 1) as u16);
        }
    }

    /// Converts all of `src` (up to `dst`'s length), sixteen lanes at a time; returns how
    /// many elements that is.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn widen_f16_avx512(src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len());
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        by_sixteen(
            n,
            // SAFETY: lanes `k..k + 16` are inside both slices; the accesses are unaligned.
            |k| unsafe {
                let h = _mm256_loadu_si256(src.add(k).cast());
                _mm512_storeu_ps(dst.add(k), _mm512_cvtph_ps(h));
            },
            // SAFETY: the same, for the lanes `m` enables.
            |k, m| unsafe {
                let h = _mm256_maskz_loadu_epi16(m, src.add(k).cast());
                _mm512_mask_storeu_ps(dst.add(k), m, _mm512_cvtph_ps(h));
            },
        );
        n
    }

    /// Rounds all of `src` (up to `dst`'s length) to nearest even whatever the MXCSR says,
    /// sixteen lanes at a time; returns how many elements that is.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn narrow_f16_avx512<const NT: bool>(src: &[f32], dst: &mut [u16]) -> usize {
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        let n = src.len().min(dst.len());
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        let nt = streams::<NT>(dst);
        by_sixteen(
            n,
            // SAFETY: lanes `k..k + 16` are inside both slices; aligned when `nt`.
            |k| unsafe {
                let x = _mm512_loadu_ps(src.add(k));
                put_16(dst.add(k), _mm512_cvtps_ph::<NEAREST>(x), nt);
            },
            // SAFETY: the same, for the lanes `m` enables.
            |k, m| unsafe {
                let x = _mm512_maskz_loadu_ps(m, src.add(k));
                _mm256_mask_storeu_epi16(dst.add(k).cast(), m, _mm512_cvtps_ph::<NEAREST>(x));
            },
        );
        n
    }

    /// `bf16_to_f32` on all of `src` (up to `dst`'s length), sixteen lanes at a time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn widen_bf16_avx512(src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len());
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        let (abs, inf, quiet) =
            (_mm512_set1_epi32(0x7FFF_FFFF), _mm512_set1_epi32(0x7F80_0000), _mm512_set1_epi32(0x0040_0000));
        let widen = |h: __m256i| {
            let b = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h));
            // Signed comparison: both sides are below 2³¹.
            let nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs), inf);
            _mm512_mask_or_epi32(b, nan, b, quiet)
        };
        by_sixteen(
            n,
            // SAFETY: lanes `k..k + 16` are inside both slices; the accesses are unaligned.
            |k| unsafe {
                let h = _mm256_loadu_si256(src.add(k).cast());
                _mm512_storeu_si512(dst.add(k).cast(), widen(h));
            },
            // SAFETY: the same, for the lanes `m` enables.
            |k, m| unsafe {
                let h = _mm256_maskz_loadu_epi16(m, src.add(k).cast());
                _mm512_mask_storeu_epi32(dst.add(k).cast(), m, widen(h));
            },
        );
        n
    }

    /// `f32_to_bf16` on sixteen lanes: the rounded bits in the low half of each lane.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn round_bf16_avx512(b: __m512i) -> __m512i {
        let (abs, inf) = (_mm512_set1_epi32(0x7FFF_FFFF), _mm512_set1_epi32(0x7F80_0000));
        let (one, bias, quiet) = (_mm512_set1_epi32(1), _mm512_set1_epi32(0x7FFF), _mm512_set1_epi32(0x40));
        let nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs), inf);
        let high = _mm512_srli_epi32::<16>(b);
        let lsb = _mm512_and_si512(high, one);
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(_mm512_add_epi32(b, bias), lsb));
        // NaN lanes: the high half with the quiet bit. Every lane is below 2¹⁶, so the
        // truncating narrow keeps it.
        _mm512_mask_or_epi32(rounded, nan, high, quiet)
    }

    /// `f32_to_bf16` on all of `src` (up to `dst`'s length), sixteen lanes at a time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn narrow_bf16_avx512<const NT: bool>(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len());
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        let nt = streams::<NT>(dst);
        by_sixteen(
            n,
            // SAFETY: lanes `k..k + 16` are inside both slices; aligned when `nt`.
            |k| unsafe {
                let b = _mm512_loadu_si512(src.add(k).cast());
                put_16(dst.add(k), _mm512_cvtepi32_epi16(round_bf16_avx512(b)), nt);
            },
            // SAFETY: the same, for the lanes `m` enables.
            |k, m| unsafe {
                let b = _mm512_maskz_loadu_epi32(m, src.add(k).cast());
                _mm512_mask_cvtepi32_storeu_epi16(dst.add(k).cast(), m, round_bf16_avx512(b));
            },
        );
        n
    }

    /// [`narrow_bf16_avx512`] with the CPU's own conversion (`vcvtneps2bf16`), one
    /// instruction for the integer rounding's nine. It rounds to nearest even and quiets
    /// NaNs as `f32_to_bf16` does, but flushes subnormal inputs to zero: a group holding
    /// one is rounded with integers instead. Measured on the seed forward in bf16 (N =
    /// 1024, one thread, rows in cache): the helper took 20 % of the time before.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
    fn narrow_bf16_avx512bf16<const NT: bool>(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len());
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        let nt = streams::<NT>(dst);
        let (abs, exponent) = (_mm512_set1_epi32(0x7FFF_FFFF), _mm512_set1_epi32(0x7F80_0000));
        let narrow = |b: __m512i| {
            let subnormal = _mm512_test_epi32_mask(b, abs) & !_mm512_test_epi32_mask(b, exponent);
            if subnormal == 0 {
                // SAFETY: `__m256bh` and `__m256i` are both 32 bytes of plain lanes.
                unsafe {
                    std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(_mm512_castsi512_ps(b)))
                }
            } else {
                _mm512_cvtepi32_epi16(round_bf16_avx512(b))
            }
        };
        by_sixteen(
            n,
            // SAFETY: lanes `k..k + 16` are inside both slices; aligned when `nt`.
            |k| unsafe { put_16(dst.add(k), narrow(_mm512_loadu_si512(src.add(k).cast())), nt) },
            // SAFETY: the same, for the lanes `m` enables (the others load as zero).
            |k, m| unsafe {
                let b = _mm512_maskz_loadu_epi32(m, src.add(k).cast());
                _mm256_mask_storeu_epi16(dst.add(k).cast(), m, narrow(b));
            },
        );
        n
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
    fn narrow_f16c<const NT: bool>(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let nt = streams::<NT>(dst.as_ptr());
        for k in (0..n).step_by(8) {
            // SAFETY: `k + 8 <= n` is inside both slices; aligned when `nt`.
            unsafe {
                let x = _mm256_loadu_ps(src.as_ptr().add(k));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                put_8(dst.as_mut_ptr().add(k), h, nt);
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

    /// `f32_to_bf16` on eight lanes: the rounded bits in the low half of each lane.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn round_bf16_avx2(b: __m256i) -> __m256i {
        let (abs, inf) = (_mm256_set1_epi32(0x7FFF_FFFF), _mm256_set1_epi32(0x7F80_0000));
        let (one, bias, quiet) = (_mm256_set1_epi32(1), _mm256_set1_epi32(0x7FFF), _mm256_set1_epi32(0x40));
        let nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs), inf);
        let high = _mm256_srli_epi32::<16>(b);
        let lsb = _mm256_and_si256(high, one);
        let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(_mm256_add_epi32(b, bias), lsb));
        _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan)
    }

    /// `f32_to_bf16` on whole groups of eight; returns how many elements it converted.
    /// Sixteen lanes a turn: one pack and one permutation for two groups (each pack works
    /// per 128-bit half). Measured on the seed forward in bf16 (Zen 3, N = 4096, one
    /// thread, rows in cache), this helper took 32 % of the time packing eight at a turn.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn narrow_avx2<const NT: bool>(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let (src, dst) = (src.as_ptr(), dst.as_mut_ptr());
        let nt = streams::<NT>(dst);
        let mut k = 0;
        while k + 16 <= n {
            // SAFETY: `k + 16 <= n` is inside both slices; aligned when `nt`.
            unsafe {
                let a = round_bf16_avx2(_mm256_loadu_si256(src.add(k).cast()));
                let b = round_bf16_avx2(_mm256_loadu_si256(src.add(k + 8).cast()));
                // Lanes hold values below 2¹⁶: the unsigned pack keeps them, as a0-3 b0-3
                // a4-7 b4-7; the permutation puts the quarters in order.
                let packed = _mm256_permute4x64_epi64::<0b1101_1000>(_mm256_packus_epi32(a, b));
                put_16(dst.add(k), packed, nt);
            }
            k += 16;
        }
        if k < n {
            // SAFETY: `k + 8 == n` is inside both slices; aligned when `nt`.
            unsafe {
                let r = round_bf16_avx2(_mm256_loadu_si256(src.add(k).cast()));
                let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(r, r));
                put_8(dst.add(k), _mm256_castsi256_si128(packed), nt);
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

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;

    /// Row lengths around the groups of eight and sixteen, and a long one.
    const LENGTHS: [usize; 12] = [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 1000];

    /// Converts `src` with `groups` and the scalar loop after it (as the row helpers do)
    /// into a poisoned `dst` longer on both sides, once 16-byte aligned and once not (the
    /// streaming narrowings store non-temporally only when aligned): every element must
    /// be `scalar`'s, bit for bit, and nothing outside the row written.
    fn check<S: Copy + std::fmt::Debug, D: Copy>(
        name: &str,
        groups: Groups<S, D>,
        src: &[S],
        scalar: impl Fn(S) -> D,
        bits: impl Fn(D) -> u32,
        poison: D,
    ) {
        let mut buf = vec![poison; src.len() + 32];
        let aligned = buf.as_ptr().align_offset(16).min(15);
        for at in [aligned, aligned + 1] {
            buf.fill(poison);
            in_groups(src, &mut buf[at..at + src.len()], Some(groups), &scalar);
            let dst = &buf[at..at + src.len()];
            for (k, (&x, &d)) in src.iter().zip(dst).enumerate() {
                assert_eq!(
                    bits(d),
                    bits(scalar(x)),
                    "{name} at {at}: element {k} of {}, input {x:?}",
                    src.len()
                );
            }
            let outside = buf[..at].iter().chain(&buf[at + src.len()..]);
            assert!(
                outside.into_iter().all(|&d| bits(d) == bits(poison)),
                "{name} wrote outside {}",
                src.len()
            );
        }
    }

    /// Every 16-bit pattern, then shorter rows of them at several offsets.
    fn half_rows() -> Vec<Vec<u16>> {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let mut rows = vec![all.clone()];
        for (k, &n) in LENGTHS.iter().enumerate() {
            let at = (k * 4099) % (all.len() - n);
            rows.push(all[at..at + n].to_vec());
            rows.push(all[0x7C00 - n.min(0x7C00) / 2..][..n].to_vec());
        }
        rows
    }

    /// Random bits, the widened half patterns, and the edges of rounding (ties, overflow,
    /// subnormals, NaNs with payloads), in rows of every length of [`LENGTHS`].
    fn f32_rows() -> Vec<Vec<f32>> {
        let mut rng = StdRng::seed_from_u64(11);
        let mut values: Vec<f32> = (0..100_000).map(|_| f32::from_bits(rng.random())).collect();
        values.extend((0..=u16::MAX).map(|h| ::half::f16::from_bits(h).to_f32()));
        values.extend((0..=u16::MAX).map(|h| f32::from_bits((h as u32) << 16 | 0x8000)));
        values.extend((0..=u16::MAX).map(|h| f32::from_bits((h as u32) << 16 | 0x7FFF)));
        values.extend([65504.0, 65520.0, 65519.99, 6.1e-5, 5.96e-8, 2.98e-8, f32::MAX, f32::MIN_POSITIVE]);
        values.extend([f32::from_bits(0x7F80_0001), f32::from_bits(0xFFC1_2345), f32::INFINITY, -0.0]);
        let mut rows = vec![values.clone()];
        rows.extend(LENGTHS.iter().map(|&n| values[values.len() - n..].to_vec()));
        rows
    }

    #[test]
    fn every_simd_conversion_matches_the_scalar_one() {
        let f16_to_f32 = |h: u16| ::half::f16::from_bits(h).to_f32();
        let f32_to_f16 = |x: f32| ::half::f16::from_f32(x).to_bits();
        let bf16_half = |h: u16| ::half::bf16::from_bits(h).to_f32();
        let (f32_bits, u16_bits) = (|x: f32| x.to_bits(), |h: u16| h as u32);
        let mut ran = Vec::new();
        for row in half_rows() {
            for (name, g) in simd::all_widen_f16() {
                check(name, g, &row, f16_to_f32, f32_bits, f32::from_bits(0x7FC0_DEAD));
                ran.push(name);
            }
            for (name, g) in simd::all_widen_bf16() {
                check(name, g, &row, bf16_to_f32, f32_bits, f32::from_bits(0x7FC0_DEAD));
                ran.push(name);
            }
            for &h in &row {
                assert_eq!(bf16_to_f32(h).to_bits(), bf16_half(h).to_bits(), "bf16 {h:#06x}");
            }
        }
        for row in f32_rows() {
            for (name, g) in simd::all_narrow_f16() {
                check(name, g, &row, f32_to_f16, u16_bits, 0xDEAD);
                ran.push(name);
            }
            for (name, g) in simd::all_narrow_bf16() {
                check(name, g, &row, f32_to_bf16, u16_bits, 0xDEAD);
                ran.push(name);
            }
            for &x in &row {
                assert_eq!(
                    f32_to_bf16(x),
                    ::half::bf16::from_f32(x).to_bits(),
                    "bf16 of {x:e} ({:#x})",
                    x.to_bits()
                );
            }
        }
        ran.sort();
        ran.dedup();
        eprintln!("SIMD conversions checked on this CPU: {ran:?}");
    }
}
