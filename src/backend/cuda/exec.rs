//! The CUDA implementation of [`PtxDevice`]: uploads and synchronous
//! downloads through the pinned staging buffers on the copy stream,
//! started downloads into pinned pieces on the download stream, launches
//! on the compute stream, the per-buffer events of
//! [`device`](super::device) ordering the three.

use super::device::{
    driver_error, DeviceBuffer, Event, Gpu, Module, PendingDownload, Pinned,
    DOWNLOAD_PIECES_CACHED, PIECE_BYTES, STAGING_BYTES,
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

/// Host copies of at least this many bytes (into or out of pinned memory)
/// are split across threads: one thread copies ~10 GB/s, a fraction of
/// what the copy engines move (measured on an H200's host, docs/cuda.md).
const PARALLEL_COPY_MIN: usize = 2 << 20;

/// Bytes per part of a split host copy.
const COPY_PART: usize = 1 << 20;

/// Most threads one host copy uses.
const COPY_THREADS: usize = 8;

/// One part of a host copy: `len` bytes from `src` to `dst`.
#[derive(Clone, Copy)]
struct CopyPart {
    dst: *mut u8,
    src: *const u8,
    len: usize,
}

// SAFETY: a part is a disjoint range of memory that `HostCopies` keeps
// borrowed (mutably for `dst`) until every thread copying it has finished.
unsafe impl Send for CopyPart {}
unsafe impl Sync for CopyPart {}

/// Host copies done together, split into parts that scoped threads (and the
/// caller) take from a shared counter. The threads only copy bytes: they
/// take no lock and run no user code, so the backend's lock may be held
/// meanwhile. A thread that cannot be started leaves its share to the
/// others and the caller.
#[derive(Default)]
pub(crate) struct HostCopies<'a> {
    parts: Vec<CopyPart>,
    bytes: usize,
    _borrows: std::marker::PhantomData<(&'a mut [u8], &'a [u8])>,
}

impl<'a> HostCopies<'a> {
    /// Adds `dst.copy_from_slice(src)`.
    pub(crate) fn add(&mut self, dst: &'a mut [u8], src: &'a [u8]) {
        assert_eq!(dst.len(), src.len(), "a host copy between unequal ranges");
        // One pointer per slice, every part derived from it.
        let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
        for at in (0..src.len()).step_by(COPY_PART) {
            let len = COPY_PART.min(src.len() - at);
            // SAFETY: `at + len` is within both slices.
            self.parts.push(unsafe {
                CopyPart {
                    dst: d.add(at),
                    src: s.add(at),
                    len,
                }
            });
        }
        self.bytes += src.len();
    }

    /// Does every copy added.
    pub(crate) fn run(self) {
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let threads = if self.bytes < PARALLEL_COPY_MIN {
            1
        } else {
            (self.bytes / COPY_PART).clamp(1, COPY_THREADS.min(cores))
        };
        let next = std::sync::atomic::AtomicUsize::new(0);
        let parts = &self.parts;
        let work = || loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(p) = parts.get(i) else { return };
            // SAFETY: each part is taken once; its ranges are valid and
            // disjoint from every other part's destination (`add`).
            unsafe { std::ptr::copy_nonoverlapping(p.src, p.dst, p.len) };
        };
        if threads < 2 {
            work();
            return;
        }
        std::thread::scope(|s| {
            for _ in 1..threads {
                let spawned = std::thread::Builder::new()
                    .name("computeq-copy".into())
                    .spawn_scoped(s, work);
                if spawned.is_err() {
                    break;
                }
            }
            work();
        });
    }
}

/// `dst.copy_from_slice(src)`, split across threads when large.
pub(crate) fn copy_host(dst: &mut [u8], src: &[u8]) {
    let mut c = HostCopies::default();
    c.add(dst, src);
    c.run();
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
                copy_host(std::slice::from_raw_parts_mut(pinned, piece.len()), piece);
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
            copy_host(piece, unsafe {
                std::slice::from_raw_parts(pinned, piece.len())
            });
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
        let mut pieces = Vec::with_capacity(len.div_ceil(PIECE_BYTES));
        let mut k = 0;
        while k * PIECE_BYTES < len {
            let n = PIECE_BYTES.min(len - k * PIECE_BYTES);
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
            // SAFETY: the piece holds PIECE_BYTES >= n bytes and is idle
            // (cached pieces come back only from finished downloads, after
            // their event completed). The device writes it until `done`
            // completes; until then the piece lives in `pieces`, then in
            // the `PendingDownload`, whose drop waits for `done`. The
            // source range is inside the buffer (checked above).
            let queued = unsafe {
                let host = std::slice::from_raw_parts_mut(piece.ptr, n);
                result::memcpy_dtoh_async(host, src.ptr + (offset + k * PIECE_BYTES) as u64, stream)
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
        let mut copies = HostCopies::default();
        for (piece, chunk) in pieces.iter().zip(out.chunks_mut(PIECE_BYTES)) {
            // SAFETY: the copy into the piece is complete (`done` was
            // recorded after it on the same stream) and wrote at least
            // `chunk.len()` bytes of it; the pieces live until `run` returns.
            copies.add(chunk, unsafe {
                std::slice::from_raw_parts(piece.ptr, chunk.len())
            });
        }
        copies.run();
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

#[cfg(test)]
mod tests {
    use super::{copy_host, HostCopies, COPY_PART, PARALLEL_COPY_MIN};

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn split_host_copies_copy_every_byte_once() {
        for n in [
            0,
            1,
            COPY_PART - 1,
            COPY_PART + 1,
            PARALLEL_COPY_MIN - 1,
            PARALLEL_COPY_MIN,
            5 * COPY_PART + 3,
            9 * COPY_PART,
        ] {
            let src = bytes(n, 7);
            let mut dst = vec![0xAA; n];
            copy_host(&mut dst, &src);
            assert!(dst == src, "a copy of {n} bytes");
        }
        // Several copies run together, of uneven sizes, into one
        // destination's disjoint ranges.
        let srcs: Vec<Vec<u8>> = [3 * COPY_PART + 5, 17, 4 * COPY_PART]
            .iter()
            .enumerate()
            .map(|(k, &n)| bytes(n, k as u8))
            .collect();
        let mut dst = vec![0u8; srcs.iter().map(Vec::len).sum::<usize>() + 1];
        let mut copies = HostCopies::default();
        let mut rest = &mut dst[..];
        for s in &srcs {
            let (head, tail) = rest.split_at_mut(s.len());
            copies.add(head, s);
            rest = tail;
        }
        copies.run();
        assert!(dst[..dst.len() - 1] == srcs.concat()[..]);
        assert_eq!(dst[dst.len() - 1], 0, "nothing written past the ranges");
    }
}
