//! Compute pipelines, one per distinct kernel, cached by the kernel's
//! structural hash. WGSL is validated by naga first, then every shader and
//! pipeline creation runs inside error scopes, so an invalid kernel is an
//! error value, never a panic.

use super::device::Gpu;
use super::fault::FaultPlan;
use crate::backend::{BackendError, BackendKind, Phase};
use crate::codegen::wgsl::write_kernel_entry;
use crate::codegen::{Access, Kernel};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A ready pipeline and the layout of its bind group.
pub(crate) struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    /// Bind groups by the buffer ranges they bind: the pool hands the same
    /// buffers back run after run, so a cached plan rarely makes a new one.
    groups: Mutex<HashMap<BindKey, wgpu::BindGroup>>,
}

/// The `(buffer, offset, size)` of every binding, in binding order (size 0
/// binds the rest of the buffer).
pub(crate) type BindKey = smallvec::SmallVec<[(wgpu::Buffer, u64, u64); 8]>;

/// Most bind groups kept per pipeline; past it the cache starts over (a
/// group holds its buffers' handles, though not their memory once a
/// device column's buffer is destroyed).
const MAX_BIND_GROUPS: usize = 64;

impl Pipeline {
    /// The bind group of `key`, made on first use.
    pub fn bind_group(&self, device: &wgpu::Device, key: &BindKey) -> wgpu::BindGroup {
        if let Some(g) = self.groups.lock().get(key) {
            return g.clone();
        }
        // Made without the lock: the device reports a failure through its
        // uncaptured-error handler, which takes the device's error list.
        let entries: smallvec::SmallVec<[wgpu::BindGroupEntry<'_>; 8]> = key
            .iter()
            .enumerate()
            .map(|(i, (buffer, offset, size))| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: *offset,
                    size: std::num::NonZeroU64::new(*size),
                }),
            })
            .collect();
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.layout,
            entries: &entries,
        });
        let mut groups = self.groups.lock();
        if groups.len() >= MAX_BIND_GROUPS {
            groups.clear();
        }
        groups.insert(key.clone(), group.clone());
        group
    }
}

/// The pipelines of the backend's device, by device id and kernel hash (a
/// device opened after a loss builds its own).
#[derive(Default)]
pub(crate) struct PipelineCache {
    map: Mutex<HashMap<(u64, u64), Arc<Pipeline>>>,
}

/// The structural hash of a kernel (stable within a process).
pub(crate) fn kernel_hash(k: &Kernel) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    k.hash(&mut h);
    h.finish()
}

fn compile_error(m: impl Into<std::borrow::Cow<'static, str>>) -> BackendError {
    BackendError::new(BackendKind::Wgpu, Phase::Compile, m)
}

impl PipelineCache {
    /// Number of cached pipelines.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Keeps only the pipelines of device `id` (the others' device is
    /// gone).
    pub fn retain_device(&self, id: u64) {
        let stale: Vec<Arc<Pipeline>> = {
            let mut map = self.map.lock();
            let keys: Vec<(u64, u64)> = map.keys().filter(|k| k.0 != id).copied().collect();
            keys.into_iter().filter_map(|k| map.remove(&k)).collect()
        };
        // Released outside the lock.
        drop(stale);
    }

    /// The pipeline of `k`, built on first use; `true` when cached.
    pub fn get(
        &self,
        gpu: &Gpu,
        faults: &FaultPlan,
        k: &Kernel,
    ) -> Result<(Arc<Pipeline>, bool), BackendError> {
        let key = (gpu.id, kernel_hash(k));
        if let Some(p) = self.map.lock().get(&key) {
            return Ok((p.clone(), true));
        }
        let p = Arc::new(build(gpu, faults, k)?);
        self.map.lock().insert(key, p.clone());
        Ok((p, false))
    }
}

/// naga's capabilities matching the device's features.
fn capabilities(gpu: &Gpu) -> naga::valid::Capabilities {
    use naga::valid::Capabilities as C;
    let mut c = C::empty();
    if gpu.features.contains(wgpu::Features::SHADER_F64) {
        c |= C::FLOAT64;
    }
    if gpu.features.contains(wgpu::Features::SHADER_INT64) {
        c |= C::SHADER_INT64;
    }
    if gpu.features.contains(wgpu::Features::SUBGROUP) {
        c |= C::SUBGROUP;
    }
    c
}

fn build(gpu: &Gpu, faults: &FaultPlan, k: &Kernel) -> Result<Pipeline, BackendError> {
    faults.check(Phase::Compile)?;
    let (src, entry) =
        write_kernel_entry(k).map_err(|e| compile_error(format!("writing WGSL: {e}")))?;
    let module = naga::front::wgsl::parse_str(&src)
        .map_err(|e| compile_error(format!("WGSL does not parse: {}", e.emit_to_string(&src))))?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities(gpu))
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map_err(|e| {
            compile_error(format!(
                "WGSL does not validate: {}",
                e.emit_to_string(&src)
            ))
        })?;
    let device = &gpu.device;
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(&k.name),
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let mut entries: Vec<wgpu::BindGroupLayoutEntry> = k
        .bindings
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: b.access == Access::Read,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    if let Some(u) = k.uniform_binding() {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: u,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(&k.name),
        entries: &entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&k.name),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&k.name),
        layout: Some(&pipeline_layout),
        module: &shader,
        entry_point: Some(&entry),
        // No zero-fill of workgroup memory before the kernel starts: every
        // kernel writes each shared element before a barrier and reads it
        // after (the PTX interpreter runs the same kernels over shared
        // memory filled with a poison pattern and would catch one that
        // does not). naga writes the zero-fill for GL as one array
        // constructor per shared array, which took llvmpipe about four
        // minutes to compile for a 10-aggregate reduction (2 s without).
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &[],
            zero_initialize_workgroup_memory: false,
        },
        cache: None,
    });
    let errors: Vec<String> = [validation, internal, oom]
        .into_iter()
        .filter_map(|scope| pollster::block_on(scope.pop()))
        .map(|e| e.to_string())
        .collect();
    if !errors.is_empty() {
        return Err(compile_error(format!(
            "creating the pipeline of `{}`: {}",
            k.name,
            errors.join("; ")
        )));
    }
    Ok(Pipeline {
        pipeline,
        layout,
        groups: Mutex::default(),
    })
}
