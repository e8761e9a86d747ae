//! Kernels compute IEEE arithmetic whatever floating-point control the launching thread
//! has: a process with a library built with `-ffast-math` runs with denormals-are-zero
//! and flush-to-zero set, under which x86 reads subnormal inputs as zero and writes zero
//! for subnormal results. Each worker runs its programs under the MXCSR's reset value and
//! gives the thread its own back (lnc-runtime's `FpControl`).

#![cfg(target_arch = "x86_64")]

use half::bf16;

/// Denormals-are-zero and flush-to-zero.
const DAZ_FTZ: u32 = 0x8040;

fn mxcsr() -> u32 {
    let mut csr = 0u32;
    // SAFETY: writes four bytes to a local.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
    csr
}

fn set_mxcsr(csr: u32) {
    // SAFETY: a value read by `stmxcsr` with control bits of the architecture only.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags)) };
}

const KERNEL: &str = "import triton\nimport triton.language as tl\n\n@triton.jit\n\
def scale(X, Y, N, BLOCK: tl.constexpr):\n\
\x20   offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
\x20   x = tl.load(X + offs, mask=offs < N, other=0.)\n\
\x20   tl.store(Y + offs, x * 2.0, mask=offs < N)\n\
\n@triton.jit\n\
def copy(X, Y, N, BLOCK: tl.constexpr):\n\
\x20   offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
\x20   x = tl.load(X + offs, mask=offs < N, other=0.)\n\
\x20   tl.store(Y + offs, x, mask=offs < N)\n\
\n@triton.jit\n\
def tiny(Y, S):\n\
\x20   tl.store(Y, 1e-40)\n\
\x20   tl.store(Y + 1, S)\n\
\x20   tl.store(Y + 2, S * 0.5)\n";

/// Subnormal and normal `f32` values, and the few-lane rows both ways, under DAZ and FTZ
/// in the launching thread, which created the pool (its threads inherit the control) and
/// runs a one-program grid itself.
#[test]
fn subnormals_survive_a_launching_thread_that_flushes_them() {
    std::thread::spawn(|| {
        // Subnormals of every size, some normals, and zeros; the references computed
        // before the thread flushes (doubling is exact).
        let mut x: Vec<f32> =
            (0..5000u32).map(|k| f32::from_bits(((k * 1677) % 0x0080_0000) | ((k & 1) << 31))).collect();
        x.extend([1.0f32, -3.5e-38, 1.2e-38, 0.0, -0.0]);
        let doubled: Vec<u32> = x.iter().map(|&a| ((f64::from(a) * 2.0) as f32).to_bits()).collect();
        let rounded: Vec<u16> = x.iter().map(|&a| bf16::from_f32(a).to_bits()).collect();
        let before = mxcsr();
        set_mxcsr(before | DAZ_FTZ);
        for threads in [1, 2] {
            for bf16_cvt in [true, false] {
                let opts = lnc::CompileOptions { bf16_cvt, ..Default::default() };
                let jit =
                    lnc::Jit::with_options(opts).with_threads(threads).unwrap_or_else(|e| panic!("{e}"));
                let module = jit.module("fp.py", KERNEL.to_string()).unwrap_or_else(|e| panic!("{e}"));
                for (n, block) in [(x.len(), 1024u32), (13, 16)] {
                    let grid = n.div_ceil(block as usize) as u32;
                    let sig = format!("*fp32,*fp32,i32,{block}");
                    let k = module.kernel("scale", &sig).unwrap_or_else(|e| panic!("{e}"));
                    let mut y = vec![f32::NAN; n];
                    k.launch(grid, &lnc::args![&x[..n], &mut y, n as i32]).unwrap_or_else(|e| panic!("{e}"));
                    for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
                        assert_eq!(
                            b.to_bits(),
                            doubled[i],
                            "{threads} threads, n {n}: 2 × {:#010x} (#{i})",
                            a.to_bits()
                        );
                    }
                    let sig = format!("*fp32,*bf16,i32,{block}");
                    let k = module.kernel("copy", &sig).unwrap_or_else(|e| panic!("{e}"));
                    let mut y = vec![bf16::from_bits(0x7fa5); n];
                    k.launch(grid, &lnc::args![&x[..n], &mut y, n as i32]).unwrap_or_else(|e| panic!("{e}"));
                    for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
                        assert_eq!(
                            b.to_bits(),
                            rounded[i],
                            "{threads} threads, bf16_cvt {bf16_cvt}, n {n}: {:#010x} (#{i})",
                            a.to_bits()
                        );
                    }
                }
            }
        }
        // The thread's own control is back.
        assert_eq!(mxcsr() & !0x3f, (before | DAZ_FTZ) & !0x3f);
        set_mxcsr(before);
    })
    .join()
    .unwrap_or_else(|_| panic!("the launching thread failed"));
}

/// A subnormal literal folds, and an `f64` argument for an `fp32` parameter converts, to
/// the same bits on a thread that flushes subnormals: the compiler and the launch convert
/// under the reset control too.
#[test]
fn subnormal_constants_and_arguments_survive_a_thread_that_flushes_them() {
    let tiny = 1e-40f32.to_bits();
    let half = f32::from_bits(tiny / 2).to_bits();
    std::thread::spawn(move || {
        let before = mxcsr();
        set_mxcsr(before | DAZ_FTZ);
        let jit = lnc::Jit::with_options(lnc::CompileOptions::default())
            .with_threads(1)
            .unwrap_or_else(|e| panic!("{e}"));
        let module = jit.module("fp.py", KERNEL.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let k = module.kernel("tiny", "*fp32,fp32").unwrap_or_else(|e| panic!("{e}"));
        for checked in [true, false] {
            let mut y = vec![f32::NAN; 3];
            let args = lnc::args![&mut y, 1e-40f64];
            if checked {
                k.launch(1u32, &args).unwrap_or_else(|e| panic!("{e}"));
            } else {
                // SAFETY: the kernel writes the three elements of y.
                unsafe { k.launch_unchecked(1u32, &args) }.unwrap_or_else(|e| panic!("{e}"));
            }
            let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, [tiny, tiny, half], "checked {checked}");
        }
        set_mxcsr(before);
    })
    .join()
    .unwrap_or_else(|_| panic!("the launching thread failed"));
}
