//! Eager reverse-mode autograd, candle-style: each recorded op is a `Node`
//! holding a `BackwardOp` (the data of the gradient rule) and the edges to
//! its inputs' histories; `engine.rs` does one topological walk. The tape
//! itself (nodes, edges, saved tensors, grad mode, recording) is data of
//! the tensor layer (`crate::tensor`), so that the ops record without
//! knowing the rules; this module runs it backward.
//!
//! The derivatives themselves are not written here: `backprop.rs` maps each
//! record to its rule in `aot_ir::transform::grad_rules` (the table the
//! joint graph is built from) and `grad_eval.rs` evaluates that rule on
//! tensors, through the evaluation layer (`crate::eval`), whose primitives
//! the rules share with the compiled executor. `eager_rules.rs` lists and
//! differentiates the few records the table does not cover.
//!
//! In-place ops rewrite history the way PyTorch does: the mutated tensor
//! gets a new `grad_fn` whose first edge is its old history; an in-place op
//! on a view gives the view's base a `CopySlices` node, and the view's own
//! `grad_fn` is regenerated from the base when its version is stale.

pub(crate) mod backprop;
mod eager_rules;
mod engine;
pub(crate) mod grad_eval;

pub use crate::tensor::{is_grad_enabled, no_grad, NoGradGuard};

use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// Computes gradients of this one-element tensor with respect to the
    /// leaves that require grad, accumulating into their `.grad`.
    pub fn backward(&self) -> Result<()> {
        engine::backward(self, None)
    }

    /// Backward with an explicit output gradient (same shape as `self`).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        engine::backward(self, Some(grad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{record_multi, CustomBackward, SavedTensor};
    use crate::{DType, Device};

    /// `(2x, x*x)` as one node.
    struct TwoOut {
        x: SavedTensor,
    }

    impl CustomBackward for TwoOut {
        fn name(&self) -> &'static str {
            "TwoOutBackward"
        }
        fn backward(&self, grads: &[Option<Tensor>], _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
            let x = self.x.get(self.name())?;
            let mut g = x.zeros_like()?;
            if let Some(g0) = &grads[0] {
                g = g.add(&g0.mul(2.0)?)?;
            }
            if let Some(g1) = &grads[1] {
                g = g.add(&g1.mul(&x)?.mul(2.0)?)?;
            }
            Ok(vec![Some(g)])
        }
    }

    #[test]
    fn a_node_with_two_outputs_gets_both_gradients() {
        let x = Tensor::full(&[3], 1.5, DType::F64, &Device::Cpu).unwrap().requires_grad_(true).unwrap();
        let outs = no_grad(|| -> Result<Vec<Tensor>> { Ok(vec![x.mul(2.0)?, x.mul(&x)?]) }).unwrap();
        assert!(record_multi(&outs, &[true, true], &[Some(&x)], Box::new(TwoOut { x: SavedTensor::save(&x) })).unwrap());
        assert_eq!(outs[0].grad_fn_name(), Some("TwoOutBackward"));
        let loss = outs[0].add(&outs[1]).unwrap().sum().unwrap();
        loss.backward().unwrap();
        // d/dx (2x + x^2) = 2 + 2x = 5
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![5.0; 3]);
        // Only the second output reaches the loss.
        x.set_grad(None);
        let outs = no_grad(|| -> Result<Vec<Tensor>> { Ok(vec![x.mul(2.0)?, x.mul(&x)?]) }).unwrap();
        record_multi(&outs, &[true, true], &[Some(&x)], Box::new(TwoOut { x: SavedTensor::save(&x) })).unwrap();
        outs[1].sum().unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![3.0; 3]);
        let err = outs[1].sum().unwrap().backward().unwrap_err().to_string();
        assert!(err.contains("second time"), "{err}");
    }
}
