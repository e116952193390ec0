//! Random fills on the device: the kernels of `aot_ir::kernel::random`,
//! which compute the generator's Philox stream element by element as the
//! CPU backend does, so a seed gives the same bits on the CPU and on CUDA.

use super::device::gpu;
use super::sim::Entry;
use super::CudaStorage;
use crate::backend::{Distribution, Rng};
use crate::dtype::DType;
use crate::error::Result;
use aot_ir::kernel::random::{lanes, render_random, RandomKind};
use half::{bf16, f16};

/// Dropout's kept value as the bits of a `dtype` element (the CPU's
/// conversion of `scale`).
fn kept_bits(dtype: DType, scale: f64) -> u64 {
    match dtype {
        DType::F32 => u64::from((scale as f32).to_bits()),
        DType::F64 => scale.to_bits(),
        DType::F16 => u64::from(f16::from_f64(scale).to_bits()),
        DType::BF16 => u64::from(bf16::from_f64(scale).to_bits()),
        DType::I64 => scale as i64 as u64,
        DType::Bool => u64::from(scale != 0.0),
    }
}

/// `n` elements of `dist` and `dtype` on device `ordinal`, drawn from
/// `rng` (advanced only once the buffer exists).
pub(super) fn fill(op: &'static str, ordinal: usize, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<CudaStorage> {
    let gpu = gpu(op, ordinal)?;
    let bytes = n.checked_mul(dtype.size_in_bytes()).ok_or(crate::error::AotError::OutOfMemory { op, bytes: usize::MAX })?;
    let mem = gpu.alloc(op, bytes)?;
    let (kind, p, kept) = match dist {
        Distribution::Uniform => (RandomKind::Uniform, 0.0, 0),
        Distribution::Normal => (RandomKind::Normal, 0.0, 0),
        Distribution::Dropout { p, scale } => (RandomKind::Dropout, p, kept_bits(dtype, scale)),
    };
    let kd = dtype;
    let per = lanes(kind, kd);
    let (seed, offset) = rng.take(n, per);
    if n > 0 {
        let r = render_random(kind, kd);
        let entry = Entry { name: r.name.clone(), pointers: vec![format!("{} *", kd.storage())], sync: false };
        let blocks = n.div_ceil(per);
        let grid = u32::try_from(blocks.div_ceil(256).clamp(1, 1024)).unwrap_or(1024);
        let words = [n as u64, seed, offset, p.to_bits(), kept];
        // SAFETY: `mem` is a new buffer of this device holding `n`
        // elements of `dtype`, the entry's pointer type; the kernel writes
        // elements `0..n` only, and nothing else uses `mem` yet.
        unsafe { gpu.launch(op, &r.source, &entry, (grid, 256), &[mem.address(gpu)], &words) }?;
    }
    Ok(CudaStorage { mem, dtype, len: n, ordinal })
}
