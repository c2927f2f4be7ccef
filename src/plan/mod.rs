//! Physical plans: fused stages and the workload they represent.
//!
//! Produced by `optimize`, read by `cost`, `select`, `codegen` and the
//! backends; nothing downstream changes a plan.

pub(crate) mod bins;
mod compiled;
mod stage;

pub use stage::{
    AggKind, Aggregate, Combine, JoinKind, PhysicalPlan, PlanOutput, RangeOp, ScanOp, SortKey,
    Stage, StageInput, StageRange, Terminal,
};

mod lower;
mod workload;

pub use crate::types::OutputMemory;
pub(crate) use compiled::size_log;
pub use compiled::{CompiledPlan, PlanReport};
pub use lower::lower;
pub use workload::{PlanStatics, Residency, WorkloadCharacteristics};
