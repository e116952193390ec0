//! The one node type of every stage (in the spirit of jaxpr's equations and
//! tinygrad's `UOp`): the source graph, the functional graph, the joint
//! graph and its forward/backward partitions all hold [`Node`]s, and differ
//! only in which primitives ([`Op`]) they admit (`verify::Stage` says
//! which) and in the data their containers carry.
//!
//! - [`Op::Dsl`]: an op of the DSL, as written (`OpKind`). In the source
//!   it may be in place (then the node defines no value); past
//!   functionalization it only computes or views.
//! - [`Op::Primal`]: the base of an input group (PyTorch's primals).
//! - [`Op::Tangent`]: the gradient of a forward output (joint only).
//! - [`Op::Cow`], [`Op::Regen`], [`Op::Mutate`]: what functionalization
//!   introduces: the copy of an input before its first write, a view chain
//!   replayed on a root version, and a write as a new root version
//!   (PyTorch's `*_scatter`).
//! - [`Op::Prim`]: the backward-only primitives of the gradient rules.
//! - [`Op::Kernel`], [`Op::Load`]: the kernel stage: a group of
//!   elementwise nodes computed by one generated kernel, whose body reads
//!   its inputs with `Load` ([`crate::kernel`]).
//! - [`Op::Call`]: a call of another `#[aot_fn]` function, in the source
//!   as traced only: the runtime inlines the callee's graph in its place
//!   before anything analyses the graph ([`crate::transform::inline`]).

use crate::kernel::Kernel;
use crate::op::{AliasEffect, OpClass, OpKind};
use crate::types::{Arg, ScalarExpr, SpanId, ValueId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One op application: `out = op(args..)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub op: Op,
    /// Receiver first, then the op's arguments (see [`Op`] for the
    /// primitives' arguments).
    pub args: Vec<Arg>,
    /// The defined value; `None` only for a source in-place op, whose
    /// result is its target ([`Node::target`]) with its identity unchanged.
    pub out: Option<ValueId>,
    /// Inside a `no_grad! { .. }` region (past functionalization also: a
    /// write through a `detach()` alias, invisible to autograd).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_grad: bool,
    pub span: SpanId,
}

/// What a node computes. Arguments are in [`Node::args`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A DSL op, arguments as in the source. `check_alias` (past the
    /// source, for a `reshape`/`contiguous` whose aliasing matters): whether
    /// the plan assumed the result aliases its receiver; the executor
    /// checks it.
    Dsl {
        op: OpKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check_alias: Option<bool>,
    },
    /// `[]`: the base of input group `.0`, as the runtime provides it.
    Primal(usize),
    /// `[]`: tangent `.0` (the gradient of a forward output).
    Tangent(usize),
    /// `[src]`: a copy of `src`'s whole storage with `src`'s geometry: the
    /// first version of an input group that the graph may write.
    Cow,
    /// `[root]`: the chain replayed on root version `root` (a view).
    Regen(Vec<ChainStep>),
    /// `[root, view, args..]`: the next version of `root`: the in-place
    /// `op` applied to `view` (the region `chain` selects of `root`) with
    /// `args`.
    Mutate { op: OpKind, chain: Vec<ChainStep> },
    /// A backward-only primitive.
    Prim(Prim),
    /// `[]`, in a kernel body only: the kernel's input `.0`.
    Load(usize),
    /// `[inputs..]`: a generated kernel (the kernel stage; see
    /// [`crate::kernel`]), computing its body on its inputs.
    Kernel(Box<Kernel>),
    /// `[args..]` (the call's arguments that are not structs, in order):
    /// a call of another `#[aot_fn]` function, which defines the values
    /// [`CallSite::results`] names. Only in a traced source graph; the
    /// runtime inlines it ([`crate::transform::inline`]).
    Call(Box<CallSite>),
}

pub use crate::transform::inline::CallSite;

impl From<OpKind> for Op {
    fn from(op: OpKind) -> Op {
        Op::Dsl { op, check_alias: None }
    }
}

impl Op {
    /// The name in listings.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Dsl { op, .. } => op.name(),
            Op::Primal(_) => "primal",
            Op::Tangent(_) => "tangent",
            Op::Cow => "copy_storage",
            Op::Regen(_) => "regen",
            Op::Mutate { .. } => "scatter",
            Op::Prim(p) => p.name(),
            Op::Load(_) => "load",
            Op::Kernel(_) => "kernel",
            Op::Call(_) => "call",
        }
    }
}

impl Node {
    /// A node computing `op` on `args` into `out`.
    pub fn new(op: impl Into<Op>, args: Vec<Arg>, out: Option<ValueId>) -> Node {
        Node { op: op.into(), args, out, no_grad: false, span: SpanId(0) }
    }

    /// The DSL op, for [`Op::Dsl`] nodes (every node of the source).
    pub fn kind(&self) -> Option<OpKind> {
        match self.op {
            Op::Dsl { op, .. } => Some(op),
            _ => None,
        }
    }

    /// Whether this is a DSL node computing `op`.
    pub fn is(&self, op: OpKind) -> bool {
        self.kind() == Some(op)
    }

    /// The value the node defines. Past the source every node defines one
    /// (the verifier checks); a source in-place op answers an id that
    /// names no value.
    pub fn value(&self) -> ValueId {
        self.out.unwrap_or(ValueId(u32::MAX))
    }

    /// The receiver (the first argument), when it is a tensor.
    pub fn receiver(&self) -> Option<ValueId> {
        self.args.first().and_then(Arg::as_tensor)
    }

    /// The tensor a source in-place op writes; `None` for other nodes.
    pub fn target(&self) -> Option<ValueId> {
        if self.kind().is_some_and(OpKind::is_inplace) {
            self.receiver()
        } else {
            None
        }
    }

    /// The value this node's expression evaluates to: its output, or for an
    /// in-place op its target.
    pub fn result(&self) -> Option<ValueId> {
        self.out.or_else(|| self.target())
    }

    /// Every tensor the node reads, receiver included.
    pub fn tensor_args(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().filter_map(Arg::as_tensor)
    }

    /// Every scalar expression the node reads (scalars and list elements).
    pub fn scalar_args(&self) -> impl Iterator<Item = &ScalarExpr> + '_ {
        self.args.iter().flat_map(|a| match a {
            Arg::Scalar(s) => std::slice::from_ref(s).iter(),
            Arg::Ints(v) => v.iter(),
            _ => [].iter(),
        })
    }

    /// Whether gradients can flow through this DSL node at all.
    pub fn is_differentiable(&self) -> bool {
        let Some(op) = self.kind() else { return false };
        if self.no_grad || !op.is_differentiable() {
            return false;
        }
        match (op, self.args.get(1)) {
            (OpKind::ToDtype, Some(Arg::DType(d))) => d.is_float(),
            _ => true,
        }
    }

    /// The class of a DSL node; a primitive counts as what it does to
    /// storage (`regen` views, `scatter` writes a new version, the others
    /// compute).
    pub fn class(&self) -> OpClass {
        match &self.op {
            Op::Dsl { op, .. } => op.class(),
            Op::Regen(_) => OpClass::View,
            Op::Mutate { .. } => OpClass::DataMutation,
            _ => OpClass::Compute,
        }
    }

    /// How the result relates to the receiver's storage: the DSL op's
    /// effect; `regen` views, the other primitives make new values.
    pub fn alias_effect(&self) -> AliasEffect {
        match &self.op {
            Op::Dsl { op, .. } => op.alias_effect(),
            Op::Regen(_) => AliasEffect::View,
            _ => AliasEffect::Fresh,
        }
    }

    /// Whether argument `i` is read for its shape and dtype only.
    pub fn is_meta_arg(&self, i: usize) -> bool {
        match &self.op {
            Op::Prim(p) => p.is_meta_arg(i),
            // a factory's receiver gives the result's device only
            Op::Dsl { op: OpKind::ZerosLike | OpKind::OnesLike | OpKind::FullLike | OpKind::Arange, .. } => i == 0,
            Op::Dsl { op: OpKind::ViewAs, .. } => i == 1,
            _ => false,
        }
    }

    /// The tensors whose data the node reads.
    pub fn data_uses(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().enumerate().filter(|(i, _)| !self.is_meta_arg(*i)).filter_map(|(_, a)| a.as_tensor())
    }

    /// Elementwise or view-like: cheap to recompute rather than save.
    pub fn is_cheap(&self) -> bool {
        match &self.op {
            Op::Primal(_) | Op::Tangent(_) | Op::Cow | Op::Mutate { .. } | Op::Call(_) => false,
            Op::Regen(_) | Op::Kernel(_) => true,
            Op::Load(_) => false,
            Op::Prim(p) => p.is_cheap(),
            Op::Dsl { op, .. } => {
                !op.is_random()
                    && !matches!(op, OpKind::Matmul | OpKind::Mm | OpKind::Bmm | OpKind::Softmax | OpKind::LogSoftmax | OpKind::VarDim)
                    // scans over a dim and the losses: not worth recomputing
                    && !matches!(
                        op,
                        OpKind::Cumsum | OpKind::MaxDim | OpKind::MinDim | OpKind::Argmax | OpKind::Argmin | OpKind::CrossEntropy | OpKind::NllLoss
                    )
            }
        }
    }
}

/// One step from a root to a value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ChainStep {
    /// `as_strided` to the geometry the argument at this parameter position
    /// has at call time: regenerates an aliased input from its group's base.
    ArgGeometry(usize),
    /// A view op with its arguments after the receiver.
    View { op: OpKind, args: Vec<Arg> },
}

/// Backward-only primitives of the gradient rules. Arguments are listed as
/// `[..]`; `like` is a forward value whose runtime shape/dtype is meant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Prim {
    /// `[g, like]`: `g` summed down to `like`'s shape (undoing broadcasting)
    /// and cast to its dtype.
    SumToLike,
    /// `[x, like]`: `x` cast to `like`'s dtype.
    CastLike,
    /// `[x]`: `x` in the dtype its math is done in (PyTorch's opmath
    /// type): f32 for f16/bf16, else `x` itself. The rules whose backward
    /// PyTorch computes in one kernel run on such operands and cast the
    /// result back, so a half-precision gradient is rounded once.
    OpMath,
    /// `[g, like]`: `g` reshaped to `like`'s shape.
    ReshapeLike,
    /// `[g, like]`: `g` expanded to `like`'s shape, materialized.
    ExpandLike,
    /// `[g, like, dims, keepdim]`: the output of a reduction of `like` over
    /// `dims` (empty: all) with the reduced dims put back as size 1 (none
    /// for a 0-d `like`, whose dim 0/-1 reduces nothing).
    KeepDims,
    /// `[like, dims, correction]`: a 0-dim tensor of `like`'s dtype holding
    /// `scale / max(count - correction, 0)`, count = elements reduced over
    /// `dims` (1 for a 0-d `like`).
    InvCount(f64),
    /// `[root, g]`: the gradient of `root` from the gradient `g` of the view
    /// `chain` replays on it: `g` scatter-added into zeros of root's shape.
    ViewGrad(Vec<ChainStep>),
    /// `[root, g]`: the region of `g` (shaped like `root`) that `chain`
    /// selects, materialized.
    ViewOf(Vec<ChainStep>),
    /// `[root, base, src]`: a copy of `base` (shaped like `root`) with the
    /// region `chain` selects replaced by `src`.
    ViewScatter(Vec<ChainStep>),
    /// `[g, a, b]`: the gradient of `a` (`rhs` false) or `b` of `a.matmul(b)`,
    /// with matmul's 1-D and batch-broadcasting rules.
    MatmulGrad { rhs: bool },
    /// `[x]`: a one-element stand-in with `x`'s shape and dtype (stride 0),
    /// saved for the backward when only `x`'s metadata is read there.
    MetaOf,
    /// `[x, p]`: takes dropout's draw for `x` from the generator: its state
    /// `(seed, offset)` before the draw, as a two-element i64 tensor, and
    /// advances it by what the mask consumes, as eager `dropout` does
    /// (PyTorch's functionalized RNG: the state becomes a value). Random:
    /// runs once, in the forward, in program order; never merged.
    RngTake,
    /// `[x, state, p]`: dropout's mask for `x` (`1/(1-p)` where kept, 0
    /// where dropped) drawn at `state` (an `RngTake`'s value): a pure
    /// function of it, so the backward may recompute the mask from the
    /// saved state instead of saving the mask.
    DropoutMask,
    /// `[g, like, targets]`: the gradient of `nll_loss(like, targets)` for
    /// its output gradient `g`: zeros of `like`'s shape and dtype holding
    /// `-g / count` at each `(i, targets[i])` (count: the targets not
    /// ignored).
    NllLossGrad,
    /// `[g, dim]`: the cumulative sum of `g` along `dim` taken from the end
    /// (cumsum's gradient), summed in the same order as `cumsum`.
    CumsumRev,
    /// `[g, x_0, .., x_{n-1}, dim]`: the gradient of `x_k` in
    /// `cat(&[x_0, ..], dim)`: the slice of `g` along `dim` where `x_k`
    /// was put (the inputs' shapes give the offsets).
    CatGrad { k: usize, n: usize },
    /// `[g, ids, weight]`: the gradient of `weight` in
    /// `ids.embedding(weight)`: the rows of `g` added into zeros shaped
    /// like `weight`, at the rows `ids` names.
    EmbeddingGrad,
    /// `[g, index, src, dim]`: the gradient of `src` in
    /// `x.scatter_add(dim, index, src)`: `g.gather(dim, index)`, put in the
    /// leading corner of zeros shaped like `src` when the index is smaller.
    ScatterSrcGrad,
}

impl Prim {
    pub fn name(&self) -> &'static str {
        match self {
            Prim::SumToLike => "sum_to_like",
            Prim::CastLike => "cast_like",
            Prim::OpMath => "opmath",
            Prim::ReshapeLike => "reshape_like",
            Prim::ExpandLike => "expand_like",
            Prim::KeepDims => "keep_dims",
            Prim::InvCount(_) => "inv_count",
            Prim::ViewGrad(_) => "view_grad",
            Prim::ViewOf(_) => "view_of",
            Prim::ViewScatter(_) => "view_scatter",
            Prim::MatmulGrad { rhs: false } => "matmul_grad_a",
            Prim::MatmulGrad { rhs: true } => "matmul_grad_b",
            Prim::MetaOf => "meta_of",
            Prim::RngTake => "rng_take",
            Prim::DropoutMask => "dropout_mask",
            Prim::NllLossGrad => "nll_loss_grad",
            Prim::CumsumRev => "cumsum_rev",
            Prim::CatGrad { .. } => "cat_grad",
            Prim::EmbeddingGrad => "embedding_grad",
            Prim::ScatterSrcGrad => "scatter_src_grad",
        }
    }

    /// Elementwise, layout-only or a pure draw: cheap to recompute in the
    /// backward.
    pub fn is_cheap(&self) -> bool {
        !matches!(self, Prim::MatmulGrad { .. } | Prim::RngTake)
    }

    /// Whether only the shape and dtype of argument `i` are read.
    pub fn is_meta_arg(&self, i: usize) -> bool {
        match self {
            Prim::CatGrad { n, .. } => (1..=*n).contains(&i),
            Prim::EmbeddingGrad | Prim::ScatterSrcGrad => i == 2,
            _ => self.meta_args().contains(&i),
        }
    }

    /// The meta argument positions of the fixed-arity primitives.
    fn meta_args(&self) -> &'static [usize] {
        match self {
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike | Prim::KeepDims | Prim::NllLossGrad => &[1],
            Prim::InvCount(_) | Prim::MetaOf | Prim::RngTake | Prim::DropoutMask => &[0],
            // as_strided addresses root's storage: its geometry is needed
            Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c) if !needs_geometry(c) => &[0],
            _ => &[],
        }
    }

    /// The number of arguments the primitive takes.
    pub fn arity(&self) -> usize {
        match self {
            Prim::MetaOf | Prim::OpMath => 1,
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike => 2,
            Prim::ViewGrad(_) | Prim::ViewOf(_) | Prim::RngTake | Prim::CumsumRev => 2,
            Prim::InvCount(_)
            | Prim::ViewScatter(_)
            | Prim::MatmulGrad { .. }
            | Prim::DropoutMask
            | Prim::NllLossGrad
            | Prim::EmbeddingGrad => 3,
            Prim::KeepDims | Prim::ScatterSrcGrad => 4,
            Prim::CatGrad { n, .. } => n + 2,
        }
    }

    /// How many of the arguments, from the first, are tensors (the rest
    /// are dims and scalars).
    pub fn num_tensors(&self) -> usize {
        match self {
            Prim::KeepDims | Prim::DropoutMask => 2,
            Prim::InvCount(_) | Prim::RngTake | Prim::CumsumRev => 1,
            Prim::CatGrad { n, .. } => n + 1,
            Prim::ScatterSrcGrad => 3,
            _ => self.arity(),
        }
    }

    /// The view chain a view primitive moves a gradient through.
    pub fn chain(&self) -> Option<&[ChainStep]> {
        match self {
            Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c) => Some(c),
            _ => None,
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prim::InvCount(s) => write!(fm, "inv_count[{s:?}]"),
            Prim::CatGrad { k, n } => write!(fm, "cat_grad[{k}/{n}]"),
            _ => fm.write_str(self.name()),
        }
    }
}

/// Whether a kernel body may compute the backward primitive `p`: only
/// `cast_like` (a cast to another value's dtype, which reads nothing of
/// that value but its dtype) and `opmath` (a cast of f16/bf16 to f32).
pub fn is_elementwise_prim(p: &Prim) -> bool {
    matches!(p, Prim::CastLike | Prim::OpMath)
}

/// Whether a chain places its view by absolute storage geometry.
pub fn needs_geometry(chain: &[ChainStep]) -> bool {
    chain.iter().any(|s| matches!(s, ChainStep::ArgGeometry(_) | ChainStep::View { op: OpKind::AsStrided, .. }))
}
