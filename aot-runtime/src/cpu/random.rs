//! A small seeded generator (xoshiro256** seeded through SplitMix64) and
//! the `rand`/`randn`/dropout fills built on it. Deterministic for a given seed.

use crate::dtype::DType;
use crate::error::Result;
use crate::storage::{try_collect, CpuStorage};
use half::{bf16, f16};

/// xoshiro256**: fast, 256 bits of state, good statistical quality.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
    /// The second value of the last Box-Muller pair, not yet returned.
    spare: Option<f64>,
}

/// SplitMix64, used to expand a seed into a full state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        // SplitMix64 is a bijection of its counter, so the four outputs of
        // consecutive counters are never all zero.
        Rng { s, spare: None }
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform on [0, 1) with `bits` random bits (multiples of 2^-bits), so
    /// the value is exact in a type with a `bits`-bit significand.
    fn uniform_bits(&mut self, bits: u32) -> f64 {
        (self.next_u64() >> (64 - bits)) as f64 * (-(bits as f64)).exp2()
    }

    /// Uniform on [0, 1) (53 random bits).
    pub fn uniform(&mut self) -> f64 {
        self.uniform_bits(53)
    }

    /// Standard normal, by the Box-Muller transform (values come in pairs).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 - u is in (0, 1], so the log is finite.
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare = Some(r * sin);
        r * cos
    }
}

/// `n` values uniform on [0, 1) of `dtype`. Floating dtypes draw as many bits
/// as their significand holds, so no value rounds up to 1. (I64 and Bool get
/// the uniform values cast: all 0 and almost all true.) A buffer that cannot
/// be allocated is an error, and then nothing is drawn.
pub fn rand_uniform(dtype: DType, n: usize, rng: &mut Rng) -> Result<CpuStorage> {
    const OP: &str = "rand";
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(try_collect(OP, (0..n).map(|_| rng.uniform_bits(24) as f32))?),
        DType::F64 => CpuStorage::F64(try_collect(OP, (0..n).map(|_| rng.uniform_bits(53)))?),
        DType::F16 => CpuStorage::F16(try_collect(OP, (0..n).map(|_| f16::from_f64(rng.uniform_bits(11))))?),
        DType::BF16 => CpuStorage::BF16(try_collect(OP, (0..n).map(|_| bf16::from_f64(rng.uniform_bits(8))))?),
        DType::I64 | DType::Bool => CpuStorage::from_f64s(OP, dtype, (0..n).map(|_| rng.uniform()))?,
    })
}

/// `n` standard normal values of `dtype` (rounded from f64).
pub fn randn(dtype: DType, n: usize, rng: &mut Rng) -> Result<CpuStorage> {
    CpuStorage::from_f64s("randn", dtype, (0..n).map(|_| rng.normal()))
}

/// Dropout's mask: `n` values of `dtype`, each `scale` where a uniform draw
/// is `>= p` and 0 where it is not, one draw per element in order.
pub fn dropout_mask(dtype: DType, n: usize, p: f64, scale: f64, rng: &mut Rng) -> Result<CpuStorage> {
    // from_f64s allocates before it draws, so a refused allocation leaves
    // the generator untouched.
    CpuStorage::from_f64s("dropout", dtype, (0..n).map(|_| if rng.uniform() >= p { scale } else { 0.0 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_per_seed() {
        let (mut a, mut b, mut c) = (Rng::new(42), Rng::new(42), Rng::new(43));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert_eq!(randn(DType::F32, 10, &mut Rng::new(1)).unwrap(), randn(DType::F32, 10, &mut Rng::new(1)).unwrap());
        assert_eq!(rand_uniform(DType::F64, 10, &mut Rng::new(1)).unwrap(), rand_uniform(DType::F64, 10, &mut Rng::new(1)).unwrap());
    }

    #[test]
    fn uniform_is_in_range_with_the_right_moments() {
        for dtype in DType::FLOATS {
            let s = rand_uniform(dtype, 100_000, &mut Rng::new(7)).unwrap();
            assert_eq!(s.dtype(), dtype);
            let v: Vec<f64> = (0..s.len()).map(|i| s.get_f64(i)).collect();
            assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}");
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
            assert!((mean - 0.5).abs() < 0.01, "{dtype}: {mean}");
            assert!((var - 1.0 / 12.0).abs() < 0.01, "{dtype}: {var}");
        }
    }

    #[test]
    fn normal_has_the_right_moments() {
        let mut rng = Rng::new(3);
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        assert!(v.iter().all(|x| x.is_finite()));
        let within1 = v.iter().filter(|x| x.abs() < 1.0).count() as f64 / n as f64;
        assert!((within1 - 0.6827).abs() < 0.01, "{within1}");
        let s = randn(DType::BF16, 1000, &mut Rng::new(5)).unwrap();
        assert_eq!((s.dtype(), s.len()), (DType::BF16, 1000));
    }
}
