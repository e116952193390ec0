//! [`TensorSlots`]: a list of tensor slots whose first `N` are held inline,
//! so that the short lists of a small call (its value table, its outputs)
//! allocate nothing; a longer one spills to a `Vec`.

use crate::tensor::Tensor;
use std::ops::{Deref, DerefMut};

/// Reads as the `[Option<Tensor>]` of its `len` slots.
#[derive(Debug)]
pub(crate) enum TensorSlots<const N: usize> {
    Inline { len: usize, slots: [Option<Tensor>; N] },
    Heap(Vec<Option<Tensor>>),
}

impl<const N: usize> TensorSlots<N> {
    /// `n` empty slots.
    pub(crate) fn new(n: usize) -> Self {
        if n <= N {
            TensorSlots::Inline { len: n, slots: [const { None }; N] }
        } else {
            TensorSlots::Heap(vec![None; n])
        }
    }

    /// No slots, with room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Self {
        if n <= N {
            TensorSlots::Inline { len: 0, slots: [const { None }; N] }
        } else {
            TensorSlots::Heap(Vec::with_capacity(n))
        }
    }

    /// Appends a slot holding `t` (spilling to a `Vec` past the inline room).
    pub(crate) fn push(&mut self, t: Tensor) {
        match self {
            TensorSlots::Inline { len, slots } if *len < N => {
                slots[*len] = Some(t);
                *len += 1;
            }
            TensorSlots::Inline { slots, .. } => {
                let mut v: Vec<Option<Tensor>> = slots.iter_mut().map(Option::take).collect();
                v.push(Some(t));
                *self = TensorSlots::Heap(v);
            }
            TensorSlots::Heap(v) => v.push(Some(t)),
        }
    }

    /// The tensors of the slots not empty, in order.
    pub(crate) fn into_vec(self) -> Vec<Tensor> {
        match self {
            TensorSlots::Inline { len, slots } => slots.into_iter().take(len).flatten().collect(),
            TensorSlots::Heap(v) => v.into_iter().flatten().collect(),
        }
    }
}

impl<const N: usize> Deref for TensorSlots<N> {
    type Target = [Option<Tensor>];
    fn deref(&self) -> &[Option<Tensor>] {
        match self {
            TensorSlots::Inline { len, slots } => &slots[..*len],
            TensorSlots::Heap(v) => v,
        }
    }
}

impl<const N: usize> DerefMut for TensorSlots<N> {
    fn deref_mut(&mut self) -> &mut [Option<Tensor>] {
        match self {
            TensorSlots::Inline { len, slots } => &mut slots[..*len],
            TensorSlots::Heap(v) => v,
        }
    }
}
