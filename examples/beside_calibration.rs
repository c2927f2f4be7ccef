//! What computeq's own measurements (the CPU calibration, a device's
//! probe) do to the runs beside them.
//!
//! ```text
//! cargo run --release --example beside_calibration [-- SECONDS]
//! ```
//!
//! A fresh engine (an empty cache directory, so the process calibrates:
//! the quick calibration on its first query, re-probes 1, 4 and 16 s
//! later; and the wgpu device, unless disabled, probed from the first
//! query) runs `histogram(256, 0, 1)` over 10^7 values for SECONDS
//! (default 5). Each run that shared the cores with a calibration or the
//! probe says so in its metrics (`during_calibration`) and the learning
//! selector does not learn from it. Printed: the first sixteen runs (where
//! the selector explores), then each run beside a calibration or probe
//! against the median of the runs on the same backend just before and
//! after it.

use computeq::prelude::*;
use computeq::Config;
use std::time::{Duration, Instant};

#[path = "../benches/common/order.rs"]
mod order;

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5.0);
    let dir = std::env::temp_dir().join(format!("computeq-beside-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let engine = Engine::with_config(Config {
        cache_dir: Some(dir.clone()),
        ..Config::default()
    });
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let xs: Vec<f32> = (0..10_000_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let start = Instant::now();
    let mut runs = Vec::new();
    let mut reasons = Vec::new();
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        let (h, m) = engine.query(&xs).with_metrics().histogram(256, 0.0, 1.0);
        std::hint::black_box(h);
        let took = m.phases.transfer_in + m.phases.execute + m.phases.transfer_out;
        runs.push((
            start.elapsed(),
            m.backend,
            took.as_secs_f64(),
            m.during_calibration,
        ));
        reasons.push(m.reason);
    }
    // The process's first runs, where the selector explores.
    println!("the first runs (backend, backend time, why):");
    for (i, (r, why)) in runs.iter().zip(&reasons).take(16).enumerate() {
        let beside = if r.3 {
            ", beside a calibration or probe"
        } else {
            ""
        };
        println!(
            "  run {i:>2} at {:>6.0?}: {} {:.2} ms ({why}{beside})",
            r.0,
            r.1,
            r.2 * 1e3
        );
    }
    println!(
        "{} runs of histogram(256, 0, 1) over 10^7 f32 in {:.1} s; {} beside a calibration or probe",
        runs.len(),
        seconds,
        runs.iter().filter(|r| r.3).count()
    );
    let mut ratios = Vec::new();
    for (i, &(at, backend, took, beside)) in runs.iter().enumerate() {
        if !beside {
            continue;
        }
        // The quiet runs on the same backend among the eight before and
        // the eight after.
        let near: Vec<f64> = runs[i.saturating_sub(8)..(i + 9).min(runs.len())]
            .iter()
            .filter(|r| !r.3 && r.1 == backend)
            .map(|r| r.2)
            .collect();
        if near.is_empty() {
            println!(
                "  run {i} at {:>6.0?}: {backend} {:.2} ms, no quiet run on {backend} around it",
                at,
                took * 1e3
            );
            continue;
        }
        let quiet = order::median(near);
        ratios.push(took / quiet);
        println!(
            "  run {i} at {:>6.0?}: {backend} {:.2} ms, the quiet runs around it {:.2} ms ({:.2}x)",
            at,
            took * 1e3,
            quiet * 1e3,
            took / quiet
        );
    }
    if !ratios.is_empty() {
        println!(
            "median slowdown of a run beside a calibration or probe: {:.2}x (not learned from)",
            order::median(ratios)
        );
    }
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}
