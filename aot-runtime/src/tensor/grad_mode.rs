//! Grad mode: whether ops record history (PyTorch's `torch.no_grad()` and
//! `set_grad_enabled`), one flag per thread.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True unless inside `no_grad`.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Disables gradient recording until dropped (PyTorch's `torch.no_grad()`).
pub struct NoGradGuard {
    prev: bool,
}

impl NoGradGuard {
    /// Turns gradient recording off; the drop restores the previous mode.
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoGradGuard {
        let prev = GRAD_ENABLED.with(|g| g.replace(false));
        NoGradGuard { prev }
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev));
    }
}

/// Runs `f` with gradient recording off.
///
/// ```
/// use aot_runtime::prelude::*;
/// let w = Tensor::ones(&[2], DType::F32, &Device::Cpu)?.requires_grad_(true)?;
/// aot_runtime::no_grad(|| w.sub_(0.5))?;   // an optimizer step on a leaf
/// assert!(w.is_leaf());
/// # Ok::<(), AotError>(())
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoGradGuard::new();
    f()
}

/// Runs `f` with gradient recording set to `enabled`.
pub(crate) fn with_grad_mode<R>(enabled: bool, f: impl FnOnce() -> R) -> R {
    let prev = GRAD_ENABLED.with(|g| g.replace(enabled));
    let r = f();
    GRAD_ENABLED.with(|g| g.set(prev));
    r
}
