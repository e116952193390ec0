//! The record of the kernels a call runs, for `CompiledFn::kernels_for`'s
//! CUDA listing. While a recording is on (on this thread), the storage
//! notes every random fill ([`note_random`]) and every primitive that the
//! CUDA backend runs as kernels of its own ([`note_op`]), and the executor
//! every kernel of the kernel stage it runs ([`note_kernel`]). The notes
//! take plain data, so the layers that make them know nothing of the
//! compiled call that reads them; off a recording each note is one
//! thread-local read.

use super::{Distribution, OpKernels};
use crate::dtype::DType;
use aot_ir::kernel::random::RandomKind;
use aot_ir::kernel::Kernel;
use std::cell::RefCell;

/// One kernel a call runs: its entry point and its source (on the CPU,
/// which evaluates the kernel stage itself, the kernel's listing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSource {
    /// The kernel's entry point.
    pub name: String,
    /// Its source: CUDA C, or the CPU's listing of the kernel.
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
}

/// A kernel run while a recording is on: one of the kernel stage's, a
/// random fill (dropout's mask, `rand_like`), which the CUDA backend runs as
/// a kernel of the generator's stream (`aot_ir::kernel::random`), or a
/// primitive the CUDA backend runs as kernels of its own (gathers and
/// scatters, scans, index reductions, the loss).
pub(crate) enum Ran {
    Stage(RanKernel),
    Random { kind: RandomKind, dtype: DType },
    Op(OpKernels),
}

thread_local! {
    /// The kernels run on this thread while a recording is on.
    static RAN: RefCell<Option<Vec<Ran>>> = const { RefCell::new(None) };
}

fn push(ran: impl FnOnce() -> Ran) {
    RAN.with(|r| {
        if let Some(list) = r.borrow_mut().as_mut() {
            list.push(ran());
        }
    });
}

/// Notes a random fill of `dtype` drawn from `dist`.
pub(crate) fn note_random(dist: Distribution, dtype: DType) {
    push(|| {
        let kind = match dist {
            Distribution::Uniform => RandomKind::Uniform,
            Distribution::Normal => RandomKind::Normal,
            Distribution::Dropout { .. } => RandomKind::Dropout,
        };
        Ran::Random { kind, dtype }
    });
}

/// Notes a primitive of [`OpKernels`].
pub(crate) fn note_op(k: OpKernels) {
    push(|| Ran::Op(k));
}

/// Notes a kernel of the kernel stage; `ran` describes it, and is called
/// only while a recording is on.
pub(crate) fn note_kernel(ran: impl FnOnce() -> RanKernel) {
    push(|| Ran::Stage(ran()));
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
