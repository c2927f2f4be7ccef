//! Calibration: measuring this machine so that the cost model's figures are
//! facts rather than priors.
//!
//! * The CPU: read bandwidth from DRAM and from cache with one thread and
//!   with the whole pool, the pool's wake-up cost, the cost of one block
//!   operation and of a transcendental, page-fault cost of fresh outputs.
//!   [`calibrate_cpu`] runs within a time budget,
//!   `Config::calibration_budget` (200 ms by
//!   default; the quick run needs ~50 ms on a quiet machine), in a thread
//!   of its own: the first query waits for it at most three quarters of
//!   the budget (the rest is the query's own first run) and otherwise goes
//!   on with the priors, while the measurement finishes and is used from a
//!   later query on; `runtime::calibrate_full` is the long, explicit run.
//!   The same thread then probes the CPU backends three times more, 1 s,
//!   4 s and 16 s after, ~10 ms each, and keeps a later probe's figures
//!   when they are faster (a short probe on a shared machine sometimes
//!   meets a slow stretch of it: `Recheck`).
//! * Devices: a device backend implements [`Calibrate`] (timed uploads,
//!   downloads, whole runs of the smallest query, a read kernel, a compile) and
//!   [`calibrate_device`] fits a [`DeviceProfile`] from those timings
//!   (latency + bytes/bandwidth by least squares over several sizes).
//!
//! Results persist per machine, device and library version in the cache
//! directory ([`super::cache_file`]), with a [`DeviceRecord`] of the device
//! each device backend opened, so that a later process prices a device
//! (and judges which plans it can run) without opening it; the process keeps one CPU profile that
//! every engine shares, published with a generation number so selectors
//! pick up a later full calibration without a lock on the query path.

use super::cache_file;
use super::profile::{CpuProfile, DeviceProfile};
use crate::types::BackendKind;
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The file kind of persisted calibrations.
const KIND: &str = "calibration";

/// What is persisted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct CalibrationFile {
    /// The host, when measured.
    cpu: Option<CpuProfile>,
    /// Whether `cpu` came from the full run.
    cpu_full: bool,
    /// Device profiles by [`Calibrate::device_id`].
    devices: BTreeMap<String, DeviceProfile>,
    /// The device each device backend opened, by its
    /// `Backend::device_key`.
    opened: BTreeMap<String, DeviceRecord>,
}

/// What a device backend remembers of the device it opened, so that a
/// later process can price that device from its persisted profile and
/// judge plans for it without opening it ([`recall_device`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// The device's [`Calibrate::device_id`]: the key of its profile.
    pub device_id: String,
    /// What the backend judges plans by (capabilities, limits), in the
    /// backend's own format; a backend that cannot read it accepts plans
    /// and lets the run tell.
    pub facts: serde_json::Value,
}

struct Host {
    profile: Option<CpuProfile>,
    full: bool,
    /// A quick calibration is under way in its own thread.
    calibrating: bool,
}

/// The process-wide CPU profile, published with a generation number.
///
/// No lock is held while the cache file is read or the CPU measured. The
/// quick measurement runs in a thread of its own; the first query waits
/// for it at most its budget (the condition variable releases the lock
/// while it waits) and otherwise goes on with the priors, and the result
/// is picked up by its generation on a later query. A query on a worker of
/// the rayon pool does not wait at all: the measurement needs the pool,
/// and a query inside `par_iter` on every worker would hold it.
struct HostCell {
    host: Mutex<Host>,
    /// Signalled when a measurement has ended (published or not).
    ready: Condvar,
    generation: AtomicU64,
}

impl HostCell {
    const fn new() -> HostCell {
        HostCell {
            host: Mutex::new(Host {
                profile: None,
                full: false,
                calibrating: false,
            }),
            ready: Condvar::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// See [`host_profile`]; `measure` is [`calibrate_cpu`] and `recheck`
    /// the backend probe's [`Recheck`] but in tests.
    fn profile(
        &'static self,
        cache_dir: Option<&Path>,
        budget: Duration,
        measure: impl FnOnce(Duration) -> CpuProfile + Send + 'static,
        recheck: Option<Recheck>,
    ) -> CpuProfile {
        let waited_from = Instant::now();
        if let Some(p) = self.current() {
            return p;
        }
        // The file is read without the lock held (two first queries may
        // both read it; the first to publish wins).
        if let Some(f) = cache_dir.and_then(|dir| load(&cache_file::path(dir, KIND))) {
            if let Some(cpu) = f.cpu {
                return self.publish(cpu, f.cpu_full, false).0;
            }
        }
        if budget.is_zero() {
            return CpuProfile::default();
        }
        let start = {
            let mut host = self.host.lock();
            let start = host.profile.is_none() && !host.calibrating;
            host.calibrating |= start;
            start
        };
        if start {
            let dir = cache_dir.map(Path::to_path_buf);
            let spawned = std::thread::Builder::new()
                .name("computeq-calibrate".into())
                .spawn(move || self.measure_in_background(dir, budget, measure, recheck));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "computeq: cannot start the CPU calibration; using priors");
                self.host.lock().calibrating = false;
                return CpuProfile::default();
            }
        }
        if rayon::current_thread_index().is_some() {
            return self.current().unwrap_or_default();
        }
        // A quarter of the budget is left to the query's own first run
        // (its compile, the pricing), so that the whole first query stays
        // within the budget.
        let deadline = waited_from + budget * 3 / 4;
        let mut host = self.host.lock();
        while host.profile.is_none() && host.calibrating {
            if self.ready.wait_until(&mut host, deadline).timed_out() {
                break;
            }
        }
        match &host.profile {
            Some(p) => p.clone(),
            None => {
                drop(host);
                tracing::debug!(
                    budget_ms = budget.as_millis() as u64,
                    "computeq.calibrate: not done within the budget; priors until it is"
                );
                CpuProfile::default()
            }
        }
    }

    /// The background half of [`Self::profile`]: measures within `budget`,
    /// publishes (unless a full calibration or a persisted profile came
    /// first), wakes the waiting queries and persists; then, when the
    /// profile it published is still the one in force, `recheck`s it.
    fn measure_in_background(
        &self,
        cache_dir: Option<std::path::PathBuf>,
        budget: Duration,
        measure: impl FnOnce(Duration) -> CpuProfile,
        recheck: Option<Recheck>,
    ) {
        let measured = {
            let _span =
                tracing::debug_span!("computeq.calibrate", budget_ms = budget.as_millis() as u64)
                    .entered();
            let _busy = super::background::busy();
            // A panic here must not leave `calibrating` set for good.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measure(budget)))
        };
        self.host.lock().calibrating = false;
        let published = match measured {
            Ok(cpu) => {
                tracing::debug!(?cpu, "computeq.calibrated");
                let (cpu, ours) = self.publish(cpu, false, false);
                ours.then_some(cpu)
            }
            Err(_) => {
                tracing::warn!("computeq: the CPU calibration panicked; using priors");
                None
            }
        };
        self.ready.notify_all();
        let Some(cpu) = published else {
            return;
        };
        if let Some(dir) = &cache_dir {
            persist_quick(dir, &cpu);
        }
        if let Some(r) = recheck {
            self.recheck(cpu, cache_dir.as_deref(), r);
        }
    }

    /// Runs `r`'s probe again after each of its waits and publishes (and
    /// persists) its figures when they are faster than those in force, or
    /// those in force are the priors (the quick calibration ran out of
    /// time before its probe; [`CpuProfile::take_faster_probe`]), as long
    /// as the profile in force is the one this calibration published (a
    /// full calibration, or anything else published meanwhile, ends the
    /// rechecks).
    fn recheck(&self, mut cpu: CpuProfile, cache_dir: Option<&Path>, r: Recheck) {
        for &wait in r.after {
            std::thread::sleep(wait);
            if self.current().as_ref() != Some(&cpu) {
                return;
            }
            let mut again = cpu.clone();
            let busy = super::background::busy();
            let probed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (r.probe)(&mut again, Instant::now() + r.budget)
            }));
            drop(busy);
            // A probe that panicked or fitted an implausible figure is
            // no faster measurement (a figure the sanitizing would reset
            // to its prior must not win).
            if probed.is_err() || !again.clone().sanitized().1.is_empty() {
                continue;
            }
            let mut faster = cpu.clone();
            if !faster.take_faster_probe(&again, RECHECK_MARGIN) {
                continue;
            }
            {
                let mut host = self.host.lock();
                if host.full || host.profile.as_ref() != Some(&cpu) {
                    return;
                }
                host.profile = Some(faster.clone());
                self.generation.fetch_add(1, Ordering::Release);
            }
            tracing::debug!(
                simd_fixed_ns = faster.simd_fixed * 1e9,
                was_ns = cpu.simd_fixed * 1e9,
                "computeq.calibrate: a later probe measured the backends faster"
            );
            if let Some(dir) = cache_dir {
                persist_quick(dir, &faster);
            }
            cpu = faster;
        }
    }

    /// The published profile, if any.
    fn current(&self) -> Option<CpuProfile> {
        self.host.lock().profile.clone()
    }

    /// Publishes `cpu` (from the full run when `full`) and moves the
    /// generation on, unless a profile is there and `replace` is false
    /// (a full calibration finished while a quick one ran). Returns the
    /// profile in force and whether it is `cpu`.
    fn publish(&self, cpu: CpuProfile, full: bool, replace: bool) -> (CpuProfile, bool) {
        let mut host = self.host.lock();
        if let (Some(p), false) = (&host.profile, replace) {
            return (p.clone(), false);
        }
        host.profile = Some(cpu.clone());
        host.full = full;
        self.generation.fetch_add(1, Ordering::Release);
        drop(host);
        self.ready.notify_all();
        (cpu, true)
    }
}

/// Persists a quick calibration's `cpu` in `dir`, unless the file holds
/// a full one (better than any quick one, another process's included).
fn persist_quick(dir: &Path, cpu: &CpuProfile) {
    persist(dir, |f| {
        if !f.cpu_full || f.cpu.is_none() {
            f.cpu = Some(cpu.clone());
            f.cpu_full = false;
        }
    });
}

/// The backend probe run again after a quick calibration
/// ([`HostCell::recheck`]). Its fixed costs rest on some 10 ms of runs,
/// and on a shared machine a stretch that short is sometimes slow as a
/// whole: on the 2-vCPU VMs of this project about half of a noisy hour's
/// processes fitted `cpu-simd`'s fixed cost at 1.3-2x what its runs took
/// a second later (docs/performance.md, "The calibration's spread"), and
/// the model priced every small query that much too high. Three later
/// probes, each ~10 ms of work in the calibration's thread, spread over
/// 16 s (a stretch of other work, a device's calibration on the same
/// cores, lasts seconds), let a process (and the file it persists, which
/// later processes load instead of calibrating) keep the fastest of four
/// draws; a quick calibration that never reached its probe gets the
/// first of them.
#[derive(Clone, Copy)]
struct Recheck {
    probe: BackendProbe,
    /// The wait before each probe.
    after: &'static [Duration],
    /// Each probe's budget.
    budget: Duration,
}

/// The waits before [`Recheck`]'s probes: they run 1 s, 4 s and 16 s
/// after the quick calibration.
const RECHECKS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(12),
];

/// How much faster (a fraction of `cpu-simd`'s fixed cost) a later probe
/// must be to replace the figures in force: a new profile ends every
/// thread's leased decisions, which noise should not do.
const RECHECK_MARGIN: f64 = 0.15;

static HOST: HostCell = HostCell::new();

/// Incremented whenever the process-wide CPU profile changes; selectors
/// compare it (one load) to know when to re-read the profile.
pub fn generation() -> u64 {
    HOST.generation.load(Ordering::Acquire)
}

/// The process-wide CPU profile: from memory, else from the cache file in
/// `cache_dir`, else measured in a thread of its own within `budget` (and
/// persisted). The caller waits at most 3/4 of `budget` for it and
/// gets the priors if it is not done by then (a caller on the rayon pool
/// does not wait); the measurement is published when it ends (a new
/// [`generation`]). With a zero budget and nothing persisted, the priors,
/// and nothing is measured.
pub fn host_profile(cache_dir: Option<&Path>, budget: Duration) -> CpuProfile {
    let recheck = BACKEND_PROBE.get().map(|&probe| Recheck {
        probe,
        after: &RECHECKS,
        budget: Plan::quick().probe_budget,
    });
    HOST.profile(cache_dir, budget, calibrate_cpu, recheck)
}

/// Runs the full CPU calibration, makes it the process-wide profile and
/// persists it in `cache_dir` (the body of `runtime::calibrate_full`).
pub fn calibrate_full_into(cache_dir: Option<&Path>) -> CpuProfile {
    let busy = super::background::busy();
    let cpu = measure_cpu(&Plan::full(), Instant::now() + Duration::from_secs(10));
    drop(busy);
    // A figure timed at zero on a coarse clock would be an infinite speed.
    let cpu = cpu.sanitized().0;
    HOST.publish(cpu.clone(), true, true);
    if let Some(dir) = cache_dir {
        persist(dir, |f| {
            f.cpu = Some(cpu.clone());
            f.cpu_full = true;
        });
    }
    cpu
}

/// The calibration file at `path`, with every implausible profile (a
/// figure not finite or outside its range, e.g. a zero bandwidth that
/// would price every run at infinity) dropped, with one warning.
fn load(path: &Path) -> Option<CalibrationFile> {
    let mut f = cache_file::read::<CalibrationFile>(path, KIND)?;
    let mut dropped = Vec::new();
    if let Some(cpu) = &f.cpu {
        let bad = cpu.clone().sanitized().1;
        if !bad.is_empty() {
            dropped.push(format!("cpu profile ({})", bad.join(", ")));
            f.cpu = None;
            f.cpu_full = false;
        }
    }
    f.devices.retain(|id, p| {
        let bad = p.clone().sanitized().1;
        if !bad.is_empty() {
            dropped.push(format!("device `{id}` profile ({})", bad.join(", ")));
        }
        bad.is_empty()
    });
    cache_file::warn_dropped(path, &dropped);
    Some(f)
}

/// Read-modify-write of the calibration file: merges with what another
/// process may have written meanwhile, then replaces it atomically.
fn persist(dir: &Path, update: impl FnOnce(&mut CalibrationFile)) {
    let path = cache_file::path(dir, KIND);
    // Locked: another process's device profile written between this read
    // and the write below would be lost. A calibration has no later write
    // to defer to: past the lock's wait it goes ahead unlocked.
    let lock = cache_file::FileLock::acquire(&path);
    if lock.busy() {
        tracing::warn!(path = %path.display(), "computeq: cache file stays locked; writing the calibration unlocked");
    }
    let mut f = load(&path).unwrap_or_default();
    update(&mut f);
    if let Err(e) = cache_file::write(&path, KIND, &f) {
        tracing::warn!(path = %path.display(), error = %e, "computeq: cannot persist calibration");
    }
}

/// Measures the CPU backends' own fixed costs and speeds into a profile,
/// before a deadline: the runtime's probe, which runs real queries on the
/// backends (this layer cannot name them). Set once per process.
pub type BackendProbe = fn(&mut CpuProfile, Instant);

static BACKEND_PROBE: std::sync::OnceLock<BackendProbe> = std::sync::OnceLock::new();

/// Makes `probe` part of every CPU calibration of this process (the first
/// probe set stays; the runtime sets it when it creates an engine).
pub fn set_backend_probe(probe: BackendProbe) {
    let _ = BACKEND_PROBE.set(probe);
}

/// Measures the CPU within `budget` (wall time). Figures not measured
/// before the budget runs out keep their priors.
pub fn calibrate_cpu(budget: Duration) -> CpuProfile {
    // Implausible figures (one timed at zero on a coarse clock is an
    // infinite speed) keep their priors.
    measure_cpu(&Plan::quick(), Instant::now() + budget)
        .sanitized()
        .0
}

/// Sizes and repetitions of one calibration run.
struct Plan {
    dram_bytes: usize,
    dram_reps: usize,
    cache_reps: usize,
    wake_reps: usize,
    idle_wake_reps: usize,
    op_reps: usize,
    /// The longest the backend probe may take.
    probe_budget: Duration,
}

impl Plan {
    fn quick() -> Plan {
        Plan {
            dram_bytes: 64 << 20,
            dram_reps: 3,
            cache_reps: 10,
            wake_reps: 41,
            idle_wake_reps: 0,
            op_reps: 200,
            probe_budget: Duration::from_millis(15),
        }
    }

    fn full() -> Plan {
        Plan {
            dram_bytes: 256 << 20,
            dram_reps: 9,
            cache_reps: 60,
            wake_reps: 401,
            idle_wake_reps: 21,
            op_reps: 3000,
            probe_budget: Duration::from_millis(300),
        }
    }
}

/// The caches of CPU 0 from sysfs: (level, bytes) per index (level 0
/// when sysfs does not say, as the last-level size was read before the
/// level was needed).
fn caches() -> impl Iterator<Item = (u32, f64)> {
    (0..8).filter_map(|i| {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let s = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let level = std::fs::read_to_string(format!("{dir}/level"))
            .ok()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        let s = s.trim();
        let (num, mul) = match s.strip_suffix('K') {
            Some(n) => (n, 1024.0),
            None => match s.strip_suffix('M') {
                Some(n) => (n, 1024.0 * 1024.0),
                None => (s, 1.0),
            },
        };
        Some((level, num.parse::<f64>().ok()? * mul))
    })
}

/// Last-level cache size from sysfs (largest cache), bytes.
fn llc_bytes() -> Option<f64> {
    caches().map(|c| c.1).reduce(f64::max)
}

/// One core's level-2 cache size from sysfs, bytes.
fn l2_bytes() -> Option<f64> {
    caches().filter(|c| c.0 == 2).map(|c| c.1).reduce(f64::max)
}

/// A sum as `cpu-simd`'s reductions run it (its own fold kernel, for the
/// instruction set it runs, `super::CpuKernels`): the bandwidth-bound loop
/// of docs/architecture.md. Before the runtime sets the kernels, a sum
/// with 8 `wide` accumulators (for the build's baseline: on x86-64, SSE2,
/// ~1.7x slower from the level-2 cache than the AVX2 fold here).
fn sum_wide(xs: &[f32]) -> f32 {
    if let Some(k) = super::cpu_kernels() {
        return (k.sum)(xs);
    }
    use wide::f32x8;
    let mut acc = [f32x8::ZERO; 8];
    let mut chunks = xs.chunks_exact(64);
    for c in &mut chunks {
        for (k, a) in acc.iter_mut().enumerate() {
            let v: [f32; 8] = c[k * 8..k * 8 + 8].try_into().expect("8 lanes");
            *a += f32x8::from(v);
        }
    }
    let mut s: f32 = chunks.remainder().iter().sum();
    for a in acc {
        s += a.reduce_add();
    }
    s
}

/// `reps` times `out = a * b` over a block: `cpu-simd`'s kernel when the
/// runtime set it, else a `wide` loop for the build's baseline (which
/// timed a block operation at ~4x the AVX2 kernel's time here).
fn block_mul(a: &[f32], b: &[f32], out: &mut [f32], reps: usize) {
    if let Some(k) = super::cpu_kernels() {
        return (k.mul)(a, b, out, reps);
    }
    use wide::f32x8;
    for _ in 0..reps {
        for ((o, x), y) in out
            .chunks_exact_mut(8)
            .zip(a.chunks_exact(8))
            .zip(b.chunks_exact(8))
        {
            let x = f32x8::from(<[f32; 8]>::try_from(x).expect("8"));
            let y = f32x8::from(<[f32; 8]>::try_from(y).expect("8"));
            o.copy_from_slice(&(x * y).to_array());
        }
        black_box(&mut *out);
    }
}

/// `reps` times `exp` then `sin` of a block (two transcendental
/// operations per element), as [`block_mul`] chooses its loop.
fn block_transcendental(xs: &[f32], out: &mut [f32], reps: usize) {
    if let Some(k) = super::cpu_kernels() {
        return (k.transcendental)(xs, out, reps);
    }
    use wide::f32x8;
    for _ in 0..reps {
        for (o, x) in out.chunks_exact_mut(8).zip(xs.chunks_exact(8)) {
            let x = f32x8::from(<[f32; 8]>::try_from(x).expect("8"));
            o.copy_from_slice(&(x.exp() + x.sin()).to_array());
        }
        black_box(&mut *out);
    }
}

fn par_sum(xs: &[f32], tasks: usize) -> f32 {
    fn rec(xs: &[f32], tasks: usize) -> f32 {
        if tasks <= 1 || xs.len() < 4096 {
            return sum_wide(xs);
        }
        let mid = xs.len() / 2;
        let (a, b) = rayon::join(
            || rec(&xs[..mid], tasks / 2),
            || rec(&xs[mid..], tasks - tasks / 2),
        );
        a + b
    }
    rec(xs, tasks)
}

/// The median time of `reps` runs of `f` (at least one; fewer than `reps`
/// once `deadline` has passed). A median, not the fastest run: the model
/// prices the typical run, which is what a query meets and what the
/// history and `selector_eval` measure. Priced from the fastest runs,
/// every backend's estimates came out at 0.75-0.89x the measured medians
/// on a shared VM (docs/performance.md, "The model prices a typical
/// run").
fn typical_of(reps: usize, deadline: Instant, f: impl FnMut()) -> Option<f64> {
    timings(reps, deadline, f).map(|(median, _)| median)
}

/// The median and the fastest of up to `reps` timed runs of `f` (see
/// [`typical_of`]).
fn timings(reps: usize, deadline: Instant, mut f: impl FnMut()) -> Option<(f64, f64)> {
    let mut v = Vec::with_capacity(reps.max(1));
    for i in 0..reps.max(1) {
        if i > 0 && Instant::now() > deadline {
            break;
        }
        let t = Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(f64::total_cmp);
    Some((*v.get(v.len() / 2)?, *v.first()?))
}

fn median_of(reps: usize, deadline: Instant, mut f: impl FnMut() -> f64) -> Option<f64> {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        if Instant::now() > deadline && v.len() >= 3 {
            break;
        }
        v.push(f());
    }
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn measure_cpu(plan: &Plan, deadline: Instant) -> CpuProfile {
    let mut p = CpuProfile {
        measured: true,
        ..CpuProfile::default()
    };
    let threads = rayon::current_num_threads().max(1);
    p.threads = threads as u32;
    let tasks = threads * 4;
    // The pool exists before anything is timed.
    rayon::join(|| (), || ());

    // Pool wake-up: the join tree of the parallel backend over empty
    // leaves, from this (non-pool) thread, back to back.
    fn empty_tree(tasks: usize) {
        if tasks > 1 {
            rayon::join(|| empty_tree(tasks / 2), || empty_tree(tasks - tasks / 2));
        } else {
            black_box(());
        }
    }
    if let Some(w) = median_of(plan.wake_reps, deadline, || {
        let t = Instant::now();
        empty_tree(tasks);
        t.elapsed().as_secs_f64()
    }) {
        p.pool_wakeup = w;
    }
    if plan.idle_wake_reps > 0 {
        // After idling, workers sleep: a query that arrives now pays more.
        if let Some(idle) = median_of(plan.idle_wake_reps, deadline, || {
            std::thread::sleep(Duration::from_millis(2));
            let t = Instant::now();
            empty_tree(tasks);
            t.elapsed().as_secs_f64()
        }) {
            // Queries come both back to back and after pauses.
            p.pool_wakeup = (p.pool_wakeup + idle) / 2.0;
        }
    }

    // Block operations in L1: out = a * b over 1024-element blocks, the
    // shape of one instruction of the block program, and two
    // transcendental instructions, through `cpu-simd`'s own kernels.
    {
        let a = vec![1.0001f32; 1024];
        let b = vec![0.9999f32; 1024];
        let mut out = vec![0f32; 1024];
        if let Some(t) = typical_of(plan.op_reps.div_ceil(50), deadline, || {
            block_mul(&a, &b, &mut out, 50);
        }) {
            p.simd_op = t / (50.0 * 1024.0);
        }
        let xs: Vec<f32> = (0..1024).map(|i| i as f32 * 0.001).collect();
        if let Some(t) = typical_of(plan.op_reps.div_ceil(50).max(3), deadline, || {
            block_transcendental(&xs, &mut out, 10);
        }) {
            p.simd_transcendental = t / (10.0 * 1024.0 * 2.0);
        }
    }
    if Instant::now() > deadline {
        return p;
    }

    // Near-cache bandwidth: a buffer half of one core's level-2 cache
    // (the working set of a `cpu-simd` stage over 10^4-10^5 elements,
    // which the last-level figure below priced at 1.5-3x its time).
    let l2 = l2_bytes().unwrap_or(p.near_bytes);
    p.near_bytes = l2;
    {
        let n = ((l2 / 2.0) as usize / 4).clamp(4 << 10, 1 << 20);
        let xs = vec![1.0f32; n];
        let bytes = (n * 4) as f64;
        black_box(sum_wide(&xs));
        if let Some(t) = typical_of(plan.cache_reps * 4, deadline, || {
            black_box(sum_wide(black_box(&xs)));
        }) {
            p.near_bandwidth_one = bytes / t;
        }
        // Every thread reads its own copy from its own level-2 cache.
        let copies: Vec<Vec<f32>> = (0..threads).map(|_| xs.clone()).collect();
        let wakeup = p.pool_wakeup;
        if let Some(b) = parallel_bandwidth(
            plan.cache_reps * 4,
            deadline,
            p.near_bandwidth_one,
            || {
                use rayon::prelude::*;
                black_box(copies.par_iter().map(|c| sum_wide(c)).sum::<f32>())
            },
            |t| bytes * threads as f64 / (t - wakeup).max(t * 0.2),
        ) {
            p.near_bandwidth_all = b;
        }
    }
    if Instant::now() > deadline {
        return p;
    }

    // Cache bandwidth: a buffer a quarter of the last-level cache.
    // Virtual machines sometimes report absurd sizes (hundreds of MiB):
    // past 64 MiB, assume 32 MiB.
    let llc = llc_bytes()
        .filter(|&b| b <= 64.0 * 1024.0 * 1024.0)
        .unwrap_or(32.0 * 1024.0 * 1024.0);
    p.cache_bytes = llc;
    {
        let n = ((llc / 4.0) as usize / 4).clamp(64 << 10, 4 << 20);
        let xs = vec![1.0f32; n];
        let bytes = (n * 4) as f64;
        black_box(sum_wide(&xs));
        if let Some(t) = typical_of(plan.cache_reps, deadline, || {
            black_box(sum_wide(black_box(&xs)));
        }) {
            p.cache_bandwidth_one = bytes / t;
        }
        let wakeup = p.pool_wakeup;
        if let Some(b) = parallel_bandwidth(
            plan.cache_reps,
            deadline,
            p.cache_bandwidth_one,
            || black_box(par_sum(black_box(&xs), tasks)),
            // The timed call includes one wake-up; take it out.
            |t| bytes / (t - wakeup).max(t * 0.2),
        ) {
            p.cache_bandwidth_all = b;
        }
    }
    if Instant::now() > deadline {
        return p;
    }

    // The backends' fixed costs, from runs of the backends themselves (the
    // figures above are raw loops; a backend's call adds its set-up, which
    // decides the price of a small query). Before the DRAM figures, which
    // take what is left of the budget, with a share of its own.
    if let (Some(probe), true) = (BACKEND_PROBE.get(), Instant::now() < deadline) {
        let until = deadline.min(Instant::now() + plan.probe_budget);
        // A panic in the probe keeps what was measured before it.
        let mut probed = p.clone();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| probe(&mut probed, until)))
            .is_ok()
        {
            p = probed;
        }
    }

    // DRAM bandwidth and the first-touch cost of fresh pages: only when
    // the remaining budget covers the buffer's first touch and passes
    // (priced with what was just measured, pessimistically).
    'dram: {
        let n = (plan.dram_bytes / 4).max(2 * llc as usize / 4);
        let bytes = (n * 4) as f64;
        let needed = 2.0 * bytes / 2e9
            + bytes * (2 * plan.dram_reps) as f64 / p.cache_bandwidth_one.min(p.bandwidth_one);
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        if needed > left {
            break 'dram;
        }
        // Writing every page of a fresh buffer once: page faults and
        // zeroing. Twice, the faster kept: the process's first large
        // mapping was 2-3x slower than the next ones (0.8 against 2.8 GB/s
        // on this VM), and the model prices the steady state.
        let touch = || {
            let t = Instant::now();
            // Allocated as the backends' outputs are, huge pages and all,
            // so that the faults measured are the faults they take (an
            // output past this buffer's size and 256 MiB, on 4 KiB pages,
            // is priced at this rate too: its history corrects it).
            let mut xs: Vec<f32> = crate::types::vec_for_output(n);
            xs.resize(n, 1.0);
            (xs, t.elapsed().as_secs_f64())
        };
        let (xs, first) = touch();
        drop(xs);
        let (xs, second) = touch();
        let first_touch = first.min(second);
        if let Some(t) = typical_of(plan.dram_reps, deadline, || {
            black_box(sum_wide(black_box(&xs)));
        }) {
            p.bandwidth_one = bytes / t;
            // First touch = faults + the write itself at about read speed.
            p.fresh_write_bandwidth = bytes / (first_touch - t * 0.5).max(t * 0.5);
        }
        if let Some(b) = parallel_bandwidth(
            plan.dram_reps,
            deadline,
            p.bandwidth_one,
            || black_box(par_sum(black_box(&xs), tasks)),
            |t| bytes / t,
        ) {
            p.bandwidth_all = b;
        }
    }
    p
}

/// How many times, at most, a parallel bandwidth is measured: again while
/// it stays below the one-thread figure.
const PARALLEL_RETRIES: usize = 3;

/// The pool's bandwidth from `run` (timed `reps` times, the median kept, and
/// turned into bytes per second by `bandwidth`), measured again while even
/// its fastest run stays below `one`, the one-thread figure, and the
/// budget lasts: something else held a core (see
/// `CpuProfile::sanitized`). `None` when none was taken.
fn parallel_bandwidth<R>(
    reps: usize,
    deadline: Instant,
    one: f64,
    mut run: impl FnMut() -> R,
    bandwidth: impl Fn(f64) -> f64,
) -> Option<f64> {
    // The median of the try whose fastest run was fastest; tried again
    // only while even the fastest run stays below `one` (the medians of
    // two threads often did on this VM, and retrying on them made the
    // calibration overrun the first query's wait).
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..PARALLEL_RETRIES {
        if let Some((median, fastest)) = timings(reps, deadline, || {
            run();
        }) {
            let (typical, peak) = (bandwidth(median), bandwidth(fastest));
            if best.is_none_or(|(_, p)| peak > p) {
                best = Some((typical, peak));
            }
        }
        if best.is_some_and(|(_, p)| p >= one) || Instant::now() > deadline {
            break;
        }
    }
    best.map(|(typical, _)| typical)
}

/// Timing primitives a device backend offers for calibration.
///
/// A device backend (wgpu, CUDA) implements this on its device handle; the
/// runtime calls [`device_profile`] with it once, lazily, the first time
/// the device is used (the fit itself is shared in [`calibrate_device`]).
/// Every method times one operation end to end (until the device has
/// finished, e.g. after a fence or `device.poll(wait)`), and returns `None`
/// when the operation is not possible; calibration then keeps the prior
/// for the figures that depend on it.
pub trait Calibrate {
    /// Which backend this device serves.
    fn kind(&self) -> BackendKind;
    /// A stable identity of the device for the cache key: backend, adapter
    /// name, driver and its version (e.g. `wgpu/llvmpipe/Mesa 24.2`).
    fn device_id(&self) -> String;
    /// Whether the device is a software implementation (lavapipe, llvmpipe).
    fn software(&self) -> bool {
        false
    }
    /// Copies `bytes` from host memory into a device buffer.
    fn time_upload(&self, bytes: usize) -> Option<Duration>;
    /// Copies `bytes` from a device buffer into host memory.
    fn time_download(&self, bytes: usize) -> Option<Duration>;
    /// One run of the smallest query (a sum of one element): its
    /// dispatches alone and how many they were, and the whole run as its
    /// metrics time it (upload, dispatches, readback).
    fn time_smallest_run(&self) -> Option<SmallestRun>;
    /// Reads a resident buffer of `bytes` once with a simple kernel (e.g. a
    /// one-pass sum of `f32`), including its one dispatch.
    fn time_read(&self, bytes: usize) -> Option<Duration>;
    /// `ops` simple arithmetic operations per element over `elements`
    /// elements of a resident buffer (compute-bound kernel).
    fn time_ops(&self, _elements: usize, _ops: u32) -> Option<Duration> {
        None
    }
    /// Builds one new pipeline or module from source (not cached).
    fn time_compile(&self) -> Option<Duration> {
        None
    }
}

/// The times of one run of the smallest query ([`Calibrate::time_smallest_run`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmallestRun {
    /// Its dispatches, submitted and waited for (the execute phase).
    pub dispatch: Duration,
    /// How many dispatches that was (a sum's kernel plan has two: the
    /// workgroups' partials and their combine).
    pub launches: u32,
    /// The whole run: its upload, the dispatch and the readback.
    pub whole: Duration,
}

/// Fits `seconds = latency + bytes / bandwidth` by least squares over
/// `(bytes, seconds)` samples; `None` with fewer than two distinct sizes or
/// a non-positive slope.
pub fn fit_transfer(samples: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return None;
    }
    let mx = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.1).sum::<f64>() / n;
    let sxx: f64 = samples.iter().map(|s| (s.0 - mx).powi(2)).sum();
    let sxy: f64 = samples.iter().map(|s| (s.0 - mx) * (s.1 - my)).sum();
    if sxx <= 0.0 || sxy <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let latency = (my - slope * mx).max(0.0);
    Some((latency, 1.0 / slope))
}

/// Bytes of the one large download the device calibration times: past
/// `RECYCLED_OUTPUT_MAX`, so that the host memory it writes is a fresh
/// mapping, as every download of that size is.
const LARGE_DOWNLOAD: usize = 40 << 20;

/// Measures a device within `budget` and fits its profile. Figures that
/// could not be measured keep the prior (the software prior for software
/// devices). `None` when not even a transfer could be timed.
pub fn calibrate_device(dev: &dyn Calibrate, budget: Duration) -> Option<DeviceProfile> {
    let deadline = Instant::now() + budget;
    let mut p = if dev.software() {
        DeviceProfile::software_prior()
    } else {
        DeviceProfile::default()
    };
    // Up to 4 MiB: enough to separate latency from bandwidth, small enough
    // that a slow (software) device stays within the budget.
    let sizes = [4usize << 10, 64 << 10, 1 << 20, 4 << 20];
    let timed = |f: &dyn Fn(usize) -> Option<Duration>| -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for &b in &sizes {
            // Stop once two sizes are fitted and the next one, extrapolated
            // from the last (three repetitions), would take more than a
            // third of what is left: the later probes (launch, read, which
            // compile a kernel first) need the rest.
            let next = out
                .last()
                .map_or(0.0, |&(lb, lt): &(f64, f64)| 3.0 * lt * b as f64 / lb);
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64();
            if out.len() >= 2 && next > left / 3.0 {
                break;
            }
            // Best of three: the first includes allocation. (Not the
            // median, as the host's loops take: a transfer's fit rests on
            // four sizes, and one slow run of the smallest moved its
            // latency from ~20 µs to 200-460 µs in two runs of
            // `selector_eval` that averaged the last two of three.)
            let best = (0..3)
                .filter_map(|_| f(b))
                .map(|d| d.as_secs_f64())
                .fold(f64::INFINITY, f64::min);
            if best.is_finite() {
                out.push((b as f64, best));
            }
        }
        out
    };
    let up = timed(&|b| dev.time_upload(b));
    let (lat_up, bw_up) = fit_transfer(&up)?;
    p.upload_bandwidth = bw_up;
    if let Some((lat_down, bw_down)) = fit_transfer(&timed(&|b| dev.time_download(b))) {
        p.download_bandwidth = bw_down;
        p.transfer_latency = (lat_up + lat_down) / 2.0;
        // One download past what the host allocator recycles, when the
        // budget has room for it (its upload, and the download at a third
        // of the small ones' rate, four times over): its pages are fresh,
        // and on lavapipe it ran at 0.7-1.0 GB/s where the small ones ran
        // at ~10 GB/s (docs/performance.md, "The whole query at 10^3, and
        // a large download priced as measured").
        let large = LARGE_DOWNLOAD;
        let expected = large as f64 / bw_up + 3.0 * large as f64 / bw_down;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        if 4.0 * expected < left {
            if let Some(t) = dev.time_download(large) {
                let moving = t.as_secs_f64() - lat_down;
                if moving > 0.0 {
                    p.large_download_bandwidth = large as f64 / moving;
                }
            }
        }
    } else {
        p.transfer_latency = lat_up;
    }
    // A dispatch is `launch` (the execute phase over its dispatches: the
    // model prices a plan's launches each at it, and the smallest sum has
    // two, which were priced as two such runs); what the whole run took
    // beyond its dispatches and the two transfers' latencies is
    // `run_fixed`: on lavapipe the readback of a run waited 70-230 µs
    // where a download on an idle queue (the transfer fits above) took
    // ~10 µs, and small runs were priced at a third of their time without
    // it. Medians of seven.
    let runs: Vec<SmallestRun> = (0..7).filter_map(|_| dev.time_smallest_run()).collect();
    if !runs.is_empty() {
        let median = |f: &dyn Fn(&SmallestRun) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let dispatches = median(&|r| r.dispatch.as_secs_f64());
        p.launch = median(&|r| r.dispatch.as_secs_f64() / f64::from(r.launches.max(1)));
        p.run_fixed =
            (median(&|r| r.whole.as_secs_f64()) - dispatches - 2.0 * p.transfer_latency).max(0.0);
    }
    if let Some((_, bw)) = fit_transfer(&timed(&|b| dev.time_read(b))) {
        p.bandwidth = bw;
    }
    if Instant::now() < deadline {
        let n = 1 << 20;
        // The best of three each, interleaved: one timing of each varied
        // 2x between processes on lavapipe.
        let (mut a, mut b) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..3 {
            if Instant::now() >= deadline {
                break;
            }
            a = dev.time_ops(n, 4).map_or(a, |t| a.min(t.as_secs_f64()));
            b = dev.time_ops(n, 68).map_or(b, |t| b.min(t.as_secs_f64()));
        }
        if a.is_finite() && b.is_finite() {
            let per = (b - a) / (64.0 * n as f64);
            if per > 0.0 {
                p.op = per;
                p.transcendental = per * 4.0;
            }
        }
    }
    if Instant::now() < deadline {
        if let Some(c) = dev.time_compile() {
            p.compile = c.as_secs_f64();
        }
    }
    p.measured = true;
    // A figure that came out implausible (a fit over timings rounded to
    // zero) keeps its prior.
    Some(p.sanitized().0)
}

/// The profile of a device: from the cache file in `cache_dir` when this
/// device (by [`Calibrate::device_id`]) was measured before, else measured
/// within `budget` and persisted. The call the runtime makes once per
/// device, then hands the result to
/// `Selector::set_device_profile`.
pub fn device_profile(
    dev: &dyn Calibrate,
    cache_dir: Option<&Path>,
    budget: Duration,
) -> Option<DeviceProfile> {
    let id = dev.device_id();
    if let Some(dir) = cache_dir {
        if let Some(f) = load(&cache_file::path(dir, KIND)) {
            if let Some(p) = f.devices.get(&id) {
                return Some(p.clone());
            }
        }
    }
    let _span = tracing::debug_span!("computeq.calibrate_device", device = %id).entered();
    let p = calibrate_device(dev, budget)?;
    if let Some(dir) = cache_dir {
        persist(dir, |f| {
            f.devices.insert(id, p.clone());
        });
    }
    Some(p)
}

/// The persisted profile of the device `device_id`, if any.
pub(crate) fn persisted_device_profile(cache_dir: &Path, device_id: &str) -> Option<DeviceProfile> {
    load(&cache_file::path(cache_dir, KIND))?
        .devices
        .get(device_id)
        .cloned()
}

/// The device that the backend with `key` (its
/// `Backend::device_key`) opened in
/// an earlier process, with that device's persisted profile: both must be
/// on file.
pub fn recall_device(cache_dir: &Path, key: &str) -> Option<(DeviceRecord, DeviceProfile)> {
    let f = load(&cache_file::path(cache_dir, KIND))?;
    let record = f.opened.get(key)?.clone();
    let profile = f.devices.get(&record.device_id)?.clone();
    Some((record, profile))
}

/// Remembers that the backend with `key` opens `record`'s device (written
/// only when it changed).
pub fn remember_device(cache_dir: &Path, key: &str, record: &DeviceRecord) {
    let path = cache_file::path(cache_dir, KIND);
    let known = load(&path).is_some_and(|f| f.opened.get(key) == Some(record));
    if !known {
        persist(cache_dir, |f| {
            f.opened.insert(key.to_string(), record.clone());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_loop_keeps_its_typical_run_not_its_fastest() {
        // Runs of 1, 30 and 30 ms: the median is a 30 ms run (a sleep
        // never returns early), the fastest the 1 ms one.
        let far = Instant::now() + Duration::from_secs(60);
        let mut k = 0;
        let (median, fastest) = timings(3, far, || {
            std::thread::sleep(Duration::from_millis(if k == 0 { 1 } else { 30 }));
            k += 1;
        })
        .expect("three runs");
        assert_eq!(k, 3);
        assert!(median >= 0.030, "{median}");
        assert!(fastest <= median, "{fastest} {median}");
        k = 0;
        let t = typical_of(3, far, || {
            std::thread::sleep(Duration::from_millis(if k == 0 { 1 } else { 30 }));
            k += 1;
        });
        assert!(t.is_some_and(|t| t >= 0.030), "{t:?}");
        // Past the deadline: one run still, then none.
        let mut runs = 0;
        let past = Instant::now();
        assert!(typical_of(5, past, || runs += 1).is_some());
        assert_eq!(runs, 1);
    }

    #[test]
    fn quick_calibration_measures_plausible_figures() {
        // How long it took is not checked (a busy machine stretches any
        // run): that the budget bounds it is the zero-budget test's
        // deadline check below, which needs no clock.
        let p = calibrate_cpu(Duration::from_millis(300));
        assert!(p.measured);
        // Bounds of plausibility, not of speed: a CI run with the other
        // tests on both cores timed the 64 MiB sum at 0.34 GB/s (4.7 GB/s
        // from the cache in the same run), a laptop does 10-30 GB/s.
        assert!(p.bandwidth_one > 1e7 && p.bandwidth_one < 1e12, "{p:?}");
        assert!(p.bandwidth_all > 1e7 && p.bandwidth_all < 1e12, "{p:?}");
        assert!(p.pool_wakeup > 0.0 && p.pool_wakeup < 1e-2, "{p:?}");
        // Bounds of plausibility, not of speed: a loaded machine measured
        // 1.02e-8 s per SIMD operation in one CI run.
        assert!(p.simd_op > 0.0 && p.simd_op < 1e-6, "{p:?}");
    }

    #[test]
    fn a_zero_budget_keeps_the_priors_measurable_later() {
        let p = calibrate_cpu(Duration::ZERO);
        // Only the fast figures (wake-up, ops) fit in no time at all.
        assert!(p.measured);
        assert_eq!(p.bandwidth_one, CpuProfile::default().bandwidth_one);
    }

    /// A device with exact, known speeds.
    struct FakeDevice;
    impl Calibrate for FakeDevice {
        fn kind(&self) -> BackendKind {
            BackendKind::Wgpu
        }
        fn device_id(&self) -> String {
            "fake/exact".into()
        }
        fn time_upload(&self, b: usize) -> Option<Duration> {
            Some(Duration::from_secs_f64(20e-6 + b as f64 / 8e9))
        }
        fn time_download(&self, b: usize) -> Option<Duration> {
            Some(Duration::from_secs_f64(20e-6 + b as f64 / 4e9))
        }
        fn time_smallest_run(&self) -> Option<SmallestRun> {
            // Two dispatches of 35 µs, its transfers at their latency, and
            // 120 µs of waiting.
            Some(SmallestRun {
                dispatch: Duration::from_micros(70),
                launches: 2,
                whole: Duration::from_micros(70 + 2 * 20 + 120),
            })
        }
        fn time_read(&self, b: usize) -> Option<Duration> {
            Some(Duration::from_secs_f64(70e-6 + b as f64 / 100e9))
        }
        fn time_ops(&self, n: usize, ops: u32) -> Option<Duration> {
            Some(Duration::from_secs_f64(
                70e-6 + n as f64 * ops as f64 * 1e-11,
            ))
        }
        fn time_compile(&self) -> Option<Duration> {
            Some(Duration::from_millis(30))
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 0.02 * b.abs()
    }

    #[test]
    fn device_fit_recovers_latency_and_bandwidths() {
        let p = calibrate_device(&FakeDevice, Duration::from_secs(1)).unwrap();
        assert!(close(p.upload_bandwidth, 8e9), "{p:?}");
        assert!(close(p.download_bandwidth, 4e9), "{p:?}");
        // The large download, past what the allocator recycles: at the
        // fake's one rate here.
        assert!(close(p.large_download_bandwidth, 4e9), "{p:?}");
        assert!(close(p.transfer_latency, 20e-6), "{p:?}");
        assert!(close(p.launch, 35e-6), "{p:?}");
        assert!(close(p.run_fixed, 120e-6), "{p:?}");
        assert!(close(p.bandwidth, 100e9), "{p:?}");
        assert!(close(p.op, 1e-11), "{p:?}");
        assert!(close(p.compile, 30e-3), "{p:?}");
        assert!(p.measured);
    }

    #[test]
    fn device_profiles_persist_per_device() {
        let dir = cache_file::temp_dir("device");
        let p = device_profile(&FakeDevice, Some(&dir), Duration::from_secs(1)).unwrap();
        let f: CalibrationFile = cache_file::read(&cache_file::path(&dir, KIND), KIND).unwrap();
        assert_eq!(f.devices.get("fake/exact"), Some(&p));
        assert_eq!(
            device_profile(&FakeDevice, Some(&dir), Duration::ZERO),
            Some(p)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Callers on the rayon pool while the profile is being measured from
    /// outside it: the measurement needs the pool, so they must not wait
    /// for it (they used to, on the host lock, and every worker parked).
    #[test]
    fn pool_threads_do_not_wait_for_a_measurement_that_needs_the_pool() {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        crate::runtime::finishes_within(60, "a measurement on a blocked pool", || {
            // The measurement runs in a thread of its own: what it uses
            // lives as long as the process.
            let cell: &'static HostCell = Box::leak(Box::new(HostCell::new()));
            let workers = rayon::current_num_threads();
            let entered: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
            let measuring: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
            // Long enough that the first caller (not on the pool) waits for
            // the measurement to end, however busy the machine.
            let budget = Duration::from_secs(50);
            std::thread::scope(|scope| {
                let first = scope.spawn(|| {
                    cell.profile(
                        None,
                        budget,
                        move |_| {
                            measuring.store(true, Ordering::SeqCst);
                            // Every worker of the pool is inside `profile`.
                            while entered.load(Ordering::SeqCst) < workers {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            rayon::join(|| (), || ());
                            CpuProfile {
                                measured: true,
                                ..CpuProfile::default()
                            }
                        },
                        None,
                    )
                });
                while !measuring.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let others = scope.spawn(|| {
                    rayon::broadcast(|_| {
                        entered.fetch_add(1, Ordering::SeqCst);
                        cell.profile(None, budget, |_| panic!("measured twice"), None)
                    })
                });
                assert!(first.join().unwrap().measured);
                // The others went on (with the priors, or the result if
                // they asked late) and never measured.
                assert_eq!(others.join().unwrap().len(), workers);
            });
            assert!(cell.host.lock().profile.as_ref().unwrap().measured);
            assert_eq!(cell.generation.load(Ordering::SeqCst), 1);
        });
    }

    /// A quick calibration whose backend figures came out slow: the
    /// rechecks publish and persist a faster probe's figures, all of one
    /// probe, and leave a slower probe's alone.
    #[test]
    fn a_later_faster_probe_replaces_a_slow_calibrations_backend_figures() {
        use std::sync::atomic::AtomicUsize;
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        // The first recheck meets a slower stretch, the second a faster one.
        fn probe(p: &mut CpuProfile, _: Instant) {
            p.probed = true;
            if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
                p.simd_fixed *= 1.1;
                p.scalar_fixed = 1e-6;
            } else {
                p.simd_fixed = 350e-9;
                p.parallel_fixed = 150e-9;
                p.scalar_fixed = 200e-9;
            }
        }
        let cell: &'static HostCell = Box::leak(Box::new(HostCell::new()));
        let dir = cache_file::temp_dir("recheck");
        let slow = CpuProfile {
            measured: true,
            probed: true,
            simd_fixed: 600e-9,
            parallel_fixed: 400e-9,
            scalar_fixed: 380e-9,
            ..CpuProfile::default()
        };
        let (quick, published) = (slow.clone(), slow.clone());
        let recheck = Recheck {
            probe,
            after: {
                const AFTER: [Duration; 2] = [Duration::from_millis(1); 2];
                &AFTER
            },
            budget: Duration::from_millis(10),
        };
        let got = cell.profile(
            Some(&dir),
            Duration::from_secs(50),
            move |_| quick,
            Some(recheck),
        );
        // The quick calibration's figures, or already the recheck's: the
        // caller reads what is published when it wakes, and on a loaded
        // machine the rechecks can publish before it does.
        let rechecked = |p: &CpuProfile| (p.simd_fixed, p.parallel_fixed, p.scalar_fixed);
        assert!(
            got == published || rechecked(&got) == (350e-9, 150e-9, 200e-9),
            "{got:?}"
        );
        let file = cache_file::path(&dir, KIND);
        let persisted = move || cache_file::read::<CalibrationFile>(&file, KIND);
        // Published, then persisted (the file is written after the lock
        // is released): wait for both.
        let f = crate::runtime::finishes_within(60, "the rechecks", move || loop {
            if cell.generation.load(Ordering::SeqCst) >= 2 {
                if let Some(f) = persisted().filter(|f| f.cpu != Some(slow.clone())) {
                    break f;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        });
        let now = cell.current().expect("published");
        assert_eq!(
            (now.simd_fixed, now.parallel_fixed, now.scalar_fixed),
            (350e-9, 150e-9, 200e-9)
        );
        // The figures the probe does not measure are the calibration's.
        assert_eq!(now.bandwidth_one, CpuProfile::default().bandwidth_one);
        assert_eq!(f.cpu.as_ref(), Some(&now));
        assert!(!f.cpu_full);
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);
        // Two rechecks, one of them published: one new generation.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(cell.generation.load(Ordering::SeqCst), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A full calibration published while the rechecks wait is never
    /// replaced by them.
    #[test]
    fn rechecks_never_replace_a_full_calibration() {
        fn faster(p: &mut CpuProfile, _: Instant) {
            p.simd_fixed = 1e-9;
            p.probed = true;
        }
        let cell: &'static HostCell = Box::leak(Box::new(HostCell::new()));
        let quick = CpuProfile {
            measured: true,
            probed: true,
            simd_fixed: 600e-9,
            ..CpuProfile::default()
        };
        let recheck = Recheck {
            probe: faster,
            after: {
                const AFTER: [Duration; 1] = [Duration::from_millis(300)];
                &AFTER
            },
            budget: Duration::from_millis(10),
        };
        cell.profile(None, Duration::from_secs(50), move |_| quick, Some(recheck));
        let full = CpuProfile {
            measured: true,
            simd_fixed: 500e-9,
            ..CpuProfile::default()
        };
        cell.publish(full.clone(), true, true);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(cell.current(), Some(full));
        assert_eq!(cell.generation.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn fit_needs_two_sizes() {
        assert_eq!(fit_transfer(&[(1.0, 1.0)]), None);
        let (l, bw) = fit_transfer(&[(0.0, 1.0), (10.0, 2.0)]).unwrap();
        assert!((l - 1.0).abs() < 1e-12 && (bw - 10.0).abs() < 1e-9);
    }

    #[test]
    fn implausible_profiles_on_disk_are_dropped() {
        let dir = cache_file::temp_dir("calibration-implausible");
        let path = cache_file::path(&dir, KIND);
        let mut devices = BTreeMap::new();
        let zero = DeviceProfile {
            upload_bandwidth: 0.0,
            download_bandwidth: 0.0,
            bandwidth: 0.0,
            measured: true,
            ..DeviceProfile::default()
        };
        devices.insert("fake/zero".to_string(), zero);
        devices.insert("fake/good".to_string(), DeviceProfile::default());
        let f = CalibrationFile {
            cpu: Some(CpuProfile {
                bandwidth_one: 0.0,
                bandwidth_all: 0.0,
                measured: true,
                ..CpuProfile::default()
            }),
            cpu_full: true,
            devices,
            opened: BTreeMap::new(),
        };
        cache_file::write(&path, KIND, &f).unwrap();
        let loaded = load(&path).unwrap();
        assert!(loaded.cpu.is_none() && !loaded.cpu_full);
        assert_eq!(loaded.devices.len(), 1);
        assert!(loaded.devices.contains_key("fake/good"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
