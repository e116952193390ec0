//! Scans and index reductions along one dim: `cumsum`, `argmax`/`argmin`
//! and `max_dim`/`min_dim`, computed by the backend's kernels
//! (`Backend::cumsum`, `Backend::extreme`: floats accumulate in f64, as
//! PyTorch's CPU kernels do, integers in i64 exactly). Gradients are the
//! shared table's (`BackwardOp::Table`).

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{wrap_dim, Layout};
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, Kept, SavedTensor};
use aot_ir::graph::args::{b, i, t};
use aot_ir::{OpKind, ValueId};

/// `x`'s layout with at least one dim (a 0-d tensor is one element
/// along its one dim).
fn layout_of(x: &Tensor) -> Layout {
    let l = x.layout();
    if l.rank() == 0 {
        Layout::new(vec![1], vec![1], l.offset)
    } else {
        l
    }
}

/// The shape of a reduction of `shape` over dim `d`.
fn reduced_shape(shape: &[usize], d: usize, keepdim: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    if s.is_empty() {
        return s;
    }
    if keepdim {
        s[d] = 1;
    } else {
        s.remove(d);
    }
    s
}

/// The cumulative sum of `x` along `dim`, from the start or (`rev`) from
/// the end, without history.
fn scan_sum(op: &'static str, x: &Tensor, dim: i64, rev: bool) -> Result<Tensor> {
    let d = wrap_dim(op, dim, x.rank())?;
    let data = x.storage().cumsum(op, &layout_of(x), d, rev)?;
    Ok(Tensor::from_storage(data, Layout::contiguous(&x.shape())))
}

/// `cumsum`'s gradient: the cumulative sum of `g` along `dim` from the end.
pub(crate) fn cumsum_rev(g: &Tensor, dim: i64) -> Result<Tensor> {
    scan_sum("cumsum_backward", g, dim, true)
}

impl Tensor {
    /// `torch.cumsum(self, dim)`: integers and bools sum into i64.
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        let out = scan_sum("cumsum", self, dim, false)?;
        record(&out, &[Some(self)], || {
            let args = vec![t(ValueId(0)), i(dim)];
            Ok(BackwardOp::Table { op: OpKind::Cumsum, args, inputs: vec![Kept::Absent], out: None, edges: vec![0] })
        })?;
        Ok(out)
    }

    /// `torch.argmax(self, dim, keepdim)`: the first index of the maximum
    /// along `dim` (NaN counts as the maximum), as i64.
    pub fn argmax(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmax", dim, keepdim, true)
    }

    /// `torch.argmin(self, dim, keepdim)`: as [`Tensor::argmax`], for the minimum.
    pub fn argmin(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmin", dim, keepdim, false)
    }

    /// `torch.max(self, dim, keepdim)`: `(values, indices)`, each index that
    /// of the first maximum along `dim` (NaN counts as the maximum). The
    /// values' gradient goes to that index.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.dim_extreme("max_dim", dim, keepdim, true)
    }

    /// `torch.min(self, dim, keepdim)`: as [`Tensor::max_dim`], for the minimum.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.dim_extreme("min_dim", dim, keepdim, false)
    }

    /// `(values, indices)` of the extremes along `dim`, without history.
    fn extremes(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
        if self.dtype() == DType::Bool && op.starts_with("arg") {
            return Err(AotError::dtype(op, format!("{op} is not implemented for bool tensors")));
        }
        let shape = self.shape();
        let d = wrap_dim(op, dim, shape.len())?;
        if shape.get(d) == Some(&0) {
            return Err(AotError::shape(op, format!("Expected reduction dim {d} to have non-zero size")));
        }
        let (values, indices) = self.storage().extreme(op, &layout_of(self), d, max)?;
        let out = Layout::contiguous(&reduced_shape(&shape, d, keepdim));
        Ok((Tensor::from_storage(values, out.clone()), Tensor::from_storage(indices, out)))
    }

    fn arg_extreme(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<Tensor> {
        Ok(self.extremes(op, dim, keepdim, max)?.1)
    }

    fn dim_extreme(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
        let (values, indices) = self.extremes(op, dim, keepdim, max)?;
        let kind = if max { OpKind::MaxDim } else { OpKind::MinDim };
        record(&values, &[Some(self)], || {
            let args = vec![t(ValueId(0)), i(dim), b(keepdim)];
            let (x, o) = (SavedTensor::save(self), SavedTensor::save(&values));
            Ok(BackwardOp::Table { op: kind, args, inputs: vec![Kept::Saved(x)], out: Some(o), edges: vec![0] })
        })?;
        Ok((values, indices))
    }
}
