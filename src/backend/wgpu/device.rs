//! The wgpu instance, adapter and device of one backend object, created
//! lazily on first use, with the features and limits the kernels may use.

use crate::codegen::Caps;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// An opened device and what it offers.
pub(crate) struct Gpu {
    /// Distinguishes devices (artifacts hold pipelines of one device).
    pub id: u64,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub features: wgpu::Features,
    pub limits: wgpu::Limits,
    /// What the lowering may use.
    pub caps: Caps,
    /// Timestamp queries around compute passes, when the adapter has
    /// `TIMESTAMP_QUERY` and [`Options::timestamps`] asks for them.
    pub timestamps: Option<Timestamps>,
    /// Errors no scope captured (device loss, late validation errors); the
    /// executor turns them into error values after each submission.
    pub uncaptured: Arc<Mutex<Vec<String>>>,
}

/// What a device is opened with (from
/// [`Config`](crate::runtime::Config)'s `wgpu_*` settings).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Options {
    /// Let kernels use subgroup operations when the adapter has them.
    pub subgroups: bool,
    /// Request `TIMESTAMP_QUERY` when the adapter has it.
    pub timestamps: bool,
}

/// The query set of a pass's begin and end timestamps. Shared by the runs
/// of the device: each run writes and resolves it inside one command
/// buffer, and the queue runs command buffers in order.
pub(crate) struct Timestamps {
    pub set: wgpu::QuerySet,
    /// Nanoseconds per tick (`Queue::get_timestamp_period`).
    pub period: f32,
}

/// Bytes of one resolved begin/end pair.
pub(crate) const TIMESTAMP_BYTES: u64 = 2 * wgpu::QUERY_SIZE as u64;

impl Timestamps {
    /// The pass time from resolved begin/end ticks; `None` when the device
    /// wrote nothing usable (end not after begin).
    pub fn elapsed(&self, bytes: &[u8]) -> Option<std::time::Duration> {
        let begin = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        let end = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
        (end > begin).then(|| {
            std::time::Duration::from_nanos(((end - begin) as f64 * self.period as f64) as u64)
        })
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Opens the first adapter of the backends allowed by `WGPU_BACKEND`
    /// (all by default). `Err` carries the reason when there is none.
    pub fn open(options: Options) -> Result<Gpu, String> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
        let instance = wgpu::Instance::new(desc);
        let adapter =
            pollster::block_on(
                instance.request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::from_env()
                        .unwrap_or(wgpu::PowerPreference::HighPerformance),
                    force_fallback_adapter: false,
                    compatible_surface: None,
                    apply_limit_buckets: false,
                }),
            )
            .map_err(|e| format!("no wgpu adapter: {e}"))?;
        let mut wanted =
            wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64 | wgpu::Features::SUBGROUP;
        if options.timestamps {
            wanted |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("computeq"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| format!("wgpu device request failed: {e}"))?;
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().push(e.to_string());
        }));
        let lost = uncaptured.clone();
        device.set_device_lost_callback(move |reason, msg| {
            lost.lock().push(format!("device lost ({reason:?}): {msg}"));
        });
        let workgroup_size = [256u32, 128, 64]
            .into_iter()
            .find(|&w| {
                w <= limits.max_compute_invocations_per_workgroup
                    && w <= limits.max_compute_workgroup_size_x
            })
            .unwrap_or(64);
        let caps = Caps {
            workgroup_size,
            items_per_thread: 4,
            max_groups: 1024.min(limits.max_compute_workgroups_per_dimension),
            subgroups: features.contains(wgpu::Features::SUBGROUP) && options.subgroups,
            int64: features.contains(wgpu::Features::SHADER_INT64),
            // The NaN test of an f64 reads its bits as a u64.
            f64: features.contains(wgpu::Features::SHADER_F64)
                && features.contains(wgpu::Features::SHADER_INT64),
        };
        let timestamps = features
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| Timestamps {
                set: device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("computeq.timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: 2,
                }),
                period: queue.get_timestamp_period(),
            });
        Ok(Gpu {
            id: NEXT_DEVICE.fetch_add(1, Ordering::Relaxed),
            timestamps,
            device,
            queue,
            info: adapter.get_info(),
            features,
            limits,
            caps,
            uncaptured,
        })
    }

    /// Largest byte size of one storage binding.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Takes the errors reported outside any scope since the last call.
    pub fn take_uncaptured(&self) -> Option<String> {
        let mut v = self.uncaptured.lock();
        if v.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut *v).join("; "))
        }
    }
}
