//! computeq: a lazy, LINQ-style query engine for numeric slices.
#![warn(missing_docs)]

pub mod backend;
pub mod expr;
pub mod plan;
pub mod runtime;
