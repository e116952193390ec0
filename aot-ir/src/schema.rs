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

    pub fn is_alias_of_input(self) -> bool {
        matches!(self, OutputType::AliasOfInput | OutputType::IsInput)
    }
}

/// Per-input facts (PyTorch's `InputAliasInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAliasInfo {
    pub is_leaf: bool,
    pub mutates_data: bool,
    pub mutates_metadata: bool,
    /// True when no data mutation is visible to autograd. PyTorch counts
    /// only opaque kernel mutations as hidden, so for plain programs this is
    /// "the data is not mutated at all" (and `false` for non-tensors).
    pub mutations_hidden_from_autograd: bool,
    pub mutations_under_no_grad_or_inference_mode: bool,
    /// `set_()`-style storage swaps; the DSL has none, so always false.
    pub mutates_storage_metadata: bool,
    pub requires_grad: bool,
    pub keep_input_mutations: bool,
    pub mutation_type: MutationType,
}

/// Per-output facts (PyTorch's `OutputAliasInfo`, the serialised part).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputAliasInfo {
    pub output_type: OutputType,
    pub base_idx: Option<usize>,
    pub requires_grad: bool,
}

/// Shape and strides of a traced tangent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TangentMeta {
    pub shape: Vec<usize>,
    pub stride: Vec<usize>,
}

/// PyTorch's `ViewAndMutationMeta`: everything the runtime wrappers need
/// to know about a call's mutations and aliasing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewAndMutationMeta {
    pub input_info: Vec<InputAliasInfo>,
    pub output_info: Vec<OutputAliasInfo>,
    pub num_intermediate_bases: usize,
    pub keep_input_mutations: bool,
    pub traced_tangents: Vec<TangentMeta>,
    pub mutated_inp_runtime_indices: Vec<usize>,
    pub num_outputs: usize,
    pub num_outputs_non_aliased: usize,
    pub num_outputs_aliased_to_inputs: usize,
    pub num_outputs_aliased_to_intermediates: usize,
    pub num_forward_returns: usize,
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
    pub keep_arg_mask: Vec<bool>,
    pub add_dupe_map: Vec<usize>,
    pub meta: ViewAndMutationMeta,
}

/// One entry of `synthetic_base_info`: an argument kept as is (its new
/// index), or regenerated as a view of synthetic base `base`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SyntheticBaseEntry {
    Index(usize),
    View { base: usize, size: Vec<usize>, stride: Vec<usize>, storage_offset: usize },
}

/// The synthetic-base specialisation (`AOTSyntheticBaseWrapper`), when one was needed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticBaseInfo {
    pub aliased_arg_idx_with_metadata_mutations: Vec<usize>,
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
