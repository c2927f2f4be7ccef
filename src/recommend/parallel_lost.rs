//! Fires when `cpu-parallel` ran (forced or by history) although one thread
//! is estimated faster: the pool's wake-up cost was not repaid.

use super::{estimate_of, Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::backend::BackendKind;
use crate::metrics::fmt_duration;

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
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::ParallelLost;

    #[test]
    fn fires_when_parallel_is_forced_on_a_tiny_input() {
        let xs = vec![1.0f32; 64];
        let e = xs
            .compute()
            .on(BackendKind::CpuParallel)
            .explain_analyze()
            .sum();
        assert!(kinds(&analyzed(&e)).contains(&ParallelLost));
        let big = vec![1.0f32; 4 << 20];
        let e = big
            .compute()
            .on(BackendKind::CpuParallel)
            .explain_analyze()
            .sum();
        assert!(!kinds(&analyzed(&e)).contains(&ParallelLost));
        let e = xs
            .compute()
            .on(BackendKind::CpuSimd)
            .explain_analyze()
            .sum();
        assert!(!kinds(&analyzed(&e)).contains(&ParallelLost));
    }
}
