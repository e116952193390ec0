//! A tensor's autograd metadata (its `requires_grad` flag, `grad_fn`,
//! `.grad` and view link) and the history graph's nodes and edges, with
//! the `Tensor` accessors that read and regenerate them. Running the graph
//! backward is the `autograd` module's.

use super::backward_op::BackwardOp;
use super::view_op::ViewOp;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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
                    op: ViewOp::AsStrided { size: vl.shape.into_vec(), stride: vl.stride.into_vec(), offset: vl.offset },
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
}
