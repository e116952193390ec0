//! Reductions, var, softmax and log_softmax.

use super::normalize_dims;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};
use aot_ir::OpKind;

fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let all = dims.is_empty();
    let mut out = vec![];
    for (i, &n) in shape.iter().enumerate() {
        if all || dims.contains(&i) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(n);
        }
    }
    out
}

fn float_input(op: &'static str, x: &Tensor) -> Result<Tensor> {
    if x.dtype().is_float() {
        Ok(x.clone())
    } else {
        Err(AotError::dtype(
            op,
            format!(
                "{op}(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                x.dtype()
            ),
        ))
    }
}

fn reduce(op: OpKind, name: &'static str, x: &Tensor, dims: &[i64], keepdim: bool, all: bool) -> Result<Tensor> {
    let x = if op == OpKind::MeanDim { float_input(name, x)? } else { x.clone() };
    let shape = x.shape();
    let dims = if all { vec![] } else { normalize_dims(name, dims, shape.len())? };
    let data = x.storage().reduce(op, &x.layout(), &dims, keepdim)?;
    let out = Tensor::from_storage(data, Layout::contiguous(&reduced_shape(&shape, &dims, keepdim)));
    let full_dims: Vec<usize> = if dims.is_empty() { (0..shape.len()).collect() } else { dims.clone() };
    record(&out, &[Some(&x)], || {
        Ok(match op {
            OpKind::SumDim => BackwardOp::SumDim { in_shape: shape.clone(), dims: full_dims.clone(), keepdim, scale: 1.0 },
            OpKind::MeanDim => {
                let count = super::reduced_count(name, &shape, &full_dims)?;
                BackwardOp::SumDim { in_shape: shape.clone(), dims: full_dims.clone(), keepdim, scale: 1.0 / count as f64 }
            }
            OpKind::AmaxDim => {
                BackwardOp::AmaxDim { a: SavedTensor::save(&x), out: SavedTensor::save(&out), dims: full_dims.clone(), keepdim }
            }
            other => return Err(AotError::internal(name, format!("`{other}` is not a reduction over dims"))),
        })
    })?;
    Ok(out)
}

impl Tensor {
    /// Sum of all elements (a 0-dim tensor).
    pub fn sum(&self) -> Result<Tensor> {
        reduce(OpKind::SumDim, "sum", self, &[], false, true)
    }
    /// Mean of all elements (a 0-dim tensor).
    pub fn mean(&self) -> Result<Tensor> {
        reduce(OpKind::MeanDim, "mean", self, &[], false, true)
    }
    /// Sum over `dims` (an empty list reduces every dim, like PyTorch).
    pub fn sum_dim(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        reduce(OpKind::SumDim, "sum_dim", self, dims, keepdim, dims.is_empty())
    }
    /// Mean over `dims` (an empty list reduces every dim).
    pub fn mean_dim(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        reduce(OpKind::MeanDim, "mean_dim", self, dims, keepdim, dims.is_empty())
    }
    /// Maximum over `dims` (an empty list reduces every dim); not for bool.
    pub fn amax_dim(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(AotError::dtype("amax_dim", "amax is not supported for bool tensors"));
        }
        reduce(OpKind::AmaxDim, "amax_dim", self, dims, keepdim, dims.is_empty())
    }

    /// Variance over `dims`, dividing by `N - correction`.
    pub fn var_dim(&self, dims: &[i64], correction: i64, keepdim: bool) -> Result<Tensor> {
        let name = "var_dim";
        let x = float_input(name, self)?;
        let shape = x.shape();
        let dims = if dims.is_empty() { vec![] } else { normalize_dims(name, dims, shape.len())? };
        let data = x.storage().var(name, &x.layout(), &dims, correction, keepdim)?;
        let out = Tensor::from_storage(data, Layout::contiguous(&reduced_shape(&shape, &dims, keepdim)));
        let full_dims: Vec<usize> = if dims.is_empty() { (0..shape.len()).collect() } else { dims };
        record(&out, &[Some(&x)], || Ok(BackwardOp::VarDim { a: SavedTensor::save(&x), dims: full_dims, correction, keepdim }))?;
        Ok(out)
    }

    fn softmax_impl(&self, dim: i64, log: bool) -> Result<Tensor> {
        let name = if log { "log_softmax" } else { "softmax" };
        let x = float_input(name, self)?;
        let d = crate::layout::wrap_dim(name, dim, x.rank())?;
        let l = x.layout();
        let data = if l.rank() == 0 {
            // softmax of a scalar is 1 (log: 0)
            x.storage().softmax(name, &Layout::new(vec![1], vec![1], l.offset), 0, log)?
        } else {
            x.storage().softmax(name, &l, d, log)?
        };
        let out = Tensor::from_storage(data, Layout::contiguous(&l.shape));
        let d = if x.rank() == 0 { usize::MAX } else { d };
        record(&out, &[Some(&x)], || Ok(BackwardOp::Softmax { out: SavedTensor::save(&out), dim: d, log }))?;
        Ok(out)
    }
    /// Softmax along `dim` (float dtypes).
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        self.softmax_impl(dim, false)
    }
    /// Log of the softmax along `dim` (float dtypes).
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        self.softmax_impl(dim, true)
    }
}
