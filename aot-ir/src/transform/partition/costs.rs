//! What saving a value costs the min-cut: PyTorch's weights
//! (`min_cut_rematerialization_partition`'s node weight), over our size
//! estimates.
//!
//! - A value the forward would not store anyway costs twice its size: it is
//!   computed by a fusible node and read in the forward by exactly one
//!   fusible node, so the kernel stage keeps it inside a kernel
//!   (`kernel::schedule`'s tree rule). Saving it would add a store;
//!   saving a value that is stored anyway (a matmul's input, an output)
//!   adds nothing.
//! - A value costs `1.1^d` more, `d` its distance in nodes from the
//!   backward (between 1 and 100), so of two equal cuts the one nearer
//!   the backward is saved, and less is recomputed there.
//!
//! So in `relu(x @ w + b)` the relu's output, which the next matmul reads,
//! is saved rather than the sum before it, which the forward then fuses
//! into the relu.

use crate::graph::{kernel::fusible, Op};
use crate::transform::joint::JointGraph;

/// Per value, the weight of saving it, from `size` (the estimates).
pub(super) fn save_costs(jg: &JointGraph, size: &[f64]) -> Vec<f64> {
    let n = jg.num_values;
    let is_bw = |v| is_bw(jg, v);
    let def = super::definitions(jg);
    // Per value, its forward readers (one per argument read).
    let mut fw_readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, node) in jg.nodes.iter().enumerate() {
        if !is_bw(node.value().index()) {
            for u in node.tensor_args() {
                if let Some(r) = fw_readers.get_mut(u.index()) {
                    r.push(k);
                }
            }
        }
    }
    let mut is_output = vec![false; n];
    for o in &jg.fw_outputs {
        if let Some(x) = is_output.get_mut(o.value.index()) {
            *x = true;
        }
    }
    let dist = distances(jg);
    (0..n)
        .map(|v| {
            let fused_away = !is_output[v]
                && def[v].is_some_and(|k| !matches!(jg.nodes[k].op, Op::Primal(_)) && fusible(&jg.nodes[k]))
                && matches!(fw_readers[v].as_slice(), [r] if fusible(&jg.nodes[*r]));
            let near = 1.1f64.powi(dist[v].clamp(1, 100) as i32);
            size.get(v).copied().unwrap_or(1.0) * near * if fused_away { 2.0 } else { 1.0 }
        })
        .collect()
}

/// Per value, the fewest nodes from it to a backward node (0 for a
/// backward value; `usize::MAX` for a forward value nothing reads).
fn distances(jg: &JointGraph) -> Vec<usize> {
    let n = jg.num_values;
    let mut dist = vec![usize::MAX; n];
    // Nodes are in topological order: every reader comes after what it reads.
    for node in jg.nodes.iter().rev() {
        let v = node.value().index();
        if v >= n {
            continue;
        }
        if is_bw(jg, v) {
            dist[v] = 0;
        }
        let d = dist[v].saturating_add(1);
        for u in node.tensor_args() {
            if let Some(x) = dist.get_mut(u.index()) {
                *x = (*x).min(d);
            }
        }
    }
    dist
}

fn is_bw(jg: &JointGraph, v: usize) -> bool {
    jg.is_backward.get(v).copied().unwrap_or(false)
}
