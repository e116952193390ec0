//! The types of PyTorch's collected metadata before a call: the static
//! template of each input and output ([`StaticMeta`]), the call's facts
//! that complete it ([`CallFacts`]), and what a run on copies of the
//! arguments showed ([`Observation`]). `collect_metadata` computes the
//! template and completes it; `observed` decides where a run is needed.

use crate::schema::OutputType;
use crate::types::ValueId;
use serde::{Deserialize, Serialize};

/// What the program says about each input and output, before any call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticMeta {
    /// Per parameter, in signature order (scalars included).
    pub inputs: Vec<InputTemplate>,
    /// Per output, in order.
    pub outputs: Vec<OutputTemplate>,
    /// Some input's data or metadata is mutated. When false, the runtime can
    /// skip alias checks between arguments entirely.
    pub mutates_inputs: bool,
    /// The graph draws random numbers (`rand_like`, `dropout`).
    pub has_random_ops: bool,
    /// Some fact may depend on whether a `reshape`/`contiguous` aliased
    /// its receiver (which inputs a write reaches, how an output aliases):
    /// `explain()` redoes the template with what a run showed.
    pub uncertain: bool,
    /// Inputs whose gradient reaches an op run with grad mode on (the
    /// receiver of an in-place op included). A call in which none of them
    /// requires grad records no history at all: it runs as an inference
    /// call, its writes to inputs that require grad hidden from autograd.
    #[serde(default)]
    pub grad_mode_deps: Vec<usize>,
    /// Some fact depends on the arguments' shapes, layouts or dtypes beyond
    /// what the template sees (`uncertain`, a metadata mutation that may
    /// change nothing, an output whose alias is uncertain): `explain()`
    /// observes a run on copies of the arguments (see [`super::observed`]).
    #[serde(default)]
    pub needs_observation: bool,
}

/// Static facts about one parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputTemplate {
    /// Whether the parameter is a tensor.
    pub is_tensor: bool,
    /// How many in-place data writes reach this input's storage.
    pub data_mutations: u32,
    /// How many of them happen inside `no_grad!`.
    pub data_mutations_under_no_grad: u32,
    /// A metadata mutation (`t_`, `unsqueeze_`, ..) reaches the tensor. For
    /// some shapes it changes nothing (`t_()` of a 1-D tensor), and PyTorch
    /// then sees no metadata mutation: a run decides.
    pub mutates_metadata: bool,
    /// Every data write went through a `detach()` alias, invisible to autograd's history of this input.
    pub mutated_only_through_detach: bool,
    /// Inputs whose `requires_grad` makes this input require grad after the call.
    pub final_grad_deps: Vec<usize>,
}

impl InputTemplate {
    /// Whether any in-place data write reaches the input.
    pub fn mutates_data(&self) -> bool {
        self.data_mutations > 0
    }
}

impl StaticMeta {
    /// Whether a call whose tensor arguments require grad as in
    /// `requires_grad` (by parameter position) records autograd history:
    /// some op run with grad mode on reads a value that requires grad.
    /// A metadata mutation of an input that requires grad counts, wherever
    /// it happens: the input's view history is rebuilt on its new geometry.
    pub fn records_history(&self, requires_grad: impl Fn(usize) -> bool) -> bool {
        self.grad_mode_deps.iter().any(|&p| requires_grad(p))
            || self.inputs.iter().enumerate().any(|(p, i)| i.mutates_metadata && requires_grad(p))
    }
}

/// How an output aliases, before the call's facts are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputAlias {
    /// The output is the parameter's tensor itself.
    IsInput(usize),
    /// The output shares the parameter's storage (a view, or a detached alias).
    AliasOfInput(usize),
    /// The output shares storage allocated inside the function by this
    /// value's op, without being that value: a view of it, or a detached alias.
    AliasOfIntermediate(ValueId),
    /// The output is a tensor the function allocated (other outputs may
    /// still be views of it).
    NonAlias,
}

/// Static facts about one output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTemplate {
    /// The returned value.
    pub value: ValueId,
    /// The tensor object returned (outputs with equal identity are the same tensor).
    pub identity: ValueId,
    /// How the output aliases, before the call's facts.
    pub alias: OutputAlias,
    /// Outputs with the same storage class alias each other.
    pub storage: u32,
    /// Outputs with the same key have identical sizes, strides and offset.
    pub layout_key: u32,
    /// PyTorch's `._base` of the output, when it is an autograd view.
    pub base: Option<ValueId>,
    /// Inputs whose `requires_grad` makes this output require grad.
    pub grad_deps: Vec<usize>,
    /// The same for a call with grad mode off, where only views pass
    /// `requires_grad` on (a view made under `no_grad` of a tensor that
    /// requires grad does; a `detach` or any computation does not).
    #[serde(default)]
    pub grad_deps_grad_mode_off: Vec<usize>,
    /// A view made under `no_grad` (or a view of one): its `grad_deps` are
    /// its base's when it was made, so they are judged on the arguments'
    /// flags as the call found them, not as the call's writes left them.
    #[serde(default)]
    pub no_grad_view: bool,
    /// The output type when it is the same for every `requires_grad`
    /// pattern of distinct arguments (and every shape, layout and dtype).
    pub static_type: Option<OutputType>,
    /// Whether and how the output aliases can depend on the arguments'
    /// layouts or dtypes: a `reshape`/`contiguous`/`to_dtype` on its way, or
    /// a view of another output whose metadata may or may not be that
    /// output's. A run decides.
    #[serde(default)]
    pub alias_uncertain: bool,
    /// For an output that is a `matmul`'s own result: the inputs whose
    /// `requires_grad` makes its left and its right operand require grad.
    /// Whether it is an `_unsafe_view` hangs on the operands' ranks, which a
    /// run shows ([`super::MatmulShape`]); it only matters when the output
    /// requires grad, and such a call is run on copies anyway (for its
    /// traced tangents), so it does not set `needs_observation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matmul_deps: Option<(Vec<usize>, Vec<usize>)>,
}

/// A call's facts about one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgFacts {
    /// Whether the argument is a tensor.
    pub is_tensor: bool,
    /// Whether the tensor requires grad.
    pub requires_grad: bool,
    /// Whether the tensor is an autograd leaf.
    pub is_leaf: bool,
    /// Arguments with the same id are the very same tensor (passed twice).
    pub identity: usize,
}

/// A call's facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallFacts {
    /// Per parameter, in signature order.
    pub args: Vec<ArgFacts>,
    /// Whether grad mode is on at the call.
    pub grad_enabled: bool,
    /// The config's `keep_input_mutations` (see [`crate::InputAliasInfo`]).
    pub keep_input_mutations: bool,
    /// What a run on copies of the arguments showed, where the template is
    /// unsure (`StaticMeta::needs_observation`); `None` trusts the template.
    pub observed: Option<Observation>,
}

impl CallFacts {
    /// Distinct arguments with the given `requires_grad` flags, leaves all.
    pub fn distinct(requires_grad: &[bool], is_tensor: &[bool]) -> CallFacts {
        CallFacts {
            args: requires_grad
                .iter()
                .zip(is_tensor)
                .enumerate()
                .map(|(i, (&rg, &t))| ArgFacts { is_tensor: t, requires_grad: rg && t, is_leaf: t, identity: i })
                .collect(),
            grad_enabled: true,
            keep_input_mutations: true,
            observed: None,
        }
    }
}

/// What a run on copies of a call's arguments showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// Per parameter: the run left the tensor's sizes, strides and offset
    /// as they were (true for non-tensor parameters).
    pub metadata_unchanged: Vec<bool>,
    /// Per output, in order; left empty (any other length) when the run
    /// did not look at the outputs, which then keep the template's answer.
    pub outputs: Vec<ObservedOutput>,
}

impl Observation {
    /// Whether the run left parameter `p`'s metadata as it was; `false`
    /// (trust the template) when the run did not report on it.
    pub fn metadata_unchanged(&self, p: usize) -> bool {
        self.metadata_unchanged.get(p).copied().unwrap_or(false)
    }
}

/// How one output of the run aliases. The ids are only compared with each
/// other, within one observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedOutput {
    /// Whether the output is an input, views an input, or has storage the
    /// function allocated.
    pub alias: ObservedAlias,
    /// Outputs with the same id are the same tensor object; a `base` with
    /// an output's id is that output.
    pub object: u32,
    /// Outputs with the same id share storage.
    pub storage: u32,
    /// Outputs with the same id share storage and have identical sizes,
    /// strides and offset.
    pub layout: u32,
    /// The object id of PyTorch's `._base`, when the output is a view.
    pub base: Option<u32>,
    /// The operands of the `matmul` whose result the output is.
    pub matmul: Option<super::MatmulShape>,
}

/// An output's relation to the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObservedAlias {
    /// The output is this parameter's tensor itself.
    IsInput(usize),
    /// The output shares this parameter's storage.
    AliasOfInput(usize),
    /// The output's storage was allocated by the function.
    Intermediate,
}

impl ObservedOutput {
    /// The template's answer in the same terms, with value ids as object ids.
    pub(crate) fn from_template(o: &OutputTemplate) -> ObservedOutput {
        ObservedOutput {
            alias: match o.alias {
                OutputAlias::IsInput(p) => ObservedAlias::IsInput(p),
                OutputAlias::AliasOfInput(p) => ObservedAlias::AliasOfInput(p),
                OutputAlias::AliasOfIntermediate(_) | OutputAlias::NonAlias => ObservedAlias::Intermediate,
            },
            object: o.identity.0,
            storage: o.storage,
            layout: o.layout_key,
            base: o.base.map(|b| b.0),
            matmul: None,
        }
    }
}
