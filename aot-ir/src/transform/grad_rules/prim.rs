//! The backward-only primitives the rules use where a gradient depends on
//! shapes that are only known at run time.

use crate::op::OpKind;
use crate::transform::functionalize::ChainStep;
use std::fmt;

/// Backward-only primitives of the joint IR. Arguments are listed as
/// `[..]`; `like` is a forward value whose runtime shape/dtype is meant.
#[derive(Clone, Debug, PartialEq)]
pub enum Prim {
    /// `[g, like]`: `g` summed down to `like`'s shape (undoing broadcasting)
    /// and cast to its dtype.
    SumToLike,
    /// `[x, like]`: `x` cast to `like`'s dtype.
    CastLike,
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
    /// `[x, p]`: dropout's mask for `x` (`1/(1-p)` where kept, 0 where
    /// dropped), drawn from the generator exactly as eager `dropout` draws
    /// it. Random: never recomputed, never merged with another.
    DropoutMask,
}

impl Prim {
    pub fn name(&self) -> &'static str {
        match self {
            Prim::SumToLike => "sum_to_like",
            Prim::CastLike => "cast_like",
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
            Prim::DropoutMask => "dropout_mask",
        }
    }

    /// Elementwise or layout-only: cheap to recompute in the backward.
    pub fn is_cheap(&self) -> bool {
        !matches!(self, Prim::MatmulGrad { .. } | Prim::DropoutMask)
    }

    /// Argument positions of which only the shape and dtype are read.
    pub fn meta_args(&self) -> &'static [usize] {
        match self {
            Prim::SumToLike | Prim::CastLike | Prim::ReshapeLike | Prim::ExpandLike | Prim::KeepDims => &[1],
            Prim::InvCount(_) | Prim::MetaOf | Prim::DropoutMask => &[0],
            // as_strided addresses root's storage: its geometry is needed
            Prim::ViewGrad(c) | Prim::ViewOf(c) | Prim::ViewScatter(c) if !needs_geometry(c) => &[0],
            _ => &[],
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prim::InvCount(s) => write!(fm, "inv_count[{s:?}]"),
            _ => fm.write_str(self.name()),
        }
    }
}

/// Whether a chain places its view by absolute storage geometry.
pub fn needs_geometry(chain: &[ChainStep]) -> bool {
    chain.iter().any(|s| matches!(s, ChainStep::ArgGeometry(_) | ChainStep::View { op: OpKind::AsStrided, .. }))
}
