//! What each recorded op keeps for its backward (`BackwardOp`: the saved
//! tensors, scalars and metadata its gradient rule reads), and `backward`,
//! which maps an output gradient to input gradients by the shared table of
//! `aot_ir::transform::grad_rules` (evaluated by [`super::grad_eval`]), or,
//! for the few records the table does not cover, by [`super::eager_rules`].
//! The engine runs backward with grad off.

use super::grad_eval::{RuleCall, Slot};
use super::SavedTensor;
use crate::autograd::Node;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::ops::ViewOp;
use crate::tensor::Tensor;
use aot_ir::graph::args::{b, f, i, ints, t};
use aot_ir::{Arg as IrArg, OpKind, ValueId};
use std::sync::Arc;

/// The backward of a node recorded outside the eager op table: the one
/// node a compiled function attaches to its outputs.
pub(crate) trait CustomBackward: Send + Sync {
    fn name(&self) -> &'static str;
    /// Input gradients from the gradients of every output (`None`: the
    /// output got no gradient, i.e. zero).
    fn backward(&self, grads: &[Option<Tensor>], needs: &[bool]) -> Result<Vec<Option<Tensor>>>;
}

/// What a [`BackwardOp::Table`] record kept of one input.
pub(crate) enum Kept {
    /// Not needed by the rule.
    Absent,
    Saved(SavedTensor),
    Meta {
        shape: Vec<usize>,
        dtype: DType,
    },
}

pub(crate) enum BackwardOp {
    Custom(Box<dyn CustomBackward>),
    /// An op whose record is the shared table's call itself, as the rule
    /// sees it: `op(args..) = out` (`ValueId(i)` names input `i`), what it
    /// kept of each input and of the output, and per edge the argument
    /// position whose gradient it gets. The ops for models record this.
    Table {
        op: OpKind,
        args: Vec<IrArg>,
        inputs: Vec<Kept>,
        out: Option<SavedTensor>,
        edges: Vec<usize>,
    },
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

impl From<Option<SavedTensor>> for Kept {
    fn from(s: Option<SavedTensor>) -> Kept {
        s.map_or(Kept::Absent, Kept::Saved)
    }
}

impl BackwardOp {
    /// A [`BackwardOp::Table`] record of `op` with the receiver as its only
    /// argument (and edge), saved when `x` is given.
    pub(crate) fn table(op: OpKind, x: Option<SavedTensor>, out: Option<SavedTensor>) -> BackwardOp {
        BackwardOp::Table { op, args: vec![t(ValueId(0))], inputs: vec![Kept::from(x)], out, edges: vec![0] }
    }

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
            BackwardOp::Table { op, .. } => table_name(*op),
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
        match self.rule_call(g) {
            Some(call) => call.run(self.name(), g, needs),
            None => self.eager_backward(g, needs),
        }
    }
}

impl BackwardOp {
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

/// PyTorch's backward node names of the ops recorded as [`BackwardOp::Table`].
fn table_name(op: OpKind) -> &'static str {
    match op {
        OpKind::IndexSelect => "IndexSelectBackward0",
        OpKind::Gather => "GatherBackward0",
        OpKind::ScatterAdd => "ScatterAddBackward0",
        OpKind::Embedding => "EmbeddingBackward0",
        OpKind::IndexCopy => "IndexCopyBackward0",
        OpKind::IndexAdd => "IndexAddBackward0",
        OpKind::Cat => "CatBackward0",
        OpKind::Stack => "StackBackward0",
        OpKind::Log1p => "Log1PBackward0",
        OpKind::Expm1 => "Expm1Backward0",
        OpKind::NllLoss => "NllLossBackward0",
        OpKind::MaskedFill => "MaskedFillBackward0",
        OpKind::Tril => "TrilBackward0",
        OpKind::Triu => "TriuBackward0",
        OpKind::Cumsum => "CumsumBackward0",
        OpKind::MaxDim => "MaxBackward0",
        OpKind::MinDim => "MinBackward0",
        _ => "TableBackward",
    }
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
