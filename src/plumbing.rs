//! The machinery under the query API, public for those who extend or
//! inspect it (as rayon's `plumbing`): a backend or a selector of your own,
//! the built-in backends as objects, the plans they run, the kernel IR with
//! its WGSL and PTX writers, and the cost model's profiles. Running queries
//! needs none of it, and it changes more often than what the crate root
//! exports: expect breaking changes here between minor versions.
//!
//! # A backend of your own
//!
//! A [`Backend`] receives a [`Job`]: the [`CompiledPlan`] (its
//! [`PhysicalPlan`] of fused stages, each a chain of element operations
//! ending in a [`Terminal`]), the inputs ([`Input`]: host columns or
//! [`DeviceColumn`]s) and the parameter values. It says whether it can run
//! a plan ([`Backend::supports`], a typed [`Decline`] when not), runs it
//! and returns a [`PlanOutput`], filling [`RunStats`]; a failure is a
//! [`BackendError`] with its [`Phase`], after which the engine falls back.
//! [`backends::cpu_scalar::run_plan`] is the reference interpreter every
//! backend is tested against. Install one with
//! [`Engine::with_backend`](crate::Engine::with_backend).
//!
//! # A selector of your own
//!
//! A [`Selector`] orders the candidate backends for a run from a
//! [`SelectionInput`] and learns from each run's metrics; install one with
//! [`Engine::with_selector`](crate::Engine::with_selector).
//! [`LearningSelector`] is the default and [`CostRule`] the cost model
//! alone.
//!
//! # Kernels
//!
//! [`codegen`] lowers a stage into target-neutral kernels
//! ([`codegen::lower_stage`], for the device's [`codegen::Caps`]) and
//! writes them as WGSL ([`codegen::wgsl`]) or PTX ([`codegen::ptx`]);
//! [`backends::ptx`] is the host side of PTX kernel plans over any device
//! that implements [`backends::ptx::PtxDevice`].

pub use crate::backend::{default_backends, Availability, Backend, DeviceSettings, Job};
pub use crate::plan::{
    AggKind, Aggregate, Combine, CompiledPlan, JoinKind, OutputMemory, PhysicalPlan, PlanOutput,
    PlanReport, RangeOp, ScanOp, SortKey, Stage, StageInput, StageRange, Terminal,
    WorkloadCharacteristics,
};
pub use crate::runtime::{fingerprint, ConfigWarning, RunLog, FAULTS};
pub use crate::select::history;
pub use crate::select::{
    default_selector, CostRule, Decision, Forced, LearningSelector, LearningSettings,
    SelectionInput, Selector,
};
pub use crate::types::{
    BackendError, BackendKind, Column, ColumnRef, Decline, DeviceColumn, Fault, HostColumn, Input,
    Phase, PlanError, RunStats, TimingSource,
};

/// The built-in backends as objects: to build an engine by hand, or to run
/// one directly in a test.
pub mod backends {
    pub use crate::backend::cpu_parallel;
    pub use crate::backend::cpu_scalar;
    pub use crate::backend::cpu_simd;
    #[cfg(feature = "cuda")]
    pub use crate::backend::cuda;
    pub use crate::backend::ptx;
    #[cfg(feature = "wgpu")]
    pub use crate::backend::wgpu;
}

/// The kernel IR, its lowering from plan stages and its writers.
pub mod codegen {
    pub use crate::codegen::{
        lower_plan, lower_stage, op_operands, ptx, u32c, visit, wgsl, Access, AggReadback,
        AtomicOp, Binding, BindingId, BufferRef, Builtin, Caps, Dispatch, FieldId, Groups, Kernel,
        KernelBuilder, KernelError, KernelNeeds, KernelPlan, Launch, Local, LocalDecl, LowerError,
        Op, Operand, Readback, Scratch, ScratchInit, ScratchLen, SharedArray, SharedId, Stmt,
        SubgroupOp, UniformField, UniformLayout, UniformSlot, UniformSource, UniformValues,
    };
}

/// The cost model's profiles and the calibration file.
pub mod cost {
    pub use crate::cost::{cache_file, CpuProfile, DeviceProfile};
}

/// The traced expression graph a query's closures build.
pub mod expr {
    pub use crate::expr::arena::{ExprArena, Node, NodeData, Value, VerifyError};
    pub use crate::expr::ops::{BinaryOp, UnaryOp};
    pub use crate::expr::{DType, Scalar};
}
