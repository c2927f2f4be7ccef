//! Keyed aggregation: [`Query::group_by`] and its terminals, and the set
//! terminals `distinct`, `count_distinct` and `value_counts`.
//!
//! Keys compare as group keys: `-0.0` is `+0.0` and every NaN is one key.
//! Groups come sorted by key in the canonical total order (NaN last), or
//! in the order of each group's first element with
//! [`GroupBy::first_seen`].

use super::aggregate::{AggShape, Aggregates};
use super::{Mode, Query};
use crate::expr::{Element, Expr, Numeric, Scalar, Shape, Value};
use crate::graph::{LogicalAgg, LogicalTerminal};
use crate::plan::PlanOutput;
use crate::types::Column;
use smallvec::SmallVec;
use std::marker::PhantomData;

/// Groups: one key and one value per distinct key, as two columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Groups<K, V> {
    /// The distinct keys, sorted (or in first-seen order).
    pub keys: Vec<K>,
    /// The value of each key's group.
    pub values: Vec<V>,
    /// The value of the group of the rows whose key is null (Arrow data
    /// with nulls only; it sorts after every key), apart from `keys` and
    /// `values`. Always `None` after [`GroupBy::option_keys`], which
    /// returns that group as the key `None`.
    pub null_group: Option<V>,
}

impl<K, V> Groups<K, V> {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none (an empty input).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// `(key, value)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.keys.iter().zip(&self.values)
    }

    /// The pairs as a vector.
    pub fn into_pairs(self) -> Vec<(K, V)> {
        self.keys.into_iter().zip(self.values).collect()
    }
}

impl<K, V> IntoIterator for Groups<K, V> {
    type Item = (K, V);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<K>, std::vec::IntoIter<V>>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.into_iter().zip(self.values)
    }
}

/// A query grouped by a traced key, waiting for its aggregates
/// ([`Query::group_by`]).
#[must_use = "a grouping does nothing until a terminal such as `count` or `agg` runs"]
pub struct GroupBy<'a, S, K, M, R = PlainKeys> {
    query: Query<'a, S, M>,
    keys: SmallVec<[Value; 2]>,
    first_seen: bool,
    _key: PhantomData<(K, R)>,
}

/// How a grouping returns its keys: as their Rust values ([`PlainKeys`],
/// the default) or with their nulls ([`OptionKeys`], after
/// [`GroupBy::option_keys`]).
pub trait KeyRead<K: Shape> {
    /// One key as returned.
    type Out: Send + 'static;
    /// Whether a key component may come back null.
    #[doc(hidden)]
    const OPTIONS: bool;
    /// Reads the key columns; `valid` has one entry per column (`None`:
    /// no row of it is null).
    #[doc(hidden)]
    fn read(cols: &mut Vec<Column>, valid: &mut Vec<Option<Vec<bool>>>) -> Vec<Self::Out>;
}

/// Keys returned as their Rust values: a null key (one key over Arrow
/// data) is the group [`Groups::null_group`].
#[derive(Debug)]
pub struct PlainKeys;

/// Keys returned with their nulls: each component an `Option`, `None`
/// where null ([`GroupBy::option_keys`]).
#[derive(Debug)]
pub struct OptionKeys;

impl<K: Shape> KeyRead<K> for PlainKeys {
    type Out = K::Host;
    const OPTIONS: bool = false;
    fn read(cols: &mut Vec<Column>, _: &mut Vec<Option<Vec<bool>>>) -> Vec<K::Host> {
        K::host_from_columns(cols)
    }
}

impl<K: Shape> KeyRead<K> for OptionKeys {
    type Out = K::Options;
    const OPTIONS: bool = true;
    fn read(cols: &mut Vec<Column>, valid: &mut Vec<Option<Vec<bool>>>) -> Vec<K::Options> {
        K::options_from_columns(cols, valid)
    }
}

/// The keys of a group plan's output, read as `R` reads them: `cols` are
/// the key columns, each component that may be null (`flagged`) behind
/// its "is null" flag. Also the index of the group whose (only) key is
/// null, for [`Groups::null_group`] when `R` reads plain keys.
fn read_keys<K: Shape, R: KeyRead<K>>(
    cols: Vec<Column>,
    flagged: &[bool],
) -> (Vec<R::Out>, Option<usize>) {
    let mut keys = Vec::with_capacity(K::WIDTH);
    let mut valid = Vec::with_capacity(K::WIDTH);
    let mut it = cols.into_iter();
    for j in 0..K::WIDTH {
        let v = if flagged.get(j).copied().unwrap_or(false) {
            match it.next() {
                Some(Column::U32(flag)) => Some(flag.iter().map(|&f| f == 0).collect::<Vec<_>>()),
                _ => unreachable!("the null flag is a u32 column"),
            }
        } else {
            None
        };
        keys.extend(it.next());
        valid.push(v);
    }
    let null_at = match (R::OPTIONS, valid.as_slice()) {
        (false, [Some(v)]) => v.iter().position(|&ok| !ok),
        _ => None,
    };
    (R::read(&mut keys, &mut valid), null_at)
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Groups the elements by the key `f` computes (one expression or a
    /// tuple of them, up to 128 bits of key together), for
    /// [`GroupBy::count`], [`GroupBy::sum`], ..., or any aggregates of
    /// traced expressions per group with [`GroupBy::agg`].
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [3u32, 1, 3, 2, 1, 3];
    /// let g = xs.compute().group_by(|x| x).count();
    /// assert_eq!(g.keys, [1, 2, 3]);
    /// assert_eq!(g.values, [2, 1, 3]);
    /// // Several aggregates of expressions per group, in one pass.
    /// let ys = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let g = xs
    ///     .compute()
    ///     .zip(&ys)
    ///     .group_by(|(x, _)| x & 1)
    ///     .agg(|(_, y), a| (a.count(), a.sum(y), a.max(y * 10.0)));
    /// assert_eq!(g.keys, [0, 1]);
    /// assert_eq!(g.values, [(1, 4.0, Some(40.0)), (5, 17.0, Some(60.0))]);
    /// ```
    pub fn group_by<K: Shape>(mut self, f: impl FnOnce(S) -> K) -> GroupBy<'a, S, K, M> {
        let keys = self.trace_closure(f).into_iter().collect();
        GroupBy {
            query: self,
            keys,
            first_seen: false,
            _key: PhantomData,
        }
    }
}

/// Splits a group plan's output into the key columns and the rest.
fn split_columns(out: PlanOutput, width: usize) -> (Vec<Column>, Vec<Column>) {
    match out {
        PlanOutput::Columns(mut cols) => {
            let rest = cols.split_off(width.min(cols.len()));
            (cols, rest)
        }
        PlanOutput::Aggregates(_) => unreachable!("a group plan returned aggregates"),
    }
}

impl<'a, S: Shape, K: Shape, M: Mode, R: KeyRead<K>> GroupBy<'a, S, K, M, R> {
    fn with_mode<M2: Mode, R2: KeyRead<K>>(self) -> GroupBy<'a, S, K, M2, R2> {
        GroupBy {
            query: self.query.reshape(),
            keys: self.keys,
            first_seen: self.first_seen,
            _key: PhantomData,
        }
    }

    /// The terminal returns `(groups, ExecutionMetrics)`, as
    /// [`Query::with_metrics`].
    pub fn with_metrics(self) -> GroupBy<'a, S, K, super::Measured, R> {
        self.with_mode()
    }

    /// The terminal returns the plan without running, as
    /// [`Query::explain`].
    pub fn explain(self) -> GroupBy<'a, S, K, super::ExplainOnly, R> {
        self.with_mode()
    }

    /// The terminal runs and returns the plan with its metrics.
    pub fn explain_analyze(self) -> GroupBy<'a, S, K, super::Analyze, R> {
        self.with_mode()
    }

    /// The terminal returns `Result`, as [`Query::fallible`].
    pub fn fallible(self) -> GroupBy<'a, S, K, super::Try, R> {
        self.with_mode()
    }

    /// The groups' keys with their nulls (Arrow data): each component an
    /// `Option`, `None` where it is null, the null of each component
    /// ordered after its values (SQL's `NULLS LAST`, component by
    /// component). Needed for a tuple key that may be null; for one key,
    /// the null key's group comes as the key `None` (last) instead of in
    /// [`Groups::null_group`]. A key component that may be null takes 32
    /// more bits of the 128 a key may have.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// // Without Arrow inputs nothing is null: every key is `Some`.
    /// let g = [3u32, 1, 3].compute().group_by(|x| (x, x % 2)).option_keys().count();
    /// assert_eq!(g.keys, [(Some(1), Some(1)), (Some(3), Some(1))]);
    /// ```
    pub fn option_keys(self) -> GroupBy<'a, S, K, M, OptionKeys> {
        self.with_mode()
    }

    /// Groups in the order of their first element instead of by key.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let g = [3i32, 1, 3, 2].compute().group_by(|x| x).first_seen().count();
    /// assert_eq!(g.keys, [3, 1, 2]);
    /// ```
    pub fn first_seen(mut self) -> Self {
        self.first_seen = true;
        self
    }

    /// Any aggregates of traced expressions of the element per group, in
    /// one pass: the closure asks an [`Aggregates`] for them as in
    /// [`Query::aggregate`] (count, sum, min, max, mean, variance,
    /// std_dev, argmin/argmax, first/last, any/all). A group is never
    /// empty, so the `Option`s are `Some` (an argmin/argmax is a position
    /// in the stream reaching the grouping).
    pub fn agg<A: AggShape>(
        self,
        f: impl FnOnce(S, &mut Aggregates) -> A,
    ) -> M::Out<Groups<R::Out, A::Out>> {
        self.agg_with(f, true)
    }

    /// [`GroupBy::agg`]; `keep_null_values`: a group whose aggregated
    /// values are all null is kept where the aggregates allow (its `min`
    /// and the like are `None`), not dropped.
    fn agg_with<A: AggShape>(
        mut self,
        f: impl FnOnce(S, &mut Aggregates) -> A,
        keep_null_values: bool,
    ) -> M::Out<Groups<R::Out, A::Out>> {
        let q = &mut self.query;
        let mut aggs = Aggregates::new(q.arena_id);
        let shape = q.trace_with(|x| f(x, &mut aggs));
        let mut list: SmallVec<[LogicalAgg; 4]> = aggs.aggs.into_iter().collect();
        let mut keys = self.keys;
        // With nulls, an "is null" column (0 or 1) before each key that
        // may be null keeps the rows of a null key in groups of their own.
        let (flagged, slots) =
            q.settle_group_nulls(&mut keys, &mut list, R::OPTIONS, keep_null_values);
        let width = K::WIDTH + flagged.iter().filter(|&&f| f).count();
        let terminal = LogicalTerminal::Group {
            keys,
            aggs: list,
            first_seen: self.first_seen,
        };
        self.query.finish(terminal, move |out| {
            let (keys, values) = split_columns(out, width);
            let groups = keys.first().map_or(0, |c| c.len());
            let mut row: Vec<Scalar> = Vec::with_capacity(values.len());
            let mut values: Vec<A::Out> = (0..groups)
                .map(|j| {
                    row.clear();
                    row.extend(slots.iter().map(|&i| values[i as usize].as_ref().get(j)));
                    shape.read(&row)
                })
                .collect();
            let (mut keys, null_at) = read_keys::<K, R>(keys, &flagged);
            let null_group = null_at.map(|at| {
                keys.remove(at);
                values.remove(at)
            });
            Groups {
                keys,
                values,
                null_group,
            }
        })
    }

    /// Number of elements per group.
    pub fn count(self) -> M::Out<Groups<R::Out, u64>> {
        self.agg(|_, a| a.count())
    }

    /// The distinct keys alone.
    fn keys_only(mut self) -> M::Out<Vec<R::Out>> {
        let q = &mut self.query;
        let flagged = match (q.has_nulls(), R::OPTIONS) {
            (false, _) => SmallVec::new(),
            (true, true) => {
                q.settle_group_nulls(&mut self.keys, &mut SmallVec::new(), true, true)
                    .0
            }
            (true, false) => {
                q.refuse(|| {
                    "distinct() of a column with nulls: use distinct_options() (the null \
                     comes as None, last), or drop_nulls()/fill_null(..) first"
                        .into()
                });
                SmallVec::new()
            }
        };
        let width = K::WIDTH + flagged.iter().filter(|&&f| f).count();
        let terminal = LogicalTerminal::Group {
            keys: self.keys,
            aggs: SmallVec::new(),
            first_seen: self.first_seen,
        };
        self.query.finish(terminal, move |out| {
            let (keys, _) = split_columns(out, width);
            read_keys::<K, R>(keys, &flagged).0
        })
    }
}

impl<'a, T: Numeric, K: Shape, M: Mode, R: KeyRead<K>> GroupBy<'a, Expr<T>, K, M, R> {
    /// Sum of the elements per group (wrapping for integers).
    pub fn sum(self) -> M::Out<Groups<R::Out, T>> {
        self.agg(|x, a| a.sum(x))
    }

    /// Smallest element per group (NaN rules as [`Query::min`]).
    pub fn min(self) -> M::Out<Groups<R::Out, T>> {
        self.agg_with(|x, a| Unwrapped(a.min(x)), false)
    }

    /// Largest element per group.
    pub fn max(self) -> M::Out<Groups<R::Out, T>> {
        self.agg_with(|x, a| Unwrapped(a.max(x)), false)
    }

    /// Mean of the elements per group, summed in `f64`.
    pub fn mean(self) -> M::Out<Groups<R::Out, f64>> {
        self.agg_with(|x, a| Unwrapped(a.mean(x)), false)
    }
}

/// An aggregate that is always defined per group (a group is never
/// empty).
#[derive(Clone, Copy)]
struct Unwrapped<A>(A);

impl<T, A: AggShape<Out = Option<T>>> AggShape for Unwrapped<A> {
    type Out = T;
    fn read(&self, values: &[Scalar]) -> T {
        self.0
            .read(values)
            .expect("a group has at least one element")
    }
    fn reads(&self, out: &mut smallvec::SmallVec<[super::Read; 4]>) {
        self.0.reads(out);
    }
}

impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// The distinct values, sorted (`-0.0` and `+0.0` are one value,
    /// `+0.0`; every NaN one, last).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let d: Vec<i64> = [5i64, -1, 5, 3, -1].compute().distinct();
    /// assert_eq!(d, [-1, 3, 5]);
    /// ```
    pub fn distinct(self) -> M::Out<Vec<T>> {
        self.group_by(|x| x).keys_only()
    }

    /// The distinct values with the null (Arrow data): as
    /// [`Query::distinct`], each `Some`, then `None` when some element is
    /// null. (`distinct` of a column with nulls is an error: its `Vec<T>`
    /// has no place for the null.)
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let d = [2u32, 1, 2].compute().distinct_options();
    /// assert_eq!(d, [Some(1), Some(2)]);
    /// ```
    pub fn distinct_options(self) -> M::Out<Vec<Option<T>>> {
        self.group_by(|x| x).option_keys().keys_only()
    }

    /// Number of distinct values (as [`Query::distinct`] counts them).
    /// Null elements (Arrow data) are not counted, as in SQL's
    /// `COUNT(DISTINCT x)`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([0.0f32, -0.0, f32::NAN, -f32::NAN, 1.0].compute().count_distinct(), 3);
    /// ```
    pub fn count_distinct(mut self) -> M::Out<u64> {
        if self.has_nulls() {
            self = self.drop_nulls();
        }
        let keys = self.trace_keys_of_self();
        let terminal = LogicalTerminal::Group {
            keys,
            aggs: SmallVec::new(),
            first_seen: false,
        };
        self.finish(terminal, |out| {
            let (keys, _) = split_columns(out, 1);
            keys.first().map_or(0, |c| c.len() as u64)
        })
    }

    /// How many times each distinct value occurs, sorted by value.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v = [2u32, 7, 2, 2].compute().value_counts();
    /// assert_eq!(v.into_pairs(), [(2, 3), (7, 1)]);
    /// ```
    pub fn value_counts(self) -> M::Out<Groups<T, u64>> {
        self.group_by(|x| x).count()
    }

    fn trace_keys_of_self(&self) -> SmallVec<[Value; 2]> {
        self.columns.iter().copied().collect()
    }
}
