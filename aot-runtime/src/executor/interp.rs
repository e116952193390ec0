//! The eager reference: runs a graph op by op on real eager tensors.
//!
//! Parameters are bound to the very argument tensors (handle clones), so
//! in-place ops write the caller's tensors, metadata mutations change the
//! caller's tensor objects, views alias for real, and an output that is a
//! parameter is returned as that same tensor. `no_grad` nodes run under the
//! runtime's `NoGradGuard`. This is the semantics compiled execution is
//! tested against. Each op runs through the one dispatcher
//! ([`super::dispatch`]).

use super::dispatch::exec_node;
use crate::arg::{scalar_values, Arg};
use crate::autograd::NoGradGuard;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use aot_ir::{Graph, Node};

/// Runs `g` on `args` and returns its outputs.
pub(crate) fn run(g: &Graph, args: &[Arg]) -> Result<Vec<Tensor>> {
    run_recording(g, args, &mut Vec::new())
}

/// [`run`], recording per node whether a `reshape`/`contiguous` result
/// aliased its receiver (`None` for other nodes).
pub(crate) fn run_recording(g: &Graph, args: &[Arg], outcomes: &mut Vec<Option<bool>>) -> Result<Vec<Tensor>> {
    use aot_ir::op::AliasEffect;
    outcomes.clear();
    let scalars = scalar_values(g, args)?;
    let mut env: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (p, a) in g.params.iter().zip(args) {
        if let (Some(v), Some(t)) = (p.value, a.tensor()) {
            env[v.index()] = Some(t.clone());
        }
    }
    for node in &g.nodes {
        let op =
            node.kind().ok_or_else(|| AotError::Internal { op: "interpreter", msg: format!("`{}` in a source graph", node.op.name()) })?;
        let result = {
            let _no_grad = node.no_grad.then(NoGradGuard::new);
            exec_node(op, &node.args, env.as_slice(), &scalars)
        };
        let t = result.map_err(|e| e.in_function(&g.name, blame(g, node)))?;
        let maybe = matches!(op.alias_effect(), AliasEffect::MaybeView | AliasEffect::MaybeSame);
        let recv = node.receiver().and_then(|r| env.get(r.index()).cloned().flatten());
        outcomes.push(recv.filter(|_| maybe).map(|r| t.shares_storage_with(&r)));
        if let Some(out) = node.out {
            env[out.index()] = Some(t);
        }
    }
    g.outputs
        .iter()
        .map(|v| {
            env.get(v.index())
                .cloned()
                .flatten()
                .ok_or_else(|| AotError::Internal { op: "interpreter", msg: format!("output {v} of `{}` was never computed", g.name) })
        })
        .collect()
}

/// The argument an error at `node` concerns: the first parameter among its
/// tensor operands (the receiver first).
pub(crate) fn blame<'g>(g: &'g Graph, node: &Node) -> Option<&'g str> {
    node.tensor_args().find_map(|v| g.param_of(v)).map(|p| g.params[p].name.as_str())
}
