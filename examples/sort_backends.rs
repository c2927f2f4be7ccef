//! `sort()` forced on `cpu-simd` and on `cpu-parallel`, beside std's
//! `sort_unstable`, in interleaved rounds (medians): where the parallel
//! partition (`radix::msd_lsd`, from 2^20 rows) repays its fixed work.
//! Random `u32` keys and `f32` in [0, 1); each line names the algorithm
//! each backend ran.
//!
//! `cargo run --release --example sort_backends [-- ROUNDS SIZES]`, e.g.
//! `-- 15 100000,300000,1000000,3000000` (defaults: 15 rounds, 10^4 to
//! 3·10^6).

use computeq::prelude::*;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let sizes: Vec<usize> = args.get(2).map_or_else(
        || vec![10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000],
        |s| s.split(',').map(|x| x.parse().expect("a size")).collect(),
    );
    for &n in &sizes {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let xs: Vec<u32> = (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u32
            })
            .collect();
        let fs: Vec<f32> = xs.iter().map(|&x| x as f32 / 4.3e9).collect();
        let sort_u32 = |b| xs.compute().on(b).sort().collect::<Vec<u32>>();
        let sort_f32 = |b| fs.compute().on(b).sort().collect::<Vec<f32>>();
        // Past the selector's first runs and the pool's start.
        for _ in 0..4 {
            black_box(sort_u32(BackendKind::CpuSimd));
            black_box(sort_u32(BackendKind::CpuParallel));
        }
        let mut t = vec![Vec::new(); 5];
        let mut time = |i: usize, f: &mut dyn FnMut()| {
            let a = Instant::now();
            f();
            t[i].push(a.elapsed().as_secs_f64());
        };
        for _ in 0..rounds {
            time(0, &mut || drop(black_box(sort_u32(BackendKind::CpuSimd))));
            time(1, &mut || {
                drop(black_box(sort_u32(BackendKind::CpuParallel)))
            });
            time(2, &mut || {
                let mut v = xs.clone();
                v.sort_unstable();
                black_box(v);
            });
            time(3, &mut || drop(black_box(sort_f32(BackendKind::CpuSimd))));
            time(4, &mut || {
                drop(black_box(sort_f32(BackendKind::CpuParallel)))
            });
        }
        let m: Vec<f64> = t
            .iter_mut()
            .map(|v| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2] * 1e6
            })
            .collect();
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
            m[0],
            algorithm(BackendKind::CpuSimd),
            m[1],
            algorithm(BackendKind::CpuParallel),
            m[1] / m[0],
            m[2],
            m[3],
            m[4],
            m[4] / m[3],
        );
    }
}
