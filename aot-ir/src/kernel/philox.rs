//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1,
//! 2, 3", SC 2011): a counter-based generator. Its output is a pure
//! function of a 128-bit counter and a 64-bit key, so any element of a
//! random tensor can be computed on its own, by any thread, on any device,
//! from (seed, offset): the basis of functionalized RNG, where the same
//! seed gives the same numbers in eager and compiled code and on the CPU
//! and CUDA.
//!
//! [`philox4x32_10`] is the CPU definition; [`PHILOX_C`] is the same
//! function in C, for the CUDA renderer (a `__device__` function on the
//! GPU; plain C through the host shim), tested to agree bit for bit.

/// The round multipliers and key increments (the generator's constants).
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The 128 random bits of `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// [`philox4x32_10`] in C: `aot_philox4x32_10(c0, c1, c2, c3, k0, k1,
/// out)` writes the four words to `out`. Guarded, so units that each
/// include it can be concatenated.
pub const PHILOX_C: &str = "\
#ifndef AOT_PHILOX
#define AOT_PHILOX
static __device__ inline void aot_philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3,
                                                unsigned k0, unsigned k1, unsigned *out) {
    for (int round = 0; round < 10; round++) {
        if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        const unsigned long long p0 = (unsigned long long)0xD2511F53u * c0;
        const unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c2;
        const unsigned hi0 = (unsigned)(p0 >> 32), lo0 = (unsigned)p0;
        const unsigned hi1 = (unsigned)(p1 >> 32), lo1 = (unsigned)p1;
        const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
#endif
";

/// The stream of a generator: element `i` of a draw that starts at block
/// `offset` is computed from block `offset + i / per` (the Philox output of
/// counter `[b lo, b hi, 0, 0]` under key `[seed lo, seed hi]`), lane
/// `i % per`. A draw of `n` elements advances the offset by
/// `ceil(n / per)`. Every value is a pure function of (seed, block, lane),
/// so a device computes any element on its own, and the CPU and CUDA give
/// the same bits.
pub fn block(seed: u64, b: u64) -> [u32; 4] {
    philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32])
}

/// The blocks `first, first + 1, ..` (`N` of them) of the stream under
/// `seed`, as [`block`] computes them one by one: the rounds run over
/// arrays of counters, so that a caller compiled for wide vectors
/// (`#[inline(always)]` into a SIMD-dispatched loop) computes `N` blocks
/// per instruction.
#[inline(always)]
pub fn blocks<const N: usize>(seed: u64, first: u64) -> [[u32; 4]; N] {
    let (mut c0, mut c1, mut c2, mut c3) = ([0u32; N], [0u32; N], [0u32; N], [0u32; N]);
    for j in 0..N {
        let b = first.wrapping_add(j as u64);
        (c0[j], c1[j]) = (b as u32, (b >> 32) as u32);
    }
    let (mut k0, mut k1) = (seed as u32, (seed >> 32) as u32);
    for round in 0..10 {
        if round > 0 {
            (k0, k1) = (k0.wrapping_add(W0), k1.wrapping_add(W1));
        }
        for j in 0..N {
            let p0 = u64::from(M0) * u64::from(c0[j]);
            let p1 = u64::from(M1) * u64::from(c2[j]);
            let (n0, n2) = ((p1 >> 32) as u32 ^ c1[j] ^ k0, (p0 >> 32) as u32 ^ c3[j] ^ k1);
            (c0[j], c1[j], c2[j], c3[j]) = (n0, p1 as u32, n2, p0 as u32);
        }
    }
    std::array::from_fn(|j| [c0[j], c1[j], c2[j], c3[j]])
}

/// `2^-24`: the spacing of the uniform f32 values.
const TWO_M24: f32 = 5.960_464_5e-8;

/// A uniform f32 on `[0, 1)` from one word: its top 24 bits, so the value
/// is exact and never rounds up to 1.
pub fn uniform_f32(w: u32) -> f32 {
    (w >> 8) as f32 * TWO_M24
}

/// A uniform f64 on `[0, 1)` from two words (53 bits).
pub fn uniform_f64(hi: u32, lo: u32) -> f64 {
    ((u64::from(hi) << 32 | u64::from(lo)) >> 11) as f64 * f64::from_bits(0x3CA0_0000_0000_0000)
}

/// Two standard normals from two words, by the Box-Muller transform in
/// f32 with the kernel stage's own `log`, `sin` and `cos` (bit-identical
/// on the CPU and in CUDA C) and the correctly rounded `sqrt`:
/// `r = sqrt(-2 ln u1)`, `u1 = 1 - uniform(w0)` in `(0, 1]`, and
/// `(r cos t, r sin t)`, `t = 2 pi uniform(w1)`. Their magnitude is below
/// 5.8 (the tail beyond has probability 8e-9). Wider dtypes get these
/// values widened, so a stream is the same in every dtype and on every
/// device.
pub fn normal_pair(w0: u32, w1: u32) -> (f32, f32) {
    let u1 = 1.0 - uniform_f32(w0);
    let r = (-2.0 * super::math::log(u1)).sqrt();
    let t = std::f32::consts::TAU * uniform_f32(w1);
    (r * super::math::cos(t), r * super::math::sin(t))
}

#[cfg(test)]
mod tests;
