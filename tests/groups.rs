//! Keyed aggregation (`group_by` with `count`, `sum`, `min`, `max`,
//! `mean`, `agg`), `distinct`, `count_distinct` and `value_counts` on
//! every CPU backend against BTreeMap-based std code: integer keys of small
//! and large ranges (the direct index and the hash path), float keys with
//! NaN and ±0, tuple keys, first-seen order, filters before, empty input.

mod common;

use computeq::prelude::*;
use std::collections::BTreeMap;

fn lengths() -> Vec<usize> {
    vec![0, 1, 2, 1000, 70_001]
}

/// The documented group key of a float: -0.0 is +0.0, NaN one key (last).
fn fkey(x: f32) -> (bool, i64) {
    if x.is_nan() {
        (true, 0)
    } else {
        let x = if x == 0.0 { 0.0 } else { x };
        (false, ordered(x))
    }
}

fn ordered(x: f32) -> i64 {
    let b = x.to_bits() as i32;
    (if b < 0 { b ^ 0x7fff_ffff } else { b }) as i64
}

#[test]
fn integer_groups_match_a_btreemap_on_every_cpu_backend() {
    let e = common::engine();
    for n in lengths() {
        // Dense keys (a direct index), many groups, and 100 sparse keys
        // (at 70,001 rows: the one-pass fold in a cuckoo table).
        for (range, spread) in [(7u64, 1), (1000, 1), (1 << 40, 1), (100, 0x9E37_79B9_7F4A)] {
            let keys: Vec<i64> = common::lcg(n, n as u64 + range)
                .iter()
                .map(|&r| ((r % range) as i64 - (range / 2) as i64) * spread)
                .collect();
            let vals: Vec<i32> = common::lcg(n, 3)
                .iter()
                .map(|&r| (r % 2001) as i32 - 1000)
                .collect();
            let mut want: BTreeMap<i64, (u64, i32, i32, i32, f64, usize)> = BTreeMap::new();
            for (i, (&k, &v)) in keys.iter().zip(&vals).enumerate() {
                let e = want.entry(k).or_insert((0, 0, i32::MAX, i32::MIN, 0.0, i));
                e.0 += 1;
                e.1 = e.1.wrapping_add(v);
                e.2 = e.2.min(v);
                e.3 = e.3.max(v);
                e.4 += v as f64;
            }
            let want_keys: Vec<i64> = want.keys().copied().collect();
            let mut seen: Vec<(usize, i64)> = want.iter().map(|(k, e)| (e.5, *k)).collect();
            seen.sort();
            for k in common::CPU {
                let q = || e.query(&keys).on(k).no_fallback().zip(&vals);
                let g = q().group_by(|(k, _)| k).count();
                assert_eq!(g.keys, want_keys, "{k:?} n={n} range={range}");
                assert_eq!(
                    g.values,
                    want.values().map(|e| e.0).collect::<Vec<_>>(),
                    "{k:?} n={n} count"
                );
                let g = q().group_by(|(k, _)| k).agg(|(_, v), a| {
                    (
                        a.sum(v),
                        a.min(v),
                        a.max(v),
                        a.mean(v),
                        a.first(v),
                        a.argmax(v),
                    )
                });
                for (j, (key, e)) in want.iter().enumerate() {
                    let (s, mn, mx, mean, first, argmax) = g.values[j];
                    assert_eq!(
                        (s, mn, mx),
                        (e.1, Some(e.2), Some(e.3)),
                        "{k:?} n={n} key {key}"
                    );
                    assert!((mean.unwrap() - e.4 / e.0 as f64).abs() < 1e-9, "{k:?}");
                    assert_eq!(first, Some(vals[e.5]), "{k:?} first");
                    let am = argmax.unwrap();
                    assert_eq!((keys[am], vals[am]), (*key, e.3), "{k:?} argmax");
                    // The first row of the largest value.
                    assert!(
                        (0..am).all(|i| keys[i] != *key || vals[i] < e.3),
                        "{k:?} argmax is not the first"
                    );
                }
                let fs = q().group_by(|(k, _)| k).first_seen().count();
                assert_eq!(
                    fs.keys,
                    seen.iter().map(|s| s.1).collect::<Vec<_>>(),
                    "{k:?} first_seen"
                );
                assert_eq!(e.query(&keys).on(k).distinct(), want_keys, "{k:?} distinct");
                assert_eq!(e.query(&keys).on(k).count_distinct(), want.len() as u64);
                let sums = e
                    .query(&vals)
                    .on(k)
                    .zip(&keys)
                    .map(|(v, _)| v)
                    .group_by(|v| v & 3)
                    .sum();
                let mut w: BTreeMap<i32, i32> = BTreeMap::new();
                for &v in &vals {
                    let s = w.entry(v & 3).or_insert(0);
                    *s = s.wrapping_add(v);
                }
                assert_eq!(
                    sums.into_pairs(),
                    w.into_iter().collect::<Vec<_>>(),
                    "{k:?} sum"
                );
            }
        }
    }
}

#[test]
fn sparse_u32_keys_with_many_rows_each_match_a_btreemap() {
    // 300 sparse keys over 2^17 rows: every CPU backend folds them in one
    // pass (a cuckoo table per thread); sums in row order per group.
    let e = common::engine();
    let n = 1 << 17;
    let keys: Vec<u32> = common::lcg(n, 11)
        .iter()
        .map(|&r| ((r % 300) as u32).wrapping_mul(0x9E37_79B9))
        .collect();
    let vals: Vec<f32> = common::lcg(n, 12)
        .iter()
        .map(|&r| (r % 1000) as f32 / 8.0)
        .collect();
    let mut want: BTreeMap<u32, (u64, f64, f32, f32)> = BTreeMap::new();
    for (&k, &v) in keys.iter().zip(&vals) {
        let e = want.entry(k).or_insert((0, 0.0, f32::MIN, f32::MAX));
        e.0 += 1;
        e.1 += v as f64;
        e.2 = e.2.max(v);
        e.3 = e.3.min(v);
    }
    for k in common::CPU {
        let q = || e.query(&keys).on(k).no_fallback().zip(&vals);
        let c = q().group_by(|(k, _)| k).count();
        assert_eq!(c.keys, want.keys().copied().collect::<Vec<_>>(), "{k:?}");
        assert_eq!(
            c.values,
            want.values().map(|e| e.0).collect::<Vec<_>>(),
            "{k:?}"
        );
        let s = q().group_by(|(k, _)| k).agg(|(_, v), a| a.sum(v));
        let m = q().group_by(|(k, _)| k).agg(|(_, v), a| a.max(v));
        // Several aggregates: a fold of their own each, the same groups.
        let all = q()
            .group_by(|(k, _)| k)
            .agg(|(_, v), a| (a.max(v), a.count(), a.sum(v), a.min(v)));
        assert_eq!(all.keys, c.keys, "{k:?}");
        for (j, e) in want.values().enumerate() {
            // Multiples of 1/8 below 125: every partial sum is exact.
            assert_eq!(s.values[j] as f64, e.1, "{k:?} sum of group {j}");
            assert_eq!(m.values[j], Some(e.2), "{k:?} max of group {j}");
            let (mx, count, sum, mn) = all.values[j];
            assert_eq!(
                (mx, count, sum as f64),
                (Some(e.2), e.0, e.1),
                "{k:?} group {j}"
            );
            assert_eq!(mn, Some(e.3), "{k:?} min of group {j}");
        }
        // In first-appearance order: the keys by their first row.
        let seen = q()
            .group_by(|(k, _)| k)
            .first_seen()
            .agg(|(_, v), a| (a.count(), a.max(v)));
        let mut firsts: Vec<u32> = Vec::new();
        for &key in &keys {
            if !firsts.contains(&key) {
                firsts.push(key);
            }
        }
        assert_eq!(seen.keys, firsts, "{k:?} first_seen");
        for (key, (count, mx)) in seen.keys.iter().zip(&seen.values) {
            assert_eq!(
                (*count, *mx),
                (want[key].0, Some(want[key].2)),
                "{k:?} {key}"
            );
        }
    }
}

#[test]
fn many_groups_with_several_aggregates_match_a_btreemap() {
    // 140,000 sparse keys over 1.5M rows (about 11 rows each): the
    // key-range partitions, each numbering its rows' groups once and
    // folding every aggregate through the numbers.
    let e = common::engine();
    let n = 1_500_000;
    let keys: Vec<u32> = common::lcg(n, 21)
        .iter()
        .map(|&r| ((r % 140_000) as u32).wrapping_mul(0x9E37_79B9))
        .collect();
    let vals: Vec<i32> = common::lcg(n, 22)
        .iter()
        .map(|&r| (r % 2001) as i32 - 1000)
        .collect();
    let mut want: BTreeMap<u32, (u64, i32, i32, i32)> = BTreeMap::new();
    for (&k, &v) in keys.iter().zip(&vals) {
        let e = want.entry(k).or_insert((0, 0, i32::MAX, i32::MIN));
        e.0 += 1;
        e.1 = e.1.wrapping_add(v);
        e.2 = e.2.min(v);
        e.3 = e.3.max(v);
    }
    for k in common::CPU {
        let (g, m) = e
            .query(&keys)
            .on(k)
            .no_fallback()
            .zip(&vals)
            .with_metrics()
            .group_by(|(k, _)| k)
            .agg(|(_, v), a| (a.sum(v), a.count(), a.max(v), a.min(v)));
        if k != BackendKind::CpuScalar {
            let algorithm = m.algorithm.unwrap().to_string();
            assert!(algorithm.contains("key-range partitions"), "{k:?}: {m}");
        }
        assert_eq!(g.keys, want.keys().copied().collect::<Vec<_>>(), "{k:?}");
        for (j, w) in want.values().enumerate() {
            let (sum, count, mx, mn) = g.values[j];
            assert_eq!(
                (sum, count, mx, mn),
                (w.1, w.0, Some(w.3), Some(w.2)),
                "{k:?} group {j}"
            );
        }
    }
}

#[test]
fn float_keys_group_nan_and_signed_zeros_as_documented() {
    let e = common::engine();
    let special = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.5,
    ];
    for n in [0usize, 7, 1000, 100_001] {
        let xs: Vec<f32> = common::lcg(n, 5)
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                if i < 7 {
                    special[i]
                } else if r % 3 == 0 {
                    special[(r % 7) as usize]
                } else {
                    ((r >> 20) % 50) as f32 * 0.5 - 10.0
                }
            })
            .collect();
        let mut want: BTreeMap<(bool, i64), (f32, u64)> = BTreeMap::new();
        for &x in &xs {
            let e = want
                .entry(fkey(x))
                .or_insert((if x == 0.0 { 0.0 } else { x }, 0));
            e.1 += 1;
        }
        for k in common::CPU {
            let v = e.query(&xs).on(k).value_counts();
            assert_eq!(v.len(), want.len(), "{k:?} n={n}");
            for ((key, count), (want_key, want_count)) in v.iter().zip(want.values()) {
                assert_eq!(*count, *want_count, "{k:?} n={n}");
                assert!(
                    key.to_bits() == want_key.to_bits() || (key.is_nan() && want_key.is_nan()),
                    "{k:?} {key} {want_key}"
                );
            }
            // +0.0 comes out for the zeros.
            if n > 0 {
                let d = e.query(&xs).on(k).distinct();
                assert!(d.iter().all(|x| *x != 0.0 || x.is_sign_positive()), "{k:?}");
                assert!(d.last().unwrap().is_nan(), "{k:?} NaN sorts last");
            }
        }
    }
}

#[test]
fn tuple_keys_filters_and_variance_per_group() {
    let e = common::engine();
    let n = 150_000;
    let a: Vec<u32> = common::lcg(n, 1).iter().map(|&r| (r % 13) as u32).collect();
    let b: Vec<i64> = common::lcg(n, 2)
        .iter()
        .map(|&r| (r % 5) as i64 - 2)
        .collect();
    let x: Vec<f64> = common::lcg(n, 3)
        .iter()
        .map(|&r| 1e8 + (r % 1000) as f64 * 0.01)
        .collect();
    let mut want: BTreeMap<(u32, i64), Vec<f64>> = BTreeMap::new();
    for i in 0..n {
        if x[i] > 1e8 + 1.0 {
            want.entry((a[i], b[i])).or_default().push(x[i]);
        }
    }
    for k in common::CPU {
        let g = e
            .query(&a)
            .on(k)
            .no_fallback()
            .zip(&b)
            .zip(&x)
            .filter(|(_, x)| x.gt(1e8 + 1.0))
            .group_by(|((a, b), _)| (a, b))
            .agg(|(_, x), agg| (agg.count(), agg.variance(x)));
        assert_eq!(g.keys, want.keys().copied().collect::<Vec<_>>(), "{k:?}");
        for ((c, var), xs) in g.values.iter().zip(want.values()) {
            assert_eq!(*c as usize, xs.len());
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let exact = xs.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (xs.len() - 1) as f64;
            assert!(
                (var.unwrap() - exact).abs() <= 1e-6 * exact,
                "{k:?} {var:?} {exact}"
            );
        }
    }
}

#[test]
fn the_metrics_name_the_grouping_algorithm_and_devices_decline() {
    let e = common::engine();
    let small: Vec<u32> = common::lcg(300_000, 1)
        .iter()
        .map(|&r| (r % 1000) as u32)
        .collect();
    // Sparse 64-bit keys, 50,000 of them (mostly distinct rows would be
    // sorted, not hashed).
    let wide: Vec<u64> = common::lcg(300_000, 2)
        .iter()
        .map(|&r| (r % 50_000).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let (_, m) = e
        .query(&small)
        .on(BackendKind::CpuSimd)
        .with_metrics()
        .value_counts();
    assert!(
        m.algorithm.unwrap().to_string().starts_with("direct index"),
        "{m}"
    );
    let (_, m) = e
        .query(&wide)
        .on(BackendKind::CpuParallel)
        .with_metrics()
        .count_distinct();
    assert!(
        m.algorithm.unwrap().to_string().starts_with("hash groups"),
        "{m}"
    );
    let plan = e.query(&small).explain().value_counts().to_string();
    assert!(
        plan.contains("terminal: group by v0 -> count (by key)"),
        "{plan}"
    );
    // The devices group too (tests/device_relational.rs), in key order
    // and in first-seen order.
    for k in common::devices(&e) {
        let got = e
            .query(&small)
            .on(k)
            .no_fallback()
            .group_by(|x| x)
            .first_seen()
            .count();
        let want = e
            .query(&small)
            .on(BackendKind::CpuScalar)
            .group_by(|x| x)
            .first_seen()
            .count();
        assert_eq!((got.keys, got.values), (want.keys, want.values), "{k:?}");
    }
    let empty: Vec<f32> = Vec::new();
    assert!(e.query(&empty).value_counts().is_empty());
    assert_eq!(e.query(&empty).count_distinct(), 0);
}

#[test]
fn keys_past_128_bits_are_a_clear_error() {
    let e = common::engine();
    let a: Vec<u64> = vec![1, 2, 3];
    let err = e
        .query(&a)
        .zip(&a)
        .zip(&a)
        .fallible()
        .group_by(|((x, y), z)| ((x, y), z))
        .count()
        .expect_err("192 bits of keys");
    assert!(err.to_string().contains("128 bits"), "{err}");
}

/// One group's answers in `many_groups_partitioned_by_key_range_match_the_reference`.
type Row = (
    u64,
    i32,
    Option<i32>,
    Option<i32>,
    Option<usize>,
    Option<usize>,
    Option<f64>,
);

/// `distinct` and `count_distinct` of keys whose rows are mostly
/// distinct (as sampled, from 2^18 rows) sort the keys' group words and
/// keep each run once: every key type, with both zeros (one value,
/// `+0.0`), NaNs of both signs (one value, last), infinities and the
/// integers' extremes, against std's sort and dedup under the documented
/// group order; a dense key keeps the direct index.
#[test]
fn distinct_of_mostly_distinct_keys_sorts_them_on_every_cpu_backend() {
    let e = common::engine();
    let n = 300_000;
    let r = common::lcg(n, 29);
    // Every 97th row a special value; the rest mostly distinct.
    let special = |x: u64| x.is_multiple_of(97).then_some(x / 97 % 6);
    let f64s: Vec<f64> = r
        .iter()
        .map(|&x| match special(x) {
            Some(0) => f64::NAN,
            Some(1) => -f64::NAN,
            Some(2) => -0.0,
            Some(3) => 0.0,
            Some(4) => f64::INFINITY,
            Some(_) => f64::NEG_INFINITY,
            None => (x >> 11) as f64 * 1e-3 - 1e12,
        })
        .collect();
    let f32s: Vec<f32> = r
        .iter()
        .zip(&f64s)
        .map(|(&x, &f)| match special(x) {
            Some(_) => f as f32,
            None => (x >> 29) as f32 * 0.5 - 4e6,
        })
        .collect();
    let i64s: Vec<i64> = r
        .iter()
        .map(|&x| match special(x) {
            Some(0) => i64::MIN,
            Some(1) => i64::MAX,
            Some(2) => 0,
            _ => x as i64,
        })
        .collect();
    let u64s: Vec<u64> = i64s.iter().map(|&x| x as u64).collect();
    let i32s: Vec<i32> = i64s.iter().map(|&x| (x >> 32) as i32).collect();
    let u32s: Vec<u32> = i64s.iter().map(|&x| (x >> 32) as u32).collect();
    // The group order: -0.0 is +0.0, every NaN one value after +inf.
    fn canon64(x: f64) -> (bool, u64) {
        let x = if x == 0.0 { 0.0 } else { x };
        (x.is_nan(), if x.is_nan() { 0 } else { x.to_bits() })
    }
    fn want_floats(xs: &[f64]) -> Vec<(bool, u64)> {
        let mut v: Vec<f64> = xs.to_vec();
        v.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (a, b) if a != b => a.cmp(&b),
            _ => a.partial_cmp(b).unwrap(),
        });
        let mut w: Vec<(bool, u64)> = v.into_iter().map(canon64).collect();
        w.dedup();
        w
    }
    fn want_ints<T: Ord + Copy>(xs: &[T]) -> Vec<T> {
        let mut v = xs.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    }
    // The first difference, not a dump of 300,000 values.
    fn same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
        let at = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i));
        if let Some(i) = at {
            panic!(
                "{what}: {} values, {} wanted; at {i}: {:?} against {:?}",
                got.len(),
                want.len(),
                got.get(i),
                want.get(i)
            );
        }
    }
    let f32_as_64: Vec<f64> = f32s.iter().map(|&x| x as f64).collect();
    for k in common::CPU {
        let got = |d: Vec<f64>| d.into_iter().map(canon64).collect::<Vec<_>>();
        let (d, m) = e.query(&f64s).on(k).no_fallback().with_metrics().distinct();
        same(&got(d), &want_floats(&f64s), &format!("{k:?} f64"));
        if k != BackendKind::CpuScalar {
            let alg = m.algorithm.unwrap().to_string();
            assert!(alg.contains("radix"), "{k:?} {m}");
        }
        let d = e.query(&f32s).on(k).no_fallback().distinct();
        let d: Vec<f64> = d.into_iter().map(f64::from).collect();
        same(&got(d), &want_floats(&f32_as_64), &format!("{k:?} f32"));
        assert_eq!(
            e.query(&f64s).on(k).no_fallback().count_distinct(),
            want_floats(&f64s).len() as u64,
            "{k:?} f64 count"
        );
        let q = |what| format!("{k:?} {what}");
        // The integer keys, each against std's sort and dedup.
        macro_rules! ints {
            ($($xs:ident),*) => {$(
                let d = e.query(&$xs).on(k).no_fallback().distinct();
                same(&d, &want_ints(&$xs), &q(stringify!($xs)));
            )*};
        }
        ints!(i64s, u64s, i32s, u32s);
        // A dense key (every value of a small range) keeps the direct
        // index.
        let dense: Vec<u32> = (0..n as u32).rev().collect();
        let (d, m) = e
            .query(&dense)
            .on(k)
            .no_fallback()
            .with_metrics()
            .distinct();
        same(&d, &(0..n as u32).collect::<Vec<_>>(), &q("dense"));
        if k != BackendKind::CpuScalar {
            let alg = m.algorithm.unwrap().to_string();
            assert!(!alg.contains("radix"), "{k:?} {m}");
        }
    }
}

#[test]
fn many_groups_partitioned_by_key_range_match_the_reference() {
    // Enough rows and groups for the key-range partitions (2^18 rows, an
    // estimated 2^17 groups or more), on every key width.
    let e = common::engine();
    let n = 300_000;
    let r = common::lcg(n, 11);
    let vals: Vec<i32> = common::lcg(n, 12)
        .iter()
        .map(|&x| (x % 2001) as i32 - 1000)
        .collect();
    let fvals: Vec<f32> = vals.iter().map(|&v| v as f32 * 0.25).collect();
    // f32 keys from 200,000 values with NaNs and both zeros among them.
    let fkeys: Vec<f32> = r
        .iter()
        .map(|&x| match x % 1000 {
            0 => f32::NAN,
            1 => -0.0,
            2 => 0.0,
            _ => ((x >> 12) % 200_000) as f32 * 0.37 - 30_000.0,
        })
        .collect();
    let mut want: BTreeMap<(bool, i64), (u64, i32, usize, usize)> = BTreeMap::new();
    for (i, (&k, &v)) in fkeys.iter().zip(&vals).enumerate() {
        let e = want.entry(fkey(k)).or_insert((0, 0, i, i));
        e.0 += 1;
        e.1 = e.1.wrapping_add(v);
        e.3 = i;
    }
    let wide: Vec<i64> = r.iter().map(|&x| (x >> 8) as i64 - (1 << 40)).collect();
    let narrow: Vec<u32> = r.iter().map(|&x| (x >> 20) as u32).collect();
    let reference = BackendKind::CpuScalar;
    for k in [BackendKind::CpuSimd, BackendKind::CpuParallel] {
        let q = |on: BackendKind| {
            e.query(&fkeys)
                .on(on)
                .no_fallback()
                .zip(&vals)
                .zip(&fvals)
                .with_metrics()
                .group_by(|((k, _), _)| k)
                .agg(|((_, v), f), a| {
                    (
                        a.count(),
                        a.sum(v),
                        a.first(v),
                        a.last(v),
                        a.argmin(f),
                        a.argmax(f),
                        a.variance(f),
                    )
                })
        };
        let (g, m) = q(k);
        assert!(
            m.algorithm
                .unwrap()
                .to_string()
                .contains("key-range partitions"),
            "{k:?}: {m}"
        );
        assert_eq!(g.keys.len(), want.len(), "{k:?}");
        for (j, (key, w)) in want.iter().enumerate() {
            assert_eq!(fkey(g.keys[j]), *key, "{k:?} key {j}");
            let (c, s, first, last, _, _, _) = g.values[j];
            assert_eq!((c, s), (w.0, w.1), "{k:?} key {j}");
            assert_eq!(
                (first, last),
                (Some(vals[w.2]), Some(vals[w.3])),
                "{k:?} key {j}"
            );
        }
        // Bit for bit the reference's answer (rows fold in row order).
        let (r, _) = q(reference);
        let bits = |v: &Vec<Row>| {
            v.iter()
                .map(|t| (t.0, t.1, t.2, t.3, t.4, t.5, t.6.map(f64::to_bits)))
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&g.values), bits(&r.values), "{k:?}");
        // 64- and 32-bit integer keys, with and without aggregates (the
        // distinct values of mostly distinct rows are sorted, not hashed).
        let (d, m) = e.query(&wide).on(k).no_fallback().with_metrics().distinct();
        assert!(m.algorithm.unwrap().to_string().contains("radix"), "{m}");
        assert_eq!(
            d,
            e.query(&wide).on(reference).distinct(),
            "{k:?} i64 distinct"
        );
        let sums = |on| {
            e.query(&narrow)
                .on(on)
                .no_fallback()
                .zip(&vals)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| a.sum(v))
        };
        let (a, b) = (sums(k), sums(reference));
        assert_eq!((a.keys, a.values), (b.keys, b.values), "{k:?} u32 sums");
        // First-seen order (one table) agrees too.
        let fs = |on| {
            e.query(&wide)
                .on(on)
                .no_fallback()
                .group_by(|k| k)
                .first_seen()
                .count()
        };
        let (a, b) = (fs(k), fs(reference));
        assert_eq!((a.keys, a.values), (b.keys, b.values), "{k:?} first seen");
    }
}
