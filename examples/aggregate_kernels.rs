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

/// A computeq query of the comparison, by name.
type Contender<'a> = (&'static str, Box<dyn FnMut() + 'a>);

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
            ("sum", Box::new(|| sink(black_box(q().sum())))),
            ("min", Box::new(|| sink(black_box(q().min())))),
            ("max", Box::new(|| sink(black_box(q().max())))),
            (
                "max(x*x)",
                Box::new(|| sink(black_box(q().map(|x| x * x).max()))),
            ),
            ("mean", Box::new(|| sink(black_box(q().mean())))),
            ("variance", Box::new(|| sink(black_box(q().variance())))),
            ("stats", Box::new(|| sink(black_box(q().stats())))),
            (
                "aggregate(sum, max(x*x), mean)",
                Box::new(|| {
                    sink(black_box(
                        q().aggregate(|x, a| (a.sum(x), a.max(x * x), a.mean(x))),
                    ))
                }),
            ),
        ];
        // std's loops for the answers that have one line of it.
        let mut std_min = || sink(black_box(xs.iter().copied().fold(f32::NAN, f32::min)));
        let mut std_max = || sink(black_box(xs.iter().copied().fold(f32::NAN, f32::max)));
        let mut std_mean = || {
            sink(black_box(
                xs.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
            ))
        };
        // Past the selector's first runs of each plan.
        for (_, f) in cq.iter_mut() {
            for _ in 0..8 {
                f();
            }
        }
        let mut fs: Vec<&mut dyn FnMut()> = cq.iter_mut().map(|(_, f)| &mut **f as _).collect();
        let k = fs.len();
        fs.push(&mut std_min);
        fs.push(&mut std_max);
        fs.push(&mut std_mean);
        let t = interleaved(&mut fs, rounds);
        println!("\nN = {}:", fmt_n(n));
        for (i, (name, _)) in cq.iter().enumerate() {
            let std_at = match *name {
                "min" => Some(k),
                "max" => Some(k + 1),
                "mean" => Some(k + 2),
                _ => None,
            };
            println!(
                "  {name:<32} {:>10}  {:>5.2}x the sum{}",
                fmt_secs(median(t[i].clone())),
                ratio(&t[i], &t[0]),
                std_at.map_or(String::new(), |s| format!(
                    ", std's fold {} ({:.2}x)",
                    fmt_secs(median(t[s].clone())),
                    ratio(&t[s], &t[i])
                )),
            );
        }
    }
}

/// Consumes a result (kept alive by `black_box` before it).
fn sink<T>(t: T) {
    black_box(t);
}
