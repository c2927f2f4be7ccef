//! Top-k on the device (`top_k`, `bottom_k`, `top_k_by_key`, a sort then
//! `take`): a radix select of the `k`-th row, then the device radix sort
//! of the rows up to it, so only `k` rows are ever sorted.
//!
//! Every row's key words (`sort_words`, as for a sort: the canonical
//! order, a descending key complemented) are written once. A row is
//! ranked by the composite of its words, most significant key first, then
//! its input position (so ties keep input order, as `cpu-scalar`'s stable
//! sort does). The selection walks that composite one 8-bit digit at a
//! time, most significant first, in two dispatches per digit:
//!
//! - `select_count`: every workgroup counts the digits of its rows whose
//!   higher digits equal the threshold chosen so far into bins in
//!   workgroup memory (atomic adds: counting commutes) and writes them as
//!   its row of counts;
//! - `select_digit`: one workgroup sums the counts and picks the digit
//!   where the rows still needed are reached; when that digit's rows are
//!   exactly the ones still needed, every row at or below the threshold is
//!   taken and the later digits are skipped (their counts read a `done`
//!   flag and do nothing).
//!
//! Then `select_flags` counts the rows at or below the threshold per
//! workgroup, `scan_blocks` scans those counts, and `select_rows` writes
//! the taken rows' positions in input order; the radix passes of `sort`
//! order them and the sort's last kernel writes the columns.

use super::sort::{add_scratch, push, Given};
use super::*;
use crate::codegen::kernel::AtomicOp;
use crate::semantics::order::{self, SortKey};

/// Digits of one pass.
const RADIX: u32 = 256;

/// The selection state (`select_state`, `u32`): rows still needed at the
/// current digit, rows taken in all, and whether the threshold is settled.
const NEED: u32 = 0;
const TAKE: u32 = 1;
const DONE: u32 = 2;

/// One component of the composite a row is ranked by.
#[derive(Copy, Clone)]
struct Component {
    /// Its scratch words (`None`: the row's input position).
    words: Option<u16>,
    /// The words' type.
    ty: DType,
    /// Its digit passes, most significant first (shift of each).
    shifts: &'static [u32],
}

const SHIFTS_8: &[u32] = &[0];
const SHIFTS_32: &[u32] = &[24, 16, 8, 0];
const SHIFTS_64: &[u32] = &[56, 48, 40, 32, 24, 16, 8, 0];

impl Lower<'_> {
    /// The plan of a top-k stage: the first `limit` (parameter slot
    /// `fetch`) rows of the sort by `keys`.
    pub(super) fn top_k_plan(
        &self,
        keys: &[SortKey],
        columns: &[crate::expr::Value],
        fetch: u16,
    ) -> R<KernelPlan> {
        let stage = self.stage;
        let key_only = keys.len() == 1 && columns.len() == 1 && columns[0] == keys[0].value;
        let mut plan = self.whole_plan();
        // Each chunk's top `k` merge on the host by their keys, ties in
        // input order (the earlier chunk first).
        let columns = self.merge_by_keys(&mut plan, keys, columns, key_only, Some(fetch));
        let s = BufferRef::Scratch;
        let rows = self.rows_pair(&mut plan);
        // After a filter, the survivors' positions in `rows[0]`.
        let count = match stage.predicate {
            Some(_) => Some(self.compact_survivors(&mut plan, rows[0])?),
            None => None,
        };
        let at = count.map(|_| s(rows[0]));
        // Every key's words at every row, and the components of the rank.
        let mut parts = Vec::new();
        for (j, key) in keys.iter().enumerate() {
            let kty = stage.program.ty(key.value);
            let wt = if order::is_narrow(kty) {
                DType::U32
            } else {
                DType::U64
            };
            let words = add_scratch(
                &mut plan,
                &format!("select_words{j}"),
                wt,
                ScratchLen::Positions,
            );
            let (k, bufs) = self.words_kernel(key, wt, at, s(words), None, count, false)?;
            push(&mut plan, k, Groups::Spans, bufs);
            parts.push(Component {
                words: Some(words),
                ty: wt,
                shifts: match (kty, wt) {
                    (DType::Bool, _) => SHIFTS_8,
                    (_, DType::U32) => SHIFTS_32,
                    _ => SHIFTS_64,
                },
            });
        }
        parts.push(Component {
            words: None,
            ty: DType::U32,
            shifts: SHIFTS_32,
        });
        // The threshold, one word per component.
        let st = if parts.iter().any(|c| c.ty == DType::U64) {
            DType::U64
        } else {
            DType::U32
        };
        let sel = add_scratch(
            &mut plan,
            "select_threshold",
            st,
            ScratchLen::Exactly(parts.len() as u32),
        );
        let state = add_scratch(
            &mut plan,
            "select_state",
            DType::U32,
            ScratchLen::Exactly(3),
        );
        let hist = add_scratch(
            &mut plan,
            "digit_counts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let (k, bufs) = self.select_init_kernel(fetch, parts.len(), st, sel, state, count)?;
        push(&mut plan, k, Groups::One, bufs);
        let mut select_passes = 0u8;
        for j in 0..parts.len() {
            for &shift in parts[j].shifts {
                let (k, bufs) =
                    self.select_count_kernel(&parts[..=j], shift, st, sel, state, hist, count)?;
                push(&mut plan, k, Groups::Spans, bufs);
                let (k, bufs) = self.select_digit_kernel(&parts, j, shift, st, sel, state, hist)?;
                push(&mut plan, k, Groups::One, bufs);
                select_passes += 1;
            }
        }
        // The rows at or below the threshold, in input order.
        let flag = Agg {
            kind: AggKind::Sum,
            ty: DType::U32,
            saturating: false,
        };
        let totals = add_scratch(&mut plan, "select_totals", DType::U32, ScratchLen::Groups);
        let taken = add_scratch(&mut plan, "selected", DType::U32, ScratchLen::One);
        let (k, bufs) = self.select_flags_kernel(&flag, &parts, st, sel, state, totals, count)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&flag, totals, taken, false)?;
        push(&mut plan, k, Groups::One, bufs);
        let survivors = count.map(|_| rows[0]);
        let (k, bufs) = self.select_rows_kernel(
            &flag, &parts, st, sel, state, totals, survivors, rows[1], count,
        )?;
        push(&mut plan, k, Groups::Spans, bufs);
        // Sort the rows taken.
        let given = Given {
            rows: [rows[1], rows[0]],
            count: taken,
        };
        let sorted = self.radix(&mut plan, keys, !key_only, false, Some(given))?;
        let (k, bufs) = match sorted.rows {
            None => self.decode_kernel(keys[0], sorted.word_ty, sorted.words, sorted.count)?,
            Some(r) => self.gather_kernel(&columns, r, sorted.count)?,
        };
        push(&mut plan, k, Groups::Spans, bufs);
        plan.readback = Readback::Columns { count: Some(taken) };
        let sort = match plan.algorithm {
            Some(crate::types::Algorithm::DeviceRadix(p)) => p.passes,
            _ => 0,
        };
        plan.algorithm = Some(crate::types::Algorithm::DeviceRadixSelect {
            select: select_passes,
            sort,
        });
        Ok(plan)
    }

    /// Binds the words of `parts` (those held in scratch) for reading.
    fn bind_parts(
        b: &mut KernelBuilder,
        bufs: &mut Vec<BufferRef>,
        parts: &[Component],
    ) -> Vec<Option<BindingId>> {
        parts
            .iter()
            .enumerate()
            .map(|(j, c)| {
                c.words.map(|w| {
                    bufs.push(BufferRef::Scratch(w));
                    b.binding(format!("words{j}"), c.ty, Access::Read)
                })
            })
            .collect()
    }

    /// Component `j` of row `i` as a word of type `st`.
    fn part_word(
        b: &mut KernelBuilder,
        words: &[Option<BindingId>],
        parts: &[Component],
        j: usize,
        i: Local,
        st: DType,
    ) -> Local {
        let w = match words[j] {
            Some(w) => b.assign(parts[j].ty, Op::Load(w, i.into())),
            None => i,
        };
        if b.ty(w) == st {
            w
        } else {
            b.assign(st, Op::Cast(w.into()))
        }
    }

    /// Whether row `i`'s composite is at or below the threshold `sel`.
    fn at_or_below(
        b: &mut KernelBuilder,
        words: &[Option<BindingId>],
        parts: &[Component],
        st: DType,
        sel: BindingId,
        i: Local,
    ) -> Local {
        let last = parts.len() - 1;
        let mut res = None;
        for j in (0..parts.len()).rev() {
            let w = Self::part_word(b, words, parts, j, i, st);
            let t = b.assign(st, Op::Load(sel, u32c(j as u32)));
            res = Some(if j == last {
                b.binary(BinaryOp::Le, w, t)
            } else {
                let lt = b.binary(BinaryOp::Lt, w, t);
                let eq = b.binary(BinaryOp::Eq, w, t);
                let both = b.binary(BinaryOp::And, eq, res.expect("a later component"));
                b.binary(BinaryOp::Or, lt, both)
            });
        }
        res.expect("a component")
    }

    /// `select_init`: the rows needed (`min(limit, rows)`), none chosen.
    fn select_init_kernel(
        &self,
        fetch: u16,
        parts: usize,
        st: DType,
        sel: u16,
        state: u16,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("select_init");
        let mut bufs = vec![BufferRef::Scratch(sel), BufferRef::Scratch(state)];
        let sb = b.binding("threshold", st, Access::ReadWrite);
        let state = b.binding("state", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let limit = b.assign(
            DType::U32,
            Op::Uniform(self.field(UniformSource::Limit(fetch))),
        );
        let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        b.if_(lead, |b| {
            let n = match count {
                Some(c) => b.assign(DType::U32, Op::Load(c, u32c(0))),
                None => pre.len,
            };
            let need = b.binary(BinaryOp::Min, limit, n);
            b.push(Stmt::Store(state, u32c(NEED), need.into()));
            b.push(Stmt::Store(state, u32c(TAKE), need.into()));
            let none = b.binary(BinaryOp::Eq, need, u32c(0));
            let done = b.select(none, u32c(1), u32c(0));
            b.push(Stmt::Store(state, u32c(DONE), done.into()));
            for j in 0..parts {
                b.push(Stmt::Store(
                    sb,
                    u32c(j as u32),
                    Operand::Const(Scalar::zero(st)),
                ));
            }
        });
        Ok((Self::finish(b)?, bufs))
    }

    /// `select_count`: this workgroup's digit counts (at `shift` of the
    /// last of `parts`) of its rows still tied with the threshold.
    #[allow(clippy::too_many_arguments)]
    fn select_count_kernel(
        &self,
        parts: &[Component],
        shift: u32,
        st: DType,
        sel: u16,
        state: u16,
        hist: u16,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let j = parts.len() - 1;
        let mut b = self.kernel(&format!("select_count_{j}_{shift}"));
        let mut bufs = Vec::new();
        let words = Self::bind_parts(&mut b, &mut bufs, parts);
        bufs.extend([
            BufferRef::Scratch(sel),
            BufferRef::Scratch(state),
            BufferRef::Scratch(hist),
        ]);
        let sb = b.binding("threshold", st, Access::Read);
        let state = b.binding("state", DType::U32, Access::Read);
        let hb = b.binding("counts", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let bins = b.shared_atomic("bins", DType::U32, RADIX);
        let pre = self.preload(&mut b);
        self.clear_bins(&mut b, &pre, bins, RADIX);
        let done = b.assign(DType::U32, Op::Load(state, u32c(DONE)));
        let open = b.binary(BinaryOp::Eq, done, u32c(0));
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        let width = (parts[j].ty.size() * 8) as u32;
        // The digits above this one: equal to the threshold's (whose
        // lower digits are still zero).
        let high = (shift + 8 < width).then(|| {
            let ones = (1u64 << (shift + 8)) - 1;
            Operand::Const(Scalar::U64(!ones).cast(st))
        });
        let mut result = Ok(());
        b.if_(open, |b| {
            result = self.thread_loop(b, &pre, ws, we, false, |b, i| {
                let mut tied: Option<Local> = None;
                let mut and = |b: &mut KernelBuilder, c: Local| {
                    tied = Some(match tied {
                        Some(t) => b.binary(BinaryOp::And, t, c),
                        None => c,
                    });
                };
                for jj in 0..j {
                    let w = Self::part_word(b, &words, parts, jj, i, st);
                    let t = b.assign(st, Op::Load(sb, u32c(jj as u32)));
                    let eq = b.binary(BinaryOp::Eq, w, t);
                    and(b, eq);
                }
                let w = match words[j] {
                    Some(w) => b.assign(parts[j].ty, Op::Load(w, i.into())),
                    None => i,
                };
                if let Some(mask) = high {
                    let wide = if parts[j].ty == st {
                        w
                    } else {
                        b.assign(st, Op::Cast(w.into()))
                    };
                    let h = b.binary(BinaryOp::BitAnd, wide, mask);
                    let t = b.assign(st, Op::Load(sb, u32c(j as u32)));
                    let eq = b.binary(BinaryOp::Eq, h, t);
                    and(b, eq);
                }
                let d = Self::digit(b, w.into(), shift);
                let add = |b: &mut KernelBuilder| {
                    b.assign(
                        DType::U32,
                        Op::AtomicShared {
                            op: AtomicOp::Add,
                            shared: bins,
                            index: d.into(),
                            value: u32c(1),
                        },
                    );
                };
                match tied {
                    Some(t) => b.if_(t, add),
                    None => add(b),
                }
                Ok(())
            });
        });
        result?;
        // Every row of counts is written, settled or not (`open` is the
        // same in every invocation: the barriers are uniform).
        self.store_bins(&mut b, &pre, bins, RADIX, hb);
        Ok((Self::finish(b)?, bufs))
    }

    /// `select_digit`: one workgroup sums the digit counts and picks the
    /// digit of component `j` at `shift` where the rows still needed are
    /// reached.
    #[allow(clippy::too_many_arguments)]
    fn select_digit_kernel(
        &self,
        parts: &[Component],
        j: usize,
        shift: u32,
        st: DType,
        sel: u16,
        state: u16,
        hist: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel(&format!("select_digit_{j}_{shift}"));
        let bufs = vec![
            BufferRef::Scratch(hist),
            BufferRef::Scratch(sel),
            BufferRef::Scratch(state),
        ];
        let hb = b.binding("counts", DType::U32, Access::Read);
        let sb = b.binding("threshold", st, Access::ReadWrite);
        let state = b.binding("state", DType::U32, Access::ReadWrite);
        let totals = b.shared("totals", DType::U32, RADIX);
        let pre = self.preload(&mut b);
        self.digit_totals(&mut b, &pre, hb, totals);
        let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        let done = b.assign(DType::U32, Op::Load(state, u32c(DONE)));
        let open = b.binary(BinaryOp::Eq, done, u32c(0));
        let go = b.binary(BinaryOp::And, lead, open);
        b.if_(go, |b| {
            let need = b.assign(DType::U32, Op::Load(state, u32c(NEED)));
            let acc = b.assign(DType::U32, Op::Copy(u32c(0)));
            let found = b.assign(DType::U32, Op::Copy(u32c(0)));
            b.for_(u32c(0), u32c(RADIX), u32c(1), |b, d| {
                let c = b.assign(DType::U32, Op::LoadShared(totals, d.into()));
                let upto = b.binary(BinaryOp::Add, acc, c);
                let reached = b.binary(BinaryOp::Ge, upto, need);
                let first = b.binary(BinaryOp::Eq, found, u32c(0));
                let hit = b.binary(BinaryOp::And, reached, first);
                b.if_(hit, |b| {
                    b.set(found, Op::Copy(u32c(1)));
                    let t = b.assign(st, Op::Load(sb, u32c(j as u32)));
                    let dw = if st == DType::U32 {
                        d
                    } else {
                        b.assign(st, Op::Cast(d.into()))
                    };
                    let dd = b.binary(BinaryOp::Shl, dw, Scalar::U32(shift).cast(st));
                    let t = b.binary(BinaryOp::BitOr, t, dd);
                    let rest = b.binary(BinaryOp::Sub, need, acc);
                    b.push(Stmt::Store(state, u32c(NEED), rest.into()));
                    let exact = b.binary(BinaryOp::Eq, upto, need);
                    // Every row of this digit is needed: the threshold is
                    // the last composite with these digits.
                    let low = Scalar::U64((1u64 << shift) - 1).cast(st);
                    let last = b.binary(BinaryOp::BitOr, t, low);
                    let t = b.select(exact, last, t);
                    b.push(Stmt::Store(sb, u32c(j as u32), t.into()));
                    b.if_(exact, |b| {
                        b.push(Stmt::Store(state, u32c(DONE), u32c(1)));
                        for (jj, c) in parts.iter().enumerate().skip(j + 1) {
                            let max = Scalar::U64(u64::MAX).cast(c.ty).cast(st);
                            b.push(Stmt::Store(sb, u32c(jj as u32), Operand::Const(max)));
                        }
                    });
                });
                b.set(acc, Op::Copy(upto.into()));
            });
        });
        Ok((Self::finish(b)?, bufs))
    }

    /// Whether row `i` is taken: some rows are, and its composite is at or
    /// below the threshold, as a `u32` flag.
    #[allow(clippy::too_many_arguments)]
    fn taken_flag(
        b: &mut KernelBuilder,
        words: &[Option<BindingId>],
        parts: &[Component],
        st: DType,
        sel: BindingId,
        any: Local,
        i: Local,
    ) -> Local {
        let le = Self::at_or_below(b, words, parts, st, sel, i);
        let keep = b.binary(BinaryOp::And, le, any);
        b.select(keep, u32c(1), u32c(0))
    }

    /// The selection's bindings shared by `select_flags` and
    /// `select_rows`: the words, the threshold, whether any row is taken.
    fn bind_selection(
        &self,
        b: &mut KernelBuilder,
        bufs: &mut Vec<BufferRef>,
        parts: &[Component],
        st: DType,
        sel: u16,
        state: u16,
    ) -> (Vec<Option<BindingId>>, BindingId, BindingId) {
        let words = Self::bind_parts(b, bufs, parts);
        bufs.extend([BufferRef::Scratch(sel), BufferRef::Scratch(state)]);
        let sb = b.binding("threshold", st, Access::Read);
        let state = b.binding("state", DType::U32, Access::Read);
        (words, sb, state)
    }

    /// `select_flags`: this workgroup's number of rows taken.
    #[allow(clippy::too_many_arguments)]
    fn select_flags_kernel(
        &self,
        flag: &Agg,
        parts: &[Component],
        st: DType,
        sel: u16,
        state: u16,
        totals: u16,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("select_flags");
        let mut bufs = Vec::new();
        let (words, sb, state) = self.bind_selection(&mut b, &mut bufs, parts, st, sel, state);
        bufs.push(BufferRef::Scratch(totals));
        let out = b.binding("totals", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let take = b.assign(DType::U32, Op::Load(state, u32c(TAKE)));
        let any = b.binary(BinaryOp::Gt, take, u32c(0));
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.flag_totals(&mut b, &pre, flag, ws, we, out, |b, i| {
            Ok(Self::taken_flag(b, &words, parts, st, sb, any, i))
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `select_rows`: the positions of the rows taken, in input order
    /// (a span scan of their flags from the workgroup's prefix).
    #[allow(clippy::too_many_arguments)]
    fn select_rows_kernel(
        &self,
        flag: &Agg,
        parts: &[Component],
        st: DType,
        sel: u16,
        state: u16,
        totals: u16,
        survivors: Option<u16>,
        rows_out: u16,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("select_rows");
        let mut bufs = Vec::new();
        let (words, sb, state) = self.bind_selection(&mut b, &mut bufs, parts, st, sel, state);
        bufs.push(BufferRef::Scratch(totals));
        let tb = b.binding("totals", DType::U32, Access::Read);
        let survivors = survivors.map(|r| {
            bufs.push(BufferRef::Scratch(r));
            b.binding("rows_in", DType::U32, Access::Read)
        });
        bufs.push(BufferRef::Scratch(rows_out));
        let out = b.binding("rows_out", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let take = b.assign(DType::U32, Op::Load(state, u32c(TAKE)));
        let any = b.binary(BinaryOp::Gt, take, u32c(0));
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        let carry = b.assign(DType::U32, Op::Load(tb, pre.w.into()));
        self.scan_span(
            &mut b,
            &pre,
            flag,
            ws,
            we,
            carry.into(),
            |b, i| Ok(Self::taken_flag(b, &words, parts, st, sb, any, i).into()),
            |b, i, run| {
                let f = Self::taken_flag(b, &words, parts, st, sb, any, i);
                let is = b.binary(BinaryOp::Ne, f, u32c(0));
                b.if_(is, |b| {
                    let row = match survivors {
                        Some(r) => b.assign(DType::U32, Op::Load(r, i.into())),
                        None => i,
                    };
                    b.push(Stmt::Store(out, run, row.into()));
                });
                Ok(b.binary(BinaryOp::Add, run, f).into())
            },
        )?;
        Ok((Self::finish(b)?, bufs))
    }
}
