//! The runtime wrappers of PyTorch's `runtime_wrappers.py`, as one chain
//! that builds one plan per guard key ([`CallPlan`]).
//!
//! Each wrapper has a pre-compile step, run once per guard key by
//! [`CallPlan::build`] (it decides: rewrites the calling convention, the
//! metadata or the graph), and a run-time step that a call
//! (`CompiledFn::__call`) runs with the plan. `CompiledFn::explain` reads
//! the very same plan (looked up through the same cache) for the dedupe
//! and synthetic-base decisions it reports. The chain, in PyTorch's order:
//!
//! 1. [`debug_assert`]: `DebugAssertWrapper`; at run time (debug builds)
//!    the call's `requires_grad` pattern must be the plan's.
//! 2. [`dedupe`]: `AOTDedupeWrapper`; the same tensor passed twice, one of
//!    them mutated: `keep_arg_mask` / `add_dupe_map`.
//! 3. [`synthetic_base`]: `AOTSyntheticBaseWrapper` (`merge_view_inputs`):
//!    the arguments merged into synthetic bases (PyTorch's decision, which
//!    `explain` reports) and the input groups the graph runs on (see that
//!    module for how the two relate); at run time, each group's base.
//! 4. functionalize (`aot_ir::transform::functionalize`) on those groups.
//! 5. [`compilers`]: the inference stage scheduled into kernels (the
//!    training stages are scheduled with the training plan).
//! 6. [`runtime_wrapper`]: `RuntimeWrapper`, the one epilogue (`epilogue`):
//!    input mutations applied after every op succeeded, aliased outputs
//!    regenerated; the in-place writes it may run itself are planned here.
//! 7. [`autograd_fn`]: `AOTDispatchAutograd` for calls that record
//!    gradients: the training plan (`training_plan`: joint graph and
//!    partition), built on first use, and the compiled function that runs
//!    it with one autograd node. The backward stage is compiled on the
//!    first `backward()` ([`lazy_backward`]:
//!    `AutogradLazyBackwardCompileInfo`).
//!
//! [`functionalized_rng`]: `FunctionalizedRngRuntimeWrapper`, in the
//! graph: dropout takes the generator's state as a value, so the backward
//! recomputes its mask from the saved state.
//!
//! The arguments' alias pattern ([`AliasPattern`]) is computed once, with
//! the guard key (`compiled/specialize.rs`), and handed to the
//! pre-compile steps; only what the key does not hold (shapes, strides and
//! offsets at call time, autograd `._base`s) is read from the arguments.

pub(crate) mod autograd_fn;
pub(crate) mod compilers;
pub(crate) mod debug_assert;
pub(crate) mod dedupe;
pub(crate) mod epilogue;
pub(crate) mod functionalized_rng;
pub(crate) mod lazy_backward;
pub(crate) mod runtime_wrapper;
pub mod subclass;
pub(crate) mod synthetic_base;
pub(crate) mod training_plan;

use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use aot_ir::analysis::input_output::ArgGeometry;
use aot_ir::transform::{functionalize, FunctionalGraph};
use aot_ir::{Graph, StaticMeta, ViewAndMutationMeta};
use autograd_fn::AOTDispatchAutograd;
use debug_assert::DebugAssertWrapper;
use dedupe::AOTDedupeWrapper;
use runtime_wrapper::RuntimeWrapper;
use synthetic_base::AOTSyntheticBaseWrapper;

/// How one argument aliases the others: the alias part of its guard key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgAlias {
    pub(crate) is_tensor: bool,
    /// The first argument that is this very tensor (itself for scalars).
    pub(crate) same_as: usize,
    /// The first argument sharing this tensor's storage.
    pub(crate) storage_as: usize,
    /// Overlaps in memory another, distinct tensor among the arguments
    /// (PyTorch's `compute_overlapping_inputs`).
    pub(crate) overlaps: bool,
}

/// The alias pattern of a call's arguments, as its guard key holds it. A
/// key that leaves aliases out (the function mutates no input) gives every
/// argument its own identity and storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AliasPattern(pub(crate) Vec<ArgAlias>);

impl AliasPattern {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Argument `i` is a tensor passed earlier too.
    pub(crate) fn is_repeat(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|a| a.is_tensor && a.same_as != i)
    }

    /// Arguments `i` and `j` are the very same tensor.
    pub(crate) fn same(&self, i: usize, j: usize) -> bool {
        match (self.0.get(i), self.0.get(j)) {
            (Some(a), Some(b)) => a.is_tensor && b.is_tensor && a.same_as == b.same_as,
            _ => false,
        }
    }
}

/// What the wrappers' decisions read about each input: PyTorch's
/// `mutates_data` and `mutates_metadata` (an argument passed twice is one
/// tensor, mutated through either name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mutations {
    pub(crate) data: Vec<bool>,
    pub(crate) metadata: Vec<bool>,
}

impl Mutations {
    /// From the static template: what `StaticMeta::complete` says for a
    /// call with this alias pattern when no run was observed.
    pub(crate) fn of_template(meta: &StaticMeta, pattern: &AliasPattern) -> Mutations {
        let n = pattern.len();
        let tensor = |j: usize| meta.inputs.get(j).is_some_and(|m| m.is_tensor) && pattern.0[j].is_tensor;
        let any = |i: usize, f: &dyn Fn(usize) -> bool| tensor(i) && (0..n).any(|j| tensor(j) && pattern.same(i, j) && f(j));
        Mutations {
            data: (0..n).map(|i| any(i, &|j| meta.inputs[j].mutates_data())).collect(),
            metadata: (0..n).map(|i| any(i, &|j| meta.inputs[j].mutates_metadata)).collect(),
        }
    }

    /// From a call's collected metadata (`explain`, which may have
    /// observed a run).
    pub(crate) fn of_metadata(m: &ViewAndMutationMeta) -> Mutations {
        Mutations {
            data: m.input_info.iter().map(|i| i.mutates_data).collect(),
            metadata: m.input_info.iter().map(|i| i.mutates_metadata).collect(),
        }
    }
}

/// One specialisation's plan: what the wrapper chain's pre-compile steps
/// decided for one guard key.
#[derive(Debug)]
pub(crate) struct CallPlan {
    pub(crate) debug_assert: DebugAssertWrapper,
    /// The facts the decisions below were made on (the static template's).
    pub(crate) mutations: Mutations,
    pub(crate) dedupe: AOTDedupeWrapper,
    pub(crate) synthetic_base: AOTSyntheticBaseWrapper,
    /// The functional graph over the synthetic-base wrapper's groups.
    pub(crate) graph: FunctionalGraph,
    /// The functional graph's kernel stage (`compilers::inference_compiler`),
    /// what an inference call runs.
    pub(crate) kernels: aot_ir::kernel::Scheduled,
    /// Per node of `kernels`, the values that die there.
    pub(crate) liveness: crate::executor::liveness::Liveness,
    /// The graph as kernels stored over the written arguments, when it has
    /// that shape (`executor/kernel/inplace.rs`).
    pub(crate) reinplace: Option<crate::executor::kernel::Reinplace>,
    pub(crate) runtime: RuntimeWrapper,
    pub(crate) autograd: AOTDispatchAutograd,
}

impl CallPlan {
    /// Runs the chain's pre-compile steps, in PyTorch's order, for a call
    /// with this alias pattern and per-argument `requires_grad`.
    pub(crate) fn build(g: &Graph, meta: &StaticMeta, pattern: &AliasPattern, requires_grad: Vec<bool>) -> Result<CallPlan> {
        let debug_assert = DebugAssertWrapper::pre_compile(requires_grad);
        let mutations = Mutations::of_template(meta, pattern);
        let dedupe = AOTDedupeWrapper::pre_compile(pattern, &mutations);
        let synthetic_base = AOTSyntheticBaseWrapper::pre_compile(pattern, &mutations, &dedupe);
        let graph = functionalize(g, &synthetic_base.groups);
        graph.verify().map_err(|e| AotError::Internal { op: "functionalize", msg: e.to_string() })?;
        let runtime = RuntimeWrapper::pre_compile(&graph);
        let kernels = compilers::inference_compiler(&graph)?;
        let liveness = compilers::inference_liveness(&graph, &kernels);
        let reinplace = compilers::inference_reinplace(&graph);
        let autograd = AOTDispatchAutograd::pre_compile();
        Ok(CallPlan { debug_assert, mutations, dedupe, synthetic_base, graph, kernels, liveness, reinplace, runtime, autograd })
    }
}

/// The geometry facts of a tensor argument, for the overlap analyses.
/// `identity` is equal for arguments that are the same tensor.
pub(crate) fn arg_geometry(t: &Tensor, identity: usize) -> ArgGeometry {
    let l = t.layout();
    ArgGeometry {
        identity,
        shape: l.shape.into_vec(),
        stride: l.stride.into_vec(),
        storage_offset: l.offset,
        requires_grad: t.requires_grad(),
    }
}

impl CallPlan {
    /// The training plan (`AOTDispatchAutograd`), built on first use for
    /// the `requires_grad` pattern this plan was made for.
    pub(crate) fn training(&self, g: &Graph) -> std::result::Result<&std::sync::Arc<training_plan::TrainingPlan>, &str> {
        self.autograd.training(&self.graph, g, &self.debug_assert.requires_grad)
    }
}
