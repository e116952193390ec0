//! Unary elementwise kernels: the math functions
//! ([`OpKind::is_unary_elementwise`]) and `clamp`. Each reads its input through its layout and writes a new buffer
//! in the (dense) output layout it is given.

use super::elem::{float_or, not_implemented, Float, FloatElem};
use super::output::OutOrder;
use super::strided::{check_layout, map1};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::OpKind;

/// Applies a unary op to the elements of `layout` in `src`; the output is a
/// new buffer laid out as `out` (dense, of `layout.shape`) with the dtype of
/// `src`. Floating dtypes only, except `Neg`/`Abs`/`Square`/`Relu`, which
/// also take I64. f16/bf16 compute in f32 and round once.
pub fn unary(op: OpKind, src: &CpuStorage, layout: &Layout, out: &Layout) -> Result<CpuStorage> {
    let name = op.name();
    if !op.is_unary_elementwise() {
        return Err(AotError::internal(name, format!("`{op}` is not a unary elementwise op")));
    }
    check_layout(name, layout, src.len())?;
    // Floats: the kernel stage's single-op kernel (the one op definition).
    if let Some(r) = super::fused_elementwise::single(name, op, (src, layout.clone()), None, super::fused_elementwise::Rhs::None, out) {
        return r;
    }
    let layout = &*OutOrder::new(name, out, &layout.shape)?.input(layout);
    match src {
        CpuStorage::I64(v) => unary_i64(op, v, layout),
        // Floats ran above: every output the backend is given is dense.
        other if other.dtype().is_float() => Err(AotError::internal(name, "a float unary op with an output that is not dense")),
        other => Err(not_implemented(name, other.dtype())),
    }
}

fn unary_i64(op: OpKind, v: &[i64], l: &Layout) -> Result<CpuStorage> {
    let name = op.name();
    let out = match op {
        OpKind::Neg => map1(name, v, l, i64::wrapping_neg)?,
        OpKind::Abs => map1(name, v, l, i64::wrapping_abs)?,
        OpKind::Square => map1(name, v, l, |x| x.wrapping_mul(x))?,
        OpKind::Relu => map1(name, v, l, |x| x.max(0))?,
        _ => return Err(not_implemented(name, DType::I64)),
    };
    Ok(CpuStorage::I64(out))
}

// ---------------------------------------------------------------- clamp

fn clamp_lo<C: Float>(x: C, lo: C) -> C {
    if lo.is_nan() || x < lo {
        lo
    } else {
        x
    }
}

fn clamp_hi<C: Float>(x: C, hi: C) -> C {
    if hi.is_nan() || x > hi {
        hi
    } else {
        x
    }
}

/// `torch.clamp` with optional bounds, same dtype, laid out as `out`. NaN
/// inputs and NaN bounds give NaN; `min > max` gives `max`, as in PyTorch.
pub fn clamp(src: &CpuStorage, l: &Layout, min: Option<f64>, max: Option<f64>, out: &Layout) -> Result<CpuStorage> {
    const OP: &str = "clamp";
    check_layout(OP, l, src.len())?;
    let l = &*OutOrder::new(OP, out, &l.shape)?.input(l);
    fn float<T: FloatElem>(v: &[T], l: &Layout, min: Option<f64>, max: Option<f64>) -> Result<CpuStorage> {
        let out = match (min.map(T::C::of), max.map(T::C::of)) {
            (Some(lo), Some(hi)) => map1(OP, v, l, |x| T::from_c(clamp_hi(clamp_lo(x.to_c(), lo), hi))),
            (Some(lo), None) => map1(OP, v, l, |x| T::from_c(clamp_lo(x.to_c(), lo))),
            (None, Some(hi)) => map1(OP, v, l, |x| T::from_c(clamp_hi(x.to_c(), hi))),
            (None, None) => map1(OP, v, l, |x| x),
        }?;
        Ok(T::into_storage(out))
    }
    float_or!(src, v => float(v, l, min, max), other => match other {
        CpuStorage::I64(v) => {
            let lo = min.map_or(i64::MIN, |m| m as i64);
            let hi = max.map_or(i64::MAX, |m| m as i64);
            Ok(CpuStorage::I64(map1(OP, v, l, |x| x.max(lo).min(hi))?))
        }
        _ => Err(not_implemented(OP, other.dtype())),
    })
}
