//! The cost of one whole query (trace, plan-cache lookup, selection,
//! dispatch, execution, metrics) for the bench's pipelines, run many times:
//! prints the median time per query. Under `valgrind --tool=callgrind` it
//! gives a repeatable instruction count (this is how the tiny-query path
//! is profiled).
//!
//! It then runs the query again, a number of times that depends only on
//! N (40 run logs full at small N, about 2 * 10^8 elements in all at
//! large N; so the callgrind difference of two run counts is still per
//! query), and says where its time goes, from the metrics the engine
//! records for every run (medians): tracing, plan-cache lookup, selection,
//! the backend's call (the work and its set-up), and what follows the
//! run's clock (metrics, learning, the run log, freeing the result).
//!
//! `cargo run --release --example tiny_query [-- PIPELINE N RUNS]`, with
//! PIPELINE one of p1..p5, p6 (`variance()`), p7 (`histogram(256, 0, 1)`),
//! `stats`, `maxsq` (`map(|x| x * x).max()`), g1 (`group_by(key).agg(sum)`
//! over 1,000 sparse keys in a regular pattern), g3 (the same over 10^3
//! random keys, drawn as `bench_relational` draws them), g6 (10^6
//! random keys), k32 or k64 (`top_k(100)` of `f32` or `f64`; default p1
//! 1000 200000).

#[path = "../benches/common/relational_baselines.rs"]
mod relational_baselines;

use computeq::prelude::*;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("p1", String::as_str).to_string();
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let runs: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let xs: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 * 0.001).collect();
    let ys: Vec<f32> = (0..n)
        .map(|i| ((i * 104729) % 1000) as f32 * 0.001)
        .collect();
    // `g1`'s keys: 1,000 sparse `u32` values (no direct index); `g6`'s:
    // 10^6 random `u32` values, each row's drawn at random among them, as
    // `bench_relational` draws them.
    let keys: Vec<u32> = if which == "g6" {
        relational_baselines::keyed(n, 1_000_000, 9).0
    } else if which == "g3" {
        relational_baselines::keyed(n, 1_000, 9).0
    } else {
        (0..n)
            .map(|i| (((i * 7919) % 1000) as u32).wrapping_mul(2_654_435_761))
            .collect()
    };
    let xs64: Vec<f64> = if which == "k64" {
        xs.iter().map(|&x| x as f64).collect()
    } else {
        Vec::new()
    };
    let mut query: Box<dyn FnMut() -> usize> = match which.as_str() {
        "p1" => Box::new(|| black_box(xs.compute().map(|x| x * 2.0 + 1.0).sum()) as usize),
        "p2" => {
            Box::new(|| black_box(xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum()) as usize)
        }
        "p3" => Box::new(|| {
            let v: Vec<f32> = xs.compute().scan_sum().collect();
            black_box(v).len()
        }),
        "p4" => Box::new(|| {
            let v: Vec<f32> = xs.compute().map(|x| x.sqrt() * 3.0 - x).collect();
            black_box(v).len()
        }),
        "p5" => Box::new(|| black_box(xs.compute().zip(&ys).map(|(x, y)| x * y).sum()) as usize),
        "p6" => Box::new(|| black_box(xs.compute().variance()).map_or(0, |v| v as usize)),
        "p7" => Box::new(|| {
            black_box(xs.compute().histogram(256, 0.0, 1.0))
                .counts
                .len()
        }),
        "stats" => Box::new(|| black_box(xs.compute().stats()).count as usize),
        "maxsq" => {
            Box::new(|| black_box(xs.compute().map(|x| x * x).max()).map_or(0, |v| v as usize))
        }
        "g1" | "g3" | "g6" => Box::new(|| {
            let g = keys
                .compute()
                .zip(&xs)
                .group_by(|(k, _)| k)
                .agg(|(_, x), a| a.sum(x));
            black_box(g).keys.len()
        }),
        "k32" => Box::new(|| {
            let v: Vec<f32> = xs.compute().top_k(100).collect();
            black_box(v).len()
        }),
        "k64" => Box::new(|| {
            let v: Vec<f64> = xs64.compute().top_k(100).collect();
            black_box(v).len()
        }),
        other => panic!("unknown pipeline {other}: p1..p7, stats, maxsq, g1, g3, g6, k32, k64"),
    };
    // Past the selector's exploration of a new plan.
    for _ in 0..64.min(runs) {
        black_box(query());
    }
    let per_sample = (2_000_000 / n.max(1)).clamp(1, 1000).min(runs.max(1));
    let mut samples = Vec::new();
    let mut done = 0;
    while done < runs {
        let t = Instant::now();
        for _ in 0..per_sample {
            black_box(query());
        }
        samples.push(t.elapsed().as_secs_f64() / per_sample as f64);
        done += per_sample;
    }
    samples.sort_by(f64::total_cmp);
    let engine = computeq::engine();
    let backend = engine
        .last_run()
        .map(|m| m.backend.name())
        .unwrap_or("none");
    println!(
        "{which}, N={n}, {runs} runs on {backend}: median {:.0} ns per query (p10 {:.0}, p90 {:.0})",
        samples[samples.len() / 2] * 1e9,
        samples[samples.len() / 10] * 1e9,
        samples[samples.len() * 9 / 10] * 1e9,
    );
    breakdown(&mut *query, engine.run_log(), n);
}

/// Prints the median phases of further runs of `query` over `n` elements
/// (40 run logs full, or fewer so that they read ~2 * 10^8 elements), from
/// the run log, and the time each query spends after its run's clock
/// stops: a batch's wall time less its runs' own totals, per query (exact
/// for the batch, where medians of separate phases would not add up).
fn breakdown(query: &mut dyn FnMut() -> usize, log: &computeq::plumbing::RunLog, n: usize) {
    let cap = log.capacity();
    if cap == 0 {
        println!("  (the run log keeps no runs here: no breakdown)");
        return;
    }
    let mut phases: [Vec<f64>; 4] = Default::default();
    let mut after = Vec::new();
    let mut left = (200_000_000 / n.max(1)).clamp(1, 40 * cap);
    while left > 0 {
        // Cleared first, so that each run is counted once.
        let batch = left.min(cap);
        log.clear();
        let t = Instant::now();
        for _ in 0..batch {
            black_box(query());
        }
        let wall = t.elapsed().as_secs_f64();
        let mut totals = 0.0;
        for m in log.snapshot() {
            let p = &m.phases;
            let call = p.compile + p.transfer_in + p.execute + p.transfer_out;
            for (v, d) in phases.iter_mut().zip([p.trace, p.plan, p.select, call]) {
                v.push(d.as_secs_f64());
            }
            totals += p.total.as_secs_f64();
        }
        after.push((wall - totals) / batch as f64);
        left -= batch;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] * 1e9
    };
    let [trace, plan, select, call] = phases.each_mut().map(median);
    println!(
        "  where it goes (medians of {} runs' metrics): trace {trace:.0} ns, plan-cache \
         lookup (and the lease's) {plan:.0}, selection {select:.0} (zero under a lease), \
         backend call {call:.0} (the work and \
         its set-up); after the run's clock stops {:.0} (metrics, learning, run log, \
         freeing the result)",
        phases[0].len(),
        median(&mut after),
    );
}
