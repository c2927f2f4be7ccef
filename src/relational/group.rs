//! Keyed aggregation: `group_by(..)` with its aggregates, `distinct`,
//! `count_distinct` and `value_counts`.
//!
//! Four plans, chosen from the key (and a sample of it, from 2^18 rows):
//!
//! - **The distinct values of mostly distinct rows** (one key, no
//!   aggregates, an estimated group per four rows or more, not dense): the
//!   key's group words radix-sorted, each run kept once
//!   ([`super::sort::sorted_distinct`]).
//! - **Many groups** (an estimated 2^17 or more): the rows are scattered
//!   into key-range partitions each grouped in its own cache-sized table
//!   ([`super::partition`]).
//! - **One key and one count, sum, min or max, few groups**: grouped and
//!   folded in one pass per thread, the accumulator in a cuckoo table
//!   beside its key ([`super::slots`]: two loads and a select per row, no
//!   probe loop; `cpu-parallel`: one table per chunk of rows, merged in
//!   chunk order).
//! - **Otherwise** every row gets a group index, by a direct index (the
//!   key's word minus the smallest, when the keys span a small dense
//!   range: no hashing at all) or a hash table from key words to groups in
//!   first-appearance order (`cpu-parallel`: one table per chunk of rows,
//!   merged in chunk order); the aggregates then accumulate per group in
//!   typed arrays (`cpu-parallel`: per chunk, merged in chunk order).
//!
//! Keys compare as group keys (`-0.0` is `+0.0`, every NaN one key); the
//! groups come out sorted by key in the canonical order (packed
//! `(word, group)` integers sorted), or in the order of their first row.

use super::partition::Sample;
use super::slots::{SlotWord, Slots};
use super::sort::gather;
use super::{Algorithm, Strategy};
use crate::expr::eval;
use crate::expr::BinaryOp;
use crate::semantics::order;
use crate::semantics::{agg_identity, arg_better, AggKind, Moments};
use crate::types::{Column, ColumnRef, DType, Fault, Scalar};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::hash::Hash;

/// `distinct` of one key sorts its words when the sample estimates at
/// least one group per this many rows (see [`group`]).
const SORTED_DISTINCT: f64 = 4.0;

/// Keys spanning at most this many values (and at most a few per row)
/// are indexed directly.
const DENSE_SPAN: u64 = 1 << 22;

/// Whether keys whose words span `span` (largest minus smallest) over
/// `n` rows are dense: the direct index counts them, with no hashing,
/// partitioning or sorting.
pub(super) fn is_dense_span(span: u64, n: usize) -> bool {
    span < DENSE_SPAN && span <= 4 * n as u64 + 1024
}

/// One aggregate of a group: its kind and its input column.
#[derive(Clone, Debug)]
pub(crate) struct GroupAgg<'a> {
    pub kind: AggKind,
    pub col: Option<ColumnRef<'a>>,
}

/// The group word of row `i` of a key: order-preserving, `-0.0` as
/// `+0.0` (NaN is already one word).
#[inline(always)]
pub(super) fn group_word(col: ColumnRef<'_>, i: usize) -> u64 {
    match col {
        ColumnRef::F32(v) => f32_group_word(v[i]),
        ColumnRef::F64(v) => f64_group_word(v[i]),
        ColumnRef::U32(v) => v[i] as u64,
        ColumnRef::I32(v) => (v[i] as u32 ^ 0x8000_0000) as u64,
        ColumnRef::U64(v) => v[i],
        ColumnRef::I64(v) => v[i] as u64 ^ (1 << 63),
        ColumnRef::Bool(v) => v[i] as u64,
    }
}

/// `$body` with `$keys` bound to the key column `$col`'s slice and
/// `$word` to the closure from one key to its group word: `-> u32` for
/// 32-bit and `bool` keys, `-> u64` for 64-bit ones, ordered as
/// [`group_word`]. One match per column, each arm its own loop (no match
/// per row).
macro_rules! with_key_slices {
    ($col:expr, |$keys:ident, $word:ident| $body:expr) => {
        match $col {
            ColumnRef::F32(v) => {
                let ($keys, $word) = (v, |x: f32| f32_group_word(x) as u32);
                $body
            }
            ColumnRef::U32(v) => {
                let ($keys, $word) = (v, |x: u32| x);
                $body
            }
            ColumnRef::I32(v) => {
                let ($keys, $word) = (v, |x: i32| x as u32 ^ 0x8000_0000);
                $body
            }
            ColumnRef::Bool(v) => {
                let ($keys, $word) = (v, |x: bool| x as u32);
                $body
            }
            ColumnRef::F64(v) => {
                let ($keys, $word) = (v, |x: f64| f64_group_word(x));
                $body
            }
            ColumnRef::U64(v) => {
                let ($keys, $word) = (v, |x: u64| x);
                $body
            }
            ColumnRef::I64(v) => {
                let ($keys, $word) = (v, |x: i64| x as u64 ^ (1 << 63));
                $body
            }
        }
    };
}

pub(super) use with_key_slices;

#[inline(always)]
pub(crate) fn f32_group_word(x: f32) -> u64 {
    order::f32_word(if x == 0.0 { 0.0 } else { x }) as u64
}

#[inline(always)]
pub(crate) fn f64_group_word(x: f64) -> u64 {
    order::f64_word(if x == 0.0 { 0.0 } else { x })
}

pub(super) fn bits(ty: DType) -> u32 {
    if order::is_narrow(ty) {
        32
    } else {
        64
    }
}

/// Rows grouped: each row's group, and per group its first row.
pub(super) struct Grouping {
    /// Group of every row.
    ids: Vec<u32>,
    /// First row of every group, by group.
    pub(super) first: Vec<usize>,
    /// The group's key words (for the sorted order), by group.
    pub(super) words: Vec<u128>,
    algorithm: Algorithm,
}

/// Groups the rows of `keys` (at most 128 bits of words together).
/// `ids`: whether the rows' groups are wanted (not for `distinct`).
fn grouping(keys: &[ColumnRef<'_>], n: usize, parallel: bool, ids: bool) -> Grouping {
    if let [k] = keys {
        // The 32-bit arms widen their words; the 64-bit arms' `from` is
        // the identity.
        #[allow(clippy::useless_conversion)]
        return with_key_slices!(*k, |keys, word| one_key(n, parallel, ids, |lo, hi| {
            keys[lo..hi].iter().map(move |&x| u64::from(word(x)))
        }));
    }
    let word = |i: usize| {
        keys.iter().fold(0u128, |c, k| {
            c << bits(k.dtype()) | group_word(*k, i) as u128
        })
    };
    hashed(n, parallel, ids, |lo, hi| (lo..hi).map(word))
}

/// One key: a direct index when its words span a small range, else
/// hashing. `words(lo, hi)`: the words of rows `lo..hi`.
fn one_key<I: Iterator<Item = u64>>(
    n: usize,
    parallel: bool,
    ids: bool,
    words: impl Fn(usize, usize) -> I + Sync,
) -> Grouping {
    let (lo, hi) = words(0, n).fold((u64::MAX, 0), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if n > 0 && is_dense_span(hi - lo, n) {
        return dense(lo, (hi - lo + 1) as usize, ids, || words(0, n));
    }
    hashed(n, parallel, ids, words)
}

/// A direct index: group = rank of the word among the present ones (so
/// groups are already in key order). `rows()`: every row's word.
fn dense<I: Iterator<Item = u64>>(
    lo: u64,
    span: usize,
    want_ids: bool,
    rows: impl Fn() -> I,
) -> Grouping {
    let mut first = vec![usize::MAX; span];
    for (i, x) in rows().enumerate() {
        let s = (x - lo) as usize;
        if first[s] == usize::MAX {
            first[s] = i;
        }
    }
    let mut rank = vec![0u32; span];
    let mut firsts = Vec::new();
    let mut words = Vec::new();
    for (s, &f) in first.iter().enumerate() {
        if f != usize::MAX {
            rank[s] = firsts.len() as u32;
            firsts.push(f);
            words.push((lo + s as u64) as u128);
        }
    }
    let ids = if want_ids {
        rows().map(|x| rank[(x - lo) as usize]).collect()
    } else {
        Vec::new()
    };
    Grouping {
        ids,
        first: firsts,
        words,
        algorithm: Algorithm::DirectIndex { span: span as u64 },
    }
}

/// One chunk's grouping: its rows' local groups, and per local group its
/// word and first row.
pub(super) type LocalGroups<W> = (Vec<u32>, Vec<(W, usize)>);

/// Groups the rows from `lo` on, whose words `words` gives, in a table
/// of their own (their local groups only when `want_ids`).
pub(super) fn hash_rows<W: Copy + Eq + Hash>(
    lo: usize,
    want_ids: bool,
    words: impl Iterator<Item = W>,
) -> LocalGroups<W> {
    let mut map: FxHashMap<W, u32> = FxHashMap::default();
    let mut groups = Vec::new();
    let mut group_of = |(i, x): (usize, W)| {
        *map.entry(x).or_insert_with(|| {
            groups.push((x, i));
            (groups.len() - 1) as u32
        })
    };
    let rows = (lo..).zip(words);
    let ids = if want_ids {
        rows.map(&mut group_of).collect()
    } else {
        rows.for_each(|r| {
            group_of(r);
        });
        Vec::new()
    };
    (ids, groups)
}

/// A hash table from words to groups in first-appearance order; over
/// threads, one per chunk, merged in chunk order. `words(lo, hi)`: the
/// words of rows `lo..hi`.
fn hashed<W: Copy + Eq + Hash + Into<u128> + Send + Sync, I: Iterator<Item = W>>(
    n: usize,
    parallel: bool,
    want_ids: bool,
    words: impl Fn(usize, usize) -> I + Sync,
) -> Grouping {
    let threads = rayon::current_num_threads();
    if !parallel || threads < 2 || n < (1 << 16) {
        let (ids, groups) = hash_rows(0, want_ids, words(0, n));
        return Grouping {
            ids,
            first: groups.iter().map(|g| g.1).collect(),
            words: groups.iter().map(|g| g.0.into()).collect(),
            algorithm: Algorithm::HashGroups { tables: 1 },
        };
    }
    let chunk = n.div_ceil(threads);
    let locals: Vec<LocalGroups<W>> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(n));
            hash_rows(lo, want_ids, words(lo, hi))
        })
        .collect();
    let mut global: FxHashMap<W, u32> = FxHashMap::default();
    let mut first = Vec::new();
    let mut words = Vec::new();
    let remaps: Vec<Vec<u32>> = locals
        .iter()
        .map(|(_, groups)| {
            groups
                .iter()
                .map(|&(x, row)| {
                    *global.entry(x).or_insert_with(|| {
                        first.push(row);
                        words.push(x.into());
                        (first.len() - 1) as u32
                    })
                })
                .collect()
        })
        .collect();
    let mut ids = vec![0u32; if want_ids { n } else { 0 }];
    ids.par_chunks_mut(chunk)
        .zip(locals.par_iter().zip(remaps.par_iter()))
        .for_each(|(out, ((local, _), remap))| {
            for (o, &l) in out.iter_mut().zip(local) {
                *o = remap[l as usize];
            }
        });
    Grouping {
        ids,
        first,
        words,
        algorithm: Algorithm::HashGroups {
            tables: locals.len() as u32,
        },
    }
}

/// The fold of a fused group: one count, sum, min or max.
#[derive(Copy, Clone)]
enum FoldOp {
    Add,
    Min,
    Max,
}

/// A typed value folded by [`FoldOp`]: wrapping or float adds, and the
/// type's own `min`/`max` (as the group-index path's typed folds).
trait Folded: Copy + Send + Sync {
    fn fold(self, x: Self, op: FoldOp) -> Self;
}
macro_rules! folded {
    ($($t:ty),*) => {$(
        impl Folded for $t {
            #[inline(always)]
            fn fold(self, x: Self, op: FoldOp) -> Self {
                match op {
                    FoldOp::Add => fold_add(self, x),
                    FoldOp::Min => self.min(x),
                    FoldOp::Max => self.max(x),
                }
            }
        }
    )*};
}
folded!(i32, u32, i64, u64, f32, f64);

/// One chunk's groups in first-appearance order (word, first row) and
/// their accumulators.
type FusedGroups<W, T> = (Vec<(W, usize)>, Vec<T>);

/// Rows per expected group from which [`hash_fold`] uses a cuckoo table:
/// below, most rows are a group's first (an insert), which hashbrown's
/// table makes cheaper, and building the larger cuckoo table is most of
/// the cost (10^3 rows of ~630 keys: 30 µs with hashbrown, 35 µs with
/// the cuckoo table); above, lookups dominate and the cuckoo table's are
/// cheaper (10^7 rows of 10^3 keys: 1.6x).
const CUCKOO_ROWS_PER_GROUP: usize = 8;

/// Rows `lo..hi` grouped and folded in one pass: the hand-written loop's
/// shape, no group index per row. The accumulator lives in the table
/// beside its key (one random access per row); the group's index only
/// orders the groups at the end.
#[inline(always)]
fn hash_fold<W: SlotWord + Hash, T: Folded, I: Iterator<Item = (W, T)>>(
    lo: usize,
    hi: usize,
    rows: impl Fn(usize, usize) -> I,
    init: T,
    op: FoldOp,
    cap: usize,
) -> FusedGroups<W, T> {
    let mut groups = Vec::with_capacity(cap);
    if hi - lo < CUCKOO_ROWS_PER_GROUP * cap {
        let mut map: FxHashMap<W, (T, u32)> =
            FxHashMap::with_capacity_and_hasher(cap, Default::default());
        for (i, (w, x)) in (lo..).zip(rows(lo, hi)) {
            let e = map.entry(w).or_insert_with(|| {
                groups.push((w, i));
                (init, (groups.len() - 1) as u32)
            });
            e.0 = e.0.fold(x, op);
        }
        let mut accs: Vec<T> = vec![init; groups.len()];
        for (t, g) in map.into_values() {
            accs[g as usize] = t;
        }
        return (groups, accs);
    }
    let mut table: Slots<W, T> = Slots::with_groups(cap, init);
    // One loop per fold, so the row's fold is not a match.
    let first = |w, i| groups.push((w, i));
    let rows = rows(lo, hi);
    match op {
        FoldOp::Add => table.fold_rows(lo, rows, |a, x| a.fold(x, FoldOp::Add), first),
        FoldOp::Min => table.fold_rows(lo, rows, |a, x| a.fold(x, FoldOp::Min), first),
        FoldOp::Max => table.fold_rows(lo, rows, |a, x| a.fold(x, FoldOp::Max), first),
    }
    (groups, table.into_vals())
}

/// [`hash_fold`] over chunks of rows across threads (when `parallel`),
/// merged in chunk order: groups in first-appearance order. `rows(lo,
/// hi)`: the (word, value) of rows `lo..hi`. `cap`: the groups expected
/// (the tables are made that large at once).
fn hash_fold_all<
    W: SlotWord + Hash + Into<u128> + Send + Sync,
    T: Folded,
    I: Iterator<Item = (W, T)>,
>(
    n: usize,
    parallel: bool,
    cap: usize,
    rows: impl Fn(usize, usize) -> I + Sync,
    init: T,
    op: FoldOp,
) -> (Grouping, Vec<T>) {
    let threads = rayon::current_num_threads();
    let chunks = if parallel && threads > 1 && n >= 1 << 16 {
        threads
    } else {
        1
    };
    let chunk = n.div_ceil(chunks).max(1);
    let parts: Vec<FusedGroups<W, T>> = if chunks > 1 {
        (0..n.div_ceil(chunk))
            .into_par_iter()
            .map(|c| hash_fold(c * chunk, ((c + 1) * chunk).min(n), &rows, init, op, cap))
            .collect()
    } else {
        vec![hash_fold(0, n, &rows, init, op, cap)]
    };
    let tables = parts.len() as u32;
    let mut parts = parts.into_iter();
    let (groups, mut accs) = parts.next().unwrap_or_default();
    let mut map: FxHashMap<W, u32> = FxHashMap::default();
    if tables > 1 {
        map.extend(groups.iter().enumerate().map(|(g, &(w, _))| (w, g as u32)));
    }
    let mut first: Vec<usize> = groups.iter().map(|g| g.1).collect();
    let mut words: Vec<u128> = groups.iter().map(|g| g.0.into()).collect();
    for (later, vals) in parts {
        for ((w, row), v) in later.into_iter().zip(vals) {
            match map.entry(w) {
                std::collections::hash_map::Entry::Occupied(g) => {
                    let a = &mut accs[*g.get() as usize];
                    *a = a.fold(v, op);
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(first.len() as u32);
                    first.push(row);
                    words.push(w.into());
                    accs.push(v);
                }
            }
        }
    }
    let g = Grouping {
        ids: Vec::new(),
        first,
        words,
        algorithm: Algorithm::HashGroups { tables },
    };
    (g, accs)
}

/// The fused fold of one aggregate over one key's words.
macro_rules! fused_typed {
    ($n:expr, $parallel:expr, $cap:expr, $keys:expr, $word:expr, $a:expr, $( $variant:ident $t:ty ),*) => {
        match ($a.kind.clone(), $a.col) {
            (AggKind::Count, _) => {
                let rows = |lo: usize, hi: usize| {
                    $keys[lo..hi].iter().map(|&k| $word(k)).zip(std::iter::repeat(1u64))
                };
                let (g, c) = hash_fold_all($n, $parallel, $cap, rows, 0u64, FoldOp::Add);
                Some((g, Column::U64(c)))
            }
            $((kind @ (AggKind::Sum | AggKind::Min | AggKind::Max), Some(ColumnRef::$variant(xs))) => {
                let Scalar::$variant(init) = agg_identity(&kind, DType::$variant, &[]) else {
                    return None;
                };
                let op = match kind {
                    AggKind::Sum => FoldOp::Add,
                    AggKind::Min => FoldOp::Min,
                    _ => FoldOp::Max,
                };
                let rows = |lo: usize, hi: usize| {
                    $keys[lo..hi].iter().map(|&k| $word(k)).zip(xs[lo..hi].iter().copied())
                };
                let (g, v) = hash_fold_all($n, $parallel, $cap, rows, init, op);
                Some((g, Column::$variant(v)))
            })*
            _ => None,
        }
    };
}

/// Aggregates the fused fold takes in one group: each is a pass of its
/// own over the key (a two-aggregate group through the group index took
/// ~5x one pass at 10^7 rows of 10^3 keys).
const MAX_FUSED_AGGS: usize = 4;

/// One key and up to [`MAX_FUSED_AGGS`] counts, sums, mins or maxes,
/// each grouped and folded in one pass per thread (no group index per
/// row) when the key is not dense and has few groups (below
/// `partition::MANY_GROUPS` estimated: the tables stay in cache): the
/// groups in first-appearance order (the same for every aggregate: the
/// same rows in the same order) and each aggregate's column by group.
/// `None` when this path does not apply.
fn fused_one_key(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    n: usize,
    parallel: bool,
    sampled: Option<Sample>,
) -> Option<(Grouping, Vec<Column>)> {
    fused(key, aggs, n, parallel, Expect::Check(sampled))
}

/// [`fused_one_key`] over all the rows of `key` on this thread, without
/// its checks: a partition of [`super::partition`], `cap` groups
/// expected.
pub(super) fn fused_partition(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    cap: usize,
) -> Option<(Grouping, Vec<Column>)> {
    fused(key, aggs, key.len(), false, Expect::Groups(cap))
}

fn fused(
    key: ColumnRef<'_>,
    aggs: &[GroupAgg<'_>],
    n: usize,
    parallel: bool,
    cap: Expect,
) -> Option<(Grouping, Vec<Column>)> {
    // A `bool` key spans two values: the direct index.
    if matches!(key, ColumnRef::Bool(_)) {
        return None;
    }
    with_key_slices!(key, |keys, word| fused_with(
        n, parallel, aggs, cap, keys, word
    ))
}

/// The groups the fused fold expects: known (a partition), or to be
/// found from the key and its sample, which may rule the fold out.
enum Expect {
    Groups(usize),
    Check(Option<Sample>),
}

/// `cap`: the groups expected, or to check the key first (dense or
/// many groups: not this path) and estimate them.
fn fused_with<K: Copy + Sync, W: SlotWord + Hash + Into<u64> + Into<u128> + Send + Sync>(
    n: usize,
    parallel: bool,
    aggs: &[GroupAgg<'_>],
    cap: Expect,
    keys: &[K],
    word: impl Fn(K) -> W + Copy + Sync,
) -> Option<(Grouping, Vec<Column>)> {
    let fusable = |a: &GroupAgg<'_>| {
        matches!(
            a.kind,
            AggKind::Count | AggKind::Sum | AggKind::Min | AggKind::Max
        )
    };
    if aggs.is_empty() || aggs.len() > MAX_FUSED_AGGS || !aggs.iter().all(fusable) {
        return None;
    }
    let cap = match cap {
        Expect::Groups(c) => c,
        Expect::Check(sampled) => fused_cap(n, &|i| word(keys[i]).into(), sampled)?,
    };
    // Several passes pay off once lookups dominate (the cuckoo table's
    // regime); below it, one numbering of the rows and a fold per
    // aggregate is cheaper.
    if aggs.len() > 1 && n < CUCKOO_ROWS_PER_GROUP * cap {
        return None;
    }
    let mut grouping: Option<Grouping> = None;
    let mut columns = Vec::with_capacity(aggs.len());
    for a in aggs {
        let (g, column) = fused_typed!(n, parallel, cap, keys, word, a, I32 i32, U32 u32, I64 i64, U64 u64, F32 f32, F64 f64)?;
        match &grouping {
            None => grouping = Some(g),
            // The same rows in the same order number the same groups.
            Some(first) => debug_assert_eq!(first.first, g.first),
        }
        columns.push(column);
    }
    Some((grouping?, columns))
}

/// The groups expected for the fused path, or `None` when the key is
/// dense (the direct index) or has many groups (the partitions).
/// `sampled`: the key's sample (from `MIN_ROWS` rows).
fn fused_cap(n: usize, wide: &impl Fn(usize) -> u64, sampled: Option<Sample>) -> Option<usize> {
    // The sample tells both apart without a pass over the rows when it
    // shows a wide span.
    if sampled.is_some_and(|s| s.groups >= super::partition::MANY_GROUPS) {
        return None;
    }
    if sampled.is_none_or(|s| s.hi - s.lo < DENSE_SPAN) {
        let (lo, hi) = (0..n).fold((u64::MAX, 0), |(lo, hi), i| {
            let x = wide(i);
            (lo.min(x), hi.max(x))
        });
        if n == 0 || is_dense_span(hi - lo, n) {
            return None;
        }
    }
    // Tables made for the groups expected (no growth while folding).
    Some(sampled.map_or(n.min(1 << 12), |s| (s.groups as usize).min(n)))
}

/// Per-group accumulators of one aggregate.
pub(super) enum Acc {
    /// Count, Sum, Min, Max, Any, All: one value per group.
    Values(Vec<Scalar>),
    /// M2.
    Moments(Vec<Moments>),
    /// First / Last: the row (`usize::MAX`: none yet).
    Rows(Vec<usize>),
    /// ArgMin / ArgMax: the best value and its row.
    Best(Vec<Option<(Scalar, usize)>>),
}

/// Typed folds of Sum/Min/Max over rows `lo..hi`, the hot path.
macro_rules! fold_typed {
    ($acc:expr, $ids:expr, $col:expr, $lo:expr, $hi:expr, $kind:expr, $( $variant:ident $t:ty ),*) => {
        match $col {
            $(ColumnRef::$variant(xs) => {
                let mut vals: Vec<$t> = $acc.iter().map(|s| match s { Scalar::$variant(v) => *v, _ => unreachable!() }).collect();
                let ids = &$ids[$lo..$hi];
                let xs = &xs[$lo..$hi];
                match $kind {
                    AggKind::Sum => for (&g, &x) in ids.iter().zip(xs) { let a = &mut vals[g as usize]; *a = fold_add(*a, x); },
                    AggKind::Min => for (&g, &x) in ids.iter().zip(xs) { let a = &mut vals[g as usize]; *a = (*a).min(x); },
                    _ => for (&g, &x) in ids.iter().zip(xs) { let a = &mut vals[g as usize]; *a = (*a).max(x); },
                }
                for (s, v) in $acc.iter_mut().zip(vals) { *s = Scalar::$variant(v); }
                true
            })*
            _ => false,
        }
    };
}

trait FoldAdd {
    fn fold_add(self, x: Self) -> Self;
}
macro_rules! wrapping_add {
    ($($t:ty),*) => {$(impl FoldAdd for $t { #[inline(always)] fn fold_add(self, x: Self) -> Self { self.wrapping_add(x) } })*};
}
wrapping_add!(i32, u32, i64, u64);
impl FoldAdd for f32 {
    #[inline(always)]
    fn fold_add(self, x: Self) -> Self {
        self + x
    }
}
impl FoldAdd for f64 {
    #[inline(always)]
    fn fold_add(self, x: Self) -> Self {
        self + x
    }
}
#[inline(always)]
fn fold_add<T: FoldAdd>(a: T, x: T) -> T {
    a.fold_add(x)
}

impl Acc {
    pub(super) fn new(a: &GroupAgg<'_>, groups: usize) -> Acc {
        let ty = a.col.map_or(DType::U64, |c| c.dtype());
        match a.kind {
            AggKind::M2 => Acc::Moments(vec![Moments::EMPTY; groups]),
            AggKind::First | AggKind::Last => Acc::Rows(vec![usize::MAX; groups]),
            AggKind::ArgMin | AggKind::ArgMax => Acc::Best(vec![None; groups]),
            ref k => Acc::Values(vec![agg_identity(k, ty, &[]); groups]),
        }
    }

    /// Folds rows `lo..hi` in order.
    pub(super) fn fold(&mut self, a: &GroupAgg<'_>, ids: &[u32], lo: usize, hi: usize) {
        match self {
            Acc::Values(v) => {
                if a.kind == AggKind::Count {
                    let mut counts: Vec<u64> = v.iter().map(|c| c.to_bits()).collect();
                    for &g in &ids[lo..hi] {
                        counts[g as usize] += 1;
                    }
                    for (s, c) in v.iter_mut().zip(counts) {
                        *s = Scalar::U64(c);
                    }
                    return;
                }
                if let (AggKind::Sum | AggKind::Min | AggKind::Max, Some(col)) = (&a.kind, a.col) {
                    let done = fold_typed!(v, ids, col, lo, hi, a.kind, I32 i32, U32 u32, I64 i64, U64 u64, F32 f32, F64 f64);
                    if done {
                        return;
                    }
                }
                for (i, &g) in ids.iter().enumerate().take(hi).skip(lo) {
                    let g = g as usize;
                    v[g] = match (&a.kind, a.col) {
                        (AggKind::Count, _) => Scalar::U64(v[g].to_bits().wrapping_add(1)),
                        (AggKind::Sum, Some(c)) => eval::binary(BinaryOp::Add, v[g], c.get(i)),
                        (AggKind::Min, Some(c)) => eval::binary(BinaryOp::Min, v[g], c.get(i)),
                        (AggKind::Max, Some(c)) => eval::binary(BinaryOp::Max, v[g], c.get(i)),
                        (AggKind::Any, Some(c)) => {
                            Scalar::Bool(v[g].as_bool() | c.get(i).as_bool())
                        }
                        (AggKind::All, Some(c)) => {
                            Scalar::Bool(v[g].as_bool() & c.get(i).as_bool())
                        }
                        _ => v[g],
                    };
                }
            }
            Acc::Moments(m) => {
                let c = a.col.expect("m2 has a column");
                for (i, &g) in ids.iter().enumerate().take(hi).skip(lo) {
                    m[g as usize].push(c.get(i).as_f64());
                }
            }
            Acc::Rows(r) => {
                for (i, &g) in ids.iter().enumerate().take(hi).skip(lo) {
                    let g = g as usize;
                    if a.kind == AggKind::Last || r[g] == usize::MAX {
                        r[g] = i;
                    }
                }
            }
            Acc::Best(b) => {
                // NaNs never win (`arg_better`); ties keep the earlier row.
                let c = a.col.expect("arg aggregates have a column");
                for (i, &g) in ids.iter().enumerate().take(hi).skip(lo) {
                    let g = g as usize;
                    let x = c.get(i);
                    if arg_better(&a.kind, x, b[g].map(|p| p.0)) {
                        b[g] = Some((x, i));
                    }
                }
            }
        }
    }

    /// Merges `later` (the accumulators of later rows) into `self`.
    fn merge(&mut self, a: &GroupAgg<'_>, later: Acc) {
        match (self, later) {
            (Acc::Values(v), Acc::Values(w)) => {
                for (x, y) in v.iter_mut().zip(w) {
                    *x = match a.kind {
                        AggKind::Count => Scalar::U64(x.to_bits().wrapping_add(y.to_bits())),
                        AggKind::Sum => eval::binary(BinaryOp::Add, *x, y),
                        AggKind::Min => eval::binary(BinaryOp::Min, *x, y),
                        AggKind::Max => eval::binary(BinaryOp::Max, *x, y),
                        AggKind::Any => Scalar::Bool(x.as_bool() | y.as_bool()),
                        AggKind::All => Scalar::Bool(x.as_bool() & y.as_bool()),
                        _ => *x,
                    };
                }
            }
            (Acc::Moments(m), Acc::Moments(n)) => {
                for (x, y) in m.iter_mut().zip(n) {
                    *x = Moments::merge(*x, y);
                }
            }
            (Acc::Rows(r), Acc::Rows(s)) => {
                for (x, y) in r.iter_mut().zip(s) {
                    if y != usize::MAX && (a.kind == AggKind::Last || *x == usize::MAX) {
                        *x = y;
                    }
                }
            }
            (Acc::Best(b), Acc::Best(c)) => {
                for (x, y) in b.iter_mut().zip(c) {
                    let Some((v, row)) = y else { continue };
                    if arg_better(&a.kind, v, x.map(|p| p.0)) {
                        *x = Some((v, row));
                    }
                }
            }
            _ => unreachable!("accumulators of one aggregate"),
        }
    }

    /// The output column (`M2` as `f64`, `First`/`Last` gathered,
    /// `ArgMin`/`ArgMax` as `u64` rows: a group of NaNs only answers its
    /// first row, `first` by group).
    pub(super) fn finish(self, a: &GroupAgg<'_>, order: &[u32], first: &[usize]) -> Column {
        match self {
            Acc::Values(v) => {
                let ty = match a.kind {
                    AggKind::Count => DType::U64,
                    AggKind::Any | AggKind::All => DType::Bool,
                    _ => a.col.map_or(DType::U64, |c| c.dtype()),
                };
                let mut c = Column::with_capacity(ty, order.len());
                for &g in order {
                    c.push(v[g as usize]);
                }
                c
            }
            Acc::Moments(m) => Column::F64(order.iter().map(|&g| m[g as usize].m2).collect()),
            Acc::Rows(r) => {
                let rows: Vec<u32> = order.iter().map(|&g| r[g as usize] as u32).collect();
                gather(a.col.expect("first/last have a column"), &rows)
            }
            Acc::Best(b) => Column::U64(
                order
                    .iter()
                    .map(|&g| b[g as usize].map_or(first[g as usize], |p| p.1) as u64)
                    .collect(),
            ),
        }
    }
}

/// The groups in key order: `words` (of `bits` bits) sorted with each
/// group's index packed below its word, so the sort compares plain
/// integers (an LSD radix sort of the word's bytes for many groups).
pub(super) fn key_order(words: &[u128], bits: u32) -> Vec<u32> {
    let n = words.len();
    if bits <= 32 {
        let mut v: Vec<u64> = words
            .iter()
            .enumerate()
            .map(|(i, &w)| (w as u64) << 32 | i as u64)
            .collect();
        if n >= 1 << 12 {
            let mut tmp = vec![0u64; n];
            super::radix::lsd(&mut v, &mut tmp, 4..8);
        } else {
            v.sort_unstable();
        }
        return v.iter().map(|&x| x as u32).collect();
    }
    if bits <= 96 {
        let mut v: Vec<u128> = words
            .iter()
            .enumerate()
            .map(|(i, &w)| w << 32 | i as u128)
            .collect();
        v.sort_unstable();
        return v.iter().map(|&x| x as u32).collect();
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&i| words[i as usize]);
    order
}

/// Groups the rows by `keys` and computes `aggs` per group. Returns the
/// key columns (each group's key as a group key: `+0.0` for `-0.0`), then
/// one column per aggregate, sorted by key or in first-row order.
pub(crate) fn group(
    keys: &[ColumnRef<'_>],
    aggs: &[GroupAgg<'_>],
    first_seen: bool,
    strategy: Strategy,
) -> Result<(Vec<Column>, Algorithm), Fault> {
    let key_bits: u32 = keys.iter().map(|k| bits(k.dtype())).sum();
    if key_bits > 128 {
        return Err(Fault::AggregateColumn(
            "group keys of more than 128 bits together",
        ));
    }
    let n = keys.first().map_or(0, |k| k.len());
    if n > u32::MAX as usize {
        return Err(Fault::AggregateColumn("groups of more than 2^32 rows"));
    }
    if strategy == Strategy::Reference {
        return Ok(reference(keys, aggs, first_seen, n));
    }
    let parallel = strategy == Strategy::Parallel;
    // One key's sample, taken once for the partitions and the fused fold
    // (from `MIN_ROWS` rows).
    let sampled = match keys {
        [k] => super::partition::sample(n, &|i| group_word(*k, i)),
        _ => None,
    };
    if let ([k], false) = (keys, first_seen) {
        // The distinct values of a key whose rows are mostly distinct (as
        // sampled; not a dense key, which the direct index counts without
        // hashing or sorting): a radix sort of the words, then one pass
        // over its runs, beats a hash table per partition of that many
        // groups (10^7 distinct 64-bit keys: 0.27-0.6 s hashed, 2-3x
        // `sort_unstable` + `dedup`'s time; 0.1 s sorted).
        let mostly_distinct = |(s, _): &(super::partition::Sample, Vec<u64>)| {
            s.groups * SORTED_DISTINCT >= n as f64 && !is_dense_span(s.hi - s.lo, n)
        };
        if aggs.is_empty() && sampled.as_ref().is_some_and(mostly_distinct) {
            let (col, alg) = super::sort::sorted_distinct(*k, parallel);
            return Ok((vec![col], alg));
        }
        if let Some(done) = super::partition::group(*k, aggs, parallel, sampled.as_ref()) {
            return Ok(done);
        }
    }
    let fused = match keys {
        [k] => fused_one_key(*k, aggs, n, parallel, sampled.as_ref().map(|s| s.0)),
        _ => None,
    };
    let (g, accs, fused) = match fused {
        Some((g, cols)) => (g, Vec::new(), cols),
        None => {
            let g = grouping(keys, n, parallel, !aggs.is_empty());
            let accs = fold_all(&g, aggs, n, parallel);
            (g, accs, Vec::new())
        }
    };
    let groups = g.first.len();
    let mut order: Vec<u32> =
        if !first_seen && !matches!(g.algorithm, Algorithm::DirectIndex { .. }) {
            key_order(&g.words, key_bits)
        } else {
            (0..groups as u32).collect()
        };
    if first_seen && matches!(g.algorithm, Algorithm::DirectIndex { .. }) {
        order.sort_unstable_by_key(|&i| g.first[i as usize]);
    }
    let rows: Vec<u32> = order.iter().map(|&i| g.first[i as usize] as u32).collect();
    let mut out: Vec<Column> = keys.iter().map(|k| normalized(gather(*k, &rows))).collect();
    for (acc, a) in accs.into_iter().zip(aggs) {
        out.push(acc.finish(a, &order, &g.first));
    }
    for c in fused {
        out.push(gather(c.as_ref(), &order));
    }
    Ok((out, g.algorithm))
}

/// Every aggregate folded over the rows' groups (across threads in
/// chunks merged in order when `parallel` and the rows are many).
fn fold_all(g: &Grouping, aggs: &[GroupAgg<'_>], n: usize, parallel: bool) -> Vec<Acc> {
    let groups = g.first.len();
    let threads = rayon::current_num_threads();
    if parallel && threads > 1 && n >= 1 << 16 {
        let chunk = n.div_ceil(threads);
        // `n.div_ceil(chunk)` chunks, each non-empty (not `threads`: the
        // last ones could start past the end).
        let parts: Vec<Vec<Acc>> = (0..n.div_ceil(chunk))
            .into_par_iter()
            .map(|t| {
                let (lo, hi) = (t * chunk, ((t + 1) * chunk).min(n));
                aggs.iter()
                    .map(|a| {
                        let mut acc = Acc::new(a, groups);
                        acc.fold(a, &g.ids, lo, hi);
                        acc
                    })
                    .collect()
            })
            .collect();
        let mut parts = parts.into_iter();
        let mut total = parts.next().unwrap_or_default();
        for p in parts {
            for ((t, a), acc) in total.iter_mut().zip(aggs).zip(p) {
                t.merge(a, acc);
            }
        }
        total
    } else {
        aggs.iter()
            .map(|a| {
                let mut acc = Acc::new(a, groups);
                acc.fold(a, &g.ids, 0, n);
                acc
            })
            .collect()
    }
}

/// Group keys as they come out: `-0.0` as `+0.0`.
pub(super) fn normalized(mut c: Column) -> Column {
    match &mut c {
        Column::F32(v) => v.iter_mut().filter(|x| **x == 0.0).for_each(|x| *x = 0.0),
        Column::F64(v) => v.iter_mut().filter(|x| **x == 0.0).for_each(|x| *x = 0.0),
        _ => {}
    }
    c
}

/// The reference: a `BTreeMap` from key words to groups, every aggregate
/// folded row by row in order.
fn reference(
    keys: &[ColumnRef<'_>],
    aggs: &[GroupAgg<'_>],
    first_seen: bool,
    n: usize,
) -> (Vec<Column>, Algorithm) {
    let mut map: std::collections::BTreeMap<Vec<u64>, u32> = Default::default();
    let mut first: Vec<usize> = Vec::new();
    let mut ids: Vec<u32> = Vec::with_capacity(n);
    for i in 0..n {
        let w: Vec<u64> = keys.iter().map(|k| group_word(*k, i)).collect();
        let g = *map.entry(w).or_insert_with(|| {
            first.push(i);
            (first.len() - 1) as u32
        });
        ids.push(g);
    }
    let order: Vec<u32> = if first_seen {
        (0..first.len() as u32).collect()
    } else {
        map.values().copied().collect()
    };
    let rows: Vec<u32> = order.iter().map(|&g| first[g as usize] as u32).collect();
    let mut out: Vec<Column> = keys.iter().map(|k| normalized(gather(*k, &rows))).collect();
    for a in aggs {
        let mut acc = Acc::new(a, first.len());
        acc.fold(a, &ids, 0, n);
        out.push(acc.finish(a, &order, &first));
    }
    (out, Algorithm::OrderedMap)
}
