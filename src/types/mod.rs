//! The bottom layer: the data every other layer talks about. Element types
//! and scalars, columns and the inputs of a run, the names of backends and
//! phases, and what a run cost or how it failed. Nothing here knows about
//! expressions, plans, backends or the engine (`docs/architecture.md`).

mod algorithm;
mod backend;
mod column;
mod decline;
mod dtype;
mod input;
mod plan_error;

pub use algorithm::{Algorithm, Passes};
pub use backend::{BackendError, BackendKind, Phase, RunStats, TimingSource};
pub(crate) use column::{
    advise_huge_pages, take_output_memory, vec_for_output, with_nulls, HUGE_PAGE_MIN_BYTES,
};
pub use column::{Column, ColumnRef, OutputMemory};
pub use decline::Decline;
pub use dtype::{DType, Scalar};
pub use input::{DeviceColumn, HostColumn, Input};
pub use plan_error::{Fault, PlanError};
