//! The CUDA sources of the kernels a noted primitive runs
//! ([`op_kernel_sources`], for `kernels_for`'s listing of a call run on
//! another device): each case makes the decision the backend's primitive
//! makes (`backend.rs`, `ops.rs`, `index.rs`, `scan.rs`, `cublas.rs`), and
//! renders the kernels it would launch, in order. A primitive that runs on
//! the host (what eager refuses, mixed dtypes) launches none.

use super::backend::renders;
use super::kernels::one_op_source;
use super::ops::{gather_source, put_source, scalar_renders, sum_dtype};
use super::scan::{cumsum_source, extreme_source, nll_backward_source, nll_source};
use crate::backend::one_op::OneOp;
use crate::backend::{KernelSource, OpKernels};
use crate::dtype::DType;
use crate::error::Result;
use aot_ir::OpKind;

/// The sources of the kernels `k` runs on CUDA, in order.
pub(crate) fn op_kernel_sources(k: &OpKernels) -> Result<Vec<KernelSource>> {
    let pair = |(source, entry): (String, super::sim::Entry)| KernelSource { name: entry.name, source };
    let one = |k: &OpKernels, rank: usize| -> Result<Vec<KernelSource>> {
        match k.one_op() {
            Some((op, inputs, out)) => Ok(vec![one_op_source(&op, &inputs, out, rank)?]),
            None => Ok(Vec::new()),
        }
    };
    Ok(match k {
        OpKernels::Unary { op, dtype, rank } => {
            if op.is_unary_elementwise() && renders(*op, *dtype) {
                one(k, *rank)?
            } else {
                Vec::new()
            }
        }
        OpKernels::Clamp { dtype, min, max, rank } => clamp_sources(*dtype, *min, *max, *rank)?,
        OpKernels::Binary { op, lhs, rhs, rank, assign } => {
            let kernel = op.is_binary_elementwise() && lhs == rhs && renders(*op, *lhs) && !(*assign && op.is_comparison());
            if kernel {
                one(k, *rank)?
            } else {
                Vec::new()
            }
        }
        OpKernels::BinaryScalar { op, dtype, rank, .. } => {
            if scalar_renders(*op, *dtype) {
                one(k, *rank)?
            } else {
                Vec::new()
            }
        }
        OpKernels::Where { cond, a, b, rank } => {
            if *cond == DType::Bool && a == b {
                one(k, *rank)?
            } else {
                Vec::new()
            }
        }
        OpKernels::Cast { rank, .. } => one(k, *rank)?,
        OpKernels::ScatterAdd { src, dst, direct: true, rank } => {
            vec![one_op_source(&OneOp::binary(OpKind::Add, *dst), &[*dst, *src], *dst, *rank)?]
        }
        OpKernels::ScatterAdd { src, dst, direct: false, .. } => scatter_sums(*src, *dst)?,
        OpKernels::Reduce { row, dtype, layout, dims } => match super::reduce::plan(*row, *dtype, layout, dims) {
            Some(_) => vec![super::reduce::eager_source(*row, *dtype, layout.rank())?],
            None => Vec::new(),
        },
        OpKernels::Matmul { lhs, rhs, la, lb } => match super::cublas::plan(*lhs, *rhs, la, lb) {
            Some(g) => vec![super::cublas::listing(*lhs, &g)],
            None => Vec::new(),
        },
        OpKernels::Gather { dtype } => vec![pair(super::index::take_source(*dtype))],
        OpKernels::Scatter { dtype, accumulate: false } => vec![pair(super::index::take_source(*dtype)), pair(put_source(*dtype))],
        OpKernels::Scatter { dtype, accumulate: true } => scatter_sums(*dtype, *dtype)?,
        OpKernels::Cumsum { dtype } => vec![cumsum_source(*dtype).listed()],
        OpKernels::Arange { dtype } => vec![super::arange::arange_source(*dtype).listed()],
        OpKernels::Extreme { dtype, max } => vec![extreme_source(*dtype, *max).listed()],
        OpKernels::NllLoss { dtype } => vec![nll_source(*dtype).listed()],
        OpKernels::NllLossBackward { grad, dtype } => vec![nll_backward_source(*grad, *dtype).listed()],
    })
}

/// `clamp`'s kernels (`ops::clamp`): a bound, then the other in place.
fn clamp_sources(d: DType, min: bool, max: bool, rank: usize) -> Result<Vec<KernelSource>> {
    if d == DType::Bool {
        return Ok(Vec::new());
    }
    let bound = |op: OpKind| one_op_source(&OneOp::with_scalar(op, false, d), &[d], d, rank);
    Ok(match (min, max) {
        (true, true) => vec![bound(OpKind::Maximum)?, bound(OpKind::Minimum)?],
        (true, false) => vec![bound(OpKind::Maximum)?],
        (false, true) => vec![bound(OpKind::Minimum)?],
        (false, false) => vec![one_op_source(&OneOp::cast(d), &[d], d, rank)?],
    })
}

/// A scatter that sums (`ops::scatter_plan`): the sums, their rounding to
/// the destination's dtype where they are wider, and the put.
fn scatter_sums(src: DType, dst: DType) -> Result<Vec<KernelSource>> {
    let (source, entry) = gather_source(src, dst);
    let mut v = vec![KernelSource { name: entry.name, source }];
    let sums = sum_dtype(src, dst);
    if sums != dst {
        v.push(one_op_source(&OneOp::cast(dst), &[sums], dst, 1)?);
    }
    let (source, entry) = put_source(dst);
    v.push(KernelSource { name: entry.name, source });
    Ok(v)
}
