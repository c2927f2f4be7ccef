//! computeq pipelines distributed by Ballista (feature `ballista`).
//!
//! A Ballista cluster plans a query on its scheduler and runs the plan's
//! stages on its executors, each a separate process. The computeq parts of
//! a plan (the functions of [`crate::datafusion`] and its plan node) travel
//! inside the plan, in their serialized form ([`Pipeline::to_bytes`]), by
//! way of the extension codecs here, [`LogicalCodec`] and
//! [`PhysicalCodec`]: an executor needs the codec, not the user's
//! pipelines, and no function has to be registered anywhere but in the
//! client's session.
//!
//! Each codec wraps Ballista's own (or any other: [`LogicalCodec::wrapping`])
//! and hands it everything that is not computeq's: a plan or function it
//! encodes starts with a tag byte that says whose it is, so decoding goes
//! to the codec that encoded it. Every process of the cluster needs the
//! same codecs: [`session_config`] and [`session_state`] (the client's,
//! which [`connect`] makes Ballista's keeping its functions),
//! [`scheduler_config`] and [`executor_config`] (the settings
//! of a scheduler's and an executor's binary; `examples/ballista_scheduler.rs`
//! and `examples/ballista_executor.rs` are such binaries) and
//! [`LocalCluster`] (a scheduler and executors in this process, for tests
//! and examples).
//!
//! What distributes is what [`Pipeline`] captures: partition-local work
//! (zip of one batch's columns, map, filter) ending in a collect or in
//! associative and commutative aggregates, merged across partitions and
//! executors through DataFusion's partial and final aggregation.
//! Position-dependent adaptors (enumerate, skip, take, scans, argmin by
//! position, ...) are refused when the pipeline is traced, before any
//! plan exists.
//!
//! A malformed document, or one of another version, is an error of the
//! plan's decoding that names what is wrong (on the scheduler or the
//! executor that reads it), never a panic.
//!
//! ```no_run
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use computeq::prelude::*;
//! use computeq::query::Pipeline;
//!
//! let state = computeq::ballista::session_state(computeq::ballista::session_config())?;
//! let ctx = computeq::ballista::connect("df://localhost:50050", state)?;
//! let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
//! ctx.register_udaf(computeq::datafusion::aggregate_udf("sum_sq", sum_sq)?);
//! let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
//! rt.block_on(async {
//!     ctx.sql("SELECT k, sum_sq(x) FROM t GROUP BY k").await?.show().await
//! })?;
//! # Ok(())
//! # }
//! ```

mod cluster;

pub use cluster::LocalCluster;

use crate::datafusion::node::{output_schema, PipelineExec, PipelineNode};
use crate::datafusion::{EngineRef, Function, FunctionBuilder, PipelineAggregate, PipelineScalar};
use crate::query::Pipeline;
use crate::runtime::Engine;
use ::ballista_core::extension::SessionConfigExt;
use ::ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use ::datafusion::arrow::datatypes::SchemaRef;
use ::datafusion::catalog::TableProvider;
use ::datafusion::common::{DataFusionError, Result as DfResult, TableReference};
use ::datafusion::datasource::file_format::FileFormatFactory;
use ::datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use ::datafusion::execution::TaskContext;
use ::datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use ::datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use ::datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use ::datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use ::datafusion::prelude::{SessionConfig, SessionContext};
use ::datafusion_proto::logical_plan::from_proto::parse_exprs;
use ::datafusion_proto::logical_plan::to_proto::serialize_exprs;
use ::datafusion_proto::logical_plan::LogicalExtensionCodec;
use ::datafusion_proto::physical_plan::from_proto::parse_physical_exprs;
use ::datafusion_proto::physical_plan::to_proto::serialize_physical_exprs;
use ::datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use ::datafusion_proto::protobuf::{LogicalExprNode, PhysicalExprNode};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The name in every computeq part of a plan.
pub const CODEC_FORMAT: &str = "computeq-ballista";

/// The version of the computeq parts this build writes and reads (the
/// pipeline inside has its own, [`crate::query::WIRE_VERSION`]).
pub const CODEC_VERSION: u32 = 1;

/// The first byte of what the wrapped codec wrote.
const TAG_INNER: u8 = 0;
/// The first byte of a computeq part.
const TAG_COMPUTEQ: u8 = 0xC9;

/// What a computeq part holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    /// A scalar function ([`crate::datafusion::scalar_udf`]).
    Scalar,
    /// An aggregate function ([`crate::datafusion::aggregate_udf`]).
    Aggregate,
    /// The plan node ([`crate::datafusion::apply`]), logical or physical;
    /// its argument expressions follow the header.
    Node,
}

/// The header of a computeq part: after the tag byte, its length (u32,
/// little-endian), then this as JSON, then the node's arguments (each a
/// length-delimited protobuf expression).
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    kind: Kind,
    name: String,
    parallel: bool,
    /// The node's rows per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gather_rows: Option<u64>,
    /// The pipeline's document ([`Pipeline::to_bytes`]).
    pipeline: String,
}

/// The first fields alone, read before the rest, so that a part of
/// another version gets an error that says so.
#[derive(Deserialize)]
struct Version {
    format: String,
    version: u32,
}

fn plan_error(message: impl Into<String>) -> DataFusionError {
    DataFusionError::Plan(format!("computeq: {}", message.into()))
}

/// What a codec's bytes are.
enum Part<'a> {
    /// The wrapped codec's, without the tag.
    Inner(&'a [u8]),
    /// A computeq part: its header and what follows.
    Ours(Header, &'a [u8]),
}

fn split(buf: &[u8]) -> DfResult<Part<'_>> {
    match buf.split_first() {
        Some((&TAG_INNER, rest)) => Ok(Part::Inner(rest)),
        Some((&TAG_COMPUTEQ, rest)) => {
            let (len, rest) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| plan_error("a computeq part ends before its header's length"))?;
            let len = u32::from_le_bytes(*len) as usize;
            if len > rest.len() {
                return Err(plan_error(format!(
                    "a computeq part's header is {len} bytes long, {} remain",
                    rest.len()
                )));
            }
            let (header, rest) = rest.split_at(len);
            let v: Version = serde_json::from_slice(header)
                .map_err(|e| plan_error(format!("a computeq part's header does not read: {e}")))?;
            if v.format != CODEC_FORMAT {
                return Err(plan_error(format!(
                    "a part named {:?}, not {CODEC_FORMAT:?}",
                    v.format
                )));
            }
            if v.version != CODEC_VERSION {
                return Err(plan_error(format!(
                    "a computeq part of version {}, this build reads version {CODEC_VERSION}: \
                     run the same computeq on the client, the scheduler and the executors",
                    v.version
                )));
            }
            let h: Header = serde_json::from_slice(header)
                .map_err(|e| plan_error(format!("a computeq part's header does not read: {e}")))?;
            Ok(Part::Ours(h, rest))
        }
        Some((tag, _)) => Err(plan_error(format!(
            "a plan part that starts with byte {tag:#04x}, written by neither computeq's codec \
             nor the codec it wraps: every process of the cluster needs computeq's codecs"
        ))),
        None => Err(plan_error(
            "an empty plan part where a codec's bytes were expected",
        )),
    }
}

/// Writes a computeq part: tag, header, then `args`.
fn write_part(
    buf: &mut Vec<u8>,
    kind: Kind,
    f: &Function,
    gather_rows: Option<usize>,
    args: &[u8],
) -> DfResult<()> {
    let header = Header {
        format: CODEC_FORMAT.into(),
        version: CODEC_VERSION,
        kind,
        name: f.name.clone(),
        parallel: f.parallel,
        gather_rows: gather_rows.map(|g| g as u64),
        pipeline: String::from_utf8(f.pipeline.to_bytes())
            .map_err(|_| plan_error("a pipeline document that is not UTF-8"))?,
    };
    let header = serde_json::to_vec(&header)
        .map_err(|e| plan_error(format!("a header that does not write: {e}")))?;
    let len =
        u32::try_from(header.len()).map_err(|_| plan_error("a pipeline document over 4 GiB"))?;
    buf.push(TAG_COMPUTEQ);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&header);
    buf.extend_from_slice(args);
    Ok(())
}

/// Runs the wrapped codec's encoder into a buffer of its own, then tags
/// what it wrote; writes nothing where it wrote nothing (DataFusion then
/// resolves the function by name, as without a codec).
fn write_inner(buf: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>) -> DfResult<()>) -> DfResult<()> {
    let mut inner = Vec::new();
    f(&mut inner)?;
    if !inner.is_empty() {
        buf.push(TAG_INNER);
        buf.extend_from_slice(&inner);
    }
    Ok(())
}

/// Protobuf messages, each length-delimited.
fn write_messages<M: prost::Message>(messages: &[M]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        m.encode_length_delimited(&mut out)
            .expect("a Vec grows to fit");
    }
    out
}

fn read_messages<M: prost::Message + Default>(mut bytes: &[u8]) -> DfResult<Vec<M>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(
            M::decode_length_delimited(&mut bytes)
                .map_err(|e| plan_error(format!("a node argument does not read: {e}")))?,
        );
    }
    Ok(out)
}

/// What the codecs share: the engine decoded functions run on.
#[derive(Clone, Debug)]
struct Decoder {
    engine: EngineRef,
}

impl Decoder {
    /// The function of a header of the expected kind.
    fn builder(&self, h: &Header, kind: Kind) -> DfResult<FunctionBuilder> {
        if h.kind != kind {
            return Err(plan_error(format!(
                "a computeq {:?} part where a {:?} was expected",
                h.kind, kind
            )));
        }
        let pipeline = Pipeline::from_bytes(h.pipeline.as_bytes())
            .map_err(|e| plan_error(format!("the pipeline of {:?}: {e}", h.name)))?;
        Ok(crate::datafusion::function(h.name.clone(), pipeline)
            .parallel(h.parallel)
            .engine_ref(self.engine.clone()))
    }

    fn scalar(&self, name: &str, h: &Header) -> DfResult<Arc<ScalarUDF>> {
        check_name(name, h)?;
        let udf = self
            .builder(h, Kind::Scalar)?
            .scalar()
            .map_err(|e| plan_error(e.to_string()))?;
        Ok(Arc::new(udf))
    }

    fn aggregate(&self, name: &str, h: &Header) -> DfResult<Arc<AggregateUDF>> {
        check_name(name, h)?;
        let udaf = self
            .builder(h, Kind::Aggregate)?
            .aggregate()
            .map_err(|e| plan_error(e.to_string()))?;
        Ok(Arc::new(udaf))
    }

    /// The node's function, checked against its arguments.
    fn node_function(&self, h: &Header, args: usize) -> DfResult<(Arc<Function>, usize)> {
        let f = Function::new(self.builder(h, Kind::Node)?);
        let p = &f.pipeline;
        if p.is_aggregate() || p.input_types().len() != args {
            return Err(plan_error(format!(
                "a node of {p} with {args} arguments: the node runs collecting pipelines, \
                 one argument per input"
            )));
        }
        let gather_rows = h
            .gather_rows
            .ok_or_else(|| plan_error("a node without its rows per run"))?;
        let gather_rows = usize::try_from(gather_rows).unwrap_or(usize::MAX).max(1);
        Ok((Arc::new(f), gather_rows))
    }
}

impl Decoder {
    /// A scalar function's definition: computeq's part, or what the
    /// wrapped codec wrote (`inner`, handed its bytes without the tag; an
    /// empty definition, a function resolved by name, as it came).
    fn decode_udf(
        &self,
        name: &str,
        buf: &[u8],
        inner: impl FnOnce(&[u8]) -> DfResult<Arc<ScalarUDF>>,
    ) -> DfResult<Arc<ScalarUDF>> {
        if buf.is_empty() {
            return inner(buf);
        }
        match split(buf)? {
            Part::Inner(rest) => inner(rest),
            Part::Ours(h, _) => self.scalar(name, &h),
        }
    }

    /// An aggregate function's definition (as [`Decoder::decode_udf`]).
    fn decode_udaf(
        &self,
        name: &str,
        buf: &[u8],
        inner: impl FnOnce(&[u8]) -> DfResult<Arc<AggregateUDF>>,
    ) -> DfResult<Arc<AggregateUDF>> {
        if buf.is_empty() {
            return inner(buf);
        }
        match split(buf)? {
            Part::Inner(rest) => inner(rest),
            Part::Ours(h, _) => self.aggregate(name, &h),
        }
    }
}

/// Writes a scalar function's definition: computeq's part, or what the
/// wrapped codec writes (`inner`), tagged.
fn encode_udf(
    node: &ScalarUDF,
    buf: &mut Vec<u8>,
    inner: impl FnOnce(&mut Vec<u8>) -> DfResult<()>,
) -> DfResult<()> {
    match node.inner().downcast_ref::<PipelineScalar>() {
        Some(PipelineScalar(f)) => write_part(buf, Kind::Scalar, f, None, &[]),
        None => write_inner(buf, inner),
    }
}

/// Writes an aggregate function's definition (as [`encode_udf`]).
fn encode_udaf(
    node: &AggregateUDF,
    buf: &mut Vec<u8>,
    inner: impl FnOnce(&mut Vec<u8>) -> DfResult<()>,
) -> DfResult<()> {
    match node.inner().downcast_ref::<PipelineAggregate>() {
        Some(PipelineAggregate(f)) => write_part(buf, Kind::Aggregate, f, None, &[]),
        None => write_inner(buf, inner),
    }
}

fn check_name(name: &str, h: &Header) -> DfResult<()> {
    if name == h.name {
        Ok(())
    } else {
        Err(plan_error(format!(
            "the function {name:?} carries the pipeline of {:?}",
            h.name
        )))
    }
}

/// The logical extension codec: computeq's functions and plan node, and
/// everything else through the codec it wraps (Ballista's by default).
#[derive(Debug)]
pub struct LogicalCodec {
    inner: Arc<dyn LogicalExtensionCodec>,
    decoder: Decoder,
}

impl Default for LogicalCodec {
    fn default() -> Self {
        LogicalCodec::wrapping(Arc::new(BallistaLogicalExtensionCodec::default()))
    }
}

impl LogicalCodec {
    /// Wrapping Ballista's logical codec.
    pub fn new() -> LogicalCodec {
        LogicalCodec::default()
    }

    /// Wrapping `inner`, which encodes and decodes what is not computeq's.
    pub fn wrapping(inner: Arc<dyn LogicalExtensionCodec>) -> LogicalCodec {
        LogicalCodec {
            inner,
            decoder: Decoder {
                engine: EngineRef::Global,
            },
        }
    }

    /// Decoded functions run on `engine` (default: the process-wide one).
    pub fn engine(mut self, engine: Arc<Engine>) -> LogicalCodec {
        self.decoder.engine = EngineRef::Own(engine);
        self
    }
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> DfResult<Extension> {
        match split(buf)? {
            Part::Inner(rest) => self.inner.try_decode(rest, inputs, ctx),
            Part::Ours(h, rest) => {
                let [input] = inputs else {
                    return Err(plan_error(format!(
                        "a pipeline node with {} inputs, not one",
                        inputs.len()
                    )));
                };
                let protos: Vec<LogicalExprNode> = read_messages(rest)?;
                let args = parse_exprs(&protos, ctx, self)?;
                let (function, gather_rows) = self.decoder.node_function(&h, args.len())?;
                let node = PipelineNode::try_new(function, input.clone(), args, gather_rows)?;
                Ok(Extension {
                    node: Arc::new(node),
                })
            }
        }
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DfResult<()> {
        match node.node.as_any().downcast_ref::<PipelineNode>() {
            Some(n) => {
                let protos = serialize_exprs(&n.args, self)
                    .map_err(|e| plan_error(format!("a node argument does not write: {e}")))?;
                write_part(
                    buf,
                    Kind::Node,
                    &n.function,
                    Some(n.gather_rows),
                    &write_messages(&protos),
                )
            }
            None => {
                // Always tagged: DataFusion decodes every extension node
                // through the codec, empty or not.
                buf.push(TAG_INNER);
                self.inner.try_encode(node, buf)
            }
        }
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn TableProvider>> {
        self.inner
            .try_decode_table_provider(buf, table_ref, schema, ctx)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> DfResult<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        self.decoder
            .decode_udf(name, buf, |b| self.inner.try_decode_udf(name, b))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udf(node, buf, |b| self.inner.try_encode_udf(node, b))
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<AggregateUDF>> {
        self.decoder
            .decode_udaf(name, buf, |b| self.inner.try_decode_udaf(name, b))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udaf(node, buf, |b| self.inner.try_encode_udaf(node, b))
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode_udwf(node, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> DfResult<Arc<::datafusion::logical_expr::HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }

    fn try_encode_higher_order_function(
        &self,
        node: &::datafusion::logical_expr::HigherOrderUDF,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        self.inner.try_encode_higher_order_function(node, buf)
    }
}

/// The physical extension codec: computeq's functions and
/// [`PipelineExec`], and everything else through the codec it wraps
/// (Ballista's by default).
#[derive(Debug)]
pub struct PhysicalCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
    decoder: Decoder,
}

impl Default for PhysicalCodec {
    fn default() -> Self {
        PhysicalCodec::wrapping(Arc::new(BallistaPhysicalExtensionCodec::default()))
    }
}

impl PhysicalCodec {
    /// Wrapping Ballista's physical codec.
    pub fn new() -> PhysicalCodec {
        PhysicalCodec::default()
    }

    /// Wrapping `inner`, which encodes and decodes what is not computeq's.
    pub fn wrapping(inner: Arc<dyn PhysicalExtensionCodec>) -> PhysicalCodec {
        PhysicalCodec {
            inner,
            decoder: Decoder {
                engine: EngineRef::Global,
            },
        }
    }

    /// Decoded functions and nodes run on `engine` (default: the
    /// process-wide one).
    pub fn engine(mut self, engine: Arc<Engine>) -> PhysicalCodec {
        self.decoder.engine = EngineRef::Own(engine);
        self
    }
}

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match split(buf)? {
            Part::Inner(rest) => self.inner.try_decode(rest, inputs, ctx, proto_converter),
            Part::Ours(h, rest) => {
                let [input] = inputs else {
                    return Err(plan_error(format!(
                        "a pipeline node with {} inputs, not one",
                        inputs.len()
                    )));
                };
                let protos: Vec<PhysicalExprNode> = read_messages(rest)?;
                let decode = PhysicalPlanDecodeContext::new(ctx, self);
                let args =
                    parse_physical_exprs(&protos, &decode, &input.schema(), proto_converter)?;
                let (function, gather_rows) = self.decoder.node_function(&h, args.len())?;
                let schema = Arc::new(output_schema(&function.pipeline, &function.name));
                Ok(Arc::new(PipelineExec::new(
                    function,
                    input.clone(),
                    args,
                    schema,
                    gather_rows,
                )))
            }
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        match node.downcast_ref::<PipelineExec>() {
            Some(e) => {
                let protos = serialize_physical_exprs(&e.args, self, proto_converter)?;
                write_part(
                    buf,
                    Kind::Node,
                    &e.function,
                    Some(e.gather_rows),
                    &write_messages(&protos),
                )
            }
            None => {
                buf.push(TAG_INNER);
                self.inner.try_encode(node, buf, proto_converter)
            }
        }
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        self.decoder
            .decode_udf(name, buf, |b| self.inner.try_decode_udf(name, b))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udf(node, buf, |b| self.inner.try_encode_udf(node, b))
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<AggregateUDF>> {
        self.decoder
            .decode_udaf(name, buf, |b| self.inner.try_decode_udaf(name, b))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udaf(node, buf, |b| self.inner.try_encode_udaf(node, b))
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode_udwf(node, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> DfResult<Arc<::datafusion::logical_expr::HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }

    fn try_encode_higher_order_function(
        &self,
        node: &::datafusion::logical_expr::HigherOrderUDF,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        self.inner.try_encode_higher_order_function(node, buf)
    }

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> DfResult<Arc<dyn PhysicalExpr>> {
        self.inner.try_decode_expr(buf, inputs, ctx)
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> DfResult<()> {
        self.inner.try_encode_expr(node, buf, ctx)
    }
}

/// `config` with computeq's codecs as Ballista's logical and physical
/// extension codecs.
pub fn with_codecs(config: SessionConfig) -> SessionConfig {
    config
        .with_ballista_logical_extension_codec(Arc::new(LogicalCodec::new()))
        .with_ballista_physical_extension_codec(Arc::new(PhysicalCodec::new()))
}

/// A Ballista session config ([`SessionConfigExt::new_with_ballista`])
/// with computeq's codecs: the client's, and an in-process cluster's.
pub fn session_config() -> SessionConfig {
    with_codecs(SessionConfig::new_with_ballista())
}

/// A session as Ballista's scheduler makes one (DataFusion's defaults,
/// Ballista's functions and optimizer rules) that also plans computeq's
/// node ([`crate::datafusion::with_pipelines`]), with `config` and
/// computeq's codecs ([`with_codecs`], replacing any others). The
/// client's session: register the functions in it, then connect
/// (`SessionContext::remote_with_state`, or [`LocalCluster::connect`]);
/// and the scheduler's ([`scheduler_config`]).
pub fn session_state(config: SessionConfig) -> DfResult<SessionState> {
    let state = ::ballista_core::utils::default_session_builder(with_codecs(config))?;
    Ok(crate::datafusion::with_pipelines(SessionStateBuilder::new_from_existing(state)).build())
}

/// A client session on the Ballista scheduler at `scheduler` (`df://host:port`,
/// `http://host:port` or `host:port`; the port defaults to 50050): `state`
/// made Ballista's (its queries are planned on the scheduler and run on its
/// executors) with its functions kept.
///
/// Ballista's `SessionContext::remote_with_state` and `upgrade_for_ballista`
/// replace the session's function lists with Ballista's own: functions
/// registered before connecting are gone afterwards. This puts back every
/// function of `state` that the upgrade dropped. `state` should carry
/// computeq's codecs ([`session_state`]), or the client will send the
/// functions by name to a scheduler that does not know them.
pub fn connect(scheduler: &str, state: SessionState) -> DfResult<SessionContext> {
    let address = scheduler
        .split_once("://")
        .map_or(scheduler, |(_, a)| a)
        .trim_end_matches('/');
    if address.is_empty() {
        return Err(DataFusionError::Configuration(format!(
            "computeq: no scheduler address in {scheduler:?}"
        )));
    }
    let url = if address.contains(':') {
        format!("http://{address}")
    } else {
        format!("http://{address}:50050")
    };
    connect_to(&url, state)
}

pub(crate) fn connect_to(url: &str, state: SessionState) -> DfResult<SessionContext> {
    use ::ballista_core::extension::SessionStateExt;
    let scalars = state.scalar_functions().clone();
    let aggregates = state.aggregate_functions().clone();
    let windows = state.window_functions().clone();
    let ctx = SessionContext::new_with_state(state.upgrade_for_ballista(url.to_string())?);
    let upgraded = ctx.state();
    for (name, f) in scalars {
        if !upgraded.scalar_functions().contains_key(&name) {
            ctx.register_udf(f.as_ref().clone());
        }
    }
    for (name, f) in aggregates {
        if !upgraded.aggregate_functions().contains_key(&name) {
            ctx.register_udaf(f.as_ref().clone());
        }
    }
    for (name, f) in windows {
        if !upgraded.window_functions().contains_key(&name) {
            ctx.register_udwf(f.as_ref().clone());
        }
    }
    Ok(ctx)
}

/// A scheduler's settings with computeq's codecs and sessions that plan
/// its node: a scheduler binary is `start_server(cluster,
/// address, Arc::new(scheduler_config(config)))` (see
/// `examples/ballista_scheduler.rs`).
pub fn scheduler_config(
    mut config: ::ballista_scheduler::config::SchedulerConfig,
) -> ::ballista_scheduler::config::SchedulerConfig {
    config.override_logical_codec = Some(Arc::new(LogicalCodec::new()));
    config.override_physical_codec = Some(Arc::new(PhysicalCodec::new()));
    config.override_session_builder = Some(Arc::new(session_state));
    config
}

/// An executor's settings with computeq's codecs: an executor binary is
/// `start_executor_process(Arc::new(executor_config(config)))` (see
/// `examples/ballista_executor.rs`). Its functions run on the
/// process-wide engine ([`crate::engine`]).
pub fn executor_config(
    mut config: ::ballista_executor::executor_process::ExecutorProcessConfig,
) -> ::ballista_executor::executor_process::ExecutorProcessConfig {
    config.override_logical_codec = Some(Arc::new(LogicalCodec::new()));
    config.override_physical_codec = Some(Arc::new(PhysicalCodec::new()));
    config
}
