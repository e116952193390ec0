//! Runs a [`FunctionalGraph`] with the eager kernels.
//!
//! This is the CPU backend's plan for now: one eager op per node (through
//! the dispatcher, `dispatch.rs`), or a direct kernel (`fast.rs`) where one
//! computes the same. Nothing
//! here writes a caller's tensor: input groups are read through their bases
//! and copied (`Cow`) before their first write, so an error at any node
//! leaves every input as it was. The epilogue
//! ([`crate::wrappers::epilogue`]) applies the effects afterwards.
//!
//! `Mutate` runs in place on the root version it consumes; the pass
//! guarantees no later node reads that version (see
//! `aot_ir::transform::functionalize`).

use super::dispatch::{exec_node, replay};
use super::interp::blame;
use crate::arg::{Arg, Bases};
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use aot_ir::transform::{FNode, FunctionalGraph};
use aot_ir::{Graph, ScalarValue, ValueId};

/// The values of a finished run, indexed by functional value.
pub(crate) use super::values::Env;

/// Executes `fg`, but for the nodes `skip` marks (writes deferred to the
/// epilogue, `deferred.rs`). `Ok(None)`: a `reshape`/`contiguous` did not alias as the
/// pass assumed; nothing was written, and the caller must take the
/// reference path.
pub(crate) fn execute(
    fg: &FunctionalGraph,
    g: &Graph,
    args: &[Arg],
    bases: &Bases,
    scalars: &[Option<ScalarValue>],
    skip: &[bool],
) -> Result<Option<Env>> {
    let mut env = Env::new(fg.num_values);
    let internal = |what: String| AotError::Internal { op: "compiled call", msg: format!("`{}`: {what}", g.name) };
    for (i, n) in fg.nodes.iter().enumerate() {
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        let (out, t) = match n {
            FNode::Base { group, out } => (*out, bases.get(*group).ok_or_else(|| internal(format!("no base for group {group}")))?),
            FNode::Cow { src, out } => {
                let t = get(&env, *src)?;
                match super::fast::cow(t) {
                    Some(copy) => (*out, copy),
                    None => (*out, t.storage_as_1d().copy()?.alias_with_layout(t.layout())),
                }
            }
            FNode::Regen { root, chain, out } => (*out, replay(get(&env, *root)?, chain, args, scalars)?),
            FNode::Op { node, src_node, check_alias } => {
                let r = match super::fast::binary(node, &env) {
                    Some(r) => r,
                    None => exec_node(node.op, &node.args, env.as_slice(), scalars).map_err(|e| blamed(e, g, *src_node))?,
                };
                if let Some(assumed) = check_alias {
                    let recv = get(&env, node.receiver().unwrap_or(ValueId(u32::MAX)))?;
                    if r.shares_storage_with(recv) != *assumed {
                        return Ok(None);
                    }
                }
                (node.out.unwrap_or(ValueId(u32::MAX)), r)
            }
            FNode::Mutate { node, src_node, root, out } => {
                if super::fast::binary(node, &env).is_none() {
                    exec_node(node.op, &node.args, env.as_slice(), scalars).map_err(|e| blamed(e, g, *src_node))?;
                }
                (*out, get(&env, *root)?.clone())
            }
        };
        *env.get_mut(out.index()).ok_or_else(|| internal(format!("value {out} out of range")))? = Some(t);
    }
    Ok(Some(env))
}

fn blamed(e: AotError, g: &Graph, src_node: usize) -> AotError {
    let arg = g.nodes.get(src_node).and_then(|n| blame(g, n));
    e.in_function(&g.name, arg)
}

pub(crate) fn get(env: &Env, v: ValueId) -> Result<&Tensor> {
    env.get(v.index())
        .and_then(Option::as_ref)
        .ok_or_else(|| AotError::Internal { op: "compiled call", msg: format!("value {v} used before it was computed") })
}
