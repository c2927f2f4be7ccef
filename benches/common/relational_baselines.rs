//! What a Rust programmer writes without computeq for the relational
//! rows of `examples/bench_relational.rs`: std's sorts, rayon's parallel
//! sorts, a full sort then take for top-k.
#![allow(dead_code)]

use rayon::prelude::*;

/// `sort_unstable_by(total_cmp)` on a copy.
pub fn sort_std_f32(xs: &[f32]) -> Vec<f32> {
    let mut v = xs.to_vec();
    v.sort_unstable_by(f32::total_cmp);
    v
}

/// rayon's `par_sort_unstable_by(total_cmp)` on a copy.
pub fn sort_rayon_f32(xs: &[f32]) -> Vec<f32> {
    let mut v = xs.to_vec();
    v.par_sort_unstable_by(f32::total_cmp);
    v
}

pub fn sort_std_u32(xs: &[u32]) -> Vec<u32> {
    let mut v = xs.to_vec();
    v.sort_unstable();
    v
}

pub fn sort_rayon_u32(xs: &[u32]) -> Vec<u32> {
    let mut v = xs.to_vec();
    v.par_sort_unstable();
    v
}

/// Rows `(key, payload)` built from two columns, then std's stable
/// `sort_by_key`.
pub fn sort_by_key_std(keys: &[u32], payload: &[u32]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = keys.iter().copied().zip(payload.iter().copied()).collect();
    v.sort_by_key(|r| r.0);
    v
}

/// The same with rayon's stable `par_sort_by_key`.
pub fn sort_by_key_rayon(keys: &[u32], payload: &[u32]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = keys.iter().copied().zip(payload.iter().copied()).collect();
    v.par_sort_by_key(|r| r.0);
    v
}

/// Top-k as a full sort (descending) then take.
pub fn top_k_by_sort(xs: &[f32], k: usize) -> Vec<f32> {
    let mut v = xs.to_vec();
    v.sort_unstable_by(|a, b| b.total_cmp(a));
    v.truncate(k);
    v
}

/// Top-k by std's `select_nth_unstable_by` then a sort of the k.
pub fn top_k_by_select(xs: &[f32], k: usize) -> Vec<f32> {
    let mut v = xs.to_vec();
    if k < v.len() {
        v.select_nth_unstable_by(k, |a, b| b.total_cmp(a));
        v.truncate(k);
    }
    v.sort_unstable_by(|a, b| b.total_cmp(a));
    v
}

/// One pass over the input (a max), the bandwidth floor of any top-k.
pub fn one_pass_max(xs: &[f32]) -> f32 {
    xs.par_chunks(1 << 16)
        .map(|c| c.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .reduce(|| f32::NEG_INFINITY, f32::max)
}

/// A copy of `xs` (read + write of every byte): the memory rate the
/// radix passes are measured against.
pub fn copy_f32(xs: &[f32], out: &mut [f32]) {
    out.par_chunks_mut(1 << 16)
        .zip(xs.par_chunks(1 << 16))
        .for_each(|(o, i)| o.copy_from_slice(i));
}

/// Groups sorted by key: a single-threaded FxHash (hashbrown) map of
/// sums, its entries then sorted, as a hand-written program would.
pub fn group_sum_fx(keys: &[u32], vals: &[f32]) -> Vec<(u32, f32)> {
    let mut m: rustc_hash::FxHashMap<u32, f32> = rustc_hash::FxHashMap::default();
    for (&k, &v) in keys.iter().zip(vals) {
        *m.entry(k).or_insert(0.0) += v;
    }
    let mut out: Vec<(u32, f32)> = m.into_iter().collect();
    out.sort_unstable_by_key(|e| e.0);
    out
}

/// The FxHash loop on every thread over its share of the rows, the maps
/// then merged: what the machine's threads give the hand-written loop
/// (the ceiling a parallel hash aggregation is measured against).
pub fn group_sum_fx_par(keys: &[u32], vals: &[f32]) -> Vec<(u32, f32)> {
    let chunk = keys.len().div_ceil(rayon::current_num_threads()).max(1);
    let maps: Vec<rustc_hash::FxHashMap<u32, f32>> = keys
        .par_chunks(chunk)
        .zip(vals.par_chunks(chunk))
        .map(|(ks, vs)| {
            let mut m: rustc_hash::FxHashMap<u32, f32> = rustc_hash::FxHashMap::default();
            for (&k, &v) in ks.iter().zip(vs) {
                *m.entry(k).or_insert(0.0) += v;
            }
            m
        })
        .collect();
    let mut maps = maps.into_iter();
    let mut m = maps.next().unwrap_or_default();
    for other in maps {
        for (k, v) in other {
            *m.entry(k).or_insert(0.0) += v;
        }
    }
    let mut out: Vec<(u32, f32)> = m.into_iter().collect();
    out.sort_unstable_by_key(|e| e.0);
    out
}

/// The same with std's `HashMap` (SipHash).
pub fn group_sum_std(keys: &[u32], vals: &[f32]) -> Vec<(u32, f32)> {
    let mut m: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
    for (&k, &v) in keys.iter().zip(vals) {
        *m.entry(k).or_insert(0.0) += v;
    }
    let mut out: Vec<(u32, f32)> = m.into_iter().collect();
    out.sort_unstable_by_key(|e| e.0);
    out
}

/// Distinct values by `sort_unstable` then `dedup`.
pub fn distinct_sort_dedup(xs: &[u32]) -> Vec<u32> {
    let mut v = xs.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// The xorshift generator of these baselines' data: the same words from
/// the same `seed` on every run.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// `n` keys drawn from `distinct` random `u32` values (a sparse range:
/// no direct index), and `n` values.
pub fn keyed(n: usize, distinct: usize, seed: u64) -> (Vec<u32>, Vec<f32>) {
    let mut next = xorshift(seed);
    let pool: Vec<u32> = (0..distinct).map(|_| (next() >> 32) as u32).collect();
    let keys = (0..n)
        .map(|_| pool[(next() % distinct as u64) as usize])
        .collect();
    let vals = (0..n)
        .map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32)
        .collect();
    (keys, vals)
}

/// A hand-written hash join (FxHash, hashbrown): the build rows' values
/// per key, then every probe row's matches, summing `a * b` of each pair.
pub fn join_sum_fx(pk: &[u32], pv: &[f32], bk: &[u32], bv: &[f32]) -> f32 {
    join_sum::<rustc_hash::FxBuildHasher>(pk, pv, bk, bv)
}

/// The same with std's `HashMap` (SipHash).
pub fn join_sum_std(pk: &[u32], pv: &[f32], bk: &[u32], bv: &[f32]) -> f32 {
    join_sum::<std::collections::hash_map::RandomState>(pk, pv, bk, bv)
}

fn join_sum<H: std::hash::BuildHasher + Default>(
    pk: &[u32],
    pv: &[f32],
    bk: &[u32],
    bv: &[f32],
) -> f32 {
    let mut m: std::collections::HashMap<u32, Vec<f32>, H> = Default::default();
    for (&k, &v) in bk.iter().zip(bv) {
        m.entry(k).or_default().push(v);
    }
    let mut s = 0.0f32;
    for (k, &a) in pk.iter().zip(pv) {
        if let Some(bs) = m.get(k) {
            for &b in bs {
                s += a * b;
            }
        }
    }
    s
}
