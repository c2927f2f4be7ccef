//! Whether computeq is measuring the machine itself: the CPU calibration
//! (the quick one on a process's first query, its re-probes 1, 4 and 16 s
//! later, a full calibration a caller asks for), process-wide, and an
//! engine's device probes (the opening of a device and its calibration),
//! each engine's own. Each runs work of its own on the cores a query runs
//! on, so a query timed meanwhile measured the machine shared with it, not
//! the backend alone: on the 2-vCPU VM of this project a 10^7-value
//! histogram on `cpu-parallel` beside a re-probe ran 1.4-2.1x (median of a
//! process's runs) its time just before and after, and one beside the
//! quick calibration 14x; lavapipe's probe (Mesa initializing LLVM, then
//! compiling and timing the calibration's kernels on the CPU) in a
//! process's first ~150 ms steered the same histogram onto `cpu-simd`
//! (2x slower) in two processes of three (`cargo run --release --example
//! beside_calibration`; docs/selector.md, "Runs beside the calibration").
//!
//! A measurement holds a guard of its [`Activity`] while it runs: the CPU
//! calibration a [`Busy`] of [`CPU`], a device probe a [`Held`] of its
//! engine's (taken when the probe starts, before its thread runs). A query
//! takes a [`Mark`] of each before its run and asks
//! [`Activity::quiet_since`] after it: quiet when no measurement ran at any
//! time in between. Two atomics an activity, read before and after a run
//! (and once more by a selection that is not leased); written only when a
//! measurement starts or ends.
//!
//! A device probe pauses its own engine only: an engine's history is its
//! own, and a process that runs several engines side by side (a test
//! binary, a service with one engine per tenant) would otherwise stop
//! every engine's learning whenever any of them opens a device.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Measurements of one kind: running now, and started or ended so far.
#[derive(Debug, Default)]
pub struct Activity {
    active: AtomicU32,
    epoch: AtomicU64,
    /// When the newest measurement started ([`now_ns`]).
    newest: AtomicU64,
    /// How long after the newest start the running ones stop counting
    /// (`None`: until they end).
    limit: Option<Duration>,
}

/// The process's CPU calibration.
pub static CPU: Activity = Activity::new();

/// One measurement, running while this is held.
#[must_use = "the measurement counts as running only while this is held"]
pub struct Busy<'a>(&'a Activity);

/// Where an activity's measurements stood at some moment
/// ([`Activity::mark`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark(Option<u64>);

impl Activity {
    /// No measurement ran yet.
    pub const fn new() -> Activity {
        Activity {
            active: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
            newest: AtomicU64::new(0),
            limit: None,
        }
    }

    /// An activity whose measurements count as running for at most
    /// `limit` after the newest of them started, ended or not: a device
    /// probe that hangs inside its driver stops pausing its engine's
    /// learning there. (A measurement that ends after the limit still
    /// flags the run it ends beside.)
    pub const fn limited(limit: Duration) -> Activity {
        let mut a = Activity::new();
        a.limit = Some(limit);
        a
    }

    /// Marks a measurement as running until the returned guard drops.
    pub fn busy(&self) -> Busy<'_> {
        self.start();
        Busy(self)
    }

    /// [`Activity::busy`] for a measurement that starts in one thread and
    /// runs in another.
    pub fn hold(self: &Arc<Self>) -> Held {
        self.start();
        Held(self.clone())
    }

    fn start(&self) {
        // Before the count: whoever sees the count sees this start's time.
        if self.limit.is_some() {
            self.newest.store(now_ns(), Ordering::Release);
        }
        self.active.fetch_add(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    fn end(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.active.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether a measurement is running now and counts (see
    /// [`Activity::limited`]): a clock read only while one runs under a
    /// limit.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0 && !self.past_limit()
    }

    #[cold]
    fn past_limit(&self) -> bool {
        self.limit.is_some_and(|l| {
            let since = now_ns().saturating_sub(self.newest.load(Ordering::Acquire));
            u128::from(since) > l.as_nanos()
        })
    }

    /// The measurements' state now: `None` inside while one runs.
    pub fn mark(&self) -> Mark {
        // The epoch before the count: a measurement that starts between
        // the two reads moves the epoch past the one kept.
        let epoch = self.epoch.load(Ordering::Acquire);
        Mark((!self.active()).then_some(epoch))
    }

    /// Whether no measurement ran at any time since `m` was taken: none
    /// was running then, none is now, and none started or ended in
    /// between (those past their limit do not count as running).
    pub fn quiet_since(&self, m: Mark) -> bool {
        m.0.is_some_and(|e| !self.active() && self.epoch.load(Ordering::Acquire) == e)
    }
}

/// Nanoseconds since the first call in this process (a limit's clock).
fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    u64::try_from(BASE.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A measurement of a shared activity, running while this is held: one
/// that starts in one thread and runs in another (a device probe, marked
/// before its thread is spawned).
#[must_use = "the measurement counts as running only while this is held"]
pub struct Held(Arc<Activity>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Marks a CPU calibration as running until the returned guard drops.
pub fn busy() -> Busy<'static> {
    CPU.busy()
}

/// Whether a CPU calibration is running now.
pub fn active() -> bool {
    CPU.active()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark of the CPU calibration with none running since: it is
    /// process-wide and other tests calibrate, so this waits (at most a
    /// minute) for a moment when none runs.
    fn quiet_mark() -> Mark {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = CPU.mark();
            if CPU.quiet_since(m) {
                return m;
            }
            assert!(Instant::now() < deadline, "a measurement ran for a minute");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Each assertion that a mark is not quiet holds whatever else runs:
    /// a measurement elsewhere can only make a mark less quiet.
    #[test]
    fn a_mark_is_quiet_only_when_no_measurement_ran_since() {
        let during = {
            let _b = busy();
            assert!(active());
            let during = CPU.mark();
            assert!(!CPU.quiet_since(during), "taken while one ran");
            during
        };
        assert!(!CPU.quiet_since(during), "one was running at the mark");
        let before = quiet_mark();
        drop(busy());
        assert!(
            !CPU.quiet_since(before),
            "one started and ended since the mark"
        );
        let before = quiet_mark();
        let _b = busy();
        assert!(!CPU.quiet_since(before), "one is running now");
    }

    /// An engine's probes are its own: they leave another activity's
    /// marks quiet.
    #[test]
    fn activities_are_apart() {
        let (a, b) = (Activity::new(), Activity::new());
        let (ma, mb) = (a.mark(), b.mark());
        let busy = a.busy();
        assert!(a.active() && !b.active());
        assert!(!a.quiet_since(ma));
        assert!(b.quiet_since(mb));
        drop(busy);
        assert!(!a.quiet_since(ma), "one ran since the mark");
        assert!(a.quiet_since(a.mark()));
        assert!(b.quiet_since(mb));
    }

    /// A limited activity's measurement counts until its limit, then no
    /// more though it still runs; a newer one counts again (and restarts
    /// the limit), and an end still moves the epoch. (The limit is long
    /// enough that the checks just after a start cannot outlast it on a
    /// loaded machine.)
    #[test]
    fn a_measurement_past_its_limit_no_longer_counts() {
        let limit = Duration::from_millis(400);
        let a = Arc::new(Activity::limited(limit));
        let stuck = a.hold();
        assert!(a.active());
        let inside = a.mark();
        assert!(!a.quiet_since(inside), "taken while one ran");
        std::thread::sleep(limit + Duration::from_millis(200));
        assert!(!a.active(), "past its limit");
        let after = a.mark();
        assert!(a.quiet_since(after), "a stuck measurement pauses nothing");
        assert!(!a.quiet_since(inside), "the mark inside stays inside");
        let newer = a.hold();
        assert!(a.active(), "a newer measurement counts");
        assert!(!a.quiet_since(after));
        drop(newer);
        // The limit runs from the newest start, ended or not: the stuck
        // one counts again until then.
        assert!(a.active(), "within the newer one's limit");
        drop(stuck);
        let ended = a.mark();
        assert!(a.quiet_since(ended), "none runs");
        assert!(!a.quiet_since(after), "the ends moved the epoch");
        // The CPU calibration's activity has no limit.
        assert!(CPU.limit.is_none());
    }
}
