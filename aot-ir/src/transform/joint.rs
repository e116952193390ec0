//! The joint forward+backward graph (PyTorch's `create_joint` over
//! `fn_prepped_for_autograd`), built as a compile pass over the functional
//! graph.
//!
//! One graph maps (primals, tangents) to (forward outputs, input grads):
//!
//! - primals are the functional graph's input-group bases;
//! - the forward part is the functional graph itself, node for node (the
//!   same [`Node`]s), with the same value ids (so listings line up). A
//!   `Mutate`'s view chain, from its root to the region it writes, is
//!   re-derived from the nodes that define its target (which checks the
//!   pass's), so it can run out of place: a backward rule may read a root
//!   version that a later mutation replaced, which the reinplacing
//!   functional executor would have overwritten;
//! - forward outputs are, in PyTorch's order, the final versions of mutated
//!   inputs, the user outputs that are graph values, and the bases of
//!   outputs that are views of intermediates. A tangent exists for each one
//!   that requires grad, except user outputs that alias an input or an
//!   intermediate (their gradient reaches the graph through the input or
//!   the base, as in PyTorch's tangent mask);
//! - the backward part walks the forward nodes in reverse and applies
//!   [`super::grad_rules`]; inputs that get no gradient get `None`.
//!
//! What only this stage needs per node is kept per value, beside the
//! nodes: whether a value depends on a tangent (`is_backward`), and the
//! source node it came from (`src_node`).
//!
//! Differences from PyTorch worth knowing: a mutation under `no_grad` passes
//! its root's gradient straight through (eager leaves the history untouched,
//! so the tensor's older history receives later gradients). Dropout is
//! `x * mask` with its mask a forward value (drawn as eager draws it). A
//! group of aliased arguments is one primal over their shared storage; its
//! gradient is the storage's, which the runtime hands to the arguments'
//! common base (PyTorch's synthetic base in training).

use super::emit::{cse_key, Emit};
use super::functionalize::{ChainStep, FOutput, FunctionalGraph};
use super::grad_rules::{self, MutateSite, OutRef, Prim};
use crate::graph::{Graph, Node, Op, Param};
use crate::op::{OpClass, OpKind};
use crate::types::{Arg, ValueId};

/// What a forward output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// The final version of a data-mutated input group.
    MutatedInput(usize),
    /// The value of a parameter whose metadata the function changed.
    MetadataMutation(usize),
    /// User output `.0` (its value; how it is returned is `user_outputs[.0]`).
    User(usize),
    /// The base of user outputs that are views of an intermediate.
    IntermediateBase,
}

/// One forward output of the joint graph.
#[derive(Clone, Debug, PartialEq)]
pub struct JOutput {
    /// What the output stands for.
    pub kind: OutputKind,
    /// The value returned.
    pub value: ValueId,
    /// The tangent it receives, if it is differentiable.
    pub tangent: Option<usize>,
}

/// The joint graph.
#[derive(Clone, Debug, PartialEq)]
pub struct JointGraph {
    /// The source function's name.
    pub name: String,
    /// The source's parameters (names for the listing, types).
    pub params: Vec<Param>,
    /// How many primals: one per input group.
    pub num_primals: usize,
    /// How many values the graph defines; their ids are below it.
    pub num_values: usize,
    /// Forward nodes first, then tangents, then the backward.
    pub nodes: Vec<Node>,
    /// Per value: depends on a tangent, so it can only be computed in the
    /// backward.
    pub is_backward: Vec<bool>,
    /// Per value: the source node it came from (the functional graph's
    /// DSL ops and writes; `None` for what the rules added).
    pub src_node: Vec<Option<usize>>,
    /// The forward outputs in PyTorch's order: final versions of
    /// data-mutated inputs, metadata-mutated parameters, user outputs,
    /// intermediate bases.
    pub fw_outputs: Vec<JOutput>,
    /// Per tangent, the forward output it belongs to.
    pub tangents: Vec<usize>,
    /// Per source parameter, its gradient (`None`: no gradient).
    pub input_grads: Vec<Option<ValueId>>,
    /// How each user output is returned (as the functional graph says).
    pub user_outputs: Vec<FOutput>,
}

/// Why a joint graph cannot be built or is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("joint graph `{name}`: {msg}")]
pub struct JointError {
    /// The graph's name.
    pub name: String,
    /// What is wrong.
    pub msg: String,
}

/// Builds the joint graph of `fg` (functionalized from `source`) for a call
/// whose tensor parameters require grad as `requires_grad` says (one entry
/// per source parameter; scalars `false`).
pub fn create_joint(fg: &FunctionalGraph, source: &Graph, requires_grad: &[bool]) -> Result<JointGraph, JointError> {
    let fw = forward(fg, requires_grad)?;
    let (fw_outputs, tangents) = forward_outputs(fg, &fw.rg);
    let mut num_values = fw.rg.len();
    let Forward { mut nodes, rg, diff, mut src_node, .. } = fw;
    let flow = Flow { rg: &rg, diff: &diff, src_node: &src_node };
    let grads = backward(fg, &mut nodes, &mut num_values, &flow, &fw_outputs, &tangents)?;
    let input_grads = input_grads(fg, source, requires_grad, &grads);
    src_node.resize(num_values, None);
    let jg = JointGraph {
        name: fg.name.clone(),
        params: source.params.clone(),
        num_primals: fg.groups.single.len(),
        num_values,
        is_backward: backward_values(&nodes, num_values),
        nodes,
        src_node,
        fw_outputs,
        tangents,
        input_grads,
        user_outputs: fg.outputs.clone(),
    };
    jg.verify()?;
    Ok(jg)
}

/// Per value: whether it depends on a tangent.
pub(crate) fn backward_values(nodes: &[Node], num_values: usize) -> Vec<bool> {
    let mut bw = vec![false; num_values];
    for node in nodes {
        let is_bw = matches!(node.op, Op::Tangent(_)) || node.tensor_args().any(|v| bw.get(v.index()).copied().unwrap_or(false));
        if let Some(b) = bw.get_mut(node.value().index()) {
            *b = is_bw;
        }
    }
    bw
}

/// The forward part: its nodes, and per value the node defining it,
/// whether it requires grad, and whether it is differentiable.
struct Forward {
    nodes: Vec<Node>,
    src_node: Vec<Option<usize>>,
    def: Vec<Option<usize>>,
    rg: Vec<bool>,
    diff: Vec<bool>,
}

/// The functional nodes, with requires-grad propagated.
fn forward(fg: &FunctionalGraph, requires_grad: &[bool]) -> Result<Forward, JointError> {
    let err = |msg: String| JointError { name: fg.name.clone(), msg };
    // Each dropout's generator state and mask are forward values of their
    // own, numbered after the functional graph's values.
    let num_dropouts = fg.nodes.iter().filter(|f| f.is(OpKind::Dropout)).count();
    let n = fg.num_values + 2 * num_dropouts;
    let mut next_mask = fg.num_values;
    // A group of aliased arguments (`single == false`) is one primal, the
    // storage its arguments share (PyTorch's synthetic base); it requires
    // grad when any of them does, and each argument is a view of it.
    let mut group_rg = vec![false; fg.groups.single.len()];
    for (pi, g) in fg.groups.group_of.iter().enumerate() {
        if let (Some(g), true) = (*g, requires_grad.get(pi).copied().unwrap_or(false)) {
            if let Some(slot) = group_rg.get_mut(g) {
                *slot = true;
            }
        }
    }
    let mut f = Forward {
        nodes: Vec::with_capacity(fg.nodes.len() * 3),
        src_node: fg.src_node.clone(),
        def: vec![None; n],
        rg: vec![false; n],
        diff: vec![false; n],
    };
    f.src_node.resize(n, None);
    for fnode in &fg.nodes {
        let out = fnode.value();
        let src = fg.src_node.get(out.index()).copied().flatten().unwrap_or(usize::MAX);
        let rg = &f.rg;
        let arg_rg = |i: usize| fnode.args.get(i).and_then(Arg::as_tensor).is_some_and(|v| rg[v.index()]);
        let mut node = fnode.clone();
        let (r, d) = match &fnode.op {
            Op::Primal(group) => (group_rg.get(*group).copied().unwrap_or(false), false),
            Op::Cow | Op::Regen(_) => (arg_rg(0), true),
            Op::Load(_) | Op::Kernel(_) => return Err(err(format!("node {src}: a kernel before scheduling"))),
            Op::Call(_) => return Err(err(format!("node {src}: a call that was not inlined"))),
            Op::Dsl { op: OpKind::Dropout, .. } => {
                // Dropout is `x * mask` with the mask drawn as a value of its
                // own (PyTorch's `native_dropout`), at the generator state
                // taken for it (functionalized RNG): the backward multiplies
                // by the same mask, recomputed from the state or saved.
                let (state, mask) = (ValueId(next_mask as u32), ValueId(next_mask as u32 + 1));
                next_mask += 2;
                let x = fnode.args.first().cloned().ok_or_else(|| err(format!("dropout {src} has no input")))?;
                let p = fnode.args.get(1).cloned().ok_or_else(|| err(format!("dropout {src} has no probability")))?;
                // Under `no_grad` no gradient flows through it (as for any op).
                let d = !fnode.no_grad;
                let r = d && arg_rg(0);
                f.def[state.index()] = Some(f.nodes.len());
                f.nodes.push(Node::new(Op::Prim(Prim::RngTake), vec![x.clone(), p.clone()], Some(state)));
                f.def[mask.index()] = Some(f.nodes.len());
                f.nodes.push(Node::new(Op::Prim(Prim::DropoutMask), vec![x.clone(), Arg::Tensor(state), p], Some(mask)));
                node = Node { op: OpKind::Mul.into(), args: vec![x, Arg::Tensor(mask)], ..fnode.clone() };
                (r, d)
            }
            Op::Dsl { op, .. } => {
                let d = fnode.is_differentiable();
                (d && differentiable_tensor_args(*op, &fnode.args).any(|(_, v)| rg[v.index()]), d)
            }
            Op::Mutate { op, .. } => {
                let root = fnode.receiver().ok_or_else(|| err(format!("mutation {src} has no root")))?;
                let target = fnode.args.get(1).and_then(Arg::as_tensor).ok_or_else(|| err(format!("mutation {src} has no target")))?;
                let chain = chain_to(&f.nodes, &f.def, target, root)
                    .ok_or_else(|| err(format!("mutation {src}: its target {target} is not a view of {root}")))?;
                let d = !fnode.no_grad;
                let r = rg[root.index()] || (d && differentiable_tensor_args(*op, &fnode.args[1..]).skip(1).any(|(_, v)| rg[v.index()]));
                node.op = Op::Mutate { op: *op, chain };
                (r, d)
            }
            Op::Tangent(_) | Op::Prim(_) => return Err(err(format!("node {out}: `{}` in a functional graph", fnode.op.name()))),
        };
        if out.index() >= n || f.def[out.index()].is_some() {
            return Err(err(format!("value {out} is out of range or defined twice")));
        }
        if let Some(bad) = node.tensor_args().find(|v| f.def.get(v.index()).is_none_or(Option::is_none)) {
            return Err(err(format!("value {bad} is used before it is defined")));
        }
        f.def[out.index()] = Some(f.nodes.len());
        f.rg[out.index()] = r;
        f.diff[out.index()] = d;
        f.nodes.push(node);
    }
    Ok(f)
}

/// Forward outputs, in PyTorch's order, with the tangent mask: (outputs,
/// per tangent the output it belongs to).
fn forward_outputs(fg: &FunctionalGraph, rg: &[bool]) -> (Vec<JOutput>, Vec<usize>) {
    let mut fw_outputs = Vec::new();
    let mut tangents = Vec::new();
    let mut add_out = |kind: OutputKind, value: ValueId, wants: bool, fw_outputs: &mut Vec<JOutput>| {
        let tangent = (wants && rg[value.index()]).then(|| {
            tangents.push(fw_outputs.len());
            tangents.len() - 1
        });
        fw_outputs.push(JOutput { kind, value, tangent });
    };
    for &(g, v) in &fg.mutated_groups {
        add_out(OutputKind::MutatedInput(g), v, true, &mut fw_outputs);
    }
    for &(p, v) in &fg.metadata_mutations {
        add_out(OutputKind::MetadataMutation(p), v, false, &mut fw_outputs);
    }
    let mut bases = Vec::new();
    for (i, o) in fg.outputs.iter().enumerate() {
        match o {
            FOutput::Input(_) => {}
            FOutput::AliasOfInput { value, .. } => add_out(OutputKind::User(i), *value, false, &mut fw_outputs),
            FOutput::Value(v) => add_out(OutputKind::User(i), *v, true, &mut fw_outputs),
            FOutput::ViewOfIntermediate { base, value } => {
                add_out(OutputKind::User(i), *value, false, &mut fw_outputs);
                let is_user = fg.outputs.contains(&FOutput::Value(*base));
                if !is_user && !bases.contains(base) {
                    bases.push(*base);
                }
            }
        }
    }
    for b in bases {
        add_out(OutputKind::IntermediateBase, b, true, &mut fw_outputs);
    }
    (fw_outputs, tangents)
}

/// The backward: seeds the outputs' gradients with the tangents, then
/// walks the forward nodes in reverse, appending each rule's nodes.
/// Returns each forward value's gradient.
fn backward(
    fg: &FunctionalGraph,
    nodes: &mut Vec<Node>,
    num_values: &mut usize,
    flow: &Flow,
    fw_outputs: &[JOutput],
    tangents: &[usize],
) -> Result<Vec<Option<ValueId>>, JointError> {
    let num_fw_nodes = nodes.len();
    let mut grads: Vec<Option<ValueId>> = vec![None; *num_values];
    // Forward values are candidates for reuse by the rules.
    let seen = nodes.iter().filter_map(|nd| cse_key(&nd.op, &nd.args).map(|k| (k, nd.value()))).collect();
    let mut e = Emit { nodes, num_values, seen };
    for (ti, &oi) in tangents.iter().enumerate() {
        let tv = e.push(Op::Tangent(ti), vec![]);
        accumulate(&mut e, &mut grads, fw_outputs[oi].value, tv);
    }
    for k in (0..num_fw_nodes).rev() {
        let node = e.nodes[k].clone();
        let Some(g) = grads[node.value().index()] else { continue };
        if flow.rg[node.value().index()] {
            node_vjp(&mut e, &node, g, flow, &mut grads).map_err(|msg| JointError { name: fg.name.clone(), msg })?;
        }
    }
    Ok(grads)
}

/// Per forward value: whether it requires grad, whether gradients flow
/// through its node, and the source node it came from.
struct Flow<'a> {
    rg: &'a [bool],
    diff: &'a [bool],
    src_node: &'a [Option<usize>],
}

/// Applies the rule of forward node `node`, whose gradient is `g`, and
/// accumulates its arguments' gradients.
fn node_vjp(e: &mut Emit, node: &Node, g: ValueId, flow: &Flow, grads: &mut [Option<ValueId>]) -> Result<(), String> {
    let (rg, diff) = (flow.rg, flow.diff);
    let out = node.value();
    let src_node = flow.src_node.get(out.index()).copied().flatten().unwrap_or(usize::MAX);
    let wants = |a: &Arg| a.as_tensor().is_some_and(|v| rg[v.index()]);
    match &node.op {
        Op::Primal(_) | Op::Tangent(_) | Op::Prim(_) => {}
        Op::Load(_) | Op::Kernel(_) => {
            return Err(format!("node {src_node}: a kernel has no gradient rule (the joint graph is built before scheduling)"))
        }
        Op::Call(_) => return Err(format!("node {src_node}: a call that was not inlined")),
        Op::Cow => {
            if let Some(src) = node.args[0].as_tensor() {
                accumulate(e, grads, src, g);
            }
        }
        Op::Regen(chain) => {
            if let Some(root) = node.args[0].as_tensor().filter(|r| rg[r.index()]) {
                let gr = grad_rules::regen_vjp(e, root, chain, g)?;
                accumulate(e, grads, root, gr);
            }
        }
        Op::Dsl { op, .. } => {
            if !diff[out.index()] {
                return Ok(());
            }
            let n = node.args.len();
            let needs: Vec<bool> = node.args.iter().enumerate().map(|(i, a)| op.differentiable_arg(i, n) && wants(a)).collect();
            let gs = grad_rules::op_vjp(e, *op, &node.args, &OutRef::Value(out), g, &needs)
                .map_err(|m| format!("{m} (source node {src_node})"))?;
            for (a, gi) in node.args.iter().zip(gs) {
                if let (Some(v), Some(gi)) = (a.as_tensor(), gi) {
                    accumulate(e, grads, v, gi);
                }
            }
        }
        Op::Mutate { op, chain } => {
            let root = node.args[0].as_tensor().unwrap_or(ValueId(u32::MAX));
            if !diff[out.index()] {
                // under no_grad the history is untouched: straight through
                if rg[root.index()] {
                    accumulate(e, grads, root, g);
                }
                return Ok(());
            }
            let args = &node.args[1..];
            let mut needs = vec![rg[root.index()]];
            needs.extend(args.iter().enumerate().skip(1).map(|(i, a)| op.differentiable_arg(i, args.len()) && wants(a)));
            let site = MutateSite { op: *op, root, out, chain, args };
            let gs = grad_rules::mutate_vjp(e, &site, g, &needs).map_err(|m| format!("{m} (source node {src_node})"))?;
            for (i, gi) in gs.into_iter().enumerate() {
                let target = if i == 0 { Some(root) } else { args[i].as_tensor() };
                if let (Some(v), Some(gi)) = (target, gi) {
                    accumulate(e, grads, v, gi);
                }
            }
        }
    }
    Ok(())
}

/// Per source parameter, the gradient of its input group's base.
fn input_grads(fg: &FunctionalGraph, source: &Graph, requires_grad: &[bool], grads: &[Option<ValueId>]) -> Vec<Option<ValueId>> {
    let mut base_of_group: Vec<Option<ValueId>> = vec![None; fg.groups.single.len()];
    for fnode in &fg.nodes {
        if let Op::Primal(group) = fnode.op {
            if let Some(slot) = base_of_group.get_mut(group) {
                *slot = fnode.out;
            }
        }
    }
    (0..source.params.len())
        .map(|pi| {
            if !requires_grad.get(pi).copied().unwrap_or(false) {
                return None;
            }
            let g = fg.groups.group_of.get(pi).copied().flatten()?;
            grads[base_of_group.get(g).copied().flatten()?.index()]
        })
        .collect()
}

/// The tensor arguments gradients flow into, with their positions.
fn differentiable_tensor_args(op: OpKind, args: &[Arg]) -> impl Iterator<Item = (usize, ValueId)> + '_ {
    let n = args.len();
    args.iter().enumerate().filter(move |(i, _)| op.differentiable_arg(*i, n)).filter_map(|(i, a)| a.as_tensor().map(|v| (i, v)))
}

fn accumulate(e: &mut Emit, grads: &mut [Option<ValueId>], v: ValueId, g: ValueId) {
    let Some(slot) = grads.get_mut(v.index()) else { return };
    *slot = Some(match *slot {
        Some(old) => e.push(OpKind::Add.into(), vec![Arg::Tensor(old), Arg::Tensor(g)]),
        None => g,
    });
}

/// The view chain from root version `root` to `v`, read off the forward
/// nodes (`def`: per value, its node) that define `v` (regenerations and
/// view ops).
fn chain_to(nodes: &[Node], def: &[Option<usize>], v: ValueId, root: ValueId) -> Option<Vec<ChainStep>> {
    if v == root {
        return Some(Vec::new());
    }
    let node = nodes.get((*def.get(v.index())?)?)?;
    match (&node.op, node.kind()) {
        (Op::Regen(chain), _) if node.receiver() == Some(root) => Some(chain.clone()),
        (_, Some(op)) if op.class() == OpClass::View || matches!(op, OpKind::Reshape | OpKind::Contiguous) => {
            let base = chain_to(nodes, def, node.receiver()?, root)?;
            let step = ChainStep::View { op, args: node.args[1..].to_vec() };
            Some(match op {
                OpKind::AsStrided => vec![step],
                OpKind::Contiguous | OpKind::Detach => base,
                _ => base.into_iter().chain([step]).collect(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, ReturnKind};
    use crate::transform::{functionalize, InputGroups};

    /// A dropout's mask is a joint node of its own, so joint and functional
    /// node indices differ after it; a later write through a view still
    /// finds its chain among the joint's own nodes (reading the functional
    /// graph's nodes at joint indices refused this function).
    #[test]
    fn a_write_through_a_view_after_a_dropout_keeps_its_chain() {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", true);
        let x = b.tensor("x", false);
        let d = b.call(OpKind::Dropout, x, vec![f(0.5)]);
        let row = b.call(OpKind::Select, a, vec![i(0), i(0)]);
        b.call(OpKind::AddInplace, row, vec![t(d)]);
        let g = b.finish(vec![d], ReturnKind::Single);
        let groups = InputGroups { group_of: vec![Some(0), Some(1)], single: vec![true, true], object_of: vec![] };
        let fg = functionalize(&g, &groups);
        let jg = create_joint(&fg, &g, &[true, true]).unwrap();
        let select = vec![ChainStep::View { op: OpKind::Select, args: vec![i(0), i(0)] }];
        let chains: Vec<&Vec<ChainStep>> = jg
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Mutate { chain, .. } => Some(chain),
                _ => None,
            })
            .collect();
        assert_eq!(chains, vec![&select]);
        assert!(jg.nodes.iter().any(|n| matches!(n.op, Op::Prim(Prim::DropoutMask))));
    }

    /// Functionalized RNG: dropout's generator state is taken in the
    /// forward and saved; the mask, a pure function of it, is recomputed
    /// in the backward instead of saved.
    #[test]
    fn the_backward_recomputes_dropouts_mask_from_the_saved_state() {
        let mut b = GraphBuilder::new("f");
        let x = b.tensor("x", false);
        let h = b.call(OpKind::Tanh, x, vec![]);
        let d = b.call(OpKind::Dropout, h, vec![f(0.5)]);
        let s = b.call(OpKind::Sum, d, vec![]);
        let g = b.finish(vec![s], ReturnKind::Single);
        let groups = InputGroups { group_of: vec![Some(0)], single: vec![true], object_of: vec![] };
        let fg = functionalize(&g, &groups);
        let jg = create_joint(&fg, &g, &[true]).unwrap();
        let p = crate::transform::partition::partition(&jg).unwrap();
        let def = |v: ValueId| jg.nodes.iter().find(|n| n.out == Some(v)).map(|n| n.op.clone());
        let saved: Vec<Option<Op>> = p.saved.iter().map(|&v| def(v)).collect();
        assert!(saved.contains(&Some(Op::Prim(Prim::RngTake))), "{saved:?}");
        assert!(!saved.contains(&Some(Op::Prim(Prim::DropoutMask))), "{saved:?}");
        let take = |sub: &[Node], prim: Prim| sub.iter().filter(|n| n.op == Op::Prim(prim.clone())).count();
        assert_eq!((take(&p.forward.nodes, Prim::RngTake), take(&p.forward.nodes, Prim::DropoutMask)), (1, 1));
        assert_eq!((take(&p.backward.nodes, Prim::RngTake), take(&p.backward.nodes, Prim::DropoutMask)), (0, 1));
    }
}
