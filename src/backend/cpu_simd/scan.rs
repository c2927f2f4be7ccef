//! Running sums of a block: the grouped prefix sum behind every `scan_sum`
//! that `cpu-simd` and `cpu-parallel` run.
//!
//! A serial running sum is one chain of dependent additions, 3 cycles each
//! for floats. Here a block is cut into groups of [`GROUP`] elements. Inside
//! a group the running sums come from a fixed tree that does not depend on
//! anything before the group (three steps of "shift in zeros and add", as in
//! Hillis and Steele's scan):
//!
//! ```text
//! a[i] = x[i] + (x[i-1] if i % 4 >= 1 else 0)
//! b[i] = a[i] + (a[i-2] if i % 4 >= 2 else 0)
//! p[i] = b[i] + (b[3]   if i >= 4     else 0)
//! ```
//!
//! and each output is `carry + p[i]` (exclusive: `carry + p[i-1]`, and
//! `carry + 0` first). The carry moves on by the group's total, `carry +
//! p[7]`, the same bits as the group's last inclusive output. What is left
//! of the chain is one addition per group. Elements after the last whole
//! group continue the carry serially.
//!
//! Integers get the values of the serial sum (wrapping addition is
//! associative). Floats get each output as `carry + (tree sum of the
//! group's prefix)`, within the documented float tolerance; the grouping
//! depends only on the block's length, so it is the same on every run and
//! thread count. The AVX2 kernels do the same additions in the same order
//! as the portable code (even the additions of zero, which turn `-0.0` into
//! `0.0`), and the tests compare them to the bit.

use super::isa::Isa;
use super::lanes::Num;
use std::mem::MaybeUninit;

/// Elements per group: one AVX2 vector of a 4-byte type, two of an 8-byte
/// one.
pub(crate) const GROUP: usize = 8;

/// A lane type with a running sum; the AVX2 kernels are per type family.
pub(crate) trait ScanNum: Num {
    /// Runs [`scan_groups`] over whole groups with AVX2, writing every
    /// element of `out`. The caller guarantees the CPU has AVX2 and that
    /// `x` and `out` are `GROUP * g` long for the same `g`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn scan_groups_avx2(
        x: &[Self],
        out: &mut [MaybeUninit<Self>],
        carry: Self,
        exclusive: bool,
    ) -> Self;
}

/// The tree of the module doc over one group: its local inclusive sums.
#[inline(always)]
fn local<T: Num>(x: &[T; GROUP]) -> [T; GROUP] {
    let (z, add) = (T::ZERO, T::n_add);
    let a = [
        add(x[0], z),
        add(x[1], x[0]),
        add(x[2], x[1]),
        add(x[3], x[2]),
        add(x[4], z),
        add(x[5], x[4]),
        add(x[6], x[5]),
        add(x[7], x[6]),
    ];
    let b = [
        add(a[0], z),
        add(a[1], z),
        add(a[2], a[0]),
        add(a[3], a[1]),
        add(a[4], z),
        add(a[5], z),
        add(a[6], a[4]),
        add(a[7], a[5]),
    ];
    [
        add(b[0], z),
        add(b[1], z),
        add(b[2], z),
        add(b[3], z),
        add(b[4], b[3]),
        add(b[5], b[3]),
        add(b[6], b[3]),
        add(b[7], b[3]),
    ]
}

/// A group's total as the tree computes it (`p[7]`), without the rest.
#[inline(always)]
fn total<T: Num>(x: &[T; GROUP]) -> T {
    let add = T::n_add;
    add(
        add(add(x[7], x[6]), add(x[5], x[4])),
        add(add(x[3], x[2]), add(x[1], x[0])),
    )
}

/// Whole groups of `x` (`out` as long, every element written), portable:
/// the reference the AVX2 kernels must match.
#[inline(always)]
fn scan_groups<T: Num>(x: &[T], out: &mut [MaybeUninit<T>], mut carry: T, exclusive: bool) -> T {
    for (xg, og) in x.chunks_exact(GROUP).zip(out.chunks_exact_mut(GROUP)) {
        let Ok(xg) = <&[T; GROUP]>::try_from(xg) else {
            continue;
        };
        let p = local(xg);
        if exclusive {
            og[0].write(T::n_add(carry, T::ZERO));
            for (o, &l) in og[1..].iter_mut().zip(&p[..GROUP - 1]) {
                o.write(T::n_add(carry, l));
            }
        } else {
            for (o, &l) in og.iter_mut().zip(&p) {
                o.write(T::n_add(carry, l));
            }
        }
        carry = T::n_add(carry, p[GROUP - 1]);
    }
    carry
}

/// Inclusive or exclusive running sum of a block, continuing from `carry`
/// (grouped as the module doc says), into the first `x.len()` elements of
/// `out` (all of them if `out` is shorter).
#[inline(always)]
pub(crate) fn scan_sum<T: ScanNum>(
    x: &[T],
    out: &mut [T],
    carry: &mut T,
    exclusive: bool,
    isa: Isa,
) {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and only initialized
    // values are written through the view.
    let out = unsafe { &mut *(out as *mut [T] as *mut [MaybeUninit<T>]) };
    scan_into(x, out, carry, exclusive, isa);
}

/// [`scan_sum`] of a block appended to `out`: the new elements are written
/// once, never zeroed first.
#[inline(always)]
pub(crate) fn append_scan_sum<T: ScanNum>(
    out: &mut Vec<T>,
    x: &[T],
    carry: &mut T,
    exclusive: bool,
    isa: Isa,
) {
    out.reserve(x.len());
    let len = out.len();
    let spare = &mut out.spare_capacity_mut()[..x.len()];
    scan_into(x, spare, carry, exclusive, isa);
    // SAFETY: `scan_into` wrote all `x.len()` elements after `len` (it
    // writes `min(x.len(), out.len())` elements, and both are `x.len()`
    // here), within the capacity reserved above.
    unsafe { out.set_len(len + x.len()) };
}

/// Writes the running sums of `x` to the first `n = min(x.len(),
/// out.len())` elements of `out`, every one of them.
#[inline(always)]
fn scan_into<T: ScanNum>(
    x: &[T],
    out: &mut [MaybeUninit<T>],
    carry: &mut T,
    exclusive: bool,
    isa: Isa,
) {
    let n = x.len().min(out.len());
    let whole = n - n % GROUP;
    let (xg, xt) = x[..n].split_at(whole);
    let (og, ot) = out[..n].split_at_mut(whole);
    let mut c = match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2Fma` and `Isa::Avx512` are only chosen when the
        // CPU has AVX2; both slices hold `whole` elements, a multiple of
        // `GROUP`.
        Isa::Avx2Fma | Isa::Avx512 => unsafe { T::scan_groups_avx2(xg, og, *carry, exclusive) },
        Isa::Portable => scan_groups(xg, og, *carry, exclusive),
    };
    if exclusive {
        for (o, &v) in ot.iter_mut().zip(xt) {
            o.write(c);
            c = T::n_add(c, v);
        }
    } else {
        for (o, &v) in ot.iter_mut().zip(xt) {
            c = T::n_add(c, v);
            o.write(c);
        }
    }
    *carry = c;
}

/// The final carry of [`scan_sum`] without writing anything: the same
/// additions, grouped the same way, so the two agree to the bit.
#[inline(always)]
pub(crate) fn fold_sum<T: Num>(x: &[T], carry: T) -> T {
    let groups = x.chunks_exact(GROUP);
    let tail = groups.remainder();
    let c = groups.fold(carry, |c, g| match <&[T; GROUP]>::try_from(g) {
        Ok(g) => T::n_add(c, total(g)),
        Err(_) => c,
    });
    tail.iter().fold(c, |c, &v| T::n_add(c, v))
}

/// `out[i] = offset + out[i]`: a leaf's local scan moved by the total of the
/// leaves before it.
#[inline(always)]
pub(crate) fn add_offset<T: Num>(out: &mut [T], offset: T) {
    for o in out.iter_mut() {
        *o = T::n_add(offset, *o);
    }
}

#[cfg(not(target_arch = "x86_64"))]
macro_rules! scan_num {
    ($($t:ty),*) => {$(impl ScanNum for $t {})*};
}
#[cfg(not(target_arch = "x86_64"))]
scan_num!(f32, f64, i32, u32, i64, u64);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2 group kernels, one per lane width and kind: the same
    //! additions as `scan_groups`, lane for lane. Loads and stores are
    //! unaligned; every pointer offset stays below `x.len()` (`out.len()`).
    use super::{ScanNum, GROUP};
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// `[0, v0, v1, ..., v6]` of eight 32-bit lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn shift_up_32(v: __m256i) -> __m256i {
        let up = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
        _mm256_blend_epi32::<0b0000_0001>(up, _mm256_setzero_si256())
    }

    /// `[0, v0, v1, v2]` of four 64-bit lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn shift_up_64(v: __m256i) -> __m256i {
        let up = _mm256_permute4x64_epi64::<0b10_01_00_00>(v);
        _mm256_blend_epi32::<0b0000_0011>(up, _mm256_setzero_si256())
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn shift_up_pd(v: __m256d) -> __m256d {
        _mm256_castsi256_pd(shift_up_64(_mm256_castpd_si256(v)))
    }

    /// `[0, 0, a0, a1]` of four 64-bit lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn shift_up2_pd(a: __m256d) -> __m256d {
        _mm256_permute2f128_pd::<0x08>(a, a)
    }

    #[target_feature(enable = "avx2")]
    unsafe fn scan_f32(
        x: &[f32],
        out: &mut [MaybeUninit<f32>],
        carry: f32,
        exclusive: bool,
    ) -> f32 {
        let groups = x.len().min(out.len()) / GROUP;
        let (xp, op) = (x.as_ptr(), out.as_mut_ptr().cast::<f32>());
        let last = _mm256_set1_epi32(7);
        let mut cv = _mm256_set1_ps(carry);
        for g in 0..groups {
            let v = _mm256_loadu_ps(xp.add(g * GROUP));
            // Steps 1 and 2 shift inside each half of four (128-bit lanes).
            let s = _mm256_castsi256_ps(_mm256_slli_si256::<4>(_mm256_castps_si256(v)));
            let a = _mm256_add_ps(v, s);
            let s = _mm256_castsi256_ps(_mm256_slli_si256::<8>(_mm256_castps_si256(a)));
            let b = _mm256_add_ps(a, s);
            // Step 3: b[3] into the upper half, zeros into the lower.
            let lo = _mm256_permute2f128_ps::<0x08>(b, b);
            let p = _mm256_add_ps(b, _mm256_shuffle_ps::<0xFF>(lo, lo));
            let o = if exclusive {
                let e = _mm256_castsi256_ps(shift_up_32(_mm256_castps_si256(p)));
                _mm256_add_ps(cv, e)
            } else {
                _mm256_add_ps(cv, p)
            };
            _mm256_storeu_ps(op.add(g * GROUP), o);
            cv = _mm256_add_ps(cv, _mm256_permutevar8x32_ps(p, last));
        }
        _mm256_cvtss_f32(cv)
    }

    #[target_feature(enable = "avx2")]
    unsafe fn scan_32(
        x: *const i32,
        out: *mut i32,
        groups: usize,
        carry: i32,
        exclusive: bool,
    ) -> i32 {
        let last = _mm256_set1_epi32(7);
        let mut cv = _mm256_set1_epi32(carry);
        for g in 0..groups {
            let v = _mm256_loadu_si256(x.add(g * GROUP).cast());
            let a = _mm256_add_epi32(v, _mm256_slli_si256::<4>(v));
            let b = _mm256_add_epi32(a, _mm256_slli_si256::<8>(a));
            let lo = _mm256_permute2x128_si256::<0x08>(b, b);
            let p = _mm256_add_epi32(b, _mm256_shuffle_epi32::<0xFF>(lo));
            let o = _mm256_add_epi32(cv, if exclusive { shift_up_32(p) } else { p });
            _mm256_storeu_si256(out.add(g * GROUP).cast(), o);
            cv = _mm256_add_epi32(cv, _mm256_permutevar8x32_epi32(p, last));
        }
        _mm256_cvtsi256_si32(cv)
    }

    #[target_feature(enable = "avx2")]
    unsafe fn scan_f64(
        x: &[f64],
        out: &mut [MaybeUninit<f64>],
        carry: f64,
        exclusive: bool,
    ) -> f64 {
        let groups = x.len().min(out.len()) / GROUP;
        let (xp, op) = (x.as_ptr(), out.as_mut_ptr().cast::<f64>());
        let zero = _mm256_setzero_pd();
        let mut cv = _mm256_set1_pd(carry);
        for g in 0..groups {
            let at = g * GROUP;
            let (vl, vh) = (_mm256_loadu_pd(xp.add(at)), _mm256_loadu_pd(xp.add(at + 4)));
            let (al, ah) = (
                _mm256_add_pd(vl, shift_up_pd(vl)),
                _mm256_add_pd(vh, shift_up_pd(vh)),
            );
            let (bl, bh) = (
                _mm256_add_pd(al, shift_up2_pd(al)),
                _mm256_add_pd(ah, shift_up2_pd(ah)),
            );
            let pl = _mm256_add_pd(bl, zero);
            let ph = _mm256_add_pd(bh, _mm256_permute4x64_pd::<0xFF>(bl));
            let (ol, oh) = if exclusive {
                // `[p3, ph0, ph1, ph2]`: the upper half shifted up, the lower
                // half's last lane in front.
                let eh =
                    _mm256_blend_pd::<0b0001>(shift_up_pd(ph), _mm256_permute4x64_pd::<0xFF>(pl));
                (_mm256_add_pd(cv, shift_up_pd(pl)), _mm256_add_pd(cv, eh))
            } else {
                (_mm256_add_pd(cv, pl), _mm256_add_pd(cv, ph))
            };
            _mm256_storeu_pd(op.add(at), ol);
            _mm256_storeu_pd(op.add(at + 4), oh);
            cv = _mm256_add_pd(cv, _mm256_permute4x64_pd::<0xFF>(ph));
        }
        _mm256_cvtsd_f64(cv)
    }

    #[target_feature(enable = "avx2")]
    unsafe fn scan_64(
        x: *const i64,
        out: *mut i64,
        groups: usize,
        carry: i64,
        exclusive: bool,
    ) -> i64 {
        let mut cv = _mm256_set1_epi64x(carry);
        for g in 0..groups {
            let at = g * GROUP;
            let vl = _mm256_loadu_si256(x.add(at).cast());
            let vh = _mm256_loadu_si256(x.add(at + 4).cast());
            let (al, ah) = (
                _mm256_add_epi64(vl, shift_up_64(vl)),
                _mm256_add_epi64(vh, shift_up_64(vh)),
            );
            let (pl, bh) = (
                _mm256_add_epi64(al, _mm256_permute2x128_si256::<0x08>(al, al)),
                _mm256_add_epi64(ah, _mm256_permute2x128_si256::<0x08>(ah, ah)),
            );
            let ph = _mm256_add_epi64(bh, _mm256_permute4x64_epi64::<0xFF>(pl));
            let (ol, oh) = if exclusive {
                let eh = _mm256_blend_epi32::<0b0000_0011>(
                    shift_up_64(ph),
                    _mm256_permute4x64_epi64::<0xFF>(pl),
                );
                (
                    _mm256_add_epi64(cv, shift_up_64(pl)),
                    _mm256_add_epi64(cv, eh),
                )
            } else {
                (_mm256_add_epi64(cv, pl), _mm256_add_epi64(cv, ph))
            };
            _mm256_storeu_si256(out.add(at).cast(), ol);
            _mm256_storeu_si256(out.add(at + 4).cast(), oh);
            cv = _mm256_add_epi64(cv, _mm256_permute4x64_epi64::<0xFF>(ph));
        }
        _mm256_extract_epi64::<0>(cv)
    }

    impl ScanNum for f32 {
        unsafe fn scan_groups_avx2(
            x: &[f32],
            out: &mut [MaybeUninit<f32>],
            carry: f32,
            excl: bool,
        ) -> f32 {
            scan_f32(x, out, carry, excl)
        }
    }

    impl ScanNum for f64 {
        unsafe fn scan_groups_avx2(
            x: &[f64],
            out: &mut [MaybeUninit<f64>],
            carry: f64,
            excl: bool,
        ) -> f64 {
            scan_f64(x, out, carry, excl)
        }
    }

    /// Integers share a kernel per width: wrapping addition is the same
    /// bits for signed and unsigned lanes.
    macro_rules! int_scan {
        ($t:ty, $as:ty, $kernel:ident) => {
            impl ScanNum for $t {
                unsafe fn scan_groups_avx2(
                    x: &[$t],
                    out: &mut [MaybeUninit<$t>],
                    carry: $t,
                    excl: bool,
                ) -> $t {
                    let groups = x.len().min(out.len()) / GROUP;
                    let p = (x.as_ptr().cast::<$as>(), out.as_mut_ptr().cast::<$as>());
                    $kernel(p.0, p.1, groups, carry as $as, excl) as $t
                }
            }
        };
    }
    int_scan!(i32, i32, scan_32);
    int_scan!(u32, i32, scan_32);
    int_scan!(i64, i64, scan_64);
    int_scan!(u64, i64, scan_64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serial<T: Num>(x: &[T], carry: T, exclusive: bool) -> (Vec<T>, T) {
        let mut c = carry;
        let out = x
            .iter()
            .map(|&v| {
                let before = c;
                c = T::n_add(c, v);
                if exclusive {
                    before
                } else {
                    c
                }
            })
            .collect();
        (out, c)
    }

    /// Lengths around every group boundary, uneven tails, a block.
    fn lengths() -> impl Iterator<Item = usize> {
        (0..80).chain([1023, 1024, 1031])
    }

    /// Every instruction set this CPU runs.
    fn isas() -> Vec<Isa> {
        let all = Isa::all_here();
        if all.len() == 1 {
            println!("skipping the AVX2 kernels: this CPU lacks AVX2 or FMA");
        }
        all
    }

    fn run<T: ScanNum>(x: &[T], carry: T, exclusive: bool, isa: Isa) -> (Vec<T>, T) {
        let mut out = vec![T::ZERO; x.len()];
        let mut c = carry;
        scan_sum(x, &mut out, &mut c, exclusive, isa);
        (out, c)
    }

    fn ints_agree_with_serial<T: ScanNum + std::fmt::Debug>(x: &[T], carry: T) {
        for isa in isas() {
            for exclusive in [false, true] {
                let (want, want_carry) = serial(x, carry, exclusive);
                let (out, c) = run(x, carry, exclusive, isa);
                let n = x.len();
                assert_eq!(out, want, "n={n} exclusive={exclusive} {isa:?}");
                assert_eq!(c, want_carry, "n={n} {isa:?}");
                assert_eq!(fold_sum(x, carry), want_carry, "n={n}");
            }
        }
    }

    #[test]
    fn running_sums_of_integers_equal_the_serial_ones_on_every_isa() {
        for n in lengths() {
            let bits: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ (i << 7))
                .collect();
            ints_agree_with_serial(
                &bits.iter().map(|&b| b as i32).collect::<Vec<_>>(),
                i32::MAX - 3,
            );
            ints_agree_with_serial(
                &bits.iter().map(|&b| b as u32).collect::<Vec<_>>(),
                u32::MAX,
            );
            ints_agree_with_serial(
                &bits.iter().map(|&b| b as i64).collect::<Vec<_>>(),
                i64::MIN + 1,
            );
            ints_agree_with_serial(&bits, 7u64);
        }
    }

    #[test]
    fn running_sums_of_floats_are_close_and_fold_agrees_to_the_bit() {
        for n in lengths() {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.013)
                .collect();
            for isa in isas() {
                for exclusive in [false, true] {
                    let (out, c) = run(&x, 1.5f32, exclusive, isa);
                    assert_eq!(fold_sum(&x, 1.5).to_bits(), c.to_bits(), "n={n}");
                    let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                    let (exact, _) = serial(&wide, 1.5, exclusive);
                    let bound = (n as f64 + 1.0)
                        * f32::EPSILON as f64
                        * (1.5 + wide.iter().map(|v| v.abs()).sum::<f64>());
                    for (i, (&o, &e)) in out.iter().zip(&exact).enumerate() {
                        assert!(
                            (o as f64 - e).abs() <= bound,
                            "n={n} i={i} {isa:?}: {o} vs {e} (bound {bound})"
                        );
                    }
                }
            }
        }
    }

    /// Same bits, NaN for NaN (payloads are not specified).
    fn same<T: Num + Into<f64>>(a: &[T], b: &[T]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(&a, &b)| {
                let (a, b): (f64, f64) = (a.into(), b.into());
                (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
            })
    }

    fn floats_match_portable<T: ScanNum + Into<f64>>(x: &[T], carry: T) {
        for isa in isas() {
            for exclusive in [false, true] {
                let (want, want_carry) = run(x, carry, exclusive, Isa::Portable);
                let (out, c) = run(x, carry, exclusive, isa);
                let n = x.len();
                assert!(same(&out, &want), "n={n} exclusive={exclusive} {isa:?}");
                assert!(same(&[c], &[want_carry]), "n={n} {isa:?}");
                assert!(same(&[fold_sum(x, carry)], &[want_carry]), "n={n}");
            }
        }
    }

    #[test]
    fn avx2_float_kernels_match_the_portable_code_to_the_bit() {
        let special = [
            -0.0,
            0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            1e-310,
        ];
        for n in lengths() {
            for seed in 0..4u64 {
                let x: Vec<f64> = (0..n as u64)
                    .map(|i| {
                        let h = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
                        match (seed, h % 13) {
                            (0, _) => ((h >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1e3,
                            (1, _) => -0.0,
                            (_, k) if (k as usize) < special.len() => special[k as usize],
                            _ => (h >> 40) as f64 - 8e6,
                        }
                    })
                    .collect();
                for carry in [0.0, -0.0, 2.5] {
                    floats_match_portable(&x, carry);
                    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                    floats_match_portable(&x32, carry as f32);
                }
            }
        }
    }
}
