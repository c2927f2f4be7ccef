//! computeq pipelines as DataFusion functions: SQL and DataFrame queries
//! over in-memory tables and Parquet files with several partitions, with
//! and without GROUP BY, equal to computeq run locally on the same data
//! (exact for integers; floats within the summation-order tolerance).

use computeq::datafusion::{aggregate_udf, scalar_udf};
use computeq::prelude::*;
use computeq::query::Pipeline;
use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StructArray, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::{col, ParquetReadOptions, SessionConfig, SessionContext};
use std::collections::BTreeMap;
use std::sync::Arc;

#[path = "support/table.rs"]
mod table;
use table::{batch, data, local_groups, rt, schema, Data};

/// The rows as record batches of `batch` rows, dealt over `partitions`.
fn partitions(d: &Data, rows: usize, partitions: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![Vec::new(); partitions];
    let len = d.0.len();
    for (i, start) in (0..len).step_by(rows).enumerate() {
        let end = (start + rows).min(len);
        out[i % partitions].push(batch(d, start..end));
    }
    out
}

fn context(rows: usize, keys: i64) -> (SessionContext, Data) {
    let d = data(rows, keys);
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3));
    let table = MemTable::try_new(schema(), partitions(&d, 1000, 3)).expect("a table");
    ctx.register_table("t", Arc::new(table))
        .expect("registered");
    register(&ctx);
    (ctx, d)
}

fn register(ctx: &SessionContext) {
    let sum_affine = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).sum()).unwrap();
    ctx.register_udaf(aggregate_udf("sum_affine", sum_affine).unwrap());
    let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum()).unwrap();
    ctx.register_udaf(aggregate_udf("sum_sq", sum_sq).unwrap());
    let var = Pipeline::over::<f64>(|q| q.variance()).unwrap();
    ctx.register_udaf(aggregate_udf("cq_var", var).unwrap());
    let wsum = Pipeline::over::<i64>(|q| q.map(|n| n ^ (n >> 3)).sum()).unwrap();
    ctx.register_udaf(aggregate_udf("cq_isum", wsum).unwrap());
    let trio =
        Pipeline::over::<(f64, i64)>(|q| q.aggregate(|(x, k), a| (a.count(), a.max(x), a.mean(k))))
            .unwrap();
    ctx.register_udaf(aggregate_udf("cq_trio", trio).unwrap());
    let affine = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>()).unwrap();
    ctx.register_udf(scalar_udf("affine", affine).unwrap());
}

fn sql(ctx: &SessionContext, q: &str) -> Vec<RecordBatch> {
    rt().block_on(async { ctx.sql(q).await?.collect().await })
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn f64s(batches: &[RecordBatch], c: usize) -> Vec<Option<f64>> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column(c).as_any().downcast_ref::<Float64Array>().unwrap();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i)))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn i64s(batches: &[RecordBatch], c: usize) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column(c).as_any().downcast_ref::<Int64Array>().unwrap();
            a.values().to_vec()
        })
        .collect()
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale.max(1.0)
}

/// Makes the process-wide engine (`.compute()`'s and the functions') one
/// without a cache directory before a test's first query: the tests must
/// neither read nor write the cache of the environment they run in.
fn hermetic() {
    let _ = computeq::set_engine(computeq::Engine::default());
}

#[test]
fn whole_table_aggregates_equal_the_local_run() {
    hermetic();
    let (ctx, (_, x, n)) = context(20_000, 13);
    let got = sql(
        &ctx,
        "SELECT sum_affine(x), sum_sq(x), cq_var(x), cq_isum(n) FROM t",
    );
    let xs: Vec<f64> = x.iter().flatten().copied().collect();
    let scale = xs.iter().map(|v| v.abs()).sum::<f64>() * 3.0;
    let affine: f64 = xs.compute().map(|x| x * 2.0 + 1.0).sum();
    let sq: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
    let var = xs.compute().variance().unwrap();
    let isum: i64 = n.compute().map(|n| n ^ (n >> 3)).sum();
    let a = f64s(&got, 0)[0].unwrap();
    let s = f64s(&got, 1)[0].unwrap();
    let v = f64s(&got, 2)[0].unwrap();
    assert!(close(a, affine, scale), "{a} vs {affine}");
    assert!(close(s, sq, scale * 3.0), "{s} vs {sq}");
    assert!((v - var).abs() <= 1e-12 * var, "{v} vs {var}");
    assert_eq!(i64s(&got, 3), [isum], "integer sums are exact (and wrap)");
}

#[test]
fn grouped_aggregates_equal_the_local_run_per_group() {
    hermetic();
    let (ctx, (k, x, _)) = context(30_000, 17);
    let got = sql(
        &ctx,
        "SELECT k, sum_sq(x), cq_var(x), sum(affine(x)) FROM t GROUP BY k ORDER BY k",
    );
    let groups = local_groups(&k, &x);
    let keys = i64s(&got, 0);
    assert_eq!(keys, groups.keys().copied().collect::<Vec<_>>());
    let (sq, var, aff) = (f64s(&got, 1), f64s(&got, 2), f64s(&got, 3));
    for (i, xs) in groups.values().enumerate() {
        let scale = xs.iter().map(|v| v * v).sum::<f64>() + 1.0;
        let want: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
        assert!(close(sq[i].unwrap(), want, scale), "group {i}");
        let want = xs.compute().variance().unwrap();
        assert!((var[i].unwrap() - want).abs() <= 1e-12 * want, "group {i}");
        let want: f64 = xs.compute().map(|x| x * 2.0 + 1.0).sum();
        assert!(close(aff[i].unwrap(), want, scale * 4.0), "group {i}");
    }
}

#[test]
fn the_dataframe_api_takes_the_functions_too() {
    hermetic();
    let (ctx, (k, x, _)) = context(5_000, 4);
    let udaf = ctx.udaf("sum_sq").unwrap();
    let udf = ctx.udf("affine").unwrap();
    let got = rt()
        .block_on(async {
            ctx.table("t")
                .await?
                .filter(col("k").lt(datafusion::prelude::lit(2i64)))?
                .aggregate(
                    vec![col("k")],
                    vec![udaf.call(vec![udf.call(vec![col("x")])]).alias("s")],
                )?
                .sort(vec![col("k").sort(true, false)])?
                .collect()
                .await
        })
        .unwrap();
    let groups = local_groups(&k, &x);
    let s = f64s(&got, 1);
    for (i, key) in [0i64, 1].iter().enumerate() {
        let xs = &groups[key];
        let want: f64 = xs
            .compute()
            .map(|x| x * 2.0 + 1.0)
            .filter(|y| y.gt(0.5))
            .map(|y| y * y)
            .sum();
        assert!(
            close(s[i].unwrap(), want, want.abs()),
            "{:?} vs {want}",
            s[i]
        );
    }
}

#[test]
fn a_scalar_function_keeps_nulls_where_its_input_is_null() {
    hermetic();
    let (ctx, (_, x, _)) = context(2_500, 3);
    let got = sql(&ctx, "SELECT affine(x) FROM t");
    let mut want: Vec<Option<f64>> = x.iter().map(|v| v.map(|x| x * 2.0 + 1.0)).collect();
    let mut got = f64s(&got, 0);
    let key = |v: &Option<f64>| v.map(f64::to_bits);
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, want);
}

#[test]
fn several_values_come_back_as_a_struct() {
    hermetic();
    let (ctx, (k, x, _)) = context(4_000, 5);
    // One pass of aggregates reads one validity: over the rows where x
    // is not null (all of them then), every aggregate sees every row.
    let got = sql(&ctx, "SELECT cq_trio(x, k) FROM t WHERE x IS NOT NULL");
    let s = got[0]
        .column(0)
        .as_any()
        .downcast_ref::<StructArray>()
        .expect("a struct");
    let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["c0", "c1", "c2"]);
    let count = s.column(0).as_any().downcast_ref::<UInt64Array>().unwrap();
    let max = s.column(1).as_any().downcast_ref::<Float64Array>().unwrap();
    let mean = s.column(2).as_any().downcast_ref::<Float64Array>().unwrap();
    let rows: Vec<(f64, i64)> = x
        .iter()
        .zip(&k)
        .filter_map(|(x, &k)| x.map(|x| (x, k)))
        .collect();
    let (xs, ks): (Vec<f64>, Vec<i64>) = rows.into_iter().unzip();
    assert_eq!(count.value(0), xs.len() as u64);
    assert_eq!(max.value(0), xs.compute().max().unwrap());
    let m = ks.compute().mean().unwrap();
    assert!((mean.value(0) - m).abs() <= 1e-12 * m.abs().max(1.0));
}

#[test]
fn arguments_are_cast_to_the_pipeline_types() {
    hermetic();
    let ctx = SessionContext::new();
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("i", DataType::Int32, false)])),
        vec![Arc::new(Int32Array::from(vec![1, 2, 3, 4]))],
    )
    .unwrap();
    ctx.register_batch("small", b).unwrap();
    register(&ctx);
    let got = sql(&ctx, "SELECT sum_affine(i) FROM small");
    assert_eq!(f64s(&got, 0), [Some(24.0)]);
}

#[test]
fn parquet_files_with_several_row_groups_and_files() {
    hermetic();
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    let dir = std::env::temp_dir().join(format!("computeq-df-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = data(12_000, 9);
    for (f, part) in partitions(&d, 1500, 3).into_iter().enumerate() {
        let file = std::fs::File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(700))
            .build();
        let mut w = ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
        for b in &part {
            w.write(b).unwrap();
        }
        w.close().unwrap();
    }
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3));
    register(&ctx);
    rt().block_on(async {
        ctx.register_parquet("p", dir.to_str().unwrap(), ParquetReadOptions::default())
            .await
    })
    .unwrap();
    let got = sql(
        &ctx,
        "SELECT k, sum_sq(x), cq_isum(n) FROM p GROUP BY k ORDER BY k",
    );
    std::fs::remove_dir_all(&dir).ok();
    let (k, x, n) = d;
    let groups = local_groups(&k, &x);
    let sq = f64s(&got, 1);
    let isum = i64s(&got, 2);
    for (i, (key, xs)) in groups.iter().enumerate() {
        let want: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
        assert!(close(sq[i].unwrap(), want, want.abs()), "group {key}");
        let ns: Vec<i64> = k
            .iter()
            .zip(&n)
            .filter(|(kk, _)| *kk == key)
            .map(|(_, &n)| n)
            .collect();
        let want: i64 = ns.compute().map(|n| n ^ (n >> 3)).sum();
        assert_eq!(isum[i], want, "group {key}");
    }
}

#[test]
fn what_cannot_be_a_function_is_refused_with_the_reason() {
    hermetic();
    let e = Pipeline::over::<f64>(|q| q.take(10).sum()).unwrap_err();
    assert!(e.to_string().contains("take()"), "{e}");
    let e = Pipeline::over::<f64>(|q| q.argmax()).unwrap_err();
    assert!(e.to_string().contains("argmax"), "{e}");
    let e = Pipeline::over::<f64>(|q| q.sort().collect::<Vec<_>>()).unwrap_err();
    assert!(e.to_string().contains("sort"), "{e}");
    let e = Pipeline::over::<i64>(|q| q.reduce(1, |a, b| a * b)).unwrap_err();
    assert!(e.to_string().contains("commutative"), "{e}");
    let e = Pipeline::over::<i64>(|q| q.group_by(|x| x).count()).unwrap_err();
    assert!(e.to_string().contains("GROUP BY"), "{e}");

    let sum = Pipeline::over::<f64>(|q| q.sum()).unwrap();
    let e = scalar_udf("s", sum).unwrap_err();
    assert!(e.to_string().contains("aggregate_udf"), "{e}");
    let filtered = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.0)).collect::<Vec<_>>()).unwrap();
    let e = scalar_udf("f", filtered).unwrap_err();
    assert!(e.to_string().contains("filters rows"), "{e}");
    let col = Pipeline::over::<f64>(|q| q.collect::<Vec<_>>()).unwrap();
    let e = aggregate_udf("c", col).unwrap_err();
    assert!(e.to_string().contains("scalar_udf"), "{e}");
}

/// The rows of the struct in the last column of `got`, each field as an
/// `f64` (a count converted; `None` where null).
fn struct_rows(got: &[RecordBatch]) -> Vec<Vec<Option<f64>>> {
    let mut rows = Vec::new();
    for batch in got {
        let s = batch
            .column(batch.num_columns() - 1)
            .as_any()
            .downcast_ref::<StructArray>()
            .expect("a struct");
        for r in 0..batch.num_rows() {
            let field = |c: &ArrayRef| {
                let any = c.as_any();
                (!c.is_null(r)).then(|| match any.downcast_ref::<Float64Array>() {
                    Some(f) => f.value(r),
                    None => any
                        .downcast_ref::<UInt64Array>()
                        .expect("f64 or u64")
                        .value(r) as f64,
                })
            };
            rows.push(s.columns().iter().map(field).collect());
        }
    }
    rows
}

#[test]
fn an_aggregate_over_different_nulls_skips_each_its_own_or_is_an_error() {
    hermetic();
    let ctx = SessionContext::new();
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("a", DataType::Float64, true),
            Field::new("b", DataType::Float64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![1, 1, 1, 2, 2, 3])),
            Arc::new(Float64Array::from(vec![
                Some(1.0),
                None,
                Some(3.0),
                None,
                Some(5.0),
                None,
            ])),
            Arc::new(Float64Array::from(vec![
                None,
                Some(2.0),
                Some(3.0),
                Some(4.0),
                None,
                None,
            ])),
        ],
    )
    .unwrap();
    ctx.register_batch("ab", b).unwrap();
    // Sums and counts skip each the nulls of what they read, as SQL's
    // `SUM(a), SUM(b), SUM(a * b), COUNT(*)` over non-null pairs would.
    let four = Pipeline::over::<(f64, f64)>(|q| {
        q.aggregate(|(a, b), g| (g.sum(a), g.sum(b), g.sum(a * b), g.count()))
    })
    .unwrap();
    ctx.register_udaf(aggregate_udf("four", four).unwrap());
    let got = sql(&ctx, "SELECT four(a, b) FROM ab");
    assert_eq!(
        struct_rows(&got),
        [[Some(9.0), Some(9.0), Some(9.0), Some(1.0)]]
    );
    let got = sql(&ctx, "SELECT k, four(a, b) FROM ab GROUP BY k ORDER BY k");
    let some = |r: [f64; 4]| r.map(Some);
    assert_eq!(
        struct_rows(&got),
        [
            some([4.0, 5.0, 9.0, 1.0]),
            some([5.0, 4.0, 0.0, 0.0]),
            some([0.0, 0.0, 0.0, 0.0])
        ]
    );
    // A max and a mean go each with the count of its own column's rows.
    let two =
        Pipeline::over::<(f64, f64)>(|q| q.aggregate(|(a, b), g| (g.max(a), g.mean(b)))).unwrap();
    ctx.register_udaf(aggregate_udf("two", two).unwrap());
    let got = sql(&ctx, "SELECT two(a, b) FROM ab");
    assert_eq!(struct_rows(&got), [[Some(5.0), Some(3.0)]]);
    let got = sql(&ctx, "SELECT k, two(a, b) FROM ab GROUP BY k ORDER BY k");
    assert_eq!(
        struct_rows(&got),
        [[Some(3.0), Some(2.5)], [Some(5.0), Some(4.0)], [None, None]]
    );
    // A variance cannot skip a row by reading its identity: refused over
    // columns with different nulls, with the reason.
    let spread =
        Pipeline::over::<(f64, f64)>(|q| q.aggregate(|(a, b), g| (g.variance(a), g.sum(b))))
            .unwrap();
    ctx.register_udaf(aggregate_udf("spread", spread).unwrap());
    let r = rt().block_on(async {
        ctx.sql("SELECT spread(a, b) FROM ab")
            .await?
            .collect()
            .await
    });
    let e = r.expect_err("a variance and a sum over different validities in one pass");
    assert!(e.to_string().contains("different nulls"), "{e}");
}

/// A session that plans pipeline nodes, over the table of `context`.
fn node_context(rows: usize) -> (SessionContext, Data) {
    use datafusion::execution::session_state::SessionStateBuilder;
    let d = data(rows, 5);
    let state = computeq::datafusion::with_pipelines(
        SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(3))
            .with_default_features(),
    )
    .build();
    let ctx = SessionContext::new_with_state(state);
    let table = MemTable::try_new(schema(), partitions(&d, 1000, 3)).expect("a table");
    ctx.register_table("t", Arc::new(table))
        .expect("registered");
    (ctx, d)
}

#[test]
fn a_plan_node_runs_a_filtering_pipeline_over_gathered_batches() {
    hermetic();
    use datafusion::physical_plan::collect;
    let (ctx, (_, x, n)) = node_context(10_000);
    let p = Pipeline::over::<(f64, i64)>(|q| {
        q.filter(|(x, _)| x.gt(0.5))
            .map(|(x, n)| x * 2.0 + (n & 7).cast::<f64>())
            .collect::<Vec<_>>()
    })
    .unwrap();
    let rt = rt();
    let (batches, plan) = rt
        .block_on(async {
            let df = ctx.table("t").await?;
            let df = computeq::datafusion::apply_with(
                df,
                computeq::datafusion::function("scored", p),
                vec![col("x"), col("n")],
                2_500,
            )?;
            let plan = df.create_physical_plan().await?;
            let out = collect(plan.clone(), ctx.task_ctx()).await?;
            Ok::<_, datafusion::error::DataFusionError>((out, plan))
        })
        .unwrap();
    assert_eq!(batches[0].schema().field(0).name(), "scored");
    let mut got = f64s(&batches, 0)
        .into_iter()
        .map(|v| v.expect("rows whose x is null were filtered out"))
        .collect::<Vec<_>>();
    let mut want: Vec<f64> = x
        .iter()
        .zip(&n)
        .filter_map(|(x, n)| x.filter(|&x| x > 0.5).map(|x| x * 2.0 + (n & 7) as f64))
        .collect();
    got.sort_by(f64::total_cmp);
    want.sort_by(f64::total_cmp);
    assert_eq!(got, want);
    // 10 batches of 1000 dealt over 3 partitions (4, 3 and 3 batches),
    // gathered into runs of at least 2500 rows: 3000 + 1000, 3000, 3000.
    let metrics = find_pipeline(&plan).metrics().expect("metrics");
    let runs: usize = metrics
        .iter()
        .filter(|m| m.value().name().starts_with("computeq_runs_"))
        .map(|m| m.value().as_usize())
        .sum();
    assert_eq!(runs, 4);
    assert_eq!(metrics.output_rows(), Some(want.len()));
}

fn find_pipeline(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Arc<dyn datafusion::physical_plan::ExecutionPlan> {
    if plan.name() == "ComputeqPipelineExec" {
        return plan.clone();
    }
    plan.children()
        .into_iter()
        .find_map(|c| {
            let f = find_pipeline(c);
            (f.name() == "ComputeqPipelineExec").then_some(f)
        })
        .unwrap_or_else(|| plan.clone())
}

#[test]
fn explain_analyze_shows_the_node_and_its_runs() {
    hermetic();
    let (ctx, _) = node_context(3_000);
    let p = Pipeline::over::<f64>(|q| q.map(|x| x.abs().sqrt()).collect::<Vec<_>>()).unwrap();
    let text = rt()
        .block_on(async {
            let df = ctx.table("t").await?;
            let df = computeq::datafusion::apply(df, "root", p, vec![col("x")])?;
            let out = df.explain(false, true)?.collect().await?;
            Ok::<_, datafusion::error::DataFusionError>(
                datafusion::arrow::util::pretty::pretty_format_batches(&out)?.to_string(),
            )
        })
        .unwrap();
    assert!(
        text.contains("ComputeqPipelineExec: root = pipeline(f64): map -> collect"),
        "{text}"
    );
    assert!(text.contains("computeq_runs_cpu_"), "{text}");
    assert!(text.contains("cpu-parallel off"), "{text}");
}

#[test]
fn a_plan_node_keeps_nulls_and_refuses_aggregates() {
    hermetic();
    let (ctx, (_, x, _)) = node_context(2_000);
    let p = Pipeline::over::<f64>(|q| q.map(|x| x - 1.0).collect::<Vec<_>>()).unwrap();
    let out = rt()
        .block_on(async {
            let df = ctx.table("t").await?;
            computeq::datafusion::apply(df, "shifted", p, vec![col("x")])?
                .collect()
                .await
        })
        .unwrap();
    let mut got = f64s(&out, 0);
    let mut want: Vec<Option<f64>> = x.iter().map(|v| v.map(|x| x - 1.0)).collect();
    let key = |v: &Option<f64>| v.map(f64::to_bits);
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want);

    let sum = Pipeline::over::<f64>(|q| q.sum()).unwrap();
    let e = rt()
        .block_on(async {
            let df = ctx.table("t").await?;
            computeq::datafusion::apply(df, "s", sum, vec![col("x")]).map(|_| ())
        })
        .unwrap_err();
    assert!(e.to_string().contains("aggregate function"), "{e}");
}

/// A pipeline read back from its serialized form (what an executor of a
/// distributed engine runs) gives the answer of the one that was written.
#[test]
fn a_pipeline_read_back_from_bytes_runs_the_same() {
    hermetic();
    let (ctx, (k, x, _)) = context(6_000, 7);
    let p = Pipeline::over::<(f64, i64)>(|q| {
        q.filter(|(x, _)| x.gt(-0.5))
            .aggregate(|(x, k), a| (a.variance(x), a.sum(x * k.cast::<f64>()), a.count()))
    })
    .unwrap();
    let back = Pipeline::from_bytes(&p.to_bytes()).unwrap();
    ctx.register_udaf(aggregate_udf("written", p).unwrap());
    ctx.register_udaf(aggregate_udf("read_back", back).unwrap());
    let got = sql(
        &ctx,
        "SELECT written(x, k) AS a, read_back(x, k) AS b FROM t GROUP BY k % 3 ORDER BY k % 3",
    );
    for b in &got {
        assert_eq!(b.column(0), b.column(1), "identical structs");
    }
    assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let _ = (k, x);
}

/// Single-byte changes of serialized pipelines that still read back run
/// inside DataFusion to an answer or an error, never a panic.
#[test]
fn altered_documents_that_read_back_run_without_panicking() {
    hermetic();
    let ctx = SessionContext::new();
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("x", DataType::Float64, true),
            Field::new("n", DataType::Int64, false),
        ])),
        vec![
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                None,
                Some(-3.0),
                Some(0.25),
            ])),
            Arc::new(Int64Array::from(vec![3, -1, 7, 0])),
        ],
    )
    .unwrap();
    ctx.register_batch("s", b).unwrap();
    let docs = [
        Pipeline::over::<(f64, i64)>(|q| {
            q.filter(|(x, _)| x.gt(0.0))
                .aggregate(|(x, n), a| (a.mean(x), a.max(n)))
        })
        .unwrap(),
        Pipeline::over::<(f64, i64)>(|q| {
            q.map(|(x, n)| x * n.cast::<f64>() - 1.0)
                .collect::<Vec<_>>()
        })
        .unwrap(),
    ];
    let rt = rt();
    let mut ran = 0;
    for p in docs {
        let bytes = p.to_bytes();
        for i in 0..bytes.len() {
            for c in [b'0', b'1', b'7'] {
                let mut m = bytes.clone();
                m[i] = c;
                let Ok(q) = Pipeline::from_bytes(&m) else {
                    continue;
                };
                if q.input_types() != p.input_types() {
                    continue;
                }
                let query = if q.is_aggregate() {
                    let Ok(f) = aggregate_udf("f", q) else {
                        continue;
                    };
                    ctx.register_udaf(f);
                    "SELECT f(x, n) FROM s"
                } else {
                    let Ok(f) = scalar_udf("f", q) else { continue };
                    ctx.register_udf(f);
                    "SELECT f(x, n) FROM s"
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rt.block_on(async { ctx.sql(query).await?.collect().await })
                }));
                // A panic in one of DataFusion's tasks comes back as an
                // error that says so.
                match r {
                    Ok(Err(e)) => assert!(!e.to_string().contains("panic"), "byte {i}: {e}"),
                    Ok(Ok(_)) => {}
                    Err(_) => panic!("byte {i} set to {:?} panicked", c as char),
                }
                ran += 1;
            }
        }
    }
    assert!(ran > 10, "only {ran} altered documents read back");
}

/// Many groups, an aggregate FILTER clause, and DataFusion skipping its
/// partial aggregation (each row turned into a state of its own): the
/// grouped path (`GroupsAccumulator`) equals the local run per group.
#[test]
fn many_groups_a_filter_clause_and_skipped_partial_aggregation() {
    hermetic();
    let d = data(40_000, 4_001);
    let config = SessionConfig::new()
        .with_target_partitions(3)
        .set_usize(
            "datafusion.execution.skip_partial_aggregation_probe_rows_threshold",
            100,
        )
        .set_str(
            "datafusion.execution.skip_partial_aggregation_probe_ratio_threshold",
            "0.01",
        );
    let ctx = SessionContext::new_with_config(config);
    let table = MemTable::try_new(schema(), partitions(&d, 1000, 3)).expect("a table");
    ctx.register_table("t", Arc::new(table))
        .expect("registered");
    register(&ctx);
    let q = "SELECT k, sum_sq(x) FILTER (WHERE n > 0) AS f, cq_var(x) AS v FROM t GROUP BY k ORDER BY k";
    let got = sql(&ctx, q);
    let plan = datafusion::arrow::util::pretty::pretty_format_batches(&sql(
        &ctx,
        &format!("EXPLAIN ANALYZE {q}"),
    ))
    .unwrap()
    .to_string();
    let skipped = plan
        .split("skipped_aggregation_rows=")
        .nth(1)
        .and_then(|t| t.split([',', ']', ' ']).next())
        .unwrap_or("0");
    assert_ne!(
        skipped, "0",
        "the partial aggregation was not skipped:\n{plan}"
    );
    let (k, x, n) = d;
    let keys = i64s(&got, 0);
    assert_eq!(keys.len(), 4_001);
    let (f, v) = (f64s(&got, 1), f64s(&got, 2));
    let mut filtered: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for ((&k, x), &n) in k.iter().zip(&x).zip(&n) {
        let e = filtered.entry(k).or_default();
        if let (Some(x), true) = (x, n > 0) {
            e.push(*x);
        }
    }
    let all = local_groups(&k, &x);
    for (i, key) in keys.iter().enumerate() {
        let xs = &filtered[key];
        let want: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
        assert!(
            close(f[i].unwrap(), want, want.abs()),
            "group {key}: {:?} vs {want}",
            f[i]
        );
        let want = all[key].compute().variance();
        match (v[i], want) {
            (Some(a), Some(b)) => {
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "group {key}")
            }
            (a, b) => assert_eq!(a, b, "group {key}: fewer than two values"),
        }
    }
}

/// The sum of metric `metric` over the plan's operators named `operator`.
fn metric_of(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    operator: &str,
    metric: &str,
) -> std::time::Duration {
    let own = if plan.name() == operator {
        plan.metrics()
            .and_then(|m| m.sum_by_name(metric))
            .map_or(0, |v| v.as_usize())
    } else {
        0
    };
    plan.children()
        .into_iter()
        .map(|c| metric_of(c, operator, metric))
        .sum::<std::time::Duration>()
        + std::time::Duration::from_nanos(own as u64)
}

#[test]
fn the_functions_time_is_in_datafusions_metrics_and_runs_in_the_run_log() {
    hermetic();
    use computeq::datafusion::function;
    use datafusion::physical_plan::collect;
    let (ctx, _) = context(30_000, 5);
    let engine = Arc::new(computeq::Engine::default());
    let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum()).unwrap();
    ctx.register_udaf(
        function("own_sum_sq", sum_sq)
            .engine(engine.clone())
            .aggregate()
            .unwrap(),
    );
    let affine = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>()).unwrap();
    ctx.register_udf(
        function("own_affine", affine)
            .engine(engine.clone())
            .scalar()
            .unwrap(),
    );
    // DataFusion 55 times a grouped aggregate's accumulators
    // (`aggregation_time`) and each projected expression
    // (`expr_<i>_eval_time`): a computeq function's runs are inside them.
    for (q, operator, metric) in [
        (
            "SELECT k, own_sum_sq(x) FROM t GROUP BY k",
            "AggregateExec",
            "aggregation_time",
        ),
        (
            "SELECT own_affine(x) FROM t",
            "ProjectionExec",
            "expr_0_eval_time",
        ),
    ] {
        engine.run_log().clear();
        let (plan, runs, text) = rt()
            .block_on(async {
                let df = ctx.sql(q).await?;
                let plan = df.clone().create_physical_plan().await?;
                collect(plan.clone(), ctx.task_ctx()).await?;
                let runs = engine.run_log().snapshot();
                // EXPLAIN ANALYZE runs the query once more.
                let explained = df.explain(false, true)?.collect().await?;
                let text = datafusion::arrow::util::pretty::pretty_format_batches(&explained)?;
                Ok::<_, datafusion::error::DataFusionError>((plan, runs, text.to_string()))
            })
            .unwrap();
        assert!(text.contains(&format!("{metric}=")), "{q}: {text}");
        assert_eq!(
            runs.iter().map(|m| m.elements_in).sum::<u64>(),
            30_000,
            "{q}: the run log holds every batch's run"
        );
        let computeq: std::time::Duration = runs.iter().map(|m| m.phases.total).sum();
        let datafusion = metric_of(&plan, operator, metric);
        assert!(
            datafusion.as_secs_f64() >= 0.8 * computeq.as_secs_f64() && !computeq.is_zero(),
            "{q}: {operator} {metric} {datafusion:?}, computeq's runs {computeq:?}"
        );
    }
}

/// Nine batches of 100 rows of one nullable `f64` column `x` in one
/// partition, the fifth and the seventh with nulls; and the column's rows.
fn mixed_null_batches() -> (SessionContext, Vec<Option<f64>>) {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
    let mut all = Vec::new();
    let batches: Vec<RecordBatch> = (0..9)
        .map(|b| {
            let xs: Vec<Option<f64>> = (0..100)
                .map(|i| {
                    let v = ((b * 100 + i) as f64 * 0.61).cos() * 4.0;
                    ((b != 4 && b != 6) || i % 5 != 2).then_some(v)
                })
                .collect();
            all.extend(xs.iter().copied());
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(Float64Array::from(xs)) as Arc<dyn Array>],
            )
            .unwrap()
        })
        .collect();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(schema, vec![batches]).unwrap()),
    )
    .unwrap();
    (ctx, all)
}

/// An engine whose plan cache keeps nothing: every plan looked up is built.
fn engine_without_plan_cache() -> Arc<computeq::Engine> {
    Arc::new(computeq::Engine::with_config(computeq::Config {
        plan_cache_capacity: 0,
        ..computeq::Config::default()
    }))
}

/// A function runs its batches without nulls through the plan its first
/// such batch resolved (no replay, no plan cache): with a plan cache that
/// keeps nothing, only that batch and the batches with nulls (which replay
/// the trace) build a plan, and the sum is the same as a local run.
#[test]
fn an_accumulator_plans_its_batches_without_nulls_once() {
    hermetic();
    let engine = engine_without_plan_cache();
    let (ctx, rows) = mixed_null_batches();
    let all: Vec<f64> = rows.iter().flatten().copied().collect();
    let p = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).sum()).unwrap();
    ctx.register_udaf(
        computeq::datafusion::function("bound_affine", p)
            .engine(engine.clone())
            .aggregate()
            .unwrap(),
    );
    let got = f64s(&sql(&ctx, "SELECT bound_affine(x) FROM t"), 0)[0].unwrap();
    let want: f64 = all.compute().map(|x| x * 2.0 + 1.0).sum();
    let scale = all.iter().map(|v| v.abs()).sum::<f64>() * 3.0;
    assert!(close(got, want, scale), "{got} vs {want}");
    let runs = engine.run_log().snapshot();
    assert_eq!(runs.len(), 9, "one run per batch");
    assert_eq!(
        runs.iter().map(|m| m.elements_in).sum::<u64>(),
        900,
        "every batch's rows were read"
    );
    let built = runs.iter().filter(|m| !m.plan_cache_hit).count();
    assert_eq!(
        built, 3,
        "plans built: the first batch without nulls and the two with them"
    );
}

/// The same for a scalar function: its values (nulls where `x` is null)
/// are the rows' own, and only the first batch without nulls and the two
/// with nulls build a plan.
#[test]
fn a_scalar_function_plans_its_batches_without_nulls_once() {
    hermetic();
    let engine = engine_without_plan_cache();
    let (ctx, rows) = mixed_null_batches();
    let p = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).collect::<Vec<_>>()).unwrap();
    ctx.register_udf(
        computeq::datafusion::function("bound_affine_rows", p)
            .engine(engine.clone())
            .scalar()
            .unwrap(),
    );
    let got = f64s(&sql(&ctx, "SELECT bound_affine_rows(x) FROM t"), 0);
    let want: Vec<Option<f64>> = rows.iter().map(|x| x.map(|x| x * 2.0 + 1.0)).collect();
    assert_eq!(got, want);
    let runs = engine.run_log().snapshot();
    assert_eq!(runs.len(), 9, "one run per batch");
    let built = runs.iter().filter(|m| !m.plan_cache_hit).count();
    assert_eq!(
        built, 3,
        "plans built: the first batch without nulls and the two with them"
    );
}
