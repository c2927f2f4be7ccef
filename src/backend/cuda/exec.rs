//! The CUDA implementation of [`PtxDevice`]: uploads and synchronous
//! downloads through the pinned staging buffers on the copy stream,
//! started downloads into pinned pieces on the download stream, launches
//! on the compute stream, the per-buffer events of
//! [`device`](super::device) ordering the three.

use super::device::{
    driver_error, DeviceBuffer, Event, Gpu, Module, PendingDownload, Pinned,
    DOWNLOAD_PIECES_CACHED, STAGING_BYTES,
};
use crate::backend::ptx::{BufferArg, PtxDevice};
use crate::backend::{BackendError, Phase};
use crate::codegen::ptx::PtxModule;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::Arc;

/// The device of one run, borrowing the backend's locked state.
pub(crate) struct CudaDevice<'g> {
    pub(crate) gpu: &'g mut Gpu,
}

impl CudaDevice<'_> {
    fn new_event(&self, phase: Phase) -> Result<Arc<Event>, BackendError> {
        Event::new(&self.gpu.ctx)
            .map(Arc::new)
            .map_err(|e| driver_error(phase, "creating an event", e))
    }

    /// The next staging buffer, once its previous transfer is complete.
    fn staging(&mut self, phase: Phase) -> Result<usize, BackendError> {
        let i = self.gpu.next_staging;
        self.gpu.next_staging = (i + 1) % self.gpu.staging.len();
        self.gpu.staging[i]
            .done
            .synchronize()
            .map_err(|e| driver_error(phase, "waiting for a transfer", e))?;
        Ok(i)
    }
}

/// Frees the pinned pieces of a download that failed to start, once the
/// copies already queued into them on `stream` are complete; leaks them if
/// that cannot be known (freeing memory a copy may still write is worse).
fn abandon(stream: sys::CUstream, pieces: Vec<Pinned>) {
    // SAFETY: a live stream of this context, bound to this thread.
    if unsafe { result::stream::synchronize(stream) }.is_err() {
        std::mem::forget(pieces);
    }
}

impl PtxDevice for CudaDevice<'_> {
    type Buffer = DeviceBuffer;
    type Module = Arc<Module>;
    type Pending = PendingDownload;

    fn load(&mut self, module: &PtxModule) -> Result<Arc<Module>, BackendError> {
        self.gpu.module(module)
    }

    fn alloc(&mut self, bytes: usize) -> Result<DeviceBuffer, BackendError> {
        self.gpu.alloc(bytes)
    }

    fn upload(
        &mut self,
        dst: &DeviceBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), BackendError> {
        if offset + data.len() > dst.bytes {
            return Err(BackendError::new(
                crate::backend::BackendKind::Cuda,
                Phase::Upload,
                "upload past the end of a buffer",
            ));
        }
        let copy = self.gpu.copy.raw;
        // After the kernels using the buffer and the downloads reading it.
        // (One cell locked at a time: a `for` keeps its head's guards.)
        let used = dst.last_use.lock().clone();
        let read = dst.last_read.lock().clone();
        for e in [used, read].into_iter().flatten() {
            e.wait_on(copy)
                .map_err(|e| driver_error(Phase::Upload, "ordering an upload", e))?;
        }
        for (k, piece) in data.chunks(STAGING_BYTES).enumerate() {
            let s = self.staging(Phase::Upload)?;
            let pinned = self.gpu.staging[s].ptr;
            // SAFETY: the staging buffer holds STAGING_BYTES and its last
            // transfer is complete; the copy reads it before `done` fires.
            unsafe {
                std::ptr::copy_nonoverlapping(piece.as_ptr(), pinned, piece.len());
                let host = std::slice::from_raw_parts(pinned, piece.len());
                result::memcpy_htod_async(
                    dst.ptr + (offset + k * STAGING_BYTES) as u64,
                    host,
                    copy,
                )
                .map_err(|e| driver_error(Phase::Upload, "copying to the device", e))?;
            }
            self.gpu.staging[s]
                .done
                .record(copy)
                .map_err(|e| driver_error(Phase::Upload, "recording an upload", e))?;
        }
        let ready = self.new_event(Phase::Upload)?;
        ready
            .record(copy)
            .map_err(|e| driver_error(Phase::Upload, "recording an upload", e))?;
        *dst.ready.lock() = Some(ready);
        Ok(())
    }

    fn download(
        &mut self,
        src: &DeviceBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        if offset + out.len() > src.bytes {
            return Err(BackendError::new(
                crate::backend::BackendKind::Cuda,
                Phase::Download,
                "download past the end of a buffer",
            ));
        }
        let copy = self.gpu.copy.raw;
        let used = src.last_use.lock().clone();
        let ready = src.ready.lock().clone();
        for e in [used, ready].into_iter().flatten() {
            e.wait_on(copy)
                .map_err(|e| driver_error(Phase::Download, "ordering a download", e))?;
        }
        for (k, piece) in out.chunks_mut(STAGING_BYTES).enumerate() {
            let s = self.staging(Phase::Download)?;
            let pinned = self.gpu.staging[s].ptr;
            // SAFETY: the staging buffer is idle and large enough; we wait
            // for the copy before reading it.
            unsafe {
                let host = std::slice::from_raw_parts_mut(pinned, piece.len());
                result::memcpy_dtoh_async(
                    host,
                    src.ptr + (offset + k * STAGING_BYTES) as u64,
                    copy,
                )
                .map_err(|e| driver_error(Phase::Download, "copying from the device", e))?;
            }
            let done = &self.gpu.staging[s].done;
            done.record(copy)
                .map_err(|e| driver_error(Phase::Download, "recording a download", e))?;
            done.synchronize()
                .map_err(|e| driver_error(Phase::Download, "copying from the device", e))?;
            // SAFETY: the copy into the staging buffer is complete.
            unsafe { std::ptr::copy_nonoverlapping(pinned, piece.as_mut_ptr(), piece.len()) };
        }
        Ok(())
    }

    fn start_download(
        &mut self,
        src: &DeviceBuffer,
        offset: usize,
        len: usize,
    ) -> Result<PendingDownload, BackendError> {
        if offset + len > src.bytes {
            return Err(BackendError::new(
                crate::backend::BackendKind::Cuda,
                Phase::Download,
                "download past the end of a buffer",
            ));
        }
        let stream = self.gpu.download.raw;
        // After the kernels that wrote the buffer (their event is recorded
        // on the compute stream after the last launch using it) and the
        // last upload into it; not after anything queued later.
        let used = src.last_use.lock().clone();
        let ready = src.ready.lock().clone();
        for e in [used, ready].into_iter().flatten() {
            e.wait_on(stream)
                .map_err(|e| driver_error(Phase::Download, "ordering a download", e))?;
        }
        let mut pieces = Vec::with_capacity(len.div_ceil(STAGING_BYTES));
        let mut k = 0;
        while k * STAGING_BYTES < len {
            let n = STAGING_BYTES.min(len - k * STAGING_BYTES);
            let piece = match self.gpu.pinned.pop() {
                Some(p) => p,
                None => match Pinned::new(&self.gpu.ctx) {
                    Ok(p) => p,
                    Err(e) => {
                        abandon(stream, pieces);
                        return Err(driver_error(Phase::Download, "allocating pinned memory", e));
                    }
                },
            };
            // SAFETY: the piece holds STAGING_BYTES >= n bytes and is idle
            // (cached pieces come back only from finished downloads, after
            // their event completed). The device writes it until `done`
            // completes; until then the piece lives in `pieces`, then in
            // the `PendingDownload`, whose drop waits for `done`. The
            // source range is inside the buffer (checked above).
            let queued = unsafe {
                let host = std::slice::from_raw_parts_mut(piece.ptr, n);
                result::memcpy_dtoh_async(
                    host,
                    src.ptr + (offset + k * STAGING_BYTES) as u64,
                    stream,
                )
            };
            pieces.push(piece);
            if let Err(e) = queued {
                abandon(stream, pieces);
                return Err(driver_error(Phase::Download, "copying from the device", e));
            }
            k += 1;
        }
        let done = match self.new_event(Phase::Download).and_then(|d| {
            d.record(stream)
                .map_err(|e| driver_error(Phase::Download, "recording a download", e))?;
            Ok(d)
        }) {
            Ok(d) => d,
            Err(e) => {
                abandon(stream, pieces);
                return Err(e);
            }
        };
        *src.last_read.lock() = Some(done.clone());
        Ok(PendingDownload { pieces, len, done })
    }

    fn finish_download(
        &mut self,
        mut pending: PendingDownload,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        if out.len() != pending.len {
            return Err(BackendError::new(
                crate::backend::BackendKind::Cuda,
                Phase::Download,
                format!(
                    "a download of {} bytes finished into {} bytes",
                    pending.len,
                    out.len()
                ),
            ));
        }
        // On failure the pending download's drop waits again (or leaks).
        pending
            .done
            .synchronize()
            .map_err(|e| driver_error(Phase::Download, "copying from the device", e))?;
        let pieces = std::mem::take(&mut pending.pieces);
        for (piece, chunk) in pieces.iter().zip(out.chunks_mut(STAGING_BYTES)) {
            // SAFETY: the copy into the piece is complete (`done` was
            // recorded after it on the same stream) and wrote at least
            // `chunk.len()` bytes of it.
            unsafe { std::ptr::copy_nonoverlapping(piece.ptr, chunk.as_mut_ptr(), chunk.len()) };
        }
        // Idle again; keep a bounded number, free the rest.
        for piece in pieces {
            if self.gpu.pinned.len() < DOWNLOAD_PIECES_CACHED {
                self.gpu.pinned.push(piece);
            }
        }
        Ok(())
    }

    fn launch(
        &mut self,
        module: &Arc<Module>,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, DeviceBuffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError> {
        let compute = self.gpu.compute.raw;
        // After the uploads into every bound buffer, and after the started
        // downloads from them (the kernel may write any of them).
        for b in buffers {
            let ready = b.buffer.ready.lock().clone();
            let read = b.buffer.last_read.lock().clone();
            for e in [ready, read].into_iter().flatten() {
                e.wait_on(compute)
                    .map_err(|e| driver_error(Phase::Execute, "ordering a launch", e))?;
            }
        }
        // Kernel parameters: one device address per binding, then the
        // uniform block by value (the driver copies both at the call).
        let mut addrs: Vec<u64> = buffers
            .iter()
            .map(|b| b.buffer.ptr + b.offset as u64)
            .collect();
        let mut block_bytes: Vec<u128> = vec![0; uniforms.len().div_ceil(16)];
        // SAFETY: `block_bytes` holds at least `uniforms.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                uniforms.as_ptr(),
                block_bytes.as_mut_ptr() as *mut u8,
                uniforms.len(),
            )
        };
        let mut params: Vec<*mut c_void> = addrs
            .iter_mut()
            .map(|a| a as *mut u64 as *mut c_void)
            .collect();
        if !uniforms.is_empty() {
            params.push(block_bytes.as_mut_ptr() as *mut c_void);
        }
        let f = *module.functions.get(entry).ok_or_else(|| {
            BackendError::new(
                crate::backend::BackendKind::Cuda,
                Phase::Execute,
                "no such entry",
            )
        })?;
        // SAFETY: the parameters match the entry's signature (bindings,
        // then the uniform block), written by the same PTX writer.
        unsafe {
            result::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, compute, &mut params)
                .map_err(|e| driver_error(Phase::Execute, "launching a kernel", e))?;
        }
        let used = self.new_event(Phase::Execute)?;
        used.record(compute)
            .map_err(|e| driver_error(Phase::Execute, "recording a launch", e))?;
        for b in buffers {
            *b.buffer.last_use.lock() = Some(used.clone());
        }
        Ok(())
    }
}
