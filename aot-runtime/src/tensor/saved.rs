//! `SavedTensor`: a tensor kept for backward with the version it had, and
//! (with `test-hooks`) `saved_storage_bytes`, which measures what was
//! saved.

use crate::error::{AotError, Result};
use crate::tensor::Tensor;

/// A tensor saved for backward, with the version it had when saved.
#[derive(Clone)]
pub(crate) struct SavedTensor {
    pub(crate) t: Tensor,
    pub(crate) version: u64,
}

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    /// While [`saved_storage_bytes`] runs: every tensor saved for backward.
    static SAVE_LOG: std::cell::RefCell<Option<Vec<Tensor>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` and measures what autograd saved for backward meanwhile: the
/// bytes of the distinct storages the saved tensors keep alive. Eager ops
/// and compiled calls save through the same type, so the two can be
/// compared (the partitioner's saved bytes against eager autograd's).
#[cfg(any(test, feature = "test-hooks"))]
pub fn saved_storage_bytes<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let outer = SAVE_LOG.with(|l| l.replace(Some(Vec::new())));
    let r = f();
    let saved = SAVE_LOG.with(|l| l.replace(outer)).unwrap_or_default();
    let mut distinct: Vec<&Tensor> = Vec::new();
    for t in &saved {
        if !distinct.iter().any(|d| d.shares_storage_with(t)) {
            distinct.push(t);
        }
    }
    (r, distinct.iter().map(|t| t.storage_len() * t.dtype().size_in_bytes()).sum())
}

impl SavedTensor {
    /// Saves `t`'s current value (an alias: no copy) without its history.
    pub(crate) fn save(t: &Tensor) -> SavedTensor {
        #[cfg(any(test, feature = "test-hooks"))]
        SAVE_LOG.with(|l| {
            if let Some(log) = l.borrow_mut().as_mut() {
                log.push(t.clone());
            }
        });
        SavedTensor { t: t.alias_with_layout(t.layout()), version: t.version() }
    }
    pub(crate) fn get(&self, node: &str) -> Result<Tensor> {
        // A saved new value of an in-place op stands for the tensor it was
        // written into: that tensor's version is the one checked.
        let (now, expected) = match self.t.storage().written_into() {
            Some((target, at)) => (target.version(), at),
            None => (self.t.version(), self.version),
        };
        if now != expected {
            return Err(AotError::autograd(
                node,
                format!(
                    "one of the variables needed for gradient computation has been modified by an inplace operation: [{} {:?}], which is saved by {node}, is at version {now}; expected version {} instead",
                    self.t.dtype(),
                    self.t.shape(),
                    expected
                ),
            ));
        }
        Ok(self.t.clone())
    }
}
