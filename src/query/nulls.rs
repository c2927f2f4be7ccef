//! Nulls: SQL semantics for queries over Arrow arrays with a validity
//! bitmap, lowered into the plain query every backend already runs.
//!
//! A column that may be null carries a `bool` validity value traced beside
//! it. A source array's validity is its bitmap, unpacked into a `bool`
//! column the query owns and read as one more input (zipped with its
//! values, so it needs nothing new from any backend: the same plan runs on
//! `cpu-scalar`, `cpu-simd`, `cpu-parallel`, wgpu and PTX). From there:
//!
//! - `map`: an output is valid where every column it is computed from is
//!   (the closure's expression is walked back to the columns it reads:
//!   `zip(a, b).map(|(a, _)| a + 1)` is null only where `a` is);
//! - `filter`: a row is kept where the predicate is valid and true;
//! - terminals that aggregate skip the rows where what they read is null
//!   (a filter on that validity before the reduction), so `sum`, `min`,
//!   `max`, `mean`, `variance`, `count` (of non-null elements),
//!   `histogram`, `first`/`last`, `find` and `position` see only non-null
//!   values; `count_rows` counts every row;
//! - `sort`, `sort_desc`, `sort_by_key`, `top_k`... put rows whose key is
//!   null last (SQL's `NULLS LAST`, key by key: an "is null" flag before
//!   each key that may be null, ascending whatever the key's direction,
//!   descending after `nulls_first`; the key zeroed where null, so null
//!   rows keep their order), and the validities travel through the sort as
//!   columns;
//! - `argmin`/`argmax` select the best non-null element by a rank
//!   (number, NaN, null) then the value, positions counting null rows;
//! - scans replace a null by the identity (as SQL's running `SUM` skips
//!   it), so their output has no null;
//! - `group_by`: the rows of a null key component form groups of their
//!   own (an "is null" key before the component; one key's null group is
//!   `Groups::null_group`, or `None` after `option_keys`, which tuple keys
//!   with nulls need); aggregates skip null values by reading the
//!   identity there and counting the valid rows (every key keeps its
//!   group), or, where an aggregate cannot, by dropping those rows;
//! - one pass of several aggregates over columns with different nulls
//!   (`aggregate`, `agg`, a pipeline's replay): each aggregate reads its
//!   identity where its own value is null, and its count counts its
//!   valid rows (a pipeline keeps a count per set of columns read,
//!   `Query::pipeline_counts`); an argmin/argmax among them reads null
//!   rows as a value that never wins, ties with it told apart after the
//!   run (`ArgFix`);
//! - joins: a null key matches nothing (inner and semi joins drop the
//!   row, an anti join keeps it behind an "is null" key no build row
//!   has), and both sides' validities travel through the join;
//! - a plain `collect` or `distinct` of a column with nulls is an error
//!   (its values at null rows are unspecified); `collect_arrow`,
//!   `collect_options` and `distinct_options` return the nulls,
//!   `drop_nulls` and `fill_null` remove them;
//! - what does not take nulls yet (a variance, first, last or custom
//!   reduce of a column that may be null in one pass with aggregates of
//!   columns with other nulls, an argmin/argmax among other aggregates
//!   in a pipeline, `collect_on_device`) is an error at the terminal
//!   (`ErrorKind::InvalidQuery`), never a silently wrong answer.
//!
//! Values at null rows are whatever the array's buffer holds: every
//! operation of the IR is total (integer division by zero is 0, wrapping
//! arithmetic, saturating casts), so computing on them never fails, and
//! their results are masked by the validity.

use super::join::placeholder;
use super::{Mode, Query};
use crate::backend::Input;
use crate::expr::ops::BinaryOp;
use crate::expr::{DType, Element, Expr, Node, NodeData, Scalar, Shape, Value};
use crate::graph::{LogicalAgg, LogicalOp, LogicalTerminal, Stream};
use crate::plan::AggKind;
use crate::runtime::executor::Held;
use crate::types::Column;
use smallvec::SmallVec;

/// One source column as a query reads it: borrowed values, or values the
/// query owns (a conversion), and a validity when some row is null.
#[doc(hidden)]
#[derive(Debug)]
pub struct SourceParts<'a> {
    /// The values.
    pub values: SourceValues<'a>,
    /// `validity[i]` is false where row `i` is null; `None` when no row is.
    pub validity: Option<Vec<bool>>,
}

/// The values of a [`SourceParts`].
#[doc(hidden)]
#[derive(Debug)]
pub enum SourceValues<'a> {
    /// Read in place.
    Borrowed(Input<'a>),
    /// Converted for the query (e.g. widened from a narrower Arrow type).
    Owned(Column),
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    pub(crate) fn held(&mut self) -> &mut Held {
        let n = self.columns.len();
        self.held.get_or_insert_with(|| {
            Box::new(Held {
                validity: std::iter::repeat_n(None, n).collect(),
                ..Held::default()
            })
        })
    }

    /// Makes `value` (a source's values, its `Source` or `Zip` op pushed)
    /// the last column, with the validity of its source when some row is
    /// null.
    pub(crate) fn push_source_column(&mut self, value: Value, validity: Option<Vec<bool>>) {
        self.columns.push(value);
        let v = validity.map(|b| self.add_validity(b));
        self.set_last_validity(v);
    }

    /// Sets the validity of the column last pushed (keeping the validities
    /// parallel to the columns when the query holds any).
    pub(crate) fn set_last_validity(&mut self, v: Option<Value>) {
        if v.is_none() && self.held.is_none() {
            return;
        }
        let n = self.columns.len();
        let h = self.held();
        h.validity.resize(n, None);
        if let Some(last) = h.validity.last_mut() {
            *last = v;
        }
    }

    /// Marks every current column as never null (after an operation that
    /// refused nulls, or replaced the columns without them).
    pub(crate) fn reset_validity(&mut self) {
        let n = self.columns.len();
        if let Some(h) = self.held.as_mut() {
            h.validity.clear();
            h.validity.resize(n, None);
        }
    }

    /// Whether some current column may be null.
    pub(crate) fn has_nulls(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|h| h.validity.iter().any(Option::is_some))
    }

    /// Refuses `what` in a query traced as a [`Pipeline`](super::Pipeline):
    /// it acts on the nulls of the data, which a pipeline traced without
    /// data cannot see, so it would be silently dropped.
    pub(crate) fn refuse_in_pipeline(&mut self, what: &str) {
        if M::CAPTURE {
            self.refuse(|| {
                format!(
                    "{what} in a pipeline: a pipeline is traced without data, so it cannot act \
                     on nulls yet; handle them in the engine that runs it (WHERE x IS NOT NULL, \
                     COALESCE)"
                )
            });
        }
    }

    /// Records why the query cannot run (the first reason wins).
    pub(crate) fn refuse(&mut self, why: impl FnOnce() -> String) {
        let h = self.held();
        if h.error.is_none() {
            h.error = Some(why());
        }
    }

    /// Refuses `what` when a current column may be null.
    pub(crate) fn refuse_nulls(&mut self, what: &str) {
        if self.has_nulls() {
            self.refuse(|| {
                format!(
                    "{what} does not take nulls yet: call drop_nulls() or fill_null(..) before it"
                )
            });
        }
    }

    /// Adds one source column: its values (read in place or owned) and its
    /// validity when some row is null. Returns the values' node.
    pub(crate) fn add_source(&mut self, values: SourceValues<'a>, dtype: DType) -> (Value, u16) {
        let k = self.inputs.len() as u16;
        let value = match values {
            SourceValues::Borrowed(input) => self.add_input(input, dtype),
            SourceValues::Owned(column) => {
                let v = self.add_input(placeholder(dtype), dtype);
                self.held().owned.push((k, column));
                v
            }
        };
        (value, k)
    }

    /// Zips a validity column (owned by the query) into the query and
    /// returns its node.
    pub(crate) fn add_validity(&mut self, validity: Vec<bool>) -> Value {
        let k = self.inputs.len() as u16;
        let v = self.add_input(placeholder(DType::Bool), DType::Bool);
        self.traced.trace.ops.push(LogicalOp::Zip {
            stream: Stream::Input(k),
            value: v,
        });
        self.held().owned.push((k, Column::Bool(validity)));
        v
    }

    /// `a && b`, traced into this query.
    fn and(&mut self, a: Value, b: Value) -> Value {
        self.traced.trace.arena.push_unchecked(NodeData {
            node: Node::Binary(BinaryOp::And, a, b),
            ty: DType::Bool,
        })
    }

    /// The conjunction of `vs` (`None` when empty), one node per set.
    pub(crate) fn and_all(&mut self, mut vs: SmallVec<[Value; 4]>) -> Option<Value> {
        vs.sort_unstable();
        vs.dedup();
        match vs.as_slice() {
            [] => return None,
            [v] => return Some(*v),
            _ => {}
        }
        let h = self.held();
        if let Some((_, v)) = h.conjunctions.iter().find(|(set, _)| *set == vs) {
            return Some(*v);
        }
        let all = vs[1..].iter().fold(vs[0], |acc, &v| self.and(acc, v));
        self.held().conjunctions.push((vs, all));
        Some(all)
    }

    /// The current columns `v` is computed from, as bits (bit `j`: column
    /// `j`; the columns past 64 are not told apart).
    pub(crate) fn columns_of(&self, v: Value) -> u64 {
        let arena = &self.traced.trace.arena;
        let mut found = 0u64;
        let mut seen: SmallVec<[Value; 16]> = SmallVec::new();
        let mut stack: SmallVec<[Value; 16]> = smallvec::smallvec![v];
        while let Some(x) = stack.pop() {
            if seen.contains(&x) {
                continue;
            }
            seen.push(x);
            if let Some(j) = self.columns.iter().position(|&c| c == x) {
                found |= 1 << j.min(63);
                continue;
            }
            stack.extend(arena.get(x).node.operands());
        }
        found
    }

    /// The validity of `v`: the conjunction of the validities of the
    /// current columns it is computed from (`None` when none may be null).
    pub(crate) fn validity_of(&mut self, v: Value) -> Option<Value> {
        let h = self.held.as_ref()?;
        if h.validity.iter().all(Option::is_none) {
            return None;
        }
        let read = self.columns_of(v);
        let vs: SmallVec<[Value; 4]> = h
            .validity
            .iter()
            .enumerate()
            .filter(|&(j, _)| read & (1 << j.min(63)) != 0)
            .filter_map(|(_, v)| *v)
            .collect();
        self.and_all(vs)
    }

    /// The validity of a whole element: every current column valid.
    pub(crate) fn element_validity(&mut self) -> Option<Value> {
        let vs: SmallVec<[Value; 4]> = self
            .held
            .as_ref()?
            .validity
            .iter()
            .flatten()
            .copied()
            .collect();
        self.and_all(vs)
    }

    /// After a `map` traced `outputs`: their validities (computed before
    /// they replace the columns).
    pub(crate) fn validity_of_outputs(&mut self, outputs: &[Value]) {
        if !self.has_nulls() {
            if let Some(h) = self.held.as_mut() {
                h.validity.clear();
                h.validity.resize(outputs.len(), None);
            }
            return;
        }
        let vs: SmallVec<[Option<Value>; 4]> =
            outputs.iter().map(|&o| self.validity_of(o)).collect();
        self.held().validity = vs;
    }

    /// The rows to keep under a predicate: valid and true.
    pub(crate) fn predicate_with_nulls(&mut self, p: Value) -> Value {
        match self.validity_of(p) {
            Some(v) => self.and(p, v),
            None => p,
        }
    }

    /// Filters out the rows where `v` is false.
    pub(crate) fn push_filter(&mut self, v: Value) {
        self.traced
            .trace
            .ops
            .push(LogicalOp::Filter { predicate: v });
    }

    /// `1` where `valid` is false, `0` where true (a `u32` sort or group
    /// key that puts the nulls apart).
    pub(crate) fn null_flag(&mut self, valid: Value) -> Value {
        let null = self.traced.trace.arena.push_unchecked(NodeData {
            node: Node::Unary(crate::expr::ops::UnaryOp::Not, valid),
            ty: DType::Bool,
        });
        self.traced.trace.arena.push_unchecked(NodeData {
            node: Node::Cast(null),
            ty: DType::U32,
        })
    }

    /// `k` where `valid`, zero where not: one key for every null row (so
    /// they group together and keep their order in a stable sort).
    pub(crate) fn zero_where_null(&mut self, valid: Value, k: Value) -> Value {
        let ty = self.traced.trace.arena.ty(k);
        let zero = self.traced.trace.arena.push_unchecked(NodeData {
            node: Node::Const(crate::expr::Scalar::zero(ty)),
            ty,
        });
        self.traced.trace.arena.push_unchecked(NodeData {
            node: Node::Select(valid, k, zero),
            ty,
        })
    }

    /// The sort keys with nulls apart: before each key that may be null,
    /// its "is null" flag (ascending: nulls last, whatever the key's own
    /// direction; descending after [`Query::nulls_first`]), and the key
    /// zero where null (null rows tie and keep their input order).
    pub(crate) fn sort_keys_with_nulls(
        &mut self,
        keys: SmallVec<[crate::semantics::order::SortKey; 2]>,
    ) -> SmallVec<[crate::semantics::order::SortKey; 2]> {
        use crate::semantics::order::SortKey;
        let first = self.held.as_ref().is_some_and(|h| h.nulls_first);
        let mut out = SmallVec::new();
        for k in keys {
            match self.validity_of(k.value) {
                Some(v) => {
                    out.push(SortKey {
                        value: self.null_flag(v),
                        descending: first,
                    });
                    out.push(SortKey {
                        value: self.zero_where_null(v, k.value),
                        descending: k.descending,
                    });
                }
                None => out.push(k),
            }
        }
        out
    }

    /// Rewrites a terminal for the nulls of the columns it reads: a filter
    /// of the rows where they are valid before an aggregate, or an error
    /// where the terminal does not take nulls yet.
    pub(crate) fn settle_nulls(&mut self, terminal: &mut LogicalTerminal) {
        if !self.has_nulls() {
            return;
        }
        match terminal {
            LogicalTerminal::Reduce(aggs) => {
                self.settle_pass(aggs, None);
                uncount(aggs);
            }
            LogicalTerminal::CountByKey { key, .. } => {
                let key = *key;
                if let Some(v) = self.validity_of(key) {
                    self.push_filter(v);
                }
            }
            LogicalTerminal::Collect(cols) => {
                let cols = cols.clone();
                if cols.iter().any(|&c| self.validity_of(c).is_some()) {
                    self.refuse(|| {
                        "collect() of a column with nulls: use collect_arrow() or \
                         collect_options(), or drop_nulls()/fill_null(..) first"
                            .into()
                    });
                }
            }
            LogicalTerminal::Group { .. } => self.refuse_nulls("distinct (or count_distinct)"),
        }
    }
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Prepares a grouping over columns that may be null: a null key
    /// component becomes a value of its own (zero there, behind an "is
    /// null" key, so nulls order last component by component), and the
    /// aggregates skip their nulls ([`Query::settle_group_aggs`]). Returns
    /// which key components are flagged (none when refused) and, for each
    /// aggregate asked for, its slot among those `aggs` becomes. A tuple
    /// key with nulls needs `options` (its keys come back as `Option`s):
    /// refused otherwise.
    pub(crate) fn settle_group_nulls(
        &mut self,
        keys: &mut SmallVec<[Value; 2]>,
        aggs: &mut SmallVec<[LogicalAgg; 4]>,
        options: bool,
        keep_null_values: bool,
    ) -> (SmallVec<[bool; 2]>, Slots) {
        let mut flagged = SmallVec::new();
        if !self.has_nulls() {
            return (flagged, merge_aggs(aggs));
        }
        let valid: SmallVec<[Option<Value>; 2]> =
            keys.iter().map(|&k| self.validity_of(k)).collect();
        if !options && keys.len() > 1 && valid.iter().any(Option::is_some) {
            self.refuse(|| {
                "group_by on a tuple key with nulls: call option_keys() to get the keys as \
                 Options (None where null), or fill_null(..)/drop_nulls() first"
                    .into()
            });
        } else {
            let mut out = SmallVec::new();
            for (&k, v) in keys.iter().zip(&valid) {
                flagged.push(v.is_some());
                match *v {
                    Some(v) => {
                        out.push(self.null_flag(v));
                        out.push(self.zero_where_null(v, k));
                    }
                    None => out.push(k),
                }
            }
            *keys = out;
        }
        self.settle_group_aggs(aggs, keep_null_values);
        self.reset_validity();
        (flagged, merge_aggs(aggs))
    }

    /// Makes the aggregates of a grouping skip their nulls. When every
    /// column they read has one validity, a group whose values are all
    /// null stays (counted 0, its `min` and the like `None`) where the
    /// aggregates can read the identity at null rows instead
    /// ([`Query::mask_aggs`]; `keep_null_values`), and its rows are
    /// dropped before grouping otherwise (`variance`, `first`, `last`,
    /// `argmin`/`argmax`). Columns with different validities in one pass
    /// need the identity: the other aggregates are refused there.
    /// `count()` counts the rows where every aggregated column is valid.
    fn settle_group_aggs(&mut self, aggs: &mut SmallVec<[LogicalAgg; 4]>, keep_null_values: bool) {
        let own: SmallVec<[Option<Value>; 4]> = aggs
            .iter()
            .map(|a| a.column.and_then(|c| self.validity_of(c)))
            .collect();
        // One validity per class of aggregates that read a column.
        let mut classes: SmallVec<[Option<Value>; 4]> = SmallVec::new();
        for (a, &v) in aggs.iter().zip(&own) {
            if a.column.is_some() && !classes.contains(&v) {
                classes.push(v);
            }
        }
        let all = self.and_all(classes.iter().flatten().copied().collect());
        let own: SmallVec<[Option<Value>; 4]> = aggs
            .iter()
            .zip(own)
            .map(|(a, v)| if a.column.is_some() { v } else { all })
            .collect();
        match classes.as_slice() {
            [] | [None] => {}
            [Some(v)] => {
                let v = *v;
                if !(keep_null_values && self.mask_aggs(aggs, &own)) {
                    self.push_filter(v);
                }
            }
            _ => {
                if !self.mask_aggs(aggs, &own) {
                    self.refuse(|| {
                        format!(
                            "{} over columns with different nulls in one group pass is not \
                             supported yet (count, sum, min, max, mean, any and all are): \
                             drop_nulls() or fill_null(..) first, or one query per column",
                            unmaskable(aggs, &own)
                        )
                    });
                }
            }
        }
    }

    /// Settles the nulls of one [`Query::aggregate`] pass
    /// ([`Query::settle_pass`]) and returns, for each aggregate asked for,
    /// its slot among those `aggs` becomes.
    pub(crate) fn settle_aggs(
        &mut self,
        aggs: &mut SmallVec<[LogicalAgg; 4]>,
    ) -> (Slots, ArgFixes) {
        let mut fixes = ArgFixes::new();
        self.settle_pass(aggs, Some(&mut fixes));
        let slots = merge_aggs(aggs);
        for f in &mut fixes {
            for i in [&mut f.arg, &mut f.best, &mut f.first] {
                *i = slots[*i as usize];
            }
        }
        (slots, fixes)
    }

    /// Settles the nulls of one pass of aggregates over the whole stream:
    /// when every aggregate reads one validity (a `count()` that of the
    /// whole element; the count a `min` or `mean` goes with, `Count(Some(c))`,
    /// that of `c`), the rows where it is false are filtered out; when
    /// they read different ones, each aggregate reads its identity where
    /// its own is false ([`Query::mask_aggs`]), refused for those that
    /// cannot. With an `argmin`/`argmax` among them every aggregate reads
    /// masked (a filter would move its positions): its null rows read a
    /// value that never wins, and `args` gets how to tell a tie with it
    /// apart ([`Query::mask_args`]); without `args`, refused. Leaves the
    /// columns without nulls.
    pub(crate) fn settle_pass(
        &mut self,
        aggs: &mut SmallVec<[LogicalAgg; 4]>,
        args: Option<&mut ArgFixes>,
    ) {
        if !self.has_nulls() {
            return;
        }
        let arg = aggs
            .iter()
            .any(|a| matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax));
        let mut own: SmallVec<[Option<Value>; 4]> = aggs
            .iter()
            .map(|a| match (&a.kind, a.column) {
                (AggKind::Count, None) => self.element_validity(),
                (_, Some(c)) => self.validity_of(c),
                (_, None) => None,
            })
            .collect();
        let first = own.first().copied().flatten();
        if !arg && own.iter().all(|&v| v == first) {
            if let Some(v) = first {
                self.push_filter(v);
            }
        } else if arg && args.is_none() {
            self.refuse(|| {
                "argmin/argmax among other aggregates over a column with nulls is not \
                 supported here: call argmin()/argmax() alone (they skip nulls), or \
                 drop_nulls()/fill_null(..) first"
                    .into()
            });
        } else if !self.can_mask(aggs, &own, arg) {
            self.refuse(|| {
                format!(
                    "{} over columns with different nulls in one pass is not supported yet \
                     (count, sum, min, max, mean, any, all, argmin and argmax are): \
                     drop_nulls() or fill_null(..) first, or one query per column",
                    unmaskable(aggs, &own)
                )
            });
        } else {
            if let Some(fixes) = args {
                self.mask_args(aggs, &mut own, fixes);
            }
            let masked = self.mask_aggs(aggs, &own);
            debug_assert!(masked, "can_mask said so");
        }
        self.reset_validity();
    }

    /// Whether every aggregate that may read a null (`own`) can skip it by
    /// reading its identity there (an argmin/argmax: where `arg`).
    fn can_mask(&self, aggs: &[LogicalAgg], own: &[Option<Value>], arg: bool) -> bool {
        aggs.iter().zip(own).all(|(a, v)| {
            v.is_none()
                || maskable(&a.kind)
                || (arg && matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax))
        })
    }

    /// Makes each argmin/argmax whose column may be null (`own`) read it
    /// masked, null rows at a value that never wins (NaN, or the type's
    /// extreme that a valid value can only tie), and adds what tells the
    /// ties apart: the masked min/max and the first valid row. Its `own`
    /// becomes `None` (done).
    fn mask_args(
        &mut self,
        aggs: &mut SmallVec<[LogicalAgg; 4]>,
        own: &mut [Option<Value>],
        fixes: &mut ArgFixes,
    ) {
        use crate::expr::ops::UnaryOp;
        let arena = &mut self.traced.trace.arena;
        let push = |arena: &mut crate::expr::ExprArena, node: Node, ty: DType| {
            arena.push_unchecked(NodeData { node, ty })
        };
        let mut extra: SmallVec<[LogicalAgg; 4]> = SmallVec::new();
        for (i, (a, v)) in aggs.iter_mut().zip(own.iter_mut()).enumerate() {
            let (Some(valid), Some(c)) = (*v, a.column) else {
                continue;
            };
            let best = match a.kind {
                AggKind::ArgMin => AggKind::Min,
                AggKind::ArgMax => AggKind::Max,
                _ => continue,
            };
            let (masked, mask) = masked(arena, &best, valid, c);
            a.column = Some(masked);
            let null = push(arena, Node::Unary(UnaryOp::Not, valid), DType::Bool);
            let null = push(arena, Node::Cast(null), DType::U32);
            extra.push(LogicalAgg {
                kind: best,
                column: Some(masked),
            });
            extra.push(LogicalAgg {
                kind: AggKind::ArgMin,
                column: Some(null),
            });
            fixes.push(ArgFix {
                arg: i as u32,
                best: 0,
                first: 0,
                mask,
            });
            *v = None;
        }
        let base = aggs.len() as u32;
        for (k, f) in fixes.iter_mut().enumerate() {
            f.best = base + 2 * k as u32;
            f.first = base + 2 * k as u32 + 1;
        }
        aggs.extend(extra);
    }

    /// A pipeline's aggregates, traced without data: a count that goes
    /// with a value (`Count(Some(c))`, for a `min`, `mean`...) becomes the
    /// count of elements where `c` reads every column, and stays a count
    /// of its own, one per set of columns read, where `c` reads some (a
    /// replay over columns with different nulls counts the rows where
    /// those are valid: [`Query::settle_pass`]); aggregates that became
    /// identical merge. Returns each one's slot.
    pub(crate) fn pipeline_counts(&self, aggs: &mut SmallVec<[LogicalAgg; 4]>) -> Slots {
        let every = u64::MAX >> (64 - self.columns.len().clamp(1, 64));
        let mut sets: SmallVec<[(u64, Value); 4]> = SmallVec::new();
        for a in aggs.iter_mut().filter(|a| a.kind == AggKind::Count) {
            let Some(c) = a.column else { continue };
            let read = self.columns_of(c);
            if read == every {
                a.column = None;
            } else if let Some(&(_, first)) = sets.iter().find(|(r, _)| *r == read) {
                a.column = Some(first);
            } else {
                sets.push((read, c));
            }
        }
        dedup_aggs(aggs)
    }

    /// Makes each aggregate skip the rows where its validity (`own`,
    /// parallel to `aggs`; `None`: never null) is false without filtering
    /// them out: a count becomes the sum of the validity, a sum, min,
    /// max, any or all reads its identity there. `false` (nothing
    /// changed) when an aggregate cannot skip a row that way (argmin,
    /// argmax, first, last, variance, a custom reduce).
    fn mask_aggs(&mut self, aggs: &mut SmallVec<[LogicalAgg; 4]>, own: &[Option<Value>]) -> bool {
        use crate::expr::ops::UnaryOp;
        if !self.can_mask(aggs, own, false) {
            return false;
        }
        let arena = &mut self.traced.trace.arena;
        let push = |arena: &mut crate::expr::ExprArena, node: Node, ty: DType| {
            arena.push_unchecked(NodeData { node, ty })
        };
        // One count per validity.
        let mut counts: SmallVec<[(Value, Value); 4]> = SmallVec::new();
        for (a, &v) in aggs.iter_mut().zip(own) {
            let Some(v) = v else { continue };
            if a.kind == AggKind::Count {
                let n = match counts.iter().find(|(w, _)| *w == v) {
                    Some(&(_, n)) => n,
                    None => {
                        let n = push(arena, Node::Cast(v), DType::U64);
                        counts.push((v, n));
                        n
                    }
                };
                *a = LogicalAgg {
                    kind: AggKind::Sum,
                    column: Some(n),
                };
                continue;
            }
            let Some(c) = a.column else { continue };
            a.column = Some(match a.kind {
                AggKind::Any => push(arena, Node::Binary(BinaryOp::And, v, c), DType::Bool),
                AggKind::All => {
                    let null = push(arena, Node::Unary(UnaryOp::Not, v), DType::Bool);
                    push(arena, Node::Binary(BinaryOp::Or, null, c), DType::Bool)
                }
                _ => masked(arena, &a.kind, v, c).0,
            });
        }
        true
    }

    /// Drops the elements where any column is null; the query goes on
    /// without nulls.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// // Without Arrow inputs nothing is null: this keeps every element.
    /// let v: Vec<i32> = [1, 2].compute().drop_nulls().collect();
    /// assert_eq!(v, [1, 2]);
    /// ```
    pub fn drop_nulls(mut self) -> Self {
        self.refuse_in_pipeline("drop_nulls()");
        if let Some(v) = self.element_validity() {
            self.push_filter(v);
        }
        if let Some(h) = self.held.as_mut() {
            h.validity.iter_mut().for_each(|v| *v = None);
        }
        self
    }

    /// The sorts after this call put null elements first instead of last
    /// (Arrow data with nulls; without nulls it changes nothing).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<u32> = [2u32, 1].compute().nulls_first().sort().collect();
    /// assert_eq!(v, [1, 2]);
    /// ```
    pub fn nulls_first(mut self) -> Self {
        self.refuse_in_pipeline("nulls_first()");
        self.held().nulls_first = true;
        self
    }

    /// Number of rows, null or not (`count` counts the non-null elements
    /// of a query over Arrow data with nulls; without nulls both agree).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1.0f32, 2.0].compute().count_rows(), 2);
    /// ```
    pub fn count_rows(mut self) -> M::Out<usize> {
        self.refuse_in_pipeline("count_rows()");
        if let Some(h) = self.held.as_mut() {
            h.validity.iter_mut().for_each(|v| *v = None);
        }
        self.count()
    }
}

impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// Replaces null elements by `value`; the query goes on without nulls.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let s: f32 = [1.0f32, 2.0].compute().fill_null(0.0).sum();
    /// assert_eq!(s, 3.0);
    /// ```
    pub fn fill_null(mut self, value: T) -> Self {
        self.refuse_in_pipeline("fill_null(..)");
        let Some(valid) = self.element_validity() else {
            return self;
        };
        let id = self.arena_id;
        let mut q =
            self.map(move |x| Expr::<bool>::from_parts(valid, id).select(x, Expr::param(value)));
        if let Some(h) = q.held.as_mut() {
            h.validity.iter_mut().for_each(|v| *v = None);
        }
        q
    }
}

#[cfg(feature = "arrow")]
impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// Collects the elements and, where some may be null, their validity
    /// (`valid[i]` false where element `i` is null).
    pub(crate) fn collect_with_validity<R>(
        mut self,
        f: impl FnOnce(Vec<T>, Option<Vec<bool>>) -> R,
    ) -> M::Out<R> {
        let c = self.columns[0];
        let v = self.validity_of(c);
        self.reset_validity();
        let mut cols: SmallVec<[Value; 4]> = smallvec::smallvec![c];
        cols.extend(v);
        self.finish(LogicalTerminal::Collect(cols), move |o| match o {
            crate::plan::PlanOutput::Columns(mut cs) => {
                let valid = if cs.len() > 1 {
                    cs.pop().map(bool::from_column)
                } else {
                    None
                };
                let values = cs.pop().map(T::from_column).unwrap_or_default();
                f(values, valid)
            }
            crate::plan::PlanOutput::Aggregates(_) => {
                unreachable!("a collect plan returned aggregates")
            }
        })
    }
}

/// For each aggregate asked for, its slot among the aggregates the plan
/// computes.
pub(crate) type Slots = SmallVec<[u32; 8]>;

/// Whether an aggregate skips a row by reading its identity there.
fn maskable(kind: &AggKind) -> bool {
    matches!(
        kind,
        AggKind::Count | AggKind::Sum | AggKind::Min | AggKind::Max | AggKind::Any | AggKind::All
    )
}

/// The names of the aggregates that cannot, of those that may read a
/// null (`own`), for an error.
fn unmaskable(aggs: &[LogicalAgg], own: &[Option<Value>]) -> String {
    let mut names: SmallVec<[&str; 4]> = SmallVec::new();
    let cannot = aggs
        .iter()
        .zip(own)
        .filter(|(a, v)| v.is_some() && !maskable(&a.kind) && !is_arg(&a.kind));
    for (a, _) in cannot {
        let name = match a.kind {
            AggKind::M2 => "variance/std_dev",
            _ => a.kind.name(),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

/// `c` where `valid`, else `kind`'s identity (a value that never wins a
/// min or max, adds nothing to a sum); returns it and the identity.
fn masked(
    arena: &mut crate::expr::ExprArena,
    kind: &AggKind,
    valid: Value,
    c: Value,
) -> (Value, Scalar) {
    let ty = arena.ty(c);
    let id = crate::semantics::agg_identity(kind, ty, &[]);
    let k = arena.push_unchecked(NodeData {
        node: Node::Const(id),
        ty,
    });
    let v = arena.push_unchecked(NodeData {
        node: Node::Select(valid, c, k),
        ty,
    });
    (v, id)
}

fn is_arg(kind: &AggKind) -> bool {
    matches!(kind, AggKind::ArgMin | AggKind::ArgMax)
}

/// An argmin/argmax that read its column masked ([`Query::mask_args`]):
/// its slot, the slots of the masked min/max and of the first valid row,
/// and the mask. Where the masked best is the mask (every valid value
/// ties with it, or is NaN), the answer is the first valid row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArgFix {
    pub(crate) arg: u32,
    pub(crate) best: u32,
    pub(crate) first: u32,
    pub(crate) mask: Scalar,
}

/// The [`ArgFix`]es of one pass.
pub(crate) type ArgFixes = SmallVec<[ArgFix; 1]>;

/// Applies `fixes` to a pass's values (in the plan's slots).
pub(crate) fn fix_args(values: &mut [Scalar], fixes: &[ArgFix]) {
    for f in fixes {
        let best = values[f.best as usize];
        let tied = match best {
            Scalar::F32(x) => x.is_nan(),
            Scalar::F64(x) => x.is_nan(),
            _ => best.to_bits() == f.mask.to_bits(),
        };
        if tied {
            values[f.arg as usize] = values[f.first as usize];
        }
    }
}

/// Makes every count a count of rows (`Count(Some(c))` is the count of
/// the rows where `c` is not null: once the nulls are settled, of rows),
/// slot for slot.
pub(crate) fn uncount(aggs: &mut [LogicalAgg]) {
    for a in aggs.iter_mut().filter(|a| a.kind == AggKind::Count) {
        a.column = None;
    }
}

/// The aggregates the plan computes from those asked for: a count of a
/// column left (`Count(Some(c))`: its column never null, or filtered on)
/// counts rows, and aggregates that became identical are computed once.
/// Returns each one's slot.
pub(crate) fn merge_aggs(aggs: &mut SmallVec<[LogicalAgg; 4]>) -> Slots {
    uncount(aggs);
    dedup_aggs(aggs)
}

/// Computes identical aggregates once; returns each one's slot.
fn dedup_aggs(aggs: &mut SmallVec<[LogicalAgg; 4]>) -> Slots {
    let mut out: SmallVec<[LogicalAgg; 4]> = SmallVec::new();
    let slots = aggs
        .drain(..)
        .map(|a| match out.iter().position(|b| *b == a) {
            Some(i) => i as u32,
            None => {
                out.push(a);
                (out.len() - 1) as u32
            }
        })
        .collect();
    *aggs = out;
    slots
}
