//! `AOTDispatchAutograd`'s compiled function: a call that records gradients
//! runs the partitioned forward with grad mode off and attaches **one**
//! node to the eager autograd graph, whose backward runs the partitioned
//! backward graph.
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

use crate::autograd::{record_multi, CustomBackward, NoGradGuard, SavedTensor};
use crate::compiled::joint_exec::{run_backward, run_forward};
use crate::compiled::Arg;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;
use aot_ir::transform::joint::{create_joint, JOp, JointGraph, OutputKind};
use aot_ir::transform::partition::{partition, Partition};
use aot_ir::transform::{FOutput, FunctionalGraph};
use aot_ir::{Graph, ScalarValue, StaticMeta};
use std::sync::Arc;

/// The training half of a specialisation: joint graph and its partition.
#[derive(Debug)]
pub(crate) struct TrainingPlan {
    pub(crate) joint: JointGraph,
    pub(crate) partition: Partition,
    /// Per source parameter, the tangents its gradient depends on. A
    /// gradient none of whose tangents arrived is `None`, not zeros, as in
    /// PyTorch (the leaf's `.grad` stays unset).
    grad_tangents: Vec<Vec<usize>>,
    /// Parameters over whose storage a metadata mutation with grad mode on
    /// changes some tensor: eager refuses it when that tensor is a view of
    /// a leaf that requires grad, which only the call's arguments tell.
    metadata_mutated_storages: Vec<usize>,
}

impl TrainingPlan {
    /// `Err` with the reason when the function has no compiled training
    /// path yet (the call then runs the eager reference).
    pub(crate) fn build(fg: &FunctionalGraph, source: &Graph, requires_grad: &[bool]) -> std::result::Result<TrainingPlan, String> {
        // Not covered yet (the differential tests found `requires_grad`
        // differences): `no_grad!` regions inside a training call, and
        // `contiguous()`, whose identity-or-copy outcome the joint does not
        // check when it returns an input.
        // A write through a `detach()` alias gives the alias (not its base)
        // history in eager; the joint treats such writes as invisible.
        let alias = aot_ir::analysis::alias::AliasInfo::compute(source);
        let mut metadata_mutated_storages: Vec<usize> = source
            .nodes
            .iter()
            .filter(|n| !n.no_grad && n.class() == aot_ir::OpClass::MetadataMutation)
            .filter_map(|n| n.target().and_then(|t| alias.input_of(t)))
            .collect();
        metadata_mutated_storages.sort_unstable();
        metadata_mutated_storages.dedup();
        detach_writes_supported(source, &alias, requires_grad)?;
        detached_reads_supported(source, &alias)?;
        // `as_strided` can reach storage between a strided argument's
        // elements, where gradients must land on the argument's base.
        as_strided_supported(source)?;
        no_grad_views_supported(source)?;
        // A `reshape`/`contiguous` whose aliasing decides the result is
        // checked when the forward runs it (every source op runs there); an
        // outcome other than the plan's sends the call to the eager
        // reference before anything is written.
        let joint = create_joint(fg, source, requires_grad).map_err(|e| e.to_string())?;
        joint.verify().map_err(|e| e.to_string())?;
        let partition = partition(&joint).map_err(|e| e.to_string())?;
        // The compiled forward runs every source op (see `partition`), so
        // an op eager would fail on fails here too. Checked, since a
        // source op the forward left out would make the two differ.
        let mut ran = vec![false; source.nodes.len()];
        for n in &partition.forward.nodes {
            if let JOp::Op { src_node: Some(k), .. } | JOp::Mutate { src_node: k, .. } = n.op {
                if let Some(r) = ran.get_mut(k) {
                    *r = true;
                }
            }
        }
        // Views and metadata mutations run inside the chains of the ops
        // that read them: they count as run when something that ran (or
        // an output) reads them, directly or through further views.
        let mut needed = vec![false; source.values.len()];
        for v in source.outputs.iter().copied().chain(source.nodes.iter().zip(&ran).filter(|(_, r)| **r).flat_map(|(n, _)| n.tensor_args()))
        {
            needed[v.index()] = true;
        }
        for (k, n) in source.nodes.iter().enumerate().rev() {
            let Some(v) = n.result() else { continue };
            if matches!(n.class(), aot_ir::OpClass::View | aot_ir::OpClass::MetadataMutation) && needed[v.index()] {
                ran[k] = true;
                n.tensor_args().for_each(|u| needed[u.index()] = true);
            }
        }
        if let Some(k) = ran.iter().position(|r| !r) {
            return Err(format!("source op {k} has no effect the compiled forward needs"));
        }
        let grad_tangents = grad_tangent_deps(&partition, joint.tangents.len());
        Ok(TrainingPlan { joint, partition, grad_tangents, metadata_mutated_storages })
    }
}

struct CompiledBackward {
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
        let mut input_grads = run_backward(&self.plan.partition, &saved, &tangents, &self.scalars, &self.geometry)?;
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

/// Runs a call that records gradients. `Ok(None)`: the call needs the
/// eager reference (an input mutation eager refuses, reported by it).
pub(crate) fn run(
    plan: &Arc<TrainingPlan>,
    fg: &FunctionalGraph,
    g: &Graph,
    meta: &StaticMeta,
    args: &[Arg],
    bases: &[Tensor],
    scalars: &[Option<ScalarValue>],
) -> Result<Option<Vec<Tensor>>> {
    let jg = &plan.joint;
    // Mutations autograd does not see (under no_grad, or through a
    // detached alias) are copied back without history, as PyTorch does.
    // Per parameter, judged over its whole group (the same tensor passed
    // twice is written through either name).
    let hidden = |p: usize| {
        let group = fg.groups.group_of.get(p).copied().flatten();
        (0..args.len())
            .filter(|&q| fg.groups.group_of.get(q).copied().flatten() == group)
            .all(|q| meta.inputs.get(q).is_none_or(|m| m.data_mutations == m.data_mutations_under_no_grad || m.mutated_only_through_detach))
    };
    // In-place writes that eager refuses (a leaf that requires grad,
    // mutated with grad on): let the reference report them, before any work.
    for o in &jg.fw_outputs {
        if let OutputKind::MutatedInput(group) = o.kind {
            let Some(p) = fg.groups.group_of.iter().position(|x| *x == Some(group)) else { continue };
            let t = arg(args, p)?;
            if !hidden(p) && inplace_refused(t) {
                return Ok(None);
            }
        }
    }
    // A metadata mutation with grad on of a tensor eager refuses to change.
    for o in &jg.fw_outputs {
        // (Training plans have no `no_grad` regions, so every metadata
        // mutation happened with grad on.)
        if let OutputKind::MetadataMutation(p) = o.kind {
            if inplace_refused(arg(args, p)?) {
                return Ok(None);
            }
        }
    }
    // A metadata mutation with grad on of a view of a leaf that requires
    // grad (or of a view eager made under `no_grad`): eager refuses it.
    for &p in &plan.metadata_mutated_storages {
        if inplace_refused(arg(args, p)?) {
            return Ok(None);
        }
    }
    // Aliased arguments in one group: their common base (else eager).
    let Some(synthetic) = synthetic_bases(fg, args) else { return Ok(None) };
    let geometry: Vec<Option<Layout>> = args.iter().map(|a| a.tensor().map(Tensor::layout)).collect();
    let (outs, saved) = match run_forward(&plan.partition, bases, scalars, &geometry) {
        Ok(r) => r,
        // A `reshape`/`contiguous` aliased otherwise than the plan assumed:
        // nothing was written; the eager reference runs the call.
        Err(e) if e.to_string().contains(ALIAS_SURPRISE) => return Ok(None),
        Err(e) => return Err(e.in_function(&g.name, None)),
    };
    let in_fn = |e: AotError| e.in_function(&g.name, None);
    // The node's outputs are tensor objects of their own: no `._base`
    // pointing into the forward's internals (views of them are rebuilt below).
    let outs: Vec<Tensor> = outs.into_iter().map(|t| if t.view_base().is_some() { t.alias_with_layout(t.layout()) } else { t }).collect();
    // A saved value over an input's storage would see the epilogue's
    // writes (and their version bumps): the backward needs it as it was.
    let written: Vec<&Tensor> = args
        .iter()
        .enumerate()
        .filter(|(p, _)| meta.inputs.get(*p).is_some_and(|m| m.mutates_data() || m.mutates_metadata))
        .filter_map(|(_, a)| a.tensor())
        .collect();
    let saved = {
        let _no_grad = NoGradGuard::new();
        saved
            .into_iter()
            // The whole storage, so that geometry-addressed rules (aliased
            // arguments, `as_strided`) find what they address.
            .map(|s| {
                if written.iter().any(|w| w.shares_storage_with(&s)) {
                    Ok(s.storage_as_1d().copy()?.alias_with_layout(s.layout()))
                } else {
                    Ok(s)
                }
            })
            .collect::<Result<Vec<_>>>()?
    };

    // The one node. Its inputs are the arguments, each distinct tensor
    // once: the backward's gradient of a group is the whole gradient of
    // that tensor. A group of aliased arguments is represented by their
    // common base (PyTorch's synthetic base): its gradient flows into the
    // base's history, and through it to every argument's.
    let differentiable: Vec<bool> = jg.fw_outputs.iter().map(|o| o.tangent.is_some()).collect();
    let group_of = |p: usize| fg.groups.group_of.get(p).copied().flatten();
    let first_of = |p: usize| group_of(p).and_then(|gi| fg.groups.group_of.iter().position(|x| *x == Some(gi)));
    let inputs: Vec<Option<&Tensor>> = args
        .iter()
        .enumerate()
        .map(|(p, a)| {
            let base = group_of(p).and_then(|gi| synthetic.get(gi)).and_then(Option::as_ref);
            base.or(a.tensor()).filter(|_| first_of(p) == Some(p))
        })
        .collect();
    let synthetic_base: Vec<Option<Layout>> = (0..args.len())
        .map(|p| {
            group_of(p).and_then(|gi| synthetic.get(gi)).and_then(Option::as_ref).filter(|_| first_of(p) == Some(p)).map(Tensor::layout)
        })
        .collect();
    let backward = CompiledBackward {
        plan: plan.clone(),
        saved: saved.iter().map(SavedTensor::save).collect(),
        scalars: scalars.to_vec(),
        geometry,
        synthetic_base,
        outputs: outs.iter().map(|t| t.alias_with_layout(t.layout())).collect(),
    };
    record_multi(&outs, &differentiable, &inputs, Box::new(backward))?;

    // Epilogue, grad mode on.
    for (o, t) in jg.fw_outputs.iter().zip(&outs) {
        if let OutputKind::MutatedInput(group) = o.kind {
            let Some(p) = fg.groups.group_of.iter().position(|x| *x == Some(group)) else { continue };
            let a = arg(args, p)?;
            {
                // The whole storage first: writes through `as_strided` can
                // reach beyond the argument's own elements.
                let _no_grad = NoGradGuard::new();
                a.storage_as_1d().copy_(&t.storage_as_1d()).map_err(in_fn)?;
            }
            // Then the argument itself (or the aliased arguments' common
            // base, whose views they are), for its autograd history.
            let _no_grad = hidden(p).then(NoGradGuard::new);
            match synthetic.get(group).and_then(Option::as_ref) {
                Some(b) => b.copy_(&t.as_strided(&b.shape(), &b.stride(), b.storage_offset())?).map_err(in_fn)?,
                None => a.copy_(t).map_err(in_fn)?,
            };
        }
    }
    for (o, t) in jg.fw_outputs.iter().zip(&outs) {
        if let OutputKind::MetadataMutation(p) = o.kind {
            // Eager allowed the metadata mutation, so where it would refuse
            // it with grad on, the function did it under `no_grad`.
            let a = arg(args, p)?;
            let _no_grad = inplace_refused(a).then(NoGradGuard::new);
            a.as_strided_(&t.shape(), &t.stride(), t.storage_offset()).map_err(in_fn)?;
        }
    }
    let value_of = |k: usize| jg.fw_outputs.iter().position(|o| o.kind == OutputKind::User(k)).map(|i| &outs[i]);
    let mut results: Vec<Tensor> = Vec::with_capacity(jg.user_outputs.len());
    for (k, fo) in jg.user_outputs.iter().enumerate() {
        let object = fg.output_objects.get(k);
        if let Some(j) = (0..k).find(|&j| fg.output_objects.get(j) == object) {
            let same = results[j].clone();
            results.push(same);
            continue;
        }
        // Views the function made under no_grad are regenerated under
        // no_grad (eager makes them leaves of their own), and outputs that
        // do not require grad (through `detach`) are returned detached.
        let src = g.outputs.get(k).and_then(|&v| g.def_node(v));
        let _no_grad = src.is_some_and(|n| n.no_grad).then(NoGradGuard::new);
        let wants_grad = meta
            .outputs
            .get(k)
            .is_some_and(|o| o.grad_deps.iter().any(|&p| args.get(p).and_then(Arg::tensor).is_some_and(Tensor::requires_grad)));
        let geom = || value_of(k).ok_or_else(|| AotError::internal("compiled function", format!("no forward output for result {k}")));
        let r = match fo {
            FOutput::Input(p) => arg(args, *p)?.clone(),
            FOutput::AliasOfInput { group, .. } => {
                let p = fg.groups.group_of.iter().position(|x| *x == Some(*group)).unwrap_or(usize::MAX);
                let v = geom()?;
                // An output that does not require grad is a view of a
                // detached alias (eager: a view of `x.detach()`). In a group
                // of aliased arguments, a view of their common base: an
                // `as_strided` of one argument would drop the gradient of
                // elements outside it.
                let a = match synthetic.get(*group).and_then(Option::as_ref) {
                    Some(b) => b,
                    None => arg(args, p)?,
                };
                let a = if wants_grad { a.clone() } else { a.detach()? };
                a.as_strided(&v.shape(), &v.stride(), v.storage_offset())?
            }
            FOutput::Value(_) => geom()?.clone(),
            FOutput::ViewOfIntermediate { base, .. } => {
                let v = geom()?;
                let b = jg
                    .fw_outputs
                    .iter()
                    .position(|o| o.value == *base)
                    .map(|i| &outs[i])
                    .ok_or_else(|| AotError::internal("compiled function", format!("no base returned for result {k}")))?;
                let b = &(if wants_grad { b.clone() } else { b.detach()? });
                b.as_strided(&v.shape(), &v.stride(), v.storage_offset())?
            }
        };
        let r = if !wants_grad && r.requires_grad() && !matches!(fo, FOutput::Input(_)) { r.detach()? } else { r };
        let is_view = fg.output_is_view.get(k).copied().unwrap_or(true);
        let r = if !is_view && !matches!(fo, FOutput::Input(_)) && r.view_base().is_some() { r.detach()? } else { r };
        // Another object already handed out as this tensor (`y` and
        // `y.detach()`): a distinct object over the same storage.
        let r = if !matches!(fo, FOutput::Input(_)) && results.iter().any(|x| x.same_tensor(&r)) { r.detach()? } else { r };
        results.push(r);
    }
    Ok(Some(results))
}

/// Under `no_grad`, eager's view semantics are their own: a view made
/// there of a tensor that requires grad is a leaf that requires grad (no
/// gradient reaches its base) and refuses in-place writes with grad mode
/// on; a metadata mutation there leaves the tensor's history half rebuilt.
/// None of that is visible while such a view (and every view of it) is
/// only used under `no_grad` and not returned: the common case of an
/// optimizer step writing a slice of a parameter. The joint covers that;
/// the rest, and metadata mutations under `no_grad`, run eagerly.
fn no_grad_views_supported(g: &Graph) -> std::result::Result<(), String> {
    use aot_ir::op::AliasEffect;
    let mut tainted = vec![false; g.values.len()];
    for n in &g.nodes {
        if n.no_grad && n.class() == aot_ir::OpClass::MetadataMutation {
            return Err("a metadata mutation under no_grad in a training call runs eagerly for now".into());
        }
        if !n.no_grad && n.tensor_args().any(|v| tainted[v.index()]) {
            return Err(format!(
                "a view made under no_grad used with grad mode on (by {}) runs eagerly in training calls for now",
                n.op.name()
            ));
        }
        let Some(out) = n.out else { continue };
        let is_view = !matches!(n.op.alias_effect(), AliasEffect::Fresh | AliasEffect::InPlace);
        tainted[out.index()] = is_view && (n.no_grad || n.receiver().is_some_and(|r| tainted[r.index()]));
    }
    if g.outputs.iter().any(|v| tainted[v.index()]) {
        return Err("a view made under no_grad returned from a training call runs eagerly for now".into());
    }
    Ok(())
}

/// Eager's `as_strided` of a view sends gradients to the view, which keeps
/// only its own elements' (PyTorch's `as_strided_backward` reads the
/// storage at the input's geometry). The functional chains place an
/// `as_strided` absolutely, forgetting the view it was taken of, so the
/// joint (and the epilogue's regenerated aliases) would let gradients of
/// other elements through. `as_strided` of an argument or of a computed
/// value is exact and runs compiled; of a view, eagerly. So does
/// `as_strided_`, whose history eager rebuilds from the old geometry.
fn as_strided_supported(g: &Graph) -> std::result::Result<(), String> {
    use aot_ir::op::AliasEffect;
    if g.nodes.iter().any(|n| n.op == aot_ir::OpKind::AsStridedInplace) {
        return Err("as_strided_ in a training call runs eagerly for now".into());
    }
    // Values that are (views of) an `as_strided` of an argument: they can
    // reach elements of its storage outside it, whose new history (after a
    // write) eager gives the argument's base, which the joint does not see.
    let is_param = |v: aot_ir::ValueId| g.params.iter().any(|p| p.value == Some(v));
    let mut escapes = vec![false; g.values.len()];
    for n in &g.nodes {
        if n.op == aot_ir::OpKind::AsStrided {
            let of_view = n.receiver().and_then(|r| g.def_node(r)).is_some_and(|d| d.op.alias_effect() != AliasEffect::Fresh);
            if of_view {
                return Err("as_strided of a view in a training call runs eagerly for now".into());
            }
        }
        if n.target().is_some_and(|t| escapes[t.index()]) {
            return Err("a write through as_strided of an argument in a training call runs eagerly for now".into());
        }
        if let (Some(out), Some(r)) = (n.out, n.receiver()) {
            let is_view = !matches!(n.op.alias_effect(), AliasEffect::Fresh | AliasEffect::InPlace);
            escapes[out.index()] = is_view && ((n.op == aot_ir::OpKind::AsStrided && is_param(r)) || escapes[r.index()]);
        }
    }
    Ok(())
}

/// A `detach()` alias read after a write to its storage is regenerated
/// from the new version, and the functional graph's view chains keep no
/// trace of the detach: the joint would let gradients through it. Such
/// reads run eagerly.
fn detached_reads_supported(g: &Graph, alias: &aot_ir::analysis::alias::AliasInfo) -> std::result::Result<(), String> {
    let detached = |v: aot_ir::ValueId| alias.through_detach.get(v.index()).copied().unwrap_or(false);
    // Per storage, whether it was written since each value was made:
    // track, per value, the number of writes to its storage seen at its
    // definition.
    let mut writes: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    let mut seen_at = vec![0usize; g.values.len()];
    for n in &g.nodes {
        for v in n.tensor_args() {
            if detached(v) && writes.get(&alias.storage_of(v)).copied().unwrap_or(0) != seen_at[v.index()] {
                return Err("a detach() alias read after a write to its storage runs eagerly in training calls for now".into());
            }
        }
        if let Some(t) = n.target() {
            *writes.entry(alias.storage_of(t)).or_insert(0) += 1;
        }
        if let Some(out) = n.out {
            seen_at[out.index()] = writes.get(&alias.storage_of(out)).copied().unwrap_or(0);
        }
    }
    Ok(())
}

/// Writes through a `detach()` alias are invisible to the base's history,
/// which the joint models as a write under `no_grad` (gradients pass
/// straight through). That is exact while nothing that requires grad is
/// written (eager would give the alias a history of its own) and the
/// alias is only written, never read (the joint would regenerate it from
/// the base, gradients included).
fn detach_writes_supported(
    g: &Graph,
    alias: &aot_ir::analysis::alias::AliasInfo,
    requires_grad: &[bool],
) -> std::result::Result<(), String> {
    let detached = |v: aot_ir::ValueId| alias.through_detach.get(v.index()).copied().unwrap_or(false);
    if !g.nodes.iter().filter_map(aot_ir::Node::target).any(detached) {
        return Ok(());
    }
    let refuse = |why: &str| Err(format!("a write through detach() {why} runs eagerly in training calls for now"));
    if g.outputs.iter().any(|&v| detached(v)) {
        return refuse("to a returned alias");
    }
    // Which values may require grad in this call (over-approximated: a
    // grad-mode write makes every value over its storage count).
    let mut rg = vec![false; g.values.len()];
    for (p, param) in g.params.iter().enumerate() {
        if let Some(v) = param.value {
            rg[v.index()] = requires_grad.get(p).copied().unwrap_or(false);
        }
    }
    for n in &g.nodes {
        let reads_rg = n.tensor_args().any(|v| rg[v.index()]);
        for (i, v) in n.tensor_args().enumerate() {
            // A detached alias may only be viewed or written, not read.
            let as_target = i == 0 && (n.op.is_inplace() || n.class() == aot_ir::OpClass::View);
            if detached(v) && !as_target {
                return refuse("to an alias that is also read");
            }
        }
        if let Some(t) = n.target() {
            let writes_rg = !n.no_grad && n.is_differentiable() && n.tensor_args().skip(1).any(|v| rg[v.index()]);
            if detached(t) && writes_rg {
                return refuse("of a value that requires grad");
            }
            if writes_rg {
                let storage = alias.storage_of(t);
                for (v, r) in rg.iter_mut().enumerate() {
                    *r |= alias.storage_of(aot_ir::ValueId(v as u32)) == storage;
                }
            }
        }
        if let Some(out) = n.out {
            rg[out.index()] = match n.op.alias_effect() {
                aot_ir::op::AliasEffect::Detach => false,
                aot_ir::op::AliasEffect::View | aot_ir::op::AliasEffect::MaybeView | aot_ir::op::AliasEffect::MaybeSame => {
                    n.receiver().is_some_and(|r| rg[r.index()])
                }
                _ => !n.no_grad && n.is_differentiable() && reads_rg,
            };
        }
    }
    Ok(())
}

/// Per input group, for a group of aliased arguments (`single == false`),
/// their common base: each argument is it or a view of it made with grad
/// mode on (PyTorch's `_are_differentiable_views`; its synthetic base in
/// training is this `._base`). The joint's gradient is the storage's, read
/// back at the base's elements, so the base must not overlap itself.
/// `None` when some group has no such base: the call runs eagerly.
fn synthetic_bases(fg: &FunctionalGraph, args: &[Arg]) -> Option<Vec<Option<Tensor>>> {
    let groups = &fg.groups;
    let mut out: Vec<Option<Tensor>> = vec![None; groups.single.len()];
    for (gi, slot) in out.iter_mut().enumerate() {
        if groups.single.get(gi).copied().unwrap_or(true) {
            continue;
        }
        let mut base: Option<Tensor> = None;
        for (p, _) in groups.group_of.iter().enumerate().filter(|(_, g)| **g == Some(gi)) {
            let t = args.get(p)?.tensor()?;
            let b = match &t.state().ag.view {
                Some(v) if v.created_in_no_grad => return None,
                Some(v) => v.base.clone(),
                None => t.clone(),
            };
            match &base {
                Some(prev) if !prev.same_tensor(&b) => return None,
                Some(_) => {}
                None => base = Some(b),
            }
        }
        let b = base?;
        if !b.layout().is_non_overlapping_and_dense() {
            return None;
        }
        *slot = Some(b);
    }
    Some(out)
}

/// Why a call with these arguments cannot use the compiled training path
/// although its function has one: aliased arguments without a common base.
pub(crate) fn synthetic_base_refusal(fg: &FunctionalGraph, args: &[Arg]) -> Option<&'static str> {
    synthetic_bases(fg, args)
        .is_none()
        .then_some("aliased arguments that are not all views (made with grad mode on) of one base that does not overlap itself")
}

/// The joint executor's message for a failed `reshape`/`contiguous` check.
const ALIAS_SURPRISE: &str = "aliased otherwise than the compiled graph assumed";

fn arg<'a>(args: &[Arg<'a>], p: usize) -> Result<&'a Tensor> {
    args.get(p).and_then(Arg::tensor).ok_or_else(|| AotError::internal("compiled function", format!("argument {p} is not a tensor")))
}

/// For each source parameter's gradient, the tangents (backward inputs
/// after the saved values) it is computed from.
fn grad_tangent_deps(p: &Partition, num_tangents: usize) -> Vec<Vec<usize>> {
    let bw = &p.backward;
    let num_saved = bw.inputs.len().saturating_sub(num_tangents);
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); p.num_values];
    for (i, v) in bw.inputs.iter().enumerate().skip(num_saved) {
        if let Some(d) = deps.get_mut(v.index()) {
            d.push(i - num_saved);
        }
    }
    for n in &bw.nodes {
        let mut d: Vec<usize> = n.uses().flat_map(|u| deps.get(u.index()).cloned().unwrap_or_default()).collect();
        d.sort_unstable();
        d.dedup();
        if let Some(slot) = deps.get_mut(n.out.index()) {
            *slot = d;
        }
    }
    p.grad_slots
        .iter()
        .map(|s| s.and_then(|i| bw.outputs.get(i)).map(|v| deps.get(v.index()).cloned().unwrap_or_default()).unwrap_or_default())
        .collect()
}

/// Whether eager refuses an in-place write to `t` with grad mode on: a leaf
/// that requires grad, a view of one, or a view made under `no_grad` of a
/// tensor that requires grad.
fn inplace_refused(t: &Tensor) -> bool {
    if !t.requires_grad() {
        return false;
    }
    let view = t.state().ag.view.clone();
    t.is_leaf() || view.is_some_and(|v| v.created_in_no_grad || (v.base.is_leaf() && v.base.requires_grad()))
}
