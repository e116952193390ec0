//! Rules of the view ops (each sends the gradient back through the
//! inverse view, or scatters it with `view_grad`), the copies and casts,
//! and the matrix products.

use super::{Call, ChainStep, GradBuilder, Grads, Prim, RuleOps};
use crate::graph::args::{i, ints, t};
use crate::op::OpKind as K;
use crate::types::ValueId;

/// The gradient of a view, copy or cast's receiver.
pub(super) fn vjp<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let (x, g) = (c.x, c.g);
    Ok(match c.op {
        K::View | K::Reshape | K::Squeeze | K::Flatten | K::ViewAs => e.prim(Prim::ReshapeLike, vec![t(g), t(x)])?,
        K::T => e.un(K::T, g)?,
        K::Transpose => e.op(K::Transpose, vec![t(g), c.arg(1)?, c.arg(2)?])?,
        K::Unsqueeze => e.op(K::Squeeze, vec![t(g), c.arg(1)?])?,
        K::Expand => e.sum_to(g, x)?,
        K::Permute => {
            let perm = c.arg(1)?.const_ints();
            match perm.and_then(|p| inverse_permutation(&p)) {
                Some(inv) => e.op(K::Permute, vec![t(g), ints(&inv)])?,
                None => view_grad(e, c)?,
            }
        }
        K::Select | K::Slice | K::Narrow | K::Diagonal | K::AsStrided => view_grad(e, c)?,
        K::Copy | K::Contiguous => g,
        K::ToDtype => e.cast_like(g, x)?,
        _ => return Err(format!("`{}` is not a view", c.op.name()).into()),
    })
}

fn view_grad<B: GradBuilder>(e: &mut B, c: &Call) -> Result<ValueId, B::Error> {
    let chain = vec![ChainStep::View { op: c.op, args: c.args[1..].to_vec() }];
    e.prim(Prim::ViewGrad(chain), vec![t(c.x), t(c.g)])
}

fn inverse_permutation(p: &[i64]) -> Option<Vec<i64>> {
    let n = p.len() as i64;
    let mut inv = vec![-1i64; p.len()];
    for (i, &d) in p.iter().enumerate() {
        let d = if d < 0 { d + n } else { d };
        let slot = inv.get_mut(usize::try_from(d).ok()?)?;
        if *slot != -1 {
            return None;
        }
        *slot = i as i64;
    }
    Some(inv)
}

/// `matmul`, `mm`, `bmm`: each operand's gradient is the product of the
/// output gradient with the other operand, transposed.
pub(super) fn matmul<B: GradBuilder>(e: &mut B, c: &Call, r: &mut Grads) -> Result<(), B::Error> {
    let (x, g) = (c.x, c.g);
    let b = c.tensor(1).ok_or_else(|| format!("`{}` needs a tensor operand", c.op.name()))?;
    for (k, rhs) in [(0, false), (1, true)] {
        if !c.need(k) {
            continue;
        }
        r[k] = Some(match c.op {
            K::Mm => {
                let (l, rt) = if rhs { (e.un(K::T, x)?, g) } else { (g, e.un(K::T, b)?) };
                e.bin(K::Mm, l, t(rt))?
            }
            K::Bmm => {
                let (l, rt) = if rhs { (batch_t(e, x)?, g) } else { (g, batch_t(e, b)?) };
                e.bin(K::Bmm, l, t(rt))?
            }
            _ => e.prim(Prim::MatmulGrad { rhs }, vec![t(g), t(x), t(b)])?,
        });
    }
    Ok(())
}

fn batch_t<B: GradBuilder>(e: &mut B, v: ValueId) -> Result<ValueId, B::Error> {
    e.op(K::Transpose, vec![t(v), i(1), i(2)])
}
