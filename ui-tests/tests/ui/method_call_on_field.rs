use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

impl Block {
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.matmul(&self.w)
    }
}

#[derive(TensorTree)]
struct Model {
    blk: Block,
}

impl Model {
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.blk.forward(x)
    }
}

fn main() {}
