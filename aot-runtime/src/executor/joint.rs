//! Runs joint graphs and their forward/backward partitions with the eager
//! kernels, grad mode off: the graph is its own autograd.
//!
//! Source ops go through the dispatcher's `exec` (no node is built to run
//! one), view chains through `dispatch::replay`. Of the backward-only primitives of `aot_ir`'s grad
//! rules, those that move gradients between views and roots (and dropout's
//! mask) are implemented here; the others are shared with eager backward
//! (`autograd::prims`). A `Mutate` runs out of place (on a copy of its
//! root): unlike the functional executor, a backward may still read the
//! version a mutation replaced.
//!
//! [`run_backward`] reads only the saved values the forward returned and the
//! tangents; the caller checks the saved values' version counters first, so
//! a compiled backward refuses exactly when a value *it* saved was modified
//! in place (which values are saved is the partitioner's choice, see
//! `aot_ir::transform::partition`).

use super::dispatch::{exec, exec_node, replay, Values};
use crate::autograd::prims::{eval_prim, scalar};
use crate::autograd::view_prims::eval_view_prim;
use crate::autograd::NoGradGuard;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;
use aot_ir::transform::grad_rules::Prim;
use aot_ir::transform::joint::JointGraph;
use aot_ir::transform::partition::{Partition, SubGraph};
use aot_ir::transform::ChainStep;
use aot_ir::{Arg as IrArg, Node, Op, ScalarValue, ValueId};
use std::borrow::Cow;

type Env = Vec<Option<Tensor>>;

/// What the compiled forward did: ran, or found the call outside what the
/// plan covers before anything was written (a `reshape`/`contiguous` that
/// aliased otherwise than assumed, an `as_strided` reaching outside its
/// receiver); the caller then runs the eager reference.
#[derive(Debug)]
pub enum Outcome<T> {
    Done(T),
    Fallback(&'static str),
}

impl<T> Outcome<T> {
    /// The result, with a fallback as an `Unsupported` error (for callers
    /// that have no other path, such as the backward).
    pub fn into_result(self) -> Result<T> {
        match self {
            Outcome::Done(t) => Ok(t),
            Outcome::Fallback(why) => Err(AotError::Unsupported { op: "compiled graph", msg: why.to_string() }),
        }
    }
}

/// Why a node did not produce its value: an error, or a fallback.
enum Stop {
    Error(AotError),
    Fallback(&'static str),
}

impl From<AotError> for Stop {
    fn from(e: AotError) -> Stop {
        Stop::Error(e)
    }
}

fn outcome<T>(r: std::result::Result<T, Stop>) -> Result<Outcome<T>> {
    match r {
        Ok(t) => Ok(Outcome::Done(t)),
        Err(Stop::Fallback(why)) => Ok(Outcome::Fallback(why)),
        Err(Stop::Error(e)) => Err(e),
    }
}

const RESHAPE_SURPRISE: &str = "a reshape/contiguous aliased otherwise than the compiled graph assumed";

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "joint graph", msg }
}

fn get(env: &[Option<Tensor>], v: ValueId) -> Result<&Tensor> {
    env.get(v.index()).and_then(Option::as_ref).ok_or_else(|| internal(format!("value {v} used before it was computed")))
}

fn set(env: &mut Env, v: ValueId, t: Tensor) -> Result<()> {
    *env.get_mut(v.index()).ok_or_else(|| internal(format!("value {v} out of range")))? = Some(t);
    Ok(())
}

/// Runs the whole joint graph: (forward outputs, per-parameter gradients).
pub fn run_joint(
    jg: &JointGraph,
    primals: &[Tensor],
    tangents: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<(Vec<Tensor>, Vec<Option<Tensor>>)> {
    let _no_grad = NoGradGuard::new();
    let mut env: Env = vec![None; jg.num_values];
    for node in &jg.nodes {
        let t = match node.op {
            Op::Primal(g) => primals.get(g).cloned().ok_or_else(|| internal(format!("no primal {g}")))?,
            Op::Tangent(i) => tangents.get(i).cloned().ok_or_else(|| internal(format!("no tangent {i}")))?,
            _ => outcome(run_node(node, &env, scalars, geometry))?.into_result()?,
        };
        set(&mut env, node.value(), t)?;
    }
    let outs = jg.fw_outputs.iter().map(|o| get(&env, o.value).cloned()).collect::<Result<Vec<_>>>()?;
    let grads = jg.input_grads.iter().map(|g| g.map(|g| get(&env, g).cloned()).transpose()).collect::<Result<Vec<_>>>()?;
    Ok((outs, grads))
}

/// Runs a forward or backward graph on its inputs; returns its outputs.
pub fn run_subgraph(
    sg: &SubGraph,
    num_values: usize,
    inputs: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Outcome<Vec<Tensor>>> {
    outcome(subgraph(sg, num_values, inputs, &[], scalars, geometry))
}

/// `zero_inputs[i]`: input `i` is a stand-in zero (a tangent that never
/// arrived); see [`zero_result`].
fn subgraph(
    sg: &SubGraph,
    num_values: usize,
    inputs: &[Tensor],
    zero_inputs: &[bool],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> std::result::Result<Vec<Tensor>, Stop> {
    let _no_grad = NoGradGuard::new();
    if inputs.len() != sg.inputs.len() {
        return Err(internal(format!("{} inputs for a graph of {}", inputs.len(), sg.inputs.len())).into());
    }
    let mut env: Env = vec![None; num_values];
    let mut zero = vec![false; num_values];
    for (i, (v, t)) in sg.inputs.iter().zip(inputs).enumerate() {
        set(&mut env, *v, t.clone())?;
        if zero_inputs.get(i).copied().unwrap_or(false) {
            if let Some(z) = zero.get_mut(v.index()) {
                *z = true;
            }
        }
    }
    // Only a backward with a missing tangent tracks zeros.
    let track = zero_inputs.iter().any(|&z| z);
    for node in &sg.nodes {
        let t = run_node(node, &env, scalars, geometry)?;
        let t = if track && zero_result(node, &zero) {
            if let Some(z) = zero.get_mut(node.value().index()) {
                *z = true;
            }
            // Zeros with the value's own layout over a storage of the same
            // length, so geometry read off it later still fits. (A
            // `zeros_like` is zero already.)
            match &node.op {
                Op::Dsl { op: aot_ir::OpKind::ZerosLike, .. } => t,
                _ => t.storage_as_1d().zeros_like()?.alias_with_layout(t.layout()),
            }
        } else {
            t
        };
        set(&mut env, node.value(), t)?;
    }
    Ok(sg.outputs.iter().map(|v| get(&env, *v).cloned()).collect::<Result<Vec<_>>>()?)
}

/// The compiled forward: (forward outputs, saved values), or a fallback.
pub fn run_forward(
    p: &Partition,
    primals: &[Tensor],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Outcome<(Vec<Tensor>, Vec<Tensor>)>> {
    Ok(match run_subgraph(&p.forward, p.num_values, primals, scalars, geometry)? {
        Outcome::Done(mut outs) => {
            let saved = outs.split_off(p.num_fw_outputs);
            Outcome::Done((outs, saved))
        }
        Outcome::Fallback(why) => Outcome::Fallback(why),
    })
}

/// The compiled backward: per-parameter gradients.
///
/// `arrived[i]`: tangent `i` is a real gradient. The others are zeros
/// standing in for outputs that received none, and every value computed
/// from them by a product is zero too: it is set to zero rather than
/// computed, so a non-finite forward value on such a path (`0 * inf`)
/// cannot reach a gradient, as it cannot in eager, which never runs that
/// path.
pub fn run_backward(
    p: &Partition,
    saved: &[Tensor],
    tangents: &[Tensor],
    arrived: &[bool],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> Result<Vec<Option<Tensor>>> {
    let inputs: Vec<Tensor> = saved.iter().chain(tangents).cloned().collect();
    let zero_inputs: Vec<bool> =
        saved.iter().map(|_| false).chain((0..tangents.len()).map(|i| !arrived.get(i).copied().unwrap_or(true))).collect();
    let outs = outcome(subgraph(&p.backward, p.num_values, &inputs, &zero_inputs, scalars, geometry))?.into_result()?;
    p.grad_slots.iter().map(|s| s.map(|i| outs.get(i).cloned().ok_or_else(|| internal(format!("no gradient {i}")))).transpose()).collect()
}

/// Whether `node`'s value is zero: `zeros_like`, a product (`mul`,
/// `matmul`, a quotient's numerator) with a zero operand, or a linear map
/// (a view, a sum, a cast, a gradient-shaping prim) of a zero.
fn zero_result(node: &Node, zero: &[bool]) -> bool {
    use aot_ir::transform::grad_rules::Prim;
    use aot_ir::OpKind as K;
    let z = |i: usize| matches!(node.args.get(i), Some(IrArg::Tensor(v)) if zero.get(v.index()).copied().unwrap_or(false));
    let tensors = || node.args.iter().enumerate().filter(|(_, a)| matches!(a, IrArg::Tensor(_))).map(|(i, _)| i);
    match &node.op {
        Op::Dsl { op, .. } => match op {
            K::ZerosLike => true,
            K::Mul | K::Matmul | K::Mm | K::Bmm => tensors().any(z),
            K::Add | K::Sub => tensors().all(z),
            K::Div | K::Neg | K::Sum | K::SumDim | K::MeanDim | K::Expand | K::Contiguous | K::Copy | K::Reshape => z(0),
            _ => op.class() == aot_ir::OpClass::View && z(0),
        },
        Op::Prim(p) => match p {
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike | Prim::KeepDims | Prim::MatmulGrad { .. } => z(0),
            Prim::ViewGrad(_) | Prim::ViewOf(_) => z(1),
            Prim::ViewScatter(_) => z(1) && z(2),
            _ => false,
        },
        _ => false,
    }
}

fn run_node(node: &Node, env: &Env, scalars: &[Option<ScalarValue>], geometry: &[Option<Layout>]) -> std::result::Result<Tensor, Stop> {
    let tensor = |i: usize| -> Result<&Tensor> {
        match node.args.get(i) {
            Some(IrArg::Tensor(v)) => get(env, *v),
            _ => Err(internal(format!("argument {i} of {} is not a tensor", node.value()))),
        }
    };
    match &node.op {
        Op::Primal(_) | Op::Tangent(_) => Err(internal(format!("input {} is not bound", node.value())).into()),
        Op::Cow => Ok(copy_storage(tensor(0)?)?),
        Op::Regen(chain) => replay_checked(tensor(0)?, chain, scalars, geometry),
        Op::Dsl { op, check_alias } => {
            let r = exec_node(*op, &node.args, env.as_slice(), scalars)?;
            if let Some(assumed) = check_alias {
                if r.shares_storage_with(tensor(0)?) != *assumed {
                    return Err(Stop::Fallback(RESHAPE_SURPRISE));
                }
            }
            // Eager sends an `as_strided` view's gradient to its receiver,
            // which keeps its own elements' only; the joint places views by
            // absolute geometry. The two agree while the view stays inside
            // its receiver, as it does in practice.
            if *op == aot_ir::OpKind::AsStrided && !within(&r.layout(), &tensor(0)?.layout()) {
                return Err(Stop::Fallback("an as_strided view reaching outside the tensor it was taken of"));
            }
            Ok(r)
        }
        Op::Mutate { op, chain } => {
            let orig = tensor(0)?;
            let root = copy_storage(orig)?;
            let view = replay_checked(&root, chain, scalars, geometry)?;
            // The op reads its operands from the environment and writes the
            // copy. An operand over the root's storage is read from the copy
            // with its own geometry, so eager's overlap checks see what eager
            // sees (and the values are the same).
            let operands = OnCopy { env, orig, root: &root };
            exec(*op, &view, node.args.get(2..).unwrap_or(&[]), &operands, scalars)?;
            Ok(root)
        }
        Op::Prim(p) => Ok(run_prim(p, node, env, scalars, geometry)?),
    }
}

/// The environment as a `Mutate`'s operands see it: a tensor over the
/// original root's storage is read from the root's copy, with its own
/// geometry.
struct OnCopy<'a> {
    env: &'a [Option<Tensor>],
    orig: &'a Tensor,
    root: &'a Tensor,
}

impl Values for OnCopy<'_> {
    fn tensor(&self, v: ValueId) -> Result<Cow<'_, Tensor>> {
        let t = get(self.env, v)?;
        Ok(if t.shares_storage_with(self.orig) { Cow::Owned(self.root.alias_with_layout(t.layout())) } else { Cow::Borrowed(t) })
    }
}

/// A chain replayed on `root`; the chain is a view by construction, so a
/// `reshape`/`contiguous` in it that copied means the plan's assumption
/// failed (the caller falls back to the eager reference).
fn replay_checked(
    root: &Tensor,
    chain: &[ChainStep],
    scalars: &[Option<ScalarValue>],
    geometry: &[Option<Layout>],
) -> std::result::Result<Tensor, Stop> {
    let v = replay(root, chain, geometry, scalars)?;
    if !v.shares_storage_with(root) {
        return Err(Stop::Fallback(RESHAPE_SURPRISE));
    }
    Ok(v)
}

/// Whether every element `view` addresses is one of `of`'s.
fn within(view: &Layout, of: &Layout) -> bool {
    let mut mine: Vec<usize> = of.offsets().collect();
    mine.sort_unstable();
    view.offsets().all(|o| mine.binary_search(&o).is_ok())
}

/// A copy of `t`'s whole storage, viewed with `t`'s geometry.
fn copy_storage(t: &Tensor) -> Result<Tensor> {
    Ok(t.storage_as_1d().copy()?.alias_with_layout(t.layout()))
}

/// A backward-only primitive: dropout's mask here, the others by the
/// evaluators shared with eager backward.
fn run_prim(p: &Prim, node: &Node, env: &Env, scalars: &[Option<ScalarValue>], geometry: &[Option<Layout>]) -> Result<Tensor> {
    let tensors = node.args.iter().map(|a| a.as_tensor().map(|v| get(env, v).cloned()).transpose()).collect::<Result<Vec<_>>>()?;
    match p {
        Prim::ViewGrad(_) | Prim::ViewOf(_) | Prim::ViewScatter(_) => {
            eval_view_prim(p, &tensors, &|t, chain| replay(t, chain, geometry, scalars))
        }
        Prim::DropoutMask => {
            let p = match scalar(node.args.get(1), scalars)? {
                ScalarValue::F64(p) => p,
                ScalarValue::I64(p) => p as f64,
                ScalarValue::Bool(_) => return Err(internal("dropout_mask: bool probability".into())),
            };
            // The source op's checks, before anything is drawn.
            let x = tensors.first().cloned().flatten().ok_or_else(|| internal("dropout_mask: no tensor argument".into()))?;
            if !(0.0..=1.0).contains(&p) || !x.dtype().is_float() {
                return x.dropout(p);
            }
            x.dropout_mask(p)
        }
        _ => eval_prim(p, &node.args, &tensors, scalars),
    }
}
