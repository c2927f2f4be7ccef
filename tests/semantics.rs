#![allow(clippy::modulo_one, clippy::excessive_precision)] // edge cases on purpose: MIN % -1, float literals at the precision limit
//! Targeted edge cases of the semantics docs/architecture.md and the crate docs state,
//! each checked on every backend that can run here (forced, no fallback,
//! and the run log checked to say it ran there): empty inputs, NaN and
//! infinity rules, integer wrapping and division by zero, casts, zip
//! lengths, skip/take beyond the end, filter order, exclusive scans, custom
//! reductions, the fused multi-aggregate, argmin/argmax ties, and metrics.
//!
//! Values are compared through their `Debug` text, so `NaN` equals `NaN`
//! and `-0.0` differs from `0.0`.

mod common;

use computeq::plumbing::backends::cpu_simd::{BLOCK, LEAF};
use computeq::plumbing::{Availability, BackendKind, Phase};
use computeq::prelude::*;
use computeq::query::{Histogram, Stats, Try};
use computeq::Error;
use computeq::{Config, Engine};
use std::fmt::Debug;

/// Backends that can run here.
fn kinds(e: &Engine) -> Vec<BackendKind> {
    e.backends()
        .into_iter()
        .filter(|(_, a)| *a == Availability::Available)
        .map(|(k, _)| k)
        .collect()
}

/// `xs` on `e`, forced onto `k`, terminals returning `Result`.
fn q<'a, T: Element>(e: &'a Engine, xs: &'a [T], k: BackendKind) -> Query<'a, Expr<T>, Try> {
    e.query(xs).on(k).no_fallback().fallible()
}

/// Runs `f` on every available backend; a device backend declining the
/// plan (documented limits) is skipped, and so is a wgpu run that its
/// guard discarded because its float arithmetic met an infinity or a NaN
/// (`codegen::finite`; tests/wgpu_backend.rs and the differential suite
/// check when it may); any other error fails.
fn each<R>(e: &Engine, f: impl Fn(BackendKind) -> Result<R, Error>) -> Vec<(BackendKind, R)> {
    let mut out = Vec::new();
    for k in kinds(e) {
        let before = e.last_run().map(|m| m.run_id);
        match f(k) {
            Ok(r) => {
                let m = e.last_run().expect("a run was logged");
                assert_ne!(Some(m.run_id), before, "{k}: the run was not logged");
                assert_eq!(m.backend, k, "forced onto {k}, ran on {}", m.backend);
                out.push((k, r));
            }
            Err(err)
                if k.is_device() && err.attempts().iter().any(|a| a.phase == Phase::Support) => {}
            Err(err)
                if k == BackendKind::Wgpu
                    && err
                        .attempts()
                        .iter()
                        .any(|a| a.message.contains(common::DISCARDED)) => {}
            Err(err) => panic!("{k}: {err}"),
        }
    }
    out
}

/// Every backend's result has the `Debug` text of `expected`.
#[track_caller]
fn all_eq<R: Debug>(results: Vec<(BackendKind, R)>, expected: impl Debug) {
    assert!(!results.is_empty(), "no backend ran");
    let want = format!("{expected:?}");
    for (k, got) in results {
        assert_eq!(format!("{got:?}"), want, "on {k}");
    }
}

fn engine() -> Engine {
    common::engine()
}

// ------------------------------------------------------------- empty input

#[test]
fn empty_inputs_are_valid_everywhere() {
    let e = engine();
    let f: Vec<f32> = vec![];
    let i: Vec<i64> = vec![];
    let some: Vec<i64> = vec![1, 2, 3];
    all_eq(each(&e, |k| q(&e, &f, k).sum()), 0.0f32);
    all_eq(each(&e, |k| q(&e, &i, k).sum()), 0i64);
    all_eq(each(&e, |k| q(&e, &f, k).min()), None::<f32>);
    all_eq(each(&e, |k| q(&e, &i, k).max()), None::<i64>);
    all_eq(each(&e, |k| q(&e, &f, k).count()), 0usize);
    all_eq(each(&e, |k| q(&e, &f, k).mean()), None::<f64>);
    all_eq(each(&e, |k| q(&e, &i, k).argmin()), None::<usize>);
    all_eq(each(&e, |k| q(&e, &f, k).argmax()), None::<usize>);
    all_eq(each(&e, |k| q(&e, &f, k).any(|x| x.gt(0.0))), false);
    all_eq(each(&e, |k| q(&e, &f, k).all(|x| x.gt(0.0))), true);
    all_eq(each(&e, |k| q(&e, &i, k).reduce(1, |a, b| a * b)), 1i64);
    all_eq(
        each(&e, |k| q(&e, &f, k).collect::<Vec<f32>>()),
        Vec::<f32>::new(),
    );
    all_eq(
        each(&e, |k| q(&e, &f, k).scan_sum().collect::<Vec<f32>>()),
        Vec::<f32>::new(),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &i, k).scan_sum_exclusive().collect::<Vec<i64>>()
        }),
        Vec::<i64>::new(),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &i, k)
                .scan_exclusive(i64::MIN, |a, b| a.max(b))
                .collect::<Vec<i64>>()
        }),
        Vec::<i64>::new(),
    );
    all_eq(
        each(&e, |k| q(&e, &f, k).stats()),
        Stats {
            count: 0,
            sum: 0.0f32,
            min: None,
            max: None,
            mean: None,
        },
    );
    // Empty after adaptors, and zip with an empty side.
    all_eq(
        each(&e, |k| q(&e, &some, k).filter(|x| x.gt(9)).sum()),
        0i64,
    );
    all_eq(each(&e, |k| q(&e, &some, k).skip(3).max()), None::<i64>);
    all_eq(each(&e, |k| q(&e, &some, k).take(0).count()), 0usize);
    all_eq(each(&e, |k| q(&e, &some, k).zip(&i).count()), 0usize);
    all_eq(
        each(&e, |k| {
            q(&e, &i, k)
                .zip(&some)
                .map(|(a, b)| a + b)
                .collect::<Vec<i64>>()
        }),
        Vec::<i64>::new(),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &some, k)
                .filter(|x| x.gt(9))
                .enumerate()
                .collect::<Vec<(u64, i64)>>()
        }),
        Vec::<(u64, i64)>::new(),
    );
}

// ------------------------------------------------------------ NaN and inf

#[test]
fn min_and_max_skip_nan_and_return_nan_only_when_all_are_nan() {
    let e = engine();
    let xs = vec![2.0f32, f32::NAN, 1.0, f32::NAN];
    let nan_first = vec![f64::NAN, 3.0, -1.0];
    let all_nan = vec![f32::NAN; 2 * BLOCK + 3];
    all_eq(each(&e, |k| q(&e, &xs, k).min()), Some(1.0f32));
    all_eq(each(&e, |k| q(&e, &xs, k).max()), Some(2.0f32));
    all_eq(each(&e, |k| q(&e, &nan_first, k).min()), Some(-1.0f64));
    all_eq(each(&e, |k| q(&e, &all_nan, k).min()), Some(f32::NAN));
    all_eq(each(&e, |k| q(&e, &all_nan, k).max()), Some(f32::NAN));
    // Element-wise min/max return the non-NaN operand.
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k).map(|x| x.max(1.5)).collect::<Vec<f32>>()
        }),
        vec![2.0f32, 1.5, 1.5, 1.5],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .map(|x| Expr::param(f32::NAN).min(x))
                .collect::<Vec<f32>>()
        }),
        xs.clone(),
    );
}

#[test]
fn argmin_and_argmax_never_pick_nan() {
    let e = engine();
    let xs = vec![f32::NAN, 3.0, 1.0, f32::NAN, 1.0];
    let all_nan = vec![f64::NAN; 5];
    all_eq(each(&e, |k| q(&e, &xs, k).argmin()), Some(2usize));
    all_eq(each(&e, |k| q(&e, &xs, k).argmax()), Some(1usize));
    all_eq(each(&e, |k| q(&e, &all_nan, k).argmin()), Some(0usize));
    all_eq(each(&e, |k| q(&e, &all_nan, k).argmax()), Some(0usize));
}

#[test]
fn infinities_and_nan_propagate_as_ieee_says() {
    let e = engine();
    let xs = vec![f32::INFINITY, 1.0, f32::NEG_INFINITY];
    let pos = vec![f32::INFINITY, 1.0, 2.0];
    all_eq(each(&e, |k| q(&e, &xs, k).sum().map(|s| s.is_nan())), true);
    all_eq(each(&e, |k| q(&e, &pos, k).sum()), f32::INFINITY);
    all_eq(each(&e, |k| q(&e, &xs, k).max()), Some(f32::INFINITY));
    all_eq(each(&e, |k| q(&e, &xs, k).min()), Some(f32::NEG_INFINITY));
    all_eq(
        each(&e, |k| q(&e, &xs, k).map(|x| x * 0.0).collect::<Vec<f32>>()),
        vec![f32::NAN, 0.0, f32::NAN],
    );
    // Comparisons with NaN are false (`ne` is true).
    let nan = vec![f64::NAN, 1.0];
    all_eq(
        each(&e, |k| {
            q(&e, &nan, k).filter(|x| x.gt(0.0) | x.le(0.0)).count()
        }),
        1usize,
    );
    all_eq(
        each(&e, |k| q(&e, &nan, k).filter(|x| x.ne(x)).count()),
        1usize,
    );
    all_eq(each(&e, |k| q(&e, &nan, k).any(|x| x.eq(x))), true);
    all_eq(each(&e, |k| q(&e, &nan, k).all(|x| x.eq(x))), false);
    // Signed zeros survive element-wise operations.
    let z = vec![0.0f32, -0.0];
    all_eq(
        each(&e, |k| q(&e, &z, k).map(|x| -x).collect::<Vec<f32>>()),
        vec![-0.0f32, 0.0],
    );
    all_eq(
        each(&e, |k| q(&e, &z, k).map(|x| 1.0 / x).collect::<Vec<f32>>()),
        vec![f32::INFINITY, f32::NEG_INFINITY],
    );
}

// --------------------------------------------------------------- integers

#[test]
fn integer_arithmetic_wraps() {
    let e = engine();
    let big = vec![i32::MAX, 1];
    all_eq(each(&e, |k| q(&e, &big, k).sum()), i32::MIN);
    let u = vec![0u32, 1, u32::MAX];
    all_eq(
        each(&e, |k| q(&e, &u, k).map(|x| x - 1).collect::<Vec<u32>>()),
        vec![u32::MAX, 0, u32::MAX - 1],
    );
    all_eq(
        each(&e, |k| q(&e, &u, k).map(|x| -x).collect::<Vec<u32>>()),
        vec![0, u32::MAX, 1],
    );
    all_eq(each(&e, |k| q(&e, &u, k).sum()), 0u32);
    let m = vec![i64::MIN, -1, 3];
    all_eq(
        each(&e, |k| q(&e, &m, k).map(|x| x.abs()).collect::<Vec<i64>>()),
        vec![i64::MIN, 1, 3],
    );
    all_eq(
        each(&e, |k| q(&e, &m, k).map(|x| x * 2).collect::<Vec<i64>>()),
        vec![0, -2, 6],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &m, k).map(|x| x.powi(3)).collect::<Vec<i64>>()
        }),
        vec![0, -1, 27],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &u, k)
                .map(|x| x.mul_add(u32::MAX, 7))
                .collect::<Vec<u32>>()
        }),
        vec![7u32, 6, 8],
    );
    // Integer `powi` with a negative exponent: 1 / x^|n|, 0 when x^|n| is 0.
    let p = vec![1i32, -1, 2, 0];
    all_eq(
        each(&e, |k| {
            q(&e, &p, k).map(|x| x.powi(-1)).collect::<Vec<i32>>()
        }),
        vec![1, -1, 0, 0],
    );
}

#[test]
fn integer_division_by_zero_is_zero_and_min_over_minus_one_wraps() {
    let e = engine();
    let xs = vec![7i32, -7, 0, i32::MIN];
    let ds = vec![0i32, 0, 0, -1];
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .zip(&ds)
                .map(|(x, d)| x / d)
                .collect::<Vec<i32>>()
        }),
        vec![0, 0, 0, i32::MIN],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .zip(&ds)
                .map(|(x, d)| x % d)
                .collect::<Vec<i32>>()
        }),
        vec![0, 0, 0, 0],
    );
    let u = vec![9u64, 0];
    all_eq(
        each(&e, |k| q(&e, &u, k).map(|x| x / 0).collect::<Vec<u64>>()),
        vec![0u64, 0],
    );
    all_eq(
        each(&e, |k| q(&e, &u, k).map(|x| 5 % x).collect::<Vec<u64>>()),
        vec![5u64, 0],
    );
    let m = vec![i64::MIN];
    all_eq(
        each(&e, |k| q(&e, &m, k).map(|x| x / -1).collect::<Vec<i64>>()),
        vec![i64::MIN],
    );
    all_eq(
        each(&e, |k| q(&e, &m, k).map(|x| x % -1).collect::<Vec<i64>>()),
        vec![0i64],
    );
}

// ------------------------------------------------------------------ casts

#[test]
fn casts_follow_rust_as() {
    let e = engine();
    let f = vec![
        1.9f32,
        -1.9,
        -1e20,
        1e20,
        f32::NAN,
        -0.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    all_eq(
        each(&e, |k| {
            q(&e, &f, k).map(|x| x.cast::<i32>()).collect::<Vec<i32>>()
        }),
        vec![1, -1, i32::MIN, i32::MAX, 0, 0, i32::MAX, i32::MIN],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &f, k).map(|x| x.cast::<u32>()).collect::<Vec<u32>>()
        }),
        vec![1u32, 0, 0, u32::MAX, 0, 0, u32::MAX, 0],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &f, k).map(|x| x.cast::<i64>()).collect::<Vec<i64>>()
        }),
        f.iter().map(|&x| x as i64).collect::<Vec<i64>>(),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &f, k).map(|x| x.cast::<u64>()).collect::<Vec<u64>>()
        }),
        vec![1u64, 0, 0, u64::MAX, 0, 0, u64::MAX, 0],
    );
    let d = vec![1e300f64, -1e-300, 0.1];
    all_eq(
        each(&e, |k| {
            q(&e, &d, k).map(|x| x.cast::<f32>()).collect::<Vec<f32>>()
        }),
        vec![f32::INFINITY, -0.0, 0.1],
    );
    let i = vec![-1i32, i32::MIN, 7];
    all_eq(
        each(&e, |k| {
            q(&e, &i, k).map(|x| x.cast::<u64>()).collect::<Vec<u64>>()
        }),
        vec![u64::MAX, (i32::MIN as i64) as u64, 7],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &i, k).map(|x| x.cast::<u32>()).collect::<Vec<u32>>()
        }),
        vec![u32::MAX, 1 << 31, 7],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &i, k).map(|x| x.cast::<f64>()).collect::<Vec<f64>>()
        }),
        vec![-1.0, i32::MIN as f64, 7.0],
    );
    let w = vec![i64::MAX, (1i64 << 40) + 3];
    all_eq(
        each(&e, |k| {
            q(&e, &w, k).map(|x| x.cast::<i32>()).collect::<Vec<i32>>()
        }),
        vec![-1, 3],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &w, k).map(|x| x.cast::<f32>()).collect::<Vec<f32>>()
        }),
        vec![i64::MAX as f32, ((1i64 << 40) + 3) as f32],
    );
    let big = vec![u64::MAX, 1 << 63];
    all_eq(
        each(&e, |k| {
            q(&e, &big, k)
                .map(|x| x.cast::<f64>())
                .collect::<Vec<f64>>()
        }),
        vec![u64::MAX as f64, 9.223372036854775808e18],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &big, k)
                .map(|x| x.cast::<i64>())
                .collect::<Vec<i64>>()
        }),
        vec![-1, i64::MIN],
    );
    // bool: 0/1, and a number is true when non-zero (NaN is non-zero).
    let b = vec![0.0f64, -0.0, 2.5, f64::NAN];
    all_eq(
        each(&e, |k| {
            q(&e, &b, k)
                .map(|x| x.cast::<bool>())
                .collect::<Vec<bool>>()
        }),
        vec![false, false, true, true],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &b, k)
                .map(|x| x.gt(1.0).cast::<i32>())
                .collect::<Vec<i32>>()
        }),
        vec![0, 0, 1, 0],
    );
    all_eq(
        each(&e, |k| q(&e, &b, k).map(|x| x.gt(1.0).cast::<f32>()).sum()),
        1.0f32,
    );
}

// ------------------------------------------------------------ zip lengths

#[test]
fn zip_stops_at_the_shorter_input() {
    let e = engine();
    let long: Vec<i32> = (0..(BLOCK as i32 + 7)).collect();
    let short: Vec<u64> = (0..5).collect();
    all_eq(each(&e, |k| q(&e, &long, k).zip(&short).count()), 5usize);
    all_eq(each(&e, |k| q(&e, &short, k).zip(&long).count()), 5usize);
    all_eq(
        each(&e, |k| {
            q(&e, &long, k)
                .zip(&short)
                .map(|(a, b)| a.cast::<u64>() + b)
                .collect::<Vec<u64>>()
        }),
        vec![0u64, 2, 4, 6, 8],
    );
    let flags = vec![true, false, true];
    all_eq(
        each(&e, |k| {
            q(&e, &long, k)
                .zip(&short)
                .zip(&flags)
                .collect::<Vec<((i32, u64), bool)>>()
        }),
        vec![((0, 0u64), true), ((1, 1), false), ((2, 2), true)],
    );
    // Zip after skip pairs the remaining elements with the partner's first.
    all_eq(
        each(&e, |k| {
            q(&e, &long, k)
                .skip(3)
                .zip(&short)
                .map(|(a, _)| a)
                .collect::<Vec<i32>>()
        }),
        vec![3, 4, 5, 6, 7],
    );
}

#[test]
fn zip_after_a_filter_stops_at_the_shorter_stream() {
    let e = engine();
    let xs = vec![0i32, 1, 2, 0, 3];
    let p = vec![5i32; 5];
    // Two survivors, five partner elements: two pairs.
    all_eq(
        each(&e, |k| q(&e, &xs, k).filter(|x| x.eq(0)).zip(&p).count()),
        2usize,
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.eq(0))
                .zip(&p)
                .map(|(_, y)| y)
                .sum()
        }),
        10i32,
    );
    all_eq(
        each(&e, |k| q(&e, &xs, k).scan_sum().take(2).zip(&p).count()),
        2usize,
    );
}

#[test]
fn enumerate_after_a_filter_then_zip_stops_at_the_shorter_stream() {
    let e = engine();
    let xs = vec![1i32, 2, 3, -4];
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.gt(0))
                .enumerate()
                .map(|(i, _)| i)
                .zip(&xs)
                .collect::<Vec<(u64, i32)>>()
        }),
        vec![(0u64, 1i32), (1, 2), (2, 3)],
    );
}

#[test]
fn double_negation_across_a_stage_boundary_is_a_valid_query() {
    let e = engine();
    let xs = vec![1i32, 2];
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .map(|x| -x)
                .filter(|x| x.lt(0))
                .take(1)
                .map(|x| -x)
                .sum()
        }),
        1i32,
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .map(|x| -x)
                .filter(|x| x.lt(0))
                .take(1)
                .filter(|x| (-x).lt(8))
                .count()
        }),
        1usize,
    );
}

// ------------------------------------------------------------- skip, take

#[test]
fn skip_and_take_beyond_the_length() {
    let e = engine();
    let xs: Vec<u32> = (1..=10).collect();
    all_eq(
        each(&e, |k| q(&e, &xs, k).skip(15).collect::<Vec<u32>>()),
        Vec::<u32>::new(),
    );
    all_eq(each(&e, |k| q(&e, &xs, k).skip(usize::MAX).count()), 0usize);
    all_eq(each(&e, |k| q(&e, &xs, k).take(15).count()), 10usize);
    all_eq(each(&e, |k| q(&e, &xs, k).take(usize::MAX).sum()), 55u32);
    all_eq(
        each(&e, |k| q(&e, &xs, k).skip(2).take(3).collect::<Vec<u32>>()),
        vec![3u32, 4, 5],
    );
    all_eq(
        each(&e, |k| q(&e, &xs, k).take(3).skip(2).collect::<Vec<u32>>()),
        vec![3u32],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k).skip(8).take(5).skip(1).collect::<Vec<u32>>()
        }),
        vec![10u32],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .skip(4)
                .enumerate()
                .take(2)
                .collect::<Vec<(u64, u32)>>()
        }),
        vec![(0u64, 5u32), (1, 6)],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .enumerate()
                .skip(4)
                .take(2)
                .collect::<Vec<(u64, u32)>>()
        }),
        vec![(4u64, 5u32), (5, 6)],
    );
    // After a filter, counts apply to the survivors.
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| (x % 2).eq(0))
                .skip(1)
                .take(2)
                .collect::<Vec<u32>>()
        }),
        vec![4u32, 6],
    );
    // Changing the counts reuses the plan (they are parameters).
    let a = e.query(&xs).skip(1).take(2).with_metrics().sum();
    let b = e.query(&xs).skip(5).take(4).with_metrics().sum();
    assert_eq!((a.0, b.0), (5, 30));
    assert!(
        b.1.plan_cache_hit,
        "different skip/take counts should hit the plan cache"
    );
}

// ----------------------------------------------------------- filter order

#[test]
fn filter_keeps_the_order_of_survivors() {
    let e = engine();
    let n = 3 * LEAF + 17;
    let xs: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 1009 - 500).collect();
    let want: Vec<i64> = xs.iter().copied().filter(|&x| x > 17).collect();
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k).filter(|x| x.gt(17)).collect::<Vec<i64>>()
        }),
        want.clone(),
    );
    let want_idx: Vec<(u64, i64)> = xs
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| *x > 17)
        .map(|(i, x)| (i as u64, x))
        .collect();
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .enumerate()
                .filter(|(_, x)| x.gt(17))
                .collect::<Vec<(u64, i64)>>()
        }),
        want_idx,
    );
    // Enumerate after a filter counts survivors.
    let want_pos: Vec<u64> = (0..want.len() as u64).collect();
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.gt(17))
                .enumerate()
                .map(|(i, _)| i)
                .collect::<Vec<u64>>()
        }),
        want_pos,
    );
    // Two filters in a row, then a map.
    let want2: Vec<i64> = xs
        .iter()
        .copied()
        .filter(|&x| x > 17)
        .filter(|&x| x % 3 == 0)
        .map(|x| x * 2)
        .collect();
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.gt(17))
                .filter(|x| (x % 3).eq(0))
                .map(|x| x * 2)
                .collect::<Vec<i64>>()
        }),
        want2,
    );
}

// ------------------------------------------------------------------ scans

#[test]
fn exclusive_scans_start_at_the_identity() {
    let e = engine();
    all_eq(
        each(&e, |k| {
            q(&e, &[1u32, 2, 3][..], k)
                .scan_sum_exclusive()
                .collect::<Vec<u32>>()
        }),
        vec![0u32, 1, 3],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &[2.0f64, 3.0, 4.0][..], k)
                .scan_exclusive(1.0, |a, b| a * b)
                .collect::<Vec<f64>>()
        }),
        vec![1.0f64, 2.0, 6.0],
    );
    all_eq(
        each(&e, |k| {
            q(&e, &[3i64, 1, 4, 1, 5][..], k)
                .scan_exclusive(i64::MIN, |a, b| a.max(b))
                .collect::<Vec<i64>>()
        }),
        vec![i64::MIN, 3, 3, 4, 4],
    );
    // Across leaf boundaries, integers exactly.
    for n in [BLOCK - 1, BLOCK + 1, LEAF, LEAF + 1, 2 * LEAF + 3] {
        let xs: Vec<i32> = (0..n as i32).map(|i| (i % 13) - 6).collect();
        let mut acc = 0i32;
        let excl: Vec<i32> = xs
            .iter()
            .map(|&x| {
                let r = acc;
                acc = acc.wrapping_add(x);
                r
            })
            .collect();
        let incl: Vec<i32> = xs
            .iter()
            .scan(0i32, |a, &x| {
                *a = a.wrapping_add(x);
                Some(*a)
            })
            .collect();
        all_eq(
            each(&e, |k| {
                q(&e, &xs, k).scan_sum_exclusive().collect::<Vec<i32>>()
            }),
            excl,
        );
        all_eq(
            each(&e, |k| q(&e, &xs, k).scan_sum().collect::<Vec<i32>>()),
            incl,
        );
        let mins: Vec<i32> = xs
            .iter()
            .scan(i32::MAX, |a, &x| {
                let r = *a;
                *a = (*a).min(x);
                Some(r)
            })
            .collect();
        all_eq(
            each(&e, |k| {
                q(&e, &xs, k)
                    .scan_exclusive(i32::MAX, |a, b| a.min(b))
                    .collect::<Vec<i32>>()
            }),
            mins,
        );
    }
    // A scan feeding a reduction, and a reduction of a scan after a filter.
    let xs: Vec<u64> = (1..=100).collect();
    all_eq(
        each(&e, |k| q(&e, &xs, k).scan_sum().sum()),
        (1..=100u64).map(|i| i * (i + 1) / 2).sum::<u64>(),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.gt(90))
                .scan_sum_exclusive()
                .max()
        }),
        Some((91..100u64).sum::<u64>()),
    );
}

// ------------------------------------------------------------ reductions

#[test]
fn custom_reduce_folds_with_its_identity() {
    let e = engine();
    let xs: Vec<i64> = (1..=20).collect();
    all_eq(
        each(&e, |k| q(&e, &xs, k).reduce(1, |a, b| a * b)),
        (1..=20i64).product::<i64>(),
    );
    all_eq(
        each(&e, |k| q(&e, &xs, k).reduce(i64::MIN, |a, b| a.max(b))),
        20i64,
    );
    all_eq(
        each(&e, |k| {
            q(&e, &xs, k)
                .filter(|x| x.gt(100))
                .reduce(i64::MIN, |a, b| a.max(b))
        }),
        i64::MIN,
    );
    // Wrapping product over many blocks.
    let big: Vec<u32> = (0..(3 * LEAF as u32)).map(|i| i | 1).collect();
    let want = big.iter().fold(1u32, |a, &b| a.wrapping_mul(b));
    all_eq(each(&e, |k| q(&e, &big, k).reduce(1, |a, b| a * b)), want);
    // Float max through reduce skips NaN like the `max` terminal.
    let f = vec![1.0f32, f32::NAN, 3.0, -2.0];
    all_eq(
        each(&e, |k| {
            q(&e, &f, k).reduce(f32::NEG_INFINITY, |a, b| a.max(b))
        }),
        3.0f32,
    );
}

#[test]
fn stats_equals_the_separate_terminals() {
    let e = engine();
    let xs: Vec<i32> = (0..(LEAF as i32 + 5))
        .map(|i| (i * 37) % 101 - 50)
        .collect();
    let n = xs.len() as u64;
    let sum = xs.iter().fold(0i32, |a, &b| a.wrapping_add(b));
    let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    for (k, s) in each(&e, |k| q(&e, &xs, k).stats()) {
        assert_eq!(
            (s.count, s.sum, s.min, s.max),
            (n, sum, Some(-50), Some(50)),
            "{k}"
        );
        assert!(
            (s.mean.unwrap() - mean).abs() <= 1e-9 * mean.abs().max(1.0),
            "{k}: {s:?}"
        );
    }
    let w = vec![i32::MAX, i32::MAX, 2];
    all_eq(
        each(&e, |k| q(&e, &w, k).stats()),
        Stats {
            count: 3,
            sum: 0i32,
            min: Some(2),
            max: Some(i32::MAX),
            mean: Some((2.0 * i32::MAX as f64 + 2.0) / 3.0),
        },
    );
    let f = vec![f32::NAN, 4.0, 1.0, 7.0];
    for (k, s) in each(&e, |k| q(&e, &f, k).stats()) {
        assert_eq!((s.count, s.min, s.max), (4, Some(1.0), Some(7.0)), "{k}");
        assert!(s.sum.is_nan() && s.mean.unwrap().is_nan(), "{k}: {s:?}");
    }
    // After a filter, over the survivors only.
    all_eq(
        each(&e, |k| q(&e, &f, k).filter(|x| x.gt(2.0)).stats()),
        Stats {
            count: 2,
            sum: 11.0f32,
            min: Some(4.0),
            max: Some(7.0),
            mean: Some(5.5),
        },
    );
}

#[test]
fn argmin_and_argmax_pick_the_first_of_ties() {
    let e = engine();
    all_eq(
        each(&e, |k| q(&e, &[3, 1, 2, 1][..], k).argmin()),
        Some(1usize),
    );
    all_eq(
        each(&e, |k| q(&e, &[3u64, 5, 5, 1][..], k).argmax()),
        Some(1usize),
    );
    // Ties far apart, across blocks and leaves.
    let mut xs = vec![10i32; 3 * LEAF + 9];
    for &p in &[BLOCK + 5, LEAF + 1, 2 * LEAF + 7, 3 * LEAF + 8] {
        xs[p] = -4;
    }
    all_eq(each(&e, |k| q(&e, &xs, k).argmin()), Some(BLOCK + 5));
    all_eq(each(&e, |k| q(&e, &xs, k).argmax()), Some(0usize));
    // A tie of +0 and -0 is a tie.
    all_eq(
        each(&e, |k| q(&e, &[0.0f32, -0.0, 1.0][..], k).argmin()),
        Some(0usize),
    );
    all_eq(
        each(&e, |k| q(&e, &[-0.0f64, 0.0, -1.0][..], k).argmax()),
        Some(0usize),
    );
    // Positions count the stream after adaptors.
    all_eq(
        each(&e, |k| q(&e, &[5, 9, 1, 9][..], k).skip(2).argmax()),
        Some(1usize),
    );
    all_eq(
        each(&e, |k| {
            q(&e, &[5, 9, 1, 9][..], k).filter(|x| x.lt(9)).argmax()
        }),
        Some(0usize),
    );
}

#[test]
fn mean_is_computed_in_f64() {
    let e = engine();
    let xs = vec![u64::MAX, u64::MAX];
    all_eq(each(&e, |k| q(&e, &xs, k).mean()), Some(u64::MAX as f64));
    let f = vec![16_777_216.0f32, 1.0, 1.0];
    all_eq(
        each(&e, |k| q(&e, &f, k).mean()),
        Some((16_777_216.0f64 + 2.0) / 3.0),
    );
    all_eq(
        each(&e, |k| q(&e, &[1u32, 2, 6][..], k).mean()),
        Some(3.0f64),
    );
}

// ---------------------------------------------------------------- metrics

#[test]
fn metrics_describe_the_run() {
    let e = engine();
    let xs: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
    for k in kinds(&e) {
        let (s, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .map(|x| x * 0.5)
            .with_metrics()
            .sum();
        let want = xs.iter().map(|x| x * 0.5).sum::<f32>();
        assert!(
            (s - want).abs() <= 1e4 * f32::EPSILON * want,
            "{k}: {s} vs {want}"
        );
        assert_eq!(m.backend, k);
        assert_eq!(m.elements_in, 10_000, "{k}");
        assert_eq!(m.bytes_in, 40_000, "{k}");
        assert_eq!(m.terminal, "reduce", "{k}");
        assert_eq!(m.stages, 1, "{k}");
        assert!(m.attempts.is_empty(), "{k}: {:?}", m.attempts);
        assert!(!m.fell_back(), "{k}");
        let p = m.phases;
        assert!(
            p.total >= p.execute,
            "{k}: total {:?} < execute {:?}",
            p.total,
            p.execute
        );
        assert!(
            m.efficiency() >= 0.0 && m.efficiency() <= 1.0,
            "{k}: efficiency {}",
            m.efficiency()
        );
        assert_eq!(m.run_id, e.last_run().unwrap().run_id);
        let (v, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .filter(|x| x.lt(100.0))
            .with_metrics()
            .collect::<Vec<f32>>();
        assert_eq!(v.len(), 100);
        assert_eq!((m.elements_out, m.bytes_out), (100, 400), "{k}");
    }
}

#[test]
fn a_different_captured_value_hits_the_plan_cache() {
    let e = engine();
    let xs: Vec<i32> = (0..1000).collect();
    for (i, k) in kinds(&e).into_iter().enumerate() {
        let run = |c: i32| {
            e.query(&xs)
                .on(k)
                .no_fallback()
                .map(|x| x * c + 1)
                .filter(|x| x.gt(c))
                .with_metrics()
                .sum()
        };
        let (a, m1) = run(3 + 100 * i as i32);
        let (b, m2) = run(4 + 100 * i as i32);
        let c1 = 3 + 100 * i as i32;
        let c2 = c1 + 1;
        assert_eq!(
            a,
            xs.iter()
                .map(|x| x * c1 + 1)
                .filter(|&x| x > c1)
                .fold(0i32, |s, x| s.wrapping_add(x))
        );
        assert_eq!(
            b,
            xs.iter()
                .map(|x| x * c2 + 1)
                .filter(|&x| x > c2)
                .fold(0i32, |s, x| s.wrapping_add(x))
        );
        assert_eq!(
            m1.fingerprint, m2.fingerprint,
            "{k}: captured values must not change the plan"
        );
        assert!(
            m2.plan_cache_hit,
            "{k}: second run with another captured value missed the plan cache"
        );
        assert!(
            m2.phases.optimize.is_zero(),
            "{k}: a cache hit should not optimize again"
        );
    }
    // A different literal structure is a different plan.
    let (_, m1) = e.query(&xs).map(|x| x + 1).with_metrics().sum();
    let (_, m2) = e.query(&xs).map(|x| x - 1).with_metrics().sum();
    assert_ne!(m1.fingerprint, m2.fingerprint);
    // A constant is part of the plan.
    let (_, m1) = e
        .query(&xs)
        .map(|x| x + Expr::constant(1))
        .with_metrics()
        .sum();
    let (_, m2) = e
        .query(&xs)
        .map(|x| x + Expr::constant(2))
        .with_metrics()
        .sum();
    assert_ne!(m1.fingerprint, m2.fingerprint);
}

#[test]
fn the_run_log_is_bounded_and_ordered() {
    let e = Engine::with_config(Config {
        run_log_capacity: 4,
        ..Config::default()
    });
    let xs = vec![1i32, 2, 3];
    for i in 0..10 {
        assert_eq!(e.query(&xs).map(|x| x + i).sum(), 6 + 3 * i);
    }
    let log = e.run_log();
    assert_eq!(log.capacity(), 4);
    assert_eq!(log.len(), 4);
    let ids: Vec<u64> = log.snapshot().iter().map(|m| m.run_id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(Some(*ids.last().unwrap()), e.last_run().map(|m| m.run_id));
    assert_eq!(log.filter(|m| m.elements_in == 3).len(), 4);
    log.clear();
    assert!(log.is_empty());
    let none = Engine::with_config(Config {
        run_log_capacity: 0,
        ..Config::default()
    });
    assert_eq!(none.query(&xs).sum(), 6);
    assert!(none.run_log().is_empty());
}

#[test]
fn a_forced_backend_that_cannot_run_is_an_error_not_a_silent_fallback() {
    let e = Engine::with_config(Config {
        disabled: vec![BackendKind::CpuSimd],
        ..Config::default()
    });
    let xs = vec![1.0f32, 2.0];
    let err = e
        .query(&xs)
        .on(BackendKind::CpuSimd)
        .no_fallback()
        .try_sum()
        .unwrap_err();
    assert!(
        err.attempts()
            .iter()
            .any(|a| a.backend == BackendKind::CpuSimd),
        "{err}"
    );
    // With fallback allowed, another backend runs and the metrics say so.
    let (s, m) = e.query(&xs).on(BackendKind::CpuSimd).with_metrics().sum();
    assert_eq!(s, 3.0);
    assert_ne!(m.backend, BackendKind::CpuSimd);
}

#[test]
fn wgpu_f64_transcendentals_match_the_cpu_or_decline() {
    let e = engine();
    if !kinds(&e).contains(&BackendKind::Wgpu) {
        return;
    }
    let xs = vec![0.25f64, 1.0, 2.5, -1.5, 100.0];
    let cpu: Vec<f64> = xs
        .iter()
        .map(|x| x.exp() + x.abs().ln() + x.sin() + x.cos())
        .collect();
    match e
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .map(|x| x.exp() + x.abs().ln() + x.sin() + x.cos())
        .try_collect::<Vec<f64>>()
    {
        Err(err) => assert!(
            err.attempts().iter().any(|a| a.phase == Phase::Support),
            "{err}"
        ),
        Ok(got) => {
            for (g, c) in got.iter().zip(&cpu) {
                assert!(
                    (g - c).abs() <= 1e-6 * c.abs().max(1.0),
                    "wgpu {got:?} vs cpu {cpu:?}"
                );
            }
        }
    }
}

/// A cast the kernels apply to a value that lowering made a constant
/// (`x.powi(0)` is `1` of the element's type): the histogram's and the
/// moments' cast to `f64`, and an element's own. The differential suite
/// found `i64` `powi(0)` then `histogram` refused by naga on wgpu
/// (`f64(1li)`: a WGSL constant expression whose cast naga cannot
/// evaluate); every backend now agrees, each dtype.
#[test]
fn casts_of_values_lowering_made_constant_run_everywhere() {
    fn check<T: Numeric + Copy + From<u8>>(e: &Engine) {
        let xs: Vec<T> = (0..5u8).map(T::from).collect();
        let one = vec![1.0; 5];
        let h = Histogram {
            counts: vec![0, 0, 5, 0],
            below: 0,
            above: 0,
            nan: 0,
        };
        let name = std::any::type_name::<T>();
        for (k, got) in each(e, |k| {
            q(e, &xs, k).map(|x| x.powi(0)).histogram(4, -4.0, 4.0)
        }) {
            assert_eq!(got, h, "{name} on {k}");
        }
        for (k, got) in each(e, |k| {
            q(e, &xs, k)
                .map(|x| x.powi(0).cast::<f64>())
                .collect::<Vec<f64>>()
        }) {
            assert_eq!(got, one, "{name} on {k}");
        }
        for (k, got) in each(e, |k| q(e, &xs, k).map(|x| x.powi(0)).mean()) {
            assert_eq!(got, Some(1.0), "{name} on {k}");
        }
        for (k, got) in each(e, |k| q(e, &xs, k).map(|x| x.powi(0)).variance()) {
            assert_eq!(got, Some(0.0), "{name} on {k}");
        }
    }
    let e = engine();
    check::<i32>(&e);
    check::<u32>(&e);
    check::<i64>(&e);
    check::<u64>(&e);
    check::<f32>(&e);
    check::<f64>(&e);
}

/// Every backend's result has the `Debug` text of `cpu-scalar`'s, the
/// first of `results`.
#[track_caller]
fn agree_with_cpu_scalar<R: Debug>(results: Vec<(BackendKind, R)>, what: &str) {
    let (first, want) = &results[0];
    assert_eq!(*first, BackendKind::CpuScalar);
    let want = format!("{want:?}");
    for (k, got) in &results {
        assert_eq!(format!("{got:?}"), want, "{what}: {k} against cpu-scalar");
    }
}

/// Every operation on values lowering made constant (`x.powi(0)`, the
/// constant `1`; `x.powi(0) + x.powi(0)`, a `2` computed from two
/// constants) gives on every backend what it gives on `cpu-scalar`: a
/// device's compiler sees them as constant expressions, which it may
/// evaluate itself (naga does) or refuse.
#[test]
fn operations_on_values_lowering_made_constant_agree_everywhere() {
    macro_rules! agree {
        ($e:expr, $xs:expr, $t:ty, $name:expr, |$x:ident| $body:expr) => {
            agree_with_cpu_scalar(
                each($e, |k| q($e, $xs, k).map(|$x| $body).collect::<Vec<$t>>()),
                &format!("{} {}", stringify!($t), $name),
            )
        };
    }
    macro_rules! numeric {
        ($e:expr, $t:ty) => {{
            let xs: Vec<$t> = (0..5u8).map(<$t>::from).collect();
            let xs = &xs;
            agree!($e, xs, $t, "1 + 1", |x| x.powi(0) + x.powi(0));
            agree!($e, xs, $t, "2 - 1", |x| (x.powi(0) + x.powi(0)) - x.powi(0));
            agree!($e, xs, $t, "2 * 2", |x| {
                let two = x.powi(0) + x.powi(0);
                two * two
            });
            agree!($e, xs, $t, "1 / 2", |x| x.powi(0) / (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "1 % 2", |x| x.powi(0) % (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "min", |x| x.powi(0).min(x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "max", |x| x.powi(0).max(x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "abs", |x| x.powi(0).abs());
            agree!($e, xs, $t, "mul_add", |x| x
                .powi(0)
                .mul_add(x.powi(0), x.powi(0)));
            agree!($e, xs, $t, "powi", |x| (x.powi(0) + x.powi(0)).powi(5));
            agree!($e, xs, bool, "gt", |x| (x.powi(0) + x.powi(0))
                .gt(x.powi(0)));
            agree!($e, xs, $t, "select", |x| {
                let one = x.powi(0);
                one.gt(x.powi(0) + one).select(one, one + one)
            });
            agree!($e, xs, f64, "as f64", |x| (x.powi(0) + x.powi(0))
                .cast::<f64>());
            agree!($e, xs, f32, "as f32", |x| (x.powi(0) + x.powi(0))
                .cast::<f32>());
            agree!($e, xs, i64, "as i64", |x| (x.powi(0) + x.powi(0))
                .cast::<i64>());
            agree!($e, xs, u32, "as u32", |x| (x.powi(0) + x.powi(0))
                .cast::<u32>());
            agree!($e, xs, bool, "as bool", |x| x.powi(0).cast::<bool>());
        }};
    }
    macro_rules! integer {
        ($e:expr, $t:ty) => {{
            let xs: Vec<$t> = (0..5u8).map(<$t>::from).collect();
            let xs = &xs;
            numeric!($e, $t);
            agree!($e, xs, $t, "neg", |x| -(x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "and", |x| x.powi(0) & (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "or", |x| x.powi(0) | (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "xor", |x| x.powi(0) ^ (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "shl", |x| x.powi(0) << (x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "shr", |x| (x.powi(0) + x.powi(0)) >> x.powi(0));
            agree!($e, xs, $t, "not", |x| !(x.powi(0) + x.powi(0)));
        }};
    }
    macro_rules! float {
        ($e:expr, $t:ty) => {{
            let xs: Vec<$t> = (0..5u8).map(<$t>::from).collect();
            let xs = &xs;
            numeric!($e, $t);
            agree!($e, xs, $t, "neg", |x| -(x.powi(0) + x.powi(0)));
            agree!($e, xs, $t, "sqrt", |x| (x.powi(0) + x.powi(0)).sqrt());
            agree!($e, xs, $t, "floor", |x| (x.powi(0)
                / (x.powi(0) + x.powi(0)))
            .floor());
            agree!($e, xs, $t, "ceil", |x| (x.powi(0)
                / (x.powi(0) + x.powi(0)))
            .ceil());
            agree!($e, xs, $t, "round", |x| (x.powi(0)
                / (x.powi(0) + x.powi(0)))
            .round());
            agree!($e, xs, $t, "1 / 0", |x| x.powi(0) / (x.powi(0) - x.powi(0)));
            agree!($e, xs, $t, "0 / 0", |x| (x.powi(0) - x.powi(0))
                / (x.powi(0) - x.powi(0)));
        }};
    }
    let e = engine();
    integer!(&e, i32);
    integer!(&e, u32);
    integer!(&e, i64);
    integer!(&e, u64);
    float!(&e, f32);
    float!(&e, f64);
}

/// Sorts, top-k, distinct values and groups of values lowering made
/// constant (the sort key's transform and the group's hash of a constant,
/// a device compiler's constant expressions) agree with `cpu-scalar` on
/// every backend, each dtype.
#[test]
fn relational_operators_on_values_lowering_made_constant_agree_everywhere() {
    macro_rules! agree {
        ($e:expr, $xs:expr, $t:ty, $name:expr, |$q:ident| $body:expr) => {
            agree_with_cpu_scalar(
                each($e, |k| {
                    let $q = q($e, $xs, k);
                    $body
                }),
                &format!("{} {}", stringify!($t), $name),
            )
        };
    }
    macro_rules! ops {
        ($e:expr, $t:ty) => {{
            let xs: Vec<$t> = (0..300u16).map(|i| <$t>::from((i % 7) as u8)).collect();
            let xs = &xs;
            agree!($e, xs, $t, "sort", |q| q
                .map(|x| x.powi(0))
                .sort()
                .collect::<Vec<$t>>());
            agree!($e, xs, $t, "sort_desc", |q| q
                .map(|x| x.powi(0))
                .sort_desc()
                .collect::<Vec<$t>>());
            agree!($e, xs, $t, "sort_by_key", |q| q
                .sort_by_key(|x| x.powi(0))
                .collect::<Vec<$t>>());
            agree!($e, xs, $t, "argsort", |q| q
                .map(|x| x.powi(0))
                .argsort()
                .collect::<Vec<u64>>());
            agree!($e, xs, $t, "top_k", |q| q
                .map(|x| x.powi(0))
                .top_k(5)
                .collect::<Vec<$t>>());
            agree!($e, xs, $t, "distinct", |q| q.map(|x| x.powi(0)).distinct());
            agree!($e, xs, $t, "count_distinct", |q| q
                .map(|x| x.powi(0))
                .count_distinct());
            agree!($e, xs, $t, "value_counts", |q| q
                .map(|x| x.powi(0))
                .value_counts());
            agree!($e, xs, $t, "group_by", |q| q
                .group_by(|x| x.powi(0))
                .count());
            agree!($e, xs, $t, "group_by sum", |q| q
                .group_by(|x| x.powi(0))
                .sum());
            agree!($e, xs, $t, "min", |q| q.map(|x| x.powi(0)).min());
            agree!($e, xs, $t, "argmax", |q| q.map(|x| x.powi(0)).argmax());
            agree!($e, xs, $t, "find", |q| q
                .map(|x| x.powi(0))
                .find(|x| x.gt(x.powi(0) - x.powi(0))));
        }};
    }
    let e = engine();
    ops!(&e, i32);
    ops!(&e, u32);
    ops!(&e, i64);
    ops!(&e, u64);
    ops!(&e, f32);
    ops!(&e, f64);
}

/// Found by a fresh seed: Mesa 22.3's lavapipe compiled a comparison of
/// a sign-extended `i32` with a 64-bit constant wrongly (`i64(x) < 0li`
/// false for every negative `x`), so the division helper's sign test, and
/// a user's compare after the cast, came out as if `x` were not negative.
/// The WGSL writer now writes the extension in a form the rewrite does not
/// match (tests/common/known_bugs.rs keeps the history).
#[test]
fn an_i64_division_of_a_cast_i32_keeps_its_sign() {
    let e = Engine::with_config(Config::default());
    let xs = [3i32, -3, -4, 5, -7, i32::MIN, i32::MAX, 0];
    let want: Vec<i64> = xs.iter().map(|&x| x as i64 / 2).collect();
    let rems: Vec<i64> = xs.iter().map(|&x| x as i64 % 2).collect();
    let below: Vec<i32> = xs.iter().copied().filter(|&x| (x as i64) < -3).collect();
    let clamped: Vec<i64> = xs.iter().map(|&x| (x as i64).max(0)).collect();
    let unsigned: Vec<u64> = xs.iter().map(|&x| x as u64 / 3).collect();
    for (k, got) in each(&e, |k| {
        q(&e, &xs, k)
            .filter(|x| x.cast::<i64>().lt(-3i64))
            .collect::<Vec<i32>>()
    }) {
        assert_eq!(got, below, "{k}");
    }
    for (k, got) in each(&e, |k| {
        q(&e, &xs, k)
            .map(|x| x.cast::<i64>().max(0i64))
            .collect::<Vec<i64>>()
    }) {
        assert_eq!(got, clamped, "{k}");
    }
    for (k, got) in each(&e, |k| {
        q(&e, &xs, k)
            .map(|x| x.cast::<u64>() / 3u64)
            .collect::<Vec<u64>>()
    }) {
        assert_eq!(got, unsigned, "{k}");
    }
    for (k, got) in each(&e, |k| {
        q(&e, &xs, k)
            .map(|x| x.cast::<i64>() / 2i64)
            .collect::<Vec<i64>>()
    }) {
        assert_eq!(got, want, "{k}");
    }
    for (k, got) in each(&e, |k| {
        q(&e, &xs, k)
            .map(|x| x.cast::<i64>() % 2i64)
            .collect::<Vec<i64>>()
    }) {
        assert_eq!(got, rems, "{k}");
    }
}

// ------------------------------------------------- the README's API by example

/// The README's "API by example", run as written, with what its comments
/// say asserted. Each statement is first checked to appear in README.md
/// verbatim, so that an edit there fails here until both agree.
#[test]
fn the_readme_api_example_does_what_its_comments_say() {
    const README: &str = include_str!("../README.md");
    let example = README
        .split("## The API by example")
        .nth(1)
        .and_then(|s| s.split("```rust").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README has its API example");
    for line in [
        "let xs = vec![1.0f32, -2.0, 3.0, f32::NAN];",
        "let ys = vec![4.0f32, 5.0, 6.0];",
        "let dot: f32 = xs.compute().zip(&ys).map(|(a, b)| a * b).sum();",
        "let k = 0.5;",
        "let scaled: Vec<f32> = xs.compute().map(|x| (x * k).abs().max(1.0)).collect();",
        "let firsts: Vec<(u64, f32)> = xs.compute().filter(|x| x.gt(0.0)).enumerate().collect();",
        "let running: Vec<i32> = [3, 1, 4].compute().scan_sum().collect();",
        "let best = [3.0f64, 1.0, 1.0].compute().argmin();",
        "let lo = xs.compute().min();",
        "let (s2, var) = ys.compute().aggregate(|y, a| (a.sum(y * y), a.variance(y)));",
        "let top2: Vec<f32> = xs.compute().top_k(2).collect();",
        "let g = [3u32, 1, 3].compute().group_by(|x| x).count();",
        "let j: Vec<(u32, u32)> = [1u32, 2].compute().join([2u32, 2].compute(), |x| x, |y| y).collect();",
        "let wrapped = [i32::MAX, 1].compute().sum();",
        "let q: i32 = [7, 8].compute().map(|x| x / 0).sum();",
        "let h: Vec<u32> = [5u32, 6].compute().map(|x| (x ^ x >> 3) << 35).collect();",
        "let (value, metrics) = xs.compute().map(|x| x * 2.0).with_metrics().sum();",
        "let result = xs.compute().on(BackendKind::CpuScalar).no_fallback().try_sum();",
    ] {
        assert!(example.contains(line), "the README's example no longer has `{line}`");
    }

    // The process-wide engine without the environment's cache directory.
    let _ = computeq::set_engine(Engine::default());
    let xs = vec![1.0f32, -2.0, 3.0, f32::NAN];
    let ys = vec![4.0f32, 5.0, 6.0];
    let dot: f32 = xs.compute().zip(&ys).map(|(a, b)| a * b).sum();
    assert_eq!(dot, 12.0, "stops at the shorter input");
    let k = 0.5;
    let scaled: Vec<f32> = xs.compute().map(|x| (x * k).abs().max(1.0)).collect();
    assert_eq!(scaled[..3], [1.0, 1.0, 1.5]);
    let firsts: Vec<(u64, f32)> = xs.compute().filter(|x| x.gt(0.0)).enumerate().collect();
    assert_eq!(firsts, [(0, 1.0), (1, 3.0)], "order kept");
    let running: Vec<i32> = [3, 1, 4].compute().scan_sum().collect();
    assert_eq!(running, [3, 4, 8]);
    let best = [3.0f64, 1.0, 1.0].compute().argmin();
    assert_eq!(best, Some(1), "first minimum");
    let lo = xs.compute().min();
    assert_eq!(lo, Some(-2.0), "NaN skipped");
    let (s2, var) = ys.compute().aggregate(|y, a| (a.sum(y * y), a.variance(y)));
    assert_eq!((s2, var), (77.0, Some(1.0)));
    let top2: Vec<f32> = xs.compute().top_k(2).collect();
    assert_eq!(format!("{top2:?}"), "[NaN, 3.0]", "NaN is the largest");
    let g = [3u32, 1, 3].compute().group_by(|x| x).count();
    assert_eq!((g.keys, g.values), (vec![1, 3], vec![1, 2]));
    let j: Vec<(u32, u32)> = [1u32, 2]
        .compute()
        .join([2u32, 2].compute(), |x| x, |y| y)
        .collect();
    assert_eq!(j, [(2, 2), (2, 2)]);
    let wrapped = [i32::MAX, 1].compute().sum();
    assert_eq!(wrapped, i32::MIN, "integers wrap");
    let q: i32 = [7, 8].compute().map(|x| x / 0).sum();
    assert_eq!(q, 0, "division by zero is 0");
    let h: Vec<u32> = [5u32, 6].compute().map(|x| (x ^ x >> 3) << 35).collect();
    assert_eq!(h, [5 << 3, 6 << 3], "<< 35 is << 3");

    let (value, metrics) = xs.compute().map(|x| x * 2.0).with_metrics().sum();
    assert!(value.is_nan());
    assert_eq!(metrics.elements_in, 4);
    let result = xs
        .compute()
        .on(BackendKind::CpuScalar)
        .no_fallback()
        .try_sum();
    assert!(result.is_ok_and(f32::is_nan));
}
