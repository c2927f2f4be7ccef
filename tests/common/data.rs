//! Input columns for the differential cases: a length, a distribution and a
//! seed, expanded deterministically (so a failing case prints as a few
//! numbers, and a 10^6-element input costs proptest nothing to shrink).

use super::value::Col;
use computeq::expr::DType;
use computeq::plumbing::backends::cpu_simd::{BLOCK, LEAF};
use std::fmt;

/// How the values of a column are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    /// Small integers (floats: multiples of 0.5 in [-8, 8]): exact arithmetic.
    Small,
    /// Integers over the whole range; floats in ±[0.001, 1000).
    Uniform,
    /// Mostly small, with ~10% of NaN, ±inf, ±0, MIN/MAX, subnormals.
    Specials,
    /// Few distinct values (ties for argmin/argmax and filters).
    Ties,
    /// A ramp, ascending or descending.
    Ramp,
    /// Magnitudes over the whole exponent range; integers near MIN/MAX.
    Wide,
    /// One value repeated: all NaN, all -0.0, all +inf, all MAX.
    Degenerate,
}

impl Dist {
    pub const ALL: [Dist; 7] = [
        Dist::Small,
        Dist::Uniform,
        Dist::Specials,
        Dist::Ties,
        Dist::Ramp,
        Dist::Wide,
        Dist::Degenerate,
    ];

    /// Picks a distribution from a byte, weighted toward the useful ones.
    pub fn from_byte(b: u8) -> Dist {
        match b {
            0..=69 => Dist::Small,
            70..=119 => Dist::Uniform,
            120..=174 => Dist::Specials,
            175..=199 => Dist::Ties,
            200..=224 => Dist::Ramp,
            225..=242 => Dist::Wide,
            _ => Dist::Degenerate,
        }
    }
}

/// Interesting lengths: empty, tiny, around a block, around a leaf (the unit
/// of partial results), several leaves, and large.
pub const LENGTHS: [usize; 21] = [
    0,
    1,
    2,
    3,
    7,
    31,
    33,
    100,
    BLOCK - 1,
    BLOCK,
    BLOCK + 1,
    2 * BLOCK + 5,
    LEAF - 1,
    LEAF,
    LEAF + 1,
    3 * LEAF + 17,
    5000,
    100_003,
    262_147,
    1_000_000,
    999_999,
];

/// Picks a length from two bytes: mostly small and boundary lengths, the
/// large ones (≥ 10^5) about one case in twenty.
pub fn length_from(sel: u8, extra: u16) -> usize {
    match sel {
        0..=9 => 0,
        10..=24 => 1,
        25..=109 => (extra as usize) % 300,
        110..=199 => LENGTHS[2 + (extra as usize) % 15],
        200..=239 => (extra as usize) % 5000,
        240..=247 => LENGTHS[17 + (extra as usize) % 2],
        _ => LENGTHS[19 + (extra as usize) % 2],
    }
}

/// One input column: its type, length, distribution and seed.
#[derive(Clone, PartialEq, Eq)]
pub struct DataSpec {
    pub dtype: DType,
    pub len: usize,
    pub dist: Dist,
    pub seed: u64,
}

impl fmt::Debug for DataSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}] {:?} seed={:#x}",
            self.dtype, self.len, self.dist, self.seed
        )
    }
}

/// splitmix64: tiny, good enough, and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl DataSpec {
    /// The column's values.
    pub fn generate(&self) -> Col {
        let mut rng = Rng::new(self.seed);
        let n = self.len;
        // One choice per column for the distributions that need it.
        let pick = rng.next();
        macro_rules! ints {
            ($t:ty, $v:ident) => {{
                let specials: [$t; 6] = [
                    <$t>::MIN,
                    <$t>::MAX,
                    0,
                    (0 as $t).wrapping_sub(1),
                    1,
                    <$t>::MIN.wrapping_add(1),
                ];
                let small = |r: &mut Rng| -> $t {
                    if <$t>::MIN == 0 {
                        r.below(17) as $t
                    } else {
                        (r.below(17) as i64 - 8) as $t
                    }
                };
                Col::$v(
                    (0..n)
                        .map(|i| match self.dist {
                            Dist::Small => small(&mut rng),
                            Dist::Uniform => rng.next() as $t,
                            Dist::Specials => {
                                if rng.below(10) == 0 {
                                    specials[rng.below(6) as usize]
                                } else {
                                    small(&mut rng)
                                }
                            }
                            Dist::Ties => (rng.below(3) as $t),
                            Dist::Ramp => {
                                let k = (i as i64).wrapping_sub((n / 2) as i64);
                                if pick & 1 == 0 {
                                    k as $t
                                } else {
                                    k.wrapping_neg() as $t
                                }
                            }
                            Dist::Wide => {
                                let off = rng.below(1000) as $t;
                                if rng.next() & 1 == 0 {
                                    <$t>::MAX.wrapping_sub(off)
                                } else {
                                    <$t>::MIN.wrapping_add(off)
                                }
                            }
                            Dist::Degenerate => specials[(pick % 6) as usize],
                        })
                        .collect(),
                )
            }};
        }
        macro_rules! floats {
            ($t:ty, $v:ident, $maxexp:expr) => {{
                let specials: [$t; 12] = [
                    <$t>::NAN,
                    <$t>::INFINITY,
                    <$t>::NEG_INFINITY,
                    0.0,
                    -0.0,
                    <$t>::MAX,
                    <$t>::MIN,
                    <$t>::MIN_POSITIVE,
                    <$t>::MIN_POSITIVE / 4.0,
                    1.0,
                    -1.0,
                    <$t>::EPSILON,
                ];
                let small = |r: &mut Rng| -> $t { (r.below(33) as i64 - 16) as $t * 0.5 };
                let degenerate: [$t; 4] = [<$t>::NAN, -0.0, <$t>::INFINITY, <$t>::MAX];
                Col::$v(
                    (0..n)
                        .map(|i| match self.dist {
                            Dist::Small => small(&mut rng),
                            Dist::Uniform => {
                                let m = rng.unit() * 2.0 - 1.0;
                                let e = rng.below(7) as i32 - 3;
                                (m * 10f64.powi(e)) as $t
                            }
                            Dist::Specials => {
                                if rng.below(10) == 0 {
                                    specials[rng.below(12) as usize]
                                } else {
                                    small(&mut rng)
                                }
                            }
                            Dist::Ties => rng.below(3) as $t - 1.0,
                            Dist::Ramp => {
                                let k = (i as f64 - (n / 2) as f64) * 0.25;
                                (if pick & 1 == 0 { k } else { -k }) as $t
                            }
                            Dist::Wide => {
                                let e = rng.below(2 * $maxexp) as i32 - $maxexp as i32;
                                let m = 1.0 + rng.unit();
                                let s = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
                                (s * m * 2f64.powi(e)) as $t
                            }
                            Dist::Degenerate => degenerate[(pick % 4) as usize],
                        })
                        .collect(),
                )
            }};
        }
        match self.dtype {
            DType::Bool => Col::Bool((0..n).map(|_| rng.next() & 1 == 1).collect()),
            DType::I32 => ints!(i32, I32),
            DType::U32 => ints!(u32, U32),
            DType::I64 => ints!(i64, I64),
            DType::U64 => ints!(u64, U64),
            DType::F32 => floats!(f32, F32, 127u64),
            DType::F64 => floats!(f64, F64, 1023u64),
        }
    }
}
