//! Masking and reshaping ops for models: `masked_fill`, `tril`/`triu`
//! (selections through `where`, differentiated by the shared table), and
//! `flatten`/`view_as` (views through `reshape`/`view`).

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::wrap_dim;
use crate::tensor::Tensor;
use crate::tensor::{no_grad, record, BackwardOp, Kept, SavedTensor};
use aot_ir::graph::args::{f, i, t};
use aot_ir::{OpKind, ValueId};

impl Tensor {
    /// `torch.masked_fill(self, mask, value)`: `value` (in `self`'s dtype)
    /// where the bool `mask` is true; `self` and `mask` broadcast.
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        if mask.dtype() != DType::Bool {
            return Err(AotError::dtype(OP, format!("expected a bool mask, got {}", mask.dtype())));
        }
        super::check_same_device(OP, self, mask)?;
        let fill = Tensor::full(&[], value, self.dtype(), &self.device())?;
        let out = no_grad(|| fill.where_(mask, self))?;
        record(&out, &[Some(self)], || {
            let args = vec![t(ValueId(0)), t(ValueId(1)), f(value)];
            let inputs = vec![Kept::Saved(SavedTensor::save(self)), Kept::Saved(SavedTensor::save(mask))];
            Ok(BackwardOp::Table { op: OpKind::MaskedFill, args, inputs, out: None, edges: vec![0] })
        })?;
        Ok(out)
    }

    /// `torch.tril(self, k)`: the elements on and below diagonal `k` of the
    /// last two dims; the rest zero.
    pub fn tril(&self, k: i64) -> Result<Tensor> {
        self.triangle("tril", k, OpKind::Tril)
    }

    /// `torch.triu(self, k)`: the elements on and above diagonal `k`.
    pub fn triu(&self, k: i64) -> Result<Tensor> {
        self.triangle("triu", k, OpKind::Triu)
    }

    fn triangle(&self, op: &'static str, k: i64, kind: OpKind) -> Result<Tensor> {
        let shape = self.shape();
        let &[.., rows, cols] = shape.as_slice() else {
            return Err(AotError::shape(op, format!("expected a tensor with at least 2 dimensions, got shape {shape:?}")));
        };
        let lower = kind == OpKind::Tril;
        // Element (r, c) is on diagonal c - r.
        let keep: Vec<bool> = (0..rows * cols)
            .map(|p| {
                let diag = (p % cols) as i64 - (p / cols) as i64;
                if lower {
                    diag <= k
                } else {
                    diag >= k
                }
            })
            .collect();
        let keep = Tensor::from_vec(keep, &[rows, cols], &self.device())?;
        let zero = Tensor::zeros(&[], self.dtype(), &self.device())?;
        let out = no_grad(|| self.where_(&keep, &zero))?;
        record(&out, &[Some(self)], || {
            Ok(BackwardOp::Table { op: kind, args: vec![t(ValueId(0)), i(k)], inputs: vec![Kept::Absent], out: None, edges: vec![0] })
        })?;
        Ok(out)
    }

    /// `torch.flatten(self, start_dim, end_dim)`: dims `start_dim..=end_dim`
    /// merged into one; a view when the layout allows, else a copy (as
    /// `reshape`). A 0-d tensor becomes one element of shape `[1]`.
    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor> {
        const OP: &str = "flatten";
        let shape = self.shape();
        let (s, e) = (wrap_dim(OP, start_dim, shape.len())?, wrap_dim(OP, end_dim, shape.len())?);
        if s > e {
            return Err(AotError::unsupported(OP, format!("start_dim ({start_dim}) cannot come after end_dim ({end_dim})")));
        }
        let mut new: Vec<i64> = shape[..s].iter().map(|&d| d as i64).collect();
        new.push(shape[s.min(shape.len())..(e + 1).min(shape.len())].iter().product::<usize>() as i64);
        new.extend(shape.get(e + 1..).unwrap_or(&[]).iter().map(|&d| d as i64));
        self.reshape(&new)
    }

    /// `self.view_as(other)`: `self.view(other.shape())`.
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        let shape: Vec<i64> = other.shape().iter().map(|&d| d as i64).collect();
        self.view(&shape)
    }
}
