//! Scans and index reductions along one dim: `cumsum`, `argmax`/`argmin`
//! and `max_dim`/`min_dim`. They run on the host values (floats in f64,
//! integers in i64, exactly), as PyTorch's CPU kernels accumulate floats
//! in double, and the result is placed back on the tensor's device.
//! Gradients are the shared table's (`BackwardOp::Table`).

use crate::autograd::{record, BackwardOp, Kept, SavedTensor};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{wrap_dim, Layout};
use crate::storage::{CpuStorage, Storage};
use crate::tensor::Tensor;
use aot_ir::graph::args::{b, i, t};
use aot_ir::{OpKind, ValueId};

/// `shape` around dim `d` as `(outer, len, inner)`: element `(o, k, n)`
/// is at `(o * len + k) * inner + n` in row-major order (a 0-d shape is
/// one element along its one dim).
pub(crate) fn split_at_dim(shape: &[usize], d: usize) -> (usize, usize, usize) {
    if d >= shape.len() {
        return (shape.iter().product(), 1, 1);
    }
    let outer = shape[..d].iter().product();
    let inner = shape[d + 1..].iter().product();
    (outer, shape.get(d).copied().unwrap_or(1), inner)
}

/// Host values, row-major: floats and bools as f64, integers exactly.
enum HostVals {
    F64(Vec<f64>),
    I64(Vec<i64>),
}

impl HostVals {
    fn of(x: &Tensor) -> Result<HostVals> {
        Ok(match x.dtype() {
            DType::I64 => HostVals::I64(x.to_vec::<i64>()?),
            _ => HostVals::F64(x.to_vec::<f64>()?),
        })
    }
}

/// A new contiguous tensor of `shape` on `device` from host values.
pub(crate) fn host_tensor(op: &'static str, host: CpuStorage, shape: &[usize], device: &Device) -> Result<Tensor> {
    Ok(Tensor::from_storage(Storage::from_host(op, device, host)?, Layout::contiguous(shape)))
}

/// The shape of a reduction of `shape` over dim `d`.
fn reduced_shape(shape: &[usize], d: usize, keepdim: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    if s.is_empty() {
        return s;
    }
    if keepdim {
        s[d] = 1;
    } else {
        s.remove(d);
    }
    s
}

/// Whether `v` replaces `best` as the running extreme: NaN wins (and
/// stays), ties keep the first.
fn better<T: PartialOrd + Copy>(v: T, best: T, max: bool) -> bool {
    #[allow(clippy::eq_op)]
    let is_nan = |x: T| x != x;
    if is_nan(best) {
        return false;
    }
    is_nan(v) || if max { v > best } else { v < best }
}

/// Per output position, the index along the dim of the first extreme.
fn extreme_indices<T: PartialOrd + Copy>(v: &[T], (outer, len, inner): (usize, usize, usize), max: bool) -> Vec<i64> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for n in 0..inner {
            let at = |k: usize| v[(o * len + k) * inner + n];
            let mut best = 0;
            for k in 1..len {
                if better(at(k), at(best), max) {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    out
}

/// The cumulative sum of `x` along `dim`, from the start or (`rev`) from
/// the end, without history.
fn scan_sum(op: &'static str, x: &Tensor, dim: i64, rev: bool) -> Result<Tensor> {
    let shape = x.shape();
    let d = wrap_dim(op, dim, shape.len())?;
    let (outer, len, inner) = split_at_dim(&shape, d);
    let lines = (0..outer).flat_map(|o| (0..inner).map(move |n| (o, n)));
    let line = move |(o, n): (usize, usize)| {
        let at = move |k: usize| (o * len + k) * inner + n;
        let ks: Box<dyn Iterator<Item = usize>> = if rev { Box::new((0..len).rev()) } else { Box::new(0..len) };
        ks.map(at)
    };
    let host = match HostVals::of(x)? {
        HostVals::I64(v) => {
            let mut out = v.clone();
            for l in lines {
                let mut acc = 0i64;
                for p in line(l) {
                    acc = acc.wrapping_add(v[p]);
                    out[p] = acc;
                }
            }
            CpuStorage::I64(out)
        }
        HostVals::F64(v) => {
            let mut out = v.clone();
            for l in lines {
                let mut acc = 0.0;
                for p in line(l) {
                    acc += v[p];
                    out[p] = acc;
                }
            }
            let dtype = if x.dtype() == DType::Bool { DType::I64 } else { x.dtype() };
            CpuStorage::from_f64s(op, dtype, out.into_iter())?
        }
    };
    host_tensor(op, host, &shape, &x.device())
}

/// `cumsum`'s gradient: the cumulative sum of `g` along `dim` from the end.
pub(crate) fn cumsum_rev(g: &Tensor, dim: i64) -> Result<Tensor> {
    scan_sum("cumsum_backward", g, dim, true)
}

impl Tensor {
    /// `torch.cumsum(self, dim)`: integers and bools sum into i64.
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        let out = scan_sum("cumsum", self, dim, false)?;
        record(&out, &[Some(self)], || {
            let args = vec![t(ValueId(0)), i(dim)];
            Ok(BackwardOp::Table { op: OpKind::Cumsum, args, inputs: vec![Kept::Absent], out: None, edges: vec![0] })
        })?;
        Ok(out)
    }

    /// `torch.argmax(self, dim, keepdim)`: the first index of the maximum
    /// along `dim` (NaN counts as the maximum), as i64.
    pub fn argmax(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmax", dim, keepdim, true)
    }

    /// `torch.argmin(self, dim, keepdim)`: as [`Tensor::argmax`], for the minimum.
    pub fn argmin(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmin", dim, keepdim, false)
    }

    /// `torch.max(self, dim, keepdim)`: `(values, indices)`, each index that
    /// of the first maximum along `dim` (NaN counts as the maximum). The
    /// values' gradient goes to that index.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.dim_extreme("max_dim", dim, keepdim, true)
    }

    /// `torch.min(self, dim, keepdim)`: as [`Tensor::max_dim`], for the minimum.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.dim_extreme("min_dim", dim, keepdim, false)
    }

    /// The indices of the extremes along `dim`, and the reduced shape.
    fn extreme_positions(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<(Vec<i64>, Vec<usize>, usize)> {
        if self.dtype() == DType::Bool && op.starts_with("arg") {
            return Err(AotError::dtype(op, format!("{op} is not implemented for bool tensors")));
        }
        let shape = self.shape();
        let d = wrap_dim(op, dim, shape.len())?;
        let parts = split_at_dim(&shape, d);
        if parts.1 == 0 {
            return Err(AotError::shape(op, format!("Expected reduction dim {d} to have non-zero size")));
        }
        let idx = match HostVals::of(self)? {
            HostVals::I64(v) => extreme_indices(&v, parts, max),
            HostVals::F64(v) => extreme_indices(&v, parts, max),
        };
        Ok((idx, reduced_shape(&shape, d, keepdim), d))
    }

    fn arg_extreme(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<Tensor> {
        let (idx, shape, _) = self.extreme_positions(op, dim, keepdim, max)?;
        host_tensor(op, CpuStorage::I64(idx), &shape, &self.device())
    }

    fn dim_extreme(&self, op: &'static str, dim: i64, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
        let (idx, out_shape, d) = self.extreme_positions(op, dim, keepdim, max)?;
        let (_, len, inner) = split_at_dim(&self.shape(), d);
        let pos = |j: usize, k: i64| ((j / inner) * len + k as usize) * inner + j % inner;
        let host = match HostVals::of(self)? {
            HostVals::I64(v) => CpuStorage::I64(idx.iter().enumerate().map(|(j, &k)| v[pos(j, k)]).collect()),
            HostVals::F64(v) => CpuStorage::from_f64s(op, self.dtype(), idx.iter().enumerate().map(|(j, &k)| v[pos(j, k)]))?,
        };
        let device = self.device();
        let values = host_tensor(op, host, &out_shape, &device)?;
        let indices = host_tensor(op, CpuStorage::I64(idx), &out_shape, &device)?;
        let kind = if max { OpKind::MaxDim } else { OpKind::MinDim };
        record(&values, &[Some(self)], || {
            let args = vec![t(ValueId(0)), i(dim), b(keepdim)];
            let (x, o) = (SavedTensor::save(self), SavedTensor::save(&values));
            Ok(BackwardOp::Table { op: kind, args, inputs: vec![Kept::Saved(x)], out: Some(o), edges: vec![0] })
        })?;
        Ok((values, indices))
    }
}
