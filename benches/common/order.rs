//! The order in which interleaved contenders are sampled in each round.
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
