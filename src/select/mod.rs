//! Backend selection: given the plan, the run's real workload and the
//! candidate backends, choose one (and the order of fallbacks) with a
//! reason. Behind a trait so that selectors can be swapped without touching
//! the runtime: [`LearningSelector`] (the default: calibrated cost model ×
//! measured history × bounded exploration) and [`CostRule`] (the model
//! alone, no state).
//!
//! Owns history and its persistence; prices through `cost`, never runs
//! anything itself.

mod cost_rule;
pub mod history;
mod learning;
mod persist;

pub use cost_rule::CostRule;
pub use learning::{LearningSelector, LearningSettings};

use crate::metrics::{CandidateEstimate, ExecutionMetrics, SelectionReason};
use crate::plan::CompiledPlan;
use crate::plan::WorkloadCharacteristics;
use crate::types::BackendKind;
use smallvec::SmallVec;
use std::fmt;

/// The selector a new engine uses: the [`LearningSelector`] with the
/// engine's settings (learning, cache directory, calibration budget,
/// exploration bound).
pub fn default_selector(settings: LearningSettings) -> Box<dyn Selector> {
    Box::new(LearningSelector::new(settings))
}

/// Who forced a backend.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Forced {
    /// `.on(kind)` on the query.
    Query(BackendKind),
    /// `COMPUTEQ_BACKEND`.
    Environment(BackendKind),
}

/// What the selector sees.
#[derive(Debug)]
pub struct SelectionInput<'a> {
    /// The plan.
    pub plan: &'a CompiledPlan,
    /// The run's workload, from the real inputs.
    pub workload: &'a WorkloadCharacteristics,
    /// Backends that are enabled, available and accept the plan.
    pub candidates: &'a [BackendKind],
    /// A forced backend, if any (it may not be a candidate: it is tried
    /// anyway and its failure recorded).
    pub forced: Option<Forced>,
    /// computeq is measuring the machine now (the CPU calibration, or a
    /// probe of one of this engine's devices): a run now shares it with
    /// that measurement (see
    /// [`ExecutionMetrics::during_calibration`](crate::ExecutionMetrics::during_calibration)).
    pub measuring: bool,
}

/// The selector's answer.
#[derive(Debug, PartialEq)]
pub struct Decision {
    /// Backends to try, in order: the choice first, then the fallbacks.
    pub order: SmallVec<[BackendKind; 5]>,
    /// Why the first was chosen.
    pub reason: SelectionReason,
    /// Every candidate's estimate.
    pub estimates: SmallVec<[CandidateEstimate; 5]>,
    /// For how many further runs of the same plan, workload, candidates
    /// and options this decision stands: the engine may run them without
    /// asking (the selector counted them as made), as long as
    /// [`Selector::generation`] stays the same and no run fails. 0: ask
    /// every time. It is what keeps the fixed cost of a small query low
    /// (selection is ~150 ns of a ~500 ns query). Of a lease's runs the
    /// selector observes the first and then one in
    /// [`Decision::OBSERVE_LEASED`], and every run in which a backend
    /// failed; a run not leased is always observed.
    pub lease: u32,
}

// By hand: its vectors hold `Copy` items, which `from_slice` copies in
// one move; the derived clone went element by element through the generic
// `extend` (~200 instructions of a leased query at 10^3).
impl Clone for Decision {
    fn clone(&self) -> Decision {
        Decision {
            order: SmallVec::from_slice(&self.order),
            reason: self.reason,
            estimates: SmallVec::from_slice(&self.estimates),
            lease: self.lease,
        }
    }
}

impl Decision {
    /// The longest [`Decision::lease`] the engine honours: for queries
    /// of a few microseconds or less ([`Decision::lease_cap`]).
    pub const MAX_LEASE: u32 = 256;
    /// The longest lease of a query predicted at [`Decision::LEASE_SPAN`]
    /// / 32 or more (above ~6 µs): the selection it saves is a small share
    /// of such a query, and a new choice waits at most this many runs.
    pub const LEASE_FLOOR: u32 = 32;
    /// About how long the runs of one lease last, for the short queries
    /// whose lease is longer than [`Decision::LEASE_FLOOR`]: a selection
    /// is ~5,000 instructions, and once in 32 runs it was ~150
    /// instructions of every run of a query at 10^3 (~6,500).
    pub const LEASE_SPAN: f64 = 200e-6;

    /// The longest lease of a query predicted to take `seconds`: as many
    /// runs as fill [`Decision::LEASE_SPAN`], within
    /// [`Decision::LEASE_FLOOR`]..=[`Decision::MAX_LEASE`] (the floor for
    /// a prediction that is not a positive number).
    pub fn lease_cap(seconds: f64) -> u32 {
        let runs = Decision::LEASE_SPAN / seconds;
        if seconds.is_nan() || seconds <= 0.0 || runs <= f64::from(Decision::LEASE_FLOOR) {
            return Decision::LEASE_FLOOR;
        }
        // `as` saturates: an infinite count is the maximum.
        (runs as u32).min(Decision::MAX_LEASE)
    }

    /// One leased run in this many is observed ([`Decision::lease`]):
    /// learning from a settled decision's every run cost ~45 ns of a
    /// ~650 ns query (a lock, two lookups, the statistics), and the runs
    /// of one lease, same plan, workload and backend, repeat each other.
    pub const OBSERVE_LEASED: u32 = 4;
}

/// Chooses backends.
pub trait Selector: Send + Sync + fmt::Debug {
    /// Chooses for one run.
    fn select(&self, input: &SelectionInput<'_>) -> Decision;

    /// Learns from a finished run (the default ignores it).
    fn observe(&self, _workload: &WorkloadCharacteristics, _metrics: &ExecutionMetrics) {}

    /// Settings in force, for explain.
    fn settings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Changes whenever a leased decision ([`Decision::lease`]) may no
    /// longer stand before its runs are used up (everything learned was
    /// reset, a model was replaced): the engine then asks again. A
    /// selector that never leases may leave the default.
    fn generation(&self) -> u64 {
        0
    }

    /// Forgets everything learned (in memory and persisted).
    fn reset(&self) {}

    /// Persists what was learned now rather than in the background.
    fn flush(&self) {}

    /// Uses a measured profile for a device backend from now on (the
    /// engine calls it when it has measured a device).
    fn set_device_profile(&self, _kind: BackendKind, _profile: crate::cost::DeviceProfile) {}
}

#[cfg(test)]
mod tests {
    use super::Decision;

    #[test]
    fn a_lease_covers_its_span_within_its_bounds() {
        // A sub-microsecond query: the longest lease.
        assert_eq!(Decision::lease_cap(0.5e-6), Decision::MAX_LEASE);
        // A few microseconds: as many runs as fill the span.
        assert_eq!(Decision::lease_cap(2e-6), 100);
        // Longer queries keep the floor, and so does a price that is not
        // a positive number.
        for s in [10e-6, 1.0, f64::INFINITY, 0.0, -0.0, -1.0, f64::NAN] {
            assert_eq!(Decision::lease_cap(s), Decision::LEASE_FLOOR, "{s}");
        }
    }
}
