//! Eager ops: the reference semantics. Each op works out PyTorch's dtype,
//! shape and result layout, computes through the primitives of its
//! operands' `Storage` (which dispatch to the device's `Backend`), and
//! records its gradient rule (a `BackwardOp`) when autograd is on. One
//! file per family.

pub(crate) mod binary;
mod cat;
mod copy;
mod index;
mod inplace;
mod loss;
mod mask;
pub(crate) use inplace::check_inplace;
mod matmul;
mod random;
mod reduce;
mod scan;
mod unary;
mod view;
mod view_dtype;

pub(crate) use inplace::write_into as write_into_raw;
pub(crate) use loss::nll_loss_grad;
pub(crate) use random::{constant_dropout_mask, rng_restore, rng_snapshot, with_private_rng, with_rng};
pub use random::{manual_seed, rng_state, set_rng_state};
pub(crate) use scan::cumsum_rev;

use crate::dtype::{DType, Scalar};
use crate::error::{AotError, Result};
use crate::tensor::Tensor;

/// The right-hand operand of a binary op: a tensor or a scalar.
///
/// `a.mul(&b)`, `a.mul(3.0)` and `a.mul(2)` all work.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tensor (broadcast against the receiver).
    Tensor(&'a Tensor),
    /// A number.
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}
impl<'a> From<&'a mut Tensor> for Operand<'a> {
    fn from(t: &'a mut Tensor) -> Self {
        Operand::Tensor(t)
    }
}
macro_rules! operand_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self {
                Operand::Scalar(Scalar::from(v))
            }
        }
    )*};
}
operand_from_scalar!(f64, f32, i64, i32, usize, bool);
impl From<Scalar> for Operand<'_> {
    fn from(v: Scalar) -> Self {
        Operand::Scalar(v)
    }
}

/// PyTorch's `result_type` for two tensors: dimensioned tensors take
/// priority over zero-dim ones unless the zero-dim one is of a higher category.
pub(crate) fn result_type(a: &Tensor, b: &Tensor) -> DType {
    result_type_ranked(a.dtype(), a.rank(), b.dtype(), b.rank())
}

/// [`result_type`] of tensors of these dtypes and ranks.
pub(crate) fn result_type_ranked(da: DType, ra: usize, db: DType, rb: usize) -> DType {
    match (ra == 0, rb == 0) {
        (false, true) if db.category() <= da.category() => da,
        (true, false) if da.category() <= db.category() => db,
        _ => DType::promote(da, db),
    }
}

pub(crate) fn check_same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(AotError::DeviceMismatch { op, lhs: a.device().to_string(), rhs: b.device().to_string() });
    }
    Ok(())
}

/// Normalises a list of dims: wrapped, sorted, no repeats.
pub(crate) fn normalize_dims(op: &'static str, dims: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = crate::layout::wrap_dim(op, d, rank)?;
        if out.contains(&w) {
            return Err(AotError::shape(op, format!("dim {w} appears multiple times in the list of dims")));
        }
        out.push(w);
    }
    out.sort_unstable();
    // A scalar reduced over dim 0/-1 reduces nothing.
    if rank == 0 {
        out.clear();
    }
    Ok(out)
}

/// The number of elements a reduction over `dims` (normalized, as from
/// [`normalize_dims`]) of a tensor of `shape` folds into each result: 1
/// for a 0-d tensor. A dim outside `shape` is an internal error.
pub(crate) fn reduced_count(op: &'static str, shape: &[usize], dims: &[usize]) -> Result<usize> {
    dims.iter().map(|&d| shape.get(d).copied().ok_or_else(|| AotError::internal(op, format!("dim {d} of shape {shape:?}")))).product()
}
