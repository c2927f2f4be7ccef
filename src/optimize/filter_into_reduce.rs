//! Filter-into-reduce: a compaction whose only reader is a reduction of the
//! same elements becomes a predicated reduction: no intermediate buffer,
//! one pass. Not applied to `argmin`/`argmax`, whose positions count only
//! the surviving elements.

use super::{Pass, Transformed};
use crate::expr::{BinaryOp, Node};
use crate::graph::{FusedTerminal, OpGraph, OpNode, SlotSource};

/// The filter-into-reduce rule.
#[derive(Debug)]
pub struct FilterIntoReduce;

impl Pass for FilterIntoReduce {
    fn name(&self) -> &'static str {
        "filter_into_reduce"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let chain = graph.chain();
        let mut nodes: Vec<OpNode> = chain.iter().map(|&n| graph.graph[n].clone()).collect();
        let mut changed = false;
        let mut i = 0;
        while i + 1 < nodes.len() {
            let mergeable = match (&nodes[i], &nodes[i + 1]) {
                (OpNode::Fused(a), OpNode::Fused(b)) => {
                    matches!(a.terminal, FusedTerminal::Collect(_))
                        && a.predicate.is_some()
                        && matches!(b.terminal, FusedTerminal::Reduce(_))
                        && !b.has_arg_aggregate()
                        && !b.has_range_steps()
                        && b.enumerates.is_empty()
                        && b.slots.iter().enumerate().all(|(j, (src, v))| {
                            *src == SlotSource::Previous(j as u16) && a.columns.get(j) == Some(v)
                        })
                }
                _ => false,
            };
            if !mergeable {
                i += 1;
                continue;
            }
            let OpNode::Fused(b) = nodes.remove(i + 1) else {
                unreachable!()
            };
            let OpNode::Fused(a) = &mut nodes[i] else {
                unreachable!()
            };
            a.predicate = match (a.predicate, b.predicate) {
                (Some(p), Some(q)) => Some(
                    graph
                        .arena
                        .push(Node::Binary(BinaryOp::And, p, q))
                        .expect("predicates are bool"),
                ),
                (p, q) => p.or(q),
            };
            a.columns = b.columns;
            a.terminal = b.terminal;
            changed = true;
        }
        if changed {
            graph.replace_chain(nodes);
        }
        Transformed::from(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{LogicalTerminal, OpGraph};
    use crate::optimize::{FuseElementwise, Pass};
    use crate::prelude::*;

    fn fused(mut q: crate::query::Query<'_, crate::expr::Expr<f32>>, argmin: bool) -> OpGraph {
        let mut trace = std::mem::take(&mut q.traced.trace);
        let kind = if argmin {
            crate::semantics::AggKind::ArgMin
        } else {
            crate::semantics::AggKind::Sum
        };
        trace.terminal = Some(LogicalTerminal::Reduce(smallvec::smallvec![
            crate::graph::LogicalAgg {
                kind,
                column: Some(q.columns[0])
            }
        ]));
        let mut g = OpGraph::from_trace(&trace);
        FuseElementwise.rewrite(&mut g);
        g
    }

    #[test]
    fn predicated_reduction_replaces_compaction() {
        let xs = [1.0f32];
        let mut g = fused(xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x), false);
        assert_eq!(g.graph.node_count(), 2);
        assert_eq!(FilterIntoReduce.rewrite(&mut g), Transformed::Yes);
        assert_eq!(g.graph.node_count(), 1);
        assert!(g.to_string().contains("predicate="), "{g}");
    }

    #[test]
    fn argmin_keeps_its_compaction() {
        let xs = [1.0f32];
        let mut g = fused(xs.compute().filter(|x| x.gt(0.5)), true);
        assert_eq!(FilterIntoReduce.rewrite(&mut g), Transformed::No);
        assert_eq!(g.graph.node_count(), 2);
    }
}
