//! `AutogradLazyBackwardCompileInfo`: the backward of a training plan is
//! compiled (scheduled into kernels, checked, its liveness worked out) on
//! the first `backward()` that reaches it, not when the forward is
//! planned, as PyTorch's lazy backward compile does. A function whose
//! training calls never run a backward (evaluation with grad mode on, a
//! forward whose outputs are dropped) never pays for it.
//!
//! The compiled backward is kept with the plan, so every later backward of
//! the specialisation reuses it. `Counter::BackwardCompiles` counts the
//! compilations, for tests.

use super::compilers;
use crate::error::{AotError, Result};
use crate::executor::liveness::Liveness;
use aot_ir::transform::joint::JointGraph;
use aot_ir::transform::partition::Partition;
use aot_ir::Param;
use std::sync::OnceLock;

/// The compiled backward: the partition with its backward scheduled, and
/// that stage's liveness.
#[derive(Debug)]
pub(crate) struct CompiledBackwardStage {
    pub(crate) partition: Partition,
    pub(crate) live: Liveness,
}

/// What compiling the backward later needs (the function's parameters;
/// the joint graph and the partition are the plan's), and the result once
/// built.
#[derive(Debug)]
pub(crate) struct AutogradLazyBackwardCompileInfo {
    params: Vec<Param>,
    compiled: OnceLock<std::result::Result<CompiledBackwardStage, AotError>>,
}

impl AutogradLazyBackwardCompileInfo {
    pub(crate) fn new(params: &[Param]) -> AutogradLazyBackwardCompileInfo {
        AutogradLazyBackwardCompileInfo { params: params.to_vec(), compiled: OnceLock::new() }
    }

    /// The backward of `partition` (split from `jg`, its forward already
    /// scheduled), compiled on the first call.
    pub(crate) fn get(&self, jg: &JointGraph, partition: &Partition) -> Result<&CompiledBackwardStage> {
        let compiled = self.compiled.get_or_init(|| {
            crate::counters::bump(crate::counters::Counter::BackwardCompiles);
            let backward = compilers::bw_compiler(&jg.name, partition, &self.params)?;
            let partition = Partition { backward, ..partition.clone() };
            let live = crate::executor::joint::liveness(&partition.backward, partition.num_values);
            compilers::log_training(jg, &partition);
            Ok(CompiledBackwardStage { partition, live })
        });
        compiled.as_ref().map_err(Clone::clone)
    }
}
