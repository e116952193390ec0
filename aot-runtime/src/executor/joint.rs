//! The joint stage (the training path): joint graphs and their forward and
//! backward partitions, run by the one interpreter ([`super::interp`]) in
//! its joint mode, grad mode off: the graph is its own autograd.
//!
//! [`backward`] reads only the saved values the forward returned and the
//! tangents; the caller checks the saved values' version counters first, so
//! a compiled backward refuses exactly when a value *it* saved was modified
//! in place (which values are saved is the partitioner's choice, see
//! `aot_ir::transform::partition`).

use super::interp::{get, run, Blame, Ctx, Inputs, Mode, Stop, Track};
use super::liveness::Liveness;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::NoGradGuard;
use crate::tensor::Tensor;
#[cfg(feature = "test-hooks")]
use aot_ir::transform::joint::JointGraph;
use aot_ir::transform::partition::{Partition, SubGraph};
use aot_ir::ScalarValue;

/// What the compiled forward did: ran, or found the call outside what the
/// plan covers before anything was written (a `reshape`/`contiguous` that
/// aliased otherwise than assumed, an `as_strided` reaching outside its
/// receiver); the caller then runs the eager reference.
#[derive(Debug)]
pub enum Outcome<T> {
    /// It ran: its result.
    Done(T),
    /// It stopped before writing anything: why.
    Fallback(&'static str),
}

impl<T> Outcome<T> {
    /// The result, with a fallback as an `Unsupported` error (for callers
    /// that have no other path, such as the backward).
    pub fn into_result(self) -> Result<T> {
        match self {
            Outcome::Done(t) => Ok(t),
            Outcome::Fallback(why) => Err(Stop::Fallback(why).into_error()),
        }
    }
}

fn outcome<T>(r: std::result::Result<T, Stop>) -> Result<Outcome<T>> {
    match r {
        Ok(t) => Ok(Outcome::Done(t)),
        Err(Stop::Fallback(why)) => Ok(Outcome::Fallback(why)),
        Err(Stop::Error(e)) => Err(e),
    }
}

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "joint graph", msg }
}

fn ctx<'a>(
    inputs: Inputs<'a>,
    scalars: &'a [Option<ScalarValue>],
    geometry: &'a [Option<Layout>],
    live: &'a Liveness,
) -> Ctx<'a, [Option<Layout>]> {
    Ctx { mode: Mode::JOINT, inputs, scalars, geometry, skip: &[], origin: &[], fresh: &[], live, blame: Blame::Nobody }
}

/// The liveness of a forward or backward graph (its outputs are read
/// after it), for a plan to keep (`TrainingPlan`).
pub(crate) fn liveness(sg: &SubGraph, num_values: usize) -> Liveness {
    Liveness::new(&sg.nodes, num_values, &sg.outputs)
}

/// Runs the whole joint graph: (forward outputs, per-parameter gradients).
#[cfg(feature = "test-hooks")]
pub fn run_joint(
    jg: &JointGraph,
    primals: &[Tensor],
    tangents: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<(Vec<Tensor>, Vec<Option<Tensor>>)> {
    let _no_grad = NoGradGuard::new();
    let mut env: Vec<Option<Tensor>> = vec![None; jg.num_values];
    let live_out: Vec<_> = jg.fw_outputs.iter().map(|o| o.value).chain(jg.input_grads.iter().flatten().copied()).collect();
    let live = Liveness::new(&jg.nodes, jg.num_values, &live_out);
    let cx = ctx(Inputs::Tensors { primals, tangents }, scalars, geometry, &live);
    run(&jg.nodes, &mut env, &cx, &mut Track::Nothing).map_err(Stop::into_error)?;
    let outs = jg.fw_outputs.iter().map(|o| get(&env, o.value).cloned()).collect::<Result<Vec<_>>>()?;
    let grads = jg.input_grads.iter().map(|g| g.map(|g| get(&env, g).cloned()).transpose()).collect::<Result<Vec<_>>>()?;
    Ok((outs, grads))
}

/// Runs a forward or backward graph on its inputs; returns its outputs.
#[cfg(feature = "test-hooks")]
pub fn run_subgraph(
    sg: &SubGraph,
    num_values: usize,
    inputs: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Outcome<Vec<Tensor>>> {
    outcome(subgraph(sg, num_values, inputs, &[], scalars, geometry, None))
}

/// `zero_inputs[i]`: input `i` is a stand-in zero (a tangent that never
/// arrived); see [`backward`]. `live`: the graph's liveness, from its
/// plan (computed here when there is none).
fn subgraph(
    sg: &SubGraph,
    num_values: usize,
    inputs: &[Tensor],
    zero_inputs: &[bool],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
    live: Option<&Liveness>,
) -> std::result::Result<Vec<Tensor>, Stop> {
    let _no_grad = NoGradGuard::new();
    if inputs.len() != sg.inputs.len() {
        return Err(internal(format!("{} inputs for a graph of {}", inputs.len(), sg.inputs.len())).into());
    }
    let mut env: Vec<Option<Tensor>> = vec![None; num_values];
    let mut zero = vec![false; num_values];
    for (i, (v, t)) in sg.inputs.iter().zip(inputs).enumerate() {
        *env.get_mut(v.index()).ok_or_else(|| internal(format!("input {v} out of range")))? = Some(t.clone());
        if zero_inputs.get(i).copied().unwrap_or(false) {
            if let Some(z) = zero.get_mut(v.index()) {
                *z = true;
            }
        }
    }
    // Only a backward with a missing tangent tracks zeros.
    let mut track = if zero_inputs.iter().any(|&z| z) { Track::Zeros(&mut zero) } else { Track::Nothing };
    let own;
    let live = match live {
        Some(l) => l,
        None => {
            own = liveness(sg, num_values);
            &own
        }
    };
    run(&sg.nodes, &mut env, &ctx(Inputs::Bound, scalars, geometry, live), &mut track)?;
    Ok(sg.outputs.iter().map(|v| get(&env, *v).cloned()).collect::<Result<Vec<_>>>()?)
}

/// The compiled forward: (forward outputs, saved values), or a fallback
/// (`forward` without a plan's liveness).
#[cfg(feature = "test-hooks")]
pub fn run_forward(
    p: &Partition,
    primals: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Outcome<(Vec<Tensor>, Vec<Tensor>)>> {
    forward(p, None, primals, scalars, geometry)
}

/// The compiled forward: (forward outputs, saved values), or a fallback.
/// `live`: the forward's liveness, from its plan (computed when `None`).
pub(crate) fn forward(
    p: &Partition,
    live: Option<&Liveness>,
    primals: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Outcome<(Vec<Tensor>, Vec<Tensor>)>> {
    Ok(match outcome(subgraph(&p.forward, p.num_values, primals, &[], scalars, geometry, live))? {
        Outcome::Done(mut outs) => {
            let saved = outs.split_off(p.num_fw_outputs);
            Outcome::Done((outs, saved))
        }
        Outcome::Fallback(why) => Outcome::Fallback(why),
    })
}

/// The compiled backward: per-parameter gradients (`backward` without a
/// plan's liveness).
#[cfg(feature = "test-hooks")]
pub fn run_backward(
    p: &Partition,
    saved: &[Tensor],
    tangents: &[Tensor],
    arrived: &[bool],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Vec<Option<Tensor>>> {
    backward(p, None, saved, tangents, arrived, scalars, geometry)
}

/// The compiled backward: per-parameter gradients. `live`: the backward's
/// liveness, from its plan (computed when `None`).
///
/// `arrived[i]`: tangent `i` is a real gradient. The others are zeros
/// standing in for outputs that received none, and every value computed
/// from them by a product is zero too: it is set to zero rather than
/// computed (the interpreter's zero tracking), so a non-finite forward
/// value on such a path (`0 * inf`) cannot reach a gradient, as it cannot
/// in eager, which never runs that path.
pub(crate) fn backward(
    p: &Partition,
    live: Option<&Liveness>,
    saved: &[Tensor],
    tangents: &[Tensor],
    arrived: &[bool],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Vec<Option<Tensor>>> {
    let inputs: Vec<Tensor> = saved.iter().chain(tangents).cloned().collect();
    let zero_inputs: Vec<bool> =
        saved.iter().map(|_| false).chain((0..tangents.len()).map(|i| !arrived.get(i).copied().unwrap_or(true))).collect();
    let outs = outcome(subgraph(&p.backward, p.num_values, &inputs, &zero_inputs, scalars, geometry, live))?.into_result()?;
    p.grad_slots.iter().map(|s| s.map(|i| outs.get(i).cloned().ok_or_else(|| internal(format!("no gradient {i}")))).transpose()).collect()
}
