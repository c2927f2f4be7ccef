//! `sort()` forced on `cpu-simd` and on `cpu-parallel`, beside std's
//! `sort_unstable`, in interleaved rounds (the benches' sampling and
//! medians, `benches/common/order.rs`): where the parallel partition
//! (`radix::msd_lsd`, from 2^20 rows) repays its fixed work. `f32` in
//! [0, 1) and `u32` keys made from them, as `bench_relational` sorts;
//! each line names the algorithm each backend ran.
//!
//! `cargo run --release --example sort_backends [-- ROUNDS SIZES]`, e.g.
//! `-- 15 100000,300000,1000000,3000000` (defaults: 15 rounds, 10^4 to
//! 3·10^6).

#[path = "../benches/common/baselines.rs"]
mod baselines;
#[path = "../benches/common/order.rs"]
mod order;
#[path = "../benches/common/relational_baselines.rs"]
mod relational_baselines;

use baselines::data;
use computeq::prelude::*;
use order::{interleaved, median, ratio};
use relational_baselines::sort_std_u32;
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let sizes: Vec<usize> = args.get(2).map_or_else(
        || vec![10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000],
        |s| s.split(',').map(|x| x.parse().expect("a size")).collect(),
    );
    for &n in &sizes {
        let fs = data(n, 1);
        let xs: Vec<u32> = fs.iter().map(|&x| (x * 4.0e9) as u32).collect();
        let sort_u32 = |b| xs.compute().on(b).sort().collect::<Vec<u32>>();
        let sort_f32 = |b| fs.compute().on(b).sort().collect::<Vec<f32>>();
        // Past the selector's first runs and the pool's start.
        for _ in 0..4 {
            black_box(sort_u32(BackendKind::CpuSimd));
            black_box(sort_u32(BackendKind::CpuParallel));
        }
        let t = interleaved(
            &mut [
                &mut || drop(black_box(sort_u32(BackendKind::CpuSimd))),
                &mut || drop(black_box(sort_u32(BackendKind::CpuParallel))),
                &mut || drop(black_box(sort_std_u32(&xs))),
                &mut || drop(black_box(sort_f32(BackendKind::CpuSimd))),
                &mut || drop(black_box(sort_f32(BackendKind::CpuParallel))),
            ],
            rounds,
        );
        let us = |i: usize| median(t[i].clone()) * 1e6;
        let algorithm = |b| {
            let (_, m) = xs
                .compute()
                .on(b)
                .with_metrics()
                .sort()
                .collect::<Vec<u32>>();
            m.algorithm.map_or("-".to_string(), |a| a.to_string())
        };
        println!(
            "n={n}: u32 cpu-simd {:.0} us ({}), cpu-parallel {:.0} us ({}), parallel/simd {:.2}x, \
             sort_unstable {:.0} us; f32 cpu-simd {:.0} us, cpu-parallel {:.0} us, parallel/simd {:.2}x",
            us(0),
            algorithm(BackendKind::CpuSimd),
            us(1),
            algorithm(BackendKind::CpuParallel),
            ratio(&t[1], &t[0]),
            us(2),
            us(3),
            us(4),
            ratio(&t[4], &t[3]),
        );
    }
}
