//! Writing a kernel's result in a given dense layout.
//!
//! The elementwise kernels fill a fresh buffer in the row-major order of
//! their inputs' shape. A dense output layout (offset 0, no gaps, no
//! overlap) stores its elements in the row-major order of its dims sorted
//! by decreasing stride. So permuting every input's dims into that order
//! before the walk makes the buffer come out exactly as the output layout
//! addresses it; contiguous outputs need no permutation and keep every fast
//! path.

use crate::error::{AotError, Result};
use crate::layout::{is_dense_output, Dims, Layout};
use std::borrow::Cow;

/// The dim order in which a kernel walks its inputs to fill an output.
pub(crate) struct OutOrder {
    /// Output dims from outermost to innermost in memory; None: row-major.
    perm: Option<Dims>,
}

impl OutOrder {
    /// The walk for an output `out` of an op whose inputs have `shape`.
    pub(crate) fn new(op: &'static str, out: &Layout, shape: &[usize]) -> Result<OutOrder> {
        if out.shape() != shape {
            return Err(AotError::internal(op, format!("output layout of shape {:?} for inputs of shape {shape:?}", out.shape())));
        }
        // Contiguous at offset 0: dense, walked row-major.
        if out.offset() == 0 && out.is_contiguous() {
            return Ok(OutOrder { perm: None });
        }
        if !is_dense_output(out) {
            return Err(AotError::internal(
                op,
                format!("output layout {:?} / {:?} at offset {} is not dense", out.shape(), out.stride(), out.offset()),
            ));
        }
        if out.is_contiguous() {
            return Ok(OutOrder { perm: None });
        }
        // Dense: the non-trivial dims have distinct strides, and where
        // size-1 dims land does not change the order of the elements.
        let mut perm: Dims = (0..out.rank()).collect();
        perm.sort_by(|&a, &b| out.stride()[b].cmp(&out.stride()[a]));
        Ok(OutOrder { perm: Some(perm) })
    }

    /// `l` (of the op's shape) with its dims in the walk's order.
    pub(crate) fn input<'a>(&self, l: &'a Layout) -> Cow<'a, Layout> {
        match &self.perm {
            None => Cow::Borrowed(l),
            Some(p) => {
                let shape: Dims = p.iter().map(|&d| l.shape()[d]).collect();
                let stride: Dims = p.iter().map(|&d| l.stride()[d]).collect();
                Cow::Owned(Layout::new(shape, stride, l.offset()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::strided::map1;

    #[test]
    fn permuted_walk_fills_memory_order() {
        // out: shape [2, 3, 4] with dim 2 outermost, then 0, then 1.
        let out = Layout::new(vec![2, 3, 4], vec![3, 1, 6], 0);
        let src = Layout::contiguous(&[2, 3, 4]);
        let o = OutOrder::new("t", &out, &[2, 3, 4]).unwrap();
        let data: Vec<usize> = (0..24).collect();
        let buf = map1("t", &data, &o.input(&src), |x| x).unwrap();
        // Reading the buffer through `out` gives the input back in row-major order.
        let got: Vec<usize> = out.offsets().map(|i| buf[i]).collect();
        assert_eq!(got, data);
    }

    #[test]
    fn rejects_other_shapes_and_gaps() {
        let c = Layout::contiguous(&[2, 3]);
        assert!(OutOrder::new("t", &c, &[3, 2]).is_err());
        assert!(OutOrder::new("t", &Layout::new(vec![2, 3], vec![4, 1], 0), &[2, 3]).is_err());
        assert!(OutOrder::new("t", &Layout::new(vec![2, 3], vec![3, 1], 1), &[2, 3]).is_err());
        assert!(OutOrder::new("t", &Layout::new(vec![2, 3], vec![0, 1], 0), &[2, 3]).is_err());
        assert!(OutOrder::new("t", &c, &[2, 3]).unwrap().perm.is_none());
    }
}
