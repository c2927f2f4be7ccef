//! `CudaColumn`: a column kept in device memory (`DeviceArray` on CUDA).

use super::device::{DeviceBuffer, Gpu};
use super::exec::CudaDevice;
use crate::backend::ptx::{download_column, DeviceData};
use crate::backend::{BackendError, BackendKind, DeviceColumn, RunStats};
use crate::expr::DType;
use crate::types::Column;
use parking_lot::Mutex;
use std::sync::Arc;

/// A column in CUDA device memory; dropping it returns the memory to the
/// backend's pool.
pub struct CudaColumn {
    pub(crate) data: DeviceData<DeviceBuffer>,
    pub(crate) gpu: Arc<Mutex<Gpu>>,
}

impl std::fmt::Debug for CudaColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaColumn")
            .field("dtype", &self.data.dtype)
            .field("len", &self.data.len)
            .finish()
    }
}

impl DeviceColumn for CudaColumn {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn dtype(&self) -> DType {
        self.data.dtype
    }

    fn len(&self) -> usize {
        self.data.len
    }

    fn download(&self) -> Result<Column, BackendError> {
        let mut gpu = self.gpu.lock();
        gpu.bind()?;
        let mut dev = CudaDevice { gpu: &mut gpu };
        download_column(&mut dev, &self.data, &mut RunStats::default())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
