//! The backward-only primitives of the gradient rules ([`Prim`]), held by
//! [`Op::Prim`](super::Op::Prim) nodes (the joint graph, its partitions,
//! and kernel bodies), with which of them a kernel computes
//! ([`is_elementwise_prim`]) and whether a view chain places its view by
//! storage geometry ([`needs_geometry`]).

use super::node::ChainStep;
use crate::op::OpKind;
use serde::{Deserialize, Serialize};
use std::fmt;

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
    MatmulGrad {
        /// Whether the gradient is `b`'s rather than `a`'s.
        rhs: bool,
    },
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
    CatGrad {
        /// The input whose gradient this is.
        k: usize,
        /// How many tensors `cat` joined.
        n: usize,
    },
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
    /// The name in listings.
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
