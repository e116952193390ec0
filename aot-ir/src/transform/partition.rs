//! The partitioner: the joint graph split into a forward graph (primals ->
//! forward outputs + saved values) and a backward graph (saved values +
//! tangents -> input grads).
//!
//! [`partition`] follows the min-cut idea of PyTorch's
//! `min_cut_rematerialization_partition`: the values the backward needs
//! but that do not depend on a tangent form a flow network from the
//! primals (source) to the backward's uses (sink). Each value is an edge
//! `in -> out` whose capacity is what saving it costs; a minimum cut picks
//! the cheapest set of values to save, and every value past the cut is
//! recomputed in the backward. Values whose op is not cheap (matmul,
//! softmax, var, random draws, mutations) cannot be recomputed: the source
//! reaches them directly, so they are either saved or only needed through
//! something saved. Dropout's mask is not a draw but a pure function of
//! the generator state its `rng_take` took (functionalized RNG): that state
//! (two i64s) is saved, and the mask is recomputed from it and the input's
//! shape.
//!
//! That cost is the value's estimated size weighted as PyTorch weighs it
//! (`partition/costs.rs`): twice for a value the forward's kernels would
//! not store, and more the farther it is from the backward.
//!
//! Shapes are only known at run time, so sizes are estimates in units of
//! "one input-sized float tensor": an elementwise result is as large as its
//! largest operand, a Bool mask a quarter of that (1 byte against 4), a
//! full reduction almost nothing, a reduction over some dims a tenth, and a
//! view slightly more than its base (saving the base and recomputing the
//! view costs nothing extra). Exact byte counts of a call are computed by
//! the runtime from the saved tensors.
//!
//! [`save_all`] is the baseline (PyTorch's `default_partition` without its
//! recomputation): every tangent-independent value the backward reads is saved.
//!
//! The saved values are also what the runtime's in-place check sees: a
//! compiled backward refuses exactly when one of them was modified before
//! `backward()`. They may differ from what eager autograd saves (as in
//! `torch.compile`): `relu`'s backward saves the Bool mask of its output,
//! so modifying the output leaves the compiled backward valid (eager
//! refuses), while `exp`'s and `softmax`'s outputs are saved, so modifying
//! them is refused in both. A partition change can move a call between the
//! two, never to a wrong gradient.

use super::grad_rules::Prim;
use super::joint::{JointError, JointGraph};
use crate::graph::{Node, Op};
use crate::op::OpKind;
use crate::types::Arg;
use crate::types::ValueId;
use std::collections::VecDeque;

mod costs;

/// A graph of joint nodes with explicit inputs and outputs; value ids are
/// the joint graph's.
#[derive(Clone, Debug, PartialEq)]
pub struct SubGraph {
    /// The values the graph receives, in order.
    pub inputs: Vec<ValueId>,
    /// The nodes in execution order.
    pub nodes: Vec<Node>,
    /// The values the graph returns, in order.
    pub outputs: Vec<ValueId>,
}

/// The forward and backward graphs.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Inputs: the primals in group order. Outputs: the joint's forward
    /// outputs, then the saved values.
    pub forward: SubGraph,
    /// Inputs: the saved values, then the tangents. Outputs: the input
    /// gradients that exist, in parameter order.
    pub backward: SubGraph,
    /// The values the forward saves for the backward, in order.
    pub saved: Vec<ValueId>,
    /// How many of the forward's outputs are the joint's forward outputs
    /// (the rest are the saved values).
    pub num_fw_outputs: usize,
    /// Per source parameter, the gradient's position in the backward's outputs.
    pub grad_slots: Vec<Option<usize>>,
    /// The joint's value count plus the stand-ins (executors index values by id).
    pub num_values: usize,
}

/// Splits `jg` saving every tangent-independent value the backward reads.
pub fn save_all(jg: &JointGraph) -> Result<Partition, JointError> {
    let need = backward_needs(jg);
    let saved: Vec<ValueId> = boundary(jg, &need).into_iter().collect();
    build(jg, saved)
}

/// Splits `jg` with the min-cut rematerialization heuristic.
pub fn partition(jg: &JointGraph) -> Result<Partition, JointError> {
    let need = backward_needs(jg);
    let required = boundary(jg, &need);
    if required.is_empty() {
        return build(jg, vec![]);
    }
    let def = definitions(jg);
    // Candidate values: tangent-independent ancestors of what the backward reads.
    let n = jg.num_values;
    let mut cand = vec![false; n];
    let mut stack: Vec<ValueId> = required.clone();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut cand[v.index()], true) {
            continue;
        }
        if let Some(k) = def[v.index()] {
            stack.extend(jg.nodes[k].data_uses());
        }
    }
    let cost = costs::save_costs(jg, &estimate_sizes(jg));
    // Flow network: value v is nodes 2v (in) and 2v+1 (out); 2n is the
    // source, 2n+1 the sink.
    let (src, sink) = (2 * n, 2 * n + 1);
    let mut net = FlowNet::new(2 * n + 2);
    for node in jg.nodes.iter().filter(|nd| cand[nd.value().index()]) {
        let v = node.value().index();
        net.add(2 * v, 2 * v + 1, cost[v]);
        let forced = matches!(node.op, Op::Primal(_)) || !node.is_cheap();
        if forced {
            net.add(src, 2 * v, INF);
        }
        for u in node.data_uses() {
            net.add(2 * u.index() + 1, 2 * v, INF);
        }
    }
    for v in &required {
        net.add(2 * v.index() + 1, sink, INF);
    }
    net.max_flow(src, sink);
    let reach = net.reachable(src);
    let saved: Vec<ValueId> = (0..n).filter(|&v| cand[v] && reach[2 * v] && !reach[2 * v + 1]).map(|v| ValueId(v as u32)).collect();
    build(jg, saved)
}

const INF: f64 = 1e18;

fn definitions(jg: &JointGraph) -> Vec<Option<usize>> {
    let mut def = vec![None; jg.num_values];
    for (k, node) in jg.nodes.iter().enumerate() {
        if let Some(d) = def.get_mut(node.value().index()) {
            *d = Some(k);
        }
    }
    def
}

/// Which values the input gradients depend on.
fn backward_needs(jg: &JointGraph) -> Vec<bool> {
    let def = definitions(jg);
    let mut need = vec![false; jg.num_values];
    let mut stack: Vec<ValueId> = jg.input_grads.iter().flatten().copied().collect();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut need[v.index()], true) {
            continue;
        }
        if let Some(k) = def[v.index()] {
            if jg.is_backward[v.index()] {
                stack.extend(jg.nodes[k].tensor_args());
            }
        }
    }
    need
}

/// Tangent-independent values that needed backward nodes read, in id order.
fn boundary(jg: &JointGraph, need: &[bool]) -> Vec<ValueId> {
    let def = definitions(jg);
    let is_bw = |v: ValueId| def[v.index()].is_some() && jg.is_backward[v.index()];
    let mut b = vec![false; jg.num_values];
    for node in jg.nodes.iter().filter(|nd| jg.is_backward[nd.value().index()] && need[nd.value().index()]) {
        for u in node.data_uses().filter(|&u| !is_bw(u)) {
            b[u.index()] = true;
        }
    }
    // A gradient may itself be tangent-independent (e.g. zero).
    for g in jg.input_grads.iter().flatten().filter(|&&g| !is_bw(g)) {
        b[g.index()] = true;
    }
    (0..b.len()).filter(|&v| b[v]).map(|v| ValueId(v as u32)).collect()
}

/// Marks in `fw` the values in `stack` and everything they are computed
/// from; a value that depends on a tangent cannot be in the forward.
fn mark_forward(jg: &JointGraph, def: &[Option<usize>], fw: &mut [bool], mut stack: Vec<ValueId>) -> Result<(), JointError> {
    let err = |msg: String| JointError { name: jg.name.clone(), msg };
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut fw[v.index()], true) {
            continue;
        }
        let k = def[v.index()].ok_or_else(|| err(format!("{v} has no definition")))?;
        if jg.is_backward[v.index()] {
            return Err(err(format!("the forward needs {v}, which depends on a tangent")));
        }
        stack.extend(jg.nodes[k].tensor_args());
    }
    Ok(())
}

/// The values the gradients need, stopping at saved values and tangents,
/// and the forward values the backward reads only for their metadata.
fn mark_backward(jg: &JointGraph, def: &[Option<usize>], is_saved: &[bool]) -> Result<(Vec<bool>, Vec<ValueId>), JointError> {
    let err = |msg: String| JointError { name: jg.name.clone(), msg };
    let mut bw = vec![false; jg.num_values];
    let mut meta_wanted = Vec::new();
    let mut stack: Vec<ValueId> = jg.input_grads.iter().flatten().copied().collect();
    while let Some(v) = stack.pop() {
        if is_saved[v.index()] || std::mem::replace(&mut bw[v.index()], true) {
            continue;
        }
        let k = def[v.index()].ok_or_else(|| err(format!("{v} has no definition")))?;
        let node = &jg.nodes[k];
        match node.op {
            Op::Tangent(_) => {}
            Op::Primal(_) => return Err(err(format!("the backward needs primal {v}, which is not saved"))),
            _ if !jg.is_backward[v.index()] && !node.is_cheap() => {
                return Err(err(format!("the backward would recompute {v}, which is not cheap")));
            }
            _ => {
                for (i, a) in node.args.iter().enumerate() {
                    let Some(u) = a.as_tensor() else { continue };
                    let u_bw = def[u.index()].is_some() && jg.is_backward[u.index()];
                    if node.is_meta_arg(i) && !u_bw {
                        meta_wanted.push(u);
                    } else {
                        stack.push(u);
                    }
                }
            }
        }
    }
    Ok((bw, meta_wanted))
}

/// Builds both graphs given the saved values.
fn build(jg: &JointGraph, saved: Vec<ValueId>) -> Result<Partition, JointError> {
    let def = definitions(jg);
    let n = jg.num_values;
    // Forward: everything the forward outputs and the saved values need,
    // and every op of the source, used or not: eager runs each one, so its
    // errors and its random draws must happen here too.
    let mut fw = vec![false; n];
    let from_source = (0..n).filter(|&v| !jg.is_backward[v] && jg.src_node[v].is_some()).map(|v| ValueId(v as u32));
    let stack: Vec<ValueId> = jg.fw_outputs.iter().map(|o| o.value).chain(saved.iter().copied()).chain(from_source).collect();
    let mut primals = vec![None; jg.num_primals];
    for node in &jg.nodes {
        if let Op::Primal(g) = node.op {
            if let Some(p) = primals.get_mut(g) {
                *p = node.out;
            }
        }
    }
    mark_forward(jg, &def, &mut fw, stack)?;
    // Backward: what the gradients need, stopping at saved values and
    // tangents. A forward value the backward reads only for its shape and
    // dtype is saved as a one-element stand-in (`meta_of`).
    let mut is_saved = vec![false; n];
    for s in &saved {
        is_saved[s.index()] = true;
    }
    let (bw, meta_wanted) = mark_backward(jg, &def, &is_saved)?;
    let mut meta: Vec<(ValueId, ValueId)> = Vec::new();
    for u in meta_wanted {
        if !is_saved[u.index()] && !bw[u.index()] && !meta.iter().any(|(x, _)| *x == u) {
            meta.push((u, ValueId((n + meta.len()) as u32)));
        }
    }
    let stand_in = |u: ValueId| meta.iter().find(|(x, _)| *x == u).map(|(_, m)| *m);
    // The forward computes what the stand-ins describe.
    mark_forward(jg, &def, &mut fw, meta.iter().map(|(u, _)| *u).collect())?;
    let saved: Vec<ValueId> = saved.into_iter().chain(meta.iter().map(|(_, m)| *m)).collect();
    let tangent_vals: Vec<ValueId> = jg.nodes.iter().filter(|nd| matches!(nd.op, Op::Tangent(_))).map(Node::value).collect();
    let forward = SubGraph {
        inputs: primals.iter().map(|p| p.unwrap_or(ValueId(u32::MAX))).collect(),
        nodes: jg
            .nodes
            .iter()
            .filter(|nd| fw[nd.value().index()] && !matches!(nd.op, Op::Primal(_)))
            .cloned()
            .chain(meta.iter().map(|&(u, m)| Node::new(Op::Prim(Prim::MetaOf), vec![Arg::Tensor(u)], Some(m))))
            .collect(),
        outputs: jg.fw_outputs.iter().map(|o| o.value).chain(saved.iter().copied()).collect(),
    };
    let mut grad_slots = Vec::with_capacity(jg.input_grads.len());
    let mut outputs = Vec::new();
    for g in &jg.input_grads {
        grad_slots.push(g.map(|g| {
            outputs.push(g);
            outputs.len() - 1
        }));
    }
    let backward = SubGraph {
        inputs: saved.iter().copied().chain(tangent_vals).collect(),
        nodes: jg
            .nodes
            .iter()
            .filter(|nd| bw[nd.value().index()] && !matches!(nd.op, Op::Tangent(_)))
            .map(|nd| {
                let mut nd = nd.clone();
                for i in 0..nd.args.len() {
                    let m = nd.args[i].as_tensor().filter(|_| nd.is_meta_arg(i)).and_then(stand_in);
                    if let Some(m) = m {
                        nd.args[i] = Arg::Tensor(m);
                    }
                }
                nd
            })
            .collect(),
        outputs,
    };
    let p = Partition { forward, backward, num_fw_outputs: jg.fw_outputs.len(), saved, grad_slots, num_values: n + meta.len() };
    p.verify(jg)?;
    Ok(p)
}

/// Estimated sizes (see the module doc), in node order.
fn estimate_sizes(jg: &JointGraph) -> Vec<f64> {
    use OpKind as K;
    let n = jg.num_values;
    let mut elems = vec![1.0f64; n];
    let mut bytes = vec![1.0f64; n];
    for node in &jg.nodes {
        let v = node.value().index();
        let ins: Vec<f64> = node.tensor_args().map(|u| elems[u.index()]).collect();
        let largest = ins.iter().copied().fold(0.0, f64::max);
        let first = ins.first().copied().unwrap_or(1.0);
        let (e, b) = match &node.op {
            Op::Primal(_) | Op::Tangent(_) | Op::Load(_) | Op::Call(_) => (1.0, 1.0),
            Op::Cow | Op::Mutate { .. } => (first, 1.0),
            Op::Kernel(_) => (largest, 1.0),
            Op::Regen(_) => (first * 1.01, bytes[node.tensor_args().next().map_or(v, |u| u.index())]),
            Op::Prim(p) => {
                use super::grad_rules::Prim as P;
                match p {
                    P::InvCount(_) | P::RngTake => (1e-3, 1.0),
                    P::SumToLike | P::ReshapeLike | P::ExpandLike | P::KeepDims => (ins.get(1).copied().unwrap_or(first), 1.0),
                    _ => (largest, 1.0),
                }
            }
            Op::Dsl { op, .. } => match op {
                K::Eq | K::Ne | K::Lt | K::Le | K::Gt | K::Ge => (largest, 0.25),
                K::Sum | K::Mean => (1e-3, 1.0),
                K::SumDim | K::MeanDim | K::AmaxDim | K::VarDim => (first * 0.1, 1.0),
                _ if op.class() == crate::op::OpClass::View || matches!(op, K::Contiguous) => {
                    (first * 1.01, bytes[node.tensor_args().next().map_or(v, |u| u.index())])
                }
                _ => (largest, 1.0),
            },
        };
        elems[v] = e;
        bytes[v] = b;
    }
    elems.iter().zip(&bytes).map(|(e, b)| e * b).collect()
}

/// A small max-flow network (Edmonds-Karp); graphs here have a few hundred nodes.
struct FlowNet {
    head: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<f64>,
}

impl FlowNet {
    fn new(n: usize) -> FlowNet {
        FlowNet { head: vec![Vec::new(); n], to: Vec::new(), cap: Vec::new() }
    }

    fn add(&mut self, a: usize, b: usize, c: f64) {
        self.head[a].push(self.to.len());
        self.to.push(b);
        self.cap.push(c);
        self.head[b].push(self.to.len());
        self.to.push(a);
        self.cap.push(0.0);
    }

    fn max_flow(&mut self, s: usize, t: usize) {
        loop {
            let mut prev: Vec<Option<usize>> = vec![None; self.head.len()];
            let mut seen = vec![false; self.head.len()];
            seen[s] = true;
            let mut q = VecDeque::from([s]);
            while let Some(a) = q.pop_front() {
                for &e in &self.head[a] {
                    let b = self.to[e];
                    if !seen[b] && self.cap[e] > 1e-12 {
                        seen[b] = true;
                        prev[b] = Some(e);
                        q.push_back(b);
                    }
                }
            }
            if !seen[t] {
                return;
            }
            let mut f = INF;
            let mut x = t;
            while let Some(e) = prev[x] {
                f = f.min(self.cap[e]);
                x = self.to[e ^ 1];
            }
            if f >= INF {
                // an uncuttable path: everything on it is forced; stop
                return;
            }
            let mut x = t;
            while let Some(e) = prev[x] {
                self.cap[e] -= f;
                self.cap[e ^ 1] += f;
                x = self.to[e ^ 1];
            }
        }
    }

    fn reachable(&self, s: usize) -> Vec<bool> {
        let mut seen = vec![false; self.head.len()];
        seen[s] = true;
        let mut stack = vec![s];
        while let Some(a) = stack.pop() {
            for &e in &self.head[a] {
                let b = self.to[e];
                if !seen[b] && self.cap[e] > 1e-12 {
                    seen[b] = true;
                    stack.push(b);
                }
            }
        }
        seen
    }
}
