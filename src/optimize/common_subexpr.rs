//! Common-subexpression elimination: identical nodes (after canonical
//! ordering of commutative operands) are computed once. Parameters are
//! distinct slots and never merge, even when their values are equal.

use super::{apply_aliases, live_values, Pass, Transformed};
use crate::expr::{Node, NodeData, Value};
use crate::graph::OpGraph;
use std::collections::HashMap;

/// The CSE rule.
#[derive(Debug)]
pub struct CommonSubexpr;

impl Pass for CommonSubexpr {
    fn name(&self) -> &'static str {
        "common_subexpr"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let live = live_values(graph);
        let n = graph.arena.len();
        let mut alias: Vec<Option<Value>> = vec![None; n];
        let mut seen: HashMap<NodeData, Value> = HashMap::with_capacity(n);
        for i in 0..n {
            if !live[i] {
                continue;
            }
            let v = Value::new(i);
            let mut data = *graph.arena.get(v);
            data.node = data.node.map_operands(|o| alias[o.index()].unwrap_or(o));
            if let Node::Binary(op, a, b) = data.node {
                if op.is_commutative() && b < a {
                    data.node = Node::Binary(op, b, a);
                }
            }
            match seen.get(&data) {
                Some(&first) => alias[i] = Some(first),
                None => {
                    seen.insert(data, v);
                }
            }
        }
        let changed = alias.iter().any(Option::is_some);
        if changed {
            apply_aliases(graph, &alias);
        }
        Transformed::from(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::testing::graph_of;
    use crate::prelude::*;

    #[test]
    fn merges_repeated_work_but_not_parameters() {
        let xs = [1.0f32];
        let q = xs
            .compute()
            .map(|x| x.sqrt() * x.sqrt() + (x * 2.0) + (x * 2.0));
        let mut g = graph_of(q);
        assert_eq!(CommonSubexpr.rewrite(&mut g), Transformed::Yes);
        let live = live_values(&g);
        let sqrt_live = g
            .arena
            .iter()
            .filter(|(v, d)| {
                live[v.index()] && matches!(d.node, Node::Unary(crate::expr::UnaryOp::Sqrt, _))
            })
            .count();
        assert_eq!(sqrt_live, 1);
        // `x * 2.0` twice uses two parameter slots: both products stay.
        let muls = g
            .arena
            .iter()
            .filter(|(v, d)| {
                live[v.index()] && matches!(d.node, Node::Binary(crate::expr::BinaryOp::Mul, _, _))
            })
            .count();
        assert_eq!(muls, 3);
        assert_eq!(CommonSubexpr.rewrite(&mut g), Transformed::No);
    }

    #[test]
    fn commutative_operands_are_canonical() {
        let xs = [1i32];
        let ys = [2i32];
        let q = xs.compute().zip(&ys).map(|(a, b)| (a + b) * (b + a));
        let mut g = graph_of(q);
        assert_eq!(CommonSubexpr.rewrite(&mut g), Transformed::Yes);
    }
}
