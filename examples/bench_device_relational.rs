//! The relational operators on the device backends, on columns already on
//! the device, results kept there where they are columns: `sort` of `u32`
//! keys, `sort_by_key` of `u32` keys carrying a `u32` payload, `top_k(100)`
//! of `f32`, `group_by` of 10^3 `u32` keys summing `f32` values,
//! `histogram(256)`, an inner `join` of those 10^3 keys (with a payload)
//! against a host build side of 500 of them, and a `semi_join` of the keys
//! against a build side of a quarter of them. Per operation: the wall time, the device's execute
//! time (from GPU timestamp queries where the adapter has them, else host
//! timers: the `timing` column says which), the digit passes and the
//! execute time per pass, keys per second, the cost model's estimate for
//! the device (what the selector weighs), and the same query on
//! `cpu-parallel` over host data in the same interleaved rounds (medians).
//! Every device result is checked against `cpu-parallel`'s.
//!
//! On lavapipe (software Vulkan on the CPU) these are overhead and
//! correctness figures, not GPU speed. With an NVIDIA GPU:
//! `cargo run --release --features cuda --example bench_device_relational
//! -- --sizes 67108864` (2^26 keys: the anchor is CUB's Onesweep, about
//! 29 G keys/s on an A100).
//!
//! `cargo run --release --example bench_device_relational` (`-- --sizes
//! 1000000 --rounds 5`, `--devices cuda` for one backend, `--ops
//! sort_by_key,top_k` for the operations whose names start so, `--details` for
//! each operation's whole metrics after the table). An operation a
//! device cannot run (a declined plan, a column past a binding limit)
//! prints its error in the row and the bench goes on.

use computeq::metrics::Algorithm;
use computeq::plumbing::{Availability, BackendKind};
use computeq::prelude::*;
use computeq::{Config, Engine, ExecutionMetrics};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// `f()`, or the message it panicked with (a query run with
/// `no_fallback` panics where the device fails; the bench reports it).
fn attempt<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into())
    })
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// `n` pseudo-random words.
fn words(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 32) as u32
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Digit passes of a device algorithm (0 when it has none).
fn passes(a: Option<Algorithm>) -> u32 {
    match a {
        Some(Algorithm::DeviceRadix(p))
        | Some(Algorithm::DeviceSortGroups(p))
        | Some(Algorithm::DeviceSortMergeJoin(p)) => p.passes as u32,
        Some(Algorithm::DeviceRadixSelect { select, sort }) => select as u32 + sort as u32,
        _ => 0,
    }
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1e3)
}

/// What one operation returns, compared across backends.
#[derive(PartialEq, Debug)]
enum Out {
    U32(Vec<u32>),
    F32(Vec<u32>),
    Groups(Vec<u32>, Vec<u32>),
    Counts(Vec<u64>),
}

struct Data {
    keys: Vec<u32>,
    payload: Vec<u32>,
    floats: Vec<f32>,
    groups: Vec<u32>,
    /// A join's build side: every other group key, and a value per key.
    build_keys: Vec<u32>,
    build_vals: Vec<u32>,
    /// A semi-join's build side: the first quarter of the keys.
    quarter: Vec<u32>,
}

/// One operation: on host data (`None`) or on the resident columns; a
/// resident result column is downloaded only when `check` asks for it (a
/// timed round leaves it on the device and drops it).
type Op = fn(&Engine, BackendKind, &Data, Option<&Resident>, bool) -> (Out, ExecutionMetrics);

/// A resident result's values when `check` asks for them (a download),
/// else nothing (the array is dropped on the device).
fn fetch<T: Element>(a: DeviceArray<T>, check: bool) -> Vec<T> {
    if check {
        a.to_vec().unwrap()
    } else {
        Vec::new()
    }
}

struct Resident {
    keys: DeviceArray<u32>,
    payload: DeviceArray<u32>,
    floats: DeviceArray<f32>,
    groups: DeviceArray<u32>,
}

fn sort_u32(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    check: bool,
) -> (Out, ExecutionMetrics) {
    match r {
        Some(r) => {
            let (a, m) = e
                .query(&r.keys)
                .on(k)
                .no_fallback()
                .sort()
                .collect_on_device()
                .unwrap();
            (Out::U32(fetch(a, check)), m)
        }
        None => {
            let (v, m) = e
                .query(&d.keys)
                .on(k)
                .no_fallback()
                .with_metrics()
                .sort()
                .collect::<Vec<_>>();
            (Out::U32(v), m)
        }
    }
}

fn sort_by_key(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    check: bool,
) -> (Out, ExecutionMetrics) {
    match r {
        Some(r) => {
            let (a, m) = e
                .query(&r.keys)
                .on(k)
                .no_fallback()
                .zip(&r.payload)
                .sort_by_key(|(x, _)| x)
                .map(|(_, p)| p)
                .collect_on_device()
                .unwrap();
            (Out::U32(fetch(a, check)), m)
        }
        None => {
            let (v, m) = e
                .query(&d.keys)
                .on(k)
                .no_fallback()
                .with_metrics()
                .zip(&d.payload)
                .sort_by_key(|(x, _)| x)
                .map(|(_, p)| p)
                .collect::<Vec<_>>();
            (Out::U32(v), m)
        }
    }
}

fn top_k(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    check: bool,
) -> (Out, ExecutionMetrics) {
    let bits = |v: Vec<f32>| Out::F32(v.into_iter().map(f32::to_bits).collect());
    match r {
        Some(r) => {
            let (a, m) = e
                .query(&r.floats)
                .on(k)
                .no_fallback()
                .top_k(100)
                .collect_on_device()
                .unwrap();
            (bits(fetch(a, check)), m)
        }
        None => {
            let (v, m) = e
                .query(&d.floats)
                .on(k)
                .no_fallback()
                .with_metrics()
                .top_k(100)
                .collect::<Vec<_>>();
            (bits(v), m)
        }
    }
}

fn group_sum(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    _check: bool,
) -> (Out, ExecutionMetrics) {
    let (g, m) = match r {
        Some(r) => e
            .query(&r.groups)
            .on(k)
            .no_fallback()
            .zip(&r.floats)
            .group_by(|(g, _)| g)
            .with_metrics()
            .agg(|(_, v), a| a.sum(v)),
        None => e
            .query(&d.groups)
            .on(k)
            .no_fallback()
            .zip(&d.floats)
            .group_by(|(g, _)| g)
            .with_metrics()
            .agg(|(_, v), a| a.sum(v)),
    };
    // Float sums differ in their last bits between orders of addition:
    // the keys compare exactly, the sums as counts of non-NaN groups.
    let sums = g
        .values
        .iter()
        .map(|v: &f32| v.is_finite() as u32)
        .collect();
    (Out::Groups(g.keys, sums), m)
}

fn histogram(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    _check: bool,
) -> (Out, ExecutionMetrics) {
    let (h, m) = match r {
        Some(r) => e
            .query(&r.floats)
            .on(k)
            .no_fallback()
            .with_metrics()
            .histogram(256, -4.0, 4.0),
        None => e
            .query(&d.floats)
            .on(k)
            .no_fallback()
            .with_metrics()
            .histogram(256, -4.0, 4.0),
    };
    let mut c = h.counts.clone();
    c.extend([h.below, h.above, h.nan]);
    (Out::Counts(c), m)
}

fn join(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    check: bool,
) -> (Out, ExecutionMetrics) {
    let build = || e.query(&d.build_keys).zip(&d.build_vals);
    match r {
        Some(r) => {
            let (a, m) = e
                .query(&r.groups)
                .on(k)
                .no_fallback()
                .zip(&r.payload)
                .join(build(), |(g, _)| g, |(b, _)| b)
                .map(|((_, p), (_, v))| p ^ v)
                .collect_on_device()
                .unwrap();
            (Out::U32(fetch(a, check)), m)
        }
        None => {
            let (v, m) = e
                .query(&d.groups)
                .on(k)
                .no_fallback()
                .with_metrics()
                .zip(&d.payload)
                .join(build(), |(g, _)| g, |(b, _)| b)
                .map(|((_, p), (_, v))| p ^ v)
                .collect::<Vec<_>>();
            (Out::U32(v), m)
        }
    }
}

fn semi_join(
    e: &Engine,
    k: BackendKind,
    d: &Data,
    r: Option<&Resident>,
    check: bool,
) -> (Out, ExecutionMetrics) {
    match r {
        Some(r) => {
            let (a, m) = e
                .query(&r.keys)
                .on(k)
                .no_fallback()
                .semi_join(e.query(&d.quarter), |x| x, |y| y)
                .collect_on_device()
                .unwrap();
            (Out::U32(fetch(a, check)), m)
        }
        None => {
            let (v, m) = e
                .query(&d.keys)
                .on(k)
                .no_fallback()
                .with_metrics()
                .semi_join(e.query(&d.quarter), |x| x, |y| y)
                .collect::<Vec<_>>();
            (Out::U32(v), m)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = arg(&args, "--sizes")
        .map(|s| s.split(',').map(|x| x.parse().expect("size")).collect())
        .unwrap_or_else(|| vec![1_000_000]);
    let rounds: usize = arg(&args, "--rounds").map_or(5, |r| r.parse().expect("rounds"));
    let only = arg(&args, "--devices");
    // `--ops sort,top_k`: the operations whose names start with one of these.
    let only_ops = arg(&args, "--ops");
    let e = Engine::with_config(Config::default());
    let devices: Vec<BackendKind> = e
        .backends()
        .into_iter()
        .filter(|(k, _)| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|d| d == k.to_string()))
        })
        .filter_map(|(k, a)| match a {
            Availability::Available if matches!(k, BackendKind::Wgpu | BackendKind::Cuda) => {
                Some(k)
            }
            Availability::Unavailable(why)
                if matches!(k, BackendKind::Wgpu | BackendKind::Cuda) =>
            {
                println!("{k}: not run ({why})");
                None
            }
            _ => None,
        })
        .collect();
    let ops: [(&str, Op); 7] = [
        ("sort u32", sort_u32),
        ("sort_by_key u32+u32", sort_by_key),
        ("top_k(100) f32", top_k),
        ("group_by 10^3 keys sum f32", group_sum),
        ("histogram(256) f32", histogram),
        ("join 10^3 keys x 500 build rows", join),
        ("semi_join n/4 build rows", semi_join),
    ];
    println!(
        "computeq device relational bench: sizes {sizes:?}, {rounds} rounds, columns resident on the device; cpu = cpu-parallel over host data, same rounds"
    );
    println!(
        "| operation | n | device | algorithm | wall | execute (timing) | passes | per pass | keys/s | model's estimate | cpu-parallel | cpu / device |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut details = Vec::new();
    for &n in &sizes {
        let keys = words(n, 1);
        let data = Data {
            payload: (0..n as u32).collect(),
            floats: words(n, 2)
                .iter()
                .map(|&w| (w as f32 / u32::MAX as f32 - 0.5) * 10.0)
                .collect(),
            groups: keys.iter().map(|&k| k % 1000).collect(),
            build_keys: (0..1000).step_by(2).collect(),
            build_vals: (0..500).map(|j| j * 7919).collect(),
            quarter: keys[..n / 4].to_vec(),
            keys,
        };
        for &dev in &devices {
            let up = |v: &Vec<u32>| {
                e.query(v)
                    .on(dev)
                    .no_fallback()
                    .map(|x| x)
                    .collect_on_device()
                    .expect("upload")
                    .0
            };
            let resident = match attempt(|| Resident {
                keys: up(&data.keys),
                payload: up(&data.payload),
                floats: e
                    .query(&data.floats)
                    .on(dev)
                    .no_fallback()
                    .map(|x| x)
                    .collect_on_device()
                    .expect("upload")
                    .0,
                groups: up(&data.groups),
            }) {
                Ok(r) => r,
                Err(why) => {
                    println!("| (all) | {n} | {dev} | upload failed: {why} |");
                    continue;
                }
            };
            for (name, op) in ops {
                if only_ops
                    .as_deref()
                    .is_some_and(|o| !o.split(',').any(|p| name.starts_with(p)))
                {
                    continue;
                }
                // Compile and check once.
                let (want, _) = op(&e, BackendKind::CpuParallel, &data, None, true);
                let (got, m) = match attempt(|| op(&e, dev, &data, Some(&resident), true)) {
                    Ok(r) => r,
                    Err(why) => {
                        println!("| {name} | {n} | {dev} | failed: {why} |");
                        continue;
                    }
                };
                if got != want {
                    println!(
                        "| {name} | {n} | {dev} | WRONG: the device disagrees with cpu-parallel |"
                    );
                    continue;
                }
                let (mut wall, mut exec, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
                let mut last = m;
                for _ in 0..rounds {
                    let t = Instant::now();
                    let (_, m) = op(&e, dev, &data, Some(&resident), false);
                    wall.push(t.elapsed().as_secs_f64());
                    exec.push(m.phases.execute.as_secs_f64());
                    last = m;
                    let t = Instant::now();
                    let _ = op(&e, BackendKind::CpuParallel, &data, None, false);
                    cpu.push(t.elapsed().as_secs_f64());
                }
                let (w, x, c) = (median(wall), median(exec), median(cpu));
                let p = passes(last.algorithm);
                println!(
                    "| {name} | {n} | {dev} | {} | {} | {} ({:?}) | {p} | {} | {:.1} M | {} | {} | {:.2}x |",
                    last.algorithm.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
                    ms(w),
                    ms(x),
                    last.phases.timing,
                    if p > 0 { ms(x / p as f64) } else { "-".into() },
                    n as f64 / w / 1e6,
                    last.estimated()
                        .map_or_else(|| "-".into(), |d| ms(d.as_secs_f64())),
                    ms(c),
                    c / w,
                );
                details.push(format!("{name} n={n} on {dev}, last round: {last}"));
            }
        }
    }
    if args.iter().any(|a| a == "--details") {
        for d in details {
            println!("{d}");
        }
    }
}
