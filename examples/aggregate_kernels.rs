//! The whole-stream aggregates forced on one backend, beside the plain
//! sum of the same column and std's iterator folds, in interleaved rounds
//! (the benches' sampling and medians, `benches/common/order.rs`): what a
//! `min`, a `max`, a `mean`, `stats`, `variance` and a fused `aggregate`
//! cost against the one-pass sum that runs at the machine's ceiling.
//!
//! `cargo run --release --example aggregate_kernels [-- BACKEND SIZES ROUNDS]`,
//! e.g. `-- cpu-simd 100000,10000000 15` (defaults: `cpu-simd`, 10^5 and
//! 10^7, 15 rounds). Each line: the median time per query and its ratio
//! to the sum's in the same rounds, then std's loop for the same answer
//! where there is one (`std` over computeq: above 1, computeq is faster).

#[path = "../benches/common/baselines.rs"]
mod baselines;
#[path = "../benches/common/order.rs"]
mod order;

use baselines::data;
use computeq::prelude::*;
use order::{fmt_n, fmt_secs, interleaved, median, ratio};
use std::hint::black_box;

/// A computeq query of the comparison, by name, with std's loop for the
/// same answer where it has one.
type Contender<'a> = (&'static str, Run<'a>, Option<Run<'a>>);
type Run<'a> = Box<dyn FnMut() + 'a>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let backend = match args.get(1).map(String::as_str) {
        None | Some("cpu-simd") => BackendKind::CpuSimd,
        Some("cpu-parallel") => BackendKind::CpuParallel,
        Some("cpu-scalar") => BackendKind::CpuScalar,
        Some(other) => panic!("unknown backend {other}: cpu-simd, cpu-parallel, cpu-scalar"),
    };
    let sizes: Vec<usize> = args.get(2).map_or_else(
        || vec![100_000, 10_000_000],
        |s| s.split(',').map(|x| x.parse().expect("a size")).collect(),
    );
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(15);
    println!(
        "aggregates on {}, {rounds} interleaved rounds, medians",
        backend.name()
    );
    for &n in &sizes {
        let xs = data(n, 1);
        let q = || xs.compute().on(backend);
        let mut cq: Vec<Contender<'_>> = vec![
            (
                "sum",
                Box::new(|| {
                    black_box(q().sum());
                }),
                None,
            ),
            (
                "min",
                Box::new(|| {
                    black_box(q().min());
                }),
                Some(Box::new(|| {
                    black_box(xs.iter().copied().fold(f32::NAN, f32::min));
                })),
            ),
            (
                "max",
                Box::new(|| {
                    black_box(q().max());
                }),
                Some(Box::new(|| {
                    black_box(xs.iter().copied().fold(f32::NAN, f32::max));
                })),
            ),
            (
                "max(x*x)",
                Box::new(|| {
                    black_box(q().map(|x| x * x).max());
                }),
                None,
            ),
            (
                "mean",
                Box::new(|| {
                    black_box(q().mean());
                }),
                Some(Box::new(|| {
                    black_box(xs.iter().map(|&x| x as f64).sum::<f64>() / n as f64);
                })),
            ),
            (
                "variance",
                Box::new(|| {
                    black_box(q().variance());
                }),
                None,
            ),
            (
                "stats",
                Box::new(|| {
                    black_box(q().stats());
                }),
                None,
            ),
            (
                "aggregate(sum, max(x*x), mean)",
                Box::new(|| {
                    black_box(q().aggregate(|x, a| (a.sum(x), a.max(x * x), a.mean(x))));
                }),
                None,
            ),
        ];
        // Past the selector's first runs of each plan.
        for (_, f, _) in cq.iter_mut() {
            for _ in 0..8 {
                f();
            }
        }
        // The computeq queries first, then the std loops; each row's std
        // loop is at `at[row]`.
        let mut fs: Vec<&mut dyn FnMut()> = Vec::new();
        let mut baselines: Vec<&mut dyn FnMut()> = Vec::new();
        let mut at = Vec::new();
        let k = cq.len();
        for (_, f, base) in cq.iter_mut() {
            fs.push(&mut **f);
            at.push(base.as_mut().map(|b| {
                baselines.push(&mut **b);
                k + baselines.len() - 1
            }));
        }
        fs.extend(baselines);
        let t = interleaved(&mut fs, rounds);
        println!("\nN = {}:", fmt_n(n));
        for (i, (name, _, _)) in cq.iter().enumerate() {
            println!(
                "  {name:<32} {:>10}  {:>5.2}x the sum{}",
                fmt_secs(median(t[i].clone())),
                ratio(&t[i], &t[0]),
                at[i].map_or(String::new(), |s| format!(
                    ", std's fold {} ({:.2}x)",
                    fmt_secs(median(t[s].clone())),
                    ratio(&t[s], &t[i])
                )),
            );
        }
    }
}
