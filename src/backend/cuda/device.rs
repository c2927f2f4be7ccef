//! The CUDA driver, through cudarc's raw `result`/`sys` layer: one context
//! (the device's primary context, retained lazily by the backend), three
//! streams (compute, copy for uploads and synchronous downloads, download
//! for the downloads that overlap compute), a memory pool, pinned staging
//! buffers, a bounded cache of pinned download pieces and the module cache.
//!
//! Ordering between the streams is explicit and per buffer: an upload
//! records a `ready` event that launches and downloads wait for; a launch
//! records a `last_use` event that later uploads into or downloads from
//! the buffer wait for; a started download records a `last_read` event
//! that later launches and uploads (which may write the buffer) wait for.
//! Work on different buffers therefore overlaps (the upload of a chunk and
//! the download of the previous chunk's results with the kernels of the
//! current one), and nothing else does.
//!
//! Every function here runs with the context bound to the calling thread
//! (`Gpu::bind`), under the backend's lock.

use crate::backend::{BackendError, BackendKind, Phase};
use crate::codegen::ptx::PtxModule;
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::{sys, CudaContext};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Bytes of one of the two pinned staging buffers of uploads and
/// synchronous downloads; those transfers move in pieces this big. Large,
/// so that the threads splitting the host's copy into a buffer
/// ([`HostCopies`](super::exec::HostCopies)) are started a few times per
/// transfer, not per few MiB.
pub(crate) const STAGING_BYTES: usize = 32 << 20;

/// Bytes of one pinned piece of a download that overlaps compute.
pub(crate) const PIECE_BYTES: usize = 8 << 20;

/// Most bytes the pool keeps cached before freeing returned buffers.
const POOL_CACHE_BYTES: usize = 256 << 20;

/// Pinned download pieces (of [`PIECE_BYTES`] each) kept for reuse:
/// 64 MiB of page-locked memory at most. A started download larger than
/// the cache allocates more pieces and frees them when it finishes.
pub(crate) const DOWNLOAD_PIECES_CACHED: usize = 8;

pub(crate) fn driver_error(phase: Phase, what: &str, e: DriverError) -> BackendError {
    let mut err = BackendError::new(BackendKind::Cuda, phase, format!("{what}: {e}"));
    err.out_of_memory = e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    err
}

/// An event, destroyed on drop.
#[derive(Debug)]
pub(crate) struct Event {
    raw: sys::CUevent,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUevent is a handle usable from any thread with the context bound.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Event, DriverError> {
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    pub(crate) fn record(&self, stream: sys::CUstream) -> Result<(), DriverError> {
        // SAFETY: both handles are live and belong to this context.
        unsafe { result::event::record(self.raw, stream) }
    }

    pub(crate) fn wait_on(&self, stream: sys::CUstream) -> Result<(), DriverError> {
        // SAFETY: as above.
        unsafe {
            result::stream::wait_event(
                stream,
                self.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
    }

    pub(crate) fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: as above.
        unsafe { result::event::synchronize(self.raw) }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the event is no longer referenced.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

/// A stream, destroyed on drop.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) raw: sys::CUstream,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUstream is a handle usable from any thread with the context bound.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: no work is enqueued after the owner is dropped.
            unsafe {
                let _ = result::stream::synchronize(self.raw);
                let _ = result::stream::destroy(self.raw);
            }
        }
    }
}

/// Cached device allocations by size class (powers of two).
#[derive(Debug)]
pub(crate) struct Pool {
    ctx: Arc<CudaContext>,
    free: Mutex<HashMap<usize, Vec<sys::CUdeviceptr>>>,
}

// SAFETY: device pointers are plain integers.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl Pool {
    fn take(&self, class: usize) -> Option<sys::CUdeviceptr> {
        self.free.lock().get_mut(&class).and_then(Vec::pop)
    }

    fn give(&self, class: usize, ptr: sys::CUdeviceptr) {
        let kept = {
            let mut free = self.free.lock();
            let cached: usize = free.iter().map(|(c, v)| c * v.len()).sum();
            let fits = cached + class <= POOL_CACHE_BYTES;
            if fits {
                free.entry(class).or_default().push(ptr);
            }
            fits
        };
        // Freed with the list's lock released: a driver call.
        if !kept && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the buffer's last use has been waited for by its owner.
            let _ = unsafe { result::free_sync(ptr) };
        }
    }

    /// Frees every cached allocation (before retrying an allocation that
    /// ran out of memory).
    pub(crate) fn trim(&self) {
        let all: Vec<_> = self.free.lock().drain().flat_map(|(_, v)| v).collect();
        if self.ctx.bind_to_thread().is_ok() {
            for p in all {
                // SAFETY: cached buffers are unused.
                let _ = unsafe { result::free_sync(p) };
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.trim();
    }
}

/// A device allocation from the pool, returned to it on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
    class: usize,
    pool: Arc<Pool>,
    /// Signalled when the last upload into the buffer is complete.
    pub(crate) ready: Mutex<Option<Arc<Event>>>,
    /// Signalled when the last kernel using the buffer is complete.
    pub(crate) last_use: Mutex<Option<Arc<Event>>>,
    /// Signalled when the last started download from the buffer (on the
    /// download stream) is complete.
    pub(crate) last_read: Mutex<Option<Arc<Event>>>,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // The next owner must not reuse the memory while a kernel still
        // uses it, an upload into it or a download from it (on the other
        // streams) is in flight, as after a run that failed halfway.
        // One cell locked at a time, none while waiting (a `for` keeps
        // its head's guards).
        let used = self.last_use.lock().take();
        let ready = self.ready.lock().take();
        let read = self.last_read.lock().take();
        for e in [used, ready, read].into_iter().flatten() {
            let _ = e.synchronize();
        }
        self.pool.give(self.class, self.ptr);
    }
}

/// Page-locked host memory for one piece of a transfer.
#[derive(Debug)]
pub(crate) struct Staging {
    pub(crate) ptr: *mut u8,
    /// Signalled when the last transfer through this buffer is complete.
    pub(crate) done: Event,
}

// SAFETY: the pointer is owned page-locked memory, used under the lock.
unsafe impl Send for Staging {}
unsafe impl Sync for Staging {}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = self.done.synchronize();
        // SAFETY: allocated by cuMemHostAlloc and no longer in use.
        let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
    }
}

/// One page-locked piece of [`PIECE_BYTES`] for a download that overlaps
/// compute, freed on drop. Whoever drops it has made sure no copy into it
/// is in flight (or leaks it instead).
#[derive(Debug)]
pub(crate) struct Pinned {
    pub(crate) ptr: *mut u8,
    ctx: Arc<CudaContext>,
}

// SAFETY: the pointer is owned page-locked memory; it is written by the
// device only while a `PendingDownload` holding it is alive, and read by
// the host only after that download's event has completed.
unsafe impl Send for Pinned {}
unsafe impl Sync for Pinned {}

impl Pinned {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Pinned, DriverError> {
        // SAFETY: a plain page-locked allocation, freed by `Drop`.
        let ptr = unsafe { result::malloc_host(PIECE_BYTES, 0) }?;
        Ok(Pinned {
            ptr: ptr as *mut u8,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc; the owner guarantees no
            // copy into it is in flight.
            let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
        }
    }
}

/// A download in flight on the download stream: the pinned pieces it
/// copies into, in order, and the event recorded after the last piece.
#[derive(Debug)]
pub(crate) struct PendingDownload {
    pub(crate) pieces: Vec<Pinned>,
    pub(crate) len: usize,
    pub(crate) done: Arc<Event>,
}

impl Drop for PendingDownload {
    fn drop(&mut self) {
        // Not finished (a run that failed halfway): the copies may still
        // write the pieces, so wait for them before the memory is freed,
        // and leak it if even that fails.
        if !self.pieces.is_empty() && self.done.synchronize().is_err() {
            std::mem::forget(std::mem::take(&mut self.pieces));
        }
    }
}

/// A loaded module and the functions of its entries, in kernel order.
#[derive(Debug)]
pub struct Module {
    raw: sys::CUmodule,
    pub(crate) functions: Vec<sys::CUfunction>,
    ctx: Arc<CudaContext>,
}

// SAFETY: module and function handles are usable from any thread with the
// context bound.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: every launch of the module has been waited for.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// What the backend reports about its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory: usize,
}

/// The device state of one backend.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) info: DeviceInfo,
    pub(crate) compute: Stream,
    pub(crate) copy: Stream,
    /// Downloads that overlap compute ([`PendingDownload`]).
    pub(crate) download: Stream,
    pub(crate) pool: Arc<Pool>,
    pub(crate) staging: Vec<Staging>,
    pub(crate) next_staging: usize,
    /// Idle pinned download pieces, at most [`DOWNLOAD_PIECES_CACHED`].
    pub(crate) pinned: Vec<Pinned>,
    /// Loaded modules by the hash of their text, with the text (a hash
    /// collision must not run another module's kernels).
    modules: HashMap<u64, Vec<(String, Arc<Module>)>>,
}

impl Gpu {
    /// Retains device 0's primary context and creates the streams and
    /// staging buffers. The caller has checked that libcuda is present.
    pub(crate) fn open() -> Result<Gpu, String> {
        let ctx = CudaContext::new(0).map_err(|e| format!("no usable CUDA device: {e}"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
        let compute_capability = ctx.compute_capability().unwrap_or((0, 0));
        let total_memory = ctx.total_mem().unwrap_or(0);
        let stream = |ctx: &Arc<CudaContext>| -> Result<Stream, String> {
            let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
                .map_err(|e| format!("creating a stream: {e}"))?;
            Ok(Stream {
                raw,
                ctx: ctx.clone(),
            })
        };
        let compute = stream(&ctx)?;
        let copy = stream(&ctx)?;
        let download = stream(&ctx)?;
        let mut staging = Vec::new();
        for _ in 0..2 {
            // SAFETY: a plain page-locked allocation, freed by `Staging`.
            let ptr = unsafe { result::malloc_host(STAGING_BYTES, 0) }
                .map_err(|e| format!("allocating pinned memory: {e}"))?;
            staging.push(Staging {
                ptr: ptr as *mut u8,
                done: Event::new(&ctx).map_err(|e| format!("creating an event: {e}"))?,
            });
        }
        Ok(Gpu {
            pool: Arc::new(Pool {
                ctx: ctx.clone(),
                free: Mutex::new(HashMap::new()),
            }),
            ctx,
            info: DeviceInfo {
                name,
                compute_capability,
                total_memory,
            },
            compute,
            copy,
            download,
            staging,
            next_staging: 0,
            pinned: Vec::new(),
            modules: HashMap::new(),
        })
    }

    pub(crate) fn bind(&self) -> Result<(), BackendError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error(Phase::Init, "binding the CUDA context", e))
    }

    /// Allocates from the pool; on out-of-memory, trims the pool and tries
    /// once more before reporting it.
    pub(crate) fn alloc(&mut self, bytes: usize) -> Result<DeviceBuffer, BackendError> {
        let class = bytes.next_power_of_two().max(256);
        let ptr = match self.pool.take(class) {
            Some(p) => p,
            // SAFETY: a plain allocation, freed by the pool.
            None => match unsafe { result::malloc_sync(class) } {
                Ok(p) => p,
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                    self.pool.trim();
                    // SAFETY: as above.
                    unsafe { result::malloc_sync(class) }
                        .map_err(|e| driver_error(Phase::Execute, "allocating device memory", e))?
                }
                Err(e) => return Err(driver_error(Phase::Execute, "allocating device memory", e)),
            },
        };
        Ok(DeviceBuffer {
            ptr,
            bytes,
            class,
            pool: self.pool.clone(),
            ready: Mutex::new(None),
            last_use: Mutex::new(None),
            last_read: Mutex::new(None),
        })
    }

    /// The loaded module for `m`, JIT-compiling it on first use. Modules
    /// are cached by the hash of their text, which holds no captured value.
    pub(crate) fn module(&mut self, m: &PtxModule) -> Result<Arc<Module>, BackendError> {
        let mut h = rustc_hash::FxHasher::default();
        m.text.hash(&mut h);
        let key = h.finish();
        if let Some(loaded) = self
            .modules
            .get(&key)
            .and_then(|v| v.iter().find(|(text, _)| *text == m.text))
        {
            return Ok(loaded.1.clone());
        }
        let src = CString::new(m.text.as_str()).map_err(|_| {
            BackendError::new(
                BackendKind::Cuda,
                Phase::Compile,
                "PTX text holds a NUL byte",
            )
        })?;
        let mut log = vec![0u8; 16 << 10];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut raw = std::mem::MaybeUninit::uninit();
        // SAFETY: the text is NUL-terminated, the option arrays outlive the
        // call and the log buffer is as large as announced.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                raw.as_mut_ptr(),
                src.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(BackendError::new(
                BackendKind::Cuda,
                Phase::Compile,
                format!(
                    "loading the PTX module failed ({r:?}): {}",
                    String::from_utf8_lossy(&log[..end]).trim()
                ),
            ));
        }
        // SAFETY: the call succeeded.
        let raw = unsafe { raw.assume_init() };
        let mut module = Module {
            raw,
            functions: Vec::new(),
            ctx: self.ctx.clone(),
        };
        for e in &m.entries {
            let name = CString::new(e.as_str()).expect("entry names are identifiers");
            // SAFETY: the module is loaded.
            let f = unsafe { result::module::get_function(raw, name) }
                .map_err(|err| driver_error(Phase::Compile, &format!("finding entry {e}"), err))?;
            module.functions.push(f);
        }
        let module = Arc::new(module);
        self.modules
            .entry(key)
            .or_default()
            .push((m.text.clone(), module.clone()));
        Ok(module)
    }

    /// Waits for every enqueued operation; reports asynchronous faults.
    pub(crate) fn synchronize(&self) -> Result<(), BackendError> {
        // SAFETY: live streams of this context.
        unsafe {
            result::stream::synchronize(self.compute.raw)
                .map_err(|e| driver_error(Phase::Execute, "running kernels", e))?;
            result::stream::synchronize(self.copy.raw)
                .map_err(|e| driver_error(Phase::Download, "copying", e))?;
            result::stream::synchronize(self.download.raw)
                .map_err(|e| driver_error(Phase::Download, "downloading", e))?;
        }
        Ok(())
    }
}
