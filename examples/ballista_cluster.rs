//! A SQL query over Parquet files with computeq aggregates grouped by a
//! key, on a Ballista cluster: by default one started in this process (a
//! scheduler and two executors on localhost, [`LocalCluster`]), or the
//! scheduler named by `--scheduler` (see `examples/ballista_scheduler.rs`
//! and `examples/ballista_executor.rs`; the Parquet files are written
//! under the system's temporary directory, which the executors must see).
//!
//! ```text
//! cargo run --release --features ballista --example ballista_cluster -- \
//!     [--rows 4000000] [--files 8] [--keys 64] [--executors 2] [--rounds 3] \
//!     [--scheduler df://localhost:50050] [--verbose]
//! ```
//!
//! It checks the result against computeq run locally over the same rows
//! and prints where each run's time went: the client's planning, the
//! scheduler's queue, the job's execution (summed over tasks: scanning,
//! computeq's runs as the executors' run logs measured them, DataFusion's
//! aggregation, the shuffle's writes and reads; `--verbose`: every time
//! metric of the job) and fetching the result. The job's figures are sums
//! over its tasks, which run side by side: they add up to more than the
//! job's wall time.

use ballista_core::serde::protobuf::operator_metric::Metric;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::GetJobMetricsParams;
use computeq::ballista::{session_config, session_state, LocalCluster};
use computeq::datafusion::aggregate_udf;
use computeq::prelude::*;
use computeq::query::Pipeline;
use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    rows: usize,
    files: usize,
    keys: i64,
    executors: usize,
    rounds: usize,
    scheduler: Option<String>,
    verbose: bool,
}

fn args() -> Result<Args, Box<dyn Error>> {
    let mut a = Args {
        rows: 4_000_000,
        files: 8,
        keys: 64,
        executors: 2,
        rounds: 3,
        scheduler: None,
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rows" => a.rows = value()?.parse()?,
            "--files" => a.files = value()?.parse()?,
            "--keys" => a.keys = value()?.parse()?,
            "--executors" => a.executors = value()?.parse()?,
            "--rounds" => a.rounds = value()?.parse()?,
            "--scheduler" => a.scheduler = Some(value()?),
            "--verbose" => a.verbose = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.rows == 0 || a.files == 0 || a.keys <= 0 || a.executors == 0 {
        return Err("rows, files, keys and executors must be positive".into());
    }
    Ok(a)
}

/// Rows `(k, x)`: a key in `0..keys`, a float with a null every 11th row.
fn data(rows: usize, keys: i64) -> (Vec<i64>, Vec<Option<f64>>) {
    let k = (0..rows as i64).map(|i| (i * 7919) % keys).collect();
    let x = (0..rows)
        .map(|i| (i % 11 != 5).then(|| ((i as f64) * 0.37).sin() * 3.0))
        .collect();
    (k, x)
}

fn write_parquet(
    dir: &std::path::Path,
    (k, x): &(Vec<i64>, Vec<Option<f64>>),
    files: usize,
) -> Result<(), Box<dyn Error>> {
    use datafusion::parquet::arrow::ArrowWriter;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
    ]));
    let per_file = k.len().div_ceil(files);
    for (f, start) in (0..k.len()).step_by(per_file).enumerate() {
        let end = (start + per_file).min(k.len());
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(k[start..end].to_vec())) as ArrayRef,
                Arc::new(Float64Array::from(x[start..end].to_vec())),
            ],
        )?;
        let file = std::fs::File::create(dir.join(format!("part-{f}.parquet")))?;
        let mut w = ArrowWriter::try_new(file, schema.clone(), None)?;
        w.write(&batch)?;
        w.close()?;
    }
    Ok(())
}

/// The client's node that runs the job (Ballista's `DistributedQueryExec`).
fn job_node(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.name() == "DistributedQueryExec" {
        return Some(plan.clone());
    }
    plan.children().into_iter().find_map(job_node)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Time per kind of work in the job, summed over its tasks, from the
/// scheduler's job metrics.
async fn job_split(
    scheduler: &str,
    job_id: &str,
) -> Result<BTreeMap<String, Duration>, Box<dyn Error>> {
    let mut client = SchedulerGrpcClient::connect(scheduler.to_string()).await?;
    let stages = client
        .get_job_metrics(GetJobMetricsParams {
            job_id: job_id.into(),
        })
        .await?
        .into_inner()
        .stages;
    let mut split: BTreeMap<String, Duration> = BTreeMap::new();
    for s in stages {
        for op in s.operators {
            for m in op.metrics {
                let (what, ns) = match m.metric {
                    Some(Metric::ElapseTime(ns)) => ("elapsed_compute".to_string(), ns),
                    Some(Metric::Time(t)) => (t.name, t.value),
                    _ => continue,
                };
                *split
                    .entry(format!("{} {what}", op.operator_type))
                    .or_default() += Duration::from_nanos(ns);
            }
        }
    }
    split.retain(|_, d| !d.is_zero());
    Ok(split)
}

/// The job's metrics by kind of work: (what, operator metrics summed).
const KINDS: &[(&str, &[&str])] = &[
    (
        "scan (Parquet, summed over tasks)",
        &["DataSourceExec time_elapsed_scanning_total"],
    ),
    (
        "aggregate (DataFusion's, computeq's runs included)",
        &["AggregateExec elapsed_compute"],
    ),
    (
        "shuffle write (repartition, Arrow IPC files)",
        &[
            "ShuffleWriterExec write_time",
            "ShuffleWriterExec repart_time",
            "SortShuffleWriterExec write_time",
            "SortShuffleWriterExec repart_time",
            "SortShuffleWriterExec spill_time",
        ],
    ),
    (
        "shuffle read (Flight fetches, waiting included)",
        &[
            "ShuffleReaderExec fetch_time",
            "ShuffleReaderExec local_read_time",
        ],
    ),
];

/// Prints the job's time by kind, then the rest of its operators'.
fn print_split(
    split: &BTreeMap<String, Duration>,
    computeq: Option<(Duration, Vec<usize>)>,
    verbose: bool,
) {
    for (i, (kind, metrics)) in KINDS.iter().enumerate() {
        let d: Duration = metrics.iter().filter_map(|m| split.get(*m)).sum();
        println!("    {kind:<52} {:>10}", ms(d));
        if let (1, Some((d, runs))) = (i, &computeq) {
            println!(
                "      of which computeq's runs (executors' run logs)   {:>10}   runs per executor {runs:?}",
                ms(*d)
            );
        }
    }
    let other: Duration = split
        .iter()
        .filter(|(name, _)| {
            name.ends_with(" elapsed_compute")
                && !KINDS.iter().any(|(_, ms)| ms.contains(&name.as_str()))
                && !name.starts_with("DataSourceExec")
        })
        .map(|(_, d)| *d)
        .sum();
    println!(
        "    {:<52} {:>10}",
        "other operators (sorts, projections, reads)",
        ms(other)
    );
    if verbose {
        for (what, d) in split {
            println!("      {what:<50} {:>10}", ms(*d));
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let a = args()?;
    let dir = std::env::temp_dir().join(format!("computeq-ballista-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let d = data(a.rows, a.keys);
    write_parquet(&dir, &d, a.files)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(run(&a, &dir, &d));
    std::fs::remove_dir_all(&dir).ok();
    result
}

async fn run(
    a: &Args,
    dir: &std::path::Path,
    (k, x): &(Vec<i64>, Vec<Option<f64>>),
) -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let local = SessionContext::new_with_state(session_state(session_config())?);
    let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
    local.register_udaf(aggregate_udf("sum_sq", sum_sq)?);
    let var = Pipeline::over::<f64>(|q| q.variance())?;
    local.register_udaf(aggregate_udf("cq_var", var)?);

    let (ctx, scheduler, engines, cluster) = match &a.scheduler {
        Some(url) => {
            let address = url.split_once("://").map_or(url.as_str(), |(_, a)| a);
            let address = address.trim_end_matches('/');
            let scheduler = if address.contains(':') {
                format!("http://{address}")
            } else {
                format!("http://{address}:50050")
            };
            let ctx = computeq::ballista::connect(&scheduler, local.state())?;
            (ctx, scheduler, Vec::new(), None)
        }
        None => {
            let cluster = LocalCluster::start(a.executors, 1).await?;
            let ctx = cluster.connect(local.state())?;
            let scheduler = cluster.scheduler_url().to_string();
            let engines = cluster.executor_engines().to_vec();
            (ctx, scheduler, engines, Some(cluster))
        }
    };
    ctx.register_parquet(
        "p",
        dir.to_str().ok_or("a UTF-8 path")?,
        ParquetReadOptions::default(),
    )
    .await?;
    println!(
        "{} rows in {} Parquet files, {} keys; {}; set up in {}",
        a.rows,
        a.files,
        a.keys,
        match &cluster {
            Some(_) => format!(
                "a local cluster of {} executors (1 task slot each)",
                a.executors
            ),
            None => format!("the cluster at {}", a.scheduler.as_deref().unwrap_or("")),
        },
        ms(started.elapsed())
    );

    let query = "SELECT k, sum_sq(x) AS sum_sq, cq_var(x) AS var, count(*) AS n \
                 FROM p GROUP BY k ORDER BY k";
    println!("{query}");
    let mut last = Vec::new();
    for round in 1..=a.rounds {
        for e in &engines {
            e.run_log().clear();
        }
        let t0 = Instant::now();
        let plan = ctx.sql(query).await?.create_physical_plan().await?;
        let planned = t0.elapsed();
        let batches = collect(plan.clone(), ctx.task_ctx()).await?;
        let total = t0.elapsed();
        let job = job_node(&plan).ok_or("no DistributedQueryExec in the client's plan")?;
        let gauge = |name: &str| {
            job.metrics()
                .and_then(|m| m.sum_by_name(name))
                .map_or(Duration::ZERO, |v| {
                    Duration::from_millis(v.as_usize() as u64)
                })
        };
        let (queued, executed) = (
            gauge("job_scheduling_in_ms"),
            gauge("job_execution_time_ms"),
        );
        let fetch = total.saturating_sub(planned + queued + executed);
        println!(
            "round {round}: {} = client planning {} + scheduling {} + job {} + result fetch {}",
            ms(total),
            ms(planned),
            ms(queued),
            ms(executed),
            ms(fetch)
        );
        let job_id = job
            .downcast_ref::<ballista_core::execution_plans::DistributedQueryExec<
                datafusion_proto::protobuf::LogicalPlanNode,
            >>()
            .and_then(|j| j.job_id());
        // computeq's runs, as the executors' run logs measured them.
        let computeq = (!engines.is_empty()).then(|| {
            let runs: Vec<_> = engines.iter().map(|e| e.run_log().snapshot()).collect();
            let total: Duration = runs.iter().flatten().map(|m| m.phases.total).sum();
            (total, runs.iter().map(Vec::len).collect::<Vec<_>>())
        });
        if let Some(id) = job_id {
            print_split(
                &job_split(&scheduler, id.as_str()).await?,
                computeq,
                a.verbose,
            );
        }
        last = batches;
    }

    // The result against computeq over each group's rows, here.
    let mut groups: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for (&k, x) in k.iter().zip(x) {
        let g = groups.entry(k).or_default();
        g.extend(x);
    }
    let mut checked = 0;
    for b in &last {
        let keys = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("keys")?;
        let sq = b
            .column(1)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or("sum_sq")?;
        let var = b
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or("var")?;
        for i in 0..b.num_rows() {
            let xs = &groups[&keys.value(i)];
            let want_sq: f64 = xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum();
            let want_var = xs.compute().variance().ok_or("an empty group")?;
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            if !close(sq.value(i), want_sq) || !close(var.value(i), want_var) {
                return Err(format!(
                    "key {}: cluster ({}, {}) vs local ({want_sq}, {want_var})",
                    keys.value(i),
                    sq.value(i),
                    var.value(i)
                )
                .into());
            }
            checked += 1;
        }
    }
    if checked != groups.len() {
        return Err(format!("{checked} groups came back, {} expected", groups.len()).into());
    }
    println!("{checked} groups equal to computeq run locally (within 1e-9 relative)");
    Ok(())
}
