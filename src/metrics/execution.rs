//! `ExecutionMetrics`: everything measured about one run.

use super::{fmt_bytes, fmt_duration};
use crate::types::{BackendKind, Decline, OutputMemory, Phase, TimingSource};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// Why the backend that ran was chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SelectionReason {
    /// Forced on the query with `.on(..)`.
    Forced,
    /// Forced by `COMPUTEQ_BACKEND`.
    Environment,
    /// The only candidate left (others unavailable, disabled or declining).
    OnlyCandidate,
    /// Cheapest estimate of the cost model.
    Model {
        /// Estimated seconds of the choice.
        estimate: f64,
        /// Estimated seconds of the runner-up, if any.
        runner_up: Option<(BackendKind, f64)>,
    },
    /// Measured history of this plan and size outweighed the model.
    History {
        /// Number of measurements behind the choice.
        samples: u32,
        /// The prediction that won, in seconds: the cost model's estimate
        /// corrected by the median ratio of this backend's recent
        /// measurements to it (the number the candidates were compared by).
        predicted: f64,
    },
    /// Exploration of a plausible candidate with too few measurements.
    Exploration,
    /// The chosen backend failed; this one ran instead.
    Fallback {
        /// The backend originally chosen.
        from: BackendKind,
    },
}

impl fmt::Display for SelectionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionReason::Forced => write!(f, "forced by the query"),
            SelectionReason::Environment => write!(f, "forced by COMPUTEQ_BACKEND"),
            SelectionReason::OnlyCandidate => write!(f, "only available candidate"),
            SelectionReason::Model {
                estimate,
                runner_up,
            } => {
                write!(f, "cheapest estimate ({})", fmt_duration(secs(*estimate)))?;
                if let Some((b, e)) = runner_up {
                    write!(f, ", next {b} at {}", fmt_duration(secs(*e)))?;
                }
                Ok(())
            }
            SelectionReason::History { samples, predicted } => write!(
                f,
                "measured history ({samples} runs, predicts {})",
                fmt_duration(secs(*predicted))
            ),
            SelectionReason::Exploration => write!(f, "exploring a plausible candidate"),
            SelectionReason::Fallback { from } => write!(f, "fallback after {from} failed"),
        }
    }
}

/// Seconds as a `Duration`, saturating: a negative or NaN figure is zero,
/// an infinite one or one past `Duration::MAX` (~1.8e19 s) is
/// `Duration::MAX`. Estimates come from profiles (measured, loaded, set by
/// the caller), and formatting one must never panic
/// (`Duration::from_secs_f64` does on all of these).
pub(crate) fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(if s > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

/// A backend that was tried and failed, or skipped before running.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// The backend.
    pub backend: BackendKind,
    /// Where it failed (`Support` or `Init` when it was skipped).
    pub phase: Phase,
    /// Why.
    pub message: Cow<'static, str>,
    /// Why, typed, when the backend declined the plan itself (`Support`).
    pub decline: Option<Decline>,
}

impl Attempt {
    /// A backend that declined the plan before running it.
    pub fn declined(backend: BackendKind, why: Decline) -> Attempt {
        Attempt {
            backend,
            phase: Phase::Support,
            message: why.to_string().into(),
            decline: Some(why),
        }
    }
}

/// The cost model's estimate for one candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidateEstimate {
    /// The backend.
    pub backend: BackendKind,
    /// Estimated total seconds.
    pub seconds: f64,
}

/// Time spent in each phase of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    /// Tracing closures (from `.compute()` to the terminal call).
    pub trace: Duration,
    /// Plan-cache lookup, and on a miss building the operation graph;
    /// the workload's figures; on a run under its thread's lease (see
    /// `select`) the lease's lookup too.
    pub plan: Duration,
    /// Optimizer passes and lowering (zero on a plan-cache hit).
    pub optimize: Duration,
    /// Choosing the backend. Zero on a run that repeats its thread's
    /// leased decision (the selector's `Decision::lease`):
    /// no choice is made there, and the lease's lookup is timed in `plan`
    /// (one clock read fewer for a query that may take under a
    /// microsecond).
    pub select: Duration,
    /// Compiling for the backend (zero when cached).
    pub compile: Duration,
    /// Host → device.
    pub transfer_in: Duration,
    /// The computation.
    pub execute: Duration,
    /// Device → host.
    pub transfer_out: Duration,
    /// Wall time of the whole query, tracing included.
    pub total: Duration,
    /// Which clock measured `execute` (device timestamps or host timers).
    pub timing: TimingSource,
}

/// Everything measured about one run of one query.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionMetrics {
    /// Sequence number of the run in its engine: 1, 2, ... in the order
    /// the runs were logged (numbered by the engine's run log).
    pub run_id: u64,
    /// Structural hash of the query (captured values excluded).
    pub fingerprint: u64,
    /// The backend that produced the result.
    pub backend: BackendKind,
    /// Why it was chosen.
    pub reason: SelectionReason,
    /// Backends tried before it, or skipped, with why.
    pub attempts: Vec<Attempt>,
    /// Input elements (of the first stage).
    pub elements_in: u64,
    /// Input bytes read.
    pub bytes_in: u64,
    /// Output elements (1 per aggregate for reductions).
    pub elements_out: u64,
    /// Output bytes.
    pub bytes_out: u64,
    /// Time per phase.
    pub phases: PhaseTimes,
    /// Whether the optimized plan came from the plan cache.
    pub plan_cache_hit: bool,
    /// Whether the backend's compiled artifact was cached.
    pub compile_cache_hit: bool,
    /// Bytes allocated by the run (outputs, intermediates, scratch).
    pub bytes_allocated: u64,
    /// Bytes copied to a device.
    pub bytes_uploaded: u64,
    /// Bytes copied from a device.
    pub bytes_downloaded: u64,
    /// Bytes of input already resident on the device (not moved).
    pub bytes_resident: u64,
    /// The cost model's estimate for every candidate.
    pub estimates: SmallVec<[CandidateEstimate; 5]>,
    /// Threads or device lanes used.
    pub parallelism: u32,
    /// Device dispatches or parallel tasks.
    pub launches: u32,
    /// Number of stages (passes over memory).
    pub stages: u32,
    /// `reduce`, `collect` or `scan`.
    pub terminal: &'static str,
    /// Retries of the backend with smaller chunks after it ran out of
    /// device memory (0 normally).
    pub oom_retries: u32,
    /// Positions of the last stage left unread because an early-exit
    /// terminal (`first`, `find`, `position`, `nth`, `any`, `all`,
    /// `last`) was settled before them: on the CPU backends, and on the
    /// devices the chunks not launched after a settled one (the tiles a
    /// device kernel skips inside a chunk are not counted).
    pub elements_skipped: u64,
    /// The algorithm of the plan's last sort, when it has one (e.g.
    /// `lsd-radix 4 of 4 digit passes`).
    pub algorithm: Option<super::Algorithm>,
    /// computeq measured the machine in the background while this ran:
    /// the CPU (the calibration on a process's first query, one of its
    /// re-probes, or `computeq::calibrate_full`) or one of this engine's
    /// devices (its probe, from its start to the device's price). The
    /// run shared the cores with it, so its times are not the backend's
    /// alone, and the learning selector does not learn from them.
    pub during_calibration: bool,
    /// The memory its result columns were written into: fresh from the
    /// system (page faults on first writes) or recycled by the allocator;
    /// looked at for results of 256 KiB or more, `Unknown` otherwise.
    pub output_memory: OutputMemory,
}

impl ExecutionMetrics {
    /// The cost model's estimate for the backend that ran.
    pub fn estimated(&self) -> Option<Duration> {
        self.estimates
            .iter()
            .find(|e| e.backend == self.backend)
            .map(|e| secs(e.seconds))
    }

    /// Input elements per second of total wall time.
    pub fn elements_per_second(&self) -> f64 {
        self.elements_in as f64 / self.phases.total.as_secs_f64().max(1e-12)
    }

    /// Input plus output gigabytes per second of execute time.
    pub fn gb_per_second(&self) -> f64 {
        (self.bytes_in + self.bytes_out) as f64 / 1e9 / self.phases.execute.as_secs_f64().max(1e-12)
    }

    /// Share of the total wall time spent executing (1.0 = no overhead).
    pub fn efficiency(&self) -> f64 {
        self.phases.execute.as_secs_f64() / self.phases.total.as_secs_f64().max(1e-12)
    }

    /// Whether a fallback happened.
    pub fn fell_back(&self) -> bool {
        matches!(self.reason, SelectionReason::Fallback { .. })
    }
}

#[cfg(test)]
impl ExecutionMetrics {
    /// A successful run of `backend` over `elements` input elements
    /// (`bytes_in` bytes) that executed for `secs`, with neutral values in
    /// every field unit tests do not look at.
    pub(crate) fn test_run(
        fingerprint: u64,
        backend: BackendKind,
        elements: u64,
        bytes_in: u64,
        secs: f64,
    ) -> ExecutionMetrics {
        ExecutionMetrics {
            run_id: 0,
            fingerprint,
            backend,
            reason: SelectionReason::Forced,
            attempts: Vec::new(),
            elements_in: elements,
            bytes_in,
            elements_out: 1,
            bytes_out: 8,
            phases: PhaseTimes {
                execute: self::secs(secs),
                total: self::secs(secs),
                ..PhaseTimes::default()
            },
            plan_cache_hit: true,
            compile_cache_hit: true,
            bytes_allocated: 0,
            bytes_uploaded: 0,
            bytes_downloaded: 0,
            bytes_resident: 0,
            estimates: SmallVec::new(),
            parallelism: 1,
            launches: 1,
            stages: 1,
            terminal: "reduce",
            oom_retries: 0,
            elements_skipped: 0,
            algorithm: None,
            during_calibration: false,
            output_memory: OutputMemory::Unknown,
        }
    }
}

impl fmt::Display for ExecutionMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.phases;
        write!(
            f,
            "backend={} reason=\"{}\" elements_in={} bytes_in={} elements_out={} bytes_out={} \
             total={} trace={} plan={} optimize={} select={} compile={} transfer_in={} execute={} \
             transfer_out={} plan_cache_hit={} compile_cache_hit={} allocated={} throughput={:.2}GB/s \
             efficiency={:.0}%",
            self.backend,
            self.reason,
            self.elements_in,
            fmt_bytes(self.bytes_in),
            self.elements_out,
            fmt_bytes(self.bytes_out),
            fmt_duration(p.total),
            fmt_duration(p.trace),
            fmt_duration(p.plan),
            fmt_duration(p.optimize),
            fmt_duration(p.select),
            fmt_duration(p.compile),
            fmt_duration(p.transfer_in),
            fmt_duration(p.execute),
            fmt_duration(p.transfer_out),
            self.plan_cache_hit,
            self.compile_cache_hit,
            fmt_bytes(self.bytes_allocated),
            self.gb_per_second(),
            self.efficiency() * 100.0,
        )?;
        if let Some(e) = self.estimated() {
            write!(f, " estimated={}", fmt_duration(e))?;
        }
        if self.elements_skipped > 0 {
            write!(f, " skipped={} (early exit)", self.elements_skipped)?;
        }
        if let Some(a) = self.algorithm {
            write!(f, " algorithm=\"{a}\"")?;
        }
        if self.bytes_uploaded + self.bytes_downloaded + self.bytes_resident > 0 {
            write!(
                f,
                " uploaded={} downloaded={} resident={}",
                fmt_bytes(self.bytes_uploaded),
                fmt_bytes(self.bytes_downloaded),
                fmt_bytes(self.bytes_resident)
            )?;
        }
        if self.backend.is_device() {
            write!(f, " timing={}", p.timing)?;
        }
        if self.oom_retries > 0 {
            write!(f, " oom_retries={}", self.oom_retries)?;
        }
        if self.during_calibration {
            write!(f, " during_calibration")?;
        }
        if let Some(m) = self.output_memory.label() {
            write!(f, " output_memory={m}")?;
        }
        for a in &self.attempts {
            write!(f, " failed[{}@{}: {}]", a.backend, a.phase, a.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_out_of_range_format_without_panicking() {
        assert_eq!(secs(f64::INFINITY), Duration::MAX);
        assert_eq!(secs(1e30), Duration::MAX);
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(-1.0), Duration::ZERO);
        assert_eq!(secs(f64::NEG_INFINITY), Duration::ZERO);
        assert_eq!(secs(1.5), Duration::from_millis(1500));
        for x in [f64::INFINITY, 1e30, f64::NAN, -1.0] {
            let r = SelectionReason::Model {
                estimate: x,
                runner_up: Some((BackendKind::CpuSimd, x)),
            };
            assert!(!r.to_string().is_empty());
            let r = SelectionReason::History {
                samples: 1,
                predicted: x,
            };
            assert!(!r.to_string().is_empty());
            let mut m = ExecutionMetrics::test_run(1, BackendKind::CpuSimd, 10, 40, x);
            m.estimates.push(CandidateEstimate {
                backend: BackendKind::CpuSimd,
                seconds: x,
            });
            assert!(m.to_string().contains("estimated="));
        }
    }
}
