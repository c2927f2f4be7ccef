//! Host ↔ device copies and the device representation of columns: every
//! dtype as its own bytes, except `bool`, which travels as 32-bit words
//! (WGSL has no one-byte storage type).

use super::buffers::{Pool, PooledBuffer, READBACK, STORAGE};
use super::device::Gpu;
use super::fault::FaultPlan;
use crate::backend::{BackendError, BackendKind, Phase};
use crate::expr::DType;
use crate::runtime::column::{Column, ColumnRef};

/// Bytes per element on the device.
pub(crate) fn device_size(t: DType) -> usize {
    t.size().max(4)
}

/// The device bytes of a host column slice.
pub(crate) fn to_device_bytes(c: ColumnRef<'_>) -> std::borrow::Cow<'_, [u8]> {
    match c {
        ColumnRef::Bool(v) => v
            .iter()
            .flat_map(|&b| (b as u32).to_le_bytes())
            .collect::<Vec<u8>>()
            .into(),
        other => other.as_bytes().into(),
    }
}

/// A host column from device bytes.
pub(crate) fn from_device_bytes(t: DType, bytes: &[u8]) -> Column {
    fn words<T: Copy, const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        b.chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunk size")))
            .collect()
    }
    match t {
        DType::Bool => Column::Bool(words(bytes, |w: [u8; 4]| u32::from_le_bytes(w) != 0)),
        DType::I32 => Column::I32(words(bytes, i32::from_le_bytes)),
        DType::U32 => Column::U32(words(bytes, u32::from_le_bytes)),
        DType::F32 => Column::F32(words(bytes, f32::from_le_bytes)),
        DType::I64 => Column::I64(words(bytes, i64::from_le_bytes)),
        DType::U64 => Column::U64(words(bytes, u64::from_le_bytes)),
        DType::F64 => Column::F64(words(bytes, f64::from_le_bytes)),
    }
}

/// A slice of a host column.
pub(crate) fn slice(c: ColumnRef<'_>, start: usize, end: usize) -> ColumnRef<'_> {
    match c {
        ColumnRef::Bool(v) => ColumnRef::Bool(&v[start..end]),
        ColumnRef::I32(v) => ColumnRef::I32(&v[start..end]),
        ColumnRef::U32(v) => ColumnRef::U32(&v[start..end]),
        ColumnRef::I64(v) => ColumnRef::I64(&v[start..end]),
        ColumnRef::U64(v) => ColumnRef::U64(&v[start..end]),
        ColumnRef::F32(v) => ColumnRef::F32(&v[start..end]),
        ColumnRef::F64(v) => ColumnRef::F64(&v[start..end]),
    }
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
    let bytes = to_device_bytes(c);
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
    faults.check(Phase::Download)?;
    let mut at = Vec::with_capacity(ranges.len());
    let mut total = 0u64;
    for &(_, _, size) in ranges {
        at.push(total);
        total += size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    }
    if total == 0 {
        return Ok(ranges.iter().map(|_| Vec::new()).collect());
    }
    let staging = pool.get(gpu, faults, Phase::Download, total, READBACK, false)?;
    let mut enc = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("readback"),
        });
    for (&(src, offset, size), &dst) in ranges.iter().zip(&at) {
        if size > 0 {
            let padded = size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
            enc.copy_buffer_to_buffer(src, offset, staging.buffer(), dst, padded);
        }
    }
    gpu.queue.submit([enc.finish()]);
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
    if let Some(e) = gpu.take_uncaptured() {
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
        ranges
            .iter()
            .zip(&at)
            .map(|(&(_, _, size), &dst)| view[dst as usize..(dst + size) as usize].to_vec())
            .collect()
    };
    staging.buffer().unmap();
    Ok(out)
}
