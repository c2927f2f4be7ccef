//! Dead-code elimination: columns that a compaction or store materializes
//! but the next node never reads are not written at all. (Dead expression
//! nodes are dropped when stages are lowered, which copies only live ones.)

use super::{Pass, Transformed};
use crate::expr::Value;
use crate::graph::{FusedTerminal, OpGraph, OpNode, SlotSource};
use crate::semantics::order::JoinKind;
use std::collections::HashSet;

/// The dead-code rule.
#[derive(Debug)]
pub struct DeadCode;

impl Pass for DeadCode {
    fn name(&self) -> &'static str {
        "dead_code"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let chain = graph.chain();
        let mut nodes: Vec<OpNode> = chain.iter().map(|&n| graph.graph[n].clone()).collect();
        let mut changed = false;
        for i in (1..nodes.len()).rev() {
            let (head, tail) = nodes.split_at_mut(i);
            let (OpNode::Fused(a), OpNode::Fused(b)) = (&mut head[i - 1], &mut tail[0]) else {
                continue;
            };
            // A sort's keys stay; the columns it writes are dropped alike.
            // A join's keys stay too; the probe columns and the build
            // columns it writes after them are dropped alike.
            let is_collect = matches!(a.terminal, FusedTerminal::Collect(_));
            if !matches!(
                a.terminal,
                FusedTerminal::Collect(_) | FusedTerminal::Sort { .. } | FusedTerminal::Join { .. }
            ) {
                continue;
            }
            // Values `b` reads, walking operands but stopping at its slots.
            let slot_values: HashSet<Value> = b.slots.iter().map(|(_, v)| *v).collect();
            let mut used: HashSet<Value> = HashSet::new();
            let mut stack: Vec<Value> = b.roots().into_vec();
            while let Some(v) = stack.pop() {
                if !used.insert(v) || slot_values.contains(&v) {
                    continue;
                }
                stack.extend(graph.arena.get(v).node.operands());
            }
            let keep: Vec<bool> = b
                .slots
                .iter()
                .map(|(src, v)| !matches!(src, SlotSource::Previous(_)) || used.contains(v))
                .collect();
            let mut keep = keep;
            // The next node's length is the shortest of its slots, and the
            // previous node's length is known only through its columns: when
            // none of them is read (`filter(..).zip(ys).count()`), one is
            // still carried so that the zip stops at the shorter stream.
            let previous = |src: &SlotSource| matches!(src, SlotSource::Previous(_));
            let reads_previous = b
                .slots
                .iter()
                .zip(&keep)
                .any(|((src, _), &k)| k && previous(src));
            if !reads_previous {
                if let Some(first) = b.slots.iter().position(|(src, _)| previous(src)) {
                    keep[first] = true;
                } else if !keep.iter().any(|&k| k) {
                    keep[0] = true;
                }
            }
            if keep.iter().all(|&k| k) {
                continue;
            }
            changed = true;
            // The outputs still read, in their order (a join's probe
            // columns stay before its build columns).
            let mut kept: Vec<u16> = b
                .slots
                .iter()
                .zip(&keep)
                .filter_map(|((src, _), &k)| match src {
                    SlotSource::Previous(j) if k => Some(*j),
                    _ => None,
                })
                .collect();
            kept.sort_unstable();
            kept.dedup();
            let mut new_slots = smallvec::SmallVec::new();
            let mut renumber = vec![None; b.slots.len()];
            for (s, (src, v)) in b.slots.iter().enumerate() {
                if !keep[s] {
                    continue;
                }
                renumber[s] = Some(new_slots.len() as u16);
                let src = match *src {
                    SlotSource::Previous(j) => {
                        SlotSource::Previous(kept.iter().position(|&k| k == j).expect("kept") as u16)
                    }
                    other => other,
                };
                new_slots.push((src, *v));
            }
            match &mut a.terminal {
                FusedTerminal::Collect(cols) | FusedTerminal::Sort { columns: cols, .. } => {
                    *cols = kept.iter().map(|&j| cols[j as usize]).collect();
                    if is_collect {
                        a.columns = cols.clone();
                    }
                }
                FusedTerminal::Join {
                    keys,
                    columns,
                    build,
                    ..
                } => {
                    let p = columns.len();
                    let nk = keys.len();
                    let new_columns = kept
                        .iter()
                        .filter(|&&j| (j as usize) < p)
                        .map(|&j| columns[j as usize])
                        .collect();
                    let mut new_build: smallvec::SmallVec<[u16; 4]> =
                        build[..nk].iter().copied().collect();
                    new_build.extend(
                        kept.iter()
                            .filter(|&&j| (j as usize) >= p)
                            .map(|&j| build[nk + j as usize - p]),
                    );
                    *columns = new_columns;
                    *build = new_build;
                }
                _ => unreachable!("matched above"),
            }
            b.slots = new_slots;
            b.range = b
                .range
                .iter()
                .filter_map(|r| match *r {
                    crate::semantics::RangeOp::Join(s) => {
                        renumber[s as usize].map(crate::semantics::RangeOp::Join)
                    }
                    other => Some(other),
                })
                .collect();
        }
        // A last node that only stores the previous node's output unchanged
        // (`scan_sum().collect()`) is a copy: the previous output is the result.
        if let [.., OpNode::Fused(prev), OpNode::Fused(last)] = nodes.as_slice() {
            let produces_columns = !matches!(
                prev.terminal,
                FusedTerminal::Reduce(_)
                    | FusedTerminal::CountByKey { .. }
                    | FusedTerminal::Group { .. }
            );
            let identity = matches!(&last.terminal, FusedTerminal::Collect(cols)
            if cols.len() == last.slots.len()
                && last.slots.iter().enumerate().all(|(j, (src, v))| {
                    *src == SlotSource::Previous(j as u16) && cols[j] == *v
                }))
                && last.predicate.is_none()
                && last.enumerates.is_empty()
                && !last.has_range_steps();
            let width = match &prev.terminal {
                FusedTerminal::Collect(c) | FusedTerminal::Sort { columns: c, .. } => c.len(),
                FusedTerminal::Join {
                    kind: JoinKind::Inner,
                    keys,
                    columns,
                    build,
                } => columns.len() + build.len() - keys.len(),
                FusedTerminal::Join { columns, .. } => columns.len(),
                FusedTerminal::Scan { .. } => 1,
                FusedTerminal::Reduce(_)
                | FusedTerminal::CountByKey { .. }
                | FusedTerminal::Group { .. } => 0,
            };
            if produces_columns && identity && width == last.slots.len() {
                nodes.pop();
                changed = true;
            }
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
    use crate::optimize::testing::graph_of;
    use crate::optimize::{FuseElementwise, Pass, Transformed};
    use crate::prelude::*;

    #[test]
    fn unread_columns_are_not_materialized() {
        let (xs, ys) = ([1.0f32], [1i32]);
        // The compaction would carry (x, y); after enumerate only y is read.
        let q = xs
            .compute()
            .zip(&ys)
            .filter(|(x, _)| x.gt(0.0))
            .enumerate()
            .map(|(i, (_, y))| i.cast::<i32>() + y);
        let mut g = graph_of(q);
        FuseElementwise.rewrite(&mut g);
        assert_eq!(DeadCode.rewrite(&mut g), Transformed::Yes);
        let text = g.to_string();
        assert!(text.contains("compact [v1]"), "{text}");
        assert_eq!(DeadCode.rewrite(&mut g), Transformed::No);
    }

    #[test]
    fn a_trailing_copy_stage_is_removed() {
        let xs = [1i32];
        let mut g = graph_of(xs.compute().scan_sum());
        FuseElementwise.rewrite(&mut g);
        assert_eq!(g.graph.node_count(), 2);
        assert_eq!(DeadCode.rewrite(&mut g), Transformed::Yes);
        assert_eq!(g.graph.node_count(), 1, "{g}");
        let mut g = graph_of(xs.compute().scan_sum().map(|x| x + 1));
        FuseElementwise.rewrite(&mut g);
        DeadCode.rewrite(&mut g);
        assert_eq!(g.graph.node_count(), 2, "{g}");
    }

    #[test]
    fn a_zip_keeps_one_unread_column_for_the_previous_length() {
        let (xs, ys) = ([0i32, 1, 2], [5i32, 5, 5]);
        let mut g = graph_of(xs.compute().filter(|x| x.eq(0)).zip(&ys).map(|(_, y)| y));
        FuseElementwise.rewrite(&mut g);
        DeadCode.rewrite(&mut g);
        let text = g.to_string();
        assert!(text.contains("compact [v0]"), "{text}");
        assert_eq!(xs.compute().filter(|x| x.eq(0)).zip(&ys).count(), 1);
    }
}
