//! End to end: the seed's forward layer-norm kernel, compiled from the tutorial file as it
//! is, run on random data of awkward sizes against a float64 reference.

mod common;

use common::*;

const SIZES: [(usize, usize); 5] = [(1, 1), (3, 17), (151, 1000), (64, 1024), (7, 4097)];

#[test]
fn forward_matches_float64_reference() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    for (m, n) in SIZES {
        let block = n.next_power_of_two();
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
        let k = module.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));
        let x = randn(&mut rng, m * n, -2.3, 0.5);
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
        let eps = 1e-5f32;
        k.launch(m as u32, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, eps])
            .unwrap_or_else(|e| panic!("{e}"));
        let (ry, rmean, rrstd) = layer_norm_ref(&x, &w, &b, n, eps as f64);
        assert_close(&format!("y ({m}x{n})"), &y, &ry, 1e-5, 1e-5);
        assert_close(&format!("mean ({m}x{n})"), &mean, &rmean, 1e-5, 1e-6);
        assert_close(&format!("rstd ({m}x{n})"), &rstd, &rrstd, 1e-5, 1e-5);
    }
}

/// The `fma` instructions of `kernel`'s Cranelift IR as lnc generates it.
fn clif_fmas(module: &lnc::Module, kernel: &str, sig: &str) -> usize {
    let req = lnc::DumpRequest { stages: vec![lnc::Stage::Clif], ..Default::default() };
    let text = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{e}"))[0].text.clone();
    text.split_once(lnc::CLIF_AFTER).expect("both halves").0.matches(" = fma ").count()
}

/// `kernel` of `src` compiled with `fused_subs` on or off, and the `fma` instructions of its
/// Cranelift IR (none when off).
fn compile_fused(
    fused_subs: bool,
    src: &str,
    kernel: &str,
    sig: &str,
) -> (std::sync::Arc<lnc::Kernel>, usize) {
    let jit = lnc::Jit::with_options(lnc::CompileOptions { fused_subs, ..Default::default() });
    let module = jit.module(format!("{kernel}.py"), src).unwrap();
    let fmas = clif_fmas(&module, kernel, sig);
    assert!(fused_subs || fmas == 0, "{fmas} fma with fused_subs off");
    (module.kernel(kernel, sig).unwrap_or_else(|e| panic!("{e}")), fmas)
}

/// `CompileOptions::fused_subs` moves some of the variance loop's subtractions onto the
/// multiply units as `fma(x, 1, -mean)`: the same operation to the bit. Outputs with and
/// without it must be identical bits, on rows holding NaNs with payloads, infinities,
/// signed zeros, subnormals and values of every scale, at lengths around the unrolled
/// loop's 16 lanes.
/// Values a subtraction must keep to the bit: NaNs of both signs with several payloads,
/// infinities, signed zeros, subnormals, numbers of every scale.
const SPECIALS: [f32; 16] = [
    f32::from_bits(0x7fc0_1234),
    f32::from_bits(0xffc0_0042),
    f32::from_bits(0x7fc0_0001),
    f32::from_bits(0xffc0_0002),
    f32::from_bits(0x7fc1_2345),
    f32::from_bits(0xffd0_0000),
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    f32::from_bits(1),
    -f32::MIN_POSITIVE / 3.0,
    -3.25e-40,
    1.5,
    3.0e38,
    -1.0e-30,
];

#[test]
fn fused_subs_change_no_bit() {
    // In 128-bit vectors: the loops computed in 256 bits (`CompileOptions::wide`) keep
    // their subtractions.
    let narrow = lnc::CompileOptions::default().narrow();
    let fused = lnc::Jit::with_options(lnc::CompileOptions { fused_subs: true, ..narrow.clone() });
    let plain = lnc::Jit::with_options(lnc::CompileOptions { fused_subs: false, ..narrow });
    let src = seed_source();
    let (fused, plain) = (fused.module("ln.py", src.clone()).unwrap(), plain.module("ln.py", src).unwrap());
    let mut rng = rng();
    for (m, n) in [(40usize, 1000usize), (17, 33), (9, 4097)] {
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two());
        let kf = fused.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));
        let kp = plain.kernel("_layer_norm_fwd_fused", &sig).unwrap_or_else(|e| panic!("{e}"));
        let clif = |m: &lnc::Module| clif_fmas(m, "_layer_norm_fwd_fused", &sig);
        assert_eq!(clif(&plain), 0);
        if std::arch::is_x86_feature_detected!("fma") {
            // The variance loop, unrolled 4 times: two of its four subtractions, each one
            // `vfmsub` in the machine code.
            assert_eq!(clif(&fused), 2, "{m}x{n}");
            let req = lnc::DumpRequest { stages: vec![lnc::Stage::Asm], ..Default::default() };
            let asm = fused.dump("_layer_norm_fwd_fused", &sig, &req).unwrap_or_else(|e| panic!("{e}"))[0]
                .text
                .clone();
            assert_eq!(asm.matches("vfmsub").count(), 2, "{asm}");
        }
        let mut x = randn(&mut rng, m * n, -2.3, 0.5);
        // Rows 0 and 1 stay finite; the others get special values, one row per value,
        // then a few of each scattered.
        for (r, &v) in SPECIALS.iter().enumerate() {
            let row = 2 + r % (m - 2);
            x[row * n + (r * 7919) % n] = v;
        }
        for (i, xi) in x.iter_mut().enumerate().skip(2 * n).step_by(97) {
            *xi *= [1e-20f32, 1e20, -1e-38, 7.0][i % 4];
        }
        let w = randn(&mut rng, n, 1.0, 0.3);
        let b = randn(&mut rng, n, 0.0, 0.5);
        let run = |k: &lnc::Kernel| {
            let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
            k.launch(
                m as u32,
                &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            [y, mean, rstd].map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>())
        };
        let (a, p) = (run(&kf), run(&kp));
        for (name, (a, p)) in ["y", "mean", "rstd"].iter().zip(a.iter().zip(&p)) {
            if let Some(i) = (0..a.len()).find(|&i| a[i] != p[i]) {
                panic!("{m}x{n} {name}[{i}]: fused {:#010x} != plain {:#010x}", a[i], p[i]);
            }
        }
        // The special rows did reach the loop: their statistics are not finite.
        assert!(p[2][2..].iter().any(|&r| !f32::from_bits(r).is_finite()), "{m}x{n}: no special row");
    }
}

const VAR64: &str = "@triton.jit
def var64(X, Out, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.)
    m = tl.sum(x, axis=0) / N
    d = tl.where(cols < N, x - m, 0.)
    tl.store(Out + row, tl.sum(d * d, axis=0) / N)
";

/// The same in `fp64` (tiles of `f64x2` vectors): the variance loop's subtractions become
/// multiply-adds and the variances keep their bits, special values included.
#[test]
fn fused_subs_change_no_bit_in_fp64() {
    let (m, n) = (12usize, 333usize);
    let mut rng = rng();
    let mut x: Vec<f64> = randn(&mut rng, m * n, 5.0, 3.0).iter().map(|&v| v as f64 * 1.000_000_1).collect();
    for (r, v) in [f64::NAN, f64::INFINITY, -0.0, f64::from_bits(3), 1e300, -1e-300].into_iter().enumerate() {
        x[(r + 2) * n + r * 13] = v;
    }
    let mut outs = Vec::new();
    for fused_subs in [true, false] {
        let (k, fmas) = compile_fused(fused_subs, VAR64, "var64", "*fp64,*fp64,i32,512");
        if fused_subs && std::arch::is_x86_feature_detected!("fma") {
            assert!(fmas > 0);
        }
        let mut out = vec![f64::NAN; m];
        k.launch(m as u32, &lnc::args![&x, &mut out, n as i32]).unwrap_or_else(|e| panic!("{e}"));
        outs.push(out.iter().map(|v| v.to_bits()).collect::<Vec<u64>>());
    }
    assert_eq!(outs[0], outs[1]);
    assert!(outs[1][..2].iter().all(|&v| f64::from_bits(v).is_finite()) && outs[1][2] != outs[1][0]);
}

const MIX: &str = "@triton.jit
def mix(X, Y, O1, O2, O3, O4, O5, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m)
    y = tl.load(Y + offs, mask=m)
    tl.store(O1 + offs, x - y, mask=m)
    tl.store(O2 + offs, x - (-y), mask=m)
    tl.store(O3 + offs, (-x) - y, mask=m)
    tl.store(O4 + offs, y - x, mask=m)
    tl.store(O5 + offs, ((x + 1.0) + (y + 2.0)) + ((x + 3.0) + (y + 4.0)), mask=m)
";

/// Which NaN comes out of a subtraction: `vfmsub` returns the same one as `vsubps`, and
/// subtractions of a negated operand stay subtractions (Cranelift would fold the negation
/// into the multiply-add, which does not flip a NaN's sign as the negation does). The
/// additions leave room for all four subtractions to move; two may. Every pair of NaNs of
/// both signs and several payloads, numbers, infinities and zeros, stored straight from each
/// subtraction: the same bits with and without.
#[test]
fn fused_subs_keep_nan_bits() {
    let (x, y): (Vec<f32>, Vec<f32>) =
        SPECIALS.iter().flat_map(|&a| SPECIALS.iter().map(move |&b| (a, b))).unzip();
    let n = x.len();
    let mut outs = Vec::new();
    for fused_subs in [true, false] {
        let (k, fmas) =
            compile_fused(fused_subs, MIX, "mix", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,64");
        if fused_subs && std::arch::is_x86_feature_detected!("fma") {
            // In every vector copy of the body (streaming and cached, unrolled, the tail of
            // tiles): `x - y` and `y - x`, not the two with a negated operand.
            assert!(fmas > 0 && fmas.is_multiple_of(2), "{fmas} fma");
        }
        let mut o: [Vec<f32>; 5] = std::array::from_fn(|_| vec![0.0f32; n]);
        let [o1, o2, o3, o4, o5] = o.each_mut();
        k.launch(n.div_ceil(64) as u32, &lnc::args![&x, &y, o1, o2, o3, o4, o5, n as i32])
            .unwrap_or_else(|e| panic!("{e}"));
        outs.push(o.iter().map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>()).collect::<Vec<_>>());
    }
    for (k, (a, b)) in outs[0].iter().zip(&outs[1]).enumerate() {
        for i in 0..n {
            let (xi, yi) = (x[i].to_bits(), y[i].to_bits());
            assert_eq!(a[i], b[i], "O{}: x = {xi:#010x}, y = {yi:#010x}", k + 1);
        }
    }
}

#[test]
fn row_stride_larger_than_n_leaves_padding_untouched() {
    // Rows padded to a stride of n + 5: the padding must keep its poison.
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let mut rng = rng();
    let (m, n, stride) = (9usize, 300usize, 305usize);
    let k = module
        .kernel("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,512")
        .unwrap();
    let x = randn(&mut rng, m * stride, 3.0, 2.0);
    let w = randn(&mut rng, n, 1.0, 0.3);
    let b = randn(&mut rng, n, 0.0, 0.5);
    let (mut y, mut mean, mut rstd) = (vec![-7.0f32; m * stride], vec![f32::NAN; m], vec![f32::NAN; m]);
    k.launch(
        m as u32,
        &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, stride as i32, n as i32, 1e-5f32],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dense: Vec<f32> = (0..m).flat_map(|r| x[r * stride..r * stride + n].to_vec()).collect();
    let (ry, _, _) = layer_norm_ref(&dense, &w, &b, n, 1e-5);
    for r in 0..m {
        assert_close("y", &y[r * stride..r * stride + n], &ry[r * n..(r + 1) * n], 1e-5, 1e-5);
        assert!(
            y[r * stride + n..(r + 1) * stride].iter().all(|&v| v == -7.0),
            "padding of row {r} was written"
        );
    }
}

#[test]
fn launch_errors_name_the_parameter() {
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let k = module
        .kernel("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,16")
        .unwrap();
    let x = vec![0.5f32; 16];
    let (mut y, w, b, mut mean, mut rstd) =
        (vec![0f32; 16], vec![1f32; 16], vec![0f32; 16], vec![0f32; 1], vec![0f32; 1]);
    let xi = vec![1i32; 16];
    let e = k
        .launch(1, &lnc::args![&xi, &mut y, &w, &b, &mut mean, &mut rstd, 16i32, 16i32, 1e-5f32])
        .unwrap_err();
    assert!(e.to_string().contains("parameter `X`"), "{e}");
    let e =
        k.launch(1, &lnc::args![&x, &y, &w, &b, &mut mean, &mut rstd, 16i32, 16i32, 1e-5f32]).unwrap_err();
    assert!(e.to_string().contains("`Y` is written"), "{e}");
    let e = k.launch(1, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, 16i32]).unwrap_err();
    assert!(e.to_string().contains("expected 9 arguments"), "{e}");
    let e = k
        .launch(1, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, 16i32, 3_000_000_000i64, 1e-5f32])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("parameter `N` is `i32` but the argument 3000000000 (i64) is out of its range"),
        "{e}"
    );
    let e = k
        .launch(1, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, 16i32, 1.5f32, 1e-5f32])
        .unwrap_err();
    assert!(e.to_string().contains("parameter `N` is `i32` but the argument is 1.5 (fp32)"), "{e}");
}

#[test]
fn out_of_bounds_store_names_the_source_line() {
    // N says 16 but Y holds 15 elements: the masked store's last lane is out of bounds.
    let jit = lnc::Jit::new();
    let module = seed_module(&jit);
    let k = module
        .kernel("_layer_norm_fwd_fused", "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,16")
        .unwrap();
    let x = vec![0.5f32; 16];
    let (mut y, w, b, mut mean, mut rstd) =
        (vec![0f32; 15], vec![1f32; 16], vec![0f32; 16], vec![0f32; 1], vec![0f32; 1]);
    let e = k
        .launch(1, &lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, 16i32, 16i32, 1e-5f32])
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, lnc::Error::OutOfBounds(_)), "{text}");
    assert!(text.contains("triton_05_layer_norm.py:43:"), "{text}");
    assert!(text.contains("tl.store(Y + cols, y, mask=mask)"), "{text}");
    assert!(text.contains("element offset 15 of `Y`"), "{text}");
}
