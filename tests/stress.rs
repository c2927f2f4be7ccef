//! Stress: threads mix queries of changing sizes and shapes (so plans,
//! size buckets and memoized prices keep changing), explain, device
//! profile updates, a full CPU calibration and run-log reads on one engine
//! for a few seconds, under a watchdog that fails the test instead of
//! hanging the run. This mix once parked three threads for good (issue 20:
//! explain's settings, a selection and a model update took the selector's
//! two locks in opposite orders).
//!
//! CPU backends only (the device backends are disabled, so a machine
//! without a GPU runs the same test); the cache directory is a temporary
//! one, for the engine and for `calibrate_full` alike. One test in this
//! binary: it sets `COMPUTEQ_CACHE_DIR` before any other thread exists.

use computeq::calibrate_full;
use computeq::plumbing::cost::DeviceProfile;
use computeq::prelude::*;
use computeq::Config;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the threads keep going.
const RUN: Duration = Duration::from_secs(3);

/// How long the threads may take to stop once asked: a loop iteration
/// takes milliseconds and `calibrate_full` a few seconds, so only a
/// deadlock comes near it (a slow, shared CI machine included).
const WATCHDOG: Duration = Duration::from_secs(60);

/// Lengths of the inputs: sizes in different buckets, below and above the
/// parallel crossover.
const SIZES: [usize; 7] = [1, 7, 100, 1_000, 4_096, 40_000, 300_000];

/// The input: `x[i] = (i % 4) / 4`, so a prefix of length `n` has
/// `n / 4` full cycles and a known count above one half.
fn input() -> Vec<f32> {
    (0..SIZES[SIZES.len() - 1])
        .map(|i| (i % 4) as f32 / 4.0)
        .collect()
}

/// Elements of `xs[..n]` above one half: the 0.75 at every `i % 4 == 3`.
fn above_half(n: usize) -> usize {
    n / 4
}

/// `sum(x * 2 + 1)` over `xs[..n]`, in f64.
fn expected_sum(xs: &[f32], n: usize) -> f64 {
    xs[..n].iter().map(|&x| x as f64 * 2.0 + 1.0).sum()
}

struct Worker {
    name: &'static str,
    rounds: Arc<AtomicU64>,
    handle: JoinHandle<()>,
}

/// Spawns `body` as a worker that runs it until `stop`, at least once.
fn worker(
    name: &'static str,
    stop: &Arc<AtomicBool>,
    mut body: impl FnMut(u64) + Send + 'static,
) -> Worker {
    let rounds = Arc::new(AtomicU64::new(0));
    let (stop, count) = (stop.clone(), rounds.clone());
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || loop {
            let i = count.load(Ordering::Relaxed);
            body(i);
            count.store(i + 1, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) {
                return;
            }
        })
        .expect("spawn");
    Worker {
        name,
        rounds,
        handle,
    }
}

#[test]
fn queries_explain_profiles_calibration_and_log_reads_never_deadlock() {
    let dir = std::env::temp_dir().join(format!("computeq-stress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Where `calibrate_full` persists (it reads the environment); set
    // before any other thread of this process exists.
    std::env::set_var("COMPUTEQ_CACHE_DIR", &dir);
    let engine = Arc::new(Engine::with_config(Config {
        cache_dir: Some(dir.clone()),
        disabled: vec![BackendKind::Wgpu, BackendKind::Cuda],
        // Short, but not zero: the first queries race to calibrate.
        calibration_budget: Duration::from_millis(20),
        ..Config::default()
    }));
    let xs = Arc::new(input());
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();

    for (name, offset) in [("query-a", 0), ("query-b", 3)] {
        let (engine, xs) = (engine.clone(), xs.clone());
        workers.push(worker(name, &stop, move |i| {
            let n = SIZES[(i as usize + offset) % SIZES.len()];
            if i % 2 == 0 {
                let s: f32 = engine.query(&xs[..n]).map(|x| x * 2.0 + 1.0).sum();
                let want = expected_sum(&xs, n);
                assert!(
                    (s as f64 - want).abs() <= 1e-3 * want,
                    "sum of {n}: {s} (want {want})"
                );
            } else {
                let kept: Vec<f32> = engine.query(&xs[..n]).filter(|x| x.gt(0.5)).collect();
                assert_eq!(kept.len(), above_half(n), "filter of {n}");
            }
        }));
    }
    {
        let (engine, xs) = (engine.clone(), xs.clone());
        workers.push(worker("explain", &stop, move |i| {
            let n = SIZES[i as usize % SIZES.len()];
            let e = if i % 3 == 0 {
                engine
                    .query(&xs[..n])
                    .map(|x| x * 2.0 + 1.0)
                    .explain_analyze()
                    .sum()
            } else {
                engine.query(&xs[..n]).map(|x| x * x).explain().sum()
            };
            assert!(!e.settings.is_empty());
            assert!(!format!("{e}").is_empty());
        }));
    }
    {
        let engine = engine.clone();
        workers.push(worker("device-profiles", &stop, move |i| {
            let kind = if i % 2 == 0 {
                BackendKind::Wgpu
            } else {
                BackendKind::Cuda
            };
            engine.selector().set_device_profile(
                kind,
                DeviceProfile {
                    launch: 1e-5 * (1 + i % 5) as f64,
                    ..DeviceProfile::default()
                },
            );
            std::thread::yield_now();
        }));
    }
    {
        // Once: it takes seconds. The selectors pick it up on their next
        // query (a CPU profile update under the queries' feet).
        let once = Arc::new(AtomicBool::new(false));
        workers.push(worker("calibrate-full", &stop, move |_| {
            if !once.swap(true, Ordering::Relaxed) {
                assert!(calibrate_full().measured);
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    {
        let (engine, xs) = (engine.clone(), xs.clone());
        workers.push(worker("run-log", &stop, move |i| {
            let log = engine.run_log();
            let all = log.snapshot();
            assert!(all.len() <= log.capacity());
            let _ = engine.last_run();
            let _ = log.len();
            if i % 16 == 0 {
                // A query inside the filter: the closure runs under no lock.
                let some = log.filter(|m| {
                    let s: f32 = engine.query(&xs[..100]).sum();
                    s > 0.0 && m.elements_in > 0
                });
                assert!(some.len() <= log.capacity());
            }
            let _ = engine.cached_plans();
            std::thread::yield_now();
        }));
    }

    std::thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + WATCHDOG;
    while workers.iter().any(|w| !w.handle.is_finished()) {
        if Instant::now() > deadline {
            let stuck: Vec<String> = workers
                .iter()
                .filter(|w| !w.handle.is_finished())
                .map(|w| {
                    format!(
                        "{} (after {} rounds)",
                        w.name,
                        w.rounds.load(Ordering::Relaxed)
                    )
                })
                .collect();
            // The stuck threads are left behind: the process ends with the
            // harness, and the test fails instead of hanging.
            panic!(
                "deadlocked: {} did not stop within {WATCHDOG:?}",
                stuck.join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let summary: Vec<String> = workers
        .iter()
        .map(|w| format!("{} {}", w.name, w.rounds.load(Ordering::Relaxed)))
        .collect();
    eprintln!("rounds: {}", summary.join(", "));
    for w in workers {
        let rounds = w.rounds.load(Ordering::Relaxed);
        if let Err(panic) = w.handle.join() {
            eprintln!("worker {} panicked after {rounds} rounds", w.name);
            std::panic::resume_unwind(panic);
        }
        assert!(rounds > 0, "{} never ran", w.name);
    }
    assert!(!engine.run_log().is_empty());
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}
