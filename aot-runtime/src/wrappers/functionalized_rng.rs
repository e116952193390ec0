//! `FunctionalizedRngRuntimeWrapper` (PyTorch's functionalized RNG),
//! done in the graph rather than around it.
//!
//! The generator is counter-based (Philox4x32-10, `cpu/random.rs`): its
//! state is `(seed, offset)`, and every random value is a pure function of
//! the state it was drawn at. In a compiled training graph, dropout is
//! three nodes (`aot_ir::transform::joint`):
//!
//! - `rng_take(x, p)` takes the draw for `x`'s mask: it returns the global
//!   generator's state before the draw as a value (a two-element i64 CPU
//!   tensor) and advances the generator past the draw, exactly as eager
//!   `dropout` would, so the call consumes the generator as eager does (the
//!   wrapper's pre-compile step adds the seed and offset as inputs, its
//!   epilogue advances the offset);
//! - `dropout_mask(x, state, p)` draws the mask at that state, a pure
//!   function of it that never touches the global generator;
//! - `x * mask`.
//!
//! So the partitioner may save the state (16 bytes) instead of the mask
//! and recompute the mask in the backward (PyTorch's "the backward reuses
//! the forward's seed and offset"), and a device computes the same bits
//! as the CPU (`aot_ir::kernel::random`).

use crate::backend::{Distribution, Rng};
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::ops::constant_dropout_mask;
use crate::storage::Storage;
use crate::tensor::Tensor;
use aot_ir::kernel::random::{lanes, RandomKind};

impl Tensor {
    /// Takes the generator's draw for dropout's mask of this tensor: the
    /// state `(seed, offset)` before it, as a two-element i64 CPU tensor,
    /// with the generator advanced past the draw as eager `dropout`
    /// advances it. A compiled graph's `rng_take`; the mask is then
    /// [`Tensor::dropout_mask_at`] of the state, in the forward and, when
    /// the backward recomputes it, there too (functionalized RNG).
    /// With `p` 0 or 1 the mask is constant and nothing is drawn.
    pub(crate) fn take_dropout_draw(&self, p: f64) -> Result<Tensor> {
        let per = lanes(RandomKind::Dropout, self.dtype());
        let n = if constant_dropout_mask(p).is_some() { 0 } else { self.numel() };
        let (seed, offset) = crate::ops::with_rng(|r| r.take(n, per));
        // The state's bits: a seed or an offset above i64::MAX wraps.
        Tensor::from_vec(vec![seed as i64, offset as i64], &[2], &crate::device::Device::Cpu)
    }

    /// Dropout's mask for this tensor drawn at `state` (see
    /// [`Tensor::take_dropout_draw`]), leaving the global generator alone.
    pub(crate) fn dropout_mask_at(&self, p: f64, state: &Tensor) -> Result<Tensor> {
        let s = state.to_vec::<i64>()?;
        let [seed, offset] = s[..] else {
            return Err(AotError::internal("dropout", format!("a generator state of {} elements", s.len())));
        };
        if let Some(fill) = constant_dropout_mask(p) {
            let data = Storage::full("dropout", &self.device(), self.dtype(), self.numel(), fill)?;
            return Ok(Tensor::from_storage(data, Layout::contiguous(&self.shape())));
        }
        let scale = 1.0 / (1.0 - p);
        let dist = Distribution::Dropout { p, scale };
        let mut rng = Rng::at(seed as u64, offset as u64);
        let data = Storage::random("dropout", &self.device(), dist, self.dtype(), self.numel(), &mut rng)?;
        Ok(Tensor::from_storage(data, Layout::contiguous(&self.shape())))
    }
}
