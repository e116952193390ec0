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
use aot_ir::transform::FunctionalGraph;
use aot_ir::{Arg as IrArg, Graph, Node, Op, ScalarValue, ValueId};

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
    let tensor_arg = |n: &Node, i: usize| {
        n.args.get(i).and_then(IrArg::as_tensor).ok_or_else(|| internal(format!("argument {i} of {} is not a tensor", n.value())))
    };
    for (i, n) in fg.nodes.iter().enumerate() {
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        let out = n.value();
        let src_node = || fg.src_node.get(out.index()).copied().flatten();
        let t = match &n.op {
            Op::Primal(group) => bases.get(*group).ok_or_else(|| internal(format!("no base for group {group}")))?,
            Op::Cow => {
                let t = get(&env, tensor_arg(n, 0)?)?;
                match super::fast::cow(t) {
                    Some(copy) => copy,
                    None => t.storage_as_1d().copy()?.alias_with_layout(t.layout()),
                }
            }
            Op::Regen(chain) => replay(get(&env, tensor_arg(n, 0)?)?, chain, args, scalars)?,
            Op::Dsl { op, check_alias } => {
                let r = match super::fast::binary(*op, &n.args, &env) {
                    Some(r) => r,
                    None => exec_node(*op, &n.args, env.as_slice(), scalars).map_err(|e| blamed(e, g, src_node()))?,
                };
                if let Some(assumed) = check_alias {
                    let recv = get(&env, n.receiver().unwrap_or(ValueId(u32::MAX)))?;
                    if r.shares_storage_with(recv) != *assumed {
                        return Ok(None);
                    }
                }
                r
            }
            // In place on the view of the root version it consumes
            // (`args[1]`); the root is the new version.
            Op::Mutate { op, .. } => {
                let op_args = n.args.get(1..).unwrap_or(&[]);
                if super::fast::binary(*op, op_args, &env).is_none() {
                    exec_node(*op, op_args, env.as_slice(), scalars).map_err(|e| blamed(e, g, src_node()))?;
                }
                get(&env, tensor_arg(n, 0)?)?.clone()
            }
            Op::Tangent(_) | Op::Prim(_) => return Err(internal(format!("`{}` in a functional graph", n.op.name()))),
        };
        *env.get_mut(out.index()).ok_or_else(|| internal(format!("value {out} out of range")))? = Some(t);
    }
    Ok(Some(env))
}

fn blamed(e: AotError, g: &Graph, src_node: Option<usize>) -> AotError {
    let arg = src_node.and_then(|k| g.nodes.get(k)).and_then(|n| blame(g, n));
    e.in_function(&g.name, arg)
}

pub(crate) fn get(env: &Env, v: ValueId) -> Result<&Tensor> {
    env.get(v.index())
        .and_then(Option::as_ref)
        .ok_or_else(|| AotError::Internal { op: "compiled call", msg: format!("value {v} used before it was computed") })
}
