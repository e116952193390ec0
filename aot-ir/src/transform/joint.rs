//! The joint forward+backward graph (PyTorch's `create_joint` over
//! `fn_prepped_for_autograd`), built as a compile pass over the functional
//! graph.
//!
//! One graph maps (primals, tangents) to (forward outputs, input grads):
//!
//! - primals are the functional graph's input-group bases;
//! - the forward part is the functional graph itself, node for node, with
//!   the same value ids (so listings line up). A `Mutate` also records the
//!   view chain from its root to the region it writes, so it can run out of
//!   place: a backward rule may read a root version that a later mutation
//!   replaced, which the reinplacing functional executor would have
//!   overwritten;
//! - forward outputs are, in PyTorch's order, the final versions of mutated
//!   inputs, the user outputs that are graph values, and the bases of
//!   outputs that are views of intermediates. A tangent exists for each one
//!   that requires grad, except user outputs that alias an input or an
//!   intermediate (their gradient reaches the graph through the input or
//!   the base, as in PyTorch's tangent mask);
//! - the backward part walks the forward nodes in reverse and applies
//!   [`super::grad_rules`]; inputs that get no gradient get `None`.
//!
//! Differences from PyTorch worth knowing: a mutation under `no_grad` passes
//! its root's gradient straight through (eager leaves the history untouched,
//! so the tensor's older history receives later gradients). Dropout is
//! `x * mask` with its mask a forward value (drawn as eager draws it). A group of aliased arguments is one primal over their shared
//! storage; its gradient is the storage's, which the runtime hands to the
//! arguments' common base (PyTorch's synthetic base in training).

use super::functionalize::{ChainStep, FNode, FOutput, FunctionalGraph};
use super::grad_rules::{self, MutateSite, OutRef, Prim};
use super::joint_node::{cse_key, Emit};
pub use super::joint_node::{JNode, JOp};
use crate::graph::{Graph, Param, ReturnKind};
use crate::op::{OpClass, OpKind};
use crate::types::{Arg, ValueId};
use std::fmt::{self, Write};

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

#[derive(Clone, Debug, PartialEq)]
pub struct JOutput {
    pub kind: OutputKind,
    pub value: ValueId,
    /// The tangent it receives, if it is differentiable.
    pub tangent: Option<usize>,
}

/// The joint graph.
#[derive(Clone, Debug, PartialEq)]
pub struct JointGraph {
    pub name: String,
    /// The source's parameters (names for the listing, types).
    pub params: Vec<Param>,
    pub num_primals: usize,
    pub num_values: usize,
    /// Forward nodes first, then tangents, then the backward.
    pub nodes: Vec<JNode>,
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
    pub name: String,
    pub msg: String,
}

/// Builds the joint graph of `fg` (functionalized from `source`) for a call
/// whose tensor parameters require grad as `requires_grad` says (one entry
/// per source parameter; scalars `false`).
pub fn create_joint(fg: &FunctionalGraph, source: &Graph, requires_grad: &[bool]) -> Result<JointGraph, JointError> {
    let fw = forward(fg, requires_grad)?;
    let (fw_outputs, tangents) = forward_outputs(fg, &fw.rg);
    let mut num_values = fw.rg.len();
    let Forward { mut nodes, rg, diff, .. } = fw;
    let grads = backward(fg, &mut nodes, &mut num_values, &rg, &diff, &fw_outputs, &tangents)?;
    let input_grads = input_grads(fg, source, requires_grad, &grads);

    // Which nodes depend on a tangent.
    let mut bw = vec![false; num_values];
    for node in nodes.iter_mut() {
        node.is_backward = matches!(node.op, JOp::Tangent(_)) || node.uses().any(|v| bw[v.index()]);
        bw[node.out.index()] = node.is_backward;
    }
    let jg = JointGraph {
        name: fg.name.clone(),
        params: source.params.clone(),
        num_primals: fg.groups.single.len(),
        num_values,
        nodes,
        fw_outputs,
        tangents,
        input_grads,
        user_outputs: fg.outputs.clone(),
    };
    jg.verify()?;
    Ok(jg)
}

/// The forward part: its nodes, and per value the node defining it,
/// whether it requires grad, and whether it is differentiable.
struct Forward {
    nodes: Vec<JNode>,
    def: Vec<Option<usize>>,
    rg: Vec<bool>,
    diff: Vec<bool>,
}

/// The functional nodes, with requires-grad propagated.
fn forward(fg: &FunctionalGraph, requires_grad: &[bool]) -> Result<Forward, JointError> {
    let err = |msg: String| JointError { name: fg.name.clone(), msg };
    // Each dropout's mask is a forward value of its own, numbered after
    // the functional graph's values.
    let num_dropouts = fg.nodes.iter().filter(|f| matches!(f, FNode::Op { node, .. } if node.op == OpKind::Dropout)).count();
    let n = fg.num_values + num_dropouts;
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
    let mut f = Forward { nodes: Vec::with_capacity(fg.nodes.len() * 3), def: vec![None; n], rg: vec![false; n], diff: vec![false; n] };
    for fnode in &fg.nodes {
        let rg = &f.rg;
        let (op, args, out, r, d) = match fnode {
            FNode::Base { group, out } => (JOp::Primal(*group), vec![], *out, group_rg.get(*group).copied().unwrap_or(false), false),
            FNode::Cow { src, out } => (JOp::Cow, vec![Arg::Tensor(*src)], *out, rg[src.index()], true),
            FNode::Regen { root, chain, out } => (JOp::Regen(chain.clone()), vec![Arg::Tensor(*root)], *out, rg[root.index()], true),
            FNode::Op { node, src_node, .. } if node.op == OpKind::Dropout => {
                // Dropout is `x * mask` with the mask drawn as a value of its
                // own (PyTorch's `native_dropout`): the backward multiplies
                // by the same mask.
                let out = node.out.ok_or_else(|| err(format!("op node {src_node} has no output")))?;
                let mask = ValueId(next_mask as u32);
                next_mask += 1;
                let x = node.args.first().cloned().ok_or_else(|| err(format!("dropout {src_node} has no input")))?;
                let p = node.args.get(1).cloned().ok_or_else(|| err(format!("dropout {src_node} has no probability")))?;
                let r = x.as_tensor().is_some_and(|v| rg[v.index()]);
                f.def[mask.index()] = Some(f.nodes.len());
                f.nodes.push(JNode { op: JOp::Prim(Prim::DropoutMask), args: vec![x.clone(), p], out: mask, is_backward: false });
                (JOp::Op { op: OpKind::Mul, src_node: Some(*src_node), check_alias: None }, vec![x, Arg::Tensor(mask)], out, r, true)
            }
            FNode::Op { node, src_node, check_alias } => {
                let out = node.out.ok_or_else(|| err(format!("op node {src_node} has no output")))?;
                let d = node.is_differentiable();
                let r = d && differentiable_tensor_args(node.op, &node.args).any(|(_, v)| rg[v.index()]);
                (JOp::Op { op: node.op, src_node: Some(*src_node), check_alias: *check_alias }, node.args.clone(), out, r, d)
            }
            FNode::Mutate { node, src_node, root, out } => {
                let target = node.receiver().ok_or_else(|| err(format!("mutation {src_node} has no target")))?;
                let chain = chain_to(fg, &f.def, target, *root)
                    .ok_or_else(|| err(format!("mutation {src_node}: its target {target} is not a view of {root}")))?;
                let d = !node.no_grad;
                let r = rg[root.index()] || (d && differentiable_tensor_args(node.op, &node.args).skip(1).any(|(_, v)| rg[v.index()]));
                let mut args = vec![Arg::Tensor(*root)];
                args.extend(node.args.iter().cloned());
                (JOp::Mutate { op: node.op, chain, src_node: *src_node }, args, *out, r, d)
            }
        };
        if out.index() >= n || f.def[out.index()].is_some() {
            return Err(err(format!("value {out} is out of range or defined twice")));
        }
        if let Some(bad) = args.iter().filter_map(Arg::as_tensor).find(|v| f.def.get(v.index()).is_none_or(Option::is_none)) {
            return Err(err(format!("value {bad} is used before it is defined")));
        }
        f.def[out.index()] = Some(f.nodes.len());
        f.rg[out.index()] = r;
        f.diff[out.index()] = d;
        f.nodes.push(JNode { op, args, out, is_backward: false });
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
    nodes: &mut Vec<JNode>,
    num_values: &mut usize,
    rg: &[bool],
    diff: &[bool],
    fw_outputs: &[JOutput],
    tangents: &[usize],
) -> Result<Vec<Option<ValueId>>, JointError> {
    let num_fw_nodes = nodes.len();
    let mut grads: Vec<Option<ValueId>> = vec![None; *num_values];
    // Forward values are candidates for reuse by the rules.
    let seen = nodes.iter().filter_map(|nd| cse_key(&nd.op, &nd.args).map(|k| (k, nd.out))).collect();
    let mut e = Emit { nodes, num_values, seen };
    for (ti, &oi) in tangents.iter().enumerate() {
        let tv = e.push(JOp::Tangent(ti), vec![]);
        accumulate(&mut e, &mut grads, fw_outputs[oi].value, tv);
    }
    for k in (0..num_fw_nodes).rev() {
        let node = e.nodes[k].clone();
        let Some(g) = grads[node.out.index()] else { continue };
        if rg[node.out.index()] {
            node_vjp(&mut e, &node, g, rg, diff, &mut grads).map_err(|msg| JointError { name: fg.name.clone(), msg })?;
        }
    }
    Ok(grads)
}

/// Applies the rule of forward node `node`, whose gradient is `g`, and
/// accumulates its arguments' gradients.
fn node_vjp(e: &mut Emit, node: &JNode, g: ValueId, rg: &[bool], diff: &[bool], grads: &mut [Option<ValueId>]) -> Result<(), String> {
    let wants = |a: &Arg| a.as_tensor().is_some_and(|v| rg[v.index()]);
    match &node.op {
        JOp::Primal(_) | JOp::Tangent(_) | JOp::Prim(_) => {}
        JOp::Cow => {
            if let Some(src) = node.args[0].as_tensor() {
                accumulate(e, grads, src, g);
            }
        }
        JOp::Regen(chain) => {
            if let Some(root) = node.args[0].as_tensor().filter(|r| rg[r.index()]) {
                let gr = grad_rules::regen_vjp(e, root, chain, g)?;
                accumulate(e, grads, root, gr);
            }
        }
        JOp::Op { op, src_node, .. } => {
            if !diff[node.out.index()] {
                return Ok(());
            }
            let dargs = op.differentiable_args();
            let needs: Vec<bool> = node.args.iter().enumerate().map(|(i, a)| dargs.contains(&i) && wants(a)).collect();
            let gs = grad_rules::op_vjp(e, *op, &node.args, &OutRef::Value(node.out), g, &needs)
                .map_err(|m| format!("{m} (source node {})", src_node.unwrap_or(usize::MAX)))?;
            for (a, gi) in node.args.iter().zip(gs) {
                if let (Some(v), Some(gi)) = (a.as_tensor(), gi) {
                    accumulate(e, grads, v, gi);
                }
            }
        }
        JOp::Mutate { op, chain, src_node } => {
            let root = node.args[0].as_tensor().unwrap_or(ValueId(u32::MAX));
            if !diff[node.out.index()] {
                // under no_grad the history is untouched: straight through
                if rg[root.index()] {
                    accumulate(e, grads, root, g);
                }
                return Ok(());
            }
            let args = &node.args[1..];
            let dargs = op.differentiable_args();
            let mut needs = vec![rg[root.index()]];
            needs.extend(args.iter().enumerate().skip(1).map(|(i, a)| dargs.contains(&i) && wants(a)));
            let site = MutateSite { op: *op, root, out: node.out, chain, args };
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
        if let FNode::Base { group, out } = fnode {
            if let Some(slot) = base_of_group.get_mut(*group) {
                *slot = Some(*out);
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

fn param_name(g: &Graph, pi: usize) -> &str {
    g.params.get(pi).map_or("?", |p| p.name.as_str())
}

/// The tensor arguments gradients flow into, with their positions.
fn differentiable_tensor_args(op: OpKind, args: &[Arg]) -> impl Iterator<Item = (usize, ValueId)> + '_ {
    let d = op.differentiable_args();
    args.iter().enumerate().filter(move |(i, _)| d.contains(i)).filter_map(|(i, a)| a.as_tensor().map(|v| (i, v)))
}

fn accumulate(e: &mut Emit, grads: &mut [Option<ValueId>], v: ValueId, g: ValueId) {
    let Some(slot) = grads.get_mut(v.index()) else { return };
    *slot = Some(match *slot {
        Some(old) => e.push(JOp::Op { op: OpKind::Add, src_node: None, check_alias: None }, vec![Arg::Tensor(old), Arg::Tensor(g)]),
        None => g,
    });
}

/// The view chain from root version `root` to `v`, read off the
/// functional nodes that define `v` (regenerations and view ops).
fn chain_to(fg: &FunctionalGraph, def: &[Option<usize>], v: ValueId, root: ValueId) -> Option<Vec<ChainStep>> {
    if v == root {
        return Some(Vec::new());
    }
    match fg.nodes.get((*def.get(v.index())?)?)? {
        FNode::Regen { root: r, chain, .. } if *r == root => Some(chain.clone()),
        FNode::Op { node, .. } if node.op.class() == OpClass::View || matches!(node.op, OpKind::Reshape | OpKind::Contiguous) => {
            let base = chain_to(fg, def, node.receiver()?, root)?;
            let step = ChainStep::View { op: node.op, args: node.args[1..].to_vec() };
            Some(match node.op {
                OpKind::AsStrided => vec![step],
                OpKind::Contiguous | OpKind::Detach => base,
                _ => base.into_iter().chain([step]).collect(),
            })
        }
        _ => None,
    }
}

impl JointGraph {
    fn err(&self, msg: String) -> JointError {
        JointError { name: self.name.clone(), msg }
    }

    /// The checker run after the pass: SSA (each value defined once, before
    /// its uses), every output and gradient defined, tangents numbered in
    /// order, and no forward output depending on a tangent.
    pub fn verify(&self) -> Result<(), JointError> {
        let mut defined = vec![false; self.num_values];
        let mut bw = vec![false; self.num_values];
        let mut next_tangent = 0;
        for (i, node) in self.nodes.iter().enumerate() {
            for u in node.uses() {
                if !defined.get(u.index()).copied().unwrap_or(false) {
                    return Err(self.err(format!("node {i}: {u} is used before it is defined")));
                }
            }
            match &node.op {
                JOp::Tangent(t) => {
                    if *t != next_tangent {
                        return Err(self.err(format!("node {i}: tangent {t} out of order")));
                    }
                    next_tangent += 1;
                }
                JOp::Primal(g) if *g >= self.num_primals => return Err(self.err(format!("node {i}: no primal {g}"))),
                JOp::Mutate { op, .. } if !op.is_inplace() => {
                    return Err(self.err(format!("node {i}: `{}` is not an in-place op", op.name())));
                }
                JOp::Op { op, .. } if op.is_inplace() => return Err(self.err(format!("node {i}: `{}` is in place", op.name()))),
                _ => {}
            }
            let is_bw = matches!(node.op, JOp::Tangent(_)) || node.uses().any(|v| bw[v.index()]);
            if is_bw != node.is_backward {
                return Err(self.err(format!("node {i}: wrong backward flag")));
            }
            match defined.get_mut(node.out.index()) {
                Some(d) if !*d => *d = true,
                _ => return Err(self.err(format!("node {i}: {} is out of range or defined twice", node.out))),
            }
            bw[node.out.index()] = is_bw;
        }
        if next_tangent != self.tangents.len() {
            return Err(self.err(format!("{} tangent nodes for {} tangents", next_tangent, self.tangents.len())));
        }
        for o in &self.fw_outputs {
            if !defined.get(o.value.index()).copied().unwrap_or(false) || bw[o.value.index()] {
                return Err(self.err(format!("forward output {} is undefined or depends on a tangent", o.value)));
            }
        }
        for (ti, &oi) in self.tangents.iter().enumerate() {
            if self.fw_outputs.get(oi).and_then(|o| o.tangent) != Some(ti) {
                return Err(self.err(format!("tangent {ti} does not match forward output {oi}")));
            }
        }
        if let Some(g) = self.input_grads.iter().flatten().find(|g| !defined.get(g.index()).copied().unwrap_or(false)) {
            return Err(self.err(format!("gradient {g} is undefined")));
        }
        Ok(())
    }

    /// A graph holding only the source's parameters, to name scalars.
    pub(crate) fn names(&self) -> Graph {
        Graph {
            name: self.name.clone(),
            params: self.params.clone(),
            values: vec![],
            nodes: vec![],
            outputs: vec![],
            ret: ReturnKind::Unit,
        }
    }

    /// The stable listing.
    pub fn listing(&self) -> String {
        let names = self.names();
        let mut s = String::new();
        let _ = writeln!(s, "joint {} {{", self.name);
        for node in &self.nodes {
            let _ = writeln!(s, "    {}", node_text(&names, node));
        }
        let outs: Vec<String> = self
            .fw_outputs
            .iter()
            .map(|o| {
                let kind = match o.kind {
                    OutputKind::MutatedInput(g) => format!("mutated(group {g})"),
                    OutputKind::MetadataMutation(p) => format!("metadata({})", param_name(&names, p)),
                    OutputKind::User(i) => format!("out {i}"),
                    OutputKind::IntermediateBase => "base".into(),
                };
                match o.tangent {
                    Some(t) => format!("{kind}: {} ~ tangent {t}", o.value),
                    None => format!("{kind}: {}", o.value),
                }
            })
            .collect();
        let _ = writeln!(s, "    forward ({})", outs.join(", "));
        let grads: Vec<String> = self
            .input_grads
            .iter()
            .enumerate()
            .filter(|(p, _)| self.params[*p].ty.is_tensor())
            .map(|(p, g)| format!("{}: {}", param_name(&names, p), g.map_or("None".to_string(), |v| v.to_string())))
            .collect();
        let _ = writeln!(s, "    grads ({})", grads.join(", "));
        s.push('}');
        s
    }
}

impl fmt::Display for JointGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.listing())
    }
}

/// One node as a line of the listing; `*` marks nodes that need a tangent.
pub(crate) fn node_text(names: &Graph, node: &JNode) -> String {
    let args: Vec<String> = node.args.iter().map(|a| names.arg_text(a)).collect();
    let chain_text = |c: &[ChainStep]| {
        let steps: Vec<String> = c
            .iter()
            .map(|st| match st {
                ChainStep::ArgGeometry(p) => format!("arg_geometry({})", param_name(names, *p)),
                ChainStep::View { op, args } => {
                    let a: Vec<String> = args.iter().map(|a| names.arg_text(a)).collect();
                    format!("{}({})", op.name(), a.join(", "))
                }
            })
            .collect();
        format!("[{}]", steps.join(", "))
    };
    let rhs = match &node.op {
        JOp::Primal(g) => format!("primal(group {g})"),
        JOp::Tangent(t) => format!("tangent({t})"),
        JOp::Cow => format!("copy_storage({})", args.join(", ")),
        JOp::Regen(c) => format!("regen({}, {})", args.join(", "), chain_text(c)),
        JOp::Op { op, .. } => format!("{}({})", op.name(), args.join(", ")),
        JOp::Mutate { op, chain, .. } => {
            format!("scatter({}, {}, {}({}))", args[0], chain_text(chain), op.name(), args[1..].join(", "))
        }
        JOp::Prim(Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c)) => {
            format!("{}({}, {})", prim_name(node), args.join(", "), chain_text(c))
        }
        JOp::Prim(p) => format!("{p}({})", args.join(", ")),
    };
    let mark = if node.is_backward { "*" } else { "" };
    format!("{}{mark} = {rhs}", node.out)
}

fn prim_name(node: &JNode) -> &'static str {
    match &node.op {
        JOp::Prim(p) => p.name(),
        _ => "",
    }
}
