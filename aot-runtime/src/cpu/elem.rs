//! The element traits the kernels are written against, so each kernel is one
//! generic function and dtype dispatch happens once at its entry.
//!
//! - [`Elem`]: any storage element, with exact casts between dtypes.
//! - [`FloatElem`]: a floating element and the type it computes in
//!   (f16/bf16/f32 compute in f32, f64 in f64).
//! - [`Float`]: the compute type itself.

use crate::backend::{CpuElem, CpuStorage};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use half::{bf16, f16};

/// A storage element.
pub(crate) trait Elem: CpuElem + Default {
    /// The value as an integer (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// The integer converted to this type with a single rounding.
    fn from_i64(v: i64) -> Self;
    /// The value as f32; only exact (and only used) for f32, f16 and bf16.
    fn to_f32(self) -> f32;
    /// The f32 converted to this type with a single rounding.
    fn from_f32(v: f32) -> Self;
    /// PyTorch's cast: float -> int truncates toward zero, anything -> bool
    /// is `!= 0`, bool -> anything is 0/1. i64 goes through i64 (exact),
    /// f32/f16/bf16 through f32 (exact, and fast), the rest through f64.
    #[inline(always)]
    fn cast<U: Elem>(self) -> U {
        match Self::DTYPE {
            DType::I64 => U::from_i64(self.to_i64()),
            DType::F32 | DType::F16 | DType::BF16 => U::from_f32(self.to_f32()),
            DType::F64 | DType::Bool => U::from_f64(self.to_f64()),
        }
    }
}

impl Elem for f32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}
impl Elem for f64 {
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v as f64
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn from_f32(v: f32) -> Self {
        v as f64
    }
}
impl Elem for f16 {
    fn to_i64(self) -> i64 {
        f16::to_f32(self) as i64
    }
    fn from_i64(v: i64) -> Self {
        f16::from_f64(v as f64)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}
impl Elem for bf16 {
    fn to_i64(self) -> i64 {
        bf16::to_f32(self) as i64
    }
    fn from_i64(v: i64) -> Self {
        bf16::from_f64(v as f64)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}
impl Elem for i64 {
    fn to_i64(self) -> i64 {
        self
    }
    fn from_i64(v: i64) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn from_f32(v: f32) -> Self {
        v as i64
    }
}
impl Elem for bool {
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn to_f32(self) -> f32 {
        self as u8 as f32
    }
    fn from_f32(v: f32) -> Self {
        v != 0.0
    }
}

/// The type a floating kernel computes in.
pub(crate) trait Float: num_traits::Float + Default + Send + Sync + std::fmt::Debug + 'static {
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
    /// The value as f64 (exact).
    fn f64(self) -> f64;
}

impl Float for f32 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    #[inline(always)]
    fn of(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self
    }
}

/// torch.maximum: NaN if either is NaN.
pub(crate) fn max_nan<C: Float>(x: C, y: C) -> C {
    if x.is_nan() || x >= y {
        x
    } else {
        y
    }
}

/// torch.minimum: NaN if either is NaN.
pub(crate) fn min_nan<C: Float>(x: C, y: C) -> C {
    if x.is_nan() || x <= y {
        x
    } else {
        y
    }
}

/// A floating storage element and its compute type.
pub(crate) trait FloatElem: Elem {
    type C: Float;
    fn to_c(self) -> Self::C;
    /// Rounds a computed value to the element type (once).
    fn from_c(c: Self::C) -> Self;
    /// Rounds a buffer of computed values (free when the types agree; else
    /// a new buffer, an error naming `op` if it cannot be allocated).
    fn from_c_vec(op: &'static str, v: Vec<Self::C>) -> crate::error::Result<Vec<Self>> {
        super::strided::map1(op, &v, &crate::layout::Layout::contiguous(&[v.len()]), Self::from_c)
    }
}

impl FloatElem for f32 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_c(c: f32) -> Self {
        c
    }
    fn from_c_vec(_: &'static str, v: Vec<f32>) -> crate::error::Result<Vec<f32>> {
        Ok(v)
    }
}
impl FloatElem for f64 {
    type C = f64;
    #[inline(always)]
    fn to_c(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_c(c: f64) -> Self {
        c
    }
    fn from_c_vec(_: &'static str, v: Vec<f64>) -> crate::error::Result<Vec<f64>> {
        Ok(v)
    }
}
impl FloatElem for f16 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_c(c: f32) -> Self {
        f16::from_f32(c)
    }
}
impl FloatElem for bf16 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_c(c: f32) -> Self {
        bf16::from_f32(c)
    }
}

/// Runs `$body` with `$v` bound to the typed vector of a floating
/// `CpuStorage`; any other storage is bound to `$o` and runs `$other`.
macro_rules! float_or {
    ($s:expr, $v:ident => $body:expr, $o:ident => $other:expr) => {
        match $s {
            $crate::backend::CpuStorage::F32($v) => $body,
            $crate::backend::CpuStorage::F64($v) => $body,
            $crate::backend::CpuStorage::F16($v) => $body,
            $crate::backend::CpuStorage::BF16($v) => $body,
            $o => $other,
        }
    };
}
pub(crate) use float_or;

/// PyTorch's spelling of a dtype in "not implemented for 'Long'" messages.
pub(crate) fn torch_type_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::I64 => "Long",
        DType::Bool => "Bool",
    }
}

/// PyTorch's error for a kernel that has no implementation for a dtype.
pub(crate) fn not_implemented(op: &'static str, dtype: DType) -> AotError {
    AotError::dtype(op, format!("\"{op}\" not implemented for '{}'", torch_type_name(dtype)))
}

/// The buffer of `s` as a slice of `T`, or a dtype error.
pub(crate) fn typed<'a, T: CpuElem>(op: &'static str, s: &'a CpuStorage) -> Result<&'a [T]> {
    T::slice(s).ok_or_else(|| AotError::dtype(op, format!("expected both operands to have dtype {}, but got {}", T::DTYPE, s.dtype())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_torch() {
        assert_eq!((-2.7f32).cast::<i64>(), -2);
        assert_eq!(2.7f64.cast::<i64>(), 2);
        assert!(f64::NAN.cast::<bool>());
        assert!(!(0.0f32).cast::<bool>());
        assert_eq!(true.cast::<f16>(), f16::ONE);
        assert_eq!(true.cast::<i64>(), 1);
        // i64 -> i64 stays exact beyond 2^53
        assert_eq!(((1i64 << 60) + 1).cast::<i64>(), (1i64 << 60) + 1);
        // f32 -> f16 rounds once
        assert_eq!(0.1f32.cast::<f16>(), f16::from_f32(0.1));
        assert_eq!(3i64.cast::<bf16>(), bf16::from_f32(3.0));
        // f64 -> f16 as `half` (and PyTorch, through float) does it
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(x.cast::<f16>(), f16::from_f64(x));
        assert_eq!(bf16::from_f32(1.5).cast::<f16>(), f16::from_f32(1.5));
        assert!(f32::NAN.cast::<bool>() && !0.0f32.cast::<bool>() && (-0.0f64).cast::<i64>() == 0);
    }
}
