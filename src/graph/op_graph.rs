//! The operation graph itself (a petgraph `StableDiGraph`), built from the
//! trace, checked by `verify`, printed by `Display`.

use super::fused::{FusedStage, FusedTerminal, SlotSource};
use super::logical::{LogicalOp, LogicalTerminal, QueryTrace};
use crate::expr::{DType, ExprArena, Value};
use crate::types::{Fault, PlanError};
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::Direction;
use smallvec::SmallVec;
use std::fmt::{self, Write as _};

/// A node of the operation graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpNode {
    /// An adaptor not yet fused.
    Op(LogicalOp),
    /// The query's terminal, not yet fused.
    Terminal(LogicalTerminal),
    /// A fused run of adaptors (one future stage).
    Fused(FusedStage),
}

/// The operation graph of one query, with the expression arena its nodes
/// refer to.
#[derive(Clone, Debug)]
pub struct OpGraph {
    /// Data flows along edges, from sources to the terminal.
    pub graph: StableDiGraph<OpNode, ()>,
    /// The query's element expressions.
    pub arena: ExprArena,
    /// Types of the query's inputs.
    pub input_dtypes: SmallVec<[DType; 2]>,
}

impl OpGraph {
    /// Builds the chain `source → adaptors → terminal` from a trace.
    pub fn from_trace(trace: &QueryTrace) -> OpGraph {
        let mut graph = StableDiGraph::new();
        let mut prev: Option<NodeIndex> = None;
        let mut push = |graph: &mut StableDiGraph<OpNode, ()>, node: OpNode| {
            let i = graph.add_node(node);
            if let Some(p) = prev {
                graph.add_edge(p, i, ());
            }
            prev = Some(i);
        };
        for op in &trace.ops {
            push(&mut graph, OpNode::Op(op.clone()));
        }
        if let Some(t) = &trace.terminal {
            push(&mut graph, OpNode::Terminal(t.clone()));
        }
        OpGraph {
            graph,
            arena: trace.arena.clone(),
            input_dtypes: trace.input_dtypes.clone(),
        }
    }

    /// Nodes from source to terminal (the graph is a chain).
    pub fn chain(&self) -> Vec<NodeIndex> {
        let mut order = Vec::with_capacity(self.graph.node_count());
        let mut cur = self.graph.node_indices().find(|&n| {
            self.graph
                .neighbors_directed(n, Direction::Incoming)
                .next()
                .is_none()
        });
        while let Some(n) = cur {
            order.push(n);
            cur = self.graph.neighbors_directed(n, Direction::Outgoing).next();
        }
        order
    }

    /// Replaces the whole chain by `nodes`, in order.
    pub fn replace_chain(&mut self, nodes: Vec<OpNode>) {
        self.graph.clear();
        let mut prev = None;
        for n in nodes {
            let i = self.graph.add_node(n);
            if let Some(p) = prev {
                self.graph.add_edge(p, i, ());
            }
            prev = Some(i);
        }
    }

    /// Calls `f` on every arena value a graph node refers to.
    pub fn for_each_value_mut(&mut self, mut f: impl FnMut(&mut Value)) {
        for n in self.graph.node_weights_mut() {
            visit_node(n, &mut f);
        }
    }

    /// Checks the arena and that every referenced value exists with the
    /// expected type (predicates are `bool`).
    pub fn verify(&self) -> Result<(), PlanError> {
        self.arena
            .verify()
            .map_err(|e| PlanError::Graph(Fault::Expressions(e.to_string())))?;
        let chain = self.chain();
        if chain.len() != self.graph.node_count() {
            return Err(PlanError::NotAChain {
                reachable: chain.len(),
                nodes: self.graph.node_count(),
            });
        }
        let len = self.arena.len();
        let mut err = None;
        let mut g = self.clone();
        g.for_each_value_mut(|v| {
            if v.index() >= len && err.is_none() {
                err = Some(PlanError::Graph(Fault::MissingValue(v.index() as u32)));
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        for n in self.graph.node_weights() {
            let pred = match n {
                OpNode::Op(LogicalOp::Filter { predicate }) => Some(*predicate),
                OpNode::Fused(f) => f.predicate,
                _ => None,
            };
            if let Some(p) = pred {
                if self.arena.ty(p) != DType::Bool {
                    return Err(PlanError::Graph(Fault::PredicateNotBool {
                        value: p.index() as u32,
                        ty: self.arena.ty(p),
                    }));
                }
            }
        }
        Ok(())
    }
}

fn visit_node(n: &mut OpNode, f: &mut impl FnMut(&mut Value)) {
    match n {
        OpNode::Op(op) => match op {
            LogicalOp::Source { value, .. }
            | LogicalOp::Zip { value, .. }
            | LogicalOp::Enumerate { value, .. } => f(value),
            LogicalOp::Map { outputs } => outputs.iter_mut().for_each(f),
            LogicalOp::Filter { predicate } => f(predicate),
            LogicalOp::Skip { .. } | LogicalOp::Take { .. } => {}
            LogicalOp::Scan { column, result, .. } => {
                f(column);
                f(result);
            }
            LogicalOp::Sort {
                keys,
                columns,
                results,
            } => {
                keys.iter_mut().for_each(|k| f(&mut k.value));
                columns.iter_mut().for_each(&mut *f);
                results.iter_mut().for_each(f);
            }
            LogicalOp::Join {
                keys,
                columns,
                results,
                ..
            } => {
                keys.iter_mut().for_each(&mut *f);
                columns.iter_mut().for_each(&mut *f);
                results.iter_mut().for_each(f);
            }
        },
        OpNode::Terminal(t) => match t {
            LogicalTerminal::Reduce(aggs) => aggs
                .iter_mut()
                .filter_map(|a| a.column.as_mut())
                .for_each(f),
            LogicalTerminal::Collect(cols) => cols.iter_mut().for_each(f),
            LogicalTerminal::CountByKey { key, .. } => f(key),
            LogicalTerminal::Group { keys, aggs, .. } => {
                keys.iter_mut().for_each(&mut *f);
                aggs.iter_mut()
                    .filter_map(|a| a.column.as_mut())
                    .for_each(f);
            }
        },
        OpNode::Fused(s) => {
            s.slots.iter_mut().for_each(|(_, v)| f(v));
            s.enumerates.iter_mut().for_each(&mut *f);
            s.columns.iter_mut().for_each(&mut *f);
            if let Some(p) = s.predicate.as_mut() {
                f(p);
            }
            match &mut s.terminal {
                FusedTerminal::Reduce(aggs) => aggs
                    .iter_mut()
                    .filter_map(|a| a.column.as_mut())
                    .for_each(f),
                FusedTerminal::Collect(cols) => cols.iter_mut().for_each(f),
                FusedTerminal::Scan { column, .. } => f(column),
                FusedTerminal::CountByKey { key, .. } => f(key),
                FusedTerminal::Group { keys, aggs, .. } => {
                    keys.iter_mut().for_each(&mut *f);
                    aggs.iter_mut()
                        .filter_map(|a| a.column.as_mut())
                        .for_each(f);
                }
                FusedTerminal::Sort { keys, columns, .. } => {
                    keys.iter_mut().for_each(|k| f(&mut k.value));
                    columns.iter_mut().for_each(f);
                }
                FusedTerminal::Join { keys, columns, .. } => {
                    keys.iter_mut().for_each(&mut *f);
                    columns.iter_mut().for_each(f);
                }
            }
        }
    }
}

fn write_group(
    f: &mut fmt::Formatter<'_>,
    what: &str,
    keys: &[Value],
    aggs: &[super::logical::LogicalAgg],
    first_seen: bool,
) -> fmt::Result {
    write!(f, "{what} by [{}]", list(keys))?;
    for a in aggs {
        match a.column {
            Some(c) => write!(f, " {}({c})", a.kind.name())?,
            None => write!(f, " {}", a.kind.name())?,
        }
    }
    if first_seen {
        write!(f, " first-seen")?;
    }
    Ok(())
}

fn key_list(keys: &[crate::semantics::order::SortKey]) -> String {
    let mut s = String::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}{}", k.value, if k.descending { " desc" } else { "" });
    }
    s
}

fn list(vals: &[Value]) -> String {
    let mut s = String::new();
    for (i, v) in vals.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{v}");
    }
    s
}

impl fmt::Display for OpNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpNode::Op(op) => match op {
                LogicalOp::Source { stream, value } => write!(f, "source {stream:?} -> {value}"),
                LogicalOp::Zip { stream, value } => write!(f, "zip {stream:?} -> {value}"),
                LogicalOp::Enumerate { slot, value } => write!(f, "enumerate e{slot} -> {value}"),
                LogicalOp::Map { outputs } => write!(f, "map -> [{}]", list(outputs)),
                LogicalOp::Filter { predicate } => write!(f, "filter {predicate}"),
                LogicalOp::Skip { param } => write!(f, "skip param.{param}"),
                LogicalOp::Take { param } => write!(f, "take param.{param}"),
                LogicalOp::Scan {
                    column,
                    combine,
                    exclusive,
                    result,
                } => write!(
                    f,
                    "scan {} {} {column} -> {result}",
                    if *exclusive { "exclusive" } else { "inclusive" },
                    if combine.is_some() { "custom" } else { "sum" }
                ),
                LogicalOp::Sort {
                    keys,
                    columns,
                    results,
                } => write!(
                    f,
                    "sort by [{}] [{}] -> [{}]",
                    key_list(keys),
                    list(columns),
                    list(results)
                ),
                LogicalOp::Join {
                    kind,
                    keys,
                    columns,
                    build,
                    results,
                } => write!(
                    f,
                    "{} on [{}] = inputs {build:?} [{}] -> [{}]",
                    kind.name(),
                    list(keys),
                    list(columns),
                    list(results)
                ),
            },
            OpNode::Terminal(t) => match t {
                LogicalTerminal::Reduce(aggs) => {
                    write!(f, "reduce")?;
                    for a in aggs {
                        match a.column {
                            Some(c) => write!(f, " {}({c})", a.kind.name())?,
                            None => write!(f, " {}", a.kind.name())?,
                        }
                    }
                    Ok(())
                }
                LogicalTerminal::Collect(cols) => write!(f, "collect [{}]", list(cols)),
                LogicalTerminal::CountByKey { key, keys } => {
                    write!(f, "count_by_key {key} keys={keys}")
                }
                LogicalTerminal::Group {
                    keys,
                    aggs,
                    first_seen,
                } => write_group(f, "group", keys, aggs, *first_seen),
            },
            OpNode::Fused(s) => {
                write!(f, "fused slots=[")?;
                for (i, (src, v)) in s.slots.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    match src {
                        SlotSource::Stream(st) => write!(f, "{v}<-{st:?}")?,
                        SlotSource::Previous(c) => write!(f, "{v}<-prev.{c}")?,
                    }
                }
                write!(f, "] columns=[{}]", list(&s.columns))?;
                if let Some(p) = s.predicate {
                    write!(f, " predicate={p}")?;
                }
                match &s.terminal {
                    FusedTerminal::Reduce(aggs) => {
                        write!(f, " -> reduce")?;
                        for a in aggs {
                            match a.column {
                                Some(c) => write!(f, " {}({c})", a.kind.name())?,
                                None => write!(f, " {}", a.kind.name())?,
                            }
                        }
                        Ok(())
                    }
                    FusedTerminal::Collect(c) => {
                        let what = if s.predicate.is_some() {
                            "compact"
                        } else {
                            "store"
                        };
                        write!(f, " -> {what} [{}]", list(c))
                    }
                    FusedTerminal::Scan {
                        column,
                        exclusive,
                        combine,
                    } => write!(
                        f,
                        " -> scan {} {} {column}",
                        if *exclusive { "exclusive" } else { "inclusive" },
                        if combine.is_some() { "custom" } else { "sum" }
                    ),
                    FusedTerminal::CountByKey { key, keys } => {
                        write!(f, " -> count_by_key {key} keys={keys}")
                    }
                    FusedTerminal::Group {
                        keys,
                        aggs,
                        first_seen,
                    } => write_group(f, " -> group", keys, aggs, *first_seen),
                    FusedTerminal::Sort {
                        keys,
                        columns,
                        fetch,
                    } => {
                        write!(f, " -> sort by [{}] [{}]", key_list(keys), list(columns))?;
                        match fetch {
                            Some(p) => write!(f, " fetch param.{p}"),
                            None => Ok(()),
                        }
                    }
                    FusedTerminal::Join {
                        kind,
                        keys,
                        columns,
                        build,
                    } => write!(
                        f,
                        " -> {} on [{}] = inputs {build:?} [{}]",
                        kind.name(),
                        list(keys),
                        list(columns)
                    ),
                }
            }
        }
    }
}

impl fmt::Display for OpGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.chain().into_iter().enumerate() {
            writeln!(f, "  n{i}: {}", self.graph[n])?;
        }
        writeln!(f, "  expressions:")?;
        for (v, _) in self.arena.iter() {
            write!(f, "    ")?;
            self.arena.write_node(f, v)?;
            writeln!(f)?;
        }
        Ok(())
    }
}
