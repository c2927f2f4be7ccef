//! Selection latency on a warm cache: the learning selector (cost model ×
//! history, with and without history for the key), beside the stateless
//! cost rule, and the whole N = 10^3 query that selection is part of.
//! `cargo bench --bench select`

use computeq::plumbing::{CompiledPlan, PlanReport};
use computeq::plumbing::{CostRule, LearningSelector, SelectionInput, Selector};
use computeq::prelude::*;
use computeq::BackendKind;
use computeq::Config;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

const CANDIDATES: [BackendKind; 4] = [
    BackendKind::CpuScalar,
    BackendKind::CpuSimd,
    BackendKind::CpuParallel,
    BackendKind::Wgpu,
];

fn selection(c: &mut Criterion) {
    let xs = vec![1.0f32; 1000];
    let e = xs
        .compute()
        .map(|x| x * 2.0 + 1.0)
        .filter(|x| x.gt(0.5))
        .explain()
        .sum();
    let plan = CompiledPlan::new(e.plan.clone(), e.fingerprint, PlanReport::default());
    let w = e.workload.clone();
    let input = SelectionInput {
        plan: &plan,
        workload: &w,
        candidates: &CANDIDATES,
        forced: None,
        measuring: false,
    };
    let config = Config {
        calibration_budget: Duration::ZERO,
        ..Config::default()
    };

    let mut g = c.benchmark_group("select");
    let learning = LearningSelector::new(config.learning_settings());
    learning.select(&input); // shape computed, bucket created
    g.bench_function("learning/model-only", |b| {
        b.iter(|| black_box(learning.select(black_box(&input))))
    });

    // Warm history: every candidate measured for this key.
    let engine = Engine::with_config(config.clone());
    for k in [
        BackendKind::CpuScalar,
        BackendKind::CpuSimd,
        BackendKind::CpuParallel,
    ] {
        for _ in 0..5 {
            let (_, m) = engine
                .query(&xs)
                .map(|x| x * 2.0 + 1.0)
                .filter(|x| x.gt(0.5))
                .on(k)
                .with_metrics()
                .sum();
            learning.observe(&w, &m);
        }
    }
    g.bench_function("learning/warm-history", |b| {
        b.iter(|| black_box(learning.select(black_box(&input))))
    });
    let (_, m) = engine
        .query(&xs)
        .map(|x| x * 2.0 + 1.0)
        .filter(|x| x.gt(0.5))
        .with_metrics()
        .sum();
    g.bench_function("learning/observe", |b| {
        b.iter(|| learning.observe(black_box(&w), black_box(&m)))
    });

    let rule = CostRule::default();
    g.bench_function("cost-rule", |b| {
        b.iter(|| black_box(rule.select(black_box(&input))))
    });
    g.finish();

    let mut g = c.benchmark_group("query-n1000");
    let engine = Engine::with_config(config);
    g.bench_function("sum(x*2+1 where >0.5)", |b| {
        b.iter(|| {
            black_box(
                engine
                    .query(black_box(&xs))
                    .map(|x| x * 2.0 + 1.0)
                    .filter(|x| x.gt(0.5))
                    .sum(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, selection);
criterion_main!(benches);
