//! Sort + take → top-k: a sort whose output is read only up to a `take`
//! (`sort().take(k)`, `top_k(k)`) fetches only that many rows, which the
//! backends compute by selection instead of a full sort. The `take` stays
//! where it is (it still bounds the next stage; the fetch only makes the
//! sort cheaper).

use super::{Pass, Transformed};
use crate::graph::{FusedTerminal, OpGraph, OpNode};
use crate::semantics::RangeOp;

/// The sort-limit rule.
#[derive(Debug)]
pub struct SortLimit;

impl Pass for SortLimit {
    fn name(&self) -> &'static str {
        "sort_limit"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let chain = graph.chain();
        let mut changed = false;
        for w in chain.windows(2) {
            // The next stage's first range step past its joins and
            // counters: a take there bounds the positions it reads (a
            // skip first would need the sum of both).
            let take = match &graph.graph[w[1]] {
                OpNode::Fused(b) => b
                    .range
                    .iter()
                    .find(|r| !matches!(r, RangeOp::Join(_) | RangeOp::Enumerate(_)))
                    .and_then(|r| match *r {
                        RangeOp::Take(p) => Some(p),
                        _ => None,
                    }),
                _ => None,
            };
            if let (Some(p), OpNode::Fused(a)) = (take, &mut graph.graph[w[0]]) {
                if let FusedTerminal::Sort {
                    fetch: f @ None, ..
                } = &mut a.terminal
                {
                    *f = Some(p);
                    changed = true;
                }
            }
        }
        Transformed::from(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::testing::graph_of;
    use crate::optimize::FuseElementwise;
    use crate::prelude::*;

    #[test]
    fn a_take_after_a_sort_becomes_its_fetch_and_a_skip_first_does_not() {
        let xs = [3i32, 1, 2];
        let mut g = graph_of(xs.compute().sort().take(2));
        FuseElementwise.rewrite(&mut g);
        assert_eq!(SortLimit.rewrite(&mut g), Transformed::Yes);
        assert!(g.to_string().contains("fetch param.0"), "{g}");
        assert_eq!(SortLimit.rewrite(&mut g), Transformed::No);
        let mut g = graph_of(xs.compute().sort().skip(1).take(2));
        FuseElementwise.rewrite(&mut g);
        assert_eq!(SortLimit.rewrite(&mut g), Transformed::No);
    }
}
