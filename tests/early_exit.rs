//! Early-exit terminals (`first`, `last`, `nth`, `find`, `position`, and
//! `any`/`all`) against std on every backend, at lengths around the block
//! and leaf sizes, with the answer at the start, inside, at the end and
//! nowhere; and the metrics showing that the CPU backends stopped reading.

mod common;

use computeq::prelude::*;

const LEAF: usize = 16 * 1024;

fn lengths() -> Vec<usize> {
    vec![
        0,
        1,
        2,
        1023,
        1024,
        1025,
        LEAF - 1,
        LEAF,
        LEAF + 1,
        3 * LEAF + 5,
        300_007,
    ]
}

#[test]
fn early_exit_terminals_match_std_on_the_cpu_backends() {
    let e = common::engine();
    for n in lengths() {
        let xs: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 1_000_003).collect();
        // Targets: the first element, one inside, the last, and none.
        let mut targets: Vec<i64> = vec![-1];
        if n > 0 {
            targets.extend([xs[0], xs[n / 2], xs[n - 1]]);
        }
        for k in common::CPU {
            let q = || e.query(&xs).on(k).no_fallback();
            assert_eq!(q().first(), xs.first().copied(), "{k:?} n={n}");
            assert_eq!(q().last(), xs.last().copied(), "{k:?} n={n}");
            for i in [0, 1, n / 3, n.saturating_sub(1), n, n + 5] {
                assert_eq!(q().nth(i), xs.get(i).copied(), "{k:?} n={n} nth({i})");
            }
            for &t in &targets {
                assert_eq!(
                    q().position(|x| x.eq(t)),
                    xs.iter().position(|&x| x == t),
                    "{k:?} n={n} position of {t}"
                );
                assert_eq!(
                    q().map(|x| x * 2).find(|x| x.ge(t * 2)),
                    xs.iter().map(|x| x * 2).find(|&x| x >= t * 2),
                    "{k:?} n={n} find >= {t}"
                );
                assert_eq!(
                    q().filter(|x| x.ne(t)).last(),
                    xs.iter().copied().rev().find(|&x| x != t),
                    "{k:?} n={n} last != {t}"
                );
                assert_eq!(q().any(|x| x.eq(t)), xs.contains(&t), "{k:?} n={n} any");
                assert_eq!(q().all(|x| x.ne(t)), !xs.contains(&t), "{k:?} n={n} all");
            }
            // A tuple shape: the first pair past a threshold, and a zip.
            let pairs = q()
                .enumerate()
                .find(|(i, x)| i.gt(n as u64 / 2) & x.gt(500_000));
            let want = xs
                .iter()
                .enumerate()
                .map(|(i, &x)| (i as u64, x))
                .find(|&(i, x)| i > n as u64 / 2 && x > 500_000);
            assert_eq!(pairs, want, "{k:?} n={n} enumerate().find");
        }
    }
}

#[test]
fn the_cpu_backends_stop_reading_at_the_answer() {
    let e = common::engine();
    let n = 40 * LEAF;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for k in common::CPU {
        // The answer in the first leaf: (nearly) everything after it is
        // skipped, whatever the parallel tasks claimed meanwhile.
        let (p, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .position(|x| x.eq(100.0));
        assert_eq!(p, Some(100));
        assert!(
            m.elements_skipped >= (n / 2) as u64,
            "{k:?}: skipped only {} of {n}",
            m.elements_skipped
        );
        // `last` reads from the end (the block backends; `cpu-scalar`,
        // the reference, reads forward).
        let (l, m) = e.query(&xs).on(k).no_fallback().with_metrics().last();
        assert_eq!(l, Some((n - 1) as f32));
        if k != BackendKind::CpuScalar {
            assert!(m.elements_skipped >= (n / 2) as u64, "{k:?}: {m}");
        }
        // A sum needs every element: nothing is skipped.
        let (_, m) = e.query(&xs).on(k).no_fallback().with_metrics().sum();
        assert_eq!(m.elements_skipped, 0, "{k:?}");
        // No answer: everything is read.
        let (none, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .find(|x| x.lt(0.0));
        assert_eq!(none, None);
        assert_eq!(m.elements_skipped, 0, "{k:?}");
    }
}

#[test]
fn devices_run_first_and_last() {
    // The devices read in tiles and skip those past the earliest survivor
    // found (tests/device_relational.rs checks them at many lengths and
    // that the reading stops).
    let e = common::engine();
    let xs: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
    for k in common::devices(&e) {
        let q = || e.query(&xs).on(k).no_fallback();
        assert_eq!(q().find(|x| x.gt(9998.0)), Some(9999.0), "{k:?}");
        assert_eq!(q().first(), Some(0.0), "{k:?}");
        assert_eq!(q().filter(|x| x.lt(5.0)).last(), Some(4.0), "{k:?}");
        assert!(q().any(|x| x.gt(9998.0)));
    }
    assert_eq!(e.query(&xs).find(|x| x.gt(9998.0)), Some(9999.0));
    let plan = e.query(&xs).explain().first().to_string();
    assert!(plan.contains("reduce first(v0) any("), "{plan}");
}
