//! Backends: the things that execute a [`PhysicalPlan`]. One trait, one
//! folder or file per backend; the runtime picks among them and falls back.
//!
//! A backend reads the plan and the run's inputs and parameters, and returns
//! the plan's output; it never chooses, retries or records metrics itself.

pub mod cpu_parallel;
pub mod cpu_scalar;
pub mod cpu_simd;
pub mod ptx;
mod registry;

pub use registry::{default_backends, DeviceSettings};
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use crate::types::{
    BackendError, BackendKind, Decline, DeviceColumn, HostColumn, Input, Phase, RunStats,
};

use crate::plan::{CompiledPlan, PhysicalPlan, PlanOutput};
use crate::types::{ColumnRef, Scalar};
use std::borrow::Cow;

/// Everything one execution needs.
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    /// The plan with its per-backend compiled artifacts.
    pub plan: &'a CompiledPlan,
    /// One input per query input column.
    pub inputs: &'a [Input<'a>],
    /// Parameter values by slot.
    pub params: &'a [Scalar],
    /// Keep a collected result on the device (`DeviceArray`) when the backend
    /// can; ignored by CPU backends.
    pub keep_on_device: bool,
}

/// A probe query of a device's calibration, run by [`ProbeRunner`].
#[derive(Clone, Copy, Debug)]
pub enum Probe<'a> {
    /// `xs.sum()`.
    Sum(&'a [f32]),
    /// `xs.map(|x| x * 1.000001 + 0.5, ops / 2 times).sum()`: a chain of
    /// dependent multiply-adds, two operations each.
    MulAdds(&'a [f32], u32),
    /// `xs.map(|x| x * k).sum()` with `k` baked into the kernel as a
    /// constant: a plan (and pipelines) of its own for every new `k`.
    Scale(&'a [f32], f32),
}

/// How a device's calibrator runs its probe queries (the runtime runs them
/// on a private engine that falls back on failure and keeps no history):
/// the backend sees this, never the engine.
pub trait ProbeRunner {
    /// Runs `probe` forced onto `backend` and returns its metrics (those
    /// of a fallback run when the backend failed).
    fn run(&self, backend: BackendKind, probe: Probe<'_>) -> crate::metrics::ExecutionMetrics;
}

/// Whether a backend can be used at all on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Ready (or can be initialised on first use).
    Available,
    /// Cannot run here, with the reason (no driver, disabled, ...).
    Unavailable(Cow<'static, str>),
}

/// An executor of physical plans.
pub trait Backend: Send + Sync + 'static {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Whether it can run at all here. Must be cheap after the first call.
    fn availability(&self) -> Availability;

    /// Whether the backend has already paid its start-up cost (device
    /// created). CPU backends always have.
    fn is_initialized(&self) -> bool {
        true
    }

    /// A way to measure the device for the cost model with probe queries
    /// run by `probes` (transfers, launch, bandwidth, compute, compile),
    /// once it is created. The runtime's device probe calls it once per
    /// engine and device, off the query path, with a private engine behind
    /// `probes` (its probe queries never reach the user's run log), within
    /// the configured calibration budget, and caches the profile on disk;
    /// a backend without one is priced by [`Backend::device_profile`].
    fn calibrator<'e>(
        &'e self,
        _probes: &'e dyn ProbeRunner,
    ) -> Option<Box<dyn crate::cost::Calibrate + 'e>> {
        None
    }

    /// What the device itself says about its speed class, once created
    /// (a software adapter gets the software prior instead of a GPU's).
    fn device_profile(&self) -> Option<crate::cost::DeviceProfile> {
        None
    }

    /// The key under which a device backend's device is remembered between
    /// processes: what decides which device it opens here (e.g. its
    /// adapter selection settings). `None` (the default): nothing to
    /// remember, the backend is probed by opening it.
    fn device_key(&self) -> Option<String> {
        None
    }

    /// What to remember of the open device ([`Backend::device_key`]): its
    /// calibration identity and what [`Backend::supports_remembered`]
    /// judges plans by. `None` while it is not open.
    fn device_record(&self) -> Option<crate::cost::DeviceRecord> {
        None
    }

    /// Whether the device remembered in `record` (by an earlier process)
    /// can run `plan`, answered without opening the device, so that a
    /// device no query runs on is never opened. The default accepts: the
    /// run then finds out.
    fn supports_remembered(
        &self,
        plan: &PhysicalPlan,
        record: &crate::cost::DeviceRecord,
    ) -> Result<(), Decline> {
        let _ = (plan, record);
        Ok(())
    }

    /// Whether it can run this plan (dtype support, limits). A backend that
    /// declines is skipped before any work, with the reason recorded.
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline>;

    /// Runs the plan and returns its output.
    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError>;

    /// Copies a host column to this backend's device (`to_device`). Only
    /// device backends implement it.
    fn upload(
        &self,
        column: ColumnRef<'_>,
    ) -> Result<std::sync::Arc<dyn DeviceColumn>, BackendError> {
        let _ = column;
        Err(BackendError::new(
            self.kind(),
            Phase::Upload,
            "not a device backend",
        ))
    }

    /// Runs a plan ending in `collect` and keeps the output columns on the
    /// device (no download). Only device backends implement it.
    fn execute_to_device(
        &self,
        job: &Job<'_>,
        stats: &mut RunStats,
    ) -> Result<Vec<std::sync::Arc<dyn DeviceColumn>>, BackendError> {
        let _ = (job, stats);
        Err(BackendError::new(
            self.kind(),
            Phase::Execute,
            "not a device backend",
        ))
    }
}
