//! Storage: the shared buffer behind one or more tensors, with its version
//! counter. Views share a `Storage`; `copy()` makes a new one.
//!
//! The data is a [`StorageData`]: a buffer of one of the backends (CPU, or
//! CUDA, whose backend always exists and is a dummy without the `cuda`
//! feature). This layer is device dispatch only: `Storage`'s primitives
//! lock the buffers, check that every operand is on one device (else
//! [`AotError::DeviceMismatch`] naming the op and both devices), and call
//! the [`Backend`] method of that device; the kernel-stage entries
//! (`fused_dispatch.rs`, `fused_into_buffers.rs`, `fused_segments.rs`)
//! pick the backend the same way. The eager ops
//! use only these methods; none of them sees a `CpuStorage`. A few
//! accessors read a host buffer directly (`to_vec`, `get_f64`).
//!
//! A storage may also be a dtype view of another storage's bytes
//! (`Tensor::view_dtype`): it shares that root's identity and version
//! counter, and its locks hand the primitives the root's bytes as its own
//! dtype (`storage/dtype_view.rs`).
//!
//! Every backend call is timed here for the profiler (`crate::profile`):
//! each primitive opens a span around its backend call, which counts the
//! bytes it reads and writes (and a matmul's flops); off, a span is one
//! atomic load. A primitive built from others opens its span first, so
//! the others are not recorded apart.
//!
//! Every buffer whose length comes from a shape is allocated by
//! `host_alloc::try_vec` (or the helpers on it): a request that is too
//! large is an [`AotError::OutOfMemory`] naming the op, never an abort.

use crate::backend::kernel_record::note_op;
use crate::backend::one_op::EagerRow;
use crate::backend::profile_record::{Cost, Span};
use crate::backend::{dispatch_cpu, Backend, CpuStorage, Distribution, OpKernels, Rng};
use crate::cuda::CudaStorage;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::profile::{moved, span};
use aot_ir::OpKind;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

mod dtype_view;
mod fused_dispatch;
mod fused_into_buffers;
mod fused_segments;
mod index;
mod scan;
pub(crate) use fused_segments::Segment;
pub(crate) use scan::LossTargets;

/// Where a storage's bytes live: a buffer of one backend.
#[derive(Debug)]
pub enum StorageData {
    Cpu(CpuStorage),
    /// A CUDA buffer. Without the `cuda` feature no value of this variant
    /// can be made: the dummy backend refuses every allocation.
    Cuda(CudaStorage),
}

/// Runs `$body` with `$s` bound to the backend buffer of a `&StorageData`
/// (or `&mut`). These macros and the `Storage` primitives below are the
/// only code that matches on the device.
macro_rules! on_backend {
    ($data:expr, $s:ident => $body:expr) => {
        match $data {
            StorageData::Cpu($s) => $body,
            StorageData::Cuda($s) => $body,
        }
    };
}

/// [`on_backend!`] for a `$body` that makes a new buffer of the same backend.
macro_rules! map_backend {
    ($data:expr, $s:ident => $body:expr) => {
        match $data {
            StorageData::Cpu($s) => $body.map(StorageData::Cpu),
            StorageData::Cuda($s) => $body.map(StorageData::Cuda),
        }
    };
}

/// [`map_backend!`] over two buffers that [`same_device`] has checked.
macro_rules! map_backend2 {
    ($op:expr, ($a:expr, $b:expr), ($x:ident, $y:ident) => $body:expr) => {
        match ($a, $b) {
            (StorageData::Cpu($x), StorageData::Cpu($y)) => $body.map(StorageData::Cpu),
            (StorageData::Cuda($x), StorageData::Cuda($y)) => $body.map(StorageData::Cuda),
            (x, y) => Err(mismatch($op, x.device(), y.device())),
        }
    };
}

impl StorageData {
    pub fn device(&self) -> Device {
        on_backend!(self, s => s.device())
    }
    pub fn dtype(&self) -> DType {
        on_backend!(self, s => Backend::dtype(s))
    }
    pub fn len(&self) -> usize {
        on_backend!(self, s => Backend::len(s))
    }
    #[cfg(feature = "test-hooks")]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `r`, a new storage made by `span`'s call, its bytes counted as written
/// (the span records as it drops here).
fn made(span: Option<Span<'_>>, r: Result<Storage>) -> Result<Storage> {
    if let (Some(mut p), Ok(s)) = (span, &r) {
        p.add_bytes(s.bytes());
    }
    r
}

/// The bytes of `n` elements of `dtype`, read or written.
fn elems(n: usize, dtype: DType) -> Cost {
    Cost { bytes: (n * dtype.size_in_bytes()) as u64, flops: 0 }
}

fn mismatch(op: &'static str, a: Device, b: Device) -> AotError {
    AotError::DeviceMismatch { op, lhs: a.to_string(), rhs: b.to_string() }
}

/// The error unless every storage is on `first`'s device.
fn same_device(op: &'static str, first: &Storage, rest: &[&Storage]) -> Result<()> {
    match rest.iter().find(|s| s.device != first.device) {
        Some(s) => Err(mismatch(op, first.device, s.device)),
        None => Ok(()),
    }
}

static NEXT_STORAGE_ID: AtomicUsize = AtomicUsize::new(1);

/// Notes a primitive for `kernels_for` (`kernel_record`) when it has
/// elements to compute: over no element, no kernel runs.
#[inline]
fn note(numel: usize, k: impl FnOnce() -> OpKernels) {
    if numel > 0 {
        note_op(k);
    }
}

/// The number of elements of a reduction of `l` over `dims` (all if
/// empty), or of `l` itself for a softmax.
fn reduced_numel(l: &Layout, dims: &[usize], rows: bool) -> usize {
    if rows {
        return l.numel();
    }
    l.shape.iter().enumerate().filter(|(d, _)| !dims.is_empty() && !dims.contains(d)).map(|(_, &n)| n).product()
}

/// The shared buffer behind tensors, with PyTorch's version counter.
#[derive(Debug)]
pub struct Storage {
    id: usize,
    device: Device,
    dtype: DType,
    /// Elements; fixed, as writes only go through the backends' in-place
    /// primitives (read without taking the lock: every view op asks).
    len: usize,
    data: RwLock<StorageData>,
    version: AtomicU64,
    /// For the new value of an in-place op: the storage it was written
    /// into and that storage's version just after. A tensor saved for a
    /// backward that is such a value stands for the written tensor, whose
    /// later writes make the backward fail, as in PyTorch.
    written_into: std::sync::OnceLock<(std::sync::Weak<Storage>, u64)>,
    /// For a dtype view: the storage whose bytes these are (see
    /// `dtype_view.rs`); its `data` is then unused.
    bytes_of: Option<Arc<Storage>>,
}

/// A large CPU buffer goes to the buffer cache (`buffer_cache`) when its
/// storage is dropped.
impl Drop for Storage {
    fn drop(&mut self) {
        let data = self.data.get_mut().unwrap_or_else(|e| e.into_inner());
        if let StorageData::Cpu(c) = data {
            let empty = CpuStorage::Bool(Vec::new());
            dispatch_cpu!(std::mem::replace(c, empty), v => crate::buffer_cache::give(v));
        }
    }
}

impl Storage {
    pub(crate) fn new(data: StorageData) -> Storage {
        Storage {
            id: NEXT_STORAGE_ID.fetch_add(1, Ordering::Relaxed),
            device: data.device(),
            dtype: data.dtype(),
            len: data.len(),
            data: RwLock::new(data),
            version: AtomicU64::new(0),
            written_into: std::sync::OnceLock::new(),
            bytes_of: None,
        }
    }
    /// Records that this storage's value was written into `target`, which
    /// is now at `version` (see `written_into`).
    pub(crate) fn mark_written_into(&self, target: &std::sync::Arc<Storage>, version: u64) {
        let _ = self.written_into.set((std::sync::Arc::downgrade(target), version));
    }
    /// The storage this value was written into (while it lives), with its
    /// version just after the write.
    pub(crate) fn written_into(&self) -> Option<(std::sync::Arc<Storage>, u64)> {
        self.written_into.get().and_then(|(w, v)| Some((w.upgrade()?, *v)))
    }
    pub fn id(&self) -> usize {
        self.id
    }
    pub fn device(&self) -> Device {
        self.device
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The version counter: bumped by every in-place write.
    #[inline]
    pub fn version(&self) -> u64 {
        self.root().version.load(Ordering::Acquire)
    }
    /// Exchanges the buffers of two storages of one device, dtype and
    /// length (each keeps its identity, its version counter and its
    /// tensors). `false`: they differ, or are one storage; nothing changed.
    pub(crate) fn swap_data(&self, other: &Storage) -> bool {
        let differ = self.len != other.len || self.dtype != other.dtype || self.device != other.device;
        if self.same(other) || differ || self.is_dtype_view() || other.is_dtype_view() {
            return false;
        }
        let (mut a, mut b) = (self.write(), other.write());
        std::mem::swap(&mut *a, &mut *b);
        true
    }
    #[inline]
    pub(crate) fn bump_version(&self) {
        self.root().version.fetch_add(1, Ordering::AcqRel);
    }
    pub fn len(&self) -> usize {
        self.len
    }
    #[cfg(feature = "test-hooks")]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The size of the buffer in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        (self.len * self.dtype.size_in_bytes()) as u64
    }
}

/// The backend primitives, dispatched on the device of the operands.
impl Storage {
    /// `n` elements of `dtype` on `device`, each `value`.
    pub(crate) fn full(op: &'static str, device: &Device, dtype: DType, n: usize, value: f64) -> Result<Storage> {
        let _p = span(*device, op, || elems(n, dtype));
        let data = match device {
            Device::Cpu => StorageData::Cpu(Backend::full(op, device, dtype, n, value)?),
            Device::Cuda(_) => StorageData::Cuda(Backend::full(op, device, dtype, n, value)?),
        };
        Ok(Storage::new(data))
    }
    /// `n` values `start + i * step` of `dtype` on `device` (noted for
    /// `kernels_for`: CUDA runs it as a kernel of its own).
    pub(crate) fn arange(op: &'static str, device: &Device, dtype: DType, n: usize, start: f64, step: f64) -> Result<Storage> {
        note(n, || OpKernels::Arange { dtype });
        let _p = span(*device, op, || elems(n, dtype));
        let data = match device {
            Device::Cpu => StorageData::Cpu(Backend::arange(op, device, dtype, n, start, step)?),
            Device::Cuda(_) => StorageData::Cuda(Backend::arange(op, device, dtype, n, start, step)?),
        };
        Ok(Storage::new(data))
    }
    /// A storage on `device` holding the host buffer `data`. On the CPU
    /// the buffer is moved, so only an upload is profiled.
    pub(crate) fn from_host(op: &'static str, device: &Device, data: CpuStorage) -> Result<Storage> {
        let _p = matches!(device, Device::Cuda(_)).then(|| span(*device, op, || elems(data.len(), data.dtype()))).flatten();
        let data = match device {
            Device::Cpu => StorageData::Cpu(Backend::from_host(op, device, data)?),
            Device::Cuda(_) => StorageData::Cuda(Backend::from_host(op, device, data)?),
        };
        Ok(Storage::new(data))
    }
    /// `n` values of `dtype` on `device`, drawn from `dist` with `rng`.
    pub(crate) fn random(op: &'static str, device: &Device, dist: Distribution, dtype: DType, n: usize, rng: &mut Rng) -> Result<Storage> {
        crate::backend::kernel_record::note_random(dist, dtype, n);
        let stream = match dist {
            Distribution::Uniform => "philox/uniform",
            Distribution::Normal => "philox/normal",
            Distribution::Dropout { .. } => "philox/dropout",
        };
        let _p = span(*device, stream, || elems(n, dtype));
        let data = match device {
            Device::Cpu => StorageData::Cpu(Backend::random(op, device, dist, dtype, n, rng)?),
            Device::Cuda(_) => StorageData::Cuda(Backend::random(op, device, dist, dtype, n, rng)?),
        };
        Ok(Storage::new(data))
    }
    /// The elements of `l`, row-major, as a host buffer of `dtype`.
    pub(crate) fn to_host(&self, op: &'static str, l: &Layout, dtype: DType) -> Result<CpuStorage> {
        let _p = span(self.device, op, || moved(&[(l, self.dtype)], &[(&Layout::contiguous(&l.shape), dtype)]));
        on_backend!(&*self.read(), s => s.to_host(op, l, dtype))
    }
    /// The elements of `l`, contiguous, in a new storage on `device`.
    pub(crate) fn to_device(&self, op: &'static str, l: &Layout, device: &Device) -> Result<Storage> {
        // Timed on the CUDA side of the transfer, if either is.
        let on = if matches!(self.device, Device::Cuda(_)) { self.device } else { *device };
        let _p = span(on, op, || moved(&[(l, self.dtype)], &[(&Layout::contiguous(&l.shape), self.dtype)]));
        let host = self.to_host(op, l, self.dtype)?;
        Storage::from_host(op, device, host)
    }

    pub(crate) fn unary(&self, op: OpKind, l: &Layout, out: &Layout) -> Result<Storage> {
        note(out.numel(), || OpKernels::Unary { op, dtype: self.dtype, rank: out.rank() });
        let p = span(self.device, op.name(), || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.unary(op, l, out)).map(Storage::new))
    }
    pub(crate) fn clamp(&self, op: &'static str, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<Storage> {
        note(out.numel(), || OpKernels::Clamp { dtype: self.dtype, min: min.is_some(), max: max.is_some(), rank: out.rank() });
        let p = span(self.device, op, || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.clamp(op, l, min, max, out)).map(Storage::new))
    }
    pub(crate) fn binary(&self, op: OpKind, la: &Layout, rhs: &Storage, lb: &Layout, out: &Layout) -> Result<Storage> {
        let name = op.name();
        same_device(name, self, &[rhs])?;
        note(out.numel(), || OpKernels::Binary { op, lhs: self.dtype, rhs: rhs.dtype, rank: out.rank(), assign: false });
        let p = span(self.device, name, || moved(&[(la, self.dtype), (lb, rhs.dtype)], &[]));
        made(p, self.read2(rhs, |a, b| map_backend2!(name, (a, b), (x, y) => x.binary(op, la, y, lb, out))).map(Storage::new))
    }
    /// `self[l] = self[l] op rhs[lr]` in place, `rhs` another storage. The
    /// caller bumps the version.
    pub(crate) fn binary_assign(&self, op: OpKind, l: &Layout, rhs: &Storage, lr: &Layout) -> Result<()> {
        let name = op.name();
        same_device(name, self, &[rhs])?;
        if self.same(rhs) {
            return Err(AotError::internal(name, "binary_assign with its own storage as operand"));
        }
        note(l.numel(), || OpKernels::Binary { op, lhs: self.dtype, rhs: rhs.dtype, rank: l.rank(), assign: true });
        let _p = span(self.device, name, || moved(&[(l, self.dtype), (lr, rhs.dtype)], &[(l, self.dtype)]));
        let (src, mut d) = (rhs.read(), self.write());
        match (&mut *d, &*src) {
            (StorageData::Cpu(d), StorageData::Cpu(s)) => d.binary_assign(op, l, s, lr),
            (StorageData::Cuda(d), StorageData::Cuda(s)) => d.binary_assign(op, l, s, lr),
            (d, s) => Err(mismatch(name, d.device(), s.device())),
        }
    }
    /// [`Backend::binary_dense`]: `self[ra] op rhs[rb]`, operands checked
    /// by the caller (which notes the eager op it stands for).
    pub(crate) fn binary_dense(&self, op: OpKind, ra: Range<usize>, rhs: &Storage, rb: Range<usize>) -> Result<Storage> {
        let name = op.name();
        same_device(name, self, &[rhs])?;
        let p = span(self.device, name, || elems(ra.len(), self.dtype).plus(elems(rb.len(), rhs.dtype)));
        made(
            p,
            self.read2(rhs, |a, b| map_backend2!(name, (a, b), (x, y) => x.binary_dense(op, ra.clone(), y, rb.clone()))).map(Storage::new),
        )
    }
    /// [`Backend::binary_assign_dense`]: `self[ra] op= rhs[rb]`, `rhs`
    /// another storage. The caller bumps the version.
    pub(crate) fn binary_assign_dense(&self, op: OpKind, ra: Range<usize>, rhs: &Storage, rb: Range<usize>) -> Result<()> {
        let name = op.name();
        same_device(name, self, &[rhs])?;
        if self.same(rhs) {
            return Err(AotError::internal(name, "binary_assign_dense with its own storage as operand"));
        }
        // `self[ra]` read and written, `rhs[rb]` read.
        let _p = span(self.device, name, || elems(2 * ra.len(), self.dtype).plus(elems(rb.len(), rhs.dtype)));
        let (src, mut d) = (rhs.read(), self.write());
        match (&mut *d, &*src) {
            (StorageData::Cpu(d), StorageData::Cpu(s)) => d.binary_assign_dense(op, ra, s, rb),
            (StorageData::Cuda(d), StorageData::Cuda(s)) => d.binary_assign_dense(op, ra, s, rb),
            (d, s) => Err(mismatch(name, d.device(), s.device())),
        }
    }
    pub(crate) fn binary_scalar(&self, op: OpKind, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<Storage> {
        note(out.numel(), || OpKernels::BinaryScalar { op, dtype: self.dtype, scalar_first, rank: out.rank() });
        let p = span(self.device, op.name(), || moved(&[(la, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), x => x.binary_scalar(op, la, s, scalar_first, out)).map(Storage::new))
    }
    /// `cond ? a : b` with `self` the condition.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn where_cond(
        &self,
        op: &'static str,
        lc: &Layout,
        a: &Storage,
        la: &Layout,
        b: &Storage,
        lb: &Layout,
        out: &Layout,
    ) -> Result<Storage> {
        same_device(op, self, &[a, b])?;
        let p = span(self.device, op, || moved(&[(lc, self.dtype), (la, a.dtype), (lb, b.dtype)], &[]));
        made(p, self.where_cond_in(op, lc, a, la, b, lb, out))
    }

    /// [`Storage::where_cond`] inside its span.
    #[allow(clippy::too_many_arguments)]
    fn where_cond_in(
        &self,
        op: &'static str,
        lc: &Layout,
        a: &Storage,
        la: &Layout,
        b: &Storage,
        lb: &Layout,
        out: &Layout,
    ) -> Result<Storage> {
        // Dtype views of one root are read from copies (one lock each).
        if [self, a, b].iter().any(|s| s.is_dtype_view()) {
            let plain = |s: &Storage, l: &Layout| -> Result<(Storage, Layout)> {
                let tl = Layout::contiguous(&l.shape);
                Ok((s.cast(op, l, s.dtype, &tl)?, tl))
            };
            let ((c, lc), (a, la), (b, lb)) = (plain(self, lc)?, plain(a, la)?, plain(b, lb)?);
            return c.where_cond(op, &lc, &a, &la, &b, &lb, out);
        }
        note(out.numel(), || OpKernels::Where { cond: self.dtype, a: a.dtype, b: b.dtype, rank: out.rank() });
        // A storage named twice is locked once.
        let c = self.read();
        let ga = (!std::ptr::eq(a, self)).then(|| a.read());
        let gb = (!std::ptr::eq(b, self) && !std::ptr::eq(b, a)).then(|| b.read());
        let da: &StorageData = ga.as_deref().unwrap_or(&c);
        let db: &StorageData = match &gb {
            Some(g) => g,
            None if std::ptr::eq(b, a) => da,
            None => &c,
        };
        let data = match (&*c, da, db) {
            (StorageData::Cpu(c), StorageData::Cpu(a), StorageData::Cpu(b)) => {
                c.where_cond(op, lc, a, la, b, lb, out).map(StorageData::Cpu)
            }
            (StorageData::Cuda(c), StorageData::Cuda(a), StorageData::Cuda(b)) => {
                c.where_cond(op, lc, a, la, b, lb, out).map(StorageData::Cuda)
            }
            (c, a, b) => Err(mismatch(op, c.device(), if a.device() != c.device() { a.device() } else { b.device() })),
        }?;
        Ok(Storage::new(data))
    }
    pub(crate) fn cast(&self, op: &'static str, l: &Layout, dtype: DType, out: &Layout) -> Result<Storage> {
        note(out.numel(), || OpKernels::Cast { from: self.dtype, to: dtype, rank: out.rank() });
        let p = span(self.device, op, || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.cast(op, l, dtype, out)).map(Storage::new))
    }

    /// Copies the elements of `ls` in `self` to the positions of `ld` in
    /// `dst`, converting to `dst`'s dtype. `self` may be `dst`: then the
    /// source is read out first. The caller bumps `dst`'s version.
    pub(crate) fn copy_into(&self, op: &'static str, ls: &Layout, dst: &Storage, ld: &Layout) -> Result<()> {
        same_device(op, self, &[dst])?;
        let _p = span(self.device, op, || moved(&[(ls, self.dtype)], &[(ld, dst.dtype)]));
        if self.same(dst) {
            let tl = Layout::contiguous(&ls.shape);
            let tmp = self.cast(op, ls, self.dtype, &tl)?;
            return tmp.copy_into(op, &tl, dst, ld);
        }
        note(ld.numel(), || OpKernels::Cast { from: self.dtype, to: dst.dtype, rank: ld.rank() });
        let (src, mut d) = (self.read(), dst.write());
        match (&*src, &mut *d) {
            (StorageData::Cpu(s), StorageData::Cpu(d)) => s.copy_strided(op, ls, d, ld),
            (StorageData::Cuda(s), StorageData::Cuda(d)) => s.copy_strided(op, ls, d, ld),
            (s, d) => Err(mismatch(op, s.device(), d.device())),
        }
    }
    /// Adds the elements of `ls` in `self` into the positions of `ld` in
    /// `dst` (a different storage). The caller bumps `dst`'s version.
    pub(crate) fn scatter_add_into(&self, op: &'static str, ls: &Layout, dst: &Storage, ld: &Layout) -> Result<()> {
        same_device(op, self, &[dst])?;
        if self.same(dst) {
            return Err(AotError::internal(op, "scatter_add into its own source"));
        }
        note(ls.numel(), || {
            let direct = ld.is_non_overlapping() && ls.shape == ld.shape && self.dtype == dst.dtype && dst.dtype.is_float();
            OpKernels::ScatterAdd { src: self.dtype, dst: dst.dtype, direct, rank: ld.rank() }
        });
        // Each destination element is read and written.
        let _p = span(self.device, op, || moved(&[(ls, self.dtype), (ld, dst.dtype)], &[(ld, dst.dtype)]));
        let (src, mut d) = (self.read(), dst.write());
        match (&*src, &mut *d) {
            (StorageData::Cpu(s), StorageData::Cpu(d)) => s.scatter_add(op, ls, d, ld),
            (StorageData::Cuda(s), StorageData::Cuda(d)) => s.scatter_add(op, ls, d, ld),
            (s, d) => Err(mismatch(op, s.device(), d.device())),
        }
    }
    pub(crate) fn reduce(&self, op: OpKind, l: &Layout, dims: &[usize], keepdim: bool) -> Result<Storage> {
        self.note_reduce(EagerRow::Reduce(op), l, dims);
        let p = span(self.device, op.name(), || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.reduce(op, l, dims, keepdim)).map(Storage::new))
    }
    pub(crate) fn var(&self, op: &'static str, l: &Layout, dims: &[usize], correction: i64, keepdim: bool) -> Result<Storage> {
        self.note_reduce(EagerRow::Var { correction }, l, dims);
        let p = span(self.device, op, || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.var(op, l, dims, correction, keepdim)).map(Storage::new))
    }
    pub(crate) fn softmax(&self, op: &'static str, l: &Layout, dim: usize, log: bool) -> Result<Storage> {
        self.note_reduce(EagerRow::Softmax { log }, l, &[dim]);
        let p = span(self.device, op, || moved(&[(l, self.dtype)], &[]));
        made(p, map_backend!(&*self.read(), s => s.softmax(op, l, dim, log)).map(Storage::new))
    }
    /// Counts `2·m·n·k` flops per batch (`profile::matmul_cost`).
    pub(crate) fn matmul(&self, op: &'static str, la: &Layout, rhs: &Storage, lb: &Layout) -> Result<Storage> {
        same_device(op, self, &[rhs])?;
        // The output's elements: the batch dims (one or more), `m` and `n`.
        let r = la.rank().min(lb.rank());
        let numel = if r >= 2 { la.shape[..r - 1].iter().product::<usize>() * lb.shape[r - 1] } else { 0 };
        note(numel, || OpKernels::Matmul { lhs: self.dtype, rhs: rhs.dtype, la: la.clone(), lb: lb.clone() });
        let _p = span(self.device, op, || crate::profile::matmul_cost(la, lb, self.dtype));
        self.read2(rhs, |a, b| map_backend2!(op, (a, b), (x, y) => x.matmul(op, la, y, lb))).map(Storage::new)
    }

    /// Notes an eager reduction (see [`note`]).
    fn note_reduce(&self, row: EagerRow, l: &Layout, dims: &[usize]) {
        let rows = matches!(row, EagerRow::Softmax { .. });
        note(reduced_numel(l, dims, rows), || OpKernels::Reduce { row, dtype: self.dtype, layout: l.clone(), dims: dims.to_vec() });
    }
}
