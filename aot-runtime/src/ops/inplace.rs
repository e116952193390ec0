//! In-place data mutations, with PyTorch's checks and history rewriting.
//!
//! Every in-place op computes its new value out of place first and writes
//! it only after that succeeded, so a failing op leaves its target intact.
//! When autograd records, the op is computed from a snapshot that carries
//! the target's history; the target then takes the new history (or, for a
//! view, its base gets a `CopySlices` node).

use super::Operand;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{Layout, Overlap};
use crate::tensor::Tensor;
use crate::tensor::{is_grad_enabled, record, with_grad_mode, AutogradMeta, BackwardOp, Edge, Node};
use aot_ir::OpKind;
use std::sync::Arc;

pub(crate) fn leaf_error(op: &str, t: &Tensor) -> AotError {
    let is_view = t.state().ag.view.is_some();
    let msg = if is_view {
        "a view of a leaf Variable that requires grad is being used in an in-place operation."
    } else {
        "a leaf Variable that requires grad is being used in an in-place operation."
    };
    AotError::autograd(op, msg)
}

/// Autograd's checks before an in-place op (data or metadata) that records
/// history: the target may not be a leaf that requires grad, a view of one,
/// or a view made under `no_grad` of a tensor that requires grad.
pub(crate) fn check_inplace(op: &str, target: &Tensor) -> Result<()> {
    if let Some(v) = &target.state().ag.view {
        if v.created_in_no_grad && v.base.requires_grad() {
            return Err(AotError::autograd(
                op,
                "A view was created in no_grad mode and is being modified inplace with grad mode enabled. This view is the output of a function that returns multiple views or was created under no_grad; such views cannot be modified inplace. You should replace the inplace operation by an out-of-place one.",
            ));
        }
        if v.base.is_leaf() && v.base.requires_grad() {
            return Err(leaf_error(op, target));
        }
    }
    if target.is_leaf() && target.state().ag.requires_grad {
        return Err(leaf_error(op, target));
    }
    Ok(())
}

/// PyTorch's memory-overlap checks for writing into `dst` while reading `srcs`.
fn check_overlap(op: &'static str, dst: &Tensor, srcs: &[&Tensor]) -> Result<()> {
    let dl = dst.layout();
    // fill_ writes one value everywhere, so PyTorch lets it through
    if dl.has_internal_overlap() && op != "fill_" {
        return Err(AotError::unsupported(
            op,
            "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    for s in srcs {
        if s.shares_storage_with(dst) && dl.overlap(&s.layout()) == Overlap::Partial {
            return Err(AotError::unsupported(
                op,
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.",
            ));
        }
    }
    Ok(())
}

/// Writes `value` (any layout, broadcastable to `dst`'s shape) into `dst`'s
/// elements, casting to `dst`'s dtype, and bumps the version.
pub(crate) fn write_into(op: &'static str, dst: &Tensor, value: &Tensor) -> Result<()> {
    let dl = dst.layout();
    let vshape = value.shape();
    if crate::layout::broadcast_shapes(op, &vshape, &dl.shape)? != dl.shape {
        return Err(AotError::shape(op, format!("output with shape {:?} doesn't match the broadcast shape {:?}", dl.shape, vshape)));
    }
    let vl = super::binary::broadcast_layout(&value.layout(), &dl.shape);
    // Reads the source out first if it shares the destination's storage:
    // the two layouts may overlap.
    value.storage().copy_into(op, &vl, dst.storage(), &dl)?;
    dst.storage().bump_version();
    Ok(())
}

/// Runs an in-place op on `target`: `compute` gets the current value of the
/// target (with its history when recording) and returns the new value.
pub(crate) fn inplace(
    op: &'static str,
    target: &Tensor,
    others: &[&Tensor],
    compute: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    check_overlap(op, target, others)?;
    inplace_unchecked_overlap(op, target, others, compute)
}

/// [`inplace`] without the memory-overlap checks: for writes whose values
/// are already consistent across overlapping elements.
fn inplace_unchecked_overlap(
    op: &'static str,
    target: &Tensor,
    others: &[&Tensor],
    compute: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    // An integer or bool target never gets history (its dtype is not
    // differentiable), whatever it is written from.
    let recording = is_grad_enabled() && target.dtype().is_float() && (target.requires_grad() || others.iter().any(|t| t.requires_grad()));
    if !recording {
        let value = with_grad_mode(false, || compute(target))?;
        write_into(op, target, &value)?;
        return Ok(target.clone());
    }
    check_inplace(op, target)?;
    let view = target.state().ag.view.clone();
    // The snapshot holds the target's current values; for a plain tensor it
    // carries the target's history, for a view it stands in for the view's
    // old value inside CopySlices (which supplies the base's history).
    let values = with_grad_mode(false, || target.copy())?;
    let snap_ag = match &view {
        None => AutogradMeta { grad_fn: target.grad_fn(), requires_grad: false, ..Default::default() },
        Some(_) => AutogradMeta { requires_grad: true, ..Default::default() },
    };
    let snap = Tensor::from_parts(values.storage().clone(), values.layout(), snap_ag);
    let value = compute(&snap)?;
    let node = value.grad_fn();
    write_into(op, target, &value)?;
    let version = target.version();
    // The new value, if the op's backward saved it, is the target itself
    // from now on (PyTorch saves the written tensor): a later write to the
    // target must fail that backward.
    if !value.storage().same(target.storage()) {
        value.storage().mark_written_into(target.storage(), version);
    }
    match view {
        None => {
            let mut s = target.state_mut();
            s.ag.grad_fn = node;
            s.ag.output_nr = 0;
            s.ag.grad_fn_version = version;
        }
        Some(v) => {
            let fn_node = node.ok_or_else(|| AotError::internal(op, "in-place op on a view recorded no node"))?;
            let base = v.base.clone();
            let mut edges: Vec<Option<Edge>> = vec![base.grad_edge()];
            edges.extend(fn_node.edges.iter().skip(1).cloned());
            let cs = Node::new(
                BackwardOp::CopySlices {
                    base_layout: base.layout(),
                    view_layout: target.layout(),
                    storage_len: target.storage_len(),
                    dtype: base.dtype(),
                    fn_node: Arc::clone(&fn_node),
                },
                edges,
            );
            let mut s = base.state_mut();
            s.ag.grad_fn = Some(cs);
            s.ag.output_nr = 0;
            s.ag.grad_fn_version = version;
        }
    }
    Ok(target.clone())
}

/// The dtype check of an in-place binary op: the result must be castable to the target.
fn check_castable(op: &'static str, target: &Tensor, rhs: &Operand<'_>, bop: OpKind) -> Result<()> {
    let result = match rhs {
        Operand::Tensor(t) => super::result_type(target, t),
        Operand::Scalar(s) => s.promote_with(target.dtype()),
    };
    let result = if bop == OpKind::Div && !result.is_float() { DType::F32 } else { result };
    if result.category() > target.dtype().category() {
        return Err(AotError::dtype(op, format!("result type {} can't be cast to the desired output type {}", result, target.dtype())));
    }
    Ok(())
}

fn binary_inplace(op: &'static str, bop: OpKind, target: &Tensor, rhs: Operand<'_>) -> Result<Tensor> {
    check_castable(op, target, &rhs, bop)?;
    let compute = |cur: &Tensor| super::binary::binary(bop, cur, rhs, false);
    match rhs {
        Operand::Tensor(t) => {
            check_overlap(op, target, &[t])?;
            if assign_direct(op, bop, target, t) {
                return Ok(target.clone());
            }
            inplace_unchecked_overlap(op, target, &[t], compute)
        }
        Operand::Scalar(_) => inplace(op, target, &[], compute),
    }
}

/// `target op= rhs` written straight into the target's storage, without
/// the out-of-place value and its copy: when nothing is recorded, both are
/// floating tensors of one dtype and device on distinct storages, and
/// `rhs` broadcasts to the target's shape. The kernel computes what the
/// out-of-place op computes (the same arithmetic in the same dtype), and
/// checks everything before it writes, so a `false` (not such a case, or a
/// refused kernel) has written nothing and the general path runs (and
/// reports any error).
fn assign_direct(op: &'static str, bop: OpKind, target: &Tensor, rhs: &Tensor) -> bool {
    let dtype = target.dtype();
    if !dtype.is_float() || rhs.dtype() != dtype || target.device() != rhs.device() || target.shares_storage_with(rhs) {
        return false;
    }
    if is_grad_enabled() && (target.requires_grad() || rhs.requires_grad()) {
        return false;
    }
    let (lt, lr) = (target.layout(), rhs.layout());
    if !crate::layout::broadcast_shapes(op, &lr.shape, &lt.shape).is_ok_and(|s| s == lt.shape) {
        return false;
    }
    let lr = super::binary::broadcast_layout(&lr, &lt.shape);
    if target.storage().binary_assign(bop, &lt, rhs.storage(), &lr).is_err() {
        return false;
    }
    target.storage().bump_version();
    true
}

impl Tensor {
    /// In-place `self += rhs`; returns `self`.
    pub fn add_<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        binary_inplace("add_", OpKind::Add, self, rhs.into())
    }
    /// In-place `self -= rhs`; returns `self`.
    pub fn sub_<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        binary_inplace("sub_", OpKind::Sub, self, rhs.into())
    }
    /// In-place `self *= rhs`; returns `self`.
    pub fn mul_<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        binary_inplace("mul_", OpKind::Mul, self, rhs.into())
    }
    /// In-place `self /= rhs`; returns `self`.
    pub fn div_<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        binary_inplace("div_", OpKind::Div, self, rhs.into())
    }

    /// Copies `src` (broadcast, cast) into `self`; returns `self`.
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        check_overlap("copy_", self, &[src])?;
        self.copy_history_(src)
    }

    /// `copy_` without the memory-overlap checks, for a compiled call's
    /// epilogue: it gives a written argument its history by copying in the
    /// value its storage already holds, which an argument whose elements
    /// overlap (an expanded tensor that `fill_` wrote) holds consistently.
    pub(crate) fn copy_history_(&self, src: &Tensor) -> Result<Tensor> {
        let op = "copy_";
        super::check_same_device(op, self, src)?;
        let shape = self.shape();
        let dtype = self.dtype();
        inplace_unchecked_overlap(op, self, &[src], |cur| {
            let e = with_grad_mode(false, || src.expand(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())).map_err(|_| {
                AotError::shape(
                    op,
                    format!("the source of shape {:?} cannot be broadcast to the destination of shape {shape:?}", src.shape()),
                )
            })?;
            // only written into `self`: its layout does not matter
            let out = e.copy_as(op, dtype, Layout::contiguous(&shape))?;
            record(&out, &[Some(cur), Some(src)], || Ok(BackwardOp::CopyFrom { src_shape: src.shape(), src_dtype: src.dtype() }))?;
            Ok(out)
        })
    }

    /// Fills `self` with `value`; returns `self`.
    pub fn fill_(&self, value: f64) -> Result<Tensor> {
        let shape = self.shape();
        let dtype = self.dtype();
        inplace("fill_", self, &[], |cur| {
            let out = Tensor::full(&shape, value, dtype, &cur.device())?;
            record(&out, &[Some(cur)], || Ok(BackwardOp::Fill))?;
            Ok(out)
        })
    }
    /// Fills `self` with zeros; returns `self`.
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(0.0)
    }
    /// Clamps `self` to `[min, max]` in place (float dtypes); returns `self`.
    pub fn clamp_(&self, min: f64, max: f64) -> Result<Tensor> {
        self.float_only("clamp_")?;
        inplace("clamp_", self, &[], |cur| cur.clamp(min, max))
    }
    /// In-place `relu`; returns `self`.
    pub fn relu_(&self) -> Result<Tensor> {
        inplace("relu_", self, &[], |cur| cur.relu())
    }
    /// In-place `sigmoid` (float dtypes); returns `self`.
    pub fn sigmoid_(&self) -> Result<Tensor> {
        self.float_only("sigmoid_")?;
        inplace("sigmoid_", self, &[], |cur| cur.sigmoid())
    }
    /// In-place `exp` (float dtypes); returns `self`.
    pub fn exp_(&self) -> Result<Tensor> {
        self.float_only("exp_")?;
        inplace("exp_", self, &[], |cur| cur.exp())
    }
    /// In-place negation; returns `self`.
    pub fn neg_(&self) -> Result<Tensor> {
        inplace("neg_", self, &[], |cur| cur.neg())
    }

    fn float_only(&self, op: &'static str) -> Result<()> {
        if self.dtype().is_float() {
            Ok(())
        } else {
            Err(AotError::dtype(op, format!("result type Float can't be cast to the desired output type {}", self.dtype())))
        }
    }
}
