use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct BatchNorm {
    weight: Tensor,
    eps: f64,
}

fn main() {}
