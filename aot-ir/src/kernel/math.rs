//! The f32 math functions of the kernel stage, written once.
//!
//! Each function is generic over [`Lanes`], the arithmetic it is written
//! in. The CPU backend instantiates it with `f32` and calls it inside loops
//! over blocks of elements, which LLVM vectorises: the code is branch-free
//! (both sides of every choice are computed, then selected) and uses only
//! operations that have vector instructions; every function is
//! `#[inline(always)]`, since a call left in the loop stops vectorisation.
//! The C renderer instantiates it
//! with [`crate::kernel::c_math::CVal`], which records the same operations
//! as C statements, so a CUDA kernel computes exactly what the CPU does (the
//! tests compile the rendered C and compare bit for bit).
//!
//! Algorithms: Cody-Waite range reduction and short polynomials (Taylor
//! series, truncated where the next term is below half an f32 ulp); `log`
//! uses the `atanh` series in `s = f/(2+f)`, and `log1p` corrects `log(1 + x)`
//! by the rounding error of `1 + x`; `erfc` is the Chebyshev fit of
//! Numerical Recipes (relative error below 1.2e-7 in exact arithmetic).
//!
//! Maximum errors against f64, in units of the last place of the correctly
//! rounded result, measured over every 31st f32 bit pattern of both signs
//! (`max_errors_over_every_f32`, release build, `AOT_MATH_STEP=31`; step 1
//! covers every f32). Results below the normal range are held to an
//! absolute error of 2^-126 instead.
//!
//! | function | max ulp | function | max ulp |
//! |---|---|---|---|
//! | `exp` | 1.20 | `sigmoid` | 2.31 |
//! | `expm1` | 2.00 | `silu` | 3.17 |
//! | `log` | 1.20 | `gelu` | 7.44 |
//! | `tanh` | 2.27 | `sin` | 2.05 |
//! | `log1p` | 1.66 | `cos` | 2.23 |
//!
//! The unit tests hold every function to these bounds (slightly rounded
//! up) on a coarser sweep and on the special values (±0, subnormals, ±inf,
//! NaN).
//!
//! `sin` and `cos` reduce their argument with a four-part `π/2`, exact for
//! `|x| <=` [`SIN_COS_LIMIT`]; beyond it a backend computes them another
//! way (the CPU in f64, CUDA with `sin(double)`), and the kernel selects.

// The split constants are written with the digits of their exact values.
#![allow(clippy::excessive_precision)]

use std::ops::{Add, Div, Mul, Neg, Sub};

/// What the math functions are written in: f32 arithmetic, comparisons and
/// selection, plus three bit-level primitives.
pub trait Lanes: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self> {
    /// The result of a comparison.
    type Mask: Copy;
    /// A constant.
    fn lit(v: f32) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
    /// `self < o` (false when either is NaN).
    fn lt(self, o: Self) -> Self::Mask;
    /// Whether `self` is NaN.
    fn is_nan(self) -> Self::Mask;
    /// `a` where `m`, else `b`.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// `2^self` for an integral `self` in `[-126, 127]`, built from bits.
    fn exp2i(self) -> Self;
    /// C's `frexp` for a positive normal float: `self = m 2^e` with `m` in
    /// `[0.5, 1)`, returned as `(m, e)` (`e` as a float).
    fn frexp(self) -> (Self, Self);
    /// The magnitude of `self` with the sign bit of `sign`.
    fn copysign(self, sign: Self) -> Self;
}

/// `1.5 * 2^23 + 127`: see `exp2i` for `f32`.
pub const EXP2I_MAGIC: f32 = 12_583_039.0;

/// `sin`/`cos` reduce exactly up to this `|x|`.
pub const SIN_COS_LIMIT: f32 = 8192.0;

#[inline(always)]
fn c<L: Lanes>(v: f32) -> L {
    L::lit(v)
}

/// `a*x^0 + b*x^1 + ...` by Horner's rule.
#[inline(always)]
fn poly<L: Lanes>(x: L, coeffs: &[f32]) -> L {
    let mut acc = c::<L>(coeffs[coeffs.len() - 1]);
    for &k in coeffs[..coeffs.len() - 1].iter().rev() {
        acc = acc * x + c(k);
    }
    acc
}

/// `x` clamped to `[lo, hi]`; NaN stays NaN.
#[inline(always)]
fn clamp<L: Lanes>(x: L, lo: f32, hi: f32) -> L {
    let x = L::select(x.lt(c(lo)), c(lo), x);
    L::select(c::<L>(hi).lt(x), c(hi), x)
}

/// Nearest integer, ties to even, for `|x| < 2^22`: adding and removing
/// `1.5 * 2^23` leaves no fraction bits (no rounding instruction needed).
#[inline(always)]
fn rint<L: Lanes>(x: L) -> L {
    const MAGIC: f32 = 12_582_912.0;
    (x + c(MAGIC)) - c(MAGIC)
}

/// `x * 2^n` for an integral `n` in `[-252, 254]`: two exact scalings, so a
/// subnormal result is rounded once.
#[inline(always)]
fn scale<L: Lanes>(x: L, n: L) -> L {
    let half = rint(n * c(0.5) - c(0.25));
    x * half.exp2i() * (n - half).exp2i()
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts; `n * LN2_HI` is exact for `|n| < 2^12`.
const LN2_HI: f32 = 0.693_115_234_375;
const LN2_LO: f32 = 3.194_618_329_871_446e-5;

/// `e^r` on `|r| <= ln2/2`, Taylor to degree 7.
#[inline(always)]
fn exp_poly<L: Lanes>(r: L) -> L {
    poly(r, &[1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0])
}

/// `e^r - 1` on `|r| <= ln2/2`, Taylor to degree 9.
#[inline(always)]
fn expm1_poly<L: Lanes>(r: L) -> L {
    let p = poly(r, &[1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362_880.0]);
    r * p
}

/// `x = n ln2 + r`, `n` integral, `|r| <= ln2/2` (for `|x| < 2^12 ln2`).
#[inline(always)]
fn reduce_ln2<L: Lanes>(x: L) -> (L, L) {
    let n = rint(x * c(LOG2E));
    (n, (x - n * c(LN2_HI)) - n * c(LN2_LO))
}

/// `e^x = p 2^n` as `(p, n)`, `p` in `[0.7, 1.42]`; NaN gives a NaN `p`.
#[inline(always)]
fn exp_parts<L: Lanes>(x: L) -> (L, L) {
    // Beyond these the result is inf or 0 anyway, and n stays in range.
    let xc = clamp(x, -104.0, 89.0);
    let (n, r) = reduce_ln2(xc);
    (L::select(x.is_nan(), x, exp_poly(r)), n)
}

/// `e^x`.
#[inline(always)]
pub fn exp<L: Lanes>(x: L) -> L {
    let (p, n) = exp_parts(x);
    scale(p, n)
}

/// `e^x - 1`, accurate near 0.
#[inline(always)]
pub fn expm1<L: Lanes>(x: L) -> L {
    let xc = clamp(x, -30.0, 89.0);
    let (n, r) = reduce_ln2(xc);
    let p = expm1_poly(r);
    // 2^n (p + 1) - 1 = 2^n p + (2^n - 1); the second term is exact for
    // |n| <= 24, and beyond that it is -1 or negligible.
    let two_n = scale(c(1.0), n);
    let small = (two_n * p) + (two_n - c(1.0));
    // For n > 24 the -1 is below the result's ulp; 2^n itself may overflow
    // (n = 128) where 2^n (p + 1) does not.
    let big = scale(p + c(1.0), n) - c(1.0);
    let y = L::select(c::<L>(24.5).lt(n), big, small);
    // Below 2^-25, x itself (which also keeps the sign of zero).
    L::select(x.abs().lt(c(2.980_232_2e-8)), x, L::select(x.is_nan(), x, y))
}

/// `ln x`; `ln 0 = -inf`, a negative `x` gives NaN.
#[inline(always)]
pub fn log<L: Lanes>(x: L) -> L {
    // Subnormals are scaled into the normal range first.
    let sub = x.lt(c(f32::MIN_POSITIVE));
    let xs = L::select(sub, x * c(33_554_432.0), x); // 2^25
    let (m, e) = xs.frexp();
    let e = L::select(sub, e - c(25.0), e);
    // m in [0.5, 1): use [sqrt(1/2), sqrt(2)) so f is small on both sides.
    let low = m.lt(c(std::f32::consts::FRAC_1_SQRT_2));
    let m = L::select(low, m + m, m);
    let k = L::select(low, e - c(1.0), e);
    let f = m - c(1.0);
    // ln(1+f) = 2 atanh(s), s = f/(2+f), |s| < 0.172: the odd series to
    // s^9, written as f - f^2/2 + s (f^2/2 + R(s^2)).
    let s = f / (f + c(2.0));
    let z = s * s;
    let r = z * poly(z, &[2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0]);
    let hfsq = c::<L>(0.5) * f * f;
    let y = k * c(LN2_HI) + ((f - hfsq + s * (hfsq + r)) + k * c(LN2_LO));
    // Above: 0 < x < inf. Else +inf and NaN give themselves, a negative x
    // NaN and a zero -inf.
    let inf = c::<L>(f32::INFINITY);
    let not_pos = L::select(x.lt(c(0.0)), c(f32::NAN), L::select(x.is_nan(), x, -inf));
    L::select(c::<L>(0.0).lt(x), L::select(x.lt(inf), y, x), not_pos)
}

/// `ln(1 + x)`, accurate near 0: `ln u` of the rounded `u = 1 + x`,
/// corrected by the rounding error of `u` (`((u - 1) - x) / u`).
#[inline(always)]
pub fn log1p<L: Lanes>(x: L) -> L {
    let u = x + c(1.0);
    let lu = log(u);
    let y = lu - ((u - c(1.0)) - x) / u;
    // u = 0, negative, inf or NaN: ln u itself (-inf, NaN, inf, NaN).
    let inf = c::<L>(f32::INFINITY);
    let y = L::select(c::<L>(0.0).lt(u), L::select(u.lt(inf), y, lu), lu);
    // Below 2^-24, x itself (which also keeps the sign of zero).
    L::select(x.abs().lt(c(5.960_464_5e-8)), x, y)
}

/// `tanh |x| = -m / (m + 2)` with `m = expm1(-2|x|) = 2^n (1 + p) - 1`,
/// with the sign of `x`. The numerator and the denominator are each formed
/// from `s = 2^n p` with one rounding, as `(1 - 2^n) - s` and
/// `(1 + 2^n) + s` (the parentheses are exact: `2^n` is a normal float, as
/// `-2|x|` lies in `[-18.2, 0]`, and beyond `2^-24` they round where the
/// result is 1 anyway), so `m`'s own rounding never enters: one scaling,
/// none of `expm1`'s overflow paths.
#[inline(always)]
pub fn tanh<L: Lanes>(x: L) -> L {
    // tanh(9.1) rounds to 1; NaN stays NaN through the clamp.
    let a = x.abs();
    let a = L::select(c::<L>(9.1).lt(a), c(9.1), a);
    let (n, r) = reduce_ln2(-(a + a));
    let two_n = n.exp2i();
    let s = two_n * expm1_poly(r);
    let t = ((c::<L>(1.0) - two_n) - s) / ((c::<L>(1.0) + two_n) + s);
    L::select(x.is_nan(), x, t.copysign(x))
}

/// `1 / (1 + e^-x)`, written so that neither side overflows or cancels:
/// with `s = e^-|x|`, `1/(1+s)` for `x >= 0` and `s/(1+s)` below.
#[inline(always)]
pub fn sigmoid<L: Lanes>(x: L) -> L {
    let s = exp(-x.abs());
    L::select(x.lt(c(0.0)), s, c(1.0)) / (c::<L>(1.0) + s)
}

/// `x * sigmoid(x)`; for `x < 0` as `x e^x / (1 + e^x)` with `x e^x`
/// scaled once, so a subnormal `e^x` costs no accuracy.
#[inline(always)]
pub fn silu<L: Lanes>(x: L) -> L {
    let (p, n) = exp_parts(-x.abs());
    let s = scale(p, n);
    // Below -104 (where exp_parts clamps) x e^x is -0, and NaN for -inf.
    let neg = L::select(x.lt(c(-104.0)), x * c(0.0), scale(x * p, n));
    L::select(x.lt(c(0.0)), neg, x) / (c::<L>(1.0) + s)
}

/// `erfc(a)` for `a >= 0`, or with `halved` `erfc(a/√2)` (Numerical
/// Recipes' Chebyshev fit, `t e^(P(t) - z^2)`, relative error 1.2e-7 in
/// exact arithmetic). The Gaussian factor is taken from `a` itself, as
/// `e^-(ah^2 s) e^-((a-ah)(a+ah) s)` with `ah` the top 12 bits of `a` (so
/// `ah^2` is exact) and `s` 1 or 1/2: `erfc z` changes by `2 z^2` times the
/// relative change of `z`, so rounding `z` or `z^2` would cost up to 200
/// ulp in the tail.
#[inline(always)]
fn erfc_core<L: Lanes>(a: L, halved: bool) -> L {
    // erfc(10.5) is below half the smallest subnormal.
    let a = clamp(a, 0.0, if halved { 14.85 } else { 10.5 });
    let split = a * c(4097.0);
    let ah = split - (split - a);
    let (hi, lo) = (ah * ah, (a - ah) * (a + ah));
    let (z, hi, lo) = if halved { (a * c(std::f32::consts::FRAC_1_SQRT_2), hi * c(0.5), lo * c(0.5)) } else { (a, hi, lo) };
    let t = c::<L>(1.0) / (c::<L>(1.0) + c::<L>(0.5) * z);
    let p = poly(
        t,
        &[
            -1.265_512_2,
            1.000_023_7,
            0.374_091_96,
            0.096_784_18,
            -0.186_288_06,
            0.278_868_07,
            -1.135_203_98,
            1.488_515_87,
            -0.822_152_23,
            0.170_872_77,
        ],
    );
    t * exp(-hi) * exp(p - lo)
}

/// `erfc z` for `z >= 0`.
#[inline(always)]
pub fn erfc_pos<L: Lanes>(z: L) -> L {
    erfc_core(z, false)
}

/// The exact (erf) GELU, `x/2 (1 + erf(x/√2))`, as `x/2 · erfc(-x/√2)` so
/// the negative tail keeps its relative accuracy.
/// Near 0 (`|x| < 1`) as `x/2 (1 + erf(x/√2))` with the Taylor series of
/// `erf`, where `2 - erfc` would lose the last bits.
#[inline(always)]
pub fn gelu<L: Lanes>(x: L) -> L {
    let e = erfc_core(x.abs(), true);
    let tail = L::select(x.lt(c(0.0)), e, c::<L>(2.0) - e);
    let z = x * c(std::f32::consts::FRAC_1_SQRT_2);
    // erf z = 2/√π Σ (-1)^k z^(2k+1) / (k! (2k+1)), to z^17 (|z| < 0.71).
    let k = std::f32::consts::FRAC_2_SQRT_PI;
    let coeffs = [k, -k / 3.0, k / 10.0, -k / 42.0, k / 216.0, -k / 1320.0, k / 9360.0, -k / 75600.0, k / 685_440.0];
    let near = c::<L>(1.0) + z * poly(z * z, &coeffs);
    let phi2 = L::select(x.abs().lt(c(1.0)), near, tail);
    c::<L>(0.5) * x * phi2
}

/// `π/2` in four parts: the first three have 11 significant bits, so their
/// products with a quadrant count below 2^13 are exact.
const PIO2: [f32; 4] = [1.570_312_5, 4.837_512_969_970_703e-4, 7.549_533_620_476_723e-8, 2.563_344_068_257_09e-12];

/// `x = k π/2 + r`, `|r| <= π/4`, for `|x| <=` [`SIN_COS_LIMIT`].
#[inline(always)]
fn reduce_pio2<L: Lanes>(x: L) -> (L, L) {
    let k = rint(x * c(std::f32::consts::FRAC_2_PI));
    let r = ((x - k * c(PIO2[0])) - k * c(PIO2[1])) - k * c(PIO2[2]);
    (k, r - k * c(PIO2[3]))
}

#[inline(always)]
fn sin_poly<L: Lanes>(r: L) -> L {
    let z = r * r;
    r + r * z * poly(z, &[-1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362_880.0])
}

#[inline(always)]
fn cos_poly<L: Lanes>(r: L) -> L {
    let z = r * r;
    c::<L>(1.0) - c::<L>(0.5) * z + z * z * poly(z, &[1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0, -1.0 / 3_628_800.0])
}

/// The quadrant `q = k mod 4` as `(q odd, q >= 2)`. For an integral `k`,
/// `rint(k/4 - 3/8)` is `floor(k/4)` (never a tie), and likewise for halves.
#[inline(always)]
fn quadrant<L: Lanes>(k: L) -> (L::Mask, L::Mask) {
    let q = k - c::<L>(4.0) * rint(k * c(0.25) - c(0.375));
    let odd = q - c::<L>(2.0) * rint(q * c(0.5) - c(0.25));
    (c::<L>(0.5).lt(odd), c::<L>(1.5).lt(q))
}

/// `sin x` for `|x| <=` [`SIN_COS_LIMIT`] (near its zeros the error is
/// absolute, below 2e-13).
#[inline(always)]
pub fn sin<L: Lanes>(x: L) -> L {
    let (k, r) = reduce_pio2(x);
    let (odd, neg) = quadrant(k);
    let v = L::select(odd, cos_poly(r), sin_poly(r));
    // Below 2^-12, sin x rounds to x (and -0 stays -0).
    L::select(x.abs().lt(c(2.441_406_3e-4)), x, L::select(neg, -v, v))
}

/// `cos x` for `|x| <=` [`SIN_COS_LIMIT`] (see [`sin`]).
#[inline(always)]
pub fn cos<L: Lanes>(x: L) -> L {
    // cos x = sin(x + π/2): quadrant k + 1.
    let (k, r) = reduce_pio2(x);
    let (odd, neg) = quadrant(k + c(1.0));
    let v = L::select(odd, cos_poly(r), sin_poly(r));
    L::select(neg, -v, v)
}

impl Lanes for f32 {
    type Mask = bool;
    #[inline(always)]
    fn lit(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn abs(self) -> f32 {
        f32::from_bits(self.to_bits() & 0x7fff_ffff)
    }
    #[inline(always)]
    fn lt(self, o: f32) -> bool {
        self < o
    }
    #[inline(always)]
    #[allow(clippy::eq_op)]
    fn is_nan(self) -> bool {
        self != self
    }
    #[inline(always)]
    fn select(m: bool, a: f32, b: f32) -> f32 {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn exp2i(self) -> f32 {
        // No float-to-int conversion (Rust's saturating one does not
        // vectorise): in [2^23, 2^24) the ulp is 1, so `n + 127` lands in
        // the low bits of `n + 127 + 1.5 * 2^23`, and the shift drops the rest.
        f32::from_bits((self + EXP2I_MAGIC).to_bits() << 23)
    }
    #[inline(always)]
    fn frexp(self) -> (f32, f32) {
        let b = self.to_bits();
        let e = ((b >> 23) & 0xff) as i32 - 126;
        (f32::from_bits((b & 0x807f_ffff) | (126 << 23)), e as f32)
    }
    #[inline(always)]
    fn copysign(self, sign: f32) -> f32 {
        f32::from_bits((self.to_bits() & 0x7fff_ffff) | (sign.to_bits() & 0x8000_0000))
    }
}

#[cfg(test)]
mod tests;
