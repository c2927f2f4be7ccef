//! The engine's device backends as the selector sees them: whether each
//! has a price (a profile handed to the selector), and the probe that
//! finds one.
//!
//! No query waits for a device to open or to be measured unless it is
//! going to run on it. A device that is not open is priced from what an
//! earlier process remembered (its [`DeviceRecord`] and persisted profile,
//! in the cache directory) and opened by the first query the selector puts
//! on it. A device nothing is known about is opened and measured by a
//! probe in a background thread (through a private engine, so its probe
//! queries never reach the user's run log or history), and is a candidate
//! from the first query after the probe. A query forced onto a device, or
//! reading data resident on one, opens it at once.
//!
//! A probe is one of the engine's own measurements
//! ([`crate::cost::background`]) from its start to its end: the
//! engine's runs meanwhile are flagged and not learned from, and its
//! selector explores nothing (lavapipe's probe is CPU work on the cores
//! the queries run on).
//!
//! Locks: each slot has two mutexes (what is known, the probe's state),
//! never held together, never across I/O, a device opening or a call into
//! the selector.

use crate::backend::{Availability, Backend, BackendKind, Phase};
use crate::cost::background::{self, Activity, Held, Mark};
use crate::cost::{DeviceProfile, DeviceRecord};
use crate::metrics::Attempt;
use crate::plan::CompiledPlan;
use crate::runtime::{Config, Engine};
use crate::select::Selector;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The state of the device backends of one engine, by kind.
pub(crate) struct Devices {
    slots: [Arc<Slot>; BackendKind::COUNT],
    /// Never start a probe: the private engine of a probe, whose device
    /// the probe that owns it prices.
    quiet: bool,
    /// This engine's probes, running or done: its runs meanwhile shared
    /// the machine with them (see [`crate::cost::background`]), for at
    /// most [`PROBE_PAUSE_LIMIT`] after the newest one started.
    pub(crate) probes: Arc<Activity>,
}

/// The longest an engine's device probes pause its learning and
/// exploration: a probe still running this long after it started (the
/// newest, when several run) is taken to be stuck in its driver, not
/// measuring, and the runs beside it are learned from again. A probe
/// takes well under a second on lavapipe and a few seconds on the lent
/// GPUs (docs/cuda.md); one that hangs would otherwise pause its engine's
/// learning until the process ends.
pub(crate) const PROBE_PAUSE_LIMIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Slot {
    /// The selector holds a profile of this device: it may be a candidate.
    priced: AtomicBool,
    /// The open device was compared with the remembered one.
    identity_checked: AtomicBool,
    /// What is known of the device without opening it.
    known: Mutex<Known>,
    /// Whether a probe is under way; `probed` signals its end.
    probing: Mutex<bool>,
    probed: Condvar,
}

/// What is known of a device without opening it.
#[derive(Clone, Default)]
enum Known {
    /// The cache directory was not read yet.
    #[default]
    Unread,
    /// Nothing: the device must be probed.
    Nothing,
    /// The device as a probe (of this process or an earlier one) left it.
    Device(Arc<Remembered>),
}

struct Remembered {
    record: DeviceRecord,
    profile: DeviceProfile,
}

/// What a probe needs, owned (it runs in its own thread).
struct ProbeJob {
    backend: Arc<dyn Backend>,
    selector: Arc<dyn Selector>,
    slot: Arc<Slot>,
    /// The engine's probes' activity, busy from the job's making (before
    /// its thread starts, so that the query that starts it is flagged) to
    /// the probe's end.
    busy: Held,
    cache_dir: Option<PathBuf>,
    budget: Duration,
}

impl std::fmt::Debug for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let priced: Vec<BackendKind> = BackendKind::ALL
            .into_iter()
            .filter(|k| self.slots[k.index()].priced.load(Ordering::Relaxed))
            .collect();
        f.debug_struct("Devices").field("priced", &priced).finish()
    }
}

impl Devices {
    /// Slots for an engine that probes its devices.
    pub fn new() -> Devices {
        Devices {
            slots: Default::default(),
            quiet: false,
            probes: Arc::new(Activity::limited(PROBE_PAUSE_LIMIT)),
        }
    }

    /// Slots for a probe's private engine: it never probes.
    fn quiet() -> Devices {
        let mut d = Devices::new();
        d.quiet = true;
        d
    }

    /// Whether the device backend `b`, not forced by the query, is a
    /// candidate for `plan` now; the reason when not. Never opens the
    /// device and never waits for it; sets `probe` when it needs a probe,
    /// which the caller starts with [`Devices::start_probe`] once the query
    /// no longer measures anything (the host's calibration would share the
    /// cores with it).
    pub fn consider(
        &self,
        engine: &Engine,
        b: &Arc<dyn Backend>,
        plan: &CompiledPlan,
        probe: &mut bool,
    ) -> Result<(), Attempt> {
        let kind = b.kind();
        let declined = |phase, message: &'static str| Attempt {
            backend: kind,
            phase,
            message: message.into(),
            decline: None,
        };
        let slot = &self.slots[kind.index()];
        if b.is_initialized() {
            if let Availability::Unavailable(why) = b.availability() {
                return Err(Attempt {
                    backend: kind,
                    phase: Phase::Init,
                    message: why,
                    decline: None,
                });
            }
            // A plan the device cannot run is declined for that reason
            // first: it tells the user more than a probe under way.
            plan.supported_by(b.kind(), |p| b.supports(p))
                .map_err(|why| Attempt::declined(kind, why))?;
            if !slot.priced.load(Ordering::Acquire) {
                *probe = true;
                return Err(declined(
                    Phase::Init,
                    "being measured in the background; later queries consider it",
                ));
            }
            if !slot.identity_checked.load(Ordering::Relaxed) {
                self.check_identity(engine, b);
            }
            return Ok(());
        }
        // Not open: price it from memory; the query the selector puts on
        // it opens it.
        match self.known(engine, b) {
            Some(known) => {
                if !slot.priced.load(Ordering::Acquire) {
                    // Two queries may both hand it over: the same profile.
                    engine
                        .selector
                        .set_device_profile(kind, known.profile.clone());
                    slot.priced.store(true, Ordering::Release);
                }
                plan.supported_by_remembered(kind, |p| b.supports_remembered(p, &known.record))
                    .map_err(|why| Attempt::declined(kind, why))
            }
            None => {
                *probe = true;
                Err(declined(
                    Phase::Init,
                    "not open yet: being probed in the background; later queries consider it",
                ))
            }
        }
    }

    /// Whether computeq measures the machine now: the process's CPU
    /// calibration or one of this engine's probes.
    #[inline]
    pub fn measuring(&self) -> bool {
        background::active() || self.probes.active()
    }

    /// Where those measurements stand now, for [`Devices::quiet_since`].
    #[inline]
    pub fn mark(&self) -> (Mark, Mark) {
        (background::CPU.mark(), self.probes.mark())
    }

    /// Whether none of those measurements ran at any time since `m`.
    #[inline]
    pub fn quiet_since(&self, m: (Mark, Mark)) -> bool {
        background::CPU.quiet_since(m.0) && self.probes.quiet_since(m.1)
    }

    /// After a query opened `b` itself (forced onto it, or reading data
    /// resident on it): whether a probe should price it for later queries
    /// (nothing did yet).
    pub fn needs_probe(&self, b: &Arc<dyn Backend>) -> bool {
        !self.slots[b.kind().index()].priced.load(Ordering::Acquire)
    }

    /// Opens `b` and prices it now, in this thread, or waits for the probe
    /// already under way ([`Engine::prepare_devices`]).
    pub fn prepare(&self, engine: &Engine, b: &Arc<dyn Backend>) {
        let slot = &self.slots[b.kind().index()];
        if slot.priced.load(Ordering::Acquire) {
            // Priced from memory: only the opening is left.
            let _ = b.availability();
            self.check_identity(engine, b);
            return;
        }
        let run_here = {
            let mut probing = slot.probing.lock();
            let idle = !*probing;
            *probing = true;
            idle
        };
        if run_here {
            probe(self.job(engine, b));
        } else {
            let mut probing = slot.probing.lock();
            while *probing {
                slot.probed.wait(&mut probing);
            }
        }
    }

    fn job(&self, engine: &Engine, b: &Arc<dyn Backend>) -> ProbeJob {
        ProbeJob {
            backend: b.clone(),
            selector: engine.selector.clone(),
            slot: self.slots[b.kind().index()].clone(),
            busy: self.probes.hold(),
            cache_dir: engine.config.cache_dir.clone(),
            budget: engine.config.calibration_budget,
        }
    }

    /// What is known of `b`'s device without opening it: from this
    /// process's probe, else from the cache directory (read once).
    fn known(&self, engine: &Engine, b: &Arc<dyn Backend>) -> Option<Arc<Remembered>> {
        let slot = &self.slots[b.kind().index()];
        let known = slot.known.lock().clone();
        match known {
            Known::Device(r) => Some(r),
            Known::Nothing => None,
            Known::Unread => {
                // Read without the lock held; a probe's answer that came
                // meanwhile wins.
                let read = match (&engine.config.cache_dir, b.device_key()) {
                    (Some(dir), Some(key)) => crate::cost::recall_device(dir, &key)
                        .map(|(record, profile)| Arc::new(Remembered { record, profile })),
                    _ => None,
                };
                let mut known = slot.known.lock();
                if matches!(*known, Known::Unread) {
                    *known = read.map_or(Known::Nothing, Known::Device);
                }
                match &*known {
                    Known::Device(r) => Some(r.clone()),
                    _ => None,
                }
            }
        }
    }

    /// Once the device is open: if it is not the remembered one (another
    /// adapter or driver than the earlier process had), a probe prices it
    /// anew.
    fn check_identity(&self, engine: &Engine, b: &Arc<dyn Backend>) {
        let slot = &self.slots[b.kind().index()];
        let Some(opened) = b.device_record() else {
            return;
        };
        if slot.identity_checked.swap(true, Ordering::Relaxed) {
            return;
        }
        let remembered = match &*slot.known.lock() {
            Known::Device(r) => r.record.device_id.clone(),
            _ => return,
        };
        if remembered != opened.device_id {
            tracing::debug!(
                remembered = %remembered,
                opened = %opened.device_id,
                "computeq.device_changed"
            );
            *slot.known.lock() = Known::Nothing;
            slot.priced.store(false, Ordering::Release);
            self.start_probe(engine, b);
        }
    }

    /// Starts the probe of `b` in a background thread, unless one is under
    /// way (or this engine never probes).
    pub fn start_probe(&self, engine: &Engine, b: &Arc<dyn Backend>) {
        if self.quiet {
            return;
        }
        let slot = &self.slots[b.kind().index()];
        {
            let mut probing = slot.probing.lock();
            if *probing {
                return;
            }
            *probing = true;
        }
        let job = self.job(engine, b);
        let running = Running::start();
        let spawned = std::thread::Builder::new()
            .name(format!("computeq-probe-{}", b.kind()))
            .spawn(move || {
                let _running = running;
                probe(job)
            });
        if let Err(e) = spawned {
            tracing::warn!(backend = %b.kind(), error = %e, "computeq: cannot start a device probe");
            *slot.probing.lock() = false;
            slot.probed.notify_all();
        }
    }
}

/// Device probes under way in this process (see [`register_exit_wait`]).
static RUNNING: Mutex<usize> = Mutex::new(0);
/// Signalled when a probe ends.
static ENDED: Condvar = Condvar::new();
/// The longest the process's exit waits for probes under way (a probe is
/// bounded by its calibration budget plus the opening of a device).
const EXIT_WAIT: Duration = Duration::from_secs(10);
static BEFORE_OPEN: std::sync::Once = std::sync::Once::new();
static AFTER_OPEN: std::sync::Once = std::sync::Once::new();

/// Counts a probe as under way until dropped.
struct Running;

impl Running {
    fn start() -> Running {
        *RUNNING.lock() += 1;
        guard_main_thread_exit();
        register_exit_wait(&BEFORE_OPEN);
        Running
    }
}

/// Waits (at most [`EXIT_WAIT`]) for the probes under way.
fn wait_for_running_probes() {
    let deadline = std::time::Instant::now() + EXIT_WAIT;
    let mut running = RUNNING.lock();
    while *running > 0 {
        if ENDED.wait_until(&mut running, deadline).timed_out() {
            break;
        }
    }
}

/// When called on the main thread: makes the process's exit wait for the
/// probes under way before any exit handler runs.
///
/// The exit handlers of [`register_exit_wait`] run after those registered
/// later, and a driver registers handlers while a probe opens it (Mesa's
/// lavapipe initializes LLVM on its first device, which registers C++
/// destructors then): a program that ended during that opening ran LLVM's
/// and Mesa's handlers under the probe thread, and crashed in `exit` (the
/// quickstart, in about one run of forty with a fresh cache directory). The
/// exiting thread's thread-local destructors run before every exit handler
/// (glibc's `exit` calls them first), so the main thread, whose return from
/// `main` is how most programs end, waits there. A program that exits from
/// another thread is covered by the exit handlers alone. The guard is the
/// main thread's only: another thread's thread-locals are destroyed when
/// that thread ends, which must not wait for a probe.
#[cfg(target_os = "linux")]
fn guard_main_thread_exit() {
    struct WaitAtExit;
    impl Drop for WaitAtExit {
        fn drop(&mut self) {
            // A panic must not escape a thread-local destructor.
            let _ = std::panic::catch_unwind(wait_for_running_probes);
        }
    }
    thread_local! {
        static GUARD: std::cell::OnceCell<WaitAtExit> = const { std::cell::OnceCell::new() };
    }
    // SAFETY: both calls only read the calling process's and thread's ids.
    let main = unsafe { libc::gettid() == libc::getpid() };
    if main {
        // Fails only while the thread's locals are being destroyed, when
        // there is nothing left to guard.
        let _ = GUARD.try_with(|g| {
            g.get_or_init(|| WaitAtExit);
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn guard_main_thread_exit() {}

impl Drop for Running {
    fn drop(&mut self) {
        *RUNNING.lock() -= 1;
        ENDED.notify_all();
    }
}

/// Makes the process's normal exit wait (at most [`EXIT_WAIT`]) for the
/// device probes under way. A program that ends while a probe thread is
/// inside a driver has the driver torn down under it: on an H100 (NVIDIA's
/// Vulkan driver) a short program crashed at exit in two runs of three.
/// Registered once before a probe opens its device and once after (exit
/// handlers run in reverse order, so the second comes before those the
/// driver registered when it was loaded).
#[cfg(target_os = "linux")]
fn register_exit_wait(once: &'static std::sync::Once) {
    extern "C" fn wait_for_probes() {
        // A panic must not cross into C.
        let _ = std::panic::catch_unwind(wait_for_running_probes);
    }
    once.call_once(|| {
        // SAFETY: `wait_for_probes` is a plain `extern "C" fn()` that lives
        // as long as the program; it takes one lock, which no thread holds
        // across anything but a counter update.
        unsafe {
            libc::atexit(wait_for_probes);
        }
    });
}

#[cfg(not(target_os = "linux"))]
fn register_exit_wait(_: &'static std::sync::Once) {}

impl Default for Devices {
    fn default() -> Self {
        Devices::new()
    }
}

/// An engine that goes away waits (at most [`EXIT_WAIT`]) for the probes
/// it started: a probe left running may still be inside the driver when
/// the program exits, and the exit handlers of [`register_exit_wait`]
/// cannot cover the first opening of a device (a driver that loads LLVM,
/// as Mesa's lavapipe does, registers exit handlers during that opening,
/// which then run before ours: a test binary whose last engine had just
/// started a probe crashed at exit in about one run of fifteen).
impl Drop for Devices {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + EXIT_WAIT;
        for slot in &self.slots {
            let mut probing = slot.probing.lock();
            while *probing {
                if slot.probed.wait_until(&mut probing, deadline).timed_out() {
                    tracing::warn!(
                        "computeq: an engine went away with a device probe still running"
                    );
                    return;
                }
            }
        }
    }
}

/// Opens the device, prices it (its persisted profile, else measured
/// within the budget through a private engine, else what the device says
/// of its class), hands the price to the selector and remembers the
/// device in the cache directory.
fn probe(job: ProbeJob) {
    let ProbeJob {
        backend,
        selector,
        slot,
        busy,
        cache_dir,
        budget,
    } = job;
    let kind = backend.kind();
    let _span = tracing::debug_span!("computeq.device_probe", backend = %kind).entered();
    // A panic in a driver must not leave the probe marked as under way
    // (`prepare` would wait for it forever).
    let priced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        price(&backend, &*selector, &slot, cache_dir.as_deref(), budget)
    }));
    if let Err(payload) = priced {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::warn!(backend = %kind, panic = %why, "computeq: the device probe panicked");
    }
    // The probe's references go before it says it has ended: when the
    // engine went away meanwhile, the last reference to the backend is
    // this one, and its device is destroyed here. An engine that goes
    // away waits for that (`Devices::drop`), so no other engine opens the
    // same driver while this thread destroys a device in it: on an H200,
    // NVIDIA's Vulkan driver crashed in `vkDestroyDevice` on the probe
    // thread while a test's next engine opened the device (a selector
    // test, in about one run of two).
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        drop(backend);
        drop(selector);
    }));
    if dropped.is_err() {
        tracing::warn!(backend = %kind, "computeq: releasing a probed device panicked");
    }
    drop(busy);
    *slot.probing.lock() = false;
    slot.probed.notify_all();
}

/// The probe's work (see [`probe`]).
fn price(
    backend: &Arc<dyn Backend>,
    selector: &dyn Selector,
    slot: &Slot,
    cache_dir: Option<&std::path::Path>,
    budget: Duration,
) {
    let kind = backend.kind();
    // Opening the device is the probe's first step.
    let available = backend.availability();
    // The driver is loaded now: its exit handlers run before this one.
    register_exit_wait(&AFTER_OPEN);
    if let Availability::Available = available {
        let private = probe_engine(backend);
        let measured = match backend.calibrator(&ProbeQueries(&private)) {
            Some(c) if budget.is_zero() => {
                // Zero budget: what is on file for this device, nothing
                // measured.
                let id = c.device_id();
                cache_dir.and_then(|dir| crate::cost::calibrate::persisted_device_profile(dir, &id))
            }
            Some(c) => crate::cost::device_profile(&*c, cache_dir, budget),
            None => None,
        };
        drop(private);
        let profile = measured.or_else(|| backend.device_profile());
        tracing::debug!(backend = %kind, ?profile, "computeq.device_profile");
        if let Some(p) = &profile {
            selector.set_device_profile(kind, p.clone());
        }
        let record = backend.device_record();
        if let (Some(dir), Some(key), Some(record)) = (cache_dir, backend.device_key(), &record) {
            crate::cost::remember_device(dir, &key, record);
        }
        *slot.known.lock() = match record {
            Some(record) => Known::Device(Arc::new(Remembered {
                record,
                profile: profile.unwrap_or_default(),
            })),
            None => Known::Nothing,
        };
        slot.identity_checked.store(true, Ordering::Relaxed);
        slot.priced.store(true, Ordering::Release);
    }
}

/// The engine a probe measures a device through: the device's own
/// backend, nothing persisted or learned, a run log no one reads.
/// A device calibrator's probe queries, run on the private engine of
/// [`probe_engine`].
struct ProbeQueries<'e>(&'e Engine);

impl crate::backend::ProbeRunner for ProbeQueries<'_> {
    fn run(
        &self,
        backend: BackendKind,
        probe: crate::backend::Probe<'_>,
    ) -> crate::metrics::ExecutionMetrics {
        use crate::backend::Probe;
        let q = |xs| self.0.query(xs).on(backend).with_metrics();
        match probe {
            Probe::Sum(xs) => q(xs).sum().1,
            Probe::MulAdds(xs, ops) => {
                q(xs)
                    .map(move |x| {
                        let mut y = x;
                        for _ in 0..ops / 2 {
                            y = y * 1.000_001 + 0.5;
                        }
                        y
                    })
                    .sum()
                    .1
            }
            Probe::Scale(xs, k) => {
                q(xs)
                    .map(move |x| x * crate::expr::Expr::constant(k))
                    .sum()
                    .1
            }
        }
    }
}

/// The settings of an engine that runs calibration probes: nothing
/// persisted, learned, calibrated or logged, falling back on failure.
pub(super) fn probe_config(disabled: Vec<BackendKind>) -> Config {
    Config {
        cache_dir: None,
        learn: false,
        calibration_budget: Duration::ZERO,
        run_log_capacity: 0,
        fallback: true,
        forced_backend: None,
        disabled,
        ..Config::default()
    }
}

fn probe_engine(backend: &Arc<dyn Backend>) -> Engine {
    let mut engine = Engine::with_config(probe_config(Vec::new())).with_backend(backend.clone());
    engine.devices = Devices::quiet();
    engine
}

#[cfg(test)]
pub(crate) mod probe_tests {
    use super::*;
    use crate::backend::{BackendError, Job, RunStats};
    use crate::plan::{PhysicalPlan, PlanOutput};
    use std::sync::atomic::AtomicBool;

    /// A device backend that says when it is dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            // Slow, as a device's destruction is.
            std::thread::sleep(Duration::from_millis(20));
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Backend for Dropped {
        fn kind(&self) -> BackendKind {
            BackendKind::Wgpu
        }
        fn availability(&self) -> Availability {
            Availability::Unavailable("a test device".into())
        }
        fn supports(&self, _: &PhysicalPlan) -> Result<(), crate::backend::Decline> {
            Ok(())
        }
        fn execute(&self, _: &Job<'_>, _: &mut RunStats) -> Result<PlanOutput, BackendError> {
            Err(BackendError::new(
                BackendKind::Wgpu,
                Phase::Execute,
                "a test device",
            ))
        }
    }

    /// A probe holding the last reference to its backend releases it (and
    /// so destroys the device) before it says it has ended: whoever waits
    /// for the probe (an engine going away) must not go on to open the
    /// driver while this thread destroys a device in it.
    #[test]
    fn a_probe_releases_its_backend_before_it_ends() {
        let dropped = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(Slot::default());
        *slot.probing.lock() = true;
        let engine = Engine::with_config(Config::default());
        let job = ProbeJob {
            backend: Arc::new(Dropped(dropped.clone())),
            selector: engine.selector.clone(),
            slot: slot.clone(),
            busy: Arc::<Activity>::default().hold(),
            cache_dir: None,
            budget: Duration::ZERO,
        };
        let t = std::thread::spawn(move || probe(job));
        let mut probing = slot.probing.lock();
        while *probing {
            slot.probed.wait(&mut probing);
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the probe said it had ended before releasing its backend"
        );
        drop(probing);
        t.join().unwrap();
    }

    /// A device whose opening waits for the test to let it go on, and
    /// which then cannot run anything.
    pub(crate) struct Gated {
        gate: Mutex<std::sync::mpsc::Receiver<()>>,
        opened: AtomicBool,
    }

    impl Gated {
        /// The device, and the sender that lets its opening go on.
        pub(crate) fn new() -> (Gated, std::sync::mpsc::Sender<()>) {
            let (open, gate) = std::sync::mpsc::channel();
            let g = Gated {
                gate: Mutex::new(gate),
                opened: AtomicBool::new(false),
            };
            (g, open)
        }
    }

    impl Backend for Gated {
        fn kind(&self) -> BackendKind {
            BackendKind::Wgpu
        }
        fn is_initialized(&self) -> bool {
            self.opened.load(Ordering::SeqCst)
        }
        fn availability(&self) -> Availability {
            if !self.opened.load(Ordering::SeqCst) {
                let _ = self.gate.lock().recv();
                self.opened.store(true, Ordering::SeqCst);
            }
            Availability::Unavailable("a test device".into())
        }
        fn supports(&self, _: &PhysicalPlan) -> Result<(), crate::backend::Decline> {
            Ok(())
        }
        fn execute(&self, _: &Job<'_>, _: &mut RunStats) -> Result<PlanOutput, BackendError> {
            Err(BackendError::new(
                BackendKind::Wgpu,
                Phase::Execute,
                "a test device",
            ))
        }
    }

    /// A probe is a measurement of its engine from its job's making (before
    /// its thread starts) to its end: its engine's runs meanwhile are
    /// flagged, another engine's are not.
    #[test]
    fn a_probe_is_its_engines_measurement_while_it_runs() {
        let (gated, open) = Gated::new();
        let engine = Engine::with_config(Config::default());
        let other = Devices::new();
        let slot = Arc::new(Slot::default());
        *slot.probing.lock() = true;
        let activity: Arc<Activity> = Arc::default();
        let before = (activity.mark(), other.probes.mark());
        let job = ProbeJob {
            backend: Arc::new(gated),
            selector: engine.selector.clone(),
            slot: slot.clone(),
            busy: activity.hold(),
            cache_dir: None,
            budget: Duration::ZERO,
        };
        assert!(activity.active(), "busy before its thread starts");
        let t = std::thread::spawn(move || probe(job));
        let during = activity.mark();
        // The device's opening waits for this.
        open.send(()).unwrap();
        t.join().unwrap();
        assert!(!*slot.probing.lock(), "the probe ended");
        assert!(!activity.active(), "its measurement ended with it");
        assert!(!activity.quiet_since(before.0), "it ran since the mark");
        assert!(!activity.quiet_since(during), "it ran at the mark");
        assert!(activity.quiet_since(activity.mark()));
        assert!(
            other.probes.quiet_since(before.1),
            "another engine's is apart"
        );
    }

    /// A probe whose thread never starts ends its measurement all the
    /// same (its job, dropped unrun, releases it).
    #[test]
    fn a_probe_job_dropped_unrun_ends_its_measurement() {
        let (gated, _open) = Gated::new();
        let engine = Engine::with_config(Config::default());
        let activity: Arc<Activity> = Arc::default();
        let job = ProbeJob {
            backend: Arc::new(gated),
            selector: engine.selector.clone(),
            slot: Arc::default(),
            busy: activity.hold(),
            cache_dir: None,
            budget: Duration::ZERO,
        };
        assert!(activity.active());
        drop(job);
        assert!(!activity.active());
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;

    #[test]
    fn an_engine_that_goes_away_waits_for_its_device_probe() {
        let engine = Engine::with_config(Config::default());
        let slot = engine.devices.slots[BackendKind::Wgpu.index()].clone();
        // Large enough to make the device worth a probe, which this query
        // starts in the background.
        let xs = vec![1.0f32; 1 << 16];
        assert_eq!(engine.query(&xs).sum(), 65536.0);
        let started = *slot.probing.lock();
        drop(engine);
        assert!(
            !*slot.probing.lock(),
            "the engine is gone and its device probe still runs"
        );
        if !started {
            println!("note: no device probe was under way after the query (it ended first)");
        }
    }
}
