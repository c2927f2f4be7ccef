//! Exports computeq's tracing spans through OpenTelemetry (OTLP/HTTP).
//!
//! Start a collector (for example Jaeger: `docker run -p 4318:4318 -p 16686:16686
//! jaegertracing/all-in-one`), then:
//!
//! ```text
//! cargo run --example otel --features otel
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 cargo run --example otel --features otel
//! ```
//!
//! Without a collector the spans are dropped after a warning from the
//! exporter; the queries run the same.

use computeq::prelude::*;
use computeq::telemetry::{self, Detail};

fn main() -> Result<(), computeq::Error> {
    let _guard = telemetry::init_otlp("computeq-example", Detail::Queries)?;
    let xs: Vec<f32> = (0..1_000_000).map(|i| (i as f32 * 0.001).sin()).collect();
    for n in [1_000usize, 100_000, 1_000_000] {
        let (s, m) = xs[..n]
            .compute()
            .map(|x| x * 2.0 + 1.0)
            .filter(|x| x.gt(0.5))
            .with_metrics()
            .sum();
        println!(
            "n={n:>8} sum={s:>12.2} backend={} reason=\"{}\" total={:?}",
            m.backend, m.reason, m.phases.total
        );
    }
    let v: Vec<f32> = xs.compute().map(|x| x.abs().sqrt()).collect();
    println!(
        "collected {} elements; spans flush when the guard drops",
        v.len()
    );
    Ok(())
}
