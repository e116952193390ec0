//! PyTorch's scalar tail for `rsqrt` on f16/bf16.
//!
//! PyTorch's CPU kernels run the contiguous part of each inner row in
//! vectors of 32 half-precision lanes (AVX-512's `Vectorized<Half>` and
//! `Vectorized<BFloat16>`) and the rest of the row element by element. For
//! most ops both paths compute in f32 and round once, and so does the
//! kernel stage. `rsqrt`'s element-by-element path differs: it rounds the
//! square root to the element type, then rounds `1 / root` again, which is
//! one ulp away from the vector path for about a third of the inputs.
//!
//! So a single `rsqrt` kernel on f16/bf16 takes the vector path's result
//! (the op definition's `1 / sqrt`, rounded once) and then recomputes the
//! positions PyTorch computes element by element, as PyTorch does:
//! - in each inner row of `m` elements (the output's innermost dim after
//!   merging, as PyTorch's TensorIterator coalesces), the last `m % 32`;
//! - every element of a row whose input elements are not adjacent (an
//!   inner stride other than 0 or 1), which PyTorch reads one by one.
//!
//! PyTorch also splits outputs of more than 32768 elements between threads,
//! and each thread's range has its own tail; that depends on the thread
//! count and is not modelled. A fused kernel containing a half-precision
//! `rsqrt` among other ops is declined by the executor's planner, so the
//! op runs as this single-op kernel there too.

use super::{Program, Space};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::layout::Layout;
use aot_ir::OpKind;
use half::{bf16, f16};

/// Lanes of PyTorch's half-precision vectors on the CPUs the oracle comes
/// from (AVX-512).
const LANES: usize = 32;

/// Whether `p` is one `rsqrt` of an f16/bf16 input stored in its dtype.
pub(super) fn is_half_rsqrt(p: &Program<'_>) -> bool {
    let half = |d: Option<&DType>| matches!(d, Some(DType::F16 | DType::BF16));
    matches!(p.steps, [s] if s.op == OpKind::Rsqrt && half(p.dtypes.get(s.a)) && p.dtypes.get(s.a) == p.dtypes.get(p.stored))
}

/// Rewrites the element-by-element positions of `result` (`rsqrt` of
/// `src` read through `layout`, dense in `out`'s memory order).
pub(super) fn patch(src: &CpuStorage, layout: &Layout, out: &Layout, result: &mut CpuStorage) {
    let space = Space::new(out, &[(src, layout.clone())]);
    let row = space.sizes.last().copied().unwrap_or(1).max(1);
    let stride = space.strides.get(1).and_then(|s| s.last().copied()).unwrap_or(1);
    let from = if stride <= 1 { row / LANES * LANES } else { 0 };
    if from == row {
        return;
    }
    match (src, result) {
        (CpuStorage::F16(x), CpuStorage::F16(r)) => {
            rows(&space, row, from, stride, x, r, |v: f16| f16::from_f32(1.0 / f16::from_f32(v.to_f32().sqrt()).to_f32()))
        }
        (CpuStorage::BF16(x), CpuStorage::BF16(r)) => {
            rows(&space, row, from, stride, x, r, |v: bf16| bf16::from_f32(1.0 / bf16::from_f32(v.to_f32().sqrt()).to_f32()))
        }
        _ => {}
    }
}

/// Positions `from..row` of every inner row of `r` as `f` of the input.
fn rows<T: Copy>(space: &Space, row: usize, from: usize, stride: usize, x: &[T], r: &mut [T], f: impl Fn(T) -> T) {
    for start in (0..r.len()).step_by(row) {
        let (offs, _) = space.locate(start + from);
        for j in 0..row - from {
            if let (Some(&v), Some(o)) = (x.get(offs[1] + j * stride), r.get_mut(start + from + j)) {
                *o = f(v);
            }
        }
    }
}
