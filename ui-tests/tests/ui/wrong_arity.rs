use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.sum_dim(&[0])
}

fn main() {}
