use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

impl Block {
    #[aot_fn]
    fn decay_(&mut self, s: f64) {
        self.w.mul_(s);
    }

    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.decay_(0.5);
        x.matmul(&self.w)
    }
}

fn main() {}
