use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

impl Block {
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.forward(&x.matmul(&self.w))
    }
}

fn main() {}
