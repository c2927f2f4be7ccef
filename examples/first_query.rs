//! How long the first query of a process takes: with an empty cache
//! directory (the host is calibrated, any device is probed in the
//! background) and with a warm one (everything is read from the cache, and
//! a device no query runs on is never opened).
//!
//! `cargo run --release --example first_query`
//!
//! The program runs itself as child processes over one fresh temporary
//! cache directory: the first child finds it empty, the later ones warm.
//! Each child times its first query (a sum of 4M `f32`, on the default
//! engine, engine creation included) and its second, and the parent
//! prints them with anything the children wrote to stderr.

use computeq::prelude::*;
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "COMPUTEQ_FIRST_QUERY_CHILD";

fn child() {
    let xs: Vec<f32> = (0..4_000_000u32).map(|i| (i % 1000) as f32).collect();
    let t = Instant::now();
    let (s, m) = xs.compute().with_metrics().sum();
    let first = t.elapsed();
    let t = Instant::now();
    let s2: f32 = xs.compute().sum();
    let second = t.elapsed();
    assert_eq!(s, s2);
    let log = engine().run_log().len();
    // Let a background probe finish, so that the next process finds it
    // in the cache (a short program would simply exit).
    engine().prepare_devices();
    println!(
        "{} {} {} {} {}",
        first.as_nanos(),
        second.as_nanos(),
        m.backend,
        log,
        m.reason.to_string().replace(' ', "_")
    );
}

fn run(dir: &std::path::Path) -> (Duration, Duration, String, usize, String, String) {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .env(CHILD, "1")
        .env("COMPUTEQ_CACHE_DIR", dir)
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    let f: Vec<&str> = stdout.split_whitespace().collect();
    let ns = |s: &str| Duration::from_nanos(s.parse().expect("nanoseconds"));
    (
        ns(f[0]),
        ns(f[1]),
        f[2].to_string(),
        f[3].parse().expect("count"),
        f[4].replace('_', " "),
        stderr,
    )
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let dir = std::env::temp_dir().join(format!("computeq-first-query-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    println!("first query of a process: sum of 4M f32 on the default engine (cache {dir:?})");
    for (i, label) in ["empty cache", "warm cache", "warm cache"]
        .iter()
        .enumerate()
    {
        let (first, second, backend, log, reason, stderr) = run(&dir);
        println!(
            "  run {}: {label:<12} first query {:>9.2?}  second {:>9.2?}  on {backend} ({reason}); run log {log}",
            i + 1,
            first,
            second,
        );
        if !stderr.trim().is_empty() {
            println!("    stderr of the child:\n{stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
