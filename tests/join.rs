//! Equi-joins (`join`, `semi_join`, `anti_join`, `is_in`, `not_in`) on
//! every CPU backend against std code: a BTreeMap of the build rows, then
//! the probe rows in order (the documented output order). Many duplicate
//! keys, either side the larger (each side gets hashed), float keys with
//! NaN and ±0, tuple keys, computed build sides that run first, adaptors
//! before and after the join, empty sides.

mod common;

use computeq::prelude::*;
use std::collections::BTreeMap;

/// The pairs of positions an inner join yields, in the documented order.
fn pairs<K: Ord + Copy>(probe: &[K], build: &[K]) -> Vec<(usize, usize)> {
    let mut rows: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (j, k) in build.iter().enumerate() {
        rows.entry(*k).or_default().push(j);
    }
    let mut out = Vec::new();
    for (i, k) in probe.iter().enumerate() {
        for &j in rows.get(k).into_iter().flatten() {
            out.push((i, j));
        }
    }
    out
}

fn keys(n: usize, seed: u64, range: u64) -> Vec<i64> {
    common::lcg(n, seed)
        .iter()
        .map(|&r| (r % range) as i64 - 7)
        .collect()
}

#[test]
fn inner_join_matches_std_on_every_cpu_backend() {
    let e = common::engine();
    let sizes = [
        (0, 5),
        (5, 0),
        (1, 1),
        (1000, 3000),
        (70_001, 3000),
        (3000, 70_001),
    ];
    for (n, m) in sizes {
        for range in [5u64, 4000] {
            if n.max(m) > 10_000 && range == 5 {
                continue; // ~n*m/5 pairs
            }
            let pk = keys(n, 11 + n as u64, range);
            let bk = keys(m, 5 + m as u64, range);
            let pv: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let bv: Vec<u32> = (0..m as u32).collect();
            let want: Vec<((i64, f32), (i64, u32))> = pairs(&pk, &bk)
                .into_iter()
                .map(|(i, j)| ((pk[i], pv[i]), (bk[j], bv[j])))
                .collect();
            for k in common::CPU {
                let got: Vec<((i64, f32), (i64, u32))> = e
                    .query(&pk)
                    .on(k)
                    .no_fallback()
                    .zip(&pv)
                    .join(e.query(&bk).zip(&bv), |(k, _)| k, |(k, _)| k)
                    .collect();
                assert_eq!(got.len(), want.len(), "{k:?} n={n} m={m} range={range}");
                assert!(got == want, "{k:?} n={n} m={m} range={range}");
            }
        }
    }
}

#[test]
fn semi_and_anti_joins_match_std_on_every_cpu_backend() {
    let e = common::engine();
    for (n, m) in [(0, 3), (3, 0), (70_001, 500), (500, 70_001)] {
        let xs = keys(n, 3, 2000);
        let set = keys(m, 4, 2000);
        let sorted: std::collections::BTreeSet<i64> = set.iter().copied().collect();
        let inside: Vec<i64> = xs.iter().copied().filter(|x| sorted.contains(x)).collect();
        let outside: Vec<i64> = xs.iter().copied().filter(|x| !sorted.contains(x)).collect();
        for k in common::CPU {
            let q = || e.query(&xs).on(k).no_fallback();
            let a: Vec<i64> = q().is_in(&set).collect();
            assert_eq!(a, inside, "{k:?} is_in n={n} m={m}");
            let b: Vec<i64> = q().not_in(&set).collect();
            assert_eq!(b, outside, "{k:?} not_in n={n} m={m}");
            let c: Vec<i64> = q().semi_join(e.query(&set), |x| x, |y| y).collect();
            assert_eq!(c, inside, "{k:?} semi n={n} m={m}");
            let d = q().anti_join(e.query(&set), |x| x, |y| y).count();
            assert_eq!(d, outside.len(), "{k:?} anti n={n} m={m}");
        }
    }
}

#[test]
fn float_keys_join_as_group_keys() {
    let e = common::engine();
    let probe = [0.0f32, -0.0, f32::NAN, 1.0, -f32::NAN, f32::INFINITY];
    let build = [-0.0f32, f32::NAN, 2.0, f32::INFINITY, 0.0];
    // -0.0 = +0.0, every NaN one key.
    let want: Vec<(usize, usize)> = vec![(0, 0), (0, 4), (1, 0), (1, 4), (2, 1), (4, 1), (5, 3)];
    let pi: Vec<u32> = (0..probe.len() as u32).collect();
    let bi: Vec<u32> = (0..build.len() as u32).collect();
    for k in common::CPU {
        let got: Vec<(usize, usize)> = e
            .query(&probe)
            .on(k)
            .no_fallback()
            .zip(&pi)
            .join(e.query(&build).zip(&bi), |(x, _)| x, |(y, _)| y)
            .map(|((_, i), (_, j))| (i, j))
            .collect::<Vec<(u32, u32)>>()
            .into_iter()
            .map(|(i, j)| (i as usize, j as usize))
            .collect();
        assert_eq!(got, want, "{k:?}");
        let n = e.query(&probe).on(k).is_in(&[0.0f32, f32::NAN]).count();
        assert_eq!(n, 4, "{k:?}");
    }
}

#[test]
fn tuple_keys_and_computed_build_sides() {
    let e = common::engine();
    let n = 20_000;
    let a: Vec<u32> = common::lcg(n, 1).iter().map(|&r| (r % 40) as u32).collect();
    let b: Vec<i32> = common::lcg(n, 2).iter().map(|&r| (r % 3) as i32).collect();
    let m = 3000;
    let c: Vec<u32> = common::lcg(m, 3).iter().map(|&r| (r % 80) as u32).collect();
    let d: Vec<i32> = common::lcg(m, 4).iter().map(|&r| (r % 3) as i32).collect();
    // The build side filtered and keyed by a computed value: it runs first.
    let side: Vec<(u32, i32)> = c
        .iter()
        .zip(&d)
        .filter(|(c, _)| **c % 2 == 0)
        .map(|(&c, &d)| (c / 2, d))
        .collect();
    let pk: Vec<(u32, i32)> = a.iter().copied().zip(b.iter().copied()).collect();
    let bk: Vec<(u32, i32)> = side.clone();
    let want: Vec<(u32, i32, u32)> = pairs(&pk, &bk)
        .into_iter()
        .map(|(i, j)| (a[i], b[i], side[j].0 * 2))
        .collect();
    for k in common::CPU {
        let got: Vec<((u32, i32), (u32, i32))> = e
            .query(&a)
            .on(k)
            .no_fallback()
            .zip(&b)
            .join(
                e.query(&c).zip(&d).filter(|(c, _)| (c % 2).eq(0)),
                |(x, y)| (x, y),
                |(c, d)| (c / 2, d),
            )
            .collect();
        let got: Vec<(u32, i32, u32)> = got.into_iter().map(|((x, y), (c, _))| (x, y, c)).collect();
        assert_eq!(got, want, "{k:?}");
    }
}

#[test]
fn the_query_goes_on_before_and_after_the_join() {
    let e = common::engine();
    let n = 50_000;
    let xs: Vec<i64> = keys(n, 9, 1000);
    let ys: Vec<i64> = keys(700, 10, 1000);
    let w: Vec<f64> = (0..700).map(|j| j as f64 * 0.5).collect();
    let probe: Vec<i64> = xs.iter().map(|x| x * 2).filter(|x| x % 3 != 0).collect();
    let ps = pairs(&probe, &ys);
    let want_sum: f64 = ps.iter().map(|&(i, j)| probe[i] as f64 + w[j]).sum();
    let mut sorted: Vec<(i64, f64)> = ps.iter().map(|&(i, j)| (probe[i], w[j])).collect();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for k in common::CPU {
        let q = || {
            e.query(&xs)
                .on(k)
                .no_fallback()
                .map(|x| x * 2)
                .filter(|x| (x % 3).ne(0))
                .join(e.query(&ys).zip(&w), |x| x, |(y, _)| y)
        };
        let s: f64 = q().map(|(x, (_, w))| x.cast::<f64>() + w).sum();
        assert!(
            (s - want_sum).abs() <= 1e-9 * want_sum.abs().max(1.0),
            "{k:?} {s} {want_sum}"
        );
        let n_pairs = q().count();
        assert_eq!(n_pairs, ps.len(), "{k:?}");
        // Sorted after the join: by weight descending (stable: probe order).
        let top: Vec<(i64, f64)> = q()
            .map(|(x, (_, w))| (x, w))
            .sort_by_key(|(_, w)| w.desc())
            .take(25)
            .collect();
        let want_top: Vec<(i64, f64)> = {
            let mut v: Vec<(usize, i64, f64)> = ps
                .iter()
                .enumerate()
                .map(|(r, &(i, j))| (r, probe[i], w[j]))
                .collect();
            v.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
            v.into_iter().take(25).map(|(_, x, w)| (x, w)).collect()
        };
        assert_eq!(top, want_top, "{k:?}");
        let skipped: Vec<(i64, (i64, f64))> = q().skip(3).take(4).collect();
        let want_skip: Vec<(i64, (i64, f64))> = ps
            .iter()
            .skip(3)
            .take(4)
            .map(|&(i, j)| (probe[i], (ys[j], w[j])))
            .collect();
        assert_eq!(skipped, want_skip, "{k:?}");
    }
}

#[test]
fn explain_and_metrics_show_the_join() {
    let e = common::engine();
    let xs: Vec<u32> = (0..5000).collect();
    let ys: Vec<u32> = (0..100).map(|i| i * 7).collect();
    let plan = e
        .query(&xs)
        .join(e.query(&ys), |x| x, |y| y)
        .explain()
        .count();
    let text = plan.to_string();
    assert!(text.contains("join on"), "{text}");
    for k in [BackendKind::CpuSimd, BackendKind::CpuParallel] {
        let (n, m) = e
            .query(&xs)
            .on(k)
            .join(e.query(&ys), |x| x, |y| y)
            .with_metrics()
            .count();
        assert_eq!(n, 100);
        // The probe side's rows: the build side is read whole.
        assert_eq!(m.elements_in, 5000);
        let alg = m.algorithm.expect("a join names its algorithm").to_string();
        assert!(
            alg.contains("hash join, build side hashed (100 rows)"),
            "{alg}"
        );
    }
    let (_, m) = e
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .is_in(&ys)
        .with_metrics()
        .count();
    assert_eq!(m.elements_in, 5000);
    // A computed build side whose key column the plan does not read
    // after the join: its placeholder does not count as an input.
    let (_, m2) = e
        .query(&xs)
        .join(e.query(&ys).map(|y| (y * 3, y * 2)), |x| x, |(a, _)| a / 3)
        .map(|(x, (_, z))| x + z)
        .with_metrics()
        .sum();
    assert_eq!(m2.elements_in, 5000);
    assert_eq!(
        m.algorithm.map(|a| a.to_string()).as_deref(),
        Some("ordered-map join (reference)")
    );
}

#[test]
fn a_value_folded_across_the_join_is_carried_through_it() {
    // `-(-x)` after the join folds to the `x` read before it: the join
    // stage writes it among its probe columns, before the build side's.
    let e = common::engine();
    let xs: Vec<i32> = (0..3000).map(|i| (i * 37) % 101 - 50).collect();
    let ys: Vec<i32> = (0..40).map(|j| j - 20).collect();
    let w: Vec<i64> = (0..40).map(|j| 1000 * j as i64).collect();
    let ps = pairs(
        &xs.iter().map(|x| -x).collect::<Vec<_>>(),
        &ys.iter().map(|y| -y).collect::<Vec<_>>(),
    );
    let want: Vec<(i32, i64)> = ps.iter().map(|&(i, j)| (xs[i] + 1, w[j])).collect();
    for k in common::CPU {
        let got: Vec<(i32, i64)> = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .map(|x| -x)
            .join(
                e.query(&ys).zip(&w).map(|(y, w)| (-y, w)),
                |x| x,
                |(y, _)| y,
            )
            .map(|(a, (_, w))| (-a + 1, w))
            .collect();
        assert_eq!(got, want, "{k:?}");
    }
}
