//! A pipeline as a DataFusion plan node: for pipelines that change the
//! row count (a `filter` before `collect`) and for gathering several
//! record batches into one launch (a GPU's, or a longer pass on the CPU).
//!
//! [`PipelineNode`] is the logical node (over any input plan, its
//! arguments cast to the pipeline's input types), [`PipelinePlanner`] the
//! extension planner that turns it into [`PipelineExec`], and
//! [`with_pipelines`] the query planner a session needs to plan it. The
//! node's output is the pipeline's collected columns; its metrics
//! (`EXPLAIN ANALYZE`) are DataFusion's baseline (output rows, elapsed
//! compute) and `computeq_runs_<backend>` (runs per backend).

use super::{arrow_type, external, Function};
use crate::query::Pipeline;
use crate::runtime::executor::QueryOptions;
use ::datafusion::arrow::array::{ArrayRef, RecordBatch};
use ::datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use ::datafusion::catalog::Session;
use ::datafusion::common::tree_node::TreeNodeRecursion;
use ::datafusion::common::{DFSchema, DFSchemaRef, DataFusionError, Result as DfResult};
use ::datafusion::dataframe::DataFrame;
use ::datafusion::execution::context::QueryPlanner;
use ::datafusion::execution::session_state::SessionStateBuilder;
use ::datafusion::execution::{SendableRecordBatchStream, TaskContext};
use ::datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use ::datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use ::datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use ::datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, RecordOutput,
};
use ::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use ::datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use ::datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};
use futures::StreamExt;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Rows gathered into one run by default: a launch's worth for a GPU, and
/// past the size where a run's fixed cost matters on the CPU.
pub const DEFAULT_GATHER_ROWS: usize = 1 << 20;

/// The logical node: `pipeline` over the values of `args` (expressions of
/// the input's columns), output its collected columns.
#[derive(Debug)]
pub struct PipelineNode {
    pub(crate) function: Arc<Function>,
    input: LogicalPlan,
    pub(crate) args: Vec<Expr>,
    schema: DFSchemaRef,
    pub(crate) gather_rows: usize,
}

impl PartialEq for PipelineNode {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function
            && self.input == other.input
            && self.args == other.args
            && self.gather_rows == other.gather_rows
    }
}

impl Eq for PipelineNode {}

impl Hash for PipelineNode {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.function.hash(h);
        self.input.hash(h);
        self.args.hash(h);
        self.gather_rows.hash(h);
    }
}

impl PartialOrd for PipelineNode {
    /// By name, then input; nodes of one name over one input with other
    /// pipelines are unordered.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match self.function.name.partial_cmp(&other.function.name) {
            Some(Ordering::Equal) => match self.input.partial_cmp(&other.input) {
                Some(Ordering::Equal) if self != other => None,
                o => o,
            },
            o => o,
        }
    }
}

/// The output schema: the pipeline's collected columns.
pub(crate) fn output_schema(p: &Pipeline, name: &str) -> Schema {
    let outputs = p.outputs();
    Schema::new(
        outputs
            .iter()
            .map(|o| {
                let n = if outputs.len() == 1 {
                    name.to_string()
                } else {
                    format!("{name}.{}", o.name)
                };
                Field::new(n, arrow_type(o.dtype), o.nullable)
            })
            .collect::<Vec<_>>(),
    )
}

impl PipelineNode {
    /// The node; `args` are cast to the pipeline's input types.
    pub(crate) fn try_new(
        function: Arc<Function>,
        input: LogicalPlan,
        args: Vec<Expr>,
        gather_rows: usize,
    ) -> DfResult<PipelineNode> {
        let p = &function.pipeline;
        if p.is_aggregate() {
            return Err(DataFusionError::Plan(format!(
                "computeq: {p} ends in aggregates: use it as an aggregate function \
                 (aggregate_udf), the node runs collecting pipelines"
            )));
        }
        if args.len() != p.input_types().len() {
            return Err(DataFusionError::Plan(format!(
                "computeq: {p} reads {} columns, {} arguments given",
                p.input_types().len(),
                args.len()
            )));
        }
        let args = args
            .into_iter()
            .zip(p.input_types())
            .map(|(e, &t)| {
                let to = arrow_type(t);
                match e {
                    // Read back from a plan (Ballista): cast already.
                    Expr::Cast(c) if c.field.data_type() == &to => Expr::Cast(c),
                    e => ::datafusion::prelude::cast(e, to),
                }
            })
            .collect();
        let schema = Arc::new(DFSchema::try_from(output_schema(p, &function.name))?);
        Ok(PipelineNode {
            function,
            input,
            args,
            schema,
            gather_rows: gather_rows.max(1),
        })
    }
}

impl UserDefinedLogicalNodeCore for PipelineNode {
    fn name(&self) -> &str {
        "ComputeqPipeline"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        self.args.clone()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "ComputeqPipeline: {} = {}, args=[",
            self.function.name, self.function.pipeline
        )?;
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{a}")?;
        }
        write!(f, "], gather_rows={}", self.gather_rows)
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> DfResult<Self> {
        let input = inputs.pop().ok_or_else(|| {
            DataFusionError::Internal("computeq: a pipeline node needs one input".into())
        })?;
        Ok(PipelineNode {
            function: self.function.clone(),
            input,
            args: exprs,
            schema: self.schema.clone(),
            gather_rows: self.gather_rows,
        })
    }

    fn supports_limit_pushdown(&self) -> bool {
        false
    }
}

/// `df` with `pipeline` applied to `args` (expressions of its columns, cast
/// to the pipeline's input types): a data frame of the pipeline's
/// collected columns, named after `name` (`name`, or `name.c0`, ... for
/// several). Its session must plan the node ([`with_pipelines`]).
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// use computeq::query::Pipeline;
/// use datafusion::arrow::array::{Float64Array, RecordBatch};
/// use datafusion::execution::session_state::SessionStateBuilder;
/// use datafusion::prelude::{col, SessionContext};
/// use std::sync::Arc;
///
/// let state = computeq::datafusion::with_pipelines(SessionStateBuilder::new().with_default_features()).build();
/// let ctx = SessionContext::new_with_state(state);
/// let x = Float64Array::from(vec![0.25, 1.0, 2.0, 0.75]);
/// ctx.register_batch("t", RecordBatch::try_from_iter([("x", Arc::new(x) as _)])?)?;
///
/// let big = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * 10.0).collect::<Vec<_>>())?;
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// let out = rt.block_on(async {
///     let df = ctx.table("t").await?;
///     computeq::datafusion::apply(df, "big", big, vec![col("x")])?.collect().await
/// })?;
/// let v = out[0].column(0).as_any().downcast_ref::<Float64Array>().unwrap();
/// assert_eq!(v.values(), &[10.0, 20.0, 7.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn apply(
    df: DataFrame,
    name: impl Into<String>,
    pipeline: Pipeline,
    args: Vec<Expr>,
) -> DfResult<DataFrame> {
    apply_with(
        df,
        super::function(name, pipeline),
        args,
        DEFAULT_GATHER_ROWS,
    )
}

/// [`apply`] with a function's settings ([`super::function`]) and the
/// number of rows gathered into one run (at least; the last run of a
/// partition takes what is left).
pub fn apply_with(
    df: DataFrame,
    function: super::FunctionBuilder,
    args: Vec<Expr>,
    gather_rows: usize,
) -> DfResult<DataFrame> {
    let (state, plan) = df.into_parts();
    let node = PipelineNode::try_new(Arc::new(Function::new(function)), plan, args, gather_rows)?;
    Ok(DataFrame::new(
        state,
        LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        }),
    ))
}

/// Plans [`PipelineNode`]s: add it to your own
/// `DefaultPhysicalPlanner::with_extension_planners`, or use
/// [`with_pipelines`].
#[derive(Debug, Default)]
pub struct PipelinePlanner;

#[async_trait::async_trait]
impl ExtensionPlanner for PipelinePlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        planning_ctx: &::datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<PipelineNode>() else {
            return Ok(None);
        };
        let (Some(logical), Some(input)) = (logical_inputs.first(), physical_inputs.first()) else {
            return Err(DataFusionError::Internal(
                "computeq: a pipeline node needs one input".into(),
            ));
        };
        let args = node
            .args
            .iter()
            .map(|e| planner.create_physical_expr(e, logical.schema(), session, planning_ctx))
            .collect::<DfResult<Vec<_>>>()?;
        Ok(Some(Arc::new(PipelineExec::new(
            node.function.clone(),
            input.clone(),
            args,
            Arc::new(node.schema.as_arrow().clone()),
            node.gather_rows,
        ))))
    }
}

/// A query planner that plans [`PipelineNode`]s (and everything else as
/// DataFusion's default planner does).
#[derive(Debug, Default)]
pub struct PipelineQueryPlanner;

#[async_trait::async_trait]
impl QueryPlanner for PipelineQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(PipelinePlanner)])
            .create_physical_plan(logical_plan, session)
            .await
    }
}

/// `builder` with the query planner that plans pipeline nodes
/// ([`PipelineQueryPlanner`]; it replaces the builder's query planner).
pub fn with_pipelines(builder: SessionStateBuilder) -> SessionStateBuilder {
    builder.with_query_planner(Arc::new(PipelineQueryPlanner))
}

/// The physical node: gathers the input's batches of each partition into
/// runs of at least `gather_rows` rows and runs the pipeline over each.
#[derive(Debug)]
pub struct PipelineExec {
    pub(crate) function: Arc<Function>,
    input: Arc<dyn ExecutionPlan>,
    pub(crate) args: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    pub(crate) gather_rows: usize,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl PipelineExec {
    pub(crate) fn new(
        function: Arc<Function>,
        input: Arc<dyn ExecutionPlan>,
        args: Vec<Arc<dyn PhysicalExpr>>,
        schema: SchemaRef,
        gather_rows: usize,
    ) -> PipelineExec {
        let partitions = input.properties().partitioning.partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        PipelineExec {
            function,
            input,
            args,
            schema,
            gather_rows,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for PipelineExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "ComputeqPipelineExec: {} = {}, gather_rows={}{}",
                self.function.name,
                self.function.pipeline,
                self.gather_rows,
                if self.function.parallel {
                    ""
                } else {
                    ", cpu-parallel off while the session runs one partition per core"
                }
            ),
            DisplayFormatType::TreeRender => write!(f, "{}", self.function.pipeline),
        }
    }
}

impl ExecutionPlan for PipelineExec {
    fn name(&self) -> &str {
        "ComputeqPipelineExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        ::datafusion::physical_plan::execution_plan::apply_expression_roots(self.args.iter(), f)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let input = children.pop().ok_or_else(|| {
            DataFusionError::Internal("computeq: a pipeline node needs one input".into())
        })?;
        Ok(Arc::new(PipelineExec::new(
            self.function.clone(),
            input,
            self.args.clone(),
            self.schema.clone(),
            self.gather_rows,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        // Cores shared with the session's other partitions: no fan-out
        // unless the function allows it and the session leaves cores idle.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let partitions = context.session_config().target_partitions();
        let one_thread = !self.function.parallel || partitions >= cores;
        let state = Gather {
            input,
            function: self.function.clone(),
            args: self.args.clone(),
            schema: self.schema.clone(),
            gather_rows: self.gather_rows,
            options: QueryOptions {
                one_thread,
                ..QueryOptions::default()
            },
            baseline: BaselineMetrics::new(&self.metrics, partition),
            metrics: self.metrics.clone(),
            runs: Vec::new(),
            partition,
            done: false,
        };
        let stream =
            futures::stream::unfold(state, |mut g| async move { g.next().await.map(|r| (r, g)) });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// One partition's stream: gathers argument columns, runs the pipeline.
struct Gather {
    input: SendableRecordBatchStream,
    function: Arc<Function>,
    args: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    gather_rows: usize,
    options: QueryOptions,
    baseline: BaselineMetrics,
    metrics: ExecutionPlanMetricsSet,
    /// `computeq_runs_<backend>`, made on first use.
    runs: Vec<(crate::BackendKind, Count)>,
    partition: usize,
    done: bool,
}

impl Gather {
    /// The next output batch: `None` at the end.
    async fn next(&mut self) -> Option<DfResult<RecordBatch>> {
        loop {
            if self.done {
                self.baseline.done();
                return None;
            }
            let mut gathered: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.args.len()];
            let mut rows = 0;
            while rows < self.gather_rows {
                match self.input.next().await {
                    Some(Ok(batch)) => {
                        rows += batch.num_rows();
                        for (arg, out) in self.args.iter().zip(&mut gathered) {
                            let v = arg
                                .evaluate(&batch)
                                .and_then(|v| v.into_array(batch.num_rows()));
                            match v {
                                Ok(a) => out.push(a),
                                Err(e) => return Some(Err(e)),
                            }
                        }
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        self.done = true;
                        break;
                    }
                }
            }
            if rows == 0 {
                continue;
            }
            return Some(self.run(gathered));
        }
    }

    fn run(&mut self, gathered: Vec<Vec<ArrayRef>>) -> DfResult<RecordBatch> {
        let timer = self.baseline.elapsed_compute().timer();
        let columns = gathered
            .iter()
            .map(|parts| {
                if parts.len() == 1 {
                    Ok(parts[0].clone())
                } else {
                    let refs: Vec<&dyn ::datafusion::arrow::array::Array> =
                        parts.iter().map(|a| a.as_ref()).collect();
                    ::datafusion::arrow::compute::concat(&refs).map_err(DataFusionError::from)
                }
            })
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let sources = super::sources(&self.function.pipeline, &columns)?;
        let (cols, m) = self
            .function
            .pipeline
            .run_columns(
                &self.function.bound.0,
                self.function.engine.get(),
                sources,
                self.options,
            )
            .map_err(external)?;
        let arrays: Vec<ArrayRef> = cols
            .into_iter()
            .map(|(c, valid)| crate::arrow::column_to_array(c, valid))
            .collect();
        timer.done();
        self.count_run(m.backend);
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)?;
        Ok(batch.record_output(&self.baseline))
    }

    fn count_run(&mut self, backend: crate::BackendKind) {
        if let Some((_, c)) = self.runs.iter().find(|(k, _)| *k == backend) {
            c.add(1);
            return;
        }
        // One counter per backend by name: DataFusion's display sums a
        // metric's partitions by name and drops labels.
        let name = format!("computeq_runs_{}", backend.to_string().replace('-', "_"));
        let c = MetricBuilder::new(&self.metrics).counter(name, self.partition);
        c.add(1);
        self.runs.push((backend, c));
    }
}
