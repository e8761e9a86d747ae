//! `lnc run` on half-precision `.npy` arrays: `float16` arrays pass as `*fp16` (the
//! signature inferred from them), `uint16` arrays holding bf16 bit patterns pass as
//! `*bf16` when the signature says so, and the outputs come back in the same forms.

use std::path::Path;
use std::process::Command;

use half::{bf16, f16};
use npyz::WriterBuilder;
use rand::{Rng, SeedableRng};

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");
const M: usize = 5;
const N: usize = 300;

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("lnc-cli-{name}-")).tempdir().unwrap()
}

fn save<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(f).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// The array's dtype descriptor (`<f2`, `<u2`…), shape and elements.
fn load<T: npyz::Deserialize>(path: &Path) -> (String, Vec<u64>, Vec<T>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let descr = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => panic!("{other:?}"),
    };
    let shape = npy.shape().to_vec();
    (descr, shape, npy.into_vec::<T>().unwrap())
}

/// The forward pass in float64 on the given (already rounded) inputs.
fn reference(x: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; M * N];
    for r in 0..M {
        let row = &x[r * N..(r + 1) * N];
        let mu = row.iter().sum::<f64>() / N as f64;
        let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / N as f64;
        let rs = 1.0 / (var + 1e-5).sqrt();
        for c in 0..N {
            y[r * N + c] = (row[c] - mu) * rs * w[c] + b[c];
        }
    }
    y
}

/// Runs the seed's forward kernel on the arrays of `dir`; `sig` overrides the inferred
/// signature.
fn run_forward(dir: &Path, sig: Option<&str>) {
    let arg = |name: &str| format!("{name}=@{}", dir.join(format!("{name}.npy")).display());
    let out = dir.join("out");
    let mut args: Vec<String> = vec![
        "run".into(),
        SEED.into(),
        "--kernel".into(),
        "_layer_norm_fwd_fused".into(),
        "--grid".into(),
        M.to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    for name in ["X", "Y", "W", "B", "M", "V"] {
        args.extend(["--arg".into(), arg(name)]);
    }
    for a in [format!("stride={N}"), format!("N={N}"), "eps=1e-5".into(), "BLOCK_SIZE=512".into()] {
        args.extend(["--arg".into(), a]);
    }
    if let Some(s) = sig {
        args.extend(["--signature".into(), s.into()]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_lnc")).args(&args).output().expect("lnc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut v = |n: usize, mean: f32, std: f32| -> Vec<f32> {
        (0..n).map(|_| mean + std * (rng.random::<f32>() * 2.0 - 1.0) * 1.7).collect()
    };
    (v(M * N, -2.3, 0.5), v(N, 1.0, 0.3), v(N, 0.0, 0.5))
}

#[test]
fn run_reads_and_writes_float16_arrays() {
    let dir = tempdir("fp16");
    let d = dir.path();
    let (x, w, b) = inputs();
    let h = |v: &[f32]| -> Vec<f16> { v.iter().map(|&x| f16::from_f32(x)).collect() };
    let (x, w, b) = (h(&x), h(&w), h(&b));
    save(&d.join("X.npy"), &[M as u64, N as u64], &x);
    save(&d.join("Y.npy"), &[M as u64, N as u64], &vec![f16::NAN; M * N]);
    save(&d.join("W.npy"), &[N as u64], &w);
    save(&d.join("B.npy"), &[N as u64], &b);
    save(&d.join("M.npy"), &[M as u64], &[f32::NAN; M]);
    save(&d.join("V.npy"), &[M as u64], &[f32::NAN; M]);
    run_forward(d, None);
    let (descr, shape, y) = load::<f16>(&d.join("out/Y.npy"));
    assert_eq!((descr.as_str(), shape), ("<f2", vec![M as u64, N as u64]));
    let f = |v: &[f16]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    let want = reference(&f(&x), &f(&w), &f(&b));
    for (i, (g, w)) in y.iter().zip(&want).enumerate() {
        // Computed in fp32, rounded once to fp16: within half an ulp (plus fp32 noise).
        let tol = w.abs() * 2f64.powi(-11) * 1.01 + 1e-5;
        assert!((g.to_f64() - w).abs() <= tol, "Y[{i}] = {g}, expected {w}");
    }
    let (descr, _, mean) = load::<f32>(&d.join("out/M.npy"));
    assert_eq!(descr, "<f4");
    assert!(mean.iter().all(|m| (m + 2.3).abs() < 0.5), "{mean:?}");
}

#[test]
fn run_passes_uint16_arrays_as_bf16() {
    let dir = tempdir("bf16");
    let d = dir.path();
    let (x, w, b) = inputs();
    let h = |v: &[f32]| -> Vec<u16> { v.iter().map(|&x| bf16::from_f32(x).to_bits()).collect() };
    let (x, w, b) = (h(&x), h(&w), h(&b));
    save(&d.join("X.npy"), &[M as u64, N as u64], &x);
    save(&d.join("Y.npy"), &[M as u64, N as u64], &vec![0xFFFFu16; M * N]);
    save(&d.join("W.npy"), &[N as u64], &w);
    save(&d.join("B.npy"), &[N as u64], &b);
    save(&d.join("M.npy"), &[M as u64], &[f32::NAN; M]);
    save(&d.join("V.npy"), &[M as u64], &[f32::NAN; M]);
    run_forward(d, Some("*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,512"));
    let (descr, shape, y) = load::<u16>(&d.join("out/Y.npy"));
    assert_eq!((descr.as_str(), shape), ("<u2", vec![M as u64, N as u64]));
    let f = |v: &[u16]| -> Vec<f64> { v.iter().map(|&x| bf16::from_bits(x).to_f64()).collect() };
    let want = reference(&f(&x), &f(&w), &f(&b));
    for (i, (&g, w)) in y.iter().zip(&want).enumerate() {
        let g = bf16::from_bits(g).to_f64();
        let tol = w.abs() * 2f64.powi(-8) * 1.01 + 1e-5;
        assert!((g - w).abs() <= tol, "Y[{i}] = {g}, expected {w}");
    }
    // The inputs come back unchanged, as uint16.
    let (descr, _, xb) = load::<u16>(&d.join("out/X.npy"));
    assert_eq!((descr.as_str(), xb), ("<u2", x));
}
