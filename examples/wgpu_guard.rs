//! What the wgpu kernels' guard against infinities and NaNs costs
//! (`codegen::finite`): the same forced wgpu queries on two engines, one
//! guarded (the default) and one trusting
//! (`Config::wgpu_trust_non_finite`), in interleaved rounds over finite
//! `f32` data; the medians of the device's execute time and of the whole
//! query, and guarded / trusted.
//!
//! `cargo run --release --example wgpu_guard [-- ROUNDS]` (15 by
//! default). On lavapipe the kernels run on this machine's cores, so the
//! guard's integer operations cost what they cost a CPU; on a GPU they
//! hide under the memory traffic of these queries.

use computeq::prelude::*;
use computeq::{Config, Engine};
use std::time::{Duration, Instant};

type Query = fn(&Engine, &[f32]) -> ExecutionMetrics;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    let engine = |trust: bool| {
        Engine::with_config(Config {
            wgpu_trust_non_finite: trust,
            ..Config::default()
        })
    };
    let (guarded, trusted) = (engine(false), engine(true));
    let queries: [(&str, Query); 3] = [
        ("P1 sum(x*2+1)", |e, xs| {
            e.query(xs)
                .on(BackendKind::Wgpu)
                .no_fallback()
                .map(|x| x * 2.0 + 1.0)
                .with_metrics()
                .sum()
                .1
        }),
        ("P2 sum(x*x where x>0.5)", |e, xs| {
            e.query(xs)
                .on(BackendKind::Wgpu)
                .no_fallback()
                .filter(|x| x.gt(0.5))
                .map(|x| x * x)
                .with_metrics()
                .sum()
                .1
        }),
        ("P4 collect(sqrt(x)*3-x)", |e, xs| {
            e.query(xs)
                .on(BackendKind::Wgpu)
                .no_fallback()
                .map(|x| x.sqrt() * 3.0 - x)
                .with_metrics()
                .collect::<Vec<f32>>()
                .1
        }),
    ];
    let probe = vec![1.0f32; 1000];
    let (_, first) = guarded
        .query(&probe)
        .on(BackendKind::Wgpu)
        .with_metrics()
        .sum();
    if first.backend != BackendKind::Wgpu {
        println!("wgpu did not run here: {first}");
        return;
    }
    println!("{rounds} interleaved rounds, finite f32 data, medians");
    println!(
        "| query | N | execute guarded | execute trusted | guarded / trusted | query guarded | query trusted | guarded / trusted |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for n in [100_000usize, 1_000_000, 10_000_000] {
        let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 / 1000.0).collect();
        for (name, q) in queries {
            // Warm both: pipelines built, buffers pooled.
            q(&guarded, &xs);
            q(&trusted, &xs);
            let mut exec = [Vec::new(), Vec::new()];
            let mut wall = [Vec::new(), Vec::new()];
            for r in 0..rounds {
                // Alternate which goes first.
                let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
                for i in order {
                    let e = if i == 0 { &guarded } else { &trusted };
                    let t = Instant::now();
                    let m = q(e, &xs);
                    wall[i].push(t.elapsed());
                    assert_eq!(m.backend, BackendKind::Wgpu);
                    exec[i].push(m.phases.execute);
                }
            }
            let [eg, et] = exec.map(median);
            let [wg, wt] = wall.map(median);
            println!(
                "| {name} | {n} | {} | {} | {:.2}x | {} | {} | {:.2}x |",
                show(eg),
                show(et),
                eg.as_secs_f64() / et.as_secs_f64(),
                show(wg),
                show(wt),
                wg.as_secs_f64() / wt.as_secs_f64(),
            );
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn show(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}
