//! Binary elementwise kernels: arithmetic and comparisons of two tensors
//! or of a tensor and a scalar ([`OpKind::is_binary_elementwise`]), and
//! `where`. Each reads its
//! inputs through their layouts and writes a new buffer in the (dense)
//! output layout it is given.

use super::elem::{float_or, max_nan, min_nan, not_implemented, typed, Elem, Float, FloatElem};
use super::output::OutOrder;
use super::strided::{check_layout, check_same_shape, map1, map2, map3};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::kernel::elementwise::{with_op, Compute};
use aot_ir::OpKind;
use num_traits::Float as _;
use std::ops::Range;

/// The error for an op outside the binary class (the callers pass only
/// binary ops; reported rather than a panic).
fn not_binary(op: OpKind) -> AotError {
    AotError::internal(op.name(), format!("`{op}` is not a binary elementwise op"))
}

/// `op` when it is a binary elementwise op, else the error.
fn binary_op(op: OpKind) -> Result<OpKind> {
    if op.is_binary_elementwise() {
        Ok(op)
    } else {
        Err(not_binary(op))
    }
}

/// From this many elements, float arithmetic runs as the kernel stage's
/// single-op kernel (vectorised for the CPU at hand); below, the plain loop
/// here (the same arithmetic) costs less to set up.
const SINGLE_MIN: usize = 1024;

/// The second operand of a binary kernel: a tensor, or a scalar already in
/// the compute type (`first`: the scalar is the left operand).
#[derive(Clone, Copy)]
enum Rhs<'a, T, S> {
    Tensor(&'a [T], &'a Layout),
    Scalar { s: S, first: bool },
}

/// `f(conv(a), conv(b))` elementwise, with `b` a tensor or a scalar.
fn apply<T, S, U>(
    name: &'static str,
    a: &[T],
    la: &Layout,
    rhs: Rhs<'_, T, S>,
    conv: impl Fn(T) -> S + Sync,
    f: impl Fn(S, S) -> U + Sync,
) -> Result<Vec<U>>
where
    T: Copy + Sync,
    S: Copy + Sync,
    U: Copy + Default + Send + 'static,
{
    match rhs {
        Rhs::Tensor(b, lb) => map2(name, a, la, b, lb, |x, y| f(conv(x), conv(y))),
        Rhs::Scalar { s, first: false } => map1(name, a, la, |x| f(conv(x), s)),
        Rhs::Scalar { s, first: true } => map1(name, a, la, |x| f(s, conv(x))),
    }
}

/// A comparison of `a` and `rhs` in the compute type `S`.
fn compare<T, S>(op: OpKind, a: &[T], la: &Layout, rhs: Rhs<'_, T, S>, conv: impl Fn(T) -> S + Sync) -> Result<CpuStorage>
where
    T: Copy + Sync,
    S: Copy + Sync + PartialOrd,
{
    let name = op.name();
    Ok(CpuStorage::Bool(match op {
        OpKind::Eq => apply(name, a, la, rhs, conv, |x, y| x == y),
        OpKind::Ne => apply(name, a, la, rhs, conv, |x, y| x != y),
        OpKind::Lt => apply(name, a, la, rhs, conv, |x, y| x < y),
        OpKind::Le => apply(name, a, la, rhs, conv, |x, y| x <= y),
        OpKind::Gt => apply(name, a, la, rhs, conv, |x, y| x > y),
        OpKind::Ge => apply(name, a, la, rhs, conv, |x, y| x >= y),
        _ => return Err(not_binary(op)),
    }?))
}

fn binary_float<T: FloatElem>(op: OpKind, a: &[T], la: &Layout, rhs: Rhs<'_, T, T::C>) -> Result<CpuStorage> {
    fn ar<T: FloatElem>(
        op: OpKind,
        a: &[T],
        la: &Layout,
        rhs: Rhs<'_, T, T::C>,
        f: impl Fn(T::C, T::C) -> T::C + Sync,
    ) -> Result<CpuStorage> {
        Ok(T::into_storage(apply(op.name(), a, la, rhs, T::to_c, |x, y| T::from_c(f(x, y)))?))
    }
    match op {
        OpKind::Add => ar(op, a, la, rhs, |x, y| x + y),
        OpKind::Sub => ar(op, a, la, rhs, |x, y| x - y),
        OpKind::Mul => ar(op, a, la, rhs, |x, y| x * y),
        OpKind::Div => ar(op, a, la, rhs, |x, y| x / y),
        OpKind::Pow => ar(op, a, la, rhs, |x, y| x.powf(y)),
        OpKind::Maximum => ar(op, a, la, rhs, max_nan),
        OpKind::Minimum => ar(op, a, la, rhs, min_nan),
        _ => compare(op, a, la, rhs, T::to_c),
    }
}

fn binary_i64(op: OpKind, a: &[i64], la: &Layout, rhs: Rhs<'_, i64, i64>) -> Result<CpuStorage> {
    let id = |x: i64| x;
    let out = match op {
        OpKind::Add => apply(op.name(), a, la, rhs, id, i64::wrapping_add),
        OpKind::Sub => apply(op.name(), a, la, rhs, id, i64::wrapping_sub),
        OpKind::Mul => apply(op.name(), a, la, rhs, id, i64::wrapping_mul),
        OpKind::Maximum => apply(op.name(), a, la, rhs, id, i64::max),
        OpKind::Minimum => apply(op.name(), a, la, rhs, id, i64::min),
        OpKind::Pow => apply(op.name(), a, la, rhs, id, aot_ir::kernel::elementwise::int_pow),
        OpKind::Div => {
            return Err(AotError::dtype(
                op.name(),
                format!("\"{}\" of int64 operands must be computed in a floating dtype (promote first)", op.name()),
            ))
        }
        _ => return compare(op, a, la, rhs, id),
    };
    Ok(CpuStorage::I64(out?))
}

fn binary_bool(op: OpKind, a: &[bool], la: &Layout, rhs: Rhs<'_, bool, bool>) -> Result<CpuStorage> {
    let id = |x: bool| x;
    let out =
        match op {
            OpKind::Add | OpKind::Maximum => apply(op.name(), a, la, rhs, id, |x, y| x | y),
            OpKind::Mul | OpKind::Minimum => apply(op.name(), a, la, rhs, id, |x, y| x & y),
            OpKind::Sub => return Err(AotError::dtype(
                "sub",
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.",
            )),
            OpKind::Div | OpKind::Pow => return Err(not_implemented(op.name(), DType::Bool)),
            _ => return compare(op, a, la, rhs, id),
        };
    Ok(CpuStorage::Bool(out?))
}

/// `a op b` elementwise, laid out as `out`. `la` and `lb` have one
/// (broadcast) shape and the storages one dtype. Arithmetic keeps the
/// dtype, comparisons give Bool.
/// I64 has no Div (promote to float first); Bool has the comparisons,
/// Add/Maximum (or) and Mul/Minimum (and).
pub fn binary(op: OpKind, a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout, out: &Layout) -> Result<CpuStorage> {
    let name = binary_op(op)?.name();
    if a.dtype() != b.dtype() {
        return Err(AotError::dtype(
            name,
            format!("expected both operands to have the same dtype, but got {} and {}", a.dtype(), b.dtype()),
        ));
    }
    check_same_shape(name, la, lb)?;
    check_layout(name, la, a.len())?;
    check_layout(name, lb, b.len())?;
    if !op.is_comparison() && la.numel() >= SINGLE_MIN {
        let rhs = super::fused_elementwise::Rhs::Value(1);
        if let Some(r) = super::fused_elementwise::single(name, op, (a, la.clone()), Some((b, lb.clone())), rhs, out) {
            return r;
        }
    }
    let o = OutOrder::new(name, out, &la.shape)?;
    let (la, lb) = (&*o.input(la), &*o.input(lb));
    float_or!(a, va => binary_float(op, va, la, Rhs::Tensor(typed(name, b)?, lb)), other => match other {
        CpuStorage::I64(va) => binary_i64(op, va, la, Rhs::Tensor(typed(name, b)?, lb)),
        CpuStorage::Bool(va) => binary_bool(op, va, la, Rhs::Tensor(typed(name, b)?, lb)),
        _ => Err(AotError::internal(name, "unhandled dtype")),
    })
}

/// `a[la] = a[la] op b[lb]` in place (one shape, one dtype). Dense f32/f64
/// add/sub/mul/div run as one slice loop ([`binary_assign_dense`]); the
/// rest computes `a op b` and copies it over `a`'s elements.
pub fn binary_assign(op: OpKind, a: &mut CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<()> {
    let name = binary_op(op)?.name();
    check_same_shape(name, la, lb)?;
    check_layout(name, la, a.len())?;
    check_layout(name, lb, b.len())?;
    // An empty layout may start past the buffer: the general path.
    let dense = |l: &Layout| (l.numel() > 0 && l.is_contiguous()).then(|| l.offset..l.offset + l.numel());
    if let (Some(ra), Some(rb)) = (dense(la), dense(lb)) {
        let arith = matches!(op, OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div);
        let float = matches!((&*a, b), (CpuStorage::F32(_), CpuStorage::F32(_)) | (CpuStorage::F64(_), CpuStorage::F64(_)));
        if arith && float {
            return binary_assign_dense(op, a, ra, b, rb);
        }
    }
    let tl = Layout::contiguous(&la.shape);
    let r = binary(op, a, la, b, lb, &tl)?;
    crate::cpu::copy_strided(&r, &tl, a, la)
}

/// The arithmetic of the dense kernels: add/sub/mul/div in the dtype itself
/// (f32 and f64 compute in their own type, as the general kernels do).
/// The dense kernels' ops: add/sub/mul/div, from the one op definition.
fn dense_kind(op: OpKind) -> Option<OpKind> {
    matches!(op, OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div).then_some(op)
}

/// Runs of at most this many elements skip the SIMD dispatch: a scalar
/// loop over them costs less than choosing the vector kernel (W1's
/// four-element adds), and add/sub/mul/div round the same either way.
const TINY: usize = 16;

/// The scalar arithmetic of a dense kernel's op, for [`TINY`] runs.
#[inline]
fn tiny_op<T: Compute>(op: OpKind) -> Option<fn(T, T) -> T> {
    Some(match op {
        OpKind::Add => |a, b| a + b,
        OpKind::Sub => |a, b| a - b,
        OpKind::Mul => |a, b| a * b,
        OpKind::Div => |a, b| a / b,
        _ => return None,
    })
}

/// Why a dense kernel refused its operands (the callers checked them, so
/// this is a bug, reported rather than a panic).
fn dense_refused(op: OpKind, a: &CpuStorage, ra: &Range<usize>, b: &CpuStorage, rb: &Range<usize>) -> AotError {
    AotError::internal(
        op.name(),
        format!(
            "the dense kernel takes add/sub/mul/div of two f32 or f64 runs of one length inside their buffers, got {} [{ra:?} of {}] and {} [{rb:?} of {}]",
            a.dtype(),
            a.len(),
            b.dtype(),
            b.len()
        ),
    )
}

/// `a[ra] op b[rb]` into a new buffer: add/sub/mul/div of two dense runs of
/// one length, both f32 or both f64 (the compiled call's direct kernels,
/// whose operands were checked once by the caller).
pub fn binary_dense(op: OpKind, a: &CpuStorage, ra: Range<usize>, b: &CpuStorage, rb: Range<usize>) -> Result<CpuStorage> {
    fn go<T: Compute + Send + 'static>(op: OpKind, x: Option<&[T]>, y: Option<&[T]>) -> Option<Result<Vec<T>>> {
        let (k, x, y) = (dense_kind(op)?, x?, y?);
        if x.len() != y.len() {
            return None;
        }
        if x.len() <= TINY {
            let f = tiny_op::<T>(op)?;
            return Some(crate::host_alloc::try_collect(op.name(), x.iter().zip(y).map(|(&a, &b)| f(a, b))));
        }
        let mut out = match crate::host_alloc::try_filled_buffer(op.name(), x.len(), T::of(0.0)) {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        with_op(k, super::fused_elementwise::Binary { a: x, b: y, o: &mut out })?;
        Some(Ok(out))
    }
    let r = match (a, b) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => go(op, x.get(ra.clone()), y.get(rb.clone())).map(|r| r.map(CpuStorage::F32)),
        (CpuStorage::F64(x), CpuStorage::F64(y)) => go(op, x.get(ra.clone()), y.get(rb.clone())).map(|r| r.map(CpuStorage::F64)),
        _ => None,
    };
    r.unwrap_or_else(|| Err(dense_refused(op, a, &ra, b, &rb)))
}

/// `a[ra] = a[ra] op b[rb]` in place, for the operands of [`binary_dense`].
pub fn binary_assign_dense(op: OpKind, a: &mut CpuStorage, ra: Range<usize>, b: &CpuStorage, rb: Range<usize>) -> Result<()> {
    fn go<T: Compute>(op: OpKind, x: Option<&mut [T]>, y: Option<&[T]>) -> bool {
        let (Some(k), Some(x), Some(y)) = (dense_kind(op), x, y) else { return false };
        if x.len() != y.len() {
            return false;
        }
        if x.len() <= TINY {
            let Some(f) = tiny_op::<T>(op) else { return false };
            x.iter_mut().zip(y).for_each(|(a, &b)| *a = f(*a, b));
            return true;
        }
        with_op(k, super::fused_elementwise::InPlace { x, y }).is_some()
    }
    let done = match (&mut *a, b) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => go(op, x.get_mut(ra.clone()), y.get(rb.clone())),
        (CpuStorage::F64(x), CpuStorage::F64(y)) => go(op, x.get_mut(ra.clone()), y.get(rb.clone())),
        _ => false,
    };
    if done {
        Ok(())
    } else {
        Err(dense_refused(op, a, &ra, b, &rb))
    }
}

/// `a op s` (or `s op a` if `scalar_first`), laid out as `out`, with a
/// scalar `s` that fits the dtype of `a`. Arithmetic on f16/bf16/f32 uses `s` in f32 (PyTorch's
/// opmath), comparisons compare with `s` cast to the dtype of `a`.
pub fn binary_scalar(op: OpKind, a: &CpuStorage, la: &Layout, s: f64, scalar_first: bool, out: &Layout) -> Result<CpuStorage> {
    fn float<T: FloatElem>(op: OpKind, a: &[T], la: &Layout, s: f64, first: bool) -> Result<CpuStorage> {
        let s = if op.is_comparison() { T::from_f64(s).to_c() } else { T::C::of(s) };
        binary_float(op, a, la, Rhs::Scalar { s, first })
    }
    let name = binary_op(op)?.name();
    check_layout(name, la, a.len())?;
    if !op.is_comparison() && !scalar_first && la.numel() >= SINGLE_MIN {
        if let Some(r) = super::fused_elementwise::single(name, op, (a, la.clone()), None, super::fused_elementwise::Rhs::Scalar(s), out) {
            return r;
        }
    }
    let la = &*OutOrder::new(name, out, &la.shape)?.input(la);
    float_or!(a, va => float(op, va, la, s, scalar_first), other => match other {
        CpuStorage::I64(va) => binary_i64(op, va, la, Rhs::Scalar { s: s as i64, first: scalar_first }),
        CpuStorage::Bool(va) => binary_bool(op, va, la, Rhs::Scalar { s: s != 0.0, first: scalar_first }),
        _ => Err(AotError::internal(name, "unhandled dtype")),
    })
}

// ---------------------------------------------------------------- where

/// `torch.where(cond, a, b)`, laid out as `out`: `cond` is Bool, the three
/// layouts share one (broadcast) shape, `a` and `b` share one dtype.
pub fn where_cond(
    cond: &CpuStorage,
    lc: &Layout,
    a: &CpuStorage,
    la: &Layout,
    b: &CpuStorage,
    lb: &Layout,
    out: &Layout,
) -> Result<CpuStorage> {
    const OP: &str = "where";
    let CpuStorage::Bool(c) = cond else {
        return Err(AotError::dtype(
            OP,
            format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", cond.dtype()),
        ));
    };
    if a.dtype() != b.dtype() {
        return Err(AotError::dtype(OP, format!("expected x and y to have the same dtype, but got {} and {}", a.dtype(), b.dtype())));
    }
    check_same_shape(OP, lc, la)?;
    check_same_shape(OP, lc, lb)?;
    check_layout(OP, lc, cond.len())?;
    check_layout(OP, la, a.len())?;
    check_layout(OP, lb, b.len())?;
    let o = OutOrder::new(OP, out, &lc.shape)?;
    let (lc, la, lb) = (&*o.input(lc), &*o.input(la), &*o.input(lb));
    fn go<T: Elem>(c: &[bool], lc: &Layout, a: &[T], la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
        let b = typed::<T>(OP, b)?;
        Ok(T::into_storage(map3(OP, c, lc, a, la, b, lb, |c, x, y| if c { x } else { y })?))
    }
    crate::dispatch_cpu!(a, va => go(c, lc, va, la, b, lb))
}
