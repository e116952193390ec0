//! `RuntimeWrapper`: the one epilogue of a call, after every kernel
//! succeeded (the code is in `epilogue`: [`apply`](super::epilogue::apply)
//! for inference calls, `TrainingEpilogue` for calls that record
//! gradients, run by `autograd_fn`).
//!
//! Its pre-compile step plans which in-place writes of an inference call
//! may wait for the epilogue instead of being made on a copy
//! (`executor/deferred_writes.rs`): an input that nothing else reads is written
//! in place once, by the epilogue.

use super::epilogue;
use crate::arg::{Arg, Bases};
use crate::error::Result;
use crate::executor::deferred_writes::{Deferred, Ready};
use crate::executor::direct_kernels::Geom;
use crate::executor::functional::Env;
use crate::executor::outputs::Outputs;
use aot_ir::transform::FunctionalGraph;
use aot_ir::StaticMeta;

#[derive(Debug)]
pub(crate) struct RuntimeWrapper {
    /// The in-place writes an inference call may leave to the epilogue.
    pub(crate) deferred: Deferred,
}

impl RuntimeWrapper {
    /// Pre-compile: plans the deferred writes of the functional graph.
    pub(crate) fn pre_compile(fg: &FunctionalGraph) -> RuntimeWrapper {
        RuntimeWrapper { deferred: Deferred::plan(fg) }
    }

    /// Run time: the deferred writes to leave out of the graph's run, when
    /// this call's operands allow deferring them (`None`: run them all);
    /// `geom` as `Deferred::ready` takes it.
    #[inline]
    pub(crate) fn deferred(&self, bases: &Bases, geom: impl Fn(usize) -> Option<Geom>) -> Option<Ready<'_>> {
        self.deferred.ready(bases, geom)
    }

    /// Run time: the epilogue of an inference call (see `epilogue::apply`).
    pub(crate) fn apply(
        &self,
        fg: &FunctionalGraph,
        meta: &StaticMeta,
        args: &[Arg],
        bases: &Bases,
        env: &Env,
        deferred: Option<&Ready>,
    ) -> Result<Outputs> {
        epilogue::apply(fg, meta, args, bases, env, deferred)
    }
}
