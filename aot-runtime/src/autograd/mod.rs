//! Eager reverse-mode autograd, candle-style: each recorded op is a `Node`
//! holding a `BackwardOp` (the data of the gradient rule) and the edges to
//! its inputs' histories; `engine.rs` does one topological walk.
//!
//! The derivatives themselves are not written here: `backprop.rs` maps each
//! record to its rule in `aot_ir::transform::grad_rules` (the table the
//! joint graph is built from), `grad_eval.rs` evaluates that rule on
//! tensors, and `prims.rs` and `view_prims.rs` hold the rules' backward-only
//! primitives, shared with the compiled executor. `eager_rules.rs` lists and differentiates the few
//! records the table does not cover.
//!
//! In-place ops rewrite history the way PyTorch does: the mutated tensor
//! gets a new `grad_fn` whose first edge is its old history; an in-place op
//! on a view gives the view's base a `CopySlices` node, and the view's own
//! `grad_fn` is regenerated from the base when its version is stale.

pub(crate) mod backprop;
mod eager_rules;
mod engine;
pub(crate) mod grad_eval;
pub(crate) mod prims;
pub(crate) mod view_prims;

pub(crate) use backprop::{BackwardOp, CustomBackward, Kept};

use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True unless inside `no_grad`.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Disables gradient recording until dropped (PyTorch's `torch.no_grad()`).
pub struct NoGradGuard {
    prev: bool,
}

impl NoGradGuard {
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoGradGuard {
        let prev = GRAD_ENABLED.with(|g| g.replace(false));
        NoGradGuard { prev }
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev));
    }
}

/// Runs `f` with gradient recording off.
///
/// ```
/// use aot_runtime::prelude::*;
/// let w = Tensor::ones(&[2], DType::F32, &Device::Cpu)?.requires_grad_(true)?;
/// aot_runtime::no_grad(|| w.sub_(0.5))?;   // an optimizer step on a leaf
/// assert!(w.is_leaf());
/// # Ok::<(), AotError>(())
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoGradGuard::new();
    f()
}

/// Runs `f` with gradient recording set to `enabled`.
pub(crate) fn with_grad_mode<R>(enabled: bool, f: impl FnOnce() -> R) -> R {
    let prev = GRAD_ENABLED.with(|g| g.replace(enabled));
    let r = f();
    GRAD_ENABLED.with(|g| g.set(prev));
    r
}

/// A differentiable view's link to its root base.
#[derive(Clone)]
pub(crate) struct ViewInfo {
    pub(crate) base: Tensor,
    /// Made under no_grad: in-place on it in grad mode is refused when the
    /// base requires grad (PyTorch's CreationMeta::NO_GRAD_MODE).
    pub(crate) created_in_no_grad: bool,
}

#[derive(Clone, Default)]
pub(crate) struct AutogradMeta {
    /// The user flag; only meaningful for leaves.
    pub(crate) requires_grad: bool,
    pub(crate) grad_fn: Option<Arc<Node>>,
    /// Which output of `grad_fn` this tensor is (nodes of compiled
    /// functions have several).
    pub(crate) output_nr: usize,
    pub(crate) grad: Option<Tensor>,
    pub(crate) view: Option<ViewInfo>,
    /// Storage version for which `grad_fn` of a view is current.
    pub(crate) grad_fn_version: u64,
    /// Held by `backward` for the whole read-add-write of `grad`, so that
    /// concurrent backward passes into this leaf lose no update. Made on
    /// the first accumulation: most tensors never get a gradient.
    pub(crate) grad_lock: OnceLock<Arc<Mutex<()>>>,
}

/// Where a gradient goes: an output of another node, or a leaf's `.grad`.
#[derive(Clone)]
pub(crate) enum Edge {
    Node(Arc<Node>, usize),
    Leaf(Tensor),
}

static NEXT_NODE_ID: AtomicUsize = AtomicUsize::new(1);

/// One recorded op. `op` is taken out (None) once the graph was freed by a
/// backward pass, if it held saved tensors.
pub(crate) struct Node {
    pub(crate) id: usize,
    pub(crate) name: &'static str,
    pub(crate) op: Mutex<Option<BackwardOp>>,
    pub(crate) edges: Vec<Option<Edge>>,
    /// How many outputs the op had; eager ops have one.
    pub(crate) num_outputs: usize,
}

impl Node {
    pub(crate) fn new(op: BackwardOp, edges: Vec<Option<Edge>>) -> Arc<Node> {
        Node::with_outputs(op, edges, 1)
    }

    pub(crate) fn with_outputs(op: BackwardOp, edges: Vec<Option<Edge>>, num_outputs: usize) -> Arc<Node> {
        Arc::new(Node { id: NEXT_NODE_ID.fetch_add(1, Ordering::Relaxed), name: op.name(), op: Mutex::new(Some(op)), edges, num_outputs })
    }
}

/// A tensor saved for backward, with the version it had when saved.
#[derive(Clone)]
pub(crate) struct SavedTensor {
    pub(crate) t: Tensor,
    pub(crate) version: u64,
}

thread_local! {
    /// While [`saved_storage_bytes`] runs: every tensor saved for backward.
    static SAVE_LOG: std::cell::RefCell<Option<Vec<Tensor>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` and measures what autograd saved for backward meanwhile: the
/// bytes of the distinct storages the saved tensors keep alive. Eager ops
/// and compiled calls save through the same type, so the two can be
/// compared (the partitioner's saved bytes against eager autograd's).
#[doc(hidden)]
pub fn saved_storage_bytes<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let outer = SAVE_LOG.with(|l| l.replace(Some(Vec::new())));
    let r = f();
    let saved = SAVE_LOG.with(|l| l.replace(outer)).unwrap_or_default();
    let mut distinct: Vec<&Tensor> = Vec::new();
    for t in &saved {
        if !distinct.iter().any(|d| d.shares_storage_with(t)) {
            distinct.push(t);
        }
    }
    (r, distinct.iter().map(|t| t.storage_len() * t.dtype().size_in_bytes()).sum())
}

impl SavedTensor {
    /// Saves `t`'s current value (an alias: no copy) without its history.
    pub(crate) fn save(t: &Tensor) -> SavedTensor {
        SAVE_LOG.with(|l| {
            if let Some(log) = l.borrow_mut().as_mut() {
                log.push(t.clone());
            }
        });
        SavedTensor { t: t.alias_with_layout(t.layout()), version: t.version() }
    }
    pub(crate) fn get(&self, node: &str) -> Result<Tensor> {
        // A saved new value of an in-place op stands for the tensor it was
        // written into: that tensor's version is the one checked.
        let (now, expected) = match self.t.storage().written_into() {
            Some((target, at)) => (target.version(), at),
            None => (self.t.version(), self.version),
        };
        if now != expected {
            return Err(AotError::autograd(
                node,
                format!(
                    "one of the variables needed for gradient computation has been modified by an inplace operation: [{} {:?}], which is saved by {node}, is at version {now}; expected version {} instead",
                    self.t.dtype(),
                    self.t.shape(),
                    expected
                ),
            ));
        }
        Ok(self.t.clone())
    }
}

impl Tensor {
    /// Sets the `requires_grad` flag of this tensor (a leaf) and returns it.
    pub fn requires_grad_(&self, requires_grad: bool) -> Result<Tensor> {
        if !self.is_leaf() {
            if requires_grad {
                return Ok(self.clone());
            }
            return Err(AotError::autograd(
                "requires_grad_",
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().",
            ));
        }
        if requires_grad && !self.dtype().is_float() {
            return Err(AotError::autograd(
                "requires_grad_",
                format!("only Tensors of floating point dtype can require gradients, got {}", self.dtype()),
            ));
        }
        self.state_mut().ag.requires_grad = requires_grad;
        Ok(self.clone())
    }

    /// True if gradients flow to or through this tensor.
    pub fn requires_grad(&self) -> bool {
        let s = self.state();
        s.ag.requires_grad || s.ag.grad_fn.is_some() || self.view_needs_refresh(&s.ag)
    }

    /// True if this tensor has no autograd history (PyTorch's `is_leaf`).
    pub fn is_leaf(&self) -> bool {
        self.grad_fn().is_none()
    }

    /// The accumulated gradient of a leaf.
    pub fn grad(&self) -> Option<Tensor> {
        self.state().ag.grad.clone()
    }

    /// Sets or clears the gradient (e.g. `zero_grad`).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        self.state_mut().ag.grad = grad;
    }

    /// The name of the node that produced this tensor (e.g. `MulBackward0`).
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.grad_fn().map(|n| n.name)
    }

    /// True if this is a view whose base is in-place modified since its
    /// `grad_fn` was computed and the base carries history.
    fn view_needs_refresh(&self, ag: &AutogradMeta) -> bool {
        match &ag.view {
            Some(v) => !v.created_in_no_grad && self.version() != ag.grad_fn_version && !v.base.same_tensor(self) && v.base.requires_grad(),
            None => false,
        }
    }

    /// The current `grad_fn`, regenerating a stale view's from its base.
    pub(crate) fn grad_fn(&self) -> Option<Arc<Node>> {
        let (view, version_ok, grad_fn) = {
            let s = self.state();
            (s.ag.view.clone(), s.ag.grad_fn_version == self.version(), s.ag.grad_fn.clone())
        };
        let Some(view) = view else { return grad_fn };
        // Views made under no_grad keep their own (leaf) history.
        if version_ok || view.created_in_no_grad {
            return grad_fn;
        }
        let now = self.version();
        let new_fn = match view.base.grad_edge() {
            Some(edge) => {
                let base_layout = view.base.layout();
                let vl = self.layout();
                let op = BackwardOp::View {
                    op: crate::ops::ViewOp::AsStrided { size: vl.shape.into_vec(), stride: vl.stride.into_vec(), offset: vl.offset },
                    in_layout: base_layout,
                    storage_len: self.storage_len(),
                    dtype: self.dtype(),
                };
                Some(Node::new(op, vec![Some(edge)]))
            }
            None => grad_fn,
        };
        let mut s = self.state_mut();
        s.ag.grad_fn = new_fn.clone();
        s.ag.output_nr = 0;
        s.ag.grad_fn_version = now;
        new_fn
    }

    /// True if this tensor is not a view and neither requires grad nor has
    /// a `grad_fn`: then it has no [`grad_edge`](Self::grad_edge), and
    /// asking for one would change nothing. One read of the state, so that
    /// an op on tensors without history pays little for autograd.
    pub(crate) fn has_no_history(&self) -> bool {
        let s = self.state();
        s.ag.view.is_none() && !s.ag.requires_grad && s.ag.grad_fn.is_none()
    }

    /// Where this tensor's gradient goes, if anywhere.
    pub(crate) fn grad_edge(&self) -> Option<Edge> {
        if let Some(n) = self.grad_fn() {
            return Some(Edge::Node(n, self.state().ag.output_nr));
        }
        if self.state().ag.requires_grad {
            return Some(Edge::Leaf(self.clone()));
        }
        None
    }

    /// A new tensor sharing storage, without history (PyTorch's `detach`).
    pub fn detach(&self) -> Result<Tensor> {
        Ok(self.alias_with_layout(self.layout()))
    }

    /// Computes gradients of this one-element tensor with respect to the
    /// leaves that require grad, accumulating into their `.grad`.
    pub fn backward(&self) -> Result<()> {
        engine::backward(self, None)
    }

    /// Backward with an explicit output gradient (same shape as `self`).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        engine::backward(self, Some(grad))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device};

    /// `(2x, x*x)` as one node.
    struct TwoOut {
        x: SavedTensor,
    }

    impl CustomBackward for TwoOut {
        fn name(&self) -> &'static str {
            "TwoOutBackward"
        }
        fn backward(&self, grads: &[Option<Tensor>], _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
            let x = self.x.get(self.name())?;
            let mut g = x.zeros_like()?;
            if let Some(g0) = &grads[0] {
                g = g.add(&g0.mul(2.0)?)?;
            }
            if let Some(g1) = &grads[1] {
                g = g.add(&g1.mul(&x)?.mul(2.0)?)?;
            }
            Ok(vec![Some(g)])
        }
    }

    #[test]
    fn a_node_with_two_outputs_gets_both_gradients() {
        let x = Tensor::full(&[3], 1.5, DType::F64, &Device::Cpu).unwrap().requires_grad_(true).unwrap();
        let outs = no_grad(|| -> Result<Vec<Tensor>> { Ok(vec![x.mul(2.0)?, x.mul(&x)?]) }).unwrap();
        assert!(record_multi(&outs, &[true, true], &[Some(&x)], Box::new(TwoOut { x: SavedTensor::save(&x) })).unwrap());
        assert_eq!(outs[0].grad_fn_name(), Some("TwoOutBackward"));
        let loss = outs[0].add(&outs[1]).unwrap().sum().unwrap();
        loss.backward().unwrap();
        // d/dx (2x + x^2) = 2 + 2x = 5
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![5.0; 3]);
        // Only the second output reaches the loss.
        x.set_grad(None);
        let outs = no_grad(|| -> Result<Vec<Tensor>> { Ok(vec![x.mul(2.0)?, x.mul(&x)?]) }).unwrap();
        record_multi(&outs, &[true, true], &[Some(&x)], Box::new(TwoOut { x: SavedTensor::save(&x) })).unwrap();
        outs[1].sum().unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![3.0; 3]);
        let err = outs[1].sum().unwrap().backward().unwrap_err().to_string();
        assert!(err.contains("second time"), "{err}");
    }
}
