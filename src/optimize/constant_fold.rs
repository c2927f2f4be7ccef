//! Constant folding: evaluates nodes whose operands are all constants with
//! the reference semantics, and removes value-independent identities
//! (`--x`, `!!b`, same-type casts, `select(c, a, a)`, `min(a, a)`, ...).
//!
//! Parameters are never folded: their values are not part of the plan.

use super::{apply_aliases, live_values, Pass, Transformed};
use crate::expr::{eval, BinaryOp, Node, Scalar, UnaryOp, Value};
use crate::graph::OpGraph;

/// The constant-folding rule.
#[derive(Debug)]
pub struct ConstantFold;

impl Pass for ConstantFold {
    fn name(&self) -> &'static str {
        "constant_fold"
    }

    fn rewrite(&self, graph: &mut OpGraph) -> Transformed {
        let live = live_values(graph);
        let arena = &mut graph.arena;
        let mut alias: Vec<Option<Value>> = vec![None; arena.len()];
        let mut changed = false;
        for i in 0..arena.len() {
            let v = Value::new(i);
            if !live[i] {
                continue;
            }
            let data = *arena.get(v);
            let konst = |x: Value| match arena.get(x).node {
                Node::Const(c) => Some(c),
                _ => None,
            };
            let folded = match data.node {
                Node::Unary(op, a) => konst(a).map(|c| eval::unary(op, c)),
                Node::Binary(op, a, b) => match (konst(a), konst(b)) {
                    (Some(x), Some(y)) => Some(eval::binary(op, x, y)),
                    _ => None,
                },
                Node::Cast(a) => konst(a).map(|c| c.cast(data.ty)),
                Node::MulAdd(a, b, c) => match (konst(a), konst(b), konst(c)) {
                    (Some(x), Some(y), Some(z)) => Some(eval::mul_add(x, y, z)),
                    _ => None,
                },
                Node::Powi(a, n) => konst(a).map(|c| eval::powi(c, n)),
                Node::Select(c, a, b) => match konst(c) {
                    Some(cond) => {
                        alias[i] = Some(if cond.as_bool() { a } else { b });
                        None
                    }
                    None => None,
                },
                _ => None,
            };
            if let Some(c) = folded {
                arena.get_mut(v).node = Node::Const(c);
                changed = true;
                continue;
            }
            if alias[i].is_some() {
                changed = true;
                continue;
            }
            let simpler = match data.node {
                Node::Unary(op @ (UnaryOp::Neg | UnaryOp::Not), a) => match arena.get(a).node {
                    Node::Unary(inner, x) if inner == op => Some(x),
                    _ => None,
                },
                Node::Cast(a) if arena.ty(a) == data.ty => Some(a),
                Node::Select(_, a, b) if a == b => Some(a),
                Node::Binary(
                    BinaryOp::Min | BinaryOp::Max | BinaryOp::And | BinaryOp::Or,
                    a,
                    b,
                ) if a == b => Some(a),
                Node::Binary(BinaryOp::And, a, b) => match (konst(a), konst(b)) {
                    (Some(Scalar::Bool(true)), _) => Some(b),
                    (_, Some(Scalar::Bool(true))) => Some(a),
                    _ => None,
                },
                Node::Binary(BinaryOp::Or, a, b) => match (konst(a), konst(b)) {
                    (Some(Scalar::Bool(false)), _) => Some(b),
                    (_, Some(Scalar::Bool(false))) => Some(a),
                    _ => None,
                },
                _ => None,
            };
            if let Some(s) = simpler {
                alias[i] = Some(s);
                changed = true;
            }
        }
        if alias.iter().any(Option::is_some) {
            apply_aliases(graph, &alias);
        }
        Transformed::from(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::optimize::testing::graph_of;
    use crate::prelude::*;

    #[test]
    fn folds_constants_and_keeps_parameters() {
        let xs = [1.0f32];
        let q = xs
            .compute()
            .map(|x| x * (Expr::constant(2.0f32) + Expr::constant(3.0f32)) + 1.0);
        let mut g = graph_of(q);
        assert_eq!(ConstantFold.rewrite(&mut g), Transformed::Yes);
        let text = g.arena.to_string();
        assert!(text.contains("v3 = const 5.0f32 : f32"), "{text}");
        assert!(
            text.contains("param.0"),
            "captured values stay parameters: {text}"
        );
    }

    #[test]
    fn removes_identities() {
        let xs = [1i32];
        let q = xs.compute().map(|x| (-(-x)).min(-(-x)).cast::<i32>());
        let mut g = graph_of(q);
        // `min(--x, --x)` becomes `min(x, x)` in the first round, `x` in the next.
        assert_eq!(ConstantFold.rewrite(&mut g), Transformed::Yes);
        assert_eq!(ConstantFold.rewrite(&mut g), Transformed::Yes);
        assert_eq!(ConstantFold.rewrite(&mut g), Transformed::No);
        // The collected column is the input itself after folding.
        let out = g.to_string();
        assert!(out.contains("collect [v0]"), "{out}");
    }

    #[test]
    fn nothing_to_fold_is_reported_as_unchanged() {
        let xs = [1.0f64];
        let mut g = graph_of(xs.compute().map(|x| x * 2.0));
        assert_eq!(ConstantFold.rewrite(&mut g), Transformed::No);
    }
}
