//! `wgpu`: kernels written in WGSL from the kernel IR, run through wgpu on
//! any Vulkan, Metal, DX12 or GL device (Mesa lavapipe and llvmpipe on our
//! machines).
//!
//! One [`WgpuBackend`] owns one instance/adapter/device, opened lazily on
//! the first [`availability`](Backend::availability), `supports` or
//! `execute` call and never per query. A device that is lost (driver
//! reset, `destroy`) fails the runs under way on it and is opened anew by
//! the next run that needs it.
//!
//! Every run's device work sits inside error scopes of its own thread
//! (`scope`), so a validation or out-of-memory error wgpu reports is
//! charged to the run that caused it, even with many runs on one device
//! at once. Pipelines are cached by the kernel's
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
//! Files: `device` (opening, features, limits, loss), `scope` (a run's
//! error scopes), `pipeline` (cache, error scopes), `buffers` (pool), `transfer` (uploads, readbacks, bool words),
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
mod scope;
mod transfer;

pub use array::WgpuColumn;
pub use fault::FaultPlan;
#[doc(hidden)]
pub use raw::{measure_overhead, Overhead, RawDispatch};

use super::{
    Availability, Backend, BackendError, BackendKind, Decline, DeviceColumn, Job, Phase, RunStats,
};
use crate::codegen::{finite, lower_plan, Caps, KernelPlan};
use crate::plan::{PhysicalPlan, PlanOutput, Terminal};
use crate::types::ColumnRef;
use crate::types::DType;
use buffers::Pool;
use device::{DeviceFacts, Gpu};
use exec::{build_artifact, Artifact, Exec, RunOutput, Want};
use parking_lot::{Mutex, RwLock};
use pipeline::PipelineCache;
use scope::scoped;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The kernel plans of `plan` for a device with `caps`, guarded against
/// the infinities and NaNs that WGSL lets the device's compiler assume
/// away (`codegen::finite`): a run that meets one is discarded, not
/// returned. `trust`: leave them unguarded
/// ([`Config::wgpu_trust_non_finite`](crate::Config::wgpu_trust_non_finite)).
pub(crate) fn lower_guarded(
    plan: &PhysicalPlan,
    caps: &Caps,
    trust: bool,
) -> Result<Vec<KernelPlan>, Decline> {
    let mut plans = lower_plan(plan, caps).map_err(|e| e.0)?;
    if !trust {
        for kp in &mut plans {
            finite::guard(kp, caps.int64).map_err(|m| Decline::Other(m.into()))?;
        }
    }
    Ok(plans)
}

/// The device of a backend: opened once by whichever call needs it first
/// (others wait for that opening); a lost device's cell is replaced by an
/// empty one, which the next call opens again.
type DeviceCell = Arc<OnceLock<Result<Arc<Gpu>, String>>>;

/// The wgpu backend. Cheap to construct: the device opens on first use.
pub struct WgpuBackend {
    gpu: RwLock<DeviceCell>,
    pipelines: PipelineCache,
    pool: Pool,
    faults: Arc<Mutex<FaultPlan>>,
    max_chunk: AtomicUsize,
    timestamps: AtomicBool,
    trust_non_finite: AtomicBool,
    options: device::Options,
    /// Devices opened so far (a lost one is replaced by a new one).
    opened_count: AtomicU64,
}

/// Fewest positions per chunk the out-of-memory retries go down to: below
/// it the per-chunk costs dominate and a CPU backend is the better place.
pub const MIN_OOM_CHUNK: usize = 1024;

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("gpu", &self.gpu.read().get())
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
    /// A backend with the `wgpu_*` device settings, injecting their
    /// faults (the environment is not read here: the engine's `Config`
    /// was).
    pub fn from_settings(config: &crate::backend::DeviceSettings) -> WgpuBackend {
        let mut b = WgpuBackend::new(FaultPlan::parse(&config.faults));
        b.set_trust_non_finite(config.wgpu_trust_non_finite);
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
            gpu: RwLock::new(DeviceCell::default()),
            pipelines: PipelineCache::default(),
            pool: Pool::default(),
            faults: Arc::new(Mutex::new(faults)),
            max_chunk: AtomicUsize::new(usize::MAX),
            timestamps: AtomicBool::new(true),
            trust_non_finite: AtomicBool::new(false),
            options: device::Options {
                subgroups: true,
                timestamps: true,
            },
            opened_count: AtomicU64::new(0),
        }
    }

    /// Whether to time kernels with the device's timestamp queries when it
    /// has them (the default); `false` uses host timers around fences, as
    /// on devices without `TIMESTAMP_QUERY`.
    pub fn set_timestamps(&self, on: bool) {
        self.timestamps.store(on, Ordering::Relaxed);
    }

    /// Whether to run float kernels without the guard against the
    /// infinities and NaNs WGSL lets the compiler assume away (default
    /// `false`: guarded, and a run that meets one is discarded; see
    /// [`Config::wgpu_trust_non_finite`](crate::Config::wgpu_trust_non_finite)).
    /// Runs after the call use kernels built under the new setting.
    pub fn set_trust_non_finite(&self, on: bool) {
        self.trust_non_finite.store(on, Ordering::Relaxed);
    }

    fn trusts_non_finite(&self) -> bool {
        self.trust_non_finite.load(Ordering::Relaxed)
    }

    /// Whether the opened device offers timestamp queries (`None` before it
    /// opens or when it failed to).
    pub fn has_timestamps(&self) -> Option<bool> {
        self.opened().map(|g| g.timestamps.is_some())
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
        self.opened()
            .map(|g| format!("{} ({:?})", g.info.name, g.info.backend))
    }

    /// Devices opened so far: 1 after the first use, one more each time a
    /// lost device was replaced.
    pub fn devices_opened(&self) -> u64 {
        self.opened_count.load(Ordering::Relaxed)
    }

    /// What the device lets kernels use, once opened successfully.
    pub fn caps(&self) -> Option<Caps> {
        self.device().ok().map(|g| g.caps)
    }

    /// The device, opened on first use and again after a loss.
    fn device(&self) -> Result<Arc<Gpu>, BackendError> {
        // Twice at most: a device lost while it was being fetched is
        // replaced once; lost again at once, the error says so.
        for _ in 0..2 {
            let cell = self.gpu.read().clone();
            match cell.get_or_init(|| self.open()) {
                Ok(g) if g.is_lost() => self.forget(g),
                Ok(g) => return Ok(g.clone()),
                Err(e) => return Err(BackendError::new(BackendKind::Wgpu, Phase::Init, e.clone())),
            }
        }
        Err(BackendError::new(
            BackendKind::Wgpu,
            Phase::Init,
            "the device was lost again as soon as it was opened",
        ))
    }

    fn open(&self) -> Result<Arc<Gpu>, String> {
        let _span = tracing::debug_span!("computeq.wgpu.open").entered();
        let gpu = Gpu::open(self.options)?;
        self.pool.set_device(gpu.id);
        self.pipelines.retain_device(gpu.id);
        self.opened_count.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(gpu))
    }

    /// Replaces the cell of the lost device `lost` (once, whoever notices
    /// first), so that the next use opens a new device.
    fn forget(&self, lost: &Gpu) {
        let mut cell = self.gpu.write();
        if matches!(cell.get(), Some(Ok(g)) if g.id == lost.id) {
            *cell = DeviceCell::default();
            drop(cell);
            tracing::warn!(
                reason = %lost.lost_message().unwrap_or_default(),
                "computeq.wgpu.device_lost: a later run opens the device again"
            );
        }
    }

    /// The device if it is open and not lost, without opening it.
    fn opened(&self) -> Option<Arc<Gpu>> {
        match self.gpu.read().get() {
            Some(Ok(g)) if !g.is_lost() => Some(g.clone()),
            _ => None,
        }
    }

    /// The faults of this run: a copy of the plan, with the counted
    /// device faults this run injects taken from the shared one.
    fn run_faults(&self) -> (FaultPlan, bool, bool) {
        let mut f = self.faults.lock();
        let error = f.take_device_error();
        let loss = f.take_device_loss();
        (*f, error, loss)
    }

    /// The kernel plans this device would run for `plan` (for explain and
    /// golden tests).
    pub fn kernel_plans(&self, plan: &PhysicalPlan) -> Result<Vec<KernelPlan>, BackendError> {
        let gpu = self.device()?;
        lower_guarded(plan, &gpu.caps, self.trusts_non_finite())
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
        let (buffer, _) = scoped(&gpu, Phase::Upload, || {
            transfer::upload(&gpu, &self.pool, &faults, column, true)
        })?;
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
        let (faults, device_error, device_loss) = self.run_faults();
        let t = Instant::now();
        faults.check(Phase::Compile)?;
        let plan = &job.plan.plan;
        let trust = self.trusts_non_finite();
        let (art, cached) = scoped(&gpu, Phase::Compile, || {
            job.plan.artifact(BackendKind::Wgpu, || {
                build_artifact(&gpu, &self.pipelines, &faults, plan, trust)
            })
        })?;
        // An artifact of another device (another backend object, or this
        // one's device before a loss) or built under the other guard
        // setting is not usable here: build one without caching it.
        let usable = art.device == gpu.id && art.trusts_non_finite == trust;
        let (art, cached): (Arc<Artifact>, bool) = if usable {
            (art.clone(), cached || art.all_cached)
        } else {
            let a = scoped(&gpu, Phase::Compile, || {
                build_artifact(&gpu, &self.pipelines, &faults, plan, trust)
            })?;
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
        let mut inject = (device_error, device_loss);
        loop {
            let mut exec = Exec {
                gpu: &gpu,
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
            let result = scoped(&gpu, Phase::Execute, || {
                let out = exec.run(&art, plan, job.inputs, job.params, want)?;
                let (error, loss) = std::mem::take(&mut inject);
                inject_device_faults(&gpu, job, error, loss);
                Ok(out)
            });
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
                Err(e) => {
                    if gpu.is_lost() {
                        self.forget(&gpu);
                    }
                    return Err(e);
                }
                r => return r,
            }
        }
    }

    /// Whether the device can run `plan`, from what decides it: its
    /// capabilities and two limits (of the open device, or remembered).
    fn judge(plan: &PhysicalPlan, facts: &DeviceFacts, trust: bool) -> Result<(), Decline> {
        let caps = facts.caps();
        let plans = lower_guarded(plan, &caps, trust)?;
        for kp in &plans {
            for k in &kp.kernels {
                let needs = k.needs();
                if needs.f64 && !caps.f64 {
                    return Err(Decline::MissingType {
                        dtype: DType::F64,
                        feature: "SHADER_F64 and SHADER_INT64",
                    });
                }
                if let Some(op) = needs.f64_transcendental {
                    return Err(Decline::MissingOperation {
                        op: op.name(),
                        dtype: DType::F64,
                    });
                }
                if needs.int64 && !caps.int64 {
                    // The plan's first 64-bit integer type (an index is a
                    // `u64`).
                    let dtype = plan
                        .stages
                        .iter()
                        .flat_map(|s| s.program.iter())
                        .map(|(_, n)| n.ty)
                        .find(|t| matches!(t, DType::I64 | DType::U64))
                        .unwrap_or(DType::I64);
                    return Err(Decline::MissingType {
                        dtype,
                        feature: "SHADER_INT64",
                    });
                }
                if needs.shared_bytes > facts.workgroup_storage {
                    return Err(Decline::Limit(format!(
                        "kernel `{}` needs {} bytes of workgroup memory, the adapter has {}",
                        k.name, needs.shared_bytes, facts.workgroup_storage
                    )));
                }
                if k.bindings.len() as u32 > facts.storage_buffers {
                    return Err(Decline::Limit(format!(
                        "kernel `{}` needs {} storage buffers, the adapter allows {}",
                        k.name,
                        k.bindings.len(),
                        facts.storage_buffers
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The injected device faults of one run, at its end and inside its error
/// scopes: an invalid buffer whose label names the run's input length (a
/// real validation error, which must fail this run and no other), or the
/// device's destruction.
fn inject_device_faults(gpu: &Gpu, job: &Job<'_>, error: bool, loss: bool) {
    if error {
        let elements = job.inputs.first().map_or(0, |i| i.len());
        // Mapped at creation with a size that is not a multiple of 4: a
        // validation error of `create_buffer`.
        let b = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&format!(
                "computeq.injected_fault.run_over_{elements}_elements"
            )),
            size: 3,
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        b.destroy();
    }
    if loss {
        gpu.device.destroy();
        // The loss is reported by the next poll.
        let _ = gpu.device.poll(wgpu::PollType::wait_indefinitely());
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn availability(&self) -> Availability {
        // Once the device is open this is a read lock and a flag: the
        // runtime asks on every query.
        match self.gpu.read().get() {
            Some(Ok(g)) if !g.is_lost() => return Availability::Available,
            Some(Err(e)) => return Availability::Unavailable(e.clone().into()),
            _ => {}
        }
        match self.device() {
            Ok(_) => Availability::Available,
            Err(e) => Availability::Unavailable(e.message),
        }
    }

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        let gpu = self.device().map_err(|e| Decline::from(e.message))?;
        WgpuBackend::judge(plan, &gpu.facts(), self.trusts_non_finite())
    }

    fn device_key(&self) -> Option<String> {
        Some(device::selection_key())
    }

    fn device_record(&self) -> Option<crate::cost::DeviceRecord> {
        let gpu = self.opened()?;
        Some(crate::cost::DeviceRecord {
            device_id: gpu.device_id(),
            facts: serde_json::to_value(gpu.facts()).ok()?,
        })
    }

    fn supports_remembered(
        &self,
        plan: &PhysicalPlan,
        record: &crate::cost::DeviceRecord,
    ) -> Result<(), Decline> {
        match serde_json::from_value::<DeviceFacts>(record.facts.clone()) {
            Ok(facts) if facts.plausible() => {
                WgpuBackend::judge(plan, &facts, self.trusts_non_finite())
            }
            // A record this version cannot read: the run will tell.
            _ => Ok(()),
        }
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        match self.run(job, stats, Want::Host)? {
            RunOutput::Plan(out) => Ok(out),
            RunOutput::Device(_) => unreachable!("asked for host output"),
        }
    }

    /// Opened and not lost, or known to be unavailable.
    fn is_initialized(&self) -> bool {
        match self.gpu.read().get() {
            Some(Ok(g)) => !g.is_lost(),
            Some(Err(_)) => true,
            None => false,
        }
    }

    fn calibrator<'e>(
        &'e self,
        probes: &'e dyn crate::backend::ProbeRunner,
    ) -> Option<Box<dyn crate::cost::Calibrate + 'e>> {
        self.calibration(probes)
            .map(|c| Box::new(c) as Box<dyn crate::cost::Calibrate + 'e>)
    }

    fn device_profile(&self) -> Option<crate::cost::DeviceProfile> {
        self.opened()
            .filter(|g| g.info.device_type == wgpu::DeviceType::Cpu)
            .map(|_| crate::cost::DeviceProfile::software_prior())
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
