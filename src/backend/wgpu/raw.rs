//! The executor's own overhead, for the `wgpu_dispatch` benchmark and the
//! bench example: [`RawDispatch`] replays the device work of a one-stage,
//! one-chunk reduction with wgpu directly (the same pipelines, buffers made
//! once, bind groups made once, one submission, one wait), so that the time
//! of a backend run minus the time of its replay is what the executor adds.
//! Never used by queries.

use super::buffers::{PooledBuffer, READBACK, RESOLVE, STORAGE, UNIFORM};
use super::device::{Gpu, TIMESTAMP_BYTES};
use super::exec::build_artifact;
use super::transfer::device_size;
use super::WgpuBackend;
use crate::backend::{Backend, BackendError, BackendKind, Input, Job, Phase, RunStats};
use crate::codegen::{BufferRef, Groups, Readback, ScratchInit, UniformValues};
use crate::expr::Scalar;
use crate::plan::CompiledPlan;
use crate::types::ColumnRef;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn error(m: impl Into<std::borrow::Cow<'static, str>>) -> BackendError {
    BackendError::new(BackendKind::Wgpu, Phase::Support, m)
}

/// The bare wgpu work of one run of a reduction plan (see the module).
pub struct RawDispatch {
    gpu: Arc<Gpu>,
    input: Vec<u8>,
    uniform: Vec<u8>,
    inits: Vec<(usize, [u8; 8], usize)>,
    groups: Vec<(wgpu::BindGroup, usize, u32)>,
    pipelines: Vec<Arc<super::pipeline::Pipeline>>,
    // Buffers, kept alive for the bind groups.
    input_buf: PooledBuffer,
    uniform_buf: PooledBuffer,
    scratch: Vec<PooledBuffer>,
    reads: Vec<(usize, u64)>,
    staging: PooledBuffer,
    resolve: Option<PooledBuffer>,
    total: u64,
}

impl std::fmt::Debug for RawDispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawDispatch")
            .field("dispatches", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl WgpuBackend {
    /// The replay of `plan` (one stage ending in a reduction, run over
    /// `input` in one chunk) for overhead measurements. Uses timestamp
    /// queries exactly when the backend would.
    #[doc(hidden)]
    pub fn raw_dispatch(
        &self,
        plan: &CompiledPlan,
        input: ColumnRef<'_>,
        params: &[Scalar],
    ) -> Result<RawDispatch, BackendError> {
        let gpu = self.device()?.clone();
        let faults = super::FaultPlan::NONE;
        let art = build_artifact(
            &gpu,
            &self.pipelines,
            &faults,
            &plan.plan,
            self.trusts_non_finite(),
        )?;
        if params.len() < plan.plan.param_count {
            return Err(error("the replay needs a value for every parameter"));
        }
        if art.plans.len() != 1 {
            return Err(error("the replay takes one-stage plans"));
        }
        let kp = &art.plans[0];
        let Readback::Aggregates(list) = &kp.readback else {
            return Err(error("the replay takes reductions"));
        };
        let n = input.len();
        let launch = kp.launch(n);
        let uniform = kp.uniforms.write(&UniformValues {
            len: n as u32,
            span: launch.span,
            groups: launch.groups,
            input_offsets: &[0],
            index_bases: &[],
            params,
            build_len: 0,
        });
        let get = |size: u64, usage| {
            self.pool
                .get(&gpu, &faults, Phase::Execute, size, usage, true)
        };
        let input_bytes = input.device_bytes().into_owned();
        let input_buf = get(input_bytes.len() as u64, STORAGE)?;
        let uniform_buf = get(uniform.len() as u64, UNIFORM)?;
        let mut scratch = Vec::new();
        let mut inits = Vec::new();
        for (j, s) in kp.scratch.iter().enumerate() {
            let elems = s.len.elements(n, launch.groups as usize, 0);
            scratch.push(get((elems * device_size(s.elem)) as u64, STORAGE)?);
            if s.init != ScratchInit::Undefined {
                let value = match s.init {
                    ScratchInit::Param(p) => params[p as usize],
                    _ => Scalar::zero(s.elem),
                };
                let bits = value.cast(s.elem).to_bits().to_le_bytes();
                inits.push((j, bits, device_size(s.elem)));
            }
        }
        let mut groups = Vec::new();
        for d in &kp.dispatches {
            let pipe = &art.pipelines[0][d.kernel];
            let mut entries = Vec::new();
            for (b, r) in d.buffers.iter().enumerate() {
                let buffer = match *r {
                    BufferRef::Input(_) => input_buf.buffer(),
                    BufferRef::Scratch(j) => scratch[j as usize].buffer(),
                    BufferRef::Output(_) => return Err(error("a reduction has no output")),
                };
                entries.push(wgpu::BindGroupEntry {
                    binding: b as u32,
                    resource: buffer.as_entire_binding(),
                });
            }
            entries.push(wgpu::BindGroupEntry {
                binding: d.buffers.len() as u32,
                resource: uniform_buf.buffer().as_entire_binding(),
            });
            let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipe.layout,
                entries: &entries,
            });
            let count = match d.groups {
                Groups::Spans => launch.groups,
                Groups::One => 1,
            };
            groups.push((group, d.kernel, count));
        }
        let mut reads = Vec::new();
        let mut total = 0;
        let ts =
            self.timestamps.load(std::sync::atomic::Ordering::Relaxed) && gpu.timestamps.is_some();
        if ts {
            total += TIMESTAMP_BYTES;
        }
        for &f in list.iter().flat_map(|a| a.fields.iter()) {
            let size = device_size(kp.scratch[f as usize].elem) as u64;
            reads.push((f as usize, size));
            total += size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        }
        let staging = get(total, READBACK)?;
        let resolve = if ts {
            Some(get(TIMESTAMP_BYTES, RESOLVE)?)
        } else {
            None
        };
        Ok(RawDispatch {
            input: input_bytes,
            uniform,
            inits,
            groups,
            pipelines: art.pipelines[0].clone(),
            input_buf,
            uniform_buf,
            scratch,
            reads,
            staging,
            resolve,
            total,
            gpu,
        })
    }
}

impl RawDispatch {
    /// One run: copy the input and uniforms up, dispatch, copy the
    /// aggregate states back; returns the staging bytes.
    pub fn run(&mut self) -> Vec<u8> {
        let gpu = &self.gpu;
        let q = &gpu.queue;
        q.write_buffer(self.input_buf.buffer(), 0, &self.input);
        q.write_buffer(self.uniform_buf.buffer(), 0, &self.uniform);
        for &(j, bits, size) in &self.inits {
            q.write_buffer(self.scratch[j].buffer(), 0, &bits[..size]);
        }
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let ts = gpu.timestamps.as_ref().filter(|_| self.resolve.is_some());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: ts.map(|t| wgpu::ComputePassTimestampWrites {
                    query_set: &t.set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            for (group, kernel, count) in &self.groups {
                pass.set_pipeline(&self.pipelines[*kernel].pipeline);
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(*count, 1, 1);
            }
        }
        let mut at = 0;
        if let (Some(t), Some(r)) = (ts, &self.resolve) {
            enc.resolve_query_set(&t.set, 0..2, r.buffer(), 0);
            enc.copy_buffer_to_buffer(r.buffer(), 0, self.staging.buffer(), 0, TIMESTAMP_BYTES);
            at = TIMESTAMP_BYTES;
        }
        for &(j, size) in &self.reads {
            let padded = size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
            enc.copy_buffer_to_buffer(
                self.scratch[j].buffer(),
                0,
                self.staging.buffer(),
                at,
                padded,
            );
            at += padded;
        }
        q.submit([enc.finish()]);
        let staging = self.staging.buffer();
        staging.map_async(wgpu::MapMode::Read, 0..self.total, |_| {});
        let _ = gpu.device.poll(wgpu::PollType::wait_indefinitely());
        let out = staging
            .get_mapped_range(0..self.total)
            .map(|v| v.to_vec())
            .unwrap_or_default();
        staging.unmap();
        out
    }
}

/// Medians of a backend run, its raw replay, and their paired difference.
#[derive(Copy, Clone, Debug)]
pub struct Overhead {
    /// A run through [`WgpuBackend::execute`] (cached pipelines).
    pub executor: Duration,
    /// The same device work done directly ([`RawDispatch`]).
    pub raw: Duration,
    /// Median of the per-pair differences: the executor's own cost.
    pub overhead: Duration,
}

/// Times `samples` interleaved pairs of a backend run and its replay of
/// `plan` over `input` (after a warm-up), for the bench example and the
/// `wgpu_dispatch` benchmark.
#[doc(hidden)]
pub fn measure_overhead(
    backend: &WgpuBackend,
    plan: &CompiledPlan,
    input: ColumnRef<'_>,
    params: &[Scalar],
    samples: usize,
) -> Result<Overhead, BackendError> {
    let mut raw = backend.raw_dispatch(plan, input, params)?;
    let inputs = [Input::Host(input)];
    let job = Job {
        plan,
        inputs: &inputs,
        params,
        keep_on_device: false,
    };
    for _ in 0..20 {
        backend.execute(&job, &mut RunStats::default())?;
        raw.run();
    }
    let (mut e, mut r, mut d) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples.max(1) {
        let t = Instant::now();
        std::hint::black_box(backend.execute(&job, &mut RunStats::default())?);
        let te = t.elapsed();
        let t = Instant::now();
        std::hint::black_box(raw.run());
        let tr = t.elapsed();
        e.push(te);
        r.push(tr);
        d.push(te.as_nanos() as i128 - tr.as_nanos() as i128);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    d.sort();
    Ok(Overhead {
        executor: median(&mut e),
        raw: median(&mut r),
        overhead: Duration::from_nanos(d[d.len() / 2].max(0) as u64),
    })
}
