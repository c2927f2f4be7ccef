//! The clock of the query path: monotonic nanoseconds as a plain `u64`.
//!
//! A query reads the clock five times and turns the differences into phase
//! durations. `Instant` subtraction normalizes seconds and nanoseconds with
//! checked arithmetic on every call, which on a sub-microsecond query costs
//! more than the reads; a tick is one integer, and a difference is one
//! subtraction. On Linux the tick is `CLOCK_MONOTONIC`, the clock `Instant`
//! reads; elsewhere it is `Instant` measured from a process-wide origin.

use std::time::Duration;

/// A point in time, in nanoseconds of a monotonic clock.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Tick(u64);

impl Tick {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Tick {
        Tick(imp::now_ns())
    }

    /// Time from `earlier` to `self` (zero if `earlier` is later).
    #[inline]
    pub(crate) fn since(self, earlier: Tick) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

#[cfg(target_os = "linux")]
mod imp {
    #[inline]
    pub(super) fn now_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC
        // always exists on Linux, so the call cannot fail (were it to,
        // `ts` stays zero and durations read as zero, never negative).
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::sync::OnceLock;
    use std::time::Instant;

    pub(super) fn now_ns() -> u64 {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
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
        assert!(d >= Duration::from_millis(20), "{d:?}");
        assert!(d <= i1, "{d:?} within {i1:?}");
        assert_eq!(t0.since(t1), Duration::ZERO);
    }
}
