//! Reductions on the CUDA backend as kernels of the kernel stage: the
//! eager `reduce` (sum, mean, amax), `var` and `softmax`/`log_softmax` are
//! one-op reduction [`Kernel`]s, rendered by the one renderer
//! (`aot_ir::kernel::render`, its `reduce` module: a block or a warp per
//! row) for the operand's dtype and rank, and launched with the layouts as
//! run-time parameters ([`launch`], which the fused reduction kernels of
//! `fused_kernels.rs` also use).
//!
//! The eager ops' errors stay the CPU backend's: an input whose op eager
//! refuses (a mean of integers, an amax over an empty dim, a softmax dim
//! out of range) is handed to the caller's host path, which reports it.

use super::device::Gpu;
use super::kernels::{operand, Buf};
use super::sim::Entry;
use crate::backend::one_op::row_kernel;
pub(super) use crate::backend::one_op::EagerRow;
use crate::backend::KernelCall;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{contiguous_strides, Layout};
use aot_ir::kernel::render::{pack_reduce_params, render_cuda_typed, Operand, ScalarSlots};
use aot_ir::OpKind;

/// A reduction launch: what is reduced, and where the result goes.
pub(super) struct Rows<'a> {
    /// Per dim of the reduction's input shape `S`: whether it is reduced.
    pub reduced: &'a [bool],
    /// Whether the output holds every element of a row (else one value
    /// per row).
    pub rows_out: bool,
}

/// Launches the reduction kernel of `call` (with its types and slot
/// values) over `inputs`, each laid out over `S`, into `out`, laid out
/// over `S` too (stride 0 along the reduced dims when it holds one value
/// per row).
///
/// # Safety
/// As [`super::kernels::launch`]: live buffers of `gpu` holding their
/// layouts' elements; `out` used by nothing else during the launch.
pub(super) unsafe fn launch(
    name: &'static str,
    gpu: &Gpu,
    call: &KernelCall<'_>,
    inputs: &[Buf<'_>],
    out: Buf<'_>,
    rows: &Rows<'_>,
) -> Result<()> {
    let KernelCall { kernel: k, types, slots } = *call;
    let internal = |e: aot_ir::kernel::render::RenderError| AotError::internal(name, e.to_string());
    let shape: Vec<i64> = out.layout.shape.iter().map(|&n| n as i64).collect();
    if inputs.iter().any(|b| b.layout.shape != out.layout.shape) {
        return Err(AotError::internal(name, "a reduction kernel's operands are laid out over its input shape"));
    }
    let layouts: Vec<(i64, Vec<i64>)> = inputs.iter().map(|b| operand(b.layout)).collect();
    let ins: Vec<Operand<'_>> = layouts.iter().map(|(o, s)| Operand { offset: *o, strides: s }).collect();
    let (oo, os) = operand(out.layout);
    let l = pack_reduce_params(&shape, rows.reduced, rows.rows_out, Operand { offset: oo, strides: &os }, &ins, slots).map_err(internal)?;
    if l.empty {
        return Ok(());
    }
    let r = render_cuda_typed(k, types, shape.len(), &ScalarSlots::of(k)).map_err(internal)?;
    let mut pointers = vec![format!("{} *", out.dtype.storage())];
    pointers.extend(inputs.iter().map(|b| format!("const {} *", b.dtype.storage())));
    let entry = Entry { name: r.name.clone(), pointers, sync: true };
    let bufs: Vec<u64> = std::iter::once(out.addr).chain(inputs.iter().map(|b| b.addr)).collect();
    // SAFETY: this function's contract, which the launch's is.
    unsafe { gpu.launch(name, &r.source, &entry, (l.grid, l.block), &bufs, &l.words) }
}

/// The output's layout over `S` (`shape`): contiguous over the kept dims
/// and stride 0 along the reduced ones, or contiguous over `S` for rows.
fn out_over(shape: &[usize], reduced: &[bool], rows_out: bool) -> Layout {
    if rows_out {
        return Layout::contiguous(shape);
    }
    let kept: Vec<usize> = shape.iter().zip(reduced).map(|(&n, &r)| if r { 1 } else { n }).collect();
    let mut stride = contiguous_strides(&kept);
    stride.iter_mut().zip(reduced).filter(|(_, &r)| r).for_each(|(s, _)| *s = 0);
    Layout::new(shape.to_vec(), stride, 0)
}

/// What an eager reduction of `l` over `dims` (a softmax: its one dim)
/// needs: the reduced mask, and whether the kernel serves it. `None`:
/// eager's own error case (the caller's host path reports it).
pub(super) fn plan(row: EagerRow, dtype: DType, l: &Layout, dims: &[usize]) -> Option<Vec<bool>> {
    let rank = l.shape.len();
    if dims.iter().any(|&d| d >= rank.max(1)) {
        return None;
    }
    let reduced: Vec<bool> = (0..rank).map(|d| dims.is_empty() || dims.contains(&d)).collect();
    let empty_dim = l.shape.iter().zip(&reduced).any(|(&n, &r)| r && n == 0);
    let ok = match row {
        EagerRow::Reduce(OpKind::AmaxDim) => !empty_dim && dtype != DType::Bool,
        EagerRow::Reduce(OpKind::SumDim) => true,
        _ => dtype.is_float(),
    };
    ok.then_some(reduced)
}

/// Runs eager reduction `row` of the buffer at `input` (laid out as `l`,
/// `reduced` from [`plan`]) into the new buffer `out` (its result, of
/// `out_dtype`: contiguous, with the reduced shape or `l`'s for softmax).
///
/// # Safety
/// `input` and `out` are live buffers of `gpu`; `input` holds `l`'s
/// elements and `out` the result's; `out` is used by nothing else.
pub(super) unsafe fn eager(
    name: &'static str,
    gpu: &Gpu,
    row: EagerRow,
    input: Buf<'_>,
    reduced: &[bool],
    out: (u64, DType),
) -> Result<()> {
    let Some((k, types, slots)) = row_kernel(row, input.dtype) else {
        return Err(AotError::internal(name, format!("no reduction kernel of {:?}: `plan` admits only what eager computes", input.dtype)));
    };
    if types.values[1] != out.1 {
        return Err(AotError::internal(name, format!("a {:?} result buffer for {:?}", out.1, types.values[1])));
    }
    let rows_out = matches!(row, EagerRow::Softmax { .. });
    let layout = out_over(&input.layout.shape, reduced, rows_out);
    let rows = Rows { reduced, rows_out };
    let call = KernelCall { kernel: &k, types: &types, slots: &slots };
    // SAFETY: the caller's guarantee.
    unsafe { launch(name, gpu, &call, &[input], Buf { addr: out.0, layout: &layout, dtype: out.1 }, &rows) }
}

/// The source [`eager`] launches for `row` over an operand of `dtype`
/// laid out with rank `rank` (for `kernels_for`'s listing).
pub(super) fn eager_source(row: EagerRow, dtype: DType, rank: usize) -> Result<crate::backend::KernelSource> {
    let internal = |msg: String| AotError::internal("kernels_for", msg);
    let (k, types, _) = row_kernel(row, dtype).ok_or_else(|| internal(format!("no reduction kernel of {dtype:?}")))?;
    let r = render_cuda_typed(&k, &types, rank, &ScalarSlots::of(&k)).map_err(|e| internal(e.to_string()))?;
    Ok(crate::backend::KernelSource { name: r.name, source: r.source })
}

#[cfg(test)]
mod tests;
