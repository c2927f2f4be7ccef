//! Error scopes around one run's device work, so that every error wgpu
//! reports is charged to the run that caused it.
//!
//! wgpu 30 keeps error scopes per thread, and a run (or an upload, or a
//! download) never leaves the thread that started it: errors of two runs
//! on two threads land in two different scopes, whatever the timing. The
//! device's loss is different: it ends every run under way on the device,
//! so each of them fails with it, and the backend opens a new device for
//! later runs.

use super::device::Gpu;
use crate::backend::{BackendError, BackendKind, Phase};

/// Runs `work` inside out-of-memory, internal and validation scopes of
/// this thread; an error any of them captured, or the device's loss,
/// fails the run even when `work` itself returned a value. An
/// out-of-memory error is marked as such, so the run is retried in
/// smaller chunks.
pub(crate) fn scoped<T>(
    gpu: &Gpu,
    phase: Phase,
    work: impl FnOnce() -> Result<T, BackendError>,
) -> Result<T, BackendError> {
    // Popped in reverse order (`[validation, internal, oom]` below; on a
    // panic, the guards' drops do the same).
    let oom = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = gpu.device.push_error_scope(wgpu::ErrorFilter::Internal);
    let validation = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let result = work();
    let captured: Vec<wgpu::Error> = [validation, internal, oom]
        .into_iter()
        .filter_map(|scope| pollster::block_on(scope.pop()))
        .collect();
    if let Some(lost) = gpu.lost_message() {
        return Err(BackendError::new(BackendKind::Wgpu, phase, lost));
    }
    if captured.is_empty() {
        return result;
    }
    let text = captured
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    let out_of_memory = captured
        .iter()
        .any(|e| matches!(e, wgpu::Error::OutOfMemory { .. }));
    Err(match result {
        // The run's own error came first; what the device reported is
        // context.
        Err(mut e) => {
            e.message = format!("{} (the device also reported: {text})", e.message).into();
            e.out_of_memory |= out_of_memory;
            e
        }
        Ok(_) => {
            let mut e = BackendError::new(
                BackendKind::Wgpu,
                phase,
                format!("the device reported: {text}"),
            );
            e.out_of_memory = out_of_memory;
            e
        }
    })
}
