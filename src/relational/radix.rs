//! LSD radix sort with 8-bit digits over unsigned words, and its parallel
//! form: an MSD partition on the 8 bits below the highest bit that varies
//! across threads, then LSD inside every bucket.
//!
//! One counting pass finds the histograms of every digit; a digit that is
//! the same in every word is skipped (keys of a small range, the position
//! half of a `(key, position)` word). Each remaining digit is one stable
//! scatter, so the sort is stable and ties keep their order.

use rayon::prelude::*;

/// An unsigned word sorted by its bytes.
pub(crate) trait Word:
    Copy
    + Ord
    + Send
    + Sync
    + Default
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
    + 'static
{
    /// Byte `d` (0: least significant).
    #[inline(always)]
    fn byte(self, d: usize) -> usize {
        self.bits8(8 * d as u32)
    }
    /// The 8 bits from bit `shift` up.
    fn bits8(self, shift: u32) -> usize;
    /// The highest set bit of bits `lo..hi`, if any.
    fn top_bit(self, lo: u32, hi: u32) -> Option<u32>;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn bits8(self, shift: u32) -> usize {
                ((self >> shift) & 0xff) as usize
            }
            fn top_bit(self, lo: u32, hi: u32) -> Option<u32> {
                let below_hi = if hi >= <$t>::BITS {
                    self
                } else {
                    self & ((1 << hi) - 1)
                };
                let x = below_hi.checked_shr(lo).unwrap_or(0);
                (x != 0).then(|| lo + <$t>::BITS - 1 - x.leading_zeros())
            }
        }
    )*};
}
word!(u32, u64, u128);

pub(crate) use crate::metrics::Passes;

/// A buffer of `n` words for the scatters (huge pages when large).
pub(crate) fn scratch<W: Word>(n: usize) -> Vec<W> {
    let v = vec![W::default(); n];
    let bytes = n * std::mem::size_of::<W>();
    if bytes >= crate::types::HUGE_PAGE_MIN_BYTES {
        // SAFETY: the range is this vector's own allocation.
        unsafe { crate::types::advise_huge_pages(v.as_ptr().cast(), bytes) };
    }
    v
}

/// `f` of every element of `src`: in a zeroed buffer advised to use huge
/// pages when large (its first touch faults a few large pages rather than
/// thousands of small ones), filled across threads when `parallel`.
pub(crate) fn map_slice<T, U>(src: &[T], parallel: bool, f: impl Fn(T) -> U + Sync) -> Vec<U>
where
    T: Copy + Sync,
    U: Copy + Default + Send,
{
    let n = src.len();
    let mut v: Vec<U> = vec![U::default(); n];
    let bytes = n * std::mem::size_of::<U>();
    if bytes >= crate::types::HUGE_PAGE_MIN_BYTES {
        // SAFETY: the range is this vector's own allocation.
        unsafe { crate::types::advise_huge_pages(v.as_ptr().cast(), bytes) };
    }
    zip_apply(&mut v, src, parallel, |d, s| *d = f(s));
    v
}

/// `f(&mut dst[i], src[i])` for every position both have, in chunks
/// across threads when `parallel` and long enough.
pub(crate) fn zip_apply<T, U>(
    dst: &mut [U],
    src: &[T],
    parallel: bool,
    f: impl Fn(&mut U, T) + Sync,
) where
    T: Copy + Sync,
    U: Send,
{
    const CHUNK: usize = 1 << 16;
    let apply = |(d, s): (&mut [U], &[T])| {
        for (d, &s) in d.iter_mut().zip(s) {
            f(d, s);
        }
    };
    if parallel && dst.len() >= 2 * CHUNK {
        dst.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(apply);
    } else {
        apply((dst, src));
    }
}

/// Histograms of digits `digits` of `v`, one per digit: one pass, the
/// counts of every digit kept on the stack (the digits unrolled).
fn histograms<W: Word>(v: &[W], digits: std::ops::Range<usize>) -> Vec<[usize; 256]> {
    let s = digits.start;
    match digits.len() {
        0 => Vec::new(),
        1 => hist_n::<W, 1>(v, s),
        2 => hist_n::<W, 2>(v, s),
        3 => hist_n::<W, 3>(v, s),
        4 => hist_n::<W, 4>(v, s),
        5 => hist_n::<W, 5>(v, s),
        6 => hist_n::<W, 6>(v, s),
        7 => hist_n::<W, 7>(v, s),
        8 => hist_n::<W, 8>(v, s),
        _ => {
            // Wider words (`u128` keys of 16 bytes): digits in groups of
            // eight.
            let mut h = Vec::with_capacity(digits.len());
            let mut d = s;
            while d < digits.end {
                let k = (digits.end - d).min(8);
                h.extend(histograms(v, d..d + k));
                d += k;
            }
            h
        }
    }
}

fn hist_n<W: Word, const D: usize>(v: &[W], start: usize) -> Vec<[usize; 256]> {
    // `u32` counts (chunks of fewer than 2^32 words) are half the cache
    // footprint of `usize` ones.
    let mut h = vec![[0usize; 256]; D];
    for chunk in v.chunks(u32::MAX as usize) {
        let mut c = [[0u32; 256]; D];
        for &w in chunk {
            for (k, ck) in c.iter_mut().enumerate() {
                ck[w.byte(start + k)] += 1;
            }
        }
        for (hk, ck) in h.iter_mut().zip(&c) {
            for (a, b) in hk.iter_mut().zip(ck) {
                *a += *b as usize;
            }
        }
    }
    h
}

/// Stably scatters `src` into `dst` by digit `d`, bucket `b` starting at
/// `offsets[b]`.
///
/// `offsets` must be the exclusive prefix sums of the counts of digit `d`
/// over `src` itself, and `dst` as long as `src`: then every write lands
/// inside `dst`, each position once.
#[inline]
fn scatter<W: Word>(src: &[W], dst: &mut [W], d: usize, offsets: &mut [usize; 256]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "scatter between buffers of one length"
    );
    let out = dst.as_mut_ptr();
    let ahead = line_ahead::<W>();
    for &w in src {
        let b = w.byte(d);
        let at = offsets[b];
        prefetch_write(out.wrapping_add(at + ahead));
        // SAFETY: bucket `b` holds exactly as many words of `src` as its
        // count, so `at` stays below the next bucket's start, at most
        // `src.len() == dst.len()` (the contract above).
        unsafe { out.add(at).write(w) };
        offsets[b] = at + 1;
    }
}

/// Elements of `T` in a cache line: how far ahead of a bucket's writes
/// its next line starts.
#[inline(always)]
pub(super) fn line_ahead<T>() -> usize {
    (64 / std::mem::size_of::<T>().max(1)).max(1)
}

/// Hints that the cache line at `at` will be written soon. A hint only:
/// it cannot fault, whatever the address, and changes nothing the program
/// sees. A scatter asks for the line each bucket writes next this way: a
/// write that misses the cache holds up every later write until its line
/// arrives, and with hundreds of buckets most lines are not there yet
/// (10^6 groups in key-range partitions: the two scatters went from half
/// of the query's time to a quarter).
#[inline(always)]
pub(super) fn prefetch_write<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: SSE is part of x86-64's baseline, and a prefetch of any
        // address neither faults nor writes.
        unsafe { _mm_prefetch::<_MM_HINT_ET0>(at.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

fn exclusive(counts: &[usize; 256]) -> [usize; 256] {
    let mut o = [0usize; 256];
    let mut sum = 0;
    for b in 0..256 {
        o[b] = sum;
        sum += counts[b];
    }
    o
}

/// Sorts `v` stably by digits `digits` (bytes, least significant first),
/// using `tmp` (same length) as scratch; the result is in `v`.
pub(crate) fn lsd<W: Word>(v: &mut [W], tmp: &mut [W], digits: std::ops::Range<usize>) -> Passes {
    let (done, in_tmp) = lsd_into(v, tmp, digits);
    if in_tmp {
        v.copy_from_slice(tmp);
    }
    done
}

/// [`lsd`], leaving the result where the last scatter wrote it: in `tmp`
/// when the second value is true.
fn lsd_into<W: Word>(v: &mut [W], tmp: &mut [W], digits: std::ops::Range<usize>) -> (Passes, bool) {
    let n = v.len();
    let mut done = Passes {
        passes: 0,
        digits: digits.len() as u8,
    };
    if n < 2 {
        return (done, false);
    }
    let hist = histograms(v, digits.clone());
    let (mut src, mut dst) = (&mut *v, &mut *tmp);
    for (k, d) in digits.enumerate() {
        if hist[k].contains(&n) {
            continue;
        }
        let mut o = exclusive(&hist[k]);
        scatter(src, dst, d, &mut o);
        std::mem::swap(&mut src, &mut dst);
        done.passes += 1;
    }
    (done, done.passes % 2 == 1)
}

/// The counts of the 8 bits from bit `shift` over `c`, and the AND and
/// the OR of its words (the bits where they differ tell which are
/// constant).
fn top_counts<W: Word>(c: &[W], shift: u32) -> ([usize; 256], W, W) {
    let mut h = [0u32; 256];
    let (mut and, mut or) = (!W::default(), W::default());
    for &w in c {
        h[w.bits8(shift)] += 1;
        and = and & w;
        or = or | w;
    }
    (h.map(|x| x as usize), and, or)
}

/// Words below which `cpu-parallel` sorts with [`lsd`] on the calling
/// thread rather than [`msd_lsd`]: the partition's own work (its scatter,
/// a histogram of up to three digits and their offsets in each of 256
/// buckets, the pool's wake-ups) is more than the second thread saves
/// below it. Measured on two cores (random `u32` keys, interleaved
/// rounds): the partition took 1.4-1.5x the one-thread sort's time at
/// 10^5, 1.1-1.3x at 3·10^5 and 6·10^5, 0.75-1.0x at 10^6 and 0.7-0.8x at
/// 3·10^6 (docs/performance.md, "Parallel sorts from 2^20 rows").
/// The cost model prices `cpu-parallel`'s sorts by it
/// (`cost::PARALLEL_SORT_MIN`, checked equal in the tests).
pub(crate) const MSD_MIN: usize = 1 << 20;

/// [`lsd`] across threads: chunks count their top-digit buckets and
/// scatter into them in chunk order (stable), then each bucket is sorted
/// by the lower digits on its own. Returns the sorted words.
pub(crate) fn msd_lsd<W: Word>(mut v: Vec<W>, digits: std::ops::Range<usize>) -> (Vec<W>, Passes) {
    let n = v.len();
    let threads = rayon::current_num_threads().max(1);
    let chunk = n.div_ceil(threads * 4).max(1 << 14);
    let none = Passes {
        passes: 0,
        digits: digits.len() as u8,
    };
    // (The chunks count in `u32`: more words than that sort on one
    // thread.)
    if n < 2 || digits.is_empty() || n > u32::MAX as usize {
        let mut tmp = scratch(n);
        let p = lsd(&mut v, &mut tmp, digits);
        return (v, p);
    }
    // Per chunk, in parallel: the counts of the top byte, and which bits
    // vary. The buckets are the 8 bits below the highest bit that varies
    // (counted again when that is not the top byte's): keys of a small
    // range, or floats of a few exponents, still spread over 256 buckets
    // rather than the few values their highest varying byte takes.
    let count = |shift: u32| -> Vec<([usize; 256], W, W)> {
        v.par_chunks(chunk).map(|c| top_counts(c, shift)).collect()
    };
    let (lo, hi) = (8 * digits.start as u32, 8 * digits.end as u32);
    let mut per_chunk = count(hi - 8);
    let (and, or) = per_chunk
        .iter()
        .fold((!W::default(), W::default()), |(a, o), c| {
            (a & c.1, o | c.2)
        });
    let Some(top) = (and ^ or).top_bit(lo, hi) else {
        return (v, none);
    };
    let shift = top.saturating_sub(7).max(lo);
    if shift != hi - 8 {
        per_chunk = count(shift);
    }
    let mut total = [0usize; 256];
    for (h, _, _) in &per_chunk {
        for b in 0..256 {
            total[b] += h[b];
        }
    }
    // Each chunk's start in every bucket: the bucket's start plus the
    // earlier chunks' counts in it.
    let mut starts: Vec<[usize; 256]> = Vec::with_capacity(per_chunk.len());
    let mut run = exclusive(&total);
    for (h, _, _) in &per_chunk {
        starts.push(run);
        for b in 0..256 {
            run[b] += h[b];
        }
    }
    let mut dst: Vec<W> = scratch(n);
    {
        let out = SharedOut(dst.as_mut_ptr(), n);
        let ahead = line_ahead::<W>();
        v.par_chunks(chunk)
            .zip(starts.par_iter())
            .for_each(|(c, s)| {
                let mut o = *s;
                for &w in c {
                    let b = w.bits8(shift);
                    prefetch_write(out.0.wrapping_add(o[b] + ahead));
                    // SAFETY: chunk `c` owns positions `s[b]..s[b] + its
                    // count of bucket b` of every bucket, disjoint from
                    // every other chunk's, all below `n`.
                    unsafe { out.write(o[b], w) };
                    o[b] += 1;
                }
            });
    }
    // Every bucket on its own, by the bytes with bits below the buckets'
    // (a byte that overlaps them is constant in a bucket there); the
    // sorted words end in `dst` or, after an odd number of passes, in
    // `v`: the buffer most buckets end in is the result, the others are
    // copied into it.
    let lower = digits.start..(shift as usize).div_ceil(8);
    let mut buckets: Vec<(&mut [W], &mut [W])> = Vec::with_capacity(256);
    let (mut rest, mut spare) = (&mut dst[..], &mut v[..]);
    for &count in &total {
        let (a, r) = rest.split_at_mut(count);
        let (t, s) = spare.split_at_mut(count);
        rest = r;
        spare = s;
        buckets.push((a, t));
    }
    let ends: Vec<(u8, bool)> = buckets
        .par_iter_mut()
        .map(|(a, t)| {
            let (p, in_tmp) = lsd_into(a, t, lower.clone());
            (p.passes, in_tmp)
        })
        .collect();
    let in_v = ends.iter().filter(|e| e.1).count() * 2 > ends.len();
    buckets
        .par_iter_mut()
        .zip(&ends)
        .filter(|(_, e)| e.1 != in_v)
        .for_each(|((a, t), _)| {
            if in_v {
                t.copy_from_slice(a);
            } else {
                a.copy_from_slice(t);
            }
        });
    drop(buckets);
    let inner = ends.iter().map(|e| e.0).max().unwrap_or(0);
    (
        if in_v { v } else { dst },
        Passes {
            passes: 1 + inner,
            digits: digits.len() as u8,
        },
    )
}

/// An output buffer written by several threads at disjoint positions.
pub(super) struct SharedOut<W>(pub(super) *mut W, pub(super) usize);
// SAFETY: writers touch disjoint positions (see `msd_lsd`).
unsafe impl<W: Send> Sync for SharedOut<W> {}
unsafe impl<W: Send> Send for SharedOut<W> {}

impl<W> SharedOut<W> {
    /// # Safety
    /// `i < len`, and no other thread writes position `i`.
    pub(super) unsafe fn write(&self, i: usize, w: W) {
        assert!(i < self.1, "scatter out of bounds");
        // SAFETY: in bounds (checked) and exclusive (the caller's promise).
        unsafe { self.0.add(i).write(w) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_prices_the_partition_from_where_it_starts() {
        assert_eq!(crate::cost::PARALLEL_SORT_MIN, MSD_MIN as f64);
    }

    fn words(n: usize, seed: u64, mask: u64) -> Vec<u64> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((s >> 33) & mask) << 32) | i as u64
            })
            .collect()
    }

    #[test]
    fn lsd_and_msd_lsd_sort_like_the_standard_sort() {
        for (n, mask) in [
            (0, 0xff),
            (1, 0xff),
            (1000, 0xffff_ffff),
            (70_000, 0xff),
            (70_000, 0xf0f0),
            // Two varying digits below the top one: an even number of
            // passes leaves the buckets in the top scatter's buffer.
            (70_000, 0x00ff_ffff),
        ] {
            let v = words(n, n as u64 + 7, mask);
            let mut want = v.clone();
            want.sort_unstable();
            let mut a = v.clone();
            let mut t = vec![0; n];
            let p = lsd(&mut a, &mut t, 4..8);
            assert_eq!(a, want, "lsd n={n}");
            assert!(p.passes <= 4);
            let (b, _) = msd_lsd(v, 4..8);
            assert_eq!(b, want, "msd_lsd n={n}");
        }
        // Buckets that end in different buffers: the top digit's bucket 0
        // has one word repeated (no lower pass), the others random lower
        // digits (three passes); and keys with a constant top digit.
        let mut st = 99u32;
        let mixed: Vec<u32> = (0..100_000u32)
            .map(|i| {
                st = st.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                if i % 3 == 0 {
                    0x0012_3456
                } else {
                    st | 0x0100_0000
                }
            })
            .collect();
        // Buckets that are not bytes: keys below 2^20 (bits 12..20), and
        // the words of floats in [0, 1) (a few exponents: bits 19..27).
        let small: Vec<u32> = mixed.iter().map(|&w| w & 0x000f_ffff).collect();
        let floats: Vec<u32> = mixed
            .iter()
            .map(|&w| crate::semantics::order::f32_word((w >> 8) as f32 / (1 << 24) as f32))
            .collect();
        for v in [
            mixed.clone(),
            mixed.iter().map(|&w| w & 0x00ff_ffff).collect(),
            small,
            floats,
        ] {
            let mut want = v.clone();
            want.sort_unstable();
            let (got, p) = msd_lsd(v, 0..4);
            assert_eq!(got, want, "msd_lsd of mixed buckets");
            assert!(p.passes <= 4);
        }
        // A key range of one byte needs one pass.
        let mut a = words(5000, 3, 0xff);
        let mut t = vec![0; 5000];
        assert_eq!(lsd(&mut a, &mut t, 4..8).passes, 1);
    }
}
