//! The one definition of every elementwise op a kernel computes.
//!
//! [`with_op`] hands a visitor the function of an op, as a generic closure
//! over the compute type [`Compute`]. The CPU backend's visitor runs it in
//! a loop over a block of plain floats (one monomorphic, vectorisable loop
//! per op); the C renderer's visitor calls it once on [`super::c_math::CVal`]s,
//! which records the same operations as C. So an op's arithmetic is
//! written here once, for every backend, and matches the eager kernels:
//!
//! - f32 (and f16/bf16, which compute in f32 and round after every op, as
//!   eager does) takes its transcendental functions from [`super::math`];
//! - f64 takes std's, and `erf`/`erfc` from [`super::special`];
//! - a scalar operand is rounded to the compute type first.
//!
//! The ops that are not float arithmetic have their one definition here as
//! well, each with its C: [`Comparison`] (eq ne lt le gt ge, in any
//! compute type, giving bool), [`IntOp`] (the integer arithmetic that is
//! exact in i64, wrapping on overflow as eager does) and [`BoolOp`] (bool
//! `add`/`maximum` is or, `mul`/`minimum` is and).

use super::math::{self, Lanes};
use crate::op::OpKind;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A compute type of kernels: plain arithmetic plus the functions the ops
/// need.
pub trait Compute: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self> {
    /// `v` rounded to this type (how a scalar operand enters an op).
    fn of(v: f64) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn pow(self, e: Self) -> Self;
    fn exp(self) -> Self;
    fn log(self) -> Self;
    fn log1p(self) -> Self;
    fn expm1(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    fn silu(self) -> Self;
    fn gelu(self) -> Self;
    /// `self` if `keep`, else `other`, with `keep` = `self` is NaN or
    /// `self >= other` (`torch.maximum`: NaN wins).
    fn max_nan(self, other: Self) -> Self;
    /// As [`max_nan`](Self::max_nan), with `self <= other`.
    fn min_nan(self, other: Self) -> Self;
    /// `0` where `self <= 0`, else `self` (NaN stays NaN).
    fn relu(self) -> Self;
    /// Whether `sin`/`cos` of `self` take their slow path (a rare, large
    /// argument); `sin` is `if trig_is_slow { sin_slow } else { sin_fast }`.
    fn trig_is_slow(self) -> bool {
        false
    }
    fn sin_fast(self) -> Self {
        self.sin()
    }
    fn sin_slow(self) -> Self {
        self.sin()
    }
    fn cos_fast(self) -> Self {
        self.cos()
    }
    fn cos_slow(self) -> Self {
        self.cos()
    }
}

/// Receives the function of an op from [`with_op`].
pub trait OpVisitor<C: Compute> {
    type Out;
    /// `f(a, b)`: the op's value at one position; unary ops ignore `b`.
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F) -> Self::Out;

    /// `slow(a)` where `rare(a)`, else `f(a, b)`. A visitor over many
    /// elements may run `f` over all of them (one branch-free loop) and fix
    /// up the rare ones after.
    fn visit_rare<F, R, S>(self, f: F, rare: R, slow: S) -> Self::Out
    where
        Self: Sized,
        F: Fn(C, C) -> C + Copy + Send + Sync,
        R: Fn(C) -> bool + Copy + Send + Sync,
        S: Fn(C) -> C + Copy + Send + Sync,
    {
        self.visit(
            #[inline(always)]
            move |a, b| if rare(a) { slow(a) } else { f(a, b) },
        )
    }
}

/// `v.visit(f)` with the function of `op`; `None` for an op that is not
/// elementwise ([`super::is_elementwise`]).
#[inline(always)]
pub fn with_op<C: Compute, V: OpVisitor<C>>(op: OpKind, v: V) -> Option<V::Out> {
    use OpKind as K;
    match op {
        K::Add | K::Sub | K::Mul | K::Div | K::Pow | K::Maximum | K::Minimum => Some(with_binary(op, v)),
        _ => with_unary(op, v),
    }
}

/// [`with_op`] of the binary ops.
#[inline(always)]
fn with_binary<C: Compute, V: OpVisitor<C>>(op: OpKind, v: V) -> V::Out {
    use OpKind as K;
    match op {
        K::Add => v.visit(
            #[inline(always)]
            |a: C, b: C| a + b,
        ),
        K::Sub => v.visit(
            #[inline(always)]
            |a: C, b: C| a - b,
        ),
        K::Mul => v.visit(
            #[inline(always)]
            |a: C, b: C| a * b,
        ),
        K::Div => v.visit(
            #[inline(always)]
            |a: C, b: C| a / b,
        ),
        K::Pow => v.visit(
            #[inline(always)]
            |a: C, b: C| a.pow(b),
        ),
        K::Maximum => v.visit(
            #[inline(always)]
            |a: C, b: C| a.max_nan(b),
        ),
        // `Minimum`: `with_op` routes only the binary ops here
        _ => v.visit(
            #[inline(always)]
            |a: C, b: C| a.min_nan(b),
        ),
    }
}

/// [`with_op`] of the unary ops; `None` for an op that is not elementwise.
#[inline(always)]
fn with_unary<C: Compute, V: OpVisitor<C>>(op: OpKind, v: V) -> Option<V::Out> {
    use OpKind as K;
    Some(match op {
        K::Neg => v.visit(
            #[inline(always)]
            |a: C, _| -a,
        ),
        K::Exp => v.visit(
            #[inline(always)]
            |a: C, _| a.exp(),
        ),
        K::Log => v.visit(
            #[inline(always)]
            |a: C, _| a.log(),
        ),
        K::Sqrt => v.visit(
            #[inline(always)]
            |a: C, _| a.sqrt(),
        ),
        K::Rsqrt => v.visit(
            #[inline(always)]
            |a: C, _| C::of(1.0) / a.sqrt(),
        ),
        K::Abs => v.visit(
            #[inline(always)]
            |a: C, _| a.abs(),
        ),
        K::Sin => v.visit_rare(
            #[inline(always)]
            |a: C, _| a.sin_fast(),
            C::trig_is_slow,
            C::sin_slow,
        ),
        K::Cos => v.visit_rare(
            #[inline(always)]
            |a: C, _| a.cos_fast(),
            C::trig_is_slow,
            C::cos_slow,
        ),
        K::Tanh => v.visit(
            #[inline(always)]
            |a: C, _| a.tanh(),
        ),
        K::Sigmoid => v.visit(
            #[inline(always)]
            |a: C, _| a.sigmoid(),
        ),
        K::Relu => v.visit(
            #[inline(always)]
            |a: C, _| a.relu(),
        ),
        K::Gelu => v.visit(
            #[inline(always)]
            |a: C, _| a.gelu(),
        ),
        K::Silu => v.visit(
            #[inline(always)]
            |a: C, _| a.silu(),
        ),
        K::Reciprocal => v.visit(
            #[inline(always)]
            |a: C, _| C::of(1.0) / a,
        ),
        K::Square => v.visit(
            #[inline(always)]
            |a: C, _| a * a,
        ),
        K::Log1p => v.visit(
            #[inline(always)]
            |a: C, _| a.log1p(),
        ),
        K::Expm1 => v.visit(
            #[inline(always)]
            |a: C, _| a.expm1(),
        ),
        _ => return None,
    })
}

/// A comparison: IEEE semantics on floats (NaN is unequal to everything,
/// and neither less nor greater), `false < true` on bools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// The comparison `op` computes, if it is one.
    pub fn of(op: OpKind) -> Option<Comparison> {
        Some(match op {
            OpKind::Eq => Comparison::Eq,
            OpKind::Ne => Comparison::Ne,
            OpKind::Lt => Comparison::Lt,
            OpKind::Le => Comparison::Le,
            OpKind::Gt => Comparison::Gt,
            OpKind::Ge => Comparison::Ge,
            _ => return None,
        })
    }

    /// `a <op> b`.
    #[inline(always)]
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Comparison::Eq => a == b,
            Comparison::Ne => a != b,
            Comparison::Lt => a < b,
            Comparison::Le => a <= b,
            Comparison::Gt => a > b,
            Comparison::Ge => a >= b,
        }
    }

    /// The C operator (the same semantics on `float`, `double`, `long
    /// long` and `bool`).
    pub fn c_op(self) -> &'static str {
        match self {
            Comparison::Eq => "==",
            Comparison::Ne => "!=",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        }
    }
}

/// Integer (i64) arithmetic a kernel computes exactly: eager's integer
/// kernels, wrapping on overflow. (Integer `div` and the float functions
/// promote to f32, as eager does.) `Pow` is PyTorch's integer power; eager
/// refuses a negative scalar exponent before any kernel runs, so kernels
/// of compiled calls take only tensor exponents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    Maximum,
    Minimum,
    Neg,
    Abs,
    Square,
    Relu,
    Pow,
}

impl IntOp {
    /// The integer op `op` computes on i64 operands, if it keeps them i64.
    pub fn of(op: OpKind) -> Option<IntOp> {
        Some(match op {
            OpKind::Add => IntOp::Add,
            OpKind::Sub => IntOp::Sub,
            OpKind::Mul => IntOp::Mul,
            OpKind::Maximum => IntOp::Maximum,
            OpKind::Minimum => IntOp::Minimum,
            OpKind::Neg => IntOp::Neg,
            OpKind::Abs => IntOp::Abs,
            OpKind::Square => IntOp::Square,
            OpKind::Relu => IntOp::Relu,
            OpKind::Pow => IntOp::Pow,
            _ => return None,
        })
    }

    /// Whether the op reads a second operand.
    pub fn is_binary(self) -> bool {
        matches!(self, IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::Maximum | IntOp::Minimum | IntOp::Pow)
    }

    /// The op at one position (`b` ignored by unary ops).
    #[inline(always)]
    pub fn eval(self, a: i64, b: i64) -> i64 {
        match self {
            IntOp::Add => a.wrapping_add(b),
            IntOp::Sub => a.wrapping_sub(b),
            IntOp::Mul => a.wrapping_mul(b),
            IntOp::Maximum => a.max(b),
            IntOp::Minimum => a.min(b),
            IntOp::Neg => a.wrapping_neg(),
            IntOp::Abs => a.wrapping_abs(),
            IntOp::Square => a.wrapping_mul(a),
            IntOp::Relu => a.max(0),
            IntOp::Pow => int_pow(a, b),
        }
    }

    /// The op as a C expression of the `long long` expressions `a` and
    /// `b`. Wrapping arithmetic goes through `unsigned long long`, where
    /// C defines it (signed overflow is undefined).
    pub fn c_expr(self, a: &str, b: &str) -> String {
        let u = |x: &str| format!("(unsigned long long)({x})");
        match self {
            IntOp::Add => format!("(long long)({} + {})", u(a), u(b)),
            IntOp::Sub => format!("(long long)({} - {})", u(a), u(b)),
            IntOp::Mul => format!("(long long)({} * {})", u(a), u(b)),
            IntOp::Maximum => format!("({a} >= {b} ? {a} : {b})"),
            IntOp::Minimum => format!("({a} <= {b} ? {a} : {b})"),
            IntOp::Neg => format!("(long long)(0ULL - {})", u(a)),
            IntOp::Abs => format!("({a} < 0 ? (long long)(0ULL - {}) : {a})", u(a)),
            IntOp::Square => format!("(long long)({} * {})", u(a), u(a)),
            IntOp::Relu => format!("({a} > 0 ? {a} : 0LL)"),
            // a loop: the renderer adds the function (`INT_POW_C`)
            IntOp::Pow => format!("aot_int_pow({a}, {b})"),
        }
    }
}

/// PyTorch's integer `pow`: a negative exponent gives `1` for base 1, `+-1`
/// for base -1 and 0 otherwise (base 0 included); an overflowing power
/// wraps (square-and-multiply, as [`INT_POW_C`]).
#[inline(always)]
pub fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 if exp % 2 != 0 => -1,
            -1 => 1,
            _ => 0,
        };
    }
    let (mut acc, mut b, mut e) = (1i64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    acc
}

/// [`int_pow`] in C, wrapping through `unsigned long long`.
pub const INT_POW_C: &str = "static __device__ __forceinline__ long long aot_int_pow(long long base, long long exp) {
    if (exp < 0) return base == 1 ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
    unsigned long long acc = 1ULL, b = (unsigned long long)base;
    while (exp > 0) {
        if (exp & 1) acc *= b;
        b *= b;
        exp >>= 1;
    }
    return (long long)acc;
}
";

/// Bool arithmetic: eager computes `add`/`maximum` of bools as or and
/// `mul`/`minimum` as and (the rest of arithmetic is an error on bools).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    Or,
    And,
}

impl BoolOp {
    pub fn of(op: OpKind) -> Option<BoolOp> {
        match op {
            OpKind::Add | OpKind::Maximum => Some(BoolOp::Or),
            OpKind::Mul | OpKind::Minimum => Some(BoolOp::And),
            _ => None,
        }
    }

    #[inline(always)]
    pub fn eval(self, a: bool, b: bool) -> bool {
        match self {
            BoolOp::Or => a | b,
            BoolOp::And => a & b,
        }
    }

    /// The op as a C expression of the `bool` expressions `a` and `b`.
    pub fn c_expr(self, a: &str, b: &str) -> String {
        match self {
            BoolOp::Or => format!("({a} || {b})"),
            BoolOp::And => format!("({a} && {b})"),
        }
    }
}

impl Compute for f32 {
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    #[inline(always)]
    fn pow(self, e: f32) -> f32 {
        self.powf(e)
    }
    #[inline(always)]
    fn exp(self) -> f32 {
        math::exp(self)
    }
    #[inline(always)]
    fn log(self) -> f32 {
        math::log(self)
    }
    #[inline(always)]
    fn log1p(self) -> f32 {
        math::log1p(self)
    }
    #[inline(always)]
    fn expm1(self) -> f32 {
        math::expm1(self)
    }
    /// Beyond [`math::SIN_COS_LIMIT`] the reduction in f32 loses the
    /// argument: computed in f64 there (a branch the vector loop keeps
    /// out of its common path).
    #[inline(always)]
    fn sin(self) -> f32 {
        if Lanes::abs(self) > math::SIN_COS_LIMIT {
            (self as f64).sin() as f32
        } else {
            math::sin(self)
        }
    }
    #[inline(always)]
    fn cos(self) -> f32 {
        if Lanes::abs(self) > math::SIN_COS_LIMIT {
            (self as f64).cos() as f32
        } else {
            math::cos(self)
        }
    }
    #[inline(always)]
    fn tanh(self) -> f32 {
        math::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> f32 {
        math::sigmoid(self)
    }
    #[inline(always)]
    fn silu(self) -> f32 {
        math::silu(self)
    }
    #[inline(always)]
    fn gelu(self) -> f32 {
        math::gelu(self)
    }
    #[inline(always)]
    fn max_nan(self, o: f32) -> f32 {
        if self.is_nan() || self >= o {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn min_nan(self, o: f32) -> f32 {
        if self.is_nan() || self <= o {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn relu(self) -> f32 {
        if self <= 0.0 {
            0.0
        } else {
            self
        }
    }
    #[inline(always)]
    fn trig_is_slow(self) -> bool {
        Lanes::abs(self) > math::SIN_COS_LIMIT
    }
    #[inline(always)]
    fn sin_fast(self) -> f32 {
        math::sin(self)
    }
    fn sin_slow(self) -> f32 {
        (self as f64).sin() as f32
    }
    #[inline(always)]
    fn cos_fast(self) -> f32 {
        math::cos(self)
    }
    fn cos_slow(self) -> f32 {
        (self as f64).cos() as f32
    }
}

impl Compute for f64 {
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    #[inline(always)]
    fn pow(self, e: f64) -> f64 {
        self.powf(e)
    }
    #[inline(always)]
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    #[inline(always)]
    fn log(self) -> f64 {
        f64::ln(self)
    }
    #[inline(always)]
    fn log1p(self) -> f64 {
        f64::ln_1p(self)
    }
    #[inline(always)]
    fn expm1(self) -> f64 {
        f64::exp_m1(self)
    }
    #[inline(always)]
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> f64 {
        f64::cos(self)
    }
    #[inline(always)]
    fn tanh(self) -> f64 {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    #[inline(always)]
    fn silu(self) -> f64 {
        self / (1.0 + (-self).exp())
    }
    /// `0.5 x (1 + erf(x/sqrt 2))`; for negative x as `0.5 x erfc(-x/sqrt 2)`,
    /// which avoids the cancellation in `1 + erf`.
    #[inline(always)]
    fn gelu(self) -> f64 {
        let k = std::f64::consts::FRAC_1_SQRT_2;
        if self >= 0.0 {
            0.5 * self * (1.0 + super::special::erf(self * k))
        } else {
            0.5 * self * super::special::erfc(-self * k)
        }
    }
    #[inline(always)]
    fn max_nan(self, o: f64) -> f64 {
        if self.is_nan() || self >= o {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn min_nan(self, o: f64) -> f64 {
        if self.is_nan() || self <= o {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn relu(self) -> f64 {
        if self <= 0.0 {
            0.0
        } else {
            self
        }
    }
}
