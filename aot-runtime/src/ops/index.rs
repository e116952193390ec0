//! Indexing by an i64 index tensor: `index_select`, `gather`,
//! `scatter_add`, `embedding`, `index_copy`/`index_add` and their in-place
//! forms `index_copy_`/`index_add_` (how a KV cache is written at positions
//! held in a tensor).
//!
//! Each op checks ranks, shapes and dtypes here and lays the index out over
//! the positions it addresses (a 1-D index is broadcast with stride 0 over
//! the other dims), so one backend primitive pair serves them all:
//! `gather` and `scatter` (see [`crate::backend::Backend::gather`]). The
//! backends check every index value before anything is written. Gradients
//! are the shared table's (`aot_ir`'s `grad_rules::index`), recorded as
//! [`BackwardOp::Table`].

use super::inplace::inplace;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{preserve_layout, wrap_dim, Layout};
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, Kept, SavedTensor};
use aot_ir::graph::args::{i, t};
use aot_ir::{OpKind, ValueId};

fn check_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype() != DType::I64 {
        return Err(AotError::dtype(op, format!("expected an index tensor of dtype I64, but got {}", index.dtype())));
    }
    Ok(())
}

/// A 1-D (or 0-d) index's layout broadcast over `shape`, walking `dim`.
fn index_over(op: &'static str, index: &Tensor, shape: &[usize], dim: usize) -> Result<Layout> {
    check_index(op, index)?;
    if index.rank() > 1 {
        return Err(AotError::shape(op, format!("index is supposed to be a vector, but got a tensor of rank {}", index.rank())));
    }
    let li = index.layout();
    let mut stride = vec![0; shape.len()];
    if let (Some(s), Some(&st)) = (stride.get_mut(dim), li.stride.first()) {
        *s = st;
    }
    Ok(Layout::new(shape.to_vec(), stride, li.offset))
}

/// The shape of a source for `index_copy`/`index_add` along `dim`.
fn check_source(op: &'static str, x: &Tensor, dim: usize, index: &Tensor, src: &Tensor) -> Result<()> {
    crate::ops::check_same_device(op, x, src)?;
    crate::ops::check_same_device(op, x, index)?;
    if src.dtype() != x.dtype() {
        return Err(AotError::dtype(op, format!("self ({}) and source ({}) must have the same dtype", x.dtype(), src.dtype())));
    }
    let mut want = x.shape();
    if let Some(d) = want.get_mut(dim) {
        *d = index.numel();
    }
    if src.shape() != want || (x.rank() == 0 && index.numel() != 1) {
        return Err(AotError::shape(
            op,
            format!(
                "source of shape {:?} does not fit self of shape {:?} with {} indices along dim {dim}",
                src.shape(),
                x.shape(),
                index.numel()
            ),
        ));
    }
    Ok(())
}

/// What a recorded op keeps of a tensor it reads for its metadata only.
fn meta(x: &Tensor) -> Kept {
    Kept::Meta { shape: x.shape(), dtype: x.dtype() }
}

/// Records `out = kind(x, d, index)` for an op that reads `x` at `index`
/// along `d` (`index_select`, `gather`): its gradient flows to `x` alone,
/// so `x` is kept for its metadata and `index` is saved.
fn record_indexed_read(out: &Tensor, kind: OpKind, x: &Tensor, d: usize, index: &Tensor) -> Result<()> {
    record(out, &[Some(x)], || {
        let args = vec![t(ValueId(0)), i(d as i64), t(ValueId(1))];
        Ok(BackwardOp::Table { op: kind, args, inputs: vec![meta(x), Kept::Saved(SavedTensor::save(index))], out: None, edges: vec![0] })
    })
}

impl Tensor {
    /// The slices of `self` along `dim` at the positions `index` (an I64
    /// vector) names, in its order (PyTorch's `index_select`).
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        crate::ops::check_same_device(OP, self, index)?;
        let d = wrap_dim(OP, dim, self.rank())?;
        let mut shape = self.shape();
        if let Some(s) = shape.get_mut(d) {
            *s = index.numel();
        } else if index.numel() != 1 {
            return Err(AotError::shape(OP, "index to a 0-dim tensor can have only one value"));
        }
        let li = index_over(OP, index, &shape, d)?;
        let out = self.storage().gather(OP, &self.layout(), d, index.storage(), &li)?;
        let out = Tensor::from_storage(out, Layout::contiguous(&shape));
        record_indexed_read(&out, OpKind::IndexSelect, self, d, index)?;
        Ok(out)
    }

    /// `out[p] = self[p with coordinate dim = index[p]]`, shaped like
    /// `index` (PyTorch's `gather`).
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "gather";
        crate::ops::check_same_device(OP, self, index)?;
        check_index(OP, index)?;
        let d = wrap_dim(OP, dim, self.rank())?;
        check_index_shape(OP, index, self, d, "input")?;
        let out = self.storage().gather(OP, &self.layout(), d, index.storage(), &index.layout())?;
        let out = Tensor::from_storage(out, Layout::contiguous(&index.shape()));
        record_indexed_read(&out, OpKind::Gather, self, d, index)?;
        Ok(out)
    }

    /// A copy of `self` with `src[p]` added at `p with coordinate dim =
    /// index[p]` for every position `p` of `index` (PyTorch's
    /// `scatter_add`).
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "scatter_add";
        crate::ops::check_same_device(OP, self, index)?;
        crate::ops::check_same_device(OP, self, src)?;
        check_index(OP, index)?;
        let d = wrap_dim(OP, dim, self.rank())?;
        if src.dtype() != self.dtype() {
            return Err(AotError::dtype(OP, format!("expected self.dtype ({}) to be equal to src.dtype ({})", self.dtype(), src.dtype())));
        }
        check_index_shape(OP, index, self, d, "self")?;
        if src.rank() != index.rank() || index.shape().iter().zip(src.shape()).any(|(&n, m)| n > m) {
            return Err(AotError::shape(OP, format!("index of shape {:?} does not fit src of shape {:?}", index.shape(), src.shape())));
        }
        let sl = src.layout();
        let ls = Layout::new(index.shape(), sl.stride.clone(), sl.offset);
        let out = self.scatter_copy(OP, d, index, &index.layout(), src, &ls, true)?;
        record(&out, &[Some(self), Some(src)], || {
            let args = vec![t(ValueId(0)), i(d as i64), t(ValueId(1)), t(ValueId(2))];
            let inputs = vec![meta(self), Kept::Saved(SavedTensor::save(index)), meta(src)];
            Ok(BackwardOp::Table { op: OpKind::ScatterAdd, args, inputs, out: None, edges: vec![0, 3] })
        })?;
        Ok(out)
    }

    /// The rows of `weight` (2-D) at the ids in `self` (I64, any shape),
    /// shaped `self.shape + [weight.shape[1]]` (PyTorch's
    /// `F.embedding(ids, weight)`).
    pub fn embedding(&self, weight: &Tensor) -> Result<Tensor> {
        const OP: &str = "embedding";
        crate::ops::check_same_device(OP, self, weight)?;
        check_index(OP, self)?;
        if weight.rank() != 2 {
            return Err(AotError::shape(OP, format!("'weight' must be 2-D, but got a tensor of rank {}", weight.rank())));
        }
        let dim = weight.shape()[1];
        let mut shape = self.shape();
        shape.push(dim);
        // the ids, flattened, walk dim 0 of the weight; each row is read whole
        let ids = self.contiguous()?;
        let li = Layout::new(vec![self.numel(), dim], vec![1, 0], ids.storage_offset());
        let wl = weight.layout();
        let out = weight.storage().gather(OP, &wl, 0, ids.storage(), &li)?;
        let out = Tensor::from_storage(out, Layout::contiguous(&shape));
        record(&out, &[Some(self), Some(weight)], || {
            let inputs = vec![Kept::Saved(SavedTensor::save(self)), meta(weight)];
            Ok(BackwardOp::Table { op: OpKind::Embedding, args: vec![t(ValueId(0)), t(ValueId(1))], inputs, out: None, edges: vec![0, 1] })
        })?;
        Ok(out)
    }

    /// A copy of `self` with the slices along `dim` at `index` replaced by
    /// `src`'s (PyTorch's out-of-place `index_copy`).
    pub fn index_copy(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.index_put("index_copy", OpKind::IndexCopy, dim, index, src)
    }

    /// A copy of `self` with `src`'s slices along `dim` added at `index`
    /// (PyTorch's out-of-place `index_add`).
    pub fn index_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.index_put("index_add", OpKind::IndexAdd, dim, index, src)
    }

    /// `index_copy` in place: everything is checked before `self` is written.
    pub fn index_copy_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        inplace("index_copy_", self, &[index, src], |cur| cur.index_put("index_copy_", OpKind::IndexCopy, dim, index, src))
    }

    /// `index_add` in place: everything is checked before `self` is written.
    pub fn index_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        inplace("index_add_", self, &[index, src], |cur| cur.index_put("index_add_", OpKind::IndexAdd, dim, index, src))
    }

    fn index_put(&self, op: &'static str, kind: OpKind, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = wrap_dim(op, dim, self.rank())?;
        check_source(op, self, d, index, src)?;
        let li = index_over(op, index, &src.shape(), d)?;
        let out = self.scatter_copy(op, d, index, &li, src, &src.layout(), kind == OpKind::IndexAdd)?;
        record(&out, &[Some(self), Some(src)], || {
            let args = vec![t(ValueId(0)), i(d as i64), t(ValueId(1)), t(ValueId(2))];
            let inputs = vec![meta(self), Kept::Saved(SavedTensor::save(index)), meta(src)];
            Ok(BackwardOp::Table { op: kind, args, inputs, out: None, edges: vec![0, 3] })
        })?;
        Ok(out)
    }

    /// A copy of `self` (its memory format preserved) with `src` (through
    /// `ls`) scattered into it along `dim` by `index` (through `li`).
    #[allow(clippy::too_many_arguments)]
    fn scatter_copy(
        &self,
        op: &'static str,
        dim: usize,
        index: &Tensor,
        li: &Layout,
        src: &Tensor,
        ls: &Layout,
        add: bool,
    ) -> Result<Tensor> {
        let out = self.copy_as(op, self.dtype(), preserve_layout(&self.layout()))?;
        src.storage().scatter_into(op, ls, dim, index.storage(), li, out.storage(), &out.layout(), add)?;
        Ok(out)
    }
}

/// `gather`/`scatter_add`'s rule: the index has `x`'s rank and fits in it
/// outside `dim`.
fn check_index_shape(op: &'static str, index: &Tensor, x: &Tensor, dim: usize, name: &str) -> Result<()> {
    let (is, xs) = (index.shape(), x.shape());
    if is.len() != xs.len() {
        return Err(AotError::shape(op, format!("index tensor must have the same number of dimensions as {name} tensor")));
    }
    if let Some(k) = (0..is.len()).find(|&k| k != dim && is[k] > xs[k]) {
        return Err(AotError::shape(
            op,
            format!(
                "size does not match at dimension {k}: expected index {is:?} to be no larger than {name} {xs:?} apart from dimension {dim}"
            ),
        ));
    }
    Ok(())
}
