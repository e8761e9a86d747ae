//! The `lnc` binary, driven as a user would: exit codes, printed text, `.npy` files.

use std::path::Path;
use std::process::{Command, Output};

use npyz::WriterBuilder;
use rand::{Rng, SeedableRng};

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");
const FWD_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024";

fn lnc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lnc")).args(args).output().expect("lnc runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("lnc-cli-{name}-")).tempdir().unwrap()
}

fn save<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(f).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn load(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f32>().unwrap())
}

#[test]
fn check_lists_the_three_seed_kernels() {
    let o = lnc(&["check", SEED]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("3 kernels"), "{out}");
    for k in [
        "_layer_norm_fwd_fused(X, Y, W, B, M, V, stride, N, eps, BLOCK_SIZE: constexpr)",
        "_layer_norm_bwd_dx_fused(",
        "_layer_norm_bwd_dwdb(",
    ] {
        assert!(out.contains(k), "{k} missing from:\n{out}");
    }
}

#[test]
fn check_reports_syntax_errors_with_a_caret() {
    let dir = tempdir("check-err");
    let d = dir.path();
    let f = d.join("bad.py");
    std::fs::write(&f, "import triton\n@triton.jit\ndef k(X):\n    x = tl.load(X\n").unwrap();
    let o = lnc(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("bad.py:"), "{err}");
    assert!(err.contains('^'), "{err}");
}

#[test]
fn compile_prints_every_stage() {
    for stage in ["ast", "bir", "opt", "lir", "clif", "asm", "mc"] {
        let o = lnc(&[
            "compile",
            SEED,
            "--kernel",
            "_layer_norm_fwd_fused",
            "--signature",
            FWD_SIG,
            "--emit",
            stage,
        ]);
        assert!(o.status.success(), "--emit {stage}: {}", stderr(&o));
        assert!(stdout(&o).lines().count() > 5, "--emit {stage} printed:\n{}", stdout(&o));
    }
    let o = lnc(&[
        "compile",
        SEED,
        "--kernel",
        "_layer_norm_fwd_fused",
        "--signature",
        FWD_SIG,
        "--emit",
        "bir",
        "--emit",
        "lir",
    ]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("; ---- bir ----") && out.contains("; ---- lir ----"), "{out}");
}

#[test]
fn compile_rejects_a_bad_signature() {
    let o = lnc(&[
        "compile",
        SEED,
        "--kernel",
        "_layer_norm_fwd_fused",
        "--signature",
        "*fp32,i32",
        "--emit",
        "bir",
    ]);
    assert_eq!(o.status.code(), Some(1));
    // The caret is under the first parameter without an entry, in the kernel's source
    // (the message was rendered against the signature's text before).
    let e = stderr(&o);
    assert!(e.contains("the signature has 2 entries but `_layer_norm_fwd_fused` has 10 parameters"), "{e}");
    assert!(e.contains("triton_05_layer_norm.py:17:33"), "{e}");
    assert!(e.contains("def _layer_norm_fwd_fused(X, Y, W, B, M, V, stride, N, eps,"), "{e}");
    assert!(e.contains("^ no signature entry for this parameter"), "{e}");
    let o = lnc(&["compile", SEED, "--kernel", "nope", "--signature", FWD_SIG]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no @jit kernel named `nope`"), "{}", stderr(&o));
}

#[test]
fn run_forward_layer_norm_on_npy_files() {
    let dir = tempdir("run");
    let d = dir.path();
    let (m, n) = (151usize, 1000usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let x: Vec<f32> = (0..m * n).map(|_| -2.3 + rng.random::<f32>() - 0.5).collect();
    let w: Vec<f32> = (0..n).map(|_| rng.random::<f32>()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.random::<f32>() - 0.5).collect();
    save(&d.join("x.npy"), &[m as u64, n as u64], &x);
    save(&d.join("w.npy"), &[n as u64], &w);
    save(&d.join("b.npy"), &[n as u64], &b);
    save(&d.join("y.npy"), &[m as u64, n as u64], &vec![f32::NAN; m * n]);
    save(&d.join("m.npy"), &[m as u64], &vec![f32::NAN; m]);
    save(&d.join("v.npy"), &[m as u64], &vec![f32::NAN; m]);
    let a = |name: &str, file: &str| format!("{name}=@{}", d.join(file).display());
    let out = d.join("out");
    let args = [
        "run".to_string(),
        SEED.to_string(),
        "--kernel".into(),
        "_layer_norm_fwd_fused".into(),
        "--grid".into(),
        m.to_string(),
        "--arg".into(),
        a("X", "x.npy"),
        "--arg".into(),
        a("Y", "y.npy"),
        "--arg".into(),
        a("W", "w.npy"),
        "--arg".into(),
        a("B", "b.npy"),
        "--arg".into(),
        a("M", "m.npy"),
        "--arg".into(),
        a("V", "v.npy"),
        "--arg".into(),
        "stride=1000".into(),
        "--arg".into(),
        "N=1000".into(),
        "--arg".into(),
        "eps=1e-5".into(),
        "--arg".into(),
        "BLOCK_SIZE=1024".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = lnc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let (yshape, y) = load(&out.join("Y.npy"));
    let (_, mean) = load(&out.join("M.npy"));
    let (_, rstd) = load(&out.join("V.npy"));
    assert_eq!(yshape, vec![m as u64, n as u64]);
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + 1e-5).sqrt();
        assert!((mean[r] as f64 - mu).abs() < 1e-5, "mean[{r}]");
        assert!((rstd[r] as f64 - rs).abs() < 1e-5 * rs.max(1.0), "rstd[{r}]");
        for c in 0..n {
            let want = (row[c] as f64 - mu) * rs * w[c] as f64 + b[c] as f64;
            assert!((y[r * n + c] as f64 - want).abs() < 1e-5, "y[{r},{c}] = {} vs {want}", y[r * n + c]);
        }
    }
    // X was an input: it is written back unchanged.
    assert_eq!(load(&out.join("X.npy")).1, x);
}

#[test]
fn run_reports_a_missing_file_and_a_missing_argument() {
    let o = lnc(&[
        "run",
        SEED,
        "--kernel",
        "_layer_norm_fwd_fused",
        "--grid",
        "1",
        "--arg",
        "X=@/nonexistent.npy",
        "--out",
        "/tmp/x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--arg X: cannot read `/nonexistent.npy`"), "{}", stderr(&o));
    let o = lnc(&[
        "run",
        SEED,
        "--kernel",
        "_layer_norm_fwd_fused",
        "--grid",
        "1",
        "--arg",
        "N=3",
        "--out",
        "/tmp/x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no value for parameter `X` of `_layer_norm_fwd_fused`"), "{}", stderr(&o));
}

fn run_args(kernel: &str, grid: usize, args: &[(&str, String)], out: &Path) -> Output {
    let mut v: Vec<String> =
        vec!["run".into(), SEED.into(), "--kernel".into(), kernel.into(), "--grid".into(), grid.to_string()];
    for (name, value) in args {
        v.push("--arg".into());
        v.push(format!("{name}={value}"));
    }
    v.push("--out".into());
    v.push(out.display().to_string());
    let v: Vec<&str> = v.iter().map(String::as_str).collect();
    lnc(&v)
}

#[test]
fn run_backward_kernels_on_npy_files() {
    let dir = tempdir("run-bwd");
    let d = dir.path();
    let (m, n, group) = (37usize, 300usize, 4usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let mut f32s = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random::<f32>() - 0.5).collect() };
    let (x, dy, w, b) = (f32s(m * n), f32s(m * n), f32s(n), f32s(n));
    let mut mean = vec![0f32; m];
    let mut rstd = vec![0f32; m];
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().sum::<f32>() / n as f32;
        mean[r] = mu;
        rstd[r] = 1.0 / (row.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / n as f32 + 1e-5).sqrt();
    }
    let p = |f: &str| format!("@{}", d.join(f).display());
    save(&d.join("x.npy"), &[m as u64, n as u64], &x);
    save(&d.join("dy.npy"), &[m as u64, n as u64], &dy);
    save(&d.join("dx.npy"), &[m as u64, n as u64], &vec![f32::NAN; m * n]);
    save(&d.join("w.npy"), &[n as u64], &w);
    save(&d.join("b.npy"), &[n as u64], &b);
    save(&d.join("mean.npy"), &[m as u64], &mean);
    save(&d.join("rstd.npy"), &[m as u64], &rstd);
    save(&d.join("pdw.npy"), &[group as u64, n as u64], &vec![f32::NAN; group * n]);
    save(&d.join("pdb.npy"), &[group as u64, n as u64], &vec![f32::NAN; group * n]);
    save(&d.join("locks.npy"), &[2 * group as u64], &vec![0i32; 2 * group]);
    let out = d.join("out");
    let o = run_args(
        "_layer_norm_bwd_dx_fused",
        m,
        &[
            ("DX", p("dx.npy")),
            ("DY", p("dy.npy")),
            ("DW", p("pdw.npy")),
            ("DB", p("pdb.npy")),
            ("X", p("x.npy")),
            ("W", p("w.npy")),
            ("B", p("b.npy")),
            ("M", p("mean.npy")),
            ("V", p("rstd.npy")),
            ("Lock", p("locks.npy")),
            ("stride", n.to_string()),
            ("N", n.to_string()),
            ("eps", "1e-5".into()),
            ("GROUP_SIZE_M", group.to_string()),
            ("BLOCK_SIZE_N", "512".into()),
        ],
        &out,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, dx) = load(&out.join("DX.npy"));
    let (_, pdw) = load(&out.join("DW.npy"));
    let (_, pdb) = load(&out.join("DB.npy"));
    for r in 0..m {
        let xhat: Vec<f64> = (0..n).map(|c| (x[r * n + c] - mean[r]) as f64 * rstd[r] as f64).collect();
        let wdy: Vec<f64> = (0..n).map(|c| w[c] as f64 * dy[r * n + c] as f64).collect();
        let c1 = xhat.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = wdy.iter().sum::<f64>() / n as f64;
        for c in 0..n {
            let want = (wdy[c] - (xhat[c] * c1 + c2)) * rstd[r] as f64;
            assert!((dx[r * n + c] as f64 - want).abs() < 1e-4, "dx[{r},{c}] = {} vs {want}", dx[r * n + c]);
        }
    }
    // Group g accumulated rows g, g + group, ...: check its db partial sums.
    for g in 0..group {
        for c in 0..n {
            let want: f64 = (g..m).step_by(group).map(|r| dy[r * n + c] as f64).sum();
            assert!((pdb[g * n + c] as f64 - want).abs() < 1e-4, "db partial [{g},{c}]");
        }
    }

    // Then the dwdb kernel sums the partial buffers column by column.
    save(&d.join("pdw2.npy"), &[group as u64, n as u64], &pdw);
    save(&d.join("pdb2.npy"), &[group as u64, n as u64], &pdb);
    save(&d.join("fdw.npy"), &[n as u64], &vec![f32::NAN; n]);
    save(&d.join("fdb.npy"), &[n as u64], &vec![f32::NAN; n]);
    let out2 = d.join("out2");
    let o = run_args(
        "_layer_norm_bwd_dwdb",
        n.div_ceil(128),
        &[
            ("DW", p("pdw2.npy")),
            ("DB", p("pdb2.npy")),
            ("FINAL_DW", p("fdw.npy")),
            ("FINAL_DB", p("fdb.npy")),
            ("M", group.to_string()),
            ("N", n.to_string()),
            ("BLOCK_SIZE_M", "32".into()),
            ("BLOCK_SIZE_N", "128".into()),
        ],
        &out2,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, fdw) = load(&out2.join("FINAL_DW.npy"));
    let (_, fdb) = load(&out2.join("FINAL_DB.npy"));
    for c in 0..n {
        let want_dw: f64 = (0..group).map(|g| pdw[g * n + c] as f64).sum();
        let want_db: f64 = (0..group).map(|g| pdb[g * n + c] as f64).sum();
        assert!((fdw[c] as f64 - want_dw).abs() < 1e-4, "FINAL_DW[{c}]");
        assert!((fdb[c] as f64 - want_db).abs() < 1e-4, "FINAL_DB[{c}]");
    }
}

#[test]
fn compile_and_run_print_the_masked_lane_warning_and_still_succeed() {
    let dir = tempdir("lint");
    let d = dir.path();
    let f = d.join("var.py");
    std::fs::write(
        &f,
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef var(X, V, N, BLOCK: tl.constexpr):\n    \
         cols = tl.arange(0, BLOCK)\n    x = tl.load(X + cols, mask=cols < N, other=0.)\n    \
         xc = x - tl.sum(x, axis=0) / N\n    tl.store(V, tl.sum(xc * xc, axis=0) / N)\n",
    )
    .unwrap();
    let o = lnc(&["compile", f.to_str().unwrap(), "--kernel", "var", "--signature", "*fp32,*fp32,i32,16"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: `tl.sum` reads lanes the mask disabled"), "{err}");
    assert!(err.contains("var.py:9:"), "{err}");
    assert!(stdout(&o).contains("kernel @var"), "the dump still goes to stdout");

    save(&d.join("x.npy"), &[10], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
    save(&d.join("v.npy"), &[1], &[f32::NAN]);
    let x = format!("X=@{}", d.join("x.npy").display());
    let v = format!("V=@{}", d.join("v.npy").display());
    let out = d.join("out");
    let o = lnc(&[
        "run",
        f.to_str().unwrap(),
        "--kernel",
        "var",
        "--grid",
        "1",
        "--arg",
        &x,
        "--arg",
        &v,
        "--arg",
        "N=10",
        "--arg",
        "BLOCK=16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: `tl.sum` reads lanes the mask disabled"), "{}", stderr(&o));
    // The warning is right: 6 padding lanes add mean² = 30.25 each, over N = 10.
    let (_, v) = load(&out.join("V.npy"));
    assert!((v[0] - (8.25 + 6.0 * 30.25 / 10.0)).abs() < 1e-4, "{v:?}");
}

/// `device_print` names the program printing. Compiled kernels run a chunk of programs per
/// call, so each line must carry the current program's id, not the chunk's first: every
/// program of a 300 x 2 grid (chunks of dozens of programs) prints its own line once.
#[test]
fn device_print_names_every_program_of_a_chunk() {
    let dir = tempdir("print-pids");
    let d = dir.path();
    let f = d.join("show.py");
    std::fs::write(
        &f,
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef show(X):\n    \
         pid = tl.program_id(0)\n    tl.device_print(\"at\", pid + 1000 * tl.program_id(1))\n",
    )
    .unwrap();
    let out = d.join("out");
    for threads in ["1", "2"] {
        let o = Command::new(env!("CARGO_BIN_EXE_lnc"))
            .env("RAYON_NUM_THREADS", threads)
            .args(["run", f.to_str().unwrap(), "--kernel", "show", "--grid", "300,2"])
            .args(["--signature", "*fp32", "--arg", "X=zeros:f32:1", "--out", out.to_str().unwrap()])
            .output()
            .expect("lnc runs");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let mut lines: Vec<&str> = std::str::from_utf8(&o.stderr).unwrap().lines().collect();
        lines.sort_unstable();
        let mut want: Vec<String> = (0..2)
            .flat_map(|y| (0..300).map(move |x| format!("pid ({x}, {y}, 0) idx () at: {}", x + 1000 * y)))
            .collect();
        want.sort_unstable();
        assert_eq!(lines, want, "{threads} threads");
    }
}

/// The seed forward prefetches the next program's row from its last pass (fp32 rows of
/// 4 KB and more); `--no-prefetch` compiles it without, for timing one against the other.
#[test]
fn compile_shows_the_prefetches_and_no_prefetch_removes_them() {
    let sig = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,4096";
    let args = ["compile", SEED, "--kernel", "_layer_norm_fwd_fused", "--signature", sig];
    let with = lnc(&args);
    assert!(with.status.success(), "{}", stderr(&with));
    // One prefetch per line a step of the variance loop covers: one with 4-lane tiles,
    // two with the 8-lane tiles of hosts with AVX2.
    let lines = if lnc::computes_wide() { 2 } else { 1 };
    assert_eq!(stdout(&with).matches("prefetch ").count(), lines, "{}", stdout(&with));
    let without = lnc(&[&args[..], &["--no-prefetch"]].concat());
    assert!(without.status.success(), "{}", stderr(&without));
    // The streaming pass's write prefetches of the stored row's end lines stay.
    assert!(!stdout(&without).contains("prefetch "), "{}", stdout(&without));
    assert!(stdout(&without).contains("prefetch.write "), "{}", stdout(&without));
    // The machine code says how many marked loads became prefetches.
    let asm = lnc(&[&args[..], &["--emit", "asm"]].concat());
    assert!(stdout(&asm).contains("rewritten after Cranelift to prefetchnta"), "{}", stdout(&asm));
}

/// Where the host has F16C, the seed forward in fp16 converts its tiles with it (the
/// machine code says how many instructions were rewritten) and reads x in the loops, not
/// through a row conversion; `--no-f16c` compiles the integer conversions and row helpers.
#[test]
fn compile_converts_fp16_with_f16c_and_no_f16c_does_not() {
    let sig = "*fp16,*fp16,*fp16,*fp16,*fp32,*fp32,i32,i32,fp32,1024";
    let args = ["compile", SEED, "--kernel", "_layer_norm_fwd_fused", "--signature", sig, "--emit", "lir"];
    let native = lnc::converts_f16_natively();
    for (extra, f16c) in [(&[][..], native), (&["--no-f16c"][..], false)] {
        let o = lnc(&[&args[..], extra].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        let lir = stdout(&o);
        assert_eq!(lir.contains("row_load "), !f16c, "{extra:?}:\n{lir}");
        let o = lnc(&[&args[..], &["--emit", "asm"], extra].concat());
        let asm = stdout(&o);
        assert_eq!(asm.contains("rewritten after Cranelift to vcvtph2ps"), f16c, "{extra:?}:\n{asm}");
        assert_eq!(asm.contains("rewritten after Cranelift to vcvtps2ph"), f16c, "{extra:?}:\n{asm}");
    }
}

/// `.npy` data starts where the header says: bytes after it are ignored (as NumPy does;
/// they shifted the data before), version-2 headers (4-byte length) are read, and a file
/// shorter than its shape is an error.
#[test]
fn npy_data_starts_after_the_header_whatever_follows_it() {
    let dir = tempdir("npy-offsets");
    let d = dir.path();
    let kernel = d.join("copy.py");
    std::fs::write(
        &kernel,
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef copy(X, Y):\n    \
         offs = tl.arange(0, 4)\n    tl.store(Y + offs, tl.load(X + offs))\n",
    )
    .unwrap();
    let run = |x: &Path, out: &Path| {
        let (k, x, out) = (kernel.display().to_string(), x.display().to_string(), out.display().to_string());
        lnc(&[
            "run",
            &k,
            "--kernel",
            "copy",
            "--grid",
            "1",
            "--arg",
            &format!("X=@{x}"),
            "--arg",
            "Y=zeros:f32:4",
            "--out",
            &out,
        ])
    };
    let values = [10.0f32, 20.0, 30.0, 40.0];

    let extra = d.join("extra.npy");
    save(&extra, &[4], &values);
    let mut bytes = std::fs::read(&extra).unwrap();
    bytes.extend(50.0f32.to_le_bytes());
    std::fs::write(&extra, &bytes).unwrap();
    let o = run(&extra, &d.join("o1"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(load(&d.join("o1/Y.npy")).1, values);

    // Version 2.0: the same header behind a 4-byte length.
    let header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    let pad = (64 - (12 + header.len() + 1) % 64) % 64;
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend(((header.len() + pad + 1) as u32).to_le_bytes());
    v2.extend(header);
    v2.extend(std::iter::repeat_n(b' ', pad));
    v2.push(b'\n');
    v2.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    let v2_path = d.join("v2.npy");
    std::fs::write(&v2_path, &v2).unwrap();
    let o = run(&v2_path, &d.join("o2"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(load(&d.join("o2/Y.npy")).1, values);

    let short = d.join("short.npy");
    std::fs::write(&short, &v2[..v2.len() - 1]).unwrap();
    let o = run(&short, &d.join("o3"));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is shorter than its header says"), "{}", stderr(&o));
}

/// `lnc run` without `--arg` for a parameter that has a default uses the default, as
/// `lnc compile` and Python do (it demanded the argument before), and `--arg` overrides it.
#[test]
fn run_takes_defaults_of_omitted_parameters() {
    let dir = tempdir("defaults");
    let d = dir.path();
    let kernel = d.join("scale.py");
    std::fs::write(
        &kernel,
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef scale(X, Y, k=3, BLOCK: tl.constexpr = 4):\n    \
         offs = tl.arange(0, BLOCK)\n    tl.store(Y + offs, tl.load(X + offs) * k)\n",
    )
    .unwrap();
    let k = kernel.display().to_string();
    for (extra, want) in [(None, 3.0f32), (Some("k=5"), 5.0)] {
        let out = d.join(format!("o{want}"));
        let out_s = out.display().to_string();
        let mut args = vec![
            "run",
            &k,
            "--kernel",
            "scale",
            "--grid",
            "1",
            "--arg",
            "X=ones:f32:4",
            "--arg",
            "Y=zeros:f32:4",
        ];
        if let Some(e) = extra {
            args.extend(["--arg", e]);
        }
        args.extend(["--out", &out_s]);
        let o = lnc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(load(&out.join("Y.npy")).1, [want; 4]);
    }
}
