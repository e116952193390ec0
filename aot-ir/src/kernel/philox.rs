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

#[cfg(test)]
mod tests;
