//! The gradients eager backward computes without the shared table of
//! `aot_ir::transform::grad_rules`, because the table has no rule for the
//! recorded op or the record is not an op of the DSL:
//!
//! - `scalar / x` and `scalar ** x` (`rdiv`, `rpow`: no DSL op);
//! - `clamp` with one bound (the DSL's `clamp_` has both; a missing bound
//!   keeps the gradient at an infinite input, which `±inf` bounds would not);
//! - `as_strided`: eager sends the gradient to the input's own elements
//!   through a mirror of its storage, where the table's `view_grad` gives
//!   each storage element's gradient to the first element over it (the two
//!   differ on inputs whose elements overlap);
//! - `CopySlices`, the record of an in-place op on a view as seen from the
//!   view's base, which runs the op's own record on the view's region;
//! - `Custom`: a compiled function's node, whose backward is its compiled
//!   backward graph (built from the same table).
//!
//! Every other recorded op goes through [`super::grad_eval`].

use super::backprop::second_backward;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::tensor::BackwardOp;
use crate::tensor::Tensor;
use crate::tensor::ViewOp;

impl BackwardOp {
    /// Input gradients for output gradient `g` of an op the shared table
    /// does not cover; `needs[i]` says whether input `i` wants one.
    pub(super) fn eager_backward(&self, g: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let name = self.name();
        let need = |i: usize| needs.get(i).copied().unwrap_or(false);
        let one = |t: Result<Tensor>| -> Result<Vec<Option<Tensor>>> { Ok(vec![if need(0) { Some(t?) } else { None }]) };
        match self {
            BackwardOp::Custom(c) => c.backward(&[Some(g.clone())], needs),
            BackwardOp::RDivScalar { s, a } => {
                let a = a.get(name)?;
                one(g.mul(-*s).and_then(|t| t.div(&a.square()?)))
            }
            BackwardOp::RPowScalar { base, out } => {
                let out = out.get(name)?;
                one(g.mul(&out).and_then(|t| t.mul(base.ln())))
            }
            BackwardOp::Clamp { a, min, max } => {
                let a = a.get(name)?;
                let mut keep = a.ge(f64::NEG_INFINITY)?;
                // torch 2.15: no gradient at the bounds themselves
                if let Some(lo) = min {
                    keep = keep.logical_and(&a.gt(*lo)?)?;
                }
                if let Some(hi) = max {
                    keep = keep.logical_and(&a.lt(*hi)?)?;
                }
                one(g.mul(&keep.to_dtype(g.dtype())?))
            }
            BackwardOp::View { op, in_layout, storage_len, dtype } => one(view_backward(op, in_layout, *storage_len, *dtype, g)),
            BackwardOp::CopySlices { base_layout, view_layout, storage_len, dtype, fn_node } => {
                let mirror = Tensor::zeros(&[*storage_len], *dtype, &g.device())?;
                let base_view = mirror.alias_with_layout(base_layout.clone());
                crate::ops::write_into_raw("CopySlices", &base_view, g)?;
                let slice = mirror.alias_with_layout(view_layout.clone());
                let gs = slice.copy()?;
                let guard = fn_node.op.lock().unwrap_or_else(|e| e.into_inner());
                let inner = guard.as_ref().ok_or_else(|| second_backward(fn_node.name))?;
                let mut fn_needs = vec![true];
                fn_needs.extend(fn_node.edges.iter().skip(1).map(|e| e.is_some()));
                let mut res = inner.backward(&gs, &fn_needs)?;
                let g_self = if res.is_empty() { None } else { res.remove(0) };
                match g_self {
                    Some(t) => crate::ops::write_into_raw("CopySlices", &slice, &t)?,
                    None => crate::ops::write_into_raw("CopySlices", &slice, &gs.zeros_like()?)?,
                }
                let mut out = vec![Some(base_view.contiguous()?)];
                out.extend(res);
                Ok(out)
            }
            _ => Err(AotError::internal(name, "the shared gradient table has this op's rule")),
        }
    }
}

/// Gradient of a view: scatter-add `g` into zeros laid out like the input.
fn view_backward(op: &ViewOp, in_layout: &Layout, storage_len: usize, dtype: DType, g: &Tensor) -> Result<Tensor> {
    // as_strided addresses the storage itself, so its input is mirrored with
    // its real geometry; every other view works on a contiguous input.
    let (buf_len, l0) = match op {
        ViewOp::AsStrided { .. } => (storage_len, in_layout.clone()),
        _ => (in_layout.numel(), Layout::contiguous(&in_layout.shape)),
    };
    let out_l = op.apply(&l0, buf_len)?;
    const OP: &str = "view_backward";
    let buf = Storage::full(OP, &g.device(), dtype, buf_len, 0.0)?;
    let gc = g.to_dtype(dtype)?;
    gc.storage().scatter_add_into(OP, &gc.layout(), &buf, &out_l)?;
    let mirror = Tensor::from_storage(buf, Layout::contiguous(&[buf_len]));
    // `copy` (not `contiguous`): the result must start at offset 0.
    mirror.alias_with_layout(l0).copy()
}
