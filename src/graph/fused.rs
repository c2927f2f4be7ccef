//! A fused node of the operation graph: a run of element-wise adaptors that
//! will become one stage, still referring to values of the query's arena.

use super::logical::{LogicalAgg, TracedCombine};
use super::Stream;
use crate::expr::Value;
use crate::semantics::order::{JoinKind, SortKey};
use crate::semantics::RangeOp;
use smallvec::SmallVec;

/// Where an input slot of a fused node reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlotSource {
    /// A query stream (input column or scan output).
    Stream(Stream),
    /// Column `n` of the previous fused node.
    Previous(u16),
}

/// How a fused node ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FusedTerminal {
    /// Aggregates (with the node's predicate: a predicated reduction).
    Reduce(SmallVec<[LogicalAgg; 4]>),
    /// Materialize columns (with the predicate: order-preserving compaction).
    Collect(SmallVec<[Value; 4]>),
    /// A scan of one column.
    Scan {
        /// The scanned column.
        column: Value,
        /// `None` for a running sum.
        combine: Option<TracedCombine>,
        /// Exclusive scan.
        exclusive: bool,
    },
    /// A stable sort of `columns` by `keys` (with the predicate: of the
    /// survivors); `fetch`: a parameter slot limiting the rows (top-k).
    Sort {
        /// The keys, most significant first.
        keys: SmallVec<[SortKey; 2]>,
        /// The columns written in key order.
        columns: SmallVec<[Value; 4]>,
        /// Row limit's parameter slot.
        fetch: Option<u16>,
    },
    /// Aggregates per distinct key (with the predicate: of the survivors).
    Group {
        /// The key columns.
        keys: SmallVec<[Value; 2]>,
        /// The aggregates per group.
        aggs: SmallVec<[LogicalAgg; 4]>,
        /// Groups in first-row order instead of by key.
        first_seen: bool,
    },
    /// An equi-join of the (surviving) rows with build columns read from
    /// query inputs; writes `columns` (and, for an inner join, the build
    /// side's columns after them) in probe order.
    Join {
        /// Which rows come out.
        kind: JoinKind,
        /// The probe side's keys.
        keys: SmallVec<[Value; 2]>,
        /// The probe side's columns written.
        columns: SmallVec<[Value; 4]>,
        /// Query inputs of the build side: `keys.len()` keys, then the
        /// columns an inner join adds.
        build: SmallVec<[u16; 4]>,
    },
    /// Counts per key (with the predicate: of the survivors).
    CountByKey {
        /// The key column (`u32`).
        key: Value,
        /// Number of keys.
        keys: u32,
    },
}

/// Appends each of `values` that `out` does not hold yet (the columns a
/// sort or group stage materializes: its keys, then what it writes or
/// aggregates, each once).
pub(crate) fn push_unique<A: smallvec::Array<Item = Value>>(
    out: &mut SmallVec<A>,
    values: impl IntoIterator<Item = Value>,
) {
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
}

/// A run of fused element-wise adaptors.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusedStage {
    /// Input slots: the arena value that stands for each slot and its source.
    pub slots: SmallVec<[(SlotSource, Value); 2]>,
    /// Arena `Index` values, by local enumerate slot.
    pub enumerates: SmallVec<[Value; 2]>,
    /// Range steps (joins, enumerates, skips, takes) in order.
    pub range: SmallVec<[RangeOp; 4]>,
    /// Current columns (what the next adaptor sees).
    pub columns: SmallVec<[Value; 4]>,
    /// Conjunction of the filters so far.
    pub predicate: Option<Value>,
    /// How the node ends.
    pub terminal: FusedTerminal,
}

impl FusedStage {
    /// Arena values this node reads as roots (columns, predicate, terminal).
    pub fn roots(&self) -> SmallVec<[Value; 8]> {
        let mut r: SmallVec<[Value; 8]> = SmallVec::new();
        r.extend(self.predicate);
        match &self.terminal {
            FusedTerminal::Reduce(aggs) => r.extend(aggs.iter().filter_map(|a| a.column)),
            FusedTerminal::Collect(cols) => r.extend(cols.iter().copied()),
            FusedTerminal::Scan { column, .. } => r.push(*column),
            FusedTerminal::CountByKey { key, .. } => r.push(*key),
            FusedTerminal::Group { keys, aggs, .. } => push_unique(
                &mut r,
                keys.iter()
                    .copied()
                    .chain(aggs.iter().filter_map(|a| a.column)),
            ),
            FusedTerminal::Sort { keys, columns, .. } => push_unique(
                &mut r,
                keys.iter().map(|k| k.value).chain(columns.iter().copied()),
            ),
            FusedTerminal::Join { keys, columns, .. } => {
                push_unique(&mut r, keys.iter().chain(columns.iter()).copied())
            }
        }
        r
    }

    /// Whether positions matter to what follows (so a predicate here
    /// forces a compaction before it).
    pub fn has_arg_aggregate(&self) -> bool {
        matches!(&self.terminal, FusedTerminal::Reduce(aggs) | FusedTerminal::Group { aggs, .. }
            if aggs.iter().any(|a| matches!(a.kind, crate::semantics::AggKind::ArgMin | crate::semantics::AggKind::ArgMax)))
    }

    /// Whether the range has anything besides joins of every slot.
    pub fn has_range_steps(&self) -> bool {
        self.range.iter().any(|r| !matches!(r, RangeOp::Join(_)))
    }
}
