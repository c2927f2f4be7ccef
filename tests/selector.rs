//! The learning selector through the engine: reasons reach the metrics,
//! history takes over from the model, exploration is bounded, learning can
//! be switched off, history persists across engines and can be reset.

use computeq::metrics::{OutputMemory, SelectionReason};
use computeq::plumbing::backends::cpu_parallel::CpuParallel;
use computeq::plumbing::backends::cpu_scalar::CpuScalar;
use computeq::plumbing::backends::cpu_simd::CpuSimd;
use computeq::plumbing::Decline;
use computeq::plumbing::{Availability, Backend, BackendError, Job, RunStats};
use computeq::plumbing::{PhysicalPlan, PlanOutput};
use computeq::prelude::*;
use computeq::Config;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn config() -> Config {
    Config {
        calibration_budget: Duration::ZERO,
        ..Config::default()
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("computeq-selector-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn reasons(engine: &Engine, xs: &[f32], runs: usize) -> Vec<SelectionReason> {
    (0..runs)
        .map(|_| {
            engine
                .query(xs)
                .map(|x| x * 2.0 + 1.0)
                .with_metrics()
                .sum()
                .1
                .reason
        })
        .collect()
}

/// A CPU backend that computes for real but reports the execution time
/// `time` gives (a fixed one, or one that depends on the test's state):
/// the selector learns from these injected measurements, not from how busy
/// the machine running the test is.
struct FixedTime {
    inner: Arc<dyn Backend>,
    time: Box<dyn Fn() -> Duration + Send + Sync>,
}

impl Backend for FixedTime {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn availability(&self) -> Availability {
        self.inner.availability()
    }
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        self.inner.supports(plan)
    }
    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let out = self.inner.execute(job, stats)?;
        stats.execute = (self.time)();
        Ok(out)
    }
}

/// An engine of the three CPU backends only, each reporting a fixed time
/// (scalar 4 ms, simd 1 ms, parallel 2 ms), priced with a fixed host.
fn fixed_time_engine() -> Engine {
    let fixed = |inner: Arc<dyn Backend>, ms: u64| {
        Arc::new(FixedTime {
            inner,
            time: Box::new(move || Duration::from_millis(ms)),
        })
    };
    Engine::with_config(Config {
        disabled: vec![BackendKind::Wgpu, BackendKind::Cuda],
        cpu_profile: Some(computeq::plumbing::cost::CpuProfile {
            threads: 4,
            ..Default::default()
        }),
        ..config()
    })
    .with_backend(fixed(Arc::new(CpuScalar), 4))
    .with_backend(fixed(Arc::new(CpuSimd), 1))
    .with_backend(fixed(Arc::new(CpuParallel::default()), 2))
}

#[test]
fn the_model_decides_first_and_history_takes_over() {
    let engine = fixed_time_engine();
    let xs = vec![0.5f32; 200_000];
    let r = reasons(&engine, &xs, 40);
    assert!(matches!(r[0], SelectionReason::Model { .. }), "{:?}", r[0]);
    let history = r[10..]
        .iter()
        .filter(|r| matches!(r, SelectionReason::History { .. }))
        .count();
    assert!(history >= 15, "history takes over: {r:?}");
    // Exploration: each plausible alternative until it has `min_samples`
    // (3) runs, on every other run (at most 6), and the early re-checks of
    // the runner-up at the key's 16th and 32nd runs; the selector's own
    // tests pin the schedule down.
    let explored = r
        .iter()
        .filter(|r| **r == SelectionReason::Exploration)
        .count();
    assert!(explored <= 10, "exploration is bounded: {r:?}");
    // What was measured fastest runs once history decides.
    let (_, m) = engine
        .query(&xs)
        .map(|x| x * 2.0 + 1.0)
        .with_metrics()
        .sum();
    if matches!(m.reason, SelectionReason::History { .. }) {
        assert_eq!(m.backend, BackendKind::CpuSimd, "{m:?}");
    }
}

#[test]
fn every_decision_carries_all_candidates_estimates() {
    let engine = Engine::with_config(config());
    let xs = vec![1.0f32; 1000];
    let (_, m) = engine.query(&xs).sum_metrics();
    assert!(m.estimates.len() >= 3, "{:?}", m.estimates);
    assert!(m
        .estimates
        .iter()
        .all(|e| e.seconds.is_finite() && e.seconds > 0.0));
    let explain = engine.query(&xs).explain().sum().to_string();
    assert!(explain.contains("selector=learning"), "{explain}");
    assert!(explain.contains("cpu-simd"), "{explain}");
}

/// `sum` with metrics, as a helper trait to keep the tests short.
trait SumMetrics {
    fn sum_metrics(self) -> (f32, computeq::metrics::ExecutionMetrics);
}

impl SumMetrics for computeq::query::Query<'_, Expr<f32>> {
    fn sum_metrics(self) -> (f32, computeq::metrics::ExecutionMetrics) {
        self.with_metrics().sum()
    }
}

#[test]
fn learning_can_be_switched_off() {
    let c = Config::from_vars(|k| (k == "COMPUTEQ_LEARN").then(|| "0".to_string())).unwrap();
    assert!(!c.learn);
    let engine = Engine::with_config(Config {
        calibration_budget: Duration::ZERO,
        ..c
    });
    let xs = vec![0.5f32; 100_000];
    for r in reasons(&engine, &xs, 12) {
        assert!(matches!(r, SelectionReason::Model { .. }), "{r:?}");
    }
}

#[test]
fn history_persists_across_engines_and_resets() {
    let dir = temp_dir("persist");
    let with_dir = || {
        Engine::with_config(Config {
            cache_dir: Some(dir.clone()),
            ..config()
        })
    };
    let xs = vec![0.5f32; 50_000];
    {
        let a = with_dir();
        // Its devices probed first: runs beside a probe teach nothing.
        a.prepare_devices();
        reasons(&a, &xs, 12);
    } // dropped: history written
    let b = with_dir();
    let r = reasons(&b, &xs, 1);
    // History decides, or re-checks a runner-up that last ran clearly
    // faster (which needs history too); without it, the model would.
    assert!(
        matches!(
            r[0],
            SelectionReason::History { .. } | SelectionReason::Exploration
        ),
        "{r:?}"
    );
    b.selector().reset();
    let r = reasons(&b, &xs, 1);
    assert!(matches!(r[0], SelectionReason::Model { .. }), "{r:?}");
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_history_file_is_ignored_and_rebuilt() {
    let dir = temp_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let path = computeq::plumbing::cost::cache_file::path(&dir, "history");
    std::fs::write(&path, "{\"format\": 42").unwrap();
    {
        let e = Engine::with_config(Config {
            cache_dir: Some(dir.clone()),
            ..config()
        });
        let r = reasons(&e, &[1.0f32; 5000], 4);
        assert!(matches!(r[0], SelectionReason::Model { .. }));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("computeq-cache"), "rebuilt: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn forced_backends_keep_their_reason() {
    let engine = Engine::with_config(config());
    let xs = vec![1.0f32; 1000];
    let (_, m) = engine
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .with_metrics()
        .sum();
    assert_eq!(m.backend, BackendKind::CpuScalar);
    assert_eq!(m.reason, SelectionReason::Forced);
}

/// A selector that answers the candidates in order and leases each
/// decision for `lease` runs, counting how often it is asked; with
/// `predicted` set, each candidate is predicted to take that many seconds.
#[derive(Debug)]
struct Leasing {
    lease: u32,
    predicted: Option<f64>,
    asked: Arc<std::sync::atomic::AtomicU32>,
    generation: Arc<std::sync::atomic::AtomicU64>,
    /// Runs observed, and of them those with a failed attempt.
    observed: Arc<[std::sync::atomic::AtomicU32; 2]>,
}

impl computeq::plumbing::Selector for Leasing {
    fn select(
        &self,
        input: &computeq::plumbing::SelectionInput<'_>,
    ) -> computeq::plumbing::Decision {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        computeq::plumbing::Decision {
            order: input.candidates.iter().copied().collect(),
            reason: SelectionReason::Model {
                estimate: 1e-6,
                runner_up: None,
            },
            estimates: self
                .predicted
                .map(|seconds| {
                    input
                        .candidates
                        .iter()
                        .map(|&backend| computeq::metrics::CandidateEstimate { backend, seconds })
                        .collect()
                })
                .unwrap_or_default(),
            lease: self.lease,
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn observe(
        &self,
        _: &computeq::plumbing::WorkloadCharacteristics,
        m: &computeq::ExecutionMetrics,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        self.observed[0].fetch_add(1, Relaxed);
        if !m.attempts.is_empty() {
            self.observed[1].fetch_add(1, Relaxed);
        }
    }
}

/// cpu-scalar, failing while `failing` is set and taking `delay` longer
/// while `slow` is.
#[derive(Default)]
struct Injected {
    failing: Arc<std::sync::atomic::AtomicBool>,
    slow: Arc<std::sync::atomic::AtomicBool>,
    delay: std::time::Duration,
}

impl Backend for Injected {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuScalar
    }
    fn availability(&self) -> Availability {
        Availability::Available
    }
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        CpuScalar.supports(plan)
    }
    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.failing.load(Relaxed) {
            return Err(BackendError::new(
                BackendKind::CpuScalar,
                computeq::plumbing::Phase::Execute,
                "injected",
            ));
        }
        // Its execution time is the whole call's, the delay included.
        let t = std::time::Instant::now();
        if self.slow.load(Relaxed) {
            std::thread::sleep(self.delay);
        }
        let out = CpuScalar.execute(job, stats);
        stats.execute = t.elapsed();
        out
    }
}

/// A leased run far slower than its decision predicted is observed and
/// ends the lease (the next run asks the selector); runs as fast as
/// predicted keep it, observed one in `OBSERVE_LEASED`.
#[test]
fn a_surprisingly_slow_leased_run_ends_its_lease() {
    use std::sync::atomic::Ordering::Relaxed;
    let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let observed: Arc<[std::sync::atomic::AtomicU32; 2]> = Arc::default();
    let slow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let delay = std::time::Duration::from_millis(20);
    let engine = Engine::with_config(Config {
        disabled: vec![
            BackendKind::Wgpu,
            BackendKind::Cuda,
            BackendKind::CpuParallel,
            BackendKind::CpuSimd,
        ],
        ..config()
    })
    .with_backend(Arc::new(Injected {
        slow: slow.clone(),
        delay,
        ..Injected::default()
    }))
    .with_selector(Box::new(Leasing {
        lease: 16,
        // Far above a 100-element sum's time however busy the machine,
        // far below the injected delay.
        predicted: Some(2e-3),
        asked: asked.clone(),
        generation: Default::default(),
        observed: observed.clone(),
    }));
    let xs = vec![1.0f32; 100];
    let run = || {
        let (s, m) = engine.query(&xs).map(|x| x + 1.0).with_metrics().sum();
        assert_eq!(s, 200.0);
        assert_eq!(m.backend, BackendKind::CpuScalar);
        m
    };
    // Run 1 asks; runs 2-4 are leased, observed on the lease's first and
    // then one in four (runs 1 and 2 observed; the next due is run 6).
    assert_eq!(computeq::plumbing::Decision::OBSERVE_LEASED, 4);
    for _ in 0..4 {
        run();
    }
    assert_eq!(asked.load(Relaxed), 1);
    assert_eq!(observed[0].load(Relaxed), 2);
    // Run 5, leased and not due for observation, takes ten times its
    // prediction: observed, and the lease ends.
    slow.store(true, Relaxed);
    let m = run();
    assert!(m.phases.execute >= delay, "{m:?}");
    assert_eq!(observed[0].load(Relaxed), 3, "the slow run is observed");
    assert_eq!(asked.load(Relaxed), 1);
    // Run 6 asks again (and, slow too, is observed as every asked run is).
    run();
    assert_eq!(asked.load(Relaxed), 2, "the slow run ended the lease");
    assert_eq!(observed[0].load(Relaxed), 4);
    // Run 7, the new lease's first, is slow too: observed as a first
    // run is, and it ends this lease as well.
    run();
    assert_eq!(observed[0].load(Relaxed), 5);
    slow.store(false, Relaxed);
    run();
    assert_eq!(asked.load(Relaxed), 3, "run 7 ended the second lease");
    // Fast again: the third lease holds.
    for _ in 0..4 {
        run();
    }
    assert_eq!(asked.load(Relaxed), 3);
}

/// A leased decision serves the next runs of the same query on the
/// thread without asking the selector, and no run past its lease, a new
/// generation of the selector, another workload or a failed run.
#[test]
fn leased_decisions_skip_selection_until_they_end() {
    use std::sync::atomic::Ordering::Relaxed;
    let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let observed: Arc<[std::sync::atomic::AtomicU32; 2]> = Arc::default();
    let engine = Engine::with_config(Config {
        disabled: vec![
            BackendKind::Wgpu,
            BackendKind::Cuda,
            BackendKind::CpuParallel,
        ],
        ..config()
    })
    .with_backend(Arc::new(Injected {
        failing: failing.clone(),
        ..Injected::default()
    }))
    .with_selector(Box::new(Leasing {
        lease: 4,
        predicted: None,
        asked: asked.clone(),
        generation: generation.clone(),
        observed: observed.clone(),
    }));
    let xs = vec![1.0f32; 100];
    let run = |xs: &[f32]| engine.query(xs).map(|x| x + 1.0).with_metrics().sum();
    // Runs 1 and 6 ask; 2-5, 7 and 8 run on the leases, with their reason.
    for _ in 0..8 {
        let (s, m) = run(&xs);
        assert_eq!(s, 200.0);
        assert!(matches!(m.reason, SelectionReason::Model { .. }), "{m:?}");
        assert_eq!(m.backend, BackendKind::CpuScalar);
    }
    assert_eq!(asked.load(Relaxed), 2);
    // Observed: the runs that asked (1, 6) and of each lease's runs the
    // first and one in `OBSERVE_LEASED` (4 here: 2 and 7).
    assert_eq!(computeq::plumbing::Decision::OBSERVE_LEASED, 4);
    assert_eq!(observed[0].load(Relaxed), 4);
    // Another size is another workload: asked.
    let ys = vec![1.0f32; 101];
    run(&ys);
    assert_eq!(asked.load(Relaxed), 3);
    // Back to the first size: its lease (two of four runs left) is held.
    run(&xs);
    assert_eq!(asked.load(Relaxed), 3);
    // A new generation ends every lease.
    generation.fetch_add(1, Relaxed);
    run(&xs);
    assert_eq!(asked.load(Relaxed), 4);
    // A failed run ends the lease: the next run asks again. The failure
    // is observed, though the run was leased and not the lease's first.
    failing.store(true, Relaxed);
    let before = observed[0].load(Relaxed);
    let (s, m) = run(&xs);
    assert_eq!(observed[0].load(Relaxed), before + 1);
    assert_eq!(observed[1].load(Relaxed), 1);
    assert_eq!(s, 200.0);
    assert!(
        matches!(m.reason, SelectionReason::Fallback { .. }),
        "{m:?}"
    );
    failing.store(false, Relaxed);
    run(&xs);
    assert_eq!(asked.load(Relaxed), 5, "a failure ended the lease");
    // A lease longer than the engine honours is cut to `MAX_LEASE`.
    let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let engine = Engine::with_config(config()).with_selector(Box::new(Leasing {
        lease: u32::MAX,
        predicted: None,
        asked: asked.clone(),
        generation: Default::default(),
        observed: Default::default(),
    }));
    let runs = 2 * computeq::plumbing::Decision::MAX_LEASE + 3;
    for _ in 0..runs {
        engine.query(&xs).map(|x| x + 1.0).sum();
    }
    assert_eq!(asked.load(Relaxed), 3);
}

/// cpu-scalar reporting absurd phase times.
struct Absurd;

impl Backend for Absurd {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuScalar
    }
    fn availability(&self) -> Availability {
        Availability::Available
    }
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        CpuScalar.supports(plan)
    }
    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let out = CpuScalar.execute(job, stats);
        stats.transfer_in = std::time::Duration::MAX;
        stats.execute = std::time::Duration::MAX;
        stats.transfer_out = std::time::Duration::MAX;
        out
    }
}

/// A custom backend's phase times are not trusted: absurd ones are
/// recorded and learned from without a panic, leased runs included.
#[test]
fn absurd_phase_times_do_not_panic() {
    let engine = Engine::with_config(Config {
        disabled: vec![
            BackendKind::Wgpu,
            BackendKind::Cuda,
            BackendKind::CpuParallel,
            BackendKind::CpuSimd,
        ],
        ..config()
    })
    .with_backend(Arc::new(Absurd));
    let xs = vec![1.0f32; 100];
    for _ in 0..40 {
        let (s, m) = engine.query(&xs).map(|x| x + 1.0).with_metrics().sum();
        assert_eq!(s, 200.0);
        assert_eq!(m.backend, BackendKind::CpuScalar);
    }
}

// The bench's fresh mappings (`contains` serves only the bench's realloc).
#[cfg(target_os = "linux")]
#[allow(dead_code)]
#[path = "../benches/common/fresh_mappings.rs"]
mod fresh_mappings;

/// Where this test binary's large blocks come from, per thread (the test
/// that sets it allocates on its own thread): the system allocator, a
/// fresh mapping of its own for each block, or the last freed block again.
#[cfg(target_os = "linux")]
mod regimes {
    use super::fresh_mappings::FreshMappings;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::Mutex;

    pub const SYSTEM: u8 = 0;
    pub const FRESH: u8 = 1;
    pub const RECYCLED: u8 = 2;
    /// Blocks from this size on follow the regime.
    const LARGE: usize = 256 << 10;

    thread_local! {
        static MODE: Cell<u8> = const { Cell::new(SYSTEM) };
    }

    /// Sets this thread's regime.
    pub fn set(mode: u8) {
        MODE.with(|m| m.set(mode));
    }

    fn mode() -> u8 {
        MODE.try_with(Cell::get).unwrap_or(SYSTEM)
    }

    /// Fresh mappings alive.
    static MAPPED: FreshMappings = FreshMappings::new();
    /// The freed block kept for the next request of its layout.
    static KEPT: Mutex<(usize, usize, usize)> = Mutex::new((0, 0, 0));

    pub struct Regimes;

    unsafe impl GlobalAlloc for Regimes {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            if l.size() >= LARGE && l.align() <= 4096 {
                match mode() {
                    FRESH => {
                        let p = MAPPED.map(l);
                        if !p.is_null() {
                            return p;
                        }
                    }
                    RECYCLED => {
                        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
                        if kept.0 != 0 && kept.1 == l.size() && kept.2 == l.align() {
                            return std::mem::take(&mut *kept).0 as *mut u8;
                        }
                    }
                    _ => {}
                }
            }
            // SAFETY: the caller's layout.
            unsafe { System.alloc(l) }
        }

        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            if l.size() >= LARGE {
                if MAPPED.unmap(p) {
                    return;
                }
                if mode() == RECYCLED {
                    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
                    if kept.0 == 0 {
                        // The block is written and resident: kept for reuse.
                        *kept = (p as usize, l.size(), l.align());
                        return;
                    }
                }
            }
            // SAFETY: a block of the system allocator with this layout.
            unsafe { System.dealloc(p, l) }
        }
    }
}

#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOC: regimes::Regimes = regimes::Regimes;

#[cfg(target_os = "linux")]
#[test]
fn runs_into_fresh_and_into_recycled_memory_are_learned_apart() {
    thread_local! {
        static REGIME: std::cell::Cell<u8> = const { std::cell::Cell::new(regimes::SYSTEM) };
    }
    fn regime() -> u8 {
        REGIME.with(|r| r.get())
    }
    fn set(mode: u8) {
        REGIME.with(|r| r.set(mode));
        regimes::set(mode);
    }
    // cpu-simd is the faster into recycled memory, cpu-parallel into fresh.
    let timed = |inner: Arc<dyn Backend>, fresh: u64, recycled: u64| {
        Arc::new(FixedTime {
            inner,
            time: Box::new(move || {
                Duration::from_millis(if regime() == regimes::FRESH {
                    fresh
                } else {
                    recycled
                })
            }),
        })
    };
    let engine = Engine::with_config(Config {
        disabled: vec![BackendKind::Wgpu, BackendKind::Cuda, BackendKind::CpuScalar],
        cpu_profile: Some(computeq::plumbing::cost::CpuProfile {
            threads: 4,
            ..Default::default()
        }),
        ..config()
    })
    .with_backend(timed(Arc::new(CpuSimd), 10, 1))
    .with_backend(timed(Arc::new(CpuParallel::default()), 2, 5));
    // 400 KB of output: looked at, and prefaulted when fresh.
    let xs = vec![0.25f32; 100_000];
    let run = |engine: &Engine| {
        let (v, m): (Vec<f32>, _) = engine.query(&xs).map(|x| x * 2.0).with_metrics().collect();
        assert!(v.iter().all(|&y| y == 0.5));
        m
    };
    let phase = |mode: u8, runs: usize| -> Vec<computeq::metrics::ExecutionMetrics> {
        set(mode);
        let ms = (0..runs).map(|_| run(&engine)).collect();
        set(regimes::SYSTEM);
        ms
    };
    let fresh = phase(regimes::FRESH, 40);
    assert!(
        fresh.iter().all(|m| m.output_memory == OutputMemory::Fresh),
        "{:?}",
        fresh.iter().map(|m| m.output_memory).collect::<Vec<_>>()
    );
    assert!(
        fresh[0].to_string().contains("output_memory=fresh"),
        "{}",
        fresh[0]
    );
    // explain shows what the next run expects.
    let explain = engine
        .query(&xs)
        .map(|x| x * 2.0)
        .explain()
        .collect::<Vec<f32>>()
        .to_string();
    assert!(explain.contains("output_memory=fresh"), "{explain}");
    let settled = |ms: &[computeq::metrics::ExecutionMetrics]| {
        ms.iter()
            .rev()
            .take(8)
            .filter(|m| matches!(m.reason, SelectionReason::History { .. }))
            .map(|m| m.backend)
            .collect::<Vec<_>>()
    };
    let last = settled(&fresh);
    assert!(
        !last.is_empty() && last.iter().all(|&b| b == BackendKind::CpuParallel),
        "into fresh memory: {last:?}"
    );
    // Recycled: the first run expects fresh memory (what the last run got),
    // and from then on the recycled bucket is learned on its own.
    let recycled = phase(regimes::RECYCLED, 40);
    assert!(
        recycled[1..]
            .iter()
            .all(|m| m.output_memory == OutputMemory::Resident),
        "{:?}",
        recycled.iter().map(|m| m.output_memory).collect::<Vec<_>>()
    );
    let last = settled(&recycled);
    assert!(
        !last.is_empty() && last.iter().all(|&b| b == BackendKind::CpuSimd),
        "into recycled memory: {last:?}"
    );
    // Back to fresh memory: what was learned of it still holds.
    let again = phase(regimes::FRESH, 6);
    let by_history: Vec<_> = again[1..]
        .iter()
        .filter(|m| matches!(m.reason, SelectionReason::History { .. }))
        .map(|m| m.backend)
        .collect();
    assert!(
        !by_history.is_empty() && by_history.iter().all(|&b| b == BackendKind::CpuParallel),
        "fresh memory again: {:?}",
        again
            .iter()
            .map(|m| (m.backend, m.reason))
            .collect::<Vec<_>>()
    );
}
