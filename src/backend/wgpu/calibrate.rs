//! The wgpu device measures itself for the cost model: each probe the
//! [`Calibrate`] trait asks for is a real query forced onto this backend
//! through an engine (the runtime's device probe gives it a private one,
//! so these queries never appear in the user's run log), and the figure
//! is read from its `ExecutionMetrics` (upload, download, execute and
//! compile phases), so the profile prices exactly the path queries take. `cost::device_profile` fits the figures,
//! bounds the time spent by the engine's calibration budget and persists
//! the profile per device in the cache directory.

use super::{FaultPlan, WgpuBackend};
use crate::backend::BackendKind;
use crate::backend::{Probe, ProbeRunner};
use crate::cost::calibrate::SmallestRun;
use crate::cost::Calibrate;
use crate::metrics::ExecutionMetrics;
use crate::types::ColumnRef;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Probes run by `probes` on `backend` (see the module doc).
pub(crate) struct WgpuCalibration<'e> {
    probes: &'e dyn ProbeRunner,
    backend: &'e WgpuBackend,
}

impl WgpuBackend {
    /// A calibration of this device through `probes`, when one makes
    /// sense: the device is open and no fault is being injected (a probe
    /// would consume or trip it). A probe that fails falls back (the
    /// runner's promise) and is simply not counted.
    pub(crate) fn calibration<'e>(
        &'e self,
        probes: &'e dyn ProbeRunner,
    ) -> Option<WgpuCalibration<'e>> {
        // On GL, wgpu-hal runs every call of every thread through one
        // context lock whose waiters panic after 6 s: a probe measuring
        // the device from its background thread while a query holds the
        // lock through a long run (llvmpipe sorting a large column) can
        // panic and lose the device under that query. A GL device is
        // priced from its class instead (`device_profile`).
        let open = self
            .opened()
            .is_some_and(|g| g.info.backend != wgpu::Backend::Gl);
        let usable = open && *self.faults.lock() == FaultPlan::NONE;
        usable.then_some(WgpuCalibration {
            probes,
            backend: self,
        })
    }
}

/// Submits what the queue has staged (an upload's `write_buffer` waits
/// for the next submission) and waits until the device is idle.
fn settle(gpu: &super::device::Gpu) -> Option<()> {
    super::scope::scoped(gpu, crate::backend::Phase::Upload, || {
        gpu.queue.submit([]);
        gpu.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| {
                crate::backend::BackendError::new(
                    BackendKind::Wgpu,
                    crate::backend::Phase::Upload,
                    e.to_string(),
                )
            })
    })
    .ok()
}

/// Elements of `f32` in `bytes`, at least one.
fn elements(bytes: usize) -> usize {
    (bytes / 4).max(1)
}

impl WgpuCalibration<'_> {
    fn gpu(&self) -> Option<std::sync::Arc<super::device::Gpu>> {
        self.backend.opened()
    }

    /// The metrics of a probe that really ran on this backend.
    fn on_device(m: ExecutionMetrics) -> Option<ExecutionMetrics> {
        (m.backend == BackendKind::Wgpu && m.attempts.is_empty()).then_some(m)
    }

    fn sum(&self, n: usize) -> Option<ExecutionMetrics> {
        let xs = vec![1.0f32; n];
        WgpuCalibration::on_device(self.probes.run(BackendKind::Wgpu, Probe::Sum(&xs)))
    }
}

impl Calibrate for WgpuCalibration<'_> {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn device_id(&self) -> String {
        match self.gpu() {
            Some(g) => g.device_id(),
            _ => "wgpu/unopened".into(),
        }
    }

    fn software(&self) -> bool {
        self.gpu()
            .is_some_and(|g| g.info.device_type == wgpu::DeviceType::Cpu)
    }

    // Transfers are timed on the backend's own upload and download paths
    // (the ones queries use), without a kernel: a probe query would first
    // compile its pipelines, which on a software device alone can exceed
    // the calibration budget.
    fn time_upload(&self, bytes: usize) -> Option<Duration> {
        let gpu = self.gpu()?;
        let xs = vec![1.0f32; elements(bytes)];
        let t = Instant::now();
        let column = self.backend.upload(ColumnRef::F32(&xs)).ok()?;
        settle(&gpu)?;
        let d = t.elapsed();
        drop(column);
        Some(d)
    }

    /// The download of a buffer whose upload is done: the upload's staged
    /// write is submitted and waited for before the clock starts (timed
    /// from the upload call, a download included the upload's copy, and
    /// one of 40 MiB measured 0.2 GB/s on lavapipe, a seventh of what the
    /// downloads of queries take).
    fn time_download(&self, bytes: usize) -> Option<Duration> {
        let gpu = self.gpu()?;
        let xs = vec![1.0f32; elements(bytes)];
        let column = self.backend.upload(ColumnRef::F32(&xs)).ok()?;
        settle(&gpu)?;
        let t = Instant::now();
        column.download().ok()?;
        Some(t.elapsed())
    }

    fn time_smallest_run(&self) -> Option<SmallestRun> {
        self.sum(1).map(|m| {
            let p = &m.phases;
            SmallestRun {
                dispatch: p.execute,
                launches: m.launches,
                whole: p.transfer_in + p.execute + p.transfer_out,
            }
        })
    }

    fn time_read(&self, bytes: usize) -> Option<Duration> {
        self.sum(elements(bytes)).map(|m| m.phases.execute)
    }

    fn time_ops(&self, elements: usize, ops: u32) -> Option<Duration> {
        let xs = vec![1.0f32; elements];
        let m = self.probes.run(BackendKind::Wgpu, Probe::MulAdds(&xs, ops));
        WgpuCalibration::on_device(m).map(|m| m.phases.execute)
    }

    fn time_compile(&self) -> Option<Duration> {
        // A baked constant makes a plan (and pipelines) of its own.
        static FRESH: AtomicU32 = AtomicU32::new(0);
        let k = FRESH.fetch_add(1, Ordering::Relaxed) as f32 + 0.25;
        let xs = vec![1.0f32; 64];
        let m = self.probes.run(BackendKind::Wgpu, Probe::Scale(&xs, k));
        WgpuCalibration::on_device(m)
            .filter(|m| !m.compile_cache_hit)
            .map(|m| m.phases.compile)
    }
}
