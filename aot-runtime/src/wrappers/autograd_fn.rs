//! `AOTDispatchAutograd`: the last wrapper of the chain. Its plan, the
//! training plan (`training_plan`), is built on a specialisation's first
//! call that records gradients ([`AOTDispatchAutograd::training`]). Its
//! compiled function: a call that records gradients runs the partitioned
//! forward with grad mode off and attaches **one** node to the eager
//! autograd graph, whose backward runs the partitioned backward graph.
//!
//! - The node's inputs are the call's tensor arguments, so gradients flow
//!   into their own history (leaves accumulate `.grad`; non-leaves pass it
//!   on).
//! - Its outputs are the forward outputs in PyTorch's order (mutated
//!   inputs, user outputs, intermediate bases); those without a tangent are
//!   not differentiable and get no history.
//! - Tangents are made contiguous (PyTorch coerces them the same way);
//!   an output that received no gradient gets zeros.
//! - Saved values keep the version they had; modifying one in place before
//!   `backward()` is an error, as in eager. The saved values are freed by
//!   the backward, so a second backward is PyTorch's error.
//! - The epilogue runs with grad mode on: a mutated input is updated with
//!   `copy_` from the node's output (so it gets PyTorch's history: its
//!   gradient flows through the compiled backward), aliases of inputs are
//!   regenerated from the updated inputs, and views of intermediates from
//!   the returned bases.

use crate::arg::Arg;
use crate::error::{AotError, Result};
use crate::executor::joint::{backward, forward, Outcome};
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::tensor::{record_multi, CustomBackward, NoGradGuard, SavedTensor};
use crate::wrappers::epilogue::TrainingEpilogue;
use crate::wrappers::synthetic_base::AOTSyntheticBaseWrapper;
use crate::wrappers::training_plan::TrainingPlan;
use crate::wrappers::CallPlan;
use aot_ir::transform::joint::OutputKind;
use aot_ir::transform::FunctionalGraph;
use aot_ir::{Graph, ScalarValue, StaticMeta};
use std::sync::{Arc, OnceLock};

struct CompiledBackward {
    /// The `#[aot_fn]` function's name: the backward's errors name it.
    func: String,
    plan: Arc<TrainingPlan>,
    saved: Vec<SavedTensor>,
    scalars: Vec<Option<ScalarValue>>,
    /// Per parameter, its layout at call time (aliased arguments are
    /// regenerated from their group's storage with it).
    geometry: Vec<Option<Layout>>,
    /// Per parameter: for the first of a group of aliased arguments, the
    /// layout of their common base, whose gradient the node returns in its
    /// place (the joint's is the whole storage's).
    synthetic_base: Vec<Option<Layout>>,
    /// Per forward output: shape and dtype, for zero tangents.
    outputs: Vec<Tensor>,
}

impl CustomBackward for CompiledBackward {
    fn name(&self) -> &'static str {
        "CompiledFunctionBackward"
    }

    fn backward(&self, grads: &[Option<Tensor>], _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let _no_grad = NoGradGuard::new();
        let saved = self.saved.iter().map(|s| s.get(self.name())).collect::<Result<Vec<_>>>()?;
        let tangents = self
            .plan
            .joint
            .tangents
            .iter()
            .map(|&oi| match grads.get(oi).cloned().flatten() {
                Some(g) => g.contiguous(),
                None => self.outputs[oi].zeros_like(),
            })
            .collect::<Result<Vec<_>>>()?;
        let arrived: Vec<bool> = self.plan.joint.tangents.iter().map(|&oi| grads.get(oi).is_some_and(Option::is_some)).collect();
        let in_backward = |e: crate::error::AotError| e.in_function(&format!("{} (backward)", self.func), None);
        let bw = self.plan.compiled_backward().map_err(in_backward)?;
        let mut input_grads =
            backward(&bw.partition, Some(&bw.live), &saved, &tangents, &arrived, &self.scalars, &self.geometry).map_err(in_backward)?;
        for (p, (g, deps)) in input_grads.iter_mut().zip(&self.plan.grad_tangents).enumerate() {
            if !deps.iter().any(|&t| arrived[t]) {
                *g = None;
            }
            if let (Some(storage_grad), Some(Some(b))) = (g.as_ref(), self.synthetic_base.get(p)) {
                // The storage's gradient, read at the base's elements (the
                // base does not overlap itself, so each is read once).
                let flat = if storage_grad.storage_offset() == 0 && storage_grad.is_contiguous() {
                    storage_grad.clone()
                } else {
                    storage_grad.copy()?
                };
                *g = Some(flat.as_strided(&b.shape, &b.stride, b.offset)?.contiguous()?);
            }
        }
        Ok(input_grads)
    }
}

/// `AOTDispatchAutograd`: the training half of a plan, built on first use
/// (the key fixes which arguments require grad, so it is the same for
/// every call that reaches the plan). `Err` holds why the function has no
/// compiled training path; its training calls then run the eager reference.
#[derive(Debug)]
pub(crate) struct AOTDispatchAutograd {
    training: OnceLock<std::result::Result<Arc<TrainingPlan>, String>>,
}

impl AOTDispatchAutograd {
    /// Pre-compile: nothing yet; inference calls never build the joint.
    pub(crate) fn pre_compile() -> AOTDispatchAutograd {
        AOTDispatchAutograd { training: OnceLock::new() }
    }

    /// The training plan of the functional graph `fg` of `source`, for
    /// arguments that require grad as `requires_grad` says.
    pub(crate) fn training(
        &self,
        fg: &FunctionalGraph,
        source: &Graph,
        requires_grad: &[bool],
    ) -> std::result::Result<&Arc<TrainingPlan>, &str> {
        self.training.get_or_init(|| TrainingPlan::build(fg, source, requires_grad).map(Arc::new)).as_ref().map_err(String::as_str)
    }
}

/// Runs a call that records gradients with the plan's training half.
/// `Ok(None)`: the call needs the eager reference (an input mutation eager
/// refuses, reported by it).
pub(crate) fn run(
    cp: &CallPlan,
    plan: &Arc<TrainingPlan>,
    g: &Graph,
    meta: &StaticMeta,
    args: &[Arg],
    scalars: &[Option<ScalarValue>],
) -> Result<Option<Vec<Tensor>>> {
    let fg = &cp.graph;
    // The arguments' `requires_grad` as the call found them (the
    // epilogue's writes can make an argument require grad).
    let rg_at_call: Vec<bool> = args.iter().map(|a| a.tensor().is_some_and(Tensor::requires_grad)).collect();
    let Some(synthetic) = admit(plan, cp, meta, args)? else { return Ok(None) };
    let geometry: Vec<Option<Layout>> = args.iter().map(|a| a.tensor().map(Tensor::layout)).collect();
    let bases = cp.synthetic_base.collect_bases(args);
    let (outs, saved) = match forward(&plan.partition, Some(&plan.forward_live), &bases, scalars, &geometry) {
        Ok(Outcome::Done(r)) => r,
        // A `reshape`/`contiguous` aliased otherwise than the plan assumed,
        // or an `as_strided` outside its receiver: nothing was written; the
        // eager reference runs the call.
        Ok(Outcome::Fallback(_)) => return Ok(None),
        Err(e) => return Err(e.in_function(&g.name, None)),
    };
    // The node's outputs are tensor objects of their own: no `._base`
    // pointing into the forward's internals (views of them are rebuilt below).
    let outs: Vec<Tensor> = outs.into_iter().map(|t| if t.view_base().is_some() { t.alias_with_layout(t.layout()) } else { t }).collect();
    let saved = protect_saved(meta, args, saved)?;
    record_node(&g.name, plan, fg, args, &synthetic, &outs, saved, scalars, geometry)?;
    let training = TrainingEpilogue { jg: &plan.joint, fg, g, meta, args, synthetic: &synthetic, rg_at_call: &rg_at_call };
    training.write_inputs(&outs)?;
    training.outputs(&outs).map(Some)
}

/// The checks before any work: `Some(synthetic bases)` when the compiled
/// training path can run the call, `None` when the eager reference must.
fn admit(plan: &TrainingPlan, cp: &CallPlan, meta: &StaticMeta, args: &[Arg]) -> Result<Option<Vec<Option<Tensor>>>> {
    let (jg, fg) = (&plan.joint, &cp.graph);
    // Aliased arguments in one group: their common base (else eager).
    if call_refusal(&cp.synthetic_base, meta, args).is_some() {
        return Ok(None);
    }
    let Some(synthetic) = cp.synthetic_base.autograd_bases(args) else { return Ok(None) };
    // In-place writes that eager refuses (a leaf that requires grad,
    // mutated with grad on): let the reference report them, before any
    // work. The epilogue's own `copy_` into each target passes autograd's
    // in-place check, so nothing after the first write can be refused.
    for o in &jg.fw_outputs {
        if let OutputKind::MutatedInput(group) = o.kind {
            let Some(p) = fg.groups.group_of.iter().position(|x| *x == Some(group)) else { continue };
            let t = arg(args, p)?;
            let target = synthetic.get(group).and_then(Option::as_ref).unwrap_or(t);
            if !hidden(fg, meta, args.len(), p) && (inplace_refused(t) || crate::ops::check_inplace("copy_", target).is_err()) {
                return Ok(None);
            }
        }
    }
    // A metadata mutation with grad on of a tensor eager refuses to change.
    // (Training plans have no `no_grad` regions, so every metadata mutation
    // happened with grad on.) The same for a view of a leaf that requires
    // grad (or a view eager made under `no_grad`) whose storage's metadata
    // a mutation changes.
    let metadata_mutated = jg.fw_outputs.iter().filter_map(|o| match o.kind {
        OutputKind::MetadataMutation(p) => Some(p),
        _ => None,
    });
    for p in metadata_mutated.chain(plan.metadata_mutated_storages.iter().copied()) {
        if inplace_refused(arg(args, p)?) {
            return Ok(None);
        }
    }
    Ok(Some(synthetic))
}

/// Whether parameter `p`'s writes are hidden from autograd (under
/// `no_grad`, or through a detached alias): they are copied back without
/// history, as PyTorch does. Judged over `p`'s whole group (the same tensor
/// passed twice is written through either name).
pub(crate) fn hidden(fg: &FunctionalGraph, meta: &StaticMeta, num_args: usize, p: usize) -> bool {
    let group = fg.groups.group_of.get(p).copied().flatten();
    (0..num_args)
        .filter(|&q| fg.groups.group_of.get(q).copied().flatten() == group)
        .all(|q| meta.inputs.get(q).is_none_or(|m| m.data_mutations == m.data_mutations_under_no_grad || m.mutated_only_through_detach))
}

/// A saved value over an input's storage would see the epilogue's writes
/// (and their version bumps): the backward gets a copy as it was.
fn protect_saved(meta: &StaticMeta, args: &[Arg], saved: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let written: Vec<&Tensor> = args
        .iter()
        .enumerate()
        .filter(|(p, _)| meta.inputs.get(*p).is_some_and(|m| m.mutates_data() || m.mutates_metadata))
        .filter_map(|(_, a)| a.tensor())
        .collect();
    let _no_grad = NoGradGuard::new();
    saved
        .into_iter()
        // The whole storage, so that geometry-addressed rules (aliased
        // arguments, `as_strided`) find what they address.
        .map(|s| match written.iter().any(|w| w.shares_storage_with(&s)) {
            true => Ok(s.storage_as_1d().copy()?.alias_with_layout(s.layout())),
            false => Ok(s),
        })
        .collect()
}

/// Attaches the one node. Its inputs are the arguments, each distinct
/// tensor once: the backward's gradient of a group is the whole gradient
/// of that tensor. A group of aliased arguments is represented by their
/// common base (PyTorch's synthetic base): its gradient flows into the
/// base's history, and through it to every argument's.
#[allow(clippy::too_many_arguments)]
fn record_node(
    func: &str,
    plan: &Arc<TrainingPlan>,
    fg: &FunctionalGraph,
    args: &[Arg],
    synthetic: &[Option<Tensor>],
    outs: &[Tensor],
    saved: Vec<Tensor>,
    scalars: &[Option<ScalarValue>],
    geometry: Vec<Option<Layout>>,
) -> Result<()> {
    let differentiable: Vec<bool> = plan.joint.fw_outputs.iter().map(|o| o.tangent.is_some()).collect();
    let group_of = |p: usize| fg.groups.group_of.get(p).copied().flatten();
    let first_of = |p: usize| group_of(p).and_then(|gi| fg.groups.group_of.iter().position(|x| *x == Some(gi)));
    let is_first = |p: usize| first_of(p) == Some(p);
    let base_of = |p: usize| group_of(p).and_then(|gi| synthetic.get(gi)).and_then(Option::as_ref);
    let inputs: Vec<Option<&Tensor>> = args.iter().enumerate().map(|(p, a)| base_of(p).or(a.tensor()).filter(|_| is_first(p))).collect();
    let synthetic_base: Vec<Option<Layout>> = (0..args.len()).map(|p| base_of(p).filter(|_| is_first(p)).map(Tensor::layout)).collect();
    let backward = CompiledBackward {
        func: func.to_string(),
        plan: plan.clone(),
        saved: saved.iter().map(SavedTensor::save).collect(),
        scalars: scalars.to_vec(),
        geometry,
        synthetic_base,
        outputs: outs.iter().map(|t| t.alias_with_layout(t.layout())).collect(),
    };
    record_multi(outs, &differentiable, &inputs, Box::new(backward)).map(|_| ())
}

/// Why a call with these arguments cannot use the compiled training path
/// although its function has one: aliased arguments without a common base,
/// or an argument whose elements overlap (an expanded tensor) that requires
/// grad or whose storage the call writes (the joint's gradient rules address elements, and
/// eager sums the gradients of the elements that share storage).
pub(crate) fn call_refusal(sb: &AOTSyntheticBaseWrapper, meta: &StaticMeta, args: &[Arg]) -> Option<&'static str> {
    let groups = &sb.groups;
    // A view made under `no_grad` of an argument that another argument
    // aliases, in a function that writes its arguments: whether the view
    // requires grad hangs on whether a write through the other name came
    // first, which the static facts do not follow.
    let shared = |p: usize| {
        let g = groups.group_of.get(p).copied().flatten();
        g.is_some() && groups.group_of.iter().enumerate().any(|(q, h)| q != p && *h == g)
    };
    // A write into an integer or bool argument is not differentiable (its
    // result never requires grad), which the joint graph, blind to dtypes,
    // does not know: it would send gradients through the cast.
    let integral_written =
        |(p, a): (usize, &Arg)| a.tensor().is_some_and(|t| !t.dtype().is_float()) && meta.inputs.get(p).is_some_and(|m| m.mutates_data());
    if args.iter().enumerate().any(integral_written) {
        return Some("a write into an integer or bool argument in a training call runs eagerly for now");
    }
    if meta.mutates_inputs && meta.outputs.iter().any(|o| o.no_grad_view && o.grad_deps.iter().any(|&p| shared(p))) {
        return Some("a view made under no_grad of an argument that another argument aliases, in a function that writes its arguments");
    }
    // The joint addresses an argument's elements, not its storage: a write
    // to the storage of an expanded argument (through it or through another
    // argument over that storage) reaches every element that shares the
    // written storage element, and eager sums their gradients.
    let storage_written = |p: usize| {
        let g = groups.group_of.get(p).copied().flatten();
        g.is_some() && groups.group_of.iter().enumerate().any(|(q, h)| *h == g && meta.inputs.get(q).is_some_and(|m| m.mutates_data()))
    };
    let overlapping =
        |(p, a): (usize, &Arg)| a.tensor().is_some_and(|t| (t.requires_grad() || storage_written(p)) && !t.layout().is_non_overlapping());
    if args.iter().enumerate().any(overlapping) {
        return Some("an argument whose elements overlap (an expanded tensor) that requires grad or whose storage is written");
    }
    sb.autograd_bases(args)
        .is_none()
        .then_some("aliased arguments that are not all views (made with grad mode on) of one base that does not overlap itself")
}

pub(crate) fn arg<'a>(args: &[Arg<'a>], p: usize) -> Result<&'a Tensor> {
    args.get(p).and_then(Arg::tensor).ok_or_else(|| AotError::internal("compiled function", format!("argument {p} is not a tensor")))
}

/// Whether eager refuses an in-place write to `t` with grad mode on: a leaf
/// that requires grad, a view of one, or a view made under `no_grad` of a
/// tensor that requires grad.
pub(crate) fn inplace_refused(t: &Tensor) -> bool {
    if !t.requires_grad() {
        return false;
    }
    let view = t.state().ag.view.clone();
    t.is_leaf() || view.is_some_and(|v| v.created_in_no_grad || (v.base.is_leaf() && v.base.requires_grad()))
}
