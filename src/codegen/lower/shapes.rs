//! One kernel plan per stage shape: store, reduce (partials, then one
//! workgroup combining them), scan (span totals, their scan, the span
//! scans) and filter + collect (the same three passes over survivor flags,
//! scattering survivors in order); `run` picks the shape.

use super::*;
use crate::codegen::kernel::AtomicOp;

/// Grid-wide tiles (`workgroup × items` positions each) an early-exit
/// reduction reads between two looks at the earliest survivor found: a
/// look is an atomic and two barriers, a tile a few loads per invocation.
const SETTLE_TILES: u32 = 8;

impl Lower<'_> {
    // ----- kernels -----

    /// Pass 1 of a reduction: each workgroup folds its span of the element
    /// program into one state per aggregate, written at `[workgroup]`.
    ///
    /// With `settle` (a zero-initialized scratch word; see
    /// [`Lower::settles_early`]) the span is read in tiles of
    /// `workgroup × items × SETTLE_TILES` positions: before each, the
    /// workgroup reads the earliest survivor any workgroup has found (kept
    /// complemented, so that zero is none and `max` keeps the earliest)
    /// and skips the tile when it lies past it; after it, an invocation
    /// that found one publishes it. Every position before the earliest
    /// survivor is still read, so the result is the one a full pass
    /// gives. Positions are the chunk's: a later chunk can read a word a
    /// settled earlier chunk left, which only skips rows that cannot win
    /// (and the hosts launch no chunk after a settled one).
    pub(super) fn partial_kernel(
        &self,
        name: &str,
        aggs: &[Agg],
        columns: &[Option<crate::expr::Value>],
        out_names: &[u16],
        settle: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
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
        let settled = settle.map(|sc| {
            bufs.push(BufferRef::Scratch(sc));
            b.binding("settled", DType::U32, Access::Atomic)
        });
        let pre = self.preload(&mut b);
        let states: Vec<Vec<Local>> = aggs
            .iter()
            .map(|a| self.new_state(&mut b, &pre, a))
            .collect();
        let (ws, we) = self.span(&mut b, &pre);
        let contiguous = !aggs.iter().all(Agg::commutative);
        let body = |b: &mut KernelBuilder, i: Local| -> R<()> {
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
        };
        match settled {
            None => self.thread_loop(&mut b, &pre, ws, we, contiguous, body)?,
            Some(settled) => {
                let first = aggs
                    .iter()
                    .position(|a| a.kind == AggKind::First)
                    .expect("a first aggregate");
                let found = states[first][1];
                let items = self.caps.items_per_thread * SETTLE_TILES;
                let wg = self.wg;
                let seen = b.shared("settled_at", DType::U32, 1);
                let mut result = Ok(());
                b.for_(ws, we, u32c(wg * items), |b, base| {
                    let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
                    b.if_(lead, |b| {
                        let f = b.assign(
                            DType::U32,
                            Op::Atomic {
                                op: AtomicOp::Max,
                                binding: settled,
                                index: u32c(0),
                                value: u32c(0),
                            },
                        );
                        b.push(Stmt::StoreShared(seen, u32c(0), f.into()));
                    });
                    b.barrier();
                    let f = b.assign(DType::U32, Op::LoadShared(seen, u32c(0)));
                    b.barrier();
                    let known = b.binary(BinaryOp::Ne, f, u32c(0));
                    let at = b.assign(DType::U32, Op::Unary(UnaryOp::BitNot, f.into()));
                    let past = b.binary(BinaryOp::Lt, at, base);
                    let skip = b.binary(BinaryOp::And, known, past);
                    let go = b.assign(DType::Bool, Op::Unary(UnaryOp::Not, skip.into()));
                    b.if_(go, |b| {
                        let from = b.binary(BinaryOp::Add, base, pre.t);
                        b.for_(u32c(0), u32c(items), u32c(1), |b, k| {
                            let off = b.binary(BinaryOp::Mul, k, u32c(wg));
                            let i = b.binary(BinaryOp::Add, from, off);
                            let inside = b.binary(BinaryOp::Lt, i, we);
                            b.if_(inside, |b| result = body(b, i));
                        });
                        let has = b.binary(BinaryOp::Ne, found, u32c(NONE));
                        b.if_(has, |b| {
                            let mark =
                                b.assign(DType::U32, Op::Unary(UnaryOp::BitNot, found.into()));
                            b.assign(
                                DType::U32,
                                Op::Atomic {
                                    op: AtomicOp::Max,
                                    binding: settled,
                                    index: u32c(0),
                                    value: mark.into(),
                                },
                            );
                        });
                    });
                });
                result?;
            }
        }
        self.workgroup_reduce(&mut b, &pre, aggs, &states, |b, fin| {
            for (st, out) in fin.iter().zip(&outs) {
                for (&v, &o) in st.iter().zip(out) {
                    b.push(Stmt::Store(o, pre.w.into(), v.into()));
                }
            }
            Ok(())
        })?;
        Ok((
            b.finish().map_err(|e| LowerError(e.to_string().into()))?,
            bufs,
        ))
    }

    /// Whether a reduce is settled by its first survivor: every aggregate
    /// is `first`, or an `any` of the constant `true` (whether there was
    /// one), as `first`, `nth`, `find` and `position` are. Its partials
    /// then stop reading past the earliest survivor found.
    pub(super) fn settles_early(&self, list: &[crate::plan::Aggregate]) -> bool {
        let is_true = |c: Option<crate::expr::Value>| {
            c.is_some_and(|c| {
                matches!(
                    self.stage.program.get(c).node,
                    Node::Const(Scalar::Bool(true))
                )
            })
        };
        list.iter().any(|a| a.kind == AggKind::First)
            && list.iter().all(|a| match a.kind {
                AggKind::First => true,
                AggKind::Any => is_true(a.column),
                _ => false,
            })
    }

    /// Pass 2 of a reduction: one workgroup folds the `groups` partial
    /// states in order and writes the result over partial `[0]` (every
    /// load happens before the reduction's first barrier, the store after
    /// its last), which keeps the binding count within small limits.
    pub(super) fn final_kernel(
        &self,
        aggs: &[Agg],
        parts: &[u16],
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
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
        Ok((
            b.finish().map_err(|e| LowerError(e.to_string().into()))?,
            bufs,
        ))
    }

    /// Pass 2 of a scan: one workgroup turns the span totals into exclusive
    /// prefixes in place, starting from the carry (when `carry_in`) or the
    /// identity, and stores the grand total in the carry buffer.
    pub(super) fn blocks_kernel(
        &self,
        a: &Agg,
        totals: u16,
        carry: u16,
        carry_in: bool,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
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
        Ok((
            b.finish().map_err(|e| LowerError(e.to_string().into()))?,
            bufs,
        ))
    }

    /// Pass 3 of a scan or compaction: each workgroup scans its span from
    /// its exclusive prefix; `emit` writes the outputs of one position.
    pub(super) fn apply_kernel(
        &self,
        name: &str,
        a: &Agg,
        totals: u16,
        outputs: &[DType],
        lifted: &LiftFn<'_>,
        emit: &EmitFn<'_>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
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
        Ok((
            b.finish().map_err(|e| LowerError(e.to_string().into()))?,
            bufs,
        ))
    }

    pub(super) fn store_kernel(
        &self,
        cols: &[crate::expr::Value],
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
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
        Ok((
            b.finish().map_err(|e| LowerError(e.to_string().into()))?,
            bufs,
        ))
    }

    pub(super) fn run(self) -> R<KernelPlan> {
        let stage = self.stage;
        if let Terminal::Sort {
            keys,
            columns,
            fetch,
        } = &stage.terminal
        {
            return match fetch {
                None => self.sort_plan(keys, columns),
                Some(p) => self.top_k_plan(keys, columns, *p),
            };
        }
        if let Terminal::CountByKey { key, keys } = &stage.terminal {
            return self.count_plan(*key, *keys);
        }
        if let Terminal::Group {
            keys,
            aggs,
            first_seen,
        } = &stage.terminal
        {
            return self.group_plan(keys, aggs, *first_seen);
        }
        if let Terminal::Join {
            kind,
            keys,
            columns,
            build,
        } = &stage.terminal
        {
            return self.join_plan(*kind, keys, columns, build);
        }
        let mut kernels = Vec::new();
        let mut dispatches = Vec::new();
        let mut scratch = Vec::new();
        let mut add = |k: (crate::codegen::kernel::Kernel, Vec<BufferRef>), groups| {
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
                        saturating: false,
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
                let settle = self.settles_early(list).then(|| {
                    new_scratch(
                        "settled".into(),
                        DType::U32,
                        ScratchLen::One,
                        ScratchInit::Zero,
                    )
                });
                add(
                    self.partial_kernel("reduce_partial", &aggs, &columns, &parts, settle)?,
                    Groups::Spans,
                );
                add(self.final_kernel(&aggs, &parts)?, Groups::One);
                Readback::Aggregates(readback)
            }
            // Planned above (sorts, top-k, groups, key counts, joins).
            Terminal::CountByKey { .. } | Terminal::Group { .. } => {
                return err("a key count or group reached the shapes of other stages")
            }
            Terminal::Sort { .. } => return err("a sort reached the shapes of other stages"),
            Terminal::Join { .. } => return err("a join reached the shapes of other stages"),
            Terminal::Collect(cols) if stage.predicate.is_none() => {
                add(self.store_kernel(cols)?, Groups::Spans);
                Readback::Columns { count: None }
            }
            Terminal::Collect(cols) => {
                let count = Agg {
                    kind: AggKind::Count,
                    ty: DType::U32,
                    saturating: false,
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
                        None,
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
                    saturating: false,
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
                let agg = Agg {
                    kind,
                    ty,
                    saturating: false,
                };
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
                        None,
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
            whole: false,
            merge_runs: None,
            algorithm: None,
            fixed_rows: None,
            build: Vec::new(),
            sized: None,
            non_finite: None,
        })
    }
}
