//! Fallible host allocation. Every buffer whose length comes from a shape
//! is allocated here, with `try_reserve_exact`: a request that is too large
//! is an [`AotError::OutOfMemory`] naming the op, never an abort. Buffers
//! of a storage go through the buffer cache (`buffer_cache`) first.

use crate::error::{AotError, Result};
/// An empty vector with room for exactly `n` elements of `T`. A byte size
/// beyond `isize::MAX`, or one the allocator refuses, is an `OutOfMemory`
/// error naming `op` (the bytes saturate at `usize::MAX` if they overflow).
pub(crate) fn try_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes > isize::MAX as usize {
        return Err(AotError::OutOfMemory { op, bytes });
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| AotError::OutOfMemory { op, bytes })?;
    Ok(v)
}

/// [`try_vec`] for a buffer of a storage, reusing a cached large buffer
/// (`buffer_cache`) when one fits.
pub(crate) fn try_buffer<T: Send + 'static>(op: &'static str, n: usize) -> Result<Vec<T>> {
    match crate::buffer_cache::take(n) {
        Some(v) => Ok(v),
        None => try_vec(op, n),
    }
}

/// `n` copies of `x` in a [`try_buffer`].
pub(crate) fn try_filled_buffer<T: Clone + Send + 'static>(op: &'static str, n: usize, x: T) -> Result<Vec<T>> {
    let mut v = try_buffer(op, n)?;
    v.resize(n, x);
    Ok(v)
}

/// `n` copies of `x`, allocated by [`try_vec`].
pub(crate) fn try_filled<T: Clone>(op: &'static str, n: usize, x: T) -> Result<Vec<T>> {
    let mut v = try_vec(op, n)?;
    v.resize(n, x);
    Ok(v)
}

/// The items of `it`, allocated by [`try_vec`] for the length it reports.
pub(crate) fn try_collect<T>(op: &'static str, it: impl ExactSizeIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = try_vec(op, it.len())?;
    v.extend(it);
    Ok(v)
}
