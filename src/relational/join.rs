//! Equi-joins: `join` (inner), `semi_join`/`is_in` and `anti_join`/
//! `not_in`.
//!
//! Keys compare as group keys (`-0.0` is `+0.0`, every NaN one key). The
//! result is in probe order (the stream reaching the join), and the build
//! rows matching one probe row come in build order: the order a nested
//! loop over the probe, then the build side, would give. Every algorithm
//! here produces exactly that order.
//!
//! `cpu-scalar` joins through an ordered map of the build rows (the
//! reference). The others hash the smaller side: the build side's rows
//! chained per key in build order, probed row by row (`cpu-parallel`: in
//! chunks of probe rows across threads, concatenated in order); or, when
//! the probe side is the smaller, the probe side's distinct keys, with the
//! build side scanned once into per-key lists of its rows, then written
//! out in probe order.

use super::group::{bits, f32_group_word, f64_group_word, group_word};
use super::sort::gather;
use super::{Algorithm, Strategy};
use crate::semantics::order::JoinKind;
use crate::types::{Column, ColumnRef, Fault};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::hash::Hash;

/// The end of a chain of rows.
const NONE: u32 = u32::MAX;

/// Probe rows per parallel task (`cpu-parallel`).
const PROBE_CHUNK: usize = 1 << 16;

/// Joins `probe` rows (their keys and the columns written) with `build`
/// rows (keys and, for an inner join, the columns added). Returns the
/// probe's columns, then the build side's, and the algorithm used.
pub(crate) fn join(
    kind: JoinKind,
    probe_keys: &[ColumnRef<'_>],
    probe_cols: &[ColumnRef<'_>],
    build_keys: &[ColumnRef<'_>],
    build_cols: &[ColumnRef<'_>],
    strategy: Strategy,
) -> Result<(Vec<Column>, Algorithm), Fault> {
    let key_bits: u32 = probe_keys.iter().map(|k| bits(k.dtype())).sum();
    let typed = probe_keys.len() == build_keys.len()
        && probe_keys
            .iter()
            .zip(build_keys)
            .all(|(p, b)| p.dtype() == b.dtype());
    if key_bits > 128 || !typed || probe_keys.is_empty() {
        return Err(Fault::AggregateColumn(
            "join keys (one type on both sides, at most 128 bits together)",
        ));
    }
    let n = probe_keys[0].len();
    // The build side's columns come from separate inputs: the shortest
    // one bounds its rows.
    let m = build_keys
        .iter()
        .chain(build_cols)
        .map(|c| c.len())
        .min()
        .unwrap_or(0);
    if n.max(m) >= NONE as usize {
        return Err(Fault::AggregateColumn("joins of 2^32 rows or more"));
    }
    let build_keys: Vec<ColumnRef<'_>> = build_keys.iter().map(|c| c.slice(0..m)).collect();
    let build_cols: Vec<ColumnRef<'_>> = build_cols.iter().map(|c| c.slice(0..m)).collect();
    let (rows, algorithm) = if strategy == Strategy::Reference {
        (
            reference(kind, probe_keys, &build_keys, n, m),
            Algorithm::OrderedMapJoin,
        )
    } else {
        let parallel = strategy == Strategy::Parallel;
        match (probe_keys, build_keys.as_slice()) {
            // One key: its words computed where they are used, one loop
            // per type.
            ([p], [b]) => match (*p, *b) {
                (ColumnRef::F32(p), ColumnRef::F32(b)) => matched(
                    kind,
                    (n, |i| f32_group_word(p[i])),
                    (m, |j| f32_group_word(b[j])),
                    parallel,
                ),
                (ColumnRef::F64(p), ColumnRef::F64(b)) => matched(
                    kind,
                    (n, |i| f64_group_word(p[i])),
                    (m, |j| f64_group_word(b[j])),
                    parallel,
                ),
                (ColumnRef::I32(p), ColumnRef::I32(b)) => {
                    matched(kind, (n, |i| p[i]), (m, |j| b[j]), parallel)
                }
                (ColumnRef::U32(p), ColumnRef::U32(b)) => {
                    matched(kind, (n, |i| p[i]), (m, |j| b[j]), parallel)
                }
                (ColumnRef::I64(p), ColumnRef::I64(b)) => {
                    matched(kind, (n, |i| p[i]), (m, |j| b[j]), parallel)
                }
                (ColumnRef::U64(p), ColumnRef::U64(b)) => {
                    matched(kind, (n, |i| p[i]), (m, |j| b[j]), parallel)
                }
                (p, b) => matched(
                    kind,
                    (n, |i| group_word(p, i)),
                    (m, |j| group_word(b, j)),
                    parallel,
                ),
            },
            _ => {
                let (pw, bw) = (words128(probe_keys, n), words128(&build_keys, m));
                matched(kind, (n, |i| pw[i]), (m, |j| bw[j]), parallel)
            }
        }
    };
    let parallel = strategy == Strategy::Parallel;
    let mut out = gather_each(probe_cols, &rows.probe, parallel);
    if kind == JoinKind::Inner {
        out.extend(gather_each(&build_cols, &rows.build, parallel));
    }
    Ok((out, algorithm))
}

/// The rows a join writes: probe rows, and for an inner join the build
/// row paired with each.
struct Rows {
    probe: Vec<u32>,
    build: Vec<u32>,
}

fn gather_each(cols: &[ColumnRef<'_>], rows: &[u32], parallel: bool) -> Vec<Column> {
    if parallel && cols.len() > 1 {
        cols.par_iter().map(|c| gather(*c, rows)).collect()
    } else {
        cols.iter().map(|c| gather(*c, rows)).collect()
    }
}

/// The key words of several key columns, most significant first.
fn words128(keys: &[ColumnRef<'_>], n: usize) -> Vec<u128> {
    (0..n)
        .map(|i| {
            keys.iter().fold(0u128, |c, k| {
                c << bits(k.dtype()) | group_word(*k, i) as u128
            })
        })
        .collect()
}

/// The reference: the build rows of every key in an ordered map, then the
/// probe rows in order.
fn reference(
    kind: JoinKind,
    probe_keys: &[ColumnRef<'_>],
    build_keys: &[ColumnRef<'_>],
    n: usize,
    m: usize,
) -> Rows {
    let key = |cols: &[ColumnRef<'_>], i: usize| -> Vec<u64> {
        cols.iter().map(|c| group_word(*c, i)).collect()
    };
    let mut table: BTreeMap<Vec<u64>, Vec<u32>> = BTreeMap::new();
    for j in 0..m {
        table.entry(key(build_keys, j)).or_default().push(j as u32);
    }
    let mut rows = Rows {
        probe: Vec::new(),
        build: Vec::new(),
    };
    for i in 0..n {
        let found = table.get(&key(probe_keys, i));
        match kind {
            JoinKind::Inner => {
                for &j in found.into_iter().flatten() {
                    rows.probe.push(i as u32);
                    rows.build.push(j);
                }
            }
            JoinKind::Semi if found.is_some() => rows.probe.push(i as u32),
            JoinKind::Anti if found.is_none() => rows.probe.push(i as u32),
            _ => {}
        }
    }
    rows
}

/// Hashes the smaller side and matches the other against it. Each side
/// is its row count and the key word of a row.
fn matched<W: Copy + Eq + Hash + Send + Sync>(
    kind: JoinKind,
    probe: (usize, impl Fn(usize) -> W + Sync),
    build: (usize, impl Fn(usize) -> W + Sync),
    parallel: bool,
) -> (Rows, Algorithm) {
    let probe_built = probe.0 < build.0;
    let algorithm = Algorithm::HashJoin {
        built_rows: probe.0.min(build.0) as u64,
        probe_side: probe_built,
    };
    let rows = if probe_built {
        by_probe_table(kind, probe, build)
    } else {
        by_build_table(kind, probe, build, parallel)
    };
    (rows, algorithm)
}

/// The build side's rows chained per key, in build order, then each probe
/// row looked up in order.
fn by_build_table<W: Copy + Eq + Hash + Send + Sync>(
    kind: JoinKind,
    (n, probe): (usize, impl Fn(usize) -> W + Sync),
    (m, build): (usize, impl Fn(usize) -> W + Sync),
    parallel: bool,
) -> Rows {
    let mut head: FxHashMap<W, u32> = FxHashMap::default();
    head.reserve(m);
    let chained = if kind == JoinKind::Inner { m } else { 0 };
    let mut next = vec![NONE; chained];
    // From the last row back: each key's chain starts at its first row.
    for j in (0..m).rev() {
        let old = head.insert(build(j), j as u32);
        if let (Some(old), false) = (old, next.is_empty()) {
            next[j] = old;
        }
    }
    let probe_range = |lo: usize, hi: usize| {
        // An inner join on a key the build side has once writes a row
        // per matched probe row: room for every probe row.
        let cap = if kind == JoinKind::Inner { hi - lo } else { 0 };
        let mut rows = Rows {
            probe: Vec::with_capacity(cap),
            build: Vec::with_capacity(cap),
        };
        for i in lo..hi {
            match (kind, head.get(&probe(i))) {
                (JoinKind::Inner, Some(&first)) => {
                    let mut j = first;
                    while j != NONE {
                        rows.probe.push(i as u32);
                        rows.build.push(j);
                        j = next[j as usize];
                    }
                }
                (JoinKind::Semi, Some(_)) | (JoinKind::Anti, None) => rows.probe.push(i as u32),
                _ => {}
            }
        }
        rows
    };
    if !parallel || n < 2 * PROBE_CHUNK {
        return probe_range(0, n);
    }
    let parts: Vec<Rows> = (0..n.div_ceil(PROBE_CHUNK))
        .into_par_iter()
        .map(|c| probe_range(c * PROBE_CHUNK, ((c + 1) * PROBE_CHUNK).min(n)))
        .collect();
    let total = |f: fn(&Rows) -> usize| parts.iter().map(f).sum::<usize>();
    let mut rows = Rows {
        probe: Vec::with_capacity(total(|r| r.probe.len())),
        build: Vec::with_capacity(total(|r| r.build.len())),
    };
    for p in parts {
        rows.probe.extend_from_slice(&p.probe);
        rows.build.extend_from_slice(&p.build);
    }
    rows
}

/// The probe side is the smaller: its distinct keys hashed, the build
/// side scanned once into each key's list of rows (in build order), then
/// the pairs written in probe order.
fn by_probe_table<W: Copy + Eq + Hash>(
    kind: JoinKind,
    (n, probe): (usize, impl Fn(usize) -> W),
    (m, build): (usize, impl Fn(usize) -> W),
) -> Rows {
    let mut keys: FxHashMap<W, u32> = FxHashMap::default();
    keys.reserve(n);
    let key_of: Vec<u32> = (0..n)
        .map(|i| {
            let next = keys.len() as u32;
            *keys.entry(probe(i)).or_insert(next)
        })
        .collect();
    let distinct = keys.len();
    // Per key, its build rows as a chain: first and last row, and the
    // next row of each build row.
    let mut first = vec![NONE; distinct];
    let mut last = vec![NONE; distinct];
    let mut count = vec![0u32; distinct];
    let chained = if kind == JoinKind::Inner { m } else { 0 };
    let mut next = vec![NONE; chained];
    for j in 0..m {
        if let Some(&k) = keys.get(&build(j)) {
            let k = k as usize;
            count[k] += 1;
            if kind != JoinKind::Inner {
                continue;
            }
            if first[k] == NONE {
                first[k] = j as u32;
            } else {
                next[last[k] as usize] = j as u32;
            }
            last[k] = j as u32;
        }
    }
    let mut rows = Rows {
        probe: Vec::new(),
        build: Vec::new(),
    };
    for (i, &k) in key_of.iter().enumerate() {
        let k = k as usize;
        match kind {
            JoinKind::Inner => {
                let mut j = first[k];
                while j != NONE {
                    rows.probe.push(i as u32);
                    rows.build.push(j);
                    j = next[j as usize];
                }
            }
            JoinKind::Semi if count[k] > 0 => rows.probe.push(i as u32),
            JoinKind::Anti if count[k] == 0 => rows.probe.push(i as u32),
            _ => {}
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: JoinKind, p: &[i32], b: &[i32], s: Strategy) -> (Vec<i32>, Vec<i32>) {
        let probe = ColumnRef::I32(p);
        let rows: Vec<u32> = (0..b.len() as u32).collect();
        let bi: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let (cols, _) = join(
            kind,
            &[probe],
            &[probe],
            &[ColumnRef::I32(b)],
            &[ColumnRef::I32(&bi)],
            s,
        )
        .unwrap();
        let mut it = cols.into_iter();
        let first = match it.next() {
            Some(Column::I32(v)) => v,
            _ => unreachable!(),
        };
        let second = match it.next() {
            Some(Column::I32(v)) => v,
            None => Vec::new(),
            _ => unreachable!(),
        };
        (first, second)
    }

    #[test]
    fn every_side_built_gives_the_nested_loop_order() {
        let probe = [3, 1, 3, 2, 7];
        let build = [3, 3, 1, 9, 3, 1];
        let mut want = (Vec::new(), Vec::new());
        for &p in &probe {
            for (j, &b) in build.iter().enumerate() {
                if p == b {
                    want.0.push(p);
                    want.1.push(j as i32);
                }
            }
        }
        for s in [
            Strategy::Reference,
            Strategy::Sequential,
            Strategy::Parallel,
        ] {
            assert_eq!(run(JoinKind::Inner, &probe, &build, s), want, "{s:?}");
            // The smaller side built: the probe here.
            assert_eq!(
                run(JoinKind::Inner, &probe[..2], &build, s),
                (vec![3, 3, 3, 1, 1], vec![0, 1, 4, 2, 5]),
                "{s:?}"
            );
            assert_eq!(run(JoinKind::Semi, &probe, &build, s).0, [3, 1, 3], "{s:?}");
            assert_eq!(run(JoinKind::Anti, &probe, &build, s).0, [2, 7], "{s:?}");
            assert_eq!(run(JoinKind::Anti, &probe[..2], &build, s).0, [0i32; 0]);
        }
    }
}
