//! The offsets of the elements a gather or scatter along one dim addresses,
//! worked out (and every index value checked) on the host before anything
//! is read or written, so an out-of-range index fails with nothing written.
//! The CPU kernels and the CUDA backend (which uploads them) share it.

use super::{CpuStorage, Indexed};
use crate::error::{AotError, Result};
use crate::layout::{check_layout, Layout};

/// The storage offsets of `l`'s elements at the positions of the index
/// layout (row-major), coordinate `dim` taken from the index; every index
/// value is checked against `l`'s size at `dim`.
pub fn index_offsets(op: &'static str, l: &Layout, ix: &Indexed<'_, CpuStorage>) -> Result<Vec<usize>> {
    let CpuStorage::I64(index) = ix.index else {
        return Err(AotError::dtype(op, format!("index must be of dtype I64, found {}", ix.index.dtype())));
    };
    let (dim, li) = (ix.dim, ix.layout);
    if li.rank() != l.rank() || dim >= l.rank().max(1) {
        return Err(AotError::internal(op, format!("index layout of rank {} for data of rank {} at dim {dim}", li.rank(), l.rank())));
    }
    check_layout(op, li, index.len())?;
    if l.rank() == 0 {
        // a 0-d tensor indexed along its only "dim" (size 1)
        return li.offsets().map(|io| check_value(op, index[io], 0, 1).map(|_| l.offset)).collect();
    }
    if li.shape.iter().zip(&l.shape).enumerate().any(|(k, (&n, &m))| k != dim && n > m) {
        return Err(AotError::internal(op, format!("index shape {:?} exceeds data shape {:?} outside dim {dim}", li.shape, l.shape)));
    }
    let mut stride = l.stride.clone();
    let dim_stride = std::mem::replace(&mut stride[dim], 0);
    let base = Layout::new(li.shape.clone(), stride, l.offset);
    let size = l.shape[dim];
    let mut out = crate::host_alloc::try_vec(op, li.numel())?;
    // Row by row along the last dim, whose steps are constant (an
    // embedding's index is one value per row, broadcast along it).
    let r = li.rank();
    let row = |l: &Layout| Layout::new(l.shape[..r - 1].to_vec(), l.stride[..r - 1].to_vec(), l.offset);
    let (len, bs, is) = (li.shape[r - 1], base.stride[r - 1], li.stride[r - 1]);
    if li.numel() == 0 {
        return Ok(out);
    }
    for (b, io) in row(&base).offsets().zip(row(li).offsets()) {
        if is == 0 {
            let at = b + check_value(op, index[io], dim, size)? * dim_stride;
            out.extend((0..len).map(|j| at + j * bs));
        } else {
            for j in 0..len {
                out.push(b + j * bs + check_value(op, index[io + j * is], dim, size)? * dim_stride);
            }
        }
    }
    Ok(out)
}

fn check_value(op: &'static str, index: i64, dim: usize, size: usize) -> Result<usize> {
    usize::try_from(index).ok().filter(|&u| u < size).ok_or(AotError::IndexOutOfRange { op, index, dim, size })
}
