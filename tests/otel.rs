//! The OpenTelemetry export (feature `otel`): computeq's spans reach an
//! in-process exporter with their fields.
#![cfg(feature = "otel")]

use computeq::prelude::*;
use computeq::telemetry::{self, Detail};
use opentelemetry_sdk::trace::InMemorySpanExporter;

#[test]
fn query_spans_are_exported() {
    let exporter = InMemorySpanExporter::default();
    let provider = telemetry::provider_with(exporter.clone(), "computeq-test");
    let subscriber = telemetry::subscriber(&provider, Detail::Queries);
    let xs: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
    let engine = Engine::default();
    let s: f32 = tracing::subscriber::with_default(subscriber, || {
        engine
            .query(&xs)
            .map(|x| x * 2.0)
            .filter(|x| x.gt(10.0))
            .sum()
    });
    assert!(s > 0.0);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert!(names.contains(&"computeq.query"), "{names:?}");
    // A fresh engine builds the block program: one compile span.
    assert!(names.contains(&"computeq.compile"), "{names:?}");
    let q = spans.iter().find(|s| s.name == "computeq.query").unwrap();
    let keys: Vec<String> = q.attributes.iter().map(|kv| kv.key.to_string()).collect();
    assert!(keys.iter().any(|k| k == "elements"), "{keys:?}");
    // The decision is an event on the query span, with its reason.
    let events: Vec<&str> = q.events.iter().map(|e| e.name.as_ref()).collect();
    assert!(events.iter().any(|e| e.contains("decision")), "{events:?}");
}

#[test]
fn trace_level_spans_only_with_full_detail() {
    let exporter = InMemorySpanExporter::default();
    let provider = telemetry::provider_with(exporter.clone(), "computeq-test");
    let xs = vec![1.0f32; 100];
    let engine = Engine::default();
    tracing::subscriber::with_default(telemetry::subscriber(&provider, Detail::Queries), || {
        let _: f32 = engine.query(&xs).sum();
    });
    provider.force_flush().unwrap();
    let names: Vec<String> = exporter
        .get_finished_spans()
        .unwrap()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert!(!names.iter().any(|n| n == "computeq.select"), "{names:?}");
    exporter.reset();
    tracing::subscriber::with_default(telemetry::subscriber(&provider, Detail::Full), || {
        let _: f32 = engine.query(&xs).sum();
    });
    provider.force_flush().unwrap();
    let names: Vec<String> = exporter
        .get_finished_spans()
        .unwrap()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert!(names.iter().any(|n| n == "computeq.select"), "{names:?}");
}
