//! Sorts on the device: an LSD radix sort of order-preserving key words,
//! 8-bit digits, reduce-then-scan per digit, stable.
//!
//! Each key (least significant first) becomes the word of the canonical
//! order (`semantics::order`: floats by IEEE total order with one NaN
//! above `+inf`, signed integers with the sign bit flipped, a descending
//! key complemented), computed at each position by the stage's element
//! program. One key that is also the only column written is sorted as
//! bare words and decoded back; otherwise every word travels with its row
//! index and the columns are evaluated at the sorted indices at the end.
//! A later key's words are computed at the permutation the earlier keys
//! left, so ties keep the order of the less significant keys and of the
//! input.
//!
//! One digit pass is three dispatches:
//!
//! - `sort_count`: every workgroup counts the digits of its span into 256
//!   bins in workgroup memory (atomic adds: counting commutes, so the
//!   result does not depend on their order) and writes them as its row of
//!   digit counts;
//! - `sort_spine`: one workgroup turns the counts into the first output
//!   position of every (workgroup, digit), digit-major;
//! - `sort_scatter`: every workgroup walks its span in tiles of
//!   `workgroup × ITEMS` positions. A tile is ranked stably in workgroup
//!   memory by four 2-bit splits (a loop; each one workgroup scan of the
//!   invocations' counts of three of the four values, packed in one word;
//!   eight one-bit splits for a tile too large to pack), so equal digits
//!   keep their input order;
//!   each row then goes to its digit's running position plus its rank
//!   among the tile's rows of that digit. No position depends on the order
//!   of atomics, and no workgroup waits on another.
//!
//! The plan is [`whole`](KernelPlan::whole): it needs all positions in one
//! run, and says how runs merge ([`merge_runs`](KernelPlan::merge_runs)),
//! so wgpu may sort chunks past one binding apart and merge them on the
//! host: a sort of one column by itself by that column, a sort carrying
//! columns by its keys, which its last kernel writes as extra outputs
//! when they are not among the columns.

use super::*;
use crate::semantics::order::{self, SortKey};

/// Positions per invocation in a scatter tile.
const ITEMS: u32 = 2;
/// Digits of one pass.
pub(super) const RADIX: u32 = 256;
/// Bits per count in a 2-bit split's packed word (three counts per word).
const PACKED_BITS: u32 = 10;
/// Largest tile whose counts fit [`PACKED_BITS`]; larger tiles rank by
/// one-bit splits.
const MAX_PACKED_TILE: u32 = (1 << PACKED_BITS) - 1;

/// What the radix passes leave for the kernels after them.
pub(super) struct Sorted {
    /// The most significant key's words, sorted.
    pub words: BufferRef,
    /// Their type (`u32` or `u64`).
    pub word_ty: DType,
    /// The sorted rows' positions, when carried.
    pub rows: Option<BufferRef>,
    /// The survivor count of a predicate (scratch, `u32`).
    pub count: Option<u16>,
}

/// Rows to sort chosen before the passes: their positions in `rows[0]`
/// (`rows[1]` the second buffer the passes ping-pong with), their number
/// in scratch `count`.
#[derive(Copy, Clone)]
pub(super) struct Given {
    pub rows: [u16; 2],
    pub count: u16,
}

/// Digit passes over words already computed (see
/// [`Lower::digit_passes`]).
pub(super) struct Digits {
    /// The words' type.
    pub wt: DType,
    /// Passes (8-bit digits), lowest first.
    pub passes: u32,
    /// The two word buffers, `cur` holding the words.
    pub words: [u16; 2],
    pub cur: usize,
    /// The two row buffers carried along and which holds the rows.
    pub rows: Option<([u16; 2], usize)>,
    /// Scratch holding the number of items (else every position).
    pub count: Option<u16>,
    /// The digit counts and starts per workgroup.
    pub hist: u16,
    pub offs: u16,
}

/// The word buffers of one width and the row indices, ping-ponged by the
/// passes: `cur` holds the current ones.
struct PingPong {
    words: [u16; 2],
    cur: usize,
}

impl Lower<'_> {
    /// The plan of a sort stage (no row limit). With a predicate the
    /// surviving positions are compacted first (count, scan, scatter of
    /// their positions, as a filter + collect) and the sort runs over
    /// them: every later kernel takes its length from the survivor count.
    pub(super) fn sort_plan(
        &self,
        keys: &[SortKey],
        columns: &[crate::expr::Value],
    ) -> R<KernelPlan> {
        let key_only = keys.len() == 1 && columns.len() == 1 && columns[0] == keys[0].value;
        let mut plan = self.whole_plan();
        // Sorted chunks merge on the host by their keys: one key that is
        // the only column is the output; other keys come out with the
        // columns.
        let columns = self.merge_by_keys(&mut plan, keys, columns, key_only, None);
        let sorted = self.radix(&mut plan, keys, !key_only, false, None)?;
        // The outputs: decoded words, or the columns at the sorted rows.
        let (k, bufs) = match sorted.rows {
            None => self.decode_kernel(keys[0], sorted.word_ty, sorted.words, sorted.count)?,
            Some(r) => self.gather_kernel(&columns, r, sorted.count)?,
        };
        push(&mut plan, k, Groups::Spans, bufs);
        Ok(plan)
    }

    /// Sets how a sort's (or top-k's) chunks merge on the host
    /// ([`KernelPlan::merge_runs`]) and returns the columns its last
    /// kernel writes: `columns`, then every key that is not one of them
    /// (outputs only a merge reads, [`MergeRuns::SortedBy`]), unless that
    /// kernel would bind more than 8 storage buffers (then no merge: the
    /// plan runs in one piece).
    pub(super) fn merge_by_keys(
        &self,
        plan: &mut KernelPlan,
        keys: &[SortKey],
        columns: &[crate::expr::Value],
        key_only: bool,
        fetch: Option<u16>,
    ) -> Vec<crate::expr::Value> {
        let mut out = columns.to_vec();
        if key_only {
            plan.merge_runs = Some(MergeRuns::Sorted {
                descending: keys[0].descending,
                fetch,
            });
            return out;
        }
        let mut by = Vec::with_capacity(keys.len());
        for key in keys {
            let c = match out.iter().position(|&v| v == key.value) {
                Some(c) => c,
                None => {
                    out.push(key.value);
                    out.len() - 1
                }
            };
            by.push((c as u16, key.descending));
        }
        // The last kernel binds the inputs, the rows, the columns and a
        // count: past the 8 storage buffers every WebGPU adapter has, the
        // keys stay behind and the plan runs in one piece (one more
        // binding must not decline a plan that fits without it).
        if self.stage.inputs.len() + out.len() + 2 > 8 && out.len() > columns.len() {
            return columns.to_vec();
        }
        for &v in &out[columns.len()..] {
            plan.outputs.push(self.stage.program.ty(v));
        }
        plan.merge_runs = Some(MergeRuns::SortedBy {
            keys: by,
            visible: columns.len() as u16,
            fetch,
        });
        out
    }

    /// An empty plan of this stage that runs in one chunk.
    pub(super) fn whole_plan(&self) -> KernelPlan {
        KernelPlan {
            kernels: Vec::new(),
            dispatches: Vec::new(),
            scratch: Vec::new(),
            uniforms: self.layout.clone(),
            outputs: self.stage.output_dtypes().into_vec(),
            readback: Readback::Columns { count: None },
            items_per_thread: self.caps.items_per_thread,
            max_groups: self.caps.max_groups,
            whole: true,
            merge_runs: None,
            algorithm: None,
            fixed_rows: None,
            build: Vec::new(),
            sized: None,
            non_finite: None,
        }
    }

    /// Two row-index buffers (one per position) for the passes to
    /// ping-pong.
    pub(super) fn rows_pair(&self, plan: &mut KernelPlan) -> [u16; 2] {
        [
            add_scratch(plan, "rows_a", DType::U32, ScratchLen::Positions),
            add_scratch(plan, "rows_b", DType::U32, ScratchLen::Positions),
        ]
    }

    /// Appends the compaction of the positions the stage's predicate
    /// keeps (count, scan, scatter of their positions, as a filter +
    /// collect) into `rows`; returns the scratch holding their number.
    pub(super) fn compact_survivors(&self, plan: &mut KernelPlan, rows: u16) -> R<u16> {
        let pred = self.stage.predicate.expect("a predicate");
        let totals = add_scratch(plan, "totals", DType::U32, ScratchLen::Groups);
        let total = add_scratch(plan, "count", DType::U32, ScratchLen::One);
        let count = Agg {
            kind: AggKind::Count,
            ty: DType::U32,
            saturating: false,
        };
        let (k, bufs) = self.partial_kernel(
            "compact_count",
            std::slice::from_ref(&count),
            &[None],
            &[totals],
            None,
        )?;
        push(plan, k, Groups::Spans, bufs);
        let (k, bufs) = self.blocks_kernel(&count, totals, total, false)?;
        push(plan, k, Groups::One, bufs);
        let flag = |b: &mut KernelBuilder, vals: &[Option<Operand>]| -> R<Option<Operand>> {
            let keep = Self::value(vals, pred)?;
            Ok(Some(b.select(keep, u32c(1), u32c(0)).into()))
        };
        let emit = |b: &mut KernelBuilder,
                    vals: &[Option<Operand>],
                    outs: &[BindingId],
                    i: Local,
                    run: Operand,
                    _next: Operand|
         -> R<()> {
            let keep = Self::value(vals, pred)?;
            b.if_(keep, |b| b.push(Stmt::Store(outs[0], run, i.into())));
            Ok(())
        };
        let sum = Agg {
            kind: AggKind::Sum,
            ty: DType::U32,
            saturating: false,
        };
        let (k, mut bufs) =
            self.apply_kernel("compact_rows", &sum, totals, &[DType::U32], &flag, &emit)?;
        for b in &mut bufs {
            if *b == BufferRef::Output(0) {
                *b = BufferRef::Scratch(rows);
            }
        }
        push(plan, k, Groups::Spans, bufs);
        Ok(total)
    }

    /// Appends the radix passes sorting the stage's rows (its survivors,
    /// after a predicate) by `keys` to `plan`: with `carry` the row
    /// indices travel with the words; `group` orders by group words
    /// (`-0.0` is `+0.0`). Sets the plan's algorithm and, after a
    /// predicate, its readback count.
    pub(super) fn radix(
        &self,
        plan: &mut KernelPlan,
        keys: &[SortKey],
        carry: bool,
        group: bool,
        given: Option<Given>,
    ) -> R<Sorted> {
        let stage = self.stage;
        let key_only = !carry;
        let (mut passes, mut digits) = (0u8, 0u8);
        let scratch = add_scratch;
        let s = BufferRef::Scratch;
        let hist = scratch(
            plan,
            "digit_counts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let offs = scratch(
            plan,
            "digit_starts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        // Row indices: carried with the words (columns other than the one
        // key), or the survivors' positions of a filter (or the rows
        // given).
        let rows = match given {
            Some(g) => Some(g.rows),
            None => (!key_only || stage.predicate.is_some()).then(|| self.rows_pair(plan)),
        };
        let carry = (!key_only).then_some(()).and(rows);
        // The survivors: their positions in `rows[0]`, their number in
        // `count`.
        let count = match (given, stage.predicate) {
            (Some(g), _) => Some(g.count),
            (None, None) => None,
            (None, Some(_)) => {
                let total = self.compact_survivors(plan, rows.expect("rows for a filter")[0])?;
                plan.readback = Readback::Columns { count: Some(total) };
                Some(total)
            }
        };
        let mut words: BTreeMap<DType, PingPong> = BTreeMap::new();
        // Which row buffer holds the current permutation.
        let mut rows_cur = 0usize;
        let mut first = true;
        for key in keys.iter().rev() {
            let kty = stage.program.ty(key.value);
            let wt = if order::is_narrow(kty) {
                DType::U32
            } else {
                DType::U64
            };
            let ww = match words.get(&wt) {
                Some(w) => w.words,
                None => [
                    scratch(plan, &format!("words_{wt}_a"), wt, ScratchLen::Positions),
                    scratch(plan, &format!("words_{wt}_b"), wt, ScratchLen::Positions),
                ],
            };
            let pp = words.entry(wt).or_insert(PingPong { words: ww, cur: 0 });
            pp.cur = 0;
            // The words of this key at the current rows (the survivors'
            // positions, or the earlier keys' permutation); the first key
            // of an unfiltered sort carrying rows starts them.
            let at = (!first || count.is_some()).then(|| s(rows.expect("rows")[rows_cur]));
            let ident = (first && count.is_none())
                .then_some(())
                .and(carry)
                .map(|r| s(r[0]));
            let (k, bufs) = self.words_kernel(key, wt, at, s(pp.words[0]), ident, count, group)?;
            push(plan, k, Groups::Spans, bufs);
            let key_passes = if kty == DType::Bool {
                1
            } else {
                wt.size() as u32
            };
            digits += kty.size().max(1) as u8;
            passes += key_passes as u8;
            let moved = self.digit_passes(
                plan,
                Digits {
                    wt,
                    passes: key_passes,
                    words: pp.words,
                    cur: pp.cur,
                    rows: carry.map(|r| (r, rows_cur)),
                    count,
                    hist,
                    offs,
                },
            )?;
            pp.cur = moved.0;
            if let Some(r) = moved.1 {
                rows_cur = r;
            }
            first = false;
        }
        plan.algorithm = Some(crate::types::Algorithm::DeviceRadix(crate::types::Passes {
            passes,
            digits,
        }));
        let key = keys[0];
        let wt = if order::is_narrow(stage.program.ty(key.value)) {
            DType::U32
        } else {
            DType::U64
        };
        let pp = &words[&wt];
        Ok(Sorted {
            words: s(pp.words[pp.cur]),
            word_ty: wt,
            rows: carry.map(|r| s(r[rows_cur])),
            count,
        })
    }

    /// Appends the passes of `d` (the lowest digits of its words first);
    /// returns which word buffer, and which row buffer, hold the result.
    pub(super) fn digit_passes(
        &self,
        plan: &mut KernelPlan,
        d: Digits,
    ) -> R<(usize, Option<usize>)> {
        let s = BufferRef::Scratch;
        let spine = self.spine_kernel()?;
        // Whether a pass's digit is the same in every row (its spine
        // writes it, its scatter reads it).
        let constant = add_scratch(plan, "constant_digit", DType::U32, ScratchLen::One);
        let (mut cur, mut rows_cur) = (d.cur, d.rows.map(|r| r.1));
        for pass in 0..d.passes {
            let shift = pass * 8;
            let (src, dst) = (cur, 1 - cur);
            let (k, bufs) = self.count_kernel(d.wt, shift, s(d.words[src]), s(d.hist), d.count)?;
            push(plan, k, Groups::Spans, bufs);
            push(
                plan,
                spine.clone(),
                Groups::One,
                vec![s(d.hist), s(d.offs), s(constant)],
            );
            let moves = match (d.rows, rows_cur) {
                (Some((r, _)), Some(rc)) => Some((s(r[rc]), s(r[1 - rc]))),
                _ => None,
            };
            let (k, bufs) = self.scatter_kernel(
                d.wt,
                shift,
                (s(d.words[src]), s(d.words[dst])),
                moves,
                (s(d.offs), s(constant)),
                d.count,
            )?;
            push(plan, k, Groups::Spans, bufs);
            rows_cur = rows_cur.map(|r| 1 - r);
            cur = dst;
        }
        Ok((cur, rows_cur))
    }

    /// This workgroup's span of the sort's rows: of the stage's positions,
    /// or, after a filter, of the survivors (`count[0]` of them, split
    /// over the same workgroups).
    pub(super) fn rows_span(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        count: Option<BindingId>,
    ) -> (Local, Local) {
        let Some(c) = count else {
            return self.span(b, pre);
        };
        let n = b.assign(DType::U32, Op::Load(c, u32c(0)));
        self.split(b, pre, n.into())
    }

    /// This workgroup's share of `n` items split evenly over the
    /// span-wide dispatch's workgroups (rows, groups or keys counted on
    /// the device).
    pub(super) fn split(&self, b: &mut KernelBuilder, pre: &Pre, n: Operand) -> (Local, Local) {
        let g1 = b.binary(BinaryOp::Sub, pre.groups, u32c(1));
        let n1 = b.binary(BinaryOp::Add, n, g1);
        let span = b.binary(BinaryOp::Div, n1, pre.groups);
        let start = b.binary(BinaryOp::Mul, pre.w, span);
        let ws = b.binary(BinaryOp::Min, start, n);
        let end = b.binary(BinaryOp::Add, ws, span);
        let we = b.binary(BinaryOp::Min, end, n);
        (ws, we)
    }

    /// Binds the survivor count (last) when there is one.
    pub(super) fn count_binding(
        b: &mut KernelBuilder,
        bufs: &mut Vec<BufferRef>,
        count: Option<u16>,
    ) -> Option<BindingId> {
        count.map(|c| {
            bufs.push(BufferRef::Scratch(c));
            b.binding("count", DType::U32, Access::Read)
        })
    }

    pub(super) fn finish(b: KernelBuilder) -> R<crate::codegen::kernel::Kernel> {
        b.finish().map_err(|e| LowerError(e.to_string().into()))
    }

    /// `sort_words`: the word of `key` at every row: at the position
    /// `rows` names (survivors, or the earlier keys' permutation), else at
    /// the position itself; `ident` starts the identity permutation.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn words_kernel(
        &self,
        key: &SortKey,
        wt: DType,
        rows: Option<BufferRef>,
        words: BufferRef,
        ident: Option<BufferRef>,
        count: Option<u16>,
        group: bool,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let name = if rows.is_some() {
            "sort_rekey"
        } else {
            "sort_words"
        };
        let mut b = self.kernel(name);
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let perm = rows.map(|r| {
            bufs.push(r);
            b.binding("rows_in", DType::U32, Access::Read)
        });
        bufs.push(words);
        let out = b.binding("words", wt, Access::ReadWrite);
        let ident = ident.map(|r| {
            bufs.push(r);
            b.binding("rows", DType::U32, Access::ReadWrite)
        });
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let at = match perm {
                Some(p) => b.assign(DType::U32, Op::Load(p, i.into())),
                None => i,
            };
            let w = self.key_word(b, &pre, &inputs, at, key, wt, group)?;
            b.push(Stmt::Store(out, i.into(), w.into()));
            if let Some(r) = ident {
                b.push(Stmt::Store(r, i.into(), i.into()));
            }
            Ok(())
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// The order-preserving word (of type `wt`) of `key` at position `at`
    /// (as a group word with `group`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn key_word(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        inputs: &[BindingId],
        at: Local,
        key: &SortKey,
        wt: DType,
        group: bool,
    ) -> R<Local> {
        let vals = self.element(b, pre, inputs, at)?;
        let v = Self::value(&vals, key.value)?;
        Ok(Self::word_of(b, v, wt, group, key.descending))
    }

    /// The order-preserving word (of type `wt`) of value `v` (as a group
    /// word with `group`; complemented when `descending`).
    pub(super) fn word_of(
        b: &mut KernelBuilder,
        mut v: Operand,
        wt: DType,
        group: bool,
        descending: bool,
    ) -> Local {
        let ty = b.ty(v);
        if group && ty.is_float() {
            // Group keys: `-0.0` is `+0.0`.
            let zero = Operand::Const(Scalar::zero(ty));
            let is_zero = b.binary(BinaryOp::Eq, v, zero);
            v = b.select(is_zero, zero, v).into();
        }
        let top = |wt: DType| Operand::Const(Scalar::U64(1 << (wt.size() * 8 - 1)).cast(wt));
        let w = match ty {
            DType::Bool => b.select(v, Scalar::U32(1), Scalar::U32(0)),
            DType::U32 | DType::U64 => b.assign(ty, Op::Copy(v)),
            DType::I32 | DType::I64 => {
                let u = b.assign(wt, Op::Bitcast(v));
                b.binary(BinaryOp::BitXor, u, top(wt))
            }
            DType::F32 | DType::F64 => {
                let canonical = match ty {
                    DType::F32 => Scalar::U32(0x7fc0_0000),
                    _ => Scalar::U64(0x7ff8_0000_0000_0000),
                };
                let bits = b.assign(wt, Op::Bitcast(v));
                let nan = b.assign(DType::Bool, Op::IsNan(v));
                let bits = b.select(nan, canonical, bits);
                let neg = b.binary(BinaryOp::BitAnd, bits, top(wt));
                let neg = b.binary(BinaryOp::Ne, neg, Scalar::zero(wt));
                let flipped = b.assign(wt, Op::Unary(UnaryOp::BitNot, bits.into()));
                let set = b.binary(BinaryOp::BitOr, bits, top(wt));
                b.select(neg, flipped, set)
            }
        };
        if descending {
            b.assign(wt, Op::Unary(UnaryOp::BitNot, w.into()))
        } else {
            w
        }
    }

    /// Digit `shift / 8` of word `w` as a `u32`.
    pub(super) fn digit(b: &mut KernelBuilder, w: Operand, shift: u32) -> Local {
        let wt = b.ty(w);
        let s = b.binary(BinaryOp::Shr, w, Scalar::U32(shift).cast(wt));
        let mask = Scalar::U32(RADIX - 1).cast(wt);
        let d = b.binary(BinaryOp::BitAnd, s, mask);
        if wt == DType::U32 {
            d
        } else {
            b.assign(DType::U32, Op::Cast(d.into()))
        }
    }

    /// The bits `mask` selects from bit `bit` (a `u32` register) up of
    /// word `w`, as a `u32`.
    fn bits_at(b: &mut KernelBuilder, w: Operand, bit: Local, mask: u32) -> Local {
        let wt = b.ty(w);
        let by: Operand = if wt == DType::U32 {
            bit.into()
        } else {
            b.assign(wt, Op::Cast(bit.into())).into()
        };
        let s = b.binary(BinaryOp::Shr, w, by);
        let d = b.binary(BinaryOp::BitAnd, s, Scalar::U32(mask).cast(wt));
        if wt == DType::U32 {
            d
        } else {
            b.assign(DType::U32, Op::Cast(d.into()))
        }
    }

    /// The inclusive scan of every invocation's `mine` over the workgroup
    /// (Hillis–Steele in `scan`: step `2^k` for every `k` below
    /// log2(workgroup)), and the workgroup's total.
    fn scan_counts(
        &self,
        b: &mut KernelBuilder,
        scan: crate::codegen::kernel::SharedId,
        t: Local,
        mine: Local,
    ) -> (Local, Local) {
        b.push(Stmt::StoreShared(scan, t.into(), mine.into()));
        b.barrier();
        b.for_(u32c(0), u32c(self.wg.trailing_zeros()), u32c(1), |b, k| {
            let s = b.binary(BinaryOp::Shl, u32c(1), k);
            let v = b.assign(DType::U32, Op::LoadShared(scan, t.into()));
            let has = b.binary(BinaryOp::Ge, t, s);
            let back = b.binary(BinaryOp::Sub, t, s);
            let at = b.select(has, back, u32c(0));
            let o = b.assign(DType::U32, Op::LoadShared(scan, at.into()));
            let o = b.select(has, o, u32c(0));
            let sum = b.binary(BinaryOp::Add, v, o);
            b.barrier();
            b.push(Stmt::StoreShared(scan, t.into(), sum.into()));
            b.barrier();
        });
        let incl = b.assign(DType::U32, Op::LoadShared(scan, t.into()));
        let total = b.assign(DType::U32, Op::LoadShared(scan, u32c(self.wg - 1)));
        (incl, total)
    }

    /// Ranks the tile in workgroup memory (`kw`, with `kr`) stably by the
    /// digit at `shift`, two bits at a time: four splits, each one
    /// workgroup scan of every invocation's counts of three of the four
    /// 2-bit values packed in one word ([`PACKED_BITS`] bits each; the
    /// fourth is the rest). Positions `ps` are this invocation's,
    /// consecutive.
    #[allow(clippy::too_many_arguments)]
    fn rank_two_bits(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        shift: u32,
        kw: crate::codegen::kernel::SharedId,
        kr: Option<crate::codegen::kernel::SharedId>,
        scan: crate::codegen::kernel::SharedId,
        ps: &[Local],
        wt: DType,
    ) {
        let t = pre.t;
        let field = (1u32 << PACKED_BITS) - 1;
        b.for_(u32c(shift), u32c(shift + 8), u32c(2), |b, bit| {
            let mut items = Vec::new();
            let mine = b.assign(DType::U32, Op::Copy(u32c(0)));
            for &p in ps {
                let w = b.assign(wt, Op::LoadShared(kw, p.into()));
                let r = kr.map(|kr| b.assign(DType::U32, Op::LoadShared(kr, p.into())));
                let d = Self::bits_at(b, w.into(), bit, 3);
                // 1 << (PACKED_BITS * d) for d < 3, nothing for 3.
                let sh = b.binary(BinaryOp::Mul, d, u32c(PACKED_BITS));
                let one = b.binary(BinaryOp::Shl, u32c(1), sh);
                let low = b.binary(BinaryOp::Lt, d, u32c(3));
                let add = b.select(low, one, u32c(0));
                b.set(mine, Op::Binary(BinaryOp::Add, mine.into(), add.into()));
                items.push((w, r, d));
            }
            // The packed counts scanned over the workgroup.
            let (incl, total) = self.scan_counts(b, scan, t, mine);
            let excl = b.binary(BinaryOp::Sub, incl, mine);
            let unpack = |b: &mut KernelBuilder, packed: Local, f: u32| {
                let s = b.binary(BinaryOp::Shr, packed, u32c(f * PACKED_BITS));
                b.binary(BinaryOp::BitAnd, s, u32c(field))
            };
            // Where each value's rows start in the ranked tile.
            let t0 = unpack(b, total, 0);
            let t1 = unpack(b, total, 1);
            let t2 = unpack(b, total, 2);
            let s1 = t0;
            let s2 = b.binary(BinaryOp::Add, s1, t1);
            let s3 = b.binary(BinaryOp::Add, s2, t2);
            // This invocation's rows of each value before its first.
            let e0 = unpack(b, excl, 0);
            let e1 = unpack(b, excl, 1);
            let e2 = unpack(b, excl, 2);
            let first = b.binary(BinaryOp::Mul, t, u32c(ITEMS));
            let e01 = b.binary(BinaryOp::Add, e0, e1);
            let e012 = b.binary(BinaryOp::Add, e01, e2);
            let e3 = b.binary(BinaryOp::Sub, first, e012);
            let run: Vec<Local> = [e0, e1, e2, e3]
                .iter()
                .map(|&e| b.assign(DType::U32, Op::Copy(e.into())))
                .collect();
            let starts = [u32c(0), s1.into(), s2.into(), s3.into()];
            for (w, r, d) in items {
                let mut np: Option<Local> = None;
                for v in (0..4u32).rev() {
                    let at = b.binary(BinaryOp::Add, starts[v as usize], run[v as usize]);
                    np = Some(match np {
                        None => at,
                        Some(later) => {
                            let is = b.binary(BinaryOp::Eq, d, u32c(v));
                            b.select(is, at, later)
                        }
                    });
                }
                let np = np.expect("four values");
                b.push(Stmt::StoreShared(kw, np.into(), w.into()));
                if let (Some(kr), Some(r)) = (kr, r) {
                    b.push(Stmt::StoreShared(kr, np.into(), r.into()));
                }
                for v in 0..4u32 {
                    let is = b.binary(BinaryOp::Eq, d, u32c(v));
                    let inc = b.select(is, u32c(1), u32c(0));
                    let e = run[v as usize];
                    b.set(e, Op::Binary(BinaryOp::Add, e.into(), inc.into()));
                }
            }
            b.barrier();
        });
    }

    /// `sort_count`: this workgroup's digit counts of its span.
    fn count_kernel(
        &self,
        wt: DType,
        shift: u32,
        words: BufferRef,
        counts: BufferRef,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel(&format!("sort_count_{wt}_{shift}"));
        let mut bufs = vec![words, counts];
        let words = b.binding("words", wt, Access::Read);
        let hist = b.binding("counts", DType::U32, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let bins = b.shared_atomic("bins", DType::U32, RADIX);
        let pre = self.preload(&mut b);
        self.clear_bins(&mut b, &pre, bins, RADIX);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let w = b.assign(wt, Op::Load(words, i.into()));
            let d = Self::digit(b, w.into(), shift);
            b.assign(
                DType::U32,
                Op::AtomicShared {
                    op: crate::codegen::kernel::AtomicOp::Add,
                    shared: bins,
                    index: d.into(),
                    value: u32c(1),
                },
            );
            Ok(())
        })?;
        self.store_bins(&mut b, &pre, bins, RADIX, hist);
        Ok((Self::finish(b)?, bufs))
    }

    /// `sort_spine`: the first output position of every (workgroup,
    /// digit): all smaller digits' rows, then this digit's rows in earlier
    /// workgroups; and whether one digit holds every row (`constant[0]`:
    /// then the scatter's permutation is the identity).
    fn spine_kernel(&self) -> R<crate::codegen::kernel::Kernel> {
        let mut b = self.kernel("sort_spine");
        let hist = b.binding("counts", DType::U32, Access::ReadWrite);
        let offs = b.binding("starts", DType::U32, Access::ReadWrite);
        let constant = b.binding("constant", DType::U32, Access::ReadWrite);
        let totals = b.shared("totals", DType::U32, RADIX);
        let bases = b.shared("bases", DType::U32, RADIX);
        let pre = self.preload(&mut b);
        self.digit_totals(&mut b, &pre, hist, totals);
        let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        b.if_(lead, |b| {
            let acc = b.assign(DType::U32, Op::Copy(u32c(0)));
            let most = b.assign(DType::U32, Op::Copy(u32c(0)));
            b.for_(u32c(0), u32c(RADIX), u32c(1), |b, d| {
                b.push(Stmt::StoreShared(bases, d.into(), acc.into()));
                let c = b.assign(DType::U32, Op::LoadShared(totals, d.into()));
                b.set(acc, Op::Binary(BinaryOp::Add, acc.into(), c.into()));
                b.set(most, Op::Binary(BinaryOp::Max, most.into(), c.into()));
            });
            let one = b.binary(BinaryOp::Eq, most, acc);
            let flag = b.select(one, u32c(1), u32c(0));
            b.push(Stmt::Store(constant, u32c(0), flag.into()));
        });
        b.barrier();
        b.for_(pre.t, u32c(RADIX), u32c(self.wg), |b, d| {
            let run = b.assign(DType::U32, Op::LoadShared(bases, d.into()));
            b.for_(u32c(0), pre.groups, u32c(1), |b, g| {
                let row = b.binary(BinaryOp::Mul, g, u32c(RADIX));
                let at = b.binary(BinaryOp::Add, row, d);
                b.push(Stmt::Store(offs, at.into(), run.into()));
                let c = b.assign(DType::U32, Op::Load(hist, at.into()));
                b.set(run, Op::Binary(BinaryOp::Add, run.into(), c.into()));
            });
        });
        Self::finish(b)
    }

    /// Every digit's count summed over the workgroups' rows of `hist`
    /// into `totals` (workgroup memory), then a barrier.
    pub(super) fn digit_totals(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        hist: BindingId,
        totals: crate::codegen::kernel::SharedId,
    ) {
        b.for_(pre.t, u32c(RADIX), u32c(self.wg), |b, d| {
            let acc = b.assign(DType::U32, Op::Copy(u32c(0)));
            b.for_(u32c(0), pre.groups, u32c(1), |b, g| {
                let row = b.binary(BinaryOp::Mul, g, u32c(RADIX));
                let at = b.binary(BinaryOp::Add, row, d);
                let c = b.assign(DType::U32, Op::Load(hist, at.into()));
                b.set(acc, Op::Binary(BinaryOp::Add, acc.into(), c.into()));
            });
            b.push(Stmt::StoreShared(totals, d.into(), acc.into()));
        });
        b.barrier();
    }

    /// `sort_scatter`: moves this workgroup's span to its digits' output
    /// positions, tile by tile, ranking each tile stably by 2-bit (or
    /// one-bit) splits; `spine` is the spine's output (the starts, the
    /// constant-digit flag).
    fn scatter_kernel(
        &self,
        wt: DType,
        shift: u32,
        words: (BufferRef, BufferRef),
        moves: Option<(BufferRef, BufferRef)>,
        spine: (BufferRef, BufferRef),
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let wg = self.wg;
        let tile = wg * ITEMS;
        let rows = moves.is_some();
        let mut b = self.kernel(&format!(
            "sort_scatter_{wt}_{shift}{}",
            if rows { "_rows" } else { "" }
        ));
        let mut bufs = vec![words.0];
        let src = b.binding("words_in", wt, Access::Read);
        let src_rows = moves.map(|(r, _)| {
            bufs.push(r);
            b.binding("rows_in", DType::U32, Access::Read)
        });
        bufs.push(words.1);
        let dst = b.binding("words_out", wt, Access::ReadWrite);
        let dst_rows = moves.map(|(_, r)| {
            bufs.push(r);
            b.binding("rows_out", DType::U32, Access::ReadWrite)
        });
        let (starts, constant) = spine;
        bufs.push(starts);
        let offs = b.binding("starts", DType::U32, Access::Read);
        bufs.push(constant);
        let constant = b.binding("constant", DType::U32, Access::Read);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let kw = b.shared("tile_words", wt, tile);
        let kr = rows.then(|| b.shared("tile_rows", DType::U32, tile));
        let scan = b.shared("zeros", DType::U32, wg);
        let run = b.shared("runs", DType::U32, RADIX);
        let start = b.shared("firsts", DType::U32, RADIX);
        let pre = self.preload(&mut b);
        let t = pre.t;
        let row = b.binary(BinaryOp::Mul, pre.w, u32c(RADIX));
        b.for_(t, u32c(RADIX), u32c(wg), |b, d| {
            let at = b.binary(BinaryOp::Add, row, d);
            let o = b.assign(DType::U32, Op::Load(offs, at.into()));
            b.push(Stmt::StoreShared(run, d.into(), o.into()));
        });
        b.barrier();
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        let first_item = b.binary(BinaryOp::Mul, t, u32c(ITEMS));
        let max_word = Operand::Const(Scalar::U64(u64::MAX).cast(wt));
        // A digit every row shares moves no row: the span is copied as
        // it is, without ranking. The flag is one word of a read-only
        // binding, the same for every invocation; it empties one of the
        // two loops below.
        let flag = b.assign(DType::U32, Op::Load(constant, u32c(0)));
        let same = b.binary(BinaryOp::Ne, flag, u32c(0));
        let copy_end = b.select(same, we, ws);
        let we = b.select(same, ws, we);
        let from = b.binary(BinaryOp::Add, ws, t);
        b.for_(from, copy_end, u32c(wg), |b, i| {
            let w = b.assign(wt, Op::Load(src, i.into()));
            b.push(Stmt::Store(dst, i.into(), w.into()));
            if let (Some(sr), Some(dr)) = (src_rows, dst_rows) {
                let r = b.assign(DType::U32, Op::Load(sr, i.into()));
                b.push(Stmt::Store(dr, i.into(), r.into()));
            }
        });
        b.for_(ws, we, u32c(tile), |b, base| {
            let rem = b.binary(BinaryOp::Sub, we, base);
            let tl = b.binary(BinaryOp::Min, rem, u32c(tile));
            // This invocation's positions in the tile.
            let ps: Vec<Local> = (0..ITEMS)
                .map(|j| b.binary(BinaryOp::Add, first_item, u32c(j)))
                .collect();
            // Load the tile; positions past its end get the largest word,
            // which every split keeps at the end.
            for &p in &ps {
                let w = b.assign(wt, Op::Copy(max_word));
                let r = b.assign(DType::U32, Op::Copy(u32c(0)));
                let valid = b.binary(BinaryOp::Lt, p, tl);
                b.if_(valid, |b| {
                    let gi = b.binary(BinaryOp::Add, base, p);
                    b.set(w, Op::Load(src, gi.into()));
                    if let Some(sr) = src_rows {
                        b.set(r, Op::Load(sr, gi.into()));
                    }
                });
                b.push(Stmt::StoreShared(kw, p.into(), w.into()));
                if let Some(kr) = kr {
                    b.push(Stmt::StoreShared(kr, p.into(), r.into()));
                }
            }
            b.barrier();
            if tile <= MAX_PACKED_TILE {
                self.rank_two_bits(b, &pre, shift, kw, kr, scan, &ps, wt);
            } else {
                // Eight stable one-bit splits rank the tile by this digit.
                b.for_(u32c(shift), u32c(shift + 8), u32c(1), |b, bit| {
                    let mut items = Vec::new();
                    let zeros = b.assign(DType::U32, Op::Copy(u32c(0)));
                    for &p in &ps {
                        let w = b.assign(wt, Op::LoadShared(kw, p.into()));
                        let r = kr.map(|kr| b.assign(DType::U32, Op::LoadShared(kr, p.into())));
                        let one = Self::bits_at(b, w.into(), bit, 1);
                        let zero = b.binary(BinaryOp::Sub, u32c(1), one);
                        b.set(zeros, Op::Binary(BinaryOp::Add, zeros.into(), zero.into()));
                        items.push((p, w, r, one, zero));
                    }
                    // The zero counts scanned over the workgroup.
                    let (incl, total) = self.scan_counts(b, scan, t, zeros);
                    let before = b.binary(BinaryOp::Sub, incl, zeros);
                    for (p, w, r, one, zero) in items {
                        // Zeros keep their order at the front, ones after them.
                        let ones_before = b.binary(BinaryOp::Sub, p, before);
                        let at_one = b.binary(BinaryOp::Add, total, ones_before);
                        let is_one = b.binary(BinaryOp::Ne, one, u32c(0));
                        let np = b.select(is_one, at_one, before);
                        b.push(Stmt::StoreShared(kw, np.into(), w.into()));
                        if let (Some(kr), Some(r)) = (kr, r) {
                            b.push(Stmt::StoreShared(kr, np.into(), r.into()));
                        }
                        b.set(
                            before,
                            Op::Binary(BinaryOp::Add, before.into(), zero.into()),
                        );
                    }
                    b.barrier();
                });
            }
            // The first position of every digit in the ranked tile.
            let mut items = Vec::new();
            for &p in &ps {
                let valid = b.binary(BinaryOp::Lt, p, tl);
                let w = b.assign(wt, Op::LoadShared(kw, p.into()));
                let d = Self::digit(b, w.into(), shift);
                let has_prev = b.binary(BinaryOp::Gt, p, u32c(0));
                let pm = b.binary(BinaryOp::Sub, p, u32c(1));
                let pm = b.select(has_prev, pm, u32c(0));
                let pw = b.assign(wt, Op::LoadShared(kw, pm.into()));
                let pd = Self::digit(b, pw.into(), shift);
                let differs = b.binary(BinaryOp::Ne, pd, d);
                let first = b.binary(BinaryOp::Eq, p, u32c(0));
                let first = b.binary(BinaryOp::Or, first, differs);
                let first = b.binary(BinaryOp::And, first, valid);
                b.if_(first, |b| {
                    b.push(Stmt::StoreShared(start, d.into(), p.into()))
                });
                items.push((p, valid, w, d));
            }
            b.barrier();
            // Each row to its digit's running position plus its rank.
            for &(p, valid, w, d) in &items {
                b.if_(valid, |b| {
                    let r0 = b.assign(DType::U32, Op::LoadShared(run, d.into()));
                    let s0 = b.assign(DType::U32, Op::LoadShared(start, d.into()));
                    let rank = b.binary(BinaryOp::Sub, p, s0);
                    let at = b.binary(BinaryOp::Add, r0, rank);
                    b.push(Stmt::Store(dst, at.into(), w.into()));
                    if let (Some(kr), Some(dr)) = (kr, dst_rows) {
                        let r = b.assign(DType::U32, Op::LoadShared(kr, p.into()));
                        b.push(Stmt::Store(dr, at.into(), r.into()));
                    }
                });
            }
            b.barrier();
            // The last row of each digit moves the digit's running position.
            for &(p, valid, _, d) in &items {
                let next = b.binary(BinaryOp::Add, p, u32c(1));
                let at_end = b.binary(BinaryOp::Eq, next, tl);
                let last_pos = b.binary(BinaryOp::Sub, tl, u32c(1));
                let pn = b.binary(BinaryOp::Min, next, last_pos);
                let nw = b.assign(wt, Op::LoadShared(kw, pn.into()));
                let nd = Self::digit(b, nw.into(), shift);
                let differs = b.binary(BinaryOp::Ne, nd, d);
                let last = b.binary(BinaryOp::Or, at_end, differs);
                let last = b.binary(BinaryOp::And, last, valid);
                b.if_(last, |b| {
                    let r0 = b.assign(DType::U32, Op::LoadShared(run, d.into()));
                    let s0 = b.assign(DType::U32, Op::LoadShared(start, d.into()));
                    let n = b.binary(BinaryOp::Sub, next, s0);
                    let r1 = b.binary(BinaryOp::Add, r0, n);
                    b.push(Stmt::StoreShared(run, d.into(), r1.into()));
                });
            }
            b.barrier();
        });
        Ok((Self::finish(b)?, bufs))
    }

    /// `sort_decode`: the sorted key column from its words.
    pub(super) fn decode_kernel(
        &self,
        key: SortKey,
        wt: DType,
        words: BufferRef,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let ty = self.stage.program.ty(key.value);
        let mut b = self.kernel("sort_decode");
        let mut bufs = vec![words, BufferRef::Output(0)];
        let words = b.binding("words", wt, Access::Read);
        let out = b.binding("out0", ty, Access::ReadWrite);
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let mut w = b.assign(wt, Op::Load(words, i.into()));
            if key.descending {
                w = b.assign(wt, Op::Unary(UnaryOp::BitNot, w.into()));
            }
            let top = Operand::Const(Scalar::U64(1 << (wt.size() * 8 - 1)).cast(wt));
            let v = match ty {
                DType::Bool => b.binary(BinaryOp::Ne, w, u32c(0)),
                DType::U32 | DType::U64 => w,
                DType::I32 | DType::I64 => {
                    let u = b.binary(BinaryOp::BitXor, w, top);
                    b.assign(ty, Op::Bitcast(u.into()))
                }
                DType::F32 | DType::F64 => {
                    // Positive words (top bit set) drop it; negative ones
                    // were complemented.
                    let pos = b.binary(BinaryOp::BitAnd, w, top);
                    let pos = b.binary(BinaryOp::Ne, pos, Scalar::zero(wt));
                    let low = b.binary(BinaryOp::BitXor, w, top);
                    let flipped = b.assign(wt, Op::Unary(UnaryOp::BitNot, w.into()));
                    let bits = b.select(pos, low, flipped);
                    b.assign(ty, Op::Bitcast(bits.into()))
                }
            };
            b.push(Stmt::Store(out, i.into(), v.into()));
            Ok(())
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// `sort_gather`: every column at the sorted rows.
    pub(super) fn gather_kernel(
        &self,
        columns: &[crate::expr::Value],
        rows: BufferRef,
        count: Option<u16>,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("sort_gather");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        bufs.push(rows);
        let rows = b.binding("rows", DType::U32, Access::Read);
        let outs: Vec<BindingId> = columns
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
        let count = Self::count_binding(&mut b, &mut bufs, count);
        let pre = self.preload(&mut b);
        let (ws, we) = self.rows_span(&mut b, &pre, count);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let at = b.assign(DType::U32, Op::Load(rows, i.into()));
            let vals = self.element(b, &pre, &inputs, at)?;
            for (&c, &o) in columns.iter().zip(&outs) {
                let v = Self::value(&vals, c)?;
                b.push(Stmt::Store(o, i.into(), v));
            }
            Ok(())
        })?;
        Ok((Self::finish(b)?, bufs))
    }
}

/// Adds a scratch buffer to `plan`; returns its index.
pub(super) fn add_scratch(plan: &mut KernelPlan, name: &str, elem: DType, len: ScratchLen) -> u16 {
    plan.scratch.push(Scratch {
        name: name.into(),
        elem,
        len,
        init: ScratchInit::Undefined,
    });
    (plan.scratch.len() - 1) as u16
}

/// Appends a dispatch of `k`, reusing an identical kernel already in the
/// plan.
pub(super) fn push(
    plan: &mut KernelPlan,
    k: crate::codegen::kernel::Kernel,
    groups: Groups,
    buffers: Vec<BufferRef>,
) {
    let kernel = match plan.kernels.iter().position(|x| *x == k) {
        Some(i) => i,
        None => {
            plan.kernels.push(k);
            plan.kernels.len() - 1
        }
    };
    plan.dispatches.push(Dispatch {
        kernel,
        groups,
        buffers,
    });
}
