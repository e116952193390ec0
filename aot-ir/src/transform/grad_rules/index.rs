//! Rules of the indexing ops and of `cat`/`stack`: a gather's gradient is
//! the matching scatter-add into zeros, a scatter's is the matching gather,
//! and each input of a concatenation gets its slice of the gradient.

use super::{Call, GradBuilder, Grads, Prim, RuleOps};
use crate::graph::args::{i, t};
use crate::op::OpKind as K;

/// `index_select`, `gather`, `scatter_add`, `embedding`, `index_copy`,
/// `index_add`, `cat` and `stack`.
pub(super) fn vjp<B: GradBuilder>(e: &mut B, c: &Call, r: &mut Grads) -> Result<(), B::Error> {
    let (x, g) = (c.x, c.g);
    match c.op {
        K::IndexSelect | K::Gather if c.need(0) => {
            let (dim, index) = (c.arg(1)?, c.arg(2)?);
            let z = e.un(K::ZerosLike, x)?;
            let scatter = if c.op == K::IndexSelect { K::IndexAdd } else { K::ScatterAdd };
            r[0] = Some(e.op(scatter, vec![t(z), dim, index, t(g)])?);
        }
        K::IndexSelect | K::Gather => {}
        K::ScatterAdd | K::IndexCopy | K::IndexAdd => {
            let (dim, index) = (c.arg(1)?, c.arg(2)?);
            let src = c.tensor(3).ok_or_else(|| format!("`{}` needs a source tensor", c.op.name()))?;
            if c.need(0) {
                r[0] = Some(if c.op == K::IndexCopy {
                    // the copied-over positions get no gradient
                    let z = e.un(K::ZerosLike, src)?;
                    e.op(K::IndexCopy, vec![t(g), dim.clone(), index.clone(), t(z)])?
                } else {
                    g
                });
            }
            if c.need(3) {
                r[3] = Some(if c.op == K::ScatterAdd {
                    e.prim(Prim::ScatterSrcGrad, vec![t(g), index, t(src), dim])?
                } else {
                    e.op(K::IndexSelect, vec![t(g), dim, index])?
                });
            }
        }
        K::Embedding => {
            if c.need(1) {
                let w = c.tensor(1).ok_or_else(|| "`embedding` needs a weight tensor".to_string())?;
                r[1] = Some(e.prim(Prim::EmbeddingGrad, vec![t(g), t(x), t(w)])?);
            }
        }
        K::Cat | K::Stack => {
            let n = c.op.sig().list_len(c.args.len());
            let dim = c.arg(n)?;
            let mut cat_args = vec![t(g)];
            cat_args.extend(c.args[..n].iter().cloned());
            cat_args.push(dim.clone());
            for k in (0..n).filter(|&k| c.need(k)) {
                let xk = c.tensor(k).ok_or_else(|| format!("`{}`: argument {k} is not a tensor", c.op.name()))?;
                r[k] = Some(if c.op == K::Cat {
                    e.prim(Prim::CatGrad { k, n }, cat_args.clone())?
                } else {
                    let s = e.op(K::Select, vec![t(g), dim.clone(), i(k as i64)])?;
                    e.cast_like(s, xk)?
                });
            }
        }
        _ => return Err(format!("`{}` is not an indexing op", c.op.name()).into()),
    }
    Ok(())
}
