//! Storage: the shared buffer behind one or more tensors, with its version
//! counter. Views share a `Storage`; `copy()` makes a new one.
//!
//! The data lives behind a storage enum so a CUDA buffer can come in behind
//! the `cuda` feature without touching the tensor or the ops.
//!
//! Every buffer whose length comes from a shape is allocated by
//! `try_vec` (or the helpers on it), which asks the allocator with
//! `try_reserve_exact`: a request that is too large is an
//! [`AotError::OutOfMemory`] naming the op, never an abort.

use crate::device::Device;
use crate::dtype::{DType, WithDType};
use crate::error::{AotError, Result};
use half::{bf16, f16};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// An empty vector with room for exactly `n` elements of `T`. A byte size
/// beyond `isize::MAX`, or one the allocator refuses, is an `OutOfMemory`
/// error naming `op` (the bytes saturate at `usize::MAX` if they overflow).
pub(crate) fn try_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes > isize::MAX as usize {
        return Err(AotError::OutOfMemory { op, bytes });
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| AotError::OutOfMemory { op, bytes })?;
    Ok(v)
}

/// `n` copies of `x`, allocated by [`try_vec`].
pub(crate) fn try_filled<T: Clone>(op: &'static str, n: usize, x: T) -> Result<Vec<T>> {
    let mut v = try_vec(op, n)?;
    v.resize(n, x);
    Ok(v)
}

/// The items of `it`, allocated by [`try_vec`] for the length it reports.
pub(crate) fn try_collect<T>(op: &'static str, it: impl ExactSizeIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = try_vec(op, it.len())?;
    v.extend(it);
    Ok(v)
}

/// A CPU buffer of one dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStorage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// Runs `$body` with `$v` bound to the typed vector of a `CpuStorage`
/// (`$s`). This is the one place dtype dispatch is written.
macro_rules! dispatch_cpu {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            $crate::storage::CpuStorage::F32($v) => $body,
            $crate::storage::CpuStorage::F64($v) => $body,
            $crate::storage::CpuStorage::F16($v) => $body,
            $crate::storage::CpuStorage::BF16($v) => $body,
            $crate::storage::CpuStorage::I64($v) => $body,
            $crate::storage::CpuStorage::Bool($v) => $body,
        }
    };
}
pub(crate) use dispatch_cpu;

/// Conversion between a typed `Vec` and `CpuStorage`.
pub trait CpuElem: WithDType {
    fn into_storage(v: Vec<Self>) -> CpuStorage;
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut Vec<Self>>;
}

macro_rules! cpu_elem {
    ($t:ty, $var:ident) => {
        impl CpuElem for $t {
            fn into_storage(v: Vec<Self>) -> CpuStorage {
                CpuStorage::$var(v)
            }
            fn slice(s: &CpuStorage) -> Option<&[Self]> {
                match s {
                    CpuStorage::$var(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut Vec<Self>> {
                match s {
                    CpuStorage::$var(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
cpu_elem!(f32, F32);
cpu_elem!(f64, F64);
cpu_elem!(f16, F16);
cpu_elem!(bf16, BF16);
cpu_elem!(i64, I64);
cpu_elem!(bool, Bool);

impl CpuStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::Bool(_) => DType::Bool,
        }
    }
    pub fn len(&self) -> usize {
        dispatch_cpu!(self, v => v.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A zero-filled buffer of `n` elements (`op` names the op in an
    /// `OutOfMemory` error).
    pub fn zeros(op: &'static str, dtype: DType, n: usize) -> Result<CpuStorage> {
        CpuStorage::full(op, dtype, n, 0.0)
    }
    /// A buffer of `n` elements, each `v` converted to `dtype`.
    pub fn full(op: &'static str, dtype: DType, n: usize, v: f64) -> Result<CpuStorage> {
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(try_filled(op, n, v as f32)?),
            DType::F64 => CpuStorage::F64(try_filled(op, n, v)?),
            DType::F16 => CpuStorage::F16(try_filled(op, n, f16::from_f64(v))?),
            DType::BF16 => CpuStorage::BF16(try_filled(op, n, bf16::from_f64(v))?),
            DType::I64 => CpuStorage::I64(try_filled(op, n, v as i64)?),
            DType::Bool => CpuStorage::Bool(try_filled(op, n, v != 0.0)?),
        })
    }
    /// Builds a buffer of `dtype` from f64 values (rounding as a cast does).
    pub fn from_f64s(op: &'static str, dtype: DType, vals: impl ExactSizeIterator<Item = f64>) -> Result<CpuStorage> {
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(try_collect(op, vals.map(|v| v as f32))?),
            DType::F64 => CpuStorage::F64(try_collect(op, vals)?),
            DType::F16 => CpuStorage::F16(try_collect(op, vals.map(f16::from_f64))?),
            DType::BF16 => CpuStorage::BF16(try_collect(op, vals.map(bf16::from_f64))?),
            DType::I64 => CpuStorage::I64(try_collect(op, vals.map(|v| v as i64))?),
            DType::Bool => CpuStorage::Bool(try_collect(op, vals.map(|v| v != 0.0))?),
        })
    }
    /// Element `i` as f64.
    pub fn get_f64(&self, i: usize) -> f64 {
        dispatch_cpu!(self, v => v[i].to_f64())
    }
}

/// Where a storage's bytes live.
#[derive(Debug)]
pub enum StorageData {
    Cpu(CpuStorage),
    /// A CUDA buffer. Without the `cuda` feature no value of this variant
    /// can be made; ops that meet it return `DeviceUnavailable`.
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaStorage),
}

static NEXT_STORAGE_ID: AtomicUsize = AtomicUsize::new(1);

/// The shared buffer behind tensors, with PyTorch's version counter.
#[derive(Debug)]
pub struct Storage {
    id: usize,
    device: Device,
    dtype: DType,
    data: RwLock<StorageData>,
    version: AtomicU64,
}

impl Storage {
    pub(crate) fn new_cpu(data: CpuStorage) -> Storage {
        Storage {
            id: NEXT_STORAGE_ID.fetch_add(1, Ordering::Relaxed),
            device: Device::Cpu,
            dtype: data.dtype(),
            data: RwLock::new(StorageData::Cpu(data)),
            version: AtomicU64::new(0),
        }
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
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
    pub(crate) fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }
    pub fn len(&self) -> usize {
        match &*self.read() {
            StorageData::Cpu(c) => c.len(),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(c) => c.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, StorageData> {
        // A poisoned lock only follows a panic elsewhere; the data is still valid.
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, StorageData> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
    /// Runs `f` on the CPU buffer, or reports that the device is unavailable.
    pub(crate) fn with_cpu<R>(&self, op: &'static str, f: impl FnOnce(&CpuStorage) -> Result<R>) -> Result<R> {
        let _ = op; // names the op in the CUDA arm
        match &*self.read() {
            StorageData::Cpu(c) => f(c),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(_) => Err(AotError::DeviceUnavailable { op, msg: "this op has no CUDA kernel yet".into() }),
        }
    }
    pub(crate) fn with_cpu_mut<R>(&self, op: &'static str, f: impl FnOnce(&mut CpuStorage) -> Result<R>) -> Result<R> {
        let _ = op; // names the op in the CUDA arm
        match &mut *self.write() {
            StorageData::Cpu(c) => f(c),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(_) => Err(AotError::DeviceUnavailable { op, msg: "this op has no CUDA kernel yet".into() }),
        }
    }
}

/// The error for a device whose backend is not compiled in.
pub(crate) fn cuda_unavailable(op: &'static str) -> AotError {
    AotError::DeviceUnavailable { op, msg: "aot was built without CUDA support; enable the `cuda` feature of aot-runtime".into() }
}
