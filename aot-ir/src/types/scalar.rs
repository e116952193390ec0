//! Scalar expressions of the IR: the values a body computes from scalar
//! parameters and sizes (`n * 2`, `x.size(1) / heads`), their types, and
//! their evaluation at call time.

use super::json_f64;
use super::ParamType;
use serde::{Deserialize, Serialize};
use std::fmt;

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
