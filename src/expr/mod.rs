//! Element expressions: the per-element IR, its types, reference semantics
//! and the tracing that builds it from user closures.
//!
//! This module knows nothing about streams, plans or backends.

mod arena;
mod element;
pub mod eval;
mod handle;
mod ops;
pub(crate) mod trace;

pub use crate::types::{DType, Scalar};
pub use arena::{ExprArena, Node, NodeData, Value, VerifyError};
pub use element::{Element, Float, Numeric};
pub use handle::{Expr, IntoExpr, Shape};
pub use ops::{BinaryOp, UnaryOp};
pub use trace::{Params, MAX_PARAMS};
