//! Keyed aggregation on the device (`group_by(..)` of one or several keys
//! with count, sum, min, max, argmin, argmax, first, last and `m2`, and
//! the mean, variance and standard deviation built from them; `distinct`; `value_counts`), sorted by key: the rows
//! sorted by their keys' group words (the radix passes of `sort`,
//! carrying row indices; `-0.0` is `+0.0`, every NaN one key), then
//!
//! - `group_bounds`: each workgroup counts the positions where the sorted
//!   key differs from the one before (a group's first row): the sorted
//!   words of one key, the keys' group words at the sorted rows for
//!   several;
//! - `scan_blocks`: their exclusive scan over workgroups, and the number of
//!   groups;
//! - `group_starts`: each workgroup writes its groups' first positions, in
//!   order (a span scan of the boundary flags);
//! - `group_fold`: when the groups are small (on average under a
//!   workgroup's rows), one invocation per group folds its rows in input
//!   order (the sort is stable), so every float sum adds in the order
//!   `cpu-scalar` does and the results are the same bits;
//! - `group_fold_wide`: when they are large, one workgroup per group, each
//!   invocation folding a stride of its rows in order and the workgroup
//!   reducing them in a fixed order (float sums within the documented
//!   tolerance, the same on every run); both are dispatched and the
//!   groups' count on the device picks the one that works. The keys are
//!   the group's first row's; positional aggregates keep the row's
//!   position (declined after a filter for argmin/argmax, whose row
//!   counts survivors).
//!
//! In first-appearance order, each group's first row (the smallest, as
//! the sort is stable) is radix-sorted with the group's index
//! (`group_firsts`, the digit passes of `sort`, `group_places`), and the
//! fold writes each group at its place.
//!
//! `variance` per group is Welford's step per row in `f64` (merged by
//! Chan's formula across a workgroup in the wide fold; declined where the
//! device has no `f64`).

use super::sort::push;
use super::*;

/// What marks a group's first sorted row.
enum Bounds {
    /// One key: its sorted words differ from the previous.
    Words(BindingId),
    /// Several keys: one of their group words, at the sorted rows, does.
    Keys {
        inputs: Vec<BindingId>,
        rows: BindingId,
    },
}
use crate::plan::Aggregate;
use crate::semantics::order::SortKey;

/// Which groups a fold kernel folds (see [`Lower::fold_kernel`]).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Fold {
    /// The small groups, one invocation each.
    Narrow,
    /// The large groups, one workgroup each.
    Wide,
    /// Every group, one invocation each (no wide fold in the plan).
    Every,
}

/// Workgroup memory a wide fold may use: WebGPU's guaranteed minimum.
const WIDE_SHARED_MAX: u32 = 16 << 10;

impl Lower<'_> {
    /// The plan of a group stage, or why the device kernels cannot run it.
    pub(super) fn group_plan(
        &self,
        keys: &[crate::expr::Value],
        aggs: &[Aggregate],
        first_seen: bool,
    ) -> R<KernelPlan> {
        let lacks = |what: &str| {
            err(format!(
                "the device kernels have no {what}: it runs on the CPU backends"
            ))
        };
        for a in aggs {
            match a.kind {
                AggKind::Count
                | AggKind::Sum
                | AggKind::Min
                | AggKind::Max
                | AggKind::First
                | AggKind::Last
                | AggKind::M2 => {}
                // Their row is the survivor's index; the sorted rows are
                // input positions.
                AggKind::ArgMin | AggKind::ArgMax if self.stage.predicate.is_none() => {}
                AggKind::ArgMin | AggKind::ArgMax => {
                    return lacks(&format!("`{}` per group after a filter", a.kind.name()))
                }
                _ => return lacks(&format!("`{}` per group", a.kind.name())),
            }
        }
        let mut plan = self.whole_plan();
        // Groups by key of aggregates that fold across runs: chunks group
        // apart and merge by key on the host.
        let mergeable = aggs.iter().all(|a| {
            matches!(
                a.kind,
                AggKind::Count
                    | AggKind::Sum
                    | AggKind::Min
                    | AggKind::Max
                    | AggKind::First
                    | AggKind::Last
            )
        });
        if mergeable {
            plan.merge_runs = Some(MergeRuns::Groups {
                keys: keys.len(),
                aggs: aggs.iter().map(|a| a.kind.clone()).collect(),
                first_seen,
            });
        }
        let order: Vec<SortKey> = keys
            .iter()
            .map(|&value| SortKey {
                value,
                descending: false,
            })
            .collect();
        let sorted = self.radix(&mut plan, &order, true, true, None)?;
        let rows = sorted.rows.expect("rows carried");
        let mut scratch = |name: &str, elem, len| {
            plan.scratch.push(Scratch {
                name: name.into(),
                elem,
                len,
                init: ScratchInit::Undefined,
            });
            (plan.scratch.len() - 1) as u16
        };
        let totals = scratch("group_totals", DType::U32, ScratchLen::Groups);
        let groups = scratch("groups", DType::U32, ScratchLen::One);
        let starts = scratch("group_starts", DType::U32, ScratchLen::Positions);
        let flag = Agg {
            kind: AggKind::Sum,
            ty: DType::U32,
            saturating: false,
        };
        let (k, bufs) = self.bounds_kernel(&flag, &sorted, keys, totals)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&flag, totals, groups, false)?;
        push(&mut plan, k, Groups::One, bufs);
        let (k, bufs) = self.starts_kernel(&flag, &sorted, keys, totals, starts)?;
        push(&mut plan, k, Groups::Spans, bufs);
        // First-appearance order: each group's place among the groups'
        // first rows.
        let place = if first_seen {
            Some(self.first_seen_places(&mut plan, rows, starts, groups)?)
        } else {
            None
        };
        // The wide fold where its reduction's states fit the workgroup
        // memory every adapter has; else the one-invocation fold takes
        // every group.
        let fold =
            |mode| self.fold_kernel(keys, aggs, rows, starts, groups, sorted.count, place, mode);
        let wide = fold(Fold::Wide)?;
        let fits = wide.0.needs().shared_bytes <= WIDE_SHARED_MAX;
        let (k, bufs) = fold(if fits { Fold::Narrow } else { Fold::Every })?;
        push(&mut plan, k, Groups::Spans, bufs);
        if fits {
            push(&mut plan, wide.0, Groups::Spans, wide.1);
        }
        plan.readback = Readback::Columns {
            count: Some(groups),
        };
        if let Some(crate::types::Algorithm::DeviceRadix(p)) = plan.algorithm {
            plan.algorithm = Some(crate::types::Algorithm::DeviceSortGroups(p));
        }
        Ok(plan)
    }

    /// Binds what tells where a group starts: the sorted words of the one
    /// key, or (several keys) the inputs and the sorted rows, whose keys'
    /// group words are compared.
    fn bind_bounds(
        &self,
        b: &mut KernelBuilder,
        bufs: &mut Vec<BufferRef>,
        sorted: &super::sort::Sorted,
        keys: &[crate::expr::Value],
    ) -> Bounds {
        if keys.len() == 1 {
            bufs.push(sorted.words);
            Bounds::Words(b.binding("words", sorted.word_ty, Access::Read))
        } else {
            let inputs = self.input_bindings(b, bufs);
            bufs.push(sorted.rows.expect("rows carried"));
            let rows = b.binding("rows", DType::U32, Access::Read);
            Bounds::Keys { inputs, rows }
        }
    }

    /// Whether sorted position `i` starts a group (as a `u32` flag): the
    /// first, or a key (group word) other than the one before.
    fn starts_group(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        bounds: &Bounds,
        sorted: &super::sort::Sorted,
        keys: &[crate::expr::Value],
        i: Local,
    ) -> R<Local> {
        let has_prev = b.binary(BinaryOp::Gt, i, u32c(0));
        let back = b.binary(BinaryOp::Sub, i, u32c(1));
        let prev = b.select(has_prev, back, u32c(0));
        let differs = match bounds {
            Bounds::Words(words) => {
                let wt = sorted.word_ty;
                let w = b.assign(wt, Op::Load(*words, i.into()));
                let pw = b.assign(wt, Op::Load(*words, prev.into()));
                b.binary(BinaryOp::Ne, w, pw)
            }
            Bounds::Keys { inputs, rows } => {
                let r = b.assign(DType::U32, Op::Load(*rows, i.into()));
                let pr = b.assign(DType::U32, Op::Load(*rows, prev.into()));
                let mut any: Option<Local> = None;
                for &k in keys {
                    let key = SortKey {
                        value: k,
                        descending: false,
                    };
                    let wt = if crate::semantics::order::is_narrow(self.stage.program.ty(k)) {
                        DType::U32
                    } else {
                        DType::U64
                    };
                    let w = self.key_word(b, pre, inputs, r, &key, wt, true)?;
                    let pw = self.key_word(b, pre, inputs, pr, &key, wt, true)?;
                    let ne = b.binary(BinaryOp::Ne, w, pw);
                    any = Some(match any {
                        Some(a) => b.binary(BinaryOp::Or, a, ne),
                        None => ne,
                    });
                }
                any.expect("a key")
            }
        };
        let first = b.binary(BinaryOp::Eq, i, u32c(0));
        let starts = b.binary(BinaryOp::Or, first, differs);
        Ok(b.select(starts, u32c(1), u32c(0)))
    }

    /// `group_bounds`: this workgroup's number of group starts.
    fn bounds_kernel(
        &self,
        flag: &Agg,
        sorted: &super::sort::Sorted,
        keys: &[crate::expr::Value],
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("group_bounds");
        let mut bufs = Vec::new();
        let bounds = self.bind_bounds(&mut b, &mut bufs, sorted, keys);
        bufs.push(BufferRef::Scratch(totals));
        let out = b.binding("totals", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, sorted.count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.flag_totals(&mut b, &pre, flag, ws, we, out, |b, i| {
            self.starts_group(b, &pre, &bounds, sorted, keys, i)
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `group_starts`: the first sorted position of every group, in order.
    fn starts_kernel(
        &self,
        flag: &Agg,
        sorted: &super::sort::Sorted,
        keys: &[crate::expr::Value],
        totals: u16,
        starts: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("group_starts");
        let mut bufs = Vec::new();
        let bounds = self.bind_bounds(&mut b, &mut bufs, sorted, keys);
        bufs.extend([BufferRef::Scratch(totals), BufferRef::Scratch(starts)]);
        let tb = b.binding("totals", DType::U32, Access::Read);
        let out = b.binding("starts", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, sorted.count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        let carry = b.assign(DType::U32, Op::Load(tb, pre.w.into()));
        self.scan_span(
            &mut b,
            &pre,
            flag,
            ws,
            we,
            carry.into(),
            |b, i| Ok(self.starts_group(b, &pre, &bounds, sorted, keys, i)?.into()),
            |b, i, run| {
                let f = self.starts_group(b, &pre, &bounds, sorted, keys, i)?;
                let is = b.binary(BinaryOp::Ne, f, u32c(0));
                b.if_(is, |b| b.push(Stmt::Store(out, run, i.into())));
                Ok(b.binary(BinaryOp::Add, run, f).into())
            },
        )?;
        Ok((Self::finish(b)?, bufs))
    }

    /// Appends the kernels that give every group (in key order) its place
    /// in first-appearance order: `group_firsts` writes each group's first
    /// row (the smallest: the sort is stable) with its index, the radix
    /// passes of `sort` order them by that row, `group_places` inverts
    /// the permutation. Returns the scratch of places.
    fn first_seen_places(
        &self,
        plan: &mut KernelPlan,
        rows: BufferRef,
        starts: u16,
        groups: u16,
    ) -> R<u16> {
        let scratch = |plan: &mut KernelPlan, name: &str, len| {
            super::sort::add_scratch(plan, name, DType::U32, len)
        };
        let words = [
            scratch(plan, "first_rows_a", ScratchLen::Positions),
            scratch(plan, "first_rows_b", ScratchLen::Positions),
        ];
        let ids = [
            scratch(plan, "group_ids_a", ScratchLen::Positions),
            scratch(plan, "group_ids_b", ScratchLen::Positions),
        ];
        let hist = scratch(plan, "first_counts", ScratchLen::PerGroup(256));
        let offs = scratch(plan, "first_starts", ScratchLen::PerGroup(256));
        let places = scratch(plan, "group_places", ScratchLen::Positions);
        // group_firsts
        let mut b = self.kernel("group_firsts");
        let mut bufs = vec![
            rows,
            BufferRef::Scratch(starts),
            BufferRef::Scratch(words[0]),
            BufferRef::Scratch(ids[0]),
        ];
        let rb = b.binding("rows", DType::U32, Access::Read);
        let sb = b.binding("starts", DType::U32, Access::Read);
        let wb = b.binding("first_rows", DType::U32, Access::ReadWrite);
        let ib = b.binding("ids", DType::U32, Access::ReadWrite);
        let gb = Self::count_binding(&mut b, &mut bufs, Some(groups)).expect("groups");
        let pre = self.preload(&mut b);
        let (gs, ge) = self.rows_span(&mut b, &pre, Some(gb));
        self.thread_loop(&mut b, &pre, gs, ge, false, |b, g| {
            let s = b.assign(DType::U32, Op::Load(sb, g.into()));
            let r = b.assign(DType::U32, Op::Load(rb, s.into()));
            b.push(Stmt::Store(wb, g.into(), r.into()));
            b.push(Stmt::Store(ib, g.into(), g.into()));
            Ok(())
        })?;
        push(plan, Self::finish(b)?, Groups::Spans, bufs);
        let (_, ids_cur) = self.digit_passes(
            plan,
            super::sort::Digits {
                wt: DType::U32,
                passes: 4,
                words,
                cur: 0,
                rows: Some((ids, 0)),
                count: Some(groups),
                hist,
                offs,
            },
        )?;
        let sorted_ids = ids[ids_cur.expect("ids carried")];
        // group_places
        let mut b = self.kernel("group_places");
        let mut bufs = vec![BufferRef::Scratch(sorted_ids), BufferRef::Scratch(places)];
        let ib = b.binding("ids", DType::U32, Access::Read);
        let pb = b.binding("places", DType::U32, Access::ReadWrite);
        let gb = Self::count_binding(&mut b, &mut bufs, Some(groups)).expect("groups");
        let pre = self.preload(&mut b);
        let (gs, ge) = self.rows_span(&mut b, &pre, Some(gb));
        self.thread_loop(&mut b, &pre, gs, ge, false, |b, j| {
            let g = b.assign(DType::U32, Op::Load(ib, j.into()));
            b.push(Stmt::Store(pb, g.into(), j.into()));
            Ok(())
        })?;
        push(plan, Self::finish(b)?, Groups::Spans, bufs);
        Ok(places)
    }

    /// Welford's step of `semantics::Moments::push` on `[n, mean, m2]`
    /// (`f64` registers) with the value `x`, the same operations in the
    /// same order, so a group's `m2` has the bits `cpu-scalar` computes.
    fn welford(b: &mut KernelBuilder, st: &[Local], x: Operand) {
        let [n, mean, m2] = [st[0], st[1], st[2]];
        let x = if b.ty(x) == DType::F64 {
            x
        } else {
            b.assign(DType::F64, Op::Cast(x)).into()
        };
        let n1 = b.binary(BinaryOp::Add, n, Scalar::F64(1.0));
        b.set(n, Op::Copy(n1.into()));
        let d = b.binary(BinaryOp::Sub, x, mean);
        let step = b.binary(BinaryOp::Div, d, n);
        let mean1 = b.binary(BinaryOp::Add, mean, step);
        b.set(mean, Op::Copy(mean1.into()));
        let dev = b.binary(BinaryOp::Sub, x, mean);
        let sq = b.binary(BinaryOp::Mul, d, dev);
        let m21 = b.binary(BinaryOp::Add, m2, sq);
        b.set(m2, Op::Copy(m21.into()));
    }

    /// `group_fold` ([`Fold::Narrow`], [`Fold::Every`]): per group, one
    /// invocation folds its rows in order, with its key at its first row.
    /// `group_fold_wide` ([`Fold::Wide`]): per group, one workgroup folds
    /// its rows (each invocation a stride of them in order, then the
    /// workgroup's reduction in a fixed order). Both are dispatched; which
    /// one works is decided on the device from the groups' average size:
    /// when it is at least a workgroup, each group is a workgroup's (a few
    /// large groups would otherwise be a few invocations' long loops),
    /// else an invocation's. Either way the result depends only on the
    /// input. `Fold::Every` folds every group by invocations (a plan
    /// whose wide fold would not fit in workgroup memory).
    #[allow(clippy::too_many_arguments, clippy::redundant_closure_call)]
    fn fold_kernel(
        &self,
        keys: &[crate::expr::Value],
        aggs: &[Aggregate],
        rows: BufferRef,
        starts: u16,
        groups: u16,
        count: Option<u16>,
        place: Option<u16>,
        mode: Fold,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let stage = self.stage;
        let wide = mode == Fold::Wide;
        let mut b = self.kernel(if wide {
            "group_fold_wide"
        } else {
            "group_fold"
        });
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        bufs.push(rows);
        let rows = b.binding("rows", DType::U32, Access::Read);
        bufs.push(BufferRef::Scratch(starts));
        let sb = b.binding("starts", DType::U32, Access::Read);
        let outputs = stage.output_dtypes();
        // Without 64-bit integers (GL), a count's or an arg aggregate's
        // `u64` column is bound as `u32` words and written as halves:
        // its values are below 2^32.
        let m = keys.len();
        let halves: Vec<bool> = (0..outputs.len())
            .map(|c| {
                !self.caps.int64
                    && c >= m
                    && outputs[c] == DType::U64
                    && matches!(
                        aggs[c - m].kind,
                        AggKind::Count | AggKind::ArgMin | AggKind::ArgMax
                    )
            })
            .collect();
        let outs: Vec<BindingId> = outputs
            .iter()
            .enumerate()
            .map(|(c, &t)| {
                bufs.push(BufferRef::Output(c as u16));
                let t = if halves[c] { DType::U32 } else { t };
                b.binding(format!("out{c}"), t, Access::ReadWrite)
            })
            .collect();
        let place = place.map(|p| {
            bufs.push(BufferRef::Scratch(p));
            b.binding("places", DType::U32, Access::Read)
        });
        // The groups split over the workgroups like rows.
        let gb = Self::count_binding(&mut b, &mut bufs, Some(groups)).expect("groups");
        let cb = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let n = match cb {
            Some(c) => b.assign(DType::U32, Op::Load(c, u32c(0))),
            None => pre.len,
        };
        let g_total = b.assign(DType::U32, Op::Load(gb, u32c(0)));
        // Groups of a workgroup's rows or more on average: the wide fold.
        let per = b.binary(BinaryOp::Div, n, u32c(self.wg));
        let some = b.binary(BinaryOp::Gt, g_total, u32c(0));
        let big = b.binary(BinaryOp::Le, g_total, per);
        let is_wide = b.binary(BinaryOp::And, some, big);
        let folded: Vec<(usize, Agg, Option<crate::expr::Value>)> = aggs
            .iter()
            .enumerate()
            .filter(|(_, a)| a.kind != AggKind::Count)
            .map(|(j, a)| {
                let col = a.column.expect("a column");
                (
                    j,
                    Agg {
                        kind: a.kind.clone(),
                        ty: stage.program.ty(col),
                        saturating: false,
                    },
                    a.column,
                )
            })
            .collect();
        // Group `g`'s first sorted position and the end of its rows.
        let bounds = |b: &mut KernelBuilder, g: Local| -> (Local, Local) {
            let s = b.assign(DType::U32, Op::Load(sb, g.into()));
            let next = b.binary(BinaryOp::Add, g, u32c(1));
            let more = b.binary(BinaryOp::Lt, next, g_total);
            let last = b.binary(BinaryOp::Sub, g_total, u32c(1));
            let at = b.binary(BinaryOp::Min, next, last);
            let ns = b.assign(DType::U32, Op::Load(sb, at.into()));
            (s, b.select(more, ns, n))
        };
        // Writes group `g`'s row: its key at its first row, its count,
        // and the folded aggregates' states.
        let write = |b: &mut KernelBuilder, g: Local, s: Local, e: Local, states: &[Vec<Local>]| {
            let out_at = match place {
                Some(p) => b.assign(DType::U32, Op::Load(p, g.into())),
                None => g,
            };
            let first = b.assign(DType::U32, Op::Load(rows, s.into()));
            let vals = self.element(b, &pre, &inputs, first)?;
            for (c, &key) in keys.iter().enumerate() {
                let mut k = Self::value(&vals, key)?;
                if outputs[c].is_float() {
                    // The zeros' group is `+0.0`, whichever zero came first.
                    let zero = Operand::Const(Scalar::zero(outputs[c]));
                    let z = b.binary(BinaryOp::Eq, k, zero);
                    k = b.select(z, zero, k).into();
                }
                b.push(Stmt::Store(outs[c], out_at.into(), k));
            }
            for (j, a) in aggs.iter().enumerate() {
                let o = outs[m + j];
                let ty = outputs[m + j];
                // A `u32` value of a column written as halves.
                let narrow = |b: &mut KernelBuilder, v: Local| -> Option<Operand> {
                    if halves[m + j] {
                        Self::store_u64_halves(b, o, out_at, v.into(), u32c(0));
                        None
                    } else {
                        Some(b.assign(ty, Op::Cast(v.into())).into())
                    }
                };
                let v: Option<Operand> = if a.kind == AggKind::Count {
                    let c = b.binary(BinaryOp::Sub, e, s);
                    narrow(b, c)
                } else {
                    let k = folded.iter().position(|(i, ..)| *i == j).expect("folded");
                    match a.kind {
                        // The best row; none (every value NaN): the
                        // group's first row, as on the CPU.
                        AggKind::ArgMin | AggKind::ArgMax => {
                            let at = states[k][1];
                            let none = b.binary(BinaryOp::Eq, at, u32c(u32::MAX));
                            let row = b.select(none, first, at);
                            narrow(b, row)
                        }
                        AggKind::M2 => Some(states[k][2].into()),
                        _ => Some(states[k][0].into()),
                    }
                };
                if let Some(v) = v {
                    b.push(Stmt::Store(o, out_at.into(), v));
                }
            }
            Ok(())
        };
        // One row's contribution to the folded states.
        let fold_row = |b: &mut KernelBuilder, j: Local, states: &[Vec<Local>], welford: bool| {
            let row = b.assign(DType::U32, Op::Load(rows, j.into()));
            let vals = self.element(b, &pre, &inputs, row)?;
            for ((_, a, col), st) in folded.iter().zip(states) {
                let x = Self::value(&vals, col.expect("a column"))?;
                if a.kind == AggKind::M2 && welford {
                    Self::welford(b, st, x);
                    continue;
                }
                // Positional aggregates keep the row (no filter before an
                // arg aggregate: the position).
                let x = self.lift(b, a, Some(x), row);
                self.merge_into(b, &pre, a, st, &x)?;
            }
            Ok(())
        };
        let mut result = Ok(());
        if wide {
            let fold_aggs: Vec<Agg> = folded.iter().map(|(_, a, _)| a.clone()).collect();
            b.if_(is_wide, |b| {
                b.for_(pre.w, g_total, pre.groups, |b, g| {
                    result = (|| {
                        // The last group's reduction read the shared
                        // states: every invocation is past it.
                        b.barrier();
                        let (s, e) = bounds(b, g);
                        let states: Vec<Vec<Local>> = fold_aggs
                            .iter()
                            .map(|a| self.new_state(b, &pre, a))
                            .collect();
                        let from = b.binary(BinaryOp::Add, s, pre.t);
                        let mut r = Ok(());
                        b.for_(from, e, u32c(self.wg), |b, j| {
                            r = fold_row(b, j, &states, false);
                        });
                        r?;
                        self.workgroup_reduce(b, &pre, &fold_aggs, &states, |b, fin| {
                            write(b, g, s, e, fin)
                        })
                    })();
                });
            });
        } else {
            let narrow = match mode {
                Fold::Every => b.assign(DType::Bool, Op::Copy(Scalar::Bool(true).into())),
                _ => b.assign(DType::Bool, Op::Unary(UnaryOp::Not, is_wide.into())),
            };
            let (gs, ge) = self.rows_span(&mut b, &pre, Some(gb));
            b.if_(narrow, |b| {
                result = self.thread_loop(b, &pre, gs, ge, false, |b, g| {
                    let (s, e) = bounds(b, g);
                    let states: Vec<Vec<Local>> = folded
                        .iter()
                        .map(|(_, a, _)| match a.kind {
                            // Welford's count, mean and sum of squared
                            // deviations.
                            AggKind::M2 => (0..3)
                                .map(|_| b.assign(DType::F64, Op::Copy(Scalar::F64(0.0).into())))
                                .collect(),
                            _ => self.new_state(b, &pre, a),
                        })
                        .collect();
                    let mut r = Ok(());
                    b.for_(s, e, u32c(1), |b, j| r = fold_row(b, j, &states, true));
                    r?;
                    write(b, g, s, e, &states)
                });
            });
        }
        result?;
        Ok((Self::finish(b)?, bufs))
    }
}
