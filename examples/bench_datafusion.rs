//! computeq aggregate functions inside DataFusion against DataFusion's own
//! SQL for the same expressions, in the same session and the same run
//! (issue 23's target: >= 1.5x), over an in-memory table of `--rows` f64
//! values (default 10^7) in record batches of DataFusion's batch size
//! (8192 rows) spread over the session's partitions:
//!
//! - P1 `SELECT sum_affine(x) FROM t` against `SELECT sum(x * 2 + 1) FROM t`
//! - P2 `SELECT sum_sq(x) FROM t` against `SELECT sum(x * x) FROM t WHERE x > 0.5`
//! - P2 grouped by a key with 16 values, against the same SQL with GROUP BY
//!   (informational).
//!
//! Each round runs every query once in a fresh order; a ratio is the median
//! of the rounds' ratios. Results are checked against each other. Two more
//! columns, sampled in the same rounds: computeq alone over the same values
//! in one slice on both cores (the machine's floor for the pipeline), and
//! DataFusion's `sum(x)` of the same shape (its scan and aggregation
//! machinery around one add per row: the floor under any function it calls
//! per batch).
//!
//! `cargo run --release --features datafusion --example bench_datafusion`
//! (`-- --rows 1000000 --rounds 15`; `--only 0` times P1 alone).

#[path = "../benches/common/order.rs"]
mod order;

use computeq::datafusion::aggregate_udf;
use computeq::prelude::*;
use computeq::query::Pipeline;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::Arc;
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows = arg("--rows", 10_000_000);
    let rounds = arg("--rounds", 11);
    // `--only K`: time query K alone (0: P1, 1: P2, 2: grouped), e.g.
    // under `perf`.
    let only = arg("--only", usize::MAX);
    let config = SessionConfig::new();
    let partitions = config.target_partitions();
    let batch = config.batch_size();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, false),
    ]));
    let mut parts = vec![Vec::new(); partitions];
    let all: Vec<f64> = (0..rows)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    for (i, start) in (0..rows).step_by(batch).enumerate() {
        let end = (start + batch).min(rows);
        let x: Float64Array = (start..end)
            .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
            .collect();
        let k: Int64Array = (start..end).map(|i| (i % 16) as i64).collect();
        parts[i % partitions].push(RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(k) as ArrayRef, Arc::new(x)],
        )?);
    }
    let ctx = SessionContext::new_with_config(config);
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, parts)?))?;
    let sum_affine = Pipeline::over::<f64>(|q| q.map(|x| x * 2.0 + 1.0).sum())?;
    ctx.register_udaf(aggregate_udf("sum_affine", sum_affine)?);
    let sum_sq = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
    ctx.register_udaf(aggregate_udf("sum_sq", sum_sq)?);

    let queries = [
        (
            "P1 sum(x*2+1)",
            "SELECT sum(x * 2 + 1) FROM t",
            "SELECT sum_affine(x) FROM t",
        ),
        (
            "P2 sum(x*x) where x > 0.5",
            "SELECT sum(x * x) FROM t WHERE x > 0.5",
            "SELECT sum_sq(x) FROM t",
        ),
        (
            "P2 grouped by k (16 keys)",
            "SELECT k, sum(x * x) FROM t WHERE x > 0.5 GROUP BY k ORDER BY k",
            "SELECT k, sum_sq(x) FROM t GROUP BY k ORDER BY k",
        ),
    ];
    // DataFusion's cheapest query of the same shape: its scan and
    // aggregation machinery around one add per row, the floor under any
    // function it calls per batch.
    let floors = [
        "SELECT sum(x) FROM t",
        "SELECT sum(x) FROM t",
        "SELECT k, sum(x) FROM t GROUP BY k ORDER BY k",
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(partitions)
        .build()?;
    let run = |q: &str| -> Result<(Vec<RecordBatch>, f64), datafusion::error::DataFusionError> {
        rt.block_on(async {
            let t = Instant::now();
            let out = ctx.sql(q).await?.collect().await?;
            Ok((out, t.elapsed().as_secs_f64()))
        })
    };

    // Check: each pair agrees (the grouped ones key by key).
    for (name, sql, cq) in &queries {
        let (a, _) = run(sql)?;
        let (b, _) = run(cq)?;
        let col = |bs: &[RecordBatch], c: usize| -> Vec<f64> {
            bs.iter()
                .flat_map(|b| {
                    let a = b.column(c).as_any().downcast_ref::<Float64Array>().unwrap();
                    a.values().to_vec()
                })
                .collect()
        };
        let c = if name.contains("grouped") { 1 } else { 0 };
        for (x, y) in col(&a, c).iter().zip(col(&b, c)) {
            assert!(
                (x - y).abs() <= 1e-9 * x.abs().max(1.0),
                "{name}: {x} vs {y}"
            );
        }
    }

    println!(
        "{rows} rows, {partitions} partitions, batches of {batch}, {rounds} rounds (medians)\n"
    );
    println!(
        "| query | DataFusion SQL | computeq UDAF | speed-up | computeq alone, one slice | DataFusion `sum(x)` (floor) |"
    );
    println!("|---|---|---|---|---|---|");
    for (q, (name, sql, cq)) in queries.iter().enumerate() {
        if only != usize::MAX && q != only {
            continue;
        }
        let mut ratios = Vec::new();
        let (mut ts, mut tc, mut ta, mut tf) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let alone = |q: usize| -> f64 {
            let t = Instant::now();
            let v: f64 = if q == 0 {
                all.compute().map(|x| x * 2.0 + 1.0).sum()
            } else {
                all.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum()
            };
            std::hint::black_box(v);
            t.elapsed().as_secs_f64()
        };
        for round in 0..rounds {
            let order = order::round_order(round, 4);
            let mut t = [0.0; 4];
            for &i in &order {
                t[i] = match i {
                    0 => run(sql)?.1,
                    1 => run(cq)?.1,
                    2 => alone(q),
                    _ => run(floors[q])?.1,
                };
            }
            ratios.push(t[0] / t[1]);
            ts.push(t[0]);
            tc.push(t[1]);
            ta.push(t[2]);
            tf.push(t[3]);
        }
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2}x | {:.2} ms | {:.2} ms |",
            order::median(ts) * 1e3,
            order::median(tc) * 1e3,
            order::median(ratios),
            order::median(ta) * 1e3,
            order::median(tf) * 1e3
        );
    }
    if let Some(m) = computeq::engine().last_run() {
        println!(
            "\nlast batch run: {} ({}), {} elements, {:.1} us",
            m.backend,
            m.reason,
            m.elements_in,
            m.phases.total.as_secs_f64() * 1e6
        );
    }
    Ok(())
}
