//! `lnc`: check, compile and run Triton kernels from the command line.

mod bench;
mod npy;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use lnc::{Arg, DType, DumpRequest, Elem, Jit, Kernel, Module, Scalar, Stage};
use lnc_diag::{Diagnostic, SourceFile, Span};

use npy::HostBuffer;

#[derive(Parser)]
#[command(name = "lnc", version, about = "JIT-compile Triton kernels to native CPU code with Cranelift")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the @jit kernels of FILE with their parameters; report anything that does not parse.
    Check {
        /// A Python file containing @triton.jit kernels.
        file: PathBuf,
    },
    /// Print the stages of lowering of one kernel specialized on a signature.
    Compile {
        /// A Python file containing @triton.jit kernels.
        file: PathBuf,
        /// Kernel name.
        #[arg(long)]
        kernel: String,
        /// Signature in Triton's AOT format, e.g. `*fp32,*fp32,i32,1024`.
        #[arg(long)]
        signature: String,
        /// Stages to print: ast, bir, opt, lir, clif, asm, mc (repeatable; mc: the machine
        /// code as it runs, after lnc's rewrites of Cranelift's).
        #[arg(long = "emit", default_value = "lir")]
        emit: Vec<Stage>,
        /// Also print the block IR after each optimization pass.
        #[arg(long)]
        print_after_all: bool,
        /// Emit code without bounds checks (what `launch_unchecked` runs, and a safe launch
        /// whose bounds lnc proves beforehand); the default is the bounds-checked code.
        #[arg(long)]
        unchecked: bool,
        #[command(flatten)]
        code: CodeArgs,
    },
    /// Run a kernel on .npy inputs and write every pointer argument's buffer back as .npy.
    Run {
        #[command(flatten)]
        launch: LaunchArgs,
        /// Directory receiving NAME.npy for every pointer parameter.
        #[arg(long)]
        out: PathBuf,
    },
    /// Time repeated launches of a kernel: compile once, warm up, print median/min/max per launch.
    Bench {
        #[command(flatten)]
        launch: LaunchArgs,
        /// Timed launches (default: as many as fit in about a second, at least 20).
        #[arg(long)]
        reps: Option<usize>,
        /// Print one JSON object (`median_s`, `min_s`, `max_s`, `reps`, `compile_s`, `flush`,
        /// `prefetches`: the prefetch instructions in the code of safe launches).
        #[arg(long)]
        json: bool,
        /// Evict the caches before every launch, as Triton's `do_bench` does: the pool's
        /// threads write over twice the last-level cache (at least 64 MiB), outside the timing.
        #[arg(long)]
        flush: bool,
    },
}

/// The kernel, grid and arguments of a launch from the command line (`run` and `bench`).
#[derive(clap::Args)]
struct LaunchArgs {
    /// A Python file containing @triton.jit kernels.
    file: PathBuf,
    /// Kernel name.
    #[arg(long)]
    kernel: String,
    /// Grid: X[,Y[,Z]].
    #[arg(long)]
    grid: String,
    /// Signature; by default the types come from the arguments.
    #[arg(long)]
    signature: Option<String>,
    /// NAME=VALUE: `@file.npy` (a buffer), `@file.npy+K` (pointer K elements in), a generated
    /// buffer `zeros|ones|rand|randn:DTYPE:SHAPE` (e.g. `rand:f32:4096x1000`; rand is uniform
    /// in [0, 1), randn standard normal), or a literal.
    #[arg(long = "arg")]
    args: Vec<String>,
    /// Skip bounds checks (a safe launch skips them too where it proves its bounds first).
    #[arg(long)]
    unchecked: bool,
    #[command(flatten)]
    code: CodeArgs,
}

/// Code generation choices that change speed, never results (`compile`, `run`, `bench`).
#[derive(clap::Args)]
struct CodeArgs {
    /// Compile without prefetching the next program's rows (`CompileOptions::prefetch`).
    #[arg(long)]
    no_prefetch: bool,
    /// Convert fp16 tiles with integer code instead of the CPU's F16C instructions
    /// (`CompileOptions::f16c`).
    #[arg(long)]
    no_f16c: bool,
    /// Compile with 128-bit vectors only: 4 lanes, no 256-bit loops
    /// (`CompileOptions::narrow`).
    #[arg(long)]
    no_wide: bool,
    /// Compile kernels with fp16/bf16 arguments in 256-bit loops (8-lane tiles) instead of
    /// 512-bit ones on a host with AVX-512 (`CompileOptions::lanes`).
    #[arg(long)]
    no_zmm: bool,
    /// Keep stores into arguments the kernel never reads before the spin lock that follows
    /// them (`CompileOptions::defer_stores`).
    #[arg(long)]
    no_defer_stores: bool,
    /// Round fp32 to bf16 in 512-bit loops with integer code instead of AVX512-BF16's
    /// `vcvtneps2bf16` (`CompileOptions::bf16_cvt`).
    #[arg(long)]
    no_bf16_cvt: bool,
    /// Run every safe launch with bounds checks, without first trying to prove its bounds
    /// (`CompileOptions::prove_bounds`).
    #[arg(long)]
    no_prove: bool,
}

impl CodeArgs {
    const DEFAULT: CodeArgs = CodeArgs {
        no_prefetch: false,
        no_f16c: false,
        no_wide: false,
        no_zmm: false,
        no_defer_stores: false,
        no_bf16_cvt: false,
        no_prove: false,
    };
}

/// An error already rendered for the terminal.
struct Failure(String);

impl Failure {
    /// Renders a diagnostic that points into no file (bad command-line input): the same
    /// `error:` header and `= help:` lines as source diagnostics.
    fn new(d: Diagnostic) -> Failure {
        Failure(d.render(&SourceFile::new("", "")))
    }
}

impl From<lnc::Error> for Failure {
    fn from(e: lnc::Error) -> Failure {
        match e {
            lnc::Error::Source(_) => Failure(e.to_string()),
            lnc::Error::NoSuchKernel { name, file, available } => {
                let names: Vec<&str> = available.split(", ").filter(|n| !n.is_empty()).collect();
                no_such_kernel(&name, &file, &names)
            }
            e => fail(e.to_string()),
        }
    }
}

fn fail(msg: impl Into<String>) -> Failure {
    Failure::new(Diagnostic::error_nospan(msg))
}

fn fail_help(msg: impl Into<String>, help: impl Into<String>) -> Failure {
    Failure::new(Diagnostic::error_nospan(msg).with_help(help))
}

/// A kernel name that is not one of the file's `@jit` functions.
fn no_such_kernel(name: &str, file: &str, kernels: &[&str]) -> Failure {
    let d = Diagnostic::error_nospan(format!("no @jit kernel named `{name}` in {file}"));
    Failure::new(match lnc_diag::suggest(name, kernels.iter().copied()) {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None if kernels.is_empty() => d.with_note("the file has no `@triton.jit` functions"),
        None => d.with_note(format!("the kernels of this file are: {}", kernels.join(", "))),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { file } => check(&file),
        Command::Compile { file, kernel, signature, emit, print_after_all, unchecked, code } => {
            compile(&file, &kernel, &signature, emit, print_after_all, unchecked, &code)
        }
        Command::Run { launch, out } => run(&launch, &out),
        Command::Bench { launch, reps, json, flush } => bench::bench(&launch, reps, json, flush),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("{}", msg.trim_end());
            ExitCode::FAILURE
        }
    }
}

/// The module of `file`, compiled with the code generation choices `code`.
fn load(file: &Path, code: &CodeArgs) -> Result<Module, Failure> {
    let opts = lnc::CompileOptions {
        prefetch: !code.no_prefetch,
        f16c: !code.no_f16c,
        defer_stores: !code.no_defer_stores,
        bf16_cvt: !code.no_bf16_cvt,
        prove_bounds: !code.no_prove,
        ..Default::default()
    };
    let opts = if code.no_wide { opts.narrow() } else { opts };
    let opts = if code.no_zmm { opts.in_256_bits() } else { opts };
    Ok(Jit::with_options(opts).load(file)?)
}

fn check(file: &Path) -> Result<(), Failure> {
    let module = load(file, &CodeArgs::DEFAULT)?;
    let kernels = module.kernels();
    println!("{}: {} kernel{}", file.display(), kernels.len(), if kernels.len() == 1 { "" } else { "s" });
    for k in kernels {
        let params: Vec<String> = k
            .params
            .iter()
            .map(|p| {
                let mut s = p.name.clone();
                if p.constexpr {
                    s.push_str(": constexpr");
                }
                if let Some(d) = &p.default {
                    s.push_str(" = ");
                    s.push_str(d);
                }
                s
            })
            .collect();
        println!("  {}({})  [line {}]", k.name, params.join(", "), k.location.0);
    }
    Ok(())
}

fn compile(
    file: &Path,
    kernel: &str,
    signature: &str,
    emit: Vec<Stage>,
    print_after_all: bool,
    unchecked: bool,
    code: &CodeArgs,
) -> Result<(), Failure> {
    let module = load(file, code)?;
    let req = DumpRequest { stages: emit, after_each_pass: print_after_all, checked: !unchecked };
    let dumps = module.dump(kernel, signature, &req)?;
    print_warnings(&module.warnings(kernel, signature)?, module.file());
    let headers = dumps.len() > 1;
    for d in dumps {
        if headers {
            match d.pass {
                Some(p) => println!("; ---- opt: after {p} ----"),
                None => println!("; ---- {} ----", d.stage),
            }
        }
        print!("{}", d.text);
        if !d.text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

/// Warnings (the masked-lane lint) go to stderr; they do not stop the command.
fn print_warnings(warnings: &[Diagnostic], file: &SourceFile) {
    if !warnings.is_empty() {
        eprint!("{}", lnc_diag::render_all(warnings, file));
    }
}

/// A parsed `--arg` value.
enum ArgValue {
    Buffer {
        path: PathBuf,
        offset: usize,
    },
    /// A buffer generated in memory (`rand:f32:4096x1000`).
    Generated(bench::Generated),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A string for a `tl.constexpr` parameter: quoted (`'"leaky_relu"'`) or a bare word
    /// (`leaky_relu`).
    Str(String),
}

fn parse_arg_value(name: &str, v: &str) -> Result<ArgValue, Failure> {
    if let Some(rest) = v.strip_prefix('@') {
        let (path, offset) = match rest.rsplit_once('+') {
            Some((p, k)) if k.chars().all(|c| c.is_ascii_digit()) && !k.is_empty() => {
                let k = k.parse().map_err(|_| fail(format!("--arg {name}: offset `{k}` is too large")))?;
                (p, k)
            }
            _ => (rest, 0),
        };
        return Ok(ArgValue::Buffer { path: PathBuf::from(path), offset });
    }
    if let Some(g) = bench::Generated::parse(v) {
        return g.map(ArgValue::Generated).map_err(|m| fail(format!("--arg {name}={v}: {m}")));
    }
    match v {
        "True" | "true" => return Ok(ArgValue::Bool(true)),
        "False" | "false" => return Ok(ArgValue::Bool(false)),
        _ => {}
    }
    let cleaned = v.replace('_', "");
    if let Ok(i) = cleaned.parse::<i64>() {
        return Ok(ArgValue::Int(i));
    }
    let digits = cleaned.strip_prefix(['-', '+']).unwrap_or(&cleaned);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // An integer Rust's f64 parser would otherwise take as a float.
        return Err(fail(format!(
            "--arg {name}={v}: the integer is outside the range of i64, in which `lnc run` passes integers"
        )));
    }
    if let Ok(f) = cleaned.parse::<f64>() {
        return Ok(ArgValue::Float(f));
    }
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q))
            && !inner.contains('"')
        {
            return Ok(ArgValue::Str(inner.to_string()));
        }
    }
    let word = v.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if word {
        return Ok(ArgValue::Str(v.to_string()));
    }
    Err(fail_help(
        format!("--arg {name}={v}: `{v}` is not a value lnc can pass"),
        "a value is a buffer (`@file.npy`, `@file.npy+K` for a pointer K elements in, or a generated \
         `zeros|ones|rand|randn:DTYPE:SHAPE` such as `rand:f32:4096x1000`), an integer, a float, True/False, \
         or a string for a `tl.constexpr` (`leaky_relu`, `'\"two words\"'`; quote words that read as numbers, such as \
         `'\"inf\"'`)",
    ))
}

/// A string given to a parameter that is not a `tl.constexpr`.
fn string_for_runtime(name: &str, text: &str) -> Failure {
    fail_help(
        format!(
            "--arg {name}={text}: parameter `{name}` is not a `tl.constexpr`, so it cannot take a string"
        ),
        "strings specialize `tl.constexpr` parameters (`ACTIVATION: tl.constexpr`); give a number or a buffer",
    )
}

fn literal_text(v: &ArgValue) -> String {
    match v {
        ArgValue::Int(i) => i.to_string(),
        ArgValue::Float(f) => format!("{f:?}"),
        ArgValue::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        ArgValue::Str(t) => format!("\"{t}\""),
        ArgValue::Buffer { .. } | ArgValue::Generated(_) => String::new(),
    }
}

fn parse_grid(g: &str) -> Result<[u32; 3], Failure> {
    let parts: Vec<&str> = g.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(fail_help(
            format!("--grid `{g}`: expected X, X,Y or X,Y,Z"),
            "e.g. `--grid 128` or `--grid 16,4`",
        ));
    }
    let mut grid = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        grid[i] = p.parse().map_err(|_| {
            let what = if p.parse::<u128>().is_ok() {
                format!("`{p}` is more than {} programs on an axis", u32::MAX)
            } else {
                format!("`{p}` is not a non-negative integer")
            };
            fail_help(
                format!("--grid `{g}`: {what}"),
                "the grid is one to three program counts, e.g. `--grid 128` or `--grid 16,4`",
            )
        })?;
    }
    Ok(grid)
}

/// A kernel compiled for the arguments of the command line, with every buffer allocated:
/// what `run` and `bench` share.
struct Prepared {
    kernel: Arc<Kernel>,
    grid: [u32; 3],
    values: HashMap<String, ArgValue>,
    buffers: HashMap<String, (HostBuffer, usize)>,
    unchecked: bool,
    /// Wall-clock time of parsing the file and compiling the kernel (source to callable).
    compile: Duration,
}

/// Parses the launch arguments, reads or generates the buffers and compiles the kernel.
fn prepare(l: &LaunchArgs) -> Result<Prepared, Failure> {
    let (file, kernel) = (l.file.as_path(), l.kernel.as_str());
    let grid = parse_grid(&l.grid)?;
    let t = Instant::now();
    let module = load(file, &l.code)?;
    let mut compile = t.elapsed();
    let kernels = module.kernels();
    let Some(info) = kernels.iter().find(|k| k.name == kernel) else {
        let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
        return Err(no_such_kernel(kernel, &file.display().to_string(), &names));
    };

    let mut values: HashMap<String, ArgValue> = HashMap::new();
    for a in &l.args {
        let (name, v) = a
            .split_once('=')
            .ok_or_else(|| fail_help(format!("--arg `{a}`: expected NAME=VALUE"), "e.g. `--arg N=1024`"))?;
        if !info.params.iter().any(|p| p.name == name) {
            let names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
            let d = Diagnostic::error_nospan(format!("--arg {name}: `{kernel}` has no parameter `{name}`"));
            let d = match lnc_diag::suggest(name, names.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d,
            };
            return Err(Failure::new(d.with_note(format!("the parameters are: {}", names.join(", ")))));
        }
        if values.insert(name.to_string(), parse_arg_value(name, v)?).is_some() {
            return Err(fail(format!("--arg {name} is given twice")));
        }
    }

    // Buffers are read (or generated) first: without --signature their dtypes make the signature.
    let mut buffers: HashMap<String, (HostBuffer, usize)> = HashMap::new();
    for (name, v) in &values {
        match v {
            ArgValue::Buffer { path, offset } => {
                let buf = npy::read(path).map_err(|d| {
                    Failure::new(Diagnostic { message: format!("--arg {name}: {}", d.message), ..d })
                })?;
                if *offset > buf.len {
                    return Err(fail(format!(
                        "--arg {name}: offset {offset} is past the end of `{}` ({} elements)",
                        path.display(),
                        buf.len
                    )));
                }
                buffers.insert(name.clone(), (buf, *offset));
            }
            ArgValue::Generated(g) => {
                let buf = g.generate(name).map_err(|e| fail(format!("--arg {name}: {e}")))?;
                buffers.insert(name.clone(), (buf, 0));
            }
            _ => {}
        }
    }

    let signature = match &l.signature {
        Some(s) => s.clone(),
        None => {
            let mut entries = Vec::new();
            for p in &info.params {
                let entry = match values.get(&p.name) {
                    Some(ArgValue::Buffer { .. } | ArgValue::Generated(_)) => {
                        format!("*{}", buffers[&p.name].0.dtype.sig_name())
                    }
                    Some(lit) if p.constexpr => literal_text(lit),
                    Some(ArgValue::Int(i)) => {
                        if i32::try_from(*i).is_ok() { "i32" } else { "i64" }.to_string()
                    }
                    Some(ArgValue::Float(_)) => "fp32".to_string(),
                    Some(ArgValue::Bool(_)) => "i1".to_string(),
                    Some(ArgValue::Str(t)) => return Err(string_for_runtime(&p.name, t)),
                    // Omitted, a parameter with a default takes it, as `compile` does.
                    None if p.default.is_some() => continue,
                    None => return Err(missing_args(kernel, &[p.name.as_str()])),
                };
                entries.push(format!("{}={entry}", p.name));
            }
            entries.join(",")
        }
    };
    let t = Instant::now();
    let k = module.kernel(kernel, &signature)?;
    compile += t.elapsed();
    print_warnings(k.warnings(), k.file());

    // bf16 arrays travel as uint16: relabel them for *bf16 parameters.
    for p in k.params() {
        if let (Elem::Ptr(DType::BF16), Some((b, _))) = (p.elem, buffers.get_mut(&p.name))
            && b.dtype == DType::U16
        {
            b.dtype = DType::BF16;
        }
    }
    // With --signature the buffers' element types may disagree with it; say so in terms of
    // the files rather than leave it to the launch.
    for p in k.params() {
        if let (Elem::Ptr(want), Some((b, _))) = (p.elem, buffers.get(&p.name))
            && b.dtype != want
        {
            let what = match values.get(&p.name) {
                Some(ArgValue::Buffer { path, .. }) => format!("`{}`", path.display()),
                _ => "the generated buffer".to_string(),
            };
            return Err(fail_help(
                format!(
                    "--arg {}: {what} holds {} elements but parameter `{}` is `{}`",
                    p.name,
                    npy::numpy_name(b.dtype),
                    p.name,
                    p.elem
                ),
                format!(
                    "convert the array (`a.astype(np.{})`), or leave out --signature to take the types from the arguments",
                    npy::numpy_name(want)
                ),
            ));
        }
    }
    Ok(Prepared { kernel: k, grid, values, buffers, unchecked: l.unchecked, compile })
}

impl Prepared {
    /// The kernel and its launch arguments in parameter order, borrowing every buffer.
    fn args(&mut self) -> Result<(&Kernel, Vec<Arg<'_>>), Failure> {
        let k = &*self.kernel;
        let mut args: Vec<Arg<'_>> = Vec::new();
        let mut missing = Vec::new();
        // Borrow every buffer mutably at once, in parameter order.
        let mut by_name: HashMap<&str, (&mut HostBuffer, usize)> =
            self.buffers.iter_mut().map(|(n, (b, o))| (n.as_str(), (b, *o))).collect();
        for p in k.params() {
            let arg = match (self.values.get(&p.name), p.elem) {
                (Some(ArgValue::Buffer { .. } | ArgValue::Generated(_)), Elem::Scalar(_)) => {
                    return Err(fail_help(
                        format!(
                            "--arg {}: parameter `{}` is a scalar `{}`, not a buffer",
                            p.name, p.name, p.elem
                        ),
                        "give a literal, e.g. `--arg N=1024`",
                    ));
                }
                (Some(ArgValue::Int(_) | ArgValue::Float(_) | ArgValue::Bool(_)), Elem::Ptr(_)) => {
                    return Err(fail_help(
                        format!(
                            "--arg {}: parameter `{}` is a pointer `{}`, not a number",
                            p.name, p.name, p.elem
                        ),
                        format!("give a buffer: `--arg {}=@file.npy`", p.name),
                    ));
                }
                (Some(ArgValue::Float(f)), Elem::Scalar(d)) if !d.is_float() => {
                    return Err(fail_help(
                        format!("--arg {}={f:?}: parameter `{}` is `{d}`, an integer", p.name, p.name),
                        "give an integer, or change its type in --signature",
                    ));
                }
                (Some(ArgValue::Buffer { .. } | ArgValue::Generated(_)), _) => {
                    let (b, off) = by_name.remove(p.name.as_str()).ok_or_else(|| {
                        fail(format!("--arg {}: the same buffer cannot be passed twice", p.name))
                    })?;
                    Arg::Buffer(b.arg().at(off))
                }
                (Some(ArgValue::Int(i)), Elem::Scalar(d)) if d.is_float() => {
                    Arg::Scalar(if d == DType::F64 { Scalar::F64(*i as f64) } else { Scalar::F32(*i as f32) })
                }
                (Some(ArgValue::Int(i)), _) => Arg::Scalar(Scalar::Int(*i, DType::I64)),
                (Some(ArgValue::Float(f)), Elem::Scalar(DType::F64)) => Arg::Scalar(Scalar::F64(*f)),
                (Some(ArgValue::Float(f)), _) => Arg::Scalar(Scalar::F32(*f as f32)),
                (Some(ArgValue::Bool(b)), _) => Arg::Scalar(Scalar::Bool(*b)),
                (Some(ArgValue::Str(t)), _) => return Err(string_for_runtime(&p.name, t)),
                (None, _) => {
                    missing.push(p.name.clone());
                    continue;
                }
            };
            args.push(arg);
        }
        if !missing.is_empty() {
            let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
            return Err(missing_args(k.name(), &missing));
        }
        Ok((k, args))
    }
}

/// Parameters of `kernel` that no `--arg` gives a value.
fn missing_args(kernel: &str, names: &[&str]) -> Failure {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let given: Vec<String> = names.iter().map(|n| format!("`--arg {n}=VALUE`")).collect();
    fail_help(
        format!(
            "no value for parameter{} {} of `{kernel}`",
            if names.len() == 1 { "" } else { "s" },
            quoted.join(", ")
        ),
        format!("add {}", given.join(" ")),
    )
}

/// Launches `k` once on `args`, bounds-checked unless `unchecked`.
fn launch(k: &Kernel, grid: [u32; 3], args: &[Arg<'_>], unchecked: bool) -> Result<(), Failure> {
    let result = if unchecked {
        // SAFETY: the user asked for an unchecked launch on the command line and takes
        // responsibility for the kernel's accesses staying in bounds.
        unsafe { k.launch_unchecked(grid, args) }
    } else {
        k.launch(grid, args)
    };
    result.map_err(|e| launch_failure(k.file(), e))
}

/// A failed launch; errors at a place in the kernel are shown with the source line and a
/// caret under the access or assertion.
fn launch_failure(file: &SourceFile, e: lnc::Error) -> Failure {
    let d = match &e {
        lnc::Error::OutOfBounds(ob) => site_span(file, &ob.location).map(|span| {
            let (lo, hi) = ob.valid;
            Diagnostic::error(
                format!(
                    "out-of-bounds access in kernel `{}`: element offset {} of `{}` is outside its buffer [{lo}, {hi})",
                    ob.kernel, ob.offset, ob.param
                ),
                span,
                format!("in program {:?}", ob.pid),
            )
            .with_note(if hi > lo {
                format!("`{}` may be indexed at offsets {lo} to {} from where it points", ob.param, hi - 1)
            } else {
                format!("`{}` is an empty buffer: no offset is valid", ob.param)
            })
            .with_help("pass a larger buffer, or mask the access to the valid offsets (e.g. `mask=offs < N`)")
        }),
        lnc::Error::AssertFailed { kernel, location, pid, .. } => site_span(file, location).map(|span| {
            Diagnostic::error(format!("assertion failed in kernel `{kernel}`"), span, format!("false in program {pid:?}"))
        }),
        _ => None,
    };
    match d {
        Some(d) => Failure(d.render(file)),
        None => e.into(),
    }
}

/// The span of the call at `location` (`file:line:col`, as launch errors give it): from
/// that column through the call's closing parenthesis, or the name there when it is not a
/// call.
fn site_span(file: &SourceFile, location: &str) -> Option<Span> {
    let mut parts = location.rsplitn(3, ':');
    let col = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let start = file.offset(line, col)? as usize;
    let rest = &file.text[start..];
    let name_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).unwrap_or(rest.len());
    let mut end = start + if name_len > 0 { name_len } else { rest.chars().next().map_or(0, char::len_utf8) };
    if rest[name_len..].starts_with('(') {
        let mut depth = 0usize;
        for (i, c) in rest[name_len..].char_indices() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = start + name_len + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    Some(Span::new(start, end))
}

fn run(l: &LaunchArgs, out: &Path) -> Result<(), Failure> {
    let mut p = prepare(l)?;
    let (grid, unchecked) = (p.grid, p.unchecked);
    let (k, args) = p.args()?;
    launch(k, grid, &args, unchecked)?;
    drop(args);

    std::fs::create_dir_all(out).map_err(|e| fail(format!("cannot create `{}`: {e}", out.display())))?;
    for param in p.kernel.params() {
        if let Some((b, _)) = p.buffers.get(&param.name) {
            let path = out.join(format!("{}.npy", param.name));
            npy::write(&path, b).map_err(fail)?;
        }
    }
    Ok(())
}
