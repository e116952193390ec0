use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.powi(2)
}

fn main() {}
