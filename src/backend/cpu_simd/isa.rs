//! The instruction set the block loops are compiled for, and the kernels'
//! entry points per instruction set.
//!
//! Every entry point here is one small function per instantiation (kernel,
//! lane types, operation, output kind): the kernel's loop compiled for the
//! build's baseline, and on x86-64 the same loop compiled again with
//! AVX2+FMA in a `#[target_feature]` twin, chosen at run time by [`Isa`].
//! The block interpreter (`exec.rs`) is plain code that calls them once per
//! block and instruction.
//!
//! A few kernels also have an AVX-512 twin (the `wide` entries): the
//! one-pass kernels that run out of instructions before memory runs out of
//! bandwidth (the variance's moments, a histogram's keys). Each twin is
//! the same loop over the same lanes, only in registers twice as wide, so
//! it gives the same bits as the others (each accumulator lane sums the
//! same values in the same order; the tests compare every instruction set
//! bit for bit). Every other kernel runs its AVX2 twin on such a CPU:
//! the memory-bound ones would gain nothing, and a third copy of each
//! would cost build time.
//!
//! Why per kernel and not per interpreter: the interpreter used to be
//! inlined whole into two ISA-specific entry points, and every kernel of
//! every operation and lane type with it. Those functions were 1.7 million
//! lines of LLVM IR each (91% of the crate's IR in six functions), which
//! LLVM optimized alone on one core: most of the crate's release build.
//! Here the same kernels are thousands of small functions that codegen
//! units share out, and a call per block of `BLOCK` lanes costs nothing
//! measurable (`docs/performance.md`, build time).

use super::kernels::{self, ArgState, BinParams, Keep, Op, Slot, LANES};
use super::lanes::{CastTo, Lane, Num};

/// The instruction set the block loops are compiled for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// The build's baseline (SSE2 on x86-64): always available.
    Portable,
    /// AVX2 with FMA, chosen at run time when the CPU has both.
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    /// AVX-512 (F, VL, BW and DQ) besides AVX2 and FMA: the `wide`
    /// kernels run their 512-bit twins, every other kernel its AVX2 twin.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The best instruction set of this CPU, probed once per process (six
    /// feature checks were ~40 instructions of every run of a tiny query).
    #[inline]
    pub(crate) fn detect() -> Isa {
        use std::sync::atomic::{AtomicU8, Ordering};
        // 0: not probed yet; else the `Isa` + 1.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        let code = |isa: Isa| match isa {
            Isa::Portable => 1,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => 2,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => 3,
        };
        match DETECTED.load(Ordering::Relaxed) {
            #[cfg(target_arch = "x86_64")]
            2 => Isa::Avx2Fma,
            #[cfg(target_arch = "x86_64")]
            3 => Isa::Avx512,
            1 => Isa::Portable,
            _ => {
                let isa = Isa::probe();
                DETECTED.store(code(isa), Ordering::Relaxed);
                isa
            }
        }
    }

    /// [`Isa::detect`] without the cache.
    #[cold]
    fn probe() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512dq")
                {
                    return Isa::Avx512;
                }
                return Isa::Avx2Fma;
            }
        }
        Isa::Portable
    }

    /// Every instruction set this CPU runs, the baseline first (for tests
    /// that compare them).
    #[cfg(test)]
    pub(crate) fn all_here() -> Vec<Isa> {
        let mut all = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            match Isa::detect() {
                Isa::Avx512 => all.extend([Isa::Avx2Fma, Isa::Avx512]),
                Isa::Avx2Fma => all.push(Isa::Avx2Fma),
                Isa::Portable => {}
            }
        }
        all
    }

    /// Whether the AVX2+FMA twins may run (the CPU has AVX2 and FMA).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn has_avx2(self) -> bool {
        self != Isa::Portable
    }

    /// The name shown in metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => "avx2+fma",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512+avx2+fma",
        }
    }
}

/// Runs `kernel(args)` compiled with `#[target_feature(enable =
/// $features)]`: the caller has checked that the CPU has them (its `Isa`).
macro_rules! twin {
    ($features:literal, [$($gen:tt)*]($($arg:ident: $ty:ty),*) -> $ret:ty = $kernel:path) => {{
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        unsafe fn twin<$($gen)*>($($arg: $ty),*) -> $ret {
            $kernel($($arg),*)
        }
        // SAFETY: the caller's `Isa`, which `Isa::detect` chooses only
        // when the CPU reports these features.
        unsafe { twin($($arg),*) }
    }};
}

/// `entry!(fn name[generics](args) -> ret = kernel)`: `name(isa, args)`
/// runs `kernel(args)` compiled for `isa`: its AVX2+FMA twin for
/// `Isa::Avx2Fma`, and for `Isa::Avx512` too unless the entry asks for an
/// AVX-512 twin (`= kernel, wide;`).
macro_rules! entry {
    // The AVX-512 twin's branch, for an entry that asks for one (its
    // features are those `Isa::detect` checks for `Isa::Avx512`).
    (@avx512 $isa:ident [] $($rest:tt)*) => {};
    (@avx512 $isa:ident [wide] $($twin:tt)*) => {
        #[cfg(target_arch = "x86_64")]
        if $isa == Isa::Avx512 {
            return twin!("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma", $($twin)*);
        }
    };
    ($(
        $(#[$doc:meta])*
        fn $name:ident[$($gen:tt)*]($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty
            = $kernel:path $(, $wide:ident)?;
    )*) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[inline(never)]
        pub(crate) fn $name<$($gen)*>(isa: Isa, $($arg: $ty),*) -> $ret {
            entry!(@avx512 isa [$($wide)?] [$($gen)*]($($arg: $ty),*) -> $ret = $kernel);
            #[cfg(target_arch = "x86_64")]
            if isa.has_avx2() {
                return twin!("avx2,fma", [$($gen)*]($($arg: $ty),*) -> $ret = $kernel);
            }
            let _ = isa;
            $kernel($($arg),*)
        }
    )*};
}

entry! {
    /// [`kernels::unary`].
    fn unary[A: Copy, R, O: Slot<R>, F: Fn(A) -> R](a: &[A], out: &mut [O], f: F) -> bool
        = kernels::unary;
    /// [`kernels::binary`].
    fn binary[A: Copy, R: Copy + Default, O: Slot<R>, F: Fn(A, A) -> R](
        a: Op<'_, A>,
        b: Op<'_, A>,
        out: &mut [O],
        f: F,
    ) -> bool = kernels::binary;
    /// [`kernels::ternary`].
    fn ternary[A: Copy, B: Copy, R: Copy + Default, O: Slot<R>, F: Fn(A, B, B) -> R](
        a: Op<'_, A>,
        b: Op<'_, B>,
        c: Op<'_, B>,
        out: &mut [O],
        f: F,
    ) -> bool = kernels::ternary;
    /// [`kernels::chain`].
    fn chain[T: Copy + Default, O: Slot<T>, F: Fn(T, T, T) -> T](
        a: &[T],
        k: T,
        c: Op<'_, T>,
        out: &mut [O],
        f: F,
    ) -> bool = kernels::chain;
    /// [`kernels::chain_in_place`].
    fn chain_in_place[T: Copy, F: Fn(T, T, T) -> T](
        x: &mut [T],
        k: T,
        c: Op<'_, T>,
        f: F,
    ) -> bool = kernels::chain_in_place;
    /// [`kernels::powi`].
    fn powi[T: Num, O: Slot<T>](a: &[T], n: i32, out: &mut [O]) -> bool = kernels::powi;
    /// [`kernels::fold_lanes`].
    fn fold_lanes[T: Num, K: Keep, F: Fn(T, T) -> T + Copy](
        acc: &mut [T; LANES],
        x: &[T],
        keep: K,
        id: T,
        f: F,
    ) -> () = kernels::fold_lanes;
    /// [`kernels::fold_lanes_bin`].
    fn fold_lanes_bin[T: Num, K: Keep, G: Fn(T, T) -> T + Copy, F: Fn(T, T) -> T + Copy](
        acc: &mut [T; LANES],
        a: Op<'_, T>,
        b: Op<'_, T>,
        n: usize,
        keep: K,
        id: T,
        g: G,
        f: F,
    ) -> () = kernels::fold_lanes_bin;
    /// [`kernels::fold_lanes_cast`].
    fn fold_lanes_cast[A: CastTo<f64> + Copy, K: Keep](
        acc: &mut [f64; LANES],
        x: &[A],
        keep: K,
    ) -> () = kernels::fold_lanes_cast;
    /// [`kernels::fold_lanes_nested`].
    fn fold_lanes_nested[
        T: Num,
        K: Keep,
        H: Fn(T, T) -> T + Copy,
        G: Fn(T, T) -> T + Copy,
        F: Fn(T, T) -> T + Copy,
    ](
        acc: &mut [T; LANES],
        a: Op<'_, T>,
        b: Op<'_, T>,
        h: H,
        c: T,
        n: usize,
        keep: K,
        id: T,
        g: G,
        f: F,
    ) -> () = kernels::fold_lanes_nested;
    /// [`kernels::count`].
    fn count[](n: usize, mask: Option<&[bool]>) -> u64 = kernels::count;
    /// [`kernels::any`].
    fn any[](x: &[bool], mask: Option<&[bool]>) -> bool = kernels::any;
    /// [`kernels::all`].
    fn all[](x: &[bool], mask: Option<&[bool]>) -> bool = kernels::all;
    /// [`kernels::count_keys`].
    fn count_keys[](counts: &mut [u32], keys: &[u32], mask: Option<&[bool]>) -> ()
        = kernels::count_keys;
    /// [`kernels::count_bin_keys`].
    fn count_bin_keys[K: kernels::KeyLane](
        counts: &mut [u32],
        keys: &[K],
        last_key: u32,
        wide: bool,
        mask: Option<&[bool]>,
        ahead: &[u8],
    ) -> () = kernels::count_bin_keys;
    /// [`kernels::arg`].
    fn arg[T: Lane, F: Fn(T, T) -> bool](
        st: &mut ArgState<T>,
        x: &[T],
        mask: Option<&[bool]>,
        base: u64,
        better: F,
    ) -> () = kernels::arg;
}

// The `wide` kernels: an AVX-512 twin each (see the module's docs).
entry! {
    /// [`kernels::bin_keys`].
    fn bin_keys[T: kernels::BinLane, K: kernels::KeyLane](
        x: &[T],
        out: &mut [K],
        p: BinParams<T>,
        last_key: u32,
    ) -> () = kernels::bin_keys, wide;
    /// [`kernels::moments`].
    fn moments[T: kernels::ToF64](x: &[T], mask: Option<&[bool]>) -> crate::semantics::Moments
        = kernels::moments, wide;
}
