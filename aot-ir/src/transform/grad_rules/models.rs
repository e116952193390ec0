//! Rules of the ops for models: `log1p`, `expm1`,
//! `masked_fill`, `tril`/`triu`, `cumsum`, `max_dim`/`min_dim` (values)
//! and the losses. `argmax`/`argmin` give integers and have no gradient.

use super::{Call, GradBuilder, Prim, RuleOps};
use crate::graph::args::{b, f, t};
use crate::op::OpKind as K;
use crate::types::{Arg, ValueId};

/// The gradient of the receiver (argument 0).
pub(super) fn vjp<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    Ok(match c.op {
        K::Log1p => {
            let d = e.bin(K::Add, x, f(1.0))?;
            e.bin(K::Div, g, t(d))?
        }
        K::Expm1 => {
            let o = c.out.get(e)?;
            let d = e.bin(K::Add, o, f(1.0))?;
            e.bin(K::Mul, g, t(d))?
        }
        K::MaskedFill => {
            // Filled positions get nothing; the mask may have broadcast `x`.
            let z = e.un(K::ZerosLike, g)?;
            let kept = e.op(K::Where, vec![t(z), c.arg(1)?, t(g)])?;
            e.sum_to(kept, x)?
        }
        K::Tril | K::Triu => e.op(c.op, vec![t(g), c.arg(1)?])?,
        // The cumulative sum from the end.
        K::Cumsum => e.prim(Prim::CumsumRev, vec![t(g), c.arg(1)?])?,
        K::MaxDim | K::MinDim => first_extreme(e, c)?,
        K::NllLoss => e.prim(Prim::NllLossGrad, vec![t(g), t(x), c.arg(1)?])?,
        K::CrossEntropy => {
            // nll_loss(log_softmax(x, -1)), through log_softmax's rule.
            let gl = e.prim(Prim::NllLossGrad, vec![t(g), t(x), c.arg(1)?])?;
            let ls = e.op(K::LogSoftmax, vec![t(x), crate::graph::args::i(-1)])?;
            let p = e.un(K::Exp, ls)?;
            let s = e.op(K::SumDim, vec![t(gl), Arg::Ints(vec![crate::types::ScalarExpr::I64(-1)]), b(true)])?;
            let ps = e.bin(K::Mul, p, t(s))?;
            e.bin(K::Sub, gl, t(ps))?
        }
        _ => return Err(format!("`{}` is not an op for models", c.op.name()).into()),
    })
}

/// `max_dim`/`min_dim`: the gradient goes to the first position along
/// `dim` holding the extreme value (the index the op returns).
fn first_extreme<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    let (dims, keepdim) = (dim_list(c)?, c.arg(2)?);
    let o = c.out.get(e)?;
    let ok = e.prim(Prim::KeepDims, vec![t(o), t(x), dims.clone(), keepdim.clone()])?;
    let gk = e.prim(Prim::KeepDims, vec![t(g), t(x), dims, keepdim])?;
    let hit = e.mask(K::Eq, x, t(ok), g)?;
    // Counting the hits along `dim`: the first one is where the count is 1.
    let count = e.op(K::Cumsum, vec![t(hit), c.arg(1)?])?;
    let first = e.mask(K::Eq, count, f(1.0), g)?;
    let sel = e.bin(K::Mul, hit, t(first))?;
    e.bin(K::Mul, sel, t(gk))
}

/// The op's one dim (argument 1) as a dim list.
fn dim_list(c: &Call) -> Result<Arg, String> {
    let d = c.arg(1)?.as_scalar().cloned().ok_or_else(|| format!("{} needs a dim", c.op.name()))?;
    Ok(Arg::Ints(vec![d]))
}
