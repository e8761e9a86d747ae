//! `tl.randint`, `tl.rand`, `tl.randn`, their `4x` forms and `tl.umulhi` (kernels in
//! `tests/kernels/random.py`, including the dropout tutorial's kernel):
//! - against a Philox 4x32 written here from the algorithm, bit for bit, on sizes that are
//!   not multiples of the block or the vector width, outputs poisoned;
//! - against values Triton 3.9's interpreter produced for the same kernels and arguments
//!   (`../shared/oracle/run_oracle.py`), hard-coded, which tie that reference to Triton;
//! - against the block-IR interpreter through the differential harness, bit for bit.

mod common;

use common::diff::{A, Case, Check, Data, diff, load};
use common::*;
use rand::Rng;

/// Philox 4x32: counter `(c0, c1, 0, 0)`, key = the seed's two 32-bit halves.
fn philox(seed: u64, c0: u32, c1: u32, rounds: u32) -> [u32; 4] {
    let (mut k0, mut k1) = (seed as u32, (seed >> 32) as u32);
    let (mut c0, mut c1, mut c2, mut c3) = (c0, c1, 0u32, 0u32);
    for _ in 0..rounds {
        let (p0, p2) = (c0, c2);
        c0 = ((u64::from(p2) * 0xCD9E_8D57) >> 32) as u32 ^ c1 ^ k0;
        c2 = ((u64::from(p0) * 0xD251_1F53) >> 32) as u32 ^ c3 ^ k1;
        c1 = p2.wrapping_mul(0xCD9E_8D57);
        c3 = p0.wrapping_mul(0xD251_1F53);
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    [c0, c1, c2, c3]
}

/// The words of an `int32` offset (no high word) or an `int64` one.
fn words32(seed: i64, offset: i32, rounds: u32) -> [u32; 4] {
    philox(seed as u64, offset as u32, 0, rounds)
}

fn words64(seed: i64, offset: i64, rounds: u32) -> [u32; 4] {
    philox(seed as u64, offset as u32, (offset >> 32) as u32, rounds)
}

/// Triton's `uint_to_uniform_float` of a 32-bit word.
fn uniform(w: u32) -> f32 {
    let x = w as i32;
    let x = if x < 0 { !x } else { x };
    x as f32 * 4.656_612_7e-10_f32
}

/// Box-Muller in float64 from two uniforms, as Triton's `pair_uniform_to_normal`.
fn normal(u1: f32, u2: f32) -> (f64, f64) {
    let u1 = f64::from(u1.max(1.0e-7));
    let th = std::f64::consts::TAU * f64::from(u2);
    let r = (-2.0 * u1.ln()).sqrt();
    (r * th.cos(), r * th.sin())
}

fn u32s(a: &A) -> Vec<u32> {
    match a.data() {
        Data::U32(v) => v.clone(),
        other => panic!("not uint32: {other:?}"),
    }
}

fn f32s(a: &A) -> Vec<f32> {
    match a.data() {
        Data::F32(v) => v.clone(),
        other => panic!("not float32: {other:?}"),
    }
}

fn exact(case: Case, args: usize) -> Case {
    (0..args).fold(case, |c, i| c.check(i, Check::Exact))
}

#[test]
fn dropout_tutorial_keeps_the_elements_philox_keeps() {
    let module = load("random.py");
    let mut rng = rng();
    for (n, block, p, seed) in [(4099usize, 1024u32, 0.5f32, 123i32), (1001, 128, 0.2, -7), (7, 16, 0.9, 0)] {
        let x = randn(&mut rng, n, 0.0, 1.0);
        let grid = (n as u32).div_ceil(block);
        let args =
            vec![A::at(x.clone(), 0), A::at(vec![f32::NAN; n], 0), A::I32(n as i32), A::F32(p), A::I32(seed)];
        let sig = format!("*fp32,*fp32,i32,fp32,i32,{block}");
        let out = f32s(&diff(&module, &exact(Case::new("_seeded_dropout", &sig, grid, args), 5))[1]);
        let mut kept = 0;
        for i in 0..n {
            let keep = uniform(words32(i64::from(seed), i as i32, 10)[0]) > p;
            let want = if keep { x[i] / (1.0 - p) } else { 0.0 };
            assert_eq!(out[i].to_bits(), want.to_bits(), "n {n}, element {i}: {} against {want}", out[i]);
            kept += keep as usize;
        }
        if n > 1000 {
            let share = kept as f64 / n as f64;
            assert!(
                (share - f64::from(1.0 - p)).abs() < 0.05,
                "n {n}: kept {share} of the elements at p = {p}"
            );
        }
    }
}

#[test]
fn thirty_two_bit_offsets_give_philox_words_uniforms_and_normals() {
    let module = load("random.py");
    for (n, block, seed) in [(1000usize, 128u32, -123_457i32), (37, 16, i32::MAX), (5, 64, 1)] {
        let grid = (n as u32).div_ceil(block);
        let mut args: Vec<A> = (0..4).map(|_| A::at(vec![0xDEAD_BEEFu32; n], 0)).collect();
        args.extend([A::at(vec![f32::NAN; n], 0), A::at(vec![f32::NAN; n], 0)]);
        args.extend([A::I32(n as i32), A::I32(seed)]);
        let sig = format!("*u32,*u32,*u32,*u32,*fp32,*fp32,i32,i32,{block}");
        let out = diff(&module, &exact(Case::new("words", &sig, grid, args), 6));
        let (r, nrm) = (f32s(&out[4]), f32s(&out[5]));
        for i in 0..n {
            let w = words32(i64::from(seed), i as i32, 10);
            for (k, word) in w.iter().enumerate() {
                assert_eq!(u32s(&out[k])[i], *word, "seed {seed}, offset {i}, word {k}");
            }
            let want_r = uniform(words32(i64::from(seed), i as i32, 7)[0]);
            assert_eq!(r[i].to_bits(), want_r.to_bits(), "rand(seed {seed}, {i}, 7)");
            assert!((0.0..1.0).contains(&r[i]), "rand out of [0, 1): {}", r[i]);
            let (z, _) = normal(uniform(w[0]), uniform(w[1]));
            let got = f64::from(nrm[i]);
            assert!((got - z).abs() <= 2e-6 * z.abs().max(1.0), "randn(seed {seed}, {i}): {got} against {z}");
        }
        if seed == -123_457 {
            // Triton's interpreter, `words` with these arguments: offsets 0..4.
            let triton: [[u32; 4]; 4] = [
                [3167121176, 3572147058, 2186115061, 3813485183],
                [1041437234, 2734680744, 3512495020, 3236471889],
                [2396969453, 1124611198, 3755294415, 1356237269],
                [3098378598, 2979282465, 3809949255, 4059571815],
            ];
            for (k, row) in triton.iter().enumerate() {
                assert_eq!(&u32s(&out[k])[..4], row, "word {k}");
            }
            assert_eq!(&r[..4], &[0.48994017, 0.48343292, 0.47647256, 0.49738058], "rand");
            // NumPy's float32 log and cos differ from lnc's by up to 3 ulps here.
            for (got, want) in nrm.iter().zip([-1.1298239f32, -0.21651168, -0.12543778, -1.7275472]) {
                assert!(
                    (got - want).abs() <= 4.0 * f32::EPSILON * want.abs().max(1.0),
                    "randn {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn sixty_four_bit_offsets_use_their_high_word() {
    let module = load("random.py");
    let (n, block, seed) = (1000usize, 64u32, 98_765_432_101i64);
    let args = vec![
        A::at(vec![0xDEAD_BEEFu32; n], 0),
        A::at(vec![f32::NAN; n], 0),
        A::at(vec![i64::MIN; n], 0),
        A::I32(n as i32),
        A::I64(seed),
    ];
    let sig = format!("*u32,*fp32,*i64,i32,i64,{block}");
    let out = diff(&module, &exact(Case::new("words64", &sig, (n as u32).div_ceil(block), args), 3));
    let (w0, u4) = (u32s(&out[0]), f32s(&out[1]));
    let hi = out[2].data().to_i64s();
    for i in 0..n {
        let big = (i as i64).wrapping_mul(3_000_000_019).wrapping_sub(123_456_789_012);
        let w = words64(seed, big, 10);
        assert_eq!(w0[i], w[0], "randint at offset {big}");
        assert_eq!(u4[i].to_bits(), uniform(w[3]).to_bits(), "rand4x's fourth at offset {big}");
        let other = big.wrapping_mul(7).wrapping_add(5);
        let want = ((u128::from(big as u64) * u128::from(other as u64)) >> 64) as u64 as i64;
        assert_eq!(hi[i], want, "umulhi({big}, {other})");
    }
    // Triton's interpreter, `words64` with these arguments.
    assert_eq!(&w0[..4], &[3102403881, 1587864965, 1200869224, 3687556392]);
    assert_eq!(&u4[..4], &[0.9556193, 0.92600375, 0.04675748, 0.6217093]);
    assert_eq!(&hi[..4], &[-987654306308, -963654306433, -939654306552, -915654306664]);
}

#[test]
fn umulhi_of_thirty_two_bit_integers_multiplies_their_bits() {
    let module = load("random.py");
    let mut rng = seeded(5);
    let edge = [-1i32, i32::MIN, i32::MAX, 123_456_789, -987_654_321, 65536, -3, 0];
    let edge_y = [-1i32, i32::MIN, i32::MAX, -1, 1_000_000_007, 65536, 5, -1];
    let n = 301;
    let mut x: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    let mut y: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    x[..8].copy_from_slice(&edge);
    y[..8].copy_from_slice(&edge_y);
    let args = vec![
        A::at(x.clone(), 0),
        A::at(y.clone(), 0),
        A::at(vec![i32::MIN; n], 0),
        A::at(vec![0xDEAD_BEEFu32; n], 0),
        A::I32(n as i32),
    ];
    let out = diff(&module, &Case::new("umulhi32", "*i32,*i32,*i32,*u32,i32,64", 5, args));
    let (s, u) = (out[2].data().to_i64s(), u32s(&out[3]));
    for i in 0..n {
        let want = ((u64::from(x[i] as u32) * u64::from(y[i] as u32)) >> 32) as u32;
        assert_eq!(u[i], want, "umulhi({}, {}) unsigned", x[i], y[i]);
        assert_eq!(s[i], i64::from(want as i32), "umulhi({}, {}) signed", x[i], y[i]);
    }
    // Triton's interpreter on the eight edge pairs.
    let triton = [-2i64, 1073741824, 1073741823, 123456788, 770043814, 1, 4, 0];
    assert_eq!(&s[..8], &triton);
}

#[test]
fn scalar_offsets_and_a_constexpr_seed_past_32_bits() {
    let module = load("random.py");
    let offs = vec![0i64, 1, -1, 1 << 32, i64::MAX];
    let seed: i64 = (1 << 40) + 7;
    let args = vec![A::at(offs.clone(), 0), A::at(vec![f32::NAN; 20], 0), A::I32(5)];
    let sig = format!("*i64,*fp32,i32,{seed}");
    let out = f32s(&diff(&module, &exact(Case::new("scalar_offset", &sig, 1, args), 2))[1]);
    for (i, &o) in offs.iter().enumerate() {
        let w = words64(seed, o, 3);
        let (a, b) = normal(uniform(w[0]), uniform(w[1]));
        let (c, d) = normal(uniform(w[2]), uniform(w[3]));
        for (k, z) in [a, b, c, d].into_iter().enumerate() {
            let got = f64::from(out[4 * i + k]);
            assert!(
                (got - z).abs() <= 2e-6 * z.abs().max(1.0),
                "randn4x(offset {o})[{k}]: {got} against {z}"
            );
        }
    }
    // Triton's interpreter (bit for bit on these twenty).
    let triton = [
        0.20266348f32,
        -1.3210882,
        1.2567942,
        0.33078352,
        2.1838884,
        0.6386274,
        1.2567942,
        0.33078352,
        0.12694184,
        0.43698713,
        0.7192722,
        -1.0883731,
        0.6598261,
        -1.1623147,
        1.7097286,
        0.44999412,
        -0.07737085,
        -0.39512593,
        0.58186454,
        -0.8804535,
    ];
    assert_eq!(out, triton);
}

#[test]
fn bad_arguments_are_located_errors() {
    let jit = lnc::Jit::new();
    let cases = [
        ("tl.rand(1.5, offs)", "the seed must be an integer"),
        ("tl.rand(seed, offs, n_rounds=n)", "`n_rounds`"),
        ("tl.rand(seed, offs, n_rounds=-1)", "`n_rounds` must be between 0 and"),
        ("tl.umulhi(offs.to(tl.float32), offs)", "`tl.umulhi` needs 32- or 64-bit integers"),
        ("tl.umulhi(offs.to(tl.int16), offs.to(tl.int16))", "`tl.umulhi` needs 32- or 64-bit integers"),
    ];
    for (expr, want) in cases {
        let src = format!(
            "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(O, n, seed):\n    \
             offs = tl.arange(0, 16)\n    tl.store(O + offs, {expr})\n"
        );
        let m = jit.module("bad.py", &src).unwrap_or_else(|e| panic!("{e}"));
        let e = match m.kernel("k", "*fp32,i32,i32") {
            Ok(_) => panic!("`{expr}` compiled"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "`{expr}`: {e}");
        assert!(e.contains("bad.py:7:"), "`{expr}`: no location in {e}");
    }
}
