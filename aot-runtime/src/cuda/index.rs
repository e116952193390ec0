//! CUDA gathers and scatters along a dim by an i64 index (`index_select`,
//! `gather`, `embedding`, `scatter_add`, `index_copy`, `index_add`).
//!
//! The index's values decide which elements move and must all be checked
//! before anything is written, so the host reads the index, works out the
//! element offsets exactly as the CPU does (`cpu::index_offsets`, which
//! checks every value), and uploads them. Then:
//! - a gather is one `take` kernel, `out[i] = src[from[i]]`;
//! - an accumulating scatter is `scatter_add`'s plan (each destination's
//!   addends summed in f64, in row-major order, rounded once; i64
//!   exactly), so it computes the CPU's bits with no atomics;
//! - a copying scatter takes, per destination, its last source in
//!   row-major order (the CPU's last write) and puts it.

use super::device::Gpu;
use super::ops::{check_within, grid, i64_bytes, plan_pairs, put, scatter_plan, unit, BLOCK};
use super::sim::Entry;
use super::CudaStorage;
use crate::backend::Indexed;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;

/// The storage offsets of `l`'s elements at the index's positions.
fn host_offsets(op: &'static str, l: &Layout, ix: &Indexed<'_, CudaStorage>) -> Result<Vec<usize>> {
    if ix.index.dtype != DType::I64 {
        return Err(AotError::dtype(op, format!("index must be of dtype I64, found {}", ix.index.dtype)));
    }
    let index = ix.index.host(op)?;
    crate::backend::index_offsets(op, l, &Indexed { index: &index, layout: ix.layout, dim: ix.dim })
}

/// The take kernel: `out[i] = src[from[i]]`.
pub(super) fn take_source(dtype: DType) -> (String, Entry) {
    let name = format!("aot_take_{}", dtype.name());
    let t = dtype.storage();
    let body = format!(
        "extern \"C\" __global__ void {name}({t} *out, const {t} *src, const long long *from, const aot_params_{name} p) {{\n\
         \x20   const long long step = (long long)blockDim.x * gridDim.x;\n\
         \x20   for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step) out[i] = src[from[i]];\n}}"
    );
    let pointers = vec![format!("{t} *"), format!("const {t} *"), "const long long *".to_string()];
    (unit(&name, &[dtype], &body), Entry { name, pointers, sync: false })
}

/// A new dense buffer of `src`'s elements at offsets `from` (each inside `src`).
fn take(src: &CudaStorage, op: &'static str, from: &[i64], gpu: &Gpu) -> Result<CudaStorage> {
    let n = from.len();
    let out = CudaStorage { mem: gpu.alloc(op, n * src.dtype.size_in_bytes())?, dtype: src.dtype, len: n, ordinal: src.ordinal };
    if n == 0 {
        return Ok(out);
    }
    let from = gpu.upload(op, &i64_bytes(from))?;
    let (source, entry) = take_source(src.dtype);
    let bufs = [&out.mem, &src.mem, &from].map(|m| m.address(gpu));
    // SAFETY: `out` is new with `n` elements of `src`'s dtype; every
    // offset of `from` lies inside `src` (a layout checked against it).
    unsafe { gpu.launch(op, &source, &entry, (grid(n), BLOCK), &bufs, &[n as u64]) }?;
    Ok(out)
}

/// See [`crate::backend::Backend::gather`].
pub(super) fn gather(src: &CudaStorage, op: &'static str, l: &Layout, ix: Indexed<'_, CudaStorage>) -> Result<CudaStorage> {
    check_within(op, l, src.len, "source")?;
    let offs = host_offsets(op, l, &ix)?;
    let from: Vec<i64> = offs.iter().map(|&o| o as i64).collect();
    take(src, op, &from, src.gpu(op)?)
}

/// See [`crate::backend::Backend::scatter`].
pub(super) fn scatter(
    src: &CudaStorage,
    op: &'static str,
    ls: &Layout,
    ix: Indexed<'_, CudaStorage>,
    dst: &mut CudaStorage,
    ld: &Layout,
    accumulate: bool,
) -> Result<()> {
    if src.dtype != dst.dtype {
        return Err(AotError::dtype(op, format!("source dtype {} does not match destination dtype {}", src.dtype, dst.dtype)));
    }
    if ls.shape != ix.layout.shape {
        return Err(AotError::internal(op, format!("source shape {:?} is not the index shape {:?}", ls.shape, ix.layout.shape)));
    }
    check_within(op, ls, src.len, "source")?;
    check_within(op, ld, dst.len, "destination")?;
    let doffs = host_offsets(op, ld, &ix)?;
    let pairs: Vec<(usize, usize)> = doffs.into_iter().zip(ls.offsets()).collect();
    if pairs.is_empty() {
        return Ok(());
    }
    let gpu = dst.gpu(op)?;
    let p = plan_pairs(pairs, true);
    if accumulate {
        return scatter_plan(src, op, p, dst, gpu);
    }
    let last: Vec<i64> = p.starts.windows(2).map(|w| p.from[(w[1] - 1) as usize]).collect();
    let vals = take(src, op, &last, gpu)?;
    let at = gpu.upload(op, &i64_bytes(&p.at))?;
    put(op, gpu, dst, &vals, &at, p.at.len())
}
