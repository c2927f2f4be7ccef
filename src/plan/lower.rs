//! Lowering: turns the fused nodes of an optimized operation graph into
//! stages with their own compact element programs.
//!
//! Only nodes reachable from a stage's roots are copied (so dead
//! expressions vanish here), in arena order (so operands precede users).

use super::stage::{
    AggKind, Aggregate, Combine, JoinKind, PhysicalPlan, ScanOp, Stage, StageInput, Terminal,
};
use crate::expr::{ExprArena, Node, NodeData, Value};
use crate::graph::{FusedStage, FusedTerminal, OpGraph, OpNode, SlotSource, Stream};
use crate::types::{Fault, PlanError};
use smallvec::SmallVec;

/// Lowers a fully fused graph. `param_count` is the number of parameter
/// slots of the query.
pub fn lower(graph: &OpGraph, param_count: usize) -> Result<PhysicalPlan, PlanError> {
    let mut stages = SmallVec::new();
    for (i, n) in graph.chain().into_iter().enumerate() {
        match &graph.graph[n] {
            OpNode::Fused(f) => stages.push(lower_stage(graph, f, i).map_err(|f| f.at(i))?),
            other => {
                return Err(PlanError::NotFused {
                    node: i,
                    what: other.to_string(),
                })
            }
        }
    }
    if stages.is_empty() {
        return Err(PlanError::NoStage);
    }
    let plan = PhysicalPlan {
        input_dtypes: graph.input_dtypes.clone(),
        param_count,
        stages,
    };
    verify(&plan)?;
    Ok(plan)
}

fn lower_stage(graph: &OpGraph, f: &FusedStage, index: usize) -> Result<Stage, Fault> {
    let arena = &graph.arena;
    let n = arena.len();
    // Boundary values: slots and enumerate counters.
    let mut map: Vec<Option<Value>> = vec![None; n];
    let mut program = ExprArena::new();
    for (s, (_, v)) in f.slots.iter().enumerate() {
        let local = program
            .push_typed(Node::Input(s as u16), arena.ty(*v))
            .map_err(|e| Fault::Expressions(e.to_string()))?;
        map[v.index()] = Some(local);
    }
    for (e, v) in f.enumerates.iter().enumerate() {
        let local = program
            .push(Node::Index(e as u16))
            .map_err(|e| Fault::Expressions(e.to_string()))?;
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
            return Err(Fault::Escaped {
                value: v.index() as u32,
                node: format!("{:?}", data.node),
            });
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
            other => Err(Fault::Dangling(format!("input {other:?}"))),
        })
        .collect::<Result<_, Fault>>()?;
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
        FusedTerminal::Group {
            keys,
            aggs,
            first_seen,
        } => Terminal::Group {
            keys: keys.iter().map(|&k| local(k)).collect(),
            aggs: aggs
                .iter()
                .map(|a| Aggregate {
                    kind: a.kind.clone(),
                    column: a.column.map(local),
                })
                .collect(),
            first_seen: *first_seen,
        },
        FusedTerminal::Sort {
            keys,
            columns,
            fetch,
        } => Terminal::Sort {
            keys: keys
                .iter()
                .map(|k| super::SortKey {
                    value: local(k.value),
                    descending: k.descending,
                })
                .collect(),
            columns: columns.iter().map(|&c| local(c)).collect(),
            fetch: *fetch,
        },
        FusedTerminal::Join {
            kind,
            keys,
            columns,
            build,
        } => Terminal::Join {
            kind: *kind,
            keys: keys.iter().map(|&k| local(k)).collect(),
            columns: columns.iter().map(|&c| local(c)).collect(),
            build: build
                .iter()
                .map(|&k| {
                    graph
                        .input_dtypes
                        .get(k as usize)
                        .map(|&ty| (k, ty))
                        .ok_or_else(|| Fault::Dangling(format!("build input {k}")))
                })
                .collect::<Result<_, Fault>>()?,
        },
        FusedTerminal::CountByKey { key, keys } => Terminal::CountByKey {
            key: local(*key),
            keys: *keys,
        },
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
pub fn verify(plan: &PhysicalPlan) -> Result<(), PlanError> {
    for (i, s) in plan.stages.iter().enumerate() {
        verify_stage(plan, i, s).map_err(|f| f.at(i))?;
    }
    Ok(())
}

fn verify_stage(plan: &PhysicalPlan, i: usize, s: &Stage) -> Result<(), Fault> {
    use crate::expr::DType;
    s.program
        .verify()
        .map_err(|e| Fault::Expressions(e.to_string()))?;
    for inp in &s.inputs {
        match *inp {
            StageInput::Source(k) if (k as usize) < plan.input_dtypes.len() => {}
            StageInput::Stage { stage, .. } if (stage as usize) < i => {}
            other => return Err(Fault::Dangling(format!("input {other:?}"))),
        }
    }
    if let Some(p) = s.predicate {
        if s.program.ty(p) != DType::Bool {
            return Err(Fault::PredicateNotBool {
                value: p.index() as u32,
                ty: s.program.ty(p),
            });
        }
    }
    match &s.terminal {
        Terminal::Reduce(aggs) => {
            if i + 1 != plan.stages.len() {
                return Err(Fault::ReduceNotLast);
            }
            for a in aggs {
                let arg = matches!(a.kind, AggKind::ArgMin | AggKind::ArgMax);
                if arg && s.predicate.is_some() {
                    return Err(Fault::PredicatedAggregate(a.kind.name()));
                }
                if a.column.is_none() != matches!(a.kind, AggKind::Count) {
                    return Err(Fault::AggregateColumn(a.kind.name()));
                }
                if matches!(a.kind, AggKind::Any | AggKind::All) {
                    if let Some(ty) = a.column.map(|c| s.program.ty(c)) {
                        if ty != DType::Bool {
                            return Err(Fault::AggregateType {
                                agg: a.kind.name(),
                                ty,
                            });
                        }
                    }
                }
            }
        }
        Terminal::CountByKey { key, keys } => {
            if i + 1 != plan.stages.len() {
                return Err(Fault::ReduceNotLast);
            }
            let ty = s.program.ty(*key);
            if ty != DType::U32 || *keys == 0 {
                return Err(Fault::AggregateType {
                    agg: "count_by_key",
                    ty,
                });
            }
        }
        Terminal::Group { keys, aggs, .. } => {
            if i + 1 != plan.stages.len() {
                return Err(Fault::ReduceNotLast);
            }
            let bits: usize = keys
                .iter()
                .map(|&k| 8 * s.program.ty(k).size().max(4))
                .sum();
            if bits > 128 {
                return Err(Fault::AggregateColumn(
                    "group (at most 128 bits of keys together)",
                ));
            }
            for a in aggs {
                if a.column.is_none() != matches!(a.kind, AggKind::Count)
                    || matches!(a.kind, AggKind::Custom(_))
                    || keys.is_empty()
                {
                    return Err(Fault::AggregateColumn(a.kind.name()));
                }
            }
        }
        Terminal::Join {
            keys, build, kind, ..
        } => {
            let bits: usize = keys
                .iter()
                .map(|&k| 8 * s.program.ty(k).size().max(4))
                .sum();
            let typed = keys.len() <= build.len()
                && keys.iter().zip(build.iter()).all(|(&k, &(input, ty))| {
                    s.program.ty(k) == ty && plan.input_dtypes.get(input as usize) == Some(&ty)
                })
                && build
                    .iter()
                    .all(|&(input, ty)| plan.input_dtypes.get(input as usize) == Some(&ty));
            if keys.is_empty()
                || bits > 128
                || !typed
                || (*kind != JoinKind::Inner && build.len() != keys.len())
            {
                return Err(Fault::AggregateColumn(
                    "join (keys of one type on both sides, at most 128 bits together)",
                ));
            }
        }
        Terminal::Sort { keys, columns, .. } if keys.is_empty() || columns.is_empty() => {
            return Err(Fault::AggregateColumn("sort"));
        }
        Terminal::Scan { .. } if s.predicate.is_some() => return Err(Fault::PredicatedScan),
        _ => {}
    }
    Ok(())
}
