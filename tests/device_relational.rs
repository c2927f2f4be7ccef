//! The relational operators on the device backends: the radix sort of the
//! kernel IR on wgpu (lavapipe or llvmpipe here) and on the PTX writer's
//! kernels run by the test interpreter as the `cuda` backend, against
//! `cpu-scalar`'s stable comparison sort, exactly (every NaN compared as
//! one value). Lengths straddle the workgroup, the scatter tile (workgroup
//! × 2 positions) and the spans of several workgroups; keys have many
//! duplicates, NaN/±0/±inf and extreme integers; payload sorts check
//! stability (ties keep the input order) and "then by" keys; a filter
//! before the sort; top-k by radix select, ties cut in input order; the
//! early-exit terminals (and that `find` stops reading); groups of one
//! and several keys, in key and first-seen order, with every per-group
//! aggregate; histograms; counts without 64-bit integers; joins (inner,
//! semi, anti, one key and two); the variance; faults in each falling
//! back.

mod common;
#[path = "support/faults.rs"]
mod faults;
mod ptx_interp;

use common::{sort_floats as floats, sort_ints as ints};
use computeq::plumbing::backends::ptx::cuda_caps;
use computeq::plumbing::codegen::Caps;
use computeq::prelude::*;
use computeq::Engine;
use ptx_interp::backend::InterpBackend;
use std::sync::Arc;

/// The interpreter as the `cuda` backend (behind the CUDA backend's fault
/// layer with feature `cuda`), lowered for small workgroups so
/// that short inputs span several workgroups and tiles.
fn interp_engine() -> (Engine, Arc<InterpBackend>) {
    interp_engine_chunked(2000)
}

/// [`interp_engine`] running chunks of `chunk` positions.
fn interp_engine_chunked(chunk: usize) -> (Engine, Arc<InterpBackend>) {
    let caps = Caps {
        workgroup_size: 64,
        items_per_thread: 2,
        max_groups: 8,
        ..cuda_caps()
    };
    let b = Arc::new(InterpBackend::new(caps, chunk).with_ptxas(ptx_interp::ptxas::find()));
    (common::engine().with_backend(b.clone()), b)
}

/// Every device here: wgpu and CUDA on the default engine when they can
/// run (skipped with the reason otherwise), and the interpreter. wgpu
/// trusts infinities and NaNs (`Config::wgpu_trust_non_finite`): these
/// tests check the device kernels' own rules for them (NaN last, `-0.0`
/// before `+0.0`) on the adapter at hand, where the default guard would
/// discard any run whose arithmetic meets one (tests/wgpu_backend.rs).
fn devices() -> Vec<(Engine, BackendKind)> {
    // The engine that lists the devices runs the first: every engine
    // opens its own devices and compiles its own pipelines (seconds each
    // on GL's llvmpipe).
    let trusting = || {
        Engine::with_config(computeq::Config {
            wgpu_trust_non_finite: true,
            ..computeq::Config::default()
        })
    };
    let e = trusting();
    let real = common::devices(&e);
    let mut e = Some(e);
    let mut out: Vec<(Engine, BackendKind)> = real
        .into_iter()
        .map(|k| (e.take().unwrap_or_else(trusting), k))
        .collect();
    out.push((interp_engine().0, BackendKind::Cuda));
    out
}

/// Lengths around one workgroup of the interpreter's lowering (64), its
/// tile (128), a span of several tiles and several workgroups, and
/// wgpu's workgroup (256) and tile (512).
fn lengths() -> Vec<usize> {
    vec![
        0, 1, 2, 63, 64, 65, 127, 128, 129, 257, 511, 512, 513, 1500, 4099,
    ]
}

/// Whether device `k` of `e` has 64-bit integers (which the sums and
/// counts of groups and histograms, and wide sort keys, need); a device
/// without them (wgpu on GL) must decline such plans with the missing
/// feature, and the calling test skips it, saying so.
fn wide_ints(e: &Engine, k: BackendKind, test: &str) -> bool {
    let one = vec![1i32];
    let run = e
        .query(&one)
        .on(k)
        .no_fallback()
        .fallible()
        .map(|x| x.cast::<i64>())
        .sum();
    match run {
        Ok(s) => {
            assert_eq!(s, 1i64);
            true
        }
        Err(err) => {
            common::assert_declined(k, &err, "SHADER_INT64");
            eprintln!("{test}: {k:?} skipped, the device has no 64-bit integers");
            false
        }
    }
}

/// Bits of a float, every NaN one value.
fn canon32(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
        .collect()
}

fn canon64(v: &[f64]) -> Vec<u64> {
    v.iter()
        .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
        .collect()
}

/// Runs `f` on the device `k` of `e` (no fallback) and on `cpu-scalar`,
/// and checks that the device ran it with its radix sort.
fn both<T>(
    e: &Engine,
    k: BackendKind,
    what: &str,
    f: impl Fn(&Engine, BackendKind) -> (T, computeq::ExecutionMetrics),
) -> (T, T) {
    both_with(e, k, what, "device lsd-radix", f)
}

/// [`both`], the device's algorithm named starting with `algorithm`.
fn both_with<T>(
    e: &Engine,
    k: BackendKind,
    what: &str,
    algorithm: &str,
    f: impl Fn(&Engine, BackendKind) -> (T, computeq::ExecutionMetrics),
) -> (T, T) {
    let (dev, m) = f(e, k);
    let (cpu, _) = f(e, BackendKind::CpuScalar);
    let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
    assert!(alg.starts_with(algorithm), "{k:?} {what}: {m}");
    (dev, cpu)
}

#[test]
fn float_sorts_on_the_devices_match_the_cpu() {
    for (e, k) in devices() {
        for n in lengths() {
            let xs = floats(n, n as u64 + 1);
            let ctx = format!("{k:?} n={n}");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .sort()
                    .collect::<Vec<_>>()
            });
            assert_eq!(canon32(&d), canon32(&c), "{ctx} sort");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .map(|x| x * 2.0 - 1.0)
                    .sort_desc()
                    .collect::<Vec<_>>()
            });
            assert_eq!(canon32(&d), canon32(&c), "{ctx} map then sort_desc");
        }
    }
}

/// A tile of 1024 rows (512-invocation workgroups) is too large for the
/// packed 2-bit ranking: the scatter ranks it by one-bit splits, checked
/// here on the interpreter.
#[test]
fn a_tile_too_large_to_pack_ranks_by_one_bit_splits() {
    let caps = Caps {
        workgroup_size: 512,
        items_per_thread: 2,
        max_groups: 4,
        ..cuda_caps()
    };
    let b = Arc::new(InterpBackend::new(caps, 1 << 20).with_ptxas(ptx_interp::ptxas::find()));
    let e = common::engine().with_backend(b);
    let k = BackendKind::Cuda;
    for n in [1, 1023, 1025, 2600] {
        let xs = floats(n, n as u64);
        let keys: Vec<i32> = common::lcg(n, 3).iter().map(|&r| (r % 7) as i32).collect();
        let ids: Vec<u32> = (0..n as u32).collect();
        let ctx = format!("n={n}");
        let (d, c) = both(&e, k, &ctx, |e, k| {
            e.query(&xs)
                .on(k)
                .no_fallback()
                .with_metrics()
                .sort_desc()
                .collect::<Vec<_>>()
        });
        assert_eq!(canon32(&d), canon32(&c), "{ctx} sort_desc");
        let (d, c) = both(&e, k, &ctx, |e, k| {
            e.query(&keys)
                .on(k)
                .no_fallback()
                .with_metrics()
                .zip(&ids)
                .sort_by_key(|(x, _)| x)
                .collect::<Vec<_>>()
        });
        assert_eq!(d, c, "{ctx} ties in input order");
    }
}

#[test]
fn integer_and_wide_sorts_on_the_devices_match_the_cpu() {
    for (e, k) in devices() {
        for n in lengths() {
            let xs = ints(n, 7 * n as u64 + 3);
            let x32: Vec<i32> = xs.iter().map(|&x| x as i32).collect();
            let u32s: Vec<u32> = xs.iter().map(|&x| x as u32).collect();
            let ctx = format!("{k:?} n={n}");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&x32)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .sort()
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} i32");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&u32s)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .sort_desc()
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} u32 desc");
            // 64-bit keys where the device has 64-bit integers; a device
            // without them declines with the missing feature.
            let run = e
                .query(&xs)
                .on(k)
                .no_fallback()
                .fallible()
                .sort()
                .collect::<Vec<_>>();
            match run {
                Ok(d) => {
                    let mut w = xs.clone();
                    w.sort();
                    assert_eq!(d, w, "{ctx} i64");
                    let f64s: Vec<f64> = xs.iter().map(|&x| x as f64 / 3.0).collect();
                    let (d, c) = both(&e, k, &ctx, |e, k| {
                        e.query(&f64s)
                            .on(k)
                            .no_fallback()
                            .with_metrics()
                            .sort_desc()
                            .collect::<Vec<_>>()
                    });
                    assert_eq!(canon64(&d), canon64(&c), "{ctx} f64 desc");
                }
                Err(err) => common::assert_declined(k, &err, "SHADER_INT64"),
            }
        }
    }
}

/// A digit that every row shares moves no row: its scatter copies the
/// span instead of ranking it. Keys below 2^8 (three constant digits of
/// four), all equal (four of four), and the same with a payload and after
/// a filter, sort like the CPU on every device; on the interpreter the
/// narrow keys cost well under half the instructions of keys spread over
/// all four digits.
#[test]
fn constant_digits_are_copied_not_ranked() {
    let n = 4099;
    let spread: Vec<u32> = ints(n, 91).iter().map(|&x| x as u32).collect();
    let narrow: Vec<u32> = spread.iter().map(|&x| x % 251).collect();
    let equal = vec![7u32; n];
    let payload: Vec<u32> = (0..n as u32).collect();
    // Two engines (each opens its devices and compiles its pipelines):
    // the real devices on one, the counting interpreter.
    let real = common::engine();
    let (interp, b) = interp_engine();
    let mut all: Vec<(&Engine, BackendKind)> = common::devices(&real)
        .into_iter()
        .map(|k| (&real, k))
        .collect();
    all.push((&interp, BackendKind::Cuda));
    for (e, k) in all {
        for (name, xs) in [("narrow", &narrow), ("equal", &equal), ("spread", &spread)] {
            let ctx = format!("{k:?} {name}");
            let (d, c) = both(e, k, &ctx, |e, k| {
                e.query(xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .sort()
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} sort");
            let (d, c) = both(e, k, &ctx, |e, k| {
                e.query(xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .zip(&payload)
                    .filter(|(x, p)| (x & 1u32).eq(0u32) | p.lt(100u32))
                    .sort_by_key(|(x, _)| x.desc())
                    .map(|(_, p)| p)
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} sort_by_key after a filter");
        }
    }
    let cost = |xs: &Vec<u32>| {
        let before = *b.lane_instructions.lock();
        let got = interp
            .query(xs)
            .on(BackendKind::Cuda)
            .no_fallback()
            .sort()
            .collect::<Vec<_>>();
        let mut want = xs.clone();
        want.sort();
        assert_eq!(got, want);
        *b.lane_instructions.lock() - before
    };
    let (narrow, spread) = (cost(&narrow), cost(&spread));
    assert!(
        narrow * 2 < spread,
        "constant digits ranked: {narrow} lane-instructions for keys below 2^8, {spread} for keys over all digits"
    );
}

#[test]
fn sort_by_key_on_the_devices_is_stable_and_orders_then_by() {
    for (e, k) in devices() {
        if !wide_ints(&e, k, "sort_by_key") {
            continue;
        }
        for n in lengths() {
            // Few distinct keys: long runs of ties whose order must hold.
            let keys: Vec<i32> = common::lcg(n, 11)
                .iter()
                .map(|&r| (r % 5) as i32 - 2)
                .collect();
            let second = floats(n, 5);
            let ids: Vec<u32> = (0..n as u32).collect();
            let flags: Vec<bool> = common::lcg(n, 3).iter().map(|r| r % 3 == 0).collect();
            let ctx = format!("{k:?} n={n}");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&keys)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .zip(&ids)
                    .sort_by_key(|(x, _)| x.desc())
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} by key desc");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&keys)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .zip(&second)
                    .zip(&ids)
                    .sort_by_key(|((x, y), _)| (x, y.desc()))
                    .map(|(_, i)| i)
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} then by");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&second)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .argsort()
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} argsort");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&flags)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .zip(&ids)
                    .sort_by_key(|(f, _)| f)
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} bool key");
        }
    }
}

#[test]
fn the_query_goes_on_after_a_device_sort() {
    for (e, k) in devices() {
        let xs: Vec<i32> = ints(3000, 9).iter().map(|x| (x % 1000) as i32).collect();
        let q = || e.query(&xs).on(k).no_fallback();
        let got = q().sort().skip(10).take(5).collect::<Vec<_>>();
        let mut w = xs.clone();
        w.sort();
        assert_eq!(got, w[10..15], "{k:?} skip/take after a sort");
        let got = q()
            .sort_by_key(|x| x.desc())
            .map(|x| x * 2)
            .scan_sum()
            .collect::<Vec<_>>();
        let mut acc = 0i32;
        let want: Vec<i32> = w
            .iter()
            .rev()
            .map(|x| {
                acc = acc.wrapping_add(x * 2);
                acc
            })
            .collect();
        assert_eq!(got, want, "{k:?} scan after a sort");
    }
}

#[test]
fn a_filter_before_a_device_sort_sorts_the_survivors() {
    for (e, k) in devices() {
        for n in lengths() {
            let xs = floats(n, 3 * n as u64 + 1);
            let ids: Vec<u32> = (0..n as u32).collect();
            let ctx = format!("{k:?} n={n}");
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .filter(|x| x.gt(0.0))
                    .sort_desc()
                    .collect::<Vec<_>>()
            });
            assert_eq!(canon32(&d), canon32(&c), "{ctx} filter then sort_desc");
            // Rows carried: the survivors' ids in key order, ties in input
            // order.
            let (d, c) = both(&e, k, &ctx, |e, k| {
                e.query(&xs)
                    .on(k)
                    .no_fallback()
                    .with_metrics()
                    .zip(&ids)
                    .filter(|(x, _)| x.lt(3.0))
                    .sort_by_key(|(x, _)| x)
                    .map(|(_, i)| i)
                    .collect::<Vec<_>>()
            });
            assert_eq!(d, c, "{ctx} filter then sort_by_key");
        }
    }
}

/// A query of f32 rows on one backend, with its metrics.
type FloatRun<'a> = dyn Fn(&Engine, BackendKind) -> (Vec<f32>, ExecutionMetrics) + 'a;

/// A group's argmin, argmax, first and last.
type Positional = (Option<usize>, Option<usize>, Option<f32>, Option<f32>);

/// Limits around the ends: none, one, a few, a tile, all but one, all,
/// more than all (a few of them for the longest input).
fn limits(n: usize) -> Vec<usize> {
    let mut ks = if n > 2000 {
        vec![1, 130]
    } else {
        vec![0, 1, 5, 130, n.saturating_sub(1), n, n + 7]
    };
    ks.sort();
    ks.dedup();
    ks
}

#[test]
fn top_k_on_the_devices_selects_then_sorts_like_the_cpu() {
    for (e, k) in devices() {
        for n in [0, 1, 65, 129, 1500, 4099] {
            let xs = floats(n, 7 * n as u64 + 3);
            // Few distinct keys: the k-th row sits in a long run of ties,
            // which must be cut in input order.
            let few: Vec<i32> = common::lcg(n, 17)
                .iter()
                .map(|&r| (r % 4) as i32 - 1)
                .collect();
            let wide: Vec<i64> = ints(n, 23).iter().map(|&x| x.wrapping_mul(3)).collect();
            let ids: Vec<u32> = (0..n as u32).collect();
            for lim in limits(n) {
                let ctx = format!("{k:?} n={n} k={lim}");
                let run = |f: &FloatRun<'_>| both_with(&e, k, &ctx, "device radix select", f);
                let (d, c) = run(&|e, k| {
                    e.query(&xs)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .top_k(lim)
                        .collect::<Vec<_>>()
                });
                assert_eq!(canon32(&d), canon32(&c), "{ctx} top_k");
                let (d, c) = run(&|e, k| {
                    e.query(&xs)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .filter(|x| x.lt(1.0))
                        .bottom_k(lim)
                        .collect::<Vec<_>>()
                });
                assert_eq!(canon32(&d), canon32(&c), "{ctx} filter then bottom_k");
                let (d, c) = both_with(&e, k, &ctx, "device radix select", |e, k| {
                    e.query(&few)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .zip(&ids)
                        .top_k_by_key(lim, |(x, _)| x)
                        .map(|(_, i)| i)
                        .collect::<Vec<_>>()
                });
                assert_eq!(d, c, "{ctx} ties cut in input order");
                let (d, c) = both_with(&e, k, &ctx, "device radix select", |e, k| {
                    e.query(&few)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .zip(&xs)
                        .zip(&ids)
                        .bottom_k_by_key(lim, |((x, y), _)| (x, y.desc()))
                        .map(|(_, i)| i)
                        .collect::<Vec<_>>()
                });
                assert_eq!(d, c, "{ctx} then by");
                // 64-bit keys where the device has 64-bit integers (the
                // sort test checks the decline elsewhere).
                let run = e
                    .query(&wide)
                    .on(k)
                    .no_fallback()
                    .fallible()
                    .sort()
                    .take(lim)
                    .collect::<Vec<_>>();
                if run.is_ok() {
                    let (d, c) = both_with(&e, k, &ctx, "device radix select", |e, k| {
                        e.query(&wide)
                            .on(k)
                            .no_fallback()
                            .with_metrics()
                            .sort()
                            .take(lim)
                            .collect::<Vec<_>>()
                    });
                    assert_eq!(d, c, "{ctx} i64 sort then take");
                }
            }
        }
    }
}

#[test]
fn early_exit_terminals_on_the_devices_match_std() {
    for (e, k) in devices() {
        for n in [0, 1, 63, 64, 65, 129, 1500, 4099] {
            let xs: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 10_007).collect();
            let fs: Vec<f32> = floats(n, n as u64 + 9);
            let q = || e.query(&xs).on(k).no_fallback();
            let ctx = format!("{k:?} n={n}");
            assert_eq!(q().first(), xs.first().copied(), "{ctx} first");
            assert_eq!(q().last(), xs.last().copied(), "{ctx} last");
            let got = e.query(&fs).on(k).no_fallback().map(|x| x * 2.0).first();
            assert_eq!(
                got.map(f32::to_bits),
                fs.first().map(|x| (x * 2.0).to_bits()),
                "{ctx} f32 first"
            );
            for i in [0, 1, n / 3, n.saturating_sub(1), n, n + 5] {
                assert_eq!(q().nth(i), xs.get(i).copied(), "{ctx} nth({i})");
            }
            let mut targets = vec![-1];
            if n > 0 {
                targets.extend([xs[0], xs[n / 2], xs[n - 1]]);
            }
            for t in targets {
                assert_eq!(
                    q().map(|x| x * 2).find(|x| x.ge(t * 2)),
                    xs.iter().map(|x| x * 2).find(|&x| x >= t * 2),
                    "{ctx} find >= {t}"
                );
                assert_eq!(
                    q().filter(|x| x.ne(t)).last(),
                    xs.iter().copied().rev().find(|&x| x != t),
                    "{ctx} last != {t}"
                );
                // The position is a 64-bit index: where the device has
                // no 64-bit integers it declines (and says so).
                match q().fallible().position(|x| x.eq(t)) {
                    Ok(p) => assert_eq!(p, xs.iter().position(|&x| x == t), "{ctx} position"),
                    Err(err) => common::assert_declined(k, &err, "SHADER_INT64"),
                }
            }
        }
    }
}

/// `find` on the device stops reading past the answer twice over: the
/// kernel reads in tiles and skips every tile past the earliest survivor
/// any workgroup has found (on the interpreter, in one chunk, the answer
/// at the start costs a small share of the instructions it costs at the
/// end), and the host launches no chunk after one that settles the
/// result (the metrics count the positions skipped).
#[test]
fn a_device_find_stops_reading_past_the_answer() {
    let n = 1 << 16;
    let xs: Vec<i32> = (0..n as i32).collect();
    // One chunk.
    let (e, b) = interp_engine_chunked(n);
    let cost = |t: i32| {
        let before = *b.lane_instructions.lock();
        let (got, m) = e
            .query(&xs)
            .on(BackendKind::Cuda)
            .no_fallback()
            .with_metrics()
            .find(|x| x.ge(t));
        assert_eq!(got, Some(t));
        assert_eq!(m.elements_skipped, 0, "{m}");
        *b.lane_instructions.lock() - before
    };
    let early = cost(3);
    let late = cost(n as i32 - 2);
    assert!(
        early * 4 < late,
        "in-kernel early exit: {early} lane-instructions with the answer first, {late} with it last"
    );
    // Every device finds the answer and reads a sum whole; the
    // interpreter, in chunks of 2000, launches no chunk after the answer's
    // (a real device runs these 2^16 positions as one chunk).
    let chunked = interp_engine().0;
    let mut all: Vec<(Engine, BackendKind, bool)> = common::devices(&common::engine())
        .into_iter()
        .map(|k| (common::engine(), k, false))
        .collect();
    all.push((chunked, BackendKind::Cuda, true));
    for (e, k, chunked) in all {
        let skipped = if chunked { (n - 2000) as u64 } else { 0 };
        let (got, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .find(|x| x.ge(3));
        assert_eq!(got, Some(3), "{k:?}");
        assert_eq!(m.elements_skipped, skipped, "{k:?}: {m}");
        let (any, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .any(|x| x.eq(5));
        assert!(any, "{k:?}");
        assert_eq!(m.elements_skipped, skipped, "{k:?}: {m}");
        // A count of survivors reads every chunk.
        let (count, m) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .with_metrics()
            .filter(|x| x.lt(7))
            .count();
        assert_eq!(count, 7, "{k:?}");
        assert_eq!(m.elements_skipped, 0, "{k:?}: {m}");
    }
}

/// The whole-stream variance on the devices: Welford/Chan moments per
/// invocation, merged over the workgroup, the workgroups and the chunks
/// (the interpreter runs chunks of 2000), within 1e-10 relative of
/// `cpu-scalar` (the merges' order differs: on 1e8 + noise the two land
/// ~1e-11 apart), and within 1e-9 of the exact two-pass variance on that
/// ill-conditioned data.
#[test]
fn variance_on_the_devices_matches_the_cpu() {
    for (e, k) in devices() {
        for n in [0, 1, 2, 65, 1500, 4099, 9000] {
            let xs: Vec<f64> = common::lcg(n, 31)
                .iter()
                .map(|&r| 1e8 + (r % 1000) as f64 * 0.25)
                .collect();
            let fs: Vec<f32> = common::lcg(n, 7)
                .iter()
                .map(|&r| (r % 997) as f32 - 400.0)
                .collect();
            let close = |d: Option<f64>, c: Option<f64>, what: &str| match (d, c) {
                (Some(d), Some(c)) => assert!(
                    (d - c).abs() <= 1e-10 * c.abs().max(1.0),
                    "{k:?} n={n} {what}: {d} against {c}"
                ),
                (d, c) => assert_eq!(d, c, "{k:?} n={n} {what}"),
            };
            // f64 needs the device's f64 (GL declines: then skip).
            let Ok(d) = e.query(&xs).on(k).no_fallback().fallible().variance() else {
                continue;
            };
            let c = e.query(&xs).on(BackendKind::CpuScalar).variance();
            close(d, c, "variance of 1e8 + noise");
            if n > 1 {
                let m = xs.iter().sum::<f64>() / n as f64;
                let exact = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
                let d = d.expect("a variance");
                assert!(
                    (d - exact).abs() <= 1e-9 * exact,
                    "{k:?} n={n}: {d} against {exact}"
                );
            }
            let q = |on: BackendKind| {
                e.query(&fs)
                    .on(on)
                    .no_fallback()
                    .filter(|x| x.gt(-100.0))
                    .map(|x| x * 0.5)
                    .std_dev()
            };
            close(q(k), q(BackendKind::CpuScalar), "filter, map, std_dev");
            let agg = |on: BackendKind| {
                e.query(&fs)
                    .on(on)
                    .no_fallback()
                    .aggregate(|x, a| (a.variance(x), a.sum(x), a.count()))
            };
            let (dv, ds, dc) = agg(k);
            let (cv, cs, cc) = agg(BackendKind::CpuScalar);
            close(dv, cv, "variance in an aggregate");
            assert_eq!((ds, dc), (cs, cc), "{k:?} n={n}");
        }
    }
}

/// A sort of a column already on the device, its result kept there: no
/// byte crosses to or from the host, and the metrics say so.
#[test]
fn a_device_resident_column_sorts_on_the_device() {
    let xs = floats(3000, 17);
    let want = common::engine()
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .sort_desc()
        .collect::<Vec<_>>();
    for k in common::devices(&common::engine()) {
        let e = common::engine();
        let (dev, _) = e
            .query(&xs)
            .on(k)
            .no_fallback()
            .map(|x| x)
            .collect_on_device()
            .expect("an upload");
        assert_eq!(dev.device(), Some(k));
        let (sorted, m) = e
            .query(&dev)
            .on(k)
            .no_fallback()
            .sort_desc()
            .collect_on_device()
            .expect("a sort on the device");
        assert_eq!(m.backend, k);
        assert!(sorted.is_resident(), "{m}");
        assert_eq!(m.bytes_uploaded, 0, "{m}");
        assert_eq!(m.bytes_downloaded, 0, "{m}");
        assert!(m.bytes_resident > 0, "{m}");
        assert_eq!(canon32(&sorted.to_vec().unwrap()), canon32(&want), "{k}");
    }
}

/// A join of columns resident on the device, its result kept there: no
/// byte goes up, and only the row counts come down (an inner join's
/// sizing read and the survivor count).
#[test]
fn a_join_of_resident_columns_stays_on_the_device() {
    let pk: Vec<u32> = common::lcg(3000, 1)
        .iter()
        .map(|&r| (r % 700) as u32)
        .collect();
    let pv: Vec<u32> = (0..3000).collect();
    let bk: Vec<u32> = common::lcg(500, 2)
        .iter()
        .map(|&r| (r % 900) as u32)
        .collect();
    let bv: Vec<u32> = (0..500).map(|j| j * 3).collect();
    let want: Vec<(u32, u32)> = common::engine()
        .query(&pk)
        .on(BackendKind::CpuScalar)
        .zip(&pv)
        .join(common::engine().query(&bk).zip(&bv), |(k, _)| k, |(k, _)| k)
        .map(|((_, v), (_, w))| (v, w))
        .collect();
    for k in common::devices(&common::engine()) {
        let e = common::engine();
        if !wide_ints(&e, k, "a_join_of_resident_columns_stays_on_the_device") {
            continue;
        }
        let up = |v: &Vec<u32>| {
            e.query(v)
                .on(k)
                .no_fallback()
                .map(|x| x)
                .collect_on_device()
                .expect("an upload")
                .0
        };
        let (dpk, dpv, dbk, dbv) = (up(&pk), up(&pv), up(&bk), up(&bv));
        let ((v, w), m) = {
            let q = || {
                e.query(&dpk).on(k).no_fallback().zip(&dpv).join(
                    e.query(&dbk).zip(&dbv),
                    |(k, _)| k,
                    |(k, _)| k,
                )
            };
            let (v, m) = q()
                .map(|((_, v), _)| v)
                .collect_on_device()
                .expect("a join on the device");
            let (w, _) = q()
                .map(|(_, (_, w))| w)
                .collect_on_device()
                .expect("a join on the device");
            ((v, w), m)
        };
        assert_eq!(m.backend, k);
        assert!(
            m.algorithm
                .is_some_and(|a| a.to_string().starts_with("device join")),
            "{m}"
        );
        assert!(v.is_resident() && w.is_resident(), "{m}");
        assert_eq!(m.bytes_uploaded, 0, "{m}");
        assert!(m.bytes_downloaded <= 16, "only row counts come down: {m}");
        let got: Vec<(u32, u32)> = v
            .to_vec()
            .unwrap()
            .into_iter()
            .zip(w.to_vec().unwrap())
            .collect();
        assert_eq!(got, want, "{k}");
    }
}

/// Every injectable fault of the devices, during a sort's many dispatches,
/// falls back to the CPU with the right rows and records the failed
/// attempt.
#[test]
fn faults_in_the_device_relational_kernels_fall_back_to_the_cpu() {
    let xs = floats(1500, 23);
    let ids: Vec<u32> = (0..xs.len() as u32).collect();
    let want = common::engine()
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .zip(&ids)
        .sort_by_key(|(x, _)| x.desc())
        .collect::<Vec<_>>();
    let want: (Vec<f32>, Vec<u32>) = want.into_iter().unzip();
    let probe: Vec<u32> = ids.iter().map(|i| i % 97).collect();
    let build: Vec<u32> = (0..300u32).map(|j| j * 7 % 131).collect();
    let check = |e: &Engine, k: BackendKind, name: &str| {
        let (got, m) = e
            .query(&xs)
            .on(k)
            .with_metrics()
            .zip(&ids)
            .sort_by_key(|(x, _)| x.desc())
            .collect::<Vec<_>>();
        let (g, w): (Vec<f32>, Vec<u32>) = got.into_iter().unzip();
        assert!(
            canon32(&g) == canon32(&want.0) && w == want.1,
            "{k:?} {name}: wrong rows"
        );
        assert_ne!(m.backend, k, "{k:?} {name} did not fire");
        assert!(
            m.attempts.iter().any(|a| a.backend == k),
            "{k:?} {name}: no failed attempt recorded: {m}"
        );
        // The selection, the groups and the early exit fall back too.
        let fell_back = |m: &ExecutionMetrics, what: &str| {
            assert_ne!(m.backend, k, "{k:?} {name} {what} did not fire");
        };
        let (top, m) = e
            .query(&ids)
            .on(k)
            .with_metrics()
            .zip(&xs)
            .top_k_by_key(37, |(_, x)| x)
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        fell_back(&m, "top_k");
        assert_eq!(top.len(), 37, "{k:?} {name}");
        let want_top = e
            .query(&ids)
            .on(BackendKind::CpuScalar)
            .zip(&xs)
            .top_k_by_key(37, |(_, x)| x)
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        assert_eq!(top, want_top, "{k:?} {name} top_k");
        let (g, m) = e
            .query(&ids)
            .on(k)
            .zip(&xs)
            .group_by(|(i, _)| i % 13)
            .with_metrics()
            .count();
        fell_back(&m, "group_by");
        assert_eq!(g.keys, (0..13).collect::<Vec<u32>>(), "{k:?} {name}");
        let (f, m) = e.query(&ids).on(k).with_metrics().find(|i| i.gt(700));
        fell_back(&m, "find");
        assert_eq!(f, Some(701), "{k:?} {name}");
        // A join: the build side's sort, the probe, the sizing read and
        // the emit all run under the fault.
        let join = |on: BackendKind| {
            e.query(&probe)
                .on(on)
                .with_metrics()
                .zip(&ids)
                .join(e.query(&build), |(x, _)| x, |y| y)
                .collect::<Vec<_>>()
        };
        let (j, m) = join(k);
        fell_back(&m, "join");
        assert_eq!(j, join(BackendKind::CpuScalar).0, "{k:?} {name} join");
        let (s, m) = e
            .query(&probe)
            .on(k)
            .with_metrics()
            .semi_join(e.query(&build), |x| x, |y| y)
            .count();
        fell_back(&m, "semi_join");
        let want = probe.iter().filter(|&&x| build.contains(&x)).count();
        assert_eq!(s, want, "{k:?} {name} semi_join");
    };
    if common::devices(&common::engine()).contains(&BackendKind::Wgpu) {
        for (name, _) in faults::faults_of("wgpu") {
            let config = computeq::Config {
                faults: vec![format!("wgpu:{name}")],
                ..computeq::Config::default()
            }
            .with_fault_injection(true);
            check(&Engine::with_config(config), BackendKind::Wgpu, name);
        }
    }
    #[cfg(feature = "cuda")]
    {
        use computeq::plumbing::backends::cuda::FaultPlan;
        let (e, b) = interp_engine();
        for (name, _) in faults::faults_of("cuda") {
            *b.faults.lock() = FaultPlan::parse(&format!("cuda:{name}"));
            check(&e, BackendKind::Cuda, name);
        }
    }
}

/// The checks above would catch a scatter that ranks rows by the order of
/// atomic increments instead of their positions. Simulated here: one
/// workgroup of 64 invocations, two rows each, warps of 32 lanes taking
/// their first rows, then their second ones (the order a per-digit atomic
/// counter would hand out positions in); the rows of one key then come out
/// interleaved, which the stable reference (and so every test here)
/// rejects on data with ties.
#[test]
fn an_atomic_order_ranking_is_caught() {
    let n = 128usize;
    let keys: Vec<i32> = common::lcg(n, 11)
        .iter()
        .map(|&r| (r % 5) as i32 - 2)
        .collect();
    let ids: Vec<u32> = (0..n as u32).collect();
    let stable = common::engine()
        .query(&keys)
        .on(BackendKind::CpuScalar)
        .zip(&ids)
        .sort_by_key(|(k, _)| k)
        .collect::<Vec<_>>();
    // Positions in the order the invocations reach the counter.
    let order: Vec<usize> = (0..2)
        .flat_map(|item| (0..64).map(move |t| t * 2 + item))
        .collect();
    let mut atomic: Vec<(i32, u32)> = Vec::new();
    for key in -2..=2 {
        atomic.extend(
            order
                .iter()
                .filter(|&&p| keys[p] == key)
                .map(|&p| (keys[p], ids[p])),
        );
    }
    // Same keys in the same order, ties in another order.
    assert_eq!(
        atomic.iter().map(|r| r.0).collect::<Vec<_>>(),
        stable.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert_ne!(atomic, stable, "the atomic order should reorder ties here");
}

/// A group's float sum, min, max and mean.
type FloatAggs = (f32, Option<f32>, Option<f32>, Option<f64>);

/// `group_by` (count, sum, min, max, mean), `distinct` and `value_counts`
/// on the devices: the same keys and the same values, bit for bit (a
/// group's rows fold in input order, as on `cpu-scalar`).
#[test]
fn groups_on_the_devices_match_the_cpu() {
    for (e, k) in devices() {
        if !wide_ints(&e, k, "groups") {
            continue;
        }
        for n in lengths() {
            let ctx = format!("{k:?} n={n}");
            let keys: Vec<i32> = common::lcg(n, 5)
                .iter()
                .map(|&r| (r % 37) as i32 - 18)
                .collect();
            let vals: Vec<f32> = floats(n, 9);
            let ints: Vec<i32> = common::lcg(n, 13).iter().map(|&r| r as i32).collect();
            let run = |on: BackendKind| {
                let q = || e.query(&keys).on(on).no_fallback().zip(&vals);
                let (c, m) = q().with_metrics().group_by(|(k, _)| k).count();
                let s = q()
                    .group_by(|(k, _)| k)
                    .agg(|(_, v), a| (a.sum(v), a.min(v), a.max(v), a.mean(v)));
                let w = e
                    .query(&keys)
                    .on(on)
                    .no_fallback()
                    .zip(&ints)
                    .group_by(|(k, _)| k)
                    .agg(|(_, v), a| (a.sum(v), a.min(v), a.max(v)));
                (c, s, w, m)
            };
            let (dc, ds, dw, m) = run(k);
            let (cc, cs, cw, _) = run(BackendKind::CpuScalar);
            let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
            assert!(alg.starts_with("device groups"), "{ctx}: {m}");
            assert_eq!((dc.keys, dc.values), (cc.keys, cc.values), "{ctx} count");
            assert_eq!(ds.keys, cs.keys, "{ctx} keys");
            let bits = |v: &[FloatAggs]| {
                v.iter()
                    .map(|t| {
                        (
                            canon32(&[t.0]),
                            t.1.map(|x| canon32(&[x])),
                            t.2.map(|x| canon32(&[x])),
                            t.3.map(|x| canon64(&[x])),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&ds.values), bits(&cs.values), "{ctx} float aggregates");
            assert_eq!(
                (dw.keys, dw.values),
                (cw.keys, cw.values),
                "{ctx} i32 aggregates"
            );
            // Float keys: NaN one key, -0.0 the key +0.0; after a filter.
            let (dv, cv) = (
                e.query(&vals).on(k).no_fallback().value_counts(),
                e.query(&vals).on(BackendKind::CpuScalar).value_counts(),
            );
            assert_eq!(
                canon32(&dv.keys),
                canon32(&cv.keys),
                "{ctx} value_counts keys"
            );
            assert_eq!(dv.values, cv.values, "{ctx} value_counts");
            let (dd, cd) = (
                e.query(&vals)
                    .on(k)
                    .no_fallback()
                    .filter(|x| x.ne(1.0))
                    .distinct(),
                e.query(&vals)
                    .on(BackendKind::CpuScalar)
                    .filter(|x| x.ne(1.0))
                    .distinct(),
            );
            assert_eq!(canon32(&dd), canon32(&cd), "{ctx} filter then distinct");
        }
    }
}

/// What the device groups do not have yet is declined with its reason,
/// and the engine runs it on the CPU.
#[test]
fn groups_of_several_keys_positional_aggregates_and_first_seen_order_on_the_devices() {
    for (e, k) in devices() {
        if !wide_ints(
            &e,
            k,
            "groups_of_several_keys_positional_aggregates_and_first_seen_order",
        ) {
            continue;
        }
        for n in [0, 1, 64, 129, 513, 1500, 4099] {
            let ctx = format!("{k:?} n={n}");
            let a: Vec<i32> = common::lcg(n, 5)
                .iter()
                .map(|&r| (r % 5) as i32 - 2)
                .collect();
            let b: Vec<u32> = common::lcg(n, 8).iter().map(|&r| (r % 3) as u32).collect();
            let vals: Vec<f32> = floats(n, 9);
            let wide_keys: Vec<u32> = common::lcg(n, 21)
                .iter()
                .map(|&r| (r % 2000) as u32)
                .collect();
            let run = |on: BackendKind| {
                let q = || e.query(&a).on(on).no_fallback().zip(&b).zip(&vals);
                let (c, m) = q()
                    .with_metrics()
                    .group_by(|((x, y), _)| (y, x))
                    .agg(|(_, v), g| (g.count(), g.sum(v)));
                let p = q()
                    .group_by(|((x, _), _)| x)
                    .agg(|(_, v), g| (g.argmin(v), g.argmax(v), g.first(v), g.last(v)));
                let f = e
                    .query(&a)
                    .on(on)
                    .no_fallback()
                    .zip(&vals)
                    .filter(|(_, v)| v.lt(2.0))
                    .group_by(|(x, _)| x)
                    .first_seen()
                    .agg(|(_, v), g| (g.first(v), g.last(v)));
                // Many groups (up to 2000) in first-seen order: their
                // first rows sorted across workgroups.
                let many = e
                    .query(&wide_keys)
                    .on(on)
                    .no_fallback()
                    .group_by(|x| x)
                    .first_seen()
                    .count();
                (c, p, f, many, m)
            };
            let (dc, dp, df, dm, m) = run(k);
            let (cc, cp, cf, cm, _) = run(BackendKind::CpuScalar);
            assert_eq!(
                (dm.keys, dm.values),
                (cm.keys, cm.values),
                "{ctx} many groups first-seen"
            );
            let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
            assert!(alg.starts_with("device groups"), "{ctx}: {m}");
            assert_eq!(dc.keys, cc.keys, "{ctx} two keys");
            let sums =
                |v: &[(u64, f32)]| v.iter().map(|t| (t.0, canon32(&[t.1]))).collect::<Vec<_>>();
            assert_eq!(
                sums(&dc.values),
                sums(&cc.values),
                "{ctx} two keys' aggregates"
            );
            assert_eq!(dp.keys, cp.keys, "{ctx}");
            let bits = |v: &[Positional]| {
                v.iter()
                    .map(|t| {
                        (
                            t.0,
                            t.1,
                            t.2.map(|x| canon32(&[x])),
                            t.3.map(|x| canon32(&[x])),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                bits(&dp.values),
                bits(&cp.values),
                "{ctx} argmin/argmax/first/last"
            );
            assert_eq!(df.keys, cf.keys, "{ctx}");
            let bits = |v: &[(Option<f32>, Option<f32>)]| {
                v.iter()
                    .map(|t| (t.0.map(|x| canon32(&[x])), t.1.map(|x| canon32(&[x]))))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                bits(&df.values),
                bits(&cf.values),
                "{ctx} first/last after a filter, first-seen order"
            );
        }
    }
}

#[test]
fn variance_and_arg_aggregates_after_a_filter_per_group_on_the_devices() {
    for (e, k) in devices() {
        if !wide_ints(
            &e,
            k,
            "variance_and_arg_aggregates_after_a_filter_per_group",
        ) {
            continue;
        }
        let keys: Vec<i32> = common::lcg(500, 5)
            .iter()
            .map(|&r| (r % 7) as i32)
            .collect();
        let vals: Vec<f32> = floats(500, 9);
        // A variance per group: Welford's steps in f64 in the rows' order,
        // as on the CPU (where the device has f64; the interpreter's PTX
        // rounds every step, so it agrees to the bit).
        let var = |on: BackendKind| {
            e.query(&keys)
                .on(on)
                .zip(&vals)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| (a.variance(v), a.std_dev(v)))
        };
        let (d, c) = (var(k), var(BackendKind::CpuScalar));
        assert_eq!(d.keys, c.keys, "{k:?}");
        for ((dv, ds), (cv, cs)) in d.values.iter().zip(&c.values) {
            for (x, y) in [(dv, cv), (ds, cs)] {
                match (x, y) {
                    (Some(x), Some(y)) if !y.is_nan() => {
                        assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{k:?} {x} {y}")
                    }
                    (Some(x), Some(_)) => assert!(x.is_nan(), "{k:?}"),
                    (x, y) => assert_eq!(x.is_some(), y.is_some(), "{k:?}"),
                }
            }
        }
        // An arg aggregate after a filter: its row counts survivors, the
        // device's sorted rows are input positions; it declines when the
        // filter is fused into the group stage, and either way agrees.
        let arg = |on: BackendKind| {
            e.query(&keys)
                .on(on)
                .zip(&vals)
                .filter(|(_, v)| v.gt(0.0))
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| a.argmax(v))
        };
        let (d, c) = (arg(k), arg(BackendKind::CpuScalar));
        assert_eq!(
            (d.keys, d.values),
            (c.keys, c.values),
            "{k:?} argmax after a filter"
        );
        let got = e
            .query(&keys)
            .on(k)
            .no_fallback()
            .zip(&vals)
            .group_by(|(k, _)| k)
            .first_seen()
            .count();
        let want = e
            .query(&keys)
            .on(BackendKind::CpuScalar)
            .zip(&vals)
            .group_by(|(k, _)| k)
            .first_seen()
            .count();
        assert_eq!((got.keys, got.values), (want.keys, want.values), "{k:?}");
    }
}

/// `histogram` on the devices (a row of counters per workgroup, summed in
/// 64 bits): the same bins, below, above and NaN counts as `cpu-scalar`,
/// on floats with specials, after a filter and on `i64`.
#[test]
fn histograms_on_the_devices_match_the_cpu() {
    for (e, k) in devices() {
        if !wide_ints(&e, k, "histograms") {
            continue;
        }
        for n in lengths() {
            let ctx = format!("{k:?} n={n}");
            let xs = floats(n, 31);
            let ints = ints(n, 37);
            for &(bins, lo, hi) in &[(1usize, -10.0, 10.0), (256, -500.0, 500.0), (7, -3.3, 2.9)] {
                let h = |on| e.query(&xs).on(on).no_fallback().histogram(bins, lo, hi);
                let (d, c) = (h(k), h(BackendKind::CpuScalar));
                assert_eq!(
                    (d.counts, d.below, d.above, d.nan),
                    (c.counts, c.below, c.above, c.nan),
                    "{ctx} bins={bins}"
                );
            }
            let h = |on| {
                e.query(&ints)
                    .on(on)
                    .no_fallback()
                    .filter(|x| (x % 3).ne(0))
                    .histogram(100, -1e12, 1e12)
            };
            let (d, c) = (h(k), h(BackendKind::CpuScalar));
            assert_eq!(
                (d.counts, d.below, d.above, d.nan),
                (c.counts, c.below, c.above, c.nan),
                "{ctx} i64 after a filter"
            );
        }
    }
}

/// A group's count, min, max, argmin, argmax, first and last.
type ExactAggs = (
    u64,
    Option<f32>,
    Option<f32>,
    Option<usize>,
    Option<usize>,
    Option<f32>,
    Option<f32>,
);

/// A few large groups (a workgroup's rows or more each on average) are
/// folded by a workgroup each (`group_fold_wide`), many small ones by an
/// invocation each: both against `cpu-scalar`, integers and positions
/// exactly, float sums within `n · ε · Σ|x|` (the wide fold adds in
/// another order), variances within 1e-9.
#[test]
fn few_large_groups_fold_by_workgroups() {
    for (e, k) in devices() {
        if !wide_ints(&e, k, "few_large_groups_fold_by_workgroups") {
            continue;
        }
        for (n, distinct) in [(6000usize, 3u64), (6000, 1), (6000, 2000), (300, 2)] {
            let ctx = format!("{k:?} n={n} keys={distinct}");
            let keys: Vec<u32> = common::lcg(n, 21)
                .iter()
                .map(|&r| (r % distinct) as u32)
                .collect();
            let vals: Vec<f32> = common::lcg(n, 22)
                .iter()
                .map(|&r| (r % 20_001) as f32 / 7.0 - 1000.0)
                .collect();
            let ints: Vec<i32> = common::lcg(n, 23).iter().map(|&r| r as i32).collect();
            let run = |on: BackendKind| {
                let q = || e.query(&keys).on(on).no_fallback().zip(&vals);
                let exact = q().group_by(|(k, _)| k).agg(|(_, v), a| {
                    (
                        a.count(),
                        a.min(v),
                        a.max(v),
                        a.argmin(v),
                        a.argmax(v),
                        a.first(v),
                        a.last(v),
                    )
                });
                let (sums, m) = q()
                    .with_metrics()
                    .group_by(|(k, _)| k)
                    .agg(|(_, v), a| (a.sum(v), a.variance(v)));
                let wide = e
                    .query(&keys)
                    .on(on)
                    .no_fallback()
                    .zip(&ints)
                    .group_by(|(k, _)| k)
                    .agg(|(_, v), a| a.sum(v));
                (exact, sums, wide, m)
            };
            let (de, ds, dw, m) = run(k);
            let (ce, cs, cw, _) = run(BackendKind::CpuScalar);
            let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
            assert!(alg.starts_with("device groups"), "{ctx}: {m}");
            let bits = |v: &[ExactAggs]| {
                v.iter()
                    .map(|t| {
                        (
                            t.0,
                            t.1.map(f32::to_bits),
                            t.2.map(f32::to_bits),
                            t.3,
                            t.4,
                            t.5.map(f32::to_bits),
                            t.6.map(f32::to_bits),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(de.keys, ce.keys, "{ctx}");
            assert_eq!(bits(&de.values), bits(&ce.values), "{ctx} exact aggregates");
            assert_eq!((dw.keys, dw.values), (cw.keys, cw.values), "{ctx} i32 sums");
            let abs: f64 = vals.iter().map(|v| v.abs() as f64).sum();
            let tol = n as f64 * f32::EPSILON as f64 * abs;
            for ((dsum, dvar), (csum, cvar)) in ds.values.iter().zip(&cs.values) {
                assert!(
                    ((dsum - csum) as f64).abs() <= tol,
                    "{ctx} sum {dsum} {csum}"
                );
                match (dvar, cvar) {
                    (Some(x), Some(y)) => {
                        assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{ctx} {x} {y}")
                    }
                    (x, y) => assert_eq!(x.is_some(), y.is_some(), "{ctx}"),
                }
            }
        }
    }
}

/// A group's count, argmin, argmax and max.
type PerGroup = (u64, Option<usize>, Option<usize>, Option<f32>);

/// Group counts, `value_counts`, arg aggregates per group and histograms
/// need no 64-bit integers on the device: without them (wgpu on GL, and
/// the interpreter lowered as if it had none) their `u64` columns are
/// written as two `u32` halves, the histogram's sums over workgroups
/// carried from the low word to the high one.
#[test]
fn counts_need_no_64_bit_integers_on_the_devices() {
    let mut all = devices();
    let narrow = Caps {
        workgroup_size: 64,
        items_per_thread: 2,
        max_groups: 8,
        int64: false,
        ..cuda_caps()
    };
    let b = Arc::new(InterpBackend::new(narrow, 2000).with_ptxas(ptx_interp::ptxas::find()));
    all.push((common::engine().with_backend(b), BackendKind::Cuda));
    for (e, k) in all {
        for n in lengths() {
            let ctx = format!("{k:?} n={n}");
            let keys: Vec<i32> = common::lcg(n, 5)
                .iter()
                .map(|&r| (r % 37) as i32 - 18)
                .collect();
            let vals: Vec<f32> = floats(n, 9);
            let run = |on: BackendKind| {
                let q = || e.query(&keys).on(on).no_fallback().zip(&vals);
                let (c, m) = q().with_metrics().group_by(|(k, _)| k).count();
                let a = q()
                    .group_by(|(k, _)| k)
                    .agg(|(_, v), a| (a.count(), a.argmin(v), a.argmax(v), a.max(v)));
                let h = e.query(&vals).on(on).no_fallback().histogram(7, -3.3, 2.9);
                let v = e.query(&keys).on(on).no_fallback().value_counts();
                (c, a, h, v, m)
            };
            let (dc, da, dh, dv, m) = run(k);
            let (cc, ca, ch, cv, _) = run(BackendKind::CpuScalar);
            let alg = m.algorithm.map(|a| a.to_string()).unwrap_or_default();
            assert!(alg.starts_with("device groups"), "{ctx}: {m}");
            assert_eq!((dc.keys, dc.values), (cc.keys, cc.values), "{ctx} count");
            assert_eq!(da.keys, ca.keys, "{ctx} agg keys");
            let strip = |v: Vec<PerGroup>| {
                v.into_iter()
                    .map(|(c, i, j, x)| (c, i, j, x.map(|x| canon32(&[x]))))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                strip(da.values),
                strip(ca.values),
                "{ctx} count, argmin, argmax"
            );
            assert_eq!(
                (dh.counts, dh.below, dh.above, dh.nan),
                (ch.counts, ch.below, ch.above, ch.nan),
                "{ctx} histogram"
            );
            assert_eq!(
                (dv.keys, dv.values),
                (cv.keys, cv.values),
                "{ctx} value_counts"
            );
        }
    }
}

/// Build and probe sides around the interpreter's workgroup (64) and
/// tile (128), and either the larger.
fn join_sizes() -> Vec<(usize, usize)> {
    vec![
        (0, 5),
        (5, 0),
        (1, 1),
        (63, 65),
        (129, 513),
        (1500, 257),
        (513, 4099),
    ]
}

/// Joins on the devices (one key, and two): inner joins in the documented order
/// (probe order, then build order), semi- and anti-joins, `is_in` and
/// `not_in`, float keys as group keys (NaN one key, `-0.0` = `+0.0`), a
/// filter before the join and the query going on after it, against
/// `cpu-scalar`'s ordered-map join.
#[test]
fn joins_on_the_devices_match_the_cpu() {
    for (e, k) in devices() {
        // Inner joins of 32-bit keys run everywhere (their rows out are
        // counted in `u32` where the device has no 64-bit integers); wide
        // keys and positions need them.
        let wide = wide_ints(&e, k, "joins_on_the_devices_match_the_cpu (wide keys)");
        for (n, m) in join_sizes() {
            for range in [5u64, 4000] {
                if n * m / range as usize > 400_000 {
                    continue;
                }
                let ctx = format!("{k:?} n={n} m={m} range={range}");
                let key = |n: usize, seed: u64| -> Vec<u32> {
                    common::lcg(n, seed)
                        .iter()
                        .map(|&r| (r % range) as u32)
                        .collect()
                };
                let (pk, bk) = (key(n, 11 + n as u64), key(m, 5 + m as u64));
                let pv: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
                let bv: Vec<i32> = (0..m as i32).map(|j| -j).collect();
                let (d, c) = both_with(&e, k, &format!("{ctx} semi"), "device join", |e, k| {
                    e.query(&pk)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .semi_join(e.query(&bk), |x| x, |y| y)
                        .collect::<Vec<u32>>()
                });
                assert_eq!(d, c, "{ctx} semi_join");
                let (d, c) = both_with(&e, k, &format!("{ctx} anti"), "device join", |e, k| {
                    e.query(&pk)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .zip(&pv)
                        .filter(|(x, _)| x.ne(3))
                        .anti_join(e.query(&bk), |(x, _)| x, |y| y)
                        .collect::<Vec<(u32, f32)>>()
                });
                assert_eq!(d, c, "{ctx} filter then anti_join");
                let d: Vec<u32> = e.query(&pk).on(k).no_fallback().is_in(&bk).collect();
                let c: Vec<u32> = e.query(&pk).on(BackendKind::CpuScalar).is_in(&bk).collect();
                assert_eq!(d, c, "{ctx} is_in");
                let d = e.query(&pk).on(k).no_fallback().not_in(&bk).count();
                let c = e.query(&pk).on(BackendKind::CpuScalar).not_in(&bk).count();
                assert_eq!(d, c, "{ctx} not_in then count");
                let (d, c) = both_with(&e, k, &format!("{ctx} inner"), "device join", |e, k| {
                    e.query(&pk)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .zip(&pv)
                        .join(e.query(&bk).zip(&bv), |(x, _)| x, |(y, _)| y)
                        .collect::<Vec<((u32, f32), (u32, i32))>>()
                });
                assert_eq!(d.len(), c.len(), "{ctx} inner join rows");
                assert!(d == c, "{ctx} inner join");
                // A filter before, and the query going on after.
                let (d, c) = both_with(&e, k, &format!("{ctx} then"), "", |e, k| {
                    e.query(&pk)
                        .on(k)
                        .no_fallback()
                        .with_metrics()
                        .zip(&pv)
                        .filter(|(x, _)| x.ne(1))
                        .join(e.query(&bk).zip(&bv), |(x, _)| x, |(y, _)| y)
                        .map(|((_, v), (_, w))| v * 2.0 + w.cast::<f32>())
                        .collect::<Vec<f32>>()
                });
                assert_eq!(canon32(&d), canon32(&c), "{ctx} filter, join, map");
            }
        }
        // Two keys (a u32 and a float with NaN and ±0), build rows in
        // build order per match.
        let a: Vec<u32> = common::lcg(700, 3)
            .iter()
            .map(|&r| (r % 5) as u32)
            .collect();
        let f: Vec<f32> = floats(700, 4).iter().map(|x| (x * 0.5).round()).collect();
        let ba: Vec<u32> = common::lcg(300, 6)
            .iter()
            .map(|&r| (r % 5) as u32)
            .collect();
        let bf: Vec<f32> = floats(300, 7).iter().map(|x| (x * 0.5).round()).collect();
        let bi: Vec<u32> = (0..300).collect();
        let run = |on: BackendKind| {
            e.query(&a)
                .on(on)
                .no_fallback()
                .with_metrics()
                .zip(&f)
                .semi_join(e.query(&ba).zip(&bf), |k| k, |k| k)
                .collect::<Vec<(u32, f32)>>()
        };
        let ((d, m), (c, _)) = (run(k), run(BackendKind::CpuScalar));
        assert!(
            m.algorithm
                .is_some_and(|a| a.to_string().starts_with("device join")),
            "{m}"
        );
        let bits = |v: &[(u32, f32)]| {
            v.iter()
                .map(|&(a, f)| (a, canon32(&[f])))
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&d), bits(&c), "{k:?} two-key semi_join");
        if wide {
            let run = |on: BackendKind| -> Vec<(u32, u32)> {
                e.query(&a)
                    .on(on)
                    .no_fallback()
                    .zip(&f)
                    .enumerate()
                    .join(
                        e.query(&ba).zip(&bf).zip(&bi),
                        |(_, (a, f))| (f, a),
                        |((a, f), _)| (f, a),
                    )
                    .map(|((i, _), (_, j))| (i.cast::<u32>(), j))
                    .collect()
            };
            let (d, c) = (run(k), run(BackendKind::CpuScalar));
            assert!(!d.is_empty(), "{k:?}");
            assert_eq!(d, c, "{k:?} two-key inner join");
        }
        // Float keys join as group keys; wide keys where the device has
        // 64-bit integers.
        let probe = [0.0f32, -0.0, f32::NAN, 1.0, -f32::NAN, f32::INFINITY, 2.5];
        let build = [-0.0f32, f32::NAN, 2.0, f32::INFINITY, 0.0, 2.5, 2.5];
        let d: Vec<f32> = e
            .query(&probe)
            .on(k)
            .no_fallback()
            .semi_join(e.query(&build), |x| x, |y| y)
            .collect();
        let c: Vec<f32> = e
            .query(&probe)
            .on(BackendKind::CpuScalar)
            .semi_join(e.query(&build), |x| x, |y| y)
            .collect();
        assert_eq!(canon32(&d), canon32(&c), "{k:?} float semi_join");
        if wide {
            let bi: Vec<u32> = (0..build.len() as u32).collect();
            let run = |on: BackendKind| -> Vec<(u32, u32)> {
                e.query(&probe)
                    .on(on)
                    .no_fallback()
                    .enumerate()
                    .join(e.query(&build).zip(&bi), |(_, x)| x, |(y, _)| y)
                    .map(|((i, _), (_, j))| (i.cast::<u32>(), j))
                    .collect()
            };
            assert_eq!(
                run(k),
                run(BackendKind::CpuScalar),
                "{k:?} float inner join"
            );
            let xs = ints(3000, 7);
            let ys = ints(700, 8);
            let run = |on: BackendKind| -> Vec<(i64, i64)> {
                e.query(&xs)
                    .on(on)
                    .no_fallback()
                    .join(e.query(&ys), |x| x, |y| y)
                    .collect()
            };
            assert_eq!(run(k), run(BackendKind::CpuScalar), "{k:?} i64 inner join");
        }
    }
}

/// An inner join of more rows out than a binding holds is declined by the
/// device before its outputs exist, also where its rows are counted in
/// `u32` (GL): 65,537 probe rows matching 65,537 build rows make
/// 2^32 + 131,073 rows, which a wrapping count would take for 131,073.
#[test]
fn an_inner_join_past_the_counts_range_is_declined_not_wrapped() {
    let n = 65_537;
    let probe = vec![7u32; n];
    let build = vec![7u32; n];
    for (e, k) in devices() {
        if k == BackendKind::Cuda {
            // The interpreter would sort and search 65,537 rows slowly;
            // its counts are `u64` (CUDA always has 64-bit integers).
            continue;
        }
        let err = e
            .query(&probe)
            .on(k)
            .no_fallback()
            .fallible()
            .join(e.query(&build), |x| x, |y| y)
            .collect::<Vec<(u32, u32)>>()
            .expect_err("more rows than a binding holds");
        let text = err.to_string();
        assert!(
            text.contains("past 2^31 positions or one binding"),
            "{k:?}: {text}"
        );
    }
}

/// Join keys past 128 bits together are the same error whichever backend
/// is asked (the plan is refused before any backend runs; the device
/// lowering declines such keys too), and 128 bits join on the devices.
#[test]
fn join_keys_past_128_bits_are_the_same_error_everywhere() {
    let xs: Vec<u64> = (0..50).collect();
    let ys: Vec<u64> = (0..50).rev().collect();
    for (e, k) in devices() {
        if !wide_ints(
            &e,
            k,
            "join_keys_past_128_bits_are_the_same_error_everywhere",
        ) {
            continue;
        }
        let three = |on: BackendKind, fallback: bool| {
            let q = e.query(&xs).on(on).fallible();
            let q = if fallback { q } else { q.no_fallback() };
            q.semi_join(e.query(&ys), |x| (x, x, x), |y| (y, y, y))
                .count()
        };
        for (on, fallback) in [(k, false), (k, true), (BackendKind::CpuScalar, false)] {
            let err = three(on, fallback).unwrap_err();
            assert!(err.to_string().contains("128 bits"), "{on:?}: {err}");
        }
        let two = |on: BackendKind| {
            e.query(&xs)
                .on(on)
                .no_fallback()
                .semi_join(e.query(&ys), |x| (x, x), |y| (y, y))
                .count()
        };
        assert_eq!(two(k), two(BackendKind::CpuScalar), "{k:?}");
        assert_eq!(two(k), 50);
    }
}
