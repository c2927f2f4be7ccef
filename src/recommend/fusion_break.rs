//! Fires when the plan takes several passes because a position-dependent
//! adaptor (enumerate, zip, take, skip, argmin/argmax) follows a filter:
//! the survivors are compacted into a buffer first.

use super::{Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::plan::{StageInput, Terminal};

/// See the module doc.
pub struct FusionBreakRule;

impl Rule for FusionBreakRule {
    fn check(&self, cx: &Context<'_>, _ev: &super::Evidence<'_>) -> Option<Recommendation> {
        let breaks = cx
            .plan
            .stages
            .windows(2)
            .filter(|w| {
                matches!(w[0].terminal, Terminal::Collect(_))
                    && w[0].predicate.is_some()
                    && w[1]
                        .inputs
                        .iter()
                        .any(|i| matches!(i, StageInput::Stage { .. }))
            })
            .count();
        (breaks > 0).then(|| {
            let extra = cx
                .metrics
                .map(|m| m.phases.execute / (cx.plan.stages.len() as u32).max(1));
            Recommendation {
                kind: RecommendationKind::FusionBreak,
                severity: Severity::Info,
                message: format!(
                    "{breaks} filter(s) are followed by a position-dependent adaptor, which \
                     compacts the survivors into a buffer and adds a pass; if positions of the \
                     unfiltered stream are meant, move enumerate/zip/take/skip before the filter"
                ),
                saving: extra,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::FusionBreak;

    #[test]
    fn fires_on_compaction_before_position() {
        let xs = vec![1.0f32; 100];
        let e = xs
            .compute()
            .filter(|x| x.gt(0.0))
            .enumerate()
            .explain_analyze()
            .count();
        assert!(kinds(&analyzed(&e)).contains(&FusionBreak));
        let e = xs
            .compute()
            .enumerate()
            .filter(|(_, x)| x.gt(0.0))
            .explain_analyze()
            .count();
        assert!(!kinds(&analyzed(&e)).contains(&FusionBreak));
    }
}
