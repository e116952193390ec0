//! The eager reference for calls the compiled paths do not cover, kept as
//! transactional as eager allows: the function first runs on *replicas* of
//! the arguments, and only if that succeeds on the arguments themselves.
//!
//! A replica has a copy of the argument's storage (arguments sharing a
//! storage share the copy, the same tensor passed twice is one replica)
//! and the autograd state eager's checks read: `requires_grad`, leaf or
//! not, and the chain of view bases with their `no_grad` creation flag. So
//! the dry run fails where the real run would (shape, index and dtype
//! errors, and autograd's refusals of in-place writes to leaves and views
//! of leaves), before anything was written. Its history is never
//! backpropagated: a non-leaf's `grad_fn` is a stand-in with no edges.
//!
//! Compiled calls also come here when an argument is in an autograd state
//! the compiled paths do not model ([`unusual_autograd_state`]) and the
//! function has an in-place op: eager's refusals of in-place writes then
//! depend on the order of the writes (a view taken before its base
//! required grad starts requiring grad once its storage is written), which
//! only running the function in order can tell.

use crate::arg::Arg;
use crate::error::Result;
use crate::executor::interp;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::tensor::{AutogradMeta, BackwardOp, NoGradGuard, Node, ViewInfo};
use aot_ir::{Graph, StaticMeta};
use std::sync::Arc;

/// Runs `g` eagerly on `args`, after a dry run on replicas when the
/// function may write its inputs.
pub(crate) fn run(g: &Graph, meta: &StaticMeta, args: &[Arg]) -> Result<Vec<Tensor>> {
    if may_write(g, meta) {
        // The dry run draws from a private copy of the generator, so the
        // real run draws the same numbers.
        crate::ops::with_private_rng(|| {
            let reps = replicas(args)?;
            let rep_args: Vec<Arg> = args.iter().zip(&reps).map(|(a, r)| r.as_ref().map_or(*a, Arg::Tensor)).collect();
            interp::run_source(g, &rep_args)
        })?;
    }
    interp::run_source(g, args)
}

/// Whether the function may write an argument. Whether an input is
/// written can depend on a `reshape`'s aliasing, which the static metadata
/// leaves undecided: any in-place op counts.
pub(crate) fn may_write(g: &Graph, meta: &StaticMeta) -> bool {
    meta.mutates_inputs
        || g.nodes.iter().any(|n| n.kind().is_some_and(aot_ir::OpKind::is_inplace) || n.class() == aot_ir::OpClass::MetadataMutation)
}

/// The first tensor argument whose autograd state the compiled paths do
/// not model, with why: a view made under `no_grad`, or a view of a tensor
/// that requires grad that
/// - does not carry its base's history (taken before the base required
///   grad), or carries a stale one (the storage was written since);
///
/// Views made with grad on that carry their base's current history, and
/// plain tensors, are modelled.
pub(crate) fn unusual_autograd_state(args: &[Arg]) -> Option<(usize, &'static str)> {
    args.iter().enumerate().find_map(|(p, a)| Some((p, unusual_state(a.tensor()?)?)))
}

/// Why `t` is in an autograd state the compiled paths do not model, if it
/// is (only views can be). Asks nothing that regenerates a view's history.
pub(crate) fn unusual_state(t: &Tensor) -> Option<&'static str> {
    let (view, has_fn, fn_version) = {
        let s = t.state();
        (s.ag.view.clone(), s.ag.grad_fn.is_some(), s.ag.grad_fn_version)
    };
    let v = view?;
    // Its base may gain history during the call (a write of a value
    // that requires grad), after which eager refuses to write it.
    if v.created_in_no_grad {
        return Some("a view made under no_grad");
    }
    if !v.base.requires_grad() {
        return None;
    }
    if !has_fn {
        Some("a view taken before its base required grad")
    } else if fn_version != t.version() {
        Some("a view whose base was written since it was taken")
    } else {
        None
    }
}

#[derive(Default)]
struct Replicas {
    /// (caller's storage, its copy)
    storages: Vec<(Arc<Storage>, Arc<Storage>)>,
    /// (caller's tensor, its replica)
    tensors: Vec<(Tensor, Tensor)>,
}

fn replicas(args: &[Arg]) -> Result<Vec<Option<Tensor>>> {
    let mut r = Replicas::default();
    args.iter().map(|a| a.tensor().map(|t| r.replica(t)).transpose()).collect()
}

impl Replicas {
    fn replica(&mut self, t: &Tensor) -> Result<Tensor> {
        if let Some((_, rep)) = self.tensors.iter().find(|(o, _)| o.same_tensor(t)) {
            return Ok(rep.clone());
        }
        // Keyed by the buffer: a dtype view's replica is the same view of
        // its root's replica.
        let root = t.storage().root_arc();
        let root_copy = match self.storages.iter().find(|(o, _)| Arc::ptr_eq(o, &root)) {
            Some((_, c)) => c.clone(),
            None => {
                let copy = {
                    let _no_grad = NoGradGuard::new();
                    t.root_as_1d().copy()?
                };
                let c = copy.storage().clone();
                self.storages.push((root, c.clone()));
                c
            }
        };
        let storage = root_copy.dtype_view("aot_fn reference", t.dtype())?;
        let (requires_grad, non_leaf, view, stale) = {
            let s = t.state();
            (s.ag.requires_grad, s.ag.grad_fn.is_some(), s.ag.view.clone(), s.ag.grad_fn_version != t.version())
        };
        let view = match view {
            Some(v) => Some(ViewInfo { base: self.replica(&v.base)?, created_in_no_grad: v.created_in_no_grad }),
            None => None,
        };
        let ag =
            AutogradMeta { requires_grad, grad_fn: non_leaf.then(|| Node::new(BackwardOp::Identity, vec![])), view, ..Default::default() };
        let rep = Tensor::from_parts(storage, t.layout(), ag);
        // A view whose history is stale stays stale: its `grad_fn` is
        // regenerated from its base on next use, as the original's is.
        let version = rep.version();
        rep.state_mut().ag.grad_fn_version = if stale { version.wrapping_sub(1) } else { version };
        self.tensors.push((t.clone(), rep.clone()));
        Ok(rep)
    }
}
