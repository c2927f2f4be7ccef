//! Cache files across processes: a calibration file with implausible
//! figures, two processes writing history at once, and a short program
//! that keeps what it measured.
//!
//! Each scenario runs in child processes: this test binary re-executed on
//! one test, with `COMPUTEQ_TEST_CHILD` naming the scenario (the `child_*`
//! tests do nothing without it). Processes, not threads: the CPU profile
//! is loaded once per process, the file lock is between processes, and
//! the exit hook runs only when a process exits.

use computeq::plumbing::cost::{cache_file, CpuProfile};
use computeq::plumbing::{LearningSelector, LearningSettings};
use computeq::prelude::*;
use computeq::Config;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "COMPUTEQ_TEST_CHILD";
const DIR: &str = "COMPUTEQ_TEST_DIR";
const SIDE: &str = "COMPUTEQ_TEST_SIDE";
/// Plans each writer process learns, one write each.
const ROUNDS: usize = 24;

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("computeq-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Whether this process is the child for `scenario`, and its directory.
fn child_of(scenario: &str) -> Option<PathBuf> {
    (std::env::var(CHILD).ok()? == scenario).then(|| PathBuf::from(std::env::var(DIR).unwrap()))
}

/// Starts this binary's test `test` in a child process.
fn spawn(test: &str, scenario: &str, dir: &Path, env: &[(&str, &str)]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .env(DIR, dir)
        .envs(env.iter().copied())
        .spawn()
        .expect("re-executing the test binary")
}

fn wait_ok(mut c: std::process::Child, what: &str) {
    let status = c.wait().unwrap();
    assert!(status.success(), "{what}: {status}");
}

/// An engine that persists in `dir` and never calibrates (priors or the
/// file's profile).
fn engine_in(dir: &Path) -> Engine {
    Engine::with_config(Config {
        cache_dir: Some(dir.to_path_buf()),
        calibration_budget: Duration::ZERO,
        ..Config::default()
    })
}

/// The history persisted in `dir`, as a new selector loads it.
fn persisted(dir: &Path) -> computeq::plumbing::history::History {
    LearningSelector::new(LearningSettings {
        cache_dir: Some(dir.to_path_buf()),
        ..Config {
            calibration_budget: Duration::ZERO,
            ..Config::default()
        }
        .learning_settings()
    })
    .history()
}

/// A query whose plan is distinct for every (`side`, `k`): a chain of
/// `k + 1` maps, of additions on side `a` and multiplications on `b`.
fn run_plan(engine: &Engine, xs: &[f32], side: &str, k: usize) -> u64 {
    let mut q = engine.query(xs);
    for _ in 0..=k {
        q = if side == "a" {
            q.map(|x| x + 1.0)
        } else {
            q.map(|x| x * 1.5)
        };
    }
    let (_, m) = q.with_metrics().sum();
    m.fingerprint
}

#[test]
fn a_calibration_file_with_zero_bandwidths_does_not_panic() {
    let dir = temp_dir("zero-bandwidth");
    let cpu = CpuProfile {
        bandwidth_one: 0.0,
        bandwidth_all: 0.0,
        cache_bandwidth_one: 0.0,
        cache_bandwidth_all: 0.0,
        fresh_write_bandwidth: 0.0,
        measured: true,
        ..CpuProfile::default()
    };
    // Valid JSON, as another version or a hand edit could leave it.
    let payload = serde_json::json!({ "cpu": cpu, "cpu_full": true, "devices": {} });
    cache_file::write(
        &cache_file::path(&dir, "calibration"),
        "calibration",
        &payload,
    )
    .unwrap();
    wait_ok(
        spawn("child_zero_bandwidth", "zero-bandwidth", &dir, &[]),
        "explain, metrics and recommendations with a zero-bandwidth calibration",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn child_zero_bandwidth() {
    let Some(dir) = child_of("zero-bandwidth") else {
        return;
    };
    let engine = engine_in(&dir);
    let xs = vec![1.5f32; 1 << 16];
    let ex = engine.query(&xs).map(|x| x * 2.0).explain().sum();
    let _ = ex.to_string();
    // The file's profile was dropped: the model prices with the priors.
    let bw = ex
        .settings
        .iter()
        .find(|(k, _)| *k == "cpu.bandwidth_one")
        .map(|(_, v)| v.clone());
    assert_eq!(bw.as_deref(), Some("25.0GB/s"), "{:?}", ex.settings);
    let analyzed = engine.query(&xs).map(|x| x * 2.0).explain_analyze().sum();
    let _ = analyzed.to_string();
    for r in &analyzed.recommendations {
        let _ = r.to_string();
    }
    let (_, m) = engine
        .query(&xs)
        .filter(|x| x.gt(1.0))
        .with_metrics()
        .count();
    let _ = m.to_string();
    let _ = m.reason.to_string();
    // Forced onto every CPU backend: each one's estimate is formatted.
    for k in [
        BackendKind::CpuScalar,
        BackendKind::CpuSimd,
        BackendKind::CpuParallel,
    ] {
        let a = engine.query(&xs).on(k).explain_analyze().sum();
        let _ = a.to_string();
    }
}

#[test]
fn two_processes_writing_history_keep_each_others_plans() {
    let dir = temp_dir("two-writers");
    std::fs::create_dir_all(&dir).unwrap();
    let a = spawn("child_history_writer", "writer", &dir, &[(SIDE, "a")]);
    let b = spawn("child_history_writer", "writer", &dir, &[(SIDE, "b")]);
    // Both start writing at once.
    std::fs::write(dir.join("go"), b"").unwrap();
    wait_ok(a, "writer a");
    wait_ok(b, "writer b");
    let h = persisted(&dir);
    let fps = |side: &str| -> Vec<u64> {
        std::fs::read_to_string(dir.join(format!("fingerprints-{side}")))
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    };
    let (fa, fb) = (fps("a"), fps("b"));
    assert_eq!(fa.len(), ROUNDS);
    assert_eq!(fb.len(), ROUNDS);
    let lost: Vec<u64> = fa
        .iter()
        .chain(&fb)
        .copied()
        .filter(|fp| !h.plans.contains_key(fp))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} plans lost: {lost:?}",
        lost.len(),
        2 * ROUNDS
    );
    // No temporary file is left behind, and the files are the user's alone.
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{name}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let f = std::fs::metadata(cache_file::path(&dir, "history")).unwrap();
        assert_eq!(f.permissions().mode() & 0o777, 0o600);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn child_history_writer() {
    let Some(dir) = child_of("writer") else {
        return;
    };
    let side = std::env::var(SIDE).unwrap();
    let engine = engine_in(&dir);
    let xs = vec![1.0f32; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("go").exists() {
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut fps = String::new();
    for k in 0..ROUNDS {
        let fp = run_plan(&engine, &xs, &side, k);
        fps.push_str(&format!("{fp}\n"));
        // Each plan is written once: a lost write is never repaired.
        engine.flush();
    }
    std::fs::write(dir.join(format!("fingerprints-{side}")), fps).unwrap();
}

#[test]
fn a_short_program_keeps_what_it_measured() {
    let dir = temp_dir("short-program");
    let c = spawn(
        "child_short_program",
        "short",
        &dir,
        &[
            ("COMPUTEQ_CACHE_DIR", dir.to_str().unwrap()),
            ("COMPUTEQ_CALIBRATION_MS", "0"),
            ("COMPUTEQ_LEARN", "1"),
        ],
    );
    wait_ok(c, "short program");
    let fp: u64 = std::fs::read_to_string(dir.with_extension("fp"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        cache_file::path(&dir, "history").exists(),
        "no history file after the program exited"
    );
    let h = persisted(&dir);
    let p = h.plans.get(&fp).expect("the program's plan persisted");
    let samples: u32 = p
        .buckets
        .iter()
        .flat_map(|b| b.stats.iter())
        .map(|s| s.samples)
        .sum();
    assert!(samples >= 1, "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("fp"));
}

#[test]
fn child_short_program() {
    let Some(dir) = child_of("short") else { return };
    // The process-wide engine, from the environment, as a command-line
    // program uses it; about 100 ms of queries, then a normal exit with no
    // flush.
    let xs = vec![2.0f32; 1 << 12];
    let start = Instant::now();
    let mut fp = 0;
    while start.elapsed() < Duration::from_millis(100) {
        let (_, m) = xs.compute().map(|x| x * 3.0 - 1.0).with_metrics().sum();
        fp = m.fingerprint;
    }
    // Beside the cache directory: the program itself must create that.
    std::fs::write(dir.with_extension("fp"), fp.to_string()).unwrap();
}
