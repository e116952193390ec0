//! `Tensor`: a cheap handle to one tensor object. `Clone` gives the same
//! tensor (identity), `copy()` a new storage with the same values.
//!
//! A tensor object owns a layout (which metadata mutations change in place,
//! visible through every handle) and autograd metadata; it shares its
//! `Storage` with every view of it.
//!
//! The autograd tape's data lives here, below the ops that record it and
//! the engine that runs it (the `autograd` module):
//!
//! - `grad_mode.rs`: whether ops record history ([`no_grad`]);
//! - `autograd_meta.rs`: a tensor's autograd metadata, the graph's `Node`s
//!   and `Edge`s, and the accessors (`requires_grad`, `grad_fn`, ...);
//! - `backward_op.rs`: what each node keeps for its gradient rule
//!   (`BackwardOp`); `view_op.rs`: a view op's data (`ViewOp`);
//! - `saved.rs`: tensors saved for backward, with their versions;
//! - `record.rs`: how an op makes its output's `grad_fn`.

mod autograd_meta;
mod backward_op;
mod grad_mode;
mod record;
pub(crate) mod saved;
mod view_op;

pub(crate) use autograd_meta::{AutogradMeta, Edge, Node, ViewInfo};
pub(crate) use backward_op::{BackwardOp, CustomBackward, Kept};
pub(crate) use grad_mode::with_grad_mode;
pub use grad_mode::{is_grad_enabled, no_grad, NoGradGuard};
pub(crate) use record::{record, record_multi};
#[doc(hidden)]
pub(crate) use saved::SavedTensor;
pub(crate) use view_op::ViewOp;

use crate::backend::CpuElem;
use crate::backend::{Distribution, Rng};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{checked_numel, Layout, MAX_NUMEL};
use crate::storage::Storage;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

static NEXT_TENSOR_ID: AtomicUsize = AtomicUsize::new(1);

pub(crate) struct TensorState {
    pub(crate) layout: Layout,
    pub(crate) ag: AutogradMeta,
}

pub(crate) struct TensorImpl {
    pub(crate) id: usize,
    pub(crate) storage: Arc<Storage>,
    pub(crate) state: RwLock<TensorState>,
    /// Bumped whenever `state` is locked for writing, so that a reader can
    /// tell the state unchanged since it last looked without locking it
    /// (`compiled/last_call.rs`).
    pub(crate) state_gen: AtomicU64,
}

/// A handle to a tensor. Cloning the handle does not copy: both handles are
/// the same tensor (`same_tensor` is true), like two Python names bound to
/// one `torch.Tensor`.
///
/// ```
/// use aot_runtime::prelude::*;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2], &Device::Cpu)?;
/// let row = a.select(0, 1)?;       // a view: shares storage with `a`
/// row.mul_(10.0)?;                 // writes through to `a`
/// assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 30.0, 40.0]);
/// # Ok::<(), AotError>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = self.layout();
        let mut d = f.debug_struct("Tensor");
        d.field("shape", &l.shape).field("stride", &l.stride).field("offset", &l.offset).field("dtype", &self.dtype());
        if self.numel() <= 32 {
            if let Ok(v) = self.to_vec::<f64>() {
                d.field("values", &v);
            }
        }
        d.field("requires_grad", &self.requires_grad()).finish()
    }
}

impl Tensor {
    // ---- construction ---------------------------------------------------

    pub(crate) fn from_parts(storage: Arc<Storage>, layout: Layout, ag: AutogradMeta) -> Tensor {
        Tensor(Arc::new(TensorImpl {
            id: NEXT_TENSOR_ID.fetch_add(1, Ordering::Relaxed),
            storage,
            state: RwLock::new(TensorState { layout, ag }),
            state_gen: AtomicU64::new(0),
        }))
    }

    /// A new tensor over a fresh storage laid out as `layout` (a layout a
    /// kernel wrote, usually dense at offset 0), without autograd history.
    pub(crate) fn from_storage(storage: Storage, layout: Layout) -> Tensor {
        Tensor::from_parts(Arc::new(storage), layout, AutogradMeta::default())
    }

    /// A new handle-object on the same storage with `layout` and no autograd
    /// history (what `detach()` and saved tensors use).
    pub(crate) fn alias_with_layout(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(self.0.storage.clone(), layout, AutogradMeta::default())
    }

    /// A tensor holding `values` (row-major) with `shape`.
    pub fn from_vec<T: CpuElem>(values: Vec<T>, shape: &[usize], device: &Device) -> Result<Tensor> {
        let n = checked_numel("from_vec", shape)?;
        if n != values.len() {
            return Err(AotError::shape(
                "from_vec",
                format!("{} values cannot fill a tensor of shape {shape:?} ({n} elements)", values.len()),
            ));
        }
        Ok(Tensor::from_storage(Storage::from_host("from_vec", device, T::into_storage(values))?, Layout::contiguous(shape)))
    }

    /// A tensor of `shape` filled with `value`.
    pub fn full(shape: &[usize], value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        let n = checked_numel("full", shape)?;
        Ok(Tensor::from_storage(Storage::full("full", device, dtype, n, value)?, Layout::contiguous(shape)))
    }
    /// A tensor of `shape` filled with zeros.
    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, dtype, device)
    }
    /// A tensor of `shape` filled with ones.
    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype, device)
    }
    /// `torch.arange(start, end, step)`: `ceil((end - start) / step)`
    /// values `start + i*step` (in f64, then converted to `dtype`). For
    /// `I64`, as PyTorch's integer arange, `start` and `step` are truncated
    /// to integers first (the count is still the f64 one); `Bool` has no
    /// arange.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        let n = arange_len(start, end, step, dtype)?;
        Ok(Tensor::from_storage(Storage::arange("arange", device, dtype, n, start, step)?, Layout::contiguous(&[n])))
    }
    /// Standard-normal samples from a generator seeded with `seed`.
    pub fn randn(shape: &[usize], dtype: DType, device: &Device, seed: u64) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(AotError::dtype("randn", format!("randn is only defined for floating dtypes, got {dtype}")));
        }
        let n = checked_numel("randn", shape)?;
        let data = Storage::random("randn", device, Distribution::Normal, dtype, n, &mut Rng::new(seed))?;
        Ok(Tensor::from_storage(data, Layout::contiguous(shape)))
    }
    /// Uniform samples in [0, 1) from a generator seeded with `seed`.
    pub fn rand(shape: &[usize], dtype: DType, device: &Device, seed: u64) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(AotError::dtype("rand", format!("rand is only defined for floating dtypes, got {dtype}")));
        }
        let n = checked_numel("rand", shape)?;
        let data = Storage::random("rand", device, Distribution::Uniform, dtype, n, &mut Rng::new(seed))?;
        Ok(Tensor::from_storage(data, Layout::contiguous(shape)))
    }

    // ---- accessors ------------------------------------------------------

    pub(crate) fn state(&self) -> RwLockReadGuard<'_, TensorState> {
        // A poisoned lock only follows a panic elsewhere; the state is still valid.
        self.0.state.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn state_mut(&self) -> RwLockWriteGuard<'_, TensorState> {
        let guard = self.0.state.write().unwrap_or_else(|e| e.into_inner());
        // Bumped under the write lock, before any change: a reader that
        // sees the old number read the state before this write began.
        self.0.state_gen.fetch_add(1, Ordering::AcqRel);
        guard
    }
    /// This tensor's id and its state's generation: equal pairs at two
    /// moments mean the same tensor with its state unchanged in between.
    #[inline]
    pub(crate) fn state_stamp(&self) -> (usize, u64) {
        (self.0.id, self.0.state_gen.load(Ordering::Acquire))
    }
    /// A snapshot of the current layout.
    pub fn layout(&self) -> Layout {
        self.state().layout.clone()
    }
    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.0.storage
    }
    pub(crate) fn id(&self) -> usize {
        self.0.id
    }
    /// The size of each dim.
    pub fn shape(&self) -> Vec<usize> {
        self.state().layout.shape.to_vec()
    }
    /// The stride of each dim, in elements.
    pub fn stride(&self) -> Vec<usize> {
        self.state().layout.stride.to_vec()
    }
    /// Where the first element sits in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.state().layout.offset
    }
    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.state().layout.rank()
    }
    /// The number of dims (PyTorch's `dim()`).
    pub fn dim(&self) -> usize {
        self.rank()
    }
    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.state().layout.numel()
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.storage.dtype()
    }
    /// The device of the storage.
    pub fn device(&self) -> Device {
        self.0.storage.device()
    }
    /// Whether the layout is row-major contiguous.
    pub fn is_contiguous(&self) -> bool {
        self.state().layout.is_contiguous()
    }
    /// True if both handles are the same tensor object.
    pub fn same_tensor(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The addresses of this tensor's storage root and of the tensor
    /// itself: equal firsts are [`shares_storage_with`](Self::shares_storage_with),
    /// equal pairs [`same_tensor`](Self::same_tensor) (valid while both
    /// tensors are alive).
    #[inline]
    pub(crate) fn identity(&self) -> (usize, usize) {
        (std::ptr::from_ref(self.0.storage.root()) as usize, Arc::as_ptr(&self.0) as usize)
    }
    /// True if both tensors are backed by the same storage (a dtype view,
    /// [`Tensor::view_dtype`], shares its tensor's).
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        self.0.storage.same(&other.0.storage)
    }
    /// The storage's version counter (bumped by every in-place write).
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }
    /// An id of the storage, equal for tensors that share storage.
    pub fn storage_id(&self) -> usize {
        self.0.storage.id()
    }
    /// Number of elements of the underlying storage.
    pub fn storage_len(&self) -> usize {
        self.0.storage.len()
    }

    /// The values in logical row-major order, converted to `T`.
    pub fn to_vec<T: CpuElem>(&self) -> Result<Vec<T>> {
        let host = self.0.storage.to_host("to_vec", &self.layout(), T::DTYPE)?;
        T::slice(&host)
            .map(<[T]>::to_vec)
            .ok_or_else(|| AotError::internal("to_vec", format!("the host copy is {}, not {}", host.dtype(), T::DTYPE)))
    }
    /// The single value of a one-element tensor.
    pub fn item<T: CpuElem>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(AotError::shape("item", format!("a Tensor with {} elements cannot be converted to Scalar", self.numel())));
        }
        self.to_vec::<T>().and_then(|v| v.into_iter().next().ok_or_else(|| AotError::internal("item", "empty")))
    }

    /// Moves (copies) the tensor to `device`: a contiguous copy there, with
    /// no history. The same device gives `self` back.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let l = self.layout();
        let data = self.0.storage.to_device("to_device", &l, device)?;
        Ok(Tensor::from_storage(data, Layout::contiguous(&l.shape)))
    }
}

impl Tensor {
    /// The root base of a differentiable view (PyTorch's `._base`).
    pub fn view_base(&self) -> Option<Tensor> {
        self.state().ag.view.as_ref().map(|v| v.base.clone())
    }

    /// [`storage_as_1d`](Self::storage_as_1d) of the storage whose bytes
    /// these are: for a dtype view ([`Tensor::view_dtype`]), all of its
    /// root's elements, as the root's dtype.
    pub(crate) fn root_as_1d(&self) -> Tensor {
        let root = self.storage().root_arc();
        let n = root.len();
        Tensor::from_parts(root, Layout::contiguous(&[n]), AutogradMeta::default())
    }

    /// A 1-D tensor over this tensor's whole storage, without history.
    pub fn storage_as_1d(&self) -> Tensor {
        let n = self.storage_len();
        self.alias_with_layout(Layout::contiguous(&[n]))
    }
}

/// The length of `Tensor::arange(start, end, step, dtype)`, or its error
/// (also the shape rule of the DSL's `arange`).
pub(crate) fn arange_len(start: f64, end: f64, step: f64, dtype: DType) -> Result<usize> {
    if dtype == DType::Bool {
        return Err(AotError::dtype("arange", "arange is not implemented for bool"));
    }
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
        return Err(AotError::unsupported("arange", format!("invalid range [{start:?}, {end:?}) with step {step:?}")));
    }
    if (end - start) * step < 0.0 {
        return Err(AotError::unsupported("arange", "upper bound and larger bound inconsistent with step sign"));
    }
    // In f64 first: the count of a huge range does not fit a usize cast.
    let count = ((end - start) / step).ceil().max(0.0);
    if !count.is_finite() || count > MAX_NUMEL as f64 {
        return Err(AotError::overflow(
            "arange",
            format!("the range [{start:?}, {end:?}) with step {step:?} has {count:e} elements, more than {MAX_NUMEL}"),
        ));
    }
    let n = count as usize;
    // Every i64 value lies between the first and the last: check those two.
    let last = start.trunc() + (n.max(1) - 1) as f64 * step.trunc();
    let i64_range = -(2f64.powi(63))..2f64.powi(63);
    if dtype == DType::I64 && !(i64_range.contains(&start.trunc()) && i64_range.contains(&last)) {
        return Err(AotError::overflow("arange", format!("the range [{start:?}, {end:?}) with step {step:?} leaves the range of int64")));
    }
    Ok(n)
}
