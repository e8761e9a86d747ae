//! The machine's last-level cache, and evicting it between timed launches.
//!
//! Code generation sizes its non-temporal stores by the cache (`lnc-clif`'s streaming
//! threshold); benchmarks start every timed launch from cold caches, as Triton's
//! `do_bench` does, or the previous launch's output would still be in the cache.

use std::sync::OnceLock;

use rayon::prelude::*;

/// The last-level cache as Linux reports it in `/sys/devices/system/cpu/cpu0/cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastLevelCache {
    /// Its size in bytes.
    pub bytes: u64,
    /// How many hardware threads share it.
    pub threads: u64,
}

/// The last-level cache of cpu0 as `/sys` describes it, read once; `None` where it does
/// not.
pub fn last_level_cache() -> Option<LastLevelCache> {
    static CACHE: OnceLock<Option<LastLevelCache>> = OnceLock::new();
    *CACHE.get_or_init(read_last_level_cache)
}

fn read_last_level_cache() -> Option<LastLevelCache> {
    let mut best: Option<(u32, LastLevelCache)> = None;
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Ok(level) = std::fs::read_to_string(format!("{dir}/level")) else { break };
        let level: u32 = level.trim().parse().ok()?;
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let kib: u64 = size.trim().strip_suffix('K')?.parse().ok()?;
        let shared = std::fs::read_to_string(format!("{dir}/shared_cpu_list")).unwrap_or_default();
        let threads = cpu_list_len(shared.trim()).max(1);
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, LastLevelCache { bytes: kib << 10, threads }));
        }
    }
    best.map(|(_, c)| c)
}

/// The number of CPUs in a list like `0-3,8,10-11`.
fn cpu_list_len(list: &str) -> u64 {
    list.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

/// A buffer that evicts the caches when written over: twice the last-level cache, at
/// least 64 MiB.
pub struct CacheFlush {
    buf: Vec<u64>,
}

impl CacheFlush {
    /// Allocates the buffer and writes it once (its pages are not faulted in during a
    /// timed run).
    pub fn new() -> CacheFlush {
        let bytes = last_level_cache().map_or(0, |c| 2 * c.bytes).max(64 << 20);
        // Non-zero, so that the pages are written now rather than mapped zeroed.
        CacheFlush { buf: vec![1; (bytes / 8) as usize] }
    }

    /// The bytes one [`CacheFlush::run`] writes.
    pub fn bytes(&self) -> usize {
        self.buf.len() * 8
    }

    /// Writes over the buffer from every thread of the current rayon pool (run it inside
    /// the pool a launch uses), so each core's private caches are evicted too.
    pub fn run(&mut self) {
        self.buf.par_chunks_mut(1 << 14).for_each(|c| c.iter_mut().for_each(|v| *v = v.wrapping_add(1)));
    }
}

impl Default for CacheFlush {
    fn default() -> CacheFlush {
        CacheFlush::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cpu_lists() {
        assert_eq!(cpu_list_len("0-3,8,10-11"), 7);
        assert_eq!(cpu_list_len("0"), 1);
        assert_eq!(cpu_list_len(""), 0);
        assert_eq!(cpu_list_len("3-1"), 1);
    }

    #[test]
    fn a_flush_writes_every_word_once_more() {
        let mut f = CacheFlush::new();
        assert!(f.bytes() >= 64 << 20);
        f.run();
        assert!(f.buf.iter().all(|&v| v == 2));
    }
}
