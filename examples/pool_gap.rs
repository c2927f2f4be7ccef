//! What a gap between two `cpu-parallel` runs costs the second one: P4
//! (`collect(sqrt(x) * 3 - x)`) forced on `cpu-parallel`, each timed run
//! after an untimed one and a busy wait of the calling thread (the work a
//! program does between two queries), for gaps of 0 to 1000 µs; medians
//! of the backend time (transfers and execute) over interleaved rounds.
//!
//! rayon's workers fall asleep some 100-200 µs after their last job, and a
//! run that finds them asleep pays the wake-up; `cpu-parallel`'s helpers
//! linger (`Config::pool_linger`, `COMPUTEQ_POOL_LINGER_US`) to cover such
//! gaps. Compare `COMPUTEQ_POOL_LINGER_US=0` with the default:
//!
//! ```text
//! cargo run --release --example pool_gap [-- N ROUNDS]
//! ```
//! (default N = 10^5, 200 rounds; `COMPUTEQ_DISABLE=wgpu` keeps a device
//! probe off the second core while it measures.)

use computeq::plumbing::BackendKind;
use computeq::prelude::*;
use std::time::{Duration, Instant};

fn run(xs: &[f32]) -> f64 {
    let (v, m): (Vec<f32>, _) = xs
        .compute()
        .on(BackendKind::CpuParallel)
        .map(|x| x.sqrt() * 3.0 - x)
        .with_metrics()
        .collect();
    std::hint::black_box(v);
    let p = &m.phases;
    (p.transfer_in + p.execute + p.transfer_out).as_secs_f64()
}

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    let xs: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 * 0.001).collect();
    let linger = computeq::engine().config().pool_linger;
    println!(
        "P4 at {n} elements on cpu-parallel ({} threads), helpers linger {linger:?}; \
         median backend time of a run after a gap:",
        rayon::current_num_threads()
    );
    for _ in 0..50 {
        run(&xs);
    }
    let gaps = [0u64, 25, 50, 100, 200, 400, 1000];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); gaps.len()];
    for _ in 0..rounds {
        for (i, &g) in gaps.iter().enumerate() {
            run(&xs);
            busy(Duration::from_micros(g));
            times[i].push(run(&xs));
        }
    }
    println!("| gap | run after it |");
    println!("|---|---|");
    for (g, t) in gaps.iter().zip(times) {
        println!("| {g} µs | {:.1} µs |", median(t) * 1e6);
    }
}
