//! Rules of the reductions and the softmaxes: the gradient is put back in
//! the reduced shape (`keep_dims`) and spread over the reduced elements.

use super::{Call, GradBuilder, Prim, RuleOps};
use crate::graph::args::{b, i, t};
use crate::op::OpKind as K;
use crate::types::{Arg, ValueId};

/// `sum`, `mean`, `sum_dim`, `mean_dim`, `amax_dim`, `var_dim`, `softmax`,
/// `log_softmax`.
pub(super) fn vjp<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    Ok(match c.op {
        K::Sum | K::Mean | K::SumDim | K::MeanDim => {
            let (dims, keepdim) = match c.op {
                K::Sum | K::Mean => (Arg::Ints(vec![]), b(false)),
                _ => (c.arg(1)?, c.arg(2)?),
            };
            let k = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim])?;
            let ex = e.prim(Prim::ExpandLike, vec![t(k), t(x)])?;
            if matches!(c.op, K::Mean | K::MeanDim) {
                let n = e.prim(Prim::InvCount(1.0), vec![t(x), dims, i(0)])?;
                e.bin(K::Mul, ex, t(n))?
            } else {
                ex
            }
        }
        K::AmaxDim => {
            let (dims, keepdim) = (c.arg(1)?, c.arg(2)?);
            let o = c.out.get(e)?;
            let ok = e.prim(Prim::KeepDims, vec![t(o), t(x), dims.clone(), keepdim.clone()])?;
            let gk = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim])?;
            let mask = e.mask(K::Eq, x, t(ok), g)?;
            let count = e.op(K::SumDim, vec![t(mask), dims, b(true)])?;
            let share = e.bin(K::Div, mask, t(count))?;
            e.bin(K::Mul, share, t(gk))?
        }
        K::VarDim => {
            let (dims, corr, keepdim) = (c.arg(1)?, c.arg(2)?, c.arg(3)?);
            let mean = e.op(K::MeanDim, vec![t(x), dims.clone(), b(true)])?;
            let gk = e.prim(Prim::KeepDims, vec![t(g), t(x), dims.clone(), keepdim])?;
            let scale = e.prim(Prim::InvCount(2.0), vec![t(x), dims, corr])?;
            let d = e.bin(K::Sub, x, t(mean))?;
            let d = e.bin(K::Mul, d, t(scale))?;
            e.bin(K::Mul, d, t(gk))?
        }
        // PyTorch's softmax backward kernels work in the opmath dtype (f32
        // for f16/bf16) and round once.
        K::Softmax => {
            let (o, g0, g) = (c.out.get(e)?, g, e.opmath(g)?);
            let o = e.opmath(o)?;
            let dim = softmax_dim(c)?;
            let go = e.bin(K::Mul, g, t(o))?;
            let s = e.op(K::SumDim, vec![t(go), dim, b(true)])?;
            let d = e.bin(K::Sub, g, t(s))?;
            let r = e.bin(K::Mul, o, t(d))?;
            e.cast_like(r, g0)?
        }
        K::LogSoftmax => {
            let (o, g0, g) = (c.out.get(e)?, g, e.opmath(g)?);
            let o = e.opmath(o)?;
            let dim = softmax_dim(c)?;
            let ex = e.un(K::Exp, o)?;
            let s = e.op(K::SumDim, vec![t(g), dim, b(true)])?;
            let m = e.bin(K::Mul, ex, t(s))?;
            let r = e.bin(K::Sub, g, t(m))?;
            e.cast_like(r, g0)?
        }
        _ => return Err(format!("`{}` is not a reduction", c.op.name()).into()),
    })
}

/// A softmax's dim as the one-element dim list of a `sum_dim`.
fn softmax_dim(c: &Call) -> Result<Arg, String> {
    let d = c.arg(1)?.as_scalar().cloned().ok_or_else(|| format!("{} needs a dim", c.op.name()))?;
    Ok(Arg::Ints(vec![d]))
}
