//! `explain()`: PyTorch's `ViewAndMutationMeta` for a call, with the
//! dedupe and synthetic-base decisions of the plan it runs, without
//! running it on the caller's tensors.

use super::{observation_run, specialize, tangents, CallReport, CompiledFn};
use crate::arg::Arg;
use crate::error::Result;
use crate::tensor::is_grad_enabled;
use crate::wrappers::dedupe::AOTDedupeWrapper;
use crate::wrappers::synthetic_base::AOTSyntheticBaseWrapper;
use crate::wrappers::Mutations;
use aot_ir::{ArgFacts, CallFacts, StaticMeta, ViewAndMutationMeta};

impl CompiledFn {
    /// What a call with these arguments would do, without running it.
    ///
    /// `fw_metadata` is the static template completed with the arguments'
    /// `requires_grad` and `is_leaf`, the current grad mode, and which
    /// arguments are the very same tensor (all read from the call's guard
    /// key). Where the template's answer depends on the arguments' shapes,
    /// layouts or dtypes, and for the `traced_tangents` when some input
    /// requires grad, one run on copies of the arguments (`observation_run.rs`)
    /// supplies what PyTorch learns by running the function.
    ///
    /// The dedupe and synthetic-base decisions are those of the plan a
    /// call with these arguments runs: its specialisation is looked up
    /// (or built) through the call's cache. The plan's decisions were made
    /// on the static template's mutation facts; where a run on copies
    /// showed other facts (a `t_()` that changed nothing, a `reshape` that
    /// aliased otherwise), the same pre-compile steps are run again on
    /// what the run showed, as PyTorch would decide. (The call itself
    /// stays right either way: a `reshape` that aliases otherwise sends it
    /// to a fallback, and a duplicate is one object of the graph under
    /// either dedupe strategy.)
    ///
    /// Struct arguments ([`Arg::tree`]) are flattened first: the report
    /// has one input per graph input (`m.w1`, ...), then one per leaf of a
    /// struct argument that the body never reads, in declaration order
    /// (PyTorch's export lifts every parameter and buffer; such an input
    /// is not mutated, and requires grad as its tensor does).
    pub fn explain(&self, args: &[Arg]) -> Result<CallReport> {
        let f = self.variant(args)?;
        let mut report = f.with_flat(args, |args| f.explain_flat(args))?;
        if let Some(b) = &f.boundary {
            let grad_enabled = is_grad_enabled();
            for u in b.unread(args) {
                report.fw_metadata.input_info.push(aot_ir::InputAliasInfo {
                    is_leaf: u.tensor.is_leaf(),
                    mutates_data: false,
                    mutates_metadata: false,
                    mutations_hidden_from_autograd: true,
                    mutations_under_no_grad_or_inference_mode: false,
                    mutates_storage_metadata: false,
                    requires_grad: grad_enabled && u.tensor.requires_grad(),
                    keep_input_mutations: true,
                    mutation_type: aot_ir::MutationType::NotMutated,
                });
            }
        }
        Ok(report)
    }

    /// [`explain`](Self::explain) on the graph's arguments (struct arguments
    /// flattened).
    pub(super) fn explain_flat(&self, args: &[Arg]) -> Result<CallReport> {
        crate::arg::scalar_values(&self.graph, args)?;
        // The alias part is left out of the cache's key when the function
        // mutates no input; the report still says which are the same tensor.
        let full = specialize::ProbeKey::with_aliases(args);
        let spec = match self.meta.mutates_inputs {
            true => self.cache.get_probed(&self.graph, &self.meta, &full)?,
            false => self.cache.get(&self.graph, &self.meta, args)?,
        };
        let pattern = full.pattern();
        let facts = (0..args.len())
            .map(|i| match pattern.0[i] {
                a if a.is_tensor => {
                    ArgFacts { is_tensor: true, requires_grad: full.requires_grad(i), is_leaf: full.is_leaf(i), identity: a.same_as }
                }
                _ => ArgFacts { is_tensor: false, requires_grad: false, is_leaf: false, identity: i },
            })
            .collect();
        let facts = CallFacts { args: facts, grad_enabled: is_grad_enabled(), keep_input_mutations: true, observed: None };
        let mut fw_metadata = self.observed_metadata(args, facts);
        // The wrappers' decisions in PyTorch's order: dedupe, then synthetic
        // bases on the deduplicated arguments and metadata.
        let plan = &spec.plan;
        let observed = Mutations::of_metadata(&fw_metadata);
        let redone;
        let (dedupe, synthetic_base) = if observed == plan.mutations {
            (&plan.dedupe, &plan.synthetic_base)
        } else {
            let dedupe = AOTDedupeWrapper::pre_compile(&pattern, &observed);
            let synthetic_base = AOTSyntheticBaseWrapper::pre_compile(&pattern, &observed, &dedupe);
            redone = (dedupe, synthetic_base);
            (&redone.0, &redone.1)
        };
        let dedupe_info = dedupe.report(&fw_metadata);
        let deduped_meta = dedupe_info.as_ref().map_or(&fw_metadata, |d| &d.meta);
        let (synthetic_base_info, synthetic_base) = match synthetic_base.report(&dedupe.remove_dupe_args(args), deduped_meta) {
            Some((info, sb)) => (Some(info), Some(sb)),
            None => (None, None),
        };
        if dedupe_info.is_none() && synthetic_base.is_none() {
            // PyTorch compiles with this very metadata object and then drops
            // its traced tangents (they hold fake tensors); its report shows
            // them only on the metadata the wrappers rewrote.
            fw_metadata.traced_tangents.clear();
        }
        Ok(CallReport { fw_metadata, dedupe: dedupe_info, synthetic_base_info, synthetic_base })
    }

    /// The template completed with the call's facts, and where needed with
    /// what a run on copies of the arguments showed (see
    /// [`explain`](Self::explain)).
    fn observed_metadata(&self, args: &[Arg], mut facts: CallFacts) -> ViewAndMutationMeta {
        let mut fw_metadata = self.meta.complete(&facts);
        let any_grad = fw_metadata.input_info.iter().any(|i| i.requires_grad);
        if !any_grad && !self.meta.needs_observation {
            return fw_metadata;
        }
        // Running on copies draws random numbers: from a private copy of
        // the generator, so that explaining a call consumes nothing.
        let run = crate::ops::with_private_rng(|| observation_run::CopyRun::new(&self.graph, args));
        // A run that fails leaves the template's answer (the call fails too).
        let Some(run) = run else { return fw_metadata };
        // A matmul's `_unsafe_view` output matters only in a call that
        // records grad, where the run above was needed anyway.
        let matmul_out = any_grad && self.meta.outputs.iter().any(|o| o.matmul_deps.is_some());
        if self.meta.needs_observation || matmul_out {
            // Where a `reshape`/`contiguous` decides whether an input is
            // written, the template is redone knowing what they did.
            let redone = run.outcomes.iter().any(Option::is_some).then(|| StaticMeta::compute_with(&self.graph, &run.outcomes));
            let meta = redone.as_ref().unwrap_or(&self.meta);
            facts.observed = Some(run.observation(meta));
            fw_metadata = meta.complete(&facts);
        }
        if any_grad {
            fw_metadata.traced_tangents = tangents::traced_tangents(&run, &fw_metadata).unwrap_or_default();
        }
        fw_metadata
    }
}
