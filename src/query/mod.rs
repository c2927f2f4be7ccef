//! The user's surface: the lazy query builder.
//!
//! `xs.compute()` starts a [`Query`]; each adaptor (one per file here)
//! traces its closure into the query's arena and returns a new `Query`;
//! a terminal hands the trace to the runtime. Nothing runs before the
//! terminal. Tracing, planning and execution are plumbing the user never
//! names.

mod aggregate;
mod device;
mod early_exit;
mod enumerate;
mod filter;
mod group;
mod join;
mod map;
mod mode;
mod nulls;
mod pipeline;
mod scan;
mod sort;
mod source;
mod take_skip;
mod terminal;
mod wire;
mod zip;

pub(crate) use crate::runtime::executor::Held;
pub(crate) use crate::runtime::TracedBox;
pub use aggregate::{Agg, AggShape, Aggregates, Histogram, MAX_BINS};
pub use device::{DeviceArray, ToDevice};
pub use group::{GroupBy, Groups, KeyRead, OptionKeys, PlainKeys};
pub use join::JoinKeys;
pub use mode::{Analyze, Capture, ExplainOnly, Measured, Mode, Run, Try};
pub use nulls::{SourceParts, SourceValues};
#[cfg(feature = "datafusion")]
pub(crate) use pipeline::{Bound, Collected, State};
#[doc(hidden)]
pub use pipeline::{Finish, Names, Read, ReadKind};
pub use pipeline::{Output, Pipeline, PipelineInputs};
pub use sort::{Desc, SortKeys};
pub use source::{Compute, IntoSource};
pub use terminal::Stats;
pub use wire::WIRE_VERSION;

use crate::backend::{BackendKind, Input};
use crate::expr::trace;
use crate::expr::{DType, Element, Node, NodeData, Shape, Value};
use crate::graph::{LogicalOp, Stream};
use crate::runtime::clock::Tick;
use crate::runtime::Engine;
use smallvec::SmallVec;
use std::fmt;
use std::marker::PhantomData;

pub use crate::runtime::QueryOptions;

/// A lazy query over one or more input columns.
///
/// `S` is the shape of one element as closures see it (`Expr<f32>`, or a
/// tuple after `zip`/`enumerate`); `M` says what terminals return (plain
/// values by default, see [`Mode`]).
///
/// # Examples
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
///
/// let xs: Vec<f32> = (0..1000).map(|i| i as f32 / 1000.0).collect();
/// let total: f32 = xs.compute().map(|x| x * 2.0 + 1.0).filter(|x| x.gt(1.5)).sum();
/// let expected: f32 = xs.iter().map(|x| x * 2.0 + 1.0).filter(|&x| x > 1.5).sum();
/// assert!((total - expected).abs() < 1e-2);
/// ```
#[must_use = "queries are lazy and do nothing until a terminal such as `sum` or `collect` runs"]
pub struct Query<'a, S, M = Run> {
    pub(crate) engine: &'a Engine,
    /// The trace and parameter values (boxed: adaptors move a pointer).
    pub(crate) traced: TracedBox,
    pub(crate) arena_id: u32,
    pub(crate) inputs: SmallVec<[Input<'a>; 2]>,
    pub(crate) columns: SmallVec<[Value; 4]>,
    pub(crate) options: QueryOptions,
    pub(crate) started: Tick,
    /// Build sides of joins that run before this query.
    pub(crate) sides: Vec<crate::runtime::executor::Side<'a>>,
    /// Nulls and owned columns of a query over Arrow data (`None` for
    /// slices: nothing to carry).
    pub(crate) held: Option<Box<Held>>,
    _shape: PhantomData<(S, M)>,
}

impl<S, M> fmt::Debug for Query<'_, S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Query")
            .field(
                "ops",
                &self
                    .traced
                    .trace
                    .ops
                    .iter()
                    .map(|o| o.name())
                    .collect::<Vec<_>>(),
            )
            .field("inputs", &self.inputs.len())
            .field("build_sides", &self.sides.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Element> Query<'a, crate::expr::Expr<T>, Run> {
    /// A query with no input yet.
    #[inline]
    fn blank(engine: &'a Engine) -> Self {
        let started = Tick::now();
        Query {
            engine,
            traced: TracedBox::new(),
            arena_id: trace::fresh_id(),
            inputs: SmallVec::new(),
            columns: SmallVec::new(),
            options: QueryOptions::default(),
            started,
            sides: Vec::new(),
            held: None,
            _shape: PhantomData,
        }
    }

    /// A query over `input` run by `engine`.
    pub(crate) fn new(engine: &'a Engine, input: Input<'a>) -> Self {
        let mut q = Self::blank(engine);
        let value = q.add_input(input, T::DTYPE);
        q.push_source(value, 0, None);
        q
    }

    /// A query over one source column (values and, for Arrow data, a
    /// validity).
    pub(crate) fn from_parts(engine: &'a Engine, parts: SourceParts<'a>) -> Self {
        let mut q = Self::blank(engine);
        let (value, k) = q.add_source(parts.values, T::DTYPE);
        q.push_source(value, k, parts.validity);
        q
    }

    fn push_source(&mut self, value: Value, k: u16, validity: Option<Vec<bool>>) {
        self.traced.trace.ops.push(LogicalOp::Source {
            stream: Stream::Input(k),
            value,
        });
        self.push_source_column(value, validity);
    }
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Adds an input column and returns its `Input` node.
    pub(crate) fn add_input(&mut self, input: Input<'a>, dtype: DType) -> Value {
        let n = self.inputs.len() as u16;
        self.inputs.push(input);
        self.traced.trace.input_dtypes.push(dtype);
        self.add_stream(Stream::Input(n), dtype)
    }

    pub(crate) fn add_stream(&mut self, stream: Stream, dtype: DType) -> Value {
        let trace = &mut self.traced.trace;
        let slot = trace.streams.len() as u16;
        trace.streams.push(stream);
        // No operands and a declared type: well-typed by construction.
        trace.arena.push_unchecked(NodeData {
            node: Node::Input(slot),
            ty: dtype,
        })
    }

    /// Runs `f` over the current columns, tracing into this query.
    pub(crate) fn trace_with<R>(&mut self, f: impl FnOnce(S) -> R) -> R {
        let arg = S::from_values(&self.columns, self.arena_id);
        let traced = &mut *self.traced;
        trace::with_target(
            &mut traced.trace.arena,
            &mut traced.params,
            self.arena_id,
            || f(arg),
        )
    }

    /// Runs `f` over the current columns and returns its result's columns.
    pub(crate) fn trace_closure<R: Shape>(
        &mut self,
        f: impl FnOnce(S) -> R,
    ) -> SmallVec<[Value; 4]> {
        let out = self.trace_with(f);
        let mut vals = SmallVec::new();
        out.values(&mut vals);
        vals
    }

    /// Adds a `u64` parameter and returns its slot.
    pub(crate) fn add_param(&mut self, value: crate::expr::Scalar) -> u16 {
        let params = &mut self.traced.params;
        let slot = params.len() as u16;
        params.push(value);
        slot
    }

    /// The same query with another shape (after an adaptor changed it).
    pub(crate) fn reshape<S2: Shape, M2: Mode>(self) -> Query<'a, S2, M2> {
        Query {
            engine: self.engine,
            traced: self.traced,
            arena_id: self.arena_id,
            inputs: self.inputs,
            columns: self.columns,
            options: self.options,
            started: self.started,
            sides: self.sides,
            held: self.held,
            _shape: PhantomData,
        }
    }

    /// Runs this query on `backend`, whatever the selector would choose.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let s: i64 = [1i64, 2, 3].compute().on(BackendKind::CpuScalar).sum();
    /// assert_eq!(s, 6);
    /// ```
    pub fn on(mut self, backend: BackendKind) -> Self {
        self.options.backend = Some(backend);
        self
    }

    /// Fails instead of retrying on another backend when the chosen one
    /// fails (use with the `try_` terminals).
    pub fn no_fallback(mut self) -> Self {
        self.options.no_fallback = true;
        self
    }

    /// Terminals return `Result` instead of panicking when no backend
    /// could run the query.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let r = [1.0f32, 2.0].compute().fallible().sum();
    /// assert_eq!(r.unwrap(), 3.0);
    /// ```
    pub fn fallible(self) -> Query<'a, S, Try> {
        self.reshape()
    }

    /// Terminals return `(value, ExecutionMetrics)` for this run.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let (s, m) = [1.0f32, 2.0].compute().map(|x| x * 2.0).with_metrics().sum();
    /// assert_eq!(s, 6.0);
    /// assert_eq!(m.elements_in, 2);
    /// ```
    pub fn with_metrics(self) -> Query<'a, S, Measured> {
        self.reshape()
    }

    /// Terminals return the plan (graph, stages, candidate backends with
    /// their estimated costs, the choice and its reason, recommendations)
    /// without running anything.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let plan = [1.0f32, 2.0].compute().map(|x| x * 2.0).explain().sum();
    /// assert!(plan.to_string().contains("stage 0"));
    /// ```
    pub fn explain(self) -> Query<'a, S, ExplainOnly> {
        self.reshape()
    }

    /// Terminals run the query and return the plan with measured metrics
    /// (explain-analyze).
    pub fn explain_analyze(self) -> Query<'a, S, Analyze> {
        self.reshape()
    }
}
