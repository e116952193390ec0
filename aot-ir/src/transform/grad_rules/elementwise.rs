//! Rules of the elementwise ops: binary (with broadcasting undone by
//! `sum_to_like`), `where_`, and unary.

use super::{scalar_minus_one, scalar_recip, Call, GradBuilder, Grads, RuleOps};
use crate::graph::args::{f, t};
use crate::op::OpKind as K;
use crate::types::{Arg, ScalarValue, ValueId};

/// `add`, `sub`, `mul`, `div`, `pow`, `maximum`, `minimum` and `where_`.
pub(super) fn binary<B: GradBuilder>(e: &mut B, c: &Call, r: &mut Grads) -> Result<(), B::Error> {
    let (x, g) = (c.x, c.g);
    // The right operand: a tensor or a scalar.
    let rhs = c.args.get(1).cloned();
    match c.op {
        K::Add | K::Sub => {
            if c.need(0) {
                r[0] = Some(e.sum_to(g, x)?);
            }
            if let (true, Some(b)) = (c.need(1), c.tensor(1)) {
                let gb = if c.op == K::Sub { e.un(K::Neg, g)? } else { g };
                r[1] = Some(e.sum_to(gb, b)?);
            }
        }
        K::Mul => match rhs {
            Some(Arg::Tensor(b)) => {
                if c.need(0) {
                    let m = e.bin(K::Mul, g, t(b))?;
                    r[0] = Some(e.sum_to(m, x)?);
                }
                if c.need(1) {
                    let m = e.bin(K::Mul, g, t(x))?;
                    r[1] = Some(e.sum_to(m, b)?);
                }
            }
            Some(Arg::Scalar(s)) if c.need(0) => {
                let m = e.bin(K::Mul, g, Arg::Scalar(s))?;
                r[0] = Some(e.cast_like(m, x)?);
            }
            _ => {}
        },
        K::Div => match rhs {
            Some(Arg::Tensor(b)) => {
                if c.need(0) {
                    let d = e.bin(K::Div, g, t(b))?;
                    r[0] = Some(e.sum_to(d, x)?);
                }
                if c.need(1) {
                    // -g * ((x / b) / b), in PyTorch's order: in f16/bf16
                    // each step rounds, and `x / b²` rounds differently.
                    let ng = e.un(K::Neg, g)?;
                    let q = e.bin(K::Div, x, t(b))?;
                    let q = e.bin(K::Div, q, t(b))?;
                    let d = e.bin(K::Mul, ng, t(q))?;
                    r[1] = Some(e.sum_to(d, b)?);
                }
            }
            Some(Arg::Scalar(s)) if c.need(0) => {
                // eager multiplies by the reciprocal
                let m = e.bin(K::Mul, g, Arg::Scalar(scalar_recip(&s)))?;
                r[0] = Some(e.cast_like(m, x)?);
            }
            _ => {}
        },
        K::Pow => pow(e, c, rhs, r)?,
        K::Maximum | K::Minimum => max_min(e, c, rhs, r)?,
        K::Where => {
            let cond = c.tensor(1).ok_or_else(|| "`where_` needs a tensor condition".to_string())?;
            if c.need(0) {
                let w = e.op(K::Where, vec![t(g), t(cond), f(0.0)])?;
                r[0] = Some(e.sum_to(w, x)?);
            }
            if let (true, Some(o)) = (c.need(2), c.tensor(2)) {
                let z = e.un(K::ZerosLike, g)?;
                let w = e.op(K::Where, vec![t(z), t(cond), t(g)])?;
                r[2] = Some(e.sum_to(w, o)?);
            }
        }
        _ => return Err(format!("`{}` is not a binary op", c.op.name()).into()),
    }
    Ok(())
}

fn pow<B: GradBuilder>(e: &mut B, c: &Call, rhs: Option<Arg>, r: &mut Grads) -> Result<(), B::Error> {
    let (x, g) = (c.x, c.g);
    match rhs {
        Some(Arg::Tensor(b)) => {
            if c.need(0) {
                // b * x^(b-1), 0 where b == 0
                let bm1 = e.bin(K::Sub, b, f(1.0))?;
                let p = e.bin(K::Pow, x, t(bm1))?;
                let d = e.bin(K::Mul, b, t(p))?;
                let nz = e.bin(K::Ne, b, f(0.0))?;
                let d = e.op(K::Where, vec![t(d), t(nz), f(0.0)])?;
                let m = e.bin(K::Mul, g, t(d))?;
                r[0] = Some(e.sum_to(m, x)?);
            }
            if c.need(1) {
                // out * log(x), 0 where x == 0 and b >= 0
                let o = c.out.get(e)?;
                let lx = e.un(K::Log, x)?;
                let d = e.bin(K::Mul, o, t(lx))?;
                let z = e.mask(K::Eq, x, f(0.0), g)?;
                let nn = e.mask(K::Ge, b, f(0.0), g)?;
                let both = e.bin(K::Mul, z, t(nn))?;
                let keep = e.bin(K::Lt, both, f(0.5))?;
                let d = e.op(K::Where, vec![t(d), t(keep), f(0.0)])?;
                let m = e.bin(K::Mul, g, t(d))?;
                r[1] = Some(e.sum_to(m, b)?);
            }
        }
        Some(Arg::Scalar(s)) if c.need(0) => {
            r[0] = Some(if s.as_const() == Some(ScalarValue::F64(0.0)) || s.as_const_int() == Some(0) {
                e.bin(K::Mul, g, f(0.0))?
            } else {
                let p = e.bin(K::Pow, x, Arg::Scalar(scalar_minus_one(&s)))?;
                let d = e.bin(K::Mul, p, Arg::Scalar(s))?;
                e.bin(K::Mul, g, t(d))?
            });
        }
        _ => {}
    }
    Ok(())
}

/// Ties split the gradient evenly.
fn max_min<B: GradBuilder>(e: &mut B, c: &Call, rhs: Option<Arg>, r: &mut Grads) -> Result<(), B::Error> {
    let (x, g) = (c.x, c.g);
    let b = rhs.ok_or_else(|| format!("`{}` is missing its operand", c.op.name()))?;
    let win = if c.op == K::Maximum { K::Gt } else { K::Lt };
    let w = e.mask(win, x, b.clone(), g)?;
    let tie = e.mask(K::Eq, x, b.clone(), g)?;
    let half = e.bin(K::Mul, tie, f(0.5))?;
    let fa = e.bin(K::Add, w, t(half))?;
    if c.need(0) {
        let m = e.bin(K::Mul, g, t(fa))?;
        r[0] = Some(match b {
            Arg::Tensor(_) => e.sum_to(m, x)?,
            _ => m,
        });
    }
    if let (true, Some(bt)) = (c.need(1), c.tensor(1)) {
        let fb = e.one_minus(fa)?;
        let m = e.bin(K::Mul, g, t(fb))?;
        r[1] = Some(e.sum_to(m, bt)?);
    }
    Ok(())
}

/// The gradient of a unary op's receiver (`clamp_` included: its bounds
/// get none).
pub(super) fn unary<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    Ok(match c.op {
        K::Neg => e.un(K::Neg, g)?,
        K::Exp => {
            let o = c.out.get(e)?;
            e.bin(K::Mul, g, t(o))?
        }
        K::Log => e.bin(K::Div, g, t(x))?,
        K::Sqrt => {
            let o = c.out.get(e)?;
            let d = e.bin(K::Mul, o, f(2.0))?;
            e.bin(K::Div, g, t(d))?
        }
        K::Rsqrt => {
            let o = c.out.get(e)?;
            let p = e.bin(K::Pow, o, f(3.0))?;
            let d = e.bin(K::Mul, p, f(-0.5))?;
            e.bin(K::Mul, g, t(d))?
        }
        K::Abs => {
            let pos = e.mask(K::Gt, x, f(0.0), g)?;
            let neg = e.mask(K::Lt, x, f(0.0), g)?;
            let sign = e.bin(K::Sub, pos, t(neg))?;
            e.bin(K::Mul, g, t(sign))?
        }
        K::Sin => {
            let cs = e.un(K::Cos, x)?;
            e.bin(K::Mul, g, t(cs))?
        }
        K::Cos => {
            let s = e.un(K::Sin, x)?;
            let n = e.un(K::Neg, s)?;
            e.bin(K::Mul, g, t(n))?
        }
        K::Clamp | K::ClampOut => {
            // no gradient at the bounds themselves, as eager
            let lo = e.mask(K::Gt, x, c.arg(1)?, g)?;
            let hi = e.mask(K::Lt, x, c.arg(2)?, g)?;
            let keep = e.bin(K::Mul, lo, t(hi))?;
            e.bin(K::Mul, g, t(keep))?
        }
        _ => activation(e, c)?,
    })
}

/// The unary ops whose derivative is a function of their output or a
/// smooth function of their input.
fn activation<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    Ok(match c.op {
        K::Tanh | K::Sigmoid | K::Gelu | K::Silu => opmath_activation(e, c, x, g)?,
        K::Relu => {
            let o = c.out.get(e)?;
            let m = e.mask(K::Gt, o, f(0.0), g)?;
            e.bin(K::Mul, g, t(m))?
        }
        K::Reciprocal => {
            let o = c.out.get(e)?;
            let sq = e.un(K::Square, o)?;
            let n = e.un(K::Neg, sq)?;
            e.bin(K::Mul, g, t(n))?
        }
        K::Square => {
            let d = e.bin(K::Mul, x, f(2.0))?;
            e.bin(K::Mul, g, t(d))?
        }
        _ => return Err(format!("`{}` is not a unary op", c.op.name()).into()),
    })
}

/// gelu's exact gradient, as eager computes it: the normal cdf recovered as
/// `gelu(x) / x` (0.5 at 0) plus `x * pdf(x)`.
/// The activations whose backward PyTorch computes in one kernel (its
/// `tanh_backward`, `sigmoid_backward`, `gelu_backward`, `silu_backward`):
/// the formula runs on opmath operands (f32 for f16/bf16) and the result
/// is cast back, so a half-precision gradient is rounded once, as there.
fn opmath_activation<B: GradBuilder>(e: &mut B, c: &Call, x: ValueId, g: ValueId) -> Result<ValueId, B::Error> {
    let g32 = e.opmath(g)?;
    let d = match c.op {
        K::Tanh => {
            let o = c.out.get(e)?;
            let o = e.opmath(o)?;
            let sq = e.un(K::Square, o)?;
            let d = e.one_minus(sq)?;
            e.bin(K::Mul, g32, t(d))?
        }
        K::Sigmoid => {
            let o = c.out.get(e)?;
            let o = e.opmath(o)?;
            let om = e.one_minus(o)?;
            let d = e.bin(K::Mul, o, t(om))?;
            e.bin(K::Mul, g32, t(d))?
        }
        K::Gelu => {
            let x32 = e.opmath(x)?;
            gelu(e, x32, g32)?
        }
        _ => {
            let x32 = e.opmath(x)?;
            let s = e.un(K::Sigmoid, x32)?;
            let om = e.one_minus(s)?;
            let xs = e.bin(K::Mul, x32, t(om))?;
            let p1 = e.bin(K::Add, xs, f(1.0))?;
            let d = e.bin(K::Mul, s, t(p1))?;
            e.bin(K::Mul, g32, t(d))?
        }
    };
    // Back to the gradient's dtype (the op's): `g` is always at hand, while
    // eager keeps only what the rule reads (tanh's and sigmoid's result).
    e.cast_like(d, g)
}

fn gelu<B: GradBuilder>(e: &mut B, x: ValueId, g: ValueId) -> Result<ValueId, B::Error> {
    let scaled = e.bin(K::Mul, x, f(std::f64::consts::FRAC_1_SQRT_2))?;
    let gelu = e.un(K::Gelu, x)?;
    let nz = e.bin(K::Ne, x, f(0.0))?;
    let safe = e.op(K::Where, vec![t(x), t(nz), f(1.0)])?;
    let q = e.bin(K::Div, gelu, t(safe))?;
    let cdf = e.op(K::Where, vec![t(q), t(nz), f(0.5)])?;
    let sq = e.un(K::Square, scaled)?;
    let nsq = e.un(K::Neg, sq)?;
    let ex = e.un(K::Exp, nsq)?;
    let pdf = e.bin(K::Mul, ex, f(1.0 / (2.0 * std::f64::consts::PI).sqrt()))?;
    let xp = e.bin(K::Mul, x, t(pdf))?;
    let d = e.bin(K::Add, cdf, t(xp))?;
    e.bin(K::Mul, g, t(d))
}
