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

use super::kernel::{
    u32c, Access, BindingId, Builtin, FieldId, KernelBuilder, Local, Op, Operand, Stmt,
    UniformField,
};
use super::plan::{
    AggReadback, BufferRef, Dispatch, Groups, KernelPlan, Readback, Scratch, ScratchInit,
    ScratchLen, UniformLayout, UniformSlot, UniformSource,
};
use crate::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp};
use crate::plan::{AggKind, Combine, PhysicalPlan, ScanOp, Stage, Terminal};
use std::collections::BTreeMap;
use std::fmt;

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
pub struct LowerError(pub String);

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LowerError {}

type R<T> = Result<T, LowerError>;

fn err<T>(m: impl Into<String>) -> R<T> {
    Err(LowerError(m.into()))
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
}

const NONE: u32 = u32::MAX;

impl Agg {
    fn fields(&self) -> Vec<DType> {
        match self.kind {
            AggKind::Count => vec![DType::U32],
            AggKind::Any | AggKind::All => vec![DType::Bool],
            AggKind::ArgMin | AggKind::ArgMax => vec![self.ty, DType::U32],
            _ => vec![self.ty],
        }
    }

    /// Whether a subgroup operation reduces it (commutative, 32-bit).
    fn subgroup_op(&self) -> Option<super::kernel::SubgroupOp> {
        use super::kernel::SubgroupOp as S;
        let narrow = matches!(self.ty, DType::I32 | DType::U32);
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
        vals[v.index()].ok_or_else(|| {
            LowerError(
                "an enumerate index used as a 64-bit value needs 64-bit integers (SHADER_INT64)"
                    .into(),
            )
        })
    }

    // ----- monoid operations -----

    fn identity(&self, b: &mut KernelBuilder, pre: &Pre, a: &Agg) -> Vec<Operand> {
        let c = |s: Scalar| Operand::Const(s);
        match &a.kind {
            AggKind::Sum => vec![c(Scalar::zero(a.ty))],
            AggKind::Count => vec![c(Scalar::U32(0))],
            AggKind::Any => vec![c(Scalar::Bool(false))],
            AggKind::All => vec![c(Scalar::Bool(true))],
            AggKind::ArgMin | AggKind::ArgMax => vec![c(Scalar::zero(a.ty)), c(Scalar::U32(NONE))],
            AggKind::Min | AggKind::Max => {
                let s = crate::semantics::agg_identity(&a.kind, a.ty, &[]);
                vec![c(s)]
            }
            AggKind::Custom(comb) => {
                let _ = b;
                vec![pre.params[&comb.identity].into()]
            }
        }
    }

    fn lift(&self, b: &mut KernelBuilder, a: &Agg, x: Option<Operand>, i: Local) -> Vec<Operand> {
        let _ = b;
        match a.kind {
            AggKind::Count => vec![u32c(1)],
            AggKind::ArgMin | AggKind::ArgMax => vec![x.expect("column"), i.into()],
            _ => vec![x.expect("column")],
        }
    }

    fn merge(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        a: &Agg,
        acc: &[Operand],
        x: &[Operand],
    ) -> R<Vec<Operand>> {
        use BinaryOp as B;
        Ok(match &a.kind {
            AggKind::Sum | AggKind::Count => vec![b.binary(B::Add, acc[0], x[0]).into()],
            AggKind::Min => vec![b.binary(B::Min, acc[0], x[0]).into()],
            AggKind::Max => vec![b.binary(B::Max, acc[0], x[0]).into()],
            AggKind::Any => vec![b.binary(B::Or, acc[0], x[0]).into()],
            AggKind::All => vec![b.binary(B::And, acc[0], x[0]).into()],
            AggKind::ArgMin | AggKind::ArgMax => {
                let cmp = if matches!(a.kind, AggKind::ArgMin) {
                    B::Lt
                } else {
                    B::Gt
                };
                let valid = b.binary(B::Ne, x[1], u32c(NONE));
                let ok = if a.ty.is_float() {
                    let nan = b.assign(DType::Bool, Op::IsNan(x[0]));
                    let not_nan = b.assign(DType::Bool, Op::Unary(UnaryOp::Not, nan.into()));
                    b.binary(B::And, valid, not_nan)
                } else {
                    valid
                };
                let acc_none = b.binary(B::Eq, acc[1], u32c(NONE));
                let better = b.binary(cmp, x[0], acc[0]);
                let same = b.binary(B::Eq, x[0], acc[0]);
                let earlier = b.binary(B::Lt, x[1], acc[1]);
                let tie = b.binary(B::And, same, earlier);
                let wins = b.binary(B::Or, better, tie);
                let wins = b.binary(B::Or, acc_none, wins);
                let take = b.binary(B::And, ok, wins);
                let v = b.select(take, x[0], acc[0]);
                let i = b.select(take, x[1], acc[1]);
                vec![v.into(), i.into()]
            }
            AggKind::Custom(c) => {
                let mut leaf = |_: &mut KernelBuilder, node: Node, _: DType| -> R<Leaf> {
                    Ok(Leaf::Value(match node {
                        Node::Input(0) => acc[0],
                        Node::Input(1) => x[0],
                        Node::Param(p) => pre.params[&p].into(),
                        Node::Const(c) => Operand::Const(c),
                        other => return err(format!("{other:?} in a combine program")),
                    }))
                };
                let vals = emit_arena(b, &c.program, &mut leaf)?;
                vec![Self::value(&vals, c.output)?]
            }
        })
    }

    fn merge_into(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        a: &Agg,
        state: &[Local],
        x: &[Operand],
    ) -> R<()> {
        let acc: Vec<Operand> = state.iter().map(|&l| l.into()).collect();
        let m = self.merge(b, pre, a, &acc, x)?;
        for (&s, v) in state.iter().zip(m) {
            b.set(s, Op::Copy(v));
        }
        Ok(())
    }

    fn new_state(&self, b: &mut KernelBuilder, pre: &Pre, a: &Agg) -> Vec<Local> {
        let id = self.identity(b, pre, a);
        a.fields()
            .into_iter()
            .zip(id)
            .map(|(ty, v)| b.assign(ty, Op::Copy(v)))
            .collect()
    }

    // ----- building blocks -----

    /// `(ws, we)` of this workgroup's span.
    fn span(&self, b: &mut KernelBuilder, pre: &Pre) -> (Local, Local) {
        let start = b.binary(BinaryOp::Mul, pre.w, pre.span);
        let ws = b.binary(BinaryOp::Min, start, pre.len);
        let end = b.binary(BinaryOp::Add, ws, pre.span);
        let we = b.binary(BinaryOp::Min, end, pre.len);
        (ws, we)
    }

    /// Each invocation's loop over `[ws, we)`.
    fn thread_loop(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        ws: Local,
        we: Local,
        contiguous: bool,
        body: impl FnOnce(&mut KernelBuilder, Local) -> R<()>,
    ) -> R<()> {
        let mut result = Ok(());
        if contiguous {
            let n = b.binary(BinaryOp::Sub, we, ws);
            let n1 = b.binary(BinaryOp::Add, n, u32c(self.wg - 1));
            let per = b.binary(BinaryOp::Div, n1, u32c(self.wg));
            let off = b.binary(BinaryOp::Mul, pre.t, per);
            let s0 = b.binary(BinaryOp::Add, ws, off);
            let ts = b.binary(BinaryOp::Min, s0, we);
            let e0 = b.binary(BinaryOp::Add, ts, per);
            let te = b.binary(BinaryOp::Min, e0, we);
            b.for_(ts, te, u32c(1), |b, i| result = body(b, i));
        } else {
            let start = b.binary(BinaryOp::Add, ws, pre.t);
            b.for_(start, we, u32c(self.wg), |b, i| result = body(b, i));
        }
        result
    }

    /// Reduces every invocation's `states` over the workgroup; `sink` runs
    /// in invocation 0 with the workgroup's states.
    #[allow(clippy::redundant_closure_call)] // the closure scopes `?` inside the builder callback
    fn workgroup_reduce(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        aggs: &[Agg],
        states: &[Vec<Local>],
        sink: impl FnOnce(&mut KernelBuilder, &[Vec<Local>]) -> R<()>,
    ) -> R<()> {
        let shared: Vec<Vec<_>> = aggs
            .iter()
            .enumerate()
            .map(|(j, a)| {
                a.fields()
                    .into_iter()
                    .enumerate()
                    .map(|(f, ty)| b.shared(format!("red{j}_{f}"), ty, self.wg))
                    .collect()
            })
            .collect();
        let store_all = |b: &mut KernelBuilder, at: Operand, vals: &[Vec<Local>]| {
            for (sh, st) in shared.iter().zip(vals) {
                for (&s, &v) in sh.iter().zip(st) {
                    b.push(Stmt::StoreShared(s, at, v.into()));
                }
            }
        };
        let load_all = |b: &mut KernelBuilder, at: Operand| -> Vec<Vec<Operand>> {
            aggs.iter()
                .zip(&shared)
                .map(|(a, sh)| {
                    a.fields()
                        .into_iter()
                        .zip(sh)
                        .map(|(ty, &s)| b.assign(ty, Op::LoadShared(s, at)).into())
                        .collect()
                })
                .collect()
        };
        let mut result = Ok(());
        let zero = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        let subgroup_ops: Option<Vec<_>> = if self.caps.subgroups {
            aggs.iter().map(Agg::subgroup_op).collect()
        } else {
            None
        };
        if let Some(ops) = subgroup_ops {
            let reduced: Vec<Vec<Local>> = states
                .iter()
                .zip(&ops)
                .map(|(st, &op)| {
                    st.iter()
                        .map(|&s| b.assign(b.ty(s), Op::Subgroup(op, s.into())))
                        .collect()
                })
                .collect();
            let lane = b.builtin(Builtin::SubgroupLane);
            let sid = b.builtin(Builtin::SubgroupId);
            let nsg = b.builtin(Builtin::NumSubgroups);
            let first = b.binary(BinaryOp::Eq, lane, u32c(0));
            b.if_(first, |b| store_all(b, sid.into(), &reduced));
            b.barrier();
            b.if_(zero, |b| {
                result = (|| {
                    let first = load_all(b, u32c(0));
                    let acc: Vec<Vec<Local>> = first
                        .iter()
                        .map(|st| st.iter().map(|&v| b.assign(b.ty(v), Op::Copy(v))).collect())
                        .collect();
                    let mut inner = Ok(());
                    b.for_(u32c(1), nsg, u32c(1), |b, j| {
                        let x = load_all(b, j.into());
                        inner = aggs
                            .iter()
                            .zip(&acc)
                            .zip(&x)
                            .try_for_each(|((a, st), x)| self.merge_into(b, pre, a, st, x));
                    });
                    take(&mut inner)?;
                    sink(b, &acc)
                })();
            });
            return result;
        }
        store_all(b, pre.t.into(), states);
        b.barrier();
        let stride = b.assign(DType::U32, Op::Copy(u32c(1)));
        b.for_(u32c(0), u32c(self.wg.trailing_zeros()), u32c(1), |b, _| {
            let twice = b.binary(BinaryOp::Add, stride, stride);
            let rem = b.binary(BinaryOp::Rem, pre.t, twice);
            let lead = b.binary(BinaryOp::Eq, rem, u32c(0));
            b.if_(lead, |b| {
                result = (|| {
                    let acc = load_all(b, pre.t.into());
                    let other = b.binary(BinaryOp::Add, pre.t, stride);
                    let x = load_all(b, other.into());
                    let mut merged = Vec::new();
                    for ((a, acc), x) in aggs.iter().zip(&acc).zip(&x) {
                        let m = self.merge(b, pre, a, acc, x)?;
                        merged.push(
                            m.into_iter()
                                .map(|v| b.assign(b.ty(v), Op::Copy(v)))
                                .collect::<Vec<_>>(),
                        );
                    }
                    store_all(b, pre.t.into(), &merged);
                    Ok(())
                })();
            });
            b.barrier();
            b.set(stride, Op::Copy(twice.into()));
        });
        take(&mut result)?;
        b.if_(zero, |b| {
            result = (|| {
                let fin = load_all(b, u32c(0));
                let fin: Vec<Vec<Local>> = fin
                    .iter()
                    .map(|st| st.iter().map(|&v| b.assign(b.ty(v), Op::Copy(v))).collect())
                    .collect();
                sink(b, &fin)
            })();
        });
        result
    }

    /// Scans `[rs, re)` in tiles with a running carry (see the module docs).
    /// `fold` yields an element's lifted value; `apply` gets the position and
    /// the combined prefix before it, and returns the prefix after it.
    /// Returns the carry after the span.
    #[allow(clippy::too_many_arguments)]
    fn scan_span(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        a: &Agg,
        rs: Local,
        re: Local,
        carry0: Operand,
        mut fold: impl FnMut(&mut KernelBuilder, Local) -> R<Operand>,
        mut apply: impl FnMut(&mut KernelBuilder, Local, Operand) -> R<Operand>,
    ) -> R<Local> {
        let ty = a.fields()[0];
        let items = self.caps.items_per_thread;
        let sh = b.shared("scan", ty, self.wg);
        let carry = b.assign(ty, Op::Copy(carry0));
        let identity = self.identity(b, pre, a)[0];
        let mut result = Ok(());
        b.for_(rs, re, u32c(self.wg * items), |b, ts| {
            result = (|| {
                let off = b.binary(BinaryOp::Mul, pre.t, u32c(items));
                let a0 = b.binary(BinaryOp::Add, ts, off);
                let first = b.binary(BinaryOp::Min, a0, re);
                let e0 = b.binary(BinaryOp::Add, first, u32c(items));
                let end = b.binary(BinaryOp::Min, e0, re);
                let tsum = b.assign(ty, Op::Copy(identity));
                let mut inner = Ok(());
                b.for_(first, end, u32c(1), |b, i| {
                    inner = (|| {
                        let x = fold(b, i)?;
                        self.merge_into(b, pre, a, &[tsum], &[x])
                    })();
                });
                take(&mut inner)?;
                b.push(Stmt::StoreShared(sh, pre.t.into(), tsum.into()));
                b.barrier();
                let d = b.assign(DType::U32, Op::Copy(u32c(1)));
                b.for_(u32c(0), u32c(self.wg.trailing_zeros()), u32c(1), |b, _| {
                    inner = (|| {
                        let has = b.binary(BinaryOp::Ge, pre.t, d);
                        let left = b.assign(ty, Op::Copy(identity));
                        b.if_(has, |b| {
                            let at = b.binary(BinaryOp::Sub, pre.t, d);
                            b.set(left, Op::LoadShared(sh, at.into()));
                        });
                        b.barrier();
                        let mut r = Ok(());
                        b.if_(has, |b| {
                            r = (|| {
                                let cur = b.assign(ty, Op::LoadShared(sh, pre.t.into()));
                                let m = self.merge(b, pre, a, &[left.into()], &[cur.into()])?;
                                b.push(Stmt::StoreShared(sh, pre.t.into(), m[0]));
                                Ok(())
                            })();
                        });
                        r?;
                        b.barrier();
                        let d2 = b.binary(BinaryOp::Add, d, d);
                        b.set(d, Op::Copy(d2.into()));
                        Ok(())
                    })();
                });
                take(&mut inner)?;
                let excl = b.assign(ty, Op::Copy(identity));
                let not_first = b.binary(BinaryOp::Gt, pre.t, u32c(0));
                b.if_(not_first, |b| {
                    let at = b.binary(BinaryOp::Sub, pre.t, u32c(1));
                    b.set(excl, Op::LoadShared(sh, at.into()));
                });
                let run0 = self.merge(b, pre, a, &[carry.into()], &[excl.into()])?;
                let run = b.assign(ty, Op::Copy(run0[0]));
                b.for_(first, end, u32c(1), |b, i| {
                    inner = (|| {
                        let next = apply(b, i, run.into())?;
                        b.set(run, Op::Copy(next));
                        Ok(())
                    })();
                });
                take(&mut inner)?;
                let total = b.assign(ty, Op::LoadShared(sh, u32c(self.wg - 1)));
                b.barrier();
                self.merge_into(b, pre, a, &[carry], &[total.into()])
            })();
        });
        take(&mut result)?;
        Ok(carry)
    }

    // ----- kernels -----

    /// Pass 1 of a reduction: each workgroup folds its span of the element
    /// program into one state per aggregate, written at `[workgroup]`.
    fn partial_kernel(
        &self,
        name: &str,
        aggs: &[Agg],
        columns: &[Option<crate::expr::Value>],
        out_names: &[u16],
    ) -> R<(super::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel(name);
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let outs: Vec<Vec<BindingId>> = aggs
            .iter()
            .enumerate()
            .map(|(j, a)| {
                a.fields()
                    .into_iter()
                    .enumerate()
                    .map(|(f, ty)| {
                        bufs.push(BufferRef::Scratch(out_names[j] + f as u16));
                        b.binding(format!("part{j}_{f}"), ty, Access::ReadWrite)
                    })
                    .collect()
            })
            .collect();
        let pre = self.preload(&mut b);
        let states: Vec<Vec<Local>> = aggs
            .iter()
            .map(|a| self.new_state(&mut b, &pre, a))
            .collect();
        let (ws, we) = self.span(&mut b, &pre);
        let contiguous = !aggs.iter().all(Agg::commutative);
        self.thread_loop(&mut b, &pre, ws, we, contiguous, |b, i| {
            let vals = self.element(b, &pre, &inputs, i)?;
            let fold = |b: &mut KernelBuilder| -> R<()> {
                for ((a, st), col) in aggs.iter().zip(&states).zip(columns) {
                    let x = col.map(|c| Self::value(&vals, c)).transpose()?;
                    let x = self.lift(b, a, x, i);
                    self.merge_into(b, &pre, a, st, &x)?;
                }
                Ok(())
            };
            match self.stage.predicate {
                Some(p) => {
                    let keep = Self::value(&vals, p)?;
                    let mut r = Ok(());
                    b.if_(keep, |b| r = fold(b));
                    r
                }
                None => fold(b),
            }
        })?;
        self.workgroup_reduce(&mut b, &pre, aggs, &states, |b, fin| {
            for (st, out) in fin.iter().zip(&outs) {
                for (&v, &o) in st.iter().zip(out) {
                    b.push(Stmt::Store(o, pre.w.into(), v.into()));
                }
            }
            Ok(())
        })?;
        Ok((b.finish().map_err(|e| LowerError(e.0))?, bufs))
    }

    /// Pass 2 of a reduction: one workgroup folds the `groups` partial
    /// states in order and writes the result over partial `[0]` (every
    /// load happens before the reduction's first barrier, the store after
    /// its last), which keeps the binding count within small limits.
    fn final_kernel(
        &self,
        aggs: &[Agg],
        parts: &[u16],
    ) -> R<(super::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("reduce_final");
        let mut bufs = Vec::new();
        let mut ins = Vec::new();
        for (j, a) in aggs.iter().enumerate() {
            let fields = a.fields();
            ins.push(
                fields
                    .iter()
                    .enumerate()
                    .map(|(f, &ty)| {
                        bufs.push(BufferRef::Scratch(parts[j] + f as u16));
                        b.binding(format!("part{j}_{f}"), ty, Access::ReadWrite)
                    })
                    .collect::<Vec<_>>(),
            );
        }
        let outs = ins.clone();
        let pre = self.preload(&mut b);
        let states: Vec<Vec<Local>> = aggs
            .iter()
            .map(|a| self.new_state(&mut b, &pre, a))
            .collect();
        let contiguous = !aggs.iter().all(Agg::commutative);
        let zero = b.assign(DType::U32, Op::Copy(u32c(0)));
        self.thread_loop(&mut b, &pre, zero, pre.groups, contiguous, |b, i| {
            for ((a, st), bind) in aggs.iter().zip(&states).zip(&ins) {
                let x: Vec<Operand> = a
                    .fields()
                    .into_iter()
                    .zip(bind)
                    .map(|(ty, &bd)| b.assign(ty, Op::Load(bd, i.into())).into())
                    .collect();
                self.merge_into(b, &pre, a, st, &x)?;
            }
            Ok(())
        })?;
        self.workgroup_reduce(&mut b, &pre, aggs, &states, |b, fin| {
            for (st, out) in fin.iter().zip(&outs) {
                for (&v, &o) in st.iter().zip(out) {
                    b.push(Stmt::Store(o, u32c(0), v.into()));
                }
            }
            Ok(())
        })?;
        Ok((b.finish().map_err(|e| LowerError(e.0))?, bufs))
    }

    /// Pass 2 of a scan: one workgroup turns the span totals into exclusive
    /// prefixes in place, starting from the carry (when `carry_in`) or the
    /// identity, and stores the grand total in the carry buffer.
    fn blocks_kernel(
        &self,
        a: &Agg,
        totals: u16,
        carry: u16,
        carry_in: bool,
    ) -> R<(super::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("scan_blocks");
        let ty = a.fields()[0];
        let tb = b.binding("totals", ty, Access::ReadWrite);
        let cb = b.binding("carry", ty, Access::ReadWrite);
        let bufs = vec![BufferRef::Scratch(totals), BufferRef::Scratch(carry)];
        let pre = self.preload(&mut b);
        let start = if carry_in {
            b.assign(ty, Op::Load(cb, u32c(0))).into()
        } else {
            self.identity(&mut b, &pre, a)[0]
        };
        let zero = b.assign(DType::U32, Op::Copy(u32c(0)));
        let total = self.scan_span(
            &mut b,
            &pre,
            a,
            zero,
            pre.groups,
            start,
            |b, i| Ok(b.assign(ty, Op::Load(tb, i.into())).into()),
            |b, i, run| {
                let x = b.assign(ty, Op::Load(tb, i.into()));
                b.push(Stmt::Store(tb, i.into(), run));
                Ok(self.merge(b, &pre, a, &[run], &[x.into()])?[0])
            },
        )?;
        let first = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        b.if_(first, |b| b.push(Stmt::Store(cb, u32c(0), total.into())));
        Ok((b.finish().map_err(|e| LowerError(e.0))?, bufs))
    }

    /// Pass 3 of a scan or compaction: each workgroup scans its span from
    /// its exclusive prefix; `emit` writes the outputs of one position.
    fn apply_kernel(
        &self,
        name: &str,
        a: &Agg,
        totals: u16,
        outputs: &[DType],
        lifted: &LiftFn<'_>,
        emit: &EmitFn<'_>,
    ) -> R<(super::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel(name);
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let ty = a.fields()[0];
        let tb = b.binding("totals", ty, Access::Read);
        bufs.push(BufferRef::Scratch(totals));
        let outs: Vec<BindingId> = outputs
            .iter()
            .enumerate()
            .map(|(c, &t)| {
                bufs.push(BufferRef::Output(c as u16));
                b.binding(format!("out{c}"), t, Access::ReadWrite)
            })
            .collect();
        let pre = self.preload(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
        let carry0 = b.assign(ty, Op::Load(tb, pre.w.into()));
        let identity = self.identity(&mut b, &pre, a);
        let lift = |b: &mut KernelBuilder, vals: &[Option<Operand>], i: Local| -> R<Operand> {
            Ok(match lifted(b, vals)? {
                Some(x) => self.lift(b, a, Some(x), i)[0],
                None => identity[0],
            })
        };
        self.scan_span(
            &mut b,
            &pre,
            a,
            ws,
            we,
            carry0.into(),
            |b, i| {
                let vals = self.element(b, &pre, &inputs, i)?;
                lift(b, &vals, i)
            },
            |b, i, run| {
                let vals = self.element(b, &pre, &inputs, i)?;
                let x = lift(b, &vals, i)?;
                let next = self.merge(b, &pre, a, &[run], &[x])?[0];
                emit(b, &vals, &outs, i, run, next)?;
                Ok(next)
            },
        )?;
        Ok((b.finish().map_err(|e| LowerError(e.0))?, bufs))
    }

    fn store_kernel(
        &self,
        cols: &[crate::expr::Value],
    ) -> R<(super::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("store");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let outs: Vec<BindingId> = cols
            .iter()
            .enumerate()
            .map(|(c, &v)| {
                bufs.push(BufferRef::Output(c as u16));
                b.binding(
                    format!("out{c}"),
                    self.stage.program.ty(v),
                    Access::ReadWrite,
                )
            })
            .collect();
        let pre = self.preload(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let vals = self.element(b, &pre, &inputs, i)?;
            for (&c, &o) in cols.iter().zip(&outs) {
                let v = Self::value(&vals, c)?;
                b.push(Stmt::Store(o, i.into(), v));
            }
            Ok(())
        })?;
        Ok((b.finish().map_err(|e| LowerError(e.0))?, bufs))
    }

    fn run(self) -> R<KernelPlan> {
        let stage = self.stage;
        let mut kernels = Vec::new();
        let mut dispatches = Vec::new();
        let mut scratch = Vec::new();
        let mut add = |k: (super::kernel::Kernel, Vec<BufferRef>), groups| {
            kernels.push(k.0);
            dispatches.push(Dispatch {
                kernel: kernels.len() - 1,
                groups,
                buffers: k.1,
            });
        };
        let mut new_scratch = |name: String, elem, len, init| {
            scratch.push(Scratch {
                name,
                elem,
                len,
                init,
            });
            (scratch.len() - 1) as u16
        };
        let outputs: Vec<DType> = match &stage.terminal {
            Terminal::Reduce(_) => Vec::new(),
            _ => stage.output_dtypes().into_vec(),
        };
        let readback = match &stage.terminal {
            Terminal::Reduce(list) => {
                let aggs: Vec<Agg> = list
                    .iter()
                    .map(|a| Agg {
                        kind: a.kind.clone(),
                        ty: a.column.map(|c| stage.program.ty(c)).unwrap_or(DType::U32),
                    })
                    .collect();
                let columns: Vec<_> = list.iter().map(|a| a.column).collect();
                let mut parts = Vec::new();
                let mut readback = Vec::new();
                for (j, a) in aggs.iter().enumerate() {
                    let fields = a.fields();
                    let first = scratch_len(&fields, |f, ty| {
                        new_scratch(
                            format!("part{j}_{f}"),
                            ty,
                            ScratchLen::Groups,
                            ScratchInit::Undefined,
                        )
                    });
                    parts.push(first);
                    readback.push(AggReadback {
                        kind: a.kind.clone(),
                        column: list[j].column.map(|c| stage.program.ty(c)),
                        fields: (0..fields.len() as u16).map(|f| first + f).collect(),
                    });
                }
                add(
                    self.partial_kernel("reduce_partial", &aggs, &columns, &parts)?,
                    Groups::Spans,
                );
                add(self.final_kernel(&aggs, &parts)?, Groups::One);
                Readback::Aggregates(readback)
            }
            Terminal::Collect(cols) if stage.predicate.is_none() => {
                add(self.store_kernel(cols)?, Groups::Spans);
                Readback::Columns { count: None }
            }
            Terminal::Collect(cols) => {
                let count = Agg {
                    kind: AggKind::Count,
                    ty: DType::U32,
                };
                let totals = new_scratch(
                    "totals".into(),
                    DType::U32,
                    ScratchLen::Groups,
                    ScratchInit::Undefined,
                );
                let total = new_scratch(
                    "count".into(),
                    DType::U32,
                    ScratchLen::One,
                    ScratchInit::Undefined,
                );
                add(
                    self.partial_kernel(
                        "compact_count",
                        std::slice::from_ref(&count),
                        &[None],
                        &[totals],
                    )?,
                    Groups::Spans,
                );
                add(
                    self.blocks_kernel(&count, totals, total, false)?,
                    Groups::One,
                );
                let pred = stage.predicate.expect("compaction has a predicate");
                let flag =
                    |b: &mut KernelBuilder, vals: &[Option<Operand>]| -> R<Option<Operand>> {
                        let keep = Self::value(vals, pred)?;
                        Ok(Some(b.select(keep, u32c(1), u32c(0)).into()))
                    };
                let cols = cols.clone();
                let emit = |b: &mut KernelBuilder,
                            vals: &[Option<Operand>],
                            outs: &[BindingId],
                            _i: Local,
                            run: Operand,
                            _next: Operand|
                 -> R<()> {
                    let keep = Self::value(vals, pred)?;
                    let mut r = Ok(());
                    b.if_(keep, |b| {
                        r = cols.iter().zip(outs).try_for_each(|(&c, &o)| {
                            b.push(Stmt::Store(o, run, Self::value(vals, c)?));
                            Ok(())
                        });
                    });
                    r
                };
                // The flag is already 0/1: lifting it as a count would
                // count every position, so fold it as a sum.
                let sum = Agg {
                    kind: AggKind::Sum,
                    ty: DType::U32,
                };
                add(
                    self.apply_kernel("compact_scatter", &sum, totals, &outputs, &flag, &emit)?,
                    Groups::Spans,
                );
                Readback::Columns { count: Some(total) }
            }
            Terminal::Scan {
                column,
                op,
                exclusive,
            } => {
                if stage.predicate.is_some() {
                    return err("a scan stage cannot have a predicate");
                }
                let ty = stage.program.ty(*column);
                let (kind, init) = match op {
                    ScanOp::Sum => (AggKind::Sum, ScratchInit::Zero),
                    ScanOp::Custom(c) => {
                        (AggKind::Custom(c.clone()), ScratchInit::Param(c.identity))
                    }
                };
                let agg = Agg { kind, ty };
                let totals = new_scratch(
                    "totals".into(),
                    ty,
                    ScratchLen::Groups,
                    ScratchInit::Undefined,
                );
                let carry = new_scratch("carry".into(), ty, ScratchLen::One, init);
                add(
                    self.partial_kernel(
                        "scan_reduce",
                        std::slice::from_ref(&agg),
                        &[Some(*column)],
                        &[totals],
                    )?,
                    Groups::Spans,
                );
                add(self.blocks_kernel(&agg, totals, carry, true)?, Groups::One);
                let column = *column;
                let exclusive = *exclusive;
                let value =
                    |_: &mut KernelBuilder, vals: &[Option<Operand>]| -> R<Option<Operand>> {
                        Ok(Some(Self::value(vals, column)?))
                    };
                let emit = |b: &mut KernelBuilder,
                            _: &[Option<Operand>],
                            outs: &[BindingId],
                            i: Local,
                            run: Operand,
                            next: Operand|
                 -> R<()> {
                    b.push(Stmt::Store(
                        outs[0],
                        i.into(),
                        if exclusive { run } else { next },
                    ));
                    Ok(())
                };
                add(
                    self.apply_kernel("scan_apply", &agg, totals, &outputs, &value, &emit)?,
                    Groups::Spans,
                );
                Readback::Columns { count: None }
            }
        };
        Ok(KernelPlan {
            kernels,
            dispatches,
            scratch,
            uniforms: self.layout,
            outputs,
            readback,
            items_per_thread: self.caps.items_per_thread,
            max_groups: self.caps.max_groups,
        })
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

/// What a leaf of an element program lowers to.
enum Leaf {
    Value(Operand),
    /// A 32-bit stand-in for a 64-bit enumerate index.
    Narrow(Local),
}

/// Emits every node of `arena`; `leaf` lowers `Input`, `Index`, `Param` and
/// `Const`. Returns one operand per node (`None` for a narrow index).
fn emit_arena(
    b: &mut KernelBuilder,
    arena: &ExprArena,
    leaf: &mut dyn FnMut(&mut KernelBuilder, Node, DType) -> R<Leaf>,
) -> R<Vec<Option<Operand>>> {
    let mut vals: Vec<Option<Operand>> = Vec::with_capacity(arena.len());
    let mut narrow: BTreeMap<usize, Local> = BTreeMap::new();
    let need = |v: crate::expr::Value, vals: &[Option<Operand>]| -> R<Operand> {
        vals[v.index()].ok_or_else(|| {
            LowerError(
                "an enumerate index used as a 64-bit value needs 64-bit integers (SHADER_INT64)"
                    .into(),
            )
        })
    };
    for (v, n) in arena.iter() {
        let ty = n.ty;
        let out: Option<Operand> = match n.node {
            Node::Input(_) | Node::Index(_) | Node::Param(_) | Node::Const(_) => {
                match leaf(b, n.node, ty)? {
                    Leaf::Value(o) => Some(o),
                    Leaf::Narrow(l) => {
                        narrow.insert(v.index(), l);
                        None
                    }
                }
            }
            Node::Unary(op, a) => Some(b.assign(ty, Op::Unary(op, need(a, &vals)?)).into()),
            Node::Binary(op, x, y) => Some(
                b.assign(ty, Op::Binary(op, need(x, &vals)?, need(y, &vals)?))
                    .into(),
            ),
            Node::Select(c, x, y) => Some(
                b.assign(
                    ty,
                    Op::Select(need(c, &vals)?, need(x, &vals)?, need(y, &vals)?),
                )
                .into(),
            ),
            Node::MulAdd(x, y, z) => Some(
                b.assign(
                    ty,
                    Op::MulAdd(need(x, &vals)?, need(y, &vals)?, need(z, &vals)?),
                )
                .into(),
            ),
            Node::Cast(a) => match narrow.get(&a.index()) {
                Some(&l) if !ty.is_wide() => Some(b.assign(ty, Op::Cast(l.into())).into()),
                Some(_) => return err("a 64-bit cast of an enumerate index needs SHADER_INT64"),
                None => {
                    let a = need(a, &vals)?;
                    if b.ty(a) == ty {
                        Some(a)
                    } else {
                        Some(b.assign(ty, Op::Cast(a)).into())
                    }
                }
            },
            Node::Powi(a, k) => Some(powi(b, need(a, &vals)?, k, ty)),
        };
        vals.push(out);
    }
    Ok(vals)
}

/// `x^k` by the multiply sequence of `expr::eval::pow_unsigned`.
fn powi(b: &mut KernelBuilder, x: Operand, k: i32, ty: DType) -> Operand {
    let one = Operand::Const(Scalar::I64(1).cast(ty));
    let mut e = k.unsigned_abs();
    let mut result: Option<Operand> = None;
    let mut base = x;
    while e > 0 {
        if e & 1 == 1 {
            result = Some(match result {
                None => base,
                Some(r) => b.binary(BinaryOp::Mul, r, base).into(),
            });
        }
        e >>= 1;
        if e > 0 {
            base = b.binary(BinaryOp::Mul, base, base).into();
        }
    }
    let r = result.unwrap_or(one);
    if k < 0 {
        b.binary(BinaryOp::Div, one, r).into()
    } else {
        r
    }
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
        assert!(lower_stage(&wide, &narrow)
            .unwrap_err()
            .0
            .contains("SHADER_INT64"));
    }
}
