//! Lowering of fused stages to kernel plans.
//!
//! Every stage shape uses the same few building blocks, written once:
//!
//! - the grid: `groups` workgroups, workgroup `w` owning the contiguous span
//!   `[w * span, min((w + 1) * span, len))` of positions;
//! - a per-invocation loop over the span, strided (coalesced) for
//!   commutative aggregates and contiguous per invocation when a user
//!   combine needs the order kept;
//! - a workgroup reduction: an order-preserving tree over shared memory
//!   (`sh[t] = merge(sh[t], sh[t + s])` for `t % 2s == 0`), or subgroup
//!   operations when the device has them and every aggregate is commutative;
//! - a span scan (`scan_span`): tiles of `workgroup * items` positions, each
//!   invocation folding its contiguous items, a Hillis–Steele scan of the
//!   invocation totals in shared memory, then a second walk applying the
//!   prefix, with a carry from tile to tile.
//!
//! Shapes: store = one kernel; reduce = partials per workgroup + one
//! workgroup combining them; scan = reduce-then-scan (span totals, one
//! workgroup scanning the totals with a carry kept across chunks, then the
//! span scans); filter + collect = the same three passes over survivor
//! flags, the last one scattering survivors to their scanned positions, so
//! order is kept and no pass waits on another workgroup.

use crate::codegen::kernel::{
    u32c, Access, BindingId, Builtin, FieldId, KernelBuilder, Local, Op, Operand, Stmt,
    UniformField,
};
use crate::codegen::plan::{
    AggReadback, BufferRef, Dispatch, Groups, KernelPlan, MergeRuns, Readback, Scratch,
    ScratchInit, ScratchLen, UniformLayout, UniformSlot, UniformSource,
};
use crate::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp};
use crate::plan::{AggKind, Combine, PhysicalPlan, ScanOp, Stage, Terminal};
use crate::types::Decline;
use std::collections::BTreeMap;
use std::fmt;

mod blocks;
mod count;
mod element;
mod group;
mod join;
mod select;
mod shapes;
mod sort;

use element::{emit_arena, Leaf};

/// What the target device offers, and the launch shape to use.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Caps {
    /// Invocations per workgroup (a power of two).
    pub workgroup_size: u32,
    /// Positions per invocation used to size the grid and scan tiles.
    pub items_per_thread: u32,
    /// Most workgroups of one dispatch (the partial buffers' size).
    pub max_groups: u32,
    /// Subgroup operations are available.
    pub subgroups: bool,
    /// 64-bit integers are available. Without them an enumerate index is
    /// computed in 32 bits and may only be cast to a 32-bit type.
    pub int64: bool,
    /// `f64` is available.
    pub f64: bool,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            workgroup_size: 256,
            items_per_thread: 4,
            max_groups: 1024,
            subgroups: false,
            int64: true,
            f64: true,
        }
    }
}

/// Why a stage cannot be lowered for a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerError(pub Decline);

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for LowerError {}

type R<T> = Result<T, LowerError>;

fn err<T>(m: impl Into<String>) -> R<T> {
    Err(LowerError(Decline::from(m.into())))
}

/// Lowers every stage of `plan`.
pub fn lower_plan(plan: &PhysicalPlan, caps: &Caps) -> R<Vec<KernelPlan>> {
    plan.stages.iter().map(|s| lower_stage(s, caps)).collect()
}

/// Lowers one stage.
pub fn lower_stage(stage: &Stage, caps: &Caps) -> R<KernelPlan> {
    if !caps.workgroup_size.is_power_of_two() {
        return err("workgroup size must be a power of two");
    }
    Lower::new(stage, caps)?.run()
}

/// One aggregate as a monoid on a few typed state fields.
#[derive(Clone, Debug)]
struct Agg {
    kind: AggKind,
    /// Type of the aggregated column (`u32` for count).
    ty: DType,
    /// A sum or count that stops at the type's maximum instead of
    /// wrapping (an inner join's rows out counted in `u32` where the
    /// device has no 64-bit integers: a saturated count is past any
    /// binding, and the executor declines it).
    saturating: bool,
}

const NONE: u32 = u32::MAX;

impl Agg {
    fn fields(&self) -> Vec<DType> {
        match self.kind {
            AggKind::Count => vec![DType::U32],
            AggKind::Any | AggKind::All => vec![DType::Bool],
            AggKind::ArgMin | AggKind::ArgMax | AggKind::First | AggKind::Last => {
                vec![self.ty, DType::U32]
            }
            // Count, mean, sum of squared deviations (`semantics::Moments`).
            AggKind::M2 => vec![DType::U32, DType::F64, DType::F64],
            _ => vec![self.ty],
        }
    }

    /// Whether a subgroup operation reduces it (commutative, 32-bit).
    fn subgroup_op(&self) -> Option<crate::codegen::kernel::SubgroupOp> {
        use crate::codegen::kernel::SubgroupOp as S;
        let narrow = matches!(self.ty, DType::I32 | DType::U32);
        if self.saturating {
            return None;
        }
        match self.kind {
            AggKind::Count => Some(S::Add),
            AggKind::Any => Some(S::Any),
            AggKind::All => Some(S::All),
            AggKind::Sum if narrow || self.ty == DType::F32 => Some(S::Add),
            AggKind::Min if narrow => Some(S::Min),
            AggKind::Max if narrow => Some(S::Max),
            _ => None,
        }
    }

    fn commutative(&self) -> bool {
        !matches!(self.kind, AggKind::Custom(_))
    }
}

/// Uniform values loaded into registers at the start of a kernel.
struct Pre {
    len: Local,
    span: Local,
    groups: Local,
    offs: Vec<Local>,
    idx: Vec<Local>,
    params: BTreeMap<u16, Local>,
    t: Local,
    w: Local,
}

struct Lower<'a> {
    stage: &'a Stage,
    caps: &'a Caps,
    layout: UniformLayout,
    fields: Vec<UniformField>,
    wg: u32,
}

fn collect_params(arena: &ExprArena, out: &mut BTreeMap<u16, DType>) {
    for (_, n) in arena.iter() {
        if let Node::Param(p) = n.node {
            out.insert(p, n.ty);
        }
    }
}

impl<'a> Lower<'a> {
    fn new(stage: &'a Stage, caps: &'a Caps) -> R<Lower<'a>> {
        let mut params = BTreeMap::new();
        collect_params(&stage.program, &mut params);
        let mut note_combine = |c: &Combine, ty: DType| {
            collect_params(&c.program, &mut params);
            params.insert(c.identity, ty);
        };
        match &stage.terminal {
            Terminal::Reduce(aggs) => {
                for a in aggs {
                    if let (AggKind::Custom(c), Some(col)) = (&a.kind, a.column) {
                        note_combine(c, stage.program.ty(col));
                    }
                }
            }
            Terminal::Scan {
                op: ScanOp::Custom(c),
                column,
                ..
            } => note_combine(c, stage.program.ty(*column)),
            _ => {}
        }
        let mut slots = vec![
            UniformSlot {
                source: UniformSource::Len,
                ty: DType::U32,
            },
            UniformSlot {
                source: UniformSource::Span,
                ty: DType::U32,
            },
            UniformSlot {
                source: UniformSource::Groups,
                ty: DType::U32,
            },
        ];
        for s in 0..stage.inputs.len() {
            slots.push(UniformSlot {
                source: UniformSource::InputOffset(s as u16),
                ty: DType::U32,
            });
        }
        let index_ty = if caps.int64 { DType::U64 } else { DType::U32 };
        for e in 0..stage.enumerates {
            slots.push(UniformSlot {
                source: UniformSource::IndexBase(e),
                ty: index_ty,
            });
        }
        for (&p, &ty) in &params {
            slots.push(UniformSlot {
                source: UniformSource::Param(p),
                ty,
            });
        }
        if let Terminal::Sort { fetch: Some(p), .. } = stage.terminal {
            slots.push(UniformSlot {
                source: UniformSource::Limit(p),
                ty: DType::U32,
            });
        }
        if let Terminal::Join { build, .. } = &stage.terminal {
            slots.push(UniformSlot {
                source: UniformSource::BuildLen,
                ty: DType::U32,
            });
            for j in 0..build.len() {
                slots.push(UniformSlot {
                    source: UniformSource::InputOffset((stage.inputs.len() + j) as u16),
                    ty: DType::U32,
                });
            }
        }
        let fields = slots
            .iter()
            .map(|s| UniformField {
                name: match s.source {
                    UniformSource::Len => "len".into(),
                    UniformSource::Span => "span".into(),
                    UniformSource::Groups => "groups".into(),
                    UniformSource::InputOffset(s) => format!("off{s}"),
                    UniformSource::IndexBase(e) => format!("index{e}"),
                    UniformSource::Param(p) => format!("p{p}"),
                    UniformSource::Limit(p) => format!("limit{p}"),
                    UniformSource::BuildLen => "build_len".into(),
                },
                ty: s.ty,
            })
            .collect();
        Ok(Lower {
            stage,
            caps,
            layout: UniformLayout { slots },
            fields,
            wg: caps.workgroup_size,
        })
    }

    fn field(&self, source: UniformSource) -> FieldId {
        FieldId::new(self.layout.field(source).expect("uniform slot"))
    }

    fn kernel(&self, name: &str) -> KernelBuilder {
        let mut b = KernelBuilder::new(name, self.wg);
        b.uniforms(self.fields.clone());
        b
    }

    fn preload(&self, b: &mut KernelBuilder) -> Pre {
        let u = |b: &mut KernelBuilder, src, ty| b.assign(ty, Op::Uniform(self.field(src)));
        let len = u(b, UniformSource::Len, DType::U32);
        let span = u(b, UniformSource::Span, DType::U32);
        let groups = u(b, UniformSource::Groups, DType::U32);
        let offs = (0..self.stage.inputs.len())
            .map(|s| u(b, UniformSource::InputOffset(s as u16), DType::U32))
            .collect();
        let idx = (0..self.stage.enumerates)
            .map(|e| {
                let slot =
                    self.layout.slots[self.layout.field(UniformSource::IndexBase(e)).unwrap()];
                u(b, slot.source, slot.ty)
            })
            .collect();
        let params = self
            .layout
            .slots
            .iter()
            .filter_map(|s| match s.source {
                UniformSource::Param(p) => Some((p, u(b, s.source, s.ty))),
                _ => None,
            })
            .collect();
        let t = b.builtin(Builtin::LocalId);
        let w = b.builtin(Builtin::WorkgroupId);
        Pre {
            len,
            span,
            groups,
            offs,
            idx,
            params,
            t,
            w,
        }
    }

    fn input_bindings(
        &self,
        b: &mut KernelBuilder,
        plan_bufs: &mut Vec<BufferRef>,
    ) -> Vec<BindingId> {
        (0..self.stage.inputs.len())
            .map(|s| {
                plan_bufs.push(BufferRef::Input(s as u16));
                b.binding(format!("in{s}"), self.input_ty(s), Access::Read)
            })
            .collect()
    }

    /// The type of input slot `s` (from its `Input` nodes; `u32` if unread).
    fn input_ty(&self, s: usize) -> DType {
        self.stage
            .program
            .iter()
            .find_map(|(_, n)| (n.node == Node::Input(s as u16)).then_some(n.ty))
            .unwrap_or(DType::U32)
    }

    /// Evaluates the element program at position `i`; returns an operand per
    /// node (`None` for a 32-bit enumerate index that may only be cast).
    fn element(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        inputs: &[BindingId],
        i: Local,
    ) -> R<Vec<Option<Operand>>> {
        let mut leaf = |b: &mut KernelBuilder, node: Node, ty: DType| -> R<Leaf> {
            Ok(match node {
                Node::Input(s) => {
                    let at = b.binary(BinaryOp::Add, i, pre.offs[s as usize]);
                    Leaf::Value(b.assign(ty, Op::Load(inputs[s as usize], at.into())).into())
                }
                Node::Index(e) => {
                    let base = pre.idx[e as usize];
                    if b.ty(base) == DType::U64 {
                        let wide = b.assign(DType::U64, Op::Cast(i.into()));
                        Leaf::Value(b.binary(BinaryOp::Add, wide, base).into())
                    } else {
                        Leaf::Narrow(b.binary(BinaryOp::Add, i, base))
                    }
                }
                Node::Param(p) => Leaf::Value(pre.params[&p].into()),
                Node::Const(c) => Leaf::Value(Operand::Const(c)),
                _ => unreachable!("not a leaf"),
            })
        };
        emit_arena(b, &self.stage.program, &mut leaf)
    }

    fn value(vals: &[Option<Operand>], v: crate::expr::Value) -> R<Operand> {
        // An index (a `u64`) wider than 32 bits.
        vals[v.index()].ok_or(LowerError(Decline::MissingType {
            dtype: DType::U64,
            feature: "SHADER_INT64",
        }))
    }
}

fn scratch_len(fields: &[DType], mut f: impl FnMut(usize, DType) -> u16) -> u16 {
    let ids: Vec<u16> = fields.iter().enumerate().map(|(i, &t)| f(i, t)).collect();
    ids[0]
}

/// Yields the value a position contributes to a scan (`None`: identity).
type LiftFn<'a> = dyn Fn(&mut KernelBuilder, &[Option<Operand>]) -> R<Option<Operand>> + 'a;

/// Writes the outputs of one scanned position: `(vals, outputs, i, prefix
/// before, prefix after)`.
type EmitFn<'a> = dyn Fn(&mut KernelBuilder, &[Option<Operand>], &[BindingId], Local, Operand, Operand) -> R<()>
    + 'a;

/// Moves an error out of a result set inside a builder closure.
fn take(r: &mut R<()>) -> R<()> {
    std::mem::replace(r, Ok(()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{Aggregate, RangeOp, StageInput};
    use smallvec::smallvec;

    /// `x * 2 + 1` over one f32 input, with the given terminal and an
    /// optional `x > 0.5` predicate.
    pub(crate) fn stage(
        terminal: impl FnOnce(crate::expr::Value, crate::expr::Value) -> Terminal,
        pred: bool,
    ) -> Stage {
        let mut p = ExprArena::new();
        let x = p.push_typed(Node::Input(0), DType::F32).unwrap();
        let two = p.push(Node::Const(Scalar::F32(2.0))).unwrap();
        let one = p.push(Node::Const(Scalar::F32(1.0))).unwrap();
        let m = p.push(Node::MulAdd(x, two, one)).unwrap();
        let half = p.push(Node::Const(Scalar::F32(0.5))).unwrap();
        let gt = p.push(Node::Binary(BinaryOp::Gt, x, half)).unwrap();
        Stage {
            inputs: smallvec![StageInput::Source(0)],
            enumerates: 0,
            range: smallvec![RangeOp::Join(0)],
            program: p,
            predicate: pred.then_some(gt),
            terminal: terminal(m, gt),
        }
    }

    #[test]
    fn every_shape_lowers_to_verified_kernels() {
        let caps = Caps::default();
        let shapes = [
            stage(|m, _| Terminal::Collect(smallvec![m]), false),
            stage(|m, _| Terminal::Collect(smallvec![m]), true),
            stage(
                |m, g| {
                    Terminal::Reduce(smallvec![
                        Aggregate {
                            kind: AggKind::Sum,
                            column: Some(m)
                        },
                        Aggregate {
                            kind: AggKind::Count,
                            column: None
                        },
                        Aggregate {
                            kind: AggKind::ArgMax,
                            column: Some(m)
                        },
                        Aggregate {
                            kind: AggKind::Any,
                            column: Some(g)
                        },
                    ])
                },
                true,
            ),
            stage(
                |m, _| Terminal::Scan {
                    column: m,
                    op: ScanOp::Sum,
                    exclusive: false,
                },
                false,
            ),
        ];
        for s in &shapes {
            for subgroups in [false, true] {
                let kp = lower_stage(s, &Caps { subgroups, ..caps }).unwrap();
                for k in &kp.kernels {
                    k.verify().unwrap();
                }
                assert!(!kp.to_string().is_empty());
            }
        }
    }

    #[test]
    fn sorts_lower_to_radix_passes_and_decline_what_they_lack() {
        use crate::semantics::order::SortKey;
        let sort =
            |keys: &[(crate::expr::Value, bool)], cols: &[crate::expr::Value]| Terminal::Sort {
                keys: keys
                    .iter()
                    .map(|&(value, descending)| SortKey { value, descending })
                    .collect(),
                columns: cols.iter().copied().collect(),
                fetch: None,
            };
        // `m` (f32) alone: its words, four digit passes of three
        // dispatches (count, spine, scatter), the decode.
        let kp = lower_stage(
            &stage(|m, _| sort(&[(m, false)], &[m]), false),
            &Caps::default(),
        )
        .unwrap();
        assert!(kp.whole);
        assert_eq!(kp.dispatches.len(), 1 + 4 * 3 + 1);
        assert_eq!(kp.kernels.first().unwrap().name, "sort_words");
        assert_eq!(kp.kernels.last().unwrap().name, "sort_decode");
        assert_eq!(
            kp.algorithm.unwrap().to_string(),
            "device lsd-radix (reduce-then-scan) 4 of 4 digit passes"
        );
        // Two keys carrying rows: the bool key takes one pass (its word
        // is 0 or 1), `m` four; the spine kernel is shared.
        let kp = lower_stage(
            &stage(|m, g| sort(&[(g, true), (m, false)], &[m, g]), false),
            &Caps::default(),
        )
        .unwrap();
        assert_eq!(kp.dispatches.len(), 1 + 4 * 3 + 1 + 3 + 1);
        let names: Vec<&str> = kp.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.iter().filter(|n| **n == "sort_spine").count(), 1);
        assert!(names.contains(&"sort_rekey") && names.contains(&"sort_gather"));
        for k in &kp.kernels {
            k.verify().unwrap();
            // Within WGSL's default 16 KiB of workgroup memory.
            assert!(k.needs().shared_bytes <= 16 << 10, "{}", k.name);
        }
        // A group: sorted by key carrying rows, then its boundaries, their
        // scan, the groups' first rows and one fold per group.
        let grouped = stage(
            |m, _| Terminal::Group {
                keys: smallvec![m],
                aggs: smallvec![
                    crate::plan::Aggregate {
                        kind: AggKind::Count,
                        column: None
                    },
                    crate::plan::Aggregate {
                        kind: AggKind::Sum,
                        column: Some(m)
                    },
                ],
                first_seen: false,
            },
            true,
        );
        let kp = lower_stage(&grouped, &Caps::default()).unwrap();
        let names: Vec<&str> = kp.kernels.iter().map(|k| k.name.as_str()).collect();
        for k in ["group_bounds", "scan_blocks", "group_starts", "group_fold"] {
            assert!(names.contains(&k), "{names:?}");
        }
        // Both folds: by invocations for small groups, by workgroups for
        // large ones.
        let folds: Vec<&str> = kp.dispatches[kp.dispatches.len() - 2..]
            .iter()
            .map(|d| kp.kernels[d.kernel].name.as_str())
            .collect();
        assert_eq!(folds, ["group_fold", "group_fold_wide"]);
        assert!(matches!(kp.readback, Readback::Columns { count: Some(_) }));
        assert!(kp
            .algorithm
            .unwrap()
            .to_string()
            .starts_with("device groups"));
        for k in &kp.kernels {
            k.verify().unwrap();
        }
        // A wide fold whose states would not fit in 16 KiB of workgroup
        // memory is left out: the invocations fold every group.
        let heavy = stage(
            |m, _| Terminal::Group {
                keys: smallvec![m],
                aggs: (0..6)
                    .map(|_| crate::plan::Aggregate {
                        kind: AggKind::M2,
                        column: Some(m),
                    })
                    .collect(),
                first_seen: false,
            },
            false,
        );
        let kp = lower_stage(&heavy, &Caps::default()).unwrap();
        let names: Vec<&str> = kp.kernels.iter().map(|k| k.name.as_str()).collect();
        assert!(names.contains(&"group_fold"), "{names:?}");
        assert!(!names.contains(&"group_fold_wide"), "{names:?}");
        for k in &kp.kernels {
            assert!(k.needs().shared_bytes <= 16 << 10, "{}", k.name);
        }
        // Key counts: a row of counters per workgroup, summed per key;
        // the outputs hold the keys whatever the run's length.
        let mut counted = stage(|m, _| Terminal::Collect(smallvec![m]), false);
        let key = counted.program.push(Node::Const(Scalar::U32(3))).unwrap();
        counted.terminal = Terminal::CountByKey { key, keys: 259 };
        let kp = lower_stage(&counted, &Caps::default()).unwrap();
        assert_eq!(kp.fixed_rows, Some(259));
        assert!(!kp.whole, "a key count runs in chunks");
        assert_eq!(kp.output_rows(10), 259);
        assert_eq!(kp.output_rows(1000), 1000);
        counted.terminal = Terminal::CountByKey { key, keys: 5000 };
        let e = lower_stage(&counted, &Caps::default()).unwrap_err();
        assert!(e.to_string().contains("at most 4096 keys"), "{e}");
        // A filter first compacts the survivors' positions (count, scan,
        // scatter) and the sort reads its length from their count.
        let kp = lower_stage(
            &stage(|m, _| sort(&[(m, false)], &[m]), true),
            &Caps::default(),
        )
        .unwrap();
        assert_eq!(kp.dispatches.len(), 3 + 1 + 4 * 3 + 1);
        assert!(matches!(kp.readback, Readback::Columns { count: Some(_) }));
        assert_eq!(kp.kernels[2].name, "compact_rows");
        let top = stage(
            |m, _| Terminal::Sort {
                keys: smallvec![SortKey {
                    value: m,
                    descending: true
                }],
                columns: smallvec![m],
                fetch: Some(0),
            },
            false,
        );
        // Top-k: the key's words, then per digit of the key and of the
        // position (tie-break) a zero, a count and a one-workgroup pick;
        // the rows taken compacted in order; the radix sort of them.
        let kp = lower_stage(&top, &Caps::default()).unwrap();
        let names: Vec<&str> = kp
            .dispatches
            .iter()
            .map(|d| kp.kernels[d.kernel].name.as_str())
            .collect();
        assert_eq!(names[..2], ["sort_words", "select_init"]);
        assert_eq!(
            names
                .iter()
                .filter(|n| n.starts_with("select_count"))
                .count(),
            8
        );
        assert_eq!(
            names
                .iter()
                .filter(|n| n.starts_with("select_digit"))
                .count(),
            8
        );
        let after = names.iter().position(|n| *n == "select_rows").unwrap();
        assert_eq!(names[after + 1], "sort_rekey");
        assert_eq!(names.last(), Some(&"sort_decode"));
        assert!(matches!(kp.readback, Readback::Columns { count: Some(_) }));
        assert_eq!(
            kp.algorithm.map(|a| a.to_string()).as_deref(),
            Some("device radix select (8 digit passes), then lsd-radix of the selected rows (4 digit passes)")
        );
        assert!(kp
            .uniforms
            .slots
            .iter()
            .any(|s| s.source == UniformSource::Limit(0)));
    }

    #[test]
    fn launch_depends_only_on_length() {
        let kp = lower_stage(
            &stage(|m, _| Terminal::Collect(smallvec![m]), false),
            &Caps::default(),
        )
        .unwrap();
        assert_eq!(kp.launch(0).groups, 1);
        assert_eq!(kp.launch(1024).groups, 1);
        assert_eq!(kp.launch(1025).groups, 2);
        assert_eq!(kp.launch(1 << 30).groups, 1024);
        let l = kp.launch(1_000_001);
        assert!(l.groups as usize * l.span as usize >= 1_000_001);
    }

    /// Without 64-bit integers an inner join of 32-bit keys lowers to
    /// kernels of 32-bit types, its rows out summed in `u32` with
    /// saturation (a semi-join's 0/1 flags need none); a 64-bit key is
    /// declined.
    #[test]
    fn an_inner_join_without_64_bit_integers_counts_in_saturating_u32() {
        use crate::semantics::order::JoinKind;
        let join = |kind: JoinKind, key: DType| {
            let mut p = ExprArena::new();
            let k = p.push_typed(Node::Input(0), key).unwrap();
            Stage {
                inputs: smallvec![StageInput::Source(0)],
                enumerates: 0,
                range: smallvec![RangeOp::Join(0)],
                program: p,
                predicate: None,
                terminal: Terminal::Join {
                    kind,
                    keys: smallvec![k],
                    columns: smallvec![k],
                    build: smallvec![(1, key), (2, DType::F32)],
                },
            }
        };
        let narrow = Caps {
            int64: false,
            f64: false,
            ..Caps::default()
        };
        // The saturating add: a compare of the sum with an addend and a
        // select of `u32::MAX`, in the blocks' scan of the counts.
        let saturates = |k: &crate::codegen::kernel::Kernel| {
            format!("{k:?}").contains(&format!("{:?}", Scalar::U32(u32::MAX)))
        };
        let kp = lower_stage(&join(JoinKind::Inner, DType::U32), &narrow).unwrap();
        assert!(kp.kernels.iter().all(|k| !k.needs().int64));
        let blocks = kp.kernels.iter().find(|k| k.name == "scan_blocks").unwrap();
        assert!(saturates(blocks), "{blocks:?}");
        assert!(kp.sized.is_some());
        // With 64-bit integers the count is a `u64` and wraps nowhere.
        let kp = lower_stage(&join(JoinKind::Inner, DType::U32), &Caps::default()).unwrap();
        let blocks = kp.kernels.iter().find(|k| k.name == "scan_blocks").unwrap();
        assert!(!saturates(blocks));
        let kp = lower_stage(&join(JoinKind::Semi, DType::U32), &narrow).unwrap();
        let blocks = kp.kernels.iter().find(|k| k.name == "scan_blocks").unwrap();
        assert!(!saturates(blocks));
        assert_eq!(
            lower_stage(&join(JoinKind::Inner, DType::U64), &narrow)
                .unwrap_err()
                .0,
            Decline::MissingType {
                dtype: DType::U64,
                feature: "SHADER_INT64"
            }
        );
    }

    #[test]
    fn narrow_index_only_casts_to_32_bits() {
        let mut p = ExprArena::new();
        let i = p.push_typed(Node::Index(0), DType::U64).unwrap();
        let c = p.push_typed(Node::Cast(i), DType::F32).unwrap();
        let s = Stage {
            inputs: smallvec![StageInput::Source(0)],
            enumerates: 1,
            range: smallvec![RangeOp::Join(0), RangeOp::Enumerate(0)],
            program: p.clone(),
            predicate: None,
            terminal: Terminal::Collect(smallvec![c]),
        };
        let narrow = Caps {
            int64: false,
            f64: false,
            ..Caps::default()
        };
        let kp = lower_stage(&s, &narrow).unwrap();
        assert!(!kp.kernels[0].needs().int64);
        let wide = Stage {
            terminal: Terminal::Collect(smallvec![i]),
            ..s
        };
        assert_eq!(
            lower_stage(&wide, &narrow).unwrap_err().0,
            Decline::MissingType {
                dtype: DType::U64,
                feature: "SHADER_INT64"
            }
        );
    }
}
