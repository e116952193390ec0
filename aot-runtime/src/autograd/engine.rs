//! The backward pass: one topological walk over the recorded nodes.
//! Leaf gradients are applied only after every node succeeded, so a failed
//! backward leaves every `.grad` as it was.

use super::backprop::second_backward;
use super::{Edge, NoGradGuard, Node};
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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
    let mut updates = vec![];
    for (id, g) in leaf_grads {
        let Some(t) = leaves.get(&id) else { continue };
        let g = g.to_dtype(t.dtype())?;
        if g.shape() != t.shape() {
            return Err(AotError::internal(op, format!("gradient of shape {:?} for a leaf of shape {:?}", g.shape(), t.shape())));
        }
        let new = match t.grad() {
            Some(prev) => prev.add(&g)?,
            None => g,
        };
        let new = new.copy_as(op, t.dtype(), grad_layout(t))?;
        updates.push((t.clone(), new));
    }
    for (t, g) in updates {
        t.set_grad(Some(g));
    }
    for node in &order {
        let mut guard = node.op.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_some_and(|o| o.has_saved()) {
            *guard = None;
        }
    }
    Ok(())
}
