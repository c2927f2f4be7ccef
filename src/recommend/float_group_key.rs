//! Fires when a query groups by a float key: every distinct value is a
//! group of its own, so a measured quantity usually makes almost as many
//! groups as rows (a hash table as large as the input), where a bucketed
//! integer key makes few, dense ones (grouped by a direct index).

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::plan::Terminal;

/// See the module doc.
pub struct FloatGroupKeyRule;

impl Rule for FloatGroupKeyRule {
    fn check(&self, cx: &Context<'_>, _: &Evidence<'_>) -> Option<Recommendation> {
        let last = cx.plan.stages.last()?;
        let Terminal::Group { keys, .. } = &last.terminal else {
            return None;
        };
        let k = keys.iter().find(|&&k| last.program.ty(k).is_float())?;
        Some(Recommendation {
            kind: RecommendationKind::FloatGroupKey,
            severity: Severity::Info,
            message: format!(
                "the group key {k} is a float: every distinct value is its own group \
                 (-0.0 and +0.0 one, every NaN one); if it is a measurement, bucket it into an \
                 integer key (e.g. `(x * 10.0).floor().cast::<i32>()`): fewer groups, and a \
                 dense range is grouped by a direct index instead of a hash table"
            ),
            saving: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, kinds};
    use crate::recommend::RecommendationKind::*;

    #[test]
    fn a_float_key_is_flagged_and_an_integer_one_is_not() {
        let xs = [1.5f32, 2.5, 1.5];
        let e = xs.compute().explain().value_counts();
        assert!(kinds(&analyzed(&e)).contains(&FloatGroupKey));
        let e = xs
            .compute()
            .group_by(|x| x.floor().cast::<i32>())
            .explain()
            .count();
        assert!(!kinds(&analyzed(&e)).contains(&FloatGroupKey));
    }
}
