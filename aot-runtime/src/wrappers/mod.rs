//! The runtime wrappers of PyTorch's `runtime_wrappers.py`, outermost first:
//! dedupe ([`dedupe`]), synthetic bases ([`synthetic_base`]).
//!
//! Each wrapper has a pre-compile half that rewrites the arguments and the
//! metadata for one guard key; these functions are that half, and they are
//! also what `explain()` reports.

pub(crate) mod autograd_fn;
pub mod dedupe;
pub(crate) mod epilogue;
pub mod synthetic_base;
pub(crate) mod training_plan;

use crate::compiled::Arg;
use aot_ir::analysis::input_output::ArgGeometry;

/// The geometry facts of a tensor argument, for the overlap analyses.
/// `identity` is the index of the first argument that is the same tensor.
pub(crate) fn arg_geometry(args: &[Arg], i: usize) -> Option<ArgGeometry> {
    let t = args[i].tensor()?;
    let identity = args[..i].iter().position(|b| b.tensor().is_some_and(|u| u.same_tensor(t))).unwrap_or(i);
    let l = t.layout();
    Some(ArgGeometry { identity, shape: l.shape, stride: l.stride, storage_offset: l.offset, requires_grad: t.requires_grad() })
}
