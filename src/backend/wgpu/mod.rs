//! `wgpu`: kernels written in WGSL from the kernel IR, run through wgpu on
//! any Vulkan, Metal, DX12 or GL device (Mesa lavapipe and llvmpipe on our
//! machines).
//!
//! One [`WgpuBackend`] owns one instance/adapter/device, opened lazily on
//! the first [`availability`](Backend::availability), `supports` or
//! `execute` call and never per query. Pipelines are cached by the kernel's
//! structural hash (and each plan keeps its lowered kernels as its wgpu
//! artifact); captured values travel in the uniform block, so a new value
//! reuses the pipeline. Buffers come from a pool ([`WgpuBackend::live_buffers`]
//! shows how many are checked out).
//!
//! Kernels are timed by the device's timestamp queries when the adapter has
//! `TIMESTAMP_QUERY`, else by host timers around fences
//! ([`RunStats::timing`] says which). A run that runs out of device memory
//! is retried with chunks of half the positions, down to
//! [`MIN_OOM_CHUNK`] ([`RunStats::oom_retries`] counts the retries).
//!
//! Files: `device` (opening, features, limits), `pipeline` (cache, error
//! scopes), `buffers` (pool), `transfer` (uploads, readbacks, bool words),
//! `exec` (the run loop), `array` (device-resident columns), `fault`
//! (fault injection), `raw` (the bare wgpu replay the overhead benchmark
//! compares against).

mod array;
mod buffers;
mod calibrate;
mod device;
mod exec;
mod fault;
mod pipeline;
mod raw;
mod transfer;

pub use array::WgpuColumn;
pub use fault::FaultPlan;
#[doc(hidden)]
pub use raw::{measure_overhead, Overhead, RawDispatch};

use super::{Availability, Backend, BackendError, BackendKind, DeviceColumn, Job, Phase, RunStats};
use crate::codegen::{lower_plan, Caps, KernelPlan};
use crate::plan::{PhysicalPlan, PlanOutput, Terminal};
use crate::runtime::column::ColumnRef;
use buffers::Pool;
use device::Gpu;
use exec::{build_artifact, Artifact, Exec, RunOutput, Want};
use parking_lot::Mutex;
use pipeline::PipelineCache;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The wgpu backend. Cheap to construct: the device opens on first use.
pub struct WgpuBackend {
    gpu: OnceLock<Result<Arc<Gpu>, String>>,
    pipelines: PipelineCache,
    pool: Pool,
    faults: Arc<Mutex<FaultPlan>>,
    max_chunk: AtomicUsize,
    timestamps: AtomicBool,
    options: device::Options,
}

/// Fewest positions per chunk the out-of-memory retries go down to: below
/// it the per-chunk costs dominate and a CPU backend is the better place.
pub const MIN_OOM_CHUNK: usize = 1024;

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("gpu", &self.gpu.get())
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl Default for WgpuBackend {
    /// A backend with the default settings and no faults.
    fn default() -> Self {
        WgpuBackend::new(FaultPlan::NONE)
    }
}

impl WgpuBackend {
    /// A backend with the `wgpu_*` settings of `config`, injecting its
    /// faults when it enables fault injection (the environment is not
    /// read here: the `Config` did).
    pub fn from_config(config: &crate::runtime::Config) -> WgpuBackend {
        let mut b = WgpuBackend::new(FaultPlan::parse(&config.injected_faults()));
        b.options = device::Options {
            subgroups: config.wgpu_subgroups,
            timestamps: config.wgpu_timestamps,
        };
        b
    }

    /// A backend with the default settings that injects `faults` (use
    /// `FaultPlan::NONE` normally).
    pub fn new(faults: FaultPlan) -> WgpuBackend {
        WgpuBackend {
            gpu: OnceLock::new(),
            pipelines: PipelineCache::default(),
            pool: Pool::default(),
            faults: Arc::new(Mutex::new(faults)),
            max_chunk: AtomicUsize::new(usize::MAX),
            timestamps: AtomicBool::new(true),
            options: device::Options {
                subgroups: true,
                timestamps: true,
            },
        }
    }

    /// Whether to time kernels with the device's timestamp queries when it
    /// has them (the default); `false` uses host timers around fences, as
    /// on devices without `TIMESTAMP_QUERY`.
    pub fn set_timestamps(&self, on: bool) {
        self.timestamps.store(on, Ordering::Relaxed);
    }

    /// Whether the opened device offers timestamp queries (`None` before it
    /// opens or when it failed to).
    pub fn has_timestamps(&self) -> Option<bool> {
        match self.gpu.get() {
            Some(Ok(g)) => Some(g.timestamps.is_some()),
            _ => None,
        }
    }

    /// Replaces the injected faults (thread-safe; affects later calls).
    pub fn set_faults(&self, faults: FaultPlan) {
        *self.faults.lock() = faults;
    }

    /// The faults injected now.
    pub fn faults(&self) -> FaultPlan {
        *self.faults.lock()
    }

    /// Caps the positions per chunk below what the device's binding limit
    /// allows (`None` restores the limit), to exercise chunking in tests.
    pub fn set_max_chunk(&self, positions: Option<usize>) {
        self.max_chunk
            .store(positions.unwrap_or(usize::MAX).max(1), Ordering::Relaxed);
    }

    /// Device buffers currently checked out of the pool, including those of
    /// live device-resident columns. Returns to its previous value after
    /// every run, failed or not.
    pub fn live_buffers(&self) -> usize {
        self.pool.live()
    }

    /// Number of distinct pipelines built so far.
    pub fn cached_pipelines(&self) -> usize {
        self.pipelines.len()
    }

    /// The adapter's name and backend, once opened successfully.
    pub fn adapter(&self) -> Option<String> {
        match self.gpu.get() {
            Some(Ok(g)) => Some(format!("{} ({:?})", g.info.name, g.info.backend)),
            _ => None,
        }
    }

    /// What the device lets kernels use, once opened successfully.
    pub fn caps(&self) -> Option<Caps> {
        self.device().ok().map(|g| g.caps)
    }

    fn device(&self) -> Result<&Arc<Gpu>, BackendError> {
        self.gpu
            .get_or_init(|| Gpu::open(self.options).map(Arc::new))
            .as_ref()
            .map_err(|e| BackendError::new(BackendKind::Wgpu, Phase::Init, e.clone()))
    }

    /// The kernel plans this device would run for `plan` (for explain and
    /// golden tests).
    pub fn kernel_plans(&self, plan: &PhysicalPlan) -> Result<Vec<KernelPlan>, BackendError> {
        let gpu = self.device()?;
        lower_plan(plan, &gpu.caps)
            .map_err(|e| BackendError::new(BackendKind::Wgpu, Phase::Support, e.to_string()))
    }

    /// Copies a host column to the device (`.to_device()`).
    pub fn upload(&self, column: ColumnRef<'_>) -> Result<Arc<dyn DeviceColumn>, BackendError> {
        let gpu = self.device()?;
        let faults = *self.faults.lock();
        let dtype = column.dtype();
        if (dtype.is_wide() && !gpu.caps.int64)
            || (dtype == crate::expr::DType::F64 && !gpu.caps.f64)
        {
            return Err(BackendError::new(
                BackendKind::Wgpu,
                Phase::Support,
                format!("the device has no {dtype} (needs SHADER_INT64 / SHADER_F64)"),
            ));
        }
        let (buffer, _) = transfer::upload(gpu, &self.pool, &faults, column, true)?;
        Ok(Arc::new(WgpuColumn {
            buffer,
            dtype,
            len: column.len(),
            gpu: gpu.clone(),
            pool: self.pool.clone(),
            faults: self.faults.clone(),
        }))
    }

    /// Runs a plan ending in a collect or scan and keeps its output columns
    /// on the device (no download).
    pub fn execute_to_device(
        &self,
        job: &Job<'_>,
        stats: &mut RunStats,
    ) -> Result<Vec<Arc<dyn DeviceColumn>>, BackendError> {
        if matches!(job.plan.plan.last().terminal, Terminal::Reduce(_)) {
            return Err(BackendError::new(
                BackendKind::Wgpu,
                Phase::Support,
                "a reduction's result is a scalar, not a device column",
            ));
        }
        match self.run(job, stats, Want::Device)? {
            RunOutput::Device(cols) => Ok(cols
                .into_iter()
                .map(|c| Arc::new(c) as Arc<dyn DeviceColumn>)
                .collect()),
            RunOutput::Plan(_) => unreachable!("asked for device columns"),
        }
    }

    fn run(
        &self,
        job: &Job<'_>,
        stats: &mut RunStats,
        want: Want,
    ) -> Result<RunOutput, BackendError> {
        let gpu = self.device()?;
        let faults = *self.faults.lock();
        let t = Instant::now();
        faults.check(Phase::Compile)?;
        let plan = &job.plan.plan;
        let (art, cached) = job.plan.artifact(BackendKind::Wgpu, || {
            build_artifact(gpu, &self.pipelines, &faults, plan)
        })?;
        // An artifact of another device (another backend object) is not
        // usable here: build one for this device without caching it.
        let (art, cached): (Arc<Artifact>, bool) = if art.device == gpu.id {
            (art.clone(), cached || art.all_cached)
        } else {
            let a = build_artifact(gpu, &self.pipelines, &faults, plan)?;
            let c = a.all_cached;
            (Arc::new(a), c)
        };
        stats.compile += t.elapsed();
        stats.compile_cached = cached;
        // Out of device memory: run the plan again in chunks of half the
        // positions, down to `MIN_OOM_CHUNK`, before giving up (the runtime
        // then falls back to a CPU backend).
        let mut max_chunk = self.max_chunk.load(Ordering::Relaxed);
        let mut faults = faults;
        loop {
            let mut exec = Exec {
                gpu,
                pool: &self.pool,
                faults,
                fault_cell: &self.faults,
                max_chunk,
                widest_chunk: 0,
                use_timestamps: self.timestamps.load(Ordering::Relaxed),
                device_timed_chunks: 0,
                host_timed_chunks: 0,
                stats,
            };
            let result = exec.run(&art, plan, job.inputs, job.params, want);
            let widest = exec.widest_chunk;
            match result {
                Err(e) if e.out_of_memory => {
                    if faults.oom {
                        self.faults.lock().spend_oom();
                    }
                    let next = (widest / 2).max(MIN_OOM_CHUNK);
                    if next >= widest {
                        let mut e = e;
                        if stats.oom_retries > 0 {
                            e.message = format!(
                                "{} (after {} retries in smaller chunks, down to {widest} positions)",
                                e.message, stats.oom_retries
                            )
                            .into();
                        }
                        return Err(e);
                    }
                    tracing::debug!(
                        from = widest,
                        to = next,
                        error = %e.message,
                        "computeq.wgpu.oom_retry"
                    );
                    stats.oom_retries += 1;
                    max_chunk = next;
                    faults = *self.faults.lock();
                }
                r => return r,
            }
        }
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn availability(&self) -> Availability {
        match self.device() {
            Ok(_) => Availability::Available,
            Err(e) => Availability::Unavailable(e.message),
        }
    }

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Cow<'static, str>> {
        let gpu = self.device().map_err(|e| e.message)?;
        let plans = lower_plan(plan, &gpu.caps).map_err(|e| Cow::Owned(e.0))?;
        for kp in &plans {
            for k in &kp.kernels {
                let needs = k.needs();
                if needs.f64 && !gpu.caps.f64 {
                    return Err(
                        "f64 needs SHADER_F64 and SHADER_INT64, which this adapter lacks".into(),
                    );
                }
                if let Some(op) = needs.f64_transcendental {
                    return Err(format!(
                        "WGSL has no f64 `{op}`; the query runs on a CPU backend \
                         (the PTX backend computes it in software)"
                    )
                    .into());
                }
                if needs.int64 && !gpu.caps.int64 {
                    return Err(
                        "64-bit integers need SHADER_INT64, which this adapter lacks".into(),
                    );
                }
                if needs.shared_bytes > gpu.limits.max_compute_workgroup_storage_size {
                    return Err(format!(
                        "kernel `{}` needs {} bytes of workgroup memory, the adapter has {}",
                        k.name, needs.shared_bytes, gpu.limits.max_compute_workgroup_storage_size
                    )
                    .into());
                }
                if k.bindings.len() as u32 > gpu.limits.max_storage_buffers_per_shader_stage {
                    return Err(format!(
                        "kernel `{}` needs {} storage buffers, the adapter allows {}",
                        k.name,
                        k.bindings.len(),
                        gpu.limits.max_storage_buffers_per_shader_stage
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        match self.run(job, stats, Want::Host)? {
            RunOutput::Plan(out) => Ok(out),
            RunOutput::Device(_) => unreachable!("asked for host output"),
        }
    }

    fn is_initialized(&self) -> bool {
        self.gpu.get().is_some()
    }

    fn calibrator<'e>(
        &'e self,
        engine: &'e crate::runtime::Engine,
    ) -> Option<Box<dyn crate::cost::Calibrate + 'e>> {
        self.calibration(engine)
            .map(|c| Box::new(c) as Box<dyn crate::cost::Calibrate + 'e>)
    }

    fn device_profile(&self) -> Option<crate::cost::DeviceProfile> {
        match self.gpu.get() {
            Some(Ok(g)) if g.info.device_type == wgpu::DeviceType::Cpu => {
                Some(crate::cost::DeviceProfile::software_prior())
            }
            _ => None,
        }
    }

    fn upload(&self, column: ColumnRef<'_>) -> Result<Arc<dyn DeviceColumn>, BackendError> {
        WgpuBackend::upload(self, column)
    }

    fn execute_to_device(
        &self,
        job: &Job<'_>,
        stats: &mut RunStats,
    ) -> Result<Vec<Arc<dyn DeviceColumn>>, BackendError> {
        WgpuBackend::execute_to_device(self, job, stats)
    }
}
