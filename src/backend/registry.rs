//! The backends a new engine starts with: the CPU ones always, each device
//! backend when its feature is compiled in (it probes its device lazily).

use super::Backend;
use std::sync::Arc;

/// What the backends are told by the engine's settings (the runtime's
/// `Config` makes it; backends never read the environment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSettings {
    /// Faults to inject, as `COMPUTEQ_FAULT` entries (empty unless the
    /// engine's settings enable fault injection).
    pub faults: String,
    /// Let wgpu kernels use subgroup operations.
    pub wgpu_subgroups: bool,
    /// Ask the wgpu adapter for timestamp queries.
    pub wgpu_timestamps: bool,
    /// Run wgpu float kernels without the non-finite guard.
    pub wgpu_trust_non_finite: bool,
    /// How long `cpu-parallel`'s helpers wait for the next run's tasks
    /// after theirs (zero: not at all; see
    /// [`Config::pool_linger`](crate::Config::pool_linger)).
    pub pool_linger: std::time::Duration,
}

/// Every backend compiled into this build, in `BackendKind` order, with
/// the device `settings` (and their faults).
pub fn default_backends(config: &DeviceSettings) -> Vec<Arc<dyn Backend>> {
    let mut v: Vec<Arc<dyn Backend>> = vec![
        Arc::new(super::cpu_scalar::CpuScalar),
        Arc::new(super::cpu_simd::CpuSimd),
        Arc::new(super::cpu_parallel::CpuParallel::with_linger(
            config.pool_linger,
        )),
    ];
    v.extend(wgpu_backend(config));
    v.extend(cuda_backend(config));
    v
}

#[cfg(feature = "wgpu")]
fn wgpu_backend(config: &DeviceSettings) -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::wgpu::WgpuBackend::from_settings(config)))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_backend(_: &DeviceSettings) -> Option<Arc<dyn Backend>> {
    None
}

#[cfg(feature = "cuda")]
fn cuda_backend(config: &DeviceSettings) -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::cuda::CudaBackend::from_settings(config)))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend(_: &DeviceSettings) -> Option<Arc<dyn Backend>> {
    None
}
