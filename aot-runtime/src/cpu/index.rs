//! Gathers and scatters along one dim by an i64 index tensor: [`gather`]
//! (`index_select`, `gather`, `embedding`) makes a new buffer, [`scatter`]
//! (`scatter_add`, `index_copy`, `index_add`) writes into an existing one.
//!
//! Both walk the positions `p` of the index layout in row-major order; the
//! element addressed at `p` is the data layout's element at `p` with
//! coordinate `dim` replaced by the index value there. The offsets are
//! worked out (and every index value checked) before anything is read or
//! written, so an out-of-range index fails with nothing written.

use super::strided::check_layout;
use crate::backend::CpuStorage;
use crate::backend::{index_offsets, Indexed};
use crate::error::{AotError, Result};
use crate::layout::Layout;

/// `out[p] = src[l at p, coordinate dim = index[p]]`, contiguous, of the
/// index layout's shape.
pub fn gather(op: &'static str, src: &CpuStorage, l: &Layout, ix: Indexed<'_, CpuStorage>) -> Result<CpuStorage> {
    check_layout(op, l, src.len())?;
    let offs = index_offsets(op, l, &ix)?;
    crate::dispatch_cpu!(src, v => {
        let mut out = crate::host_alloc::try_vec(op, offs.len())?;
        out.extend(offs.iter().map(|&o| v[o]));
        Ok(crate::backend::CpuElem::into_storage(out))
    })
}

/// `dst[ld at p, coordinate dim = index[p]] = src[ls at p]` (or `+=` when
/// `accumulate`) for every position `p` of the index layout. Sums go
/// through f64 per destination in row-major order and round once (i64
/// adds exactly, wrapping), as [`super::scatter_add`] does.
pub fn scatter(
    op: &'static str,
    src: &CpuStorage,
    ls: &Layout,
    ix: Indexed<'_, CpuStorage>,
    dst: &mut CpuStorage,
    ld: &Layout,
    accumulate: bool,
) -> Result<()> {
    if src.dtype() != dst.dtype() {
        return Err(AotError::dtype(op, format!("source dtype {} does not match destination dtype {}", src.dtype(), dst.dtype())));
    }
    if ls.shape != ix.layout.shape {
        return Err(AotError::internal(op, format!("source shape {:?} is not the index shape {:?}", ls.shape, ix.layout.shape)));
    }
    check_layout(op, ls, src.len())?;
    check_layout(op, ld, dst.len())?;
    let doffs = index_offsets(op, ld, &ix)?;
    let soffs: Vec<usize> = ls.offsets().collect();
    if !accumulate {
        crate::dispatch_cpu!(dst, d => {
            let s = crate::backend::CpuElem::slice(src).ok_or_else(|| AotError::internal(op, "dtype changed"))?;
            for (&o, &i) in doffs.iter().zip(&soffs) {
                d[o] = s[i];
            }
        });
        return Ok(());
    }
    // Each destination's addends together, in row-major order.
    super::copy::add_at(op, src, dst, doffs.iter().copied().zip(soffs.iter().copied()), true)
}
