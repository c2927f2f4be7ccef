//! Typed block kernels: one tight loop per operation over a block of lanes.
//!
//! Every kernel is `#[inline(always)]` so that it is compiled inside its
//! ISA-specific entry points in `isa.rs` (AVX2+FMA or the portable
//! baseline) and vectorized there. Kernels never panic: operands shorter
//! than the output (impossible for validated programs) leave lanes untouched,
//! and the element kernels say so (they return whether they wrote every lane
//! of the output).

use super::lanes::{CastTo, FloatLane, Lane, Num};
use std::mem::MaybeUninit;

/// Lanes of a reduction accumulator: independent partial results, so that
/// float reductions vectorize without reassociating any lane's additions.
pub(crate) const LANES: usize = 32;

/// Lanes per chunk of the element loops: four AVX2 vectors of `f32`.
const CHUNK: usize = 32;

/// An output lane of the element kernels: a register's lane, or a lane of
/// a result column not written yet, which the last instruction of a
/// collect fills in place (`StageRun::store_range`): a copy of every block
/// fewer. Kernels only ever write initialized values through either.
pub(crate) trait Slot<T>: Sized {
    fn put(&mut self, v: T);
}

impl<T> Slot<T> for T {
    #[inline(always)]
    fn put(&mut self, v: T) {
        *self = v;
    }
}

impl<T> Slot<T> for MaybeUninit<T> {
    #[inline(always)]
    fn put(&mut self, v: T) {
        self.write(v);
    }
}

/// An operand of a block instruction: a block of lanes or one scalar.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Op<'a, T> {
    Slice(&'a [T]),
    Splat(T),
}

/// Reads lane `i` of an operand; implemented by slices and by scalars, so
/// that the loops below monomorphize per operand kind.
///
/// The loops walk the output in chunks of [`CHUNK`] lanes, each operand cut
/// to the chunk by `sub` (one bounds check per chunk), then the remainder.
/// A chunk's inner loop has a constant trip count and no bounds checks, so
/// LLVM vectorizes it whole. (A plain `for i in 0..n` over operands cut to
/// `n` keeps a bounds check LLVM cannot prove away, so the loop has two
/// exits and gets a full-vector scalar epilogue: on a 1024-lane block, 32
/// scalar lanes per instruction, which profiles showed taking a quarter of
/// the instruction time of `sum(x * 2 + 1)`.)
trait Src<T>: Copy {
    /// The operand cut to `n` lanes, or `None` when too short.
    fn fit(self, n: usize) -> Option<Self>;
    /// Lane `i` (in bounds after `fit`).
    fn at(self, i: usize) -> T;
    /// Lanes `start..start + len` (in bounds by the caller's loop).
    fn sub(self, start: usize, len: usize) -> Self;
}

#[derive(Copy, Clone)]
struct S<'a, T>(&'a [T]);
#[derive(Copy, Clone)]
struct K<T>(T);

impl<T: Copy> Src<T> for S<'_, T> {
    #[inline(always)]
    fn fit(self, n: usize) -> Option<Self> {
        self.0.get(..n).map(S)
    }
    #[inline(always)]
    fn at(self, i: usize) -> T {
        self.0[i]
    }
    #[inline(always)]
    fn sub(self, start: usize, len: usize) -> Self {
        S(&self.0[start..start + len])
    }
}

/// Lane `i` is `g(x[i], y[i])`: the operation before a fused sum's own,
/// computed in the fold as well (see [`fold_lanes_nested`]).
#[derive(Copy, Clone)]
struct Bin<X, Y, G>(X, Y, G);

impl<T: Copy, X: Src<T>, Y: Src<T>, G: Fn(T, T) -> T + Copy> Src<T> for Bin<X, Y, G> {
    #[inline(always)]
    fn fit(self, n: usize) -> Option<Self> {
        Some(Bin(self.0.fit(n)?, self.1.fit(n)?, self.2))
    }
    #[inline(always)]
    fn at(self, i: usize) -> T {
        (self.2)(self.0.at(i), self.1.at(i))
    }
    #[inline(always)]
    fn sub(self, start: usize, len: usize) -> Self {
        Bin(self.0.sub(start, len), self.1.sub(start, len), self.2)
    }
}

/// Lane `i` is `x[i]` converted to `f64` as Rust `as` converts it: the
/// cast under a sum in `f64` (`mean`, `stats`), folded in the same pass
/// (see [`fold_lanes_cast`]).
#[derive(Copy, Clone)]
struct Cv<'a, A>(&'a [A]);

impl<A: CastTo<f64> + Copy> Src<f64> for Cv<'_, A> {
    #[inline(always)]
    fn fit(self, n: usize) -> Option<Self> {
        self.0.get(..n).map(Cv)
    }
    #[inline(always)]
    fn at(self, i: usize) -> f64 {
        self.0[i].cast_to()
    }
    #[inline(always)]
    fn sub(self, start: usize, len: usize) -> Self {
        Cv(&self.0[start..start + len])
    }
}

impl<T: Copy> Src<T> for K<T> {
    #[inline(always)]
    fn fit(self, _n: usize) -> Option<Self> {
        Some(self)
    }
    #[inline(always)]
    fn at(self, _i: usize) -> T {
        self.0
    }
    #[inline(always)]
    fn sub(self, _start: usize, _len: usize) -> Self {
        self
    }
}

/// `out[i] = f(a[i])`; whether every lane of `out` was written.
#[inline(always)]
pub(crate) fn unary<A: Copy, R, O: Slot<R>>(a: &[A], out: &mut [O], f: impl Fn(A) -> R) -> bool {
    let n = out.len();
    let Some(a) = a.get(..n) else {
        return false;
    };
    for (o, &x) in out.iter_mut().zip(a) {
        o.put(f(x));
    }
    true
}

#[inline(always)]
fn bin_loop<A: Copy, R: Copy + Default, O: Slot<R>, X: Src<A>, Y: Src<A>>(
    x: X,
    y: Y,
    out: &mut [O],
    f: impl Fn(A, A) -> R,
) -> bool {
    let n = out.len();
    let (Some(x), Some(y)) = (x.fit(n), y.fit(n)) else {
        return false;
    };
    let mut oc = out.chunks_exact_mut(CHUNK);
    let mut base = 0;
    for o in &mut oc {
        let (xs, ys) = (x.sub(base, CHUNK), y.sub(base, CHUNK));
        let mut t = [R::default(); CHUNK];
        for (i, t) in t.iter_mut().enumerate() {
            *t = f(xs.at(i), ys.at(i));
        }
        put_chunk(o, &t);
        base += CHUNK;
    }
    for (i, o) in oc.into_remainder().iter_mut().enumerate() {
        o.put(f(x.at(base + i), y.at(base + i)));
    }
    true
}

/// Writes a computed chunk to its place in the output.
#[inline(always)]
fn put_chunk<R: Copy, O: Slot<R>>(out: &mut [O], t: &[R; CHUNK]) {
    for (o, &v) in out.iter_mut().zip(t) {
        o.put(v);
    }
}

/// Writes `v` to every lane of `out`.
#[inline(always)]
fn fill<R: Copy, O: Slot<R>>(out: &mut [O], v: R) {
    for o in out {
        o.put(v);
    }
}

/// `out[i] = f(a[i], b[i])`; whether every lane of `out` was written.
#[inline(always)]
pub(crate) fn binary<A: Copy, R: Copy + Default, O: Slot<R>>(
    a: Op<A>,
    b: Op<A>,
    out: &mut [O],
    f: impl Fn(A, A) -> R,
) -> bool {
    match (a, b) {
        (Op::Slice(a), Op::Slice(b)) => bin_loop(S(a), S(b), out, f),
        (Op::Slice(a), Op::Splat(b)) => bin_loop(S(a), K(b), out, f),
        (Op::Splat(a), Op::Slice(b)) => bin_loop(K(a), S(b), out, f),
        (Op::Splat(a), Op::Splat(b)) => {
            fill(out, f(a, b));
            true
        }
    }
}

#[inline(always)]
fn tern_loop<A: Copy, B: Copy, R: Copy + Default, O: Slot<R>, X: Src<A>, Y: Src<B>, Z: Src<B>>(
    x: X,
    y: Y,
    z: Z,
    out: &mut [O],
    f: impl Fn(A, B, B) -> R,
) -> bool {
    let n = out.len();
    let (Some(x), Some(y), Some(z)) = (x.fit(n), y.fit(n), z.fit(n)) else {
        return false;
    };
    let mut oc = out.chunks_exact_mut(CHUNK);
    let mut base = 0;
    for o in &mut oc {
        let (xs, ys, zs) = (x.sub(base, CHUNK), y.sub(base, CHUNK), z.sub(base, CHUNK));
        let mut t = [R::default(); CHUNK];
        for (i, t) in t.iter_mut().enumerate() {
            *t = f(xs.at(i), ys.at(i), zs.at(i));
        }
        put_chunk(o, &t);
        base += CHUNK;
    }
    for (i, o) in oc.into_remainder().iter_mut().enumerate() {
        o.put(f(x.at(base + i), y.at(base + i), z.at(base + i)));
    }
    true
}

/// `out[i] = f(a[i], b[i], c[i])` where `b` and `c` share a type (select's
/// condition may differ from its values; mul_add uses one type); whether
/// every lane of `out` was written.
#[inline(always)]
pub(crate) fn ternary<A: Copy, B: Copy, R: Copy + Default, O: Slot<R>>(
    a: Op<A>,
    b: Op<B>,
    c: Op<B>,
    out: &mut [O],
    f: impl Fn(A, B, B) -> R,
) -> bool {
    use Op::{Slice as L, Splat as P};
    match (a, b, c) {
        (L(a), L(b), L(c)) => tern_loop(S(a), S(b), S(c), out, f),
        (L(a), L(b), P(c)) => tern_loop(S(a), S(b), K(c), out, f),
        (L(a), P(b), L(c)) => tern_loop(S(a), K(b), S(c), out, f),
        (L(a), P(b), P(c)) => tern_loop(S(a), K(b), K(c), out, f),
        (P(a), L(b), L(c)) => tern_loop(K(a), S(b), S(c), out, f),
        (P(a), L(b), P(c)) => tern_loop(K(a), S(b), K(c), out, f),
        (P(a), P(b), L(c)) => tern_loop(K(a), K(b), S(c), out, f),
        (P(a), P(b), P(c)) => {
            fill(out, f(a, b, c));
            true
        }
    }
}

/// `out[i] = f(a[i], k, c[i])`: an [`Instr::Chain`](super::program::Instr)
/// (`a` a block, `k` its inner operation's uniform, `c` a block or a
/// uniform). Two loops per operation pair, where [`ternary`] has seven.
#[inline(always)]
pub(crate) fn chain<T: Copy + Default, O: Slot<T>>(
    a: &[T],
    k: T,
    c: Op<T>,
    out: &mut [O],
    f: impl Fn(T, T, T) -> T,
) -> bool {
    match c {
        Op::Slice(c) => tern_loop(S(a), K(k), S(c), out, f),
        Op::Splat(c) => tern_loop(S(a), K(k), K(c), out, f),
    }
}

/// [`chain`] into its own block operand: `x[i] = f(x[i], k, c[i])`.
#[inline(always)]
pub(crate) fn chain_in_place<T: Copy>(
    x: &mut [T],
    k: T,
    c: Op<T>,
    f: impl Fn(T, T, T) -> T,
) -> bool {
    match c {
        Op::Slice(c) => {
            if c.len() < x.len() {
                return false;
            }
            for (x, &c) in x.iter_mut().zip(c) {
                *x = f(*x, k, c);
            }
        }
        Op::Splat(c) => {
            for x in x.iter_mut() {
                *x = f(*x, k, c);
            }
        }
    }
    true
}

/// `out[i] = base + i` (wrapping).
#[inline(always)]
pub(crate) fn iota<O: Slot<u64>>(out: &mut [O], base: u64) {
    for (i, o) in out.iter_mut().enumerate() {
        o.put(base.wrapping_add(i as u64));
    }
}

/// `x^n` for one value, by exactly the multiply sequence of
/// `eval::pow_unsigned` (then `1 / p` for a negative `n`).
#[inline(always)]
pub(crate) fn powi_one<T: Num>(x: T, n: i32) -> T {
    let mut e = n.unsigned_abs();
    let mut result = T::ONE;
    let mut base = x;
    let mut first = true;
    while e > 0 {
        if e & 1 == 1 {
            result = if first { base } else { T::n_mul(result, base) };
            first = false;
        }
        e >>= 1;
        if e > 0 {
            base = T::n_mul(base, base);
        }
    }
    if n < 0 {
        T::n_div(T::ONE, result)
    } else {
        result
    }
}

/// `out[i] = a[i]^n`: the exponent's bit loop runs once per chunk of 16
/// lanes, so each multiply step is a vector operation. Whether every lane
/// of `out` was written.
#[inline(always)]
pub(crate) fn powi<T: Num, O: Slot<T>>(a: &[T], n: i32, out: &mut [O]) -> bool {
    const C: usize = 16;
    let Some(a) = a.get(..out.len()) else {
        return false;
    };
    let mut oc = out.chunks_exact_mut(C);
    let mut ac = a.chunks_exact(C);
    for (o, x) in (&mut oc).zip(&mut ac) {
        let mut base = [T::ZERO; C];
        base.copy_from_slice(x);
        let mut result = [T::ONE; C];
        let mut e = n.unsigned_abs();
        let mut first = true;
        while e > 0 {
            if e & 1 == 1 {
                if first {
                    result = base;
                } else {
                    for j in 0..C {
                        result[j] = T::n_mul(result[j], base[j]);
                    }
                }
                first = false;
            }
            e >>= 1;
            if e > 0 {
                for b in base.iter_mut() {
                    *b = T::n_mul(*b, *b);
                }
            }
        }
        if n < 0 {
            for r in result.iter_mut() {
                *r = T::n_div(T::ONE, *r);
            }
        }
        for (o, &r) in o.iter_mut().zip(&result) {
            o.put(r);
        }
    }
    for (o, &x) in oc.into_remainder().iter_mut().zip(ac.remainder()) {
        o.put(powi_one(x, n));
    }
    true
}

/// Which lanes of a block a fold keeps; implemented by "all", by a mask
/// register and by a comparison evaluated inside the fold, so that the
/// fold loop monomorphizes per kind and never branches on it.
pub(crate) trait Keep: Copy {
    /// The mask cut to `n` lanes, or `None` when too short.
    fn fit(self, n: usize) -> Option<Self>;
    /// Lanes `start..start + len` (in bounds by the caller's loop).
    fn sub(self, start: usize, len: usize) -> Self;
    /// Whether lane `i` is kept (in bounds after `fit`).
    fn keep(self, i: usize) -> bool;
}

/// Every lane is kept.
#[derive(Copy, Clone)]
pub(crate) struct KeepAll;

/// The lanes whose mask register lane is true.
#[derive(Copy, Clone)]
pub(crate) struct KeepMask<'a>(pub(crate) &'a [bool]);

/// The lanes `i` where `cmp(x[i], k)`: a predicate comparing a column with a
/// uniform, evaluated by the fold itself instead of a mask pass.
#[derive(Copy, Clone)]
pub(crate) struct KeepCmp<'a, T, F> {
    pub(crate) x: &'a [T],
    pub(crate) k: T,
    pub(crate) cmp: F,
}

impl Keep for KeepAll {
    #[inline(always)]
    fn fit(self, _n: usize) -> Option<Self> {
        Some(self)
    }
    #[inline(always)]
    fn sub(self, _start: usize, _len: usize) -> Self {
        self
    }
    #[inline(always)]
    fn keep(self, _i: usize) -> bool {
        true
    }
}

impl Keep for KeepMask<'_> {
    #[inline(always)]
    fn fit(self, n: usize) -> Option<Self> {
        self.0.get(..n).map(KeepMask)
    }
    #[inline(always)]
    fn sub(self, start: usize, len: usize) -> Self {
        KeepMask(&self.0[start..start + len])
    }
    #[inline(always)]
    fn keep(self, i: usize) -> bool {
        self.0[i]
    }
}

impl<T: Copy, F: Fn(T, T) -> bool + Copy> Keep for KeepCmp<'_, T, F> {
    #[inline(always)]
    fn fit(self, n: usize) -> Option<Self> {
        let x = self.x.get(..n)?;
        Some(KeepCmp { x, ..self })
    }
    #[inline(always)]
    fn sub(self, start: usize, len: usize) -> Self {
        KeepCmp {
            x: &self.x[start..start + len],
            ..self
        }
    }
    #[inline(always)]
    fn keep(self, i: usize) -> bool {
        (self.cmp)(self.x[i], self.k)
    }
}

/// Width of the lane groups of the folds: one AVX2 vector of `f32`.
const W: usize = 8;

/// The accumulator lanes as groups of `W` (no `array::from_fn`: its
/// closure is not reliably inlined).
#[inline(always)]
fn groups<T: Copy>(acc: &[T; LANES]) -> [[T; W]; LANES / W] {
    let mut a = [[acc[0]; W]; LANES / W];
    for (v, g) in a.iter_mut().enumerate() {
        g.copy_from_slice(&acc[v * W..v * W + W]);
    }
    a
}

/// Folds a block into `LANES` accumulators: lane `j` takes positions
/// `j, j + LANES, ...` of the leaf, in order. A position that `keep` drops
/// folds `id` (the identity of `f`: `0` for sums, NaN or the extreme for
/// min/max), which leaves the lane exactly as skipping it would.
#[inline(always)]
pub(crate) fn fold_lanes<T: Num>(
    acc: &mut [T; LANES],
    x: &[T],
    keep: impl Keep,
    id: T,
    f: impl Fn(T, T) -> T + Copy,
) {
    fold_src(acc, S(x), K(id), x.len(), keep, id, |a, _| a, f);
}

/// [`fold_lanes`] of `g(a[i], b[i])` without materializing it: the last
/// operation of a column that only a sum reads, fused into the sum. Gives
/// exactly the bits of computing the column first.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn fold_lanes_bin<T: Num>(
    acc: &mut [T; LANES],
    a: Op<T>,
    b: Op<T>,
    n: usize,
    keep: impl Keep,
    id: T,
    g: impl Fn(T, T) -> T + Copy,
    f: impl Fn(T, T) -> T + Copy,
) {
    match (a, b) {
        (Op::Slice(a), Op::Slice(b)) => fold_src(acc, S(a), S(b), n, keep, id, g, f),
        (Op::Slice(a), Op::Splat(b)) => fold_src(acc, S(a), K(b), n, keep, id, g, f),
        (Op::Splat(a), Op::Slice(b)) => fold_src(acc, K(a), S(b), n, keep, id, g, f),
        (Op::Splat(a), Op::Splat(b)) => fold_src(acc, K(a), K(b), n, keep, id, g, f),
    }
}

/// [`fold_lanes`] of `x[i] as f64` into `f64` lanes: a sum of a cast
/// that nothing else reads (a `mean` or `stats` of `f32` or integers),
/// folded without writing the cast's register (8 KiB a block). Gives
/// exactly the bits of casting the block first.
#[inline(always)]
pub(crate) fn fold_lanes_cast<A: CastTo<f64> + Copy>(
    acc: &mut [f64; LANES],
    x: &[A],
    keep: impl Keep,
) {
    fold_src(
        acc,
        Cv(x),
        K(0.0),
        x.len(),
        keep,
        0.0,
        |a, _| a,
        <f64 as Num>::n_add,
    );
}

/// [`fold_lanes`] of `g(h(a[i], b[i]), c)`: a fused sum whose first
/// operand is itself an operation read by nothing else (`x * 2 + 1`), so
/// that the whole column is computed in the fold and the stage reads its
/// input in one pass. `a` is a block (a validated program never fuses a
/// uniform there; a uniform `a` leaves the lanes untouched).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn fold_lanes_nested<T: Num>(
    acc: &mut [T; LANES],
    a: Op<T>,
    b: Op<T>,
    h: impl Fn(T, T) -> T + Copy,
    c: T,
    n: usize,
    keep: impl Keep,
    id: T,
    g: impl Fn(T, T) -> T + Copy,
    f: impl Fn(T, T) -> T + Copy,
) {
    match (a, b) {
        (Op::Slice(a), Op::Slice(b)) => fold_src(acc, Bin(S(a), S(b), h), K(c), n, keep, id, g, f),
        (Op::Slice(a), Op::Splat(b)) => fold_src(acc, Bin(S(a), K(b), h), K(c), n, keep, id, g, f),
        (Op::Splat(_), _) => {}
    }
}

/// The lanes are held as groups of `W` and a dropped lane is replaced by
/// bit selection, the shapes LLVM's SLP vectorizer turns into one vector
/// operation per group.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane loops over two arrays, written for the vectorizer
fn fold_src<T: Num, X: Src<T>, Y: Src<T>, M: Keep>(
    acc: &mut [T; LANES],
    x: X,
    y: Y,
    n: usize,
    keep: M,
    id: T,
    g: impl Fn(T, T) -> T + Copy,
    f: impl Fn(T, T) -> T + Copy,
) {
    let (Some(x), Some(y), Some(keep)) = (x.fit(n), y.fit(n), keep.fit(n)) else {
        return;
    };
    let mut a = groups(acc);
    let full = n - n % LANES;
    let mut base = 0;
    while base < full {
        let (xs, ys, ks) = (
            x.sub(base, LANES),
            y.sub(base, LANES),
            keep.sub(base, LANES),
        );
        for (v, gr) in a.iter_mut().enumerate() {
            for l in 0..W {
                let e = g(xs.at(v * W + l), ys.at(v * W + l));
                gr[l] = f(gr[l], T::n_sel(ks.keep(v * W + l), e, id));
            }
        }
        base += LANES;
    }
    for (v, gr) in a.iter().enumerate() {
        acc[v * W..v * W + W].copy_from_slice(gr);
    }
    for i in full..n {
        acc[i - full] = f(
            acc[i - full],
            T::n_sel(keep.keep(i), g(x.at(i), y.at(i)), id),
        );
    }
}

/// Reduces accumulator lanes by a fixed pairwise tree.
#[inline(always)]
pub(crate) fn reduce_lanes<T: Copy>(mut a: [T; LANES], f: impl Fn(T, T) -> T) -> T {
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            a[j] = f(a[j], a[j + w]);
        }
    }
    a[0]
}

/// Surviving positions of a block.
#[inline(always)]
pub(crate) fn count(n: usize, mask: Option<&[bool]>) -> u64 {
    match mask {
        None => n as u64,
        Some(m) => m.iter().map(|&b| b as u64).sum(),
    }
}

/// A lane type read as `f64` by [`moments`].
pub(crate) trait ToF64: Copy {
    fn to_f64(self) -> f64;
}

macro_rules! to_f64 {
    ($($t:ty),*) => {$(
        impl ToF64 for $t {
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
to_f64!(i32, u32, i64, u64, f32, f64);

/// Independent `f64` accumulators of the two-pass sums (`sum_f64`).
const MW: usize = 8;

/// Independent accumulators of each of [`shifted_sums`]' two sums: 16,
/// four AVX2 registers each (eight for both), so neither the adds'
/// latency nor a spill bounds the loop.
const SW: usize = 16;

/// `Σ f(x, keep)` over a block in `MW` interleaved `f64` accumulators
/// (vectorizable: no reassociation of one chain), summed pairwise.
#[inline(always)]
fn sum_f64<T: ToF64>(x: &[T], mask: Option<&[bool]>, f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; MW];
    let mut tail = 0.0;
    match mask {
        None => {
            let mut c = x.chunks_exact(MW);
            for ch in &mut c {
                for j in 0..MW {
                    acc[j] += f(ch[j].to_f64());
                }
            }
            for &v in c.remainder() {
                tail += f(v.to_f64());
            }
        }
        Some(m) => {
            let mut c = x.chunks_exact(MW);
            let mut k = m.chunks_exact(MW);
            for (ch, km) in (&mut c).zip(&mut k) {
                for j in 0..MW {
                    let v = f(ch[j].to_f64());
                    acc[j] += if km[j] { v } else { 0.0 };
                }
            }
            for (&v, &keep) in c.remainder().iter().zip(k.remainder()) {
                if keep {
                    tail += f(v.to_f64());
                }
            }
        }
    }
    pairwise(&mut acc) + tail
}

/// The sum of `acc`'s values, in halves (pairwise; `acc` is left
/// scrambled).
#[inline(always)]
fn pairwise<const N: usize>(acc: &mut [f64; N]) -> f64 {
    let mut w = N;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    acc[0]
}

/// `(Σ (x - c), Σ (x - c)²)` over a block's surviving values, in one
/// read: `SW` interleaved accumulators each, summed pairwise.
#[inline(always)]
fn shifted_sums<T: ToF64>(x: &[T], mask: Option<&[bool]>, c: f64) -> (f64, f64) {
    let mut s1 = [0.0f64; SW];
    let mut s2 = [0.0f64; SW];
    let (mut t1, mut t2) = (0.0, 0.0);
    match mask {
        None => {
            let mut ch = x.chunks_exact(SW);
            for v in &mut ch {
                for j in 0..SW {
                    let d = v[j].to_f64() - c;
                    s1[j] += d;
                    s2[j] += d * d;
                }
            }
            for &v in ch.remainder() {
                let d = v.to_f64() - c;
                t1 += d;
                t2 += d * d;
            }
        }
        Some(m) => {
            let mut ch = x.chunks_exact(SW);
            let mut k = m.chunks_exact(SW);
            for (v, km) in (&mut ch).zip(&mut k) {
                for j in 0..SW {
                    let d = if km[j] { v[j].to_f64() - c } else { 0.0 };
                    s1[j] += d;
                    s2[j] += d * d;
                }
            }
            for (&v, &keep) in ch.remainder().iter().zip(k.remainder()) {
                if keep {
                    let d = v.to_f64() - c;
                    t1 += d;
                    t2 += d * d;
                }
            }
        }
    }
    (pairwise(&mut s1) + t1, pairwise(&mut s2) + t2)
}

/// The [`Moments`] of a block's surviving values, in one read of the block:
/// about `c`, the block's first survivor, `M2 = Σ (x - c)² - (Σ (x - c))² / n`
/// in `f64`. The subtraction cancels at most `log2(n + 1)` bits, however
/// far the data lie from zero: `c` is one of the values, so
/// `n (mean - c)² ≤ n · M2` and `Σ (x - c)² = M2 + n (mean - c)² ≤ (n + 1) M2`
/// (with 1,024-value blocks, at worst ~1e-11 relative; on data near its
/// own mean, as `1e8 + noise`, a bit or two). Blocks merge with Chan's
/// formula, so nothing cancels across blocks either. Reading each value
/// once keeps the memory streaming: the two-pass form (`Σ x`, then
/// `Σ (x - mean)²` over the block in L1) left the bus idle during its
/// second pass and ran at ~0.6x of a sum's rate. A block whose figures
/// overflow (or hold a NaN or an infinity) is redone in two passes, which
/// keep an overflow as `inf` and give NaN as before.
///
/// [`Moments`]: crate::semantics::Moments
#[inline(always)]
pub(crate) fn moments<T: ToF64>(x: &[T], mask: Option<&[bool]>) -> crate::semantics::Moments {
    use crate::semantics::Moments;
    let mask = mask.map(|m| &m[..x.len()]);
    let first = match mask {
        None => (!x.is_empty()).then_some(0),
        Some(m) => m.iter().position(|&b| b),
    };
    let Some(first) = first else {
        return Moments::EMPTY;
    };
    let n = match mask {
        None => x.len() as u64,
        Some(m) => m.iter().map(|&b| b as u64).sum(),
    };
    let c = x[first].to_f64();
    let (s1, s2) = shifted_sums(x, mask, c);
    let nf = n as f64;
    let m2 = s2 - s1 * (s1 / nf);
    if m2.is_finite() {
        // Rounding may leave a hair below zero when every value is close.
        return Moments {
            n,
            mean: c + s1 / nf,
            m2: if m2 < 0.0 { 0.0 } else { m2 },
        };
    }
    let sum = sum_f64(x, mask, |v| v);
    Moments::of_block(n, sum, |mean| {
        sum_f64(x, mask, |v| {
            let d = v - mean;
            d * d
        })
    })
}

/// A run's values of a histogram key's uniforms (`program::Bins`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct BinParams<T> {
    pub(crate) lo: T,
    pub(crate) scale: T,
    pub(crate) hi: T,
    pub(crate) lo_cmp: T,
    pub(crate) last: i32,
    pub(crate) below: i32,
    pub(crate) above: i32,
    pub(crate) nan: i32,
}

/// A histogram's key, `program::Bins`'s expression with each operation
/// rounded as written (no FMA) and the cast as Rust's `as`: the key the
/// block instructions it stands for compute.
#[inline(always)]
pub(crate) fn bin_key<T: FloatLane + CastTo<i32>>(v: T, p: &BinParams<T>) -> u32 {
    let t = T::f_floor(T::n_mul(T::n_sub(v, p.lo), p.scale));
    let inside = t.cast_to().min(p.last);
    let k = if v >= p.hi { p.above } else { inside };
    let k = if v < p.lo_cmp { p.below } else { k };
    #[allow(clippy::eq_op)]
    let k = if v != v { p.nan } else { k };
    k as u32
}

/// A float lane a histogram's key is computed from ([`bin_keys`]).
pub(crate) trait BinLane: FloatLane + CastTo<i32> {
    /// `i` as this type, if exactly.
    fn exact(i: i32) -> Option<Self>;
    fn finite(self) -> bool;
    /// `self` truncated, for a value known to be in `0..=i32::MAX`.
    ///
    /// # Safety
    /// `self` is not NaN and truncates into `i32`'s range.
    unsafe fn truncate(self) -> i32;
}

macro_rules! bin_lane {
    ($($t:ty),*) => {$(
        impl BinLane for $t {
            #[inline(always)]
            fn exact(i: i32) -> Option<$t> {
                let f = i as $t;
                (f as i32 == i).then_some(f)
            }
            #[inline(always)]
            fn finite(self) -> bool {
                self.is_finite()
            }
            #[inline(always)]
            unsafe fn truncate(self) -> i32 {
                // SAFETY: the caller's promise.
                unsafe { self.to_int_unchecked::<i32>() }
            }
        }
    )*};
}
bin_lane!(f32, f64);

/// A histogram's key as a block holds it: `u16` where every key fits
/// (half the bytes to store and load back), `u32` otherwise.
pub(crate) trait KeyLane: Copy + Default {
    fn of(k: u32) -> Self;
    fn index(self) -> usize;
}

impl KeyLane for u16 {
    #[inline(always)]
    fn of(k: u32) -> u16 {
        k as u16
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

impl KeyLane for u32 {
    #[inline(always)]
    fn of(k: u32) -> u32 {
        k
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// A histogram's keys ([`bin_key`]) as a kernel computes them: each at
/// most `last_key` (a larger key counts in the last slot, as
/// [`count_keys`] counts it), in vector registers.
///
/// The bounds a histogram is asked for (`lo` finite, a positive finite
/// `scale`, `lo_cmp >= lo` and a last bin from 0 up to what the float holds
/// exactly) take a shorter form: every value that no compare sends to a
/// slot of its own has `(v - lo) * scale` at or above zero, so clamping it
/// into `0..=last` before the cast gives what flooring, the saturating
/// cast and the `min`s give, with no floor and no saturation
/// (`bin_keys_agree_with_the_key_expression` checks both forms against
/// [`bin_key`]). Other bounds (which only a program written by hand has)
/// take the general form.
#[derive(Copy, Clone)]
struct BinKeys<T> {
    p: BinParams<T>,
    last_key: u32,
    /// The short form's last bin as `T`, and its slots clamped to
    /// `last_key`; `None`: the general form.
    short: Option<(T, [i32; 3])>,
}

impl<T: BinLane> BinKeys<T> {
    #[inline(always)]
    fn new(p: BinParams<T>, last_key: u32) -> BinKeys<T> {
        let last = (p.last.max(0) as u32).min(last_key);
        let bounds = p.last >= 0
            && p.lo.finite()
            && p.scale.finite()
            && p.scale > T::ZERO
            && p.lo_cmp >= p.lo;
        let slot = |k: i32| (k as u32).min(last_key) as i32;
        let short = T::exact(last as i32)
            .filter(|_| bounds)
            .map(|last_t| (last_t, [slot(p.below), slot(p.above), slot(p.nan)]));
        BinKeys { p, last_key, short }
    }

    /// The keys of `x` into `out`.
    #[inline(always)]
    fn keys<K: KeyLane>(&self, x: &[T], out: &mut [K]) {
        let p = &self.p;
        let Some((last_t, [below, above, nan])) = self.short else {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = K::of(bin_key(v, p).min(self.last_key));
            }
            return;
        };
        for (o, &v) in out.iter_mut().zip(x) {
            let t = T::n_mul(T::n_sub(v, p.lo), p.scale);
            // `max`/`min` by compare, as the vector instructions do: NaN
            // becomes 0 (its key is the NaN slot's below).
            let t = if t > T::ZERO { t } else { T::ZERO };
            let t = if t < last_t { t } else { last_t };
            // SAFETY: `t` is in `0..=last`, not NaN, and `last` is an `i32`.
            let inside = unsafe { t.truncate() };
            let k = if v >= p.hi { above } else { inside };
            let k = if v < p.lo_cmp { below } else { k };
            #[allow(clippy::eq_op)]
            let k = if v != v { nan } else { k };
            *o = K::of(k as u32);
        }
    }
}

/// The histogram keys of `x` ([`bin_key`]) into `out`, each at most
/// `last_key` ([`BinKeys`]): the keys of a block for [`count_bin_keys`].
/// `K` holds every key up to `last_key` (the caller's choice).
#[inline(always)]
pub(crate) fn bin_keys<T: BinLane, K: KeyLane>(
    x: &[T],
    out: &mut [K],
    p: BinParams<T>,
    last_key: u32,
) {
    BinKeys::new(p, last_key).keys(x, out)
}

/// Sub-counts per key that [`count_keys`] spreads increments over.
pub(crate) const SUB_COUNTS: usize = 4;

/// Sub-count arrays of a histogram's counts ([`count_bin_keys`]):
/// more than a key's [`SUB_COUNTS`], as its counts are few (a histogram's
/// bins): the 259 counts of 256 bins in eight arrays touch 8 KiB of the
/// core's first cache (of the 16.5 KiB the arrays take, [`bin_stride`]).
pub(crate) const BIN_SUB_COUNTS: usize = 8;

/// The positions from which a histogram's counts take [`BIN_SUB_COUNTS`]
/// arrays of [`bin_stride`] ([`count_bin_keys`]' `wide`) rather than
/// [`SUB_COUNTS`] arrays of its keys: 64 blocks, where the wide arrays'
/// clearing and summing (~0.3 µs for 256 bins at 10^3 values) are a few
/// percent of the count.
pub(crate) const WIDE_BIN_COUNTS: usize = 1 << 16;

/// Keys [`increments`] counts between two of its prefetch hints.
const GROUP: usize = 32;

/// Adds one to the count of `key` for every surviving position (a key past
/// the end counts in the last slot). `counts` holds [`SUB_COUNTS`] arrays
/// of `counts.len() / SUB_COUNTS` keys, and position `j` counts in array
/// `j % SUB_COUNTS`: runs of equal keys then increment different memory,
/// not one counter through store-to-load forwarding. The caller sums the
/// arrays, in time to keep them from wrapping (`u32`: half the bytes of
/// `u64` counts in the core's first cache).
#[inline(always)]
pub(crate) fn count_keys(counts: &mut [u32], keys: &[u32], mask: Option<&[bool]>) {
    increments::<u32, SUB_COUNTS, false>(counts, keys, usize::MAX, mask, &[])
}

/// [`count_keys`] of a histogram's keys (from [`bin_keys`]: each at most
/// `last_key`), over [`SUB_COUNTS`] arrays or, `wide`, [`BIN_SUB_COUNTS`]
/// (each `counts.len()` over their number long). Where wide arrays have
/// [`bin_stride`]'s room, a key goes through a mask (a larger key would
/// count in a wrong slot, never outside the arrays); otherwise it is
/// clamped to `last_key`.
///
/// `ahead` is memory the next block will read (its input): the loop asks
/// the core to bring it into its first cache, one line per group of
/// increments, spread over the block. The increments use no memory
/// bandwidth and the key kernel that follows waits on nothing else, so
/// without the hints the two take turns; with them the next block's
/// loads travel while this one counts (a 256-bin histogram of 10^7 `f32`
/// on one core: `docs/performance.md`, "Histograms count while the next
/// block loads").
#[inline(always)]
pub(crate) fn count_bin_keys<K: KeyLane>(
    counts: &mut [u32],
    keys: &[K],
    last_key: u32,
    wide: bool,
    mask: Option<&[bool]>,
    ahead: &[u8],
) {
    let keys_n = last_key as usize + 1;
    debug_assert!(
        keys.iter().all(|k| k.index() < keys_n),
        "a key past {last_key}"
    );
    if !wide {
        increments::<K, SUB_COUNTS, false>(counts, keys, keys_n, mask, ahead)
    } else if keys_n.next_power_of_two() <= counts.len() / BIN_SUB_COUNTS {
        increments::<K, BIN_SUB_COUNTS, true>(counts, keys, keys_n, mask, ahead)
    } else {
        increments::<K, BIN_SUB_COUNTS, false>(counts, keys, keys_n, mask, ahead)
    }
}

/// The length of each of a histogram's sub-count arrays for `keys` keys:
/// room for [`count_bin_keys`] to mask its keys to the power of two at or
/// above `keys` (an `and` where a clamp is a compare and a move, per
/// increment), and one line more, so that the arrays do not start a
/// multiple of 4 KiB apart (where the core would take the same counter of
/// two arrays for one).
pub(crate) fn bin_stride(keys: usize) -> usize {
    keys.next_power_of_two() + LINE / 4
}

/// The loop of [`count_keys`] and [`count_bin_keys`], over `W` arrays
/// (`MASKED`: [`Tally`]'s).
#[inline(always)]
fn increments<K: KeyLane, const W: usize, const MASKED: bool>(
    counts: &mut [u32],
    keys: &[K],
    bound: usize,
    mask: Option<&[bool]>,
    ahead: &[u8],
) {
    let mut tally = Tally::<W, MASKED>::new(counts, bound);
    let mut hints = hints(ahead, keys.len());
    match mask {
        None => {
            let mut ch = keys.chunks_exact(GROUP);
            for g in &mut ch {
                if let Some(h) = hints.next() {
                    prefetch(h);
                }
                tally.add_all(g);
            }
            tally.add_all(ch.remainder());
        }
        Some(m) => {
            let mut ch = keys.chunks_exact(GROUP);
            let mut mk = m.chunks_exact(GROUP);
            for (g, gm) in (&mut ch).zip(&mut mk) {
                if let Some(h) = hints.next() {
                    prefetch(h);
                }
                tally.add_kept(g, gm);
            }
            tally.add_kept(ch.remainder(), mk.remainder());
        }
    }
}

/// The increments of [`increments`]: `W` arrays of sub-counts in one
/// slice, each its length over `W`. A key at or past `keys` counts in
/// slot `keys - 1`; `MASKED`, keys are known to be below `keys` and go
/// through a mask instead of that clamp (the mask keeps a wrong key inside
/// the arrays, not its count right).
struct Tally<'a, const W: usize, const MASKED: bool> {
    counts: &'a mut [u32],
    /// Slots per array.
    stride: usize,
    /// The last slot a key counts in, below `stride`.
    last: usize,
    /// `MASKED`: one less than the power of two at or above `keys`, below
    /// `stride`.
    mask: usize,
}

impl<'a, const W: usize, const MASKED: bool> Tally<'a, W, MASKED> {
    /// Nothing counts when `counts` is shorter than `W`, `keys` is zero,
    /// or (`MASKED`, which its caller checks first) the mask would reach
    /// past an array.
    #[inline(always)]
    fn new(counts: &'a mut [u32], keys: usize) -> Tally<'a, W, MASKED> {
        // `W * stride <= counts.len()` by this division.
        let stride = counts.len() / W;
        let last = keys.min(stride).checked_sub(1);
        let mask = last.map_or(0, |l| (l + 1).next_power_of_two() - 1);
        let (stride, last) = match last {
            Some(last) if !MASKED || mask < stride => (stride, last),
            _ => (0, 0),
        };
        Tally {
            counts,
            stride,
            last,
            mask,
        }
    }

    /// Adds `by` to key `k`'s count in array `j % W`.
    #[inline(always)]
    fn add<K: KeyLane>(&mut self, j: usize, k: K, by: u32) {
        if self.stride == 0 {
            return;
        }
        let slot = if MASKED {
            k.index() & self.mask
        } else {
            k.index().min(self.last)
        };
        let at = (j % W) * self.stride + slot;
        // SAFETY: `j % W < W` and the slot is at most `last` or `mask`,
        // each below `stride`, so `at` is below `W * stride <=
        // counts.len()` (`new`). (Indexing would check each of the `W`
        // arrays' bounds, which do not fit in registers with the arrays:
        // their loads from the stack cost as much as the increments.)
        unsafe { *self.counts.get_unchecked_mut(at) += by };
    }

    /// One for each of `keys`, key `j` in array `j % W`.
    #[inline(always)]
    fn add_all<K: KeyLane>(&mut self, keys: &[K]) {
        let mut ch = keys.chunks_exact(W);
        for g in &mut ch {
            for (j, &k) in g.iter().enumerate() {
                self.add(j, k, 1);
            }
        }
        for (j, &k) in ch.remainder().iter().enumerate() {
            self.add(j, k, 1);
        }
    }

    /// [`Tally::add_all`] of the keys whose `keep` is true.
    #[inline(always)]
    fn add_kept<K: KeyLane>(&mut self, keys: &[K], keep: &[bool]) {
        for (j, (&k, &m)) in keys.iter().zip(keep).enumerate() {
            self.add(j, k, m as u32);
        }
    }
}

/// `ahead` in whole lines, spread over the groups of `n` positions: the
/// prefetch hints of one group after another.
#[inline(always)]
fn hints(ahead: &[u8], n: usize) -> std::slice::Chunks<'_, u8> {
    let groups = (n / GROUP).max(1);
    let share = ahead
        .len()
        .div_ceil(groups)
        .next_multiple_of(LINE)
        .max(LINE);
    ahead.chunks(share)
}

/// Bytes one prefetch hint brings in: a cache line.
const LINE: usize = 64;

/// Hints that the cache lines of `bytes` will be read soon. A hint only:
/// it cannot fault and changes nothing the program sees.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(LINE) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86-64's baseline, and a prefetch of any
        // address (here inside a live slice) neither faults nor writes.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Whether a surviving lane is true.
#[inline(always)]
pub(crate) fn any(x: &[bool], mask: Option<&[bool]>) -> bool {
    match mask {
        None => x.iter().fold(false, |a, &b| a | b),
        Some(m) => x.iter().zip(m).fold(false, |a, (&b, &k)| a | (b & k)),
    }
}

/// Whether every surviving lane is true.
#[inline(always)]
pub(crate) fn all(x: &[bool], mask: Option<&[bool]>) -> bool {
    match mask {
        None => x.iter().fold(true, |a, &b| a & b),
        Some(m) => x.iter().zip(m).fold(true, |a, (&b, &k)| a & (b | !k)),
    }
}

/// Running state of an arg-extremum: the best value so far and its position.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ArgState<T> {
    pub(crate) have: bool,
    pub(crate) best: T,
    pub(crate) pos: u64,
}

/// Updates an arg-extremum with a block starting at position `base`: a lane
/// replaces the best only when strictly `better` and not NaN, so the first
/// extremum wins.
#[inline(always)]
pub(crate) fn arg<T: Lane>(
    st: &mut ArgState<T>,
    x: &[T],
    mask: Option<&[bool]>,
    base: u64,
    better: impl Fn(T, T) -> bool,
) {
    let mut s = *st;
    for (i, &v) in x.iter().enumerate() {
        let live = match mask {
            Some(m) => m.get(i).copied().unwrap_or(false),
            None => true,
        };
        if live && !v.is_nan() && (!s.have || better(v, s.best)) {
            s = ArgState {
                have: true,
                best: v,
                pos: base.wrapping_add(i as u64),
            };
        }
    }
    *st = s;
}

/// Copies a block into its place in the output: a `memcpy`, whose own
/// dispatch uses the widest stores this CPU has (an element loop here ran
/// at the build's baseline, SSE2, as `store_range` is not ISA-specific).
#[inline(always)]
pub(crate) fn store<T: Copy>(out: &mut [MaybeUninit<T>], x: &[T]) {
    let n = out.len().min(x.len());
    // SAFETY: `n` elements fit both; a window of the output never overlaps
    // a block register.
    unsafe { std::ptr::copy_nonoverlapping(x.as_ptr(), out.as_mut_ptr().cast::<T>(), n) };
}

/// Fills `out` with one value.
#[inline(always)]
pub(crate) fn splat<T: Copy, O: Slot<T>>(out: &mut [O], v: T) {
    fill(out, v);
}

/// Writes the positions of the true lanes of `mask` to the front of `idx`,
/// branch-free, and returns how many there are.
#[inline(always)]
pub(crate) fn survivors(mask: &[bool], idx: &mut [u32]) -> usize {
    let m = &mask[..mask.len().min(idx.len())];
    let mut c = 0usize;
    for (i, &k) in m.iter().enumerate() {
        // c <= i < idx.len(): always in bounds.
        idx[c] = i as u32;
        c += k as usize;
    }
    c
}

/// Appends the lanes of `x` at positions `idx` to `out`, in order.
#[inline(always)]
pub(crate) fn gather_push<T: Copy + Default>(out: &mut Vec<T>, idx: &[u32], x: &[T]) {
    out.extend(
        idx.iter()
            .map(|&i| x.get(i as usize).copied().unwrap_or_default()),
    );
}

/// Writes the lanes of `x` at positions `idx` to the front of `out`.
#[inline(always)]
pub(crate) fn gather_into<T: Copy + Default>(out: &mut [MaybeUninit<T>], idx: &[u32], x: &[T]) {
    for (o, &i) in out.iter_mut().zip(idx) {
        o.write(x.get(i as usize).copied().unwrap_or_default());
    }
}
