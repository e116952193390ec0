//! The backend seam: the storage-level primitives every eager op and every
//! kernel of the kernel stage is built from, as one trait, [`Backend`],
//! with one implementation per device, and everything the backends share:
//!
//! - the kernel stage's programs ([`FusedProgram`],
//!   [`FusedReduceProgram`], `fused_program.rs`);
//! - the host buffer every backend moves data through ([`CpuStorage`] and
//!   its dtype dispatch, `cpu_storage.rs`), the generator state ([`Rng`])
//!   and the host-side offsets of a gather or scatter (`index_offsets.rs`);
//! - the record of the kernels a call runs (`kernel_record.rs`), which the
//!   storage, the executor and the CUDA device note into with plain data;
//!   the primitives as the storage notes them (`op_kernels.rs`), and the
//!   one-op kernels of the kernel stage that stand for the elementwise
//!   ones and the eager reductions (`one_op.rs`);
//! - the profiler's record (`profile_record.rs`): the storage times each
//!   backend call into it, and `crate::profile` reads it.
//!
//! The implementations are the layer above, side by side: the CPU's in
//! `crate::cpu`, CUDA's in `crate::cuda`, which picks the real cudarc
//! storage (feature `cuda`) or a dummy that reports the missing feature.
//! Both are always compiled, so no op needs a `cfg`.
//!
//! A backend storage is one buffer of one dtype on one device. Methods read
//! their operands through [`Layout`]s (any strides, offsets and stride-0
//! broadcast dims) and either return a new buffer or write into a `&mut`
//! destination. They do not check that operands share a device: the caller,
//! [`crate::storage::Storage`], dispatches on the device of every operand
//! and reports a mismatch before a backend sees it. Every method takes the
//! name of the eager op it serves (`op`), so an error names what the user
//! called; the methods of a class of ops take the op itself, an
//! [`OpKind`] of that class ([`OpKind::is_unary_elementwise`],
//! [`OpKind::is_binary_elementwise`], [`OpKind::is_fold_reduction`]), and
//! report an op outside it as an internal error.

mod cpu_storage;
pub(crate) mod fused_program;
mod index_offsets;
pub(crate) mod kernel_record;
pub(crate) mod one_op;
mod op_kernels;
pub(crate) mod profile_record;
mod rng;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use aot_ir::OpKind;
pub(crate) use cpu_storage::dispatch_cpu;
pub use cpu_storage::{CpuElem, CpuStorage};
pub use fused_program::{
    Program as FusedProgram, ReduceProgram as FusedReduceProgram, Rhs as FusedRhs, RowOp as FusedRowOp, Step as FusedStep,
};
pub use index_offsets::index_offsets;
pub use kernel_record::KernelSource;
pub(crate) use op_kernels::OpKernels;
pub use rng::Rng;
use std::ops::Range;

/// The size from which the CPU's elementwise kernels split work across
/// threads; below it a kernel runs on the calling thread.
pub(crate) const PAR_MIN: usize = 32 * 1024;

/// What a random fill draws, one value per element in row-major order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform on [0, 1).
    Uniform,
    /// Standard normal.
    Normal,
    /// Dropout's mask: `scale` where a uniform draw is `>= p`, else 0.
    Dropout { p: f64, scale: f64 },
}

/// One device's buffers and the primitives the eager ops are built from.
///
/// Constructors (`full`, `from_host`, `random`) take the device to allocate
/// on; everything else works on buffers of the implementing device.
pub trait Backend: Sized + std::fmt::Debug + Send + Sync {
    /// The device this buffer lives on.
    fn device(&self) -> Device;
    fn dtype(&self) -> DType;
    /// The number of elements of the buffer.
    fn len(&self) -> usize;
    /// Whether the buffer has no elements.
    #[cfg(any(test, feature = "test-hooks"))]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // ---- allocation and transfer ------------------------------------------

    /// `n` elements of `dtype`, each `value` converted to it.
    fn full(op: &'static str, device: &Device, dtype: DType, n: usize, value: f64) -> Result<Self>;
    /// `n` values `start + i * step` on `device`: `arange`'s buffer. Floats
    /// are computed in f64 and converted as a cast does; `I64` truncates
    /// `start` and `step` to integers and computes in wrapping i64 (the
    /// caller checked that the first and last values fit).
    fn arange(op: &'static str, device: &Device, dtype: DType, n: usize, start: f64, step: f64) -> Result<Self>;
    /// A buffer on `device` holding `data` (moved, or uploaded).
    fn from_host(op: &'static str, device: &Device, data: CpuStorage) -> Result<Self>;
    /// `n` values of `dtype` drawn from `dist` with `rng`. A buffer that
    /// cannot be allocated is an error, and then nothing is drawn.
    fn random(op: &'static str, device: &Device, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<Self>;
    /// The elements of `l`, in row-major order, converted to `dtype`, on the host.
    fn to_host(&self, op: &'static str, l: &Layout, dtype: DType) -> Result<CpuStorage>;

    // ---- elementwise --------------------------------------------------------

    /// `op(x)` (a unary elementwise op) for the elements of `l`, written in
    /// the dense layout `out`.
    fn unary(&self, op: OpKind, l: &Layout, out: &Layout) -> Result<Self>;
    /// `x` clamped to `[min, max]` (either bound may be absent).
    fn clamp(&self, op: &'static str, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<Self>;
    /// `a op b` (a binary elementwise op) of two buffers of one dtype,
    /// both laid out with `out`'s shape.
    fn binary(&self, op: OpKind, la: &Layout, rhs: &Self, lb: &Layout, out: &Layout) -> Result<Self>;
    /// `self[l] = self[l] op rhs[lr]` in place: one shape, one dtype, and
    /// `l` does not overlap itself.
    fn binary_assign(&mut self, op: OpKind, l: &Layout, rhs: &Self, lr: &Layout) -> Result<()>;
    /// `a op s`, or `s op a` if `scalar_first`.
    fn binary_scalar(&self, op: OpKind, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<Self>;
    /// `a op b` over two dense runs, `self[ra]` and `rhs[rb]` (one length,
    /// one dtype), into a new dense buffer: the kernel of a compiled call's
    /// direct steps (`executor/direct_kernels.rs`), which checked the operands once
    /// (dtype, shape, contiguity, bounds), so nothing is re-derived here
    /// from layouts. Serves add/sub/mul/div of f32 and f64; other operands
    /// are an error (never a panic), and the caller runs the eager op.
    fn binary_dense(&self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<Self>;
    /// `self[ra] = self[ra] op rhs[rb]` in place, for the operands of
    /// [`binary_dense`](Self::binary_dense).
    fn binary_assign_dense(&mut self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<()>;
    /// `cond ? a : b`, with `self` the bool condition.
    #[allow(clippy::too_many_arguments)]
    fn where_cond(&self, op: &'static str, lc: &Layout, a: &Self, la: &Layout, b: &Self, lb: &Layout, out: &Layout) -> Result<Self>;
    /// The elements of `l` converted to `dtype`, in the dense layout `out`.
    fn cast(&self, op: &'static str, l: &Layout, dtype: DType, out: &Layout) -> Result<Self>;

    // ---- writes into an existing buffer ------------------------------------

    /// Copies the elements of `ls` in `self` to the positions of `ld` in
    /// `dst` (same shape), converting to `dst`'s dtype.
    fn copy_strided(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()>;
    /// Adds the elements of `ls` in `self` into the positions of `ld` in
    /// `dst` (same shape), in row-major order; positions that `ld` visits
    /// more than once receive every addend.
    fn scatter_add(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()>;
    /// Sets the positions of `l` to `value` converted to the buffer's dtype
    /// (for tests: eager ops fill through `copy_strided`).
    #[cfg(any(test, feature = "test-hooks"))]
    fn fill(&mut self, op: &'static str, l: &Layout, value: f64) -> Result<()>;

    // ---- indexing along a dim ----------------------------------------------

    /// For every position `p` of `ix`'s layout, in row-major order, the
    /// element of `l` at `p` with coordinate `ix.dim` replaced by the index
    /// value at `p`, into a new contiguous buffer of that shape
    /// (`index_select`, `gather`, `embedding`). An index value out of
    /// range is an error.
    fn gather(&self, op: &'static str, l: &Layout, ix: Indexed<'_, Self>) -> Result<Self>;
    /// For every position `p` of `ix`'s layout: `dst`'s element of `ld` at
    /// `p` with coordinate `ix.dim` replaced by the index value at `p` is
    /// set to (or, if `accumulate`, incremented by) the element of `ls` at
    /// `p` (`ls` has the index's shape; `dst` is another buffer of the same
    /// dtype). Nothing is written when an index value is out of range.
    fn scatter(&self, op: &'static str, ls: &Layout, ix: Indexed<'_, Self>, dst: &mut Self, ld: &Layout, accumulate: bool) -> Result<()>;

    // ---- reductions and matmul (contiguous results) -------------------------

    /// Sum, mean or amax (`sum_dim`, `mean_dim`, `amax_dim`) over `dims`
    /// (all dims if empty).
    fn reduce(&self, op: OpKind, l: &Layout, dims: &[usize], keepdim: bool) -> Result<Self>;
    /// Variance over `dims` (all if empty), dividing by `N - correction`.
    fn var(&self, op: &'static str, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<Self>;
    /// softmax (or log_softmax if `log`) along `dim`.
    fn softmax(&self, op: &'static str, l: &Layout, dim: usize, log: bool) -> Result<Self>;
    /// Batched product of `self` [b, m, k] and `rhs` [b, k, n] (3-D layouts).
    fn matmul(&self, op: &'static str, la: &Layout, rhs: &Self, lb: &Layout) -> Result<Self>;

    // ---- scans, index reductions and losses (contiguous results) ----------

    /// The cumulative sum of `l` along `dim` (from the end if `reverse`),
    /// with `l`'s shape: floats keep their dtype (f64 running sums, each
    /// rounded once), i64 and bool sum into i64 exactly (wrapping).
    fn cumsum(&self, op: &'static str, l: &Layout, dim: usize, reverse: bool) -> Result<Self>;
    /// Along `dim` of `l` (a non-empty dim), per position of the other
    /// dims in row-major order: `(values, indices)`, the value and the
    /// first index (i64) of the maximum, or of the minimum if not `max`. A
    /// NaN counts as the extreme; ties keep the first index.
    fn extreme(&self, op: &'static str, l: &Layout, dim: usize, max: bool) -> Result<(Self, Self)>;
    /// `nll_loss` of the `[N, C]` input `l` (f64 sum in row order of the
    /// picked elements, `-sum / t.count` rounded once to the dtype): one
    /// element.
    fn nll_loss(&self, op: &'static str, l: &Layout, t: Targets<'_, Self>) -> Result<Self>;
    /// `nll_loss`'s gradient for the output gradient `self` (the one
    /// element of `lg`): `[N, C]` of `dtype`, zero except `-g / t.count` at
    /// each counted `(r, targets[r])`.
    fn nll_loss_backward(&self, op: &'static str, lg: &Layout, t: Targets<'_, Self>, dtype: DType) -> Result<Self>;

    // ---- the kernel stage ---------------------------------------------------

    /// A fused elementwise kernel over `inputs`, each with its layout
    /// broadcast to `out`'s shape, into a new buffer laid out as `out`
    /// (dense, offset 0): the CPU evaluates the program `p`, a backend that
    /// generates code renders `call`'s kernel. `None`: not for these dtypes
    /// (the caller runs the kernel's ops one by one, which also reports
    /// errors). `call` is absent only for the CPU evaluator's own tests
    /// (a backend that renders code then declines).
    fn fused(
        op: &'static str,
        p: &FusedProgram<'_>,
        call: Option<&KernelCall<'_>>,
        inputs: &[(&Self, Layout)],
        out: &Layout,
    ) -> Option<Result<Self>>;

    /// Whether [`fused`](Self::fused) computes every step of `p` (over its
    /// `inputs` loads); a kernel it would decline runs op by op. True by
    /// default (a backend that renders code computes every step).
    fn supports_fused(_p: &FusedProgram<'_>, _inputs: usize) -> bool {
        true
    }

    /// [`fused`](Self::fused) computed over `dst`, the buffer of input `k`,
    /// which the caller vouches nothing else reads after this kernel and
    /// which is laid out exactly as `out` (dense, offset 0, its whole
    /// length); `inputs[k]` stands for it and is not read. `Err(dst)`:
    /// declined, `dst` handed back unchanged. Declined by default.
    fn fused_over(
        _op: &'static str,
        _p: &FusedProgram<'_>,
        _inputs: &[(&Self, Layout)],
        _k: usize,
        dst: Self,
        _out: &Layout,
    ) -> std::result::Result<Result<Self>, Self> {
        Err(dst)
    }

    /// The elementwise kernel `p` (or `call`'s) stored over its
    /// destinations' own buffers, in place (reinplacing): `dests` pairs an
    /// input with the body value stored over it, and `own` holds those
    /// inputs' buffers in the same order (their entries of `inputs` are
    /// `None`). Each destination is laid out exactly as `out`, so each
    /// element is read before the same position is written. `None`:
    /// declined, nothing written. Declined by default.
    fn fused_in_place(
        _op: &'static str,
        _p: &FusedProgram<'_>,
        _call: &KernelCall<'_>,
        _inputs: &[(Option<&Self>, Layout)],
        _dests: &[(usize, usize)],
        _own: Vec<&mut Self>,
        _out: &Layout,
    ) -> Option<Result<()>> {
        None
    }

    /// Several in-place kernels of one code (`segs`, each as
    /// [`fused_in_place`](Self::fused_in_place) takes one, its destinations
    /// among its inputs) in one launch; each segment's inputs are laid out
    /// as its `out`, and no buffer a segment writes is another segment's.
    /// `None`: declined, nothing written (the caller runs them one by one).
    /// Declined by default (only a device has launches to save).
    fn fused_in_place_segments(_op: &'static str, _segs: &[InPlaceSegment<'_, Self>]) -> Option<Result<()>> {
        None
    }

    /// A reduction kernel (a reduction with its fused prologue and
    /// epilogue: the program `p`, or `call`'s kernel) over `inputs`, each
    /// laid out over the reduction's input shape, into a new buffer for
    /// `out` (contiguous for one value per row). `None`: the backend has no
    /// reduction kernels, or not for these dtypes (the caller runs the ops
    /// one by one). Declined by default.
    fn fused_reduce(
        _op: &'static str,
        _p: &FusedReduceProgram<'_>,
        _call: &KernelCall<'_>,
        _inputs: &[(&Self, Layout)],
        _out: &Layout,
    ) -> Option<Result<Self>> {
        None
    }
}

/// An i64 index buffer read through `layout`, whose values replace
/// coordinate `dim` of the positions it is laid out over (see
/// [`Backend::gather`]).
#[derive(Clone, Copy, Debug)]
pub struct Indexed<'a, S> {
    pub index: &'a S,
    pub layout: &'a Layout,
    pub dim: usize,
}

/// The class targets of a loss: an i64 buffer read through `layout`
/// (`[N]`), each in `[0, classes)` or `ignore` (the caller checked them);
/// `count` of them are not `ignore`.
#[derive(Clone, Copy, Debug)]
pub struct Targets<'a, S> {
    pub index: &'a S,
    pub layout: &'a Layout,
    pub classes: usize,
    pub ignore: i64,
    pub count: usize,
}

/// One kernel of [`Backend::fused_in_place_segments`]: `read` says which
/// inputs its body reads, `dests` pairs an input with the body value
/// stored over it.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct InPlaceSegment<'a, S> {
    pub read: &'a [bool],
    pub call: KernelCall<'a>,
    pub inputs: Vec<(&'a S, Layout)>,
    pub dests: &'a [(usize, usize)],
    pub out: &'a Layout,
}

/// A kernel of the kernel stage as one call runs it, for a backend that
/// renders its own code (CUDA): the kernel, the plan's types of its values
/// (storage and compute dtypes, eager's promotion for this call), and the
/// values of its scalar slots (`ScalarSlots::of(kernel).values(..)`). The
/// CPU backend evaluates the [`FusedProgram`] instead and ignores it.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct KernelCall<'a> {
    pub kernel: &'a aot_ir::kernel::Kernel,
    pub types: &'a aot_ir::kernel::render::KernelTypes,
    pub slots: &'a [f64],
}

#[cfg(test)]
mod tests;
