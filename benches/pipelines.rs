//! Criterion benches of P1–P5 (f32): computeq (auto-selected) beside std
//! iterators, rayon and a hand-written `wide` loop, and the small-query
//! overhead at N = 10^3. `cargo bench --bench pipelines`

#[path = "common/baselines.rs"]
mod baselines;

use baselines::*;
use computeq::prelude::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn pipelines(c: &mut Criterion) {
    for &n in &[1_000usize, 100_000, 10_000_000] {
        let xs = data(n, 1);
        let ys = data(n, 2);
        let mut g = c.benchmark_group(format!("n={n}"));
        g.throughput(Throughput::Bytes(4 * n as u64));
        if n >= 10_000_000 {
            g.sample_size(20);
        }
        g.bench_function(BenchmarkId::new("P1", "computeq"), |b| {
            b.iter(|| black_box(xs.compute().map(|x| x * 2.0 + 1.0).sum()))
        });
        g.bench_function(BenchmarkId::new("P1", "std"), |b| {
            b.iter(|| black_box(p1_std(&xs)))
        });
        g.bench_function(BenchmarkId::new("P1", "rayon"), |b| {
            b.iter(|| black_box(p1_rayon(&xs)))
        });
        g.bench_function(BenchmarkId::new("P1", "wide"), |b| {
            b.iter(|| black_box(p1_wide(&xs)))
        });
        g.bench_function(BenchmarkId::new("P2", "computeq"), |b| {
            b.iter(|| black_box(xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum()))
        });
        g.bench_function(BenchmarkId::new("P2", "wide"), |b| {
            b.iter(|| black_box(p2_wide(&xs)))
        });
        g.bench_function(BenchmarkId::new("P3", "computeq"), |b| {
            b.iter(|| black_box(xs.compute().scan_sum().collect::<Vec<f32>>()))
        });
        g.bench_function(BenchmarkId::new("P3", "loop"), |b| {
            b.iter(|| black_box(p3_wide(&xs)))
        });
        g.bench_function(BenchmarkId::new("P4", "computeq"), |b| {
            b.iter(|| {
                black_box(
                    xs.compute()
                        .map(|x| x.sqrt() * 3.0 - x)
                        .collect::<Vec<f32>>(),
                )
            })
        });
        g.bench_function(BenchmarkId::new("P4", "wide"), |b| {
            b.iter(|| black_box(p4_wide(&xs)))
        });
        g.bench_function(BenchmarkId::new("P5", "computeq"), |b| {
            b.iter(|| black_box(xs.compute().zip(&ys).map(|(a, b)| a * b).sum()))
        });
        g.bench_function(BenchmarkId::new("P5", "wide"), |b| {
            b.iter(|| black_box(p5_wide(&xs, &ys)))
        });
        g.finish();
    }
}

criterion_group!(benches, pipelines);
criterion_main!(benches);
