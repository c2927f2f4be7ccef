//! Runs a plan: per stage and per chunk, upload → dispatch → readback. The
//! kernels are timed by the device's timestamp queries when it has them
//! (and the readback then shares their submission), else by host timers
//! around fences; `RunStats::timing` says which.
//!
//! Chunks: a stage whose inputs or outputs do not fit one storage binding
//! runs over consecutive chunks of positions. Reductions merge the chunks'
//! states on the host in order; scans carry their running value from chunk
//! to chunk in a device buffer; collected columns are appended in order, on
//! the host or, when the result stays on the device, into one device buffer
//! per column.

use super::array::WgpuColumn;
use super::buffers::{Pool, PooledBuffer, RESOLVE, STORAGE, UNIFORM};
use super::device::{Gpu, TIMESTAMP_BYTES};
use super::fault::FaultPlan;
use super::pipeline::{BindKey, Pipeline, PipelineCache};
use super::transfer::{device_size, download_many, encode_readback, finish_readback, upload};
use crate::backend::{BackendError, BackendKind, Input, Phase, RunStats};
use crate::codegen::plan::MergeRuns;
use crate::codegen::{
    BufferRef, Dispatch, Groups, KernelPlan, Launch, Readback, ScratchInit, ScratchLen,
    UniformSource, UniformValues,
};
use crate::expr::{DType, Scalar};
use crate::plan::{AggKind, PhysicalPlan, PlanOutput, Stage, StageInput};
use crate::semantics::{merge, prefix_settled, Moments, Partial};
use crate::types::{Column, ColumnRef, Fault, PlanError, TimingSource};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Instant;

/// The compiled form of a plan for one device: kernel plans and pipelines.
pub(crate) struct Artifact {
    pub device: u64,
    /// Built without the non-finite guard
    /// ([`WgpuBackend::set_trust_non_finite`](super::WgpuBackend::set_trust_non_finite)).
    pub trusts_non_finite: bool,
    pub plans: Vec<KernelPlan>,
    pub pipelines: Vec<Vec<Arc<Pipeline>>>,
    /// Whether every pipeline came from the device's cache.
    pub all_cached: bool,
}

fn error(phase: Phase, m: impl Into<std::borrow::Cow<'static, str>>) -> BackendError {
    BackendError::new(BackendKind::Wgpu, phase, m)
}

/// Lowers `plan` for the device and builds (or finds) its pipelines.
pub(crate) fn build_artifact(
    gpu: &Gpu,
    cache: &PipelineCache,
    faults: &FaultPlan,
    plan: &PhysicalPlan,
    trust_non_finite: bool,
) -> Result<Artifact, BackendError> {
    let plans = super::lower_guarded(plan, &gpu.caps, trust_non_finite)
        .map_err(|e| error(Phase::Support, e.to_string()))?;
    let mut all_cached = true;
    let pipelines = plans
        .iter()
        .map(|kp| {
            kp.kernels
                .iter()
                .map(|k| {
                    let (p, cached) = cache.get(gpu, faults, k)?;
                    all_cached &= cached;
                    Ok(p)
                })
                .collect::<Result<Vec<_>, BackendError>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Artifact {
        device: gpu.id,
        trusts_non_finite: trust_non_finite,
        plans,
        pipelines,
        all_cached,
    })
}

/// Where the result of a run goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    Host,
    Device,
}

/// What a run produced.
pub(crate) enum RunOutput {
    Plan(PlanOutput),
    Device(Vec<WgpuColumn>),
}

/// A stage input as the executor sees it.
#[derive(Clone, Copy)]
enum Src<'a> {
    Host(ColumnRef<'a>),
    Dev(&'a WgpuColumn),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Host(c) => c.len(),
            Src::Dev(d) => d.len,
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Src::Host(c) => c.dtype(),
            Src::Dev(d) => d.dtype,
        }
    }
}

/// An output of an earlier stage.
enum Held {
    Host(Column),
    Dev(WgpuColumn),
}

/// The state of one aggregate on the host, merged chunk by chunk.
#[derive(Clone, Copy, Debug)]
struct HostAgg {
    value: Scalar,
    /// Arg-min/max: position of the winner, if any.
    index: Option<u64>,
    /// `m2`: the moments.
    moments: Moments,
}

/// One execution.
pub(crate) struct Exec<'a> {
    pub gpu: &'a Arc<Gpu>,
    pub pool: &'a Pool,
    pub faults: FaultPlan,
    pub fault_cell: &'a Arc<Mutex<FaultPlan>>,
    /// Most positions per chunk (tests lower it to exercise chunking, and
    /// the backend halves it after running out of memory).
    pub max_chunk: usize,
    /// Most positions of one chunk this run has tried.
    pub widest_chunk: usize,
    /// Time the kernels with the device's timestamps when it has them.
    pub use_timestamps: bool,
    /// Chunks whose execute time came from device timestamps / host timers.
    pub device_timed_chunks: u32,
    pub host_timed_chunks: u32,
    pub stats: &'a mut RunStats,
}

/// What a dispatch's buffer binds (buffer, offset, size), given the
/// run's outputs.
type BindFn<'a> = dyn Fn(BufferRef, &[PooledBuffer]) -> (wgpu::Buffer, u64, u64) + 'a;

impl Exec<'_> {
    /// Runs every stage; the last one's output is the result.
    pub fn run(
        &mut self,
        art: &Artifact,
        plan: &PhysicalPlan,
        inputs: &[Input<'_>],
        params: &[Scalar],
        want: Want,
    ) -> Result<RunOutput, BackendError> {
        let out = self.run_stages(art, plan, inputs, params, want)?;
        self.stats.timing = if self.device_timed_chunks > 0 && self.host_timed_chunks == 0 {
            TimingSource::DeviceTimestamps
        } else {
            TimingSource::HostClock
        };
        Ok(out)
    }

    fn run_stages(
        &mut self,
        art: &Artifact,
        plan: &PhysicalPlan,
        inputs: &[Input<'_>],
        params: &[Scalar],
        want: Want,
    ) -> Result<RunOutput, BackendError> {
        let mut host_inputs = Vec::new();
        for i in inputs {
            host_inputs.push(match i {
                Input::Host(_) => None,
                Input::Device(d) => match d.as_any().downcast_ref::<WgpuColumn>() {
                    Some(w) if w.device_id() == self.gpu.id => None,
                    _ => Some(i.host(self.stats)?),
                },
            });
        }
        let mut held: Vec<Vec<Held>> = Vec::new();
        for (i, stage) in plan.stages.iter().enumerate() {
            let last = i + 1 == plan.stages.len();
            // A join's build side: query inputs bound after the stage's own.
            let build = art.plans[i].build.iter().map(|&n| StageInput::Source(n));
            let srcs: Vec<Src<'_>> = stage
                .inputs
                .iter()
                .copied()
                .chain(build)
                .map(|inp| match inp {
                    StageInput::Source(n) => {
                        let n = n as usize;
                        match (&host_inputs[n], &inputs[n]) {
                            (Some(h), _) => Src::Host(h.as_ref()),
                            (None, Input::Host(c)) => Src::Host(*c),
                            (None, Input::Device(d)) => Src::Dev(
                                d.as_any()
                                    .downcast_ref::<WgpuColumn>()
                                    .expect("checked above"),
                            ),
                        }
                    }
                    StageInput::Stage { stage, column } => {
                        match &held[stage as usize][column as usize] {
                            Held::Host(c) => Src::Host(c.as_ref()),
                            Held::Dev(d) => Src::Dev(d),
                        }
                    }
                })
                .collect();
            let stage_want = if last { want } else { Want::Device };
            let out = self.run_stage(
                &art.plans[i],
                &art.pipelines[i],
                stage,
                &srcs,
                params,
                stage_want,
            )?;
            drop(srcs);
            if last {
                return Ok(out);
            }
            held.push(match out {
                RunOutput::Device(cols) => cols.into_iter().map(Held::Dev).collect(),
                RunOutput::Plan(PlanOutput::Columns(cols)) => {
                    cols.into_iter().map(Held::Host).collect()
                }
                RunOutput::Plan(PlanOutput::Aggregates(_)) => {
                    return Err(error(
                        Phase::Support,
                        Fault::ReduceNotLast.at(i).to_string(),
                    ))
                }
            });
        }
        Err(error(Phase::Support, PlanError::NoStage.to_string()))
    }

    fn alloc(
        &mut self,
        bytes: u64,
        usage: wgpu::BufferUsages,
        owned: bool,
    ) -> Result<PooledBuffer, BackendError> {
        let b = self
            .pool
            .get(self.gpu, &self.faults, Phase::Execute, bytes, usage, owned)?;
        self.stats.bytes_allocated += b.size();
        Ok(b)
    }

    /// Runs `dispatches` (those before a plan's outputs exist,
    /// [`KernelPlan::sized`]) in a submission of their own; returns the
    /// rows out, read from scratch `rows`.
    #[allow(clippy::too_many_arguments)]
    fn sized_rows(
        &mut self,
        kp: &KernelPlan,
        pipes: &[Arc<Pipeline>],
        dispatches: &[Dispatch],
        bind: &BindFn<'_>,
        uniform: &PooledBuffer,
        launch: Launch,
        rows: u16,
    ) -> Result<u64, BackendError> {
        self.faults.check(Phase::Execute)?;
        let t = Instant::now();
        let device = &self.gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("computeq sizing"),
        });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("computeq sizing"),
                timestamp_writes: None,
            });
            self.stats.launches += encode_dispatches(
                &mut pass,
                device,
                pipes,
                dispatches,
                bind,
                &[],
                uniform,
                launch,
            );
        }
        self.gpu.queue.submit([enc.finish()]);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(error(Phase::Execute, format!("dispatch rejected: {e}")));
        }
        let (buf, _, _) = bind(BufferRef::Scratch(rows), &[]);
        let size = device_size(kp.scratch[rows as usize].elem);
        let bytes = download_many(self.gpu, self.pool, &self.faults, &[(&buf, 0, size as u64)])?;
        if let Some(e) = self.gpu.lost_message() {
            return Err(error(Phase::Execute, e));
        }
        self.stats.bytes_downloaded += size as u64;
        self.stats.execute += t.elapsed();
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(&bytes[0][..size]);
        Ok(u64::from_le_bytes(w))
    }

    /// Positions per chunk so that every binding of the stage fits.
    fn chunk_len(&self, kp: &KernelPlan, srcs: &[Src<'_>]) -> usize {
        let widest = srcs
            .iter()
            .map(|s| device_size(s.dtype()))
            .chain(kp.outputs.iter().map(|&t| device_size(t)))
            .chain(
                kp.scratch
                    .iter()
                    .filter(|s| s.len == ScratchLen::Positions)
                    .map(|s| device_size(s.elem)),
            )
            .max()
            .unwrap_or(4) as u64;
        let align = self.gpu.limits.min_storage_buffer_offset_alignment as u64;
        let fit = (self.gpu.max_binding().saturating_sub(align) / widest).max(1) as usize;
        fit.min(self.max_chunk).min(1 << 30)
    }

    fn run_stage(
        &mut self,
        kp: &KernelPlan,
        pipes: &[Arc<Pipeline>],
        stage: &Stage,
        srcs: &[Src<'_>],
        params: &[Scalar],
        want: Want,
    ) -> Result<RunOutput, BackendError> {
        if kp.algorithm.is_some() {
            self.stats.algorithm = kp.algorithm;
        }
        let lens: SmallVec<[usize; 4]> = srcs.iter().map(Src::len).collect();
        // Slots past the stage's own are a join's build side, read whole.
        let nin = stage.inputs.len();
        let range = stage.resolve_range(&lens[..nin], params);
        let build = lens[nin..].iter().copied().min().unwrap_or(0);
        let chunk = self.chunk_len(kp, srcs);
        let chunks = range.len.div_ceil(chunk).max(1);
        // A whole plan whose chunks merge on the host (`MergeRuns`: sorts
        // and top-k, groups by key, a join's probe side) runs in several;
        // any other needs one run.
        let merge_runs = kp.merge_runs.as_ref().filter(|_| chunks > 1);
        if kp.whole && ((chunks > 1 && merge_runs.is_none()) || build > chunk) {
            return Err(error(
                Phase::Support,
                format!(
                    "a {} of {} rows needs them in one run; one binding holds {chunk}",
                    stage.terminal.kind_name(),
                    range.len
                ),
            ));
        }
        self.widest_chunk = self.widest_chunk.max(chunk.min(range.len));

        // Scratch that lives across chunks (scan carries), set up once.
        let mut persistent: Vec<Option<PooledBuffer>> = Vec::new();
        for s in &kp.scratch {
            persistent.push(match s.init {
                ScratchInit::Undefined => None,
                init => {
                    let value = match init {
                        ScratchInit::Param(p) => params[p as usize],
                        _ => Scalar::zero(s.elem),
                    };
                    let size = device_size(s.elem);
                    let b = self.alloc(size as u64, STORAGE, false)?;
                    let bits = value.cast(s.elem).to_bits().to_le_bytes();
                    self.gpu.queue.write_buffer(b.buffer(), 0, &bits[..size]);
                    Some(b)
                }
            });
        }

        let mut aggs: Option<Vec<HostAgg>> = None;
        let mut host_cols: Vec<Column> = kp
            .outputs
            .iter()
            .map(|&t| Column::with_capacity(t, 0))
            .collect();
        let mut dev_cols: Option<Vec<WgpuColumn>> = None;
        // Columns of several chunks kept on the device: one buffer each,
        // filled chunk by chunk on the device (when one buffer can hold
        // them; else they gather on the host and go back up).
        let gather_fits = kp
            .outputs
            .iter()
            .all(|&t| (range.len * device_size(t)) as u64 <= self.gpu.limits.max_buffer_size);
        let gather: Option<Vec<PooledBuffer>> = if want == Want::Device
            && chunks > 1
            && merge_runs.is_none()
            && matches!(kp.readback, Readback::Columns { .. })
            && gather_fits
        {
            let mut v = Vec::new();
            for &t in &kp.outputs {
                v.push(self.alloc((range.len * device_size(t)) as u64, STORAGE, true)?);
            }
            Some(v)
        } else {
            None
        };
        let mut gathered = 0usize;
        // Rows each chunk added to `host_cols` (sorted runs to merge).
        let mut runs: Vec<usize> = Vec::new();
        // The outputs that come back: a sort's key columns only for a merge.
        let visible = kp.visible_outputs();
        let fetched = if merge_runs.is_some() {
            kp.outputs.len()
        } else {
            visible
        };

        for c in 0..chunks {
            let c0 = c * chunk;
            let n = chunk.min(range.len - c0.min(range.len));
            let launch = kp.launch_with(n, build);

            // Upload.
            self.faults.check(Phase::Upload)?;
            let t_in = Instant::now();
            let mut input_bufs: Vec<(PooledBuffer, u64, Option<u64>)> = Vec::new();
            let mut resident: Vec<(&WgpuColumn, u64, u64)> = Vec::new();
            let mut input_offsets: Vec<u32> = Vec::new();
            let mut is_resident: Vec<bool> = Vec::new();
            for (s, src) in srcs.iter().enumerate() {
                let (first, count) = if s < nin {
                    (range.offsets[s] + c0, n)
                } else {
                    (0, build)
                };
                match *src {
                    Src::Host(col) => {
                        let part = col.slice(first.min(col.len())..(first + count).min(col.len()));
                        let (buf, bytes) = upload(self.gpu, self.pool, &self.faults, part, false)?;
                        self.stats.bytes_uploaded += bytes;
                        input_bufs.push((buf, 0, None));
                        input_offsets.push(0);
                        is_resident.push(false);
                    }
                    Src::Dev(d) => {
                        let elem = device_size(d.dtype) as u64;
                        let total = d.buffer.size();
                        let byte = first as u64 * elem;
                        let (offset, size) = if total <= self.gpu.max_binding() {
                            (0, None)
                        } else {
                            let align = self.gpu.limits.min_storage_buffer_offset_alignment as u64;
                            let aligned = byte / align * align;
                            let size = (total - aligned).min(self.gpu.max_binding() / 4 * 4);
                            (aligned, Some(size))
                        };
                        input_offsets.push(((byte - offset) / elem) as u32);
                        self.stats.bytes_resident += count as u64 * elem;
                        resident.push((d, offset, size.unwrap_or(0)));
                        is_resident.push(true);
                    }
                }
            }
            let index_bases: Vec<u64> =
                range.index_offsets.iter().map(|&o| o + c0 as u64).collect();
            for (e, &base) in index_bases.iter().enumerate() {
                let slot = kp.uniforms.field(UniformSource::IndexBase(e as u16));
                if let Some(f) = slot {
                    if kp.uniforms.slots[f].ty == DType::U32 && base + n as u64 > u32::MAX as u64 {
                        return Err(error(
                            Phase::Support,
                            "an enumerate index beyond 2^32 needs 64-bit integers (SHADER_INT64)",
                        ));
                    }
                }
            }
            let uniform_bytes = kp.uniforms.write(&UniformValues {
                len: n as u32,
                span: launch.span,
                groups: launch.groups,
                input_offsets: &input_offsets,
                index_bases: &index_bases,
                params,
                build_len: build as u32,
            });
            self.stats.transfer_in += t_in.elapsed();

            // Scratch, then the outputs (after the dispatches that size
            // them, for outputs only the device can size).
            let keep = want == Want::Device && chunks == 1;
            let mut scratch = Vec::new();
            for (j, s) in kp.scratch.iter().enumerate() {
                scratch.push(match persistent[j] {
                    Some(_) => None,
                    None => {
                        let elems = s.len.elements(n, launch.groups as usize, build);
                        Some(self.alloc((elems * device_size(s.elem)) as u64, STORAGE, false)?)
                    }
                });
            }
            let uniform = self.alloc(uniform_bytes.len() as u64, UNIFORM, false)?;
            self.gpu
                .queue
                .write_buffer(uniform.buffer(), 0, &uniform_bytes);
            // What dispatch buffer `r` binds.
            let bind = |r: BufferRef, outputs: &[PooledBuffer]| -> (wgpu::Buffer, u64, u64) {
                match r {
                    BufferRef::Input(s) => {
                        let s = s as usize;
                        if is_resident[s] {
                            let k = is_resident[..s].iter().filter(|&&x| x).count();
                            let (col, offset, size) = resident[k];
                            (col.buffer.buffer().clone(), offset, size)
                        } else {
                            let k = is_resident[..s].iter().filter(|&&x| !x).count();
                            (input_bufs[k].0.buffer().clone(), 0, 0)
                        }
                    }
                    BufferRef::Output(o) => (outputs[o as usize].buffer().clone(), 0, 0),
                    BufferRef::Scratch(j) => {
                        let j = j as usize;
                        let b = persistent[j]
                            .as_ref()
                            .or(scratch[j].as_ref())
                            .expect("scratch allocated");
                        (b.buffer().clone(), 0, 0)
                    }
                }
            };
            let (first_dispatch, sized_rows) = match kp.sized {
                None => (0, None),
                Some(sz) => {
                    let rows = self.sized_rows(
                        kp,
                        pipes,
                        &kp.dispatches[..sz.after],
                        &bind,
                        &uniform,
                        launch,
                        sz.rows,
                    )?;
                    let widest = kp
                        .outputs
                        .iter()
                        .map(|&t| device_size(t))
                        .max()
                        .unwrap_or(4);
                    if rows > u32::MAX as u64 / 2 || rows * widest as u64 > self.gpu.max_binding() {
                        return Err(error(
                            Phase::Support,
                            format!(
                                "a {} of {rows} rows out is past 2^31 positions or one binding",
                                stage.terminal.kind_name()
                            ),
                        ));
                    }
                    (sz.after, Some(rows as usize))
                }
            };
            let mut outputs = Vec::new();
            for &t in &kp.outputs {
                let rows = sized_rows.unwrap_or(kp.output_rows(n));
                outputs.push(self.alloc((rows * device_size(t)) as u64, STORAGE, keep)?);
            }

            // Dispatch, timed by the device's timestamps when it has them:
            // then the readback rides in the same submission (one wait);
            // otherwise a fence after the kernels splits execute from
            // readback for the host timers.
            self.faults.check(Phase::Execute)?;
            let ts = if self.use_timestamps {
                self.gpu.timestamps.as_ref()
            } else {
                None
            };
            let resolve = match ts {
                Some(_) => Some(self.pool.get(
                    self.gpu,
                    &self.faults,
                    Phase::Execute,
                    TIMESTAMP_BYTES,
                    RESOLVE,
                    false,
                )?),
                None => None,
            };
            let t_ex = Instant::now();
            let device = &self.gpu.device;
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("computeq"),
            });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("computeq"),
                    timestamp_writes: ts.map(|t| wgpu::ComputePassTimestampWrites {
                        query_set: &t.set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }),
                });
                self.stats.launches += encode_dispatches(
                    &mut pass,
                    device,
                    pipes,
                    &kp.dispatches[first_dispatch..],
                    &bind,
                    &outputs,
                    &uniform,
                    launch,
                );
            }
            if let (Some(t), Some(r)) = (ts, &resolve) {
                enc.resolve_query_set(&t.set, 0..2, r.buffer(), 0);
            }
            let mut enc = Some(enc);
            let mut scope = Some(scope);
            if ts.is_none() {
                let enc = enc.take().expect("not submitted yet");
                self.gpu.queue.submit([enc.finish()]);
                if let Some(e) = pollster::block_on(scope.take().expect("pushed").pop()) {
                    return Err(error(Phase::Execute, format!("dispatch rejected: {e}")));
                }
                self.gpu
                    .device
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map_err(|e| error(Phase::Execute, format!("waiting for the kernels: {e}")))?;
                // Errors of this run's own operations are in its scopes
                // (`scope::scoped`); only the device's loss is shared.
                if let Some(e) = self.gpu.lost_message() {
                    return Err(error(Phase::Execute, e));
                }
                self.stats.execute += t_ex.elapsed();
                self.host_timed_chunks += 1;
            }
            self.stats.parallelism = self
                .stats
                .parallelism
                .max(launch.groups * kp.kernels[0].workgroup_size);

            // Readback: what the host needs after this chunk (timestamps,
            // aggregate states, the survivor count or the columns), copied
            // into one staging buffer.
            let t_out = Instant::now();
            let scratch_buf = |j: u16| -> &wgpu::Buffer {
                persistent[j as usize]
                    .as_ref()
                    .or(scratch[j as usize].as_ref())
                    .expect("scratch allocated")
                    .buffer()
            };
            let mut enc = match enc.take() {
                Some(e) => e,
                None => device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("readback"),
                }),
            };
            let mut encoded = ts.is_some();
            // Several chunks kept on the device: each chunk's outputs go
            // after the previous ones' survivors, device to device. With a
            // count the copy takes all `n` rows; the next chunk overwrites
            // the rows that did not survive.
            if let Some(big) = &gather {
                for ((out, big), &t) in outputs.iter().zip(big).zip(&kp.outputs) {
                    let size = device_size(t) as u64;
                    if n > 0 {
                        enc.copy_buffer_to_buffer(
                            out.buffer(),
                            0,
                            big.buffer(),
                            gathered as u64 * size,
                            n as u64 * size,
                        );
                        encoded = true;
                    }
                }
            }
            let mut ranges: SmallVec<[(&wgpu::Buffer, u64, u64); 8]> = SmallVec::new();
            if let Some(r) = &resolve {
                ranges.push((r.buffer(), 0, TIMESTAMP_BYTES));
            }
            let first = ranges.len();
            match &kp.readback {
                Readback::Aggregates(list) => {
                    for &f in list.iter().flat_map(|a| a.fields.iter()) {
                        let ty = kp.scratch[f as usize].elem;
                        ranges.push((scratch_buf(f), 0, device_size(ty) as u64));
                    }
                }
                Readback::Columns { count: Some(j) } => ranges.push((scratch_buf(*j), 0, 4)),
                Readback::Columns { count: None } => {
                    if !keep && gather.is_none() {
                        for (b, &t) in outputs.iter().zip(&kp.outputs).take(fetched) {
                            ranges.push((b.buffer(), 0, (n * device_size(t)) as u64));
                        }
                    }
                }
            }
            // The guard's word (`codegen::finite`), read last.
            let flagged = kp.non_finite.map(|j| ranges.push((scratch_buf(j), 0, 4)));
            let pending = if ranges.is_empty() {
                None
            } else {
                encoded = true;
                Some(encode_readback(
                    self.gpu,
                    self.pool,
                    &self.faults,
                    &mut enc,
                    &ranges,
                )?)
            };
            drop(ranges);
            if encoded {
                self.gpu.queue.submit([enc.finish()]);
            }
            if let Some(scope) = scope.take() {
                if let Some(e) = pollster::block_on(scope.pop()) {
                    return Err(error(Phase::Execute, format!("dispatch rejected: {e}")));
                }
            }
            let bytes = match pending {
                Some(p) => finish_readback(self.gpu, p)?,
                None => Vec::new(),
            };
            self.stats.bytes_downloaded +=
                bytes[first..].iter().map(|b| b.len() as u64).sum::<u64>();
            if let Some(t) = ts {
                // Kernels and readback shared one wait: the device's clock
                // splits them.
                let wall = t_ex.elapsed();
                match t.elapsed(&bytes[0]) {
                    Some(gpu) => {
                        let exec = gpu.min(wall);
                        self.stats.execute += exec;
                        self.stats.transfer_out += wall - exec;
                        self.device_timed_chunks += 1;
                    }
                    None => {
                        self.stats.execute += wall;
                        self.host_timed_chunks += 1;
                    }
                }
            }
            let mut bytes = bytes;
            if flagged.is_some() && bytes.pop().is_some_and(|w| w.iter().any(|&b| b != 0)) {
                return Err(error(Phase::Execute, crate::codegen::finite::DISCARDED));
            }
            let bytes = &bytes[first..];
            match &kp.readback {
                Readback::Aggregates(list) => {
                    let mut at = 0;
                    let states: Vec<HostAgg> = list
                        .iter()
                        .map(|a| {
                            let fields = &bytes[at..at + a.fields.len()];
                            at += a.fields.len();
                            decode_agg(&a.kind, a.column, fields, c0 as u64)
                        })
                        .collect();
                    let merged: Vec<HostAgg> = match aggs.take() {
                        None => states,
                        Some(prev) => prev
                            .into_iter()
                            .zip(states)
                            .zip(list)
                            .map(|((p, s), a)| merge_agg(&a.kind, p, s, params))
                            .collect(),
                    };
                    // Settled by a prefix (a survivor found for `first`, an
                    // `any` true): the later chunks cannot change it.
                    let settled = prefix_settled(
                        list.iter()
                            .zip(&merged)
                            .map(|(a, h)| (&a.kind, Some(h.value), h.index.is_some())),
                    );
                    aggs = Some(merged);
                    if settled {
                        self.stats.elements_skipped += (range.len - (c0 + n)) as u64;
                        if ts.is_none() {
                            self.stats.transfer_out += t_out.elapsed();
                        }
                        break;
                    }
                }
                Readback::Columns { count } => {
                    let kept = match count {
                        None => n,
                        Some(_) => {
                            u32::from_le_bytes(bytes[0][..4].try_into().expect("4 bytes")) as usize
                        }
                    };
                    runs.push(kept);
                    if keep {
                        dev_cols = Some(
                            outputs
                                .into_iter()
                                .zip(&kp.outputs)
                                .take(visible)
                                .map(|(buffer, &dtype)| WgpuColumn {
                                    buffer,
                                    dtype,
                                    len: kept,
                                    gpu: self.gpu.clone(),
                                    pool: self.pool.clone(),
                                    faults: self.fault_cell.clone(),
                                })
                                .collect(),
                        );
                    } else if gather.is_some() {
                        gathered += kept;
                    } else if count.is_none() {
                        for ((col, b), &t) in host_cols.iter_mut().zip(bytes).zip(&kp.outputs) {
                            col.append(&Column::from_device_bytes(t, b));
                        }
                    } else {
                        let ranges: Vec<(&wgpu::Buffer, u64, u64)> = outputs
                            .iter()
                            .zip(&kp.outputs)
                            .take(fetched)
                            .map(|(b, &t)| (b.buffer(), 0, (kept * device_size(t)) as u64))
                            .collect();
                        let bytes = download_many(self.gpu, self.pool, &self.faults, &ranges)?;
                        for ((col, b), &t) in host_cols.iter_mut().zip(&bytes).zip(&kp.outputs) {
                            self.stats.bytes_downloaded += b.len() as u64;
                            let part = Column::from_device_bytes(t, b);
                            // A key count's chunks each count every key:
                            // they add up.
                            if kp.fixed_rows.is_some() && c > 0 {
                                add_counts(col, &part)?;
                            } else {
                                col.append(&part);
                            }
                        }
                    }
                }
            }
            if ts.is_none() {
                self.stats.transfer_out += t_out.elapsed();
            }
        }

        Ok(match &kp.readback {
            Readback::Aggregates(list) => {
                let states = aggs.expect("at least one chunk ran");
                RunOutput::Plan(PlanOutput::Aggregates(
                    states
                        .iter()
                        .zip(list)
                        .map(|(s, a)| match a.kind {
                            AggKind::ArgMin | AggKind::ArgMax => Scalar::U64(s.index.unwrap_or(0)),
                            _ => s.value,
                        })
                        .collect(),
                ))
            }
            Readback::Columns { .. } => {
                if let Some(m) = merge_runs {
                    let t = Instant::now();
                    match m {
                        // A join's chunks, each in probe order.
                        MergeRuns::Append => {}
                        MergeRuns::Sorted { descending, fetch } => {
                            for col in &mut host_cols {
                                *col = merge_sorted_runs(
                                    std::mem::replace(col, Column::U32(Vec::new())),
                                    &runs,
                                    *descending,
                                )?;
                                if let Some(p) = fetch {
                                    let k = params[*p as usize].to_bits();
                                    col.truncate(k.min(col.len() as u64) as usize);
                                }
                            }
                        }
                        MergeRuns::SortedBy { keys, fetch, .. } => {
                            let order = merge_runs_by(&host_cols, &runs, keys)?;
                            let k = fetch.map_or(order.len(), |p| {
                                (params[p as usize].to_bits()).min(order.len() as u64) as usize
                            });
                            host_cols.truncate(visible);
                            for col in &mut host_cols {
                                *col = crate::relational::gather(col.as_ref(), &order[..k]);
                            }
                        }
                        MergeRuns::Groups {
                            keys,
                            aggs,
                            first_seen: false,
                        } => {
                            host_cols = merge_group_runs(&host_cols, &runs, *keys, aggs)?;
                        }
                        MergeRuns::Groups {
                            keys,
                            aggs,
                            first_seen: true,
                        } => {
                            host_cols = merge_first_seen_runs(&host_cols, &runs, *keys, aggs)?;
                        }
                    }
                    self.stats.transfer_out += t.elapsed();
                }
                host_cols.truncate(visible);
                match (want, dev_cols) {
                    (Want::Device, Some(cols)) => RunOutput::Device(cols),
                    (Want::Device, None) if gather.is_some() => RunOutput::Device(
                        gather
                            .into_iter()
                            .flatten()
                            .zip(&kp.outputs)
                            .map(|(buffer, &dtype)| WgpuColumn {
                                buffer,
                                dtype,
                                len: gathered,
                                gpu: self.gpu.clone(),
                                pool: self.pool.clone(),
                                faults: self.fault_cell.clone(),
                            })
                            .collect(),
                    ),
                    (Want::Device, None) => {
                        // Several chunks: gathered on the host, now one column each.
                        let mut cols = Vec::new();
                        for col in host_cols {
                            let (buffer, bytes) =
                                upload(self.gpu, self.pool, &self.faults, col.as_ref(), true)?;
                            self.stats.bytes_uploaded += bytes;
                            cols.push(WgpuColumn {
                                buffer,
                                dtype: col.dtype(),
                                len: col.len(),
                                gpu: self.gpu.clone(),
                                pool: self.pool.clone(),
                                faults: self.fault_cell.clone(),
                            });
                        }
                        RunOutput::Device(cols)
                    }
                    (Want::Host, _) => RunOutput::Plan(PlanOutput::Columns(host_cols)),
                }
            }
        })
    }
}

/// Records `dispatches` into `pass`, each bound as `bind` says (with the
/// run's `outputs`) and the uniform block last; returns how many.
#[allow(clippy::too_many_arguments)]
fn encode_dispatches(
    pass: &mut wgpu::ComputePass<'_>,
    device: &wgpu::Device,
    pipes: &[Arc<Pipeline>],
    dispatches: &[Dispatch],
    bind: &BindFn<'_>,
    outputs: &[PooledBuffer],
    uniform: &PooledBuffer,
    launch: Launch,
) -> u32 {
    let mut key = BindKey::new();
    for d in dispatches {
        key.clear();
        for &r in &d.buffers {
            key.push(bind(r, outputs));
        }
        key.push((uniform.buffer().clone(), 0, 0));
        let pipe = &pipes[d.kernel];
        let group = pipe.bind_group(device, &key);
        pass.set_pipeline(&pipe.pipeline);
        pass.set_bind_group(0, &group, &[]);
        let groups = match d.groups {
            Groups::Spans => launch.groups,
            Groups::One => 1,
        };
        pass.dispatch_workgroups(groups, 1, 1);
    }
    dispatches.len() as u32
}

fn scalar(t: DType, bytes: &[u8]) -> Scalar {
    let mut w = [0u8; 8];
    w[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    let bits = u64::from_le_bytes(w);
    match t {
        DType::Bool => Scalar::Bool(bits as u32 != 0),
        t => Scalar::from_bits(t, bits),
    }
}

/// A chunk's aggregate state from its readback fields.
fn decode_agg(kind: &AggKind, column: Option<DType>, fields: &[Vec<u8>], start: u64) -> HostAgg {
    let col = column.unwrap_or(DType::U32);
    match kind {
        AggKind::Count => HostAgg {
            value: Scalar::U64(scalar(DType::U32, &fields[0]).to_bits()),
            index: None,
            moments: Moments::EMPTY,
        },
        AggKind::Any | AggKind::All => HostAgg {
            value: scalar(DType::Bool, &fields[0]),
            index: None,
            moments: Moments::EMPTY,
        },
        AggKind::ArgMin | AggKind::ArgMax | AggKind::First | AggKind::Last => {
            let i = scalar(DType::U32, &fields[1]).to_bits() as u32;
            HostAgg {
                value: scalar(col, &fields[0]),
                index: (i != u32::MAX).then_some(start + i as u64),
                moments: Moments::EMPTY,
            }
        }
        AggKind::M2 => {
            // Count (`u32` per chunk), mean, m2.
            let moments = Moments {
                n: scalar(DType::U32, &fields[0]).to_bits() as u32 as u64,
                mean: scalar(DType::F64, &fields[1]).as_f64(),
                m2: scalar(DType::F64, &fields[2]).as_f64(),
            };
            HostAgg {
                value: Scalar::F64(moments.m2),
                index: None,
                moments,
            }
        }
        _ => HostAgg {
            value: scalar(col, &fields[0]),
            index: None,
            moments: Moments::EMPTY,
        },
    }
}

/// Merges an earlier chunk's state `a` with a later one's `b`
/// ([`semantics::merge`](crate::semantics::merge)).
fn merge_agg(kind: &AggKind, a: HostAgg, b: HostAgg, params: &[Scalar]) -> HostAgg {
    let p = |h: HostAgg| Partial {
        value: h.value,
        pos: h.index,
        moments: h.moments,
    };
    let m = merge(kind, p(a), p(b), params);
    HostAgg {
        value: m.value,
        index: m.pos,
        moments: m.moments,
    }
}

/// Adds a chunk's key counts to the counts of the chunks before it
/// (wrapping, like every integer count).
fn add_counts(acc: &mut Column, part: &Column) -> Result<(), BackendError> {
    match (acc, part) {
        (Column::U64(a), Column::U64(p)) if a.len() == p.len() => {
            for (a, p) in a.iter_mut().zip(p) {
                *a = a.wrapping_add(*p);
            }
            Ok(())
        }
        (a, p) => Err(error(
            Phase::Execute,
            format!(
                "a key count's chunks disagree: {} {:?} rows and {} {:?} rows",
                a.len(),
                a.dtype(),
                p.len(),
                p.dtype()
            ),
        )),
    }
}

/// The order of the rows of `cols` that merges their sorted runs (`runs`
/// rows each, in order) by the key columns `keys` (most significant
/// first, each descending or not) in the canonical order of their values
/// (`semantics::order`), the earlier run first among equal keys (a stable
/// merge).
fn merge_runs_by(
    cols: &[Column],
    runs: &[usize],
    keys: &[(u16, bool)],
) -> Result<Vec<u32>, BackendError> {
    let rows: usize = runs.iter().sum();
    // Every key's words, complemented when descending: compared as
    // unsigned integers they give the sort's order.
    let mut words: Vec<Vec<u64>> = Vec::with_capacity(keys.len());
    for &(c, descending) in keys {
        let col = cols
            .get(c as usize)
            .filter(|c| c.len() == rows)
            .ok_or_else(|| {
                error(
                    Phase::Execute,
                    format!("sorted runs of {rows} rows without their key column {c}"),
                )
            })?;
        let flip = if descending { u64::MAX } else { 0 };
        words.push(
            (0..rows)
                .map(|i| crate::semantics::order::ordered_bits(col.as_ref().get(i)) ^ flip)
                .collect(),
        );
    }
    let before = |a: u32, b: u32| {
        words
            .iter()
            .map(|w| w[a as usize].cmp(&w[b as usize]))
            .find(|o| o.is_ne())
            == Some(std::cmp::Ordering::Less)
    };
    Ok(merge_pairwise((0..rows as u32).collect(), runs, before))
}

/// Merges the sorted runs of `col` (`runs` rows each, in order) into one
/// sorted column by the canonical order of its values (`semantics::order`;
/// descending when asked), the earlier run first among equal values (a
/// stable merge), one pass per halving of the runs.
fn merge_sorted_runs(
    col: Column,
    runs: &[usize],
    descending: bool,
) -> Result<Column, BackendError> {
    use crate::semantics::order::{f32_word, f64_word};
    if runs.iter().sum::<usize>() != col.len() {
        return Err(error(
            Phase::Execute,
            format!(
                "sorted runs of {} rows in a column of {}",
                runs.iter().sum::<usize>(),
                col.len()
            ),
        ));
    }
    Ok(match col {
        Column::Bool(v) => Column::Bool(merge_runs(v, runs, descending, |x| x as u64)),
        Column::I32(v) => Column::I32(merge_runs(v, runs, descending, |x| {
            ((x as u32) ^ (1 << 31)) as u64
        })),
        Column::U32(v) => Column::U32(merge_runs(v, runs, descending, |x| x as u64)),
        Column::I64(v) => Column::I64(merge_runs(v, runs, descending, |x| (x as u64) ^ (1 << 63))),
        Column::U64(v) => Column::U64(merge_runs(v, runs, descending, |x| x)),
        Column::F32(v) => Column::F32(merge_runs(v, runs, descending, |x| f32_word(x) as u64)),
        Column::F64(v) => Column::F64(merge_runs(v, runs, descending, f64_word)),
    })
}

fn merge_runs<T: Copy>(
    v: Vec<T>,
    runs: &[usize],
    descending: bool,
    word: impl Fn(T) -> u64,
) -> Vec<T> {
    // A descending run is sorted by the complemented word.
    let key = |x: T| if descending { !word(x) } else { word(x) };
    merge_pairwise(v, runs, |a, b| key(a) < key(b))
}

/// Merges the sorted runs of `v` (`runs` elements each, in order) by
/// `less`, the earlier run first among elements neither is less than the
/// other (a stable merge), one pass per halving of the runs.
fn merge_pairwise<T: Copy>(mut v: Vec<T>, runs: &[usize], less: impl Fn(T, T) -> bool) -> Vec<T> {
    // Run `r` is `v[bounds[r]..bounds[r + 1]]`.
    let mut bounds = Vec::with_capacity(runs.len() + 1);
    bounds.push(0);
    for &r in runs {
        bounds.push(bounds[bounds.len() - 1] + r);
    }
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    while bounds.len() > 2 {
        out.clear();
        let mut next = vec![0];
        for r in (0..bounds.len() - 1).step_by(2) {
            let (lo, mid) = (bounds[r], bounds[r + 1]);
            let hi = bounds.get(r + 2).copied().unwrap_or(mid);
            let (mut i, mut j) = (lo, mid);
            while i < mid && j < hi {
                // The later run's element only when strictly first.
                if less(v[j], v[i]) {
                    out.push(v[j]);
                    j += 1;
                } else {
                    out.push(v[i]);
                    i += 1;
                }
            }
            out.extend_from_slice(&v[i..mid]);
            out.extend_from_slice(&v[j..hi]);
            next.push(hi);
        }
        std::mem::swap(&mut v, &mut out);
        bounds = next;
    }
    v
}

/// Merges the runs of groups of `cols` (`runs` groups each, in order; each
/// run sorted by its `keys` key columns' group words, one row per key)
/// into one: every key once, in order, the earlier run's key kept and the
/// aggregates (`aggs`, the columns after the keys) folded in run order.
fn merge_group_runs(
    cols: &[Column],
    runs: &[usize],
    keys: usize,
    aggs: &[AggKind],
) -> Result<Vec<Column>, BackendError> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    check_group_runs(cols, runs, keys, aggs)?;
    let key_of = |row: usize| group_key(cols, keys, row);
    let starts: Vec<usize> = runs
        .iter()
        .scan(0, |at, &r| {
            let s = *at;
            *at += r;
            Some(s)
        })
        .collect();
    // The next row of every run, smallest key first, earlier run first.
    let mut heap = BinaryHeap::new();
    for (r, (&s, &n)) in starts.iter().zip(runs).enumerate() {
        if n > 0 {
            heap.push(Reverse((key_of(s), r, s)));
        }
    }
    let mut out: Vec<Column> = cols
        .iter()
        .map(|c| Column::with_capacity(c.dtype(), 0))
        .collect();
    let mut last: Option<SmallVec<[u64; 2]>> = None;
    let mut state: Vec<Scalar> = Vec::new();
    let flush = |out: &mut Vec<Column>, state: &[Scalar]| {
        for (c, &v) in out[keys..].iter_mut().zip(state) {
            c.push(v);
        }
    };
    while let Some(Reverse((key, r, row))) = heap.pop() {
        if last.as_ref() == Some(&key) {
            fold_group_row(&mut state, cols, keys, aggs, row);
        } else {
            if last.is_some() {
                flush(&mut out, &state);
            }
            for (o, c) in out[..keys].iter_mut().zip(&cols[..keys]) {
                o.push(c.as_ref().get(row));
            }
            state = cols[keys..].iter().map(|c| c.as_ref().get(row)).collect();
            last = Some(key);
        }
        if row + 1 < starts[r] + runs[r] {
            heap.push(Reverse((key_of(row + 1), r, row + 1)));
        }
    }
    if last.is_some() {
        flush(&mut out, &state);
    }
    Ok(out)
}

/// Checks that `cols` are `keys` key columns and one column per aggregate,
/// each holding every row of `runs`; gives the number of those rows.
fn check_group_runs(
    cols: &[Column],
    runs: &[usize],
    keys: usize,
    aggs: &[AggKind],
) -> Result<usize, BackendError> {
    let rows: usize = runs.iter().sum();
    if cols.len() != keys + aggs.len() || cols.iter().any(|c| c.len() != rows) {
        return Err(error(
            Phase::Execute,
            format!(
                "groups of {} columns ({:?} rows) in runs of {rows} rows, {keys} keys, {} aggregates",
                cols.len(),
                cols.iter().map(Column::len).collect::<Vec<_>>(),
                aggs.len()
            ),
        ));
    }
    Ok(rows)
}

/// The group words of row `row`'s keys (the first `keys` columns):
/// order-preserving, `-0.0` as `+0.0`, every NaN one word.
fn group_key(cols: &[Column], keys: usize, row: usize) -> SmallVec<[u64; 2]> {
    use crate::relational::{f32_group_word, f64_group_word};
    use crate::semantics::order::ordered_bits;
    cols[..keys]
        .iter()
        .map(|c| match c.as_ref().get(row) {
            Scalar::F32(x) => f32_group_word(x),
            Scalar::F64(x) => f64_group_word(x),
            s => ordered_bits(s),
        })
        .collect()
}

/// Folds `row`'s aggregates (columns `cols[keys..]`) into `state`, `state`
/// first (`semantics::merge`: the earlier run's first, the later's last).
fn fold_group_row(
    state: &mut [Scalar],
    cols: &[Column],
    keys: usize,
    aggs: &[AggKind],
    row: usize,
) {
    let partial = |value| Partial {
        value,
        pos: Some(0),
        moments: Moments::EMPTY,
    };
    for ((v, kind), c) in state.iter_mut().zip(aggs).zip(&cols[keys..]) {
        *v = merge(kind, partial(*v), partial(c.as_ref().get(row)), &[]).value;
    }
}

/// Runs of groups in first-seen order (`MergeRuns::Groups` with
/// `first_seen`), merged in first-seen order: row by row through the runs
/// in order, a key not seen before starts a group (its key as this run has
/// it), a key seen before folds its aggregates into its group's.
fn merge_first_seen_runs(
    cols: &[Column],
    runs: &[usize],
    keys: usize,
    aggs: &[AggKind],
) -> Result<Vec<Column>, BackendError> {
    use std::collections::hash_map::Entry;
    let rows = check_group_runs(cols, runs, keys, aggs)?;
    let mut group_of: rustc_hash::FxHashMap<SmallVec<[u64; 2]>, usize> = Default::default();
    // Per group: the row its key comes from, and its aggregates.
    let mut key_rows: Vec<usize> = Vec::new();
    let mut states: Vec<Vec<Scalar>> = Vec::new();
    for row in 0..rows {
        match group_of.entry(group_key(cols, keys, row)) {
            Entry::Occupied(g) => fold_group_row(&mut states[*g.get()], cols, keys, aggs, row),
            Entry::Vacant(g) => {
                g.insert(key_rows.len());
                key_rows.push(row);
                states.push(cols[keys..].iter().map(|c| c.as_ref().get(row)).collect());
            }
        }
    }
    let mut out: Vec<Column> = cols
        .iter()
        .map(|c| Column::with_capacity(c.dtype(), key_rows.len()))
        .collect();
    for (&row, state) in key_rows.iter().zip(&states) {
        for (o, c) in out[..keys].iter_mut().zip(&cols[..keys]) {
            o.push(c.as_ref().get(row));
        }
        for (o, &v) in out[keys..].iter_mut().zip(state) {
            o.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_runs_merge_stably_with_empty_runs() {
        // Runs of 3, 0, 2 and 3 rows; -0.0 before +0.0, NaN last.
        let v = vec![-1.0f32, 0.0, f32::NAN, -0.0, 2.0, -3.0, 0.0, 5.0];
        let m = merge_sorted_runs(Column::F32(v), &[3, 0, 2, 3], false).unwrap();
        let Column::F32(m) = m else { unreachable!() };
        let bits: Vec<u32> = m.iter().map(|x| x.to_bits()).collect();
        let want: Vec<u32> = [-3.0f32, -1.0, -0.0, 0.0, 0.0, 2.0, 5.0, f32::NAN]
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(bits, want);
        // Descending runs merge descending.
        let m = merge_sorted_runs(Column::I32(vec![9, 2, 7, 7, -5]), &[2, 0, 3], true).unwrap();
        assert_eq!(m, Column::I32(vec![9, 7, 7, 2, -5]));
        assert!(merge_sorted_runs(Column::I32(vec![1]), &[2], false).is_err());
    }

    #[test]
    fn runs_sorted_by_two_keys_merge_stably() {
        // Rows sorted by (k ascending, f descending) in runs of 3, 2 and 3;
        // the payload names each row. Equal (k, f) pairs in several runs
        // keep the earlier run's row first; NaN is the largest f.
        let k = Column::I32(vec![1, 2, 2, 1, 2, 1, 2, 3]);
        let f = Column::F32(vec![5.0, f32::NAN, 0.5, 5.0, 0.5, 7.0, 0.5, -1.0]);
        let row = Column::U32(vec![0, 1, 2, 3, 4, 5, 6, 7]);
        let cols = [row, k, f];
        let order = merge_runs_by(&cols, &[3, 2, 3], &[(1, false), (2, true)]).unwrap();
        assert_eq!(order, [5, 0, 3, 1, 2, 4, 6, 7]);
        assert!(merge_runs_by(&cols, &[3, 2], &[(1, false)]).is_err());
        assert!(merge_runs_by(&cols, &[3, 2, 3], &[(3, false)]).is_err());
    }

    #[test]
    fn group_runs_merge_by_key_and_fold_in_run_order() {
        // Keys (f32: -0.0 is the key +0.0), a count, a sum, a first, a last.
        let keys = Column::F32(vec![-0.0, 1.0, 0.0, 2.0, 1.0]);
        let count = Column::U64(vec![2, 1, 3, 4, 5]);
        let sum = Column::I32(vec![10, 20, 30, 40, i32::MAX]);
        let first = Column::U32(vec![100, 101, 102, 103, 104]);
        let last = Column::U32(vec![200, 201, 202, 203, 204]);
        let aggs = [AggKind::Count, AggKind::Sum, AggKind::First, AggKind::Last];
        let out =
            merge_group_runs(&[keys, count, sum, first, last], &[2, 0, 2, 1], 1, &aggs).unwrap();
        let Column::F32(k) = &out[0] else {
            unreachable!()
        };
        // The first run's key for 0: -0.0.
        assert_eq!(
            k.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            [(-0.0f32).to_bits(), 1.0f32.to_bits(), 2.0f32.to_bits()]
        );
        assert_eq!(out[1], Column::U64(vec![5, 6, 4]));
        assert_eq!(
            out[2],
            Column::I32(vec![40, 20i32.wrapping_add(i32::MAX), 40])
        );
        assert_eq!(out[3], Column::U32(vec![100, 101, 103]));
        assert_eq!(out[4], Column::U32(vec![202, 204, 203]));
    }

    #[test]
    fn first_seen_runs_merge_in_first_seen_order() {
        // Run 0 sees 2, -0.0, NaN; run 1 nothing; run 2 sees +0.0 (the
        // group of -0.0), 5, another NaN (the NaN group) and 2 again.
        let nan2 = f32::from_bits(0x7fc0_0001);
        let keys = Column::F32(vec![2.0, -0.0, f32::NAN, 0.0, 5.0, nan2, 2.0]);
        let count = Column::U64(vec![1, 2, 3, 4, 5, 6, 7]);
        let min = Column::I32(vec![9, -3, 0, -4, 8, 1, 10]);
        let first = Column::U32(vec![100, 101, 102, 103, 104, 105, 106]);
        let last = Column::U32(vec![200, 201, 202, 203, 204, 205, 206]);
        let aggs = [AggKind::Count, AggKind::Min, AggKind::First, AggKind::Last];
        let out =
            merge_first_seen_runs(&[keys, count, min, first, last], &[3, 0, 4], 1, &aggs).unwrap();
        let Column::F32(k) = &out[0] else {
            unreachable!()
        };
        assert_eq!(
            k.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            [
                2.0f32.to_bits(),
                (-0.0f32).to_bits(),
                f32::NAN.to_bits(),
                5.0f32.to_bits()
            ]
        );
        assert_eq!(out[1], Column::U64(vec![8, 6, 9, 5]));
        assert_eq!(out[2], Column::I32(vec![9, -4, 0, 8]));
        assert_eq!(out[3], Column::U32(vec![100, 101, 102, 104]));
        assert_eq!(out[4], Column::U32(vec![206, 203, 205, 204]));
        // Runs that do not cover the columns are an error, not a guess.
        assert!(merge_first_seen_runs(&out, &[3], 1, &aggs).is_err());
    }
}
