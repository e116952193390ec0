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
//! - f64 takes std's, and `erf`/`erfc` from [`super::erf`];
//! - a scalar operand is rounded to the compute type first.
//!
//! The ops that are not float arithmetic have their one definition in
//! `elementwise/compare_int_bool.rs`, each with its C: [`compare`] (eq ne lt le gt
//! ge, in any compute type, giving bool), [`IntOp`] (the integer
//! arithmetic that is exact in i64, wrapping on overflow as eager does,
//! and PyTorch's integer `pow`) and [`BoolOp`] (bool `add`/`maximum` is
//! or, `mul`/`minimum` is and).

use super::math::{self, Lanes};
use crate::op::OpKind;
use std::ops::{Add, Div, Mul, Neg, Sub};

mod compare_int_bool;
pub use compare_int_bool::{compare, comparison_c_op, int_pow, BoolOp, IntOp, INT_POW_C};

/// A compute type of kernels: plain arithmetic plus the functions the ops
/// need.
pub trait Compute: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self> {
    /// `v` rounded to this type (how a scalar operand enters an op).
    fn of(v: f64) -> Self;
    /// `√self`.
    fn sqrt(self) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
    /// `self` to the power `e`.
    fn pow(self, e: Self) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// The natural logarithm.
    fn log(self) -> Self;
    /// `ln(1 + self)`, accurate near 0.
    fn log1p(self) -> Self;
    /// `e^self - 1`, accurate near 0.
    fn expm1(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `1 / (1 + e^-self)`.
    fn sigmoid(self) -> Self;
    /// `self * sigmoid(self)`.
    fn silu(self) -> Self;
    /// The exact (erf) GELU, PyTorch's default: `self/2 (1 + erf(self/√2))`.
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
    /// `sin` of an argument that is not slow.
    fn sin_fast(self) -> Self {
        self.sin()
    }
    /// `sin` of a slow argument.
    fn sin_slow(self) -> Self {
        self.sin()
    }
    /// `cos` of an argument that is not slow.
    fn cos_fast(self) -> Self {
        self.cos()
    }
    /// `cos` of a slow argument.
    fn cos_slow(self) -> Self {
        self.cos()
    }
}

/// Receives the function of an op from [`with_op`].
pub trait OpVisitor<C: Compute> {
    /// What the visit returns.
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
            0.5 * self * (1.0 + super::erf::erf(self * k))
        } else {
            0.5 * self * super::erf::erfc(-self * k)
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
