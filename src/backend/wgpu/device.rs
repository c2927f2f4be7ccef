//! The wgpu instance, adapter and device of one backend object, created
//! lazily on first use, with the features and limits the kernels may use,
//! and what the device reports outside any run: its loss, and errors no
//! run's scope captured.

use crate::codegen::Caps;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// An opened device and what it offers.
pub(crate) struct Gpu {
    /// Distinguishes devices (artifacts hold pipelines of one device, and
    /// a device opened again after a loss is another one).
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
    /// Set by the device-lost callback: every run under way on the device
    /// fails with it, and the backend opens a new device for later runs.
    lost: Arc<Lost>,
}

/// The device's loss, as its callback reports it.
#[derive(Default)]
struct Lost {
    flag: AtomicBool,
    message: Mutex<Option<String>>,
}

/// What a device is opened with (from
/// `Config`'s `wgpu_*` settings).
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

/// The facts about a device that decide which plans it can run, kept
/// between processes (in the device record of the calibration file) so
/// that a later process can judge a plan without opening the device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeviceFacts {
    pub workgroup_size: u32,
    pub items_per_thread: u32,
    pub max_groups: u32,
    pub subgroups: bool,
    pub int64: bool,
    pub f64: bool,
    /// `max_compute_workgroup_storage_size`.
    pub workgroup_storage: u32,
    /// `max_storage_buffers_per_shader_stage`.
    pub storage_buffers: u32,
}

impl DeviceFacts {
    pub fn caps(&self) -> Caps {
        Caps {
            workgroup_size: self.workgroup_size,
            items_per_thread: self.items_per_thread,
            max_groups: self.max_groups,
            subgroups: self.subgroups,
            int64: self.int64,
            f64: self.f64,
        }
    }

    /// Whether the facts describe a device the lowering can use at all
    /// (a record read from disk is checked before it is trusted).
    pub fn plausible(&self) -> bool {
        self.workgroup_size.is_power_of_two()
            && (1..=1024).contains(&self.workgroup_size)
            && (1..=64).contains(&self.items_per_thread)
            && self.max_groups >= 1
    }
}

/// The wgpu instance for `backends`.
fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    #[cfg(target_os = "linux")]
    if backends & !(wgpu::Backends::METAL | wgpu::Backends::DX12 | wgpu::Backends::BROWSER_WEBGPU)
        == wgpu::Backends::VULKAN
        && headless()
    {
        if let Some(instance) = headless_vulkan(&desc) {
            return instance;
        }
    }
    wgpu::Instance::new(desc)
}

/// Neither a Wayland nor an X display in the environment.
#[cfg(target_os = "linux")]
fn headless() -> bool {
    ["WAYLAND_DISPLAY", "WAYLAND_SOCKET", "DISPLAY"]
        .iter()
        .all(|v| std::env::var_os(v).is_none_or(|s| s.is_empty()))
}

/// A Vulkan instance without the window-system surface extensions, which
/// computeq never uses. With them, Mesa's device-select layer connects to
/// the Wayland and X servers while wgpu enumerates adapters, and on a
/// headless machine libwayland prints `error: XDG_RUNTIME_DIR is invalid or
/// not set in the environment.` to stderr, twice per instance. `None` when
/// Vulkan cannot be set up this way (the caller then makes a plain one).
#[cfg(target_os = "linux")]
fn headless_vulkan(desc: &wgpu::InstanceDescriptor) -> Option<wgpu::Instance> {
    use wgpu::hal;
    const WINDOW_SYSTEMS: [&std::ffi::CStr; 3] = [
        c"VK_KHR_wayland_surface",
        c"VK_KHR_xcb_surface",
        c"VK_KHR_xlib_surface",
    ];
    let hal_desc = hal::InstanceDescriptor {
        name: "computeq",
        flags: desc.flags,
        memory_budget_thresholds: desc.memory_budget_thresholds,
        backend_options: desc.backend_options.clone(),
        telemetry: None,
        display: None,
    };
    let without_surfaces: Box<hal::vulkan::CreateInstanceCallback<'_>> = Box::new(|args| {
        args.extensions.retain(|e| !WINDOW_SYSTEMS.contains(e));
    });
    // SAFETY: the descriptor is the one `wgpu::Instance::new` would pass
    // on. The callback only leaves out the three surface extensions, which
    // wgpu-hal 30 reads in one place, `create_surface_from_{wayland,xcb,
    // xlib}`, where their absence is an error value; computeq creates no
    // surface.
    let raw =
        unsafe { hal::vulkan::Instance::init_with_callback(&hal_desc, Some(without_surfaces)) }
            .ok()?;
    // SAFETY: a valid Vulkan instance, just created, which wgpu owns from
    // here on.
    Some(unsafe { wgpu::Instance::from_hal::<hal::api::Vulkan>(raw) })
}

/// Which adapter [`Gpu::open`] would pick here, as the key under which the
/// device it opened is remembered: `WGPU_BACKEND` and
/// `WGPU_POWER_PREF` decide it.
pub(crate) fn selection_key() -> String {
    format!(
        "wgpu/{}/{}",
        std::env::var("WGPU_BACKEND").unwrap_or_else(|_| "default".into()),
        std::env::var("WGPU_POWER_PREF").unwrap_or_else(|_| "default".into())
    )
}

impl Gpu {
    /// Opens the first adapter of the backends allowed by `WGPU_BACKEND`.
    /// Without it, Vulkan, Metal and DX12 are tried first and GL only when
    /// none of them has an adapter (GL offers no `f64`, 64-bit integers or
    /// subgroups). `Err` carries the reason when there is no adapter.
    pub fn open(options: Options) -> Result<Gpu, String> {
        match wgpu::Backends::from_env() {
            Some(backends) => Gpu::open_on(backends, options),
            None => Gpu::open_on(wgpu::Backends::PRIMARY, options).or_else(|primary| {
                Gpu::open_on(wgpu::Backends::SECONDARY, options)
                    .map_err(|secondary| format!("{primary}; GL: {secondary}"))
            }),
        }
    }

    fn open_on(backends: wgpu::Backends, options: Options) -> Result<Gpu, String> {
        let instance = instance(backends);
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
        // Every run pushes error scopes around its own work (see
        // `scope::scoped`), so an error reaches this handler only when no
        // run caused it; it cannot be charged to any, so it is logged.
        device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
            tracing::warn!(error = %e, "computeq.wgpu.uncaptured_error");
        }));
        let lost = Arc::new(Lost::default());
        let sink = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            *sink.message.lock() = Some(format!("device lost ({reason:?}): {msg}"));
            sink.flag.store(true, Ordering::Release);
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
            lost,
        })
    }

    /// Largest byte size of one storage binding.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// A stable identity of the device for the calibration cache: backend,
    /// adapter, driver and its version.
    pub fn device_id(&self) -> String {
        format!(
            "wgpu/{:?}/{}/{} {}",
            self.info.backend, self.info.name, self.info.driver, self.info.driver_info
        )
    }

    /// What decides which plans the device can run.
    pub fn facts(&self) -> DeviceFacts {
        DeviceFacts {
            workgroup_size: self.caps.workgroup_size,
            items_per_thread: self.caps.items_per_thread,
            max_groups: self.caps.max_groups,
            subgroups: self.caps.subgroups,
            int64: self.caps.int64,
            f64: self.caps.f64,
            workgroup_storage: self.limits.max_compute_workgroup_storage_size,
            storage_buffers: self.limits.max_storage_buffers_per_shader_stage,
        }
    }

    /// Whether the device was lost (destroyed, reset, driver gone).
    pub fn is_lost(&self) -> bool {
        self.lost.flag.load(Ordering::Acquire)
    }

    /// The loss message, once the device is lost.
    pub fn lost_message(&self) -> Option<String> {
        if !self.is_lost() {
            return None;
        }
        Some(
            self.lost
                .message
                .lock()
                .clone()
                .unwrap_or_else(|| "device lost".into()),
        )
    }
}
