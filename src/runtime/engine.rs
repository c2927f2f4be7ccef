//! The engine: owns the backends, the plan cache, the selector, the run
//! log and the state of its devices, each with its own state and at most
//! one lock; no lock is held while another is taken.

use super::config::Config;
use super::plan_cache::PlanCache;
use super::run_log::RunLog;
use crate::backend::{Availability, Backend, BackendKind};
use crate::error::Error;
use crate::expr::Expr;
use crate::metrics::ExecutionMetrics;
use crate::query::{IntoSource, Query};
use crate::select::Selector;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Runs queries: plans them, selects a backend, executes with fallback and
/// records metrics.
///
/// Most programs use the process-wide [`engine()`] through `.compute()`;
/// an own engine isolates settings, caches and the run log.
///
/// # Examples
///
/// ```
/// use computeq::prelude::*;
/// use computeq::runtime::Config;
///
/// let engine = Engine::with_config(Config::default());
/// let xs = vec![1.0f32, 2.0, 3.0];
/// let s: f32 = engine.query(&xs).map(|x| x * x).sum();
/// assert_eq!(s, 14.0);
/// assert_eq!(engine.run_log().len(), 1);
/// ```
pub struct Engine {
    pub(crate) config: Config,
    pub(crate) config_error: Option<Error>,
    backends: Vec<Arc<dyn Backend>>,
    pub(crate) plans: PlanCache,
    /// Shared with device probes, which hand it the devices' profiles.
    pub(crate) selector: Arc<dyn Selector>,
    log: RunLog,
    runs: AtomicU64,
    /// Which devices the selector can price, and their probes.
    pub(crate) devices: super::devices::Devices,
    /// Recent large collects, so that explain can tell a query that it
    /// reads another query's intermediate result.
    pub(crate) outputs: crate::recommend::OutputTracker,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field(
                "backends",
                &self.backends.iter().map(|b| b.kind()).collect::<Vec<_>>(),
            )
            .field("plans", &self.plans)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

static GLOBAL: OnceLock<Engine> = OnceLock::new();

/// The process-wide engine, created on first use with settings from the
/// environment (`COMPUTEQ_BACKEND`, `COMPUTEQ_DISABLE`). An invalid setting
/// makes every query on it fail with a [`ErrorKind::Config`](crate::ErrorKind) error.
pub fn engine() -> &'static Engine {
    GLOBAL.get_or_init(Engine::from_env)
}

impl Engine {
    /// An engine configured from the environment.
    pub fn from_env() -> Engine {
        match Config::from_env() {
            Ok(c) => Engine::with_config(c),
            Err(e) => {
                let mut engine = Engine::with_config(Config::default());
                engine.config_error = Some(e);
                engine
            }
        }
    }

    /// An engine with explicit settings and every backend compiled in.
    pub fn with_config(config: Config) -> Engine {
        Engine {
            selector: Arc::from(crate::select::default_selector(&config)),
            log: RunLog::new(config.run_log_capacity),
            plans: PlanCache::new(config.plan_cache_capacity),
            config_error: None,
            backends: crate::backend::default_backends(),
            config,
            runs: AtomicU64::new(0),
            devices: Default::default(),
            outputs: Default::default(),
        }
    }

    /// Adds or replaces the backend of its kind (for custom or
    /// instrumented backends).
    pub fn with_backend(mut self, backend: Arc<dyn Backend>) -> Engine {
        self.backends.retain(|b| b.kind() != backend.kind());
        self.backends.push(backend);
        self.backends.sort_by_key(|b| b.kind());
        self
    }

    /// Replaces the selector.
    pub fn with_selector(mut self, selector: Box<dyn Selector>) -> Engine {
        self.selector = Arc::from(selector);
        self
    }

    /// Starts a query over `source` on this engine.
    pub fn query<'a, S: IntoSource<'a>>(&'a self, source: S) -> Query<'a, Expr<S::Elem>> {
        Query::new(self, source.into_input())
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The backend of `kind`, if compiled in.
    pub fn backend(&self, kind: BackendKind) -> Option<&Arc<dyn Backend>> {
        self.backends.iter().find(|b| b.kind() == kind)
    }

    /// Every backend compiled in, with whether it can run here and why not.
    pub fn backends(&self) -> Vec<(BackendKind, Availability)> {
        self.backends
            .iter()
            .map(|b| {
                let a = if self.config.enabled(b.kind()) {
                    b.availability()
                } else {
                    Availability::Unavailable("disabled by configuration".into())
                };
                (b.kind(), a)
            })
            .collect()
    }

    /// Opens every enabled device backend now and prices it (its persisted
    /// profile, else measured within [`Config::calibration_budget`]),
    /// waiting for a probe already under way. Queries never wait for
    /// this: without it, a device is priced from what an earlier process
    /// remembered and opened by the first query that runs on it, or, when
    /// nothing is remembered, probed in the background from the first
    /// query large enough to use it. For benchmarks and for services that
    /// prefer to pay at start-up.
    pub fn prepare_devices(&self) {
        for b in &self.backends {
            if b.kind().is_device() && self.config.enabled(b.kind()) {
                self.devices.prepare(self, b);
            }
        }
    }

    /// Recent runs (bounded; see [`Config::run_log_capacity`]).
    pub fn run_log(&self) -> &RunLog {
        &self.log
    }

    /// The most recent run's metrics.
    pub fn last_run(&self) -> Option<ExecutionMetrics> {
        self.log.last()
    }

    /// The selector.
    pub fn selector(&self) -> &dyn Selector {
        &*self.selector
    }

    /// Number of optimized plans cached.
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }

    pub(crate) fn next_run_id(&self) -> u64 {
        self.runs.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn all_backends(&self) -> &[Arc<dyn Backend>] {
        &self.backends
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::with_config(Config::default())
    }
}
