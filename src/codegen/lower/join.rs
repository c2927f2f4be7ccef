//! Joins on the device (`join`, `semi_join`/`is_in`, `anti_join`/
//! `not_in`) on one key, in the order `relational::join` documents: probe
//! order, and the build rows matching one probe row in build order.
//!
//! - `join_build`: the build side's key as group words (`-0.0` is `+0.0`,
//!   every NaN one key), with its row indices for an inner join; then the
//!   digit passes of `sort` order them (stable, so equal keys keep build
//!   order);
//! - `join_probe`: each probe position's key word (after the stage's
//!   predicate) is looked up by two binary searches over the sorted words:
//!   the first match and the number of matches (an inner join), or
//!   whether there is one (a semi- or anti-join), summed per workgroup;
//! - `scan_blocks`: the sums' exclusive scan over workgroups, and the
//!   number of rows out (a `u64` for an inner join: a probe row may match
//!   every build row);
//! - `join_emit`: each workgroup scans its span's counts from its prefix
//!   and writes each probe row's pairs at its position: the probe columns,
//!   then (inner) the build columns at the sorted build rows.
//!
//! An inner join's outputs are allocated once its rows are known
//! ([`KernelPlan::sized`]); a semi- or anti-join writes at most one row
//! per position. The grid covers the larger side (`launch_with`), so a
//! build side larger than the probe side is still sorted by many
//! workgroups.

use super::sort::{add_scratch, push, Digits, RADIX};
use super::*;
use crate::codegen::plan::SizedOutputs;
use crate::semantics::order::{self, JoinKind};

/// Iterations of a binary search over fewer than `2^32` words.
const SEARCH_STEPS: u32 = 32;

impl Lower<'_> {
    /// The plan of a join stage on one key, or why the device kernels
    /// cannot run it.
    pub(super) fn join_plan(
        &self,
        kind: JoinKind,
        keys: &[crate::expr::Value],
        columns: &[crate::expr::Value],
        build: &[(u16, DType)],
    ) -> R<KernelPlan> {
        let key = keys[0];
        let kty = self.stage.program.ty(key);
        let Some(&(_, bty)) = build.first() else {
            return err("a join without build keys");
        };
        if bty != kty {
            return err(format!(
                "join keys of two types ({kty} and {bty}): they run on the CPU backends"
            ));
        }
        let wt = if order::is_narrow(kty) {
            DType::U32
        } else {
            DType::U64
        };
        let inner = kind == JoinKind::Inner;
        // An inner join's rows are counted in `u64`: a probe row may
        // match every build row.
        let cty = if inner { DType::U64 } else { DType::U32 };
        if (wt == DType::U64 || inner) && !self.caps.int64 {
            return Err(LowerError(Decline::MissingType {
                dtype: if wt == DType::U64 { kty } else { DType::U64 },
                feature: "SHADER_INT64",
            }));
        }
        let mut plan = self.whole_plan();
        plan.build = build.iter().map(|&(k, _)| k).collect();
        let s = BufferRef::Scratch;
        let words = [
            add_scratch(&mut plan, "build_words_a", wt, ScratchLen::Build),
            add_scratch(&mut plan, "build_words_b", wt, ScratchLen::Build),
        ];
        let rows = inner.then(|| {
            [
                add_scratch(&mut plan, "build_rows_a", DType::U32, ScratchLen::Build),
                add_scratch(&mut plan, "build_rows_b", DType::U32, ScratchLen::Build),
            ]
        });
        let count = add_scratch(&mut plan, "build_count", DType::U32, ScratchLen::One);
        let hist = add_scratch(
            &mut plan,
            "digit_counts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let offs = add_scratch(
            &mut plan,
            "digit_starts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let (k, bufs) =
            self.join_build_kernel(kty, wt, s(words[0]), rows.map(|r| s(r[0])), count)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let passes = if kty == DType::Bool {
            1
        } else {
            wt.size() as u32
        };
        let (cur, rows_cur) = self.digit_passes(
            &mut plan,
            Digits {
                wt,
                passes,
                words,
                cur: 0,
                rows: rows.map(|r| (r, 0)),
                count: Some(count),
                hist,
                offs,
            },
        )?;
        let sorted_rows = rows.zip(rows_cur).map(|(r, c)| s(r[c]));

        let matches = add_scratch(
            &mut plan,
            "probe_matches",
            DType::U32,
            ScratchLen::Positions,
        );
        let first =
            inner.then(|| add_scratch(&mut plan, "probe_first", DType::U32, ScratchLen::Positions));
        let totals = add_scratch(&mut plan, "probe_totals", cty, ScratchLen::Groups);
        let total = add_scratch(&mut plan, "join_rows", cty, ScratchLen::One);
        let sum = Agg {
            kind: AggKind::Sum,
            ty: cty,
        };
        let (k, bufs) =
            self.join_probe_kernel(kind, key, wt, &sum, s(words[cur]), matches, first, totals)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&sum, totals, total, false)?;
        push(&mut plan, k, Groups::One, bufs);
        if inner {
            plan.sized = Some(SizedOutputs {
                after: plan.dispatches.len(),
                rows: total,
            });
        }
        let added = if inner { build.len() - 1 } else { 0 };
        let (k, bufs) = self.join_emit_kernel(
            &sum,
            columns,
            &build[1..1 + added],
            matches,
            first.zip(sorted_rows),
            totals,
        )?;
        push(&mut plan, k, Groups::Spans, bufs);
        plan.readback = Readback::Columns { count: Some(total) };
        plan.algorithm = Some(crate::types::Algorithm::DeviceSortMergeJoin(
            crate::types::Passes {
                passes: passes as u8,
                digits: kty.size().max(1) as u8,
            },
        ));
        Ok(plan)
    }

    /// The build side's rows and the element offset of build input `j`
    /// (uniforms).
    fn build_len(&self, b: &mut KernelBuilder) -> Local {
        b.assign(DType::U32, Op::Uniform(self.field(UniformSource::BuildLen)))
    }

    fn build_offset(&self, b: &mut KernelBuilder, j: usize) -> Local {
        let slot = UniformSource::InputOffset((self.stage.inputs.len() + j) as u16);
        b.assign(DType::U32, Op::Uniform(self.field(slot)))
    }

    /// `join_build`: the group word of every build row's key (and the row
    /// itself, when carried); invocation 0 of workgroup 0 stores the
    /// build side's rows in `count` for the digit passes.
    fn join_build_kernel(
        &self,
        kty: DType,
        wt: DType,
        words: BufferRef,
        rows: Option<BufferRef>,
        count: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_build");
        let mut bufs = vec![BufferRef::Input(self.stage.inputs.len() as u16), words];
        let key_in = b.binding("build_key", kty, Access::Read);
        let out = b.binding("words", wt, Access::ReadWrite);
        let rows = rows.map(|r| {
            bufs.push(r);
            b.binding("rows", DType::U32, Access::ReadWrite)
        });
        bufs.push(BufferRef::Scratch(count));
        let cb = b.binding("count", DType::U32, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let m = self.build_len(&mut b);
        let off = self.build_offset(&mut b, 0);
        let (ws, we) = self.split(&mut b, &pre, m.into());
        self.thread_loop(&mut b, &pre, ws, we, false, |b, j| {
            let at = b.binary(BinaryOp::Add, j, off);
            let v = b.assign(kty, Op::Load(key_in, at.into()));
            let w = Self::word_of(b, v.into(), wt, true, false);
            b.push(Stmt::Store(out, j.into(), w.into()));
            if let Some(r) = rows {
                b.push(Stmt::Store(r, j.into(), j.into()));
            }
            Ok(())
        })?;
        let w0 = b.binary(BinaryOp::Eq, pre.w, u32c(0));
        let t0 = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        let lead = b.binary(BinaryOp::And, w0, t0);
        b.if_(lead, |b| b.push(Stmt::Store(cb, u32c(0), m.into())));
        Ok((Self::finish(b)?, bufs))
    }

    /// The first of the `n` sorted words from `from` that is not below
    /// `w` (`upper`: not at or below it), by binary search.
    fn search(
        b: &mut KernelBuilder,
        words: BindingId,
        from: Operand,
        n: Operand,
        w: Local,
        upper: bool,
    ) -> Local {
        let wt = b.ty(w);
        let lo = b.assign(DType::U32, Op::Copy(from));
        let left = b.assign(DType::U32, Op::Copy(n));
        b.for_(u32c(0), u32c(SEARCH_STEPS), u32c(1), |b, _| {
            let more = b.binary(BinaryOp::Gt, left, u32c(0));
            b.if_(more, |b| {
                let half = b.binary(BinaryOp::Shr, left, u32c(1));
                let mid = b.binary(BinaryOp::Add, lo, half);
                let wm = b.assign(wt, Op::Load(words, mid.into()));
                let right = if upper {
                    b.binary(BinaryOp::Le, wm, w)
                } else {
                    b.binary(BinaryOp::Lt, wm, w)
                };
                let past = b.binary(BinaryOp::Add, mid, u32c(1));
                let rest = b.binary(BinaryOp::Sub, left, half);
                let rest = b.binary(BinaryOp::Sub, rest, u32c(1));
                let nlo = b.select(right, past, lo);
                let nleft = b.select(right, rest, half);
                b.set(lo, Op::Copy(nlo.into()));
                b.set(left, Op::Copy(nleft.into()));
            });
        });
        lo
    }

    /// `join_probe`: every position's matches (0 where the predicate drops
    /// it) into `matches`, the first match into `first` (an inner join),
    /// and the workgroup's sum into `totals`.
    #[allow(clippy::too_many_arguments)]
    fn join_probe_kernel(
        &self,
        kind: JoinKind,
        key: crate::expr::Value,
        wt: DType,
        sum: &Agg,
        words: BufferRef,
        matches: u16,
        first: Option<u16>,
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_probe");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        bufs.extend([words, BufferRef::Scratch(matches)]);
        let wb = b.binding("words", wt, Access::Read);
        let mb = b.binding("matches", DType::U32, Access::ReadWrite);
        let fb = first.map(|f| {
            bufs.push(BufferRef::Scratch(f));
            b.binding("first", DType::U32, Access::ReadWrite)
        });
        bufs.push(BufferRef::Scratch(totals));
        let tb = b.binding("totals", sum.ty, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let m = self.build_len(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
        self.flag_totals(&mut b, &pre, sum, ws, we, tb, |b, i| {
            let vals = self.element(b, &pre, &inputs, i)?;
            let v = Self::value(&vals, key)?;
            let w = Self::word_of(b, v, wt, true, false);
            let lo = Self::search(b, wb, u32c(0), m.into(), w, false);
            let rest = b.binary(BinaryOp::Sub, m, lo);
            let hi = Self::search(b, wb, lo.into(), rest.into(), w, true);
            let n = b.binary(BinaryOp::Sub, hi, lo);
            let hit = match kind {
                JoinKind::Inner => n,
                JoinKind::Semi => {
                    let any = b.binary(BinaryOp::Gt, n, u32c(0));
                    b.select(any, u32c(1), u32c(0))
                }
                JoinKind::Anti => {
                    let none = b.binary(BinaryOp::Eq, n, u32c(0));
                    b.select(none, u32c(1), u32c(0))
                }
            };
            let hit = match self.stage.predicate {
                Some(p) => {
                    let keep = Self::value(&vals, p)?;
                    b.select(keep, hit, u32c(0))
                }
                None => hit,
            };
            b.push(Stmt::Store(mb, i.into(), hit.into()));
            if let Some(f) = fb {
                b.push(Stmt::Store(f, i.into(), lo.into()));
            }
            Ok(if sum.ty == DType::U32 {
                hit
            } else {
                b.assign(sum.ty, Op::Cast(hit.into()))
            })
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `join_emit`: every position's rows out at its scanned position: the
    /// probe `columns`, then (with `pairs`: the first match per position
    /// and the sorted build rows) the build side's `added` columns at
    /// each matching build row.
    fn join_emit_kernel(
        &self,
        sum: &Agg,
        columns: &[crate::expr::Value],
        added: &[(u16, DType)],
        matches: u16,
        pairs: Option<(u16, BufferRef)>,
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_emit");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let nin = self.stage.inputs.len();
        // The added columns are build inputs `1..` (input 0 is the key).
        let build_in: Vec<BindingId> = added
            .iter()
            .enumerate()
            .map(|(j, &(_, ty))| {
                bufs.push(BufferRef::Input((nin + 1 + j) as u16));
                b.binding(format!("build{}", j + 1), ty, Access::Read)
            })
            .collect();
        bufs.push(BufferRef::Scratch(matches));
        let mb = b.binding("matches", DType::U32, Access::Read);
        let pairs = pairs.map(|(f, r)| {
            bufs.extend([BufferRef::Scratch(f), r]);
            (
                b.binding("first", DType::U32, Access::Read),
                b.binding("rows", DType::U32, Access::Read),
            )
        });
        bufs.push(BufferRef::Scratch(totals));
        let tb = b.binding("totals", sum.ty, Access::Read);
        let outs: Vec<BindingId> = columns
            .iter()
            .map(|&c| self.stage.program.ty(c))
            .chain(added.iter().map(|&(_, ty)| ty))
            .enumerate()
            .map(|(c, ty)| {
                bufs.push(BufferRef::Output(c as u16));
                b.binding(format!("out{c}"), ty, Access::ReadWrite)
            })
            .collect();
        let pre = self.preload(&mut b);
        let offs: Vec<Local> = (0..added.len())
            .map(|j| self.build_offset(&mut b, 1 + j))
            .collect();
        let (ws, we) = self.span(&mut b, &pre);
        let carry = b.assign(sum.ty, Op::Load(tb, pre.w.into()));
        let wide = |b: &mut KernelBuilder, x: Local| -> Operand {
            if sum.ty == DType::U32 {
                x.into()
            } else {
                b.assign(sum.ty, Op::Cast(x.into())).into()
            }
        };
        self.scan_span(
            &mut b,
            &pre,
            sum,
            ws,
            we,
            carry.into(),
            |b, i| {
                let h = b.assign(DType::U32, Op::Load(mb, i.into()));
                Ok(wide(b, h))
            },
            |b, i, run| {
                let h = b.assign(DType::U32, Op::Load(mb, i.into()));
                let has = b.binary(BinaryOp::Gt, h, u32c(0));
                let mut result = Ok(());
                b.if_(has, |b| {
                    result = (|| {
                        let vals = self.element(b, &pre, &inputs, i)?;
                        // Positions out are below 2^32: the executor
                        // declines a join of more rows before this runs.
                        let at: Operand = if sum.ty == DType::U32 {
                            run
                        } else {
                            b.assign(DType::U32, Op::Cast(run)).into()
                        };
                        let probe: Vec<Operand> = columns
                            .iter()
                            .map(|&c| Self::value(&vals, c))
                            .collect::<R<_>>()?;
                        match pairs {
                            None => {
                                for (&o, &v) in outs.iter().zip(&probe) {
                                    b.push(Stmt::Store(o, at, v));
                                }
                            }
                            Some((fb, rb)) => {
                                let f = b.assign(DType::U32, Op::Load(fb, i.into()));
                                b.for_(u32c(0), h, u32c(1), |b, k| {
                                    let to = b.binary(BinaryOp::Add, at, k);
                                    for (&o, &v) in outs.iter().zip(&probe) {
                                        b.push(Stmt::Store(o, to.into(), v));
                                    }
                                    let sk = b.binary(BinaryOp::Add, f, k);
                                    let r = b.assign(DType::U32, Op::Load(rb, sk.into()));
                                    for (j, (&bin, &(_, ty))) in
                                        build_in.iter().zip(added).enumerate()
                                    {
                                        let from = b.binary(BinaryOp::Add, r, offs[j]);
                                        let v = b.assign(ty, Op::Load(bin, from.into()));
                                        b.push(Stmt::Store(
                                            outs[columns.len() + j],
                                            to.into(),
                                            v.into(),
                                        ));
                                    }
                                });
                            }
                        }
                        Ok(())
                    })();
                });
                result?;
                let hw = wide(b, h);
                Ok(b.binary(BinaryOp::Add, run, hw).into())
            },
        )?;
        Ok((Self::finish(b)?, bufs))
    }
}
