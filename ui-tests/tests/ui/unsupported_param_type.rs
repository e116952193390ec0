use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, scales: Vec<f32>) -> Tensor {
    x.sin()
}

fn main() {}
