//! Composable aggregates (`aggregate`) and the one-pass variance on every
//! backend: the CPU backends against exact references (integer arithmetic
//! on data built to be exactly representable), the device backends too
//! where they have `f64` (tests/device_relational.rs checks them against
//! `cpu-scalar` on ill-conditioned data).

mod common;

use computeq::plumbing::Phase;
use computeq::prelude::*;

/// A deterministic stream of small integers in `-range..=range`.
fn noise(n: usize, range: i64, seed: u64) -> Vec<i64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as i64 % (2 * range + 1)) - range
        })
        .collect()
}

/// The exact sample variance of `base + k / scale` for integers `k`, from
/// integer sums (`n Σk² - (Σk)²` is exact in `i128`), rounded once.
fn exact_variance(ks: &[i64], scale: f64) -> f64 {
    let n = ks.len() as i128;
    let s: i128 = ks.iter().map(|&k| k as i128).sum();
    let s2: i128 = ks.iter().map(|&k| (k as i128) * (k as i128)).sum();
    let num = n * s2 - s * s;
    num as f64 / (n * (n - 1)) as f64 / (scale * scale)
}

#[test]
fn variance_keeps_its_digits_on_ill_conditioned_data_on_every_cpu_backend() {
    let e = common::engine();
    // f64: 1e8 + noise in steps of 2^-10 (exactly representable), lengths
    // around the block and leaf sizes and past the parallel split.
    for &n in &[2usize, 3, 1023, 1024, 1025, 16_385, 200_003, 1_000_000] {
        let ks = noise(n, 2048, n as u64);
        let xs: Vec<f64> = ks.iter().map(|&k| 1e8 + k as f64 / 1024.0).collect();
        let exact = exact_variance(&ks, 1024.0);
        // The textbook one-pass formula loses every digit here: the data
        // really are ill-conditioned.
        let (s, s2) = xs.iter().fold((0.0, 0.0), |(s, s2), x| (s + x, s2 + x * x));
        let naive = (s2 - s * s / n as f64) / (n - 1) as f64;
        if n >= 1000 {
            assert!(
                (naive - exact).abs() > 1e-3 * exact,
                "n = {n}: the naive formula was accurate ({naive} vs {exact})"
            );
        }
        for k in common::CPU {
            let v = e.query(&xs).on(k).no_fallback().variance().unwrap();
            assert!(
                (v - exact).abs() <= 1e-10 * exact,
                "{k:?}, n = {n}: variance {v}, exact {exact}"
            );
            let sd = e.query(&xs).on(k).no_fallback().std_dev().unwrap();
            assert!((sd - exact.sqrt()).abs() <= 1e-10 * exact.sqrt());
        }
    }
    // f32: 1e6 + noise in steps of 1/16 (24 significant bits), after a
    // map that the stage fuses and behind a filter that keeps all but the
    // extremes.
    let n = 300_001;
    let ks = noise(n, 64, 7);
    let xs: Vec<f32> = ks.iter().map(|&k| 1e6 + k as f32 / 16.0).collect();
    let kept: Vec<i64> = ks.iter().copied().filter(|k| k.abs() < 64).collect();
    let exact = exact_variance(&kept, 16.0);
    for k in common::CPU {
        let v = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .map(|x| x - 0.0)
            .filter(|x| x.gt(1e6 - 4.0) & x.lt(1e6 + 4.0))
            .variance()
            .unwrap();
        assert!(
            (v - exact).abs() <= 1e-9 * exact,
            "{k:?}: filtered f32 variance {v}, exact {exact}"
        );
    }
}

#[test]
fn variance_keeps_its_digits_when_a_blocks_first_value_is_an_outlier() {
    // `cpu-simd` sums each block about its first value: the worst case for
    // that shift is a first value far from the rest. Outliers of 1e8 at
    // every 1,024th position (where a sequential block starts) and at a few
    // others, the rest small noise, in f64 and f32.
    let e = common::engine();
    let n = 100_000;
    let mut ks = noise(n, 4096, 11);
    for (i, k) in ks.iter_mut().enumerate() {
        if i % 1024 == 0 || i % 7919 == 3 {
            *k = 100_000_000 * 1024;
        }
    }
    let exact = exact_variance(&ks, 1024.0);
    let xs: Vec<f64> = ks.iter().map(|&k| k as f64 / 1024.0).collect();
    for k in common::CPU {
        let v = e.query(&xs).on(k).no_fallback().variance().unwrap();
        assert!(
            (v - exact).abs() <= 1e-12 * exact,
            "{k:?}: variance {v}, exact {exact}"
        );
    }
    // f32: outliers of 2^20 among steps of 1/16 within ±4.
    let mut ks = noise(n, 64, 12);
    for (i, k) in ks.iter_mut().enumerate() {
        if i % 1024 == 0 {
            *k = 16 << 20;
        }
    }
    let exact = exact_variance(&ks, 16.0);
    let xs: Vec<f32> = ks.iter().map(|&k| k as f32 / 16.0).collect();
    for k in common::CPU {
        let v = e.query(&xs).on(k).no_fallback().variance().unwrap();
        assert!(
            (v - exact).abs() <= 1e-12 * exact,
            "{k:?}: f32 variance {v}, exact {exact}"
        );
    }
}

#[test]
fn variance_edge_cases_agree_on_every_cpu_backend() {
    let e = common::engine();
    for k in common::CPU {
        let q = |xs: &[f32]| e.query(xs).on(k).no_fallback().variance();
        assert_eq!(q(&[]), None, "{k:?}");
        assert_eq!(q(&[3.0]), None, "{k:?}");
        assert_eq!(q(&[1.0, 3.0]), Some(2.0), "{k:?}");
        assert_eq!(q(&[5.0; 3000]), Some(0.0), "{k:?}");
        let mut big = vec![1.0f32; 5000];
        big[4321] = f32::NAN;
        assert!(q(&big).unwrap().is_nan(), "{k:?}: a NaN element");
        big[4321] = f32::INFINITY;
        assert!(q(&big).unwrap().is_nan(), "{k:?}: an infinite element");
        // Integers are read as f64: u64 beyond 2^53 rounds, but the spread
        // of i64 extremes is still right to f64 precision.
        let ints = [i64::MIN, i64::MAX];
        let v = e.query(&ints).on(k).no_fallback().variance().unwrap();
        let want = (i64::MAX as f64 - i64::MIN as f64).powi(2) / 2.0;
        assert!((v - want).abs() <= 1e-12 * want, "{k:?}: {v} vs {want}");
        // A filter that keeps nothing or one element.
        let xs: Vec<u32> = (0..10_000).collect();
        let none = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .filter(|x| x.gt(20_000))
            .variance();
        assert_eq!(none, None, "{k:?}");
        // Squares past f64's range: an infinite variance, not NaN.
        let huge = [1e200f64, -1e200, 0.0];
        let v = e.query(&huge).on(k).no_fallback().variance().unwrap();
        assert_eq!(v, f64::INFINITY, "{k:?}");
        let one = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .filter(|x| x.eq(77))
            .std_dev();
        assert_eq!(one, None, "{k:?}");
    }
}

#[test]
fn aggregate_matches_the_separate_terminals_on_every_backend() {
    let e = common::engine();
    let xs: Vec<f32> = (0..100_003)
        .map(|i| ((i * 37) % 1001) as f32 * 0.5 - 200.0)
        .collect();
    let ys: Vec<i32> = (0..100_003).map(|i| (i * 7919) % 10_007 - 5000).collect();
    for k in common::CPU.into_iter().chain(common::devices(&e)) {
        let got = match e
            .query(&xs)
            .on(k)
            .no_fallback()
            .zip(&ys)
            .filter(|(x, _)| x.gt(-150.0))
            .fallible()
            .aggregate(|(x, y), a| {
                (
                    a.count(),
                    a.sum(y),
                    a.sum(y * y),
                    a.min(x),
                    a.max(y),
                    a.argmax(x),
                    a.mean(y),
                    a.any(y.eq(4999)),
                    a.all(x.ge(-150.0)),
                )
            }) {
            Ok(got) => got,
            // A device without 64-bit values (GL: the mean sums in f64).
            Err(err) if err.attempts().iter().any(|a| a.phase == Phase::Support) => {
                println!("{k:?} declined: {err}");
                continue;
            }
            Err(err) => panic!("{k:?}: {err}"),
        };
        let kept: Vec<(f32, i32)> = xs
            .iter()
            .copied()
            .zip(ys.iter().copied())
            .filter(|(x, _)| *x > -150.0)
            .collect();
        let n = kept.len();
        let sy = kept.iter().fold(0i32, |s, p| s.wrapping_add(p.1));
        let sy2 = kept.iter().fold(0i32, |s, p| s.wrapping_add(p.1 * p.1));
        let minx = kept.iter().map(|p| p.0).fold(f32::INFINITY, f32::min);
        let maxy = kept.iter().map(|p| p.1).max();
        let mx = kept.iter().map(|p| p.0).fold(f32::NEG_INFINITY, f32::max);
        let argmax = kept.iter().position(|p| p.0 == mx);
        assert_eq!(got.0, n as u64, "{k:?}");
        assert_eq!(got.1, sy, "{k:?}");
        assert_eq!(got.2, sy2, "{k:?}");
        assert_eq!(got.3, Some(minx), "{k:?}");
        assert_eq!(got.4, maxy, "{k:?}");
        assert_eq!(got.5, argmax, "{k:?}");
        let sy64: i64 = kept.iter().map(|p| p.1 as i64).sum();
        assert_eq!(got.6, Some(sy64 as f64 / n as f64), "{k:?}");
        assert!(got.7, "{k:?}");
        assert!(got.8, "{k:?}");
    }
}

#[test]
fn aggregates_share_identical_requests_and_an_empty_input_gives_identities() {
    let e = common::engine();
    let xs: Vec<u32> = vec![];
    let (n, s, m, v, mx) = e
        .query(&xs)
        .aggregate(|x, a| (a.count(), a.sum(x), a.mean(x), a.variance(x), a.max(x)));
    assert_eq!((n, s, m, v, mx), (0, 0, None, None, None));
    // Identical requests are one aggregate: count, sum and a second count.
    let plan = e
        .query(&[1u32, 2, 3])
        .explain()
        .aggregate(|x, a| (a.count(), a.sum(x), a.count(), a.sum(x)))
        .to_string();
    assert!(plan.contains("reduce count sum(v0)\n"), "{plan}");
    // A closure that asks for nothing still runs.
    let () = e.query(&[1u32, 2, 3]).aggregate(|_, _| ());
}

#[test]
fn devices_run_variance_where_they_have_f64() {
    let e = common::engine();
    let xs: Vec<f32> = (0..50_000).map(|i| (i % 100) as f32).collect();
    let exact = exact_variance(&(0..50_000).map(|i| i % 100).collect::<Vec<i64>>(), 1.0);
    for k in common::devices(&e) {
        // Moments in f64 per invocation, merged by Chan's formula over the
        // workgroup, the workgroups and the chunks; a device without f64
        // declines with the missing type.
        match e.query(&xs).on(k).no_fallback().fallible().variance() {
            Ok(v) => {
                let v = v.expect("a variance");
                assert!(
                    (v - exact).abs() <= 1e-12 * exact,
                    "{k:?}: {v} against {exact}"
                );
            }
            Err(err) => common::assert_declined(k, &err, "f64"),
        }
        // With the other aggregates of the same query.
        let (s, n, v) = e
            .query(&xs)
            .on(k)
            .aggregate(|x, a| (a.sum(x), a.count(), a.std_dev(x)));
        assert_eq!((s, n), (xs.iter().sum::<f32>(), 50_000));
        assert!((v.unwrap() - exact.sqrt()).abs() <= 1e-12 * exact.sqrt());
    }
    let (v, m) = e.query(&xs).aggregate(|x, a| (a.variance(x), a.mean(x)));
    assert!((v.unwrap() - exact).abs() <= 1e-12 * exact);
    assert_eq!(m, Some(49.5));
}

/// The histogram as a plain loop: the same formula, in `f64`, or in `f32`
/// for an `f32` column (`narrow`).
fn histogram_ref(
    xs: &[f64],
    bins: usize,
    lo: f64,
    hi: f64,
    narrow: bool,
) -> (Vec<u64>, u64, u64, u64) {
    let mut counts = vec![0u64; bins];
    let (mut below, mut above, mut nan) = (0, 0, 0);
    let scale = bins as f64 / (hi - lo);
    for &x in xs {
        let (b, over) = if narrow {
            let (x, lo, hi, scale) = (x as f32, lo as f32, hi as f32, scale as f32);
            (((x - lo) * scale).floor() as usize, (x < lo, x >= hi))
        } else {
            (((x - lo) * scale).floor() as usize, (x < lo, x >= hi))
        };
        if x.is_nan() {
            nan += 1;
        } else if over.0 {
            below += 1;
        } else if over.1 {
            above += 1;
        } else {
            counts[b.min(bins - 1)] += 1;
        }
    }
    (counts, below, above, nan)
}

#[test]
fn histograms_match_a_plain_loop_on_every_cpu_backend() {
    let e = common::engine();
    let kinds = common::CPU;
    for &n in &[0usize, 1, 1023, 1025, 16_385, 300_001] {
        let mut xs: Vec<f32> = noise(n, 1000, 3 + n as u64)
            .iter()
            .map(|&k| k as f32 * 0.013)
            .collect();
        if n > 10 {
            xs[3] = f32::NAN;
            xs[5] = f32::INFINITY;
            xs[7] = f32::NEG_INFINITY;
            xs[9] = 10.0; // exactly hi: above
            xs[10] = -10.0; // exactly lo: the first bin
        }
        let wide: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
        for &(bins, lo, hi) in &[(1usize, -10.0, 10.0), (256, -10.0, 10.0), (7, -3.3, 2.9)] {
            let (counts, below, above, nan) = histogram_ref(&wide, bins, lo, hi, true);
            for k in kinds {
                let h = e.query(&xs).on(k).no_fallback().histogram(bins, lo, hi);
                assert_eq!(h.counts, counts, "{k:?} n={n} bins={bins}");
                assert_eq!(
                    (h.below, h.above, h.nan),
                    (below, above, nan),
                    "{k:?} n={n}"
                );
                assert_eq!(h.total(), n as u64);
            }
        }
        // An f64 column bins in f64.
        let (counts, below, above, nan) = histogram_ref(&wide, 13, -2.5, 7.25, false);
        for k in kinds {
            let h = e.query(&wide).on(k).no_fallback().histogram(13, -2.5, 7.25);
            assert_eq!(
                (h.counts, h.below, h.above, h.nan),
                (counts.clone(), below, above, nan)
            );
        }
        // After a filter, and on integers.
        let ints: Vec<i64> = noise(n, 1_000_000, n as u64);
        let kept: Vec<f64> = ints
            .iter()
            .filter(|&&x| x % 3 != 0)
            .map(|&x| x as f64)
            .collect();
        let want = histogram_ref(&kept, 100, -500_000.0, 500_000.0, false);
        for k in kinds {
            let h = e
                .query(&ints)
                .on(k)
                .no_fallback()
                .filter(|x| (x % 3).ne(0))
                .histogram(100, -500_000.0, 500_000.0);
            assert_eq!(
                (h.counts, h.below, h.above, h.nan),
                want.clone(),
                "{k:?} n={n}"
            );
        }
    }
}

#[test]
fn devices_count_histograms_and_decline_too_many_bins() {
    // tests/device_relational.rs compares device histograms in detail.
    let e = common::engine();
    let xs: Vec<u32> = (0..10_000).collect();
    for k in common::devices(&e) {
        // A `u32` key's bin is computed in f64 (exact past 2^24); a device
        // without f64 (GL) declines with the missing type.
        match e
            .query(&xs)
            .on(k)
            .no_fallback()
            .fallible()
            .histogram(10, 0.0, 10_000.0)
        {
            Ok(h) => assert_eq!(h.counts, vec![1000; 10], "{k:?}"),
            Err(err) => common::assert_declined(k, &err, "f64"),
        }
        let err = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .fallible()
            .histogram(5000, 0.0, 10_000.0)
            .expect_err("a device counted 5003 keys");
        common::assert_declined(k, &err, "at most 4096 keys");
    }
    let h = e.query(&xs).histogram(10, 0.0, 10_000.0);
    assert_eq!(h.counts, vec![1000; 10]);
    let plan = e
        .query(&xs)
        .explain()
        .histogram(10, 0.0, 10_000.0)
        .to_string();
    assert!(plan.contains("count_by_key"), "{plan}");
}

#[test]
#[should_panic(expected = "a histogram needs 1 to")]
fn a_histogram_without_bins_panics_with_a_message() {
    // The process-wide engine without the environment's cache directory.
    let _ = computeq::set_engine(computeq::Engine::default());
    let _ = [1.0f32].compute().histogram(0, 0.0, 1.0);
}

#[test]
#[should_panic(expected = "finite bounds with lo < hi")]
fn a_histogram_with_empty_bounds_panics_with_a_message() {
    // The process-wide engine without the environment's cache directory.
    let _ = computeq::set_engine(computeq::Engine::default());
    let _ = [1.0f32].compute().histogram(4, 1.0, 1.0);
}
