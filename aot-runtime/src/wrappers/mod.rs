//! The runtime wrappers of PyTorch's `runtime_wrappers.py`.
//!
//! - [`dedupe`] and [`synthetic_base`]: the pre-compile halves of
//!   `AOTDedupeWrapper` and `AOTSyntheticBaseWrapper`, which rewrite the
//!   arguments and the metadata for one guard key. `explain()` reports
//!   their decisions. (A call makes the same aliasing decisions through
//!   the specialisation's input groups, `compiled/specialize.rs`; making
//!   both use one plan is still to do.)
//! - `epilogue`: `RuntimeWrapper`'s epilogue: input mutations applied
//!   after every op succeeded, aliased outputs regenerated; for inference
//!   calls (`apply`, which also runs the deferred in-place writes) and for
//!   calls that record gradients (`TrainingEpilogue`, grad mode on).
//! - `autograd_fn`: `AOTDispatchAutograd`'s compiled function for calls
//!   that record gradients (the checks before any work, the partitioned
//!   forward, one autograd node), and `training_plan`, the plan it runs and
//!   the checks that send a call to the eager reference instead.

pub(crate) mod autograd_fn;
pub mod dedupe;
pub(crate) mod epilogue;
pub mod synthetic_base;
pub(crate) mod training_plan;

use crate::arg::Arg;
use aot_ir::analysis::input_output::ArgGeometry;

/// The geometry facts of a tensor argument, for the overlap analyses.
/// `identity` is the index of the first argument that is the same tensor.
pub(crate) fn arg_geometry(args: &[Arg], i: usize) -> Option<ArgGeometry> {
    let t = args[i].tensor()?;
    let identity = args[..i].iter().position(|b| b.tensor().is_some_and(|u| u.same_tensor(t))).unwrap_or(i);
    let l = t.layout();
    Some(ArgGeometry {
        identity,
        shape: l.shape.into_vec(),
        stride: l.stride.into_vec(),
        storage_offset: l.offset,
        requires_grad: t.requires_grad(),
    })
}
