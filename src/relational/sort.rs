//! Sorts and top-k of a sort stage's materialized columns.
//!
//! The keys become order-preserving words (`semantics::order`). One key
//! that is also the only column written is sorted as bare words and
//! decoded back; otherwise each key, least significant first, is sorted as
//! `(word, position)` words, which carries the permutation and keeps ties
//! in order; the columns are then gathered through it. A row limit much
//! smaller than the input selects instead of sorting: the first `k`
//! `(word, position)` words are the first `k` rows of the stable sort.

use super::radix::{self, Passes, Word};
use super::{Algorithm, Strategy};
use crate::semantics::order;
use crate::types::{Column, ColumnRef, DType};
use rayon::prelude::*;

/// Below this many rows the standard library's sort of the words is
/// faster than the radix passes' fixed cost (256-bucket histograms).
pub(crate) const RADIX_MIN: usize = 2048;

/// A limit below `rows / SELECT_RATIO` selects instead of sorting.
const SELECT_RATIO: usize = 16;

/// One sort key: its column and direction.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Key<'a> {
    pub col: ColumnRef<'a>,
    pub descending: bool,
}

/// Sorts `columns` by `keys` (all of one length), keeping the first
/// `limit` rows; `column_key[j]`: the key that column `j` is, if any.
pub(crate) fn sort(
    keys: &[Key<'_>],
    columns: &[ColumnRef<'_>],
    column_key: &[Option<usize>],
    limit: Option<usize>,
    strategy: Strategy,
) -> (Vec<Column>, Algorithm) {
    let key_is_column = keys.len() == 1 && columns.len() == 1 && column_key[0] == Some(0);
    let n = keys.first().map_or(0, |k| k.col.len());
    let limit = limit.unwrap_or(n).min(n);
    if strategy == Strategy::Reference || n > u32::MAX as usize {
        let perm = reference_order(keys, n, limit);
        let cols = columns.iter().map(|c| gather_usize(*c, &perm)).collect();
        return (cols, Algorithm::StableSort);
    }
    let parallel = strategy == Strategy::Parallel;
    if limit.saturating_mul(SELECT_RATIO) < n && key_bits(keys) <= 96 {
        let (perm, alg) = select(keys, n, limit, parallel);
        return (gather_all(columns, &perm, parallel), alg);
    }
    if key_is_column && keys.len() == 1 && columns.len() == 1 {
        let (mut col, alg) = sort_values(keys[0], parallel);
        col.truncate(limit);
        return (vec![col], alg);
    }
    if let Some(done) = sort_packed(keys, columns, column_key, limit, parallel) {
        return done;
    }
    let (mut perm, alg) = permutation(keys, n, parallel);
    perm.truncate(limit);
    (gather_all(columns, &perm, parallel), alg)
}

/// One 32-bit key and one other 4-byte column: the key's word and the
/// column's bits travel together in one `u64` sorted by its high half (a
/// stable sort needs no position), then both come back out of the words:
/// no permutation, no gather.
fn sort_packed(
    keys: &[Key<'_>],
    columns: &[ColumnRef<'_>],
    column_key: &[Option<usize>],
    limit: usize,
    parallel: bool,
) -> Option<(Vec<Column>, Algorithm)> {
    let [k] = keys else { return None };
    if !order::is_narrow(k.col.dtype()) || k.col.len() < RADIX_MIN {
        return None;
    }
    let mut others = column_key.iter().enumerate().filter(|(_, c)| c.is_none());
    let (p, _) = others.next()?;
    if others.next().is_some() {
        return None;
    }
    if !matches!(
        columns[p].dtype(),
        DType::F32 | DType::U32 | DType::I32 | DType::Bool
    ) {
        return None;
    }
    let mut v = map_words32(*k, parallel, |w| (w as u64) << 32);
    let packed = or_bits32(&mut v, columns[p], parallel);
    debug_assert!(packed, "a 4-byte payload (checked above)");
    let (v, alg) = sort_words(v, 4..8, parallel);
    let v = &v[..limit];
    let flip = if k.descending { u32::MAX } else { 0 };
    let key_ty = k.col.dtype();
    let cols = column_key
        .iter()
        .enumerate()
        .map(|(j, c)| {
            // The key's words decode to its values; the other column's
            // half is its raw bits. Built across threads when `parallel`,
            // on huge pages when large.
            let key = c.is_some();
            let (ty, shift, mask) = if key {
                (key_ty, 32, flip)
            } else {
                (columns[j].dtype(), 0, 0)
            };
            let bits = move |x: u64| (x >> shift) as u32 ^ mask;
            match ty {
                DType::F32 if key => Column::F32(radix::map_slice(v, parallel, |x| {
                    order::f32_of_word(bits(x))
                })),
                DType::F32 => {
                    Column::F32(radix::map_slice(v, parallel, |x| f32::from_bits(bits(x))))
                }
                DType::U32 => Column::U32(radix::map_slice(v, parallel, bits)),
                DType::I32 if key => Column::I32(radix::map_slice(v, parallel, |x| {
                    (bits(x) ^ 0x8000_0000) as i32
                })),
                DType::I32 => Column::I32(radix::map_slice(v, parallel, |x| bits(x) as i32)),
                _ => Column::Bool(radix::map_slice(v, parallel, |x| bits(x) != 0)),
            }
        })
        .collect();
    Some((cols, alg))
}

/// The column of 64-bit `ty` whose (ascending) words are `w`.
fn decode64(ty: DType, w: impl Iterator<Item = u64>) -> Column {
    match ty {
        DType::F64 => Column::F64(w.map(order::f64_of_word).collect()),
        DType::U64 => Column::U64(w.collect()),
        _ => Column::I64(w.map(|x| (x ^ (1 << 63)) as i64).collect()),
    }
}

/// The column of `ty` whose (ascending) words are `w`.
fn decode32(ty: DType, w: impl Iterator<Item = u32>) -> Column {
    match ty {
        DType::F32 => Column::F32(w.map(order::f32_of_word).collect()),
        DType::U32 => Column::U32(w.collect()),
        DType::I32 => Column::I32(w.map(|x| (x ^ 0x8000_0000) as i32).collect()),
        _ => Column::Bool(w.map(|x| x != 0).collect()),
    }
}

/// The reference: the standard library's stable sort of row numbers by
/// the keys' canonical order.
fn reference_order(keys: &[Key<'_>], n: usize, limit: usize) -> Vec<usize> {
    let mut rows: Vec<usize> = (0..n).collect();
    rows.sort_by(|&a, &b| {
        keys.iter()
            .map(|k| {
                let o = order::cmp(k.col.get(a), k.col.get(b));
                if k.descending {
                    o.reverse()
                } else {
                    o
                }
            })
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows.truncate(limit);
    rows
}

/// The word of every row of a narrow key (complemented when descending),
/// computed across threads when `parallel`.
fn words32(k: Key<'_>, parallel: bool) -> Vec<u32> {
    map_words32(k, parallel, |w| w)
}

/// `f` of the word of every row of a narrow key, in one pass.
fn map_words32<W: Word>(k: Key<'_>, parallel: bool, f: impl Fn(u32) -> W + Sync) -> Vec<W> {
    let flip = if k.descending { u32::MAX } else { 0 };
    match k.col {
        ColumnRef::F32(v) => radix::map_slice(v, parallel, |x| f(order::f32_word(x) ^ flip)),
        ColumnRef::U32(v) => radix::map_slice(v, parallel, |x| f(x ^ flip)),
        ColumnRef::I32(v) => radix::map_slice(v, parallel, |x| f((x as u32 ^ 0x8000_0000) ^ flip)),
        ColumnRef::Bool(v) => radix::map_slice(v, parallel, |x| f(x as u32 ^ flip)),
        other => (0..other.len())
            .map(|i| f(order::ordered_bits(other.get(i)) as u32 ^ flip))
            .collect(),
    }
}

/// ORs the raw bits of a 4-byte (or `bool`) column into the low halves
/// of `v`; false (and `v` unchanged) for a column of another width.
fn or_bits32(v: &mut [u64], c: ColumnRef<'_>, parallel: bool) -> bool {
    fn or<T: Copy + Sync>(v: &mut [u64], c: &[T], parallel: bool, bits: impl Fn(T) -> u32 + Sync) {
        radix::zip_apply(v, c, parallel, |d, s| *d |= bits(s) as u64);
    }
    match c {
        ColumnRef::F32(x) => or(v, x, parallel, f32::to_bits),
        ColumnRef::U32(x) => or(v, x, parallel, |x| x),
        ColumnRef::I32(x) => or(v, x, parallel, |x| x as u32),
        ColumnRef::Bool(x) => or(v, x, parallel, u32::from),
        _ => return false,
    }
    true
}

fn words64(k: Key<'_>, parallel: bool) -> Vec<u64> {
    let flip = if k.descending { u64::MAX } else { 0 };
    match k.col {
        ColumnRef::F64(v) => radix::map_slice(v, parallel, |x| order::f64_word(x) ^ flip),
        ColumnRef::U64(v) => radix::map_slice(v, parallel, |x| x ^ flip),
        ColumnRef::I64(v) => radix::map_slice(v, parallel, |x| (x as u64 ^ (1 << 63)) ^ flip),
        other => (0..other.len())
            .map(|i| order::ordered_bits(other.get(i)) ^ flip)
            .collect(),
    }
}

/// Sorts words by digits `digits`: the standard library's sort when
/// small (the words are distinct or ties are equal values), radix passes
/// otherwise.
fn sort_words<W: Word>(
    mut v: Vec<W>,
    digits: std::ops::Range<usize>,
    parallel: bool,
) -> (Vec<W>, Algorithm) {
    let n = v.len();
    if n < RADIX_MIN {
        v.sort_unstable();
        return (v, Algorithm::SmallSort);
    }
    if parallel && rayon::current_num_threads() > 1 && n >= radix::MSD_MIN {
        let (v, p) = radix::msd_lsd(v, digits);
        return (v, Algorithm::MsdLsdRadix(p));
    }
    let mut tmp = radix::scratch(n);
    let p = radix::lsd(&mut v, &mut tmp, digits);
    (v, Algorithm::LsdRadix(p))
}

/// One key that is also the column: its words sorted and decoded.
fn sort_values(k: Key<'_>, parallel: bool) -> (Column, Algorithm) {
    let ty = k.col.dtype();
    if order::is_narrow(ty) {
        let (w, alg) = sort_words(words32(k, parallel), 0..4, parallel);
        let flip = if k.descending { u32::MAX } else { 0 };
        // Decoded in place: `into_iter().map().collect()` of same-sized
        // elements reuses the words' allocation (no new pages to fault).
        (decode32(ty, w.into_iter().map(move |x| x ^ flip)), alg)
    } else {
        let (w, alg) = sort_words(words64(k, parallel), 0..8, parallel);
        let flip = if k.descending { u64::MAX } else { 0 };
        (decode64(ty, w.into_iter().map(move |x| x ^ flip)), alg)
    }
}

/// The distinct values of one key, by group word (`-0.0` as `+0.0`,
/// every NaN one value), sorted: the words radix-sorted, each run of
/// equal words kept once, decoded. For keys whose rows are mostly
/// distinct, where hashing every row into a table of that many groups
/// costs more than the sort (see `group::group`).
pub(super) fn sorted_distinct(k: ColumnRef<'_>, parallel: bool) -> (Column, Algorithm) {
    use super::group::{f32_group_word, f64_group_word};
    // Group words: the ascending order words, but for a float's zeros.
    let key = Key {
        col: k,
        descending: false,
    };
    let ty = k.dtype();
    if order::is_narrow(ty) {
        let w = match k {
            ColumnRef::F32(v) => radix::map_slice(v, parallel, |x| f32_group_word(x) as u32),
            _ => words32(key, parallel),
        };
        let (mut w, alg) = sort_words(w, 0..4, parallel);
        w.dedup();
        (decode32(ty, w.into_iter()), alg)
    } else {
        let w = match k {
            ColumnRef::F64(v) => radix::map_slice(v, parallel, f64_group_word),
            _ => words64(key, parallel),
        };
        let (mut w, alg) = sort_words(w, 0..8, parallel);
        w.dedup();
        (decode64(ty, w.into_iter()), alg)
    }
}

/// The stable order of the rows by `keys`: each key, least significant
/// first, sorts `(word, current position)` words.
fn permutation(keys: &[Key<'_>], n: usize, parallel: bool) -> (Vec<u32>, Algorithm) {
    let mut perm: Option<Vec<u32>> = None;
    let mut alg = Algorithm::SmallSort;
    let mut passes = Passes::default();
    for &k in keys.iter().rev() {
        let at = |i: usize| perm.as_ref().map_or(i, |p| p[i] as usize);
        let next: Vec<u32> = if order::is_narrow(k.col.dtype()) {
            let w = words32(k, parallel);
            let v: Vec<u64> = output((0..n).map(|i| (w[at(i)] as u64) << 32 | i as u64));
            let (v, a) = sort_words(v, 4..8, parallel);
            alg = a;
            output(v.iter().map(|&x| at(x as u32 as usize) as u32))
        } else {
            let w = words64(k, parallel);
            let v: Vec<u128> = output((0..n).map(|i| (w[at(i)] as u128) << 32 | i as u128));
            let (v, a) = sort_words(v, 4..12, parallel);
            alg = a;
            output(v.iter().map(|&x| at(x as u32 as usize) as u32))
        };
        if let Algorithm::LsdRadix(p) | Algorithm::MsdLsdRadix(p) = alg {
            passes.passes += p.passes;
            passes.digits += p.digits;
        }
        perm = Some(next);
    }
    let alg = match alg {
        Algorithm::LsdRadix(_) => Algorithm::LsdRadix(passes),
        Algorithm::MsdLsdRadix(_) => Algorithm::MsdLsdRadix(passes),
        other => other,
    };
    (perm.unwrap_or_default(), alg)
}

/// Bits of the keys' words together.
fn key_bits(keys: &[Key<'_>]) -> u32 {
    keys.iter()
        .map(|k| {
            if order::is_narrow(k.col.dtype()) {
                32
            } else {
                64
            }
        })
        .sum()
}

/// The first `limit` rows by the keys (at most 96 bits of words), without
/// sorting the rest: the `limit` smallest `(words, position)` words, kept
/// in a buffer that is cut back to them whenever it fills, behind a
/// threshold most rows fail.
fn select(keys: &[Key<'_>], n: usize, limit: usize, parallel: bool) -> (Vec<u32>, Algorithm) {
    let alg = Algorithm::Select { rows: limit as u64 };
    if limit == 0 {
        return (Vec::new(), alg);
    }
    if let [k] = keys {
        // One key of 32 or 64 bits: its words computed as the rows are
        // read (no array of words: one pass over the key column).
        let (flip, flip64) = if k.descending {
            (u32::MAX, u64::MAX)
        } else {
            (0, 0)
        };
        let d = k.descending;
        let perm = match k.col {
            // A float key's blocks are tested against the bound's own
            // float, not with each row's word (see `floats_may_pass`).
            ColumnRef::F32(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: f32| order::f32_word(x) ^ flip;
                let may_pass = |block: &[f32], bound: u32| {
                    floats_may_pass(block, order::f32_of_word(bound ^ flip), d, f32::is_nan)
                };
                smallest_keyed(&v[lo..hi], lo, limit, word, may_pass)
            })),
            ColumnRef::F64(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: f64| order::f64_word(x) ^ flip64;
                let may_pass = |block: &[f64], bound: u64| {
                    floats_may_pass(block, order::f64_of_word(bound ^ flip64), d, f64::is_nan)
                };
                smallest_keyed(&v[lo..hi], lo, limit, word, may_pass)
            })),
            ColumnRef::U32(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: u32| x ^ flip;
                smallest_keyed(&v[lo..hi], lo, limit, word, words_below(word))
            })),
            ColumnRef::I32(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: i32| (x as u32 ^ 0x8000_0000) ^ flip;
                smallest_keyed(&v[lo..hi], lo, limit, word, words_below(word))
            })),
            ColumnRef::U64(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: u64| x ^ flip64;
                smallest_keyed(&v[lo..hi], lo, limit, word, words_below(word))
            })),
            ColumnRef::I64(v) => Some(merge_smallest(n, limit, parallel, &|lo, hi| {
                let word = |x: i64| (x as u64 ^ (1 << 63)) ^ flip64;
                smallest_keyed(&v[lo..hi], lo, limit, word, words_below(word))
            })),
            _ => None,
        };
        if let Some(perm) = perm {
            return (perm, alg);
        }
    }
    // The keys' words side by side, most significant first, then the
    // position.
    let mut words: Vec<(Vec<u64>, u32)> = Vec::with_capacity(keys.len());
    for &k in keys {
        if order::is_narrow(k.col.dtype()) {
            words.push((map_words32(k, parallel, u64::from), 32));
        } else {
            words.push((words64(k, parallel), 64));
        }
    }
    let word = |i: usize| {
        let mut c = 0u128;
        for (w, bits) in &words {
            c = c << bits | w[i] as u128;
        }
        c << 32 | i as u128
    };
    let pick = |lo: usize, hi: usize| smallest(lo, hi, limit, word);
    (merge_smallest(n, limit, parallel, &pick), alg)
}

/// The `limit` smallest words of rows `lo..hi`, sorted.
fn smallest<W: Word>(lo: usize, hi: usize, limit: usize, word: impl Fn(usize) -> W) -> Vec<W> {
    let cap = (limit * 2).max(64);
    let mut buf: Vec<W> = Vec::with_capacity(cap);
    let mut threshold: Option<W> = None;
    for i in lo..hi {
        let w = word(i);
        if threshold.is_none_or(|t| w < t) {
            buf.push(w);
            if buf.len() == cap {
                buf.select_nth_unstable(limit - 1);
                buf.truncate(limit);
                threshold = buf.iter().copied().max();
            }
        }
    }
    buf.sort_unstable();
    buf.truncate(limit);
    buf
}

/// A key word of [`smallest_keyed`], and the word that carries it with
/// its row's position below it (ordered as the key, then the position).
trait Keyed: Copy + Ord {
    type Packed: Word + Into<u128>;
    fn pack(self, position: usize) -> Self::Packed;
    fn unpack(p: Self::Packed) -> Self;
}

macro_rules! keyed {
    ($($key:ty => $packed:ty),*) => {$(
        impl Keyed for $key {
            type Packed = $packed;
            #[inline(always)]
            fn pack(self, position: usize) -> $packed {
                (self as $packed) << 32 | position as $packed
            }
            #[inline(always)]
            fn unpack(p: $packed) -> $key {
                (p >> 32) as $key
            }
        }
    )*};
}
keyed!(u32 => u64, u64 => u128);

/// The block test of [`smallest_keyed`] by the rows' words: whether a
/// row's word is below the bound.
fn words_below<T: Copy, K: Keyed>(key: impl Fn(T) -> K) -> impl Fn(&[T], K) -> bool {
    move |block, bound| block.iter().fold(false, |any, &x| any | (key(x) < bound))
}

/// The block test of [`smallest_keyed`] for a float key, against `t`,
/// the float of the bound: one compare a row, where the word takes a NaN
/// test, a sign test and two selects. A row whose word passes is on the
/// bound's side of it or equal to it (-0.0 and +0.0 alike), and a NaN
/// passes the float test too, so no block with a passing row is skipped;
/// the rows of a block that passes are then tested by their words.
/// (`top_k(100)` of 10^7 `f32` on two threads: 2.5-3.2 ms with the
/// words, 2.0 ms so.)
#[inline(always)]
fn floats_may_pass<T: Copy + PartialOrd>(
    block: &[T],
    t: T,
    descending: bool,
    is_nan: impl Fn(T) -> bool,
) -> bool {
    if descending {
        block
            .iter()
            .fold(false, |any, &x| any | (x >= t) | is_nan(x))
    } else {
        block
            .iter()
            .fold(false, |any, &x| any | (x <= t) | is_nan(x))
    }
}

/// [`smallest`] of one key of 32 or 64 bits, `xs` the rows from `base`
/// on: the `(word << 32 | position)` words of the `limit` first rows,
/// sorted.
///
/// Most rows fail the threshold, so once there is one the rows are tested
/// 64 at a time against the key of the largest word kept, and only a
/// block with a row that passes is looked at row by row. A row whose key
/// equals the threshold's comes after it (positions grow), so the test is
/// strict. `may_pass(block, bound)`: whether a row of `block` may have a
/// word below `bound` (true for every block that has one; an OR of
/// comparisons the compiler vectorizes: one pass at about the rate of
/// reading the keys).
fn smallest_keyed<T: Copy, K: Keyed>(
    xs: &[T],
    base: usize,
    limit: usize,
    key: impl Fn(T) -> K,
    may_pass: impl Fn(&[T], K) -> bool,
) -> Vec<K::Packed> {
    let cap = (limit * 2).max(64);
    let mut buf: Vec<K::Packed> = Vec::with_capacity(cap);
    // Rows pass while their key is below this (all of them while `None`).
    let mut bound: Option<K> = None;
    for (c, block) in xs.chunks(64).enumerate() {
        if bound.is_some_and(|b| !may_pass(block, b)) {
            continue;
        }
        for (j, &x) in block.iter().enumerate() {
            let k = key(x);
            if bound.is_none_or(|b| k < b) {
                buf.push(k.pack(base + c * 64 + j));
                if buf.len() == cap {
                    buf.select_nth_unstable(limit - 1);
                    buf.truncate(limit);
                    bound = buf.iter().copied().max().map(K::unpack);
                }
            }
        }
    }
    buf.sort_unstable();
    buf.truncate(limit);
    buf
}

/// Runs `pick` over the rows (in chunks across threads when `parallel`)
/// and keeps the `limit` smallest words overall, as positions.
fn merge_smallest<W: Word + Into<u128>>(
    n: usize,
    limit: usize,
    parallel: bool,
    pick: &(dyn Fn(usize, usize) -> Vec<W> + Sync),
) -> Vec<u32> {
    let threads = rayon::current_num_threads();
    let mut all: Vec<W> = if parallel && threads > 1 && n >= RADIX_MIN * threads {
        let chunk = n.div_ceil(threads);
        (0..n.div_ceil(chunk))
            .into_par_iter()
            .flat_map_iter(|t| pick(t * chunk, ((t + 1) * chunk).min(n)))
            .collect()
    } else {
        pick(0, n)
    };
    all.sort_unstable();
    all.truncate(limit);
    all.into_iter().map(|w| w.into() as u32).collect()
}

/// The items of `it`, in a vector on huge pages when large (its first
/// writes fault 2 MiB at a time, not 4 KiB).
fn output<T>(it: impl ExactSizeIterator<Item = T>) -> Vec<T> {
    let mut v = crate::types::vec_for_output(it.len());
    v.extend(it);
    v
}

macro_rules! gather_col {
    ($col:expr, $idx:expr, $perm:expr) => {
        match $col {
            ColumnRef::Bool(v) => Column::Bool(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::I32(v) => Column::I32(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::U32(v) => Column::U32(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::I64(v) => Column::I64(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::U64(v) => Column::U64(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::F32(v) => Column::F32(output($perm.iter().map(|&i| v[$idx(i)]))),
            ColumnRef::F64(v) => Column::F64(output($perm.iter().map(|&i| v[$idx(i)]))),
        }
    };
}

fn gather_usize(col: ColumnRef<'_>, perm: &[usize]) -> Column {
    gather_col!(col, |i: usize| i, perm)
}

/// Row `perm[j]` of `col` at `j`.
pub(crate) fn gather(col: ColumnRef<'_>, perm: &[u32]) -> Column {
    gather_col!(col, |i: u32| i as usize, perm)
}

fn gather_all(columns: &[ColumnRef<'_>], perm: &[u32], parallel: bool) -> Vec<Column> {
    if parallel && columns.len() > 1 {
        columns.par_iter().map(|c| gather(*c, perm)).collect()
    } else {
        columns.iter().map(|c| gather(*c, perm)).collect()
    }
}
