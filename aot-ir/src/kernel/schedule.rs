//! The scheduler: turns the node list of a stage (the functional graph,
//! the forward or the backward partition) into the kernel stage, where
//! each group of fusible nodes is one [`Op::Kernel`] node.
//!
//! A group is a tree with one result: a node joins the group of an operand
//! it alone reads, when that operand is computed by a fusible node and no
//! later stage step (an output, a saved value, a copy-back) needs it. So
//! a fused intermediate is never stored, and no op is computed twice:
//! fusion never recomputes and never adds memory traffic. The kernel takes
//! the place of the group's last node; its other members move down to it,
//! which is sound because nothing else reads them. A write in place
//! (`Mutate`) closes every open group, so no read moves past a write that
//! may change what it reads. Groups of one node stay as they are (the
//! runtime's direct kernels take the commonest single ops). A graph of
//! whole-argument writes is fused apart from this scheduler, by
//! reinplacing ([`super::reinplace`]), into multi-output kernels that
//! store straight into the written arguments.
//!
//! Fusible nodes are elementwise ops and the reductions of
//! [`super::is_reduction`]; a group holds at most one reduction. A
//! reduction joins the group of its operand (its prologue, computed over
//! the input's rows as they are folded, never stored); an elementwise node
//! joins a group with a reduction (its epilogue, computed on each reduced
//! value or, for softmax and a reduction kept as size-1 dims, along each
//! row). Two groups that each hold a reduction never merge. The same
//! tree rule holds, so a reduction's input or result that anything else
//! reads (a softmax output saved for the backward, say) is stored and
//! ends its group. Whether a kernel's shapes fit a fused pass is known only
//! at run time; one that does not runs op by op, with eager's results.

use crate::graph::{kernel::fusible, Kernel, Node, Op};
use crate::op::is_reduction;
use crate::types::{Arg, ValueId};

/// A scheduled stage: its nodes, and per node the index of the node of the
/// input list it is (`None` for a kernel).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scheduled {
    /// The stage's nodes in execution order: the input's nodes and the kernels
    /// that replace some of them.
    pub nodes: Vec<Node>,
    /// Per node: the index of the input node it is; `None` for a kernel.
    pub origin: Vec<Option<usize>>,
    /// Per node: a `Cow` whose copy only the next write reads, or that
    /// write: an elementwise in-place op on the whole copy
    /// ([`fresh_writes`]). The runtime may compute the written version out
    /// of place, from the original, without the copy.
    pub fresh: Vec<bool>,
}

impl Scheduled {
    /// The kernels, in order.
    pub fn kernels(&self) -> impl Iterator<Item = &Kernel> {
        self.nodes.iter().filter_map(|n| match &n.op {
            Op::Kernel(k) => Some(&**k),
            _ => None,
        })
    }
}

fn reduces(n: &Node) -> bool {
    n.kind().is_some_and(is_reduction)
}

/// Schedules `nodes` (values below `num_values`); `live_out` are the
/// values read after the stage (outputs, saved values, copy-backs).
/// Kernel names are `fused_<ops>_<k>`, numbered from `first`.
pub fn schedule(nodes: &[Node], num_values: usize, live_out: &[ValueId], first: usize) -> Scheduled {
    // Per value: how many node arguments read it; live-out values count as
    // read elsewhere.
    let mut uses = vec![0usize; num_values];
    for v in nodes.iter().flat_map(Node::tensor_args).chain(live_out.iter().copied()) {
        if let Some(u) = uses.get_mut(v.index()) {
            *u += 1;
        }
    }
    let mut producer = vec![None; num_values];
    // Per node: the group it belongs to (the index of the group's root).
    let mut group: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut epoch_of = vec![0usize; nodes.len()];
    // Per group root: whether the group holds a reduction.
    let mut has_reduction = vec![false; nodes.len()];
    let mut epoch = 0;
    for (i, n) in nodes.iter().enumerate() {
        if let Some(out) = n.out.filter(|o| o.index() < num_values) {
            producer[out.index()] = Some(i);
        }
        if matches!(n.op, Op::Mutate { .. }) {
            epoch += 1;
            continue;
        }
        if !fusible(n) {
            continue;
        }
        let mut mine = vec![i];
        let mut reduction = reduces(n);
        for v in n.tensor_args() {
            let read_here = n.tensor_args().filter(|&w| w == v).count();
            let Some(p) = producer.get(v.index()).copied().flatten() else { continue };
            let Some(root) = group[p] else { continue };
            if root == i || epoch_of[root] != epoch || uses[v.index()] != read_here {
                continue;
            }
            if has_reduction[root] {
                if reduction {
                    continue; // one reduction per kernel
                }
                reduction = true;
            }
            for m in std::mem::take(&mut members[root]) {
                group[m] = Some(i);
                mine.push(m);
            }
        }
        group[i] = Some(i);
        epoch_of[i] = epoch;
        has_reduction[i] = reduction;
        mine.sort_unstable();
        members[i] = mine;
    }
    let mut s = emit(nodes, &group, &members, first);
    s.fresh = fresh_writes(&s.nodes, live_out);
    s
}

/// The `Cow`s (and their writes) of [`Scheduled::fresh`]: `c = cow(p)`
/// read by nothing but `scatter(c, [], op_(c, x))` with `op_` one of
/// `add_`, `sub_`, `mul_`, `div_`, and `c` not needed after the stage.
pub fn fresh_writes(nodes: &[Node], live_out: &[ValueId]) -> Vec<bool> {
    use crate::op::OpKind as K;
    let mut fresh = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let (Op::Cow, Some(c)) = (&n.op, n.out) else { continue };
        if live_out.contains(&c) {
            continue;
        }
        let mut readers = nodes.iter().enumerate().filter(|(_, m)| m.tensor_args().any(|v| v == c));
        let (Some((j, m)), None) = (readers.next(), readers.next()) else { continue };
        let whole =
            matches!(&m.op, Op::Mutate { op: K::AddInplace | K::SubInplace | K::MulInplace | K::DivInplace, chain } if chain.is_empty());
        let reads_once = m.args.first() == Some(&Arg::Tensor(c)) && m.args.get(1) == Some(&Arg::Tensor(c)) && m.args.len() == 3;
        if whole && reads_once && m.args[2].as_tensor() != Some(c) {
            fresh[i] = true;
            fresh[j] = true;
        }
    }
    fresh
}

/// The scheduled node list: each group of two or more at its root.
fn emit(nodes: &[Node], group: &[Option<usize>], members: &[Vec<usize>], first: usize) -> Scheduled {
    let mut out = Scheduled::default();
    let mut count = first;
    for (i, n) in nodes.iter().enumerate() {
        match group[i] {
            Some(root) if members[root].len() > 1 => {
                if root == i {
                    out.nodes.push(kernel_node(nodes, &members[root], count));
                    out.origin.push(None);
                    count += 1;
                }
            }
            _ => {
                out.nodes.push(n.clone());
                out.origin.push(Some(i));
            }
        }
    }
    out
}

/// The kernel node of the group `members` (node indices, in order; the
/// last is the root).
fn kernel_node(nodes: &[Node], members: &[usize], index: usize) -> Node {
    let defined: Vec<ValueId> = members.iter().filter_map(|&m| nodes[m].out).collect();
    let mut inputs: Vec<ValueId> = Vec::new();
    for v in members.iter().flat_map(|&m| nodes[m].tensor_args()) {
        if !defined.contains(&v) && !inputs.contains(&v) {
            inputs.push(v);
        }
    }
    let local = |v: ValueId| -> ValueId {
        match inputs.iter().position(|&w| w == v) {
            Some(k) => ValueId(k as u32),
            None => ValueId((inputs.len() + defined.iter().position(|&w| w == v).unwrap_or(0)) as u32),
        }
    };
    let mut body: Vec<Node> = (0..inputs.len()).map(|k| Node::new(Op::Load(k), Vec::new(), Some(ValueId(k as u32)))).collect();
    for &m in members {
        let n = &nodes[m];
        let args = n
            .args
            .iter()
            .map(|a| match a {
                Arg::Tensor(v) => Arg::Tensor(local(*v)),
                other => other.clone(),
            })
            .collect();
        body.push(Node { op: n.op.clone(), args, out: n.out.map(local), no_grad: false, span: n.span });
    }
    let root = &nodes[*members.last().unwrap_or(&0)];
    // Named after its first few ops, as a reader would describe it.
    let ops: Vec<&str> = members.iter().filter_map(|&m| nodes[m].kind()).map(|k| k.name()).take(6).collect();
    let kernel = Kernel {
        name: format!("fused_{}_{index}", ops.join("_")),
        num_values: inputs.len() + defined.len(),
        out: root.out.map(local).unwrap_or(ValueId(0)),
        extra_outs: Vec::new(),
        stage_values: inputs.iter().chain(&defined).copied().collect(),
        body,
    };
    Node {
        op: Op::Kernel(Box::new(kernel)),
        args: inputs.into_iter().map(Arg::Tensor).collect(),
        out: root.out,
        no_grad: false,
        span: root.span,
    }
}

#[cfg(test)]
mod tests;
