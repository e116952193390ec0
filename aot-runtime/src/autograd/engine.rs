//! The backward pass: one topological walk over the recorded nodes.
//! Leaf gradients are applied only after every node succeeded, so a failed
//! backward leaves every `.grad` as it was, and each leaf's read-add-write
//! of `.grad` runs under that leaf's lock, so concurrent backward passes
//! into a shared leaf lose no update. A gradient that nothing else can
//! reach becomes the `.grad` itself (PyTorch's AccumulateGrad steals it);
//! any other is copied into the leaf's layout.

use super::backprop::second_backward;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::tensor::{Edge, NoGradGuard, Node};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// Nodes reachable from `root`, in an order where each node comes before
/// every node it feeds gradient into.
fn topo_order(root: &Arc<Node>) -> Vec<Arc<Node>> {
    let mut post = vec![];
    let mut seen = HashSet::new();
    // iterative DFS: (node, next child index)
    let mut stack: Vec<(Arc<Node>, usize)> = vec![(root.clone(), 0)];
    seen.insert(root.id);
    while let Some((node, i)) = stack.pop() {
        if i < node.edges.len() {
            stack.push((node.clone(), i + 1));
            if let Some(Edge::Node(child, _)) = &node.edges[i] {
                if seen.insert(child.id) {
                    stack.push((child.clone(), 0));
                }
            }
        } else {
            post.push(node);
        }
    }
    post.reverse();
    post
}

fn accumulate(map: &mut HashMap<usize, Tensor>, key: usize, g: Tensor) -> Result<()> {
    match map.remove(&key) {
        Some(prev) => {
            map.insert(key, prev.add(&g)?);
        }
        None => {
            map.insert(key, g);
        }
    }
    Ok(())
}

fn accumulate_output(map: &mut HashMap<usize, Vec<Option<Tensor>>>, node: &Arc<Node>, nr: usize, g: Tensor) -> Result<()> {
    let slots = map.entry(node.id).or_insert_with(|| vec![None; node.num_outputs.max(1)]);
    let slot = slots.get_mut(nr).ok_or_else(|| AotError::internal("backward", format!("{} has no output {nr}", node.name)))?;
    *slot = Some(match slot.take() {
        Some(prev) => prev.add(&g)?,
        None => g,
    });
    Ok(())
}

/// PyTorch's layout contract for a leaf's `.grad`: the leaf's strides if
/// it is non-overlapping and dense, else row-major.
fn grad_layout(leaf: &Tensor) -> Layout {
    let l = leaf.layout();
    if l.is_non_overlapping_and_dense() {
        Layout::new(l.shape().to_vec(), l.stride().to_vec(), 0)
    } else {
        Layout::contiguous(l.shape())
    }
}

/// `g` as the `.grad` of `leaf`: `g` itself when nothing else can reach
/// it (PyTorch's AccumulateGrad steals such a gradient), else a copy.
///
/// Stealing is a copy saved, not a change of meaning: the handle and its
/// storage are referenced only here (no clone of the handle, no view or
/// other tensor on the storage, no weak reference), the storage holds
/// exactly the tensor's elements, the layout is the one the copy would
/// have, and no history is attached. So no one can observe that `.grad` is
/// this tensor rather than a copy of it.
fn into_grad(op: &'static str, mut g: Tensor, leaf: &Tensor) -> Result<Tensor> {
    let layout = grad_layout(leaf);
    let sole = Arc::get_mut(&mut g.0).is_some_and(|imp| Arc::get_mut(&mut imp.storage).is_some());
    if sole && g.dtype() == leaf.dtype() && !g.requires_grad() && g.storage_len() == g.numel() && g.layout() == layout {
        return Ok(g);
    }
    g.copy_as(op, leaf.dtype(), layout)
}

/// Adds each gradient to its leaf's `.grad`, all or nothing.
///
/// Every leaf's accumulation lock is held from the read of `.grad` to the
/// write of the sum, so a concurrent backward into the same leaf waits
/// instead of adding to a stale value. The locks are taken in one global
/// order (their addresses), so two passes that share leaves cannot deadlock
/// however their graphs order them. All sums are computed before any is
/// stored: a failure leaves every `.grad` as it was.
fn apply_leaf_grads(op: &'static str, leaves: &HashMap<usize, Tensor>, leaf_grads: HashMap<usize, Tensor>) -> Result<()> {
    let mut pending = Vec::with_capacity(leaf_grads.len());
    for (id, g) in leaf_grads {
        let Some(t) = leaves.get(&id) else { continue };
        let g = g.to_dtype(t.dtype())?;
        if g.shape() != t.shape() {
            return Err(AotError::internal(op, format!("gradient of shape {:?} for a leaf of shape {:?}", g.shape(), t.shape())));
        }
        pending.push((t, g));
    }
    let mut locks: Vec<Arc<Mutex<()>>> =
        pending.iter().map(|(t, _)| t.state().ag.grad_lock.get_or_init(Default::default).clone()).collect();
    locks.sort_by_key(|l| Arc::as_ptr(l) as usize);
    locks.dedup_by(|a, b| Arc::ptr_eq(a, b));
    // A poisoned lock guards no data of its own: `.grad` is still valid.
    let _held: Vec<MutexGuard<'_, ()>> = locks.iter().map(|l| l.lock().unwrap_or_else(|e| e.into_inner())).collect();
    let mut updates = Vec::with_capacity(pending.len());
    for (t, g) in pending {
        let new = match t.grad() {
            Some(prev) => prev.add(&g)?,
            None => g,
        };
        updates.push((t, into_grad(op, new, t)?));
    }
    for (t, g) in updates {
        t.set_grad(Some(g));
    }
    Ok(())
}

pub(crate) fn backward(root: &Tensor, grad: Option<&Tensor>) -> Result<()> {
    let _no_grad = NoGradGuard::new();
    let op = "backward";
    let g0 = match grad {
        Some(g) => {
            if g.shape() != root.shape() {
                return Err(AotError::shape(op, format!("gradient has shape {:?} but the output has shape {:?}", g.shape(), root.shape())));
            }
            g.clone()
        }
        None => {
            if root.numel() != 1 {
                return Err(AotError::autograd(
                    op,
                    format!("grad can be implicitly created only for scalar outputs (output has shape {:?})", root.shape()),
                ));
            }
            root.ones_like()?
        }
    };
    let Some(edge) = root.grad_edge() else {
        return Err(AotError::autograd(op, "element 0 of tensors does not require grad and does not have a grad_fn"));
    };
    let mut leaf_grads: HashMap<usize, Tensor> = HashMap::new();
    let mut leaves: HashMap<usize, Tensor> = HashMap::new();
    let mut order = vec![];
    match edge {
        Edge::Leaf(t) => {
            leaves.insert(t.id(), t.clone());
            accumulate(&mut leaf_grads, t.id(), g0)?;
        }
        Edge::Node(root_node, root_nr) => {
            order = topo_order(&root_node);
            // Per node, the gradient of each of its outputs.
            let mut grads: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
            accumulate_output(&mut grads, &root_node, root_nr, g0)?;
            for node in &order {
                let Some(g) = grads.remove(&node.id) else { continue };
                let needs: Vec<bool> = node.edges.iter().map(|e| e.is_some()).collect();
                let outs = {
                    let guard = node.op.lock().unwrap_or_else(|e| e.into_inner());
                    let bop = guard.as_ref().ok_or_else(|| second_backward(node.name))?;
                    bop.backward_outputs(&g, &needs)?
                };
                for (edge, out) in node.edges.iter().zip(outs) {
                    match (edge, out) {
                        (Some(Edge::Node(n, nr)), Some(o)) => accumulate_output(&mut grads, n, *nr, o)?,
                        (Some(Edge::Leaf(t)), Some(o)) => {
                            leaves.entry(t.id()).or_insert_with(|| t.clone());
                            accumulate(&mut leaf_grads, t.id(), o)?;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    // Every node succeeded: apply the leaf gradients, then free saved tensors.
    apply_leaf_grads(op, &leaves, leaf_grads)?;
    for node in &order {
        let mut guard = node.op.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_some_and(|o| o.has_saved()) {
            *guard = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Device, Tensor};
    use std::thread;

    const THREADS: usize = 8;
    const PASSES: usize = 2_500;

    fn leaf(values: Vec<f64>) -> Tensor {
        let n = values.len();
        Tensor::from_vec(values, &[n], &Device::Cpu).unwrap().requires_grad_(true).unwrap()
    }

    #[test]
    fn concurrent_backward_into_one_leaf_loses_no_update() {
        let w = leaf(vec![0.5, -1.0, 2.0]);
        thread::scope(|s| {
            for k in 0..THREADS {
                let w = &w;
                s.spawn(move || {
                    // d/dw sum(w * x) = x: small integers, so every partial
                    // sum is exact in f64 and the order of additions is moot.
                    let x = Tensor::from_vec(vec![1.0 + k as f64, 2.0, -3.0 * k as f64], &[3], &Device::Cpu).unwrap();
                    for _ in 0..PASSES {
                        w.mul(&x).unwrap().sum().unwrap().backward().unwrap();
                    }
                });
            }
        });
        let sum_k: f64 = (0..THREADS).map(|k| k as f64).sum();
        let n = (THREADS * PASSES) as f64;
        let expect = vec![n + PASSES as f64 * sum_k, 2.0 * n, -3.0 * PASSES as f64 * sum_k];
        assert_eq!(w.grad().unwrap().to_vec::<f64>().unwrap(), expect);
    }

    #[test]
    fn passes_that_reach_two_leaves_in_opposite_orders_neither_deadlock_nor_lose_updates() {
        let a = leaf(vec![1.0, 2.0]);
        let b = leaf(vec![3.0, 4.0]);
        thread::scope(|s| {
            for k in 0..THREADS {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    for _ in 0..PASSES / 5 {
                        // Half the threads record `a` first, half `b` first.
                        let loss = if k % 2 == 0 { a.mul(2.0).unwrap().add(b).unwrap() } else { b.add(&a.mul(2.0).unwrap()).unwrap() };
                        loss.sum().unwrap().backward().unwrap();
                    }
                });
            }
        });
        let n = (THREADS * (PASSES / 5)) as f64;
        assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0 * n; 2]);
        assert_eq!(b.grad().unwrap().to_vec::<f64>().unwrap(), vec![n; 2]);
    }

    #[test]
    fn a_gradient_is_stolen_only_when_nothing_else_reaches_it() {
        use super::into_grad;
        use std::sync::Arc;
        let leaf2 = Tensor::zeros(&[2, 3], crate::DType::F32, &Device::Cpu).unwrap();
        let fresh = || Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::Cpu).unwrap();
        let ptr = |t: &Tensor| Arc::as_ptr(t.storage()) as usize;
        // the sole handle on a storage of its own: the very buffer
        let g = fresh();
        let p = ptr(&g);
        assert_eq!(ptr(&into_grad("t", g, &leaf2).unwrap()), p);
        // another handle, a view, or a bigger storage: a copy, same values
        let g = fresh();
        let kept = g.clone();
        let out = into_grad("t", g, &leaf2).unwrap();
        assert!(!out.shares_storage_with(&kept));
        let g = fresh();
        let view = g.reshape(&[6]).unwrap();
        assert!(!into_grad("t", g, &leaf2).unwrap().shares_storage_with(&view));
        let row = Tensor::from_vec(vec![0.0f32; 12], &[4, 3], &Device::Cpu).unwrap().narrow(0, 0, 2).unwrap();
        assert_eq!(into_grad("t", row, &leaf2).unwrap().storage_len(), 6);
        // another layout than the leaf's: copied into the leaf's layout
        let t = fresh().t().unwrap().contiguous().unwrap().t().unwrap();
        let out = into_grad("t", t, &leaf2).unwrap();
        assert_eq!((out.stride(), out.to_vec::<f32>().unwrap()), (vec![3, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    }

    #[test]
    fn leaves_given_one_gradient_tensor_get_distinct_grads() {
        // `add`'s backward hands the same gradient to both operands, and
        // `backward_with` the caller's own tensor: none may be shared.
        let a = leaf(vec![1.0, 2.0]);
        let b = leaf(vec![3.0, 4.0]);
        let g = Tensor::from_vec(vec![0.5f64, -1.0], &[2], &Device::Cpu).unwrap();
        a.add(&b).unwrap().backward_with(&g).unwrap();
        let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
        assert!(!ga.shares_storage_with(&gb) && !ga.shares_storage_with(&g) && !gb.shares_storage_with(&g));
        ga.add_(1.0).unwrap();
        assert_eq!(gb.to_vec::<f64>().unwrap(), vec![0.5, -1.0]);
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.5, -1.0]);
    }

    #[test]
    fn a_failed_backward_still_leaves_every_grad_as_it_was() {
        let a = leaf(vec![1.0, 2.0]);
        let b = leaf(vec![3.0, 4.0]);
        a.mul(&b).unwrap().sum().unwrap().backward().unwrap();
        // `a * b` saved `b`; writing it makes the second backward fail
        // after `a`'s gradient was already computed.
        let loss = a.add(&a.mul(&b).unwrap()).unwrap().sum().unwrap();
        crate::no_grad(|| b.add_(1.0)).unwrap();
        assert!(loss.backward().is_err());
        assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![3.0, 4.0]);
        assert_eq!(b.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
    }
}
