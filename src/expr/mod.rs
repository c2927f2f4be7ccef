//! Element expressions: the per-element IR, its types, reference semantics
//! and the tracing that builds it from user closures.
//!
//! This module knows nothing about streams, plans or backends.

pub(crate) mod arena;
mod element;
pub(crate) mod eval;
mod handle;
pub(crate) mod ops;
pub(crate) mod trace;

pub use crate::types::{DType, Scalar};
pub(crate) use arena::{ExprArena, Node, NodeData, Value};
pub use element::{Element, Float, Numeric};
pub use handle::{Expr, IntoExpr, Shape};
pub(crate) use ops::{BinaryOp, UnaryOp};
pub(crate) use trace::Params;
pub use trace::MAX_PARAMS;
