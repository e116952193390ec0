//! `Tensor::view_dtype`, PyTorch's `x.view(dtype)`: a tensor's bytes read
//! as another dtype (the storage side is `storage/dtype_view.rs`).

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::AutogradMeta;
use crate::tensor::Tensor;

const OP: &str = "view_dtype";

impl Tensor {
    /// The same bytes read as `dtype`, as PyTorch's `x.view(dtype)`: the
    /// result shares this tensor's storage and version counter, so writes
    /// through either show in the other (a vLLM-style KV cache viewed as
    /// two dtypes). With elements of the same size it has this tensor's
    /// shape and strides; otherwise the last dim (stride 1) is split or
    /// merged, and the other strides and the offset are scaled, with
    /// PyTorch's divisibility checks. Viewing as the tensor's own dtype
    /// gives this tensor.
    ///
    /// Like PyTorch's, the result does not require grad. CPU tensors only,
    /// and bool takes no part (not every byte is a bool).
    ///
    /// ```
    /// use aot_runtime::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2], &Device::Cpu)?;
    /// let bits = x.view_dtype(DType::F16)?; // each f32 as two f16 halves
    /// assert_eq!(bits.shape(), &[4]);
    /// let halves = x.to_dtype(DType::F16)?.view_dtype(DType::BF16)?;
    /// halves.zero_()?;
    /// assert!(x.shares_storage_with(&bits));
    /// # Ok::<(), AotError>(())
    /// ```
    pub fn view_dtype(&self, dtype: DType) -> Result<Tensor> {
        let from = self.dtype();
        if dtype == from {
            return Ok(self.clone());
        }
        let layout = view_dtype_layout(&self.layout(), from, dtype)?;
        let storage = self.storage().dtype_view(OP, dtype)?;
        Ok(Tensor::from_parts(storage, layout, AutogradMeta::default()))
    }
}

impl Tensor {
    /// `as_strided(shape, stride, offset)` of this tensor's storage read
    /// as `dtype` (the geometry in `dtype`'s elements): how a synthetic
    /// base regenerates an argument that views its bytes as another dtype.
    /// Of this tensor's own dtype it is `as_strided` itself.
    pub(crate) fn as_strided_dtype(&self, dtype: DType, shape: &[usize], stride: &[usize], offset: usize) -> Result<Tensor> {
        if dtype == self.dtype() {
            return self.as_strided(shape, stride, offset);
        }
        let storage = self.storage().dtype_view(OP, dtype)?;
        let n = storage.len();
        let op = crate::tensor::ViewOp::AsStrided { size: shape.to_vec(), stride: stride.to_vec(), offset };
        let layout = op.apply(&Layout::contiguous(&[n]), n)?;
        Ok(Tensor::from_parts(storage, layout, AutogradMeta::default()))
    }
}

impl Tensor {
    /// A tensor over this one's storage with `t`'s geometry and dtype,
    /// without history: how a copy of a storage stands in for each argument
    /// over it (a dtype view of the copy for an argument of another dtype).
    pub(crate) fn alias_like(&self, t: &Tensor) -> Result<Tensor> {
        if self.dtype() == t.dtype() {
            return Ok(self.alias_with_layout(t.layout()));
        }
        let l = t.layout();
        self.as_strided_dtype(t.dtype(), &l.shape, &l.stride, l.offset)
    }
}

/// The layout of `l` (elements of `from`) read as `to`.
pub(crate) fn view_dtype_layout(l: &Layout, from: DType, to: DType) -> Result<Layout> {
    let (old, new) = (from.size_in_bytes(), to.size_in_bytes());
    if old == new {
        return Ok(l.clone());
    }
    let what = format!("to view {} as {} (different element sizes)", from.name(), to.name());
    let rank = l.shape.len();
    if rank == 0 {
        return Err(AotError::shape(OP, format!("self.dim() cannot be 0 {what}")));
    }
    let last = rank - 1;
    if l.stride[last] != 1 {
        return Err(AotError::shape(OP, format!("self.stride(-1) must be 1 {what}, but got {}", l.stride[last])));
    }
    let (mut shape, mut stride, mut offset) = (l.shape.to_vec(), l.stride.to_vec(), l.offset);
    if new > old {
        let r = new / old;
        if shape[last] % r != 0 {
            return Err(AotError::shape(OP, format!("self.size(-1) must be divisible by {r} {what}, but got {}", shape[last])));
        }
        if offset % r != 0 {
            return Err(AotError::shape(OP, format!("self.storage_offset() must be divisible by {r} {what}, but got {offset}")));
        }
        if let Some(d) = (0..last).find(|&d| stride[d] % r != 0) {
            return Err(AotError::shape(OP, format!("self.stride({d}) must be divisible by {r} {what}, but got {}", stride[d])));
        }
        shape[last] /= r;
        (0..last).for_each(|d| stride[d] /= r);
        offset /= r;
    } else {
        let r = old / new;
        let overflow = || AotError::shape(OP, format!("the sizes overflow {what}"));
        shape[last] = shape[last].checked_mul(r).ok_or_else(overflow)?;
        for s in &mut stride[..last] {
            *s = s.checked_mul(r).ok_or_else(overflow)?;
        }
        offset = offset.checked_mul(r).ok_or_else(overflow)?;
    }
    Ok(Layout::new(shape, stride, offset))
}
