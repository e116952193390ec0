//! Small models shared by the composite-argument tests
//! (`tests/composite.rs`, `tests/graph_signature.rs`): a two-layer MLP as a
//! `TensorTree` struct and its mean-squared-error loss as an `#[aot_fn]`.

use aot_runtime::prelude::*;

/// A two-layer MLP's parameters: `x @ w1 + b1`, relu, `@ w2 + b2`.
#[derive(TensorTree)]
pub struct Mlp {
    pub w1: Tensor,
    pub b1: Tensor,
    pub w2: Tensor,
    pub b2: Tensor,
}

impl Mlp {
    /// Parameters for 3 inputs, 4 hidden units and 2 outputs, drawn from
    /// `randn` with seeds `seed..seed + 4`, in f64.
    pub fn new(seed: u64) -> Result<Mlp> {
        let t = |s: &[usize], k: u64| Tensor::randn(s, DType::F64, &Device::Cpu, seed + k);
        Ok(Mlp { w1: t(&[3, 4], 0)?, b1: t(&[4], 1)?, w2: t(&[4, 2], 2)?, b2: t(&[2], 3)? })
    }

    /// Independent copies of the values.
    pub fn copy(&self) -> Result<Mlp> {
        Ok(Mlp { w1: self.w1.copy()?, b1: self.b1.copy()?, w2: self.w2.copy()?, b2: self.b2.copy()? })
    }
}

/// The mean squared error of the MLP on `(x, y)`.
#[aot_fn]
pub fn mlp_loss(m: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(&m.w1) + m.b1).relu();
    (h.matmul(&m.w2) + m.b2 - y).square().mean()
}
