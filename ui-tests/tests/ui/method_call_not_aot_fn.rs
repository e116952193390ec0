use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Block {
    w: Tensor,
}

impl Block {
    fn project(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w)
    }

    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.project(x)
    }
}

fn main() {}
