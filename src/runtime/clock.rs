//! The clock of the query path: monotonic nanoseconds as a plain `u64`.
//!
//! A query reads the clock five times and turns the differences into phase
//! durations. `clock_gettime` costs ~24 ns a read on this project's VM, and
//! `Instant` subtraction normalizes seconds and nanoseconds with checked
//! arithmetic on every call: together over a tenth of a sub-microsecond
//! query. A tick is [`quanta`]'s reading of the CPU's time-stamp counter
//! scaled to nanoseconds (~10 ns a read here), and a difference is one
//! subtraction. `quanta` uses the counter only where the CPU reports it
//! invariant (x86_64; aarch64's system counter qualifies outside iOS),
//! else the OS's monotonic clock; it calibrates the counter against that
//! clock once per process, on the first read (under a millisecond on a
//! quiet machine, at most 200 ms).

use std::time::Duration;

/// A point in time, in nanoseconds of a monotonic clock.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Tick(quanta::Instant);

impl Tick {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Tick {
        Tick(quanta::Instant::now())
    }

    /// Time from `earlier` to `self` (zero if `earlier` is later).
    #[inline]
    pub(crate) fn since(self, earlier: Tick) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_monotonic_and_agree_with_instant() {
        let i0 = std::time::Instant::now();
        let t0 = Tick::now();
        std::thread::sleep(Duration::from_millis(20));
        let t1 = Tick::now();
        let i1 = i0.elapsed();
        let d = t1.since(t0);
        assert!(t1 >= t0);
        // Calibrated against the OS clock: equal within a few parts per
        // million, far inside these bounds.
        assert!(d >= Duration::from_micros(19_980), "{d:?}");
        assert!(d <= i1 + i1 / 1000, "{d:?} within {i1:?}");
        assert_eq!(t0.since(t1), Duration::ZERO);
    }
}
