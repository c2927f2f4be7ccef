//! The host side of PTX kernel plans: which buffers to allocate, what to
//! upload, which kernels to launch in which order, what to read back and
//! how chunk results combine, written once over the [`PtxDevice`] trait.
//!
//! The CUDA backend implements the trait with the driver API; the tests
//! implement it with a PTX interpreter. Both therefore run exactly this
//! code, so the protocol between the host and the kernels (parameter
//! order, the uniform block, scratch initialisation, chunk carries) is
//! tested without a GPU. Nothing here knows about CUDA.
//!
//! # Conventions of the kernels
//!
//! - A kernel's parameters are its bindings in order (each a `.u64` global
//!   address of the first element), then the uniform block as one
//!   `.param .align 16 .b8 cq_uniforms[size]` laid out by
//!   [`UniformLayout`](crate::codegen::UniformLayout): captured values are
//!   parameters, a new value never recompiles the module.
//! - `bool` elements are 32-bit words (0 or 1) on the device; conversion
//!   happens on upload and download.
//! - A binding may point into the middle of a buffer ([`BufferArg::offset`]):
//!   inputs are bound at their first position, outputs at the chunk's
//!   first position, so the kernels' `InputOffset` uniforms are always 0.
//!
//! # Chunks
//!
//! A stage of `len` positions runs in chunks of at most
//! [`RunLimits::max_chunk`] positions, each chunk a complete run of the
//! kernel plan (its own grid). Host inputs are uploaded chunk by chunk into
//! two alternating buffers, and the upload of chunk `i + 1` is issued right
//! after the launches of chunk `i`, before its results are read back, so a
//! device with a copy engine overlaps the two. Scratch buffers
//! initialised from the plan (`ScratchInit::Zero`, `Param`) are set once
//! per stage: the scan carry flows from chunk to chunk on the device.
//! Aggregates are read back per chunk and combined on the host in chunk
//! order; compaction reads the survivor count per chunk to place the next
//! chunk's output.
//!
//! Output columns that go to the host ([`run_plan_to_host`]) are written
//! the same way, into two alternating chunk-sized buffers per column:
//! chunk `i`'s download is started after its kernels and finished after
//! chunk `i + 1`'s kernels are queued, so it overlaps them, and it is
//! finished before chunk `i + 2` writes its buffer again. Columns kept on
//! the device ([`run_plan`]) are written into one buffer of the whole
//! length.

use crate::codegen::ptx::{element_size, write_module, PtxModule, PtxOptions, WriteError};
use crate::codegen::{
    lower_stage, BufferRef, Caps, Groups, KernelPlan, LowerError, Readback, ScratchInit,
    UniformValues,
};
use crate::expr::{DType, Scalar};
use crate::plan::{AggKind, PhysicalPlan, PlanOutput, StageInput};
use crate::semantics::{agg_identity, merge, prefix_settled, Moments, Partial};
use crate::types::{
    BackendError, BackendKind, Column, ColumnRef, Fault, Phase, PlanError, RunStats,
};
use smallvec::SmallVec;
use std::time::Instant;

/// One stage lowered and written as PTX.
#[derive(Clone, Debug)]
pub struct PtxStage {
    /// The kernels and their dispatch sequence.
    pub plan: KernelPlan,
    /// One module with an entry per kernel of `plan`, in order.
    pub module: PtxModule,
}

/// Every stage of a physical plan as PTX: the backend's compiled artifact
/// before it is loaded on a device.
#[derive(Clone, Debug)]
pub struct PtxPlan {
    /// One per stage, in order.
    pub stages: Vec<PtxStage>,
}

/// The launch shape and capabilities used for CUDA: 256 threads per block,
/// warp operations, 64-bit types.
pub fn cuda_caps() -> Caps {
    Caps {
        workgroup_size: 256,
        items_per_thread: 4,
        max_groups: 1024,
        subgroups: true,
        int64: true,
        f64: true,
    }
}

/// Why a plan could not be written as PTX.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A stage cannot be lowered for the device (a typed decline).
    #[error("stage {stage}: {error}")]
    Lower {
        /// The stage.
        stage: usize,
        /// Why.
        error: LowerError,
    },
    /// A stage's kernels could not be written.
    #[error("stage {stage}: {error}")]
    Write {
        /// The stage.
        stage: usize,
        /// Why.
        error: WriteError,
    },
}

/// Lowers every stage of `plan` and writes its PTX module.
pub fn compile(
    plan: &PhysicalPlan,
    caps: &Caps,
    options: &PtxOptions,
) -> Result<PtxPlan, CompileError> {
    let mut stages = Vec::with_capacity(plan.stages.len());
    for (stage, s) in plan.stages.iter().enumerate() {
        let kp = lower_stage(s, caps).map_err(|error| CompileError::Lower { stage, error })?;
        let module = write_module(&kp.kernels, options)
            .map_err(|error| CompileError::Write { stage, error })?;
        stages.push(PtxStage { plan: kp, module });
    }
    Ok(PtxPlan { stages })
}

/// A buffer bound to a kernel parameter, `offset` bytes into it.
#[derive(Debug)]
pub struct BufferArg<'a, B> {
    /// The buffer.
    pub buffer: &'a B,
    /// Byte offset of the first element.
    pub offset: usize,
}

impl<B> Clone for BufferArg<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for BufferArg<'_, B> {}

/// What the host protocol needs from a device. Operations are ordered:
/// each sees the effects of the previous ones (a device with several
/// streams orders them itself).
pub trait PtxDevice {
    /// A device allocation.
    type Buffer;
    /// A loaded module.
    type Module;
    /// A download in flight, from [`start_download`](Self::start_download).
    type Pending;

    /// Loads a module (JIT-compiles it for the device).
    fn load(&mut self, module: &PtxModule) -> Result<Self::Module, BackendError>;
    /// Allocates `bytes` bytes (at least 16).
    fn alloc(&mut self, bytes: usize) -> Result<Self::Buffer, BackendError>;
    /// Copies `data` to `dst` at byte `offset`.
    fn upload(
        &mut self,
        dst: &Self::Buffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), BackendError>;
    /// Copies `out.len()` bytes from `src` at byte `offset`, and returns
    /// when they are in `out`.
    fn download(
        &mut self,
        src: &Self::Buffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError>;
    /// Starts copying `len` bytes from `src` at byte `offset` without
    /// waiting for them: later operations may run before the copy
    /// completes, except that the bytes copied are those the previous
    /// operations left. Until [`finish_download`](Self::finish_download),
    /// nothing may write that range (the host protocol never does).
    fn start_download(
        &mut self,
        src: &Self::Buffer,
        offset: usize,
        len: usize,
    ) -> Result<Self::Pending, BackendError>;
    /// Waits for a started download and copies its bytes into `out`
    /// (exactly as many as it started with).
    fn finish_download(
        &mut self,
        pending: Self::Pending,
        out: &mut [u8],
    ) -> Result<(), BackendError>;
    /// Launches entry `entry` of `module` on `grid` blocks of `block`
    /// threads with the buffer parameters and the uniform block.
    fn launch(
        &mut self,
        module: &Self::Module,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, Self::Buffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError>;
}

/// An input column of a run.
#[derive(Debug)]
pub enum RunInput<'a, B> {
    /// In host memory.
    Host(ColumnRef<'a>),
    /// On the device: `len` elements of `dtype` (bool as words).
    Device {
        /// The buffer.
        buffer: &'a B,
        /// Element type.
        dtype: DType,
        /// Number of elements.
        len: usize,
    },
}

impl<B> RunInput<'_, B> {
    fn len(&self) -> usize {
        match self {
            RunInput::Host(c) => c.len(),
            RunInput::Device { len, .. } => *len,
        }
    }
}

/// A column left on the device by a run.
#[derive(Debug)]
pub struct DeviceData<B> {
    /// The buffer (it may be larger than the data).
    pub buffer: B,
    /// Element type.
    pub dtype: DType,
    /// Number of elements.
    pub len: usize,
}

/// What a run returns.
#[derive(Debug)]
pub enum RunOutput<B> {
    /// One scalar per aggregate, as `cpu_scalar` returns them.
    Aggregates(SmallVec<[Scalar; 4]>),
    /// The output columns, still on the device.
    Columns(Vec<DeviceData<B>>),
}

/// Sizes of one run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Most positions per chunk of a stage with a host input (at least 1):
    /// the size of its alternating device buffers, and so of the upload
    /// that overlaps the previous chunk's kernels.
    pub max_chunk: usize,
    /// Most positions per chunk of a stage whose inputs are all on the
    /// device and which reads something back per chunk (aggregates, a
    /// survivor count), at least 1. Such a stage has no upload to overlap,
    /// and each chunk costs its launches and a synchronous read, so its
    /// chunks are as large as the kernels' `u32` positions allow.
    pub max_resident_chunk: usize,
}

impl RunLimits {
    /// Chunks of at most `n` positions whatever the inputs (tests).
    pub fn uniform(n: usize) -> RunLimits {
        RunLimits {
            max_chunk: n,
            max_resident_chunk: n,
        }
    }
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            max_chunk: 1 << 24,
            max_resident_chunk: 1 << 30,
        }
    }
}

fn err(phase: Phase, m: impl Into<String>) -> BackendError {
    BackendError::new(BackendKind::Cuda, phase, m.into())
}

/// A column being filled from device bytes, in order. For every type but
/// `bool` the device bytes are the host bytes, so they are copied straight
/// into the final column (no per-element conversion, no second buffer);
/// `bool` words are narrowed at the end.
enum HostOut {
    /// The column and how many of its elements are filled.
    Typed(Column, usize),
    /// `bool` as device words.
    Words(Vec<u8>),
}

impl HostOut {
    /// Expecting `expected` elements (more may come; fewer are cut off).
    /// A large column is fresh zeroed memory advised to huge pages
    /// ([`Column::zeroed`]), so the copies into it fault few pages.
    fn new(dtype: DType, expected: usize) -> HostOut {
        match dtype {
            DType::Bool => HostOut::Words(Vec::with_capacity(expected * 4)),
            t => HostOut::Typed(Column::zeroed(t, expected), 0),
        }
    }

    /// Makes room for `n` more elements; returns the byte offset of the first.
    fn grow(&mut self, n: usize) -> usize {
        match self {
            HostOut::Words(w) => {
                let at = w.len();
                w.resize(at + 4 * n, 0);
                at
            }
            HostOut::Typed(c, filled) => {
                let at = *filled * c.dtype().size();
                *filled += n;
                if c.len() < *filled {
                    c.resize(*filled);
                }
                at
            }
        }
    }

    /// `len` bytes from byte `at`, to be overwritten with device bytes.
    fn bytes_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        match self {
            HostOut::Words(w) => &mut w[at..at + len],
            HostOut::Typed(c, _) => {
                &mut c.as_bytes_mut().expect("bool columns are filled as words")[at..at + len]
            }
        }
    }

    fn finish(self) -> Column {
        match self {
            HostOut::Words(w) => Column::from_device_bytes(DType::Bool, &w),
            HostOut::Typed(mut c, filled) => {
                c.resize(filled);
                c
            }
        }
    }
}

/// Downloads a device column.
pub fn download_column<D: PtxDevice>(
    dev: &mut D,
    data: &DeviceData<D::Buffer>,
    stats: &mut RunStats,
) -> Result<Column, BackendError> {
    let mut out = HostOut::new(data.dtype, data.len);
    let at = out.grow(data.len);
    let bytes = data.len * element_size(data.dtype);
    if bytes > 0 {
        dev.download(&data.buffer, 0, out.bytes_mut(at, bytes))?;
    }
    stats.bytes_downloaded += bytes as u64;
    Ok(out.finish())
}

fn read_scalar<D: PtxDevice>(
    dev: &mut D,
    buf: &D::Buffer,
    ty: DType,
    stats: &mut RunStats,
) -> Result<Scalar, BackendError> {
    let mut b = [0u8; 8];
    let size = element_size(ty);
    dev.download(buf, 0, &mut b[..size])?;
    stats.bytes_downloaded += size as u64;
    Ok(Scalar::from_bits(ty, u64::from_le_bytes(b)))
}

fn alloc<D: PtxDevice>(
    dev: &mut D,
    bytes: usize,
    stats: &mut RunStats,
) -> Result<D::Buffer, BackendError> {
    let bytes = bytes.next_multiple_of(16).max(16);
    stats.bytes_allocated += bytes as u64;
    dev.alloc(bytes)
}

/// Runs every stage of `plan`; `modules[i]` is `ptx.stages[i].module`
/// loaded on `dev`. Intermediate columns stay on the device, and so do the
/// output columns: this is the run of a result kept on the device. A
/// result that goes to the host runs with [`run_plan_to_host`], which
/// downloads it chunk by chunk behind the kernels.
#[allow(clippy::too_many_arguments)]
pub fn run_plan<D: PtxDevice>(
    dev: &mut D,
    plan: &PhysicalPlan,
    ptx: &PtxPlan,
    modules: &[&D::Module],
    inputs: &[RunInput<'_, D::Buffer>],
    params: &[Scalar],
    limits: &RunLimits,
    stats: &mut RunStats,
) -> Result<RunOutput<D::Buffer>, BackendError> {
    let out = run_stages(
        dev,
        plan,
        ptx,
        modules,
        inputs,
        params,
        limits,
        Sink::Device,
        stats,
    )?;
    Ok(match out {
        StageOutput::Aggregates(a) => RunOutput::Aggregates(a),
        StageOutput::Device(c) => RunOutput::Columns(c),
        StageOutput::Host(_) => unreachable!("a device run keeps its columns on the device"),
    })
}

/// Runs every stage of `plan` like [`run_plan`] and returns the result on
/// the host: aggregates as `run_plan` reads them, and the last stage's
/// output columns downloaded chunk by chunk into host columns.
///
/// Each output column of the last stage has two alternating chunk-sized
/// buffers (one when the stage is a single chunk) instead of one for the
/// whole length. Chunk `k`'s downloads are started right after its
/// kernels (and the upload of chunk `k + 1`'s inputs) are queued, and
/// finished only after chunk `k + 1`'s kernels are queued, so a device
/// with a copy engine overlaps them with those kernels, which write the
/// other buffer. At most one chunk's downloads are in flight, and a buffer
/// is written again (by chunk `k + 2`) only after the download reading it
/// has finished. Compaction reads each chunk's survivor count before
/// starting the chunk's downloads, synchronously (it waits for that
/// chunk's kernels, not for the next chunk's), and downloads only the
/// survivors. Downloaded bytes are counted in
/// [`RunStats::bytes_downloaded`], and the host's wait for them in
/// [`RunStats::transfer_out`].
#[allow(clippy::too_many_arguments)]
pub fn run_plan_to_host<D: PtxDevice>(
    dev: &mut D,
    plan: &PhysicalPlan,
    ptx: &PtxPlan,
    modules: &[&D::Module],
    inputs: &[RunInput<'_, D::Buffer>],
    params: &[Scalar],
    limits: &RunLimits,
    stats: &mut RunStats,
) -> Result<PlanOutput, BackendError> {
    let out = run_stages(
        dev,
        plan,
        ptx,
        modules,
        inputs,
        params,
        limits,
        Sink::Host,
        stats,
    )?;
    Ok(match out {
        StageOutput::Aggregates(a) => PlanOutput::Aggregates(a),
        StageOutput::Host(c) => PlanOutput::Columns(c),
        StageOutput::Device(_) => unreachable!("a host run downloads its last stage's columns"),
    })
}

/// Where the last stage's output columns go.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Sink {
    /// They stay on the device (and so do every other stage's).
    Device,
    /// They are downloaded chunk by chunk.
    Host,
}

/// What one stage produced.
enum StageOutput<B> {
    Aggregates(SmallVec<[Scalar; 4]>),
    Device(Vec<DeviceData<B>>),
    Host(Vec<Column>),
}

#[allow(clippy::too_many_arguments)]
fn run_stages<D: PtxDevice>(
    dev: &mut D,
    plan: &PhysicalPlan,
    ptx: &PtxPlan,
    modules: &[&D::Module],
    inputs: &[RunInput<'_, D::Buffer>],
    params: &[Scalar],
    limits: &RunLimits,
    sink: Sink,
    stats: &mut RunStats,
) -> Result<StageOutput<D::Buffer>, BackendError> {
    let mut produced: Vec<Vec<DeviceData<D::Buffer>>> = Vec::new();
    for (i, stage) in plan.stages.iter().enumerate() {
        let last = i + 1 == plan.stages.len();
        // A join's build side: query inputs bound after the stage's own.
        let build = ptx.stages[i]
            .plan
            .build
            .iter()
            .map(|&n| StageInput::Source(n));
        let stage_inputs: Vec<RunInput<'_, D::Buffer>> = stage
            .inputs
            .iter()
            .copied()
            .chain(build)
            .map(|inp| match inp {
                StageInput::Source(n) => match &inputs[n as usize] {
                    RunInput::Host(c) => RunInput::Host(*c),
                    RunInput::Device { buffer, dtype, len } => RunInput::Device {
                        buffer: *buffer,
                        dtype: *dtype,
                        len: *len,
                    },
                },
                StageInput::Stage { stage, column } => {
                    let d = &produced[stage as usize][column as usize];
                    RunInput::Device {
                        buffer: &d.buffer,
                        dtype: d.dtype,
                        len: d.len,
                    }
                }
            })
            .collect();
        let out = run_stage(
            dev,
            plan,
            i,
            &ptx.stages[i],
            modules[i],
            &stage_inputs,
            params,
            limits,
            if last { sink } else { Sink::Device },
            stats,
        )?;
        drop(stage_inputs);
        if last {
            return Ok(out);
        }
        match out {
            StageOutput::Device(c) => produced.push(c),
            StageOutput::Aggregates(_) => {
                return Err(err(Phase::Execute, Fault::ReduceNotLast.at(i).to_string()))
            }
            StageOutput::Host(_) => unreachable!("only the last stage downloads"),
        }
    }
    Err(err(Phase::Execute, PlanError::NoStage.to_string()))
}

/// The host state of one aggregate across chunks.
#[derive(Clone, Debug)]
struct AggState {
    value: Option<Scalar>,
    /// Arg-min/max: the global position of `value`.
    pos: Option<u64>,
    /// `m2`: the moments so far.
    moments: Moments,
}

/// One output column's download of one chunk, in flight.
struct InFlight<P> {
    /// Output column.
    column: usize,
    /// Byte position in the column's host bytes.
    at: usize,
    bytes: usize,
    pending: P,
}

/// Finishes every download in flight into the host columns' bytes.
fn finish_downloads<D: PtxDevice>(
    dev: &mut D,
    in_flight: &mut Vec<InFlight<D::Pending>>,
    host: &mut [HostOut],
    stats: &mut RunStats,
) -> Result<(), BackendError> {
    let t = Instant::now();
    for f in in_flight.drain(..) {
        dev.finish_download(f.pending, host[f.column].bytes_mut(f.at, f.bytes))?;
        stats.bytes_downloaded += f.bytes as u64;
    }
    stats.transfer_out += t.elapsed();
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_stage<D: PtxDevice>(
    dev: &mut D,
    plan: &PhysicalPlan,
    index: usize,
    ptx: &PtxStage,
    module: &D::Module,
    inputs: &[RunInput<'_, D::Buffer>],
    params: &[Scalar],
    limits: &RunLimits,
    sink: Sink,
    stats: &mut RunStats,
) -> Result<StageOutput<D::Buffer>, BackendError> {
    let stage = &plan.stages[index];
    let kp = &ptx.plan;
    if kp.algorithm.is_some() {
        stats.algorithm = kp.algorithm;
    }
    let lens: SmallVec<[usize; 4]> = inputs.iter().map(|i| i.len()).collect();
    // Slots past the stage's own are a join's build side, read whole.
    let nin = stage.inputs.len();
    let range = stage.resolve_range(&lens[..nin], params);
    let len = range.len;
    let build = lens[nin..].iter().copied().min().unwrap_or(0);
    if build > u32::MAX as usize / 2 {
        return Err(BackendError::new(
            BackendKind::Cuda,
            Phase::Support,
            format!("a build side of {build} rows is past 2^31 positions"),
        ));
    }
    // Where slot `s` starts and how many elements a chunk of `n` from
    // position `c0` reads of it.
    let slot_part = |s: usize, c0: usize, n: usize| {
        if s < nin {
            (range.offsets[s] + c0, n)
        } else {
            (0, build)
        }
    };
    // Large chunks where chunking buys nothing and costs a synchronous read
    // per chunk: inputs all on the device and a per-chunk readback
    // (aggregates, a survivor count).
    let resident = inputs.iter().all(|i| matches!(i, RunInput::Device { .. }))
        && !matches!(kp.readback, Readback::Columns { count: None });
    let max_chunk = if resident {
        limits.max_resident_chunk
    } else {
        limits.max_chunk
    }
    .clamp(1, u32::MAX as usize / 2);
    // A plan that needs every position at once (a sort) runs as one chunk,
    // and so does a key count (its chunks would count apart).
    let max_chunk = if kp.whole || kp.fixed_rows.is_some() {
        if len > u32::MAX as usize / 2 {
            return Err(BackendError::new(
                BackendKind::Cuda,
                Phase::Support,
                format!(
                    "a {} of {len} rows is past 2^31 positions",
                    stage.terminal.kind_name()
                ),
            ));
        }
        len.max(1)
    } else {
        max_chunk
    };
    let chunks: Vec<(usize, usize)> = if len == 0 {
        vec![(0, 0)]
    } else {
        (0..len)
            .step_by(max_chunk)
            .map(|c0| (c0, (c0 + max_chunk).min(len)))
            .collect()
    };
    let chunk_cap = chunks.iter().map(|&(a, b)| b - a).max().unwrap_or(0);
    let max_groups = chunks
        .iter()
        .map(|&(a, b)| kp.launch_with(b - a, build).groups)
        .max()
        .unwrap_or(1) as usize;
    let to_host = sink == Sink::Host && matches!(kp.readback, Readback::Columns { .. });

    // Scratch, initialised once per stage.
    let mut scratch = Vec::with_capacity(kp.scratch.len());
    for s in &kp.scratch {
        let n = s.len.elements(chunk_cap, max_groups, build);
        let size = element_size(s.elem);
        let buf = alloc(dev, n * size, stats)?;
        let init = match s.init {
            ScratchInit::Undefined => None,
            ScratchInit::Zero => Some(Scalar::zero(s.elem)),
            ScratchInit::Param(p) => Some(params[p as usize].cast(s.elem)),
        };
        if let Some(v) = init {
            let bytes: Vec<u8> = (0..n)
                .flat_map(|_| v.to_bits().to_le_bytes()[..size].to_vec())
                .collect();
            dev.upload(&buf, 0, &bytes)?;
            stats.bytes_uploaded += bytes.len() as u64;
        }
        scratch.push(buf);
    }

    // Outputs kept on the device: one buffer of `len` elements per column
    // (compaction writes fewer). Outputs going to the host: two
    // alternating chunk-sized buffers per column, chunk `ci` in `ci % 2`.
    let (out_len, out_copies) = if to_host {
        (kp.output_rows(chunk_cap), chunks.len().min(2))
    } else {
        (kp.output_rows(len), 1)
    };
    // Outputs sized on the device are allocated when their rows are known.
    let out_len = if kp.sized.is_some() { 0 } else { out_len };
    let mut outputs: Vec<SmallVec<[D::Buffer; 2]>> = Vec::with_capacity(kp.outputs.len());
    for &t in &kp.outputs {
        let mut copies = SmallVec::new();
        for _ in 0..out_copies {
            copies.push(alloc(dev, out_len * element_size(t), stats)?);
        }
        outputs.push(copies);
    }
    // The host bytes of each output column, and the downloads in flight.
    let mut host: Vec<HostOut> = if to_host {
        let whole = matches!(kp.readback, Readback::Columns { count: None });
        kp.outputs[..kp.visible_outputs()]
            .iter()
            .map(|&t| HostOut::new(t, if whole { len } else { 0 }))
            .collect()
    } else {
        Vec::new()
    };
    let mut in_flight: Vec<InFlight<D::Pending>> = Vec::new();

    // Host inputs go through two alternating chunk buffers.
    let mut staging: Vec<Option<[D::Buffer; 2]>> = Vec::with_capacity(inputs.len());
    for (s, inp) in inputs.iter().enumerate() {
        staging.push(match inp {
            RunInput::Host(c) => {
                let bytes = slot_part(s, 0, chunk_cap).1 * element_size(c.dtype());
                Some([alloc(dev, bytes, stats)?, alloc(dev, bytes, stats)?])
            }
            RunInput::Device { .. } => None,
        });
    }

    let mut aggs: Vec<AggState> = match &kp.readback {
        Readback::Aggregates(list) => list
            .iter()
            .map(|_| AggState {
                value: None,
                pos: None,
                moments: Moments::EMPTY,
            })
            .collect(),
        Readback::Columns { .. } => Vec::new(),
    };
    let mut written = 0usize;
    // Rows of outputs sized on the device, once known.
    let mut sized_rows: Option<usize> = None;
    let zero_offsets = vec![0u32; inputs.len()];

    // Host inputs of chunk `ci` into their buffer `ci % 2`.
    let upload_chunk = |dev: &mut D, ci: usize, stats: &mut RunStats| {
        let (c0, c1) = chunks[ci];
        for (s, inp) in inputs.iter().enumerate() {
            if let (RunInput::Host(c), Some(bufs)) = (inp, &staging[s]) {
                let (first, n) = slot_part(s, c0, c1 - c0);
                if n > 0 {
                    let t = Instant::now();
                    let bytes = c.slice(first..first + n).device_bytes();
                    dev.upload(&bufs[ci % 2], 0, &bytes)?;
                    stats.bytes_uploaded += bytes.len() as u64;
                    stats.transfer_in += t.elapsed();
                }
            }
        }
        Ok::<(), BackendError>(())
    };
    upload_chunk(dev, 0, stats)?;

    for (ci, &(c0, c1)) in chunks.iter().enumerate() {
        let n = c1 - c0;
        let launch = kp.launch_with(n, build);
        // Inputs of this chunk (host ones uploaded already).
        let mut input_args: Vec<BufferArg<'_, D::Buffer>> = Vec::with_capacity(inputs.len());
        for (s, inp) in inputs.iter().enumerate() {
            let (first, read) = slot_part(s, c0, n);
            match inp {
                RunInput::Host(_) => {
                    let bufs = staging[s]
                        .as_ref()
                        .expect("staging buffers of a host input");
                    input_args.push(BufferArg {
                        buffer: &bufs[ci % 2],
                        offset: 0,
                    });
                }
                RunInput::Device { buffer, dtype, .. } => {
                    stats.bytes_resident += (read * dtype.size()) as u64;
                    input_args.push(BufferArg {
                        buffer,
                        offset: first * element_size(*dtype),
                    })
                }
            }
        }
        let index_bases: SmallVec<[u64; 2]> =
            range.index_offsets.iter().map(|&o| o + c0 as u64).collect();
        let uniforms = kp.uniforms.write(&UniformValues {
            len: n as u32,
            span: launch.span,
            groups: launch.groups,
            input_offsets: &zero_offsets,
            index_bases: &index_bases,
            params,
            build_len: build as u32,
        });
        // Which copy of the outputs this chunk writes, from which element.
        let (out_copy, out_base) = match kp.readback {
            _ if to_host => (ci % out_copies, 0),
            Readback::Columns { count: Some(_) } => (0, written),
            _ => (0, c0),
        };
        for (di, d) in kp.dispatches.iter().enumerate() {
            if let Some(sz) = kp.sized.filter(|sz| sz.after == di) {
                let ty = kp.scratch[sz.rows as usize].elem;
                let rows = read_scalar(dev, &scratch[sz.rows as usize], ty, stats)?.to_bits();
                if rows > u32::MAX as u64 / 2 {
                    return Err(err(
                        Phase::Support,
                        format!(
                            "a {} of {rows} rows out is past 2^31 positions",
                            stage.terminal.kind_name()
                        ),
                    ));
                }
                sized_rows = Some(rows as usize);
                for (c, &t) in kp.outputs.iter().enumerate() {
                    outputs[c] =
                        smallvec::smallvec![alloc(dev, rows as usize * element_size(t), stats)?];
                }
            }
            let args: Vec<BufferArg<'_, D::Buffer>> = d
                .buffers
                .iter()
                .map(|b| match *b {
                    BufferRef::Input(s) => input_args[s as usize],
                    BufferRef::Output(c) => BufferArg {
                        buffer: &outputs[c as usize][out_copy],
                        offset: out_base * element_size(kp.outputs[c as usize]),
                    },
                    BufferRef::Scratch(s) => BufferArg {
                        buffer: &scratch[s as usize],
                        offset: 0,
                    },
                })
                .collect();
            let grid = match d.groups {
                Groups::Spans => launch.groups,
                Groups::One => 1,
            };
            let k = &kp.kernels[d.kernel];
            dev.launch(module, d.kernel, grid, k.workgroup_size, &args, &uniforms)?;
            stats.launches += 1;
        }
        // The next chunk's upload is queued before this chunk's results are
        // read back, so a device with a copy engine overlaps it with these
        // kernels (its buffer was last read by chunk `ci - 1`).
        if ci + 1 < chunks.len() {
            upload_chunk(dev, ci + 1, stats)?;
        }
        // The previous chunk's downloads ran behind these kernels. They
        // finish before this chunk's start: at most one chunk's downloads
        // are in flight, and the buffers they read are free again before
        // chunk `ci + 1` writes them.
        finish_downloads(dev, &mut in_flight, &mut host, stats)?;
        let mut chunk_out = n;
        match &kp.readback {
            Readback::Aggregates(list) => {
                for (a, st) in list.iter().zip(aggs.iter_mut()) {
                    let ty = |f: usize| kp.scratch[a.fields[f] as usize].elem;
                    let mut v = read_scalar(dev, &scratch[a.fields[0] as usize], ty(0), stats)?;
                    if a.kind == AggKind::Count {
                        // Per-chunk counts are u32; the total is a u64.
                        v = Scalar::U64(v.to_bits() as u32 as u64);
                    }
                    let field = |dev: &mut D, f: usize, stats: &mut RunStats| {
                        read_scalar(dev, &scratch[a.fields[f] as usize], ty(f), stats)
                    };
                    let (mut pos, mut moments) = (None, Moments::EMPTY);
                    match a.kind {
                        AggKind::ArgMin | AggKind::ArgMax | AggKind::First | AggKind::Last => {
                            let p = field(dev, 1, stats)?.to_bits() as u32;
                            pos = (p != u32::MAX).then_some(c0 as u64 + p as u64);
                        }
                        AggKind::M2 => {
                            // Count (`u32` per chunk), mean, m2.
                            moments = Moments {
                                n: v.to_bits() as u32 as u64,
                                mean: field(dev, 1, stats)?.as_f64(),
                                m2: field(dev, 2, stats)?.as_f64(),
                            };
                            v = Scalar::F64(moments.m2);
                        }
                        _ => {}
                    }
                    merge_chunk(&a.kind, st, v, pos, moments, params);
                }
                // Settled by a prefix (a survivor found for `first`, an
                // `any` true): the later chunks cannot change the result.
                if prefix_settled(
                    list.iter()
                        .zip(aggs.iter())
                        .map(|(a, st)| (&a.kind, st.value, st.pos.is_some())),
                ) {
                    let end = chunks.last().map_or(c1, |c| c.1);
                    stats.elements_skipped += (end - c1) as u64;
                    break;
                }
            }
            Readback::Columns { count: Some(c) } => {
                let k = read_scalar(dev, &scratch[*c as usize], DType::U32, stats)?;
                chunk_out = k.to_bits() as usize;
                if chunk_out > sized_rows.unwrap_or(kp.output_rows(n)) {
                    return Err(err(
                        Phase::Execute,
                        format!("chunk {ci} of {n} positions reports {chunk_out} survivors"),
                    ));
                }
                written += chunk_out;
            }
            Readback::Columns { count: None } => {}
        }
        if to_host {
            // One run: a sort's key columns for a merge stay behind.
            for (c, &t) in kp.outputs[..kp.visible_outputs()].iter().enumerate() {
                let bytes = chunk_out * element_size(t);
                if bytes == 0 {
                    continue;
                }
                let at = host[c].grow(chunk_out);
                let pending = dev.start_download(&outputs[c][out_copy], 0, bytes)?;
                in_flight.push(InFlight {
                    column: c,
                    at,
                    bytes,
                    pending,
                });
            }
        }
    }
    finish_downloads(dev, &mut in_flight, &mut host, stats)?;

    Ok(match &kp.readback {
        Readback::Aggregates(list) => StageOutput::Aggregates(
            list.iter()
                .zip(aggs)
                .map(|(a, st)| finish_agg(&a.kind, a.column, st, params))
                .collect(),
        ),
        Readback::Columns { .. } if to_host => {
            StageOutput::Host(host.into_iter().map(HostOut::finish).collect())
        }
        Readback::Columns { count } => {
            let n = if count.is_some() { written } else { len };
            StageOutput::Device(
                outputs
                    .into_iter()
                    .zip(&kp.outputs)
                    .take(kp.visible_outputs())
                    .map(|(copies, &dtype)| DeviceData {
                        buffer: copies
                            .into_iter()
                            .next()
                            .expect("one output buffer per column on the device"),
                        dtype,
                        len: n,
                    })
                    .collect(),
            )
        }
    })
}

/// Folds one chunk's state into the running state, chunks in order
/// ([`semantics::merge`](crate::semantics::merge)).
fn merge_chunk(
    kind: &AggKind,
    st: &mut AggState,
    v: Scalar,
    pos: Option<u64>,
    moments: Moments,
    params: &[Scalar],
) {
    let Some(acc) = st.value else {
        st.value = Some(v);
        st.pos = pos;
        st.moments = moments;
        return;
    };
    let m = merge(
        kind,
        Partial {
            value: acc,
            pos: st.pos,
            moments: st.moments,
        },
        Partial {
            value: v,
            pos,
            moments,
        },
        params,
    );
    st.value = Some(m.value);
    st.pos = m.pos;
    st.moments = m.moments;
}

fn finish_agg(kind: &AggKind, column: Option<DType>, st: AggState, params: &[Scalar]) -> Scalar {
    let ty = column.unwrap_or(DType::U64);
    match kind {
        AggKind::Count => Scalar::U64(st.value.map(|v| v.to_bits()).unwrap_or(0)),
        AggKind::ArgMin | AggKind::ArgMax => Scalar::U64(st.pos.unwrap_or(0)),
        _ => st.value.unwrap_or_else(|| agg_identity(kind, ty, params)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools_travel_as_words() {
        let b = ColumnRef::Bool(&[true, false, true]).device_bytes();
        assert_eq!(b, vec![1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(
            Column::from_device_bytes(DType::Bool, &b),
            Column::Bool(vec![true, false, true])
        );
        let f = ColumnRef::F64(&[1.5]).device_bytes();
        assert_eq!(
            Column::from_device_bytes(DType::F64, &f),
            Column::F64(vec![1.5])
        );
        // A partial trailing element is ignored, not a panic.
        let mut odd = ColumnRef::I32(&[7, -2]).device_bytes().into_owned();
        odd.push(9);
        assert_eq!(
            Column::from_device_bytes(DType::I32, &odd),
            Column::I32(vec![7, -2])
        );
        let mut words = ColumnRef::Bool(&[true]).device_bytes().into_owned();
        words.extend([1, 0]);
        assert_eq!(
            Column::from_device_bytes(DType::Bool, &words),
            Column::Bool(vec![true])
        );
    }

    #[test]
    fn chunk_states_combine_in_order() {
        let mut st = AggState {
            value: None,
            pos: None,
            moments: Moments::EMPTY,
        };
        merge_chunk(
            &AggKind::ArgMin,
            &mut st,
            Scalar::F32(2.0),
            Some(3),
            Moments::EMPTY,
            &[],
        );
        merge_chunk(
            &AggKind::ArgMin,
            &mut st,
            Scalar::F32(2.0),
            Some(9),
            Moments::EMPTY,
            &[],
        );
        merge_chunk(
            &AggKind::ArgMin,
            &mut st,
            Scalar::F32(f32::NAN),
            None,
            Moments::EMPTY,
            &[],
        );
        assert_eq!(
            finish_agg(&AggKind::ArgMin, Some(DType::F32), st, &[]),
            Scalar::U64(3)
        );
        let mut c = AggState {
            value: None,
            pos: None,
            moments: Moments::EMPTY,
        };
        merge_chunk(
            &AggKind::Count,
            &mut c,
            Scalar::U64(5),
            None,
            Moments::EMPTY,
            &[],
        );
        merge_chunk(
            &AggKind::Count,
            &mut c,
            Scalar::U64(u32::MAX as u64),
            None,
            Moments::EMPTY,
            &[],
        );
        assert_eq!(
            finish_agg(&AggKind::Count, None, c, &[]),
            Scalar::U64(u32::MAX as u64 + 5)
        );
    }
}
