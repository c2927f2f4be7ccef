//! The serialized form of a [`Pipeline`]: what a distributed engine ships
//! to its executors, so that they need computeq, not each user's code.
//!
//! JSON, versioned (`"format": "computeq-pipeline", "version": 1`):
//! the input types, the expression nodes (operation, operands by index,
//! result type; values as their type and raw bits, so NaN and infinities
//! survive), the captured values, the adaptors, the terminal and how its
//! aggregates are read. Reading checks everything a malformed or foreign
//! document could break (every operand defined before use and well
//! typed, every slot and index in range, only the adaptors and
//! aggregates a pipeline may hold, the plan built and verified) and
//! answers a clear error, never a panic.

use super::pipeline::{moment_slots, Finish, Names, Pipeline, Read, ReadKind};
use crate::error::{Error, ErrorKind};
use crate::expr::{DType, ExprArena, Node, NodeData, Scalar, Value};
use crate::graph::{LogicalAgg, LogicalOp, LogicalTerminal, QueryTrace, Stream};
use crate::plan::AggKind;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// The name in every document.
const FORMAT: &str = "computeq-pipeline";

/// The version this build writes and reads.
/// (2: a count may name a column, the count of the rows where it is not
/// null, which version 1 counted as every column's.)
pub const WIRE_VERSION: u32 = 2;

/// A pipeline document.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    format: String,
    version: u32,
    inputs: Vec<DType>,
    nodes: Vec<NodeData>,
    params: Vec<Scalar>,
    ops: Vec<Op>,
    terminal: Terminal,
    reads: Option<Vec<(ReadKind, [u32; 2])>>,
    names: Option<Names>,
}

/// The first fields alone: read before the rest, so a document of
/// another version gets an error that says so.
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
enum Op {
    Source { input: u16, value: Value },
    Zip { input: u16, value: Value },
    Map { outputs: Vec<Value> },
    Filter { predicate: Value },
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq)]
enum Agg {
    Sum,
    Min,
    Max,
    Count,
    Any,
    All,
    M2,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
enum Terminal {
    Reduce(Vec<(Agg, Option<Value>)>),
    Collect(Vec<Value>),
}

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::InvalidQuery,
        format!("a malformed serialized pipeline: {why}"),
    )
}

impl Pipeline {
    /// The pipeline as a versioned JSON document ([`Pipeline::from_bytes`]
    /// reads it back, in this process or on another machine).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// use computeq::query::Pipeline;
    /// let p = Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())?;
    /// let bytes = p.to_bytes();
    /// assert_eq!(Pipeline::from_bytes(&bytes)?, p);
    /// # Ok::<(), computeq::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let t = &self.trace;
        let ops = t
            .ops
            .iter()
            .filter_map(|op| match op {
                LogicalOp::Source {
                    stream: Stream::Input(k),
                    value,
                } => Some(Op::Source {
                    input: *k,
                    value: *value,
                }),
                LogicalOp::Zip {
                    stream: Stream::Input(k),
                    value,
                } => Some(Op::Zip {
                    input: *k,
                    value: *value,
                }),
                LogicalOp::Map { outputs } => Some(Op::Map {
                    outputs: outputs.to_vec(),
                }),
                LogicalOp::Filter { predicate } => Some(Op::Filter {
                    predicate: *predicate,
                }),
                // A pipeline holds nothing else (`Pipeline::capture`).
                _ => None,
            })
            .collect();
        let terminal = match &t.terminal {
            Some(LogicalTerminal::Reduce(aggs)) => Terminal::Reduce(
                aggs.iter()
                    .filter_map(|a| {
                        let k = match a.kind {
                            AggKind::Sum => Agg::Sum,
                            AggKind::Min => Agg::Min,
                            AggKind::Max => Agg::Max,
                            AggKind::Count => Agg::Count,
                            AggKind::Any => Agg::Any,
                            AggKind::All => Agg::All,
                            AggKind::M2 => Agg::M2,
                            _ => return None,
                        };
                        Some((k, a.column))
                    })
                    .collect(),
            ),
            Some(LogicalTerminal::Collect(cols)) => Terminal::Collect(cols.to_vec()),
            _ => Terminal::Collect(Vec::new()),
        };
        let (reads, names) = match &self.finish {
            Finish::Values { reads, names } => (
                Some(reads.iter().map(|r| (r.kind, r.at)).collect()),
                Some(*names),
            ),
            _ => (None, None),
        };
        let doc = Doc {
            format: FORMAT.into(),
            version: WIRE_VERSION,
            inputs: t.input_dtypes.to_vec(),
            nodes: (0..t.arena.len())
                .map(|i| *t.arena.get(Value::new(i)))
                .collect(),
            params: self.params.to_vec(),
            ops,
            terminal,
            reads,
            names,
        };
        serde_json::to_vec(&doc).expect("a pipeline document serializes")
    }

    /// Reads a document written by [`Pipeline::to_bytes`], checking it
    /// whole: a malformed document, or one of another format version,
    /// gets an [`ErrorKind::InvalidQuery`] error that says what is wrong.
    ///
    /// ```
    /// use computeq::query::Pipeline;
    /// let e = Pipeline::from_bytes(br#"{"format":"computeq-pipeline","version":99}"#).unwrap_err();
    /// assert!(e.to_string().contains("version 99"));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Pipeline, Error> {
        let header: Header = serde_json::from_slice(bytes)
            .map_err(|e| malformed(format!("not a pipeline document ({e})")))?;
        if header.format != FORMAT {
            return Err(malformed(format!(
                "its format is {:?}, not {FORMAT:?}",
                header.format
            )));
        }
        if header.version != WIRE_VERSION {
            return Err(Error::new(
                ErrorKind::InvalidQuery,
                format!(
                    "a serialized pipeline of format version {}: this computeq reads version \
                     {WIRE_VERSION} (serialize it with the same computeq release as the executors)",
                    header.version
                ),
            ));
        }
        let doc: Doc = serde_json::from_slice(bytes).map_err(malformed)?;
        read(doc)
    }
}

/// Checks a document and builds its pipeline.
fn read(doc: Doc) -> Result<Pipeline, Error> {
    let n_inputs = doc.inputs.len();
    if n_inputs == 0 || n_inputs > 4 {
        return Err(malformed(format!("{n_inputs} inputs (1 to 4)")));
    }
    if doc.params.len() > crate::expr::MAX_PARAMS {
        return Err(malformed("too many captured values"));
    }
    // Every source op names its input in order: source 0, then zips.
    let sources: Vec<(u16, Value)> = doc
        .ops
        .iter()
        .map_while(|op| match op {
            Op::Source { input, value } | Op::Zip { input, value } => Some((*input, *value)),
            _ => None,
        })
        .collect();
    if sources.len() != n_inputs
        || !matches!(doc.ops.first(), Some(Op::Source { .. }))
        || doc.ops[1..n_inputs]
            .iter()
            .any(|op| !matches!(op, Op::Zip { .. }))
        || sources
            .iter()
            .enumerate()
            .any(|(i, (k, _))| *k as usize != i)
    {
        return Err(malformed(
            "the adaptors must start with the source and a zip of each further input, in order",
        ));
    }
    // Each input's `Input` node is node `k` reading stream `k`.
    let mut arena = ExprArena::default();
    for (i, d) in doc.nodes.iter().enumerate() {
        match d.node {
            Node::Input(slot) => {
                let k = slot as usize;
                if k >= n_inputs || sources[k].1 != Value::new(i) || doc.inputs[k] != d.ty {
                    return Err(malformed(format!(
                        "node {i} reads an input it does not own"
                    )));
                }
            }
            Node::Param(slot) => match doc.params.get(slot as usize) {
                Some(p) if p.dtype() == d.ty => {}
                _ => {
                    return Err(malformed(format!(
                        "node {i} reads a missing or mistyped value"
                    )))
                }
            },
            Node::Index(_) => {
                return Err(malformed(format!(
                    "node {i} numbers the rows (enumerate), which a pipeline cannot"
                )))
            }
            _ => {}
        }
        arena
            .push_typed(d.node, d.ty)
            .map_err(|e| malformed(format!("node {i}: {e}")))?;
    }
    for (k, (_, v)) in sources.iter().enumerate() {
        if v.index() >= arena.len() || arena.get(*v).node != Node::Input(k as u16) {
            return Err(malformed(format!("input {k} has no node of its own")));
        }
    }
    let node = |v: Value| -> Result<Value, Error> {
        if v.index() < arena.len() {
            Ok(v)
        } else {
            Err(malformed(format!("{v} is not a node")))
        }
    };
    let mut ops: SmallVec<[LogicalOp; 8]> = SmallVec::new();
    let mut streams: SmallVec<[Stream; 4]> = SmallVec::new();
    for op in &doc.ops {
        ops.push(match op {
            Op::Source { input, value } => {
                streams.push(Stream::Input(*input));
                LogicalOp::Source {
                    stream: Stream::Input(*input),
                    value: *value,
                }
            }
            Op::Zip { input, value } => {
                if ops.len() >= n_inputs {
                    return Err(malformed("a zip after a map or filter"));
                }
                streams.push(Stream::Input(*input));
                LogicalOp::Zip {
                    stream: Stream::Input(*input),
                    value: *value,
                }
            }
            Op::Map { outputs } => {
                if outputs.is_empty() || outputs.len() > 16 {
                    return Err(malformed("a map of no columns, or of too many"));
                }
                LogicalOp::Map {
                    outputs: outputs.iter().map(|&v| node(v)).collect::<Result<_, _>>()?,
                }
            }
            Op::Filter { predicate } => {
                let p = node(*predicate)?;
                if arena.ty(p) != DType::Bool {
                    return Err(malformed("a filter whose predicate is not a bool"));
                }
                LogicalOp::Filter { predicate: p }
            }
        });
    }
    let (terminal, finish) = match (doc.terminal, doc.reads, doc.names) {
        (Terminal::Collect(cols), None, None) => {
            if cols.is_empty() || cols.len() > 16 {
                return Err(malformed("a collect of no columns, or of too many"));
            }
            let cols = cols.into_iter().map(node).collect::<Result<_, _>>()?;
            (LogicalTerminal::Collect(cols), Finish::Columns)
        }
        (Terminal::Reduce(aggs), Some(reads), Some(names)) => {
            if aggs.is_empty() || aggs.len() > 64 || reads.is_empty() || reads.len() > 64 {
                return Err(malformed("no aggregates or values, or too many"));
            }
            let mut list: SmallVec<[LogicalAgg; 4]> = SmallVec::new();
            for (kind, column) in aggs {
                let column = column.map(node).transpose()?;
                let ty = column.map(|c| arena.ty(c));
                let ok = match (kind, ty) {
                    // A count of the rows where the column is not null.
                    (Agg::Count, _) => true,
                    (Agg::Any | Agg::All, Some(DType::Bool)) => true,
                    (Agg::Sum | Agg::Min | Agg::Max | Agg::M2, Some(t)) => t.is_numeric(),
                    _ => false,
                };
                if !ok {
                    return Err(malformed("an aggregate of a column it cannot take"));
                }
                let kind = match kind {
                    Agg::Sum => AggKind::Sum,
                    Agg::Min => AggKind::Min,
                    Agg::Max => AggKind::Max,
                    Agg::Count => AggKind::Count,
                    Agg::Any => AggKind::Any,
                    Agg::All => AggKind::All,
                    Agg::M2 => AggKind::M2,
                };
                list.push(LogicalAgg { kind, column });
            }
            let n = list.len() as u32;
            if reads.iter().any(|(_, at)| at[0] >= n || at[1] >= n) {
                return Err(malformed(
                    "a value read from an aggregate that is not there",
                ));
            }
            let reads = reads.into_iter().map(|(k, at)| Read::new(k, at)).collect();
            (
                LogicalTerminal::Reduce(list),
                Finish::Values { reads, names },
            )
        }
        _ => return Err(malformed("its terminal and its values do not match")),
    };
    let mut trace = QueryTrace {
        arena,
        ops,
        streams,
        input_dtypes: doc.inputs.into_iter().collect(),
        enumerates: 0,
        terminal: Some(terminal),
    };
    let moments = match &mut trace.terminal {
        Some(LogicalTerminal::Reduce(aggs)) => {
            let before = aggs.len();
            let m = moment_slots(&mut trace.arena, aggs);
            if aggs.len() != before {
                return Err(malformed(
                    "a variance without the count and sum its partial states merge with",
                ));
            }
            m
        }
        _ => SmallVec::new(),
    };
    let params: crate::expr::Params = doc.params.into_iter().collect();
    // The planner's own checks, as for any query: what passes them runs
    // (its counts counting rows, as they do once nulls are settled).
    let mut planned = trace.clone();
    if let Some(LogicalTerminal::Reduce(aggs)) = &mut planned.terminal {
        super::nulls::uncount(aggs);
    }
    crate::runtime::check_plan(&planned, params.len())
        .map_err(|e| malformed(format!("its plan does not verify ({e})")))?;
    Ok(Pipeline {
        trace,
        params,
        finish,
        moments,
    })
}
