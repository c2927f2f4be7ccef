//! The table of the DataFusion and Ballista tests: keys, a float column
//! with nulls, an integer column that overflows when summed; and the
//! local reference per group.

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A runtime for DataFusion's async API (timers and sockets on: Ballista
/// talks gRPC).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The table's columns `k`, `x`, `n`.
pub type Data = (Vec<i64>, Vec<Option<f64>>, Vec<i64>);

/// Rows `(k, x, n)`: a key in `0..keys`, a float with a null every 7th
/// row, an integer that overflows when summed.
pub fn data(rows: usize, keys: i64) -> Data {
    let k = (0..rows as i64).map(|i| (i * 7919) % keys).collect();
    let x = (0..rows)
        .map(|i| (i % 7 != 3).then(|| ((i as f64) * 0.37).sin() * 3.0))
        .collect();
    let n = (0..rows as i64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64))
        .collect();
    (k, x, n)
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
        Field::new("n", DataType::Int64, false),
    ]))
}

/// Rows `range` of `d` as one record batch.
pub fn batch((k, x, n): &Data, range: std::ops::Range<usize>) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(k[range.clone()].to_vec())) as ArrayRef,
            Arc::new(Float64Array::from(x[range.clone()].to_vec())),
            Arc::new(Int64Array::from(n[range].to_vec())),
        ],
    )
    .expect("a batch")
}

/// The local runs: computeq over the non-null values of each group.
pub fn local_groups(k: &[i64], x: &[Option<f64>]) -> BTreeMap<i64, Vec<f64>> {
    let mut g: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for (&k, x) in k.iter().zip(x) {
        let e = g.entry(k).or_default();
        if let Some(x) = x {
            e.push(*x);
        }
    }
    g
}
