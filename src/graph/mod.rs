//! The operation graph: the traced adaptor chain as a petgraph DAG, with a
//! verifier and a text form. Optimizer passes rewrite it; lowering turns its
//! fused nodes into a `PhysicalPlan`.

mod fused;
mod logical;
mod op_graph;

pub(crate) use fused::push_unique;
pub use fused::{FusedStage, FusedTerminal, SlotSource};
pub use logical::{LogicalAgg, LogicalOp, LogicalTerminal, QueryTrace, Stream, TracedCombine};
pub use op_graph::{OpGraph, OpNode};
