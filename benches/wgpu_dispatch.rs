//! The wgpu executor's own overhead per dispatch on a cached pipeline: a
//! tiny reduction run through `WgpuBackend::execute`, beside the same device
//! work done directly with wgpu (`RawDispatch`: same pipelines, buffers and
//! bind groups made once, one submission, one wait), in the same run. The
//! difference is what the executor adds; the target is under 20 µs.
//! `cargo bench --bench wgpu_dispatch` (needs a wgpu adapter).

use computeq::expr::Scalar;
use computeq::plumbing::backends::wgpu::{measure_overhead, FaultPlan, WgpuBackend};
use computeq::plumbing::ColumnRef;
use computeq::plumbing::{Availability, Backend, Input, Job, RunStats};
use computeq::plumbing::{CompiledPlan, PlanReport};
use computeq::prelude::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const TARGET_US: f64 = 20.0;

fn dispatch(c: &mut Criterion) {
    let backend = WgpuBackend::new(FaultPlan::NONE);
    if let Availability::Unavailable(why) = backend.availability() {
        eprintln!("wgpu_dispatch: no adapter ({why}); skipped");
        return;
    }
    let xs: Vec<f32> = (0..1024).map(|i| i as f32 * 0.25).collect();
    let e = xs.compute().map(|x| x * 2.0 + 1.0).explain().sum();
    let plan = CompiledPlan::new(e.plan.clone(), e.fingerprint, PlanReport::default());
    // Captured constants travel as parameters; their values do not change
    // the work.
    let params = vec![Scalar::F32(1.0); plan.plan.param_count];
    let input = ColumnRef::F32(&xs);
    let inputs = [Input::Host(input)];
    let job = Job {
        plan: &plan,
        inputs: &inputs,
        params: &params,
        keep_on_device: false,
    };
    let mut raw = backend.raw_dispatch(&plan, input, &params).expect("replay");
    let mut g = c.benchmark_group("wgpu_dispatch_1k_sum");
    g.bench_function("executor", |b| {
        b.iter(|| black_box(backend.execute(&job, &mut RunStats::default()).unwrap()))
    });
    g.bench_function("raw_wgpu", |b| b.iter(|| black_box(raw.run())));
    g.finish();
    drop(raw);

    let o = measure_overhead(&backend, &plan, input, &params, 2000).expect("measure");
    let us = o.overhead.as_secs_f64() * 1e6;
    println!(
        "wgpu executor overhead per dispatch (cached pipeline, {}): median {us:.1} µs \
         (executor {:.1} µs, raw wgpu {:.1} µs) — target < {TARGET_US} µs: {}",
        backend.adapter().unwrap_or_default(),
        o.executor.as_secs_f64() * 1e6,
        o.raw.as_secs_f64() * 1e6,
        if us < TARGET_US { "met" } else { "MISSED" }
    );
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
