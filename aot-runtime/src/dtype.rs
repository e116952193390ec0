//! Dtypes, the element trait that ties a Rust type to its dtype, scalars,
//! and PyTorch's type-promotion rules.

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit signed integer.
    I64,
    /// Boolean (one byte).
    Bool,
}

/// The three categories PyTorch promotes between: bool < integer < floating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Category {
    Bool,
    Int,
    Float,
}

impl DType {
    /// All dtypes, in a stable order.
    pub const ALL: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];
    /// The floating dtypes.
    pub const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

    /// Whether this is a floating dtype.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
    /// The dtype math on this one is done in (PyTorch's opmath type): f32
    /// for f16/bf16, else itself.
    pub fn opmath(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        }
    }
    /// The size of one element, in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Bool => 1,
        }
    }
    /// PyTorch's name, as in `torch.float32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }
    pub(crate) fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::I64 => Category::Int,
            _ => Category::Float,
        }
    }

    /// `torch.promote_types` for two tensor dtypes of the same priority.
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        match (a.category(), b.category()) {
            (ca, cb) if ca != cb => {
                if ca > cb {
                    a
                } else {
                    b
                }
            }
            _ => match (a, b) {
                (F64, _) | (_, F64) => F64,
                // f16 with bf16, or either with f32, promotes to f32.
                _ => F32,
            },
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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

/// The IR's and the CUDA renderer's names of the dtypes.
impl DType {
    pub(crate) fn from_ir(d: aot_ir::IrDType) -> DType {
        use aot_ir::IrDType as I;
        match d {
            I::F32 => DType::F32,
            I::F64 => DType::F64,
            I::F16 => DType::F16,
            I::BF16 => DType::BF16,
            I::I64 => DType::I64,
            I::Bool => DType::Bool,
        }
    }
    /// The renderer's element type of this dtype.
    pub(crate) fn kernel_dtype(self) -> aot_ir::kernel::render::KernelDType {
        use aot_ir::kernel::render::KernelDType as K;
        match self {
            DType::F32 => K::F32,
            DType::F64 => K::F64,
            DType::F16 => K::F16,
            DType::BF16 => K::BF16,
            DType::I64 => K::I64,
            DType::Bool => K::Bool,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn promotion_follows_torch() {
        use DType::*;
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(F16, F32), F32);
        assert_eq!(DType::promote(F32, F64), F64);
        assert_eq!(DType::promote(I64, F16), F16);
        assert_eq!(DType::promote(Bool, I64), I64);
        assert_eq!(Scalar::F64(2.5).promote_with(I64), F32);
        assert_eq!(Scalar::F64(2.5).promote_with(F16), F16);
        assert_eq!(Scalar::I64(2).promote_with(Bool), I64);
        assert_eq!(Scalar::I64(2).promote_with(F64), F64);
    }
}
