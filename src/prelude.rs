//! `use computeq::prelude::*;` brings `.compute()` and what closures use.

pub use crate::backend::BackendKind;
pub use crate::expr::{Element, Expr, Float, IntoExpr, Numeric};
pub use crate::metrics::ExecutionMetrics;
pub use crate::query::{Compute, DeviceArray, IntoSource, Query, ToDevice};
pub use crate::runtime::{engine, Engine};
