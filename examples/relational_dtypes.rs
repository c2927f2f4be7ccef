//! The relational operators over each key type at one size, against the
//! standard library: `sort()` against `sort_unstable`, `distinct()` against
//! `sort_unstable` + `dedup`, `top_k(100)`, and `count_distinct()` with the
//! backend each of its runs took (the selector's first runs of a new key
//! included: this is where a candidate priced far below what it takes
//! shows). `bench_relational` times the rows (`f32`/`u32`) in
//! interleaved rounds; this is a survey of the other types, medians of a
//! few runs each, one operator after the other.
//!
//! `COMPUTEQ_CACHE_DIR=off cargo run --release --example relational_dtypes
//! [-- N]` (default 10^7): random values, all distinct at 64 bits, and
//! two "d" rows with 10^5 distinct values.

#[path = "../benches/common/relational_baselines.rs"]
mod relational_baselines;

use computeq::prelude::*;
use std::hint::black_box;
use std::time::Instant;

/// Median of five runs of `f`, in milliseconds.
fn median_ms(mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[2]
}

macro_rules! survey {
    ($name:expr, $xs:expr, $t:ty, $cmp:expr) => {{
        let xs: Vec<$t> = $xs;
        let sorted = || {
            let mut v = xs.clone();
            v.sort_unstable_by($cmp);
            v
        };
        let sort = median_ms(|| {
            black_box(xs.compute().sort().collect::<Vec<$t>>());
        });
        let std_sort = median_ms(|| {
            black_box(sorted());
        });
        let top_k = median_ms(|| {
            black_box(xs.compute().top_k(100).collect::<Vec<$t>>());
        });
        let distinct = median_ms(|| {
            black_box(xs.compute().distinct());
        });
        let dedup = median_ms(|| {
            let mut v = sorted();
            v.dedup();
            black_box(v);
        });
        let mut ran = Vec::new();
        let count_distinct = median_ms(|| {
            let (c, m) = xs.compute().with_metrics().count_distinct();
            ran.push(m.backend.name());
            black_box(c);
        });
        println!(
            "| {} | {sort:.1} ms ({:.2}x) | {top_k:.2} ms | {distinct:.1} ms ({:.2}x) | {count_distinct:.1} ms ({}) |",
            $name,
            std_sort / sort,
            dedup / distinct,
            ran.join(", ")
        );
    }};
}

fn main() {
    // Any device opened and probed before anything is timed: a probe
    // started by the first large query runs in the background, and the
    // rows measured beside it share the cores with its kernels.
    computeq::engine().prepare_devices();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let mut next = relational_baselines::xorshift(3);
    let r: Vec<u64> = (0..n).map(|_| next()).collect();
    println!("{n} rows; ratio = std's time / computeq's (>1: computeq faster)\n");
    println!("| keys | sort (vs sort_unstable) | top_k(100) | distinct (vs sort_unstable + dedup) | count_distinct (each run's backend) |");
    println!("|---|---|---|---|---|");
    let unit32 = |x: u64| (x >> 40) as f32 / (1u64 << 24) as f32;
    let unit64 = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
    survey!(
        "f32",
        r.iter().map(|&x| unit32(x)).collect(),
        f32,
        f32::total_cmp
    );
    survey!(
        "f64",
        r.iter().map(|&x| unit64(x)).collect(),
        f64,
        f64::total_cmp
    );
    survey!(
        "u32",
        r.iter().map(|&x| (x >> 32) as u32).collect(),
        u32,
        u32::cmp
    );
    survey!(
        "i32",
        r.iter().map(|&x| (x >> 32) as i32).collect(),
        i32,
        i32::cmp
    );
    survey!("u64", r.clone(), u64, u64::cmp);
    survey!("i64", r.iter().map(|&x| x as i64).collect(), i64, i64::cmp);
    survey!(
        "u64, 10^5 distinct",
        r.iter()
            .map(|&x| (x % 100_000).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect(),
        u64,
        u64::cmp
    );
    survey!(
        "f64, 10^5 distinct",
        r.iter().map(|&x| (x % 100_000) as f64 * 0.37).collect(),
        f64,
        f64::total_cmp
    );
}
