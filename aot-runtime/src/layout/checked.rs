//! Checked geometry arithmetic: the element limit of a tensor and the
//! overflow-checked products and sums the view ops build layouts with, and
//! the check that a layout fits its buffer.

use super::Layout;
use crate::error::{AotError, Result};

/// The most elements a tensor may have: its byte size in the widest dtype
/// (8 bytes) then fits in `isize`, as Rust allocations and slices require.
pub const MAX_NUMEL: usize = isize::MAX as usize / 8;

/// The number of elements of `shape`, or an `Overflow` error naming `op` if
/// the product of its sizes exceeds [`MAX_NUMEL`]. Size-0 dims count as 1 in
/// that bound, so the contiguous strides of an empty shape fit as well.
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    let mut span = 1usize;
    for &n in shape {
        span = match span.checked_mul(n.max(1)) {
            Some(v) if v <= MAX_NUMEL => v,
            _ => {
                return Err(AotError::overflow(
                    op,
                    format!("shape {shape:?} has more than {MAX_NUMEL} elements, the most whose byte size fits in isize"),
                ))
            }
        };
    }
    Ok(if shape.contains(&0) { 0 } else { span })
}

/// `a * b + c`, or an `Overflow` error naming `op` and the numbers.
pub(super) fn mul_add(op: &'static str, a: usize, b: usize, c: usize) -> Result<usize> {
    a.checked_mul(b).and_then(|p| p.checked_add(c)).ok_or_else(|| AotError::overflow(op, format!("{a} * {b} + {c} does not fit in usize")))
}

/// Checks that every element of `l` lies inside a buffer of `len` elements,
/// so the kernels can index without panicking (and without overflow).
pub fn check_layout(op: &'static str, l: &Layout, len: usize) -> Result<()> {
    let (shape, stride) = (l.shape.as_slice(), l.stride.as_slice());
    if shape.len() != stride.len() {
        return Err(AotError::internal(op, format!("layout with {} sizes but {} strides", shape.len(), stride.len())));
    }
    // A dense 1-D layout, the commonest: its end is `offset + n`.
    if let ([n], [1]) = (shape, stride) {
        if l.offset.checked_add(*n).is_some_and(|end| end <= len) {
            return Ok(());
        }
    }
    if shape.contains(&0) {
        return Ok(());
    }
    let mut last = Some(l.offset);
    for (&n, &s) in shape.iter().zip(stride) {
        last = last.and_then(|a| (n - 1).checked_mul(s).and_then(|d| a.checked_add(d)));
    }
    match last {
        Some(last) if last < len => Ok(()),
        _ => Err(AotError::internal(
            op,
            format!("layout {:?} / {:?} at offset {} reaches past a buffer of {len} elements", l.shape, l.stride, l.offset),
        )),
    }
}
