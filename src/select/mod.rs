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
    /// The longest [`Decision::lease`] the engine honours.
    pub const MAX_LEASE: u32 = 32;
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
