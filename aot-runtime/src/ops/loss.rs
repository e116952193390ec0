//! The classification losses: `nll_loss` and `cross_entropy` (which is
//! `nll_loss(log_softmax(x, -1))`), with integer class targets and mean
//! reduction, and the gradient primitive of `nll_loss`. Inputs are `[N, C]`
//! with targets `[N]`, or `[C]` with a 0-d target; a target of -100 is
//! ignored (PyTorch's default `ignore_index`), any other target outside
//! `[0, C)` is an error naming the op.

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::LossTargets;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, Kept, SavedTensor};
use aot_ir::graph::args::t;
use aot_ir::{OpKind, ValueId};

/// PyTorch's default `ignore_index`.
const IGNORE_INDEX: i64 = -100;

/// A loss's checked operands: the input's and the targets' layouts as
/// `[N, C]` and `[N]` (a `[C]` input with a 0-d target is one row), the
/// number of classes and the number of targets that count.
struct Checked {
    input: Layout,
    targets: Layout,
    classes: usize,
    count: usize,
}

impl Checked {
    fn targets<'a>(&'a self, t: &'a Tensor) -> LossTargets<'a> {
        LossTargets { index: t.storage(), layout: &self.targets, classes: self.classes, ignore: IGNORE_INDEX, count: self.count }
    }
}

/// Checks a loss's operands: dtypes, devices, shapes and every target
/// value (read on the host: an out-of-range target is an error before
/// anything runs).
fn checked_targets(op: &'static str, x: &Tensor, targets: &Tensor) -> Result<Checked> {
    if !x.dtype().is_float() {
        return Err(AotError::dtype(op, format!("expected a floating input, got {}", x.dtype())));
    }
    if targets.dtype() != DType::I64 {
        return Err(AotError::dtype(op, format!("expected targets of dtype i64 (class indices), got {}", targets.dtype())));
    }
    super::check_same_device(op, x, targets)?;
    let (xs, ts) = (x.shape(), targets.shape());
    let (xl, tl) = (x.layout(), targets.layout());
    let (input, tlayout, classes) = match (xs.as_slice(), ts.as_slice()) {
        ([c], []) => (Layout::new(vec![1, *c], vec![0, xl.stride[0]], xl.offset), Layout::new(vec![1], vec![0], tl.offset), *c),
        ([n, c], [m]) if n == m => (xl, tl, *c),
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
    let count = tv.iter().filter(|&&c| c != IGNORE_INDEX).count();
    Ok(Checked { input, targets: tlayout, classes, count })
}

fn nll_loss_as(op: &'static str, x: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let c = checked_targets(op, x, targets)?;
    let data = x.storage().nll_loss(op, &c.input, c.targets(targets))?;
    let out = Tensor::from_storage(data, Layout::contiguous(&[]));
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
    let c = checked_targets(OP, like, targets)?;
    super::check_same_device(OP, g, targets)?;
    let data = g.storage().nll_loss_backward(OP, &g.layout(), c.targets(targets), like.dtype())?;
    Ok(Tensor::from_storage(data, Layout::contiguous(&like.shape())))
}
