//! The metadata schemas of AOTAutograd (PyTorch's `schemas.py`), with the
//! field and variant names of PyTorch's, as the public API's JSON names them, so that a serialised
//! `CallReport` compares directly with the golden data PyTorch produced.
//!
//! These are the *completed*, per-call records. What the macro knows at
//! compile time is the template in `analysis::collect_metadata`,
//! which the runtime completes with the call's `requires_grad`/`is_leaf`
//! and alias pattern.

use serde::{Deserialize, Serialize};

/// How an input's mutation is applied (PyTorch's `MutationType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MutationType {
    /// Neither the data nor the metadata is mutated.
    NotMutated,
    /// The graph performs the mutation itself (a `copy_` kept in the graph).
    MutatedInGraph,
    /// The graph returns the new value and the runtime epilogue writes it back.
    MutatedOutGraph,
}

/// How an output relates to the inputs and to the other outputs (PyTorch's `OutputType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputType {
    /// Owns its storage (or its aliasing is hidden from autograd).
    NonAlias,
    /// Is one of the inputs, the very tensor.
    IsInput,
    /// A view of the input `base_idx`; regenerated from it after the call.
    AliasOfInput,
    /// A view of an intermediate returned as extra output `base_idx`.
    AliasOfIntermediate,
    /// Like `AliasOfIntermediate`, and the first output to need that base:
    /// the base is saved as extra output `base_idx`.
    AliasOfIntermediateSaveAsOutput,
    /// A view of an intermediate that is itself user output `base_idx`.
    AliasOfIntermediateBaseIsUserOutput,
    /// A view of an intermediate that no other output aliases; returned as an
    /// `_unsafe_view`, hiding the aliasing from autograd.
    UnsafeViewAlias,
}

impl OutputType {
    /// The three kinds regenerated from an intermediate base.
    pub fn is_alias_of_intermediate(self) -> bool {
        matches!(
            self,
            OutputType::AliasOfIntermediate | OutputType::AliasOfIntermediateSaveAsOutput | OutputType::AliasOfIntermediateBaseIsUserOutput
        )
    }

    /// The kinds that count as "not aliased" in the derived counts.
    pub fn is_non_aliased(self) -> bool {
        matches!(self, OutputType::NonAlias | OutputType::UnsafeViewAlias)
    }

    /// The kinds whose base is an input (counted in
    /// `num_outputs_aliased_to_inputs`).
    pub fn is_alias_of_input(self) -> bool {
        matches!(self, OutputType::AliasOfInput | OutputType::IsInput)
    }
}

/// Per-input facts (PyTorch's `InputAliasInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAliasInfo {
    /// The argument is an autograd leaf (`false` for non-tensors).
    pub is_leaf: bool,
    /// An in-place write of the function reaches the input's storage.
    pub mutates_data: bool,
    /// The function changes the input's sizes, strides or offset
    /// (`t_`, `unsqueeze_`, `as_strided_`, ..).
    pub mutates_metadata: bool,
    /// True when no data mutation is visible to autograd. PyTorch counts
    /// only opaque kernel mutations as hidden, so for plain programs this is
    /// "the data is not mutated at all" (and `false` for non-tensors).
    pub mutations_hidden_from_autograd: bool,
    /// The data is mutated, and every mutation happened under `no_grad!`
    /// (or the whole call ran with grad mode off).
    pub mutations_under_no_grad_or_inference_mode: bool,
    /// `set_()`-style storage swaps; the DSL has none, so always false.
    pub mutates_storage_metadata: bool,
    /// The input requires grad after the call (a write of a value that
    /// requires grad makes it require grad).
    pub requires_grad: bool,
    /// The config's `keep_input_mutations`: whether mutations that may stay
    /// in the graph are kept there rather than applied by the runtime.
    pub keep_input_mutations: bool,
    /// Derived from the fields above by [`mutation_type`].
    pub mutation_type: MutationType,
}

/// Per-output facts (PyTorch's `OutputAliasInfo`, the serialised part).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputAliasInfo {
    /// How the output aliases the inputs and the other outputs.
    pub output_type: OutputType,
    /// What the output type refers to: the input (`IsInput`, `AliasOfInput`),
    /// the intermediate base (`AliasOfIntermediate`,
    /// `AliasOfIntermediateSaveAsOutput`) or the user output
    /// (`AliasOfIntermediateBaseIsUserOutput`); `None` for the others.
    pub base_idx: Option<usize>,
    /// The output requires grad (so the backward takes a tangent for it,
    /// unless it aliases an input or an intermediate).
    pub requires_grad: bool,
}

/// Shape and strides of a traced tangent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TangentMeta {
    /// The tangent's sizes.
    pub shape: Vec<usize>,
    /// The tangent's strides, in elements.
    pub stride: Vec<usize>,
}

/// PyTorch's `ViewAndMutationMeta`: everything the runtime wrappers need
/// to know about a call's mutations and aliasing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewAndMutationMeta {
    /// Per argument, tensor or not, in signature order.
    pub input_info: Vec<InputAliasInfo>,
    /// Per user output, in order.
    pub output_info: Vec<OutputAliasInfo>,
    /// How many intermediate bases the forward returns after the user
    /// outputs (one per `AliasOfIntermediateSaveAsOutput`).
    pub num_intermediate_bases: usize,
    /// Whether mutations that may stay in the graph are kept there
    /// (`MutationType::MutatedInGraph`).
    pub keep_input_mutations: bool,
    /// The backward's tangent inputs; left empty by the static analysis
    /// and filled in by the runtime, which knows the shapes.
    pub traced_tangents: Vec<TangentMeta>,
    /// The inputs whose mutation the runtime applies after the call
    /// (`MutationType::MutatedOutGraph`), in order.
    pub mutated_inp_runtime_indices: Vec<usize>,
    /// How many user outputs (`output_info.len()`).
    pub num_outputs: usize,
    /// User outputs that alias nothing the caller sees (`NonAlias`,
    /// `UnsafeViewAlias`).
    pub num_outputs_non_aliased: usize,
    /// User outputs that are an input or a view of one.
    pub num_outputs_aliased_to_inputs: usize,
    /// User outputs regenerated from an intermediate base.
    pub num_outputs_aliased_to_intermediates: usize,
    /// What the forward graph returns: the mutated inputs of
    /// `mutated_inp_runtime_indices`, the user outputs, the intermediate bases.
    pub num_forward_returns: usize,
    /// `num_forward_returns` plus PyTorch's RNG-offset output, which is
    /// never there (RNG functionalization is off).
    pub num_forward: usize,
}

impl ViewAndMutationMeta {
    /// Builds the record and derives the counts the way PyTorch's
    /// `__post_init__` does, so the derived fields can never disagree with
    /// the infos they come from.
    pub fn new(
        input_info: Vec<InputAliasInfo>,
        output_info: Vec<OutputAliasInfo>,
        num_intermediate_bases: usize,
        keep_input_mutations: bool,
        traced_tangents: Vec<TangentMeta>,
    ) -> Self {
        let mutated_inp_runtime_indices: Vec<usize> =
            input_info.iter().enumerate().filter(|(_, i)| i.mutation_type == MutationType::MutatedOutGraph).map(|(k, _)| k).collect();
        let count = |f: fn(OutputType) -> bool| output_info.iter().filter(|o| f(o.output_type)).count();
        let num_outputs = output_info.len();
        let num_outputs_non_aliased = count(OutputType::is_non_aliased);
        let num_outputs_aliased_to_inputs = count(OutputType::is_alias_of_input);
        let num_outputs_aliased_to_intermediates = count(OutputType::is_alias_of_intermediate);
        let num_forward_returns = mutated_inp_runtime_indices.len() + num_outputs + num_intermediate_bases;
        ViewAndMutationMeta {
            input_info,
            output_info,
            num_intermediate_bases,
            keep_input_mutations,
            traced_tangents,
            mutated_inp_runtime_indices,
            num_outputs,
            num_outputs_non_aliased,
            num_outputs_aliased_to_inputs,
            num_outputs_aliased_to_intermediates,
            // No RNG-offset output: RNG functionalization is off, as in the oracle.
            num_forward: num_forward_returns,
            num_forward_returns,
        }
    }
}

/// Whether an input mutation can stay in the graph (PyTorch's
/// `_check_if_mutation_can_be_in_graph`): only data mutations that autograd
/// need not see, i.e. of an input that does not require grad and has no
/// metadata mutation, or mutations hidden from autograd or made under no_grad.
pub fn mutation_can_be_in_graph(
    keep_input_mutations: bool,
    mutates_data: bool,
    mutates_metadata: bool,
    mutations_hidden_from_autograd: bool,
    mutations_under_no_grad_or_inference_mode: bool,
    mutates_storage_metadata: bool,
    requires_grad: bool,
) -> bool {
    let in_graph = keep_input_mutations
        && (mutates_data || mutates_storage_metadata)
        && ((!mutates_metadata && !requires_grad) || mutations_hidden_from_autograd || mutations_under_no_grad_or_inference_mode);
    in_graph || mutates_storage_metadata
}

/// PyTorch's `_get_mutation_type`.
pub fn mutation_type(info: &InputAliasInfo) -> MutationType {
    if !info.mutates_data && !info.mutates_metadata {
        return MutationType::NotMutated;
    }
    if mutation_can_be_in_graph(
        info.keep_input_mutations,
        info.mutates_data,
        info.mutates_metadata,
        info.mutations_hidden_from_autograd,
        info.mutations_under_no_grad_or_inference_mode,
        info.mutates_storage_metadata,
        info.requires_grad,
    ) {
        MutationType::MutatedInGraph
    } else {
        MutationType::MutatedOutGraph
    }
}

/// The duplicate-argument specialisation (`AOTDedupeWrapper`), when one was needed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupeInfo {
    /// Per original argument: kept (the first occurrence of its tensor), or
    /// dropped as a duplicate of an earlier one.
    pub keep_arg_mask: Vec<bool>,
    /// Per original argument, the index among the kept arguments of the
    /// tensor it is.
    pub add_dupe_map: Vec<usize>,
    /// The metadata of the call on the kept arguments.
    pub meta: ViewAndMutationMeta,
}

/// One entry of `synthetic_base_info`: an argument kept as is (its new
/// index), or regenerated as a view of synthetic base `base`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SyntheticBaseEntry {
    /// The argument is kept, as the new argument at this index.
    Index(usize),
    /// The argument is regenerated as this view of a synthetic base.
    View {
        /// The synthetic base's index among the new arguments.
        base: usize,
        /// The view's sizes.
        size: Vec<usize>,
        /// The view's strides, in elements.
        stride: Vec<usize>,
        /// The view's offset in the base's storage, in elements.
        storage_offset: usize,
    },
}

/// The synthetic-base specialisation (`AOTSyntheticBaseWrapper`), when one was needed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticBaseInfo {
    /// The original arguments regenerated from a synthetic base whose
    /// metadata the function mutates: the runtime applies those mutations to
    /// the caller's tensors after the call.
    pub aliased_arg_idx_with_metadata_mutations: Vec<usize>,
    /// The metadata of the call on the merged arguments (synthetic bases
    /// first).
    pub meta: ViewAndMutationMeta,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(mutates_data: bool, requires_grad: bool) -> InputAliasInfo {
        let mut i = InputAliasInfo {
            is_leaf: true,
            mutates_data,
            mutates_metadata: false,
            mutations_hidden_from_autograd: !mutates_data,
            mutations_under_no_grad_or_inference_mode: false,
            mutates_storage_metadata: false,
            requires_grad,
            keep_input_mutations: true,
            mutation_type: MutationType::NotMutated,
        };
        i.mutation_type = mutation_type(&i);
        i
    }

    #[test]
    fn mutation_type_follows_the_in_graph_rule() {
        assert_eq!(input(false, true).mutation_type, MutationType::NotMutated);
        assert_eq!(input(true, false).mutation_type, MutationType::MutatedInGraph);
        assert_eq!(input(true, true).mutation_type, MutationType::MutatedOutGraph);
        let mut meta_only = input(false, false);
        meta_only.mutates_metadata = true;
        assert_eq!(mutation_type(&meta_only), MutationType::MutatedOutGraph);
    }

    #[test]
    fn json_names_match_the_contract() {
        let meta = ViewAndMutationMeta::new(
            vec![input(true, true), input(false, false)],
            vec![OutputAliasInfo { output_type: OutputType::AliasOfIntermediateSaveAsOutput, base_idx: Some(0), requires_grad: true }],
            1,
            true,
            vec![],
        );
        let v = serde_json::to_value(&meta).unwrap();
        assert_eq!(v["input_info"][0]["mutation_type"], "mutated_out_graph");
        assert_eq!(v["output_info"][0]["output_type"], "alias_of_intermediate_save_as_output");
        assert_eq!(v["mutated_inp_runtime_indices"], serde_json::json!([0]));
        assert_eq!(v["num_forward_returns"], 3);
        assert_eq!(v["num_outputs_aliased_to_intermediates"], 1);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 12);
        let e = serde_json::to_value(SyntheticBaseEntry::View { base: 0, size: vec![2], stride: vec![1], storage_offset: 2 }).unwrap();
        assert_eq!(e, serde_json::json!({"base": 0, "size": [2], "stride": [1], "storage_offset": 2}));
        assert_eq!(serde_json::to_value(SyntheticBaseEntry::Index(3)).unwrap(), serde_json::json!(3));
    }
}
