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
//! One digit pass is four dispatches:
//!
//! - `sort_zero`: every workgroup clears its row of 256 digit counts;
//! - `sort_count`: every workgroup counts the digits of its span (atomic
//!   adds into its own row: counting commutes, so the result does not
//!   depend on their order);
//! - `sort_spine`: one workgroup turns the counts into the first output
//!   position of every (workgroup, digit), digit-major;
//! - `sort_scatter`: every workgroup walks its span in tiles of
//!   `workgroup × ITEMS` positions. A tile is ranked stably in workgroup
//!   memory by eight one-bit splits (each a workgroup scan of the
//!   invocations' zero counts), so equal digits keep their input order;
//!   each row then goes to its digit's running position plus its rank
//!   among the tile's rows of that digit. No position depends on the order
//!   of atomics, and no workgroup waits on another.
//!
//! The plan is [`whole`](KernelPlan::whole): it needs all positions in one
//! run.

use super::*;
use crate::semantics::order::{self, SortKey};

/// Positions per invocation in a scatter tile.
const ITEMS: u32 = 2;
/// Digits of one pass.
const RADIX: u32 = 256;

/// The word buffers of one width and the row indices, ping-ponged by the
/// passes: `cur` holds the current ones.
struct PingPong {
    words: [u16; 2],
    cur: usize,
}

impl Lower<'_> {
    /// The plan of a sort stage (no row limit).
    pub(super) fn sort_plan(
        &self,
        keys: &[SortKey],
        columns: &[crate::expr::Value],
    ) -> R<KernelPlan> {
        let stage = self.stage;
        if stage.predicate.is_some() {
            return err(
                "the device kernels have no filter before a sort: it runs on the CPU backends",
            );
        }
        let key_only = keys.len() == 1 && columns.len() == 1 && columns[0] == keys[0].value;
        let mut plan = KernelPlan {
            kernels: Vec::new(),
            dispatches: Vec::new(),
            scratch: Vec::new(),
            uniforms: self.layout.clone(),
            outputs: stage.output_dtypes().into_vec(),
            readback: Readback::Columns { count: None },
            items_per_thread: self.caps.items_per_thread,
            max_groups: self.caps.max_groups,
            whole: true,
            algorithm: None,
        };
        let (mut passes, mut digits) = (0u8, 0u8);
        let scratch = |plan: &mut KernelPlan, name: &str, elem, len| {
            plan.scratch.push(Scratch {
                name: name.into(),
                elem,
                len,
                init: ScratchInit::Undefined,
            });
            (plan.scratch.len() - 1) as u16
        };
        let hist = scratch(
            &mut plan,
            "digit_counts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let offs = scratch(
            &mut plan,
            "digit_starts",
            DType::U32,
            ScratchLen::PerGroup(RADIX),
        );
        let idx = (!key_only).then(|| {
            [
                scratch(&mut plan, "rows_a", DType::U32, ScratchLen::Positions),
                scratch(&mut plan, "rows_b", DType::U32, ScratchLen::Positions),
            ]
        });
        let mut words: BTreeMap<DType, PingPong> = BTreeMap::new();
        // Which row buffer holds the current permutation.
        let mut rows_cur = 0usize;
        let spine = self.spine_kernel()?;
        let zero = self.zero_kernel()?;
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
                    scratch(
                        &mut plan,
                        &format!("words_{wt}_a"),
                        wt,
                        ScratchLen::Positions,
                    ),
                    scratch(
                        &mut plan,
                        &format!("words_{wt}_b"),
                        wt,
                        ScratchLen::Positions,
                    ),
                ],
            };
            let pp = words.entry(wt).or_insert(PingPong { words: ww, cur: 0 });
            pp.cur = 0;
            // The words of this key at the current permutation.
            let (k, mut bufs) = self.words_kernel(key, wt, first, idx.is_some())?;
            bufs.push(BufferRef::Scratch(pp.words[0]));
            if let Some(rows) = idx {
                if !first {
                    // Read the permutation, words go to `words[0]`.
                    bufs.insert(bufs.len() - 1, BufferRef::Scratch(rows[rows_cur]));
                } else {
                    bufs.push(BufferRef::Scratch(rows[0]));
                    rows_cur = 0;
                }
            }
            push(&mut plan, k, Groups::Spans, bufs);
            let key_passes = if kty == DType::Bool {
                1
            } else {
                wt.size() as u32
            };
            digits += kty.size().max(1) as u8;
            passes += key_passes as u8;
            for pass in 0..key_passes {
                let shift = pass * 8;
                let (src, dst) = (pp.cur, 1 - pp.cur);
                push(
                    &mut plan,
                    zero.clone(),
                    Groups::Spans,
                    vec![BufferRef::Scratch(hist)],
                );
                push(
                    &mut plan,
                    self.count_kernel(wt, shift)?,
                    Groups::Spans,
                    vec![BufferRef::Scratch(pp.words[src]), BufferRef::Scratch(hist)],
                );
                push(
                    &mut plan,
                    spine.clone(),
                    Groups::One,
                    vec![BufferRef::Scratch(hist), BufferRef::Scratch(offs)],
                );
                let mut bufs = vec![BufferRef::Scratch(pp.words[src])];
                if let Some(rows) = idx {
                    bufs.push(BufferRef::Scratch(rows[rows_cur]));
                }
                bufs.push(BufferRef::Scratch(pp.words[dst]));
                if let Some(rows) = idx {
                    bufs.push(BufferRef::Scratch(rows[1 - rows_cur]));
                    rows_cur = 1 - rows_cur;
                }
                bufs.push(BufferRef::Scratch(offs));
                push(
                    &mut plan,
                    self.scatter_kernel(wt, shift, idx.is_some())?,
                    Groups::Spans,
                    bufs,
                );
                pp.cur = dst;
            }
            first = false;
        }
        // The outputs: decoded words, or the columns at the sorted rows.
        let (k, mut bufs) = match idx {
            None => {
                let key = keys[0];
                let wt = if order::is_narrow(stage.program.ty(key.value)) {
                    DType::U32
                } else {
                    DType::U64
                };
                let pp = &words[&wt];
                let (k, mut bufs) = self.decode_kernel(key, wt)?;
                bufs.insert(0, BufferRef::Scratch(pp.words[pp.cur]));
                (k, std::mem::take(&mut bufs))
            }
            Some(rows) => {
                let (k, mut bufs) = self.gather_kernel(columns)?;
                bufs.insert(
                    bufs.len() - columns.len(),
                    BufferRef::Scratch(rows[rows_cur]),
                );
                (k, std::mem::take(&mut bufs))
            }
        };
        push(&mut plan, k, Groups::Spans, std::mem::take(&mut bufs));
        plan.algorithm = Some(crate::types::Algorithm::DeviceRadix(crate::types::Passes {
            passes,
            digits,
        }));
        Ok(plan)
    }

    fn finish(b: KernelBuilder) -> R<crate::codegen::kernel::Kernel> {
        b.finish().map_err(|e| LowerError(e.to_string().into()))
    }

    /// `sort_words`: the word of `key` at every position (at the position
    /// the permutation names, after the first key), and for the first key
    /// with rows the identity permutation. Bindings: inputs, [rows in],
    /// words out, [rows out] (the caller appends the scratch refs; this
    /// returns the inputs' refs).
    fn words_kernel(
        &self,
        key: &SortKey,
        wt: DType,
        first: bool,
        rows: bool,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel(if first { "sort_words" } else { "sort_rekey" });
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        let perm = (rows && !first).then(|| b.binding("rows_in", DType::U32, Access::Read));
        let out = b.binding("words", wt, Access::ReadWrite);
        let ident = (rows && first).then(|| b.binding("rows", DType::U32, Access::ReadWrite));
        let pre = self.preload(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let at = match perm {
                Some(p) => b.assign(DType::U32, Op::Load(p, i.into())),
                None => i,
            };
            let w = self.key_word(b, &pre, &inputs, at, key, wt)?;
            b.push(Stmt::Store(out, i.into(), w.into()));
            if let Some(r) = ident {
                b.push(Stmt::Store(r, i.into(), i.into()));
            }
            Ok(())
        })?;
        Ok((Self::finish(b)?, bufs))
    }

    /// The order-preserving word (of type `wt`) of `key` at position `at`.
    fn key_word(
        &self,
        b: &mut KernelBuilder,
        pre: &Pre,
        inputs: &[BindingId],
        at: Local,
        key: &SortKey,
        wt: DType,
    ) -> R<Local> {
        let vals = self.element(b, pre, inputs, at)?;
        let v = Self::value(&vals, key.value)?;
        let ty = b.ty(v);
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
        Ok(if key.descending {
            b.assign(wt, Op::Unary(UnaryOp::BitNot, w.into()))
        } else {
            w
        })
    }

    /// `sort_zero`: clears this workgroup's row of digit counts.
    fn zero_kernel(&self) -> R<crate::codegen::kernel::Kernel> {
        let mut b = self.kernel("sort_zero");
        let hist = b.binding("counts", DType::U32, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let row = b.binary(BinaryOp::Mul, pre.w, u32c(RADIX));
        b.for_(pre.t, u32c(RADIX), u32c(self.wg), |b, d| {
            let at = b.binary(BinaryOp::Add, row, d);
            b.push(Stmt::Store(hist, at.into(), u32c(0)));
        });
        Self::finish(b)
    }

    /// Digit `shift / 8` of word `w` as a `u32`.
    fn digit(b: &mut KernelBuilder, w: Operand, shift: u32, bits: u32) -> Local {
        let wt = b.ty(w);
        let s = b.binary(BinaryOp::Shr, w, Scalar::U32(shift).cast(wt));
        let mask = Scalar::U32((1 << bits) - 1).cast(wt);
        let d = b.binary(BinaryOp::BitAnd, s, mask);
        if wt == DType::U32 {
            d
        } else {
            b.assign(DType::U32, Op::Cast(d.into()))
        }
    }

    /// `sort_count`: this workgroup's digit counts of its span.
    fn count_kernel(&self, wt: DType, shift: u32) -> R<crate::codegen::kernel::Kernel> {
        let mut b = self.kernel(&format!("sort_count_{wt}_{shift}"));
        let words = b.binding("words", wt, Access::Read);
        let hist = b.binding("counts", DType::U32, Access::Atomic);
        let pre = self.preload(&mut b);
        let row = b.binary(BinaryOp::Mul, pre.w, u32c(RADIX));
        let (ws, we) = self.span(&mut b, &pre);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let w = b.assign(wt, Op::Load(words, i.into()));
            let d = Self::digit(b, w.into(), shift, 8);
            let at = b.binary(BinaryOp::Add, row, d);
            b.assign(
                DType::U32,
                Op::Atomic {
                    op: crate::codegen::kernel::AtomicOp::Add,
                    binding: hist,
                    index: at.into(),
                    value: u32c(1),
                },
            );
            Ok(())
        })?;
        Self::finish(b)
    }

    /// `sort_spine`: the first output position of every (workgroup,
    /// digit): all smaller digits' rows, then this digit's rows in earlier
    /// workgroups.
    fn spine_kernel(&self) -> R<crate::codegen::kernel::Kernel> {
        let mut b = self.kernel("sort_spine");
        let hist = b.binding("counts", DType::U32, Access::ReadWrite);
        let offs = b.binding("starts", DType::U32, Access::ReadWrite);
        let totals = b.shared("totals", DType::U32, RADIX);
        let bases = b.shared("bases", DType::U32, RADIX);
        let pre = self.preload(&mut b);
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
        let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        b.if_(lead, |b| {
            let acc = b.assign(DType::U32, Op::Copy(u32c(0)));
            b.for_(u32c(0), u32c(RADIX), u32c(1), |b, d| {
                b.push(Stmt::StoreShared(bases, d.into(), acc.into()));
                let c = b.assign(DType::U32, Op::LoadShared(totals, d.into()));
                b.set(acc, Op::Binary(BinaryOp::Add, acc.into(), c.into()));
            });
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

    /// `sort_scatter`: moves this workgroup's span to its digits' output
    /// positions, tile by tile, ranking each tile stably by one-bit splits.
    /// Bindings: words in, [rows in], words out, [rows out], starts.
    fn scatter_kernel(
        &self,
        wt: DType,
        shift: u32,
        rows: bool,
    ) -> R<crate::codegen::kernel::Kernel> {
        let wg = self.wg;
        let tile = wg * ITEMS;
        let mut b = self.kernel(&format!(
            "sort_scatter_{wt}_{shift}{}",
            if rows { "_rows" } else { "" }
        ));
        let src = b.binding("words_in", wt, Access::Read);
        let src_rows = rows.then(|| b.binding("rows_in", DType::U32, Access::Read));
        let dst = b.binding("words_out", wt, Access::ReadWrite);
        let dst_rows = rows.then(|| b.binding("rows_out", DType::U32, Access::ReadWrite));
        let offs = b.binding("starts", DType::U32, Access::Read);
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
        let (ws, we) = self.span(&mut b, &pre);
        let first_item = b.binary(BinaryOp::Mul, t, u32c(ITEMS));
        let max_word = Operand::Const(Scalar::U64(u64::MAX).cast(wt));
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
            // Eight stable one-bit splits rank the tile by this digit.
            for bit in shift..shift + 8 {
                let mut items = Vec::new();
                let zeros = b.assign(DType::U32, Op::Copy(u32c(0)));
                for &p in &ps {
                    let w = b.assign(wt, Op::LoadShared(kw, p.into()));
                    let r = kr.map(|kr| b.assign(DType::U32, Op::LoadShared(kr, p.into())));
                    let one = Self::digit(b, w.into(), bit, 1);
                    let zero = b.binary(BinaryOp::Sub, u32c(1), one);
                    b.set(zeros, Op::Binary(BinaryOp::Add, zeros.into(), zero.into()));
                    items.push((p, w, r, one, zero));
                }
                b.push(Stmt::StoreShared(scan, t.into(), zeros.into()));
                b.barrier();
                // Inclusive Hillis–Steele scan of the zero counts.
                let mut s = 1;
                while s < wg {
                    let v = b.assign(DType::U32, Op::LoadShared(scan, t.into()));
                    let has = b.binary(BinaryOp::Ge, t, u32c(s));
                    let back = b.binary(BinaryOp::Sub, t, u32c(s));
                    let at = b.select(has, back, u32c(0));
                    let o = b.assign(DType::U32, Op::LoadShared(scan, at.into()));
                    let o = b.select(has, o, u32c(0));
                    let sum = b.binary(BinaryOp::Add, v, o);
                    b.barrier();
                    b.push(Stmt::StoreShared(scan, t.into(), sum.into()));
                    b.barrier();
                    s *= 2;
                }
                let incl = b.assign(DType::U32, Op::LoadShared(scan, t.into()));
                let total = b.assign(DType::U32, Op::LoadShared(scan, u32c(wg - 1)));
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
            }
            // The first position of every digit in the ranked tile.
            let mut items = Vec::new();
            for &p in &ps {
                let valid = b.binary(BinaryOp::Lt, p, tl);
                let w = b.assign(wt, Op::LoadShared(kw, p.into()));
                let d = Self::digit(b, w.into(), shift, 8);
                let has_prev = b.binary(BinaryOp::Gt, p, u32c(0));
                let pm = b.binary(BinaryOp::Sub, p, u32c(1));
                let pm = b.select(has_prev, pm, u32c(0));
                let pw = b.assign(wt, Op::LoadShared(kw, pm.into()));
                let pd = Self::digit(b, pw.into(), shift, 8);
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
                let nd = Self::digit(b, nw.into(), shift, 8);
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
        Self::finish(b)
    }

    /// `sort_decode`: the sorted key column from its words. Bindings:
    /// words (the caller's), output.
    fn decode_kernel(
        &self,
        key: SortKey,
        wt: DType,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let ty = self.stage.program.ty(key.value);
        let mut b = self.kernel("sort_decode");
        let words = b.binding("words", wt, Access::Read);
        let out = b.binding("out0", ty, Access::ReadWrite);
        let pre = self.preload(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
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
        Ok((Self::finish(b)?, vec![BufferRef::Output(0)]))
    }

    /// `sort_gather`: every column at the sorted rows. Bindings: inputs,
    /// rows (inserted by the caller before the outputs), outputs.
    fn gather_kernel(
        &self,
        columns: &[crate::expr::Value],
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("sort_gather");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
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
        let pre = self.preload(&mut b);
        let (ws, we) = self.span(&mut b, &pre);
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

/// Appends a dispatch of `k`, reusing an identical kernel already in the
/// plan.
fn push(
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
