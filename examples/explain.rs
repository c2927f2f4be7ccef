//! `explain` (plan only) and `explain_analyze` (plan with measured metrics)
//! for a few pipelines. `cargo run --release --example explain`

use computeq::prelude::*;

fn main() {
    let xs: Vec<f32> = (0..2_000_000).map(|i| (i as f32 * 0.001).sin()).collect();
    let idx: Vec<u32> = (0..2_000_000).map(|i| i % 97).collect();

    println!(
        "{}",
        xs.compute()
            .map(|x| x * 2.0 + 1.0)
            .filter(|x| x.gt(0.5))
            .explain()
            .sum()
    );

    println!(
        "{}",
        xs.compute()
            .zip(&idx)
            .filter(|(x, _)| x.gt(0.0))
            .enumerate()
            .map(|(i, (x, k))| x * k.cast::<f32>() + i.cast::<f32>())
            .explain_analyze()
            .max()
    );

    println!(
        "{}",
        xs.compute()
            .scan_sum()
            .map(|s| s.abs())
            .explain_analyze()
            .mean()
    );

    let small = &xs[..100];
    println!(
        "{}",
        small
            .compute()
            .on(BackendKind::CpuParallel)
            .explain_analyze()
            .sum()
    );
}
