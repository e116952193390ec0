//! `Tensor::cat` and `Tensor::stack`: static ops over a list of tensors.
//!
//! The result's dtype is the promotion of every input's (PyTorch's
//! `result_type` over the list); each input is copied (and cast) into its
//! slice of a new contiguous tensor. As in PyTorch, `cat` skips 1-D empty
//! tensors (shape `[0]`) beside tensors of another rank (a legacy rule
//! models rely on: a cache that starts as `torch.empty(0)`). Gradients are the shared table's
//! (`cat_grad` slices the gradient, `stack` selects it), recorded as
//! [`BackwardOp::Table`].

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{wrap_dim, Layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, Kept};
use aot_ir::graph::args::{i, t};
use aot_ir::{OpKind, ValueId};

impl Tensor {
    /// The tensors joined along `dim` (PyTorch's `torch.cat`): every input
    /// has the same rank and the same sizes outside `dim`.
    pub fn cat(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        join("cat", OpKind::Cat, tensors, dim)
    }

    /// The tensors, all of one shape, stacked along a new dim `dim`
    /// (PyTorch's `torch.stack`; `dim` may be `rank` or `-1 - rank`).
    pub fn stack(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        const OP: &str = "stack";
        let first = tensors.first().ok_or_else(|| AotError::shape(OP, "expected a non-empty list of tensors"))?;
        let shape = first.shape();
        if let Some((k, x)) = tensors.iter().enumerate().find(|(_, x)| x.shape() != shape) {
            return Err(AotError::shape(
                OP,
                format!("stack expects each tensor to be equal size, but got {shape:?} at entry 0 and {:?} at entry {k}", x.shape()),
            ));
        }
        // the new dim wraps against the result's rank
        let d = wrap_dim(OP, dim, shape.len() + 1)?;
        join(OP, OpKind::Stack, tensors, d as i64)
    }
}

/// `cat`, or `stack` (whose inputs get a size-1 dim at `dim` first).
fn join(op: &'static str, kind: OpKind, tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
    let stacking = kind == OpKind::Stack;
    // PyTorch's legacy rule: `cat` skips 1-D empty tensors beside others
    let skipped = |x: &Tensor| !stacking && x.shape() == [0];
    let first = tensors
        .iter()
        .find(|x| !skipped(x))
        .or(tensors.first())
        .ok_or_else(|| AotError::shape(op, "expected a non-empty list of tensors"))?;
    let rank = first.rank() + usize::from(stacking);
    if rank == 0 {
        return Err(AotError::shape(op, "zero-dimensional tensor (at position 0) cannot be concatenated"));
    }
    let d = wrap_dim(op, dim, rank)?;
    let device = first.device();
    let mut dtype = first.dtype();
    // per input, its layout (with stack's new dim); `None`: skipped
    let mut layouts: Vec<Option<Layout>> = Vec::with_capacity(tensors.len());
    let mut total = 0usize;
    for (k, x) in tensors.iter().enumerate() {
        crate::ops::check_same_device(op, first, x)?;
        dtype = DType::promote(dtype, x.dtype());
        if skipped(x) && rank != 1 {
            layouts.push(None);
            continue;
        }
        let l = if stacking { x.layout().unsqueeze(op, d as i64)? } else { x.layout() };
        if l.rank() != rank {
            return Err(AotError::shape(
                op,
                format!("tensors must have same number of dimensions: got {rank} and {} (at position {k})", l.rank()),
            ));
        }
        let want = layouts.iter().flatten().next().map_or_else(|| l.shape.clone(), |f| f.shape.clone());
        if let Some(j) = (0..rank).find(|&j| j != d && l.shape[j] != want[j]) {
            return Err(AotError::shape(
                op,
                format!("sizes of tensors must match except in dimension {d}; expected size {} but got size {} for tensor number {k} in the list (dim {j})", want[j], l.shape[j]),
            ));
        }
        total = total.checked_add(l.shape[d]).ok_or_else(|| AotError::overflow(op, "concatenated size"))?;
        layouts.push(Some(l));
    }
    let mut shape = layouts.iter().flatten().next().map_or_else(|| vec![0], |l| l.shape.to_vec());
    shape[d] = total;
    let out_l = Layout::contiguous(&shape);
    let buf = Storage::full(op, &device, dtype, out_l.numel(), 0.0)?;
    let mut at = 0usize;
    for (x, l) in tensors.iter().zip(&layouts).filter_map(|(x, l)| l.as_ref().map(|l| (x, l))) {
        let n = l.shape[d];
        if n > 0 {
            let region = out_l.narrow(op, d as i64, at as i64, n as i64)?;
            x.storage().copy_into(op, l, &buf, &region)?;
        }
        at += n;
    }
    let out = Tensor::from_storage(buf, out_l);
    let inputs: Vec<Option<&Tensor>> = tensors.iter().map(|x| Some(*x)).collect();
    record(&out, &inputs, || {
        let mut args: Vec<_> = (0..tensors.len()).map(|k| t(ValueId(k as u32))).collect();
        args.push(i(d as i64));
        let kept = tensors.iter().map(|x| Kept::Meta { shape: x.shape(), dtype: x.dtype() }).collect();
        Ok(BackwardOp::Table { op: kind, args, inputs: kept, out: None, edges: (0..tensors.len()).collect() })
    })?;
    Ok(out)
}
