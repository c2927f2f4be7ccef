//! `WgpuColumn`: a column living in a wgpu storage buffer. Made by
//! [`WgpuBackend::upload`](super::WgpuBackend::upload) or by collecting a
//! query on the device; its buffer is destroyed when the last handle drops.

use super::buffers::{Pool, PooledBuffer};
use super::device::Gpu;
use super::fault::FaultPlan;
use super::scope::scoped;
use super::transfer::{device_size, download};
use crate::backend::{BackendError, BackendKind, DeviceColumn, Phase};
use crate::expr::DType;
use crate::types::Column;
use parking_lot::Mutex;
use std::sync::Arc;

/// A device-resident column of the wgpu backend.
pub struct WgpuColumn {
    pub(crate) buffer: PooledBuffer,
    pub(crate) dtype: DType,
    pub(crate) len: usize,
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) pool: Pool,
    pub(crate) faults: Arc<Mutex<FaultPlan>>,
}

impl std::fmt::Debug for WgpuColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WgpuColumn<{}>[{}] on {}",
            self.dtype, self.len, self.gpu.info.name
        )
    }
}

impl WgpuColumn {
    /// Bytes the column occupies on the device.
    pub fn device_bytes(&self) -> u64 {
        (self.len * device_size(self.dtype)) as u64
    }

    /// Identifies the device holding it.
    pub(crate) fn device_id(&self) -> u64 {
        self.gpu.id
    }
}

impl DeviceColumn for WgpuColumn {
    fn backend(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }

    fn download(&self) -> Result<Column, BackendError> {
        let faults = *self.faults.lock();
        let bytes = scoped(&self.gpu, Phase::Download, || {
            download(
                &self.gpu,
                &self.pool,
                &faults,
                self.buffer.buffer(),
                0,
                self.device_bytes(),
            )
        })?;
        Ok(Column::from_device_bytes(self.dtype, &bytes))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
