//! The traced form of a query: the adaptor chain as recorded by the builder,
//! before it becomes a graph. Every closure has already been traced into the
//! shared expression arena; this holds only handles and parameter slots.
//!
//! The whole record (minus parameter values) is the query's structural key:
//! two queries with equal records share one optimized plan.

use crate::expr::{DType, ExprArena, Value};
use crate::semantics::order::{JoinKind, SortKey};
use crate::semantics::AggKind;
use smallvec::SmallVec;

/// A stream feeding the query: an input column or a scan's output.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Query input column `n` (the source is 0, each `zip` adds one).
    Input(u16),
    /// The output of the scan at op index `n` of [`QueryTrace::ops`].
    Scan(u16),
    /// Column `column` of the sort at op index `op`.
    Sort {
        /// Op index of the sort.
        op: u16,
        /// Which of its columns.
        column: u16,
    },
    /// Column `column` of the join at op index `op`.
    Join {
        /// Op index of the join.
        op: u16,
        /// Which of its columns.
        column: u16,
    },
}

/// A traced combine closure `|acc, x| ..` for `reduce` and `scan`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TracedCombine {
    /// Program with `Input(0)` = accumulator, `Input(1)` = element.
    pub program: ExprArena,
    /// The result.
    pub output: Value,
    /// Parameter slot of the identity.
    pub identity: u16,
}

/// One adaptor of the chain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogicalOp {
    /// The first stream (node `value` is its `Input` node).
    Source {
        /// The stream.
        stream: Stream,
        /// Its `Input` node in the arena.
        value: Value,
    },
    /// `zip(&other)`.
    Zip {
        /// The stream joined.
        stream: Stream,
        /// Its `Input` node.
        value: Value,
    },
    /// `enumerate()`: node `value` is `Index(slot)`.
    Enumerate {
        /// Enumerate slot.
        slot: u16,
        /// The `Index` node.
        value: Value,
    },
    /// `map(f)`: the new columns.
    Map {
        /// The closure's results.
        outputs: SmallVec<[Value; 4]>,
    },
    /// `filter(p)`.
    Filter {
        /// The predicate (a `bool` node).
        predicate: Value,
    },
    /// `skip(n)`, `n` in a `u64` parameter slot.
    Skip {
        /// Parameter slot.
        param: u16,
    },
    /// `take(n)`, `n` in a `u64` parameter slot.
    Take {
        /// Parameter slot.
        param: u16,
    },
    /// `scan_sum()` / `scan(..)` and exclusive variants. The stream after it
    /// is `Stream::Scan(index of this op)`, read through node `result`.
    Scan {
        /// The scanned column.
        column: Value,
        /// `None` for a running sum, or the traced combine.
        combine: Option<TracedCombine>,
        /// Exclusive scan.
        exclusive: bool,
        /// The `Input` node standing for the scan's output downstream.
        result: Value,
    },
    /// `sort()`, `sort_by_key(..)`, ...: every column reordered by `keys`
    /// (a stable sort). The stream after it is `Stream::Sort` of this op,
    /// column `j` read through node `results[j]`.
    Sort {
        /// The keys, most significant first.
        keys: SmallVec<[SortKey; 2]>,
        /// The columns reordered.
        columns: SmallVec<[Value; 4]>,
        /// The `Input` nodes standing for them downstream.
        results: SmallVec<[Value; 4]>,
    },
    /// `join(..)`, `semi_join(..)`, `is_in(..)`, ...: an equi-join of the
    /// stream with build columns read whole from query inputs (not joined
    /// by position). The stream after it is `Stream::Join` of this op.
    Join {
        /// Which rows come out.
        kind: JoinKind,
        /// The probe side's keys.
        keys: SmallVec<[Value; 2]>,
        /// The probe side's columns carried through.
        columns: SmallVec<[Value; 4]>,
        /// Query inputs of the build side: its keys, then the columns an
        /// inner join adds.
        build: SmallVec<[u16; 4]>,
        /// The `Input` nodes standing for the result columns downstream
        /// (the probe's columns, then the build side's).
        results: SmallVec<[Value; 4]>,
    },
}

impl LogicalOp {
    /// Name for the graph's text form.
    pub fn name(&self) -> &'static str {
        match self {
            LogicalOp::Source { .. } => "source",
            LogicalOp::Zip { .. } => "zip",
            LogicalOp::Enumerate { .. } => "enumerate",
            LogicalOp::Map { .. } => "map",
            LogicalOp::Filter { .. } => "filter",
            LogicalOp::Skip { .. } => "skip",
            LogicalOp::Take { .. } => "take",
            LogicalOp::Scan { .. } => "scan",
            LogicalOp::Sort { .. } => "sort",
            LogicalOp::Join { kind, .. } => kind.name(),
        }
    }
}

/// One aggregate requested by a terminal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogicalAgg {
    /// What to compute (`Custom` holds a combine already in plan form).
    pub kind: AggKind,
    /// Column aggregated (`None` for `Count`).
    pub column: Option<Value>,
}

/// How the query ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogicalTerminal {
    /// Aggregates computed in one pass.
    Reduce(SmallVec<[LogicalAgg; 4]>),
    /// Materialize the columns.
    Collect(SmallVec<[Value; 4]>),
    /// How many elements have each key `0..keys` (a `u32` column; a key
    /// past the end counts in the last slot): a histogram's bins.
    CountByKey {
        /// The key column (`u32`).
        key: Value,
        /// Number of keys.
        keys: u32,
    },
    /// Aggregates per distinct key (`group_by`, `distinct`, ...).
    Group {
        /// The key columns.
        keys: SmallVec<[Value; 2]>,
        /// The aggregates per group.
        aggs: SmallVec<[LogicalAgg; 4]>,
        /// Groups in first-row order instead of by key.
        first_seen: bool,
    },
}

/// The traced query.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueryTrace {
    /// Every traced node; `Input(n)` reads stream `streams[n]`.
    pub arena: ExprArena,
    /// The adaptors in order.
    pub ops: SmallVec<[LogicalOp; 8]>,
    /// Stream table for `Input(n)` nodes of the arena.
    pub streams: SmallVec<[Stream; 4]>,
    /// Types of the query's input columns.
    pub input_dtypes: SmallVec<[DType; 2]>,
    /// Number of `enumerate` slots.
    pub enumerates: u16,
    /// The terminal (set when the query runs).
    pub terminal: Option<LogicalTerminal>,
}

impl QueryTrace {
    /// Empties the trace for reuse, keeping its memory.
    pub fn clear(&mut self) {
        self.arena.clear();
        self.ops.clear();
        self.streams.clear();
        self.input_dtypes.clear();
        self.enumerates = 0;
        self.terminal = None;
    }
}
