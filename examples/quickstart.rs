//! The tour: a fused query, its metrics, its plan, a few terminals, and the
//! engine's run log. `cargo run --release --example quickstart`

use computeq::prelude::*;

fn main() {
    let n = 4_000_000;
    let xs: Vec<f32> = (0..n)
        .map(|i: u64| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let ys: Vec<f32> = (0..n).map(|i: u64| (i % 13) as f32 - 6.0).collect();

    // map + filter + sum fused into one predicated reduction.
    let (total, m) = xs
        .compute()
        .map(|x| x * 2.0 + 1.0)
        .filter(|x| x.gt(1.5))
        .with_metrics()
        .sum();
    println!("sum(x*2+1 where > 1.5) = {total}");
    println!("  ran on {} because {}", m.backend, m.reason);
    println!(
        "  {:.2} GB/s, total {:?} (execute {:?}), plan cache hit: {}",
        m.gb_per_second(),
        m.phases.total,
        m.phases.execute,
        m.plan_cache_hit
    );

    // A captured value is a parameter: the second run reuses the plan.
    for k in [0.5f32, 2.0] {
        let (v, m) = xs.compute().map(|x| x * k).with_metrics().sum();
        println!("sum(x*{k}) = {v} (plan cache hit: {})", m.plan_cache_hit);
    }

    // Dot product via zip; several aggregates in one pass.
    let dot: f32 = xs.compute().zip(&ys).map(|(a, b)| a * b).sum();
    let s = ys.compute().stats();
    println!(
        "dot = {dot}; stats(ys): count={} min={:?} max={:?} mean={:?}",
        s.count, s.min, s.max, s.mean
    );

    // Order-preserving filter + collect, scans, positions.
    let kept: Vec<f32> = ys.compute().filter(|y| y.gt(4.0)).take(5).collect();
    let prefix: Vec<i32> = [3, 1, 4, 1, 5].compute().scan_sum().collect();
    let first_max = ys.compute().argmax();
    println!("first kept {kept:?}; prefix sums {prefix:?}; argmax(ys) = {first_max:?}");

    // The plan, without running it.
    println!(
        "\n{}",
        xs.compute()
            .map(|x| (x * x).sqrt())
            .filter(|x| x.lt(0.25))
            .explain()
            .count()
    );

    // Every run is in the engine's bounded log.
    let log = engine().run_log().snapshot();
    println!("the engine logged {} runs; backends used:", log.len());
    for r in &log {
        println!(
            "  #{:<3} {:<13} {:>9} elements  {:>10?}",
            r.run_id,
            r.backend.name(),
            r.elements_in,
            r.phases.total
        );
    }
}
