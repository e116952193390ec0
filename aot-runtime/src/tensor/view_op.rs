//! [`ViewOp`]: a view op with its arguments, as the history of a view
//! records it and as a view chain replays it.

use crate::error::Result;
use crate::layout::Layout;

/// A view op with normalised arguments: the data of its gradient rule and
/// of its replay on another tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ViewOp {
    View(Vec<usize>),
    Transpose(usize, usize),
    Permute(Vec<usize>),
    Unsqueeze(usize),
    Squeeze(usize),
    Expand(Vec<usize>),
    Select(usize, usize),
    Slice { dim: usize, start: usize, end: usize, step: usize },
    Diagonal,
    AsStrided { size: Vec<usize>, stride: Vec<usize>, offset: usize },
}

impl ViewOp {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ViewOp::View(_) => "view",
            ViewOp::Transpose(..) => "transpose",
            ViewOp::Permute(_) => "permute",
            ViewOp::Unsqueeze(_) => "unsqueeze",
            ViewOp::Squeeze(_) => "squeeze",
            ViewOp::Expand(_) => "expand",
            ViewOp::Select(..) => "select",
            ViewOp::Slice { .. } => "slice",
            ViewOp::Diagonal => "diagonal",
            ViewOp::AsStrided { .. } => "as_strided",
        }
    }

    /// The layout this op gives when applied to `l` (`storage_len` bounds as_strided).
    pub(crate) fn apply(&self, l: &Layout, storage_len: usize) -> Result<Layout> {
        let op = self.name();
        let i = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        match self {
            ViewOp::View(s) => l.view(op, &i(s)),
            ViewOp::Transpose(a, b) => l.transpose(op, *a as i64, *b as i64),
            ViewOp::Permute(d) => l.permute(op, &i(d)),
            ViewOp::Unsqueeze(d) => l.unsqueeze(op, *d as i64),
            ViewOp::Squeeze(d) => l.squeeze(op, *d as i64),
            ViewOp::Expand(s) => l.expand(op, &i(s)),
            ViewOp::Select(d, idx) => l.select(op, *d as i64, *idx as i64),
            ViewOp::Slice { dim, start, end, step } => l.slice(op, *dim as i64, *start as i64, *end as i64, *step as i64),
            ViewOp::Diagonal => l.diagonal(op, 0, 0, 1),
            ViewOp::AsStrided { size, stride, offset } => Layout::as_strided(op, size, stride, *offset, storage_len),
        }
    }
}
