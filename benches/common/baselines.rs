//! The obvious alternatives to computeq for pipelines P1–P5, shared by the
//! criterion benches and `examples/bench.rs`: std iterators, rayon, and a
//! hand-written `wide` loop (8 lanes, 4 accumulators).
#![allow(dead_code)]

use rayon::prelude::*;
use wide::f32x8;

/// P1 `sum(x*2+1)`.
pub fn p1_std(xs: &[f32]) -> f32 {
    xs.iter().map(|x| x * 2.0 + 1.0).sum()
}
pub fn p1_rayon(xs: &[f32]) -> f32 {
    xs.par_iter().map(|x| x * 2.0 + 1.0).sum()
}
pub fn p1_wide(xs: &[f32]) -> f32 {
    let (two, one) = (f32x8::splat(2.0), f32x8::splat(1.0));
    let mut acc = [f32x8::ZERO; 4];
    let chunks = xs.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for (j, a) in acc.iter_mut().enumerate() {
            let v = f32x8::from(<[f32; 8]>::try_from(&c[j * 8..j * 8 + 8]).unwrap());
            *a += v * two + one;
        }
    }
    let s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    s.reduce_add() + tail.iter().map(|x| x * 2.0 + 1.0).sum::<f32>()
}

/// P2 `sum of x*x where x > 0.5`.
pub fn p2_std(xs: &[f32]) -> f32 {
    xs.iter().filter(|&&x| x > 0.5).map(|x| x * x).sum()
}
pub fn p2_rayon(xs: &[f32]) -> f32 {
    xs.par_iter().filter(|&&x| x > 0.5).map(|x| x * x).sum()
}
pub fn p2_wide(xs: &[f32]) -> f32 {
    let half = f32x8::splat(0.5);
    let mut acc = [f32x8::ZERO; 4];
    let chunks = xs.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for (j, a) in acc.iter_mut().enumerate() {
            let v = f32x8::from(<[f32; 8]>::try_from(&c[j * 8..j * 8 + 8]).unwrap());
            *a += v.simd_gt(half).bitselect(v * v, f32x8::ZERO);
        }
    }
    let s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    s.reduce_add()
        + tail
            .iter()
            .filter(|&&x| x > 0.5)
            .map(|x| x * x)
            .sum::<f32>()
}

/// P3 inclusive prefix sum into a new `Vec`.
pub fn p3_std(xs: &[f32]) -> Vec<f32> {
    xs.iter()
        .scan(0.0f32, |acc, &x| {
            *acc += x;
            Some(*acc)
        })
        .collect()
}
/// Rayon has no scan: two passes over fixed chunks (chunk sums, then
/// chunk-local scans with offsets).
pub fn p3_rayon(xs: &[f32]) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let sums: Vec<f32> = xs.par_chunks(CHUNK).map(|c| c.iter().sum()).collect();
    let mut offsets = Vec::with_capacity(sums.len());
    let mut run = 0.0f32;
    for s in &sums {
        offsets.push(run);
        run += s;
    }
    let mut out = vec![0.0f32; xs.len()];
    out.par_chunks_mut(CHUNK)
        .zip(xs.par_chunks(CHUNK))
        .zip(offsets.par_iter())
        .for_each(|((o, c), &off)| {
            let mut acc = off;
            for (d, &x) in o.iter_mut().zip(c) {
                acc += x;
                *d = acc;
            }
        });
    out
}
/// The hand-written loop: a scan is sequential, so this is the tight
/// scalar loop writing into a preallocated vector.
pub fn p3_wide(xs: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(xs.len());
    let mut acc = 0.0f32;
    for &x in xs {
        acc += x;
        out.push(acc);
    }
    out
}

/// P4 `collect(sqrt(x)*3 - x)`.
pub fn p4_std(xs: &[f32]) -> Vec<f32> {
    xs.iter().map(|x| x.sqrt() * 3.0 - x).collect()
}
pub fn p4_rayon(xs: &[f32]) -> Vec<f32> {
    xs.par_iter().map(|x| x.sqrt() * 3.0 - x).collect()
}
pub fn p4_wide(xs: &[f32]) -> Vec<f32> {
    let three = f32x8::splat(3.0);
    let mut out = vec![0.0f32; xs.len()];
    let n8 = xs.len() / 8 * 8;
    for (o, c) in out[..n8].chunks_exact_mut(8).zip(xs[..n8].chunks_exact(8)) {
        let v = f32x8::from(<[f32; 8]>::try_from(c).unwrap());
        o.copy_from_slice(&(v.sqrt() * three - v).to_array());
    }
    for (o, x) in out[n8..].iter_mut().zip(&xs[n8..]) {
        *o = x.sqrt() * 3.0 - x;
    }
    out
}

/// P5 dot product via zip.
pub fn p5_std(xs: &[f32], ys: &[f32]) -> f32 {
    xs.iter().zip(ys).map(|(a, b)| a * b).sum()
}
pub fn p5_rayon(xs: &[f32], ys: &[f32]) -> f32 {
    xs.par_iter().zip(ys).map(|(a, b)| a * b).sum()
}
pub fn p5_wide(xs: &[f32], ys: &[f32]) -> f32 {
    let n = xs.len().min(ys.len());
    let (xs, ys) = (&xs[..n], &ys[..n]);
    let mut acc = [f32x8::ZERO; 4];
    let n32 = n / 32 * 32;
    for (cx, cy) in xs[..n32].chunks_exact(32).zip(ys[..n32].chunks_exact(32)) {
        for (j, a) in acc.iter_mut().enumerate() {
            let x = f32x8::from(<[f32; 8]>::try_from(&cx[j * 8..j * 8 + 8]).unwrap());
            let y = f32x8::from(<[f32; 8]>::try_from(&cy[j * 8..j * 8 + 8]).unwrap());
            *a += x * y;
        }
    }
    let s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    s.reduce_add()
        + xs[n32..]
            .iter()
            .zip(&ys[n32..])
            .map(|(a, b)| a * b)
            .sum::<f32>()
}

/// Deterministic test data in [0, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The hand-written `wide` loops on every core: rayon over fixed chunks,
/// each chunk the single-threaded loop above. Nothing reads memory faster
/// here, so for the bandwidth-bound reductions this is the ceiling of any
/// program on this machine, computeq included.
const PAR_CHUNK: usize = 1 << 16;
pub fn p1_wide_par(xs: &[f32]) -> f32 {
    xs.par_chunks(PAR_CHUNK).map(p1_wide).sum()
}
pub fn p2_wide_par(xs: &[f32]) -> f32 {
    xs.par_chunks(PAR_CHUNK).map(p2_wide).sum()
}
pub fn p5_wide_par(xs: &[f32], ys: &[f32]) -> f32 {
    let n = xs.len().min(ys.len());
    xs[..n]
        .par_chunks(PAR_CHUNK)
        .zip(ys[..n].par_chunks(PAR_CHUNK))
        .map(|(x, y)| p5_wide(x, y))
        .sum()
}

/// P6 sample variance, in `f64`: the plain loop a user writes is two
/// passes (the mean, then the squared deviations), which the one-pass
/// textbook formula cannot replace on data far from zero.
pub fn p6_std(xs: &[f32]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
    xs.iter()
        .map(|&x| {
            let d = x as f64 - mean;
            d * d
        })
        .sum::<f64>()
        / (n - 1.0)
}
pub fn p6_rayon(xs: &[f32]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.par_iter().map(|&x| x as f64).sum::<f64>() / n;
    xs.par_iter()
        .map(|&x| {
            let d = x as f64 - mean;
            d * d
        })
        .sum::<f64>()
        / (n - 1.0)
}
/// One pass over memory: each block of 1024 summed about its own mean
/// while it is in the cache (`f64x4`, 4 accumulators), blocks merged with
/// Chan's formula: the algorithm computeq's `cpu-simd` uses, by hand.
pub fn p6_wide(xs: &[f32]) -> f64 {
    use wide::f64x4;
    fn sum4(c: &[f32], f: impl Fn(f64x4) -> f64x4) -> f64 {
        let mut acc = [f64x4::ZERO; 4];
        let chunks = c.chunks_exact(16);
        let tail = chunks.remainder();
        for c in chunks {
            for (j, a) in acc.iter_mut().enumerate() {
                let v = f64x4::new([
                    c[j * 4] as f64,
                    c[j * 4 + 1] as f64,
                    c[j * 4 + 2] as f64,
                    c[j * 4 + 3] as f64,
                ]);
                *a += f(v);
            }
        }
        let t: f64 = tail
            .iter()
            .map(|&x| f(f64x4::splat(x as f64)).as_array()[0])
            .sum();
        ((acc[0] + acc[1]) + (acc[2] + acc[3])).reduce_add() + t
    }
    let (mut n, mut mean, mut m2) = (0.0f64, 0.0f64, 0.0f64);
    for b in xs.chunks(1024) {
        let nb = b.len() as f64;
        let mb = sum4(b, |v| v) / nb;
        let m = f64x4::splat(mb);
        let q = sum4(b, |v| (v - m) * (v - m));
        let nn = n + nb;
        let d = mb - mean;
        mean += d * (nb / nn);
        m2 += q + d * d * (n * nb / nn);
        n = nn;
    }
    m2 / (n - 1.0)
}

/// The counts of one-byte keys, four sub-count tables fed byte by byte
/// (one load and one store a key): one thread's share of
/// [`p7_increments_par`].
pub fn p7_increments(keys: &[u8]) -> Vec<u64> {
    let mut sub = [[0u32; 256]; 4];
    let mut q = keys.chunks_exact(4);
    for k in &mut q {
        sub[0][k[0] as usize] += 1;
        sub[1][k[1] as usize] += 1;
        sub[2][k[2] as usize] += 1;
        sub[3][k[3] as usize] += 1;
    }
    for &k in q.remainder() {
        sub[0][k as usize] += 1;
    }
    let mut counts = vec![0u64; 256];
    for s in &sub {
        counts.iter_mut().zip(s).for_each(|(c, &s)| *c += s as u64);
    }
    counts
}

/// P7 `histogram(256, 0, 1)`: the bin formula of computeq's (in `f64`),
/// out-of-range values counted apart (below, above, NaN at the end).
pub fn p7_std(xs: &[f32]) -> Vec<u64> {
    let mut counts = vec![0u64; 259];
    for &x in xs {
        let v = x as f64;
        let k = if v.is_nan() {
            258
        } else if v < 0.0 {
            256
        } else if v >= 1.0 {
            257
        } else {
            ((v * 256.0) as usize).min(255)
        };
        counts[k] += 1;
    }
    counts
}
pub fn p7_rayon(xs: &[f32]) -> Vec<u64> {
    xs.par_chunks(1 << 16).map(p7_std).reduce(
        || vec![0u64; 259],
        |mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            a
        },
    )
}
/// P7's keys (`floor(x * 256)`, clamped to 0..=255) as bytes, computed
/// once outside the timed loop, for [`p7_increments_par`].
pub fn p7_keys(xs: &[f32]) -> Vec<u8> {
    xs.iter()
        .map(|&x| (x * 256.0).floor().clamp(0.0, 255.0) as u8)
        .collect()
}
/// The increments of a histogram alone, on every thread: keys already
/// computed (one byte each, the least memory to read), four sub-count
/// arrays of `u32` per thread so that equal keys in a row increment
/// different memory, the arrays merged at the end. No histogram that
/// increments one counter per value runs faster on this machine.
pub fn p7_increments_par(keys: &[u8]) -> Vec<u64> {
    keys.par_chunks(PAR_CHUNK).map(p7_increments).reduce(
        || vec![0u64; 256],
        |mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            a
        },
    )
}
/// Keys of 8 lanes at a time in `f32x8` (`floor(x * 256)`, clamped, out
/// of range and NaN mapped to their slots), then one increment each.
pub fn p7_wide(xs: &[f32]) -> Vec<u64> {
    let mut counts = vec![0u64; 259];
    let (zero, one, scale) = (f32x8::ZERO, f32x8::splat(1.0), f32x8::splat(256.0));
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let v = f32x8::from(<[f32; 8]>::try_from(c).unwrap());
        let k = (v * scale).floor().min(f32x8::splat(255.0));
        let k = v.simd_lt(zero).bitselect(f32x8::splat(256.0), k);
        let k = v.simd_ge(one).bitselect(f32x8::splat(257.0), k);
        let k = v.simd_eq(v).bitselect(k, f32x8::splat(258.0));
        for &b in k.as_array() {
            counts[b as usize] += 1;
        }
    }
    let t = p7_std(tail);
    counts.iter_mut().zip(t).for_each(|(x, y)| *x += y);
    counts
}
