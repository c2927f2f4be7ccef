//! Recommendations: structured advice on making a query faster, from the
//! plan, the cost model's view and, after a run, its metrics. One rule per
//! file; each rule either fires with a message and an estimated saving or
//! stays silent.

mod baked_constant;
mod collect_then_aggregate;
mod float_group_key;
pub(crate) mod flow;
mod fusion_break;
mod intermediate_collect;
mod non_finite;
mod parallel_lost;
mod small_device_input;
mod top_k;
mod transfers_dominate;
mod unsupported_type;

pub(crate) use flow::{OutputTracker, Produced};

use crate::metrics::{Attempt, CandidateEstimate, ExecutionMetrics};
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
    /// The query reads a buffer that an earlier query collected: chaining
    /// the two fuses them into one pass without the intermediate.
    IntermediateCollect,
    /// A filtered result was collected and then only aggregated: the
    /// aggregate over the filter runs in one pass without materializing.
    CollectThenAggregate,
    /// A device declined the plan for a type it lacks (64-bit on many GPUs).
    UnsupportedType,
    /// A float group key: every distinct value is a group; bucket it.
    FloatGroupKey,
    /// A sort followed by `take` ran as top-k, or a `skip` before the
    /// `take` kept the full sort.
    TopK,
    /// wgpu discarded its run: a float operation met an infinity or a NaN,
    /// which WGSL lets its compiler assume away.
    NonFinite,
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
    pub backend: crate::types::BackendKind,
    /// Metrics of the run, after one.
    pub metrics: Option<&'a ExecutionMetrics>,
}

/// What is known about a query beyond its own plan and run: the backends
/// that declined it and the earlier query that produced its input.
#[derive(Clone, Copy, Debug, Default)]
pub struct Evidence<'a> {
    /// Backends not considered, with why (`Explain::declined`).
    pub declined: &'a [Attempt],
    /// The recent collect whose output this query reads
    /// (the engine finds it among its recent collects by the query's inputs).
    pub producer: Option<Produced>,
}

/// A recommendation rule.
pub trait Rule {
    /// Checks the context.
    fn check(&self, cx: &Context<'_>, ev: &Evidence<'_>) -> Option<Recommendation>;
}

/// Runs every rule with no evidence beyond the context.
pub fn recommend(cx: &Context<'_>) -> Vec<Recommendation> {
    recommend_with(cx, &Evidence::default())
}

/// Runs every rule.
pub fn recommend_with(cx: &Context<'_>, ev: &Evidence<'_>) -> Vec<Recommendation> {
    let rules: [&dyn Rule; 11] = [
        &baked_constant::BakedConstantRule,
        &collect_then_aggregate::CollectThenAggregateRule,
        &fusion_break::FusionBreakRule,
        &intermediate_collect::IntermediateCollectRule,
        &parallel_lost::ParallelLostRule,
        &small_device_input::SmallDeviceInputRule,
        &transfers_dominate::TransfersDominateRule,
        &unsupported_type::UnsupportedTypeRule,
        &float_group_key::FloatGroupKeyRule,
        &top_k::TopKRule,
        &non_finite::NonFiniteRule,
    ];
    let mut out: Vec<Recommendation> = rules.iter().filter_map(|r| r.check(cx, ev)).collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.severity));
    out
}

fn estimate_of(cx: &Context<'_>, k: crate::types::BackendKind) -> Option<f64> {
    cx.estimates
        .iter()
        .find(|e| e.backend == k)
        .map(|e| e.seconds)
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::prelude::*;

    /// The context of an explain-analyze of a real query.
    pub fn analyzed(e: &crate::explain::Explain) -> Vec<Recommendation> {
        analyzed_with(e, None)
    }

    /// The same with the declined backends of the explain and a producer.
    pub fn analyzed_with(
        e: &crate::explain::Explain,
        producer: Option<Produced>,
    ) -> Vec<Recommendation> {
        recommend_with(
            &Context {
                plan: &e.plan,
                workload: &e.workload,
                estimates: &e.candidates,
                backend: e.metrics.as_ref().map_or(e.choice, |m| m.backend),
                metrics: e.metrics.as_ref(),
            },
            &Evidence {
                declined: &e.declined,
                producer,
            },
        )
    }

    /// A device backend for tests: runs on `cpu-scalar` but reports itself
    /// as `wgpu`, with `transfer` as its upload time, and declines plans
    /// with 64-bit types when `no_wide`.
    #[derive(Debug)]
    pub struct FakeDevice {
        pub transfer: std::time::Duration,
        pub no_wide: bool,
    }

    impl crate::backend::Backend for FakeDevice {
        fn kind(&self) -> BackendKind {
            BackendKind::Wgpu
        }
        fn availability(&self) -> crate::backend::Availability {
            crate::backend::Availability::Available
        }
        fn supports(&self, plan: &crate::plan::PhysicalPlan) -> Result<(), crate::types::Decline> {
            if self.no_wide && plan.stages.iter().any(|s| s.uses_wide_types()) {
                return Err(crate::types::Decline::MissingType {
                    dtype: crate::types::DType::F64,
                    feature: "SHADER_F64",
                });
            }
            Ok(())
        }
        fn execute(
            &self,
            job: &crate::backend::Job<'_>,
            stats: &mut crate::types::RunStats,
        ) -> Result<crate::plan::PlanOutput, crate::types::BackendError> {
            let t = std::time::Instant::now();
            let out = crate::backend::cpu_scalar::CpuScalar.execute(job, stats)?;
            stats.execute = t.elapsed();
            stats.transfer_in = self.transfer;
            stats.bytes_uploaded = job
                .inputs
                .iter()
                .map(|i| (i.len() * i.dtype().size()) as u64)
                .sum();
            Ok(out)
        }
    }

    /// An engine with the fake device.
    pub fn engine_with(dev: FakeDevice) -> Engine {
        Engine::default().with_backend(std::sync::Arc::new(dev))
    }

    pub fn kinds(r: &[Recommendation]) -> Vec<RecommendationKind> {
        r.iter().map(|r| r.kind).collect()
    }

    #[allow(unused)]
    fn _prelude(_: Option<BackendKind>) {}
}
