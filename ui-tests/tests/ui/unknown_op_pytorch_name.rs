use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor, y: &Tensor) -> Tensor {
    x.concat(&y)
}

fn main() {}
