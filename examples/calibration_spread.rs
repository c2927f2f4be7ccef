//! How much the CPU calibration's backend figures move from one
//! measurement to the next on this machine: the fixed costs of
//! `cpu-scalar`, `cpu-simd` and `cpu-parallel` (the probe that ends the
//! calibration, `runtime/cpu_probe.rs`) from the quick calibration of a
//! fresh process's first query, then the figures in force 4.5 s later
//! (after the calibration's first two later probes, which replace the
//! quick figures when they measure faster), then from a full calibration in the
//! same process. Run in a loop of fresh processes, it shows whether a
//! spread comes from the process (every figure of a process slow) or from
//! the machine at the time (one slow on its own):
//!
//! ```text
//! cargo build --release --example calibration_spread
//! for i in $(seq 20); do COMPUTEQ_CACHE_DIR=off target/release/examples/calibration_spread; done
//! ```
//!
//! (`COMPUTEQ_CACHE_DIR=off`: a persisted profile would stand in for the
//! quick calibration.) The model prices a small query mostly by these
//! fixed costs, so `selector_eval`'s model error moves with them
//! (docs/performance.md, "The calibration's spread", 2026-12-06).

use computeq::prelude::*;
use computeq::Config;
use std::time::{Duration, Instant};

/// The engine's CPU fixed costs in force (`cpu.fixed` of its settings).
fn fixed_costs(engine: &Engine) -> String {
    engine
        .selector()
        .settings()
        .into_iter()
        .find(|(k, _)| *k == "cpu.fixed")
        .map_or_else(|| "not calibrated".to_string(), |(_, v)| v)
}

fn main() {
    let engine = Engine::with_config(Config::default());
    // The first query waits for the quick calibration (at most its budget).
    let t = Instant::now();
    let _ = engine.query(&[1.0f32; 16][..]).sum();
    let first = t.elapsed();
    let quick = fixed_costs(&engine);
    std::thread::sleep(Duration::from_millis(4500));
    let rechecked = fixed_costs(&engine);
    let full = computeq::calibrate_full();
    let ns = |s: f64| s * 1e9;
    println!(
        "first query {:.0} ms; quick: {quick}; in force 4.5 s later: {rechecked}; \
         full: scalar={:.0}ns/simd={:.0}ns/parallel={:.0}ns",
        first.as_secs_f64() * 1e3,
        ns(full.scalar_fixed),
        ns(full.simd_fixed),
        ns(full.parallel_fixed),
    );
}
