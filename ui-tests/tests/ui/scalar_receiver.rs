use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, lr: f64) -> Tensor {
    x * lr.softmax(0)
}

fn main() {}
