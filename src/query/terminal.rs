//! Terminals: the calls that plan, select a backend and run the query.
//! Each builds a logical terminal and converts the plan's output back to a
//! Rust value; the mode decides what is returned.

use super::pipeline::{Finish, Names, Read, ReadKind};
use super::{Mode, Query, Try};
use crate::expr::{Element, Expr, Numeric, Scalar, Shape};
use crate::graph::{LogicalAgg, LogicalTerminal};
use crate::plan::{AggKind, Combine, PlanOutput};
use crate::runtime::executor::Prepared;
use smallvec::{smallvec, SmallVec};

/// Several aggregates computed in one pass over memory ([`Query::stats`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats<T> {
    /// Number of elements.
    pub count: u64,
    /// Sum (wrapping for integers).
    pub sum: T,
    /// Minimum (`None` when empty).
    pub min: Option<T>,
    /// Maximum (`None` when empty).
    pub max: Option<T>,
    /// Mean computed in `f64` (`None` when empty).
    pub mean: Option<f64>,
}

fn aggs(out: PlanOutput) -> SmallVec<[Scalar; 4]> {
    match out {
        PlanOutput::Aggregates(a) => a,
        PlanOutput::Columns(_) => unreachable!("a reduce plan returned columns"),
    }
}

fn agg(kind: AggKind, column: Option<crate::expr::Value>) -> LogicalAgg {
    LogicalAgg { kind, column }
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    pub(crate) fn finish<R>(
        self,
        terminal: LogicalTerminal,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> M::Out<R> {
        self.finish_as(terminal, || Finish::Other, convert)
    }

    /// [`Query::finish`] for a terminal a [`Pipeline`](super::Pipeline)
    /// can end with: `describe` says how its aggregates become values.
    pub(crate) fn finish_as<R>(
        self,
        terminal: LogicalTerminal,
        describe: impl FnOnce() -> Finish,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> M::Out<R> {
        M::finish(self.into_prepared(terminal), describe, convert)
    }

    /// The query with its terminal, ready to plan and run (inlined into
    /// every terminal, as the code it replaced was: a call here cost a
    /// tiny query ~170 instructions).
    #[inline(always)]
    pub(crate) fn into_prepared(mut self, mut terminal: LogicalTerminal) -> Prepared<'a> {
        if self.held.is_some() {
            self.settle_nulls(&mut terminal);
        }
        self.traced.trace.terminal = Some(terminal);
        Prepared {
            engine: self.engine,
            traced: self.traced,
            inputs: self.inputs,
            options: self.options,
            started: self.started,
            sides: self.sides,
            held: self.held,
            plan: None,
        }
    }

    /// Number of elements.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1.0f32, 2.0, 3.0].compute().filter(|x| x.ge(2.0)).count(), 2);
    /// ```
    pub fn count(self) -> M::Out<usize> {
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![agg(AggKind::Count, None)]),
            || Finish::one(ReadKind::Value, [0, 0]),
            |o| aggs(o)[0].to_bits() as usize,
        )
    }

    /// Whether `f` holds for any element (`false` when empty).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert!([1, 5, 3].compute().any(|x| x.gt(4)));
    /// ```
    pub fn any(mut self, f: impl FnOnce(S) -> Expr<bool>) -> M::Out<bool> {
        let p = self.trace_closure(f)[0];
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![agg(AggKind::Any, Some(p))]),
            || Finish::one(ReadKind::Value, [0, 0]),
            |o| aggs(o)[0].as_bool(),
        )
    }

    /// Whether `f` holds for every element (`true` when empty).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert!(![1, 5, 3].compute().all(|x| x.gt(2)));
    /// ```
    pub fn all(mut self, f: impl FnOnce(S) -> Expr<bool>) -> M::Out<bool> {
        let p = self.trace_closure(f)[0];
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![agg(AggKind::All, Some(p))]),
            || Finish::one(ReadKind::Value, [0, 0]),
            |o| aggs(o)[0].as_bool(),
        )
    }

    /// Materializes the elements in order: `Vec<T>`, or `Vec<(A, B)>` for
    /// tuple shapes.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<f32> = [1.0f32, 4.0].compute().map(|x| x.sqrt()).collect();
    /// assert_eq!(v, vec![1.0, 2.0]);
    /// ```
    pub fn collect<C: From<Vec<S::Host>>>(self) -> M::Out<C> {
        let cols = self.columns.clone();
        self.finish_as(
            LogicalTerminal::Collect(cols),
            || Finish::Columns,
            |o| match o {
                PlanOutput::Columns(mut c) => C::from(S::host_from_columns(&mut c)),
                PlanOutput::Aggregates(_) => unreachable!("a collect plan returned aggregates"),
            },
        )
    }
}

impl<'a, T: Numeric, M: Mode> Query<'a, Expr<T>, M> {
    fn column(&self) -> crate::expr::Value {
        self.columns[0]
    }

    /// Sum of the elements (wrapping for integers; 0 when empty).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([i32::MAX, 1].compute().sum(), i32::MIN);
    /// ```
    pub fn sum(self) -> M::Out<T> {
        let c = self.column();
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![agg(AggKind::Sum, Some(c))]),
            || Finish::one(ReadKind::Value, [0, 0]),
            |o| T::from_scalar(aggs(o)[0]),
        )
    }

    fn extremum(self, kind: AggKind) -> M::Out<Option<T>> {
        let c = self.column();
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![agg(kind, Some(c)), agg(AggKind::Count, None)]),
            || Finish::one(ReadKind::NonEmpty, [0, 1]),
            |o| {
                let a = aggs(o);
                (a[1].to_bits() > 0).then(|| T::from_scalar(a[0]))
            },
        )
    }

    /// Smallest element (`None` when empty). Float NaNs are skipped; an
    /// all-NaN input gives `Some(NaN)`, as `iter().copied().reduce(f32::min)`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([2.0f32, f32::NAN, 1.0].compute().min(), Some(1.0));
    /// assert_eq!(Vec::<f32>::new().compute().min(), None);
    /// ```
    pub fn min(self) -> M::Out<Option<T>> {
        self.extremum(AggKind::Min)
    }

    /// Largest element (`None` when empty); NaN rules as [`Query::min`].
    pub fn max(self) -> M::Out<Option<T>> {
        self.extremum(AggKind::Max)
    }

    fn arg(mut self, kind: AggKind) -> M::Out<Option<usize>> {
        let c = self.column();
        if let Some(valid) = self.validity_of(c) {
            return self.arg_over_nulls(kind, valid);
        }
        self.finish(
            LogicalTerminal::Reduce(smallvec![agg(kind, Some(c)), agg(AggKind::Count, None)]),
            |o| {
                let a = aggs(o);
                (a[1].to_bits() > 0).then(|| a[0].to_bits() as usize)
            },
        )
    }

    /// `argmin`/`argmax` where some elements are null (Arrow data): the
    /// first position of the best non-null element, selected as the top
    /// row of a rank (0 a number, 1 NaN, 2 null) then the value, with
    /// `-0.0` as `+0.0` (they tie, as `argmin` compares them): NaN wins
    /// only over nulls, and `None` when every element is null.
    fn arg_over_nulls(self, kind: AggKind, valid: crate::expr::Value) -> M::Out<Option<usize>> {
        let id = self.arena_id;
        let mut q = self.enumerate().map(move |(i, x)| {
            let valid = Expr::<bool>::from_parts(valid, id);
            let zero = Expr::constant(T::ZERO);
            let nan = x.ne(x);
            let rank = valid.select(nan.cast::<u32>(), Expr::constant(2u32));
            let key = (valid & !nan & x.ne(zero)).select(x, zero);
            (i, (rank, key))
        });
        q.reset_validity();
        let q = if kind == AggKind::ArgMax {
            q.sort_by_key(|(_, (r, k))| (r, k.desc()))
        } else {
            q.sort_by_key(|(_, (r, k))| (r, k))
        };
        let q = q.take(1);
        let cols = smallvec![q.columns[0], q.columns[1]];
        q.finish(LogicalTerminal::Collect(cols), |o| match o {
            PlanOutput::Columns(cs) => match (&cs[0], &cs[1]) {
                (crate::types::Column::U64(i), crate::types::Column::U32(r)) => {
                    (r.first().is_some_and(|&r| r < 2)).then(|| i[0] as usize)
                }
                _ => unreachable!("the position and rank columns"),
            },
            PlanOutput::Aggregates(_) => unreachable!("a collect plan returned aggregates"),
        })
    }

    /// Position of the first smallest element (`None` when empty). NaNs
    /// never win; an all-NaN input gives `Some(0)`. Over Arrow data with
    /// nulls, the nulls are skipped (a NaN wins only over them; `None`
    /// when every element is null).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([3, 1, 2, 1].compute().argmin(), Some(1));
    /// ```
    pub fn argmin(self) -> M::Out<Option<usize>> {
        self.arg(AggKind::ArgMin)
    }

    /// Position of the first largest element; rules as [`Query::argmin`].
    pub fn argmax(self) -> M::Out<Option<usize>> {
        self.arg(AggKind::ArgMax)
    }

    /// Arithmetic mean, computed in `f64` (`None` when empty).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1u32, 2, 6].compute().mean(), Some(3.0));
    /// ```
    pub fn mean(mut self) -> M::Out<Option<f64>> {
        let c = self.cast_f64_column();
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![
                agg(AggKind::Sum, Some(c)),
                agg(AggKind::Count, None)
            ]),
            || Finish::one(ReadKind::Mean, [0, 1]),
            |o| {
                let a = aggs(o);
                let n = a[1].to_bits();
                (n > 0).then(|| a[0].as_f64() / n as f64)
            },
        )
    }

    fn cast_f64_column(&mut self) -> crate::expr::Value {
        let c = self.column();
        if T::DTYPE == crate::expr::DType::F64 {
            return c;
        }
        self.traced
            .trace
            .arena
            .push_typed(crate::expr::Node::Cast(c), crate::expr::DType::F64)
            .expect("casts are well-typed")
    }

    /// Folds the elements with an associative `f` starting from `identity`
    /// (returned when empty). Backends group the combines differently.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let p = [1i64, 2, 3, 4].compute().reduce(1, |a, b| a * b);
    /// assert_eq!(p, 24);
    /// ```
    pub fn reduce(mut self, identity: T, f: impl FnOnce(Expr<T>, Expr<T>) -> Expr<T>) -> M::Out<T> {
        let c = self.column();
        let t = self.trace_combine(identity, f);
        let kind = AggKind::Custom(Combine {
            program: t.program,
            output: t.output,
            identity: t.identity,
        });
        self.finish(
            LogicalTerminal::Reduce(smallvec![agg(kind, Some(c))]),
            |o| T::from_scalar(aggs(o)[0]),
        )
    }

    /// Count, sum, min, max and mean in one pass over memory (the fused
    /// multi-aggregate).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let s = [4.0f32, 1.0, 7.0].compute().stats();
    /// assert_eq!((s.count, s.sum, s.min, s.max, s.mean), (3, 12.0, Some(1.0), Some(7.0), Some(4.0)));
    /// ```
    pub fn stats(mut self) -> M::Out<Stats<T>> {
        let c = self.column();
        let c64 = self.cast_f64_column();
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![
                agg(AggKind::Count, None),
                agg(AggKind::Sum, Some(c)),
                agg(AggKind::Min, Some(c)),
                agg(AggKind::Max, Some(c)),
                agg(AggKind::Sum, Some(c64)),
            ]),
            || Finish::Values {
                reads: smallvec![
                    Read::new(ReadKind::Value, [0, 0]),
                    Read::new(ReadKind::Value, [1, 1]),
                    Read::new(ReadKind::NonEmpty, [2, 0]),
                    Read::new(ReadKind::NonEmpty, [3, 0]),
                    Read::new(ReadKind::Mean, [4, 0]),
                ],
                names: Names::Stats,
            },
            |o| {
                let a = aggs(o);
                let count = a[0].to_bits();
                let some = count > 0;
                Stats {
                    count,
                    sum: T::from_scalar(a[1]),
                    min: some.then(|| T::from_scalar(a[2])),
                    max: some.then(|| T::from_scalar(a[3])),
                    mean: some.then(|| a[4].as_f64() / count as f64),
                }
            },
        )
    }
}

macro_rules! try_terminals {
    ($($(#[$doc:meta])* $name:ident => $inner:ident ( $($arg:ident : $ty:ty),* ) -> $out:ty;)*) => {
        impl<'a, T: Numeric> Query<'a, Expr<T>> {
            $(
                $(#[$doc])*
                pub fn $name(self $(, $arg: $ty)*) -> Result<$out, crate::Error> {
                    self.fallible().$inner($($arg),*)
                }
            )*
        }
    };
}

try_terminals! {
    /// [`Query::sum`] returning an error instead of panicking.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1, 2].compute().try_sum().unwrap(), 3);
    /// ```
    try_sum => sum() -> T;
    /// [`Query::min`] returning an error instead of panicking.
    try_min => min() -> Option<T>;
    /// [`Query::max`] returning an error instead of panicking.
    try_max => max() -> Option<T>;
    /// [`Query::mean`] returning an error instead of panicking.
    try_mean => mean() -> Option<f64>;
    /// [`Query::argmin`] returning an error instead of panicking.
    try_argmin => argmin() -> Option<usize>;
    /// [`Query::argmax`] returning an error instead of panicking.
    try_argmax => argmax() -> Option<usize>;
    /// [`Query::stats`] returning an error instead of panicking.
    try_stats => stats() -> Stats<T>;
    /// [`Query::variance`] returning an error instead of panicking.
    try_variance => variance() -> Option<f64>;
    /// [`Query::std_dev`] returning an error instead of panicking.
    try_std_dev => std_dev() -> Option<f64>;
}

impl<'a, T: Numeric> Query<'a, Expr<T>> {
    /// [`Query::reduce`] returning an error instead of panicking.
    pub fn try_reduce(
        self,
        identity: T,
        f: impl FnOnce(Expr<T>, Expr<T>) -> Expr<T>,
    ) -> Result<T, crate::Error> {
        self.fallible().reduce(identity, f)
    }
}

impl<'a, S: Shape> Query<'a, S> {
    /// [`Query::count`] returning an error instead of panicking.
    pub fn try_count(self) -> Result<usize, crate::Error> {
        self.fallible().count()
    }

    /// [`Query::collect`] returning an error instead of panicking.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<u64> = [1u64, 2].compute().no_fallback().try_collect().unwrap();
    /// assert_eq!(v, vec![1, 2]);
    /// ```
    pub fn try_collect<C: From<Vec<S::Host>>>(self) -> Result<C, crate::Error> {
        self.fallible().collect()
    }

    /// [`Query::any`] returning an error instead of panicking.
    pub fn try_any(self, f: impl FnOnce(S) -> Expr<bool>) -> Result<bool, crate::Error> {
        self.fallible().any(f)
    }

    /// [`Query::all`] returning an error instead of panicking.
    pub fn try_all(self, f: impl FnOnce(S) -> Expr<bool>) -> Result<bool, crate::Error> {
        self.fallible().all(f)
    }

    /// [`Query::first`] returning an error instead of panicking.
    pub fn try_first(self) -> Result<Option<S::Host>, crate::Error> {
        self.fallible().first()
    }

    /// [`Query::last`] returning an error instead of panicking.
    pub fn try_last(self) -> Result<Option<S::Host>, crate::Error> {
        self.fallible().last()
    }

    /// [`Query::nth`] returning an error instead of panicking.
    pub fn try_nth(self, i: usize) -> Result<Option<S::Host>, crate::Error> {
        self.fallible().nth(i)
    }

    /// [`Query::find`] returning an error instead of panicking.
    pub fn try_find(
        self,
        f: impl FnOnce(S) -> Expr<bool>,
    ) -> Result<Option<S::Host>, crate::Error> {
        self.fallible().find(f)
    }

    /// [`Query::position`] returning an error instead of panicking.
    pub fn try_position(
        self,
        f: impl FnOnce(S) -> Expr<bool>,
    ) -> Result<Option<usize>, crate::Error> {
        self.fallible().position(f)
    }

    /// [`Query::aggregate`] returning an error instead of panicking.
    pub fn try_aggregate<R: super::AggShape>(
        self,
        f: impl FnOnce(S, &mut super::Aggregates) -> R,
    ) -> Result<R::Out, crate::Error> {
        self.fallible().aggregate(f)
    }
}

#[allow(unused)]
fn _assert_try_is_mode(_: Try) {}
#[allow(unused)]
fn _element_bound<T: Element>() {}
