//! The training plan of a specialisation: the joint graph of its
//! functional graph, partitioned, and the checks that decide whether a
//! function's training calls can run it (else they run the eager
//! reference, with the reason `CompiledFn::call_path` reports).

use aot_ir::analysis::alias::AliasInfo;
use aot_ir::transform::joint::{create_joint, JointGraph};
use aot_ir::transform::partition::{partition, Partition};
use aot_ir::transform::FunctionalGraph;
use aot_ir::Graph;

use super::lazy_backward::{AutogradLazyBackwardCompileInfo, CompiledBackwardStage};

/// The training half of a specialisation: joint graph and its partition.
#[derive(Debug)]
pub(crate) struct TrainingPlan {
    pub(crate) joint: JointGraph,
    /// The partition, its forward scheduled into kernels
    /// (`compilers::fw_compiler`); its backward as partitioned, scheduled
    /// on the first `backward()` ([`TrainingPlan::compiled_backward`]).
    pub(crate) partition: Partition,
    /// The liveness of the scheduled forward.
    pub(crate) forward_live: crate::executor::liveness::Liveness,
    lazy_backward: AutogradLazyBackwardCompileInfo,
    /// Per source parameter, the tangents its gradient depends on. A
    /// gradient none of whose tangents arrived is `None`, not zeros, as in
    /// PyTorch (the leaf's `.grad` stays unset).
    pub(crate) grad_tangents: Vec<Vec<usize>>,
    /// Parameters over whose storage a metadata mutation with grad mode on
    /// changes some tensor: eager refuses it when that tensor is a view of
    /// a leaf that requires grad, which only the call's arguments tell.
    pub(crate) metadata_mutated_storages: Vec<usize>,
}

impl TrainingPlan {
    /// `Err` with the reason when the function has no compiled training
    /// path yet (the call then runs the eager reference).
    pub(crate) fn build(fg: &FunctionalGraph, source: &Graph, requires_grad: &[bool]) -> std::result::Result<TrainingPlan, String> {
        // Each `*_supported` check below names a program shape whose eager
        // autograd semantics the joint does not model yet (found by the
        // differential tests); those functions' training calls run eagerly.
        let alias = AliasInfo::compute(source);
        let mut metadata_mutated_storages: Vec<usize> = source
            .nodes
            .iter()
            .filter(|n| !n.no_grad && n.class() == aot_ir::OpClass::MetadataMutation)
            .filter_map(|n| n.target().and_then(|t| alias.input_of(t)))
            .collect();
        metadata_mutated_storages.sort_unstable();
        metadata_mutated_storages.dedup();
        saved_tensors_unwritten(source, &alias, fg, requires_grad)?;
        detach_writes_supported(source, &alias, fg, requires_grad)?;
        detached_reads_supported(source, &alias, fg)?;
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
            if let Some(k) = joint.src_node.get(n.value().index()).copied().flatten() {
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
        let partition = super::compilers::fw_compiler(&joint.name, &partition, &source.params).map_err(|e| e.to_string())?;
        let forward_live = crate::executor::joint::liveness(&partition.forward, partition.num_values);
        let lazy_backward = AutogradLazyBackwardCompileInfo::new(&source.params);
        Ok(TrainingPlan { joint, partition, forward_live, lazy_backward, grad_tangents, metadata_mutated_storages })
    }

    /// The partition with its backward compiled, on first use.
    pub(crate) fn compiled_backward(&self) -> crate::error::Result<&CompiledBackwardStage> {
        self.lazy_backward.get(&self.joint, &self.partition)
    }
}

/// Under `no_grad`, eager's view semantics are their own: a view made
/// there of a tensor that requires grad is a leaf that requires grad (no
/// gradient reaches its base) and refuses in-place writes with grad mode
/// on; a metadata mutation there leaves the tensor's history half rebuilt.
/// None of that is visible while such a view (and every view of it) is
/// only used under `no_grad` (the common case of an optimizer step writing
/// a slice of a parameter) or returned (the epilogue regenerates it under
/// `no_grad`, as eager made it). The joint covers those; a use with grad
/// mode on, and metadata mutations under `no_grad`, run eagerly.
fn no_grad_views_supported(g: &Graph) -> std::result::Result<(), String> {
    use aot_ir::op::AliasEffect;
    let mut tainted = vec![false; g.values.len()];
    for n in &g.nodes {
        if n.no_grad && n.class() == aot_ir::OpClass::MetadataMutation {
            return Err("a metadata mutation under no_grad in a training call runs eagerly for now".into());
        }
        // Its receiver itself (history and all) or a copy without history:
        // which one, only the call tells.
        if n.no_grad && n.is(aot_ir::OpKind::Contiguous) {
            return Err("contiguous() under no_grad in a training call runs eagerly for now".into());
        }
        if !n.no_grad && n.tensor_args().any(|v| tainted[v.index()]) {
            return Err(format!(
                "a view made under no_grad used with grad mode on (by {}) runs eagerly in training calls for now",
                n.op.name()
            ));
        }
        let Some(out) = n.out else { continue };
        // Made here: a view (not `contiguous()`, which returns its receiver
        // itself or a copy, nor `detach()`, history-free either way);
        // passed on by any alias of a tainted value but `detach()`.
        let effect = n.alias_effect();
        let made = n.no_grad && matches!(effect, AliasEffect::View | AliasEffect::MaybeView);
        let passed = matches!(effect, AliasEffect::View | AliasEffect::MaybeView | AliasEffect::MaybeSame)
            && n.receiver().is_some_and(|r| tainted[r.index()]);
        tainted[out.index()] = made || passed;
    }
    Ok(())
}

/// A tensor that an op saved for its backward and that a later op writes
/// in place (with grad mode on or off): eager autograd checks the saved
/// tensor's version when the backward runs and refuses it ("modified by an
/// inplace operation"), as PyTorch does, where the joint would read the
/// functional version and succeed. Such calls run the eager reference, so
/// their backward fails as eager's does. What an op saves is what its rule
/// reads (`grad_rules::saved`); an in-place op's own receiver is saved
/// before it is written (PyTorch keeps the original), so only its result
/// counts.
fn saved_tensors_unwritten(g: &Graph, alias: &AliasInfo, fg: &FunctionalGraph, requires_grad: &[bool]) -> std::result::Result<(), String> {
    use aot_ir::transform::grad_rules::saved::saved_operands;
    let storage = |v: aot_ir::ValueId| call_storage(alias, fg, v);
    // Which values may require grad: a superset (an extra one only sends a
    // call to the reference).
    let mut rg = vec![false; g.values.len()];
    for (p, param) in g.params.iter().enumerate() {
        if let (Some(v), true) = (param.value, requires_grad.get(p).copied().unwrap_or(false)) {
            rg[v.index()] = true;
        }
    }
    // Per storage, the positions of the data writes to it.
    let mut writes: std::collections::HashMap<(bool, u32), Vec<usize>> = std::collections::HashMap::new();
    for (k, n) in g.nodes.iter().enumerate() {
        if n.class() == aot_ir::OpClass::DataMutation {
            if let Some(t) = n.target() {
                writes.entry(storage(t)).or_default().push(k);
            }
        }
    }
    let written_after = |v: aot_ir::ValueId, k: usize| writes.get(&storage(v)).is_some_and(|w| w.iter().any(|&j| j > k));
    for (k, n) in g.nodes.iter().enumerate() {
        let needs: Vec<bool> = n.args.iter().map(|a| a.as_tensor().is_some_and(|v| rg[v.index()])).collect();
        let records = !n.no_grad && needs.iter().any(|&b| b);
        if let Some(v) = n.result() {
            if records || (n.class() == aot_ir::OpClass::View && n.receiver().is_some_and(|r| rg[r.index()])) {
                rg[v.index()] = true;
            }
        }
        let Some(op) = n.kind().filter(|_| records) else { continue };
        let inplace = n.class() == aot_ir::OpClass::DataMutation;
        let rule_op = if inplace { aot_ir::transform::grad_rules::out_of_place(op) } else { Some(op) };
        let Some(saved) = rule_op.and_then(|op| saved_operands(op, &n.args, &needs)) else { continue };
        let inputs = saved.inputs.iter().enumerate().filter(|&(i, &read)| read && !(inplace && i == 0));
        let mut read =
            inputs.filter_map(|(i, _)| n.args.get(i).and_then(aot_ir::Arg::as_tensor)).chain(saved.out.then(|| n.result()).flatten());
        if read.any(|v| written_after(v, k)) {
            return Err(format!(
                "a tensor that `{}` (source op {k}) saved for its backward is written in place later: eager autograd refuses that backward, so the call runs eagerly",
                op.name()
            ));
        }
    }
    Ok(())
}

/// `as_strided_` runs eagerly in training calls: eager rebuilds the
/// tensor's history from its old geometry, which the joint does not model.
/// (`as_strided` views run compiled; one reaching outside the tensor it was
/// taken of falls back at run time, see `executor::joint`.)
fn as_strided_supported(g: &Graph) -> std::result::Result<(), String> {
    if g.nodes.iter().any(|n| n.is(aot_ir::OpKind::AsStridedInplace)) {
        return Err("as_strided_ in a training call runs eagerly for now".into());
    }
    Ok(())
}

/// A `detach()` alias read after a write to its storage is regenerated
/// from the new version, and the functional graph's view chains keep no
/// trace of the detach: the joint would let gradients through it. Such
/// reads run eagerly.
fn detached_reads_supported(g: &Graph, alias: &AliasInfo, fg: &FunctionalGraph) -> std::result::Result<(), String> {
    let detached = |v: aot_ir::ValueId| alias.through_detach.get(v.index()).copied().unwrap_or(false);
    let storage = |v: aot_ir::ValueId| call_storage(alias, fg, v);
    // Per storage, whether it was written since each value was made:
    // track, per value, the number of writes to its storage seen at its
    // definition.
    let mut writes: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    let mut seen_at = vec![0usize; g.values.len()];
    for n in &g.nodes {
        for v in n.tensor_args() {
            // (An op that writes the alias' own storage counts as a write
            // before the read: its rule reads the operand from the new
            // version.)
            let written_here = n.target().is_some_and(|t| t != v && storage(t) == storage(v));
            if detached(v) && (written_here || writes.get(&storage(v)).copied().unwrap_or(0) != seen_at[v.index()]) {
                return Err("a detach() alias read after a write to its storage runs eagerly in training calls for now".into());
            }
        }
        if let Some(t) = n.target() {
            *writes.entry(storage(t)).or_insert(0) += 1;
        }
        if let Some(out) = n.out {
            seen_at[out.index()] = writes.get(&storage(out)).copied().unwrap_or(0);
        }
    }
    Ok(())
}

/// The storage of `v` in this call: arguments that share one (a tensor
/// passed twice, views of one base) are one, their input group.
fn call_storage(alias: &AliasInfo, fg: &FunctionalGraph, v: aot_ir::ValueId) -> (bool, u32) {
    match alias.input_of(v).and_then(|p| fg.groups.group_of.get(p).copied().flatten()) {
        Some(group) => (true, group as u32),
        None => (false, alias.storage_of(v).0),
    }
}

/// Writes through a `detach()` alias are invisible to the base's history,
/// which the joint models as a write under `no_grad` (gradients pass
/// straight through). That is exact while nothing that requires grad is
/// written (eager would give the alias a history of its own) and the
/// alias is only written, never read (the joint would regenerate it from
/// the base, gradients included).
fn detach_writes_supported(g: &Graph, alias: &AliasInfo, fg: &FunctionalGraph, requires_grad: &[bool]) -> std::result::Result<(), String> {
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
            let as_target = i == 0 && (n.kind().is_some_and(aot_ir::OpKind::is_inplace) || n.class() == aot_ir::OpClass::View);
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
                let storage = call_storage(alias, fg, t);
                for (v, r) in rg.iter_mut().enumerate() {
                    *r |= call_storage(alias, fg, aot_ir::ValueId(v as u32)) == storage;
                }
            }
        }
        if let Some(out) = n.out {
            rg[out.index()] = match n.alias_effect() {
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
        let mut d: Vec<usize> = n.tensor_args().flat_map(|u| deps.get(u.index()).cloned().unwrap_or_default()).collect();
        d.sort_unstable();
        d.dedup();
        if let Some(slot) = deps.get_mut(n.value().index()) {
            *slot = d;
        }
    }
    p.grad_slots
        .iter()
        .map(|s| s.and_then(|i| bw.outputs.get(i)).map(|v| deps.get(v.index()).cloned().unwrap_or_default()).unwrap_or_default())
        .collect()
}
