//! Loops computed in 256-bit vectors (lnc-clif's `wide`, on hosts with AVX2), and in
//! 512-bit ones for 16-lane tiles on hosts with AVX-512: the same bits as the same tiles
//! in 128-bit vectors, for the seed's three kernels
//! in fp32, fp16 and bf16, on row lengths that are not multiples of the tile, with outputs
//! poisoned, streaming and cached, bounds-checked and not; and the float64 reference.

mod common;

use common::*;
use half::{bf16, f16};

/// The seed compiled with 8-lane tiles, 256-bit loops on or off; `threshold`: the
/// streaming threshold (0: every aligned launch streams).
fn module(wide: bool, threshold: u64) -> lnc::Module {
    module_of(8, wide, threshold)
}

/// [`module`] with tiles of `lanes` (16: the loops of kernels with half arguments run in
/// 512 bits on a host with AVX-512).
fn module_of(lanes: u8, wide: bool, threshold: u64) -> lnc::Module {
    let opts = lnc::CompileOptions { lanes, wide, stream_threshold: threshold, ..Default::default() };
    seed_module(&lnc::Jit::with_options(opts))
}

fn bits<T: Float>(v: &[T]) -> Vec<u64> {
    v.iter().map(|&x| x.to_f64().to_bits()).collect()
}

/// [`run_forward`] as the bits of y, mean and rstd.
fn forward<T: Float>(
    k: &lnc::Kernel,
    x: &[T],
    w: &[T],
    b: &[T],
    shift: usize,
    checked: bool,
) -> Vec<Vec<u64>> {
    let (y, mean, rstd) = run_forward(k, x, w, b, shift, checked);
    vec![bits(&y), bits(&mean), bits(&rstd)]
}

fn forward_matches<T: Float>(lanes: u8) {
    let mut rng = rng();
    let sizes = [
        (5usize, 1usize),
        (9, 7),
        (9, 8),
        (7, 9),
        (5, 61),
        (4, 100),
        (37, 1000),
        (3, 1023),
        (64, 1024),
        (5, 4097),
    ];
    for threshold in [u64::MAX, 0] {
        let (wide, narrow) = (module_of(lanes, true, threshold), module_of(lanes, false, threshold));
        for (m, n) in sizes {
            let sig =
                format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two(), t = T::SIG);
            let (kw, kn) = (
                wide.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}")),
                narrow.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}")),
            );
            assert_eq!(kn.widened_instructions(), 0);
            if lnc::computes_wide() && n >= usize::from(lanes) {
                assert!(kw.widened_instructions() > 0, "{} {m}x{n}: no loop widened", T::SIG);
            }
            let x: Vec<T> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(T::from_f32).collect();
            let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3).into_iter().map(T::from_f32).collect();
            let b: Vec<T> = randn(&mut rng, n, 0.0, 0.5).into_iter().map(T::from_f32).collect();
            let want = forward(&kn, &x, &w, &b, 0, true);
            // The float64 reference, to the precision of T's y.
            let f = |v: &[T]| v.iter().map(|&e| e.to_f32()).collect::<Vec<f32>>();
            let (ry, _, _) = layer_norm_ref(&f(&x), &f(&w), &f(&b), n, 1e-5);
            let y: Vec<f32> = want[0].iter().map(|&b| f64::from_bits(b) as f32).collect();
            let tol = 4.0 * T::U + 1e-5;
            assert_close(&format!("{} y {m}x{n}", T::SIG), &y, &ry, tol * 4.0, tol);
            // Shifts leave y off the 32-byte vectors and the lines the streaming loops want.
            for shift in [0, 1, 4, 7] {
                for checked in [true, false] {
                    let got = forward(&kw, &x, &w, &b, shift, checked);
                    for (k, (g, c)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            g == c,
                            "{} {m}x{n}, threshold {threshold}, y shifted {shift}, checked {checked}: output {k} \
                             differs from 128-bit vectors' {:?} vs {:?}",
                            T::SIG,
                            g.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>(),
                            c.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>()
                        );
                    }
                }
            }
        }
    }
}

/// The bits of a half value, to compare outputs exactly (through `f64` a signaling NaN
/// and its quiet twin look alike).
trait HalfBits: Float {
    fn raw(self) -> u16;
}
impl HalfBits for f16 {
    fn raw(self) -> u16 {
        self.to_bits()
    }
}
impl HalfBits for bf16 {
    fn raw(self) -> u16 {
        self.to_bits()
    }
}

/// Quiet and signaling NaNs in half rows, two a row: before the row's last tile and in
/// it, both in it, in a lane the tile runs again without counting it and in it, both in
/// one lane of the steady loop, in every pair of `nans`. A row's last tile of a sum runs
/// in a 512-bit loop of its own, whose select passes the row's conversion on to the sum
/// without quieting a NaN first (the sum quiets it, and returns its first operand's NaN
/// when both are: lnc-clif's `half::only_arithmetic`). The raw bits of 128-bit vectors,
/// checked and not.
fn nans_match<T: HalfBits>(nans: &[T]) {
    let (wide, narrow) = (module_of(16, true, u64::MAX), module_of(16, false, u64::MAX));
    let mut rng = rng();
    for n in [37usize, 1000, 1023] {
        let sig =
            format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two(), t = T::SIG);
        let (kw, kn) = (
            wide.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}")),
            narrow.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}")),
        );
        if lnc::computes_zmm() {
            // The steady loop and the last tile of each of the two sums: three lane groups
            // taken out of each result.
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked: true, ..Default::default() };
            let asm = wide.dump("_layer_norm_fwd_fused", &sig, &req).unwrap_or_else(|e| panic!("{e}"));
            assert!(asm[0].text.contains("; 12 of those are vroundps placeholders"), "{} n {n}", T::SIG);
        }
        let full = n / 16 * 16;
        // The last: one lane of one accumulator of the unrolled steady loop, two iterations.
        let places = [[1, full + 1], [n - 1, full], [n - 16, n - 1], [full, 3], [2, 66 % full]];
        let mut rows = Vec::new();
        for p in places {
            for &a in nans {
                for &c in nans {
                    rows.push((p, a, c));
                }
            }
        }
        let m = rows.len() + 1;
        let mut x: Vec<T> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(T::from_f32).collect();
        for (r, &([i, j], a, c)) in rows.iter().enumerate() {
            x[r * n + i] = a;
            x[r * n + j] = c;
        }
        let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3).into_iter().map(T::from_f32).collect();
        let b: Vec<T> = randn(&mut rng, n, 0.0, 0.5).into_iter().map(T::from_f32).collect();
        let raw = |k: &lnc::Kernel, checked: bool| {
            let (y, mean, rstd) = run_forward(k, &x, &w, &b, 0, checked);
            let stats = |v: &[f32]| v.iter().map(|s| s.to_bits()).collect::<Vec<u32>>();
            (y.iter().map(|&v| v.raw()).collect::<Vec<u16>>(), stats(&mean), stats(&rstd))
        };
        let want = raw(&kn, true);
        for (r, mean) in want.1.iter().enumerate() {
            assert_eq!(f32::from_bits(*mean).is_nan(), r + 1 < m, "{} n {n}: row {r}'s mean", T::SIG);
        }
        for checked in [true, false] {
            assert!(raw(&kw, checked) == want, "{} n {n} checked {checked}: bits differ", T::SIG);
        }
    }
}

#[test]
fn nans_in_half_rows_give_the_bits_of_128_in_512_bit_loops() {
    nans_match(&[
        bf16::from_bits(0x7f81),
        bf16::from_bits(0xff82),
        bf16::from_bits(0x7fc3),
        bf16::from_bits(0xffc4),
    ]);
    nans_match(&[
        f16::from_bits(0x7c01),
        f16::from_bits(0xfc02),
        f16::from_bits(0x7e03),
        f16::from_bits(0xfe04),
    ]);
}

#[test]
fn forward_in_256_bits_gives_the_bits_of_128_fp32() {
    forward_matches::<f32>(8);
}

#[test]
fn forward_in_256_bits_gives_the_bits_of_128_fp16() {
    forward_matches::<f16>(8);
}

#[test]
fn forward_in_256_bits_gives_the_bits_of_128_bf16() {
    forward_matches::<bf16>(8);
}

#[test]
fn forward_in_512_bits_gives_the_bits_of_128_fp16() {
    forward_matches::<f16>(16);
}

#[test]
fn forward_in_512_bits_gives_the_bits_of_128_bf16() {
    forward_matches::<bf16>(16);
}

/// On a host with AVX-512 the seed kernels' loops in fp16 and bf16 run in 512 bits,
/// checked and unchecked, the tiles that end their rows' sums included: each function was
/// encoded again with EVEX forms (`lnc compile --emit asm` says how many), not left in
/// 256 bits by a refused proof.
#[test]
fn the_half_seed_kernels_run_in_512_bit_loops_where_the_host_has_avx512() {
    let module = module_of(16, true, u64::MAX);
    let sigs = [
        ("_layer_norm_fwd_fused", "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,1024"),
        (
            "_layer_norm_bwd_dx_fused",
            "*fp16,*fp16,*fp16,*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,*i32,i32,i32,fp32,256,1024",
        ),
        ("_layer_norm_bwd_dwdb", "*fp16,*fp16,*fp16,*fp16,i32,i32,32,128"),
    ];
    for (kernel, sig) in sigs {
        for dtype in ["fp16", "bf16"] {
            let sig = sig.replace("fp16", dtype);
            for checked in [true, false] {
                let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked, ..Default::default() };
                let asm = module.dump(kernel, &sig, &req).unwrap_or_else(|e| panic!("{e}"));
                // At the first try: none refused (then compiled again, in twice the time).
                assert!(!asm.iter().any(|d| d.text.contains("refused")), "{kernel} {sig} checked {checked}");
                let note = asm.iter().any(|d| d.text.contains("instructions of the 512-bit loops above"));
                assert_eq!(
                    note,
                    lnc::computes_zmm(),
                    "{kernel} {sig} checked {checked}: {}",
                    asm[0].text.lines().rev().take(5).collect::<Vec<_>>().join("\n")
                );
            }
        }
    }
    // fp32 kernels stay at 8 lanes, in 256-bit loops.
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked: true, ..Default::default() };
    let asm = module
        .dump("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024", &req)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!asm[0].text.contains("512-bit"));
}

#[test]
fn reductions_leave_wide_loops_in_registers() {
    // Each of the forward's two reductions takes the lanes past the first four out of its
    // loop's result: one `vextractf128` in 256 bits; in 512, `vextractf64x4` of lanes 8-15
    // and `vextractf32x4` of lanes 4-7 of each half. With 16-lane tiles (the half types) a
    // row's last tile of each reduction runs in a wide loop of its own (lnc-tile's
    // `overlap`), whose result leaves so too. A host without AVX-512 tiles the half types
    // in 8 lanes too, as fp32.
    let zmm = lnc::computes_zmm();
    // (lanes, dtype, [(mnemonic, count)]).
    type Case<'a> = (u8, &'a str, &'a [(&'a str, usize)]);
    let cases: [Case; 3] = [
        (8, "fp32", &[("vextractf128", 2)]),
        (
            16,
            "fp16",
            if zmm { &[("vextractf32x4", 8), ("vextractf64x4", 4)] } else { &[("vextractf128", 2)] },
        ),
        (
            16,
            "bf16",
            if zmm { &[("vextractf32x4", 8), ("vextractf64x4", 4)] } else { &[("vextractf128", 2)] },
        ),
    ];
    for (lanes, dtype, want) in cases {
        let module = module_of(lanes, true, u64::MAX);
        let sig = format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,1024", t = dtype);
        for checked in [true, false] {
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Mc], checked, ..Default::default() };
            let mc = module.dump("_layer_norm_fwd_fused", &sig, &req).unwrap_or_else(|e| panic!("{e}"));
            let text = &mc[0].text;
            assert!(!text.contains("refused"), "{dtype} checked {checked}: {text}");
            for &(mnemonic, count) in want {
                let found = text.lines().filter(|l| l.contains(mnemonic)).count();
                assert_eq!(found, count, "{dtype} checked {checked}: {mnemonic}");
            }
            assert!(!text.contains("vroundps"), "{dtype} checked {checked}: a placeholder left");
            // Cranelift's listing shows the placeholders, and its notes say what they became.
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked, ..Default::default() };
            let asm = module.dump("_layer_norm_fwd_fused", &sig, &req).unwrap_or_else(|e| panic!("{e}"));
            let total: usize = want.iter().map(|w| w.1).sum();
            let note = format!("; {total} of those are vroundps placeholders");
            assert!(asm[0].text.contains(&note), "{dtype} checked {checked}: no note {note:?}");
        }
    }
}

/// The dx kernel then the dwdb kernel; the bits of dx, the partial and the final dw, db.
fn backward<T: Float>(
    module: &lnc::Module,
    x: &[T],
    w: &[T],
    dy: &[T],
    n: usize,
    group: usize,
) -> Vec<Vec<u64>> {
    let m = x.len() / n;
    let (nan, t) = (T::from_f32(f32::NAN), T::SIG);
    let (dx, pdw, pdb) = run_seed_dx(module, x, dy, w, n, group, false);
    let dwdb = module
        .kernel("_layer_norm_bwd_dwdb", &format!("*{t},*{t},*{t},*{t},i32,i32,32,128"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut dw, mut db) = (vec![nan; n], vec![nan; n]);
    let rows = group.min(m);
    dwdb.launch(n.div_ceil(128) as u32, &lnc::args![&pdw, &pdb, &mut dw, &mut db, rows as i32, n as i32])
        .unwrap_or_else(|e| panic!("{e}"));
    // The partial sums' order of accumulation depends on the schedule: only the groups
    // of one row each are compared bit for bit (group >= m below).
    vec![bits(&dx), bits(&pdw), bits(&pdb), bits(&dw), bits(&db)]
}

fn backward_matches<T: Float>(lanes: u8) {
    let mut rng = rng();
    let (wide, narrow) = (module_of(lanes, true, u64::MAX), module_of(lanes, false, u64::MAX));
    for (m, n) in [(5usize, 9usize), (7, 61), (11, 1000), (4, 1029), (3, 4097)] {
        let x: Vec<T> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(T::from_f32).collect();
        let w: Vec<T> = randn(&mut rng, n, 1.0, 0.3).into_iter().map(T::from_f32).collect();
        let dy: Vec<T> = randn(&mut rng, m * n, 0.0, 0.1).into_iter().map(T::from_f32).collect();
        // One row per group: every partial sum is one row's terms, in any schedule.
        let group = m;
        let got = backward(&wide, &x, &w, &dy, n, group);
        let want = backward(&narrow, &x, &w, &dy, n, group);
        for (k, (g, c)) in got.iter().zip(&want).enumerate() {
            assert!(g == c, "{} {m}x{n}: backward output {k} differs from 128-bit vectors'", T::SIG);
        }
        let dx: Vec<f32> = got[0].iter().map(|&b| f64::from_bits(b) as f32).collect();
        assert!(dx.iter().all(|v| v.is_finite()), "{} {m}x{n}: dx has unwritten elements", T::SIG);
    }
}

#[test]
fn backward_in_256_bits_gives_the_bits_of_128_fp32() {
    backward_matches::<f32>(8);
}

#[test]
fn backward_in_256_bits_gives_the_bits_of_128_fp16() {
    backward_matches::<f16>(8);
}

#[test]
fn backward_in_256_bits_gives_the_bits_of_128_bf16() {
    backward_matches::<bf16>(8);
}

#[test]
fn backward_in_512_bits_gives_the_bits_of_128_fp16() {
    backward_matches::<f16>(16);
}

#[test]
fn backward_in_512_bits_gives_the_bits_of_128_bf16() {
    backward_matches::<bf16>(16);
}

/// A safe launch of a 256-bit loop whose 8 lanes would pass the end of a buffer fails,
/// naming the access, and writes nothing past it.
#[test]
fn a_256_bit_access_past_a_buffer_fails_under_a_safe_launch() {
    let k = module(true, u64::MAX)
        .kernel("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024")
        .unwrap_or_else(|e| panic!("{e}"));
    let (m, n) = (4usize, 1000usize);
    let x = vec![1.5f32; m * n];
    let w = vec![1.0f32; n - 3]; // 3 elements short
    let b = vec![0.0f32; n];
    let mut y = vec![f32::NAN; m * n];
    let (mut mean, mut rstd) = (vec![0.0f32; m], vec![0.0f32; m]);
    let err = k
        .launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32])
        .expect_err("W is too short");
    let text = err.to_string();
    assert!(text.contains("W"), "{text}");
}

/// A store the `stream` pass marks 16 bytes past each 32-byte boundary of a 32-byte
/// aligned output (found by review: the widened `vmovntps ymm` faulted there). A 256-bit
/// loop streams only stores it can tell are aligned; this one takes its cached copy.
/// Every output offset 0..7 elements, streaming forced and by the default threshold,
/// checked and unchecked: the right values, nothing written around them.
#[test]
fn a_streaming_store_off_32_bytes_is_cached_in_256_bit_loops() {
    let src = "import triton\nimport triton.language as tl\n\n@triton.jit\n\
               def shifted(X, OUT, a, BLOCK: tl.constexpr):\n\
               \x20   offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
               \x20   x = tl.load(X + offs)\n\
               \x20   tl.store(OUT + (offs + 4), x * a)\n";
    for (threshold, blocks) in [(0u64, 64usize), (lnc::CompileOptions::default().stream_threshold, 4096)] {
        let opts = lnc::CompileOptions { lanes: 8, stream_threshold: threshold, ..Default::default() };
        let module = lnc::Jit::with_options(opts).module("shifted.py", src.to_string()).expect("parses");
        let k = module.kernel("shifted", "*fp32,*fp32,fp32,1024").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.widened_instructions() > 0, lnc::computes_wide());
        assert_eq!(k.streaming_stores().streamed > 0, !lnc::computes_wide(), "{:?}", k.streaming_stores());
        let n = blocks * 1024;
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 + 1.0).collect();
        let mut out = vec![f32::NAN; n + 64];
        let aligned = (8 - (out.as_ptr() as usize % 32) / 4) % 8;
        for shift in 0..8 {
            let off = aligned + shift;
            for checked in [true, false] {
                out.fill(f32::NAN);
                let args = [lnc::Arg::at(&x, 0), lnc::Arg::at_mut(&mut out, off), 2.0f32.into()];
                if checked {
                    k.launch(blocks as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                } else {
                    // SAFETY: OUT holds the 4 + n elements past `off` the kernel writes.
                    unsafe { k.launch_unchecked(blocks as u32, &args) }.unwrap_or_else(|e| panic!("{e}"));
                }
                let what = format!("threshold {threshold}, OUT {off} elements in, checked {checked}");
                assert!(out[..off + 4].iter().all(|v| v.is_nan()), "{what}: written before");
                assert!(out[off + 4 + n..].iter().all(|v| v.is_nan()), "{what}: written after");
                let bad = (0..n).filter(|&i| out[off + 4 + i] != x[i] * 2.0).count();
                assert_eq!(bad, 0, "{what}: wrong elements");
            }
        }
    }
}

/// Constants in a 256-bit loop (`x * 0.5 + 1.0`, a sum of `x * x * 0.25`): broadcast from
/// memory in front of the loop, not loaded from Cranelift's constant pool (16 bytes, which
/// made every such kernel fall back to 128 bits). The bits of 128-bit vectors.
#[test]
fn constants_in_256_bit_loops() {
    let src = "import triton\nimport triton.language as tl\n\n@triton.jit\n\
               def affine(X, Y, S, N, BLOCK: tl.constexpr):\n\
               \x20   row = tl.program_id(0)\n\
               \x20   cols = tl.arange(0, BLOCK)\n\
               \x20   x = tl.load(X + row * N + cols, mask=cols < N, other=0.)\n\
               \x20   tl.store(Y + row * N + cols, x * 0.5 + 1.0, mask=cols < N)\n\
               \x20   tl.store(S + row, tl.sum(x * x * 0.25, axis=0))\n";
    let module =
        |opts: lnc::CompileOptions| lnc::Jit::with_options(opts).module("affine.py", src.to_string());
    let eight = lnc::CompileOptions { lanes: 8, ..Default::default() };
    let wide = module(eight.clone()).expect("parses");
    let pairs = module(lnc::CompileOptions { wide: false, ..eight.clone() }).expect("parses");
    // Where no loop widens, the kernel is tiled again in 4 lanes: another order of the sum.
    let fours = module(eight.narrow()).expect("parses");
    let mut rng = rng();
    for (m, n) in [(3usize, 7usize), (5, 8), (4, 100), (9, 1000), (3, 4099)] {
        let sig = format!("*fp32,*fp32,*fp32,i32,{}", n.next_power_of_two());
        let run = |module: &lnc::Module, x: &[f32]| {
            let k = module.kernel("affine", &sig).unwrap_or_else(|e| panic!("{e}"));
            let (mut y, mut sums) = (vec![f32::NAN; m * n], vec![f32::NAN; m]);
            k.launch(m as u32, &lnc::args![x, &mut y, &mut sums, n as i32]).unwrap_or_else(|e| panic!("{e}"));
            (k.widened_instructions(), bits(&y), bits(&sums))
        };
        let x = randn(&mut rng, m * n, 0.3, 1.0);
        let (count, y, sums) = run(&wide, &x);
        let (none, y0, sums0) = run(if count > 0 { &pairs } else { &fours }, &x);
        assert_eq!(none, 0);
        // A block of one tile has no loop to widen.
        if lnc::computes_wide() && n > 8 {
            assert!(count > 0, "{m}x{n}: not widened");
        }
        assert!(y == y0 && sums == sums0, "{m}x{n}: not the bits of 128-bit vectors");
        let want: Vec<f64> = x.iter().map(|&v| v as f64 * 0.5 + 1.0).collect();
        let got: Vec<f32> = y.iter().map(|&b| f64::from_bits(b) as f32).collect();
        assert_close(&format!("y {m}x{n}"), &got, &want, 1e-6, 1e-6);
    }
}

/// A kernel `name` that stores `expr` of the loaded `x`, one block of `BLOCK` per program,
/// compiled with `opts`.
fn elementwise(name: &str, expr: &str, opts: lnc::CompileOptions) -> lnc::Module {
    let src = format!(
        "import triton\nimport triton.language as tl\n\n@triton.jit\n\
         def {name}(X, Y, N, BLOCK: tl.constexpr):\n\
         \x20   offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
         \x20   x = tl.load(X + offs, mask=offs < N, other=0.)\n\
         \x20   tl.store(Y + offs, {expr}, mask=offs < N)\n"
    );
    lnc::Jit::with_options(opts).module(format!("{name}.py"), src).expect("parses")
}

/// `bf16` tiles loaded in a 256-bit loop for arithmetic (`vpmovzxwd ymm, m128` and a
/// shift, no quieting): every one of the 65 536 patterns (subnormals, infinities, NaNs)
/// times 1.5 plus 0.25 in fp32, the bits Rust computes from the `half` crate's widening,
/// and the bits of 128-bit vectors.
#[test]
fn every_bf16_pattern_loaded_in_a_256_bit_loop() {
    let eight = lnc::CompileOptions { lanes: 8, ..Default::default() };
    let module = |opts| elementwise("scale", "x.to(tl.float32) * 1.5 + 0.25", opts);
    let (wide, pairs) = (module(eight.clone()), module(lnc::CompileOptions { wide: false, ..eight }));
    let x: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    let n = x.len() - 3;
    let run = |module: &lnc::Module| {
        let k = module.kernel("scale", "*bf16,*fp32,i32,1024").unwrap_or_else(|e| panic!("{e}"));
        let mut y = vec![f32::NAN; x.len()];
        k.launch(n.div_ceil(1024) as u32, &lnc::args![&x, &mut y, n as i32])
            .unwrap_or_else(|e| panic!("{e}"));
        (k.widened_instructions(), y.iter().map(|v| v.to_bits()).collect::<Vec<u32>>())
    };
    let (count, got) = run(&wide);
    let (none, narrow) = run(&pairs);
    assert_eq!(none, 0);
    if lnc::computes_wide() {
        assert!(count > 0, "not widened");
    }
    assert!(got == narrow, "not the bits of 128-bit vectors");
    for (k, &h) in x.iter().enumerate().take(n) {
        let want = (h.to_f32() * 1.5 + 0.25).to_bits();
        assert_eq!(got[k], want, "bf16 {:#06x}: {:#010x}, want {want:#010x}", h.to_bits(), got[k]);
    }
    assert!(got[n..].iter().all(|&b| f32::from_bits(b).is_nan()), "written past n");
}

/// A 512-bit loop rounds fp32 to bf16 in the loop (integer code without comparisons,
/// stored by `vpmovdw`; or `vcvtneps2bf16`, its subnormal lanes rounded again with
/// integers): bit-exact against the `half` crate on every class of value, and the bits of
/// the same 16-lane tiles in 128-bit vectors; streamed or cached. (On a host with AVX2
/// only, 16 lanes are 8: a 256-bit loop, checked against 8-lane tiles in 128-bit vectors.)
#[test]
fn fp32_rounded_to_bf16_in_a_512_bit_loop() {
    let sixteen = lnc::CompileOptions { lanes: 16, ..Default::default() };
    let module = |opts| elementwise("narrow", "x * 1.0", opts);
    let mut rng = rng();
    // Edge classes: zeros, subnormals, the largest finite values (some round to
    // infinity), infinities, quiet and signaling NaNs with payloads, exact ties with even
    // and odd kept bits, and random bit patterns.
    let mut bits: Vec<u32> = vec![
        0,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007f_ffff,
        0x0000_8000,
        0x0001_8000,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x7f7f_7fff,
        0x7f7f_8000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0xffc0_0001,
        0x7f80_0001,
        0x7fbf_ffff,
        0xff80_ffff,
        0x3f80_8000,
        0x3f81_8000,
        0x3f80_7fff,
        0x3f81_7fff,
    ];
    // Whole tiles (from element 32): normal values but one subnormal, at each lane in
    // turn; then subnormals only, ties among them.
    bits.resize(32, 0x3f80_0000);
    for lane in 0..16 {
        bits.extend((0..16).map(|k| if k == lane { 0x8000_8000 | lane } else { 0x4049_0fdb ^ (k << 3) }));
    }
    bits.extend((0..16u32).map(|k| (k << 28 & 0x8000_0000) | k << 16 | 0x8000));
    bits.extend((0..200_000).map(|_| rand::RngCore::next_u32(&mut rng)));
    let x: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    let n = x.len() - 5;
    for (threshold, bf16_cvt) in [(u64::MAX, true), (0, true), (u64::MAX, false), (0, false)] {
        let opts = lnc::CompileOptions { stream_threshold: threshold, bf16_cvt, ..sixteen.clone() };
        let (wide, plain) = (module(opts.clone()), module(lnc::CompileOptions { wide: false, ..opts }));
        let run = |module: &lnc::Module, checked: bool| {
            let k = module.kernel("narrow", "*fp32,*bf16,i32,1024").unwrap_or_else(|e| panic!("{e}"));
            let mut y = vec![bf16::from_bits(0x7fa5); x.len()];
            let grid = n.div_ceil(1024) as u32;
            if checked {
                k.launch(grid, &lnc::args![&x, &mut y, n as i32]).unwrap_or_else(|e| panic!("{e}"));
            } else {
                // SAFETY: every access is within x and y, whose lengths exceed n.
                unsafe { k.launch_unchecked(grid, &lnc::args![&x, &mut y, n as i32]) }
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            (k.widened_instructions(), y.iter().map(|v| v.to_bits()).collect::<Vec<u16>>())
        };
        let ((widened, got), (_, narrow)) = (run(&wide, true), run(&plain, true));
        // In 256 bits (8-lane tiles) on a host without AVX-512.
        assert_eq!(widened > 0, lnc::computes_wide(), "threshold {threshold}, bf16_cvt {bf16_cvt}");
        assert!(run(&wide, false).1 == got, "threshold {threshold}, bf16_cvt {bf16_cvt}: unchecked differs");
        for (k, &v) in x.iter().enumerate().take(n) {
            let want = bf16::from_f32(v).to_bits();
            assert_eq!(
                got[k],
                want,
                "threshold {threshold}, bf16_cvt {bf16_cvt}: {:#010x} gave {:#06x}, want {want:#06x}",
                v.to_bits(),
                got[k]
            );
        }
        assert!(got == narrow, "threshold {threshold}: not the bits of 128-bit vectors");
        assert!(got[n..].iter().all(|&b| b == 0x7fa5), "written past n");
    }
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked: true, ..Default::default() };
    let asm = module(sixteen).dump("narrow", "*fp32,*bf16,i32,1024", &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(asm[0].text.contains("512-bit loops"), lnc::computes_zmm());
    assert_eq!(
        asm[0].text.contains("rewritten after Cranelift to vcvtneps2bf16"),
        lnc::rounds_bf16_natively()
    );
}

/// The seed forward in bf16 in 512-bit loops, with weights so small that y straddles the
/// smallest normal: `vcvtneps2bf16` with its integer fix-up of subnormal lanes, streamed
/// and cached, gives the bits of the integer rounding and of 128-bit vectors, at shifted
/// outputs, checked and unchecked.
#[test]
fn bf16_outputs_with_subnormals_in_512_bit_loops() {
    let mut rng = rng();
    let module = |wide: bool, threshold: u64, bf16_cvt: bool| {
        let opts = lnc::CompileOptions {
            lanes: 16,
            wide,
            stream_threshold: threshold,
            bf16_cvt,
            ..Default::default()
        };
        seed_module(&lnc::Jit::with_options(opts))
    };
    let mut subnormals = 0usize;
    for threshold in [u64::MAX, 0] {
        let (cvt, int, narrow) =
            (module(true, threshold, true), module(true, threshold, false), module(false, threshold, false));
        for (m, n) in [(9usize, 7usize), (5, 61), (4, 100), (37, 1000), (3, 1023), (64, 1024), (5, 4097)] {
            let sig = format!("*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two());
            let kernel =
                |md: &lnc::Module| md.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));
            let (kc, ki, kn) = (kernel(&cvt), kernel(&int), kernel(&narrow));
            if lnc::computes_zmm() && n >= 16 {
                assert!(kc.widened_instructions() > 0, "{m}x{n}: no loop widened");
            }
            let x: Vec<bf16> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(bf16::from_f32).collect();
            // |w| from 2^-130 to 2^-122, b below 1e-38.
            let w: Vec<bf16> = (0..n)
                .map(|_| {
                    let e = rand::Rng::random::<f32>(&mut rng) * 8.0 - 130.0;
                    let s = if rand::Rng::random::<bool>(&mut rng) { -1.0 } else { 1.0 };
                    bf16::from_f32(s * e.exp2())
                })
                .collect();
            let b: Vec<bf16> =
                (0..n).map(|_| bf16::from_f32((rand::Rng::random::<f32>(&mut rng) - 0.5) * 1e-38)).collect();
            let want = run_forward(&kn, &x, &w, &b, 0, true).0;
            subnormals += want.iter().filter(|v| v.to_f32().is_subnormal()).count();
            for shift in [0, 1, 4, 7, 16] {
                for checked in [true, false] {
                    for (name, k) in [("vcvtneps2bf16", &kc), ("integer rounding", &ki)] {
                        let got = run_forward(k, &x, &w, &b, shift, checked).0;
                        let bad: Vec<(usize, u16, u16)> = got
                            .iter()
                            .zip(&want)
                            .enumerate()
                            .filter(|(_, (g, c))| g.to_bits() != c.to_bits())
                            .take(5)
                            .map(|(i, (g, c))| (i, g.to_bits(), c.to_bits()))
                            .collect();
                        assert!(
                            bad.is_empty(),
                            "{name}, {m}x{n}, threshold {threshold}, y shifted {shift}, checked {checked}: \
                             (element, bits, 128-bit bits) {bad:x?}"
                        );
                    }
                }
            }
        }
    }
    assert!(subnormals > 1000, "only {subnormals} subnormal outputs");
}

/// The seed forward on two rows per program, the rows' passes fused: with bounds checks,
/// Cranelift moves a wide value between registers with an SSE `movdqa` inside a 512-bit
/// loop's code, which keeps the destination's high lanes. lnc-clif's `widen` encodes such
/// moves again as moves of the whole register; before, the proof refused them and the
/// kernel ran in 128-bit vectors, 2.5 times as long (1024 × 256 fp16, in the cache).
const TWO_ROWS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def two_rows(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0) * 2
    cols = tl.arange(0, BLOCK_SIZE)
    m = cols < N
    X0 = X + row * stride
    X1 = X0 + stride
    mean0 = tl.sum(tl.load(X0 + cols, mask=m, other=0.).to(tl.float32), axis=0) / N
    mean1 = tl.sum(tl.load(X1 + cols, mask=m, other=0.).to(tl.float32), axis=0) / N
    x0 = tl.where(m, tl.load(X0 + cols, mask=m, other=0.).to(tl.float32) - mean0, 0.)
    x1 = tl.where(m, tl.load(X1 + cols, mask=m, other=0.).to(tl.float32) - mean1, 0.)
    rstd0 = 1 / tl.sqrt(tl.sum(x0 * x0, axis=0) / N + eps)
    rstd1 = 1 / tl.sqrt(tl.sum(x1 * x1, axis=0) / N + eps)
    tl.store(Mean + row, mean0)
    tl.store(Mean + row + 1, mean1)
    tl.store(Rstd + row, rstd0)
    tl.store(Rstd + row + 1, rstd1)
    w = tl.load(W + cols, mask=m).to(tl.float32)
    b = tl.load(B + cols, mask=m).to(tl.float32)
    y0 = (tl.load(X0 + cols, mask=m, other=0.).to(tl.float32) - mean0) * rstd0 * w + b
    y1 = (tl.load(X1 + cols, mask=m, other=0.).to(tl.float32) - mean1) * rstd1 * w + b
    tl.store(Y + row * stride + cols, y0, mask=m)
    tl.store(Y + (row + 1) * stride + cols, y1, mask=m)
"#;

#[test]
fn two_rows_a_program_run_in_512_bit_loops_and_give_the_bits_of_128() {
    let jit = |wide| {
        lnc::Jit::with_options(lnc::CompileOptions { lanes: 16, wide, ..Default::default() })
            .module("two_rows.py", TWO_ROWS)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (wide, narrow) = (jit(true), jit(false));
    let sig = "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,1024";
    for checked in [true, false] {
        let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked, ..Default::default() };
        let asm = wide.dump("two_rows", sig, &req).unwrap_or_else(|e| panic!("{e}"));
        let note = asm.iter().any(|d| d.text.contains("instructions of the 512-bit loops above"));
        assert_eq!(note, lnc::computes_zmm(), "checked {checked}");
    }
    let mut rng = rng();
    for (m, n) in [(6usize, 1000usize), (4, 1023), (2, 61), (8, 1024)] {
        let sig = format!("*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two());
        let x: Vec<f16> = randn(&mut rng, m * n, -2.3, 0.5).into_iter().map(f16::from_f32).collect();
        let w: Vec<f16> = randn(&mut rng, n, 1.0, 0.3).into_iter().map(f16::from_f32).collect();
        let b: Vec<f16> = randn(&mut rng, n, 0.0, 0.5).into_iter().map(f16::from_f32).collect();
        let run = |module: &lnc::Module, checked: bool| {
            let k = module.kernel("two_rows", &sig).unwrap_or_else(|e| panic!("{e}"));
            let mut y = vec![f16::NAN; m * n];
            let (mut mean, mut rstd) = (vec![f32::NAN; m], vec![f32::NAN; m]);
            let args = lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
            if checked {
                k.launch(m as u32 / 2, &args).unwrap_or_else(|e| panic!("{e}"));
            } else {
                // SAFETY: every buffer holds the rows the kernel touches.
                unsafe { k.launch_unchecked(m as u32 / 2, &args) }.unwrap_or_else(|e| panic!("{e}"));
            }
            (bits(&y), bits(&mean), bits(&rstd))
        };
        let want = run(&narrow, true);
        let f = |v: &[f16]| v.iter().map(|&e| e.to_f32()).collect::<Vec<f32>>();
        let (ry, _, _) = layer_norm_ref(&f(&x), &f(&w), &f(&b), n, 1e-5);
        let y: Vec<f32> = want.0.iter().map(|&b| f64::from_bits(b) as f32).collect();
        let tol = 4.0 * f16::U + 1e-5;
        assert_close(&format!("two rows {m}x{n}"), &y, &ry, tol * 4.0, tol);
        for checked in [true, false] {
            assert!(
                run(&wide, checked) == want,
                "{m}x{n} checked {checked}: 512-bit loops differ from 128-bit"
            );
        }
    }
}

/// Kernels whose wide loops broadcast scalars: one scalar used by two loops, constants
/// beside per-row scalars, a reduction; and a wide loop inside a scalar loop whose carried
/// value it broadcasts.
const BROADCASTS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def two_loops(X, Y, Z, S, N, a, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * N
    Y += row * N
    Z += row * N
    c = tl.load(S + row) * a + 1.5
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        m = cols < N
        x = tl.load(X + cols, mask=m, other=0.).to(tl.float32)
        tl.store(Y + cols, x * c + 0.25, mask=m)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        m = cols < N
        x = tl.load(X + cols, mask=m, other=0.).to(tl.float32)
        d = (x - c) * a
        acc += d * d
        tl.store(Z + cols, d - 3.0, mask=m)
    tl.store(S + row, tl.sum(acc, axis=0))

@triton.jit
def nested(X, Y, N, R, a, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * N
    Y += row * N
    t = a
    for k in range(0, R):
        t = t * 0.5 + 1.0
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            m = cols < N
            y = tl.load(Y + cols, mask=m, other=0.)
            x = tl.load(X + cols, mask=m, other=0.).to(tl.float32)
            tl.store(Y + cols, y + x * t - k * 0.125, mask=m)
"#;

/// With `CompileOptions::bcast_in_loop` from the first compile (otherwise the second try
/// of a refused kernel), wide loops broadcast their scalars from memory inside the loop:
/// the same bits as the usual wide loops and as 128-bit code, for fp32, fp16 and bf16 in
/// 8-lane tiles and the half types in 16, checked and unchecked, on rows that are not
/// multiples of the tile.
fn broadcasts_inside_loops<T: Float>(lanes: u8, block: usize) {
    let module = |wide, bcast_in_loop| {
        lnc::Jit::with_options(lnc::CompileOptions { lanes, wide, bcast_in_loop, ..Default::default() })
            .module("broadcasts.py", BROADCASTS)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let modules = [module(true, true), module(true, false), module(false, false)];
    let (two, nest) = (
        format!("*{t},*fp32,*fp32,*fp32,i32,fp32,{block}", t = T::SIG),
        format!("*{t},*fp32,i32,i32,fp32,{block}", t = T::SIG),
    );
    let kernels: Vec<_> = modules
        .iter()
        .map(|m| {
            let k = |name, sig: &str| m.kernel(name, sig).unwrap_or_else(|e| panic!("{e}"));
            (k("two_loops", &two), k("nested", &nest))
        })
        .collect();
    if lnc::computes_wide() {
        // Inside the loops, a broadcast per use: more instructions widened, unless the
        // usual compile was refused (Cranelift spilled a broadcast) and took the second
        // try, which has them too: its listing says so.
        let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], checked: true, ..Default::default() };
        for (name, sig, forced, usual) in [
            ("two_loops", &two, &kernels[0].0, &kernels[1].0),
            ("nested", &nest, &kernels[0].1, &kernels[1].1),
        ] {
            assert!(usual.widened_instructions() > 0, "{}", T::SIG);
            let asm = modules[1].dump(name, sig, &req).unwrap_or_else(|e| panic!("{e}"));
            // The results stored only where an extraction was what was refused.
            for line in asm[0].text.lines().filter(|l| l.contains("with its loops' results stored:")) {
                assert!(line.contains("results stored: the extraction"), "{name} {}: {line}", T::SIG);
            }
            if asm[0].text.contains("compiled again with its loops' results stored") {
                // Another try first (the loops' results stored): not the same code.
                assert!(forced.widened_instructions() > 0, "{name} {}", T::SIG);
            } else if asm[0]
                .text
                .contains("refused, the kernel compiled again with its broadcasts inside the loops")
            {
                assert_eq!(forced.widened_instructions(), usual.widened_instructions(), "{name} {}", T::SIG);
            } else {
                assert!(forced.widened_instructions() > usual.widened_instructions(), "{name} {}", T::SIG);
            }
        }
    }
    let mut rng = rng();
    for (m, n) in [(3usize, 1usize), (5, 17), (4, 1000), (2, 4097)] {
        let x: Vec<T> = randn(&mut rng, m * n, -0.3, 1.5).into_iter().map(T::from_f32).collect();
        let s0 = randn(&mut rng, m, 0.7, 2.0);
        for checked in [true, false] {
            let launch = |k: &lnc::Kernel, args: &[lnc::Arg]| {
                if checked {
                    k.launch(m as u32, args).unwrap_or_else(|e| panic!("{e}"));
                } else {
                    // SAFETY: every buffer holds the rows the kernel touches.
                    unsafe { k.launch_unchecked(m as u32, args) }.unwrap_or_else(|e| panic!("{e}"));
                }
            };
            let results: Vec<Vec<Vec<u64>>> = kernels
                .iter()
                .map(|(two, nest)| {
                    let (mut y, mut z, mut s) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n], s0.clone());
                    launch(two, &lnc::args![&x, &mut y, &mut z, &mut s, n as i32, 0.8125f32]);
                    let mut out = vec![bits(&y), bits(&z), bits(&s)];
                    for r in [0i32, 1, 3] {
                        let mut y = vec![0.5f32; m * n];
                        launch(nest, &lnc::args![&x, &mut y, n as i32, r, -1.25f32]);
                        out.push(bits(&y));
                    }
                    out
                })
                .collect();
            let what = format!("{} {lanes} lanes, {m}x{n}, checked {checked}", T::SIG);
            assert!(results[0] == results[2], "{what}: broadcasts inside the loops differ from 128-bit code");
            assert!(results[1] == results[2], "{what}: wide loops differ from 128-bit code");
        }
    }
}

#[test]
fn broadcasts_inside_wide_loops_give_the_same_bits() {
    broadcasts_inside_loops::<f32>(8, 64);
    broadcasts_inside_loops::<f16>(8, 64);
    broadcasts_inside_loops::<bf16>(8, 64);
    broadcasts_inside_loops::<f16>(16, 128);
    broadcasts_inside_loops::<bf16>(16, 128);
}

/// The kernels of `src` (file `name`) compiled with tiles of `lanes`, wide loops on or off.
fn module_from(name: &str, src: &str, lanes: u8, wide: bool) -> lnc::Module {
    lnc::Jit::with_options(lnc::CompileOptions { lanes, wide, ..Default::default() })
        .module(name, src)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A wide loop's result that the kernel also rounds: `tl.sum(x, axis=0)` of a 2-D block
/// leaves a 256- or 512-bit loop as a tile of `BN` lanes, whose lanes past the first four
/// are taken out by placeholders (lnc-clif's `wide::leave`). When those were `floor`,
/// `ceil` and `trunc`, a `tl.floor` or `tl.ceil` of that tile was the same Cranelift
/// operation on the same value as a placeholder: found by review, Cranelift merged the
/// two and the kernel stored the sum's lanes 4-7 (as extracted) for the floor of lanes
/// 0-3. Every output must be the floor / ceil of the sum stored beside it, and the bits
/// of 128-bit vectors.
const ROUNDED_SUMS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def rounded_sums(X, S, F, C, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    x = tl.load(X + rows[:, None] * BN + cols[None, :]).to(tl.float32)
    s = tl.sum(x, axis=0)
    tl.store(S + cols, s)
    tl.store(F + cols, tl.floor(s))
    tl.store(C + cols, tl.ceil(s))
"#;

#[test]
fn a_wide_loops_result_rounded_by_the_kernel_keeps_its_lanes() {
    let jit = |lanes, wide| module_from("rounded_sums.py", ROUNDED_SUMS, lanes, wide);
    // fp32 in 256 bits; fp16 in 512 where the host has AVX-512.
    for (lanes, t, bn) in [(8u8, "fp32", 8usize), (8, "fp32", 32), (16, "fp16", 16), (16, "fp16", 64)] {
        let (wide, narrow) = (jit(lanes, true), jit(lanes, false));
        let bm = 64usize;
        let sig = format!("*{t},*fp32,*fp32,*fp32,{bm},{bn}");
        let x: Vec<f32> = (0..bm * bn).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
        let run = |module: &lnc::Module| {
            let k = module.kernel("rounded_sums", &sig).unwrap_or_else(|e| panic!("{e}"));
            let (mut s, mut f, mut c) = (vec![f32::NAN; bn], vec![f32::NAN; bn], vec![f32::NAN; bn]);
            if t == "fp16" {
                let x: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
                k.launch(1, &lnc::args![&x, &mut s, &mut f, &mut c]).unwrap_or_else(|e| panic!("{e}"));
            } else {
                k.launch(1, &lnc::args![&x, &mut s, &mut f, &mut c]).unwrap_or_else(|e| panic!("{e}"));
            }
            (k.widened_instructions(), bits(&s), bits(&f), bits(&c))
        };
        let (widened, s, f, c) = run(&wide);
        let (none, s0, f0, c0) = run(&narrow);
        assert_eq!(none, 0);
        if lnc::computes_wide() {
            assert!(widened > 0, "{t} {bn}: not widened");
        }
        let v = |b: &[u64]| b.iter().map(|&b| f64::from_bits(b)).collect::<Vec<f64>>();
        for i in 0..bn {
            let (s, f, c) = (v(&s)[i], v(&f)[i], v(&c)[i]);
            assert!(f == s.floor() && c == s.ceil(), "{t} {bn} lane {i}: sum {s}, floor {f}, ceil {c}");
        }
        assert!(s == s0 && f == f0 && c == c0, "{t} {bn}: not the bits of 128-bit vectors");
    }
}

/// A wide loop's result stored under a mask the tiler cannot split off (`cols != skip`):
/// the store takes one branch when every lane is on (one vector store) and another lane
/// by lane, both using the lanes the extraction placeholders take out. Found by review:
/// Cranelift elaborated the placeholder again in the second branch, a copy without the
/// source location it was then recognized by, which stayed a `vroundps` (the floor of
/// lanes 0-3 stored as lanes 4-7). Both branches, in 256 and 512 bits, checked and not:
/// the bits of 128-bit vectors.
const MASKED_SUMS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def masked_sums(X, Y, skip, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    x = tl.load(X + rows[:, None] * BN + cols[None, :]).to(tl.float32)
    s = tl.sum(x, axis=0)
    tl.store(Y + cols, s, mask=cols != skip)
"#;

#[test]
fn a_wide_loops_result_stored_under_a_mask_keeps_its_lanes() {
    let jit = |lanes, wide| module_from("masked_sums.py", MASKED_SUMS, lanes, wide);
    for (lanes, t, bn) in [(8u8, "fp32", 8usize), (8, "fp32", 32), (16, "fp16", 16), (16, "fp16", 64)] {
        let (wide, narrow) = (jit(lanes, true), jit(lanes, false));
        let bm = 64usize;
        let sig = format!("*{t},*fp32,i32,{bm},{bn}");
        let x: Vec<f32> = (0..bm * bn).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let (kw, kn) = (
            wide.kernel("masked_sums", &sig).unwrap_or_else(|e| panic!("{e}")),
            narrow.kernel("masked_sums", &sig).unwrap_or_else(|e| panic!("{e}")),
        );
        if lnc::computes_wide() {
            assert!(kw.widened_instructions() > 0, "{t} {bn}: not widened");
        }
        let run = |k: &lnc::Kernel, skip: i32, checked: bool| {
            let mut y = vec![-7.0f32; bn];
            let args = if t == "fp16" { lnc::args![&xh, &mut y, skip] } else { lnc::args![&x, &mut y, skip] };
            if checked {
                k.launch(1, &args).unwrap_or_else(|e| panic!("{e}"));
            } else {
                // SAFETY: the kernel reads BM x BN elements of X and writes BN of Y.
                unsafe { k.launch_unchecked(1, &args) }.unwrap_or_else(|e| panic!("{e}"));
            }
            bits(&y)
        };
        // skip past the block: every lane stored by one vector store; inside: lane by lane.
        for skip in [bn as i32 + 5, 3, 5] {
            let want = run(&kn, skip, true);
            for checked in [true, false] {
                assert!(
                    run(&kw, skip, checked) == want,
                    "{t} {bn} skip {skip} checked {checked}: not the bits of 128-bit vectors"
                );
            }
        }
    }
}

/// Several results of one 2-D reduction loop (sums, a maximum, a sum of squares), rounded
/// and stored under masks, and reduced again (from review): in 512 bits the allocator
/// spills a result before its lanes are taken out, the extraction is refused and the
/// kernel compiled again with its results stored. Every way, the bits of 128-bit vectors.
const MULTI_SUMS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def multi_sums(X, Y, Z, T, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    x = tl.load(X + rows[:, None] * BN + cols[None, :]).to(tl.float32)
    s = tl.sum(x, axis=0)
    m = tl.max(x, axis=0)
    q = tl.sum(x * x, axis=0)
    tl.store(Y + cols, s + m, mask=cols < N)
    tl.store(Z + cols, tl.floor(s) * tl.ceil(m) - q, mask=cols < N)
    tl.store(T, tl.sum(s, axis=0) + tl.max(q, axis=0))
"#;

#[test]
fn several_results_of_a_wide_loop_refused_in_registers_leave_through_memory() {
    let jit = |lanes, wide| module_from("multi_sums.py", MULTI_SUMS, lanes, wide);
    let mut rng = rng();
    for (lanes, t, bn) in [(8u8, "fp32", 8usize), (8, "fp32", 64), (16, "fp16", 16), (16, "bf16", 64)] {
        let (wide, narrow) = (jit(lanes, true), jit(lanes, false));
        let bm = 32usize;
        let sig = format!("*{t},*fp32,*fp32,*fp32,i32,{bm},{bn}");
        let x = randn(&mut rng, bm * bn, 0.3, 3.0);
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let (kw, kn) = (
            wide.kernel("multi_sums", &sig).unwrap_or_else(|e| panic!("{e}")),
            narrow.kernel("multi_sums", &sig).unwrap_or_else(|e| panic!("{e}")),
        );
        if lnc::computes_wide() {
            assert!(kw.widened_instructions() > 0, "{t} {bn}: not widened");
        }
        for n in [bn as i32, bn as i32 - 3, 0] {
            let run = |k: &lnc::Kernel, checked: bool| {
                let (mut y, mut z, mut s) = (vec![f32::NAN; bn], vec![f32::NAN; bn], vec![f32::NAN; 1]);
                let args = match t {
                    "fp16" => lnc::args![&xh, &mut y, &mut z, &mut s, n],
                    "bf16" => lnc::args![&xb, &mut y, &mut z, &mut s, n],
                    _ => lnc::args![&x, &mut y, &mut z, &mut s, n],
                };
                if checked {
                    k.launch(1, &args).unwrap_or_else(|e| panic!("{e}"));
                } else {
                    // SAFETY: reads BM x BN of X, writes BN of Y and Z, one of T.
                    unsafe { k.launch_unchecked(1, &args) }.unwrap_or_else(|e| panic!("{e}"));
                }
                (bits(&y), bits(&z), bits(&s))
            };
            let want = run(&kn, true);
            for checked in [true, false] {
                assert!(
                    run(&kw, checked) == want,
                    "{t} {bn} n {n} checked {checked}: not the bits of 128-bit vectors"
                );
            }
        }
    }
}

/// Two kernels that store an fp16 row computed in fp32 and sum it after the store: one
/// sums only what it stored, the other reads `x` too, after a mean pass over the row.
const STORED_ROWS: &str = r#"
import triton
import triton.language as tl

@triton.jit
def stored_and_summed(X, Y, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.).to(tl.float32)
    y = x * 1.5 + 0.25
    tl.store(Y + row * N + cols, y, mask=cols < N)
    tl.store(S + row, tl.sum(tl.where(cols < N, y * y, 0.0), axis=0))

@triton.jit
def stored_then_read(X, Y, S, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    y = (x - mean) * 2.0
    tl.store(Y + row * N + cols, y, mask=cols < N)
    tl.store(S + row, tl.sum(tl.where(cols < N, y * x, 0.0), axis=0))
"#;

/// [`STORED_ROWS`] compiled with `opts` and with 128-bit vectors only.
fn stored_rows_modules(opts: lnc::CompileOptions) -> (lnc::Module, lnc::Module) {
    let module = |opts: lnc::CompileOptions| {
        lnc::Jit::with_options(opts).module("stored.py", STORED_ROWS).unwrap_or_else(|e| panic!("{e}"))
    };
    (module(opts.clone()), module(lnc::CompileOptions { wide: false, ..opts }))
}

/// The text of stage dump `req` of `kernel` of `module` at `sig`.
fn dumped(module: &lnc::Module, kernel: &str, sig: &str, req: &lnc::DumpRequest) -> String {
    module.dump(kernel, sig, req).unwrap_or_else(|e| panic!("{e}")).remove(0).text
}

/// Conversions to fp16 stored non-temporally in `mc` (`vcvtps2ph` then `vmovntdq`).
fn streamed_f16_stores(mc: &str) -> usize {
    let lines: Vec<&str> = mc.lines().collect();
    lines.windows(2).filter(|w| w[0].contains("vcvtps2ph") && w[1].contains("vmovntdq")).count()
}

/// `kernel` of [`STORED_ROWS`] in `module` on `rows` rows of `x` of length `n`: the
/// instructions widened, the bits of y (poisoned past the rows) and of the sums.
fn run_stored_rows(
    module: &lnc::Module,
    kernel: &str,
    x: &[f16],
    rows: usize,
    n: usize,
) -> (u32, Vec<u16>, Vec<u32>) {
    let sig = format!("*fp16,*fp16,*fp32,i32,{}", n.next_power_of_two());
    let k = module.kernel(kernel, &sig).unwrap_or_else(|e| panic!("{e}"));
    let mut y = vec![f16::from_bits(0x7e5a); rows * n + 8];
    let mut s = vec![f32::NAN; rows];
    k.launch(rows as u32, &lnc::args![x, &mut y, &mut s, n as i32]).unwrap_or_else(|e| panic!("{e}"));
    assert!(y[rows * n..].iter().all(|&b| b.to_bits() == 0x7e5a), "{kernel} N = {n}: written past the rows");
    (
        k.widened_instructions(),
        y.iter().map(|v| v.to_bits()).collect(),
        s.iter().map(|v| v.to_bits()).collect(),
    )
}

/// `fp16` stores of 256-bit loops convert into the stored register and store it
/// (`vcvtps2ph xmm, ymm` then `vmovdqu`, or `vmovntdq` where the loop streams) where
/// nothing reads that register after the store (lnc-clif's `widen`): all of the seed
/// forward's. A kernel that sums what it stored gives the bits of 128-bit vectors
/// whichever form each store took.
#[test]
fn fp16_stores_of_256_bit_loops_convert_in_their_register() {
    if !lnc::computes_wide() || !lnc::converts_f16_natively() {
        return;
    }
    let eight = lnc::CompileOptions { lanes: 8, stream_threshold: u64::MAX, ..Default::default() };
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Mc], checked: true, ..Default::default() };
    let fwd = |t: usize| format!("*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,{t}");
    let seed = seed_module(&lnc::Jit::with_options(eight.clone()));
    let mc = dumped(&seed, "_layer_norm_fwd_fused", &fwd(1024), &req);
    let wide_stores: Vec<&str> =
        mc.lines().filter(|l| l.contains("vcvtps2ph") && l.contains("%ymm")).collect();
    assert!(!wide_stores.is_empty(), "{mc}");
    assert!(wide_stores.iter().all(|l| l.contains(",%xmm")), "a memory form left: {wide_stores:?}");
    // Long rows store in their loops too (`TileOptions::f16_stores`), non-temporally in the
    // loop's streaming copy (lnc-tile's `stream`).
    let streaming =
        seed_module(&lnc::Jit::with_options(lnc::CompileOptions { stream_threshold: 0, ..eight.clone() }));
    let mc = dumped(&streaming, "_layer_norm_fwd_fused", &fwd(4096), &req);
    assert!(streamed_f16_stores(&mc) >= 2, "{mc}");
    let lir_req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
    let lir = dumped(&streaming, "_layer_norm_fwd_fused", &fwd(4096), &lir_req);
    assert!(!lir.contains("row_store"), "{lir}");
    // The dx kernel's streaming loop stores dx with both of its stores non-temporal (one
    // left cached made the kernel 16 times slower: lnc-clif's `widen` streams all or none).
    let dx_sig = "*fp16,*fp16,*fp16,*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,*i32,i32,i32,fp32,256,2048";
    let dx =
        dumped(&streaming, "_layer_norm_bwd_dx_fused", dx_sig, &lnc::DumpRequest { checked: false, ..req });
    assert_eq!(streamed_f16_stores(&dx), 2, "{dx}");
    assert!(!dx.lines().any(|l| l.contains("vcvtps2ph") && l.contains("%ymm") && l.contains("(%")), "{dx}");
    let (wide, narrow) = stored_rows_modules(eight);
    let mut rng = rng();
    for n in [8usize, 61, 1000, 1024] {
        let rows = 7;
        let x: Vec<f16> = randn(&mut rng, rows * n, 0.0, 2.0).into_iter().map(f16::from_f32).collect();
        let (widened, y, s) = run_stored_rows(&wide, "stored_and_summed", &x, rows, n);
        let (_, y128, s128) = run_stored_rows(&narrow, "stored_and_summed", &x, rows, n);
        assert!(widened > 0, "N = {n}: no loop widened");
        assert!(y == y128, "N = {n}: y differs from 128-bit vectors");
        assert_eq!(s, s128, "N = {n}");
        for (k, &v) in x.iter().enumerate() {
            assert_eq!(y[k], f16::from_f32(v.to_f32() * 1.5 + 0.25).to_bits(), "N = {n}, element {k}");
        }
    }
}

/// A long fp16 row whose stored value is read again after its store cannot stream from
/// its 256-bit loop (its register lives on, lnc-clif's `widen`): the kernel is tiled again
/// without `f16_stores`, and the row helper streams the row. Found in review (streaming
/// silently off for the whole function); the bits are those of 128-bit vectors.
#[test]
fn a_long_fp16_row_read_after_its_store_streams_through_the_row_helper() {
    if !lnc::computes_wide() || !lnc::converts_f16_natively() {
        return;
    }
    let (wide, narrow) =
        stored_rows_modules(lnc::CompileOptions { lanes: 8, stream_threshold: 0, ..Default::default() });
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Lir], checked: true, ..Default::default() };
    let lir = dumped(&wide, "stored_then_read", "*fp16,*fp16,*fp32,i32,4096", &req);
    assert!(lir.contains("row_store"), "{lir}");
    let mut rng = rng();
    for n in [1000usize, 4096] {
        let rows = 5;
        let x: Vec<f16> = randn(&mut rng, rows * n, 0.5, 2.0).into_iter().map(f16::from_f32).collect();
        let (_, y, s) = run_stored_rows(&wide, "stored_then_read", &x, rows, n);
        let (_, y128, s128) = run_stored_rows(&narrow, "stored_then_read", &x, rows, n);
        assert!(y == y128, "N = {n}: y differs from 128-bit vectors");
        assert_eq!(s, s128, "N = {n}");
    }
}

/// On a host with AVX2 (and without AVX-512), the seed forward and dx kernels in bf16
/// round their output tiles in their 256-bit loops and store each through a pack into a
/// register (`vextracti128`, `vpackusdw`; AVX2 has no `vpmovdw`) instead of the row helper, and
/// stream them non-temporally when the launch writes enough. Their bits are those of
/// 128-bit vectors and of the `half` crate (the other tests of this file).
#[test]
fn bf16_stores_of_256_bit_loops_round_in_the_loop() {
    if !lnc::computes_wide() || lnc::computes_zmm() {
        return;
    }
    let req = |stage| lnc::DumpRequest { stages: vec![stage], checked: true, ..Default::default() };
    let fwd = |t: usize| format!("*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,{t}");
    let dx = "*bf16,*bf16,*bf16,*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,*i32,i32,i32,fp32,256,2048";
    for threshold in [u64::MAX, 0] {
        let opts = lnc::CompileOptions { stream_threshold: threshold, ..Default::default() };
        let seed = seed_module(&lnc::Jit::with_options(opts));
        for (kernel, sig) in [
            ("_layer_norm_fwd_fused", fwd(1024)),
            ("_layer_norm_fwd_fused", fwd(4096)),
            ("_layer_norm_bwd_dx_fused", dx.to_string()),
        ] {
            let lir = dumped(&seed, kernel, &sig, &req(lnc::Stage::Lir));
            assert!(!lir.contains("row_store"), "{kernel} {sig}:\n{lir}");
            let mc = dumped(&seed, kernel, &sig, &req(lnc::Stage::Mc));
            let lines: Vec<&str> = mc.lines().collect();
            let packs: Vec<&[&str]> =
                lines.windows(3).filter(|w| w[0].contains("vextracti128 $1,%ymm")).collect();
            assert!(!packs.is_empty(), "{kernel} {sig}:\n{mc}");
            for w in &packs {
                assert!(w[1].contains("vpackusdw %xmm"), "{kernel} {sig}: {w:?}");
                assert!(
                    w[2].contains("vmovdqu   %xmm") || w[2].contains("vmovntdq  %xmm"),
                    "{kernel} {sig}: {w:?}"
                );
            }
            let streamed = packs.iter().filter(|w| w[2].contains("vmovntdq")).count();
            assert_eq!(streamed > 0, threshold == 0, "{kernel} {sig}: {streamed} streamed");
            let asm = dumped(&seed, kernel, &sig, &req(lnc::Stage::Asm));
            assert!(
                asm.contains("of the bf16 stores of the 256-bit loops above, rounded in the loop, pack"),
                "{asm}"
            );
        }
    }
}

/// A bf16 store whose 256-bit loop the proof refuses even with the broadcasts inside the
/// loops (here: thirteen scalars held across it, and the rounding's constants): the kernel
/// is tiled again with the row helper rounding its rows, and keeps 256-bit loops rather
/// than dropping to 128-bit vectors; the same bits either way.
#[test]
fn a_refused_bf16_store_loop_falls_back_to_the_row_helper_not_to_128_bits() {
    if !lnc::computes_wide() || lnc::computes_zmm() {
        return;
    }
    let terms: Vec<String> = (0..13).map(|k| format!("x * a{k}")).collect();
    let params: Vec<String> = (0..13).map(|k| format!("a{k}")).collect();
    let src = format!(
        "import triton\nimport triton.language as tl\n\n@triton.jit\n\
         def press(X, Y, N, {}, BLOCK: tl.constexpr):\n\
         \x20   offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
         \x20   x = tl.load(X + offs, mask=offs < N, other=0.)\n\
         \x20   tl.store(Y + offs, ({}).to(tl.bfloat16), mask=offs < N)\n",
        params.join(", "),
        terms.join(" + ")
    );
    let sig = format!("*fp32,*bf16,i32,{}1024", "fp32,".repeat(13));
    let (wide, narrow) = (module_from("press.py", &src, 8, true), module_from("press.py", &src, 8, false));
    let mut rng = rng();
    let n = 5000usize;
    let x: Vec<f32> = randn(&mut rng, n, 0.0, 1.0);
    let a: Vec<f32> = randn(&mut rng, 13, 0.0, 1.0);
    let run = |m: &lnc::Module| {
        let k = m.kernel("press", &sig).unwrap_or_else(|e| panic!("{e}"));
        let mut y = vec![bf16::from_bits(0x7fa5); n + 3];
        let args = lnc::args![
            &x, &mut y, n as i32, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
            a[12]
        ];
        k.launch(n.div_ceil(1024) as u32, &args).unwrap_or_else(|e| panic!("{e}"));
        (k.widened_instructions(), y.iter().map(|v| v.to_bits()).collect::<Vec<u16>>())
    };
    let ((widened, got), (_, want)) = (run(&wide), run(&narrow));
    assert!(widened > 0, "no 256-bit loop");
    assert!(got == want, "not the bits of 128-bit vectors");
    assert!(got[n..].iter().all(|&b| b == 0x7fa5), "written past n");
}

/// The SSE instructions (no VEX) of the machine code listing `mc`: each waits for the
/// high halves of the vector registers that wide code leaves set.
fn sse_instructions(mc: &str) -> Vec<&str> {
    mc.lines()
        .filter(|l| {
            let Some((_, ins)) = l.split_once(':') else { return false };
            let mnemonic = ins.split_whitespace().next().unwrap_or("");
            !mnemonic.starts_with('v') && ins.contains("%xmm")
        })
        .collect()
}

/// Scalar conversions between floats and integers after a wide loop: Cranelift's
/// sequences for them (`fcvt_to_sint_sat`, `fcvt_to_uint_sat`, `fcvt_from_uint`) are SSE.
const CASTS: &str = r#"
import triton
import triton.language as tl


@triton.jit
def casts(X, Y, I, U, F, N, K, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.)
    tl.store(Y + cols, x * 2.0, mask=cols < N)
    s = tl.sum(x, axis=0)
    tl.store(I, s.to(tl.int32))
    tl.store(U, s.to(tl.uint32))
    tl.store(F, K.to(tl.float32))
"#;

/// Code with wide loops has no SSE instruction left (lnc-clif's `vex`): Cranelift's
/// register moves, its `select` of floats (a jump over a `movaps`), its spills and
/// reloads of vector registers, its sequence of a scalar `fmax` and those of its
/// conversions are encoded again with VEX. The seed's three kernels, TensorRT-LLM's layer
/// norm with the difference of squares (`max(var, 0)`) and ttnn's post-all-gather kernel,
/// in fp32, fp16 and bf16, and [`CASTS`] in fp32, checked and not; the seed forward's
/// `select(N < BLOCK_SIZE, …)` is one of them, and the half kernels spill vector
/// registers.
#[test]
fn no_sse_instruction_is_left_in_code_with_wide_loops() {
    if !lnc::computes_wide() {
        return;
    }
    let jit = lnc::Jit::new();
    let seed = seed_module(&jit);
    let module = |name: &str, src: &str| jit.module(name, src).unwrap_or_else(|e| panic!("{e}"));
    let trt =
        module("trtllm_layer_norm.py", include_str!("../../crates/lnc-nn/kernels/trtllm_layer_norm.py"));
    let ttnn = module("ttnn_distributed.py", include_str!("../../crates/lnc-nn/kernels/ttnn_distributed.py"));
    let casts = module("casts.py", CASTS);
    let mut encoded = 0;
    for t in ["fp32", "fp16", "bf16"] {
        let kernels = [
            (&seed, "_layer_norm_fwd_fused", format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,1024")),
            (
                &seed,
                "_layer_norm_bwd_dx_fused",
                format!("*{t},*{t},*{t},*{t},*{t},*{t},*{t},*fp32,*fp32,*i32,i32,i32,fp32,256,1024"),
            ),
            (&seed, "_layer_norm_bwd_dwdb", format!("*{t},*{t},*{t},*{t},i32,i32,32,128")),
            (&trt, "layer_norm", format!("*{t},*{t},*{t},*{t},*fp32,*fp32,i32,i32,fp32,True,True,True,1024")),
            (
                &ttnn,
                "post_all_gather",
                format!("*{t},*{t},*fp32,*{t},*{t},i32,i32,i32,i32,i32,fp32,True,True,1024"),
            ),
        ];
        // In half precision its loop is not a wide one.
        let casts =
            (t == "fp32").then(|| (&casts, "casts", "*fp32,*fp32,*i32,*u32,*fp32,i32,u64,1024".to_string()));
        for (module, kernel, sig) in kernels.into_iter().chain(casts) {
            for checked in [true, false] {
                let req = |stage| lnc::DumpRequest { stages: vec![stage], checked, ..Default::default() };
                let mc = dumped(module, kernel, &sig, &req(lnc::Stage::Mc));
                assert!(mc.contains("%ymm") || mc.contains("%zmm"), "{kernel} {sig}: no wide code");
                let sse = sse_instructions(&mc);
                assert!(sse.is_empty(), "{kernel} {sig} checked {checked}: {sse:#?}");
                let asm = dumped(module, kernel, &sig, &req(lnc::Stage::Asm));
                encoded += asm
                    .lines()
                    .filter_map(|l| l.strip_prefix("; ")?.split_once(" SSE instructions that Cranelift"))
                    .map(|(n, _)| n.parse::<usize>().unwrap_or_else(|e| panic!("{n}: {e}")))
                    .sum::<usize>();
            }
        }
    }
    // Cranelift's listing, before the rewrite, has them, and the notes count them.
    assert!(encoded > 0, "no SSE instruction encoded again");
}
