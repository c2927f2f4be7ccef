//! Backends: the things that execute a [`PhysicalPlan`]. One trait, one
//! folder or file per backend; the runtime picks among them and falls back.
//!
//! A backend reads the plan and the run's inputs and parameters, and returns
//! the plan's output; it never chooses, retries or records metrics itself.

pub mod cpu_parallel;
pub mod cpu_scalar;
pub mod cpu_simd;
mod registry;

pub use registry::default_backends;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;

use crate::expr::{DType, Scalar};
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::runtime::column::{Column, ColumnRef};
use crate::runtime::compiled::CompiledPlan;
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The backends computeq knows, in the order they are tried by default.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// The reference interpreter: one element at a time.
    CpuScalar,
    /// The compiled block program on one thread with SIMD lanes.
    CpuSimd,
    /// The block program over the rayon pool.
    CpuParallel,
    /// WGSL kernels through wgpu.
    Wgpu,
    /// PTX kernels through the CUDA driver.
    Cuda,
}

impl BackendKind {
    /// Number of backend kinds.
    pub const COUNT: usize = 5;
    /// Every kind.
    pub const ALL: [BackendKind; 5] = [
        BackendKind::CpuScalar,
        BackendKind::CpuSimd,
        BackendKind::CpuParallel,
        BackendKind::Wgpu,
        BackendKind::Cuda,
    ];

    /// The name used in settings and output: `cpu-simd`.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::CpuScalar => "cpu-scalar",
            BackendKind::CpuSimd => "cpu-simd",
            BackendKind::CpuParallel => "cpu-parallel",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cuda => "cuda",
        }
    }

    /// Parses a name as written by [`BackendKind::name`].
    pub fn parse(name: &str) -> Option<BackendKind> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Index into per-backend tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the backend runs on a separate device (data must move).
    pub const fn is_device(self) -> bool {
        matches!(self, BackendKind::Wgpu | BackendKind::Cuda)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A column stored on a device (`DeviceArray`), seen by backends.
pub trait DeviceColumn: Send + Sync + fmt::Debug {
    /// The backend owning the memory.
    fn backend(&self) -> BackendKind;
    /// Element type.
    fn dtype(&self) -> DType;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there is no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies the data back to the host.
    fn download(&self) -> Result<Column, BackendError>;
    /// For the owning backend to recover its own type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// One input column of a run.
#[derive(Copy, Clone, Debug)]
pub enum Input<'a> {
    /// In host memory.
    Host(ColumnRef<'a>),
    /// Already on a device.
    Device(&'a dyn DeviceColumn),
}

impl<'a> Input<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Input::Host(c) => c.len(),
            Input::Device(d) => d.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Input::Host(c) => c.dtype(),
            Input::Device(d) => d.dtype(),
        }
    }

    /// Where the data lives: `None` for the host.
    pub fn device(&self) -> Option<BackendKind> {
        match self {
            Input::Host(_) => None,
            Input::Device(d) => Some(d.backend()),
        }
    }

    /// The data on the host, downloading it when it lives on a device (the
    /// download is recorded in `stats`).
    pub fn host(&self, stats: &mut RunStats) -> Result<HostColumn<'a>, BackendError> {
        match *self {
            Input::Host(c) => Ok(HostColumn::Borrowed(c)),
            Input::Device(d) => {
                let t = std::time::Instant::now();
                let c = d.download()?;
                stats.transfer_out += t.elapsed();
                stats.bytes_downloaded += c.byte_len() as u64;
                Ok(HostColumn::Owned(c))
            }
        }
    }
}

/// A host column, borrowed from the user or downloaded for this run.
#[derive(Debug)]
pub enum HostColumn<'a> {
    /// The user's data.
    Borrowed(ColumnRef<'a>),
    /// Downloaded from a device.
    Owned(Column),
}

impl HostColumn<'_> {
    /// Borrows the data.
    pub fn as_ref(&self) -> ColumnRef<'_> {
        match self {
            HostColumn::Borrowed(c) => *c,
            HostColumn::Owned(c) => c.as_ref(),
        }
    }
}

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

/// Where the time of one execution went, filled in by the backend.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Building kernels or block programs (zero when cached).
    pub compile: Duration,
    /// Whether the compiled artifact came from the cache.
    pub compile_cached: bool,
    /// Host → device copies.
    pub transfer_in: Duration,
    /// The computation itself.
    pub execute: Duration,
    /// Device → host copies.
    pub transfer_out: Duration,
    /// Bytes copied to a device.
    pub bytes_uploaded: u64,
    /// Bytes copied from a device.
    pub bytes_downloaded: u64,
    /// Bytes of input that were already resident on the device.
    pub bytes_resident: u64,
    /// Bytes of memory allocated by the run (outputs, intermediates, scratch).
    pub bytes_allocated: u64,
    /// Threads or device lanes that took part (1 for single-threaded).
    pub parallelism: u32,
    /// Device dispatches or parallel tasks launched.
    pub launches: u32,
    /// Which clock measured `execute`.
    pub timing: TimingSource,
    /// Times the run was retried with smaller chunks after the device ran
    /// out of memory.
    pub oom_retries: u32,
}

/// The clock behind a run's `execute` time.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimingSource {
    /// Host timers around the work (on a device: around its fences).
    #[default]
    HostClock,
    /// The device's own timestamp queries around its kernels.
    DeviceTimestamps,
}

impl TimingSource {
    /// Lower-case name: `host-clock`, `device-timestamps`.
    pub const fn name(self) -> &'static str {
        match self {
            TimingSource::HostClock => "host-clock",
            TimingSource::DeviceTimestamps => "device-timestamps",
        }
    }
}

impl fmt::Display for TimingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The step of an execution where an error happened.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Finding the device.
    Init,
    /// Checking that the backend can run the plan.
    Support,
    /// Building kernels.
    Compile,
    /// Host → device copies.
    Upload,
    /// Running kernels.
    Execute,
    /// Device → host copies.
    Download,
}

impl Phase {
    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Init => "init",
            Phase::Support => "support",
            Phase::Compile => "compile",
            Phase::Upload => "upload",
            Phase::Execute => "execute",
            Phase::Download => "download",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error from one backend, which the runtime may recover from by trying
/// another one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{backend} failed during {phase}: {message}")]
pub struct BackendError {
    /// The failing backend.
    pub backend: BackendKind,
    /// Where it failed.
    pub phase: Phase,
    /// What happened.
    pub message: Cow<'static, str>,
    /// Out of device memory: the runtime may retry in smaller chunks.
    pub out_of_memory: bool,
}

impl BackendError {
    /// A new error.
    pub fn new(backend: BackendKind, phase: Phase, message: impl Into<Cow<'static, str>>) -> Self {
        BackendError {
            backend,
            phase,
            message: message.into(),
            out_of_memory: false,
        }
    }
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

    /// A way to measure the device for the cost model through `engine`
    /// (transfers, launch, bandwidth, compute, compile), once it is created.
    /// The runtime's device probe calls it once per engine and device, off
    /// the query path, with a private engine (its probe queries never reach
    /// the user's run log), within the configured calibration budget, and
    /// caches the profile on disk; a backend without one is priced by
    /// [`Backend::device_profile`].
    fn calibrator<'e>(
        &'e self,
        _engine: &'e crate::runtime::Engine,
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
    ) -> Result<(), Cow<'static, str>> {
        let _ = (plan, record);
        Ok(())
    }

    /// Whether it can run this plan (dtype support, limits). A backend that
    /// declines is skipped before any work, with the reason recorded.
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Cow<'static, str>>;

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
