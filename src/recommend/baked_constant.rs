//! Fires when the plan holds `Expr::constant` values: each different value
//! is a different plan, optimized and compiled again.

use super::{Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::expr::Node;

/// See the module doc.
pub struct BakedConstantRule;

impl Rule for BakedConstantRule {
    fn check(&self, cx: &Context<'_>, _ev: &super::Evidence<'_>) -> Option<Recommendation> {
        let n: usize = cx
            .plan
            .stages
            .iter()
            .map(|s| {
                s.program
                    .iter()
                    .filter(|(_, d)| matches!(d.node, Node::Const(_)))
                    .count()
            })
            .sum();
        (n > 0).then(|| Recommendation {
            kind: RecommendationKind::BakedConstant,
            severity: Severity::Info,
            message: format!(
                "{n} constant(s) are baked into the plan (Expr::constant); use a captured \
                 Rust value instead so a new value reuses the compiled plan"
            ),
            saving: cx
                .metrics
                .filter(|m| !m.plan_cache_hit)
                .map(|m| m.phases.optimize + m.phases.compile),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::expr::Expr;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::BakedConstant;

    #[test]
    fn fires_on_constants_only() {
        let xs = vec![1.0f32; 100];
        let e = xs
            .compute()
            .map(|x| x * Expr::constant(3.0))
            .explain_analyze()
            .sum();
        assert!(kinds(&analyzed(&e)).contains(&BakedConstant));
        let e = xs.compute().map(|x| x * 3.0).explain_analyze().sum();
        assert!(!kinds(&analyzed(&e)).contains(&BakedConstant));
    }
}
