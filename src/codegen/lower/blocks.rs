//! The building blocks every kernel shape uses, written once: the
//! aggregates' monoid operations (identity, lift, merge), the span of a
//! workgroup, the per-invocation loop, the workgroup reduction and the span
//! scan (see the module doc of `lower`).

use super::*;
use crate::codegen::kernel::SharedId;

impl Lower<'_> {
    // ----- monoid operations -----

    pub(super) fn identity(&self, b: &mut KernelBuilder, pre: &Pre, a: &Agg) -> Vec<Operand> {
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
            AggKind::First | AggKind::Last => vec![c(Scalar::zero(a.ty)), c(Scalar::U32(NONE))],
            AggKind::M2 => vec![c(Scalar::U32(0)), c(Scalar::F64(0.0)), c(Scalar::F64(0.0))],
        }
    }

    pub(super) fn lift(
        &self,
        b: &mut KernelBuilder,
        a: &Agg,
        x: Option<Operand>,
        i: Local,
    ) -> Vec<Operand> {
        match a.kind {
            AggKind::Count => vec![u32c(1)],
            AggKind::M2 => {
                let x = x.expect("column");
                let x = if b.ty(x) == DType::F64 {
                    x
                } else {
                    b.assign(DType::F64, Op::Cast(x)).into()
                };
                vec![u32c(1), x, Operand::Const(Scalar::F64(0.0))]
            }
            AggKind::ArgMin | AggKind::ArgMax | AggKind::First | AggKind::Last => {
                vec![x.expect("column"), i.into()]
            }
            _ => vec![x.expect("column")],
        }
    }

    pub(super) fn merge(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        a: &Agg,
        acc: &[Operand],
        x: &[Operand],
    ) -> R<Vec<Operand>> {
        use BinaryOp as B;
        Ok(match &a.kind {
            AggKind::Sum | AggKind::Count if a.saturating => {
                // Unsigned: the sum wrapped exactly when it is below an
                // addend.
                let s = b.binary(B::Add, acc[0], x[0]);
                let wrapped = b.binary(B::Lt, s, acc[0]);
                let max = match a.ty {
                    DType::U32 => Scalar::U32(u32::MAX),
                    DType::U64 => Scalar::U64(u64::MAX),
                    other => return err(format!("a saturating sum of {other}")),
                };
                let max = Operand::Const(max);
                vec![b.select(wrapped, max, s).into()]
            }
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
                // A NaN never wins, and is compared as the state's own
                // value: the comparisons meet no NaN, which the
                // non-finite guard (`codegen::finite`) would flag.
                let (ok, xv) = if a.ty.is_float() {
                    let nan = b.assign(DType::Bool, Op::IsNan(x[0]));
                    let not_nan = b.assign(DType::Bool, Op::Unary(UnaryOp::Not, nan.into()));
                    let xv = b.select(nan, acc[0], x[0]);
                    (b.binary(B::And, valid, not_nan), xv.into())
                } else {
                    (valid, x[0])
                };
                let acc_none = b.binary(B::Eq, acc[1], u32c(NONE));
                let better = b.binary(cmp, xv, acc[0]);
                let same = b.binary(B::Eq, xv, acc[0]);
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
            AggKind::First | AggKind::Last => {
                // The earlier (later) position; a state without one never
                // wins.
                let cmp = if matches!(a.kind, AggKind::First) {
                    B::Lt
                } else {
                    B::Gt
                };
                let valid = b.binary(B::Ne, x[1], u32c(NONE));
                let acc_none = b.binary(B::Eq, acc[1], u32c(NONE));
                let better = b.binary(cmp, x[1], acc[1]);
                let wins = b.binary(B::Or, acc_none, better);
                let take = b.binary(B::And, valid, wins);
                let v = b.select(take, x[0], acc[0]);
                let i = b.select(take, x[1], acc[1]);
                vec![v.into(), i.into()]
            }
            AggKind::M2 => {
                // Chan's merge, as `semantics::Moments::merge`; a side
                // without values leaves the other.
                let f = |b: &mut KernelBuilder, n: Operand| -> Local {
                    b.assign(DType::F64, Op::Cast(n))
                };
                let n = b.binary(B::Add, acc[0], x[0]);
                let (na, nb, nf) = (f(b, acc[0]), f(b, x[0]), f(b, n.into()));
                // Two sides without values would divide 0 by 0, a NaN the
                // picks below drop but the non-finite guard
                // (`codegen::finite`) would see: divide by at least 1.
                let nf = b.binary(B::Max, nf, Scalar::F64(1.0));
                let d = b.binary(B::Sub, x[1], acc[1]);
                let wb = b.binary(B::Div, nb, nf);
                let step = b.binary(B::Mul, d, wb);
                let mean = b.binary(B::Add, acc[1], step);
                let dd = b.binary(B::Mul, d, d);
                let nab = b.binary(B::Mul, na, nb);
                let w = b.binary(B::Div, nab, nf);
                let cross = b.binary(B::Mul, dd, w);
                let m2s = b.binary(B::Add, acc[2], x[2]);
                let m2 = b.binary(B::Add, m2s, cross);
                let a_none = b.binary(B::Eq, acc[0], u32c(0));
                let x_none = b.binary(B::Eq, x[0], u32c(0));
                let pick = |b: &mut KernelBuilder, merged: Operand, av: Operand, xv: Operand| {
                    let one = b.select(a_none, xv, merged);
                    b.select(x_none, av, one).into()
                };
                vec![
                    pick(b, n.into(), acc[0], x[0]),
                    pick(b, mean.into(), acc[1], x[1]),
                    pick(b, m2.into(), acc[2], x[2]),
                ]
            }
        })
    }

    pub(super) fn merge_into(
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

    pub(super) fn new_state(&self, b: &mut KernelBuilder, pre: &Pre, a: &Agg) -> Vec<Local> {
        let id = self.identity(b, pre, a);
        a.fields()
            .into_iter()
            .zip(id)
            .map(|(ty, v)| b.assign(ty, Op::Copy(v)))
            .collect()
    }

    // ----- building blocks -----

    /// Clears `n` bins in workgroup memory, then waits for every
    /// invocation (the counting that follows adds into them).
    pub(super) fn clear_bins(&self, b: &mut KernelBuilder, pre: &Pre, bins: SharedId, n: u32) {
        b.for_(pre.t, u32c(n), u32c(self.wg), |b, d| {
            b.push(Stmt::StoreShared(bins, d.into(), u32c(0)));
        });
        b.barrier();
    }

    /// Waits for every invocation's counting, then writes the `n` bins as
    /// this workgroup's row of `out` (`[workgroup * n, ..)`).
    pub(super) fn store_bins(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        bins: SharedId,
        n: u32,
        out: BindingId,
    ) {
        b.barrier();
        let row = b.binary(BinaryOp::Mul, pre.w, u32c(n));
        b.for_(pre.t, u32c(n), u32c(self.wg), |b, d| {
            let c = b.assign(DType::U32, Op::LoadShared(bins, d.into()));
            let at = b.binary(BinaryOp::Add, row, d);
            b.push(Stmt::Store(out, at.into(), c.into()));
        });
    }

    /// `(ws, we)` of this workgroup's span.
    pub(super) fn span(&self, b: &mut KernelBuilder, pre: &Pre) -> (Local, Local) {
        let start = b.binary(BinaryOp::Mul, pre.w, pre.span);
        let ws = b.binary(BinaryOp::Min, start, pre.len);
        let end = b.binary(BinaryOp::Add, ws, pre.span);
        let we = b.binary(BinaryOp::Min, end, pre.len);
        (ws, we)
    }

    /// Each invocation's loop over `[ws, we)`.
    pub(super) fn thread_loop(
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

    /// Sums the `u32` flag `f` of every row in `[ws, we)` over the
    /// workgroup (`flag` is a `u32` sum) and stores the sum at
    /// `out[workgroup]`: the first pass of a compaction of flagged rows.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn flag_totals(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        flag: &Agg,
        ws: Local,
        we: Local,
        out: BindingId,
        f: impl Fn(&mut KernelBuilder, Local) -> R<Local>,
    ) -> R<()> {
        let state = self.new_state(b, pre, flag);
        self.thread_loop(b, pre, ws, we, false, |b, i| {
            let x = f(b, i)?;
            self.merge_into(b, pre, flag, &state, &[x.into()])
        })?;
        self.workgroup_reduce(
            b,
            pre,
            std::slice::from_ref(flag),
            std::slice::from_ref(&state),
            |b, fin| {
                b.push(Stmt::Store(out, pre.w.into(), fin[0][0].into()));
                Ok(())
            },
        )
    }

    /// Reduces every invocation's `states` over the workgroup; `sink` runs
    /// in invocation 0 with the workgroup's states.
    #[allow(clippy::redundant_closure_call)] // the closure scopes `?` inside the builder callback
    pub(super) fn workgroup_reduce(
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
    pub(super) fn scan_span(
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
}
