//! Keyed aggregation on the device (`group_by(..)` with count, sum, min
//! and max; `distinct`; `value_counts`), sorted by key: the rows sorted by
//! their group word (the radix passes of `sort`, carrying row indices;
//! `-0.0` is `+0.0`, every NaN one key), then
//!
//! - `group_bounds`: each workgroup counts the positions where the sorted
//!   word differs from the one before (a group's first row);
//! - `scan_blocks`: their exclusive scan over workgroups, and the number of
//!   groups;
//! - `group_starts`: each workgroup writes its groups' first positions, in
//!   order (a span scan of the boundary flags);
//! - `group_fold`: one invocation per group folds its rows in input order
//!   (the sort is stable), so every float sum adds in the order
//!   `cpu-scalar` does and the results are the same bits; the key is the
//!   group's first row's.
//!
//! One invocation per group keeps the fold simple and exact; a group of
//! most of the rows is then one invocation's loop (a segmented reduction
//! would spread it), which is the next step for speed, not correctness.

use super::sort::push;
use super::*;
use crate::plan::Aggregate;
use crate::semantics::order::SortKey;

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
        if first_seen {
            return lacks("groups in first-appearance order");
        }
        let [key] = keys else {
            return lacks("groups of several keys");
        };
        for a in aggs {
            if !matches!(
                a.kind,
                AggKind::Count | AggKind::Sum | AggKind::Min | AggKind::Max
            ) {
                return lacks(&format!("`{}` per group", a.kind.name()));
            }
        }
        let mut plan = self.whole_plan();
        let sorted = self.radix(
            &mut plan,
            &[SortKey {
                value: *key,
                descending: false,
            }],
            true,
            true,
            None,
        )?;
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
        };
        let (k, bufs) = self.bounds_kernel(&flag, &sorted, totals)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&flag, totals, groups, false)?;
        push(&mut plan, k, Groups::One, bufs);
        let (k, bufs) = self.starts_kernel(&flag, &sorted, totals, starts)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.fold_kernel(*key, aggs, rows, starts, groups, sorted.count)?;
        push(&mut plan, k, Groups::Spans, bufs);
        plan.readback = Readback::Columns {
            count: Some(groups),
        };
        if let Some(crate::types::Algorithm::DeviceRadix(p)) = plan.algorithm {
            plan.algorithm = Some(crate::types::Algorithm::DeviceSortGroups(p));
        }
        Ok(plan)
    }

    /// Whether sorted position `i` starts a group: the first, or a word
    /// other than the one before.
    fn starts_group(b: &mut KernelBuilder, words: BindingId, wt: DType, i: Local) -> Local {
        let has_prev = b.binary(BinaryOp::Gt, i, u32c(0));
        let back = b.binary(BinaryOp::Sub, i, u32c(1));
        let prev = b.select(has_prev, back, u32c(0));
        let w = b.assign(wt, Op::Load(words, i.into()));
        let pw = b.assign(wt, Op::Load(words, prev.into()));
        let differs = b.binary(BinaryOp::Ne, w, pw);
        let first = b.binary(BinaryOp::Eq, i, u32c(0));
        let starts = b.binary(BinaryOp::Or, first, differs);
        b.select(starts, u32c(1), u32c(0))
    }

    /// `group_bounds`: this workgroup's number of group starts.
    fn bounds_kernel(
        &self,
        flag: &Agg,
        sorted: &super::sort::Sorted,
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("group_bounds");
        let mut bufs = vec![sorted.words, BufferRef::Scratch(totals)];
        let words = b.binding("words", sorted.word_ty, Access::Read);
        let out = b.binding("totals", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, sorted.count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        let state = self.new_state(&mut b, &pre, flag);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let f = Self::starts_group(b, words, sorted.word_ty, i);
            self.merge_into(b, &pre, flag, &state, &[f.into()])
        })?;
        self.workgroup_reduce(
            &mut b,
            &pre,
            std::slice::from_ref(flag),
            std::slice::from_ref(&state),
            |b, fin| {
                b.push(Stmt::Store(out, pre.w.into(), fin[0][0].into()));
                Ok(())
            },
        )?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `group_starts`: the first sorted position of every group, in order.
    fn starts_kernel(
        &self,
        flag: &Agg,
        sorted: &super::sort::Sorted,
        totals: u16,
        starts: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("group_starts");
        let mut bufs = vec![
            sorted.words,
            BufferRef::Scratch(totals),
            BufferRef::Scratch(starts),
        ];
        let wt = sorted.word_ty;
        let words = b.binding("words", wt, Access::Read);
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
            |b, i| Ok(Self::starts_group(b, words, wt, i).into()),
            |b, i, run| {
                let f = Self::starts_group(b, words, wt, i);
                let is = b.binary(BinaryOp::Ne, f, u32c(0));
                b.if_(is, |b| b.push(Stmt::Store(out, run, i.into())));
                Ok(b.binary(BinaryOp::Add, run, f).into())
            },
        )?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `group_fold`: per group, its key (at its first row) and its
    /// aggregates folded over its rows in order.
    fn fold_kernel(
        &self,
        key: crate::expr::Value,
        aggs: &[Aggregate],
        rows: BufferRef,
        starts: u16,
        groups: u16,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let stage = self.stage;
        let mut b = self.kernel("group_fold");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        bufs.push(rows);
        let rows = b.binding("rows", DType::U32, Access::Read);
        bufs.push(BufferRef::Scratch(starts));
        let sb = b.binding("starts", DType::U32, Access::Read);
        let outputs = stage.output_dtypes();
        let outs: Vec<BindingId> = outputs
            .iter()
            .enumerate()
            .map(|(c, &t)| {
                bufs.push(BufferRef::Output(c as u16));
                b.binding(format!("out{c}"), t, Access::ReadWrite)
            })
            .collect();
        // The groups split over the workgroups like rows.
        let gb = Self::count_binding(&mut b, &mut bufs, Some(groups)).expect("groups");
        let cb = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let n = match cb {
            Some(c) => b.assign(DType::U32, Op::Load(c, u32c(0))),
            None => pre.len,
        };
        let g_total = b.assign(DType::U32, Op::Load(gb, u32c(0)));
        let (gs, ge) = self.rows_span(&mut b, &pre, Some(gb));
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
                    },
                    a.column,
                )
            })
            .collect();
        self.thread_loop(&mut b, &pre, gs, ge, false, |b, g| {
            let s = b.assign(DType::U32, Op::Load(sb, g.into()));
            let next = b.binary(BinaryOp::Add, g, u32c(1));
            let more = b.binary(BinaryOp::Lt, next, g_total);
            let last = b.binary(BinaryOp::Sub, g_total, u32c(1));
            let at = b.binary(BinaryOp::Min, next, last);
            let ns = b.assign(DType::U32, Op::Load(sb, at.into()));
            let e = b.select(more, ns, n);
            let first = b.assign(DType::U32, Op::Load(rows, s.into()));
            let vals = self.element(b, &pre, &inputs, first)?;
            let mut k = Self::value(&vals, key)?;
            if outputs[0].is_float() {
                // The zeros' group is `+0.0`, whichever zero came first.
                let zero = Operand::Const(Scalar::zero(outputs[0]));
                let z = b.binary(BinaryOp::Eq, k, zero);
                k = b.select(z, zero, k).into();
            }
            b.push(Stmt::Store(outs[0], g.into(), k));
            let states: Vec<Vec<Local>> = folded
                .iter()
                .map(|(_, a, _)| self.new_state(b, &pre, a))
                .collect();
            let mut r = Ok(());
            b.for_(s, e, u32c(1), |b, j| {
                r = (|| {
                    let row = b.assign(DType::U32, Op::Load(rows, j.into()));
                    let vals = self.element(b, &pre, &inputs, row)?;
                    for ((_, a, col), st) in folded.iter().zip(&states) {
                        let x = Self::value(&vals, col.expect("a column"))?;
                        self.merge_into(b, &pre, a, st, &[x])?;
                    }
                    Ok(())
                })();
            });
            r?;
            for (j, a) in aggs.iter().enumerate() {
                let o = outs[1 + j];
                let v: Operand = if a.kind == AggKind::Count {
                    let c = b.binary(BinaryOp::Sub, e, s);
                    b.assign(outputs[1 + j], Op::Cast(c.into())).into()
                } else {
                    let k = folded.iter().position(|(i, ..)| *i == j).expect("folded");
                    states[k][0].into()
                };
                b.push(Stmt::Store(o, g.into(), v));
            }
            Ok(())
        })?;
        Ok((Self::finish(b)?, bufs))
    }
}
