//! Lowering: turns the fused nodes of an optimized operation graph into
//! stages with their own compact element programs.
//!
//! Only nodes reachable from a stage's roots are copied (so dead
//! expressions vanish here), in arena order (so operands precede users).

use super::stage::{
    AggKind, Aggregate, Combine, PhysicalPlan, ScanOp, Stage, StageInput, Terminal,
};
use crate::expr::{ExprArena, Node, NodeData, Value};
use crate::graph::{FusedStage, FusedTerminal, OpGraph, OpNode, SlotSource, Stream};
use smallvec::SmallVec;

/// Lowers a fully fused graph. `param_count` is the number of parameter
/// slots of the query.
pub fn lower(graph: &OpGraph, param_count: usize) -> Result<PhysicalPlan, String> {
    let mut stages = SmallVec::new();
    for (i, n) in graph.chain().into_iter().enumerate() {
        match &graph.graph[n] {
            OpNode::Fused(f) => stages.push(lower_stage(graph, f, i)?),
            other => return Err(format!("node n{i} was not fused: {other}")),
        }
    }
    if stages.is_empty() {
        return Err("the graph has no node".into());
    }
    let plan = PhysicalPlan {
        input_dtypes: graph.input_dtypes.clone(),
        param_count,
        stages,
    };
    verify(&plan)?;
    Ok(plan)
}

fn lower_stage(graph: &OpGraph, f: &FusedStage, index: usize) -> Result<Stage, String> {
    let arena = &graph.arena;
    let n = arena.len();
    // Boundary values: slots and enumerate counters.
    let mut map: Vec<Option<Value>> = vec![None; n];
    let mut program = ExprArena::new();
    for (s, (_, v)) in f.slots.iter().enumerate() {
        let local = program
            .push_typed(Node::Input(s as u16), arena.ty(*v))
            .map_err(|e| e.to_string())?;
        map[v.index()] = Some(local);
    }
    for (e, v) in f.enumerates.iter().enumerate() {
        let local = program
            .push(Node::Index(e as u16))
            .map_err(|e| e.to_string())?;
        map[v.index()] = Some(local);
    }
    // Reachable set from the roots, stopping at boundary values.
    let mut live = vec![false; n];
    let mut stack: Vec<Value> = f.roots().into_vec();
    while let Some(v) = stack.pop() {
        if live[v.index()] || map[v.index()].is_some() {
            continue;
        }
        live[v.index()] = true;
        stack.extend(arena.get(v).node.operands());
    }
    for i in 0..n {
        if !live[i] {
            continue;
        }
        let v = Value::new(i);
        let data = arena.get(v);
        if data.node.is_per_element_leaf() {
            return Err(format!(
                "stage {index} reads {v} ({:?}), which belongs to another stage: an \
                 expression escaped the closure that created it",
                data.node
            ));
        }
        let node = data
            .node
            .map_operands(|o| map[o.index()].expect("operand lowered first"));
        map[i] = Some(program.push_unchecked(NodeData { node, ty: data.ty }));
    }
    let local = |v: Value| map[v.index()].expect("root lowered");
    let inputs = f
        .slots
        .iter()
        .map(|(src, _)| match *src {
            SlotSource::Stream(Stream::Input(k)) => Ok(StageInput::Source(k)),
            SlotSource::Previous(c) if index > 0 => Ok(StageInput::Stage {
                stage: index as u16 - 1,
                column: c,
            }),
            other => Err(format!("stage {index} has an unresolvable input {other:?}")),
        })
        .collect::<Result<_, String>>()?;
    let terminal = match &f.terminal {
        FusedTerminal::Reduce(aggs) => Terminal::Reduce(
            aggs.iter()
                .map(|a| Aggregate {
                    kind: a.kind.clone(),
                    column: a.column.map(local),
                })
                .collect(),
        ),
        FusedTerminal::Collect(cols) => Terminal::Collect(cols.iter().map(|&c| local(c)).collect()),
        FusedTerminal::Scan {
            column,
            combine,
            exclusive,
        } => Terminal::Scan {
            column: local(*column),
            op: match combine {
                None => ScanOp::Sum,
                Some(c) => ScanOp::Custom(Combine {
                    program: c.program.clone(),
                    output: c.output,
                    identity: c.identity,
                }),
            },
            exclusive: *exclusive,
        },
    };
    Ok(Stage {
        inputs,
        enumerates: f.enumerates.len() as u16,
        range: f.range.clone(),
        program,
        predicate: f.predicate.map(local),
        terminal,
    })
}

/// Checks a physical plan: programs well-typed, inputs resolvable, terminals
/// consistent (predicates are `bool`, no predicate beside arg aggregates or
/// scans, only the last stage reduces).
pub fn verify(plan: &PhysicalPlan) -> Result<(), String> {
    use crate::expr::DType;
    for (i, s) in plan.stages.iter().enumerate() {
        s.program.verify().map_err(|e| format!("stage {i}: {e}"))?;
        for inp in &s.inputs {
            match *inp {
                StageInput::Source(k) if (k as usize) < plan.input_dtypes.len() => {}
                StageInput::Stage { stage, .. } if (stage as usize) < i => {}
                other => return Err(format!("stage {i}: bad input {other:?}")),
            }
        }
        if let Some(p) = s.predicate {
            if s.program.ty(p) != DType::Bool {
                return Err(format!("stage {i}: predicate {p} is not bool"));
            }
        }
        match &s.terminal {
            Terminal::Reduce(aggs) => {
                if i + 1 != plan.stages.len() {
                    return Err(format!("stage {i} reduces but is not last"));
                }
                for a in aggs {
                    let arg = matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax);
                    if arg && s.predicate.is_some() {
                        return Err(format!("stage {i}: {} with a predicate", a.kind.name()));
                    }
                    if a.column.is_none() != matches!(a.kind, AggKind::Count) {
                        return Err(format!("stage {i}: {} column mismatch", a.kind.name()));
                    }
                    if matches!(a.kind, AggKind::Any | AggKind::All)
                        && a.column.map(|c| s.program.ty(c)) != Some(DType::Bool)
                    {
                        return Err(format!("stage {i}: any/all of a non-bool column"));
                    }
                }
            }
            Terminal::Scan { .. } if s.predicate.is_some() => {
                return Err(format!("stage {i}: scan with a predicate"))
            }
            _ => {}
        }
    }
    Ok(())
}
