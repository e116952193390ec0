use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
}

#[aot_fn]
fn forward(m: &Mlp, x: &Tensor) -> Tensor {
    x.matmul(&m.w3) + m.b1
}

fn main() {}
