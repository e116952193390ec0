//! The small value types the IR is made of: value and span ids, parameter
//! types, scalar expressions, and node arguments.
//!
//! Scalars are kept as expressions rather than folded numbers because the
//! function's scalar parameters (`lr: f64`) are runtime inputs: a graph is
//! compiled once and called with many learning rates.

use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

mod scalar;
pub use scalar::{ScalarBinOp, ScalarError, ScalarExpr, ScalarFn, ScalarTy, ScalarValue};

/// An SSA tensor value. Each value is defined once (by a parameter or a node);
/// in-place ops mutate a value without defining a new one, so the value keeps
/// its identity exactly like the eager tensor it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The index of this value in `Graph::values`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Where a node or parameter came from in the user's source. The macro keeps
/// the table from ids to real spans; the IR only carries the id, so the IR
/// stays free of `proc_macro2` and serialisable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct SpanId(pub u32);

/// The declared type of a parameter of an `#[aot_fn]` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ParamType {
    /// `&Tensor`: the body may read it but must not mutate it.
    Tensor,
    /// `&mut Tensor`: the body may mutate its data or metadata.
    TensorMut,
    /// `f64`: a float scalar.
    F64,
    /// `f32`: a float scalar.
    F32,
    /// `i64`: an integer scalar.
    I64,
    /// `usize`: an integer scalar.
    Usize,
    /// `bool`.
    Bool,
}

impl ParamType {
    /// Whether the parameter is a tensor (`&Tensor` or `&mut Tensor`).
    pub fn is_tensor(self) -> bool {
        matches!(self, ParamType::Tensor | ParamType::TensorMut)
    }

    /// The scalar class of a scalar parameter; `None` for tensors.
    pub fn scalar_ty(self) -> Option<ScalarTy> {
        match self {
            ParamType::Tensor | ParamType::TensorMut => None,
            ParamType::F64 | ParamType::F32 => Some(ScalarTy::Float),
            ParamType::I64 | ParamType::Usize => Some(ScalarTy::Int),
            ParamType::Bool => Some(ScalarTy::Bool),
        }
    }

    /// The type as written in the signature.
    pub fn rust_name(self) -> &'static str {
        match self {
            ParamType::Tensor => "&Tensor",
            ParamType::TensorMut => "&mut Tensor",
            ParamType::F64 => "f64",
            ParamType::F32 => "f32",
            ParamType::I64 => "i64",
            ParamType::Usize => "usize",
            ParamType::Bool => "bool",
        }
    }
}

/// One argument of a node. The receiver of a method (`a` in `a.mul_(2.0)`) is
/// the node's first argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    /// A tensor value.
    Tensor(ValueId),
    /// A scalar (a number or a bool).
    Scalar(ScalarExpr),
    /// An integer list such as the `&[2, -1]` of `view`.
    Ints(Vec<ScalarExpr>),
    /// A dtype, as in `x.to_dtype(DType::F16)`.
    DType(DType),
}

impl Arg {
    /// The tensor value, if this is a tensor argument.
    pub fn as_tensor(&self) -> Option<ValueId> {
        match self {
            Arg::Tensor(v) => Some(*v),
            _ => None,
        }
    }
    /// The expression, if this is a scalar argument.
    pub fn as_scalar(&self) -> Option<&ScalarExpr> {
        match self {
            Arg::Scalar(s) => Some(s),
            _ => None,
        }
    }
    /// The items, if this is an integer list.
    pub fn as_ints(&self) -> Option<&[ScalarExpr]> {
        match self {
            Arg::Ints(v) => Some(v),
            _ => None,
        }
    }
    /// The literal integers of an `Ints` argument, when none of them depends on a parameter.
    pub fn const_ints(&self) -> Option<Vec<i64>> {
        self.as_ints()?.iter().map(ScalarExpr::as_const_int).collect()
    }
}

/// An `f64` in JSON: a number when finite, else `"inf"`, `"-inf"` or
/// `"nan"`.
mod json_f64 {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match v {
            v if v.is_finite() => s.serialize_f64(*v),
            v if v.is_nan() => s.serialize_str("nan"),
            v if *v > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        struct F;
        impl Visitor<'_> for F {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, \"inf\", \"-inf\" or \"nan\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "inf" => Ok(f64::INFINITY),
                    "-inf" => Ok(f64::NEG_INFINITY),
                    "nan" => Ok(f64::NAN),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(F)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_eval_follows_rust_rules() {
        let e = ScalarExpr::Bin(ScalarBinOp::Mul, Box::new(ScalarExpr::Param(1)), Box::new(ScalarExpr::F64(0.5)));
        let params = [None, Some(ScalarValue::F64(0.2))];
        assert_eq!(e.eval(&params), Ok(ScalarValue::F64(0.1)));
        let d = ScalarExpr::Bin(ScalarBinOp::Div, Box::new(ScalarExpr::I64(7)), Box::new(ScalarExpr::I64(2)));
        assert_eq!(d.as_const(), Some(ScalarValue::I64(3)));
        let z = ScalarExpr::Bin(ScalarBinOp::Div, Box::new(ScalarExpr::I64(7)), Box::new(ScalarExpr::I64(0)));
        assert_eq!(z.eval(&[]), Err(ScalarError::DivByZero));
        assert_eq!(ScalarExpr::Neg(Box::new(ScalarExpr::I64(1))).as_const_int(), Some(-1));
        assert_eq!(e.ty(&[ParamType::Tensor, ParamType::F64]), Some(ScalarTy::Float));
        assert_eq!(ScalarExpr::Param(0).ty(&[ParamType::Tensor]), None);
    }

    #[test]
    fn non_finite_floats_survive_json() {
        for v in [f64::INFINITY, f64::NEG_INFINITY, 1.5, -0.0] {
            let json = serde_json::to_string(&ScalarExpr::F64(v)).expect("serialise");
            assert_eq!(serde_json::from_str::<ScalarExpr>(&json).expect("deserialise"), ScalarExpr::F64(v), "{json}");
        }
        let nan = serde_json::to_string(&ScalarExpr::F64(f64::NAN)).expect("serialise");
        assert_eq!(nan, r#"{"F64":"nan"}"#);
        assert!(matches!(serde_json::from_str(&nan), Ok(ScalarExpr::F64(v)) if v.is_nan()));
        assert!(serde_json::from_str::<ScalarExpr>(r#"{"F64":"big"}"#).is_err());
    }
}
