//! The small value types the IR is made of: value and span ids, parameter
//! types, scalar expressions, and node arguments.
//!
//! Scalars are kept as expressions rather than folded numbers because the
//! function's scalar parameters (`lr: f64`) are runtime inputs: a graph is
//! compiled once and called with many learning rates.

use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// The class of a scalar expression, used to type-check op arguments at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScalarTy {
    /// Floating point: `f64`/`f32` parameters, float literals.
    Float,
    /// Integer: `i64`/`usize` parameters, integer literals, sizes.
    Int,
    /// `bool`.
    Bool,
}

impl ScalarTy {
    /// The class's name in type errors (`float`, `integer`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            ScalarTy::Float => "float",
            ScalarTy::Int => "integer",
            ScalarTy::Bool => "bool",
        }
    }
}

/// Arithmetic between scalars (`lr * 0.5`), evaluated at call time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScalarBinOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (between integers, truncated toward zero as in Rust).
    Div,
}

impl ScalarBinOp {
    /// The operator as written, for listings and errors.
    pub fn symbol(self) -> &'static str {
        match self {
            ScalarBinOp::Add => "+",
            ScalarBinOp::Sub => "-",
            ScalarBinOp::Mul => "*",
            ScalarBinOp::Div => "/",
        }
    }
}

/// A scalar: a literal, a scalar parameter (by its position in the
/// signature), or arithmetic over them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ScalarExpr {
    /// Non-finite values are written as strings: JSON has no number for
    /// them (`-f64::INFINITY` in a body would otherwise become `null`).
    F64(#[serde(with = "json_f64")] f64),
    /// An integer literal.
    I64(i64),
    /// A bool literal.
    Bool(bool),
    /// The scalar parameter at this position of the signature.
    Param(usize),
    /// `-e`.
    Neg(Box<ScalarExpr>),
    /// `a op b`.
    Bin(ScalarBinOp, Box<ScalarExpr>, Box<ScalarExpr>),
    /// `expr as f64` / `expr as i64` (and the other numeric casts, folded onto these two).
    Cast(ScalarTy, Box<ScalarExpr>),
    /// A method of Rust's numbers on scalars (`b2.powi(t)`, `x.sqrt()`,
    /// `a.max(b)`): the receiver first, then the arguments.
    Fn(ScalarFn, Vec<ScalarExpr>),
    /// `x.size(dim)` of the tensor parameter `param`, read from the call's
    /// argument: the call's scalar values hold it at `slot` (after the
    /// parameters; see `Graph::sizes`).
    Size {
        /// The tensor parameter's position in the signature.
        param: usize,
        /// The dim as written (negative counts from the end).
        dim: i64,
        /// Where the call's scalar values hold the size: `params.len() + k` for
        /// entry `k` of `Graph::sizes` (`k` until `GraphBuilder::finish`).
        slot: usize,
    },
    /// `v.size(dim)` of a tensor the body computes (or reshaped in place):
    /// entry `read` of `Graph::value_sizes`,
    /// held at `slot` of the call's scalar values (after the parameters'
    /// sizes), where the runtime's shape propagation puts it.
    ValueSize {
        /// The entry of `Graph::value_sizes`.
        read: usize,
        /// Where the call's scalar values hold the size (set by
        /// `GraphBuilder::finish`).
        slot: usize,
    },
}

/// The methods of Rust's `f64`/`i64` that the DSL evaluates on scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScalarFn {
    /// `x.sqrt()`.
    Sqrt,
    /// `x.exp()`.
    Exp,
    /// `x.ln()`, the natural logarithm.
    Ln,
    /// `x.log2()`.
    Log2,
    /// `x.log10()`.
    Log10,
    /// `x.sin()`.
    Sin,
    /// `x.cos()`.
    Cos,
    /// `x.tan()`.
    Tan,
    /// `x.tanh()`.
    Tanh,
    /// `x.floor()`.
    Floor,
    /// `x.ceil()`.
    Ceil,
    /// `x.round()` (half away from zero).
    Round,
    /// `x.recip()`: `1 / x`.
    Recip,
    /// `x.abs()`; an integer stays an integer.
    Abs,
    /// `x.powi(n)`: an integer exponent.
    Powi,
    /// `x.powf(y)`: a float exponent.
    Powf,
    /// `a.min(b)`; integers stay integers.
    Min,
    /// `a.max(b)`; integers stay integers.
    Max,
}

impl ScalarFn {
    /// Every function, for name lookups and the docs.
    pub const ALL: [ScalarFn; 18] = [
        ScalarFn::Sqrt,
        ScalarFn::Exp,
        ScalarFn::Ln,
        ScalarFn::Log2,
        ScalarFn::Log10,
        ScalarFn::Sin,
        ScalarFn::Cos,
        ScalarFn::Tan,
        ScalarFn::Tanh,
        ScalarFn::Floor,
        ScalarFn::Ceil,
        ScalarFn::Round,
        ScalarFn::Recip,
        ScalarFn::Abs,
        ScalarFn::Powi,
        ScalarFn::Powf,
        ScalarFn::Min,
        ScalarFn::Max,
    ];

    /// The Rust method name.
    pub fn name(self) -> &'static str {
        match self {
            ScalarFn::Sqrt => "sqrt",
            ScalarFn::Exp => "exp",
            ScalarFn::Ln => "ln",
            ScalarFn::Log2 => "log2",
            ScalarFn::Log10 => "log10",
            ScalarFn::Sin => "sin",
            ScalarFn::Cos => "cos",
            ScalarFn::Tan => "tan",
            ScalarFn::Tanh => "tanh",
            ScalarFn::Floor => "floor",
            ScalarFn::Ceil => "ceil",
            ScalarFn::Round => "round",
            ScalarFn::Recip => "recip",
            ScalarFn::Abs => "abs",
            ScalarFn::Powi => "powi",
            ScalarFn::Powf => "powf",
            ScalarFn::Min => "min",
            ScalarFn::Max => "max",
        }
    }

    /// Looks a function up by its Rust method name.
    pub fn from_name(name: &str) -> Option<ScalarFn> {
        ScalarFn::ALL.into_iter().find(|f| f.name() == name)
    }

    /// How many arguments besides the receiver.
    pub fn arity(self) -> usize {
        match self {
            ScalarFn::Powi | ScalarFn::Powf | ScalarFn::Min | ScalarFn::Max => 1,
            _ => 0,
        }
    }

    /// The result class for these argument classes (receiver first);
    /// `None` when Rust would not accept them (`powi` on an integer).
    pub fn result_ty(self, args: &[ScalarTy]) -> Option<ScalarTy> {
        use ScalarTy::{Bool, Float, Int};
        if args.contains(&Bool) || args.len() != self.arity() + 1 {
            return None;
        }
        match self {
            // Rust's `abs`, `min`, `max` keep integers integers.
            ScalarFn::Abs if args[0] == Int => Some(Int),
            ScalarFn::Min | ScalarFn::Max if args[0] == Int && args[1] == Int => Some(Int),
            ScalarFn::Powi if args[1] != Int => None,
            _ => Some(Float),
        }
    }

    fn eval(self, args: &[ScalarValue]) -> Result<ScalarValue, ScalarError> {
        use ScalarValue as V;
        let bad =
            || ScalarError::BadOperands { op: self.name(), lhs: args.first().map_or("nothing", |v| v.ty().name()), rhs: "its arguments" };
        let f = |v: ScalarValue| match v {
            V::F64(x) => Ok(x),
            V::I64(x) => Ok(x as f64),
            V::Bool(_) => Err(bad()),
        };
        Ok(match (self, args) {
            (ScalarFn::Abs, [V::I64(x)]) => V::I64(x.checked_abs().ok_or(ScalarError::Overflow)?),
            (ScalarFn::Min, [V::I64(x), V::I64(y)]) => V::I64(*x.min(y)),
            (ScalarFn::Max, [V::I64(x), V::I64(y)]) => V::I64(*x.max(y)),
            // Rust's `powi` takes an `i32`; larger exponents saturate (the
            // result is 0, 1 or infinite long before that matters).
            (ScalarFn::Powi, [x, V::I64(n)]) => V::F64(f(*x)?.powi((*n).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)),
            (ScalarFn::Powf, [x, y]) => V::F64(f(*x)?.powf(f(*y)?)),
            (ScalarFn::Min, [x, y]) => V::F64(f(*x)?.min(f(*y)?)),
            (ScalarFn::Max, [x, y]) => V::F64(f(*x)?.max(f(*y)?)),
            (unary, [x]) if unary.arity() == 0 => {
                let x = f(*x)?;
                V::F64(match unary {
                    ScalarFn::Sqrt => x.sqrt(),
                    ScalarFn::Exp => x.exp(),
                    ScalarFn::Ln => x.ln(),
                    ScalarFn::Log2 => x.log2(),
                    ScalarFn::Log10 => x.log10(),
                    ScalarFn::Sin => x.sin(),
                    ScalarFn::Cos => x.cos(),
                    ScalarFn::Tan => x.tan(),
                    ScalarFn::Tanh => x.tanh(),
                    ScalarFn::Floor => x.floor(),
                    ScalarFn::Ceil => x.ceil(),
                    ScalarFn::Round => x.round(),
                    ScalarFn::Recip => x.recip(),
                    _ => x.abs(),
                })
            }
            _ => return Err(bad()),
        })
    }
}

/// A scalar computed at call time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarValue {
    /// A float.
    F64(f64),
    /// An integer.
    I64(i64),
    /// A bool.
    Bool(bool),
}

impl ScalarValue {
    /// The value's class.
    pub fn ty(self) -> ScalarTy {
        match self {
            ScalarValue::F64(_) => ScalarTy::Float,
            ScalarValue::I64(_) => ScalarTy::Int,
            ScalarValue::Bool(_) => ScalarTy::Bool,
        }
    }
}

impl fmt::Display for ScalarValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarValue::F64(v) => write!(f, "{v:?}"),
            ScalarValue::I64(v) => write!(f, "{v}"),
            ScalarValue::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// Why a scalar expression could not be evaluated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScalarError {
    /// No scalar in the call's values at this position (a parameter
    /// position, or a size slot).
    #[error("scalar parameter {0} is missing or not a scalar")]
    MissingParam(usize),
    /// An operator or function applied to operands of the wrong class
    /// (arithmetic on a bool).
    #[error("cannot apply `{op}` to {lhs} and {rhs}")]
    BadOperands {
        /// The operator or function.
        op: &'static str,
        /// The class of the left operand (the receiver).
        lhs: &'static str,
        /// The class of the right operand, or "its arguments".
        rhs: &'static str,
    },
    /// Integer arithmetic overflowed `i64`.
    #[error("integer overflow in scalar arithmetic")]
    Overflow,
    /// An integer divided by zero.
    #[error("integer division by zero")]
    DivByZero,
    /// A cast between a bool and a number.
    #[error("cannot cast a bool to a number")]
    BadCast,
}

impl ScalarExpr {
    /// The static class of the expression, given the signature's parameter
    /// types; `None` when a parameter index is not a scalar parameter.
    pub fn ty(&self, params: &[ParamType]) -> Option<ScalarTy> {
        Some(match self {
            ScalarExpr::F64(_) => ScalarTy::Float,
            ScalarExpr::I64(_) => ScalarTy::Int,
            ScalarExpr::Bool(_) => ScalarTy::Bool,
            ScalarExpr::Param(i) => params.get(*i)?.scalar_ty()?,
            ScalarExpr::Neg(e) => e.ty(params)?,
            ScalarExpr::Bin(_, a, b) => match (a.ty(params)?, b.ty(params)?) {
                (ScalarTy::Int, ScalarTy::Int) => ScalarTy::Int,
                (ScalarTy::Bool, _) | (_, ScalarTy::Bool) => ScalarTy::Bool,
                _ => ScalarTy::Float,
            },
            ScalarExpr::Cast(t, _) => *t,
            ScalarExpr::Fn(f, args) => f.result_ty(&args.iter().map(|a| a.ty(params)).collect::<Option<Vec<_>>>()?)?,
            ScalarExpr::Size { .. } | ScalarExpr::ValueSize { .. } => ScalarTy::Int,
        })
    }

    /// Evaluates the expression with the call's scalar arguments, indexed by
    /// parameter position (`None` at tensor positions).
    pub fn eval(&self, params: &[Option<ScalarValue>]) -> Result<ScalarValue, ScalarError> {
        use ScalarValue as V;
        Ok(match self {
            ScalarExpr::F64(v) => V::F64(*v),
            ScalarExpr::I64(v) => V::I64(*v),
            ScalarExpr::Bool(v) => V::Bool(*v),
            ScalarExpr::Param(i) => params.get(*i).copied().flatten().ok_or(ScalarError::MissingParam(*i))?,
            ScalarExpr::Neg(e) => match e.eval(params)? {
                V::F64(v) => V::F64(-v),
                V::I64(v) => V::I64(v.checked_neg().ok_or(ScalarError::Overflow)?),
                V::Bool(_) => return Err(ScalarError::BadOperands { op: "-", lhs: "bool", rhs: "bool" }),
            },
            ScalarExpr::Bin(op, a, b) => eval_bin(*op, a.eval(params)?, b.eval(params)?)?,
            ScalarExpr::Cast(t, e) => match (t, e.eval(params)?) {
                (ScalarTy::Float, V::F64(v)) => V::F64(v),
                (ScalarTy::Float, V::I64(v)) => V::F64(v as f64),
                // `as` saturates in Rust; the DSL follows Rust's rule.
                (ScalarTy::Int, V::F64(v)) => V::I64(v as i64),
                (ScalarTy::Int, V::I64(v)) => V::I64(v),
                (ScalarTy::Bool, V::Bool(v)) => V::Bool(v),
                _ => return Err(ScalarError::BadCast),
            },
            ScalarExpr::Fn(f, args) => f.eval(&args.iter().map(|a| a.eval(params)).collect::<Result<Vec<_>, _>>()?)?,
            ScalarExpr::Size { param, slot, .. } => match params.get(*slot).copied().flatten() {
                Some(v @ V::I64(_)) => v,
                _ => return Err(ScalarError::MissingParam(*param)),
            },
            ScalarExpr::ValueSize { slot, .. } => match params.get(*slot).copied().flatten() {
                Some(v @ V::I64(_)) => v,
                _ => return Err(ScalarError::MissingParam(*slot)),
            },
        })
    }

    /// The value when the expression uses no parameter (a literal, `-1`, `2 * 3`).
    pub fn as_const(&self) -> Option<ScalarValue> {
        self.eval(&[]).ok()
    }

    /// The literal integer, when the expression is a constant integer.
    pub fn as_const_int(&self) -> Option<i64> {
        match self.as_const()? {
            ScalarValue::I64(v) => Some(v),
            _ => None,
        }
    }
}

fn eval_bin(op: ScalarBinOp, a: ScalarValue, b: ScalarValue) -> Result<ScalarValue, ScalarError> {
    use ScalarValue as V;
    let name = |v: ScalarValue| v.ty().name();
    match (a, b) {
        (V::I64(x), V::I64(y)) => {
            let r = match op {
                ScalarBinOp::Add => x.checked_add(y),
                ScalarBinOp::Sub => x.checked_sub(y),
                ScalarBinOp::Mul => x.checked_mul(y),
                ScalarBinOp::Div => {
                    if y == 0 {
                        return Err(ScalarError::DivByZero);
                    }
                    x.checked_div(y)
                }
            };
            r.map(V::I64).ok_or(ScalarError::Overflow)
        }
        (V::Bool(_), _) | (_, V::Bool(_)) => Err(ScalarError::BadOperands { op: op.symbol(), lhs: name(a), rhs: name(b) }),
        _ => {
            let f = |v: ScalarValue| match v {
                V::F64(x) => x,
                V::I64(x) => x as f64,
                V::Bool(_) => 0.0,
            };
            let (x, y) = (f(a), f(b));
            Ok(V::F64(match op {
                ScalarBinOp::Add => x + y,
                ScalarBinOp::Sub => x - y,
                ScalarBinOp::Mul => x * y,
                ScalarBinOp::Div => x / y,
            }))
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
