//! Dtype views: one storage's bytes read as another dtype, PyTorch's
//! `x.view(dtype)` (`Tensor::view_dtype`).
//!
//! A dtype view is a [`Storage`] of its own dtype and length whose bytes
//! are those of another storage, its root (`bytes_of`). It shares the
//! root's identity (`id`, [`Storage::same`]) and version counter, so a
//! write through either is a write to both, as in PyTorch, and every check
//! that two tensors share a storage sees them as one.
//!
//! Its data is the root's, converted when it is locked: [`Storage::read`]
//! hands the primitives a copy of the root's bytes as the view's dtype,
//! and [`Storage::write`] such a copy that is written back, byte for byte,
//! when the guard drops. So every backend primitive works on dtype views
//! unchanged, at the cost of converting the whole storage per access; the
//! fused and buffer-reusing paths decline them (their ops then run one by
//! one through the primitives). Locks are taken on the root only, and a
//! primitive given two views of one root locks it once.
//!
//! CPU only: a CUDA tensor's dtype view is an [`AotError::Unsupported`].
//! Bool takes no part (its bytes are not all valid bools).

use super::{Storage, StorageData};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

/// A read lock on a storage's data, as its own dtype.
pub(crate) enum DataRead<'a> {
    Direct(RwLockReadGuard<'a, StorageData>),
    /// A dtype view: the root stays locked while its copy is read.
    Converted {
        _root: RwLockReadGuard<'a, StorageData>,
        copy: StorageData,
    },
}

impl Deref for DataRead<'_> {
    type Target = StorageData;
    #[inline]
    fn deref(&self) -> &StorageData {
        match self {
            DataRead::Direct(g) => g,
            DataRead::Converted { copy, .. } => copy,
        }
    }
}

/// A write lock on a storage's data, as its own dtype; a dtype view's copy
/// is written back into the root when this drops.
pub(crate) struct DataWrite<'a> {
    guard: RwLockWriteGuard<'a, StorageData>,
    view: Option<StorageData>,
}

impl Deref for DataWrite<'_> {
    type Target = StorageData;
    #[inline]
    fn deref(&self) -> &StorageData {
        self.view.as_ref().unwrap_or(&self.guard)
    }
}

impl DerefMut for DataWrite<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut StorageData {
        match &mut self.view {
            Some(v) => v,
            None => &mut self.guard,
        }
    }
}

impl Drop for DataWrite<'_> {
    fn drop(&mut self) {
        if let (Some(StorageData::Cpu(view)), StorageData::Cpu(root)) = (&self.view, &mut *self.guard) {
            let mut bytes = root.to_le_bytes();
            let new = view.to_le_bytes();
            let n = new.len().min(bytes.len());
            bytes[..n].copy_from_slice(&new[..n]);
            if let Some(back) = from_bytes(root.dtype(), &bytes) {
                *root = back;
            }
        }
    }
}

/// `bytes` (whole elements of `dtype`; a remainder is ignored) as a buffer
/// of `dtype`; `None` for bool.
fn from_bytes(dtype: DType, bytes: &[u8]) -> Option<CpuStorage> {
    (dtype != DType::Bool).then(|| CpuStorage::from_le_bytes(dtype, bytes))
}

/// `root`'s data as `dtype`.
fn convert(root: &StorageData, dtype: DType) -> StorageData {
    match root {
        StorageData::Cpu(c) => StorageData::Cpu(from_bytes(dtype, &c.to_le_bytes()).unwrap_or(CpuStorage::Bool(Vec::new()))),
        // `Storage::dtype_view` makes no CUDA views.
        StorageData::Cuda(_) => StorageData::Cpu(CpuStorage::Bool(Vec::new())),
    }
}

impl Storage {
    /// The storage whose bytes these are: itself, or a dtype view's root.
    #[inline]
    pub(crate) fn root(&self) -> &Storage {
        self.bytes_of.as_deref().unwrap_or(self)
    }
    /// Whether two storages are one buffer (one is a dtype view of the
    /// other, or both are of one root).
    #[inline]
    pub(crate) fn same(&self, other: &Storage) -> bool {
        std::ptr::eq(self.root(), other.root())
    }
    /// The storage whose bytes these are, as a handle.
    pub(crate) fn root_arc(self: &Arc<Storage>) -> Arc<Storage> {
        self.bytes_of.clone().unwrap_or_else(|| self.clone())
    }
    /// Whether this is a dtype view of another storage.
    #[inline]
    pub(crate) fn is_dtype_view(&self) -> bool {
        self.bytes_of.is_some()
    }
    /// This storage's bytes as `dtype` (a view of its root). `op` names the
    /// op in errors.
    pub(crate) fn dtype_view(self: &Arc<Storage>, op: &'static str, dtype: DType) -> Result<Arc<Storage>> {
        let root = match &self.bytes_of {
            Some(r) => r.clone(),
            None => self.clone(),
        };
        if dtype == root.dtype {
            return Ok(root);
        }
        if root.device != crate::device::Device::Cpu {
            return Err(AotError::Unsupported { op, msg: format!("a dtype view of a tensor on {} (CPU tensors only)", root.device) });
        }
        if dtype == DType::Bool || root.dtype == DType::Bool {
            return Err(AotError::dtype(op, format!("cannot view {} bytes as {}: bool takes no part in dtype views", root.dtype, dtype)));
        }
        let bytes = root.len * root.dtype.size_in_bytes();
        let mut s = Storage::new(StorageData::Cpu(CpuStorage::Bool(Vec::new())));
        s.id = root.id;
        s.dtype = dtype;
        s.len = bytes / dtype.size_in_bytes();
        s.bytes_of = Some(root);
        Ok(Arc::new(s))
    }

    /// A read lock on the data, as this storage's dtype.
    #[inline]
    pub(super) fn read(&self) -> DataRead<'_> {
        // A poisoned lock only follows a panic elsewhere; the data is still valid.
        let root = self.root();
        let g = root.data.read().unwrap_or_else(|e| e.into_inner());
        match self.bytes_of {
            None => DataRead::Direct(g),
            Some(_) => {
                let copy = convert(&g, self.dtype);
                DataRead::Converted { _root: g, copy }
            }
        }
    }
    /// A write lock on the data, as this storage's dtype.
    #[inline]
    pub(super) fn write(&self) -> DataWrite<'_> {
        let guard = self.root().data.write().unwrap_or_else(|e| e.into_inner());
        let view = self.bytes_of.as_ref().map(|_| convert(&guard, self.dtype));
        DataWrite { guard, view }
    }
    /// Reads `self` and `other` together, locking their root once when
    /// they are one buffer.
    pub(super) fn read2<R>(&self, other: &Storage, f: impl FnOnce(&StorageData, &StorageData) -> R) -> R {
        if !self.same(other) {
            let (a, b) = (self.read(), other.read());
            return f(&a, &b);
        }
        let g = self.root().data.read().unwrap_or_else(|e| e.into_inner());
        let as_own = |s: &Storage| s.bytes_of.as_ref().map(|_| convert(&g, s.dtype));
        let (a, b) = (as_own(self), as_own(other));
        f(a.as_ref().unwrap_or(&g), b.as_ref().unwrap_or(&g))
    }
}
