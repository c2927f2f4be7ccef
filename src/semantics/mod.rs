//! The semantics shared by every layer above the expressions: aggregates
//! and scans (what they compute, identities, merging partial results) and
//! the range of a stage. One definition, read by the optimizer, the plan,
//! the kernel lowering and every backend (`docs/architecture.md`).

mod agg;
pub mod order;
mod range;

pub use agg::{
    agg_identity, arg_better, is_settled, merge, prefix_settled, AggKind, Aggregate, Combine,
    Moments, Partial, ScanOp, Settles,
};
pub use range::RangeOp;
