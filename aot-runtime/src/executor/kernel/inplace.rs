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
//! A multi-output kernel (one optimizer step of one parameter) stores
//! every written group it computes, at one index space: its destinations
//! must share one layout and dtype; where they do not, the call runs the
//! graph's one-kernel-per-group set instead, with the same checks.
//! Otherwise the call runs its ordinary plan.
//!
//! Consecutive kernels of one code that touch none of one another's
//! groups (an optimizer step over many parameters, one kernel each) run as
//! one launch of segments where the backend has them (CUDA), else one
//! after another.

use super::{plan_of, slot_values, Plan, Val};
use crate::arg::Bases;
use crate::backend::kernel_record::{self, RanKernel};
use crate::backend::{FusedProgram, KernelCall};
use crate::counters::{bump, Counter};
use crate::error::{AotError, Result};
use crate::ops::binary::broadcast_layout;
use crate::storage::{Segment, Storage};
use crate::tensor::Tensor;
use aot_ir::kernel::reinplace::InPlaceKernel;
use aot_ir::kernel::render::{same_code, KernelTypes, ScalarSlots};
use aot_ir::transform::FunctionalGraph;
use aot_ir::{Op, ScalarValue};

/// One way of running a graph's writes in place: its kernels, and per
/// kernel, per input, the input group whose base it reads (a primal, or
/// the group an earlier kernel wrote).
#[derive(Debug)]
struct KernelSet {
    kernels: Vec<InPlaceKernel>,
    sources: Vec<Vec<usize>>,
}

/// The in-place kernels of one specialisation's inference graph: the
/// multi-output ones (`aot_ir::kernel::reinplace::Reinplaced::fused`), tried first, and one per
/// written group.
#[derive(Debug)]
pub(crate) struct Reinplace {
    fused: Option<KernelSet>,
    single: KernelSet,
}

/// One kernel checked for a call: its plan and its inputs.
pub(crate) struct Checked {
    plan: Plan,
    inputs: Vec<Tensor>,
    slots: Vec<f64>,
}

/// Every kernel of one [`KernelSet`] checked for a call.
pub(crate) struct Ready {
    fused: bool,
    checked: Vec<Checked>,
}

impl KernelSet {
    fn of(fg: &FunctionalGraph, kernels: Vec<InPlaceKernel>) -> Option<KernelSet> {
        let group_of = |v: aot_ir::ValueId| {
            fg.nodes.iter().find(|n| n.out == Some(v)).and_then(|n| match n.op {
                Op::Primal(g) => Some(g),
                _ => kernels.iter().flat_map(|k| &k.stores).find(|st| st.out == v).map(|st| st.group),
            })
        };
        let sources = kernels.iter().map(|k| k.inputs.iter().map(|&v| group_of(v)).collect::<Option<Vec<_>>>()).collect::<Option<_>>()?;
        Some(KernelSet { kernels, sources })
    }

    fn ready(&self, bases: &Bases, scalars: &[Option<ScalarValue>]) -> Option<Vec<Checked>> {
        self.kernels.iter().zip(&self.sources).map(|(k, sources)| check(k, sources, bases, scalars)).collect()
    }

    /// How many kernels from `i` on (at least 1) may run as one launch of
    /// segments: of one code and one set of types, each with its operands
    /// laid out as its result (flat), none writing a group another reads.
    fn batch(&self, checked: &[Checked], i: usize) -> usize {
        let (Some(first), Some(c)) = (self.kernels.get(i), checked.get(i)) else { return 1 };
        let writes_into = |j: usize, l: usize| self.kernels[j].stores.iter().any(|st| self.sources[l].contains(&st.group));
        let mut n = 1;
        while let (Some(k), Some(ck)) = (self.kernels.get(i + n), checked.get(i + n)) {
            let new = i + n;
            let independent = (i..new).all(|j| !writes_into(j, new) && !writes_into(new, j));
            if !flat(c) || !flat(ck) || !same_code(&k.kernel, &first.kernel) || ck.plan.dtypes != c.plan.dtypes || !independent {
                break;
            }
            n += 1;
        }
        n
    }
}

/// Whether every operand of a checked kernel is laid out as its result,
/// which has elements (a segment of a launch of segments).
fn flat(c: &Checked) -> bool {
    let out = &c.plan.out;
    out.numel() > 0 && c.plan.loaded.iter().all(|l| broadcast_layout(l, &out.shape).stride == out.stride)
}

/// The kernels `ks` (a [`KernelSet::batch`]) stored over their
/// destinations in one launch of segments; `false`: declined (the backend
/// has no such launches), nothing written.
fn run_segments(ks: &[InPlaceKernel], cs: &[Checked]) -> Result<bool> {
    let types: Vec<KernelTypes> =
        cs.iter().map(|c| KernelTypes { values: c.plan.dtypes.to_vec(), compute: c.plan.dtypes.to_vec() }).collect();
    let segs: Vec<Segment<'_>> = ks
        .iter()
        .zip(cs)
        .zip(&types)
        .map(|((k, c), types)| Segment {
            read: &c.plan.read,
            call: KernelCall { kernel: &k.kernel, types, slots: &c.slots },
            inputs: c.inputs.iter().zip(&c.plan.loaded).map(|(t, l)| (&**t.storage(), broadcast_layout(l, &c.plan.out.shape))).collect(),
            dests: k.kernel.outs().zip(&k.stores).map(|(v, st)| (st.dest, v.index())).collect(),
            out: c.plan.out.clone(),
        })
        .collect();
    match Storage::fused_in_place_segments("fused kernel", &segs) {
        None => Ok(false),
        Some(r) => {
            r?;
            let mark = kernel_record::mark();
            for (k, c) in ks.iter().zip(cs) {
                note_in_place(k, c);
            }
            kernel_record::note_segments(mark);
            Ok(true)
        }
    }
}

impl Reinplace {
    /// The in-place kernels of `fg`, if it has the shape reinplacing takes.
    pub(crate) fn plan(fg: &FunctionalGraph) -> Option<Reinplace> {
        let r = aot_ir::kernel::reinplace::reinplace(fg, 0)?;
        let fused = match r.fused {
            Some(k) => Some(KernelSet::of(fg, k)?),
            None => None,
        };
        Some(Reinplace { fused, single: KernelSet::of(fg, r.single)? })
    }

    /// Both sets of kernels, named: the multi-output ones (where there are
    /// any), then one per written group.
    pub(crate) fn sets(&self) -> impl Iterator<Item = (&'static str, &[InPlaceKernel])> {
        let fused = self.fused.as_ref().map(|f| ("multi-output", &f.kernels[..]));
        fused.into_iter().chain(std::iter::once(("one per written argument", &self.single.kernels[..])))
    }

    fn set(&self, ready: &Ready) -> &KernelSet {
        match &self.fused {
            Some(f) if ready.fused => f,
            _ => &self.single,
        }
    }

    /// Every kernel checked for this call (see the module doc): the
    /// multi-output ones where they fit, else one per group; or `None`:
    /// run the ordinary plan.
    pub(crate) fn ready(&self, bases: &Bases, scalars: &[Option<ScalarValue>]) -> Option<Ready> {
        if let Some(checked) = self.fused.as_ref().and_then(|f| f.ready(bases, scalars)) {
            return Some(Ready { fused: true, checked });
        }
        Some(Ready { fused: false, checked: self.single.ready(bases, scalars)? })
    }

    /// Runs the checked kernels, each over its destinations, and leaves the
    /// written groups' final values (the arguments themselves) in `env`.
    /// Consecutive kernels of one code that touch none of one another's
    /// groups ([`KernelSet::batch`]) run as one launch of segments where
    /// the backend has them. `Ok(false)`: the first kernel declined and
    /// nothing was written.
    pub(crate) fn run(&self, ready: &Ready, env: &mut [Option<Tensor>]) -> Result<bool> {
        let set = self.set(ready);
        let mut i = 0;
        while i < set.kernels.len() {
            let n = set.batch(&ready.checked, i);
            let (ks, cs) = (&set.kernels[i..i + n], &ready.checked[i..i + n]);
            if n == 1 || !run_segments(ks, cs)? {
                let mark = kernel_record::mark();
                for (j, (k, c)) in ks.iter().zip(cs).enumerate() {
                    if !run_one(k, c)? {
                        if i + j == 0 {
                            return Ok(false);
                        }
                        return Err(AotError::internal("reinplace", format!("kernel `{}` declined after it was checked", k.kernel.name)));
                    }
                }
                if n > 1 {
                    kernel_record::note_segments(mark);
                }
            }
            for (k, c) in ks.iter().zip(cs) {
                bump(Counter::InPlaceKernels);
                for st in &k.stores {
                    let slot =
                        env.get_mut(st.out.index()).ok_or_else(|| AotError::internal("reinplace", format!("no value {}", st.out)))?;
                    *slot = c.inputs.get(st.dest).cloned();
                }
            }
            i += n;
        }
        Ok(true)
    }
}

/// Kernel `k` checked against this call's inputs: each destination dense
/// over its whole storage, shared with no other input, and every
/// destination of the result's layout and dtype.
fn check(k: &InPlaceKernel, sources: &[usize], bases: &Bases, scalars: &[Option<ScalarValue>]) -> Option<Checked> {
    let inputs = sources.iter().map(|&g| bases.get(g)).collect::<Option<Vec<Tensor>>>()?;
    let first = inputs.get(k.stores.first()?.dest)?;
    let (l, dtype) = (first.layout(), first.dtype());
    for st in &k.stores {
        let dest = inputs.get(st.dest)?;
        let whole = dest.layout() == l && dest.dtype() == dtype && dest.storage_len() == l.numel();
        let apart = inputs.iter().enumerate().all(|(i, t)| i == st.dest || (!t.shares_storage_with(dest) && t.device() == dest.device()));
        if !whole || !apart {
            return None;
        }
    }
    if l.offset != 0 || !crate::layout::is_dense_output(&l) {
        return None;
    }
    let loads: Vec<Val> = inputs.iter().map(|t| Val { layout: t.layout(), dtype: t.dtype() }).collect();
    let plan = plan_of(&k.kernel, &loads, scalars)?;
    if plan.out != l || plan.dtypes.iter().any(|&d| d != dtype) || plan.steps.iter().any(|s| s.compute != dtype) {
        return None;
    }
    let slots = slot_values(&k.kernel, scalars);
    if slots.len() != ScalarSlots::of(&k.kernel).exprs().len() {
        return None;
    }
    if !Storage::supports_fused(first.device(), &program(k, &plan), inputs.len()) {
        return None;
    }
    Some(Checked { plan, inputs, slots })
}

fn program<'a>(k: &InPlaceKernel, p: &'a Plan) -> FusedProgram<'a> {
    FusedProgram { steps: &p.steps, num_values: k.kernel.num_values, stored: k.kernel.out.index(), dtypes: &p.dtypes, read: &p.read }
}

/// Kernel `k` stored over its destinations; `false`: declined.
fn run_one(k: &InPlaceKernel, c: &Checked) -> Result<bool> {
    let p = &c.plan;
    let operands: Vec<(&Storage, crate::layout::Layout)> =
        c.inputs.iter().zip(&p.loaded).map(|(t, l)| (&**t.storage(), broadcast_layout(l, &p.out.shape))).collect();
    // Every value has the destinations' dtype (checked).
    let types = KernelTypes { values: p.dtypes.to_vec(), compute: p.dtypes.to_vec() };
    let call = KernelCall { kernel: &k.kernel, types: &types, slots: &c.slots };
    let dests: Vec<(usize, usize)> = k.kernel.outs().zip(&k.stores).map(|(v, st)| (st.dest, v.index())).collect();
    match Storage::fused_in_place("fused kernel", &program(k, p), &call, &operands, &dests, &p.out) {
        None => Ok(false),
        Some(r) => {
            r?;
            note_in_place(k, c);
            Ok(true)
        }
    }
}

/// Notes kernel `k`, which ran stored over its destinations.
fn note_in_place(k: &InPlaceKernel, c: &Checked) {
    kernel_record::note_kernel(|| {
        let inputs: Vec<&Tensor> = c.inputs.iter().collect();
        let types = || c.plan.dtypes.iter().map(|&d| (d, d)).collect();
        let ran = super::ran_kernel(&k.kernel, &inputs, &c.inputs[k.stores[0].dest], Some(&types));
        RanKernel { in_place: Some(k.clone()), ..ran }
    });
}
