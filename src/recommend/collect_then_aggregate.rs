//! Fires when a query only aggregates a buffer that an earlier query made
//! with `filter(..).collect()`: written as one query ending in the
//! aggregate, the filter moves into the reduction (filter-into-reduce), so
//! nothing is compacted, allocated or read a second time.

use super::{Context, Evidence, Produced, Recommendation, RecommendationKind, Rule, Severity};
use crate::plan::{StageInput, Terminal};

/// See the module doc.
pub struct CollectThenAggregateRule;

/// Whether `p` (the producer of `cx`'s input) was a filtered collect and
/// `cx` only aggregates it in one pass.
pub(super) fn applies(cx: &Context<'_>, p: &Produced) -> bool {
    let stages = &cx.plan.stages;
    p.filtered
        && stages.len() == 1
        && matches!(stages[0].terminal, Terminal::Reduce(_))
        && stages[0]
            .inputs
            .iter()
            .all(|i| matches!(i, StageInput::Source(_)))
}

impl Rule for CollectThenAggregateRule {
    fn check(&self, cx: &Context<'_>, ev: &Evidence<'_>) -> Option<Recommendation> {
        let p = ev.producer?;
        applies(cx, &p).then(|| Recommendation {
            kind: RecommendationKind::CollectThenAggregate,
            severity: Severity::Warning,
            message: format!(
                "the input appears to be the filtered, collected output of query {:016x} \
                 ({} of {} elements survived), and this query only aggregates it: end the \
                 filtering query in the aggregate instead of `collect` (e.g. \
                 `.filter(..).sum()`): the filter runs inside the reduction, in one pass, \
                 with no compaction and no allocation",
                p.fingerprint, p.len, p.elements_in
            ),
            // This whole pass disappears, and the producer no longer
            // compacts (not counted: its measured time includes its read).
            saving: cx.metrics.map(|m| m.phases.execute),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed_with, kinds};
    use crate::recommend::{OutputTracker, RecommendationKind::*};
    use crate::types::Input;
    use crate::types::{Column, ColumnRef};
    use std::time::Duration;

    fn filtered(xs: &[f32], tracker: &OutputTracker) -> Vec<f32> {
        let e = xs
            .compute()
            .filter(|x| x.gt(0.5))
            .explain()
            .collect::<Vec<f32>>();
        let v: Vec<f32> = xs.compute().filter(|x| x.gt(0.5)).collect();
        let out = crate::plan::PlanOutput::Columns(vec![Column::F32(v)]);
        tracker.record(
            e.fingerprint,
            &e.plan,
            &out,
            xs.len() as u64,
            Duration::from_micros(9),
        );
        let crate::plan::PlanOutput::Columns(mut c) = out else {
            unreachable!()
        };
        let Some(Column::F32(v)) = c.pop() else {
            unreachable!()
        };
        v
    }

    #[test]
    fn fires_when_a_filtered_collect_is_only_summed() {
        let xs: Vec<f32> = (0..20_000).map(|i| (i % 10) as f32 / 10.0).collect();
        let tracker = OutputTracker::default();
        let kept = filtered(&xs, &tracker);
        let producer = tracker.producer_of(&[Input::Host(ColumnRef::F32(&kept))]);
        let e = kept.compute().explain_analyze().sum();
        let r = analyzed_with(&e, producer);
        assert!(kinds(&r).contains(&CollectThenAggregate), "{r:?}");
        assert!(
            !kinds(&r).contains(&IntermediateCollect),
            "one advice, not two"
        );
    }

    #[test]
    fn silent_when_the_result_is_collected_again_or_not_filtered() {
        let xs: Vec<f32> = (0..20_000).map(|i| (i % 10) as f32 / 10.0).collect();
        let tracker = OutputTracker::default();
        let kept = filtered(&xs, &tracker);
        let producer = tracker.producer_of(&[Input::Host(ColumnRef::F32(&kept))]);
        let e = kept
            .compute()
            .map(|x| x * 2.0)
            .explain_analyze()
            .collect::<Vec<f32>>();
        assert!(!kinds(&analyzed_with(&e, producer)).contains(&CollectThenAggregate));
        let e = xs.compute().explain_analyze().sum();
        assert!(!kinds(&analyzed_with(&e, None)).contains(&CollectThenAggregate));
    }
}
