//! Binary ops with PyTorch's broadcasting and type promotion; results take
//! PyTorch's layout (`elementwise_layout` of the promoted operands).

use super::{check_same_device, result_type, result_type_ranked, Operand};
use crate::dtype::{DType, Scalar};
use crate::error::{AotError, Result};
use crate::layout::{broadcast_shapes, elementwise_layout, preserve_layout, Dims, Layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};
use aot_ir::OpKind;
use std::borrow::Cow;
use std::sync::Arc;

/// The dtype the kernel computes in, and the dtype of the result.
fn compute_dtype(op: OpKind, promoted: DType) -> DType {
    match op {
        // true division of integers happens in the default float dtype
        OpKind::Div if !promoted.is_float() => DType::F32,
        _ => promoted,
    }
}

/// `layout` broadcast to `shape` (stride 0 on new or size-1 dims).
pub(crate) fn broadcast_layout(layout: &Layout, shape: &[usize]) -> Layout {
    let lead = shape.len() - layout.rank();
    let mut stride = Dims::zeros(shape.len());
    for i in 0..layout.rank() {
        if layout.shape[i] == shape[i + lead] {
            stride[i + lead] = layout.stride[i];
        }
    }
    Layout::new(shape, stride, layout.offset)
}

/// Reads `t` as `dtype`: its own storage and layout if it already has that
/// dtype, else a cast copy laid out like PyTorch's `.to(dtype)`
/// (TensorIterator promotes CPU inputs that way before it lays out the result).
/// `l` is `t`'s layout (the caller has read it already).
fn read_as<'a>(t: &'a Tensor, l: Layout, op: &'static str, dtype: DType) -> Result<(Cow<'a, Arc<Storage>>, Layout)> {
    if t.dtype() == dtype {
        return Ok((Cow::Borrowed(t.storage()), l));
    }
    let pl = preserve_layout(&l);
    Ok((Cow::Owned(Arc::new(t.storage().cast(op, &l, dtype, &pl)?)), pl))
}

/// `a op b` computed in `dtype`, laid out as `out` or else as PyTorch lays
/// out the result of the two (promoted) operands; `la` and `lb` are the
/// operands' layouts.
fn kernel_tt(
    op: OpKind,
    (a, la): (&Tensor, Layout),
    (b, lb): (&Tensor, Layout),
    dtype: DType,
    shape: &[usize],
    out: Option<Layout>,
) -> Result<Tensor> {
    let name = op.name();
    let (sa, la) = read_as(a, la, name, dtype)?;
    let (sb, lb) = read_as(b, lb, name, dtype)?;
    let ol = out.unwrap_or_else(|| elementwise_layout(shape, &[&la, &lb]));
    let (la, lb) = (broadcast_layout(&la, shape), broadcast_layout(&lb, shape));
    Ok(Tensor::from_storage(sa.binary(op, &la, &sb, &lb, &ol)?, ol))
}

/// The layout PyTorch's TensorIterator sees for an input promoted to
/// `common`: its own, or that of its `.to(common)` copy.
fn promoted_layout(t: &Tensor, common: DType) -> Layout {
    let l = t.layout();
    if t.dtype() == common {
        l
    } else {
        preserve_layout(&l)
    }
}

/// How PyTorch lays out `tensor op scalar`.
#[derive(Clone, Copy)]
enum ScalarLayout {
    /// The Python number becomes a 0-dim operand of a binary op, which
    /// turns off TensorIterator's fast path (add, sub, mul, div, compare).
    Wrapped,
    /// A unary op of the tensor (pow, clamp-like maximum/minimum).
    Unary,
    /// `s ** t` allocates a contiguous result.
    Contiguous,
    /// `s / t` is `t.reciprocal() * s`: a unary op, then a wrapped one.
    Reciprocal,
}

impl ScalarLayout {
    fn of(op: OpKind, scalar_first: bool) -> ScalarLayout {
        match (op, scalar_first) {
            (OpKind::Pow, true) => ScalarLayout::Contiguous,
            (OpKind::Pow | OpKind::Maximum | OpKind::Minimum, _) => ScalarLayout::Unary,
            (OpKind::Div, true) => ScalarLayout::Reciprocal,
            _ => ScalarLayout::Wrapped,
        }
    }

    fn layout(self, l: &Layout) -> Layout {
        let scalar = Layout::new(vec![], vec![], 0);
        match self {
            ScalarLayout::Unary => elementwise_layout(&l.shape, &[l]),
            ScalarLayout::Contiguous => Layout::contiguous(&l.shape),
            ScalarLayout::Wrapped => elementwise_layout(&l.shape, &[l, &scalar]),
            ScalarLayout::Reciprocal => elementwise_layout(&l.shape, &[&elementwise_layout(&l.shape, &[l]), &scalar]),
        }
    }
}

/// How eager lays out `a op s` for `a` laid out as `l` (with `a`'s dtype).
pub(crate) fn scalar_result_layout(op: OpKind, l: &Layout) -> Layout {
    ScalarLayout::of(op, false).layout(l)
}

/// `a op s` (or `s op a`) computed in `dtype`, laid out as `out` or else
/// as PyTorch lays out that op.
fn kernel_ts(op: OpKind, a: &Tensor, s: f64, dtype: DType, scalar_first: bool, out: Option<Layout>) -> Result<Tensor> {
    let (sa, la) = read_as(a, a.layout(), op.name(), dtype)?;
    let ol = out.unwrap_or_else(|| ScalarLayout::of(op, scalar_first).layout(&la));
    Ok(Tensor::from_storage(sa.binary_scalar(op, &la, s, scalar_first, &ol)?, ol))
}

/// Out-of-place binary op `a op rhs` (or `rhs op a` if `scalar_first`).
pub(crate) fn binary(op: OpKind, a: &Tensor, rhs: Operand<'_>, scalar_first: bool) -> Result<Tensor> {
    binary_with(op, a, rhs, scalar_first, None)
}

/// [`binary`], with the result laid out as `out` if given (for ops that
/// PyTorch computes in one step and we in several).
fn binary_with(op: OpKind, a: &Tensor, rhs: Operand<'_>, scalar_first: bool, out: Option<Layout>) -> Result<Tensor> {
    let name = op.name();
    if op == OpKind::Pow {
        if let Some(out) = integer_pow(a, &rhs, scalar_first)? {
            return Ok(out);
        }
    }
    match rhs {
        Operand::Tensor(b) => {
            check_same_device(name, a, b)?;
            let (la, lb) = (a.layout(), b.layout());
            let promoted = result_type_ranked(a.dtype(), la.rank(), b.dtype(), lb.rank());
            let dtype = compute_dtype(op, promoted);
            let shape = broadcast_shapes(name, &la.shape, &lb.shape)?;
            let out = kernel_tt(op, (a, la), (b, lb), dtype, &shape, out)?;
            if !op.is_comparison() {
                record(&out, &[Some(a), Some(b)], || {
                    let (sa, sb) = (SavedTensor::save(a), SavedTensor::save(b));
                    Ok(match op {
                        OpKind::Add => BackwardOp::Add { a_shape: a.shape(), b_shape: b.shape(), a_dtype: a.dtype(), b_dtype: b.dtype() },
                        OpKind::Sub => BackwardOp::Sub { a_shape: a.shape(), b_shape: b.shape(), a_dtype: a.dtype(), b_dtype: b.dtype() },
                        OpKind::Mul => BackwardOp::Mul { a: sa, b: sb },
                        OpKind::Div => BackwardOp::Div { a: sa, b: sb },
                        OpKind::Pow => BackwardOp::Pow { a: sa, b: sb, out: SavedTensor::save(&out) },
                        OpKind::Maximum => BackwardOp::MaxMin { a: sa, b: sb, max: true },
                        OpKind::Minimum => BackwardOp::MaxMin { a: sa, b: sb, max: false },
                        _ => return Err(AotError::internal(name, "comparison has no gradient")),
                    })
                })?;
            }
            Ok(out)
        }
        Operand::Scalar(s) => {
            let promoted = s.promote_with(a.dtype());
            let dtype = compute_dtype(op, promoted);
            if let (Scalar::F64(v), false) = (s, dtype.is_float()) {
                // unreachable by promotion, but keep the error instead of a silent truncation
                return Err(AotError::dtype(name, format!("cannot combine {} tensor with float scalar {v}", a.dtype())));
            }
            let out = kernel_ts(op, a, s.to_f64(), dtype, scalar_first, out)?;
            if !op.is_comparison() {
                let v = s.to_f64();
                record(&out, &[Some(a)], || {
                    let sa = SavedTensor::save(a);
                    let a_dtype = a.dtype();
                    Ok(match (op, scalar_first) {
                        (OpKind::Add, _) => BackwardOp::ScalarAffine { scale: 1.0, a_dtype },
                        (OpKind::Sub, false) => BackwardOp::ScalarAffine { scale: 1.0, a_dtype },
                        (OpKind::Sub, true) => BackwardOp::ScalarAffine { scale: -1.0, a_dtype },
                        (OpKind::Mul, _) => BackwardOp::ScalarAffine { scale: v, a_dtype },
                        (OpKind::Div, false) => BackwardOp::ScalarAffine { scale: 1.0 / v, a_dtype },
                        (OpKind::Div, true) => BackwardOp::RDivScalar { s: v, a: sa },
                        (OpKind::Pow, false) => BackwardOp::PowScalar { a: sa, exponent: v },
                        (OpKind::Pow, true) => BackwardOp::RPowScalar { base: v, out: SavedTensor::save(&out) },
                        (OpKind::Maximum, _) => BackwardOp::MaxMinScalar { a: sa, s: v, max: true },
                        (OpKind::Minimum, _) => BackwardOp::MaxMinScalar { a: sa, s: v, max: false },
                        _ => return Err(AotError::internal(name, "comparison has no gradient")),
                    })
                })?;
            }
            Ok(out)
        }
    }
}

/// `pow` of integers stays integer (PyTorch), with PyTorch's integer kernel.
/// A negative integer scalar exponent of an integer or bool tensor is
/// PyTorch's error; a tensor exponent (and `s ** t`, which PyTorch computes
/// as a tensor-tensor op) is not checked.
fn integer_pow(a: &Tensor, rhs: &Operand<'_>, scalar_first: bool) -> Result<Option<Tensor>> {
    let promoted = match rhs {
        Operand::Tensor(b) => result_type(a, b),
        Operand::Scalar(s) => s.promote_with(a.dtype()),
    };
    if promoted != DType::I64 {
        return Ok(None);
    }
    // Integer operands never require grad: nothing to record.
    Ok(Some(match rhs {
        Operand::Tensor(b) => {
            check_same_device("pow", a, b)?;
            let (la, lb) = (a.layout(), b.layout());
            let shape = broadcast_shapes("pow", &la.shape, &lb.shape)?;
            kernel_tt(OpKind::Pow, (a, la), (b, lb), DType::I64, &shape, None)?
        }
        Operand::Scalar(Scalar::I64(e)) if *e < 0 && !scalar_first => {
            return Err(AotError::unsupported("pow", "Integers to negative integer powers are not allowed."));
        }
        Operand::Scalar(s) => kernel_ts(OpKind::Pow, a, s.to_f64(), DType::I64, scalar_first, None)?,
    }))
}

macro_rules! binary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("`torch.", stringify!($name), "` with broadcasting and type promotion; `rhs` is a tensor or a scalar.")]
                pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
                    binary(OpKind::$op, self, rhs.into(), false)
                }
            )*
        }
    };
}
binary_methods!(
    add => Add, sub => Sub, mul => Mul, div => Div, pow => Pow,
    maximum => Maximum, minimum => Minimum,
    eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge,
);

impl Tensor {
    /// `scalar - self`.
    pub fn rsub(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(OpKind::Sub, self, Operand::Scalar(s.into()), true)
    }
    /// `scalar / self`.
    pub fn rdiv(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(OpKind::Div, self, Operand::Scalar(s.into()), true)
    }
    /// `scalar ** self`.
    pub fn rpow(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(OpKind::Pow, self, Operand::Scalar(s.into()), true)
    }

    /// `torch.where(cond, self, other)`.
    pub fn where_<'a>(&self, cond: &Tensor, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let op = "where";
        if cond.dtype() != DType::Bool {
            return Err(AotError::dtype(
                op,
                format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", cond.dtype()),
            ));
        }
        check_same_device(op, self, cond)?;
        let other_t = match other.into() {
            Operand::Tensor(t) => {
                check_same_device(op, self, t)?;
                t.clone()
            }
            Operand::Scalar(s) => {
                let dt = s.promote_with(self.dtype());
                Tensor::full(&[], s.to_f64(), dt, &self.device())?
            }
        };
        let dtype = result_type(self, &other_t);
        let shape = broadcast_shapes(op, &self.shape(), &other_t.shape())?;
        let shape = broadcast_shapes(op, &shape, &cond.shape())?;
        let a = self.to_dtype(dtype)?;
        let b = other_t.to_dtype(dtype)?;
        let (lc, la, lb) = (cond.layout(), a.layout(), b.layout());
        // PyTorch's operand order: the condition comes first
        let ol = elementwise_layout(&shape, &[&lc, &la, &lb]);
        let (lc, la, lb) = (broadcast_layout(&lc, &shape), broadcast_layout(&la, &shape), broadcast_layout(&lb, &shape));
        let data = cond.storage().where_cond(op, &lc, a.storage(), &la, b.storage(), &lb, &ol)?;
        let out = Tensor::from_storage(data, ol);
        record(&out, &[Some(&a), Some(&b)], || {
            Ok(BackwardOp::Where { cond: SavedTensor::save(cond), a_shape: a.shape(), b_shape: b.shape() })
        })?;
        Ok(out)
    }
}

impl Tensor {
    /// Elementwise logical not (nonzero -> false).
    pub fn logical_not(&self) -> Result<Tensor> {
        // a unary op in PyTorch, whatever we compute it with
        let l = self.layout();
        binary_with(OpKind::Eq, self, Operand::Scalar(Scalar::I64(0)), false, Some(elementwise_layout(&l.shape, &[&l])))
    }
    /// Elementwise logical and of two tensors (nonzero is true).
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        // PyTorch lays out its two (promoted) operands, not our `!= 0` steps.
        let common = result_type(self, other);
        let (la, lb) = (promoted_layout(self, common), promoted_layout(other, common));
        let shape = broadcast_shapes("logical_and", &la.shape, &lb.shape)?;
        let out = elementwise_layout(&shape, &[&la, &lb]);
        let a = self.ne(0)?;
        let b = other.ne(0)?;
        binary_with(OpKind::Mul, &a, Operand::Tensor(&b), false, Some(out))
    }
}

/// `&a + &b`, `&a * 2.0`, ...: the eager operators, returning `Result`.
macro_rules! std_ops {
    ($($trait:ident $method:ident => $op:ident),*) => {$(
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                binary(OpKind::$op, self, Operand::Tensor(rhs), false)
            }
        }
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                binary(OpKind::$op, self, Operand::Scalar(Scalar::F64(rhs)), false)
            }
        }
        impl std::ops::$trait<&Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                binary(OpKind::$op, rhs, Operand::Scalar(Scalar::F64(self)), true)
            }
        }
    )*};
}
std_ops!(Add add => Add, Sub sub => Sub, Mul mul => Mul, Div div => Div);

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}
