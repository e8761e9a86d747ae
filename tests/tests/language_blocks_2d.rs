//! 2-D blocks (`tests/kernels/blocks_2d.py`): broadcasting, blocks of pointers, combined
//! masks, reductions along either axis, tuple shapes, nested loops — against float64
//! references and through the differential harness.
// Element-by-element checks index several arrays at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::diff::*;
use common::*;
use rand::Rng;

fn module() -> lnc::Module {
    load("blocks_2d.py")
}

fn randf(rng: &mut impl Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

#[test]
fn tile_with_combined_masks_and_strides() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, sx, sy, bm, bn) in
        [(1usize, 1usize, 1usize, 3usize, 16u32, 16u32), (37, 45, 50, 47, 16, 32), (70, 9, 9, 11, 32, 8)]
    {
        let x = randf(&mut rng, rows * sx, -5.0, 5.0);
        let grid = (rows.div_ceil(bm as usize) as u32, cols.div_ceil(bn as usize) as u32);
        let case = Case::new(
            "tile_affine",
            &format!("*fp32,*fp32,i32,i32,i32,i32,{bm},{bn}"),
            grid,
            vec![
                x.clone().into(),
                vec![NAN32; rows * sy].into(),
                (rows as i32).into(),
                (cols as i32).into(),
                (sx as i32).into(),
                (sy as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        let y = out[1].data().to_f64s();
        for r in 0..rows {
            for c in 0..sy {
                let got = y[r * sy + c];
                if c < cols {
                    let want = x[r * sx + c] * 2.0 + r as f32 - c as f32 * 0.5;
                    assert_eq!(got, want as f64, "({r}, {c})");
                } else {
                    assert!(got.is_nan(), "padding ({r}, {c}) was written");
                }
            }
        }
    }
}

#[test]
fn reductions_along_either_axis_with_keep_dims() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in
        [(1usize, 1usize, 1u32, 1u32), (5, 7, 8, 8), (13, 30, 16, 32), (3, 100, 4, 128)]
    {
        let x = randf(&mut rng, rows * cols, -3.0, 3.0);
        let case = Case::new(
            "reduce_axes",
            &format!("*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,{bm},{bn}"),
            1,
            vec![
                x.clone().into(),
                vec![NAN32; rows].into(),
                vec![NAN32; cols].into(),
                vec![NAN32; rows * cols].into(),
                vec![NAN32; rows].into(),
                (rows as i32).into(),
                (cols as i32).into(),
            ],
        )
        .check(1, Check::Close { atol: 1e-5, rtol: 1e-5 });
        let out = diff(&m, &case);
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let sum: f64 = row.iter().map(|&v| v as f64).sum();
            assert!((out[1].data().get_f64(r) - sum).abs() < 1e-4, "row sum {r}");
            let mn = row.iter().copied().fold(f32::INFINITY, f32::min);
            assert_eq!(out[4].data().get_f64(r), mn as f64, "row min {r}");
            for c in 0..cols {
                assert_eq!(out[3].data().get_f64(r * cols + c), (row[c] - mn) as f64, "centered ({r}, {c})");
            }
        }
        for c in 0..cols {
            let mx = (0..rows).map(|r| x[r * cols + c]).fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(out[2].data().get_f64(c), mx as f64, "column max {c}");
        }
    }
}

#[test]
fn softmax_over_rows_of_a_2d_block() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, stride, bm, bn) in
        [(1usize, 1usize, 1usize, 2u32, 1u32), (7, 33, 35, 4, 64), (50, 129, 130, 2, 256)]
    {
        let x = randf(&mut rng, rows * stride, -20.0, 20.0);
        let case = Case::new(
            "softmax_rows",
            &format!("*fp32,*fp32,i32,i32,i32,{bm},{bn}"),
            rows.div_ceil(bm as usize) as u32,
            vec![
                x.clone().into(),
                vec![NAN32; rows * stride].into(),
                (rows as i32).into(),
                (cols as i32).into(),
                (stride as i32).into(),
            ],
        )
        .check(1, Check::Close { atol: 1e-7, rtol: 1e-5 });
        let out = diff(&m, &case);
        let y = out[1].data().to_f64s();
        for r in 0..rows {
            let row: Vec<f64> = x[r * stride..r * stride + cols].iter().map(|&v| v as f64).collect();
            let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let den: f64 = row.iter().map(|v| (v - mx).exp()).sum();
            for c in 0..cols {
                let want = (row[c] - mx).exp() / den;
                let got = y[r * stride + c];
                assert!((got - want).abs() <= 1e-6 + 1e-5 * want, "({r}, {c}): {got} vs {want}");
            }
            assert!(y[r * stride + cols..(r + 1) * stride].iter().all(|v| v.is_nan()), "row {r} padding");
        }
    }
}

#[test]
fn outer_product_with_tuple_shaped_zeros_and_full() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in [(1usize, 1usize, 4u32, 4u32), (19, 23, 8, 16), (64, 3, 32, 4)] {
        let a = randf(&mut rng, rows, -2.0, 2.0);
        let b = randf(&mut rng, cols, -2.0, 2.0);
        let case = Case::new(
            "outer",
            &format!("*fp32,*fp32,*fp32,i32,i32,{bm},{bn}"),
            (rows.div_ceil(bm as usize) as u32, cols.div_ceil(bn as usize) as u32),
            vec![
                a.clone().into(),
                b.clone().into(),
                vec![NAN32; rows * cols].into(),
                (rows as i32).into(),
                (cols as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        for r in 0..rows {
            for c in 0..cols {
                let want = (1.5f32 + a[r] * b[c]) + r as f32;
                assert_eq!(out[2].data().get_f64(r * cols + c), want as f64, "({r}, {c})");
            }
        }
    }
}

#[test]
fn matrix_vector_product_over_k_chunks() {
    let m = module();
    let mut rng = rng();
    for (rows, k, stride, bm, bk) in
        [(1usize, 1usize, 1usize, 4u32, 4u32), (33, 100, 101, 16, 32), (9, 513, 513, 8, 64)]
    {
        let a = randf(&mut rng, rows * stride, -1.0, 1.0);
        let x = randf(&mut rng, k, -1.0, 1.0);
        let case = Case::new(
            "matvec",
            &format!("*fp32,*fp32,*fp32,i32,i32,i32,{bm},{bk}"),
            rows.div_ceil(bm as usize) as u32,
            vec![
                a.clone().into(),
                x.clone().into(),
                vec![NAN32; rows].into(),
                (rows as i32).into(),
                (k as i32).into(),
                (stride as i32).into(),
            ],
        )
        .check(2, Check::Close { atol: 1e-5, rtol: 1e-5 });
        let out = diff(&m, &case);
        for r in 0..rows {
            let want: f64 = (0..k).map(|j| a[r * stride + j] as f64 * x[j] as f64).sum();
            let got = out[2].data().get_f64(r);
            assert!((got - want).abs() < 1e-5 * (k as f64).sqrt() + 1e-6, "row {r}: {got} vs {want}");
        }
    }
}

#[test]
fn transpose_through_blocks_of_pointers() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in [(1usize, 1usize, 2u32, 2u32), (17, 31, 8, 16), (100, 3, 32, 4)] {
        let x: Vec<i64> = (0..rows * cols).map(|_| rng.random()).collect();
        let case = Case::new(
            "transpose",
            &format!("*i64,*i64,i32,i32,{bm},{bn}"),
            (rows.div_ceil(bm as usize) as u32, cols.div_ceil(bn as usize) as u32),
            vec![
                x.clone().into(),
                vec![-1i64; rows * cols].into(),
                (rows as i32).into(),
                (cols as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        let y = out[1].data().to_i64s();
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(y[c * rows + r], x[r * cols + c], "({r}, {c})");
            }
        }
    }
}

#[test]
fn matmul_as_rank_one_updates_of_a_carried_2d_block() {
    let m = module();
    let mut rng = rng();
    for (mm, nn, kk, bm, bn) in
        [(1usize, 1usize, 1usize, 2u32, 2u32), (21, 13, 17, 8, 8), (40, 35, 3, 16, 32)]
    {
        let a = randf(&mut rng, mm * kk, -1.0, 1.0);
        let b = randf(&mut rng, kk * nn, -1.0, 1.0);
        let case = Case::new(
            "matmul_outer",
            &format!("*fp32,*fp32,*fp32,i32,i32,i32,{bm},{bn}"),
            (mm.div_ceil(bm as usize) as u32, nn.div_ceil(bn as usize) as u32),
            vec![
                a.clone().into(),
                b.clone().into(),
                vec![NAN32; mm * nn].into(),
                (mm as i32).into(),
                (nn as i32).into(),
                (kk as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        for i in 0..mm {
            for j in 0..nn {
                let want: f64 = (0..kk).map(|k| a[i * kk + k] as f64 * b[k * nn + j] as f64).sum();
                let got = out[2].data().get_f64(i * nn + j);
                assert!((got - want).abs() < 1e-5, "({i}, {j}): {got} vs {want}");
            }
        }
    }
}

#[test]
fn nested_loops_over_tiles_in_one_program() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in [(1usize, 1usize, 4u32, 4u32), (30, 45, 8, 16), (7, 200, 4, 64)] {
        let x = randf(&mut rng, rows * cols, -2.0, 2.0);
        let case = Case::new(
            "tiles_in_one_program",
            &format!("*fp32,*fp32,*fp32,i32,i32,{bm},{bn}"),
            1,
            vec![
                x.clone().into(),
                vec![NAN32; rows * cols].into(),
                vec![NAN32].into(),
                (rows as i32).into(),
                (cols as i32).into(),
            ],
        )
        .check(2, Check::Close { atol: 1e-4, rtol: 1e-5 });
        let out = diff(&m, &case);
        for i in 0..rows * cols {
            assert_eq!(out[1].data().get_f64(i), x[i].abs() as f64, "element {i}");
        }
        let want: f64 = x.iter().map(|v| v.abs() as f64).sum();
        let got = out[2].data().get_f64(0);
        assert!((got - want).abs() < 1e-5 * want + 1e-4, "total {got} vs {want}");
    }
}

#[test]
fn integer_reductions_along_both_axes() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in [(1usize, 1usize, 1u32, 2u32), (9, 14, 16, 16), (30, 5, 32, 8)] {
        let x: Vec<i32> = (0..rows * cols).map(|_| rng.random_range(-1_000_000..1_000_000)).collect();
        let case = Case::new(
            "int_reduce",
            &format!("*i32,*i32,*i32,*i32,*i32,i32,i32,{bm},{bn}"),
            1,
            vec![
                x.clone().into(),
                vec![POISON_I32; cols].into(),
                vec![POISON_I32; rows].into(),
                vec![POISON_I32; cols].into(),
                vec![POISON_I32; rows].into(),
                (rows as i32).into(),
                (cols as i32).into(),
            ],
        );
        let out = diff(&m, &case);
        let at = |r: usize, c: usize| x[r * cols + c] as i64;
        for c in 0..cols {
            assert_eq!(
                out[1].data().to_i64s()[c],
                (0..rows).map(|r| at(r, c)).sum::<i64>(),
                "column sum {c}"
            );
            assert_eq!(
                out[3].data().to_i64s()[c],
                (0..rows).map(|r| at(r, c)).max().unwrap(),
                "column max {c}"
            );
        }
        for r in 0..rows {
            assert_eq!(out[2].data().to_i64s()[r], (0..cols).map(|c| at(r, c)).sum::<i64>(), "row sum {r}");
            assert_eq!(out[4].data().to_i64s()[r], (0..cols).map(|c| at(r, c)).min().unwrap(), "row min {r}");
        }
    }
}

#[test]
fn blocks_of_pointers_carried_through_while() {
    let m = module();
    let mut rng = rng();
    for (rows, n, bn) in [(1usize, 1usize, 4u32), (3, 37, 8), (5, 64, 16)] {
        let x = randf(&mut rng, rows * n, -5.0, 5.0);
        let case = Case::new(
            "pointer_walk_while",
            &format!("*fp32,*fp32,i32,{bn}"),
            rows as u32,
            vec![x.clone().into(), vec![NAN32; rows * n].into(), (n as i32).into()],
        );
        let out = diff(&m, &case);
        for k in 0..rows * n {
            assert_eq!(out[1].data().get_f64(k), (x[k] * 2.0) as f64, "element {k}");
        }
    }
}

#[test]
fn blocks_of_pointers_carried_through_nested_loops() {
    let m = module();
    let mut rng = rng();
    for (rows, cols, bm, bn) in [(1usize, 1usize, 2u32, 2u32), (9, 13, 4, 8), (16, 32, 8, 8)] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-64..64) as f32 / 8.0).collect();
        let (bm_, bn_) = (bm as usize, bn as usize);
        let case = Case::new(
            "pointer_walk_nested",
            &format!("*fp32,*fp32,i32,i32,{bm},{bn}"),
            1,
            vec![x.clone().into(), vec![NAN32; bm_ * bn_].into(), (rows as i32).into(), (cols as i32).into()],
        );
        let out = diff(&m, &case);
        for i in 0..bm_ {
            for j in 0..bn_ {
                // Multiples of 1/8: exact in any order.
                let want: f32 = (0..rows)
                    .filter(|r| r % bm_ == i)
                    .flat_map(|r| (0..cols).filter(|c| c % bn_ == j).map(move |c| (r, c)))
                    .map(|(r, c)| x[r * cols + c])
                    .sum();
                assert_eq!(out[1].data().get_f64(i * bn_ + j), want as f64, "({i}, {j})");
            }
        }
    }
}

#[test]
fn blocks_of_pointers_merged_by_if() {
    let m = module();
    let mut rng = rng();
    let (n, progs) = (13usize, 5usize);
    let x: Vec<i32> = (0..2 * n + 1).map(|_| rng.random()).collect();
    let case = Case::new(
        "pointer_by_branch",
        "*i32,*i32,i32,16",
        progs as u32,
        vec![x.clone().into(), vec![POISON_I32; progs * n].into(), (n as i32).into()],
    );
    let out = diff(&m, &case);
    let y = out[1].data().to_i64s();
    for p in 0..progs {
        let start = if p % 2 == 1 {
            n
        } else if p == 2 {
            1
        } else {
            0
        };
        for k in 0..n {
            assert_eq!(y[p * n + k], x[start + k] as i64, "program {p}, element {k}");
        }
    }
}

#[test]
fn pointer_blocks_moving_lanes_apart_are_refused() {
    let e = module().kernel("pointer_walk_gather", "*fp32,*fp32,8").unwrap_err().to_string();
    assert!(e.contains("must move all its lanes by the same offset"), "{e}");
    assert!(e.contains("blocks_2d.py:"), "{e}");
}
