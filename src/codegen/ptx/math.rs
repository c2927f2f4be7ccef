//! The math functions PTX lacks, as `.func` helpers in PTX text.
//!
//! PTX has only approximate transcendental instructions (`ex2.approx`,
//! `sin.approx`, ... on `f32` alone) and no floating remainder, while the
//! reference semantics are those of Rust's `f64::exp`, `ln`, `sin`, `cos`
//! and `%`. Each helper here works in `f64` (the `f32` forms convert in and
//! out, which rounds once more but stays within an ulp of `f32`):
//!
//! | helper | algorithm | accuracy |
//! | --- | --- | --- |
//! | `cq_exp_f64` | fdlibm `e_exp`: `x = k ln2 + r`, rational approximation of `e^r`, scaling by `2^k` in two steps | < 1 ulp |
//! | `cq_ln_f64` | fdlibm `e_log`: `x = 2^k (1 + f)`, `s = f / (2 + f)`, polynomial in `s²` | < 1 ulp |
//! | `cq_sincos_f64` | reduction by `π/2`: Cody–Waite in three `fma` steps below `2^20`, Payne–Hanek with a 1216-bit table of `2/π` above; fdlibm kernels | ~1 ulp |
//! | `cq_fmod_f64` | musl `fmod`: long division on the integer significands | exact |
//!
//! Constants are written from their `f64` values, so no hex is typed by hand.

use std::fmt::Write;

/// A helper function a kernel calls.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum MathFn {
    /// `e^x`.
    Exp,
    /// `ln x`.
    Ln,
    /// `sin x` (second argument 0) or `cos x` (1).
    SinCos,
    /// Truncated remainder `x % y`.
    Fmod,
}

impl MathFn {
    /// The PTX function name.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            MathFn::Exp => "cq_exp_f64",
            MathFn::Ln => "cq_ln_f64",
            MathFn::SinCos => "cq_sincos_f64",
            MathFn::Fmod => "cq_fmod_f64",
        }
    }
}

/// An `f64` immediate.
fn d(v: f64) -> String {
    format!("0d{:016X}", v.to_bits())
}

/// Writes the definition of `f`.
pub(crate) fn write_helper(f: MathFn, out: &mut String) {
    let text = match f {
        MathFn::Exp => exp(),
        MathFn::Ln => ln(),
        MathFn::SinCos => sincos(),
        MathFn::Fmod => fmod(),
    };
    out.push_str(&text);
    out.push('\n');
}

fn exp() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        ".func (.param .f64 cq_ret) cq_exp_f64(.param .f64 cq_x)\n{{"
    );
    let _ = writeln!(
        w,
        "\t.reg .pred %p<4>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<8>;\n\t.reg .f64 %fd<24>;"
    );
    let _ = writeln!(w, "\tld.param.f64 %fd0, [cq_x];");
    // NaN stays NaN; past the thresholds the result is inf or 0.
    let _ = writeln!(w, "\tsetp.nan.f64 %p0, %fd0, %fd0;");
    let _ = writeln!(w, "\t@%p0 bra $Lexp_done;");
    let _ = writeln!(w, "\tsetp.gt.f64 %p1, %fd0, {};", d(7.097_827_128_933_84e2));
    let _ = writeln!(w, "\t@%p1 bra $Lexp_inf;");
    let _ = writeln!(
        w,
        "\tsetp.lt.f64 %p2, %fd0, {};",
        d(-7.451_332_191_019_411e2)
    );
    let _ = writeln!(w, "\t@%p2 bra $Lexp_zero;");
    // k = rint(x / ln 2); hi = x - k ln2_hi (one rounding); lo = k ln2_lo.
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd1, %fd0, {};",
        d(std::f64::consts::LOG2_E)
    );
    let _ = writeln!(w, "\tcvt.rni.f64.f64 %fd2, %fd1;");
    let _ = writeln!(w, "\tcvt.rzi.s32.f64 %r0, %fd2;");
    let _ = writeln!(w, "\tneg.f64 %fd3, %fd2;");
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd4, %fd3, {}, %fd0;",
        d(6.931_471_803_691_238e-1)
    );
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd5, %fd2, {};",
        d(1.908_214_929_270_587_7e-10)
    );
    let _ = writeln!(w, "\tsub.rn.f64 %fd6, %fd4, %fd5;");
    // c = r - t (P1 + t (P2 + t (P3 + t (P4 + t P5)))), t = r².
    let _ = writeln!(w, "\tmul.rn.f64 %fd7, %fd6, %fd6;");
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd7, {}, {};",
        d(4.138_136_797_057_238_5e-8),
        d(-1.653_390_220_546_525_2e-6)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd7, %fd8, {};",
        d(6.613_756_321_437_934e-5)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd7, %fd8, {};",
        d(-2.777_777_777_701_559_3e-3)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd7, %fd8, {};",
        d(1.666_666_666_666_660_2e-1)
    );
    let _ = writeln!(w, "\tmul.rn.f64 %fd9, %fd7, %fd8;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd10, %fd6, %fd9;");
    // y = 1 - ((lo - (r c) / (2 - c)) - hi)
    let _ = writeln!(w, "\tmul.rn.f64 %fd11, %fd6, %fd10;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd12, {}, %fd10;", d(2.0));
    let _ = writeln!(w, "\tdiv.rn.f64 %fd13, %fd11, %fd12;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd14, %fd5, %fd13;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd15, %fd14, %fd4;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd16, {}, %fd15;", d(1.0));
    // y * 2^k1 * 2^k2 with k1 = k >> 1, k2 = k - k1: both factors normal.
    let _ = writeln!(w, "\tshr.s32 %r1, %r0, 1;");
    let _ = writeln!(w, "\tsub.s32 %r2, %r0, %r1;");
    let _ = writeln!(w, "\tadd.s32 %r1, %r1, 1023;");
    let _ = writeln!(w, "\tadd.s32 %r2, %r2, 1023;");
    let _ = writeln!(w, "\tcvt.u64.u32 %rd1, %r1;");
    let _ = writeln!(w, "\tcvt.u64.u32 %rd2, %r2;");
    let _ = writeln!(w, "\tshl.b64 %rd1, %rd1, 52;");
    let _ = writeln!(w, "\tshl.b64 %rd2, %rd2, 52;");
    let _ = writeln!(w, "\tmov.b64 %fd17, %rd1;");
    let _ = writeln!(w, "\tmov.b64 %fd18, %rd2;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd19, %fd16, %fd17;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd0, %fd19, %fd18;");
    let _ = writeln!(w, "\tbra $Lexp_done;");
    let _ = writeln!(w, "$Lexp_inf:\n\tmov.f64 %fd0, {};", d(f64::INFINITY));
    let _ = writeln!(w, "\tbra $Lexp_done;");
    let _ = writeln!(w, "$Lexp_zero:\n\tmov.f64 %fd0, {};", d(0.0));
    let _ = writeln!(w, "$Lexp_done:\n\tst.param.f64 [cq_ret], %fd0;\n\tret;\n}}");
    s
}

fn ln() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        ".func (.param .f64 cq_ret) cq_ln_f64(.param .f64 cq_x)\n{{"
    );
    let _ = writeln!(
        w,
        "\t.reg .pred %p<6>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f64 %fd<32>;"
    );
    let _ = writeln!(w, "\tld.param.f64 %fd0, [cq_x];");
    // NaN → NaN, x < 0 → NaN, ±0 → -inf, +inf → +inf.
    let _ = writeln!(w, "\tsetp.nan.f64 %p0, %fd0, %fd0;");
    let _ = writeln!(w, "\t@%p0 bra $Lln_done;");
    let _ = writeln!(w, "\tsetp.eq.f64 %p1, %fd0, {};", d(0.0));
    let _ = writeln!(w, "\t@%p1 bra $Lln_minf;");
    let _ = writeln!(w, "\tsetp.lt.f64 %p2, %fd0, {};", d(0.0));
    let _ = writeln!(w, "\t@%p2 bra $Lln_nan;");
    let _ = writeln!(w, "\tsetp.eq.f64 %p3, %fd0, {};", d(f64::INFINITY));
    let _ = writeln!(w, "\t@%p3 bra $Lln_done;");
    // Subnormals: scale by 2^54 first.
    let _ = writeln!(w, "\tmov.s32 %r0, 0;");
    let _ = writeln!(w, "\tsetp.lt.f64 %p4, %fd0, {};", d(f64::MIN_POSITIVE));
    let _ = writeln!(w, "\t@%p4 mul.rn.f64 %fd0, %fd0, {};", d(2f64.powi(54)));
    let _ = writeln!(w, "\t@%p4 mov.s32 %r0, -54;");
    // hx = high word; k += (hx >> 20) - 1023; normalise the significand
    // into [sqrt(2)/2, sqrt(2)).
    let _ = writeln!(w, "\tmov.b64 %rd0, %fd0;");
    let _ = writeln!(w, "\tshr.u64 %rd1, %rd0, 32;");
    let _ = writeln!(w, "\tcvt.u32.u64 %r1, %rd1;");
    let _ = writeln!(w, "\tshr.u32 %r2, %r1, 20;");
    let _ = writeln!(w, "\tadd.s32 %r0, %r0, %r2;");
    let _ = writeln!(w, "\tsub.s32 %r0, %r0, 1023;");
    let _ = writeln!(w, "\tand.b32 %r1, %r1, 1048575;");
    let _ = writeln!(w, "\tadd.u32 %r3, %r1, 614244;");
    let _ = writeln!(w, "\tand.b32 %r3, %r3, 1048576;");
    let _ = writeln!(w, "\txor.b32 %r4, %r3, 1072693248;");
    let _ = writeln!(w, "\tor.b32 %r4, %r4, %r1;");
    let _ = writeln!(w, "\tshr.u32 %r5, %r3, 20;");
    let _ = writeln!(w, "\tadd.s32 %r0, %r0, %r5;");
    let _ = writeln!(w, "\tcvt.u64.u32 %rd2, %r4;");
    let _ = writeln!(w, "\tshl.b64 %rd2, %rd2, 32;");
    let _ = writeln!(w, "\tand.b64 %rd3, %rd0, 4294967295;");
    let _ = writeln!(w, "\tor.b64 %rd2, %rd2, %rd3;");
    let _ = writeln!(w, "\tmov.b64 %fd1, %rd2;");
    // f = m - 1; s = f / (2 + f); R = polynomial in s².
    let _ = writeln!(w, "\tsub.rn.f64 %fd2, %fd1, {};", d(1.0));
    let _ = writeln!(w, "\tadd.rn.f64 %fd3, %fd2, {};", d(2.0));
    let _ = writeln!(w, "\tdiv.rn.f64 %fd4, %fd2, %fd3;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd5, %fd4, %fd4;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd6, %fd5, %fd5;");
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, {}, {};",
        d(1.531_383_769_920_937_3e-1),
        d(2.222_219_843_214_978_4e-1)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, %fd7, {};",
        d(3.999_999_999_940_942e-1)
    );
    let _ = writeln!(w, "\tmul.rn.f64 %fd7, %fd6, %fd7;");
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd6, {}, {};",
        d(1.479_819_860_511_658_6e-1),
        d(1.818_357_216_161_805e-1)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd6, %fd8, {};",
        d(2.857_142_874_366_239e-1)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd8, %fd6, %fd8, {};",
        d(6.666_666_666_666_735e-1)
    );
    let _ = writeln!(w, "\tmul.rn.f64 %fd8, %fd5, %fd8;");
    let _ = writeln!(w, "\tadd.rn.f64 %fd9, %fd8, %fd7;");
    // hfsq = f²/2; ln x = k ln2_hi - ((hfsq - (s (hfsq + R) + k ln2_lo)) - f)
    let _ = writeln!(w, "\tmul.rn.f64 %fd10, %fd2, {};", d(0.5));
    let _ = writeln!(w, "\tmul.rn.f64 %fd10, %fd10, %fd2;");
    let _ = writeln!(w, "\tcvt.rn.f64.s32 %fd11, %r0;");
    let _ = writeln!(w, "\tadd.rn.f64 %fd12, %fd10, %fd9;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd13, %fd4, %fd12;");
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd14, %fd11, {};",
        d(1.908_214_929_270_587_7e-10)
    );
    let _ = writeln!(w, "\tadd.rn.f64 %fd15, %fd13, %fd14;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd16, %fd10, %fd15;");
    let _ = writeln!(w, "\tsub.rn.f64 %fd17, %fd16, %fd2;");
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd18, %fd11, {};",
        d(6.931_471_803_691_238e-1)
    );
    let _ = writeln!(w, "\tsub.rn.f64 %fd0, %fd18, %fd17;");
    let _ = writeln!(w, "\tbra $Lln_done;");
    let _ = writeln!(w, "$Lln_minf:\n\tmov.f64 %fd0, {};", d(f64::NEG_INFINITY));
    let _ = writeln!(w, "\tbra $Lln_done;");
    let _ = writeln!(w, "$Lln_nan:\n\tmov.f64 %fd0, {};", d(f64::NAN));
    let _ = writeln!(w, "$Lln_done:\n\tst.param.f64 [cq_ret], %fd0;\n\tret;\n}}");
    s
}

/// `2/π` as 64-bit words, most significant first, after one zero word:
/// bit `i` of the fraction (weight `2^-i`) is bit `63 + i` of the table.
/// Computed exactly (Machin's formula on big integers) to 1216 bits, enough
/// for every finite `f64`.
const TWO_OVER_PI: [u64; 20] = [
    0,
    0xa2f9836e4e441529,
    0xfc2757d1f534ddc0,
    0xdb6295993c439041,
    0xfe5163abdebbc561,
    0xb7246e3a424dd2e0,
    0x06492eea09d1921c,
    0xfe1deb1cb129a73e,
    0xe88235f52ebb4484,
    0xe99c7026b45f7e41,
    0x3991d639835339f4,
    0x9c845f8bbdf9283b,
    0x1ff897ffde05980f,
    0xef2f118b5a0a6d1f,
    0x6d367ecf27cb09b7,
    0x4f463f669e5fea2d,
    0x7527bac7ebe5f17b,
    0x3d0739f78a5292ea,
    0x6bfb5fb11f8d5d08,
    0x56033046fc7b6bab,
];

/// Module-scope data a helper needs, written before the helpers.
pub(crate) fn write_data(f: MathFn, out: &mut String) {
    if f == MathFn::SinCos {
        let words: Vec<String> = TWO_OVER_PI.iter().map(|w| format!("0x{w:016x}")).collect();
        let _ = writeln!(
            out,
            ".const .align 8 .b64 cq_two_over_pi[{}] = {{{}}};\n",
            TWO_OVER_PI.len(),
            words.join(", ")
        );
    }
}

fn sincos() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        ".func (.param .f64 cq_ret) cq_sincos_f64(.param .f64 cq_x, .param .b32 cq_which)\n{{"
    );
    let _ = writeln!(
        w,
        "\t.reg .pred %p<8>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<25>;\n\t.reg .f64 %fd<32>;"
    );
    let _ = writeln!(w, "\tld.param.f64 %fd0, [cq_x];");
    let _ = writeln!(w, "\tld.param.b32 %r0, [cq_which];");
    // NaN and ±inf give NaN.
    let _ = writeln!(w, "\tabs.f64 %fd1, %fd0;");
    let _ = writeln!(w, "\tsetp.equ.f64 %p0, %fd1, {};", d(f64::INFINITY));
    let _ = writeln!(w, "\t@%p0 bra $Lsc_nan;");
    let _ = writeln!(w, "\tsetp.ge.f64 %p3, %fd1, {};", d(2f64.powi(20)));
    let _ = writeln!(w, "\t@%p3 bra $Lsc_big;");
    // |x| < 2^20: k = rint(x 2/π); r = x - k π/2 in three fma steps.
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd2, %fd0, {};",
        d(std::f64::consts::FRAC_2_PI)
    );
    let _ = writeln!(w, "\tcvt.rni.f64.f64 %fd3, %fd2;");
    let _ = writeln!(w, "\tcvt.rzi.s64.f64 %rd0, %fd3;");
    let _ = writeln!(w, "\tcvt.u32.u64 %r1, %rd0;");
    let _ = writeln!(w, "\tneg.f64 %fd4, %fd3;");
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd5, %fd4, {}, %fd0;",
        d(std::f64::consts::FRAC_PI_2)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd5, %fd4, {}, %fd5;",
        d(6.123_233_995_736_766e-17)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd5, %fd4, {}, %fd5;",
        d(-1.497_384_904_859_169_8e-33)
    );
    let _ = writeln!(w, "$Lsc_poly:");
    let _ = writeln!(w, "\tmul.rn.f64 %fd6, %fd5, %fd5;");
    // sin r = r + r z (S1 + z (S2 + ... + z S6))
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, {}, {};",
        d(1.589_690_995_211_55e-10),
        d(-2.505_076_025_340_686_3e-8)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, %fd7, {};",
        d(2.755_731_370_707_006_8e-6)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, %fd7, {};",
        d(-1.984_126_982_985_795e-4)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, %fd7, {};",
        d(8.333_333_333_322_49e-3)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd7, %fd6, %fd7, {};",
        d(-1.666_666_666_666_663_2e-1)
    );
    let _ = writeln!(w, "\tmul.rn.f64 %fd8, %fd5, %fd6;");
    let _ = writeln!(w, "\tfma.rn.f64 %fd9, %fd8, %fd7, %fd5;");
    // cos r = w + (((1 - w) - z/2) + z² (C1 + z (C2 + ... + z C6))), w = 1 - z/2
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd10, %fd6, {}, {};",
        d(-1.135_964_755_778_819_5e-11),
        d(2.087_572_321_298_175e-9)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd10, %fd6, %fd10, {};",
        d(-2.755_731_435_139_066_3e-7)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd10, %fd6, %fd10, {};",
        d(2.480_158_728_947_673e-5)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd10, %fd6, %fd10, {};",
        d(-1.388_888_888_887_411e-3)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd10, %fd6, %fd10, {};",
        d(4.166_666_666_666_66e-2)
    );
    let _ = writeln!(w, "\tmul.rn.f64 %fd11, %fd6, %fd6;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd11, %fd11, %fd10;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd12, %fd6, {};", d(0.5));
    let _ = writeln!(w, "\tsub.rn.f64 %fd13, {}, %fd12;", d(1.0));
    let _ = writeln!(w, "\tsub.rn.f64 %fd14, {}, %fd13;", d(1.0));
    let _ = writeln!(w, "\tsub.rn.f64 %fd14, %fd14, %fd12;");
    let _ = writeln!(w, "\tadd.rn.f64 %fd14, %fd14, %fd11;");
    let _ = writeln!(w, "\tadd.rn.f64 %fd15, %fd13, %fd14;");
    // Quadrant n = (k + which) & 3: 0 sin, 1 cos, 2 -sin, 3 -cos.
    let _ = writeln!(w, "\tadd.s32 %r2, %r1, %r0;");
    let _ = writeln!(w, "\tand.b32 %r3, %r2, 1;");
    let _ = writeln!(w, "\tsetp.ne.s32 %p1, %r3, 0;");
    let _ = writeln!(w, "\tselp.f64 %fd16, %fd15, %fd9, %p1;");
    let _ = writeln!(w, "\tand.b32 %r4, %r2, 2;");
    let _ = writeln!(w, "\tsetp.ne.s32 %p2, %r4, 0;");
    let _ = writeln!(w, "\tneg.f64 %fd17, %fd16;");
    let _ = writeln!(w, "\tselp.f64 %fd0, %fd17, %fd16, %p2;");
    let _ = writeln!(w, "\tbra $Lsc_done;");
    // |x| >= 2^20: Payne–Hanek. x = m 2^e; x 2/π mod 4 = m G 2^-190 mod 4
    // where G is the 192-bit window of 2/π starting at fraction bit e - 1.
    let _ = writeln!(w, "$Lsc_big:");
    let _ = writeln!(w, "\tmov.b64 %rd1, %fd1;");
    let _ = writeln!(w, "\tshr.u64 %rd2, %rd1, 52;");
    let _ = writeln!(w, "\tcvt.u32.u64 %r2, %rd2;");
    let _ = writeln!(w, "\tsub.s32 %r3, %r2, 1075;");
    let _ = writeln!(w, "\tand.b64 %rd3, %rd1, 4503599627370495;");
    let _ = writeln!(w, "\tor.b64 %rd3, %rd3, 4503599627370496;");
    let _ = writeln!(w, "\tadd.s32 %r4, %r3, 62;");
    let _ = writeln!(w, "\tshr.u32 %r5, %r4, 6;");
    let _ = writeln!(w, "\tand.b32 %r6, %r4, 63;");
    let _ = writeln!(w, "\tsub.s32 %r7, 64, %r6;");
    let _ = writeln!(w, "\tmov.u64 %rd4, cq_two_over_pi;");
    let _ = writeln!(w, "\tmul.wide.u32 %rd5, %r5, 8;");
    let _ = writeln!(w, "\tadd.s64 %rd4, %rd4, %rd5;");
    let _ = writeln!(w, "\tld.const.u64 %rd6, [%rd4];");
    let _ = writeln!(w, "\tld.const.u64 %rd7, [%rd4+8];");
    let _ = writeln!(w, "\tld.const.u64 %rd8, [%rd4+16];");
    let _ = writeln!(w, "\tld.const.u64 %rd9, [%rd4+24];");
    // G0, G1, G2 (a shift by 64 gives 0 in PTX).
    for (g, a, b) in [
        ("%rd10", "%rd6", "%rd7"),
        ("%rd11", "%rd7", "%rd8"),
        ("%rd12", "%rd8", "%rd9"),
    ] {
        let _ = writeln!(w, "\tshl.b64 {g}, {a}, %r6;");
        let _ = writeln!(w, "\tshr.b64 %rd13, {b}, %r7;");
        let _ = writeln!(w, "\tor.b64 {g}, {g}, %rd13;");
    }
    // P mod 2^192 = (word2, word1, word0).
    let _ = writeln!(w, "\tmul.lo.u64 %rd13, %rd3, %rd12;");
    let _ = writeln!(w, "\tmul.hi.u64 %rd14, %rd3, %rd12;");
    let _ = writeln!(w, "\tmul.lo.u64 %rd15, %rd3, %rd11;");
    let _ = writeln!(w, "\tmul.hi.u64 %rd16, %rd3, %rd11;");
    let _ = writeln!(w, "\tmul.lo.u64 %rd17, %rd3, %rd10;");
    let _ = writeln!(w, "\tadd.u64 %rd18, %rd14, %rd15;");
    let _ = writeln!(w, "\tsetp.lt.u64 %p4, %rd18, %rd14;");
    let _ = writeln!(w, "\tadd.u64 %rd19, %rd16, %rd17;");
    let _ = writeln!(w, "\t@%p4 add.u64 %rd19, %rd19, 1;");
    // Quadrant: the two integer bits; fraction: the next 128 bits.
    let _ = writeln!(w, "\tshr.u64 %rd20, %rd19, 62;");
    let _ = writeln!(w, "\tcvt.u32.u64 %r1, %rd20;");
    let _ = writeln!(w, "\tshl.b64 %rd21, %rd19, 2;");
    let _ = writeln!(w, "\tshr.u64 %rd22, %rd18, 62;");
    let _ = writeln!(w, "\tor.b64 %rd21, %rd21, %rd22;");
    let _ = writeln!(w, "\tshl.b64 %rd22, %rd18, 2;");
    let _ = writeln!(w, "\tshr.u64 %rd23, %rd13, 62;");
    let _ = writeln!(w, "\tor.b64 %rd22, %rd22, %rd23;");
    // A fraction >= 1/2 becomes f - 1 (next quadrant, negative remainder).
    let _ = writeln!(w, "\tsetp.lt.s64 %p5, %rd21, 0;");
    let _ = writeln!(w, "\t@%p5 add.s32 %r1, %r1, 1;");
    let _ = writeln!(w, "\tneg.s64 %rd23, %rd22;");
    let _ = writeln!(w, "\tnot.b64 %rd24, %rd21;");
    let _ = writeln!(w, "\tsetp.eq.u64 %p6, %rd22, 0;");
    let _ = writeln!(w, "\t@%p6 add.u64 %rd24, %rd24, 1;");
    let _ = writeln!(w, "\t@%p5 mov.b64 %rd22, %rd23;");
    let _ = writeln!(w, "\t@%p5 mov.b64 %rd21, %rd24;");
    let _ = writeln!(w, "\tcvt.rn.f64.u64 %fd20, %rd21;");
    let _ = writeln!(w, "\tcvt.rn.f64.u64 %fd21, %rd22;");
    let _ = writeln!(w, "\tmul.rn.f64 %fd21, %fd21, {};", d(2f64.powi(-128)));
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd22, %fd20, {}, %fd21;",
        d(2f64.powi(-64))
    );
    let _ = writeln!(w, "\t@%p5 neg.f64 %fd22, %fd22;");
    // Odd symmetry: sin(-x) = -sin(x) through the quadrant and remainder.
    let _ = writeln!(w, "\tsetp.lt.f64 %p7, %fd0, {};", d(0.0));
    let _ = writeln!(w, "\t@%p7 neg.f64 %fd22, %fd22;");
    let _ = writeln!(w, "\t@%p7 neg.s32 %r1, %r1;");
    // r = f π/2
    let _ = writeln!(
        w,
        "\tmul.rn.f64 %fd23, %fd22, {};",
        d(6.123_233_995_736_766e-17)
    );
    let _ = writeln!(
        w,
        "\tfma.rn.f64 %fd5, %fd22, {}, %fd23;",
        d(std::f64::consts::FRAC_PI_2)
    );
    let _ = writeln!(w, "\tbra $Lsc_poly;");
    let _ = writeln!(w, "$Lsc_nan:\n\tmov.f64 %fd0, {};", d(f64::NAN));
    let _ = writeln!(w, "$Lsc_done:\n\tst.param.f64 [cq_ret], %fd0;\n\tret;\n}}");
    s
}

fn fmod() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        ".func (.param .f64 cq_ret) cq_fmod_f64(.param .f64 cq_x, .param .f64 cq_y)\n{{"
    );
    let _ = writeln!(
        w,
        "\t.reg .pred %p<8>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<16>;\n\t.reg .f64 %fd<4>;"
    );
    let _ = writeln!(w, "\tld.param.f64 %fd0, [cq_x];");
    let _ = writeln!(w, "\tld.param.f64 %fd1, [cq_y];");
    // ux, uy: bits; ex, ey: biased exponents (%rd4, %rd5); sx: sign of x.
    let _ = writeln!(w, "\tmov.b64 %rd0, %fd0;");
    let _ = writeln!(w, "\tmov.b64 %rd1, %fd1;");
    let _ = writeln!(w, "\tshr.u64 %rd4, %rd0, 52;");
    let _ = writeln!(w, "\tand.b64 %rd4, %rd4, 2047;");
    let _ = writeln!(w, "\tshr.u64 %rd5, %rd1, 52;");
    let _ = writeln!(w, "\tand.b64 %rd5, %rd5, 2047;");
    let _ = writeln!(w, "\tand.b64 %rd6, %rd0, -9223372036854775808;");
    // y == 0, y NaN or x not finite: NaN.
    let _ = writeln!(w, "\tshl.b64 %rd2, %rd1, 1;");
    let _ = writeln!(w, "\tsetp.eq.u64 %p0, %rd2, 0;");
    let _ = writeln!(w, "\tsetp.nan.f64 %p1, %fd1, %fd1;");
    let _ = writeln!(w, "\tor.pred %p0, %p0, %p1;");
    let _ = writeln!(w, "\tsetp.eq.u64 %p1, %rd4, 2047;");
    let _ = writeln!(w, "\tor.pred %p0, %p0, %p1;");
    let _ = writeln!(w, "\t@%p0 bra $Lfm_nan;");
    // |x| <= |y|: x itself, or a zero of x's sign when equal.
    let _ = writeln!(w, "\tshl.b64 %rd3, %rd0, 1;");
    let _ = writeln!(w, "\tsetp.lt.u64 %p2, %rd3, %rd2;");
    let _ = writeln!(w, "\t@%p2 bra $Lfm_x;");
    let _ = writeln!(w, "\tsetp.eq.u64 %p3, %rd3, %rd2;");
    let _ = writeln!(w, "\t@%p3 bra $Lfm_zero;");
    // Significands with the implicit bit; subnormals normalised.
    for (u, e, l) in [("%rd0", "%rd4", "x"), ("%rd1", "%rd5", "y")] {
        let _ = writeln!(w, "\tsetp.ne.u64 %p4, {e}, 0;");
        let _ = writeln!(w, "\t@%p4 bra $Lfm_norm_{l};");
        let _ = writeln!(w, "\tshl.b64 %rd7, {u}, 12;");
        let _ = writeln!(w, "$Lfm_sub_{l}:");
        let _ = writeln!(w, "\tsetp.lt.s64 %p5, %rd7, 0;");
        let _ = writeln!(w, "\t@%p5 bra $Lfm_subdone_{l};");
        let _ = writeln!(w, "\tsub.s64 {e}, {e}, 1;");
        let _ = writeln!(w, "\tshl.b64 %rd7, %rd7, 1;");
        let _ = writeln!(w, "\tbra $Lfm_sub_{l};");
        let _ = writeln!(w, "$Lfm_subdone_{l}:");
        let _ = writeln!(w, "\tsub.s64 %rd8, 1, {e};");
        let _ = writeln!(w, "\tcvt.u32.u64 %r0, %rd8;");
        let _ = writeln!(w, "\tshl.b64 {u}, {u}, %r0;");
        let _ = writeln!(w, "\tbra $Lfm_ready_{l};");
        let _ = writeln!(w, "$Lfm_norm_{l}:");
        let _ = writeln!(w, "\tand.b64 {u}, {u}, 4503599627370495;");
        let _ = writeln!(w, "\tor.b64 {u}, {u}, 4503599627370496;");
        let _ = writeln!(w, "$Lfm_ready_{l}:");
    }
    // Long division: for (; ex > ey; ex--) { i = ux - uy; if i >= 0 { if i == 0 → 0; ux = i }; ux <<= 1 }
    let _ = writeln!(w, "$Lfm_loop:");
    let _ = writeln!(w, "\tsetp.le.s64 %p0, %rd4, %rd5;");
    let _ = writeln!(w, "\t@%p0 bra $Lfm_last;");
    let _ = writeln!(w, "\tsub.s64 %rd9, %rd0, %rd1;");
    let _ = writeln!(w, "\tsetp.ge.s64 %p1, %rd9, 0;");
    let _ = writeln!(w, "\tsetp.eq.s64 %p2, %rd9, 0;");
    let _ = writeln!(w, "\t@%p2 bra $Lfm_zero;");
    let _ = writeln!(w, "\t@%p1 mov.b64 %rd0, %rd9;");
    let _ = writeln!(w, "\tshl.b64 %rd0, %rd0, 1;");
    let _ = writeln!(w, "\tsub.s64 %rd4, %rd4, 1;");
    let _ = writeln!(w, "\tbra $Lfm_loop;");
    let _ = writeln!(w, "$Lfm_last:");
    let _ = writeln!(w, "\tsub.s64 %rd9, %rd0, %rd1;");
    let _ = writeln!(w, "\tsetp.ge.s64 %p1, %rd9, 0;");
    let _ = writeln!(w, "\tsetp.eq.s64 %p2, %rd9, 0;");
    let _ = writeln!(w, "\t@%p2 bra $Lfm_zero;");
    let _ = writeln!(w, "\t@%p1 mov.b64 %rd0, %rd9;");
    // Renormalise: for (; ux >> 52 == 0; ux <<= 1, ex--);
    let _ = writeln!(w, "$Lfm_renorm:");
    let _ = writeln!(w, "\tshr.u64 %rd10, %rd0, 52;");
    let _ = writeln!(w, "\tsetp.ne.u64 %p3, %rd10, 0;");
    let _ = writeln!(w, "\t@%p3 bra $Lfm_scale;");
    let _ = writeln!(w, "\tshl.b64 %rd0, %rd0, 1;");
    let _ = writeln!(w, "\tsub.s64 %rd4, %rd4, 1;");
    let _ = writeln!(w, "\tbra $Lfm_renorm;");
    // ex > 0: normal result; else shift into a subnormal.
    let _ = writeln!(w, "$Lfm_scale:");
    let _ = writeln!(w, "\tsetp.gt.s64 %p4, %rd4, 0;");
    let _ = writeln!(w, "\t@!%p4 bra $Lfm_subnormal;");
    let _ = writeln!(w, "\tsub.s64 %rd0, %rd0, 4503599627370496;");
    let _ = writeln!(w, "\tshl.b64 %rd11, %rd4, 52;");
    let _ = writeln!(w, "\tor.b64 %rd0, %rd0, %rd11;");
    let _ = writeln!(w, "\tbra $Lfm_sign;");
    let _ = writeln!(w, "$Lfm_subnormal:");
    let _ = writeln!(w, "\tsub.s64 %rd12, 1, %rd4;");
    let _ = writeln!(w, "\tcvt.u32.u64 %r1, %rd12;");
    let _ = writeln!(w, "\tshr.u64 %rd0, %rd0, %r1;");
    let _ = writeln!(w, "$Lfm_sign:");
    let _ = writeln!(w, "\tor.b64 %rd0, %rd0, %rd6;");
    let _ = writeln!(w, "\tmov.b64 %fd2, %rd0;");
    let _ = writeln!(w, "\tbra $Lfm_done;");
    let _ = writeln!(w, "$Lfm_x:\n\tmov.f64 %fd2, %fd0;");
    let _ = writeln!(w, "\tbra $Lfm_done;");
    let _ = writeln!(w, "$Lfm_zero:\n\tmov.b64 %fd2, %rd6;");
    let _ = writeln!(w, "\tbra $Lfm_done;");
    let _ = writeln!(w, "$Lfm_nan:\n\tmov.f64 %fd2, {};", d(f64::NAN));
    let _ = writeln!(w, "$Lfm_done:\n\tst.param.f64 [cq_ret], %fd2;\n\tret;\n}}");
    s
}
