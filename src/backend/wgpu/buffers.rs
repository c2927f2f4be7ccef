//! A pool of device buffers by usage and power-of-two size class.
//!
//! Buffers are handed out as [`PooledBuffer`] guards that go back to the
//! pool when dropped, on success and on every error path alike; the number
//! checked out is observable ([`Pool::live`]) so tests can prove nothing
//! leaks. Device-resident columns take buffers that are destroyed on drop
//! instead of pooled, so dropping a `DeviceArray` really frees its memory.
//! Free buffers belong to one device: when a lost device is replaced, those
//! of the old one are dropped, and buffers of it returned later are
//! destroyed rather than pooled.

use super::device::Gpu;
use super::fault::FaultPlan;
use crate::backend::{BackendError, BackendKind, Phase};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Most bytes kept in free lists; beyond it returned buffers are destroyed.
const MAX_POOLED_BYTES: u64 = 256 << 20;
/// Smallest buffer handed out (binding sizes must be non-zero).
const MIN_SIZE: u64 = 256;

/// A free list's key: device id, size class, usage bits.
type Key = (u64, u64, u32);

#[derive(Default)]
pub(crate) struct PoolInner {
    free: Mutex<HashMap<Key, Vec<wgpu::Buffer>>>,
    pooled_bytes: Mutex<u64>,
    live: AtomicUsize,
    /// The device whose buffers are pooled.
    device: AtomicU64,
}

/// The pool of one device.
#[derive(Clone, Default)]
pub(crate) struct Pool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("live", &self.live()).finish()
    }
}

/// A buffer checked out of the pool.
pub(crate) struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    key: Key,
    pool: Arc<PoolInner>,
    /// Destroy on drop instead of returning to the pool.
    owned: bool,
}

impl std::fmt::Debug for PooledBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PooledBuffer({} bytes)", self.key.1)
    }
}

impl PooledBuffer {
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }

    /// Allocated size in bytes.
    pub fn size(&self) -> u64 {
        self.key.1
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        self.pool.live.fetch_sub(1, Ordering::Relaxed);
        // The bytes are reserved under one lock and the buffer listed under
        // the other: one lock at a time, and no device call under either. A
        // buffer of a device since replaced is never pooled.
        let other_device = self.key.0 != self.pool.device.load(Ordering::Relaxed);
        let kept = !self.owned && !other_device && {
            let mut pooled = self.pool.pooled_bytes.lock();
            let fits = *pooled + self.key.1 <= MAX_POOLED_BYTES;
            if fits {
                *pooled += self.key.1;
            }
            fits
        };
        if !kept {
            buffer.destroy();
            return;
        }
        self.pool
            .free
            .lock()
            .entry(self.key)
            .or_default()
            .push(buffer);
    }
}

impl Pool {
    /// Buffers currently checked out (including device-resident columns).
    pub fn live(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    /// Pools the buffers of device `id` from now on, dropping the free
    /// buffers of any other (a lost one).
    pub fn set_device(&self, id: u64) {
        self.inner.device.store(id, Ordering::Relaxed);
        let stale: Vec<wgpu::Buffer> = {
            let mut free = self.inner.free.lock();
            let keys: Vec<Key> = free.keys().filter(|k| k.0 != id).copied().collect();
            keys.into_iter()
                .filter_map(|k| free.remove(&k))
                .flatten()
                .collect()
        };
        let bytes: u64 = stale.iter().map(|b| b.size()).sum();
        {
            let mut pooled = self.inner.pooled_bytes.lock();
            *pooled = pooled.saturating_sub(bytes);
        }
        for b in stale {
            b.destroy();
        }
    }

    /// A buffer of at least `size` bytes with `usage`. `owned` buffers are
    /// sized exactly and destroyed on drop. Allocation runs in an
    /// out-of-memory error scope so a full device is an error value.
    pub fn get(
        &self,
        gpu: &Gpu,
        faults: &FaultPlan,
        phase: Phase,
        size: u64,
        usage: wgpu::BufferUsages,
        owned: bool,
    ) -> Result<PooledBuffer, BackendError> {
        faults.check_alloc(phase)?;
        let size = size.max(MIN_SIZE);
        let class = if owned {
            size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
        } else {
            size.next_power_of_two()
        };
        let key = (gpu.id, class, usage.bits());
        let reused = if owned {
            None
        } else {
            self.inner.free.lock().get_mut(&key).and_then(Vec::pop)
        };
        let buffer = match reused {
            Some(b) => {
                *self.inner.pooled_bytes.lock() -= class;
                b
            }
            None => {
                if class > gpu.limits.max_buffer_size {
                    let mut e = BackendError::new(
                        BackendKind::Wgpu,
                        phase,
                        format!(
                            "buffer of {class} bytes exceeds the device's limit of {}",
                            gpu.limits.max_buffer_size
                        ),
                    );
                    e.out_of_memory = true;
                    return Err(e);
                }
                let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let b = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("computeq"),
                    size: class,
                    usage,
                    mapped_at_creation: false,
                });
                if let Some(err) = pollster::block_on(scope.pop()) {
                    b.destroy();
                    let mut e = BackendError::new(
                        BackendKind::Wgpu,
                        phase,
                        format!("allocating {class} bytes: {err}"),
                    );
                    e.out_of_memory = true;
                    return Err(e);
                }
                b
            }
        };
        self.inner.live.fetch_add(1, Ordering::Relaxed);
        Ok(PooledBuffer {
            buffer: Some(buffer),
            key,
            pool: self.inner.clone(),
            owned,
        })
    }
}

/// Usage of buffers kernels read and write.
pub(crate) const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);
/// Usage of uniform blocks.
pub(crate) const UNIFORM: wgpu::BufferUsages =
    wgpu::BufferUsages::UNIFORM.union(wgpu::BufferUsages::COPY_DST);
/// Usage of readback staging buffers.
pub(crate) const READBACK: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);
/// Usage of the buffers timestamp queries resolve into.
pub(crate) const RESOLVE: wgpu::BufferUsages =
    wgpu::BufferUsages::QUERY_RESOLVE.union(wgpu::BufferUsages::COPY_SRC);
