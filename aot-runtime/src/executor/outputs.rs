//! [`Outputs`]: the tensors a compiled call returns. A function returns a
//! few tensors, so they are held inline and the code `#[aot_fn]`
//! generates takes them out one by one: a call allocates nothing for the
//! list (a `Vec` was one of the few allocations of a tiny call besides its
//! outputs). More outputs spill to a `Vec`.

use super::tensor_slots::TensorSlots;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;

/// How many outputs are held without allocating.
pub(crate) const INLINE_OUTPUTS: usize = 4;

/// The outputs of a call, in order (see the module doc).
#[derive(Debug)]
pub struct Outputs(TensorSlots<INLINE_OUTPUTS>);

impl Outputs {
    /// An empty list with room for `n` outputs.
    pub(crate) fn with_capacity(n: usize) -> Outputs {
        Outputs(TensorSlots::with_capacity(n))
    }

    /// Appends `t` (spilling to a `Vec` past the inline room).
    pub(crate) fn push(&mut self, t: Tensor) {
        self.0.push(t);
    }

    /// How many outputs the call produced.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the call produced no outputs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Output `k`, unless it was taken.
    pub(crate) fn get(&self, k: usize) -> Option<&Tensor> {
        self.0.get(k)?.as_ref()
    }

    /// The outputs not taken, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Tensor> {
        self.0.iter().flatten()
    }

    /// Takes output `k` out; `func` names the function in the error when
    /// there is none (the call returned fewer than its signature says, or
    /// it was taken already: a bug, reported rather than a panic).
    pub fn take(&mut self, k: usize, func: &str) -> Result<Tensor> {
        let slot = self.0.get_mut(k);
        slot.and_then(Option::take).ok_or_else(|| AotError::Internal {
            op: "aot_fn",
            msg: format!("`{func}` produced no output {k} (it produced {})", self.len()),
        })
    }

    /// The outputs not taken, as a `Vec`.
    pub fn into_vec(self) -> Vec<Tensor> {
        self.0.into_vec()
    }
}

impl From<Vec<Tensor>> for Outputs {
    fn from(v: Vec<Tensor>) -> Outputs {
        let mut out = Outputs::with_capacity(v.len());
        for t in v {
            out.push(t);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device};

    #[test]
    fn outputs_keep_their_order_inline_or_spilled() {
        let ts: Vec<Tensor> = (0..7).map(|i| Tensor::full(&[1], f64::from(i), DType::F32, &Device::Cpu).unwrap()).collect();
        for n in [0, 1, INLINE_OUTPUTS, INLINE_OUTPUTS + 1, 7] {
            let mut out = Outputs::with_capacity(n.min(2));
            for t in &ts[..n] {
                out.push(t.clone());
            }
            assert_eq!(out.len(), n);
            assert!(out.iter().zip(&ts).all(|(a, b)| a.same_tensor(b)), "{n}");
            assert!(out.get(n).is_none());
            if n > 0 {
                let last = out.take(n - 1, "f").unwrap();
                assert!(last.same_tensor(&ts[n - 1]));
                assert!(out.take(n - 1, "f").is_err(), "taken twice");
                assert!(out.get(n - 1).is_none());
            }
            let v = out.into_vec();
            assert_eq!(v.len(), n.saturating_sub(1));
            assert!(v.iter().zip(&ts).all(|(a, b)| a.same_tensor(b)));
            assert_eq!(Outputs::from(ts[..n].to_vec()).len(), n);
        }
        let err = Outputs::with_capacity(1).take(0, "w1").unwrap_err().to_string();
        assert!(err.contains("`w1` produced no output 0"), "{err}");
    }
}
