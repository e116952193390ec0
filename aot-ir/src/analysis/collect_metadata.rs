//! The static half of PyTorch's `run_functionalized_fw_and_collect_metadata`.
//!
//! PyTorch learns a function's mutations and aliasing by running it once on
//! functional tensors. Most of what it learns depends only on the program:
//! which inputs are mutated and how, which outputs are views of which input
//! or intermediate. The rest depends on the call: `requires_grad` and
//! `is_leaf` of the arguments, and which arguments are the same tensor.
//!
//! So the macro computes a [`StaticMeta`] template at compile time, and
//! [`StaticMeta::complete`] fills in a call's facts to give exactly the
//! `ViewAndMutationMeta` PyTorch would record, without re-analysing the graph.
//!
//! `requires_grad` of an output is a static function of the inputs' flags:
//! each value carries the set of inputs whose gradient reaches it
//! (`grad_deps`), kept per autograd group so that an in-place op on a view
//! also makes its base (and the base's other views) require grad, as eager
//! autograd does.

use super::alias::{AliasInfo, LayoutTracker, StorageOwner};
use super::meta_template::{ArgFacts, CallFacts, InputTemplate, OutputAlias, OutputTemplate, StaticMeta};
use super::meta_template::{ObservedAlias, ObservedOutput};
use super::observed::{is_to_dtype, mark_layout_uncertain};
use crate::graph::{Graph, Node};
use crate::op::{AliasEffect, OpClass, OpKind};
use crate::schema::{mutation_type, InputAliasInfo, OutputAliasInfo, OutputType, ViewAndMutationMeta};
use crate::types::{Arg, ValueId};
use std::collections::{BTreeSet, HashMap};

impl StaticMeta {
    /// Analyses a graph. The graph must verify.
    pub fn compute(g: &Graph) -> StaticMeta {
        StaticMeta::compute_with(g, &[])
    }

    /// As [`StaticMeta::compute`], with the aliasing outcome of some
    /// `reshape`/`contiguous` nodes known from a run (see
    /// [`AliasInfo::compute_with`]): whether an input is mutated through
    /// one can depend on it.
    pub fn compute_with(g: &Graph, outcomes: &[Option<bool>]) -> StaticMeta {
        let alias = AliasInfo::compute_with(g, outcomes);
        let mut layouts = LayoutTracker::new(g, &alias);
        let mut c = Collector::new(g, &alias);
        for (k, node) in g.nodes.iter().enumerate() {
            layouts.apply(g, &alias, k);
            c.visit(node);
        }
        let Collector { mut inputs, detach_writes, mut uncertain, deps, grad_mode_deps, view_deps, frozen, rg_deps, .. } = c;
        let group = |v: ValueId| alias.grad_root[v.index()];
        for (p, inp) in inputs.iter_mut().enumerate() {
            inp.mutated_only_through_detach = inp.data_mutations > 0 && detach_writes[p] == inp.data_mutations;
            if let Some(v) = g.params[p].value {
                inp.final_grad_deps = deps.get(&group(v)).map(|s| s.iter().copied().collect()).unwrap_or_default();
            }
        }

        // Interned layout keys: equal keys mean identical metadata.
        let mut keys: Vec<super::alias::LayoutPath> = Vec::new();
        let mut outputs = Vec::with_capacity(g.outputs.len());
        for &v in &g.outputs {
            let identity = alias.identity[v.index()];
            uncertain |= alias.uncertain[v.index()];
            let out_alias = match alias.owner_of(v) {
                StorageOwner::Input(p) if g.params[p].value == Some(identity) => OutputAlias::IsInput(p),
                StorageOwner::Input(p) => OutputAlias::AliasOfInput(p),
                StorageOwner::Intermediate(owner) if owner == identity => OutputAlias::NonAlias,
                StorageOwner::Intermediate(owner) => OutputAlias::AliasOfIntermediate(owner),
            };
            let layout_key = match layouts.path(v) {
                Some(path) => match keys.iter().position(|k| k == path) {
                    Some(i) => i as u32,
                    None => {
                        keys.push(path.clone());
                        (keys.len() - 1) as u32
                    }
                },
                None => u32::MAX,
            };
            outputs.push(OutputTemplate {
                value: v,
                identity,
                alias: out_alias,
                storage: alias.storage_of(v).0,
                layout_key,
                base: alias.autograd_base[v.index()],
                grad_deps: frozen.get(&v).or_else(|| deps.get(&group(v))).map(|s| s.iter().copied().collect()).unwrap_or_default(),
                grad_deps_grad_mode_off: view_deps[v.index()].iter().copied().collect(),
                no_grad_view: frozen.contains_key(&v),
                static_type: None,
                alias_uncertain: alias.uncertain[v.index()] || is_to_dtype(g, alias.owner_of(v)),
                matmul_deps: matmul_deps(g, v, &rg_deps),
            });
        }
        mark_layout_uncertain(&mut outputs, &keys);

        // A `reshape`/`contiguous` and a write: whether the write reaches an
        // input can hang on the reshape's outcome.
        let maybe_written_through_reshape =
            g.nodes.iter().any(|n| matches!(n.alias_effect(), AliasEffect::MaybeView | AliasEffect::MaybeSame))
                && g.nodes.iter().any(|n| n.kind().is_some_and(OpKind::is_inplace));
        let uncertain = uncertain || maybe_written_through_reshape;
        let needs_observation = uncertain || inputs.iter().any(|i| i.mutates_metadata) || outputs.iter().any(|o| o.alias_uncertain);
        let mut meta = StaticMeta {
            mutates_inputs: inputs.iter().any(|i| i.mutates_data() || i.mutates_metadata),
            needs_observation,
            inputs,
            outputs,
            has_random_ops: g.nodes.iter().any(|n| n.kind().is_some_and(OpKind::is_random)),
            uncertain,
            grad_mode_deps: grad_mode_deps.into_iter().collect(),
        };
        meta.fill_static_types();
        for o in meta.outputs.iter_mut().filter(|o| o.matmul_deps.is_some()) {
            o.static_type = None;
        }
        meta
    }

    /// An output's type is static when every `requires_grad` pattern of
    /// distinct arguments gives the same answer. With many tensor inputs,
    /// only the inputs the outputs depend on are enumerated.
    fn fill_static_types(&mut self) {
        let is_tensor: Vec<bool> = self.inputs.iter().map(|i| i.is_tensor).collect();
        let relevant: Vec<usize> = {
            let mut s: BTreeSet<usize> = BTreeSet::new();
            for o in &self.outputs {
                s.extend(o.grad_deps.iter().copied());
            }
            s.into_iter().collect()
        };
        // An uncertain output can change the others' types too (how many
        // outputs share a storage).
        if relevant.len() > 12 || self.outputs.iter().any(|o| o.alias_uncertain) {
            return;
        }
        let mut seen: Vec<Option<Option<OutputType>>> = vec![None; self.outputs.len()];
        for mask in 0u32..(1 << relevant.len()) {
            let mut rg = vec![false; is_tensor.len()];
            for (bit, &i) in relevant.iter().enumerate() {
                rg[i] = mask & (1 << bit) != 0;
            }
            let meta = self.complete(&CallFacts::distinct(&rg, &is_tensor));
            for (slot, info) in seen.iter_mut().zip(&meta.output_info) {
                *slot = match *slot {
                    None => Some(Some(info.output_type)),
                    Some(Some(t)) if t == info.output_type => Some(Some(t)),
                    _ => Some(None),
                };
            }
        }
        for (o, s) in self.outputs.iter_mut().zip(seen) {
            o.static_type = s.flatten();
        }
    }

    /// Completes the template with a call's facts into the metadata PyTorch
    /// would collect for that call. `traced_tangents` is left empty: it needs
    /// shapes, which the runtime supplies.
    pub fn complete(&self, facts: &CallFacts) -> ViewAndMutationMeta {
        let arg = |i: usize| arg_facts(facts, i);
        let rg = |deps: &[usize]| facts.grad_enabled && deps.iter().any(|&i| arg(i).requires_grad);
        let same = |i: usize, j: usize| same_tensor(facts, i, j);
        let n = self.inputs.len();
        let input_info: Vec<InputAliasInfo> = (0..n).map(|i| self.complete_input(facts, i)).collect();

        // PyTorch maps each input storage to the *last* argument holding it.
        let last_same = |p: usize| (0..n).rev().find(|&j| same(p, j)).unwrap_or(p);
        let out_rg: Vec<bool> = self.outputs.iter().map(|o| rg(&o.grad_deps)).collect();
        // How the outputs alias: what the run showed, else the template.
        let outs: Vec<ObservedOutput> = match &facts.observed {
            Some(obs) if obs.outputs.len() == self.outputs.len() => obs.outputs.clone(),
            _ => self.outputs.iter().map(ObservedOutput::from_template).collect(),
        };
        let count_in_storage = |s: u32| outs.iter().filter(|o| o.storage == s).count();
        // The last output index holding each tensor object.
        let last_out = |id: u32| outs.iter().rposition(|o| o.object == id);

        let mut bases: Vec<u32> = Vec::new();
        let mut output_info = Vec::with_capacity(outs.len());
        for (k, o) in outs.iter().enumerate() {
            let (output_type, base_idx) = match o.alias {
                ObservedAlias::IsInput(p) => (OutputType::IsInput, Some(last_same(p))),
                ObservedAlias::AliasOfInput(p) => (OutputType::AliasOfInput, Some(last_same(p))),
                ObservedAlias::Intermediate if o.base.is_none() && out_rg[k] && self.unsafe_view(k, o, facts) => {
                    (OutputType::UnsafeViewAlias, None)
                }
                ObservedAlias::Intermediate => {
                    let aliased = count_in_storage(o.storage);
                    // The base is in o's autograd group, so it requires grad exactly when o does.
                    match o.base {
                        Some(base) if out_rg[k] => {
                            if aliased == 1 {
                                (OutputType::UnsafeViewAlias, None)
                            } else if let Some(j) = last_out(base) {
                                (OutputType::AliasOfIntermediateBaseIsUserOutput, Some(j))
                            } else if let Some(j) = bases.iter().position(|&b| b == base) {
                                (OutputType::AliasOfIntermediate, Some(j))
                            } else {
                                bases.push(base);
                                (OutputType::AliasOfIntermediateSaveAsOutput, Some(bases.len() - 1))
                            }
                        }
                        _ => {
                            // `(out, out.detach())`: the detached output is
                            // regenerated from its twin that requires grad.
                            let twin = outs
                                .iter()
                                .enumerate()
                                .find(|&(j, t)| t.object != o.object && t.storage == o.storage && t.layout == o.layout && out_rg[j]);
                            // A view that does not require grad, with the very
                            // metadata of its base, itself an output: PyTorch
                            // regenerates it from that output, so that the two
                            // stay distinct objects (pytorch#191449).
                            let same_as_base =
                                o.base.and_then(last_out).filter(|&j| outs[j].storage == o.storage && outs[j].layout == o.layout);
                            match (twin, same_as_base) {
                                (Some((_, t)), _) if aliased > 1 && !out_rg[k] => {
                                    (OutputType::AliasOfIntermediateBaseIsUserOutput, last_out(t.object))
                                }
                                (_, Some(j)) => (OutputType::AliasOfIntermediateBaseIsUserOutput, Some(j)),
                                _ => (OutputType::NonAlias, None),
                            }
                        }
                    }
                }
            };
            output_info.push(OutputAliasInfo { output_type, base_idx, requires_grad: out_rg[k] });
        }
        ViewAndMutationMeta::new(input_info, output_info, bases.len(), facts.keep_input_mutations, Vec::new())
    }
}

impl StaticMeta {
    /// Whether output `k`, as observed in `o`, is a `matmul`'s
    /// `_unsafe_view` of its product that no other output shares.
    fn unsafe_view(&self, k: usize, o: &ObservedOutput, facts: &CallFacts) -> bool {
        let rg = |deps: &[usize]| facts.grad_enabled && deps.iter().any(|&i| arg_facts(facts, i).requires_grad);
        let alone = facts.observed.as_ref().is_some_and(|obs| obs.outputs.iter().filter(|t| t.storage == o.storage).count() == 1);
        match (o.matmul, self.outputs.get(k).and_then(|t| t.matmul_deps.as_ref())) {
            (Some(shape), Some((lhs, rhs))) => alone && shape.unsafe_view(rg(lhs), rg(rhs)),
            _ => false,
        }
    }

    /// Input `i`'s `InputAliasInfo` for a call with these facts.
    fn complete_input(&self, facts: &CallFacts, i: usize) -> InputAliasInfo {
        let t = &self.inputs[i];
        let arg = arg_facts(facts, i);
        let rg = |deps: &[usize]| facts.grad_enabled && deps.iter().any(|&j| arg_facts(facts, j).requires_grad);
        let not_mutated = crate::schema::MutationType::NotMutated;
        if !t.is_tensor || !arg.is_tensor {
            return InputAliasInfo {
                is_leaf: false,
                mutates_data: false,
                mutates_metadata: false,
                mutations_hidden_from_autograd: false,
                mutations_under_no_grad_or_inference_mode: false,
                mutates_storage_metadata: false,
                requires_grad: false,
                keep_input_mutations: facts.keep_input_mutations,
                mutation_type: not_mutated,
            };
        }
        // An argument passed twice is one tensor: PyTorch sees the
        // mutations of both parameters on it.
        let n = self.inputs.len();
        let group: Vec<usize> = (0..n).filter(|&j| self.inputs[j].is_tensor && same_tensor(facts, i, j)).collect();
        let writes: u32 = group.iter().map(|&j| self.inputs[j].data_mutations).sum();
        let no_grad_writes: u32 = group.iter().map(|&j| self.inputs[j].data_mutations_under_no_grad).sum();
        let mutates_data = writes > 0;
        let mut info = InputAliasInfo {
            is_leaf: arg.is_leaf,
            mutates_data,
            // A run that left the tensor's metadata as it was shows
            // PyTorch's answer: no metadata mutation.
            mutates_metadata: group.iter().any(|&j| self.inputs[j].mutates_metadata)
                && !facts.observed.as_ref().is_some_and(|o| o.metadata_unchanged(i)),
            mutations_hidden_from_autograd: !mutates_data,
            mutations_under_no_grad_or_inference_mode: mutates_data && (no_grad_writes == writes || !facts.grad_enabled),
            mutates_storage_metadata: false,
            requires_grad: group.iter().any(|&j| rg(&self.inputs[j].final_grad_deps)),
            keep_input_mutations: facts.keep_input_mutations,
            mutation_type: not_mutated,
        };
        info.mutation_type = mutation_type(&info);
        info
    }
}

/// Argument `i`'s facts; past the end, a non-tensor of its own identity.
fn arg_facts(facts: &CallFacts, i: usize) -> ArgFacts {
    facts.args.get(i).copied().unwrap_or(ArgFacts { is_tensor: false, requires_grad: false, is_leaf: false, identity: usize::MAX - i })
}

/// Whether arguments `i` and `j` are the very same tensor.
fn same_tensor(facts: &CallFacts, i: usize, j: usize) -> bool {
    let (a, b) = (arg_facts(facts, i), arg_facts(facts, j));
    a.is_tensor && b.is_tensor && a.identity == b.identity
}

/// The walk over the nodes behind [`StaticMeta::compute_with`]: mutation
/// counts per input, and the gradient dependencies of every value.
struct Collector<'a> {
    g: &'a Graph,
    alias: &'a AliasInfo,
    inputs: Vec<InputTemplate>,
    detach_writes: Vec<u32>,
    uncertain: bool,
    /// Gradient dependencies per autograd group (keyed by group root).
    deps: HashMap<ValueId, BTreeSet<usize>>,
    /// Per value, the inputs whose `requires_grad` makes it require grad
    /// (a view made under `no_grad` of one that does still does).
    rg_deps: Vec<BTreeSet<usize>>,
    /// The inputs that reach an op run with grad mode on.
    grad_mode_deps: BTreeSet<usize>,
    /// Per value, what `rg_deps` is for a call with grad mode off: only
    /// views pass `requires_grad` on.
    view_deps: Vec<BTreeSet<usize>>,
    /// Views made under `no_grad` (and views of them) keep the gradient
    /// dependencies their base had when they were made: eager never
    /// regenerates their history from the base, so a later write to the
    /// base does not make them require grad.
    frozen: HashMap<ValueId, BTreeSet<usize>>,
}

impl<'a> Collector<'a> {
    fn new(g: &'a Graph, alias: &'a AliasInfo) -> Collector<'a> {
        let inputs = g
            .params
            .iter()
            .map(|p| InputTemplate {
                is_tensor: p.ty.is_tensor(),
                data_mutations: 0,
                data_mutations_under_no_grad: 0,
                mutates_metadata: false,
                mutated_only_through_detach: false,
                final_grad_deps: Vec::new(),
            })
            .collect();
        let mut deps = HashMap::new();
        let mut rg_deps: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); g.values.len()];
        for (i, p) in g.params.iter().enumerate() {
            if let Some(v) = p.value {
                deps.insert(v, BTreeSet::from([i]));
                rg_deps[v.index()].insert(i);
            }
        }
        Collector {
            g,
            alias,
            inputs,
            detach_writes: vec![0; g.params.len()],
            uncertain: false,
            deps,
            view_deps: rg_deps.clone(),
            rg_deps,
            grad_mode_deps: BTreeSet::new(),
            frozen: HashMap::new(),
        }
    }

    fn group(&self, v: ValueId) -> ValueId {
        self.alias.grad_root[v.index()]
    }

    fn visit(&mut self, node: &Node) {
        self.requires_grad_flags(node);
        let n = node.args.len();
        let sources: BTreeSet<usize> = if let (true, Some(op)) = (node.is_differentiable(), node.kind()) {
            (0..n)
                .filter(|&i| op.differentiable_arg(i, n))
                .filter_map(|i| node.args.get(i).and_then(Arg::as_tensor))
                .filter(|v| node.target() != Some(*v))
                .flat_map(|v| self.deps.get(&self.group(v)).cloned().unwrap_or_default())
                .collect()
        } else {
            BTreeSet::new()
        };
        match node.class() {
            OpClass::DataMutation => self.data_mutation(node, sources),
            OpClass::MetadataMutation => {
                let Some(t) = node.target() else { return };
                let id = self.alias.identity[t.index()];
                if let Some(p) = self.g.param_of(id) {
                    self.inputs[p].mutates_metadata = true;
                    self.uncertain |= self.alias.uncertain[t.index()];
                }
            }
            OpClass::View | OpClass::Compute => self.new_value(node, sources),
        }
    }

    /// The inputs whose `requires_grad` reaches the node's output, with
    /// grad mode on and off.
    fn requires_grad_flags(&mut self, node: &Node) {
        let reads: BTreeSet<usize> = node.tensor_args().flat_map(|v| self.rg_deps[v.index()].iter().copied()).collect();
        if node.is_differentiable() {
            self.grad_mode_deps.extend(reads.iter().copied());
        }
        let Some(out) = node.out else { return };
        let receiver = |deps: &[BTreeSet<usize>]| node.receiver().map(|r| deps[r.index()].clone()).unwrap_or_default();
        let is_view = matches!(node.alias_effect(), AliasEffect::View | AliasEffect::MaybeView | AliasEffect::MaybeSame);
        self.view_deps[out.index()] = if is_view { receiver(&self.view_deps) } else { BTreeSet::new() };
        self.rg_deps[out.index()] = match node.alias_effect() {
            AliasEffect::Detach => BTreeSet::new(),
            _ if is_view => receiver(&self.rg_deps),
            _ if node.no_grad => BTreeSet::new(),
            _ => reads,
        };
    }

    fn data_mutation(&mut self, node: &Node, sources: BTreeSet<usize>) {
        let Some(t) = node.target() else { return };
        if let Some(p) = self.alias.input_of(t) {
            let inp = &mut self.inputs[p];
            inp.data_mutations += 1;
            inp.data_mutations_under_no_grad += u32::from(node.no_grad);
            self.detach_writes[p] += u32::from(self.alias.through_detach[t.index()]);
            self.uncertain |= self.alias.uncertain[t.index()];
        }
        if !node.no_grad {
            if let Some(f) = self.frozen.get_mut(&t) {
                f.extend(sources.iter().copied());
            }
            let group = self.group(t);
            self.deps.entry(group).or_default().extend(sources);
        }
    }

    fn new_value(&mut self, node: &Node, sources: BTreeSet<usize>) {
        let Some(out) = node.out else { return };
        // (A `reshape` that views counts; one that copies made a tensor
        // that requires grad only if this says so too.)
        if matches!(node.alias_effect(), AliasEffect::View | AliasEffect::MaybeView) {
            if let Some(r) = node.receiver() {
                let held = match self.frozen.get(&r) {
                    Some(f) => Some(f.clone()),
                    None => node.no_grad.then(|| self.deps.get(&self.group(r)).cloned().unwrap_or_default()),
                };
                if let Some(h) = held {
                    self.frozen.insert(out, h);
                }
            }
        }
        // Views and `contiguous` join their receiver's group; the
        // receiver's dependencies are already the group's.
        if self.group(out) == out {
            self.deps.insert(out, sources);
        }
    }
}

#[cfg(test)]
mod tests;

/// For an output `v` that is a `matmul`'s own result, the gradient
/// dependencies of its left and right operands.
fn matmul_deps(g: &Graph, v: ValueId, rg_deps: &[BTreeSet<usize>]) -> Option<(Vec<usize>, Vec<usize>)> {
    let n = g.def_node(v).filter(|n| n.is(OpKind::Matmul))?;
    let mut operands = n.tensor_args().map(|a| rg_deps.get(a.index()).map(|s| s.iter().copied().collect()).unwrap_or_default());
    Some((operands.next()?, operands.next()?))
}
