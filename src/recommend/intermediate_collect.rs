//! Fires when a query reads a buffer that an earlier query collected
//! ([`super::flow`]): the two chains, written as one query, fuse into one
//! pass, and the intermediate is neither written nor read again. A filtered
//! collect that is only aggregated is [`super::collect_then_aggregate`]'s
//! case, not this one.

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::metrics::fmt_bytes;

/// See the module doc.
pub struct IntermediateCollectRule;

impl Rule for IntermediateCollectRule {
    fn check(&self, cx: &Context<'_>, ev: &Evidence<'_>) -> Option<Recommendation> {
        let p = ev.producer?;
        if super::collect_then_aggregate::applies(cx, &p) {
            return None;
        }
        let bytes = (p.len * p.dtype.size()) as u64;
        Some(Recommendation {
            kind: RecommendationKind::IntermediateCollect,
            severity: Severity::Info,
            message: format!(
                "the input ({} elements, {}) appears to be the collected output of query {:016x}; \
                 if that Vec is only used here, chain both into one query: the adaptors fuse into \
                 one pass and the intermediate is never written or read back",
                p.len,
                fmt_bytes(bytes),
                p.fingerprint
            ),
            // Fused, this query's own pass over the intermediate disappears.
            saving: cx.metrics.map(|m| m.phases.execute),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::expr::DType;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed_with, kinds};
    use crate::recommend::{OutputTracker, RecommendationKind::*};
    use crate::types::Input;
    use crate::types::{Column, ColumnRef};
    use std::time::Duration;

    /// Collects `xs * 2` and records it as a run of the engine would.
    fn produce(xs: &[f32], tracker: &OutputTracker) -> Vec<f32> {
        let e = xs
            .compute()
            .map(|x| x * 2.0)
            .explain()
            .collect::<Vec<f32>>();
        let v: Vec<f32> = xs.compute().map(|x| x * 2.0).collect();
        let out = crate::plan::PlanOutput::Columns(vec![Column::F32(v)]);
        tracker.record(
            e.fingerprint,
            &e.plan,
            &out,
            xs.len() as u64,
            Duration::from_micros(5),
        );
        match out {
            crate::plan::PlanOutput::Columns(mut c) => match c.pop() {
                Some(Column::F32(v)) => v,
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn fires_on_a_previous_querys_output() {
        let xs = vec![1.0f32; 10_000];
        let tracker = OutputTracker::default();
        let mid = produce(&xs, &tracker);
        let producer = tracker.producer_of(&[Input::Host(ColumnRef::F32(&mid))]);
        assert!(producer.is_some());
        let e = mid.compute().map(|x| x + 1.0).explain_analyze().sum();
        let r = analyzed_with(&e, producer);
        assert!(kinds(&r).contains(&IntermediateCollect), "{r:?}");
        assert!(!kinds(&r).contains(&CollectThenAggregate));
    }

    #[test]
    fn silent_on_fresh_data_and_small_outputs() {
        let xs = vec![1.0f32; 10_000];
        let tracker = OutputTracker::default();
        let _mid = produce(&xs, &tracker);
        let fresh = vec![2.0f32; 10_000];
        let producer = tracker.producer_of(&[Input::Host(ColumnRef::F32(&fresh))]);
        assert_eq!(producer, None);
        let e = fresh.compute().map(|x| x + 1.0).explain_analyze().sum();
        assert!(!kinds(&analyzed_with(&e, producer)).contains(&IntermediateCollect));
        let small = produce(&xs[..100], &tracker);
        assert_eq!(
            tracker.find(small.as_ptr() as usize, small.len(), DType::F32),
            None
        );
    }

    #[test]
    fn explain_sees_an_intermediate_collect_through_the_engine() {
        let e = Engine::default();
        let xs = vec![1.0f32; 10_000];
        let mid: Vec<f32> = e.query(&xs).map(|x| x * 2.0).collect();
        let x = e.query(&mid).map(|x| x + 1.0).explain_analyze().sum();
        assert!(
            kinds(&x.recommendations).contains(&IntermediateCollect),
            "{x}"
        );
        let filtered: Vec<f32> = e.query(&xs).filter(|x| x.gt(0.5)).collect();
        let x = e.query(&filtered).explain().sum();
        assert!(
            kinds(&x.recommendations).contains(&CollectThenAggregate),
            "{x}"
        );
        let fresh = vec![1.0f32; 10_000];
        let x = e.query(&fresh).map(|x| x + 1.0).explain_analyze().sum();
        let k = kinds(&x.recommendations);
        assert!(
            !k.contains(&IntermediateCollect) && !k.contains(&CollectThenAggregate),
            "{x}"
        );
    }
}
