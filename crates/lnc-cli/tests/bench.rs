//! `lnc bench` driven as a user would, and the generated buffers it shares with `lnc run`.
//! These tests check what is printed, never how fast anything is.

use std::process::{Command, Output};

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds/triton_05_layer_norm.py");

fn lnc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lnc")).args(args).output().expect("lnc runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The seed's forward kernel on generated buffers: M = 64 rows of N = 100.
fn fwd_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec![
        "bench",
        SEED,
        "--kernel",
        "_layer_norm_fwd_fused",
        "--grid",
        "64",
        "--arg",
        "X=randn:f32:64x100",
        "--arg",
        "Y=zeros:f32:64x100",
        "--arg",
        "W=rand:f32:100",
        "--arg",
        "B=rand:fp32:100",
        "--arg",
        "M=zeros:f32:64",
        "--arg",
        "V=zeros:f32:64",
        "--arg",
        "stride=100",
        "--arg",
        "N=100",
        "--arg",
        "eps=1e-5",
        "--arg",
        "BLOCK_SIZE=128",
    ];
    v.extend_from_slice(extra);
    v
}

/// The value of `"key": VALUE` in a flat JSON object, as text.
fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let start = json.find(&pat).unwrap_or_else(|| panic!("no `{key}` in {json}")) + pat.len();
    let rest = json[start..].trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim()
}

#[test]
fn json_has_positive_timings() {
    let o = lnc(&fwd_args(&["--reps", "7", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let json = out.trim();
    assert_eq!(json.lines().count(), 1, "one JSON object on one line: {json}");
    assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
    let num = |k: &str| -> f64 {
        json_field(json, k).parse().unwrap_or_else(|e| panic!("`{k}` is not a number ({e}): {json}"))
    };
    let (median, min, max, compile) = (num("median_s"), num("min_s"), num("max_s"), num("compile_s"));
    for (k, v) in [("median_s", median), ("min_s", min), ("max_s", max), ("compile_s", compile)] {
        assert!(v.is_finite() && v > 0.0, "{k} = {v} in {json}");
    }
    assert!(min <= median && median <= max, "{json}");
    assert_eq!(json_field(json, "reps"), "7", "{json}");
    assert_eq!(json_field(json, "kernel"), "\"_layer_norm_fwd_fused\"", "{json}");
    assert_eq!(json_field(json, "flush"), "false", "{json}");
}

#[test]
fn flush_is_reported() {
    let o = lnc(&fwd_args(&["--reps", "3", "--flush", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(json_field(out.trim(), "flush"), "true", "{out}");
    assert_eq!(json_field(out.trim(), "reps"), "3", "{out}");
    let o = lnc(&fwd_args(&["--reps", "3", "--flush"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("3 launches, caches flushed before each"), "{}", stdout(&o));
}

#[test]
fn default_output_names_the_kernel_and_the_timings() {
    let o = lnc(&fwd_args(&["--reps", "3"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("_layer_norm_fwd_fused"), "{out}");
    assert!(out.contains("compile") && out.contains("3 launches"), "{out}");
    assert!(out.contains("median") && out.contains("min") && out.contains("max"), "{out}");
    let o = lnc(&fwd_args(&["--reps", "3", "--unchecked"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(unchecked)"), "{}", stdout(&o));
}

#[test]
fn errors_are_reported_before_timing() {
    // Too small an output buffer: the checked warm-up launch stops with the access.
    let mut args = fwd_args(&["--reps", "3"]);
    let y = args.iter().position(|a| *a == "Y=zeros:f32:64x100").unwrap();
    args[y] = "Y=zeros:f32:10";
    let o = lnc(&args);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("out-of-bounds"), "{}", stderr(&o));

    for reps in ["0", "18446744073709551615"] {
        let o = lnc(&fwd_args(&["--reps", reps]));
        assert_eq!(o.status.code(), Some(1), "--reps {reps}");
        assert!(stderr(&o).contains("--reps must be at"), "{}", stderr(&o));
    }

    for (bad, why) in [
        ("X=randn:i32:64x100", "float element type"),
        ("X=rand:f33:64x100", "unknown element type"),
        ("X=rand:f32:64xq", "shape"),
        ("X=rand:f32", "KIND:DTYPE:SHAPE"),
        // 40 PB: beyond any address space, refused without aborting.
        ("X=randn:f32:100000000000x100000", "cannot allocate"),
    ] {
        let mut args = fwd_args(&["--reps", "3"]);
        let x = args.iter().position(|a| *a == "X=randn:f32:64x100").unwrap();
        args[x] = bad;
        let o = lnc(&args);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        assert!(stderr(&o).contains(why), "{bad}: {}", stderr(&o));
    }
}

#[test]
fn run_accepts_generated_buffers() {
    // y = xhat·w + b with w = 0 and b = 1 is all ones, whatever x is.
    let dir = tempfile::Builder::new().prefix("lnc-cli-bench-run-").tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args = fwd_args(&[]);
    args[0] = "run";
    let w = args.iter().position(|a| *a == "W=rand:f32:100").unwrap();
    args[w] = "W=zeros:f32:100";
    let b = args.iter().position(|a| *a == "B=rand:fp32:100").unwrap();
    args[b] = "B=ones:f32:100";
    let out_s = out.to_str().unwrap().to_string();
    let mut args: Vec<&str> = args;
    args.extend(["--out", &out_s]);
    let o = lnc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(out.join("Y.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.shape(), &[64, 100]);
    let y: Vec<f32> = npy.into_vec().unwrap();
    assert!(y.iter().all(|&v| v == 1.0), "{:?}", &y[..8]);
}

/// Rows of 1000 floats (4 KB blocks) get the prefetches of the next program's row, and
/// `--no-prefetch` times the kernel without them; rows of 100 get none.
#[test]
fn prefetches_are_reported_and_no_prefetch_removes_them() {
    let wide = |extra: &[&'static str]| -> Vec<String> {
        fwd_args(extra)
            .into_iter()
            .map(|a| match a {
                "X=randn:f32:64x100" => "X=randn:f32:8x1000".to_string(),
                "Y=zeros:f32:64x100" => "Y=zeros:f32:8x1000".to_string(),
                "W=rand:f32:100" => "W=rand:f32:1000".to_string(),
                "B=rand:fp32:100" => "B=rand:fp32:1000".to_string(),
                "M=zeros:f32:64" => "M=zeros:f32:8".to_string(),
                "V=zeros:f32:64" => "V=zeros:f32:8".to_string(),
                "stride=100" => "stride=1000".to_string(),
                "N=100" => "N=1000".to_string(),
                "BLOCK_SIZE=128" => "BLOCK_SIZE=1024".to_string(),
                "64" => "8".to_string(),
                a => a.to_string(),
            })
            .collect()
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = lnc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let prefetches = |out: String| json_field(out.trim(), "prefetches").parse::<u32>().unwrap();
    assert!(prefetches(run(wide(&["--reps", "3", "--json"]))) > 0);
    assert_eq!(prefetches(run(wide(&["--reps", "3", "--json", "--no-prefetch"]))), 0);
    assert!(run(wide(&["--reps", "3"])).contains("prefetches of the next program's rows"));
    let narrow: Vec<String> = fwd_args(&["--reps", "3", "--json"]).into_iter().map(String::from).collect();
    assert_eq!(prefetches(run(narrow)), 0);
}
