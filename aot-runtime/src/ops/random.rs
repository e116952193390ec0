//! The random ops (`rand_like`, `dropout`) and the global generator they
//! draw from (`manual_seed`, `rng_state`).

use crate::backend::{Distribution, Rng};
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::tensor::{record, BackwardOp, SavedTensor};
use std::cell::Cell;
use std::sync::Mutex;

static GLOBAL_RNG: Mutex<Option<Rng>> = Mutex::new(None);

thread_local! {
    /// While a run whose draws must not count is under way on this thread
    /// (see [`with_private_rng`]), the generator its draws come from.
    static PRIVATE_RNG: Cell<Option<Rng>> = const { Cell::new(None) };
}

/// Seeds the generator behind `rand_like` and `dropout` (PyTorch's
/// `manual_seed`): its state becomes `(seed, 0)`.
///
/// The generator is counter-based (Philox4x32-10): its state is the seed
/// and an offset, the number of 128-bit blocks drawn so far. A draw of `n`
/// values advances the offset by `n / 4` blocks rounded up (`n / 2` for
/// uniform f64), and the values depend only on the state, on every device.
/// Before the first call the seed is 0.
///
/// ```
/// use aot_runtime::prelude::*;
/// aot_runtime::manual_seed(7);
/// let x = Tensor::zeros(&[10], DType::F32, &Device::Cpu)?;
/// let a = x.rand_like()?;
/// assert_eq!(aot_runtime::rng_state(), (7, 3));
/// aot_runtime::set_rng_state(7, 0);
/// assert_eq!(x.rand_like()?.to_vec::<f32>()?, a.to_vec::<f32>()?);
/// # Ok::<(), aot_runtime::AotError>(())
/// ```
pub fn manual_seed(seed: u64) {
    set_rng_state(seed, 0);
}

/// The global generator's state, `(seed, offset)` (see [`manual_seed`]).
pub fn rng_state() -> (u64, u64) {
    with_rng(|r| r.state())
}

/// Sets the global generator's state, as returned by [`rng_state`].
pub fn set_rng_state(seed: u64, offset: u64) {
    *GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner()) = Some(Rng::at(seed, offset));
}

pub(crate) fn with_rng<R>(f: impl FnOnce(&mut Rng) -> R) -> R {
    if let Some(mut r) = PRIVATE_RNG.with(Cell::get) {
        let out = f(&mut r);
        PRIVATE_RNG.with(|c| c.set(Some(r)));
        return out;
    }
    let mut g = GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Rng::new(0)))
}

/// Runs `f` with this thread's draws coming from a copy of the generator's
/// current state, dropped afterwards: the global generator, and so every
/// other thread, sees nothing of them. For runs that only look (a dry run
/// on replicas, `explain()`'s run on copies): taking and giving back the
/// global state instead would also give back what other threads drew
/// meanwhile.
pub(crate) fn with_private_rng<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            PRIVATE_RNG.with(|c| c.set(self.0));
        }
    }
    let start = PRIVATE_RNG.with(Cell::get).or_else(rng_snapshot).unwrap_or_else(|| Rng::new(0));
    let _restore = Restore(PRIVATE_RNG.with(|c| c.replace(Some(start))));
    f()
}

impl Tensor {
    /// Uniform samples in [0, 1) of this shape and dtype, from the global
    /// generator, laid out like `self` (preserve format).
    pub fn rand_like(&self) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(AotError::dtype("rand_like", format!("rand_like is only defined for floating dtypes, got {}", self.dtype())));
        }
        let n = self.numel();
        let data = with_rng(|r| Storage::random("rand_like", &self.device(), Distribution::Uniform, self.dtype(), n, r))?;
        Ok(self.like_with(data))
    }

    /// Dropout in training mode: zeroes each element with probability `p`
    /// and scales the rest by `1/(1-p)`.
    ///
    /// `p = 0` and `p = 1` draw nothing: the generator does not advance, as
    /// in PyTorch. `p = 0` returns a new tensor equal to the input, which is
    /// what PyTorch's AOTAutograd traces (`input.clone()`); PyTorch's eager
    /// CPU kernel returns the input itself instead. Eager follows the traced
    /// form so that a compiled call and its eager run agree on aliasing.
    ///
    /// ```
    /// use aot_runtime::prelude::*;
    /// aot_runtime::manual_seed(0);
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &Device::Cpu)?;
    /// let a = x.dropout(0.0)?;
    /// assert_eq!(a.to_vec::<f32>()?, [1.0, 2.0]);
    /// assert!(!a.same_tensor(&x));
    /// // Nothing was drawn: the next draw is the first after the seed.
    /// let r = x.rand_like()?.to_vec::<f32>()?;
    /// aot_runtime::manual_seed(0);
    /// assert_eq!(x.rand_like()?.to_vec::<f32>()?, r);
    /// # Ok::<(), AotError>(())
    /// ```
    pub fn dropout(&self, p: f64) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(AotError::unsupported("dropout", format!("dropout probability has to be between 0 and 1, but got {p}")));
        }
        if !self.dtype().is_float() {
            return Err(AotError::dtype("dropout", format!("dropout is only defined for floating dtypes, got {}", self.dtype())));
        }
        let mask = self.dropout_mask(p)?;
        let out = crate::tensor::with_grad_mode(false, || self.mul(&mask))?;
        record(&out, &[Some(self)], || Ok(BackwardOp::Dropout { mask: SavedTensor::save(&mask) }))?;
        Ok(out)
    }
}

impl Tensor {
    /// Dropout's mask for this tensor: `1/(1-p)` where an element is kept,
    /// 0 where it is dropped, one uniform draw per element in row-major
    /// order, from the global generator (eager `dropout`). A compiled graph
    /// draws the same bits in two steps (`take_dropout_draw`, then
    /// `dropout_mask_at`), so both consume the generator alike.
    pub(crate) fn dropout_mask(&self, p: f64) -> Result<Tensor> {
        let n = self.numel();
        if let Some(fill) = constant_dropout_mask(p) {
            let data = Storage::full("dropout", &self.device(), self.dtype(), n, fill)?;
            return Ok(Tensor::from_storage(data, Layout::contiguous(&self.shape())));
        }
        let scale = if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
        let dist = Distribution::Dropout { p, scale };
        let data = with_rng(|r| Storage::random("dropout", &self.device(), dist, self.dtype(), n, r))?;
        Ok(Tensor::from_storage(data, Layout::contiguous(&self.shape())))
    }
}

/// Dropout's mask when it is the same for every element (`p` is 0 or 1):
/// its value. No random number is drawn for it, as in PyTorch.
pub(crate) fn constant_dropout_mask(p: f64) -> Option<f64> {
    if p == 0.0 {
        Some(1.0)
    } else if p == 1.0 {
        Some(0.0)
    } else {
        None
    }
}

/// The generator's state, so a compiled call that is abandoned before its
/// effects (a fallback to the reference path) can give back the random
/// numbers it drew.
pub(crate) fn rng_snapshot() -> Option<Rng> {
    *GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Restores a state taken by [`rng_snapshot`].
pub(crate) fn rng_restore(state: Option<Rng>) {
    *GLOBAL_RNG.lock().unwrap_or_else(|e| e.into_inner()) = state;
}
