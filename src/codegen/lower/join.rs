//! Joins on the device (`join`, `semi_join`/`is_in`, `anti_join`/
//! `not_in`), in the order `relational::join` documents: probe order, and
//! the build rows matching one probe row in build order.
//!
//! - `join_build`: the build side's key as group words (`-0.0` is `+0.0`,
//!   every NaN one key), with its row indices for an inner join; then the
//!   digit passes of `sort` order them (stable, so equal keys keep build
//!   order). Several keys are sorted least significant first, each key's
//!   words computed at the permutation the keys after it left (as
//!   `sort` does), the rows always carried;
//! - `join_probe`: each probe position's key words (after the stage's
//!   predicate) are looked up by two binary searches: over the sorted
//!   words of one key, or over the sorted rows of several, comparing the
//!   keys' words at each row in order; they give the first match and the
//!   number of matches (an inner join), or whether there is one (a semi-
//!   or anti-join), summed per workgroup;
//! - `scan_blocks`: the sums' exclusive scan over workgroups, and the
//!   number of rows out (a `u64` for an inner join: a probe row may match
//!   every build row; without 64-bit integers a `u32` that saturates);
//! - `join_emit`: each workgroup scans its span's counts from its prefix
//!   and writes each probe row's pairs at its position: the probe columns,
//!   then (inner) the build columns at the sorted build rows.
//!
//! An inner join's outputs are allocated once its rows are known
//! ([`KernelPlan::sized`]); a semi- or anti-join writes at most one row
//! per position. The plan is `whole` for its build side, which is sorted
//! in every run; a probe side past one binding runs in chunks whose rows
//! append ([`MergeRuns::Append`]). The grid covers the larger side
//! (`launch_with`), so a build side larger than the probe side is still
//! sorted by many workgroups.

use super::sort::{add_scratch, push, Digits, RADIX};
use super::*;
use crate::codegen::plan::SizedOutputs;
use crate::semantics::order::{self, JoinKind};

/// Iterations of a binary search over fewer than `2^32` words.
const SEARCH_STEPS: u32 = 32;

/// What the probe's binary searches read.
#[derive(Clone)]
enum Sorted {
    /// One key: its sorted words.
    Words(BufferRef),
    /// Several keys: the sorted build rows; the keys' words are computed
    /// at each row read (build inputs `0..`, with their types).
    Rows(BufferRef, Vec<(DType, DType)>),
}

/// The word type of a key of type `ty`.
fn word_type(ty: DType) -> DType {
    if order::is_narrow(ty) {
        DType::U32
    } else {
        DType::U64
    }
}

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
        let types: Vec<DType> = keys.iter().map(|&k| self.stage.program.ty(k)).collect();
        if build.len() < keys.len() {
            return err("a join without its build keys");
        }
        // The CPU backends' limit, kept here so that every backend takes
        // the same joins (the CPU reports the error).
        let bits: usize = types.iter().map(|&t| word_type(t).size() * 8).sum();
        if keys.is_empty() || bits > 128 {
            return err("join keys of 1 to 128 bits together: the CPU backends report the error");
        }
        for (&kty, &(_, bty)) in types.iter().zip(build) {
            if bty != kty {
                return err(format!(
                    "join keys of two types ({kty} and {bty}): they run on the CPU backends"
                ));
            }
        }
        let inner = kind == JoinKind::Inner;
        // An inner join's rows are counted in `u64`: a probe row may
        // match every build row. Without 64-bit integers (GL) they are
        // counted in `u32` sums that saturate: a count of 2^32 - 1 or more
        // is past every binding, and the executor declines the join
        // before its outputs exist (it never wraps to a small count).
        let wide_count = inner && self.caps.int64;
        let cty = if wide_count { DType::U64 } else { DType::U32 };
        if !self.caps.int64 {
            if let Some(&wide) = types.iter().find(|&&t| word_type(t) == DType::U64) {
                return Err(LowerError(Decline::MissingType {
                    dtype: wide,
                    feature: "SHADER_INT64",
                }));
            }
        }
        let several = keys.len() > 1;
        let mut plan = self.whole_plan();
        plan.build = build.iter().map(|&(k, _)| k).collect();
        // The output is in probe order: chunks of the probe side (each
        // with the whole build side) append.
        plan.merge_runs = Some(MergeRuns::Append);
        let s = BufferRef::Scratch;
        let rows = (inner || several).then(|| {
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
        // Least significant key first; each later one's words at the
        // permutation so far.
        let mut words: BTreeMap<DType, [u16; 2]> = BTreeMap::new();
        let (mut rows_cur, mut sorted_words) = (0usize, None);
        let (mut passes, mut digits) = (0u32, 0u32);
        for (j, &kty) in types.iter().enumerate().rev() {
            let wt = word_type(kty);
            let pair = *words.entry(wt).or_insert_with(|| {
                [
                    add_scratch(
                        &mut plan,
                        &format!("build_words_{wt}_a"),
                        wt,
                        ScratchLen::Build,
                    ),
                    add_scratch(
                        &mut plan,
                        &format!("build_words_{wt}_b"),
                        wt,
                        ScratchLen::Build,
                    ),
                ]
            });
            let first = j + 1 == keys.len();
            let at = rows.map(|r| (s(r[rows_cur]), first));
            let (k, bufs) = self.join_build_kernel(j, kty, wt, s(pair[0]), at, count)?;
            push(&mut plan, k, Groups::Spans, bufs);
            let key_passes = if kty == DType::Bool {
                1
            } else {
                wt.size() as u32
            };
            passes += key_passes;
            digits += kty.size().max(1) as u32;
            let (cur, moved) = self.digit_passes(
                &mut plan,
                Digits {
                    wt,
                    passes: key_passes,
                    words: pair,
                    cur: 0,
                    rows: rows.map(|r| (r, rows_cur)),
                    count: Some(count),
                    hist,
                    offs,
                },
            )?;
            if let Some(r) = moved {
                rows_cur = r;
            }
            sorted_words = Some(s(pair[cur]));
        }
        let sorted_rows = rows.map(|r| s(r[rows_cur]));
        let sorted = if several {
            Sorted::Rows(
                sorted_rows.expect("rows carried"),
                types.iter().map(|&t| (t, word_type(t))).collect(),
            )
        } else {
            Sorted::Words(sorted_words.expect("a key"))
        };

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
            saturating: inner && !wide_count,
        };
        let (k, bufs) =
            self.join_probe_kernel(kind, keys, &sorted, &sum, matches, first, totals)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&sum, totals, total, false)?;
        push(&mut plan, k, Groups::One, bufs);
        if inner {
            plan.sized = Some(SizedOutputs {
                after: plan.dispatches.len(),
                rows: total,
            });
        }
        let nk = keys.len();
        let added = if inner { build.len() - nk } else { 0 };
        let (k, bufs) = self.join_emit_kernel(
            &sum,
            columns,
            nk,
            &build[nk..nk + added],
            matches,
            first.zip(sorted_rows),
            totals,
        )?;
        push(&mut plan, k, Groups::Spans, bufs);
        plan.readback = Readback::Columns { count: Some(total) };
        plan.algorithm = Some(crate::types::Algorithm::DeviceSortMergeJoin(
            crate::types::Passes {
                passes: passes as u8,
                digits: digits as u8,
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

    /// `join_build`: the group word of build key `j` at every build row:
    /// at the row `rows` names (the permutation the later keys left), or
    /// with `(rows, true)` at the row itself, starting the identity
    /// permutation in `rows`. Invocation 0 of workgroup 0 stores the build
    /// side's rows in `count` for the digit passes.
    fn join_build_kernel(
        &self,
        j: usize,
        kty: DType,
        wt: DType,
        words: BufferRef,
        rows: Option<(BufferRef, bool)>,
        count: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_build");
        let mut bufs = vec![
            BufferRef::Input((self.stage.inputs.len() + j) as u16),
            words,
        ];
        let key_in = b.binding("build_key", kty, Access::Read);
        let out = b.binding("words", wt, Access::ReadWrite);
        let rows = rows.map(|(r, ident)| {
            bufs.push(r);
            let access = if ident {
                Access::ReadWrite
            } else {
                Access::Read
            };
            (b.binding("rows", DType::U32, access), ident)
        });
        bufs.push(BufferRef::Scratch(count));
        let cb = b.binding("count", DType::U32, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let m = self.build_len(&mut b);
        let off = self.build_offset(&mut b, j);
        let (ws, we) = self.split(&mut b, &pre, m.into());
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let row = match rows {
                Some((r, false)) => b.assign(DType::U32, Op::Load(r, i.into())),
                Some((r, true)) => {
                    b.push(Stmt::Store(r, i.into(), i.into()));
                    i
                }
                None => i,
            };
            let at = b.binary(BinaryOp::Add, row, off);
            let v = b.assign(kty, Op::Load(key_in, at.into()));
            let w = Self::word_of(b, v.into(), wt, true, false);
            b.push(Stmt::Store(out, i.into(), w.into()));
            Ok(())
        })?;
        let w0 = b.binary(BinaryOp::Eq, pre.w, u32c(0));
        let t0 = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        let lead = b.binary(BinaryOp::And, w0, t0);
        b.if_(lead, |b| b.push(Stmt::Store(cb, u32c(0), m.into())));
        Ok((Self::finish(b)?, bufs))
    }

    /// The first of the `n` sorted positions from `from` where `before`
    /// (a `bool` of the position) turns false, by binary search.
    fn search(
        b: &mut KernelBuilder,
        from: Operand,
        n: Operand,
        before: &mut dyn FnMut(&mut KernelBuilder, Local) -> Local,
    ) -> Local {
        let lo = b.assign(DType::U32, Op::Copy(from));
        let left = b.assign(DType::U32, Op::Copy(n));
        b.for_(u32c(0), u32c(SEARCH_STEPS), u32c(1), |b, _| {
            let more = b.binary(BinaryOp::Gt, left, u32c(0));
            b.if_(more, |b| {
                let half = b.binary(BinaryOp::Shr, left, u32c(1));
                let mid = b.binary(BinaryOp::Add, lo, half);
                let right = before(b, mid);
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

    /// Whether the words `build` come before the words `probe` in the
    /// keys' order (`or_equal`: or are equal).
    fn words_before(
        b: &mut KernelBuilder,
        build: &[Local],
        probe: &[Local],
        or_equal: bool,
    ) -> Local {
        let last = build.len() - 1;
        let op = if or_equal { BinaryOp::Le } else { BinaryOp::Lt };
        let mut acc = b.binary(op, build[last], probe[last]);
        for j in (0..last).rev() {
            let lt = b.binary(BinaryOp::Lt, build[j], probe[j]);
            let eq = b.binary(BinaryOp::Eq, build[j], probe[j]);
            let tie = b.binary(BinaryOp::And, eq, acc);
            acc = b.binary(BinaryOp::Or, lt, tie);
        }
        acc
    }

    /// `join_probe`: every position's matches (0 where the predicate drops
    /// it) into `matches`, the first match into `first` (an inner join),
    /// and the workgroup's sum into `totals`.
    #[allow(clippy::too_many_arguments)]
    fn join_probe_kernel(
        &self,
        kind: JoinKind,
        keys: &[crate::expr::Value],
        sorted: &Sorted,
        sum: &Agg,
        matches: u16,
        first: Option<u16>,
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_probe");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let nin = self.stage.inputs.len();
        // What the searches read: the sorted words, or the sorted rows
        // and the build keys.
        enum Bound {
            Words(BindingId, DType),
            Rows(BindingId, Vec<(BindingId, DType, DType)>),
        }
        let bound = match sorted {
            Sorted::Words(w) => {
                bufs.push(*w);
                let wt = word_type(self.stage.program.ty(keys[0]));
                Bound::Words(b.binding("words", wt, Access::Read), wt)
            }
            Sorted::Rows(r, types) => {
                bufs.push(*r);
                let rb = b.binding("rows", DType::U32, Access::Read);
                let ks = types
                    .iter()
                    .enumerate()
                    .map(|(j, &(kty, wt))| {
                        bufs.push(BufferRef::Input((nin + j) as u16));
                        (
                            b.binding(format!("build_key{j}"), kty, Access::Read),
                            kty,
                            wt,
                        )
                    })
                    .collect();
                Bound::Rows(rb, ks)
            }
        };
        bufs.push(BufferRef::Scratch(matches));
        let mb = b.binding("matches", DType::U32, Access::ReadWrite);
        let fb = first.map(|f| {
            bufs.push(BufferRef::Scratch(f));
            b.binding("first", DType::U32, Access::ReadWrite)
        });
        bufs.push(BufferRef::Scratch(totals));
        let tb = b.binding("totals", sum.ty, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let m = self.build_len(&mut b);
        let offs: Vec<Local> = match &bound {
            Bound::Words(..) => Vec::new(),
            Bound::Rows(_, ks) => (0..ks.len())
                .map(|j| self.build_offset(&mut b, j))
                .collect(),
        };
        let (ws, we) = self.span(&mut b, &pre);
        self.flag_totals(&mut b, &pre, sum, ws, we, tb, |b, i| {
            let vals = self.element(b, &pre, &inputs, i)?;
            let probe: Vec<Local> = keys
                .iter()
                .map(|&k| {
                    let v = Self::value(&vals, k)?;
                    let wt = word_type(self.stage.program.ty(k));
                    Ok(Self::word_of(b, v, wt, true, false))
                })
                .collect::<R<_>>()?;
            let before = |or_equal: bool| {
                let bound = &bound;
                let probe = &probe;
                let offs = &offs;
                move |b: &mut KernelBuilder, mid: Local| -> Local {
                    match bound {
                        Bound::Words(wb, wt) => {
                            let w = b.assign(*wt, Op::Load(*wb, mid.into()));
                            Self::words_before(b, &[w], probe, or_equal)
                        }
                        Bound::Rows(rb, ks) => {
                            let r = b.assign(DType::U32, Op::Load(*rb, mid.into()));
                            let words: Vec<Local> = ks
                                .iter()
                                .zip(offs)
                                .map(|(&(kb, kty, wt), &off)| {
                                    let at = b.binary(BinaryOp::Add, r, off);
                                    let v = b.assign(kty, Op::Load(kb, at.into()));
                                    Self::word_of(b, v.into(), wt, true, false)
                                })
                                .collect();
                            Self::words_before(b, &words, probe, or_equal)
                        }
                    }
                }
            };
            let lo = Self::search(b, u32c(0), m.into(), &mut before(false));
            let rest = b.binary(BinaryOp::Sub, m, lo);
            let hi = Self::search(b, lo.into(), rest.into(), &mut before(true));
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
    #[allow(clippy::too_many_arguments)]
    fn join_emit_kernel(
        &self,
        sum: &Agg,
        columns: &[crate::expr::Value],
        nk: usize,
        added: &[(u16, DType)],
        matches: u16,
        pairs: Option<(u16, BufferRef)>,
        totals: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("join_emit");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let nin = self.stage.inputs.len();
        // The added columns are build inputs `nk..` (the keys come first).
        let build_in: Vec<BindingId> = added
            .iter()
            .enumerate()
            .map(|(j, &(_, ty))| {
                bufs.push(BufferRef::Input((nin + nk + j) as u16));
                b.binding(format!("build{}", nk + j), ty, Access::Read)
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
            .map(|j| self.build_offset(&mut b, nk + j))
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
