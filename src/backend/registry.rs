//! The backends a new engine starts with: the CPU ones always, each device
//! backend when its feature is compiled in (it probes its device lazily).

use super::Backend;
use std::sync::Arc;

/// Every backend compiled into this build, in `BackendKind` order.
pub fn default_backends() -> Vec<Arc<dyn Backend>> {
    let mut v: Vec<Arc<dyn Backend>> = vec![
        Arc::new(super::cpu_scalar::CpuScalar),
        Arc::new(super::cpu_simd::CpuSimd),
        Arc::new(super::cpu_parallel::CpuParallel),
    ];
    v.extend(wgpu_backend());
    v.extend(cuda_backend());
    v
}

#[cfg(feature = "wgpu")]
fn wgpu_backend() -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::wgpu::WgpuBackend::default()))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_backend() -> Option<Arc<dyn Backend>> {
    None
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Option<Arc<dyn Backend>> {
    Some(Arc::new(super::cuda::CudaBackend::default()))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Option<Arc<dyn Backend>> {
    None
}
