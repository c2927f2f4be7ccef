//! Real queries on a real CUDA device, compared with `cpu-scalar`.
//!
//! `COMPUTEQ_REQUIRE=cuda cargo test --features cuda` runs them on a
//! machine with an NVIDIA GPU and driver; elsewhere each test prints why it
//! skips (no driver, no device), unless `COMPUTEQ_REQUIRE` lists `cuda`,
//! in which case it fails.
#![cfg(feature = "cuda")]

use computeq::plumbing::backends::cuda::{driver_present, CudaBackend, FaultPlan};
use computeq::plumbing::{Availability, Backend, BackendKind};
use computeq::{Config, Engine};
use std::sync::Arc;

fn required() -> bool {
    std::env::var("COMPUTEQ_REQUIRE").is_ok_and(|v| {
        v.split(',')
            .any(|s| s.trim().eq_ignore_ascii_case("cuda") || s.trim() == "all")
    })
}

/// An engine whose `cuda` backend is a fresh `CudaBackend`, or `None`
/// (after printing why) when no device can run it here.
fn engine(faults: FaultPlan) -> Option<Engine> {
    let b = CudaBackend::with_faults(faults);
    match b.availability() {
        Availability::Available => {
            eprintln!("CUDA device: {:?}", b.device_info());
            Some(Engine::with_config(Config::default()).with_backend(Arc::new(b)))
        }
        Availability::Unavailable(why) => {
            assert!(
                !required(),
                "COMPUTEQ_REQUIRE=cuda but CUDA cannot run here: {why}"
            );
            eprintln!("skipping: cuda unavailable: {why} (set COMPUTEQ_REQUIRE=cuda to fail)");
            None
        }
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn queries_match_the_reference_on_the_device() {
    let Some(e) = engine(FaultPlan::NONE) else {
        return;
    };
    for n in [0usize, 1, 31, 1000, 65_537, 3_000_000] {
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 1013) as f32 - 500.0) * 0.25)
            .collect();
        let ys: Vec<i64> = (0..n)
            .map(|i| (i as i64 * 7919) % 100_003 - 50_000)
            .collect();
        let gpu = || e.query(&xs).on(BackendKind::Cuda).no_fallback();
        let cpu = || e.query(&xs).on(BackendKind::CpuScalar);
        let k = 3.0f32;
        let a: f32 = gpu().map(|x| x * k + 1.0).filter(|x| x.gt(0.5)).sum();
        let b: f32 = cpu().map(|x| x * k + 1.0).filter(|x| x.gt(0.5)).sum();
        assert!(
            close(a as f64, b as f64, 1e-4 * (n as f64).sqrt().max(1.0)),
            "n={n}: {a} vs {b}"
        );
        assert_eq!(
            gpu().filter(|x| x.gt(0.0)).count(),
            cpu().filter(|x| x.gt(0.0)).count()
        );
        assert_eq!(gpu().argmin(), cpu().argmin());
        assert_eq!(gpu().max(), cpu().max());
        let c1: Vec<f32> = gpu()
            .map(|x| x.abs().sqrt() * 3.0 - x)
            .filter(|x| x.lt(10.0))
            .collect();
        let c2: Vec<f32> = cpu()
            .map(|x| x.abs().sqrt() * 3.0 - x)
            .filter(|x| x.lt(10.0))
            .collect();
        assert_eq!(c1, c2, "n={n}");
        let gi = || e.query(&ys).on(BackendKind::Cuda).no_fallback();
        let ci = || e.query(&ys).on(BackendKind::CpuScalar);
        let s1: i64 = gi()
            .enumerate()
            .map(|(i, y)| y * 3 - i.cast::<i64>())
            .skip(3)
            .sum();
        let s2: i64 = ci()
            .enumerate()
            .map(|(i, y)| y * 3 - i.cast::<i64>())
            .skip(3)
            .sum();
        assert_eq!(s1, s2);
        let p1: Vec<i64> = gi().scan_sum().collect();
        let p2: Vec<i64> = ci().scan_sum().collect();
        assert_eq!(p1, p2);
        let z1: Vec<i64> = gi()
            .zip(&xs)
            .map(|(y, x)| (y / 7) % 5 + x.cast::<i64>())
            .collect();
        let z2: Vec<i64> = ci()
            .zip(&xs)
            .map(|(y, x)| (y / 7) % 5 + x.cast::<i64>())
            .collect();
        assert_eq!(z1, z2);
    }
}

#[test]
fn device_arrays_stay_on_the_device() {
    let Some(e) = engine(FaultPlan::NONE) else {
        return;
    };
    let xs: Vec<f64> = (0..100_000).map(|i| i as f64 * 0.5).collect();
    let (on_device, _) = e
        .query(&xs)
        .on(BackendKind::Cuda)
        .no_fallback()
        .map(|x| x * 2.0)
        .collect_on_device()
        .unwrap();
    assert_eq!(on_device.device(), Some(BackendKind::Cuda));
    let total: f64 = e
        .query(&on_device)
        .on(BackendKind::Cuda)
        .no_fallback()
        .sum();
    assert!(close(total, xs.iter().map(|x| x * 2.0).sum(), 1e-9));
    assert_eq!(on_device.to_vec().unwrap()[7], 7.0);
}

#[test]
fn injected_faults_fall_back_to_the_cpu() {
    for faults in [
        "cuda:compile",
        "cuda:upload",
        "cuda:launch",
        "cuda:download",
        "cuda:oom",
    ] {
        let Some(e) = engine(FaultPlan::parse(faults)) else {
            return;
        };
        // Small integers: every partial sum is exact in f32 (< 2^24), so the
        // fallback's summation order cannot change the result.
        let xs: Vec<f32> = (0..10_000).map(|i| (i % 100) as f32).collect();
        let (s, m) = e
            .query(&xs)
            .on(BackendKind::Cuda)
            .with_metrics()
            .map(|x| x * 2.0)
            .sum();
        assert_eq!(s, xs.iter().map(|x| x * 2.0).sum::<f32>(), "{faults}");
        assert_ne!(
            m.backend,
            BackendKind::Cuda,
            "{faults}: the fault did not fire"
        );
    }
}

/// `explain` names cuda and says why it is not a candidate when it cannot
/// run here (no driver, no device), and lists it with a cost when it can.
/// Runs everywhere: it is the proof that the cost model never picks CUDA on
/// a machine without one.
#[test]
fn explain_says_whether_cuda_can_run_and_why() {
    let e = Engine::with_config(Config::default());
    let xs: Vec<f32> = (0..1 << 16).map(|i| i as f32).collect();
    let text = e.query(&xs).explain().map(|x| x * 2.0).sum().to_string();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("cuda "))
        .collect();
    assert_eq!(lines.len(), 1, "one line about cuda in:\n{text}");
    let b = CudaBackend::with_faults(FaultPlan::NONE);
    match b.availability() {
        Availability::Available => {
            // A device nothing is known about is probed in the background
            // from the first query; `prepare_devices` waits for the probe.
            assert!(
                lines[0].contains("estimated") || lines[0].contains("probed in the background"),
                "{text}"
            );
            e.prepare_devices();
            let text = e.query(&xs).explain().map(|x| x * 2.0).sum().to_string();
            let line = text.lines().find(|l| l.trim_start().starts_with("cuda "));
            assert!(line.is_some_and(|l| l.contains("estimated")), "{text}");
        }
        Availability::Unavailable(why) => {
            assert!(
                !required(),
                "COMPUTEQ_REQUIRE=cuda but CUDA cannot run here: {why}"
            );
            assert!(
                lines[0].contains(&format!("not considered: {why}")),
                "{text}"
            );
            if !driver_present() {
                assert!(
                    lines[0].contains("no CUDA driver (libcuda not found)"),
                    "{text}"
                );
                // Asking costs nothing without a driver: even a tiny query
                // says why, not "not probed".
                let tiny = e.query(&xs[..10]).explain().sum().to_string();
                assert!(
                    tiny.contains("not considered: no CUDA driver (libcuda not found)"),
                    "{tiny}"
                );
            }
            assert!(!text.contains("choice: cuda"), "{text}");
            eprintln!("{}", lines[0].trim());
        }
    }
}
