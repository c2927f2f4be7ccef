//! The backends a new engine starts with: the CPU ones always, each device
//! backend when its feature is compiled in (it probes its device lazily).

use super::Backend;
use crate::runtime::Config;
use std::sync::Arc;

/// Every backend compiled into this build, in `BackendKind` order, with
/// the device settings of `config` (and its faults, when it enables fault
/// injection).
pub fn default_backends(config: &Config) -> Vec<Arc<dyn Backend>> {
    let mut v: Vec<Arc<dyn Backend>> = vec![
        Arc::new(super::cpu_scalar::CpuScalar),
        Arc::new(super::cpu_simd::CpuSimd),
        Arc::new(super::cpu_parallel::CpuParallel),
    ];
    v.extend(wgpu_backend(config));
    v.extend(cuda_backend(config));
    v
}

#[cfg(feature = "wgpu")]
fn wgpu_backend(config: &Config) -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::wgpu::WgpuBackend::from_config(config)))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_backend(_: &Config) -> Option<Arc<dyn Backend>> {
    None
}

#[cfg(feature = "cuda")]
fn cuda_backend(config: &Config) -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::cuda::CudaBackend::from_config(config)))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend(_: &Config) -> Option<Arc<dyn Backend>> {
    None
}
