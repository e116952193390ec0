use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    Tensor::cta(&[&x, &y], 0)
}

fn main() {}
