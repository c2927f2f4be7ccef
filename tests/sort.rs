//! Sorts, argsort and top-k on every CPU backend against std's stable sort
//! under the documented total order (NaN one value above +inf, -0.0
//! before +0.0, descending = the complement, ties in input order), at
//! lengths around the radix threshold and the block sizes, with many
//! duplicates, NaN/±0/±inf and extreme integers; the query going on after
//! a sort; sort + take planned as top-k; the devices declining top-k.

mod common;

use common::{sort_floats as floats, sort_ints as ints};
use computeq::prelude::*;
use std::cmp::Ordering;

/// The documented order on `f64` (every float key converts exactly).
fn total(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.total_cmp(&b),
    }
}

/// Bits of a float result, every NaN one value (a sort may return any
/// NaN for a NaN).
fn canon(x: f64) -> u64 {
    if x.is_nan() {
        u64::MAX
    } else {
        x.to_bits()
    }
}

fn lengths() -> Vec<usize> {
    vec![0, 1, 2, 3, 100, 2047, 2048, 2049, 16 * 1024 + 3, 70_001]
}

/// std's stable sort by the documented order, descending by complement.
fn std_sorted<T: Copy>(xs: &[T], key: impl Fn(T) -> f64 + Copy, desc: bool) -> Vec<T> {
    let mut v = xs.to_vec();
    v.sort_by(|&a, &b| {
        let o = total(key(a), key(b));
        if desc {
            o.reverse()
        } else {
            o
        }
    });
    v
}

fn same_f32(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| canon(*x as f64) == canon(*y as f64))
}

#[test]
fn float_sorts_and_top_k_match_std_on_every_cpu_backend() {
    let e = common::engine();
    for n in lengths() {
        let xs = floats(n, n as u64 + 1);
        let up = std_sorted(&xs, |x| x as f64, false);
        let down = std_sorted(&xs, |x| x as f64, true);
        for k in common::CPU {
            let q = || e.query(&xs).on(k).no_fallback();
            assert!(
                same_f32(&q().sort().collect::<Vec<_>>(), &up),
                "{k:?} n={n} sort"
            );
            assert!(
                same_f32(&q().sort_desc().collect::<Vec<_>>(), &down),
                "{k:?} n={n} desc"
            );
            for lim in [0, 1, 10, n / 2, n + 3] {
                let top = q().top_k(lim).collect::<Vec<_>>();
                assert!(
                    same_f32(&top, &down[..lim.min(n)]),
                    "{k:?} n={n} top_k({lim})"
                );
                let bottom = q().bottom_k(lim).collect::<Vec<_>>();
                assert!(
                    same_f32(&bottom, &up[..lim.min(n)]),
                    "{k:?} n={n} bottom_k({lim})"
                );
            }
        }
    }
}

/// Top-k of one `f32` or `f64` key skips 64-row blocks by comparing their
/// values with the float of the bound (`relational::sort::select`), not
/// each row's word: with the bound at -0.0, +0.0, ±inf or NaN, rows equal
/// to it (and the other zero) in many blocks, the rows kept are still the
/// stable order's first ones, by position.
#[test]
fn float_top_k_keeps_the_rows_at_a_zero_infinite_or_nan_bound() {
    let e = common::engine();
    let n = 40_000;
    let ids: Vec<u32> = (0..n as u32).collect();
    for special in [-0.0f32, 0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        for desc in [false, true] {
            // Rows before the bound in the query's order (where any
            // exist), rows equal to it, the other zero, and the rest
            // after it: the largest class ascending, the smallest
            // descending (the bound itself where nothing is beyond it).
            let (before, after) = if desc {
                (f32::NAN, f32::NEG_INFINITY)
            } else {
                (-1000.0, f32::NAN)
            };
            let before = if total(before as f64, special as f64) == Ordering::Equal {
                special
            } else {
                before
            };
            let xs: Vec<f32> = (0..n)
                .map(|i| match (i % 37, i % 53) {
                    (0, _) => special,
                    (1, _) if special == 0.0 => -special,
                    (_, 0) => before,
                    _ => after,
                })
                .collect();
            let want: Vec<u32> = std_sorted(&ids, |i| xs[i as usize] as f64, desc);
            let first = want
                .iter()
                .position(|&i| canon(xs[i as usize] as f64) == canon(special as f64))
                .unwrap();
            let xs64: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
            for lim in [first + 1, first + 2, first + 7, first + 500] {
                for k in common::CPU {
                    // The positions of the rows `top_k`/`bottom_k` keep.
                    macro_rules! kept {
                        ($xs:expr) => {{
                            let q = || e.query(&$xs).on(k).no_fallback().zip(&ids);
                            if desc {
                                q().top_k_by_key(lim, |(x, _)| x)
                            } else {
                                q().bottom_k_by_key(lim, |(x, _)| x)
                            }
                            .map(|(_, i)| i)
                            .collect::<Vec<u32>>()
                        }};
                    }
                    let at = format!("{k:?} {special:?} desc={desc} lim={lim}");
                    assert_eq!(kept!(xs), want[..lim], "f32 {at}");
                    assert_eq!(kept!(xs64), want[..lim], "f64 {at}");
                }
            }
        }
    }
}

#[test]
fn integer_sorts_match_std_for_every_width() {
    let e = common::engine();
    for n in lengths() {
        let xs = ints(n, 7 * n as u64 + 3);
        let mut want = xs.clone();
        want.sort();
        let x32: Vec<i32> = xs.iter().map(|&x| x as i32).collect::<Vec<_>>();
        let u32s: Vec<u32> = xs.iter().map(|&x| x as u32).collect::<Vec<_>>();
        let u64s: Vec<u64> = xs.iter().map(|&x| x as u64).collect::<Vec<_>>();
        let f64s: Vec<f64> = xs.iter().map(|&x| x as f64 / 3.0).collect::<Vec<_>>();
        for k in common::CPU {
            let q64 = e.query(&xs).on(k).no_fallback();
            assert_eq!(q64.sort().collect::<Vec<_>>(), want, "{k:?} n={n} i64");
            let mut w = x32.clone();
            w.sort();
            assert_eq!(
                e.query(&x32).on(k).sort().collect::<Vec<_>>(),
                w,
                "{k:?} n={n} i32"
            );
            let mut w = u32s.clone();
            w.sort_by(|a, b| b.cmp(a));
            assert_eq!(
                e.query(&u32s).on(k).sort_desc().collect::<Vec<_>>(),
                w,
                "{k:?} u32"
            );
            let mut w = u64s.clone();
            w.sort();
            assert_eq!(
                e.query(&u64s).on(k).sort().collect::<Vec<_>>(),
                w,
                "{k:?} u64"
            );
            w.reverse();
            assert_eq!(
                e.query(&u64s).on(k).top_k(5).collect::<Vec<_>>(),
                w[..5.min(n)],
                "{k:?}"
            );
            let got = e.query(&f64s).on(k).sort_desc().collect::<Vec<_>>();
            let w: Vec<u64> = std_sorted(&f64s, |x| x, true)
                .into_iter()
                .map(canon)
                .collect::<Vec<_>>();
            assert_eq!(
                got.into_iter().map(canon).collect::<Vec<_>>(),
                w,
                "{k:?} f64"
            );
        }
    }
}

#[test]
fn sort_by_key_is_stable_carries_every_column_and_orders_then_by() {
    let e = common::engine();
    for n in lengths() {
        let keys: Vec<i32> = common::lcg(n, 11)
            .iter()
            .map(|&r| (r % 5) as i32 - 2)
            .collect::<Vec<_>>();
        let second = floats(n, 5);
        let ids: Vec<u32> = (0..n as u32).collect::<Vec<_>>();
        let rows: Vec<(i32, u32)> = keys
            .iter()
            .copied()
            .zip(ids.iter().copied())
            .collect::<Vec<_>>();
        // Ties keep the input order: the ids of equal keys ascend.
        let mut want = rows.clone();
        want.sort_by_key(|r| r.0);
        let mut want_desc = rows.clone();
        want_desc.sort_by_key(|r| std::cmp::Reverse(r.0));
        // Then by: key ascending, then the float descending.
        let mut idx: Vec<usize> = (0..n).collect::<Vec<_>>();
        idx.sort_by(|&a, &b| {
            keys[a]
                .cmp(&keys[b])
                .then(total(second[b] as f64, second[a] as f64))
        });
        let then_by: Vec<u32> = idx.iter().map(|&i| i as u32).collect::<Vec<_>>();
        let mut arg: Vec<u64> = (0..n as u64).collect::<Vec<_>>();
        arg.sort_by(|&a, &b| total(second[a as usize] as f64, second[b as usize] as f64));
        for k in common::CPU {
            let q = || e.query(&keys).on(k).no_fallback().zip(&ids);
            assert_eq!(
                q().sort_by_key(|(x, _)| x).collect::<Vec<_>>(),
                want,
                "{k:?} n={n}"
            );
            assert_eq!(
                q().sort_by_key(|(x, _)| x.desc()).collect::<Vec<_>>(),
                want_desc,
                "{k:?} n={n} desc"
            );
            let got: Vec<u32> = e
                .query(&keys)
                .on(k)
                .zip(&second)
                .zip(&ids)
                .sort_by_key(|((x, y), _)| (x, y.desc()))
                .map(|(_, i)| i)
                .collect::<Vec<_>>();
            assert_eq!(got, then_by, "{k:?} n={n} then by");
            // The same order's first rows, by selection on two keys.
            let got: Vec<u32> = e
                .query(&keys)
                .on(k)
                .zip(&second)
                .zip(&ids)
                .bottom_k_by_key(5, |((x, y), _)| (x, y.desc()))
                .map(|(_, i)| i)
                .collect::<Vec<_>>();
            assert_eq!(
                got,
                then_by[..5.min(n)],
                "{k:?} n={n} bottom_k_by_key then by"
            );
            assert_eq!(
                e.query(&second).on(k).argsort().collect::<Vec<_>>(),
                arg,
                "{k:?} argsort"
            );
            // top_k_by_key: the largest keys, ties in input order.
            let top = q().top_k_by_key(3, |(x, _)| x).collect::<Vec<_>>();
            assert_eq!(top, want_desc[..3.min(n)], "{k:?} n={n} top_k_by_key");
            let bottom = q().bottom_k_by_key(4, |(x, _)| x).collect::<Vec<_>>();
            assert_eq!(bottom, want[..4.min(n)], "{k:?} n={n} bottom_k_by_key");
        }
    }
}

#[test]
fn the_query_goes_on_after_a_sort() {
    let e = common::engine();
    let xs: Vec<i64> = ints(50_000, 9).iter().map(|x| x % 1000).collect::<Vec<_>>();
    let mut sorted: Vec<i64> = xs
        .iter()
        .copied()
        .filter(|x| x & 3 != 0)
        .collect::<Vec<_>>();
    sorted.sort();
    for k in common::CPU {
        let q = || e.query(&xs).on(k).no_fallback();
        let got = q()
            .filter(|x| (x & 3).ne(0))
            .sort()
            .skip(10)
            .take(5)
            .collect::<Vec<_>>();
        assert_eq!(got, sorted[10..15], "{k:?}");
        // Sort, then element-wise work and a scan over the sorted order.
        let got = q()
            .filter(|x| (x & 3).ne(0))
            .sort_by_key(|x| x.desc())
            .map(|x| x * 2)
            .scan_sum()
            .collect::<Vec<_>>();
        let mut acc = 0i64;
        let want: Vec<i64> = sorted
            .iter()
            .rev()
            .map(|x| {
                acc += x * 2;
                acc
            })
            .collect::<Vec<_>>();
        assert_eq!(got, want, "{k:?}");
        // A sort before a reduction and a position-dependent adaptor.
        let s: i64 = q()
            .map(|x| x + 1)
            .sort()
            .enumerate()
            .map(|(i, x)| x * i.cast::<i64>())
            .sum();
        let mut w: Vec<i64> = xs.iter().map(|x| x + 1).collect::<Vec<_>>();
        w.sort();
        let want: i64 = w.iter().enumerate().map(|(i, x)| x * i as i64).sum();
        assert_eq!(s, want, "{k:?}");
        // Two sorts in a row: the second decides.
        let twice = q().sort_desc().sort().take(3).collect::<Vec<_>>();
        assert_eq!(twice, {
            let mut v = xs.clone();
            v.sort();
            v[..3].to_vec()
        });
    }
    let empty: Vec<f32> = Vec::new();
    assert!(e.query(&empty).sort().collect::<Vec<_>>().is_empty());
    assert!(e.query(&empty).top_k(3).collect::<Vec<_>>().is_empty());
}

#[test]
fn sort_then_take_is_planned_as_top_k_and_the_metrics_name_the_algorithm() {
    let e = common::engine();
    let xs: Vec<f32> = floats(200_000, 3);
    let plan = e
        .query(&xs)
        .top_k(10)
        .explain()
        .collect::<Vec<_>>()
        .to_string();
    assert!(plan.contains("sort_limit"), "{plan}");
    assert!(plan.contains("fetch param.0"), "{plan}");
    let (_, m) = e
        .query(&xs)
        .on(BackendKind::CpuSimd)
        .with_metrics()
        .top_k(10)
        .collect::<Vec<_>>();
    let a = m
        .algorithm
        .expect("a sort records its algorithm")
        .to_string();
    assert!(a.contains("top-k selection of 10 rows"), "{m}");
    let (_, m) = e
        .query(&xs)
        .on(BackendKind::CpuSimd)
        .with_metrics()
        .sort()
        .collect::<Vec<_>>();
    let a = m.algorithm.expect("algorithm").to_string();
    assert!(a.starts_with("lsd-radix"), "{a}");
    assert!(m.to_string().contains("algorithm=\"lsd-radix"), "{m}");
    let (_, m) = e
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .with_metrics()
        .sort()
        .collect::<Vec<_>>();
    assert_eq!(
        m.algorithm.map(|a| a.to_string()).as_deref(),
        Some("stable comparison sort")
    );
    // `cpu-parallel` partitions across threads only from 2^20 rows
    // (`radix::MSD_MIN`): below that the partition's fixed work costs more
    // than a second thread saves, and it sorts as `cpu-simd` does.
    let parallel = |xs: &[f32], desc: bool| {
        let q = e.query(xs).on(BackendKind::CpuParallel).with_metrics();
        let (v, m) = if desc { q.sort_desc() } else { q.sort() }.collect::<Vec<_>>();
        (v, m.algorithm.expect("algorithm").to_string())
    };
    let (_, a) = parallel(&xs, false);
    assert!(a.starts_with("lsd-radix"), "{a}");
    let big = floats((1 << 20) + 1, 4);
    for desc in [false, true] {
        let (v, a) = parallel(&big, desc);
        if rayon::current_num_threads() > 1 {
            assert!(a.starts_with("msd+lsd-radix over threads"), "{a}");
        }
        assert!(
            same_f32(&v, &std_sorted(&big, |x| x as f64, desc)),
            "desc={desc}"
        );
    }
}

#[test]
fn devices_select_top_k_without_sorting_everything() {
    // The devices run top-k by radix select (tests/device_relational.rs
    // checks them against `cpu-scalar` at many lengths and limits).
    let e = common::engine();
    let xs: Vec<f32> = floats(10_000, 1);
    let want = std_sorted(&xs, |x| x as f64, true);
    for k in common::devices(&e) {
        let (got, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .top_k(3)
            .collect::<Vec<_>>();
        assert!(same_f32(&got, &want[..3]), "{k:?}");
        let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
        assert!(alg.starts_with("device radix select"), "{k:?}: {m}");
    }
}

#[test]
fn the_checks_catch_an_unstable_sort_and_a_wrong_nan_rule() {
    // The reference these tests compare with, fed a deliberately wrong
    // sort: an unstable sort of (key, id) rows on few distinct keys
    // reorders ties, and ordering NaN first is not the documented order.
    let n = 10_000;
    let rows: Vec<(i32, u32)> = (0..n as u32)
        .map(|i| ((i * 7919 % 5) as i32, i))
        .collect::<Vec<_>>();
    let mut stable = rows.clone();
    stable.sort_by_key(|r| r.0);
    let mut unstable = rows.clone();
    unstable.sort_unstable_by_key(|r| r.0);
    assert_ne!(
        stable, unstable,
        "the unstable sort should reorder ties here"
    );
    let xs = floats(1000, 2);
    let mut nan_first = xs.clone();
    nan_first.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.total_cmp(b),
    });
    assert!(!same_f32(&nan_first, &std_sorted(&xs, |x| x as f64, false)));
    // And the engine's answer is the stable, NaN-last one.
    let e = common::engine();
    let ids: Vec<u32> = rows.iter().map(|r| r.1).collect::<Vec<_>>();
    let keys: Vec<i32> = rows.iter().map(|r| r.0).collect::<Vec<_>>();
    for k in common::CPU {
        let got = e
            .query(&keys)
            .on(k)
            .zip(&ids)
            .sort_by_key(|(x, _)| x)
            .collect::<Vec<_>>();
        assert_eq!(got, stable, "{k:?}");
    }
}
