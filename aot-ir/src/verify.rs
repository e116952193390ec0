//! The one verifier: the structural invariants of every stage, from one
//! per-stage spec ([`Stage`]).
//!
//! Every stage holds the same [`Node`]s; a stage admits its own primitives
//! ([`Stage::admits`]). All stages: every use comes after its definition,
//! and every node matches its primitive's arity and argument kinds (a DSL
//! op its signature in the op table, scalars of the right type). The
//! source admits in-place ops, which define no value; every later stage is
//! SSA: each node defines a fresh value, and no value is written after it
//! is defined. Each container adds its own checks: here the source's
//! (parameters, return kind, calls) and a kernel's body; in
//! `transform::checks`, beside the passes that make them, the pass
//! results' (one primal per input group; tangents in order and no forward
//! output depending on one; the partitions' inputs and outputs).
//!
//! It runs after every pass (the checks are linear, and the later stages
//! are built once per guard key). The macro's lowering in debug builds
//! ([`checked`]) and `CompiledFn::new` check the source graph; always, the
//! runtime checks the functional graph it builds, `create_joint` the joint
//! graph (and its common subexpressions), `partition` both partitions. A
//! pass that breaks the graph fails at the pass, not three passes later in
//! a kernel.

use crate::graph::{is_elementwise_prim, Graph, Kernel, Node, Op, ValueDef};
use crate::op::{is_elementwise, is_reduction, AliasEffect, OpClass, OpKind, ParamKind};
use crate::types::{Arg, ParamType, ScalarExpr, ScalarTy, ValueId};
use std::fmt;
use thiserror::Error;

/// A broken invariant, with where it broke.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    /// A node breaks an invariant.
    #[error("node {node} (`{op}`): {msg}")]
    Node {
        /// The node's index.
        node: usize,
        /// The node's op, by its listing name.
        op: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// A parameter is malformed.
    #[error("parameter {param}: {msg}")]
    Param {
        /// The parameter's position.
        param: usize,
        /// What is wrong.
        msg: String,
    },
    /// A value's table entry disagrees with the graph.
    #[error("value {value}: {msg}")]
    Value {
        /// The value's id.
        value: u32,
        /// What is wrong.
        msg: String,
    },
    /// The graph's outputs are wrong (an undefined value, a count that
    /// disagrees with the return type): what is wrong.
    #[error("outputs: {0}")]
    Outputs(String),
    /// A graph past the source: which stage, which graph, what broke.
    #[error("{stage} graph `{graph}`: {msg}")]
    Stage {
        /// The stage the graph is checked as.
        stage: Stage,
        /// The graph's name.
        graph: String,
        /// What is wrong.
        msg: String,
    },
}

/// The stages of the IR. Each admits its own primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The program as written: DSL ops only, in place or not.
    Source,
    /// After functionalization: primals, copies of inputs, regenerated
    /// views, writes as new versions, DSL ops that compute or view.
    Functional,
    /// Forward and backward together: the functional primitives, tangents
    /// and the backward-only primitives.
    Joint,
    /// The forward partition: the joint's forward nodes (its primals are
    /// the graph's inputs) and the stand-ins of values saved for their
    /// metadata.
    Forward,
    /// The backward partition (saved values and tangents are its inputs):
    /// what the rules emit, and cheap forward nodes recomputed.
    Backward,
    /// A kernel's body: loads of its inputs, then elementwise DSL ops and
    /// at most one reduction.
    /// (The functional, joint, forward and backward stages admit kernels
    /// once scheduled.)
    Kernel,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Source => "source",
            Stage::Functional => "functional",
            Stage::Joint => "joint",
            Stage::Forward => "forward",
            Stage::Backward => "backward",
            Stage::Kernel => "kernel",
        })
    }
}

impl Stage {
    /// Whether a node of this stage may compute `op`.
    pub fn admits(self, op: &Op) -> bool {
        use Stage::*;
        match op {
            Op::Dsl { op, check_alias } => match self {
                Source => check_alias.is_none(),
                Kernel => check_alias.is_none() && (is_elementwise(*op) || is_reduction(*op)),
                _ => {
                    !op.is_inplace()
                        && (check_alias.is_none() || matches!(op.alias_effect(), AliasEffect::MaybeView | AliasEffect::MaybeSame))
                }
            },
            Op::Primal(_) => matches!(self, Functional | Joint),
            Op::Tangent(_) => self == Joint,
            Op::Cow | Op::Mutate { .. } => matches!(self, Functional | Joint | Forward),
            Op::Regen(_) => self != Source,
            Op::Prim(p) => matches!(self, Joint | Forward | Backward) || (self == Kernel && is_elementwise_prim(p)),
            Op::Load(_) => self == Kernel,
            Op::Kernel(_) => matches!(self, Functional | Joint | Forward | Backward),
            // A traced source's calls are checked by `verify` itself.
            Op::Call(_) => false,
        }
    }

    /// Checks `nodes` of this stage: admitted primitives, arities and
    /// argument kinds, every use after its definition, and past the source
    /// each node defining a fresh value below `defined.len()`. `defined`
    /// holds the values defined before the first node (the inputs) and is
    /// updated; `params` types the scalar parameters.
    pub fn check_nodes(self, nodes: &[Node], defined: &mut [bool], params: &[ParamType]) -> Result<(), (usize, String)> {
        for (i, node) in nodes.iter().enumerate() {
            let fail = |msg: String| (i, msg);
            if !self.admits(&node.op) {
                return Err(fail(format!("not admitted in a {self} graph")));
            }
            check_args(node, params).map_err(fail)?;
            if let Some(v) = node.tensor_args().find(|v| !defined.get(v.index()).copied().unwrap_or(false)) {
                return Err(fail(format!("uses {v} before it is defined")));
            }
            if self == Stage::Source {
                continue;
            }
            let out = node.out.ok_or_else(|| fail("defines no value".into()))?;
            match defined.get_mut(out.index()) {
                Some(d) if !*d => *d = true,
                Some(_) => return Err(fail(format!("{out} is defined twice"))),
                None => return Err(fail(format!("{out} is out of range"))),
            }
        }
        Ok(())
    }
}

/// The arity and argument kinds of one node's primitive.
fn check_args(node: &Node, params: &[ParamType]) -> Result<(), String> {
    let tensor_at = |i: usize| match node.args.get(i) {
        Some(Arg::Tensor(_)) => Ok(()),
        _ => Err(format!("argument {i} is not a tensor")),
    };
    let arity = |n: usize| {
        if node.args.len() == n {
            Ok(())
        } else {
            Err(format!("expected {n} arguments, found {}", node.args.len()))
        }
    };
    match &node.op {
        Op::Dsl { op, .. } => dsl_args(*op, &node.args, params),
        Op::Primal(_) | Op::Tangent(_) => arity(0),
        Op::Cow | Op::Regen(_) => arity(1).and_then(|_| tensor_at(0)),
        Op::Mutate { op, .. } => {
            if op.class() != OpClass::DataMutation {
                return Err(format!("`{}` does not write data", op.name()));
            }
            tensor_at(0)?;
            dsl_args(*op, &node.args[1..], params)
        }
        Op::Prim(p) => arity(p.arity()).and_then(|_| (0..p.num_tensors()).try_for_each(tensor_at)),
        Op::Load(_) => arity(0),
        Op::Kernel(k) => {
            arity(k.num_inputs())?;
            (0..node.args.len()).try_for_each(tensor_at)?;
            check_kernel(k, params)
        }
        Op::Call(_) => Ok(()),
    }
}

/// A kernel body: its loads first, numbered in order, then ops of the
/// kernel stage (at most one of them a reduction), SSA over the kernel's
/// values, and stored values that the body defines, each stored once (a
/// kernel with several has no reduction).
fn check_kernel(k: &Kernel, params: &[ParamType]) -> Result<(), String> {
    let n = k.num_inputs();
    for (i, node) in k.body.iter().enumerate() {
        let is_load = matches!(node.op, Op::Load(_));
        if is_load != (i < n) || (is_load && node.op != Op::Load(i)) || (is_load && node.out != Some(ValueId(i as u32))) {
            return Err(format!("kernel `{}`: body node {i}: loads must come first, in order", k.name));
        }
    }
    let reductions = k.body.iter().filter(|n| n.kind().is_some_and(is_reduction)).count();
    if reductions > 1 {
        return Err(format!("kernel `{}` holds {reductions} reductions; a kernel computes at most one", k.name));
    }
    // The prologue's values exist one block of a row at a time: past the
    // reduction only its inputs are read again.
    if let Some(r) = k.reduction() {
        let pro = k.prologue();
        let mut pro_value = vec![false; k.num_values];
        for (node, _) in k.body.iter().zip(&pro).skip(n).filter(|(_, &p)| p) {
            if let Some(x) = node.out.and_then(|o| pro_value.get_mut(o.index())) {
                *x = true;
            }
        }
        let late = k.body.iter().enumerate().skip(n).filter(|&(i, _)| i != r && !pro[i]);
        if let Some((i, v)) = late
            .flat_map(|(i, node)| node.tensor_args().map(move |v| (i, v)))
            .find(|(_, v)| pro_value.get(v.index()).copied().unwrap_or(false))
        {
            return Err(format!("kernel `{}`: body node {i} reads {v} of the reduction's prologue", k.name));
        }
    }
    if k.stage_values.len() != k.num_values {
        return Err(format!("kernel `{}` maps {} of its {} values to the stage", k.name, k.stage_values.len(), k.num_values));
    }
    let mut defined = vec![false; k.num_values];
    Stage::Kernel.check_nodes(&k.body, &mut defined, params).map_err(|(i, msg)| format!("kernel `{}`: body node {i}: {msg}", k.name))?;
    let outs: Vec<ValueId> = k.outs().collect();
    for (i, v) in outs.iter().enumerate() {
        if !defined.get(v.index()).copied().unwrap_or(false) {
            return Err(format!("kernel `{}` stores {v}, which its body does not define", k.name));
        }
        if outs[..i].contains(v) {
            return Err(format!("kernel `{}` stores {v} twice", k.name));
        }
    }
    if !k.extra_outs.is_empty() && k.reduction().is_some() {
        return Err(format!(
            "kernel `{}` stores {} values and holds a reduction; a multi-output kernel is elementwise",
            k.name,
            outs.len()
        ));
    }
    Ok(())
}

/// A DSL op's receiver and arguments against its signature.
fn dsl_args(op: OpKind, args: &[Arg], params: &[ParamType]) -> Result<(), String> {
    let sig = op.sig();
    if sig.is_static() {
        // the spread list (at least one tensor), then the other parameters
        let n = sig.list_len(args.len());
        if n == 0 {
            return Err(format!("expected a list of at least one tensor and {} more arguments", sig.params.len() - 1));
        }
        if let Some(k) = args[..n].iter().position(|a| !matches!(a, Arg::Tensor(_))) {
            return Err(format!("argument {k}: expected a tensor of the list"));
        }
        for (k, (arg, kind)) in args[n..].iter().zip(&sig.params[1..]).enumerate() {
            check_arg(arg, *kind, params).map_err(|m| format!("argument {}: {m}", n + k))?;
        }
        return Ok(());
    }
    if args.len() != sig.params.len() + 1 {
        return Err(format!("expected {} arguments, found {}", sig.params.len() + 1, args.len()));
    }
    if !matches!(args[0], Arg::Tensor(_)) {
        return Err("the receiver is not a tensor".into());
    }
    for (k, (arg, kind)) in args[1..].iter().zip(sig.params).enumerate() {
        check_arg(arg, *kind, params).map_err(|m| format!("argument {}: {m}", k + 1))?;
    }
    Ok(())
}

/// Checks every invariant of a source graph.
///
/// - Each value is defined exactly once, by the parameter or node its
///   [`ValueDef`] names, and every use comes after its definition.
/// - Every node is a DSL op matching its signature: argument count and
///   kinds, an output exactly when the op is not in place, integer
///   arguments where the op wants integers.
/// - Scalar parameters are referenced only as scalars, tensors only as values.
/// - The outputs are defined values and match the return kind.
pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    let n_values = g.values.len();
    let mut defined = vec![false; n_values];
    let param_types = g.param_types();

    for (i, p) in g.params.iter().enumerate() {
        match (p.ty.is_tensor(), p.value) {
            (true, Some(v)) => {
                let info =
                    g.values.get(v.index()).ok_or_else(|| VerifyError::Param { param: i, msg: format!("value {v} does not exist") })?;
                if info.def != ValueDef::Param(i) {
                    return Err(VerifyError::Param { param: i, msg: format!("value {v} is not defined by this parameter") });
                }
                mark(&mut defined, v.0)?;
            }
            (false, None) => {}
            (true, None) => return Err(VerifyError::Param { param: i, msg: "tensor parameter without a value".into() }),
            (false, Some(_)) => return Err(VerifyError::Param { param: i, msg: "scalar parameter with a tensor value".into() }),
        }
    }

    for (n, node) in g.nodes.iter().enumerate() {
        let op = node.op.name();
        let err = |msg: String| VerifyError::Node { node: n, op, msg };
        if let Op::Call(site) = &node.op {
            check_call(g, n, node, site, &mut defined).map_err(err)?;
            continue;
        }
        let kind = node.kind().ok_or_else(|| err("not admitted in a source graph".into()))?;
        Stage::Source.check_nodes(std::slice::from_ref(node), &mut defined, &param_types).map_err(|(_, m)| err(m))?;
        match (kind.is_inplace(), node.out) {
            (true, None) => {}
            (false, Some(out)) => {
                let info = g.values.get(out.index()).ok_or_else(|| err(format!("output {out} does not exist")))?;
                if info.def != ValueDef::Node(n) {
                    return Err(err(format!("output {out} is not defined by this node")));
                }
                mark(&mut defined, out.0)?;
            }
            (true, Some(_)) => return Err(err("an in-place op must not define a value".into())),
            (false, None) => return Err(err("an op that is not in place must define a value".into())),
        }
    }

    if let Some(v) = defined.iter().position(|d| !d) {
        return Err(VerifyError::Value { value: v as u32, msg: "never defined".into() });
    }
    for v in &g.outputs {
        if v.index() >= n_values {
            return Err(VerifyError::Outputs(format!("{v} does not exist")));
        }
    }
    if g.outputs.len() != g.ret.arity() {
        return Err(VerifyError::Outputs(format!("{} outputs for a return type of {}", g.outputs.len(), g.ret.arity())));
    }
    Ok(())
}

/// A call of a traced source: its arguments defined before it, and the
/// values it binds defined by it.
fn check_call(g: &Graph, n: usize, node: &Node, site: &crate::graph::CallSite, defined: &mut [bool]) -> Result<(), String> {
    if let Some(v) = node.tensor_args().find(|v| !defined.get(v.index()).copied().unwrap_or(false)) {
        return Err(format!("uses {v} before it is defined"));
    }
    if node.out.is_some() || node.args.iter().any(|a| !matches!(a, Arg::Tensor(_) | Arg::Scalar(_))) {
        return Err("a call defines its results only, and takes tensors and scalars".into());
    }
    if let Some(body) = &site.body {
        // A loop: bounds, then one argument per body parameter after the
        // loop variable; one result per carried parameter.
        verify(&body.graph).map_err(|e| format!("its body is invalid: {e}"))?;
        let results = site.results.as_ref().map_or(0, Vec::len);
        if node.args.len() != body.graph.params.len() + 1
            || body.carried.len() != body.graph.outputs.len()
            || results != body.carried.len()
            || body.carried.iter().any(|&p| p == 0 || p >= body.graph.params.len())
        {
            return Err("a loop's arguments, body parameters and carried values do not match".into());
        }
    }
    for v in site.results.iter().flatten() {
        if g.values.get(v.index()).map(|i| i.def) != Some(ValueDef::Node(n)) {
            return Err(format!("result {v} is not defined by this call"));
        }
        mark(defined, v.0).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs [`verify`] in debug builds and passes the graph through. Every pass
/// ends with `checked(graph, "pass name")`.
pub fn checked(g: Graph, pass: &str) -> Result<Graph, VerifyError> {
    if cfg!(debug_assertions) {
        verify(&g).map_err(|e| match e {
            VerifyError::Node { node, op, msg } => VerifyError::Node { node, op, msg: format!("after {pass}: {msg}") },
            other => other,
        })?;
    }
    Ok(g)
}

fn mark(defined: &mut [bool], v: u32) -> Result<(), VerifyError> {
    match defined.get_mut(v as usize) {
        Some(d) if !*d => {
            *d = true;
            Ok(())
        }
        Some(_) => Err(VerifyError::Value { value: v, msg: "defined twice".into() }),
        None => Err(VerifyError::Value { value: v, msg: "out of range".into() }),
    }
}

fn check_arg(arg: &Arg, kind: ParamKind, params: &[ParamType]) -> Result<(), String> {
    let scalar = |s: &ScalarExpr, want: &[ScalarTy]| match s.ty(params) {
        Some(t) if want.contains(&t) => Ok(()),
        Some(t) => Err(format!("expected {}, found a {} scalar", kind.describe(), t.name())),
        None => Err("refers to a parameter that is not a scalar".to_string()),
    };
    match (kind, arg) {
        (ParamKind::Tensor, Arg::Tensor(_)) => Ok(()),
        (ParamKind::Operand, Arg::Tensor(_)) => Ok(()),
        (ParamKind::Operand | ParamKind::Float, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Float, ScalarTy::Int]),
        (ParamKind::Int, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Int]),
        (ParamKind::Bool, Arg::Scalar(s)) => scalar(s, &[ScalarTy::Bool]),
        (ParamKind::Ints, Arg::Ints(v)) => v.iter().try_for_each(|s| scalar(s, &[ScalarTy::Int])),
        (ParamKind::DType, Arg::DType(_)) => Ok(()),
        _ => Err(format!("expected {}", kind.describe())),
    }
}

#[cfg(test)]
mod tests;
