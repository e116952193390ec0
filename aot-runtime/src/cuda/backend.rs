//! `impl Backend for CudaStorage` (feature `cuda`).
//!
//! Elementwise ops run as one-op kernels of the kernel stage (`kernels.rs`),
//! rendered from the one op definition, so the device computes what the CPU
//! backend computes: float ops of every float dtype, i64 ops with exact
//! integer semantics, comparisons, `where`, casts, strided copies (a cast
//! to the destination's dtype written through its layout) and fills (a
//! copy from a one-element buffer read with stride 0). Matmul on a GPU goes
//! through cuBLAS (`cublas.rs`); the simulator, which has no cuBLAS,
//! computes it on the host with the CPU's gemm.
//!
//! Reductions (sum, mean, amax, var, softmax, log_softmax) run as one-op
//! reduction kernels (`reduce.rs`), and the kernels of compiled calls,
//! elementwise and reductions, are rendered from the kernel stage and
//! launched as they are (`fused_kernels.rs`). Random fills are kernels of the
//! generator's Philox stream (`random.rs`). `clamp`, scalar ops of every
//! dtype and `scatter_add` have kernels of their own (`ops.rs`), as have
//! the gathers and scatters by an index (`index.rs`) and `cumsum`, the
//! extremes along a dim and `nll_loss` (`scan.rs`).
//!
//! The rest (what eager refuses, which the host reports with the CPU's
//! error) run on the host:
//! the operands are downloaded, the CPU backend computes, the result is
//! uploaded. That is correct everywhere and slow on a GPU;
//! `Counter::HostRoundTrips` counts them, so tests can tell which ops ran
//! kernels.

use super::device::Gpu;
use super::kernels::{self, Buf};
use super::reduce::{self, EagerRow};
use super::CudaStorage;
use crate::backend::one_op::OneOp;
use crate::backend::CpuStorage;
use crate::backend::{Backend, Distribution, FusedProgram, FusedReduceProgram, InPlaceSegment, Indexed, KernelCall, Rng, Targets};
use crate::counters::{bump, Counter};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::OpKind;
use std::ops::Range;

impl CudaStorage {
    /// The whole buffer on the host.
    pub(super) fn host(&self, op: &'static str) -> Result<CpuStorage> {
        let bytes = self.gpu(op)?.download(op, &self.mem, self.len * self.dtype.size_in_bytes())?;
        Ok(CpuStorage::from_le_bytes(self.dtype, &bytes))
    }

    /// `data` uploaded to device `ordinal`.
    fn upload(op: &'static str, ordinal: usize, data: &CpuStorage) -> Result<CudaStorage> {
        let gpu = super::device::gpu(op, ordinal)?;
        let mem = gpu.upload(op, &data.to_le_bytes())?;
        Ok(CudaStorage { mem, dtype: data.dtype(), len: data.len(), ordinal })
    }

    /// Runs `f` on the host copy of `self` and uploads its result.
    pub(super) fn on_host(&self, op: &'static str, f: impl FnOnce(&CpuStorage) -> Result<CpuStorage>) -> Result<CudaStorage> {
        bump(Counter::HostRoundTrips);
        let out = f(&self.host(op)?)?;
        CudaStorage::upload(op, self.ordinal, &out)
    }
}

/// Whether one-op kernels of `op` exist for `dtype`: every elementwise
/// op of a float dtype; of i64, the ops with exact integer semantics.
pub(super) fn renders(op: OpKind, dtype: DType) -> bool {
    use OpKind::*;
    match dtype {
        d if d.is_float() => true,
        DType::I64 => matches!(op, Add | Sub | Mul | Pow | Maximum | Minimum | Neg | Abs | Square | Relu | Eq | Ne | Lt | Le | Gt | Ge),
        _ => false,
    }
}

impl CudaStorage {
    pub(super) fn buf<'a>(&self, gpu: &Gpu, layout: &'a Layout) -> Buf<'a> {
        Buf { addr: self.mem.address(gpu), layout, dtype: self.dtype }
    }

    /// A new buffer of `dtype` laid out as `out`, written by `one` over
    /// `inputs` (each with its layout).
    pub(super) fn launch_new(
        name: &'static str,
        ordinal: usize,
        one: &OneOp<'_>,
        inputs: &[(&CudaStorage, &Layout)],
        scalars: &[f64],
        dtype: DType,
        out: &Layout,
    ) -> Result<CudaStorage> {
        let gpu = super::device::gpu(name, ordinal)?;
        let n: usize = out.shape.iter().product();
        let mem = gpu.alloc(name, n * dtype.size_in_bytes())?;
        let bufs: Vec<Buf<'_>> = inputs.iter().map(|(s, l)| s.buf(gpu, l)).collect();
        // SAFETY: the inputs are live buffers of this device whose layouts
        // the eager op checked; `mem` is new and holds `out`'s elements.
        unsafe { kernels::launch(name, gpu, one, &bufs, scalars, Buf { addr: mem.address(gpu), layout: out, dtype }) }?;
        Ok(CudaStorage { mem, dtype, len: n, ordinal })
    }
}

/// `op` when it is a unary elementwise op, else the internal error.
fn unary_kind(op: OpKind) -> Result<OpKind> {
    if op.is_unary_elementwise() {
        Ok(op)
    } else {
        Err(AotError::internal(op.name(), format!("`{op}` is not a unary elementwise op")))
    }
}

/// `op` when it is a binary elementwise op, else the internal error.
pub(super) fn binary_kind(op: OpKind) -> Result<OpKind> {
    if op.is_binary_elementwise() {
        Ok(op)
    } else {
        Err(AotError::internal(op.name(), format!("`{op}` is not a binary elementwise op")))
    }
}

/// A contiguous layout of `range` (for the dense primitives).
fn run(range: &Range<usize>) -> Layout {
    let mut l = Layout::contiguous(&[range.len()]);
    l.offset = range.start;
    l
}

fn expect_cuda(op: &'static str, device: &Device) -> Result<usize> {
    match device {
        Device::Cuda(i) => Ok(*i),
        other => Err(AotError::internal(op, format!("the CUDA backend was asked to allocate on {other}"))),
    }
}

impl Backend for CudaStorage {
    fn device(&self) -> Device {
        CudaStorage::device(self)
    }
    fn dtype(&self) -> DType {
        CudaStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CudaStorage::len(self)
    }
    fn full(op: &'static str, device: &Device, dtype: DType, n: usize, value: f64) -> Result<Self> {
        let ordinal = expect_cuda(op, device)?;
        let host = <CpuStorage as Backend>::full(op, &Device::Cpu, dtype, n, value)?;
        CudaStorage::upload(op, ordinal, &host)
    }
    fn arange(op: &'static str, device: &Device, dtype: DType, n: usize, start: f64, step: f64) -> Result<Self> {
        super::arange::fill(op, expect_cuda(op, device)?, dtype, n, start, step)
    }
    fn from_host(op: &'static str, device: &Device, data: CpuStorage) -> Result<Self> {
        CudaStorage::upload(op, expect_cuda(op, device)?, &data)
    }
    fn random(op: &'static str, device: &Device, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<Self> {
        super::random::fill(op, expect_cuda(op, device)?, dist, dtype, n, rng)
    }
    fn to_host(&self, op: &'static str, l: &Layout, dtype: DType) -> Result<CpuStorage> {
        self.host(op)?.to_host(op, l, dtype)
    }
    fn unary(&self, op: OpKind, l: &Layout, out: &Layout) -> Result<Self> {
        let kind = unary_kind(op)?;
        if renders(kind, self.dtype) {
            let one = OneOp::unary(kind, self.dtype);
            return CudaStorage::launch_new(op.name(), self.ordinal, &one, &[(self, l)], &[], self.dtype, out);
        }
        self.on_host(op.name(), |h| h.unary(op, l, out))
    }
    fn clamp(&self, op: &'static str, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<Self> {
        super::ops::clamp(self, op, l, min, max, out)
    }
    fn binary(&self, op: OpKind, la: &Layout, rhs: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        let kind = binary_kind(op)?;
        if rhs.dtype == self.dtype && renders(kind, self.dtype) {
            let dtype = if op.is_comparison() { DType::Bool } else { self.dtype };
            let one = OneOp::binary(kind, self.dtype);
            return CudaStorage::launch_new(op.name(), self.ordinal, &one, &[(self, la), (rhs, lb)], &[], dtype, out);
        }
        let b = rhs.host(op.name())?;
        self.on_host(op.name(), |h| h.binary(op, la, &b, lb, out))
    }
    fn binary_assign(&mut self, op: OpKind, l: &Layout, rhs: &Self, lr: &Layout) -> Result<()> {
        let kind = binary_kind(op)?;
        if rhs.dtype == self.dtype && !op.is_comparison() && renders(kind, self.dtype) {
            let gpu = self.gpu(op.name())?;
            let one = OneOp::binary(kind, self.dtype);
            let (me, other) = (self.buf(gpu, l), rhs.buf(gpu, lr));
            // SAFETY: `self` is borrowed mutably, and written where it is
            // read, with the same layout; `rhs` is another live buffer.
            return unsafe { kernels::launch(op.name(), gpu, &one, &[me, other], &[], me) };
        }
        let r = rhs.host(op.name())?;
        let mut me = self.host(op.name())?;
        bump(Counter::HostRoundTrips);
        me.binary_assign(op, l, &r, lr)?;
        *self = CudaStorage::upload(op.name(), self.ordinal, &me)?;
        Ok(())
    }
    fn binary_dense(&self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<Self> {
        let out = Layout::contiguous(&[ra.len()]);
        self.binary(op, &run(&ra), rhs, &run(&rb), &out)
    }
    fn binary_assign_dense(&mut self, op: OpKind, ra: Range<usize>, rhs: &Self, rb: Range<usize>) -> Result<()> {
        self.binary_assign(op, &run(&ra), rhs, &run(&rb))
    }
    fn binary_scalar(&self, op: OpKind, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<Self> {
        super::ops::binary_scalar(self, op, la, s, scalar_first, out)
    }
    fn where_cond(&self, op: &'static str, lc: &Layout, a: &Self, la: &Layout, b: &Self, lb: &Layout, out: &Layout) -> Result<Self> {
        if self.dtype == DType::Bool && a.dtype == b.dtype {
            // `a.where_(cond, b)`: the inputs are loaded as (a, cond, b).
            let one = OneOp::where_cond(a.dtype);
            return CudaStorage::launch_new(op, a.ordinal, &one, &[(a, la), (self, lc), (b, lb)], &[], a.dtype, out);
        }
        let (ha, hb) = (a.host(op)?, b.host(op)?);
        bump(Counter::HostRoundTrips);
        let r = self.host(op)?.where_cond(op, lc, &ha, la, &hb, lb, out)?;
        CudaStorage::upload(op, a.ordinal, &r)
    }
    fn cast(&self, op: &'static str, l: &Layout, dtype: DType, out: &Layout) -> Result<Self> {
        let one = OneOp::cast(dtype);
        CudaStorage::launch_new(op, self.ordinal, &one, &[(self, l)], &[], dtype, out)
    }
    fn copy_strided(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        let gpu = self.gpu(op)?;
        let one = OneOp::cast(dst.dtype);
        let (src, to) = (self.buf(gpu, ls), dst.buf(gpu, ld));
        // SAFETY: `dst` is borrowed mutably and is another buffer than
        // `self`; both are live buffers of this device.
        unsafe { kernels::launch(op, gpu, &one, &[src], &[], to) }
    }
    fn scatter_add(&self, op: &'static str, ls: &Layout, dst: &mut Self, ld: &Layout) -> Result<()> {
        super::ops::scatter_add(self, op, ls, dst, ld)
    }
    #[cfg(any(test, feature = "test-hooks"))]
    fn fill(&mut self, op: &'static str, l: &Layout, value: f64) -> Result<()> {
        // A one-element buffer of the value, read through stride 0.
        let one_value = <CpuStorage as Backend>::full(op, &Device::Cpu, self.dtype, 1, value)?;
        let src = CudaStorage::upload(op, self.ordinal, &one_value)?;
        let broadcast = Layout::new(l.shape.to_vec(), vec![0; l.shape.len()], 0);
        src.copy_strided(op, &broadcast, self, l)
    }
    fn gather(&self, op: &'static str, l: &Layout, ix: Indexed<'_, Self>) -> Result<Self> {
        super::index::gather(self, op, l, ix)
    }
    fn scatter(&self, op: &'static str, ls: &Layout, ix: Indexed<'_, Self>, dst: &mut Self, ld: &Layout, accumulate: bool) -> Result<()> {
        super::index::scatter(self, op, ls, ix, dst, ld, accumulate)
    }
    fn reduce(&self, op: OpKind, l: &Layout, dims: &[usize], keepdim: bool) -> Result<Self> {
        match self.reduce_kernel(op.torch_name(), EagerRow::Reduce(op), l, dims) {
            Some(r) => r,
            None => self.on_host(op.torch_name(), |h| h.reduce(op, l, dims, keepdim)),
        }
    }
    fn var(&self, op: &'static str, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<Self> {
        match self.reduce_kernel(op, EagerRow::Var { correction }, l, dims) {
            Some(r) => r,
            None => self.on_host(op, |h| h.var(op, l, dims, correction, keepdim)),
        }
    }
    fn softmax(&self, op: &'static str, l: &Layout, dim: usize, log: bool) -> Result<Self> {
        match self.reduce_kernel(op, EagerRow::Softmax { log }, l, &[dim]) {
            Some(r) => r,
            None => self.on_host(op, |h| h.softmax(op, l, dim, log)),
        }
    }
    fn matmul(&self, op: &'static str, la: &Layout, rhs: &Self, lb: &Layout) -> Result<Self> {
        let gpu = self.gpu(op)?;
        if let Some(g) = super::cublas::plan(self.dtype, rhs.dtype, la, lb) {
            super::cublas::note(self.dtype, &g);
            // The simulator has no cuBLAS: the CPU's gemm below stands in.
            if let Gpu::Real(_) = gpu {
                let len = g.batch as usize * g.m as usize * g.n as usize;
                let mem = gpu.alloc(op, len * self.dtype.size_in_bytes())?;
                let (a, b, out) = (self.mem.address(gpu), rhs.mem.address(gpu), mem.address(gpu));
                // SAFETY: both operands are live buffers of this device
                // holding their layouts' elements (checked by the eager op),
                // `g` is `plan`'s for these layouts, and `mem` is new.
                unsafe { gpu.gemm(op, self.dtype, &g, (a, la), (b, lb), out) }?;
                return Ok(CudaStorage { mem, dtype: self.dtype, len, ordinal: self.ordinal });
            }
        }
        let b = rhs.host(op)?;
        self.on_host(op, |h| h.matmul(op, la, &b, lb))
    }
    fn cumsum(&self, op: &'static str, l: &Layout, dim: usize, reverse: bool) -> Result<Self> {
        self.cumsum_kernel(op, l, dim, reverse)
    }
    fn extreme(&self, op: &'static str, l: &Layout, dim: usize, max: bool) -> Result<(Self, Self)> {
        self.extreme_kernel(op, l, dim, max)
    }
    fn nll_loss(&self, op: &'static str, l: &Layout, t: Targets<'_, Self>) -> Result<Self> {
        self.nll_loss_kernel(op, l, t)
    }
    fn nll_loss_backward(&self, op: &'static str, lg: &Layout, t: Targets<'_, Self>, dtype: DType) -> Result<Self> {
        self.nll_loss_backward_kernel(op, lg, t, dtype)
    }
    fn fused(
        op: &'static str,
        p: &FusedProgram<'_>,
        call: Option<&KernelCall<'_>>,
        inputs: &[(&Self, Layout)],
        out: &Layout,
    ) -> Option<Result<Self>> {
        super::fused_kernels::fused(op, p, call?, inputs, out)
    }
    /// Device buffers are written through shared references, so each
    /// destination is read as its own input.
    fn fused_in_place(
        op: &'static str,
        p: &FusedProgram<'_>,
        call: &KernelCall<'_>,
        inputs: &[(Option<&Self>, Layout)],
        dests: &[(usize, usize)],
        own: Vec<&mut Self>,
        out: &Layout,
    ) -> Option<Result<()>> {
        let own: Vec<&CudaStorage> = own.into_iter().map(|c| &*c).collect();
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, (s, l))| Some((s.or_else(|| dests.iter().position(|&(k, _)| k == i).map(|j| own[j]))?, l.clone())))
            .collect::<Option<Vec<_>>>()?;
        super::fused_kernels::fused_in_place(op, p, call, &inputs, dests, out)
    }
    fn fused_in_place_segments(op: &'static str, segs: &[InPlaceSegment<'_, Self>]) -> Option<Result<()>> {
        super::fused_kernels::fused_in_place_segments(op, segs)
    }
    fn fused_reduce(
        op: &'static str,
        p: &FusedReduceProgram<'_>,
        call: &KernelCall<'_>,
        inputs: &[(&Self, Layout)],
        out: &Layout,
    ) -> Option<Result<Self>> {
        super::fused_kernels::fused_reduce(op, p, call, inputs, out)
    }
}

impl CudaStorage {
    /// An eager reduction of `l` over `dims` as a kernel (`reduce.rs`), into
    /// a new contiguous buffer; `None` where eager reports an error for it
    /// (the caller's host path reports it as the CPU does).
    fn reduce_kernel(&self, name: &'static str, row: EagerRow, l: &Layout, dims: &[usize]) -> Option<Result<Self>> {
        let reduced = reduce::plan(row, self.dtype, l, dims)?;
        let softmax = matches!(row, EagerRow::Softmax { .. });
        let dtype = match row {
            EagerRow::Reduce(OpKind::SumDim) if !self.dtype.is_float() => DType::I64,
            _ => self.dtype,
        };
        let n: usize = l.shape.iter().zip(&reduced).map(|(&n, &r)| if r && !softmax { 1 } else { n }).product();
        let run = || -> Result<Self> {
            let gpu = self.gpu(name)?;
            let mem = gpu.alloc(name, n * dtype.size_in_bytes())?;
            // SAFETY: `self` is a live buffer of this device holding `l`'s
            // elements (checked by the eager op); `mem` is new and holds
            // the result's `n` elements.
            unsafe { reduce::eager(name, gpu, row, self.buf(gpu, l), &reduced, (mem.address(gpu), dtype)) }?;
            Ok(CudaStorage { mem, dtype, len: n, ordinal: self.ordinal })
        };
        Some(run())
    }
}
