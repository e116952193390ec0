//! The backward-only primitives of `aot_ir`'s gradient rules that only
//! reshape, cast or reduce a gradient ([`Prim`]), evaluated on tensors.
//! Shared by the eager engine (through `autograd::grad_eval`) and the
//! compiled executor (`executor::joint`), which evaluates the view
//! primitives and dropout's mask itself.

use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::broadcast_shapes;
use crate::tensor::Tensor;
use aot_ir::transform::grad_rules::Prim;
use aot_ir::{Arg as IrArg, ScalarValue};

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "gradient primitive", msg }
}

fn i64s(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// Whether only the shape and dtype of argument `i` of `p` are read when
/// it runs. A superset of `Prim::is_meta_arg` (which the partitioner uses
/// to decide what to save, and keeps conservative): `matmul_grad` reads
/// only the metadata of the operand whose gradient it computes.
pub(crate) fn is_shape_only_arg(p: &Prim, i: usize) -> bool {
    match p {
        Prim::MatmulGrad { rhs: false } => i == 1,
        Prim::MatmulGrad { rhs: true } => i == 2,
        _ => p.is_meta_arg(i),
    }
}

/// A scalar argument, its parameters read from `scalars`.
pub(crate) fn scalar(a: Option<&IrArg>, scalars: &[Option<ScalarValue>]) -> Result<ScalarValue> {
    match a {
        Some(IrArg::Scalar(s)) => s.eval(scalars).map_err(|e| internal(e.to_string())),
        _ => Err(internal("expected a scalar argument".into())),
    }
}

/// An integer list argument, its parameters read from `scalars`.
pub(crate) fn ints(a: Option<&IrArg>, scalars: &[Option<ScalarValue>]) -> Result<Vec<i64>> {
    match a {
        Some(IrArg::Ints(items)) => items
            .iter()
            .map(|s| match s.eval(scalars).map_err(|e| internal(e.to_string()))? {
                ScalarValue::I64(v) => Ok(v),
                other => Err(internal(format!("expected an integer, got {other}"))),
            })
            .collect(),
        _ => Err(internal("expected an integer list".into())),
    }
}

/// Evaluates `p` on `args`; `tensors[i]` is the tensor of argument `i`
/// (`None` for other arguments). The view primitives and dropout's mask
/// are not evaluated here.
pub(crate) fn eval_prim(p: &Prim, args: &[IrArg], tensors: &[Option<Tensor>], scalars: &[Option<ScalarValue>]) -> Result<Tensor> {
    let tensor = |i: usize| -> Result<&Tensor> {
        tensors.get(i).and_then(Option::as_ref).ok_or_else(|| internal(format!("argument {i} of {} is not a tensor", p.name())))
    };
    match p {
        Prim::SumToLike => {
            let like = tensor(1)?;
            sum_to(tensor(0)?, &like.shape(), like.dtype())
        }
        Prim::CastLike => tensor(0)?.to_dtype(tensor(1)?.dtype()),
        Prim::OpMath => tensor(0)?.to_dtype(tensor(0)?.dtype().opmath()),
        Prim::ReshapeLike => tensor(0)?.reshape(&i64s(&tensor(1)?.shape())),
        // A view, as PyTorch's sum backward (`grad.expand(sizes)`): its
        // readers broadcast it (no copy, no kernel), and a leaf's `.grad`
        // gets a dense copy of its own (`autograd::engine::into_grad`).
        Prim::ExpandLike => tensor(0)?.expand(&i64s(&tensor(1)?.shape())),
        Prim::KeepDims => {
            let (g, like) = (tensor(0)?, tensor(1)?);
            let keepdim = matches!(scalar(args.get(3), scalars)?, ScalarValue::Bool(true));
            if keepdim {
                return Ok(g.clone());
            }
            let mut g = g.clone();
            for d in reduced_dims(&ints(args.get(2), scalars)?, like.rank())? {
                g = g.unsqueeze(d as i64)?;
            }
            Ok(g)
        }
        Prim::InvCount(scale) => {
            let like = tensor(0)?;
            let shape = like.shape();
            let n = crate::ops::reduced_count("inv_count", &shape, &reduced_dims(&ints(args.get(1), scalars)?, shape.len())?)?;
            let c = match scalar(args.get(2), scalars)? {
                ScalarValue::I64(c) => c as f64,
                ScalarValue::F64(c) => c,
                ScalarValue::Bool(_) => return Err(internal("inv_count: bool correction".into())),
            };
            Tensor::full(&[], scale / (n as f64 - c).max(0.0), like.dtype(), &like.device())
        }
        Prim::MatmulGrad { rhs } => matmul_grad(tensor(0)?, tensor(1)?, tensor(2)?, *rhs),
        Prim::MetaOf => meta_of(&tensor(0)?.shape(), tensor(0)?.dtype(), &tensor(0)?.device()),
        Prim::NllLossGrad => crate::ops::nll_loss_grad(tensor(0)?, tensor(1)?, tensor(2)?),
        Prim::CumsumRev => match scalar(args.get(1), scalars)? {
            ScalarValue::I64(d) => crate::ops::cumsum_rev(tensor(0)?, d),
            other => Err(internal(format!("cumsum_rev: dim {other}"))),
        },
        Prim::CatGrad { k, n } => {
            let dim = match scalar(args.get(n + 1), scalars)? {
                ScalarValue::I64(d) => d,
                other => return Err(internal(format!("cat_grad: dim {other}"))),
            };
            let g = tensor(0)?;
            let d = crate::layout::wrap_dim("cat_grad", dim, g.rank())?;
            // an input `cat` skipped (1-D empty beside others) had no slice
            let len_of = |t: &Tensor| match t.shape()[..] {
                [0] if g.rank() != 1 => Ok(None),
                ref s => s.get(d).copied().map(Some).ok_or_else(|| internal("cat_grad: input rank".into())),
            };
            let mut start = 0;
            for j in 1..=*k {
                start += len_of(tensor(j)?)?.unwrap_or(0);
            }
            let x = tensor(k + 1)?;
            let Some(len) = len_of(x)? else { return Tensor::zeros(&[0], x.dtype(), &g.device()) };
            // a copy: the gradient must not alias `g`
            g.narrow(d as i64, start as i64, len as i64)?.copy()?.to_dtype(x.dtype())
        }
        Prim::ScatterSrcGrad => {
            let (g, index, src) = (tensor(0)?, tensor(1)?, tensor(2)?);
            let dim = match scalar(args.get(3), scalars)? {
                ScalarValue::I64(d) => d,
                other => return Err(internal(format!("scatter_src_grad: dim {other}"))),
            };
            let picked = g.gather(dim, index)?;
            let shape = src.shape();
            if picked.shape() == shape {
                return Ok(picked);
            }
            // src's elements past the index's shape were not added anywhere
            let out = Tensor::zeros(&shape, picked.dtype(), &picked.device())?;
            let mut corner = out.clone();
            for (d, &n) in picked.shape().iter().enumerate() {
                corner = corner.narrow(d as i64, 0, n as i64)?;
            }
            corner.copy_(&picked)?;
            Ok(out)
        }
        Prim::EmbeddingGrad => {
            let (g, ids, w) = (tensor(0)?, tensor(1)?, tensor(2)?);
            let ws = w.shape();
            let rows = g.reshape(&[-1, ws.get(1).copied().unwrap_or(0) as i64])?;
            Tensor::zeros(&ws, w.dtype(), &w.device())?.index_add(0, &ids.reshape(&[-1])?, &rows.to_dtype(w.dtype())?)
        }
        Prim::ViewGrad(_) | Prim::ViewOf(_) | Prim::ViewScatter(_) | Prim::RngTake | Prim::DropoutMask => {
            Err(internal(format!("{} is evaluated by the joint executor", p.name())))
        }
    }
}

/// A one-element stand-in with this shape and dtype (stride 0), for a
/// value of which only the metadata is read.
pub(crate) fn meta_of(shape: &[usize], dtype: DType, device: &crate::device::Device) -> Result<Tensor> {
    Tensor::zeros(&[], dtype, device)?.expand(&i64s(shape))
}

/// Sums `g` down to `shape` (undoing broadcasting) and casts to `dtype`.
pub(crate) fn sum_to(g: &Tensor, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let gs = g.shape();
    let mut g = g.clone();
    if gs.as_slice() != shape {
        // PyTorch's engine check (`validate_outputs`): the gradient must be
        // a broadcast of the input's shape. A metadata mutation under
        // no_grad can leave a tensor whose shape its history disagrees with.
        let expandable = shape.len() <= gs.len() && shape.iter().rev().zip(gs.iter().rev()).all(|(&n, &m)| n == m || n == 1);
        if !expandable {
            return Err(AotError::unsupported(
                "backward",
                format!("invalid gradient: got shape {gs:?} but expected shape compatible with {shape:?}"),
            ));
        }
        let lead = gs.len().saturating_sub(shape.len());
        let mut dims: Vec<i64> = (0..lead as i64).collect();
        for (i, &n) in shape.iter().enumerate() {
            if n == 1 && gs[i + lead] != 1 {
                dims.push((i + lead) as i64);
            }
        }
        if !dims.is_empty() {
            g = g.sum_dim(&dims, true)?;
        }
        g = reshaped(&g, shape)?;
    }
    g.to_dtype(dtype)
}

/// A gradient `g` reshaped to `shape`. Without history, and dense over its
/// whole storage from offset 0, it is a plain alias rather than a view:
/// a view's `_base` would hold the storage too, and AccumulateGrad would
/// then copy the gradient into `.grad` instead of taking it (a full
/// pass and a new buffer per parameter per step). Nothing can tell the
/// two apart: same storage, same layout as `reshape`'s, no history.
fn reshaped(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let l = g.layout();
    let dense = l.offset == 0 && l.is_contiguous() && g.storage_len() == l.numel() && l.numel() == shape.iter().product::<usize>();
    if dense && !g.requires_grad() {
        return Ok(g.alias_with_layout(crate::layout::Layout::contiguous(shape)));
    }
    g.reshape(&i64s(shape))
}

/// The reduced dims of a reduction over `dims` (empty: all) of a rank-`rank`
/// tensor, normalized and sorted. A 0-d tensor accepts dim 0 and -1 (as
/// eager's `normalize_dims`) and has no dim to reduce or put back.
fn reduced_dims(dims: &[i64], rank: usize) -> Result<Vec<usize>> {
    if dims.is_empty() || rank == 0 {
        for &d in dims {
            crate::layout::wrap_dim("keep_dims", d, rank)?;
        }
        return Ok((0..rank).collect());
    }
    let mut out = dims.iter().map(|&d| crate::layout::wrap_dim("keep_dims", d, rank)).collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The gradient of one operand of `a.matmul(b)`, with matmul's 1-D and
/// batch-broadcasting rules. Reads only the shape and dtype of the operand
/// whose gradient it computes.
fn matmul_grad(g: &Tensor, a: &Tensor, b: &Tensor, rhs: bool) -> Result<Tensor> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        return Err(AotError::unsupported("matmul", "both arguments to matmul need to be at least 1D"));
    }
    let a2 = if ra == 1 { a.unsqueeze(0)? } else { a.clone() };
    let b2 = if rb == 1 { b.unsqueeze(-1)? } else { b.clone() };
    let mut out2 = broadcast_shapes("matmul", &a2.shape()[..a2.rank() - 2], &b2.shape()[..b2.rank() - 2])?;
    out2.extend([a2.shape()[a2.rank() - 2], b2.shape()[b2.rank() - 1]]);
    let g2 = g.reshape(&i64s(&out2))?;
    if rhs {
        let r = a2.transpose(-1, -2)?.matmul(&g2)?;
        reshaped(&sum_to(&r, &b2.shape(), b.dtype())?, &b.shape())
    } else {
        let r = g2.matmul(&b2.transpose(-1, -2)?)?;
        reshaped(&sum_to(&r, &a2.shape(), a.dtype())?, &a.shape())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use std::sync::Arc;

    fn t(values: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_vec(values.to_vec(), shape, &Device::Cpu).unwrap()
    }

    /// The tensor is no view and nothing else holds its storage, so
    /// AccumulateGrad may take it as `.grad` instead of copying it.
    fn owns_its_storage(g: &Tensor) -> bool {
        g.view_base().is_none() && Arc::strong_count(&g.0.storage) == 1 && g.storage_len() == g.numel()
    }

    #[test]
    fn gradient_reshapes_are_not_views_of_temporaries() {
        let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let w = t(&[1.0, 0.0, -1.0, 2.0, 0.5, 1.0], &[3, 2]);
        let g = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let gw = matmul_grad(&g, &x, &w, true).unwrap();
        assert_eq!(gw.shape(), vec![3, 2]);
        // x^T g
        assert_eq!(gw.to_vec::<f32>().unwrap(), vec![13.0, 18.0, 17.0, 24.0, 21.0, 30.0]);
        assert!(owns_its_storage(&gw));
        let gx = matmul_grad(&g, &x, &w, false).unwrap();
        // g w^T
        assert_eq!(gx.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.5, 3.0, 5.0, 5.5]);
        assert!(owns_its_storage(&gx));
        // a bias gradient: the rows summed, the kept dim dropped
        let gb = sum_to(&x, &[3], DType::F32).unwrap();
        assert_eq!((gb.shape(), gb.to_vec::<f32>().unwrap()), (vec![3], vec![5.0, 7.0, 9.0]));
        assert!(owns_its_storage(&gb));
        // a 1-D operand's gradient (its matrix form reshaped back)
        let v = t(&[1.0, -1.0, 2.0], &[3]);
        let gv = matmul_grad(&t(&[1.0, 2.0], &[2]), &x, &v, true).unwrap();
        assert_eq!((gv.shape(), gv.to_vec::<f32>().unwrap()), (vec![3], vec![9.0, 12.0, 15.0]));
        assert!(owns_its_storage(&gv));
    }

    #[test]
    fn a_gradient_with_history_is_reshaped_as_a_view() {
        // Double backward: the gradient itself records history, so the
        // reshape must too.
        let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).requires_grad_(true).unwrap();
        let s = crate::tensor::with_grad_mode(true, || sum_to(&x, &[2], DType::F32)).unwrap();
        assert!(s.requires_grad());
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    }
}
