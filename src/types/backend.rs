//! What every layer says about backends without depending on one: which
//! backend ([`BackendKind`]), the phase of a run ([`Phase`]), how its time
//! was measured ([`TimingSource`]), what one run cost ([`RunStats`]) and
//! how it failed ([`BackendError`]).

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
    /// Positions of the last stage left unread because an early-exit
    /// terminal (`first`, `find`, `any`, ...) was settled before them.
    pub elements_skipped: u64,
    /// The algorithm of the plan's last sort (or other relational
    /// operator), when it has one.
    pub algorithm: Option<super::Algorithm>,
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
