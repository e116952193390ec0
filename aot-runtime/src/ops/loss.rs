//! The classification losses: `nll_loss` and `cross_entropy` (which is
//! `nll_loss(log_softmax(x, -1))`), with integer class targets and mean
//! reduction, and the gradient primitive of `nll_loss`. Inputs are `[N, C]`
//! with targets `[N]`, or `[C]` with a 0-d target; a target of -100 is
//! ignored (PyTorch's default `ignore_index`), any other target outside
//! `[0, C)` is an error naming the op.

use super::scan::host_tensor;
use crate::autograd::{record, BackwardOp, Kept, SavedTensor};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::storage::CpuStorage;
use crate::tensor::Tensor;
use aot_ir::graph::args::t;
use aot_ir::{OpKind, ValueId};

/// PyTorch's default `ignore_index`.
const IGNORE_INDEX: i64 = -100;

/// The checked targets of a loss over `x`: `(rows, classes, targets)`.
fn checked_targets(op: &'static str, x: &Tensor, targets: &Tensor) -> Result<(usize, usize, Vec<i64>)> {
    if !x.dtype().is_float() {
        return Err(AotError::dtype(op, format!("expected a floating input, got {}", x.dtype())));
    }
    if targets.dtype() != DType::I64 {
        return Err(AotError::dtype(op, format!("expected targets of dtype i64 (class indices), got {}", targets.dtype())));
    }
    super::check_same_device(op, x, targets)?;
    let (xs, ts) = (x.shape(), targets.shape());
    let (rows, classes) = match (xs.as_slice(), ts.as_slice()) {
        ([c], []) => (1, *c),
        ([n, c], [m]) if n == m => (*n, *c),
        _ => {
            return Err(AotError::shape(
                op,
                format!("expected input [N, C] with targets [N], or input [C] with a 0-d target; got input {xs:?} and targets {ts:?}"),
            ))
        }
    };
    let tv = targets.to_vec::<i64>()?;
    if let Some(&bad) = tv.iter().find(|&&c| c != IGNORE_INDEX && !(0..classes as i64).contains(&c)) {
        return Err(AotError::IndexOutOfRange { op, index: bad, dim: 1.min(xs.len() - 1), size: classes });
    }
    Ok((rows, classes, tv))
}

/// The number of targets that count (not ignored), as the mean's divisor.
fn counted(tv: &[i64]) -> usize {
    tv.iter().filter(|&&c| c != IGNORE_INDEX).count()
}

fn nll_loss_as(op: &'static str, x: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let (_, classes, tv) = checked_targets(op, x, targets)?;
    let xv = x.to_vec::<f64>()?;
    let picked: f64 = tv.iter().enumerate().filter(|(_, &c)| c != IGNORE_INDEX).map(|(r, &c)| xv[r * classes + c as usize]).sum();
    // No target counted: 0/0, NaN, as PyTorch.
    let loss = -picked / counted(&tv) as f64;
    let out = host_tensor(op, CpuStorage::from_f64s(op, x.dtype(), std::iter::once(loss))?, &[], &x.device())?;
    record(&out, &[Some(x)], || {
        let args = vec![t(ValueId(0)), t(ValueId(1))];
        let inputs = vec![Kept::Saved(SavedTensor::save(x)), Kept::Saved(SavedTensor::save(targets))];
        Ok(BackwardOp::Table { op: OpKind::NllLoss, args, inputs, out: None, edges: vec![0] })
    })?;
    Ok(out)
}

impl Tensor {
    /// `F.nll_loss(self, targets)`: `-mean(self[i, targets[i]])` over the
    /// targets not ignored; `self` holds log-probabilities.
    pub fn nll_loss(&self, targets: &Tensor) -> Result<Tensor> {
        nll_loss_as("nll_loss", self, targets)
    }

    /// `F.cross_entropy(self, targets)`: `nll_loss(log_softmax(self, -1))`
    /// for logits `self`.
    pub fn cross_entropy(&self, targets: &Tensor) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        // Checked before any work, so the error names this op.
        checked_targets(OP, self, targets)?;
        nll_loss_as(OP, &self.log_softmax(-1)?, targets)
    }
}

/// The gradient of `nll_loss(like, targets)` for output gradient `g` (0-d):
/// zeros like `like` with `-g / count` at each counted `(i, targets[i])`.
pub(crate) fn nll_loss_grad(g: &Tensor, like: &Tensor, targets: &Tensor) -> Result<Tensor> {
    const OP: &str = "nll_loss_backward";
    let (_, classes, tv) = checked_targets(OP, like, targets)?;
    let gv = g.to_vec::<f64>()?;
    let &[gv] = gv.as_slice() else {
        return Err(AotError::shape(OP, format!("expected a one-element gradient, got shape {:?}", g.shape())));
    };
    let share = -gv / counted(&tv) as f64;
    let mut out = vec![0.0; like.numel()];
    for (r, &c) in tv.iter().enumerate().filter(|(_, &c)| c != IGNORE_INDEX) {
        out[r * classes + c as usize] = share;
    }
    host_tensor(OP, CpuStorage::from_f64s(OP, like.dtype(), out.into_iter())?, &like.shape(), &like.device())
}
