//! Keyed aggregation of many groups: the rows are scattered into
//! partitions that are ordered ranges of the key, each partition is
//! grouped in a hash table small enough for a core's caches, and the
//! partitions' groups, each sorted by key, are concatenated in order.
//!
//! One hash table of 10^6 groups costs a cache miss per row (the loop a
//! Rust programmer writes with `FxHashMap` spends most of its time there);
//! a partition of 2^16 rows groups in the level-2 cache. The price is one
//! scatter per column the groups read (the key, each aggregate's input,
//! the row numbers when an aggregate answers rows): sequential reads, a
//! few hundred write streams. Each row's partition is computed once (a
//! byte per row, with the counts) and read by every scatter, and each
//! scatter asks for the line a partition writes next ahead of its writes:
//! a write that misses the cache holds up every later one until its line
//! arrives, which made the scatters half of a 10^6-group query's time.
//!
//! The partitions are ranges of key words, so their concatenation is in
//! key order and no sort of all the groups is needed. Their bounds come
//! from a sample of the keys: quantiles over 2^16 equal buckets of the
//! sample's range (a word outside it falls in the first or last bucket,
//! which keeps the map monotone). The same sample estimates the number of
//! groups (Chao1), which decides whether partitioning pays at all.
//!
//! Rows keep their order inside a partition (chunks scatter in order), so
//! every aggregate folds a group's rows in row order: the results equal
//! the one-table path's, bit for bit.

use super::group::{
    f32_group_word, f64_group_word, fused_partition, hash_rows, key_order, normalized,
    with_key_slices, Acc, GroupAgg,
};
use super::radix::{line_ahead, prefetch_write, SharedOut};
use super::sort::gather;
use super::Algorithm;
use crate::semantics::AggKind;
use crate::types::{Column, ColumnRef};
use rayon::prelude::*;
use std::hash::Hash;

/// Inputs shorter than this are grouped in one table.
const MIN_ROWS: usize = 1 << 18;
/// Rows sampled for the estimate and the partition bounds.
const SAMPLE: usize = 1 << 14;
/// Estimated groups from which partitioning pays: a table of 2^17 groups
/// and their accumulators outgrows a core's 2 MiB level-2 cache.
pub(super) const MANY_GROUPS: f64 = (1 << 17) as f64;
/// Rows per partition aimed at.
const PARTITION_ROWS: usize = 1 << 16;
/// At most this many partitions (write streams of one scatter).
const MAX_PARTITIONS: usize = 256;
/// Buckets of the partition map (`u8` partitions, a 64 KiB table).
const BUCKETS: usize = 1 << 16;

/// A key word: ordered like the key's group order.
trait KeyWord: Copy + Eq + Hash + Ord + Send + Sync + Into<u64> {}
impl KeyWord for u32 {}
impl KeyWord for u64 {}

/// Groups the rows by one key into partitions when the sample estimates
/// many groups; `None` when one table is the better plan (few rows or
/// few groups, a dense key range, a `bool` key). The result is what
/// [`super::group::group`] returns: the key column, then one column per
/// aggregate, sorted by key.
pub(super) fn group(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    parallel: bool,
    sampled: Option<&(Sample, Vec<u64>)>,
) -> Option<(Vec<Column>, Algorithm)> {
    // A `bool` key has two groups at most.
    if matches!(key, ColumnRef::Bool(_)) {
        return None;
    }
    let parts = plan(key.len(), sampled?)?;
    with_key_slices!(key, |keys, word| run(
        key, aggs, parallel, &parts, keys, word
    ))
}

/// The map from key words to partitions.
struct Partitions {
    /// The smallest word of the sample.
    lo: u64,
    /// Bucket of a word: `(word - lo) >> shift`, at most `BUCKETS - 1`.
    shift: u32,
    /// Partition of every bucket, non-decreasing.
    of_bucket: Vec<u8>,
    /// Partitions.
    count: usize,
    /// Groups estimated in all.
    groups: f64,
}

impl Partitions {
    #[inline(always)]
    fn of(&self, w: u64) -> usize {
        let b = ((w.saturating_sub(self.lo)) >> self.shift).min(BUCKETS as u64 - 1);
        self.of_bucket[b as usize] as usize
    }
}

/// What a sample of a key's words tells.
#[derive(Copy, Clone, Debug)]
pub(super) struct Sample {
    /// Groups estimated (Chao1, bias-corrected).
    pub groups: f64,
    /// The sample's smallest and largest words.
    pub lo: u64,
    pub hi: u64,
}

/// Samples `SAMPLE` rows evenly spaced; `None` below `MIN_ROWS` rows.
pub(super) fn sample(n: usize, word: &impl Fn(usize) -> u64) -> Option<(Sample, Vec<u64>)> {
    if n < MIN_ROWS {
        return None;
    }
    let stride = n / SAMPLE;
    let mut sample: Vec<u64> = (0..SAMPLE).map(|j| word(j * stride)).collect();
    sample.sort_unstable();
    // Chao1 (bias-corrected): distinct + f1 (f1 - 1) / (2 (f2 + 1)), f1
    // and f2 the sample's words seen once and twice.
    let (mut distinct, mut f1, mut f2) = (0f64, 0f64, 0f64);
    for run in sample.chunk_by(|a, b| a == b) {
        distinct += 1.0;
        match run.len() {
            1 => f1 += 1.0,
            2 => f2 += 1.0,
            _ => {}
        }
    }
    let s = Sample {
        groups: distinct + f1 * (f1 - 1.0) / (2.0 * (f2 + 1.0)),
        lo: sample[0],
        hi: sample[SAMPLE - 1],
    };
    Some((s, sample))
}

/// When the sample of the key's words estimates many groups, maps words
/// to partitions of about equal rows.
fn plan(n: usize, (s, sample): &(Sample, Vec<u64>)) -> Option<Partitions> {
    let (lo, span) = (s.lo, s.hi - s.lo);
    // Dense keys are left to the direct index.
    if s.groups < MANY_GROUPS || super::group::is_dense_span(span, n) {
        return None;
    }
    let shift = (u64::BITS - span.leading_zeros()).saturating_sub(BUCKETS.trailing_zeros());
    let bucket = |w: u64| (((w - lo) >> shift) as usize).min(BUCKETS - 1);
    let want = (n / PARTITION_ROWS).clamp(2, MAX_PARTITIONS);
    // Buckets in order, a new partition each time the sample's share of
    // the rows passes the next multiple of 1 / want.
    let mut per_bucket = vec![0u32; BUCKETS];
    for &w in sample {
        per_bucket[bucket(w)] += 1;
    }
    let mut of_bucket = vec![0u8; BUCKETS];
    let (mut p, mut seen) = (0usize, 0usize);
    for (b, &c) in per_bucket.iter().enumerate() {
        of_bucket[b] = p as u8;
        seen += c as usize;
        if p + 1 < want && seen * want >= (p + 1) * SAMPLE {
            p += 1;
        }
    }
    Some(Partitions {
        lo,
        shift,
        of_bucket,
        count: p + 1,
        groups: s.groups,
    })
}

/// Rows split for the scatters: chunks in row order, and where each
/// chunk's rows of every partition start.
struct Layout {
    chunk: usize,
    /// Per chunk, per partition: the first position its rows take.
    starts: Vec<Vec<usize>>,
    /// Per partition: its range of positions.
    bounds: Vec<std::ops::Range<usize>>,
    /// The partition of every row (at most `MAX_PARTITIONS`, so a byte):
    /// computed once here, read by every scatter.
    of_row: Vec<u8>,
}

impl Layout {
    /// Rows of chunk `c`.
    fn rows(&self, c: usize) -> std::ops::Range<usize> {
        let n = self.of_row.len();
        (c * self.chunk).min(n)..((c + 1) * self.chunk).min(n)
    }
}

/// Writes the partition of each of `keys` into `out` (as long) and
/// returns the rows per partition. `out` is an argument of its own (a
/// slice nothing else can reach), so its writes do not make the loop
/// reload the map or the keys per row.
fn count_partitions<K: Copy, W: KeyWord>(
    out: &mut [u8],
    keys: &[K],
    word: &impl Fn(K) -> W,
    parts: &Partitions,
) -> [usize; MAX_PARTITIONS] {
    let mut k = [0usize; MAX_PARTITIONS];
    for (o, &x) in out.iter_mut().zip(keys) {
        let p = parts.of(word(x).into()) as u8;
        *o = p;
        k[p as usize] += 1;
    }
    k
}

fn layout<K: Copy + Sync, W: KeyWord>(
    keys: &[K],
    word: impl Fn(K) -> W + Sync,
    parts: &Partitions,
    parallel: bool,
) -> Layout {
    let n = keys.len();
    debug_assert!(parts.count <= MAX_PARTITIONS);
    let threads = if parallel {
        rayon::current_num_threads().max(1)
    } else {
        1
    };
    let chunk = n.div_ceil(threads).max(1);
    let mut of_row = vec![0u8; n];
    let count = |(c, out): (usize, &mut [u8])| {
        let start = c * chunk;
        let rows = &keys[start..start + out.len()];
        count_partitions(out, rows, &word, parts)[..parts.count].to_vec()
    };
    let counts: Vec<Vec<usize>> = if parallel {
        of_row
            .par_chunks_mut(chunk)
            .enumerate()
            .map(count)
            .collect()
    } else {
        of_row.chunks_mut(chunk).enumerate().map(count).collect()
    };
    let parts = parts.count;
    let chunks = counts.len();
    let mut starts = vec![vec![0usize; parts]; chunks];
    let mut bounds = Vec::with_capacity(parts);
    let mut at = 0;
    for p in 0..parts {
        let first = at;
        for (s, k) in starts.iter_mut().zip(&counts) {
            s[p] = at;
            at += k[p];
        }
        bounds.push(first..at);
    }
    Layout {
        chunk,
        starts,
        bounds,
        of_row,
    }
}

/// The values `vals` gives for each chunk's rows (in row order), every one
/// at its row's position in partition order.
///
/// The loop reads the rows' partitions and values through iterators and
/// keeps its write positions in a local array, so nothing it needs per
/// row is reloaded from memory its writes could have changed; and it asks
/// for each partition's next line ahead of its writes, which is what made
/// it fast (`docs/performance.md`, "Scatters that ask for their next
/// line": the scatters of a 10^6-group query went from half its time to
/// a quarter).
fn scatter<T: Copy + Send + Sync, I: Iterator<Item = T>>(
    lay: &Layout,
    vals: impl Fn(std::ops::Range<usize>) -> I + Sync,
    parallel: bool,
) -> Vec<T> {
    let n = lay.of_row.len();
    let mut out: Vec<T> = Vec::with_capacity(n);
    let bytes = n * std::mem::size_of::<T>();
    if bytes >= crate::types::HUGE_PAGE_MIN_BYTES {
        // SAFETY: the range is this vector's own (unused) allocation.
        unsafe { crate::types::advise_huge_pages(out.as_ptr().cast(), bytes) };
    }
    // Borrowed whole (a closure would capture the bare pointer field).
    let dst = &SharedOut(out.as_mut_ptr(), n);
    let ahead = line_ahead::<T>();
    let run = |(c, s): (usize, &Vec<usize>)| {
        let mut at = [0usize; MAX_PARTITIONS];
        at[..s.len()].copy_from_slice(s);
        let rows = lay.rows(c);
        let (ptr, len) = (dst.0, dst.1);
        let mut written = 0;
        for (&p, v) in lay.of_row[rows.clone()].iter().zip(vals(rows.clone())) {
            let i = at[p as usize];
            at[p as usize] = i + 1;
            assert!(i < len, "scatter out of bounds");
            // The line this partition's writes reach next: asked for now,
            // it is in the core's cache by then (a write that misses
            // holds up every later write until its line arrives).
            prefetch_write(ptr.wrapping_add(i + ahead));
            // SAFETY: in bounds (checked); chunk `c` owns positions
            // `s[p]..` up to its count of partition `p` (which `layout`
            // counted from the same `of_row`), disjoint from every other
            // chunk's.
            unsafe { ptr.add(i).write(v) };
            written += 1;
        }
        // Every row of the chunk had a value (a short one would leave a
        // position unwritten).
        assert_eq!(written, rows.len(), "a scatter's values ran short");
    };
    if parallel {
        lay.starts.par_iter().enumerate().for_each(run);
    } else {
        lay.starts.iter().enumerate().for_each(run);
    }
    // SAFETY: the chunks' positions cover `0..n` (the counts sum to `n`),
    // each written once above.
    unsafe { out.set_len(n) };
    out
}

/// A column scattered into partition order (as long as the key `lay`
/// was made for).
fn scatter_column(col: ColumnRef<'_>, lay: &Layout, parallel: bool) -> Column {
    macro_rules! of {
        ($v:expr) => {
            scatter(lay, |r| $v[r].iter().copied(), parallel)
        };
    }
    match col {
        ColumnRef::Bool(v) => Column::Bool(of!(v)),
        ColumnRef::I32(v) => Column::I32(of!(v)),
        ColumnRef::U32(v) => Column::U32(of!(v)),
        ColumnRef::I64(v) => Column::I64(of!(v)),
        ColumnRef::U64(v) => Column::U64(of!(v)),
        ColumnRef::F32(v) => Column::F32(of!(v)),
        ColumnRef::F64(v) => Column::F64(of!(v)),
    }
}

fn run<K: Copy + Sync, W: KeyWord>(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    parallel: bool,
    parts: &Partitions,
    keys: &[K],
    word: impl Fn(K) -> W + Sync,
) -> Option<(Vec<Column>, Algorithm)> {
    let n = key.len();
    // The scatters fill every position of `0..n` by the key's rows: the
    // aggregates' columns must be as long (a stage's columns are).
    if aggs.iter().any(|a| a.col.is_some_and(|c| c.len() != n)) {
        return None;
    }
    let lay = layout(keys, word, parts, parallel);
    let keys = scatter_column(key, &lay, parallel);
    let cols: Vec<Option<Column>> = aggs
        .iter()
        .map(|a| a.col.map(|c| scatter_column(c, &lay, parallel)))
        .collect();
    // Rows only for the aggregates that answer them.
    let answers_rows = aggs
        .iter()
        .any(|a| matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax));
    // Groups expected per partition (the tables are made that large).
    let cap = (parts.groups / parts.count as f64).clamp(16.0, PARTITION_ROWS as f64) as usize;
    let rows: Vec<u32> = if answers_rows {
        scatter(&lay, |r| (r.start as u32)..(r.end as u32), parallel)
    } else {
        Vec::new()
    };
    let one = |r: &std::ops::Range<usize>| {
        let local: Vec<GroupAgg<'_>> = aggs
            .iter()
            .zip(&cols)
            .map(|(a, c)| GroupAgg {
                kind: a.kind.clone(),
                col: c.as_ref().map(|c| c.as_ref().slice(r.clone())),
            })
            .collect();
        let rows = rows.get(r.clone()).unwrap_or(&[]);
        one_partition(keys.as_ref().slice(r.clone()), &local, rows, cap)
    };
    let outs: Vec<Vec<Column>> = if parallel {
        lay.bounds.par_iter().map(one).collect()
    } else {
        lay.bounds.iter().map(one).collect()
    };
    let columns = (0..1 + aggs.len())
        .map(|c| concat(outs.iter().map(|o| &o[c])))
        .collect();
    Some((
        columns,
        Algorithm::PartitionedGroups {
            partitions: parts.count as u32,
        },
    ))
}

/// The groups of one partition, sorted by key: the key column, then one
/// column per aggregate. `rows`: the partition's original row numbers
/// (present when an aggregate answers rows).
fn one_partition(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    rows: &[u32],
    cap: usize,
) -> Vec<Column> {
    let len = key.len();
    // One count, sum, min or max: folded in the probe's pass. (Several
    // are cheaper numbered once here, where a partition's table holds
    // thousands of groups: a pass each measured 1.2-1.4x slower at 10^7
    // rows of 10^6 keys.)
    if let [_] = aggs {
        if let Some((g, cols)) = fused_partition(key, aggs, cap) {
            let order = key_order(&g.words, super::group::bits(key.dtype()));
            let firsts: Vec<u32> = order.iter().map(|&i| g.first[i as usize] as u32).collect();
            let mut out = vec![normalized(gather(key, &firsts))];
            out.extend(cols.iter().map(|c| gather(c.as_ref(), &order)));
            return out;
        }
    }
    let want_ids = !aggs.is_empty();
    let (ids, groups) = with_key_slices!(key, |keys, word| {
        widen(hash_rows(0, want_ids, keys.iter().map(|&x| word(x))))
    });
    let words: Vec<u128> = groups.iter().map(|g| g.0 as u128).collect();
    let order = key_order(&words, super::group::bits(key.dtype()));
    let first_local: Vec<usize> = groups.iter().map(|g| g.1).collect();
    let firsts: Vec<u32> = order
        .iter()
        .map(|&g| first_local[g as usize] as u32)
        .collect();
    let mut out = vec![normalized(gather(key, &firsts))];
    // The first row of every group in the input's numbering (a group of
    // NaNs answers it for argmin / argmax).
    let first_rows: Vec<usize> = if rows.is_empty() {
        first_local.clone()
    } else {
        first_local.iter().map(|&f| rows[f] as usize).collect()
    };
    for a in aggs {
        let mut acc = Acc::new(a, groups.len());
        acc.fold(a, &ids, 0, len);
        if let Acc::Best(b) = &mut acc {
            for (_, at) in b.iter_mut().flatten() {
                *at = rows[*at] as usize;
            }
        }
        out.push(acc.finish(a, &order, &first_rows));
    }
    out
}

/// A partition's groups with their words widened to `u64`.
fn widen<W: Into<u64>>(
    (ids, groups): (Vec<u32>, Vec<(W, usize)>),
) -> (Vec<u32>, Vec<(u64, usize)>) {
    (
        ids,
        groups.into_iter().map(|(w, f)| (w.into(), f)).collect(),
    )
}

/// Columns of one type, one after the other.
fn concat<'a>(parts: impl Iterator<Item = &'a Column> + Clone) -> Column {
    let len = parts.clone().map(Column::len).sum();
    let mut parts = parts.peekable();
    let ty = parts.peek().map_or(crate::types::DType::U64, |c| c.dtype());
    let mut out = Column::for_output(ty, len);
    for p in parts {
        out.append(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` words from `distinct` random ones.
    fn keys(n: usize, distinct: u64, seed: u64) -> Vec<u64> {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let pool: Vec<u64> = (0..distinct).map(|_| next()).collect();
        (0..n).map(|_| pool[(next() % distinct) as usize]).collect()
    }

    #[test]
    fn the_sample_tells_many_groups_from_few() {
        let n = 1 << 20;
        let few = keys(n, 1000, 3);
        assert!(
            plan(n, &sample(n, &|i| few[i]).unwrap()).is_none(),
            "10^3 groups: one table"
        );
        let many = keys(n, 500_000, 5);
        let p = plan(n, &sample(n, &|i| many[i]).unwrap()).expect("5 * 10^5 groups: partitions");
        assert_eq!(p.count, n / PARTITION_ROWS);
        // Dense keys are left to the direct index.
        assert!(plan(n, &sample(n, &|i| i as u64).unwrap()).is_none());
    }

    #[test]
    fn partitions_are_ordered_ranges_of_about_equal_rows() {
        let n = 1 << 20;
        let v = keys(n, 1 << 20, 7);
        let p = plan(n, &sample(n, &|i| v[i]).unwrap()).expect("many groups");
        let mut by: Vec<(u64, usize)> = v.iter().map(|&w| (w, p.of(w))).collect();
        by.sort_unstable();
        assert!(
            by.windows(2).all(|w| w[0].1 <= w[1].1),
            "monotone in the word"
        );
        let mut rows = vec![0usize; p.count];
        for &(_, q) in &by {
            rows[q] += 1;
        }
        let even = n / p.count;
        assert!(
            rows.iter().all(|&r| r > even / 2 && r < even * 2),
            "{rows:?}"
        );
        // Words outside the sample's range go to the end partitions.
        assert_eq!(p.of(0), 0);
        assert_eq!(p.of(u64::MAX), p.count - 1);
    }
}
