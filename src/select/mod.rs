//! Backend selection: given the plan, the run's real workload and the
//! candidate backends, choose one (and the order of fallbacks) with a
//! reason. Behind a trait so that the learning selector can replace the
//! cost rule without touching the runtime.

mod cost_rule;

pub use cost_rule::CostRule;

use crate::backend::BackendKind;
use crate::metrics::{CandidateEstimate, ExecutionMetrics, SelectionReason};
use crate::plan::WorkloadCharacteristics;
use crate::runtime::compiled::CompiledPlan;
use smallvec::SmallVec;
use std::fmt;

/// The selector a new engine uses.
pub fn default_selector(_config: &crate::runtime::Config) -> Box<dyn Selector> {
    Box::new(CostRule::default())
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
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Backends to try, in order: the choice first, then the fallbacks.
    pub order: SmallVec<[BackendKind; 5]>,
    /// Why the first was chosen.
    pub reason: SelectionReason,
    /// Every candidate's estimate.
    pub estimates: SmallVec<[CandidateEstimate; 5]>,
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
}
