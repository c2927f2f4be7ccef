//! Fusion: collapses the adaptor chain into fused nodes, each one pass over
//! memory. Element-wise adaptors (map, filter, zip, enumerate, take, skip)
//! join the current node; a position-dependent adaptor after a filter (zip,
//! enumerate, take, skip, scan, and the terminal here) ends the node with an
//! order-preserving compaction, and a scan always ends it.
//!
//! This rule is deliberately conservative about reductions after a filter:
//! `FilterIntoReduce` removes that compaction when it is not needed.

use super::{Pass, Transformed};
use crate::expr::{BinaryOp, Node, Value};
use crate::graph::{
    FusedStage, FusedTerminal, LogicalOp, LogicalTerminal, OpGraph, OpNode, SlotSource,
};
use crate::semantics::{AggKind, RangeOp};
use smallvec::SmallVec;

/// Whether `v` is `p` or an operand of its tree of `&&`s (looking at a
/// bounded number of nodes: a user's predicate may share subtrees).
fn has_conjunct(arena: &crate::expr::ExprArena, p: Value, v: Value) -> bool {
    let mut stack: SmallVec<[Value; 8]> = smallvec::smallvec![p];
    let mut budget = 64;
    while let Some(q) = stack.pop() {
        if q == v {
            return true;
        }
        budget -= 1;
        if budget == 0 {
            return false;
        }
        if let Node::Binary(BinaryOp::And, a, b) = arena.get(q).node {
            stack.extend([a, b]);
        }
    }
    false
}

/// The fusion rule.
#[derive(Debug)]
pub struct FuseElementwise;

struct Builder {
    done: Vec<OpNode>,
    cur: Option<FusedStage>,
}

impl Builder {
    fn cur(&mut self) -> &mut FusedStage {
        self.cur.as_mut().expect("a source starts every chain")
    }

    fn start(&mut self, slots: SmallVec<[(SlotSource, Value); 2]>, columns: SmallVec<[Value; 4]>) {
        let range = (0..slots.len() as u16).map(RangeOp::Join).collect();
        self.cur = Some(FusedStage {
            slots,
            enumerates: SmallVec::new(),
            range,
            columns,
            predicate: None,
            terminal: FusedTerminal::Collect(SmallVec::new()),
        });
    }

    /// Starts a node whose columns are the previous node's outputs, in
    /// order, standing as `values`.
    fn start_after(&mut self, values: SmallVec<[Value; 4]>) {
        let slots = values
            .iter()
            .enumerate()
            .map(|(j, &v)| (SlotSource::Previous(j as u16), v))
            .collect();
        self.start(slots, values);
    }

    /// Ends the current node by materializing its columns (compacting when
    /// it has a predicate) and starts a node reading them.
    fn split(&mut self) {
        let mut s = self.cur.take().expect("split without a node");
        s.terminal = FusedTerminal::Collect(s.columns.clone());
        let columns = s.columns.clone();
        self.done.push(OpNode::Fused(s));
        self.start_after(columns);
    }

    fn split_if_filtered(&mut self) {
        if self.cur().predicate.is_some() {
            self.split();
        }
    }

    fn finish(&mut self, terminal: FusedTerminal) {
        let mut s = self.cur.take().expect("finish without a node");
        s.terminal = terminal;
        self.done.push(OpNode::Fused(s));
    }
}

impl Pass for FuseElementwise {
    fn name(&self) -> &'static str {
        "fuse_elementwise"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let chain = graph.chain();
        if chain
            .iter()
            .all(|&n| matches!(graph.graph[n], OpNode::Fused(_)))
        {
            return Transformed::No;
        }
        let mut b = Builder {
            done: Vec::new(),
            cur: None,
        };
        for n in chain {
            match graph.graph[n].clone() {
                OpNode::Fused(f) => b.done.push(OpNode::Fused(f)),
                OpNode::Op(op) => match op {
                    LogicalOp::Source { stream, value } => {
                        b.start(
                            smallvec::smallvec![(SlotSource::Stream(stream), value)],
                            smallvec::smallvec![value],
                        );
                    }
                    LogicalOp::Zip { stream, value } => {
                        b.split_if_filtered();
                        let s = b.cur();
                        let slot = s.slots.len() as u16;
                        s.slots.push((SlotSource::Stream(stream), value));
                        s.range.push(RangeOp::Join(slot));
                        s.columns.push(value);
                    }
                    LogicalOp::Enumerate { value, .. } => {
                        b.split_if_filtered();
                        let s = b.cur();
                        let e = s.enumerates.len() as u16;
                        s.enumerates.push(value);
                        s.range.push(RangeOp::Enumerate(e));
                        s.columns.insert(0, value);
                    }
                    LogicalOp::Map { outputs } => b.cur().columns = outputs,
                    LogicalOp::Filter { predicate } => {
                        let p = match b.cur().predicate {
                            None => predicate,
                            // A conjunct it already has (a filter on a
                            // column with nulls keeps the valid rows, and
                            // so does the aggregate after it): nothing to add.
                            Some(old) if has_conjunct(&graph.arena, old, predicate) => old,
                            Some(old) => graph
                                .arena
                                .push(Node::Binary(BinaryOp::And, old, predicate))
                                .expect("predicates are bool"),
                        };
                        b.cur().predicate = Some(p);
                    }
                    LogicalOp::Skip { param } => {
                        b.split_if_filtered();
                        b.cur().range.push(RangeOp::Skip(param));
                    }
                    LogicalOp::Take { param } => {
                        b.split_if_filtered();
                        b.cur().range.push(RangeOp::Take(param));
                    }
                    LogicalOp::Scan {
                        column,
                        combine,
                        exclusive,
                        result,
                    } => {
                        b.split_if_filtered();
                        b.finish(FusedTerminal::Scan {
                            column,
                            combine,
                            exclusive,
                        });
                        b.start(
                            smallvec::smallvec![(SlotSource::Previous(0), result)],
                            smallvec::smallvec![result],
                        );
                    }
                    // The sort's new order makes positions before it
                    // irrelevant: a predicate compacts inside the stage.
                    LogicalOp::Sort {
                        keys,
                        columns,
                        results,
                    } => {
                        b.finish(FusedTerminal::Sort {
                            keys,
                            columns,
                            fetch: None,
                        });
                        b.start_after(results);
                    }
                    // Like a sort, a join reads its rows whole: a
                    // predicate compacts inside the stage.
                    LogicalOp::Join {
                        kind,
                        keys,
                        columns,
                        build,
                        results,
                    } => {
                        b.finish(FusedTerminal::Join {
                            kind,
                            keys,
                            columns,
                            build,
                        });
                        b.start_after(results);
                    }
                },
                OpNode::Terminal(t) => match t {
                    LogicalTerminal::Reduce(aggs) => {
                        b.split_if_filtered();
                        b.finish(FusedTerminal::Reduce(aggs));
                    }
                    LogicalTerminal::Collect(cols) => b.finish(FusedTerminal::Collect(cols)),
                    // Counted under the predicate: positions do not matter.
                    LogicalTerminal::CountByKey { key, keys } => {
                        b.finish(FusedTerminal::CountByKey { key, keys })
                    }
                    // Positions matter only to the arg aggregates.
                    LogicalTerminal::Group {
                        keys,
                        aggs,
                        first_seen,
                    } => {
                        let arg = aggs
                            .iter()
                            .any(|a| matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax));
                        if arg {
                            b.split_if_filtered();
                        }
                        b.finish(FusedTerminal::Group {
                            keys,
                            aggs,
                            first_seen,
                        })
                    }
                },
            }
        }
        if let Some(s) = b.cur.take() {
            // A chain without terminal (graph built for inspection) ends by
            // materializing its columns.
            let cols = s.columns.clone();
            b.cur = Some(s);
            b.finish(FusedTerminal::Collect(cols));
        }
        carry_free_values(&mut b.done, &graph.arena);
        graph.replace_chain(b.done);
        Transformed::Yes
    }
}

/// Makes every stage read only what it can see. The expression rules run on
/// the whole chain before it is cut into stages, so a later stage may refer
/// to a leaf of an earlier one: `constant_fold` turns `-(-x)` into the `x`
/// of a previous stage, and `common_subexpr` merges equal leaves. Such a
/// leaf (an input or an index the stage does not own) is carried through the
/// previous stage's materialized columns, stage by stage from the last, so it
/// reaches the stage that uses it compacted like every other column.
/// Computed values are recomputed from the stage's own slots instead.
fn carry_free_values(stages: &mut [OpNode], arena: &crate::expr::ExprArena) {
    for k in (1..stages.len()).rev() {
        let (head, tail) = stages.split_at_mut(k);
        let (OpNode::Fused(prev), OpNode::Fused(cur)) = (&mut head[k - 1], &mut tail[0]) else {
            continue;
        };
        // Through a sort or a join, a carried value is reordered (and
        // repeated) with the others.
        let is_collect = matches!(prev.terminal, FusedTerminal::Collect(_));
        let (FusedTerminal::Collect(cols)
        | FusedTerminal::Sort { columns: cols, .. }
        | FusedTerminal::Join { columns: cols, .. }) = &mut prev.terminal
        else {
            continue;
        };
        let own: Vec<Value> = cur
            .slots
            .iter()
            .map(|&(_, v)| v)
            .chain(cur.enumerates.iter().copied())
            .collect();
        let mut seen: Vec<Value> = Vec::new();
        let mut free: Vec<Value> = Vec::new();
        let mut stack: Vec<Value> = cur.roots().into_vec();
        while let Some(v) = stack.pop() {
            if seen.contains(&v) || own.contains(&v) {
                continue;
            }
            seen.push(v);
            match arena.get(v).node {
                Node::Input(_) | Node::Index(_) => free.push(v),
                node => stack.extend(node.operands()),
            }
        }
        free.sort_unstable();
        for v in free {
            let j = match cols.iter().position(|&c| c == v) {
                Some(j) => j,
                None => {
                    // A join writes the build side's columns after the
                    // probe's: the next stage's reads of them move up one.
                    let at = cols.len() as u16;
                    for (src, _) in &mut cur.slots {
                        match src {
                            SlotSource::Previous(k) if *k >= at => *k += 1,
                            _ => {}
                        }
                    }
                    cols.push(v);
                    if is_collect {
                        prev.columns.push(v);
                    }
                    cols.len() - 1
                }
            };
            let slot = cur.slots.len() as u16;
            cur.slots.push((SlotSource::Previous(j as u16), v));
            // Every column of the previous stage has the same length and is
            // joined before any skip, like the slots `split` made.
            cur.range.insert(0, RangeOp::Join(slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::testing::graph_of;
    use crate::prelude::*;

    #[test]
    fn element_wise_chain_becomes_one_node() {
        let (xs, ys) = ([1.0f32], [2.0f32]);
        let q = xs
            .compute()
            .map(|x| x * 2.0)
            .zip(&ys)
            .map(|(a, b)| a + b)
            .filter(|v| v.gt(0.0));
        let mut g = graph_of(q);
        assert_eq!(FuseElementwise.rewrite(&mut g), Transformed::Yes);
        assert_eq!(g.graph.node_count(), 1);
        let text = g.to_string();
        assert!(text.contains("-> compact"), "{text}");
        assert_eq!(FuseElementwise.rewrite(&mut g), Transformed::No);
    }

    #[test]
    fn position_after_filter_splits() {
        let xs = [1i32];
        let q = xs.compute().filter(|x| x.gt(0)).enumerate().take(3);
        let mut g = graph_of(q);
        FuseElementwise.rewrite(&mut g);
        assert_eq!(g.graph.node_count(), 2, "{g}");
    }

    #[test]
    fn a_filter_adds_no_conjunct_its_predicate_has() {
        use crate::expr::{DType, ExprArena};
        let mut a = ExprArena::default();
        let [p, q, r, s] = [0, 1, 2, 3].map(|i| a.push_typed(Node::Input(i), DType::Bool).unwrap());
        let pq = a.push(Node::Binary(BinaryOp::And, p, q)).unwrap();
        let pqr = a.push(Node::Binary(BinaryOp::And, pq, r)).unwrap();
        for v in [p, q, r, pq, pqr] {
            assert!(has_conjunct(&a, pqr, v));
        }
        assert!(!has_conjunct(&a, pqr, s));
        // `||` is not a conjunction.
        let or = a.push(Node::Binary(BinaryOp::Or, pqr, s)).unwrap();
        assert!(!has_conjunct(&a, or, p));
        // Shared subtrees: `d = d' && d'` twenty deep is a million paths to
        // `s`; the walk gives up after a bounded number of nodes.
        let mut d = p;
        for _ in 0..20 {
            d = a.push(Node::Binary(BinaryOp::And, d, d)).unwrap();
        }
        assert!(!has_conjunct(&a, d, s));
        assert!(has_conjunct(&a, d, d));
    }

    #[test]
    fn scan_ends_a_node() {
        let xs = [1i32];
        let q = xs.compute().map(|x| x * 2).scan_sum().map(|x| x + 1);
        let mut g = graph_of(q);
        FuseElementwise.rewrite(&mut g);
        assert_eq!(g.graph.node_count(), 2, "{g}");
    }
}
