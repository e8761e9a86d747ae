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
        /// Stages to print: ast, bir, opt, lir, clif, asm (repeatable).
        #[arg(long = "emit", default_value = "lir")]
        emit: Vec<Stage>,
        /// Also print the block IR after each optimization pass.
        #[arg(long)]
        print_after_all: bool,
        /// Emit code without bounds checks (what `launch_unchecked` runs).
        #[arg(long)]
        unchecked: bool,
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
        /// Print one JSON object (`median_s`, `min_s`, `max_s`, `reps`, `compile_s`).
        #[arg(long)]
        json: bool,
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
    /// Skip bounds checks.
    #[arg(long)]
    unchecked: bool,
}

/// An error already rendered for the terminal.
struct Failure(String);

impl From<lnc::Error> for Failure {
    fn from(e: lnc::Error) -> Failure {
        Failure(match &e {
            lnc::Error::Source(_) => e.to_string(),
            _ => format!("error: {e}"),
        })
    }
}

fn fail(msg: impl Into<String>) -> Failure {
    Failure(format!("error: {}", msg.into()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { file } => check(&file),
        Command::Compile { file, kernel, signature, emit, print_after_all, unchecked } => {
            compile(&file, &kernel, &signature, emit, print_after_all, unchecked)
        }
        Command::Run { launch, out } => run(&launch, &out),
        Command::Bench { launch, reps, json } => bench::bench(&launch, reps, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("{}", msg.trim_end());
            ExitCode::FAILURE
        }
    }
}

fn load(file: &Path) -> Result<Module, Failure> {
    Ok(Jit::new().load(file)?)
}

fn check(file: &Path) -> Result<(), Failure> {
    let module = load(file)?;
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
) -> Result<(), Failure> {
    let module = load(file)?;
    let req = DumpRequest { stages: emit, after_each_pass: print_after_all, checked: !unchecked };
    let dumps = module.dump(kernel, signature, &req)?;
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
    if let Ok(f) = cleaned.parse::<f64>() {
        return Ok(ArgValue::Float(f));
    }
    Err(fail(format!(
        "--arg {name}={v}: expected `@file.npy`, `@file.npy+K`, `rand:f32:4096x1000` (zeros, ones, rand, randn), an integer, a float or True/False"
    )))
}

fn literal_text(v: &ArgValue) -> String {
    match v {
        ArgValue::Int(i) => i.to_string(),
        ArgValue::Float(f) => format!("{f:?}"),
        ArgValue::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        ArgValue::Buffer { .. } | ArgValue::Generated(_) => String::new(),
    }
}

fn parse_grid(g: &str) -> Result<[u32; 3], Failure> {
    let parts: Vec<&str> = g.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(fail(format!("--grid `{g}`: expected X, X,Y or X,Y,Z")));
    }
    let mut grid = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        grid[i] =
            p.parse().map_err(|_| fail(format!("--grid `{g}`: `{p}` is not a non-negative integer")))?;
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
    let module = load(file)?;
    let mut compile = t.elapsed();
    let info = module
        .kernels()
        .into_iter()
        .find(|k| k.name == kernel)
        .ok_or_else(|| fail(format!("no @jit kernel named `{kernel}` in {}", file.display())))?;

    let mut values: HashMap<String, ArgValue> = HashMap::new();
    for a in &l.args {
        let (name, v) = a.split_once('=').ok_or_else(|| fail(format!("--arg `{a}`: expected NAME=VALUE")))?;
        if !info.params.iter().any(|p| p.name == name) {
            let names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
            return Err(fail(format!(
                "--arg {name}: `{kernel}` has no parameter `{name}` (parameters: {})",
                names.join(", ")
            )));
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
                let buf = npy::read(path).map_err(|m| fail(format!("--arg {name}: {m}")))?;
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
                buffers.insert(name.clone(), (g.generate(name), 0));
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
                    None if p.constexpr && p.default.is_some() => continue,
                    None => {
                        return Err(fail(format!("missing --arg {}=... (parameter of `{kernel}`)", p.name)));
                    }
                };
                entries.push(format!("{}={entry}", p.name));
            }
            entries.join(",")
        }
    };
    let t = Instant::now();
    let k = module.kernel(kernel, &signature)?;
    compile += t.elapsed();

    // bf16 arrays travel as uint16: relabel them for *bf16 parameters.
    for p in k.params() {
        if let (Elem::Ptr(DType::BF16), Some((b, _))) = (p.elem, buffers.get_mut(&p.name))
            && b.dtype == DType::U16
        {
            b.dtype = DType::BF16;
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
                (None, _) => {
                    missing.push(p.name.clone());
                    continue;
                }
            };
            args.push(arg);
        }
        if !missing.is_empty() {
            return Err(fail(format!(
                "missing --arg for parameter(s) of `{}`: {}",
                k.name(),
                missing.join(", ")
            )));
        }
        Ok((k, args))
    }
}

/// Launches `k` once on `args`, bounds-checked unless `unchecked`.
fn launch(k: &Kernel, grid: [u32; 3], args: &[Arg<'_>], unchecked: bool) -> Result<(), Failure> {
    if unchecked {
        // SAFETY: the user asked for an unchecked launch on the command line and takes
        // responsibility for the kernel's accesses staying in bounds.
        unsafe { k.launch_unchecked(grid, args)? };
    } else {
        k.launch(grid, args)?;
    }
    Ok(())
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
