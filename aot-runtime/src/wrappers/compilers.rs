//! The compilers of the chain (PyTorch's `inference_compiler`,
//! `fw_compiler` and `bw_compiler`): each turns a stage into the kernel
//! stage by scheduling its fusible nodes (elementwise ops, casts, and one
//! reduction per kernel with its prologue and epilogue) into kernels
//! (`aot_ir::kernel::schedule`), checks the result with the verifier, and
//! works out each stage's liveness (`executor::liveness`) once per plan.
//! `AOT_LOG=graphs` prints the scheduled partitions of training calls.
//!
//! `AOT_KERNELS=0` in the environment turns scheduling off (every node
//! then runs one eager op, as before the kernel stage); `AOT_LOG=kernels`
//! prints each stage's kernels when they are built, as PyTorch's
//! `TORCH_LOGS=output_code` does. An inference graph of whole-input
//! elementwise writes also gets kernels that store over the written
//! arguments ([`inference_reinplace`], PyTorch's reinplacing;
//! `AOT_REINPLACE=0` turns that off).

use crate::error::{AotError, Result};
use crate::executor::liveness::Liveness;
use aot_ir::kernel::{schedule, Scheduled};
use aot_ir::print::Names;
use aot_ir::transform::partition::{Partition, SubGraph};
use aot_ir::transform::{FOutput, FunctionalGraph};
use aot_ir::verify::Stage;
use aot_ir::{Param, ValueId};
use std::sync::OnceLock;

/// Whether stages are scheduled into kernels (`AOT_KERNELS` is not `0`).
pub(crate) fn kernels_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("AOT_KERNELS").map_or(true, |v| v != "0"))
}

fn log_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::aot_log::names("kernels"))
}

/// `AOT_LOG=graphs`: each scheduled stage's listing when it is built.
fn log_graphs() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::aot_log::names("graphs"))
}

/// `nodes` scheduled, verified as `stage` with the values `inputs` defined
/// first; printed when `AOT_LOG=kernels`.
fn compile(
    what: &str,
    stage: Stage,
    nodes: &[aot_ir::Node],
    num_values: usize,
    inputs: &[ValueId],
    live_out: &[ValueId],
    params: &[Param],
) -> Result<Scheduled> {
    if !kernels_enabled() {
        let fresh = aot_ir::kernel::schedule::fresh_writes(nodes, live_out);
        return Ok(Scheduled { nodes: nodes.to_vec(), origin: (0..nodes.len()).map(Some).collect(), fresh });
    }
    let s = schedule(nodes, num_values, live_out, 0);
    let mut defined = vec![false; num_values];
    for v in inputs {
        if let Some(d) = defined.get_mut(v.index()) {
            *d = true;
        }
    }
    let types: Vec<_> = params.iter().map(|p| p.ty).collect();
    stage
        .check_nodes(&s.nodes, &mut defined, &types)
        .map_err(|(i, msg)| AotError::Internal { op: "schedule", msg: format!("{what}: node {i}: {msg}") })?;
    if log_enabled() {
        for k in s.kernels() {
            eprintln!("[aot kernels] {what}:\n{}", k.listing(Names::params(params)));
        }
    }
    Ok(s)
}

/// The inference stage: `fg` scheduled (its outputs, copy-backs and
/// metadata mutations are read after it).
pub(crate) fn inference_compiler(fg: &FunctionalGraph) -> Result<Scheduled> {
    let live = inference_live_out(fg);
    compile(&format!("`{}` (inference)", fg.name), Stage::Functional, &fg.nodes, fg.num_values, &[], &live, &fg.params)
}

/// The inference stage as kernels that store over the written arguments
/// (reinplacing), when `fg` has that shape; printed when `AOT_LOG=kernels`.
pub(crate) fn inference_reinplace(fg: &FunctionalGraph) -> Option<crate::executor::kernel::Reinplace> {
    // `AOT_REINPLACE=0` keeps the ordinary plan (to measure against).
    if !kernels_enabled() || std::env::var("AOT_REINPLACE").is_ok_and(|v| v == "0") {
        return None;
    }
    let r = crate::executor::kernel::Reinplace::plan(fg)?;
    if log_enabled() {
        for (set, ks) in r.sets() {
            for k in ks {
                eprintln!("[aot kernels] `{}` (inference, in place, {set}):\n{}", fg.name, k.listing(Names::params(&fg.params)));
            }
        }
    }
    Some(r)
}

/// The values of `fg` read after its stage: outputs, copy-backs and
/// metadata mutations.
pub(crate) fn inference_live_out(fg: &FunctionalGraph) -> Vec<ValueId> {
    let mut live: Vec<ValueId> = fg.mutated_groups.iter().map(|&(_, v)| v).chain(fg.metadata_mutations.iter().map(|&(_, v)| v)).collect();
    for o in &fg.outputs {
        match o {
            FOutput::Input(_) => {}
            FOutput::AliasOfInput { value, .. } | FOutput::Value(value) => live.push(*value),
            FOutput::ViewOfIntermediate { base, value } => live.extend([*base, *value]),
        }
    }
    live
}

/// The liveness of an inference stage (`kernels`, scheduled from `fg`).
pub(crate) fn inference_liveness(fg: &FunctionalGraph, kernels: &Scheduled) -> Liveness {
    Liveness::new(&kernels.nodes, fg.num_values, &inference_live_out(fg))
}

fn subgraph(what: &str, stage: Stage, sg: &SubGraph, num_values: usize, params: &[Param]) -> Result<SubGraph> {
    let s = compile(what, stage, &sg.nodes, num_values, &sg.inputs, &sg.outputs, params)?;
    Ok(SubGraph { inputs: sg.inputs.clone(), nodes: s.nodes, outputs: sg.outputs.clone() })
}

/// `fw_compiler`: the partition with its forward scheduled (the backward
/// is scheduled on the first `backward()`, by [`bw_compiler`]; see
/// `lazy_backward`).
pub(crate) fn fw_compiler(name: &str, p: &Partition, params: &[Param]) -> Result<Partition> {
    let forward = subgraph(&format!("`{name}` (forward)"), Stage::Forward, &p.forward, p.num_values, params)?;
    Ok(Partition { forward, ..p.clone() })
}

/// `bw_compiler`: the backward of `p`, scheduled.
pub(crate) fn bw_compiler(name: &str, p: &Partition, params: &[Param]) -> Result<SubGraph> {
    subgraph(&format!("`{name}` (backward)"), Stage::Backward, &p.backward, p.num_values, params)
}

/// `AOT_LOG=graphs`: the training stages once both are scheduled.
pub(crate) fn log_training(jg: &aot_ir::transform::joint::JointGraph, p: &Partition) {
    if log_graphs() {
        eprintln!("[aot graphs] `{}` (training):\n{}", jg.name, p.listing(jg));
    }
}
