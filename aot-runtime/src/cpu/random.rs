//! The generator behind `rand`, `randn`, `rand_like` and dropout: the
//! counter-based Philox4x32-10 stream of `aot_ir::kernel::philox`, whose
//! state is a seed and an offset (a count of 128-bit blocks drawn).
//!
//! Element `i` of a draw is a pure function of (seed, offset + i / per,
//! lane), so the CPU fills large tensors in parallel and the CUDA backend
//! computes the same bits (see `philox::block`). Per block of four 32-bit
//! words:
//! - uniform f32, f16, bf16, i64, bool: four elements, each from one
//!   word's top 24, 11, 8 or 32 bits (exact values, never 1; i64 and bool
//!   get the cast: all 0, almost all true);
//! - uniform f64: two elements of 53 bits;
//! - normal: four elements, two Box-Muller pairs computed in f32
//!   (`philox::normal_pair`) and converted to the dtype;
//! - dropout's mask: four elements, each `scale` where its uniform f32 is
//!   `>= p`, else 0.

use super::strided::par_chunks;
use crate::backend::{CpuStorage, Rng};
use crate::dtype::DType;
use crate::error::Result;
use crate::host_alloc::try_vec;
use aot_ir::kernel::philox::{blocks, normal_pair, uniform_f32, uniform_f64};
use aot_ir::kernel::random::{lanes, RandomKind};
use half::{bf16, f16};
use std::mem::MaybeUninit;

/// Draws of at least this many elements fill in parallel.
const PAR_MIN: usize = 1 << 16;
/// Blocks computed together: one AVX-512 register of 32-bit counters.
const BATCH: usize = 16;

impl Rng {
    /// `n` elements, `per` to a block, lane `k` of block `w` giving
    /// `f(&w, k)`. The offset advances only once the buffer is allocated.
    fn draw<T: Send>(&mut self, op: &'static str, n: usize, per: usize, f: impl Fn(&[u32; 4], usize) -> T + Sync) -> Result<Vec<T>> {
        let mut v: Vec<T> = try_vec(op, n)?;
        let (seed, start) = (self.seed, self.offset);
        // `out` holds the elements from `first` on (a multiple of `per`).
        let fill = |first: usize, out: &mut [MaybeUninit<T>]| {
            let first_block = start.wrapping_add((first / per) as u64);
            match per {
                4 => fill_lanes::<T, 4>(seed, first_block, out, &f),
                _ => fill_lanes::<T, 2>(seed, first_block, out, &f),
            }
        };
        let spare = &mut v.spare_capacity_mut()[..n];
        if n < PAR_MIN {
            fill(0, spare);
        } else {
            // Pieces of whole batches of blocks, each written in place.
            par_chunks(spare, per * BATCH * 256, &fill);
        }
        // SAFETY: `fill_lanes` wrote every one of the `n` slots (its loops
        // cover each chunk of `spare` element by element).
        unsafe { v.set_len(n) };
        self.offset = start.wrapping_add(n.div_ceil(per) as u64);
        Ok(v)
    }
}

/// Writes every slot of `out`: element `i` is lane `i % PER` of block
/// `first_block + i / PER`, mapped by `f`. Compiled for the widest vectors
/// this CPU has: the Philox rounds' 32x32-bit products take one
/// `vpmuludq` per eight blocks on AVX-512, and the lanes' map vectorises
/// with them.
fn fill_lanes<T, const PER: usize>(seed: u64, first_block: u64, out: &mut [MaybeUninit<T>], f: &impl Fn(&[u32; 4], usize) -> T) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked on the line above).
            return unsafe { fill_lanes_avx512::<T, PER, _>(seed, first_block, out, f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked on the line above).
            return unsafe { fill_lanes_avx2::<T, PER, _>(seed, first_block, out, f) };
        }
    }
    fill_lanes_body::<T, PER, _>(seed, first_block, out, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fill_lanes_avx512<T, const PER: usize, F: Fn(&[u32; 4], usize) -> T>(
    seed: u64,
    first_block: u64,
    out: &mut [MaybeUninit<T>],
    f: &F,
) {
    fill_lanes_body::<T, PER, F>(seed, first_block, out, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fill_lanes_avx2<T, const PER: usize, F: Fn(&[u32; 4], usize) -> T>(
    seed: u64,
    first_block: u64,
    out: &mut [MaybeUninit<T>],
    f: &F,
) {
    fill_lanes_body::<T, PER, F>(seed, first_block, out, f)
}

#[inline(always)]
fn fill_lanes_body<T, const PER: usize, F: Fn(&[u32; 4], usize) -> T>(seed: u64, first_block: u64, out: &mut [MaybeUninit<T>], f: &F) {
    for (c, chunk) in out.chunks_mut(PER * BATCH).enumerate() {
        let blocks = blocks::<BATCH>(seed, first_block.wrapping_add((c * BATCH) as u64));
        for (i, o) in chunk.iter_mut().enumerate() {
            o.write(f(&blocks[i / PER], i % PER));
        }
    }
}

/// Elements per block ([`lanes`]: two for uniform f64, else four).
fn per(kind: RandomKind, dtype: DType) -> usize {
    lanes(kind, dtype)
}

/// Lane `k` of a normal block.
fn normal_lane(w: &[u32; 4], k: usize) -> f32 {
    let (c, s) = normal_pair(w[k & 2], w[(k & 2) + 1]);
    if k & 1 == 0 {
        c
    } else {
        s
    }
}

/// `n` values uniform on [0, 1) of `dtype`. A buffer that cannot be
/// allocated is an error, and then nothing is drawn.
pub fn rand_uniform(dtype: DType, n: usize, rng: &mut Rng) -> Result<CpuStorage> {
    const OP: &str = "rand";
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(rng.draw(OP, n, per(RandomKind::Uniform, dtype), |w, k| uniform_f32(w[k]))?),
        DType::F64 => CpuStorage::F64(rng.draw(OP, n, per(RandomKind::Uniform, dtype), |w, k| uniform_f64(w[2 * k], w[2 * k + 1]))?),
        DType::F16 => {
            CpuStorage::F16(rng.draw(OP, n, per(RandomKind::Uniform, dtype), |w, k| f16::from_f32((w[k] >> 21) as f32 * (2f32).powi(-11)))?)
        }
        DType::BF16 => CpuStorage::BF16(
            rng.draw(OP, n, per(RandomKind::Uniform, dtype), |w, k| bf16::from_f32((w[k] >> 24) as f32 * (2f32).powi(-8)))?,
        ),
        DType::I64 => CpuStorage::I64(rng.draw(OP, n, per(RandomKind::Uniform, dtype), |_, _| 0)?),
        DType::Bool => CpuStorage::Bool(rng.draw(OP, n, per(RandomKind::Uniform, dtype), |w, k| w[k] != 0)?),
    })
}

/// `n` standard normal values of `dtype`.
pub fn randn(dtype: DType, n: usize, rng: &mut Rng) -> Result<CpuStorage> {
    const OP: &str = "randn";
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(rng.draw(OP, n, per(RandomKind::Normal, dtype), normal_lane)?),
        DType::F64 => CpuStorage::F64(rng.draw(OP, n, per(RandomKind::Normal, dtype), |w, k| f64::from(normal_lane(w, k)))?),
        DType::F16 => CpuStorage::F16(rng.draw(OP, n, per(RandomKind::Normal, dtype), |w, k| f16::from_f32(normal_lane(w, k)))?),
        DType::BF16 => CpuStorage::BF16(rng.draw(OP, n, per(RandomKind::Normal, dtype), |w, k| bf16::from_f32(normal_lane(w, k)))?),
        DType::I64 => CpuStorage::I64(rng.draw(OP, n, per(RandomKind::Normal, dtype), |w, k| normal_lane(w, k) as i64)?),
        DType::Bool => CpuStorage::Bool(rng.draw(OP, n, per(RandomKind::Normal, dtype), |w, k| normal_lane(w, k) != 0.0)?),
    })
}

/// Dropout's mask: `n` values of `dtype`, each `scale` where its uniform
/// draw is `>= p` and 0 where it is not.
pub fn dropout_mask(dtype: DType, n: usize, p: f64, scale: f64, rng: &mut Rng) -> Result<CpuStorage> {
    const OP: &str = "dropout";
    let keep = move |w: &[u32; 4], k: usize| f64::from(uniform_f32(w[k])) >= p;
    Ok(match dtype {
        DType::F32 => {
            CpuStorage::F32(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| if keep(w, k) { scale as f32 } else { 0.0 })?)
        }
        DType::F64 => CpuStorage::F64(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| if keep(w, k) { scale } else { 0.0 })?),
        DType::F16 => {
            CpuStorage::F16(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| f16::from_f64(if keep(w, k) { scale } else { 0.0 }))?)
        }
        DType::BF16 => {
            CpuStorage::BF16(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| bf16::from_f64(if keep(w, k) { scale } else { 0.0 }))?)
        }
        DType::I64 => {
            CpuStorage::I64(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| if keep(w, k) { scale as i64 } else { 0 })?)
        }
        DType::Bool => CpuStorage::Bool(rng.draw(OP, n, per(RandomKind::Dropout, dtype), |w, k| keep(w, k) && scale != 0.0)?),
    })
}

#[cfg(test)]
mod tests;
