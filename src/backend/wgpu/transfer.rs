//! Host ↔ device copies and the device representation of columns: every
//! dtype as its own bytes, except `bool`, which travels as 32-bit words
//! (WGSL has no one-byte storage type).

use super::buffers::{Pool, PooledBuffer, READBACK, STORAGE};
use super::device::Gpu;
use super::fault::FaultPlan;
use crate::backend::{BackendError, BackendKind, Phase};
use crate::expr::DType;
use crate::types::ColumnRef;

/// Bytes per element on the device.
pub(crate) fn device_size(t: DType) -> usize {
    t.size().max(4)
}

/// Copies a host column into a new storage buffer; returns it and the
/// bytes moved.
pub(crate) fn upload(
    gpu: &Gpu,
    pool: &Pool,
    faults: &FaultPlan,
    c: ColumnRef<'_>,
    owned: bool,
) -> Result<(PooledBuffer, u64), BackendError> {
    faults.check(Phase::Upload)?;
    let _span =
        tracing::debug_span!("computeq.transfer", direction = "in", elements = c.len()).entered();
    let bytes = c.device_bytes();
    let buf = pool.get(
        gpu,
        faults,
        Phase::Upload,
        bytes.len() as u64,
        STORAGE,
        owned,
    )?;
    if !bytes.is_empty() {
        gpu.queue.write_buffer(buf.buffer(), 0, &bytes);
    }
    Ok((buf, bytes.len() as u64))
}

/// Copies `size` bytes at `offset` of `src` to the host (submits and waits).
pub(crate) fn download(
    gpu: &Gpu,
    pool: &Pool,
    faults: &FaultPlan,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>, BackendError> {
    Ok(download_many(gpu, pool, faults, &[(src, offset, size)])?.remove(0))
}

/// Copies several buffer ranges `(buffer, offset, size)` to the host with
/// one submission and one wait.
pub(crate) fn download_many(
    gpu: &Gpu,
    pool: &Pool,
    faults: &FaultPlan,
    ranges: &[(&wgpu::Buffer, u64, u64)],
) -> Result<Vec<Vec<u8>>, BackendError> {
    let _span = tracing::debug_span!(
        "computeq.transfer",
        direction = "out",
        bytes = ranges.iter().map(|r| r.2).sum::<u64>()
    )
    .entered();
    let mut enc = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("readback"),
        });
    let pending = encode_readback(gpu, pool, faults, &mut enc, ranges)?;
    gpu.queue.submit([enc.finish()]);
    finish_readback(gpu, pending)
}

/// A readback recorded into a command encoder: read it with
/// [`finish_readback`] once the encoder is submitted.
pub(crate) struct PendingReadback {
    staging: Option<PooledBuffer>,
    /// Offset and size of each range in the staging buffer.
    parts: Vec<(u64, u64)>,
    total: u64,
}

/// Records copies of `ranges` into one staging buffer, so a readback can
/// ride in the same submission as the kernels that produce the data.
pub(crate) fn encode_readback(
    gpu: &Gpu,
    pool: &Pool,
    faults: &FaultPlan,
    enc: &mut wgpu::CommandEncoder,
    ranges: &[(&wgpu::Buffer, u64, u64)],
) -> Result<PendingReadback, BackendError> {
    faults.check(Phase::Download)?;
    let mut parts = Vec::with_capacity(ranges.len());
    let mut total = 0u64;
    for &(_, _, size) in ranges {
        parts.push((total, size));
        total += size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    }
    if total == 0 {
        return Ok(PendingReadback {
            staging: None,
            parts,
            total,
        });
    }
    let staging = pool.get(gpu, faults, Phase::Download, total, READBACK, false)?;
    for (&(src, offset, size), &(dst, _)) in ranges.iter().zip(&parts) {
        if size > 0 {
            let padded = size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
            enc.copy_buffer_to_buffer(src, offset, staging.buffer(), dst, padded);
        }
    }
    Ok(PendingReadback {
        staging: Some(staging),
        parts,
        total,
    })
}

/// Waits for a submitted readback and returns the bytes of each range.
pub(crate) fn finish_readback(
    gpu: &Gpu,
    pending: PendingReadback,
) -> Result<Vec<Vec<u8>>, BackendError> {
    let Some(staging) = pending.staging else {
        return Ok(pending.parts.iter().map(|_| Vec::new()).collect());
    };
    let total = pending.total;
    let (tx, rx) = std::sync::mpsc::channel();
    staging
        .buffer()
        .map_async(wgpu::MapMode::Read, 0..total, move |r| {
            let _ = tx.send(r);
        });
    let fail = |m: String| BackendError::new(BackendKind::Wgpu, Phase::Download, m);
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| fail(format!("waiting for the readback: {e}")))?;
    if let Some(e) = gpu.lost_message() {
        return Err(fail(e));
    }
    rx.recv()
        .map_err(|_| fail("the map callback never ran".into()))?
        .map_err(|e| fail(format!("mapping the readback buffer: {e}")))?;
    let out = {
        let view = staging
            .buffer()
            .get_mapped_range(0..total)
            .map_err(|e| fail(format!("reading the mapped buffer: {e}")))?;
        pending
            .parts
            .iter()
            .map(|&(at, size)| view[at as usize..(at + size) as usize].to_vec())
            .collect()
    };
    staging.buffer().unmap();
    Ok(out)
}
