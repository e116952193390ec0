//! The gradient rules, in one table: `BackwardOp` is the data each recorded
//! op keeps, and `backward` maps an output gradient to input gradients.
//! Rules are written with eager ops; the engine runs them with grad off.

use super::SavedTensor;
use crate::autograd::Node;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::ops::ViewOp;
use crate::storage::Storage;
use crate::tensor::Tensor;
use std::sync::Arc;

/// The backward of a node recorded outside the eager op table: the one
/// node a compiled function attaches to its outputs.
pub(crate) trait CustomBackward: Send + Sync {
    fn name(&self) -> &'static str;
    /// Input gradients from the gradients of every output (`None`: the
    /// output got no gradient, i.e. zero).
    fn backward(&self, grads: &[Option<Tensor>], needs: &[bool]) -> Result<Vec<Option<Tensor>>>;
}

pub(crate) enum BackwardOp {
    Custom(Box<dyn CustomBackward>),
    Identity,
    ToDtype {
        from: DType,
    },
    Add {
        a_shape: Vec<usize>,
        b_shape: Vec<usize>,
        a_dtype: DType,
        b_dtype: DType,
    },
    Sub {
        a_shape: Vec<usize>,
        b_shape: Vec<usize>,
        a_dtype: DType,
        b_dtype: DType,
    },
    Mul {
        a: SavedTensor,
        b: SavedTensor,
    },
    Div {
        a: SavedTensor,
        b: SavedTensor,
    },
    Pow {
        a: SavedTensor,
        b: SavedTensor,
        out: SavedTensor,
    },
    MaxMin {
        a: SavedTensor,
        b: SavedTensor,
        max: bool,
    },
    /// `g * scale` (add/sub/mul/div by a scalar, neg).
    ScalarAffine {
        scale: f64,
        a_dtype: DType,
    },
    RDivScalar {
        s: f64,
        a: SavedTensor,
    },
    PowScalar {
        a: SavedTensor,
        exponent: f64,
    },
    RPowScalar {
        base: f64,
        out: SavedTensor,
    },
    MaxMinScalar {
        a: SavedTensor,
        s: f64,
        max: bool,
    },
    Exp {
        out: SavedTensor,
    },
    Log {
        a: SavedTensor,
    },
    Sqrt {
        out: SavedTensor,
    },
    Rsqrt {
        out: SavedTensor,
    },
    Abs {
        a: SavedTensor,
    },
    Sin {
        a: SavedTensor,
    },
    Cos {
        a: SavedTensor,
    },
    Tanh {
        out: SavedTensor,
    },
    Sigmoid {
        out: SavedTensor,
    },
    Relu {
        out: SavedTensor,
    },
    Gelu {
        a: SavedTensor,
    },
    Silu {
        a: SavedTensor,
    },
    Reciprocal {
        out: SavedTensor,
    },
    Square {
        a: SavedTensor,
    },
    Clamp {
        a: SavedTensor,
        min: Option<f64>,
        max: Option<f64>,
    },
    Where {
        cond: SavedTensor,
        a_shape: Vec<usize>,
        b_shape: Vec<usize>,
    },
    /// sum/mean over `dims` (mean has `scale` = 1/count).
    SumDim {
        in_shape: Vec<usize>,
        dims: Vec<usize>,
        keepdim: bool,
        scale: f64,
    },
    AmaxDim {
        a: SavedTensor,
        out: SavedTensor,
        dims: Vec<usize>,
        keepdim: bool,
    },
    VarDim {
        a: SavedTensor,
        dims: Vec<usize>,
        correction: i64,
        keepdim: bool,
    },
    /// `dim == usize::MAX` marks a 0-dim input.
    Softmax {
        out: SavedTensor,
        dim: usize,
        log: bool,
    },
    /// Each operand is saved only when the other one's gradient needs it
    /// (as PyTorch's `MmBackward0`): a later in-place write to an operand
    /// whose saved value no gradient reads is not an error.
    Matmul {
        a: Option<SavedTensor>,
        b: Option<SavedTensor>,
        a_shape: Vec<usize>,
        b_shape: Vec<usize>,
        a_dtype: DType,
        b_dtype: DType,
    },
    Dropout {
        mask: SavedTensor,
    },
    /// A view op applied to an input of `in_layout` (on a storage of `storage_len`).
    View {
        op: ViewOp,
        in_layout: Layout,
        storage_len: usize,
        dtype: DType,
    },
    /// `copy_`'s value: zero gradient to the old value, the rest to `src`.
    CopyFrom {
        src_shape: Vec<usize>,
        src_dtype: DType,
    },
    /// `fill_`/`zero_`'s value: no gradient to the old value.
    Fill,
    /// An in-place op on a view, seen from the base (PyTorch's CopySlices).
    CopySlices {
        base_layout: Layout,
        view_layout: Layout,
        storage_len: usize,
        dtype: DType,
        fn_node: Arc<Node>,
    },
}

fn i64s(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
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
        g = g.reshape(&i64s(shape))?;
    }
    g.to_dtype(dtype)
}

/// Gradient of a view: scatter-add `g` into zeros laid out like the input.
fn view_backward(op: &ViewOp, in_layout: &Layout, storage_len: usize, dtype: DType, g: &Tensor) -> Result<Tensor> {
    // as_strided addresses the storage itself, so its input is mirrored with
    // its real geometry; every other view works on a contiguous input.
    let (buf_len, l0) = match op {
        ViewOp::AsStrided { .. } => (storage_len, in_layout.clone()),
        _ => (in_layout.numel(), Layout::contiguous(&in_layout.shape)),
    };
    let out_l = op.apply(&l0, buf_len)?;
    const OP: &str = "view_backward";
    let buf = Storage::full(OP, &g.device(), dtype, buf_len, 0.0)?;
    let gc = g.to_dtype(dtype)?;
    gc.storage().scatter_add_into(OP, &gc.layout(), &buf, &out_l)?;
    let mirror = Tensor::from_storage(buf, Layout::contiguous(&[buf_len]));
    // `copy` (not `contiguous`): the result must start at offset 0.
    mirror.alias_with_layout(l0).copy()
}

fn keep_dims(g: &Tensor, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let mut g = g.clone();
    if !keepdim {
        for &d in dims {
            g = g.unsqueeze(d as i64)?;
        }
    }
    Ok(g)
}

/// Standard normal pdf and cdf for the exact gelu gradient.
fn gelu_grad(a: &Tensor, g: &Tensor) -> Result<Tensor> {
    let cdf = a.mul(std::f64::consts::FRAC_1_SQRT_2)?;
    // cdf = 0.5 * (1 + erf(x / sqrt 2)) computed through the forward gelu:
    // gelu(x) = x * cdf(x)  =>  cdf = gelu(x) / x, except at 0 where cdf = 0.5.
    let gelu = a.gelu()?;
    let zero = a.eq(0.0)?;
    let safe_a = a.where_(&zero.logical_not()?, 1.0)?;
    let cdf_v = gelu.div(&safe_a)?.where_(&zero.logical_not()?, 0.5)?;
    let pdf = cdf.square()?.neg()?.exp()?.mul(1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
    g.mul(&cdf_v.add(&a.mul(&pdf)?)?)
}

impl BackwardOp {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            BackwardOp::Identity => "CloneBackward0",
            BackwardOp::ToDtype { .. } => "ToCopyBackward0",
            BackwardOp::Add { .. } => "AddBackward0",
            BackwardOp::Sub { .. } => "SubBackward0",
            BackwardOp::Mul { .. } => "MulBackward0",
            BackwardOp::Div { .. } => "DivBackward0",
            BackwardOp::Pow { .. } => "PowBackward1",
            BackwardOp::MaxMin { max: true, .. } => "MaximumBackward0",
            BackwardOp::MaxMin { max: false, .. } => "MinimumBackward0",
            BackwardOp::ScalarAffine { .. } => "MulBackward0",
            BackwardOp::RDivScalar { .. } => "DivBackward0",
            BackwardOp::PowScalar { .. } => "PowBackward0",
            BackwardOp::RPowScalar { .. } => "PowBackward2",
            BackwardOp::MaxMinScalar { .. } => "ClampBackward1",
            BackwardOp::Exp { .. } => "ExpBackward0",
            BackwardOp::Log { .. } => "LogBackward0",
            BackwardOp::Sqrt { .. } => "SqrtBackward0",
            BackwardOp::Rsqrt { .. } => "RsqrtBackward0",
            BackwardOp::Abs { .. } => "AbsBackward0",
            BackwardOp::Sin { .. } => "SinBackward0",
            BackwardOp::Cos { .. } => "CosBackward0",
            BackwardOp::Tanh { .. } => "TanhBackward0",
            BackwardOp::Sigmoid { .. } => "SigmoidBackward0",
            BackwardOp::Relu { .. } => "ReluBackward0",
            BackwardOp::Gelu { .. } => "GeluBackward0",
            BackwardOp::Silu { .. } => "SiluBackward0",
            BackwardOp::Reciprocal { .. } => "ReciprocalBackward0",
            BackwardOp::Square { .. } => "PowBackward0",
            BackwardOp::Clamp { .. } => "ClampBackward1",
            BackwardOp::Where { .. } => "WhereBackward0",
            BackwardOp::SumDim { scale, .. } if *scale == 1.0 => "SumBackward1",
            BackwardOp::SumDim { .. } => "MeanBackward1",
            BackwardOp::AmaxDim { .. } => "AmaxBackward0",
            BackwardOp::VarDim { .. } => "VarBackward0",
            BackwardOp::Softmax { log: false, .. } => "SoftmaxBackward0",
            BackwardOp::Softmax { log: true, .. } => "LogSoftmaxBackward0",
            BackwardOp::Matmul { .. } => "MmBackward0",
            BackwardOp::Dropout { .. } => "NativeDropoutBackward0",
            BackwardOp::View { op, .. } => match op {
                ViewOp::View(_) => "ViewBackward0",
                ViewOp::Transpose(..) => "TransposeBackward0",
                ViewOp::Permute(_) => "PermuteBackward0",
                ViewOp::Unsqueeze(_) => "UnsqueezeBackward0",
                ViewOp::Squeeze(_) => "SqueezeBackward1",
                ViewOp::Expand(_) => "ExpandBackward0",
                ViewOp::Select(..) => "SelectBackward0",
                ViewOp::Slice { .. } => "SliceBackward0",
                ViewOp::Diagonal => "DiagonalBackward0",
                ViewOp::AsStrided { .. } => "AsStridedBackward0",
            },
            BackwardOp::CopyFrom { .. } => "CopyBackwards",
            BackwardOp::Fill => "FillBackward0",
            BackwardOp::CopySlices { .. } => "CopySlices",
            BackwardOp::Custom(c) => c.name(),
        }
    }

    /// True if the op keeps tensors alive (freed after a backward pass).
    pub(crate) fn has_saved(&self) -> bool {
        !matches!(
            self,
            BackwardOp::Identity
                | BackwardOp::ToDtype { .. }
                | BackwardOp::Add { .. }
                | BackwardOp::Sub { .. }
                | BackwardOp::ScalarAffine { .. }
                | BackwardOp::SumDim { .. }
                | BackwardOp::View { .. }
                | BackwardOp::CopyFrom { .. }
                | BackwardOp::Fill
        )
    }

    /// Input gradients from the gradients of the node's outputs.
    pub(crate) fn backward_outputs(&self, grads: &[Option<Tensor>], needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        match (self, grads.first()) {
            (BackwardOp::Custom(c), _) => c.backward(grads, needs),
            (_, Some(Some(g))) => self.backward(g, needs),
            _ => Ok(vec![None; needs.len()]),
        }
    }

    /// Input gradients for output gradient `g`; `needs[i]` says whether
    /// input `i` wants one. `None` means zero.
    pub(crate) fn backward(&self, g: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let name = self.name();
        let need = |i: usize| needs.get(i).copied().unwrap_or(false);
        let one = |t: Result<Tensor>| -> Result<Vec<Option<Tensor>>> { Ok(vec![if need(0) { Some(t?) } else { None }]) };
        match self {
            BackwardOp::Custom(c) => c.backward(&[Some(g.clone())], needs),
            BackwardOp::Identity => Ok(vec![Some(g.clone())]),
            BackwardOp::ToDtype { from } => one(g.to_dtype(*from)),
            BackwardOp::Add { a_shape, b_shape, a_dtype, b_dtype } => Ok(vec![
                if need(0) { Some(sum_to(g, a_shape, *a_dtype)?) } else { None },
                if need(1) { Some(sum_to(g, b_shape, *b_dtype)?) } else { None },
            ]),
            BackwardOp::Sub { a_shape, b_shape, a_dtype, b_dtype } => Ok(vec![
                if need(0) { Some(sum_to(g, a_shape, *a_dtype)?) } else { None },
                if need(1) { Some(sum_to(&g.neg()?, b_shape, *b_dtype)?) } else { None },
            ]),
            // Each operand is read only for the other's gradient, so a
            // later in-place write to it fails backward only when that
            // gradient is needed (PyTorch saves it only then).
            BackwardOp::Mul { a, b } => Ok(vec![
                if need(0) { Some(sum_to(&g.mul(&b.get(name)?)?, &a.t.shape(), a.t.dtype())?) } else { None },
                if need(1) { Some(sum_to(&g.mul(&a.get(name)?)?, &b.t.shape(), b.t.dtype())?) } else { None },
            ]),
            BackwardOp::Div { a, b } => {
                let bv = b.get(name)?;
                Ok(vec![
                    if need(0) { Some(sum_to(&g.div(&bv)?, &a.t.shape(), a.t.dtype())?) } else { None },
                    if need(1) { Some(sum_to(&g.neg()?.mul(&a.get(name)?)?.div(&bv.square()?)?, &bv.shape(), bv.dtype())?) } else { None },
                ])
            }
            BackwardOp::Pow { a, b, out } => {
                let (a, b, out) = (a.get(name)?, b.get(name)?, out.get(name)?);
                let ga = if need(0) {
                    // b * a^(b-1), with 0 where b == 0
                    let d = b.mul(&a.pow(&b.sub(1.0)?)?)?;
                    let d = d.where_(&b.ne(0.0)?, 0.0)?;
                    Some(sum_to(&g.mul(&d)?, &a.shape(), a.dtype())?)
                } else {
                    None
                };
                let gb = if need(1) {
                    // out * log(a), with 0 where a == 0 and b >= 0
                    let d = out.mul(&a.log()?)?;
                    let mask = a.eq(0.0)?.logical_and(&b.ge(0.0)?)?;
                    let d = d.where_(&mask.logical_not()?, 0.0)?;
                    Some(sum_to(&g.mul(&d)?, &b.shape(), b.dtype())?)
                } else {
                    None
                };
                Ok(vec![ga, gb])
            }
            BackwardOp::MaxMin { a, b, max } => {
                let (a, b) = (a.get(name)?, b.get(name)?);
                let (wa, tie) = (if *max { a.gt(&b)? } else { a.lt(&b)? }, a.eq(&b)?);
                let fa = wa.to_dtype(g.dtype())?.add(&tie.to_dtype(g.dtype())?.mul(0.5)?)?;
                let fb = fa.rsub(1.0)?;
                Ok(vec![
                    if need(0) { Some(sum_to(&g.mul(&fa)?, &a.shape(), a.dtype())?) } else { None },
                    if need(1) { Some(sum_to(&g.mul(&fb)?, &b.shape(), b.dtype())?) } else { None },
                ])
            }
            BackwardOp::ScalarAffine { scale, a_dtype } => one(g.mul(*scale).and_then(|t| t.to_dtype(*a_dtype))),
            BackwardOp::RDivScalar { s, a } => {
                let a = a.get(name)?;
                one(g.mul(-*s).and_then(|t| t.div(&a.square()?)))
            }
            BackwardOp::PowScalar { a, exponent } => {
                let a = a.get(name)?;
                if *exponent == 0.0 {
                    return one(g.mul(0.0));
                }
                one(a.pow(*exponent - 1.0).and_then(|p| g.mul(&p.mul(*exponent)?)))
            }
            BackwardOp::RPowScalar { base, out } => {
                let out = out.get(name)?;
                one(g.mul(&out).and_then(|t| t.mul(base.ln())))
            }
            BackwardOp::MaxMinScalar { a, s, max } => {
                let a = a.get(name)?;
                let (w, tie) = (if *max { a.gt(*s)? } else { a.lt(*s)? }, a.eq(*s)?);
                let f = w.to_dtype(g.dtype())?.add(&tie.to_dtype(g.dtype())?.mul(0.5)?)?;
                one(g.mul(&f))
            }
            BackwardOp::Exp { out } => one(g.mul(&out.get(name)?)),
            BackwardOp::Log { a } => one(g.div(&a.get(name)?)),
            BackwardOp::Sqrt { out } => one(g.div(&out.get(name)?.mul(2.0)?)),
            BackwardOp::Rsqrt { out } => {
                let o = out.get(name)?;
                one(g.mul(&o.pow(3.0)?.mul(-0.5)?))
            }
            BackwardOp::Abs { a } => {
                let a = a.get(name)?;
                let sign = a.gt(0.0)?.to_dtype(g.dtype())?.sub(&a.lt(0.0)?.to_dtype(g.dtype())?)?;
                one(g.mul(&sign))
            }
            BackwardOp::Sin { a } => one(g.mul(&a.get(name)?.cos()?)),
            BackwardOp::Cos { a } => one(g.mul(&a.get(name)?.sin()?.neg()?)),
            BackwardOp::Tanh { out } => one(g.mul(&out.get(name)?.square()?.rsub(1.0)?)),
            BackwardOp::Sigmoid { out } => {
                let o = out.get(name)?;
                one(g.mul(&o.mul(&o.rsub(1.0)?)?))
            }
            BackwardOp::Relu { out } => one(g.mul(&out.get(name)?.gt(0.0)?.to_dtype(g.dtype())?)),
            BackwardOp::Gelu { a } => one(gelu_grad(&a.get(name)?, g)),
            BackwardOp::Silu { a } => {
                let a = a.get(name)?;
                let s = a.sigmoid()?;
                one(g.mul(&s.mul(&a.mul(&s.rsub(1.0)?)?.add(1.0)?)?))
            }
            BackwardOp::Reciprocal { out } => one(g.mul(&out.get(name)?.square()?.neg()?)),
            BackwardOp::Square { a } => one(g.mul(&a.get(name)?.mul(2.0)?)),
            BackwardOp::Clamp { a, min, max } => {
                let a = a.get(name)?;
                let mut keep = a.ge(f64::NEG_INFINITY)?;
                // torch 2.15: no gradient at the bounds themselves
                if let Some(lo) = min {
                    keep = keep.logical_and(&a.gt(*lo)?)?;
                }
                if let Some(hi) = max {
                    keep = keep.logical_and(&a.lt(*hi)?)?;
                }
                one(g.mul(&keep.to_dtype(g.dtype())?))
            }
            BackwardOp::Where { cond, a_shape, b_shape } => {
                let c = cond.get(name)?;
                let zero = g.zeros_like()?;
                Ok(vec![
                    if need(0) { Some(sum_to(&g.where_(&c, &zero)?, a_shape, g.dtype())?) } else { None },
                    if need(1) { Some(sum_to(&zero.where_(&c, g)?, b_shape, g.dtype())?) } else { None },
                ])
            }
            BackwardOp::SumDim { in_shape, dims, keepdim, scale } => {
                let gk = keep_dims(g, dims, *keepdim)?;
                let e = gk.expand(&i64s(in_shape))?;
                one(if *scale == 1.0 { e.contiguous() } else { e.mul(*scale) })
            }
            BackwardOp::AmaxDim { a, out, dims, keepdim } => {
                let (a, out) = (a.get(name)?, out.get(name)?);
                let ok = keep_dims(&out, dims, *keepdim)?;
                let gk = keep_dims(g, dims, *keepdim)?;
                let mask = a.eq(&ok)?.to_dtype(g.dtype())?;
                let count = mask.sum_dim(&i64s(dims), true)?;
                one(mask.div(&count)?.mul(&gk))
            }
            BackwardOp::VarDim { a, dims, correction, keepdim } => {
                let a = a.get(name)?;
                let n = crate::ops::reduced_count(name, &a.shape(), dims)?;
                let denom = (n as f64 - *correction as f64).max(0.0);
                let mean = a.mean_dim(&i64s(dims), true)?;
                let gk = keep_dims(g, dims, *keepdim)?;
                one(a.sub(&mean)?.mul(2.0 / denom)?.mul(&gk))
            }
            BackwardOp::Softmax { out, dim, log } => {
                let o = out.get(name)?;
                if *dim == usize::MAX {
                    return one(g.mul(0.0));
                }
                let d = *dim as i64;
                if *log {
                    one(g.sub(&o.exp()?.mul(&g.sum_dim(&[d], true)?)?))
                } else {
                    let s = g.mul(&o)?.sum_dim(&[d], true)?;
                    one(o.mul(&g.sub(&s)?))
                }
            }
            BackwardOp::Matmul { a, b, a_shape, b_shape, a_dtype, b_dtype } => {
                let missing = || AotError::internal(name, "an operand needed for the gradient was not saved");
                let (ra, rb) = (a_shape.len(), b_shape.len());
                let mut a2s = a_shape.clone();
                if ra == 1 {
                    a2s.insert(0, 1);
                }
                let mut b2s = b_shape.clone();
                if rb == 1 {
                    b2s.push(1);
                }
                let mut out2 = crate::layout::broadcast_shapes(name, &a2s[..a2s.len() - 2], &b2s[..b2s.len() - 2])?;
                out2.extend([a2s[a2s.len() - 2], b2s[b2s.len() - 1]]);
                let g2 = g.reshape(&i64s(&out2))?;
                let ga = if need(0) {
                    let b2 = b.as_ref().ok_or_else(missing)?.get(name)?.reshape(&i64s(&b2s))?;
                    let r = g2.matmul(&b2.transpose(-1, -2)?)?;
                    Some(sum_to(&r, &a2s, *a_dtype)?.reshape(&i64s(a_shape))?)
                } else {
                    None
                };
                let gb = if need(1) {
                    let a2 = a.as_ref().ok_or_else(missing)?.get(name)?.reshape(&i64s(&a2s))?;
                    let r = a2.transpose(-1, -2)?.matmul(&g2)?;
                    Some(sum_to(&r, &b2s, *b_dtype)?.reshape(&i64s(b_shape))?)
                } else {
                    None
                };
                Ok(vec![ga, gb])
            }
            BackwardOp::Dropout { mask } => one(g.mul(&mask.get(name)?)),
            BackwardOp::View { op, in_layout, storage_len, dtype } => one(view_backward(op, in_layout, *storage_len, *dtype, g)),
            BackwardOp::CopyFrom { src_shape, src_dtype } => {
                // PyTorch gives the overwritten value a zero gradient, not none.
                Ok(vec![
                    if need(0) { Some(g.zeros_like()?) } else { None },
                    if need(1) { Some(sum_to(g, src_shape, *src_dtype)?) } else { None },
                ])
            }
            BackwardOp::Fill => one(g.zeros_like()),
            BackwardOp::CopySlices { base_layout, view_layout, storage_len, dtype, fn_node } => {
                let mirror = Tensor::zeros(&[*storage_len], *dtype, &g.device())?;
                let base_view = mirror.alias_with_layout(base_layout.clone());
                crate::ops::write_into_raw("CopySlices", &base_view, g)?;
                let slice = mirror.alias_with_layout(view_layout.clone());
                let gs = slice.copy()?;
                let guard = fn_node.op.lock().unwrap_or_else(|e| e.into_inner());
                let inner = guard.as_ref().ok_or_else(|| second_backward(fn_node.name))?;
                let mut fn_needs = vec![true];
                fn_needs.extend(fn_node.edges.iter().skip(1).map(|e| e.is_some()));
                let mut res = inner.backward(&gs, &fn_needs)?;
                let g_self = if res.is_empty() { None } else { res.remove(0) };
                match g_self {
                    Some(t) => crate::ops::write_into_raw("CopySlices", &slice, &t)?,
                    None => crate::ops::write_into_raw("CopySlices", &slice, &gs.zeros_like()?)?,
                }
                let mut out = vec![Some(base_view.contiguous()?)];
                out.extend(res);
                Ok(out)
            }
        }
    }
}

pub(crate) fn second_backward(node: &str) -> AotError {
    AotError::autograd(
        node,
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward(). Specify retain_graph=True if you need to backward through the graph a second time.",
    )
}
