//! Composable whole-stream aggregates: [`Query::aggregate`] computes any
//! set of aggregates of traced expressions in one pass over memory, and
//! [`Query::variance`] / [`Query::std_dev`] the numerically stable spread.

use super::pipeline::{Finish, Names, Read, ReadKind};
use super::{Mode, Query};
use crate::expr::{trace, Element, Expr, Numeric, Scalar, Shape, Value};
use crate::graph::{LogicalAgg, LogicalTerminal};
use crate::plan::{AggKind, PlanOutput};
use smallvec::{smallvec, SmallVec};
use std::fmt;

/// The aggregates of one [`Query::aggregate`] call, handed to its closure.
///
/// Each method adds an aggregate (or reuses an identical one already
/// asked for: `a.count()` twice, or a `mean` and a `variance` of the same
/// expression, share their count) and returns an [`Agg`] handle; the
/// closure returns its handles, as one or as a tuple, and the query
/// returns their values in the same shape.
pub struct Aggregates {
    pub(super) aggs: SmallVec<[LogicalAgg; 8]>,
    arena_id: u32,
}

impl fmt::Debug for Aggregates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.aggs.iter().map(|a| a.kind.name()))
            .finish()
    }
}

/// One aggregate's result, read after the query ran: what an
/// [`Aggregates`] method returns inside the closure of
/// [`Query::aggregate`].
#[must_use = "return the handle from the closure to get its value"]
pub struct Agg<R> {
    at: [u32; 2],
    read: fn(Scalar, Scalar) -> R,
    /// What `read` does, as data (for a [`Pipeline`](super::Pipeline)).
    kind: ReadKind,
}

impl<R> Clone for Agg<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Agg<R> {}

impl<R> fmt::Debug for Agg<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agg").field("at", &self.at).finish()
    }
}

/// What the closure of [`Query::aggregate`] returns: an [`Agg`], `()`, or a
/// tuple of up to twelve of them (tuples nest for more).
pub trait AggShape: Copy {
    /// The values, in the same shape.
    type Out;
    #[doc(hidden)]
    fn read(&self, values: &[Scalar]) -> Self::Out;
    /// How each value is read, in order.
    #[doc(hidden)]
    fn reads(&self, out: &mut SmallVec<[Read; 4]>);
}

impl<R> AggShape for Agg<R> {
    type Out = R;
    fn read(&self, v: &[Scalar]) -> R {
        (self.read)(v[self.at[0] as usize], v[self.at[1] as usize])
    }
    fn reads(&self, out: &mut SmallVec<[Read; 4]>) {
        out.push(Read::new(self.kind, self.at));
    }
}

macro_rules! agg_tuple {
    ($($name:ident $i:tt),+) => {
        impl<$($name: AggShape),+> AggShape for ($($name,)+) {
            type Out = ($($name::Out,)+);
            fn read(&self, v: &[Scalar]) -> Self::Out {
                ($(self.$i.read(v),)+)
            }
            fn reads(&self, out: &mut SmallVec<[Read; 4]>) {
                $(self.$i.reads(out);)+
            }
        }
    };
}
agg_tuple!(A 0);
agg_tuple!(A 0, B 1);
agg_tuple!(A 0, B 1, C 2);
agg_tuple!(A 0, B 1, C 2, D 3);
agg_tuple!(A 0, B 1, C 2, D 3, E 4);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
agg_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

impl AggShape for () {
    type Out = ();
    fn read(&self, _: &[Scalar]) {}
    fn reads(&self, _: &mut SmallVec<[Read; 4]>) {}
}

/// `M2 / (n - 1)`, the sample variance, for at least two values.
fn sample_variance(m2: Scalar, n: Scalar) -> Option<f64> {
    let n = n.to_bits();
    (n >= 2).then(|| m2.as_f64() / (n - 1) as f64)
}

impl Aggregates {
    pub(super) fn new(arena_id: u32) -> Aggregates {
        Aggregates {
            aggs: SmallVec::new(),
            arena_id,
        }
    }

    /// The slot of `(kind, column)`, added unless already there.
    pub(super) fn slot(&mut self, kind: AggKind, column: Option<Value>) -> u32 {
        let a = LogicalAgg { kind, column };
        match self.aggs.iter().position(|b| *b == a) {
            Some(i) => i as u32,
            None => {
                self.aggs.push(a);
                (self.aggs.len() - 1) as u32
            }
        }
    }

    /// The column of `x`, which must come from this query's closure.
    fn column<T: Element>(&self, x: Expr<T>) -> Value {
        assert!(
            x.arena_id() == self.arena_id,
            "computeq: an `Expr` from another query or closure was used here; \
             expressions cannot be carried between queries"
        );
        x.value()
    }

    fn handle<R>(
        &mut self,
        a: u32,
        b: u32,
        kind: ReadKind,
        read: fn(Scalar, Scalar) -> R,
    ) -> Agg<R> {
        Agg {
            at: [a, b],
            read,
            kind,
        }
    }

    fn with_count<T: Element, R>(
        &mut self,
        kind: AggKind,
        x: Expr<T>,
        read_kind: ReadKind,
        read: fn(Scalar, Scalar) -> R,
    ) -> Agg<R> {
        let c = self.column(x);
        let a = self.slot(kind, Some(c));
        // The rows `x` is not null in (`Query::settle_aggs` makes it a
        // count of rows, or of valid rows where columns differ in nulls;
        // a pipeline keeps one per set of columns read,
        // `Query::pipeline_counts`).
        let n = self.slot(AggKind::Count, Some(c));
        self.handle(a, n, read_kind, read)
    }

    /// Number of elements.
    pub fn count(&mut self) -> Agg<u64> {
        let n = self.slot(AggKind::Count, None);
        self.handle(n, n, ReadKind::Value, |n, _| n.to_bits())
    }

    /// Sum of `x` (wrapping for integers; 0 when empty), as [`Query::sum`].
    pub fn sum<T: Numeric>(&mut self, x: Expr<T>) -> Agg<T> {
        let c = self.column(x);
        let s = self.slot(AggKind::Sum, Some(c));
        self.handle(s, s, ReadKind::Value, |s, _| T::from_scalar(s))
    }

    /// Smallest `x` (`None` when empty; NaN rules as [`Query::min`]).
    pub fn min<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<T>> {
        self.with_count(AggKind::Min, x, ReadKind::NonEmpty, |v, n| {
            (n.to_bits() > 0).then(|| T::from_scalar(v))
        })
    }

    /// Largest `x` (`None` when empty; NaN rules as [`Query::min`]).
    pub fn max<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<T>> {
        self.with_count(AggKind::Max, x, ReadKind::NonEmpty, |v, n| {
            (n.to_bits() > 0).then(|| T::from_scalar(v))
        })
    }

    /// Position of the first smallest `x` (`None` when empty), as
    /// [`Query::argmin`]: a position in the stream that reaches the
    /// terminal, after any filter.
    pub fn argmin<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<usize>> {
        self.with_count(AggKind::ArgMin, x, ReadKind::NonEmpty, |p, n| {
            (n.to_bits() > 0).then(|| p.to_bits() as usize)
        })
    }

    /// Position of the first largest `x`; rules as [`Aggregates::argmin`].
    pub fn argmax<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<usize>> {
        self.with_count(AggKind::ArgMax, x, ReadKind::NonEmpty, |p, n| {
            (n.to_bits() > 0).then(|| p.to_bits() as usize)
        })
    }

    /// Arithmetic mean of `x`, summed in `f64` (`None` when empty).
    pub fn mean<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<f64>> {
        let x = if T::DTYPE == crate::expr::DType::F64 {
            Expr::<f64>::from_parts(x.value(), x.arena_id())
        } else {
            // Inside the closure's trace: the cast joins its arena.
            x.cast::<f64>()
        };
        self.with_count(AggKind::Sum, x, ReadKind::Mean, |s, n| {
            let n = n.to_bits();
            (n > 0).then(|| s.as_f64() / n as f64)
        })
    }

    /// Sample variance of `x` (divided by `n - 1`; `None` for fewer than
    /// two elements), in one numerically stable pass, as
    /// [`Query::variance`].
    pub fn variance<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<f64>> {
        self.with_count(AggKind::M2, x, ReadKind::Variance, sample_variance)
    }

    /// Sample standard deviation of `x`: the square root of
    /// [`Aggregates::variance`].
    pub fn std_dev<T: Numeric>(&mut self, x: Expr<T>) -> Agg<Option<f64>> {
        self.with_count(AggKind::M2, x, ReadKind::StdDev, |m2, n| {
            sample_variance(m2, n).map(f64::sqrt)
        })
    }

    /// The first element's `x` (`None` when empty): per group of
    /// [`Query::group_by`], the value in the group's first row.
    pub fn first<T: Element>(&mut self, x: Expr<T>) -> Agg<Option<T>> {
        self.with_count(AggKind::First, x, ReadKind::NonEmpty, |v, n| {
            (n.to_bits() > 0).then(|| T::from_scalar(v))
        })
    }

    /// The last element's `x` (`None` when empty).
    pub fn last<T: Element>(&mut self, x: Expr<T>) -> Agg<Option<T>> {
        self.with_count(AggKind::Last, x, ReadKind::NonEmpty, |v, n| {
            (n.to_bits() > 0).then(|| T::from_scalar(v))
        })
    }

    /// Whether `p` holds for any element (`false` when empty).
    pub fn any(&mut self, p: Expr<bool>) -> Agg<bool> {
        let c = self.column(p);
        let s = self.slot(AggKind::Any, Some(c));
        self.handle(s, s, ReadKind::Value, |b, _| b.as_bool())
    }

    /// Whether `p` holds for every element (`true` when empty).
    pub fn all(&mut self, p: Expr<bool>) -> Agg<bool> {
        let c = self.column(p);
        let s = self.slot(AggKind::All, Some(c));
        self.handle(s, s, ReadKind::Value, |b, _| b.as_bool())
    }
}

fn aggregates(out: PlanOutput) -> SmallVec<[Scalar; 4]> {
    match out {
        PlanOutput::Aggregates(a) => a,
        PlanOutput::Columns(_) => unreachable!("a reduce plan returned columns"),
    }
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Any set of aggregates of traced expressions, computed in one pass
    /// over memory: the closure receives the element and an
    /// [`Aggregates`], asks it for aggregates of expressions of the element
    /// (a sum of `x * x`, the maximum of one column of a zip, a count, a
    /// variance) and returns the handles; the query returns their values
    /// in the same shape. Identical aggregates are computed once.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [1.0f32, 2.0, 3.0, 4.0];
    /// let (s, s2, max, n) = xs
    ///     .compute()
    ///     .aggregate(|x, a| (a.sum(x), a.sum(x * x), a.max(x), a.count()));
    /// assert_eq!((s, s2, max, n), (10.0, 30.0, Some(4.0), 4));
    ///
    /// // Several columns, and aggregates of expressions of them.
    /// let ws = [1.0f64, 0.0, 2.0, 1.0];
    /// let (dot, var) = xs
    ///     .compute()
    ///     .zip(&ws)
    ///     .aggregate(|(x, w), a| (a.sum(x.cast::<f64>() * w), a.variance(w)));
    /// assert_eq!(dot, 11.0);
    /// assert!((var.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    /// ```
    ///
    /// The aggregates run on every backend except `m2`'s (`variance`,
    /// `std_dev`), which the GPU backends decline: a query with one runs
    /// on the CPU.
    pub fn aggregate<R: AggShape>(
        mut self,
        f: impl FnOnce(S, &mut Aggregates) -> R,
    ) -> M::Out<R::Out> {
        let arg = S::from_values(&self.columns, self.arena_id);
        let mut aggs = Aggregates::new(self.arena_id);
        let traced = &mut *self.traced;
        let shape = trace::with_target(
            &mut traced.trace.arena,
            &mut traced.params,
            self.arena_id,
            || f(arg, &mut aggs),
        );
        if aggs.aggs.is_empty() {
            // Nothing asked for (a closure returning `()`): the count keeps
            // the plan a reduce, and nothing reads it.
            aggs.slot(AggKind::Count, None);
        }
        let mut list = aggs.aggs.into_iter().collect();
        let (slots, fixes) = if M::CAPTURE {
            (self.pipeline_counts(&mut list), Default::default())
        } else {
            self.settle_aggs(&mut list)
        };
        let at = slots.clone();
        self.finish_as(
            LogicalTerminal::Reduce(list),
            move || {
                let mut reads = SmallVec::new();
                shape.reads(&mut reads);
                for r in &mut reads {
                    r.at = r.at.map(|i| at[i as usize]);
                }
                let names = if reads.len() == 1 {
                    Names::One
                } else {
                    Names::Tuple
                };
                Finish::Values { reads, names }
            },
            move |o| {
                let mut values = aggregates(o);
                super::nulls::fix_args(&mut values, &fixes);
                let asked: SmallVec<[Scalar; 8]> =
                    slots.iter().map(|&i| values[i as usize]).collect();
                shape.read(&asked)
            },
        )
    }
}

impl<'a, T: Numeric, M: Mode> Query<'a, Expr<T>, M> {
    /// Sample variance (divided by `n - 1`; `None` for fewer than two
    /// elements), computed in `f64` in one pass that does not lose digits
    /// to cancellation: blocks of the stream are summed about one of their
    /// values and merged with Chan's formula (`cpu-scalar` uses Welford's
    /// update per element). NaN if any element is NaN or infinite. Runs on
    /// the CPU backends, and on a GPU that has `f64`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// // 1e8 + small noise: the naive Σx² - (Σx)²/n gives garbage here.
    /// let xs: Vec<f64> = (0..1000).map(|i| 1e8 + (i % 7) as f64 * 0.25).collect();
    /// let v = xs.compute().variance().unwrap();
    /// let m = xs.iter().sum::<f64>() / 1000.0;
    /// let exact = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 999.0;
    /// assert!((v - exact).abs() <= 1e-9 * exact);
    /// assert_eq!([1.0f32].compute().variance(), None);
    /// ```
    pub fn variance(self) -> M::Out<Option<f64>> {
        self.spread(|v| v, ReadKind::Variance)
    }

    /// Sample standard deviation: the square root of [`Query::variance`].
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let s = [2, 4, 4, 4, 5, 5, 7, 9].compute().std_dev().unwrap();
    /// assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    /// ```
    pub fn std_dev(self) -> M::Out<Option<f64>> {
        self.spread(f64::sqrt, ReadKind::StdDev)
    }

    /// `finish(variance)` from an `m2` and a count.
    fn spread(self, finish: fn(f64) -> f64, read: ReadKind) -> M::Out<Option<f64>> {
        let c = self.columns[0];
        self.finish_as(
            LogicalTerminal::Reduce(smallvec![
                LogicalAgg {
                    kind: AggKind::M2,
                    column: Some(c),
                },
                LogicalAgg {
                    kind: AggKind::Count,
                    column: None,
                },
            ]),
            move || Finish::one(read, [0, 1]),
            move |o| {
                let a = aggregates(o);
                sample_variance(a[0], a[1]).map(finish)
            },
        )
    }
}

/// Counts of values in equal-width bins ([`Query::histogram`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// Per bin: bin `i` holds `lo + i·w <= x < lo + (i + 1)·w`, `w = (hi - lo) / bins`.
    pub counts: Vec<u64>,
    /// Values below `lo` (`-inf` included).
    pub below: u64,
    /// Values at or above `hi` (`+inf` included).
    pub above: u64,
    /// NaN values.
    pub nan: u64,
}

impl Histogram {
    /// Every value counted: the bins, below, above and NaN.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.below + self.above + self.nan
    }
}

/// Most bins a histogram may have.
pub const MAX_BINS: usize = 1 << 24;
// (Keys are computed in `i32`: `MAX_BINS + 2` must fit.)

impl<'a, T: Numeric, M: Mode> Query<'a, Expr<T>, M> {
    /// Counts the elements in `bins` equal-width bins over `[lo, hi)`, in
    /// one pass, with the values outside the range counted apart (below,
    /// above, NaN), as CUB's `HistogramEven` bins them: an element's bin
    /// is `floor((x - lo) · bins / (hi - lo))`, never past the last bin,
    /// computed in `f32` for an `f32` column (the bounds and the scale
    /// rounded to `f32`) and in `f64` otherwise (so 64-bit integers past
    /// 2^53 are rounded first). Runs on the CPU backends.
    ///
    /// # Panics
    ///
    /// If `bins` is 0 or more than [`MAX_BINS`], or `lo` and `hi` are not
    /// finite with `lo < hi` (for an `f32` column, once rounded to `f32`).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [0.5f32, 1.5, 1.7, 3.9, -1.0, 4.0, f32::NAN];
    /// let h = xs.compute().histogram(4, 0.0, 4.0);
    /// assert_eq!(h.counts, vec![1, 2, 0, 1]);
    /// assert_eq!((h.below, h.above, h.nan), (1, 1, 1));
    /// ```
    pub fn histogram(mut self, bins: usize, lo: f64, hi: f64) -> M::Out<Histogram> {
        assert!(
            (1..=MAX_BINS).contains(&bins),
            "computeq: a histogram needs 1 to {MAX_BINS} bins, not {bins}"
        );
        let narrow = T::DTYPE == crate::expr::DType::F32;
        let ok = |lo: f64, hi: f64| lo.is_finite() && hi.is_finite() && lo < hi;
        assert!(
            ok(lo, hi) && (!narrow || ok(lo as f32 as f64, hi as f32 as f64)),
            "computeq: a histogram needs finite bounds with lo < hi, not [{lo}, {hi})"
        );
        let b = bins as u32;
        // The bin in `i32` (casts from floats to `i32` have vector
        // instructions; to `u32` they have not), reinterpreted as `u32`.
        let (bi, scale) = (b as i32, bins as f64 / (hi - lo));
        let key = self.trace_closure(|x: Expr<T>| {
            let k = if T::DTYPE == crate::expr::DType::F32 {
                // An `f32` column bins in `f32`, as CUB bins float samples.
                let v = Expr::<f32>::from_parts(x.value(), x.arena_id());
                let (lo, hi, scale) = (lo as f32, hi as f32, scale as f32);
                let inside = ((v - lo) * scale).floor().cast::<i32>().min(bi - 1);
                let k = v.ge(hi).select(bi + 1, inside);
                let k = v.lt(lo).select(bi, k);
                v.ne(v).select(bi + 2, k)
            } else {
                let v = x.cast::<f64>();
                let inside = ((v - lo) * scale).floor().cast::<i32>().min(bi - 1);
                let k = v.ge(hi).select(bi + 1, inside);
                let k = v.lt(lo).select(bi, k);
                v.ne(v).select(bi + 2, k)
            };
            k.cast::<u32>()
        })[0];
        self.finish(
            LogicalTerminal::CountByKey { key, keys: b + 3 },
            move |o| match o {
                PlanOutput::Columns(mut c) => match c.pop() {
                    Some(crate::types::Column::U64(mut counts)) => {
                        counts.resize(bins + 3, 0);
                        let nan = counts.pop().unwrap_or(0);
                        let above = counts.pop().unwrap_or(0);
                        let below = counts.pop().unwrap_or(0);
                        Histogram {
                            counts,
                            below,
                            above,
                            nan,
                        }
                    }
                    _ => unreachable!("a count plan returned another column"),
                },
                PlanOutput::Aggregates(_) => unreachable!("a count plan returned aggregates"),
            },
        )
    }
}
