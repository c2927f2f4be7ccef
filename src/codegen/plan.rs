//! A stage as a sequence of kernel dispatches (`KernelPlan`): the kernels,
//! the scratch buffers they share, the uniform block every dispatch reads,
//! and what the host reads back at the end.
//!
//! Everything here is target-neutral; an executor binds `BufferRef`s to its
//! own buffers and fills the uniform block with [`UniformLayout::write`].

use super::kernel::Kernel;
use crate::expr::{DType, Scalar};
use crate::plan::AggKind;
use std::fmt;

/// Where one value of the uniform block comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UniformSource {
    /// Number of positions of this run (chunk).
    Len,
    /// Positions per workgroup span (see [`KernelPlan::launch`]).
    Span,
    /// Number of workgroups of the span-wide dispatches.
    Groups,
    /// Element offset of position 0 in input binding `s`.
    InputOffset(u16),
    /// Index yielded at position 0 by enumerate slot `e`.
    IndexBase(u16),
    /// Query parameter slot `p`.
    Param(u16),
    /// A row limit: query parameter slot `p` (a `u64`) as a `u32`,
    /// saturated (a device run has fewer than `2^32` positions).
    Limit(u16),
    /// Rows of a join's build side (see [`KernelPlan::build`]).
    BuildLen,
}

/// One field of the uniform block.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct UniformSlot {
    /// Its value.
    pub source: UniformSource,
    /// Its type (`bool` is a 32-bit word).
    pub ty: DType,
}

/// The fields of the uniform block shared by all kernels of a plan, laid
/// out in order, each aligned to its size (4 or 8 bytes), the total rounded
/// up to 16 bytes: the layout of a struct of scalars in WGSL's uniform and
/// storage address spaces, and of a packed parameter buffer for PTX.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UniformLayout {
    /// The fields.
    pub slots: Vec<UniformSlot>,
}

/// Values of one run for [`UniformLayout::write`].
#[derive(Clone, Debug, Default)]
pub struct UniformValues<'a> {
    /// Positions of this run.
    pub len: u32,
    /// Positions per workgroup.
    pub span: u32,
    /// Number of workgroups.
    pub groups: u32,
    /// Per input binding: element offset.
    pub input_offsets: &'a [u32],
    /// Per enumerate slot: first index.
    pub index_bases: &'a [u64],
    /// Query parameters by slot.
    pub params: &'a [Scalar],
    /// Rows of a join's build side (0 without one).
    pub build_len: u32,
}

impl UniformLayout {
    /// The field index of `source`.
    pub fn field(&self, source: UniformSource) -> Option<usize> {
        self.slots.iter().position(|s| s.source == source)
    }

    /// Byte offset of every field, and the block's size.
    pub fn offsets(&self) -> (Vec<usize>, usize) {
        let mut at = 0usize;
        let offs = self
            .slots
            .iter()
            .map(|s| {
                let size = s.ty.size().max(4);
                at = at.next_multiple_of(size);
                let o = at;
                at += size;
                o
            })
            .collect();
        (offs, at.next_multiple_of(16).max(16))
    }

    /// The block's bytes for one run.
    pub fn write(&self, v: &UniformValues<'_>) -> Vec<u8> {
        let (offs, size) = self.offsets();
        let mut out = vec![0u8; size];
        for (slot, &o) in self.slots.iter().zip(&offs) {
            let value = match slot.source {
                UniformSource::Len => Scalar::U32(v.len),
                UniformSource::BuildLen => Scalar::U32(v.build_len),
                UniformSource::Span => Scalar::U32(v.span),
                UniformSource::Groups => Scalar::U32(v.groups),
                UniformSource::InputOffset(s) => Scalar::U32(v.input_offsets[s as usize]),
                UniformSource::IndexBase(e) => Scalar::U64(v.index_bases[e as usize]).cast(slot.ty),
                UniformSource::Param(p) => v.params[p as usize].cast(slot.ty),
                UniformSource::Limit(p) => {
                    let n = match v.params[p as usize] {
                        Scalar::U64(n) => n,
                        other => other.cast(DType::U64).to_bits(),
                    };
                    Scalar::U32(u32::try_from(n).unwrap_or(u32::MAX))
                }
            };
            let bits = value.to_bits();
            let size = slot.ty.size().max(4);
            out[o..o + size].copy_from_slice(&bits.to_le_bytes()[..size]);
        }
        out
    }
}

/// A buffer a dispatch binds, in the order of the kernel's bindings.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BufferRef {
    /// Input slot `s` of the stage.
    Input(u16),
    /// Output column `c` of the stage (one element per position).
    Output(u16),
    /// Scratch buffer `n` of the plan.
    Scratch(u16),
}

/// How many elements a scratch buffer holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScratchLen {
    /// One per workgroup of the span-wide dispatches.
    Groups,
    /// Exactly one.
    One,
    /// One per position of the run (a sort's words between passes).
    Positions,
    /// `n` per workgroup of the span-wide dispatches (a sort's digit counts).
    PerGroup(u32),
    /// Exactly `n` (a selection's state).
    Exactly(u32),
    /// One per row of a join's build side (its sorted words and rows).
    Build,
}

impl ScratchLen {
    /// Elements of a buffer for a run of `len` positions in `groups`
    /// workgroups, with `build` rows on a join's build side.
    pub fn elements(self, len: usize, groups: usize, build: usize) -> usize {
        match self {
            ScratchLen::Build => build.max(1),
            ScratchLen::Groups => groups,
            ScratchLen::One => 1,
            ScratchLen::Positions => len.max(1),
            ScratchLen::PerGroup(n) => groups * n as usize,
            ScratchLen::Exactly(n) => n as usize,
        }
    }
}

/// How a scratch buffer starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScratchInit {
    /// Whatever is there: the first dispatch writes it.
    Undefined,
    /// Once per stage run (not per chunk): the zero of its type.
    Zero,
    /// Once per stage run (not per chunk): parameter slot `p`.
    Param(u16),
}

/// A buffer used between dispatches of one plan.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scratch {
    /// A readable name.
    pub name: String,
    /// Element type (`bool` as 32-bit words).
    pub elem: DType,
    /// Size.
    pub len: ScratchLen,
    /// Initial content.
    pub init: ScratchInit,
}

/// How many workgroups a dispatch launches.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Groups {
    /// [`Launch::groups`] workgroups, each over its span of positions.
    Spans,
    /// One workgroup.
    One,
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dispatch {
    /// Index into [`KernelPlan::kernels`].
    pub kernel: usize,
    /// Grid size.
    pub groups: Groups,
    /// One per kernel binding, in order.
    pub buffers: Vec<BufferRef>,
}

/// The partial state of one aggregate, read back from scratch buffers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AggReadback {
    /// The aggregate.
    pub kind: AggKind,
    /// Type of the aggregated column (`None` for count).
    pub column: Option<DType>,
    /// Scratch buffers holding the state fields: the value; for arg-min/max
    /// the value then the `u32` position (`u32::MAX` when none).
    pub fields: Vec<u16>,
}

/// What the host reads after the last dispatch of a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Readback {
    /// One state per aggregate; `count` and positions are per run (chunk)
    /// and `u32`: the host widens them and adds the chunk's start.
    Aggregates(Vec<AggReadback>),
    /// The output columns: all `len` positions, or, with `count`, as many
    /// as scratch `count` says (compaction).
    Columns {
        /// Scratch holding the number of surviving positions (`u32`).
        count: Option<u16>,
    },
}

/// Grid of one run, from [`KernelPlan::launch`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Workgroups of the span-wide dispatches (at least 1).
    pub groups: u32,
    /// Positions per workgroup.
    pub span: u32,
}

/// How the outputs of a [`whole`](KernelPlan::whole) plan's chunks, each
/// run apart, merge into the plan's outputs on the host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MergeRuns {
    /// A sort of its one output column by that column: the chunks' sorted
    /// runs merge by the canonical order (`semantics::order`), stably.
    Sorted {
        /// The run is sorted by the complemented word.
        descending: bool,
        /// Top-k: the parameter slot of the rows kept (each chunk keeps
        /// its first `k`, so the merged runs' first `k` are the answer).
        fetch: Option<u16>,
    },
    /// Groups: `keys` key columns (ordered by their group words, `-0.0`
    /// as `+0.0`, every NaN one key), then one column per aggregate of
    /// `aggs` (counts, sums, mins, maxes, firsts, lasts). A key in several
    /// runs keeps the earlier run's key and folds its aggregates, the
    /// earlier run first (`semantics::merge`).
    Groups {
        /// Key columns.
        keys: usize,
        /// The aggregates' kinds, in output order.
        aggs: Vec<AggKind>,
        /// Each run's groups are in first-seen order, not sorted by key:
        /// the merged groups are too (a run's new keys follow every key
        /// of the runs before it, in the run's order).
        first_seen: bool,
    },
    /// A join: each chunk of the probe side joins the whole build side
    /// (bound whole, [`KernelPlan::build`]) and its rows, in probe order,
    /// follow the previous chunk's; nothing is merged.
    Append,
    /// A sort or top-k carrying columns: each chunk's rows come sorted by
    /// the output columns `keys` (most significant first, each with its
    /// direction), the outputs from `visible` on holding the keys that are
    /// no column of the stage's. The runs merge by those columns'
    /// canonical order (`semantics::order`), the earlier run first among
    /// equal keys, and the outputs from `visible` on are dropped.
    SortedBy {
        /// Output column and descending flag of each key.
        keys: Vec<(u16, bool)>,
        /// The stage's own outputs; the rest carry keys for the merge.
        visible: u16,
        /// Top-k: the parameter slot of the rows kept, as for `Sorted`.
        fetch: Option<u16>,
    },
}

/// A lowered stage: kernels and the dispatches that run them in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelPlan {
    /// Distinct kernels.
    pub kernels: Vec<Kernel>,
    /// Launches, in order; each sees the writes of the previous ones.
    pub dispatches: Vec<Dispatch>,
    /// Scratch buffers.
    pub scratch: Vec<Scratch>,
    /// The uniform block every kernel declares.
    pub uniforms: UniformLayout,
    /// Output column types (collect and scan).
    pub outputs: Vec<DType>,
    /// What to read back.
    pub readback: Readback,
    /// Elements per invocation used to size the grid.
    pub items_per_thread: u32,
    /// Upper bound on [`Launch::groups`].
    pub max_groups: u32,
    /// The dispatches must see all positions of the stage in one run (a
    /// sort): an executor that would split it into chunks declines instead.
    pub whole: bool,
    /// A [`whole`](Self::whole) plan whose chunks may run apart and be
    /// merged on the host (see `MergeRuns`), so inputs past one binding
    /// need not be declined.
    pub merge_runs: Option<MergeRuns>,
    /// The algorithm of a relational stage, for the run's metrics.
    pub algorithm: Option<crate::types::Algorithm>,
    /// Rows of the outputs whatever the run's length (a key count's
    /// keys), read back through the readback's `count`; `None`: one per
    /// position.
    pub fixed_rows: Option<u32>,
    /// Query inputs bound whole after the stage's own input slots, as
    /// input slots `stage.inputs.len()..`: a join's build side (its keys,
    /// then the columns an inner join adds), of equal length (the shortest
    /// bounds the rows, [`UniformSource::BuildLen`]).
    pub build: Vec<u16>,
    /// Outputs whose rows only the device knows (an inner join's matches):
    /// the executor runs the dispatches before `after`, reads the row
    /// count from scratch `rows` (a `u32` or `u64`), allocates the outputs
    /// (none of those dispatches binds one) and runs the rest.
    pub sized: Option<SizedOutputs>,
    /// A `u32` scratch word that a guarded kernel sets when a float
    /// operation saw or gave an infinity or a NaN where the target's
    /// compiler may assume none (see `codegen::finite`): the executor
    /// reads it with the run's results and discards the run when set.
    pub non_finite: Option<u16>,
}

/// See [`KernelPlan::sized`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SizedOutputs {
    /// Dispatches that run before the outputs exist.
    pub after: usize,
    /// Scratch holding the number of output rows.
    pub rows: u16,
}

impl KernelPlan {
    /// The outputs the stage returns: all of [`outputs`](Self::outputs)
    /// but those that only carry a sort's keys to a host merge
    /// (`MergeRuns::SortedBy`), which come back only when chunks merge.
    pub fn visible_outputs(&self) -> usize {
        match &self.merge_runs {
            Some(MergeRuns::SortedBy { visible, .. }) => *visible as usize,
            _ => self.outputs.len(),
        }
    }

    /// Rows every output buffer of a run of `len` positions holds.
    pub fn output_rows(&self, len: usize) -> usize {
        self.fixed_rows.map_or(len, |k| len.max(k as usize))
    }

    /// The grid for a run of `len` positions: enough workgroups for
    /// `items_per_thread` positions per invocation, at most `max_groups`,
    /// each over a contiguous span. Depends only on `len`, so a result never
    /// depends on anything but the input.
    pub fn launch(&self, len: usize) -> Launch {
        self.launch_with(len, 0)
    }

    /// The grid for a run of `len` positions and `build` rows on a join's
    /// build side: workgroups for the larger of the two (the build side is
    /// sorted by the same span-wide dispatches), each over a contiguous
    /// span of the `len` positions.
    pub fn launch_with(&self, len: usize, build: usize) -> Launch {
        let wg = self.kernels[0].workgroup_size as usize;
        let per_group = wg * self.items_per_thread as usize;
        let groups = len
            .max(build)
            .div_ceil(per_group)
            .clamp(1, self.max_groups as usize);
        Launch {
            groups: groups as u32,
            span: len.div_ceil(groups) as u32,
        }
    }
}

impl fmt::Display for KernelPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uniforms:")?;
        for s in &self.uniforms.slots {
            write!(f, " {:?}:{}", s.source, s.ty)?;
        }
        writeln!(f)?;
        for (i, s) in self.scratch.iter().enumerate() {
            writeln!(
                f,
                "scratch {i} {}: [{}] {:?} {:?}",
                s.name, s.elem, s.len, s.init
            )?;
        }
        for d in &self.dispatches {
            write!(f, "dispatch {} {:?}", self.kernels[d.kernel].name, d.groups)?;
            for b in &d.buffers {
                write!(f, " {b:?}")?;
            }
            writeln!(f)?;
        }
        if self.whole {
            writeln!(f, "whole")?;
        }
        if let Some(m) = &self.merge_runs {
            writeln!(f, "chunks merge on the host: {m:?}")?;
        }
        if !self.build.is_empty() {
            writeln!(f, "build inputs {:?}", self.build)?;
        }
        if let Some(s) = self.sized {
            writeln!(
                f,
                "outputs sized by scratch {} after {} dispatches",
                s.rows, s.after
            )?;
        }
        if let Some(j) = self.non_finite {
            writeln!(f, "non-finite values flagged in scratch {j}")?;
        }
        writeln!(f, "readback {:?}", self.readback)?;
        for k in &self.kernels {
            write!(f, "{k}")?;
        }
        Ok(())
    }
}
