//! Recommendations: structured advice on making a query faster, from the
//! plan, the cost model's view and, after a run, its metrics. One rule per
//! file; each rule either fires with a message and an estimated saving or
//! stays silent.

mod baked_constant;
mod fusion_break;
mod parallel_lost;
mod small_device_input;
mod transfers_dominate;

use crate::metrics::{CandidateEstimate, ExecutionMetrics};
use crate::plan::{PhysicalPlan, WorkloadCharacteristics};
use std::fmt;
use std::time::Duration;

/// What a recommendation is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RecommendationKind {
    /// A constant baked into the plan where a captured value would be a
    /// parameter (each new value recompiles).
    BakedConstant,
    /// The plan needs more than one pass because a position-dependent
    /// adaptor follows a filter.
    FusionBreak,
    /// The parallel backend ran but one thread is estimated faster.
    ParallelLost,
    /// A device ran an input too small to repay its fixed costs.
    SmallDeviceInput,
    /// Moving data to and from the device cost more than computing.
    TransfersDominate,
}

/// How much it matters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Costs noticeable time.
    Warning,
}

/// One piece of advice.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// What it is about.
    pub kind: RecommendationKind,
    /// How much it matters.
    pub severity: Severity,
    /// What to do, in words.
    pub message: String,
    /// Estimated time saved per run by following it, when known.
    pub saving: Option<Duration>,
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Info => "info",
            Severity::Warning => "warn",
        };
        write!(f, "[{sev}] {:?}: {}", self.kind, self.message)?;
        if let Some(s) = self.saving {
            write!(f, " (saves ~{})", crate::metrics::fmt_duration(s))?;
        }
        Ok(())
    }
}

/// What the rules look at.
#[derive(Debug)]
pub struct Context<'a> {
    /// The optimized plan.
    pub plan: &'a PhysicalPlan,
    /// The run's workload.
    pub workload: &'a WorkloadCharacteristics,
    /// Every candidate's estimate.
    pub estimates: &'a [CandidateEstimate],
    /// The backend chosen (or that ran).
    pub backend: crate::backend::BackendKind,
    /// Metrics of the run, after one.
    pub metrics: Option<&'a ExecutionMetrics>,
}

/// A recommendation rule.
pub trait Rule {
    /// Checks the context.
    fn check(&self, cx: &Context<'_>) -> Option<Recommendation>;
}

/// Runs every rule.
pub fn recommend(cx: &Context<'_>) -> Vec<Recommendation> {
    let rules: [&dyn Rule; 5] = [
        &baked_constant::BakedConstantRule,
        &fusion_break::FusionBreakRule,
        &parallel_lost::ParallelLostRule,
        &small_device_input::SmallDeviceInputRule,
        &transfers_dominate::TransfersDominateRule,
    ];
    let mut out: Vec<Recommendation> = rules.iter().filter_map(|r| r.check(cx)).collect();
    out.sort_by(|a, b| b.severity.cmp(&a.severity));
    out
}

fn estimate_of(cx: &Context<'_>, k: crate::backend::BackendKind) -> Option<f64> {
    cx.estimates.iter().find(|e| e.backend == k).map(|e| e.seconds)
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::prelude::*;

    /// The context of an explain-analyze of a real query.
    pub fn analyzed(e: &crate::metrics::Explain) -> Vec<Recommendation> {
        recommend(&Context {
            plan: &e.plan,
            workload: &e.workload,
            estimates: &e.candidates,
            backend: e.metrics.as_ref().map_or(e.choice, |m| m.backend),
            metrics: e.metrics.as_ref(),
        })
    }

    pub fn kinds(r: &[Recommendation]) -> Vec<RecommendationKind> {
        r.iter().map(|r| r.kind).collect()
    }

    #[allow(unused)]
    fn _prelude(_: Option<BackendKind>) {}
}
