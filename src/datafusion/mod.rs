//! computeq pipelines inside DataFusion (feature `datafusion`).
//!
//! A [`Pipeline`] becomes a DataFusion function, usable from SQL and from
//! the DataFrame API:
//!
//! - [`scalar_udf`]: a pipeline that maps and collects (one value per
//!   row) is a `ScalarUDF`: `SELECT affine(x) FROM t`;
//! - [`aggregate_udf`]: a pipeline that ends in aggregates (`sum`,
//!   `count`, `min`, `max`, `mean`, `variance`, `std_dev`, `any`, `all`,
//!   `stats`, `aggregate(..)`) is an `AggregateUDF`, filters included:
//!   `SELECT k, sum_sq_over(x) FROM t GROUP BY k`. Each batch is one
//!   computeq query (the trace replayed, its plan cached after the first
//!   batch, fused into one pass over the batch; a batch without nulls
//!   after the function's first such batch skips the replay and the plan
//!   cache, through the plan that batch resolved); partial states merge
//!   through DataFusion's partial/final aggregation, so `GROUP BY` and
//!   several partitions work. A pipeline with several values returns a
//!   struct (`c0`, `c1`, ... or `stats`' field names);
//! - [`apply`]: any collecting pipeline, filters included, as a plan node
//!   over a `DataFrame` ([`PipelineNode`], planned by
//!   [`PipelinePlanner`] into [`PipelineExec`], in a session built
//!   [`with_pipelines`]): it gathers each partition's batches into runs of
//!   at least [`DEFAULT_GATHER_ROWS`] rows (a device-sized launch, or a
//!   pass long enough that a run's fixed cost does not matter) and reports
//!   its runs through DataFusion's metrics (`EXPLAIN ANALYZE`: output
//!   rows, elapsed compute, `computeq_runs_<backend>`: runs per backend).
//!
//! Arguments are cast by DataFusion to the pipeline's input types (the
//! functions' signatures are exact). Nulls follow [`crate::arrow`]: a
//! value computed from a null is null, filters drop rows whose predicate
//! is null, aggregates skip the rows where what they read is null.
//! Results follow computeq's semantics, not SQL's where the two differ:
//! the `sum` of no rows is 0 (SQL: NULL), float `min`/`max` skip NaN
//! (DataFusion orders NaN last), integer sums wrap.
//!
//! Every run is recorded in the engine's run log with its
//! [`ExecutionMetrics`](crate::ExecutionMetrics). DataFusion runs one
//! partition per core by default, so `cpu-parallel` is not a candidate
//! inside it unless allowed ([`FunctionBuilder::parallel`]): see
//! `docs/datafusion.md`.
//!
//! ```
//! # let _ = computeq::set_engine(computeq::Engine::default());
//! use computeq::prelude::*;
//! use computeq::query::Pipeline;
//! use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::prelude::SessionContext;
//! use std::sync::Arc;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Int64, false),
//!     Field::new("x", DataType::Float64, true),
//! ]));
//! let batch = RecordBatch::try_new(
//!     schema.clone(),
//!     vec![
//!         Arc::new(Int64Array::from(vec![1, 1, 2, 2])),
//!         Arc::new(Float64Array::from(vec![Some(0.25), Some(1.0), Some(2.0), None])),
//!     ],
//! )?;
//! let ctx = SessionContext::new();
//! ctx.register_batch("t", batch)?;
//!
//! let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
//! ctx.register_udaf(computeq::datafusion::aggregate_udf("sum_sq", sum_sq)?);
//! let affine = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>())?;
//! ctx.register_udf(computeq::datafusion::scalar_udf("affine", affine)?);
//!
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! let batches = rt.block_on(async {
//!     ctx.sql("SELECT k, sum_sq(x) AS s, sum(affine(x)) AS a FROM t GROUP BY k ORDER BY k")
//!         .await?
//!         .collect()
//!         .await
//! })?;
//! let s = batches[0].column(1).as_any().downcast_ref::<Float64Array>().unwrap();
//! assert_eq!((s.value(0), s.value(1)), (1.0, 4.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod node;

pub use node::{
    apply, apply_with, with_pipelines, PipelineExec, PipelineNode, PipelinePlanner,
    PipelineQueryPlanner, DEFAULT_GATHER_ROWS,
};

use crate::error::{Error, ErrorKind};
use crate::expr::{DType, Scalar};
use crate::query::{Bound, Collected, Pipeline, SourceParts, State};
use crate::runtime::executor::QueryOptions;
use crate::runtime::Engine;
use crate::types::Column;
use ::datafusion::arrow::array::BooleanArray;
use ::datafusion::arrow::array::{Array, ArrayRef, StructArray};
use ::datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use ::datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use ::datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use ::datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, EmitTo, GroupsAccumulator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// The Arrow type of a computeq element type.
pub fn arrow_type(dtype: DType) -> DataType {
    match dtype {
        DType::Bool => DataType::Boolean,
        DType::I32 => DataType::Int32,
        DType::U32 => DataType::UInt32,
        DType::I64 => DataType::Int64,
        DType::U64 => DataType::UInt64,
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
    }
}

/// The engine a function runs its batches on.
#[derive(Clone, Debug)]
pub(crate) enum EngineRef {
    /// The process-wide engine ([`crate::engine`]).
    Global,
    /// One of the user's.
    Own(Arc<Engine>),
}

impl EngineRef {
    fn get(&self) -> &Engine {
        match self {
            EngineRef::Global => crate::runtime::engine(),
            EngineRef::Own(e) => e,
        }
    }
}

impl PartialEq for EngineRef {
    fn eq(&self, other: &EngineRef) -> bool {
        match (self, other) {
            (EngineRef::Global, EngineRef::Global) => true,
            (EngineRef::Own(a), EngineRef::Own(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for EngineRef {}

impl Hash for EngineRef {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            EngineRef::Global => 0usize.hash(h),
            EngineRef::Own(e) => Arc::as_ptr(e).hash(h),
        }
    }
}

/// What a function holds: its name, pipeline, signature and engine.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) pipeline: Pipeline,
    signature: Signature,
    engine: EngineRef,
    /// May a batch run on `cpu-parallel` (see [`FunctionBuilder::parallel`]).
    pub(crate) parallel: bool,
    /// The plan of its batches without nulls, set by the first.
    pub(crate) bound: BoundCell,
}

/// A function's [`Bound`] plan, shared by its partitions: set once by the
/// first batch without nulls, then read without a lock. Not part of the
/// function's identity (equality and hash ignore it), and its `Debug`
/// says only whether it is set (not the whole plan, in a function's).
#[derive(Default)]
pub(crate) struct BoundCell(pub(crate) OnceLock<Bound>);

impl std::fmt::Debug for BoundCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = if self.0.get().is_some() {
            "set"
        } else {
            "empty"
        };
        write!(f, "BoundCell({set})")
    }
}

impl PartialEq for BoundCell {
    fn eq(&self, _: &BoundCell) -> bool {
        true
    }
}

impl Eq for BoundCell {}

impl Hash for BoundCell {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl Function {
    pub(crate) fn new(b: FunctionBuilder) -> Function {
        let types = b
            .pipeline
            .input_types()
            .iter()
            .map(|&t| arrow_type(t))
            .collect();
        Function {
            name: b.name,
            pipeline: b.pipeline,
            signature: Signature::exact(types, Volatility::Immutable),
            engine: b.engine,
            parallel: b.parallel,
            bound: BoundCell::default(),
        }
    }

    /// The return type: the one output's, or a struct of them.
    fn return_type(&self) -> DataType {
        let outputs = self.pipeline.outputs();
        match outputs.as_slice() {
            [one] => arrow_type(one.dtype),
            many => DataType::Struct(
                many.iter()
                    .map(|o| Field::new(&o.name, arrow_type(o.dtype), o.nullable))
                    .collect::<Fields>(),
            ),
        }
    }

    /// Runs a collecting pipeline over one batch's argument arrays,
    /// through the function's bound plan.
    fn run_columns(&self, arrays: &[ArrayRef]) -> DfResult<Collected> {
        let sources = sources(&self.pipeline, arrays)?;
        let (cols, _metrics) = self
            .pipeline
            .run_columns(&self.bound.0, self.engine.get(), sources, self.options())
            .map_err(external)?;
        Ok(cols)
    }

    /// The options of its runs: one thread unless allowed more
    /// ([`FunctionBuilder::parallel`]).
    fn options(&self) -> QueryOptions {
        QueryOptions {
            one_thread: !self.parallel,
            ..QueryOptions::default()
        }
    }

    /// Runs an aggregating pipeline over one batch's argument arrays to
    /// its partial state, through the function's bound plan (a batch
    /// without nulls after the first skips the replay and the plan cache).
    fn run_state(&self, arrays: &[ArrayRef]) -> DfResult<State> {
        let sources = sources(&self.pipeline, arrays)?;
        self.pipeline
            .run_state(&self.bound.0, self.engine.get(), sources, self.options())
            .map_err(external)
    }
}

fn external(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidQuery, message)
}

/// The pipeline's sources from argument arrays of its input types.
fn sources<'a>(pipeline: &Pipeline, arrays: &'a [ArrayRef]) -> DfResult<Vec<SourceParts<'a>>> {
    let types = pipeline.input_types();
    if arrays.len() != types.len() {
        return Err(DataFusionError::Execution(format!(
            "computeq: the pipeline reads {} columns, {} given",
            types.len(),
            arrays.len()
        )));
    }
    arrays
        .iter()
        .zip(types)
        .map(|(a, &t)| {
            crate::arrow::parts_of_dtype(a.as_ref(), t).ok_or_else(|| {
                DataFusionError::Execution(format!(
                    "computeq: an argument of type {} where the pipeline reads {t}",
                    a.data_type()
                ))
            })
        })
        .collect()
}

/// `pipeline` as a DataFusion scalar function named `name` (the defaults
/// of [`function`]): it must collect one column and keep every row
/// (`map`s only, no `filter`).
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// use computeq::query::Pipeline;
/// let p = Pipeline::over::<(f32, f32)>(|q| q.map(|(x, w)| x * w + 1.0).collect::<Vec<_>>())?;
/// let udf = computeq::datafusion::scalar_udf("weighted", p)?;
/// assert_eq!(udf.name(), "weighted");
/// # Ok::<(), computeq::Error>(())
/// ```
pub fn scalar_udf(name: impl Into<String>, pipeline: Pipeline) -> Result<ScalarUDF, Error> {
    function(name, pipeline).scalar()
}

/// `pipeline` as a DataFusion aggregate function named `name` (the
/// defaults of [`function`]): it must end in aggregates (see the module
/// documentation for which).
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// use computeq::query::Pipeline;
/// let p = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).sum())?;
/// let udaf = computeq::datafusion::aggregate_udf("sum_affine", p)?;
/// assert_eq!(udaf.name(), "sum_affine");
/// # Ok::<(), computeq::Error>(())
/// ```
pub fn aggregate_udf(name: impl Into<String>, pipeline: Pipeline) -> Result<AggregateUDF, Error> {
    function(name, pipeline).aggregate()
}

/// A function named `name` from `pipeline`, with settings: the engine it
/// runs on and whether a batch may fan out over the cores.
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// use computeq::query::Pipeline;
/// use std::sync::Arc;
/// let engine = Arc::new(computeq::Engine::default());
/// let p = Pipeline::over::<f64>(|q| q.variance())?;
/// let udaf = computeq::datafusion::function("var", p).engine(engine).aggregate()?;
/// # let _ = udaf;
/// # Ok::<(), computeq::Error>(())
/// ```
pub fn function(name: impl Into<String>, pipeline: Pipeline) -> FunctionBuilder {
    FunctionBuilder {
        name: name.into(),
        pipeline,
        engine: EngineRef::Global,
        parallel: false,
    }
}

/// The settings of a function ([`function`]).
#[derive(Debug)]
pub struct FunctionBuilder {
    name: String,
    pipeline: Pipeline,
    engine: EngineRef,
    parallel: bool,
}

impl FunctionBuilder {
    /// Runs the batches on `engine`, the process-wide one included.
    pub(crate) fn engine_ref(mut self, engine: EngineRef) -> Self {
        self.engine = engine;
        self
    }

    /// Runs the batches on `engine` (default: the process-wide engine).
    pub fn engine(mut self, engine: Arc<Engine>) -> Self {
        self.engine = EngineRef::Own(engine);
        self
    }

    /// Whether one batch may run on `cpu-parallel` (default `false`).
    /// DataFusion already runs one partition per core (its
    /// `target_partitions` defaults to the number of cores), each calling
    /// the function on its own batches: a batch that fanned out over every
    /// core would oversubscribe them, so by default `cpu-parallel` is not
    /// a candidate (the run's metrics and explain say so) and each batch
    /// runs on the thread DataFusion gave it, on `cpu-simd`, `cpu-scalar`
    /// or a GPU. Allow it when the session has fewer partitions than
    /// cores.
    pub fn parallel(mut self, allow: bool) -> Self {
        self.parallel = allow;
        self
    }

    /// The scalar function: the pipeline must collect one column and
    /// keep every row.
    pub fn scalar(self) -> Result<ScalarUDF, Error> {
        let p = &self.pipeline;
        if p.is_aggregate() {
            return Err(invalid(format!(
                "{p} ends in aggregates: make it an aggregate function (aggregate_udf)"
            )));
        }
        if !p.keeps_rows() {
            return Err(invalid(format!(
                "{p} filters rows: a scalar function returns one value per row \
                 (filter in SQL, or aggregate over the filtered rows with aggregate_udf)"
            )));
        }
        if p.outputs().len() != 1 {
            return Err(invalid(format!(
                "{p} collects {} columns: a scalar function returns one",
                p.outputs().len()
            )));
        }
        Ok(ScalarUDF::new_from_impl(PipelineScalar(Function::new(
            self,
        ))))
    }

    /// The aggregate function: the pipeline must end in aggregates.
    pub fn aggregate(self) -> Result<AggregateUDF, Error> {
        if !self.pipeline.is_aggregate() {
            return Err(invalid(format!(
                "{} does not end in aggregates: make it a scalar function (scalar_udf)",
                self.pipeline
            )));
        }
        Ok(AggregateUDF::new_from_impl(PipelineAggregate(Arc::new(
            Function::new(self),
        ))))
    }
}

/// A pipeline as a DataFusion scalar function ([`scalar_udf`]).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineScalar(pub(crate) Function);

impl ScalarUDFImpl for PipelineScalar {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn signature(&self) -> &Signature {
        &self.0.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.0.return_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let arrays = args
            .args
            .into_iter()
            .map(|a| a.into_array(n))
            .collect::<DfResult<Vec<_>>>()?;
        let mut cols = self.0.run_columns(&arrays)?;
        match (cols.pop(), cols.is_empty()) {
            (Some((c, valid)), true) => Ok(ColumnarValue::Array(crate::arrow::column_to_array(
                c, valid,
            ))),
            _ => Err(DataFusionError::Internal(
                "computeq: a scalar pipeline returned other than one column".into(),
            )),
        }
    }
}

/// A pipeline as a DataFusion aggregate function ([`aggregate_udf`]).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineAggregate(pub(crate) Arc<Function>);

impl AggregateUDFImpl for PipelineAggregate {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn signature(&self) -> &Signature {
        &self.0.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.0.return_type())
    }

    fn is_nullable(&self) -> bool {
        true
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(PipelineGroups {
            function: self.0.clone(),
            states: Vec::new(),
        }))
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(PipelineAccumulator {
            state: self.0.pipeline.empty_state(),
            function: self.0.clone(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(self
            .0
            .pipeline
            .aggs()
            .iter()
            .zip(self.0.pipeline.state_types())
            .enumerate()
            .map(|(i, (a, t))| {
                Arc::new(Field::new(
                    format!("{}[{}{i}]", args.name, a.kind.name()),
                    arrow_type(t),
                    false,
                ))
            })
            .collect())
    }
}

/// One group's (or one partition's) running state.
#[derive(Debug)]
struct PipelineAccumulator {
    function: Arc<Function>,
    state: State,
}

/// A value as the `ScalarValue` of `dtype` (`None`: null).
fn scalar_value(v: Option<Scalar>, dtype: DType) -> ScalarValue {
    match dtype {
        DType::Bool => ScalarValue::Boolean(v.map(Scalar::as_bool)),
        DType::I32 => ScalarValue::Int32(v.map(|s| s.to_bits() as u32 as i32)),
        DType::U32 => ScalarValue::UInt32(v.map(|s| s.to_bits() as u32)),
        DType::I64 => ScalarValue::Int64(v.map(|s| s.to_bits() as i64)),
        DType::U64 => ScalarValue::UInt64(v.map(Scalar::to_bits)),
        DType::F32 => ScalarValue::Float32(v.map(|s| f32::from_bits(s.to_bits() as u32))),
        DType::F64 => ScalarValue::Float64(v.map(|s| f64::from_bits(s.to_bits()))),
    }
}

/// The state columns DataFusion hands back, one `Vec` per aggregate, and
/// the state of their row `row`.
struct StateColumns(Vec<Vec<Scalar>>);

impl StateColumns {
    fn read(p: &Pipeline, states: &[ArrayRef]) -> DfResult<StateColumns> {
        let types = p.state_types();
        if states.len() != types.len() {
            return Err(DataFusionError::Internal(format!(
                "computeq: {} state columns where the pipeline keeps {}",
                states.len(),
                types.len()
            )));
        }
        Ok(StateColumns(
            states
                .iter()
                .zip(&types)
                .map(|(a, &t)| column_scalars(a.as_ref(), t))
                .collect::<DfResult<_>>()?,
        ))
    }

    fn rows(&self) -> usize {
        self.0.first().map_or(0, Vec::len)
    }

    /// Row `row` into `out` (a state of the pipeline's width).
    fn row_into(&self, row: usize, out: &mut State) -> DfResult<()> {
        for (slot, c) in out.0.iter_mut().zip(&self.0) {
            *slot = *c.get(row).ok_or_else(|| {
                DataFusionError::Internal("computeq: a short state column".into())
            })?;
        }
        Ok(())
    }
}

impl Accumulator for PipelineAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        if values.first().is_none_or(|a| a.is_empty()) {
            return Ok(());
        }
        let s = self.function.run_state(values)?;
        self.function.pipeline.merge(&mut self.state, &s);
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let p = &self.function.pipeline;
        let values = p.values(&self.state);
        let outputs = p.outputs();
        if let ([v], [o]) = (values.as_slice(), outputs.as_slice()) {
            return Ok(scalar_value(*v, o.dtype));
        }
        let fields: Fields = outputs
            .iter()
            .map(|o| Field::new(&o.name, arrow_type(o.dtype), o.nullable))
            .collect();
        let arrays = values
            .iter()
            .zip(&outputs)
            .map(|(v, o)| scalar_value(*v, o.dtype).to_array())
            .collect::<DfResult<Vec<_>>>()?;
        Ok(ScalarValue::Struct(Arc::new(StructArray::try_new(
            fields, arrays, None,
        )?)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.state.0.len() * std::mem::size_of::<Scalar>()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(self
            .state
            .0
            .iter()
            .zip(self.function.pipeline.state_types())
            .map(|(&v, t)| scalar_value(Some(v), t))
            .collect())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let p = &self.function.pipeline;
        let cols = StateColumns::read(p, states)?;
        let mut other = p.empty_state();
        for row in 0..cols.rows() {
            cols.row_into(row, &mut other)?;
            p.merge(&mut self.state, &other);
        }
        Ok(())
    }
}

/// The states of every group of one `GROUP BY`: each batch is one
/// computeq query that groups its rows by DataFusion's group index (a
/// dense key: the direct-index grouping) and aggregates them in one pass;
/// the groups' partial states then merge into these.
#[derive(Debug)]
struct PipelineGroups {
    function: Arc<Function>,
    states: Vec<State>,
}

/// The values of a column of `dtype`, without nulls (a state column).
fn column_scalars(array: &dyn Array, dtype: DType) -> DfResult<Vec<Scalar>> {
    let parts = crate::arrow::parts_of_dtype(array, dtype).ok_or_else(|| {
        DataFusionError::Internal(format!(
            "computeq: a state column of {} where {dtype} was written",
            array.data_type()
        ))
    })?;
    if parts.validity.is_some() {
        return Err(DataFusionError::Internal(
            "computeq: a state column with nulls".into(),
        ));
    }
    let all = |c: crate::types::ColumnRef<'_>| (0..c.len()).map(|i| c.get(i)).collect();
    match &parts.values {
        crate::query::SourceValues::Borrowed(crate::backend::Input::Host(c)) => Ok(all(*c)),
        crate::query::SourceValues::Owned(c) => Ok(all(c.as_ref())),
        crate::query::SourceValues::Borrowed(_) => Err(DataFusionError::Internal(
            "computeq: a state column on a device".into(),
        )),
    }
}

/// A column of `dtype` from values of that type.
fn column_of(dtype: DType, values: impl Iterator<Item = Scalar>) -> Column {
    let bits = values.map(Scalar::to_bits);
    match dtype {
        DType::Bool => Column::Bool(bits.map(|b| b != 0).collect()),
        DType::I32 => Column::I32(bits.map(|b| b as u32 as i32).collect()),
        DType::U32 => Column::U32(bits.map(|b| b as u32).collect()),
        DType::I64 => Column::I64(bits.map(|b| b as i64).collect()),
        DType::U64 => Column::U64(bits.collect()),
        DType::F32 => Column::F32(bits.map(|b| f32::from_bits(b as u32)).collect()),
        DType::F64 => Column::F64(bits.map(f64::from_bits).collect()),
    }
}

/// One array of `dtype` from values (`None`: null).
fn scalars_to_array(values: Vec<Option<Scalar>>, dtype: DType) -> ArrayRef {
    let valid: Option<Vec<bool>> = values
        .iter()
        .any(Option::is_none)
        .then(|| values.iter().map(Option::is_some).collect());
    let zero = Scalar::zero(dtype);
    let column = column_of(dtype, values.into_iter().map(|v| v.unwrap_or(zero)));
    crate::arrow::column_to_array(column, valid)
}

impl PipelineGroups {
    fn grow(&mut self, total: usize) {
        if self.states.len() < total {
            let empty = self.function.pipeline.empty_state();
            self.states.resize(total, empty);
        }
    }

    fn take(&mut self, emit_to: EmitTo) -> Vec<State> {
        emit_to.take_needed(&mut self.states)
    }
}

impl GroupsAccumulator for PipelineGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.grow(total_num_groups);
        if group_indices.is_empty() {
            return Ok(());
        }
        let f = &self.function;
        let groups = group_indices
            .iter()
            .map(|&g| u32::try_from(g))
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| DataFusionError::Execution("computeq: more than 2^32 groups".into()))?;
        // A row counts where the filter is true (null: not).
        let keep = opt_filter.map(|b| {
            (0..b.len())
                .map(|i| b.is_valid(i) && b.value(i))
                .collect::<Vec<bool>>()
        });
        let sources = sources(&f.pipeline, values)?;
        let (keys, cols, _metrics) = f
            .pipeline
            .run_grouped(f.engine.get(), sources, groups, keep, f.options())
            .map_err(external)?;
        let mut partial = f.pipeline.empty_state();
        for (j, &g) in keys.iter().enumerate() {
            for (slot, c) in partial.0.iter_mut().zip(&cols) {
                *slot = c.as_ref().get(j);
            }
            let state = self.states.get_mut(g as usize).ok_or_else(|| {
                DataFusionError::Internal("computeq: a group index past the groups".into())
            })?;
            f.pipeline.merge(state, &partial);
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        let states = self.take(emit_to);
        let p = &self.function.pipeline;
        let outputs = p.outputs();
        let mut per_output: Vec<Vec<Option<Scalar>>> =
            vec![Vec::with_capacity(states.len()); outputs.len()];
        for s in &states {
            for (col, v) in per_output.iter_mut().zip(p.values(s)) {
                col.push(v);
            }
        }
        let mut arrays: Vec<ArrayRef> = per_output
            .into_iter()
            .zip(&outputs)
            .map(|(v, o)| scalars_to_array(v, o.dtype))
            .collect();
        if arrays.len() == 1 {
            return Ok(arrays.pop().expect("one output"));
        }
        let fields: Fields = outputs
            .iter()
            .map(|o| Field::new(&o.name, arrow_type(o.dtype), o.nullable))
            .collect();
        Ok(Arc::new(StructArray::try_new(fields, arrays, None)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        let states = self.take(emit_to);
        Ok(self
            .function
            .pipeline
            .state_types()
            .iter()
            .enumerate()
            .map(|(i, &t)| scalars_to_array(states.iter().map(|s| Some(s.0[i])).collect(), t))
            .collect())
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.grow(total_num_groups);
        let p = &self.function.pipeline;
        let cols = StateColumns::read(p, values)?;
        let mut other = p.empty_state();
        for (row, &g) in group_indices.iter().enumerate() {
            cols.row_into(row, &mut other)?;
            let state = self.states.get_mut(g).ok_or_else(|| {
                DataFusionError::Internal("computeq: a group index past the groups".into())
            })?;
            p.merge(state, &other);
        }
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> DfResult<Vec<ArrayRef>> {
        // Each row its own group.
        let rows = values.first().map_or(0, |a| a.len());
        let mut one = PipelineGroups {
            function: self.function.clone(),
            states: Vec::new(),
        };
        let indices: Vec<usize> = (0..rows).collect();
        one.update_batch(values, &indices, opt_filter, rows)?;
        one.state(EmitTo::All)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.states.capacity() * std::mem::size_of::<State>()
    }
}
