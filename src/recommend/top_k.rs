//! Says when a sort followed by `take(k)` ran as a top-k selection (only
//! `k` rows ordered), and when a `skip` between the sort and the `take`
//! kept the full sort: `take(skip + k)` first, then `skip`, selects.

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::plan::Terminal;
use crate::semantics::RangeOp;

/// See the module doc.
pub struct TopKRule;

impl Rule for TopKRule {
    fn check(&self, cx: &Context<'_>, _: &Evidence<'_>) -> Option<Recommendation> {
        let stages = &cx.plan.stages;
        for (i, s) in stages.iter().enumerate() {
            let Terminal::Sort { fetch, .. } = &s.terminal else {
                continue;
            };
            let message = match fetch {
                Some(_) => "a sort followed by `take(k)` ran as a top-k selection: only the \
                            first k rows were ordered (`top_k`/`bottom_k` say so directly)"
                    .to_string(),
                None => {
                    let next = stages.get(i + 1)?;
                    let mut steps = next
                        .range
                        .iter()
                        .filter(|r| !matches!(r, RangeOp::Join(_) | RangeOp::Enumerate(_)));
                    match (steps.next(), steps.next()) {
                        (Some(RangeOp::Skip(_)), Some(RangeOp::Take(_))) => {
                            "a sort followed by `skip(s).take(k)` sorts every row: write \
                             `.take(s + k).skip(s)` after the sort and it runs as a top-k \
                             selection of s + k rows"
                                .to_string()
                        }
                        _ => continue,
                    }
                }
            };
            return Some(Recommendation {
                kind: RecommendationKind::TopK,
                severity: if fetch.is_some() {
                    Severity::Info
                } else {
                    Severity::Warning
                },
                message,
                saving: None,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::*;

    #[test]
    fn top_k_is_reported_and_a_skip_before_the_take_is_flagged() {
        let xs = [3.0f32, 1.0, 2.0];
        let e = xs.compute().top_k(2).explain().collect::<Vec<f32>>();
        assert!(kinds(&analyzed(&e)).contains(&TopK));
        let e = xs
            .compute()
            .sort()
            .skip(1)
            .take(1)
            .explain()
            .collect::<Vec<f32>>();
        let r = analyzed(&e);
        assert!(
            r.iter()
                .any(|r| r.kind == TopK && r.message.contains("take(s + k)")),
            "{r:?}"
        );
        let e = xs.compute().sort().explain().collect::<Vec<f32>>();
        assert!(!kinds(&analyzed(&e)).contains(&TopK));
    }
}
