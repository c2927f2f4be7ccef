//! Interleaved sampling: the order in which contenders are sampled in
//! each round, the rounds themselves, and their medians and ratios.
//!
//! Rotating one fixed order (`(round + k) % n`) changes who goes first but
//! keeps every contender's predecessor the same in every round, so one
//! contender always runs right after, say, a two-thread rayon run whose
//! workers still spin, or a wgpu run whose driver threads are still busy.
//! A fresh permutation per round spreads those seats over all contenders.
#![allow(dead_code)]

/// A permutation of `0..n` for round `round`: a Fisher–Yates shuffle
/// driven by splitmix64 seeded with the round, so runs are reproducible.
pub fn round_order(round: usize, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = (round as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    for i in (1..n).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let j = (z % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

use std::time::{Duration, Instant};

/// Calls per sample of `f`: enough to last at least ~2 ms.
pub fn batch_of(f: &mut dyn FnMut()) -> usize {
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_nanos(20));
    ((2e-3 / one.as_secs_f64()) as usize).clamp(1, 100_000)
}

/// Seconds per call of one sample of `batch` calls.
pub fn sample(f: &mut dyn FnMut(), batch: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..batch {
        f();
    }
    t.elapsed().as_secs_f64() / batch as f64
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The contenders of one row measured in `reps` rounds, each round one
/// sample of every contender in a fresh order (see `order.rs`), so that a
/// burst of load from other tenants of the machine, or the threads of the
/// contender just before, fall on all of them alike. Returns
/// per contender its samples, by round.
pub fn interleaved(fs: &mut [&mut dyn FnMut()], reps: usize) -> Vec<Vec<f64>> {
    let batches: Vec<usize> = fs.iter_mut().map(|f| batch_of(*f)).collect();
    let mut out: Vec<Vec<f64>> = vec![Vec::new(); fs.len()];
    for round in 0..reps {
        for i in round_order(round, fs.len()) {
            let t = sample(fs[i], batches[i]);
            out[i].push(t);
        }
    }
    out
}

/// The median of the rounds' ratios `num / den`.
pub fn ratio(num: &[f64], den: &[f64]) -> f64 {
    median(num.iter().zip(den).map(|(n, d)| n / d).collect())
}

pub fn fmt_secs(s: f64) -> String {
    computeq::metrics::fmt_duration(Duration::from_secs_f64(s))
}

pub fn fmt_n(n: usize) -> String {
    format!("10^{}", (n as f64).log10().round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contender_follows_every_other() {
        let n = 5;
        let mut after = vec![vec![0usize; n]; n];
        for round in 0..40 {
            let o = round_order(round, n);
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            for w in o.windows(2) {
                after[w[1]][w[0]] += 1;
            }
        }
        for (i, row) in after.iter().enumerate() {
            for (j, &c) in row.iter().enumerate() {
                assert!(i == j || c > 0, "{i} never ran right after {j}");
            }
        }
    }
}
