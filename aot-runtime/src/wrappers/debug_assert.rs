//! `DebugAssertWrapper`: a call must have the `requires_grad` pattern its
//! specialisation was made for. The guard key contains the pattern, so a
//! mismatch means a cache bug; debug builds check every call and refuse
//! to run a plan made for other arguments.

use crate::arg::Arg;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;

#[derive(Debug)]
pub(crate) struct DebugAssertWrapper {
    /// Per argument, whether it required grad when the plan was made
    /// (PyTorch's `flat_requires_grad`).
    pub(crate) requires_grad: Vec<bool>,
}

impl DebugAssertWrapper {
    /// Pre-compile: records the key's `requires_grad` pattern.
    pub(crate) fn pre_compile(requires_grad: Vec<bool>) -> DebugAssertWrapper {
        DebugAssertWrapper { requires_grad }
    }

    /// Run time: the call's arguments against the recorded pattern.
    pub(crate) fn check(&self, func: &str, args: &[Arg]) -> Result<()> {
        for (i, (a, &compiled)) in args.iter().zip(&self.requires_grad).enumerate() {
            let now = a.tensor().is_some_and(Tensor::requires_grad);
            if now != compiled {
                let (is, assumed) = if now { ("requires", "doesn't") } else { ("doesn't require", "does") };
                return Err(AotError::Internal {
                    op: "DebugAssertWrapper",
                    msg: format!("`{func}`: argument {i} {is} grad, but the specialisation was compiled assuming it {assumed}"),
                });
            }
        }
        if args.len() != self.requires_grad.len() {
            return Err(AotError::Internal {
                op: "DebugAssertWrapper",
                msg: format!("`{func}`: {} arguments, but the specialisation was compiled for {}", args.len(), self.requires_grad.len()),
            });
        }
        Ok(())
    }
}
