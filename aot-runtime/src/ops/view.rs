//! View ops (outputs share storage with their input) and the metadata
//! mutations (`t_`, `transpose_`, ...) that change one tensor's layout.

use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::tensor::{is_grad_enabled, record, BackwardOp, Node, ViewInfo, ViewOp};

/// Makes the view of `x` with `layout`, as a differentiable view of `x`'s root base.
fn make_view(x: &Tensor, layout: Layout, op: ViewOp) -> Result<Tensor> {
    let out = x.alias_with_layout(layout);
    let base = match &x.state().ag.view {
        Some(v) => v.base.clone(),
        None => x.clone(),
    };
    {
        // A view made under no_grad of a tensor that requires grad still
        // requires grad, as a leaf: no gradient reaches the base (PyTorch).
        let leaf_requires_grad = !is_grad_enabled() && x.requires_grad();
        let version = out.version();
        let mut s = out.state_mut();
        s.ag.view = Some(ViewInfo { base, created_in_no_grad: !is_grad_enabled() });
        s.ag.grad_fn_version = version;
        s.ag.requires_grad = leaf_requires_grad;
    }
    let in_layout = x.layout();
    let storage_len = x.storage_len();
    record(&out, &[Some(x)], || Ok(BackwardOp::View { op, in_layout, storage_len, dtype: x.dtype() }))?;
    Ok(out)
}

impl Tensor {
    fn view_op(&self, op: ViewOp) -> Result<Tensor> {
        let layout = op.apply(&self.layout(), self.storage_len())?;
        make_view(self, layout, op)
    }

    /// `view(shape)`; one dim may be -1. Fails if the layout cannot be viewed.
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let l = self.layout().view("view", shape)?;
        let s = l.shape.to_vec();
        make_view(self, l, ViewOp::View(s))
    }
    /// `reshape(shape)`: a view when possible, else a copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let l = self.layout();
        let new_shape = Layout::infer_shape("reshape", shape, l.numel())?;
        if l.view_strides(&new_shape).is_some() {
            return self.view(shape);
        }
        // A copy: PyTorch's `_unsafe_view` of it, with history but no `._base`.
        let out = self.contiguous()?.view(shape)?;
        out.state_mut().ag.view = None;
        Ok(out)
    }
    /// Transpose of a tensor with at most 2 dims.
    pub fn t(&self) -> Result<Tensor> {
        self.layout().t("t")?;
        if self.rank() < 2 {
            return self.view_op(ViewOp::Permute((0..self.rank()).collect()));
        }
        self.transpose(0, 1)
    }
    /// A view with dims `d0` and `d1` swapped.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        let r = self.rank();
        let (a, b) = (crate::layout::wrap_dim("transpose", d0, r)?, crate::layout::wrap_dim("transpose", d1, r)?);
        if r == 0 {
            return self.view_op(ViewOp::Permute(vec![]));
        }
        self.view_op(ViewOp::Transpose(a, b))
    }
    /// A view with the dims reordered: dim `i` is this tensor's `dims[i]`.
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let l = self.layout().permute("permute", dims)?;
        let r = self.rank();
        let d: Vec<usize> = dims.iter().map(|&d| crate::layout::wrap_dim("permute", d, r)).collect::<Result<_>>()?;
        make_view(self, l, ViewOp::Permute(d))
    }
    /// A view with a size-1 dim inserted at `dim`.
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = crate::layout::wrap_dim("unsqueeze", dim, self.rank() + 1)?;
        self.view_op(ViewOp::Unsqueeze(d))
    }
    /// Removes `dim` if it has size 1 (otherwise a view of the same shape).
    pub fn squeeze(&self, dim: i64) -> Result<Tensor> {
        if self.rank() == 0 {
            crate::layout::wrap_dim("squeeze", dim, 0)?;
            return self.view_op(ViewOp::Permute(vec![]));
        }
        let d = crate::layout::wrap_dim("squeeze", dim, self.rank())?;
        self.view_op(ViewOp::Squeeze(d))
    }
    /// A view broadcast to `shape` (size-1 dims repeat with stride 0; -1
    /// keeps a dim).
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        let l = self.layout().expand("expand", shape)?;
        let s = l.shape.to_vec();
        make_view(self, l, ViewOp::Expand(s))
    }
    /// The view at `index` along `dim`, with `dim` removed.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        let l = self.layout().select("select", dim, index)?;
        let r = self.rank();
        let d = crate::layout::wrap_dim("select", dim, r)?;
        let n = self.shape()[d] as i64;
        let i = if index < 0 { index + n } else { index } as usize;
        make_view(self, l, ViewOp::Select(d, i))
    }
    /// `slice(dim, start, end, step)` like `x[start:end:step]` along `dim`.
    pub fn slice(&self, dim: i64, start: i64, end: i64, step: i64) -> Result<Tensor> {
        let l = self.layout().slice("slice", dim, start, end, step)?;
        let d = crate::layout::wrap_dim("slice", dim, self.rank())?;
        let n = self.shape()[d] as i64;
        let s = (if start < 0 { start + n } else { start }).clamp(0, n) as usize;
        let e = (if end < 0 { end + n } else { end }).clamp(0, n).max(s as i64) as usize;
        make_view(self, l, ViewOp::Slice { dim: d, start: s, end: e, step: step as usize })
    }
    /// The view of `length` elements of `dim` from `start`.
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        let l = self.layout().narrow("narrow", dim, start, length)?;
        let d = crate::layout::wrap_dim("narrow", dim, self.rank())?;
        let n = self.shape()[d] as i64;
        let s = (if start < 0 { start + n } else { start }) as usize;
        make_view(self, l, ViewOp::Slice { dim: d, start: s, end: s + length as usize, step: 1 })
    }
    /// The main diagonal over the first two dims (appended as the last dim).
    pub fn diagonal(&self) -> Result<Tensor> {
        self.view_op(ViewOp::Diagonal)
    }
    /// A view with explicit geometry on this tensor's storage.
    pub fn as_strided(&self, size: &[usize], stride: &[usize], offset: usize) -> Result<Tensor> {
        self.view_op(ViewOp::AsStrided { size: size.to_vec(), stride: stride.to_vec(), offset })
    }

    // ---- metadata mutations ---------------------------------------------

    /// Changes this tensor object's layout by `op`, rewriting its history.
    fn metadata_mutation(&self, op: ViewOp) -> Result<Tensor> {
        let name = op.name();
        let old = self.layout();
        let new = op.apply(&old, self.storage_len())?;
        let recording = is_grad_enabled() && self.requires_grad();
        if recording {
            crate::ops::inplace::check_inplace(name, self)?;
        }
        let node = if recording {
            let edge = self.grad_edge();
            Some(Node::new(BackwardOp::View { op, in_layout: old, storage_len: self.storage_len(), dtype: self.dtype() }, vec![edge]))
        } else {
            None
        };
        self.storage().bump_version();
        let version = self.version();
        let mut s = self.state_mut();
        s.layout = new;
        if recording {
            s.ag.grad_fn = node;
            s.ag.output_nr = 0;
        }
        s.ag.grad_fn_version = version;
        drop(s);
        Ok(self.clone())
    }

    /// `t` in place: changes this tensor's own layout (a metadata
    /// mutation, recorded in its history); returns `self`.
    pub fn t_(&self) -> Result<Tensor> {
        self.layout().t("t_")?;
        if self.rank() < 2 {
            return self.metadata_mutation(ViewOp::Permute((0..self.rank()).collect()));
        }
        self.metadata_mutation(ViewOp::Transpose(0, 1))
    }
    /// `transpose` in place (a metadata mutation); returns `self`.
    pub fn transpose_(&self, d0: i64, d1: i64) -> Result<Tensor> {
        let r = self.rank();
        let (a, b) = (crate::layout::wrap_dim("transpose_", d0, r)?, crate::layout::wrap_dim("transpose_", d1, r)?);
        if r == 0 {
            return self.metadata_mutation(ViewOp::Permute(vec![]));
        }
        self.metadata_mutation(ViewOp::Transpose(a, b))
    }
    /// `unsqueeze` in place (a metadata mutation); returns `self`.
    pub fn unsqueeze_(&self, dim: i64) -> Result<Tensor> {
        let d = crate::layout::wrap_dim("unsqueeze_", dim, self.rank() + 1)?;
        self.metadata_mutation(ViewOp::Unsqueeze(d))
    }
    /// `squeeze` in place (a metadata mutation); returns `self`.
    pub fn squeeze_(&self, dim: i64) -> Result<Tensor> {
        if self.rank() == 0 {
            crate::layout::wrap_dim("squeeze_", dim, 0)?;
            return self.metadata_mutation(ViewOp::Permute(vec![]));
        }
        let d = crate::layout::wrap_dim("squeeze_", dim, self.rank())?;
        self.metadata_mutation(ViewOp::Squeeze(d))
    }
    /// `as_strided` in place (a metadata mutation); returns `self`.
    pub fn as_strided_(&self, size: &[usize], stride: &[usize], offset: usize) -> Result<Tensor> {
        self.metadata_mutation(ViewOp::AsStrided { size: size.to_vec(), stride: stride.to_vec(), offset })
    }
}
