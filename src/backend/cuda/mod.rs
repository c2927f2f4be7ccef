//! `cuda`: the kernel IR written as PTX ([`codegen::ptx`](crate::codegen::ptx))
//! and run through the CUDA driver API (cudarc, loaded dynamically, so the
//! crate builds and runs without any CUDA toolkit or driver).
//!
//! - **Availability.** `libcuda` is probed with `is_culib_present()` before
//!   any driver call (cudarc panics when it is missing); without it the
//!   backend answers `Unavailable("no CUDA driver (libcuda not found)")`.
//!   The context (device 0's primary context) is retained on first use,
//!   once per backend object; a device below compute capability 7.0 (the
//!   PTX target) is reported unavailable.
//! - **Compilation.** A plan's PTX is built once per plan (the
//!   [`CompiledPlan`](crate::plan::CompiledPlan) artifact) and
//!   each module is JIT-loaded once per device, cached by the hash of its
//!   text; captured values are kernel parameters, so a new value reuses it.
//! - **Memory.** A pool of device allocations by power-of-two size class,
//!   two pinned staging buffers, a bounded cache of pinned download
//!   pieces, and a compute, a copy and a download stream ordered by
//!   per-buffer events: host inputs are uploaded chunk by chunk while the
//!   previous chunk computes, and result columns going to the host are
//!   downloaded chunk by chunk while the next chunk computes
//!   ([`RunLimits`], [`run_plan_to_host`]).
//! - **Results** stay on the device when asked ([`CudaColumn`]); inputs
//!   already on this device are bound in place.
//! - **Faults** are injected per phase by [`FaultPlan`]
//!   (`COMPUTEQ_FAULT=cuda:compile|upload|launch|download|oom`, with
//!   `Config::with_fault_injection`). Every driver
//!   error, and a panic inside cudarc, becomes a [`BackendError`] the runtime
//!   falls back from.
//!
//! The host protocol (buffers, launches, chunk carries, chunked downloads)
//! is [`backend::ptx::run_plan`](crate::backend::ptx::run_plan) and
//! [`run_plan_to_host`], shared with the PTX interpreter of the tests.

mod column;
mod device;
mod exec;
mod fault;

pub use column::CudaColumn;
pub use device::{DeviceBuffer, DeviceInfo};
pub use fault::{FaultPlan, FaultyDevice};

use super::{
    Availability, Backend, BackendError, BackendKind, Decline, DeviceColumn, HostColumn, Input,
    Job, Phase, RunStats,
};
use crate::backend::ptx::{
    compile, cuda_caps, run_plan, run_plan_to_host, DeviceData, PtxDevice, PtxPlan, RunInput,
    RunLimits, RunOutput,
};
use crate::codegen::lower_plan;
use crate::codegen::ptx::PtxOptions;
use crate::codegen::Caps;
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::types::ColumnRef;
use device::Gpu;
use exec::CudaDevice;
use parking_lot::Mutex;
use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The CUDA backend. Construct it with [`CudaBackend::new`] and register it
/// with the engine; it touches the driver only when first asked whether it
/// is available or to run something.
pub struct CudaBackend {
    caps: Caps,
    options: PtxOptions,
    limits: RunLimits,
    faults: Mutex<FaultPlan>,
    gpu: OnceLock<Result<Arc<Mutex<Gpu>>, String>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("options", &self.options)
            .field("faults", &*self.faults.lock())
            .finish_non_exhaustive()
    }
}

impl Default for CudaBackend {
    fn default() -> Self {
        CudaBackend::new()
    }
}

/// Whether `libcuda` can be loaded (checked once).
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

fn error(phase: Phase, m: impl Into<Cow<'static, str>>) -> BackendError {
    BackendError::new(BackendKind::Cuda, phase, m)
}

enum Out {
    Plan(PlanOutput),
    Device(Vec<Arc<dyn DeviceColumn>>),
}

impl CudaBackend {
    /// A backend with the default launch shape (256 threads per block,
    /// warp operations), PTX 7.0 for sm_70, and no faults.
    pub fn new() -> CudaBackend {
        CudaBackend::with_faults(FaultPlan::NONE)
    }

    /// The default backend, injecting the faults of the device settings
    /// (there only when the engine's `Config` enables fault injection:
    /// `COMPUTEQ_FAULT` alone never does).
    pub fn from_settings(config: &crate::backend::DeviceSettings) -> CudaBackend {
        CudaBackend::with_faults(FaultPlan::parse(&config.faults))
    }

    /// The same with an explicit fault plan (tests).
    pub fn with_faults(faults: FaultPlan) -> CudaBackend {
        CudaBackend {
            caps: cuda_caps(),
            options: PtxOptions::default(),
            limits: RunLimits::default(),
            faults: Mutex::new(faults),
            gpu: OnceLock::new(),
        }
    }

    /// Replaces the fault plan.
    pub fn set_faults(&self, faults: FaultPlan) {
        *self.faults.lock() = faults;
    }

    /// Sets the most positions per chunk (default 2^24).
    pub fn with_limits(mut self, limits: RunLimits) -> CudaBackend {
        self.limits = limits;
        self
    }

    /// The device, once opened.
    pub fn device_info(&self) -> Option<DeviceInfo> {
        match self.gpu.get() {
            Some(Ok(g)) => Some(g.lock().info.clone()),
            _ => None,
        }
    }

    fn gpu(&self) -> Result<&Arc<Mutex<Gpu>>, BackendError> {
        if !driver_present() {
            return Err(error(Phase::Init, "no CUDA driver (libcuda not found)"));
        }
        self.gpu
            .get_or_init(|| {
                let opened = catch_unwind(Gpu::open).unwrap_or_else(|_| {
                    Err("the CUDA driver panicked while opening the device".into())
                })?;
                let (major, minor) = opened.info.compute_capability;
                if major < 7 {
                    return Err(format!(
                        "{} has compute capability {major}.{minor}, below the sm_70 PTX target",
                        opened.info.name
                    ));
                }
                Ok(Arc::new(Mutex::new(opened)))
            })
            .as_ref()
            .map_err(|m| error(Phase::Init, m.clone()))
    }

    fn run(&self, job: &Job<'_>, stats: &mut RunStats, keep: bool) -> Result<Out, BackendError> {
        let gpu_arc = self.gpu()?.clone();
        let faults = *self.faults.lock();
        let start = Instant::now();
        let (ptx, cached) = job.plan.artifact(BackendKind::Cuda, || {
            compile(&job.plan.plan, &self.caps, &self.options)
                .map_err(|e| error(Phase::Compile, e.to_string()))
        })?;
        let ptx: &PtxPlan = &ptx;
        // Columns on another device (or another CUDA backend) come through
        // the host, before this device is locked.
        let mut hosts: Vec<Option<HostColumn<'_>>> = Vec::with_capacity(job.inputs.len());
        for i in job.inputs {
            let ours = matches!(i, Input::Device(d) if d
                .as_any()
                .downcast_ref::<CudaColumn>()
                .is_some_and(|c| Arc::ptr_eq(&c.gpu, &gpu_arc)));
            hosts.push(if ours { None } else { Some(i.host(stats)?) });
        }
        let mut gpu = gpu_arc.lock();
        gpu.bind()?;
        let mut cuda = CudaDevice { gpu: &mut gpu };
        let mut dev = FaultyDevice {
            inner: &mut cuda,
            faults,
        };
        let modules = ptx
            .stages
            .iter()
            .map(|s| dev.load(&s.module))
            .collect::<Result<Vec<_>, _>>()?;
        stats.compile = start.elapsed();
        stats.compile_cached = cached;
        let refs: Vec<_> = modules.iter().collect();
        let inputs: Vec<RunInput<'_, DeviceBuffer>> = job
            .inputs
            .iter()
            .zip(&hosts)
            .map(|(i, h)| match (i, h) {
                (_, Some(h)) => RunInput::Host(h.as_ref()),
                (Input::Device(d), None) => {
                    let c = d
                        .as_any()
                        .downcast_ref::<CudaColumn>()
                        .expect("checked above");
                    RunInput::Device {
                        buffer: &c.data.buffer,
                        dtype: c.data.dtype,
                        len: c.data.len,
                    }
                }
                (Input::Host(c), None) => RunInput::Host(*c),
            })
            .collect();
        let t = Instant::now();
        let (uploaded, waited) = (stats.transfer_in, stats.transfer_out);
        let out = if keep {
            match run_plan(
                &mut dev,
                &job.plan.plan,
                ptx,
                &refs,
                &inputs,
                job.params,
                &self.limits,
                stats,
            )? {
                RunOutput::Aggregates(a) => Out::Plan(PlanOutput::Aggregates(a)),
                RunOutput::Columns(cols) => Out::Device(
                    cols.into_iter()
                        .map(|data| {
                            Arc::new(CudaColumn {
                                data,
                                gpu: gpu_arc.clone(),
                            }) as Arc<dyn DeviceColumn>
                        })
                        .collect(),
                ),
            }
        } else {
            // Result columns are downloaded chunk by chunk, each chunk's
            // download behind the next chunk's kernels.
            Out::Plan(run_plan_to_host(
                &mut dev,
                &job.plan.plan,
                ptx,
                &refs,
                &inputs,
                job.params,
                &self.limits,
                stats,
            )?)
        };
        // The kernels of a result kept on the device are still running:
        // their time is the run's too.
        gpu.synchronize()?;
        // The uploads (the host's copies into pinned memory and the queued
        // copies) are `transfer_in`, its waits for downloads `transfer_out`;
        // the rest is execute.
        stats.execute = t
            .elapsed()
            .saturating_sub(stats.transfer_out.saturating_sub(waited))
            .saturating_sub(stats.transfer_in.saturating_sub(uploaded));
        stats.parallelism = self.caps.workgroup_size * self.caps.max_groups;
        Ok(out)
    }

    /// Runs `f`, turning a panic inside cudarc (a driver without a symbol
    /// it expects) into an error.
    fn guarded<T>(&self, f: impl FnOnce() -> Result<T, BackendError>) -> Result<T, BackendError> {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(error(Phase::Execute, "the CUDA driver panicked")))
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn availability(&self) -> Availability {
        match self.gpu() {
            Ok(_) => Availability::Available,
            Err(e) => Availability::Unavailable(e.message),
        }
    }

    /// The context is created on first use; without a driver the answer
    /// (unavailable) costs nothing, so it counts as initialised and the
    /// engine reports why rather than "not probed".
    fn is_initialized(&self) -> bool {
        self.gpu.get().is_some() || !driver_present()
    }

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        lower_plan(plan, &self.caps).map(|_| ()).map_err(|e| e.0)
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        match self.guarded(|| self.run(job, stats, false))? {
            Out::Plan(p) => Ok(p),
            Out::Device(_) => unreachable!("not kept on the device"),
        }
    }

    fn upload(&self, column: ColumnRef<'_>) -> Result<Arc<dyn DeviceColumn>, BackendError> {
        self.guarded(|| {
            let gpu_arc = self.gpu()?.clone();
            let faults = *self.faults.lock();
            let mut gpu = gpu_arc.lock();
            gpu.bind()?;
            let mut cuda = CudaDevice { gpu: &mut gpu };
            let mut dev = FaultyDevice {
                inner: &mut cuda,
                faults,
            };
            let bytes = column.device_bytes();
            let buffer = dev.alloc(bytes.len().max(16))?;
            if !bytes.is_empty() {
                dev.upload(&buffer, 0, &bytes)?;
            }
            gpu.synchronize()?;
            drop(gpu);
            Ok(Arc::new(CudaColumn {
                data: DeviceData {
                    buffer,
                    dtype: column.dtype(),
                    len: column.len(),
                },
                gpu: gpu_arc,
            }) as Arc<dyn DeviceColumn>)
        })
    }

    fn execute_to_device(
        &self,
        job: &Job<'_>,
        stats: &mut RunStats,
    ) -> Result<Vec<Arc<dyn DeviceColumn>>, BackendError> {
        match self.guarded(|| self.run(job, stats, true))? {
            Out::Device(cols) => Ok(cols),
            Out::Plan(_) => Err(error(Phase::Execute, "the plan does not end in collect")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_an_ordinary_answer() {
        let b = CudaBackend::with_faults(FaultPlan::NONE);
        match b.availability() {
            Availability::Available => assert!(driver_present()),
            Availability::Unavailable(why) => {
                if !driver_present() {
                    assert_eq!(why, "no CUDA driver (libcuda not found)");
                }
            }
        }
    }
}
