//! Optimizer passes over the operation graph, one rule per file, run by a
//! manager in a fixed order with a verifier after each pass (debug builds
//! and tests). The expression rules run to a fixed point with a cap.

mod common_subexpr;
mod constant_fold;
mod dead_code;
mod filter_into_reduce;
mod fuse_elementwise;
mod sort_limit;

pub use common_subexpr::CommonSubexpr;
pub use constant_fold::ConstantFold;
pub use dead_code::DeadCode;
pub use filter_into_reduce::FilterIntoReduce;
pub use fuse_elementwise::FuseElementwise;
pub use sort_limit::SortLimit;

use crate::expr::Value;
use crate::graph::OpGraph;
use crate::types::PlanError;

/// Whether a pass changed the graph.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Transformed {
    /// Something changed.
    Yes,
    /// Nothing changed.
    No,
}

impl Transformed {
    /// `Yes` when `changed`.
    pub fn from(changed: bool) -> Transformed {
        if changed {
            Transformed::Yes
        } else {
            Transformed::No
        }
    }
}

/// One optimizer rule.
pub trait Pass {
    /// Name shown in explain.
    fn name(&self) -> &'static str;
    /// Rewrites the graph in place.
    fn rewrite(&self, graph: &mut OpGraph) -> Transformed;
}

/// Maximum rounds of the expression rules.
pub const MAX_EXPRESSION_ROUNDS: usize = 4;

/// Runs every pass; returns the names of the passes that changed something,
/// in order. Verifies the graph after each pass when `verify` is set.
pub fn optimize(graph: &mut OpGraph, verify: bool) -> Result<Vec<&'static str>, PlanError> {
    let mut applied = Vec::new();
    let mut run = |pass: &dyn Pass, graph: &mut OpGraph| -> Result<Transformed, PlanError> {
        let t = pass.rewrite(graph);
        if verify {
            graph.verify().map_err(|e| PlanError::AfterPass {
                pass: pass.name(),
                error: Box::new(e),
            })?;
        }
        if t == Transformed::Yes {
            applied.push(pass.name());
        }
        Ok(t)
    };
    for _ in 0..MAX_EXPRESSION_ROUNDS {
        let a = run(&ConstantFold, graph)?;
        let b = run(&CommonSubexpr, graph)?;
        if a == Transformed::No && b == Transformed::No {
            break;
        }
    }
    run(&FuseElementwise, graph)?;
    run(&FilterIntoReduce, graph)?;
    run(&SortLimit, graph)?;
    run(&DeadCode, graph)?;
    Ok(applied)
}

/// Replaces every use of an aliased value by its target, in the arena's
/// operands and in the graph. `alias[i]` is the replacement of value `i`.
pub(crate) fn apply_aliases(graph: &mut OpGraph, alias: &[Option<Value>]) {
    let resolve = |mut v: Value| {
        while let Some(t) = alias.get(v.index()).copied().flatten() {
            v = t;
        }
        v
    };
    let n = graph.arena.len();
    for i in 0..n {
        let v = Value::new(i);
        let node = graph.arena.get(v).node.map_operands(resolve);
        graph.arena.get_mut(v).node = node;
    }
    graph.for_each_value_mut(|v| *v = resolve(*v));
}

/// Which arena values are still used: reachable from the graph's
/// references through operands. Rules skip dead nodes so that a rewrite
/// already applied is not reported again.
pub(crate) fn live_values(graph: &OpGraph) -> Vec<bool> {
    let mut live = vec![false; graph.arena.len()];
    let mut g = graph.clone();
    g.for_each_value_mut(|v| live[v.index()] = true);
    for i in (0..graph.arena.len()).rev() {
        if live[i] {
            for op in graph.arena.get(Value::new(i)).node.operands() {
                live[op.index()] = true;
            }
        }
    }
    live
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builds a graph from a real traced query for pass tests.
    use crate::graph::OpGraph;
    use crate::query::{Mode, Query};

    /// The unoptimized graph of `q` ended by `collect`.
    pub fn graph_of<'a, S: crate::expr::Shape, M: Mode>(mut q: Query<'a, S, M>) -> OpGraph {
        let mut trace = std::mem::take(&mut q.traced.trace);
        trace.terminal = Some(crate::graph::LogicalTerminal::Collect(q.columns));
        OpGraph::from_trace(&trace)
    }
}
