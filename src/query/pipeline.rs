//! Pipelines: a query traced once, without data, and run later over any
//! columns of the same types, one batch at a time, with aggregates that
//! merge across batches. This is what computeq hands to DataFusion as a
//! scalar or aggregate function, and what a distributed engine can ship to
//! its executors: the trace is data (no closure is kept).
//!
//! A pipeline holds only what runs partition by partition: `zip` of its
//! inputs, `map`, `filter`, and a terminal that is either `collect` (a
//! column per row, or fewer rows after a filter) or aggregates that are
//! associative and commutative (`sum`, `count`, `min`, `max`, `mean`,
//! `variance`, `std_dev`, `any`, `all`, `stats`, and `aggregate(..)` of
//! those). What needs the rows' global order (`enumerate`, `skip`, `take`,
//! scans, sorts, `argmin`/`argmax`, `first`/`last`, a `reduce` with a
//! combine of your own) or every row at once (joins, groups, distinct) is
//! refused when the pipeline is built, with the reason; so are
//! `fill_null`, `drop_nulls`, `count_rows` and `nulls_first`, which act on
//! the nulls of data a pipeline traced without data cannot see.
//!
//! Running a pipeline replays its trace over the new columns through the
//! same steps the adaptors take, so Arrow inputs with nulls get the SQL
//! semantics of the `arrow` module on every backend, and a replay with the
//! same shape of input hits the engine's plan cache. Over inputs without
//! nulls a caller can skip the replay: a `Bound` plan, resolved by the
//! first such run, serves the next ones (DataFusion's functions do this).

use super::join::placeholder;
use super::mode::Capture;
use super::nulls::uncount;
use super::{Query, Run, SourceParts, SourceValues};
use crate::error::{Error, ErrorKind};
use crate::expr::{DType, Element, Expr, Node, Scalar, Shape, Value};
use crate::graph::{LogicalAgg, LogicalOp, LogicalTerminal, QueryTrace, Stream};
use crate::metrics::ExecutionMetrics;
use crate::plan::{AggKind, PlanOutput};
use crate::runtime::executor::{self, Prepared, QueryOptions};
use crate::runtime::Engine;
use crate::semantics::Moments;
use crate::types::Column;
use smallvec::{smallvec, SmallVec};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

/// How one value of a terminal is read from its aggregates.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ReadKind {
    /// The aggregate's value (`sum`, `count`, `any`, `all`).
    Value,
    /// The value, or nothing when no element was counted (`min`, `max`).
    NonEmpty,
    /// An `f64` sum divided by the count (`mean`).
    Mean,
    /// `M2 / (n - 1)`, at least two elements (`variance`).
    Variance,
    /// Its square root (`std_dev`).
    StdDev,
}

/// One value of a terminal: how it is read, from which aggregates (the
/// value's slot and the count's).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Read {
    pub(crate) kind: ReadKind,
    pub(crate) at: [u32; 2],
}

impl Read {
    pub(crate) fn new(kind: ReadKind, at: [u32; 2]) -> Read {
        Read { kind, at }
    }
}

/// How the values of a terminal with several are named.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Names {
    /// One value.
    One,
    /// `c0`, `c1`, ... (`aggregate` returning a tuple).
    Tuple,
    /// `count`, `sum`, `min`, `max`, `mean` (`stats`).
    Stats,
}

/// What a terminal returns, as data: how a [`Pipeline`] finishes.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Finish {
    /// A terminal a pipeline cannot end with.
    Other,
    /// The columns (`collect`).
    Columns,
    /// Values read from the aggregates.
    Values {
        /// One per value, in order.
        reads: SmallVec<[Read; 4]>,
        /// Their names.
        names: Names,
    },
}

impl Finish {
    pub(crate) fn one(kind: ReadKind, at: [u32; 2]) -> Finish {
        Finish::Values {
            reads: smallvec![Read::new(kind, at)],
            names: Names::One,
        }
    }
}

/// The element types a pipeline reads: one [`Element`] type, or a tuple of
/// two to four, which its closures see as a chain of `zip`s sees them
/// (`(x, y)`, `((x, y), z)`, `(((x, y), z), w)`).
pub trait PipelineInputs {
    /// What the pipeline's closures receive.
    type Shape: Shape;
    /// The input types, in order.
    fn dtypes() -> SmallVec<[DType; 4]>;
}

macro_rules! single_input {
    ($($t:ty),*) => {$(
        impl PipelineInputs for $t {
            type Shape = Expr<$t>;
            fn dtypes() -> SmallVec<[DType; 4]> {
                smallvec![<$t as Element>::DTYPE]
            }
        }
    )*};
}
single_input!(f32, f64, i32, i64, u32, u64, bool);

impl<A: Element, B: Element> PipelineInputs for (A, B) {
    type Shape = (Expr<A>, Expr<B>);
    fn dtypes() -> SmallVec<[DType; 4]> {
        smallvec![A::DTYPE, B::DTYPE]
    }
}

impl<A: Element, B: Element, C: Element> PipelineInputs for (A, B, C) {
    type Shape = ((Expr<A>, Expr<B>), Expr<C>);
    fn dtypes() -> SmallVec<[DType; 4]> {
        smallvec![A::DTYPE, B::DTYPE, C::DTYPE]
    }
}

impl<A: Element, B: Element, C: Element, D: Element> PipelineInputs for (A, B, C, D) {
    type Shape = (((Expr<A>, Expr<B>), Expr<C>), Expr<D>);
    fn dtypes() -> SmallVec<[DType; 4]> {
        smallvec![A::DTYPE, B::DTYPE, C::DTYPE, D::DTYPE]
    }
}

/// One value a pipeline produces: a collected column, or one value of its
/// aggregate terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// `value` for a pipeline with one; else `c0`, `c1`, ... or the
    /// field names of `stats` (`count`, `sum`, `min`, `max`, `mean`).
    pub name: String,
    /// Its type.
    pub dtype: DType,
    /// Whether it can be null: `min`/`max`/`mean` of no element,
    /// `variance` of fewer than two, a collected value computed from a
    /// null.
    pub nullable: bool,
}

/// A query traced without data, run later over any columns of its input
/// types, batch by batch, with aggregates whose partial states merge: what
/// computeq runs inside DataFusion (feature `datafusion`) and ships to other
/// machines as bytes ([`Pipeline::to_bytes`]). It holds what runs partition
/// by partition: `zip` of its inputs, `map`, `filter`, and `collect` or
/// associative and commutative aggregates; anything that needs the rows'
/// global order or every row at once is refused by [`Pipeline::over`].
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// use computeq::query::Pipeline;
///
/// // sum(x * x) over the rows where x > 0.5
/// let p = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
/// assert_eq!(p.to_string(), "pipeline(f64): filter, map -> sum");
///
/// // Built from the query API, refused where a step needs the global order.
/// let e = Pipeline::over::<f64>(|q| q.take(10).sum()).unwrap_err();
/// assert!(e.to_string().contains("take"));
/// # Ok::<(), computeq::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// The trace, its terminal set; input `k` is `Stream::Input(k)`.
    pub(crate) trace: QueryTrace,
    pub(crate) params: crate::expr::Params,
    pub(crate) finish: Finish,
    /// For each `m2` aggregate: its slot, the count's and the slot of the
    /// `f64` sum of its column (added if the terminal had none), from
    /// which partial states merge.
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) moments: SmallVec<[[u32; 3]; 1]>,
}

/// A pipeline's merged aggregates: one value per aggregate, in the order
/// of its terminal.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct State(pub(crate) SmallVec<[Scalar; 8]>);

/// What one run of a collecting pipeline produced: the columns, each
/// with its validity where some row is null.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
pub(crate) type Collected = Vec<(Column, Option<Vec<bool>>)>;

/// A pipeline's plan on one engine for inputs without nulls, resolved by
/// its first run there: the next runs over such inputs skip the replay of
/// the trace and the plan cache (a DataFusion function keeps one, set by
/// its first batch without nulls, and runs every later batch of every
/// partition through it). The plan is held, so an eviction from the cache
/// does not reach it; it is the plan the cache would return, since the
/// replay of a pipeline over inputs of its types without nulls always
/// traces the same query with the same parameters.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct Bound {
    /// The engine it was resolved on (its address: a plan carries that
    /// engine's compiled artifacts).
    engine: usize,
    plan: std::sync::Arc<crate::plan::CompiledPlan>,
    params: crate::expr::Params,
}

/// Whether every source is read in place without nulls (a run through a
/// [`Bound`] plan).
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
fn all_plain(sources: &[SourceParts<'_>]) -> bool {
    sources
        .iter()
        .all(|s| s.validity.is_none() && matches!(s.values, SourceValues::Borrowed(_)))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidQuery, message)
}

/// Why `op` cannot be part of a pipeline, if so.
fn refuse_op(op: &LogicalOp) -> Option<String> {
    let ordered = |what: &str| {
        format!(
            "{what} depends on the rows' global order, which a pipeline run batch by \
             batch (or partition by partition) does not have: it cannot be part of a pipeline"
        )
    };
    match op {
        LogicalOp::Source { .. }
        | LogicalOp::Zip { .. }
        | LogicalOp::Map { .. }
        | LogicalOp::Filter { .. } => None,
        LogicalOp::Enumerate { .. } => Some(ordered("enumerate()")),
        LogicalOp::Skip { .. } => Some(ordered("skip()")),
        LogicalOp::Take { .. } => Some(ordered("take()")),
        LogicalOp::Scan { .. } => Some(ordered("a scan")),
        LogicalOp::Sort { .. } => Some(
            "a sort needs every row at once: it cannot be part of a pipeline \
             (sort in the engine that runs it, e.g. ORDER BY)"
                .into(),
        ),
        LogicalOp::Join { .. } => Some(
            "a join needs every row of its build side: it cannot be part of a pipeline \
             (join in the engine that runs it)"
                .into(),
        ),
    }
}

/// Why an aggregate cannot end a pipeline, if so.
fn refuse_agg(kind: &AggKind) -> Option<String> {
    match kind {
        AggKind::Sum
        | AggKind::Min
        | AggKind::Max
        | AggKind::Count
        | AggKind::Any
        | AggKind::All
        | AggKind::M2 => None,
        AggKind::ArgMin | AggKind::ArgMax | AggKind::First | AggKind::Last => Some(format!(
            "{} depends on the rows' global order, which a pipeline run batch by batch \
             (or partition by partition) does not have",
            kind.name()
        )),
        AggKind::Custom(_) => Some(
            "reduce(..) with a combine of your own: a pipeline's partial results merge in \
             any order and the combine is not known to be commutative; use sum, min, max \
             or aggregate(..)"
                .into(),
        ),
    }
}

impl Pipeline {
    /// Traces `f` over a query of the input types `I` (one type, or a
    /// tuple of up to four, seen as a chain of `zip`s) and returns the
    /// pipeline its terminal describes. The query runs nothing: its
    /// terminal (`sum`, `collect`, `aggregate(..)`, ...) returns the
    /// pipeline, or why the query cannot be one. (`collect` still wants
    /// its collection type named, as `collect::<Vec<_>>()`, though a
    /// pipeline never builds it.)
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// use computeq::query::Pipeline;
    /// let weighted = Pipeline::over::<(f64, f64)>(|q| q.map(|(x, w)| x * w).collect::<Vec<_>>())?;
    /// let spread = Pipeline::over::<f32>(|q| {
    ///     q.aggregate(|x, a| (a.mean(x), a.std_dev(x), a.count()))
    /// })?;
    /// assert_eq!(spread.outputs().len(), 3);
    /// # let _ = weighted;
    /// # Ok::<(), computeq::Error>(())
    /// ```
    pub fn over<I: PipelineInputs>(
        f: impl FnOnce(Query<'static, I::Shape, Capture>) -> Result<Pipeline, Error>,
    ) -> Result<Pipeline, Error> {
        let mut q: Query<'static, Expr<bool>, Run> = Query::blank(crate::runtime::engine());
        for (k, &dt) in I::dtypes().iter().enumerate() {
            let value = q.add_input(placeholder(dt), dt);
            let stream = Stream::Input(k as u16);
            q.traced.trace.ops.push(if k == 0 {
                LogicalOp::Source { stream, value }
            } else {
                LogicalOp::Zip { stream, value }
            });
            q.columns.push(value);
        }
        f(q.reshape())
    }

    /// The pipeline of a query ended by a terminal in [`Capture`] mode.
    pub(crate) fn capture(p: Prepared<'_>, finish: Finish) -> Result<Pipeline, Error> {
        if !p.sides.is_empty() {
            return Err(invalid(
                "a join needs every row of its build side: it cannot be part of a pipeline",
            ));
        }
        if let Some(why) = p.held.as_ref().and_then(|h| h.error.clone()) {
            return Err(invalid(why));
        }
        let mut trace = p.traced.trace.clone();
        let params = p.traced.params.clone();
        if let Some(why) = trace.ops.iter().find_map(refuse_op) {
            return Err(invalid(why));
        }
        let mut moments = SmallVec::new();
        match (&mut trace.terminal, &finish) {
            (Some(LogicalTerminal::Reduce(aggs)), Finish::Values { .. }) => {
                if let Some(why) = aggs.iter().find_map(|a| refuse_agg(&a.kind)) {
                    return Err(invalid(why));
                }
                moments = moment_slots(&mut trace.arena, aggs);
            }
            (Some(LogicalTerminal::Collect(_)), Finish::Columns) => {}
            (Some(LogicalTerminal::Reduce(aggs)), Finish::Other) => {
                let why = aggs
                    .iter()
                    .find_map(|a| refuse_agg(&a.kind))
                    .unwrap_or_else(|| "this terminal cannot end a pipeline".into());
                return Err(invalid(why));
            }
            (Some(LogicalTerminal::Group { .. }), _) => {
                return Err(invalid(
                    "group_by, distinct and value_counts need every row at once: they \
                     cannot end a pipeline (group in the engine that runs it, e.g. GROUP BY \
                     with the pipeline as the aggregate)",
                ))
            }
            (Some(LogicalTerminal::CountByKey { .. }), _) => {
                return Err(invalid("histogram cannot end a pipeline yet"))
            }
            _ => return Err(invalid("this terminal cannot end a pipeline")),
        }
        Ok(Pipeline {
            trace,
            params,
            finish,
            moments,
        })
    }

    /// The input types, in order.
    pub fn input_types(&self) -> &[DType] {
        &self.trace.input_dtypes
    }

    /// Whether the pipeline ends in aggregates (else in `collect`).
    pub fn is_aggregate(&self) -> bool {
        matches!(self.finish, Finish::Values { .. })
    }

    /// Whether it keeps every row (no `filter`): a collecting pipeline
    /// that does is a scalar function.
    pub fn keeps_rows(&self) -> bool {
        !self
            .trace
            .ops
            .iter()
            .any(|op| matches!(op, LogicalOp::Filter { .. }))
    }

    pub(crate) fn aggs(&self) -> &[LogicalAgg] {
        match &self.trace.terminal {
            Some(LogicalTerminal::Reduce(aggs)) => aggs,
            _ => &[],
        }
    }

    fn agg_type(&self, a: &LogicalAgg) -> DType {
        a.kind.result_type(a.column.map(|c| self.trace.arena.ty(c)))
    }

    /// The values the pipeline produces, in order.
    pub fn outputs(&self) -> Vec<Output> {
        match &self.finish {
            Finish::Values { reads, names } => {
                let aggs = self.aggs();
                reads
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let name = match names {
                            Names::One => "value".to_string(),
                            Names::Tuple => format!("c{i}"),
                            Names::Stats => ["count", "sum", "min", "max", "mean"]
                                .get(i)
                                .map_or_else(|| format!("c{i}"), |s| s.to_string()),
                        };
                        let (dtype, nullable) = match r.kind {
                            ReadKind::Value => (self.agg_type(&aggs[r.at[0] as usize]), false),
                            ReadKind::NonEmpty => (self.agg_type(&aggs[r.at[0] as usize]), true),
                            ReadKind::Mean | ReadKind::Variance | ReadKind::StdDev => {
                                (DType::F64, true)
                            }
                        };
                        Output {
                            name,
                            dtype,
                            nullable,
                        }
                    })
                    .collect()
            }
            Finish::Columns => {
                let cols = match &self.trace.terminal {
                    Some(LogicalTerminal::Collect(cols)) => cols.as_slice(),
                    _ => &[],
                };
                cols.iter()
                    .enumerate()
                    .map(|(i, &c)| Output {
                        name: if cols.len() == 1 {
                            "value".into()
                        } else {
                            format!("c{i}")
                        },
                        dtype: self.trace.arena.ty(c),
                        nullable: true,
                    })
                    .collect()
            }
            Finish::Other => Vec::new(),
        }
    }

    /// The types of the partial state (one value per aggregate).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn state_types(&self) -> SmallVec<[DType; 8]> {
        self.aggs().iter().map(|a| self.agg_type(a)).collect()
    }

    /// The state of no rows.
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn empty_state(&self) -> State {
        State(
            self.aggs()
                .iter()
                .map(|a| crate::semantics::agg_identity(&a.kind, self.agg_type(a), &self.params))
                .collect(),
        )
    }

    /// Count, mean and `M2` of the `m2` aggregate whose slots are `m`.
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    fn moments_of(s: &State, m: [u32; 3]) -> Moments {
        let n = s.0[m[1] as usize].to_bits();
        Moments {
            n,
            mean: if n == 0 {
                0.0
            } else {
                s.0[m[2] as usize].as_f64() / n as f64
            },
            m2: s.0[m[0] as usize].as_f64(),
        }
    }

    /// `a ⊕ b`: the state of the rows of both (any order: every aggregate
    /// of a pipeline is commutative, up to float rounding).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn merge(&self, a: &mut State, b: &State) {
        let merged: SmallVec<[Moments; 1]> = self
            .moments
            .iter()
            .map(|&m| Moments::merge(Self::moments_of(a, m), Self::moments_of(b, m)))
            .collect();
        for (i, agg) in self.aggs().iter().enumerate() {
            let (x, y) = (a.0[i], b.0[i]);
            a.0[i] = match agg.kind {
                AggKind::M2 => continue,
                _ => crate::semantics::merge(&agg.kind, partial(x), partial(y), &self.params).value,
            };
        }
        for (m, mm) in self.moments.iter().zip(merged) {
            a.0[m[0] as usize] = Scalar::F64(mm.m2);
        }
    }

    /// The values of the terminal for `s` (`None` where null).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn values(&self, s: &State) -> SmallVec<[Option<Scalar>; 4]> {
        let Finish::Values { reads, .. } = &self.finish else {
            return SmallVec::new();
        };
        reads
            .iter()
            .map(|r| {
                let v = s.0[r.at[0] as usize];
                let n = s.0[r.at[1] as usize].to_bits();
                match r.kind {
                    ReadKind::Value => Some(v),
                    ReadKind::NonEmpty => (n > 0).then_some(v),
                    ReadKind::Mean => (n > 0).then(|| Scalar::F64(v.as_f64() / n as f64)),
                    ReadKind::Variance => {
                        (n >= 2).then(|| Scalar::F64(v.as_f64() / (n - 1) as f64))
                    }
                    ReadKind::StdDev => {
                        (n >= 2).then(|| Scalar::F64((v.as_f64() / (n - 1) as f64).sqrt()))
                    }
                }
            })
            .collect()
    }

    /// Runs a collecting pipeline over `sources` (one per input, in
    /// order) on `engine`: the trace replayed over them, nulls lowered as
    /// the adaptors lower them, then planned (a plan cache hit after the
    /// first batch of a shape), selected and run like any query; the run
    /// is in the engine's run log. Through `bound` when every source is
    /// read in place without nulls (see
    /// [`plain_prepared`](Self::plain_prepared)). (An aggregating pipeline
    /// runs through [`run_state`](Self::run_state).)
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn run_columns<'a>(
        &self,
        bound: &OnceLock<Bound>,
        engine: &'a Engine,
        sources: Vec<SourceParts<'a>>,
        options: QueryOptions,
    ) -> Result<(Collected, ExecutionMetrics), Error> {
        match &self.trace.terminal {
            Some(t @ LogicalTerminal::Collect(_)) if all_plain(&sources) => {
                let p = self.plain_prepared(bound, engine, sources, options, t)?;
                let (out, m) = executor::run(p)?;
                let PlanOutput::Columns(got) = out else {
                    return Err(invalid("a collect returned aggregates"));
                };
                Ok((got.into_iter().map(|c| (c, None)).collect(), m))
            }
            Some(LogicalTerminal::Collect(cols)) => {
                let (mut q, _) = self.replay(engine, sources, Vec::new(), options)?;
                let valid: SmallVec<[Option<Value>; 4]> =
                    cols.iter().map(|&c| q.validity_of(c)).collect();
                q.reset_validity();
                let mut all = cols.clone();
                all.extend(valid.iter().flatten().copied());
                let (out, m) = executor::run(q.into_prepared(LogicalTerminal::Collect(all)))?;
                let PlanOutput::Columns(mut got) = out else {
                    return Err(invalid("a collect returned aggregates"));
                };
                let mut masks: Vec<Vec<bool>> =
                    got.drain(cols.len()..).map(bool::from_column).collect();
                masks.reverse();
                let out = got
                    .into_iter()
                    .zip(&valid)
                    .map(|(c, v)| (c, v.and_then(|_| masks.pop())))
                    .collect();
                Ok((out, m))
            }
            Some(LogicalTerminal::Reduce(_)) => Err(invalid(
                "an aggregating pipeline runs to a state, not to columns",
            )),
            _ => Err(invalid("this terminal cannot end a pipeline")),
        }
    }

    /// The query of a run over `sources`, every one read in place without
    /// nulls, ending in `terminal`: from `bound`'s plan when it holds one
    /// for `engine` (no replay of the trace, no plan-cache lookup), else
    /// the trace replayed and planned, and `bound` set to that plan if it
    /// was empty. The replay of a pipeline over inputs of its types
    /// without nulls always traces the same query with the same
    /// parameters, so the bound plan is the one the cache would return.
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    fn plain_prepared<'a>(
        &self,
        bound: &OnceLock<Bound>,
        engine: &'a Engine,
        sources: Vec<SourceParts<'a>>,
        options: QueryOptions,
        terminal: &LogicalTerminal,
    ) -> Result<Prepared<'a>, Error> {
        let address = engine as *const Engine as usize;
        if let Some(b) = bound.get().filter(|b| b.engine == address) {
            self.check_sources(&sources)?;
            let mut inputs: SmallVec<[crate::backend::Input<'a>; 2]> = SmallVec::new();
            for parts in sources {
                let SourceValues::Borrowed(input) = parts.values else {
                    return Err(invalid("a bound run over a converted column"));
                };
                inputs.push(input);
            }
            let mut traced = crate::runtime::TracedBox::new();
            traced.params.extend_from_slice(&b.params);
            return Ok(Prepared {
                engine,
                traced,
                inputs,
                options,
                started: crate::runtime::clock::Tick::now(),
                sides: Vec::new(),
                held: None,
                plan: Some((b.plan.clone(), true)),
            });
        }
        let (q, _) = self.replay(engine, sources, Vec::new(), options)?;
        let mut terminal = terminal.clone();
        if let LogicalTerminal::Reduce(aggs) = &mut terminal {
            uncount(aggs);
        }
        let mut p = q.into_prepared(terminal);
        if p.held.is_none() && p.sides.is_empty() {
            let (plan, hit) = engine
                .plans
                .get_or_build(
                    &p.traced.trace,
                    p.traced.params.len(),
                    engine.config.verify_passes,
                )
                .map_err(|e| Error::new(ErrorKind::InvalidQuery, e.to_string()))?;
            // Another thread's first batch may have set it: the same plan.
            let _ = bound.set(Bound {
                engine: address,
                plan: plan.clone(),
                params: p.traced.params.clone(),
            });
            p.plan = Some((plan, hit));
        }
        Ok(p)
    }

    /// Runs an aggregating pipeline over `sources` (one per input, in
    /// order) on `engine` to its partial state (the run's metrics are in
    /// the run log), through `bound` (see [`plain_prepared`](Self::plain_prepared)).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn run_state<'a>(
        &self,
        bound: &OnceLock<Bound>,
        engine: &'a Engine,
        sources: Vec<SourceParts<'a>>,
        options: QueryOptions,
    ) -> Result<State, Error> {
        let Some(t @ LogicalTerminal::Reduce(_)) = &self.trace.terminal else {
            return Err(invalid("only an aggregating pipeline runs to a state"));
        };
        let prepared = if all_plain(&sources) {
            self.plain_prepared(bound, engine, sources, options, t)?
        } else {
            let (mut q, _) = self.replay(engine, sources, Vec::new(), options)?;
            let aggs = self.settle_replayed(&mut q);
            q.into_prepared(LogicalTerminal::Reduce(aggs))
        };
        match executor::run_value(prepared)? {
            PlanOutput::Aggregates(a) => Ok(State(a.into_iter().collect())),
            PlanOutput::Columns(_) => Err(invalid("a reduce returned columns")),
        }
    }

    /// Runs an aggregating pipeline over `sources` per group: row `i`
    /// belongs to group `groups[i]`, and only rows where `keep` (when
    /// given) is true count. Returns the groups that had rows, ascending,
    /// and one column per aggregate (the partial state of each group).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn run_grouped<'a>(
        &self,
        engine: &'a Engine,
        sources: Vec<SourceParts<'a>>,
        groups: Vec<u32>,
        keep: Option<Vec<bool>>,
        options: QueryOptions,
    ) -> Result<(Vec<u32>, Vec<Column>, ExecutionMetrics), Error> {
        let Some(LogicalTerminal::Reduce(aggs)) = &self.trace.terminal else {
            return Err(invalid("only an aggregating pipeline runs per group"));
        };
        let mut extra = vec![Column::U32(groups)];
        extra.extend(keep.map(Column::Bool));
        let (mut q, extra) = self.replay(engine, sources, extra, options)?;
        // The rows the aggregates skip for their nulls, as a whole-stream
        // reduce skips them; then no column is null for the grouping.
        let terminal = LogicalTerminal::Group {
            keys: smallvec![extra[0]],
            aggs: self.settle_replayed(&mut q),
            first_seen: false,
        };
        let (out, m) = executor::run(q.into_prepared(terminal))?;
        let PlanOutput::Columns(mut cols) = out else {
            return Err(invalid("a grouping returned aggregates"));
        };
        if cols.len() != aggs.len() + 1 {
            return Err(invalid("a grouping returned other columns than asked"));
        }
        let keys = match cols.remove(0) {
            Column::U32(k) => k,
            _ => return Err(invalid("a grouping returned keys of another type")),
        };
        Ok((keys, cols, m))
    }

    /// The aggregates of a replay, made to skip the nulls of its sources
    /// as [`Query::aggregate`] skips them ([`Query::settle_pass`]), slot
    /// for slot (a pipeline's aggregates are its state; each count a
    /// count of rows after, see [`Query::pipeline_counts`]).
    fn settle_replayed(&self, q: &mut Query<'_, Expr<bool>, Run>) -> SmallVec<[LogicalAgg; 4]> {
        let mut aggs: SmallVec<[LogicalAgg; 4]> = self.aggs().iter().cloned().collect();
        q.settle_pass(&mut aggs, None);
        uncount(&mut aggs);
        aggs
    }

    /// Checks that `sources` are one column per input, each of its type.
    fn check_sources(&self, sources: &[SourceParts<'_>]) -> Result<(), Error> {
        let inputs = self.input_types();
        if sources.len() != inputs.len() {
            return Err(invalid(format!(
                "the pipeline reads {} columns, {} given",
                inputs.len(),
                sources.len()
            )));
        }
        for (k, (parts, &dt)) in sources.iter().zip(inputs).enumerate() {
            let given = match &parts.values {
                SourceValues::Borrowed(input) => input.dtype(),
                SourceValues::Owned(c) => c.dtype(),
            };
            if given != dt {
                return Err(invalid(format!(
                    "the pipeline's input {k} is {dt}, a column of {given} was given"
                )));
            }
        }
        Ok(())
    }

    /// The query of the pipeline's adaptors over `sources`, then `extra`
    /// columns zipped beside them (read by the caller through the returned
    /// nodes; a `bool` one after the first filters the rows first).
    fn replay<'a>(
        &self,
        engine: &'a Engine,
        sources: Vec<SourceParts<'a>>,
        extra: Vec<Column>,
        options: QueryOptions,
    ) -> Result<Replayed<'a>, Error> {
        self.check_sources(&sources)?;
        let mut q: Query<'a, Expr<bool>, Run> = Query::blank(engine);
        q.options = options;
        {
            let t = &mut *q.traced;
            t.trace.arena.clone_from(&self.trace.arena);
            t.trace.streams.clone_from(&self.trace.streams);
            t.trace.input_dtypes.clone_from(&self.trace.input_dtypes);
            t.params.clone_from(&self.params);
        }
        let mut validity: SmallVec<[Option<Vec<bool>>; 4]> = SmallVec::new();
        for (k, (parts, &dt)) in sources.into_iter().zip(self.input_types()).enumerate() {
            match parts.values {
                SourceValues::Borrowed(input) => q.inputs.push(input),
                SourceValues::Owned(c) => {
                    q.inputs.push(placeholder(dt));
                    q.held().owned.push((k as u16, c));
                }
            }
            validity.push(parts.validity);
        }
        let mut extra_values: SmallVec<[Value; 2]> = SmallVec::new();
        let mut extra = Some(extra);
        for op in &self.trace.ops {
            let source = matches!(op, LogicalOp::Source { .. } | LogicalOp::Zip { .. });
            if !source {
                if let Some(cols) = extra.take() {
                    extra_values = q.zip_extra(cols);
                }
            }
            match op {
                LogicalOp::Source {
                    stream: Stream::Input(k),
                    value,
                }
                | LogicalOp::Zip {
                    stream: Stream::Input(k),
                    value,
                } => {
                    q.traced.trace.ops.push(op.clone());
                    let v = validity.get_mut(*k as usize).and_then(Option::take);
                    q.push_source_column(*value, v);
                }
                LogicalOp::Map { outputs } => {
                    if q.held.is_some() {
                        q.validity_of_outputs(outputs);
                    }
                    q.columns.clone_from(outputs);
                    q.traced.trace.ops.push(op.clone());
                }
                LogicalOp::Filter { predicate } => {
                    let predicate = if q.held.is_some() {
                        q.predicate_with_nulls(*predicate)
                    } else {
                        *predicate
                    };
                    q.traced.trace.ops.push(LogicalOp::Filter { predicate });
                }
                other => return Err(invalid(format!("a pipeline cannot hold {}", other.name()))),
            }
        }
        if let Some(cols) = extra.take() {
            extra_values = q.zip_extra(cols);
        }
        Ok((q, extra_values))
    }
}

/// A pipeline's query over new columns, and the nodes of the extra
/// columns zipped beside them.
type Replayed<'a> = (Query<'a, Expr<bool>, Run>, SmallVec<[Value; 2]>);

impl<'a> Query<'a, Expr<bool>, Run> {
    /// Zips owned columns beside the sources (not among the element's
    /// columns); the second, a `bool`, filters the rows.
    fn zip_extra(&mut self, cols: Vec<Column>) -> SmallVec<[Value; 2]> {
        let mut out = SmallVec::new();
        for (i, c) in cols.into_iter().enumerate() {
            let dt = c.dtype();
            let (v, k) = self.add_source(SourceValues::Owned(c), dt);
            self.traced.trace.ops.push(LogicalOp::Zip {
                stream: Stream::Input(k),
                value: v,
            });
            if i == 1 && dt == DType::Bool {
                self.traced
                    .trace
                    .ops
                    .push(LogicalOp::Filter { predicate: v });
            }
            out.push(v);
        }
        out
    }
}

/// A merge operand for an aggregate without position or moments.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
fn partial(value: Scalar) -> crate::semantics::Partial {
    crate::semantics::Partial {
        value,
        pos: None,
        moments: Moments::EMPTY,
    }
}

/// For each `m2` aggregate of `aggs`: its slot, the count's and the `f64`
/// sum of its column's, adding the aggregates (and the cast) it lacks.
pub(crate) fn moment_slots(
    arena: &mut crate::expr::ExprArena,
    aggs: &mut SmallVec<[LogicalAgg; 4]>,
) -> SmallVec<[[u32; 3]; 1]> {
    let slot = |aggs: &mut SmallVec<[LogicalAgg; 4]>, a: LogicalAgg| -> u32 {
        match aggs.iter().position(|b| *b == a) {
            Some(i) => i as u32,
            None => {
                aggs.push(a);
                (aggs.len() - 1) as u32
            }
        }
    };
    let m2s: SmallVec<[(u32, Value); 1]> = aggs
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match (&a.kind, a.column) {
            (AggKind::M2, Some(c)) => Some((i as u32, c)),
            _ => None,
        })
        .collect();
    m2s.into_iter()
        .map(|(i, c)| {
            let cast = crate::expr::NodeData {
                node: Node::Cast(c),
                ty: DType::F64,
            };
            let c64 = if arena.ty(c) == DType::F64 {
                c
            } else if let Some(i) = (0..arena.len()).find(|&i| *arena.get(Value::new(i)) == cast) {
                // A pipeline read back from its serialized form has it.
                Value::new(i)
            } else {
                arena
                    .push_typed(Node::Cast(c), DType::F64)
                    .expect("a numeric column casts to f64")
            };
            let n = slot(
                aggs,
                LogicalAgg {
                    kind: AggKind::Count,
                    column: None,
                },
            );
            let s = slot(
                aggs,
                LogicalAgg {
                    kind: AggKind::Sum,
                    column: Some(c64),
                },
            );
            [i, n, s]
        })
        .collect()
}

impl PartialEq for Pipeline {
    fn eq(&self, other: &Pipeline) -> bool {
        self.trace == other.trace
            && self.finish == other.finish
            && self.params.len() == other.params.len()
            && self
                .params
                .iter()
                .zip(&other.params)
                .all(|(a, b)| a.dtype() == b.dtype() && a.to_bits() == b.to_bits())
    }
}

impl Eq for Pipeline {}

impl Hash for Pipeline {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.trace.hash(h);
        self.finish.hash(h);
        for p in &self.params {
            p.to_bits().hash(h);
        }
    }
}

impl fmt::Display for Pipeline {
    /// `pipeline(f64, f64): zip, map, filter -> sum`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline(")?;
        for (i, t) in self.input_types().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{t}")?;
        }
        write!(f, "):")?;
        let steps: Vec<&str> = self
            .trace
            .ops
            .iter()
            .filter(|op| !matches!(op, LogicalOp::Source { .. }))
            .map(LogicalOp::name)
            .collect();
        if steps.is_empty() {
            write!(f, " ->")?;
        } else {
            write!(f, " {} ->", steps.join(", "))?;
        }
        match &self.finish {
            Finish::Columns => write!(f, " collect"),
            Finish::Values { reads, names } => {
                let aggs = self.aggs();
                let name = |r: &Read| match r.kind {
                    ReadKind::Value | ReadKind::NonEmpty => aggs[r.at[0] as usize].kind.name(),
                    ReadKind::Mean => "mean",
                    ReadKind::Variance => "variance",
                    ReadKind::StdDev => "std_dev",
                };
                match names {
                    Names::Stats => write!(f, " stats"),
                    Names::One => write!(f, " {}", name(&reads[0])),
                    Names::Tuple => {
                        let all: Vec<&str> = reads.iter().map(name).collect();
                        write!(f, " ({})", all.join(", "))
                    }
                }
            }
            Finish::Other => write!(f, " ?"),
        }
    }
}
