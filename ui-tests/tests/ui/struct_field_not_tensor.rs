use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
}

#[derive(TensorTree)]
struct Net {
    l1: Linear,
}

#[aot_fn]
fn forward(n: &Net, x: &Tensor) -> Tensor {
    x.matmul(&n.l1)
}

fn main() {}
