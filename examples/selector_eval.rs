//! The selector judged against an oracle on a workload suite.
//!
//! ```text
//! cargo run --release --example selector_eval [-- [--quick] [--svg PATH] [--only NAME] [--trace-cold]]
//! ```
//!
//! Every workload runs on every available backend (forced with `.on(..)`,
//! on an engine with learning off, so its estimates are the raw cost
//! model's) and with the learning selector (a separate engine that starts
//! with no history). Runs are interleaved round by round, in a fresh order
//! each round, so that drift of this noisy machine hits all of them alike;
//! up to N = 10^6 each timed run follows an untimed one of the same
//! contender, so that it does not pay for the state its predecessor left
//! behind; times are medians.
//!
//! Printed: per workload the oracle (best backend), the selector's choice
//! and regret; totals against the oracle and against the best single fixed
//! backend, with and without the warm-up runs; the cost model's median
//! relative prediction error. An SVG chart of time against N for each
//! backend on one pipeline, with the selector's choices marked, goes to
//! `target/selector_eval.svg` (or `--svg PATH`). `--trace-cold` prints
//! each of the selector's cold runs to stderr as it comes: its backend,
//! time (and the compile in it), reason, and every candidate's estimate.

#[path = "../benches/common/order.rs"]
mod order;

use computeq::metrics::ExecutionMetrics;
use computeq::plumbing::{Availability, BackendKind};
use computeq::prelude::*;
use computeq::Config;
use std::time::{Duration, Instant};

/// Engine 0 runs forced backends (learning off), engine 1 the selector.
type Run = Box<dyn Fn(&Engine, usize, Option<BackendKind>) -> ExecutionMetrics>;

struct Workload {
    name: String,
    n: usize,
    run: Run,
}

fn floats<T: From<f32> + Copy>(n: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from(((i as f32) * 0.618_034).fract()))
        .collect()
}

fn ints<T: TryFrom<u64> + Copy>(n: usize) -> Vec<T>
where
    <T as TryFrom<u64>>::Error: std::fmt::Debug,
{
    (0..n as u64)
        .map(|i| T::try_from((i.wrapping_mul(2_654_435_761)) % 1000).unwrap())
        .collect()
}

macro_rules! float_workloads {
    ($t:ty, $label:expr, $out:ident, $($shape:ident @ $n:expr),* $(,)?) => {{
        $( $out.push(float_workload!($t, $label, $shape, $n)); )*
    }};
}

macro_rules! float_workload {
    ($t:ty, $label:expr, $shape:ident, $n:expr) => {{
        let n: usize = $n;
        let xs: Vec<$t> = floats::<$t>(n);
        let name = format!("{}/{}", stringify!($shape), $label);
        let run: Run = Box::new(move |e: &Engine, _i: usize, on: Option<BackendKind>| {
            let q = e.query(&xs);
            let q = match on { Some(k) => q.on(k), None => q };
            float_workload!(@shape $shape, q, $t, n)
        });
        Workload { name, n, run }
    }};
    (@shape reduce, $q:ident, $t:ty, $n:ident) => { $q.map(|x| x * 2.0 + 1.0).with_metrics().sum().1 };
    (@shape filter_reduce, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(0.5)).map(|x| x * x).with_metrics().sum().1 };
    (@shape stats, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().stats().1 };
    (@shape collect, $q:ident, $t:ty, $n:ident) => { $q.map(|x| x.sqrt() * 3.0 - x).with_metrics().collect::<Vec<$t>>().1 };
    (@shape filter_collect, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(0.7)).with_metrics().collect::<Vec<$t>>().1 };
    (@shape scan, $q:ident, $t:ty, $n:ident) => { $q.scan_sum().with_metrics().collect::<Vec<$t>>().1 };
    (@shape multi_stage, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(0.5)).take($n / 4).with_metrics().sum().1 };
    (@shape transcendental, $q:ident, $t:ty, $n:ident) => { $q.map(|x| (x * 3.0).sin() * (x * -1.0).exp()).with_metrics().sum().1 };
    (@shape variance, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().variance().1 };
    (@shape aggregate, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().aggregate(|x, a| (a.sum(x), a.max(x * x), a.mean(x))).1 };
    // Matches nothing (`floats`' `f32` fractions are too coarse to pass
    // 0.9999 past the first positions): a full read with a pick per block.
    (@shape find, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().find(|x| x.gt(0.9999)).1 };
    (@shape histogram, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().histogram(256, 0.0, 1.0).1 };
    (@shape sort, $q:ident, $t:ty, $n:ident) => { $q.sort().with_metrics().collect::<Vec<$t>>().1 };
    (@shape top_k, $q:ident, $t:ty, $n:ident) => { $q.top_k(100).with_metrics().collect::<Vec<$t>>().1 };
}

macro_rules! int_workload {
    ($t:ty, $label:expr, $shape:ident, $n:expr) => {{
        let n: usize = $n;
        let xs: Vec<$t> = ints::<$t>(n);
        let name = format!("{}/{}", stringify!($shape), $label);
        let run: Run = Box::new(move |e: &Engine, _i: usize, on: Option<BackendKind>| {
            let q = e.query(&xs);
            let q = match on { Some(k) => q.on(k), None => q };
            int_workload!(@shape $shape, q, $t, n)
        });
        Workload { name, n, run }
    }};
    (@shape reduce, $q:ident, $t:ty, $n:ident) => { $q.map(|x| x * 3 + 1).with_metrics().sum().1 };
    (@shape filter_reduce, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(500)).map(|x| x * x).with_metrics().sum().1 };
    (@shape stats, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().stats().1 };
    (@shape collect, $q:ident, $t:ty, $n:ident) => { $q.map(|x| x * 3 - 7).with_metrics().collect::<Vec<$t>>().1 };
    (@shape filter_collect, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(700)).with_metrics().collect::<Vec<$t>>().1 };
    (@shape scan, $q:ident, $t:ty, $n:ident) => { $q.scan_sum().with_metrics().collect::<Vec<$t>>().1 };
    (@shape multi_stage, $q:ident, $t:ty, $n:ident) => { $q.filter(|x| x.gt(500)).take($n / 4).with_metrics().sum().1 };
    (@shape group_sum, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().group_by(|x| x & 1023).sum().1 };
    (@shape distinct, $q:ident, $t:ty, $n:ident) => { $q.with_metrics().distinct().1 };
}

/// `join/u32`: the rows (keys 0..1000) joined with a build side of those
/// 1,000 keys (one match each), the pairs' xor summed.
fn join_workload(n: usize) -> Workload {
    let xs: Vec<u32> = ints::<u32>(n);
    let ys: Vec<u32> = (0..1000).collect();
    let run: Run = Box::new(move |e: &Engine, _i: usize, on: Option<BackendKind>| {
        let q = e.query(&xs);
        let q = match on {
            Some(k) => q.on(k),
            None => q,
        };
        q.join(e.query(&ys), |x| x, |y| y)
            .map(|(x, y)| x ^ y)
            .with_metrics()
            .sum()
            .1
    });
    Workload {
        name: "join/u32".to_string(),
        n,
        run,
    }
}

/// Device-resident input: one `DeviceArray` per engine (each engine has
/// its own device).
fn resident_workload(engines: &[Engine; 2], shape: &'static str, n: usize) -> Option<Workload> {
    let xs: Vec<f32> = floats::<f32>(n);
    let arrays: Vec<DeviceArray<f32>> = engines
        .iter()
        .map(|e| xs.to_device_on(e).ok())
        .collect::<Option<_>>()?;
    if !arrays.iter().all(|a| a.is_resident()) {
        return None;
    }
    // A semi-join's build side: every third key of 0..1000.
    let set: Vec<u32> = (0..1000).step_by(3).collect();
    let run: Run = Box::new(move |e: &Engine, i: usize, on: Option<BackendKind>| {
        let q = e.query(&arrays[i]);
        let q = match on {
            Some(k) => q.on(k),
            None => q,
        };
        match shape {
            "reduce" => q.map(|x| x * 2.0 + 1.0).with_metrics().sum().1,
            "stats" => q.with_metrics().stats().1,
            // The relational stages on resident data, a column result
            // kept where it was computed.
            "sort" => q.sort().collect_on_device().expect("sort").1,
            "top_k" => q.top_k(100).collect_on_device().expect("top_k").1,
            "group_sum" => {
                q.with_metrics()
                    .group_by(|x| (x * 1000.0).cast::<u32>())
                    .sum()
                    .1
            }
            "semi_join" => {
                q.map(|x| (x * 1000.0).cast::<u32>())
                    .semi_join(e.query(&set), |x| x, |y| y)
                    .collect_on_device()
                    .expect("semi_join")
                    .1
            }
            _ => {
                q.filter(|x| x.gt(0.5))
                    .map(|x| x * x)
                    .with_metrics()
                    .sum()
                    .1
            }
        }
    });
    Some(Workload {
        name: format!("{shape}/f32 device-resident"),
        n,
        run,
    })
}

fn suite(engines: &[Engine; 2], quick: bool, device: bool) -> Vec<Workload> {
    let big = if quick { 10_000_000 } else { 100_000_000 };
    let mut w = Vec::new();
    float_workloads!(f32, "f32", w,
        reduce @ 100, reduce @ 1_000, reduce @ 10_000, reduce @ 100_000, reduce @ 1_000_000,
        reduce @ 10_000_000, reduce @ big,
        filter_reduce @ 10_000, filter_reduce @ 1_000_000,
        collect @ 1_000, collect @ 1_000_000,
        filter_collect @ 100_000,
        scan @ 10_000, scan @ 10_000_000,
        multi_stage @ 1_000_000,
        transcendental @ 1_000_000,
        variance @ 1_000, variance @ 10_000_000,
        aggregate @ 100_000,
        find @ 10_000_000,
        histogram @ 1_000_000,
        sort @ 10_000, sort @ 1_000_000,
        top_k @ 10_000_000,
    );
    float_workloads!(f64, "f64", w,
        filter_reduce @ 10_000_000, stats @ 100_000, collect @ 10_000_000,
    );
    w.push(int_workload!(i32, "i32", stats, 100_000));
    w.push(int_workload!(i32, "i32", reduce, 1_000));
    w.push(int_workload!(u32, "u32", filter_collect, 1_000_000));
    w.push(int_workload!(u32, "u32", multi_stage, 100_000));
    w.push(int_workload!(i64, "i64", stats, 10_000_000));
    w.push(int_workload!(i64, "i64", scan, 1_000_000));
    w.push(int_workload!(u64, "u64", filter_reduce, 100_000));
    w.push(int_workload!(u64, "u64", filter_collect, 10_000_000));
    w.push(int_workload!(u32, "u32", group_sum, 1_000_000));
    w.push(int_workload!(i64, "i64", distinct, 100_000));
    w.push(join_workload(1_000_000));
    if device {
        for (shape, n) in [
            ("reduce", 10_000_000),
            ("stats", 1_000_000),
            ("filter_reduce", 100_000),
            ("sort", 1_000_000),
            ("top_k", 1_000_000),
            ("group_sum", 1_000_000),
            ("semi_join", 1_000_000),
        ] {
            if let Some(x) = resident_workload(engines, shape, n) {
                w.push(x);
            }
        }
    }
    w
}

fn reps_for(n: usize) -> usize {
    match n {
        0..=10_000 => 31,
        10_001..=1_000_000 => 11,
        1_000_001..=10_000_000 => 5,
        _ => 3,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

fn secs(m: &ExecutionMetrics) -> f64 {
    m.phases.total.as_secs_f64()
}

/// One table row's cells: per backend, the median of its `values`
/// written by `cell`, or "-" when it has none.
fn per_backend_cells(
    backends: &[BackendKind],
    values: &[(BackendKind, f64)],
    cell: impl Fn(f64) -> String,
) -> String {
    backends
        .iter()
        .map(|&k| {
            let mut v: Vec<f64> = values.iter().filter(|e| e.0 == k).map(|e| e.1).collect();
            if v.is_empty() {
                format!("{:>13}", "-")
            } else {
                cell(median(&mut v))
            }
        })
        .collect()
}

fn fmt_s(s: f64) -> String {
    computeq::metrics::fmt_duration(Duration::from_secs_f64(s.max(0.0)))
}

/// Measurements of one workload.
struct Measured {
    /// Median total per backend (None: could not run).
    per_backend: Vec<(BackendKind, f64)>,
    /// The model's estimate over the measured backend time of each forced
    /// run, with the backend (its relative error is `|ratio - 1|`).
    model_ratios: Vec<(BackendKind, f64)>,
    /// The measured backend time (transfers and execute) of each forced
    /// run whose estimate is in `model_ratios`, with the backend.
    backend_times: Vec<(BackendKind, f64)>,
    /// Sum of the selector's first `warmup` runs.
    cold_total: f64,
    /// The backends of those runs, in order.
    cold_backends: Vec<BackendKind>,
    /// Median of the selector's runs after warm-up.
    selector: f64,
    /// The backend the selector ran most after warm-up.
    choice: BackendKind,
    choice_reason: String,
}

/// `--trace-cold`: every cold selector run to stderr (its backend, time,
/// compile, reason and the candidates' estimates).
fn trace_cold() -> bool {
    std::env::args().any(|a| a == "--trace-cold")
}

/// Largest workload whose timed samples follow an untimed run of the
/// same contender (see `measure`).
const SETTLE_MAX_N: usize = 1_000_000;

fn measure(
    w: &Workload,
    engines: &[Engine; 2],
    backends: &[BackendKind],
    warmup: usize,
) -> Measured {
    let reps = reps_for(w.n);
    // One untimed run per backend: compile, page in.
    for &k in backends {
        let _ = (w.run)(&engines[0], 0, Some(k));
    }
    // Cold selector runs: what a fresh process pays while it learns.
    let mut cold_total = 0.0;
    let mut cold_backends = Vec::with_capacity(warmup);
    for _ in 0..warmup {
        let m = (w.run)(&engines[1], 1, None);
        cold_total += secs(&m);
        cold_backends.push(m.backend);
        if trace_cold() {
            let estimates: Vec<String> = m
                .estimates
                .iter()
                .map(|e| format!("{} {}", e.backend, fmt_s(e.seconds)))
                .collect();
            eprintln!(
                "cold {} {}: {} {} (compile {}; {}; estimates {})",
                w.name,
                w.n,
                m.backend,
                fmt_s(secs(&m)),
                fmt_s(m.phases.compile.as_secs_f64()),
                m.reason,
                estimates.join(", ")
            );
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); backends.len()];
    let mut model_ratios = Vec::new();
    let mut backend_times = Vec::new();
    let mut sel = Vec::new();
    let mut choices: Vec<(BackendKind, String)> = Vec::new();
    // A short run right after another contender's is slowed by the state
    // that one left behind (caches and branch predictors full of wgpu's
    // or another backend's code, a rayon pool gone to sleep): up to 5x at
    // N = 100. Below ~1 ms per run, each timed sample is therefore the
    // second of two back-to-back runs of its contender.
    let settle = w.n <= SETTLE_MAX_N;
    for round in 0..reps {
        // A fresh order every round: a run right after a device or
        // parallel run (whose threads are still busy) is slower, and
        // every contender should take that seat equally often. (A
        // rotation would not do: it keeps each one's predecessor.)
        let slots = backends.len() + 1;
        for slot in order::round_order(round, slots) {
            if slot == backends.len() {
                if settle {
                    let _ = (w.run)(&engines[1], 1, None);
                }
                let m = (w.run)(&engines[1], 1, None);
                sel.push(secs(&m));
                choices.push((m.backend, m.reason.to_string()));
                continue;
            }
            let k = backends[slot];
            if settle {
                let _ = (w.run)(&engines[0], 0, Some(k));
            }
            let m = (w.run)(&engines[0], 0, Some(k));
            if m.backend != k {
                continue; // fell back: this backend cannot run it
            }
            times[slot].push(secs(&m));
            if let Some(est) = m.estimated() {
                let p = &m.phases;
                let backend_time = (p.transfer_in + p.execute + p.transfer_out).as_secs_f64();
                if backend_time > 0.0 {
                    model_ratios.push((k, est.as_secs_f64() / backend_time));
                    backend_times.push((k, backend_time));
                }
            }
        }
    }
    let per_backend = backends
        .iter()
        .zip(times.iter_mut())
        .filter(|(_, t)| !t.is_empty())
        .map(|(&k, t)| (k, median(t)))
        .collect();
    let mut counts: Vec<(BackendKind, usize, String)> = Vec::new();
    for (k, r) in &choices {
        match counts.iter_mut().find(|c| c.0 == *k) {
            Some(c) => c.1 += 1,
            None => counts.push((*k, 1, r.clone())),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    Measured {
        per_backend,
        model_ratios,
        backend_times,
        cold_total,
        cold_backends,
        selector: median(&mut sel),
        choice: counts[0].0,
        choice_reason: counts[0].2.clone(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let svg = args
        .iter()
        .position(|a| a == "--svg")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "target/selector_eval.svg".into());
    let warmup = 12;

    let t0 = Instant::now();
    let fixed = Engine::with_config(Config {
        learn: false,
        ..Config::default()
    });
    let learning = Engine::with_config(Config::default());
    // The first query calibrates the CPU (once per process): time it.
    let t = Instant::now();
    let _ = learning.query(&[1.0f32; 16][..]).sum();
    let first_query = t.elapsed();
    let engines = [fixed, learning];
    let available: Vec<BackendKind> = engines[0]
        .backends()
        .into_iter()
        .filter(|(_, a)| *a == Availability::Available)
        .map(|(k, _)| k)
        .collect();
    let device = available.iter().any(|k| k.is_device());
    // Each engine measures its devices in a thread of its own when one
    // first runs there; on a software device (lavapipe shares these two
    // cores) a measurement taken beside the workloads' runs varied 4x
    // between processes. Let it finish on a quiet machine first.
    let devices: Vec<BackendKind> = available
        .iter()
        .copied()
        .filter(|k| k.is_device())
        .collect();
    for e in &engines {
        for &k in &devices {
            let _ = e.query(&[1.0f32; 16][..]).on(k).sum();
            let until = Instant::now() + Duration::from_secs(20);
            let profile = format!("{}.profile", k.name());
            while Instant::now() < until
                && !e
                    .selector()
                    .settings()
                    .iter()
                    .any(|(s, _)| *s == profile.as_str())
            {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    println!(
        "computeq selector evaluation ({} mode)",
        if quick { "quick" } else { "full" }
    );
    println!(
        "backends: {}",
        available
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "first query (includes CPU calibration): {}",
        fmt_s(first_query.as_secs_f64())
    );
    for (k, v) in engines[1].selector().settings() {
        if k.starts_with("cpu.") || k == "calibrated" {
            print!("{k}={v} ");
        }
    }
    println!();
    // The devices' profiles each engine measured (the forced runs' estimates
    // are engine 0's).
    for (i, e) in engines.iter().enumerate() {
        for (k, v) in e.selector().settings() {
            if k.ends_with(".profile") {
                println!("engine {i} {k}: {v}");
            }
        }
    }

    // `--only NAME`: the workloads whose name contains NAME (to look into
    // one; the totals are then of those alone).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let mut suite = suite(&engines, quick, device);
    if let Some(only) = &only {
        suite.retain(|w| w.name.contains(only.as_str()));
    }
    println!(
        "\n{} workloads, {} warm-up runs each, medians of 3–31 interleaved repetitions\n",
        suite.len(),
        warmup
    );
    println!(
        "{:<34} {:>10} {:>13} {:>10} {:>13} {:>10} {:>8} {:>9}  reason; cold runs' backends",
        "workload", "N", "oracle", "time", "selector", "time", "regret", "cold"
    );
    let mut results = Vec::new();
    for w in &suite {
        let m = measure(w, &engines, &available, warmup);
        let (best_k, best_t) = m
            .per_backend
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("some backend ran");
        // The cold runs' regret, and which backend each ran on (s:
        // cpu-scalar, v: cpu-simd, p: cpu-parallel, g: wgpu, c: cuda).
        let letters: String = m
            .cold_backends
            .iter()
            .map(|k| match k {
                BackendKind::CpuScalar => 's',
                BackendKind::CpuSimd => 'v',
                BackendKind::CpuParallel => 'p',
                BackendKind::Wgpu => 'g',
                BackendKind::Cuda => 'c',
            })
            .collect();
        println!(
            "{:<34} {:>10} {:>13} {:>10} {:>13} {:>10} {:>7.1}% {:>8.0}%  {}; {}",
            w.name,
            w.n,
            best_k.name(),
            fmt_s(best_t),
            m.choice.name(),
            fmt_s(m.selector),
            (m.selector / best_t - 1.0) * 100.0,
            (m.cold_total / (best_t * warmup as f64) - 1.0) * 100.0,
            m.choice_reason,
            letters
        );
        results.push((w, m, best_t));
    }

    // The device profiles (measured when a device first ran).
    for (k, v) in engines[0].selector().settings() {
        if k.ends_with(".profile") {
            println!("{k}: {v}");
        }
    }

    // Totals.
    let oracle: f64 = results.iter().map(|r| r.2).sum();
    let selector: f64 = results.iter().map(|r| r.1.selector).sum();
    let cold: f64 = results.iter().map(|r| r.1.cold_total).sum();
    let oracle_cold = oracle * warmup as f64;
    let fixed_totals: Vec<(BackendKind, f64)> = available
        .iter()
        .filter_map(|&k| {
            let mut total = 0.0;
            for r in &results {
                total += r.1.per_backend.iter().find(|(b, _)| *b == k)?.1;
            }
            Some((k, total))
        })
        .collect();
    let (best_fixed, best_fixed_t) = fixed_totals
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a fixed backend");
    let mut errors: Vec<f64> = results
        .iter()
        .flat_map(|r| r.1.model_ratios.iter().map(|e| (e.1 - 1.0).abs()))
        .collect();
    let model_error = median(&mut errors);
    // Per backend: where the model is off.
    let per_backend_error: Vec<String> = available
        .iter()
        .filter_map(|&k| {
            let mut ratio: Vec<f64> = results
                .iter()
                .flat_map(|r| r.1.model_ratios.iter().filter(|e| e.0 == k).map(|e| e.1))
                .collect();
            let mut e: Vec<f64> = ratio.iter().map(|r| (r - 1.0).abs()).collect();
            (!e.is_empty()).then(|| {
                format!(
                    "{} {:.0}% (estimate/measured median {:.2}x)",
                    k.name(),
                    median(&mut e) * 100.0,
                    median(&mut ratio)
                )
            })
        })
        .collect();

    println!("\n| measure | time | vs oracle |");
    println!("| --- | --- | --- |");
    println!(
        "| oracle (best backend per workload) | {} | 1.00x |",
        fmt_s(oracle)
    );
    println!(
        "| selector after warm-up | {} | {:.3}x (regret {:.1}%) |",
        fmt_s(selector),
        selector / oracle,
        (selector / oracle - 1.0) * 100.0
    );
    println!(
        "| selector during its first {warmup} runs (cold, learning) | {} | {:.3}x (regret {:.1}%) |",
        fmt_s(cold),
        cold / oracle_cold,
        (cold / oracle_cold - 1.0) * 100.0
    );
    for (k, t) in &fixed_totals {
        let mark = if *k == best_fixed {
            " (best fixed)"
        } else {
            ""
        };
        println!(
            "| always {}{mark} | {} | {:.3}x |",
            k.name(),
            fmt_s(*t),
            t / oracle
        );
    }
    println!(
        "| selector vs best fixed ({}) | | {:.3}x |",
        best_fixed.name(),
        selector / best_fixed_t
    );
    println!(
        "\ncost model median relative prediction error (backend time, {} forced runs): {:.0}% (per backend: {})",
        errors.len(),
        model_error * 100.0,
        per_backend_error.join(", ")
    );
    // Where the model is off, per workload: its estimate over the measured
    // backend time (medians of the forced runs).
    println!(
        "\nthe model's estimate / measured backend time, per workload (forced runs, medians):"
    );
    println!(
        "{:<36} {:>10}  {}",
        "workload",
        "N",
        available
            .iter()
            .map(|k| format!("{:>13}", k.name()))
            .collect::<String>()
    );
    for (w, m, _) in &results {
        let cells = per_backend_cells(&available, &m.model_ratios, |r| format!("{r:>12.2}x"));
        println!("{:<36} {:>10}  {cells}", w.name, w.n);
    }
    // The times those ratios divide: what a model constant is fitted to.
    println!(
        "\nthe measured backend time (transfers and execute), per workload (forced runs, medians):"
    );
    for (w, m, _) in &results {
        let cells = per_backend_cells(&available, &m.backend_times, |t| {
            format!("{:>13}", fmt_s(t))
        });
        println!("{:<36} {:>10}  {cells}", w.name, w.n);
    }
    let verdict_regret = selector <= oracle * 1.10;
    let verdict_fixed = selector <= best_fixed_t;
    println!(
        "targets: regret <= 10% of oracle: {}; never worse than the best fixed backend: {}",
        if verdict_regret { "met" } else { "MISSED" },
        if verdict_fixed { "met" } else { "MISSED" }
    );

    // The crossover chart: sum(x*2+1) over f32 at half decades.
    let sizes: Vec<usize> = (4..=(if quick { 14 } else { 16 }))
        .map(|h| (10f64.powf(h as f64 / 2.0)).round() as usize)
        .collect();
    let mut chart: Vec<ChartRow> = Vec::new();
    for &n in &sizes {
        let w = float_workload!(f32, "f32", reduce, n);
        let m = measure(&w, &engines, &available, warmup);
        chart.push((n, m.per_backend, m.choice, m.selector));
    }
    match draw(&svg, &chart, &available) {
        Ok(()) => {
            println!("\nchart: time vs N for sum(x*2+1) over f32, selector choices marked: {svg}")
        }
        Err(e) => println!("\nchart not written: {e}"),
    }
    println!(
        "\nN         {}",
        available
            .iter()
            .map(|k| format!("{:>13}", k.name()))
            .collect::<String>()
            + "      selector"
    );
    for (n, per, choice, t) in &chart {
        let cols: String = available
            .iter()
            .map(|k| {
                per.iter().find(|(b, _)| b == k).map_or_else(
                    || format!("{:>13}", "-"),
                    |(_, t)| format!("{:>13}", fmt_s(*t)),
                )
            })
            .collect();
        println!("{n:<9} {cols}  {:>12} {}", choice.name(), fmt_s(*t));
    }
    println!(
        "\ntotal evaluation time: {:.1}s",
        t0.elapsed().as_secs_f64()
    );
}

/// One size of the crossover chart: N, each backend's time, the selector's
/// choice and its time.
type ChartRow = (usize, Vec<(BackendKind, f64)>, BackendKind, f64);
type Chart = [ChartRow];

fn draw(
    path: &str,
    chart: &Chart,
    backends: &[BackendKind],
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let all: Vec<f64> = chart.iter().flat_map(|c| c.1.iter().map(|x| x.1)).collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &t| (l.min(t), h.max(t)));
    let nmax = chart.last().map_or(1, |c| c.0) as f64;
    let nmin = chart.first().map_or(1, |c| c.0) as f64;
    let mut ctx = ChartBuilder::on(&root)
        .caption(
            "sum(x*2+1) over f32: time per query vs N",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((nmin..nmax).log_scale(), (lo * 0.7..hi * 1.4).log_scale())?;
    ctx.configure_mesh()
        .x_desc("N (elements)")
        .y_desc("median time per query (s)")
        .y_label_formatter(&|v| computeq::metrics::fmt_duration(Duration::from_secs_f64(*v)))
        .x_label_formatter(&|v| format!("{:.0e}", v))
        .draw()?;
    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN];
    for (i, &k) in backends.iter().enumerate() {
        let color = colors[k.index() % colors.len()];
        let pts: Vec<(f64, f64)> = chart
            .iter()
            .filter_map(|c| {
                c.1.iter()
                    .find(|(b, _)| *b == k)
                    .map(|(_, t)| (c.0 as f64, *t))
            })
            .collect();
        ctx.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(k.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        let _ = i;
    }
    // The selector's measured time, marked in the color of its choice.
    let sel: Vec<(f64, f64, BackendKind)> = chart.iter().map(|c| (c.0 as f64, c.3, c.2)).collect();
    ctx.draw_series(LineSeries::new(
        sel.iter().map(|s| (s.0, s.1)),
        BLACK.stroke_width(1),
    ))?
    .label("selector (marker = its choice)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    ctx.draw_series(sel.iter().map(|s| {
        let color = colors[s.2.index() % colors.len()];
        Rectangle::new(
            [(s.0 * 0.93, s.1 * 0.85), (s.0 * 1.07, s.1 * 1.15)],
            color.stroke_width(2),
        )
    }))?;
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
