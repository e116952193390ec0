//! The record of the kernels a call runs, for `CompiledFn::kernels_for`.
//! While a recording is on (on this thread):
//!
//! - the storage notes every primitive it dispatches that does device
//!   work ([`note_op`]: copies, casts, elementwise ops, reductions,
//!   matmuls, gathers, scans, losses) and every random fill
//!   ([`note_random`]), with plain data from which each device's listing
//!   follows (the CUDA backend's sources, the CPU's listings);
//! - the executor notes every kernel of the kernel stage it runs as one
//!   kernel ([`note_kernel`]), a kernel whose ops the backend ran one by
//!   one ([`note_declined`]), and kernels that a device launches as one
//!   launch of segments ([`note_segments`]);
//! - the CUDA device notes every kernel it launches, with the source it
//!   launched ([`note_launch`]), and every cuBLAS call.
//!
//! The first two predict what a device runs from a run on any device (a
//! call on CPU tensors listed for CUDA); the last is what a CUDA device
//! did run. The notes take plain data, so the layers that make them know
//! nothing of the compiled call that reads them; off a recording each
//! note is one thread-local read.

use super::{Distribution, OpKernels};
use crate::dtype::DType;
use aot_ir::kernel::random::RandomKind;
use aot_ir::kernel::reinplace::InPlaceKernel;
use aot_ir::kernel::Kernel;
use std::cell::RefCell;

/// One kernel a call runs: its entry point and its source (on the CPU,
/// which evaluates the kernel stage itself, the kernel's listing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSource {
    /// The kernel's entry point.
    pub name: String,
    /// Its source: CUDA C; on the CPU, the kernel's listing (for a
    /// primitive, a comment naming the native routine that runs it, and
    /// the listing of the one-op kernel it computes where there is one);
    /// for a library kernel (cuBLAS's gemm), a comment naming the call.
    pub source: String,
}

/// A kernel of the kernel stage that ran while a recording was on.
pub(crate) struct RanKernel {
    pub kernel: Kernel,
    /// Its inputs' dtypes.
    pub inputs: Vec<DType>,
    /// Per body value, its dtype and the dtype its op computes in, from
    /// the executor's plan (eager's promotion); `None` when the kernel ran
    /// op by op (then they are inferred from the inputs' dtypes).
    pub types: Option<Vec<(DType, DType)>>,
    /// The rank it renders for: its result's, or for a reduction kernel its
    /// reduction's input's.
    pub rank: usize,
    /// Its result has no element: a device launches nothing.
    pub empty: bool,
    /// For a kernel stored over its inputs (reinplacing), where it stores
    /// what (its listing says so).
    pub in_place: Option<InPlaceKernel>,
}

/// A note made while a recording is on.
pub(crate) enum Ran {
    /// A kernel of the kernel stage, run as one kernel.
    Stage(RanKernel),
    /// A kernel of the kernel stage whose ops the backend ran one by one
    /// (`ops`, their notes), where a backend that renders code runs it as
    /// one kernel.
    Declined { stage: RanKernel, ops: Vec<Ran> },
    /// In-place kernels of one code that a device launches as one launch
    /// of segments (`aot_ir::kernel::render::segments`), in order.
    Segments(Vec<RanKernel>),
    /// A random fill (dropout's mask, `rand_like`), which the CUDA backend
    /// runs as a kernel of the generator's stream (`aot_ir::kernel::random`).
    Random { kind: RandomKind, dtype: DType },
    /// A storage primitive that does device work.
    Op(OpKernels),
    /// A kernel a CUDA device launched (or a cuBLAS call), as launched.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Launched(KernelSource),
}

thread_local! {
    /// The notes made on this thread while a recording is on.
    static RAN: RefCell<Option<Vec<Ran>>> = const { RefCell::new(None) };
}

fn push(ran: impl FnOnce() -> Ran) {
    RAN.with(|r| {
        if let Some(list) = r.borrow_mut().as_mut() {
            list.push(ran());
        }
    });
}

/// Notes a random fill of `n` elements of `dtype` drawn from `dist` (an
/// empty fill runs no kernel).
pub(crate) fn note_random(dist: Distribution, dtype: DType, n: usize) {
    if n == 0 {
        return;
    }
    push(|| {
        let kind = match dist {
            Distribution::Uniform => RandomKind::Uniform,
            Distribution::Normal => RandomKind::Normal,
            Distribution::Dropout { .. } => RandomKind::Dropout,
        };
        Ran::Random { kind, dtype }
    });
}

/// Notes a primitive; `k` describes it, and is called only while a
/// recording is on.
pub(crate) fn note_op(k: impl FnOnce() -> OpKernels) {
    push(|| Ran::Op(k()));
}

/// Notes a kernel of the kernel stage run as one kernel; `ran` describes
/// it, and is called only while a recording is on.
pub(crate) fn note_kernel(ran: impl FnOnce() -> RanKernel) {
    push(|| Ran::Stage(ran()));
}

/// Notes a kernel the CUDA device launched; `k` gives its entry and
/// source, and is called only while a recording is on.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn note_launch(k: impl FnOnce() -> KernelSource) {
    push(|| Ran::Launched(k()));
}

/// Where the notes stand now, for [`note_declined`]; `None` off a recording.
pub(crate) fn mark() -> Option<usize> {
    RAN.with(|r| r.borrow().as_ref().map(Vec::len))
}

/// Notes that the ops noted since `mark` ran one by one for the kernel
/// `ran` describes, which a rendering backend runs as one kernel: they
/// become its [`Ran::Declined`] note. A device's own launches stay as
/// they are (they are what it ran).
pub(crate) fn note_declined(mark: Option<usize>, ran: impl FnOnce() -> RanKernel) {
    regroup(mark, |ops| Ran::Declined { stage: ran(), ops });
}

/// Notes that the kernels noted since `mark` (each [`Ran::Stage`]) are
/// one launch of segments on a device that has them.
pub(crate) fn note_segments(mark: Option<usize>) {
    regroup(mark, |notes| {
        Ran::Segments(
            notes
                .into_iter()
                .filter_map(|n| match n {
                    Ran::Stage(k) => Some(k),
                    _ => None,
                })
                .collect(),
        )
    });
}

/// The notes since `mark` made into one by `group`; a device's own
/// launches stay as they are (they are what it ran).
fn regroup(mark: Option<usize>, group: impl FnOnce(Vec<Ran>) -> Ran) {
    let Some(at) = mark else { return };
    RAN.with(|r| {
        if let Some(list) = r.borrow_mut().as_mut() {
            let tail: Vec<Ran> = list.drain(at.min(list.len())..).collect();
            let (launched, ops): (Vec<Ran>, Vec<Ran>) = tail.into_iter().partition(|n| matches!(n, Ran::Launched(_)));
            list.extend(launched);
            list.push(group(ops));
        }
    });
}

/// A recording on this thread; it ends when dropped, also when the run
/// fails.
pub(crate) struct Recording;

impl Recording {
    pub(crate) fn start() -> Recording {
        RAN.with(|r| *r.borrow_mut() = Some(Vec::new()));
        Recording
    }
    /// What ran since [`start`](Self::start).
    pub(crate) fn take(self) -> Vec<Ran> {
        RAN.with(|r| r.borrow_mut().take()).unwrap_or_default()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        RAN.with(|r| *r.borrow_mut() = None);
    }
}

/// Notes nothing while it lives (work of the listing's own, such as the
/// seeds of a backward, is no part of the call).
pub(crate) struct Pause(Option<Vec<Ran>>);

impl Pause {
    pub(crate) fn start() -> Pause {
        Pause(RAN.with(|r| r.borrow_mut().take()))
    }
}

impl Drop for Pause {
    fn drop(&mut self) {
        let held = self.0.take();
        RAN.with(|r| *r.borrow_mut() = held);
    }
}
