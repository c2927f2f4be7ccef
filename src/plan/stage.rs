//! Fused stages: the unit every backend executes. A stage is one pass over
//! memory: read its inputs, evaluate one element program, then end in a
//! terminal (reduce, scan, store or order-preserving compaction).
//!
//! Stages are produced by the optimizer and never changed afterwards; the
//! backends may only read them.

pub use crate::semantics::order::{JoinKind, SortKey};
pub use crate::semantics::{AggKind, Aggregate, Combine, RangeOp, ScanOp};

use crate::expr::{DType, ExprArena, Scalar, Value};
use crate::graph::push_unique;
use smallvec::SmallVec;
use std::fmt;

/// Where a stage's input slot reads from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum StageInput {
    /// Input column `n` of the query (the source, then each `zip` in order).
    Source(u16),
    /// Output column `column` of an earlier stage.
    Stage {
        /// Index of the producing stage in [`PhysicalPlan::stages`].
        stage: u16,
        /// Which of its output columns.
        column: u16,
    },
}

/// The resolved range of one stage run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageRange {
    /// Number of logical positions.
    pub len: usize,
    /// Per input slot: the offset of position 0 in that input.
    pub offsets: SmallVec<[usize; 4]>,
    /// Per enumerate slot: the index yielded at position 0.
    pub index_offsets: SmallVec<[u64; 2]>,
}

/// How a stage ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Terminal {
    /// Several aggregates in one pass; with a predicate, only surviving
    /// elements contribute (filter-into-reduce).
    Reduce(SmallVec<[Aggregate; 4]>),
    /// Writes each column: every position, or with a predicate only the
    /// survivors, in order (stream compaction).
    Collect(SmallVec<[Value; 4]>),
    /// Inclusive or exclusive scan of one column (no predicate).
    Scan {
        /// The scanned column.
        column: Value,
        /// The operator.
        op: ScanOp,
        /// Exclusive: output `i` combines elements `0..i`.
        exclusive: bool,
    },
    /// One `u64` column of `keys` counts: how many (surviving) elements
    /// have each value of the `u32` column `key`; a key `>= keys` counts
    /// in the last slot. A histogram's bins, a dense group's sizes. Ends
    /// the plan, like a reduce.
    CountByKey {
        /// The key column (`u32`).
        key: Value,
        /// Number of keys (at least 1).
        keys: u32,
    },
    /// Writes `columns` of the (surviving) positions in the order of
    /// `keys`: a stable sort (ties keep their order) by the canonical
    /// total order of `semantics::order`. With `fetch`, only
    /// the first `fetch` rows of that order (top-k). What follows reads
    /// the sorted columns.
    Sort {
        /// The sort keys, most significant first.
        keys: SmallVec<[SortKey; 2]>,
        /// The columns written, in key order.
        columns: SmallVec<[Value; 4]>,
        /// Parameter slot of a row limit (`u64`).
        fetch: Option<u16>,
    },
    /// Keyed aggregation of the (surviving) positions: one row per
    /// distinct key (group keys: `-0.0` is `+0.0`, every NaN one key),
    /// columns the keys then one per aggregate, sorted by key or in the
    /// order of each group's first row. Ends the plan.
    Group {
        /// The key columns.
        keys: SmallVec<[Value; 2]>,
        /// The aggregates per group (`ArgMin`/`ArgMax` give the row of
        /// the stage's stream, `M2` an `f64`).
        aggs: SmallVec<[Aggregate; 4]>,
        /// Groups in the order of their first row instead of by key.
        first_seen: bool,
    },
    /// An equi-join of the (surviving) positions with build columns read
    /// whole from query inputs (keys compare as group keys: `-0.0` is
    /// `+0.0`, every NaN one key). Writes `columns` in probe order and,
    /// for an inner join, the build side's columns after them: one row per
    /// matching pair, the build rows of one probe row in build order.
    /// What follows reads the joined columns.
    Join {
        /// Which rows come out.
        kind: JoinKind,
        /// The probe keys.
        keys: SmallVec<[Value; 2]>,
        /// The probe columns written.
        columns: SmallVec<[Value; 4]>,
        /// The build side's query inputs and their types: `keys.len()`
        /// keys, then the columns an inner join writes.
        build: SmallVec<[(u16, DType); 4]>,
    },
}

impl Terminal {
    /// A sort, group or join: the stage materializes its columns and the
    /// backend finishes them on the host (`relational::finish_stage`).
    pub fn is_relational(&self) -> bool {
        matches!(
            self,
            Terminal::Sort { .. } | Terminal::Group { .. } | Terminal::Join { .. }
        )
    }

    /// The columns a stage ending in a sort materializes before it sorts:
    /// its keys, then the columns it writes (each value once). For the
    /// other terminals, the collected columns (empty when not a collect).
    pub fn materialized(&self) -> SmallVec<[Value; 4]> {
        match self {
            Terminal::Collect(cols) => cols.clone(),
            Terminal::Sort { keys, columns, .. } => {
                let mut m = SmallVec::new();
                push_unique(
                    &mut m,
                    keys.iter().map(|k| k.value).chain(columns.iter().copied()),
                );
                m
            }
            Terminal::Join { keys, columns, .. } => {
                let mut m = SmallVec::new();
                push_unique(&mut m, keys.iter().chain(columns.iter()).copied());
                m
            }
            Terminal::Group { keys, aggs, .. } => {
                let mut m = SmallVec::new();
                push_unique(
                    &mut m,
                    keys.iter()
                        .copied()
                        .chain(aggs.iter().filter_map(|a| a.column)),
                );
                m
            }
            _ => SmallVec::new(),
        }
    }

    /// The name used in plans and metrics.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Terminal::Reduce(_) => "reduce",
            Terminal::Collect(_) => "collect",
            Terminal::Scan { .. } => "scan",
            Terminal::CountByKey { .. } => "count_by_key",
            Terminal::Sort { fetch: None, .. } => "sort",
            Terminal::Sort { fetch: Some(_), .. } => "top_k",
            Terminal::Group { .. } => "group",
            Terminal::Join { kind, .. } => kind.name(),
        }
    }
}

/// One fused pass over memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stage {
    /// Input slots (the `Input(s)` nodes of the program read slot `s`).
    pub inputs: SmallVec<[StageInput; 2]>,
    /// Number of enumerate slots (`Index(e)` nodes).
    pub enumerates: u16,
    /// The range computation, replayed per run.
    pub range: SmallVec<[RangeOp; 4]>,
    /// The element program (only live nodes, in evaluation order).
    pub program: ExprArena,
    /// Elements for which this is false are dropped.
    pub predicate: Option<Value>,
    /// What the stage produces.
    pub terminal: Terminal,
}

impl Stage {
    /// Resolves the stage's range for input lengths `input_lens` (one per
    /// slot) and parameter values.
    pub fn resolve_range(&self, input_lens: &[usize], params: &[Scalar]) -> StageRange {
        // Push loops and no per-slot flags: this runs on every query, and
        // most ranges are joins only. A skip finds the slots that joined
        // (or started counting) before it by looking back over the steps.
        let mut r = StageRange {
            len: usize::MAX,
            offsets: SmallVec::new(),
            index_offsets: SmallVec::new(),
        };
        for _ in 0..self.inputs.len() {
            r.offsets.push(0);
        }
        for _ in 0..self.enumerates {
            r.index_offsets.push(0);
        }
        let count = |p: u16| -> usize {
            let n = match params[p as usize] {
                Scalar::U64(n) => n,
                other => other.cast(DType::U64).to_bits(),
            };
            usize::try_from(n).unwrap_or(usize::MAX)
        };
        for (i, op) in self.range.iter().enumerate() {
            match *op {
                RangeOp::Join(s) => r.len = r.len.min(input_lens[s as usize]),
                RangeOp::Enumerate(_) => {}
                RangeOp::Skip(p) => {
                    let n = count(p).min(r.len);
                    r.len -= n;
                    let before = &self.range[..i];
                    for (j, earlier) in before.iter().enumerate() {
                        // Each slot once, however often it was named.
                        if before[..j].contains(earlier) {
                            continue;
                        }
                        match *earlier {
                            RangeOp::Join(s) => r.offsets[s as usize] += n,
                            RangeOp::Enumerate(e) => r.index_offsets[e as usize] += n as u64,
                            RangeOp::Skip(_) | RangeOp::Take(_) => {}
                        }
                    }
                }
                RangeOp::Take(p) => r.len = r.len.min(count(p)),
            }
        }
        if r.len == usize::MAX {
            r.len = 0;
        }
        r
    }

    /// Output dtypes of a collect terminal, or the scanned column's type.
    pub fn output_dtypes(&self) -> SmallVec<[DType; 4]> {
        match &self.terminal {
            Terminal::Collect(cols) | Terminal::Sort { columns: cols, .. } => {
                cols.iter().map(|&c| self.program.ty(c)).collect()
            }
            Terminal::Scan { column, .. } => smallvec::smallvec![self.program.ty(*column)],
            Terminal::CountByKey { .. } => smallvec::smallvec![DType::U64],
            Terminal::Join {
                kind,
                keys,
                columns,
                build,
            } => {
                let added = match kind {
                    JoinKind::Inner => &build[keys.len().min(build.len())..],
                    JoinKind::Semi | JoinKind::Anti => &[],
                };
                columns
                    .iter()
                    .map(|&c| self.program.ty(c))
                    .chain(added.iter().map(|&(_, ty)| ty))
                    .collect()
            }
            Terminal::Group { keys, aggs, .. } => keys
                .iter()
                .map(|&k| self.program.ty(k))
                .chain(
                    aggs.iter()
                        .map(|a| a.kind.result_type(a.column.map(|c| self.program.ty(c)))),
                )
                .collect(),
            Terminal::Reduce(aggs) => aggs
                .iter()
                .map(|a| a.kind.result_type(a.column.map(|c| self.program.ty(c))))
                .collect(),
        }
    }

    /// Number of element operations per position (for cost estimates).
    pub fn ops_per_element(&self) -> usize {
        use crate::expr::Node;
        self.program
            .iter()
            .filter(|(_, n)| !matches!(n.node, Node::Input(_) | Node::Param(_) | Node::Const(_)))
            .count()
            .max(1)
    }

    /// Whether any node of this stage has a 64-bit type.
    pub fn uses_wide_types(&self) -> bool {
        self.program.iter().any(|(_, n)| n.ty.is_wide())
    }
}

/// An optimized plan: stages in execution order; the last one's terminal is
/// the query's result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PhysicalPlan {
    /// Types of the query's input columns.
    pub input_dtypes: SmallVec<[DType; 2]>,
    /// Number of parameter slots the plan reads.
    pub param_count: usize,
    /// The stages.
    pub stages: SmallVec<[Stage; 1]>,
}

impl PhysicalPlan {
    /// The stage producing the query's result.
    pub fn last(&self) -> &Stage {
        self.stages.last().expect("a plan has at least one stage")
    }
}

/// What a plan returns.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanOutput {
    /// One scalar per aggregate of the final reduce, in order.
    Aggregates(SmallVec<[Scalar; 4]>),
    /// One column per output of the final collect or scan.
    Columns(Vec<crate::types::Column>),
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  inputs:")?;
        for (s, i) in self.inputs.iter().enumerate() {
            match i {
                StageInput::Source(n) => write!(f, " s{s}=source{n}")?,
                StageInput::Stage { stage, column } => write!(f, " s{s}=stage{stage}.{column}")?,
            }
        }
        writeln!(f)?;
        if !self.range.is_empty() {
            write!(f, "  range:")?;
            for op in &self.range {
                match op {
                    RangeOp::Join(s) => write!(f, " join(s{s})")?,
                    RangeOp::Enumerate(e) => write!(f, " enumerate(e{e})")?,
                    RangeOp::Skip(p) => write!(f, " skip(param.{p})")?,
                    RangeOp::Take(p) => write!(f, " take(param.{p})")?,
                }
            }
            writeln!(f)?;
        }
        for (v, _) in self.program.iter() {
            write!(f, "    ")?;
            self.program.write_node(f, v)?;
            writeln!(f)?;
        }
        if let Some(p) = self.predicate {
            writeln!(f, "  predicate: {p}")?;
        }
        match &self.terminal {
            Terminal::Reduce(aggs) => {
                write!(f, "  terminal: reduce")?;
                for a in aggs {
                    match (&a.kind, a.column) {
                        (AggKind::Custom(c), Some(col)) => {
                            write!(f, " reduce({col}, identity=param.{} by [", c.identity)?;
                            let mut first = true;
                            for (v, _) in c.program.iter() {
                                if !first {
                                    write!(f, "; ")?;
                                }
                                first = false;
                                c.program.write_node(f, v)?;
                            }
                            write!(f, "] -> {})", c.output)?;
                        }
                        (k, Some(col)) => write!(f, " {}({col})", k.name())?,
                        (k, None) => write!(f, " {}", k.name())?,
                    }
                }
                writeln!(f)
            }
            Terminal::CountByKey { key, keys } => {
                writeln!(f, "  terminal: count_by_key {key} keys={keys}")
            }
            Terminal::Collect(cols) => {
                let what = if self.predicate.is_some() {
                    "compact"
                } else {
                    "store"
                };
                write!(f, "  terminal: {what}")?;
                for c in cols {
                    write!(f, " {c}")?;
                }
                writeln!(f)
            }
            Terminal::Group {
                keys,
                aggs,
                first_seen,
            } => {
                write!(f, "  terminal: group by")?;
                for k in keys {
                    write!(f, " {k}")?;
                }
                write!(f, " ->")?;
                for a in aggs {
                    match a.column {
                        Some(c) => write!(f, " {}({c})", a.kind.name())?,
                        None => write!(f, " {}", a.kind.name())?,
                    }
                }
                writeln!(
                    f,
                    " ({})",
                    if *first_seen {
                        "first-seen order"
                    } else {
                        "by key"
                    }
                )
            }
            Terminal::Join {
                kind,
                keys,
                columns,
                build,
            } => {
                let what = if self.predicate.is_some() {
                    "compact, "
                } else {
                    ""
                };
                write!(f, "  terminal: {what}{} on", kind.name())?;
                for k in keys {
                    write!(f, " {k}")?;
                }
                write!(f, " = inputs")?;
                for (k, _) in &build[..keys.len().min(build.len())] {
                    write!(f, " {k}")?;
                }
                write!(f, " ->")?;
                for c in columns {
                    write!(f, " {c}")?;
                }
                if *kind == JoinKind::Inner {
                    for (k, _) in &build[keys.len().min(build.len())..] {
                        write!(f, " input{k}")?;
                    }
                }
                writeln!(f, " (hash build/probe, probe order)")
            }
            Terminal::Sort {
                keys,
                columns,
                fetch,
            } => {
                let what = if self.predicate.is_some() {
                    "compact, sort"
                } else {
                    "sort"
                };
                write!(f, "  terminal: {what} by")?;
                for k in keys {
                    let dir = if k.descending { " desc" } else { "" };
                    write!(f, " {}{dir}", k.value)?;
                }
                write!(f, " ->")?;
                for c in columns {
                    write!(f, " {c}")?;
                }
                match fetch {
                    Some(p) => writeln!(f, " fetch param.{p} (top-k)"),
                    None => writeln!(f, " (radix sort, 8-bit digits)"),
                }
            }
            Terminal::Scan {
                column,
                op,
                exclusive,
            } => {
                let kind = if *exclusive { "exclusive" } else { "inclusive" };
                match op {
                    ScanOp::Sum => writeln!(f, "  terminal: scan {kind} sum({column})"),
                    ScanOp::Custom(c) => writeln!(
                        f,
                        "  terminal: scan {kind} custom({column}, identity=param.{}, {} nodes)",
                        c.identity,
                        c.program.len()
                    ),
                }
            }
        }
    }
}

impl fmt::Display for PhysicalPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.stages.iter().enumerate() {
            writeln!(f, "stage {i}:")?;
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage over `inputs` source slots and `enumerates` counters whose
    /// range is `range`; the program is irrelevant to the range.
    fn stage(inputs: u16, enumerates: u16, range: &[RangeOp]) -> Stage {
        Stage {
            inputs: (0..inputs).map(StageInput::Source).collect(),
            enumerates,
            range: range.iter().copied().collect(),
            program: ExprArena::default(),
            predicate: None,
            terminal: Terminal::Collect(SmallVec::new()),
        }
    }

    #[test]
    fn a_skip_moves_only_what_joined_before_it() {
        use RangeOp::*;
        // xs.enumerate().skip(p0).zip(ys).take(p1): the skip moves xs and
        // the counter, not ys, which joins after it.
        let s = stage(2, 1, &[Join(0), Enumerate(0), Skip(0), Join(1), Take(1)]);
        let r = s.resolve_range(&[100, 50], &[Scalar::U64(10), Scalar::U64(1000)]);
        assert_eq!(r.len, 50);
        assert_eq!(r.offsets.as_slice(), &[10, 0]);
        assert_eq!(r.index_offsets.as_slice(), &[10]);
        // Two skips add up; a slot named twice still moves once per skip.
        let s = stage(1, 0, &[Join(0), Join(0), Skip(0), Skip(1)]);
        let r = s.resolve_range(&[100], &[Scalar::U64(3), Scalar::U64(4)]);
        assert_eq!((r.len, r.offsets.as_slice()), (93, &[7][..]));
        // A skip past the end leaves an empty range at the end.
        let r = stage(1, 0, &[Join(0), Skip(0)]).resolve_range(&[5], &[Scalar::U64(9)]);
        assert_eq!((r.len, r.offsets.as_slice()), (0, &[5][..]));
        // No join at all: an empty range.
        let r = stage(0, 1, &[Enumerate(0)]).resolve_range(&[], &[]);
        assert_eq!(r.len, 0);
    }
}
