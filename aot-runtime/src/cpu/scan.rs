//! Scans and index reductions along one dim, and the classification loss:
//! [`cumsum`], [`extreme`] (argmax/argmin, and max/min along a dim with
//! their indices), [`nll_loss`] and its gradient [`nll_loss_backward`].
//!
//! Each reads its operand in its own dtype through its layout (a strided
//! operand is first gathered into a dense buffer of that dtype), so no
//! op converts a whole tensor to f64. The numerics are eager's: floats
//! accumulate in f64 and each result rounds once to the dtype (as
//! PyTorch's CPU accumulates in double), integers and bools sum in i64
//! exactly (wrapping); an extreme compares in the dtype, a NaN wins and
//! stays, and ties keep the first index. Lines are independent, so large
//! operands split across rayon threads by blocks of whole lines. The CUDA
//! kernels of `cuda/scan.rs` compute the same bits.

use super::strided::{check_layout, map1, par_chunks, PAR_MIN};
use crate::backend::Targets;
use crate::backend::{CpuElem, CpuStorage};
use crate::dtype::{DType, WithDType};
use crate::error::{AotError, Result};
use crate::host_alloc::try_filled_buffer;
use crate::layout::{split, Layout};
use std::borrow::Cow;

fn check_dim(op: &'static str, l: &Layout, dim: usize) -> Result<()> {
    if dim >= l.rank() {
        return Err(AotError::internal(op, format!("dim {dim} of a layout of rank {}", l.rank())));
    }
    Ok(())
}

/// The elements of `l` in row-major order, in their own dtype: the
/// buffer itself when `l` is contiguous.
fn dense<'a, T: Copy + Default + Send + Sync + 'static>(op: &'static str, v: &'a [T], l: &Layout) -> Result<Cow<'a, [T]>> {
    if l.numel() == 0 {
        // An empty view may sit past its buffer's end (`x[:, 1:1]`).
        return Ok(Cow::Borrowed(&[]));
    }
    if l.is_contiguous() {
        let run = v.get(l.offset..l.offset + l.numel());
        return run.map(Cow::Borrowed).ok_or_else(|| AotError::internal(op, "a contiguous layout past the end of its buffer"));
    }
    Ok(Cow::Owned(map1(op, v, l, |x| x)?))
}

/// Runs `f(first_block, blocks)` over `out` cut into blocks of `block`
/// elements (one block per outer index), in parallel for large outputs.
fn by_blocks<U: Send>(out: &mut [U], block: usize, f: &(dyn Fn(usize, &mut [U]) + Sync)) {
    if block == 0 || out.is_empty() {
        return;
    }
    if out.len() < PAR_MIN || out.len() == block {
        f(0, out);
    } else {
        // Whole blocks per task, a quarter of PAR_MIN elements or more each.
        let per_task = block * (PAR_MIN / 4 / block).max(1);
        par_chunks(out, per_task, &|start, o| f(start / block, o));
    }
}

/// The running sums of `x` (row-major over `(outer, len, inner)`) along
/// the middle axis, from its end if `reverse`: `acc` starts at `zero`,
/// takes each element with `add`, and `store` writes each prefix.
fn scan<T: Copy + Sync, A: Copy + Send + Sync, U: Copy + Default + Send + 'static>(
    op: &'static str,
    x: &[T],
    (_, len, inner): (usize, usize, usize),
    reverse: bool,
    zero: A,
    add: impl Fn(A, T) -> A + Sync,
    store: impl Fn(A) -> U + Sync,
) -> Result<Vec<U>> {
    let mut out = try_filled_buffer(op, x.len(), U::default())?;
    let block = len * inner;
    by_blocks(&mut out, block, &|first, o| {
        for (b, ob) in o.chunks_exact_mut(block).enumerate() {
            let xb = &x[(first + b) * block..][..block];
            let mut acc = vec![zero; inner];
            for step in 0..len {
                let k = if reverse { len - 1 - step } else { step };
                for (n, a) in acc.iter_mut().enumerate() {
                    let p = k * inner + n;
                    *a = add(*a, xb[p]);
                    ob[p] = store(*a);
                }
            }
        }
    });
    Ok(out)
}

/// The cumulative sum of `l` in `src` along `dim` (from the end if
/// `reverse`), contiguous with `l`'s shape: floats keep their dtype (f64
/// running sums, each rounded once), i64 and bool sum into i64.
pub fn cumsum(op: &'static str, src: &CpuStorage, l: &Layout, dim: usize, reverse: bool) -> Result<CpuStorage> {
    check_layout(op, l, src.len())?;
    check_dim(op, l, dim)?;
    let parts = split(&l.shape, dim);
    fn float<T: CpuElem + Default>(op: &'static str, v: &[T], l: &Layout, p: (usize, usize, usize), rev: bool) -> Result<CpuStorage> {
        let out = scan(op, &dense(op, v, l)?, p, rev, 0.0f64, |a, x: T| a + x.to_f64(), T::from_f64)?;
        Ok(T::into_storage(out))
    }
    Ok(match src {
        CpuStorage::I64(v) => CpuStorage::I64(scan(op, &dense(op, v, l)?, parts, reverse, 0i64, i64::wrapping_add, |a| a)?),
        CpuStorage::Bool(v) => {
            CpuStorage::I64(scan(op, &dense(op, v, l)?, parts, reverse, 0i64, |a, x| a.wrapping_add(i64::from(x)), |a| a)?)
        }
        CpuStorage::F32(v) => float(op, v, l, parts, reverse)?,
        CpuStorage::F64(v) => float(op, v, l, parts, reverse)?,
        CpuStorage::F16(v) => float(op, v, l, parts, reverse)?,
        CpuStorage::BF16(v) => float(op, v, l, parts, reverse)?,
    })
}

/// Whether `v` replaces `best` as the running extreme: a NaN wins (and
/// stays), ties keep the first.
fn better<T: PartialOrd + Copy>(v: T, best: T, max: bool) -> bool {
    #[allow(clippy::eq_op)]
    let is_nan = |x: T| x != x;
    if is_nan(best) {
        return false;
    }
    is_nan(v) || if max { v > best } else { v < best }
}

/// Per line of `x`, the first index of its extreme and the value there.
fn extreme_t<T: PartialOrd + Copy + Default + Send + Sync + 'static>(
    op: &'static str,
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
    max: bool,
) -> Result<(Vec<T>, Vec<i64>)> {
    let mut idx = try_filled_buffer(op, outer * inner, 0i64)?;
    by_blocks(&mut idx, inner, &|first, o| {
        for (b, ob) in o.chunks_exact_mut(inner).enumerate() {
            let xb = &x[(first + b) * len * inner..][..len * inner];
            for k in 1..len {
                for (n, best) in ob.iter_mut().enumerate() {
                    if better(xb[k * inner + n], xb[*best as usize * inner + n], max) {
                        *best = k as i64;
                    }
                }
            }
        }
    });
    let at = |j: usize| ((j / inner.max(1)) * len + idx[j] as usize) * inner + j % inner.max(1);
    let mut vals = try_filled_buffer(op, idx.len(), T::default())?;
    vals.iter_mut().enumerate().for_each(|(j, v)| *v = x[at(j)]);
    Ok((vals, idx))
}

/// Along `dim` of `l` in `src` (a non-empty dim), per position of the
/// other dims in row-major order: the first index of the maximum (or,
/// not `max`, the minimum) and the value there, as `(values, indices)`,
/// contiguous, of `l`'s shape without `dim`.
pub fn extreme(op: &'static str, src: &CpuStorage, l: &Layout, dim: usize, max: bool) -> Result<(CpuStorage, CpuStorage)> {
    check_layout(op, l, src.len())?;
    check_dim(op, l, dim)?;
    let parts = split(&l.shape, dim);
    if parts.1 == 0 {
        return Err(AotError::shape(op, format!("Expected reduction dim {dim} to have non-zero size")));
    }
    crate::backend::dispatch_cpu!(src, v => {
        let (vals, idx) = extreme_t(op, &dense(op, v, l)?, parts, max)?;
        Ok((CpuElem::into_storage(vals), CpuStorage::I64(idx)))
    })
}

/// The rows of `t` that count, as `(row, class)`: each checked against
/// `t.classes` (the caller checked them; a bad one is an error here,
/// never a panic).
fn counted_rows(op: &'static str, t: &Targets<'_, CpuStorage>) -> Result<Vec<(usize, usize)>> {
    let CpuStorage::I64(tv) = t.index else {
        return Err(AotError::dtype(op, format!("expected targets of dtype i64 (class indices), got {}", t.index.dtype())));
    };
    check_layout(op, t.layout, tv.len())?;
    let mut rows = Vec::new();
    for (r, o) in t.layout.offsets().enumerate() {
        let c = tv[o];
        if c == t.ignore {
            continue;
        }
        let c = usize::try_from(c).ok().filter(|&c| c < t.classes).ok_or(AotError::IndexOutOfRange {
            op,
            index: c,
            dim: 1,
            size: t.classes,
        })?;
        rows.push((r, c));
    }
    Ok(rows)
}

/// `-Σ x[r, t[r]] / t.count` over the rows whose target is not ignored
/// (summed in f64 in row order, rounded once), as one element of `x`'s
/// dtype; `l` is `[N, C]` and the targets `[N]`.
pub fn nll_loss(op: &'static str, x: &CpuStorage, l: &Layout, t: Targets<'_, CpuStorage>) -> Result<CpuStorage> {
    check_layout(op, l, x.len())?;
    if l.rank() != 2 || t.layout.shape != l.shape[..1] || l.shape[1] != t.classes {
        return Err(AotError::internal(op, format!("input {:?} with targets {:?} for {} classes", l.shape, t.layout.shape, t.classes)));
    }
    let rows = counted_rows(op, &t)?;
    let (s0, s1) = (l.stride[0], l.stride[1]);
    crate::backend::dispatch_cpu!(x, v => {
        let picked = rows.iter().fold(0.0f64, |acc, &(r, c)| acc + v[l.offset + r * s0 + c * s1].to_f64());
        // No target counted: 0/0, NaN, as PyTorch.
        Ok(one_like(v, -picked / t.count as f64))
    })
}

/// `x` as a one-element buffer of `like`'s element type.
fn one_like<T: CpuElem>(_like: &[T], x: f64) -> CpuStorage {
    T::into_storage(vec![T::from_f64(x)])
}

/// The gradient of [`nll_loss`] for the output gradient `g` (the one
/// element of `lg`): a contiguous `[N, C]` buffer of `dtype`, zero but
/// `-g / t.count` (in f64, rounded once) at each counted `(r, t[r])`.
pub fn nll_loss_backward(op: &'static str, g: &CpuStorage, lg: &Layout, t: Targets<'_, CpuStorage>, dtype: DType) -> Result<CpuStorage> {
    check_layout(op, lg, g.len())?;
    if lg.numel() != 1 {
        return Err(AotError::shape(op, format!("expected a one-element gradient, got shape {:?}", lg.shape)));
    }
    let share = -g.get_f64(lg.offset) / t.count as f64;
    let rows = counted_rows(op, &t)?;
    let n = t.layout.numel() * t.classes;
    let mut out = CpuStorage::zeros(op, dtype, n)?;
    crate::backend::dispatch_cpu!(&mut out, v => {
        for &(r, c) in &rows {
            v[r * t.classes + c] = WithDType::from_f64(share);
        }
    });
    Ok(out)
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
