//! OpenTelemetry export of computeq's `tracing` spans (feature `otel`).
//!
//! computeq emits spans and events with `tracing` (`computeq.query` with
//! the plan fingerprint, element count, terminal and backend;
//! `computeq.execute`; `computeq.compile` when a backend builds a plan's
//! artifact; `computeq.transfer` around device copies; the
//! `computeq.decision` event with the choice and its reason; at trace level
//! `computeq.plan` and `computeq.select`). This
//! module connects them to an OpenTelemetry tracer:
//!
//! - [`init_otlp`] installs a global subscriber exporting over OTLP/HTTP
//!   (`OTEL_EXPORTER_OTLP_ENDPOINT`, default `http://localhost:4318`), and
//!   returns a guard that flushes on drop;
//! - [`provider_with`] + [`layer`] build the same pieces over any exporter
//!   (an in-memory one in tests, another transport in applications).
//!
//! Tiny queries stay cheap: [`Detail::Queries`] exports only debug-level
//! spans (one per query plus execute), and with no subscriber interested
//! a disabled span costs one cached check.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter};
use opentelemetry_sdk::Resource;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

pub use opentelemetry_sdk::trace::SdkTracerProvider as TracerProvider;

/// How much of computeq is exported.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Query and execute spans and the decision event (debug level).
    #[default]
    Queries,
    /// Also the plan and select spans (trace level): for investigating a
    /// few queries, not for production rates of tiny ones.
    Full,
}

impl Detail {
    fn level(self) -> LevelFilter {
        match self {
            Detail::Queries => LevelFilter::DEBUG,
            Detail::Full => LevelFilter::TRACE,
        }
    }
}

/// A tracer provider exporting every finished span to `exporter` as it
/// ends (simple processor: meant for tests and low rates; [`init_otlp`]
/// batches).
pub fn provider_with<E: SpanExporter + 'static>(exporter: E, service: &str) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_string())
                .build(),
        )
        .with_simple_exporter(exporter)
        .build()
}

/// A `tracing` layer sending computeq's spans (at `detail`) to `provider`.
/// Compose it with other layers on a `tracing_subscriber::Registry`.
pub fn layer<S>(provider: &SdkTracerProvider, detail: Detail) -> impl Layer<S> + Send + Sync
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    let tracer = provider.tracer("computeq");
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target("computeq", detail.level()))
}

/// A subscriber with only the OpenTelemetry layer (for
/// `tracing::subscriber::with_default` or `set_global_default`).
pub fn subscriber(
    provider: &SdkTracerProvider,
    detail: Detail,
) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::registry().with(layer(provider, detail))
}

/// Flushes and shuts the provider down when dropped.
#[derive(Debug)]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl OtelGuard {
    /// The provider (to flush by hand).
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }
}

/// Installs a global subscriber that exports computeq's spans over
/// OTLP/HTTP (protobuf) in batches, as `service`. The endpoint comes from
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318`).
/// Keep the guard alive for the program's life: dropping it flushes.
///
/// # Errors
///
/// When the exporter cannot be built or a global subscriber is already set.
pub fn init_otlp(service: &str, detail: Detail) -> Result<OtelGuard, crate::Error> {
    let err = |m: String| crate::Error::new(crate::ErrorKind::Config, m);
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| err(format!("OTLP exporter: {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_string())
                .build(),
        )
        .with_batch_exporter(exporter)
        .build();
    tracing::subscriber::set_global_default(subscriber(&provider, detail))
        .map_err(|e| err(format!("a global tracing subscriber is already set: {e}")))?;
    Ok(OtelGuard { provider })
}
