//! Copies, casts and the `*_like` constructors.

use crate::dtype::DType;
use crate::error::Result;
use crate::layout::{preserve_layout, Layout};
use crate::storage::Storage;
use crate::tensor::{record, BackwardOp, Tensor};

impl Tensor {
    /// A new tensor with `self`'s values in a fresh buffer laid out as
    /// `layout` (dense, offset 0), cast to `dtype`; no history.
    pub(crate) fn copy_as(&self, op: &'static str, dtype: DType, layout: Layout) -> Result<Tensor> {
        let data = self.storage().cast(op, &self.layout(), dtype, &layout)?;
        Ok(Tensor::from_storage(data, layout))
    }

    /// A new tensor with its own storage and the same values (PyTorch's
    /// `clone()`, preserving the memory format). Gradients flow through it.
    pub fn copy(&self) -> Result<Tensor> {
        let out = self.copy_as("copy", self.dtype(), preserve_layout(&self.layout()))?;
        record(&out, &[Some(self)], || Ok(BackwardOp::Identity))?;
        Ok(out)
    }

    /// `self` if already contiguous, else a contiguous (row-major) copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let out = self.copy_as("contiguous", self.dtype(), Layout::contiguous(&self.shape()))?;
        record(&out, &[Some(self)], || Ok(BackwardOp::Identity))?;
        Ok(out)
    }

    /// `self` if already of `dtype`, else a cast copy (preserving the
    /// memory format, as PyTorch's `to`).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.copy_as("to_dtype", dtype, preserve_layout(&self.layout()))?;
        if dtype.is_float() {
            let from = self.dtype();
            record(&out, &[Some(self)], || Ok(BackwardOp::ToDtype { from }))?;
        }
        Ok(out)
    }

    /// A tensor of this shape and dtype holding `data` (numel values, in
    /// memory order) in `empty_like`'s layout.
    pub(super) fn like_with(&self, data: Storage) -> Tensor {
        Tensor::from_storage(data, preserve_layout(&self.layout()))
    }

    /// Zeros with this tensor's shape, dtype, device and layout order.
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.full_like(0.0)
    }
    /// Ones with this tensor's shape, dtype, device and layout order.
    pub fn ones_like(&self) -> Result<Tensor> {
        self.full_like(1.0)
    }
    /// A tensor filled with `value`, laid out like `self` (preserve format).
    pub fn full_like(&self, value: f64) -> Result<Tensor> {
        Ok(self.like_with(Storage::full("full_like", &self.device(), self.dtype(), self.numel(), value)?))
    }
}
