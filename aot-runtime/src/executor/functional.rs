//! The functional stage (the inference path): a [`FunctionalGraph`] run
//! by the one interpreter ([`super::interp`]) in its functional mode.
//!
//! Nothing here writes a caller's tensor: input groups are read through
//! their bases and copied (`Cow`) before their first write, so an error at
//! any node leaves every input as it was. The epilogue
//! (`wrappers/epilogue.rs`) applies the effects afterwards.

use super::interp::{run, Blame, Ctx, Inputs, Mode, Stop, Track};
use super::liveness::Liveness;
use crate::arg::{Arg, Bases};
use crate::error::Result;
use aot_ir::kernel::Scheduled;
use aot_ir::transform::FunctionalGraph;
use aot_ir::{Graph, ScalarValue};

/// The values of a finished run, indexed by functional value.
pub(crate) use super::value_table::Env;

pub(crate) use super::interp::get;

/// Executes `fg` in its kernel stage `kernels`, dropping each value after
/// its last use (`live`), but for the nodes `skip` marks (by their index
/// in `fg`: writes deferred to the epilogue, `deferred_writes.rs`). `Ok(None)`: a
/// `reshape`/`contiguous` did not alias as the pass assumed; nothing was
/// written, and the caller must take the reference path.
pub(crate) fn execute(
    fg: &FunctionalGraph,
    (kernels, live): (&Scheduled, &Liveness),
    g: &Graph,
    args: &[Arg],
    bases: &Bases,
    scalars: &[Option<ScalarValue>],
    skip: &[bool],
) -> Result<Option<Env>> {
    let mut env = Env::new(fg.num_values);
    let cx = Ctx {
        mode: Mode::FUNCTIONAL,
        inputs: Inputs::Bases(bases),
        scalars,
        geometry: args,
        skip,
        origin: &kernels.origin,
        fresh: &kernels.fresh,
        live,
        blame: Blame::Mapped { graph: g, src_node: &fg.src_node },
    };
    match run(&kernels.nodes, &mut env, &cx, &mut Track::Nothing) {
        Ok(()) => Ok(Some(env)),
        Err(Stop::Fallback(_)) => Ok(None),
        Err(Stop::Error(e)) => Err(e),
    }
}
