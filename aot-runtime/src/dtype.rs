//! Dtypes ([`DType`], defined in `aot_ir`), the element trait that ties a
//! Rust type to its dtype, scalars, and PyTorch's promotion of a tensor
//! with a scalar.

use aot_ir::dtype::Category;
use half::{bf16, f16};

pub use aot_ir::DType;

/// A Rust type that can be a tensor element.
pub trait WithDType: Copy + Send + Sync + 'static + std::fmt::Debug + PartialEq {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// The value as an `f64` (`true` is 1).
    fn to_f64(self) -> f64;
    /// `v` converted to this type (nonzero is `true`).
    fn from_f64(v: f64) -> Self;
}

macro_rules! with_dtype_float {
    ($t:ty, $d:ident, $to:expr, $from:expr) => {
        impl WithDType for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
        }
    };
}
with_dtype_float!(f32, F32, |v: f32| v as f64, |v: f64| v as f32);
with_dtype_float!(f64, F64, |v: f64| v, |v: f64| v);
with_dtype_float!(f16, F16, |v: f16| v.to_f64(), f16::from_f64);
with_dtype_float!(bf16, BF16, |v: bf16| v.to_f64(), bf16::from_f64);
with_dtype_float!(i64, I64, |v: i64| v as f64, |v: f64| v as i64);
with_dtype_float!(bool, Bool, |v: bool| if v { 1.0 } else { 0.0 }, |v: f64| v != 0.0);

/// A Python-number-like scalar operand. It takes part in type promotion only
/// when its category is higher than the tensor's (PyTorch's rule for
/// dimensionless numbers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A float.
    F64(f64),
    /// An integer.
    I64(i64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    /// The value as an `f64` (`true` is 1).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::F64(v) => v,
            Scalar::I64(v) => v as f64,
            Scalar::Bool(v) => {
                if v {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
    pub(crate) fn category(self) -> Category {
        match self {
            Scalar::F64(_) => Category::Float,
            Scalar::I64(_) => Category::Int,
            Scalar::Bool(_) => Category::Bool,
        }
    }
    /// The dtype a tensor of `t` becomes when combined with this scalar.
    pub(crate) fn promote_with(self, t: DType) -> DType {
        if self.category() > t.category() {
            match self {
                // torch's default dtype
                Scalar::F64(_) => DType::F32,
                Scalar::I64(_) => DType::I64,
                Scalar::Bool(_) => DType::Bool,
            }
        } else {
            t
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::F64(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::F64(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::I64(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::I64(v as i64)
    }
}
impl From<usize> for Scalar {
    fn from(v: usize) -> Self {
        Scalar::I64(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn scalar_promotion_follows_torch() {
        use DType::*;
        assert_eq!(Scalar::F64(2.5).promote_with(I64), F32);
        assert_eq!(Scalar::F64(2.5).promote_with(F16), F16);
        assert_eq!(Scalar::I64(2).promote_with(Bool), I64);
        assert_eq!(Scalar::I64(2).promote_with(F64), F64);
    }
}
