//! Where a small run on a device goes, beside what the model priced it
//! at: the device's profile (measured in the background when it first
//! runs; this waits for it), then the phases of forced runs of
//! `sum(x * 2 + 1)` over N `f32` (upload, execute, the readback after
//! the kernels) and the model's estimate of each.
//!
//! `cargo run --release --example device_phases [-- N BACKEND]` (N 100 and
//! `wgpu` by default; BACKEND `wgpu` or `cuda`). Run it with
//! `COMPUTEQ_CACHE_DIR=off` to measure the device afresh.

use computeq::prelude::*;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let kind = match args.get(2).map(String::as_str) {
        Some("cuda") => BackendKind::Cuda,
        _ => BackendKind::Wgpu,
    };
    let xs = vec![1.0f32; n];
    let engine = computeq::engine();
    let first = engine.query(&xs).on(kind).with_metrics().sum();
    if first.1.backend != kind {
        println!("{kind} did not run here (ran on {})", first.1.backend);
        return;
    }
    let key = format!("{}.profile", kind.name());
    let until = Instant::now() + Duration::from_secs(20);
    let profile = loop {
        let found = engine
            .selector()
            .settings()
            .into_iter()
            .find(|(k, _)| *k == key.as_str());
        match found {
            Some((_, v)) => break v,
            None if Instant::now() > until => break "not measured within 20 s".into(),
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    println!("{key}: {profile}");
    let runs: Vec<ExecutionMetrics> = (0..40)
        .map(|_| {
            xs.compute()
                .on(kind)
                .with_metrics()
                .map(|x| x * 2.0 + 1.0)
                .sum()
                .1
        })
        .collect();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("the last 10 of 40 runs, N = {n}:");
    for m in &runs[30..] {
        let p = &m.phases;
        let backend = p.transfer_in + p.execute + p.transfer_out;
        println!(
            "  upload {:>8.1} µs  execute {:>8.1} µs  readback {:>8.1} µs  backend {:>8.1} µs  estimate {:>8.1} µs  ({:?})",
            us(p.transfer_in),
            us(p.execute),
            us(p.transfer_out),
            us(backend),
            m.estimated().map_or(f64::NAN, us),
            p.timing,
        );
    }
}
