//! Whether computeq is measuring the CPU itself: the quick calibration on
//! a process's first query, its re-probes 1, 4 and 16 s later, a full
//! calibration a caller asks for. Each runs work of its own on the cores
//! a query runs on, so a query timed meanwhile measured the machine shared
//! with it, not the backend alone: on the 2-vCPU VM of this project a
//! 10^7-value histogram on `cpu-parallel` beside a re-probe ran 1.4-2.1x
//! (median of a process's runs) its time just before and after, and one
//! beside the quick calibration 14x (`cargo run --release --example
//! beside_calibration`; docs/selector.md, "Runs beside the calibration").
//!
//! A device's probe is not counted: on a real GPU it mostly waits for the
//! device. On lavapipe it is CPU work as well, and runs beside it are
//! learned from as before (a limit, in docs/selector.md).
//!
//! A measurement holds a [`Busy`] while it runs. A query takes a [`Mark`]
//! before its run and asks [`quiet_since`] after it: quiet when no
//! measurement ran at any time in between. Two atomics, read twice a
//! query; written only when a measurement starts or ends.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Measurements running now.
static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// Measurements started or ended so far.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// One of computeq's own measurements, running while this is held.
#[must_use = "the measurement counts as running only while this is held"]
pub struct Busy(());

/// Marks a measurement as running until the returned guard drops.
pub fn busy() -> Busy {
    ACTIVE.fetch_add(1, Ordering::AcqRel);
    EPOCH.fetch_add(1, Ordering::AcqRel);
    Busy(())
}

impl Drop for Busy {
    fn drop(&mut self) {
        EPOCH.fetch_add(1, Ordering::AcqRel);
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether a measurement is running now.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire) > 0
}

/// Where the measurements stood at some moment ([`mark`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark(Option<u64>);

/// The measurements' state now: `None` inside while one runs.
pub fn mark() -> Mark {
    // The epoch before the count: a measurement that starts between the
    // two reads moves the epoch past the one kept.
    let epoch = EPOCH.load(Ordering::Acquire);
    Mark((ACTIVE.load(Ordering::Acquire) == 0).then_some(epoch))
}

/// Whether no measurement ran at any time since `m` was taken: none was
/// running then, none is now, and none started or ended in between.
pub fn quiet_since(m: Mark) -> bool {
    m.0.is_some_and(|e| ACTIVE.load(Ordering::Acquire) == 0 && EPOCH.load(Ordering::Acquire) == e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A mark with no measurement running since: the counters are
    /// process-wide and other tests calibrate, so this waits (at most a
    /// minute) for a moment when none runs.
    fn quiet_mark() -> Mark {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = mark();
            if quiet_since(m) {
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
            let during = mark();
            assert!(!quiet_since(during), "taken while one ran");
            during
        };
        assert!(!quiet_since(during), "one was running at the mark");
        let before = quiet_mark();
        drop(busy());
        assert!(!quiet_since(before), "one started and ended since the mark");
        let before = quiet_mark();
        let _b = busy();
        assert!(!quiet_since(before), "one is running now");
    }
}
