//! The host buffer: [`CpuStorage`], one typed `Vec` per dtype, and its
//! dtype dispatch ([`dispatch_cpu!`], the one place a match over the host
//! dtypes is written). Every backend moves data to and from the host in
//! this type, so it sits with the trait, below the backends.

use crate::dtype::{DType, WithDType};
use crate::error::Result;
use crate::host_alloc::{try_collect, try_filled};
use half::{bf16, f16};

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
            $crate::backend::CpuStorage::F32($v) => $body,
            $crate::backend::CpuStorage::F64($v) => $body,
            $crate::backend::CpuStorage::F16($v) => $body,
            $crate::backend::CpuStorage::BF16($v) => $body,
            $crate::backend::CpuStorage::I64($v) => $body,
            $crate::backend::CpuStorage::Bool($v) => $body,
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
    /// The bytes of the buffer, little-endian, element after element (a
    /// bool as one byte, 0 or 1).
    pub(crate) fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            CpuStorage::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            CpuStorage::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            CpuStorage::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            CpuStorage::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            CpuStorage::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            CpuStorage::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        }
    }
    /// A buffer of `dtype` from the bytes [`CpuStorage::to_le_bytes`]
    /// writes (whole elements; a remainder is ignored; a bool is any
    /// nonzero byte).
    pub(crate) fn from_le_bytes(dtype: DType, bytes: &[u8]) -> CpuStorage {
        fn each<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
            bytes.chunks_exact(N).map(|c| f(c.try_into().expect("a chunk of N bytes"))).collect()
        }
        match dtype {
            DType::F32 => CpuStorage::F32(each(bytes, f32::from_le_bytes)),
            DType::F64 => CpuStorage::F64(each(bytes, f64::from_le_bytes)),
            DType::F16 => CpuStorage::F16(each(bytes, f16::from_le_bytes)),
            DType::BF16 => CpuStorage::BF16(each(bytes, bf16::from_le_bytes)),
            DType::I64 => CpuStorage::I64(each(bytes, i64::from_le_bytes)),
            DType::Bool => CpuStorage::Bool(bytes.iter().map(|&x| x != 0).collect()),
        }
    }
}
