//! The layouts PyTorch gives freshly computed tensors.
//!
//! - [`elementwise_layout`]: the result of an elementwise op (unary, binary,
//!   comparison, `where`, clamp, casts inside an op) is laid out the way
//!   ATen's TensorIterator allocates it. If every operand has the output's
//!   shape, a fast path applies: all contiguous gives a contiguous result,
//!   all channels-last (4-D) a channels-last one, and all non-overlapping,
//!   dense and with identical strides those very strides. Otherwise the
//!   dims are sorted by the operands' strides (see [`iteration_order`]) and
//!   the result is dense in that order.
//! - [`preserve_layout`]: `clone()`, `to(dtype)` and the `*_like`
//!   constructors (`memory_format=torch.preserve_format`) keep the exact
//!   strides of a non-overlapping and dense input, and otherwise make a
//!   dense layout with the input's stride order.
//!
//! Reductions, softmax and matmul allocate contiguous results in PyTorch,
//! so they need no rule here. Every layout returned starts at offset 0 and
//! covers exactly `numel` elements.

use super::{Dims, Layout};

/// `-1`: `d0` is the faster-moving dim, `1`: `d1` is, `0`: the operands
/// cannot tell (a stride 0 on either side, or a tie they do not break).
fn compare_dims(shape: &[usize], strides: &[Dims], d0: usize, d1: usize) -> i8 {
    for s in strides {
        let (s0, s1) = (s[d0], s[d1]);
        // A broadcast dim says nothing about the order: ask the next operand.
        if s0 == 0 || s1 == 0 {
            continue;
        }
        if s0 != s1 {
            return if s0 < s1 { -1 } else { 1 };
        }
        // Equal strides: the smaller dim is taken to be the inner one; if
        // it already is, the next operand decides.
        if shape[d0] > shape[d1] {
            return 1;
        }
    }
    0
}

/// The dims of `shape`, fastest-moving first, as TensorIterator orders them
/// from the operands' (broadcast) strides: an insertion sort that starts
/// from the reversed (row-major) order, asks the operands in order, and
/// leaves a pair alone when no operand can order it. Because an undecided
/// comparison does not stop the scan, an element can move past neighbours
/// it was not compared with, exactly as in ATen.
pub(crate) fn iteration_order(shape: &[usize], strides: &[Dims]) -> Dims {
    let n = shape.len();
    let mut perm: Dims = (0..n).rev().collect();
    for i in 1..n {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            match compare_dims(shape, strides, perm[d0], perm[d1]) {
                1 => {
                    perm.swap(d0, d1);
                    d1 = d0;
                }
                -1 => break,
                _ => {}
            }
        }
    }
    perm
}

/// The strides of `operand` broadcast to `shape`, as the sort sees them:
/// 0 for new leading dims and for size-1 dims that are broadcast; a size-1
/// dim that stays size 1 keeps its stride and takes part in the sort.
fn broadcast_strides(operand: &Layout, shape: &[usize]) -> Dims {
    let mut s = Dims::zeros(shape.len());
    // Dims line up from the right; missing leading dims stay 0.
    for j in 1..=operand.rank().min(shape.len()) {
        let (d, e) = (shape.len() - j, operand.rank() - j);
        s[d] = if operand.shape[e] == 1 && shape[d] != 1 { 0 } else { operand.stride[e] };
    }
    s
}

/// Channels-last strides of a 4-D shape (N, C, H, W): C fastest, then W, H, N.
fn channels_last_strides(shape: &[usize]) -> Dims {
    let (c, h, w) = (shape[1], shape[2], shape[3]);
    Dims::from([c * w * h, 1, c * w, c])
}

/// PyTorch's `is_contiguous(memory_format=torch.channels_last)`: 4-D, and
/// dense in the order C, W, H, N (size-1 dims ignored).
fn is_channels_last(l: &Layout) -> bool {
    if l.rank() != 4 {
        return false;
    }
    let mut expected = 1;
    for d in [1, 3, 2, 0] {
        if l.shape[d] != 1 {
            if l.stride[d] != expected {
                return false;
            }
            expected *= l.shape[d];
        }
    }
    true
}

/// TensorIterator's fast path: every operand has the output's shape and
/// they agree on a memory format.
fn fast_setup(shape: &[usize], inputs: &[&Layout]) -> Option<Layout> {
    if inputs.iter().any(|l| l.shape != shape) {
        return None;
    }
    if inputs.iter().all(|l| l.is_contiguous()) {
        return Some(Layout::contiguous(shape));
    }
    if inputs.iter().all(|l| is_channels_last(l)) {
        return Some(Layout::new(shape, channels_last_strides(shape), 0));
    }
    let first = inputs.first()?;
    if inputs.iter().all(|l| l.is_non_overlapping_and_dense() && l.stride == first.stride) {
        return Some(Layout::new(shape, first.stride.clone(), 0));
    }
    None
}

/// The layout of the result of an elementwise op with broadcast `shape`
/// over `inputs` (in the op's operand order, not yet broadcast; a Python
/// number that PyTorch wraps into a 0-dim tensor counts as a 0-dim operand).
pub fn elementwise_layout(shape: &[usize], inputs: &[&Layout]) -> Layout {
    if let Some(l) = fast_setup(shape, inputs) {
        return l;
    }
    let strides: Vec<Dims> = inputs.iter().map(|l| broadcast_strides(l, shape)).collect();
    let perm = iteration_order(shape, &strides);
    let n = shape.len();
    if perm.iter().enumerate().all(|(j, &d)| d == n - 1 - j) {
        return Layout::contiguous(shape);
    }
    // Dense in the order found. Unlike contiguous strides, a size-0 dim
    // zeroes the strides of the dims outside it (the tensor is empty).
    let mut stride = Dims::zeros(n);
    let mut next = 1;
    for &d in &perm {
        stride[d] = next;
        next *= shape[d];
    }
    Layout::new(shape, stride, 0)
}

/// The layout of `empty_like(l)` with `memory_format=torch.preserve_format`
/// (also `clone()` and `to(dtype)`): `l`'s own strides if it is
/// non-overlapping and dense, else dense strides in `l`'s stride order.
pub fn preserve_layout(l: &Layout) -> Layout {
    if l.is_non_overlapping_and_dense() {
        return Layout::new(l.shape.clone(), l.stride.clone(), 0);
    }
    let n = l.rank();
    if n == 1 {
        return Layout::contiguous(&l.shape);
    }
    let perm = iteration_order(&l.shape, std::slice::from_ref(&l.stride));
    let mut stride = Dims::zeros(n);
    let mut next = 1;
    for &d in &perm {
        stride[d] = next;
        if l.shape[d] > 1 {
            next *= l.shape[d];
        }
    }
    Layout::new(l.shape.clone(), stride, 0)
}

/// True if `l` is a layout these rules produce for its shape: offset 0,
/// non-overlapping and dense. Kernels check it before writing.
pub fn is_dense_output(l: &Layout) -> bool {
    l.offset == 0 && l.is_non_overlapping_and_dense()
}
