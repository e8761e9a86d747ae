//! `lnc bench`: time repeated launches of one kernel, like Triton's `do_bench`; and the
//! generated buffers (`rand:f32:4096x1000`) that let a benchmark run without `.npy` files.

use std::time::{Duration, Instant};

use lnc::DType;

use crate::npy::HostBuffer;
use crate::{Failure, LaunchArgs, fail, launch, prepare};

/// How a generated buffer is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// All zeros (any dtype).
    Zeros,
    /// All ones (any dtype).
    Ones,
    /// Uniform in [0, 1) (float dtypes).
    Rand,
    /// Standard normal (float dtypes).
    Randn,
}

/// A buffer generated in memory: `KIND:DTYPE:SHAPE`, e.g. `randn:f32:4096x1000`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    pub fill: Fill,
    pub dtype: DType,
    pub shape: Vec<u64>,
}

impl Generated {
    /// `None` when `v` is not of the form `KIND:...`; otherwise the parsed buffer or why not.
    pub fn parse(v: &str) -> Option<Result<Generated, String>> {
        let (kind, rest) = v.split_once(':')?;
        let fill = match kind {
            "zeros" => Fill::Zeros,
            "ones" => Fill::Ones,
            "rand" => Fill::Rand,
            "randn" => Fill::Randn,
            _ => return None,
        };
        Some(Self::parse_rest(fill, rest))
    }

    fn parse_rest(fill: Fill, rest: &str) -> Result<Generated, String> {
        let (dtype, shape) =
            rest.split_once(':').ok_or("expected KIND:DTYPE:SHAPE, e.g. `rand:f32:4096x1000`")?;
        let dtype = DType::from_sig_name(dtype).ok_or_else(|| format!("unknown element type `{dtype}`"))?;
        if matches!(fill, Fill::Rand | Fill::Randn) && !dtype.is_float() {
            return Err(format!("random values need a float element type, not `{dtype}`"));
        }
        let shape = shape
            .split(['x', ','])
            .map(|d| d.trim().replace('_', "").parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|_| format!("shape `{shape}`: expected sizes separated by `x`, e.g. 4096x1000"))?;
        let bytes = shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d));
        if !bytes.is_some_and(|b| usize::try_from(b).is_ok_and(|b| b <= isize::MAX as usize)) {
            return Err(format!("shape `{}` is too large", rest));
        }
        Ok(Generated { fill, dtype, shape })
    }

    /// Allocates and fills the buffer; the seed of the random values derives from `name`,
    /// so a command line always generates the same data. An error when the memory cannot
    /// be had.
    pub fn generate(&self, name: &str) -> Result<HostBuffer, String> {
        let mut buf = HostBuffer::zeroed(self.dtype, self.shape.clone())?;
        let mut rng =
            SplitMix64(name.bytes().fold(0x9e37_79b9_7f4a_7c15, |h, b| (h ^ b as u64).rotate_left(8)));
        let value = |rng: &mut SplitMix64| -> f64 {
            match self.fill {
                Fill::Zeros => 0.0,
                Fill::Ones => 1.0,
                Fill::Rand => rng.uniform(),
                Fill::Randn => rng.normal(),
            }
        };
        let size = self.dtype.size() as usize;
        if self.fill == Fill::Zeros {
            return Ok(buf);
        }
        for e in buf.bytes_mut().chunks_exact_mut(size) {
            let v = value(&mut rng);
            match self.dtype {
                DType::F16 => e.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                DType::BF16 => e.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
                DType::F32 => e.copy_from_slice(&(v as f32).to_le_bytes()),
                DType::F64 => e.copy_from_slice(&v.to_le_bytes()),
                // Integers only ever get zeros (returned above) or ones.
                _ => e[0] = v as u8,
            }
        }
        Ok(buf)
    }
}

/// A small, fast, deterministic generator (SplitMix64); statistical quality is plenty for
/// benchmark inputs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Warm-up: at least this many launches…
const WARMUP_MIN: usize = 3;
/// …and at least this long (unless one launch takes longer).
const WARMUP_TIME: Duration = Duration::from_millis(100);
/// Without `--reps`: as many timed launches as fit in this time, within the bounds below.
const TARGET_TIME: f64 = 1.0;
const REPS_MIN: usize = 20;
const REPS_MAX: usize = 10_000;
/// The most `--reps` accepts: the timings are kept in memory.
const REPS_LIMIT: usize = 100_000_000;

/// Times of one benchmark, in seconds per launch.
#[derive(Debug)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    reps: usize,
}

fn stats(mut times: Vec<f64>) -> Stats {
    times.sort_by(f64::total_cmp);
    let n = times.len();
    let median = if n % 2 == 1 { times[n / 2] } else { (times[n / 2 - 1] + times[n / 2]) / 2.0 };
    Stats { median, min: times[0], max: times[n - 1], reps: n }
}

/// A duration in seconds, printed with a unit that fits.
fn human(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `lnc bench`: compile once, warm up, time `reps` launches and print median/min/max;
/// with `flush`, the caches are evicted before each launch (outside the timing).
pub fn bench(l: &LaunchArgs, reps: Option<usize>, json: bool, flush: bool) -> Result<(), Failure> {
    if reps == Some(0) {
        return Err(fail("--reps must be at least 1"));
    }
    if reps.is_some_and(|r| r > REPS_LIMIT) {
        return Err(fail(format!("--reps must be at most {REPS_LIMIT}")));
    }
    let mut p = prepare(l)?;
    let (grid, unchecked, compile) = (p.grid, p.unchecked, p.compile);
    let (k, args) = p.args()?;
    let mut flusher = flush.then(lnc_runtime::CacheFlush::new);
    let mut cool = || {
        if let Some(f) = &mut flusher {
            f.run();
        }
    };

    // Warm-up; the first launch also reports a launch error (and, unchecked, generates
    // code). The flushes count towards the warm-up's time, so that without `--reps` a
    // flushed benchmark still takes about TARGET_TIME.
    let start = Instant::now();
    let mut warm = 0usize;
    while warm < WARMUP_MIN || start.elapsed() < WARMUP_TIME {
        cool();
        launch(k, grid, &args, unchecked)?;
        warm += 1;
    }
    let per_launch = start.elapsed().as_secs_f64() / warm as f64;
    let reps = reps.unwrap_or_else(|| ((TARGET_TIME / per_launch) as usize).clamp(REPS_MIN, REPS_MAX));

    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        cool();
        let t = Instant::now();
        launch(k, grid, &args, unchecked)?;
        times.push(t.elapsed().as_secs_f64());
    }
    // A launch shorter than the clock's resolution would read as zero; count it as one tick.
    for t in &mut times {
        *t = t.max(1e-9);
    }
    let s = stats(times);
    let compile_s = compile.as_secs_f64().max(1e-9);
    if json {
        println!(
            "{{\"kernel\": {}, \"grid\": [{}, {}, {}], \"reps\": {}, \"median_s\": {:e}, \"min_s\": {:e}, \"max_s\": {:e}, \"compile_s\": {:e}, \"flush\": {}, \"prefetches\": {}}}",
            json_string(k.name()),
            grid[0],
            grid[1],
            grid[2],
            s.reps,
            s.median,
            s.min,
            s.max,
            compile_s,
            flush,
            k.prefetches(),
        );
    } else {
        println!("{} [{}], grid {}x{}x{}", k.name(), k.signature(), grid[0], grid[1], grid[2]);
        println!("  compile (source to callable)  {}", human(compile_s));
        if k.prefetches() > 0 {
            println!("  prefetches of the next program's rows: {} (--no-prefetch: none)", k.prefetches());
        }
        println!(
            "  {} launches{}{}: median {}, min {}, max {}",
            s.reps,
            if unchecked { " (unchecked)" } else { "" },
            if flush { ", caches flushed before each" } else { "" },
            human(s.median),
            human(s.min),
            human(s.max)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_generated_buffers() {
        let g = Generated::parse("rand:f32:4096x1000").unwrap().unwrap();
        assert_eq!(g, Generated { fill: Fill::Rand, dtype: DType::F32, shape: vec![4096, 1000] });
        let g = Generated::parse("zeros:i32:7").unwrap().unwrap();
        assert_eq!(g.shape, vec![7]);
        assert!(Generated::parse("file.npy").is_none());
        assert!(Generated::parse("other:f32:3").is_none());
        assert!(Generated::parse("randn:i32:3").unwrap().is_err());
        assert!(Generated::parse("rand:f32:3xq").unwrap().is_err());
        assert!(Generated::parse("rand:f33:3").unwrap().is_err());
        assert!(Generated::parse("rand:f32:99999999999x99999999999").unwrap().is_err());
    }

    #[test]
    fn generates_values_in_range() {
        let g = Generated::parse("rand:f32:1000").unwrap().unwrap();
        let b = g.generate("X").unwrap();
        let v: Vec<f32> =
            b.bytes().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        let g = Generated::parse("randn:f64:10000").unwrap().unwrap();
        let b = g.generate("Y").unwrap();
        let v: Vec<f64> =
            b.bytes().chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.05 && (var - 1.0).abs() < 0.1, "{mean} {var}");
        let b = Generated::parse("ones:i16:3").unwrap().unwrap().generate("Z").unwrap();
        assert_eq!(b.bytes(), &[1, 0, 1, 0, 1, 0]);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(stats(vec![3.0, 1.0, 2.0]).median, 2.0);
        let s = stats(vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!((s.median, s.min, s.max, s.reps), (2.5, 1.0, 4.0, 4));
    }
}
