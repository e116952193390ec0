//! The gradient rules of the recorded ops: `backward` maps an output
//! gradient of a [`BackwardOp`] record (the tape's data, in
//! `crate::tensor`) to input gradients by the shared table of
//! `aot_ir::transform::grad_rules` (evaluated by [`super::grad_eval`]), or,
//! for the few records the table does not cover, by [`super::eager_rules`].
//! The engine runs backward with grad off.

use super::grad_eval::{RuleCall, Slot};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::tensor::{BackwardOp, Kept, Tensor, ViewOp};
use aot_ir::graph::args::{b, f, i, ints, t};
use aot_ir::{Arg as IrArg, OpKind, ValueId};

impl BackwardOp {
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
        match self.rule_call(g) {
            Some(call) => call.run(self.name(), g, needs),
            None => self.eager_backward(g, needs),
        }
    }

    /// The op as the shared table's rule sees it, `None` for the records
    /// [`super::eager_rules`] differentiates. The gradient `g` supplies the
    /// device, and the dtype where the record keeps none.
    fn rule_call(&self, g: &Tensor) -> Option<RuleCall<'_>> {
        use BackwardOp as B;
        use OpKind as K;
        let meta = |shape: &[usize], dtype: DType| Slot::Meta { shape: shape.to_vec(), dtype };
        let saved = Slot::Saved;
        let tt = || vec![t(ValueId(0)), t(ValueId(1))];
        let (op, args, inputs, out, edges): Parts<'_> = match self {
            B::Identity => unary(K::Copy, Slot::Absent, Slot::Absent),
            B::ToDtype { from } => unary(K::ToDtype, meta(&g.shape(), *from), Slot::Absent),
            B::Add { a_shape, b_shape, a_dtype, b_dtype } | B::Sub { a_shape, b_shape, a_dtype, b_dtype } => {
                let op = if matches!(self, B::Add { .. }) { K::Add } else { K::Sub };
                (op, tt(), vec![meta(a_shape, *a_dtype), meta(b_shape, *b_dtype)], Slot::Absent, vec![0, 1])
            }
            B::Mul { a, b } => (K::Mul, tt(), vec![saved(a), saved(b)], Slot::Absent, vec![0, 1]),
            B::Div { a, b } => (K::Div, tt(), vec![saved(a), saved(b)], Slot::Absent, vec![0, 1]),
            B::Pow { a, b, out } => (K::Pow, tt(), vec![saved(a), saved(b)], saved(out), vec![0, 1]),
            B::MaxMin { a, b, max } => (max_min(*max), tt(), vec![saved(a), saved(b)], Slot::Absent, vec![0, 1]),
            B::ScalarAffine { scale, a_dtype } => {
                (K::Mul, vec![t(ValueId(0)), f(*scale)], vec![meta(&g.shape(), *a_dtype)], Slot::Absent, vec![0])
            }
            B::PowScalar { a, exponent } => (K::Pow, vec![t(ValueId(0)), f(*exponent)], vec![saved(a)], Slot::Absent, vec![0]),
            B::MaxMinScalar { a, s, max } => (max_min(*max), vec![t(ValueId(0)), f(*s)], vec![saved(a)], Slot::Absent, vec![0]),
            B::Exp { out } => unary(K::Exp, Slot::Absent, saved(out)),
            B::Log { a } => unary(K::Log, saved(a), Slot::Absent),
            B::Sqrt { out } => unary(K::Sqrt, Slot::Absent, saved(out)),
            B::Rsqrt { out } => unary(K::Rsqrt, Slot::Absent, saved(out)),
            B::Abs { a } => unary(K::Abs, saved(a), Slot::Absent),
            B::Sin { a } => unary(K::Sin, saved(a), Slot::Absent),
            B::Cos { a } => unary(K::Cos, saved(a), Slot::Absent),
            B::Tanh { out } => unary(K::Tanh, Slot::Absent, saved(out)),
            B::Sigmoid { out } => unary(K::Sigmoid, Slot::Absent, saved(out)),
            B::Relu { out } => unary(K::Relu, Slot::Absent, saved(out)),
            B::Gelu { a } => unary(K::Gelu, saved(a), Slot::Absent),
            B::Silu { a } => unary(K::Silu, saved(a), Slot::Absent),
            B::Reciprocal { out } => unary(K::Reciprocal, Slot::Absent, saved(out)),
            B::Square { a } => unary(K::Square, saved(a), Slot::Absent),
            B::Clamp { a, min: Some(lo), max: Some(hi) } => {
                (K::Clamp, vec![t(ValueId(0)), f(*lo), f(*hi)], vec![saved(a)], Slot::Absent, vec![0])
            }
            B::Where { cond, a_shape, b_shape } => {
                let inputs = vec![meta(a_shape, g.dtype()), saved(cond), meta(b_shape, g.dtype())];
                (K::Where, vec![t(ValueId(0)), t(ValueId(1)), t(ValueId(2))], inputs, Slot::Absent, vec![0, 2])
            }
            // A mean is recorded as a sum scaled by 1/count.
            B::SumDim { in_shape, dims, keepdim, scale } => {
                let op = if *scale == 1.0 { K::SumDim } else { K::MeanDim };
                (op, vec![t(ValueId(0)), dim_list(dims), b(*keepdim)], vec![meta(in_shape, g.dtype())], Slot::Absent, vec![0])
            }
            B::AmaxDim { a, out, dims, keepdim } => {
                (K::AmaxDim, vec![t(ValueId(0)), dim_list(dims), b(*keepdim)], vec![saved(a)], saved(out), vec![0])
            }
            B::VarDim { a, dims, correction, keepdim } => {
                (K::VarDim, vec![t(ValueId(0)), dim_list(dims), i(*correction), b(*keepdim)], vec![saved(a)], Slot::Absent, vec![0])
            }
            B::Softmax { out, dim, log } => {
                let op = if *log { K::LogSoftmax } else { K::Softmax };
                // `usize::MAX` marks a 0-dim input, whose only dim is 0
                let d = if *dim == usize::MAX { 0 } else { *dim as i64 };
                (op, vec![t(ValueId(0)), i(d)], vec![Slot::Absent], saved(out), vec![0])
            }
            // An operand not saved is read for its shape and dtype only.
            B::Matmul { a, b, a_shape, b_shape, a_dtype, b_dtype } => {
                let a = a.as_ref().map_or_else(|| meta(a_shape, *a_dtype), saved);
                let b = b.as_ref().map_or_else(|| meta(b_shape, *b_dtype), saved);
                (K::Matmul, tt(), vec![a, b], Slot::Absent, vec![0, 1])
            }
            // Dropout is `x * mask`, as in the joint graph.
            B::Dropout { mask } => (K::Mul, tt(), vec![meta(&g.shape(), g.dtype()), saved(mask)], Slot::Absent, vec![0]),
            B::View { op, in_layout, dtype, .. } => {
                let (op, rest) = view_rule(op)?;
                let mut args = vec![t(ValueId(0))];
                args.extend(rest);
                (op, args, vec![meta(&in_layout.shape, *dtype)], Slot::Absent, vec![0])
            }
            // `copy_` and `fill_`/`zero_` as seen from the written tensor:
            // the overwritten value gets a zero gradient (PyTorch's, not none).
            B::CopyFrom { src_shape, src_dtype } => {
                (K::CopyInplace, tt(), vec![Slot::Absent, meta(src_shape, *src_dtype)], Slot::Absent, vec![0, 1])
            }
            B::Fill => unary(K::Zero, Slot::Absent, Slot::Absent),
            B::Table { op, args, inputs, out, edges } => {
                let inputs = inputs
                    .iter()
                    .map(|k| match k {
                        Kept::Absent => Slot::Absent,
                        Kept::Saved(s) => saved(s),
                        Kept::Meta { shape, dtype } => meta(shape, *dtype),
                    })
                    .collect();
                (*op, args.clone(), inputs, out.as_ref().map_or(Slot::Absent, saved), edges.clone())
            }
            _ => return None,
        };
        let overwrites = matches!(op, K::CopyInplace | K::Zero);
        Some(RuleCall { op, args, inputs, out, edges, overwrites })
    }
}

/// A rule call's parts: op, arguments, inputs, output, edges.
type Parts<'a> = (OpKind, Vec<IrArg>, Vec<Slot<'a>>, Slot<'a>, Vec<usize>);

/// A unary op's parts, from its input and its output.
fn unary<'a>(op: OpKind, x: Slot<'a>, out: Slot<'a>) -> Parts<'a> {
    (op, vec![t(ValueId(0))], vec![x], out, vec![0])
}

/// A view's op and arguments after the receiver, `None` for `as_strided`
/// (see [`super::eager_rules`]).
fn view_rule(op: &ViewOp) -> Option<(OpKind, Vec<IrArg>)> {
    let int = |d: usize| i(d as i64);
    Some(match op {
        ViewOp::View(shape) => (OpKind::View, vec![dim_list(shape)]),
        ViewOp::Transpose(d0, d1) => (OpKind::Transpose, vec![int(*d0), int(*d1)]),
        ViewOp::Permute(perm) => (OpKind::Permute, vec![dim_list(perm)]),
        ViewOp::Unsqueeze(d) => (OpKind::Unsqueeze, vec![int(*d)]),
        ViewOp::Squeeze(d) => (OpKind::Squeeze, vec![int(*d)]),
        ViewOp::Expand(shape) => (OpKind::Expand, vec![dim_list(shape)]),
        ViewOp::Select(d, index) => (OpKind::Select, vec![int(*d), int(*index)]),
        ViewOp::Slice { dim, start, end, step } => (OpKind::Slice, vec![int(*dim), int(*start), int(*end), int(*step)]),
        ViewOp::Diagonal => (OpKind::Diagonal, vec![]),
        ViewOp::AsStrided { .. } => return None,
    })
}

fn max_min(max: bool) -> OpKind {
    if max {
        OpKind::Maximum
    } else {
        OpKind::Minimum
    }
}

fn dim_list(dims: &[usize]) -> IrArg {
    ints(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
}

pub(crate) fn second_backward(node: &str) -> AotError {
    AotError::autograd(
        node,
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward(). Specify retain_graph=True if you need to backward through the graph a second time.",
    )
}
