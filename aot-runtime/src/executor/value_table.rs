//! [`Env`]: the values of one run of a functional graph, indexed by value.
//! A small graph's table is held inline, so that a small call allocates no
//! table of its own (it was one of the few allocations a tiny call made
//! besides its outputs); a larger one spills to a `Vec`.

use super::tensor_slots::TensorSlots;
use crate::tensor::Tensor;
use std::ops::{Deref, DerefMut};

/// How many values a table holds without allocating: a few tiny ops on a
/// handful of inputs (the W1 benchmark's function has 11). An empty slot is one word.
pub(crate) const INLINE_VALUES: usize = 16;

/// The value table of a run; reads as a `[Option<Tensor>]` of exactly the
/// graph's number of values.
pub(crate) struct Env(TensorSlots<INLINE_VALUES>);

impl Env {
    /// A table of `n` empty slots.
    pub(crate) fn new(n: usize) -> Env {
        Env(TensorSlots::new(n))
    }
}

impl Deref for Env {
    type Target = [Option<Tensor>];
    fn deref(&self) -> &[Option<Tensor>] {
        &self.0
    }
}

impl DerefMut for Env {
    fn deref_mut(&mut self) -> &mut [Option<Tensor>] {
        &mut self.0
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device};

    #[test]
    fn a_table_reads_as_its_slots_inline_or_not() {
        let t = Tensor::ones(&[2], DType::F32, &Device::Cpu).unwrap();
        for n in [0, 1, INLINE_VALUES, INLINE_VALUES + 1, 3 * INLINE_VALUES] {
            let mut env = Env::new(n);
            assert_eq!(env.len(), n);
            assert!(env.iter().all(Option::is_none));
            if let Some(last) = env.last_mut() {
                *last = Some(t.clone());
            }
            assert_eq!(env.iter().flatten().count(), n.min(1), "{n}");
            assert!(n == 0 || env[n - 1].as_ref().is_some_and(|x| x.same_tensor(&t)));
            assert!(env.get(n).is_none(), "no slot past the graph's values");
        }
    }
}
