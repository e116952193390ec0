use aot_runtime::prelude::*;

#[aot_fn]
fn f(x: &Tensor) -> Tensor {
    x.add(&x.device())
}

fn main() {}
