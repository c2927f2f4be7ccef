//! Fires when wgpu's guard discarded the run because a float operation met
//! an infinity or a NaN (`codegen::finite`): the device's time was spent
//! for nothing and the query ran on the next backend.

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::codegen::finite::DISCARDED;
use crate::types::BackendKind;

/// See the module doc.
pub struct NonFiniteRule;

impl Rule for NonFiniteRule {
    fn check(&self, cx: &Context<'_>, _ev: &Evidence<'_>) -> Option<Recommendation> {
        let m = cx.metrics?;
        m.attempts
            .iter()
            .any(|a| a.backend == BackendKind::Wgpu && a.message.contains(DISCARDED))
            .then(|| Recommendation {
                kind: RecommendationKind::NonFinite,
                severity: Severity::Warning,
                message: format!(
                    "wgpu discarded its run because a float operation met an infinity or a NaN \
                     (WGSL lets its compiler assume none occurs), and the query ran on {}: \
                     filter such values out before the arithmetic to keep it on the device, or \
                     set COMPUTEQ_WGPU_TRUST_NON_FINITE=1 if the device's results will do",
                    m.backend
                ),
                saving: None,
            })
    }
}

#[cfg(test)]
mod tests {
    use crate::codegen::finite::DISCARDED;
    use crate::metrics::Attempt;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::NonFinite;
    use crate::types::Phase;

    #[test]
    fn fires_when_wgpu_discarded_the_run_and_only_then() {
        let xs = vec![1.0f32, f32::INFINITY];
        let mut x = xs
            .compute()
            .on(BackendKind::CpuScalar)
            .map(|x| x - x)
            .explain_analyze()
            .sum();
        assert!(!kinds(&analyzed(&x)).contains(&NonFinite));
        let failed = |message: String| Attempt {
            backend: BackendKind::Wgpu,
            phase: Phase::Execute,
            message: message.into(),
            decline: None,
        };
        let m = x.metrics.as_mut().expect("analyzed");
        m.attempts.push(failed("device lost".into()));
        assert!(!kinds(&analyzed(&x)).contains(&NonFinite));
        let m = x.metrics.as_mut().expect("analyzed");
        m.attempts.push(failed(DISCARDED.into()));
        assert!(kinds(&analyzed(&x)).contains(&NonFinite));
    }
}
