//! Fires when `cpu-parallel` ran (forced or by history) although one thread
//! is estimated faster: the pool's wake-up cost was not repaid.

use super::{estimate_of, Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::metrics::fmt_duration;
use crate::types::BackendKind;

/// See the module doc.
pub struct ParallelLostRule;

impl Rule for ParallelLostRule {
    fn check(&self, cx: &Context<'_>, _ev: &super::Evidence<'_>) -> Option<Recommendation> {
        if cx.backend != BackendKind::CpuParallel {
            return None;
        }
        let simd = estimate_of(cx, BackendKind::CpuSimd)?;
        // Estimates, not the measured time: the advice must not depend on
        // how noisy this one run was.
        let par = estimate_of(cx, BackendKind::CpuParallel)?;
        (simd < par).then(|| Recommendation {
            kind: RecommendationKind::ParallelLost,
            severity: Severity::Warning,
            message: format!(
                "ran on cpu-parallel for {} elements, but one thread is estimated at {}: the \
                 pool's wake-up cost is not repaid at this size; let the selector choose or \
                 batch more data per query",
                cx.workload.elements,
                fmt_duration(crate::metrics::secs(simd))
            ),
            saving: Some(crate::metrics::secs(par - simd)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::CandidateEstimate;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::Evidence;
    use crate::recommend::RecommendationKind::ParallelLost;
    use crate::runtime::Config;

    /// Whether the rule fires for a run on `backend` with these estimates
    /// (injected: the rule must not depend on what this machine measures).
    fn fires(backend: BackendKind, simd: f64, parallel: f64) -> bool {
        let xs = vec![1.0f32; 64];
        let e = Engine::default().query(&xs).explain().sum();
        let estimates = [
            CandidateEstimate {
                backend: BackendKind::CpuSimd,
                seconds: simd,
            },
            CandidateEstimate {
                backend: BackendKind::CpuParallel,
                seconds: parallel,
            },
        ];
        let cx = Context {
            plan: &e.plan,
            workload: &e.workload,
            estimates: &estimates,
            backend,
            metrics: None,
        };
        ParallelLostRule.check(&cx, &Evidence::default()).is_some()
    }

    #[test]
    fn fires_when_parallel_ran_where_one_thread_is_estimated_faster() {
        // A tiny input: the pool's wake-up against a microsecond of work.
        assert!(fires(BackendKind::CpuParallel, 1e-6, 40e-6));
        // A large one, where the pool pays off.
        assert!(!fires(BackendKind::CpuParallel, 2e-3, 1e-3));
        // Not on parallel at all.
        assert!(!fires(BackendKind::CpuSimd, 1e-6, 40e-6));
    }

    #[test]
    fn fires_when_parallel_is_forced_on_a_tiny_input() {
        // Through the engine, with the model alone pricing (no learning:
        // the estimates must not follow this run's measured times) on a
        // fixed four-thread host.
        let engine = Engine::with_config(Config {
            learn: false,
            cpu_profile: Some(crate::cost::CpuProfile {
                threads: 4,
                ..Default::default()
            }),
            ..Config::default()
        });
        let on = |xs: &[f32], k| engine.query(xs).on(k).explain_analyze().sum();
        let tiny = vec![1.0f32; 64];
        assert!(kinds(&analyzed(&on(&tiny, BackendKind::CpuParallel))).contains(&ParallelLost));
        let big = vec![1.0f32; 4 << 20];
        assert!(!kinds(&analyzed(&on(&big, BackendKind::CpuParallel))).contains(&ParallelLost));
        assert!(!kinds(&analyzed(&on(&tiny, BackendKind::CpuSimd))).contains(&ParallelLost));
    }
}
