//! The `lnc` binary's messages for mistakes on its command line, snapshotted as a user
//! sees them: exit code and standard error. Each test runs in a directory of its own with
//! relative paths, so the text carries no machine-specific path.

use std::path::Path;

use tempfile::TempDir;

use npyz::WriterBuilder;

/// A kernel file with a copy kernel, an atomic counter and a run-time assertion.
const KERNELS: &str = "\
import triton
import triton.language as tl

@triton.jit
def copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs))

@triton.jit
def count(Counter):
    tl.atomic_add(Counter, 1)

@triton.jit
def check(X):
    x = tl.load(X + tl.arange(0, 8))
    tl.device_assert(x > 0, \"X must be positive\")
";

/// A fresh directory holding `k.py` (the kernels above), `x.npy` and `y.npy` (8 float32
/// each) and `xd.npy` (8 float64).
fn workdir(name: &str) -> TempDir {
    let dir = tempfile::Builder::new().prefix(&format!("lnc-cli-errors-{name}-")).tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("k.py"), KERNELS).unwrap();
    save(&d.join("x.npy"), &[8], &[1.0f32; 8]);
    save(&d.join("y.npy"), &[8], &[0.0f32; 8]);
    save(&d.join("xd.npy"), &[8], &[1.0f64; 8]);
    dir
}

fn save<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(f).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// Writes a version 1.0 `.npy` file with the given dtype descriptor and raw data, for
/// element types numpy has and lnc does not.
fn save_raw(path: &Path, descr: &str, len: usize, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    // The header, magic and length included, is padded to a multiple of 64 and ends in '\n'.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// Runs `lnc` in `dir` and returns what a user sees of a failure: the
/// exit code and the standard error, with the directory's path (should any appear)
/// replaced by `$DIR`.
fn lnc_fails(dir: &TempDir, args: &[&str]) -> String {
    let dir = dir.path();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lnc"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("lnc runs");
    assert!(!o.status.success(), "lnc {args:?} succeeded");
    let stderr = String::from_utf8_lossy(&o.stderr).replace(&dir.display().to_string(), "$DIR");
    let code = o.status.code().map_or_else(|| "none (killed by a signal)".to_string(), |c| c.to_string());
    format!("exit code: {code}\n{stderr}")
}

/// `lnc run` of the copy kernel with `args` after `--grid 1`.
fn run_copy(name: &str, args: &[&str]) -> String {
    let d = workdir(name);
    let mut v = vec!["run", "k.py", "--kernel", "copy", "--grid", "1"];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--out", "out"]);
    lnc_fails(&d, &v)
}

#[test]
fn missing_source_file() {
    let d = workdir("missing-source");
    insta::assert_snapshot!(lnc_fails(&d, &["check", "kernels.py"]));
}

#[test]
fn unknown_kernel() {
    let d = workdir("unknown-kernel");
    insta::assert_snapshot!(lnc_fails(
        &d,
        &["run", "k.py", "--kernel", "cpy", "--grid", "1", "--arg", "X=@x.npy", "--out", "out"]
    ));
}

#[test]
fn unknown_arg_name() {
    insta::assert_snapshot!(run_copy(
        "unknown-arg",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "N=8", "--arg", "BLOK=8"]
    ));
}

#[test]
fn missing_arg() {
    insta::assert_snapshot!(run_copy(
        "missing-arg",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "BLOCK=8"]
    ));
}

#[test]
fn missing_npy_file() {
    insta::assert_snapshot!(run_copy(
        "missing-npy",
        &["--arg", "X=@inputs.npy", "--arg", "Y=@y.npy", "--arg", "N=8", "--arg", "BLOCK=8"]
    ));
}

#[test]
fn unreadable_npy_element_type() {
    let d = workdir("npy-complex");
    save_raw(&d.path().join("z.npy"), "<c8", 8, &[0u8; 64]);
    let args = [
        "run", "k.py", "--kernel", "copy", "--grid", "1", "--arg", "X=@z.npy", "--arg", "Y=@y.npy", "--arg",
        "N=8", "--arg", "BLOCK=8", "--out", "out",
    ];
    insta::assert_snapshot!(lnc_fails(&d, &args));
}

#[test]
fn buffer_element_type_mismatch() {
    insta::assert_snapshot!(run_copy(
        "dtype-mismatch",
        &[
            "--signature",
            "*fp32,*fp32,i32,8",
            "--arg",
            "X=@xd.npy",
            "--arg",
            "Y=@y.npy",
            "--arg",
            "N=8",
            "--arg",
            "BLOCK=8"
        ]
    ));
}

#[test]
fn float_for_integer_parameter() {
    insta::assert_snapshot!(run_copy(
        "float-for-int",
        &[
            "--signature",
            "*fp32,*fp32,i32,8",
            "--arg",
            "X=@x.npy",
            "--arg",
            "Y=@y.npy",
            "--arg",
            "N=8.5",
            "--arg",
            "BLOCK=8"
        ]
    ));
}

#[test]
fn number_for_pointer_parameter() {
    insta::assert_snapshot!(run_copy(
        "number-for-pointer",
        &[
            "--signature",
            "*fp32,*fp32,i32,8",
            "--arg",
            "X=0",
            "--arg",
            "Y=@y.npy",
            "--arg",
            "N=8",
            "--arg",
            "BLOCK=8"
        ]
    ));
}

#[test]
fn bad_arg_value() {
    insta::assert_snapshot!(run_copy(
        "bad-value",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "N=8.5.1", "--arg", "BLOCK=8"]
    ));
}

#[test]
fn string_for_a_runtime_parameter() {
    // A bare word is a string, which only a `tl.constexpr` parameter takes.
    insta::assert_snapshot!(run_copy(
        "string-for-runtime",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "N=eight", "--arg", "BLOCK=8"]
    ));
}

#[test]
fn integer_too_large() {
    insta::assert_snapshot!(run_copy(
        "integer-too-large",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "N=99999999999999999999999", "--arg", "BLOCK=8"]
    ));
}

#[test]
fn bad_grid() {
    let d = workdir("bad-grid");
    insta::assert_snapshot!(lnc_fails(
        &d,
        &["run", "k.py", "--kernel", "count", "--grid", "4,x", "--arg", "Counter=@x.npy", "--out", "out"]
    ));
}

#[test]
fn grid_too_large() {
    let d = workdir("grid-too-large");
    insta::assert_snapshot!(lnc_fails(
        &d,
        &[
            "run",
            "k.py",
            "--kernel",
            "count",
            "--grid",
            "4294967296",
            "--arg",
            "Counter=@x.npy",
            "--out",
            "out"
        ]
    ));
}

#[test]
fn empty_buffer() {
    insta::assert_snapshot!(run_copy(
        "empty-buffer",
        &["--arg", "X=zeros:f32:0", "--arg", "Y=@y.npy", "--arg", "N=16", "--arg", "BLOCK=16"]
    ));
}

#[test]
fn buffer_too_short() {
    // BLOCK = 16 elements per program, but the buffers hold 8.
    insta::assert_snapshot!(run_copy(
        "too-short",
        &["--arg", "X=@x.npy", "--arg", "Y=@y.npy", "--arg", "N=16", "--arg", "BLOCK=16"]
    ));
}

#[test]
fn kernel_error_at_run() {
    // Without --signature the buffer's dtype makes the signature: an atomic on float64
    // is fine, on int8 it is not, and the front end says so at the kernel's source.
    let d = workdir("atomic-i8");
    save(&d.path().join("c.npy"), &[1], &[0i8]);
    insta::assert_snapshot!(lnc_fails(
        &d,
        &["run", "k.py", "--kernel", "count", "--grid", "1", "--arg", "Counter=@c.npy", "--out", "out"]
    ));
}

#[test]
fn device_assert_fails() {
    // y.npy holds zeros: the assertion is false.
    let d = workdir("device-assert");
    insta::assert_snapshot!(lnc_fails(
        &d,
        &["run", "k.py", "--kernel", "check", "--grid", "1", "--arg", "X=@y.npy", "--out", "out"]
    ));
}
