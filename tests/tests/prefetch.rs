//! Prefetches of the next program's rows (lnc-tile's `prefetch`, lnc-clif's rewrite of
//! marked byte loads into `prefetchnta`): they change no bit of any output, and the last
//! program's prefetch of the row after the grid never faults, even into unmapped memory.

mod common;

use common::*;
use half::{bf16, f16};

const FWD: &str = "_layer_norm_fwd_fused";
const DX: &str = "_layer_norm_bwd_dx_fused";

/// The seed compiled with and without prefetches, launching on `threads` threads (the
/// global pool's when `None`).
fn modules(src: &str, threads: Option<usize>) -> (lnc::Module, lnc::Module) {
    let jit = |prefetch| {
        let jit = lnc::Jit::with_options(lnc::CompileOptions { prefetch, ..Default::default() });
        let jit = match threads {
            Some(t) => jit.with_threads(t).unwrap(),
            None => jit,
        };
        jit.module("ln.py", src).unwrap()
    };
    (jit(true), jit(false))
}

/// `rows` rows of `n` floats ending exactly where an inaccessible region of at least one
/// more row starts: a read of the row after the last faults.
struct Guarded {
    base: *mut libc::c_void,
    len: usize,
    data: *mut f32,
}

impl Guarded {
    fn new(rows: usize, n: usize) -> Guarded {
        let page = 4096;
        let bytes = rows * n * 4;
        let data_pages = bytes.div_ceil(page) * page;
        let guard = (n * 4).div_ceil(page) * page + page;
        let len = data_pages + guard;
        // SAFETY: a fresh anonymous mapping, then its tail made inaccessible.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let guard_start = (base as *mut u8).add(data_pages);
            assert_eq!(libc::mprotect(guard_start as *mut libc::c_void, guard, libc::PROT_NONE), 0);
            let data = guard_start.sub(bytes) as *mut f32;
            Guarded { base, len, data }
        }
    }

    fn slice(&mut self, len: usize) -> &mut [f32] {
        // SAFETY: `len` floats end at the guard, inside the mapping, which lives as long as
        // `self` and is only reached through this borrow.
        unsafe { std::slice::from_raw_parts_mut(self.data, len) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The last program prefetches the row after the grid's last, here the first bytes of
/// an inaccessible region: a prefetch never faults, so the launch succeeds, checked and
/// unchecked, and computes what the kernel without prefetches computes.
#[test]
fn prefetching_past_the_last_row_into_unmapped_memory_does_not_fault() {
    let (with, without) = modules(&seed_source(), None);
    let mut rng = rng();
    for (m, n) in [(7usize, 1000usize), (3, 4096), (5, 1025)] {
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{}", n.next_power_of_two());
        let k = with.kernel(FWD, &sig).unwrap_or_else(|e| panic!("{e}"));
        let plain = without.kernel(FWD, &sig).unwrap_or_else(|e| panic!("{e}"));
        assert!(k.prefetches() > 0, "{m}x{n}: no prefetch compiled");
        assert_eq!(plain.prefetches(), 0);
        let mut guarded = Guarded::new(m, n);
        let x = guarded.slice(m * n);
        x.copy_from_slice(&randn(&mut rng, m * n, -2.3, 0.5));
        let (w, b) = (randn(&mut rng, n, 1.0, 0.3), randn(&mut rng, n, 0.0, 0.3));
        let run = |k: &lnc::Kernel, x: &[f32], unchecked: bool| {
            let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
            let args = lnc::args![x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
            if unchecked {
                // SAFETY: every buffer holds what the kernel's accesses reach (the checked
                // launch of the same arguments succeeds first).
                unsafe { k.launch_unchecked(m as u32, &args) }.unwrap_or_else(|e| panic!("{e}"));
            } else {
                k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
            }
            [y, mean, rstd].concat().iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let want = run(&plain, x, false);
        let got = run(&k, x, false);
        assert_eq!(got, want, "{m}x{n} checked");
        assert_eq!(run(&k, x, true), want, "{m}x{n} unchecked");
        // And it is the layer norm: against the float64 reference.
        let floats = |bits: &[u32]| bits.iter().map(|&b| f32::from_bits(b)).collect::<Vec<f32>>();
        let (ry, rmean, rrstd) = layer_norm_ref(x, &w, &b, n, 1e-5);
        let got = floats(&got);
        assert_close(&format!("y ({m}x{n})"), &got[..m * n], &ry, 1e-5, 1e-5);
        assert_close(&format!("mean ({m}x{n})"), &got[m * n..m * n + m], &rmean, 1e-5, 1e-6);
        assert_close(&format!("rstd ({m}x{n})"), &got[m * n + m..], &rrstd, 1e-5, 1e-5);
    }
}

/// The seed forward in fp32, fp16 and bf16, and its dx kernel, with and without
/// prefetches: the same bits, at lengths around a cache line and the unrolled steps.
#[test]
fn prefetches_change_no_bit() {
    // One thread: the dx kernel's partial sums then add in the same order in both runs.
    let (with, without) = modules(&seed_source(), Some(1));
    let mut rng = rng();
    for (m, n) in [(33usize, 1000usize), (9, 4097), (20, 48), (6, 15), (5, 2000)] {
        let x = randn(&mut rng, m * n, -2.3, 0.5);
        let (w, b) = (randn(&mut rng, n, 1.0, 0.3), randn(&mut rng, n, 0.0, 0.3));
        let block = n.next_power_of_two();
        // fp32
        let sig = format!("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,{block}");
        let run = |module: &lnc::Module| {
            let k = module.kernel(FWD, &sig).unwrap_or_else(|e| panic!("{e}"));
            let (mut y, mut mean, mut rstd) = (vec![f32::NAN; m * n], vec![f32::NAN; m], vec![f32::NAN; m]);
            let args = lnc::args![&x, &mut y, &w, &b, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
            k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
            ([y, mean, rstd].concat().iter().map(|v| v.to_bits()).collect::<Vec<u32>>(), k.prefetches())
        };
        let ((got, pf), (want, _)) = (run(&with), run(&without));
        // Rows of 1 KB or more in loops of 8-lane tiles, of a page in 4-lane ones (lnc-tile's
        // MIN_WIDE_ROW_BYTES and MIN_ROW_BYTES): of these lengths, 1024 and more.
        assert_eq!(pf > 0, block >= 1024, "{m}x{n}: {pf}");
        assert_eq!(got, want, "fp32 {m}x{n}");
        // fp16 and bf16 storage
        macro_rules! half_case {
            ($t:ty, $name:literal) => {{
                let xh: Vec<$t> = x.iter().map(|&v| <$t>::from_f32(v)).collect();
                let wh: Vec<$t> = w.iter().map(|&v| <$t>::from_f32(v)).collect();
                let bh: Vec<$t> = b.iter().map(|&v| <$t>::from_f32(v)).collect();
                let sig = format!("*{0},*{0},*{0},*{0},*fp32,*fp32,i32,i32,fp32,{block}", $name);
                let run = |module: &lnc::Module| {
                    let k = module.kernel(FWD, &sig).unwrap_or_else(|e| panic!("{e}"));
                    let mut y = vec![<$t>::NAN; m * n];
                    let (mut mean, mut rstd) = (vec![f32::NAN; m], vec![f32::NAN; m]);
                    let args =
                        lnc::args![&xh, &mut y, &wh, &bh, &mut mean, &mut rstd, n as i32, n as i32, 1e-5f32];
                    k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
                    let mut bits: Vec<u32> = y.iter().map(|v| v.to_bits() as u32).collect();
                    bits.extend(mean.iter().chain(&rstd).map(|v| v.to_bits()));
                    bits
                };
                assert_eq!(run(&with), run(&without), "{} {m}x{n}", $name);
            }};
        }
        half_case!(f16, "fp16");
        half_case!(bf16, "bf16");
        // The backward's dx kernel prefetches x and dy.
        let dy = randn(&mut rng, m * n, 0.0, 0.1);
        let (mut mean, mut rstd) = (vec![f32::NAN; m], vec![f32::NAN; m]);
        let (r_mean, r_rstd) = {
            let (_, mu, rs) = layer_norm_ref(&x, &w, &b, n, 1e-5);
            (mu, rs)
        };
        for r in 0..m {
            mean[r] = r_mean[r] as f32;
            rstd[r] = r_rstd[r] as f32;
        }
        let group = group_size_m(n);
        let sig = format!(
            "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,{group},{block}"
        );
        let run = |module: &lnc::Module| {
            let k = module.kernel(DX, &sig).unwrap_or_else(|e| panic!("{e}"));
            let mut dx = vec![f32::NAN; m * n];
            let (mut pdw, mut pdb) = (vec![f32::NAN; group * n], vec![f32::NAN; group * n]);
            let mut locks = vec![0i32; 2 * group];
            let args = lnc::args![
                &mut dx, &dy, &mut pdw, &mut pdb, &x, &w, &b, &mean, &rstd, &mut locks, n as i32, n as i32,
                1e-5f32
            ];
            k.launch(m as u32, &args).unwrap_or_else(|e| panic!("{e}"));
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
            let mut in_lir = 0;
            k.lir().walk(|i| {
                in_lir +=
                    matches!(k.lir().insts[i].opcode, lnc_lir::Opcode::Prefetch { write: false }) as usize
            });
            ([bits(&dx), bits(&pdw), bits(&pdb)].concat(), (in_lir, k.prefetches()))
        };
        let ((got, pf), (want, none)) = (run(&with), run(&without));
        // x and dy, in each of the three loops the streaming pass splits the dx pass into
        // (first partial line, whole lines, last partial line); in the machine code once
        // per copy of those (the whole-lines loop has a streaming copy and a cached one).
        assert_eq!(none, (0, 0));
        if block >= 1024 {
            assert!(pf.0 == 6 && pf.1 >= 8, "dx {m}x{n}: {pf:?}");
        } else {
            assert_eq!(pf, (0, 0), "dx {m}x{n}");
        }
        assert_eq!(got, want, "dx {m}x{n}");
    }
}
