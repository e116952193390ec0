//! Reinplacing at run time: the kernels `aot_ir::kernel::reinplace` made
//! of an inference graph, each stored over a written argument's own
//! storage, so a call such as an optimizer step makes no copy, no
//! temporary and no copy-back (the epilogue only bumps the versions).
//!
//! The kernels' bodies are the out-of-place ops of the writes; they stand
//! for the in-place ops exactly when every value has the destination's
//! dtype and the result has the destination's layout (then no broadcast
//! grew a write's shape and no cast was skipped). [`Reinplace::ready`]
//! checks that, and everything else a kernel could decline or fail on
//! (the fused plan, dense destinations over their whole storage, one
//! device, no other input over a destination's storage, scalar slots that
//! evaluate), for every kernel before the first one writes: a call writes
//! its arguments only once nothing can fail, as the epilogue would.
//! Otherwise the call runs its ordinary plan.

use super::{plan_of, slot_values, Plan, Val};
use crate::arg::Bases;
use crate::backend::{FusedProgram, KernelCall};
use crate::device::Device;
use crate::error::{AotError, Result};
use crate::ops::binary::broadcast_layout;
use crate::storage::Storage;
use crate::tensor::Tensor;
use aot_ir::kernel::reinplace::InPlaceKernel;
use aot_ir::kernel::render::{KernelTypes, ScalarSlots};
use aot_ir::transform::FunctionalGraph;
use aot_ir::{Op, ScalarValue};
use std::sync::atomic::{AtomicU64, Ordering};

static IN_PLACE: AtomicU64 = AtomicU64::new(0);

/// How many kernels stored over an argument's own storage, in this process.
pub(crate) fn count() -> u64 {
    IN_PLACE.load(Ordering::Relaxed)
}

/// The in-place kernels of one specialisation's inference graph.
#[derive(Debug)]
pub(crate) struct Reinplace {
    kernels: Vec<InPlaceKernel>,
    /// Per kernel, per input: the input group whose base it reads (a
    /// primal, or the group an earlier kernel wrote).
    sources: Vec<Vec<usize>>,
}

/// One kernel checked for a call: its plan and its inputs.
pub(crate) struct Checked {
    plan: Plan,
    inputs: Vec<Tensor>,
    slots: Vec<f64>,
}

impl Reinplace {
    /// The in-place kernels of `fg`, if it has the shape reinplacing takes.
    pub(crate) fn plan(fg: &FunctionalGraph) -> Option<Reinplace> {
        let kernels = aot_ir::kernel::reinplace::reinplace(fg, 0)?;
        let group_of = |v: aot_ir::ValueId| {
            fg.nodes.iter().find(|n| n.out == Some(v)).and_then(|n| match n.op {
                Op::Primal(g) => Some(g),
                _ => kernels.iter().find(|k| k.out == v).map(|k| k.group),
            })
        };
        let sources = kernels.iter().map(|k| k.inputs.iter().map(|&v| group_of(v)).collect::<Option<Vec<_>>>()).collect::<Option<_>>()?;
        Some(Reinplace { kernels, sources })
    }

    pub(crate) fn kernels(&self) -> &[InPlaceKernel] {
        &self.kernels
    }

    /// Every kernel checked for this call (see the module doc), or `None`:
    /// run the ordinary plan.
    pub(crate) fn ready(&self, bases: &Bases, scalars: &[Option<ScalarValue>]) -> Option<Vec<Checked>> {
        self.kernels.iter().zip(&self.sources).map(|(k, sources)| check(k, sources, bases, scalars)).collect()
    }

    /// Runs the checked kernels, each over its destination, and leaves the
    /// written groups' final values (the arguments themselves) in `env`.
    /// `Ok(false)`: the first kernel declined and nothing was written.
    pub(crate) fn run(&self, checked: &[Checked], env: &mut [Option<Tensor>]) -> Result<bool> {
        for (i, (k, c)) in self.kernels.iter().zip(checked).enumerate() {
            if !run_one(k, c)? {
                if i == 0 {
                    return Ok(false);
                }
                return Err(AotError::internal("reinplace", format!("kernel `{}` declined after it was checked", k.kernel.name)));
            }
            IN_PLACE.fetch_add(1, Ordering::Relaxed);
            let slot = env.get_mut(k.out.index()).ok_or_else(|| AotError::internal("reinplace", format!("no value {}", k.out)))?;
            *slot = c.inputs.get(k.dest).cloned();
        }
        Ok(true)
    }
}

/// Kernel `k` checked against this call's inputs.
fn check(k: &InPlaceKernel, sources: &[usize], bases: &Bases, scalars: &[Option<ScalarValue>]) -> Option<Checked> {
    let inputs = sources.iter().map(|&g| bases.get(g)).collect::<Option<Vec<Tensor>>>()?;
    let dest = inputs.get(k.dest)?;
    let l = dest.layout();
    let whole = l.offset == 0 && l.numel() == dest.storage_len() && crate::layout::is_dense_output(&l);
    let apart = inputs.iter().enumerate().all(|(i, t)| i == k.dest || (!t.shares_storage_with(dest) && t.device() == dest.device()));
    if !whole || !apart {
        return None;
    }
    let loads: Vec<Val> = inputs.iter().map(|t| Val { layout: t.layout(), dtype: t.dtype() }).collect();
    let plan = plan_of(&k.kernel, &loads, scalars)?;
    if plan.out != l || plan.dtypes.iter().any(|&d| d != dest.dtype()) || plan.steps.iter().any(|s| s.compute != dest.dtype()) {
        return None;
    }
    let slots = slot_values(&k.kernel, scalars);
    if slots.len() != ScalarSlots::of(&k.kernel).exprs().len() {
        return None;
    }
    if dest.device() == Device::Cpu && !crate::cpu::fused::supports(&program(k, &plan), inputs.len()) {
        return None;
    }
    Some(Checked { plan, inputs, slots })
}

fn program<'a>(k: &InPlaceKernel, p: &'a Plan) -> FusedProgram<'a> {
    FusedProgram { steps: &p.steps, num_values: k.kernel.num_values, stored: k.kernel.out.index(), dtypes: &p.dtypes, read: &p.read }
}

/// Kernel `k` stored over its destination; `false`: declined.
fn run_one(k: &InPlaceKernel, c: &Checked) -> Result<bool> {
    let p = &c.plan;
    let operands: Vec<(&Storage, crate::layout::Layout)> =
        c.inputs.iter().zip(&p.loaded).map(|(t, l)| (&**t.storage(), broadcast_layout(l, &p.out.shape))).collect();
    // Every value has the destination's dtype (checked).
    let types = KernelTypes {
        values: p.dtypes.iter().map(|d| d.kernel_dtype()).collect(),
        compute: p.dtypes.iter().map(|d| d.kernel_dtype()).collect(),
    };
    let call = KernelCall { kernel: &k.kernel, types: &types, slots: &c.slots };
    match Storage::fused_in_place("fused kernel", &program(k, p), &call, &operands, k.dest, &p.out) {
        None => Ok(false),
        Some(r) => {
            r?;
            let inputs: Vec<&Tensor> = c.inputs.iter().collect();
            let types = p.dtypes.iter().map(|&d| (d, d)).collect();
            crate::compiled::kernels::note_kernel(&k.kernel, &inputs, &c.inputs[k.dest], Some(types));
            Ok(true)
        }
    }
}
