//! computeq pipelines distributed by Ballista: the codecs round-trip every
//! pipeline shape inside logical and physical plans (decoded where no
//! function is registered), hand what is not theirs to the codec they wrap
//! (by name where it wrote nothing), refuse malformed and foreign parts
//! with an error, never a panic; and a scheduler with two executors on
//! localhost runs a grouped computeq aggregate over multi-file Parquet data,
//! equal to computeq run locally, with both executors computing.

use computeq::ballista::{
    session_config, session_state, LocalCluster, LogicalCodec, PhysicalCodec, CODEC_VERSION,
};
use computeq::datafusion::{aggregate_udf, scalar_udf};
use computeq::prelude::*;
use computeq::query::Pipeline;
use datafusion::arrow::array::{Array, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{col, ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/table.rs"]
mod table;
use table::{batch, data, local_groups, rt, schema, Data};

/// A directory of its own under the system's temporary one, removed when
/// dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("computeq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `d` as `files` Parquet files of row groups of 700 rows.
fn write_parquet(dir: &Path, d: &Data, files: usize) {
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    let len = d.0.len();
    let per_file = len.div_ceil(files);
    for (f, start) in (0..len).step_by(per_file).enumerate() {
        let end = (start + per_file).min(len);
        let rows = batch(d, start..end);
        let file = std::fs::File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(700))
            .build();
        let mut w = ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
        w.write(&rows).unwrap();
        w.close().unwrap();
    }
}

/// A function's name, pipeline and SQL arguments.
type Function = (&'static str, Pipeline, &'static str);

/// Every pipeline shape as a function: aggregates (with their SQL
/// arguments) and scalar functions.
fn functions() -> (Vec<Function>, Vec<Function>) {
    let k = 3i64;
    let aggregates = vec![
        (
            "sum_affine",
            Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).sum()).unwrap(),
            "x",
        ),
        (
            "sum_sq",
            Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum()).unwrap(),
            "x",
        ),
        (
            "cq_count",
            Pipeline::over::<i64>(|q| q.filter(|x| (x & 1).eq(0)).count()).unwrap(),
            "n",
        ),
        (
            "cq_min",
            Pipeline::over::<u32>(|q| q.min()).unwrap(),
            "arrow_cast(k, 'UInt32')",
        ),
        (
            "cq_max",
            Pipeline::over::<i64>(|q| q.map(|x| x >> 2).max()).unwrap(),
            "n",
        ),
        ("cq_mean", Pipeline::over::<i64>(|q| q.mean()).unwrap(), "k"),
        (
            "cq_var",
            Pipeline::over::<f64>(|q| q.variance()).unwrap(),
            "x",
        ),
        (
            "cq_var32",
            Pipeline::over::<i32>(|q| q.variance()).unwrap(),
            "arrow_cast(k, 'Int32')",
        ),
        (
            "cq_std",
            Pipeline::over::<f32>(|q| q.std_dev()).unwrap(),
            "arrow_cast(x, 'Float32')",
        ),
        (
            "cq_any",
            Pipeline::over::<f64>(|q| q.any(|x| x.gt(2.9))).unwrap(),
            "x",
        ),
        (
            "cq_stats",
            Pipeline::over::<f64>(|q| q.stats()).unwrap(),
            "x",
        ),
        (
            "cq_isum",
            Pipeline::over::<i64>(|q| q.map(|n| n ^ (n >> 3)).sum()).unwrap(),
            "n",
        ),
        (
            "cq_trio",
            Pipeline::over::<(f64, i64)>(|q| {
                q.aggregate(|(x, n), a| (a.sum(x * n.cast::<f64>()), a.variance(n), a.count()))
            })
            .unwrap(),
            // (Columns with different nulls in one pass are an error.)
            "arrow_cast(n, 'Float64'), k",
        ),
        (
            "cq_three",
            Pipeline::over::<(f32, f32, u32)>(|q| {
                q.filter(|((_, _), m)| m.gt(2))
                    .map(|((x, y), _)| x.mul_add(y, 1.0))
                    .sum()
            })
            .unwrap(),
            "arrow_cast(x, 'Float32'), arrow_cast(x, 'Float32'), arrow_cast(k, 'UInt32')",
        ),
    ];
    let scalars = vec![
        (
            "affine",
            Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>()).unwrap(),
            "x",
        ),
        (
            "cq_four",
            Pipeline::over::<(i64, i64, i64, i64)>(|q| {
                q.map(|(((a, b), c), d)| (a + b) * c - d + k)
                    .collect::<Vec<_>>()
            })
            .unwrap(),
            "k, n, k, n",
        ),
        (
            "cq_nan",
            Pipeline::over::<f64>(|q| {
                q.map(|x| x.max(f64::NEG_INFINITY) + f64::NAN * 0.0)
                    .collect::<Vec<_>>()
            })
            .unwrap(),
            "x",
        ),
    ];
    (aggregates, scalars)
}

/// A session with the computeq node's planner, one partition (results
/// in one order, float sums in one order), over the Parquet files in
/// `dir` as table `p`.
fn session(rt: &tokio::runtime::Runtime, dir: &str) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(1);
    let ctx = SessionContext::new_with_state(session_state(config).unwrap());
    rt.block_on(ctx.register_parquet("p", dir, ParquetReadOptions::default()))
        .unwrap();
    ctx
}

fn pretty(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

/// The queries of the round trip: every aggregate grouped by key, every
/// scalar function under a built-in aggregate, and the plan node.
fn queries() -> Vec<String> {
    let (aggregates, scalars) = functions();
    let mut q: Vec<String> = aggregates
        .iter()
        .map(|(name, _, args)| format!("SELECT k, {name}({args}) FROM p GROUP BY k ORDER BY k"))
        .collect();
    q.extend(scalars.iter().map(|(name, _, args)| {
        format!("SELECT k, sum({name}({args})) FROM p GROUP BY k ORDER BY k")
    }));
    q
}

fn register(ctx: &SessionContext) {
    let (aggregates, scalars) = functions();
    for (name, p, _) in aggregates {
        ctx.register_udaf(aggregate_udf(name, p).unwrap());
    }
    for (name, p, _) in scalars {
        ctx.register_udf(scalar_udf(name, p).unwrap());
    }
}

/// The plan node's data frame: a filtering pipeline over two columns.
async fn node_frame(ctx: &SessionContext) -> datafusion::dataframe::DataFrame {
    let p = Pipeline::over::<(f64, i64)>(|q| {
        q.filter(|(x, _)| x.gt(0.5))
            .map(|(x, n)| x * 2.0 + (n & 7).cast::<f64>())
            .collect::<Vec<_>>()
    })
    .unwrap();
    let df = ctx.table("p").await.unwrap();
    computeq::datafusion::apply_with(
        df,
        computeq::datafusion::function("scored", p),
        vec![col("x"), col("n")],
        5_000,
    )
    .unwrap()
}

/// Makes the process-wide engine (`.compute()`'s and the functions') one
/// without a cache directory before a test's first query: the tests must
/// neither read nor write the cache of the environment they run in.
fn hermetic() {
    let _ = computeq::set_engine(computeq::Engine::default());
}

#[test]
fn every_shape_round_trips_in_logical_and_physical_plans_decoded_without_the_functions() {
    hermetic();
    let rt = rt();
    let dir = TempDir::new("ballista-roundtrip");
    write_parquet(&dir.0, &data(9_000, 11), 3);
    let here = session(&rt, dir.path());
    register(&here);
    // Where the plans are decoded: the same table, no computeq function.
    let there = session(&rt, dir.path());
    let logical = LogicalCodec::new();
    let physical = PhysicalCodec::new();
    let mut frames: Vec<(String, datafusion::dataframe::DataFrame)> = queries()
        .into_iter()
        .map(|q| {
            let df = rt
                .block_on(here.sql(&q))
                .unwrap_or_else(|e| panic!("{q}: {e}"));
            (q, df)
        })
        .collect();
    frames.push(("the plan node".into(), rt.block_on(node_frame(&here))));
    for (q, df) in frames {
        let want = pretty(&rt.block_on(df.clone().collect()).unwrap());

        let plan = df.clone().into_optimized_plan().unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &logical).unwrap();
        let back =
            logical_plan_from_bytes_with_extension_codec(&bytes, &there.task_ctx(), &logical)
                .unwrap_or_else(|e| panic!("{q}: {e}"));
        let again = logical_plan_to_bytes_with_extension_codec(&back, &logical).unwrap();
        assert_eq!(bytes, again, "{q}: the logical plan re-encodes differently");
        let got = rt
            .block_on(async { there.execute_logical_plan(back).await?.collect().await })
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(pretty(&got), want, "{q}: the logical plan read back");

        let plan = rt.block_on(df.create_physical_plan()).unwrap();
        let bytes = physical_plan_to_bytes_with_extension_codec(plan, &physical).unwrap();
        let back =
            physical_plan_from_bytes_with_extension_codec(&bytes, &there.task_ctx(), &physical)
                .unwrap_or_else(|e| panic!("{q}: {e}"));
        let again = physical_plan_to_bytes_with_extension_codec(back.clone(), &physical).unwrap();
        assert_eq!(
            bytes, again,
            "{q}: the physical plan re-encodes differently"
        );
        let got = rt
            .block_on(collect(back, there.task_ctx()))
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(pretty(&got), want, "{q}: the physical plan read back");
    }
}

/// A parameterized function that only its own codec can rebuild: what the
/// computeq codecs wrap must still encode and decode it (the failure of
/// apache/datafusion#24830 in a composed codec).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Scaled {
    factor: i64,
    signature: Signature,
}

impl Scaled {
    fn udf(factor: i64) -> ScalarUDF {
        ScalarUDF::new_from_impl(Scaled {
            factor,
            signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for Scaled {
    fn name(&self) -> &str {
        "scaled"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].clone().into_array(args.number_rows)?;
        let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
        let out: Int64Array = a
            .iter()
            .map(|v| v.map(|v| v.wrapping_mul(self.factor)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The wrapped codec: owns `scaled`, writing its factor.
#[derive(Debug)]
struct ScaledCodec;

fn scaled_of(name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
    match (name, <[u8; 8]>::try_from(buf)) {
        ("scaled", Ok(b)) => Ok(Arc::new(Scaled::udf(i64::from_le_bytes(b)))),
        _ => datafusion::common::not_impl_err!("not scaled: {name}"),
    }
}

fn encode_scaled(node: &ScalarUDF, buf: &mut Vec<u8>) {
    if let Some(s) = node.inner().downcast_ref::<Scaled>() {
        buf.extend_from_slice(&s.factor.to_le_bytes());
    }
}

impl LogicalExtensionCodec for ScaledCodec {
    fn try_decode(
        &self,
        _: &[u8],
        _: &[datafusion::logical_expr::LogicalPlan],
        _: &datafusion::execution::TaskContext,
    ) -> DfResult<datafusion::logical_expr::Extension> {
        datafusion::common::not_impl_err!("no nodes")
    }

    fn try_encode(&self, _: &datafusion::logical_expr::Extension, _: &mut Vec<u8>) -> DfResult<()> {
        datafusion::common::not_impl_err!("no nodes")
    }

    fn try_decode_table_provider(
        &self,
        _: &[u8],
        _: &datafusion::common::TableReference,
        _: SchemaRef,
        _: &datafusion::execution::TaskContext,
    ) -> DfResult<Arc<dyn datafusion::catalog::TableProvider>> {
        datafusion::common::not_impl_err!("no tables")
    }

    fn try_encode_table_provider(
        &self,
        _: &datafusion::common::TableReference,
        _: Arc<dyn datafusion::catalog::TableProvider>,
        _: &mut Vec<u8>,
    ) -> DfResult<()> {
        datafusion::common::not_impl_err!("no tables")
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        scaled_of(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_scaled(node, buf);
        Ok(())
    }
}

impl PhysicalExtensionCodec for ScaledCodec {
    fn try_decode(
        &self,
        _: &[u8],
        _: &[Arc<dyn ExecutionPlan>],
        _: &datafusion::execution::TaskContext,
        _: &dyn datafusion_proto::physical_plan::PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        datafusion::common::not_impl_err!("no nodes")
    }

    fn try_encode(
        &self,
        _: Arc<dyn ExecutionPlan>,
        _: &mut Vec<u8>,
        _: &dyn datafusion_proto::physical_plan::PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        datafusion::common::not_impl_err!("no nodes")
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        scaled_of(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_scaled(node, buf);
        Ok(())
    }
}

#[test]
fn the_codecs_hand_the_rest_to_the_codec_they_wrap_and_built_ins_go_by_name() {
    hermetic();
    let rt = rt();
    let dir = TempDir::new("ballista-delegate");
    write_parquet(&dir.0, &data(3_000, 5), 2);
    let here = session(&rt, dir.path());
    register(&here);
    here.register_udf(Scaled::udf(-3));
    let there = session(&rt, dir.path());
    let logical = LogicalCodec::wrapping(Arc::new(ScaledCodec));
    let physical = PhysicalCodec::wrapping(Arc::new(ScaledCodec));
    let q = "SELECT k, sum(scaled(n)), sum(affine(x)), sum_sq(abs(x)), max(abs(n)) \
             FROM p GROUP BY k ORDER BY k";
    let df = rt.block_on(here.sql(q)).unwrap();
    let want = pretty(&rt.block_on(df.clone().collect()).unwrap());

    let plan = df.clone().into_optimized_plan().unwrap();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &logical).unwrap();
    let back =
        logical_plan_from_bytes_with_extension_codec(&bytes, &there.task_ctx(), &logical).unwrap();
    let got = rt
        .block_on(async { there.execute_logical_plan(back).await?.collect().await })
        .unwrap();
    assert_eq!(pretty(&got), want);

    let plan = rt.block_on(df.create_physical_plan()).unwrap();
    let bytes = physical_plan_to_bytes_with_extension_codec(plan, &physical).unwrap();
    let back = physical_plan_from_bytes_with_extension_codec(&bytes, &there.task_ctx(), &physical)
        .unwrap();
    let got = rt.block_on(collect(back, there.task_ctx())).unwrap();
    assert_eq!(pretty(&got), want);

    // A built-in function is written by name (nothing in its definition),
    // so the registry resolves it as without a codec.
    let abs = datafusion::functions::math::abs();
    let mut buf = Vec::new();
    LogicalExtensionCodec::try_encode_udf(&logical, &abs, &mut buf).unwrap();
    PhysicalExtensionCodec::try_encode_udf(&physical, &abs, &mut buf).unwrap();
    assert!(buf.is_empty(), "a built-in function wrote {buf:?}");
}

/// A computeq aggregate's part as its codec writes it.
fn sum_sq_part() -> Vec<u8> {
    let p = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum()).unwrap();
    let mut buf = Vec::new();
    PhysicalExtensionCodec::try_encode_udaf(
        &PhysicalCodec::new(),
        &aggregate_udf("sum_sq", p).unwrap(),
        &mut buf,
    )
    .unwrap();
    buf
}

fn decode(buf: &[u8]) -> DfResult<Arc<datafusion::logical_expr::AggregateUDF>> {
    PhysicalExtensionCodec::try_decode_udaf(&PhysicalCodec::new(), "sum_sq", buf)
}

fn error_of(buf: &[u8]) -> String {
    match decode(buf) {
        Ok(_) => panic!("{} read back", String::from_utf8_lossy(buf)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_and_foreign_parts_are_errors_that_say_what_is_wrong() {
    hermetic();
    let good = sum_sq_part();
    assert_eq!(decode(&good).unwrap().name(), "sum_sq");
    let text = String::from_utf8_lossy(&good[5..]).into_owned();
    let with = |from: &str, to: &str| {
        assert!(text.contains(from), "{from} in {text}");
        let header = text.replacen(from, to, 1);
        let mut buf = vec![good[0]];
        buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
        buf.extend_from_slice(header.as_bytes());
        buf
    };

    let e = error_of(&with(
        &format!("\"version\":{CODEC_VERSION}"),
        "\"version\":99",
    ));
    assert!(
        e.contains("version 99") && e.contains("same computeq"),
        "{e}"
    );
    let e = error_of(&with(
        "\"format\":\"computeq-ballista\"",
        "\"format\":\"other\"",
    ));
    assert!(e.contains("\"other\""), "{e}");
    // The pipeline inside, of another version.
    let inner = format!("\\\"version\\\":{}", computeq::query::WIRE_VERSION);
    let e = error_of(&with(&inner, "\\\"version\\\":7"));
    assert!(e.contains("version 7"), "{e}");
    let e = error_of(&with("\"kind\":\"aggregate\"", "\"kind\":\"scalar\""));
    assert!(e.contains("Scalar"), "{e}");
    let e = error_of(&with("\"name\":\"sum_sq\"", "\"name\":\"other\""));
    assert!(e.contains("\"other\""), "{e}");
    let e = error_of(&with("\"aggregate\"", "\"sideways\""));
    assert!(e.contains("does not read"), "{e}");

    let mut unknown = good.clone();
    unknown[0] = 0x42;
    let e = error_of(&unknown);
    assert!(e.contains("computeq's codecs"), "{e}");

    // Every truncation is an error; every single-byte change reads back
    // or is an error, never a panic.
    for len in 1..good.len() {
        let e = error_of(&good[..len]);
        assert!(e.contains("computeq"), "{len}: {e}");
    }
    for i in 0..good.len() {
        for b in [0u8, 1, b'"', b'{', b'9', 0xff] {
            let mut bad = good.clone();
            bad[i] = b;
            let _ = decode(&bad);
        }
    }
}

#[test]
fn a_malformed_node_in_a_physical_plan_is_an_error_on_decoding() {
    hermetic();
    let rt = rt();
    let dir = TempDir::new("ballista-node");
    write_parquet(&dir.0, &data(2_000, 5), 1);
    let here = session(&rt, dir.path());
    let plan = rt
        .block_on(async { node_frame(&here).await.create_physical_plan().await })
        .unwrap();
    let codec = PhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(plan, &codec).unwrap();
    let at = bytes
        .windows(b"\"kind\":\"node\"".len())
        .position(|w| w == b"\"kind\":\"node\"")
        .expect("the node's header in the plan");
    // Same length: the node's header now names a kind that does not exist.
    let mut bad = bytes.to_vec();
    bad[at..at + 13].copy_from_slice(b"\"kind\":\"nope\"");
    let e = physical_plan_from_bytes_with_extension_codec(&bad, &here.task_ctx(), &codec)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("computeq"), "{e}");
}

fn column<'a, T: 'static>(
    batches: &'a [RecordBatch],
    c: usize,
) -> impl Iterator<Item = &'a T> + 'a {
    batches.iter().map(move |b| {
        b.column(c)
            .as_any()
            .downcast_ref::<T>()
            .expect("the column's type")
    })
}

#[test]
fn a_cluster_of_two_executors_runs_a_grouped_aggregate_over_parquet() {
    hermetic();
    let rt = rt();
    let started = Instant::now();
    let dir = TempDir::new("ballista-cluster");
    let (rows, keys) = (60_000, 13);
    let d = data(rows, keys);
    write_parquet(&dir.0, &d, 6);
    let (batches, engines, udafs_survived) = rt.block_on(async {
        let cluster = LocalCluster::start(2, 2).await?;
        // The functions are registered in the client's session before it
        // becomes Ballista's: upgrading it keeps them.
        let local = SessionContext::new_with_state(session_state(session_config())?);
        let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum()).unwrap();
        local.register_udaf(aggregate_udf("sum_sq", sum_sq).unwrap());
        let isum = Pipeline::over::<i64>(|q| q.map(|n| n ^ (n >> 3)).sum()).unwrap();
        local.register_udaf(aggregate_udf("cq_isum", isum).unwrap());
        let var = Pipeline::over::<f64>(|q| q.variance()).unwrap();
        local.register_udaf(aggregate_udf("cq_var", var).unwrap());
        let ctx = cluster.connect(local.state())?;
        let survived = ["sum_sq", "cq_isum", "cq_var"]
            .iter()
            .all(|f| ctx.udaf(f).is_ok());
        ctx.register_parquet("p", dir.path(), ParquetReadOptions::default())
            .await?;
        let batches = tokio::time::timeout(
            Duration::from_secs(120),
            ctx.sql("SELECT k, sum_sq(x), cq_isum(n), cq_var(x), count(*) FROM p GROUP BY k ORDER BY k")
                .await?
                .collect(),
        )
        .await
        .expect("the query finished within two minutes")?;
        Ok::<_, datafusion::error::DataFusionError>((
            batches,
            cluster.executor_engines().to_vec(),
            survived,
        ))
    })
    .unwrap();
    assert!(udafs_survived, "upgrade_for_ballista dropped the functions");

    let (k, x, n) = &d;
    let groups = local_groups(k, x);
    let keys_got: Vec<i64> = column::<Int64Array>(&batches, 0)
        .flat_map(|a| a.values().to_vec())
        .collect();
    assert_eq!(keys_got, groups.keys().copied().collect::<Vec<_>>());
    let sq: Vec<f64> = column::<Float64Array>(&batches, 1)
        .flat_map(|a| a.values().to_vec())
        .collect();
    let isum: Vec<i64> = column::<Int64Array>(&batches, 2)
        .flat_map(|a| a.values().to_vec())
        .collect();
    let var: Vec<f64> = column::<Float64Array>(&batches, 3)
        .flat_map(|a| a.values().to_vec())
        .collect();
    for (i, (key, xs)) in groups.iter().enumerate() {
        let want: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
        assert!(
            (sq[i] - want).abs() <= 1e-9 * want.abs().max(1.0),
            "group {key}: {} vs {want}",
            sq[i]
        );
        let want = xs.compute().variance().expect("a group of several rows");
        assert!(
            (var[i] - want).abs() <= 1e-9 * want.abs().max(1.0),
            "group {key}: {} vs {want}",
            var[i]
        );
        let ns: Vec<i64> = k
            .iter()
            .zip(n)
            .filter(|(kk, _)| *kk == key)
            .map(|(_, &n)| n)
            .collect();
        let want: i64 = ns.compute().map(|n| n ^ (n >> 3)).sum();
        assert_eq!(isum[i], want, "group {key}");
    }

    // Both executors computed: each decoded the functions of its tasks
    // onto its own engine, whose run log holds its runs; together they
    // read every row once per function (the partial aggregation).
    let runs: Vec<Vec<computeq::ExecutionMetrics>> =
        engines.iter().map(|e| e.run_log().snapshot()).collect();
    for (i, r) in runs.iter().enumerate() {
        assert!(!r.is_empty(), "executor {i} ran no computeq query");
    }
    let rows_read: u64 = runs.iter().flatten().map(|m| m.elements_in).sum();
    assert_eq!(
        rows_read,
        3 * rows as u64,
        "rows read by the executors' runs"
    );
    println!(
        "cluster test: {:.2} s; runs per executor {:?}",
        started.elapsed().as_secs_f64(),
        runs.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

#[test]
fn the_plan_node_and_a_scalar_function_run_on_the_cluster() {
    hermetic();
    let rt = rt();
    let dir = TempDir::new("ballista-cluster-node");
    let d = data(20_000, 7);
    write_parquet(&dir.0, &d, 4);
    let (got, scalar) = rt
        .block_on(async {
            let cluster = LocalCluster::start(2, 2).await?;
            let ctx = cluster.connect(session_state(session_config())?)?;
            let affine =
                Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>()).unwrap();
            ctx.register_udf(scalar_udf("affine", affine).unwrap());
            ctx.register_parquet("p", dir.path(), ParquetReadOptions::default())
                .await?;
            let got = node_frame(&ctx).await.collect().await?;
            let scalar = ctx
                .sql("SELECT sum(affine(x)) FROM p")
                .await?
                .collect()
                .await?;
            Ok::<_, datafusion::error::DataFusionError>((got, scalar))
        })
        .unwrap();
    let (_, x, n) = &d;
    let mut got: Vec<f64> = column::<Float64Array>(&got, 0)
        .flat_map(|a| a.values().to_vec())
        .collect();
    let mut want: Vec<f64> = x
        .iter()
        .zip(n)
        .filter_map(|(x, n)| x.filter(|&x| x > 0.5).map(|x| x * 2.0 + (n & 7) as f64))
        .collect();
    got.sort_by(f64::total_cmp);
    want.sort_by(f64::total_cmp);
    assert_eq!(got, want);
    let s = column::<Float64Array>(&scalar, 0).next().unwrap().value(0);
    let want: f64 = x.iter().flatten().map(|x| x * 2.0 + 1.0).sum();
    assert!((s - want).abs() <= 1e-9 * want.abs(), "{s} vs {want}");
}
