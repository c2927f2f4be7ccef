//! Key counts on the device (`histogram`): every workgroup counts its
//! span's keys into bins in workgroup memory (atomic adds: counting
//! commutes, so no result depends on their order) and writes them as its
//! row of counters, then each key's counts are summed over the workgroups
//! in 64 bits. The key (already a bin, with CUB HistogramEven's
//! below/above/NaN bins) is the stage's element program; a key past the
//! last counts in the last, as on the CPU. The plan is not
//! [`whole`](KernelPlan::whole): each chunk of a long input counts every
//! key and wgpu adds the chunks' counts on the host (the PTX executor runs
//! it as one chunk, up to 2^31 positions).

use super::sort::push;
use super::*;

/// Most keys the device counts: their bins fill the 16 KiB of workgroup
/// memory every WebGPU adapter has.
pub(super) const MAX_KEYS: u32 = 4096;

impl Lower<'_> {
    /// The plan of a key-count stage of `keys` keys.
    pub(super) fn count_plan(&self, key: crate::expr::Value, keys: u32) -> R<KernelPlan> {
        let keys = keys.max(1);
        if keys > MAX_KEYS {
            return err(format!(
                "the device kernels count at most {MAX_KEYS} keys, not {keys}: it runs on the \
                 CPU backends"
            ));
        }
        // Chunks count apart (an executor adds their counts up), so inputs
        // past one binding run in several.
        let mut plan = self.whole_plan();
        plan.whole = false;
        plan.fixed_rows = Some(keys);
        let mut scratch = |name: &str, len| {
            plan.scratch.push(Scratch {
                name: name.into(),
                elem: DType::U32,
                len,
                init: ScratchInit::Undefined,
            });
            (plan.scratch.len() - 1) as u16
        };
        let rows = scratch("key_counts", ScratchLen::PerGroup(keys));
        let rows_out = scratch("keys", ScratchLen::One);
        let (k, bufs) = self.count_keys_kernel(key, keys, rows, rows_out)?;
        push(&mut plan, k, Groups::Spans, bufs);
        let k = self.count_sum_kernel(keys)?;
        push(
            &mut plan,
            k,
            Groups::Spans,
            vec![BufferRef::Scratch(rows), BufferRef::Output(0)],
        );
        plan.readback = Readback::Columns {
            count: Some(rows_out),
        };
        Ok(plan)
    }

    /// `count_keys`: this workgroup's span counted into bins in workgroup
    /// memory, then written as its row; the first workgroup writes the
    /// number of rows the outputs hold.
    fn count_keys_kernel(
        &self,
        key: crate::expr::Value,
        keys: u32,
        rows: u16,
        rows_out: u16,
    ) -> R<(crate::codegen::kernel::Kernel, Vec<BufferRef>)> {
        let mut b = self.kernel("count_keys");
        let mut bufs = Vec::new();
        let inputs = self.input_bindings(&mut b, &mut bufs);
        bufs.extend([BufferRef::Scratch(rows), BufferRef::Scratch(rows_out)]);
        let counts = b.binding("counts", DType::U32, Access::ReadWrite);
        let n = b.binding("keys", DType::U32, Access::ReadWrite);
        let bins = b.shared_atomic("bins", DType::U32, keys);
        let pre = self.preload(&mut b);
        self.clear_bins(&mut b, &pre, bins, keys);
        let (ws, we) = self.span(&mut b, &pre);
        self.thread_loop(&mut b, &pre, ws, we, false, |b, i| {
            let vals = self.element(b, &pre, &inputs, i)?;
            let k = Self::value(&vals, key)?;
            let k = b.binary(BinaryOp::Min, k, u32c(keys - 1));
            let add = |b: &mut KernelBuilder| {
                b.assign(
                    DType::U32,
                    Op::AtomicShared {
                        op: crate::codegen::kernel::AtomicOp::Add,
                        shared: bins,
                        index: k.into(),
                        value: u32c(1),
                    },
                );
            };
            match self.stage.predicate {
                Some(p) => {
                    let keep = Self::value(&vals, p)?;
                    b.if_(keep, add);
                }
                None => add(b),
            }
            Ok(())
        })?;
        self.store_bins(&mut b, &pre, bins, keys, counts);
        let first = b.binary(BinaryOp::Eq, pre.w, u32c(0));
        let lead = b.binary(BinaryOp::Eq, pre.t, u32c(0));
        let both = b.binary(BinaryOp::And, first, lead);
        b.if_(both, |b| b.push(Stmt::Store(n, u32c(0), u32c(keys))));
        Ok((Self::finish(b)?, bufs))
    }

    /// `count_sum`: each key's counts over the workgroups, in 64 bits; the
    /// keys split over the workgroups. Without 64-bit integers (GL) the
    /// sum is kept as two `u32` words with a carry and stored as the
    /// `u64`'s little-endian halves (the output binding seen as words).
    fn count_sum_kernel(&self, keys: u32) -> R<crate::codegen::kernel::Kernel> {
        let mut b = self.kernel("count_sum");
        let rows = b.binding("counts", DType::U32, Access::ReadWrite);
        let wide = self.caps.int64;
        let out = b.binding(
            "out0",
            if wide { DType::U64 } else { DType::U32 },
            Access::ReadWrite,
        );
        let pre = self.preload(&mut b);
        let (ks, ke) = self.split(&mut b, &pre, u32c(keys));
        self.thread_loop(&mut b, &pre, ks, ke, false, |b, d| {
            if wide {
                let acc = b.assign(DType::U64, Op::Copy(Operand::Const(Scalar::U64(0))));
                b.for_(u32c(0), pre.groups, u32c(1), |b, g| {
                    let row = b.binary(BinaryOp::Mul, g, u32c(keys));
                    let at = b.binary(BinaryOp::Add, row, d);
                    let c = b.assign(DType::U32, Op::Load(rows, at.into()));
                    let c = b.assign(DType::U64, Op::Cast(c.into()));
                    b.set(acc, Op::Binary(BinaryOp::Add, acc.into(), c.into()));
                });
                b.push(Stmt::Store(out, d.into(), acc.into()));
            } else {
                let lo = b.assign(DType::U32, Op::Copy(u32c(0)));
                let hi = b.assign(DType::U32, Op::Copy(u32c(0)));
                b.for_(u32c(0), pre.groups, u32c(1), |b, g| {
                    let row = b.binary(BinaryOp::Mul, g, u32c(keys));
                    let at = b.binary(BinaryOp::Add, row, d);
                    let c = b.assign(DType::U32, Op::Load(rows, at.into()));
                    let sum = b.binary(BinaryOp::Add, lo, c);
                    let wrapped = b.binary(BinaryOp::Lt, sum, lo);
                    let carry = b.select(wrapped, u32c(1), u32c(0));
                    b.set(hi, Op::Binary(BinaryOp::Add, hi.into(), carry.into()));
                    b.set(lo, Op::Copy(sum.into()));
                });
                Self::store_u64_halves(b, out, d, lo.into(), hi.into());
            }
            Ok(())
        })?;
        Self::finish(b)
    }

    /// Stores the `u64` of halves `lo`, `hi` at element `at` of a `u64`
    /// column bound as `u32` words (little-endian: the low word first).
    pub(super) fn store_u64_halves(
        b: &mut KernelBuilder,
        out: BindingId,
        at: Local,
        lo: Operand,
        hi: Operand,
    ) {
        let w = b.binary(BinaryOp::Mul, at, u32c(2));
        b.push(Stmt::Store(out, w.into(), lo));
        let w1 = b.binary(BinaryOp::Add, w, u32c(1));
        b.push(Stmt::Store(out, w1.into(), hi));
    }
}
