//! The engine: owns the backends, the plan cache, the selector, the run
//! log and the state of its devices, each with its own state and its own
//! locks.
//!
//! # Locks
//!
//! The rule, everywhere in the crate: no lock is held while another is
//! taken, and none while code the crate does not control runs (a caller's
//! closure, a custom backend or selector, a `tracing` subscriber), while a
//! file is read or written, or while a measurement runs. State that needs
//! a price, a profile or a file is copied out under its lock and the lock
//! released first (the selector's history and model, the run log's
//! filter, the process's CPU profile, the wgpu buffer pool and bind
//! groups).
//!
//! One exception, and the only order in which two locks are ever held: the
//! CUDA backend holds its device's lock (`Gpu`) for a whole run or
//! transfer, because the driver's streams and staging buffers serve one
//! at a time; under it, it takes leaf locks, one at a time: a device
//! buffer's event cells (`ready`, `last_use`, `last_read`) and the device's
//! pool of free allocations. A leaf lock is never held while any other
//! lock is taken.

use super::config::{Config, ConfigWarning};
use super::plan_cache::PlanCache;
use super::run_log::RunLog;
use crate::backend::{Availability, Backend, BackendKind};
use crate::metrics::ExecutionMetrics;
use crate::select::Selector;
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
/// use computeq::Config;
///
/// let engine = Engine::with_config(Config::default());
/// let xs = vec![1.0f32, 2.0, 3.0];
/// let s: f32 = engine.query(&xs).map(|x| x * x).sum();
/// assert_eq!(s, 14.0);
/// assert_eq!(engine.run_log().len(), 1);
/// ```
pub struct Engine {
    pub(crate) config: Config,
    /// Environment variables ignored for invalid values.
    config_warnings: Vec<ConfigWarning>,
    backends: Vec<Arc<dyn Backend>>,
    pub(crate) plans: PlanCache,
    /// Shared with device probes, which hand it the devices' profiles.
    pub(crate) selector: Arc<dyn Selector>,
    log: RunLog,
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

/// The process-wide engine that `.compute()` uses: the one given to
/// [`set_engine`], else created on first use with settings from the
/// environment ([`Engine::from_env`]: an invalid variable is ignored with
/// a warning, see [`Engine::config_warnings`]).
pub fn engine() -> &'static Engine {
    GLOBAL.get_or_init(|| {
        let (mut config, warnings) = Config::from_env_lenient();
        // This crate's unit tests share this engine: they must neither
        // read nor write the user's cache.
        if cfg!(test) {
            config.cache_dir = None;
        }
        Engine::with_warnings(config, warnings)
    })
}

/// The cache directory of the process-wide engine, without creating it:
/// its settings' once it exists, else those it would be created with.
pub(crate) fn global_cache_dir() -> Option<std::path::PathBuf> {
    match GLOBAL.get() {
        Some(e) => e.config.cache_dir.clone(),
        None if cfg!(test) => None,
        None => Config::from_env_lenient().0.cache_dir,
    }
}

/// Runs the full CPU calibration (about two seconds: larger buffers, more
/// repetitions, the pool's wake-up both back to back and after idling),
/// makes it the process-wide profile that every engine's selector uses
/// from its next query on (except those given a [`Config::cpu_profile`]),
/// and persists it in the cache directory of the process-wide engine (the
/// environment's, unless [`set_engine`] gave another).
///
/// # Examples
///
/// ```no_run
/// let cpu = computeq::calibrate_full();
/// println!("{:.1} GB/s on one thread", cpu.bandwidth_one / 1e9);
/// ```
pub fn calibrate_full() -> crate::cost::CpuProfile {
    crate::cost::calibrate_full_into(global_cache_dir().as_deref())
}

/// Makes `engine` the process-wide engine of [`engine()`] and
/// `.compute()`, when none exists yet: for programs that configure it in
/// code (a cache directory of their own, fault injection, a forced
/// backend), and for tests that must not touch the user's cache.
///
/// # Errors
///
/// Gives `engine` back (boxed) when the process-wide engine already
/// exists (a query ran, or another call came first).
///
/// # Examples
///
/// ```
/// use computeq::prelude::*;
/// use computeq::{set_engine, Config};
///
/// // No cache directory: nothing is read from or written to disk.
/// let _ = set_engine(Engine::with_config(Config::default()));
/// assert_eq!(computeq::engine().config().cache_dir, None);
/// assert_eq!([1, 2, 3].compute().sum(), 6);
/// ```
pub fn set_engine(engine: Engine) -> Result<&'static Engine, Box<Engine>> {
    let mut engine = Some(engine);
    let global = GLOBAL.get_or_init(|| engine.take().expect("taken once"));
    match engine {
        None => Ok(global),
        Some(e) => Err(Box::new(e)),
    }
}

impl Engine {
    /// An engine configured from the environment. A variable with an
    /// invalid value is ignored (its default stands) and logged with
    /// `tracing::warn!`; [`Engine::config_warnings`] lists them.
    pub fn from_env() -> Engine {
        let (config, warnings) = Config::from_env_lenient();
        Engine::with_warnings(config, warnings)
    }

    fn with_warnings(config: Config, warnings: Vec<ConfigWarning>) -> Engine {
        for w in &warnings {
            tracing::warn!(
                variable = w.variable,
                value = %w.value,
                accepted = %w.accepted,
                "computeq: {w}"
            );
        }
        let mut engine = Engine::with_config(config);
        engine.config_warnings = warnings;
        engine
    }

    /// An engine with explicit settings and every backend compiled in.
    pub fn with_config(config: Config) -> Engine {
        if !config.fault_injection && !config.faults.is_empty() {
            tracing::debug!(
                faults = ?config.faults,
                "computeq: COMPUTEQ_FAULT ignored: fault injection is off for this engine \
                 (Config::with_fault_injection)"
            );
        }
        // The CPU calibration ends with runs of the CPU backends (this
        // process's first engine sets the probe; see `cpu_probe`).
        crate::cost::set_backend_probe(super::cpu_probe::measure);
        crate::cost::set_cpu_kernels(super::cpu_probe::KERNELS);
        Engine {
            selector: Arc::from(crate::select::default_selector(config.learning_settings())),
            log: RunLog::new(config.run_log_capacity),
            plans: PlanCache::new(config.plan_cache_capacity),
            config_warnings: Vec::new(),
            backends: crate::backend::default_backends(&config.device_settings()),
            config,
            devices: Default::default(),
            outputs: Default::default(),
        }
    }

    /// The environment variables this engine ignored because their values
    /// were invalid (each was also logged with `tracing::warn!`); empty
    /// for an engine made from an explicit [`Config`].
    pub fn config_warnings(&self) -> &[ConfigWarning] {
        &self.config_warnings
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
    /// prefer to pay at start-up, and for programs whose first queries
    /// should teach the selector: runs beside a probe are not learned from
    /// ([`ExecutionMetrics::during_calibration`](crate::ExecutionMetrics::during_calibration)).
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

    /// Persists what the selector learned now (history, in the cache
    /// directory), rather than in the background.
    ///
    /// Learning is written shortly after the first queries and then every
    /// few seconds by a background thread, when an engine drops, and (on
    /// Linux) at the process's normal exit. A short program that ends
    /// another way (a non-Linux target, `_exit`, a signal) and wants the
    /// next run to start from what this one measured calls this before it
    /// ends; it is also how to make the file current at a known point.
    /// Nothing happens without a cache directory or with learning off.
    /// When another process has held the file's lock for two seconds (its
    /// write waiting on a slow disk), this write is not made unlocked,
    /// which could replace that process's update: it is left to the
    /// background writer's next try, the engine's drop or the exit.
    ///
    /// # Examples
    ///
    /// ```
    /// use computeq::prelude::*;
    /// use computeq::Config;
    ///
    /// # let dir = std::env::temp_dir().join(format!("computeq-doc-flush-{}", std::process::id()));
    /// let engine = Engine::with_config(Config {
    ///     cache_dir: Some(dir.clone()),
    ///     calibration_budget: std::time::Duration::ZERO,
    ///     ..Config::default()
    /// });
    /// let xs = vec![1.0f32; 1000];
    /// let s: f32 = engine.query(&xs).sum();
    /// engine.flush(); // the next process starts from this run's measurement
    /// # assert_eq!(s, 1000.0);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// ```
    pub fn flush(&self) {
        self.selector.flush();
    }

    pub(crate) fn all_backends(&self) -> &[Arc<dyn Backend>] {
        &self.backends
    }
}

impl Drop for Engine {
    /// Writes what the selector learned: a device probe may still hold the
    /// selector (it hands it the device's profile), so the selector's own
    /// drop can come later than the engine's.
    fn drop(&mut self) {
        self.selector.flush();
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::with_config(Config::default())
    }
}

/// Runs `f` on a thread of its own and fails the calling test when it has
/// not finished after `secs` seconds: a deadlock then fails the test with
/// a message instead of hanging the run (the stuck thread is left behind;
/// the process ends with the harness).
#[cfg(test)]
pub(crate) fn finishes_within<T: Send + 'static>(
    secs: u64,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what}: not finished after {secs} s: deadlocked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    /// Runs this binary's test `name` alone in a child process with `vars`
    /// set: the process environment of the tests, which run in parallel,
    /// is never changed.
    fn in_child(name: &str, vars: &[(&str, &str)]) {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child.args([name, "--exact", "--nocapture", "--test-threads=1"]);
        // Only the variables given: none inherited from whoever runs the
        // tests.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("COMPUTEQ_") {
                child.env_remove(k);
            }
        }
        let out = child
            .env("COMPUTEQ_TEST_CHILD", "1")
            // No cache directory unless the test names one: an engine made
            // from the environment must not touch the user's.
            .env("COMPUTEQ_CACHE_DIR", "off")
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "the child ran no test: {text}");
    }

    fn is_child() -> bool {
        std::env::var_os("COMPUTEQ_TEST_CHILD").is_some()
    }

    /// Runs a child's test body on a thread of its own and joins it: the
    /// thread's locals (the plan-cache memo, which may hold device
    /// pipelines) are dropped before the test returns, not while the
    /// harness exits the process (a driver unloaded under a thread still
    /// dropping them crashed the child about once in 25 runs).
    fn joined(body: impl FnOnce() + Send + 'static) {
        if let Err(panic) = std::thread::spawn(body).join() {
            std::panic::resume_unwind(panic);
        }
    }

    #[test]
    fn a_bad_variable_is_ignored_and_every_query_still_runs() {
        if !is_child() {
            let tmp = std::env::temp_dir().display().to_string();
            return in_child(
                "runtime::engine::tests::a_bad_variable_is_ignored_and_every_query_still_runs",
                &[
                    ("COMPUTEQ_BACKEND", "gpu"),
                    ("COMPUTEQ_LEARN", "maybe"),
                    ("COMPUTEQ_CALIBRATION_MS", "fast"),
                    ("COMPUTEQ_EXPLORE", "sometimes"),
                    ("COMPUTEQ_DISABLE", "cpu-scalar,cdua"),
                    ("COMPUTEQ_WGPU_SUBGROUPS", "nope"),
                    ("COMPUTEQ_FAULT", "wgpu:compiel"),
                    ("COMPUTEQ_CACHE_DIR", "relative/dir"),
                    ("XDG_CACHE_HOME", &tmp),
                ],
            );
        }
        joined(|| {
            // The process-wide engine, in the default (panicking) mode.
            assert_eq!([1, 2, 3].compute().sum(), 6);
            let e = engine();
            let ignored: Vec<&str> = e.config_warnings().iter().map(|w| w.variable).collect();
            assert_eq!(
                ignored,
                [
                    "COMPUTEQ_BACKEND",
                    "COMPUTEQ_DISABLE",
                    "COMPUTEQ_LEARN",
                    "COMPUTEQ_EXPLORE",
                    "COMPUTEQ_CALIBRATION_MS",
                    "COMPUTEQ_WGPU_SUBGROUPS",
                    "COMPUTEQ_FAULT",
                    "COMPUTEQ_CACHE_DIR",
                ]
            );
            // The valid rest stands.
            assert_eq!(e.config().disabled, [BackendKind::CpuScalar]);
            assert!(e.config().learn && e.config().forced_backend.is_none());
            // Explain shows what was ignored.
            let x = [1.0f32].compute().explain().sum().to_string();
            assert!(x.contains("COMPUTEQ_LEARN: `maybe`"), "{x}");
            // Failing instead is the caller's choice.
            assert!(Config::from_env().is_err());
        });
    }

    #[test]
    fn an_inherited_fault_variable_alone_injects_nothing() {
        if !is_child() {
            return in_child(
                "runtime::engine::tests::an_inherited_fault_variable_alone_injects_nothing",
                &[("COMPUTEQ_FAULT", "wgpu:compile,cuda:launch")],
            );
        }
        joined(|| {
            let e = Engine::from_env();
            assert!(e.config_warnings().is_empty());
            assert_eq!(e.config().faults, ["wgpu:compile", "cuda:launch"]);
            assert!(!e.config().fault_injection);
            #[cfg(feature = "wgpu")]
            {
                use crate::backend::wgpu::{FaultPlan, WgpuBackend};
                use crate::backend::Availability;
                // The backends an engine is made with (`default_backends`).
                assert_eq!(
                    WgpuBackend::from_settings(&e.config().device_settings()).faults(),
                    FaultPlan::NONE
                );
                assert_eq!(WgpuBackend::default().faults(), FaultPlan::NONE);
                let opted = Config::from_env().unwrap().with_fault_injection(true);
                assert_eq!(
                    WgpuBackend::from_settings(&opted.device_settings()).faults(),
                    FaultPlan {
                        compile: true,
                        ..FaultPlan::NONE
                    }
                );
                // Through the engines, where a wgpu device exists.
                let injected = |e: &Engine| {
                    let r = e
                        .query(&[1.0f32, 2.0][..])
                        .on(BackendKind::Wgpu)
                        .no_fallback()
                        .try_sum();
                    r.err()
                        .is_some_and(|e| e.to_string().contains("injected fault"))
                };
                let wgpu = e
                    .backends()
                    .into_iter()
                    .find(|(k, _)| *k == BackendKind::Wgpu);
                if let Some((_, Availability::Available)) = wgpu {
                    assert!(!injected(&e));
                    assert!(injected(&Engine::with_config(opted)));
                }
            }
        });
    }

    #[test]
    fn set_engine_installs_the_process_wide_engine_once() {
        if !is_child() {
            return in_child(
                "runtime::engine::tests::set_engine_installs_the_process_wide_engine_once",
                &[],
            );
        }
        joined(|| {
            let mine = Engine::with_config(Config {
                run_log_capacity: 7,
                ..Config::default()
            });
            let e = set_engine(mine).expect("first");
            assert_eq!(e.config().run_log_capacity, 7);
            assert!(std::ptr::eq(e, engine()));
            assert!(set_engine(Engine::default()).is_err());
        });
    }

    /// One run of `sum(x * 2 + 1)` on `engine`, with its metrics.
    fn run_sum(engine: &Engine, xs: &[f32]) -> ExecutionMetrics {
        engine
            .query(xs)
            .map(|x| x * 2.0 + 1.0)
            .with_metrics()
            .sum()
            .1
    }

    /// While one of computeq's measurements runs, twelve runs of a query
    /// over `xs` each say so and are decided by the model alone (neither
    /// explored nor decided by measurements: none kept); then `end` ends
    /// the measurement, and twelve more are not flagged and are learned
    /// from.
    fn paused_then_learning(engine: &Engine, xs: &[f32], end: impl FnOnce()) {
        use crate::metrics::SelectionReason;
        for _ in 0..12 {
            let m = run_sum(engine, xs);
            assert!(m.during_calibration, "{m}");
            assert!(matches!(m.reason, SelectionReason::Model { .. }), "{m}");
        }
        end();
        let after: Vec<_> = (0..12).map(|_| run_sum(engine, xs)).collect();
        assert!(after.iter().all(|m| !m.during_calibration));
        assert!(
            after
                .iter()
                .any(|m| !matches!(m.reason, SelectionReason::Model { .. })),
            "learned from once the measurement ended: {:?}",
            after.iter().map(|m| m.reason).collect::<Vec<_>>()
        );
    }

    /// In a child process, where no other test calibrates: runs while a
    /// calibration is under way say so in their metrics and teach the
    /// selector nothing; once it ends, runs are learned from again.
    #[test]
    fn runs_beside_the_calibration_say_so_and_teach_nothing() {
        if !is_child() {
            return in_child(
                "runtime::engine::tests::runs_beside_the_calibration_say_so_and_teach_nothing",
                &[],
            );
        }
        joined(|| {
            let engine = Engine::with_config(Config {
                calibration_budget: std::time::Duration::ZERO,
                disabled: vec![BackendKind::Wgpu, BackendKind::Cuda],
                ..Config::default()
            });
            let xs = vec![0.5f32; 1 << 20];
            let busy = crate::cost::background::busy();
            paused_then_learning(&engine, &xs, || drop(busy));
        });
    }

    /// The same for this engine's device probe, from its start to its end
    /// (a device here whose opening waits for the test).
    #[test]
    fn runs_beside_a_device_probe_say_so_and_teach_nothing() {
        use crate::runtime::devices::probe_tests::Gated;
        if !is_child() {
            return in_child(
                "runtime::engine::tests::runs_beside_a_device_probe_say_so_and_teach_nothing",
                &[],
            );
        }
        joined(|| {
            let (device, open) = Gated::new();
            let engine = Engine::with_config(Config {
                calibration_budget: std::time::Duration::ZERO,
                disabled: vec![BackendKind::Cuda],
                ..Config::default()
            })
            .with_backend(Arc::new(device));
            // Large enough for the device to be worth a probe.
            let xs = vec![0.5f32; 1 << 20];
            // Starts the probe, which waits inside the device's opening;
            // this run is beside it (the probe counts from before its
            // thread starts).
            let first = run_sum(&engine, &xs);
            assert!(engine.devices.probes.active());
            assert!(first.during_calibration, "{first}");
            paused_then_learning(&engine, &xs, || {
                open.send(()).unwrap();
                // Waits for the probe under way.
                engine.prepare_devices();
                assert!(!engine.devices.probes.active());
            });
        });
    }
}
