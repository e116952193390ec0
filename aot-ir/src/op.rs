//! The ops of the DSL, in one table: name, class, argument kinds and usage.
//!
//! The macro validates calls against this table (unknown op, arity, argument
//! kinds), the verifier checks nodes against it, the analyses read the class
//! (view / data mutation / metadata mutation) and the interpreter dispatches
//! on the kind. One table means the four can never disagree.
//!
//! Beside the table, the op classes: the kernel stage's (which ops a
//! generated kernel computes: [`is_elementwise`], [`is_reduction`]) and
//! the backends' (which ops each primitive takes:
//! [`OpKind::is_unary_elementwise`], [`OpKind::is_binary_elementwise`],
//! [`OpKind::is_comparison`], [`OpKind::is_fold_reduction`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What an op does to aliasing and mutation, which is all the analyses need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// Computes a new tensor with its own storage.
    Compute,
    /// Returns a view: a new tensor sharing the receiver's storage.
    View,
    /// Writes the receiver's data in place (the receiver keeps its identity).
    DataMutation,
    /// Changes the receiver's sizes/strides/offset in place.
    MetadataMutation,
}

/// The kind of one argument after the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A tensor (`&b` or `b`).
    Tensor,
    /// A tensor or a number: the right-hand side of binary ops.
    Operand,
    /// A number (an integer is accepted and widened).
    Float,
    /// An integer (dims, indices, sizes).
    Int,
    /// A bool (a literal or a bool parameter).
    Bool,
    /// An integer list, `&[2, -1]`.
    Ints,
    /// `DType::F32` and friends.
    DType,
    /// A list of tensors, `&[&a, &b]`: only as the first parameter of a
    /// static op (`Tensor::cat(&[&a, &b], 0)`), which has no receiver. In
    /// a node the list is spread: its tensors are the first arguments.
    Tensors,
}

impl ParamKind {
    /// The kind in diagnostics ("expected a tensor").
    pub fn describe(self) -> &'static str {
        match self {
            ParamKind::Tensor => "a tensor",
            ParamKind::Operand => "a tensor or a number",
            ParamKind::Float => "a number",
            ParamKind::Int => "an integer",
            ParamKind::Bool => "a bool",
            ParamKind::Ints => "an integer list like `&[2, -1]`",
            ParamKind::DType => "a dtype like `DType::F32`",
            ParamKind::Tensors => "a list of tensors like `&[&a, &b]`",
        }
    }
}

/// How an op's result relates to its receiver's storage, beyond the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AliasEffect {
    /// New storage.
    Fresh,
    /// A view that autograd tracks (`._base` is set).
    View,
    /// `detach()`: shares storage, but is not an autograd view (no `._base`).
    Detach,
    /// `reshape`: a view when the layout allows, else a copy. Decided at run time.
    MaybeView,
    /// `contiguous`: the receiver itself when already contiguous, else a copy.
    MaybeSame,
    /// In-place: the result is the receiver.
    InPlace,
}

/// The signature of one op.
#[derive(Debug)]
pub struct OpSig {
    /// The op this row describes.
    pub kind: OpKind,
    /// The method name, as in the DSL and the eager API.
    pub name: &'static str,
    /// Whether it computes, views, or mutates its receiver's data or metadata.
    pub class: OpClass,
    /// Argument kinds after the receiver.
    pub params: &'static [ParamKind],
    /// How to call it, for diagnostics.
    pub usage: &'static str,
}

macro_rules! define_ops {
    ($( $variant:ident = $name:literal, $class:ident, [$($p:ident),*], $usage:literal; )*) => {
        /// Every op of the DSL. The discriminant indexes [`OP_TABLE`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpKind { $(#[doc = concat!("`", $name, "`: `", $usage, "`.")] $variant,)* }

        /// The table of all ops, in [`OpKind`] order.
        pub static OP_TABLE: &[OpSig] = &[
            $( OpSig {
                kind: OpKind::$variant,
                name: $name,
                class: OpClass::$class,
                params: &[$(ParamKind::$p),*],
                usage: $usage,
            }, )*
        ];
    };
}

define_ops! {
    Add = "add", Compute, [Operand], "a.add(&b) or a.add(2.0)";
    Sub = "sub", Compute, [Operand], "a.sub(&b) or a.sub(2.0)";
    Mul = "mul", Compute, [Operand], "a.mul(&b) or a.mul(2.0)";
    Div = "div", Compute, [Operand], "a.div(&b) or a.div(2.0)";
    Pow = "pow", Compute, [Operand], "a.pow(2.0)";
    Maximum = "maximum", Compute, [Operand], "a.maximum(&b)";
    Minimum = "minimum", Compute, [Operand], "a.minimum(&b)";
    Eq = "eq", Compute, [Operand], "a.eq(&b)";
    Ne = "ne", Compute, [Operand], "a.ne(&b)";
    Lt = "lt", Compute, [Operand], "a.lt(&b)";
    Le = "le", Compute, [Operand], "a.le(&b)";
    Gt = "gt", Compute, [Operand], "a.gt(&b)";
    Ge = "ge", Compute, [Operand], "a.ge(&b)";
    Where = "where_", Compute, [Tensor, Operand], "a.where_(&cond, &other)";
    Neg = "neg", Compute, [], "a.neg()";
    Exp = "exp", Compute, [], "a.exp()";
    Log = "log", Compute, [], "a.log()";
    Sqrt = "sqrt", Compute, [], "a.sqrt()";
    Rsqrt = "rsqrt", Compute, [], "a.rsqrt()";
    Abs = "abs", Compute, [], "a.abs()";
    Sin = "sin", Compute, [], "a.sin()";
    Cos = "cos", Compute, [], "a.cos()";
    Tanh = "tanh", Compute, [], "a.tanh()";
    Sigmoid = "sigmoid", Compute, [], "a.sigmoid()";
    Relu = "relu", Compute, [], "a.relu()";
    Gelu = "gelu", Compute, [], "a.gelu()";
    Silu = "silu", Compute, [], "a.silu()";
    Reciprocal = "reciprocal", Compute, [], "a.reciprocal()";
    Square = "square", Compute, [], "a.square()";
    Sum = "sum", Compute, [], "a.sum()";
    Mean = "mean", Compute, [], "a.mean()";
    SumDim = "sum_dim", Compute, [Ints, Bool], "a.sum_dim(&[dim, ..], keepdim)";
    MeanDim = "mean_dim", Compute, [Ints, Bool], "a.mean_dim(&[dim, ..], keepdim)";
    AmaxDim = "amax_dim", Compute, [Ints, Bool], "a.amax_dim(&[dim, ..], keepdim)";
    VarDim = "var_dim", Compute, [Ints, Int, Bool], "a.var_dim(&[dim, ..], correction, keepdim)";
    Softmax = "softmax", Compute, [Int], "a.softmax(dim)";
    LogSoftmax = "log_softmax", Compute, [Int], "a.log_softmax(dim)";
    Matmul = "matmul", Compute, [Tensor], "a.matmul(&b)";
    Mm = "mm", Compute, [Tensor], "a.mm(&b)";
    Bmm = "bmm", Compute, [Tensor], "a.bmm(&b)";
    View = "view", View, [Ints], "a.view(&[size, ..])";
    Reshape = "reshape", View, [Ints], "a.reshape(&[size, ..])";
    T = "t", View, [], "a.t()";
    Transpose = "transpose", View, [Int, Int], "a.transpose(dim0, dim1)";
    Permute = "permute", View, [Ints], "a.permute(&[dim, ..])";
    Unsqueeze = "unsqueeze", View, [Int], "a.unsqueeze(dim)";
    Squeeze = "squeeze", View, [Int], "a.squeeze(dim)";
    Expand = "expand", View, [Ints], "a.expand(&[size, ..])";
    Select = "select", View, [Int, Int], "a.select(dim, index)";
    Slice = "slice", View, [Int, Int, Int, Int], "a.slice(dim, start, end, step)";
    Narrow = "narrow", View, [Int, Int, Int], "a.narrow(dim, start, length)";
    Diagonal = "diagonal", View, [], "a.diagonal()";
    AsStrided = "as_strided", View, [Ints, Ints, Int], "a.as_strided(&[size, ..], &[stride, ..], storage_offset)";
    Detach = "detach", View, [], "a.detach()";
    AddInplace = "add_", DataMutation, [Operand], "a.add_(&b) or a.add_(2.0)";
    SubInplace = "sub_", DataMutation, [Operand], "a.sub_(&b) or a.sub_(2.0)";
    MulInplace = "mul_", DataMutation, [Operand], "a.mul_(&b) or a.mul_(2.0)";
    DivInplace = "div_", DataMutation, [Operand], "a.div_(&b) or a.div_(2.0)";
    CopyInplace = "copy_", DataMutation, [Tensor], "a.copy_(&b)";
    Fill = "fill_", DataMutation, [Float], "a.fill_(value)";
    Zero = "zero_", DataMutation, [], "a.zero_()";
    Clamp = "clamp_", DataMutation, [Float, Float], "a.clamp_(min, max)";
    ReluInplace = "relu_", DataMutation, [], "a.relu_()";
    SigmoidInplace = "sigmoid_", DataMutation, [], "a.sigmoid_()";
    ExpInplace = "exp_", DataMutation, [], "a.exp_()";
    NegInplace = "neg_", DataMutation, [], "a.neg_()";
    TInplace = "t_", MetadataMutation, [], "a.t_()";
    TransposeInplace = "transpose_", MetadataMutation, [Int, Int], "a.transpose_(dim0, dim1)";
    UnsqueezeInplace = "unsqueeze_", MetadataMutation, [Int], "a.unsqueeze_(dim)";
    SqueezeInplace = "squeeze_", MetadataMutation, [Int], "a.squeeze_(dim)";
    AsStridedInplace = "as_strided_", MetadataMutation, [Ints, Ints, Int], "a.as_strided_(&[size, ..], &[stride, ..], storage_offset)";
    Copy = "copy", Compute, [], "a.copy()";
    Contiguous = "contiguous", Compute, [], "a.contiguous()";
    ToDtype = "to_dtype", Compute, [DType], "a.to_dtype(DType::F32)";
    ZerosLike = "zeros_like", Compute, [], "a.zeros_like()";
    OnesLike = "ones_like", Compute, [], "a.ones_like()";
    FullLike = "full_like", Compute, [Float], "a.full_like(value)";
    RandLike = "rand_like", Compute, [], "a.rand_like()";
    Dropout = "dropout", Compute, [Float], "a.dropout(p)";
    // Ops for models, part A.
    Log1p = "log1p", Compute, [], "a.log1p()";
    Expm1 = "expm1", Compute, [], "a.expm1()";
    ClampOut = "clamp", Compute, [Float, Float], "a.clamp(min, max)";
    MaskedFill = "masked_fill", Compute, [Tensor, Float], "a.masked_fill(&mask, value)";
    Tril = "tril", Compute, [Int], "a.tril(k)";
    Triu = "triu", Compute, [Int], "a.triu(k)";
    Cumsum = "cumsum", Compute, [Int], "a.cumsum(dim)";
    Flatten = "flatten", View, [Int, Int], "a.flatten(start_dim, end_dim)";
    ViewAs = "view_as", View, [Tensor], "a.view_as(&other)";
    Argmax = "argmax", Compute, [Int, Bool], "a.argmax(dim, keepdim)";
    Argmin = "argmin", Compute, [Int, Bool], "a.argmin(dim, keepdim)";
    MaxDim = "max_dim", Compute, [Int, Bool], "let (values, indices) = a.max_dim(dim, keepdim)";
    MinDim = "min_dim", Compute, [Int, Bool], "let (values, indices) = a.min_dim(dim, keepdim)";
    CrossEntropy = "cross_entropy", Compute, [Tensor], "logits.cross_entropy(&targets)";
    NllLoss = "nll_loss", Compute, [Tensor], "log_probs.nll_loss(&targets)";
    IndexSelect = "index_select", Compute, [Int, Tensor], "a.index_select(dim, &index)";
    Gather = "gather", Compute, [Int, Tensor], "a.gather(dim, &index)";
    ScatterAdd = "scatter_add", Compute, [Int, Tensor, Tensor], "a.scatter_add(dim, &index, &src)";
    Embedding = "embedding", Compute, [Tensor], "ids.embedding(&weight)";
    IndexCopy = "index_copy", Compute, [Int, Tensor, Tensor], "a.index_copy(dim, &index, &src)";
    IndexAdd = "index_add", Compute, [Int, Tensor, Tensor], "a.index_add(dim, &index, &src)";
    IndexCopyInplace = "index_copy_", DataMutation, [Int, Tensor, Tensor], "a.index_copy_(dim, &index, &src)";
    IndexAddInplace = "index_add_", DataMutation, [Int, Tensor, Tensor], "a.index_add_(dim, &index, &src)";
    Cat = "cat", Compute, [Tensors, Int], "Tensor::cat(&[&a, &b], dim)";
    Stack = "stack", Compute, [Tensors, Int], "Tensor::stack(&[&a, &b], dim)";
    // A factory: the node's receiver gives the device only (see `is_factory`).
    Arange = "arange", Compute, [Float, Float, Float, DType], "Tensor::arange(start, end, step, DType::I64, &x.device())";
}

impl OpSig {
    /// A static op (`Tensor::cat(&[..], dim)`): no receiver; its first
    /// parameter is a tensor list, spread over the node's first arguments.
    pub fn is_static(&self) -> bool {
        self.params.first() == Some(&ParamKind::Tensors)
    }

    /// A factory (`Tensor::arange(start, end, step, dtype, &x.device())`):
    /// written as a function of `Tensor`, its node's receiver is the
    /// tensor whose device the result takes, read for nothing else; the
    /// parameters follow it.
    pub fn is_factory(&self) -> bool {
        self.kind == OpKind::Arange
    }

    /// How many tensors a node of this op with `num_args` arguments has in
    /// its list (0 for an op that is not static).
    pub fn list_len(&self, num_args: usize) -> usize {
        if self.is_static() {
            (num_args + 1).saturating_sub(self.params.len())
        } else {
            0
        }
    }
}

impl OpKind {
    /// This op's row of [`OP_TABLE`].
    pub fn sig(self) -> &'static OpSig {
        &OP_TABLE[self as usize]
    }

    /// The method name, as in the DSL and the eager API.
    pub fn name(self) -> &'static str {
        self.sig().name
    }

    /// Whether the op computes, views, or mutates its receiver.
    pub fn class(self) -> OpClass {
        self.sig().class
    }

    /// Looks an op up by its method name.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OP_TABLE.iter().find(|s| s.name == name).map(|s| s.kind)
    }

    /// Whether the op writes its receiver (data or metadata) in place.
    pub fn is_inplace(self) -> bool {
        matches!(self.class(), OpClass::DataMutation | OpClass::MetadataMutation)
    }

    /// How the result relates to the receiver's storage.
    pub fn alias_effect(self) -> AliasEffect {
        match self {
            OpKind::Detach => AliasEffect::Detach,
            OpKind::Reshape | OpKind::Flatten => AliasEffect::MaybeView,
            OpKind::Contiguous => AliasEffect::MaybeSame,
            k if k.is_inplace() => AliasEffect::InPlace,
            k if k.class() == OpClass::View => AliasEffect::View,
            _ => AliasEffect::Fresh,
        }
    }

    /// Whether gradients flow through the op from its tensor arguments
    /// (a `to_dtype` to an integer dtype is decided by the node, see
    /// `Node::is_differentiable`).
    pub fn is_differentiable(self) -> bool {
        !matches!(
            self,
            OpKind::Eq
                | OpKind::Ne
                | OpKind::Lt
                | OpKind::Le
                | OpKind::Gt
                | OpKind::Ge
                | OpKind::ZerosLike
                | OpKind::OnesLike
                | OpKind::FullLike
                | OpKind::RandLike
                | OpKind::Detach
                | OpKind::Argmax
                | OpKind::Argmin
                | OpKind::Arange
        )
    }

    /// Ops that draw random numbers; the runtime functionalizes their RNG state.
    pub fn is_random(self) -> bool {
        matches!(self, OpKind::RandLike | OpKind::Dropout)
    }

    /// The unary elementwise math ops: one tensor in, one value out per
    /// element, no other argument (`neg`, `exp`, .., `expm1`).
    pub fn is_unary_elementwise(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Neg | Exp | Log | Sqrt | Rsqrt | Abs | Sin | Cos | Tanh | Sigmoid | Relu | Gelu | Silu | Reciprocal | Square | Log1p | Expm1
        )
    }

    /// The binary elementwise ops of two operands that broadcast: the
    /// arithmetic (`add` .. `minimum`) and the comparisons.
    pub fn is_binary_elementwise(self) -> bool {
        use OpKind::*;
        matches!(self, Add | Sub | Mul | Div | Pow | Maximum | Minimum) || self.is_comparison()
    }

    /// The comparisons, whose result is bool: `eq`, `ne`, `lt`, `le`, `gt`,
    /// `ge`.
    pub fn is_comparison(self) -> bool {
        use OpKind::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge)
    }

    /// The reductions over a set of dims that fold each row with one
    /// operation: `sum_dim`, `mean_dim` (a sum, then divided) and
    /// `amax_dim`.
    pub fn is_fold_reduction(self) -> bool {
        matches!(self, OpKind::SumDim | OpKind::MeanDim | OpKind::AmaxDim)
    }

    /// PyTorch's name of the op where it differs from the DSL's: the
    /// reductions over dims are `torch.sum`, `torch.mean`, `torch.amax`
    /// and `torch.var` with a `dim` argument. Any other op: its name.
    pub fn torch_name(self) -> &'static str {
        match self {
            OpKind::SumDim => "sum",
            OpKind::MeanDim => "mean",
            OpKind::AmaxDim => "amax",
            OpKind::VarDim => "var",
            k => k.name(),
        }
    }

    /// The out-of-place op an in-place data mutation computes (`add_` is
    /// `add` written back), if it has one.
    pub fn out_of_place(self) -> Option<OpKind> {
        Some(match self {
            OpKind::AddInplace => OpKind::Add,
            OpKind::SubInplace => OpKind::Sub,
            OpKind::MulInplace => OpKind::Mul,
            OpKind::DivInplace => OpKind::Div,
            OpKind::ReluInplace => OpKind::Relu,
            OpKind::SigmoidInplace => OpKind::Sigmoid,
            OpKind::ExpInplace => OpKind::Exp,
            OpKind::NegInplace => OpKind::Neg,
            OpKind::IndexCopyInplace => OpKind::IndexCopy,
            OpKind::IndexAddInplace => OpKind::IndexAdd,
            _ => return None,
        })
    }

    /// Whether gradients flow into the tensor at position `i` of a node's
    /// arguments (receiver = 0) when the node has `num_args` arguments.
    /// `where_`'s condition and the index tensors get none; of an
    /// `embedding`, only the weight (argument 1) does; of `cat` and
    /// `stack`, every tensor of the list.
    pub fn differentiable_arg(self, i: usize, num_args: usize) -> bool {
        match self {
            OpKind::Where => i == 0 || i == 2,
            // Masks, targets and `view_as`'s shape donor get none.
            OpKind::MaskedFill | OpKind::ViewAs | OpKind::CrossEntropy | OpKind::NllLoss => i == 0,
            OpKind::IndexSelect | OpKind::Gather => i == 0,
            OpKind::ScatterAdd | OpKind::IndexCopy | OpKind::IndexAdd | OpKind::IndexCopyInplace | OpKind::IndexAddInplace => {
                i == 0 || i == 3
            }
            OpKind::Embedding => i == 1,
            OpKind::Cat | OpKind::Stack => i < self.sig().list_len(num_args),
            _ if self.sig().params.is_empty() => i == 0,
            _ => i <= 1,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// Ops serialise as their method names: readable in the JSON the macro embeds,
// and stable when variants are reordered.
impl Serialize for OpKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for OpKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        OpKind::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown op `{name}`")))
    }
}

/// Every op name, for "did you mean" suggestions.
pub fn op_names() -> impl Iterator<Item = &'static str> {
    OP_TABLE.iter().map(|s| s.name)
}

/// Whether `op` is a reduction a kernel body may hold (one at most): it
/// folds the rows of its operand into one value each (`softmax` and
/// `log_softmax`: normalises each row).
pub fn is_reduction(op: OpKind) -> bool {
    use OpKind::*;
    matches!(op, Sum | Mean | SumDim | MeanDim | AmaxDim | VarDim | Softmax | LogSoftmax)
}

/// Whether a kernel body may compute `op`: elementwise ops whose result at
/// each position depends only on their operands at that position, and
/// which draw no random numbers. Comparisons give bool values, `where_`
/// selects, `to_dtype` casts; operands of different dtypes promote as in
/// eager (the runtime decides per call which dtypes it fuses).
pub fn is_elementwise(op: OpKind) -> bool {
    use OpKind::*;
    matches!(
        op,
        Add | Sub
            | Eq
            | Ne
            | Lt
            | Le
            | Gt
            | Ge
            | Where
            | ToDtype
            | Mul
            | Div
            | Pow
            | Maximum
            | Minimum
            | Neg
            | Exp
            | Log
            | Sqrt
            | Rsqrt
            | Abs
            | Sin
            | Cos
            | Tanh
            | Sigmoid
            | Relu
            | Gelu
            | Silu
            | Reciprocal
            | Square
            | Log1p
            | Expm1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_kind_order_and_names_are_unique() {
        for (i, sig) in OP_TABLE.iter().enumerate() {
            assert_eq!(sig.kind as usize, i, "{}", sig.name);
            assert_eq!(OpKind::from_name(sig.name), Some(sig.kind));
        }
        let mut names: Vec<_> = op_names().collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), OP_TABLE.len());
    }

    #[test]
    fn in_place_ops_end_with_underscore() {
        for sig in OP_TABLE {
            // `where_` is PyTorch's name for an out-of-place op; every other
            // trailing underscore means "in place".
            if sig.kind != OpKind::Where {
                assert_eq!(sig.name.ends_with('_'), sig.kind.is_inplace(), "{}", sig.name);
            }
        }
    }

    #[test]
    fn the_backend_classes_are_elementwise_or_reductions() {
        for sig in OP_TABLE {
            let k = sig.kind;
            if k.is_unary_elementwise() || k.is_binary_elementwise() {
                assert!(is_elementwise(k) && !k.is_random(), "{k}");
            }
            assert_eq!(k.is_unary_elementwise(), is_elementwise(k) && sig.params.is_empty(), "{k}");
            if k.is_fold_reduction() {
                assert!(is_reduction(k), "{k}");
            }
        }
        assert_eq!(OpKind::AmaxDim.torch_name(), "amax");
        assert_eq!(OpKind::Maximum.torch_name(), "maximum");
    }

    #[test]
    fn serde_uses_method_names() {
        let json = serde_json::to_string(&OpKind::MulInplace).unwrap();
        assert_eq!(json, "\"mul_\"");
        assert_eq!(serde_json::from_str::<OpKind>(&json).unwrap(), OpKind::MulInplace);
        assert!(serde_json::from_str::<OpKind>("\"nope\"").is_err());
    }
}
