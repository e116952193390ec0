use aot_runtime::prelude::*;

#[derive(TensorTree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
}

#[aot_fn]
fn step(m: &Mlp, lr: f64) -> Tensor {
    m.w1.sub_(&(m.b1 * lr));
    m.b1.sum()
}

fn main() {}
