//! Recording history: what an op calls to make its output's `grad_fn`.

use super::autograd_meta::{Edge, Node};
use super::backward_op::{BackwardOp, CustomBackward};
use super::grad_mode::is_grad_enabled;
use crate::error::Result;
use crate::tensor::Tensor;

/// Records `op` as the history of `out` if grad mode is on and any input
/// requires grad. `inputs` are the differentiable inputs, in the op's order.
/// An integer or bool `out` gets no history, as in PyTorch: its dtype is not
/// differentiable (a float requiring grad copied into an integer tensor
/// leaves that tensor without a gradient).
pub(crate) fn record(out: &Tensor, inputs: &[Option<&Tensor>], op: impl FnOnce() -> Result<BackwardOp>) -> Result<()> {
    if !is_grad_enabled() || !out.dtype().is_float() || inputs.iter().all(|t| t.is_none_or(Tensor::has_no_history)) {
        return Ok(());
    }
    let edges: Vec<Option<Edge>> = inputs.iter().map(|t| t.and_then(|t| t.grad_edge())).collect();
    if edges.iter().all(|e| e.is_none()) {
        return Ok(());
    }
    let node = Node::new(op()?, edges);
    let version = out.version();
    let mut s = out.state_mut();
    s.ag.grad_fn = Some(node);
    s.ag.output_nr = 0;
    s.ag.grad_fn_version = version;
    Ok(())
}

/// Records one node for an op with several outputs (a compiled function):
/// `outputs[k]` becomes output `k` of the node when `differentiable[k]`.
/// Does nothing if grad mode is off or no input requires grad. Returns
/// whether a node was recorded.
pub(crate) fn record_multi(
    outputs: &[Tensor],
    differentiable: &[bool],
    inputs: &[Option<&Tensor>],
    op: Box<dyn CustomBackward>,
) -> Result<bool> {
    if !is_grad_enabled() {
        return Ok(false);
    }
    let edges: Vec<Option<Edge>> = inputs.iter().map(|t| t.and_then(|t| t.grad_edge())).collect();
    if edges.iter().all(|e| e.is_none()) {
        return Ok(false);
    }
    let node = Node::with_outputs(BackwardOp::Custom(op), edges, outputs.len());
    for (k, out) in outputs.iter().enumerate() {
        if differentiable.get(k).copied().unwrap_or(false) {
            let version = out.version();
            let mut s = out.state_mut();
            s.ag.grad_fn = Some(node.clone());
            s.ag.output_nr = k;
            s.ag.grad_fn_version = version;
        }
    }
    Ok(true)
}
