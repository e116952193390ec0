//! matmul / mm / bmm with PyTorch's rank rules and batch broadcasting.

use super::check_same_device;
use crate::device::Device;
use crate::error::{AotError, Result};
use crate::layout::{broadcast_shapes, checked_numel, Layout};
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// Batched product of `a` [..., m, k] and `b` [..., k, n] (both rank >= 2).
fn batched(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (sa, sb) = (a.shape(), b.shape());
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return Err(AotError::shape(
            op,
            format!("mat1 and mat2 shapes cannot be multiplied ({}x{k} and {k2}x{n}); shapes {sa:?} and {sb:?}", m),
        ));
    }
    let batch = broadcast_shapes(op, &sa[..sa.len() - 2], &sb[..sb.len() - 2])?;
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    // Refuse an output too large to describe before copying any operand.
    checked_numel(op, &out_shape)?;
    let nb: usize = batch.iter().product();
    // Bring each operand to a 3-D layout [nb, rows, cols]; a stride-0 batch
    // stays free. The CPU reads several batch dims through their strides
    // (attention's heads of a transposed projection); elsewhere several
    // batch dims that are not one run of strides are materialised.
    let expand = |t: &Tensor, rows: usize, cols: usize| -> Result<Tensor> {
        let mut full = batch.clone();
        full.extend([rows, cols]);
        crate::tensor::with_grad_mode(false, || t.expand(&shape_i64(&full)))
    };
    let (ea, eb) = (expand(a, m, k)?, expand(b, k, n)?);
    // Several batch dims that one stride does not cover are read through
    // their strides on the CPU (attention's heads of a transposed
    // projection), both operands alike; elsewhere such an operand is
    // materialised.
    let on_cpu = a.device() == Device::Cpu;
    let (ja, jb) = (joined_batch_stride(&ea.layout(), batch.len()), joined_batch_stride(&eb.layout(), batch.len()));
    let (a3, b3) = if on_cpu && (ja.is_none() || jb.is_none()) { (ea, eb) } else { (to3(op, ea, ja, nb)?, to3(op, eb, jb, nb)?) };
    let data = a3.storage().matmul(op, &a3.layout(), b3.storage(), &b3.layout())?;
    Ok(Tensor::from_storage(data, Layout::contiguous(&out_shape)))
}

/// The one stride that steps through the first `nb_dims` (batch) dims of
/// `l`, counting only those of more than one element (0 when there are
/// none), or `None` when no single stride does.
fn joined_batch_stride(l: &Layout, nb_dims: usize) -> Option<usize> {
    let steps: Vec<(usize, usize)> = (0..nb_dims).filter(|&d| l.shape[d] > 1).map(|d| (l.shape[d], l.stride[d])).collect();
    steps.windows(2).all(|w| w[0].1 == w[1].0 * w[1].1).then(|| steps.last().map_or(0, |&(_, s)| s))
}

/// `e` (`[..batch, rows, cols]`, `nb` matrices) as a 3-D operand: an alias
/// with the batch stride `joined` where one covers the batch dims, else a
/// contiguous copy.
fn to3(op: &'static str, e: Tensor, joined: Option<usize>, nb: usize) -> Result<Tensor> {
    let l = e.layout();
    let r = l.rank();
    let (rows, cols) = (l.shape[r - 2], l.shape[r - 1]);
    match joined {
        Some(bs) => Ok(e.alias_with_layout(Layout::new(vec![nb, rows, cols], vec![bs, l.stride[r - 2], l.stride[r - 1]], l.offset))),
        None => {
            let c = e.copy_as(op, e.dtype(), Layout::contiguous(&l.shape))?;
            Ok(c.alias_with_layout(Layout::contiguous(&[nb, rows, cols])))
        }
    }
}

impl Tensor {
    /// `torch.matmul`: dot, matrix-vector, matrix-matrix, batched with broadcasting.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let op = "matmul";
        check_same_device(op, self, other)?;
        if self.dtype() != other.dtype() {
            return Err(AotError::dtype(
                op,
                format!("expected both operands to have the same dtype, but got {} and {}", self.dtype(), other.dtype()),
            ));
        }
        if !self.dtype().is_float() {
            return Err(AotError::dtype(op, format!("matmul is only implemented for floating dtypes, got {}", self.dtype())));
        }
        let (ra, rb) = (self.rank(), other.rank());
        if ra == 0 || rb == 0 {
            return Err(AotError::shape(op, format!("both arguments to matmul need to be at least 1D, but they are {ra}D and {rb}D")));
        }
        let out = crate::tensor::with_grad_mode(false, || -> Result<Tensor> {
            let a2 = if ra == 1 { self.unsqueeze(0)? } else { self.clone() };
            let b2 = if rb == 1 { other.unsqueeze(-1)? } else { other.clone() };
            let r = batched(op, &a2, &b2)?;
            let mut shape = r.shape();
            // drop the dims the 1-D operands gained: n (last) for b, m (second to last) for a
            let l = shape.len();
            if ra == 1 {
                shape.remove(l - 2);
            }
            if rb == 1 {
                shape.pop();
            }
            Ok(r.alias_with_layout(Layout::contiguous(&shape)))
        })?;
        record(&out, &[Some(self), Some(other)], || {
            Ok(BackwardOp::Matmul {
                a: other.requires_grad().then(|| SavedTensor::save(self)),
                b: self.requires_grad().then(|| SavedTensor::save(other)),
                a_shape: self.shape(),
                b_shape: other.shape(),
                a_dtype: self.dtype(),
                b_dtype: other.dtype(),
            })
        })?;
        Ok(out)
    }

    /// Matrix product of two 2-D tensors.
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        if self.rank() != 2 || other.rank() != 2 {
            return Err(AotError::shape("mm", format!("mm expects 2-D tensors, got shapes {:?} and {:?}", self.shape(), other.shape())));
        }
        self.matmul(other)
    }

    /// Batched matrix product of two 3-D tensors with equal batch size.
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        let (sa, sb) = (self.shape(), other.shape());
        if sa.len() != 3 || sb.len() != 3 {
            return Err(AotError::shape("bmm", format!("batch1 and batch2 must be 3D tensors, got shapes {sa:?} and {sb:?}")));
        }
        if sa[0] != sb[0] {
            return Err(AotError::shape("bmm", format!("batch1 and batch2 must have same number of batches, got {} and {}", sa[0], sb[0])));
        }
        self.matmul(other)
    }
}
