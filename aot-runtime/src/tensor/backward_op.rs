//! What each recorded op keeps for its backward: [`BackwardOp`], the
//! saved tensors, scalars and metadata its gradient rule reads, with the
//! node name PyTorch gives it. The rules that read it are
//! `autograd` module's (`autograd/backprop.rs`).

use super::autograd_meta::Node;
use super::saved::SavedTensor;
use super::view_op::ViewOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::Tensor;
use aot_ir::graph::args::t;
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
